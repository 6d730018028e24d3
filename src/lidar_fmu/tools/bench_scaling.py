"""``lidar-fmu bench --scaling``: how the cast grows with scene size and with the number of moving instances.

Three sweeps with the OS1-128×1024 pattern (131,072 rays), each point the median of ``repeat`` casts, Open3D's
``RaycastingScene`` measured in the same run on the same rays where it can hold the scene: one mesh (a UV sphere
around the sensor, 10 k → 10 M triangles), a tiled city (one building instanced on a grid, 12 k → 10 M placed
triangles) and moving instances (1 → 10,000 boxes, each moved every frame). A BVH cast costs ~log(triangles) per
ray while the scene fits the caches; :func:`print_scaling` reports the growth per decade so a reader sees where it
stays logarithmic and where it does not. The scenes and the figures: docs/benchmarks.md, "Cost against scene size
and instance count".
"""
from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from ..geometry.scene import Mesh, Scene, box_mesh
from ..geometry.transforms import pose_matrix
from ..scan.lidar import Lidar
from .bench import median_ms, open3d_rays, open3d_reference, print_markdown, sphere_mesh

PRESET = "ouster_os1_128"
TRIANGLE_STEPS = (10_000, 100_000, 1_000_000, 10_000_000)
INSTANCE_STEPS = (1, 10, 100, 1_000, 10_000)
BLOCK_PITCH_M = 40.0  # a 20 m building and a 20 m street


def building_mesh() -> Mesh:
    """A 20 × 20 × 30 m block subdivided to 3,072 triangles (the city's one building)."""
    import trimesh

    tm = trimesh.creation.box(extents=(20.0, 20.0, 30.0))
    for _ in range(4):  # 12 → 3,072 faces
        tm = tm.subdivide()
    tm.apply_translation((0.0, 0.0, 15.0))  # standing on z = 0
    return Mesh(tm.vertices, tm.faces, np.zeros(len(tm.faces), np.int32), ("concrete",), "building")


def city_scene(triangles: int) -> Scene:
    """A grid of building instances with ~``triangles`` placed triangles on a ground plane; a street crossing
    at the origin."""
    building = building_mesh()
    side = max(1, round(np.sqrt(triangles / building.triangle_count)))
    scene = Scene()
    extent = side * BLOCK_PITCH_M + 200.0
    scene.add_instance(0, box_mesh(extent, extent, 0.2, "asphalt", "ground"), pose_matrix((0.0, 0.0, -0.1)))
    offsets = (np.arange(side) - (side - 1) / 2.0) * BLOCK_PITCH_M
    offsets += BLOCK_PITCH_M / 2.0 if side % 2 else 0.0  # the sensor in a street, never inside a block
    for k, (x, y) in enumerate((x, y) for x in offsets for y in offsets):
        scene.add_instance(k + 1, building, pose_matrix((x, y, 0.0)))
    return scene


def cast_case(label: str, scene: Scene, sensor_pose, repeat: int, reference: bool) -> dict:
    """Median cast ms of the OS1-128 frame in ``scene``, ours and (if it can hold the scene) Open3D's."""
    t0 = time.perf_counter()
    lidar = Lidar(scene, PRESET)
    lidar.cast(sensor_pose)  # builds the BVH(s)
    build_s = time.perf_counter() - t0
    row: dict[str, Any] = dict(case=label, triangles=int(scene.triangle_count), instances=len(scene), build_s=build_s,
               cast_ms=median_ms(lambda: lidar.cast(sensor_pose), repeat), o3d_ms=None)
    if reference:
        ref = open3d_reference(scene)
        if ref is not None:
            ref, o3d = ref
            origin, directions = lidar.world_rays(sensor_pose)
            rays = open3d_rays(o3d, origin, directions)
            # each the better of two medians, ours measured before and after Open3D's, Open3D's around ours
            row["o3d_ms"] = median_ms(lambda: ref.cast_rays(rays), repeat)
            row["cast_ms"] = min(row["cast_ms"], median_ms(lambda: lidar.cast(sensor_pose), repeat))
            row["o3d_ms"] = min(row["o3d_ms"], median_ms(lambda: ref.cast_rays(rays), repeat))
    return row


def moving_case(count: int, repeat: int) -> dict:
    """``count`` boxes 5–60 m around the sensor, all moved every frame: update + cast against the cast alone."""
    rng = np.random.default_rng(count)
    scene = Scene()
    scene.add_instance(0, box_mesh(400.0, 400.0, 0.2, "asphalt", "ground"), pose_matrix((0.0, 0.0, -2.0)))
    box = box_mesh(4.5, 1.8, 1.5, "car_paint", "car")
    radius = rng.uniform(5.0, 60.0, count)
    heading = rng.uniform(-np.pi, np.pi, count)
    ids = np.arange(1, count + 1)
    poses = np.repeat(np.eye(4)[None], count, axis=0)
    poses[:, 0, 3], poses[:, 1, 3], poses[:, 2, 3] = radius * np.cos(heading), radius * np.sin(heading), -1.25
    for i, pose in zip(ids, poses):
        scene.add_instance(int(i), box, pose)
    lidar = Lidar(scene, PRESET)
    sensor_pose = np.eye(4)
    still_ms = median_ms(lambda: lidar.cast(sensor_pose), repeat)
    frame = [0]

    def moved_cast():
        frame[0] += 1
        step = poses.copy()
        step[:, 0, 3] += 0.01 * (frame[0] % 100)  # 1 cm per frame, back every 100 frames
        scene.set_poses(ids, step)
        lidar.cast(sensor_pose)

    moving_ms = median_ms(moved_cast, repeat)
    return dict(instances=count, still_ms=still_ms, moving_ms=moving_ms)


def run_scaling(repeat: int = 7, max_triangles: int = TRIANGLE_STEPS[-1], max_instances: int = INSTANCE_STEPS[-1],
                output: str | None = "bench") -> dict:
    """All three sweeps; prints the tables and writes ``output``/scaling.png (None: no figure)."""
    mesh_rows, city_rows = [], []
    for triangles in [t for t in TRIANGLE_STEPS if t <= max_triangles]:
        scene = Scene()
        scene.add_instance(1, sphere_mesh(triangles))
        mesh_rows.append(cast_case("one mesh", scene, pose_matrix((1.0, 2.0, 0.5)), repeat, True))
        del scene
        city_rows.append(cast_case("tiled city", city_scene(triangles), pose_matrix((0.0, 0.0, 1.9)), repeat, True))
    moving_rows = [moving_case(n, repeat) for n in INSTANCE_STEPS if n <= max_instances]
    result = dict(mesh=mesh_rows, city=city_rows, moving=moving_rows)
    print_scaling(result)
    if output:
        path = plot_scaling(result, os.path.join(output, "scaling.png"))
        print(f"\nwrote {path}")
    return result


def growth_per_decade(rows, x: str, y: str) -> list[float]:
    """Ratio of ``y`` between consecutive rows over the decades of ``x`` between them (per 10× more ``x``)."""
    out = []
    for a, b in zip(rows, rows[1:]):
        if a[y] and b[y]:
            decades = np.log10(b[x] / a[x])
            out.append(float((b[y] / a[y]) ** (1.0 / decades)))
    return out


def print_scaling(result: dict) -> None:
    print_markdown([f"scene ({PRESET}, 131,072 rays)", "triangles", "instances", "build s", "cast ms", "Open3D ms",
                    "Open3D / ours"],
                   [[r["case"], f"{r['triangles']:,}", f"{r['instances']:,}", f"{r['build_s']:.2f}", f"{r['cast_ms']:.2f}",
                     *([f"{r['o3d_ms']:.2f}", f"{r['o3d_ms'] / r['cast_ms']:.2f}×"] if r["o3d_ms"] else ["–", "–"])]
                    for r in result["mesh"] + result["city"]])
    for name in ("mesh", "city"):
        rows = result[name]
        print(f"{rows[0]['case'] if rows else name}: cast time × per 10× triangles: "
              + ", ".join(f"{g:.2f}" for g in growth_per_decade(rows, "triangles", "cast_ms")))
    print_markdown(["moving instances", "still cast ms", "moved + cast ms", "update ms (difference)"],
                   [[f"{r['instances']:,}", f"{r['still_ms']:.2f}", f"{r['moving_ms']:.2f}",
                     f"{r['moving_ms'] - r['still_ms']:+.2f}"] for r in result["moving"]])


def _log_axes(axes, xlabel: str, ylabel: str, title: str) -> None:
    axes.set_xscale("log")
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_ylim(bottom=0)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    axes.set_title(title)


def plot_scaling(result: dict, path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, colour in (("mesh", "tab:blue"), ("city", "tab:orange")):
        rows = result[name]
        if not rows:
            continue
        label = rows[0]["case"]
        left.plot([r["triangles"] for r in rows], [r["cast_ms"] for r in rows], "o-", color=colour,
                  label=f"{label}: lidar-fmu (embree)")
        ref = [r for r in rows if r["o3d_ms"]]
        left.plot([r["triangles"] for r in ref], [r["o3d_ms"] for r in ref], "s--", color=colour,
                  label=f"{label}: Open3D RaycastingScene")
    _log_axes(left, "triangles in the scene", "cast ms, OS1-128 frame (131,072 rays)", "cast time against scene size")
    rows = result["moving"]
    right.plot([r["instances"] for r in rows], [r["moving_ms"] for r in rows], "o-", label="all instances moved")
    right.plot([r["instances"] for r in rows], [r["still_ms"] for r in rows], "s--", label="standing still")
    _log_axes(right, "moving instances (boxes)", "ms per frame (update + cast)",
              "top-level update against instance count")
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["building_mesh", "city_scene", "growth_per_decade", "run_scaling", "sphere_mesh"]
