"""PLY point-cloud files (binary little-endian, vertices only).

Vertex properties, in this order, for :data:`~lidar_fmu.pointcloud.POINT_DTYPE`::

    float x, y, z          m, sensor frame
    float range            m
    float reflectivity     0–1
    float nx, ny, nz       unit normal, sensor frame (the names Open3D, trimesh,
                           CloudCompare and MeshLab recognise as normals)
    uint  beam_id
    uint  object_id_low    object_id & 0xFFFFFFFF
    uint  object_id_high   object_id >> 32

The standard PLY type list stops at 32-bit integers and ``double`` cannot
hold every 64-bit id (``NO_OBJECT_ID`` = 2⁶⁴−1 is not representable), so each
64-bit integer field is split losslessly into ``<name>_low``/``<name>_high``
32-bit words: ``object_id = low | (high << 32)``. Other fields added to the
point record later are written under their own name with the matching PLY
type (bool as ``uchar``).
"""
from __future__ import annotations

import numpy as np

from .pcd import _points_array

#: our field names → the names point-cloud tools read as normals
_RENAME = {"normal_x": "nx", "normal_y": "ny", "normal_z": "nz"}
_PLY_TYPE = {
    "f4": "float", "f8": "double",
    "u1": "uchar", "u2": "ushort", "u4": "uint",
    "i1": "char", "i2": "short", "i4": "int",
    "b1": "uchar",
}


def _ply_layout(dtype: np.dtype) -> list[tuple[str, str, np.dtype, str, int]]:
    """(source field, PLY name, numpy dtype, PLY type, 64-bit word) per property; word −1 = whole value."""
    layout: list[tuple[str, str, np.dtype, str, int]] = []
    assert dtype.names is not None and dtype.fields is not None  # structured (_points_array)
    for name in dtype.names:
        dt = dtype.fields[name][0]
        if dt.subdtype is not None:
            raise ValueError(f"PLY vertex properties are scalars; field {name!r} has shape {dt.shape}")
        key = f"{dt.kind}{dt.itemsize}"
        if key in ("u8", "i8"):
            layout.append((name, f"{name}_low", np.dtype("<u4"), "uint", 0))
            layout.append((name, f"{name}_high", np.dtype("<u4" if dt.kind == "u" else "<i4"),
                           "uint" if dt.kind == "u" else "int", 1))
        elif key in _PLY_TYPE:
            ply_dt = np.dtype("u1") if dt.kind == "b" else dt.newbyteorder("<")
            layout.append((name, _RENAME.get(name, name), ply_dt, _PLY_TYPE[key], -1))
        else:
            raise ValueError(f"field {name!r} has dtype {dt}, which PLY cannot store")
    return layout


def write_ply(path, cloud) -> None:
    """Write the returns of ``cloud`` (a PointCloud or structured point array) as a binary PLY.

    See the module docstring for the properties; 64-bit integer fields
    (``object_id``) become ``<name>_low``/``<name>_high`` uint32 pairs.
    Open3D (``read_point_cloud``: points and normals), trimesh, CloudCompare
    and MeshLab read the result.
    """
    points = _points_array(cloud)
    layout = _ply_layout(points.dtype)
    out = np.empty(len(points), np.dtype([(ply_name, dt) for _, ply_name, dt, _, _ in layout]))
    for source, ply_name, dt, _, word in layout:
        values = points[source]
        if word >= 0:
            values = (values.view(np.uint64) >> np.uint64(32 * word)) & np.uint64(0xFFFFFFFF)
            values = values.astype(np.uint32).view(dt)
        out[ply_name] = values
    comments = ["comment lidar_fmu point cloud: sensor frame (x forward, y left, z up), metres"]
    assert points.dtype.names is not None  # structured (_points_array)
    if "object_id" in points.dtype.names:
        comments.append("comment object_id = object_id_low | (object_id_high << 32)")
    name = getattr(cloud, "sensor_name", "")
    if name:
        comments.append(f"comment sensor {name}")
    timestamp_s = getattr(cloud, "timestamp_s", None)
    if timestamp_s is not None:
        comments.append(f"comment timestamp_s {timestamp_s!r}")
    header = "\n".join(
        ["ply", "format binary_little_endian 1.0", *comments, f"element vertex {len(out)}"]
        + [f"property {ply_type} {ply_name}" for _, ply_name, _, ply_type, _ in layout]
        + ["end_header", ""]
    )
    with open(path, "wb") as f:
        f.write(header.encode("ascii"))
        f.write(memoryview(out.view(np.uint8)))  # type: ignore[arg-type]  # numpy types arrays as buffers from Python 3.12
