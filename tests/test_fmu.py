"""The built LidarSensor.fmu, driven through FMPy (and a C master) with real OSMP pointers."""
import math
import pathlib
import shutil
import subprocess
import xml.etree.ElementTree as ET
import zipfile

import numpy as np
import pytest
import trimesh
from osi3.osi_featuredata_pb2 import SensorDetectionHeader
from osi3.osi_sensordata_pb2 import SensorData
from osi3.osi_sensorviewconfiguration_pb2 import SensorViewConfiguration

from helpers.c_master import compile_master, master_env
from helpers.fmu_inputs import OSMP_VARIABLES, SHARED_TRACE, SMALL_SENSOR
from helpers.osi_views import HOST_ID, sensor_view
from lidar_fmu.cosim.fmu_host import FmuInstance
from lidar_fmu.cosim.fmu_package import validate
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.osi.detections import sensor_data_to_points

OSMP_NS = "{http://xsd.pmsf.net/OSISensorModelPackaging}"
NOT_AVAILABLE = SensorDetectionHeader.DATA_QUALIFIER_NOT_AVAILABLE


@pytest.fixture(scope="session")
def small_sensor(tmp_path_factory):
    import json

    path = tmp_path_factory.mktemp("spec") / "small.json"
    path.write_text(json.dumps(SMALL_SENSOR))
    return str(path)


def lidar(fmu_path, **parameters):
    return FmuInstance(fmu_path, parameters)


def world_points(sensor_data: bytes, sensor_pose):
    cloud = sensor_data_to_points(sensor_data)
    xyz = np.stack([cloud.points[c] for c in "xyz"], axis=1).astype(np.float64)
    return xyz @ sensor_pose[:3, :3].T + sensor_pose[:3, 3], cloud.points["object_id"]


def box_distance(points, pose, dims):
    """Distance of world points to the surface of a box (bbox-centre pose, dims l,w,h)."""
    local = (points - pose[:3, 3]) @ pose[:3, :3]
    q = np.abs(local) - 0.5 * np.asarray(dims)
    outside = np.linalg.norm(np.maximum(q, 0), axis=1)
    inside = np.minimum(q.max(axis=1), 0)
    return np.abs(outside + inside)


# -- packaging -----------------------------------------------------------------------------
def test_fmu_validates_and_carries_osmp_annotations(fmu_path):
    assert validate(fmu_path) == []
    with zipfile.ZipFile(fmu_path) as z:
        names = z.namelist()
        root = ET.fromstring(z.read("modelDescription.xml"))
    assert "resources/lidar_fmu/scan/lidar.py" in names and "resources/LidarSensor.py" in names
    assert "binaries/linux64/LidarSensor.so" in names
    assert root.find("CoSimulation").get("needsExecutionTool") == "false"
    assert root.get("variableNamingConvention") == "structured"
    osmp = root.find("VendorAnnotations/Tool[@name='net.pmsf.osmp']/" + OSMP_NS + "osmp")
    assert osmp.get("version") == "1.6.0" and osmp.get("osi-version").startswith("3.")
    step = float(root.find("DefaultExperiment").get("stepSize"))
    assert step == pytest.approx(0.1)  # OS1-128 at 10 Hz, the default sensor
    variables = {v.get("name"): v for v in root.find("ModelVariables")}
    for prefix, (causality, variability, initial, kind) in OSMP_VARIABLES.items():
        for role in ("base.lo", "base.hi", "size"):
            v = variables[f"{prefix}.{role}"]
            assert (v.get("causality"), v.get("variability"), v.get("initial")) == (causality, variability, initial)
            assert v.find("Integer") is not None
            note = v.find("Annotations/Tool[@name='net.pmsf.osmp']/" + OSMP_NS + "osmp-binary-variable")
            assert note.get("name") == prefix and note.get("role") == role
            assert note.get("mime-type").startswith(f"application/x-open-simulation-interface; type={kind}; version=3.")
    for name in ("sensor", "assets", "environment", "materials", "ir_database", "backend", "mounting_position_x",
                 "mounting_orientation_yaw", "disable_self_hits", "up_axis"):
        assert variables[name].get("causality") == "parameter"
    assert variables["valid"].get("causality") == "output" and variables["count"].get("causality") == "output"


def test_one_fmu_carries_a_rig_of_lidars(fmu_path):
    """A JSON list in the sensor parameter: one lidar_sensor entry per lidar, each under its own header, and a
    config request with one lidar view per lidar."""
    import json

    front = SMALL_SENSOR | {"mounting": {"xyz_m": [3.0, 0.0, 1.0]}, "sensor_id": 21}
    rear = SMALL_SENSOR | {"mounting": {"xyz_m": [-1.0, 0.0, 1.0], "rpy_deg": [0, 0, 180]}, "sensor_id": 22}
    with lidar(fmu_path, sensor=json.dumps([front, rear]), environment="none") as fmu:  # objects alone
        config = SensorViewConfiguration.FromString(fmu.config_request())
        assert [v.sensor_id.value for v in config.lidar_sensor_view_configuration] == [21, 22]
        out = fmu.step(sensor_view([(10, (12.0, 0.0, 0.75), (0, 0, 0), (4.0, 1.8, 1.5), "")], time_s=0.1), 0.0,
                       0.1)
    data = SensorData.FromString(out.sensor_data)
    entries = data.feature_data.lidar_sensor
    assert [e.header.sensor_id.value for e in entries] == [21, 22]
    assert [e.header.mounting_position.position.x for e in entries] == [3.0, -1.0]
    assert {int(d.object_id.value) for d in entries[0].detection} == {10}
    assert {int(d.object_id.value) for d in entries[1].detection} == {10}  # 360°: the rear lidar sees it too
    nearest = [min(d.position.distance for d in e.detection) for e in entries]
    assert nearest[1] - nearest[0] == pytest.approx(4.0, abs=0.3)  # from 4 m further back


def test_config_request_describes_the_rays(fmu_path):
    with lidar(fmu_path, sensor="velodyne_vlp16", mounting_position_z=1.8) as fmu:
        config = SensorViewConfiguration.FromString(fmu.config_request())
    view = config.lidar_sensor_view_configuration[0]
    assert (view.number_of_rays_vertical, view.number_of_rays_horizontal) == (16, 900)
    assert view.num_of_pixels == 14_400 == len(view.directions) == len(view.timings)
    d = np.array([[v.x, v.y, v.z] for v in view.directions])
    np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-9)
    assert view.field_of_view_horizontal == pytest.approx(2 * math.pi)
    assert view.field_of_view_vertical == pytest.approx(math.radians(30))
    assert view.mounting_position.position.z == pytest.approx(1.8)
    assert max(view.timings) < 50_000  # µs within one 20 Hz frame
    assert config.range == pytest.approx(100.0)


# -- stepping ------------------------------------------------------------------------------
def test_objects_are_added_moved_and_removed(fmu_path, small_sensor):
    car = (4.0, 1.8, 1.5)
    with lidar(fmu_path, sensor=small_sensor, environment="none") as fmu:  # objects alone, no ground plane
        first = fmu.step(sensor_view([(10, (12, 0, 0.75), (0, 0, 0), car, ""), (11, (0, -9, 0.75), (0, 0, 0), car, "")]), 0, 0.1)
        assert first.valid and first.count > 0
        ids = set(sensor_data_to_points(first.sensor_data).points["object_id"].tolist())
        assert ids == {10, 11}  # the host's own box is not seen
        second = fmu.step(sensor_view([(10, (0, 12, 0.75), (0, 0, 0), car, ""), (12, (-15, 0, 0.75), (0, 0, 0), car, "")], 0.2), 0.1, 0.1)
        cloud = sensor_data_to_points(second.sensor_data)
        assert set(cloud.points["object_id"].tolist()) == {10, 12}
        ten = cloud.points[cloud.points["object_id"] == 10]
        # moved from ahead to the left (the sensor sits at the rear axle, 1.4 m behind the host centre)
        assert np.all(ten["y"] > 10) and np.all(np.abs(ten["x"] - 1.4) < 2.01)
        third = fmu.step(sensor_view([], 0.3), 0.2, 0.1)
        assert third.valid and third.count == 0


def test_pose_conventions_on_an_asymmetric_scene(fmu_path, small_sensor):
    """A yawed car seen by a sensor mounted with an offset and pitch: every point lies on the car."""
    host_pos, host_yaw = np.array([5.0, -3.0, 0.75]), math.radians(30)
    mounting = ((1.2, 0.3, 1.6), (0.0, math.radians(5), math.radians(-10)))
    car_pose = pose_matrix((18.0, 6.0, 0.9), (0.0, 0.0, math.radians(40)))
    car_dims = (4.6, 1.9, 1.8)
    view = sensor_view([(20, car_pose[:3, 3], (0, 0, math.radians(40)), car_dims, "")],
                       host=(HOST_ID, host_pos, host_yaw), mounting=mounting)
    with lidar(fmu_path, sensor=small_sensor) as fmu:
        out = fmu.step(view, 0, 0.1)
    vehicle = pose_matrix(host_pos, (0, 0, host_yaw))
    vehicle[:3, 3] += vehicle[:3, :3] @ np.array([-1.4, 0.0, -0.45])  # bbcenter_to_rear
    sensor_pose = vehicle @ pose_matrix(*mounting)
    points, object_id = world_points(out.sensor_data, sensor_pose)
    assert out.valid and np.count_nonzero(object_id == 20) > 20
    assert box_distance(points[object_id == 20], car_pose, car_dims).max() < 1e-3
    data = SensorData.FromString(out.sensor_data)
    assert data.mounting_position.orientation.pitch == pytest.approx(math.radians(5))
    assert data.feature_data.lidar_sensor[0].header.number_of_valid_detections == out.count


def test_an_fmcw_sensor_reports_radial_velocity_through_the_fmu(fmu_path, tmp_path):
    """The host drives at 10 m/s (its OSI velocity) toward a still wall: the FMU's SensorData, decoded back, reads
    −10 m/s straight ahead (the unit's dr/dt), written +10 m/s as OSI's radial_velocity (positive toward the
    sensor); every detection carries one."""
    import json

    resolution = 2.0**-8
    spec = tmp_path / "fmcw.json"
    spec.write_text(json.dumps({"horizontal_fov_deg": [20, -20], "horizontal_samples": 41, "vertical_fov_deg": [-2, 2],
                                "channels": 3, "max_range_m": 120.0, "radial_velocity": {"resolution_m_s": resolution}}))
    wall = (50, (60.0, 0.0, 2.0), (0, 0, 0), (0.2, 200.0, 20.0), "")
    with lidar(fmu_path, sensor=str(spec), environment="none") as fmu:
        for k in (1, 2):
            out = fmu.step(sensor_view([wall], 0.1 * k, host=(HOST_ID, (1.0 * k, 0.0, 0.75), 0.0),
                                       host_velocity=(10.0, 0.0, 0.0)), 0.1 * (k - 1), 0.1)
            assert out.valid and out.count == 41 * 3
    cloud = sensor_data_to_points(out.sensor_data)
    direction = cloud.xyz / np.linalg.norm(cloud.xyz, axis=1, keepdims=True)
    assert np.abs(cloud.radial_velocity_m_s / direction[:, 0] + 10.0).max() <= 2 * resolution
    ahead = np.all(np.abs(direction[:, 1:]) < 1e-6, axis=1)
    assert ahead.sum() == 1 and np.all(cloud.radial_velocity_m_s[ahead] == -10.0)
    detections = SensorData.FromString(out.sensor_data).feature_data.lidar_sensor[0].detection
    assert all(d.HasField("radial_velocity") and d.radial_velocity > 9.3 for d in detections)


def test_model_references_and_their_failures(fmu_path, small_sensor, tmp_path):
    sphere = trimesh.creation.icosphere(subdivisions=3, radius=1.0)
    sphere.export(tmp_path / "ball.stl")
    (tmp_path / "broken.obj").write_text("v 0 0 nonsense\nf 1 2 3\n")
    objects = [
        (30, (10, 0, 1.0), (0, 0, 0), (2.0, 2.0, 2.0), "ball.stl"),
        (31, (0, 10, 1.0), (0, 0, 0), (3.0, 2.0, 2.0), "missing_model.glb"),
        (32, (-10, 0, 1.0), (0, 0, 0), (3.0, 2.0, 2.0), "broken.obj"),
    ]
    with lidar(fmu_path, sensor=small_sensor, assets=str(tmp_path)) as fmu:
        for k in range(3):
            out = fmu.step(sensor_view(objects, 0.1 * (k + 1)), 0.1 * k, 0.1)
            assert out.valid
        cloud = sensor_data_to_points(out.sensor_data)
        warnings = [text for status, text in fmu.messages if status == "WARNING"]
    ids = cloud.points["object_id"]
    ball = np.stack([cloud.points[c][ids == 30] for c in "xyz"], axis=1)
    sensor_z = 0.75 - 0.45  # rear axle height: the sensor sits there with no mounting given
    centre = np.array([10 + 1.4, 0, 1.0 - sensor_z])
    assert np.abs(np.linalg.norm(ball - centre, axis=1) - 1.0).max() < 0.03  # the sphere, not its box
    assert {31, 32} <= set(ids.tolist())  # both fell back to their boxes
    assert sum("missing_model.glb" in w for w in warnings) == 1  # warned once, not per step
    assert sum("broken.obj" in w for w in warnings) == 1


@pytest.mark.parametrize("bad", ["null", "size0", "truncated", "garbage", "nan_pose", "inf_mounting"])
def test_bad_input_gives_invalid_output_and_the_next_step_works(fmu_path, small_sensor, bad):
    good = sensor_view([(10, (12, 0, 0.75), (0, 0, 0), (4, 1.8, 1.5), "")])
    with lidar(fmu_path, sensor=small_sensor) as fmu:
        if bad == "null":
            out = fmu.step(None, 0, 0.1)
        elif bad == "size0":
            fmu.set_binary("OSMPSensorViewIn", b"", address=0x1000)  # non-null address, size 0
            fmu.fmu.doStep(0, 0.1)
            out = fmu.outputs()
        elif bad == "truncated":
            out = fmu.step(good[: len(good) // 2], 0, 0.1)
        elif bad == "garbage":
            out = fmu.step(bytes(range(256)) * 4, 0, 0.1)
        elif bad == "nan_pose":
            out = fmu.step(sensor_view([(10, (float("nan"), 0, 0.75), (0, 0, 0), (4, 1.8, 1.5), "")]), 0, 0.1)
        else:
            out = fmu.step(sensor_view([], mounting=((0, 0, float("inf")), (0, 0, 0))), 0, 0.1)
        assert not out.valid and out.count == 0
        data = SensorData.FromString(out.sensor_data)
        header = data.feature_data.lidar_sensor[0].header
        assert header.data_qualifier == NOT_AVAILABLE and len(data.feature_data.lidar_sensor[0].detection) == 0
        assert any(status == "WARNING" for status, _ in fmu.messages)
        if bad in ("nan_pose", "inf_mounting"):
            assert any("NaN or infinite" in text for _, text in fmu.messages)
        recovered = fmu.step(good, 0.1, 0.1)
        assert recovered.valid and recovered.count > 0


def test_two_instances_with_different_sensors_in_one_process(fmu_path, small_sensor):
    view = sensor_view([(10, (12, 0, 0.75), (0, 0, 0), (4, 1.8, 1.5), "")])
    with lidar(fmu_path, sensor=small_sensor) as a, FmuInstance(fmu_path, {"sensor": "ibeo_lux"}, instance_name="b") as b:
        out_a, out_b = a.step(view, 0, 0.1), b.step(view, 0, 0.1)
        beams_a = set(sensor_data_to_points(out_a.sensor_data).points["beam_id"].tolist())
        beams_b = set(sensor_data_to_points(out_b.sensor_data).points["beam_id"].tolist())
    assert out_a.valid and out_b.valid and out_a.count != out_b.count
    assert beams_b <= {0, 1, 2, 3} and max(beams_a) > 3  # the LUX has 4 layers, the other 16 beams


def test_a_replay_steps_by_the_frame_period_where_the_trace_time_stands_still(fmu_path, small_sensor, tmp_path):
    """The FMU refuses a step of size 0 (FMI 2.0): views sharing one timestamp are replayed in steps of the frame
    period, not the trace's spacing of 0; a scenario's own step_size_s must be > 0, else one line says so (exit 2)."""
    import json

    import lidar_fmu.tools.replay as replay_module
    from lidar_fmu.osi.trace import write_trace
    from lidar_fmu.tools.cli import main

    car = (10, (12, 0, 0.75), (0, 0, 0), (4.0, 1.8, 1.5), "")
    scenario = tmp_path / "scenario"
    scenario.mkdir()
    write_trace(scenario / "views.osi", [sensor_view([car], time_s=5.0)] * 3)
    (scenario / "scenario.yaml").write_text(json.dumps({"trace": "views.osi", "sensor": small_sensor}))
    summary = replay_module.replay(scenario, tmp_path / "out", fmu_path=fmu_path, progress=False)
    assert summary["frames"] == 3 and min(summary["returns_per_frame"]) > 0
    assert not any(message.startswith("[ERROR]") for message in summary["fmu_messages"])
    for step_s in (0, -0.1, "fast"):
        (scenario / "scenario.yaml").write_text(json.dumps({"trace": "views.osi", "step_size_s": step_s}))
        assert main(["replay", str(scenario), "-o", str(tmp_path / "refused"), "-q"]) == 2


def test_terminate_and_reinstantiate(fmu_path, small_sensor):
    view = sensor_view([(10, (12, 0, 0.75), (0, 0, 0), (4, 1.8, 1.5), "")])
    counts = []
    for _ in range(3):
        with lidar(fmu_path, sensor=small_sensor) as fmu:
            counts.append(fmu.step(view, 0, 0.1).count)
    assert counts[0] > 0 and len(set(counts)) == 1


def test_output_buffer_is_double_buffered(fmu_path, small_sensor):
    view = sensor_view([(10, (12, 0, 0.75), (0, 0, 0), (4, 1.8, 1.5), "")])
    with lidar(fmu_path, sensor=small_sensor) as fmu:
        addresses = []
        for k in range(4):
            fmu.step(view, 0.1 * k, 0.1)
            lo, hi = fmu.fmu.getInteger([fmu.vr["OSMPSensorDataOut.base.lo"].valueReference,
                                         fmu.vr["OSMPSensorDataOut.base.hi"].valueReference])
            addresses.append((lo, hi))
    # a buffer is reused no earlier than two steps later
    assert addresses[0] != addresses[1] and addresses[1] != addresses[2]


def cannot_start(fmu_path, **parameters):
    """An FMU whose parameters the model cannot start with: fmi2ExitInitializationMode answers fmi2Error with the
    reason logged (never Fatal), and so does each step (no data, the same reason), the instance still usable to
    terminate. → its messages."""
    from fmpy.fmi1 import FMICallException

    with FmuInstance(fmu_path, initialize=False) as fmu:
        with pytest.raises(FMICallException, match="fmi2ExitInitializationMode failed with status 3"):
            fmu.initialize(parameters)
        reason = fmu.messages[-1]
        assert reason[0] == "ERROR" and "cannot start" in reason[1]
        with pytest.raises(FMICallException, match="fmi2DoStep failed with status 3"):
            fmu.step(sensor_view([]), 0, 0.1)
        assert fmu.messages[-1] == ("ERROR", f"fmi2DoStep refused: the model did not start ({reason[1]})")
        out = fmu.outputs()
        assert not out.valid and out.count == 0 and out.sensor_data == b""
        return [text for _, text in fmu.messages]


def test_unknown_preset_is_reported_not_crashed(fmu_path):
    assert any("did you mean velodyne_vlp16" in text for text in cannot_start(fmu_path, sensor="velodyne_vlp61"))


def test_the_outputs_parameter_publishes_the_osi_layers_asked_for(fmu_path, small_sensor):
    """Through the FMU: outputs=detections,reflections,objects adds one reflection per ray and the car it saw; an
    unknown layer is refused in one line naming the parameter (the model cannot start)."""
    car = (10, (12.0, 0.0, 0.75), (0, 0, 0), (4.0, 1.8, 1.5), "")
    with lidar(fmu_path, sensor=small_sensor, environment="none", outputs="detections,reflections,objects") as fmu:
        out = fmu.step(sensor_view([car], time_s=0.1), 0.0, 0.1)
    data = SensorData.FromString(out.sensor_data)
    view = data.sensor_view[0].lidar_sensor_view[0]
    assert len(view.reflection) == len(view.view_configuration.directions) == 16 * 360
    assert [o.header.ground_truth_id[0].value for o in data.moving_object] == [10]
    assert len(data.feature_data.lidar_sensor[0].detection) == out.count > 0
    assert not data.HasField("logical_detection_data")
    assert any("outputs parameter: unknown layer 'cars'" in text for text in cannot_start(fmu_path, outputs="cars"))


# -- a trace nobody here wrote ---------------------------------------------------------------------
@pytest.mark.slow
def test_shared_trace_car_250_lies_on_its_box(fmu_path):
    """Every point of car 250 lies on its box (objects as OSI's boxes), seen from where the host was when its ray
    fired (motion distortion: the host and the car move between views; before the first view, back along their OSI
    velocities)."""
    from lidar_fmu.osi.decode import decode_sensor_view
    from lidar_fmu.osi.trace import read_trace
    from lidar_fmu.scan.motion import interpolate_pose
    from lidar_fmu.sensors import load_sensor

    frames = list(read_trace(SHARED_TRACE))
    assert len(frames) == 20
    pattern = load_sensor("ouster_os1_128").pattern
    previous = None
    with lidar(fmu_path, sensor="ouster_os1_128", objects="boxes") as fmu:
        for k, data in enumerate(frames):
            out = fmu.step(data, 0.1 * k, 0.1)
            frame = decode_sensor_view(data)
            car = frame.object(250)
            host_now, car_now = frame.host_pose(), pose_matrix(car.position_m, (0, 0, 0))
            if previous is None:  # the first frame fired over the 0.1 s before its view
                host_then, car_then = frame.host_pose(-0.1), pose_matrix(np.subtract(car.position_m, np.multiply(
                    car.velocity_m_s or (0, 0, 0), 0.1)), (0, 0, 0))
            else:
                host_then, car_then = previous
            previous = host_now, car_now
            cloud = sensor_data_to_points(out.sensor_data).with_pattern(pattern)  # each point's ray, so its time
            ours = cloud.points["object_id"] == 250
            assert out.valid and np.count_nonzero(ours) > 50, f"frame {k}"
            fraction = (cloud.points["time"][ours] + 1e-9) / 0.1
            distance = []
            for f, p in zip(fraction, cloud.xyz[ours].astype(np.float64)):
                host = interpolate_pose(host_then, host_now, f)  # mounting_position is zero
                world = host[:3, :3] @ p + host[:3, 3]
                distance.append(box_distance(world[None], interpolate_pose(car_then, car_now, f), (5, 2, 1.5))[0])
            # the car is posed in 10 slices per frame: up to half a slice (5 ms) of its motion off
            car_step_m = float(np.linalg.norm(car_now[:3, 3] - car_then[:3, 3]))
            assert max(distance) < 0.01 + car_step_m * 0.05, f"frame {k}"


# -- a C master --------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_master_drives_the_fmu(fmu_path, tmp_path):
    import fmpy
    from fmpy import extract, read_model_description

    host = compile_master("osmp_host", tmp_path, pathlib.Path(fmpy.__file__).parent / "c-code")
    md = read_model_description(str(fmu_path))
    vr = {v.name: v.valueReference for v in md.modelVariables}
    unzipped = pathlib.Path(extract(str(fmu_path), str(tmp_path / "fmu")))
    out_trace = tmp_path / "sd.osi"
    names = ["OSMPSensorViewIn.base.lo", "OSMPSensorViewIn.base.hi", "OSMPSensorViewIn.size",
             "OSMPSensorDataOut.base.lo", "OSMPSensorDataOut.base.hi", "OSMPSensorDataOut.size", "valid", "count", "sensor"]
    args = [str(host), str(unzipped / "binaries" / "linux64" / "LidarSensor.so"), (unzipped / "resources").as_uri(),
            md.guid, str(SHARED_TRACE), str(out_trace), "velodyne_vlp16"] + [str(vr[n]) for n in names] + ["0.1"]
    run = subprocess.run(args, env=master_env(), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = [line for line in run.stdout.splitlines() if line.startswith("frame ")]
    assert len(lines) == 20 and all(" valid 1 " in line and " status 0" in line for line in lines)
    from lidar_fmu.osi.trace import read_trace

    outputs = list(read_trace(out_trace))
    assert len(outputs) == 20
    assert all(250 in set(sensor_data_to_points(o).points["object_id"].tolist()) for o in outputs)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_master_with_two_instances_exits_normally(fmu_path, tmp_path):
    """Two instances in one C process, freed, then `return 0` from main: exit() runs every destructor.

    pythonfmu 0.7.0's binary frees its interpreter holder in a static destructor and then writes into
    it from its library destructor; without the slave's exit handler this aborted ("free(): corrupted
    unsorted chunks", exit status 134) in every run here. Four runs (each a process starting Python and two
    lidars, seconds): runs 2 and 4 also dlclose the binary first.
    """
    import fmpy
    from fmpy import extract, read_model_description

    from lidar_fmu.osi.trace import read_trace

    host = compile_master("osmp_two_instances", tmp_path, pathlib.Path(fmpy.__file__).parent / "c-code")
    md = read_model_description(str(fmu_path))
    vr = {v.name: v.valueReference for v in md.modelVariables}
    unzipped = pathlib.Path(extract(str(fmu_path), str(tmp_path / "fmu")))
    traces = [tmp_path / "a.osi", tmp_path / "b.osi"]
    names = ["OSMPSensorViewIn.base.lo", "OSMPSensorViewIn.base.hi", "OSMPSensorViewIn.size",
             "OSMPSensorDataOut.base.lo", "OSMPSensorDataOut.base.hi", "OSMPSensorDataOut.size", "valid", "count", "sensor"]
    args = [str(host), str(unzipped / "binaries" / "linux64" / "LidarSensor.so"), (unzipped / "resources").as_uri(),
            md.guid, str(SHARED_TRACE), *map(str, traces), "velodyne_vlp16", "ibeo_lux"] + [str(vr[n]) for n in names]
    env = master_env()
    codes = []
    for k in range(4):
        unload = ["dlclose"] if k % 2 == 1 else []
        run = subprocess.run(args + ["0.1"] + unload, env=env, capture_output=True, text=True, timeout=600)
        codes.append(run.returncode)
        assert run.returncode == 0, (codes, run.stderr[-6000:])
        lines = [line for line in run.stdout.splitlines() if line.startswith("frame ")]
        assert len(lines) == 40 and all(" valid 1 " in line and " status 0" in line for line in lines)
        assert run.stdout.splitlines()[-1] == "frames 20 worst_status 0"
        assert "corrupted" not in run.stderr
    velodyne, lux = (list(read_trace(t)) for t in traces)
    assert len(velodyne) == len(lux) == 20
    assert all(250 in set(sensor_data_to_points(o).points["object_id"].tolist()) for o in velodyne + lux)
    assert max(sensor_data_to_points(velodyne[0]).points["beam_id"]) > 3 >= max(sensor_data_to_points(lux[0]).points["beam_id"])


def test_materials_and_range_limit_apply_in_the_fmu(fmu_path, tmp_path):
    """The same physics as `scan`: a 10 % wall returns at 50 m, not at 70 m, with ρ = 0.1·cos θ."""
    import json

    (tmp_path / "panel.mtl").write_text("newmtl wall\nKd 0.5 0.5 0.5\n")
    (tmp_path / "panel.obj").write_text(
        "mtllib panel.mtl\nv 0 -30 -20\nv 0 30 -20\nv 0 30 20\nv 0 -30 20\nusemtl wall\nf 1 2 3\nf 1 3 4\n")
    (tmp_path / "map.json").write_text(json.dumps({"default": "lambertian_95", "materials": {"wall": "lambertian_10"}}))
    spec = tmp_path / "narrow.json"
    spec.write_text(json.dumps({"horizontal_fov_deg": [-8, 8], "horizontal_resolution_deg": 1.0,
                                "vertical_fov_deg": [-4, 4], "channels": 9, "max_range_m": 150.0,
                                "range_reflectivity": {"pairs": [[0.10, 60.0], [0.80, 120.0]], "fit": "log"}}))
    counts = {}
    with lidar(fmu_path, sensor=str(spec), assets=str(tmp_path), materials=str(tmp_path / "map.json")) as fmu:
        for k, distance in enumerate((50.0, 70.0)):
            # no host: the sensor stands at the world origin, the panel faces it
            view = sensor_view([(40, (distance, 0, 0), (0, 0, 0), (0.1, 60, 40), "panel.obj")], 0.1 * (k + 1), host=None)
            out = fmu.step(view, 0.1 * k, 0.1)
            cloud = sensor_data_to_points(out.sensor_data)
            counts[distance] = len(cloud)
            if len(cloud):
                cos_incidence = distance / cloud.points["range"]
                np.testing.assert_allclose(cloud.points["reflectivity"], 0.1 * cos_incidence, atol=1e-4)
                data = SensorData.FromString(bytes(out.sensor_data))
                intensity = np.array([d.intensity for d in data.feature_data.lidar_sensor[0].detection])
                np.testing.assert_allclose(intensity, 100 * 0.1 * cos_incidence * (10 / cloud.points["range"]) ** 2,
                                           atol=1e-3)
    assert counts == {50.0: 17 * 9, 70.0: 0}


def test_an_ir_database_and_ply_face_reflectances_apply_in_the_fmu(fmu_path, tmp_path):
    """The ``ir_database`` parameter: a map's material from the user's database; a PLY by model_reference returns
    each face's own reflectance; a malformed database stops the start with the file and key logged."""
    import json

    (tmp_path / "panel.mtl").write_text("newmtl wall\nKd 0.5 0.5 0.5\n")
    (tmp_path / "panel.obj").write_text(
        "mtllib panel.mtl\nv 0 -30 -20\nv 0 30 -20\nv 0 30 20\nv 0 -30 20\nusemtl wall\nf 1 2 3\nf 1 3 4\n")
    (tmp_path / "strip.ply").write_text("\n".join([
        "ply", "format ascii 1.0", "element vertex 6", "property float x", "property float y", "property float z",
        "element face 2", "property list uchar int vertex_indices", "property uchar reflectivity", "end_header",
        "0 -4 0", "0 0 0", "0 0 3", "0 -4 3", "0 4 0", "0 4 3", "4 0 1 2 3 51", "4 1 4 5 2 204"]) + "\n")
    (tmp_path / "map.json").write_text(json.dumps({"materials": {"wall": "our_paint"}}))
    (tmp_path / "ours.yaml").write_text("materials:\n  - {name: our_paint, reflectance: 0.37, source: ours}\n")
    spec = tmp_path / "narrow.json"
    spec.write_text(json.dumps({"horizontal_fov_deg": [-8, 8], "horizontal_resolution_deg": 1.0,
                                "vertical_fov_deg": [-4, 4], "channels": 9, "max_range_m": 150.0}))
    # no host: the sensor stands at the world origin; the strip 20 m ahead above the horizon, the panel behind it
    view = sensor_view([(40, (40.0, 0, 0), (0, 0, 0), (0.1, 60, 40), "panel.obj"),
                        (41, (20.0, 0, 0.1), (0, 0, 0), (0.1, 8, 3), "strip.ply")], 0.1, host=None)
    parameters = {"sensor": str(spec), "assets": str(tmp_path), "materials": str(tmp_path / "map.json"),
                  "ir_database": str(tmp_path / "ours.yaml")}
    with lidar(fmu_path, **parameters) as fmu:
        cloud = sensor_data_to_points(fmu.step(view, 0.0, 0.1).sensor_data)
    p = cloud.points
    rho0 = np.round((p["reflectivity"] / (p["x"] / p["range"])).astype(float), 4)
    off_seam = np.abs(p["y"]) > 0.05
    assert set(rho0[p["object_id"] == 40]) == {0.37}
    strip = (p["object_id"] == 41) & off_seam
    assert strip.sum() > 20 and set(rho0[strip & (p["y"] < 0)]) == {0.2} and set(rho0[strip & (p["y"] > 0)]) == {0.8}
    (tmp_path / "ours.yaml").write_text("materials:\n  - {name: our_paint, reflectance: 0.37, source: ours, x: 1}\n")
    messages = cannot_start(fmu_path, **parameters)
    assert any("ours.yaml" in text and "'x'" in text for text in messages), messages


def test_bad_material_map_is_reported_not_crashed(fmu_path, tmp_path):
    (tmp_path / "map.yaml").write_text("default: no_such_material\n")
    messages = cannot_start(fmu_path, sensor="ibeo_lux", materials=str(tmp_path / "map.yaml"))
    assert any("no_such_material" in text for text in messages)


def test_mirror_ghosts_come_through_the_fmu(fmu_path, tmp_path):
    """A 45° mirror 10 m ahead and a wall 10 m to its side, as the environment: SensorData's detections are the
    ghosts, on the original rays at x ≈ 20 m (what ``scan`` and every backend give, tests/test_mirror.py)."""
    import json

    from helpers.mirror_scenes import MATERIALS, SENSOR, side_mirror_scene, write_obj

    world = write_obj(tmp_path, side_mirror_scene())
    (tmp_path / "map.json").write_text(json.dumps(MATERIALS))
    (tmp_path / "sensor.json").write_text(json.dumps(SENSOR))
    with lidar(fmu_path, sensor=str(tmp_path / "sensor.json"), environment=str(world),
               materials=str(tmp_path / "map.json")) as fmu:
        out = fmu.step(sensor_view([], 0.1, host=None), 0.0, 0.1)
    cloud = sensor_data_to_points(out.sensor_data)
    assert len(cloud) == 49
    xyz = np.stack([cloud.points[c] for c in "xyz"], axis=1)
    assert np.all(np.abs(xyz[:, 0] - 20.0) < 0.6) and np.all(cloud.points["range"] > 19.9)
    centre = np.argmin(np.abs(xyz[:, 1]) + np.abs(xyz[:, 2]))
    assert xyz[centre, 0] == pytest.approx(20.0, abs=1e-3)
