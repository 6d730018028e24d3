"""SensorData bytes → lidar detections as arrays, without a Python loop per detection.

The inverse of :mod:`.encode` for the fields this model writes: a compiled
walk over the protobuf wire format of ``feature_data.lidar_sensor[0].detection``
that yields the :data:`~lidar_fmu.pointcloud.POINT_DTYPE` record (positions
from the Spherical3d, elevation positive up). Normals are not part of OSI and
come back as zeros. An FMCW sensor's ``radial_velocity`` (OSI's sign: positive
toward the sensor) comes back as the cloud's ``radial_velocity_m_s``, the
unit's ``dr/dt`` (negative approaching, :mod:`lidar_fmu.physics.fmcw`).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..geometry.transforms import pose_matrix
from ..pointcloud import POINT_DTYPE, PointCloud

_FEATURE_DATA, _LIDAR_SENSOR, _DETECTION = 26, 3, 2
_MOUNTING_POSITION = 6  # SensorData.mounting_position (osi_sensordata.proto)
_OBJECT_ID, _POSITION, _BEAM_ID = 2, 3, 13  # LidarDetection's Identifier and Spherical3d fields

#: the double fields decoded, one row each of the kernel's ``values`` array
_DOUBLES = ("distance", "azimuth", "elevation", "reflectivity", "intensity", "existence_probability", "radial_velocity")


def _rows(numbered: dict[int, str]) -> np.ndarray:
    """A message's field number → its row of :data:`_DOUBLES` (−1: a field not decoded), for the kernel to index."""
    rows = np.full(max(numbered) + 1, -1, np.int64)
    for number, name in numbered.items():
        rows[number] = _DOUBLES.index(name)
    return rows


_DETECTION_ROWS = _rows({1: "existence_probability", 7: "intensity", 10: "reflectivity", 12: "radial_velocity"})
_SPHERICAL_ROWS = _rows({1: "distance", 2: "azimuth", 3: "elevation"})


@njit(cache=True, nogil=True)
def _varint(buf, pos):
    value = np.uint64(0)
    shift = np.uint64(0)
    while True:
        if pos >= buf.shape[0]:
            return np.uint64(0), -1
        b = buf[pos]
        pos += 1
        value |= np.uint64(b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += np.uint64(7)
        if shift > np.uint64(63):
            return np.uint64(0), -1


@njit(cache=True, nogil=True)
def _skip(buf, pos, wire):
    if wire == 0:
        _, pos = _varint(buf, pos)
        return pos
    if wire == 1:
        return pos + 8
    if wire == 5:
        return pos + 4
    if wire == 2:
        n, pos = _varint(buf, pos)
        return -1 if pos < 0 else pos + np.int64(n)
    return -1


@njit(cache=True, nogil=True)
def _field(buf, start, end, number):
    """(start, end) of the first length-delimited field ``number`` in buf[start:end], or (-1, -1)."""
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos)
        if pos < 0:
            return -1, -1
        wire = np.int64(key & np.uint64(7))
        if np.int64(key >> np.uint64(3)) == number and wire == 2:
            n, pos = _varint(buf, pos)
            return pos, pos + np.int64(n)
        pos = _skip(buf, pos, wire)
        if pos < 0:
            return -1, -1
    return -1, -1


@njit(cache=True, nogil=True)
def _f64(buf, pos):
    return buf[pos:pos + 8].copy().view(np.float64)[0]


@njit(cache=True, nogil=True)
def _store_double(values, k, rows, number, buf, pos):
    """``values[row, k]`` = the double at ``buf[pos]``, where field ``number`` has a row in ``rows``."""
    if number < rows.shape[0] and rows[number] >= 0:
        values[rows[number], k] = _f64(buf, pos)


@njit(cache=True, nogil=True)
def _identifier(buf, start, end):
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos)
        if key == np.uint64(8):
            v, pos = _varint(buf, pos)
            return v
        pos = _skip(buf, pos, np.int64(key & np.uint64(7)))
        if pos < 0:
            break
    return np.uint64(0)


@njit(cache=True, nogil=True)
def _decode(buf, start, end, count_only, values, object_id, beam_id):
    pos = start
    k = 0
    while pos < end:
        key, pos = _varint(buf, pos)
        if pos < 0:
            return -1
        wire = np.int64(key & np.uint64(7))
        if np.int64(key >> np.uint64(3)) != _DETECTION or wire != 2:
            pos = _skip(buf, pos, wire)
            if pos < 0:
                return -1
            continue
        n, pos = _varint(buf, pos)
        d_end = pos + np.int64(n)
        if pos < 0 or d_end > end:
            return -1
        if not count_only:
            p = pos
            while p < d_end:
                fkey, p = _varint(buf, p)
                fnum = np.int64(fkey >> np.uint64(3))
                fwire = np.int64(fkey & np.uint64(7))
                if fwire == 1:
                    _store_double(values, k, _DETECTION_ROWS, fnum, buf, p)
                    p += 8
                elif fwire == 2:
                    m, p = _varint(buf, p)
                    s_end = p + np.int64(m)
                    if fnum == _OBJECT_ID:
                        object_id[k] = _identifier(buf, p, s_end)
                    elif fnum == _BEAM_ID:
                        beam_id[k] = _identifier(buf, p, s_end)
                    elif fnum == _POSITION:
                        q = p
                        while q < s_end:
                            skey, q = _varint(buf, q)
                            if np.int64(skey & np.uint64(7)) != 1:
                                q = _skip(buf, q, np.int64(skey & np.uint64(7)))
                                continue
                            _store_double(values, k, _SPHERICAL_ROWS, np.int64(skey >> np.uint64(3)), buf, q)
                            q += 8
                    p = s_end
                else:
                    p = _skip(buf, p, fwire)
                if p < 0:
                    return -1
        k += 1
        pos = d_end
    return k


def decode_detections(sensor_data: bytes) -> dict:
    """Arrays of the first lidar sensor's detections: distance/azimuth/elevation (m, rad),
    reflectivity, intensity (%), existence_probability, object_id, beam_id, radial_velocity (m/s as OSI writes it,
    positive toward the sensor; NaN where a detection has none)."""
    buf = np.frombuffer(sensor_data, dtype=np.uint8)
    start, end = _field(buf, 0, len(buf), _FEATURE_DATA)
    if start >= 0:
        start, end = _field(buf, start, end, _LIDAR_SENSOR)
    if start < 0:
        n = 0
    else:
        n = _decode(buf, start, end, True, np.zeros((len(_DOUBLES), 0)), np.zeros(0, np.uint64), np.zeros(0, np.uint64))
        if n < 0:
            raise ValueError("SensorData lidar detections are truncated or malformed")
    values = np.zeros((len(_DOUBLES), n))
    values[_DOUBLES.index("radial_velocity")] = np.nan  # a detection without one keeps NaN
    object_id, beam_id = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    if n:
        _decode(buf, start, end, False, values, object_id, beam_id)
    return {**dict(zip(_DOUBLES, values)), "object_id": object_id, "beam_id": beam_id}


def sensor_data_to_points(sensor_data: bytes) -> PointCloud:
    """SensorData → :class:`PointCloud` in the sensor frame (x = r·cosE·cosA, y = r·cosE·sinA, z = r·sinE)."""
    d = decode_detections(sensor_data)
    points = np.zeros(len(d["distance"]), POINT_DTYPE)
    r, a, e = d["distance"], d["azimuth"], d["elevation"]
    points["x"] = r * np.cos(e) * np.cos(a)
    points["y"] = r * np.cos(e) * np.sin(a)
    points["z"] = r * np.sin(e)
    points["range"] = r
    points["reflectivity"] = d["reflectivity"]
    points["beam_id"] = d["beam_id"]
    points["object_id"] = d["object_id"]
    osi_velocity = d["radial_velocity"]
    # back to the unit's dr/dt (negative approaching) from OSI's sign; none where no detection carries one
    radial_velocity = (0.0 - osi_velocity).astype(np.float32) if np.any(np.isfinite(osi_velocity)) else None
    return PointCloud(points, np.full(len(points), -1, np.int32), 0, 0,
                      intensity_percent=d["intensity"].astype(np.float32), radial_velocity_m_s=radial_velocity)


def sensor_data_mounting(sensor_data: bytes) -> np.ndarray | None:
    """The 4×4 vehicle_from_sensor mounting a SensorData says its points were measured from (its
    ``mounting_position``), or None where it has none: that one field read off the wire, not the whole message
    (whose detections may number 10⁵)."""
    from osi3.osi_common_pb2 import MountingPosition

    buf = np.frombuffer(sensor_data, dtype=np.uint8)
    start, end = _field(buf, 0, len(buf), _MOUNTING_POSITION)
    if start < 0:
        return None
    mounting = MountingPosition.FromString(buf[start:end].tobytes())
    return pose_matrix((mounting.position.x, mounting.position.y, mounting.position.z),
                       (mounting.orientation.roll, mounting.orientation.pitch, mounting.orientation.yaw))
