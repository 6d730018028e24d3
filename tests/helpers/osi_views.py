"""Build small OSI SensorViews for tests (plain osi3 classes)."""
from __future__ import annotations

from osi3.osi_sensorview_pb2 import SensorView

HOST_ID = 1


def sensor_view(objects, time_s=0.1, host=(HOST_ID, (0.0, 0.0, 0.75), 0.0), mounting=None,
                environment="", host_rear=(-1.4, 0.0, -0.45), host_velocity=None,
                host_orientation_rate=None) -> bytes:
    """objects: iterable of (id, position (x,y,z), (roll,pitch,yaw), (length,width,height), model_reference), each
    optionally followed by its OSI ``base.velocity`` (m/s, world) and ``base.orientation_rate`` ((roll, pitch, yaw)
    rad/s), either None for unset.

    ``host`` = (id, bbox-centre position, yaw) of the ego car (4.5×1.8×1.5 m box), ``host_velocity`` its
    OSI ``base.velocity`` (m/s, world) when given, ``host_orientation_rate`` its ``base.orientation_rate``
    ((roll, pitch, yaw) rad/s) when given;
    ``mounting`` = ((x,y,z), (roll,pitch,yaw)) in the host vehicle frame or None.
    """
    view = SensorView()
    view.version.version_major, view.version.version_minor = 3, 8
    view.timestamp.seconds, view.timestamp.nanos = int(time_s), int(round((time_s % 1) * 1e9))
    gt = view.global_ground_truth
    gt.timestamp.CopyFrom(view.timestamp)
    if environment:
        gt.model_reference = environment
    if host is not None:
        host_id, position, yaw = host
        view.host_vehicle_id.value = host_id
        gt.host_vehicle_id.value = host_id
        objects = [(host_id, position, (0.0, 0.0, yaw), (4.5, 1.8, 1.5), "")] + list(objects)
    if mounting is not None:
        (x, y, z), (roll, pitch, yaw) = mounting
        m = view.mounting_position
        m.position.x, m.position.y, m.position.z = x, y, z
        m.orientation.roll, m.orientation.pitch, m.orientation.yaw = roll, pitch, yaw
    for object_id, position, rpy, dims, model, *rates in objects:
        o = gt.moving_object.add()
        o.id.value = object_id
        o.base.position.x, o.base.position.y, o.base.position.z = position
        o.base.orientation.roll, o.base.orientation.pitch, o.base.orientation.yaw = rpy
        o.base.dimension.length, o.base.dimension.width, o.base.dimension.height = dims
        o.model_reference = model
        velocity, orientation_rate = (list(rates) + [None, None])[:2]
        if velocity is not None:
            o.base.velocity.x, o.base.velocity.y, o.base.velocity.z = velocity
        if orientation_rate is not None:
            o.base.orientation_rate.roll, o.base.orientation_rate.pitch, o.base.orientation_rate.yaw = orientation_rate
        if host is not None and object_id == host[0]:
            rear = o.vehicle_attributes.bbcenter_to_rear
            rear.x, rear.y, rear.z = host_rear
            if host_velocity is not None:
                o.base.velocity.x, o.base.velocity.y, o.base.velocity.z = host_velocity
            if host_orientation_rate is not None:
                rate = o.base.orientation_rate
                rate.roll, rate.pitch, rate.yaw = host_orientation_rate
    return view.SerializeToString()
