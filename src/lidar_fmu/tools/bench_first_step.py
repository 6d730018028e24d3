"""``lidar-fmu bench --first-step``: what a machine's first FMU run costs, and that its first step is not it.

Each measurement runs in a Python of its own whose Numba cache and lidar-fmu
cache are new, empty folders (``NUMBA_CACHE_DIR``, ``LIDAR_FMU_CACHE``), as a
fresh clone or a new container has them: the FMU's initialization (which
compiles the kernels: :mod:`lidar_fmu.cosim.warm_up`), its first ``doStep``
and the median of the steps after it. First the OSI validation trace (the
OS1-128 on OSI bounding boxes: no meshes to load), on the empty caches; then
the demo street on the caches that run left (a second run on the machine),
whose first step also loads the street and car meshes its first SensorView
names.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def measure(fmu_path: str, trace: str, parameters: dict, frames: int) -> dict:
    """In this process: the FMU initialized with ``parameters``, then stepped through ``frames`` views of ``trace``
    (0.1 s steps) → seconds of initialization, first step and the median later step."""
    from ..cosim.fmu_host import FmuInstance
    from ..cosim.warm_up import prepare
    from ..osi.trace import read_trace
    from .replay import model_of

    views = list(read_trace(trace, "SensorView"))[:frames]
    step_s = []
    started = time.perf_counter()
    with FmuInstance(fmu_path, initialize=False) as fmu:
        fmu.initialize(parameters)
        init_s = time.perf_counter() - started
        for k, view in enumerate(views):
            t0 = time.perf_counter()
            out = fmu.step(view, 0.1 * k, 0.1)
            step_s.append(time.perf_counter() - t0)
            if not out.valid:
                raise RuntimeError(f"step {k} is invalid: {fmu.messages[-1:]}")
        said = [text for _, text in fmu.messages if "kernels" in text]
    # the model the FMU runs, made ready as the FMU's initialization makes it (its kernels are loaded in this process
    # by now): where the first step's time goes
    model = model_of(parameters)
    prepare(model)
    first = model.step(views[0], 0.1)
    return {"init_s": init_s, "first_step_s": step_s[0], "warm_step_s": float(np.median(step_s[1:])),
            "steps": len(step_s), "fmu_said": said[0] if said else "", "first_step_stages_s": first.timings_s}


def _in_fresh_python(fmu_path: str, trace: str, parameters: dict, frames: int, caches: str) -> dict:
    env = os.environ | {"NUMBA_CACHE_DIR": os.path.join(caches, "numba"),
                        "LIDAR_FMU_CACHE": os.path.join(caches, "lidar-fmu")}
    run = subprocess.run([sys.executable, "-m", __name__, fmu_path, trace, json.dumps(parameters), str(frames)],
                         env=env, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"the first-step measurement failed:\n{run.stderr[-2000:]}")
    return json.loads(run.stdout.splitlines()[-1])


def bench_first_step(work_dir: str | None, frames: int = 12) -> list[dict]:
    """Both measurements (module doc), each row with its ``case``."""
    from ..cosim.fmu_package import DEFAULT_FMU, REPO_ROOT, build_fmu, sources_newer_than
    from .bench import demo_views
    from .replay import fmu_parameters, load_scenario

    if sources_newer_than(DEFAULT_FMU):
        build_fmu(DEFAULT_FMU)
    demo, _ = demo_views(work_dir, frames)
    rows = []
    with tempfile.TemporaryDirectory(prefix="lidar_fmu_first_step_") as caches:
        for case, scenario, sensor in (("OSI validation trace (boxes), empty caches", None, "ouster_os1_128"),
                                       ("demo street, caches of the run before", demo, demo["sensor"])):
            if scenario is None:
                if REPO_ROOT is None:
                    continue  # an installed package: the OSI validation trace is in a source checkout's scenarios/
                scenario = load_scenario(REPO_ROOT / "scenarios" / "osi_validation_minimal")
            parameters = fmu_parameters(scenario | {"sensor": sensor}, caches)
            rows.append({"case": case} | _in_fresh_python(str(DEFAULT_FMU), scenario["trace"], parameters, frames,
                                                           caches))
    return rows


def print_first_step(rows: list[dict]) -> None:
    from .bench import print_markdown

    print_markdown(["FMU, OS1-128, fresh clone", "initialization s", "first doStep ms", "later doStep ms (median)",
                    "first ÷ later"],
                   [[row["case"], f"{row['init_s']:.1f}", f"{row['first_step_s'] * 1e3:.1f}",
                     f"{row['warm_step_s'] * 1e3:.1f}", f"{row['first_step_s'] / row['warm_step_s']:.2f}×"]
                    for row in rows])
    for row in rows:
        stages = ", ".join(f"{name} {seconds * 1e3:.1f}" for name, seconds in row["first_step_stages_s"].items())
        print(f"  {row['case']}: the FMU said \"{row['fmu_said']}\"; the first step's stages in ms (the model "
              f"in-process): {stages}")


if __name__ == "__main__":
    fmu, trace_path, given, count = sys.argv[1:5]
    print(json.dumps(measure(fmu, trace_path, json.loads(given), int(count))))
