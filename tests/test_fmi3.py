"""The FMI 3.0 FMU (lidar-fmu build --fmi 3) beside the FMI 2.0 one, and OSMP's configuration handshake through both.

The FMI 3.0 FMU carries OSMP's FMI 3.0 Binary variables (osi-sensor-model-packaging 1.6.0, binary_variables.adoc,
"FMI 3.0"), passes FMPy's validation and runs in FMPy's FMU3Slave with fmi3SetBinary / fmi3GetBinary; it gives the
SensorData the FMI 2.0 FMU gives, byte for byte, and refuses what FMI 3.0 does not allow with fmi3Error and the
reason logged. A master that answers the configuration request with a narrower configuration gets the rays it asked
for, in either FMI version.
"""
import contextlib
import ctypes
import json
import math
import pathlib
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
import zipfile

import numpy as np
import pytest
from fmpy.fmi1 import FMICallException
from osi3.osi_sensordata_pb2 import SensorData
from osi3.osi_sensorviewconfiguration_pb2 import SensorViewConfiguration

from helpers.c_master import compile_master, master_env
from helpers.fmu_inputs import OSMP_VARIABLES, SHARED_TRACE, SMALL_SENSOR
from helpers.osi_views import sensor_view
from helpers.osmp_master import NARROWINGS, answer, detections
from lidar_fmu.cosim.fmu_host import FmuInstance
from lidar_fmu.cosim.fmu_package import build_fmu, validate
from lidar_fmu.osi.trace import read_trace

OSMP_NS = "{http://xsd.pmsf.net/OSISensorModelPackaging}"
SCHEMAS = pathlib.Path(__file__).parent / "data" / "schemas"
STATUS = ["OK", "WARNING", "DISCARD", "ERROR", "FATAL", "PENDING"]
CAR = (4.0, 1.8, 1.5)
#: cars all around the host at 12 m: returns in every direction
VIEW_OBJECTS = [(10 + k, (12 * math.cos(a), 12 * math.sin(a), 0.75), (0, 0, a), CAR, "")
                for k, a in enumerate(np.radians([0, 45, 90, 180, 270]))]
VIEW = sensor_view(VIEW_OBJECTS)
UNKNOWN_VR = 99_999


@pytest.fixture(scope="module")
def small_sensor(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "small.json"
    path.write_text(json.dumps(SMALL_SENSOR))
    return str(path)


def model_description(fmu_path) -> ET.Element:
    with zipfile.ZipFile(fmu_path) as fmu:
        return ET.fromstring(fmu.read("modelDescription.xml"))


def status_of(call) -> str:
    """The FMI status a call returned (FMPy raises above Warning)."""
    try:
        result = call()
    except FMICallException as exc:
        return STATUS[exc.status]
    return STATUS[result] if isinstance(result, int) else "OK"


def errors(fmu) -> list[str]:
    return [text for status, text in fmu.messages if status == "ERROR"]


def assert_refused(fmu, status, *words):
    """Error (never Fatal, never OK), and one error logged naming the reason."""
    assert status == "ERROR", fmu.messages
    assert errors(fmu) and all(word in errors(fmu)[-1] for word in words), errors(fmu)


def assert_usable(fmu):
    fmu.messages.clear()
    out = fmu.step(VIEW, 0.1, 0.1)
    assert out.valid and out.count > 0, fmu.messages
    assert not errors(fmu)


# -- packaging ------------------------------------------------------------------------------------
def test_fmi3_fmu_validates_and_carries_osmps_fmi3_binary_variables(fmus):
    """OSMP 1.6.0 for FMI 3.0: one Binary per binary variable, its mimeType equal to its annotation's mime-type
    (role "full", under <Annotations><Annotation type="net.pmsf.osmp">), start empty where FMI 3.0 allows one; the
    model's annotation in the model description's own <Annotations>. FMI 3.0: exactly one independent variable."""
    assert validate(fmus[3]) == []
    root = model_description(fmus[3])
    assert root.get("fmiVersion") == "3.0" and root.get("variableNamingConvention") == "structured"
    cosim = root.find("CoSimulation")
    assert cosim.get("modelIdentifier") == "LidarSensor" and cosim.get("needsExecutionTool") == "false"
    assert float(root.find("DefaultExperiment").get("stepSize")) == pytest.approx(0.1)
    osmp = root.find("Annotations/Annotation[@type='net.pmsf.osmp']/" + OSMP_NS + "osmp")
    assert osmp.get("version") == "1.6.0" and osmp.get("osi-version").startswith("3.")
    variables = {v.get("name"): v for v in root.find("ModelVariables")}
    for prefix, (causality, variability, initial, kind) in OSMP_VARIABLES.items():
        v = variables[prefix]
        assert v.tag == "Binary" and (v.get("causality"), v.get("variability"), v.get("initial")) == (
            causality, variability, initial)
        osi = osmp.get("osi-version")
        assert v.get("mimeType") == f"application/x-open-simulation-interface; type={kind}; version={osi}"
        note = v.find("Annotations/Annotation[@type='net.pmsf.osmp']/" + OSMP_NS + "osmp-binary-variable")
        assert (note.get("name"), note.get("role"), note.get("mime-type")) == (prefix, "full", v.get("mimeType"))
        starts = v.findall("Start")
        assert [s.get("value") for s in starts] == ([] if initial == "calculated" else [""])
    assert not any(name.startswith("OSMP") and "." in name for name in variables)  # no FMI 2.0 triples
    assert [v.get("name") for v in root.find("ModelVariables") if v.get("causality") == "independent"] == ["time"]
    outputs = [int(u.get("valueReference")) for u in root.find("ModelStructure").findall("Output")]
    by_vr = {int(v.get("valueReference")): v.get("name") for v in root.find("ModelVariables")}
    assert [by_vr[vr] for vr in outputs] == ["OSMPSensorDataOut", "valid", "count"]
    unknowns = [by_vr[int(u.get("valueReference"))] for u in root.find("ModelStructure").findall("InitialUnknown")]
    assert unknowns == ["OSMPSensorViewInConfigRequest"]
    two = {v.get("name"): v for v in model_description(fmus[2]).find("ModelVariables")}
    for name in ("sensor", "assets", "environment", "objects", "materials", "ir_database", "backend", "up_axis",
                 "mounting_position_x", "mounting_orientation_yaw", "disable_self_hits"):  # the same parameters
        assert variables[name].get("causality") == "parameter" and name in two


def test_both_fmus_annotations_validate_against_osmps_schema(fmus):
    """Every osmp: element of either model description is valid against osi-sensor-model-packaging's osmp.xsd."""
    import xmlschema

    schema = xmlschema.XMLSchema(str(SCHEMAS / "osmp" / "osmp.xsd"))
    for version, path in fmus.items():
        found = [e for e in model_description(path).iter() if e.tag.startswith(OSMP_NS)]
        assert len(found) == (1 + 4 * 3 if version == 2 else 1 + 4), version
        for element in found:
            schema.validate(ET.tostring(element))
    broken = ET.Element(f"{OSMP_NS}osmp-binary-variable", name="OSMPSensorViewIn", role="whole")
    assert not schema.is_valid(ET.tostring(broken))  # the schema does check


def test_fmi3_fmu_carries_the_status_shim_in_front_of_pythonfmu3(fmus):
    with zipfile.ZipFile(fmus[3]) as fmu:
        names = set(fmu.namelist())
        shim = fmu.read("binaries/x86_64-linux/LidarSensor.so")
        inner = fmu.read("binaries/x86_64-linux/LidarSensor.pythonfmu3.so")
    assert b"lidar-fmu status shim" in shim and b"finalizePythonInterpreter" in inner
    assert not [n for n in names if n.startswith("binaries/") and not n.startswith("binaries/x86_64-linux/")]
    assert {"resources/LidarSensorFmi3.py", "resources/lidar_sensor_slave.py", "documentation/index.html",
            "documentation/validation.md", "documentation/fmu.md"} <= names


# -- the same SensorData as FMI 2.0 ------------------------------------------------------------------
def test_fmi3_gives_the_fmi2_fmus_sensor_data_on_the_shared_trace(fmus, small_sensor):
    """The shared osi-validation trace (20 SensorViews) through both FMUs in FMPy, one process: every frame's
    SensorData the same, byte for byte (detection for detection, and every header field)."""
    views = list(read_trace(str(SHARED_TRACE), "SensorView"))
    outputs = {}
    for version, path in fmus.items():
        with FmuInstance(path, {"sensor": small_sensor}) as fmu:
            assert fmu.fmi_version == version
            outputs[version] = [fmu.step(view, 0.1 * k, 0.1) for k, view in enumerate(views)]
            assert not errors(fmu)
    assert len(outputs[3]) == 20 and all(out.valid and out.count > 0 for out in outputs[3])
    for two, three in zip(outputs[2], outputs[3]):
        assert three.sensor_data == two.sensor_data and (three.valid, three.count) == (two.valid, two.count)
    data = SensorData.FromString(outputs[3][5].sensor_data)
    assert len(data.feature_data.lidar_sensor[0].detection) == outputs[3][5].count


# -- what FMI 3.0 does not allow: fmi3Error, the reason logged, nothing changed ---------------------------
def do_step(fmu, t, h) -> str:
    return status_of(lambda: fmu.fmu.doStep(t, h))


def exit_initialization(fmu) -> str:
    """ExitInitializationMode's status, Warning included (FMPy's own call drops it)."""
    slave = fmu.fmu
    return status_of(lambda: getattr(slave, f"fmi{fmu.fmi_version}ExitInitializationMode")(slave.component))


@pytest.mark.parametrize("h, words", [(0.0, "communicationStepSize is 0.0"), (-0.1, "communicationStepSize is -0.1"),
                                      (math.nan, "communicationStepSize is nan")])
def test_fmi3_refuses_a_step_that_is_not_forward_in_time(fmus, small_sensor, h, words):
    """FMI 3.0 (fmi3DoStep): communicationStepSize must be > 0. A zero, negative or NaN step returns fmi3Error
    with the reason logged and changes nothing; the next step goes on."""
    with FmuInstance(fmus[3], {"sensor": small_sensor}) as fmu:
        before = fmu.step(VIEW, 0.0, 0.1)
        fmu.messages.clear()
        assert_refused(fmu, do_step(fmu, 0.1, h), "fmi3DoStep refused", words, "FMI 3.0")
        assert len(fmu.messages) == 1 and fmu.outputs() == before
        assert_usable(fmu)
        header = SensorData.FromString(fmu.outputs().sensor_data).feature_data.lidar_sensor[0].header
        assert header.cycle_counter == 2  # the refused step did not count


def test_fmi3_refuses_a_masters_misuse_and_stays_usable(fmus, small_sensor):
    from fmpy.fmi3 import fmi3Float64, fmi3ValueReference

    with FmuInstance(fmus[3], initialize=False) as fmu:
        assert_refused(fmu, do_step(fmu, 0.0, 0.1), "fmi3DoStep", "Instantiated")
        fmu.fmu.enterInitializationMode(startTime=0.0)
        fmu.set("sensor", small_sensor)
        fmu.fmu.exitInitializationMode()
        slave = fmu.fmu
        vr = (fmi3ValueReference * 1)(UNKNOWN_VR)
        assert_refused(fmu, status_of(lambda: slave.fmi3GetFloat64(slave.component, vr, 1, (fmi3Float64 * 1)(), 1)),
                       "fmi3GetFloat64", str(UNKNOWN_VR))
        assert_refused(fmu, status_of(lambda: slave.setString([fmu.vr["sensor"].valueReference], ["velodyne_vlp16"])),
                       "sensor is a fixed parameter", "fmi3ExitInitializationMode")
        assert_refused(fmu, status_of(lambda: slave.setFloat64([fmu.vr["sensor"].valueReference], [1.0])),
                       "sensor", "is String, not Float64")
        assert_refused(fmu, status_of(lambda: slave.setBinary([fmu.vr["OSMPSensorDataOut"].valueReference], [b"x"])),
                       "OSMPSensorDataOut is an output")
        assert_refused(fmu, status_of(lambda: slave.getBinary([fmu.vr["valid"].valueReference])),
                       "fmi3GetBinary", "valid", "is Boolean, not Binary")
        assert_refused(fmu, status_of(lambda: slave.getUInt64([fmu.vr["OSMPSensorDataOut"].valueReference])),
                       "fmi3GetUInt64", "is Binary, not UInt64")
        assert_refused(fmu, status_of(lambda: slave.setFloat64([fmu.vr["time"].valueReference], [1.0])),
                       "time is the independent variable")
        assert slave.getString([fmu.vr["sensor"].valueReference]) == [small_sensor]
        assert not any(status == "FATAL" for status, _ in fmu.messages)
        assert_usable(fmu)
        assert slave.getFloat64([fmu.vr["time"].valueReference]) == [pytest.approx(0.2)]
        assert status_of(lambda: slave.terminate()) == "OK"
        assert fmu.get_binary("OSMPSensorDataOut") == b""  # no pointer into a released buffer
        assert_refused(fmu, do_step(fmu, 0.2, 0.1), "fmi3DoStep", "Terminated")
        assert_refused(fmu, status_of(lambda: slave.terminate()), "fmi3Terminate", "Terminated")


def test_fmi3_errors_reach_the_master_with_logging_off_and_a_model_that_cannot_start_says_why(fmus):
    with FmuInstance(fmus[3], initialize=False, logging_on=False) as fmu:
        fmu.fmu.enterInitializationMode(startTime=0.0)
        fmu.set("sensor", "no_such_preset")
        assert exit_initialization(fmu) == "ERROR"
        assert len(errors(fmu)) == 1 and "lidar-fmu cannot start" in errors(fmu)[0]
        assert "no_such_preset" in errors(fmu)[0] and "\n" not in errors(fmu)[0]
        fmu.messages.clear()
        assert_refused(fmu, do_step(fmu, 0.0, 0.1), "fmi3DoStep refused: the model did not start")
        assert not fmu.outputs().valid


def test_fmi3_logs_warnings_only_while_debug_logging_is_on(fmus, small_sensor):
    garbage = b"\x0agarbage"  # an invalid SensorView: a warning, the step itself fine
    with FmuInstance(fmus[3], {"sensor": small_sensor}, logging_on=False) as fmu:
        assert not fmu.step(garbage, 0.0, 0.1).valid and fmu.messages == []
    with FmuInstance(fmus[3], {"sensor": small_sensor}) as fmu:
        fmu.messages.clear()
        assert not fmu.step(garbage, 0.0, 0.1).valid
        assert [status for status, _ in fmu.messages] == ["WARNING"] and "SensorView rejected" in fmu.messages[0][1]


def test_fmi3_empty_binaries_are_no_data(fmus, small_sensor):
    """OSMP: an empty binary is "no valid data": an invalid SensorData, and the next step works."""
    with FmuInstance(fmus[3], {"sensor": small_sensor}) as fmu:
        out = fmu.step(b"", 0.0, 0.1)
        assert not out.valid and out.count == 0 and out.sensor_data  # empty, marked not available
        assert any("no SensorView input" in text for _, text in fmu.messages)
        assert_usable(fmu)


# -- every FMI 3.0 function in every state: a C master and FMPy --------------------------------------------------
STATES = ("Instantiated", "Initialization Mode", "Step Mode", "Terminated")
FMU_DOC = pathlib.Path(__file__).parent.parent / "docs" / "fmu.md"
#: one line of tests/c_host/fmi3_every_call.c: kind, state, function, status, what the FMU logged during the call
C_MASTER_LINE = re.compile(r"^(call|misuse|null) (.+) (fmi3\w+)(\(\w+\))? (OK|Warning|Discard|Error|Fatal|\?) \| (.*)$")


def documented_statuses() -> dict[str, dict[str, str]]:
    """docs/fmu.md's table "Every FMI 3.0 call, in every state": function → {state: status} (cells "—" left out)."""
    text = FMU_DOC.read_text()
    start = text.index("### Every FMI 3.0 call, in every state")
    rows = [line for line in text[start:text.index("\n## ", start)].splitlines() if line.startswith("| `fmi3")]
    table = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        for name in re.findall(r"`(fmi3\w+)`", cells[0]):
            table[name] = {state: cell for state, cell in zip(STATES, cells[1:5]) if cell != "—"}
    return table


def fmi3_functions() -> set[str]:
    """Every function of FMI 3.0's fmi3Functions.h (pythonfmu3's copy, the one the shim is built against)."""
    import pythonfmu3

    header = pathlib.Path(pythonfmu3.__file__).parent / "pythonfmu-export" / "src" / "fmi" / "fmi3Functions.h"
    return set(re.findall(r"^FMI3_Export (fmi3\w+)TYPE", header.read_text(), re.MULTILINE))


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_a_c_master_survives_every_fmi3_call_in_every_state(fmus, small_sensor, tmp_path):
    """tests/c_host/fmi3_every_call.c calls every FMI 3.0 function in Instantiated, Initialization Mode, Step Mode
    and Terminated, then misuses the FMU (NULL arguments, wrong counts, the Binary channel's value references, a
    NULL instance). Run as a process of its own: an abort or a crash fails here. Each status is docs/fmu.md's, every
    Error comes with a logged line naming the function, and nothing is fatal."""
    import pythonfmu3
    from fmpy import extract, read_model_description

    table = documented_statuses()
    assert set(table) == fmi3_functions() and len(table) == 75
    program = compile_master("fmi3_every_call", tmp_path,
                             pathlib.Path(pythonfmu3.__file__).parent / "pythonfmu-export" / "src" / "fmi")
    md = read_model_description(str(fmus[3]))
    vr = {v.name: v.valueReference for v in md.modelVariables}
    unzipped = pathlib.Path(extract(str(fmus[3]), str(tmp_path / "fmu")))
    names = ["time", "mounting_position_x", "count", "valid", "disable_self_hits", "sensor", "OSMPSensorViewIn",
             "OSMPSensorDataOut"]
    args = [str(program), str(unzipped / "binaries" / "x86_64-linux" / "LidarSensor.so"),
            (unzipped / "resources").as_uri(), md.instantiationToken, small_sensor] + [str(vr[n]) for n in names]
    run = subprocess.run(args, env=master_env(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    said = run.stdout.splitlines()
    assert said[0] == "version 3.0" and said[-1] == "done", said[-3:]
    lines = [C_MASTER_LINE.match(line) for line in said[1:-1]]
    assert all(lines), [line for line, m in zip(said[1:-1], lines) if not m]
    by_kind = {kind: [m.group(2, 3, 5, 6) for m in lines if m.group(1) == kind] for kind in ("call", "misuse", "null")}
    seen = set()
    for state, function, status, message in by_kind["call"]:
        expected = "OK" if state == "after Reset" else table[function][state]  # a step after Reset's new start
        assert status == expected, (state, function, status, message)
        assert status != "Error" or (message.startswith("Error: ") and function in message), (state, function)
        seen.add((function, state))
    assert seen >= {(function, state) for function, cells in table.items() for state in cells}
    misuse = by_kind["misuse"]
    assert [status for *_, status, _ in misuse] == ["Error"] * (len(misuse) - 1) + ["OK"], misuse  # last: NULL outs
    assert all(function in message for _, function, status, message in misuse if status == "Error"), misuse
    channel = vr["OSMPSensorViewIn"] | 1 << 31
    assert any(f"fmi3SetUInt64 refused: no variable has value reference {channel}" in m for *_, m in misuse)
    assert any("fmi3SetBinary refused: nValues = 1 for nValueReferences = 2" in m for *_, m in misuse)
    assert len(by_kind["null"]) == 70 and {status for _, _, status, _ in by_kind["null"]} == {"Error"}
    assert " Fatal | " not in run.stdout


def test_fmpy_drives_the_fmi3_fmu_through_the_same_misuse(fmus, small_sensor):
    """FMPy's FMU3Slave makes the calls pythonfmu3 alone answered with an abort (std::logic_error: not implemented),
    a segfault (fmi3SetUInt64 on the Binary channel), fmi3Fatal or a lying OK: each is fmi3Error with the reason
    logged, and the instance steps on."""
    from fmpy.fmi3 import fmi3Float64, fmi3ValueReference

    with FmuInstance(fmus[3], initialize=False) as fmu:
        slave = fmu.fmu
        assert_refused(fmu, exit_initialization(fmu), "fmi3ExitInitializationMode", "state Instantiated")
        assert_refused(fmu, do_step(fmu, 0.0, 0.1), "fmi3DoStep", "state Instantiated")
        assert_refused(fmu, status_of(slave.terminate), "fmi3Terminate", "state Instantiated")
        fmu.initialize({"sensor": small_sensor})
        time_vr = fmu.vr["time"].valueReference
        channel = fmu.vr["OSMPSensorViewIn"].valueReference | 1 << 31
        calls = {
            "fmi3GetFloat32": lambda: slave.getFloat32([time_vr]), "fmi3SetFloat32": lambda: slave.setFloat32(
                [time_vr], [1.0]), "fmi3GetInt8": lambda: slave.getInt8([time_vr]),
            "fmi3SetInt8": lambda: slave.setInt8([time_vr], [1]), "fmi3GetUInt8": lambda: slave.getUInt8([time_vr]),
            "fmi3GetInt16": lambda: slave.getInt16([time_vr]), "fmi3GetUInt16": lambda: slave.getUInt16([time_vr]),
            "fmi3GetUInt32": lambda: slave.getUInt32([time_vr]),
            "fmi3SetUInt32": lambda: slave.setUInt32([time_vr], [1]),
            "fmi3GetClock": lambda: slave.getClock([time_vr]), "fmi3SetClock": lambda: slave.setClock([time_vr], [1]),
            "fmi3SetIntervalDecimal": lambda: slave.fmi3SetIntervalDecimal(  # (FMPy's own passes lists to C)
                slave.component, (fmi3ValueReference * 1)(time_vr), 1, (fmi3Float64 * 1)(0.1)),
            "fmi3GetAdjointDerivative": lambda: slave.getAdjointDerivative([time_vr], [time_vr], [1.0]),
            "fmi3GetDirectionalDerivative": lambda: slave.getDirectionalDerivative([time_vr], [time_vr], [1.0]),
            "fmi3GetNumberOfVariableDependencies": lambda: slave.fmi3GetNumberOfVariableDependencies(
                slave.component, time_vr, ctypes.byref(ctypes.c_size_t())),  # (FMPy's own passes a type to C)
            "fmi3GetOutputDerivatives": lambda: slave.getOutputDerivatives([time_vr], [1]),
            "fmi3GetFMUState": slave.getFMUState, "fmi3SetFMUState": lambda: slave.setFMUState(None),
            "fmi3SerializedFMUStateSize": lambda: slave.serializeFMUState(None),
            "fmi3EnterEventMode": slave.enterEventMode, "fmi3EnterStepMode": slave.enterStepMode,
            "fmi3UpdateDiscreteStates": slave.updateDiscreteStates,
            "fmi3EvaluateDiscreteStates": lambda: slave.fmi3EvaluateDiscreteStates(slave.component),
            "fmi3GetEventIndicators": lambda: slave.fmi3GetEventIndicators(slave.component, (fmi3Float64 * 1)(), 1),
            "fmi3ActivateModelPartition": lambda: slave.fmi3ActivateModelPartition(slave.component, time_vr, 0.0),
            "fmi3EnterConfigurationMode": slave.enterConfigurationMode,
            "fmi3SetUInt64": lambda: slave.setUInt64([channel], [1]),
            "fmi3GetUInt64": lambda: slave.getUInt64([channel]),
            "fmi3EnterInitializationMode": lambda: slave.enterInitializationMode(startTime=0.0),
            "fmi3ExitInitializationMode": lambda: slave.fmi3ExitInitializationMode(slave.component),
        }
        for function, call in calls.items():
            fmu.messages.clear()
            assert_refused(fmu, status_of(call), function, "refused")
        assert not any(status == "FATAL" for status, _ in fmu.messages)
        assert_usable(fmu)
        assert status_of(slave.terminate) == "OK"
        assert_refused(fmu, status_of(slave.terminate), "fmi3Terminate", "state Terminated")
        assert_refused(fmu, status_of(lambda: slave.setBinary([channel ^ 1 << 31], [b"x"])), "fmi3SetBinary",
                       "state Terminated")
        assert status_of(slave.reset) == "OK"  # a fresh slave: usable again
        fmu.initialize({"sensor": small_sensor})
        assert_usable(fmu)


# -- the configuration handshake, FMI 2.0 and FMI 3.0 ----------------------------------------------------
def handshake(fmus, version, small_sensor, configure, views=((0.1, 0.1),)):
    """(outputs of ``views`` ((end time, step) each), messages, ExitInitializationMode's status, the request read
    after the configuration was set) through the FMU of ``version`` whose master answers with ``configure``."""
    with FmuInstance(fmus[version], initialize=False) as fmu:
        if version == 3:
            fmu.fmu.enterInitializationMode(startTime=0.0)
        else:
            fmu.fmu.setupExperiment(startTime=0.0)
            fmu.fmu.enterInitializationMode()
        fmu.set("sensor", small_sensor)
        config = configure(fmu.config_request())
        fmu.set_binary("OSMPSensorViewInConfig", config)
        echoed = fmu.config_request()
        status = exit_initialization(fmu)
        outputs = []
        for end, step in views:
            if status != "ERROR":
                outputs.append(fmu.step(sensor_view(VIEW_OBJECTS, time_s=end), end - step, step))
        return outputs, list(fmu.messages), status, echoed



@pytest.fixture(scope="module")
def unconfigured(fmus, small_sensor):
    """What each FMU gives without a configuration: its output of one frame."""
    outputs = {}
    for version in (2, 3):
        with FmuInstance(fmus[version], {"sensor": small_sensor}) as fmu:
            outputs[version] = fmu.step(sensor_view(VIEW_OBJECTS, time_s=0.1), 0.0, 0.1)
    return outputs


VERSIONS = [2, pytest.param(3, id="fmi3")]


@pytest.mark.parametrize("version", VERSIONS)
def test_an_echoed_configuration_changes_nothing(fmus, small_sensor, unconfigured, version):
    """A master that sets the request as the configuration (FmuInstance's own handshake here) gets what a master
    that sets none gets."""
    with FmuInstance(fmus[version], {"sensor": small_sensor}, configure=answer()) as fmu:
        out = fmu.step(sensor_view(VIEW_OBJECTS, time_s=0.1), 0.0, 0.1)
        assert not [m for s, m in fmu.messages if s != "OK"]
    assert out == unconfigured[version]
    outputs, _, status, echoed = handshake(fmus, version, small_sensor, answer())  # the master's own calls
    assert status == "OK" and outputs[0] == out


@pytest.mark.parametrize("version", VERSIONS)
def test_a_narrower_horizontal_field_of_view_through_the_fmu(fmus, small_sensor, unconfigured, version):
    """OSMP: once the master set the configuration, the request reads as the configuration."""
    fov = NARROWINGS["field_of_view_horizontal"]
    outputs, messages, status, echoed = handshake(fmus, version, small_sensor, answer(field_of_view_horizontal=fov))
    assert status == "OK" and SensorViewConfiguration.FromString(echoed).field_of_view_horizontal == fov
    got, whole = detections(outputs[0].sensor_data), detections(unconfigured[version].sensor_data)
    assert len(got["azimuth_rad"]) > 0 and np.all(np.abs(got["azimuth_rad"]) <= fov / 2 + 1e-6)
    assert len(got["azimuth_rad"]) == np.count_nonzero(np.abs(whole["azimuth_rad"]) <= fov / 2 + 1e-6)
    assert any("OSMPSensorViewInConfig followed: lidar 0 16×91 of 16×360 rays" in m for _, m in messages)


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
def test_a_master_narrows_each_field_in_turn(fmus, small_sensor, unconfigured, version):
    """The master script: each of NARROWINGS alone, through the FMU; the output says the model followed it."""
    whole = detections(unconfigured[version].sensor_data)
    for name, value in NARROWINGS.items():
        views = ((0.05, 0.05), (0.1, 0.05)) if name == "update_cycle_time" else ((0.1, 0.1),)
        outputs, messages, status, echoed = handshake(fmus, version, small_sensor, answer(**{name: value}), views)
        assert status == "OK" and outputs[-1].valid, (name, messages)
        got = detections(outputs[-1].sensor_data)
        assert len(got["distance_m"]) > 0, name
        if name == "field_of_view_horizontal":
            assert np.all(np.abs(got["azimuth_rad"]) <= value / 2 + 1e-6)
        elif name == "lidar.field_of_view_vertical":
            assert np.all(np.abs(got["elevation_rad"]) <= value / 2 + 1e-6)
            assert np.any(np.abs(whole["elevation_rad"]) > value / 2 + 0.01)
        elif name == "lidar.number_of_rays_horizontal":  # 90 of 360 columns: every 4th azimuth
            columns = np.unique(np.round(np.degrees(got["azimuth_rad"])).astype(int) % 360)
            assert len(columns) <= value and np.all(columns % 4 == columns[0] % 4)
            assert len(np.unique(np.round(np.degrees(whole["azimuth_rad"])).astype(int) % 360)) > value
        elif name == "lidar.number_of_rays_vertical":
            assert len(np.unique(got["beam_id"])) <= value < len(np.unique(whole["beam_id"]))
        elif name == "update_cycle_time":  # 20 Hz: the second 0.05 s step publishes a whole frame
            assert np.ptp(got["azimuth_rad"]) > np.radians(300)
            assert outputs[-1].count > 0.8 * unconfigured[version].count
        elif name == "range":
            assert np.all(got["distance_m"] <= value + 1e-3) and np.any(whole["distance_m"] > value + 1)
        elif name == "mounting_position":
            mounting = SensorData.FromString(outputs[-1].sensor_data).mounting_position.position
            assert (mounting.x, mounting.z) == pytest.approx((0.5, 2.5))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_field_the_model_cannot_follow_is_a_warning_naming_it(fmus, small_sensor, unconfigured, version):
    outputs, messages, status, _ = handshake(fmus, version, small_sensor,
                                             answer(**{"lidar.number_of_rays_horizontal": 720}))
    warnings = [m for s, m in messages if s == "WARNING"]
    assert status == "WARNING" and len(warnings) == 1, messages
    assert "OSMPSensorViewInConfig lidar 0 number_of_rays_horizontal 720: more than the unit's 360" in warnings[0]
    assert outputs[0].sensor_data == unconfigured[version].sensor_data  # it kept what it had


@pytest.mark.parametrize("version", VERSIONS)
def test_a_configuration_that_is_no_sensor_view_configuration_stops_the_model_with_the_reason(
        fmus, small_sensor, version):
    _, messages, status, _ = handshake(fmus, version, small_sensor, lambda request: b"\x0a\xff\xff\xff\xff\x0f")
    assert status == "ERROR"
    said = [m for s, m in messages if s == "ERROR"]
    assert len(said) == 1 and "lidar-fmu cannot start: OSMPSensorViewInConfig" in said[0], messages


def test_fmi2_config_is_read_while_its_pointer_is_valid(fmus, small_sensor):
    """OSMP (FMI 2.0): the configuration's pointer is valid until fmi2ExitInitializationMode returns; the model
    copies it there, so the master may free it afterwards."""
    fov = NARROWINGS["field_of_view_horizontal"]
    with FmuInstance(fmus[2], initialize=False) as fmu:
        fmu.fmu.setupExperiment(startTime=0.0)
        fmu.fmu.enterInitializationMode()
        fmu.set("sensor", small_sensor)
        config = answer(field_of_view_horizontal=fov)(fmu.config_request())
        buffer = ctypes.create_string_buffer(config, len(config))
        fmu.set_binary("OSMPSensorViewInConfig", config, address=ctypes.addressof(buffer))
        fmu.fmu.exitInitializationMode()
        ctypes.memset(buffer, 0, len(config))  # the master reuses its buffer
        with contextlib.suppress(Exception):
            del buffer
        assert SensorViewConfiguration.FromString(fmu.config_request()).field_of_view_horizontal == fov
        got = detections(fmu.step(VIEW, 0.0, 0.1).sensor_data)
        assert np.all(np.abs(got["azimuth_rad"]) <= fov / 2 + 1e-6)


@pytest.mark.slow
def test_lidar_fmu_build_fmi_3(tmp_path, capsys):
    """The command: builds, validates, and initializes the FMI 3.0 FMU once in a Python of its own, as a master
    does (FMPy's FMU3Slave; the process exits cleanly: pythonfmu3's exit-time destructor is handled)."""
    from lidar_fmu.tools.cli import main

    path = tmp_path / "LidarSensor-fmi3.fmu"
    assert main(["build", "--fmi", "3", "-o", str(path)]) in (0, None)
    said = capsys.readouterr().out
    assert f"built {path} (FMPy validation: no problems)" in said and "FMU: " in said and "kernels" in said
    assert model_description(path).get("fmiVersion") == "3.0"


def test_fmi3_fmu_without_a_c_compiler_is_refused_not_built_half(tmp_path, monkeypatch):
    """Without the shim pythonfmu3's binary has no Binary variables: no FMI 3.0 FMU rather than one that cannot
    pass a SensorView; one line says why. (The FMI 2.0 build keeps pythonfmu's binary and warns.)"""
    import shutil

    from lidar_fmu.errors import UserError

    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.warns(UserWarning, match="no C compiler"), pytest.raises(UserError, match="needs its status shim"):
        build_fmu(tmp_path / "LidarSensor-fmi3.fmu", fmi_version=3)
    assert not (tmp_path / "LidarSensor-fmi3.fmu").exists()


def test_fmi_3_does_not_go_with_ssp(tmp_path, capsys):
    from lidar_fmu.tools.cli import main

    assert main(["build", "--fmi", "3", "--ssp", "--trace", str(SHARED_TRACE), "-o", str(tmp_path / "x.ssp")]) == 2
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "--fmi 3 does not go with --ssp" in said[0]
    assert not list(tmp_path.iterdir())
