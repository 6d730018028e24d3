"""What ``validate`` and ``calibrate`` need of the unit a recording came from: each pixel's ray, the unit's own
spec, and the simulated unit firing exactly the recording's rays (:class:`UnitGeometry`); and the skeleton every
unit recorded as rings × azimuth bins is opened with (:func:`open_binned`). Which maker's reader a recording is
opened with: :mod:`.makers`.
"""
from __future__ import annotations

import abc
import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UserError
from ..geometry.pattern import RayPattern, spherical_directions
from ..physics.echoes import DEFAULT_DUAL_SAMPLES
from ..physics.range_limit import RangeReflectivityLimit, parse_range_reflectivity
from ..sensors.spec import Sensor, resolve_spec
from .packets import is_packet_source
from .recording import Firings, Recording, RecordingError, binned_recording


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
        direction = spherical_directions(azimuth, elevation, np.float64)
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


@dataclass(frozen=True)
class UnitFile:
    """The unit's calibration as ``--metadata`` named it: ``metadata`` (a file or a preset), the file it is read
    from, what it reads as, and the preset named (None: a file)."""

    metadata: str
    path: str
    calibration: Any
    preset: str | None


@dataclass(frozen=True)
class BinnedUnit:
    """What a maker's decoder makes of a recording of a unit that does not fire on a fixed grid: its firings, how
    they are binned (:func:`~lidar_fmu.recordings.recording.binned_recording`) and where its rays leave it."""

    model: str
    profile: str
    firings: Firings
    channel_of_row: np.ndarray  # (B,) int64: the channel of each row, top row first
    elevation_rad: np.ndarray  # (channels,) by channel
    step_deg: float  # the unit's horizontal step: the bins' width
    empty_firings_known: bool  # the packets say which firings found nothing (else: only returns are known)
    spec: dict[str, Any]  # the unit's own spec: its model's preset with its calibration file
    #: origin(channel (N,), azimuth (N,)) → (N, 3) m: where each ray leaves the unit; None: its origin
    origin: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    #: notes on the calibration (before the binning's own) and on the capture (after them)
    calibration_notes: tuple[str, ...] = ()
    capture_notes: tuple[str, ...] = ()
    #: what a recording too short for one turn is told, after that
    too_short: str = ""


def open_binned(recording_path: str, unit: UnitFile, maker: str,
                decode: Callable[[str, UnitFile], BinnedUnit]) -> tuple[Recording, BinnedGeometry]:
    """A recording (capture or bag) of a ``maker``'s unit, decoded by ``decode``, as rings × azimuth bins, and the
    unit. One line where the recording is no packet capture, or holds no complete turn."""
    if not is_packet_source(recording_path):
        raise UserError(f"recording {recording_path}: a {maker} unit's recording is a .pcap/.pcapng capture or a ROS "
                        "2 bag (folder, .db3 or .mcap) of its packets")
    decoded = decode(recording_path, unit)
    row_of_channel = np.argsort(decoded.channel_of_row)
    name = os.path.splitext(os.path.basename(os.path.normpath(recording_path)))[0]
    recording = binned_recording(name, decoded.profile, decoded.firings, row_of_channel, decoded.step_deg,
                                 empty_firings_known=decoded.empty_firings_known)
    if not recording.frames:
        raise RecordingError(f"recording {recording_path} holds no complete turn of its unit{decoded.too_short}")
    if decoded.calibration_notes or decoded.capture_notes:
        recording = dataclasses.replace(recording, notes=(*decoded.calibration_notes, *recording.notes,
                                                          *decoded.capture_notes))
    geometry = BinnedGeometry(decoded.model, unit.metadata, decoded.spec,
                              decoded.elevation_rad[decoded.channel_of_row], decoded.channel_of_row,
                              recording.images["range_mm"].shape[2], origin=decoded.origin)
    return recording, geometry
