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

import json
import os
from dataclasses import dataclass
from typing import cast

import numpy as np

from ..errors import LidarFmuError


class OusterMetadataError(LidarFmuError, ValueError):
    """Ouster metadata that cannot be read as a unit's calibration."""


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


def _matrix(values, what: str) -> np.ndarray:
    m = np.asarray(values, dtype=np.float64).reshape(4, 4)
    if not np.all(np.isfinite(m)):
        raise OusterMetadataError(f"Ouster metadata: {what} is not a finite 4×4 matrix")
    return m


def read_ouster_metadata(source) -> OusterCalibration:
    """An :class:`OusterCalibration` from a metadata file path, JSON text or parsed dict (current or legacy layout)."""
    name = "ouster"
    if isinstance(source, (str, os.PathLike)) and not str(source).lstrip().startswith("{"):
        name = os.path.splitext(os.path.basename(os.fspath(source)))[0]
        try:
            with open(source, encoding="utf-8") as f:
                source = json.load(f)
        except (OSError, json.JSONDecodeError) as exc:
            raise OusterMetadataError(f"cannot read Ouster metadata {source}: {exc}") from None
    elif isinstance(source, str):
        source = json.loads(source)
    if not isinstance(source, dict):
        raise OusterMetadataError("Ouster metadata must be a JSON object")
    d = source
    beams = d.get("beam_intrinsics", d)
    lidar = d.get("lidar_intrinsics", d)
    config = d.get("config_params", d)
    data_format = d.get("lidar_data_format", d.get("data_format", {})) or {}
    try:
        altitude = np.asarray(beams["beam_altitude_angles"], np.float64)
        azimuth = np.asarray(beams["beam_azimuth_angles"], np.float64)
        mode = str(config["lidar_mode"])
    except KeyError as exc:
        raise OusterMetadataError(f"Ouster metadata {name}: missing {exc.args[0]!r}") from None
    if altitude.shape != azimuth.shape or altitude.ndim != 1 or not len(altitude):
        raise OusterMetadataError(f"Ouster metadata {name}: beam_altitude_angles and beam_azimuth_angles differ")
    try:
        columns, rate = (int(v) for v in mode.lower().split("x"))
    except ValueError:
        raise OusterMetadataError(f"Ouster metadata {name}: lidar_mode {mode!r} is not COLUMNSxRATE") from None
    if "beam_to_lidar_transform" in beams:
        beam_to_lidar = _matrix(beams["beam_to_lidar_transform"], "beam_to_lidar_transform")
        n, z0 = float(beam_to_lidar[0, 3]), float(beam_to_lidar[2, 3])
    else:
        n, z0 = float(beams.get("lidar_origin_to_beam_origin_mm", 0.0)), 0.0
    lidar_to_sensor = _matrix(lidar.get("lidar_to_sensor_transform", np.eye(4).ravel()), "lidar_to_sensor_transform")
    # (first, last): the length is not checked here (a window of another length fails where it is unpacked)
    window = cast("tuple[int, int]", tuple(int(v) for v in data_format.get("column_window", (0, columns - 1))))
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
