"""lidar-fmu command line: scan meshes, replay OSI scenarios through the FMU (one, or a sweep on Dask), benchmark.

Every user error (a :class:`~lidar_fmu.errors.LidarFmuError` or an ``OSError``)
ends in one line on stderr and exit code 2, no traceback. Any other exception
is a bug in lidar-fmu: its traceback is printed and the exit code is 1.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from ..errors import ERROR_LINE_CHARS, LidarFmuError, UserError, brief
from ..raycast.factory import BACKEND_NAMES
from .calibrate_command import add_calibrate
from .convert_command import add_convert
from .options import OSI_ID_MAX, whole_number
from .paths import check_environment, check_fmu_path, check_output_folder, check_preview_path
from .ssp_command import add_ssp_options
from .validate_command import add_validate

EXIT_BUG = 1
EXIT_USAGE = 2


def _mesh_placements(arguments) -> list[tuple[str, np.ndarray]]:
    """``--mesh FILE[@x,y,z[,roll,pitch,yaw]]`` → (file, world pose of the mesh: m and degrees, as ``--pose``),
    checked before any work. A file whose own name holds an ``@`` is taken whole when it exists."""
    import os

    from ..geometry.transforms import PoseError, parse_pose_deg, pose_matrix

    placed = []
    for argument in arguments:
        path, at, placement = (argument, "", "") if os.path.exists(argument) else argument.rpartition("@")
        if not at:
            path = argument
        if os.path.isdir(path):
            raise UserError(f"--mesh {path!r} is a folder; give a mesh file (OBJ, glTF/GLB, PLY, STL)")
        if not os.path.exists(path):
            raise UserError(f"mesh file not found: {path}")
        try:
            pose = parse_pose_deg(placement) if at else pose_matrix()
        except PoseError as exc:
            raise UserError(f"--mesh {argument!r}: the placement after '@' must be x,y,z[,roll,pitch,yaw] in m and "
                            f"degrees: {exc}") from None
        placed.append((path, pose))
    return placed


def cmd_scan(args) -> None:
    import os

    from ..geometry.scene import Scene, load_mesh
    from ..geometry.transforms import parse_pose_deg, up_axis_of, up_axis_pose
    from ..io import write_point_cloud, write_preview
    from ..scan.kernels import FIRST_COMPILE_TEXT, compile_timer, kernels_cached, warm_up_scans
    from ..scan.lidar import Lidar

    if not args.output.lower().endswith((".pcd", ".ply", ".ptx", ".las", ".laz")):
        raise UserError(f"output {args.output!r} must end in .pcd, .ply or .ptx (or .las, .laz)")
    if args.ground_truth and args.output.lower().endswith(".ptx"):
        raise UserError(f"--ground-truth: PTX has no fields for the ground truth; write {args.output!r} as .pcd, "
                        f".ply, .las or .laz instead")
    check_output_folder(args.output, "output")
    if args.rerun:
        from ..io.rerun import check_rerun_output

        check_rerun_output(args.rerun)
    if args.preview:
        check_preview_path(args.preview)
        check_output_folder(args.preview, "preview")
    placements = _mesh_placements(args.mesh)
    pose = parse_pose_deg(args.pose)
    scene = Scene()
    for i, (path, placement) in enumerate(placements):  # stood up in the Z-up world, then placed
        scene.add_instance(i, load_mesh(path), placement @ up_axis_pose(up_axis_of(path, args.up)))
    lidar = Lidar(scene, args.sensor, backend=args.backend, materials=args.materials, ir_database=args.ir_database,
                  warn=lambda message: print(f"lidar-fmu: warning: {message}", file=sys.stderr))
    pattern, fired_s = lidar.sensor.pattern, lidar.sensor.frame_period_s
    if args.duration is not None:  # what the sensor fires in that long (a still scene: a repeating frame repeats)
        fired = lidar.sensor.rays_between(0.0, args.duration)
        if fired is None:
            raise UserError(f"--duration {args.duration:g} s is shorter than {lidar.sensor.name}'s first firing")
        pattern, fired_s = fired, args.duration
    if not kernels_cached():  # a first run on this machine: say why nothing seems to happen
        print(f"lidar-fmu: compiling kernels once ({FIRST_COMPILE_TEXT}; later runs load them from the cache)",
              file=sys.stderr, flush=True)
    # every kernel compiled (or loaded) by scans of a small scene first: the scan's own timings are then its own
    with compile_timer() as compiling:
        warm_up_scans(lidar.sensor, pose, lidar.backend.name, args.ir_database, pattern, args.ground_truth)
    # the sensor fires from its start (0 s, what the points' time counts from) until the frame ends
    cloud = lidar.scan(pose, fired_s, pattern=pattern, ground_truth=args.ground_truth, first_firing_s=0.0)
    written = []
    try:  # all or nothing: no point cloud left behind when the preview cannot be written
        write_point_cloud(args.output, cloud)
        written.append(args.output)
        if args.preview:
            write_preview(args.preview, cloud, pattern=pattern)
        if args.rerun:
            from ..io import RerunRecording

            written.append(args.rerun)
            with RerunRecording(args.rerun, recording_name=f"scan {lidar.sensor.name}") as recording:
                recording.log_meshes(scene)
                recording.log_frame(cloud, cloud.timestamp_s, 0)
    except BaseException:
        for path in written:
            if os.path.exists(path):
                os.remove(path)
        raise
    text = " ".join(f"{k}={v * 1e3:.1f}ms" for k, v in lidar.last_timings.items())
    if compiling[0] >= 0.05:
        text += f" (before them: {compiling[0]:.1f} s compiling kernels once; later runs load them from the cache)"
    print(
        f"{lidar.sensor.name}: {len(cloud)} returns of {len(pattern)} rays "
        f"on {scene.triangle_count} triangles [{lidar.backend.name}] {text} → {args.output}"
    )


def cmd_presets(args) -> None:
    from ..sensors import preset_rows

    print(f"{'preset':<22}{'channels':>9}{'h-FOV°':>8}{'rays/frame':>12}{'Hz':>6}  description")
    for name, channels, fov, rays, rate, text in preset_rows():
        print(f"{name:<22}{channels:>9}{fov:>8.0f}{rays:>12}{rate:>6.1f}  {text}")


def _print_summary(summary: dict, out_dir: str) -> None:
    """One line per lidar (a rig's each under its folder), then the FMU's first messages."""
    import os

    for lidar in summary.get("lidars", [summary]):
        returns = lidar["returns_per_frame"]
        step = lidar["step_ms"]
        folder = os.path.join(out_dir, lidar["folder"]) if "folder" in lidar else out_dir
        print(
            f"{lidar['scenario']}: {lidar['frames']} frames of {lidar['sensor']} through the FMU, "
            f"{int(np.mean(returns)):,} returns/frame, step p50 {step['p50']:.1f} ms, p90 {step['p90']:.1f} ms "
            f"→ {folder}"
        )
        print(f"  SensorData trace: {os.path.join(folder, lidar['sensordata_trace'])} "
              f"({lidar['sensordata_trace_bytes'] / 1e6:,.1f} MB)")
    time_note = summary.get("lidars", [summary])[0].get("time_note") if summary.get("frames") else None
    if time_note:  # a rig's lidars share the trace: said once
        print(f"  warning: {time_note}")
    for line in summary["fmu_messages"][:10]:
        print(f"  FMU: {line.splitlines()[0]}")


def cmd_replay(args) -> None:
    import os

    from .replay import DamagedTraceError, replay

    if args.fmu:
        check_fmu_path(args.fmu)
    overrides = {}
    if args.sensor:  # a spec file relative to here, not to the scenario's folder
        overrides["sensor"] = os.path.abspath(args.sensor) if os.path.isfile(args.sensor) else args.sensor
    if args.assets:
        if not os.path.isdir(args.assets):
            raise UserError(f"--assets {args.assets!r}: folder not found")
        overrides["assets"] = os.path.abspath(args.assets)
    if args.environment:
        overrides["environment"] = check_environment(args.environment)
    if args.objects:
        overrides["objects"] = args.objects
    if args.host is not None:
        overrides["host"] = args.host
    if args.outputs is not None:
        overrides["outputs"] = args.outputs
    try:
        summary = replay(args.scenario, args.output, fmu_path=args.fmu, max_frames=args.frames,
                         progress=not args.quiet, write_pcd_every=args.pcd_every, trace_format=args.trace_format,
                         rerun_path=args.rerun, overrides=overrides, rosbag_path=args.rosbag)
    except DamagedTraceError as exc:  # the intact frames were replayed: show them, then the one error line (exit 2)
        _print_summary(exc.summary, args.output)
        raise
    _print_summary(summary, args.output)
    _fail_on_invalid_frames(summary, args.output)


def _fail_on_invalid_frames(summary: dict, out_dir: str) -> None:
    """Frames the FMU flagged invalid are no measurements: the replay failed, though its outputs are written."""
    from .replay import invalid_frames_message

    invalid = invalid_frames_message(summary)
    if invalid:
        raise UserError(f"{invalid} (outputs written to {out_dir}; each frame's reason in its summary.json)")


def cmd_sweep(args) -> None:
    from .sweep import run_sweep

    if args.fmu:
        check_fmu_path(args.fmu)
    run_sweep(args.sweep, args.output, workers=args.workers, scheduler=args.scheduler, serial=args.serial,
              force=args.force, fmu=args.fmu, trace_format=args.trace_format, pcd_every=args.pcd_every,
              progress=not args.quiet, dashboard=args.dashboard)


_positive_int, _non_negative_int = whole_number(1), whole_number(0)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value < 3600):
        raise argparse.ArgumentTypeError(f"must be a number of seconds in (0, 3600), got {text!r}")
    return value


def cmd_demo(args) -> None:
    import os

    from ..sensors import load_sensor
    from .demo import effects_line, make_demo_scenario
    from .replay import load_scenario, replay

    if args.rerun:  # before the scenario is written
        from ..io.rerun import require_rerun

        require_rerun()
    scenario_dir = os.path.join(args.output, "scenario")
    what = ("its OSI ground truth alone: lanes, markings, signs, classified objects, no meshes"
            if args.ground_truth_only else "generated street, cars with model_references")
    print(f"demo scenario → {scenario_dir} ({what}, SensorView trace)")
    make_demo_scenario(scenario_dir, frames=args.frames, ground_truth_only=args.ground_truth_only)
    print(f"  {effects_line(load_sensor(load_scenario(scenario_dir)['sensor']))}")
    summary = replay(scenario_dir, os.path.join(args.output, "replay"), progress=not args.quiet,
                     write_pcd_every=args.pcd_every, trace_format=args.trace_format, rerun_path=args.rerun)
    _print_summary(summary, os.path.join(args.output, "replay"))
    _fail_on_invalid_frames(summary, os.path.join(args.output, "replay"))
    _print_disk_use(args.output)


def _add_output_options(p, trace_format: str, rerun: bool = True) -> None:
    p.add_argument("--trace-format", choices=["mcap", "osi"], default=trace_format,
                   help="SensorData trace: mcap (zstd-compressed, OSI's recommendation since 3.7, about a third of "
                        "the size) or osi (length-prefixed, read by openMSL's trace-file player)")
    p.add_argument("--pcd-every", type=_non_negative_int, default=1, metavar="N",
                   help="write a PCD of every N-th frame (compressed; 0: none)")
    if rerun:
        p.add_argument("--rerun", metavar="PATH", help="also write a Rerun recording (.rrd) of the replay")


def _print_disk_use(folder: str) -> None:
    import os

    total = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(folder) for f in files)
    print(f"  {total / 1e6:,.0f} MB written under {folder}")


def cmd_build(args) -> None:
    from ..cosim.fmu_package import DEFAULT_FMU, DEFAULT_FMU3, build_fmu, validate, warm_kernel_cache
    from ..scan.kernels import FIRST_COMPILE_TEXT

    if args.ssp:
        if args.fmi == 3:
            raise UserError("--fmi 3 does not go with --ssp: the SSP system's FMUs are FMI 2.0 (its trace player and "
                            "writer, and OpenMCx, speak FMI 2.0)")
        from .ssp_command import build_ssp_command

        build_ssp_command(args)
        return
    for option in ("trace", "sensor", "assets", "sensordata", "outputs", "then"):
        if getattr(args, option) is not None:
            raise UserError(f"--{option} goes with --ssp (an SSP package replaying a trace); the FMU takes its "
                            "parameters from the master")
    path = build_fmu(args.output or (DEFAULT_FMU3 if args.fmi == 3 else DEFAULT_FMU), fmi_version=args.fmi)
    problems = validate(path)
    for problem in problems:
        print(f"validation: {problem}")
    if problems:
        raise UserError(f"{path} has {len(problems)} validation problem(s)")
    print(f"built {path} (FMPy validation: no problems)")
    # a master's first initialization on this machine then loads the kernels instead of compiling them
    print(f"initializing it once as a master does (a machine's first run compiles its kernels, {FIRST_COMPILE_TEXT})",
          flush=True)
    print(f"  FMU: {warm_kernel_cache(path)}")


def cmd_figures(args) -> None:
    """LiMOX Fig. 7/8/9 equivalents: limit curves, the demo street by reflectivity with and without the limit."""
    import os

    from ..cache import cache_dir
    from ..geometry.transforms import pose_matrix
    from ..physics.materials import packaged_map_path
    from ..scan.lidar import Lidar
    from ..scan.motion import FrameMotion
    from ..sensors import load_sensor
    from .demo_scene import ensure_street, load_street_scene
    from .figures import (
        dual_return_panels,
        plot_detection_probability,
        plot_dual_returns,
        plot_livox_coverage,
        plot_mirror_ghost,
        plot_motion_distortion,
        plot_range_limits,
        plot_reflectivity_bev,
        plot_scan_patterns,
    )

    os.makedirs(args.output, exist_ok=True)
    pairs = ((0.10, 60.0), (0.80, 120.0))
    plot_range_limits(os.path.join(args.output, "range_limits.png"), pairs=pairs, max_range_m=150.0)
    street = os.path.join(args.work_dir or cache_dir(), "street")
    ensure_street(street)
    scene, _ = load_street_scene(street)
    street_map = packaged_map_path("street")
    limit = {"pairs": [list(p) for p in pairs], "fit": "log"}
    pose = pose_matrix((0.0, -1.75, 1.9))
    panels = []
    for title, spec, materials in (
        ("IR materials, no range limit", {"preset": "ouster_os1_128", "range_reflectivity": None}, street_map),
        ("IR materials, log-fit limit (10 %, 60 m), (80 %, 120 m)", {"preset": "ouster_os1_128", "range_reflectivity": limit}, street_map),
        ("all lambertian_10, same limit", {"preset": "ouster_os1_128", "range_reflectivity": limit}, {"default": "lambertian_10"}),
    ):
        # the all-lambertian_10 panel maps every name to the default on purpose: no warnings
        cloud = Lidar(scene, spec, materials=materials, warn=lambda message: None).scan(pose)
        panels.append((title, cloud.points))
    plot_reflectivity_bev(os.path.join(args.output, "street_reflectivity.png"), panels, extent_m=70.0)
    # the OS1-128 unit's calibrated pattern against the datasheet grid; motion distortion at 72 km/h
    grid, unit = load_sensor("ouster_os1_128"), load_sensor("ouster_os1_128_cal")
    plot_scan_patterns(os.path.join(args.output, "os1_128_patterns.png"),
                       [("ouster_os1_128: datasheet grid", grid.pattern),
                        ("ouster_os1_128_cal: the unit's calibration", unit.pattern)])
    period = unit.frame_period_s
    moving = FrameMotion(0.0, period, 0.0, pose @ pose_matrix((-20.0 * period, 0.0, 0.0)))
    lidar = Lidar(scene, unit, materials=street_map, warn=lambda message: None)
    plot_motion_distortion(os.path.join(args.output, "motion_distortion.png"),
                           [("still", lidar.scan(pose).points),
                            ("driving at 20 m/s (+x): motion distortion", lidar.scan(pose, motion=moving).points)])
    plot_livox_coverage(os.path.join(args.output, "livox_coverage.png"))
    # the street clean, with datasheet noise, in fog and in rain; the detection law
    weather_panels = []
    for title, extra in (("clean", {}), ("datasheet noise (σ 3 cm)", {"noise": "datasheet"}),
                         ("fog, visibility 50 m", {"weather": {"fog_visibility_m": 50.0}}),
                         ("rain, 25 mm/h", {"weather": {"rain_mm_h": 25.0}})):
        spec = {"preset": "ouster_os1_128", "range_reflectivity": limit} | extra
        cloud = Lidar(scene, spec, materials=street_map, warn=lambda message: None).scan(pose)
        weather_panels.append((title, cloud.points))
    plot_reflectivity_bev(os.path.join(args.output, "street_weather.png"), weather_panels, extent_m=40.0)
    plot_detection_probability(os.path.join(args.output, "detection_probability.png"),
                               load_sensor("ouster_os1_128").range_limit)
    # a mirror's ghosts; dual returns at object edges, on the street and in the room of the
    # real-recording comparison
    plot_mirror_ghost(os.path.join(args.output, "mirror_ghost.png"))
    plot_dual_returns(os.path.join(args.output, "dual_returns.png"), dual_return_panels(scene, pose, street_map))
    print(f"wrote range_limits.png, street_reflectivity.png, os1_128_patterns.png, motion_distortion.png, "
          f"livox_coverage.png, street_weather.png, detection_probability.png, mirror_ghost.png and dual_returns.png "
          f"to {args.output}")


def cmd_bench(args) -> None:
    if args.first_step:
        from .bench_first_step import bench_first_step, print_first_step

        print_first_step(bench_first_step(args.work_dir))
        return
    if args.scaling:
        from .bench_scaling import run_scaling

        run_scaling(args.repeat, args.max_triangles, args.max_instances, args.output)
        return
    import os

    from .bench import run_bench

    if args.sensor and os.path.isfile(args.sensor):  # a spec file relative to here, not to the demo's folder
        args.sensor = os.path.abspath(args.sensor)
    run_bench(args)


def cmd_soak(args) -> None:
    from .soak import describe, run_soak

    if args.fmu:
        check_fmu_path(args.fmu)
    print(describe(args.steps, args.objects, args.sensor, args.fmu), file=sys.stderr)
    run_soak(steps=args.steps, objects=args.objects, sensor=args.sensor, report_every=args.report_every,
             fmu=args.fmu, backend=args.backend, seed=args.seed, echo=lambda line: print(line, flush=True))


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default (none for required options and flags)."""

    def _get_help_string(self, action):
        if action.required or action.default in (None, False) or isinstance(action, argparse._HelpAction):
            return action.help
        return super()._get_help_string(action)


class _CommandParser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


#: options whose value may start with "-" (a pose "-3,0,0" is a value, not an option)
_SIGNED_VALUE_OPTIONS = ("--pose",)


def _attach_signed_values(argv: list[str]) -> list[str]:
    """``--pose -3,0,0`` → ``--pose=-3,0,0``: argparse reads a value starting with '-' as an option."""
    out, i = [], 0
    while i < len(argv):
        token = argv[i]
        if token in _SIGNED_VALUE_OPTIONS and i + 1 < len(argv) and argv[i + 1][:2].replace(".", "0") in (
                f"-{d}" for d in "0123456789"):
            out.append(f"{token}={argv[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


_BACKENDS = list(BACKEND_NAMES)  # the ray casters ``--backend`` offers


def _add_backend_option(p, what: str) -> None:
    p.add_argument("--backend", default="auto", choices=_BACKENDS,
                   help=f"{what}: auto picks cuda on an NVIDIA GPU, else embree")


def _add_work_dir_option(p) -> None:
    p.add_argument("--work-dir", default=None, help="where the demo street is generated (default: a cache dir)")


def _add_quiet_option(p, text: str = "no progress bar") -> None:
    p.add_argument("-q", "--quiet", action="store_true", help=text)


def _add_scan(sub) -> None:
    p = sub.add_parser("scan", help="cast one frame of a sensor into meshes and write a point cloud")
    p.add_argument("--mesh", action="append", required=True, metavar="FILE[@x,y,z[,roll,pitch,yaw]]",
                   help="mesh file (OBJ, glTF/GLB, PLY, STL), placed at x,y,z (m) turned by roll,pitch,yaw (degrees) "
                        "in the world (default: as authored); repeatable")
    p.add_argument("--sensor", required=True, help="preset name or JSON/YAML sensor spec")
    p.add_argument("--pose", default="0,0,0",
                   help="sensor pose x,y,z[,roll,pitch,yaw] in m and degrees, in the Z-up world the meshes stand in")
    p.add_argument("--up", choices=["y", "z"], default=None,
                   help="the meshes' up axis (default: y for glTF/GLB, as its specification says; z for the rest)")
    p.add_argument("--duration", type=_positive_seconds, default=None, metavar="S",
                   help="fire for S seconds from the sensor's start: a partial sweep, or for patterns that do not "
                        "repeat every frame (Livox, rosette) S seconds of coverage (default: one frame)")
    p.add_argument("-o", "--output", required=True, help="point cloud file: .pcd, .ply, .ptx, .las or .laz")
    p.add_argument("--rerun", metavar="PATH",
                   help="also write a Rerun recording (.rrd): the scan, the sensor pose and the meshes")
    p.add_argument("--preview", help="also write a PNG preview (bird's-eye view and range image)")
    p.add_argument("--materials", default=None, metavar="MAP",
                   help="visual → IR material map (JSON/YAML, or 'street'); without one every triangle is "
                        "default_grey (a PLY face property 'reflectivity' overrides it per triangle)")
    p.add_argument("--ir-database", default=None, metavar="FILE",
                   help="your IR material database (JSON/YAML list of materials, or an angle-table CSV), laid over "
                        "the built-in materials: the map may name its materials")
    p.add_argument("--ground-truth", action="store_true",
                   help="also write each point's noise-free position and range, IR material id and incidence angle "
                        "(x_true y_true z_true range_true material_id incidence_angle_rad; not in .ptx)")
    _add_backend_option(p, "ray caster")
    p.set_defaults(func=cmd_scan)


def _add_replay(sub) -> None:
    p = sub.add_parser("replay", help="replay an OSI scenario or SensorView/GroundTruth trace through the FMU (via "
                                      "FMPy, real OSMP pointers)",
                       description="Replay a scenario (folder or scenario.yaml), or a bare SensorView or GroundTruth "
                                   "trace with --sensor, through the FMU into OUT. A rig writes each lidar's outputs into "
                                   "OUT/sensor_<id>/. The files a replay writes are listed in OUT/replay_files.txt; "
                                   "the next replay into OUT removes those first and leaves every other file there.")
    p.add_argument("scenario", help="scenario folder, scenario.yaml, or a SensorView or GroundTruth trace (.osi, "
                                    ".osi.xz, .mcap)")
    p.add_argument("-o", "--output", required=True, help="output folder")
    p.add_argument("--sensor", default=None, metavar="NAME|FILE",
                   help="preset name or JSON/YAML sensor spec (or rig); needed for a bare trace, replaces a "
                        "scenario's")
    p.add_argument("--assets", default=None, metavar="DIR",
                   help="folder where the trace's model_reference strings resolve (without one, objects are their "
                        "OSI bounding boxes); replaces a scenario's")
    p.add_argument("--environment", default=None, metavar="MESH|auto|none|urban|suburban|rural|highway",
                   help="the static world: a mesh file; auto (default): the mesh the ground truth names, else the "
                        "road built from its lanes, markings, signs and lights, else a ground plane; none: only "
                        "what objects give; urban, suburban, rural, highway: as auto, and a street of that style "
                        "around the road; replaces a scenario's")
    p.add_argument("--objects", default=None, choices=["auto", "boxes"],
                   help="objects without a usable model: auto (default) their OSI class's mesh, boxes their "
                        "bounding box; replaces a scenario's")
    p.add_argument("--outputs", default=None, metavar="LIST",
                   help="the OSI layers the FMU publishes into the SensorData trace: a comma list of detections "
                        "(default), reflections, logical, objects (docs/fmu.md#osi-layers); replaces a scenario's")
    p.add_argument("--host", type=whole_number(0, OSI_ID_MAX), default=None, metavar="ID",
                   help="the host vehicle of a GroundTruth trace (esmini's --osi_file output; default: the trace's "
                        "host_vehicle_id), which is replayed as SensorViews around it")
    p.add_argument("--fmu", default=None, help="FMU to drive (default: dist/LidarSensor.fmu in a source checkout, "
                                                "else in the user cache; built if stale)")
    p.add_argument("--frames", type=_positive_int, default=None, help="replay only the first N frames")
    _add_output_options(p, trace_format="mcap")
    p.add_argument("--rosbag", metavar="DIR", help="also write a ROS 2 bag (MCAP storage) into the new folder DIR: "
                                                   "PointCloud2 on /lidar/points, the sensor pose on /tf")
    _add_quiet_option(p)
    p.set_defaults(func=cmd_replay)


def _add_sweep(sub) -> None:
    p = sub.add_parser("sweep", help="replay scenarios × sensors (× mountings, weather, spec keys) on a Dask cluster",
                       description="Cross the sweep file's scenarios, sensors and optional mountings, weather and "
                                   "spec keys; replay each run through the FMU into OUT/<scenario>__<sensor>[__…]/ "
                                   "as `replay` does; write OUT/sweep.csv and OUT/sweep.png. Runs complete from an "
                                   "earlier sweep are skipped; failed and incomplete ones run again. Workers must see "
                                   "the sweep's paths (shared file system). Exit code 2 names the failed runs.")
    p.add_argument("sweep", help="sweep file (YAML: scenarios, sensors, mountings, weather, spec, frames)")
    p.add_argument("-o", "--output", required=True, help="output folder (one folder per run, sweep.csv, sweep.png)")
    p.add_argument("--workers", type=_positive_int, default=None,
                   help="processes of the LocalCluster (default: one per core; one Dask thread each)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run on an existing Dask cluster (tcp://host:port of its scheduler) instead")
    p.add_argument("--serial", action="store_true", help="no Dask: the runs one after another in this process")
    again = p.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true",
                       help="skip runs complete from an earlier sweep into OUT, run failed and incomplete ones "
                            "(the default)")
    again.add_argument("--force", action="store_true", help="rerun runs whose outputs are complete")
    p.add_argument("--dashboard", nargs="?", const="127.0.0.1:8787", default=None, metavar="ADDRESS",
                   help="serve Dask's dashboard of the LocalCluster at ADDRESS (default 127.0.0.1:8787; needs "
                        "bokeh); without it no dashboard")
    p.add_argument("--fmu", default=None, help="FMU every worker drives (default: each worker's build of these "
                                                "sources, content-hashed in its user cache)")
    _add_output_options(p, trace_format="osi", rerun=False)
    _add_quiet_option(p, "no progress (shown on stderr: a line redrawn on a terminal, else a line per finished run)")
    p.set_defaults(func=cmd_sweep)


def _add_demo(sub) -> None:
    p = sub.add_parser("demo", help="build what is missing and replay the generated demo street through the FMU")
    p.add_argument("-o", "--output", default="out/demo", help="output folder")
    p.add_argument("--frames", type=_positive_int, default=40, help="frames of the demo trace (10 Hz)")
    p.add_argument("--ground-truth-only", action="store_true",
                   help="the street from its OSI ground truth alone (its SensorViews name no mesh: the road, "
                        "signs, buildings, trees and cars are built from lanes, markings and classes)")
    _add_output_options(p, trace_format="mcap")
    _add_quiet_option(p)
    p.set_defaults(func=cmd_demo)


def _add_build(sub) -> None:
    p = sub.add_parser("build", help="build the FMU (dist/LidarSensor.fmu in a source checkout, else in the user cache) and validate it")
    p.add_argument("-o", "--output", default=None,
                   help="FMU path (default: dist/LidarSensor.fmu in a source checkout, else in the user cache; "
                        "--fmi 3: LidarSensor-fmi3.fmu there); with --ssp the .ssp (default: NAME.ssp there, NAME "
                        "from the trace's OSI name)")
    p.add_argument("--fmi", type=int, choices=[2, 3], default=2,
                   help="FMI version: 2 (default; OSMP's Integer triples) or 3 (OSMP's Binary variables)")
    add_ssp_options(p)
    p.set_defaults(func=cmd_build)


def _add_figures(sub) -> None:
    p = sub.add_parser("figures", help="draw the range-limit curves and the demo street coloured by reflectivity")
    p.add_argument("-o", "--output", default="figures",
                   help="folder for the PNGs (created; the repository's figures: -o docs in a checkout)")
    _add_work_dir_option(p)
    p.set_defaults(func=cmd_figures)


def _add_presets(sub) -> None:
    p = sub.add_parser("presets", help="list predefined sensors")
    p.set_defaults(func=cmd_presets)


def _add_bench(sub) -> None:
    p = sub.add_parser("bench", help="measure cast and point-record speed against Open3D")
    _add_backend_option(p, "ray caster to measure")
    p.add_argument("--repeat", type=_positive_int, default=15, help="timed repetitions per case (median reported)")
    p.add_argument("--scenes", default="street,sphere", help="comma list of street, sphere")
    _add_work_dir_option(p)
    p.add_argument("--skip-step", action="store_true", help="skip the OSI encode and FMU doStep measurements")
    p.add_argument("--poses", type=_positive_int, default=10_000, help="sensor poses in the batched CUDA cast (VLP-16)")
    p.add_argument("--sections", default=None, metavar="LIST",
                   help="comma list of the parts to run (default: all): cast, motion, effects, echoes, gpu (cuda "
                        "only), encode, step, rig, ground-truth, stationary, outputs (every OSI layer against the "
                        "detections)")
    p.add_argument("--sensor", default=None, metavar="NAME|FILE",
                   help="one preset or spec file in place of the VLP-16 and OS1-128 everywhere (the demo's "
                        "doStep too); a small one makes a quick run on the CUDA simulator")
    p.add_argument("--frames", type=_positive_int, default=20,
                   help="demo frames of the doStep, 4-lidar and ground-truth parts (the first is not timed)")
    p.add_argument("--road-km", type=_positive_int, default=10,
                   help="km of the ground-truth part's winding road (a short one makes a quick run)")
    p.add_argument("--sphere-triangles", type=_positive_int, default=1_000_000,
                   help="triangles of the sphere scene (the batched cast's 1 M-triangle scene)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write every figure to PATH as JSON")
    p.add_argument("--scaling", action="store_true",
                   help="instead: cost against triangles (10 k → 10 M, one mesh and a tiled city, beside Open3D), "
                        "rays (VLP-16 → OS1-128×2048), lidars (1 → 8), moving instances (1 → 10,000) and stationary "
                        "objects (1 → 200,000), each with its growth exponent; writes OUTPUT/scaling.png")
    p.add_argument("--first-step", action="store_true",
                   help="instead: a fresh clone's FMU initialization (compiling the kernels), first doStep and later "
                        "doSteps, each in a Python with empty Numba and lidar-fmu caches")
    p.add_argument("--max-triangles", type=_positive_int, default=10_000_000, help="--scaling: largest scene")
    p.add_argument("--max-instances", type=_positive_int, default=10_000, help="--scaling: most moving instances")
    p.add_argument("-o", "--output", default="bench",
                   help="--scaling: folder for scaling.png (created; the repository's figure: -o docs in a checkout)")
    p.set_defaults(func=cmd_bench)


def _add_soak(sub) -> None:
    p = sub.add_parser("soak", help="run many steps of tracked pedestrians; print memory and step time as it goes",
                       description="Run STEPS steps of a host car and OBJECTS pedestrians whose boxes jitter by "
                                   "at most 2 cm per step; every REPORT_EVERY steps print the resident memory "
                                   "(VmRSS) and the median step time. The default sensor (VLP-16, 14,400 rays) "
                                   "keeps the default 10,000 steps to a few minutes on one CPU core.")
    p.add_argument("--steps", type=_positive_int, default=10_000, help="steps to run")
    p.add_argument("--objects", type=_positive_int, default=20, help="pedestrians around the host")
    p.add_argument("--sensor", default="velodyne_vlp16", help="preset name, JSON/YAML sensor spec or rig")
    p.add_argument("--report-every", type=_positive_int, default=1000, help="steps between two report lines")
    p.add_argument("--fmu", nargs="?", const="", default=None, metavar="PATH",
                   help="step the built FMU through FMPy instead of the model in-process (no PATH: the default "
                        "FMU, built if stale)")
    _add_backend_option(p, "ray caster")
    p.add_argument("--seed", type=whole_number(0, 2**64 - 1), default=0, help="seed of the pedestrians' paths and box jitter (default: 0)")
    p.set_defaults(func=cmd_soak)


#: each sub-command's parser, in the order ``lidar-fmu -h`` lists them
_COMMANDS = (_add_scan, _add_replay, _add_sweep, _add_demo, _add_build, _add_figures, _add_presets, _add_bench,
             _add_soak, add_validate, add_calibrate, add_convert)


def build_parser() -> argparse.ArgumentParser:
    from .._version import __version__

    parser = argparse.ArgumentParser(prog="lidar-fmu", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_CommandParser)
    for add_command in _COMMANDS:
        add_command(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(_attach_signed_values(sys.argv[1:] if argv is None else list(argv)))
    try:
        args.func(args)
    except (LidarFmuError, OSError) as exc:
        message = brief(str(exc), ERROR_LINE_CHARS) or type(exc).__name__  # one bounded line, whatever it holds
        print(f"lidar-fmu: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception:  # anything else is a bug: show where it happened
        _report_bug(parser.prog, sys.argv[1:] if argv is None else list(argv))
        return EXIT_BUG
    return 0


def _report_bug(prog: str, argv: list[str]) -> None:
    import shlex
    import traceback

    from .._version import __version__

    traceback.print_exc()
    command = shlex.join([prog, *map(str, argv)])
    print(f"lidar-fmu: internal error: this is a bug in lidar-fmu {__version__}, not in your input.\n"
          f"Please report it with the traceback above and the command line:\n  {command}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
