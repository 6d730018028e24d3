"""Fuzz the built FMU with mutated SensorViews (fixed seed): every step returns fmi2OK and a SensorData that parses.

Each input is a valid SensorView mutated at the byte level (bit flips,
truncation, insertion, deletion, overwrite, splicing two views) or at the
field level (NaN / infinite / huge / tiny / negative values in positions,
orientations, dimensions, mountings and rear-axle offsets; duplicated,
many or id-less objects; a missing or unknown host; odd timestamps and
model references). It goes through the FMU over real OSMP pointers (FMPy,
in this process), then the clean view does. Checked each step:

* ``fmi2DoStep`` returns fmi2OK and takes less than ``STEP_LIMIT_S``;
* the log shows no bug (``step failed`` / ``do_step failed``: an exception
  the model did not expect);
* the SensorData parses; ``valid`` ⇔ data available, ``count`` detections;
  an invalid step publishes an empty one with ``DATA_QUALIFIER_NOT_AVAILABLE``;
  inputs that are invalid by the README's rules (NaN/∞ anywhere in a pose, a
  host id with no host object, a host or mounting beyond ±10⁷ m) are invalid;
* the clean step after it is byte-identical to that of a twin instance
  that stepped ``None`` (an empty input) instead of the fuzzed one: nothing
  of a bad input outlives its step.

Every failing input is written to ``fuzz_failures/`` in the test's temporary
folder (``<index>_<kind>.bin``) with the list of failures; replay one with
:func:`reproduce`. ``python tests/test_fuzz_fmu.py`` prints the statistics.
"""
from __future__ import annotations

import collections
import faulthandler
import functools
import math
import pathlib
import random
import struct
import time

import pytest
from google.protobuf.message import DecodeError
from osi3.osi_featuredata_pb2 import SensorDetectionHeader
from osi3.osi_sensordata_pb2 import SensorData
from osi3.osi_sensorview_pb2 import SensorView

from helpers.fmu_inputs import SHARED_TRACE, SMALL_SENSOR
from helpers.osi_views import HOST_ID, sensor_view
from lidar_fmu.osi.decode import MAX_POSITION_M
from lidar_fmu.osi.trace import read_trace

SEED = 20240610
INPUTS = 300
STEP_LIMIT_S = 10.0  # one step; a hang anywhere ends the process after HANG_LIMIT_S with every thread's traceback
HANG_LIMIT_S = 300.0
NOT_AVAILABLE = SensorDetectionHeader.DATA_QUALIFIER_NOT_AVAILABLE
BUG_MARKERS = ("step failed", "do_step failed", "Traceback")

NAN, INF = float("nan"), float("inf")
#: values a field-level mutation writes into a double (positions, angles, sizes)
ODD_VALUES = (NAN, INF, -INF, 1e300, -1e300, 1e30, 2e7, -2e7, 9.9e6, 1e-300, 5e-324, 0.0, -0.0, -1.0, -1e3, 1e-7,
              1e4, 3.5e38)
NON_FINITE = {"nan", "inf", "-inf"}


@functools.lru_cache(maxsize=1)
def _base_views() -> tuple[bytes, ...]:
    """Valid SensorViews to mutate: boxes around a host with a mounting and a building; a frame of a shared trace."""
    cars = [(20, (14.0, -3.0, 0.9), (0, 0, math.radians(25)), (4.6, 1.9, 1.8), ""),
            (21, (-9.0, 4.0, 0.9), (0, 0, math.radians(-60)), (4.2, 1.8, 1.6), ""),
            (22, (3.0, 8.0, 1.2), (0.02, -0.01, 0.0), (8.0, 2.5, 2.4), ""),
            (23, (6.0, -1.5, 0.9), (0, 0, 0.0), (0.5, 0.6, 1.75), "")]
    view = SensorView.FromString(sensor_view(cars, time_s=0.3, host=(HOST_ID, (0.5, 0.0, 0.75), 0.05),
                                             mounting=((1.3, 0.0, 1.4), (0.0, math.radians(1), 0.0))))
    building = view.global_ground_truth.stationary_object.add()
    building.id.value = 500
    building.base.position.x, building.base.position.y, building.base.position.z = 0.0, -12.0, 4.0
    building.base.dimension.length, building.base.dimension.width, building.base.dimension.height = 30.0, 6.0, 8.0
    shared = next(iter(read_trace(SHARED_TRACE)))
    return view.SerializeToString(), shared


# -- mutations --------------------------------------------------------------------------------------------------------
def _objects(view):
    gt = view.global_ground_truth
    return list(gt.moving_object) + list(gt.stationary_object)


def _label(value: float) -> str:
    return "nan" if value != value else repr(value)


def _field_mutation(rng: random.Random, data: bytes) -> tuple[str, bytes, bool]:
    """(kind, bytes, must be invalid) of one field-level mutation of ``data``."""
    view = SensorView.FromString(data)
    gt = view.global_ground_truth
    objects = _objects(view)
    host_id = view.host_vehicle_id.value
    what = rng.choice(["pose", "pose", "dimension", "dimension", "mounting", "rear", "duplicate", "many",
                       "host_gone", "host_unknown", "host_none", "ids", "timestamp", "model_reference",
                       "no_ground_truth", "merge_views"])
    invalid = False
    if what in ("pose", "dimension"):
        obj = rng.choice(objects)
        value = rng.choice(ODD_VALUES)
        if what == "pose":
            part = rng.choice(["position", "orientation"])
            axis = rng.choice(["x", "y", "z"] if part == "position" else ["roll", "pitch", "yaw"])
            setattr(getattr(obj.base, part), axis, value)
            is_host = obj.id.value == host_id and obj in gt.moving_object
            invalid = _label(value) in NON_FINITE or (is_host and part == "position" and abs(value) > MAX_POSITION_M)
            kind = f"{part}.{axis}={_label(value)}{' (host)' if is_host else ''}"
        else:
            axis = rng.choice(["length", "width", "height"])
            setattr(obj.base.dimension, axis, value)
            is_host = obj.id.value == host_id and obj in gt.moving_object
            invalid = _label(value) in NON_FINITE and is_host  # another object's size costs only that object
            kind = f"dimension.{axis}={_label(value)}{' (host)' if is_host else ''}"
    elif what == "mounting":
        value = rng.choice(ODD_VALUES)
        part, axis = rng.choice([("position", "x"), ("position", "z"), ("orientation", "yaw"), ("orientation", "roll")])
        setattr(getattr(view.mounting_position, part), axis, value)
        invalid = _label(value) in NON_FINITE or (part == "position" and abs(value) > MAX_POSITION_M)
        kind = f"mounting.{part}.{axis}={_label(value)}"
    elif what == "rear":
        host = next((o for o in gt.moving_object if o.id.value == host_id), None)
        if host is None:
            return "rear (no host)", data, False
        value = rng.choice(ODD_VALUES)
        axis = rng.choice(["x", "y", "z"])
        setattr(host.vehicle_attributes.bbcenter_to_rear, axis, value)
        # the host's rear axle then lies beyond ±1e7 m for |value| ≥ 2e7 whatever its yaw (9.9e6: inside)
        invalid = _label(value) in NON_FINITE or abs(value) >= 2 * MAX_POSITION_M
        kind = f"bbcenter_to_rear.{axis}={_label(value)}"
    elif what == "duplicate":
        source = rng.choice(list(gt.moving_object))
        copy = gt.moving_object.add()
        copy.CopyFrom(source)
        copy.base.position.x += rng.uniform(-5, 5)
        kind = "duplicate id"
    elif what == "many":
        for k in range(rng.choice([50, 200])):
            o = gt.moving_object.add()
            o.id.value = 10_000 + k
            o.base.position.x, o.base.position.y, o.base.position.z = rng.uniform(-60, 60), rng.uniform(-60, 60), 1.0
            o.base.dimension.length = o.base.dimension.width = o.base.dimension.height = rng.uniform(0.1, 3)
        kind = "many objects"
    elif what == "host_gone":
        host = [o for o in gt.moving_object if o.id.value == host_id]
        for o in host:
            gt.moving_object.remove(o)
        invalid = bool(host) and (view.HasField("host_vehicle_id") or gt.HasField("host_vehicle_id"))
        kind = "host object removed"
    elif what == "host_unknown":
        view.host_vehicle_id.value = gt.host_vehicle_id.value = 987_654
        invalid = True
        kind = "host id unknown"
    elif what == "host_none":
        view.ClearField("host_vehicle_id")
        gt.ClearField("host_vehicle_id")
        kind = "no host id"
    elif what == "ids":
        obj = rng.choice(objects)
        obj.id.value = rng.choice([0, 2**64 - 1, 2**63, 2**32, host_id])  # the host's: a second host (first counts)
        kind = f"id={obj.id.value}"
    elif what == "timestamp":
        view.timestamp.seconds = rng.choice([-(2**62), -1, 0, 2**62])
        view.timestamp.nanos = rng.choice([0, 999_999_999, 2**32 - 1])  # uint32: beyond a second too
        kind = "odd timestamp"
    elif what == "model_reference":
        obj = rng.choice(objects)
        obj.model_reference = rng.choice(["../../../etc/passwd", "/dev/zero", "\x00", "x" * 5000, "car.obj",
                                          "missing.glb", "é/ü.obj"])
        gt.model_reference = rng.choice(["", "/dev/urandom", "street.obj"])
        kind = "model_reference"
    elif what == "no_ground_truth":
        view.ClearField("global_ground_truth")
        invalid = True
        kind = "no global_ground_truth"
    else:
        other = rng.choice(_base_views())
        return "merged with another view", data + other, False  # protobuf merge: repeated fields append
    return kind, view.SerializeToString(), invalid


def _byte_mutation(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    b = bytearray(data)
    what = rng.choice(["bitflip", "truncate", "insert", "delete", "overwrite", "splice"])
    if what == "bitflip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif what == "truncate":
        del b[rng.randrange(len(b)):]
    elif what == "insert":
        i = rng.randrange(len(b) + 1)
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif what == "delete":
        i = rng.randrange(len(b))
        del b[i:i + rng.randint(1, 16)]
    elif what == "overwrite":
        i = rng.randrange(len(b))
        b[i:i + 8] = struct.pack("<d", rng.choice(ODD_VALUES))  # a double somewhere: hits positions sometimes
    else:
        other = rng.choice(_base_views())
        b = b[:rng.randrange(len(b))] + other[rng.randrange(len(other)):]
    return what, bytes(b)


def fuzz_inputs(seed: int = SEED, count: int = INPUTS):
    """Yield ``(index, kind, bytes, must_be_invalid)`` for ``count`` mutated SensorViews (deterministic for ``seed``)."""
    rng = random.Random(seed)
    bases = _base_views()
    for index in range(count):
        data = rng.choice(bases)
        if rng.random() < 0.5:
            kind, mutated = _byte_mutation(rng, data)
            yield index, kind, mutated, False
        else:
            kind, mutated, invalid = _field_mutation(rng, data)
            yield index, kind, mutated, invalid


# -- driving the FMU ----------------------------------------------------------------------------------------------------
def _do_step(fmu, data: bytes | None, time_s: float, step_s: float = 0.1):
    """One doStep with ``data`` as OSMPSensorViewIn: (status name, outputs, seconds)."""
    from fmpy.fmi1 import FMICallException
    from fmpy.fmi2 import fmi2True

    fmu.set_binary("OSMPSensorViewIn", data)
    t0 = time.perf_counter()
    try:
        status = fmu.fmu.fmi2DoStep(fmu.fmu.component, time_s, step_s, fmi2True)
        name = ["OK", "WARNING"][status] if status in (0, 1) else str(status)
    except FMICallException as exc:  # discard, error, fatal
        name = str(exc)
    return name, fmu.outputs(), time.perf_counter() - t0


def _check_output(out) -> list[str]:
    """What is wrong with one step's outputs (empty when they are consistent)."""
    try:
        data = SensorData.FromString(out.sensor_data)
    except DecodeError as exc:
        return [f"SensorData does not parse: {exc}"]
    if len(data.feature_data.lidar_sensor) != 1:
        return [f"SensorData has {len(data.feature_data.lidar_sensor)} lidar_sensor entries"]
    lidar = data.feature_data.lidar_sensor[0]
    problems = []
    if out.valid:
        if lidar.header.data_qualifier == NOT_AVAILABLE:
            problems.append("valid, but the data qualifier says not available")
        if not (out.count == len(lidar.detection) == lidar.header.number_of_valid_detections):
            problems.append(f"valid with count {out.count}, {len(lidar.detection)} detections, "
                            f"header {lidar.header.number_of_valid_detections}")
        bad = [d for d in lidar.detection if not all(map(math.isfinite, (d.position.distance, d.position.azimuth,
                                                                         d.position.elevation)))]
        if bad:
            problems.append(f"{len(bad)} detections with NaN/∞ positions")
    elif out.count != 0 or len(lidar.detection) or lidar.header.data_qualifier != NOT_AVAILABLE:
        problems.append(f"invalid, but count {out.count}, {len(lidar.detection)} detections, "
                        f"qualifier {lidar.header.data_qualifier}")
    return problems


def run_fuzz(fmu_path, sensor_spec: str, seed: int = SEED, count: int = INPUTS, failures_dir=None) -> dict:
    """Fuzz one FMU instance against a twin; return statistics (``failures``: list of (index, kind, problems))."""
    from lidar_fmu.cosim.fmu_host import FmuInstance

    good = _base_views()[0]
    stats = {"inputs": 0, "kinds": collections.Counter(), "status": collections.Counter(),
             "log": collections.Counter(), "valid": 0, "invalid": 0, "expected_invalid": 0,
             "max_step_s": 0.0, "failures": []}
    with FmuInstance(fmu_path, {"sensor": sensor_spec}, instance_name="fuzzed") as fmu, \
            FmuInstance(fmu_path, {"sensor": sensor_spec}, instance_name="twin") as twin:
        for instance in (fmu, twin):  # load, build and compile outside the timed steps
            assert _do_step(instance, good, 0.0)[1].valid
        t = 0.1
        for index, kind, data, must_be_invalid in fuzz_inputs(seed, count):
            problems = []
            logged = len(fmu.messages)
            status, out, seconds = _do_step(fmu, data, t)
            _do_step(twin, None, t)
            t += 0.1
            stats["inputs"] += 1
            stats["kinds"][kind.split("=")[0]] += 1
            stats["status"][status] += 1
            stats["max_step_s"] = max(stats["max_step_s"], seconds)
            stats["valid" if out.valid else "invalid"] += 1
            stats["expected_invalid"] += must_be_invalid
            for level, _ in fmu.messages[logged:]:
                stats["log"][level] += 1
            if status != "OK":
                problems.append(f"fmi2DoStep returned {status}")
            if seconds > STEP_LIMIT_S:
                problems.append(f"the step took {seconds:.1f} s")
            bugs = [text.splitlines()[0] for _, text in fmu.messages[logged:] if any(m in text for m in BUG_MARKERS)]
            if bugs:
                problems.append(f"a bug in the log: {bugs[0]}")
            problems += _check_output(out)
            if must_be_invalid and out.valid:
                problems.append("an input the README calls invalid gave valid output")
            # the clean view next: byte-identical to the twin's, which never saw the fuzzed input
            status_next, after, _ = _do_step(fmu, good, t)
            _, reference, _ = _do_step(twin, good, t)
            t += 0.1
            if status_next != "OK" or not after.valid:
                problems.append(f"the clean step after it: {status_next}, valid={after.valid}")
            elif after.sensor_data != reference.sensor_data:
                problems.append(f"the clean step after it differs from the twin's ({after.count} vs "
                                f"{reference.count} detections)")
            if problems:
                stats["failures"].append((index, kind, problems))
                if failures_dir is not None:
                    folder = pathlib.Path(failures_dir)
                    folder.mkdir(parents=True, exist_ok=True)
                    safe = "".join(c if c.isalnum() or c in "._-=" else "_" for c in kind)[:60]
                    (folder / f"{index:04d}_{safe}.bin").write_bytes(data)
    return stats


def reproduce(fmu_path, sensor_spec: str, path) -> list[str]:
    """Step one saved input (a ``fuzz_failures/*.bin``) and then the clean view; the log lines it produced."""
    from lidar_fmu.cosim.fmu_host import FmuInstance

    with FmuInstance(fmu_path, {"sensor": sensor_spec}) as fmu:
        status, out, _ = _do_step(fmu, pathlib.Path(path).read_bytes(), 0.0)
        _do_step(fmu, _base_views()[0], 0.1)
        return [f"doStep {status}, valid={out.valid}, count={out.count}"] + [f"[{s}] {m}" for s, m in fmu.messages]


# -- the test -----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_sensor(tmp_path_factory):
    import json

    path = tmp_path_factory.mktemp("spec") / "small.json"
    path.write_text(json.dumps(SMALL_SENSOR))
    return str(path)


def test_mutations_are_deterministic_and_varied():
    first = [(k, kind, data) for k, kind, data, _ in fuzz_inputs(SEED, 50)]
    assert first == [(k, kind, data) for k, kind, data, _ in fuzz_inputs(SEED, 50)]
    assert len({data for _, _, data in first}) > 45
    kinds = {kind.split("=")[0].split(".")[0] for _, kind, _, _ in fuzz_inputs(SEED, INPUTS)}
    assert {"bitflip", "truncate", "insert", "delete", "position", "dimension", "duplicate id"} <= kinds


def test_the_output_check_catches_inconsistent_outputs():
    """The oracle itself: what it must call wrong, it does."""
    import numpy as np

    from lidar_fmu.cosim.fmu_host import FMUOutput
    from lidar_fmu.osi.encode import encode_empty_sensor_data

    empty = encode_empty_sensor_data(timestamp_s=0.1, sensor_id=0, mounting_position=np.eye(4), cycle_counter=1)
    available = encode_empty_sensor_data(timestamp_s=0.1, sensor_id=0, mounting_position=np.eye(4), cycle_counter=1,
                                         data_qualifier=SensorDetectionHeader.DATA_QUALIFIER_AVAILABLE)
    assert _check_output(FMUOutput(empty, False, 0)) == []
    assert _check_output(FMUOutput(available, True, 0)) == []
    assert _check_output(FMUOutput(empty, True, 0)) == ["valid, but the data qualifier says not available"]
    assert "invalid, but count 3" in _check_output(FMUOutput(empty, False, 3))[0]
    assert "valid with count 5" in _check_output(FMUOutput(available, True, 5))[0]
    assert "does not parse" in _check_output(FMUOutput(b"\xff" * 9, False, 0))[0]


@pytest.mark.slow
def test_fuzzed_sensor_views_through_the_fmu(fmu_path, small_sensor, tmp_path):
    faulthandler.dump_traceback_later(HANG_LIMIT_S, exit=True)  # a hang in native code: traceback, then exit
    try:
        stats = run_fuzz(fmu_path, small_sensor, failures_dir=tmp_path / "fuzz_failures")
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert stats["inputs"] == INPUTS
    assert stats["valid"] > 20 and stats["invalid"] > 20  # the mutations reach both sides
    report = "\n".join(f"  #{index} {kind}: {'; '.join(problems)}" for index, kind, problems in stats["failures"])
    assert not stats["failures"], (
        f"{len(stats['failures'])} of {INPUTS} fuzzed inputs (seed {SEED}) failed; inputs saved in "
        f"{tmp_path / 'fuzz_failures'}:\n{report}")


if __name__ == "__main__":  # statistics for the README: python tests/test_fuzz_fmu.py
    import json
    import sys
    import tempfile

    from lidar_fmu.cosim.fmu_package import build_fmu

    folder = pathlib.Path(tempfile.mkdtemp(prefix="lidar-fmu-fuzz-"))
    spec = folder / "small.json"
    spec.write_text(json.dumps(SMALL_SENSOR))
    fmu = str(build_fmu(folder / "LidarSensor.fmu"))
    t0 = time.perf_counter()
    result = run_fuzz(fmu, str(spec), count=int(sys.argv[1]) if len(sys.argv) > 1 else INPUTS,
                      failures_dir=folder / "fuzz_failures")
    result["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps({k: (dict(v) if isinstance(v, collections.Counter) else v) for k, v in result.items()}, indent=1,
                     default=str))
    print(f"failing inputs (if any) in {folder / 'fuzz_failures'}")
