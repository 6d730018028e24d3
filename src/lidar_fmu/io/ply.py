"""PLY point-cloud files (binary little-endian, vertices only), in the types Open3D reads.

The vertex properties follow :meth:`~lidar_fmu.PointCloud.records`, with ``nx ny nz`` for the normal (the names
Open3D, trimesh, CloudCompare and MeshLab recognise). Open3D's tensor reader keeps only ``uchar``, ``int``,
``float`` and ``double``, so every integer field other than a byte is written as ``int`` (a uint32 past 2³¹−1 is
refused), and a 64-bit field is split losslessly into ``<name>_low``/``<name>_high``:
``object_id = uint32(high) << 32 | uint32(low)``. Comments name the frame's times. The properties and their
types: docs/formats.md, "PLY".
"""
from __future__ import annotations

import numpy as np

from ._common import PointCloudFileError, uint64_word
from .pcd import _points_array, frame_stamp_lines

#: our field names → the names point-cloud tools read as normals
_RENAME = {"normal_x": "nx", "normal_y": "ny", "normal_z": "nz"}
_INT32_MAX = 2**31 - 1


def _ply_layout(points: np.ndarray) -> list[tuple[str, str, np.dtype, str, int]]:
    """(source field, PLY name, numpy dtype, PLY type, 64-bit word) per property; word −1 = whole value."""
    layout: list[tuple[str, str, np.dtype, str, int]] = []
    dtype = points.dtype
    assert dtype.names is not None and dtype.fields is not None  # structured (_points_array)
    for name in dtype.names:
        dt = dtype.fields[name][0]
        if dt.subdtype is not None:
            raise ValueError(f"PLY vertex properties are scalars; field {name!r} has shape {dt.shape}")
        ply_name = _RENAME.get(name, name)
        if dt.kind == "f":
            layout.append((name, ply_name, dt.newbyteorder("<"), "float" if dt.itemsize <= 4 else "double", -1))
        elif dt.kind == "b" or (dt.kind == "u" and dt.itemsize == 1):
            layout.append((name, ply_name, np.dtype("u1"), "uchar", -1))
        elif dt.kind in "ui" and dt.itemsize == 8:
            layout += [(name, f"{name}_low", np.dtype("<i4"), "int", 0), (name, f"{name}_high", np.dtype("<i4"), "int", 1)]
        elif dt.kind in "ui":
            if dt.kind == "u" and dt.itemsize == 4 and len(points) and int(points[name].max()) > _INT32_MAX:
                raise PointCloudFileError(f"PLY field {name!r} holds {int(points[name].max())}, past the int32 "
                                          "that Open3D reads")
            layout.append((name, ply_name, np.dtype("<i4"), "int", -1))
        else:
            raise ValueError(f"field {name!r} has dtype {dt}, which PLY cannot store")
    return layout


def write_ply(path, cloud) -> None:
    """Write the returns of ``cloud`` (a PointCloud or structured point array) as a binary PLY.

    See docs/formats.md, "PLY", for the properties; 64-bit integer fields
    (``object_id``) become ``<name>_low``/``<name>_high`` pairs of 32-bit words.
    Open3D (``read_point_cloud``: points and normals), trimesh, CloudCompare
    and MeshLab read the result.
    """
    points = _points_array(cloud)
    layout = _ply_layout(points)
    out = np.empty(len(points), np.dtype([(ply_name, dt) for _, ply_name, dt, _, _ in layout]))
    for source, ply_name, dt, _, word in layout:
        values = points[source]
        if word >= 0:
            values = uint64_word(values, word).view(dt)
        out[ply_name] = values.astype(dt)
    comments = ["comment lidar_fmu point cloud: sensor frame (x forward, y left, z up), metres"]
    assert points.dtype.names is not None  # structured (_points_array)
    if "object_id" in points.dtype.names:
        comments.append("comment object_id = uint32(object_id_high) << 32 | uint32(object_id_low)")
    name = getattr(cloud, "sensor_name", "")
    if name:
        comments.append(f"comment sensor {name}")
    comments += [f"comment {line}" for line in frame_stamp_lines(cloud)]
    header = "\n".join(
        ["ply", "format binary_little_endian 1.0", *comments, f"element vertex {len(out)}"]
        + [f"property {ply_type} {ply_name}" for _, ply_name, _, ply_type, _ in layout]
        + ["end_header", ""]
    )
    with open(path, "wb") as f:
        f.write(header.encode("ascii"))
        f.write(memoryview(out.view(np.uint8)))  # type: ignore[arg-type]  # numpy types arrays as buffers from Python 3.12
