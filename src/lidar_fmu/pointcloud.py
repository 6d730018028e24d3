"""The point-cloud record: one row per lidar return, in the sensor frame.

``PointCloud.points`` is a packed numpy structured array whose layout is the
binary PCD record, so writing a file is a header plus one ``tobytes()``.
Hits become points in one compiled pass (no chain of numpy temporaries).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

#: object_id reported for returns from the static environment (OSI: no object).
NO_OBJECT_ID = np.uint64(2**64 - 1)
#: Scene instance ids at or above this are environment geometry, not OSI objects.
ENVIRONMENT_ID_BASE = 2**62

POINT_DTYPE = np.dtype(
    [
        ("x", "<f4"), ("y", "<f4"), ("z", "<f4"),  # m, sensor frame
        ("range", "<f4"),  # m along the beam
        ("reflectivity", "<f4"),  # 0–1, Lambertian-equivalent
        ("normal_x", "<f4"), ("normal_y", "<f4"), ("normal_z", "<f4"),  # unit, sensor frame, facing the sensor
        ("beam_id", "<u4"),  # emitter (laser) index
        ("object_id", "<u8"),  # instance id hit; NO_OBJECT_ID for the environment
    ]
)

#: Albedo used until materials give one: a grey Lambertian surface.
PLACEHOLDER_ALBEDO = 0.5


@dataclass
class PointCloud:
    """Returns of one scan.

    ``points`` (M,) POINT_DTYPE; ``ray_index`` (M,) int32 the pattern ray each
    return came from (its column and firing time are in the sensor's
    pattern); ``rows``/``columns`` the pattern's organized grid shape.
    """

    points: np.ndarray
    ray_index: np.ndarray
    rows: int
    columns: int
    timestamp_s: float = 0.0
    sensor_pose: np.ndarray = field(default_factory=lambda: np.eye(4))  # world_from_sensor
    sensor_name: str = ""

    def __len__(self) -> int:
        return len(self.points)

    @property
    def xyz(self) -> np.ndarray:
        """(M, 3) float32 copy of the positions (m, sensor frame)."""
        return np.stack([self.points["x"], self.points["y"], self.points["z"]], axis=1)


@njit(cache=True, nogil=True)
def _fill_points(
    range_m, normal_world, instance_id, directions, beam_id, sensor_from_world,
    min_range_m, env_base, no_object, albedo,
    x, y, z, rng, refl, nx, ny, nz, beam, obj, ray_index,
):
    n = range_m.shape[0]
    count = 0
    R = sensor_from_world
    for i in range(n):
        r = range_m[i]
        if not (r >= min_range_m and r < np.inf):
            continue
        dx, dy, dz = directions[i, 0], directions[i, 1], directions[i, 2]
        wx, wy, wz = normal_world[i, 0], normal_world[i, 1], normal_world[i, 2]
        sx = R[0, 0] * wx + R[0, 1] * wy + R[0, 2] * wz
        sy = R[1, 0] * wx + R[1, 1] * wy + R[1, 2] * wz
        sz = R[2, 0] * wx + R[2, 1] * wy + R[2, 2] * wz
        x[count] = r * dx
        y[count] = r * dy
        z[count] = r * dz
        rng[count] = r
        # the normal faces the ray, so −n·d = cos(incidence) ≥ 0
        refl[count] = albedo * max(-(sx * dx + sy * dy + sz * dz), 0.0)
        nx[count] = sx
        ny[count] = sy
        nz[count] = sz
        beam[count] = beam_id[i]
        iid = instance_id[i]
        obj[count] = no_object if iid >= env_base else np.uint64(iid)
        ray_index[count] = i
        count += 1
    return count


@njit(cache=True, nogil=True)
def _count_returns(range_m, min_range_m):
    count = 0
    for i in range(range_m.shape[0]):
        if range_m[i] >= min_range_m and range_m[i] < np.inf:
            count += 1
    return count


def hits_to_points(hits, pattern, sensor_pose, min_range_m: float = 0.0, **meta) -> PointCloud:
    """Hits of ``pattern`` cast from ``sensor_pose`` (world_from_sensor) → :class:`PointCloud`.

    Misses and returns closer than ``min_range_m`` are dropped. ``reflectivity``
    is a placeholder until materials exist: a grey Lambertian surface,
    ``PLACEHOLDER_ALBEDO · cos(incidence)``.
    """
    m = _count_returns(hits.range_m, np.float32(min_range_m))
    points = np.empty(m, POINT_DTYPE)
    ray_index = np.empty(m, np.int32)
    sensor_from_world = np.ascontiguousarray(np.asarray(sensor_pose, np.float64)[:3, :3].T)
    _fill_points(
        hits.range_m, hits.normal, hits.instance_id, pattern.directions, pattern.beam_id, sensor_from_world,
        np.float32(min_range_m), np.int64(ENVIRONMENT_ID_BASE), NO_OBJECT_ID, np.float32(PLACEHOLDER_ALBEDO),
        *(points[name] for name in POINT_DTYPE.names), ray_index,
    )
    return PointCloud(points, ray_index, pattern.rows, pattern.columns, sensor_pose=np.asarray(sensor_pose), **meta)
