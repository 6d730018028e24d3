"""What :func:`lidar_fmu.tools.replay.replay` writes, one small writer per output, fed frame by frame.

* :class:`SensorDataTrace`: the FMU's SensorData, as ``.osi`` or ``.mcap``;
* :class:`FramePcds`: a compressed PCD of every N-th frame, with the fields OSI carries;
* :class:`RosbagLog`: a ROS 2 bag of every frame's points and the sensor's pose;
* :class:`RerunLog`: a Rerun recording of each frame's scene and points;
* :class:`Previews`: ``preview.gif`` (every frame from above) and ``preview.png`` (the last frame);
* :class:`FrameTally`: the per-frame figures of ``summary.json``.

:class:`ReplayOutputs` hands each :class:`ReplayedFrame` to all of them, then
finishes them: the trace named, the previews and ``summary.json`` written.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..scan.motion import first_firing_s  # the model's own window rule: when a replayed frame's first ray fired

if TYPE_CHECKING:
    from PIL import Image

    from ..io.rosbag import RosbagWriter
    from ..osi.mcap import SensorDataMcapWriter
    from ..osi.trace import TraceWriter
    from ..pointcloud import PointCloud


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


@dataclass
class ReplayedFrame:
    """One SensorView stepped through the FMU: what it sent back and the points decoded from that."""

    index: int  # position in the trace, from 0
    time_s: float  # the SensorView's timestamp
    sensor_view: bytes
    sensor_data: bytes  # the FMU's serialized osi3.SensorData
    cloud: PointCloud  # decoded from ``sensor_data`` (with the twin's ground truth when asked)
    step_ms: float  # wall time of the FMU's doStep
    why_invalid: str | None = None  # the FMU's output 'valid' was false: what it logged in the step; None: valid
    #: :attr:`view` once decoded (a field, so that a rig's per-lidar copies, ``dataclasses.replace``, keep it)
    decoded_view: Any = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def view(self):
        """``sensor_view`` decoded (:func:`~lidar_fmu.osi.decode.decode_sensor_view`), once for every output."""
        if self.decoded_view is None:
            from ..osi.decode import decode_sensor_view

            self.decoded_view = decode_sensor_view(self.sensor_view)
        return self.decoded_view


class SensorDataTrace:
    """The FMU's SensorData of every frame, written as it comes to a partial file, named at the end for the frames
    it holds (:func:`~lidar_fmu.osi.trace.trace_name`).

    ``osi``: length-prefixed, what openMSL's trace-file player reads; ``mcap``:
    zstd-compressed, OSI's recommendation since 3.7.
    """

    def __init__(self, out_dir: str, trace_format: str, scenario_name: str):
        from ..osi.mcap import open_sensor_data_trace

        self.out_dir, self.format, self.scenario_name = out_dir, trace_format, scenario_name
        self.partial_path = os.path.join(out_dir, f"sensordata.tmp.{trace_format}")
        self.writer: TraceWriter | SensorDataMcapWriter = open_sensor_data_trace(
            self.partial_path, description=f"lidar-fmu replay of {scenario_name}")

    def write(self, sensor_data: bytes) -> None:
        self.writer.write(sensor_data)

    def finish(self, frames: int) -> str:
        """The closed partial trace renamed for its ``frames`` (an earlier replay's trace of this scenario goes)
        → its file name."""
        from ..osi.trace import trace_name

        name = self.scenario_name
        final = os.path.join(self.out_dir, trace_name("sd", frames, name))
        if self.format == "mcap":
            final = final[: -len(".osi")] + ".mcap"
        for old in os.listdir(self.out_dir):
            if "_sd_" in old and old.endswith((f"_{name}.osi", f"_{name}.mcap")):
                os.remove(os.path.join(self.out_dir, old))
        os.replace(self.partial_path, final)
        return os.path.basename(final)


class FramePcds:
    """``frames/frame_NNNN.pcd`` of every ``every``-th frame (0: none), compressed.

    OSI carries no normals, flags or firing times, so a PCD has the fields it
    does (an FMCW unit's radial velocity among them); where each step is one whole frame of a repeating pattern, every
    detection's ray is known (:func:`organize`) and with it its firing time
    (and, dual-return, its echo number); the twin's truth when it has one.
    """

    def __init__(self, folder: str, sensor, step_s: float, every: int):
        self.folder, self.every, self.pattern = folder, every, sensor.pattern
        self.whole_frames = sensor.continuous is None and abs(step_s - sensor.frame_period_s) <= 1e-6 * step_s
        self.echoes = sensor.footprint.max_echoes if sensor.footprint.active else 1  # returns one ray may carry

    def due(self, index: int) -> bool:
        """Is frame ``index`` one to write a PCD of?"""
        return bool(self.every) and index % self.every == 0

    def fields_of(self, cloud) -> tuple:
        """(the cloud, organized on the pattern when it can be; the fields a file of it holds)."""
        from ..io import OSI_FIELDS
        from ..physics.ground_truth import GROUND_TRUTH_DTYPE
        from ..pointcloud import RayMatchError

        fields: tuple[str, ...] = OSI_FIELDS + ("intensity", "ring")
        if cloud.radial_velocity_m_s is not None:  # an FMCW unit's (OSI LidarDetection.radial_velocity)
            fields += ("radial_velocity",)
        if self.whole_frames:
            with contextlib.suppress(RayMatchError):
                cloud = organize(cloud, self.pattern, self.echoes)
                fields += ("echo",) if self.echoes > 1 else ()
                # a snapshot's points were all cast at the view: no firing times to mislead a deskewing reader
                fields += () if cloud.snapshot else ("time",)
        if cloud.semantic is not None:  # the twin's (ground_truth: true)
            fields += ("semantic",)
        if cloud.ground_truth is not None:
            fields += GROUND_TRUTH_DTYPE.names or ()
        return cloud, fields

    def write(self, index: int, cloud, fields) -> None:
        """Frame ``index``'s PCD of ``fields`` (:meth:`fields_of`)."""
        from ..io import write_pcd

        write_pcd(os.path.join(self.folder, f"frame_{index:04d}.pcd"), cloud, compression="binary_compressed",
                  fields=fields)


class RerunLog:
    """A Rerun recording (``.rrd``) of the replay: each frame's scene meshes and points, at the sensor's pose."""

    def __init__(self, path: str, scenario_name: str, parameters: dict):
        from ..io import RerunRecording
        from ..io.rerun import check_rerun_output
        from ..world.scene_update import SensorViewScene

        check_rerun_output(path)
        self.recording = RerunRecording(path, recording_name=scenario_name)
        self.scene = SensorViewScene(parameters)  # the FMU keeps its scene to itself: rebuilt here for the viewer

    def log(self, frame: ReplayedFrame, cloud) -> None:
        cloud.sensor_pose = self.scene.update(frame.sensor_view, frame.view if frame.sensor_view else None)
        self.recording.log_meshes(self.scene.scene, frame.time_s, frame.index)
        self.recording.log_frame(cloud, frame.time_s, frame.index)

    def log_rig(self, frame: ReplayedFrame, lidars: list) -> None:
        """A rig's frame: the scene once, then each lidar's points (``lidars``: (entity name, cloud, that lidar's
        SensorData)) under ``world/<name>``, at the pose the FMU measured them from (the host's pose times the
        SensorData's mounting)."""
        self.scene.update(frame.sensor_view, frame.view if frame.sensor_view else None)
        self.recording.log_meshes(self.scene.scene, frame.time_s, frame.index)
        for name, cloud, sensor_data in lidars:
            pose = measured_sensor_pose(frame.view, sensor_data, self.scene.default_mounting)
            self.recording.log_frame(cloud, frame.time_s, frame.index, pose, entity=f"world/{name}")


def measured_sensor_pose(view, sensor_data: bytes, default_mounting: np.ndarray) -> np.ndarray:
    """The world_from_sensor pose a lidar measured a frame from: the host's pose in the decoded SensorView
    ``view`` times the mounting its SensorData names (what the FMU used), else the view's or the default."""
    from ..osi.detections import sensor_data_mounting
    from ..world.scene_update import sensor_pose_in

    mounting = sensor_data_mounting(sensor_data)
    posed = view if mounting is None else dataclasses.replace(view, mounting_pose=mounting)
    return sensor_pose_in(posed, default_mounting)


class RosbagLog:
    """A ROS 2 bag (MCAP storage) of the replay: each frame's points as a PointCloud2 on ``topic`` in ``frame_id``
    and the sensor's world pose on ``/tf``, stamped with the frame's SensorView time (:mod:`lidar_fmu.io.rosbag`).
    A rig's lidars share one bag, each in a lane of its own (:meth:`lane`)."""

    def __init__(self, path: str, parameters: dict, frame_id: str = "lidar", topic: str | None = None):
        from ..io.rosbag import check_rosbag_output
        from ..world.scene_update import mounting_of_parameters

        check_rosbag_output(path)  # before any work; the bag itself is started with the replay (:meth:`open`)
        self.path, self.frame_id, self.topic = path, frame_id, topic
        self.default_mounting = mounting_of_parameters(parameters)
        self.writer: RosbagWriter | None = None  # the bag's (a lane writes into its bag's)
        self.bag: RosbagLog = self  # the log whose writer this lane writes into
        self.lanes_open = 0

    def lane(self, frame_id: str, topic: str | None = None) -> RosbagLog:
        """Another lidar's lane of this bag: its own ``frame_id`` and topic (default ``/<frame_id>/points``);
        the bag is started with the first lane opened and closed with the last."""
        lane = copy.copy(self)
        lane.frame_id, lane.topic, lane.bag = frame_id, topic, self
        return lane

    @contextlib.contextmanager
    def open(self):
        """This lane started in the bag (the bag started with the first lane), closed with the last lane."""
        from ..io.rosbag import RosbagWriter

        bag = self.bag
        if bag.writer is None:
            bag.writer = RosbagWriter(bag.path)
        self.topic = bag.writer.add_lidar(self.frame_id, self.topic)
        bag.lanes_open += 1
        try:
            yield bag.writer
        finally:
            bag.lanes_open -= 1
            if not bag.lanes_open:
                bag.writer.close()

    def log(self, frame: ReplayedFrame, cloud, fields) -> None:
        """The frame's ``fields`` of ``cloud`` (:meth:`FramePcds.fields_of`) and the sensor pose of its view:
        the host's pose times the mounting the FMU used (the SensorData's), else the view's or the parameters'."""
        writer = self.bag.writer
        assert writer is not None, "RosbagLog.open() first"
        pose = measured_sensor_pose(frame.view, frame.sensor_data, self.default_mounting)
        writer.write(self.frame_id, cloud, pose, fields=fields)


class Previews:
    """``preview.gif``: every frame's returns from above, with axes (m) and the frame's time; ``preview.png``: the
    last frame's, with its range image."""

    def __init__(self, out_dir: str, sensor, echoes: int):
        self.out_dir, self.pattern, self.echoes = out_dir, sensor.pattern, echoes
        self.extent_m = min(sensor.max_range_m, 60.0)
        self.gif_frames: list[Image.Image] = []
        self.last_cloud: PointCloud | None = None

    def add(self, cloud, index: int) -> None:
        """Frame ``index`` (from 0) of the replay: the GIF's frame with its axes and its end time."""
        from ..io import bev_image
        from ..io.preview import framed_bev

        image = bev_image(cloud.points, extent_m=self.extent_m, resolution_m=0.2)
        title = f"frame {index}, t = {cloud.timestamp_s:.3f} s, {len(cloud):,} returns"
        self.gif_frames.append(framed_bev(image, self.extent_m, title))
        self.last_cloud = cloud

    def finish(self, frame_step_s: float) -> str | None:
        """Both previews written (the GIF at ``frame_step_s`` a frame) → why the PNG has no range image, or None."""
        from ..io import write_preview
        from ..pointcloud import RayMatchError

        try:
            cloud, note = organize(self.last_cloud, self.pattern, self.echoes), None
        except RayMatchError as exc:  # the pattern repeats a direction within a beam: no exact grid to draw
            cloud, note = self.last_cloud, f"preview.png has no range image: {exc}"
        write_preview(os.path.join(self.out_dir, "preview.png"), cloud, max_range_m=self.extent_m)
        self.gif_frames[0].save(os.path.join(self.out_dir, "preview.gif"), save_all=True,
                                append_images=self.gif_frames[1:], duration=gif_frame_ms(frame_step_s), loop=0)
        return note


#: a GIF frame's shortest and longest time (ms): viewers show frames under 20 ms at 100 ms, and a GIF keeps a
#: frame's time as 16-bit centiseconds; a trace whose times jump (or run backwards) still gives a playable GIF
GIF_FRAME_MS = (20, 10_000)


def gif_frame_ms(frame_step_s: float) -> int:
    """The GIF's time per frame (ms) for frames ``frame_step_s`` apart, within :data:`GIF_FRAME_MS`."""
    shortest, longest = GIF_FRAME_MS
    return int(min(max(frame_step_s * 1000, shortest), longest)) if math.isfinite(frame_step_s) else longest


def backwards_note(times_s: list[float]) -> str | None:
    """One line saying how many frames' timestamps run backwards (before the frame's before them) and where
    first, or None: such frames are replayed as they come, in file order (a trace cut and joined, or SensorViews
    followed by other messages, which parse as views whose time starts over)."""
    times = np.asarray(times_s, np.float64)
    back = np.flatnonzero(times[1:] < times[:-1]) + 1
    if not len(back):
        return None
    k = int(back[0])
    return (f"the timestamps of {len(back)} of {len(times)} frames run backwards, first at frame {k} "
            f"({times[k]:.9g} s after {times[k - 1]:.9g} s): frames kept in file order")


class FrameTally:
    """Per frame: its returns, the objects they hit, the FMU's step time (ms), the view's timestamp (s) and the
    frame's first firing (s)."""

    def __init__(self):
        self.returns, self.object_ids, self.step_ms, self.times_s, self.first_firings_s = [], [], [], [], []
        self.invalid: list[dict] = []  # the frames the FMU flagged invalid: index, time_s, why

    def add(self, frame: ReplayedFrame) -> None:
        from ..pointcloud import NO_OBJECT_ID

        self.returns.append(len(frame.cloud))
        self.object_ids.append(sorted(set(np.unique(frame.cloud.points["object_id"]).tolist()) - {int(NO_OBJECT_ID)}))
        self.step_ms.append(frame.step_ms)
        self.times_s.append(frame.time_s)
        if frame.why_invalid is not None:
            self.invalid.append({"index": frame.index, "time_s": seconds(frame.time_s), "why": frame.why_invalid})
        self.first_firings_s.append(frame.cloud.first_firing_s)


def seconds(value: float | None) -> float | None:
    """A time (s) as ``summary.json`` keeps it: to the nanosecond, OSI's resolution (0.30000000000000004 → 0.3)."""
    return None if value is None else round(float(value), 9)


def milliseconds(value: float) -> float:
    """A duration (ms) as ``summary.json`` keeps it: to the microsecond, finer than any step time is steady."""
    return round(float(value), 3)


def _percentiles(values_ms) -> dict:
    return ({p: milliseconds(np.percentile(values_ms, int(p[1:]))) for p in ("p50", "p90", "p99")}
            | {"max": milliseconds(max(values_ms))})


class ReplayOutputs:
    """Every output of one replay: each frame written as it is replayed (:meth:`add`), the rest at the end
    (:meth:`finish`). Used as a context manager, it closes the trace and the Rerun recording.

    ``scenario``: its ``name`` and ``step_size_s`` (the GIF's frame time when
    given); ``step_s``: the replay's step; ``rerun``: the recording, if any
    (opened by the caller, which decides when).
    """

    def __init__(self, out_dir: str, scenario: dict, sensor, step_s: float, pcd_every: int, trace_format: str,
                 rerun: RerunLog | None, rosbag: RosbagLog | None = None):
        from ..pointcloud import beam_rings

        self.out_dir, self.scenario_name, self.sensor = out_dir, scenario["name"], sensor
        self.beam_rings = beam_rings(sensor.pattern)
        self.given_step_s, self.step_s = scenario.get("step_size_s"), step_s
        self.trace = SensorDataTrace(out_dir, trace_format, self.scenario_name)
        self.pcds = FramePcds(os.path.join(out_dir, "frames"), sensor, step_s, pcd_every)
        self.rerun, self.rosbag = rerun, rosbag
        self.previews = Previews(out_dir, sensor, self.pcds.echoes)
        self.tally = FrameTally()
        self._open = contextlib.ExitStack()

    def __enter__(self) -> ReplayOutputs:
        self._open.enter_context(self.trace.writer)
        if self.rerun is not None:
            self._open.enter_context(self.rerun.recording)
        if self.rosbag is not None:
            self._open.enter_context(self.rosbag.open())
        return self

    def __exit__(self, *exc) -> None:
        self._open.__exit__(*exc)

    def add(self, frame: ReplayedFrame) -> None:
        cloud = frame.cloud
        previous_s = self.tally.times_s[-1] if self.tally.times_s else None
        cloud.first_firing_s = first_firing_s(previous_s, frame.time_s, self.sensor.frame_period_s)
        cloud.snapshot, cloud.beam_rings = not self.sensor.motion_distortion, self.beam_rings
        self.trace.write(frame.sensor_data)
        self.tally.add(frame)
        due = self.pcds.due(frame.index)
        if due or self.rosbag is not None:  # organized (its rays known) for the files, which the other outputs take
            cloud, fields = self.pcds.fields_of(cloud)
            if due:
                self.pcds.write(frame.index, cloud, fields)
            if self.rosbag is not None:
                self.rosbag.log(frame, cloud, fields)
        if self.rerun is not None:
            self.rerun.log(frame, cloud)
        self.previews.add(cloud, frame.index)

    def finish(self, fmu_messages: list, damage) -> dict:
        """The trace named, both previews and ``summary.json`` written → the summary. ``damage``: the
        :class:`~lidar_fmu.osi.trace.TraceError` that ended the replay early, or None."""
        tally = self.tally
        frames = len(tally.returns)
        trace_file = self.trace.finish(frames)
        median_s = float(np.median(np.diff(tally.times_s))) if frames > 1 else 0.0
        gif_step_s = self.given_step_s or (median_s if median_s > 0 else self.step_s)
        preview_note = self.previews.finish(gif_step_s)
        summary = {
            "scenario": self.scenario_name,
            "frames": frames,
            "sensor": self.sensor.name,
            "rays_per_frame": len(self.sensor.pattern),
            "returns_per_frame": tally.returns,
            # scenario time (s) each frame ends at (its SensorView's) and its first ray fired at
            "frame_end_s": [seconds(t) for t in tally.times_s],
            "frame_first_firing_s": [seconds(t) for t in tally.first_firings_s],
            "objects_per_frame": tally.object_ids,
            # the first step loads the meshes its SensorView names: apart from the steady state
            "first_step_ms": milliseconds(tally.step_ms[0]),
            "step_ms": _percentiles(tally.step_ms[1:] or tally.step_ms),
            "sensordata_trace": trace_file,
            "sensordata_trace_bytes": os.path.getsize(os.path.join(self.out_dir, trace_file)),
            "fmu_messages": [f"[{status}] {text}" for status, text in fmu_messages],
            # frames whose step the FMU flagged invalid (its output 'valid' false), with what it logged then
            "invalid_frames": tally.invalid,
            # the first damaged frame of the trace (the frames before it were replayed), or null
            "damaged_frame": None if damage is None else {"index": damage.frame, "byte_offset": damage.offset,
                                                          "error": str(damage)},
        }
        if preview_note:
            summary["preview_note"] = preview_note
        time_note = backwards_note(tally.times_s)
        if time_note:
            summary["time_note"] = time_note
        with open(os.path.join(self.out_dir, "summary.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
        return summary
