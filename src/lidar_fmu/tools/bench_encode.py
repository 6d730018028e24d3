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

from ..geometry.transforms import pose_matrix
from ..osi.encode import (
    DATA_QUALIFIER_AVAILABLE,
    _build_head,
    _per_point,
    _points,
    atan2_rad,
    encode_sensor_data,
    encode_sensor_data_buffer,
)
from ..pointcloud import POINT_DTYPE, PointCloud

# ------------------------------------------------------------------ reference


def build_sensor_data_reference(
    cloud,
    *,
    timestamp_s: float,
    sensor_id: int,
    mounting_position,
    cycle_counter: int,
    measurement_time_s: float | None = None,
    version: InterfaceVersion | None = None,
    data_qualifier=None,
    existence_probability=1.0,
    intensity_percent=None,
    last_measurement_time_s: float | None = None,
    atan2=atan2_rad.py_func,
    echo_pulse_width_m=None,
    radial_velocity_m_s=None,
) -> SensorData:
    """The same message as :func:`encode_sensor_data`, built with the official classes in a Python loop.

    Slow (µs per detection); the specification the fast encoder is tested and
    benchmarked against. ``atan2``: the default, the plain-Python run of the
    kernel's :func:`atan2_rad`, gives identical bytes; ``math.atan2`` differs
    in the last bits of some angles.
    """
    points = _points(cloud)
    m = len(points)
    existence = np.broadcast_to(_per_point(existence_probability, m, "existence_probability"), (m,)).tolist()
    reflectivity = points["reflectivity"].tolist()
    intensity = (
        [r * 100.0 for r in reflectivity] if intensity_percent is None
        else np.broadcast_to(_per_point(intensity_percent, m, "intensity_percent"), (m,)).tolist()
    )
    msg, header = _build_head(
        timestamp_s=timestamp_s, sensor_id=sensor_id, mounting_position=mounting_position,
        cycle_counter=cycle_counter, measurement_time_s=measurement_time_s, version=version,
        data_qualifier=DATA_QUALIFIER_AVAILABLE if data_qualifier is None else data_qualifier,
        number_of_valid_detections=m, last_measurement_time_s=last_measurement_time_s,
    )
    lidar = msg.feature_data.lidar_sensor.add()
    lidar.header.CopyFrom(header)
    pulse_width = (None if echo_pulse_width_m is None
                   else np.broadcast_to(_per_point(echo_pulse_width_m, m, "echo_pulse_width_m"), (m,)).tolist())
    radial_velocity = (None if radial_velocity_m_s is None
                       else np.broadcast_to(_per_point(radial_velocity_m_s, m, "radial_velocity_m_s"), (m,)).tolist())
    columns = (points[name].tolist() for name in ("x", "y", "z", "object_id", "beam_id"))
    for x, y, z, object_id, beam_id, refl, exist, intens in zip(*columns, reflectivity, existence, intensity):
        d = lidar.detection.add()
        d.existence_probability = exist
        d.object_id.value = object_id
        d.position.distance = math.sqrt(x * x + y * y + z * z)  # the point's position, not the unit's range
        d.position.azimuth = atan2(y, x)
        d.position.elevation = atan2(z, math.sqrt(x * x + y * y))
        d.intensity = intens
        d.reflectivity = refl
        if pulse_width is not None:
            d.echo_pulse_width = pulse_width[len(lidar.detection) - 1]
        if radial_velocity is not None:  # OSI's sign: positive toward the sensor, −dr/dt
            d.radial_velocity = 0.0 - radial_velocity[len(lidar.detection) - 1]
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
    points["x"] = r * np.cos(el) * np.cos(az)
    points["y"] = r * np.cos(el) * np.sin(az)
    points["z"] = r * np.sin(el)
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
    kwargs: dict[str, Any] = dict(
        timestamp_s=12.345, sensor_id=7, mounting_position=pose_matrix((1.5, 0.0, 1.8), (0.0, 0.05, 0.0)),
        cycle_counter=42,
    )
    cloud = random_cloud(n)
    encode_sensor_data(random_cloud(16, seed=1), **kwargs)  # JIT compile / cache load

    def times_ms(fn, count, clock=time.perf_counter):
        times = []
        for _ in range(count):
            t0 = clock()
            fn()
            times.append(clock() - t0)
        return float(np.median(times)) * 1e3, float(np.min(times)) * 1e3

    encode_sensor_data(cloud, **kwargs)  # sizes the scratch buffer
    encode_ms, encode_min_ms = times_ms(lambda: encode_sensor_data(cloud, **kwargs), repeats)
    # CPU time of this thread: the figure to trust when other processes share the cores
    encode_cpu_ms, _ = times_ms(lambda: encode_sensor_data(cloud, **kwargs), repeats, time.thread_time)
    out = encode_sensor_data_buffer(cloud, **kwargs)
    buffer_ms, buffer_min_ms = times_ms(lambda: encode_sensor_data_buffer(cloud, **kwargs, out=out), repeats)

    ref_cloud = random_cloud(n_reference, seed=2)
    build_ms, _ = times_ms(lambda: build_sensor_data_reference(ref_cloud, **kwargs, atan2=math.atan2), 3)
    ref_msg = build_sensor_data_reference(ref_cloud, **kwargs, atan2=math.atan2)
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
