"""SSP packages: the lidar FMU between an OSI trace player and an OSI trace writer, as one system.

``lidar-fmu build --ssp`` (:func:`build_ssp`) writes a System Structure Package (SSP 1.0) that replays a
SensorView trace through the lidar in any SSP master: ``OsiTracePlayer.fmu`` → ``LidarSensor.fmu`` →
``OsiTraceWriter.fmu``, their OSMP buffers connected as three Integers, each component's parameters an ``.ssv``
bound in the SSD and also its FMU's start values, the files they name carried inside the FMUs. With ``then``, an
OSMP model FMU (:func:`downstream_model`) takes the lidar's SensorData, or through ``OsiSensorDataView.fmu`` the
SensorView with its reflections, and the writer records its SensorData. Main names: :func:`system_components`,
:func:`system_structure`, :func:`parameter_set`, :func:`trace_times` (the step, one per SensorView),
:func:`validate_ssp`. The package, how OpenMCx and FMPy run it and why the SensorData trace equals
``lidar-fmu replay``'s: docs/fmu.md#ssp-a-ready-system-for-openmcx-and-other-ssp-masters.
"""
from __future__ import annotations

import datetime
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree as ET

from ..errors import LidarFmuError, UserError
from .osmp_variables import ROLES

SSP_VERSION = "1.0"
SSD_NS = "http://ssp-standard.org/SSP1/SystemStructureDescription"
SSC_NS = "http://ssp-standard.org/SSP1/SystemStructureCommon"
SSV_NS = "http://ssp-standard.org/SSP1/SystemStructureParameterValues"
FMU_MIME_TYPE = "application/x-fmu-sharedlibrary"
#: OpenMCx's annotation of the DefaultExperiment: its step and stepping (openmcx scripts/SSP/Task.xsd)
OPENMCX_TASK = "com.avl.model.connect.ssp.task"
#: where a component's files (trace, sensor spec, assets) go inside its FMU's resources/
CARRIED = "ssp_files"
#: the SensorData trace the writer writes by default, relative to the master's working directory
DEFAULT_SENSORDATA = "sensordata.osi"


@dataclass
class Component:
    """One FMU of the system: its name in the SSD, its slave, its parameter values and the files they name."""

    name: str
    model: str  # the FMU's model identifier (its slave class): resources/<model>.fmu
    parameters: dict[str, str]
    #: OSMP binary variables: prefix → "input" | "output"
    binaries: dict[str, str]
    #: files or folders carried into the FMU's resources/ssp_files/
    carried: list[Path] = field(default_factory=list)
    #: the FMU's DefaultExperiment (start_time, stop_time, step_size), when the system sets it
    default_experiment: dict[str, float] | None = None
    #: an FMU built elsewhere, packed as it is (a downstream model); None: built from fmu/<model>.py
    fmu: Path | None = None


def connections(components: list[Component]) -> list[tuple[str, str, str, str]]:
    """The system's connections, a chain in the components' order: (from component, its output binary, to
    component, its input binary)."""
    def binary(component: Component, kind: str) -> str:
        return next(prefix for prefix, k in component.binaries.items() if k == kind)

    return [(a.name, binary(a, "output"), b.name, binary(b, "input")) for a, b in zip(components, components[1:])]


#: the OSMP inputs a downstream model may take: the lidar's SensorData as it is, or the SensorView it carries
DOWNSTREAM_INPUTS = ("OSMPSensorDataIn", "OSMPSensorViewIn")
#: the OSMP output of a downstream model, what the writer records
DOWNSTREAM_OUTPUT = "OSMPSensorDataOut"


@dataclass
class DownstreamModel:
    """An OSMP FMU that takes the lidar's output in a system: its file, model identifier and OSMP input."""

    path: Path
    model: str
    input: str  # one of DOWNSTREAM_INPUTS

    @property
    def takes_view(self) -> bool:
        """Does it read a SensorView (a reflection-based sensor model), so that the view FMU feeds it?"""
        return self.input == "OSMPSensorViewIn"


def downstream_model(fmu: str) -> DownstreamModel:
    """The OSMP model FMU ``fmu`` (``build --ssp --then``) as the system connects it: FMI 2.0 co-simulation, an
    ``OSMPSensorDataIn`` or ``OSMPSensorViewIn`` input and an ``OSMPSensorDataOut`` output, each as OSMP's three
    Integers (``.base.lo``, ``.base.hi``, ``.size``). Anything else is a :class:`UserError` naming the file and
    what it lacks."""
    from fmpy import read_model_description

    if not os.path.isfile(fmu):
        raise UserError(f"--then {fmu!r}: FMU not found")
    try:
        description = read_model_description(fmu, validate=False)
    except Exception as exc:  # fmpy raises what zipfile and lxml raise: not a zip, no modelDescription.xml, bad XML
        raise UserError(f"--then {fmu!r} is not an FMU whose model description reads: {exc}") from None
    if description.fmiVersion != "2.0" or description.coSimulation is None:
        raise UserError(f"--then {fmu!r} is FMI {description.fmiVersion} "
                        f"{'co-simulation' if description.coSimulation else 'without co-simulation'}; the system's "
                        f"FMUs are FMI 2.0 co-simulation")
    integers = {(v.name, v.causality) for v in description.modelVariables if v.type == "Integer"}

    def has(prefix: str, causality: str) -> bool:
        return all((f"{prefix}.{role}", causality) in integers for role in ROLES)

    inputs = [prefix for prefix in DOWNSTREAM_INPUTS if has(prefix, "input")]
    if not inputs or not has(DOWNSTREAM_OUTPUT, "output"):
        raise UserError(f"--then {fmu!r} ({description.modelName}) has no OSMP {' or '.join(DOWNSTREAM_INPUTS)} "
                        f"input and {DOWNSTREAM_OUTPUT} output (each as the Integers {', '.join(ROLES)})")
    return DownstreamModel(Path(fmu).resolve(), description.coSimulation.modelIdentifier, inputs[0])


@dataclass
class SspSystem:
    """What :func:`build_ssp` packed: the path, the trace's views and the system's time line."""

    path: Path
    components: list[Component]
    frames: int  # SensorViews in the trace
    step_s: float  # one step per view
    start_s: float  # the first view's time less one step
    stop_s: float  # one step per view later

    @property
    def sensordata(self) -> str:
        """The SensorData trace the writer writes (relative: to the master's working directory)."""
        return self.components[-1].parameters["trace"]


@dataclass
class TraceTimes:
    """A SensorView trace's views and times, as a replay steps through them."""

    frames: int
    first_s: float  # the first view's timestamp
    step_s: float

    @property
    def start_s(self) -> float:
        """When a system replaying the trace starts: one step before the first view, whose step ends at its time."""
        return round(self.first_s - self.step_s, 9)

    @property
    def stop_s(self) -> float:
        """When it stops: one step per view (the last view's time, for a trace whose views are a step apart)."""
        return round(self.start_s + self.frames * self.step_s, 9)


def trace_times(trace: str, one_view_s: float) -> TraceTimes:
    """The views of a SensorView trace and its step (the median spacing of the first views' timestamps, as
    ``lidar-fmu replay`` takes it; ``one_view_s`` for a trace whose time does not advance), read through; a missing
    file, another message type or a damaged frame is a :class:`~lidar_fmu.osi.trace.TraceError` naming it."""
    from ..osi.decode import sensor_view_time_s
    from ..osi.trace import STEP_LOOKAHEAD, check_message_type, median_step_s, read_trace

    check_message_type(trace, "SensorView")
    times_s = [sensor_view_time_s(view) for view in read_trace(trace, "SensorView")]
    if not times_s:
        raise UserError(f"trace {trace} holds no SensorView")
    # OSI timestamps are whole nanoseconds: so are the system's times (no 2.8e-17 s start from 0.1 s less 0.1 s)
    step_s = round(median_step_s(times_s[:STEP_LOOKAHEAD], one_view_s), 9)
    return TraceTimes(len(times_s), round(times_s[0], 9), step_s)


def _same_rig(a: list, b: list) -> bool:
    """Do two loaded rigs hold the same lidars (patterns, ranges, rates, mountings, ids)?"""
    import numpy as np

    def same_pose(p, q):
        return (p is None and q is None) or (p is not None and q is not None and np.array_equal(p, q))

    return len(a) == len(b) and all(
        x.sensor.name == y.sensor.name and x.sensor_id == y.sensor_id and same_pose(x.mounting_pose, y.mounting_pose)
        and np.array_equal(x.sensor.pattern.directions, y.sensor.pattern.directions)
        and (x.sensor.frame_rate_hz, x.sensor.min_range_m, x.sensor.max_range_m)
        == (y.sensor.frame_rate_hz, y.sensor.min_range_m, y.sensor.max_range_m)
        for x, y in zip(a, b))


def carried_sensor(sensor: str, folder: Path) -> tuple[str, list[Path]]:
    """The lidar's ``sensor`` parameter inside the system → (its value, the files carried into the FMU).

    A preset name (or an inline rig list) stays as it is. A spec file is copied into ``folder`` with the unit
    files its ``ouster_metadata`` / ``calibration`` name beside it (as a spec file resolves them), and the value is
    the copy's name inside the FMU; a spec whose copy loads other lidars than it (it names files elsewhere) is a
    :class:`UserError`. A spec that does not load is its :class:`~lidar_fmu.sensors.spec.SensorSpecError`.
    """
    from ..sensors.rig import load_rig
    from ..sensors.spec import FILE_KEYS, _read_spec_file

    rig = load_rig(sensor)
    if not os.path.isfile(sensor):
        return sensor, []
    spec_dir = folder / "sensor"
    spec_dir.mkdir(parents=True)
    shutil.copy2(sensor, spec_dir / os.path.basename(sensor))
    beside = os.path.dirname(os.path.abspath(sensor))
    spec = _read_spec_file(sensor)
    for key in FILE_KEYS:  # (a name reaching out of the spec's folder, ../x, is not carried: the check below)
        name = spec.get(key)
        if (isinstance(name, str) and name and not os.path.isabs(name) and not os.path.normpath(name).startswith("..")
                and os.path.isfile(os.path.join(beside, name))):
            (spec_dir / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.join(beside, name), spec_dir / name)
    copy = spec_dir / os.path.basename(sensor)
    try:
        same = _same_rig(rig, load_rig(str(copy)))
    except LidarFmuError:
        same = False
    if not same:
        raise UserError(f"sensor spec {sensor} names files that do not go with it into the SSP (only the unit files "
                        f"its {' and '.join(FILE_KEYS)} name beside it do): give them beside the spec")
    return f"{CARRIED}/sensor/{copy.name}", [spec_dir]


def system_components(trace: str, sensor: str, staging: Path, times: TraceTimes, assets: str | None = None,
                      sensordata: str = DEFAULT_SENSORDATA, outputs: str | None = None,
                      then: DownstreamModel | None = None) -> list[Component]:
    """The player, lidar, (view and) downstream model and writer of a system replaying ``trace`` with ``sensor``,
    in the order they are chained; carried files staged in ``staging``. ``outputs``: the lidar's ``outputs``
    parameter (None: its default)."""
    experiment = {"start_time": times.start_s, "stop_time": times.stop_s, "step_size": times.step_s}
    sensor_value, sensor_files = carried_sensor(sensor, staging / "lidar")
    lidar = Component("lidar", "LidarSensor", {"sensor": sensor_value},
                      {"OSMPSensorViewIn": "input", "OSMPSensorDataOut": "output"}, sensor_files)
    if outputs is not None:
        lidar.parameters["outputs"] = outputs
    if assets:
        if not os.path.isdir(assets):
            raise UserError(f"--assets {assets!r}: folder not found")
        shutil.copytree(assets, staging / "lidar" / "assets")
        lidar.parameters["assets"] = f"{CARRIED}/assets"
        lidar.carried.append(staging / "lidar" / "assets")
    player = Component("player", "OsiTracePlayer", {"trace": f"{CARRIED}/{os.path.basename(trace)}"},
                       {"OSMPSensorViewOut": "output"}, [Path(trace)], experiment)
    writer = Component("writer", "OsiTraceWriter", {"trace": sensordata}, {"OSMPSensorDataIn": "input"}, [],
                       experiment)
    middle = []
    if then is not None:
        if then.takes_view:
            middle.append(Component("view", "OsiSensorDataView", {},
                                    {"OSMPSensorDataIn": "input", "OSMPSensorViewOut": "output"}))
        middle.append(Component("model", then.model, {}, {then.input: "input", DOWNSTREAM_OUTPUT: "output"},
                                fmu=then.path))
    return [player, lidar, *middle, writer]


def _q(namespace: str, tag: str) -> str:
    return f"{{{namespace}}}{tag}"


def parameter_set(component: Component) -> ET.Element:
    """The component's parameter values as an SSV ``ParameterSet`` (every value a String)."""
    root = ET.Element(_q(SSV_NS, "ParameterSet"), version=SSP_VERSION, name=component.name)
    parameters = ET.SubElement(root, _q(SSV_NS, "Parameters"))
    for name, value in component.parameters.items():
        parameter = ET.SubElement(parameters, _q(SSV_NS, "Parameter"), name=name)
        ET.SubElement(parameter, _q(SSV_NS, "String"), value=str(value))
    return root


def system_structure(components: list[Component], name: str, times: TraceTimes) -> ET.Element:
    """``SystemStructure.ssd``: the components (each bound to its ``resources/<name>.ssv``), their OSMP
    connections and the DefaultExperiment (OpenMCx's task: one sequential step per SensorView)."""
    from .. import __version__

    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    root = ET.Element(_q(SSD_NS, "SystemStructureDescription"), version=SSP_VERSION, name=name,
                      generationTool=f"lidar-fmu {__version__}", generationDateAndTime=now)
    system = ET.SubElement(root, _q(SSD_NS, "System"), name="LidarReplay",
                           description="an OSI SensorView trace through the lidar FMU into a SensorData trace")
    elements = ET.SubElement(system, _q(SSD_NS, "Elements"))
    for component in components:
        element = ET.SubElement(elements, _q(SSD_NS, "Component"), name=component.name, type=FMU_MIME_TYPE,
                                source=f"resources/{component.model}.fmu", implementation="CoSimulation")
        connectors = ET.SubElement(element, _q(SSD_NS, "Connectors"))
        for prefix, kind in component.binaries.items():
            for role in ROLES:
                connector = ET.SubElement(connectors, _q(SSD_NS, "Connector"), name=f"{prefix}.{role}", kind=kind)
                ET.SubElement(connector, _q(SSC_NS, "Integer"))
        if component.parameters:  # a downstream model keeps its own defaults: no parameter set
            bindings = ET.SubElement(element, _q(SSD_NS, "ParameterBindings"))
            ET.SubElement(bindings, _q(SSD_NS, "ParameterBinding"), type="application/x-ssp-parameter-set",
                          source=f"resources/{component.name}.ssv")
    chain = ET.SubElement(system, _q(SSD_NS, "Connections"))
    for start, output, end, input_ in connections(components):
        for role in ROLES:
            ET.SubElement(chain, _q(SSD_NS, "Connection"), startElement=start,
                          startConnector=f"{output}.{role}", endElement=end, endConnector=f"{input_}.{role}")
    experiment = ET.SubElement(root, _q(SSD_NS, "DefaultExperiment"), startTime=repr(times.start_s),
                               stopTime=repr(times.stop_s))
    annotation = ET.SubElement(ET.SubElement(experiment, _q(SSD_NS, "Annotations")), _q(SSC_NS, "Annotation"),
                               type=OPENMCX_TASK)
    # sequential: the player, the lidar and the writer step in turn, each on what the one before it published
    ET.SubElement(annotation, _q(OPENMCX_TASK, "Task"), stepType="sequential", deltaTime=repr(times.step_s),
                  endType="end_time")
    return root


def _write_xml(root: ET.Element, path: Path) -> None:
    for prefix, namespace in (("ssd", SSD_NS), ("ssc", SSC_NS), ("ssv", SSV_NS), ("mc", OPENMCX_TASK)):
        ET.register_namespace(prefix, namespace)
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="UTF-8", xml_declaration=True)


def build_component_fmu(component: Component, dest: Path) -> Path:
    """The component's FMU, built with its parameter values as start values and its files inside (a downstream
    model's, copied as it is)."""
    from .fmu_package import SLAVE_DIR, build_fmu

    if component.fmu is not None:
        return Path(shutil.copy2(component.fmu, dest))
    with tempfile.TemporaryDirectory(prefix="lidar_fmu_ssp_") as work:
        carried = Path(work) / CARRIED
        carried.mkdir()
        for item in component.carried:
            (shutil.copytree if item.is_dir() else shutil.copy2)(item, carried / item.name)
        values: dict[str, dict] = {"parameters": component.parameters}
        if component.default_experiment:
            values["default_experiment"] = component.default_experiment
        start = Path(work) / "start_values.json"
        start.write_text(json.dumps(values, indent=1), encoding="utf-8")
        script = SLAVE_DIR / f"{component.model}.py"
        helpers = [] if component.model == "LidarSensor" else [SLAVE_DIR / "osi_trace_slave.py"]
        return build_fmu(dest, script=script, resources=[*helpers, start, carried])


def build_ssp(dest: str | os.PathLike, trace: str, sensor: str, assets: str | None = None,
              sensordata: str = DEFAULT_SENSORDATA, name: str | None = None, outputs: str | None = None,
              then: str | None = None) -> SspSystem:
    """Write the ``.ssp`` that replays the SensorView ``trace`` through the lidar ``sensor`` (a preset, spec file or
    rig) into the SensorData trace ``sensordata`` (docs/fmu.md#ssp-a-ready-system-for-openmcx-and-other-ssp-masters)
    → what it packed. ``assets``: the folder the trace's ``model_reference`` strings resolve in, carried into the
    lidar FMU; ``outputs``: the lidar's OSI layers (its ``outputs`` parameter); ``then``: an OSMP model FMU the
    lidar feeds, whose SensorData the writer records (one that takes a SensorView gets the lidar's reflections:
    ``outputs`` holds them, by default detections and reflections). Bad input is a
    :class:`~lidar_fmu.errors.LidarFmuError` naming it, raised before anything is written."""
    from ..sensors.outputs import parse_outputs
    from ..sensors.rig import load_rig

    dest = Path(dest).resolve()
    if dest.suffix != ".ssp":
        raise UserError(f"SSP package {str(dest)!r} must end in .ssp")
    if not dest.parent.is_dir():
        raise UserError(f"SSP package {str(dest)!r}: folder {dest.parent} does not exist")
    if not sensordata.endswith((".osi", ".osi.xz", ".mcap")):
        raise UserError(f"--sensordata {sensordata!r} must end in .osi, .osi.xz or .mcap")
    model = downstream_model(then) if then is not None else None
    if model is not None and model.takes_view:
        outputs = outputs or "detections,reflections"
        if "reflections" not in (parse_outputs(outputs) or ()):
            raise UserError(f"--then {then!r} reads a SensorView (its {model.input}): the lidar's outputs "
                            f"{outputs!r} must hold reflections")
    elif outputs is not None:
        parse_outputs(outputs)  # a bad list is refused here, not by the lidar FMU in the master
    times = trace_times(trace, load_rig(sensor)[0].sensor.frame_period_s)
    name = name or f"lidar-fmu replay of {os.path.basename(trace)}"
    with tempfile.TemporaryDirectory(prefix="lidar_fmu_ssp_") as work:
        staging = Path(work)
        components = system_components(trace, sensor, staging / "carried", times, assets, sensordata, outputs, model)
        package = staging / "package"
        resources = package / "resources"
        resources.mkdir(parents=True)
        for component in components:
            build_component_fmu(component, resources / f"{component.model}.fmu")
            if component.parameters:
                _write_xml(parameter_set(component), resources / f"{component.name}.ssv")
        _write_xml(system_structure(components, name, times), package / "SystemStructure.ssd")
        staged = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as archive:  # SSP 1.0: stored or deflated
            for path in sorted(package.rglob("*")):
                if path.is_file():
                    archive.write(path, path.relative_to(package).as_posix())
        os.replace(staged, dest)
    return SspSystem(dest, components, times.frames, times.step_s, times.start_s, times.stop_s)


def validate_ssp(path) -> list[str]:
    """Problems of an ``.ssp`` (empty: none): its SSD and parameter sets read against the SSP 1.0 schemas (FMPy's
    ``fmpy.ssp.ssd.read_ssd`` validates them), every component's FMU present and passing FMPy's validation."""
    from fmpy.ssp.ssd import find_components, read_ssd
    from fmpy.validation import validate_fmu

    try:
        ssd = read_ssd(str(path), validate=True)
    except Exception as exc:  # fmpy raises a bare Exception listing the schema errors
        return [f"SystemStructure.ssd: {exc}"]
    problems = []
    with zipfile.ZipFile(path) as archive, tempfile.TemporaryDirectory(prefix="lidar_fmu_ssp_") as work:
        names = set(archive.namelist())
        for component in find_components(ssd.system):
            if component.source not in names:
                problems.append(f"{component.name}: {component.source} is not in the package")
                continue
            fmu = archive.extract(component.source, work)
            problems += [f"{component.source}: {problem}" for problem in validate_fmu(fmu)]
    return problems
