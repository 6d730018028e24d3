"""PointCloud → serialized ``osi3.SensorData`` with lidar feature data.

Every return becomes one ``LidarDetection`` in ``SensorData.feature_data.lidar_sensor[k].detection``, written
straight in protobuf wire format by Numba kernels (one pass sizing, one writing), the rest built with the official
``osi3`` classes: byte for byte what ``SerializeToString()`` gives. Main names: :func:`encode_sensor_data`,
:func:`encode_lidars_buffer` (one :class:`LidarDetectionBlock` per lidar of a rig), :func:`encode_empty_sensor_data`,
:func:`spherical_angles` (azimuth counter-clockwise, elevation positive up). The fields written, their conventions
and why the bytes match: docs/fmu.md#one-step; the cost: :func:`lidar_fmu.tools.bench_encode.bench_encode`.
"""
from __future__ import annotations

import functools
import math
import sys
import threading
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic
from osi3.osi_common_pb2 import Identifier, MountingPosition, Spherical3d, Timestamp
from osi3.osi_featuredata_pb2 import FeatureData, LidarDetection, LidarDetectionData, SensorDetectionHeader
from osi3.osi_sensordata_pb2 import SensorData
from osi3.osi_version_pb2 import DESCRIPTOR as _VERSION_FILE
from osi3.osi_version_pb2 import InterfaceVersion, current_interface_version

from ..geometry.transforms import check_pose, roll_pitch_yaw
from ..parallel import side_by_side
from ..pointcloud import POINT_DTYPE

DataQualifier = SensorDetectionHeader.DataQualifier
DATA_QUALIFIER_AVAILABLE = SensorDetectionHeader.DATA_QUALIFIER_AVAILABLE
DATA_QUALIFIER_NOT_AVAILABLE = SensorDetectionHeader.DATA_QUALIFIER_NOT_AVAILABLE

_WIRE_VARINT = 0
_WIRE_FIXED64 = 1
_WIRE_LEN = 2

# Field numbers the hand-written part relies on; _check_wire_layout() verifies
# them (and their types) against the installed bindings at import.
_SD_FEATURE_DATA = 26
_FD_LIDAR_SENSOR = 3
_LDD_HEADER = 1
_LDD_DETECTION = 2
_DET_FIELDS = {  # name → (number, protobuf FieldDescriptor type)
    "existence_probability": (1, 1),  # TYPE_DOUBLE
    "object_id": (2, 11),  # TYPE_MESSAGE Identifier
    "position": (3, 11),  # TYPE_MESSAGE Spherical3d
    "intensity": (7, 1),
    "reflectivity": (10, 1),
    "echo_pulse_width": (11, 1),
    "radial_velocity": (12, 1),
    "beam_id": (13, 11),
}


def _check_wire_layout() -> None:
    def number_and_type(message, name):
        field = message.DESCRIPTOR.fields_by_name[name]
        return field.number, field.type

    expected = [
        (SensorData, "feature_data", (_SD_FEATURE_DATA, 11)),
        (FeatureData, "lidar_sensor", (_FD_LIDAR_SENSOR, 11)),
        (LidarDetectionData, "header", (_LDD_HEADER, 11)),
        (LidarDetectionData, "detection", (_LDD_DETECTION, 11)),
        *((LidarDetection, name, number_type) for name, number_type in _DET_FIELDS.items()),
        (Spherical3d, "distance", (1, 1)), (Spherical3d, "azimuth", (2, 1)), (Spherical3d, "elevation", (3, 1)),
        (Identifier, "value", (1, 4)),  # TYPE_UINT64
    ]
    for message, name, number_type in expected:
        if number_and_type(message, name) != number_type:
            raise ImportError(f"osi3 {message.__name__}.{name} is not field/type {number_type}: the hand-written "
                              "wire format in lidar_fmu.osi.encode does not match the installed bindings")
    # The wrappers are appended after the officially serialized prefix, so
    # nothing set there may have a higher field number than feature_data.
    for name in ("version", "timestamp", "sensor_id", "mounting_position", "last_measurement_time"):
        if SensorData.DESCRIPTOR.fields_by_name[name].number >= _SD_FEATURE_DATA:
            raise ImportError(f"osi3 SensorData.{name} follows feature_data")


_check_wire_layout()


def wire_tag(number: int, wire_type: int) -> int:
    return (number << 3) | wire_type


# Tags inside one LidarDetection (all < 128, so one byte each).
_T_EXISTENCE = wire_tag(1, _WIRE_FIXED64)
_T_OBJECT_ID = wire_tag(2, _WIRE_LEN)
_T_POSITION = wire_tag(3, _WIRE_LEN)
_T_INTENSITY = wire_tag(7, _WIRE_FIXED64)
_T_REFLECTIVITY = wire_tag(10, _WIRE_FIXED64)
_T_ECHO_PULSE_WIDTH = wire_tag(11, _WIRE_FIXED64)
_T_RADIAL_VELOCITY = wire_tag(12, _WIRE_FIXED64)
_T_BEAM_ID = wire_tag(13, _WIRE_LEN)
_T_DETECTION = wire_tag(_LDD_DETECTION, _WIRE_LEN)
_T_IDENT_VALUE = wire_tag(1, _WIRE_VARINT)
_T_SPH_DISTANCE = wire_tag(1, _WIRE_FIXED64)
_T_SPH_AZIMUTH = wire_tag(2, _WIRE_FIXED64)
_T_SPH_ELEVATION = wire_tag(3, _WIRE_FIXED64)
_SPHERICAL_BYTES = 27  # three (tag + fixed64)
# A detection body is 62 + the two id varints (≤ 10 + 5) ≤ 77 bytes, 95 with an echo pulse width and a radial
# velocity, so its length prefix is always one byte.
_DETECTION_FIXED_BYTES = 9 + 3 + (2 + _SPHERICAL_BYTES) + 9 + 9 + 3


def default_interface_version() -> InterfaceVersion:
    """The OSI version of the installed ``osi3`` bindings (``current_interface_version`` file option)."""
    version = InterfaceVersion()
    version.CopyFrom(_VERSION_FILE.GetOptions().Extensions[current_interface_version])
    return version


# ---------------------------------------------------------------- the kernel

if sys.byteorder != "little":  # fixed64 is little-endian on the wire; _store_le stores native order
    raise ImportError("lidar_fmu.osi.encode writes protobuf fixed64 with native stores: little-endian hosts only")


@intrinsic
def _store_le(typingctx, buf, pos, value):
    """``buf[pos:pos+8] = value`` (float64 or uint64) as native = little-endian bytes, one unaligned store."""
    if value not in (types.float64, types.uint64):
        return None
    sig = types.none(buf, types.intp, value)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        pointer_type = context.get_value_type(signature.args[2]).as_pointer()
        builder.store(args[2], builder.bitcast(builder.gep(array.data, [args[1]]), pointer_type)).align = 1
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _leading_zeros(typingctx, value):
    """Count of leading zero bits of a uint64 (LLVM ctlz; 64 for 0)."""
    if value != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))

    return types.uint64(types.uint64), codegen


# fdlibm's atan (s_atan.c, Sun Microsystems 1993: "Permission to use, copy,
# modify, and distribute this software is freely granted, provided that this
# notice is preserved.") — the polynomial and the hi/lo split constants.
_AT0, _AT1, _AT2, _AT3, _AT4, _AT5, _AT6, _AT7, _AT8, _AT9, _AT10 = (
    3.33333333333329318027e-01, -1.99999999998764832476e-01, 1.42857142725034663711e-01,
    -1.11111104054623557880e-01, 9.09088713343650656196e-02, -7.69187620504482999495e-02,
    6.66107313738753120669e-02, -5.83357013379057348645e-02, 4.97687799461593236017e-02,
    -3.65315727442169155270e-02, 1.62858201153657823623e-02,
)
_ATAN_HALF_HI, _ATAN_HALF_LO = 4.63647609000806093515e-01, 2.26987774529616870924e-17
_ATAN_ONE_HI, _ATAN_ONE_LO = 7.85398163397448278999e-01, 3.06161699786838301793e-17
_PIO2_HI, _PIO2_LO = 1.57079632679489655800e00, 6.12323399573676603587e-17
_PI_HI, _PI_LO = 3.14159265358979311600e00, 1.22464679914735317720e-16


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def atan2_rad(y, x):
    """``atan2(y, x)`` within 1.5 ulp, branch-free so loops over it vectorize.

    glibc's correctly rounded atan2 costs ~40 ns here, two per detection
    (≈ 10 ms for 131k points); this is fdlibm's atan on the octant-reduced
    ratio min/max, ~5 ns. Only IEEE +, −, ×, ÷ and sign operations, so the
    plain-Python ``atan2_rad.py_func`` returns the same bits (the reference
    encoder relies on that). Signed zeros follow C's atan2:
    ``atan2(±0, −0) = ±π``, ``atan2(±0, +0) = ±0``. Inputs are finite.
    """
    ax = abs(x)
    ay = abs(y)
    swap = ay > ax
    # a = min/max in [0, 1]; 0/0 (the origin) must give 0, not NaN
    den = max(ax, ay)
    a = min(ax, ay) / (den if den > 0.0 else 1.0)
    # fdlibm's reduction: atan(a) = atan(c) + atan((a − c)/(1 + c·a))
    ge_half = a >= 0.4375
    ge_one = a >= 0.6875
    c = 1.0 if ge_one else (0.5 if ge_half else 0.0)
    hi = _ATAN_ONE_HI if ge_one else (_ATAN_HALF_HI if ge_half else 0.0)
    lo = _ATAN_ONE_LO if ge_one else (_ATAN_HALF_LO if ge_half else 0.0)
    t = (a - c) / (1.0 + c * a)
    z = t * t
    w = z * z
    s1 = z * (_AT0 + w * (_AT2 + w * (_AT4 + w * (_AT6 + w * (_AT8 + w * _AT10)))))
    s2 = w * (_AT1 + w * (_AT3 + w * (_AT5 + w * (_AT7 + w * _AT9))))
    r = hi - ((t * (s1 + s2) - lo) - t)
    # unfold the octant as base ± r in one hi/lo step: x ≥ 0 → r, x < 0 → π − r,
    # |y| > |x| → π/2 ∓ r (two steps would round twice, e.g. atan2(1, −0))
    neg = math.copysign(1.0, x) < 0.0
    base_hi = _PIO2_HI if swap else (_PI_HI if neg else 0.0)
    base_lo = _PIO2_LO if swap else (_PI_LO if neg else 0.0)
    u = r if swap != neg else -r
    return math.copysign(base_hi - (u - base_lo), y)


@njit(cache=True, nogil=True, inline="always")
def varint_bytes(v):
    significant_bits = 64 - np.int64(_leading_zeros(np.uint64(v) | np.uint64(1)))
    return (significant_bits + 6) // 7


@njit(cache=True, nogil=True, inline="always")
def put_varint(buf, pos, v):
    v = np.uint64(v)
    n = varint_bytes(v)
    if pos + 10 > buf.shape[0]:  # only the buffer's last record; the fast path writes 10 bytes
        for k in range(n - 1):
            buf[pos + k] = np.uint8(((v >> np.uint64(7 * k)) & np.uint64(0x7F)) | np.uint64(0x80))
        buf[pos + n - 1] = np.uint8(v >> np.uint64(7 * (n - 1)))
        return pos + n
    # Branch-free: a byte loop mispredicts on the mix of 1- and 10-byte ids
    # (NO_OBJECT_ID) and cost as much as the rest of the record. Spread the
    # low 56 bits in 7-bit groups over 8 bytes (28 → 32, 14 → 16, 7 → 8 bit
    # lanes), set the continuation bits of the first n − 1 bytes and write all
    # 10 candidate bytes; the surplus is overwritten by what follows.
    g = v & np.uint64(0x00FFFFFFFFFFFFFF)
    g = ((g & np.uint64(0x00FFFFFFF0000000)) << np.uint64(4)) | (g & np.uint64(0x000000000FFFFFFF))
    g = ((g & np.uint64(0x0FFFC0000FFFC000)) << np.uint64(2)) | (g & np.uint64(0x00003FFF00003FFF))
    g = ((g & np.uint64(0x3F803F803F803F80)) << np.uint64(1)) | (g & np.uint64(0x007F007F007F007F))
    # continuation bits on the low n − 1 bytes; all eight for a 9- or 10-byte varint
    first = (np.uint64(1) << np.uint64((8 * (n - 1)) & 63)) - np.uint64(1)
    first |= np.uint64(0) - np.uint64(n > 8)
    _store_le(buf, pos, g | (np.uint64(0x8080808080808080) & first))
    buf[pos + 8] = np.uint8(((v >> np.uint64(56)) & np.uint64(0x7F)) | (np.uint64(n > 9) << np.uint64(7)))
    buf[pos + 9] = np.uint8(v >> np.uint64(63))
    return pos + n


@njit(cache=True, nogil=True, inline="always")
def put_double(buf, pos, tag, value):
    buf[pos] = tag
    _store_le(buf, pos + 1, np.float64(value))
    return pos + 9


@njit(cache=True, nogil=True, inline="always")
def put_identifier(buf, pos, tag, value):
    buf[pos] = tag
    buf[pos + 1] = 1 + varint_bytes(value)
    buf[pos + 2] = _T_IDENT_VALUE
    return put_varint(buf, pos + 3, value)


@njit(cache=True, nogil=True, inline="always")
def _put_beam_identifier(buf, pos, tag, value):
    # Beam ids are < 128 on every sensor so far: a predictable branch to one
    # byte beats the branch-free general varint.
    if value < 128:
        buf[pos] = tag
        buf[pos + 1] = 2
        buf[pos + 2] = _T_IDENT_VALUE
        buf[pos + 3] = value
        return pos + 4
    return put_identifier(buf, pos, tag, value)


@njit(cache=True, nogil=True, error_model="numpy")
def _spherical_angles(points, azimuth_rad, elevation_rad):
    # a loop of its own so that it vectorizes (the writer cannot: variable-length records)
    for i in range(points.shape[0]):
        x = np.float64(points[i].x)
        y = np.float64(points[i].y)
        z = np.float64(points[i].z)
        azimuth_rad[i] = atan2_rad(y, x)
        # sqrt is correctly rounded everywhere (hypot is not), so Python reproduces it
        elevation_rad[i] = atan2_rad(z, math.sqrt(x * x + y * y))


@njit(cache=True, nogil=True)
def _detections_nbytes(points, pulse_width, radial_velocity):
    """Bytes of the whole repeated ``detection`` field (tags and lengths included); ``pulse_width``,
    ``radial_velocity``: one per point, or none (not written)."""
    total = 9 * pulse_width.shape[0] + 9 * radial_velocity.shape[0]
    for i in range(points.shape[0]):
        total += 2 + _DETECTION_FIXED_BYTES + varint_bytes(points[i].object_id) + varint_bytes(points[i].beam_id)
    return total


@njit(cache=True, nogil=True)
def _write_records(buf, pos, points, first, azimuth_rad, elevation_rad, existence, intensity_percent, pulse_width,
                   radial_velocity):
    # points[first + i] has angles azimuth_rad[i], elevation_rad[i]
    per_point_existence = existence.shape[0] > 1
    derive_intensity = intensity_percent.shape[0] == 0
    with_pulse = pulse_width.shape[0] > 0
    with_velocity = radial_velocity.shape[0] > 0
    for i in range(azimuth_rad.shape[0]):
        j = first + i
        p = points[j]
        reflectivity = np.float64(p.reflectivity)
        intensity = reflectivity * 100.0 if derive_intensity else intensity_percent[j]
        buf[pos] = _T_DETECTION
        buf[pos + 1] = (_DETECTION_FIXED_BYTES + varint_bytes(p.object_id) + varint_bytes(p.beam_id)
                        + (9 if with_pulse else 0) + (9 if with_velocity else 0))
        pos = put_double(buf, pos + 2, _T_EXISTENCE, existence[j] if per_point_existence else existence[0])
        pos = put_identifier(buf, pos, _T_OBJECT_ID, p.object_id)
        buf[pos] = _T_POSITION
        buf[pos + 1] = _SPHERICAL_BYTES
        x, y, z = np.float64(p.x), np.float64(p.y), np.float64(p.z)
        pos = put_double(buf, pos + 2, _T_SPH_DISTANCE, math.sqrt(x * x + y * y + z * z))
        pos = put_double(buf, pos, _T_SPH_AZIMUTH, azimuth_rad[i])
        pos = put_double(buf, pos, _T_SPH_ELEVATION, elevation_rad[i])
        pos = put_double(buf, pos, _T_INTENSITY, intensity)
        pos = put_double(buf, pos, _T_REFLECTIVITY, reflectivity)
        if with_pulse:
            pos = put_double(buf, pos, _T_ECHO_PULSE_WIDTH, pulse_width[j])
        if with_velocity:  # OSI's sign: positive toward the sensor (0.0 − v: a still point is +0.0, not −0.0)
            pos = put_double(buf, pos, _T_RADIAL_VELOCITY, 0.0 - np.float64(radial_velocity[j]))
        pos = _put_beam_identifier(buf, pos, _T_BEAM_ID, p.beam_id)
    return pos


_CHUNK = 2048  # points per angle batch: the two float64 scratch rows stay in L1/L2


@njit(cache=True, nogil=True)
def _write_detections(buf, pos, points, existence, intensity_percent, pulse_width, radial_velocity):
    """Write one ``detection`` record per point from ``buf[pos]``; return the end position.

    ``existence``: one value for all points or one per point;
    ``intensity_percent``: one per point, or none for ``reflectivity · 100``;
    ``pulse_width``: one ``echo_pulse_width`` (m) per point, or none; ``radial_velocity``: one ``dr/dt`` (m/s)
    per point (written in OSI's sign), or none.
    Writes only inside ``buf`` (the varint fast path checks its end), so a
    caller splitting the work can give each part a view ending at its records.
    """
    m = points.shape[0]
    azimuth = np.empty(min(m, _CHUNK), np.float64)
    elevation = np.empty(min(m, _CHUNK), np.float64)
    for start in range(0, m, _CHUNK):
        count = min(_CHUNK, m - start)
        _spherical_angles(points[start : start + count], azimuth[:count], elevation[:count])
        pos = _write_records(
            buf, pos, points, start, azimuth[:count], elevation[:count], existence, intensity_percent, pulse_width,
            radial_velocity)
    return pos


def spherical_angles(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(azimuth_rad, elevation_rad) float64 of POINT_DTYPE points, as written to ``LidarDetection.position``."""
    azimuth = np.empty(len(points), np.float64)
    elevation = np.empty(len(points), np.float64)
    _spherical_angles(points, azimuth, elevation)
    return azimuth, elevation


# ------------------------------------------------------ the official-class part


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def set_timestamp(msg: Timestamp, time_s: float) -> Timestamp:
    """Fill an OSI Timestamp from seconds: nanos rounded to nearest, always in [0, 1e9)."""
    if not math.isfinite(time_s):
        raise ValueError(f"timestamp must be finite, got {time_s!r}")
    # Rounding the total in ns (not the fraction) carries 0.9999999999 s into
    # the seconds; floor-division keeps nanos non-negative for negative times.
    seconds, nanos = divmod(round(time_s * 1e9), 1_000_000_000)
    msg.seconds = int(seconds)
    msg.nanos = int(nanos)
    return msg


def set_mounting_position(msg: MountingPosition, mounting_position) -> MountingPosition:
    """Fill an OSI MountingPosition from a 4×4 vehicle_from_sensor pose (or copy a MountingPosition)."""
    if isinstance(mounting_position, MountingPosition):
        msg.CopyFrom(mounting_position)
        return msg
    pose = check_pose(mounting_position, "mounting_position")
    msg.position.x, msg.position.y, msg.position.z = (float(v) for v in pose[:3, 3])
    roll, pitch, yaw = roll_pitch_yaw(pose[:3, :3])
    msg.orientation.roll = roll
    msg.orientation.pitch = pitch
    msg.orientation.yaw = yaw
    return msg


def _data_qualifier_value(data_qualifier) -> int:
    if isinstance(data_qualifier, str):
        return DataQualifier.Value(data_qualifier)
    value = int(data_qualifier)
    DataQualifier.Name(value)  # raises ValueError for a value the enum lacks
    return value


def _build_head(
    *, timestamp_s, sensor_id, mounting_position, cycle_counter, measurement_time_s, version,
    data_qualifier, number_of_valid_detections, last_measurement_time_s,
) -> tuple[SensorData, SensorDetectionHeader]:
    """SensorData without feature_data, and the lidar detection header."""
    if measurement_time_s is None:
        measurement_time_s = timestamp_s
    if last_measurement_time_s is None:
        last_measurement_time_s = measurement_time_s
    msg = SensorData()
    msg.version.CopyFrom(default_interface_version() if version is None else version)
    set_timestamp(msg.timestamp, timestamp_s)
    msg.sensor_id.value = int(sensor_id)
    set_mounting_position(msg.mounting_position, mounting_position)
    set_timestamp(msg.last_measurement_time, last_measurement_time_s)

    header = _detection_header(measurement_time_s=measurement_time_s, cycle_counter=cycle_counter,
                               mounting_position=msg.mounting_position, data_qualifier=data_qualifier,
                               number_of_valid_detections=number_of_valid_detections, sensor_id=sensor_id)
    return msg, header


def _detection_header(*, measurement_time_s, cycle_counter, mounting_position, data_qualifier,
                      number_of_valid_detections, sensor_id) -> SensorDetectionHeader:
    """One lidar's detection header; ``mounting_position`` a 4×4 pose or an ``osi3.MountingPosition``."""
    header = SensorDetectionHeader()
    set_timestamp(header.measurement_time, measurement_time_s)
    header.cycle_counter = int(cycle_counter)
    set_mounting_position(header.mounting_position, mounting_position)
    header.data_qualifier = _data_qualifier_value(data_qualifier)
    header.number_of_valid_detections = int(number_of_valid_detections)
    header.sensor_id.value = int(sensor_id)
    return header


def _points(cloud) -> np.ndarray:
    points = getattr(cloud, "points", cloud)
    if not isinstance(points, np.ndarray) or points.ndim != 1 or points.dtype != POINT_DTYPE:
        raise TypeError("cloud must be a PointCloud or a 1-D array of POINT_DTYPE")
    # one array layout for the kernels (a strided view would compile another specialization)
    return np.ascontiguousarray(points)


def _per_point(values, m: int, what: str) -> np.ndarray:
    """A contiguous float64 array: one value per point, or (scalar) one value (the caller's own array where it is
    one already and writable: the writers only read it, and Numba would compile a read-only one its own kernel)."""
    arr = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    if not arr.flags.writeable:
        arr = arr.copy()
    if not (arr.shape[0] == m or np.ndim(values) == 0):
        raise ValueError(f"{what} must be a scalar or have one value per point ({m}), got shape {np.shape(values)}")
    return arr


def _per_point_or_empty(values, m: int, what: str) -> np.ndarray:
    """A contiguous float64 array of one value per point, or an empty one where ``values`` is None (not given)."""
    if values is None:
        return np.empty(0, np.float64)
    arr = _per_point(values, m, what)
    return arr if len(arr) == m else np.broadcast_to(arr, (m,)).copy()


class LidarDetectionBlock(NamedTuple):
    """One lidar's part of a SensorData: its points (sensor frame) and the header it is reported under."""

    cloud: object  # a PointCloud or its POINT_DTYPE array
    sensor_id: int
    mounting_position: object  # 4×4 vehicle_from_sensor or an osi3.MountingPosition
    measurement_time_s: float | None = None  # the header's; None: the SensorData's timestamp
    existence_probability: object = 1.0  # scalar or one per point
    intensity_percent: object = None  # scalar or one per point; None: reflectivity · 100
    data_qualifier: object = None  # a SensorDetectionHeader.DataQualifier value or name; None: DATA_QUALIFIER_AVAILABLE
    echo_pulse_width_m: object = None  # one per point (lidar_fmu.physics.echoes), or None: not written
    #: one dr/dt (m/s, negative approaching) per point (an FMCW unit, lidar_fmu.physics.fmcw), written as OSI's
    #: radial_velocity (positive toward the sensor); None: not written
    radial_velocity_m_s: object = None


def encode_sensor_data_buffer(
    lidar: LidarDetectionBlock,
    *,
    timestamp_s: float,
    cycle_counter: int,
    version: InterfaceVersion | None = None,
    last_measurement_time_s: float | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`encode_sensor_data` as a uint8 array, optionally written into ``out``.

    If ``out`` (1-D C-contiguous writable uint8) is at least the message size, the
    message goes to ``out[:size]`` and that view is returned; otherwise a new
    array is. Reusing buffers matters: first-touch page faults on a fresh
    10 MB buffer cost ~4–9 ms on this VM, as much as encoding it. An FMU can
    hand out the returned array's address directly (OSMP double-buffering:
    alternate two ``out`` arrays).
    """
    return encode_lidars_buffer([lidar], timestamp_s=timestamp_s, sensor_id=lidar.sensor_id,
                                mounting_position=lidar.mounting_position, cycle_counter=cycle_counter, version=version,
                                last_measurement_time_s=last_measurement_time_s, out=out)


class InPlace:
    """A piece of a message its kernel writes straight into the message: ``nbytes`` bytes, by ``write(view)`` (a
    view of exactly those bytes; → the bytes written)."""

    __slots__ = ("nbytes", "write")

    def __init__(self, nbytes: int, write):
        self.nbytes, self.write = nbytes, write

    def __len__(self) -> int:
        return self.nbytes


class OtherLayers(NamedTuple):
    """A SensorData's layers beside the detections, each its fields serialized whole (tags and lengths included;
    :mod:`lidar_fmu.osi.layers`), as pieces (bytes, or :class:`InPlace` for the large ones, which their kernels
    write into the message side by side): they go where their field numbers put them."""

    sensor_view: tuple = ()  # sensor_view (8): the reflections
    moving_objects: bytes = b""  # stationary_object_header (10), stationary_object (11), moving_object_header (12), moving_object (13)
    logical: tuple = ()  # logical_detection_data (27)
    detections: bool = True  # feature_data (26) written, or left out


def encode_lidars_buffer(
    lidars: list[LidarDetectionBlock],
    *,
    timestamp_s: float,
    sensor_id: int,
    mounting_position,
    cycle_counter: int,
    version: InterfaceVersion | None = None,
    last_measurement_time_s: float | None = None,
    out: np.ndarray | None = None,
    layers: OtherLayers | None = None,
) -> np.ndarray:
    """One SensorData for several lidars: ``feature_data.lidar_sensor[k]`` holds ``lidars[k]``'s detections
    under its own header (sensor id, mounting position, measurement time, qualifier); ``sensor_id`` and
    ``mounting_position`` are the SensorData's own (the FMU reports its first lidar's). ``out``: as in
    :func:`encode_sensor_data_buffer`. ``layers``: the other OSI layers, in field order around the detections
    (None: the detections alone)."""
    if not lidars:
        raise ValueError("a SensorData needs at least one lidar")
    parts = []  # per lidar: (points, existence, intensity, pulse widths, serialized lidar_sensor head, detections bytes)
    for lidar in lidars if layers is None or layers.detections else ():
        points = _points(lidar.cloud)
        m = len(points)
        existence = _per_point(lidar.existence_probability, m, "existence_probability")
        intensity = _per_point_or_empty(lidar.intensity_percent, m, "intensity_percent")
        pulse_width = _per_point_or_empty(lidar.echo_pulse_width_m, m, "echo_pulse_width_m")
        radial_velocity = _per_point_or_empty(lidar.radial_velocity_m_s, m, "radial_velocity_m_s")
        header = _detection_header(
            measurement_time_s=timestamp_s if lidar.measurement_time_s is None else lidar.measurement_time_s,
            cycle_counter=cycle_counter, mounting_position=lidar.mounting_position,
            data_qualifier=DATA_QUALIFIER_AVAILABLE if lidar.data_qualifier is None else lidar.data_qualifier,
            number_of_valid_detections=m, sensor_id=lidar.sensor_id)
        chunks = _chunks(points, existence, intensity, pulse_width, radial_velocity)
        detections_nbytes = sum(nbytes for *_, nbytes in chunks)
        # lidar_sensor(3){ header(1) ‖ detection(2)* }
        ldd_head = LidarDetectionData(header=header).SerializeToString()
        ldd_nbytes = len(ldd_head) + detections_nbytes
        head = varint(wire_tag(_FD_LIDAR_SENSOR, _WIRE_LEN)) + varint(ldd_nbytes) + ldd_head
        parts.append((chunks, head, detections_nbytes))
    first_time_s = lidars[0].measurement_time_s
    msg, _ = _build_head(
        timestamp_s=timestamp_s, sensor_id=sensor_id, mounting_position=mounting_position,
        cycle_counter=cycle_counter, measurement_time_s=timestamp_s if first_time_s is None else first_time_s,
        version=version, data_qualifier=DATA_QUALIFIER_AVAILABLE, number_of_valid_detections=0,
        last_measurement_time_s=last_measurement_time_s,
    )
    # SensorData fields 1..9 ‖ feature_data(26){ lidar_sensor(3){…} × lidars }: the official serializer emits
    # fields in number order and nothing we set follows feature_data, so each lidar's detections follow its
    # header and only the enclosing length prefixes depend on them.
    feature_data_nbytes = sum(len(head) + nbytes for *_, head, nbytes in parts)
    feature_data_head = varint(wire_tag(_SD_FEATURE_DATA, _WIRE_LEN)) + varint(feature_data_nbytes)
    if layers is None:
        top, end = [msg.SerializeToString() + feature_data_head], []
    else:  # fields 1–6 ‖ sensor_view (8) ‖ last_measurement_time (9) ‖ moving objects (12, 13) ‖ 26 ‖ 27
        tail = SensorData()
        tail.last_measurement_time.CopyFrom(msg.last_measurement_time)
        msg.ClearField("last_measurement_time")
        top = [msg.SerializeToString(), *layers.sensor_view, tail.SerializeToString(), layers.moving_objects,
               feature_data_head if layers.detections else b""]
        end = list(layers.logical)
    end_nbytes = sum(len(piece) for piece in end)
    size = sum(len(piece) for piece in top) + feature_data_nbytes + end_nbytes
    if (
        out is not None and out.dtype == np.uint8 and out.ndim == 1 and out.flags.c_contiguous
        and out.flags.writeable and len(out) >= size
    ):
        buf = out[:size]
    else:
        buf = np.empty(size, np.uint8)
    in_place: list = []  # (view, piece) of each InPlace piece
    at, tasks = _put_pieces(buf, 0, top, in_place), []
    for chunks, head, _ in parts:
        buf[at: at + len(head)] = np.frombuffer(head, np.uint8)
        at += len(head)
        for *arrays, chunk_nbytes in chunks:
            tasks.append((at, arrays, chunk_nbytes))
            at += chunk_nbytes
    _put_pieces(buf, size - end_nbytes, end, in_place)
    # every piece's place is known: the layers' pieces (largest, first) and the detections' chunks are written side
    # by side in one go (their writers hold no GIL), each in a view of the buffer that ends at its last byte
    jobs = [(functools.partial(piece.write, view), len(view), "a layer's encoder") for view, piece in in_place] + [
        (functools.partial(_write_chunk, buf, *task), task[2], "detection encoder") for task in tasks]
    for written, (_, nbytes, writer) in zip(side_by_side(lambda write: write(), [job[:1] for job in jobs]), jobs):
        if written != nbytes:
            raise RuntimeError(f"{writer} wrote {written} of {nbytes} bytes")
    return buf


def _put_pieces(buf: np.ndarray, at: int, pieces, in_place: list) -> int:
    """``pieces`` one after another into ``buf`` from ``at``: bytes copied, each :class:`InPlace` one's view of
    ``buf`` and the piece appended to ``in_place`` (written later); → where they end."""
    for piece in pieces:
        if isinstance(piece, InPlace):
            in_place.append((buf[at: at + len(piece)], piece))
        else:
            buf[at: at + len(piece)] = np.frombuffer(piece, np.uint8)
        at += len(piece)
    return at


#: detections per writing task (~1 ms of work): a frame of an OS1-128 is four
_CHUNK_POINTS = 32_768


def _chunks(points, existence, intensity, pulse_width, radial_velocity) -> list[tuple]:
    """One lidar's detections in runs of :data:`_CHUNK_POINTS`: (points, existence, intensity, pulse widths,
    radial velocities, bytes) each, the arrays sliced alike (one-value and empty arrays kept whole)."""
    m, chunks = len(points), []
    for a in range(0, max(m, 1), _CHUNK_POINTS):
        b = min(a + _CHUNK_POINTS, m)
        cut = [x[a:b] if x.shape[0] == m and m > 1 else x
               for x in (existence, intensity, pulse_width, radial_velocity)]
        chunks.append((points[a:b], *cut, _detections_nbytes(points[a:b], cut[2], cut[3])))
    return chunks


def _write_chunk(buf, at, arrays, nbytes) -> int:
    return _write_detections(buf[: at + nbytes], at, *arrays) - at


_scratch = threading.local()


def encode_sensor_data(
    lidar: LidarDetectionBlock,
    *,
    timestamp_s: float,
    cycle_counter: int,
    version: InterfaceVersion | None = None,
    last_measurement_time_s: float | None = None,
) -> bytes:
    """Serialized ``osi3.SensorData`` with one LidarDetection per point of ``lidar.cloud``.

    ``lidar``: the one lidar's :class:`LidarDetectionBlock` (what its fields
    default to, and what its detections carry, is said there); its sensor id
    and ``mounting_position`` (a 4×4 vehicle_from_sensor pose, converted with
    R = Rz(yaw)·Ry(pitch)·Rx(roll), or an ``osi3.MountingPosition``) go into
    both the SensorData and the detection header. ``timestamp_s``: simulation
    time of this output; the block's ``measurement_time_s`` (header) defaults
    to it, ``last_measurement_time_s`` to the measurement time. ``version``
    defaults to the installed bindings' interface version. The block's
    ``data_qualifier`` defaults to DATA_QUALIFIER_AVAILABLE — also for a cloud
    without points, since a working sensor that saw nothing still delivers
    valid data; use :func:`encode_empty_sensor_data` when there is no
    measurement.

    Bytes are identical to ``SerializeToString()`` of the same message built
    with the official classes (the fields: docs/fmu.md#one-step).
    Encodes into a per-thread scratch buffer that is kept between calls (about
    the size of the largest message) so only the final copy into ``bytes``
    touches new memory.
    """
    buf = encode_sensor_data_buffer(lidar, timestamp_s=timestamp_s, cycle_counter=cycle_counter, version=version,
                                    last_measurement_time_s=last_measurement_time_s,
                                    out=getattr(_scratch, "buffer", None))
    if buf.base is None:  # outgrew the scratch: keep a little headroom for the next, slightly larger scan
        _scratch.buffer = np.empty(len(buf) + len(buf) // 4, np.uint8)
    return buf.tobytes()


def encode_empty_sensor_data(
    *,
    timestamp_s: float,
    sensor_id: int,
    mounting_position,
    cycle_counter: int,
    data_qualifier=DATA_QUALIFIER_NOT_AVAILABLE,
    measurement_time_s: float | None = None,
    version: InterfaceVersion | None = None,
    last_measurement_time_s: float | None = None,
) -> bytes:
    """Serialized ``osi3.SensorData`` whose lidar header carries ``data_qualifier`` and no detections.

    For cycles without a measurement (sensor not ready, no valid input):
    ``feature_data.lidar_sensor[0]`` exists with ``number_of_valid_detections
    = 0`` so a consumer can read the qualifier.
    """
    msg, header = _build_head(
        timestamp_s=timestamp_s, sensor_id=sensor_id, mounting_position=mounting_position,
        cycle_counter=cycle_counter, measurement_time_s=measurement_time_s, version=version,
        data_qualifier=data_qualifier, number_of_valid_detections=0,
        last_measurement_time_s=last_measurement_time_s,
    )
    msg.feature_data.lidar_sensor.add().header.CopyFrom(header)
    return msg.SerializeToString()
