"""LidarSensor: the lidar-fmu sensor model as an OSMP FMI 3.0 co-simulation slave (pythonfmu3).

A thin layer: OSMP's FMI 3.0 Binary variables ↔ bytes ↔ the model. What the FMI 2.0 and FMI 3.0 slaves share —
parameters, the calling sequence, refusals, the model, the configuration handshake, each step — is
:class:`lidar_sensor_slave.OsmpLidarSlave`. Its model identifier is ``LidarSensor``, as the FMI 2.0 FMU's; the
script has a name of its own so that one process can import both slaves (all Python FMUs share one interpreter).

pythonfmu3 (0.3.4) has no Binary variables (its binary answers fmi3GetBinary/fmi3SetBinary "not implemented") and
lets a slave return a status from fmi3DoStep only. The FMU's binary is our status shim (``status_shim3.c``) in
front of pythonfmu3's: it answers fmi3GetBinary/fmi3SetBinary by passing each value's address and size through
pythonfmu3's fmi3GetUInt64/fmi3SetUInt64 on the Binary's value reference with the top bit set
(:data:`BINARY_CHANNEL`, below; no variable has such a value reference), and returns the status the slave recorded
for each call (value reference 0). FMI 3.0 (section 2.2.6.2): a binary set is copied during the call; one got is
the FMU's memory, valid until the FMU's next call — the outputs stay valid longer, as OSMP's FMI 2.0 rules ask.
The model description's Binary variables and OSMP annotations are written by :func:`annotate_fmi3`.
"""
import ctypes
import xml.etree.ElementTree as ET

from lidar_sensor_osmp import annotate_fmi3, osmp
from lidar_sensor_slave import CONFIG_REQUEST, OsmpLidarSlave, accessors, osi_version
from pythonfmu3 import Fmi3Slave
from pythonfmu3.default_experiment import DefaultExperiment
from pythonfmu3.enums import Fmi3Causality, Fmi3Initial, Fmi3Status, Fmi3Variability
from pythonfmu3.fmi3slave import Fmi3StepResult
from pythonfmu3.variables import Boolean, Float64, Int32, Int64, ModelVariable, String, UInt64

#: value reference 0: the status of the last FMI call, for the FMU's status shim (fmu/status_shim3.c)
STATUS_VARIABLE = "fmi3_status_of_last_call"
#: the status shim reads and writes Binary variable ``vr`` as (address, size) through fmi3Get/SetUInt64 on
#: ``vr | BINARY_CHANNEL`` (pythonfmu3 passes value references on as signed ints: it arrives negative)
BINARY_CHANNEL = 1 << 31


class Binary(ModelVariable):
    """An FMI 3.0 Binary variable; its value is (address, size) of the bytes. pythonfmu3 writes the model
    description without it (it has no start values of this type): :func:`annotate_fmi3` writes it."""

    def __init__(self, name, **kwargs):
        super().__init__(name, **kwargs)
        self._type = "Binary"


class LidarSensor(OsmpLidarSlave, Fmi3Slave):
    FMI, CALL = "FMI 3.0", "fmi3"
    KINDS = {"string": String, "real": Float64, "boolean": Boolean, "integer": Int32}
    CONVERT = {Int32: int, Float64: float, Boolean: bool, String: str, Binary: tuple}
    # Int64, UInt64: no variable has these types; a master's call is refused by type or value reference
    PLACEHOLDER = {Int32: 0, Float64: 0.0, Boolean: False, String: "", Binary: (0, 0), Int64: 0, UInt64: 0}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.author, self.description, self.license = (OsmpLidarSlave.author, OsmpLidarSlave.description,
                                                        OsmpLidarSlave.license)  # pythonfmu3 set them to None
        self._setup()
        self._binaries = {prefix: (0, 0) for prefix in osmp.BINARY_VARIABLES}  # outputs: (address, size) published
        self._inputs = {prefix: None for prefix in osmp.BINARY_VARIABLES}  # inputs: a copy of what the master set
        self.default_experiment = DefaultExperiment(start_time=0.0, step_size=self._frame_period_s())
        # value reference 0, registered first: read (and reset) after every call by the status shim
        self.register_variable(Int32(STATUS_VARIABLE, causality=Fmi3Causality.local,
                                     variability=Fmi3Variability.discrete, getter=lambda: self._call_status))
        assert self.vars[0].name == STATUS_VARIABLE
        # FMI 3.0 asks for exactly one independent variable: time, where the last step ended
        self.register_variable(Float64("time", causality=Fmi3Causality.independent,
                                       variability=Fmi3Variability.continuous, getter=lambda: self.time_s))
        self._register_parameters(Fmi3Causality, Fmi3Variability)
        for prefix, (_, causality, variability, initial) in osmp.BINARY_VARIABLES.items():
            self._register_binary(prefix, Fmi3Causality[causality], Fmi3Variability[variability],
                                  Fmi3Initial[initial] if initial else None)
        self._register_outputs(Fmi3Causality, Fmi3Variability, Fmi3Initial)

    # -- OSMP binary variables: one Binary each ---------------------------------------------------------------
    def _register_binary(self, prefix, causality, variability, initial):
        writable = causality in (Fmi3Causality.input, Fmi3Causality.parameter)

        def getter():
            if prefix == CONFIG_REQUEST:
                self._publish_config_request()
            if writable:  # what the master set
                copy = self._inputs[prefix]
                return (ctypes.addressof(copy), len(copy)) if copy is not None else (0, 0)
            return self._binaries[prefix]

        def setter(value):
            address, size = value
            # FMI 3.0: the bytes are the master's only during this call; an empty binary is "no data" (OSMP)
            copy = None
            if address and size > 0:
                copy = ctypes.create_string_buffer(size)
                ctypes.memmove(copy, address, size)
            self._inputs[prefix] = copy

        self.register_variable(Binary(prefix, causality=causality, variability=variability, initial=initial,
                                      getter=getter, setter=setter if writable else None))

    def _binary_input(self, prefix):
        copy = self._inputs[prefix]
        return None if copy is None else copy.raw

    def _publish_binary(self, prefix, address, size):
        self._binaries[prefix] = (address, size)

    def _channel(self, vrs):
        """The shim's Binary reads and writes: value references as pythonfmu3 passes them → Binary ones (None: a
        master's own fmi3Get/SetUInt64, which the shim lets through only without the top bit)."""
        vrs = list(vrs)
        if vrs and all(vr < 0 for vr in vrs):  # vr | 2³¹ as a signed int
            return [vr + BINARY_CHANNEL for vr in vrs]
        return None

    def get_uint64(self, vrs):
        binaries = self._channel(vrs)
        if binaries is None:  # no UInt64 variables here: a master's call is refused by type or reference
            return [ctypes.c_uint64(value) for value in self._get(UInt64, vrs)]
        pairs = self._get(Binary, binaries)
        return [ctypes.c_uint64(int(part)) for pair in pairs for part in pair]

    def set_uint64(self, vrs, values):
        binaries = self._channel(vrs)
        if binaries is None:
            self._set(UInt64, vrs, values)
            return
        values = list(values)
        self._set(Binary, binaries, [tuple(values[2 * k:2 * k + 2]) for k in range(len(binaries))])

    # fmi3Get*/fmi3Set*: pythonfmu3's own versions raise (→ fmi3Fatal) on an unknown value reference, a wrong
    # type or a variable without a setter; these refuse with a logged reason instead (no Int64 variables: refused)
    get_int32, set_int32 = accessors(Int32)
    get_float64, set_float64 = accessors(Float64)
    get_boolean, set_boolean = accessors(Boolean)
    get_string, set_string = accessors(String)
    get_int64, set_int64 = accessors(Int64)

    def _emit(self, message, status, category):
        # errors reach the master always, the rest while its debug logging is on (as the FMI 2.0 FMU's shim does)
        self.log(message, Fmi3Status(status), category, debug=status < Fmi3Status.error)

    def to_xml(self, model_options=None):
        from lidar_fmu import __version__

        self.version = __version__  # one version source: lidar_fmu/_version.py
        ET.register_namespace("osmp", osmp.OSMP_NS)
        binaries = {vr: var for vr, var in self.vars.items() if isinstance(var, Binary)}
        for vr in binaries:  # pythonfmu3 would ask each for a start value of a type it does not know
            del self.vars[vr]
        try:
            root = super().to_xml(model_options or {})
        finally:
            self.vars.update(binaries)
            self.vars = type(self.vars)(sorted(self.vars.items()))
        return annotate_fmi3(root, {var.name: vr for vr, var in binaries.items()}, self.resources, osi_version())

    def do_step(self, current_time, step_size):
        self._do_step(current_time, step_size)
        # pythonfmu3 returns this status itself: taken here, so that the shim's read after the call finds none
        return Fmi3StepResult(status=Fmi3Status(self._take_call_status()))
