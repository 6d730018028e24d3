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
from .demo_scene import LANE_WIDTH_M, ensure_street

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


def sensor_views(layout: dict, frames: int, step_s: float):
    """Yield serialized SensorViews for ``frames`` steps of ``step_s``."""
    from osi3.osi_sensorview_pb2 import SensorView

    from ..osi.encode import default_interface_version

    dims = {f"{stem}.obj": model["dimension_m"] for stem, model in layout["car_models"].items()}
    traffic = _traffic()
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
        gt.version.CopyFrom(view.version)
        gt.timestamp.CopyFrom(view.timestamp)
        gt.host_vehicle_id.value = HOST_ID
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
        yield view.SerializeToString()


def make_demo_scenario(out_dir, frames: int = 40, step_s: float = 0.1, seed: int = 0,
                       sensor: str = "ouster_os1_128") -> str:
    """Write the demo scenario into ``out_dir`` (meshes in ``assets/``) and return its folder."""
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
        for data in sensor_views(layout, frames, step_s):
            writer.write(data)
    # the street's visual materials → infrared materials, shipped with the scenario
    shutil.copyfile(packaged_map_path("street"), os.path.join(out_dir, "materials.yaml"))
    scenario = {
        "name": "demo",
        "description": "Generated street, host car with a roof lidar driving through traffic and parked cars",
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
