#!/usr/bin/env python3
"""Time the FMI 2.0 and FMI 3.0 FMUs side by side on the shared trace, and the configuration handshake.

    PYTHONPATH=src python3 scripts/fmi_versions_bench.py [SENSOR] [REPEATS]

Builds both FMUs into a temporary folder, then steps each through the 20 SensorViews of
scenarios/osi_validation_minimal in FMPy (FmuInstance: set the SensorView, doStep, get the SensorData), alternating
the two REPEATS times, and prints each version's median step (ms) and whether every frame's SensorData was the same
in both; then how long ExitInitializationMode takes with the request echoed as the configuration and with a
quarter of the field of view. SENSOR: a preset (default ouster_os1_128).
"""
import statistics
import sys
import tempfile
import time
from pathlib import Path

from osi3.osi_sensorviewconfiguration_pb2 import SensorViewConfiguration

from lidar_fmu.cosim.fmu_host import FmuInstance
from lidar_fmu.cosim.fmu_package import build_fmu
from lidar_fmu.osi.trace import read_trace

TRACE = Path(__file__).parent.parent / "scenarios" / "osi_validation_minimal" / (
    "20240618T122540Z_sv_370_244_20_minimal_valid_example.osi")


def quarter_field_of_view(request: bytes) -> bytes:
    config = SensorViewConfiguration.FromString(request)
    config.field_of_view_horizontal = config.field_of_view_horizontal / 4
    return config.SerializeToString()


def main(argv: list[str]) -> int:
    sensor = argv[0] if argv else "ouster_os1_128"
    repeats = int(argv[1]) if len(argv) > 1 else 3
    views = list(read_trace(str(TRACE), "SensorView"))
    with tempfile.TemporaryDirectory() as folder:
        fmus = {2: build_fmu(Path(folder) / "LidarSensor.fmu"),
                3: build_fmu(Path(folder) / "LidarSensor-fmi3.fmu", fmi_version=3)}
        steps_ms: dict[int, list[float]] = {2: [], 3: []}
        data: dict[int, list[bytes]] = {}
        for _ in range(repeats):
            for version, path in fmus.items():
                with FmuInstance(path, {"sensor": sensor}) as fmu:
                    data[version] = []
                    for k, view in enumerate(views):
                        t0 = time.perf_counter()
                        out = fmu.step(view, 0.1 * k, 0.1)
                        steps_ms[version].append((time.perf_counter() - t0) * 1e3)
                        data[version].append(out.sensor_data)
        same = data[2] == data[3]
        for version in (2, 3):
            size = statistics.mean(len(d) for d in data[version]) / 1e3
            print(f"FMI {version}.0: median step {statistics.median(steps_ms[version]):.1f} ms over "
                  f"{len(steps_ms[version])} steps of {sensor} ({size:.0f} kB SensorData each)")
        print(f"the same SensorData in both, frame by frame: {same}")
        for version, path in fmus.items():
            for name, configure in (("echoed request", lambda request: request),
                                    ("a quarter of the field of view", quarter_field_of_view)):
                t0 = time.perf_counter()
                with FmuInstance(path, {"sensor": sensor}, configure=configure) as fmu:
                    initialized_s = time.perf_counter() - t0
                    count = fmu.step(views[0], 0.0, 0.1).count
                print(f"FMI {version}.0, {name}: instantiate + initialize {initialized_s:.2f} s, first frame "
                      f"{count} detections")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
