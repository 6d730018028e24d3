"""``lidar-fmu soak``: many steps of one scenario, watching memory and step time.

A host car stands at the origin with a roof lidar; ``objects`` pedestrians
(tracked objects: OSI bounding boxes, no model) walk circles around it and
their box sizes jitter by at most 2 cm from step to step, as a tracker's
estimates do. Every ``report_every`` steps one line gives the process's
resident memory (``VmRSS`` from ``/proc/self/status``; elsewhere the peak from
``getrusage``) and the median step time of those steps. The steps run through
:class:`~lidar_fmu.cosim.sensor_model.OsiSensorModel`, or with ``fmu`` through the
built FMU over real OSMP pointers (FMPy, in this process).

The sensor may be a rig of several lidars (:mod:`lidar_fmu.sensors.rig`), as
anywhere a lidar goes: a step then lasts the shortest frame period of its
lidars, so that the fastest publishes whole frames and the slower ones the part
of their sweep fired in it.
"""
from __future__ import annotations

import math
import os
import resource
import sys
import time
from dataclasses import dataclass

import numpy as np

# The stages a command needs are imported inside the functions that run it: `lidar-fmu` starts, and each
# command runs, without loading what it does not use (numba kernels, osi3, the FMU).

HOST_ID = 1
#: pedestrian box (length, width, height), m, before the jitter
PEDESTRIAN_M = (0.5, 0.6, 1.75)
#: the most a box side changes between steps, m (uniform ±half around its size)
JITTER_M = 0.02
#: the default sensor: 16 beams × 900 columns keep 10,000 steps to a few minutes on a laptop core
DEFAULT_SENSOR = "velodyne_vlp16"


@dataclass
class SoakReport:
    step: int  # steps done so far
    rss_mb: float  # resident memory now (MiB), or the peak where /proc is missing
    rss_is_peak: bool
    median_step_ms: float  # over the steps since the last report
    invalid: int  # invalid steps since the last report


def rss_mb() -> tuple[float, bool]:
    """Resident memory of this process in MiB, and whether it is the peak (no ``/proc``) rather than now."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0, False
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / (1024.0 * 1024.0 if sys.platform == "darwin" else 1024.0), True


class PedestrianScene:
    """SensorViews of a standing host and ``objects`` pedestrians walking circles, with jittering boxes."""

    def __init__(self, objects: int, seed: int = 0):
        from osi3.osi_sensorview_pb2 import SensorView

        rng = np.random.default_rng(seed)
        self.rng = rng
        self.radius_m = rng.uniform(4.0, 40.0, objects)
        self.phase = rng.uniform(0.0, 2 * math.pi, objects)
        self.omega = rng.choice((-1.0, 1.0), objects) * rng.uniform(1.0, 1.8, objects) / self.radius_m  # ~1.4 m/s
        self.view = SensorView()
        view = self.view
        view.version.version_major, view.version.version_minor = 3, 7
        view.host_vehicle_id.value = HOST_ID
        gt = view.global_ground_truth
        gt.host_vehicle_id.value = HOST_ID
        host = gt.moving_object.add()
        host.id.value = HOST_ID
        host.base.position.z = 0.75
        host.base.dimension.length, host.base.dimension.width, host.base.dimension.height = 4.5, 1.8, 1.5
        rear = host.vehicle_attributes.bbcenter_to_rear
        rear.x, rear.z = -1.4, -0.45
        view.mounting_position.position.x, view.mounting_position.position.z = 1.35, 1.4
        ground = gt.stationary_object.add()  # something for the lower beams to hit
        ground.id.value = 1000
        ground.base.position.z = -0.05
        ground.base.dimension.length, ground.base.dimension.width, ground.base.dimension.height = 120.0, 120.0, 0.1
        self.pedestrians = []
        for k in range(objects):
            o = gt.moving_object.add()
            o.id.value = 100 + k
            o.type = o.TYPE_PEDESTRIAN
            self.pedestrians.append(o)

    def view_at(self, time_s: float) -> bytes:
        view = self.view
        seconds = math.floor(time_s)
        view.timestamp.seconds, view.timestamp.nanos = int(seconds), int(round((time_s - seconds) * 1e9)) % 1_000_000_000
        view.global_ground_truth.timestamp.CopyFrom(view.timestamp)
        angle = self.phase + self.omega * time_s
        x, y = self.radius_m * np.cos(angle), self.radius_m * np.sin(angle)
        yaw = angle + np.sign(self.omega) * 0.5 * math.pi
        dims = np.asarray(PEDESTRIAN_M) + self.rng.uniform(-0.5 * JITTER_M, 0.5 * JITTER_M, (len(self.pedestrians), 3))
        for k, o in enumerate(self.pedestrians):
            o.base.position.x, o.base.position.y, o.base.position.z = float(x[k]), float(y[k]), 0.5 * float(dims[k, 2])
            o.base.orientation.yaw = float(math.remainder(yaw[k], 2 * math.pi))
            o.base.dimension.length, o.base.dimension.width, o.base.dimension.height = map(float, dims[k])
        return view.SerializeToString()


def run_soak(steps: int = 10_000, objects: int = 20, sensor=DEFAULT_SENSOR, report_every: int = 1000,
             fmu: str | None = None, backend: str = "auto", seed: int = 0, echo=print) -> list[SoakReport]:
    """Run ``steps`` steps; call ``echo`` with one line every ``report_every`` steps; return the reports.

    ``fmu``: a path to drive the built FMU instead of the model in-process
    (``""``: the default FMU, built when stale).
    """
    from ..sensors.rig import load_rig

    rig = load_rig(sensor)  # one clear error on a bad sensor, before anything starts
    step_s = min(member.sensor.frame_period_s for member in rig)
    scene = PedestrianScene(objects, seed)
    if fmu is None:
        from ..cosim.sensor_model import OsiSensorModel

        model = OsiSensorModel(sensor=sensor, backend=backend)

        def do_step(view, time_s):
            return model.step(view, time_s).valid

        close = None
    else:
        from ..cosim.fmu_host import FmuInstance
        from ..cosim.fmu_package import DEFAULT_FMU, build_fmu, sources_newer_than

        path = fmu or DEFAULT_FMU
        if path == DEFAULT_FMU and sources_newer_than(DEFAULT_FMU):
            build_fmu(DEFAULT_FMU)
        parameters = {"sensor": _sensor_parameter(sensor, rig), "backend": backend}
        host = FmuInstance(path, parameters)

        def do_step(view, time_s):
            return host.step(view, time_s - step_s, step_s).valid

        close = host.close
    reports, window, invalid = [], [], 0
    try:
        for k in range(1, steps + 1):
            view = scene.view_at(k * step_s)
            t0 = time.perf_counter()
            valid = do_step(view, k * step_s)
            window.append(time.perf_counter() - t0)
            invalid += not valid
            if k % report_every == 0 or k == steps:
                rss, peak = rss_mb()
                report = SoakReport(k, rss, peak, 1e3 * float(np.median(window)), invalid)
                reports.append(report)
                growth = f" ({rss - reports[0].rss_mb:+.1f} MiB since step {reports[0].step})" if len(reports) > 1 else ""
                text = (f"step {k:>7,}: {'peak ' if peak else ''}RSS {rss:8.1f} MiB{growth}, "
                        f"median step {report.median_step_ms:.2f} ms over the last {len(window):,}")
                if invalid:
                    text += f", {invalid} invalid"
                echo(text)
                window, invalid = [], 0
    finally:
        if close is not None:
            close()
    return reports


def _sensor_parameter(sensor, rig) -> str:
    """The FMU's ``sensor`` parameter (a string) for ``sensor`` as :func:`run_soak` was given it."""
    if isinstance(sensor, (str, os.PathLike)):
        return os.fspath(sensor)
    if len(rig) == 1:
        return rig[0].sensor.name
    import json

    from ..sensors.airsim import robot_config_lidars

    entries = (robot_config_lidars(sensor) or sensor["sensors"]) if isinstance(sensor, dict) else sensor
    return json.dumps(list(entries))  # a rig as inline text


def describe(steps: int, objects: int, sensor, fmu: str | None) -> str:
    where = "the model in-process" if fmu is None else f"the FMU {fmu or '(default)'} via FMPy"
    return (f"soak: {steps:,} steps of {sensor if isinstance(sensor, str) else 'a sensor spec'}, {objects} pedestrians "
            f"with boxes jittering ≤ {JITTER_M * 100:.0f} cm, through {where} (pid {os.getpid()})")
