"""A master's side of OSMP's configuration handshake: the model's OSMPSensorViewInConfigRequest answered with one
field (or a few) changed, and what the model's output says about the rays it cast."""
from __future__ import annotations

import math

import numpy as np
from osi3.osi_sensorviewconfiguration_pb2 import SensorViewConfiguration

from lidar_fmu.osi.detections import decode_detections

#: the changes :func:`answer` knows: top-level fields by name, the first lidar's entry as ``lidar.<field>``
NARROWINGS = {
    "field_of_view_horizontal": math.pi / 2,  # ±45°
    "lidar.field_of_view_vertical": math.radians(16),  # ±8° of the small sensor's ±15°
    "lidar.number_of_rays_horizontal": 90,  # a quarter of the small sensor's 360 columns
    "lidar.number_of_rays_vertical": 4,  # a quarter of its 16 beams
    "update_cycle_time": 0.05,  # s: 20 Hz instead of 10
    "range": 15.0,  # m, of 100
    "mounting_position": ((0.5, 0.0, 2.5), (0.0, 0.0, 0.0)),
}


def answer(**changes):
    """A master's answer to the request: the request (bytes) with ``changes`` made (:data:`NARROWINGS`' names; a
    value None clears the field) → the OSMPSensorViewInConfig it sets."""

    def configure(request: bytes) -> bytes:
        config = SensorViewConfiguration.FromString(request)
        for name, value in changes.items():
            target = config
            if name.startswith("lidar."):
                target, name = config.lidar_sensor_view_configuration[0], name.removeprefix("lidar.")
            if value is None:
                target.ClearField(name)
            elif name == "update_cycle_time":
                target.update_cycle_time.seconds, target.update_cycle_time.nanos = int(value), round(value % 1 * 1e9)
            elif name == "mounting_position":
                (x, y, z), (roll, pitch, yaw) = value
                position, orientation = target.mounting_position.position, target.mounting_position.orientation
                position.x, position.y, position.z = x, y, z
                orientation.roll, orientation.pitch, orientation.yaw = roll, pitch, yaw
            else:
                setattr(target, name, value)
        return config.SerializeToString()

    return configure


def detections(sensor_data: bytes) -> dict:
    """The SensorData's detections as arrays: azimuth_rad, elevation_rad, distance_m (OSI's Spherical3d, sensor
    frame), beam_id."""
    d = decode_detections(sensor_data)
    return {"azimuth_rad": np.asarray(d["azimuth"], np.float64),
            "elevation_rad": np.asarray(d["elevation"], np.float64),
            "distance_m": np.asarray(d["distance"], np.float64), "beam_id": np.asarray(d["beam_id"], np.int64)}
