"""The ``lidar-fmu validate`` sub-command's options (the work is in :mod:`lidar_fmu.recordings.validate`, imported
only when the command runs: the CLI starts without Numba); for an Argoverse 2 log, the replay of its sweeps through
the FMU (:func:`validate_drive`; the measures are in :mod:`lidar_fmu.recordings.drive_validate`)."""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from ..raycast.factory import BACKEND_NAMES
from .options import whole_number
from .paths import check_environment


def _jump(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in (0, 1), got {text!r}")
    return value


#: what validate's RECORDING may also be
_DRIVE_LOG_HELP = ("; or an Argoverse 2 sensor log's folder (map/, calibration/, sensors/lidar/, annotations.feather): "
                   "its real sweeps against the FMU's replay of the converted log, --metadata then not needed")


def add_recording_arguments(p, nargs: str | None, drive_log: bool = False) -> None:
    """The recording(s) (``nargs``: argparse's, None for one), ``--metadata`` and ``--max-jump`` that validate and
    calibrate share; ``drive_log``: the recording may be an Argoverse 2 log, which needs no ``--metadata``."""
    p.add_argument("recording", nargs=nargs,
                   help="the unit's recording: Velodyne and Hesai .pcap/.pcapng captures or ROS 2 bags (a bag folder, "
                        ".db3 or .mcap) of their packets; an Ouster .pcap (needs ouster-sdk) or the .npz that "
                        "scripts/extract_ouster_frames.py extracts from it" + (_DRIVE_LOG_HELP if drive_log else ""))
    p.add_argument("--metadata", required=not drive_log,
                   help="the unit's calibration, which also says which reader the recording needs: a Velodyne "
                        "calibration .yaml or db.xml, a Hesai angle-correction .csv, an Ouster metadata .json, or a preset "
                        "of the unit's model (velodyne_*, hesai_*, ouster_os1_128_cal)"
                        + ("; needed for a recording, not for an Argoverse 2 log" if drive_log else ""))
    p.add_argument("--max-jump", type=_jump, default=0.05,
                   help="neighbours whose ranges differ by more than this fraction are not one surface")


def cmd_validate(args) -> None:
    from ..errors import UserError
    from ..recordings.drive_validate import is_drive_log
    from ..recordings.validate import validate

    if is_drive_log(args.recording):
        validate_drive(args.recording, args.output, sensor=args.sensor, backend=args.backend, frames=args.frames,
                       environment=check_environment(args.environment) if args.environment else None)
        return
    if args.environment:
        raise UserError(f"validate {args.recording}: --environment is for an Argoverse 2 log (a unit's recording "
                        "rebuilds its scene from its own pixels)")
    if args.metadata is None:
        raise UserError(f"validate {args.recording}: --metadata is needed for a unit's recording (it is no Argoverse 2 "
                        "log folder: no city_SE3_egovehicle.feather and sensors/lidar/)")
    validate(args.recording, args.metadata, args.output, sensor=args.sensor, backend=args.backend,
             frames=args.frames, max_jump=args.max_jump, poses_path=args.poses)


def add_validate(sub) -> None:
    p = sub.add_parser(
        "validate", help="compare a real Velodyne, Hesai or Ouster recording with our simulation of the same unit, "
                         "pixel by pixel; or a real Argoverse 2 drive with its replay through the FMU",
        description="Rebuild the scene of each frame from the even columns' pixels (triangles where neighbouring "
                    "ranges agree, each with the unit's measured reflectivity), simulate the unit from its "
                    "calibration, and compare on the odd columns (units that do not fire on a fixed grid, Velodyne "
                    "and Hesai, as rings × azimuth bins at their own azimuths): returns found, range difference and "
                    "bias, noise per range band, intensity ranks, second returns, real returns beyond our limits. "
                    "Prints a table; "
                    "with -o writes validation.json and validation.png. An Argoverse 2 log folder instead: convert it "
                    "(into DIR/scenario), replay its sweeps' views through the FMU with its two lidars (or --sensor in "
                    "their place) and compare with the real sweeps: return fraction per ring, how far the ground is "
                    "seen per direction, painted-line vs asphalt intensity, points per annotated object, Chamfer "
                    "distance and F-score within 40 m. See docs/validation.md (Real drives).")
    add_recording_arguments(p, nargs=None, drive_log=True)
    p.add_argument("-o", "--output", default=None, help="folder for validation.json and validation.png")
    p.add_argument("--sensor", default=None,
                   help="preset or sensor spec file to simulate, the unit's calibration as its geometry "
                        "(default: the unit's own: its calibration with its model's datasheet figures); for an "
                        "Argoverse 2 log, simulated at each of its lidars' mountings (default: the log's VLP-32C)")
    p.add_argument("--poses", default=None,
                   help="the unit's pose per frame (KITTI: a row-major 3×4 matrix per line), or 'icp' to register "
                        "the frames with KISS-ICP (needs kiss-icp): noise is then also measured from frame to frame")
    p.add_argument("--frames", type=whole_number(1), default=None,
                   help="compare only the first N frames (an Argoverse 2 log: its first N sweeps)")
    p.add_argument("--backend", default="auto", choices=BACKEND_NAMES,
                   help="ray caster: auto picks cuda on an NVIDIA GPU, else embree")
    p.add_argument("--environment", default=None, metavar="auto|none|urban|suburban|rural|highway|MESH",
                   help="an Argoverse 2 log: the street built around its map's road (as replay's --environment; "
                        "default: auto, the road, its terrain and the annotated road users)")
    p.set_defaults(func=cmd_validate)


# ------------------------------------------------------------------------------------------------ a real drive


def _replay_rig(log, sensor: str | None) -> list[dict]:
    """The log's rig (:func:`~lidar_fmu.recordings.argoverse2.rig_spec`), each lidar ``sensor`` (a preset or a spec
    file) where given, cast without motion distortion: every ray from the ego's pose at the view's timestamp, as the
    real sweeps are motion-compensated to it."""
    from ..documents import read_document
    from ..errors import UserError
    from ..recordings.argoverse2 import rig_spec

    replacement: dict = {}
    if sensor is not None:
        replacement = ({"preset": sensor} if not os.path.isfile(sensor) else
                       read_document(sensor, "sensor spec", UserError, syntax="yaml"))
        if not isinstance(replacement, dict):
            raise UserError(f"--sensor {sensor}: a spec file must hold one sensor's mapping")
    return [(replacement | {key: entry[key] for key in ("mounting", "sensor_id")} if replacement else entry)
            | {"motion_distortion": False} for entry in rig_spec(log)["sensors"]]


def _sweeps_trace(converted: dict, log, sweeps_ns: np.ndarray, folder: str) -> str:
    """A trace of the converted log's views at the real sweeps' timestamps, beside the whole one → its path."""
    import datetime

    from ..osi.trace import read_trace, trace_name, write_trace

    wanted = set(np.searchsorted(log.timestamps_ns, sweeps_ns).tolist())
    views = (view for k, view in enumerate(read_trace(converted["trace"], "SensorView")) if k in wanted)
    when = datetime.datetime.fromtimestamp(int(sweeps_ns[0]) // 10**9, datetime.timezone.utc)
    path = os.path.join(folder, trace_name("sv", len(sweeps_ns), "argoverse2_sweeps", when=when))
    write_trace(path, views)
    return path


def _simulated_sweeps(summary: dict, out_dir: str, rig: list) -> list[list]:
    """Each replayed frame's points per lidar as :class:`~lidar_fmu.recordings.drive_validate.Sweep` in the ego
    frame (the rig's mountings), read back from each lidar's SensorData trace."""
    from ..osi.detections import sensor_data_to_points
    from ..osi.trace import read_trace
    from ..recordings.drive_validate import Sweep

    per_lidar = []
    for lidar, member in zip(summary["lidars"], rig):
        path = os.path.join(out_dir, lidar["folder"], lidar["sensordata_trace"])
        sweeps = []
        for data in read_trace(path, "SensorData"):
            cloud = sensor_data_to_points(data)
            xyz = np.column_stack([cloud.points[k] for k in "xyz"]).astype(np.float64)
            pose = member.mounting_pose  # the log's rig mounts every lidar
            intensity = np.zeros(len(xyz)) if cloud.intensity_percent is None else cloud.intensity_percent
            sweeps.append(Sweep(xyz @ pose[:3, :3].T + pose[:3, 3], intensity.astype(np.float64),
                                cloud.points["beam_id"].astype(np.int64)))
        per_lidar.append(sweeps)
    return [list(frame) for frame in zip(*per_lidar)]


def _unit(member):
    """A rig member's rays per ring per sweep and each ring's elevation in its own frame and in the ego frame."""
    from ..recordings.drive_validate import Unit

    pattern = member.sensor.pattern
    beams = int(pattern.beam_id.max()) + 1
    rays = np.bincount(pattern.beam_id, minlength=beams)
    in_unit = np.bincount(pattern.beam_id, np.degrees(np.arcsin(pattern.directions[:, 2])), beams) / rays
    in_ego = np.bincount(pattern.beam_id, np.degrees(np.arcsin(pattern.directions @ member.mounting_pose[:3, :3].T)
                                                     [:, 2]), beams) / rays
    return Unit(rays, in_ego), in_unit


def validate_drive(log_folder, output: str | None, sensor: str | None = None, backend: str = "auto",
                   frames: int | None = None, environment: str | None = None, echo=print) -> dict:
    """An Argoverse 2 log's real sweeps against the FMU's replay of them: convert the log into ``output/scenario``,
    replay its sweeps' views into ``output/replay`` (the street around the road built as ``environment``, a style or
    a mesh, where given), compare (:func:`~lidar_fmu.recordings.drive_validate.compare_drive`), print the table;
    ``validation.json`` and ``validation.png`` into ``output``. Returns the figures."""
    import tempfile

    from ..recordings import drive_validate as dv
    from ..recordings.argoverse2 import LIDARS, convert, read_log
    from ..sensors.rig import load_rig
    from .replay import replay

    t0 = time.perf_counter()
    log_folder = os.fspath(log_folder)
    log = read_log(log_folder)
    sweeps_ns = dv.sweep_timestamps(log_folder)[:frames]
    drive_map = dv.read_drive_map(log_folder, log)
    rig_entries = _replay_rig(log, sensor)
    rig = load_rig({"sensors": rig_entries})
    with tempfile.TemporaryDirectory() as scratch:
        work = output if output is not None else scratch
        converted = convert(log_folder, os.path.join(work, "scenario"))
        trace = _sweeps_trace(converted, log, sweeps_ns, os.path.join(work, "scenario"))
        replay_dir = os.path.join(work, "replay")
        overrides = {"trace": trace, "sensor": rig_entries, "backend": backend}
        if environment:
            overrides["environment"] = environment
        summary = replay(os.path.join(work, "scenario"), replay_dir, progress=False, write_pcd_every=0,
                         overrides=overrides)
        simulated = _simulated_sweeps(summary, replay_dir, rig)
    units = [_unit(member) for member in rig]
    pairs = []
    for timestamp, sim in zip(sweeps_ns, simulated):
        real = dv.read_sweeps(log_folder, int(timestamp))
        for k, (name, _) in enumerate(LIDARS):
            real[k].ring = dv.ring_of_laser(real[k], log.ego_from_lidar[name], units[k][1])[real[k].ring]
        city_from_ego = log.city_from_ego[int(np.searchsorted(log.timestamps_ns, timestamp))]
        pairs.append(dv.SweepPair(int(timestamp), real, sim, city_from_ego, *dv.annotated_boxes(log, int(timestamp))))
    result = {"log": os.path.basename(os.path.normpath(log_folder)), "sweeps": [int(t) for t in sweeps_ns],
              "sensor": sensor or "the log's rig (velodyne_vlp32c ×2)", "environment": environment or "auto",
              "compared": dv.COMPARED,
              **dv.compare_drive(pairs, [u for u, _ in units], drive_map),
              "replay_step_ms": summary.get("step_ms"), "run_s": time.perf_counter() - t0}
    for line in dv.table_lines(result):
        echo(line)
    if output is not None:
        dv.write_report(output, result, pairs[0])
        echo(f"→ {os.path.join(output, 'validation.json')}, {os.path.join(output, 'validation.png')}")
    return result
