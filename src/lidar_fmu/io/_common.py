"""What the point-cloud writers and readers share."""
from __future__ import annotations

from ..errors import LidarFmuError


class PointCloudFileError(LidarFmuError, ValueError):
    """A point-cloud file that cannot be read, or options a writer cannot honour (names the file where known)."""


__all__ = ["PointCloudFileError"]
