"""Ground truth beside the measurement: what each return's ray met, before the unit's errors.

As BlenSor writes the clean distance and position beside the noisy ones (Gschwandtner et al., ISVC 2011, §3.6),
a :class:`~lidar_fmu.pointcloud.PointCloud` asked for it (``Lidar.scan(..., ground_truth=True)``, ``lidar-fmu scan
--ground-truth``, a scenario's ``ground_truth: true``) carries :data:`GROUND_TRUTH_DTYPE` beside its points
(``cloud.ground_truth``, one row per point: ``x_true y_true z_true range_true``, ``material_id``,
``incidence_angle_rad``), taken from its ray's return after glass and mirrors, before weather, detection draws,
noise and ToF folding; the file writers append these fields (:meth:`~lidar_fmu.pointcloud.PointCloud.records`).
Off by default. OSI has no field for any of this, so the FMU publishes none (``lidar-fmu replay`` runs the model
in-process beside the FMU for it). The fields and their meaning: docs/physics.md, "Ground truth".
"""
from __future__ import annotations

import numpy as np

GROUND_TRUTH_DTYPE = np.dtype([
    ("x_true", "<f4"), ("y_true", "<f4"), ("z_true", "<f4"),  # m, sensor frame, noise-free
    ("range_true", "<f4"),  # m along the beam (the whole path behind mirrors) as ``range`` reads it, noise-free
    ("material_id", "<u2"),  # IR material met (database position); NO_MATERIAL: none
    ("incidence_angle_rad", "<f4"),  # between the ray and the surface normal
])
#: ``material_id`` of a return whose ray met no surface (a weather echo in clear space)
NO_MATERIAL = np.uint16(0xFFFF)


def truth_per_ray(returns, pattern) -> np.ndarray:
    """(rays,) :data:`GROUND_TRUTH_DTYPE` of every ray of ``pattern`` from its noise-free ``returns`` (taken before
    the effects pass changes them); rays without a return get NaN and :data:`NO_MATERIAL`."""
    truth = np.zeros(len(pattern), GROUND_TRUTH_DTYPE)
    for name in ("x_true", "y_true", "z_true", "range_true", "incidence_angle_rad"):
        truth[name] = np.nan
    truth["material_id"] = NO_MATERIAL
    points, rays = returns.points, np.asarray(returns.ray_index)
    row = truth[rays]
    for name in ("x", "y", "z", "range"):
        row[name + "_true"] = points[name]
    row["range_true"] += np.float32(pattern.range_offset_m)  # in the unit's convention, as ``range`` (returns_cloud)
    if returns.material_id is not None:
        row["material_id"] = returns.material_id.astype(np.uint16)
    d = pattern.directions[rays]
    cos_incidence = -(points["normal_x"] * d[:, 0] + points["normal_y"] * d[:, 1] + points["normal_z"] * d[:, 2])
    row["incidence_angle_rad"] = np.arccos(np.clip(cos_incidence, 0.0, 1.0))
    truth[rays] = row
    return truth


__all__ = ["GROUND_TRUTH_DTYPE", "NO_MATERIAL", "truth_per_ray"]
