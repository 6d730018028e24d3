"""The sensor's ``SensorViewConfiguration`` (OSMPSensorViewInConfigRequest).

Tells the environment simulation what this lidar looks at: field of view,
ray counts, every ray's direction (unit vector, sensor frame) and firing time
offset (``timings``, µs after the frame start), and the mounting position.
"""
from __future__ import annotations

import numpy as np

from .encode import _varint, default_interface_version, set_mounting_position

_VECTOR3D_DTYPE = np.dtype(
    [("tag", "u1"), ("length", "u1"),
     ("tx", "u1"), ("x", "<f8"), ("ty", "u1"), ("y", "<f8"), ("tz", "u1"), ("z", "<f8")]
)
_DIRECTIONS_FIELD = 11
_LIDAR_CONFIGURATION_FIELD = 1002


def _length_delimited(field_number: int, payload: bytes) -> bytes:
    return _varint(field_number << 3 | 2) + _varint(len(payload)) + payload


def directions_bytes(directions) -> bytes:
    """``repeated Vector3d directions = 11`` in wire format, built in one numpy pass.

    Every element has the same size (three fixed64 doubles), so the records
    are a packed structured array.
    """
    d = np.asarray(directions, dtype=np.float64)
    out = np.empty(len(d), _VECTOR3D_DTYPE)
    out["tag"] = _DIRECTIONS_FIELD << 3 | 2
    out["length"] = 27
    out["tx"], out["ty"], out["tz"] = 0x09, 0x11, 0x19  # fields 1, 2, 3 as fixed64
    out["x"], out["y"], out["z"] = d[:, 0], d[:, 1], d[:, 2]
    return out.tobytes()


def sensor_view_configuration(sensor, mounting_pose, sensor_id: int = 0) -> bytes:
    """Serialized ``osi3.SensorViewConfiguration`` for ``sensor`` mounted at ``mounting_pose`` (vehicle_from_sensor)."""
    return rig_view_configuration([(sensor, mounting_pose, sensor_id)])


def _fields_of_view(pattern) -> tuple[float, float]:
    azimuth = np.unwrap(pattern.azimuth_rad[:: pattern.rows]) if pattern.columns > 1 else np.zeros(1)
    swept = np.ptp(azimuth) * pattern.columns / max(pattern.columns - 1, 1)
    # every ray's azimuth about their mean direction: what the channels add (a raster's zones side by side)
    everything = pattern.azimuth_rad.astype(np.float64)
    centre = np.angle(np.mean(np.exp(1j * everything)))
    spread = np.ptp(np.angle(np.exp(1j * (everything - centre))))
    return float(min(2 * np.pi, max(swept, spread))), float(np.ptp(pattern.elevation_rad))


def rig_view_configuration(lidars) -> bytes:
    """Serialized ``osi3.SensorViewConfiguration`` asking for one ``lidar_sensor_view`` per lidar of
    ``lidars`` ((sensor, mounting_pose vehicle_from_sensor, sensor_id) each, in rig order); the
    configuration's own id, mounting, fields of view and cycle are the first lidar's, its range the longest."""
    from osi3.osi_sensorviewconfiguration_pb2 import LidarSensorViewConfiguration, SensorViewConfiguration

    sensor, mounting_pose, sensor_id = lidars[0]
    fov_h, fov_v = _fields_of_view(sensor.pattern)
    config = SensorViewConfiguration()
    config.version.CopyFrom(default_interface_version())
    config.sensor_id.value = sensor_id
    set_mounting_position(config.mounting_position, mounting_pose)
    config.field_of_view_horizontal = fov_h
    config.field_of_view_vertical = fov_v
    config.range = max(lidar[0].max_range_m for lidar in lidars)
    config.update_cycle_time.seconds = int(sensor.frame_period_s)
    config.update_cycle_time.nanos = int(round((sensor.frame_period_s % 1) * 1e9))
    out = [config.SerializeToString()]
    for sensor, mounting_pose, sensor_id in lidars:
        pattern = sensor.pattern
        lidar = LidarSensorViewConfiguration()
        lidar.sensor_id.value = sensor_id
        set_mounting_position(lidar.mounting_position, mounting_pose)
        lidar.field_of_view_horizontal, lidar.field_of_view_vertical = _fields_of_view(pattern)
        lidar.number_of_rays_horizontal = pattern.columns
        lidar.number_of_rays_vertical = pattern.rows
        lidar.max_number_of_interactions = 1
        lidar.emitter_frequency = len(pattern) * sensor.frame_rate_hz
        lidar.num_of_pixels = len(pattern)
        lidar.timings.extend(np.round(pattern.time_offset_s.astype(np.float64) * 1e6).astype(np.uint32).tolist())
        # Protobuf merges repeated fields appended after the rest of a message, so
        # the 131k directions go in as raw bytes instead of 131k Python objects.
        lidar_bytes = lidar.SerializeToString() + directions_bytes(pattern.directions)
        out.append(_length_delimited(_LIDAR_CONFIGURATION_FIELD, lidar_bytes))
    return b"".join(out)
