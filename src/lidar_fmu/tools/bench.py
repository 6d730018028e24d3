"""``lidar-fmu bench``: per-stage times and rays/s, with Open3D as the in-run reference.

Speed goals are checked by reading these figures, never by timed asserts.
Each case casts the same rays through our backend (``Backend.cast_batch`` on a prepared
``RayBatch``) and through Open3D's
``RaycastingScene`` (its own Embree, automatic threads) in the same process,
alternating, and reports medians, so the ratio is robust to a noisy machine.
"""
from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from ..cache import cache_dir
from ..errors import UserError
from ..geometry.scene import Mesh, Scene, merge
from ..geometry.transforms import pose_matrix
from ..scan.lidar import ADAPTIVE_STAGES, Lidar

# The stages a command needs are imported inside the functions that run it: `lidar-fmu` starts, and each
# command runs, without loading what it does not use (numba kernels, osi3, the FMU).

SENSORS = [("VLP-16", "velodyne_vlp16"), ("OS1-128×1024", "ouster_os1_128")]


def median_ms(fn, repeat: int) -> float:
    fn()  # warm-up (JIT, caches)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e3)


def sphere_mesh(triangles: int = 1_000_000) -> Mesh:
    """A closed UV sphere of ~``triangles`` faces, radius 20 m."""
    import trimesh

    count = int(np.sqrt(triangles / 4)) + 1  # a UV sphere of count×count has ≈ 4·count² faces
    tm = trimesh.creation.uv_sphere(radius=20.0, count=[count, count])
    return Mesh(tm.vertices, tm.faces, np.zeros(len(tm.faces), np.int32), ("sphere",), "sphere")


def sphere_scene(triangles: int = 1_000_000) -> tuple[Scene, np.ndarray]:
    """:func:`sphere_mesh` as the whole scene, sensor inside."""
    return Scene.from_meshes([sphere_mesh(triangles)]), pose_matrix((1.0, 2.0, 0.5))


def street_scene(work_dir: str | None) -> tuple[Scene, np.ndarray]:
    """The generated demo street with its parked cars; sensor on a car roof."""
    from .demo_scene import ensure_street, load_street_scene

    work_dir = os.path.join(work_dir or cache_dir(), "street")
    ensure_street(work_dir)
    scene, _ = load_street_scene(work_dir)
    return scene, pose_matrix((0.0, -2.0, 1.9))


def world_triangles(scene: Scene):
    """All placed triangles in world coordinates (for the reference caster)."""
    placed = []
    for mesh_index, pose in zip(scene.instance_mesh_index, scene.poses):
        mesh = scene.meshes[mesh_index]
        placed.append((mesh.vertices @ pose[:3, :3].T.astype(np.float32) + pose[:3, 3].astype(np.float32),
                       mesh.faces))
    vertices, faces = merge(placed)
    return vertices.astype(np.float32), faces.astype(np.uint32)


def open3d_reference(scene: Scene):
    try:
        import open3d as o3d
    except Exception as exc:  # not installed, or libusb missing
        print(f"(Open3D reference unavailable: {exc})")
        return None
    ref = o3d.t.geometry.RaycastingScene()
    vertices, faces = world_triangles(scene)
    ref.add_triangles(o3d.core.Tensor(vertices), o3d.core.Tensor(faces))
    return ref, o3d


def open3d_rays(o3d, origin, directions):
    """Rays as Open3D's ``cast_rays`` takes them: an (N, 6) float32 tensor of origin and direction."""
    return o3d.core.Tensor(np.hstack([np.broadcast_to(origin, directions.shape), directions]).astype(np.float32))


def bench_case(scene_name, scene, sensor_pose, backend, repeat, reference, sensors=SENSORS):
    """Cast, points, PCD pack and whole-frame times of each of ``sensors`` ((label, preset or spec) pairs)."""
    from ..io.pcd import pcd_bytes

    rows = []
    for label, preset in sensors:
        t0 = time.perf_counter()
        lidar = Lidar(scene, preset, backend=backend)
        build_s = time.perf_counter() - t0
        origin, directions = lidar.world_rays(sensor_pose)
        n = len(directions)
        # the caster on rays made beforehand, as Open3D's cast_rays is timed on its prepared tensor
        rays, through = lidar.rays(sensor_pose), lidar.return_model().continuation()
        hits = lidar.backend.cast_batch(rays, through)
        cast_ms = median_ms(lambda: lidar.backend.cast_batch(rays, through), repeat)
        points_ms = median_ms(lambda: lidar.returns(hits, sensor_pose), repeat)
        cloud = lidar.returns(hits, sensor_pose)
        pack_ms = median_ms(lambda: pcd_bytes(cloud.points), repeat)
        # the whole frame as the FMU runs it (the CUDA backend: cast, glass and physics in one kernel)
        frame_ms = median_ms(lambda: lidar.scan(sensor_pose), repeat)
        row = dict(
            scene=scene_name, sensor=label, rays=n, triangles=scene.triangle_count, build_s=build_s,
            cast_ms=cast_ms, points_ms=points_ms, pack_ms=pack_ms, frame_ms=frame_ms, returns=len(cloud),
            mrays_s=n / cast_ms / 1e3,
        )
        if reference is not None:
            ref, o3d = reference
            tensor = open3d_rays(o3d, origin, directions)
            ref_hits = ref.cast_rays(tensor)["t_hit"].numpy()
            ref_ms = median_ms(lambda: ref.cast_rays(tensor), repeat)
            # re-measure ours right after, and Open3D again after that: each the better of two medians, so both see
            # the same machine states
            cast_ms = min(cast_ms, median_ms(lambda: lidar.backend.cast_batch(rays, through), repeat))
            ref_ms = min(ref_ms, median_ms(lambda: ref.cast_rays(tensor), repeat))
            ours = np.where(hits.hit, hits.range_m, np.inf)
            theirs = np.where(ref_hits <= lidar.sensor.max_range_m, ref_hits, np.inf)
            agree = np.mean(np.isinf(ours) == np.isinf(theirs))
            row.update(cast_ms=cast_ms, mrays_s=n / cast_ms / 1e3, o3d_ms=ref_ms, o3d_mrays_s=n / ref_ms / 1e3,
                       ratio=ref_ms / cast_ms, hit_agreement=agree)
        rows.append(row)
    return rows


def bench_gpu(scene_name, scene, sensor_pose, repeat, poses: int = 10_000,
              frame_sensor="ouster_os1_128", batch_sensor="velodyne_vlp16") -> dict:
    """CUDA figures: BVH build, one frame's cast kernel, batched rays/s over ``poses`` sensor poses.

    Kernel times are taken up to a device synchronisation, without copying
    results back; the frame time with physics and copy-back is ``frame ms``
    in the main table.
    """
    from numba import cuda

    from ..raycast import RayBatch, make_backend
    from ..raycast.bvh import build_bvh, cached_bvh, instance_table
    from ..raycast.cuda import CudaBackend
    from ..sensors import load_sensor

    t0 = time.perf_counter()
    bvhs = [build_bvh(m.vertices, m.faces) for m in scene.meshes]
    build_s = time.perf_counter() - t0
    for m in scene.meshes:
        cached_bvh(m.vertices, m.faces)  # make sure it is on disk, then time the load
    t0 = time.perf_counter()
    for m in scene.meshes:
        cached_bvh(m.vertices, m.faces)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    backend = CudaBackend(scene)
    setup_s = time.perf_counter() - t0
    roots = np.zeros(len(bvhs), np.int32)
    tlas_ms = median_ms(lambda: instance_table(bvhs, roots, scene.instance_mesh_index, scene.poses), repeat)
    table = instance_table(bvhs, roots, scene.instance_mesh_index, scene.poses)
    lo, hi = table[3][0], table[4][0]  # the top level's root box: the whole scene

    def kernel_ms(pose_batch, directions):
        def run():
            backend.cast_poses(pose_batch, directions, to_host=False)
            cuda.synchronize()
        return median_ms(run, repeat)

    frame = load_sensor(frame_sensor).pattern.directions
    frame_ms = kernel_ms(sensor_pose[None], frame)
    frame_rays = RayBatch.from_pattern(load_sensor(frame_sensor).pattern, sensor_pose, np.inf)
    parity = hit_parity(backend.cast_batch(frame_rays), make_backend("embree", scene).cast_batch(frame_rays))
    # poses spread over the scene's ground plane around the given one, random headings
    rng = np.random.default_rng(0)
    batch = np.repeat(np.asarray(sensor_pose, np.float64)[None], poses, axis=0)
    batch[:, 0, 3] = 0.5 * (lo[0] + hi[0]) + 0.4 * (hi[0] - lo[0]) * rng.uniform(-1, 1, poses)
    heading = rng.uniform(-np.pi, np.pi, poses)
    batch[:, 0, 0], batch[:, 0, 1] = np.cos(heading), -np.sin(heading)
    batch[:, 1, 0], batch[:, 1, 1] = np.sin(heading), np.cos(heading)
    sweep = load_sensor(batch_sensor).pattern.directions
    batch_ms = kernel_ms(batch, sweep)
    rays = poses * len(sweep)
    return dict(scene=scene_name, triangles=scene.triangle_count, meshes=len(scene.meshes),
                instances=len(scene), build_s=build_s, load_s=load_s, setup_s=setup_s, tlas_ms=tlas_ms,
                frame_rays=len(frame), frame_kernel_ms=frame_ms, poses=poses, batch_rays=rays,
                batch_ms=batch_ms, batch_grays_s=rays / batch_ms / 1e6, **parity)


def hit_parity(hits, reference) -> dict:
    """Agreement of two backends' hits on the same rays: hit/miss, and range within 1e-4 m·(1 + r)."""
    both = hits.hit & reference.hit
    close = np.abs(hits.range_m[both] - reference.range_m[both]) <= 1e-4 * (1.0 + reference.range_m[both])
    far = np.abs(hits.range_m[both] - reference.range_m[both])[~close]
    return dict(hit_agreement=float(np.mean(hits.hit == reference.hit)), range_agreement=float(close.mean()) if both.any() else 1.0,
                range_outliers=int((~close).sum()), worst_range_m=float(far.max()) if len(far) else 0.0)


def print_markdown(header, lines) -> None:
    """One markdown table after a blank line: the ``header`` cells, then each of ``lines`` (cell strings)."""
    print("\n| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for cells in lines:
        print("| " + " | ".join(cells) + " |")


def print_gpu_table(rows) -> None:
    print_markdown(
        ["scene", "triangles", "BVH build s (cold)", "BVH load s (cached)", "backend setup s", "top level + table ms",
         "frame rays", "frame cast kernel ms", "batched poses", "batched rays", "batched ms", "G rays/s",
         "hit/miss = Embree", "range = Embree", "worst range difference m"],
        [[r["scene"], f"{r['triangles']:,}", f"{r['build_s']:.2f}", f"{r['load_s']:.3f}", f"{r['setup_s']:.2f}",
          f"{r['tlas_ms']:.3f}", f"{r['frame_rays']:,}", f"{r['frame_kernel_ms']:.3f}", f"{r['poses']:,}",
          f"{r['batch_rays']:,}", f"{r['batch_ms']:.1f}", f"{r['batch_grays_s']:.2f}",
          f"{100 * r['hit_agreement']:.4f} %", f"{100 * r['range_agreement']:.4f} %", f"{r['worst_range_m']:.2e}"]
         for r in rows])


def print_table(rows) -> None:
    print_markdown(
        ["scene", "sensor", "rays", "triangles", "cast ms", "Mrays/s", "Open3D ms", "Open3D Mrays/s",
         "ours/Open3D speed", "points ms", "frame ms", "PCD pack ms", "returns", "hit/miss agreement"],
        [[r["scene"], r["sensor"], f"{r['rays']:,}", f"{r['triangles']:,}", f"{r['cast_ms']:.2f}",
          f"{r['mrays_s']:.2f}",
          *([f"{r['o3d_ms']:.2f}", f"{r['o3d_mrays_s']:.2f}", f"{r['ratio']:.2f}×"] if "o3d_ms" in r else ["–"] * 3),
          f"{r['points_ms']:.2f}", f"{r['frame_ms']:.2f}", f"{r['pack_ms']:.2f}", f"{r['returns']:,}",
          f"{100 * r['hit_agreement']:.3f} %" if "hit_agreement" in r else "–"]
         for r in rows])


def bench_motion(scene, sensor_pose, backend, repeat, preset: str = "ouster_os1_128") -> list[dict]:
    """The cost of motion distortion on one frame: the host at 20 m/s turning at 0.2 rad/s, then every object
    (not the environment) at 10 m/s too, posed in 1 … 32 time slices; against the still frame measured alongside."""
    import dataclasses

    from ..pointcloud import ENVIRONMENT_ID_BASE
    from ..scan.motion import FrameMotion
    from ..sensors import load_sensor

    sensor = load_sensor(preset)
    period = sensor.frame_period_s
    start_pose = sensor_pose @ pose_matrix((-20.0 * period, 0.0, 0.0), (0.0, 0.0, -0.2 * period))
    objects = [int(i) for i in scene.instance_ids if i < ENVIRONMENT_ID_BASE]
    moved = {i: scene.pose_of(i) @ pose_matrix((-10.0 * period, 0.0, 0.0)) for i in objects}
    cases = [("still", None, 1), ("sensor moves", FrameMotion(0.0, period, 0.0, start_pose), 1)]
    cases += [(f"sensor and {len(objects)} objects move", FrameMotion(0.0, period, 0.0, start_pose, moved), slices)
              for slices in (1, 4, 10, 32)]
    rows, still_ms = [], None
    for label, motion, slices in cases:
        lidar = Lidar(scene, dataclasses.replace(sensor, motion_slices=slices), backend=backend)
        frame_ms = median_ms(lambda: lidar.scan(sensor_pose, motion=motion), repeat)
        still_ms = frame_ms if still_ms is None else min(still_ms, median_ms(lambda: lidar.scan(sensor_pose), repeat))
        rows.append(dict(case=label, slices=slices if motion is not None and motion.instance_start_poses else 1,
                         frame_ms=frame_ms, still_ms=still_ms))
    return rows


def bench_effects(scene, sensor_pose, backend, repeat, preset: str = "ouster_os1_128") -> list[dict]:
    """What noise, detection probability, weather and an FMCW unit's radial velocity add to one frame (the aim:
    ≤ 1 ms for noise, ≤ 3 ms for weather), against the clean frame measured alongside."""
    from ..pointcloud import ENVIRONMENT_ID_BASE
    from ..scan.velocity import SceneVelocities
    from ..sensors import resolve_spec

    # the host at 20 m/s turning at 0.2 rad/s, every object (not the environment) at 10 m/s along x turning too
    objects = [int(i) for i in scene.instance_ids if i < ENVIRONMENT_ID_BASE]
    moving = SceneVelocities(sensor_pose[:3, 3], (20.0, 0.0, 0.0), (0.0, 0.0, 0.2), objects,
                             [(10.0, 0.0, 0.0)] * len(objects), [(0.0, 0.0, 0.1)] * len(objects))
    cases: list[tuple[str, dict[str, Any]]] = [("clean", {}), ("datasheet noise", {"noise": "datasheet"}),
             ("noise (range, bias, angle, dropout) + probabilistic detection",
              {"noise": {"range_sigma_m": 0.03, "laser_bias_sigma_m": 0.01, "angle_sigma_deg": 0.05,
                         "dropout": 0.01}, "detection": "probabilistic"}),
             ("fog, visibility 200 m", {"weather": {"fog_visibility_m": 200.0}}),
             ("rain 25 mm/h", {"weather": {"rain_mm_h": 25.0}}),
             (f"FMCW radial velocity, quantized, host and {len(objects)} objects moving",
              {"radial_velocity": {"resolution_m_s": 2.0**-8}})]
    rows, clean_ms = [], None
    clean = Lidar(scene, preset, backend=backend)
    for label, extra in cases:
        lidar = Lidar(scene, resolve_spec(preset) | extra, backend=backend)
        velocities = moving if "radial_velocity" in extra else None
        frame_ms = median_ms(lambda: lidar.scan(sensor_pose, velocities=velocities), repeat)
        clean_ms = frame_ms if clean_ms is None else min(clean_ms, median_ms(lambda: clean.scan(sensor_pose), repeat))
        rows.append(dict(case=label, frame_ms=frame_ms, clean_ms=clean_ms))
    return rows


def bench_echoes(scene, sensor_pose, backend, repeat, preset: str = "ouster_os1_128") -> list[dict]:
    """What beam divergence costs one frame in dual-return mode: the preset as it is (one ray per beam), then its
    footprint as 4 and 16 sub-rays per beam cast on every beam (``divergence_sampling: full``) and only where a
    footprint may straddle an edge (``adaptive``), each timed against the preset's frame measured alongside; an
    adaptive row also gives the rays it cast and the share of full sampling's second echoes (ray and range to
    1 cm) it finds."""
    from ..sensors import resolve_spec

    plain = Lidar(scene, preset, backend=backend)
    plain_ms = median_ms(lambda: plain.scan(sensor_pose), repeat)
    rows = [dict(case="one ray per beam (divergence_samples 1)", frame_ms=plain_ms, plain_ms=plain_ms,
                 returns=len(plain.scan(sensor_pose)), second=0, rays=len(plain.sensor.pattern), found=None)]
    for samples in (4, 16):
        full_second = None
        for sampling in ("full", "adaptive"):
            lidar = Lidar(scene, resolve_spec(preset) | {"divergence_samples": samples, "returns": "dual",
                                                         "divergence_sampling": sampling}, backend=backend)
            cloud = lidar.scan(sensor_pose)
            frame_ms = median_ms(lambda: lidar.scan(sensor_pose), repeat)
            plain_ms = median_ms(lambda: plain.scan(sensor_pose), repeat)
            second = _second_echoes(cloud)
            beams = len(lidar.sensor.pattern)
            rays = beams * samples if sampling == "full" else lidar.last_rays_cast
            found: float | None = None if full_second is None else (
                len(second & full_second) / len(full_second) if full_second else 1.0)
            full_second = second if full_second is None else full_second
            rows.append(dict(case=f"dual, {samples} sub-rays per beam, {sampling}", frame_ms=frame_ms,
                             plain_ms=plain_ms, returns=len(cloud), second=len(second), rays=rays, found=found,
                             refined=lidar.last_refined if sampling == "adaptive" else None,
                             stages_ms=_adaptive_stages_ms(lidar, sensor_pose, repeat) if sampling == "adaptive"
                             else None))
    return rows


def _adaptive_stages_ms(lidar, sensor_pose, repeat) -> dict:
    """Median ms of each part of an adaptive frame (:data:`~lidar_fmu.scan.lidar.ADAPTIVE_STAGES`) and of the rest
    (effects, cloud), over ``repeat`` frames."""
    samples = []
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        lidar.scan(sensor_pose)
        frame_s = time.perf_counter() - t0
        parts = {key: lidar.last_timings.get(key, 0.0) for key in ADAPTIVE_STAGES}
        samples.append(parts | {"rest": frame_s - sum(parts.values())})
    return {key: 1e3 * float(np.median([s[key] for s in samples])) for key in samples[0]}


def _second_echoes(cloud) -> set:
    """(ray, range in cm) of the farther echo of every ray that has two: comparable across runs and orders."""
    ray = np.asarray(cloud.ray_index, np.int64)
    range_m = cloud.points["range"].astype(np.float64)
    order = np.lexsort((range_m, ray))
    ray, range_m = ray[order], range_m[order]
    later = np.r_[False, ray[1:] == ray[:-1]]
    return set(zip(ray[later].tolist(), np.round(range_m[later] * 100).astype(np.int64).tolist()))


def print_echoes_table(preset: str, rows) -> None:
    print_markdown([f"dual returns, demo street, {preset}", "frame ms", "one ray per beam ms (same run)", "×",
                    "rays cast", "returns", "second echoes", "of full sampling's found"],
                   [[r["case"], f"{r['frame_ms']:.2f}", f"{r['plain_ms']:.2f}", f"{r['frame_ms'] / r['plain_ms']:.2f}×",
                     f"{r['rays']:,}", f"{r['returns']:,}", f"{r['second']:,}",
                     "–" if r["found"] is None else f"{100 * r['found']:.1f} %"] for r in rows])
    staged = [r for r in rows if r.get("stages_ms")]
    if staged:
        keys = list(staged[0]["stages_ms"])
        print_markdown([f"adaptive sampling's parts, ms (median), {preset}", "beams refined", *keys],
                       [[r["case"], f"{r['refined']:,}", *(f"{r['stages_ms'][k]:.2f}" for k in keys)]
                        for r in staged])


def print_effects_table(preset: str, rows) -> None:
    print_markdown([f"effects, demo street, {preset}", "frame ms", "clean frame ms (same run)", "added ms"],
                   [[r["case"], f"{r['frame_ms']:.2f}", f"{r['clean_ms']:.2f}", f"{r['frame_ms'] - r['clean_ms']:+.2f}"]
                    for r in rows])


def print_motion_table(preset: str, rows) -> None:
    print_markdown([f"motion distortion, demo street, {preset}", "time slices", "frame ms", "still frame ms (same run)",
                    "× still"],
                   [[r["case"], str(r["slices"]), f"{r['frame_ms']:.2f}", f"{r['still_ms']:.2f}",
                     f"{r['frame_ms'] / r['still_ms']:.2f}×"] for r in rows])


def demo_views(work_dir: str | None, frames: int, ground_truth_only: bool = False):
    """(the demo scenario, its first ``frames`` SensorViews), generating the scenario in the cache if needed
    (``ground_truth_only``: the street from its ground truth alone, :func:`~.demo.make_demo_scenario`)."""
    import glob

    from ..osi.trace import read_trace
    from .demo import make_demo_scenario
    from .replay import load_scenario

    folder = os.path.join(work_dir or cache_dir(), "demo_scenario_gt" if ground_truth_only else "demo_scenario")
    traces = glob.glob(os.path.join(folder, "*_sv_*_demo.osi"))
    if not traces or len(list(read_trace(traces[0]))) < frames:
        make_demo_scenario(folder, frames=frames, ground_truth_only=ground_truth_only)
    scenario = load_scenario(folder)
    return scenario, list(read_trace(scenario["trace"]))[:frames]


def bench_step(work_dir: str | None, frames: int = 20, backend: str = "auto", sensor: str | None = None) -> dict:
    """doStep of the demo scenario (OS1-128×1024 on the street, or ``sensor``): stage medians in-process, and
    through the FMU."""
    from ..cosim.fmu_host import FmuInstance
    from ..cosim.fmu_package import DEFAULT_FMU, build_fmu, sources_newer_than
    from ..cosim.sensor_model import STAGES
    from .replay import fmu_parameters, model_of

    scenario, views = demo_views(work_dir, frames)
    folder = os.path.dirname(scenario["trace"])
    scenario["backend"] = backend
    scenario["sensor"] = sensor or scenario["sensor"]
    parameters = fmu_parameters(scenario, folder)
    model = model_of(parameters)  # the very model the FMU builds: its materials (glass!), mounting, options
    model.step(views[0], 0.0)  # loads meshes, builds, compiles
    stages: dict[str, list[float]] = {name: [] for name in STAGES}
    totals = []
    for k, view in enumerate(views):
        t0 = time.perf_counter()
        result = model.step(view, 0.1 * k)
        totals.append(time.perf_counter() - t0)
        for name in STAGES:
            stages[name].append(result.timings_s[name])
    if sources_newer_than(DEFAULT_FMU):
        build_fmu(DEFAULT_FMU)
    do_step_s, host_s = [], []
    with FmuInstance(DEFAULT_FMU, parameters) as fmu:
        fmu.step(views[0], 0.0, 0.1)
        for k, view in enumerate(views):
            t0 = time.perf_counter()
            fmu.set_binary("OSMPSensorViewIn", view)  # the master's side: point the input at the view …
            t1 = time.perf_counter()
            fmu.fmu.doStep(0.1 * k, 0.1)  # … the FMU's doStep (decode, scene, cast, physics, encode, FMI) …
            t2 = time.perf_counter()
            fmu.outputs()  # … and the master's copy of the SensorData it points at
            do_step_s.append(t2 - t1)
            host_s.append(time.perf_counter() - t0)
    cast_ms = float(np.median(stages["cast"]) * 1e3)
    return {
        "stages_ms": {name: float(np.median(v) * 1e3) for name, v in stages.items()},
        "model_step_ms": float(np.median(totals) * 1e3),
        "fmu_step_ms": float(np.median(do_step_s) * 1e3),
        "fmu_step_p90_ms": float(np.percentile(do_step_s, 90) * 1e3),
        "host_step_ms": float(np.median(host_s) * 1e3),
        "do_step_per_cast": float(np.median(do_step_s) * 1e3) / cast_ms,
        "returns": int(result.count),
        "frames": len(views),
    }


def bench_rig(work_dir: str | None, frames: int = 20, backend: str = "auto", lidars: int = 4,
              sensor: str | None = None) -> dict:
    """The demo scenario's doStep (in-process) with ``lidars`` copies of its lidar (or of ``sensor``) on the roof
    corners against the one lidar, views interleaved (the aim: 4 lidars ≤ 3.5× one; the scene update is shared)."""
    from ..sensors import resolve_spec
    from .replay import fmu_parameters, model_of

    scenario, views = demo_views(work_dir, frames)
    scenario["backend"] = backend
    scenario["sensor"] = sensor or scenario["sensor"]
    parameters = fmu_parameters(scenario, os.path.dirname(scenario["trace"]))
    spec = resolve_spec(scenario["sensor"])
    corners = [(1.0, 0.8, 1.9, 45), (1.0, -0.8, 1.9, -45), (-1.0, 0.8, 1.9, 135), (-1.0, -0.8, 1.9, -135)]
    rig = {"sensors": [spec | {"mounting": {"xyz_m": list(xyz), "rpy_deg": [0, 0, yaw]}}
                       for *xyz, yaw in (corners * lidars)[:lidars]]}
    # the Argoverse 2 vehicle's two VLP-32C (its converted rig.yaml: up_lidar, and down_lidar upside down)
    av2 = {"sensors": [{"preset": "velodyne_vlp32c", "mounting": {"xyz_m": list(xyz), "rpy_deg": list(rpy)}}
                       for xyz, rpy in AV2_LIDARS]}
    step_ms = interleaved_step_ms({"one": model_of(parameters), "rig": model_of(parameters, sensor=rig),
                                   "vlp32c": model_of(parameters, sensor={"sensors": av2["sensors"][:1]}),
                                   "av2": model_of(parameters, sensor=av2)}, views)
    return {"lidars": lidars, "one_ms": step_ms["one"], "rig_ms": step_ms["rig"], "ratio": step_ms["rig"] / step_ms["one"],
            "frames": len(views), "vlp32c_ms": step_ms["vlp32c"], "av2_ms": step_ms["av2"],
            "av2_ratio": step_ms["av2"] / step_ms["vlp32c"]}


#: the Argoverse 2 vehicle's lidars as ``lidar-fmu convert`` mounts them (xyz m, roll pitch yaw deg; AV2's
#: calibration/egovehicle_SE3_sensor.feather of log 7fab2350-7eaf-3b7e-a39d-6937a4c1bede)
AV2_LIDARS = (((1.35018, 0.0, 1.64042), (0.0, 0.0, -0.582697)),
              ((1.346761, 0.004567, 1.525496), (179.940306, -0.022321, -11.55565)))


def interleaved_step_ms(models: dict, views: list) -> dict[str, float]:
    """Each model's median step (ms) over ``views``, the models stepped in turn on each view so that a noisy machine
    slows all alike, each into its own pair of output buffers as the FMU's (OSMP double buffering: no fresh pages
    to fault in each step); the first step (it loads meshes and builds) is not timed."""
    from ..cosim.osmp import DoubleBuffer

    times: dict[str, list[float]] = {name: [] for name in models}
    buffers = {name: DoubleBuffer() for name in models}
    for k, view in enumerate(views):
        for name, model in models.items():
            t0 = time.perf_counter()
            result = model.step(view, 0.1 * k, out=buffers[name].next())
            buffers[name].publish(result.sensor_data)
            if k:
                times[name].append(time.perf_counter() - t0)
            if not result.valid:
                raise RuntimeError(f"bench: step {k} of the {name} model is invalid: {result.message}")
    return {name: float(np.median(v) * 1e3) for name, v in times.items()}


def bench_outputs(work_dir: str | None, frames: int = 20, backend: str = "auto", sensor: str | None = None) -> dict:
    """The demo scenario's doStep (in-process) publishing every OSI layer against the detections alone, views
    interleaved (the aim: all four ≤ 1.5× the detections; docs/fmu.md#osi-layers)."""
    from ..sensors.outputs import OUTPUT_LAYERS
    from .replay import fmu_parameters, model_of

    scenario, views = demo_views(work_dir, frames)
    scenario["backend"] = backend
    scenario["sensor"] = sensor or scenario["sensor"]
    parameters = fmu_parameters(scenario, os.path.dirname(scenario["trace"]))
    step_ms = interleaved_step_ms({"detections": model_of(parameters | {"outputs": "detections"}),
                                   "all": model_of(parameters | {"outputs": ",".join(OUTPUT_LAYERS)})}, views)
    return {"detections_ms": step_ms["detections"], "all_ms": step_ms["all"],
            "ratio": step_ms["all"] / step_ms["detections"], "frames": len(views)}


def bench_ground_truth(work_dir: str | None, frames: int = 20, backend: str = "auto",
                       road_km: float = 10.0, sensor: str | None = None) -> dict:
    """The demo street from its meshes against the same street from its OSI ground truth alone (the road, signs,
    buildings, trees and cars built by :mod:`lidar_fmu.world`):
    each model's first step and its later steps (in-process, views interleaved); and a ``road_km`` long winding
    four-lane road with trees (:func:`long_road_view`), bare (``environment: auto``) and with the urban street
    around it: the first step, which builds the road, its terrain, the trees' instances (and the street), and the
    median of ROAD_STEPS later steps."""
    from .replay import fmu_parameters, model_of

    models, views, first = {}, {}, {}
    for name, only in (("meshes", False), ("ground truth", True)):
        scenario, views[name] = demo_views(work_dir, frames, ground_truth_only=only)
        scenario["backend"] = backend
        scenario["sensor"] = sensor or scenario["sensor"]
        models[name] = model_of(fmu_parameters(scenario, os.path.dirname(scenario["trace"])))
        t0 = time.perf_counter()
        models[name].step(views[name][0], 0.0)
        first[name] = time.perf_counter() - t0
    times: dict[str, list[float]] = {name: [] for name in models}
    counts: dict[str, int] = {}
    for k in range(1, frames):
        for name, model in models.items():
            t0 = time.perf_counter()
            result = model.step(views[name][k], 0.1 * k)
            times[name].append(time.perf_counter() - t0)
            counts[name] = result.count
    road = long_road_view(road_km * 1000.0)
    roads: dict[str, dict] = {}
    road_models = {}
    for environment in ("auto", "urban"):
        model = road_models[environment] = model_of({"sensor": sensor or "ouster_os1_128", "backend": backend,
                                                     "environment": environment})
        t0 = time.perf_counter()
        result = model.step(road, 0.1)
        roads[environment] = {"first_step_s": time.perf_counter() - t0, "triangles": model.scene.triangle_count,
                              "returns": result.count}
    later: dict[str, list[float]] = {name: [] for name in road_models}
    for k in range(ROAD_STEPS):  # interleaved, so that a busy moment of the machine slows both
        for environment, model in road_models.items():
            t0 = time.perf_counter()
            model.step(road, 0.1 * (k + 2))
            later[environment].append(time.perf_counter() - t0)
    for environment, seconds in later.items():
        roads[environment]["step_ms"] = float(np.median(seconds) * 1e3)
    step_ms = {name: float(np.median(v) * 1e3) for name, v in times.items()}
    return {"step_ms": step_ms, "first_step_s": first, "returns": counts,
            "ratio": step_ms["ground truth"] / step_ms["meshes"], "frames": frames - 1, "road_km": road_km,
            "road": roads, "urban_ratio": roads["urban"]["step_ms"] / roads["auto"]["step_ms"]}


#: later steps of the long road timed after its first
ROAD_STEPS = 9


def long_road_view(length_m: float = 10_000.0, spacing_m: float = 1.0, lanes: int = 4, lane_width_m: float = 3.5,
                   tree_every_m: float = 40.0) -> bytes:
    """A SensorView of a long winding road from ground truth alone: ``lanes`` lanes between solid edges and dashed
    lines sampled every ``spacing_m`` (a 50 m swing every 1.9 km, 5 m up and down every 6.3 km), trees on both
    sides every ``tree_every_m``, the host at its start."""
    from osi3.osi_sensorview_pb2 import SensorView

    view = SensorView()
    view.host_vehicle_id.value = 1
    view.mounting_position.position.z = 1.3
    gt = view.global_ground_truth
    s = np.arange(0.0, length_m + spacing_m, spacing_m)
    x, y, z = s, 50.0 * np.sin(s / 300.0), 5.0 * np.sin(s / 1000.0)
    tangent = np.column_stack([np.ones_like(s), np.gradient(y, s)])
    tangent /= np.linalg.norm(tangent, axis=1, keepdims=True)
    normal = np.column_stack([-tangent[:, 1], tangent[:, 0]])
    for k in range(lanes + 1):
        offset = (k - lanes / 2) * lane_width_m
        line = gt.lane_boundary.add()
        line.id.value = 100 + k
        line.classification.type = (line.classification.TYPE_SOLID_LINE if k in (0, lanes)
                                    else line.classification.TYPE_DASHED_LINE)
        for px, py, pz in zip(x + offset * normal[:, 0], y + offset * normal[:, 1], z):
            point = line.boundary_line.add()
            point.position.x, point.position.y, point.position.z = px, py, pz
        line.boundary_line[0].width = 0.15
    for k in range(lanes):
        lane = gt.lane.add()
        lane.id.value = 10 + k
        lane.classification.type = lane.classification.TYPE_DRIVING
        lane.classification.right_lane_boundary_id.add().value = 100 + k
        lane.classification.left_lane_boundary_id.add().value = 101 + k
    host = gt.moving_object.add()
    host.id.value = 1
    host.type = host.TYPE_VEHICLE
    host.base.position.x, host.base.position.y, host.base.position.z = 0.0, y[0] - 0.5 * lane_width_m, z[0] + 0.75
    host.base.dimension.length, host.base.dimension.width, host.base.dimension.height = 4.5, 1.8, 1.5
    step = max(1, int(round(tree_every_m / spacing_m)))
    aside = lanes / 2 * lane_width_m + 6.0
    for j in range(0, len(s), step):
        for side in (-1.0, 1.0):
            tree = gt.stationary_object.add()
            tree.id.value = 100_000 + 2 * j + (side > 0)
            tree.classification.type = tree.classification.TYPE_TREE
            tree.base.position.x = x[j] + side * aside * normal[j, 0]
            tree.base.position.y = y[j] + side * aside * normal[j, 1]
            tree.base.position.z = z[j] + 3.5
            tree.base.dimension.length = tree.base.dimension.width = 4.0
            tree.base.dimension.height = 7.0
    return view.SerializeToString()


def busy_road_views(vehicles: int = 1000, frames: int = 6, length_m: float = 2000.0, lanes: int = 8) -> list[bytes]:
    """``frames`` SensorViews 0.1 s apart of :func:`long_road_view` (``length_m``, ``lanes``, the host at its start)
    with ``vehicles`` cars spread along it in random lanes (seeded), every car and the host driving on at 20 m/s
    along x (their OSI velocities say so): the lidar sees them move over each frame, in its motion slices."""
    from osi3.osi_sensorview_pb2 import SensorView

    road = SensorView.FromString(long_road_view(length_m, lanes=lanes))
    rng = np.random.default_rng(0)
    start_m, lane = rng.uniform(20.0, length_m - 40.0, vehicles), rng.integers(0, lanes, vehicles)
    views = []
    for k in range(frames):
        view = SensorView()
        view.CopyFrom(road)
        view.timestamp.nanos = 100_000_000 * (k % 10)
        view.timestamp.seconds = k // 10
        gt = view.global_ground_truth
        gt.moving_object[0].base.position.x += 2.0 * k
        gt.moving_object[0].base.velocity.x = 20.0
        x = start_m + 2.0 * k  # (the road's centre line: long_road_view's)
        y = 50.0 * np.sin(x / 300.0) + (lane - lanes / 2 + 0.5) * 3.5
        z = 5.0 * np.sin(x / 1000.0) + 0.75
        yaw = np.arctan(50.0 / 300.0 * np.cos(x / 300.0))
        velocity = 20.0 * np.column_stack([np.ones_like(x), np.tan(yaw), 5.0 / 1000.0 * np.cos(x / 1000.0)])
        for j in range(vehicles):
            car = gt.moving_object.add()
            car.id.value = 10 + j
            car.type = car.TYPE_VEHICLE
            car.vehicle_classification.type = car.vehicle_classification.TYPE_MEDIUM_CAR
            car.base.position.x, car.base.position.y, car.base.position.z = x[j], y[j], z[j]
            car.base.orientation.yaw = yaw[j]
            car.base.velocity.x, car.base.velocity.y, car.base.velocity.z = velocity[j]
            car.base.dimension.length, car.base.dimension.width, car.base.dimension.height = 4.5, 1.8, 1.5
        views.append(view.SerializeToString())
    return views


def bench_busy(frames: int = 6, backend: str = "auto", sensor: str | None = None, vehicles: int = 1000) -> dict:
    """The model's later step on an 8-lane 2 km road with ``vehicles`` moving cars against the same road empty,
    views interleaved (the aim: ≤ 2×): each one's stage medians too."""
    from ..cosim.sensor_model import STAGES
    from .replay import model_of

    views = {"empty": busy_road_views(0, frames), "busy": busy_road_views(vehicles, frames)}
    models = {name: model_of({"sensor": sensor or "ouster_os1_128", "backend": backend}) for name in views}
    times: dict[str, list[float]] = {name: [] for name in views}
    stages: dict[str, dict[str, list[float]]] = {name: {stage: [] for stage in STAGES} for name in views}
    for k in range(frames):
        for name, model in models.items():
            t0 = time.perf_counter()
            result = model.step(views[name][k], 0.1 * k)
            if k:  # (the first step builds the road)
                times[name].append(time.perf_counter() - t0)
                for stage in STAGES:
                    stages[name][stage].append(result.timings_s[stage])
    step_ms = {name: float(np.median(v) * 1e3) for name, v in times.items()}
    return {"vehicles": vehicles, "frames": frames - 1, "step_ms": step_ms, "ratio": step_ms["busy"] / step_ms["empty"],
            "stages_ms": {name: {stage: float(np.median(v) * 1e3) for stage, v in per.items()}
                          for name, per in stages.items()}}


def stationary_view(count: int = 200_000) -> bytes:
    """A SensorView of a host among ``count`` stationary 1 m boxes without a class, 3 m apart in rows of 500
    (ids 1000…), from x = 10 m."""
    from osi3.osi_sensorview_pb2 import SensorView

    view = SensorView()
    view.host_vehicle_id.value = 1
    gt = view.global_ground_truth
    host = gt.moving_object.add()
    host.id.value = 1
    host.base.position.z = 0.75
    host.base.dimension.length, host.base.dimension.width, host.base.dimension.height = 4.5, 1.8, 1.5
    for k in range(count):
        box = gt.stationary_object.add()
        box.id.value = 1000 + k
        box.base.position.x, box.base.position.y, box.base.position.z = 10.0 + 3.0 * (k % 500), 3.0 * (k // 500), 0.5
        box.base.dimension.length = box.base.dimension.width = box.base.dimension.height = 1.0
    return view.SerializeToString()


def bench_stationary(count: int = 200_000, frames: int = 5, sensor: str = "ouster_os1_128") -> dict:
    """What the static ground truth costs a later step, with ``count`` stationary objects that never change
    (:func:`stationary_view`; the first step places the first ``MAX_ELEMENTS`` of them): the view decoded and the
    scene brought to it alone, then the model's whole step (decode, scene, cast, physics, encode) with ``sensor``;
    the first step and the median of ``frames`` later ones."""
    from ..cosim.sensor_model import STAGES, OsiSensorModel
    from ..osi.decode import decode_sensor_view
    from ..world.scene_update import SceneUpdater

    view = stationary_view(count)
    updater = SceneUpdater(Scene())
    decode_s, scene_s = [], []
    for _ in range(frames + 1):
        t0 = time.perf_counter()
        frame = decode_sensor_view(view)
        t1 = time.perf_counter()
        updater.apply(frame)
        decode_s.append(t1 - t0)
        scene_s.append(time.perf_counter() - t1)
    decode_ms, scene_ms = (float(np.median(v[1:]) * 1e3) for v in (decode_s, scene_s))
    model = OsiSensorModel(sensor=sensor)
    model_s: list[float] = []
    stages_s: dict[str, list[float]] = {name: [] for name in STAGES}
    for k in range(frames + 1):
        t0 = time.perf_counter()
        result = model.step(view, 0.1 * k)
        model_s.append(time.perf_counter() - t0)
        for name in STAGES:
            stages_s[name].append(result.timings_s[name])
    return {"objects": count, "placed": len(updater.scene), "view_mb": len(view) / 1e6, "frames": frames,
            "first_step_s": decode_s[0] + scene_s[0], "decode_ms": decode_ms, "scene_ms": scene_ms,
            "step_ms": decode_ms + scene_ms, "sensor": sensor, "returns": int(result.count),
            "model_first_step_s": model_s[0], "model_step_ms": float(np.median(model_s[1:]) * 1e3),
            "model_stage_ms": {name: float(np.median(v[1:]) * 1e3) for name, v in stages_s.items()}}


#: what ``lidar-fmu bench --sections`` can pick (all by default; ``gpu`` only with the cuda backend)
SECTIONS = ("cast", "motion", "effects", "echoes", "gpu", "encode", "step", "rig", "ground-truth", "busy",
            "stationary", "outputs")
#: the sections ``--skip-step`` leaves out
STEP_SECTIONS = ("encode", "step", "rig", "ground-truth", "busy", "stationary", "outputs")


def chosen_sections(text: str | None, skip_step: bool) -> list[str]:
    """``--sections`` (a comma list of :data:`SECTIONS`; None: all) less :data:`STEP_SECTIONS` with ``skip_step``."""
    names = list(SECTIONS) if text is None else [t.strip() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in SECTIONS]
    if unknown or not names:
        raise UserError(f"--sections {text!r}: unknown section {', '.join(map(repr, unknown)) or '(none given)'}; "
                        f"choose from {', '.join(SECTIONS)}")
    return [n for n in SECTIONS if n in names and not (skip_step and n in STEP_SECTIONS)]


def machine_info(backend: str) -> dict:
    """What the figures were measured on: processor, cores, Python and Numba, and the GPU where cuda runs."""
    import platform

    import numba

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    info = {"machine": platform.machine(), "cpu": cpu, "cpus": os.cpu_count(), "python": platform.python_version(),
            "numba": numba.__version__, "backend": backend}
    if backend == "cuda":
        from ..raycast.cuda import device_name

        simulated = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
        info["gpu"] = "Numba's CUDA simulator" if simulated else device_name()
    return info


def run_bench(args) -> dict:
    """The tables of ``lidar-fmu bench`` (``args``: its options), printed; → every section's figures, also
    written as JSON to ``args.json`` when given."""
    import json

    from ..raycast import make_backend

    sections = chosen_sections(getattr(args, "sections", None), args.skip_step)
    # resolve 'auto' once, so a missing GPU for --backend cuda is a clear error before any work
    args.backend = make_backend(args.backend, Scene()).name
    gpu = args.backend == "cuda"
    sensor = getattr(args, "sensor", None)
    frames = getattr(args, "frames", 20)
    label = os.path.basename(sensor) if sensor else "OS1-128×1024"
    info = machine_info(args.backend)
    print(f"lidar-fmu bench: {info['machine']}, {info['cpus']} CPUs ({info['cpu']})"
          f"{', GPU ' + info['gpu'] if gpu else ''}, backend={args.backend}, median of {args.repeat}")
    results: dict[str, Any] = {"info": info, "repeat": args.repeat, "sensor": sensor, "sections": sections}
    rows, gpu_rows, motion_rows, effects_rows, echo_rows = [], [], [], [], []
    for name in [s.strip() for s in args.scenes.split(",") if s.strip()]:
        if name == "street":
            scene, pose = street_scene(args.work_dir)
        elif name == "sphere":
            scene, pose = sphere_scene(getattr(args, "sphere_triangles", 1_000_000))
        else:
            raise UserError(f"unknown bench scene {name!r}; choose street or sphere")
        if "cast" in sections:
            rows += bench_case(name, scene, pose, args.backend, args.repeat, open3d_reference(scene),
                               [(label, sensor)] if sensor else SENSORS)
        frame_sensor = sensor or "ouster_os1_128"
        if name == "street":
            if "motion" in sections:
                motion_rows = bench_motion(scene, pose, args.backend, args.repeat, frame_sensor)
            if "effects" in sections:
                effects_rows = bench_effects(scene, pose, args.backend, args.repeat, frame_sensor)
            if "echoes" in sections:
                echo_rows = bench_echoes(scene, pose, args.backend, args.repeat, frame_sensor)
        if gpu and "gpu" in sections:
            gpu_rows.append(bench_gpu(name, scene, pose, args.repeat, poses=args.poses, frame_sensor=frame_sensor,
                                      batch_sensor=sensor or "velodyne_vlp16"))
    results.update(cast=rows, motion=motion_rows, effects=effects_rows, echoes=echo_rows, gpu=gpu_rows)
    if rows:
        print_table(rows)
    if motion_rows:
        print_motion_table(label, motion_rows)
    if effects_rows:
        print_effects_table(label, effects_rows)
    if echo_rows:
        print_echoes_table(label, echo_rows)
    if gpu_rows:
        print_gpu_table(gpu_rows)
    if "encode" in sections:
        from .bench_encode import bench_encode

        enc = results["encode"] = bench_encode()
        print(f"\nOSI encode, 131,072 detections: {enc['encode_ms']:.2f} ms (official osi3 classes in a Python loop: "
              f"{enc['reference_extrapolated_ms']:.0f} ms extrapolated, {enc['speedup']:.0f}× slower)")
    if "step" in sections:
        step = results["step"] = bench_step(args.work_dir, frames, args.backend, sensor)
        print_markdown([f"doStep, demo street, {label}", *step["stages_ms"], "model step", "FMU doStep (FMPy)",
                        "doStep p90", "doStep ÷ cast", "master's step (+ input, copy-out)"],
                       [[f"median ms over {step['frames']} frames ({step['returns']:,} returns)",
                         *(f"{v:.2f}" for v in step["stages_ms"].values()), f"{step['model_step_ms']:.2f}",
                         f"{step['fmu_step_ms']:.2f}", f"{step['fmu_step_p90_ms']:.2f}",
                         f"{step['do_step_per_cast']:.2f}×", f"{step['host_step_ms']:.2f}"]])
    if "rig" in sections:
        rig = results["rig"] = bench_rig(args.work_dir, frames, args.backend, sensor=sensor)
        print_markdown([f"demo doStep (model), median over {rig['frames'] - 1} frames", "one lidar ms",
                        "the rig, one scene ms", "× one"],
                       [[f"{rig['lidars']} × {label}", f"{rig['one_ms']:.2f}", f"{rig['rig_ms']:.2f}",
                         f"{rig['ratio']:.2f}×"],
                        ["Argoverse 2's two VLP-32C", f"{rig['vlp32c_ms']:.2f}", f"{rig['av2_ms']:.2f}",
                         f"{rig['av2_ratio']:.2f}×"]])
    if "ground-truth" in sections:
        gt = results["ground_truth"] = bench_ground_truth(args.work_dir, frames, args.backend,
                                                            float(getattr(args, "road_km", 10)), sensor)
        print_markdown([f"demo doStep (model), {label}", "first step s", "step ms (median)", "returns",
                        "× meshes"],
                       [[f"street from {name}", f"{gt['first_step_s'][name]:.2f}", f"{gt['step_ms'][name]:.2f}",
                         f"{gt['returns'][name]:,}", f"{gt['step_ms'][name] / gt['step_ms']['meshes']:.2f}×"]
                        for name in gt["step_ms"]])
        print_markdown([f"a {gt['road_km']:g} km road from ground truth, {label}", "first step s (all built)",
                        f"later step ms (median of {ROAD_STEPS})", "triangles placed", "returns", "× bare road"],
                       [[f"environment: {name}", f"{r['first_step_s']:.2f}", f"{r['step_ms']:.2f}",
                         f"{r['triangles']:,}", f"{r['returns']:,}",
                         f"{r['step_ms'] / gt['road']['auto']['step_ms']:.2f}×"] for name, r in gt["road"].items()])
    if "busy" in sections:
        busy = results["busy"] = bench_busy(min(frames, 6), args.backend, sensor=sensor)
        print_markdown([f"an 8-lane 2 km road, {label}", f"later step ms (median of {busy['frames']})",
                        *(f"{stage} ms" for stage in busy["stages_ms"]["busy"]), "× empty road"],
                       [[f"{busy['vehicles']:,} moving cars" if name == "busy" else "empty", f"{ms:.2f}",
                         *(f"{v:.2f}" for v in busy["stages_ms"][name].values()),
                         f"{ms / busy['step_ms']['empty']:.2f}×"] for name, ms in busy["step_ms"].items()])
    if "stationary" in sections:
        still = results["stationary"] = bench_stationary()
        print(f"\na later step with {still['objects']:,} unchanged stationary objects ({still['view_mb']:.1f} MB "
              f"views, {still['placed']:,} instances placed): decode {still['decode_ms']:.1f} ms + scene update "
              f"{still['scene_ms']:.1f} ms = {still['step_ms']:.1f} ms, median of {still['frames']} (the first step: "
              f"{still['first_step_s']:.1f} s; the cast not included)")
        stages = " + ".join(f"{name} {ms:.1f}" for name, ms in still["model_stage_ms"].items())
        print(f"the model's whole later step there with {still['sensor']} ({still['returns']:,} returns): "
              f"{still['model_step_ms']:.1f} ms, median of {still['frames']} ({stages} ms; the first step: "
              f"{still['model_first_step_s']:.1f} s)")
    if "outputs" in sections:
        layers = results["outputs"] = bench_outputs(args.work_dir, frames, args.backend, sensor=sensor)
        print_markdown([f"demo doStep (model), {label}", "detections ms", "all four layers ms", "× detections"],
                       [[f"median over {layers['frames'] - 1} frames", f"{layers['detections_ms']:.2f}",
                         f"{layers['all_ms']:.2f}", f"{layers['ratio']:.2f}×"]])
    if getattr(args, "json", None):
        folder = os.path.dirname(os.path.abspath(args.json))
        os.makedirs(folder, exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1, default=_json_value)
        print(f"\nfigures written to {args.json}")
    return results


def _json_value(value):
    """numpy scalars and arrays as JSON takes them."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON: {type(value).__name__}")
