"""Rerun recordings (``.rrd``) of scans and replays, for the Rerun viewer (``pip install 'lidar-fmu[viewer]'``).

    with RerunRecording("out.rrd", recording_name="street") as rec:
        rec.log_meshes(scene)                                  # once; again per frame if things move
        rec.log_frame(cloud, time_s=0.0, frame_index=0)       # the cloud's sensor_pose places it

Open with ``rerun out.rrd`` (the viewer ships with rerun-sdk). Entities, in the
world frame (z up):

- ``world/sensor`` — the sensor pose (``Transform3D``, world_from_sensor), per frame;
- ``world/sensor/points`` — the returns in the sensor frame (``Points3D``), coloured
  by reflectivity (0–1 on viridis), ``class_ids`` their semantic classes where the
  cloud has them (:mod:`lidar_fmu.geometry.semantic`: an ``AnnotationContext`` on
  ``world`` names and colours each), and each one's ``object_id`` beside them;
- ``world/meshes/<k>_<name>`` — each distinct mesh once (static ``Mesh3D``) with
  ``InstancePoses3D`` for every instance of it; logged again on the timeline
  when the scene's poses or instances changed since the last call.

Timelines: ``frame`` (sequence) and ``time`` (scenario seconds, a duration).
"""
from __future__ import annotations

import os
import re

import numpy as np

from ..errors import LidarFmuError
from ..geometry.semantic import SEMANTIC_TABLE
from ..pointcloud import ENVIRONMENT_ID_BASE

_ENVIRONMENT_RGBA = (150, 150, 150, 255)
_OBJECT_RGBA = (120, 170, 230, 255)


class RerunUnavailableError(LidarFmuError):
    """rerun-sdk is not installed, or the recording cannot be written where asked."""


def _rerun():
    try:
        import rerun as rr
    except ImportError:
        raise RerunUnavailableError("a Rerun recording needs the 'rerun-sdk' package: "
                                    "pip install 'lidar-fmu[viewer]' (or pip install rerun-sdk)") from None
    return rr


def require_rerun() -> None:
    """Fail early if rerun-sdk is missing (where the recording's folder is yet to be made)."""
    _rerun()


def check_rerun_output(path) -> None:
    """Fail early (before a long scan or replay) if rerun-sdk is missing or ``path``'s folder does not exist."""
    _rerun()
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.isdir(folder):
        raise RerunUnavailableError(f"cannot write the Rerun recording {os.fspath(path)}: "
                                    f"folder {folder} does not exist")


def _viridis_lut() -> np.ndarray:
    from matplotlib import colormaps

    return (colormaps["viridis"](np.linspace(0.0, 1.0, 256))[:, :3] * 255).round().astype(np.uint8)


def _entity_part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_")[:48] or "mesh"


def vertex_normals(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """(V, 3) float32 unit vertex normals: area-weighted sums of the adjacent faces' normals."""
    v = vertices.astype(np.float64)
    face_normal = np.cross(v[faces[:, 1]] - v[faces[:, 0]], v[faces[:, 2]] - v[faces[:, 0]])
    normals = np.zeros_like(v)
    for axis in range(3):  # bincount sums per vertex far faster than np.add.at
        normals[:, axis] = sum(np.bincount(faces[:, corner], face_normal[:, axis], minlength=len(v))
                               for corner in range(3))
    length = np.linalg.norm(normals, axis=1, keepdims=True)
    return (normals / np.where(length > 0, length, 1.0)).astype(np.float32)


class RerunRecording:
    """A Rerun recording written to ``path`` as it is logged; :meth:`close` (or ``with``) finishes the file."""

    def __init__(self, path, app_id: str = "lidar-fmu", *, recording_name: str | None = None):
        check_rerun_output(path)
        rr = _rerun()
        self.path = os.fspath(path)
        self._rr = rr
        self.stream = rr.RecordingStream(app_id)
        self.stream.save(self.path)
        if recording_name:
            self.stream.send_recording_name(recording_name)
        self.stream.log("world", rr.ViewCoordinates.RIGHT_HAND_Z_UP, static=True)
        self._lut = _viridis_lut()
        self.stream.log("world", rr.AnnotationContext(
            [rr.AnnotationInfo(id=code, label=c.name, color=c.rgb) for code, c in enumerate(SEMANTIC_TABLE)]),
            static=True)
        self._mesh_entity: dict[int, str] = {}  # id(mesh) → entity path
        self._logged_revision: tuple | None = None
        self._closed = False

    # -- timeline ------------------------------------------------------------------------------
    def _set_time(self, time_s: float | None, frame_index: int | None) -> None:
        if frame_index is not None:
            self.stream.set_time("frame", sequence=int(frame_index))
        if time_s is not None:
            self.stream.set_time("time", duration=float(time_s))

    # -- frames --------------------------------------------------------------------------------
    def log_frame(self, cloud, time_s: float, frame_index: int, sensor_pose=None, entity: str = "world/sensor") -> None:
        """Log one scan: the sensor pose (``sensor_pose``, else ``cloud.sensor_pose``) as ``entity`` and its returns
        under it (a rig's lidars: an entity each)."""
        rr = self._rr
        self._set_time(time_s, frame_index)
        pose = np.asarray(cloud.sensor_pose if sensor_pose is None else sensor_pose, np.float64)
        self.stream.log(entity, rr.Transform3D(translation=pose[:3, 3], mat3x3=pose[:3, :3]))
        points = cloud.points
        xyz = np.stack([points["x"], points["y"], points["z"]], axis=1).astype(np.float32)
        reflectivity = points["reflectivity"] if "reflectivity" in points.dtype.names else np.zeros(len(points))
        colors = self._lut[np.clip(np.nan_to_num(np.asarray(reflectivity, np.float64)) * 255, 0, 255).astype(np.intp)]
        semantic = getattr(cloud, "semantic", None)
        points3d = rr.Points3D(xyz, colors=colors,
                               class_ids=None if semantic is None else np.asarray(semantic, np.uint16))
        if "object_id" in points.dtype.names:  # shown beside the class when a point is hovered
            self.stream.log(f"{entity}/points", points3d, rr.AnyValues(object_id=points["object_id"]))
        else:
            self.stream.log(f"{entity}/points", points3d)

    # -- meshes --------------------------------------------------------------------------------
    def log_meshes(self, scene, time_s: float | None = None, frame_index: int | None = None) -> None:
        """Log the scene's meshes (each distinct mesh once, static) and its instances' poses.

        Without a time the poses are static (a scene that never moves); with
        one they go on the timeline, and only when the scene changed since the
        last call (``scene.revision``/``pose_revision``), so calling this every
        frame costs nothing while nothing moves. A mesh whose instances are all
        gone is given one zero-scale pose (hidden).
        """
        rr = self._rr
        revision = (id(scene), scene.revision, scene.pose_revision)
        if revision == self._logged_revision:
            return
        static = time_s is None and frame_index is None
        self._set_time(time_s, frame_index)
        ids = np.asarray(scene.instance_ids)
        mesh_index = np.asarray(scene.instance_mesh_index)
        poses = np.asarray(scene.poses)
        for m, mesh in enumerate(scene.meshes):
            entity = self._mesh_entity.get(id(mesh))
            mine = mesh_index == m
            if entity is None:
                if not mine.any():
                    continue
                entity = f"world/meshes/{len(self._mesh_entity):03d}_{_entity_part(mesh.name)}"
                self._mesh_entity[id(mesh)] = entity
                environment = bool(np.all(ids[mine] >= ENVIRONMENT_ID_BASE))
                self.stream.log(entity, rr.Mesh3D(
                    vertex_positions=mesh.vertices, triangle_indices=mesh.faces,
                    vertex_normals=vertex_normals(mesh.vertices, mesh.faces),
                    albedo_factor=_ENVIRONMENT_RGBA if environment else _OBJECT_RGBA), static=True)
            if mine.any():
                instance = rr.InstancePoses3D(translations=poses[mine, :3, 3], mat3x3=poses[mine, :3, :3])
            else:
                instance = rr.InstancePoses3D(translations=np.zeros((1, 3)), scales=np.zeros((1, 3)))
            self.stream.log(entity, instance, static=static)
        self._logged_revision = revision

    # -- end -----------------------------------------------------------------------------------
    def close(self) -> None:
        """Flush everything to the file and end the recording (idempotent)."""
        if not self._closed:
            self._closed = True
            self.stream.flush()
            self.stream.disconnect()

    def __enter__(self) -> RerunRecording:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["RerunRecording", "RerunUnavailableError", "check_rerun_output", "vertex_normals"]
