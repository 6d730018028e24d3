"""``lidar-fmu bench --scaling``: how a frame's cost grows with the scene, the rays, the lidars and the objects.

Sweeps with the OS1-128×1024 pattern (131,072 rays) unless they vary it, each point the median of ``repeat``
frames: triangles of one mesh (a UV sphere around the sensor) and of a tiled city (one building instanced on a
grid), Open3D's ``RaycastingScene`` on the same rays beside ours where it can hold the scene; rays (VLP-16 →
OS1-128×2048 in the city); lidars on one scene (1 → 8 OS1-128 in one model step on a road); moving instances
(1 → 10,000 boxes, each moved every frame); stationary objects (1 → 200,000 boxes in the SensorView, the model's
later step). :func:`growth_exponent` fits cost ∝ sizeᵏ on log-log axes: k ≈ 0 is a cost that does not grow
(a BVH's log), k ≈ 1 one that grows with the size. The figures: docs/benchmarks.md, "Cost against scene size, rays,
lidars and objects".
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
#: (label, spec) of the rays sweep: 14,400 → 262,144 rays
RAY_SENSORS = (("VLP-16", "velodyne_vlp16"), ("VLP-32C", "velodyne_vlp32c"), ("OS1-128×1024", "ouster_os1_128"),
               ("OS1-128×2048", {"preset": "ouster_os1_128", "horizontal_samples": 2048}))
LIDAR_STEPS = (1, 2, 4, 8)
STATIONARY_STEPS = (1, 100, 10_000, 200_000)
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


def rays_case(label: str, spec, scene: Scene, repeat: int) -> dict:
    """Median cast ms of one frame of ``spec`` in ``scene`` (the city), the sensor in a street."""
    lidar = Lidar(scene, spec)
    pose = pose_matrix((0.0, 0.0, 1.9))
    return dict(sensor=label, rays=len(lidar.sensor.pattern), cast_ms=median_ms(lambda: lidar.cast(pose), repeat))


def lidars_case(count: int, repeat: int, road: bytes) -> dict:
    """The model's later step (decode, scene, cast, physics, encode) with ``count`` OS1-128 on the host's roof, on
    ``road`` (a SensorView); the median of ``repeat`` steps."""
    from .replay import model_of

    yaws = np.linspace(0.0, 360.0, count, endpoint=False)
    rig = {"sensors": [{"preset": PRESET, "mounting": {"xyz_m": [0.0, 0.0, 1.9], "rpy_deg": [0.0, 0.0, float(yaw)]}}
                       for yaw in yaws]}
    return dict(lidars=count, step_ms=_later_step_ms(model_of({"sensor": rig}), [road], repeat))


def stationary_case(count: int, repeat: int) -> dict:
    """The model's later step with ``count`` unchanged stationary boxes in the view (:func:`stationary_view`)."""
    from .bench import stationary_view
    from .replay import model_of

    return dict(objects=count, step_ms=_later_step_ms(model_of({"sensor": PRESET}), [stationary_view(count)], repeat))


def _later_step_ms(model, views: list[bytes], repeat: int) -> float:
    """Median ms of ``repeat`` steps of ``model`` after its first (which builds), cycling through ``views``."""
    model.step(views[0], 0.0)
    times = []
    for k in range(1, repeat + 1):
        t0 = time.perf_counter()
        result = model.step(views[k % len(views)], 0.1 * k)
        times.append(time.perf_counter() - t0)
        if not result.valid:
            raise RuntimeError(f"bench --scaling: step {k} is invalid: {result.message}")
    return float(np.median(times) * 1e3)


def growth_exponent(rows, x: str, y: str) -> float:
    """k of ``y`` ∝ ``x``ᵏ, a least-squares line on log-log axes through the rows (NaN with fewer than two)."""
    points = [(r[x], r[y]) for r in rows if r[x] and r[y]]
    if len(points) < 2:
        return float("nan")
    xs, ys = np.log(np.array(points, float)).T
    return float(np.polyfit(xs, ys, 1)[0])


def run_scaling(repeat: int = 7, max_triangles: int = TRIANGLE_STEPS[-1], max_instances: int = INSTANCE_STEPS[-1],
                output: str | None = "bench", max_stationary: int = STATIONARY_STEPS[-1],
                max_lidars: int = LIDAR_STEPS[-1]) -> dict:
    """All the sweeps; prints the tables and writes ``output``/scaling.png (None: no figure)."""
    from .bench import long_road_view

    mesh_rows, city_rows = [], []
    for triangles in [t for t in TRIANGLE_STEPS if t <= max_triangles]:
        scene = Scene()
        scene.add_instance(1, sphere_mesh(triangles))
        mesh_rows.append(cast_case("one mesh", scene, pose_matrix((1.0, 2.0, 0.5)), repeat, True))
        del scene
        city_rows.append(cast_case("tiled city", city_scene(triangles), pose_matrix((0.0, 0.0, 1.9)), repeat, True))
    city = city_scene(min(1_000_000, max_triangles))
    ray_rows = [rays_case(label, spec, city, repeat) for label, spec in RAY_SENSORS]
    del city
    moving_rows = [moving_case(n, repeat) for n in INSTANCE_STEPS if n <= max_instances]
    road = long_road_view(300.0)
    lidar_rows = [lidars_case(n, repeat, road) for n in LIDAR_STEPS if n <= max_lidars]
    stationary_rows = [stationary_case(n, repeat) for n in STATIONARY_STEPS if n <= max_stationary]
    result = dict(mesh=mesh_rows, city=city_rows, rays=ray_rows, moving=moving_rows, lidars=lidar_rows,
                  stationary=stationary_rows)
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
    print_markdown(["rays (the city, 1 M triangles)", "rays", "cast ms"],
                   [[r["sensor"], f"{r['rays']:,}", f"{r['cast_ms']:.2f}"] for r in result["rays"]])
    print_markdown(["lidars (OS1-128, one model step on a 300 m road)", "step ms", "× one"],
                   [[str(r["lidars"]), f"{r['step_ms']:.2f}", f"{r['step_ms'] / result['lidars'][0]['step_ms']:.2f}×"]
                    for r in result["lidars"]])
    print_markdown([f"stationary objects (model step, {PRESET})", "later step ms"],
                   [[f"{r['objects']:,}", f"{r['step_ms']:.2f}"] for r in result["stationary"]])
    print_markdown(["cost against", "from → to", "growth exponent k (cost ∝ sizeᵏ, log-log fit)"],
                   [[name, f"{rows[0][x]:,} → {rows[-1][x]:,}" if rows else "–", f"{growth_exponent(rows, x, y):.2f}"]
                    for name, rows, x, y in exponent_rows(result)])


def exponent_rows(result: dict) -> list[tuple[str, list, str, str]]:
    """(what, its rows, the size key, the cost key) of every sweep, for the exponents' table."""
    return [("triangles, one mesh (cast)", result["mesh"], "triangles", "cast_ms"),
            ("triangles, tiled city (cast)", result["city"], "triangles", "cast_ms"),
            ("rays (cast)", result["rays"], "rays", "cast_ms"),
            ("lidars (model step)", result["lidars"], "lidars", "step_ms"),
            ("moving instances (update + cast)", result["moving"], "instances", "moving_ms"),
            ("stationary objects (model step)", result["stationary"], "objects", "step_ms")]


def _log_axes(axes, xlabel: str, ylabel: str, title: str, log_y: bool = False) -> None:
    """Log x (and, with ``log_y``, log y: a growth exponent is then the line's slope) axes, labelled."""
    axes.set_xscale("log")
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    if log_y:
        axes.set_yscale("log")
    else:
        axes.set_ylim(bottom=0)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    axes.set_title(title)


def plot_scaling(result: dict, path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ((left, right), (low_left, low_right)) = plt.subplots(2, 2, figsize=(11, 8.4))
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
    rows = result["rays"]
    low_left.plot([r["rays"] for r in rows], [r["cast_ms"] for r in rows], "o-",
                  label=f"cast, the city (1 M triangles), k = {growth_exponent(rows, 'rays', 'cast_ms'):.2f}")
    for r in rows:
        low_left.annotate(r["sensor"], (r["rays"], r["cast_ms"]), fontsize=7, textcoords="offset points",
                          xytext=(4, -10))
    _log_axes(low_left, "rays per frame", "cast ms", "cost against rays (log-log)", log_y=True)
    for name, x, label in (("lidars", "lidars", "OS1-128 lidars on one scene (model step)"),
                           ("stationary", "objects", "unchanged stationary objects (model step)")):
        rows = result[name]
        low_right.plot([r[x] for r in rows], [r["step_ms"] for r in rows], "o-",
                       label=f"{label}, k = {growth_exponent(rows, x, 'step_ms'):.2f}")
    _log_axes(low_right, "lidars; stationary objects", "ms per later step", "cost against lidars and static objects "
              "(log-log)", log_y=True)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["building_mesh", "city_scene", "growth_exponent", "growth_per_decade", "run_scaling", "sphere_mesh"]
