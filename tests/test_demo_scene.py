"""Procedural demo street: determinism, size, materials and car placement."""
import json
import os

import numpy as np
import pytest

from lidar_fmu import load_mesh
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.pointcloud import ENVIRONMENT_ID_BASE
from lidar_fmu.tools import demo_scene
from lidar_fmu.tools.demo_scene import LAYOUT_FILE, ROAD_HALF_WIDTH_M, ensure_street, generate_street, load_street_scene

STREET_MATERIALS = {
    "asphalt", "road_marking_white", "concrete_sidewalk", "concrete_curb", "grass", "facade_plaster",
    "facade_brick", "window_glass", "roof_tar", "metal_pole", "tree_bark", "tree_leaves", "sign_face",
}
CAR_PART_MATERIALS = {"car_glass", "tyre_rubber", "wheel_rim", "headlight_glass", "taillight_red"}


@pytest.fixture(scope="module")
def street_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("street")
    generate_street(out, seed=0)
    return out


@pytest.fixture(scope="module")
def street(street_dir):
    return load_street_scene(street_dir)


def _files(directory):
    return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))}


def _car_world_vertices(scene, car):
    pose = pose_matrix(car["position_m"], car["orientation_rad"])
    mesh = scene.mesh_of(car["id"])
    return mesh.vertices.astype(float) @ pose[:3, :3].T + pose[:3, 3]


def test_same_seed_gives_identical_files(street_dir, tmp_path):
    generate_street(tmp_path, seed=0)
    first, second = _files(street_dir), _files(tmp_path)
    assert sorted(first) == sorted(second)
    assert {"street.obj", "street.mtl", "car_sedan.obj", "car_suv.obj", "car_van.obj", LAYOUT_FILE} <= set(first)
    for name in first:
        assert first[name] == second[name], name


def test_other_seed_moves_cars(street_dir, tmp_path):
    other = generate_street(tmp_path, seed=1)
    base = json.loads((street_dir / LAYOUT_FILE).read_text())
    assert [c["position_m"] for c in other["cars"]] != [c["position_m"] for c in base["cars"]]


def test_placed_triangles(street):
    scene, layout = street
    environment = scene.mesh_of(ENVIRONMENT_ID_BASE)
    assert environment.triangle_count >= 350_000
    assert scene.triangle_count >= 500_000
    assert scene.triangle_count == layout["triangles"]["total"]
    assert environment.triangle_count == layout["triangles"]["environment"]


def test_scene_instances_share_car_meshes(street):
    scene, layout = street
    assert 30 <= len(layout["cars"]) <= 60
    assert len(scene) == 1 + len(layout["cars"])
    assert ENVIRONMENT_ID_BASE in scene
    used_models = {c["mesh"] for c in layout["cars"]}
    assert len(scene.meshes) == 1 + len(used_models)  # one mesh per car file, shared by instances
    for car in layout["cars"]:
        np.testing.assert_allclose(scene.pose_of(car["id"]), pose_matrix(car["position_m"], car["orientation_rad"]))


def test_named_materials(street, street_dir):
    scene, layout = street
    assert STREET_MATERIALS <= set(scene.mesh_of(ENVIRONMENT_ID_BASE).material_names)
    paints = set()
    for name in ("car_sedan", "car_suv", "car_van"):
        mesh = load_mesh(street_dir / f"{name}.obj")
        names = set(mesh.material_names)
        assert CAR_PART_MATERIALS <= names, name
        paints |= {n for n in names if n.startswith("car_paint_")}
        # Every material really covers triangles.
        assert set(np.unique(mesh.face_material)) == set(range(len(mesh.material_names)))
    assert {"car_paint_red", "car_paint_silver"} <= paints


def test_car_models_are_bbox_centred_and_sized(street_dir, street):
    _, layout = street
    for name, model in layout["car_models"].items():
        mesh = load_mesh(street_dir / model["file"])
        assert 5_000 <= mesh.triangle_count <= 20_000, name
        lo, hi = mesh.bounds
        np.testing.assert_allclose(0.5 * (lo + hi), 0.0, atol=1e-3)
        np.testing.assert_allclose(hi - lo, model["dimension_m"], atol=2e-3)
    length, width, height = layout["car_models"]["car_sedan"]["dimension_m"]
    assert abs(length - 4.7) < 0.15 and abs(width - 1.8) < 0.05 and abs(height - 1.45) < 0.05


def test_cars_stand_on_the_road_in_the_parking_lanes(street):
    scene, layout = street
    for car in layout["cars"]:
        v = _car_world_vertices(scene, car)
        assert abs(v[:, 2].min()) <= 0.05, car["id"]
        assert np.abs(v[:, 1]).max() < ROAD_HALF_WIDTH_M, car["id"]  # clear of the kerb
        assert np.abs(v[:, 1]).min() > 6.9, car["id"]  # not in a driving lane
        assert car["position_m"][2] == pytest.approx(car["dimension_m"][2] / 2)


def _footprint(car):
    """(4, 2) corners of the car's oriented bounding rectangle seen from above (m)."""
    length, width, _ = car["dimension_m"]
    yaw = car["orientation_rad"][2]
    c, s = np.cos(yaw), np.sin(yaw)
    local = 0.5 * np.array([[length, width], [-length, width], [-length, -width], [length, -width]])
    return local @ np.array([[c, s], [-s, c]]) + car["position_m"][:2]


def _rectangles_overlap(a, b):
    """Separating-axis test for two convex quadrilaterals."""
    for poly in (a, b):
        edges = np.roll(poly, -1, axis=0) - poly
        for axis in np.column_stack([-edges[:, 1], edges[:, 0]]):
            pa, pb = a @ axis, b @ axis
            if pa.max() < pb.min() or pb.max() < pa.min():
                return False
    return True


def test_cars_do_not_overlap(street):
    _, layout = street
    cars = layout["cars"]
    assert len({c["id"] for c in cars}) == len(cars)
    footprints = [_footprint(c) for c in cars]
    for i in range(len(cars)):
        for j in range(i + 1, len(cars)):
            assert not _rectangles_overlap(footprints[i], footprints[j]), (cars[i]["id"], cars[j]["id"])


def test_street_mesh_is_valid(street, street_dir):
    scene, layout = street
    mesh = scene.mesh_of(ENVIRONMENT_ID_BASE)
    assert np.all(np.isfinite(mesh.vertices))
    assert mesh.faces.min() >= 0 and mesh.faces.max() < len(mesh.vertices)
    tri = mesh.triangles().astype(float)
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    assert area.min() > 0.0
    lo, hi = mesh.bounds
    assert lo[0] <= -99.0 and hi[0] >= 99.0 and lo[2] == pytest.approx(0.0, abs=1e-6)
    text = (street_dir / "street.obj").read_text()
    assert text.count("\nf ") == layout["triangles"]["environment"]
    assert "nan" not in text.lower()


def test_ensure_street_reuses_complete_output(street_dir, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("regenerated a complete street")

    monkeypatch.setattr(demo_scene, "generate_street", fail)
    layout = ensure_street(street_dir, seed=0)
    assert layout == json.loads((street_dir / LAYOUT_FILE).read_text())


def test_ensure_street_regenerates_missing_or_stale(street_dir, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(demo_scene, "generate_street", lambda out, seed=0: calls.append((out, seed)) or {})
    ensure_street(tmp_path / "empty", seed=0)  # nothing there
    ensure_street(street_dir, seed=3)  # other seed
    partial = tmp_path / "partial"  # layout present but a mesh missing
    partial.mkdir()
    (partial / LAYOUT_FILE).write_bytes((street_dir / LAYOUT_FILE).read_bytes())
    ensure_street(partial, seed=0)
    assert [seed for _, seed in calls] == [0, 3, 0]


def test_demo_vehicles_carry_an_osi_vehicle_classification(street_dir):
    """OSI requires vehicle_classification on every TYPE_VEHICLE object (osi-validation flags it otherwise)."""
    from osi3.osi_object_pb2 import MovingObject
    from osi3.osi_sensorview_pb2 import SensorView

    from lidar_fmu.tools.demo import sensor_views

    with open(street_dir / LAYOUT_FILE, encoding="utf-8") as f:
        layout = json.load(f)
    classes = set()
    for data in sensor_views(layout, frames=2, step_s=0.1):
        view = SensorView.FromString(data)
        for obj in view.global_ground_truth.moving_object:
            assert obj.type == MovingObject.TYPE_VEHICLE
            assert obj.HasField("vehicle_classification"), obj.id.value
            classes.add(obj.vehicle_classification.type)
    assert classes <= {MovingObject.VehicleClassification.TYPE_CAR, MovingObject.VehicleClassification.TYPE_VAN}
    assert MovingObject.VehicleClassification.TYPE_VAN in classes
