"""Mirror scenes shared by the mirror tests (API, CLI, FMU, CUDA): flat quads with visual material names."""
import numpy as np

from lidar_fmu import Scene
from lidar_fmu.geometry.scene import Mesh

#: visual → IR names for these scenes
MATERIALS = {"materials": {"mirror": "mirror", "wall": "lambertian_50", "glass": "glass_clear"}}
#: a small grid straight ahead: 7 × 7 rays over ±3°
SENSOR = {"horizontal_fov_deg": [-3, 3], "horizontal_resolution_deg": 1.0, "vertical_fov_deg": [-3, 3],
          "channels": 7, "max_range_m": 60.0, "motion_distortion": False}
#: the built-in mirror's specular reflectance (data/ir_materials.yaml)
MIRROR_REFLECTANCE = 0.90
_SQRT_HALF = np.sqrt(0.5)


def quad(centre, u, v, material, name):
    """A two-triangle square ``centre ± u ± v`` (m) of one visual material."""
    c, u, v = (np.asarray(a, np.float64) for a in (centre, u, v))
    vertices = np.array([c - u - v, c + u - v, c + u + v, c - u + v])
    return Mesh(vertices, np.array([[0, 1, 2], [0, 2, 3]]), np.zeros(2, np.int32), (material,), name)


def mirror_45(centre, half_m=1.5):
    """A mirror at 45° about z through ``centre``: rays along +x leave along +y, rays along +y leave along +x."""
    return quad(centre, np.array([_SQRT_HALF, _SQRT_HALF, 0.0]) * half_m, [0, 0, half_m], "mirror", "mirror")


def side_mirror_scene():
    """The issue's check: a 45° mirror 10 m ahead (instance 7) and a wall 10 m to its side, y = 10 (instance 8)."""
    scene = Scene()
    scene.add_instance(7, mirror_45((10, 0, 0)), np.eye(4))
    scene.add_instance(8, quad((15, 10, 0), [15, 0, 0], [0, 0, 5], "wall", "wall"), np.eye(4))
    return scene


def periscope_scene(glass=False):
    """Two parallel 45° mirrors (x = 10, y = 0 and y = 6) and a wall at x = 20 facing back: a path of 10 + 6 + 10 m
    after two bounces; with ``glass``, a pane at x = 5 in front of the first mirror."""
    scene = Scene()
    scene.add_instance(7, mirror_45((10, 0, 0)), np.eye(4))
    scene.add_instance(9, mirror_45((10, 6, 0)), np.eye(4))
    scene.add_instance(8, quad((20, 6, 0), [0, 3, 0], [0, 0, 5], "wall", "wall"), np.eye(4))
    if glass:
        scene.add_instance(11, quad((5, 0, 0), [0, 2, 0], [0, 0, 2], "glass", "glass"), np.eye(4))
    return scene


def ghost_range_side_mirror(directions):
    """Path length of each unit ray from the origin off the side scene's mirror to the wall's plane y = 10 (m)."""
    d = np.asarray(directions, np.float64)
    n = np.array([_SQRT_HALF, -_SQRT_HALF, 0.0])  # the mirror's normal; its plane passes (10, 0, 0)
    t1 = (n @ [10.0, 0.0, 0.0]) / (d @ n)
    hit = d * t1[:, None]
    reflected = d - 2.0 * (d @ n)[:, None] * n
    return t1 + (10.0 - hit[:, 1]) / reflected[:, 1], reflected


def write_obj(folder, scene, name="world"):
    """The scene's meshes, posed, as one OBJ with an MTL naming each part's visual material → the OBJ path."""
    lines, offset = [f"mtllib {name}.mtl"], 1
    materials = set()
    for instance_id in scene.instance_ids:
        mesh = scene.mesh_of(int(instance_id))
        pose = scene.pose_of(int(instance_id))
        vertices = mesh.vertices @ pose[:3, :3].T + pose[:3, 3]
        lines += [f"v {x:.6f} {y:.6f} {z:.6f}" for x, y, z in vertices]
        material = mesh.material_names[0]
        materials.add(material)
        lines.append(f"usemtl {material}")
        lines += [f"f {a + offset} {b + offset} {c + offset}" for a, b, c in mesh.faces]
        offset += len(vertices)
    (folder / f"{name}.mtl").write_text("".join(f"newmtl {m}\nKd 0.5 0.5 0.5\n" for m in sorted(materials)))
    path = folder / f"{name}.obj"
    path.write_text("\n".join(lines) + "\n")
    return path
