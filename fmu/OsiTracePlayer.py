"""OsiTracePlayer: an FMU that plays an OSI SensorView trace, one SensorView per step on ``OSMPSensorViewOut``.

Each ``fmi2DoStep`` publishes the trace's next SensorView (OSMP: two buffers alternate, so each stays valid until
the start of the second step after it); after the last one it publishes none (size 0), ``valid`` goes false and
one warning says the trace ended. The views' own timestamps are what a sensor model reads; the master's steps only
pace them. ``trace`` names a ``.osi``, ``.osi.xz`` or ``.mcap`` SensorView trace, read by lidar-fmu's trace reader
(``lidar_fmu.osi.trace``): a missing file, another message type or a damaged frame fails the call that finds it
(fmi2Error, the reason logged). Built by ``lidar-fmu build --ssp`` (``lidar_fmu.cosim.ssp``).
"""
import itertools

from lidar_sensor_start import in_resources
from osi_trace_slave import OsiTraceSlave
from pythonfmu.enums import Fmi2Causality, Fmi2Initial, Fmi2Status, Fmi2Variability
from pythonfmu.variables import Boolean, Integer


class OsiTracePlayer(OsiTraceSlave):
    description = "Plays an OSI SensorView trace (.osi, .osi.xz, .mcap): one SensorView per step (OSMP)"
    BINARY = {"OSMPSensorViewOut": ("SensorView", Fmi2Causality.output, Fmi2Variability.discrete, Fmi2Initial.exact)}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.valid = False  # a SensorView was published by the last step
        self.frames = 0  # SensorViews published so far
        self.register_variable(Boolean("valid", causality=Fmi2Causality.output, variability=Fmi2Variability.discrete,
                                       initial=Fmi2Initial.exact, getter=lambda: self.valid))
        self.register_variable(Integer("frames", causality=Fmi2Causality.output,
                                       variability=Fmi2Variability.discrete, initial=Fmi2Initial.exact,
                                       getter=lambda: self.frames))
        self._views = None  # the trace's views, read as the steps ask for them
        self._buffers = None

    def exit_initialization_mode(self):
        try:
            from lidar_fmu.cosim.osmp import DoubleBuffer
            from lidar_fmu.osi.trace import check_message_type, read_trace

            path = in_resources(self.resources, self.trace)
            check_message_type(path, "SensorView")  # a SensorData or GroundTruth trace is refused, named
            views = read_trace(path, "SensorView")  # read as the steps ask; damage further on fails that step
            first = next(views, None)  # the file opens, its first view parses
            if first is None:
                raise ValueError("it holds no SensorView")
            self._views, self._path, self._buffers = itertools.chain([first], views), path, DoubleBuffer()
        except Exception as exc:  # TraceError (a user's file), or a Python without lidar-fmu's dependencies
            self._error(f"OsiTracePlayer cannot play trace {self.trace!r}: {exc}")

    def do_step(self, current_time, step_size):
        if self._buffers is None:
            self._error(f"fmi2DoStep refused: no trace to play ({self.trace!r} could not be opened)")
            return True
        view = None
        if self._views is not None:
            try:
                view = next(self._views, None)
            except Exception as exc:  # TraceError: a damaged frame (the ones before it were played)
                self._views = None
                self._error(f"OsiTracePlayer: {exc}")
            else:
                if view is None:
                    self._views = None
                    self.log(f"the trace {self._path} ended after {self.frames} SensorViews: no SensorView from "
                             f"t={current_time + step_size:g} s on", Fmi2Status.warning, "logStatusWarning")
        if view is None:
            self.valid = False
            self._publish(0, 0)
            return True
        self.valid, self.frames = True, self.frames + 1
        self._publish(*self._buffers.publish(view))
        return True

    def _close(self):
        self._views = None
        self.valid = False
        self._publish(0, 0)
        if self._buffers is not None:
            self._buffers.clear()
