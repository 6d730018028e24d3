"""Nothing left behind: an FMU instance removes the copy it unpacked, and a replay, a demo and a sweep leave the
temporary folder as they found it."""
import gc
import os
import subprocess
import sys

import pytest
import yaml

from helpers.fmu_inputs import SHARED_TRACE, SMALL_SENSOR
from lidar_fmu.cosim.fmu_host import FmuInstance

SRC = os.path.join(os.path.dirname(__file__), os.pardir, "src")


def test_an_instance_removes_what_it_unpacked_when_closed_refused_or_forgotten(fmu_path, tmp_path):
    with FmuInstance(fmu_path, {"sensor": str(_small_spec(tmp_path))}) as fmu:
        unpacked = fmu.unzip_dir
        assert os.path.isdir(unpacked)
    assert not os.path.exists(unpacked)
    fmu.close()  # twice: nothing more to do
    refused = FmuInstance(fmu_path, initialize=False)
    with pytest.raises(Exception):  # noqa: B017  (FMPy's FMICallException: the model cannot start)
        refused.initialize({"sensor": "no_such_preset"})
    refused.close()
    assert not os.path.exists(refused.unzip_dir)
    forgotten = FmuInstance(fmu_path, initialize=False)  # never closed: its folder goes when it is collected
    unpacked = forgotten.unzip_dir
    del forgotten
    gc.collect()
    assert not os.path.exists(unpacked)


def test_a_given_unzip_folder_stays(fmu_path, tmp_path):
    """A folder the caller unpacked the FMU into is the caller's."""
    from fmpy import extract

    folder = extract(str(fmu_path), unzipdir=str(tmp_path / "unpacked"))
    with FmuInstance(fmu_path, {"sensor": str(_small_spec(tmp_path))}, unzip_dir=folder):
        pass
    assert os.path.isfile(os.path.join(folder, "modelDescription.xml"))


def _small_spec(folder):
    path = folder / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL_SENSOR))
    return path


def _leaves_in_tmpdir(argv, tmp_path, name):
    """The entries ``lidar-fmu ARGV`` run with ``$TMPDIR`` a new, empty folder leaves there."""
    tmpdir = tmp_path / f"tmp-{name}"
    tmpdir.mkdir()
    env = os.environ | {"TMPDIR": str(tmpdir),
                        "PYTHONPATH": os.pathsep.join([os.path.abspath(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "lidar_fmu", *map(str, argv)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return sorted(os.listdir(tmpdir))


@pytest.mark.slow
def test_replay_demo_and_sweep_leave_the_temporary_folder_empty(fmu_path, tmp_path):
    spec = _small_spec(tmp_path)
    replay = ["replay", SHARED_TRACE, "--sensor", spec, "-o", tmp_path / "replay", "-q", "--frames", 2,
              "--fmu", fmu_path]
    assert _leaves_in_tmpdir(replay, tmp_path, "replay") == []
    demo = ["demo", "--frames", 2, "-q", "-o", tmp_path / "demo"]
    assert _leaves_in_tmpdir(demo, tmp_path, "demo") == []
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({"scenarios": [str(SHARED_TRACE.parent)], "sensors": [str(spec)], "frames": 2}))
    run = ["sweep", sweep, "-o", tmp_path / "sweep", "--workers", 1, "-q", "--fmu", fmu_path]
    assert _leaves_in_tmpdir(run, tmp_path, "sweep") == []  # the workers' unpacked FMUs and Dask's scratch space


def test_the_test_command_is_one_and_removes_its_temporary_folder():
    """README's test command is CONTRIBUTING's and .ci/run's; it runs the tests with their temporary folder in its
    own, which it removes at the end with the wheel, the venv and the demo (and the wheel's build folder)."""
    root = os.path.join(os.path.dirname(__file__), os.pardir)

    def command(name):
        with open(os.path.join(root, name), encoding="utf-8") as f:
            lines = [line for line in f.read().splitlines() if line.startswith("apt-get update")]
        assert len(lines) == 1, name
        return lines[0]

    readme = command("README.md")
    assert command("CONTRIBUTING.md") == readme == command(os.path.join(".ci", "run"))
    steps = readme.split(" && ")
    assert steps[-1] == 'rm -rf "$W" build'
    tests = next(step for step in steps if "pytest" in step)
    assert steps.index('W="$(mktemp -d)"') < steps.index(tests)
    assert tests.startswith('TMPDIR="$W/tmp" ') and "-p no:cacheprovider" in tests


def test_the_default_fmus_go_where_lidar_fmu_dist_says(tmp_path):
    """``$LIDAR_FMU_DIST`` moves the default FMUs out of the checkout's dist/ (the test session's own folder)."""
    probe = ("from lidar_fmu.cosim.fmu_package import DEFAULT_FMU, DEFAULT_FMU3; "
             "print(DEFAULT_FMU); print(DEFAULT_FMU3)")
    env = os.environ | {"LIDAR_FMU_DIST": str(tmp_path / "elsewhere"),
                        "PYTHONPATH": os.pathsep.join([os.path.abspath(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(tmp_path / "elsewhere" / "LidarSensor.fmu"),
                                   str(tmp_path / "elsewhere" / "LidarSensor-fmi3.fmu")]
    from lidar_fmu.cosim.fmu_package import DEFAULT_FMU, REPO_ROOT

    if REPO_ROOT is not None:  # this session's own default FMU is not in the checkout
        assert REPO_ROOT not in DEFAULT_FMU.parents
