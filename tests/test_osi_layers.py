"""The OSI layers beside the detections (spec key / FMU parameter ``outputs``): reflections, logical detections and
the object list, each checked on a small crafted scene against what it must equal."""
import numpy as np
import pytest
from osi3.osi_logicaldetectiondata_pb2 import LogicalDetectionClassification
from osi3.osi_object_pb2 import StationaryObject
from osi3.osi_sensordata_pb2 import SensorData
from osi3.osi_sensorview_pb2 import SensorView

from helpers.osi_views import HOST_ID, sensor_view
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.errors import UserError
from lidar_fmu.geometry import semantic
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.osi.config import SPEED_OF_LIGHT_M_S
from lidar_fmu.osi.detections import sensor_data_to_points
from lidar_fmu.osi.layers import LOGICAL_CLASSIFICATION
from lidar_fmu.osi.objects import MIN_OBJECT_RETURNS, fit_box
from lidar_fmu.physics.range_limit import detection_floor_db, fit_range_limit
from lidar_fmu.sensors import SensorSpecError, load_sensor
from lidar_fmu.sensors.outputs import OutputsError, parse_outputs
from lidar_fmu.sensors.rig import load_rig
from lidar_fmu.tools.replay import check_replay_outputs

ALL = "detections,reflections,logical,objects"
SWEEP = {"horizontal_fov_deg": [30, -30], "horizontal_samples": 61, "vertical_fov_deg": [-3, 3], "channels": 4,
         "frame_rate_hz": 10.0, "max_range_m": 120.0, "motion_distortion": False,
         "range_reflectivity": {"pairs": [[0.1, 60.0], [0.8, 120.0]], "fit": "log"}}
WALL_ID, CAR_ID, HIDDEN_ID = 50, 60, 70
CAR_SIZE_M = (4.5, 1.8, 1.5)
ROOF = ((1.0, 0.0, 1.6), (0.0, 0.0, 0.0))  # the lidar above the host's roof (vehicle frame)


def _wall(x_m, velocity=None, width_m=200.0):
    """An OSI box 20 m high standing across the x axis at ``x_m`` (m, world)."""
    return (WALL_ID, (x_m, 0.0, 2.0), (0, 0, 0), (0.2, width_m, 20.0), "", velocity, None)


def _step(model, views):
    out = None
    for k, view in enumerate(views, start=1):
        out = model.step(view, 0.1 * k)
        assert out.valid, out.message
    return SensorData.FromString(bytes(out.sensor_data)), bytes(out.sensor_data)


def _reflections(data: SensorData, k: int = 0):
    view = data.sensor_view[k].lidar_sensor_view[0]
    directions = np.array([(d.x, d.y, d.z) for d in view.view_configuration.directions])
    return view, directions


# -- the outputs key ---------------------------------------------------------------------------------------------
def test_outputs_are_a_comma_list_of_the_layers_refused_in_one_line_naming_the_key():
    assert parse_outputs(" Objects, detections ") == ("detections", "objects")  # in the layers' order
    assert parse_outputs("") is None and parse_outputs(None) is None
    with pytest.raises(OutputsError, match=r"^outputs: unknown layer 'lasers'; choose a comma list of detections, "):
        parse_outputs("detections,lasers")
    with pytest.raises(SensorSpecError, match=r"^sensor spec key 'outputs': unknown layer 'points'"):
        load_sensor(SWEEP | {"outputs": ["points"]})
    with pytest.raises(OutputsError, match=r"^outputs parameter: unknown layer ''"):
        OsiSensorModel(SWEEP, environment="none", backend="embree", outputs="detections,,objects")
    # a replay writes its point clouds from the detections: a list without them is refused before any work
    with pytest.raises(UserError, match=r"^outputs reflections: a replay writes its point clouds from the detections"):
        check_replay_outputs("reflections", load_rig(SWEEP))
    check_replay_outputs(None, load_rig(SWEEP | {"outputs": "detections,objects"}))


def test_the_spec_key_chooses_the_layers_and_the_parameter_wins():
    assert OsiSensorModel(SWEEP, environment="none", backend="embree").layers is None  # the detections' own path
    model = OsiSensorModel(SWEEP | {"outputs": "reflections"}, environment="none", backend="embree")
    assert model.outputs == ("reflections",)
    model = OsiSensorModel(SWEEP | {"outputs": "reflections"}, environment="none", backend="embree", outputs=ALL)
    assert model.outputs == ("detections", "reflections", "logical", "objects")


def test_other_layers_leave_the_detections_as_they_were_and_the_bytes_are_protobufs_own():
    views = [sensor_view([_wall(40.0)], 0.1 * k, mounting=ROOF) for k in (1, 2)]
    plain, plain_bytes = _step(OsiSensorModel(SWEEP, environment="none", backend="embree"), views)
    every, every_bytes = _step(OsiSensorModel(SWEEP, environment="none", backend="embree", outputs=ALL), views)
    assert every.SerializeToString() == every_bytes  # field order and encodings as SerializeToString() gives
    assert every.feature_data == plain.feature_data and len(plain.feature_data.lidar_sensor[0].detection) > 100
    _, named_bytes = _step(OsiSensorModel(SWEEP, environment="none", backend="embree", outputs="detections"), views)
    assert named_bytes == plain_bytes
    none, _ = _step(OsiSensorModel(SWEEP, environment="none", backend="embree", outputs="reflections"), views)
    assert not none.HasField("feature_data") and len(none.sensor_view) == 1


# -- reflections -------------------------------------------------------------------------------------------------
def test_one_reflection_per_ray_whose_time_of_flight_is_each_detections_range():
    """A wall part of the view: every ray has its reflection in the order of the view configuration's directions
    (with their timings); a ray that misses gives −∞ dB alone; each detection is its ray's direction × c·ToF/2."""
    model = OsiSensorModel(SWEEP, environment="none", backend="embree", outputs=ALL)
    data, raw = _step(model, [sensor_view([_wall(30.0, width_m=20.0)], 0.1, mounting=ROOF)])
    view, directions = _reflections(data)
    # OSI's rules ask every SensorView for its host, an id that resolves to a moving object of its ground truth
    assert data.sensor_view[0].host_vehicle_id.value == HOST_ID
    assert [o.id.value for o in data.sensor_view[0].global_ground_truth.moving_object] == [HOST_ID]
    pattern = model.sensor.pattern
    assert len(view.reflection) == len(directions) == len(view.view_configuration.timings) == len(pattern)
    np.testing.assert_allclose(directions, pattern.directions, atol=1e-7)
    assert list(view.view_configuration.timings) == list(np.round(pattern.time_offset_s * 1e6).astype(int))
    cloud = model.last_cloud
    hit = np.zeros(len(pattern), bool)
    hit[cloud.ray_index] = True
    assert 0 < hit.sum() < len(pattern)  # the wall is 20 m wide: the sweep's edges miss it
    missed = [view.reflection[i] for i in np.flatnonzero(~hit)]
    assert all(r.signal_strength == -np.inf and not r.HasField("time_of_flight") for r in missed)
    tof = np.array([view.reflection[i].time_of_flight for i in cloud.ray_index])
    detections = sensor_data_to_points(raw)
    distance = np.linalg.norm(detections.xyz.astype(np.float64), axis=1)
    assert np.abs(SPEED_OF_LIGHT_M_S * tof / 2 - distance).max() <= 0.002
    # the round trip: the cloud rebuilt from the reflections is the detections
    rebuilt = directions[cloud.ray_index] * (SPEED_OF_LIGHT_M_S * tof / 2)[:, None]
    assert np.abs(rebuilt - detections.xyz).max() <= 0.002
    normals = np.array([(r.normal_to_surface.x, r.normal_to_surface.y, r.normal_to_surface.z)
                        for r in (view.reflection[i] for i in cloud.ray_index)])
    np.testing.assert_allclose(normals, [(-1.0, 0.0, 0.0)] * len(normals), atol=1e-6)  # sensor frame, facing it
    assert {view.reflection[i].object_id.value for i in cloud.ray_index} == {WALL_ID}


def test_a_wall_approaching_at_10_m_s_shifts_each_ray_by_2_v_cos_over_lambda():
    """A pulsed unit's reflections carry the Doppler shift all the same: +2·10·cos θ/λ (OSI: the received light's
    shift from the emitted, positive approaching), θ between the ray and the wall's motion."""
    model = OsiSensorModel(SWEEP, environment="none", backend="embree", outputs="detections,reflections")
    data, _ = _step(model, [sensor_view([_wall(60.0 - 10.0 * 0.1 * k, (-10.0, 0, 0))], 0.1 * k, mounting=ROOF)
                            for k in (1, 2)])
    view, directions = _reflections(data)
    shift = np.array([r.doppler_shift for r in view.reflection])
    expected = 2 * 10.0 * directions[:, 0] / (model.sensor.wavelength_nm * 1e-9)
    assert np.all(np.abs(shift - expected) <= 0.01 * expected)
    assert not data.feature_data.lidar_sensor[0].detection[0].HasField("radial_velocity")  # a pulsed unit's


def test_signal_strength_falls_with_range_as_the_lidar_equation_on_one_material():
    """The same wall at 10, 20 and 40 m: the ray straight ahead reads 6 dB less each time the range doubles."""
    ahead = None
    strength = []
    for x_m in (10.0, 20.0, 40.0):
        model = OsiSensorModel(SWEEP, environment="none", backend="embree", outputs="detections,reflections")
        data, _ = _step(model, [sensor_view([_wall(x_m)], 0.1, host=None)])
        view, directions = _reflections(data)
        ahead = int(np.argmax(directions[:, 0])) if ahead is None else ahead
        strength.append(view.reflection[ahead].signal_strength)
    steps = np.diff(strength)
    assert np.all(steps < 0)
    np.testing.assert_allclose(steps, -20 * np.log10(2.0), atol=0.05)


# -- logical detections ------------------------------------------------------------------------------------------
def test_logical_detections_are_the_detections_in_the_vehicle_frame():
    """A lidar turned and tilted on the roof: each logical detection is the mounting applied to its detection
    (within 1 mm), with its intensity, an SNR over the unit's detection floor, the lidar's id and a class."""
    mounting = ((1.2, 0.3, 1.7), (0.02, 0.05, 0.3))
    model = OsiSensorModel(SWEEP, environment="none", backend="embree", outputs=ALL, sensor_id=7)
    data, raw = _step(model, [sensor_view([_wall(25.0)], 0.1, mounting=mounting)])
    detections = sensor_data_to_points(raw)
    logical = data.logical_detection_data.logical_detection
    assert len(logical) == len(detections) == data.logical_detection_data.header.number_of_valid_logical_detections
    position = np.array([(d.position.x, d.position.y, d.position.z) for d in logical])
    vehicle_from_sensor = pose_matrix(*mounting)
    expected = detections.xyz.astype(np.float64) @ vehicle_from_sensor[:3, :3].T + vehicle_from_sensor[:3, 3]
    assert np.abs(position - expected).max() <= 0.001
    feature = data.feature_data.lidar_sensor[0].detection
    assert [d.intensity for d in logical] == [d.intensity for d in feature]
    assert {tuple(i.value for i in d.sensor_id) for d in logical} == {(7,)}
    assert [i.value for i in data.logical_detection_data.header.sensor_id] == [7]
    floor = detection_floor_db(model.sensor.range_limit)
    beam_m = np.asarray(model.last_cloud.points["range"], np.float64)
    power = 10 * np.log10(model.last_cloud.points["reflectivity"].astype(np.float64) * (10.0 / beam_m) ** 2)
    np.testing.assert_allclose([d.snr for d in logical], power - floor, atol=1e-9)
    other = LogicalDetectionClassification.Value("LOGICAL_DETECTION_CLASSIFICATION_OTHER")
    assert {d.classification for d in logical} == {other}  # an object: an obstacle


def test_the_detection_floor_is_the_datasheets_faintest_pair_and_classes_map_to_osis():
    limit = fit_range_limit([[0.1, 60.0], [0.8, 120.0]])
    assert detection_floor_db(limit) == pytest.approx(10 * np.log10(0.1 * (10.0 / 60.0) ** 2))
    assert detection_floor_db(None) is None
    value = LogicalDetectionClassification.Value
    assert LOGICAL_CLASSIFICATION[semantic.ROAD] == value("LOGICAL_DETECTION_CLASSIFICATION_OVERDRIVABLE")
    assert LOGICAL_CLASSIFICATION[semantic.WEATHER] == value("LOGICAL_DETECTION_CLASSIFICATION_CLUTTER")
    assert LOGICAL_CLASSIFICATION[semantic.CAR] == value("LOGICAL_DETECTION_CLASSIFICATION_OTHER")
    assert LOGICAL_CLASSIFICATION[semantic.UNLABELLED] == value("LOGICAL_DETECTION_CLASSIFICATION_UNKNOWN")


# -- the object list ---------------------------------------------------------------------------------------------
DENSE = SWEEP | {"horizontal_fov_deg": [60, -60], "horizontal_samples": 601, "vertical_fov_deg": [-20, 5],
                 "channels": 32}


def test_fit_box_finds_a_rectangles_heading_and_size_from_two_of_its_sides():
    t = np.linspace(-1, 1, 40)
    length, width, yaw = 4.5, 1.8, 0.4
    sides = np.concatenate([np.c_[t * length / 2, np.full(40, -width / 2)], np.c_[np.full(40, -length / 2),
                                                                                    t * width / 2]])
    turn = np.array([[np.cos(yaw), -np.sin(yaw)], [np.sin(yaw), np.cos(yaw)]])
    box = fit_box(np.c_[sides @ turn.T + (20.0, 5.0), np.linspace(0.2, 1.4, 80)])
    np.testing.assert_allclose(box.centre_m, (20.0, 5.0, 0.8), atol=0.02)
    assert box.yaw_rad == pytest.approx(yaw, abs=np.radians(0.5))
    np.testing.assert_allclose(box.dimension_m, (length, width, 1.2), atol=0.05)


def test_each_seen_object_is_one_box_fitted_to_its_returns_and_a_hidden_one_none():
    """A car 14 m off at an angle, a wall and, hidden behind the wall, another car: the car (≥ 20 returns) is one
    DetectedMovingObject within 0.5 m of its centre and 30 % of its length and width, its tracking id stable over
    frames and its age growing; the hidden car and the host are not in the list."""
    car = (CAR_ID, (12.0, 7.0, 0.75), (0, 0, 0.6), CAR_SIZE_M, "")
    wall = (WALL_ID, (25.0, -6.0, 2.0), (0, 0, 0), (0.2, 10.0, 4.0), "")
    hidden = (HIDDEN_ID, (32.0, -6.0, 0.75), (0, 0, 0), CAR_SIZE_M, "")
    model = OsiSensorModel(DENSE, environment="none", backend="embree", outputs=ALL, objects="boxes")
    ages, tracks = [], []
    for k in (1, 2):
        data, _ = _step(model, [sensor_view([car, wall, hidden], 0.1 * k, mounting=ROOF)])
        by_id = {o.header.ground_truth_id[0].value: o for o in data.moving_object}
        ages.append(by_id[CAR_ID].header.age)
        tracks.append(by_id[CAR_ID].header.tracking_id.value)
    assert np.count_nonzero(model.last_cloud.points["object_id"] == CAR_ID) >= 20
    assert set(by_id) == {CAR_ID, WALL_ID}  # not the hidden car, not the host
    assert not np.any(model.last_cloud.points["object_id"] == HIDDEN_ID)
    detected = by_id[CAR_ID]
    sensor_from_world = np.linalg.inv(model.last_sensor_pose)
    centre = sensor_from_world[:3, :3] @ car[1] + sensor_from_world[:3, 3]
    position = detected.base.position
    assert np.linalg.norm(np.array([position.x, position.y, position.z]) - centre) <= 0.5
    assert abs(detected.base.dimension.length - CAR_SIZE_M[0]) <= 0.3 * CAR_SIZE_M[0]
    assert abs(detected.base.dimension.width - CAR_SIZE_M[1]) <= 0.3 * CAR_SIZE_M[1]
    assert tracks == [CAR_ID, CAR_ID] and ages == [0.0, pytest.approx(0.1)]
    assert detected.header.existence_probability == 1.0 and list(detected.header.sensor_id) != []
    assert HOST_ID not in by_id and MIN_OBJECT_RETURNS <= 20


def test_a_seen_stationary_object_is_listed_with_its_osi_type_and_material():
    """A concrete building beside the road: one DetectedStationaryObject, its box about the returns, its OSI
    classification type and material."""
    view = SensorView.FromString(sensor_view([], 0.1, mounting=ROOF))
    building = view.global_ground_truth.stationary_object.add()
    building.id.value = 80
    building.base.position.x, building.base.position.y, building.base.position.z = 15.0, -8.0, 3.0
    building.base.dimension.length, building.base.dimension.width, building.base.dimension.height = 6.0, 4.0, 6.0
    building.classification.type = StationaryObject.Classification.TYPE_BUILDING
    building.classification.material = StationaryObject.Classification.MATERIAL_CONCRETE
    model = OsiSensorModel(DENSE, environment="none", backend="embree", outputs="objects", objects="boxes")
    data, _ = _step(model, [view.SerializeToString()])
    assert np.count_nonzero(model.last_cloud.points["object_id"] == 80) >= 20
    assert len(data.moving_object) == 0 and [o.header.ground_truth_id[0].value for o in data.stationary_object] == [80]
    listed = data.stationary_object[0]
    assert listed.candidate[0].classification.type == StationaryObject.Classification.TYPE_BUILDING
    assert listed.candidate[0].classification.material == StationaryObject.Classification.MATERIAL_CONCRETE
    sensor_from_world = np.linalg.inv(model.last_sensor_pose)
    centre = sensor_from_world[:3, :3] @ (15.0, -8.0, 3.0) + sensor_from_world[:3, 3]
    position = listed.base.position
    assert np.linalg.norm(np.array([position.x, position.y]) - centre[:2]) <= 0.5  # two sides seen: the whole box
    assert abs(listed.base.dimension.length - 6.0) <= 0.3 * 6.0 and abs(listed.base.dimension.width - 4.0) <= 1.2
