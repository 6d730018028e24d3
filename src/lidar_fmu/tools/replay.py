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
from .replay_outputs import ReplayedFrame, ReplayOutputs, RerunLog, RosbagLog
from .replay_outputs import organize as organize  # re-exported: organizing a decoded cloud is part of this API

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


def model_of(parameters: dict, sensor=None, **options):
    """The :class:`~lidar_fmu.cosim.sensor_model.OsiSensorModel` the FMU builds from ``parameters``
    (:func:`fmu_parameters`), in-process; ``sensor`` replaces the parameters' (a rig, for the bench)."""
    from ..cosim.scene_update import mounting_of_parameters
    from ..cosim.sensor_model import OsiSensorModel

    mounting = mounting_of_parameters(parameters)
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


class SensorViews:
    """A scenario's SensorView trace, read lazily: the first :data:`STEP_LOOKAHEAD` views ahead (for the step
    size), the rest as the replay asks for them. A damaged trace ends before its damage, whose
    :class:`TraceError` is then in ``damage``; ``max_frames`` (if any): never read past them, so damage further
    on goes unseen.

    A missing or unknown trace, or one that holds no intact view, fails here, before any work.
    """

    def __init__(self, path: str, max_frames: int | None = None):
        from ..osi.trace import read_trace

        reader = read_trace(path, "SensorView")
        if max_frames:
            reader = itertools.islice(reader, max_frames)
        self.damage: list[TraceError] = []
        self._rest = _intact(reader, self.damage)
        self.head = list(itertools.islice(self._rest, STEP_LOOKAHEAD))
        if not self.head:
            if self.damage:
                raise self.damage[0]
            raise UserError(f"trace {path} holds no SensorView")
        self.head_times_s = [_timestamp_s(view) for view in self.head]

    def step_size_s(self, one_view_s: float) -> float:
        """The median timestamp spacing of the views read ahead (``one_view_s`` for a trace of one view)."""
        return float(np.median(np.diff(self.head_times_s))) if len(self.head_times_s) > 1 else one_view_s

    def __iter__(self):
        """(index from 0, serialized SensorView, its timestamp in s) of every intact view, read as asked for."""
        for index, view in enumerate(itertools.chain(self.head, self._rest)):
            yield index, view, self.head_times_s[index] if index < len(self.head_times_s) else _timestamp_s(view)


def _scenario_and_sensor(scenario_path, overrides: dict | None):
    """The scenario (``overrides`` laid over its file) and its lidar, refused early, with a clear message, on a bad
    spec, a rig or a material map that names unknown materials."""
    from ..sensors.rig import load_rig

    scenario = load_scenario(scenario_path) | (overrides or {})
    rig = load_rig(scenario["sensor"])
    if len(rig) > 1:
        raise UserError(f"scenario {scenario['name']}: replay writes one lidar's clouds and its sensor is a rig of "
                        f"{len(rig)} lidars; replay one scenario per lidar (the FMU itself carries rigs)")
    sensor = rig[0].sensor
    if scenario.get("materials"):
        from ..physics.materials import load_database, load_material_map
        from ..physics.materials.mapping import check_map

        check_map(load_material_map(scenario["materials"]), load_database(sensor.wavelength_nm))
    return scenario, sensor


def _current_fmu(fmu_path: str | os.PathLike | None) -> str | os.PathLike:
    """The FMU to drive: ``fmu_path``, else the default one, rebuilt first when its sources are newer."""
    from ..cosim.fmu_package import DEFAULT_FMU, build_fmu, sources_newer_than

    path = fmu_path or DEFAULT_FMU
    if path == DEFAULT_FMU and sources_newer_than(DEFAULT_FMU):
        build_fmu(DEFAULT_FMU)
    return path


def _with_progress_bar(views: SensorViews, scenario: dict, max_frames: int | None):
    """``views`` behind a progress bar; its total known for ``.osi`` traces (from the length prefixes)."""
    from tqdm import tqdm

    from ..osi.trace import count_frames

    total = count_frames(scenario["trace"])
    if max_frames:
        total = min(total, max_frames) if total is not None else max_frames
    return tqdm(iter(views), total=total, desc=f"replay {scenario['name']}", unit="frame")


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


def _stepped(fmu, views, step_s: float, sensor_name: str, twin: GroundTruthTwin | None):
    """Each (index, SensorView, timestamp) of ``views`` stepped through ``fmu`` as a master would (one step of
    ``step_s`` ending at the view's timestamp) → :class:`ReplayedFrame` with the decoded points (and, given a
    ``twin``, their ground truth)."""
    from ..osi.detections import sensor_data_to_points

    for index, view, time_s in views:
        t0 = time.perf_counter()
        out = fmu.step(view, time_s - step_s, step_s)
        step_ms = (time.perf_counter() - t0) * 1e3
        cloud = sensor_data_to_points(out.sensor_data)
        cloud.sensor_name, cloud.timestamp_s = sensor_name, time_s
        if twin is not None:
            cloud.ground_truth = twin.truth_for(cloud, view, time_s)
        yield ReplayedFrame(index, time_s, view, out.sensor_data, cloud, step_ms)


def replay(scenario_path, out_dir, fmu_path=None, max_frames: int | None = None, progress: bool = True,
           write_pcd_every: int = 1, trace_format: str = "osi", rerun_path: str | None = None,
           overrides: dict | None = None, fmu_unzip_dir: str | None = None, rosbag_path: str | None = None) -> dict:
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
    recording of the replay. ``rosbag_path``: also a ROS 2 bag (a new folder, MCAP storage) of
    every frame's points and the sensor's pose (:class:`RosbagLog`). The first step (it loads the model) is reported
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
    # reading: the scenario, its lidar, the FMU and the head of the trace, all checked before any output
    scenario, sensor = _scenario_and_sensor(scenario_path, overrides)
    fmu_path = _current_fmu(fmu_path)
    views = SensorViews(scenario["trace"], max_frames)
    step_s = scenario.get("step_size_s") or views.step_size_s(sensor.frame_period_s)
    os.makedirs(os.path.join(out_dir, "frames"), exist_ok=True)
    frames = _with_progress_bar(views, scenario, max_frames) if progress else iter(views)
    params = fmu_parameters(scenario, out_dir)
    rerun = RerunLog(rerun_path, scenario["name"], params) if rerun_path else None
    twin = GroundTruthTwin(params) if scenario.get("ground_truth") else None
    rosbag = RosbagLog(rosbag_path, params) if rosbag_path else None
    outputs = ReplayOutputs(out_dir, scenario, sensor, step_s, write_pcd_every, trace_format, rerun, rosbag)
    # stepping and writing: each frame's outputs are on disk before the next frame is read
    with _started(fmu_path, params, fmu_unzip_dir) as fmu, outputs:
        for frame in _stepped(fmu, frames, step_s, sensor.name, twin):
            outputs.add(frame)
        messages = list(fmu.messages)
    if progress:
        frames.close()
    damage = views.damage[0] if views.damage else None
    summary = outputs.finish(messages, damage)
    if damage is not None:
        raise DamagedTraceError(f"{damage}; replayed them into {out_dir}", damage.frame, damage.offset, summary)
    return summary
