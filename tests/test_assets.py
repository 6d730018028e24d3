"""Assets stay in ``assets``; no decompression bombs; mesh files with a size limit.

A SensorView's ``model_reference`` names a file strictly inside the assets
folder; anything else is refused with one warning that does not tell whether
an outside file exists, the object falls back to its bounding box and the frame
stays valid. Mesh files are read only in the documented formats, uncompressed,
up to a size limit, and what they pull in stays in their own folder.
"""
import bz2
import gzip
import io
import json
import os
import threading
import zipfile

import numpy as np
import pytest
import trimesh

from helpers.osi_views import sensor_view
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.errors import LidarFmuError
from lidar_fmu.geometry.assets import AssetError, max_mesh_bytes, resolve_inside
from lidar_fmu.geometry.scene import MeshError, Scene, load_mesh
from lidar_fmu.pointcloud import ENVIRONMENT_ID_BASE
from lidar_fmu.tools.cli import main
from lidar_fmu.world.scene_update import SceneUpdater

SPEC = {"horizontal_fov_deg": [-60, 60], "horizontal_resolution_deg": 1.0, "vertical_fov_deg": [-15, 15],
        "channels": 16, "max_range_m": 60}
DIMS = (3.0, 2.0, 2.0)  # the bounding box: not the unit sphere of ball meshes
OUTSIDE_MESSAGE = "must name a file inside the assets folder"


@pytest.fixture
def world(tmp_path):
    """tmp/assets (ball.stl, cars/ball.stl) beside tmp/outside (x.obj, secret.bin)."""
    assets, outside = tmp_path / "assets", tmp_path / "outside"
    (assets / "cars").mkdir(parents=True)
    outside.mkdir()
    sphere = trimesh.creation.icosphere(subdivisions=2, radius=1.0)
    sphere.export(assets / "ball.stl")
    sphere.export(assets / "cars" / "ball.stl")
    sphere.export(outside / "x.obj")
    return assets, outside


def step(assets, references, environment="", frames=2, **kwargs):
    """Step a model over ``frames`` SensorViews of one object per reference; (model, last result, warnings)."""
    warnings = []
    model = OsiSensorModel(sensor=SPEC, assets_dir=str(assets), warn=warnings.append, **kwargs)
    objects = [(20 + i, (12.0, 4.0 * i - 6.0, 1.0), (0, 0, 0), DIMS, ref) for i, ref in enumerate(references)]
    result = None
    for k in range(frames):
        result = model.step(sensor_view(objects, 0.1 * (k + 1), environment=environment), 0.1 * (k + 1))
        assert result.valid, result.message
    return model, result, warnings


def is_box(model, object_id) -> bool:
    return model.scene.mesh_of(object_id).material_names == ("osi_bounding_box",)


def refusals(warnings, reference):
    return [w for w in warnings if w.startswith(f"model_reference {reference!r}")]


# -- containment ---------------------------------------------------------------------------------------------------
def test_a_reference_inside_the_assets_folder_loads(world):
    assets, _ = world
    model, result, warnings = step(assets, ["ball.stl", "cars/ball.stl"])
    assert not is_box(model, 20) and not is_box(model, 21)
    assert model.scene.mesh_of(20).triangle_count == 320 and warnings == []
    assert result.count > 0


@pytest.mark.parametrize("reference", ["../outside/x.obj", "../outside/missing.obj", "cars/../../outside/x.obj",
                                       "/etc/passwd", "/proc/self/environ", "/nonexistent/x.obj", "~/x.obj"])
def test_references_out_of_the_assets_folder_are_refused_alike(world, reference):
    assets, _ = world
    model, result, warnings = step(assets, [reference], frames=3)
    refused = refusals(warnings, reference)
    assert len(refused) == 1 and len(warnings) == 1  # one warning per reference, not per step
    assert OUTSIDE_MESSAGE in refused[0] and "bounding box" in refused[0]
    # the same words whether or not the outside file exists: the warning is no oracle
    assert refused[0].replace(repr(reference), "R") == (
        refusals(step(assets, ["../outside/missing.obj"])[2], "../outside/missing.obj")[0]
        .replace(repr("../outside/missing.obj"), "R"))
    assert is_box(model, 20) and result.valid and result.count > 0


def test_outside_files_are_never_opened(world, monkeypatch):
    assets, outside = world
    opened = []
    real_open, real_os_open = open, os.open

    def spy_open(file, *args, **kwargs):
        opened.append(os.fspath(file) if isinstance(file, (str, os.PathLike)) else file)
        return real_open(file, *args, **kwargs)

    def spy_os_open(path, *args, **kwargs):
        opened.append(os.fspath(path))
        return real_os_open(path, *args, **kwargs)

    (outside / "paint.mtl").write_text("newmtl paint\nKd 1 0 0\nmap_Kd x.obj\n")
    (assets / "pulls.obj").write_text("mtllib ../outside/paint.mtl\nv 0 0 0\nv 1 0 0\nv 0 1 0\nusemtl paint\nf 1 2 3\n")
    monkeypatch.setattr("builtins.open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    model, _, _ = step(assets, ["/etc/passwd", "/proc/self/environ", "../outside/x.obj", "ball.stl", "pulls.obj"])
    assert not is_box(model, 24)  # the OBJ loads, without the MTL outside its folder
    paths = [p for p in opened if isinstance(p, str)]
    touched = [p for p in paths if p.endswith(("/etc/passwd", "/environ"))
               or os.path.realpath(p).startswith(os.path.realpath(outside))]
    assert touched == []
    assert any(isinstance(p, str) and p.endswith("ball.stl") for p in opened)  # the spy does see mesh reads


def test_links_out_of_the_assets_folder_are_refused(world):
    assets, outside = world
    os.symlink(outside / "x.obj", assets / "link.obj")
    os.symlink(outside / "missing.obj", assets / "dangling.obj")
    os.symlink(outside, assets / "linked_dir")
    os.symlink(assets / "ball.stl", assets / "inside_link.stl")  # a link that stays inside is fine
    refs = ["link.obj", "dangling.obj", "linked_dir/x.obj", "inside_link.stl"]
    model, _, warnings = step(assets, refs)
    for i, ref in enumerate(refs[:3]):
        assert len(refusals(warnings, ref)) == 1 and OUTSIDE_MESSAGE in refusals(warnings, ref)[0]
        assert is_box(model, 20 + i)
    assert not is_box(model, 23) and len(warnings) == 3


def test_an_assets_folder_reached_through_a_link_still_works(world, tmp_path):
    assets, _ = world
    os.symlink(assets, tmp_path / "assets_link")
    model, _, warnings = step(tmp_path / "assets_link", ["ball.stl", "../outside/x.obj"])
    assert not is_box(model, 20) and is_box(model, 21) and len(warnings) == 1


def test_non_regular_files_inside_are_refused_without_opening_them(world):
    assets, _ = world
    os.mkfifo(assets / "pipe.obj")
    (assets / "folder.obj").mkdir()
    done = {}

    def run():
        done["result"] = step(assets, ["pipe.obj", "folder.obj"])

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():  # it opened the FIFO and blocks: unblock it, then fail
        with open(assets / "pipe.obj", "wb"):
            pass
        pytest.fail("the FIFO was opened")
    model, _, warnings = done["result"]
    assert all("not a regular file" in w for w in warnings) and len(warnings) == 2
    assert is_box(model, 20) and is_box(model, 21)


def test_without_an_assets_folder_no_reference_is_loaded(world, monkeypatch):
    assets, _ = world
    monkeypatch.chdir(assets)  # not a fallback root: the current folder is nobody's choice
    model, _, warnings = step("", ["ball.stl"])
    assert is_box(model, 20) and len(warnings) == 1 and "no assets folder" in warnings[0]


def test_resolve_inside_directly(world):
    assets, outside = world
    assert resolve_inside(assets, "cars/ball.stl") == os.path.realpath(assets / "cars" / "ball.stl")
    for bad in ("", ".", "cars", "..", "../outside/x.obj", str(outside / "x.obj"), "a\x00b"):
        with pytest.raises(AssetError) as info:
            resolve_inside(assets, bad)
        assert isinstance(info.value, LidarFmuError)
    with pytest.raises(AssetError, match="not found"):
        resolve_inside(assets, "nothing.obj")


# -- the environment ------------------------------------------------------------------------------------------------
def test_a_sensor_view_environment_resolves_in_the_assets_folder(world):
    assets, outside = world
    trimesh.creation.box(extents=(200, 200, 0.2)).export(assets / "ground.ply")
    trimesh.creation.box(extents=(200, 200, 0.2)).export(outside / "ground.ply")
    model, _, warnings = step(assets, [], environment="ground.ply")
    assert ENVIRONMENT_ID_BASE in model.scene and warnings == []
    model, result, warnings = step(assets, [], environment="../outside/ground.ply")
    assert ENVIRONMENT_ID_BASE not in model.scene and result.valid
    assert len(warnings) == 1 and OUTSIDE_MESSAGE in warnings[0]


def test_a_configured_environment_may_lie_anywhere_but_pulls_in_nothing_from_outside(world, tmp_path):
    assets, outside = world
    trimesh.creation.box(extents=(200, 200, 0.2)).export(outside / "ground.ply")
    model = OsiSensorModel(sensor=SPEC, assets_dir=str(assets), environment=str(outside / "ground.ply"))
    assert ENVIRONMENT_ID_BASE in model.scene  # a parameter, chosen by whoever configures the model
    (tmp_path / "env").mkdir()
    write_gltf(tmp_path / "env" / "world.gltf", "../outside/secret.bin")
    (outside / "secret.bin").write_bytes(TRIANGLE_BUFFER)
    with pytest.raises(MeshError, match="outside the mesh's folder") as info:
        OsiSensorModel(sensor=SPEC, assets_dir=str(assets), environment=str(tmp_path / "env" / "world.gltf"))
    assert "world.gltf" in str(info.value)


# -- glTF external files --------------------------------------------------------------------------------------------
TRIANGLE_BUFFER = (np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32).tobytes()
                   + np.array([0, 1, 2], np.uint16).tobytes() + b"\0\0")


def write_gltf(path, uri, extra_accessors=()):
    tree = {
        "asset": {"version": "2.0"}, "scene": 0, "scenes": [{"nodes": [0]}], "nodes": [{"mesh": 0}],
        "meshes": [{"primitives": [{"attributes": {"POSITION": 0}, "indices": 1}]}],
        "buffers": [{"uri": uri, "byteLength": len(TRIANGLE_BUFFER)}],
        "bufferViews": [{"buffer": 0, "byteOffset": 0, "byteLength": 36},
                        {"buffer": 0, "byteOffset": 36, "byteLength": 6}],
        "accessors": [{"bufferView": 0, "componentType": 5126, "count": 3, "type": "VEC3",
                       "min": [0, 0, 0], "max": [1, 1, 0]},
                      {"bufferView": 1, "componentType": 5123, "count": 3, "type": "SCALAR"},
                      *extra_accessors],
    }
    path.write_text(json.dumps(tree))


def test_gltf_buffers_stay_in_the_meshs_folder(world):
    assets, outside = world
    (outside / "secret.bin").write_bytes(TRIANGLE_BUFFER)
    (assets / "inside.bin").write_bytes(TRIANGLE_BUFFER)
    write_gltf(assets / "ok.gltf", "inside.bin")
    write_gltf(assets / "escape.gltf", "../outside/secret.bin")
    write_gltf(assets / "escape_missing.gltf", "../outside/nothing.bin")
    write_gltf(assets / "absolute.gltf", str(outside / "secret.bin"))
    assert load_mesh(assets / "ok.gltf").triangle_count == 1
    refs = ["escape.gltf", "escape_missing.gltf", "absolute.gltf"]
    model, _, warnings = step(assets, refs, frames=3)
    assert len(warnings) == 3
    for i, ref in enumerate(refs):
        (warning,) = refusals(warnings, ref)
        assert "outside the mesh's folder" in warning and is_box(model, 20 + i)
    # existing and missing outside buffers read alike
    assert refusals(warnings, "escape.gltf")[0].replace("secret", "X").replace("escape.gltf", "E") == \
        refusals(warnings, "escape_missing.gltf")[0].replace("nothing", "X").replace("escape_missing.gltf", "E")


def test_the_secret_next_door_with_the_same_name_is_not_read(world, tmp_path):
    """A buffer URI '../secret.bin' may fall back to 'secret.bin' inside the folder, never to the one above it."""
    assets, _ = world
    (tmp_path / "secret.bin").write_bytes(TRIANGLE_BUFFER)
    write_gltf(assets / "up.gltf", "../secret.bin")
    with pytest.raises(MeshError, match="outside the mesh's folder"):
        load_mesh(assets / "up.gltf")
    (assets / "secret.bin").write_bytes(TRIANGLE_BUFFER)
    assert load_mesh(assets / "up.gltf").triangle_count == 1  # trimesh's same-name fallback, inside


def test_gltf_accessors_that_ask_for_too_much_are_refused(world):
    assets, _ = world
    (assets / "inside.bin").write_bytes(TRIANGLE_BUFFER)
    bomb = {"componentType": 5126, "count": 10**9, "type": "MAT4"}  # 64 GB of zeros, no bufferView
    write_gltf(assets / "zeros.gltf", "inside.bin", [bomb])
    with pytest.raises(MeshError, match="accessor 2 .* over the limit"):
        load_mesh(assets / "zeros.gltf")


# -- compressed files and size -------------------------------------------------------------------------------------
def archives():
    zeros = b"\0" * 4_000_000  # a few MB that compress to a few KB
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("inner.obj", zeros)
    return {"bz2": bz2.compress(zeros), "gzip": gzip.compress(zeros), "zip": zipped.getvalue()}


@pytest.mark.parametrize("name, kind", [("bomb.obj", "bz2"), ("bomb.bz2", "bz2"), ("bomb.stl", "zip"),
                                        ("bomb.zip", "zip"), ("bomb.ply", "gzip"), ("bomb.tar.gz", "gzip"),
                                        ("bomb.glb", "zip")])
def test_compressed_meshes_are_refused_before_unpacking(world, name, kind):
    assets, _ = world
    data = archives()[kind]
    assert len(data) < 50_000
    (assets / name).write_bytes(data)
    model, result, warnings = step(assets, [name])
    (warning,) = refusals(warnings, name)
    assert "compressed" in warning and is_box(model, 20) and result.valid


def test_only_documented_formats_are_read(world):
    assets, _ = world
    trimesh.creation.box().export(assets / "box.off")
    with pytest.raises(MeshError, match=r"not a supported mesh format \(use .obj, .gltf, .glb, .ply, .stl\)"):
        load_mesh(assets / "box.off")
    for suffix in (".obj", ".gltf", ".glb", ".ply", ".stl"):
        trimesh.creation.box().export(assets / f"box{suffix}")
        assert load_mesh(assets / f"box{suffix}").triangle_count == 12


def test_the_size_limit_is_documented_configurable_and_says_why(world, monkeypatch):
    assets, _ = world
    monkeypatch.delenv("LIDAR_FMU_MAX_MESH_MB", raising=False)
    assert max_mesh_bytes() == 256_000_000
    size = os.path.getsize(assets / "ball.stl")  # 16 084 bytes
    with pytest.raises(MeshError, match=r"ball.stl: the file is .* over the limit of 0.01 MB .*LIDAR_FMU_MAX_MESH_MB"):
        load_mesh(assets / "ball.stl", max_bytes=10_000)
    assert load_mesh(assets / "ball.stl", max_bytes=size).triangle_count == 320
    monkeypatch.setenv("LIDAR_FMU_MAX_MESH_MB", "0.01")
    model, result, warnings = step(assets, ["ball.stl"])
    assert is_box(model, 20) and result.valid
    (warning,) = refusals(warnings, "ball.stl")
    assert "over the limit of 0.01 MB" in warning
    monkeypatch.setenv("LIDAR_FMU_MAX_MESH_MB", "lots")
    with pytest.raises(MeshError, match="LIDAR_FMU_MAX_MESH_MB must be a positive number"):
        load_mesh(assets / "ball.stl")


def test_the_limit_counts_what_a_mesh_pulls_in(world):
    assets, _ = world
    (assets / "inside.bin").write_bytes(TRIANGLE_BUFFER + b"\0" * 20_000)
    write_gltf(assets / "big_buffer.gltf", "inside.bin")
    gltf_size = os.path.getsize(assets / "big_buffer.gltf")
    with pytest.raises(MeshError, match="'inside.bin' is .* over the limit"):
        load_mesh(assets / "big_buffer.gltf", max_bytes=gltf_size + 10_000)
    assert load_mesh(assets / "big_buffer.gltf", max_bytes=gltf_size + 30_000).triangle_count == 1


def test_scene_updater_caches_a_refusal(world):
    assets, _ = world
    warnings = []
    updater = SceneUpdater(Scene(), str(assets), warn=warnings.append)
    for _ in range(3):
        assert updater.mesh_for_reference("../outside/x.obj") is None
    assert len(warnings) == 1


# -- the command line ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, kind", [("x.zip", "zip"), ("x.obj", "bz2")])
def test_cli_scan_of_an_archive_is_a_one_line_error(world, tmp_path, capsys, name, kind):
    path = tmp_path / name
    path.write_bytes(archives()[kind])
    code = main(["scan", "--mesh", str(path), "--sensor", "velodyne_vlp16", "-o", str(tmp_path / "o.pcd")])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("lidar-fmu: error:")
    assert name in lines[0] and "compressed" in lines[0] and "Traceback" not in err


# -- per-face reflectivity in PLY files ------------------------------------------------------------------------------
#: a 2 × 1 m strip of a quad (corners 0 1 2 3) and a quad beside it (1 4 5 2), and a triangle beyond (4 6 5)
PLY_CORNERS = [(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0), (2, 0, 0), (2, 1, 0), (3, 0.5, 0)]
PLY_POLYGONS = [(0, 1, 2, 3), (1, 4, 5, 2), (4, 6, 5)]


def ply_header(kind, polygons, binary=False):
    return ["ply", f"format {'binary_little_endian' if binary else 'ascii'} 1.0", f"element vertex {len(PLY_CORNERS)}",
            "property float x", "property float y", "property float z", f"element face {len(polygons)}",
            "property list uchar int vertex_indices", f"property {kind} reflectivity", "end_header"]


def write_ply(path, values, kind="float", polygons=PLY_POLYGONS):
    lines = ply_header(kind, polygons) + [" ".join(map(str, c)) for c in PLY_CORNERS]
    lines += [f"{len(p)} {' '.join(map(str, p))} {v}" for p, v in zip(polygons, values)]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_binary_ply(path, values, kind, code, polygons):
    import struct

    data = ("\n".join(ply_header(kind, polygons, binary=True)) + "\n").encode()
    data += b"".join(struct.pack("<3f", *c) for c in PLY_CORNERS)
    data += b"".join(struct.pack(f"<B{len(p)}i{code}", len(p), *p, v) for p, v in zip(polygons, values))
    path.write_bytes(data)
    return path


def test_a_ply_face_property_reflectivity_is_kept_per_triangle(tmp_path):
    """Each polygon is fanned into triangles that keep its value (trimesh alone drops the property); a float is
    taken as it is, a uchar as n/255, ASCII or binary."""
    mesh = load_mesh(write_ply(tmp_path / "mixed.ply", (0.1, 0.5, 0.9)))
    assert mesh.faces.tolist() == [[0, 1, 2], [0, 2, 3], [1, 4, 5], [1, 5, 2], [4, 6, 5]]
    np.testing.assert_array_equal(mesh.face_reflectance, np.float32([0.1, 0.1, 0.5, 0.5, 0.9]))
    np.testing.assert_allclose(mesh.vertices, PLY_CORNERS)
    quads = PLY_POLYGONS[:2]
    as_bytes = load_mesh(write_binary_ply(tmp_path / "bytes.ply", (0, 255), "uchar", "B", quads))
    np.testing.assert_allclose(as_bytes.face_reflectance, [0, 0, 1, 1])
    as_floats = load_mesh(write_binary_ply(tmp_path / "floats.ply", (0.25, 0.75), "float", "f", quads))
    np.testing.assert_allclose(as_floats.face_reflectance, [0.25, 0.25, 0.75, 0.75])
    assert as_floats.faces.tolist() == mesh.faces[:4].tolist()
    plain = trimesh.creation.box()
    plain.export(tmp_path / "plain.ply")
    assert load_mesh(tmp_path / "plain.ply").face_reflectance is None  # meshes without it: the material's


@pytest.mark.parametrize(("values", "kind", "shown"), [
    ((0.1, 1.5, 0.2), "float", "face 1 has 1.5"),
    ((0.1, 0.2, -0.01), "double", "face 2 has -0.01"),
    (("nan", 0.2, 0.3), "float", "face 0 has nan"),
    ((1, 2, 3), "int", "is int32"),
])
def test_a_bad_ply_reflectivity_is_refused_in_one_line(tmp_path, capsys, values, kind, shown):
    path = write_ply(tmp_path / "bad.ply", values, kind)
    with pytest.raises(MeshError) as error:
        load_mesh(path)
    message = str(error.value)
    assert "bad.ply" in message and "'reflectivity'" in message and shown in message and "\n" not in message
    code = main(["scan", "--mesh", str(path), "--sensor", "velodyne_vlp16", "-o", str(tmp_path / "o.pcd")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "reflectivity" in lines[0] and not (tmp_path / "o.pcd").exists()


def test_a_ply_by_model_reference_keeps_its_face_reflectances(world):
    """Through a SensorView: the object's mesh comes from the assets folder with its per-face values, and each
    return reads its face's ρ0·cos θ."""
    assets, _ = world
    # the strip stood up as a wall 3 m wide facing the sensor: x = 0 in the object's frame, y along the strip
    corners = [(0, -1.5 + y, z) for y, z in ((0, -1), (1, -1), (1, 1), (0, 1), (2, -1), (2, 1), (3, 0))]
    lines = ply_header("float", PLY_POLYGONS[:2]) + [" ".join(map(str, c)) for c in corners]
    lines += ["4 0 1 2 3 0.2", "4 1 4 5 2 0.7"]
    (assets / "wall.ply").write_text("\n".join(lines) + "\n")
    model = OsiSensorModel(sensor=SPEC, assets_dir=str(assets), materials="", warn=print)
    result = model.step(sensor_view([(20, (12.0, 0.0, 0.0), (0, 0, 0), DIMS, "wall.ply")], 0.1, host=None), 0.1)
    assert result.valid, result.message
    points = model.last_clouds[0].points
    points = points[(points["object_id"] == 20) & (np.abs(points["y"] + 0.5) > 0.05)]  # off the seam at y = -0.5
    rho0 = points["reflectivity"] / (points["x"] / points["range"])
    right = points["y"] < -0.5
    assert right.sum() > 10 and (~right).sum() > 10
    np.testing.assert_allclose(rho0[right], 0.2, rtol=1e-5)
    np.testing.assert_allclose(rho0[~right], 0.7, rtol=1e-5)
