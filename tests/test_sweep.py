"""lidar-fmu sweep: the crossing, serial-identical outputs on a LocalCluster and on an external Dask scheduler,
resume, and faults (a broken scenario, a worker that dies) that never sink the other runs."""
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
    ({"scenarios": ["a"], "sensors": ["velodyne_vlp16"], "mountings": [{"pos": [0, 0, 1]}]}, "a mounting must be"),
    ({"scenarios": ["a"], "sensors": ["velodyne_vlp16"], "spec": {"noise": "datasheet"}}, "non-empty list of values"),
    ({"scenarios": ["a"], "sensors": [3]}, "a sensor must be"),
])
def test_plan_refuses_bad_sweeps_by_name(sweep, message):
    with pytest.raises(UserError, match=message):
        plan_runs(sweep, "/base")


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
    assert main(["replay", str(folder), "-o", str(out), "--frames", str(FRAMES), "-q"]) == 0
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
    printed = capsys.readouterr().out
    assert "on LocalCluster, 2 workers" in printed and "% Completed" in printed  # Dask's progress bar
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
    env = os.environ | {"PYTHONPATH": os.pathsep.join([os.path.abspath(SRC), os.environ.get("PYTHONPATH", "")])}
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
