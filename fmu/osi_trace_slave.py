"""What the small OSI FMUs around the lidar (``OsiTracePlayer.py``, ``OsiTraceWriter.py``, ``OsiSensorDataView.py``)
share: their OSMP binary variables, a ``trace`` file parameter where they read or write one, their start values from
``resources/`` and fmi2Error through the status shim.

They are the small FMUs ``lidar-fmu build --ssp`` puts around the lidar FMU in an SSP system
(``lidar_fmu.cosim.ssp``): a player that sends a SensorView trace's views one per step, a writer that records the
SensorData it is given, and a view that passes on the SensorView a SensorData carries. Each carries the
``lidar_fmu`` package as the lidar FMU does and imports it from the same per-user copy (``lidar_sensor_package``),
so all the FMUs of a system run one ``lidar_fmu``: its trace reader (``lidar_fmu.osi.trace``), writers and OSMP
buffers. A refused call (a trace that cannot be read or written) is
logged at error level and answered fmi2Error by the FMU's status shim (``status_shim.c``, which reads value
reference 0 after each call, as for the lidar FMU); the instance stays usable.
"""
import traceback

from lidar_sensor_exit import finalize_pythonfmu_before_exit
from lidar_sensor_osmp import annotate_fmi2, osmp
from lidar_sensor_package import use_cached_package
from lidar_sensor_slave import osi_version
from lidar_sensor_start import apply_start_values, start_values
from pythonfmu import Fmi2Slave
from pythonfmu.default_experiment import DefaultExperiment
from pythonfmu.enums import Fmi2Causality, Fmi2Status, Fmi2Variability
from pythonfmu.variables import Integer, String

#: value reference 0: the worst status of the last FMI call, read (and reset) by the status shim after each call
STATUS_VARIABLE = "fmi2_status_of_last_call"


class OsiTraceSlave(Fmi2Slave):
    """An FMU with OSMP binary variables (:attr:`BINARY`) and a ``trace`` file (:attr:`TRACE`); subclasses do the
    stepping."""

    author = "lidar-fmu"
    license = "MPL-2.0"
    #: the FMU's OSMP binary variables: prefix → (OSI type, causality, variability, initial), as lidar_sensor_osmp
    BINARY: dict = {}
    #: whether it has the ``trace`` parameter (a file it plays or writes)
    TRACE = True

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        finalize_pythonfmu_before_exit()
        use_cached_package(self.resources)
        self.trace = ""  # the trace file; a relative name is looked up from the working directory, then resources/
        apply_start_values(self, self.resources)
        experiment = start_values(self.resources).get("default_experiment")
        if experiment:
            self.default_experiment = DefaultExperiment(**experiment)
        self._call_status = int(Fmi2Status.ok)
        self.register_variable(Integer(STATUS_VARIABLE, causality=Fmi2Causality.local,
                                       variability=Fmi2Variability.discrete, getter=lambda: self._call_status))
        if self.TRACE:
            self.register_variable(String("trace", causality=Fmi2Causality.parameter,
                                          variability=Fmi2Variability.fixed, getter=lambda: self.trace,
                                          setter=self._set_trace))
        self._ints = {prefix: dict.fromkeys(osmp.ROLES, 0) for prefix in self.BINARY}
        for prefix, (_, causality, variability, initial) in self.BINARY.items():
            ints = self._ints[prefix]
            for role in osmp.ROLES:
                self.register_variable(Integer(
                    f"{prefix}.{role}", causality=causality, variability=variability, initial=initial,
                    getter=lambda role=role, ints=ints: ints[role],
                    setter=(lambda value, role=role, ints=ints: ints.__setitem__(role, int(value)))
                    if causality == Fmi2Causality.input else None))

    def _set_trace(self, value):
        self.trace = str(value)

    def to_xml(self, model_options=None):
        import xml.etree.ElementTree as ET

        from lidar_fmu import __version__

        self.version = __version__
        ET.register_namespace("osmp", osmp.OSMP_NS)  # before pythonfmu writes the root element
        return annotate_fmi2(super().to_xml(model_options or {}), self.resources, osi_version(), self.BINARY)

    # -- the status shim's protocol ----------------------------------------------------------------------
    def get_integer(self, vrs):
        if list(vrs) == [0]:  # the status shim's read after each call: it takes the status
            status, self._call_status = self._call_status, int(Fmi2Status.ok)
            return [status]
        return super().get_integer(vrs)

    def _error(self, message):
        """This call fails: logged at error level, answered fmi2Error (through the status shim)."""
        self._call_status = int(Fmi2Status.error)
        self.log(message, Fmi2Status.error, "logStatusError")

    def _failed(self, what):
        """An exception in ``what``: a bug, logged with its traceback as this call's error."""
        self._error(f"{what} failed:\n{traceback.format_exc()}")

    def terminate(self):
        finalize_pythonfmu_before_exit()  # pythonfmu FMUs the master loaded after this instance
        self._close()

    def _close(self):
        """What fmi2Terminate ends (the subclass's)."""

    # -- the binary variables -------------------------------------------------------------------------------
    def _binary(self, prefix=None):
        """(address, size) of the binary variable ``prefix`` (default: the only one)."""
        (ints,) = self._ints.values() if prefix is None else (self._ints[prefix],)
        return osmp.join_address(ints["base.lo"], ints["base.hi"]), ints["size"]

    def _publish(self, address, size, prefix=None):
        """Point the output binary variable ``prefix`` (default: the only one) at ``size`` bytes at ``address``."""
        (ints,) = self._ints.values() if prefix is None else (self._ints[prefix],)
        lo, hi = osmp.split_address(address)  # FMI 2.0's Integers: the one place a buffer's address is split
        ints["base.lo"], ints["base.hi"], ints["size"] = lo, hi, size
