"""Two sensor models stepped from two threads at once: no abort, and the same data as one thread alone.

Numba's ``workqueue`` threading layer aborts the process (SIGABRT) when two
threads enter parallel kernels at once, and Numba falls back to it where
neither GNU OpenMP (libgomp) nor TBB loads. :mod:`lidar_fmu.parallel` picks a
thread-safe layer, or serialises scans where there is none. Each run is a
subprocess, so an abort fails the test instead of killing pytest.
"""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

TESTS = pathlib.Path(__file__).parent

SCRIPT = textwrap.dedent('''
    import sys, threading
    if sys.argv[2] == "no-libgomp":  # what Numba sees without libgomp (and without TBB, as here)
        sys.modules["numba.np.ufunc.omppool"] = None
        sys.modules["numba.np.ufunc.tbbpool"] = None
    sys.path.insert(0, sys.argv[3])
    import numba
    from helpers.osi_views import sensor_view

    FRAMES = 50
    SPEC = {"vertical_fov_deg": [-15, 15], "channels": 16, "horizontal_samples": 720,
            "horizontal_fov_deg": [180, -180], "max_range_m": 100}
    CAR = (4.0, 1.8, 1.5)

    def views(k):  # a different street per instance, cars moving every frame
        return [sensor_view([(10, (12.0 + 0.2 * i, 3.0 * k, 0.75), (0, 0, 0.02 * i), CAR, ""),
                             (11, (-8.0, 5.0 - 0.1 * i, 0.75), (0, 0, 0), CAR, ""),
                             (12, (3.0, -7.0 - k, 0.9), (0, 0, 0.5), (4.6, 1.9, 1.8), "")], 0.1 * (i + 1))
                for i in range(FRAMES)]

    if sys.argv[1] == "models":
        from lidar_fmu.cosim.sensor_model import OsiSensorModel

        def run(k):
            model = OsiSensorModel(sensor=SPEC, warn=lambda message: None)
            out = []
            for i, view in enumerate(views(k)):
                result = model.step(view, 0.1 * (i + 1))
                out.append((result.valid, result.count, bytes(result.sensor_data)))
            return out
    else:
        import atexit, json, os, shutil, tempfile
        from fmpy import extract
        from lidar_fmu.cosim.fmu_host import FmuInstance

        folder = tempfile.mkdtemp()
        atexit.register(shutil.rmtree, folder, True)  # the spec and the unpacked FMU go with the process
        spec = os.path.join(folder, "spec.json")
        with open(spec, "w") as f:
            json.dump(SPEC, f)
        unzipped = extract(sys.argv[4], os.path.join(folder, "fmu"))  # one FMU, two instances, as a master loads it

        def run(k):
            with FmuInstance(sys.argv[4], {"sensor": spec}, instance_name=f"lidar{k}", unzip_dir=unzipped) as fmu:
                out = []
                for i, view in enumerate(views(k)):
                    o = fmu.step(view, 0.1 * i, 0.1)
                    out.append((o.valid, o.count, o.sensor_data))
                return out

    alone = [run(0), run(1)]
    together = [None, None]

    def worker(k):
        together[k] = run(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(valid and count > 0 for out in alone for valid, count, _ in out)
    assert alone[0] != alone[1]
    assert together == alone, "two threads gave other data than one"
    from lidar_fmu import parallel
    print("layer", numba.threading_layer(), "serialised", parallel.serialised())
''')


def run_script(what: str, layers: str, fmu_path="", env=None) -> str:
    result = subprocess.run([sys.executable, "-c", SCRIPT, what, layers, str(TESTS), str(fmu_path)],
                            capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})
    assert result.returncode == 0, f"exit code {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"
    return result.stdout


def test_two_models_on_two_threads():
    out = run_script("models", "as-installed")
    assert "serialised False" in out or "layer workqueue serialised True" in out


def test_two_models_on_two_threads_without_a_threadsafe_layer():
    """No libgomp, no TBB: Numba would pick workqueue and abort; scans take turns instead."""
    assert "layer workqueue serialised True" in run_script("models", "no-libgomp")


def test_two_models_on_two_threads_with_workqueue_requested():
    """A user's ``NUMBA_THREADING_LAYER=workqueue`` is kept, and made safe by taking turns."""
    assert "layer workqueue serialised True" in run_script("models", "as-installed",
                                                           env={"NUMBA_THREADING_LAYER": "workqueue"})


def test_two_fmu_instances_on_two_threads(fmu_path):
    run_script("fmus", "as-installed", fmu_path)


def test_two_fmu_instances_on_two_threads_without_a_threadsafe_layer(fmu_path):
    assert "layer workqueue serialised True" in run_script("fmus", "no-libgomp", fmu_path)


def test_threadsafe_layer_is_chosen_where_one_loads():
    """Here (libgomp present, as gcc brings it) the layer is OpenMP; never workqueue by default."""
    code = ("from lidar_fmu.parallel import threadsafe_layer, serialised;"
            "from numba.np.ufunc import omppool;"  # ImportError: no libgomp here, nothing to check
            "print(threadsafe_layer(), serialised())")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    if result.returncode and "omppool" in result.stderr:
        pytest.skip("no libgomp here")
    assert result.stdout.split() == ["omp", "False"], result.stderr


def test_idle_openmp_threads_sleep_unless_the_environment_says_otherwise():
    """Spinning threads would take the cores from whatever runs between two casts (parallel.py)."""
    import os
    import subprocess
    import sys

    code = "import os, lidar_fmu.raycast.embree4; print(os.environ.get('OMP_WAIT_POLICY'))"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "PASSIVE"
    out = subprocess.run([sys.executable, "-c", code], env=env | {"OMP_WAIT_POLICY": "active"}, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "active"


def test_helped_work_is_done_once_whether_helpers_come_or_not():
    """parallel.helped: the caller and its helpers claim shares of one piece of work; every share is done exactly
    once, and a helper that has not started when the caller is done never runs (the pool's threads held here)."""
    import threading
    import time

    from lidar_fmu import parallel

    def work(claims: list, done: list, lock: threading.Lock, shares: int) -> None:
        while True:
            with lock:
                share = claims[0]
                claims[0] += 1
            if share >= shares:
                return
            time.sleep(0.0002)
            done.append((share, threading.get_ident()))

    claims, done = [0], []
    parallel.helped(work, (claims, done, threading.Lock(), 300), 1)
    assert sorted(share for share, _ in done) == list(range(300))
    pool, gate = parallel._shared_pool(), threading.Event()
    held = [pool.submit(gate.wait, 60) for _ in range(pool._max_workers)]
    try:
        claims, done = [0], []
        parallel.helped(work, (claims, done, threading.Lock(), 50), 2)
        assert sorted(share for share, _ in done) == list(range(50))
        assert {thread for _, thread in done} == {threading.get_ident()}
        assert not any(future.done() for future in held)
    finally:
        gate.set()
        for future in held:
            future.result()
    assert claims == [50 + 1]  # the two called-off helpers never claimed


def test_a_helpers_error_is_raised_once_every_helper_has_stopped():
    """parallel.helped: an error in a helper reaches the caller, and only once the other started helper is done
    (none works on after the call has returned)."""
    import threading
    import time

    from lidar_fmu import parallel

    if parallel._shared_pool()._max_workers < 2:
        pytest.skip("one pool thread: two helpers cannot run at once")
    arrived, done, lock = threading.Semaphore(0), [], threading.Lock()

    def work() -> None:
        if threading.current_thread() is threading.main_thread():
            for _ in range(2):  # the caller holds on until both helpers run
                assert arrived.acquire(timeout=30)
            return
        with lock:
            first = not done
            if first:
                done.append("failed")
        arrived.release()
        if first:  # the first helper here fails at once, the second works on a little
            raise ValueError("a helper failed")
        time.sleep(0.1)
        done.append("finished")

    with pytest.raises(ValueError, match="a helper failed"):
        parallel.helped(work, (), 2)
    assert done == ["failed", "finished"]
