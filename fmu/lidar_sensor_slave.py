"""What the FMI 2.0 and FMI 3.0 slaves share: :class:`OsmpLidarSlave`, every callback's meaning beyond FMI's types.

The slaves (``LidarSensor.py``: pythonfmu, FMI 2.0; ``LidarSensorFmi3.py``: pythonfmu3, FMI 3.0) are thin: each
declares its variables with its library's types, carries OSMP's binary variables its version's way (three Integers
holding a pointer; one Binary), and maps its library's callbacks onto this class. Here: the parameters, the FMI
calling sequence and what it refuses, the model started from the parameters and the configuration handshake
(:mod:`lidar_fmu.cosim.view_config`), its warm-up, each step, the log. No exception leaves a callback: both
pythonfmu libraries turn one into a fatal status, which ends the run. Bad input becomes an empty, invalid
SensorData plus a warning; a master's misuse (a call in the wrong state, an unknown value reference or a wrong
type, a write to an output or to a fixed parameter after initialization, a step size or communication point FMI
does not allow) is refused with an error-level message and changes nothing, so the instance stays usable; a model
that cannot start (bad parameters, a configuration it cannot read, a Python without lidar-fmu's dependencies)
fails ExitInitializationMode and every step after it. Neither library lets a slave return Error or Warning from
every call, so each FMU's status shim (``status_shim.c``, ``status_shim3.c``) reads the status this class records
for the call (value reference 0) and returns it.

Imports nothing from pythonfmu or pythonfmu3: both FMUs carry this file, and one process may load both.
"""
import math
import os
import platform
import sys
import traceback

from lidar_sensor_exit import finalize_pythonfmu_before_exit
from lidar_sensor_package import use_cached_package
from lidar_sensor_start import apply_start_values, in_resources

DEFAULT_SENSOR = "ouster_os1_128"
# FMI 2.0 and 3.0 number their statuses alike (fmi2Status, fmi3Status)
OK, WARNING, ERROR = 0, 1, 3
# the FMI co-simulation states (both versions' state machines name them so)
INSTANTIATED, INITIALIZATION, STEP, TERMINATED = "Instantiated", "Initialization Mode", "Step Mode", "Terminated"
MAX_REASON_CHARS = 1000  # an exception's text in a log line, at most (a message never grows without bound)
#: (name, kind, default) of every parameter; kinds: "string", "real", "boolean" (each slave's type for it)
PARAMETERS = (
    ("sensor", "string", DEFAULT_SENSOR),  # a preset, a spec file, or a rig of several lidars
    ("assets", "string", ""),
    # a mesh file | "auto" (the ground truth's mesh, else its road) | "none" | "urban" | "suburban" | "rural"
    # | "highway" (as auto, and a street of that style around the road)
    ("environment", "string", "auto"),
    ("objects", "string", "auto"),  # "auto" (an object without a model: its OSI class's mesh) | "boxes"
    ("materials", "string", ""),
    ("ir_database", "string", ""),
    ("backend", "string", "auto"),
    ("up_axis", "string", ""),  # "y" | "z" | "" (by format: glTF/GLB Y-up, others Z-up)
    *((f"mounting_position_{axis}", "real", 0.0) for axis in "xyz"),
    *((f"mounting_orientation_{angle}", "real", 0.0) for angle in ("roll", "pitch", "yaw")),
    ("disable_self_hits", "boolean", True),
    # the OSI layers published: a comma list of detections, reflections, logical, objects ("": the sensor spec's
    # outputs, else detections alone; docs/fmu.md#osi-layers)
    ("outputs", "string", ""),
)
#: (name, kind) of the outputs besides OSMP's: did the last step deliver data, how many detections
OUTPUTS = (("valid", "boolean"), ("count", "integer"))
MOUNTING = tuple(name for name, kind, _ in PARAMETERS if name.startswith("mounting_"))
VIEW_IN, DATA_OUT = "OSMPSensorViewIn", "OSMPSensorDataOut"
CONFIG_REQUEST, CONFIG = "OSMPSensorViewInConfigRequest", "OSMPSensorViewInConfig"


def short(text):
    text = str(text)
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS] + "…"


def missing_dependency():
    """Why the Python running this FMU cannot import the model (``None``: it can): a package lidar-fmu needs
    (numpy, numba, trimesh, osi3, …) is missing or broken there. Third-party packages come from that Python,
    not from the FMU."""
    try:
        import lidar_fmu.cosim.sensor_model  # noqa: F401  (the whole model, and every package it needs)
        import lidar_fmu.cosim.view_config  # noqa: F401
    except Exception as exc:  # ImportError mostly; a broken install may raise anything while importing
        named = isinstance(exc, ImportError) and exc.name
        missing = f"cannot import {exc.name}" if named else "cannot import lidar_fmu"
        return (f"lidar-fmu cannot start: the Python that runs this FMU (Python {platform.python_version()}, "
                f"{sys.prefix}) {missing}: {type(exc).__name__}: {short(exc)}. Install lidar-fmu with its "
                "dependencies into that Python (pip install lidar-fmu, or pip install . in its source folder)")
    return None


def step_refusal(current_time, step_size, fmi):
    """Why ``fmi`` ("FMI 2.0", "FMI 3.0") does not allow a DoStep from ``current_time`` over ``step_size`` (``None``:
    it does).

    FMI 2.0, section 4.2.2 (fmi2DoStep), and FMI 3.0, section 4.2.1 (fmi3DoStep): communicationStepSize "must be
    > 0.0", and the slave computes up to currentCommunicationPoint + communicationStepSize, which must be a time:
    NaN and infinities are none.
    """
    if not math.isfinite(current_time):
        return f"currentCommunicationPoint is {current_time}, not a finite time"
    if not (step_size > 0.0 and math.isfinite(step_size)):
        return f"communicationStepSize is {step_size}; {fmi} asks for a finite step > 0"
    if not math.isfinite(current_time + step_size):
        return f"the step from {current_time:g} s over {step_size:g} s ends past the largest time"
    return None


def osi_version():
    from lidar_fmu.osi.encode import default_interface_version

    v = default_interface_version()
    return f"{v.version_major}.{v.version_minor}.{v.version_patch}"


def accessors(kind):
    """(get, set) methods of a slave for its library's variable class ``kind`` (``get_integer`` and
    ``set_integer`` for FMI 2.0's Integer, say): they refuse misuse with a logged reason (:meth:`OsmpLidarSlave._get`,
    :meth:`OsmpLidarSlave._set`) where the library's own would raise, which ends the run."""
    def get(self, vrs):
        return self._get(kind, vrs)

    def set_(self, vrs, values):
        self._set(kind, vrs, values)

    return get, set_


class OsmpLidarSlave:
    """The lidar-fmu model behind an FMI slave (module doc). A mixin placed before the library's slave class.

    A slave sets :attr:`FMI` and :attr:`CALL`, its variable types in :attr:`KINDS`, :attr:`CONVERT` and
    :attr:`PLACEHOLDER`, calls :meth:`_setup` after its library's ``__init__``, registers the parameters and the
    outputs with :meth:`_register_parameters` and :meth:`_register_outputs`, and provides :meth:`_emit` (pass a
    message to its library's log), :meth:`_binary_input` (an OSMP input's bytes now) and :meth:`_publish_binary`
    (point an OSMP output at a buffer).
    """

    author = "lidar-fmu"
    description = "Physically grounded lidar sensor model (OSI SensorView in, SensorData point cloud out, OSMP)"
    license = "MPL-2.0"
    # no version here: to_xml takes lidar_fmu.__version__
    FMI = "FMI 2.0"  # as the standard names itself, in messages
    CALL = "fmi2"  # the prefix of its functions, in messages
    KINDS: dict = {}  # kind of PARAMETERS and OUTPUTS ("string", "real", …) → variable class
    CONVERT: dict = {}  # variable class → Python type of its values
    PLACEHOLDER: dict = {}  # variable class → what a refused get returns

    def _setup(self):
        finalize_pythonfmu_before_exit()
        use_cached_package(self.resources)
        self._missing_dependency = missing_dependency()
        #: why the model cannot start, said (Error) by ExitInitializationMode and each step after it
        self._model_error = self._missing_dependency
        for name, _, default in PARAMETERS:
            setattr(self, name, default)
        apply_start_values(self, self.resources)  # an SSP system's copy of the FMU starts at its values
        # Outputs
        self.valid = False
        self.count = 0
        self.time_s = 0.0  # s: where the last step ended (FMI 3.0's independent variable)
        self._model = None
        self._output = None
        self._config_request = None
        self._config_key = None  # what the published config request was computed from
        self._view_config = b""  # the master's OSMPSensorViewInConfig, copied (b"": none set)
        self._sensor_cache = (None, None)  # (sensor parameter, loaded Sensor)
        self._warned = set()
        self._state = INSTANTIATED
        #: the worst status this instance gave the current call, read (and reset) after every call by the FMU's
        #: status shim through value reference 0, which returns it to the master
        self._call_status = OK

    # -- variables ----------------------------------------------------------------
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
        function, values = f"{self.CALL}Get{kind.__name__}", []
        if list(vrs) == [0] and isinstance(self.vars[0], kind):  # the status shim's read after each call
            return [self._take_call_status()]
        for vr in vrs:
            var, value = self._variable(function, vr, kind), self.PLACEHOLDER[kind]
            if var is not None:
                try:
                    value = self.CONVERT[kind](var.getter())
                except Exception:
                    self._error(f"{function}({var.name}) failed:\n{traceback.format_exc()}")
            values.append(value)
        return values

    def _set(self, kind, vrs, values):
        function = f"{self.CALL}Set{kind.__name__}"
        for vr, value in zip(vrs, values):
            var = self._variable(function, vr, kind)
            if var is None:
                continue
            reason = self._refusal(var, value)
            if reason:
                self._misuse(f"{function}({var.name}) refused: {reason}")
                continue
            try:
                var.setter(self.CONVERT[kind](value))
            except Exception:
                self._log(f"{function}({var.name}) failed:\n{traceback.format_exc()}", ERROR)

    def _refusal(self, var, value):
        """Why FMI does not allow setting ``var`` now (``None``: it does)."""
        causality = var.causality.name
        if causality not in ("input", "parameter") or var.setter is None:
            # (both libraries give every variable backed by an attribute a setter, outputs included)
            what = {"calculatedParameter": "a calculated parameter", "independent": "the independent variable",
                    "local": "a local variable"}.get(causality, "an output")
            return f"{var.name} is {what}, not settable"
        if value is None:
            return "NULL value"
        if self._state == TERMINATED:
            return f"the instance is terminated ({self.CALL}Terminate was called)"
        if var.variability.name == "fixed" and self._state not in (INSTANTIATED, INITIALIZATION):
            kept = "" if var.name.startswith(CONFIG) else f"; the model keeps {var.getter()!r}"
            return f"{var.name} is a fixed parameter, settable only before {self.CALL}ExitInitializationMode{kept}"
        return None

    def _register_parameters(self, causality, variability):
        """Register :data:`PARAMETERS` as fixed parameters backed by this instance's attributes (``causality``,
        ``variability``: the library's enums of them)."""
        for name, kind, _ in PARAMETERS:
            getter, setter = self._parameter_accessors(name)
            self.register_variable(self.KINDS[kind](name, causality=causality.parameter,
                                                    variability=variability.fixed, getter=getter, setter=setter))

    def _register_outputs(self, causality, variability, initial):
        """Register :data:`OUTPUTS` as discrete outputs, exact from the start (the library's enums of them)."""
        for name, kind in OUTPUTS:
            self.register_variable(self.KINDS[kind](name, causality=causality.output,
                                                    variability=variability.discrete, initial=initial.exact,
                                                    getter=lambda name=name: getattr(self, name)))

    def _parameter_accessors(self, name):
        """(getter, setter) of parameter ``name``."""
        def setter(value):
            setattr(self, name, value)

        return (lambda: getattr(self, name)), setter

    # -- model description ------------------------------------------------------------
    def _frame_period_s(self):
        try:
            return self._sensor().frame_period_s
        except Exception:
            return 0.1

    # -- model lifecycle ------------------------------------------------------------------
    def _log(self, message, status=WARNING, once_key=None):
        if once_key is not None:
            if once_key in self._warned:
                return
            self._warned.add(once_key)
        category = {WARNING: "logStatusWarning", ERROR: "logStatusError"}.get(status, "logAll")
        self._emit(message, status, category)

    def _error(self, message):
        """This call fails: logged at error level and answered Error (through the status shim); the instance
        stays usable."""
        self._call_status = ERROR
        self._log(message, ERROR)

    def _warn(self, message):
        """This call works, not wholly as asked: logged and answered Warning (unless it fails)."""
        self._call_status = max(self._call_status, WARNING)
        self._log(message, WARNING)

    def _misuse(self, message):
        """A call FMI does not allow here: refused (:meth:`_error`), nothing changed."""
        self._error(message)

    def _take_call_status(self):
        """The worst status of the call just made, reset for the next (read alone, it is the shim's read; read
        with other variables, by a master, it stays for the shim)."""
        status, self._call_status = self._call_status, OK
        return status

    def _wrong_state(self, function, allowed):
        self._misuse(f"{function} refused: called in state {self._state}; {self.FMI} allows it only {allowed}. "
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

    def _requested_rig(self):
        """The lidars as the request describes them: each with the mounting and id the model gives it."""
        from lidar_fmu.cosim.sensor_model import member_mounting
        from lidar_fmu.osi.decode import check_position
        from lidar_fmu.sensors.rig import RigMember, rig_sensor_ids

        rig = self._rig()
        ids = rig_sensor_ids([member.sensor_id for member in rig], 0)  # as the model numbers them
        members = []
        for k, member in enumerate(rig):
            pose = member_mounting(member, self._mounting_pose())  # as the model places it
            check_position(pose[:3, 3], "mounting_position_x/y/z" if k == 0 else f"sensors[{k}] mounting")
            members.append(RigMember(member.sensor, pose, ids[k]))
        return members

    def _computed_config_request(self):
        """The SensorViewConfiguration the model asks for, serialized (raises where the parameters allow none)."""
        from lidar_fmu.osi.config import rig_view_configuration

        return rig_view_configuration([(m.sensor, m.mounting_pose, m.sensor_id) for m in self._requested_rig()])

    def _master_view_config(self):
        """The master's OSMPSensorViewInConfig (b"": none set), copied while its buffer is valid: until
        ExitInitializationMode ends (OSMP, FMI 2.0), or at its set (FMI 3.0, in :meth:`_binary_input`)."""
        if self._state in (INSTANTIATED, INITIALIZATION) and not self._missing_dependency:
            try:
                self._view_config = self._binary_input(CONFIG) or b""
            except ValueError as exc:
                self._view_config = b""
                self._error(f"{CONFIG}: {exc}")
        return self._view_config

    def _start_model(self):
        """The model, started once from the parameters and the master's configuration (``None``: it cannot start,
        ``_model_error`` says why)."""
        if self._model is None and self._model_error is None:
            try:
                from lidar_fmu.cosim.sensor_model import OsiSensorModel

                # relative asset folders may also live inside the FMU's resources
                assets = in_resources(self.resources, self.assets, os.path.isdir)
                rig, sensor_id = self._configured_rig()
                options = dict(
                    sensor=rig, assets_dir=assets, environment=self.environment,
                    materials=self.materials, ir_database=self.ir_database, backend=self.backend or "auto",
                    default_mounting_pose=self._mounting_pose(), disable_self_hits=bool(self.disable_self_hits),
                    warn=lambda message: self._log(message, once_key=message), up_axis=self.up_axis,
                    objects=self.objects, sensor_id=sensor_id, outputs=self.outputs,
                )
                self._model = OsiSensorModel(**options)
            except Exception as exc:
                self._model_error = f"lidar-fmu cannot start: {short(exc)}"
            else:
                self._warm_up(options)
        return self._model

    def _configured_rig(self):
        """(the lidars to simulate, the SensorData's sensor id or None): the ``sensor`` parameter's, as the
        master's OSMPSensorViewInConfig asks (lidar_fmu.cosim.view_config)."""
        config = self._master_view_config()
        if not config:
            return self._rig(), None
        from lidar_fmu.cosim.view_config import follow_view_configuration

        followed = follow_view_configuration(self._rig(), self._computed_config_request(), config)
        if followed.message():
            self._log(followed.message(), OK)
        for line in followed.not_followed:
            self._warn(f"{CONFIG} {line}")
        return followed.members, followed.sensor_id

    def _warm_up(self, options):
        """Compile (or load from Numba's cache) every kernel a step runs now, in ExitInitializationMode, and say
        how long it took: a machine's first step would otherwise compile them, silently, for tens of seconds,
        inside DoStep, where a master with a step timeout gives up (lidar_fmu.cosim.warm_up)."""
        from lidar_fmu.cosim.warm_up import warm_up

        done = warm_up(self._model, options)
        self._log(done.message(), WARNING if done.problem else OK)

    def _publish_config_request(self):
        """(Re)compute the SensorViewConfiguration from what it depends on, when that changed: the parameters, and
        the master's OSMPSensorViewInConfig, which it echoes once set (OSMP).

        Parameters are fixed after initialization (later writes are refused), so
        from then on the request no longer changes.
        """
        config = self._master_view_config()
        key = (self.sensor or DEFAULT_SENSOR, tuple(getattr(self, name) for name in MOUNTING), config)
        if self._config_request is not None and key == self._config_key:
            return
        if self._missing_dependency:  # no lidar_fmu to compute it with
            self._error(f"{CONFIG_REQUEST} cannot be computed: {self._missing_dependency}")
            self._publish_binary(CONFIG_REQUEST, 0, 0)
            return
        from lidar_fmu.cosim.osmp import DoubleBuffer

        if self._config_request is None:
            self._config_request = DoubleBuffer()  # the previous request stays valid until the next but one
        self._config_key = key
        try:
            data = config or self._computed_config_request()
        except Exception as exc:
            self._error(f"{CONFIG_REQUEST} cannot be computed for sensor {key[0]!r}: "
                        f"{type(exc).__name__}: {short(exc)}; publishing none (size 0)")
            data = b""
        self._publish_buffer(CONFIG_REQUEST, self._config_request, data)

    def _publish_buffer(self, prefix, buffer, data):
        self._publish_binary(prefix, *buffer.publish(data))

    def setup_experiment(self, *args):
        if self._state != INSTANTIATED:
            self._wrong_state(f"{self.CALL}SetupExperiment", f"after {self.CALL}Instantiate, before "
                                                             f"{self.CALL}EnterInitializationMode")

    def enter_initialization_mode(self):
        if self._state != INSTANTIATED:
            self._wrong_state(f"{self.CALL}EnterInitializationMode", f"once, after {self.CALL}Instantiate")
            return
        self._state = INITIALIZATION

    def exit_initialization_mode(self):
        if self._state != INITIALIZATION:
            self._wrong_state(f"{self.CALL}ExitInitializationMode", "in Initialization Mode")
            return
        self._master_view_config()  # the master's buffer is valid until this call ends
        self._state = STEP
        if self._start_model() is not None:
            from lidar_fmu.cosim.osmp import DoubleBuffer

            self._output = DoubleBuffer()
        else:
            self._error(self._model_error)  # the call that found out fails; so does each step after it

    def _do_step(self, current_time, step_size):
        """One DoStep; what it returns is the slave's (FMI 2.0: True; FMI 3.0: a step result)."""
        function = f"{self.CALL}DoStep"
        if self._state != STEP:
            self._wrong_state(function, f"between {self.CALL}ExitInitializationMode and {self.CALL}Terminate")
            return
        refusal = step_refusal(current_time, step_size, self.FMI)
        if refusal:
            self._misuse(f"{function} refused: {refusal}. Nothing changed.")
            return
        model = self._model
        if model is None:  # it did not start (ExitInitializationMode said why): no step can be computed
            self.valid, self.count = False, 0
            self._error(f"{function} refused: the model did not start ({self._model_error})")
            return
        self.time_s = current_time + step_size
        try:
            try:
                data = self._binary_input(VIEW_IN)
            except ValueError as exc:
                data = None
                self._log(f"{VIEW_IN}: {exc}")
            result = model.step(data, current_time + step_size, out=self._output.next())
            if result.message:
                self._log(f"t={current_time + step_size:.6f}s: {result.message}")
            self.valid, self.count = result.valid, result.count
            self._publish_buffer(DATA_OUT, self._output, result.sensor_data)
        except Exception:
            self.valid, self.count = False, 0
            self._log(f"do_step failed:\n{traceback.format_exc()}")

    def terminate(self):
        finalize_pythonfmu_before_exit()  # pythonfmu FMUs the master loaded after this instance
        if self._state != STEP:
            self._wrong_state(f"{self.CALL}Terminate", f"in Step Mode, after {self.CALL}ExitInitializationMode")
            return
        self._state = TERMINATED
        self._model = None
        self.valid, self.count = False, 0
        if self._output is not None:
            self._output.clear()
        self._publish_binary(DATA_OUT, 0, 0)  # the buffer it pointed at is gone
