"""Integer codes that compiled kernels test instead of names: one table, imported by every caster and physics pass.

Numba (CPU and CUDA) treats module-level integers as compile-time constants,
so ``kind == TRANSPARENT`` costs what ``kind == 1`` costs while saying what it
means. The tuples fix the order; the names are what specs and data files use.
This module imports nothing, so anything may import it.
"""
from __future__ import annotations

#: infrared material classes (``class:`` in the material database), in code order
MATERIAL_CLASSES = ("general", "transparent", "absorbent", "retroreflective", "mirror")
GENERAL, TRANSPARENT, ABSORBENT, RETROREFLECTIVE, MIRROR = range(len(MATERIAL_CLASSES))

#: what a ray does after a surface (:func:`lidar_fmu.physics.segment_after`): ends there, goes on straight
#: behind it (transparent), or reflects off it (mirror)
STOP, PASS, REFLECT = range(3)

#: range–reflectivity fits (``range_reflectivity.fit`` in a sensor spec), in code order
RANGE_LIMIT_FITS = ("linear", "root2", "root3", "root4", "log", "blensor", "constant")
FIT_LINEAR, FIT_ROOT2, FIT_ROOT3, FIT_ROOT4, FIT_LOG, FIT_BLENSOR, FIT_CONSTANT = range(len(RANGE_LIMIT_FITS))

__all__ = [
    "ABSORBENT", "FIT_BLENSOR", "FIT_CONSTANT", "FIT_LINEAR", "FIT_LOG", "FIT_ROOT2", "FIT_ROOT3", "FIT_ROOT4",
    "GENERAL", "MATERIAL_CLASSES", "MIRROR", "PASS", "RANGE_LIMIT_FITS", "REFLECT", "RETROREFLECTIVE", "STOP",
    "TRANSPARENT",
]
