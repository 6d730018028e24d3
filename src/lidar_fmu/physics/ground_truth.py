"""Ground truth beside the measurement: what each return's ray met, before the unit's errors.

BlenSor writes 12 fields per measurement, among them the clean distance and
clean x, y, z beside the noisy ones and the id of the object hit
(Gschwandtner et al., ISVC 2011, §3.6), so algorithms can be scored against
the truth. Asked for (``Lidar.scan(..., ground_truth=True)``, ``lidar-fmu
scan --ground-truth``, a scenario's ``ground_truth: true``), a
:class:`~lidar_fmu.pointcloud.PointCloud` carries :data:`GROUND_TRUTH_DTYPE`
beside its points (``cloud.ground_truth``, one row per point), and the file
writers append these fields (:meth:`~lidar_fmu.pointcloud.PointCloud.records`).
Off by default: a record stays 46 bytes.

Per point, from its ray's return as the geometry and the materials gave it
(after glass and mirrors, before weather, detection draws, noise and ToF
folding):

* ``x_true y_true z_true range_true``: the noise-free, unfolded return of the
  ray's centre (m, sensor frame; ``range_true`` in the unit's own range
  convention, as ``range``). A mirror's ghost is its truth too: the light
  did travel that path; ``object_id`` names the surface it met;
* ``material_id``: the IR material it met (its position in the sensor's
  :class:`~lidar_fmu.physics.materials.MaterialDatabase`, e.g. ``load_database(905).names``);
* ``incidence_angle_rad``: between the ray and the surface normal (for a ghost,
  the last segment's, at the surface it met).

A weather echo on a ray that met nothing has NaN positions and
:data:`NO_MATERIAL`. OSI's ``LidarDetection`` has no field for any of this
(the nearest, ``SensorData.sensor_view[].lidar_sensor_view[].reflection``, is
the host's ray-tracing *input* to a sensor model, without material or angle),
so through the FMU ground truth is not published: it is for the API and for
files (``lidar-fmu replay`` runs the model in-process beside the FMU for it).
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
