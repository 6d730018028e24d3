"""The moving objects as columns (:class:`~lidar_fmu.osi.decode.MovingObjects`) and the scene brought to them all at
once: step after step, with objects appearing, disappearing, coming back, changing class (so mesh), sharing an id
or sending a size that is not finite, the scene holds what each object placed on its own gives (its class mesh in
its paint, its pose · diag(size), its semantic class), warned once; the columns read back as the objects the
protobuf decode makes; a frame's start poses kept as arrays read as the mapping they stand for."""
from __future__ import annotations

import math

import numpy as np
import pytest

from lidar_fmu.geometry.scene import Scene, box_mesh
from lidar_fmu.geometry.transforms import pose_matrices, pose_matrix
from lidar_fmu.osi.decode import MovingObjects, SensorViewError, decode_sensor_view
from lidar_fmu.pointcloud import ENVIRONMENT_ID_BASE
from lidar_fmu.scan.motion import FrameMotion, StartPoses
from lidar_fmu.scan.velocity import velocities_of_motion
from lidar_fmu.world.road_users import RIDER_HEIGHT_M, ROAD_USER_CLASSES, paint_of, road_user_mesh
from lidar_fmu.world.scene_update import SceneUpdater, semantic_of_class

HOST = 1
#: OSI MovingObject.Type: vehicle, pedestrian; VehicleClassification.Type: medium car, heavy truck, bicycle, bus
VEHICLE, PEDESTRIAN = 2, 3
CAR, TRUCK, BICYCLE, BUS = 4, 7, 11, 12


def _view(objects, time_s: float) -> bytes:
    """A SensorView of the host and ``objects``: (id, (x, y, z), yaw, (length, width, height), OSI type, vehicle
    type or None)."""
    from osi3.osi_sensorview_pb2 import SensorView

    view = SensorView()
    view.timestamp.seconds, view.timestamp.nanos = int(time_s), int(round(time_s % 1 * 1e9))
    view.host_vehicle_id.value = HOST
    gt = view.global_ground_truth
    for object_id, position, yaw, size, kind, vehicle in [(HOST, (0.0, 0.0, 0.75), 0.0, (4.5, 1.8, 1.5), VEHICLE,
                                                           CAR), *objects]:
        obj = gt.moving_object.add()
        obj.id.value = object_id
        obj.type = kind
        if vehicle is not None:
            obj.vehicle_classification.type = vehicle
        obj.base.position.x, obj.base.position.y, obj.base.position.z = position
        obj.base.orientation.yaw = yaw
        obj.base.dimension.length, obj.base.dimension.width, obj.base.dimension.height = size
        obj.base.velocity.x = 10.0
    return view.SerializeToString()


def _steps():
    """Four views: each object's (id, position, yaw, size, type, vehicle type)."""
    cars = {10: ((12.0, 3.0, 0.75), 0.1, (4.4, 1.8, 1.5), VEHICLE, CAR),
            11: ((-20.0, -3.5, 1.9), 3.0, (12.0, 2.5, 3.8), VEHICLE, TRUCK),
            12: ((6.0, 8.0, 0.9), -1.2, (0.6, 0.6, 1.8), PEDESTRIAN, None),
            13: ((30.0, 0.0, 0.75), 0.0, (4.6, 1.9, 1.5), VEHICLE, CAR),
            14: ((9.0, -6.0, 0.8), 1.0, (1.8, 0.6, 1.7), VEHICLE, BICYCLE),  # a rider (taller than RIDER_HEIGHT_M)
            15: ((9.0, 6.0, 0.5), 1.0, (1.8, 0.6, 1.0), VEHICLE, BICYCLE)}  # without one
    first = [(k, *v) for k, v in cars.items()] + [(12, (0.0, 40.0, 0.75), 0.0, (4.0, 1.8, 1.5), VEHICLE, CAR)]
    moved = {k: ((p[0] + 1.0, p[1], p[2]), yaw, size, kind, vehicle) for k, (p, yaw, size, kind, vehicle) in
             cars.items()}
    second = [(k, *v) for k, v in moved.items() if k != 11]  # 11 leaves
    second[2] = (13, moved[13][0], 0.0, (12.0, 2.6, 3.2), VEHICLE, BUS)  # 13 becomes a bus: another mesh
    second.append((16, (50.0, 3.0, 0.75), 0.2, (4.2, 1.7, 1.4), VEHICLE, CAR))  # 16 comes
    third = [(k, *v) for k, v in moved.items()]  # 11 comes back, 13 is a car again, 16 leaves
    third[4] = (14, moved[14][0], 1.0, (1.8, math.nan, 1.7), VEHICLE, BICYCLE)  # a size that is not finite
    return [first, second, third, third]


def _expected(updater: SceneUpdater, frame) -> dict:
    """id → (mesh, instance pose, semantic class) of each object placed on its own, by the rules (the first of an id,
    not the host, a usable size): its class mesh in its paint, else the unit box; pose · diag(size)."""
    expected = {}
    for obj in frame.objects:
        if obj.id in expected or obj.id == HOST or not all(map(math.isfinite, obj.dimension_m)):
            continue
        mesh = None
        if obj.object_class in ROAD_USER_CLASSES:
            mesh = road_user_mesh(obj.object_class, paint_of(obj.id), obj.dimension_m[2] >= RIDER_HEIGHT_M)
        pose = pose_matrices([obj.position_m], [obj.orientation_rad])[0]
        pose[:3, :3] *= np.asarray(obj.dimension_m)[None, :]
        expected[obj.id] = (mesh or updater.unit_box, pose, semantic_of_class(obj.object_class))
    return expected


def test_objects_placed_all_at_once_step_after_step_are_each_as_placed_alone():
    warnings: list[str] = []
    updater = SceneUpdater(Scene(), warn=warnings.append)
    scene = updater.scene
    meshes_of_13 = []
    for k, objects in enumerate(_steps()):
        frame = decode_sensor_view(_view(objects, 0.1 * k))
        updater.apply(frame)
        expected = _expected(updater, frame)
        placed = sorted(int(i) for i in scene.instance_ids if i < ENVIRONMENT_ID_BASE)
        assert placed == sorted(expected)
        for object_id, (mesh, pose, semantic) in expected.items():
            index = scene.indices_of([object_id])[0]
            assert scene.meshes[scene.instance_mesh_index[index]] is mesh
            np.testing.assert_array_equal(scene.pose_of(object_id), pose)
            assert scene.instance_semantic[index] == semantic
        meshes_of_13.append(expected[13][0])
    assert meshes_of_13[0] is not meshes_of_13[1] and meshes_of_13[2] is meshes_of_13[0]  # car, bus, car
    assert road_user_mesh("bicycle", paint_of(14), True) is not road_user_mesh("bicycle", paint_of(14), False)
    # the duplicate id once, the size that is not finite once (in two steps)
    assert sum("12 appears more than once" in w for w in warnings) == 1
    assert sum("moving_object 14 dimension" in w for w in warnings) == 1, warnings
    assert all("\n" not in w for w in warnings)


def test_objects_as_boxes_are_all_the_unit_box():
    updater = SceneUpdater(Scene(), objects="boxes")
    frame = decode_sensor_view(_view(_steps()[0], 0.0))
    updater.apply(frame)
    scene = updater.scene
    ids = [int(i) for i in scene.instance_ids if i < ENVIRONMENT_ID_BASE]
    assert sorted(ids) == [10, 11, 12, 13, 14, 15]
    assert all(scene.meshes[scene.instance_mesh_index[scene.indices_of([i])[0]]] is updater.unit_box for i in ids)


def test_a_position_that_is_not_finite_rejects_the_view_in_one_line_naming_the_object():
    objects = _steps()[0]
    objects[3] = (13, (math.nan, 0.0, 0.75), 0.0, (4.6, 1.9, 1.5), VEHICLE, CAR)
    with pytest.raises(SensorViewError) as error:
        decode_sensor_view(_view(objects, 0.0))
    assert str(error.value).startswith("moving_object 13 position contains NaN") and "\n" not in str(error.value)


def test_the_columns_read_back_as_the_objects_they_were_made_of():
    frame = decode_sensor_view(_view(_steps()[0], 0.1))
    states = frame.objects
    again = MovingObjects.of_states(states)
    assert again.states() == states == [frame.moving.state(k) for k in range(len(frame.moving))]
    assert states[-1].id == 12 and frame.object(12) == states[3] != states[-1]  # (the first of an id)
    assert frame.object(99) is None
    assert [frame.moving.object_class(k) for k in range(len(states))] == [s.object_class for s in states]
    assert MovingObjects.of_states([]).states() == []


def test_start_poses_as_arrays_read_as_the_mapping_they_stand_for():
    scene = Scene()
    box = box_mesh(1.0, 1.0, 1.0)
    ends = {7: pose_matrix((5.0, 1.0, 0.0), (0.0, 0.0, 0.3)), 3: pose_matrix((-4.0, 2.0, 0.5)), 9: np.eye(4)}
    for object_id, pose in ends.items():
        scene.add_instance(object_id, box, pose)
    starts = {3: pose_matrix((-4.5, 2.0, 0.5)), 42: np.eye(4), 7: pose_matrix((4.0, 1.0, 0.0), (0.0, 0.0, 0.25))}
    columns = StartPoses(np.array(list(starts)), np.stack(list(starts.values())))
    assert list(columns) == list(starts) and len(columns) == 3
    assert all(np.array_equal(columns[k], v) for k, v in starts.items())
    by_dict = FrameMotion(0.0, 0.1, 0.0, np.eye(4), starts)
    by_columns = FrameMotion(0.0, 0.1, 0.0, np.eye(4), columns)
    for a, b in zip(by_dict.start_poses(), by_columns.start_poses()):
        np.testing.assert_array_equal(a, b)
    one, other = (velocities_of_motion(m, scene, pose_matrix((0.5, 0.0, 0.0))) for m in (by_dict, by_columns))
    for name in ("ids", "velocity_m_s", "spin_rad_s"):
        np.testing.assert_array_equal(getattr(one, name), getattr(other, name))
    assert list(one.ids) == [3, 7]  # (42 is not in the scene)
    np.testing.assert_allclose(one.velocity_m_s[0], (5.0, 0.0, 0.0))  # 0.5 m in 0.1 s
