"""LidarSensor: the lidar-fmu sensor model as an OSMP FMI 2.0 co-simulation slave (pythonfmu 0.7.0).

A thin layer: OSMP Integer triples ↔ bytes ↔ the model. What the FMI 2.0 and FMI 3.0 slaves share — parameters,
the calling sequence, refusals, the model, the configuration handshake, each step — is
:class:`lidar_sensor_slave.OsmpLidarSlave`. pythonfmu 0.7.0 offers a slave no way to return fmi2Error or
fmi2Warning, so the FMU's status shim (``status_shim.c``) returns the status the slave records for each call.
"""
import xml.etree.ElementTree as ET

# the slave's helpers: beside this script in fmu/ and in the FMU's resources/ (which pythonfmu puts on sys.path)
from lidar_sensor_osmp import annotate_fmi2, osmp
from lidar_sensor_slave import CONFIG_REQUEST, OsmpLidarSlave, accessors, osi_version
from pythonfmu import Fmi2Slave
from pythonfmu.default_experiment import DefaultExperiment
from pythonfmu.enums import Fmi2Causality, Fmi2Initial, Fmi2Variability
from pythonfmu.variables import Boolean, Integer, Real, String

#: value reference 0: the status of the last FMI call, for the FMU's status shim (fmu/status_shim.c)
STATUS_VARIABLE = "fmi2_status_of_last_call"


class LidarSensor(OsmpLidarSlave, Fmi2Slave):
    FMI, CALL = "FMI 2.0", "fmi2"
    KINDS = {"string": String, "real": Real, "boolean": Boolean, "integer": Integer}
    CONVERT = {Integer: int, Real: float, Boolean: bool, String: str}
    PLACEHOLDER = {Integer: 0, Real: 0.0, Boolean: False, String: ""}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._setup()
        self._ints = {f"{prefix}.{role}": 0 for prefix in osmp.BINARY_VARIABLES for role in osmp.ROLES}
        self.default_experiment = DefaultExperiment(start_time=0.0, step_size=self._frame_period_s())
        # value reference 0, registered first: read (and reset) after every call by the status shim
        self.register_variable(Integer(STATUS_VARIABLE, causality=Fmi2Causality.local,
                                       variability=Fmi2Variability.discrete, getter=lambda: self._call_status))
        assert self.vars[0].name == STATUS_VARIABLE
        self._register_parameters(Fmi2Causality, Fmi2Variability)
        for prefix, (_, causality, variability, initial) in osmp.BINARY_VARIABLES.items():
            for role in osmp.ROLES:
                self._register_binary(f"{prefix}.{role}", Fmi2Causality[causality], Fmi2Variability[variability],
                                      Fmi2Initial[initial] if initial else None)
        self._register_outputs(Fmi2Causality, Fmi2Variability, Fmi2Initial)

    # -- OSMP binary variables: three Integers each ---------------------------------------------------------
    def _register_binary(self, name, causality, variability, initial):
        def getter(name=name):
            if name.startswith(f"{CONFIG_REQUEST}."):
                self._publish_config_request()
            return self._ints[name]

        def setter(value, name=name):
            self._ints[name] = int(value)

        writable = causality in (Fmi2Causality.input, Fmi2Causality.parameter)
        self.register_variable(Integer(name, causality=causality, variability=variability, initial=initial,
                                       getter=getter, setter=setter if writable else None))

    def _binary_input(self, prefix):
        """The bytes the master's pointer triple ``prefix`` points at now (None: none); ValueError when it cannot
        be read. OSMP (FMI 2.0): a SensorView's pointer is valid until the end of the next fmi2DoStep, a
        configuration's until fmi2ExitInitializationMode returns: read it within those."""
        ints = self._ints
        if not (ints[f"{prefix}.size"] or ints[f"{prefix}.base.lo"] or ints[f"{prefix}.base.hi"]):
            return None
        from lidar_fmu.cosim.osmp import read_buffer

        return read_buffer(osmp.join_address(ints[f"{prefix}.base.lo"], ints[f"{prefix}.base.hi"]),
                           ints[f"{prefix}.size"])

    def _publish_binary(self, prefix, address, size):
        lo, hi = osmp.split_address(address)  # FMI 2.0's Integers: the one place a buffer's address is split
        self._ints[f"{prefix}.base.lo"], self._ints[f"{prefix}.base.hi"], self._ints[f"{prefix}.size"] = lo, hi, size

    # fmi2Get*/fmi2Set*: pythonfmu's own versions raise (→ fmi2Fatal) on an unknown value reference, a
    # wrong type or a variable without a setter; these refuse with a logged reason instead.
    get_integer, set_integer = accessors(Integer)
    get_real, set_real = accessors(Real)
    get_boolean, set_boolean = accessors(Boolean)
    get_string, set_string = accessors(String)

    def _emit(self, message, status, category):
        self.log(message, status, category)

    def to_xml(self, model_options=None):
        from lidar_fmu import __version__

        self.version = __version__  # one version source: lidar_fmu/_version.py (pythonfmu reads this attribute)
        ET.register_namespace("osmp", osmp.OSMP_NS)  # before pythonfmu writes the root element
        return annotate_fmi2(super().to_xml(model_options or {}), self.resources, osi_version())

    def do_step(self, current_time, step_size):
        self._do_step(current_time, step_size)
        return True  # False would be fmi2Discard, which ends the run too; the shim returns the call's status
