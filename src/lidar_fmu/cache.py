"""The per-user cache folder of lidar-fmu (BVHs, the demo street, FMUs built from an installed package, …).

Standard library only and no relative imports: the FMU slave (``fmu/LidarSensor.py``)
loads this file straight from the FMU's ``resources/lidar_fmu/`` before the
package itself may be imported.
"""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """``$LIDAR_FMU_CACHE``, else ``$XDG_CACHE_HOME/lidar-fmu``, else ``~/.cache/lidar-fmu``; then ``parts``.

    Nothing is created: callers make the folders they write to.
    """
    root = os.environ.get("LIDAR_FMU_CACHE")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        # the XDG spec: an empty or relative $XDG_CACHE_HOME is ignored
        base = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "lidar-fmu")
    return Path(root, *parts)
