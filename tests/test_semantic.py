"""Semantic classes: every return says what it hit (road, lane marking, kerb, …, car, pedestrian), whichever caster
cast it, and every file carries it beside the point record."""
import numpy as np
import pytest
from osi3.osi_sensorview_pb2 import SensorView

from helpers.road_views import road_view, semantic_probes
from lidar_fmu import Lidar, Scene, box_mesh
from lidar_fmu.geometry.semantic import (
    CAR,
    ROAD,
    SEMANTIC_CLASSES,
    SEMANTIC_TABLE,
    TERRAIN,
    UNLABELLED,
    WEATHER,
    asprs_classes,
)
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.io import read_pcd, write_las, write_pcd, write_ply
from lidar_fmu.osi.decode import decode_sensor_view
from lidar_fmu.osi.ground_truth import decode_road
from lidar_fmu.physics.weather import WEATHER_OBJECT_ID
from lidar_fmu.raycast import RayBatch
from lidar_fmu.world import build_road_world
from lidar_fmu.world.scene_update import SceneUpdater


def road_scene(view: bytes) -> Scene:
    scene = Scene()
    SceneUpdater(scene).apply(decode_sensor_view(view))
    return scene


def probe_returns(scene: Scene, backend: str, origins, directions):
    lidar = Lidar(scene, "ouster_os1_128", backend=backend)
    return lidar.backend.returns(RayBatch.in_world(origins, directions, 100.0), lidar.return_model())


@pytest.fixture(scope="module")
def road():
    return road_scene(road_view())


@pytest.mark.parametrize("backend", ["embree", "embreex"])
def test_every_return_carries_the_class_of_what_its_ray_hit(road, backend):
    origins, directions, classes = semantic_probes()
    returns = probe_returns(road, backend, origins, directions)
    assert np.array_equal(returns.ray_index, np.arange(len(classes)))  # every probe returned
    assert [SEMANTIC_CLASSES[c] for c in returns.semantic] == classes


def test_a_lane_and_a_vehicle_of_one_id_are_told_apart_by_their_class():
    """esmini numbers lanes and vehicles each from 0: lane 12 and vehicle 12 return the same object_id."""
    view = SensorView.FromString(road_view())
    car = next(o for o in view.global_ground_truth.moving_object if o.id.value == 2)
    car.id.value = 12  # the right-hand driving lane's id
    scene = road_scene(view.SerializeToString())
    origins = np.array([(5.0, -1.75, 8.0), (25.0, 1.75, 8.0)], np.float32)  # the lane, the car (its paint dark)
    returns = probe_returns(scene, "embree", origins, np.tile(np.float32((0, 0, -1)), (2, 1)))
    assert returns.points["object_id"].tolist() == [12, 12]
    assert returns.semantic.tolist() == [ROAD, CAR]


def test_every_face_the_road_builds_has_a_class():
    gt = SensorView.FromString(road_view()).global_ground_truth
    mesh = build_road_world(decode_road(gt.SerializeToString(), 0), 120.0).mesh
    assert mesh is not None and mesh.face_semantic is not None
    assert not np.any(mesh.face_semantic == UNLABELLED)


def test_weather_echoes_are_their_own_class():
    scene = Scene()
    scene.add_instance(1, box_mesh(0.2, 80.0, 40.0), pose_matrix((30.1, 0.0, 0.0)), TERRAIN)
    spec = {"preset": "ouster_os1_128", "horizontal_fov_deg": [30, -30], "horizontal_samples": 100,
            "weather": {"fog_visibility_m": 50.0}}
    cloud = Lidar(scene, spec, warn=lambda message: None).scan(np.eye(4))
    fog = cloud.points["object_id"] == WEATHER_OBJECT_ID
    assert fog.any() and cloud.semantic is not None
    assert np.all(cloud.semantic[fog] == WEATHER) and np.all(cloud.semantic[~fog] == TERRAIN)


@pytest.fixture(scope="module")
def cloud(road):
    lidar = Lidar(road, "velodyne_vlp16", backend="embree")
    return lidar.scan(pose_matrix((0.0, -1.75, 1.9)))


def test_pcd_ply_and_las_carry_the_class_of_every_point(cloud, tmp_path):
    import laspy

    assert cloud.semantic is not None and len(np.unique(cloud.semantic)) >= 5
    write_pcd(tmp_path / "c.pcd", cloud)
    assert np.array_equal(read_pcd(tmp_path / "c.pcd")["semantic"], cloud.semantic)
    write_ply(tmp_path / "c.ply", cloud)
    head, body = (tmp_path / "c.ply").read_bytes().split(b"end_header\n", 1)
    assert b"property uchar semantic" in head
    ply = np.frombuffer(body, np.dtype([(f.name, f.type) for f in _ply_fields(head)]))
    assert np.array_equal(ply["semantic"], cloud.semantic)
    write_las(tmp_path / "c.las", cloud)
    las = laspy.read(tmp_path / "c.las")
    assert np.array_equal(np.asarray(las["semantic"]), cloud.semantic)
    assert np.array_equal(np.asarray(las.classification), asprs_classes(cloud.semantic))
    assert set(np.asarray(las.classification).tolist()) >= {2, 11}  # ASPRS ground and road surface


def test_a_ros_bag_carries_the_class_of_every_point(cloud, tmp_path):
    from lidar_fmu.io.rosbag import RosbagWriter

    with RosbagWriter(tmp_path / "bag") as bag:
        bag.add_lidar("lidar")
        message = bag.point_cloud2(cloud, "lidar", 0)
    field = next(f for f in message.fields if f.name == "semantic")
    assert field.datatype == 2  # PointField UINT8
    data = np.asarray(message.data).reshape(-1, message.point_step)
    assert np.array_equal(data[:, field.offset], cloud.semantic)


def test_the_codes_table_maps_each_class_once():
    assert len(set(SEMANTIC_CLASSES)) == len(SEMANTIC_TABLE) == 21 and SEMANTIC_CLASSES[UNLABELLED] == "unlabelled"
    assert asprs_classes(np.array([ROAD, CAR, WEATHER, 200])).tolist() == [11, 1, 18, 1]


def _ply_fields(head: bytes):
    from collections import namedtuple

    field = namedtuple("field", "name type")
    types = {"float": "<f4", "double": "<f8", "int": "<i4", "uchar": "u1"}
    return [field(line.split()[2].decode(), types[line.split()[1].decode()])
            for line in head.splitlines() if line.startswith(b"property ")]
