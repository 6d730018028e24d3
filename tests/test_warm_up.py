"""The kernels compile (or load) in the FMU's initialization, which says so, and not in its first step; the
warm-up changes nothing the model sends; a first run's progress bar and timing lines say it compiles."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from helpers.fmu_inputs import SHARED_TRACE, SMALL_SENSOR
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.cosim.warm_up import warm_up
from lidar_fmu.osi.trace import read_trace
from lidar_fmu.scan.kernels import kernels_cached
from lidar_fmu.tools.demo import make_demo_scenario

SRC = os.path.join(os.path.dirname(__file__), os.pardir, "src")
KERNEL_LINE = re.compile(r"^(compiled the kernels in [\d.]+ s \(once per machine; later runs load them from the "
                         r"cache\)|loaded the compiled kernels from the cache in [\d.]+ s)$")

# In a Python of its own (nothing compiled or loaded in it yet): the FMU initialized on the demo street (meshes,
# glass, the street's materials), then every Numba dispatcher's compiled signatures counted before and after its
# first steps. A kernel compiled or loaded from the cache in a step adds one.
STEPS_COMPILE_NOTHING = r"""
import gc, json, sys
from numba.core.dispatcher import Dispatcher
from lidar_fmu.cosim.fmu_host import FmuInstance
from lidar_fmu.osi.trace import read_trace
from lidar_fmu.tools.replay import fmu_parameters, load_scenario

def signatures():
    return {f"{d.py_func.__module__}.{d.py_func.__qualname__}": len(d.overloads)
            for d in gc.get_objects() if isinstance(d, Dispatcher) and d.overloads}

fmu_path, folder = sys.argv[1:3]
scenario = load_scenario(folder)
views = list(read_trace(scenario["trace"]))[:3]
with FmuInstance(fmu_path, fmu_parameters(scenario, folder)) as fmu:
    before = signatures()
    for k, view in enumerate(views):
        assert fmu.step(view, 0.1 * k, 0.1).valid
    after = signatures()
    print(json.dumps({"new": sorted(set(after.items()) - set(before.items())), "messages": fmu.messages}))
"""


def _python(script, *argv, env=None):
    env = (env or os.environ) | {"PYTHONPATH": os.pathsep.join([os.path.abspath(SRC),
                                                                 os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, *map(str, [*script, *argv])], env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.mark.parametrize("ground_truth_only", [False, True], ids=["meshes", "ground-truth-only"])
def test_initialization_says_it_readied_the_kernels_and_the_first_steps_compile_nothing(fmu_path, tmp_path,
                                                                                        ground_truth_only):
    """The demo street as meshes, and as its ground truth alone (the road, signs and class meshes built in the
    first step: the world's kernels too were ready)."""
    folder = make_demo_scenario(tmp_path / "demo", frames=3, ground_truth_only=ground_truth_only)
    result = json.loads(_python(["-c", STEPS_COMPILE_NOTHING], fmu_path, folder).stdout.splitlines()[-1])
    assert result["new"] == []  # every kernel of the street, its glass and the moving cars was ready
    said = [text for status, text in result["messages"] if KERNEL_LINE.match(text)]
    assert len(said) == 1 and ["OK", said[0]] in result["messages"]  # at INFO level, once


def test_the_warm_up_changes_nothing_the_model_sends(tmp_path):
    """A warmed-up model's SensorData, noise included, is a fresh model's: its frame counter, clock and scene are
    its own."""
    options = {"sensor": SMALL_SENSOR | {"noise": {"range_sigma_m": 0.05, "dropout": 0.1, "seed": 7},
                                         "motion_distortion": True}}
    warmed, fresh = OsiSensorModel(**options), OsiSensorModel(**options)
    done = warm_up(warmed, options)
    assert done.problem == "" and KERNEL_LINE.match(done.message())
    for k, view in enumerate(list(read_trace(SHARED_TRACE))[:3]):
        ours, theirs = warmed.step(view, 0.1 * (k + 1)), fresh.step(view, 0.1 * (k + 1))
        assert ours.valid and ours.count > 0
        assert bytes(ours.sensor_data) == bytes(theirs.sensor_data)
    assert not np.isin(warmed.scene.instance_ids, fresh.scene.instance_ids, invert=True).any()


def test_a_warm_up_that_cannot_step_says_so_and_never_raises():
    model = OsiSensorModel(sensor=SMALL_SENSOR)
    done = warm_up(model, {"sensor": SMALL_SENSOR, "backend": "no_such_backend"})
    assert done.problem and done.message().startswith("warming up the kernels failed")


@pytest.mark.slow
def test_a_first_run_says_it_compiles_and_times_its_scan_apart(cold_start, tmp_path):
    """Empty Numba and lidar-fmu caches, as on a fresh clone (the session's cold start: conftest.py): the replay's
    bar names the compile while the FMU initializes and the FMU says what it took; a scan after it finds the kernels
    cached and times itself alone."""
    assert cold_start["cached_before"] == "False"
    replay = cold_start["replay"]
    assert "compiling kernels once" in replay.stderr  # the progress bar's text while the FMU initializes
    assert re.search(r"FMU: \[OK\] compiled the kernels in [\d.]+ s", replay.stdout), replay.stdout
    spec = tmp_path / "small.json"
    spec.write_text(json.dumps(SMALL_SENSOR))
    mesh = tmp_path / "wall.obj"
    mesh.write_text("v 5 -5 -5\nv 5 5 -5\nv 5 5 5\nv 5 -5 5\nf 1 2 3\nf 1 3 4\n")
    scan = _python(["-m", "lidar_fmu", "scan", "--mesh", mesh, "--sensor", spec, "-o", tmp_path / "wall.pcd"],
                   env=cold_start["env"])
    assert "compiling" not in scan.stderr + scan.stdout and re.search(r"cast=[\d.]+ms points=[\d.]+ms", scan.stdout)


def test_kernels_cached_once_a_scan_ran_here():
    OsiSensorModel(sensor=SMALL_SENSOR).step(next(iter(read_trace(SHARED_TRACE))), 0.1)
    assert kernels_cached()


# The same count for an OsiSensorModel of an FMCW sensor (radial velocity with noise), warmed up, then stepped.
FMCW_STEPS_COMPILE_NOTHING = r"""
import gc, json, sys
from numba.core.dispatcher import Dispatcher
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.cosim.warm_up import warm_up
from lidar_fmu.osi.trace import read_trace

def signatures():
    return {f"{d.py_func.__module__}.{d.py_func.__qualname__}": len(d.overloads)
            for d in gc.get_objects() if isinstance(d, Dispatcher) and d.overloads}

options = {"sensor": json.loads(sys.argv[2])}
model = OsiSensorModel(**options)
assert warm_up(model, options).problem == ""
before = signatures()
for k, view in enumerate(list(read_trace(sys.argv[1]))[:3]):
    assert model.step(view, 0.1 * (k + 1)).valid
print(json.dumps(sorted(set(signatures().items()) - set(before.items()))))
"""


def test_an_fmcw_sensors_warm_up_readies_its_radial_velocity_pass():
    spec = SMALL_SENSOR | {"radial_velocity": {"resolution_m_s": 0.01, "sigma_m_s": 0.05}, "noise": True,
                           "range_accuracy_m": 0.02}
    done = _python(["-c", FMCW_STEPS_COMPILE_NOTHING], SHARED_TRACE, json.dumps(spec))
    assert json.loads(done.stdout.splitlines()[-1]) == []
