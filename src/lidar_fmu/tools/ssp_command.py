"""``lidar-fmu build --ssp``: the options, and the command that packs the SSP system (:mod:`lidar_fmu.cosim.ssp`)."""
from __future__ import annotations

import argparse

from ..errors import UserError
from .paths import check_output_folder

#: the lidar's sensor when --sensor is not given: the FMU's own default (fmu/LidarSensor.py)
DEFAULT_SENSOR = "ouster_os1_128"


def add_ssp_options(p: argparse.ArgumentParser) -> None:
    """``build``'s options for an SSP package (defaults None: given without --ssp, they are refused)."""
    p.add_argument("--ssp", action="store_true",
                   help="instead: an SSP package (.ssp) that replays --trace in any SSP master (OpenMCx, FMPy): an "
                        "OSI trace player, the lidar FMU and an OSI trace writer, connected "
                        "(docs/fmu.md#ssp-a-ready-system-for-openmcx-and-other-ssp-masters)")
    p.add_argument("--trace", default=None, metavar="TRACE",
                   help="--ssp: the SensorView trace (.osi, .osi.xz, .mcap) the player plays; carried inside")
    p.add_argument("--sensor", default=None, metavar="SPEC",
                   help=f"--ssp: the lidar: a preset name, a spec file (carried inside) or a rig "
                        f"(default: {DEFAULT_SENSOR})")
    p.add_argument("--assets", default=None, metavar="DIR",
                   help="--ssp: the folder the trace's model_reference strings resolve in; carried inside")
    p.add_argument("--sensordata", default=None, metavar="PATH",
                   help="--ssp: the SensorData trace the writer writes (.osi, .osi.xz, .mcap; relative to the "
                        "master's working directory; default: sensordata.osi)")
    p.add_argument("--outputs", default=None, metavar="LIST",
                   help="--ssp: the lidar's OSI layers, its outputs parameter (a comma list of detections, "
                        "reflections, logical, objects; default: the sensor spec's, else detections; with a --then "
                        "model that reads a SensorView: detections,reflections)")
    p.add_argument("--then", default=None, metavar="FMU",
                   help="--ssp: an OSMP model FMU (FMI 2.0) between the lidar and the writer: one with "
                        "OSMPSensorDataIn takes the lidar's SensorData, one with OSMPSensorViewIn (a reflection-based "
                        "sensor model, e.g. openMSL's sl-1-5) the SensorView carrying its reflections; the writer "
                        "records its OSMPSensorDataOut (docs/fmu.md#a-downstream-model-then)")


def build_ssp_command(args) -> None:
    """Pack, validate and report the SSP system; then initialize its lidar FMU once, as ``build`` does, so that a
    master's first run on this machine finds the kernels compiled."""
    import os
    import tempfile
    import zipfile

    from ..cosim.fmu_package import DEFAULT_FMU, warm_kernel_cache
    from ..cosim.ssp import DEFAULT_SENSORDATA, build_ssp, validate_ssp
    from .replay import trace_scenario

    if not args.trace:
        raise UserError("build --ssp needs --trace: the SensorView trace (.osi, .osi.xz, .mcap) its player plays")
    sensor = args.sensor or DEFAULT_SENSOR
    if os.path.isdir(sensor):
        raise UserError(f"--sensor {sensor!r} is a folder; give a preset name or a spec file")
    name = trace_scenario(args.trace, sensor, args.assets)["name"]  # refuses a missing trace or assets folder
    if args.output:
        output = args.output
    else:  # beside the default FMUs: dist/ in a source checkout, else the user cache (or LIDAR_FMU_DIST)
        DEFAULT_FMU.parent.mkdir(parents=True, exist_ok=True)
        output = str(DEFAULT_FMU.parent / f"{name}.ssp")
    check_output_folder(output, "SSP package")
    system = build_ssp(output, args.trace, sensor, assets=args.assets,
                       sensordata=args.sensordata or DEFAULT_SENSORDATA, name=f"lidar-fmu replay of {name}",
                       outputs=args.outputs, then=args.then)
    problems = validate_ssp(system.path)
    for problem in problems:
        print(f"validation: {problem}")
    if problems:
        raise UserError(f"{system.path} has {len(problems)} validation problem(s)")
    chain = " → ".join(c.name if c.name != "lidar" else f"lidar ({sensor})" for c in system.components)
    print(f"built {system.path}: {system.frames} SensorViews of {os.path.basename(args.trace)}, one per "
          f"{system.step_s:g} s step from {system.start_s:g} s to {system.stop_s:g} s: {chain} → {system.sensordata}")
    count = {3: "three", 4: "four", 5: "five"}[len(system.components)]
    print(f"  SSD and parameter sets valid against SSP 1.0; the {count} FMUs pass FMPy's validation")
    print("initializing its lidar FMU once as a master does (a machine's first run compiles its kernels)", flush=True)
    with tempfile.TemporaryDirectory(prefix="lidar_fmu_ssp_") as work, zipfile.ZipFile(system.path) as archive:
        print(f"  FMU: {warm_kernel_cache(archive.extract('resources/LidarSensor.fmu', work))}")
