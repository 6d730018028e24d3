"""A ground-truth-only OSI road, as scenario tools describe one (no meshes), for the tests of lidar_fmu.world.

A straight two-lane road along x (−150 … 150 m), from right (y < 0) to left:

    y −5.0   GUARD_RAIL (0.75 m)          boundary 21
             shoulder (NONDRIVING/SHOULDER) lane 11
    y −3.5   SOLID_LINE 0.15 m            boundary 22
             driving lane (+x)            lane 12
    y  0.0   DASHED_LINE 0.12 m           boundary 23   (a point at each dash's start and end: 3 m dashes, 6 m gaps)
             driving lane (−x)            lane 13
    y  3.5   SOLID_LINE 0.15 m            boundary 24
             gutter (NONDRIVING)          lane 14
    y  3.75  CURB 0.15 m                  boundary 25
             sidewalk (NONDRIVING/SIDEWALK) lane 15
    y  6.25  NO_LINE                      boundary 26

and beside it a stop line (road marking 31), a sign (41), a building with an L-shaped base polygon (51), a pole
(52), a tree (53); road users: the host car (1), a car (2), a truck whose model is an ``.osgb`` (3), a motorbike
(4), a bicycle (5), a pedestrian (6). ``with_objects=False`` leaves the road alone (and the host).
"""
from __future__ import annotations

import numpy as np
from osi3.osi_sensorview_pb2 import SensorView

HOST = 1
#: (boundary id, y m, OSI type, width m, height m)
BOUNDARIES = [(21, -5.0, "GUARD_RAIL", 0.0, 0.75), (22, -3.5, "SOLID_LINE", 0.15, 0.0),
              (23, 0.0, "DASHED_LINE", 0.12, 0.0), (24, 3.5, "SOLID_LINE", 0.15, 0.0),
              (25, 3.75, "CURB", 0.0, 0.15), (26, 6.25, "NO_LINE", 0.0, 0.0)]
#: (lane id, type, subtype, left boundary, right boundary)
LANES = [(11, "NONDRIVING", "SHOULDER", 22, 21), (12, "DRIVING", "NORMAL", 23, 22), (13, "DRIVING", "NORMAL", 24, 23),
         (14, "NONDRIVING", "OTHER", 25, 24), (15, "NONDRIVING", "SIDEWALK", 26, 25)]
X0, X1 = -150.0, 150.0
DASH_M, GAP_M = 3.0, 6.0
STOP_LINE = (31, 20.0, -1.75, 0.5, 3.3)  # id, x, y, length (along x), width
SIGN = (41, (30.0, 7.0, 2.2), (0.6, 0.6))  # id, centre, (width, height): facing −x, toward oncoming traffic
#: (id, class, centre, (length, width, height), model_reference)
ROAD_USERS = [(2, "car", (25.0, 1.75, 0.75), (4.6, 1.85, 1.5), ""),
              (3, "heavy_truck", (-30.0, 1.75, 1.8), (9.5, 2.55, 3.6), "Truck.osgb"),
              (4, "motorcycle", (15.0, -1.75, 0.75), (2.2, 0.8, 1.5), ""),
              (5, "bicycle", (12.0, 2.8, 0.9), (1.8, 0.6, 1.8), ""),
              (6, "pedestrian", (8.0, 5.5, 0.9 + 0.15), (0.5, 0.6, 1.8), "")]
_VEHICLE_TYPE = {"car": 4, "heavy_truck": 7, "motorcycle": 10, "bicycle": 11}


def dash_starts() -> np.ndarray:
    return np.arange(X0, X1 - DASH_M, DASH_M + GAP_M)


def road_view(time_s: float = 0.1, host_x: float = 0.0, with_objects: bool = True, dash_states: bool = False,
              mounting_z: float = 1.9, static: bool = True, sidewalk_z: float = 0.0) -> bytes:
    """The road as one SensorView (the host at ``host_x`` in the right lane, a roof lidar ``mounting_z`` above the
    rear axle). ``dash_states``: the dashed line's points carry DASH_START/DASH_END (else only OSI's point rule
    places the dashes). ``static=False``: the moving objects only (as esmini's later messages). ``sidewalk_z``: the
    height of the sidewalk's far line (boundary 26) in its points (a trace that gives the sidewalk's height there)."""
    view = SensorView()
    view.version.version_major, view.version.version_minor = 3, 8
    view.timestamp.seconds, view.timestamp.nanos = int(time_s), int(round((time_s % 1) * 1e9))
    view.host_vehicle_id.value = HOST
    m = view.mounting_position
    m.position.x, m.position.z = 1.4, mounting_z
    gt = view.global_ground_truth
    gt.timestamp.CopyFrom(view.timestamp)
    gt.host_vehicle_id.value = HOST
    if static:
        _static(gt, dash_states, with_objects, sidewalk_z)
    host = gt.moving_object.add()
    host.id.value = HOST
    host.type = host.TYPE_VEHICLE
    host.vehicle_classification.type = 4
    host.base.position.x, host.base.position.y, host.base.position.z = host_x, -1.75, 0.75
    host.base.dimension.length, host.base.dimension.width, host.base.dimension.height = 4.5, 1.8, 1.5
    rear = host.vehicle_attributes.bbcenter_to_rear
    rear.x, rear.z = -1.4, -0.45
    if with_objects:
        for object_id, kind, centre, size, model in ROAD_USERS:
            obj = gt.moving_object.add()
            obj.id.value = object_id
            if kind == "pedestrian":
                obj.type = obj.TYPE_PEDESTRIAN
            else:
                obj.type = obj.TYPE_VEHICLE
                obj.vehicle_classification.type = _VEHICLE_TYPE[kind]
            obj.base.position.x, obj.base.position.y, obj.base.position.z = centre
            obj.base.dimension.length, obj.base.dimension.width, obj.base.dimension.height = size
            obj.model_reference = model
    return view.SerializeToString()


def _static(gt, dash_states: bool, with_objects: bool, sidewalk_z: float = 0.0) -> None:
    for boundary_id, y, kind, width, height in BOUNDARIES:
        b = gt.lane_boundary.add()
        b.id.value = boundary_id
        b.classification.type = b.classification.Type.Value(f"TYPE_{kind}")
        if kind.endswith("_LINE") and kind != "NO_LINE":
            b.classification.color = b.classification.COLOR_WHITE
        if kind == "DASHED_LINE":
            xs = np.column_stack([dash_starts(), dash_starts() + DASH_M]).ravel()
        else:
            xs = np.linspace(X0, X1, 61)
        for k, x in enumerate(xs):
            p = b.boundary_line.add()
            p.position.x, p.position.y = float(x), y
            if boundary_id == 26:
                p.position.z = sidewalk_z
            if k == 0:  # OSI's carry-forward: the first point's width and height hold for the rest
                p.width, p.height = width, height
            if kind == "DASHED_LINE" and dash_states:
                p.dash = p.DASH_START if k % 2 == 0 else p.DASH_END
    for lane_id, kind, subtype, left, right in LANES:
        lane = gt.lane.add()
        lane.id.value = lane_id
        c = lane.classification
        c.type = c.Type.Value(f"TYPE_{kind}")
        c.subtype = c.Subtype.Value(f"SUBTYPE_{subtype}")
        c.left_lane_boundary_id.add().value = left
        c.right_lane_boundary_id.add().value = right
    if not with_objects:
        return
    marking_id, x, y, length, width = STOP_LINE
    marking = gt.road_marking.add()
    marking.id.value = marking_id
    marking.classification.type = marking.classification.TYPE_GENERIC_LINE
    marking.classification.monochrome_color = marking.classification.COLOR_WHITE
    marking.base.position.x, marking.base.position.y = x, y
    marking.base.dimension.length, marking.base.dimension.width = length, width
    sign_id, centre, (width, height) = SIGN
    sign = gt.traffic_sign.add()
    sign.id.value = sign_id
    sign.main_sign.classification.type = sign.main_sign.classification.TYPE_STOP
    base = sign.main_sign.base
    base.position.x, base.position.y, base.position.z = centre
    base.dimension.length, base.dimension.width, base.dimension.height = 0.003, width, height
    base.orientation.yaw = np.pi  # its face toward −x: toward the host coming along +x
    building = gt.stationary_object.add()
    building.id.value = 51
    building.classification.type = building.classification.TYPE_BUILDING
    building.classification.material = building.classification.MATERIAL_CONCRETE
    building.base.position.x, building.base.position.y, building.base.position.z = 50.0, 17.5, 6.0
    building.base.dimension.length, building.base.dimension.width, building.base.dimension.height = 20.0, 15.0, 12.0
    for px, py in ((-10, -7.5), (10, -7.5), (10, 0), (0, 0), (0, 7.5), (-10, 7.5)):  # an L
        corner = building.base.base_polygon.add()
        corner.x, corner.y = px, py
    for object_id, kind, centre, size in ((52, "POLE", (10.0, 6.0, 3.15), (0.2, 0.2, 6.0)),
                                          (53, "TREE", (-20.0, 9.0, 3.65), (4.0, 4.0, 7.0))):
        obj = gt.stationary_object.add()
        obj.id.value = object_id
        obj.classification.type = obj.classification.Type.Value(f"TYPE_{kind}")
        obj.base.position.x, obj.base.position.y, obj.base.position.z = centre
        obj.base.dimension.length, obj.base.dimension.width, obj.base.dimension.height = size


def semantic_probes() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Rays into :func:`road_view`'s road, each at one thing: (origins (N, 3) m, unit directions (N, 3), the semantic
    class each must return). Down from 30 m above, or level toward a kerb's face, a sign's plate, a rail, a bike."""
    down, x_dash = (0.0, 0.0, -1.0), float(dash_starts()[20] + DASH_M / 2)
    probes = [((5.0, -1.75, 30.0), down, "road"), ((x_dash, 0.0, 30.0), down, "lane_marking"),
              ((5.0, -3.5, 30.0), down, "lane_marking"), ((5.0, -4.2, 30.0), down, "road"),
              ((0.0, 5.0, 30.0), down, "sidewalk"), ((0.0, 20.0, 30.0), down, "terrain"),
              ((STOP_LINE[1], STOP_LINE[2], 30.0), down, "lane_marking"),
              ((-20.0, 9.0, 30.0), down, "vegetation"), ((45.0, 12.0, 30.0), down, "building"),
              ((10.0, 6.0, 30.0), down, "pole"), ((25.0, 1.75, 30.0), down, "car"),
              ((8.0, 5.5, 30.0), down, "pedestrian"), ((-30.0, 1.75, 30.0), down, "truck"),
              ((12.0, 2.8, 30.0), down, "bicycle"), ((10.0, -1.75, 0.6), (1.0, 0.0, 0.0), "motorcycle"),
              ((25.0, 7.0, 2.2), (1.0, 0.0, 0.0), "traffic_sign"), ((0.0, 2.0, 0.07), (0.0, 1.0, 0.0), "kerb"),
              ((0.0, -3.0, 0.6), (0.0, -1.0, 0.0), "barrier")]
    origins, directions, classes = zip(*probes)
    return np.array(origins, np.float32), np.array(directions, np.float32), list(classes)
