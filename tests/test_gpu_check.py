"""scripts/gpu_check.sh, the prepared GPU run: its dry run on Numba's CUDA simulator writes every result, a broken
step stops it by name, and its parts (the parity's comparison, the report, the bench's sections) alone."""
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
#: what the device tool brings back: at most 8 files, names of letters, digits, '.', '_' and '-'
MOST_FILES = 8


def _script_module(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dry_run(tmp_path, **env):
    out = tmp_path / "out"
    environment = {**os.environ, "GPU_CHECK_DRY_RUN": "1", "OUT": str(out), "PYTHON": sys.executable,
                   "GPU_CHECK_WORK": str(tmp_path / "work"), **env}
    done = subprocess.run(["bash", str(SCRIPT)], env=environment, capture_output=True, text=True, timeout=1800,
                          check=False)
    steps = [line.split("\t") for line in (out / "steps.tsv").read_text().splitlines()]
    return done, out, {row[0]: row[1] for row in steps}


@pytest.mark.slow
def test_the_dry_run_goes_through_every_step_and_writes_every_result(tmp_path):
    done, out, steps = _dry_run(tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert steps == {"environment": "skipped (dry run: no nvidia-smi)",
                     "install": "skipped (dry run: the interpreter's own environment)", "smoke": "ok", "tests": "ok",
                     "parity": "ok", "bench-cuda": "ok", "bench-cpu": "ok"}, steps
    names = sorted(p.name for p in out.iterdir())
    assert names == ["bench_cuda.json", "bench_embree.json", "env.txt", "gpu_check.log", "parity.json", "report.md",
                     "steps.tsv"] and len(names) <= MOST_FILES
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", name) for name in names)
    log = (out / "gpu_check.log").read_text()
    assert "all steps passed" in log and "passed" in log and "Numba's CUDA simulator" in log

    parity = json.loads((out / "parity.json").read_text())
    assert parity["pass"] and parity["device"] == "Numba's CUDA simulator" and set(parity["runs"]) == {"moving",
                                                                                                      "still"}
    assert parity["ground_truth_only"]  # the dry run's street: no meshes to load in each of the four replays
    for run in parity["runs"].values():
        assert run["rays_returning"] > 10 and run["rays_equal"] + run["rays_close"] == run["rays_returning"]
    assert parity["runs"]["still"]["cast"]["rays"] == 21  # the tiny sensor's rays, cast again by both backends

    gpu, cpu = (json.loads((out / f"bench_{name}.json").read_text()) for name in ("cuda", "embree"))
    assert gpu["info"]["backend"] == "cuda" and cpu["info"]["backend"] == "embree"
    assert {r["scene"] for r in gpu["gpu"]} == {"street", "sphere"} and not cpu["gpu"]
    # the dry run's CUDA bench: the backend's own parts (the simulator takes a second a frame); the CPU's: every part
    assert len(gpu["cast"]) == 2 and len(gpu["echoes"]) == 5 and not gpu["motion"]
    assert len(cpu["cast"]) == 2 and [r["slices"] for r in cpu["motion"]] == [1, 1, 1, 4, 10, 32]
    assert len(cpu["echoes"]) == 5 and cpu["step"]["fmu_step_ms"] > 0 and cpu["rig"]["lidars"] == 4
    assert cpu["ground_truth"]["road_km"] == 1 and cpu["ground_truth"]["road"]["auto"]["triangles"] > 50_000
    assert cpu["ground_truth"]["road"]["urban"]["triangles"] > cpu["ground_truth"]["road"]["auto"]["triangles"]

    report = (out / "report.md").read_text()
    assert "**parity holds**" in report and "| bench-cpu | ok |" in report
    assert "| first step of a 1 km road from ground truth |" in report
    figures = [line for line in report.splitlines() if line.startswith("| ") and " ms" in line]
    assert len(figures) >= 12 and all(line.count(" ms") + line.count(" s |") >= 1 for line in figures)
    # (the dry run's CUDA bench has no doStep: its column says so; the CPU's has the stages)
    assert re.search(r"\| FMU doStep[^|]*\| ≤ 5 ms \| – \| [\d.]+ ms \(decode [\d.]+, scene", report)


@pytest.mark.slow
def test_a_broken_step_stops_the_run_names_itself_and_the_report_is_still_written(tmp_path):
    done, out, steps = _dry_run(tmp_path, GPU_CHECK_TESTS="tests/no_such_test_file.py")
    assert done.returncode == 1
    assert steps["smoke"] == "ok" and steps["tests"].startswith("failed (exit ") and "parity" not in steps
    log = (out / "gpu_check.log").read_text()
    assert "step 'tests' FAILED" in log and "FAILED at step 'tests'" in log
    report = (out / "report.md").read_text()
    assert "| parity | not run |" in report and "| bench-cuda | not run |" in report
    assert "not measured (the parity step did not finish)" in report


def test_a_step_past_the_budget_fails_by_name(tmp_path):
    """A budget spent before a step starts is that step's failure, not a silent skip."""
    done, out, steps = _dry_run(tmp_path, GPU_CHECK_BUDGET_S="2")
    assert done.returncode == 1 and steps["smoke"] == "no time left", steps
    assert "step 'smoke' FAILED: the 2 s budget is spent" in (out / "gpu_check.log").read_text()


def test_parity_counts_equal_close_and_differing_rays():
    parity = _script_module("gpu_parity")
    echoes = 1
    # rays 0..4 on the CPU; on the GPU ray 1 is 2e-6 m off (equal), ray 2 3e-5 m at 50 m (close), ray 3 another
    # object, ray 4 missing, ray 5 a return only the GPU has
    cpu = (np.array([0, 1, 2, 3, 4]), np.array([10.0, 20.0, 50.0, 5.0, 7.0]), np.array([1, 1, 2, 3, 4], np.uint64))
    gpu = (np.array([0, 1, 2, 3, 5]), np.array([10.0, 20.000002, 50.00003, 5.0, 9.0]),
           np.array([1, 1, 2, 8, 4], np.uint64))
    c = parity.compare_frame(cpu, gpu, echoes, 1e-5)
    assert c["rays_returning"] == 6 and list(c["close"]) == [2] and list(c["differ"]) == [3, 4, 5]
    assert list(c["hit_only"][0]) == [4] and list(c["hit_only"][1]) == [5] and list(c["object_off"]) == [3]
    assert c["max_gap_m"] == pytest.approx(3e-5, rel=1e-3)
    far = parity.compare_frame(cpu, (cpu[0], cpu[1] + np.array([0, 0, 0.01, 0, 0]), cpu[2]), echoes, 1e-5)
    assert list(far["range_off"]) == [2] and list(far["differ"]) == [2]  # 1 cm at 50 m: beyond 1e-4·(1 + r)


def test_the_report_reads_what_is_there(tmp_path):
    (tmp_path / "steps.tsv").write_text("environment\tok\t0\t1\ninstall\tfailed (exit 1)\t1\t30\n")
    assert _script_module("gpu_report").main(str(tmp_path)) == 0
    report = (tmp_path / "report.md").read_text()
    assert "| install | failed (exit 1) | 1 | 30 |" in report and "| smoke | not run | – | – |" in report
    assert "| batched rays, 1 M-triangle sphere | ≥ 2 G rays/s (Rmagine: 4.2 G, RTX 2070 S, OptiX) | – | – |" in report


def test_bench_sections_are_checked():
    from lidar_fmu.errors import UserError
    from lidar_fmu.tools.bench import SECTIONS, chosen_sections

    assert chosen_sections(None, False) == list(SECTIONS)
    assert chosen_sections("rig,cast", True) == ["cast"]  # in the bench's order; --skip-step drops the FMU parts
    with pytest.raises(UserError, match=r"--sections 'cast,warp': unknown section 'warp'; choose from cast, "):
        chosen_sections("cast,warp", False)
