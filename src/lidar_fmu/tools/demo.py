"""The built-in demo scenario: the generated street with traffic, as a real OSI SensorView trace.

:func:`make_demo_scenario` writes ``scenario.yaml``, the meshes (street and
car models, referenced by ``model_reference``) and a SensorView trace in
which the host car drives down the street with a roof lidar while other cars
drive, oncoming and ahead, past the parked ones. Deterministic for a seed.
"""
from __future__ import annotations

import json
import os
import shutil

import numpy as np

from ..osi.trace import TraceWriter, trace_name
from ..physics.materials import packaged_map_path
from .demo_scene import (
    CROSSING_HALF_LENGTH_M,
    CURB_HEIGHT_M,
    CURB_WIDTH_M,
    DRIVING_HALF_WIDTH_M,
    LANE_WIDTH_M,
    ROAD_HALF_WIDTH_M,
    SIDEWALK_SLAB_OUTER_M,
    STREET_HALF_LENGTH_M,
    ensure_street,
)

# The stages a command needs are imported inside the functions that run it: `lidar-fmu` starts, and each
# command runs, without loading what it does not use (numba kernels, osi3, the FMU).

HOST_ID = 1
#: Parked cars keep their layout ids shifted past the driving cars' ids.
PARKED_ID_OFFSET = 100
#: Roof mount in the host's vehicle frame (rear-axle centre, ISO 8855), m.
MOUNTING_POSITION_M = (1.35, 0.0, 1.40)
SCENARIO_FILE = "scenario.yaml"


def _traffic():
    """(id, model, start x m, lane y m, speed m/s, yaw rad) of the driving cars."""
    right = -0.5 * LANE_WIDTH_M  # lanes driving +x are at negative y (right-hand traffic)
    return [
        (HOST_ID, "car_sedan.obj", -60.0, right, 8.0, 0.0),
        (2, "car_suv.obj", -42.0, right, 8.5, 0.0),
        (3, "car_van.obj", 40.0, -right, -9.0, np.pi),
        (4, "car_sedan.obj", 75.0, -3 * right, -11.0, np.pi),
        (5, "car_suv.obj", -75.0, 3 * right, 12.0, 0.0),
    ]


#: OSI vehicle class of each demo car model (osi_object.proto, MovingObject.VehicleClassification.Type, OSI 3.8:
#: TYPE_CAR covers hatchbacks, sedans and SUVs; TYPE_VAN has a larger cargo area, roughly UNECE M2/N1). OSI
#: requires a classification on every TYPE_VEHICLE object.
_VEHICLE_CLASS = {"car_sedan.obj": "TYPE_CAR", "car_suv.obj": "TYPE_CAR", "car_hatchback.obj": "TYPE_CAR",
                  "car_van.obj": "TYPE_VAN"}


def _fill_object(obj, object_id, dims, position, yaw, speed, model, rear_offset):
    obj.id.value = object_id
    obj.base.dimension.length, obj.base.dimension.width, obj.base.dimension.height = dims
    obj.base.position.x, obj.base.position.y, obj.base.position.z = position
    obj.base.orientation.roll, obj.base.orientation.pitch, obj.base.orientation.yaw = 0.0, 0.0, yaw
    obj.base.velocity.x = speed
    obj.type = obj.TYPE_VEHICLE
    obj.vehicle_classification.type = obj.VehicleClassification.Type.Value(_VEHICLE_CLASS[model])
    obj.model_reference = model
    rear = obj.vehicle_attributes.bbcenter_to_rear
    rear.x, rear.y, rear.z = rear_offset


# ---------------------------------------------------------------------------------- the street's ground truth
#: OSI ids of the street's ground truth (moving objects: the host 1, traffic 2–5, parked cars 100 + …)
LANE_IDS, BOUNDARY_IDS, MARKING_IDS, SIGN_IDS, STANDING_IDS = 1000, 2000, 3000, 4000, 5000
#: points of a boundary line every this many metres (as scenario tools sample roads)
POINT_SPACING_M = 5.0


def _line(gt, line_id: int, kind: str, y_m: float, x0_m: float, x1_m: float, width_m: float = 0.0,
          height_m: float = 0.0) -> None:
    """A straight lane boundary along x at ``y_m`` from ``x0_m`` to ``x1_m``: points every POINT_SPACING_M, each
    with its width and height (as OSI3Test writes them)."""
    boundary = gt.lane_boundary.add()
    boundary.id.value = line_id
    boundary.classification.type = boundary.classification.Type.Value(f"TYPE_{kind}")
    if kind in ("SOLID_LINE", "DASHED_LINE"):
        boundary.classification.color = boundary.classification.COLOR_WHITE
    count = max(2, int(round((x1_m - x0_m) / POINT_SPACING_M)) + 1)
    for x in np.linspace(x0_m, x1_m, count):
        point = boundary.boundary_line.add()
        point.position.x, point.position.y, point.position.z = float(x), y_m, 0.0
        point.width, point.height = width_m, height_m


def _dashed(gt, line_id: int, y_m: float, starts_m, dash_m: float, width_m: float) -> None:
    """A dashed boundary as OSI draws one: a point at each dash's start (DASH_START) and end (DASH_END)."""
    boundary = gt.lane_boundary.add()
    boundary.id.value = line_id
    boundary.classification.type = boundary.classification.TYPE_DASHED_LINE
    boundary.classification.color = boundary.classification.COLOR_WHITE
    for x in starts_m:
        for at, dash in ((x, "DASH_START"), (x + dash_m, "DASH_END")):
            point = boundary.boundary_line.add()
            point.position.x, point.position.y, point.position.z = float(at), y_m, 0.0
            point.width = width_m
            point.dash = point.Dash.Value(dash)


def _lane(gt, lane_id: int, kind: str, subtype: str, left: list[int], right: list[int], left_lane: int | None,
          right_lane: int | None) -> None:
    lane = gt.lane.add()
    lane.id.value = lane_id
    c = lane.classification
    c.type = c.Type.Value(f"TYPE_{kind}")
    c.subtype = c.Subtype.Value(f"SUBTYPE_{subtype}")
    c.left_lane_boundary_id.extend([_id(i) for i in left])
    c.right_lane_boundary_id.extend([_id(i) for i in right])
    if left_lane is not None:
        c.left_adjacent_lane_id.add().value = left_lane
    if right_lane is not None:
        c.right_adjacent_lane_id.add().value = right_lane


def _id(value: int):
    from osi3.osi_common_pb2 import Identifier

    return Identifier(value=value)


def _stationary(gt, object_id: int, kind: str, centre, size, yaw: float = 0.0, material: str = "",
                polygon=None) -> None:
    obj = gt.stationary_object.add()
    obj.id.value = object_id
    obj.classification.type = obj.classification.Type.Value(f"TYPE_{kind}")
    if material:
        obj.classification.material = obj.classification.Material.Value(f"MATERIAL_{material}")
    base = obj.base
    base.position.x, base.position.y, base.position.z = (float(v) for v in centre)
    base.dimension.length, base.dimension.width, base.dimension.height = (float(v) for v in size)
    base.orientation.yaw = yaw
    for x, y in polygon or ():
        corner = base.base_polygon.add()
        corner.x, corner.y = x, y


#: the street's facade materials as OSI stationary-object materials (plaster and concrete render are concrete,
#: brick is stone)
_FACADE_MATERIAL = {"facade_plaster": "CONCRETE", "facade_brick": "STONE", "facade_concrete": "CONCRETE"}
#: OSI TrafficSign.MainSign.Classification.TYPE_ZEBRA_CROSSING (the type a crossing's painted bars carry)
ZEBRA_CROSSING = 3
#: the street's sign shapes as OSI main sign types: a round speed limit, a square parking sign, a warning triangle
_SIGN_TYPE = {"round": "TYPE_SPEED_LIMIT_BEGIN", "square": "TYPE_CAR_PARKING", "triangle": "TYPE_DANGER_SPOT"}


def street_ground_truth(gt, layout: dict) -> None:
    """The demo street as OSI ground truth, the way scenario tools describe a road: lanes (four driving lanes, two
    parking lanes, two raised sidewalks) between lane boundaries (edge and centre lines, dashed lane dividers with
    their dash states, kerbs), the zebra crossing's bars as road markings, the traffic signs, and the buildings,
    trees and street-light poles as classified stationary objects (buildings with their base polygons)."""
    x0, x1 = -STREET_HALF_LENGTH_M, STREET_HALF_LENGTH_M
    gap = CROSSING_HALF_LENGTH_M + 0.5  # the solid lines stop at the zebra crossing
    b = {name: BOUNDARY_IDS + k for k, name in enumerate(
        ("walk_r", "kerb_r", "edge_r1", "edge_r2", "edge_r_gap", "div_r", "centre_r1", "centre_r2", "centre_r_gap",
         "centre_l1", "centre_l2", "centre_l_gap", "div_l", "edge_l1", "edge_l2", "edge_l_gap", "kerb_l", "walk_l"),
        start=1)}
    for side, tag in ((-1.0, "r"), (1.0, "l")):
        _line(gt, b[f"walk_{tag}"], "NO_LINE", side * SIDEWALK_SLAB_OUTER_M, x0, x1)
        _line(gt, b[f"kerb_{tag}"], "CURB", side * ROAD_HALF_WIDTH_M, x0, x1, CURB_WIDTH_M, CURB_HEIGHT_M)
        for name, y, width in (("edge", DRIVING_HALF_WIDTH_M, 0.15), ("centre", 0.15, 0.12)):
            _line(gt, b[f"{name}_{tag}1"], "SOLID_LINE", side * y, x0, -gap, width)
            _line(gt, b[f"{name}_{tag}_gap"], "NO_LINE", side * y, -gap, gap)
            _line(gt, b[f"{name}_{tag}2"], "SOLID_LINE", side * y, gap, x1, width)
        # the dividers: 3 m dashes every 9 m, kept off the crossing (as the street's mesh paints them)
        starts = np.arange(x0 + 1.0, x1 - 3.0, 9.0)
        starts = starts[(starts + 3.0 < -gap) | (starts > gap)]
        _dashed(gt, b[f"div_{tag}"], side * LANE_WIDTH_M, starts, 3.0, 0.15)

    def pieces(name: str, tag: str) -> list[int]:
        return [b[f"{name}_{tag}1"], b[f"{name}_{tag}_gap"], b[f"{name}_{tag}2"]]

    lane = {name: LANE_IDS + k for k, name in enumerate(
        ("walk_r", "park_r", "outer_r", "inner_r", "inner_l", "outer_l", "park_l", "walk_l"), start=1)}
    # left is +y: the lanes listed from the right side (y < 0) to the left
    _lane(gt, lane["walk_r"], "NONDRIVING", "SIDEWALK", [b["kerb_r"]], [b["walk_r"]], lane["park_r"], None)
    _lane(gt, lane["park_r"], "NONDRIVING", "PARKING", pieces("edge", "r"), [b["kerb_r"]], lane["outer_r"],
          lane["walk_r"])
    _lane(gt, lane["outer_r"], "DRIVING", "NORMAL", [b["div_r"]], pieces("edge", "r"), lane["inner_r"],
          lane["park_r"])
    _lane(gt, lane["inner_r"], "DRIVING", "NORMAL", pieces("centre", "r"), [b["div_r"]], lane["inner_l"],
          lane["outer_r"])
    _lane(gt, lane["inner_l"], "DRIVING", "NORMAL", [b["div_l"]], pieces("centre", "l"), lane["outer_l"],
          lane["inner_r"])
    _lane(gt, lane["outer_l"], "DRIVING", "NORMAL", pieces("edge", "l"), [b["div_l"]], lane["park_l"],
          lane["inner_l"])
    _lane(gt, lane["park_l"], "NONDRIVING", "PARKING", [b["kerb_l"]], pieces("edge", "l"), lane["walk_l"],
          lane["outer_l"])
    _lane(gt, lane["walk_l"], "NONDRIVING", "SIDEWALK", [b["walk_l"]], [b["kerb_l"]], None, lane["park_l"])
    # the zebra crossing: 0.5 m bars along the road, 1 m apart, kerb to kerb (road markings with base polygons)
    for k, y in enumerate(np.arange(-ROAD_HALF_WIDTH_M + 0.6, ROAD_HALF_WIDTH_M - 0.3, 1.0)):
        marking = gt.road_marking.add()
        marking.id.value = MARKING_IDS + 1 + k
        marking.classification.type = marking.classification.TYPE_PAINTED_TRAFFIC_SIGN
        marking.classification.traffic_main_sign_type = ZEBRA_CROSSING
        marking.classification.monochrome_color = marking.classification.COLOR_WHITE
        base = marking.base
        base.position.x, base.position.y, base.position.z = 0.0, float(y), 0.0
        base.dimension.length, base.dimension.width, base.dimension.height = 2 * CROSSING_HALF_LENGTH_M, 0.5, 0.0
        for cx, cy in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
            corner = base.base_polygon.add()
            corner.x, corner.y = cx * CROSSING_HALF_LENGTH_M, cy * 0.25
    standing = layout.get("standing", {})
    for k, sign in enumerate(standing.get("signs", [])):
        traffic_sign = gt.traffic_sign.add()
        traffic_sign.id.value = SIGN_IDS + 1 + k
        main = traffic_sign.main_sign
        main.classification.type = main.classification.Type.Value(_SIGN_TYPE[sign["shape"]])
        base = main.base
        base.position.x, base.position.y, base.position.z = sign["position_m"]
        base.dimension.length, (base.dimension.width, base.dimension.height) = 0.02, sign["size_m"]
        base.orientation.yaw = sign["yaw_rad"]
    next_id = STANDING_IDS + 1
    for building in standing.get("buildings", []):
        (bx0, bx1), (by0, by1), height = building["x_m"], building["y_m"], building["height_m"]
        length, width = bx1 - bx0, by1 - by0
        _stationary(gt, next_id, "BUILDING", (0.5 * (bx0 + bx1), 0.5 * (by0 + by1), 0.5 * height),
                    (length, width, height), material=_FACADE_MATERIAL[building["facade"]],
                    polygon=[(-length / 2, -width / 2), (length / 2, -width / 2), (length / 2, width / 2),
                             (-length / 2, width / 2)])
        next_id += 1
    for tree in standing.get("trees", []):
        lo, hi = np.asarray(tree["box_m"][0]), np.asarray(tree["box_m"][1])
        _stationary(gt, next_id, "TREE", 0.5 * (lo + hi), hi - lo)
        next_id += 1
    for pole in standing.get("poles", []):
        x, y, z = pole["position_m"]
        d, h = pole["diameter_m"], pole["height_m"]
        _stationary(gt, next_id, "POLE", (x, y, z + 0.5 * h), (d, d, h), material="METAL")
        next_id += 1


def sensor_views(layout: dict, frames: int, step_s: float, ground_truth_only: bool = False):
    """Yield serialized SensorViews for ``frames`` steps of ``step_s``: the traffic, and the street as ground truth
    (:func:`street_ground_truth`) in every view. The street's and the cars' meshes are named by
    ``model_reference``, unless ``ground_truth_only``: then a model has only what the ground truth says."""
    from osi3.osi_groundtruth_pb2 import GroundTruth
    from osi3.osi_sensorview_pb2 import SensorView

    from ..osi.encode import default_interface_version

    dims = {f"{stem}.obj": model["dimension_m"] for stem, model in layout["car_models"].items()}
    traffic = _traffic()
    street = GroundTruth()
    street_ground_truth(street, layout)
    for k in range(frames):
        t = (k + 1) * step_s
        view = SensorView()
        view.version.CopyFrom(default_interface_version())
        view.timestamp.seconds, view.timestamp.nanos = int(t), int(round((t % 1) * 1e9))
        view.sensor_id.value = 0
        view.host_vehicle_id.value = HOST_ID
        m = view.mounting_position
        m.position.x, m.position.y, m.position.z = MOUNTING_POSITION_M
        m.orientation.roll = m.orientation.pitch = m.orientation.yaw = 0.0
        gt = view.global_ground_truth
        gt.CopyFrom(street)
        gt.version.CopyFrom(view.version)
        gt.timestamp.CopyFrom(view.timestamp)
        gt.host_vehicle_id.value = HOST_ID
        if not ground_truth_only:
            gt.model_reference = layout["environment"]
        for object_id, model, x0, y, speed, yaw in traffic:
            length, width, height = dims[model]
            # rear axle ~20 % of the length ahead of the rear bumper, 0.3 m above the road
            rear = (-0.5 * length + 0.2 * length, 0.0, 0.3 - 0.5 * height)
            _fill_object(gt.moving_object.add(), object_id, dims[model], (x0 + speed * t, y, 0.5 * height),
                         yaw, speed, model, rear)
        for car in layout["cars"]:  # parked cars: vehicles standing still
            length, width, height = car["dimension_m"]
            _fill_object(gt.moving_object.add(), PARKED_ID_OFFSET + car["id"], car["dimension_m"], car["position_m"],
                         car["orientation_rad"][2], 0.0, car["mesh"], (-0.3 * length, 0.0, 0.3 - 0.5 * height))
        if ground_truth_only:
            for obj in gt.moving_object:
                obj.ClearField("model_reference")
        yield view.SerializeToString()


def make_demo_scenario(out_dir, frames: int = 40, step_s: float = 0.1, seed: int = 0,
                       sensor: str = "ouster_os1_128", ground_truth_only: bool = False) -> str:
    """Write the demo scenario into ``out_dir`` (meshes in ``assets/``) and return its folder. With
    ``ground_truth_only`` its SensorViews name no mesh: the street comes from their ground truth alone."""
    out_dir = os.fspath(out_dir)
    assets = os.path.join(out_dir, "assets")
    ensure_street(assets, seed=seed)
    with open(os.path.join(assets, "layout.json"), encoding="utf-8") as f:
        layout = json.load(f)
    for name in os.listdir(out_dir) if os.path.isdir(out_dir) else []:
        if name.endswith("_demo.osi"):
            os.remove(os.path.join(out_dir, name))
    trace = trace_name("sv", frames, "demo")
    with TraceWriter(os.path.join(out_dir, trace)) as writer:
        for data in sensor_views(layout, frames, step_s, ground_truth_only):
            writer.write(data)
    # the street's visual materials → infrared materials, shipped with the scenario
    shutil.copyfile(packaged_map_path("street"), os.path.join(out_dir, "materials.yaml"))
    scenario = {
        "name": "demo_ground_truth" if ground_truth_only else "demo",
        "description": ("Generated street from its OSI ground truth alone (no meshes), host car with a roof lidar "
                        "driving through traffic and parked cars" if ground_truth_only else
                        "Generated street, host car with a roof lidar driving through traffic and parked cars"),
        "trace": trace,
        "sensor": sensor,
        "assets": "assets",
        "materials": "materials.yaml",
        "step_size_s": step_s,
        "backend": "auto",
        "disable_self_hits": True,
    }
    import yaml

    with open(os.path.join(out_dir, SCENARIO_FILE), "w", encoding="utf-8") as f:
        yaml.safe_dump(scenario, f, sort_keys=False)
    return out_dir


def effects_line(sensor) -> str:
    """One line saying which of a sensor's effects are on and which off, and how to turn its noise on (ranges are
    exact unless a spec asks for noise: docs/physics.md)."""
    effects = sensor.effects
    on: list[str] = []
    off: list[str] = []
    (on if sensor.range_limit is not None else off).append("range–reflectivity limit")
    (on if sensor.motion_distortion else off).append("motion distortion")
    (on if effects.noise is not None else off).append("noise")
    (on if effects.detection != "threshold" else off).append("soft detection edge")
    (on if sensor.footprint.active else off).append("beam divergence and echoes")
    weather = "the spec's" if effects.weather is not None else "the SensorView's"
    text = f"{sensor.name}: on: {', '.join(on) or 'nothing'}; off: {', '.join(off) or 'nothing'}; weather: {weather}"
    if effects.noise is None:
        preset = sensor.spec.get("preset") or sensor.name
        text += (f". Ranges are exact; for the unit's noise give a spec file with `preset: {preset}` and "
                 "`noise: true` (docs/physics.md)")
    return text
