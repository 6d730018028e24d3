"""An Ouster unit's own metadata JSON (as the sensor or ouster-sdk writes it) as the rays it fires.

Geometry per the Ouster firmware user manual ("Lidar Range Data to XYZ
Lookup Table", fw 2.x/3.x), in the *lidar* frame (mm), for measurement
column ``m`` of ``W`` and beam ``i``:

* encoder angle ``θe = 2π (1 − m / W)``, beam azimuth offset
  ``θa = −2π · beam_azimuth_angles[i] / 360``, altitude
  ``φ = 2π · beam_altitude_angles[i] / 360``;
* the beam leaves a point ``n`` mm off the axis, on the circle the mirror
  turns: origin ``(n cos θe, n sin θe, z0)``, direction
  ``(cos(θe + θa) cos φ, sin(θe + θa) cos φ, sin φ)``; ``n`` =
  ``lidar_origin_to_beam_origin_mm`` (or the x of ``beam_to_lidar_transform``,
  whose z is ``z0``, in firmware ≥ 2.4 metadata);
* ``lidar_to_sensor_transform`` (4×4, mm) takes both to the sensor frame,
  where ouster-sdk's ``XYZLut`` reports points.

A return at distance ``t`` along the beam lies at ``origin + t·direction``;
the unit itself reports ``range = t + n`` (measured from the lidar axis).
Column ``m`` fires at ``m / (W · frame_rate)`` after the frame starts
(columns are evenly spaced in time over one turn at the ``lidar_mode`` rate).
Both the current layout (``beam_intrinsics``, ``lidar_intrinsics``,
``config_params``, ``lidar_data_format``) and the legacy flat one are read.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..documents import parse_document, read_document, shown
from ..errors import LidarFmuError


class OusterMetadataError(LidarFmuError, ValueError):
    """Ouster metadata that cannot be read as a unit's calibration."""


#: ``lidar_mode`` values (columns per turn × turns per second) a unit runs in: the firmware user manual's
#: ``lidar_mode`` setting and ouster-sdk's ``LidarMode`` (MODE_512x10 … MODE_4096x5)
LIDAR_MODES = ("512x10", "512x20", "1024x10", "1024x20", "2048x10", "4096x5")
#: beams of a unit: Ouster sells 16 to 128 (a bound against typos, not a datasheet figure)
MAX_BEAMS = 1024
#: lengths inside the unit (beam origin, lidar → sensor frame): the OS1's are 15.8–36.2 mm (firmware user manual,
#: "lidar_origin_to_beam_origin_mm", "lidar_to_sensor_transform"); a unit is ~10 cm across, 1 m is a typo
MAX_OFFSET_MM = 1000.0


@dataclass(frozen=True)
class OusterCalibration:
    """What of a unit's metadata decides its rays (angles in degrees, lengths in mm as the JSON has them)."""

    altitude_deg: np.ndarray  # (B,) beam_altitude_angles
    azimuth_deg: np.ndarray  # (B,) beam_azimuth_angles
    beam_origin_mm: float  # n: lidar axis → beam origin, radially
    beam_origin_z_mm: float  # z0: beam origin height in the lidar frame (0 before fw 2.4 metadata)
    lidar_to_sensor_mm: np.ndarray  # (4, 4)
    columns: int  # W, measurement columns per turn
    frame_rate_hz: float
    column_window: tuple[int, int]  # first and last column the unit sends (inclusive)
    name: str = "ouster"

    @property
    def beams(self) -> int:
        return len(self.altitude_deg)


def _numbers(value, key: str, name: str, shape=None) -> np.ndarray:
    """``value`` as finite float64 numbers (of ``shape``), else one line naming ``key``."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        array = None
    if array is None or isinstance(value, (str, bytes, dict)) or (shape is not None and array.shape != shape):
        want = "a list of numbers" if shape is None else "a number" if shape == () else f"{shape[0]} numbers"
        raise OusterMetadataError(f"Ouster metadata {name}: {key} must be {want}, got {shown(value)}")
    if not np.all(np.isfinite(array)):
        raise OusterMetadataError(f"Ouster metadata {name}: {key} holds a value that is not finite "
                                  f"(NaN or infinite), got {shown(value)}")
    return array


def _matrix(value, key: str, name: str) -> np.ndarray:
    """A 4×4 rigid transform in mm (given as 16 numbers, row-major, or as 4 rows of 4)."""
    m = _numbers(value, key, name)
    if m.size != 16:
        raise OusterMetadataError(f"Ouster metadata {name}: {key} must be 16 numbers (4×4, row-major), got "
                                  f"{shown(value)}")
    m = m.reshape(4, 4)
    rotation = m[:3, :3]
    # a rotation (the metadata's are identity or a 180° yaw): orthonormal with determinant +1, to 1e-3
    if (not np.allclose(rotation @ rotation.T, np.eye(3), atol=1e-3) or abs(np.linalg.det(rotation) - 1) > 1e-3
            or not np.allclose(m[3], [0, 0, 0, 1], atol=1e-9)):
        raise OusterMetadataError(f"Ouster metadata {name}: {key} must be a rigid transform (a rotation and a "
                                  f"translation, last row 0 0 0 1), got {shown(value)}")
    if np.any(np.abs(m[:3, 3]) > MAX_OFFSET_MM):
        raise OusterMetadataError(f"Ouster metadata {name}: {key} translation must lie within ±{MAX_OFFSET_MM:g} mm "
                                  f"(inside the unit), got {shown(m[:3, 3].tolist())}")
    return m


def _section(d: dict, key: str, name: str) -> dict:
    """A sub-object of the current layout (``beam_intrinsics``, …), or the flat legacy document itself."""
    section = d.get(key, d)
    if not isinstance(section, dict):
        raise OusterMetadataError(f"Ouster metadata {name}: {key} must be an object, got {shown(section)}")
    return section


def _lidar_mode(value, name: str) -> tuple[int, int]:
    """(columns per turn, turns per second) of a ``lidar_mode`` such as ``"1024x10"``."""
    if not isinstance(value, str) or value.lower() not in LIDAR_MODES:
        raise OusterMetadataError(f"Ouster metadata {name}: lidar_mode must be one of {', '.join(LIDAR_MODES)} "
                                  f"(columns x rate), got {shown(value)}")
    columns, rate = (int(v) for v in value.lower().split("x"))
    return columns, rate


def _column_window(value, columns: int, name: str) -> tuple[int, int]:
    """(first, last) measurement column the unit sends, both in ``[0, columns)``; first > last wraps past the
    end of the turn (a window across the encoder's zero)."""
    ok = (isinstance(value, (list, tuple)) and len(value) == 2
          and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < columns for v in value))
    if not ok:
        raise OusterMetadataError(f"Ouster metadata {name}: column_window must be [first, last] columns in "
                                  f"0 … {columns - 1} (lidar_mode's {columns} columns), got {shown(value)}")
    return int(value[0]), int(value[1])


def read_ouster_metadata(source, name: str = "ouster") -> OusterCalibration:
    """An :class:`OusterCalibration` from a metadata file path, JSON text or parsed dict (current or legacy layout);
    ``name`` names the unit (a file's name without extension by default).

    Every key it uses is checked (type, shape, finite, within the unit's bounds); a bad one raises
    :class:`OusterMetadataError` with one line naming it.
    """
    if isinstance(source, (str, os.PathLike)) and not str(source).lstrip().startswith("{"):
        name = os.path.splitext(os.path.basename(os.fspath(source)))[0]
        source = read_document(source, "Ouster metadata", OusterMetadataError, syntax="json")
    elif isinstance(source, str):
        source = parse_document(source, "Ouster metadata", OusterMetadataError, syntax="json")
    if not isinstance(source, dict):
        raise OusterMetadataError("Ouster metadata must be a JSON object")
    d = source
    beams = _section(d, "beam_intrinsics", name)
    lidar = _section(d, "lidar_intrinsics", name)
    config = _section(d, "config_params", name)
    data_format = d.get("lidar_data_format", d.get("data_format", {})) or {}
    if not isinstance(data_format, dict):
        raise OusterMetadataError(f"Ouster metadata {name}: lidar_data_format must be an object, "
                                  f"got {shown(data_format)}")
    for key, section in (("beam_altitude_angles", beams), ("beam_azimuth_angles", beams), ("lidar_mode", config)):
        if key not in section:
            raise OusterMetadataError(f"Ouster metadata {name}: missing {key!r}")
    altitude = _numbers(beams["beam_altitude_angles"], "beam_altitude_angles", name)
    azimuth = _numbers(beams["beam_azimuth_angles"], "beam_azimuth_angles", name)
    if altitude.ndim != 1 or not 1 <= len(altitude) <= MAX_BEAMS:
        raise OusterMetadataError(f"Ouster metadata {name}: beam_altitude_angles must be a list of 1 … {MAX_BEAMS} "
                                  f"numbers, got {shown(beams['beam_altitude_angles'])}")
    if azimuth.shape != altitude.shape:
        raise OusterMetadataError(f"Ouster metadata {name}: beam_azimuth_angles must have one number per beam "
                                  f"({len(altitude)}), got {shown(beams['beam_azimuth_angles'])}")
    # degrees: an elevation within ±90°; an azimuth offset within a half turn (the OS1's are about ±3°)
    if np.any(np.abs(altitude) > 90):
        raise OusterMetadataError(f"Ouster metadata {name}: beam_altitude_angles must lie within ±90°, got "
                                  f"{shown(float(altitude[np.argmax(np.abs(altitude))]))}")
    if np.any(np.abs(azimuth) > 180):
        raise OusterMetadataError(f"Ouster metadata {name}: beam_azimuth_angles must lie within ±180°, got "
                                  f"{shown(float(azimuth[np.argmax(np.abs(azimuth))]))}")
    columns, rate = _lidar_mode(config["lidar_mode"], name)
    if "beam_to_lidar_transform" in beams:
        beam_to_lidar = _matrix(beams["beam_to_lidar_transform"], "beam_to_lidar_transform", name)
        n, z0 = float(beam_to_lidar[0, 3]), float(beam_to_lidar[2, 3])
    else:
        n = float(_numbers(beams.get("lidar_origin_to_beam_origin_mm", 0.0), "lidar_origin_to_beam_origin_mm",
                           name, ()))
        z0 = 0.0
        if abs(n) > MAX_OFFSET_MM:
            raise OusterMetadataError(f"Ouster metadata {name}: lidar_origin_to_beam_origin_mm must lie within "
                                      f"±{MAX_OFFSET_MM:g} mm (inside the unit), got {shown(n)}")
    lidar_to_sensor = _matrix(lidar.get("lidar_to_sensor_transform", np.eye(4).ravel().tolist()),
                              "lidar_to_sensor_transform", name)
    window = _column_window(data_format.get("column_window", [0, columns - 1]), columns, name)
    return OusterCalibration(altitude, azimuth, n, z0, lidar_to_sensor, columns, float(rate), window, name)


def ouster_rays(cal: OusterCalibration):
    """The unit's rays in the sensor frame, column-major (ray ``c · B + b`` is beam ``b`` of sent column ``c``).

    → (origins (N, 3) m, unit directions (N, 3), beam id (N,) uint32,
    measurement column (N,) uint32, firing time after the frame's first
    column (N,) float32 s), all float32 but the integers. Only the columns
    in ``column_window`` are fired, as the unit sends only those.
    """
    first, last = cal.column_window
    if last >= first:
        measurement = np.arange(first, last + 1)
    else:  # a window that wraps past the end of the turn
        measurement = np.concatenate([np.arange(first, cal.columns), np.arange(0, last + 1)])
    m = np.repeat(measurement, cal.beams).astype(np.float64)
    beam = np.tile(np.arange(cal.beams), len(measurement))
    encoder = 2.0 * np.pi * (1.0 - m / cal.columns)
    azimuth = encoder - np.radians(cal.azimuth_deg[beam])
    altitude = np.radians(cal.altitude_deg[beam])
    directions = np.stack([np.cos(azimuth) * np.cos(altitude), np.sin(azimuth) * np.cos(altitude),
                           np.sin(altitude)], axis=1)
    origins_mm = np.stack([cal.beam_origin_mm * np.cos(encoder), cal.beam_origin_mm * np.sin(encoder),
                           np.full(len(m), cal.beam_origin_z_mm)], axis=1)
    R, T = cal.lidar_to_sensor_mm[:3, :3], cal.lidar_to_sensor_mm[:3, 3]
    origins = (origins_mm @ R.T + T) * 1e-3
    directions = directions @ R.T
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    column_period_s = 1.0 / (cal.columns * cal.frame_rate_hz)
    time_s = (m - m[0]) % cal.columns * column_period_s
    return (origins.astype(np.float32), directions.astype(np.float32), beam.astype(np.uint32),
            m.astype(np.uint32), time_s.astype(np.float32))
