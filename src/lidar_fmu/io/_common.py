"""What the point-cloud writers and readers share."""
from __future__ import annotations

import numpy as np

from ..errors import LidarFmuError


class PointCloudFileError(LidarFmuError, ValueError):
    """A point-cloud file that cannot be read, or options a writer cannot honour (names the file where known)."""


def uint64_word(values: np.ndarray, word: int) -> np.ndarray:
    """(N,) uint32: word ``word`` (0: low, 1: high) of 64-bit integers, for formats without 64-bit fields
    (``object_id`` as ``_low``/``_high`` pairs in PLY and PointCloud2)."""
    return ((values.view(np.uint64) >> np.uint64(32 * word)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


__all__ = ["PointCloudFileError", "uint64_word"]
