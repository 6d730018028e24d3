"""The ``lidar-fmu validate`` sub-command's options (the work is in :mod:`lidar_fmu.recordings.validate`, imported
only when the command runs: the CLI starts without Numba)."""
from __future__ import annotations

import argparse

from ..raycast.factory import BACKEND_NAMES


def _jump(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in (0, 1), got {text!r}")
    return value


def _frames(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number ≥ 1, got {text!r}")
    return value


def add_recording_arguments(p, nargs: str | None) -> None:
    """The recording(s) (``nargs``: argparse's, None for one), ``--metadata`` and ``--max-jump`` that validate and
    calibrate share."""
    p.add_argument("recording", nargs=nargs,
                   help="the unit's recording: Velodyne and Hesai .pcap/.pcapng captures or ROS 2 bags (a bag folder, "
                        ".db3 or .mcap) of their packets; an Ouster .pcap (needs ouster-sdk) or the .npz that "
                        "scripts/extract_ouster_frames.py extracts from it")
    p.add_argument("--metadata", required=True,
                   help="the unit's calibration, which also says which reader the recording needs: a Velodyne "
                        "calibration .yaml or db.xml, a Hesai angle-correction .csv, an Ouster metadata .json, or a preset "
                        "of the unit's model (velodyne_*, hesai_*, ouster_os1_128_cal)")
    p.add_argument("--max-jump", type=_jump, default=0.05,
                   help="neighbours whose ranges differ by more than this fraction are not one surface")


def cmd_validate(args) -> None:
    from ..recordings.validate import validate

    validate(args.recording, args.metadata, args.output, sensor=args.sensor, backend=args.backend,
             frames=args.frames, max_jump=args.max_jump, poses_path=args.poses)


def add_validate(sub) -> None:
    p = sub.add_parser(
        "validate", help="compare a real Velodyne, Hesai or Ouster recording with our simulation of the same unit, "
                         "pixel by pixel",
        description="Rebuild the scene of each frame from the even columns' pixels (triangles where neighbouring "
                    "ranges agree, each with the unit's measured reflectivity), simulate the unit from its "
                    "calibration, and compare on the odd columns (units that do not fire on a fixed grid, Velodyne "
                    "and Hesai, as rings × azimuth bins at their own azimuths): returns found, range difference and "
                    "bias, noise per range band, intensity ranks, second returns, real returns beyond our limits. "
                    "Prints a table; "
                    "with -o writes validation.json and validation.png. See docs/validation.md.")
    add_recording_arguments(p, nargs=None)
    p.add_argument("-o", "--output", default=None, help="folder for validation.json and validation.png")
    p.add_argument("--sensor", default=None,
                   help="preset or sensor spec file to simulate, the unit's calibration as its geometry "
                        "(default: the unit's own: its calibration with its model's datasheet figures)")
    p.add_argument("--poses", default=None,
                   help="the unit's pose per frame (KITTI: a row-major 3×4 matrix per line), or 'icp' to register "
                        "the frames with KISS-ICP (needs kiss-icp): noise is then also measured from frame to frame")
    p.add_argument("--frames", type=_frames, default=None, help="compare only the first N frames")
    p.add_argument("--backend", default="auto", choices=BACKEND_NAMES,
                   help="ray caster: auto picks cuda on an NVIDIA GPU, else embree")
    p.set_defaults(func=cmd_validate)
