"""The moving objects read by the compiled wire walk equal the protobuf decode's, field by field, on crafted views:
fields left unset, submessages repeated (protobuf merges them), numbers an enum does not define, values sent with
the wrong wire type, several ground truths in one view; and views it leaves to the protobuf decode (values that are
not finite) decode as before."""
from __future__ import annotations

import math

import pytest

from lidar_fmu.osi.decode import (
    _moving_objects,
    _moving_objects_at_wire_level,
    decode_sensor_view,
    parse_sensor_view,
    static_parts,
)


def _view():
    from osi3.osi_sensorview_pb2 import SensorView

    view = SensorView()
    view.host_vehicle_id.value = 1
    gt = view.global_ground_truth
    host = gt.moving_object.add()
    host.id.value = 1
    host.type = host.TYPE_VEHICLE
    host.base.position.x, host.base.position.z = 2.0, 0.75
    host.base.dimension.length, host.base.dimension.width, host.base.dimension.height = 4.5, 1.8, 1.5
    host.base.velocity.x = 13.5
    host.vehicle_attributes.bbcenter_to_rear.x = -1.4
    return view


def _protobuf_decode(data: bytes, host_id: int | None = 1):
    return _moving_objects(parse_sensor_view(static_parts(data)[2]).global_ground_truth.moving_object, host_id)


def _crafted() -> bytes:
    view = _view()
    gt = view.global_ground_truth
    bare = gt.moving_object.add()  # nothing but an id: every field left unset
    bare.id.value = 2
    truck = gt.moving_object.add()
    truck.id.value = 2**64 - 1  # OSI's largest id
    truck.type = truck.TYPE_VEHICLE
    truck.vehicle_classification.type = truck.vehicle_classification.TYPE_HEAVY_TRUCK
    truck.base.position.x, truck.base.position.y, truck.base.position.z = -3.25, 1e6, -0.5
    truck.base.orientation.roll, truck.base.orientation.pitch, truck.base.orientation.yaw = 0.01, -0.02, 3.1
    truck.base.dimension.length, truck.base.dimension.width, truck.base.dimension.height = 12.0, 2.5, 3.8
    truck.base.orientation_rate.yaw = 0.3
    truck.model_reference = "trucks/käfer.obj"
    walker = gt.moving_object.add()
    walker.id.value = 4
    walker.type = walker.TYPE_PEDESTRIAN
    walker.base.velocity.SetInParent()  # set, all zero
    walker.vehicle_attributes.radius_wheel = 0.3  # vehicle attributes without bbcenter_to_rear
    vehicle = gt.moving_object.add()
    vehicle.id.value = 5
    vehicle.type = vehicle.TYPE_VEHICLE  # no classification: "vehicle"
    data = view.SerializeToString()
    # a second ground truth merges in: one more object, whose base comes in two parts (merged), whose id is
    # written twice (the last counts), whose type is sent as a double (an unknown field) and then as a number
    # MovingObject.Type does not define (left as it was), and whose classification names a type OSI lacks
    position = b"\x09" + _double(7.5)  # Vector3d.x
    base_1 = b"\x12" + bytes([len(position)]) + position  # BaseMoving.position
    dimension = b"\x09" + _double(4.0) + b"\x11" + _double(2.0) + b"\x19" + _double(1.5)
    base_2 = b"\x0a" + bytes([len(dimension)]) + dimension  # BaseMoving.dimension
    classification = b"\x08\x63"  # VehicleClassification.type 99
    odd = (b"\x0a\x02\x08\x06" + b"\x12" + bytes([len(base_1)]) + base_1 + b"\x0a\x02\x08\x07"
           + b"\x19" + _double(2.0) + b"\x18\x02" + b"\x18\x63" + b"\x12" + bytes([len(base_2)]) + base_2
           + b"\x32" + bytes([len(classification)]) + classification)
    truth = b"\x2a" + bytes([len(odd)]) + odd  # GroundTruth.moving_object
    return data + b"\x3a" + bytes([len(truth)]) + truth  # SensorView.global_ground_truth


def _double(value: float) -> bytes:
    import struct

    return struct.pack("<d", value)


def test_the_wire_walk_reads_what_the_protobuf_decode_reads():
    data = _crafted()
    rest = static_parts(data)[2]
    walked = _moving_objects_at_wire_level(rest)
    assert walked is not None  # the walk read them, not the protobuf decode
    assert (walked[0].states(), walked[1]) == _protobuf_decode(data)
    assert [walked[0].state(k) for k in range(len(walked[0]))] == _protobuf_decode(data)[0]
    odd = walked[0].states()[-1]
    assert (odd.id, odd.position_m, odd.dimension_m, odd.object_class) == (7, (7.5, 0.0, 0.0), (4.0, 2.0, 1.5),
                                                                            "vehicle")
    assert [o.id for o in decode_sensor_view(data).objects] == [1, 2, 2**64 - 1, 4, 5, 7]


def test_a_view_without_moving_objects_reads_none():
    view = _view()
    del view.global_ground_truth.moving_object[:]
    data = view.SerializeToString()
    walked = _moving_objects_at_wire_level(data)
    assert walked is not None and (walked[0].states(), walked[1]) == ([], []) == _protobuf_decode(data)


@pytest.mark.parametrize("where", ["position", "velocity", "dimension", "host dimension"])
def test_values_that_are_not_finite_are_left_to_the_protobuf_decode(where):
    """The protobuf decode names the object and the field (and leaves out only an object whose size is not
    finite): the walk hands such views to it."""
    view = _view()
    car = view.global_ground_truth.moving_object.add()
    car.id.value = 9
    car.base.dimension.length = car.base.dimension.width = car.base.dimension.height = 1.0
    target = {"position": car.base.position, "velocity": car.base.velocity, "dimension": car.base.dimension,
              "host dimension": view.global_ground_truth.moving_object[0].base.dimension}[where]
    setattr(target, "height" if "dimension" in where else "z", math.nan)
    data = view.SerializeToString()
    assert _moving_objects_at_wire_level(static_parts(data)[2]) is None
    if where == "dimension":  # only that object is lost
        frame = decode_sensor_view(data)
        assert [o.id for o in frame.objects] == [1] and frame.left_out[0][0] == 9
    else:
        with pytest.raises(ValueError, match="NaN"):
            decode_sensor_view(data)


def test_a_model_reference_that_is_not_utf8_is_left_to_the_protobuf_decode():
    data = _view().SerializeToString()
    car = b"\x0a\x02\x08\x09" + b"\x3a\x02\xff\xfe"  # id 9, model_reference: two bytes that are no UTF-8
    truth = b"\x2a" + bytes([len(car)]) + car
    data += b"\x3a" + bytes([len(truth)]) + truth
    assert _moving_objects_at_wire_level(static_parts(data)[2]) is None
    assert decode_sensor_view(data).objects == _protobuf_decode(data)[0]
