"""Point-cloud files (PCD, PLY, PTX) and preview images of scans.

    write_point_cloud("scan.pcd", cloud)     # format from the extension
    write_preview("scan.png", cloud)         # bird's-eye view + range image

All coordinates are in the sensor frame (x forward, y left, z up), metres.
"""
from __future__ import annotations

import os

from .pcd import read_pcd, write_pcd
from .ply import write_ply
from .preview import bev_image, write_preview
from .ptx import read_ptx, write_ptx

__all__ = [
    "write_point_cloud", "write_pcd", "read_pcd", "write_ply", "write_ptx", "read_ptx",
    "write_preview", "bev_image", "WRITERS",
]

#: extension (lower case, with the dot) → writer(path, cloud)
WRITERS = {".pcd": write_pcd, ".ply": write_ply, ".ptx": write_ptx}


def write_point_cloud(path, cloud) -> None:
    """Write ``cloud`` in the format its extension names: .pcd (binary PCD v0.7), .ply (binary PLY) or .ptx."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    writer = WRITERS.get(ext)
    if writer is None:
        raise ValueError(f"unknown point-cloud file extension {ext or '(none)'!r} in {os.fspath(path)}; "
                         f"supported: {', '.join(sorted(WRITERS))}")
    writer(path, cloud)
