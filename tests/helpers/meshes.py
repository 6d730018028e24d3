"""Meshes for tests."""
import numpy as np
import trimesh

from lidar_fmu.geometry.scene import Mesh


def to_mesh(tm: trimesh.Trimesh, material: str = "default", name: str = "mesh") -> Mesh:
    """A trimesh as a ``Mesh`` of one material."""
    return Mesh(tm.vertices, tm.faces, np.zeros(len(tm.faces), np.int32), (material,), name)
