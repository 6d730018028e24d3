"""Several lidars in one sensor model / FMU: one scene update, one cast per lidar, one lidar_sensor entry each."""
import json
import math

import numpy as np
import pytest
from osi3.osi_sensordata_pb2 import SensorData
from osi3.osi_sensorviewconfiguration_pb2 import SensorViewConfiguration

from helpers.osi_views import HOST_ID, sensor_view
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.geometry.transforms import pose_matrix, roll_pitch_yaw
from lidar_fmu.osi.config import rig_view_configuration
from lidar_fmu.osi.decode import decode_sensor_view
from lidar_fmu.sensors import SensorSpecError
from lidar_fmu.sensors.rig import load_rig

SPEC = {"horizontal_fov_deg": [-30, 30], "horizontal_resolution_deg": 2.0, "vertical_fov_deg": [-10, 5],
        "channels": 8, "max_range_m": 60, "motion_distortion": False}
FRONT = {"xyz_m": [3.0, 0.0, 1.2], "rpy_deg": [0, 0, 0]}
REAR = {"xyz_m": [-0.5, 0.0, 1.2], "rpy_deg": [0, 0, 180]}
RIG = {"sensors": [SPEC | {"mounting": FRONT, "sensor_id": 7}, SPEC | {"mounting": REAR}]}
# a car ahead and one behind the host (id, bbox-centre position, rpy, dimensions, model_reference)
OBJECTS = [(10, (15.0, 0.0, 0.75), (0.0, 0.0, 0.0), (4.0, 1.8, 1.5), ""),
           (11, (-14.0, 1.0, 0.75), (0.0, 0.0, 0.0), (4.0, 1.8, 1.5), "")]
HOST = (HOST_ID, (0.0, 0.0, 0.75), 0.0)


def test_rig_specs_in_every_form_and_errors_that_name_the_entry(tmp_path):
    path = tmp_path / "rig.yaml"
    path.write_text(json.dumps(RIG))
    for spec in (RIG, RIG["sensors"], str(path), json.dumps(RIG["sensors"])):
        rig = load_rig(spec)
        assert len(rig) == 2 and rig[0].sensor_id == 7 and rig[1].sensor_id is None
        np.testing.assert_allclose(rig[1].mounting_pose, pose_matrix((-0.5, 0, 1.2), (0, 0, math.pi)), atol=1e-12)
    single = load_rig("velodyne_vlp16")
    assert len(single) == 1 and single[0].mounting_pose is None
    with pytest.raises(SensorSpecError, match=r"sensors\[1\]: unknown sensor preset 'nope'"):
        load_rig({"sensors": [SPEC, "nope"]})
    with pytest.raises(SensorSpecError, match=r"sensors\[0\]\.mounting\.xyz_m must be three finite numbers"):
        load_rig({"sensors": [SPEC | {"mounting": {"xyz_m": [1, 2]}}]})
    with pytest.raises(SensorSpecError, match="non-empty list"):
        load_rig({"sensors": []})
    with pytest.raises(SensorSpecError, match="unknown key 'max_range_m'; known: sensors, name, description"):
        load_rig({"sensors": [SPEC], "max_range_m": 5})


def test_two_lidars_each_see_what_a_lone_lidar_at_their_mounting_sees():
    view = sensor_view(OBJECTS, time_s=0.1, host=HOST)
    rig = OsiSensorModel(sensor=RIG, sensor_id=3, environment="none")  # the objects alone (no ground plane)
    result = rig.step(view, 0.1)
    assert result.valid, result.message
    data = SensorData.FromString(bytes(result.sensor_data))
    assert len(data.feature_data.lidar_sensor) == 2
    front, rear = data.feature_data.lidar_sensor
    assert (front.header.sensor_id.value, rear.header.sensor_id.value) == (7, 3 + 1)
    assert data.sensor_id.value == 3 and data.mounting_position == front.header.mounting_position
    assert rear.header.mounting_position.orientation.yaw == pytest.approx(math.pi)
    assert result.count == len(front.detection) + len(rear.detection)
    seen = [{int(d.object_id.value) for d in lidar.detection} for lidar in (front, rear)]
    assert seen == [{10}, {11}]  # the front lidar sees the car ahead, the rear one the car behind
    for k, mounting in enumerate((FRONT, REAR)):
        alone = OsiSensorModel(sensor=SPEC, default_mounting_pose=pose_matrix(
            mounting["xyz_m"], np.radians(mounting["rpy_deg"])), sensor_id=3, environment="none")
        reference = SensorData.FromString(bytes(alone.step(view, 0.1).sensor_data)).feature_data.lidar_sensor[0]
        assert [d.SerializeToString() for d in data.feature_data.lidar_sensor[k].detection] == \
               [d.SerializeToString() for d in reference.detection]
        np.testing.assert_allclose(rig.last_sensor_poses[k], alone.last_sensor_pose, atol=1e-12)


def test_the_sensor_views_per_lidar_mountings_win():
    from osi3.osi_sensorview_pb2 import SensorView

    view = SensorView.FromString(sensor_view(OBJECTS, time_s=0.1, host=HOST))
    for x in (2.5, 0.0):  # lidar 0 moved forward; lidar 1 given no mounting: its rig entry's
        lidar = view.lidar_sensor_view.add()
        if x:
            lidar.view_configuration.mounting_position.position.x = x
    frame = decode_sensor_view(view.SerializeToString())
    assert frame.lidar_mountings[0][0, 3] == 2.5 and frame.lidar_mountings[1] is None
    rig = OsiSensorModel(sensor=RIG)
    data = SensorData.FromString(bytes(rig.step(view.SerializeToString(), 0.1).sensor_data))
    front, rear = data.feature_data.lidar_sensor
    assert front.header.mounting_position.position.x == 2.5
    assert rear.header.mounting_position.position.x == -0.5


def test_the_config_request_asks_for_one_lidar_view_per_lidar():
    rig = load_rig(RIG)
    poses = [member.mounting_pose for member in rig]
    config = SensorViewConfiguration.FromString(
        rig_view_configuration([(m.sensor, pose, k) for k, (m, pose) in enumerate(zip(rig, poses))]))
    assert len(config.lidar_sensor_view_configuration) == 2
    rear = config.lidar_sensor_view_configuration[1]
    assert rear.mounting_position.position.x == -0.5 and rear.sensor_id.value == 1
    assert rear.number_of_rays_horizontal * rear.number_of_rays_vertical == len(rig[1].sensor.pattern)
    assert roll_pitch_yaw(poses[1])[2] == pytest.approx(math.pi)


def test_rig_ids_seeds_and_unused_broken_lidar_views():
    with pytest.raises(SensorSpecError, match="same sensor_id"):
        load_rig({"sensors": [SPEC | {"sensor_id": 4}, SPEC | {"sensor_id": 4}]})
    said = []
    OsiSensorModel(sensor={"sensors": [SPEC | {"noise": {"range_sigma_m": 0.01}}] * 2}, warn=said.append)
    assert any("same noise.seed" in message for message in said)
    from osi3.osi_sensorview_pb2 import SensorView

    view = SensorView.FromString(sensor_view(OBJECTS, time_s=0.1, host=HOST))
    view.lidar_sensor_view.add()  # entry 0: no mounting
    broken = view.lidar_sensor_view.add().view_configuration.mounting_position
    broken.position.x = float("nan")  # entry 1: unusable
    alone = OsiSensorModel(sensor=SPEC)  # one lidar: entry 1 is nobody's, the frame stays valid
    assert alone.step(view.SerializeToString(), 0.1).valid
    rig = OsiSensorModel(sensor=RIG)  # lidar 1 uses it: the step says which entry is wrong
    result = rig.step(view.SerializeToString(), 0.1)
    assert not result.valid and "lidar_sensor_view[1]" in result.message


def test_embree_rebuilds_do_not_leak_instance_geometry():
    """Each rebuild (instances come and go) used to keep every moving instance's Embree geometry, and through it
    the BVH of meshes no longer in the scene."""
    import trimesh

    from lidar_fmu import Lidar, Scene
    from lidar_fmu.geometry.scene import Mesh, box_mesh

    def rss_mb() -> float:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024

    scene = Scene()
    scene.add_instance(1, box_mesh(1.0, 1.0, 1.0), pose_matrix((20.0, 0.0, 0.0)))
    lidar = Lidar(scene, SPEC)
    grid = trimesh.creation.icosphere(subdivisions=6)  # 81,920 triangles: a BVH of ~10 MB
    before = None
    for k in range(12):
        mesh = Mesh(grid.vertices * 2.0, grid.faces, np.zeros(len(grid.faces), np.int32), ("m",), f"m{k}")
        scene.add_instance(2, mesh, pose_matrix((10.0, 0.0, 0.0)))  # a new mesh each time: a rebuild
        lidar.cast(np.eye(4))
        if k == 2:
            before = rss_mb()
    assert rss_mb() - before < 40  # leaking, nine rebuilds grew it by ~60 MB


def robot_config(lidars: int) -> dict:
    """A Project AirSim robot config as users save it: links, a camera and ``lidars`` lidars (front, rear)."""
    lidar = {"type": "lidar", "enabled": True, "parent-link": "Frame", "lidar-type": "generic_cylindrical",
             "number-of-channels": 8, "range": 60, "points-per-second": 14400, "horizontal-rotation-frequency": 10,
             "horizontal-fov-start-deg": 330, "horizontal-fov-end-deg": 30, "vertical-fov-lower-deg": -10,
             "vertical-fov-upper-deg": 5, "disable-self-hits": True, "report-no-return-points": False,
             "report-point-cloud": True}
    front = lidar | {"id": "front", "origin": {"xyz": "3.0 0 -1.2", "rpy-deg": "0 0 0"}}
    rear = lidar | {"id": "rear", "origin": {"xyz": "-0.5 0 -1.2", "rpy-deg": "0 0 180"}}
    return {"physics-type": "non-physics", "links": [{"name": "Frame"}], "joints": [],
            "sensors": [{"id": "cam", "type": "camera", "enabled": True, "parent-link": "Frame"}, front, rear][
                : 1 + lidars]}


@pytest.mark.parametrize("suffix", [".json", ".jsonc", ".yaml"])
def test_a_project_airsim_robot_config_is_a_rig_of_its_lidars(tmp_path, suffix):
    path = tmp_path / f"robot{suffix}"
    path.write_text(json.dumps(robot_config(2)))
    rig = load_rig(str(path))
    assert [m.sensor.name for m in rig] == ["front", "rear"] and all(m.sensor_id is None for m in rig)
    # what the FMU builds from its sensor parameter (the objects alone: no ground plane)
    model = OsiSensorModel(sensor=str(path), sensor_id=3, environment="none")
    result = model.step(sensor_view(OBJECTS, time_s=0.1, host=HOST), 0.1)
    assert result.valid, result.message
    front, rear = SensorData.FromString(bytes(result.sensor_data)).feature_data.lidar_sensor
    assert (front.header.sensor_id.value, rear.header.sensor_id.value) == (3, 4)
    assert front.header.mounting_position.position.x == pytest.approx(3.0)  # each lidar at its AirSim origin
    assert rear.header.mounting_position.orientation.yaw == pytest.approx(-math.pi)  # NED yaw 180° → ours
    seen = [{int(d.object_id.value) for d in lidar.detection} for lidar in (front, rear)]
    assert seen == [{10}, {11}]
    one = tmp_path / f"one{suffix}"
    disabled = robot_config(2)
    disabled["sensors"][2]["enabled"] = False  # AirSim does not run it: the front lidar alone
    one.write_text(json.dumps(disabled))
    alone = load_rig(str(one))
    assert len(alone) == 1 and alone[0].sensor.name == "front"
    assert OsiSensorModel(sensor=str(one)).step(sensor_view(OBJECTS, time_s=0.1, host=HOST), 0.1).valid
    with pytest.raises(SensorSpecError, match="no sensor of type 'lidar'"):
        load_rig(robot_config(0))
    broken = robot_config(2)
    broken["sensors"][2]["range"] = "far"
    with pytest.raises(SensorSpecError, match=r"^sensors\[2\]: AirSim setting 'range' must be a number"):
        load_rig(broken)  # the index in the file's sensors list, the camera counted


def test_ids_given_to_lidars_skip_the_ids_entries_name():
    rig = {"sensors": [SPEC | {"mounting": FRONT, "sensor_id": 1}, SPEC | {"mounting": REAR}]}
    result = OsiSensorModel(sensor=rig, sensor_id=0).step(sensor_view(OBJECTS, time_s=0.1, host=HOST), 0.1)
    assert result.valid, result.message
    headers = [lidar.header.sensor_id.value
               for lidar in SensorData.FromString(bytes(result.sensor_data)).feature_data.lidar_sensor]
    assert headers == [1, 2]  # lidar 1 would be 0 + 1: taken by lidar 0's own id, so the next free one
    from lidar_fmu.sensors.rig import rig_sensor_ids

    assert rig_sensor_ids([None, 5, None, None], 4) == [4, 5, 6, 7]
    assert rig_sensor_ids([None, None, 2**64 - 1], 2**64 - 2) == [2**64 - 2, 0, 2**64 - 1]
    with pytest.raises(SensorSpecError, match=r"sensors\[2\]\.sensor_id: .* same sensor_id 4 \(sensors\[0\]"):
        load_rig({"sensors": [SPEC | {"sensor_id": 4}, SPEC, SPEC | {"sensor_id": 4}]})


def test_a_sensor_view_id_of_2_to_the_64_minus_1_wraps_for_the_rigs_second_lidar():
    from osi3.osi_sensorview_pb2 import SensorView

    view = SensorView.FromString(sensor_view(OBJECTS, time_s=0.1, host=HOST))
    view.sensor_id.value = 2**64 - 1
    rig = {"sensors": [SPEC | {"mounting": FRONT}, SPEC | {"mounting": REAR}]}
    model = OsiSensorModel(sensor=rig)
    for k in (1, 2):
        view.timestamp.nanos = view.global_ground_truth.timestamp.nanos = 100_000_000 * k
        result = model.step(view.SerializeToString(), 0.1 * k)
        assert result.valid, result.message
        data = SensorData.FromString(bytes(result.sensor_data))
        assert data.sensor_id.value == 2**64 - 1
        assert [lidar.header.sensor_id.value for lidar in data.feature_data.lidar_sensor] == [2**64 - 1, 0]


def test_the_fmu_takes_robot_configs_and_numbers_a_rigs_lidars_as_the_model_does(fmu_path, tmp_path):
    from osi3.osi_sensorview_pb2 import SensorView

    from lidar_fmu.cosim.fmu_host import FmuInstance

    robot = tmp_path / "robot.json"
    robot.write_text(json.dumps(robot_config(2)))
    view = SensorView.FromString(sensor_view(OBJECTS, time_s=0.1, host=HOST))
    view.sensor_id.value = 2**64 - 1
    rig = json.dumps([SPEC | {"mounting": FRONT, "sensor_id": 1}, SPEC | {"mounting": REAR}])
    # the config request numbers from 0 (no SensorView yet); a step from the SensorView's id, wrapping past 2⁶⁴−1
    for sensor, config_ids, step_ids in ((rig, [1, 2], [1, 0]), (str(robot), [0, 1], [2**64 - 1, 0])):
        with FmuInstance(fmu_path, {"sensor": sensor}) as host:
            config = SensorViewConfiguration.FromString(host.config_request())
            assert [v.sensor_id.value for v in config.lidar_sensor_view_configuration] == config_ids
            out = host.step(view.SerializeToString(), 0.0, 0.1)
        assert out.valid
        data = SensorData.FromString(out.sensor_data)
        assert [e.header.sensor_id.value for e in data.feature_data.lidar_sensor] == step_ids
