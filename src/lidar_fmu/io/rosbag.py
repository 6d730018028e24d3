"""ROS 2 bags (MCAP storage) of point clouds and sensor poses, written with ``rosbags`` (no ROS installation).

    with RosbagWriter("out/bag") as bag:
        bag.add_lidar("lidar")                                  # topic /lidar/points, frame_id lidar
        bag.write("lidar", cloud, world_from_sensor)            # at cloud.timestamp_s

Each lidar gets a ``sensor_msgs/msg/PointCloud2`` topic (``x y z intensity ring time`` first, as
velodyne_pointcloud's ``PointXYZIRT``, then the rest of the record; ``object_id`` as two uint32 words) and each
frame its pose on ``/tf`` (``map`` → the lidar's ``frame_id``), both stamped with the frame's end. ``time`` is
relative to that stamp, as velodyne_pointcloud writes it (ros-drivers/velodyne#350). The fields and stamps:
docs/formats.md, "ROS 2 bags".
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from ._common import PointCloudFileError, uint64_word
from .pcd import _points_array, _select_fields

#: the frame the lidars' poses are given in (REP 105's world-fixed frame)
WORLD_FRAME_ID = "map"
#: numpy dtype → sensor_msgs/msg/PointField datatype
_DATATYPES = {np.dtype("i1"): 1, np.dtype("u1"): 2, np.dtype("<i2"): 3, np.dtype("<u2"): 4, np.dtype("<i4"): 5,
              np.dtype("<u4"): 6, np.dtype("<f4"): 7, np.dtype("<f8"): 8}
#: fields first, in the order of velodyne_pointcloud's PointXYZIRT (x y z intensity ring time)
_LEADING = ("x", "y", "z", "intensity", "ring", "time")


def point_fields(points: np.ndarray) -> np.ndarray:
    """``points`` (structured) as the packed little-endian record a PointCloud2 carries: :data:`_LEADING` first,
    64-bit integers split into ``_low``/``_high`` uint32 words, bools as uint8."""
    assert points.dtype.names is not None  # structured (_points_array)
    names = [n for n in _LEADING if n in points.dtype.names] + [n for n in points.dtype.names if n not in _LEADING]
    columns: dict[str, np.ndarray] = {}
    for name in names:
        values = points[name]
        if values.dtype.kind in "ui" and values.dtype.itemsize == 8:
            columns[f"{name}_low"], columns[f"{name}_high"] = uint64_word(values, 0), uint64_word(values, 1)
        elif values.dtype.kind == "b":
            columns[name] = values.astype(np.uint8)
        elif values.dtype.newbyteorder("<") in _DATATYPES and values.ndim == 1:
            columns[name] = values
        else:
            raise PointCloudFileError(f"field {name!r} ({values.dtype}) has no PointField type")
    out = np.empty(len(points), np.dtype([(name, v.dtype.newbyteorder("<")) for name, v in columns.items()]))
    for name, values in columns.items():
        out[name] = values
    return out


def _stamp_ns(time_s: float) -> int:
    if not (np.isfinite(time_s) and time_s >= 0):
        raise PointCloudFileError(f"a ROS bag's times are ≥ 0 s; a frame at {time_s!r} s cannot be written")
    return round(time_s * 1e9)


def check_rosbag_output(path: str | os.PathLike[str]) -> None:
    """Refuse, before any work, a bag path that exists (``rosbags`` writes a new folder) or a missing ``rosbags``."""
    try:
        import rosbags.rosbag2  # noqa: F401
    except ImportError:
        raise PointCloudFileError(f"{os.fspath(path)}: writing a ROS 2 bag needs the 'rosbags' package "
                                  "(pip install rosbags)") from None
    if os.path.exists(path):
        raise PointCloudFileError(f"ROS bag {os.fspath(path)} already exists: give a new folder")


class RosbagWriter:
    """A ROS 2 bag folder ``path`` (MCAP storage; ``rosbags`` refuses one that exists) of lidars' clouds and poses.

    :meth:`add_lidar` each lidar (its ``frame_id`` and topic), then :meth:`write` its frames in time order; a
    context manager, or :meth:`close` at the end.
    """

    def __init__(self, path: str | os.PathLike[str], world_frame_id: str = WORLD_FRAME_ID):
        check_rosbag_output(path)
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore

        self.path, self.world_frame_id = os.fspath(path), world_frame_id
        self.typestore = get_typestore(Stores.ROS2_HUMBLE)
        self.writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        self.writer.open()
        self.tf = self.writer.add_connection("/tf", "tf2_msgs/msg/TFMessage", typestore=self.typestore)
        self.topics: dict[str, Any] = {}

    def add_lidar(self, frame_id: str, topic: str | None = None) -> str:
        """A lidar's ``frame_id`` (its TF frame) and PointCloud2 topic (default ``/<frame_id>/points``) → the topic."""
        if not frame_id or frame_id in self.topics or frame_id == self.world_frame_id:
            raise PointCloudFileError(f"lidar frame_id {frame_id!r} is empty, taken or the world frame")
        topic = topic or f"/{frame_id}/points"
        self.topics[frame_id] = self.writer.add_connection(topic, "sensor_msgs/msg/PointCloud2",
                                                           typestore=self.typestore)
        return topic

    def _header(self, stamp_ns: int, frame_id: str):
        types = self.typestore.types
        sec, nanosec = divmod(stamp_ns, 1_000_000_000)
        return types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                                            frame_id=frame_id)

    def point_cloud2(self, cloud, frame_id: str, stamp_ns: int, fields=None):
        """The ``sensor_msgs/msg/PointCloud2`` of ``cloud`` (module doc: fields, ``time``); ``fields``: only these
        (as :func:`~lidar_fmu.io.write_pcd`'s)."""
        points = _select_fields(_points_array(cloud), fields)
        if "time" in (points.dtype.names or ()):  # s after the first firing → s after the stamp
            first_s = getattr(cloud, "first_firing_s", None)
            offset = 0.0 if first_s is None else float(first_s) - stamp_ns * 1e-9
            points = np.array(points)  # a copy, packed
            points["time"] = points["time"].astype(np.float64) + offset
        record = point_fields(points)
        types = self.typestore.types
        assert record.dtype.fields is not None  # structured (point_fields)
        fields = [types["sensor_msgs/msg/PointField"](name=name, offset=offset, datatype=_DATATYPES[dt], count=1)
                  for name, (dt, offset, *_) in record.dtype.fields.items()]
        return types["sensor_msgs/msg/PointCloud2"](
            header=self._header(stamp_ns, frame_id), height=1, width=len(record), fields=fields, is_bigendian=False,
            point_step=record.dtype.itemsize, row_step=record.dtype.itemsize * len(record),
            data=np.ascontiguousarray(record).view(np.uint8).reshape(-1), is_dense=True)

    def write(self, frame_id: str, cloud, world_from_sensor, fields=None) -> None:
        """One frame of lidar ``frame_id``: ``cloud`` (a PointCloud, sensor frame; ``fields``: only these) at
        ``cloud.timestamp_s``, and the lidar's pose then (4×4 world_from_sensor, m) on ``/tf``."""
        from ..scan.motion import unit_quaternion

        if frame_id not in self.topics:
            raise PointCloudFileError(f"lidar frame_id {frame_id!r} was not added to the ROS bag {self.path}")
        stamp_ns = _stamp_ns(float(cloud.timestamp_s))
        types = self.typestore.types
        pose = np.asarray(world_from_sensor, np.float64)
        w, x, y, z = unit_quaternion(pose[:3, :3])
        transform = types["geometry_msgs/msg/Transform"](
            translation=types["geometry_msgs/msg/Vector3"](x=pose[0, 3], y=pose[1, 3], z=pose[2, 3]),
            rotation=types["geometry_msgs/msg/Quaternion"](x=x, y=y, z=z, w=w))
        tf = types["tf2_msgs/msg/TFMessage"](transforms=[types["geometry_msgs/msg/TransformStamped"](
            header=self._header(stamp_ns, self.world_frame_id), child_frame_id=frame_id, transform=transform)])
        serialize = self.typestore.serialize_cdr
        self.writer.write(self.tf, stamp_ns, serialize(tf, "tf2_msgs/msg/TFMessage"))
        self.writer.write(self.topics[frame_id], stamp_ns,
                          serialize(self.point_cloud2(cloud, frame_id, stamp_ns, fields), "sensor_msgs/msg/PointCloud2"))

    def close(self) -> None:
        self.writer.close()

    def __enter__(self) -> RosbagWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["RosbagWriter", "WORLD_FRAME_ID", "check_rosbag_output", "point_fields"]
