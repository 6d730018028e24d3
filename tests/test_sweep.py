"""lidar-fmu sweep: the crossing, serial-identical outputs on a LocalCluster (from a cold Numba cache too) and on
an external Dask scheduler, resume, faults (a broken scenario, invalid frames, a worker killed mid-run) that are
reported as failures and never sink the other runs, progress in a log, and no dashboard unless asked."""
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from helpers.fmu_inputs import SHARED_TRACE, SMALL_SENSOR
from helpers.osi_views import HOST_ID, sensor_view
from lidar_fmu.errors import UserError
from lidar_fmu.osi.trace import write_trace
from lidar_fmu.tools.cli import main
from lidar_fmu.tools.sweep import Run, RunOptions, SweepError, plan_runs, run_one, run_sweep

FRAMES = 2  # per run: the tests check identity, not throughput
SENSORS = [{"name": "small16", **SMALL_SENSOR},
           {"name": "tiny8", "vertical_fov_deg": [-10, 10], "channels": 8, "horizontal_samples": 180,
            "horizontal_fov_deg": [180, -180], "max_range_m": 60, "motion_distortion": False}]
NOISE = {"range_sigma_m": 0.02, "seed": 7}
SRC = os.path.join(os.path.dirname(__file__), os.pardir, "src")


# -- the crossing alone ---------------------------------------------------------------------------
def test_plan_crosses_every_axis_in_order():
    sweep = {"scenarios": ["a", "sub/b/scenario.yaml"], "sensors": ["velodyne_vlp16", "specs/wide.yaml",
                                                                      {"preset": "ouster_os1_128", "noise": "datasheet"}],
             "mountings": [{"name": "roof", "position_m": [1, 0, 2]}, {"position_m": [0, 0, 1]}],
             "weather": ["clear", {"name": "fog50", "fog_visibility_m": 50}], "spec": {"detection": ["threshold",
                                                                                                 "probabilistic"]},
             "frames": 3}
    runs = plan_runs(sweep, "/base")
    assert len(runs) == 2 * 3 * 2 * 2 * 2
    first, last = runs[0], runs[-1]
    assert first.name == "a__velodyne_vlp16__roof__clear__detection-threshold"
    assert last.name == "b__ouster_os1_128__mount1__fog50__detection-probabilistic"
    assert runs[1].name.endswith("__clear__detection-probabilistic")  # the last axis varies fastest
    assert first.scenario == "/base/a" and last.scenario == "/base/sub/b/scenario.yaml"
    assert runs[2 * 2 * 2].sensor == "/base/specs/wide.yaml"  # a spec file, relative to the sweep file
    assert first.mounting == {"position_m": [1, 0, 2]} and first.frames == 3
    assert first.spec == {"detection": "threshold"}  # clear weather leaves the sensor's own
    assert last.spec == {"weather": {"fog_visibility_m": 50}, "detection": "probabilistic"}
    assert last.labels == {"scenario": "b", "sensor": "ouster_os1_128", "mounting": "mount1", "weather": "fog50",
                           "detection": "detection-probabilistic"}
    # the run's scenario overrides: the preset resolved to a flat spec with the run's keys on top
    overrides = last.overrides()
    assert overrides["sensor"]["noise"] == "datasheet" and overrides["sensor"]["detection"] == "probabilistic"
    assert overrides["sensor"]["channels"] == 128 and overrides["mounting"] == {"position_m": [0, 0, 1]}
    # without spec keys the sensor goes in as written (a preset name stays a name)
    assert plan_runs({"scenarios": ["a"], "sensors": ["velodyne_vlp16"]}, "/b")[0].overrides() == {
        "sensor": "velodyne_vlp16"}


def test_the_example_sweep_file_plans_the_demo_with_four_lidars():
    from lidar_fmu.tools.sweep import load_sweep

    example = os.path.join(os.path.dirname(__file__), os.pardir, "scenarios", "sweep_demo.yaml")
    runs = plan_runs(*load_sweep(example))
    assert [run.name for run in runs] == ["demo__ouster_os1_128", "demo__ouster_os1_64", "demo__velodyne_hdl32e",
                                         "demo__velodyne_vlp16"]
    assert runs[0].scenario.endswith(os.path.join("out", "demo", "scenario")) and runs[0].frames == 40


@pytest.mark.parametrize("sweep, message", [
    ({"sensors": ["velodyne_vlp16"]}, "'scenarios' must be a non-empty list"),
    ({"scenarios": ["a"], "sensors": []}, "'sensors' must be a non-empty list"),
    ({"scenarios": ["a"], "sensors": ["velodyne_vlp16"], "frame": 2}, "unknown key.*frame"),
    ({"scenarios": ["a"], "sensors": ["velodyne_vlp16"], "frames": 0}, "'frames' must be a whole number"),
    ({"scenarios": ["a", "x/a"], "sensors": ["velodyne_vlp16"]}, "two runs would both write a__velodyne_vlp16/"),
    ({"scenarios": ["a"], "sensors": ["velodyne_vlp16"], "mountings": [{"pos": [0, 0, 1]}]},
     r"mountings\[0\]: unknown key 'pos'"),
    ({"scenarios": ["a"], "sensors": ["velodyne_vlp16"], "spec": {"noise": "datasheet"}}, "non-empty list of values"),
    ({"scenarios": ["a"], "sensors": [3]}, "a sensor must be"),
    # a mistyped preset is named as a preset, with the presets it resembles, not taken for a spec file's path
    ({"scenarios": ["a"], "sensors": ["velodyne_vlp16", "velodyne_vlp61"]},
     r"^sweep: sensors\[1\]: unknown sensor preset 'velodyne_vlp61'; did you mean velodyne_vlp16"),
    ({"scenarios": ["a"], "sensors": [{"preset": "ouster_os1_12"}]},
     r"^sweep: sensors\[0\]\.preset: unknown sensor preset 'ouster_os1_12'; did you mean ouster_os1_128"),
])
def test_plan_refuses_bad_sweeps_by_name(sweep, message):
    with pytest.raises(UserError, match=message):
        plan_runs(sweep, "/base")


def test_sensor_entries_that_are_files_stay_spec_files(tmp_path):
    """A spec file beside the sweep file without a suffix, a path and a missing ``.yaml`` are files, not presets."""
    (tmp_path / "mylidar").write_text(yaml.safe_dump(SENSORS[1]))
    runs = plan_runs({"scenarios": ["a"], "sensors": ["mylidar", "specs/wide", "gone.yaml"]}, str(tmp_path))
    assert [run.sensor for run in runs] == [str(tmp_path / name) for name in ("mylidar", "specs/wide", "gone.yaml")]


# -- small scenarios, and their serial replays as the reference -----------------------------------
def _scenario(folder, trace, sensor=None, **keys):
    folder.mkdir(parents=True)
    spec = {"trace": str(trace), "step_size_s": 0.1, **keys}
    if sensor is not None:
        spec["sensor"] = sensor
    (folder / "scenario.yaml").write_text(yaml.safe_dump(spec))
    return folder


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory):
    """Two small scenarios: the shared osi-validation trace, and boxes around a host driving along x."""
    base = tmp_path_factory.mktemp("scenarios")
    (base / "traces").mkdir()
    shutil.copy(SHARED_TRACE, base / "traces" / "shared.osi")
    cars = [(20, (14.0, -3.0, 0.9), (0, 0, 0.4), (4.6, 1.9, 1.8), ""),
            (21, (-9.0, 4.0, 0.9), (0, 0, -1.0), (4.2, 1.8, 1.6), "")]
    write_trace(base / "traces" / "boxes.osi",
                [sensor_view(cars, time_s=t, host=(HOST_ID, (2.0 * t, 0.0, 0.75), 0.0),
                             mounting=((1.0, 0.0, 1.2), (0.0, 0.0, 0.0))) for t in (0.1, 0.2, 0.3)])
    return {"shared": _scenario(base / "shared", base / "traces" / "shared.osi"),
            "boxes": _scenario(base / "boxes", base / "traces" / "boxes.osi")}


def _serial_replay(scenario_dir, out, sensor, **keys):
    """`lidar-fmu replay` of the scenario with ``sensor`` (and scenario ``keys``) written into its scenario.yaml."""
    spec = yaml.safe_load((scenario_dir / "scenario.yaml").read_text())
    folder = out.parent / f"{out.name}.scenario"
    _scenario(folder, spec.pop("trace"), sensor, name=scenario_dir.name, **(spec | keys))
    assert main(["replay", str(folder), "-o", str(out), "--frames", str(FRAMES), "-q",
                 "--trace-format", "osi"]) == 0  # a sweep's trace format
    return out


@pytest.fixture(scope="module")
def reference(scenarios, tmp_path_factory):
    """Serial replays of both scenarios with both sensors: run name → folder."""
    base = tmp_path_factory.mktemp("reference")
    return {f"{name}__{sensor['name']}": _serial_replay(folder, base / f"{name}__{sensor['name']}", sensor)
            for name, folder in scenarios.items() for sensor in SENSORS}


def _sweep_file(path, scenarios, sensors=SENSORS, **extra):
    path.write_text(yaml.safe_dump({"scenarios": [str(s) for s in scenarios], "sensors": sensors,
                                    "frames": FRAMES, **extra}))
    return path


def _outputs(folder):
    """What must be identical to the serial replay: SensorData bytes, PCD bytes, returns and objects per frame."""
    summary = json.loads((folder / "summary.json").read_text())
    pcds = {p.name: p.read_bytes() for p in sorted((folder / "frames").iterdir())}
    return {"sensordata": (folder / summary["sensordata_trace"]).read_bytes(), "pcds": pcds,
            "returns": summary["returns_per_frame"], "objects": summary["objects_per_frame"]}


def _rows(out):
    with open(out / "sweep.csv", newline="") as f:
        return {row["run"]: row for row in csv.DictReader(f)}


def _check_identical(out, reference, names):
    for name in names:
        ours, theirs = _outputs(out / name), _outputs(reference[name])
        assert len(ours["pcds"]) == FRAMES and sum(ours["returns"]) > 0
        assert ours == theirs, name
        # the same files (the SensorData trace's name carries the time it was written)
        stems = [sorted(p.name.split("_sd_")[-1] for p in folder.iterdir()) for folder in (out / name, reference[name])]
        assert stems[0] == stems[1]


@pytest.mark.slow
def test_local_cluster_sweep_is_the_serial_replay_and_resumes(scenarios, reference, tmp_path, capsys):
    sweep = _sweep_file(tmp_path / "sweep.yaml", scenarios.values())
    out = tmp_path / "out"
    assert main(["sweep", str(sweep), "-o", str(out), "--workers", "2"]) == 0
    printed = capsys.readouterr()
    assert "on LocalCluster, 2 workers" in printed.out
    # the progress, on stderr (no terminal here): one plain line per finished run
    assert "\r" not in printed.err and len([line for line in printed.err.splitlines() if ": ok (2 frames, " in line]) == 4
    _check_identical(out, reference, reference)
    rows = _rows(out)
    assert set(rows) == set(reference)
    for name, row in rows.items():
        summary = json.loads((reference[name] / "summary.json").read_text())
        assert row["status"] == "ok" and row["attempts"] == "1" and row["error"] == ""
        assert int(row["frames"]) == FRAMES and row["worker"].startswith("tcp://127.0.0.1:")
        assert float(row["returns_mean"]) == sum(summary["returns_per_frame"]) / FRAMES
        assert int(row["returns_max"]) == max(summary["returns_per_frame"])
        assert float(row["step_p50_ms"]) > 0 and float(row["peak_rss_mb"]) > 50
    assert rows["boxes__small16"]["objects_seen"] == "2" and rows["boxes__small16"]["scenario"] == "boxes"
    assert len({row["worker"] for row in rows.values()}) == 2  # both workers took runs
    assert (out / "sweep.png").stat().st_size > 10_000

    # resume: complete runs are skipped (their outputs untouched), one with a damaged output is redone
    stamps = {name: (out / name / "summary.json").stat().st_mtime_ns for name in reference}
    (out / "shared__tiny8" / "preview.gif").unlink()
    assert main(["sweep", str(sweep), "-o", str(out), "--serial", "-q"]) == 0
    rows = _rows(out)
    assert rows["shared__tiny8"]["status"] == "ok" and (out / "shared__tiny8" / "preview.gif").is_file()
    for name in set(reference) - {"shared__tiny8"}:
        assert rows[name]["status"] == "skipped" and float(rows[name]["returns_mean"]) > 0
        assert (out / name / "summary.json").stat().st_mtime_ns == stamps[name]
    _check_identical(out, reference, reference)
    # --force reruns everything
    assert main(["sweep", str(sweep), "-o", str(out), "--serial", "-q", "--force"]) == 0
    assert {row["status"] for row in _rows(out).values()} == {"ok"}


def test_overrides_are_the_scenario_file_keys(scenarios, tmp_path):
    """A mounting and spec keys from the sweep give what the same keys written into scenario.yaml give."""
    mounting = {"position_m": [1.5, 0.2, 1.6], "orientation_rad": [0.0, 0.05, 0.1]}
    sensor = SENSORS[0]
    sweep = _sweep_file(tmp_path / "sweep.yaml", [scenarios["boxes"]], [sensor],
                        mountings=[{"name": "high", **mounting}], spec={"noise": [NOISE]})
    rows = run_sweep(sweep, tmp_path / "out", serial=True, progress=False, echo=lambda line: None)
    name = "boxes__small16__high__noise-range_sigma_m0.02-seed7"
    assert [row["run"] for row in rows] == [name] and rows[0]["status"] == "ok"
    reference = _serial_replay(scenarios["boxes"], tmp_path / "reference", sensor | {"noise": NOISE},
                               mounting=mounting)
    ours, theirs = _outputs(tmp_path / "out" / name), _outputs(reference)
    assert ours == theirs
    plain = _serial_replay(scenarios["boxes"], tmp_path / "plain", sensor)
    assert _outputs(plain)["sensordata"] != ours["sensordata"]  # the overrides did change the run


# -- an external scheduler ------------------------------------------------------------------------
def _wait_for(path, process, timeout_s):
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{process.args} wrote no {path} within {timeout_s} s (exit {process.poll()})")
        time.sleep(0.2)


@pytest.mark.slow
def test_sweep_on_an_external_dask_scheduler(scenarios, reference, tmp_path):
    """`dask scheduler` and `dask worker` started here on 127.0.0.1; the sweep sends its runs there."""
    env = os.environ | {"PYTHONPATH": os.pathsep.join([os.path.abspath(SRC), os.environ.get("PYTHONPATH", "")]),
                        "DASK_TEMPORARY_DIRECTORY": str(tmp_path / "dask")}  # their scratch space: not in $TMPDIR
    scheduler_file = tmp_path / "scheduler.json"
    dask = [sys.executable, "-m", "dask"]
    log = open(tmp_path / "dask.log", "w")  # noqa: SIM115  (closed in finally)
    processes = []
    try:
        processes.append(subprocess.Popen(
            [*dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(scheduler_file)], env=env, stdout=log, stderr=subprocess.STDOUT))
        _wait_for(scheduler_file, processes[0], 60)
        address = json.loads(scheduler_file.read_text())["address"]
        processes.append(subprocess.Popen(
            [*dask, "worker", address, "--nthreads", "1", "--nworkers", "1", "--no-dashboard", "--host", "127.0.0.1",
             "--death-timeout", "60"], env=env, stdout=log, stderr=subprocess.STDOUT))
        sweep = _sweep_file(tmp_path / "sweep.yaml", [scenarios["shared"]])
        out = tmp_path / "out"
        assert main(["sweep", str(sweep), "-o", str(out), "--scheduler", address, "-q"]) == 0
        names = [f"shared__{sensor['name']}" for sensor in SENSORS]
        _check_identical(out, reference, names)
        rows = _rows(out)
        assert all(rows[name]["status"] == "ok" for name in names)
        assert len({rows[name]["worker"] for name in names}) == 1  # the one external worker
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in reversed(processes):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        log.close()


def test_an_unreachable_scheduler_is_one_clear_error(scenarios, tmp_path, capsys, monkeypatch):
    import socket

    import lidar_fmu.tools.sweep

    monkeypatch.setattr(lidar_fmu.tools.sweep, "CONNECT_TIMEOUT_S", 2.0)  # refused at once; Dask retries until then

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sweep = _sweep_file(tmp_path / "sweep.yaml", [scenarios["shared"]])
    assert main(["sweep", str(sweep), "-o", str(tmp_path / "out"), "--scheduler", f"tcp://127.0.0.1:{port}"]) == 2
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in capsys.readouterr().err


# -- faults ---------------------------------------------------------------------------------------
def dies_once(run: Run, out_dir: str, options: RunOptions) -> dict:
    """Kill the worker process the first time it is given the run named ``*__tiny8`` of scenario shared."""
    marker = os.path.join(out_dir, "killed-once")
    if run.name == "shared__tiny8" and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(3)  # the worker process dies mid-task, as on an out-of-memory kill
    return run_one(run, out_dir, options)


@pytest.mark.slow
def test_a_broken_scenario_and_a_dead_worker_sink_no_other_run(scenarios, reference, tmp_path):
    import cloudpickle

    import test_sweep

    broken = _scenario(tmp_path / "broken", scenarios["shared"] / ".." / "traces" / "shared.osi",
                       environment="street.obj")
    (broken / "street.obj").write_text("v 0 0 0\nv 1 nonsense\nf 1 2 3\n")
    sweep = _sweep_file(tmp_path / "sweep.yaml", [scenarios["shared"], broken, tmp_path / "no_such_scenario"])
    out = tmp_path / "out"
    cloudpickle.register_pickle_by_value(test_sweep)  # the workers cannot import this test module by name
    try:
        with pytest.raises(SweepError) as caught:
            run_sweep(sweep, out, workers=2, progress=False, task=dies_once, echo=lambda line: None)
    finally:
        cloudpickle.unregister_pickle_by_value(test_sweep)
    failed = {f"{s}__{sensor['name']}" for s in ("broken", "no_such_scenario") for sensor in SENSORS}
    assert set(caught.value.failed) == failed and "4 of 6 runs failed" in str(caught.value)
    rows = _rows(out)
    for name in failed:  # their own errors (a run that shared the dying worker was simply run again)
        assert rows[name]["status"] == "failed" and "worker" not in rows[name]["error"]
    assert "street.obj" in rows["broken__small16"]["error"]
    assert "scenario file not found" in rows["no_such_scenario__tiny8"]["error"]
    assert rows["shared__tiny8"]["attempts"] == "2" and rows["shared__tiny8"]["status"] == "ok"  # retried once
    names = ["shared__small16", "shared__tiny8"]
    _check_identical(out, reference, names)
    assert not math.isnan(float(rows["shared__small16"]["returns_mean"]))


def test_a_replay_whose_fmu_cannot_start_says_why_in_one_line(tmp_path, capsys):
    """The FMU refusing its parameters (here an unreadable environment mesh) ends `replay` with the reason the FMU
    logged (exit 2), not an FMI status code and a traceback."""
    broken = _scenario(tmp_path / "broken", SHARED_TRACE, SMALL_SENSOR, environment="street.obj")
    (broken / "street.obj").write_text("v 0 0 0\nv 1 nonsense\nf 1 2 3\n")
    assert main(["replay", str(broken), "-o", str(tmp_path / "out"), "--frames", "1", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "the FMU cannot start" in err and "cannot read mesh" in err and "street.obj" in err


# -- honest reports: invalid frames, progress in a log ---------------------------------------------
def _views_of_a_missing_host(cars, times_s):
    """SensorViews naming a host vehicle that is not in their ground truth: every step of the FMU is invalid."""
    from osi3.osi_sensorview_pb2 import SensorView

    views = []
    for t in times_s:
        view = SensorView.FromString(sensor_view(cars, time_s=t, host=None))
        view.host_vehicle_id.value = view.global_ground_truth.host_vehicle_id.value = 77
        views.append(view.SerializeToString())
    return views


def test_a_run_with_invalid_frames_fails_and_runs_again(scenarios, tmp_path, capsys):
    """Every step invalid (the host vehicle is not in the ground truth): the run is failed with the FMU's reason,
    the sweep exits 2, its log has one plain line per run, and --resume runs it again (and only it)."""
    cars = [(20, (14.0, -3.0, 0.9), (0, 0, 0.4), (4.6, 1.9, 1.8), "")]
    write_trace(tmp_path / "nohost.osi", _views_of_a_missing_host(cars, (0.1, 0.2)))
    nohost = _scenario(tmp_path / "nohost", tmp_path / "nohost.osi")
    sweep = _sweep_file(tmp_path / "sweep.yaml", [scenarios["boxes"], nohost], [SENSORS[1]])
    out = tmp_path / "out"
    assert main(["sweep", str(sweep), "-o", str(out), "--serial"]) == 2
    captured = capsys.readouterr()
    rows = _rows(out)
    assert rows["boxes__tiny8"]["status"] == "ok" and float(rows["boxes__tiny8"]["returns_mean"]) > 0
    failed = rows["nohost__tiny8"]
    assert failed["status"] == "failed" and failed["frames"] == str(FRAMES)  # replayed, and said so
    assert failed["error"] == f"{FRAMES} of {FRAMES} frames invalid, the first (frame 0): t=0.100000s: host vehicle " \
                              "77 is not in the ground truth"
    assert "1 of 2 runs failed: nohost__tiny8" in captured.err and "FAILED nohost__tiny8" in captured.out
    # stderr is no terminal here: one plain line per finished run, no carriage returns
    assert "\r" not in captured.err
    assert "sweep: 1/2 boxes__tiny8: ok (2 frames, " in captured.err
    assert "sweep: 2/2 nohost__tiny8: failed (2 of 2 frames invalid" in captured.err

    stamps = {name: (out / name / "summary.json").stat().st_mtime_ns for name in rows}
    assert main(["sweep", str(sweep), "-o", str(out), "--serial", "--resume"]) == 2
    assert "2 runs (1 complete from an earlier sweep, skipped), 1 to run" in capsys.readouterr().out
    rows = _rows(out)
    assert rows["boxes__tiny8"]["status"] == "skipped" and rows["nohost__tiny8"]["status"] == "failed"
    assert (out / "boxes__tiny8" / "summary.json").stat().st_mtime_ns == stamps["boxes__tiny8"]
    assert (out / "nohost__tiny8" / "summary.json").stat().st_mtime_ns != stamps["nohost__tiny8"]


#: the kernels a cold sweep's workers compile (the fog's, lidar_fmu/physics/weather.py): the rest they load from
#: the session's cold start (each worker compiling every kernel took 60 s of the suite's time on 2 cores)
WORKERS_COMPILE = "weather."


@pytest.mark.slow
def test_a_cold_numba_cache_on_a_local_cluster_is_the_serial_replay(scenarios, cold_start, tmp_path):
    """`lidar-fmu sweep --workers 2` as a user starts it, with kernels missing from Numba's cache (the fog's: the
    rest from the session's cold start) and lidar-fmu's cache empty: every worker compiles them in its FMU's
    warm-up and gives the serial replay's bytes; stderr, a file here, gets one plain line per run."""
    weather = [{"name": "clear"}, {"name": "fog50", "fog_visibility_m": 50}]
    sweep = _sweep_file(tmp_path / "sweep.yaml", [scenarios["boxes"]], [SENSORS[1]],
                        weather=["clear", weather[1]])
    out = tmp_path / "out"
    numba_cache = tmp_path / "numba-cache"
    shutil.copytree(cold_start["env"]["NUMBA_CACHE_DIR"], numba_cache)
    taken_out = [p for p in numba_cache.rglob(f"{WORKERS_COMPILE}*") if p.suffix in (".nbi", ".nbc")]
    assert any(p.suffix == ".nbi" for p in taken_out)
    for path in taken_out:
        path.unlink()
    env = os.environ | {"NUMBA_CACHE_DIR": str(numba_cache), "LIDAR_FMU_CACHE": str(tmp_path / "cache"),
                        "PYTHONPATH": os.pathsep.join([os.path.abspath(SRC), os.environ.get("PYTHONPATH", "")])}
    env.pop("NUMBA_NUM_THREADS", None)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "lidar_fmu", "sweep", str(sweep), "-o", str(out), "--workers", "2"],
                          env=env, capture_output=True, text=True, timeout=900)
    print(f"cold sweep: {time.perf_counter() - started:.1f} s")
    assert done.returncode == 0, done.stdout + done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("sweep: ")]
    assert "\r" not in done.stderr and len(progress) == 2, done.stderr  # one line per run
    compiled = {p.name for p in numba_cache.rglob(f"{WORKERS_COMPILE}*.nbi")}
    assert compiled >= {p.name for p in taken_out if p.suffix == ".nbi"}  # the workers compiled them again
    rows = _rows(out)
    for entry in weather:
        name = f"boxes__tiny8__{entry['name']}"
        keys = {k: v for k, v in entry.items() if k != "name"}
        reference = _serial_replay(scenarios["boxes"], tmp_path / f"serial-{name}",
                                   SENSORS[1] | ({"weather": keys} if keys else {}))
        assert rows[name]["status"] == "ok" and rows[name]["error"] == ""
        assert _outputs(out / name) == _outputs(reference)
        assert sum(_outputs(reference)["returns"]) > 0


# -- a worker killed mid-run ----------------------------------------------------------------------
KILLED_ONCE, KILLED_ALWAYS = "shared__tiny8", "boxes__small16"


def killed_mid_run(run: Run, out_dir: str, options: RunOptions) -> dict:
    """The real run, whose worker process is killed (SIGKILL, as the out-of-memory killer does) once its first
    frame is on disk: for KILLED_ONCE on its first attempt, for KILLED_ALWAYS on every attempt."""
    import signal
    import threading

    marker = os.path.join(out_dir, f"killed-{run.name}")
    if run.name == KILLED_ALWAYS or (run.name == KILLED_ONCE and not os.path.exists(marker)):
        first_frame = os.path.join(out_dir, run.name, "frames", "frame_0000.pcd")

        def kill_when_the_first_frame_is_written():
            while not os.path.exists(first_frame):
                time.sleep(0.001)
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=kill_when_the_first_frame_is_written, daemon=True).start()
    return run_one(run, out_dir, options)


@pytest.mark.slow
def test_a_worker_killed_mid_run_is_run_again_or_failed_never_ok(scenarios, reference, tmp_path, capsys):
    import cloudpickle

    import test_sweep

    sweep = _sweep_file(tmp_path / "sweep.yaml", scenarios.values())
    out = tmp_path / "out"
    cloudpickle.register_pickle_by_value(test_sweep)  # the workers cannot import this test module by name
    try:
        with pytest.raises(SweepError) as caught:
            run_sweep(sweep, out, workers=2, task=killed_mid_run, echo=lambda line: None)
    finally:
        cloudpickle.unregister_pickle_by_value(test_sweep)
    assert caught.value.failed == [KILLED_ALWAYS]
    rows = _rows(out)
    assert rows[KILLED_ALWAYS]["status"] == "failed" and rows[KILLED_ALWAYS]["attempts"] == "2"
    assert rows[KILLED_ALWAYS]["error"].startswith("its worker died twice: ")
    assert rows[KILLED_ONCE]["status"] == "ok" and rows[KILLED_ONCE]["attempts"] == "2"  # run again, from scratch
    # the sweep hands a worker one run at a time: a worker's death takes no other run with it
    ok = set(reference) - {KILLED_ALWAYS}
    assert all(rows[name]["status"] == "ok" and rows[name]["attempts"] == "1" for name in ok - {KILLED_ONCE})
    _check_identical(out, reference, ok)
    assert f"sweep: {KILLED_ALWAYS}: its worker died; running it once more" in capsys.readouterr().err

    # --resume runs the failed run alone, to the serial replay's bytes
    stamps = {name: (out / name / "summary.json").stat().st_mtime_ns for name in ok}
    assert main(["sweep", str(sweep), "-o", str(out), "--serial", "--resume", "-q"]) == 0
    rows = _rows(out)
    assert all(rows[name]["status"] == ("skipped" if name in ok else "ok") for name in rows)
    assert all((out / name / "summary.json").stat().st_mtime_ns == stamp for name, stamp in stamps.items())
    _check_identical(out, reference, reference)


# -- Dask's dashboard -----------------------------------------------------------------------------
def _page(port, path):
    """The HTTP status of a page of 127.0.0.1:``port``."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=20) as page:
            return page.status
    except urllib.error.HTTPError as exc:
        return exc.code


def scheduler_pages(run: Run, out_dir: str, options: RunOptions) -> dict:
    """Not a replay: which port the scheduler's HTTP server (Dask's dashboard, when there is one) listens on, and
    what its info and dashboard pages answer, seen from a worker while the cluster lives."""
    from distributed import get_client

    port = get_client().scheduler_info()["services"]["dashboard"]
    return {"run": run.name, "status": "ok", "http_port": port, "info": _page(port, "/info/main/workers.html"),
            "dashboard": _page(port, "/status")}


@pytest.mark.slow
def test_no_dashboard_unless_asked(scenarios, tmp_path, monkeypatch):
    """Dask's scheduler serves pages on 8787 by default; the sweep's serves none, unless --dashboard asks."""
    import socket

    import cloudpickle

    import test_sweep

    sweep = _sweep_file(tmp_path / "sweep.yaml", [scenarios["boxes"]], [SENSORS[1]])
    cloudpickle.register_pickle_by_value(test_sweep)
    try:
        rows = run_sweep(sweep, tmp_path / "out", workers=1, progress=False, task=scheduler_pages,
                         echo=lambda line: None)
        assert rows[0]["http_port"] != 8787 and rows[0]["info"] == 404 and rows[0]["dashboard"] == 404

        with socket.socket() as s:  # a free port for the dashboard asked for
            s.bind(("127.0.0.1", 0))
            asked = s.getsockname()[1]
        lines = []
        rows = run_sweep(sweep, tmp_path / "out", workers=1, progress=False, force=True, dashboard=f"127.0.0.1:{asked}",
                         task=scheduler_pages, echo=lines.append)
        assert rows[0]["http_port"] == asked and rows[0]["info"] == 200 and rows[0]["dashboard"] == 200
        assert f"sweep: Dask's dashboard at http://127.0.0.1:{asked}/status" in lines
    finally:
        cloudpickle.unregister_pickle_by_value(test_sweep)


def test_a_dashboard_is_refused_where_there_is_none(scenarios, tmp_path, capsys, monkeypatch):
    sweep = _sweep_file(tmp_path / "sweep.yaml", [scenarios["boxes"]], [SENSORS[1]])
    assert main(["sweep", str(sweep), "-o", str(tmp_path / "out"), "--serial", "--dashboard"]) == 2
    assert "--dashboard is for the sweep's own LocalCluster" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "bokeh", None)  # as where Bokeh is not installed
    assert main(["sweep", str(sweep), "-o", str(tmp_path / "out"), "--dashboard"]) == 2
    assert capsys.readouterr().err == ("lidar-fmu: error: --dashboard needs Bokeh, which Dask draws its dashboard "
                                       "with: pip install 'bokeh>=3.1'\n")
    assert not (tmp_path / "out").exists()


def test_a_rig_sensor_sweeps_as_one_run_with_every_lidar_counted(scenarios, tmp_path):
    """A rig goes wherever a lidar goes: its run is ok, counts every lidar's returns, and resumes as complete."""
    front = {"name": "front", **SENSORS[1], "mounting": {"xyz_m": [1.0, 0.0, 1.2]}}
    rear = {"name": "rear", **SENSORS[1], "mounting": {"xyz_m": [-1.0, 0.0, 1.2], "rpy_deg": [0, 0, 180]}}
    (tmp_path / "rig.yaml").write_text(yaml.safe_dump({"sensors": [front, rear]}))
    sweep = _sweep_file(tmp_path / "sweep.yaml", [scenarios["boxes"]], sensors=["rig.yaml"])
    out = tmp_path / "out"
    assert main(["sweep", str(sweep), "-o", str(out), "--serial", "-q"]) == 0
    (row,) = _rows(out).values()
    assert row["status"] == "ok", row
    summary = json.loads((out / row["run"] / "summary.json").read_text())
    per_lidar = [lidar["returns_per_frame"] for lidar in summary["lidars"]]
    assert len(per_lidar) == 2 and all(sum(returns) > 0 for returns in per_lidar)
    assert float(row["returns_mean"]) == round(sum(map(sum, per_lidar)) / FRAMES, 1)
    assert len(summary["sensordata_trace"]) == 2
    assert all((out / row["run"] / trace).is_file() for trace in summary["sensordata_trace"])
    assert main(["sweep", str(sweep), "-o", str(out), "--serial", "-q"]) == 0
    assert _rows(out)[row["run"]]["status"] == "skipped"
