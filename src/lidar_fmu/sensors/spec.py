"""A sensor spec (preset name, dict, or JSON/JSONC/YAML file; Ouster metadata; a Project AirSim entry) → :class:`Sensor`.

:func:`load_sensor` is the one entry point; :data:`KNOWN_KEYS` lists the keys a spec may have, every one
documented in docs/sensors.md (geometry, timing, calibrations) and docs/physics.md (range limit, noise, weather,
echoes, mirrors, ToF). Unit formats are read by their own modules (:mod:`.ouster`, :mod:`.velodyne`,
:mod:`.airsim`, :mod:`.ibeo`, :mod:`.rosette`); a bad spec raises :class:`SensorSpecError` with one line naming
the key.

Frame: x forward, y left, z up; azimuth counter-clockwise from +x (positive = left); elevation positive up.
"""
from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any, TypeAlias

import numpy as np

from ..documents import one_line, read_document, refuse_unknown_keys, shown
from ..errors import LidarFmuError
from ..geometry.pattern import (
    MAX_RAYS_PER_FRAME,
    ContinuousScan,
    RayPattern,
    angle_list,
    pinhole,
    scan_grid,
)
from ..physics.echoes import Footprint, FootprintError, parse_footprint
from ..physics.effects import Effects, EffectsError, parse_effects, stretched_limit
from ..physics.fmcw import RadialVelocity, RadialVelocityError, parse_radial_velocity
from ..physics.range_limit import RangeReflectivityLimit, parse_range_reflectivity
from ..physics.tof import ToF, ToFSpecError, parse_tof
from .airsim import airsim_spec, looks_like_airsim
from .hesai import (
    HesaiCalibrationError,
    guess_model,
    hesai_pattern,
    model_of,
    preset_of,
    read_hesai_calibration,
    read_hesai_firetimes,
)
from .ibeo import mirror_directions
from .ouster import OusterMetadataError, ouster_rays, range_offset_m, read_ouster_metadata, unit_spec
from .outputs import OutputsError, parse_outputs
from .presets import PRESETS, unknown_preset
from .raster import RasterSpecError, parse_raster, raster_pattern
from .robosense import (
    MODEL_BY_LASERS,
    MODELS,
    RoboSenseAnglesError,
    angles_spec,
    looks_like_robosense_angles,
    read_robosense_angles,
    robosense_pattern,
)
from .rosette import MAX_POINTS_PER_SECOND, rosette_scan
from .velodyne import FIRING, VelodyneCalibrationError, beam_geometry, read_velodyne_calibration, velodyne_pattern

__all__ = ["MAX_RAYS_PER_FRAME", "Sensor", "SensorSpecError", "load_sensor", "preset_rows", "resolve_spec"]

KNOWN_KEYS = {
    "preset", "name", "description",
    "horizontal_samples", "horizontal_fov_deg", "horizontal_resolution_deg",
    "vertical_angles_deg", "vertical_fov_deg", "channels", "calibration",
    "angle_pairs_deg", "pinhole",
    "min_range_m", "max_range_m", "wavelength_nm", "frame_rate_hz", "firing_interval_s",
    "range_reflectivity", "max_transparent_layers", "max_bounces", "tof", "ouster_metadata", "motion_distortion", "motion_slices",
    "noise", "detection", "detection_width", "range_noise", "intensity_law", "range_accuracy_m", "weather",
    "beam_divergence_mrad", "divergence_samples", "returns", "echo_separation_m", "beam_diameter_m",
    "return_order", "divergence_sampling", "radial_velocity", "outputs",
    "velodyne_model", "hesai_model", "firetime_correction",
    "rotating_mirror", "rosette", "raster", "robosense_angles", "robosense_model",
    "airsim_origin", "airsim_disable_self_hits", "airsim_report_frequency_hz",
}


#: what :func:`load_sensor` takes: a preset name, a spec file (JSON/JSONC/YAML, or an Ouster unit's metadata) or
#: a spec dict
SensorSpec: TypeAlias = "str | os.PathLike[str] | dict[str, Any]"


class SensorSpecError(LidarFmuError, ValueError):
    """A sensor spec names an unknown preset, is unreadable or inconsistent: one line, of bounded length."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


#: (lowest, highest) value of a number key, and why (values outside are typos or garbage that would make rays or
#: times that are not finite)
BOUNDS: dict[str, tuple[float, float, str]] = {
    # spinning units turn at 5–25 Hz, flash units and ToF cameras frame at up to a few hundred Hz; a terrestrial
    # scanner's frame may take minutes. Beyond these float32 point times lose their microseconds (or overflow)
    "frame_rate_hz": (1e-3, 1e4, "Hz (a frame of 1000 s to 0.1 ms)"),
    # the longest-range units reach ~2 km; float32 ranges keep millimetres up to ~16 km
    "max_range_m": (0.0, 1e4, "m"),
    "min_range_m": (0.0, 1e4, "m"),
    # lidars and ToF cameras emit 850–1550 nm, CO2 lidars 10.6 µm; the IR spectra cover 0.4–15.4 µm
    "wavelength_nm": (200.0, 20_000.0, "nm"),
    # a datasheet's range accuracy is millimetres to centimetres
    "range_accuracy_m": (0.0, 10.0, "m"),
    # one column's beams fire within microseconds (Velodyne: 1.152–2.304 µs apart); checked against the frame too
    "firing_interval_s": (0.0, 1.0, "s"),
    "horizontal_resolution_deg": (0.0, 360.0, "°"),
}


@dataclass(frozen=True, eq=False)
class Sensor:
    """A lidar: its ray pattern and scalar properties (SI units)."""

    name: str
    pattern: RayPattern
    min_range_m: float
    max_range_m: float
    wavelength_nm: float
    frame_rate_hz: float
    spec: dict[str, Any] = field(default_factory=dict)  # the resolved spec it was made from
    range_limit: RangeReflectivityLimit | None = None  # None: every reflectivity reaches max_range_m
    max_transparent_layers: int = 4
    #: mirrors a ray reflects off at most (:mod:`lidar_fmu.physics.returns`)
    max_bounces: int = 2
    #: rays as a function of time for patterns that do not repeat every frame; None: ``pattern`` repeats
    continuous: ContinuousScan | None = None
    motion_distortion: bool = True
    motion_slices: int = 10
    #: detection probability and measurement noise (:mod:`lidar_fmu.physics.effects`); the default changes nothing
    effects: Effects = field(default_factory=Effects)
    #: beam divergence, sub-rays and which echoes are reported (:mod:`lidar_fmu.physics.echoes`); default: one ray per beam
    footprint: Footprint = field(default_factory=Footprint)
    #: a continuous-wave ToF camera's modulation (:mod:`lidar_fmu.physics.tof`); None: a pulsed lidar, no folding
    tof: ToF | None = None
    #: an FMCW unit's radial velocity output (:mod:`lidar_fmu.physics.fmcw`); None: a unit that measures none
    radial_velocity: RadialVelocity | None = None

    @functools.cached_property
    def physics_range_limit(self) -> RangeReflectivityLimit | None:
        """The limit the physics pass keeps returns within: ``range_limit``, stretched under probabilistic or
        logistic detection so that :func:`~lidar_fmu.physics.effects.apply_effects` can draw the returns just beyond it."""
        if self.range_limit is None or self.effects.detection == "threshold":
            return self.range_limit
        return stretched_limit(self.range_limit)

    @property
    def frame_period_s(self) -> float:
        return 1.0 / self.frame_rate_hz

    def rays_between(self, start_s: float, end_s: float) -> RayPattern | None:
        """The rays this sensor fires in ``[start_s, end_s)`` of its own time (0: its first frame starts).

        Firing times come out after ``start_s``. A repeating pattern fires its
        frame every ``frame_period_s``, column ``c`` at its time in the frame:
        the window gives the columns that start firing inside it, in firing
        order (a partial sweep, wrapping past the frame's end; ``None`` when
        none does). A window of one period holds every column once, starting
        wherever the sensor's clock has the head (``pattern`` itself when a
        frame starts with the window); one longer than a period gives the last
        period before ``end_s``. A :class:`ContinuousScan` fires whatever it
        fires in the window, however long (``scan --duration``; a co-simulation
        step caps its window at one frame period).
        """
        if not end_s > start_s:
            return None
        if self.continuous is not None:
            return self.continuous.rays_between(start_s, end_s)
        period = self.frame_period_s
        if end_s - start_s > period * (1.0 + 1e-6):
            start_s = end_s - period
        pattern = self.pattern
        # a column starting within `tol` of a window's edge belongs to the window after that edge, so windows
        # that tile time fire every column once even when a master rounds its times (to nanoseconds, say)
        tol = 1e-3 * period / pattern.columns  # a thousandth of a column step
        phase = float(np.mod(start_s, period))
        if end_s - start_s >= period - tol and min(phase, period - phase) <= tol:
            return pattern  # a whole frame from its start: the pattern itself (its caches stay warm)
        column_start_s = pattern.time_offset_s.astype(np.float64).reshape(pattern.columns, pattern.rows).min(axis=1)
        phase = float(np.mod(start_s, period))
        # columns by their start after the window opens, wrapping into the next frame
        after_s = np.mod(column_start_s - phase + tol, period) - tol
        inside = np.flatnonzero(after_s < end_s - start_s - tol)
        if len(inside) == 0:
            return None
        inside = inside[np.argsort(after_s[inside], kind="stable")]
        # per column: frame time → time after the window opens
        return pattern.select_columns(inside, after_s[inside] - column_start_s[inside])


def _read_spec_file(path: str) -> dict[str, Any]:
    data = read_document(path, "sensor spec", SensorSpecError)  # bounded: size, depth, aliases (lidar_fmu.documents)
    if not isinstance(data, dict):
        raise SensorSpecError(f"sensor spec {path} must be a mapping of keys, got {type(data).__name__}")
    return data


def _is_ouster_metadata(data: dict[str, Any]) -> bool:
    """Does a JSON document look like an Ouster unit's metadata (current or legacy layout)?"""
    return "beam_altitude_angles" in data or "beam_altitude_angles" in (data.get("beam_intrinsics") or {})


#: spec keys that name a file: in a spec file, a relative name is the file beside it (if one is there), so that the
#: spec moves with its files
FILE_KEYS = ("ouster_metadata", "calibration", "firetime_correction", "robosense_angles")


def _beside(spec: dict[str, Any], folder: str) -> dict[str, Any]:
    """``spec`` (read from a file in ``folder``) with each relative file name of :data:`FILE_KEYS` that names a file
    in ``folder`` made that file's path; other names stay (a packaged calibration, a path from here)."""
    for key in FILE_KEYS:
        name = spec.get(key)
        if isinstance(name, str) and name and not os.path.isabs(name) and os.path.isfile(os.path.join(folder, name)):
            spec[key] = os.path.join(folder, name)
    return spec


def resolve_spec(spec: SensorSpec) -> dict[str, Any]:
    """Turn a preset name, spec file path or dict into one flat spec dict."""
    file_name = None  # a spec file's name: the sensor's name unless the spec gives one
    if isinstance(spec, (str, os.PathLike)):
        text = os.fspath(spec)
        if text in PRESETS:
            spec = {"preset": text}
        elif os.path.isfile(text) and text.lower().endswith(".csv") and looks_like_robosense_angles(text):
            try:  # a RoboSense unit's angle.csv: its model's preset, its own angles
                spec = angles_spec(text)
            except RoboSenseAnglesError as exc:
                raise SensorSpecError(str(exc)) from None
        elif os.path.isfile(text) and text.lower().endswith(".csv"):  # a Hesai unit's angle-correction CSV
            spec = hesai_spec(text)
            file_name = os.path.splitext(os.path.basename(text))[0]
        elif os.path.isfile(text):
            spec = _beside(_read_spec_file(text), os.path.dirname(text))
            if _is_ouster_metadata(spec):  # a unit's own metadata JSON: its calibration, its line's datasheet
                try:
                    spec = unit_spec(read_ouster_metadata(spec, os.path.splitext(os.path.basename(text))[0]), text)
                except OusterMetadataError as exc:
                    raise SensorSpecError(str(exc)) from None
            file_name = os.path.splitext(os.path.basename(text))[0]
        elif text.lower().endswith((".json", ".jsonc", ".yaml", ".yml")):
            raise SensorSpecError(f"sensor spec file not found: {text}")
        else:
            raise SensorSpecError(unknown_preset(text))
    if not isinstance(spec, dict):
        raise SensorSpecError(f"a sensor spec must be a preset name, file or mapping, got {type(spec).__name__}")
    if looks_like_airsim(spec):  # a Project AirSim lidar entry or robot config (airsim_id picks one of several)
        rest = {k: v for k, v in spec.items() if k != "airsim_id"}
        spec = airsim_spec(rest, SensorSpecError, spec.get("airsim_id"), file_name)
    elif file_name is not None:
        spec.setdefault("name", file_name)
    refuse_unknown_keys(spec, KNOWN_KEYS, "sensor spec", SensorSpecError)
    preset = spec.get("preset")
    if preset is not None:
        if not isinstance(preset, str):
            raise SensorSpecError(f"sensor spec key 'preset' must be a preset name, got {shown(preset)}")
        if preset not in PRESETS:
            resolve_spec(str(preset))  # raises 'unknown preset' with suggestions
        base = dict(PRESETS[preset])
        base["name"] = preset
        # Geometry keys of the preset give way to any geometry the user set.
        if {"vertical_angles_deg", "vertical_fov_deg", "angle_pairs_deg", "pinhole", "ouster_metadata",
                "robosense_angles", "raster"} & set(spec):
            for key in ("calibration", "vertical_angles_deg", "vertical_fov_deg", "channels", "robosense_angles",
                        "raster"):
                base.pop(key, None)
        if "horizontal_resolution_deg" in spec:
            base.pop("horizontal_samples", None)
        if "horizontal_samples" in spec:
            base.pop("horizontal_resolution_deg", None)
        spec = base | {k: v for k, v in spec.items() if k != "preset"}
    return spec


def _number(spec: dict[str, Any], key: str, default: float | None = None, positive: bool = True) -> float:
    """A number key, finite, > 0 (``positive``) or ≥ 0, and within its :data:`BOUNDS` where it has them."""
    value: Any = spec.get(key, default)  # anything a spec holds: float() says whether it is a number
    try:
        if isinstance(value, bool):
            raise TypeError
        value = float(value)
    except (TypeError, ValueError, OverflowError):
        raise SensorSpecError(f"sensor spec key {key!r} must be a number, got {shown(value)}") from None
    if not np.isfinite(value) or (positive and value <= 0) or (not positive and value < 0 and key in BOUNDS):
        sign = "positive" if positive else "non-negative" if key in BOUNDS else ""
        raise SensorSpecError(f"sensor spec key {key!r} must be a {sign + ' ' if sign else ''}finite number, "
                              f"got {shown(value)}")
    if key in BOUNDS:
        low, high, unit = BOUNDS[key]
        if not low <= value <= high:
            raise SensorSpecError(f"sensor spec key {key!r} must lie in {low:g} … {high:g} {unit}, got {value:g}")
    return value


def _angles(spec: dict[str, Any], key: str, length: int | None = None) -> np.ndarray:
    try:
        values = np.asarray(spec[key], dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise SensorSpecError(f"sensor spec key {key!r} must be a list of numbers, got {shown(spec[key])}") from None
    if (values.ndim != 1 or len(values) == 0 or (length and len(values) != length) or not np.all(np.isfinite(values))
            or isinstance(spec[key], (str, bytes))):
        want = f"{length} finite numbers" if length else "a non-empty list of finite numbers"
        raise SensorSpecError(f"sensor spec key {key!r} must be {want}, got {shown(spec[key])}")
    if np.any(np.abs(values) > 720):  # degrees: two turns either way is the most any layout needs
        raise SensorSpecError(f"sensor spec key {key!r} must hold angles within ±720°, got {shown(spec[key])}")
    return values


def data_file(name: str) -> str:
    """A path as given, else the packaged ``data/`` file of that name; SensorSpecError when neither exists."""
    if os.path.isfile(name):
        return name
    packaged = resources.files(__package__).joinpath("data").joinpath(name)  # one name a call: Python 3.10's API
    if not packaged.is_file():
        raise SensorSpecError(f"calibration file not found: {name}")
    return str(packaged)


def _velodyne(spec: dict[str, Any], frame_period_s: float) -> RayPattern:
    """A Velodyne calibration YAML's lasers (with their origin offsets); with ``velodyne_model`` the model's
    documented firing sequence times every ray (:mod:`.velodyne`), else columns spread over the frame."""
    try:
        cal = read_velodyne_calibration(data_file(str(spec["calibration"])))
    except VelodyneCalibrationError as exc:
        raise SensorSpecError(str(exc)) from None
    model = spec.get("velodyne_model")
    if model is None:
        start, end, columns = _column_layout(spec)
        _check_rays(cal.lasers * columns, f"{cal.lasers:,} beams × {columns:,} columns")
        azimuth = _column_azimuths(start, end, columns)
        grid = scan_grid(cal.vert_correction_rad, azimuth, frame_period_s=frame_period_s,
                         azimuth_offset_rad=cal.rot_correction_rad,
                         firing_interval_s=_firing_interval(spec, cal.lasers, frame_period_s))
        if not (np.any(cal.vert_offset_m) or np.any(cal.horiz_offset_m)):
            return grid
        origins, _ = beam_geometry(cal, grid.beam_id.astype(np.int64), azimuth[grid.column])
        return replace(grid, origins=origins.astype(np.float32))
    if model not in FIRING:
        raise SensorSpecError(f"unknown velodyne_model {shown(model)}; known: {', '.join(FIRING)}")
    timing = FIRING[model]
    layout = dict(spec)
    if "horizontal_samples" not in spec and "horizontal_resolution_deg" not in spec:
        # as many firing sequences as the head fires while it sweeps the FOV once a frame
        start, end = _angles(spec, "horizontal_fov_deg", 2) if "horizontal_fov_deg" in spec else (180.0, -180.0)
        full_turn = abs(abs(end - start) - 360) < 1e-9
        sequences = abs(end - start) / 360.0 * frame_period_s / timing.sequence_s
        layout["horizontal_samples"] = max(1, int(sequences + 1e-9) + (0 if full_turn else 1))
    start, end, columns = _column_layout(layout)
    _check_rays(cal.lasers * columns, f"{cal.lasers:,} beams × {columns:,} columns")
    try:
        return velodyne_pattern(cal, timing, columns=columns, start_azimuth_rad=np.radians(start),
                                turn_direction=float(np.sign(end - start)), frame_rate_hz=1.0 / frame_period_s)
    except VelodyneCalibrationError as exc:
        raise SensorSpecError(str(exc)) from None


def hesai_spec(path: str) -> dict[str, Any]:
    """The spec of a Hesai unit's angle-correction CSV given as a sensor: its model's preset (the model whose
    default angle table it is nearest, :func:`lidar_fmu.sensors.hesai.guess_model`) with this file's angles."""
    try:
        model = guess_model(read_hesai_calibration(path))
    except HesaiCalibrationError as exc:
        raise SensorSpecError(str(exc)) from None
    preset = preset_of(model.name)
    return {"preset": preset, "calibration": os.path.abspath(path)}


def _hesai(spec: dict[str, Any], frame_period_s: float) -> RayPattern:
    """A Hesai unit's rays from its angle-correction CSV (``calibration``), model (``hesai_model``, else guessed
    from the angles) and firetime correction (``firetime_correction``, else the model's packaged one)."""
    try:
        cal = read_hesai_calibration(data_file(str(spec["calibration"])))
        model = model_of(spec["hesai_model"]) if "hesai_model" in spec else guess_model(cal)
        firetimes = read_hesai_firetimes(data_file(str(spec.get("firetime_correction", model.firetime_file))),
                                         model.channels)
        return hesai_pattern(cal, model, firetimes, frame_rate_hz=1.0 / frame_period_s)
    except HesaiCalibrationError as exc:
        raise SensorSpecError(str(exc)) from None


def _firing_interval(spec: dict[str, Any], beams: int, frame_period_s: float) -> float:
    """``firing_interval_s``: beam ``b`` fires ``b`` intervals after its column starts, so the last beam of a
    column must fire within the frame (else its points would carry times past the frame, or infinite ones)."""
    interval = _number(spec, "firing_interval_s", 0.0, positive=False)
    if (beams - 1) * interval >= frame_period_s:
        raise SensorSpecError(f"sensor spec key 'firing_interval_s': {beams} beams {interval:g} s apart take "
                              f"longer than a frame of {frame_period_s:g} s")
    return interval


def _check_rays(count: float, what: str) -> None:
    """One-line :class:`SensorSpecError` when ``count`` (rays per frame, or a lower bound of them) is too many.

    Checked before any array is made: a frame casts at most :data:`MAX_RAYS_PER_FRAME` rays.
    """
    if count > MAX_RAYS_PER_FRAME:
        raise SensorSpecError(f"sensor spec asks for {what}: more than the limit of {MAX_RAYS_PER_FRAME:,} rays "
                              "per frame")


def _column_layout(spec: dict[str, Any]) -> tuple[float, float, int]:
    """(start_deg, end_deg, columns) of the sweep, checked before any array is made."""
    start, end = _angles(spec, "horizontal_fov_deg", 2) if "horizontal_fov_deg" in spec else (180.0, -180.0)
    span = end - start
    if span == 0 or abs(span) > 360 + 1e-9:
        raise SensorSpecError(f"horizontal_fov_deg [{start}, {end}] must span (0, 360] degrees")
    full_turn = abs(abs(span) - 360) < 1e-9
    if "horizontal_samples" in spec:
        samples = spec["horizontal_samples"]
        if not isinstance(samples, (int, np.integer)) or isinstance(samples, bool) or samples < 1:
            raise SensorSpecError(f"horizontal_samples must be a positive integer, got {shown(samples)}")
        _check_rays(int(samples), f"{int(samples):,} columns")
    elif "horizontal_resolution_deg" in spec:
        step = _number(spec, "horizontal_resolution_deg")
        columns = abs(span) / step
        _check_rays(columns, f"{columns:,.0f} columns" if columns < 1e12 else f"{columns:.3g} columns")
        samples = int(round(abs(span) / step)) + (0 if full_turn else 1)
    else:
        raise SensorSpecError("sensor spec needs horizontal_samples or horizontal_resolution_deg")
    return float(start), float(end), int(samples)


def _column_azimuths(start: float, end: float, samples: int) -> np.ndarray:
    span = end - start
    if abs(abs(span) - 360) < 1e-9:  # a full turn: the last column stops one step short of the first
        return np.radians(start + span * np.arange(samples) / samples)
    return np.radians(np.linspace(start, end, samples))


def _ouster_pattern(source: str | dict[str, Any]) -> RayPattern:
    """The rays of an Ouster unit from its metadata JSON (a path, packaged file name, or dict)."""
    if isinstance(source, str) and not os.path.isfile(source):
        packaged = os.path.join(os.path.dirname(__file__), "data", source)
        if os.path.isfile(packaged):
            source = packaged
    try:
        cal = read_ouster_metadata(source)
    except OusterMetadataError as exc:
        raise SensorSpecError(str(exc)) from None
    first, last = cal.column_window
    columns = (last - first) % cal.columns + 1
    _check_rays(cal.beams * columns, f"{cal.beams} beams × {columns:,} columns")
    origins, directions, beam, column, time_s = ouster_rays(cal)
    return RayPattern(directions, beam, column, time_s, cal.beams, columns, origins=origins,
                      range_offset_m=range_offset_m(cal))


def _robosense(spec: dict[str, Any], frame_period_s: float) -> RayPattern:
    """A RoboSense unit's rays: its angle.csv (``robosense_angles``) or ``vertical_angles_deg``, timed by its
    model's firing (``robosense_model``, else the model a file's line count names; :mod:`.robosense`)."""
    try:
        if "robosense_angles" in spec:
            elevation, horizontal = read_robosense_angles(data_file(str(spec["robosense_angles"])))
        else:
            elevation = _angles(spec, "vertical_angles_deg")
            horizontal = np.zeros_like(elevation)
        model = spec.get("robosense_model", MODEL_BY_LASERS.get(len(elevation)))
        if model not in MODELS:
            raise SensorSpecError(f"sensor spec key 'robosense_model' must be one of {', '.join(MODELS)}, got "
                                  f"{shown(model)}")
        if np.any(np.abs(elevation) > 90):
            raise SensorSpecError("sensor spec key 'vertical_angles_deg': beam elevations must lie within ±90°")
        return robosense_pattern(elevation, horizontal, MODELS[model], frame_rate_hz=1.0 / frame_period_s)
    except RoboSenseAnglesError as exc:
        raise SensorSpecError(str(exc)) from None


#: keys that lay out a grid of columns, which a raster or a RoboSense model lays out itself: given beside one they
#: would change nothing, so they are refused rather than ignored
_GRID_KEYS = ("horizontal_samples", "horizontal_fov_deg", "horizontal_resolution_deg", "firing_interval_s",
              "rotating_mirror", "velodyne_model", "calibration")


def _refuse_grid_keys(spec: dict[str, Any], owner: str, extra: tuple[str, ...], hint: str) -> None:
    given = [key for key in _GRID_KEYS + extra if key in spec]
    if given:
        raise SensorSpecError(f"sensor spec key {given[0]!r} does nothing beside {owner!r}, which lays out the "
                              f"rays itself ({hint}): remove it")


def _pattern(spec: dict[str, Any], frame_period_s: float) -> RayPattern:
    if "raster" in spec:
        _refuse_grid_keys(spec, "raster", ("vertical_angles_deg", "vertical_fov_deg", "channels", "robosense_model",
                                           "robosense_angles", "ouster_metadata", "angle_pairs_deg", "pinhole"),
                          "the raster's own keys go inside it")
        try:
            return raster_pattern(parse_raster(spec["raster"]), frame_period_s)
        except RasterSpecError as exc:
            raise SensorSpecError(str(exc)) from None
    if "robosense_model" in spec or "robosense_angles" in spec:
        if "robosense_angles" in spec and "vertical_angles_deg" in spec:
            raise SensorSpecError("sensor spec key 'vertical_angles_deg' does nothing beside 'robosense_angles', "
                                  "which gives the beams: remove one")
        _refuse_grid_keys(spec, "robosense_model", ("vertical_fov_deg", "channels", "ouster_metadata",
                                                    "angle_pairs_deg", "pinhole"), "frame_rate_hz sets the head's speed")
        return _robosense(spec, frame_period_s)
    if "ouster_metadata" in spec:
        return _ouster_pattern(spec["ouster_metadata"])
    if "angle_pairs_deg" in spec:
        try:
            pairs = np.asarray(spec["angle_pairs_deg"], dtype=np.float64)
        except (TypeError, ValueError):
            pairs = np.empty((0, 0))
        if pairs.ndim != 2 or pairs.shape[1] != 2 or len(pairs) == 0 or not np.all(np.isfinite(pairs)):
            raise SensorSpecError("angle_pairs_deg must be a non-empty list of [azimuth, elevation] pairs")
        _check_rays(len(pairs), f"{len(pairs):,} angle pairs")
        return angle_list(np.radians(pairs[:, 0]), np.radians(pairs[:, 1]), frame_period_s=frame_period_s)
    if "pinhole" in spec:
        cam = spec["pinhole"]
        try:
            width, height, fov = int(cam["width_px"]), int(cam["height_px"]), float(cam["horizontal_fov_deg"])
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise SensorSpecError(f"pinhole needs width_px, height_px, horizontal_fov_deg: {exc}") from None
        if width >= 1 and height >= 1:
            _check_rays(width * height, f"a pinhole of {width:,} × {height:,} = {width * height:,} px")
        try:
            return pinhole(width, height, fov)
        except ValueError as exc:
            raise SensorSpecError(f"pinhole needs width_px, height_px, horizontal_fov_deg: {exc}") from None
    if "vertical_angles_deg" in spec:
        elevation = np.radians(_angles(spec, "vertical_angles_deg"))
    elif "vertical_fov_deg" in spec:
        lower, upper = _angles(spec, "vertical_fov_deg", 2)
        channels = spec.get("channels")
        if not isinstance(channels, (int, np.integer)) or isinstance(channels, bool) or channels < 1:
            raise SensorSpecError(f"vertical_fov_deg needs a positive integer 'channels', got {shown(channels)}")
        if lower > upper:
            raise SensorSpecError(f"vertical_fov_deg must be [lower, upper], got [{lower}, {upper}]")
        _check_rays(int(channels), f"{int(channels):,} channels")
        elevation = np.radians(np.linspace(lower, upper, channels) if channels > 1 else [0.5 * (lower + upper)])
    elif "calibration" in spec:
        if "hesai_model" in spec or str(spec["calibration"]).lower().endswith(".csv"):
            return _hesai(spec, frame_period_s)
        return _velodyne(spec, frame_period_s)
    else:
        raise SensorSpecError(
            "sensor spec needs a beam layout: preset, vertical_angles_deg, vertical_fov_deg+channels, "
            "calibration, angle_pairs_deg or pinhole"
        )
    if np.any(np.abs(elevation) > np.pi / 2):
        key = "vertical_angles_deg" if "vertical_angles_deg" in spec else "vertical_fov_deg"
        raise SensorSpecError(f"sensor spec key {key!r}: beam elevations must lie within ±90°")
    start, end, columns = _column_layout(spec)
    rays = len(elevation) * columns
    _check_rays(rays, f"{len(elevation):,} beams × {columns:,} columns = {rays:,} rays")
    azimuth = _column_azimuths(start, end, columns)
    grid = scan_grid(elevation, azimuth, frame_period_s=frame_period_s,
                     firing_interval_s=_firing_interval(spec, len(elevation), frame_period_s))
    mirror = spec.get("rotating_mirror", False)
    if not isinstance(mirror, bool):
        raise SensorSpecError(f"rotating_mirror must be true or false, got {shown(mirror)}")
    if mirror:  # layers off a turning 45° mirror (Ibeo LUX, BlenSor): elevation coupled to azimuth
        return replace(grid, directions=mirror_directions(elevation[grid.beam_id], azimuth[grid.column]))
    return grid


def _continuous(spec: dict[str, Any]) -> ContinuousScan:
    """The :class:`ContinuousScan` of a ``rosette`` spec (:mod:`.rosette`), its settings checked."""
    rosette = spec["rosette"]
    if not isinstance(rosette, dict):
        raise SensorSpecError(f"rosette must be a mapping, got {shown(rosette)}")
    known = {"points_per_second", "channels", "horizontal_rotation_hz", "vertical_rotation_hz", "radial_scaling",
             "vertical_fov_deg", "cone_half_angles_deg"}
    refuse_unknown_keys(rosette, known, "sensor spec key 'rosette'", SensorSpecError)
    channels = rosette.get("channels", 1)
    if not isinstance(channels, (int, np.integer)) or isinstance(channels, bool) or not 1 <= channels <= 4096:
        raise SensorSpecError(f"rosette channels must be an integer in 1..4096, got {shown(channels)}")
    geometry = {k: list(_angles(rosette, k, 2)) for k in ("vertical_fov_deg", "cone_half_angles_deg") if k in rosette}
    if len(geometry) != 1:
        raise SensorSpecError("rosette needs exactly one of vertical_fov_deg and cone_half_angles_deg")
    for lower_deg, upper_deg in geometry.values():
        if not (-90 <= lower_deg <= 90 and -90 <= upper_deg <= 90):
            raise SensorSpecError(f"rosette angles must lie within ±90°, got {geometry}")
    points_per_second = _number(rosette, "points_per_second")
    if points_per_second > MAX_POINTS_PER_SECOND:
        key = "points-per-second" if "airsim_origin" in spec else "rosette.points_per_second"  # as the user wrote it
        raise SensorSpecError(f"sensor spec key {key!r} must be at most {MAX_POINTS_PER_SECOND:.0e} points/s, "
                              f"got {points_per_second:g}")
    return rosette_scan(points_per_second=points_per_second, channels=int(channels),
                        horizontal_rotation_hz=_number(rosette, "horizontal_rotation_hz", positive=False),
                        vertical_rotation_hz=_number(rosette, "vertical_rotation_hz", positive=False),
                        radial_scaling=_number(rosette, "radial_scaling", 1.0), **geometry)


def load_sensor(spec: SensorSpec) -> Sensor:
    """Build a :class:`Sensor` from a preset name, a JSON/YAML spec file or a spec dict.

    Raises :class:`SensorSpecError` with a one-line reason on bad input.
    """
    spec = resolve_spec(spec)
    for key, longest in (("name", 200), ("description", 2000)):
        text = spec.get(key, "")
        if isinstance(text, bool) or not isinstance(text, (str, int, float)) or len(str(text)) > longest:
            raise SensorSpecError(f"sensor spec key {key!r} must be a text of at most {longest} characters, "
                                  f"got {shown(text)}")
    frame_rate_hz = _number(spec, "frame_rate_hz", 10.0)
    min_range_m = _number(spec, "min_range_m", 0.0, positive=False)
    max_range_m = _number(spec, "max_range_m", 120.0)
    if not 0 <= min_range_m < max_range_m:
        raise SensorSpecError(f"need 0 ≤ min_range_m < max_range_m, got {min_range_m}, {max_range_m}")
    range_limit = None
    if spec.get("range_reflectivity") is not None:
        try:
            range_limit = parse_range_reflectivity(spec["range_reflectivity"], max_range_m)
        except (ValueError, TypeError) as exc:
            raise SensorSpecError(f"range_reflectivity: {exc}") from None
    layers = spec.get("max_transparent_layers", 4)
    if not isinstance(layers, (int, np.integer)) or isinstance(layers, bool) or not 0 <= layers <= 64:
        raise SensorSpecError(f"max_transparent_layers must be an integer in 0..64, got {shown(layers)}")
    bounces = spec.get("max_bounces", 2)
    if not isinstance(bounces, (int, np.integer)) or isinstance(bounces, bool) or not 0 <= bounces <= 16:
        raise SensorSpecError(f"max_bounces must be an integer in 0..16, got {shown(bounces)}")
    try:
        tof = parse_tof(spec.get("tof"))
    except ToFSpecError as exc:
        raise SensorSpecError(str(exc)) from None
    if tof is not None and "pinhole" not in spec:
        raise SensorSpecError("tof is a continuous-wave ToF camera's modulation: it needs a pinhole sensor")
    if "range_accuracy_m" in spec:
        _number(spec, "range_accuracy_m")
    try:
        effects = parse_effects(spec)
    except EffectsError as exc:
        raise SensorSpecError(str(exc)) from None
    try:
        footprint = parse_footprint(spec)
    except FootprintError as exc:
        raise SensorSpecError(str(exc)) from None
    try:
        radial_velocity = parse_radial_velocity(spec.get("radial_velocity"))
    except RadialVelocityError as exc:
        raise SensorSpecError(str(exc)) from None
    if radial_velocity is not None and tof is not None:
        raise SensorSpecError("radial_velocity is an FMCW lidar's; a ToF camera (tof) measures none")
    try:
        parse_outputs(spec.get("outputs"), "sensor spec key 'outputs'")
    except OutputsError as exc:
        raise SensorSpecError(str(exc)) from None
    distortion = spec.get("motion_distortion", True)
    if not isinstance(distortion, bool):
        raise SensorSpecError(f"motion_distortion must be true or false, got {shown(distortion)}")
    slices = spec.get("motion_slices", 10)
    if not isinstance(slices, (int, np.integer)) or isinstance(slices, bool) or not 1 <= slices <= 4096:
        raise SensorSpecError(f"motion_slices must be an integer in 1..4096, got {shown(slices)}")
    continuous = _continuous(spec) if "rosette" in spec else None
    if continuous is not None:
        rays = continuous.shots_per_second * continuous.channels / frame_rate_hz
        _check_rays(rays, f"{rays:,.0f} rays a frame (rosette points_per_second / frame_rate_hz)")
    # a pattern that never repeats shows its first frame's rays as ``pattern``
    pattern = continuous.rays_between(0.0, 1.0 / frame_rate_hz) if continuous else _pattern(spec, 1.0 / frame_rate_hz)
    if pattern is None:
        raise SensorSpecError(f"a frame of 1/{frame_rate_hz:g} s is shorter than one shot of the rosette")
    return Sensor(
        name=str(spec.get("name", "custom")),
        pattern=pattern,
        continuous=continuous,
        min_range_m=min_range_m,
        max_range_m=max_range_m,
        wavelength_nm=_number(spec, "wavelength_nm", 905.0),
        frame_rate_hz=frame_rate_hz,
        spec=spec,
        range_limit=range_limit,
        max_transparent_layers=int(layers),
        max_bounces=int(bounces),
        tof=tof,
        motion_distortion=distortion,
        motion_slices=int(slices),
        effects=effects,
        footprint=footprint,
        radial_velocity=radial_velocity,
    )


def preset_rows() -> Iterator[tuple[str, int, float, int, float, str]]:
    """(name, channels, horizontal FOV°, rays per frame, frame rate Hz, description) per preset."""
    for name, spec in PRESETS.items():
        sensor = load_sensor(name)
        fov = abs(np.subtract(*spec["horizontal_fov_deg"])) if "horizontal_fov_deg" in spec else 360.0
        if "cone_half_angles_deg" in spec.get("rosette", {}):
            fov = 2.0 * spec["rosette"]["cone_half_angles_deg"][0]
        if "raster" in spec:
            fov = parse_raster(spec["raster"]).horizontal_extent_deg()
        yield name, sensor.pattern.rows, fov, len(sensor.pattern), sensor.frame_rate_hz, spec["description"]
