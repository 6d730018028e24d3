"""Replay an OSI scenario through the built FMU, frame by frame, as a master would.

A scenario is a folder with ``scenario.yaml``::

    trace: <SensorView trace: .osi, .osi.xz or .mcap>
    sensor: <preset name | spec file | mapping of spec keys>
    assets: <folder where model_reference strings resolve>   (optional)
    environment: <static world mesh>                          (optional)
    materials: <material map>                                 (optional)
    step_size_s: <s>            (optional; default: the median timestamp spacing of its first frames)
    backend: auto | embree | cuda                             (optional)
    mounting: {position_m: [x, y, z], orientation_rad: [roll, pitch, yaw]}  (optional)
    disable_self_hits: true                                   (optional)
    up_axis: y | z          (optional; up axis of the assets' meshes; default by format: glTF/GLB y, others z)
    ground_truth: true      (optional; the frame PCDs also carry each point's noise-free truth, see below)

Relative paths are relative to the scenario folder. Outputs: per-frame PCDs,
a SensorData trace, a preview PNG and animated GIF, and ``summary.json``;
a damaged trace is replayed up to its first damaged frame, which the summary
and the :class:`DamagedTraceError` raised at the end name.

OSI has no field for ground truth (:mod:`lidar_fmu.physics.ground_truth`), so with
``ground_truth: true`` the replay steps the model in-process beside the FMU,
on the same SensorViews with the same parameters (:class:`GroundTruthTwin`),
and writes its truth beside the FMU's points: one more model step per frame.
"""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import time

import numpy as np

from ..errors import UserError
from ..osi.trace import TraceError

SCENARIO_KEYS = {"name", "description", "trace", "sensor", "assets", "environment", "materials",
                 "step_size_s", "backend", "mounting", "disable_self_hits", "notice", "up_axis", "ground_truth"}


def load_scenario(path) -> dict:
    """Read ``scenario.yaml`` (or a folder holding one) → dict with absolute paths."""
    import yaml

    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "scenario.yaml")
    if not os.path.isfile(path):
        raise UserError(f"scenario file not found: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            scenario = yaml.safe_load(f)
    except Exception as exc:
        raise UserError(f"cannot read scenario {path}: {exc}") from None
    if not isinstance(scenario, dict) or "trace" not in scenario:
        raise UserError(f"scenario {path} must be a mapping with at least 'trace'")
    unknown = set(scenario) - SCENARIO_KEYS
    if unknown:
        raise UserError(f"scenario {path}: unknown key(s) {', '.join(sorted(unknown))}")
    folder = os.path.dirname(os.path.abspath(path))
    scenario = dict(scenario)
    scenario["folder"] = folder
    scenario.setdefault("name", os.path.basename(folder))
    for key in ("trace", "assets", "environment", "materials"):
        if scenario.get(key):
            scenario[key] = os.path.join(folder, scenario[key])
    sensor = scenario.get("sensor", "ouster_os1_128")
    if isinstance(sensor, str) and os.path.isfile(os.path.join(folder, sensor)):
        sensor = os.path.join(folder, sensor)
    scenario["sensor"] = sensor
    if not isinstance(scenario.get("ground_truth", False), bool):
        raise UserError(f"scenario {path}: ground_truth must be true or false, got {scenario['ground_truth']!r}")
    from ..cosim.scene_update import check_up_axis

    try:
        scenario["up_axis"] = check_up_axis(scenario.get("up_axis"))
    except ValueError as exc:
        raise UserError(f"scenario {path}: {exc}") from None
    return scenario


def fmu_parameters(scenario: dict, spec_dir: str) -> dict:
    """FMU parameters for a scenario (a sensor mapping goes in as a JSON spec file)."""
    sensor = scenario["sensor"]
    if isinstance(sensor, dict):
        spec_path = os.path.join(spec_dir, "sensor.json")
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump(sensor, f)
        sensor = spec_path
    params = {"sensor": sensor, "assets": scenario.get("assets", "") or "",
              "environment": scenario.get("environment", "") or "", "materials": scenario.get("materials", "") or "",
              "backend": scenario.get("backend", "auto"), "disable_self_hits": scenario.get("disable_self_hits", True),
              "up_axis": scenario.get("up_axis", "") or ""}
    mounting = scenario.get("mounting") or {}
    for axis, value in zip("xyz", mounting.get("position_m", (0, 0, 0))):
        params[f"mounting_position_{axis}"] = value
    for angle, value in zip(("roll", "pitch", "yaw"), mounting.get("orientation_rad", (0, 0, 0))):
        params[f"mounting_orientation_{angle}"] = value
    return params


def _timestamp_s(sensor_view: bytes) -> float:
    from ..osi.decode import parse_sensor_view

    if not sensor_view:
        return 0.0  # an empty message parses as an empty SensorView
    view = parse_sensor_view(sensor_view)  # SensorViewError (a user error) on garbage
    return view.timestamp.seconds + 1e-9 * view.timestamp.nanos


def organize(cloud, pattern, max_echoes: int = 1):
    """A cloud decoded from the FMU's OSI SensorData, given back its pattern and each detection's ray.

    OSI LidarDetectionBlock carry ``beam_id`` and the direction of the return
    (``position``), not the ray index; a return lies on its ray up to float32
    rounding, so :meth:`~lidar_fmu.pointcloud.PointCloud.with_pattern` finds
    every detection's ray exactly — the one ray of its beam in that direction
    — or raises :class:`~lidar_fmu.pointcloud.RayMatchError`. A dual-return
    sensor (``max_echoes`` 2) gives a ray up to two detections: they get their
    ``echo`` numbers back by range (0 = nearest).
    """
    return cloud.with_pattern(pattern, max_echoes)


def model_of(parameters: dict, sensor=None, **options):
    """The :class:`~lidar_fmu.cosim.sensor_model.OsiSensorModel` the FMU builds from ``parameters``
    (:func:`fmu_parameters`), in-process; ``sensor`` replaces the parameters' (a rig, for the bench)."""
    from ..cosim.sensor_model import OsiSensorModel
    from ..geometry.transforms import pose_matrix

    mounting = pose_matrix(
        tuple(float(parameters.get(f"mounting_position_{a}", 0.0)) for a in "xyz"),
        tuple(float(parameters.get(f"mounting_orientation_{a}", 0.0)) for a in ("roll", "pitch", "yaw")))
    return OsiSensorModel(
        sensor=parameters["sensor"] if sensor is None else sensor, assets_dir=parameters.get("assets", ""),
        environment=parameters.get("environment", ""), materials=parameters.get("materials", ""),
        backend=parameters.get("backend", "auto"), default_mounting_pose=mounting,
        disable_self_hits=bool(parameters.get("disable_self_hits", True)), up_axis=parameters.get("up_axis", ""),
        **options)


class GroundTruthTwin:
    """The model stepped in-process beside the FMU (same parameters, same views) for the truth OSI cannot carry."""

    def __init__(self, parameters: dict):
        # warnings are the FMU's to report: the twin stays silent
        self.model = model_of(parameters, ground_truth=True)

    def truth_for(self, cloud, sensor_view: bytes, time_s: float) -> np.ndarray:
        """(M,) ground truth of ``cloud`` (the FMU's points of this step, decoded from OSI, in detection order)."""
        result = self.model.step(sensor_view, time_s)
        twin = self.model.last_cloud if result.valid else None
        if twin is None or len(twin) != len(cloud) or not np.array_equal(twin.points["beam_id"],
                                                                           cloud.points["beam_id"]):
            raise RuntimeError(f"the in-process model's step at t={time_s:g} s differs from the FMU's "
                               f"({0 if twin is None else len(twin)} against {len(cloud)} returns): a bug")
        return twin.ground_truth


#: frames read ahead to find the trace's step size when the scenario gives none
STEP_LOOKAHEAD = 64


class DamagedTraceError(TraceError):
    """The trace is damaged at frame ``frame``; the intact frames before it were replayed (``summary``)."""

    def __init__(self, message: str, frame: int | None, offset: int | None, summary: dict):
        super().__init__(message, frame, offset)
        self.summary = summary


def _intact(reader, damage: list):
    """The messages of ``reader`` up to the first damaged one, whose :class:`TraceError` goes into ``damage``."""
    try:
        yield from reader
    except TraceError as exc:
        if exc.frame is None:  # not damage found while reading (a missing file, an unknown format)
            raise
        damage.append(exc)


def _percentiles(values_ms) -> dict:
    return {p: float(np.percentile(values_ms, int(p[1:]))) for p in ("p50", "p90", "p99")} | {"max": max(values_ms)}


@contextlib.contextmanager
def _started(fmu_path, params: dict, unzip_dir: str | None):
    """An initialized FMU instance; one that refuses its parameters (an unreadable mesh, a bad spec) is a
    :class:`UserError` carrying the errors the FMU logged, not a bare FMI status."""
    from fmpy.fmi1 import FMICallException

    from ..cosim.fmu_host import FmuInstance

    with FmuInstance(fmu_path, unzip_dir=unzip_dir, initialize=False) as fmu:
        try:
            fmu.initialize(params)
        except FMICallException as exc:
            logged = "; ".join(" ".join(text.split()) for status, text in fmu.messages if status in ("ERROR", "FATAL"))
            raise UserError(f"the FMU cannot start ({exc}): {logged or 'it logged no error'}") from None
        yield fmu


def replay(scenario_path, out_dir, fmu_path=None, max_frames: int | None = None, progress: bool = True,
           write_pcd_every: int = 1, trace_format: str = "osi", rerun_path: str | None = None,
           overrides: dict | None = None, fmu_unzip_dir: str | None = None) -> dict:
    """Drive the FMU through every SensorView of a scenario; write outputs into ``out_dir``.

    The trace is read lazily and each frame's outputs are written as it is
    replayed. A damaged trace (truncated, a corrupt message, a broken
    ``.osi.xz``) is replayed up to the damage — PCDs, SensorData trace,
    preview and ``summary.json`` (``damaged_frame`` names it) from the intact
    frames — and then :class:`DamagedTraceError` names the bad frame.

    ``trace_format``: the SensorData trace as ``osi`` (length-prefixed, what
    openMSL's trace-file player reads) or ``mcap`` (zstd-compressed, OSI's
    recommendation since 3.7). ``write_pcd_every``: a PCD of every N-th frame
    (compressed, the fields OSI carries). ``rerun_path``: also a Rerun
    recording of the replay. The first step (it loads the model) is reported
    apart as ``first_step_ms``, not in the step percentiles.

    ``overrides``: scenario keys laid over the file's (``lidar-fmu sweep``
    gives each run its ``sensor`` and ``mounting`` so; paths in them
    absolute). ``fmu_unzip_dir``: ``fmu_path`` already extracted there (a
    sweep worker extracts its FMU once for all its runs).
    """
    if trace_format not in ("osi", "mcap"):
        raise UserError(f"trace format must be osi or mcap, got {trace_format!r}")
    if write_pcd_every < 0:
        raise UserError(f"write_pcd_every must be ≥ 0 (0: no PCDs), got {write_pcd_every}")
    from PIL import Image

    from ..cosim.fmu_package import DEFAULT_FMU, build_fmu, sources_newer_than
    from ..io import OSI_FIELDS, bev_image, write_pcd, write_preview
    from ..osi.detections import sensor_data_to_points
    from ..osi.trace import TraceWriter, count_frames, read_trace, trace_name
    from ..physics.ground_truth import GROUND_TRUTH_DTYPE
    from ..pointcloud import RayMatchError
    from ..sensors.rig import load_rig

    scenario = load_scenario(scenario_path) | (overrides or {})
    rig = load_rig(scenario["sensor"])  # fail early, with a clear message, on a bad spec
    if len(rig) > 1:
        raise UserError(f"scenario {scenario['name']}: replay writes one lidar's clouds and its sensor is a rig of "
                        f"{len(rig)} lidars; replay one scenario per lidar (the FMU itself carries rigs)")
    sensor = rig[0].sensor
    if scenario.get("materials"):
        from ..physics.materials import load_database, load_material_map
        from ..physics.materials.mapping import check_map

        check_map(load_material_map(scenario["materials"]), load_database(sensor.wavelength_nm))
    fmu_path = fmu_path or DEFAULT_FMU
    if fmu_path == DEFAULT_FMU and sources_newer_than(DEFAULT_FMU):
        build_fmu(DEFAULT_FMU)
    reader = read_trace(scenario["trace"], "SensorView")
    if max_frames:
        reader = itertools.islice(reader, max_frames)  # never reads past them: damage further on goes unseen
    damage: list[TraceError] = []
    frames = _intact(reader, damage)
    head = list(itertools.islice(frames, STEP_LOOKAHEAD))  # a missing or unknown trace fails here, before any work
    if not head:
        if damage:
            raise damage[0]
        raise UserError(f"trace {scenario['trace']} holds no SensorView")
    head_times = [_timestamp_s(f) for f in head]
    step_s = scenario.get("step_size_s") or (
        float(np.median(np.diff(head_times))) if len(head_times) > 1 else sensor.frame_period_s)
    os.makedirs(os.path.join(out_dir, "frames"), exist_ok=True)

    iterator = enumerate(itertools.chain(head, frames))
    if progress:
        from tqdm import tqdm

        total = count_frames(scenario["trace"])  # .osi: from the length prefixes; else unknown (no total shown)
        if max_frames:
            total = min(total, max_frames) if total is not None else max_frames
        iterator = tqdm(iterator, total=total, desc=f"replay {scenario['name']}", unit="frame")
    gif_frames, returns, step_ms, object_ids, times = [], [], [], [], []
    name = scenario["name"]
    sd_path = os.path.join(out_dir, f"sensordata.tmp.{trace_format}")
    extent_m = min(sensor.max_range_m, 60.0)
    params = fmu_parameters(scenario, out_dir)
    recording = viewer_scene = None
    if rerun_path:
        from ..cosim.scene_update import SensorViewScene
        from ..io import RerunRecording
        from ..io.rerun import check_rerun_output

        check_rerun_output(rerun_path)
        recording = RerunRecording(rerun_path, recording_name=name)
        viewer_scene = SensorViewScene(params)  # the FMU keeps its scene to itself: rebuild it here for the viewer
    twin = GroundTruthTwin(params) if scenario.get("ground_truth") else None
    if trace_format == "mcap":
        from ..osi.mcap import SensorDataMcapWriter

        writer = SensorDataMcapWriter(sd_path, description=f"lidar-fmu replay of {name}")
    else:
        writer = TraceWriter(sd_path)
    # each step one whole frame of a repeating pattern: a detection's ray (so its firing time) is known
    whole_frames = sensor.continuous is None and abs(step_s - sensor.frame_period_s) <= 1e-6 * step_s
    echoes = sensor.footprint.max_echoes if sensor.footprint.active else 1  # returns one ray may carry
    with _started(fmu_path, params, fmu_unzip_dir) as fmu, writer as trace, (recording or contextlib.nullcontext()):
        for k, data in iterator:  # each frame's outputs are on disk before the next frame is read
            times.append(head_times[k] if k < len(head_times) else _timestamp_s(data))
            t0 = time.perf_counter()
            out = fmu.step(data, times[k] - step_s, step_s)
            step_ms.append((time.perf_counter() - t0) * 1e3)
            trace.write(out.sensor_data)
            cloud = sensor_data_to_points(out.sensor_data)
            cloud.sensor_name, cloud.timestamp_s = sensor.name, times[k]
            if twin is not None:
                cloud.ground_truth = twin.truth_for(cloud, data, times[k])
            returns.append(len(cloud))
            object_ids.append(sorted(set(np.unique(cloud.points["object_id"]).tolist()) - {2**64 - 1}))
            if write_pcd_every and k % write_pcd_every == 0:  # OSI carries no normals or flags: only its fields
                fields = OSI_FIELDS
                if whole_frames:  # and no firing times, but every detection's ray has one
                    with contextlib.suppress(RayMatchError):
                        cloud, fields = organize(cloud, sensor.pattern, echoes), OSI_FIELDS + ("time",)
                        fields += ("echo",) if echoes > 1 else ()
                if cloud.ground_truth is not None:
                    fields += GROUND_TRUTH_DTYPE.names
                write_pcd(os.path.join(out_dir, "frames", f"frame_{k:04d}.pcd"), cloud,
                          compression="binary_compressed", fields=fields)
            if recording is not None:
                cloud.sensor_pose = viewer_scene.update(data)
                recording.log_meshes(viewer_scene.scene, times[k], k)
                recording.log_frame(cloud, times[k], k)
            gif_frames.append(Image.fromarray(bev_image(cloud.points, extent_m=extent_m, resolution_m=0.2)))
        messages = list(fmu.messages)
    if progress:
        iterator.close()
    replayed = len(returns)
    final = os.path.join(out_dir, trace_name("sd", replayed, name))
    if trace_format == "mcap":
        final = final[: -len(".osi")] + ".mcap"
    for old in os.listdir(out_dir):
        if "_sd_" in old and old.endswith((f"_{name}.osi", f"_{name}.mcap")):
            os.remove(os.path.join(out_dir, old))
    os.replace(sd_path, final)
    try:
        preview_cloud, preview_note = organize(cloud, sensor.pattern, echoes), None
    except RayMatchError as exc:  # the pattern repeats a direction within a beam: no exact grid to draw
        preview_cloud, preview_note = cloud, f"preview.png has no range image: {exc}"
    write_preview(os.path.join(out_dir, "preview.png"), preview_cloud, max_range_m=extent_m)
    gif_step_s = scenario.get("step_size_s") or (float(np.median(np.diff(times))) if replayed > 1 else step_s)
    gif_frames[0].save(os.path.join(out_dir, "preview.gif"), save_all=True, append_images=gif_frames[1:],
                       duration=int(gif_step_s * 1000), loop=0)
    bad = damage[0] if damage else None
    summary = {
        "scenario": name,
        "frames": replayed,
        "sensor": sensor.name,
        "rays_per_frame": len(sensor.pattern),
        "returns_per_frame": returns,
        "objects_per_frame": object_ids,
        # the first step loads the model (and compiles what the cache lacks): apart from the steady state
        "first_step_ms": step_ms[0],
        "step_ms": _percentiles(step_ms[1:] or step_ms),
        "sensordata_trace": os.path.basename(final),
        "fmu_messages": [f"[{status}] {text}" for status, text in messages],
        # the first damaged frame of the trace (the frames before it were replayed), or null
        "damaged_frame": None if bad is None else {"index": bad.frame, "byte_offset": bad.offset, "error": str(bad)},
    }
    if preview_note:
        summary["preview_note"] = preview_note
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    if bad is not None:
        raise DamagedTraceError(f"{bad}; replayed them into {out_dir}", bad.frame, bad.offset, summary)
    return summary
