"""One co-simulation step without FMI: ``OsiSensorModel.step``, SensorView bytes in, SensorData bytes out.

Bad input never raises: it gives an empty SensorData marked not available,
``valid=False`` and a message naming the problem; the next good step is exact.
"""
import math

import numpy as np
import pytest
from osi3.osi_featuredata_pb2 import SensorDetectionHeader
from osi3.osi_sensordata_pb2 import SensorData
from osi3.osi_sensorview_pb2 import SensorView

from helpers.osi_views import HOST_ID, sensor_view
from lidar_fmu.cosim.sensor_model import STAGES, OsiSensorModel
from lidar_fmu.geometry.scene import Scene, box_mesh
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.osi.detections import sensor_data_to_points
from lidar_fmu.scan.lidar import Lidar

NOT_AVAILABLE = SensorDetectionHeader.DATA_QUALIFIER_NOT_AVAILABLE
# one pose per frame: these tests hold each step equal to a direct scan of the view (tests/test_motion.py moves)
SPEC = {"horizontal_fov_deg": [-30, 30], "horizontal_resolution_deg": 2.0, "vertical_fov_deg": [-10, 5],
        "channels": 8, "max_range_m": 60, "motion_distortion": False}
CAR = (4.0, 1.8, 1.5)
# (id, bbox-centre position, (roll, pitch, yaw), dimensions, model_reference)
OBJECTS = [(10, (12.0, 0.0, 0.75), (0.0, 0.0, 0.0), CAR, ""),
           (11, (20.0, 6.0, 0.9), (0.0, 0.0, math.radians(30)), (4.6, 1.9, 1.8), "")]
MOVED = [(10, (15.0, -2.0, 0.75), (0.0, 0.0, math.radians(-20)), CAR, ""),
         (12, (25.0, 4.0, 0.75), (0.0, 0.0, 0.0), CAR, "")]
MOUNTING = ((1.0, 0.0, 1.5), (0.0, math.radians(2), 0.0))
HOST = (HOST_ID, (0.0, 0.0, 0.75), 0.0)
REAR = (-1.4, 0.0, -0.45)  # osi_views' bbcenter_to_rear of the host


def model(**kwargs) -> OsiSensorModel:
    kwargs.setdefault("warn", lambda message: None)
    # objects alone, as direct_scan places them: a trace without lanes would otherwise get a ground plane
    return OsiSensorModel(sensor=SPEC, **({"environment": "none"} | kwargs))


def expected_sensor_pose(host=HOST, mounting=MOUNTING) -> np.ndarray:
    _, position, yaw = host
    vehicle = pose_matrix(position, (0.0, 0.0, yaw))
    vehicle[:3, 3] += vehicle[:3, :3] @ np.asarray(REAR)
    return vehicle @ pose_matrix(*mounting)


def direct_scan(objects, sensor_pose, time_s=0.0):
    """What a plain :class:`Lidar` sees of the boxes of ``objects`` (the host's own box excluded)."""
    scene = Scene()
    for object_id, position, rpy, dims, _ in objects:
        scene.add_instance(object_id, box_mesh(*dims, material="osi_bounding_box"), pose_matrix(position, rpy))
    return Lidar(scene, SPEC).scan(sensor_pose, time_s)


def as_bytes(result) -> bytes:
    return bytes(result.sensor_data)  # bytes, or a uint8 array when encoded into a buffer


def assert_invalid(result):
    assert not result.valid and result.count == 0 and result.message
    data = SensorData.FromString(as_bytes(result))
    lidar = data.feature_data.lidar_sensor[0]
    assert lidar.header.data_qualifier == NOT_AVAILABLE
    assert lidar.header.number_of_valid_detections == 0 and len(lidar.detection) == 0


def test_good_sensor_view_matches_a_direct_scan():
    m = model()
    view = sensor_view(OBJECTS, time_s=0.1, host=HOST, mounting=MOUNTING)
    result = m.step(view, 0.1)
    assert result.valid and result.message == ""
    assert set(result.timings_s) == set(STAGES)
    pose = expected_sensor_pose()
    np.testing.assert_allclose(m.last_sensor_pose, pose, atol=1e-12)

    reference = direct_scan(OBJECTS, pose, 0.1)
    assert result.count == len(reference) > 10
    data = SensorData.FromString(as_bytes(result))
    lidar = data.feature_data.lidar_sensor[0]
    assert lidar.header.number_of_valid_detections == result.count == len(lidar.detection)
    assert data.timestamp.seconds == 0 and data.timestamp.nanos == 100_000_000
    assert data.mounting_position.position.x == pytest.approx(1.0)
    assert data.mounting_position.orientation.pitch == pytest.approx(math.radians(2))

    cloud = sensor_data_to_points(as_bytes(result))
    assert set(cloud.points["object_id"].tolist()) == {10, 11}  # not the host's own box
    np.testing.assert_array_equal(cloud.points["object_id"], reference.points["object_id"])
    for axis in "xyz":
        np.testing.assert_allclose(cloud.points[axis], reference.points[axis], atol=1e-4)


def test_objects_move_and_leave_between_steps():
    m = model()
    assert m.step(sensor_view(OBJECTS, 0.1, host=HOST, mounting=MOUNTING), 0.1).valid
    second = m.step(sensor_view(MOVED, 0.2, host=HOST, mounting=MOUNTING), 0.2)
    reference = direct_scan(MOVED, expected_sensor_pose(), 0.2)
    assert second.valid and second.count == len(reference) > 0
    assert set(sensor_data_to_points(as_bytes(second)).points["object_id"].tolist()) == {10, 12}
    empty = m.step(sensor_view([], 0.3, host=HOST, mounting=MOUNTING), 0.3)
    assert empty.valid and empty.count == 0  # an empty world is a valid measurement


def _no_ground_truth() -> bytes:
    view = SensorView()
    view.version.version_major, view.version.version_minor = 3, 8
    view.timestamp.nanos = 100_000_000
    view.host_vehicle_id.value = HOST_ID
    return view.SerializeToString()


def _host_not_in_ground_truth() -> bytes:
    view = SensorView.FromString(sensor_view(OBJECTS, 0.1, host=None, mounting=MOUNTING))
    view.host_vehicle_id.value = 99
    return view.SerializeToString()


GOOD = sensor_view(OBJECTS, 0.1, host=HOST, mounting=MOUNTING)
NAN = float("nan")
# name → (SensorView bytes, what the message must say)
BAD_INPUTS = {
    "none": (None, "no SensorView input"),
    "empty": (b"", "no SensorView input"),
    "garbage": (bytes(range(256)) * 4, "SensorView rejected"),
    "truncated": (GOOD[: len(GOOD) // 2], "SensorView rejected"),
    "no_ground_truth": (_no_ground_truth(), "no global_ground_truth"),
    "host_not_in_ground_truth": (_host_not_in_ground_truth(), "host vehicle 99 is not in the ground truth"),
    "nan_object_pose": (sensor_view([(10, (NAN, 0.0, 0.75), (0, 0, 0), CAR, "")], 0.1, host=HOST), "NaN or infinite"),
    "inf_mounting": (sensor_view([], 0.1, host=HOST, mounting=((0, 0, math.inf), (0, 0, 0))), "NaN or infinite"),
}


@pytest.mark.parametrize("bad", list(BAD_INPUTS))
def test_bad_input_gives_invalid_output_with_a_message(bad):
    data, expect = BAD_INPUTS[bad]
    result = model().step(data, 0.1)  # must not raise
    assert_invalid(result)
    assert expect in result.message
    assert "Traceback" not in result.message  # an input problem, not a crash of the step


@pytest.mark.parametrize("bad", list(BAD_INPUTS))
def test_the_good_step_after_a_bad_one_is_exact(bad):
    """good, bad, good' on one model gives the same third output as good, good, good' on a fresh one."""
    later = sensor_view(MOVED, 0.3, host=HOST, mounting=MOUNTING)
    recovered = model()
    assert recovered.step(GOOD, 0.1).valid
    assert_invalid(recovered.step(BAD_INPUTS[bad][0], 0.2))
    after_bad = recovered.step(later, 0.3)
    clean = model()
    for view, time_s in ((GOOD, 0.1), (GOOD, 0.2)):
        assert clean.step(view, time_s).valid
    expected = clean.step(later, 0.3)
    assert after_bad.valid and after_bad.count == expected.count == len(direct_scan(MOVED, expected_sensor_pose(), 0.3))
    assert as_bytes(after_bad) == as_bytes(expected)


def test_a_failing_step_is_reported_not_raised(monkeypatch):
    """An unexpected exception inside the step (a bug) still gives an invalid SensorData, with the traceback."""
    m = model()

    def broken_scan(*args, **kwargs):
        raise KeyError("cast")

    monkeypatch.setattr(m.lidar, "plan_scan", broken_scan)  # what the step calls
    result = m.step(GOOD, 0.1)
    assert_invalid(result)
    assert "step failed" in result.message and "KeyError" in result.message and "Traceback" in result.message
    monkeypatch.undo()
    assert m.step(GOOD, 0.2).valid


@pytest.mark.parametrize("time_s", [math.nan, math.inf, -math.inf])
def test_a_time_that_is_not_finite_is_the_callers_error(time_s):
    """The caller's clock, not the input: refused whether or not there is a SensorView, and the model stays usable."""
    m = model()
    for view in (GOOD, None):
        with pytest.raises(ValueError, match=f"time_s must be a finite time, got {time_s}"):
            m.step(view, time_s)
    assert m.step(GOOD, 0.1).valid and m.cycle_counter == 1


def test_same_inputs_give_the_same_bytes():
    views = [(GOOD, 0.1), (b"garbage", 0.2), (sensor_view(MOVED, 0.3, host=HOST, mounting=MOUNTING), 0.3)]
    runs = []
    for _ in range(2):
        m = model(sensor_id=7)
        runs.append([as_bytes(m.step(view, time_s)) for view, time_s in views])
    assert runs[0] == runs[1]
    assert SensorData.FromString(runs[0][0]).sensor_id.value == 7


def test_output_encoded_into_a_given_buffer_is_the_same():
    plain = model().step(GOOD, 0.1)
    buffer = np.zeros(1 << 20, np.uint8)
    into = model().step(GOOD, 0.1, out=buffer)
    assert into.valid and as_bytes(into) == as_bytes(plain)
