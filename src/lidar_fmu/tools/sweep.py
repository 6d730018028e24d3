"""Scenario sweeps: many replays (scenario × sensor × mounting × weather × spec keys) on a Dask cluster.

A sweep file (YAML: ``scenarios``, ``sensors``, and optionally ``mountings``, ``weather``, ``spec``, ``frames``;
relative paths relative to it) lists what to cross. Each run replays its scenario through the FMU exactly as
``lidar-fmu replay`` does, into ``OUT/<scenario>__<sensor>[__<mounting>][__<weather>][__<key-value>…]/`` (same
files, same SensorData bytes). Three parts, each usable alone:

* :func:`plan_runs`: the crossing, from the sweep mapping (it reads no file);
* :func:`run_one`: one run on whichever process executes it (a Dask worker, or this process with ``serial``); it
  never raises: a failure, a frame the FMU flagged invalid included, is its result;
* :func:`run_sweep`: resume, execution (``LocalCluster``, an external scheduler, or serial), one retry of runs
  whose worker died, progress on stderr, the report (``OUT/sweep.csv``, ``OUT/sweep.png``).

Workers read inputs and write outputs by path, so every worker must see the sweep's files and ``OUT`` at the same
paths as the client (a shared file system); the sweep checks that first. The file format and running on a
cluster: docs/sweeps.md.
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import math
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from typing import Any

from ..documents import read_document, refuse_unknown_keys
from ..errors import ERROR_LINE_CHARS, LidarFmuError, UserError, brief

# The stages a command needs are imported inside the functions that run it: `lidar-fmu` starts, and each
# command runs, without loading what it does not use (numba kernels, osi3, the FMU).

SWEEP_KEYS = {"name", "description", "scenarios", "sensors", "mountings", "weather", "spec", "frames"}
MOUNTING_KEYS = {"name", "position_m", "orientation_rad"}
#: completion markers of runs (what resume reads), beside the runs' folders
MARKER_DIR = ".runs"
#: seconds a sweep tries to reach an external scheduler, then waits for its first worker
CONNECT_TIMEOUT_S = 15.0
WORKER_WAIT_S = 60.0


class SweepError(UserError):
    """Some runs of a sweep failed (``failed``: their names); the others finished and are in the report."""

    def __init__(self, message: str, failed: list[str]):
        super().__init__(message)
        self.failed = failed


@dataclasses.dataclass(frozen=True)
class Run:
    """One replay of a sweep: a scenario with one sensor and one choice on every other axis."""

    name: str  # its folder under OUT
    scenario: str  # absolute path of the scenario folder (or its scenario.yaml)
    sensor: str | dict  # preset name, absolute spec file path or inline spec
    mounting: dict | None  # replaces the scenario's mounting (None: the scenario's own)
    spec: dict  # sensor spec keys laid over the sensor (weather and the `spec` axes)
    frames: int | None  # replay at most this many frames
    labels: dict  # axis → label of this run's choice (the report's columns)

    def overrides(self) -> dict:
        """Scenario keys this run lays over the scenario file (see :func:`lidar_fmu.tools.replay.replay`)."""
        sensor = self.sensor
        if self.spec:
            from ..sensors import resolve_spec

            sensor = resolve_spec(sensor) | self.spec  # a flat spec: the preset's keys, then the run's
        out = {"sensor": sensor}
        if self.mounting is not None:
            out["mounting"] = self.mounting
        return out


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """What every run of a sweep shares: output format and the FMU."""

    fmu: str | None = None  # FMU path every worker must see; None: each worker's content-hashed cached build
    trace_format: str = "osi"
    pcd_every: int = 1
    #: where a run unpacks the FMU: a folder of the sweep's own (its LocalCluster's workers are on this machine), which
    #: goes when the sweep ends, so a worker killed mid-run leaves no copy behind; None: the temporary folder
    unpack_in: str | None = None


# -- the crossing ---------------------------------------------------------------------------------
def load_sweep(path) -> tuple[dict, str]:
    """Read a sweep file → (its mapping, its folder: what relative paths in it are relative to)."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.isfile(path):
        raise UserError(f"sweep file not found: {path}")
    sweep = read_document(path, "sweep file", UserError, syntax="yaml")  # bounded: size, depth, aliases
    if not isinstance(sweep, dict):
        raise UserError(f"sweep file {path} must be a mapping with 'scenarios' and 'sensors'")
    return sweep, os.path.dirname(path)


def _label(text) -> str:
    """A folder-name-safe label: letters, digits and ``._+-`` kept, anything else a '-'."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", str(text)).strip("-") or "x"


def _value_label(value) -> str:
    if isinstance(value, dict):
        return "-".join(f"{k}{_value_label(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "-".join(_value_label(v) for v in value)
    return "none" if value is None else str(value)


def _list(sweep: dict, key: str, required: bool) -> list:
    values = sweep.get(key)
    if values is None and not required:
        return []
    if not isinstance(values, list) or not values:
        raise UserError(f"sweep: '{key}' must be a non-empty list" + ("" if required else " when given"))
    return values


def _scenario_axis(entries: list, base_dir: str) -> list[tuple[str, str]]:
    axis: list[tuple[str, str]] = []
    for entry in entries:
        name = None
        if isinstance(entry, dict) and set(entry) == {"name", "path"}:
            name, entry = entry["name"], entry["path"]
        if not isinstance(entry, str):
            raise UserError(f"sweep: a scenario must be a folder path or {{name: …, path: …}}, got {entry!r}")
        path = os.path.normpath(os.path.join(base_dir, entry))
        folder = os.path.dirname(path) if path.endswith((".yaml", ".yml")) else path
        axis.append((_label(name or os.path.basename(folder)), path))
    return axis


def _unknown_preset(name: str, where: str) -> UserError:
    """The error for a preset name that is none: with the presets it resembles, as ``scan --sensor`` gives it."""
    from ..sensors.presets import unknown_preset

    return UserError(f"sweep: {where}: {unknown_preset(name)}")


def _is_spec_path(entry: str, base_dir: str) -> bool:
    """Is a sensor entry that is no preset name a spec file? A path (a folder in it, or a spec file's suffix) or a
    file beside the sweep file is; a bare word that is no file is a mistyped preset."""
    return (os.sep in entry or "/" in entry or entry.lower().endswith((".json", ".jsonc", ".yaml", ".yml"))
            or os.path.isfile(os.path.join(base_dir, entry)))


def _sensor_axis(entries: list, base_dir: str) -> list[tuple[str, str | dict]]:
    from ..sensors.presets import PRESETS

    axis: list[tuple[str, str | dict]] = []
    for i, entry in enumerate(entries):
        if isinstance(entry, dict):
            preset = entry.get("preset")
            if isinstance(preset, str) and preset not in PRESETS:
                raise _unknown_preset(preset, f"sensors[{i}].preset")
            axis.append((_label(entry.get("name") or preset or f"sensor{i}"), dict(entry)))
        elif isinstance(entry, str) and entry in PRESETS:
            axis.append((_label(entry), entry))
        elif isinstance(entry, str) and _is_spec_path(entry, base_dir):  # a spec file, relative to the sweep file
            axis.append((_label(os.path.splitext(os.path.basename(entry))[0]), os.path.join(base_dir, entry)))
        elif isinstance(entry, str):
            raise _unknown_preset(entry, f"sensors[{i}]")
        else:
            raise UserError(f"sweep: a sensor must be a preset name, a spec file or a mapping, got {entry!r}")
    return axis


def _mounting_axis(entries: list) -> list[tuple[str, dict | None]]:
    axis: list[tuple[str, dict | None]] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise UserError(f"sweep: a mounting must be a mapping of {', '.join(sorted(MOUNTING_KEYS))}, "
                            f"got {entry!r}")
        refuse_unknown_keys(entry, MOUNTING_KEYS, f"sweep: mountings[{i}]", UserError)
        axis.append((_label(entry.get("name", f"mount{i}")), {k: v for k, v in entry.items() if k != "name"}))
    return axis


def _weather_axis(entries: list) -> list[tuple[str, dict]]:
    axis: list[tuple[str, dict]] = []
    for entry in entries:
        if entry in (None, "clear", {}):
            axis.append(("clear", {}))  # the sensor's own weather (none, unless its spec sets one)
        elif isinstance(entry, dict):
            weather = {k: v for k, v in entry.items() if k != "name"}
            axis.append((_label(entry.get("name") or _value_label(weather)), {"weather": weather}))
        else:
            raise UserError(f"sweep: a weather entry must be 'clear' or a mapping of the spec's weather keys, "
                            f"got {entry!r}")
    return axis


def _spec_axes(spec: dict) -> list[tuple[str, list[tuple[str, dict]]]]:
    if not isinstance(spec, dict):
        raise UserError(f"sweep: 'spec' must map sensor spec keys to lists of values, got {spec!r}")
    axes = []
    for key, values in spec.items():
        if not isinstance(values, list) or not values:
            raise UserError(f"sweep: spec key {key!r} must have a non-empty list of values, got {values!r}")
        axes.append((str(key), [(_label(f"{key}-{_value_label(v)}"), {key: v}) for v in values]))
    return axes


def plan_runs(sweep: dict, base_dir: str) -> list[Run]:
    """Cross a sweep mapping's axes into runs (reads no file; it only looks whether a sensor entry that is no
    preset name is a file). Order: scenarios, sensors, mountings, weather, then the ``spec`` keys as written; the
    last axis varies fastest."""
    import itertools

    refuse_unknown_keys(sweep, SWEEP_KEYS, "sweep", UserError)
    frames = sweep.get("frames")
    if frames is not None and (not isinstance(frames, int) or isinstance(frames, bool) or frames < 1):
        raise UserError(f"sweep: 'frames' must be a whole number ≥ 1, got {frames!r}")
    axes: list[tuple[str, list]] = [
        ("scenario", _scenario_axis(_list(sweep, "scenarios", True), base_dir)),
        ("sensor", _sensor_axis(_list(sweep, "sensors", True), base_dir)),
    ]
    if "mountings" in sweep:
        axes.append(("mounting", _mounting_axis(_list(sweep, "mountings", False))))
    if "weather" in sweep:
        axes.append(("weather", _weather_axis(_list(sweep, "weather", False))))
    axes += _spec_axes(sweep.get("spec") or {})
    runs: list[Run] = []
    seen: dict[str, dict[str, str]] = {}
    for choice in itertools.product(*(values for _, values in axes)):
        picked = {axis: value for (axis, _), value in zip(axes, choice)}
        labels = {axis: label for (axis, _), (label, _) in zip(axes, choice)}
        spec: dict[str, Any] = {}
        for axis, (_, value) in picked.items():
            if axis not in ("scenario", "sensor", "mounting"):
                spec |= value
        name = "__".join(labels.values())
        if name in seen:
            raise UserError(f"sweep: two runs would both write {name}/ ({seen[name]} and {labels}); give the "
                            "entries distinct names ('name' in a mapping, or distinct folder/file names)")
        seen[name] = labels
        runs.append(Run(name=name, scenario=picked["scenario"][1], sensor=picked["sensor"][1],
                        mounting=picked["mounting"][1] if "mounting" in picked else None, spec=spec,
                        frames=frames, labels=labels))
    return runs


# -- one run, wherever it executes ----------------------------------------------------------------
_worker_fmus: dict[str, str] = {}  # per process: requested FMU → its path (built or found once)


def _where() -> str:
    """This process, as the report names it: the Dask worker's address, else host and pid."""
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):  # not inside a Dask task
        return f"{socket.gethostname()}:{os.getpid()}"


def _unseen(paths) -> list[str]:
    return [p for p in paths if p and not os.path.exists(p)]


def worker_fmu(requested: str | None) -> str:
    """The FMU path for this process's runs: built or found once. Each run unpacks it and removes its copy when
    its replay ends (:class:`~lidar_fmu.cosim.fmu_host.FmuInstance`): a worker ended by its cluster leaves
    nothing in the temporary folder."""
    key = requested or ""
    if key not in _worker_fmus:
        from ..cosim.fmu_package import cached_fmu

        path = requested or str(cached_fmu())
        if not os.path.isfile(path):
            raise UserError(f"{_where()} cannot see the FMU {path}: every worker must see the sweep's paths")
        _worker_fmus[key] = path
    return _worker_fmus[key]


def _figures(summary: dict) -> dict:
    """The report's figures of one replay summary."""
    from ..pointcloud import ENVIRONMENT_ID_BASE

    returns = summary["returns_per_frame"]
    seen = {i for ids in summary["objects_per_frame"] for i in ids if i < ENVIRONMENT_ID_BASE}
    return {"frames": summary["frames"], "returns_mean": round(sum(returns) / len(returns), 1),
            "returns_min": min(returns), "returns_max": max(returns), "objects_seen": len(seen),
            "first_step_ms": round(summary["first_step_ms"], 1), "step_p50_ms": round(summary["step_ms"]["p50"], 2),
            "step_p90_ms": round(summary["step_ms"]["p90"], 2)}


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kB


def _marker_path(out_dir: str, name: str) -> str:
    return os.path.join(out_dir, MARKER_DIR, f"{name}.json")


def _identity(run: Run, options: RunOptions) -> dict:
    """What makes a run's outputs what they are (labels and the FMU's path aside): resume compares it."""
    run_fields = {k: v for k, v in dataclasses.asdict(run).items() if k != "labels"}
    return json.loads(json.dumps(run_fields | {"trace_format": options.trace_format, "pcd_every": options.pcd_every}))


def run_one(run: Run, out_dir: str, options: RunOptions) -> dict:
    """Replay one run into ``out_dir/run.name`` → its report row. Never raises: a failure is the row's
    ``status`` ``failed`` with the ``error``, so it cannot sink the other runs of the sweep. A run with any frame
    the FMU flagged invalid (its output ``valid`` false) failed, with what the FMU logged for the first."""
    from .replay import DamagedTraceError, invalid_frames_message, replay

    started, cpu_started = time.perf_counter(), time.process_time()
    row: dict[str, Any] = {"run": run.name, "status": "failed", "error": "", "worker": _where()}
    folder = os.path.join(out_dir, run.name)
    try:
        fmu_path = worker_fmu(options.fmu)
        with contextlib.suppress(FileNotFoundError):  # complete again only when this replay succeeds
            os.remove(_marker_path(out_dir, run.name))
        if os.path.isdir(folder):  # a rerun starts clean: no frames of an earlier, longer replay left behind
            shutil.rmtree(folder)
        unpacked = tempfile.mkdtemp(prefix="fmu_", dir=options.unpack_in) if options.unpack_in else None
        try:
            if unpacked:
                from fmpy import extract

                extract(fmu_path, unpacked)
            summary = replay(run.scenario, folder, fmu_path=fmu_path, max_frames=run.frames, progress=False,
                             write_pcd_every=options.pcd_every, trace_format=options.trace_format,
                             overrides=run.overrides(), fmu_unzip_dir=unpacked)
        except DamagedTraceError as exc:  # the intact frames were replayed: report them, still a failure
            row |= _figures(exc.summary)
            raise
        finally:
            if unpacked:
                shutil.rmtree(unpacked, ignore_errors=True)
        traces = summary["sensordata_trace"]  # a rig's: one per lidar
        row |= _figures(summary) | {"sensordata_trace": traces if isinstance(traces, str) else " ".join(traces)}
        invalid = invalid_frames_message(summary)
        if invalid:  # the FMU said these steps are not measurements: the run did not do what was asked
            raise UserError(invalid)
        row["status"] = "ok"
    except Exception as exc:  # any failure belongs to this run alone: reported in its row, the sweep goes on
        text = brief(str(exc), ERROR_LINE_CHARS) or type(exc).__name__  # one bounded line in the report
        row["error"] = text if isinstance(exc, LidarFmuError | OSError) else f"{type(exc).__name__}: {text}"
    # cpu_s: this process's CPU time over the run, every thread (Numba's pool, Dask's own) included
    row |= {"wall_s": round(time.perf_counter() - started, 2), "cpu_s": round(time.process_time() - cpu_started, 2),
            "peak_rss_mb": round(_peak_rss_mb(), 1)}
    if row["status"] == "ok":
        os.makedirs(os.path.dirname(_marker_path(out_dir, run.name)), exist_ok=True)
        with open(_marker_path(out_dir, run.name), "w", encoding="utf-8") as f:
            json.dump({"run": _identity(run, options), "row": row}, f, indent=1)
    return row


def completed_row(run: Run, out_dir: str, options: RunOptions) -> dict | None:
    """The row of an earlier sweep's run if its outputs are complete and it was the same run, else None."""
    try:
        with open(_marker_path(out_dir, run.name), encoding="utf-8") as f:
            marker = json.load(f)
        folder = os.path.join(out_dir, run.name)
        with open(os.path.join(folder, "summary.json"), encoding="utf-8") as f:
            summary = json.load(f)
    except (OSError, ValueError):
        return None
    # a summary without 'invalid_frames' is an older replay's, which did not look: run again
    if (marker.get("run") != _identity(run, options) or summary.get("damaged_frame") is not None
            or summary.get("invalid_frames", [None])):
        return None
    lidar_folders = [lidar.get("folder", "") for lidar in summary.get("lidars", [])] or [""]  # a rig's, or one
    traces = summary.get("sensordata_trace", "")
    needed = ([traces] if isinstance(traces, str) else traces) + [
        os.path.join(lidar_folder, name) for lidar_folder in lidar_folders for name in ("preview.png", "preview.gif")]
    if not all(os.path.isfile(os.path.join(folder, name)) for name in needed):
        return None
    return marker["row"] | {"status": "skipped"}


# -- where the runs execute -----------------------------------------------------------------------
def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextlib.contextmanager
def _numba_threads_for_workers(threads: int):
    """While a LocalCluster lives, ``NUMBA_NUM_THREADS`` (unless the user set it) is ``threads`` in this process's
    environment, which its worker processes inherit when they are spawned, nanny restarts included. Restored
    afterwards.

    Numba reads the variable when it is imported and again before each compilation, and refuses a changed value
    once its threads run. A value in the cluster's ``env`` reaches a worker only after it has imported Numba (a
    spawned process first imports the ``__main__`` of the process that started it, and ``lidar-fmu``'s imports
    Numba), and Numba would then refuse every compilation in it: each run's first step with a cold cache, or a
    kernel first needed mid-run. Only this process's compilations meanwhile would see the changed value: the
    sweep compiles nothing while the cluster lives.
    """
    saved = os.environ.get("NUMBA_NUM_THREADS")
    if saved is None:
        os.environ["NUMBA_NUM_THREADS"] = str(threads)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("NUMBA_NUM_THREADS", None)


def _local_cluster(workers: int, dashboard: str | None, scratch: str):
    """A LocalCluster of ``workers`` processes, one Dask thread each; Dask's dashboard at ``dashboard`` (an
    address) if given, else no pages served (Dask's HTTP server on a free port of 127.0.0.1, without routes);
    Dask's scratch space in the folder ``scratch``."""
    import logging

    import dask
    from distributed import LocalCluster

    # The FMU and Numba own their threads: each worker's Numba pool has its share of the cores
    # (_numba_threads_for_workers) instead of oversubscribing them. allowed_failures=0: a task whose worker dies
    # comes back at once as KilledWorker,
    # and the sweep retries it once itself (an external scheduler keeps its own setting, 3 by default).
    # Dask starts its workers with MALLOC_TRIM_THRESHOLD_=64 KiB to hand memory back sooner; a fixed threshold
    # also pins glibc's mmap threshold, so every frame's large arrays are mapped and unmapped afresh (the demo
    # sweep of 4 lidars: 12 s of system time instead of 1.5 s). A sweep worker holds nothing between runs:
    # glibc's own dynamic thresholds serve it better. None unsets the variable. Dask's statistical profiler
    # samples every thread's stack each 10 ms, taking the GIL from the replay (the 4-lidar demo sweep: ~10 % less
    # CPU without it); only a dashboard's profile page shows them, and it stays off with --dashboard too.
    # Dask's scheduler always starts an HTTP server (port 8787 by default, with info and metrics pages even
    # when dashboard_address is None): without a dashboard asked for, on a free port and serving nothing.
    config: dict[str, Any] = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
                              "distributed.worker.profile.enabled": False, "temporary-directory": scratch}
    scheduler: dict[str, Any] = {"allowed_failures": 0}
    if dashboard is None:
        config["distributed.scheduler.http.routes"] = []
        scheduler |= {"dashboard": False, "dashboard_address": "127.0.0.1:0"}
    with dask.config.set(config):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=dashboard,
                            silence_logs=logging.ERROR, scheduler_kwargs=scheduler)


def _check_dashboard(dashboard: str | None, serial: bool, scheduler: str | None) -> None:
    """A dashboard is the sweep's LocalCluster's, and Dask draws it with Bokeh."""
    if dashboard is None:
        return
    if serial or scheduler:
        raise UserError("--dashboard is for the sweep's own LocalCluster (a --scheduler serves its own dashboard; "
                        "--serial has none)")
    try:
        import bokeh  # noqa: F401  (Dask's dashboard is drawn with it)
    except ImportError:
        raise UserError("--dashboard needs Bokeh, which Dask draws its dashboard with: pip install 'bokeh>=3.1'") \
            from None


@contextlib.contextmanager
def _workers_import_this_package():
    """While a LocalCluster lives, the folder this ``lidar_fmu`` came from leads ``sys.path``.

    Its worker processes are spawned, nanny restarts included, with this
    process's ``sys.path``; an FMU run in this process put the FMU's
    ``resources/`` in front of it, and the copy of ``lidar_fmu`` in there
    cannot build an FMU (its slave is not beside it). Restored afterwards.
    """
    saved = list(sys.path)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # src/ or site-packages
    try:
        yield
    finally:
        sys.path[:] = saved


def _connect(scheduler: str):
    from distributed import Client

    try:
        client = Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")
    except (OSError, TimeoutError) as exc:
        raise UserError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    try:
        client.wait_for_workers(1, timeout=WORKER_WAIT_S)
    except TimeoutError:
        client.close()
        raise UserError(f"no Dask worker joined the scheduler at {scheduler} within {WORKER_WAIT_S:.0f} s "
                        "(start one: dask worker SCHEDULER_ADDRESS --nthreads 1)") from None
    return client


def _check_workers_see(client, paths: list[str]) -> None:
    """Every worker imports lidar_fmu and sees ``paths`` (those the client sees), or a clear error."""
    try:
        unseen = client.run(_unseen, paths)
    except ModuleNotFoundError as exc:
        raise UserError(f"a Dask worker cannot import lidar_fmu ({exc}): install lidar-fmu, the same version, "
                        "in every worker's Python") from None
    blind = {worker: missing for worker, missing in unseen.items() if missing}
    if blind:
        lines = "; ".join(f"{worker} cannot see {', '.join(missing)}" for worker, missing in sorted(blind.items()))
        raise UserError(f"{lines}. Workers read the scenarios and write OUT by path: mount the same file system "
                        "at the same paths on every worker (NFS, a cluster file system)")


class Progress:
    """The sweep's progress on stderr (``enabled``), as its runs finish: on a terminal one line redrawn in place;
    in a log (stderr not a terminal) one plain line per finished run, and no carriage returns."""

    def __init__(self, total: int, enabled: bool):
        self.stream = sys.stderr
        self.enabled, self.total, self.done, self.failed = enabled and total > 0, total, 0, 0
        self.tty = self.enabled and self.stream.isatty()
        self.started = time.perf_counter()
        if self.tty:
            self._draw()

    def _draw(self) -> None:
        failed = f", {self.failed} failed" if self.failed else ""
        self.stream.write(f"\rsweep: {self.done}/{self.total} runs done{failed}, "
                          f"{time.perf_counter() - self.started:.0f} s\x1b[K")
        self.stream.flush()

    def finished(self, row: dict) -> None:
        self.done += 1
        self.failed += row["status"] == "failed"
        if self.tty:
            self._draw()
        elif self.enabled:
            what = (f"{row.get('frames', 0)} frames, {row.get('wall_s', 0):.1f} s" if row["status"] == "ok"
                    else brief(str(row.get("error", ""))))
            print(f"sweep: {self.done}/{self.total} {row['run']}: {row['status']} ({what})", file=self.stream,
                  flush=True)

    def retrying(self, run: Run, why: str) -> None:
        if self.enabled and not self.tty:
            print(f"sweep: {run.name}: {why}; running it once more", file=self.stream, flush=True)

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _on_dask(client, runs: list[Run], out_dir: str, options: RunOptions, task, progress: Progress) -> list[dict]:
    """Hand the runs to the workers one per free thread; a run whose worker died is submitted once more; → rows
    in the runs' order.

    No more runs are out than the cluster has threads: Dask would otherwise queue a second run on a worker
    ahead, and a worker that dies would take that run down with the one it was running.
    """
    import collections

    from distributed import KilledWorker, as_completed

    rows: dict[str, dict] = {}
    queue = collections.deque((run, 1) for run in runs)
    out: dict[Any, tuple[Run, int]] = {}
    finished = as_completed()

    def hand_out():
        threads = max(1, sum(client.nthreads().values()))
        while queue and len(out) < threads:
            run, attempt = queue.popleft()
            future = client.submit(task, run, out_dir, options, key=f"sweep-{run.name}-{attempt}", pure=False)
            out[future] = (run, attempt)
            finished.add(future)

    hand_out()
    for future in finished:
        run, attempt = out.pop(future)
        if future.status == "finished":
            rows[run.name] = future.result() | {"attempts": attempt}
        else:
            exc = future.exception() if future.status == "error" else RuntimeError(f"task {future.status}")
            if isinstance(exc, KilledWorker) and attempt == 1:
                queue.appendleft((run, 2))
                progress.retrying(run, "its worker died")
                hand_out()
                continue
            why = "its worker died twice" if isinstance(exc, KilledWorker) else type(exc).__name__
            rows[run.name] = {"run": run.name, "status": "failed", "attempts": attempt,
                              "error": f"{why}: {' '.join(str(exc).split())}"}
        progress.finished(rows[run.name])
        hand_out()
    return [rows[run.name] for run in runs]


def _serial(runs: list[Run], out_dir: str, options: RunOptions, task, progress: Progress) -> list[dict]:
    rows = []
    for run in runs:
        rows.append(task(run, out_dir, options) | {"attempts": 1})
        progress.finished(rows[-1])
    return rows


def run_sweep(sweep_path, out_dir, *, workers: int | None = None, scheduler: str | None = None,
              serial: bool = False, force: bool = False, fmu: str | None = None, trace_format: str = "osi",
              pcd_every: int = 1, progress: bool = True, dashboard: str | None = None, task=run_one,
              echo=print) -> list[dict]:
    """Plan, skip what an earlier sweep completed (unless ``force``), run the rest, write the report.

    Runs on a new ``LocalCluster`` of ``workers`` processes (default: one per
    core), on the Dask scheduler at ``scheduler``, or one after another in
    this process (``serial``). ``dashboard``: an address (``127.0.0.1:8787``)
    where the LocalCluster serves Dask's dashboard; none by default.
    ``progress``: one line per finished run on stderr (redrawn in place on a
    terminal). ``task`` is what executes a run (default :func:`run_one`).
    Returns the report's rows; raises :class:`SweepError` naming the failed
    runs after writing the report.
    """
    if serial and (workers or scheduler) or (workers and scheduler):
        raise UserError("give one of --serial, --workers N (a LocalCluster) and --scheduler ADDRESS")
    _check_dashboard(dashboard, serial, scheduler)
    if trace_format not in ("osi", "mcap"):
        raise UserError(f"trace format must be osi or mcap, got {trace_format!r}")
    sweep, base_dir = load_sweep(sweep_path)
    runs = plan_runs(sweep, base_dir)
    out_dir = os.path.abspath(os.fspath(out_dir))
    os.makedirs(out_dir, exist_ok=True)
    options = RunOptions(fmu=os.path.abspath(fmu) if fmu else None, trace_format=trace_format, pcd_every=pcd_every)
    done = {} if force else {run.name: row for run in runs if (row := completed_row(run, out_dir, options))}
    todo = [run for run in runs if run.name not in done]
    echo(f"sweep: {len(runs)} runs ({len(done)} complete from an earlier sweep, skipped), {len(todo)} to run")
    started = time.perf_counter()
    where = "serial, in this process"
    shown = Progress(len(todo), progress)
    try:
        if serial:
            rows_run = _serial(todo, out_dir, options, task, shown)
        elif todo:
            rows_run, where = _distributed(todo, out_dir, options, task, shown, (workers, scheduler, dashboard), echo)
        else:
            rows_run = []
    finally:
        shown.close()
    elapsed_s = time.perf_counter() - started
    by_name = done | {row["run"]: row for row in rows_run}
    rows = [{**run.labels, **by_name[run.name]} for run in runs]
    write_report(out_dir, rows)
    frames = sum(row.get("frames", 0) for row in rows_run if row["status"] == "ok")
    echo(f"sweep: ran {len(todo)} runs, {frames} frames in {elapsed_s:.1f} s ({where}): "
         f"{frames / elapsed_s if elapsed_s > 0 else 0:.2f} frames/s → {out_dir}/sweep.csv, sweep.png")
    failed = [row for row in rows if row["status"] == "failed"]
    for row in failed:
        echo(f"  FAILED {row['run']}: {row['error']}")
    if failed:
        raise SweepError(f"{len(failed)} of {len(runs)} runs failed: {', '.join(r['run'] for r in failed)} "
                         f"(the others finished; see {os.path.join(out_dir, 'sweep.csv')})",
                         [r["run"] for r in failed])
    return rows


def _distributed(todo, out_dir, options, task, progress: Progress, cluster_options, echo):
    """Run ``todo`` on Dask (``cluster_options``: workers, scheduler, dashboard) → (rows, a phrase saying where)."""
    workers, scheduler, dashboard = cluster_options
    if not scheduler and options.fmu is None:
        from ..cosim.fmu_package import cached_fmu

        cached_fmu()  # built here once, so that the local workers all find it instead of waiting on one
    with contextlib.ExitStack() as stack:
        if scheduler:
            client = stack.enter_context(_connect(scheduler))
            where = f"Dask scheduler {scheduler}"
        else:
            from distributed import Client

            workers = workers or _cores()
            stack.enter_context(_workers_import_this_package())
            stack.enter_context(_numba_threads_for_workers(max(1, _cores() // workers)))
            # Dask's scratch folders (locks, spill) and the runs' unpacked FMUs in one of ours, removed once the
            # cluster has closed, whatever became of its workers
            scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="lidar_fmu_dask_"))
            options = dataclasses.replace(options, unpack_in=scratch)
            cluster = stack.enter_context(_local_cluster(workers, dashboard, scratch))
            client = stack.enter_context(Client(cluster))
            where = "LocalCluster"
            if dashboard is not None:
                echo(f"sweep: Dask's dashboard at {cluster.dashboard_link}")
        count = len(client.scheduler_info(n_workers=-1)["workers"])
        where += f", {count} worker{'s' if count != 1 else ''}"
        echo(f"sweep: on {where}")
        paths = [out_dir] + [run.scenario for run in todo] + ([options.fmu] if options.fmu else [])
        _check_workers_see(client, [p for p in dict.fromkeys(paths) if os.path.exists(p)])
        return _on_dask(client, todo, out_dir, options, task, progress), where


# -- the report -----------------------------------------------------------------------------------
FIGURE_COLUMNS = ["frames", "returns_mean", "returns_min", "returns_max", "objects_seen", "first_step_ms",
                  "step_p50_ms", "step_p90_ms", "wall_s", "cpu_s", "peak_rss_mb", "worker", "attempts", "status", "error"]


def write_report(out_dir: str, rows: list[dict]) -> None:
    """``sweep.csv`` (one row per run) and ``sweep.png`` (each run's preview with its key figures)."""
    axes = [k for k in rows[0] if k not in FIGURE_COLUMNS and k not in ("run", "sensordata_trace")]
    columns = ["run", *axes, *FIGURE_COLUMNS]
    with open(os.path.join(out_dir, "sweep.csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    write_grid(os.path.join(out_dir, "sweep.png"), out_dir, rows)


def write_grid(path: str, out_dir: str, rows: list[dict], columns: int = 4) -> None:
    """A grid of the runs' ``preview.png``, each titled with its key figures (a failed run: its error)."""
    import textwrap

    import matplotlib.image
    from matplotlib.figure import Figure

    columns = min(columns, len(rows))
    lines = math.ceil(len(rows) / columns)
    fig = Figure(figsize=(4.2 * columns, 5.0 * lines))
    for k, row in enumerate(rows):
        ax = fig.add_subplot(lines, columns, k + 1)
        ax.set_axis_off()
        preview = os.path.join(out_dir, row["run"], "preview.png")
        if row["status"] != "failed" and os.path.isfile(preview):
            ax.imshow(matplotlib.image.imread(preview))
            title = (f"{row['frames']} frames, {row['returns_mean']:,.0f} returns/frame\n"
                     f"{row['objects_seen']} objects, step p50 {row['step_p50_ms']:.0f} ms")
        else:
            ax.text(0.5, 0.5, "\n".join(textwrap.wrap(f"FAILED: {row.get('error', '')}", 40)[:8]),
                    ha="center", va="center", color="firebrick", fontsize=8, transform=ax.transAxes)
            title = "failed"
        ax.set_title(f"{row['run']}\n{title}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)


__all__ = ["Run", "RunOptions", "SweepError", "completed_row", "load_sweep", "plan_runs", "run_one", "run_sweep",
           "worker_fmu", "write_report"]
