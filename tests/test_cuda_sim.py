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
print("OK")
'''


def test_cuda_backend_in_simulator_equals_embree():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": SRC}
    done = subprocess.run([sys.executable, "-c", SCRIPT], check=False, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK" in done.stdout


PTX_SCRIPT = r'''
import os, re, types
import numba.cuda.dispatcher as dispatcher
from numba import cuda
# device functions ask the current GPU for its compute capability; there may be none here
dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(8, 0))
from lidar_fmu.raycast.cuda import _cast_kernel, kernel_signature
try:
    ptx, _ = cuda.compile_ptx(_cast_kernel.py_func, kernel_signature(), cc=(8, 0))
except Exception as exc:
    if "NVVM" in str(exc) or "nvvm" in str(exc) or "CUDA_HOME" in str(exc):
        print("NO_NVVM", exc)
        raise SystemExit(0)
    raise
f64 = re.findall(r"[^\n]*\.f64[^\n]*", ptx)
assert not f64, "float64 in the kernel: " + "\n".join(f64[:5])
assert "call.uni" not in ptx or "vprintf" in ptx, "device functions were not inlined"
print("PTX_OK", len(ptx))
'''


def test_kernel_compiles_for_a_real_gpu_in_float32():
    """The kernel through NVVM (what a GPU would run, where the simulator forgives anything), no float64."""
    import glob

    import pytest

    homes = [os.environ.get("CUDA_HOME", "")] + sorted(glob.glob("/usr/local/cuda*"))
    home = next((h for h in homes if h and glob.glob(os.path.join(h, "**", "libnvvm.so*"), recursive=True)), None)
    if home is None:
        pytest.skip("no CUDA toolkit with NVVM here")
    env = {**os.environ, "CUDA_HOME": home, "PYTHONPATH": SRC}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    done = subprocess.run([sys.executable, "-c", PTX_SCRIPT], check=False, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    if "NO_NVVM" in done.stdout:
        pytest.skip(done.stdout)
    assert "PTX_OK" in done.stdout
