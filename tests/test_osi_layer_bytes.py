"""The compiled writers of the reflections and logical detections against the same fields set one by one through
the official ``osi3`` classes: the bytes must be ``SerializeToString()``'s, on crafted clouds (none, one ray, misses,
several echoes on a ray, ids of 1 to 10 varint bytes, zero reflectivity and range)."""
import numpy as np
import pytest
from osi3.osi_logicaldetectiondata_pb2 import LogicalDetectionDataHeader
from osi3.osi_sensordata_pb2 import SensorData
from osi3.osi_sensorview_pb2 import LidarSensorView

from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.osi.config import SPEED_OF_LIGHT_M_S
from lidar_fmu.osi.encode import default_interface_version, set_timestamp
from lidar_fmu.osi.layers import (
    LOGICAL_CLASSIFICATION,
    LayerLidar,
    cloud_powers,
    logical_pieces,
    reflections_piece,
    relative_powers,
)
from lidar_fmu.physics.range_limit import detection_floor_db, relative_power_db
from lidar_fmu.pointcloud import NO_OBJECT_ID, POINT_DTYPE, PointCloud
from lidar_fmu.sensors import load_sensor

WAVELENGTH_NM, RANGE_OFFSET_M = 905.0, 0.0125
#: object ids whose varints take 1, 1, 2, 3, 5 and 10 bytes
IDS = np.array([0, 127, 128, 20_000, 2**32, int(NO_OBJECT_ID)], np.uint64)
SPEC = {"horizontal_fov_deg": [30, -30], "horizontal_samples": 8, "vertical_fov_deg": [-3, 3], "channels": 2,
        "frame_rate_hz": 10.0, "max_range_m": 120.0, "motion_distortion": False,
        "range_reflectivity": {"pairs": [[0.1, 60.0], [0.8, 120.0]], "fit": "log"}}


def _cloud(ray_index, *, velocity=False, seed=0) -> PointCloud:
    """Returns on rays ``ray_index`` with ids cycling through :data:`IDS` and edge values: a zero reflectivity, a
    zero range, a range of 300 m, negative normals, a radial velocity of each sign where ``velocity``."""
    rng = np.random.default_rng(seed)
    m = len(ray_index)
    points = np.zeros(m, POINT_DTYPE)
    points["range"] = rng.uniform(0.5, 200.0, m)
    points["range"][: min(m, 3)] = [0.0, 300.0, 1e-4][: min(m, 3)]
    points["x"], points["y"], points["z"] = rng.normal(size=(3, m)) * 20.0
    points["reflectivity"] = rng.uniform(0.0, 1.2, m)
    points["reflectivity"][::4] = 0.0
    points["normal_x"], points["normal_y"], points["normal_z"] = rng.normal(size=(3, m))
    points["object_id"] = IDS[np.arange(m) % len(IDS)]
    points["beam_id"] = np.asarray(ray_index) % 2
    return PointCloud(points, np.asarray(ray_index, np.int32), 0, 0,
                      radial_velocity_m_s=rng.uniform(-40.0, 40.0, m).astype(np.float32) if velocity else None,
                      semantic=rng.integers(0, len(LOGICAL_CLASSIFICATION) + 3, m).astype(np.uint8))


def _reflections_reference(cloud: PointCloud, rays: int) -> bytes:
    """Each ray's reflection (its nearest return; the first of equals) set through ``osi3.LidarSensorView``."""
    view = LidarSensorView()
    metres_to_hz = 2.0 / (WAVELENGTH_NM * 1e-9)
    for r in range(rays):
        on_ray = np.flatnonzero(cloud.ray_index == r)
        reflection = view.reflection.add()
        if not len(on_ray):
            reflection.signal_strength = -np.inf
            continue
        k = on_ray[np.argmin(cloud.points["range"][on_ray])]
        p = cloud.points[k]
        beam_m = float(p["range"]) - RANGE_OFFSET_M
        reflection.signal_strength = relative_power_db(float(p["reflectivity"]), beam_m)
        reflection.time_of_flight = 2.0 * beam_m / SPEED_OF_LIGHT_M_S
        velocity = cloud.radial_velocity_m_s
        reflection.doppler_shift = 0.0 if velocity is None else -float(velocity[k]) * metres_to_hz
        normal = reflection.normal_to_surface
        normal.x, normal.y, normal.z = (float(p[name]) for name in ("normal_x", "normal_y", "normal_z"))
        reflection.object_id.value = int(p["object_id"])
    return view.SerializeToString()


def _written(piece) -> bytes:
    buf = np.empty(len(piece) + 16, np.uint8)  # (room past the end: a writer must not need it)
    assert piece.write(buf[: len(piece)]) == len(piece)
    return buf[: len(piece)].tobytes()


@pytest.mark.parametrize(("rays", "ray_index", "velocity"), [
    (0, [], False),  # no rays at all
    (5, [], False),  # every ray a miss
    (1, [0], True),  # one ray
    (6, [0, 2, 2, 5, 2], True),  # misses between, three echoes on ray 2 (the nearest is reported)
    (40, list(range(0, 40, 3)) * 2, False),  # two echoes a ray, no radial velocities (Doppler 0)
    (300, np.arange(300), True),  # every id size, zero reflectivity and range
])
def test_reflections_are_the_bytes_of_osis_own_classes(rays, ray_index, velocity):
    cloud = _cloud(ray_index, velocity=velocity)
    piece = reflections_piece(cloud, rays, RANGE_OFFSET_M, WAVELENGTH_NM, relative_powers(cloud.points, RANGE_OFFSET_M))
    assert _written(piece) == _reflections_reference(cloud, rays)


def _logical_reference(lidars, positions, timestamp_s) -> bytes:
    """``logical_detection_data`` set through ``osi3.SensorData``, field by field."""
    message = SensorData()
    data = message.logical_detection_data
    data.version.CopyFrom(default_interface_version())
    set_timestamp(data.header.logical_detection_time, timestamp_s)
    data.header.data_qualifier = LogicalDetectionDataHeader.DATA_QUALIFIER_AVAILABLE
    data.header.number_of_valid_logical_detections = sum(len(lidar.cloud) for lidar in lidars)
    for lidar in lidars:
        data.header.sensor_id.add().value = lidar.sensor_id
    for lidar, position in zip(lidars, positions):
        cloud, floor = lidar.cloud, detection_floor_db(lidar.sensor.range_limit)
        existence = np.broadcast_to(1.0 if cloud.existence_probability is None else cloud.existence_probability,
                                    (len(cloud),))
        for k, p in enumerate(cloud.points):
            detection = data.logical_detection.add()
            detection.existence_probability = float(existence[k])
            detection.object_id.value = int(p["object_id"])
            detection.position.x, detection.position.y, detection.position.z = (float(v) for v in position[k])
            detection.intensity = (float(p["reflectivity"]) * 100.0 if cloud.intensity_percent is None
                                   else float(cloud.intensity_percent[k]))
            if floor is not None:
                detection.snr = relative_power_db(float(p["reflectivity"]), float(p["range"])) - floor
            detection.sensor_id.add().value = lidar.sensor_id
            code = min(int(cloud.semantic[k]), len(LOGICAL_CLASSIFICATION) - 1)
            detection.classification = int(LOGICAL_CLASSIFICATION[code])
            if cloud.echo_pulse_width_m is not None:
                detection.echo_pulse_width = float(cloud.echo_pulse_width_m[k])
    return message.SerializeToString()


def _in_vehicle_frame(lidar) -> np.ndarray:
    """(M, 3): each point in the vehicle frame, coordinate by coordinate in float64."""
    x, y, z = (lidar.cloud.points[name].astype(np.float64) for name in "xyz")
    pose = lidar.mounting
    return np.stack([pose[i, 0] * x + pose[i, 1] * y + pose[i, 2] * z + pose[i, 3] for i in range(3)], axis=1)


@pytest.mark.parametrize("m", [0, 1, 7, 250])
def test_logical_detections_are_the_bytes_of_osis_own_classes(m):
    sensor = load_sensor(SPEC)
    unlimited = load_sensor({key: value for key, value in SPEC.items() if key != "range_reflectivity"})
    first = _cloud(np.arange(m), seed=1)  # existence, intensity, pulse widths from the model
    first.existence_probability = np.linspace(0.0, 1.0, m)
    first.intensity_percent = np.linspace(0.0, 100.0, m).astype(np.float32)
    first.echo_pulse_width_m = np.linspace(0.5, 3.0, m)
    second = _cloud(np.arange(m), seed=2)  # none of them; a unit without a detection floor (no snr)
    lidars = [LayerLidar(first, sensor, pose_matrix((1.2, -0.4, 1.9), (0.02, -0.1, 2.5)), 7),
              LayerLidar(second, unlimited, pose_matrix((-0.8, 0.3, 0.6), (3.1, 0.0, -0.7)), 2**40)]
    positions = [_in_vehicle_frame(lidar) for lidar in lidars]
    pieces = logical_pieces(lidars, [cloud_powers(lidar.cloud) for lidar in lidars], 12.345)
    written = b"".join(piece if isinstance(piece, bytes) else _written(piece) for piece in pieces)
    assert written == _logical_reference(lidars, positions, 12.345)
