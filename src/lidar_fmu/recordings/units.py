"""What ``validate`` and ``calibrate`` need of the unit a recording came from: each pixel's ray, the unit's own
spec, and the simulated unit firing exactly the recording's rays.

:func:`open_recording` reads a recording with the reader its unit's calibration calls for (``--metadata``):

* an Ouster metadata JSON (or a preset that names one): :mod:`.ouster` (``.npz`` or ``.pcap`` via ouster-sdk);
* a Hesai angle-correction CSV (or a ``hesai_*`` preset): :mod:`.hesai` (``.pcap``/``.pcapng`` or a ROS 2 bag
  of ``pandar_msgs`` / ``nebula_msgs`` packets, decoded here);
* a Velodyne calibration YAML (or a ``velodyne_*`` preset): :mod:`.velodyne` (``.pcap``/``.pcapng`` or a bag of
  ``velodyne_msgs`` packets, decoded with velodyne-decoder).
"""
from __future__ import annotations

import abc
import dataclasses
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UserError
from ..geometry.pattern import RayPattern
from ..physics.echoes import DEFAULT_DUAL_SAMPLES
from ..physics.range_limit import RangeReflectivityLimit, parse_range_reflectivity
from ..sensors.spec import Sensor, resolve_spec
from .recording import Recording


@dataclass(frozen=True)
class PixelRays:
    """Each pixel's ray, (beams, columns) images: origin (m) and unit direction in the sensor frame."""

    origin: np.ndarray  # (B, W, 3) float64
    direction: np.ndarray  # (B, W, 3) float64
    ray_index: np.ndarray  # (B, W) int64 index into the simulated pattern's rays; -1: no ray
    beam_origin_m: float  # d: what the unit adds to the distance along the beam to report RANGE (Ouster)
    grid_column: np.ndarray  # (B, W) int64: destaggered column of each pixel


class UnitGeometry(abc.ABC):
    """A recorded unit (subclasses: :class:`~lidar_fmu.recordings.ouster.OusterGeometry`, :class:`BinnedGeometry`).

    ``beams`` × ``columns`` is its range image; ``beam_origin_mm`` what it adds to the distance along a beam to
    report a range (Ouster's lidar-origin convention, 0 for the others); ``metadata_path`` the calibration file
    or preset it was opened with."""

    name: str
    beams: int
    columns: int
    beam_origin_mm: float
    metadata_path: str
    #: the reflectivity (percent) a returning pixel that reported 0 is taken to have (:data:`REFLECTIVITY_FLOOR_PERCENT`)
    reflectivity_floor_percent: float = 0.0

    @abc.abstractmethod
    def rays(self, recording: Recording, frame: int) -> PixelRays:
        """The pixels' rays in ``frame``."""

    @abc.abstractmethod
    def frame_sensor(self, sensor: Sensor, rays: PixelRays) -> Sensor:
        """``sensor`` firing exactly ``rays`` (its ray ``rays.ray_index[b, w]`` is pixel (b, w))."""

    @abc.abstractmethod
    def own_spec(self) -> dict[str, Any]:
        """The unit's own spec: its calibration and its model's datasheet figures (what calibrate starts from)."""

    @abc.abstractmethod
    def sensor_spec(self, spec: str | None, dual: bool) -> dict[str, Any]:
        """The spec simulated: ``spec`` (preset or file; default :meth:`own_spec`), motion distortion off (the
        mesh is the scene as the unit swept it), and for a dual-return recording ``returns: dual`` where the spec
        names none."""

    def base_spec(self) -> dict[str, Any]:
        """:meth:`own_spec` resolved to its keys: what calibrate writes its fitted keys into."""
        return resolve_spec(self.own_spec())

    def datasheet_limit(self, max_range_m: float) -> RangeReflectivityLimit | None:
        """The unit's datasheet range–reflectivity limit (None: its datasheet gives none)."""
        figures = self.base_spec().get("range_reflectivity")
        return None if figures is None else parse_range_reflectivity(figures, max_range_m)


#: Velodyne and Hesai units report reflectivity in whole percent, and a pixel that returned reflected light: a
#: reported 0 is below 0.5 % (the rounding), not a surface that reflects nothing, and the scene's triangles there
#: get 0.5 % (as :func:`lidar_fmu.recordings.validate.unit_reflectivity` takes it for the r_L table). The Hesai
#: recordings report 0 on 40 % of their returns nearer than 1 m (the near field, where their reflectivity
#: calibration does not hold): taken literally, none of those pixels could return. Ouster recordings keep the
#: value as the unit wrote it (their validated figures; docs/validation.md says what the floor would change).
REFLECTIVITY_FLOOR_PERCENT = 0.5


class BinnedGeometry(UnitGeometry):
    """A unit recorded as rings × azimuth bins (:func:`~lidar_fmu.recordings.recording.binned_recording`): each
    pixel's ray at its row's elevation and the recording's own azimuth for it, from the row's beam origin."""

    def __init__(self, name: str, metadata_path: str, spec: dict[str, Any], elevation_rad: np.ndarray,
                 channel_of_row: np.ndarray, columns: int, origin=None) -> None:
        self.name = name
        self.metadata_path = metadata_path
        self._spec = spec
        self.elevation_rad = np.asarray(elevation_rad, np.float64)  # (B,) by row
        self.channel_of_row = np.asarray(channel_of_row, np.int64)
        self.beams = len(self.elevation_rad)
        self.columns = int(columns)
        self.beam_origin_mm = 0.0
        self.reflectivity_floor_percent = REFLECTIVITY_FLOOR_PERCENT
        #: origin(channel (N,), azimuth (N,)) → (N, 3) m: where each ray leaves the unit; None: its origin
        self._origin = origin

    def rays(self, recording: Recording, frame: int) -> PixelRays:
        if recording.azimuth_rad is None:
            raise UserError(f"recording {recording.name} holds no per-pixel azimuths: not a binned recording")
        azimuth = recording.azimuth_rad[frame]
        elevation = np.broadcast_to(self.elevation_rad[:, None], azimuth.shape)
        direction = np.stack([np.cos(elevation) * np.cos(azimuth), np.cos(elevation) * np.sin(azimuth),
                              np.sin(elevation)], axis=-1)
        origin = np.zeros_like(direction)
        if self._origin is not None:
            channel = np.broadcast_to(self.channel_of_row[:, None], azimuth.shape)
            origin = self._origin(channel.ravel(), azimuth.ravel()).reshape(direction.shape)
        B, W = azimuth.shape
        ray_index = (np.arange(W)[None, :] * B + np.arange(B)[:, None]).astype(np.int64)
        return PixelRays(origin, direction, ray_index, 0.0, np.broadcast_to(np.arange(W)[None, :], (B, W)).copy())

    def frame_sensor(self, sensor: Sensor, rays: PixelRays) -> Sensor:
        B, W = rays.ray_index.shape
        directions = np.ascontiguousarray(rays.direction.transpose(1, 0, 2).reshape(-1, 3), np.float32)
        origins = np.ascontiguousarray(rays.origin.transpose(1, 0, 2).reshape(-1, 3), np.float32)
        pattern = RayPattern(directions, np.tile(self.channel_of_row, W).astype(np.uint32),
                             np.repeat(np.arange(W), B).astype(np.uint32), np.zeros(B * W, np.float32), B, W,
                             origins=origins if np.any(origins) else None)
        return dataclasses.replace(sensor, pattern=pattern, continuous=None)

    def own_spec(self) -> dict[str, Any]:
        return dict(self._spec)

    def sensor_spec(self, spec: str | None, dual: bool) -> dict[str, Any]:
        resolved = resolve_spec(self.own_spec() if spec is None else spec)
        if dual and "returns" not in resolved:
            resolved |= {"returns": "dual",
                         "divergence_samples": resolved.get("divergence_samples", DEFAULT_DUAL_SAMPLES)}
        resolved["motion_distortion"] = False
        return resolved


def open_recording(recording_path: str, metadata: str) -> tuple[Recording, UnitGeometry]:
    """The recording at ``recording_path`` and its unit, read as ``metadata`` (a calibration file or a preset,
    module doc) says; one :class:`~lidar_fmu.errors.UserError` line for a file that is neither."""
    from ..sensors.presets import PRESETS

    kind = _kind_of(metadata, PRESETS)
    if kind == "ouster":
        from .ouster import open_ouster

        return open_ouster(recording_path, metadata)
    if kind == "hesai":
        from .hesai import open_hesai

        return open_hesai(recording_path, metadata)
    from .velodyne import open_velodyne

    return open_velodyne(recording_path, metadata)


def _kind_of(metadata: str, presets: dict) -> str:
    """``ouster``, ``hesai`` or ``velodyne``: which reader ``--metadata`` calls for."""
    if metadata in presets:
        spec = presets[metadata]
        if "ouster_metadata" in spec:
            return "ouster"
        if "hesai_model" in spec:
            return "hesai"
        if "calibration" in spec:
            return "velodyne"
        raise UserError(f"--metadata {metadata}: this preset has no unit calibration (Ouster metadata, Hesai angle "
                        "correction or Velodyne calibration) to read a recording with")
    if not os.path.isfile(metadata):
        raise UserError(f"--metadata {metadata}: file not found (give the unit's calibration file or a preset)")
    lower = metadata.lower()
    if lower.endswith(".json"):
        return "ouster"
    if lower.endswith(".csv"):
        from ..sensors.robosense import looks_like_robosense_angles

        if looks_like_robosense_angles(metadata):
            raise UserError(f"--metadata {metadata}: a RoboSense angle.csv; RoboSense recordings are not read (Velodyne, "
                            "Hesai and Ouster ones are)")
        return "hesai"
    if lower.endswith((".yaml", ".yml", ".xml")):
        return "velodyne"
    raise UserError(f"--metadata {metadata}: expected an Ouster metadata .json, a Hesai angle-correction .csv or a "
                    "Velodyne calibration .yaml/.xml")
