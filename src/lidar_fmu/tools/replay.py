"""Replay an OSI scenario through the built FMU, frame by frame, as a master would.

A scenario is a folder with ``scenario.yaml`` (:func:`load_scenario`; :data:`SCENARIO_KEYS`: at least ``trace``,
and ``sensor``, ``assets``, ``environment``, ``materials``, ``ir_database``, ``step_size_s``, ``backend``,
``mounting``, ``up_axis``, ``ground_truth``, …; relative paths are relative to the folder). A bare SensorView
trace is a scenario too (:func:`trace_scenario`). Outputs: per-frame PCDs, a SensorData trace, a preview PNG and
animated GIF, and ``summary.json``; a rig's lidars each get those in ``sensor_<id>/``. A damaged trace is replayed
up to its first damaged frame, which the summary and the :class:`DamagedTraceError` raised at the end name. The
files a replay writes are listed in :data:`MANIFEST`; the next replay into the folder removes them first, and
only them. With ``ground_truth: true`` the model also steps in-process beside the FMU (:class:`GroundTruthTwin`),
as OSI has no field for ground truth.

The keys one by one, the outputs and their names: docs/replay.md.
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import math
import os
import re
import time

import numpy as np

from ..documents import read_document, refuse_unknown_keys, shown
from ..errors import UserError, brief
from ..osi.decode import sensor_view_time_s
from ..osi.trace import STEP_LOOKAHEAD, TraceError, median_step_s
from .replay_outputs import ReplayedFrame, ReplayOutputs, RerunLog, RosbagLog
from .replay_outputs import organize as organize  # re-exported: organizing a decoded cloud is part of this API

SCENARIO_KEYS = {"name", "description", "trace", "sensor", "assets", "environment", "materials", "ir_database",
                 "step_size_s", "backend", "mounting", "disable_self_hits", "notice", "up_axis", "ground_truth",
                 "objects", "host", "outputs"}


def load_scenario(path) -> dict:
    """Read ``scenario.yaml`` (or a folder holding one) → dict with absolute paths."""
    from ..world.scene_update import ENVIRONMENT_WORDS

    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "scenario.yaml")
    if not os.path.isfile(path):
        raise UserError(f"scenario file not found: {path}")
    scenario = read_document(path, "scenario", UserError, syntax="yaml")  # bounded: size, depth, aliases
    if not isinstance(scenario, dict) or "trace" not in scenario:
        raise UserError(f"scenario {path} must be a mapping with at least 'trace'")
    refuse_unknown_keys(scenario, SCENARIO_KEYS, f"scenario {path}", UserError)
    folder = os.path.dirname(os.path.abspath(path))
    scenario = dict(scenario)
    scenario["folder"] = folder
    scenario.setdefault("name", os.path.basename(folder))
    for key in ("trace", "assets", "environment", "materials", "ir_database"):
        if scenario.get(key) and not isinstance(scenario[key], str):
            raise UserError(f"scenario {path}: {key} must be a file or folder name, got {shown(scenario[key])}")
        if scenario.get(key) and not (key == "environment" and scenario[key].strip().lower() in ENVIRONMENT_WORDS):
            scenario[key] = os.path.join(folder, scenario[key])
    host = scenario.get("host")
    if host is not None and not (type(host) is int and 0 <= host < 2**64):
        raise UserError(f"scenario {path}: host must be an OSI id (a whole number ≥ 0), got {shown(host)}")
    sensor = scenario.get("sensor", "ouster_os1_128")
    if isinstance(sensor, str) and os.path.isfile(os.path.join(folder, sensor)):
        sensor = os.path.join(folder, sensor)
    scenario["sensor"] = sensor
    if not isinstance(scenario.get("ground_truth", False), bool):
        raise UserError(f"scenario {path}: ground_truth must be true or false, got {scenario['ground_truth']!r}")
    step_s = scenario.get("step_size_s")
    if step_s is not None and not (type(step_s) in (int, float) and math.isfinite(step_s) and step_s > 0):
        raise UserError(f"scenario {path}: step_size_s must be a number of seconds > 0 (an FMI step), got {step_s!r}")
    from ..world.scene_update import check_objects, check_up_axis

    try:
        scenario["up_axis"] = check_up_axis(scenario.get("up_axis"))
        check_objects(scenario.get("objects"))
    except ValueError as exc:
        raise UserError(f"scenario {path}: {exc}") from None
    return scenario


#: what a SensorView trace's file name ends in (:func:`lidar_fmu.osi.trace.read_trace`)
TRACE_SUFFIXES = (".osi", ".osi.xz", ".xz", ".mcap")


def is_trace_path(path) -> bool:
    """``path`` names a trace (by its ending), not a scenario folder or file."""
    return os.fspath(path).lower().endswith(TRACE_SUFFIXES)


def trace_scenario(trace_path, sensor=None, assets=None) -> dict:
    """The scenario of a bare SensorView trace: no scenario file, the ``sensor`` (preset, spec file or mapping)
    and ``assets`` (where the objects' ``model_reference`` strings resolve; without it they are OSI's boxes)
    given beside it; named by the trace's OSI name (``…_sv_…_<frames>_<name>.osi`` → ``<name>``)."""
    from ..world.scene_update import check_up_axis

    path = os.path.abspath(os.fspath(trace_path))
    if not os.path.isfile(path):
        raise UserError(f"trace file not found: {os.fspath(trace_path)}")
    if sensor is None:
        raise UserError(f"replay of the trace {os.fspath(trace_path)} needs --sensor (a preset name or a spec "
                        f"file): there is no scenario.yaml to name one")
    if assets and not os.path.isdir(assets):
        raise UserError(f"--assets {os.fspath(assets)!r}: folder not found")
    stem = os.path.basename(path)
    for suffix in TRACE_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    match = re.match(r"^\d{8}T\d{6}Z_[a-z]{2}_\d+_\d+_\d+_(.+)$", stem)
    return {"name": match.group(1) if match else stem, "trace": path, "sensor": sensor,
            "assets": os.path.abspath(assets) if assets else "", "folder": os.path.dirname(path),
            "up_axis": check_up_axis(None)}


def fmu_parameters(scenario: dict, spec_dir: str) -> dict:
    """FMU parameters for a scenario (a sensor mapping, or a rig's list, goes in as a JSON spec file)."""
    sensor = scenario["sensor"]
    if isinstance(sensor, (dict, list)):
        spec_path = os.path.join(spec_dir, "sensor.json")
        with open(spec_path, "w", encoding="utf-8") as f:
            json.dump(sensor if isinstance(sensor, dict) else {"sensors": sensor}, f)
        sensor = spec_path
    params = {"sensor": sensor, "assets": scenario.get("assets", "") or "",
              "environment": scenario.get("environment", "") or "", "materials": scenario.get("materials", "") or "",
              "ir_database": scenario.get("ir_database", "") or "",
              "backend": scenario.get("backend", "auto"), "disable_self_hits": scenario.get("disable_self_hits", True),
              "up_axis": scenario.get("up_axis", "") or "", "objects": scenario.get("objects", "") or "auto",
              "outputs": scenario.get("outputs", "") or ""}
    mounting = scenario.get("mounting") or {}
    for axis, value in zip("xyz", mounting.get("position_m", (0, 0, 0))):
        params[f"mounting_position_{axis}"] = value
    for angle, value in zip(("roll", "pitch", "yaw"), mounting.get("orientation_rad", (0, 0, 0))):
        params[f"mounting_orientation_{angle}"] = value
    return params


#: a roof lidar's optical centre above the roof (m): the height of a lidar's housing to its optical centre plus a
#: roof mount (assumed: an OS1's centre is 3.6 cm above its base, roof racks and mounts add a few cm)
ROOF_MOUNT_ABOVE_M = 0.1


def roof_mounting(sensor_view: bytes, host_id: int | None) -> dict:
    """The mounting (scenario ``mounting``: vehicle frame, rear-axle origin) of a lidar on the middle of the host's
    roof, for traces that give none (a GroundTruth trace): the host's box centre, its top plus ROOF_MOUNT_ABOVE_M."""
    from ..osi.decode import decode_sensor_view

    frame = decode_sensor_view(sensor_view)
    host = frame.object(host_id) if host_id is not None else None
    if host is None:
        return {}
    rear = host.bbcenter_to_rear_m or (0.0, 0.0, 0.0)
    return {"position_m": (-rear[0], -rear[1], -rear[2] + 0.5 * host.dimension_m[2] + ROOF_MOUNT_ABOVE_M),
            "orientation_rad": (0.0, 0.0, 0.0)}


def model_of(parameters: dict, sensor=None, **options):
    """The :class:`~lidar_fmu.cosim.sensor_model.OsiSensorModel` the FMU builds from ``parameters``
    (:func:`fmu_parameters`), in-process; ``sensor`` replaces the parameters' (a rig, for the bench)."""
    from ..cosim.sensor_model import OsiSensorModel
    from ..world.scene_update import mounting_of_parameters

    mounting = mounting_of_parameters(parameters)
    return OsiSensorModel(
        sensor=parameters["sensor"] if sensor is None else sensor, assets_dir=parameters.get("assets", ""),
        environment=parameters.get("environment", ""), materials=parameters.get("materials", ""),
        ir_database=parameters.get("ir_database", ""),
        backend=parameters.get("backend", "auto"), default_mounting_pose=mounting,
        disable_self_hits=bool(parameters.get("disable_self_hits", True)), up_axis=parameters.get("up_axis", ""),
        objects=parameters.get("objects", "") or "auto", outputs=parameters.get("outputs", "") or "", **options)


class GroundTruthTwin:
    """The model stepped in-process beside the FMU (same parameters, same views) for the truth OSI cannot carry."""

    def __init__(self, parameters: dict):
        # warnings are the FMU's to report: the twin stays silent
        self.model = model_of(parameters, ground_truth=True)

    def step(self, sensor_view: bytes, time_s: float) -> None:
        """Step the twin on the view the FMU was just stepped on."""
        result = self.model.step(sensor_view, time_s)
        self.time_s, self.clouds = time_s, list(self.model.last_clouds) if result.valid else []

    def add_truth(self, cloud, lidar: int = 0) -> None:
        """``cloud`` (lidar ``lidar``'s points of this step, decoded from the FMU's OSI, in detection order) given
        the twin's ground truth and semantic classes of its points."""
        twin = self.clouds[lidar] if lidar < len(self.clouds) else None
        if twin is None or len(twin) != len(cloud) or not np.array_equal(twin.points["beam_id"],
                                                                           cloud.points["beam_id"]):
            raise RuntimeError(f"the in-process model's step at t={self.time_s:g} s differs from the FMU's for lidar "
                               f"{lidar} ({0 if twin is None else len(twin)} against {len(cloud)} returns): a bug")
        cloud.ground_truth, cloud.semantic = twin.ground_truth, twin.semantic


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

    A GroundTruth trace (``message_type``; what esmini writes) is read as SensorViews around the host ``host``
    (an OSI id; ``None``: the trace's own ``host_vehicle_id``, else it is refused, naming its vehicles).
    A missing or unknown trace, or one that holds no intact view, fails here, before any work.
    """

    def __init__(self, path: str, max_frames: int | None = None, message_type: str = "SensorView",
                 host: int | None = None):
        from ..osi.trace import read_trace

        reader = read_trace(path, message_type)
        self.host = host
        if message_type == "GroundTruth":
            reader = self._views_of_ground_truth(reader, path)
        if max_frames:
            reader = itertools.islice(reader, max_frames)
        self.damage: list[TraceError] = []
        self._rest = _intact(reader, self.damage)
        self.head = list(itertools.islice(self._rest, STEP_LOOKAHEAD))
        if not self.head:
            if self.damage:
                raise self.damage[0]
            raise UserError(f"trace {path} holds no SensorView")
        self.head_times_s = [sensor_view_time_s(view) for view in self.head]

    def _views_of_ground_truth(self, messages, path: str):
        from ..osi.ground_truth import ground_truth_view, host_of_ground_truth

        for message in messages:
            if self.host is None:
                named, vehicles = host_of_ground_truth(message)
                if named is None:
                    shown_ids = ", ".join(map(str, vehicles[:10])) + (", …" if len(vehicles) > 10 else "")
                    raise UserError(f"{path} is a GroundTruth trace that names no host_vehicle_id: give the host "
                                    f"with --host ID (scenario key host); its moving objects: {shown_ids or 'none'}")
                self.host = named
            yield ground_truth_view(message, self.host)

    def step_size_s(self, one_view_s: float) -> float:
        """The median timestamp spacing of the views read ahead (:func:`~lidar_fmu.osi.trace.median_step_s`)."""
        return median_step_s(self.head_times_s, one_view_s)

    def __iter__(self):
        """(index from 0, serialized SensorView, its timestamp in s) of every intact view, read as asked for."""
        for index, view in enumerate(itertools.chain(self.head, self._rest)):
            yield index, view, self.head_times_s[index] if index < len(self.head_times_s) else sensor_view_time_s(view)


def _scenario_and_rig(scenario_path, overrides: dict | None):
    """The scenario (``overrides`` laid over its file; a bare trace takes its sensor and assets from them) and its
    lidars (:class:`~lidar_fmu.sensors.rig.RigMember`), refused early, with a clear message, on a bad spec, a
    malformed IR material database or a material map that names unknown materials."""
    from ..sensors.rig import load_rig

    overrides = overrides or {}
    if is_trace_path(scenario_path):
        scenario = trace_scenario(scenario_path, overrides.get("sensor"), overrides.get("assets")) | overrides
    else:
        scenario = load_scenario(scenario_path) | overrides
    rig = load_rig(scenario["sensor"])
    check_replay_outputs(scenario.get("outputs"), rig)
    if scenario.get("materials") or scenario.get("ir_database"):
        from ..physics.returns import Materials

        for wavelength_nm in dict.fromkeys(member.sensor.wavelength_nm for member in rig):
            # the map and the database read as the model reads them: a bad file, key or IR name fails here
            Materials(wavelength_nm, scenario.get("materials") or None, scenario.get("ir_database") or None)
    return scenario, rig


def check_replay_outputs(outputs, rig: list) -> None:
    """:class:`UserError` in one line unless the OSI layers a replay's model publishes (its ``outputs``, else its
    lidars' specs') are known and hold the detections, which a replay writes its point clouds from."""
    from ..sensors.outputs import OutputsError, model_outputs

    try:
        layers = model_outputs(outputs, [member.sensor.spec.get("outputs") for member in rig])
    except OutputsError as exc:
        raise UserError(str(exc)) from None
    if "detections" not in layers:
        raise UserError(f"outputs {','.join(layers)}: a replay writes its point clouds from the detections; add "
                        "detections to the list")


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


def _stepped(fmu, views, step_s: float, sensor_name: str, twin: GroundTruthTwin | None, rig: bool = False):
    """Each (index, SensorView, timestamp) of ``views`` stepped through ``fmu`` as a master would (one step of
    ``step_s`` ending at the view's timestamp) → :class:`ReplayedFrame` with the decoded points (and, given a
    ``twin``, their ground truth). For a ``rig`` the points are left to :class:`RigOutputs`, which decodes each
    lidar's own (the frame's ``cloud`` is then empty)."""
    from ..osi.detections import sensor_data_to_points
    from ..pointcloud import POINT_DTYPE, PointCloud

    for index, view, time_s in views:
        t0 = time.perf_counter()
        logged = len(fmu.messages)
        out = fmu.step(view, time_s - step_s, step_s)
        step_ms = (time.perf_counter() - t0) * 1e3
        why_invalid = None if out.valid else "; ".join(text for _, text in fmu.messages[logged:])
        if twin is not None:
            twin.step(view, time_s)
        cloud = (PointCloud(np.empty(0, POINT_DTYPE), np.empty(0, np.int32), 0, 0) if rig
                 else sensor_data_to_points(out.sensor_data))
        cloud.sensor_name, cloud.timestamp_s = sensor_name, time_s
        if twin is not None and not rig:
            twin.add_truth(cloud)
        yield ReplayedFrame(index, time_s, view, out.sensor_data, cloud, step_ms, why_invalid)


#: the files a replay wrote into its output folder, one path relative to it a line: what the next replay into the
#: folder removes before it writes (and nothing else: files of the user's beside them stay)
MANIFEST = "replay_files.txt"


def _files_under(folder: str) -> set[str]:
    """Every file under ``folder``, as paths relative to it."""
    return {os.path.relpath(os.path.join(root, name), folder) for root, _, names in os.walk(folder) for name in names}


def clear_previous_replay(out_dir: str) -> list[str]:
    """Remove the files the last replay into ``out_dir`` listed in its :data:`MANIFEST` (never a path outside
    ``out_dir``), the folders that leaves empty, and the manifest → the paths removed."""
    manifest = os.path.join(out_dir, MANIFEST)
    if not os.path.isfile(manifest):
        return []
    root = os.path.realpath(out_dir)
    with open(manifest, encoding="utf-8") as f:
        listed = [line for line in f.read().splitlines() if line.strip()]
    removed, folders = [], set()
    for name in listed:
        path = os.path.realpath(os.path.join(root, name))
        if os.path.commonpath([root, path]) != root or not os.path.isfile(path):
            continue  # a manifest edited to point elsewhere, or a file already gone
        os.remove(path)
        removed.append(name)
        folder = os.path.dirname(path)
        while folder != root and folder.startswith(root + os.sep):
            folders.add(folder)
            folder = os.path.dirname(folder)
    for folder in sorted(folders, key=len, reverse=True):  # the deepest first; a folder still holding files stays
        with contextlib.suppress(OSError):
            os.rmdir(folder)
    os.remove(manifest)
    return removed


@contextlib.contextmanager
def _manifested(out_dir: str):
    """The files that appear under ``out_dir`` inside the block, listed in its :data:`MANIFEST` however the block
    ends (a damaged trace, an error, Ctrl-C)."""
    before = _files_under(out_dir)
    try:
        yield
    finally:
        written = sorted(_files_under(out_dir) - before - {MANIFEST})
        with open(os.path.join(out_dir, MANIFEST), "w", encoding="utf-8") as f:
            f.writelines(f"{name}\n" for name in written)


def per_lidar_sensor_data(sensor_data: bytes, lidars: int) -> list[tuple[int | None, bytes]]:
    """A rig's SensorData split into one SensorData per lidar, as an FMU of that lidar alone sends it: only its
    ``feature_data.lidar_sensor`` entry, the SensorData's ``sensor_id`` and ``mounting_position`` its header's →
    (sensor id, bytes) for each of the ``lidars``, in rig order. A step without the lidars' entries (an invalid
    one) gives each lidar the SensorData without any, and no id."""
    from osi3.osi_sensordata_pb2 import SensorData

    whole = SensorData.FromString(bytes(sensor_data))
    entries = list(whole.feature_data.lidar_sensor)
    if len(entries) != lidars:
        return [(None, bytes(sensor_data))] * lidars
    whole.feature_data.ClearField("lidar_sensor")
    out: list[tuple[int | None, bytes]] = []
    for entry in entries:
        one = SensorData()
        one.CopyFrom(whole)
        one.feature_data.lidar_sensor.add().CopyFrom(entry)
        one.sensor_id.CopyFrom(entry.header.sensor_id)
        one.mounting_position.CopyFrom(entry.header.mounting_position)
        out.append((entry.header.sensor_id.value, one.SerializeToString()))
    return out


class RigOutputs:
    """A rig's outputs: each lidar's, as a replay of that lidar alone writes them, in ``out_dir/sensor_<id>/``
    (the ids the FMU gives them: :func:`~lidar_fmu.sensors.rig.rig_sensor_ids`), and a
    ``summary.json`` naming the lidars and their folders. Opened on the first frame, whose SensorData names the
    ids. ``twin``: the ground truth's, stepped on each frame before :meth:`add` gets it."""

    def __init__(self, out_dir: str, scenario: dict, rig: list, step_s: float, pcd_every: int, trace_format: str,
                 twin: GroundTruthTwin | None, rosbag: RosbagLog | None = None, rerun: RerunLog | None = None):
        self.out_dir, self.scenario, self.rig, self.twin, self.rosbag = out_dir, scenario, rig, twin, rosbag
        self.rerun = rerun  # one recording of the scene, each lidar's points under world/sensor_<id>
        self.options = (step_s, pcd_every, trace_format)
        self.lidars: list[tuple[int, str, ReplayOutputs]] = []
        self._open = contextlib.ExitStack()

    def __enter__(self) -> RigOutputs:
        if self.rerun is not None:
            self._open.enter_context(self.rerun.recording)
        return self

    def __exit__(self, *exc) -> None:
        self._open.__exit__(*exc)

    def _open_lidars(self, ids: list[int | None], sensor_view: bytes) -> None:
        from ..osi.decode import parse_sensor_view
        from ..sensors.rig import rig_sensor_ids

        view_id = parse_sensor_view(sensor_view).sensor_id.value if sensor_view else 0
        # an invalid first step names no ids: the ids the FMU gives (docs/fmu.md)
        fmu_ids = rig_sensor_ids([member.sensor_id for member in self.rig], view_id)
        for member, sensor_id, fmu_id in zip(self.rig, ids, fmu_ids):
            sensor_id = fmu_id if sensor_id is None else sensor_id
            folder = f"sensor_{sensor_id}"
            os.makedirs(os.path.join(self.out_dir, folder, "frames"), exist_ok=True)
            scenario = self.scenario | {"name": f"{self.scenario['name']}_sensor{sensor_id}"}
            # one bag for the rig: each lidar in a TF frame and on a topic of its own (``/sensor_<id>/points``)
            lane = None if self.rosbag is None else self.rosbag.lane(folder)
            outputs = ReplayOutputs(os.path.join(self.out_dir, folder), scenario, member.sensor, *self.options, None,
                                    lane)
            self.lidars.append((sensor_id, folder, self._open.enter_context(outputs)))

    def add(self, frame: ReplayedFrame) -> None:
        from ..osi.detections import sensor_data_to_points

        split = per_lidar_sensor_data(frame.sensor_data, len(self.rig))
        if not self.lidars:
            self._open_lidars([sensor_id for sensor_id, _ in split], frame.sensor_view)
        logged = []
        view = frame.view if frame.sensor_view else None  # decoded once: every lidar's copy of the frame shares it
        for k, ((_, sensor_data), member, (_, folder, outputs)) in enumerate(zip(split, self.rig, self.lidars)):
            cloud = sensor_data_to_points(sensor_data)
            cloud.sensor_name, cloud.timestamp_s = member.sensor.name, frame.time_s
            if self.twin is not None:  # stepped on this frame's view by the stepping
                self.twin.add_truth(cloud, k)
            outputs.add(dataclasses.replace(frame, sensor_data=sensor_data, cloud=cloud, decoded_view=view))
            logged.append((folder, cloud, sensor_data))
        if self.rerun is not None:
            self.rerun.log_rig(frame, logged)

    def finish(self, fmu_messages: list, damage) -> dict:
        """Each lidar's outputs finished, then the rig's ``summary.json`` → the rig's summary (``lidars``: each
        lidar's summary with its ``sensor_id`` and ``folder``)."""
        self._open.close()  # each lidar's trace closed before it is named
        lidars = [outputs.finish(fmu_messages, damage) | {"sensor_id": sensor_id, "folder": folder}
                  for sensor_id, folder, outputs in self.lidars]
        summary = {"scenario": self.scenario["name"], "frames": lidars[0]["frames"] if lidars else 0,
                   "lidars": lidars, "fmu_messages": [f"[{status}] {text}" for status, text in fmu_messages],
                   "damaged_frame": lidars[0]["damaged_frame"] if lidars else None} | _rig_figures(lidars)
        with open(os.path.join(self.out_dir, "summary.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
        return summary


def invalid_frames_message(summary: dict) -> str | None:
    """One line saying how many of a replay's frames the FMU flagged invalid and why the first was, or None."""
    invalid = summary.get("invalid_frames") or []
    if not invalid:
        return None
    first = invalid[0]
    return (f"{len(invalid)} of {summary['frames']} frames invalid, the first (frame {first['index']}): "
            f"{brief(first['why']) or 'the FMU logged no reason'}")


def _rig_figures(lidars: list[dict]) -> dict:
    """A rig's figures over its lidars' summaries, as one lidar's summary names them: the returns of every lidar
    and the objects any lidar hit per frame; one FMU step serves every lidar, so its times and its validity are
    the rig's; each lidar's SensorData trace (relative to the rig's folder)."""
    if not lidars:
        return {"returns_per_frame": [], "objects_per_frame": [], "invalid_frames": [], "sensordata_trace": [],
                "sensordata_trace_bytes": []}
    first = lidars[0]
    return {"returns_per_frame": [sum(n) for n in zip(*(lidar["returns_per_frame"] for lidar in lidars))],
            "objects_per_frame": [sorted(set().union(*ids)) for ids in zip(*(lidar["objects_per_frame"]
                                                                              for lidar in lidars))],
            "first_step_ms": first["first_step_ms"], "step_ms": first["step_ms"],
            "invalid_frames": first["invalid_frames"],
            "sensordata_trace": [os.path.join(lidar["folder"], lidar["sensordata_trace"]) for lidar in lidars],
            "sensordata_trace_bytes": [lidar["sensordata_trace_bytes"] for lidar in lidars]}


def replay(scenario_path, out_dir, fmu_path=None, max_frames: int | None = None, progress: bool = True,
           write_pcd_every: int = 1, trace_format: str = "mcap", rerun_path: str | None = None,
           overrides: dict | None = None, fmu_unzip_dir: str | None = None, rosbag_path: str | None = None) -> dict:
    """Drive the FMU through every SensorView of a scenario (or of a bare trace: ``overrides`` gives its
    ``sensor`` and ``assets``); write outputs into ``out_dir``.

    The trace is read lazily and each frame's outputs are written as it is
    replayed. A damaged trace (truncated, a corrupt message, a broken
    ``.osi.xz``) is replayed up to the damage — PCDs, SensorData trace,
    preview and ``summary.json`` (``damaged_frame`` names it) from the intact
    frames — and then :class:`DamagedTraceError` names the bad frame. A rig
    writes each lidar's outputs into ``out_dir/sensor_<id>/``
    (:class:`RigOutputs`). The files an earlier replay into ``out_dir`` wrote
    (its :data:`MANIFEST`) are removed first, once every input has been
    checked; nothing else in ``out_dir`` is touched.

    ``trace_format``: the SensorData trace as ``mcap`` (zstd-compressed, OSI's
    recommendation since 3.7, about a third of the size) or ``osi``
    (length-prefixed, what openMSL's trace-file player reads); the summary
    names it and its size. ``write_pcd_every``: a PCD of every N-th frame
    (compressed, the fields OSI carries). ``rerun_path``: also a Rerun
    recording of the replay. ``rosbag_path``: also a ROS 2 bag (a new folder, MCAP storage) of
    every frame's points and the sensor's pose (:class:`RosbagLog`). The first step (it loads the meshes its
    SensorView names) is reported apart as ``first_step_ms``, not in the step percentiles.

    ``overrides``: scenario keys laid over the file's (``lidar-fmu sweep``
    gives each run its ``sensor`` and ``mounting`` so; paths in them
    absolute). ``fmu_unzip_dir``: ``fmu_path`` already extracted there (a
    sweep worker extracts its FMU once for all its runs).
    """
    from ..io.rerun import require_rerun
    from ..osi.trace import check_message_type

    if trace_format not in ("osi", "mcap"):
        raise UserError(f"trace format must be osi or mcap, got {trace_format!r}")
    if write_pcd_every < 0:
        raise UserError(f"write_pcd_every must be ≥ 0 (0: no PCDs), got {write_pcd_every}")
    # reading: the scenario, its lidars, the FMU and the head of the trace, all checked before any output
    scenario, rig = _scenario_and_rig(scenario_path, overrides)
    if rerun_path:
        require_rerun()
    if rosbag_path:
        from ..io.rosbag import check_rosbag_output

        check_rosbag_output(rosbag_path)
    message_type = check_message_type(scenario["trace"], ("SensorView", "GroundTruth"))
    fmu_path = _current_fmu(fmu_path)
    views = SensorViews(scenario["trace"], max_frames, message_type, scenario.get("host"))
    if message_type == "GroundTruth" and not scenario.get("mounting"):
        scenario = scenario | {"mounting": roof_mounting(views.head[0], views.host)}
    step_s = scenario.get("step_size_s") or views.step_size_s(rig[0].sensor.frame_period_s)
    os.makedirs(out_dir, exist_ok=True)
    clear_previous_replay(out_dir)
    with _manifested(out_dir):
        return _replay_into(out_dir, scenario, rig, views, step_s, fmu_path, fmu_unzip_dir, max_frames, progress,
                            write_pcd_every, trace_format, rerun_path, rosbag_path)


def _replay_into(out_dir: str, scenario: dict, rig: list, views: SensorViews, step_s: float, fmu_path,
                 fmu_unzip_dir, max_frames, progress: bool, write_pcd_every: int, trace_format: str,
                 rerun_path, rosbag_path) -> dict:
    """:func:`replay`'s stepping and writing, once every input has been checked."""
    from ..scan.kernels import FIRST_COMPILE_TEXT, kernels_cached

    frames = _with_progress_bar(views, scenario, max_frames) if progress else iter(views)
    # a first run on this machine compiles the kernels in the FMU's initialization: the bar says so meanwhile
    compiling = progress and not kernels_cached()
    if compiling:
        frames.set_description(f"replay {scenario['name']}: compiling kernels once ({FIRST_COMPILE_TEXT})")
    params = fmu_parameters(scenario, out_dir)
    twin = GroundTruthTwin(params) if scenario.get("ground_truth") else None
    rosbag = RosbagLog(rosbag_path, params) if rosbag_path else None
    rerun = RerunLog(rerun_path, scenario["name"], params) if rerun_path else None
    outputs: ReplayOutputs | RigOutputs
    if len(rig) > 1:
        outputs = RigOutputs(out_dir, scenario, rig, step_s, write_pcd_every, trace_format, twin, rosbag, rerun)
    else:
        os.makedirs(os.path.join(out_dir, "frames"), exist_ok=True)
        outputs = ReplayOutputs(out_dir, scenario, rig[0].sensor, step_s, write_pcd_every, trace_format, rerun,
                                rosbag)
    # stepping and writing: each frame's outputs are on disk before the next frame is read
    with _started(fmu_path, params, fmu_unzip_dir) as fmu, outputs:
        if progress:  # its clock from the first step: the initialization is no frame's
            frames.reset()
            if compiling:
                frames.set_description(f"replay {scenario['name']}")
        for frame in _stepped(fmu, frames, step_s, rig[0].sensor.name, twin, rig=len(rig) > 1):
            outputs.add(frame)
        messages = list(fmu.messages)
    if progress:
        frames.close()
    damage = views.damage[0] if views.damage else None
    summary = outputs.finish(messages, damage)
    if damage is not None:
        raise DamagedTraceError(f"{damage}; replayed them into {out_dir}", damage.frame, damage.offset, summary)
    return summary
