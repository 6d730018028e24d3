"""A master's misuse of the FMU (FMI 2.0 calling sequence, value references, types) and poses beyond any world.

pythonfmu 0.7.0 turns a Python exception in any callback into fmi2Fatal, and
gives a slave no way to return fmi2Error or fmi2Warning. So the slave refuses
misuse itself: the call changes nothing and logs an error-level message naming
the reason, and the FMU's status shim (fmu/status_shim.c, in front of
pythonfmu's binary) returns fmi2Error for it; the instance stays usable.
Before, five of the seven cases below returned fmi2Fatal, and the other two
were silently accepted (a fixed parameter "set" after initialization while the
model kept the old one; a doStep before initialization); after the first fix
and before the shim they returned fmi2OK.
"""
import contextlib
import json
import math

import pytest
from fmpy.fmi1 import FMICallException
from fmpy.fmi2 import fmi2Boolean, fmi2Integer, fmi2Real, fmi2String, fmi2True, fmi2ValueReference
from osi3.osi_featuredata_pb2 import SensorDetectionHeader
from osi3.osi_sensordata_pb2 import SensorData
from osi3.osi_sensorviewconfiguration_pb2 import SensorViewConfiguration

from helpers.osi_views import HOST_ID, sensor_view
from lidar_fmu.cosim.fmu_host import FmuInstance
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.geometry.transforms import PoseError, pose_matrix
from lidar_fmu.osi.decode import MAX_POSITION_M
from lidar_fmu.osi.detections import sensor_data_to_points

STATUS = ["OK", "WARNING", "DISCARD", "ERROR", "FATAL", "PENDING"]
TYPES = {"Real": fmi2Real, "Integer": fmi2Integer, "Boolean": fmi2Boolean, "String": fmi2String}
SMALL_SENSOR = {"vertical_fov_deg": [-15, 15], "channels": 16, "horizontal_samples": 360,
                "horizontal_fov_deg": [180, -180], "max_range_m": 100}
CAR = (4.0, 1.8, 1.5)
VIEW = sensor_view([(10, (12, 0, 0.75), (0, 0, 0), CAR, ""), (11, (-9, 4, 0.75), (0, 0, 0.3), CAR, "")])
UNKNOWN_VR = 99_999


@pytest.fixture(scope="module")
def small_sensor(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "small.json"
    path.write_text(json.dumps(SMALL_SENSOR))
    return str(path)


@pytest.fixture(scope="module")
def glacial_sensor(tmp_path_factory):
    """frame_rate_hz = 1e-300: a frame period no OSI Duration holds."""
    path = tmp_path_factory.mktemp("spec") / "glacial.json"
    path.write_text(json.dumps({**SMALL_SENSOR, "frame_rate_hz": 1e-300}))
    return str(path)


# -- raw FMI calls: the exact status, Warning included (FMPy raises only above Warning) --------------
def call(fmu: FmuInstance, function: str, *args) -> str:
    slave = fmu.fmu
    try:
        return STATUS[getattr(slave, function)(slave.component, *args)]
    except FMICallException as exc:
        return STATUS[exc.status]


def vrs_of(fmu, names):
    refs = [name if isinstance(name, int) else fmu.vr[name].valueReference for name in names]
    return (fmi2ValueReference * len(refs))(*refs), len(refs)


def set_status(fmu, kind: str, names, values) -> str:
    vr, n = vrs_of(fmu, names)
    if kind == "String":
        values = [v.encode() for v in values]
    return call(fmu, f"fmi2Set{kind}", vr, n, (TYPES[kind] * n)(*values))


def get_status(fmu, kind: str, names):
    vr, n = vrs_of(fmu, names)
    out = (TYPES[kind] * n)()
    status = call(fmu, f"fmi2Get{kind}", vr, n, out)
    return status, [v.decode() if isinstance(v, bytes) else v for v in out]


def do_step(fmu, t=0.0, h=0.1) -> str:
    with contextlib.suppress(FMICallException):  # refused too where the step is (after fmi2Terminate)
        fmu.set_binary("OSMPSensorViewIn", VIEW)
    return call(fmu, "fmi2DoStep", t, h, fmi2True)


def errors(fmu) -> list[str]:
    return [text for status, text in fmu.messages if status == "ERROR"]


def assert_refused(fmu, status: str, *words):
    """The call returned fmi2Error (never Fatal, never OK) and logged one error naming the reason."""
    assert status == "ERROR"
    assert errors(fmu), fmu.messages
    assert all(word in errors(fmu)[-1] for word in words), errors(fmu)[-1]


def assert_usable(fmu):
    fmu.messages.clear()
    out = fmu.step(VIEW, 0.1, 0.1)
    assert out.valid and out.count > 0, fmu.messages
    assert not errors(fmu)


def config_request(fmu) -> SensorViewConfiguration:
    return SensorViewConfiguration.FromString(fmu.config_request())


# -- seven ways a master misuses the FMU ----------------------------------------------------------------
def test_1_config_request_with_an_extreme_frame_rate_is_refused_not_fatal(fmu_path, glacial_sensor, small_sensor):
    with FmuInstance(fmu_path, initialize=False) as fmu:
        fmu.fmu.setupExperiment(startTime=0.0)
        fmu.fmu.enterInitializationMode()
        fmu.set("sensor", glacial_sensor)
        status, (lo, hi, size) = get_status(fmu, "Integer", [f"OSMPSensorViewInConfigRequest.{r}"
                                                             for r in ("base.lo", "base.hi", "size")])
        assert_refused(fmu, status, "OSMPSensorViewInConfigRequest", "glacial.json")
        assert size == 0  # no request rather than a wrong one
        fmu.set("sensor", small_sensor)  # still in Initialization Mode: the instance is usable
        assert config_request(fmu).lidar_sensor_view_configuration[0].number_of_rays_vertical == 16
        fmu.fmu.exitInitializationMode()
        assert_usable(fmu)


def test_2_get_of_an_unknown_value_reference(fmu_path, small_sensor):
    with FmuInstance(fmu_path, {"sensor": small_sensor}) as fmu:
        # read with the status variable (value reference 0) itself: the refusal still reaches the master
        status, values = get_status(fmu, "Integer", [UNKNOWN_VR, 0])
        assert status == "ERROR" and values == [0, 3]
        status, values = get_status(fmu, "Integer", ["count", UNKNOWN_VR])
        assert_refused(fmu, status, "fmi2GetInteger", str(UNKNOWN_VR))
        assert values == [0, 0]
        for kind in ("Real", "Boolean", "String"):
            assert get_status(fmu, kind, [UNKNOWN_VR])[0] == "ERROR"
        assert len(errors(fmu)) == 5
        assert_usable(fmu)


def test_3_set_of_an_unknown_value_reference(fmu_path, small_sensor):
    with FmuInstance(fmu_path, {"sensor": small_sensor}) as fmu:
        assert_refused(fmu, set_status(fmu, "Real", [UNKNOWN_VR], [1.0]), "fmi2SetReal", str(UNKNOWN_VR))
        assert_refused(fmu, set_status(fmu, "String", [UNKNOWN_VR], ["x"]), "fmi2SetString")
        assert_usable(fmu)


def test_4_set_of_an_output_or_a_calculated_parameter(fmu_path, small_sensor):
    with FmuInstance(fmu_path, {"sensor": small_sensor}) as fmu:
        fmu.step(VIEW, 0.0, 0.1)
        before = fmu.outputs()
        assert_refused(fmu, set_status(fmu, "Integer", ["OSMPSensorDataOut.size"], [5]), "an output")
        assert_refused(fmu, set_status(fmu, "Boolean", ["valid"], [False]), "valid", "an output")
        assert_refused(fmu, set_status(fmu, "Integer", ["OSMPSensorViewInConfigRequest.size"], [1]),
                       "calculated parameter")
        after = fmu.outputs()
        assert after.valid and after.count == before.count and after.sensor_data == before.sensor_data
        assert_usable(fmu)


def test_5_set_with_the_wrong_type(fmu_path, small_sensor):
    with FmuInstance(fmu_path, initialize=False) as fmu:
        fmu.fmu.setupExperiment(startTime=0.0)
        fmu.fmu.enterInitializationMode()
        assert_refused(fmu, set_status(fmu, "Real", ["sensor"], [1.0]), "sensor", "is String, not Real")
        assert_refused(fmu, set_status(fmu, "Integer", ["mounting_position_z"], [2]), "is Real, not Integer")
        assert get_status(fmu, "Real", ["mounting_position_z"]) == ("OK", [0.0])
        fmu.set("sensor", small_sensor)
        fmu.fmu.exitInitializationMode()
        assert_usable(fmu)


def test_6_fixed_parameter_after_initialization_is_refused_and_reads_back_the_value_in_use(fmu_path):
    with FmuInstance(fmu_path, {"sensor": "velodyne_vlp16", "mounting_position_z": 1.5}) as fmu:
        assert_refused(fmu, set_status(fmu, "String", ["sensor"], ["ouster_os1_128"]),
                       "sensor is a fixed parameter", "velodyne_vlp16")
        assert_refused(fmu, set_status(fmu, "Real", ["mounting_position_z"], [3.0]), "mounting_position_z")
        assert get_status(fmu, "String", ["sensor"]) == ("OK", ["velodyne_vlp16"])
        assert get_status(fmu, "Real", ["mounting_position_z"]) == ("OK", [1.5])
        out = fmu.step(VIEW, 0.0, 0.1)
        assert out.valid and max(sensor_data_to_points(out.sensor_data).points["beam_id"]) < 16  # still a VLP-16
        data = SensorData.FromString(out.sensor_data)
        assert data.mounting_position.position.z == pytest.approx(1.5)


def test_7_do_step_before_initialization_is_refused(fmu_path, small_sensor):
    with FmuInstance(fmu_path, initialize=False) as fmu:
        assert_refused(fmu, do_step(fmu), "fmi2DoStep", "Instantiated")
        out = fmu.outputs()
        assert not out.valid and out.count == 0 and out.sensor_data == b""
        fmu.fmu.setupExperiment(startTime=0.0)
        fmu.fmu.enterInitializationMode()
        assert_refused(fmu, do_step(fmu), "fmi2DoStep", "Initialization Mode")
        fmu.set("sensor", small_sensor)  # the refused steps initialized nothing: parameters still settable
        fmu.fmu.exitInitializationMode()
        assert_usable(fmu)


# -- more of the calling sequence -------------------------------------------------------------------
def test_config_request_follows_the_parameters_until_initialization_ends(fmu_path):
    """Reading the request before ``sensor`` is set must not lock in the default sensor."""
    with FmuInstance(fmu_path, initialize=False) as early:
        early.fmu.setupExperiment(startTime=0.0)
        early.fmu.enterInitializationMode()
        assert config_request(early).lidar_sensor_view_configuration[0].number_of_rays_vertical == 128  # default
        early.set("sensor", "velodyne_vlp16")
        early.set("mounting_position_z", 1.8)
        lidar = config_request(early).lidar_sensor_view_configuration[0]
        assert lidar.number_of_rays_vertical == 16 and lidar.mounting_position.position.z == pytest.approx(1.8)
        early.fmu.exitInitializationMode()
        assert config_request(early).lidar_sensor_view_configuration[0].number_of_rays_vertical == 16
        got = early.step(VIEW, 0.0, 0.1)
    with FmuInstance(fmu_path, {"sensor": "velodyne_vlp16", "mounting_position_z": 1.8}) as direct:
        want = direct.step(VIEW, 0.0, 0.1)
    assert got.valid and got.count == want.count and got.sensor_data == want.sensor_data


def test_fmu_state_calls_and_null_arrays_are_refused_not_fatal_nor_a_crash(fmu_path, small_sensor):
    """canGetAndSetFMUstate and canSerializeFMUstate are false: pythonfmu alone answered fmi2OK to fmi2GetFMUstate
    and fmi2Fatal to fmi2SetFMUstate(NULL), and a get with a NULL array crashed the master (SIGSEGV)."""
    import ctypes

    from fmpy.fmi2 import fmi2FMUstate

    with FmuInstance(fmu_path, {"sensor": small_sensor}) as fmu:
        size, values = ctypes.c_size_t(), (fmi2Real * 1)()
        for function, args in [("fmi2GetFMUstate", (ctypes.byref(fmi2FMUstate()),)), ("fmi2SetFMUstate", (None,)),
                               ("fmi2FreeFMUstate", (ctypes.byref(fmi2FMUstate()),)),
                               ("fmi2SerializedFMUstateSize", (None, ctypes.byref(size))),
                               ("fmi2GetReal", (None, 1, values)),
                               ("fmi2SetReal", (vrs_of(fmu, ["mounting_position_x"])[0], 1, None))]:
            fmu.messages.clear()
            assert_refused(fmu, call(fmu, function, *args), f"{function} refused")
        assert_usable(fmu)


def test_calls_in_the_wrong_state_are_refused_and_never_fatal(fmu_path, small_sensor):
    with FmuInstance(fmu_path, {"sensor": small_sensor}) as fmu:
        assert_refused(fmu, call(fmu, "fmi2EnterInitializationMode"), "fmi2EnterInitializationMode", "Step Mode")
        assert_refused(fmu, call(fmu, "fmi2ExitInitializationMode"), "fmi2ExitInitializationMode", "Step Mode")
        assert_refused(fmu, call(fmu, "fmi2SetupExperiment", 0, 0.0, 0.0, 0, 0.0), "fmi2SetupExperiment")
        assert_usable(fmu)
        assert call(fmu, "fmi2Terminate") == "OK"
        assert fmu.get_binary("OSMPSensorDataOut") == b""  # no pointer into a released buffer
        assert_refused(fmu, do_step(fmu), "fmi2DoStep", "Terminated")
        assert_refused(fmu, set_status(fmu, "Integer", ["OSMPSensorViewIn.size"], [0]), "terminated")
        assert_refused(fmu, call(fmu, "fmi2Terminate"), "fmi2Terminate", "Terminated")  # a second time
        assert not any(status == "FATAL" for status, _ in fmu.messages)
        assert call(fmu, "fmi2Reset") == "OK"  # pythonfmu starts a fresh slave: usable again
        fmu.messages.clear()
        fmu.initialize({"sensor": small_sensor})
        assert_usable(fmu)


# -- fmi2DoStep arguments FMI 2.0 does not allow -------------------------------------------------------
NOT_ALLOWED = [  # (currentCommunicationPoint, communicationStepSize, words the reason names)
    (0.1, 0.0, ("communicationStepSize is 0.0", "> 0")),
    (0.1, -0.1, ("communicationStepSize is -0.1",)),
    (0.1, math.nan, ("communicationStepSize is nan",)),
    (0.1, math.inf, ("communicationStepSize is inf",)),
    (0.1, -math.inf, ("communicationStepSize is -inf",)),
    (math.nan, 0.1, ("currentCommunicationPoint is nan",)),
    (math.inf, 0.1, ("currentCommunicationPoint is inf",)),
    (1e308, 1e308, ("ends past the largest time",)),
]


def test_do_step_with_a_step_size_or_time_fmi_does_not_allow_is_refused(fmu_path, small_sensor):
    """FMI 2.0, section 4.2.2 (fmi2DoStep): communicationStepSize "must be > 0.0", and the step computes up to
    currentCommunicationPoint + communicationStepSize, a time. A step of 0, −0.1, NaN or ±∞, a NaN or infinite
    communication point, or a step ending past the largest double returns fmi2Error with the reason logged, and
    changes nothing: the outputs stay, the model does not step (its cycle counter goes on from the last real step)."""
    with FmuInstance(fmu_path, {"sensor": small_sensor}) as fmu:
        before = fmu.step(VIEW, 0.0, 0.1)
        assert before.valid and before.count > 0
        for t, h, words in NOT_ALLOWED:
            fmu.messages.clear()
            assert_refused(fmu, do_step(fmu, t, h), "fmi2DoStep refused", *words)
            assert len(fmu.messages) == 1, fmu.messages
            assert fmu.outputs() == before, (t, h)
        assert_usable(fmu)
        header = SensorData.FromString(fmu.outputs().sensor_data).feature_data.lidar_sensor[0].header
        assert header.cycle_counter == 2


# -- what reaches the master's logger -----------------------------------------------------------------
def set_debug_logging(fmu, on: bool, *categories: str) -> str:
    names = (fmi2String * len(categories))(*[c.encode() for c in categories])
    return call(fmu, "fmi2SetDebugLogging", 1 if on else 0, len(categories), names)


def test_errors_reach_the_master_with_debug_logging_off(fmu_path, small_sensor):
    """pythonfmu 0.7.0 logs nothing while debug logging is off; the status shim passes every fmi2Error's reason on
    regardless, and the other messages as the master's debug logging asks (fmi2Instantiate's loggingOn,
    fmi2SetDebugLogging with or without categories)."""
    garbage = b"\x0agarbage"  # an invalid SensorView: a warning, the step itself fine
    with FmuInstance(fmu_path, {"sensor": small_sensor}, logging_on=False) as fmu:
        assert not fmu.step(garbage, 0.0, 0.1).valid and fmu.messages == []
        assert_refused(fmu, do_step(fmu, 0.1, 0.0), "fmi2DoStep refused", "communicationStepSize is 0.0")
        fmu.messages.clear()
        assert set_debug_logging(fmu, True, "logStatusWarning") == "OK"
        assert not fmu.step(garbage, 0.1, 0.1).valid
        assert [status for status, _ in fmu.messages] == ["WARNING"], fmu.messages
        fmu.messages.clear()
        assert set_debug_logging(fmu, True, "logStatusError") == "OK"  # the warning is not asked for now
        assert not fmu.step(garbage, 0.2, 0.1).valid and fmu.messages == []
        assert_refused(fmu, set_debug_logging(fmu, True, "logEverything"), "fmi2SetDebugLogging refused",
                       "logStatusWarning")
        assert_refused(fmu, set_status(fmu, "Integer", [UNKNOWN_VR], [1]), "fmi2SetInteger", str(UNKNOWN_VR))
        assert set_debug_logging(fmu, True) == "OK"  # no categories: all
        fmu.messages.clear()
        assert not fmu.step(garbage, 0.3, 0.1).valid and [s for s, _ in fmu.messages] == ["WARNING"]
        assert set_debug_logging(fmu, False) == "OK"
        fmu.messages.clear()
        assert not fmu.step(garbage, 0.4, 0.1).valid and fmu.messages == []
        assert_usable(fmu)


# -- poses beyond any world are invalid input, like NaN ---------------------------------------------
FAR = 2 * MAX_POSITION_M
NOT_AVAILABLE = SensorDetectionHeader.DATA_QUALIFIER_NOT_AVAILABLE


def assert_invalid_then_recovers(fmu, view, *words):
    fmu.messages.clear()
    out = fmu.step(view, 0.0, 0.1)
    assert not out.valid and out.count == 0
    header = SensorData.FromString(out.sensor_data).feature_data.lidar_sensor[0].header
    assert header.data_qualifier == NOT_AVAILABLE
    assert any(status == "WARNING" and all(w in text for w in words) for status, text in fmu.messages), fmu.messages
    assert fmu.step(VIEW, 0.1, 0.1).valid


@pytest.mark.parametrize("where", ["host", "mounting", "sensor"])
def test_far_poses_in_the_sensor_view_are_invalid(fmu_path, small_sensor, where):
    car = (10, (FAR + 12 if where == "host" else 12, 0, 0.75), (0, 0, 0), CAR, "")
    if where == "host":
        view = sensor_view([car], host=(HOST_ID, (FAR, 0.0, 0.75), 0.0))
        words = ()  # the host is an object too: which check names it first is not this test's business
    elif where == "mounting":
        view = sensor_view([car], mounting=((0.0, -FAR, 1.5), (0.0, 0.0, 0.0)))
        words = ("mounting_position", "beyond")
    else:  # each within the limit, their sum beyond it
        view = sensor_view([car], host=(HOST_ID, (0.6 * MAX_POSITION_M, 0.0, 0.75), 0.0),
                           mounting=((0.6 * MAX_POSITION_M, 0.0, 1.5), (0.0, 0.0, 0.0)))
        words = ("sensor position", "beyond")
    with FmuInstance(fmu_path, {"sensor": small_sensor}) as fmu:
        assert_invalid_then_recovers(fmu, view, *words)


def test_far_mounting_parameter_is_refused(fmu_path, small_sensor):
    with pytest.raises(PoseError, match="beyond"):
        OsiSensorModel(sensor=SMALL_SENSOR, default_mounting_pose=pose_matrix((0, 0, FAR)))
    with FmuInstance(fmu_path, initialize=False) as fmu:
        fmu.fmu.setupExperiment(startTime=0.0)
        fmu.fmu.enterInitializationMode()
        fmu.set("sensor", small_sensor)
        fmu.set("mounting_position_x", FAR)
        status, (size,) = get_status(fmu, "Integer", ["OSMPSensorViewInConfigRequest.size"])
        assert status == "ERROR" and size == 0
        assert any("mounting_position" in text and "beyond" in text for text in errors(fmu))
        assert call(fmu, "fmi2ExitInitializationMode") == "ERROR"  # the model cannot start: said, not fatal
        assert any("cannot start" in text for text in errors(fmu))
        assert_refused(fmu, do_step(fmu), "fmi2DoStep", "did not start", "mounting")
        out = fmu.outputs()
        assert not out.valid and out.count == 0


def test_model_rejects_far_host_like_nan():
    model = OsiSensorModel(sensor=SMALL_SENSOR, warn=lambda message: None)
    for x in (FAR, math.nan):
        result = model.step(sensor_view([], host=(HOST_ID, (x, 0.0, 0.75), 0.0)), 0.1)
        assert not result.valid and result.count == 0 and result.message
    near = model.step(sensor_view([(10, (MAX_POSITION_M - 30, 0, 0.75), (0, 0, 0), CAR, "")],
                                  host=(HOST_ID, (MAX_POSITION_M - 45, 0.0, 0.75), 0.0)), 0.2)
    assert near.valid  # within the limit: still a world


def test_the_fmu_carries_the_status_shim_in_front_of_pythonfmu(fmu_path, small_sensor, tmp_path, monkeypatch):
    """Linux: our shim is the FMU's binary and pythonfmu's lies beside it; without a C compiler, pythonfmu's own
    binary stays (fmi2OK for misuse) and the build says so."""
    import shutil
    import zipfile

    from lidar_fmu.cosim import fmu_package as fmu_build

    with zipfile.ZipFile(fmu_path) as fmu:
        names = set(fmu.namelist())
        shim, inner = fmu.read("binaries/linux64/LidarSensor.so"), fmu.read("binaries/linux64/LidarSensor.pythonfmu.so")
    assert b"lidar-fmu status shim" in shim and b"finalizePythonInterpreter" in inner
    assert "binaries/win64/LidarSensor.dll" in names
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.warns(UserWarning, match="no C compiler"):
        plain = fmu_build.build_fmu(tmp_path / "plain.fmu")
    with zipfile.ZipFile(plain) as fmu:
        assert b"finalizePythonInterpreter" in fmu.read("binaries/linux64/LidarSensor.so")
        assert "binaries/linux64/LidarSensor.pythonfmu.so" not in fmu.namelist()
    with FmuInstance(plain, {"sensor": small_sensor}) as fmu:
        status, _ = get_status(fmu, "Integer", [UNKNOWN_VR])
        assert status == "OK" and errors(fmu)  # pythonfmu alone: refused and logged, but fmi2OK



# -- velocities beyond any vehicle are a jump, not motion ----------------------------------------------
SCENE = [(10, (12, 0, 0.75), (0, 0, 0), CAR, ""), (11, (-9, 4, 0.75), (0, 0, 0.3), CAR, "")]


def first_step(fmu_path, small_sensor, **rates):
    """The FMU's first step (the frame before it is taken back along the host's OSI rates) → (output, warnings)."""
    with FmuInstance(fmu_path, {"sensor": small_sensor}) as fmu:
        out = fmu.step(sensor_view(SCENE, **rates), 0.0, 0.1)
        return out, [text for status, text in fmu.messages if status == "WARNING"]


@pytest.mark.parametrize("rates", [{"host_velocity": (-1e8, 0.0, 0.0)}, {"host_velocity": (1e30, 0.0, 0.0)},
                                   {"host_orientation_rate": (0.0, 0.0, 1e30)}], ids=["1e8 m/s", "1e30 m/s",
                                                                                      "1e30 rad/s"])
def test_first_view_rates_beyond_any_vehicle_are_a_jump(fmu_path, small_sensor, rates):
    """The rule between two views (a pose change faster than 150 m/s or turning more than a quarter turn per frame
    is a jump) holds for the OSI velocity and orientation rate the first frame is taken back along: the host stands
    still over that frame, exactly as without rates, with one warning naming it and the bound."""
    still, none = first_step(fmu_path, small_sensor)
    out, warnings = first_step(fmu_path, small_sensor, **rates)
    assert out.valid and out.count > 0 and out.sensor_data == still.sensor_data and not none
    assert len(warnings) == 1 and "host vehicle 1" in warnings[0] and "jump" in warnings[0], warnings
    assert ("beyond 150 m/s" if "host_velocity" in rates else "quarter turn") in warnings[0]


def test_first_view_rates_of_a_vehicle_are_motion(fmu_path, small_sensor):
    """20 m/s and 1 rad/s, within the rule: the first frame is taken back along them, without a warning."""
    still, _ = first_step(fmu_path, small_sensor)
    for rates in ({"host_velocity": (20.0, 0.0, 0.0)}, {"host_orientation_rate": (0.0, 0.0, 1.0)}):
        out, warnings = first_step(fmu_path, small_sensor, **rates)
        assert out.valid and out.sensor_data != still.sensor_data and not warnings, rates


# -- a Python without lidar-fmu's dependencies ---------------------------------------------------------
WITHOUT_NUMBA = """
import importlib.abc, json, sys

class NoNumba(importlib.abc.MetaPathFinder):  # numba is not there, as if it had never been installed
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "numba":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoNumba())
from fmpy import extract, read_model_description
from fmpy.fmi1 import FMICallException
from fmpy.fmi2 import FMU2Slave, defaultCallbacks, fmi2CallbackFunctions, fmi2CallbackLoggerTYPE

path, unzipped, messages, statuses = sys.argv[1], sys.argv[2], [], []
description = read_model_description(path)
slave = FMU2Slave(guid=description.guid, unzipDirectory=extract(path, unzipped), instanceName="lidar",
                  modelIdentifier=description.coSimulation.modelIdentifier)
callbacks = fmi2CallbackFunctions()
callbacks.logger = fmi2CallbackLoggerTYPE(lambda c, i, status, category, text: messages.append((status, text.decode())))
callbacks.allocateMemory, callbacks.freeMemory = defaultCallbacks.allocateMemory, defaultCallbacks.freeMemory
slave.instantiate(callbacks=callbacks, loggingOn=False)  # as FMPy's simulate_fmu and many masters do
for name, args in [("fmi2SetupExperiment", (0, 0.0, 0.0, 0, 0.0)), ("fmi2EnterInitializationMode", ()),
                   ("fmi2ExitInitializationMode", ()), ("fmi2DoStep", (0.0, 0.1, 1)), ("fmi2Terminate", ())]:
    try:
        status = getattr(slave, name)(slave.component, *args)
    except FMICallException as exc:
        status = exc.status
    statuses.append((name, status, messages[:]))
    messages.clear()
slave.freeInstance()
print(json.dumps({"numba imported": "numba" in sys.modules, "calls": statuses}))
"""


def test_a_python_without_numba_fails_initialization_with_the_import_error(fmu_path, tmp_path):
    """The FMU run by a Python that lacks a package lidar-fmu needs (numba here) refuses to start:
    fmi2ExitInitializationMode returns fmi2Error with one line naming the package and that Python, and each step
    after it fmi2Error with the same reason; nothing fatal. Logged with debug logging off, as errors always are. A
    fresh interpreter, in which importing numba fails exactly as where it is not installed, drives the built FMU
    through FMPy."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", WITHOUT_NUMBA, str(fmu_path), str(tmp_path / "unzipped")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    assert not result["numba imported"]
    calls = {name: (STATUS[status], messages) for name, status, messages in result["calls"]}
    assert calls["fmi2SetupExperiment"] == ("OK", []) and calls["fmi2EnterInitializationMode"] == ("OK", [])
    status, messages = calls["fmi2ExitInitializationMode"]
    assert status == "ERROR" and len(messages) == 1, messages
    level, text = messages[0]
    assert STATUS[level] == "ERROR" and "\n" not in text and "Traceback" not in text
    assert "lidar-fmu cannot start" in text and "cannot import numba" in text and "No module named 'numba'" in text
    assert sys.prefix in text  # which Python lacks it
    status, messages = calls["fmi2DoStep"]
    assert status == "ERROR" and [m for _, m in messages] == [f"fmi2DoStep refused: the model did not start ({text})"]
    assert calls["fmi2Terminate"][0] == "OK"
