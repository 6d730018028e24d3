import os
import shutil
import tempfile

import pytest
import trimesh

# The FMUs the tests build by default (replay, demo, bench, …) go to a folder of this session, not the checkout's
# dist/: a test run leaves nothing in the repository. Set before lidar_fmu is imported; subprocesses inherit it.
_SESSION_DIST = None
if not os.environ.get("LIDAR_FMU_DIST"):
    _SESSION_DIST = tempfile.mkdtemp(prefix="lidar-fmu-dist-")
    os.environ["LIDAR_FMU_DIST"] = _SESSION_DIST

from helpers.meshes import to_mesh  # noqa: E402  (after LIDAR_FMU_DIST is set: it imports lidar_fmu)


def _real_gpu() -> bool:
    """numba-cuda sees an NVIDIA GPU (the CUDA simulator does not count)."""
    try:
        from numba import config, cuda

        return bool(cuda.is_available()) and not config.ENABLE_CUDASIM
    except Exception:
        return False


def pytest_sessionfinish(session, exitstatus):
    if _SESSION_DIST:
        shutil.rmtree(_SESSION_DIST, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` need a real GPU: skip them without one."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items and not _real_gpu():
        skip = pytest.mark.skip(reason="needs a real NVIDIA GPU (numba.cuda.is_available(), not the simulator)")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture
def plane_mesh():
    """A 200 m × 200 m wall in the plane x = 10 m, facing the origin."""
    tm = trimesh.Trimesh(
        vertices=[[10, -100, -100], [10, 100, -100], [10, 100, 100], [10, -100, 100]],
        faces=[[0, 1, 2], [0, 2, 3]],
        process=False,
    )
    return to_mesh(tm, "wall", "plane")


@pytest.fixture(scope="session")
def fmu_path(tmp_path_factory):
    """LidarSensor.fmu (FMI 2.0), built once for the session: the modules that drive it share one build (each
    build copies the package and compiles the status shim, seconds on 2 cores)."""
    from lidar_fmu.cosim.fmu_package import build_fmu

    return build_fmu(tmp_path_factory.mktemp("fmu") / "LidarSensor.fmu")


@pytest.fixture(scope="session")
def cold_start(fmu_path, tmp_path_factory):
    """A fresh clone's first replay, compiled once for the session: Numba's and lidar-fmu's caches empty (folders of
    their own), what ``kernels_cached()`` says there, then ``lidar-fmu replay`` of the shared trace's first 2 frames
    through the FMU with a 16-channel sensor → {"env": the environment both Pythons ran in, "cached_before": that
    answer's text, "replay": the replay's finished process}. Its Numba cache then holds every kernel the FMU's
    warm-up compiled: tests/test_warm_up.py reads what the replay said, tests/test_sweep.py starts its workers from
    a copy with some kernels taken out (a cold compile takes 45–60 s on 2 cores: the suite pays one)."""
    import json
    import subprocess
    import sys

    from helpers.fmu_inputs import SHARED_TRACE, SMALL_SENSOR

    base = tmp_path_factory.mktemp("cold")
    src = os.path.join(os.path.dirname(__file__), os.pardir, "src")
    env = os.environ | {"NUMBA_CACHE_DIR": str(base / "numba"), "LIDAR_FMU_CACHE": str(base / "cache"),
                        "PYTHONPATH": os.pathsep.join([os.path.abspath(src), os.environ.get("PYTHONPATH", "")])}

    def python(*argv):
        done = subprocess.run([sys.executable, *map(str, argv)], env=env, capture_output=True, text=True,
                              timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    cached = python("-c", "from lidar_fmu.scan.kernels import kernels_cached; print(kernels_cached())")
    spec = base / "small.json"
    spec.write_text(json.dumps(SMALL_SENSOR))
    replay = python("-m", "lidar_fmu", "replay", SHARED_TRACE, "--sensor", spec, "-o", base / "out", "--frames", 2,
                    "--fmu", fmu_path)
    return {"env": env, "cached_before": cached.stdout.strip(), "replay": replay}


@pytest.fixture(scope="session")
def fmus(fmu_path):
    """{2: the FMI 2.0 FMU, 3: the FMI 3.0 FMU}, each built once for the session, side by side."""
    from lidar_fmu.cosim.fmu_package import build_fmu

    return {2: fmu_path, 3: build_fmu(fmu_path.with_name("LidarSensor-fmi3.fmu"), fmi_version=3)}


@pytest.fixture(scope="session")
def street(tmp_path_factory):
    """The demo street's scene (generator seed 0), for the tests that scan presets across it (a module may keep
    a ``street`` of its own)."""
    from lidar_fmu.tools.demo_scene import generate_street, load_street_scene

    out = tmp_path_factory.mktemp("street")
    generate_street(out, seed=0)
    return load_street_scene(out)[0]
