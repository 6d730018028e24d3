"""OsiSensorDataView: an FMU that passes on the SensorView a SensorData carries, from ``OSMPSensorDataIn`` to
``OSMPSensorViewOut``.

The lidar FMU with ``outputs`` holding ``reflections`` writes each lidar's SensorView, its reflections and their
view configuration, into the SensorData (``sensor_view[k]``, docs/fmu.md#osi-layers). A reflection-based sensor
model reads them from a SensorView (OSMP's sensor model input: openMSL's sl-1-2 and sl-1-5 take
``OSMPSensorViewIn``), so this FMU sits between the two: each ``fmi2DoStep`` publishes the first ``sensor_view`` of
the SensorData it gets, double-buffered as OSMP asks. A step without input (address 0 or size 0: a master that
passes outputs on a step later) publishes none; a SensorData without a ``sensor_view`` (the lidar's outputs leave
reflections out, or it had no SensorView yet) publishes none and logs a warning; bytes that are no SensorData fail
the step (fmi2Error, the reason logged). Built by ``lidar-fmu build --ssp --then FMU`` (``lidar_fmu.cosim.ssp``).
"""
from osi_trace_slave import OsiTraceSlave
from pythonfmu.enums import Fmi2Causality, Fmi2Initial, Fmi2Status, Fmi2Variability
from pythonfmu.variables import Integer


class OsiSensorDataView(OsiTraceSlave):
    description = "Passes on the SensorView a SensorData carries (its first sensor_view): OSMP SensorData → SensorView"
    BINARY = {"OSMPSensorDataIn": ("SensorData", Fmi2Causality.input, Fmi2Variability.discrete, None),
              "OSMPSensorViewOut": ("SensorView", Fmi2Causality.output, Fmi2Variability.discrete, Fmi2Initial.exact)}
    TRACE = False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.frames = 0  # SensorViews passed on so far
        self.register_variable(Integer("frames", causality=Fmi2Causality.output,
                                       variability=Fmi2Variability.discrete, initial=Fmi2Initial.exact,
                                       getter=lambda: self.frames))
        self._buffers = None

    def exit_initialization_mode(self):
        from lidar_fmu.cosim.osmp import DoubleBuffer

        self._buffers = DoubleBuffer()

    def do_step(self, current_time, step_size):
        from lidar_fmu.cosim.osmp import read_buffer

        self._publish(0, 0, "OSMPSensorViewOut")  # until this step has a view to pass on
        try:
            data = read_buffer(*self._binary("OSMPSensorDataIn"))
        except ValueError as exc:  # a negative size
            self._error(f"OSMPSensorDataIn: {exc}")
            return True
        if not data:
            return True
        from google.protobuf.message import DecodeError
        from osi3.osi_sensordata_pb2 import SensorData

        try:
            views = SensorData.FromString(data).sensor_view
        except DecodeError as exc:
            self._error(f"OSMPSensorDataIn at t={current_time:g} s: {len(data)} bytes that are no SensorData ({exc})")
            return True
        if not views:
            self.log(f"OSMPSensorDataIn at t={current_time:g} s carries no sensor_view: no SensorView passed on (the "
                     f"lidar's outputs must hold reflections)", Fmi2Status.warning, "logStatusWarning")
            return True
        self.frames += 1
        self._publish(*self._buffers.publish(views[0].SerializeToString()), "OSMPSensorViewOut")
        return True

    def _close(self):
        self._publish(0, 0, "OSMPSensorViewOut")
        if self._buffers is not None:
            self._buffers.clear()
