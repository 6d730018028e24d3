"""The SensorData encoder against the official ``osi3`` classes: a reference build and its benchmark.

:func:`build_sensor_data_reference` builds the message :func:`~lidar_fmu.osi.encode.encode_sensor_data` writes,
with the protobuf classes in a Python loop: the specification the fast encoder is tested byte for byte against,
and the baseline ``lidar-fmu bench`` times it against (:func:`bench_encode`).
"""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from osi3.osi_sensordata_pb2 import SensorData
from osi3.osi_version_pb2 import InterfaceVersion

from ..geometry.pattern import spherical_directions
from ..geometry.transforms import pose_matrix
from ..osi.encode import (
    DATA_QUALIFIER_AVAILABLE,
    LidarDetectionBlock,
    _build_head,
    _per_point,
    _per_point_or_empty,
    _points,
    atan2_rad,
    encode_sensor_data,
    encode_sensor_data_buffer,
)
from ..pointcloud import POINT_DTYPE, PointCloud

# ------------------------------------------------------------------ reference


def build_sensor_data_reference(
    lidar: LidarDetectionBlock,
    *,
    timestamp_s: float,
    cycle_counter: int,
    version: InterfaceVersion | None = None,
    last_measurement_time_s: float | None = None,
    atan2=atan2_rad.py_func,
) -> SensorData:
    """The same message as :func:`encode_sensor_data`, built with the official classes in a Python loop.

    Slow (µs per detection); the specification the fast encoder is tested and
    benchmarked against. ``atan2``: the default, the plain-Python run of the
    kernel's :func:`atan2_rad`, gives identical bytes; ``math.atan2`` differs
    in the last bits of some angles.
    """
    points = _points(lidar.cloud)
    m = len(points)
    existence = np.broadcast_to(_per_point(lidar.existence_probability, m, "existence_probability"), (m,)).tolist()
    reflectivity = points["reflectivity"].tolist()
    intensity = (
        [r * 100.0 for r in reflectivity] if lidar.intensity_percent is None
        else _per_point_or_empty(lidar.intensity_percent, m, "intensity_percent").tolist()
    )
    msg, header = _build_head(
        timestamp_s=timestamp_s, sensor_id=lidar.sensor_id, mounting_position=lidar.mounting_position,
        cycle_counter=cycle_counter, measurement_time_s=lidar.measurement_time_s, version=version,
        data_qualifier=DATA_QUALIFIER_AVAILABLE if lidar.data_qualifier is None else lidar.data_qualifier,
        number_of_valid_detections=m, last_measurement_time_s=last_measurement_time_s,
    )
    sensor = msg.feature_data.lidar_sensor.add()
    sensor.header.CopyFrom(header)
    # empty where the block gives none: that field is not written
    pulse_width = _per_point_or_empty(lidar.echo_pulse_width_m, m, "echo_pulse_width_m").tolist()
    radial_velocity = _per_point_or_empty(lidar.radial_velocity_m_s, m, "radial_velocity_m_s").tolist()
    columns = (points[name].tolist() for name in ("x", "y", "z", "object_id", "beam_id"))
    for x, y, z, object_id, beam_id, refl, exist, intens in zip(*columns, reflectivity, existence, intensity):
        d = sensor.detection.add()
        d.existence_probability = exist
        d.object_id.value = object_id
        d.position.distance = math.sqrt(x * x + y * y + z * z)  # the point's position, not the unit's range
        d.position.azimuth = atan2(y, x)
        d.position.elevation = atan2(z, math.sqrt(x * x + y * y))
        d.intensity = intens
        d.reflectivity = refl
        if pulse_width:
            d.echo_pulse_width = pulse_width[len(sensor.detection) - 1]
        if radial_velocity:  # OSI's sign: positive toward the sensor, −dr/dt
            d.radial_velocity = 0.0 - radial_velocity[len(sensor.detection) - 1]
        d.beam_id.value = beam_id
    return msg


# ---------------------------------------------------------------------- bench


def random_cloud(n: int, seed: int = 0) -> PointCloud:
    """A synthetic cloud of ``n`` returns (ids of all varint sizes, environment returns included)."""
    rng = np.random.default_rng(seed)
    points = np.zeros(n, POINT_DTYPE)
    r = rng.uniform(0.5, 120.0, n)
    az = rng.uniform(-np.pi, np.pi, n)
    el = rng.uniform(-0.4, 0.4, n)
    xyz = r[:, None] * spherical_directions(az, el, np.float64)
    points["x"], points["y"], points["z"] = xyz.T
    points["range"] = r
    points["reflectivity"] = rng.uniform(0.0, 1.0, n)
    points["beam_id"] = rng.integers(0, 128, n)
    obj = rng.integers(0, 2**40, n, dtype=np.uint64) >> rng.integers(0, 40, n).astype(np.uint64)
    obj[rng.random(n) < 0.5] = np.uint64(2**64 - 1)
    points["object_id"] = obj
    return PointCloud(points, np.arange(n, dtype=np.int32), 1, n)


def bench_encode(n: int = 131072, n_reference: int = 5000, repeats: int = 20) -> dict:
    """Timings (ms) of :func:`encode_sensor_data` on ``n`` detections vs the official-class loop.

    ``encode_ms``: the ``bytes`` API; ``encode_buffer_ms``: into a reused
    ``out`` array (what an FMU would do); both medians (``*_min_ms`` the
    best) of ``repeats`` runs after JIT warm-up, wall clock;
    ``encode_cpu_ms`` the median thread CPU time of the bytes API. The reference
    builds the message with the osi3 classes in a Python loop (using
    ``math.atan2``, not the slower pure-Python ``atan2_rad``) on
    ``n_reference`` points, serializes it, and is extrapolated per detection.
    """
    kwargs: dict[str, Any] = dict(timestamp_s=12.345, cycle_counter=42)
    mounting = pose_matrix((1.5, 0.0, 1.8), (0.0, 0.05, 0.0))
    lidar = LidarDetectionBlock(random_cloud(n), sensor_id=7, mounting_position=mounting)
    encode_sensor_data(lidar._replace(cloud=random_cloud(16, seed=1)), **kwargs)  # JIT compile / cache load

    def times_ms(fn, count, clock=time.perf_counter):
        times = []
        for _ in range(count):
            t0 = clock()
            fn()
            times.append(clock() - t0)
        return float(np.median(times)) * 1e3, float(np.min(times)) * 1e3

    encode_sensor_data(lidar, **kwargs)  # sizes the scratch buffer
    encode_ms, encode_min_ms = times_ms(lambda: encode_sensor_data(lidar, **kwargs), repeats)
    # CPU time of this thread: the figure to trust when other processes share the cores
    encode_cpu_ms, _ = times_ms(lambda: encode_sensor_data(lidar, **kwargs), repeats, time.thread_time)
    out = encode_sensor_data_buffer(lidar, **kwargs)
    buffer_ms, buffer_min_ms = times_ms(lambda: encode_sensor_data_buffer(lidar, **kwargs, out=out), repeats)

    reference = lidar._replace(cloud=random_cloud(n_reference, seed=2))
    build_ms, _ = times_ms(lambda: build_sensor_data_reference(reference, **kwargs, atan2=math.atan2), 3)
    ref_msg = build_sensor_data_reference(reference, **kwargs, atan2=math.atan2)
    serialize_ms, _ = times_ms(ref_msg.SerializeToString, 3)
    ref_per_detection_us = (build_ms + serialize_ms) / n_reference * 1e3
    reference_ms = ref_per_detection_us * n / 1e3
    return {
        "n": n,
        "bytes": len(out),
        "encode_ms": encode_ms,
        "encode_min_ms": encode_min_ms,
        "encode_cpu_ms": encode_cpu_ms,
        "encode_buffer_ms": buffer_ms,
        "encode_buffer_min_ms": buffer_min_ms,
        "encode_per_detection_us": encode_ms / n * 1e3,
        "reference_n": n_reference,
        "reference_build_ms": build_ms,
        "reference_serialize_ms": serialize_ms,
        "reference_per_detection_us": ref_per_detection_us,
        "reference_extrapolated_ms": reference_ms,
        "speedup": reference_ms / encode_ms,
    }
