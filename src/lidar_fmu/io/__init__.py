"""Point-cloud files (PCD, PLY, PTX, LAS/LAZ), preview images and Rerun recordings of scans.

    write_point_cloud("scan.pcd", cloud)     # format from the extension
    write_preview("scan.png", cloud)         # bird's-eye view + range image

All coordinates are in the sensor frame (x forward, y left, z up), metres
(LAS can write the world frame, ``write_las(..., frame="world")``).
"""
from __future__ import annotations

import os
from collections.abc import Callable

from ._common import PointCloudFileError
from .las import write_las
from .pcd import OSI_FIELDS, read_pcd, write_pcd
from .ply import write_ply
from .preview import bev_image, write_preview
from .ptx import read_ptx, write_ptx
from .rerun import RerunRecording

__all__ = [
    "write_point_cloud", "write_pcd", "read_pcd", "write_ply", "write_ptx", "read_ptx", "write_las",
    "write_preview", "bev_image", "WRITERS", "OSI_FIELDS", "PointCloudFileError", "RerunRecording",
]

#: extension (lower case, with the dot) → writer(path, cloud, **options)
WRITERS: dict[str, Callable[..., None]] = {".pcd": write_pcd, ".ply": write_ply, ".ptx": write_ptx, ".las": write_las, ".laz": write_las}


def write_point_cloud(path, cloud, **options) -> None:
    """Write ``cloud`` in the format its extension names: .pcd, .ply, .ptx, .las or .laz.

    ``options`` go to that format's writer, e.g. ``compression="binary_compressed"``
    and ``fields=`` for PCD (:func:`write_pcd`), ``frame="world"`` for LAS/LAZ (:func:`write_las`).
    """
    ext = os.path.splitext(os.fspath(path))[1].lower()
    writer = WRITERS.get(ext)
    if writer is None:
        raise PointCloudFileError(f"unknown point-cloud file extension {ext or '(none)'!r} in {os.fspath(path)}; "
                                  f"supported: {', '.join(sorted(WRITERS))}")
    writer(path, cloud, **options)
