"""The sensor's ``SensorViewConfiguration`` (OSMPSensorViewInConfigRequest), and reading one back.

Tells the environment simulation what this lidar looks at: field of view,
ray counts, every ray's direction (unit vector, sensor frame) and firing time
offset (``timings``, µs after the frame start), and the mounting position.

Fields of view are OSI's (osi_sensorviewconfiguration.proto, ``field_of_view_horizontal``/``_vertical``): the
viewing range is ``[-fov/2, fov/2]`` about the sensor's x axis, so a pattern that is not symmetric (a Velodyne
HDL-32E looks from −30.67° to +10.67°) asks for twice its largest angle, the cone that holds every ray.
"""
from __future__ import annotations

import numpy as np

from ..errors import LidarFmuError
from .encode import default_interface_version, set_mounting_position, varint

#: m/s, exact (SI definition of the metre): OSI's ``emitter_frequency`` is the emitted light's, c / wavelength
SPEED_OF_LIGHT_M_S = 299_792_458.0

_VECTOR3D_DTYPE = np.dtype(
    [("tag", "u1"), ("length", "u1"),
     ("tx", "u1"), ("x", "<f8"), ("ty", "u1"), ("y", "<f8"), ("tz", "u1"), ("z", "<f8")]
)
_DIRECTIONS_FIELD = 11
_LIDAR_CONFIGURATION_FIELD = 1002


def _length_delimited(field_number: int, payload: bytes) -> bytes:
    return varint(field_number << 3 | 2) + varint(len(payload)) + payload


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


class ViewConfigurationError(LidarFmuError, ValueError):
    """An OSMPSensorViewInConfig the model cannot read or cannot simulate."""


def fields_of_view(pattern) -> tuple[float, float]:
    """(horizontal, vertical) rad: OSI's symmetric fields of view that hold every ray of ``pattern`` (module doc);
    the horizontal one at most a full turn."""
    return (float(min(2 * np.pi, 2 * np.max(np.abs(pattern.azimuth_rad)))),
            float(2 * np.max(np.abs(pattern.elevation_rad))))


def read_view_configuration(data: bytes):
    """``data`` parsed as an ``osi3.SensorViewConfiguration`` → the message; :class:`ViewConfigurationError` naming
    what is wrong when it is none."""
    from google.protobuf.message import DecodeError
    from osi3.osi_sensorviewconfiguration_pb2 import SensorViewConfiguration

    config = SensorViewConfiguration()
    try:
        config.ParseFromString(bytes(data))
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ViewConfigurationError(f"OSMPSensorViewInConfig: {len(data)} bytes that are no "
                                     f"SensorViewConfiguration ({exc})") from None
    return config


def lidar_view_configuration(sensor, pattern, mounting_pose, sensor_id: int):
    """``osi3.LidarSensorViewConfiguration`` of ``sensor`` firing ``pattern`` (its frame, or a step's rays) from
    ``mounting_pose`` (vehicle_from_sensor): everything but the rays' ``directions`` and ``timings``."""
    from osi3.osi_sensorviewconfiguration_pb2 import LidarSensorViewConfiguration

    lidar = LidarSensorViewConfiguration()
    lidar.sensor_id.value = sensor_id
    set_mounting_position(lidar.mounting_position, mounting_pose)
    lidar.field_of_view_horizontal, lidar.field_of_view_vertical = fields_of_view(pattern)
    lidar.number_of_rays_horizontal = pattern.columns
    lidar.number_of_rays_vertical = pattern.rows
    lidar.max_number_of_interactions = 1
    lidar.emitter_frequency = SPEED_OF_LIGHT_M_S / (sensor.wavelength_nm * 1e-9)  # the light's, Hz
    lidar.num_of_pixels = len(pattern)
    return lidar


def rig_view_configuration(lidars) -> bytes:
    """Serialized ``osi3.SensorViewConfiguration`` asking for one ``lidar_sensor_view`` per lidar of
    ``lidars`` ((sensor, mounting_pose vehicle_from_sensor, sensor_id) each, in rig order); the
    configuration's own id, mounting, fields of view and cycle are the first lidar's, its range the longest."""
    from osi3.osi_sensorviewconfiguration_pb2 import SensorViewConfiguration

    sensor, mounting_pose, sensor_id = lidars[0]
    fov_h, fov_v = fields_of_view(sensor.pattern)
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
        lidar = lidar_view_configuration(sensor, pattern, mounting_pose, sensor_id)
        lidar.timings.extend(np.round(pattern.time_offset_s.astype(np.float64) * 1e6).astype(np.uint32).tolist())
        # Protobuf merges repeated fields appended after the rest of a message, so
        # the 131k directions go in as raw bytes instead of 131k Python objects.
        lidar_bytes = lidar.SerializeToString() + directions_bytes(pattern.directions)
        out.append(_length_delimited(_LIDAR_CONFIGURATION_FIELD, lidar_bytes))
    return b"".join(out)
