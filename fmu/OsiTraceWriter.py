"""OsiTraceWriter: an FMU that writes the SensorData it gets on ``OSMPSensorDataIn`` to an OSI trace.

``trace`` names the file it writes (``.osi``, ``.osi.xz`` or ``.mcap``, by its ending; a relative name is relative
to the master's working directory), opened in ``fmi2ExitInitializationMode`` and closed in ``fmi2Terminate``. Each
``fmi2DoStep`` whose input points at a buffer appends that SensorData as it is, valid or not; a step without one
(address 0 or size 0: nothing connected yet, a master that passes outputs on a step later) appends nothing.
``frames`` counts what was written. A file that cannot be written, or an input that cannot be read, fails the call
that finds it (fmi2Error, the reason logged). Built by ``lidar-fmu build --ssp`` (``lidar_fmu.cosim.ssp``).
"""
from osi_trace_slave import OsiTraceSlave
from pythonfmu.enums import Fmi2Causality, Fmi2Initial, Fmi2Variability
from pythonfmu.variables import Integer


class OsiTraceWriter(OsiTraceSlave):
    description = "Writes the OSI SensorData it is given (OSMP) to a trace (.osi, .osi.xz, .mcap)"
    BINARY = {"OSMPSensorDataIn": ("SensorData", Fmi2Causality.input, Fmi2Variability.discrete, None)}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.frames = 0  # SensorData written so far
        self.register_variable(Integer("frames", causality=Fmi2Causality.output,
                                       variability=Fmi2Variability.discrete, initial=Fmi2Initial.exact,
                                       getter=lambda: self.frames))
        self._writer = None

    def exit_initialization_mode(self):
        try:
            from lidar_fmu.osi.mcap import open_sensor_data_trace

            self._writer = open_sensor_data_trace(self.trace, description="lidar-fmu OsiTraceWriter")
        except Exception as exc:  # TraceError, OSError (no such folder, not writable), or missing dependencies
            self._error(f"OsiTraceWriter cannot write trace {self.trace!r}: {exc}")

    def do_step(self, current_time, step_size):
        if self._writer is None:
            self._error(f"fmi2DoStep refused: no trace to write ({self.trace!r} could not be opened)")
            return True
        try:
            from lidar_fmu.cosim.osmp import read_buffer

            data = read_buffer(*self._binary())
        except ValueError as exc:  # a negative size
            self._error(f"OSMPSensorDataIn: {exc}")
            return True
        if data:
            try:
                self._writer.write(data)
            except Exception as exc:  # a full disk; a message the MCAP writer cannot parse as SensorData
                self._error(f"OsiTraceWriter: writing SensorData {self.frames} to {self.trace!r} failed: {exc}")
                return True
            self.frames += 1
        return True

    def _close(self):
        if self._writer is not None:
            writer, self._writer = self._writer, None
            try:
                writer.close()
            except Exception:
                self._failed(f"closing {self.trace!r}")
