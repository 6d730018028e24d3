"""The ``lidar-fmu convert`` sub-command's options (the work is in :mod:`lidar_fmu.recordings.argoverse2`, imported
only when the command runs)."""
from __future__ import annotations


def cmd_convert(args) -> None:
    from ..recordings.argoverse2 import convert

    written = convert(args.log, args.output)
    print(f"{written['frames']} SensorViews ({written['trace_bytes'] / 1e6:.1f} MB) in {written['trace']}; "
          f"rig {written['rig']}; replay with: lidar-fmu replay {args.output} -o OUT")


def add_convert(sub) -> None:
    p = sub.add_parser(
        "convert", help="turn an Argoverse 2 sensor log into an OSI SensorView trace, a rig spec of its lidars and a "
                        "scenario that replay runs",
        description="Read an Argoverse 2 sensor log (its vector map with lane-mark types, drivable areas and "
                    "pedestrian crossings, its annotated cuboids, ego poses and the lidars' calibration) and write "
                    "into DIR an OSI SensorView trace of it (one view per lidar sweep), rig.yaml (its two VLP-32C "
                    "where they are mounted) and scenario.yaml: `lidar-fmu replay DIR -o OUT` replays the drive. "
                    "See docs/replay.md#real-drives.")
    p.add_argument("log", help="the log's folder (with map/, calibration/, annotations.feather, "
                               "city_SE3_egovehicle.feather)")
    p.add_argument("-o", "--output", required=True, help="folder for the trace, rig.yaml and scenario.yaml")
    p.set_defaults(func=cmd_convert)
