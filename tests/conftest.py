import numpy as np
import pytest
import trimesh

from lidar_fmu.scene import Mesh


def to_mesh(tm: trimesh.Trimesh, material: str = "default", name: str = "mesh") -> Mesh:
    return Mesh(tm.vertices, tm.faces, np.zeros(len(tm.faces), np.int32), (material,), name)


@pytest.fixture
def plane_mesh():
    """A 200 m × 200 m wall in the plane x = 10 m, facing the origin."""
    tm = trimesh.Trimesh(
        vertices=[[10, -100, -100], [10, 100, -100], [10, 100, 100], [10, -100, 100]],
        faces=[[0, 1, 2], [0, 2, 3]],
        process=False,
    )
    return to_mesh(tm, "wall", "plane")
