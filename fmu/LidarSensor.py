"""LidarSensor: the lidar-fmu sensor model as an OSMP FMI 2.0 co-simulation slave.

A thin layer: OSMP Integer triples ↔ bytes ↔ :class:`lidar_fmu.cosim.sensor_model.OsiSensorModel`.
Everything heavy happens in the ``lidar_fmu`` package shipped in the FMU's
``resources/``. No exception leaves a callback: pythonfmu 0.7.0 turns any
Python exception into fmi2Fatal, and that ends the run. Bad input becomes an
empty, invalid SensorData plus a warning through the FMI logger; a master's
misuse (a call in the wrong FMI state, an unknown value reference or a wrong
type, a write to an output or to a fixed parameter after initialization, a
step size or communication point FMI 2.0 does not allow) is refused with an
error-level message and changes nothing, so the instance stays usable; a model
that cannot start (bad parameters, a Python without lidar-fmu's dependencies)
fails fmi2ExitInitializationMode and every step after it. pythonfmu 0.7.0
offers a slave no way to return fmi2Error, so the FMU's status shim
(``status_shim.c``) returns it for the slave.
"""
import math
import os
import platform
import sys
import traceback
import xml.etree.ElementTree as ET

# the slave's helpers: beside this script in fmu/ and in the FMU's resources/ (which pythonfmu puts on sys.path)
from lidar_sensor_exit import finalize_pythonfmu_before_exit
from lidar_sensor_osmp import BINARY_VARIABLES, OSMP_NS, ROLES, annotate
from lidar_sensor_package import use_cached_package
from lidar_sensor_start import apply_start_values, in_resources
from pythonfmu import Fmi2Slave
from pythonfmu.default_experiment import DefaultExperiment
from pythonfmu.enums import Fmi2Causality, Fmi2Initial, Fmi2Status, Fmi2Variability
from pythonfmu.variables import Boolean, Integer, Real, String

DEFAULT_SENSOR = "ouster_os1_128"

#: value reference 0: the status of the last FMI call, for the FMU's status shim (fmu/status_shim.c)
STATUS_VARIABLE = "fmi2_status_of_last_call"
# FMI 2.0 co-simulation states (the calling sequence's state machine)
INSTANTIATED, INITIALIZATION, STEP, TERMINATED = "Instantiated", "Initialization Mode", "Step Mode", "Terminated"
PLACEHOLDER = {Integer: 0, Real: 0.0, Boolean: False, String: ""}  # what a refused get returns
CONVERT = {Integer: int, Real: float, Boolean: bool, String: str}
MAX_REASON_CHARS = 1000  # an exception's text in a log line, at most (a message never grows without bound)


def _short(text):
    text = str(text)
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS] + "…"


def _missing_dependency():
    """Why the Python running this FMU cannot import the model (``None``: it can): a package lidar-fmu needs
    (numpy, numba, trimesh, osi3, …) is missing or broken there. Third-party packages come from that Python,
    not from the FMU."""
    try:
        import lidar_fmu.cosim.sensor_model  # noqa: F401  (the whole model, and every package it needs)
    except Exception as exc:  # ImportError mostly; a broken install may raise anything while importing
        missing = f"cannot import {exc.name}" if isinstance(exc, ImportError) and exc.name else "cannot import lidar_fmu"
        return (f"lidar-fmu cannot start: the Python that runs this FMU (Python {platform.python_version()}, "
                f"{sys.prefix}) {missing}: {type(exc).__name__}: {_short(exc)}. Install lidar-fmu with its "
                "dependencies into that Python (pip install lidar-fmu, or pip install . in its source folder)")
    return None


def _step_refusal(current_time, step_size):
    """Why FMI 2.0 does not allow an fmi2DoStep from ``current_time`` over ``step_size`` (``None``: it does).

    FMI 2.0, section 4.2.2 (fmi2DoStep): communicationStepSize "must be > 0.0", and the slave computes up to
    currentCommunicationPoint + communicationStepSize, which must be a time: NaN and infinities are none.
    """
    if not math.isfinite(current_time):
        return f"currentCommunicationPoint is {current_time}, not a finite time"
    if not (step_size > 0.0 and math.isfinite(step_size)):
        return f"communicationStepSize is {step_size}; FMI 2.0 asks for a finite step > 0"
    if not math.isfinite(current_time + step_size):
        return f"the step from {current_time:g} s over {step_size:g} s ends past the largest time"
    return None


def _osi_version():
    from lidar_fmu.osi.encode import default_interface_version

    v = default_interface_version()
    return f"{v.version_major}.{v.version_minor}.{v.version_patch}"


class LidarSensor(Fmi2Slave):
    author = "lidar-fmu"
    description = "Physically grounded lidar sensor model (OSI SensorView in, SensorData point cloud out, OSMP)"
    license = "MPL-2.0"
    # no version here: to_xml takes lidar_fmu.__version__

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        finalize_pythonfmu_before_exit()
        use_cached_package(self.resources)
        self._missing_dependency = _missing_dependency()
        #: why the model cannot start, said (fmi2Error) by fmi2ExitInitializationMode and each step after it
        self._model_error = self._missing_dependency
        # Parameters (all optional; defaults make a working sensor)
        self.sensor = DEFAULT_SENSOR
        self.assets = ""
        self.environment = "auto"  # a mesh file | "auto" (the ground truth's mesh, else its road) | "none"
        self.objects = "auto"  # "auto" (an object without a model: its OSI class's mesh) | "boxes"
        self.materials = ""
        self.ir_database = ""
        self.backend = "auto"
        self.mounting_position_x = 0.0
        self.mounting_position_y = 0.0
        self.mounting_position_z = 0.0
        self.mounting_orientation_roll = 0.0
        self.mounting_orientation_pitch = 0.0
        self.mounting_orientation_yaw = 0.0
        self.disable_self_hits = True
        self.up_axis = ""  # "y" | "z" | "" (by format: glTF/GLB Y-up, others Z-up)
        apply_start_values(self, self.resources)  # an SSP system's copy of the FMU starts at its values
        # Outputs
        self.valid = False
        self.count = 0
        self._ints = {f"{prefix}.{role}": 0 for prefix in BINARY_VARIABLES for role in ROLES}
        self._model = None
        self._output = None
        self._config_request = None
        self._config_key = None  # the parameters the published config request was computed from
        self._sensor_cache = (None, None)  # (sensor parameter, loaded Sensor)
        self._warned = set()
        self._state = INSTANTIATED
        self.default_experiment = DefaultExperiment(start_time=0.0, step_size=self._frame_period_s())
        # value reference 0, registered first: the worst status this instance gave the current FMI call, read (and
        # reset) after every call by the FMU's status shim (fmu/status_shim.c), which returns it to the master
        self._call_status = int(Fmi2Status.ok)
        self.register_variable(Integer(STATUS_VARIABLE, causality=Fmi2Causality.local,
                                       variability=Fmi2Variability.discrete, getter=lambda: self._call_status))
        assert self.vars[0].name == STATUS_VARIABLE

        for name in ("sensor", "assets", "environment", "objects", "materials", "ir_database", "backend", "up_axis"):
            self._register_parameter(String, name)
        for axis in "xyz":
            self._register_parameter(Real, f"mounting_position_{axis}")
        for angle in ("roll", "pitch", "yaw"):
            self._register_parameter(Real, f"mounting_orientation_{angle}")
        self._register_parameter(Boolean, "disable_self_hits")
        for prefix, (_, causality, variability, initial) in BINARY_VARIABLES.items():
            for role in ROLES:
                self._register_binary(f"{prefix}.{role}", causality, variability, initial)
        self.register_variable(Boolean("valid", causality=Fmi2Causality.output, variability=Fmi2Variability.discrete,
                                       initial=Fmi2Initial.exact, getter=lambda: self.valid))
        self.register_variable(Integer("count", causality=Fmi2Causality.output, variability=Fmi2Variability.discrete,
                                       initial=Fmi2Initial.exact, getter=lambda: self.count))

    # -- variables ----------------------------------------------------------------
    def _register_parameter(self, kind, name):
        def setter(value, name=name):
            setattr(self, name, value)

        self.register_variable(kind(name, causality=Fmi2Causality.parameter, variability=Fmi2Variability.fixed,
                                    getter=lambda name=name: getattr(self, name), setter=setter))

    def _register_binary(self, name, causality, variability, initial):
        def getter(name=name):
            if name.startswith("OSMPSensorViewInConfigRequest."):
                self._publish_config_request()
            return self._ints[name]

        def setter(value, name=name):
            self._ints[name] = int(value)

        writable = causality in (Fmi2Causality.input, Fmi2Causality.parameter)
        self.register_variable(Integer(name, causality=causality, variability=variability, initial=initial,
                                       getter=getter, setter=setter if writable else None))

    def _set_binary(self, prefix, lo, hi, size):
        self._ints[f"{prefix}.base.lo"], self._ints[f"{prefix}.base.hi"], self._ints[f"{prefix}.size"] = lo, hi, size

    # fmi2Get*/fmi2Set*: pythonfmu's own versions raise (→ fmi2Fatal) on an unknown value reference, a
    # wrong type or a variable without a setter; these refuse with a logged reason instead.
    def _variable(self, function, vr, kind):
        var = self.vars.get(vr)
        if var is None:
            self._misuse(f"{function} refused: no variable has value reference {vr}")
            return None
        if not isinstance(var, kind):
            self._misuse(f"{function} refused: {var.name} (value reference {vr}) is {type(var).__name__}, "
                         f"not {kind.__name__}")
            return None
        return var

    def _get(self, kind, vrs):
        function, values = f"fmi2Get{kind.__name__}", []
        if kind is Integer and list(vrs) == [0]:  # the status shim's read after each call: it takes the status
            return [self._take_call_status()]
        for vr in vrs:
            var, value = self._variable(function, vr, kind), PLACEHOLDER[kind]
            if var is not None:
                try:
                    value = CONVERT[kind](var.getter())
                except Exception:
                    self._error(f"{function}({var.name}) failed:\n{traceback.format_exc()}")
            values.append(value)
        return values

    def _set(self, kind, vrs, values):
        function = f"fmi2Set{kind.__name__}"
        for vr, value in zip(vrs, values):
            var = self._variable(function, vr, kind)
            if var is None:
                continue
            reason = self._refusal(var, value)
            if reason:
                self._misuse(f"{function}({var.name}) refused: {reason}")
                continue
            try:
                var.setter(CONVERT[kind](value))
            except Exception:
                self._log(f"{function}({var.name}) failed:\n{traceback.format_exc()}", Fmi2Status.error)

    def _refusal(self, var, value):
        """Why FMI 2.0 does not allow setting ``var`` now (``None``: it does)."""
        if var.causality not in (Fmi2Causality.input, Fmi2Causality.parameter) or var.setter is None:
            # (pythonfmu gives every variable backed by an attribute a setter, outputs included)
            what = "a calculated parameter" if var.causality == Fmi2Causality.calculatedParameter else "an output"
            return f"{var.name} is {what}, not settable"
        if value is None:
            return "NULL string"
        if self._state == TERMINATED:
            return "the instance is terminated (fmi2Terminate was called)"
        if var.variability == Fmi2Variability.fixed and self._state != INSTANTIATED and self._state != INITIALIZATION:
            return (f"{var.name} is a fixed parameter, settable only before fmi2ExitInitializationMode; "
                    f"the model keeps {var.getter()!r}")
        return None

    def get_integer(self, vrs):
        return self._get(Integer, vrs)

    def get_real(self, vrs):
        return self._get(Real, vrs)

    def get_boolean(self, vrs):
        return self._get(Boolean, vrs)

    def get_string(self, vrs):
        return self._get(String, vrs)

    def set_integer(self, vrs, values):
        self._set(Integer, vrs, values)

    def set_real(self, vrs, values):
        self._set(Real, vrs, values)

    def set_boolean(self, vrs, values):
        self._set(Boolean, vrs, values)

    def set_string(self, vrs, values):
        self._set(String, vrs, values)

    # -- model description ------------------------------------------------------------
    def _frame_period_s(self):
        try:
            return self._sensor().frame_period_s
        except Exception:
            return 0.1

    def to_xml(self, model_options=None):
        from lidar_fmu import __version__

        self.version = __version__  # one version source: lidar_fmu/_version.py (pythonfmu reads this attribute)
        ET.register_namespace("osmp", OSMP_NS)  # before pythonfmu writes the root element
        return annotate(super().to_xml(model_options or {}), self.resources, _osi_version())

    # -- model lifecycle ------------------------------------------------------------------
    def _log(self, message, status=Fmi2Status.warning, once_key=None):
        if once_key is not None:
            if once_key in self._warned:
                return
            self._warned.add(once_key)
        category = {Fmi2Status.warning: "logStatusWarning", Fmi2Status.error: "logStatusError"}.get(status, "logAll")
        self.log(message, status, category)

    def _error(self, message):
        """This call fails: logged at error level and answered fmi2Error (through the status shim); the instance
        stays usable."""
        self._call_status = int(Fmi2Status.error)
        self._log(message, Fmi2Status.error)

    def _misuse(self, message):
        """A call FMI 2.0 does not allow here: refused (:meth:`_error`), nothing changed."""
        self._error(message)

    def _take_call_status(self):
        """The worst status of the call just made, reset for the next (read alone, it is the shim's read; read
        with other variables, by a master, it stays for the shim)."""
        status, self._call_status = self._call_status, int(Fmi2Status.ok)
        return status

    def _wrong_state(self, function, allowed):
        self._misuse(f"{function} refused: called in state {self._state}; FMI 2.0 allows it only {allowed}. "
                     "Nothing changed.")

    def _mounting_pose(self):
        from lidar_fmu.geometry.transforms import pose_matrix

        return pose_matrix(
            (self.mounting_position_x, self.mounting_position_y, self.mounting_position_z),
            (self.mounting_orientation_roll, self.mounting_orientation_pitch, self.mounting_orientation_yaw),
        )

    def _rig(self):
        """The ``sensor`` parameter loaded (once per value): its lidars (one, or a rig's)."""
        name = self.sensor or DEFAULT_SENSOR
        if self._sensor_cache[0] != name:
            from lidar_fmu.sensors.rig import load_rig

            self._sensor_cache = (name, load_rig(in_resources(self.resources, name)))  # a spec file may be inside
        return self._sensor_cache[1]

    def _sensor(self):
        """The first (or only) lidar of the ``sensor`` parameter."""
        return self._rig()[0].sensor

    def _start_model(self):
        """The model, started once from the parameters (``None``: it cannot start, ``_model_error`` says why)."""
        if self._model is None and self._model_error is None:
            try:
                from lidar_fmu.cosim.sensor_model import OsiSensorModel

                # relative asset folders may also live inside the FMU's resources
                assets = in_resources(self.resources, self.assets, os.path.isdir)
                options = dict(
                    sensor=self._rig(), assets_dir=assets, environment=self.environment,
                    materials=self.materials, ir_database=self.ir_database, backend=self.backend or "auto",
                    default_mounting_pose=self._mounting_pose(), disable_self_hits=bool(self.disable_self_hits),
                    warn=lambda message: self._log(message, once_key=message), up_axis=self.up_axis,
                    objects=self.objects,
                )
                self._model = OsiSensorModel(**options)
            except Exception as exc:
                self._model_error = f"lidar-fmu cannot start: {_short(exc)}"
            else:
                self._warm_up(options)
        return self._model

    def _warm_up(self, options):
        """Compile (or load from Numba's cache) every kernel a step runs now, in fmi2ExitInitializationMode, and
        say how long it took: a machine's first step would otherwise compile them, silently, for tens of seconds,
        inside fmi2DoStep, where a master with a step timeout gives up (lidar_fmu.cosim.warm_up)."""
        from lidar_fmu.cosim.warm_up import warm_up

        done = warm_up(self._model, options)
        self._log(done.message(), Fmi2Status.warning if done.problem else Fmi2Status.ok)

    def _publish_config_request(self):
        """(Re)compute the SensorViewConfiguration from the parameters it depends on, when they changed.

        Parameters are fixed after initialization (later writes are refused), so
        from then on the request no longer changes.
        """
        mounting = tuple(getattr(self, f"mounting_{name}") for name in (
            "position_x", "position_y", "position_z", "orientation_roll", "orientation_pitch", "orientation_yaw"))
        key = (self.sensor or DEFAULT_SENSOR, mounting)
        if self._config_request is not None and key == self._config_key:
            return
        if self._missing_dependency:  # no lidar_fmu to compute it with
            self._error(f"OSMPSensorViewInConfigRequest cannot be computed: {self._missing_dependency}")
            self._set_binary("OSMPSensorViewInConfigRequest", 0, 0, 0)
            return
        from lidar_fmu.cosim.osmp import DoubleBuffer

        if self._config_request is None:
            self._config_request = DoubleBuffer()  # the previous request stays valid until the next but one
        self._config_key = key
        try:
            from lidar_fmu.cosim.sensor_model import member_mounting
            from lidar_fmu.osi.config import rig_view_configuration
            from lidar_fmu.osi.decode import check_position
            from lidar_fmu.sensors.rig import rig_sensor_ids

            lidars = []
            ids = rig_sensor_ids([member.sensor_id for member in self._rig()], 0)  # as the model numbers them
            for k, member in enumerate(self._rig()):
                pose = member_mounting(member, self._mounting_pose())  # as the model places it
                check_position(pose[:3, 3], "mounting_position_x/y/z" if k == 0 else f"sensors[{k}] mounting")
                lidars.append((member.sensor, pose, ids[k]))
            data = rig_view_configuration(lidars)
        except Exception as exc:
            self._error(f"OSMPSensorViewInConfigRequest cannot be computed for sensor {key[0]!r}: "
                        f"{type(exc).__name__}: {_short(exc)}; publishing none (size 0)")
            data = b""
        self._set_binary("OSMPSensorViewInConfigRequest", *self._config_request.publish(data))

    def setup_experiment(self, start_time, stop_time, tolerance):
        if self._state != INSTANTIATED:
            self._wrong_state("fmi2SetupExperiment", "after fmi2Instantiate, before fmi2EnterInitializationMode")

    def enter_initialization_mode(self):
        if self._state != INSTANTIATED:
            self._wrong_state("fmi2EnterInitializationMode", "once, after fmi2Instantiate")
            return
        self._state = INITIALIZATION

    def exit_initialization_mode(self):
        if self._state == INSTANTIATED:
            self._log("fmi2ExitInitializationMode called without fmi2EnterInitializationMode; initializing anyway")
        elif self._state != INITIALIZATION:
            self._wrong_state("fmi2ExitInitializationMode", "in Initialization Mode")
            return
        self._state = STEP
        if self._start_model() is not None:
            from lidar_fmu.cosim.osmp import DoubleBuffer

            self._output = DoubleBuffer()
        else:
            self._error(self._model_error)  # the call that found out fails; so does each step after it

    def do_step(self, current_time, step_size):
        if self._state != STEP:
            self._wrong_state("fmi2DoStep", "between fmi2ExitInitializationMode and fmi2Terminate")
            return True  # False would be fmi2Discard, which ends the run too
        refusal = _step_refusal(current_time, step_size)
        if refusal:
            self._misuse(f"fmi2DoStep refused: {refusal}. Nothing changed.")
            return True
        model = self._model
        if model is None:  # it did not start (fmi2ExitInitializationMode said why): no step can be computed
            self.valid, self.count = False, 0
            self._error(f"fmi2DoStep refused: the model did not start ({self._model_error})")
            return True
        try:
            from lidar_fmu.cosim.osmp import read_buffer

            view = self._ints
            try:
                data = read_buffer(view["OSMPSensorViewIn.base.lo"], view["OSMPSensorViewIn.base.hi"],
                                   view["OSMPSensorViewIn.size"])
            except ValueError as exc:
                data, message = None, str(exc)
                self._log(f"OSMPSensorViewIn: {message}")
            result = model.step(data, current_time + step_size, out=self._output.next())
            if result.message:
                self._log(f"t={current_time + step_size:.6f}s: {result.message}")
            self.valid, self.count = result.valid, result.count
            self._set_binary("OSMPSensorDataOut", *self._output.publish(result.sensor_data))
        except Exception:
            self.valid, self.count = False, 0
            self._log(f"do_step failed:\n{traceback.format_exc()}")
        return True

    def terminate(self):
        finalize_pythonfmu_before_exit()  # pythonfmu FMUs the master loaded after this instance
        if self._state == TERMINATED:
            self._log("fmi2Terminate called twice; nothing to do")
            return
        self._state = TERMINATED
        self._model = None
        self.valid, self.count = False, 0
        if self._output is not None:
            self._output.clear()
        self._set_binary("OSMPSensorDataOut", 0, 0, 0)  # the buffer it pointed at is gone
