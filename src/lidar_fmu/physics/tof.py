"""Continuous-wave time-of-flight cameras: ranges fold back at the modulation's ambiguity range.

A ToF camera (PMD, SwissRanger, Kinect v2) does not time a pulse: it measures
the phase of its amplitude-modulated illumination in every pixel, and a phase
repeats every modulation period. At modulation frequency f the round trip
repeats every c/f, so the range repeats every ``c / (2f)`` (the ambiguity or
non-ambiguity range): a surface at r reads ``r mod c/(2f)``. This is the
*backfolding* of BlenSor (Gschwandtner et al., ISVC 2011, §3.4, Eq. 3 and
Fig. 2a), which folds once, at half its maximum distance; the phase folds at
every multiple, as done here.

Spec key ``tof: {modulation_frequency_hz: f}`` on a ``pinhole`` sensor. The
fold is a returns-stage effect (:func:`backfold`), applied after the
:mod:`~lidar_fmu.physics.effects` pass, so a ToF sensor's ``noise`` block perturbs the
true range and the noisy range folds, as the phase it comes from does.
Whether a folded return is bright enough is decided on its true range (the
light travelled that far).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import LidarFmuError

#: m/s, exact by the SI definition of the metre
SPEED_OF_LIGHT_M_S = 299_792_458.0


class ToFSpecError(LidarFmuError, ValueError):
    """A ``tof`` spec that cannot be used."""


@dataclass(frozen=True)
class ToF:
    """A continuous-wave ToF camera's modulation."""

    modulation_frequency_hz: float

    @property
    def ambiguity_range_m(self) -> float:
        """``c / (2f)``: the range at which the measured phase wraps (7.4948 m at 20 MHz)."""
        return SPEED_OF_LIGHT_M_S / (2.0 * self.modulation_frequency_hz)


def parse_tof(value) -> ToF | None:
    """The ``tof`` key of a sensor spec → :class:`ToF` (None when absent); ToFSpecError naming what is wrong."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"modulation_frequency_hz"}:
        raise ToFSpecError(f"tof must be a mapping with modulation_frequency_hz (Hz) only, got {value!r}")
    f = value["modulation_frequency_hz"]
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f) or f <= 0:
        raise ToFSpecError(f"tof.modulation_frequency_hz must be a positive number of Hz, got {f!r}")
    return ToF(float(f))


def backfold(returns, pattern, tof: ToF):
    """``returns`` (sensor frame, ray order) as the ToF camera reads them: ranges folded in place → ``returns``.

    A folded point moves toward its ray's origin by the ratio of its ranges, so
    it stays on its (possibly noise-turned) direction.
    """
    points = returns.points
    range_m = points["range"]
    folded = np.mod(range_m, np.float32(tof.ambiguity_range_m)).astype(np.float32)
    moved = np.flatnonzero(folded != range_m)  # inside the first interval a point stays exactly as cast
    if len(moved) == 0:
        return returns
    if pattern.origins is None:
        origin = np.zeros((len(moved), 3), np.float32)
    else:
        origin = pattern.origins[np.asarray(returns.ray_index)[moved]]
    scale = folded[moved] / range_m[moved]
    for axis, name in enumerate("xyz"):
        points[name][moved] = origin[:, axis] + (points[name][moved] - origin[:, axis]) * scale
    range_m[moved] = folded[moved]
    return returns


__all__ = ["SPEED_OF_LIGHT_M_S", "ToF", "ToFSpecError", "backfold", "parse_tof"]
