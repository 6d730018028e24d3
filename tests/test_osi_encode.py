"""SensorData encoding: bytes identical to the official osi3 serializer, fields round trip."""
from __future__ import annotations

import math

import numpy as np
import pytest
from osi3.osi_featuredata_pb2 import SensorDetectionHeader
from osi3.osi_sensordata_pb2 import SensorData
from osi3.osi_version_pb2 import DESCRIPTOR as VERSION_FILE
from osi3.osi_version_pb2 import current_interface_version

from lidar_fmu.geometry.transforms import pose_matrix, roll_pitch_yaw, rotation_matrix
from lidar_fmu.osi.encode import (
    DATA_QUALIFIER_AVAILABLE,
    DATA_QUALIFIER_NOT_AVAILABLE,
    LidarDetectionBlock,
    atan2_rad,
    encode_empty_sensor_data,
    encode_sensor_data,
    encode_sensor_data_buffer,
    set_timestamp,
    spherical_angles,
)
from lidar_fmu.pointcloud import NO_OBJECT_ID, POINT_DTYPE, PointCloud
from lidar_fmu.tools.bench_encode import build_sensor_data_reference, random_cloud

MOUNT = pose_matrix((1.25, -0.4, 1.85), (0.05, -0.2, 2.6))
HEAD = dict(timestamp_s=12.345678901, cycle_counter=7)  # the SensorData's own fields
KW = dict(**HEAD, sensor_id=42, mounting_position=MOUNT)


def block(cloud, **fields) -> LidarDetectionBlock:
    """The one lidar of these tests: ``cloud`` under KW's sensor id and mounting, with ``fields`` of the block."""
    return LidarDetectionBlock(cloud, sensor_id=42, mounting_position=MOUNT, **fields)


def make_cloud(n: int, seed: int) -> PointCloud:
    """Random returns plus the awkward ones: no-object ids, id 0, beam 0, poles, axes, signed zeros."""
    rng = np.random.default_rng(seed)
    pts = np.zeros(n, POINT_DTYPE)
    xyz = rng.normal(size=(n, 3)) * rng.uniform(0.1, 150.0, (n, 1))
    special = np.array([
        [0.0, 0.0, 5.0],  # straight up
        [0.0, 0.0, -3.0],  # straight down
        [-4.0, 0.0, 0.0],  # behind: azimuth +π
        [-4.0, -0.0, 1.0],  # behind, y = −0: azimuth −π
        [0.0, -7.0, 0.0],  # right: azimuth −π/2
        [-0.0, 2.0, 0.0],
        [3.0, -1e-30, 0.0],
        [1e-3, 1e-3, -1e-3],
        [0.0, 0.0, 0.0],
    ])
    xyz[: len(special)] = special
    pts["x"], pts["y"], pts["z"] = xyz.T
    pts["range"] = np.linalg.norm(pts[["x", "y", "z"]].tolist(), axis=1)
    pts["reflectivity"] = rng.uniform(0.0, 1.0, n)
    pts["reflectivity"][:3] = (0.0, 1.0, 0.5)
    pts["normal_z"] = 1.0
    pts["beam_id"] = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) >> rng.integers(0, 32, n).astype(
        np.uint32
    )
    pts["beam_id"][:4] = (0, 127, 128, 2**32 - 1)
    obj = rng.integers(0, 2**63, n, dtype=np.uint64) >> rng.integers(0, 64, n).astype(np.uint64)
    obj[rng.random(n) < 0.3] = NO_OBJECT_ID
    obj[:5] = (NO_OBJECT_ID, 0, 1, 2**63, 2**64 - 2)
    pts["object_id"] = obj
    return PointCloud(pts, np.arange(n, dtype=np.int32), 1, n)


def official_sensor_data(cloud, *, timestamp_s, sensor_id, mounting_position, cycle_counter,
                         existence=1.0, intensity=None, data_qualifier=DATA_QUALIFIER_AVAILABLE) -> SensorData:
    """The expected message, written out field by field with the osi3 classes (independent of the module)."""
    roll, pitch, yaw = roll_pitch_yaw(mounting_position[:3, :3])  # the conversion the brief prescribes
    seconds, nanos = divmod(round(timestamp_s * 1e9), 10**9)
    msg = SensorData()
    msg.version.CopyFrom(VERSION_FILE.GetOptions().Extensions[current_interface_version])
    msg.timestamp.seconds, msg.timestamp.nanos = seconds, nanos
    msg.sensor_id.value = sensor_id
    mp = msg.mounting_position
    mp.position.x, mp.position.y, mp.position.z = mounting_position[:3, 3]
    mp.orientation.roll, mp.orientation.pitch, mp.orientation.yaw = roll, pitch, yaw
    msg.last_measurement_time.CopyFrom(msg.timestamp)
    lidar = msg.feature_data.lidar_sensor.add()
    h = lidar.header
    h.measurement_time.CopyFrom(msg.timestamp)
    h.cycle_counter = cycle_counter
    h.mounting_position.CopyFrom(mp)
    h.data_qualifier = data_qualifier
    h.number_of_valid_detections = len(cloud)
    h.sensor_id.value = sensor_id
    for i, p in enumerate(cloud.points):
        x, y, z = float(p["x"]), float(p["y"]), float(p["z"])
        d = lidar.detection.add()
        d.existence_probability = existence if np.ndim(existence) == 0 else float(existence[i])
        d.object_id.value = int(p["object_id"])
        d.position.distance = math.sqrt(x * x + y * y + z * z)
        d.position.azimuth = atan2_rad.py_func(y, x)
        d.position.elevation = atan2_rad.py_func(z, math.sqrt(x * x + y * y))
        d.intensity = float(p["reflectivity"]) * 100.0 if intensity is None else float(intensity[i])
        d.reflectivity = float(p["reflectivity"])
        d.beam_id.value = int(p["beam_id"])
    return msg


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bytes_identical_to_official_serializer(seed):
    cloud = make_cloud(300, seed)
    ours = encode_sensor_data(block(cloud), **HEAD)
    assert ours == official_sensor_data(cloud, **KW).SerializeToString()
    assert ours == build_sensor_data_reference(block(cloud), **HEAD).SerializeToString()


def test_zero_valued_optional_fields_are_written_like_proto2():
    cloud = make_cloud(20, 3)
    cloud.points["object_id"] = 0
    cloud.points["beam_id"] = 0
    cloud.points["reflectivity"] = 0.0
    ours = encode_sensor_data(block(cloud, existence_probability=0.0), **HEAD)
    assert ours == official_sensor_data(cloud, **KW, existence=0.0).SerializeToString()
    d = SensorData.FromString(ours).feature_data.lidar_sensor[0].detection[0]
    assert d.HasField("object_id") and d.HasField("beam_id")
    assert d.HasField("existence_probability") and d.HasField("reflectivity") and d.HasField("intensity")


def test_per_point_existence_and_intensity():
    cloud = make_cloud(200, 4)
    rng = np.random.default_rng(0)
    existence = rng.random(200)
    intensity = rng.uniform(0, 100, 200)
    ours = encode_sensor_data(block(cloud, existence_probability=existence, intensity_percent=intensity), **HEAD)
    assert ours == official_sensor_data(cloud, **KW, existence=existence, intensity=intensity).SerializeToString()
    with pytest.raises(ValueError):
        encode_sensor_data(block(cloud, existence_probability=np.ones(3)), **HEAD)


def test_radial_velocities_are_written_in_osis_sign():
    """An FMCW cloud's dr/dt (negative approaching) goes out as OSI's radial_velocity, positive toward the sensor,
    byte for byte as the official classes write it, after an echo pulse width; a still point's is +0.0."""
    cloud = make_cloud(300, 8)
    range_rate = np.random.default_rng(8).normal(scale=20.0, size=300).astype(np.float32)
    range_rate[:3] = (0.0, -0.0, -10.0)
    pulse = np.random.default_rng(9).uniform(1.0, 3.0, 300)
    ours = encode_sensor_data(block(cloud, echo_pulse_width_m=pulse, radial_velocity_m_s=range_rate), **HEAD)
    expected = official_sensor_data(cloud, **KW)
    for d, width, rate in zip(expected.feature_data.lidar_sensor[0].detection, pulse, range_rate):
        d.echo_pulse_width = float(width)
        d.radial_velocity = 0.0 - float(rate)
    assert ours == expected.SerializeToString()
    assert ours == build_sensor_data_reference(block(cloud, echo_pulse_width_m=pulse, radial_velocity_m_s=range_rate),
                                               **HEAD).SerializeToString()
    written = [d.radial_velocity for d in SensorData.FromString(ours).feature_data.lidar_sensor[0].detection]
    assert written[2] == 10.0 and math.copysign(1.0, written[0]) == math.copysign(1.0, written[1]) == 1.0
    big = random_cloud(40_000, seed=10)  # several writing chunks
    rates = np.linspace(-50, 50, 40_000, dtype=np.float32)
    assert encode_sensor_data(block(big, radial_velocity_m_s=rates), **HEAD) == build_sensor_data_reference(
        block(big, radial_velocity_m_s=rates), **HEAD).SerializeToString()


def test_every_varint_size_and_long_length_prefixes():
    values = np.array([0, 1, 127, 128, 16383, 16384] + [2**k - 1 for k in range(1, 65)] + [2**k for k in range(64)],
                      np.uint64)
    cloud = make_cloud(len(values), 5)
    cloud.points["object_id"] = values
    cloud.points["beam_id"] = (values & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    assert encode_sensor_data(block(cloud), **HEAD) == official_sensor_data(cloud, **KW).SerializeToString()
    big = random_cloud(40_000, seed=6)  # lidar_sensor / feature_data lengths need 4-byte varints
    assert encode_sensor_data(block(big), **HEAD) == build_sensor_data_reference(block(big), **HEAD).SerializeToString()


def test_full_scan_survives_an_official_parse_and_reserialize():
    cloud = random_cloud(131072, seed=13)
    ours = encode_sensor_data(block(cloud), **HEAD)
    parsed = SensorData.FromString(ours)
    assert len(parsed.feature_data.lidar_sensor[0].detection) == 131072
    assert parsed.SerializeToString() == ours


def test_parsed_fields_match_the_cloud():
    cloud = make_cloud(300, 7)
    msg = SensorData.FromString(encode_sensor_data(block(cloud), **HEAD))
    version = VERSION_FILE.GetOptions().Extensions[current_interface_version]
    assert (msg.version.version_major, msg.version.version_minor, msg.version.version_patch) == (
        version.version_major, version.version_minor, version.version_patch)
    assert (msg.timestamp.seconds, msg.timestamp.nanos) == (12, 345678901)
    assert msg.sensor_id.value == 42
    lidar = msg.feature_data.lidar_sensor
    assert len(lidar) == 1
    h = lidar[0].header
    assert h.cycle_counter == 7 and h.sensor_id.value == 42
    assert h.data_qualifier == SensorDetectionHeader.DATA_QUALIFIER_AVAILABLE
    assert h.number_of_valid_detections == 300 == len(lidar[0].detection)
    assert h.mounting_position == msg.mounting_position
    assert h.measurement_time == msg.timestamp == msg.last_measurement_time

    p = cloud.points
    det = lidar[0].detection
    assert [d.object_id.value for d in det] == p["object_id"].tolist()
    assert [d.beam_id.value for d in det] == p["beam_id"].tolist()
    assert [d.reflectivity for d in det] == p["reflectivity"].astype(np.float64).tolist()
    assert [d.intensity for d in det] == (p["reflectivity"].astype(np.float64) * 100.0).tolist()
    assert all(d.existence_probability == 1.0 for d in det)
    r = np.array([d.position.distance for d in det])
    az = np.array([d.position.azimuth for d in det])
    el = np.array([d.position.elevation for d in det])
    x, y, z = (p[k].astype(np.float64) for k in "xyz")
    assert np.array_equal(r, np.sqrt(x * x + y * y + z * z))  # the point's position, whatever its range convention
    np.testing.assert_allclose(az, np.arctan2(y, x), rtol=4e-16, atol=0)
    np.testing.assert_allclose(el, np.arctan2(z, np.hypot(x, y)), rtol=4e-16, atol=0)
    # positive elevation is up: x = r·cos(el)·cos(az), y = r·cos(el)·sin(az), z = r·sin(el)
    xyz = np.stack([r * np.cos(el) * np.cos(az), r * np.cos(el) * np.sin(az), r * np.sin(el)], axis=1)
    assert np.all(np.abs(xyz - np.stack([x, y, z], axis=1)) <= 1e-5 * (1.0 + r[:, None]))
    assert el[0] == math.pi / 2 and el[1] == -math.pi / 2  # straight up / down
    assert az[2] == math.pi and az[3] == -math.pi and az[4] == -math.pi / 2
    assert (az < 0).any()


def test_empty_variant_has_qualifier_and_no_detections():
    msg = SensorData.FromString(encode_empty_sensor_data(**KW))
    lidar = msg.feature_data.lidar_sensor
    assert len(lidar) == 1 and len(lidar[0].detection) == 0
    assert lidar[0].header.data_qualifier == DATA_QUALIFIER_NOT_AVAILABLE
    assert lidar[0].header.HasField("number_of_valid_detections")
    assert lidar[0].header.number_of_valid_detections == 0
    assert msg.sensor_id.value == 42 and msg.timestamp.seconds == 12

    blind = SensorData.FromString(encode_empty_sensor_data(**KW, data_qualifier="DATA_QUALIFIER_BLINDNESS"))
    assert blind.feature_data.lidar_sensor[0].header.data_qualifier == SensorDetectionHeader.DATA_QUALIFIER_BLINDNESS
    with pytest.raises(ValueError):
        encode_empty_sensor_data(**KW, data_qualifier=99)


def test_cloud_without_points_is_available_with_zero_detections():
    empty = PointCloud(np.zeros(0, POINT_DTYPE), np.zeros(0, np.int32), 16, 1800)
    ours = encode_sensor_data(block(empty), **HEAD)
    assert ours == official_sensor_data(empty, **KW).SerializeToString()
    header = SensorData.FromString(ours).feature_data.lidar_sensor[0].header
    assert header.data_qualifier == DATA_QUALIFIER_AVAILABLE and header.number_of_valid_detections == 0


@pytest.mark.parametrize(
    "time_s, expected",
    [
        (0.0, (0, 0)),
        (1.1, (1, 100_000_000)),
        (12.345678901, (12, 345_678_901)),
        (0.9999999999, (1, 0)),  # rounds up into the next second
        (2.0000000004, (2, 0)),
        (2.0000000006, (2, 1)),
        (1e-10, (0, 0)),
        (-0.25, (-1, 750_000_000)),  # nanos stay non-negative
        (1_700_000_000.5, (1_700_000_000, 500_000_000)),
    ],
)
def test_timestamp_rounding(time_s, expected):
    msg = SensorData()
    set_timestamp(msg.timestamp, time_s)
    assert (msg.timestamp.seconds, msg.timestamp.nanos) == expected


def test_timestamp_rejects_non_finite():
    with pytest.raises(ValueError):
        encode_empty_sensor_data(**{**KW, "timestamp_s": float("nan")})


def test_measurement_times():
    msg = SensorData.FromString(encode_sensor_data(
        block(make_cloud(10, 8), measurement_time_s=12.3), **HEAD, last_measurement_time_s=12.25))
    h = msg.feature_data.lidar_sensor[0].header
    assert (h.measurement_time.seconds, h.measurement_time.nanos) == (12, 300_000_000)
    assert (msg.last_measurement_time.seconds, msg.last_measurement_time.nanos) == (12, 250_000_000)
    assert (msg.timestamp.seconds, msg.timestamp.nanos) == (12, 345_678_901)


@pytest.mark.parametrize("rpy", [(0.0, 0.0, 0.0), (0.1, -0.2, 0.3), (-3.0, 1.2, -2.9), (0.05, -0.2, 2.6)])
def test_mounting_position_round_trip(rpy):
    pose = pose_matrix((1.5, -0.25, 2.0), rpy)
    msg = SensorData.FromString(encode_empty_sensor_data(**{**KW, "mounting_position": pose}))
    for mp in (msg.mounting_position, msg.feature_data.lidar_sensor[0].header.mounting_position):
        assert (mp.position.x, mp.position.y, mp.position.z) == (1.5, -0.25, 2.0)
        got = (mp.orientation.roll, mp.orientation.pitch, mp.orientation.yaw)
        np.testing.assert_allclose(got, rpy, atol=1e-12)
        np.testing.assert_allclose(rotation_matrix(*got), pose[:3, :3], atol=1e-12)


def test_buffer_output_reuses_out():
    cloud = make_cloud(100, 9)
    expected = encode_sensor_data(block(cloud), **HEAD)
    out = np.zeros(len(expected) + 50, np.uint8)
    buf = encode_sensor_data_buffer(block(cloud), **HEAD, out=out)
    assert buf.base is out and buf.tobytes() == expected
    small = np.zeros(10, np.uint8)
    fresh = encode_sensor_data_buffer(block(cloud), **HEAD, out=small)
    assert fresh.base is None and fresh.tobytes() == expected and not small.any()


def test_strided_points_and_wrong_dtype():
    cloud = make_cloud(90, 10)
    view = cloud.points[::3]
    assert encode_sensor_data(block(view), **HEAD) == encode_sensor_data(block(view.copy()), **HEAD)
    with pytest.raises(TypeError):
        encode_sensor_data(block(np.zeros((4, 3), np.float32)), **HEAD)


def test_atan2_matches_libm_within_two_ulp_and_signed_zeros():
    rng = np.random.default_rng(11)
    y = rng.normal(size=20000) * 10.0 ** rng.uniform(-5, 5, 20000)
    x = rng.normal(size=20000) * 10.0 ** rng.uniform(-5, 5, 20000)
    for yi, xi in zip(y.tolist(), x.tolist()):
        ours, libm = atan2_rad(yi, xi), math.atan2(yi, xi)
        assert abs(ours - libm) <= 2 * math.ulp(libm)
        assert atan2_rad.py_func(yi, xi) == ours  # the reference relies on this
    for yi, xi in [(0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0), (1.0, 0.0), (-1.0, -0.0), (0.0, -2.0),
                   (-0.0, -2.0), (3.0, -0.0), (1.0, 1.0), (-1.0, -1.0), (1.0, -1.0)]:
        ours, libm = atan2_rad(yi, xi), math.atan2(yi, xi)
        assert ours == libm and math.copysign(1.0, ours) == math.copysign(1.0, libm), (yi, xi)


def test_spherical_angles_helper_matches_encoded():
    cloud = make_cloud(50, 12)
    az, el = spherical_angles(cloud.points)
    det = SensorData.FromString(encode_sensor_data(block(cloud), **HEAD)).feature_data.lidar_sensor[0].detection
    assert az.tolist() == [d.position.azimuth for d in det]
    assert el.tolist() == [d.position.elevation for d in det]
