"""The CUDA backend against Embree: on a real GPU, or on Numba's CUDA simulator.

Numba reads ``NUMBA_ENABLE_CUDASIM`` once, when it is first imported, and the
rest of the suite imports it without, so in an ordinary run
:func:`test_this_module_on_the_cuda_simulator` runs this module again in a
fresh interpreter with the simulator on; there every other test here runs
(``NUMBA_ENABLE_CUDASIM=1 pytest tests/test_cuda_sim.py`` does the same by
hand). On a machine with a GPU they run on it directly.
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import trimesh

from helpers.meshes import ground_of_cells, landing_on_ground
from lidar_fmu import Lidar, Scene, load_sensor
from lidar_fmu.geometry.scene import Mesh, concatenate
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.physics.hit_rules import Continuation
from lidar_fmu.raycast import RayBatch, cuda_available, make_backend
from lidar_fmu.scan.motion import FrameMotion


def _simulated() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


needs_cuda = pytest.mark.skipif(not cuda_available(), reason="no GPU and the CUDA simulator is off (see module doc)")


@pytest.mark.slow
def test_this_module_on_the_cuda_simulator():
    if _simulated() or cuda_available():
        pytest.skip("CUDA is available in this process: the tests below run here")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__], env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert re.search(r"\b[1-9]\d* passed", done.stdout) and " failed" not in done.stdout, done.stdout[-2000:]


# ---------------------------------------------------------------------------------------------- scenes
def _ellipsoid(scale, name="m", material="m"):
    tm = trimesh.creation.icosphere(subdivisions=3)  # 1280 triangles
    return Mesh(tm.vertices * scale, tm.faces, np.zeros(len(tm.faces), np.int32), (material,), name)


def _box(extents, centre, material):
    t = trimesh.creation.box(extents=extents)
    t.apply_translation(centre)
    return Mesh(t.vertices, t.faces, np.zeros(len(t.faces), np.int32), (material,), material)


def _rot_z(angle, at):
    pose = np.eye(4)
    c, s = np.cos(angle), np.sin(angle)
    pose[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    pose[:3, 3] = at
    return pose


@pytest.fixture
def two_ellipsoids():
    """Two instances of one mesh, one turned; 200 rays from one origin, about half of them hitting."""
    mesh = _ellipsoid([2.0, 1.0, 0.5])
    scene = Scene()
    scene.add_instance(3, mesh, _rot_z(0.0, [5.0, 0.0, 0.0]))
    scene.add_instance(9, mesh, _rot_z(0.7, [0.0, 6.0, 1.0]))
    rng = np.random.default_rng(1)
    n = 200
    targets = np.where(rng.random((n, 1)) < 0.5, [5.0, 0, 0], [0, 6.0, 1.0]) + rng.normal(scale=0.8, size=(n, 3))
    origin = np.array([0.0, 0.0, 0.3])
    directions = targets - origin
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return scene, origin, directions


def same_hits(got, ref, what, on_edges_either_triangle=False):
    """Equal hits; with ``on_edges_either_triangle``, a ray through a shared edge may name either triangle."""
    assert np.array_equal(got.hit, ref.hit), what + ": hit/miss differ"
    h = ref.hit
    assert 0.2 < h.mean() < 0.95, what + f": hit fraction {h.mean()}"
    assert np.all(np.abs(got.range_m[h] - ref.range_m[h]) <= 1e-4 * (1 + ref.range_m[h])), what + ": range"
    assert np.all(np.isinf(got.range_m[~h])), what + ": miss range"
    assert np.array_equal(got.instance_id, ref.instance_id), what + ": instance ids"
    assert np.array_equal(got.instance_index, ref.instance_index), what + ": instance indices"
    same = got.primitive_id == ref.primitive_id
    if on_edges_either_triangle:
        edge = np.minimum(np.minimum(ref.u, ref.v), 1 - ref.u - ref.v) < 1e-4
        assert np.all(same | (h & edge)), what + ": primitive ids off the triangles' edges"
        assert same.mean() > 0.9, what + f": only {same.mean():.0%} of primitive ids agree"
    else:
        assert same.all(), what + ": primitive ids"
    # (a box's edge is shared by two faces: there the normal is either face's)
    assert np.abs(got.normal[same] - ref.normal[same]).max() <= 1e-4, what + ": normals"
    h = h & same
    assert np.abs(got.u[h] - ref.u[h]).max() <= 1e-4 and np.abs(got.v[h] - ref.v[h]).max() <= 1e-4, what + ": u, v"
    assert got.range_m.dtype == np.float32 and got.instance_id.dtype == np.int64
    assert got.primitive_id.dtype == np.int32 and got.instance_index.dtype == np.int32


# ---------------------------------------------------------------------------------------------- closest hits
@needs_cuda
def test_world_rays_hit_what_embree_hits(two_ellipsoids):
    scene, origin, directions = two_ellipsoids
    gpu, embree = make_backend("cuda", scene), make_backend("embree", scene)
    assert gpu.name == "cuda"
    origins = np.tile(origin, (len(directions), 1))
    got = gpu.cast(origins, directions)
    same_hits(got, embree.cast(origins, directions), "cast")
    assert set(got.instance_id) == {-1, 3, 9}


@needs_cuda
def test_a_pose_change_reaches_the_device_and_sensor_frames_are_placed(two_ellipsoids):
    scene, origin, directions = two_ellipsoids
    gpu, embree = make_backend("cuda", scene), make_backend("embree", scene)
    gpu.cast(origin, directions)  # uploaded, then moved: the BVH stays, the instance table follows
    scene.set_pose(9, _rot_z(0.7, [0.5, 6.5, 0.8]))
    pose = _rot_z(np.pi / 2, origin)  # a sensor turned 90° about z
    local = (directions @ pose[:3, :3]).astype(np.float32)  # the same world rays, in the sensor frame
    rays = RayBatch(np.zeros((1, 3), np.float32), local, pose, np.zeros(len(local), np.float32),
                    np.zeros(len(local), np.uint32), 40.0)
    same_hits(gpu.cast_batch(rays), embree.cast_batch(rays), "cast_batch after a move")
    origins = np.tile(origin, (len(directions), 1))
    near = gpu.cast(origins, directions, max_range_m=6.0)
    assert np.all(near.range_m[near.hit] <= 6.0) and near.hit.sum() < gpu.cast(origins, directions).hit.sum()
    # per-ray origins in the frame, placed by the pose as the directions are
    offsets = np.random.default_rng(2).normal(scale=0.05, size=(len(local), 3)).astype(np.float32)
    spread = RayBatch(offsets, local, pose, rays.time_s, rays.beam_id, 40.0)
    on_gpu = gpu.cast_batch(spread)
    same_hits(on_gpu, embree.cast_batch(spread), "per-ray origins")
    same_hits(on_gpu, make_backend("embreex", scene).cast_batch(spread), "per-ray origins, embreex")


@needs_cuda
def test_batched_poses_equal_each_pose_cast_alone(two_ellipsoids):
    scene, origin, directions = two_ellipsoids
    gpu, embree = make_backend("cuda", scene), make_backend("embree", scene)
    poses = np.stack([_rot_z(np.pi / 2, origin), _rot_z(np.pi / 2, [0.2, 0.5, 0.4])])
    local = (directions @ poses[0, :3, :3]).astype(np.float32)[:60]
    batch = gpu.cast_poses(poses, local, 40.0)
    assert batch.shape == (2, 60) and batch.dtype == np.float32
    for p, row in zip(poses, batch):
        ref = embree.cast_batch(RayBatch(np.zeros((1, 3), np.float32), local, p, np.zeros(60, np.float32),
                                         np.zeros(60, np.uint32), 40.0))
        assert np.array_equal(np.isfinite(row), ref.hit)
        assert np.all(np.abs(row[ref.hit] - ref.range_m[ref.hit]) <= 1e-4 * (1 + ref.range_m[ref.hit]))


# ---------------------------------------------------------------------------------------------- whole frames
# 5 channels × 25 columns, 125 rays: one block of 128 threads (the simulator starts a Python thread for each of a
# launch's threads, so its time goes with the blocks); every object of the street fixture stays in view
SENSOR = {"horizontal_fov_deg": [-60, 60], "horizontal_resolution_deg": 5.0, "vertical_fov_deg": [-15, 5],
          "channels": 5, "max_range_m": 60.0, "min_range_m": 0.5, "max_transparent_layers": 2,
          "range_reflectivity": {"pairs": [[0.10, 12.0], [0.80, 40.0]], "fit": "log"}}
#: a frame compared has more returns than this (a sixth of its rays), whatever its obstacles let through
MIN_RETURNS = 20
MATERIALS = {"materials": {"ground": "asphalt", "window": "glass_clear", "wall": "lambertian_50",
                           "sign": "retroreflector", "black": "absorber", "paint": "car_paint_silver"}}


@pytest.fixture
def street():
    """Glass panes in front of a wall, a retroreflector, an absorber, a car; environment ids have no object id."""
    world = concatenate([_box((80, 80, 0.1), (20, 0, -1.8), "ground"), _box((0.02, 6, 4), (5, 0, 0), "window"),
                         _box((0.02, 3, 4), (4, 3.5, 0), "window"), _box((0.02, 3, 4), (4.5, 3.5, 0), "window"),
                         _box((1, 12, 6), (14, 0, 0), "wall"), _box((0.1, 1, 1), (9, -4, 0.2), "sign"),
                         _box((1, 2, 3), (6, -7, 0), "black")])
    frames = Scene()
    frames.add_instance(2 ** 62, world, np.eye(4))
    frames.add_instance(42, _ellipsoid([2.2, 0.9, 0.7], "car", "paint"), _rot_z(0.0, [0.5, 6.5, 0.8]))
    frames.set_pose(42, np.array([[0.8, -0.6, 0, 9.0], [0.6, 0.8, 0, -1.5], [0, 0, 1, -0.8], [0, 0, 0, 1]]))
    sensor_pose = np.eye(4)
    sensor_pose[:3, 3] = [0.3, 0.2, 0.4]
    return frames, sensor_pose


def same_returns(on_gpu, on_cpu, sensor_pose, what, every_ray=False):
    g, c = on_gpu.scan(sensor_pose), on_cpu.scan(sensor_pose)
    rays = len(on_cpu.sensor.pattern)
    assert MIN_RETURNS < len(c) and (len(c) == rays if every_ray else len(c) < rays), what + f": {len(c)} returns"
    assert np.array_equal(g.ray_index, c.ray_index), what + ": returning rays differ"
    for name in ("x", "y", "z", "range", "normal_x", "normal_y", "normal_z"):
        assert np.abs(g.points[name] - c.points[name]).max() <= 1e-4 * (1 + c.points["range"].max()), what + name
    assert np.abs(g.points["reflectivity"] - c.points["reflectivity"]).max() <= 1e-4, what + ": reflectivity"
    assert np.abs(g.intensity_percent - c.intensity_percent).max() <= 1e-2, what + ": intensity"
    for name in ("beam_id", "object_id", "saturated"):
        assert np.array_equal(g.points[name], c.points[name]), what + ": " + name
    assert g.points.dtype == c.points.dtype and g.intensity_percent.dtype == c.intensity_percent.dtype
    return c


@needs_cuda
@pytest.mark.parametrize("cpu_backend", ["embree", "embreex"])
def test_whole_frames_on_the_gpu_equal_the_cpu_path(street, cpu_backend):
    """Cast, glass, materials, angle tables, range limit, retroreflector, absorber: same returns, same order."""
    frames, sensor_pose = street
    on_gpu = Lidar(frames, SENSOR, backend="cuda", materials=MATERIALS)
    on_cpu = Lidar(frames, SENSOR, backend=cpu_backend, materials=MATERIALS)
    c = same_returns(on_gpu, on_cpu, sensor_pose, "frame")
    assert {0, 1} == set(c.points["saturated"]) and 42 in set(c.points["object_id"])
    assert c.points["range"].min() > 4.0  # the panes in front gave nothing, the rays went on
    frames.remove_instance(42)
    same_returns(on_gpu, on_cpu, sensor_pose, "frame after a removal")


@needs_cuda
def test_frames_in_fog_on_the_gpu_equal_the_cpu_path(street):
    """Fog's extinction and its own echoes (one pass after either backend) give the same returns."""
    from lidar_fmu.physics.weather import WEATHER_OBJECT_ID

    frames, sensor_pose = street
    spec = SENSOR | {"weather": {"fog_visibility_m": 30.0},
                     "range_reflectivity": {"pairs": [[0.10, 50.0], [0.80, 120.0]], "fit": "log"}}
    on_gpu, on_cpu = (Lidar(frames, spec, backend=name, materials=MATERIALS) for name in ("cuda", "embree"))
    c = same_returns(on_gpu, on_cpu, sensor_pose, "fog", every_ray=True)  # a ray that met nothing echoes the fog
    fog = c.points["object_id"] == WEATHER_OBJECT_ID
    assert fog.any() and not fog.all()  # the near surfaces outshine it


@needs_cuda
def test_face_reflectances_on_the_gpu_equal_the_cpu_path(street):
    """A mesh that gives its triangles their own reflectances (one instance of it, beside meshes that do not): the
    GPU's returns kernel reads the same per-face ρ0 as the CPU pass, in place of the material (glass here)."""
    frames, sensor_pose = street
    panel = _box((0.2, 3, 3), (7, -2, 0), "window")  # glass by MATERIALS: nothing without its own reflectances
    rho = np.linspace(0.05, 0.95, panel.triangle_count).astype(np.float32)
    frames.add_instance(7, Mesh(panel.vertices, panel.faces, panel.face_material, panel.material_names, "panel", rho))
    on_gpu = Lidar(frames, SENSOR, backend="cuda", materials=MATERIALS)
    c = same_returns(on_gpu, Lidar(frames, SENSOR, backend="embree", materials=MATERIALS), sensor_pose, "faces")
    seen = c.points["object_id"] == 7
    assert seen.sum() >= 4
    p = c.points[seen]
    cos_incidence = np.abs(sum(p[f"normal_{a}"] * p[a] for a in "xyz")) / p["range"]
    ours = p["reflectivity"] / cos_incidence
    assert np.all(np.isclose(ours[:, None], rho[None, :], atol=1e-4).any(axis=1)), ours


@needs_cuda
def test_face_osi_ids_on_the_gpu_equal_the_cpu_path(street):
    """A mesh whose triangles carry their own OSI ids (a road built from ground truth labels each lane and line) and
    some that take their instance's: the GPU's returns kernel reports the same ids as the CPU pass."""
    from lidar_fmu.geometry.scene import INSTANCE_ID

    frames, sensor_pose = street
    world = frames.mesh_of(2 ** 62)
    ids = np.where(np.arange(world.triangle_count) % 3 == 0, INSTANCE_ID,
                   np.arange(world.triangle_count, dtype=np.uint64) + np.uint64(1000))
    frames.add_instance(2 ** 62, Mesh(world.vertices, world.faces, world.face_material, world.material_names, "road",
                                      None, ids))
    on_gpu = Lidar(frames, SENSOR, backend="cuda", materials=MATERIALS)
    c = same_returns(on_gpu, Lidar(frames, SENSOR, backend="embree", materials=MATERIALS), sensor_pose, "ids")
    labels = set(c.points["object_id"].tolist())
    assert any(1000 <= i < 2000 for i in labels) and 2**64 - 1 in labels and 42 in labels


@needs_cuda
def test_moving_frames_on_the_gpu_equal_the_cpu_path(street):
    """A frame cast in time slices (Backend.returns_together: the car posed per slice, the GPU running each
    slice's physics with its hits) gives Embree's returns, and the car is back at its end pose after."""
    frames, sensor_pose = street
    end = frames.pose_of(42).copy()
    motion = FrameMotion(0.0, 0.1, 0.0, sensor_pose @ pose_matrix((-0.6, 0.0, 0.0), (0.0, 0.0, -0.05)),
                         {42: end @ pose_matrix((-1.5, 0.0, 0.0))})
    spec = SENSOR | {"motion_slices": 3}
    g = Lidar(frames, spec, backend="cuda", materials=MATERIALS).scan(sensor_pose, motion=motion)
    c = Lidar(frames, spec, backend="embree", materials=MATERIALS).scan(sensor_pose, motion=motion)
    assert MIN_RETURNS < len(c) and np.array_equal(g.ray_index, c.ray_index)
    for name in ("x", "y", "z", "range", "normal_x", "normal_y", "normal_z"):
        assert np.abs(g.points[name] - c.points[name]).max() <= 1e-4 * (1 + c.points["range"].max()), name
    assert np.array_equal(g.points["object_id"], c.points["object_id"]) and 42 in set(c.points["object_id"])
    assert np.array_equal(frames.pose_of(42), end)


@needs_cuda
def test_fmcw_radial_velocities_on_the_gpu_equal_the_cpu_path(street):
    """An FMCW frame cast moving (the sensor turning and driving, the car driving and turning): the radial velocity
    pass after either backend gives the same velocities, the car's its own, the walls' the sensor's motion."""
    from lidar_fmu.scan.velocity import SceneVelocities

    frames, sensor_pose = street
    end = frames.pose_of(42).copy()
    motion = FrameMotion(0.0, 0.1, 0.0, sensor_pose @ pose_matrix((-0.6, 0.0, 0.0), (0.0, 0.0, -0.05)),
                         {42: end @ pose_matrix((-1.5, 0.0, 0.0))})
    velocities = SceneVelocities(sensor_pose[:3, 3], (6.0, 0.5, 0.0), (0.0, 0.0, 0.5), [42], [(15.0, -2.0, 0.0)],
                                 [(0.0, 0.0, 0.3)])
    spec = SENSOR | {"motion_slices": 3, "radial_velocity": True}
    g, c = (Lidar(frames, spec, backend=name, materials=MATERIALS).scan(sensor_pose, motion=motion,
                                                                        velocities=velocities)
            for name in ("cuda", "embree"))
    assert MIN_RETURNS < len(c) and np.array_equal(g.ray_index, c.ray_index)
    assert np.array_equal(g.points["object_id"], c.points["object_id"])
    car = c.points["object_id"] == 42
    assert car.any() and np.ptp(c.radial_velocity_m_s) > 1.0
    assert np.abs(g.radial_velocity_m_s - c.radial_velocity_m_s).max() <= 1e-4
    # without a motion and velocities: everything stands still on either backend
    still = [Lidar(frames, spec, backend=name, materials=MATERIALS).scan(sensor_pose) for name in ("cuda", "embree")]
    assert all(np.all(cloud.radial_velocity_m_s == 0.0) for cloud in still)


@needs_cuda
def test_a_still_lidar_cast_after_a_moving_one_sees_the_end_poses(street):
    """On the GPU the jobs of a rig go one by one: the scene is put back after each job's slices."""
    frames, sensor_pose = street
    end = frames.pose_of(42).copy()
    motion = FrameMotion(0.0, 0.1, 0.0, sensor_pose, {42: end @ pose_matrix((-1.5, 0.0, 0.0))})
    moving = Lidar(frames, SENSOR | {"motion_slices": 3}, backend="cuda", materials=MATERIALS)
    still = Lidar(frames, SENSOR | {"motion_distortion": False}, backend=moving.backend, materials=MATERIALS)
    alone = still.scan(sensor_pose, motion=motion)
    plans = [lidar.plan_scan(sensor_pose, motion=motion) for lidar in (moving, still)]
    together = plans[1].finish(moving.backend.returns_together([plan.job for plan in plans])[1])
    assert 42 in set(alone.points["object_id"]) and alone.points.tobytes() == together.points.tobytes()
    assert np.array_equal(frames.pose_of(42), end)


@needs_cuda
def test_cast_batch_goes_through_glass_as_every_backend_does(street):
    """The continuation request means the same to every caster: the hits behind the panes, ranges summed."""
    frames, sensor_pose = street
    lidar = Lidar(frames, SENSOR, backend="embree", materials=MATERIALS)
    rays, through = lidar.rays(sensor_pose), lidar.return_model().continuation()
    assert through.max_surfaces == 2
    ref = lidar.backend.cast_batch(rays, through)
    # boxes seen on a regular grid: some rays cross a face's diagonal, where the two BVHs may pick either triangle
    same_hits(make_backend("cuda", frames).cast_batch(rays, through), ref, "cuda through glass", True)
    same_hits(make_backend("embreex", frames).cast_batch(rays, through), ref, "embreex through glass")
    stopped = make_backend("cuda", frames).cast_batch(rays, Continuation.none())
    assert (stopped.range_m[stopped.hit] < 6).sum() > (ref.range_m[ref.hit] < 6).sum()  # the panes themselves


@needs_cuda
def test_echoes_from_sub_rays_cast_on_the_gpu_equal_the_cpu_path():
    """Divergence sub-rays are ordinary rays to the GPU; echo formation after it gives the CPU path's echoes."""
    scene = Scene()
    scene.add_instance(1, _box((0.2, 40, 20), (20.1, 0, 0), "wall"), np.eye(4))
    scene.add_instance(2, _box((0.05, 10, 10), (10.0, -5.0, 0), "plate"), np.eye(4))
    # 3 beams × 9 columns across the plate's edge (azimuth 0), 8 sub-rays each: 216 rays on the simulator
    dual = {"vertical_fov_deg": [-2, 2], "channels": 3, "horizontal_fov_deg": [0.4, -0.4], "horizontal_samples": 9,
            "beam_divergence_mrad": [3.0, 3.0], "divergence_samples": 8, "returns": "dual",
            "motion_distortion": False}
    g = Lidar(scene, dual, backend="cuda").scan(np.eye(4))
    c = Lidar(scene, dual, backend="embree").scan(np.eye(4))
    assert np.array_equal(g.ray_index, c.ray_index) and np.array_equal(g.points["echo"], c.points["echo"])
    assert np.count_nonzero(c.points["echo"] == 1) >= 3
    for name in ("range", "reflectivity", "x", "y", "z"):
        assert np.abs(g.points[name] - c.points[name]).max() <= 1e-4 * 21, name
    assert np.array_equal(g.points["object_id"], c.points["object_id"])
    assert np.abs(g.echo_pulse_width_m - c.echo_pulse_width_m).max() <= 1e-4


@needs_cuda
def test_the_gpu_bench_runs(street):
    """The GPU part of ``lidar-fmu bench --backend cuda`` (tiny sensors: the simulator is slow)."""
    from lidar_fmu.tools.bench import bench_gpu, print_gpu_table

    frames, sensor_pose = street
    tiny = {"horizontal_fov_deg": [-30, 30], "horizontal_resolution_deg": 10.0, "vertical_fov_deg": [-10, 0],
            "channels": 3}
    row = bench_gpu("tiny", frames, sensor_pose, 1, poses=3, frame_sensor=tiny, batch_sensor=tiny)
    assert row["batch_rays"] == 3 * 21 and row["frame_rays"] == 21 and row["hit_agreement"] == 1.0, row
    print_gpu_table([row])


# ---------------------------------------------------------------------------------------------- real PTX
@pytest.mark.slow
def test_kernels_compile_for_a_real_gpu(monkeypatch):
    """Every kernel through NVVM for sm_90 (what a GPU would run; the simulator forgives anything).

    The dev extra installs numba-cuda with NVVM, which compiles without a GPU.
    """
    if _simulated():
        pytest.skip("the simulator has no NVVM; the ordinary run compiles the PTX")
    import types

    import numba.cuda.dispatcher as dispatcher
    from numba import cuda

    # device functions ask the current GPU for its compute capability; there may be none here
    monkeypatch.setattr(dispatcher, "get_current_device", lambda: types.SimpleNamespace(compute_capability=(9, 0)))
    from lidar_fmu.raycast.cuda import kernel_signatures

    for name, (kernel, signature) in kernel_signatures().items():
        try:
            ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
        except Exception as exc:
            if "nvvm" in str(exc).lower() or "CUDA_HOME" in str(exc):
                pytest.skip(f"no NVVM here: {exc}")
            raise
        calls = set(re.findall(r"call\.uni[^,]*,\s*(\w+)", ptx)) - {"vprintf", "__internal_accurate_pow"}
        assert not calls, f"{name}: device functions were not inlined: {calls}"
        if name != "_returns_kernel":  # the per-hit physics runs in float64, as on the CPU
            f64 = re.findall(r"[^\n]*\.f64[^\n]*", ptx)
            assert not f64, f"float64 in {name}: " + "\n".join(f64[:5])


# ---------------------------------------------------------------------------------------------- mirrors
@needs_cuda
@pytest.mark.parametrize("glass", [False, True])
def test_mirror_ghosts_on_the_gpu_equal_embree(glass):
    """Two bounces (and a pane in front): the same hits (path length, final surface, mirrored normal, path gain)
    and the same returns as Embree's packets and embreex's recasting."""
    from helpers.mirror_scenes import MATERIALS, SENSOR, periscope_scene

    scene = periscope_scene(glass)
    lidar = Lidar(scene, SENSOR, backend="embree", materials=MATERIALS)
    rays, through = lidar.rays(np.eye(4)), lidar.return_model().continuation()
    assert through.max_bounces == 2
    ref = lidar.backend.cast_batch(rays, through)
    for name in ("cuda", "embreex"):
        got = make_backend(name, scene).cast_batch(rays, through)
        assert np.array_equal(got.hit, ref.hit) and ref.hit.all() and np.array_equal(got.instance_id, ref.instance_id)
        np.testing.assert_allclose(got.range_m, ref.range_m, atol=2e-4, err_msg=name)
        np.testing.assert_allclose(got.normal, ref.normal, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(got.path_gain, ref.path_gain, rtol=1e-6, err_msg=name)
    on_gpu = Lidar(scene, SENSOR, backend="cuda", materials=MATERIALS).scan(np.eye(4))
    on_cpu = lidar.scan(np.eye(4))
    assert len(on_cpu) == 49 and np.array_equal(on_gpu.ray_index, on_cpu.ray_index)
    for name in ("x", "y", "z", "range", "normal_x", "normal_y", "normal_z", "reflectivity"):
        np.testing.assert_allclose(on_gpu.points[name], on_cpu.points[name], atol=2e-4, err_msg=name)
    assert np.array_equal(on_gpu.points["object_id"], on_cpu.points["object_id"])


# ---------------------------------------------------------------------------------------------- scanned patterns
@needs_cuda
@pytest.mark.parametrize("pattern", ["raster at 1550 nm", "robosense beam origins"])
def test_raster_and_robosense_patterns_on_the_gpu_equal_the_cpu_path(street, pattern):
    """A raster of stacked and side-by-side channels whose materials are read at 1550 nm, and a RoboSense unit's
    rays leaving its lens centre: the same returns on every backend (sensors/raster.py, sensors/robosense.py)."""
    frames, sensor_pose = street
    common = {key: SENSOR[key] for key in ("max_range_m", "min_range_m", "max_transparent_layers", "range_reflectivity")}
    if pattern == "raster at 1550 nm":
        spec = common | {"wavelength_nm": 1550.0, "raster": {
            "channels": [[-20.0, 1.0], [-20.0, -1.0], [20.0, 1.0], [20.0, -1.0]], "horizontal_fov_deg": [20, -20],
            "columns": 9, "lines": 4, "vertical_fov_deg": [2, -12], "line_density": [[-6, -2, 3.0]],
            "line_order": "alternate", "line_duty": 0.8, "frame_duty": 0.9}}
    else:  # 35 firing sequences of 16 lasers: a 2 ms frame of an RS-Helios-16P
        spec = common | {"robosense_model": "RS-Helios-16P", "frame_rate_hz": 500.0,
                         "vertical_angles_deg": [-15.0 + 2.0 * k for k in range(16)]}
    on_cpu = Lidar(frames, spec, backend="embree", materials=MATERIALS)
    assert len(on_cpu.sensor.pattern) == (144 if pattern == "raster at 1550 nm" else 560)
    for name in ("cuda", "embreex"):
        same_returns(Lidar(frames, spec, backend=name, materials=MATERIALS), on_cpu, sensor_pose, f"{pattern} {name}")


@needs_cuda
def test_returns_on_the_gpu_carry_the_class_of_what_they_hit():
    """The ground-truth road's probes (a lane, paint, a kerb, a sidewalk, a sign, a tree, a car, a pedestrian, …):
    the same class on the GPU as on Embree, and the class of what each ray hit."""
    from helpers.road_views import road_view, semantic_probes
    from lidar_fmu.geometry.semantic import SEMANTIC_CLASSES
    from lidar_fmu.osi.decode import decode_sensor_view
    from lidar_fmu.world.scene_update import SceneUpdater

    scene = Scene()
    SceneUpdater(scene).apply(decode_sensor_view(road_view()))
    origins, directions, classes = semantic_probes()
    rays = RayBatch.in_world(origins, directions, 100.0)
    got = {}
    for name in ("cuda", "embree"):
        lidar = Lidar(scene, "ouster_os1_128", backend=name)
        got[name] = lidar.backend.returns(rays, lidar.return_model())
    assert np.array_equal(got["cuda"].ray_index, np.arange(len(classes)))
    assert np.array_equal(got["cuda"].semantic, got["embree"].semantic)
    assert [SEMANTIC_CLASSES[c] for c in got["cuda"].semantic] == classes
    assert got["cuda"].semantic.dtype == np.uint8


@needs_cuda
def test_rays_along_shared_edges_at_yaw_90_hit_as_on_embree():
    """An OS1-128's columns about azimuth −90° at yaw exactly 90° over a 1 m ground: the rays run along its cell
    edges, with a ~1e-24 crosswise residue of cos 90° (the rays Embree's packets once lost); all land inside."""
    pattern = load_sensor("ouster_os1_128").pattern
    azimuth_deg = np.degrees(np.arctan2(pattern.directions[:, 1], pattern.directions[:, 0]))
    pose = pose_matrix((0.0, -2.0, 1.9), (0.0, 0.0, np.radians(90.0)))
    inside = landing_on_ground(pose[:3, 3], pattern.directions @ pose[:3, :3].T, 10.0)[0]
    column = np.flatnonzero((np.abs(azimuth_deg + 90.0) < 0.5) & inside)
    rays = RayBatch(np.zeros((1, 3), np.float32), np.ascontiguousarray(pattern.directions[column]), pose,
                    np.zeros(len(column), np.float32), np.zeros(len(column), np.uint32), 1000.0)
    scene = Scene.from_meshes([ground_of_cells(20.0)])
    gpu = make_backend("cuda", scene).cast_batch(rays)
    assert len(column) > 100 and gpu.hit.all()
    for name in ("embree", "embreex"):
        cpu = make_backend(name, scene).cast_batch(rays)
        assert cpu.hit.all(), name
        np.testing.assert_allclose(gpu.range_m, cpu.range_m, rtol=1e-5, err_msg=name)
