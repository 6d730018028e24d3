"""The CUDA backend run by Numba's CUDA simulator, compared with Embree.

Numba reads ``NUMBA_ENABLE_CUDASIM`` once, when it is first imported, and
other tests in this process import it first, so the check runs in a fresh
interpreter with the simulator switched on.
"""
import os
import subprocess
import sys

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")

SCRIPT = r'''
import numpy as np
import trimesh
from lidar_fmu import Scene
from lidar_fmu.raycast import make_backend
from lidar_fmu.scene import Mesh

tm = trimesh.creation.icosphere(subdivisions=3)  # 1280 triangles
mesh = Mesh(tm.vertices * [2.0, 1.0, 0.5], tm.faces, np.zeros(len(tm.faces), np.int32), ("m",), "m")
a = np.eye(4)
a[:3, 3] = [5.0, 0.0, 0.0]
b = np.eye(4)
c, s = np.cos(0.7), np.sin(0.7)
b[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
b[:3, 3] = [0.0, 6.0, 1.0]
scene = Scene()
scene.add_instance(3, mesh, a)
scene.add_instance(9, mesh, b)

rng = np.random.default_rng(1)
n = 200
targets = np.where(rng.random((n, 1)) < 0.5, [5.0, 0, 0], [0, 6.0, 1.0]) + rng.normal(scale=0.8, size=(n, 3))
origin = np.array([0.0, 0.0, 0.3])
directions = targets - origin
directions /= np.linalg.norm(directions, axis=1, keepdims=True)

embree = make_backend("embree", scene)
gpu = make_backend("cuda", scene)
assert gpu.name == "cuda" and gpu.sees_through is False


def same(got, ref, what):
    assert np.array_equal(got.hit, ref.hit), what + ": hit/miss differ"
    h = ref.hit
    assert 0.2 < h.mean() < 0.95, what + f": hit fraction {h.mean()}"
    assert np.all(np.abs(got.range_m[h] - ref.range_m[h]) <= 1e-4 * (1 + ref.range_m[h])), what + ": range"
    assert np.all(np.isinf(got.range_m[~h])), what + ": miss range"
    assert np.array_equal(got.instance_id, ref.instance_id), what + ": instance ids"
    assert np.array_equal(got.instance_index, ref.instance_index), what + ": instance slots"
    assert np.array_equal(got.primitive_id, ref.primitive_id), what + ": primitive ids"
    assert np.abs(got.normal - ref.normal).max() <= 1e-4, what + ": normals"
    assert np.abs(got.u[h] - ref.u[h]).max() <= 1e-4 and np.abs(got.v[h] - ref.v[h]).max() <= 1e-4, what + ": u, v"
    assert got.range_m.dtype == np.float32 and got.instance_id.dtype == np.int64
    assert got.primitive_id.dtype == np.int32 and got.instance_index.dtype == np.int32


origins = np.tile(origin, (n, 1))
same(gpu.cast(origins, directions), embree.cast(origins, directions), "cast")
assert set(gpu.cast(origins, directions).instance_id) == {-1, 3, 9}

# a pose change reaches the device (the BVH stays), and cast_frame rotates the sensor's rays
b2 = b.copy()
b2[:3, 3] = [0.5, 6.5, 0.8]
scene.set_pose(9, b2)
pose = np.eye(4)
pose[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]  # sensor turned 90 degrees about z
pose[:3, 3] = origin
local = directions @ pose[:3, :3]  # the same world rays, given in the sensor frame
same(gpu.cast_frame(pose, local, 40.0), embree.cast_frame(pose, local, 40.0), "cast_frame after a move")
near = gpu.cast(origins, directions, max_range_m=6.0)
assert np.all(near.range_m[near.hit] <= 6.0) and near.hit.sum() < gpu.cast(origins, directions).hit.sum()

# batched casting: one launch over several poses = each pose's own cast
poses = np.stack([pose, pose])
poses[1, :3, 3] = [0.2, 0.5, 0.4]
batch = gpu.cast_poses(poses, local[:60], 40.0)
assert batch.shape == (2, 60) and batch.dtype == np.float32
for p, row in zip(poses, batch):
    ref = embree.cast_frame(p, local[:60], 40.0)
    assert np.array_equal(np.isfinite(row), ref.hit)
    assert np.all(np.abs(row[ref.hit] - ref.range_m[ref.hit]) <= 1e-4 * (1 + ref.range_m[ref.hit]))

# whole frames on the GPU (cast, glass, materials, angle tables, range limit, retroreflector,
# absorber) against the CPU path: the same returns, in the same order
from lidar_fmu import Lidar
from lidar_fmu.scene import concatenate


def box(extents, centre, material):
    t = trimesh.creation.box(extents=extents)
    t.apply_translation(centre)
    return Mesh(t.vertices, t.faces, np.zeros(len(t.faces), np.int32), (material,), material)


world = concatenate([box((80, 80, 0.1), (20, 0, -1.8), "ground"), box((0.02, 6, 4), (5, 0, 0), "window"),
                     box((0.02, 3, 4), (4, 3.5, 0), "window"), box((0.02, 3, 4), (4.5, 3.5, 0), "window"),
                     box((1, 12, 6), (14, 0, 0), "wall"), box((0.1, 1, 1), (9, -4, 0.2), "sign"),
                     box((1, 2, 3), (6, -7, 0), "black")])
car = Mesh(tm.vertices * [2.2, 0.9, 0.7], tm.faces, np.zeros(len(tm.faces), np.int32), ("paint",), "car")
frames = Scene()
frames.add_instance(2 ** 62, world, np.eye(4))  # environment ids start at 2**62: no object id
frames.add_instance(42, car, b2)
frames.set_pose(42, np.array([[0.8, -0.6, 0, 9.0], [0.6, 0.8, 0, -1.5], [0, 0, 1, -0.8], [0, 0, 0, 1]]))
sensor = {"horizontal_fov_deg": [-60, 60], "horizontal_resolution_deg": 5.0, "vertical_fov_deg": [-15, 5],
          "channels": 12, "max_range_m": 60.0, "min_range_m": 0.5, "max_transparent_layers": 2,
          "range_reflectivity": {"pairs": [[0.10, 12.0], [0.80, 40.0]], "fit": "log"}}
materials = {"materials": {"ground": "asphalt", "window": "glass_clear", "wall": "lambertian_50",
                           "sign": "retroreflector", "black": "absorber", "paint": "car_paint_silver"}}
sensor_pose = np.eye(4)
sensor_pose[:3, 3] = [0.3, 0.2, 0.4]
on_gpu = Lidar(frames, sensor, backend="cuda", materials=materials)
on_cpu = Lidar(frames, sensor, backend="embree", materials=materials)
assert on_gpu.backend.casts_returns


def same_returns(what):
    g, c = on_gpu.scan(sensor_pose), on_cpu.scan(sensor_pose)
    assert 50 < len(c) < len(on_cpu.sensor.pattern), what + f": {len(c)} returns"
    assert np.array_equal(g.ray_index, c.ray_index), what + ": returning rays differ"
    for name in ("x", "y", "z", "range", "normal_x", "normal_y", "normal_z"):
        assert np.abs(g.points[name] - c.points[name]).max() <= 1e-4 * (1 + c.points["range"].max()), what + name
    assert np.abs(g.points["reflectivity"] - c.points["reflectivity"]).max() <= 1e-4, what + ": reflectivity"
    assert np.abs(g.intensity_percent - c.intensity_percent).max() <= 1e-2, what + ": intensity"
    for name in ("beam_id", "object_id", "saturated"):
        assert np.array_equal(g.points[name], c.points[name]), what + ": " + name
    assert g.points.dtype == c.points.dtype and g.intensity_percent.dtype == c.intensity_percent.dtype
    return c


c = same_returns("frame")
assert {0, 1} == set(c.points["saturated"]) and 42 in set(c.points["object_id"])
assert c.points["range"].min() > 4.0  # the panes in front gave nothing, the rays went on
frames.remove_instance(42)
same_returns("frame after a removal")

# the GPU part of `lidar-fmu bench --backend cuda` runs through (tiny sensors: the simulator is slow)
from lidar_fmu.bench import bench_gpu, print_gpu_table

tiny = {"horizontal_fov_deg": [-30, 30], "horizontal_resolution_deg": 10.0, "vertical_fov_deg": [-10, 0], "channels": 3}
row = bench_gpu("tiny", frames, sensor_pose, 1, poses=3, frame_sensor=tiny, batch_sensor=tiny)
assert row["batch_rays"] == 3 * 21 and row["frame_rays"] == 21 and row["hit_agreement"] == 1.0, row
print_gpu_table([row])
print("OK")
'''


def test_cuda_backend_in_simulator_equals_embree():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": SRC}
    done = subprocess.run([sys.executable, "-c", SCRIPT], check=False, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK" in done.stdout


PTX_SCRIPT = r'''
import re, types
import numba.cuda.dispatcher as dispatcher
from numba import cuda
# device functions ask the current GPU for its compute capability; there may be none here
dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))
from lidar_fmu.raycast.cuda import kernel_signatures
for name, (kernel, signature) in kernel_signatures().items():
    try:
        ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
    except Exception as exc:
        if "nvvm" in str(exc).lower() or "CUDA_HOME" in str(exc):
            print("NO_NVVM", exc)
            raise SystemExit(0)
        raise
    calls = set(re.findall(r"call\.uni[^,]*,\s*(\w+)", ptx)) - {"vprintf", "__internal_accurate_pow"}
    assert not calls, f"{name}: device functions were not inlined: {calls}"
    if name != "_returns_kernel":  # the per-hit physics runs in float64, as on the CPU
        f64 = re.findall(r"[^\n]*\.f64[^\n]*", ptx)
        assert not f64, f"float64 in {name}: " + "\n".join(f64[:5])
    print("PTX_OK", name, len(ptx))
'''


def test_kernels_compile_for_a_real_gpu():
    """Every kernel through NVVM for sm_90 (what a GPU would run; the simulator forgives anything).

    The dev extra installs ``numba-cuda[cu13]``, whose NVVM compiles without a GPU.
    """
    import pytest

    env = {**os.environ, "PYTHONPATH": SRC}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    done = subprocess.run([sys.executable, "-c", PTX_SCRIPT], check=False, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    if "NO_NVVM" in done.stdout:
        pytest.skip(done.stdout)
    assert done.stdout.count("PTX_OK") == 4, done.stdout
