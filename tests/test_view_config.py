"""The OSMP configuration handshake in the model layer (lidar_fmu.cosim.view_config), without FMI: the request's
fields of view as OSI means them, and a master's narrower OSMPSensorViewInConfig made into the rays the model casts."""
import math

import numpy as np
import pytest
from osi3.osi_sensorviewconfiguration_pb2 import SensorViewConfiguration

from helpers.fmu_inputs import SMALL_SENSOR
from helpers.osi_views import sensor_view
from helpers.osmp_master import NARROWINGS, answer, detections
from lidar_fmu.cosim.sensor_model import OsiSensorModel, member_mounting
from lidar_fmu.cosim.view_config import follow_view_configuration, narrow_pattern
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.osi.config import (
    SPEED_OF_LIGHT_M_S,
    ViewConfigurationError,
    read_view_configuration,
    rig_view_configuration,
)
from lidar_fmu.sensors.rig import load_rig

CAR = (4.0, 1.8, 1.5)
#: cars all around the host at 12 m, and one on the diagonal: returns in every direction
SCENE = [(10 + k, (12 * math.cos(a), 12 * math.sin(a), 0.75), (0, 0, a), CAR, "")
         for k, a in enumerate(np.radians([0, 45, 90, 180, 270]))]


def request_of(rig) -> bytes:
    """The request the FMU computes for ``rig`` with its mounting parameters at 0."""
    return rig_view_configuration([(m.sensor, member_mounting(m, pose_matrix()), k) for k, m in enumerate(rig)])


def followed(spec, **changes):
    rig = load_rig(spec)
    request = request_of(rig)
    return follow_view_configuration(rig, request, answer(**changes)(request))


def scan(members, views=((0.1, 0.1),), **options):
    """SensorData of the model on the cars scene, one step per (time, step) of ``views``."""
    model = OsiSensorModel(sensor=members, environment="auto", warn=lambda message: None, **options)
    return [model.step(sensor_view(SCENE, time_s=t), t) for t, _ in views]


# -- the request -----------------------------------------------------------------------------------
def test_request_fields_of_view_are_osis_symmetric_cones_and_the_emitter_frequency_is_the_lights():
    """OSI: the viewing range is [-fov/2, fov/2]; an HDL-32E looks from −30.67° to +10.67°: it asks for ±30.67°.
    emitter_frequency is the light's: c / 903 nm."""
    (hdl,) = load_rig("velodyne_hdl32e")
    config = read_view_configuration(request_of([hdl]))
    lidar = config.lidar_sensor_view_configuration[0]
    top = np.degrees(np.max(np.abs(hdl.sensor.pattern.elevation_rad)))
    assert top == pytest.approx(30.67, abs=0.01)
    assert math.degrees(lidar.field_of_view_vertical) == pytest.approx(2 * top)
    assert config.field_of_view_vertical == lidar.field_of_view_vertical
    assert lidar.field_of_view_horizontal == pytest.approx(2 * math.pi, abs=1e-3)
    assert lidar.emitter_frequency == pytest.approx(SPEED_OF_LIGHT_M_S / (hdl.sensor.wavelength_nm * 1e-9))
    assert 3.0e14 < lidar.emitter_frequency < 3.5e14  # 903 nm: 332 THz


def test_an_echoed_request_changes_nothing():
    rig = load_rig(SMALL_SENSOR)
    result = follow_view_configuration(rig, request_of(rig), request_of(rig))
    assert result.followed == [] and result.not_followed == [] and result.sensor_id is None
    (member,) = result.members
    assert member.sensor is rig[0].sensor and member.mounting_pose is None and member.sensor_id is None


# -- each field, narrowed ------------------------------------------------------------------------------
def test_a_narrower_horizontal_field_of_view_casts_only_the_rays_within_it():
    fov = NARROWINGS["field_of_view_horizontal"]
    pattern = followed(SMALL_SENSOR, field_of_view_horizontal=fov).members[0].sensor.pattern
    assert np.all(np.abs(pattern.azimuth_rad) <= fov / 2 + 1e-6)
    assert pattern.rows == 16 and pattern.columns == 91  # −45° … +45° in 1° steps
    whole, narrow = (detections(out.sensor_data) for out in (scan(load_rig(SMALL_SENSOR))[0],
                                                            scan(followed(SMALL_SENSOR, field_of_view_horizontal=fov)
                                                                 .members)[0]))
    assert np.all(np.abs(narrow["azimuth_rad"]) <= fov / 2 + 1e-6)
    assert np.any(np.abs(whole["azimuth_rad"]) > fov / 2 + 0.1)  # the cars behind and beside: gone
    inside = np.abs(whole["azimuth_rad"]) <= fov / 2 + 1e-6
    assert len(narrow["azimuth_rad"]) == np.count_nonzero(inside)  # the same returns in the cone


def test_a_narrower_vertical_field_of_view_keeps_the_beams_within_it():
    fov = NARROWINGS["lidar.field_of_view_vertical"]
    result = followed(SMALL_SENSOR, **{"lidar.field_of_view_vertical": fov})
    pattern = result.members[0].sensor.pattern
    assert np.all(np.abs(pattern.elevation_rad) <= fov / 2 + 1e-6)
    assert pattern.rows == 8 and pattern.columns == 360  # beams at ±1, ±3, ±5, ±7° of the 2° ladder
    out = detections(scan(result.members)[0].sensor_data)
    assert len(out["elevation_rad"]) and np.all(np.abs(out["elevation_rad"]) <= fov / 2 + 1e-6)


@pytest.mark.parametrize("axis, count", [("horizontal", 90), ("vertical", 4), ("horizontal", 359)])
def test_fewer_rays_are_spread_evenly(axis, count):
    result = followed(SMALL_SENSOR, **{f"lidar.number_of_rays_{axis}": count})
    pattern = result.members[0].sensor.pattern
    assert (pattern.columns if axis == "horizontal" else pattern.rows) == count
    if axis == "horizontal":
        azimuth_deg = np.degrees(pattern.azimuth_rad[:: pattern.rows].astype(np.float64))
        steps = np.diff(np.unique(np.round(azimuth_deg, 3)))
        assert set(np.round(steps, 2)) <= ({4.0} if count == 90 else {1.0, 2.0})
    else:  # 4 of the 16 beams, every 4th by elevation: −15, −7, +1, +9°
        elevations = np.degrees(pattern.elevation_rad[: pattern.rows])
        np.testing.assert_allclose(np.sort(elevations), [-15, -7, 1, 9], atol=1e-4)
    out = detections(scan(result.members)[0].sensor_data)
    assert len(np.unique(out["beam_id"])) <= pattern.rows
    assert len(out["distance_m"]) > 0


def test_another_update_cycle_spins_the_unit_at_that_rate():
    """0.05 s for a 10 Hz unit: it spins at 20 Hz, firing times halved, the pattern whole; a step of 0.05 s then
    publishes a whole frame (without the configuration, half of one)."""
    result = followed(SMALL_SENSOR | {"motion_distortion": True}, update_cycle_time=0.05)
    sensor = result.members[0].sensor
    base = load_rig(SMALL_SENSOR | {"motion_distortion": True})[0].sensor
    assert sensor.frame_period_s == pytest.approx(0.05) and len(sensor.pattern) == len(base.pattern)
    np.testing.assert_allclose(sensor.pattern.time_offset_s, base.pattern.time_offset_s * 0.5, rtol=1e-6)
    assert result.followed == ["update_cycle_time 0.05 s"]
    steps = ((0.05, 0.05), (0.1, 0.05))
    fast = scan(result.members, steps)[1]
    slow = scan([load_rig(SMALL_SENSOR | {"motion_distortion": True})[0]], steps)[1]
    fast_azimuth = detections(fast.sensor_data)["azimuth_rad"]
    slow_azimuth = detections(slow.sensor_data)["azimuth_rad"]
    assert np.ptp(fast_azimuth) > np.radians(300)  # every direction: a whole frame in 0.05 s
    assert np.ptp(slow_azimuth) < np.radians(185) and fast.count > 1.6 * slow.count  # half a frame at 10 Hz


def test_a_shorter_range_is_the_lidars_maximum_range():
    result = followed(SMALL_SENSOR, range=NARROWINGS["range"])
    assert result.members[0].sensor.max_range_m == NARROWINGS["range"]
    out = detections(scan(result.members)[0].sensor_data)
    whole = detections(scan(load_rig(SMALL_SENSOR))[0].sensor_data)
    assert np.any(whole["distance_m"] > 16.0)
    assert len(out["distance_m"]) and np.all(out["distance_m"] <= NARROWINGS["range"] + 1e-3)


def test_the_configurations_mounting_places_the_lidar_where_the_sensor_view_has_none():
    (x, y, z), _ = NARROWINGS["mounting_position"]
    result = followed(SMALL_SENSOR, mounting_position=NARROWINGS["mounting_position"])
    np.testing.assert_allclose(result.members[0].mounting_pose[:3, 3], (x, y, z))
    assert result.followed == ["lidar 0 mounting_position from the top-level entry"]
    from osi3.osi_sensordata_pb2 import SensorData

    data = SensorData.FromString(bytes(scan(result.members)[0].sensor_data))
    assert data.mounting_position.position.z == pytest.approx(z)


def test_sensor_ids_the_configuration_sets_are_the_sensor_datas():
    rig = load_rig(SMALL_SENSOR)
    request = read_view_configuration(request_of(rig))
    request.sensor_id.value = 7
    request.lidar_sensor_view_configuration[0].sensor_id.value = 70
    result = follow_view_configuration(rig, request_of(rig), request.SerializeToString())
    assert result.sensor_id == 7 and result.members[0].sensor_id == 70
    from osi3.osi_sensordata_pb2 import SensorData

    data = SensorData.FromString(bytes(scan(result.members, sensor_id=result.sensor_id)[0].sensor_data))
    assert data.sensor_id.value == 7 and data.feature_data.lidar_sensor[0].header.sensor_id.value == 70


def test_a_velodynes_rays_stay_within_a_narrower_cone_though_its_beams_are_offset():
    """The VLP-16's beams fire at azimuth offsets of their column's: a column is kept only when all of its rays
    are inside."""
    pattern = load_rig("velodyne_vlp16")[0].sensor.pattern
    narrow = narrow_pattern(pattern, math.radians(30), math.radians(10), None, None)
    assert np.all(np.abs(narrow.azimuth_rad) <= math.radians(15) + 1e-6)
    assert np.all(np.abs(narrow.elevation_rad) <= math.radians(5) + 1e-6)
    assert narrow.rows == 6 and 0 < narrow.columns < pattern.columns  # −5, −3, −1, 1, 3, 5°
    assert set(np.unique(narrow.beam_id)) <= set(np.unique(pattern.beam_id))  # the lasers keep their ids


# -- what cannot be followed, and what cannot be read ---------------------------------------------------
@pytest.mark.parametrize("changes, words", [
    ({"lidar.field_of_view_vertical": 2.0}, "lidar 0 field_of_view_vertical 2 rad: wider than the unit's"),
    ({"lidar.number_of_rays_horizontal": 720}, "number_of_rays_horizontal 720: more than the unit's 360"),
    ({"range": 500.0}, "range 500 m: the lidars reach 100 m at most"),
    ({"lidar.max_number_of_interactions": 4}, "max_number_of_interactions: a property of the environment"),
    ({"omit_static_information": True}, "omit_static_information"),
    ({"lidar.num_of_pixels": 5}, "lidar 0 num_of_pixels: the model casts its own rays"),
])
def test_a_field_the_model_cannot_follow_is_one_line_and_changes_nothing(changes, words):
    result = followed(SMALL_SENSOR, **changes)
    assert len(result.not_followed) == 1 and words in result.not_followed[0], result.not_followed
    assert len(result.members[0].sensor.pattern) == 16 * 360 and result.members[0].sensor.max_range_m == 100


def test_a_master_that_writes_only_what_it_decides():
    """A configuration built from scratch, not from the request: the fields it leaves unset say nothing (no range
    of 0, no empty pattern); the ones it sets are followed."""
    rig = load_rig(SMALL_SENSOR)
    config = SensorViewConfiguration()
    config.field_of_view_horizontal = math.pi
    config.mounting_position.position.z = 1.5
    config.lidar_sensor_view_configuration.add().number_of_rays_vertical = 8
    result = follow_view_configuration(rig, request_of(rig), config.SerializeToString())
    assert result.not_followed == []
    (member,) = result.members
    assert (member.sensor.pattern.rows, member.sensor.pattern.columns) == (8, 181)
    assert member.sensor.max_range_m == 100 and member.sensor.frame_period_s == pytest.approx(0.1)
    assert member.mounting_pose[2, 3] == pytest.approx(1.5)


def test_directions_of_the_narrowed_rays_are_followed():
    """A master that narrows the field of view and lists the rays left as directions and timings asks exactly what
    the model casts: nothing to say."""
    fov = NARROWINGS["field_of_view_horizontal"]
    narrowed = followed(SMALL_SENSOR, **{"lidar.field_of_view_horizontal": fov}).members[0].sensor.pattern
    rig = load_rig(SMALL_SENSOR)
    config = read_view_configuration(request_of(rig))
    lidar = config.lidar_sensor_view_configuration[0]
    lidar.field_of_view_horizontal = fov
    del lidar.directions[:]
    for x, y, z in narrowed.directions.astype(np.float64):
        d = lidar.directions.add()
        d.x, d.y, d.z = x, y, z
    lidar.ClearField("timings")
    lidar.timings.extend(np.round(narrowed.time_offset_s.astype(np.float64) * 1e6).astype(np.uint32).tolist())
    lidar.num_of_pixels = len(narrowed)
    result = follow_view_configuration(rig, request_of(rig), config.SerializeToString())
    assert result.not_followed == [] and len(result.members[0].sensor.pattern) == len(narrowed)


@pytest.mark.parametrize("config, words", [
    (b"\x0a\xff\xff\xff\xff\x0f", "no SensorViewConfiguration"),
    (answer(**{"lidar.field_of_view_vertical": 1e-3})(request_of(load_rig(SMALL_SENSOR))),
     "leaves none of lidar 0's rays"),  # its beams lie at ±1°, ±3°, …
    (answer(**{"lidar.number_of_rays_vertical": 0})(request_of(load_rig(SMALL_SENSOR))), "OSI asks for ≥ 1"),
    (answer(update_cycle_time=0.0)(request_of(load_rig(SMALL_SENSOR))), "update_cycle_time is 0 s"),
    (answer(range=0.0)(request_of(load_rig(SMALL_SENSOR))), "not beyond lidar 0's minimum range"),
    (answer(**{"lidar.field_of_view_horizontal": math.nan})(request_of(load_rig(SMALL_SENSOR))),
     "field_of_view_horizontal [nan] rad: lidar 0's field of view must be a finite angle"),
    (answer(field_of_view_vertical=math.inf)(request_of(load_rig(SMALL_SENSOR))),
     "field_of_view_vertical [inf] rad: lidar 0's field of view must be a finite angle"),
])
def test_a_configuration_the_model_cannot_simulate_is_an_error_naming_the_field(config, words):
    rig = load_rig(SMALL_SENSOR)
    with pytest.raises(ViewConfigurationError, match="OSMPSensorViewInConfig") as error:
        follow_view_configuration(rig, request_of(rig), config)
    assert words in str(error.value) and "\n" not in str(error.value)


def test_a_rig_takes_each_lidars_entry_and_the_top_level_fields_for_the_first():
    front = SMALL_SENSOR | {"mounting": {"xyz_m": [3.0, 0.0, 1.0]}}
    rear = SMALL_SENSOR | {"mounting": {"xyz_m": [-1.0, 0.0, 1.0], "rpy_deg": [0, 0, 180]}}
    rig = load_rig([front, rear])
    config = SensorViewConfiguration.FromString(request_of(rig))
    config.field_of_view_horizontal = math.pi / 2  # the first lidar's (the request gives it so)
    config.lidar_sensor_view_configuration[1].number_of_rays_vertical = 8
    result = follow_view_configuration(rig, request_of(rig), config.SerializeToString())
    first, second = (m.sensor.pattern for m in result.members)
    assert (first.rows, first.columns) == (16, 91) and (second.rows, second.columns) == (8, 360)
    assert result.members[1].mounting_pose is rig[1].mounting_pose  # unchanged: the rig's own
