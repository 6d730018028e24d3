"""The ``lidar-fmu calibrate`` sub-command's options (the work is in :mod:`lidar_fmu.recordings.calibrate`, imported
only when the command runs: the CLI starts without Numba)."""
from __future__ import annotations

from .validate_command import add_recording_arguments


def cmd_calibrate(args) -> None:
    from ..recordings.calibrate import calibrate

    calibrate(args.recording, args.metadata, args.output, max_jump=args.max_jump)


def add_calibrate(sub) -> None:
    p = sub.add_parser(
        "calibrate", help="fit a unit's noise, range–reflectivity limit and min/max range from its recording(s)",
        description="Fit from real recordings of one unit what its datasheet does not say: range noise σ(range, "
                    "signal), the range–reflectivity limit with a soft detection edge, its nearest and farthest "
                    "returns; write them as a sensor spec (the unit's calibration plus the fitted keys) that scan, "
                    "replay, validate --sensor and the FMU take. See docs/validation.md.")
    add_recording_arguments(p, nargs="+")
    p.add_argument("-o", "--output", required=True, help="the sensor spec to write (YAML)")
    p.set_defaults(func=cmd_calibrate)
