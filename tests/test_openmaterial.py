"""ASAM OpenMATERIAL 3D assets (:mod:`lidar_fmu.geometry.openmaterial`): the standard's own example asset, and what a
model reference to one does in a co-simulation."""
import json
import os
import shutil
import struct
import warnings
import zlib

import numpy as np
import pytest
import trimesh

from lidar_fmu import Lidar, Scene
from lidar_fmu.geometry.scene import MeshError, load_mesh
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.physics.materials import ANGLES_DEG, load_database, surface_material

EXAMPLE = os.path.join(os.path.dirname(__file__), "data", "openmaterial", "example_asset.xoma")


def test_the_standards_example_asset_loads_with_its_mapped_materials():
    mesh = load_mesh(EXAMPLE)
    # the asset's box z 0…3 m (its origin at the bottom centre) becomes OSI's box-centred frame
    np.testing.assert_allclose(mesh.bounds, [[-1, -1, -1.5], [1, 1, 1.5]], atol=1e-6)
    names = np.array(mesh.material_names)[mesh.face_material]
    # Material_Cube takes its materials from the assignment texture's colours (the mapping's rgb codes); the
    # sphere's name maps to the aluminium file directly
    assert set(names) == {"openmaterial:example_material", "openmaterial:example_material_2"}
    assert (names == "openmaterial:example_material_2").sum() >= 1
    lidar = mesh.material_properties["openmaterial:example_material"]
    assert lidar.brdf is not None and lidar.brdf.shape == (905, 5) and "lidar_brdf" in lidar.source
    assert mesh.material_properties["openmaterial:example_material_2"].brdf is None  # it has no lidar table


def test_a_lidar_brdf_becomes_the_backscatter_angle_table_at_the_sensors_wavelength():
    props = load_mesh(EXAMPLE).material_properties["openmaterial:example_material"]
    material = surface_material(props, 905.0)
    rows = props.brdf
    back = rows[np.isclose(rows[:, 1], rows[:, 2])]  # exit zenith = incident zenith: back to the sensor
    for k, angle in enumerate(np.radians(ANGLES_DEG)):
        nearest = back[np.argmin(np.abs(np.abs(back[:, 1]) - angle))]
        assert material.angle_table[k] == pytest.approx(np.pi * nearest[4] * np.cos(angle), rel=1e-9)
    # a Lambertian BRDF ρ0/π gives ρ0·cos θ
    lambert = type(props)("lambert", np.array([[9.05e-7, -a, -a, 0.0, 0.4 / np.pi] for a in np.radians(ANGLES_DEG)]),
                          None, "test")
    np.testing.assert_allclose(surface_material(lambert, 905.0).angle_table, 0.4 * np.cos(np.radians(ANGLES_DEG)))
    retro = surface_material(type(props)("plate", None, 140.0, "test"), 905.0, load_database()["retroreflector"])
    assert retro.material_class == "retroreflective" and retro.angle_table[0] == pytest.approx(2 * 219.9)


def test_a_scan_reads_the_assets_own_materials():
    scene = Scene()
    scene.add_instance(1, load_mesh(EXAMPLE), pose_matrix((8.0, 0.0, 0.0)))
    lidar = Lidar(scene, "velodyne_vlp16")
    cloud = lidar.scan(pose_matrix((0.0, 0.0, 0.0)))
    assert len(cloud) > 100
    names = [m.name for m in lidar.materials.database.materials if m.name.startswith("openmaterial:")]
    assert len(names) == 1 and lidar.materials.database[names[0]].angle_table is not None
    # the example table covers 86–90° only: its values stand for every angle, dark
    assert cloud.points["reflectivity"].max() < 0.01


def _write_asset(folder, name, box_z, model_turn=None, extra=None):
    """A 4 × 2 × 1.5 m box model (front +x, z up in the standard's frame) exported as Blender does (Y up)."""
    box = trimesh.creation.box(extents=(4.0, 2.0, 1.5))
    box.apply_translation((0.0, 0.0, 0.75))  # the reference frame: the bottom centre
    blender = np.array([[1, 0, 0], [0, 0, 1], [0, -1, 0]])  # our (x, y, z) → glTF (X, Y, Z) = (x, z, −y)
    turn = np.eye(3) if model_turn is None else model_turn
    box.vertices = box.vertices @ (turn @ blender).T
    box.export(folder / f"{name}.glb")
    asset = {"metadata": {"name": name, "assetType": "object", "objectClass": "vehicle",
                          "boundingBox": {"x": [-2, 2], "y": [-1, 1], "z": [0, box_z]}}} | (extra or {})
    (folder / f"{name}.xoma").write_text(json.dumps(asset))


def test_the_model_is_turned_as_its_exporter_turned_it_and_centred_for_osi(tmp_path):
    _write_asset(tmp_path, "blender", 1.5)
    np.testing.assert_allclose(load_mesh(tmp_path / "blender.xoma").bounds, [[-2, -1, -0.75], [2, 1, 0.75]],
                               atol=1e-6)
    spec_turn = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]]) @ np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]])
    _write_asset(tmp_path, "spec", 1.5, model_turn=spec_turn)  # front along glTF +Z, as the glTF spec has it
    np.testing.assert_allclose(load_mesh(tmp_path / "spec.xoma").bounds, [[-2, -1, -0.75], [2, 1, 0.75]], atol=1e-6)


@pytest.mark.parametrize("damage, message", [
    ("no_model", "no glTF model"), ("fbx", "not glTF"), ("mapping", "material mapping 'missing.xomm'"),
    ("metadata", "holds a JSON list, not an object")])
def test_an_asset_that_cannot_be_used_is_refused_in_one_line(tmp_path, damage, message):
    _write_asset(tmp_path, "car", 1.5, extra={"materialMappingUri": "missing.xomm"} if damage == "mapping" else None)
    if damage in ("no_model", "fbx"):
        (tmp_path / "car.glb").unlink()
        if damage == "fbx":
            (tmp_path / "car.fbx").write_bytes(b"Kaydara FBX Binary")
    if damage == "metadata":
        (tmp_path / "car.xoma").write_text("[1, 2]")
    with pytest.raises(MeshError, match=message) as info:
        load_mesh(tmp_path / "car.xoma")
    assert "car.xoma" in str(info.value) and "\n" not in str(info.value)


def test_a_model_reference_to_an_openmaterial_asset_places_it_as_osi_says(tmp_path):
    from helpers.osi_views import sensor_view
    from lidar_fmu.cosim.sensor_model import OsiSensorModel

    shutil.copytree(os.path.dirname(EXAMPLE), tmp_path / "assets")
    view = sensor_view([(7, (10.0, 0.0, 1.5), (0, 0, 0), (2.0, 2.0, 3.0), "example_asset.xoma")])
    model = OsiSensorModel(sensor="velodyne_vlp16", assets_dir=str(tmp_path / "assets"), environment="none",
                           warn=(warnings := []).append)
    assert model.step(view, 0.1).valid and warnings == []
    assert model.scene.mesh_of(7).name == "example_asset.xoma"
    assert 7 in set(model.last_cloud.points["object_id"].tolist())


def _example_copy(tmp_path):
    folder = tmp_path / "assets"
    shutil.copytree(os.path.dirname(EXAMPLE), folder)
    return folder


@pytest.mark.parametrize("file, content, message", [
    ("example_mapping.xomm", "[1, 2]", "example_mapping.xomm: it holds a JSON list, not an object"),
    ("example_material.xomp", "[]", "example_material.xomp: it holds a JSON list, not an object"),
    ("example_material_lidar_brdf.xompt", '{"metadata": "lidar", "brdf": {}}',
     "example_material_lidar_brdf.xompt: 'metadata' is a JSON str, not an object"),
    ("example_material.xomp", '{"materialProperties": {"brdfUris": 7}}', "'brdfUris' is a JSON int, not a list"),
    ("example_material.xomp", '{"materialProperties": {"retroreflectivityData": [1]}}',
     "'retroreflectivityData' is a JSON list, not an object")])
def test_material_files_of_the_wrong_shape_are_refused_in_one_line(tmp_path, file, content, message):
    folder = _example_copy(tmp_path)
    (folder / file).write_text(content)
    with pytest.raises(MeshError, match=message) as info:
        load_mesh(folder / "example_asset.xoma")
    assert "\n" not in str(info.value)


def test_a_model_linked_from_outside_the_assets_folder_is_refused(tmp_path):
    folder = _example_copy(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("example_asset.gltf", "example_asset.bin", "checker.png"):
        (folder / name).rename(outside / name)
    (folder / "example_asset.gltf").symlink_to(outside / "example_asset.gltf")
    with pytest.raises(MeshError, match="glTF model 'example_asset.gltf' of .*example_asset.xoma") as info:
        load_mesh(folder / "example_asset.xoma")
    assert "\n" not in str(info.value)


def _png_header(width: int, height: int) -> bytes:
    """A PNG that says it is ``width`` × ``height`` grey pixels and holds no pixel data (a bomb's header)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b""))


@pytest.mark.parametrize("width, height", [(5000, 4000), (13000, 13000), (20000, 20000)])
def test_an_assignment_texture_of_too_many_pixels_is_refused_before_it_is_decoded(tmp_path, width, height):
    """Above the bound (20 Mpx), above PIL's warning (169 Mpx) and above its error (400 Mpx): one line each, and
    no warning of PIL's reaches stderr."""
    folder = _example_copy(tmp_path)
    (folder / "checker_xom.png").write_bytes(_png_header(width, height))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning escaping would fail the test
        with pytest.raises(MeshError, match="checker_xom.png: more than 16,777,216 pixels") as info:
            load_mesh(folder / "example_asset.xoma")
    assert "\n" not in str(info.value)
