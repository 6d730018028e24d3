"""Drive LidarSensor.fmu through FMPy exactly as a master does: OSMP binary variables, FMI calls.

    with FmuInstance("dist/LidarSensor.fmu", {"sensor": "velodyne_vlp16"}) as fmu:
        out = fmu.step(sensor_view_bytes, time_s, step_s)

FMI 2.0: the SensorView goes in as a buffer address split into ``.base.lo``/``.base.hi``
plus ``.size``; the SensorData comes back the same way and is copied out
before the next step. FMI 3.0 (the model description says which): both are
Binary variables, set and got with fmi3SetBinary / fmi3GetBinary.

The OSMP configuration handshake: ``configure`` is a master's answer to the
model's ``OSMPSensorViewInConfigRequest`` (its bytes in, the
``OSMPSensorViewInConfig`` to set out, or None for none), called in
Initialization Mode after the parameters are set.
"""
from __future__ import annotations

import contextlib
import ctypes
import shutil
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from .osmp_variables import ROLES, join_address, split_address

_STATUS = ["OK", "WARNING", "DISCARD", "ERROR", "FATAL", "PENDING"]


@dataclass
class FMUOutput:
    sensor_data: bytes
    valid: bool
    count: int


class FmuInstance:
    def __init__(self, fmu_path, parameters: dict | None = None, instance_name: str = "lidar",
                 unzip_dir: str | None = None, echo_log: bool = False, initialize: bool = True,
                 logging_on: bool = True, configure: Callable[[bytes], bytes | None] | None = None):
        """``initialize=False`` stops after instantiating (drive the FMI states through ``.fmu``);
        ``logging_on``: the instantiation's ``loggingOn`` (off, the FMU logs its errors only); ``configure``: the
        configuration handshake's answer (module doc)."""
        # The installed pythonfmu first: a pythonfmu FMU run in this process puts its resources/ (which carry a
        # copy of pythonfmu's Python package, without the binaries) in front of sys.path, so a later
        # `import pythonfmu.builder` (lidar_fmu.cosim.fmu_package) would find no binaries and build an FMU without any.
        import pythonfmu.builder  # noqa: F401
        import pythonfmu3.builder  # noqa: F401  (the same for an FMI 3.0 FMU's copy of pythonfmu3)
        from fmpy import extract, read_model_description

        self.messages: list[tuple[str, str]] = []  # (status, message) from the FMI logger
        self._echo = echo_log
        self._terminated = True  # nothing to terminate until instantiated
        self._input: ctypes.Array[ctypes.c_char] | None = None
        self.configure = configure
        self.description = read_model_description(str(fmu_path))
        #: 3 for an FMI 3.0 FMU (OSMP's Binary variables), else 2
        self.fmi_version = 3 if str(self.description.fmiVersion).startswith("3") else 2
        self.vr = {v.name: v for v in self.description.modelVariables}
        #: removes the folder this instance unpacked the FMU into (none when ``unzip_dir`` was given: the caller's)
        #: at close(), or when the instance is collected or the interpreter exits, whichever comes first
        self._unpacked = None
        if unzip_dir:
            self.unzip_dir = unzip_dir
        else:
            self.unzip_dir = extract(str(fmu_path))
            self._unpacked = weakref.finalize(self, shutil.rmtree, self.unzip_dir, ignore_errors=True)
        try:
            self._instantiate(instance_name, logging_on)
            self._terminated = False
            if initialize:
                self.initialize(parameters)
        except BaseException:  # a refused instantiation or initialization, Ctrl-C: nothing stays behind
            with contextlib.suppress(Exception):  # the error that got here is the one to see
                self.close()
            raise

    def _instantiate(self, instance_name: str, logging_on: bool) -> None:
        identifier = self.description.coSimulation.modelIdentifier
        if self.fmi_version == 3:
            from fmpy.fmi3 import FMU3Slave

            self.fmu = FMU3Slave(guid=self.description.guid, unzipDirectory=self.unzip_dir,
                                 modelIdentifier=identifier, instanceName=instance_name)
            self.fmu.instantiate(loggingOn=logging_on,
                                 logMessage=lambda env, status, category, message: self._log(status, message))
            return
        from fmpy.fmi2 import FMU2Slave, defaultCallbacks, fmi2CallbackFunctions, fmi2CallbackLoggerTYPE

        self.fmu = FMU2Slave(guid=self.description.guid, unzipDirectory=self.unzip_dir, modelIdentifier=identifier,
                             instanceName=instance_name)
        self._callbacks = fmi2CallbackFunctions()
        # keep a reference: C holds the pointer
        self._logger = fmi2CallbackLoggerTYPE(lambda c, i, status, category, message: self._log(status, message))
        self._callbacks.logger = self._logger
        self._callbacks.allocateMemory = defaultCallbacks.allocateMemory
        self._callbacks.freeMemory = defaultCallbacks.freeMemory
        self.fmu.instantiate(callbacks=self._callbacks, loggingOn=logging_on)

    def initialize(self, parameters: dict | None = None) -> None:
        """Enter Initialization Mode, set ``parameters``, answer the configuration request (``configure``), exit
        Initialization Mode."""
        if self.fmi_version == 3:
            self.fmu.enterInitializationMode(startTime=0.0)
        else:
            self.fmu.setupExperiment(startTime=0.0)
            self.fmu.enterInitializationMode()
        for name, value in (parameters or {}).items():
            self.set(name, value)
        if self.configure is not None:
            config = self.configure(self.config_request())
            if config is not None:
                self.set_binary("OSMPSensorViewInConfig", config)
        self.fmu.exitInitializationMode()

    def _log(self, status, message):
        text = message.decode("utf-8", "replace") if message else ""
        self.messages.append((_STATUS[status] if 0 <= status < len(_STATUS) else str(status), text))
        if self._echo:
            print(f"[{self.messages[-1][0]}] {text}")

    @property
    def default_step_s(self) -> float:
        experiment = self.description.defaultExperiment
        return float(experiment.stepSize) if experiment and experiment.stepSize else 0.1

    def set(self, name: str, value) -> None:
        variable = self.vr.get(name)
        if variable is None:
            raise KeyError(f"the FMU has no variable {name!r}")
        ref = [variable.valueReference]
        setters = {"String": (self.fmu.setString, str), "Real": (getattr(self.fmu, "setReal", None), float),
                   "Float64": (getattr(self.fmu, "setFloat64", None), float), "Boolean": (self.fmu.setBoolean, bool),
                   "Integer": (getattr(self.fmu, "setInteger", None), int),
                   "Int32": (getattr(self.fmu, "setInt32", None), int)}
        setter, convert = setters.get(variable.type, (None, None))
        if setter is None or convert is None:
            raise TypeError(f"cannot set {variable.type} variable {name!r}")
        setter(ref, [convert(value)])

    def get_binary(self, prefix: str) -> bytes:
        """Copy the bytes an OSMP binary output holds."""
        if self.fmi_version == 3:
            return self.fmu.getBinary([self.vr[prefix].valueReference])[0] or b""
        lo, hi, size = self.fmu.getInteger([self.vr[f"{prefix}.{r}"].valueReference for r in ROLES])
        address = join_address(lo, hi)
        return ctypes.string_at(address, size) if address and size > 0 else b""

    def set_binary(self, prefix: str, data: bytes | None, address: int | None = None) -> None:
        """Set an OSMP input to ``data``: FMI 2.0, point it at ``data`` (kept alive until the next call; ``address``
        overrides for tests); FMI 3.0, fmi3SetBinary (the FMU copies it)."""
        if self.fmi_version == 3:
            self.fmu.setBinary([self.vr[prefix].valueReference], [bytes(data or b"")])
            return
        if address is None:
            self._input = ctypes.create_string_buffer(data, len(data)) if data else None
            address = ctypes.addressof(self._input) if self._input is not None else 0
        lo, hi = split_address(address)
        size = len(data) if data else 0
        self.fmu.setInteger([self.vr[f"{prefix}.{r}"].valueReference for r in ROLES], [lo, hi, size])

    def config_request(self) -> bytes:
        return self.get_binary("OSMPSensorViewInConfigRequest")

    def step(self, sensor_view: bytes | None, time_s: float, step_s: float | None = None) -> FMUOutput:
        """Point the input at ``sensor_view``, do one step from ``time_s``, copy the outputs."""
        self.set_binary("OSMPSensorViewIn", sensor_view)
        self.fmu.doStep(time_s, step_s if step_s is not None else self.default_step_s)
        return self.outputs()

    def outputs(self) -> FMUOutput:
        valid = bool(self.fmu.getBoolean([self.vr["valid"].valueReference])[0])
        get_count = self.fmu.getInt32 if self.fmi_version == 3 else self.fmu.getInteger
        count = int(get_count([self.vr["count"].valueReference])[0])
        return FMUOutput(self.get_binary("OSMPSensorDataOut"), valid, count)

    def close(self) -> None:
        """Terminate and free the instance, and remove the folder it unpacked the FMU into; idempotent."""
        from fmpy.fmi1 import FMICallException

        try:
            if not self._terminated:
                self._terminated = True
                try:
                    # refused (logged) where the instance was never initialized or is terminated already: FMI
                    # frees an instance in any state
                    with contextlib.suppress(FMICallException):
                        self.fmu.terminate()
                finally:
                    self.fmu.freeInstance()
        finally:
            if self._unpacked is not None:
                self._unpacked()  # (the library stays mapped: removing its file does not unload it)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
