"""Project AirSim lidar settings (a ``sensors`` entry with ``type: lidar``) as a sensor spec.

Per Project AirSim's lidar documentation (seed 003; github.com/iamaisim/ProjectAirSim ``docs/sensors/lidar.md``),
accepted verbatim: :func:`airsim_spec` takes one sensor entry, or a robot config's lidar (``select_id`` picks one
of several; :func:`robot_config_lidars` lists them for :mod:`.rig`), and converts AirSim's conventions (clockwise
angles, NED ``origin``) to ours. ``generic_cylindrical`` becomes a spinning grid; ``generic_rosette``,
``livox_mid70`` and ``livox_avia`` a :mod:`.rosette`. Every key is one of :data:`AIRSIM_KEYS`; the report settings
are checked and change nothing here. The conversions, defaults, what is refused and the sources:
docs/sensors.md#project-airsim-settings-and-livox.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..documents import refuse_unknown_keys, shown
from .presets import PRESETS

#: Every setting of a lidar entry the documentation lists (``vertical-fov-start/end-deg`` in its table, the sample
#: config's ``vertical-fov-lower/upper-deg``: both spellings).
AIRSIM_KEYS = {
    "id", "type", "enabled", "parent-link", "lidar-type", "number-of-channels", "range", "points-per-second",
    "report-frequency", "horizontal-rotation-frequency", "horizontal-fov-start-deg", "horizontal-fov-end-deg",
    "vertical-rotation-frequency", "vertical-fov-lower-deg", "vertical-fov-upper-deg", "vertical-fov-start-deg",
    "vertical-fov-end-deg", "radial-scaling", "disable-self-hits", "draw-debug-points", "origin",
    "report-no-return-points", "no-return-point-value", "report-point-cloud", "report-azimuth-elevation-range",
}
#: report settings that choose what AirSim's own message holds: checked, no effect on ours (docs/sensors.md)
_REPORT_FLAGS = ("report-no-return-points", "report-point-cloud", "report-azimuth-elevation-range")
LIDAR_TYPES = ("generic_cylindrical", "generic_rosette", "livox_mid70", "livox_avia")
# The documentation's sample config (seed 003): defaults for the settings it gives no default for.
_SAMPLE = {"number-of-channels": 16, "range": 100.0, "points-per-second": 100000,
           "horizontal-rotation-frequency": 10.0, "vertical-rotation-frequency": 0.0,
           "horizontal-fov-start-deg": 0.0, "horizontal-fov-end-deg": 360.0,
           "vertical-fov-lower-deg": -45.0, "vertical-fov-upper-deg": -15.0}
#: Livox point-cloud frame rate (Mid-70 / Avia datasheets: 10 Hz), used when report-frequency < 0.5 Hz.
LIVOX_FRAME_RATE_HZ = 10.0


def looks_like_airsim(data: dict) -> bool:
    """A Project AirSim lidar entry, or a config holding a ``sensors`` list?"""
    return "lidar-type" in data or data.get("type") == "lidar" or isinstance(data.get("sensors"), list)


def robot_config_lidars(data: dict) -> list[dict] | None:
    """The lidar entries of a Project AirSim robot config (but those with ``enabled: false``, which AirSim does
    not run), or None if ``data`` is not one.

    A robot config's ``sensors`` are mappings that each name their ``type`` (lidar, camera, imu, …); a rig's
    entries are our specs (preset names, mappings without ``type``), so a list where every entry has a
    ``type`` is AirSim's, and its sensors of other types and the robot's other keys are not ours to read.
    """
    sensors = data.get("sensors")
    if not isinstance(sensors, list) or not sensors or not all(isinstance(s, dict) and "type" in s for s in sensors):
        return None
    return [s for s in sensors if s.get("type") == "lidar" and s.get("enabled", True) is not False]


def _entry(data: dict, error, select_id=None) -> dict:
    if "sensors" not in data:
        return data
    enabled = robot_config_lidars(data)  # AirSim runs only the enabled ones
    if data["sensors"] and enabled is None:  # our rig (sensors/rig.py), not AirSim's
        raise error(f"a rig of {len(data['sensors'])} lidars ('sensors') where one lidar is expected")
    if select_id is not None:
        lidars = [s for s in data["sensors"] if s.get("type") == "lidar" and s.get("id") == select_id]
    else:
        lidars = enabled or []
    if not lidars:
        which = f" with id {select_id!r}" if select_id is not None else " that is enabled"
        raise error(f"AirSim config has no sensor of type 'lidar'{which}")
    if len(lidars) > 1:
        ids = ", ".join(repr(s.get("id")) for s in lidars)
        raise error(f"AirSim config has {len(lidars)} lidars ({ids}): name one with the spec key airsim_id")
    return lidars[0]


def _number(entry: dict, key: str, error, default=None, minimum=None) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool):
        value = None
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise error(f"AirSim setting {key!r} must be a number, got {entry.get(key)!r}") from None
    if not np.isfinite(value) or (minimum is not None and value < minimum):
        bound = "" if minimum is None else f" ≥ {minimum:g}"
        raise error(f"AirSim setting {key!r} must be a finite number{bound}, got {value!r}")
    return value


def _triple(settings: dict, key: str, where: str, error) -> np.ndarray:
    """Three finite numbers: AirSim writes vectors as one string ``"x y z"``; a list of 3 numbers is taken too."""
    text = settings.get(key, "0 0 0")
    items = text if isinstance(text, (list, tuple)) else str(text).replace(",", " ").split()
    try:
        values = np.array([float(v) for v in items if not isinstance(v, bool)] if len(items) == 3 else [])
    except (TypeError, ValueError):
        values = np.empty(0)
    if values.shape != (3,) or not np.all(np.isfinite(values)):
        raise error(f"AirSim setting {where} must be 3 numbers, got {text!r}")
    return values


def _check_report_settings(entry: dict, error) -> None:
    """The report settings (docs/sensors.md#project-airsim-settings-and-livox): of the right types, and not a lidar
    that reports nothing."""
    for key in _REPORT_FLAGS:
        if not isinstance(entry.get(key, False), bool):
            raise error(f"AirSim setting {key!r} must be true or false, got {entry[key]!r}")
    if "no-return-point-value" in entry:
        _triple(entry, "no-return-point-value", "'no-return-point-value'", error)
    if not entry.get("report-point-cloud", True) and not entry.get("report-azimuth-elevation-range", False):
        raise error("AirSim settings 'report-point-cloud' and 'report-azimuth-elevation-range' are both false: "
                    "such a lidar reports no points")


def _origin(entry: dict, error) -> dict:
    origin = entry.get("origin") or {}
    if not isinstance(origin, dict):
        raise error(f"AirSim setting 'origin' must hold xyz and rpy-deg (or rpy), got {shown(origin)}")
    refuse_unknown_keys(origin, ("xyz", "rpy-deg", "rpy"), "AirSim setting 'origin'", error)

    if "rpy-deg" in origin and "rpy" in origin:
        raise error("AirSim setting origin has both rpy-deg and rpy")
    xyz = _triple(origin, "xyz", "origin.xyz", error)
    rpy_deg = np.degrees(_triple(origin, "rpy", "origin.rpy", error)) if "rpy" in origin else \
        _triple(origin, "rpy-deg", "origin.rpy-deg", error)
    # NED body frame → ours: y and z flip, so do pitch and yaw
    return {"xyz_m": [xyz[0], -xyz[1], -xyz[2]], "rpy_deg": [rpy_deg[0], -rpy_deg[1], -rpy_deg[2]]}


def _vertical_fov(entry: dict, error) -> list[float]:
    for old, new in (("vertical-fov-start-deg", "vertical-fov-lower-deg"), ("vertical-fov-end-deg",
                                                                             "vertical-fov-upper-deg")):
        if old in entry and new in entry:
            raise error(f"AirSim settings {old!r} and {new!r} are the same setting: give one")
    lower = _number(entry, "vertical-fov-lower-deg", error,
                    entry.get("vertical-fov-start-deg", _SAMPLE["vertical-fov-lower-deg"]))
    upper = _number(entry, "vertical-fov-upper-deg", error,
                    entry.get("vertical-fov-end-deg", _SAMPLE["vertical-fov-upper-deg"]))
    if not -90 <= lower <= 90 or not -90 <= upper <= 90:
        raise error(f"AirSim vertical FOV must lie in −90 … +90°, got {lower}, {upper}")
    return [lower, upper]


def airsim_spec(data: dict, error, select_id=None, default_name: str | None = None) -> dict:
    """Our flat spec from an AirSim lidar entry (or config); ``error`` is raised with a one-line reason.

    The sensor's name is the entry's ``id``, else ``default_name`` (a file's name), else ``airsim_<lidar-type>``.
    """
    entry = _entry(data, error, select_id)
    refuse_unknown_keys(entry, AIRSIM_KEYS, "AirSim lidar entry", error)
    if entry.get("type", "lidar") != "lidar":
        raise error(f"AirSim sensor type must be 'lidar', got {entry.get('type')!r}")
    kind = str(entry.get("lidar-type", "generic_cylindrical")).replace("-", "_")
    if kind not in LIDAR_TYPES:
        raise error(f"unknown AirSim lidar-type {entry.get('lidar-type')!r}; known: {', '.join(LIDAR_TYPES)}")
    for key in ("disable-self-hits", "draw-debug-points", "enabled"):
        if not isinstance(entry.get(key, False), bool):
            raise error(f"AirSim setting {key!r} must be true or false, got {entry[key]!r}")
    _check_report_settings(entry, error)
    livox = kind.startswith("livox")
    spec: dict[str, Any]
    if livox:
        given = sorted(k for k in entry if "fov" in k)
        if given:
            raise error(f"AirSim {kind} takes its FOV from the datasheet; {', '.join(given)} not accepted "
                        "(use generic_rosette for a custom FOV)")
        base = PRESETS[kind]
        rosette = dict(base["rosette"])
        defaults = {"number-of-channels": rosette["channels"], "points-per-second": rosette["points_per_second"],
                    "horizontal-rotation-frequency": rosette["horizontal_rotation_hz"],
                    "vertical-rotation-frequency": rosette["vertical_rotation_hz"], "range": base["max_range_m"]}
        spec = {"preset": kind}
    else:
        defaults, spec = _SAMPLE, {}
    channels = entry.get("number-of-channels", defaults["number-of-channels"])
    if not isinstance(channels, (int, np.integer)) or isinstance(channels, bool) or channels < 1:
        raise error(f"AirSim setting 'number-of-channels' must be a positive integer, got {channels!r}")
    points_per_second = _number(entry, "points-per-second", error, defaults["points-per-second"], minimum=1)
    rotation_hz = _number(entry, "horizontal-rotation-frequency", error, defaults["horizontal-rotation-frequency"])
    if rotation_hz <= 0:
        raise error(f"AirSim setting 'horizontal-rotation-frequency' must be positive, got {rotation_hz}")
    report_hz = _number(entry, "report-frequency", error, 0.0, minimum=0)
    spec.update({
        "name": str(entry.get("id", default_name or f"airsim_{kind}")),
        "description": f"Project AirSim {kind} lidar",
        "max_range_m": _number(entry, "range", error, defaults["range"], minimum=0),
        "airsim_origin": _origin(entry, error),
        "airsim_disable_self_hits": entry.get("disable-self-hits", False),
        "airsim_report_frequency_hz": report_hz,
    })
    if kind == "generic_cylindrical":
        start = _number(entry, "horizontal-fov-start-deg", error, _SAMPLE["horizontal-fov-start-deg"])
        end = _number(entry, "horizontal-fov-end-deg", error, _SAMPLE["horizontal-fov-end-deg"])
        if not (0 <= start <= 360 and 0 <= end <= 360 and start != end):
            raise error(f"AirSim horizontal FOV must be two different angles in 0 … 360°, got {start}, {end}")
        span = (end - start) % 360.0 or 360.0  # clockwise from start to end
        per_turn = points_per_second / (channels * rotation_hz)
        columns = int(round(per_turn * span / 360.0)) + (0 if span == 360.0 else 1)
        if columns < 1:
            raise error(f"AirSim settings give {per_turn:g} columns a turn: raise points-per-second")
        spec.update({"vertical_fov_deg": _vertical_fov(entry, error), "channels": int(channels),
                     "horizontal_fov_deg": [-start, -start - span], "horizontal_samples": columns,
                     "frame_rate_hz": rotation_hz})
        return spec
    start = _number(entry, "horizontal-fov-start-deg", error, 0.0)
    if (_number(entry, "horizontal-fov-end-deg", error, start + 360.0) - start) % 360.0 != 0:
        raise error(f"AirSim {kind}: a horizontal FOV narrower than 360° is not supported for a rosette")
    rosette = {"points_per_second": points_per_second, "channels": int(channels),
               "horizontal_rotation_hz": rotation_hz,
               "vertical_rotation_hz": _number(entry, "vertical-rotation-frequency", error,
                                               defaults["vertical-rotation-frequency"]),
               "radial_scaling": _number(entry, "radial-scaling", error, 1.0)}
    if livox:
        rosette["cone_half_angles_deg"] = base["rosette"]["cone_half_angles_deg"]
    else:
        rosette["vertical_fov_deg"] = _vertical_fov(entry, error)
    spec["rosette"] = rosette
    spec["frame_rate_hz"] = report_hz if report_hz >= 0.5 else LIVOX_FRAME_RATE_HZ
    return spec
