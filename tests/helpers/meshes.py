"""Meshes for tests."""
import numpy as np
import trimesh

from lidar_fmu.geometry.scene import Mesh


def to_mesh(tm: trimesh.Trimesh, material: str = "default", name: str = "mesh") -> Mesh:
    """A trimesh as a ``Mesh`` of one material."""
    return Mesh(tm.vertices, tm.faces, np.zeros(len(tm.faces), np.int32), (material,), name)


def ground_of_cells(size_m: float, cell_m: float = 1.0) -> Mesh:
    """A flat ground at z = 0, ``size_m`` square about the origin, of ``cell_m`` cells cut into two triangles each:
    every cell edge is shared by two triangles (the surface a watertight caster must not leak through)."""
    n = int(round(size_m / cell_m))
    xs = np.linspace(-size_m / 2, size_m / 2, n + 1)
    x, y = np.meshgrid(xs, xs, indexing="ij")
    vertices = np.c_[x.ravel(), y.ravel(), np.zeros(x.size)]
    corner = np.arange((n + 1) ** 2).reshape(n + 1, n + 1)
    a, b, c, d = corner[:-1, :-1].ravel(), corner[1:, :-1].ravel(), corner[1:, 1:].ravel(), corner[:-1, 1:].ravel()
    faces = np.r_[np.c_[a, b, c], np.c_[a, c, d]]
    return Mesh(vertices, faces, np.zeros(len(faces), np.int32), ("asphalt",), "ground")


def landing_on_ground(origin: np.ndarray, directions: np.ndarray, half_m: float, edge_m: float = 1e-3):
    """(rays that must hit, rays that must miss) of rays from ``origin`` onto :func:`ground_of_cells` of half-size
    ``half_m``: where each meets the plane z = 0, rays within ``edge_m`` of the outer border in neither."""
    down = directions[:, 2] < 0
    t = -origin[2] / np.where(down, directions[:, 2], -1.0)  # rays not going down: placed later, as outside
    reach = np.abs(origin[:2] + t[:, None] * directions[:, :2])
    inside = down & (reach < half_m - edge_m).all(axis=1)
    outside = ~down | (reach > half_m + edge_m).any(axis=1)
    return inside, outside
