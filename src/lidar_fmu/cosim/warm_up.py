"""Compile every kernel a co-simulation step runs before the first step: :func:`warm_up`.

A kernel compiles the first time it is called (:mod:`lidar_fmu.scan.kernels`).
Without a warm-up, a machine's first ``fmi2DoStep`` would compile them all,
tens of seconds with nothing logged, and a master with a step timeout gives
up. :func:`warm_up` steps a twin of the model — the same lidars, backend,
effects and IR materials, built with the same options — on a few SensorViews
of its own through :meth:`OsiSensorModel.step`, the path every step takes:
the host and a car drive through a room of grey walls with glass, mirrors, a
retroreflector and a thin pole (:func:`~lidar_fmu.scan.kernels.warm_up_scene`),
clear, in fog and rain, in snow, with and without glass and mirrors. The twin
is thrown away. Then each of the model's own lidars scans once
(:func:`prepare`), for what a lidar computes once per pattern; the model's
output stays what it would have been.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from ..geometry.transforms import pose_matrix
from ..parallel import serial
from ..physics.returns import Materials
from ..pointcloud import ENVIRONMENT_ID_BASE
from ..scan.kernels import WARM_UP_MAP, WARM_UP_PARTS, compile_timer, warm_up_radius_m, warm_up_scene
from .sensor_model import OsiSensorModel

#: the twin's host vehicle: OSI id, bounding-box centre (m), size (m), speed (m/s, along x)
HOST_ID = 1
HOST_CENTRE_M = (0.0, 0.0, 0.75)
HOST_SIZE_M = (4.5, 1.8, 1.5)
HOST_SPEED_M_S = 5.0
#: the other car: OSI id, size (m), speed (m/s, along y)
CAR_ID = 2
CAR_SIZE_M = (4.0, 1.8, 1.5)
CAR_SPEED_M_S = 8.0
#: a box this many times the farthest lidar's range away: in the scene, out of every ray's reach, so the warm-up
#: also readies what a caster does to leave such objects out of a cast (Embree: Backend.focus)
FAR_BOX_RANGES = 2.0


@dataclass(frozen=True)
class WarmUp:
    """What a warm-up took; :meth:`message` is the line the FMU logs."""

    seconds: float  # the whole warm-up
    compile_seconds: float  # of which compiling (0: every kernel came from Numba's cache)
    problem: str = ""  # why a warm-up step was invalid ('' : none was): the first step may then compile

    def message(self) -> str:
        """One line for a log: what the warm-up did and what it means for later runs."""
        if self.problem:
            return (f"warming up the kernels failed after {self.seconds:.1f} s ({self.problem}); the first steps "
                    "compile what they need")
        if self.compile_seconds >= 0.05:
            return (f"compiled the kernels in {self.seconds:.1f} s (once per machine; later runs load them from "
                    "the cache)")
        return f"loaded the compiled kernels from the cache in {self.seconds:.1f} s"


def warm_up(model: OsiSensorModel, options: dict) -> WarmUp:
    """Step a twin of ``model``, built from the ``options`` it was built from (:class:`OsiSensorModel`'s keyword
    arguments), on the warm-up views (module doc), then scan once with each of the model's own lidars
    (:func:`prepare`) → what it took. Never raises: a twin that cannot be built or stepped is the
    :attr:`WarmUp.problem`, and the model steps as it would have without a warm-up."""
    started = time.perf_counter()
    problem = ""
    with compile_timer() as compiling:
        try:
            _step_twin(options)
            prepare(model)
        except Exception as exc:  # the model itself was built: its steps will say what is wrong, if anything
            problem = f"{type(exc).__name__}: {exc}"
    return WarmUp(time.perf_counter() - started, compiling[0], problem)


def prepare(model: OsiSensorModel) -> None:
    """Scan once with each of ``model``'s lidars from its mounting, into the model's scene with a box placed in it
    for the scan (an empty scene casts nothing): what a lidar computes once per pattern besides the kernels —
    its caster's packet order, its beams' rings, its sub-rays — and the model's ray-casting structure (its
    environment's, if it has one) are then ready, and the first step costs what later ones cost. The model's
    steps draw their noise by their own frame counter, never the lidars' scan count, so its output is the same."""
    box_id = ENVIRONMENT_ID_BASE + 1  # an id no OSI object has; the environment's is ENVIRONMENT_ID_BASE
    model.scene.add_instance(box_id, model.updater.unit_box, pose_matrix((0.0, 0.0, -100.0)))
    try:
        with serial():  # as a step scans: in turn with other models' scans where the threading layer needs it
            for mounted in model.lidars:
                mounted.lidar.scan(mounted.default_mounting_pose)
    finally:
        model.scene.remove_instance(box_id)


#: the warm-up's steps: (weather, the scene's parts besides the grey ones), every combination of glass and mirrors
STEPS = tuple(zip(("clear", "fog and rain", "snow", "clear"), WARM_UP_PARTS))


#: the model's options its twin takes: what decides which kernels run (its scene is the warm-up's own: no assets,
#: environment or material map; and it stays silent)
TWIN_OPTIONS = ("sensor", "backend", "ir_database", "default_mounting_pose", "disable_self_hits", "ground_truth")


def _step_twin(options: dict) -> None:
    twin = OsiSensorModel(**{k: v for k, v in options.items() if k in TWIN_OPTIONS})
    for mounted in twin.lidars:  # the IR materials of the user's database, named as the warm-up scene names them
        lidar = mounted.lidar
        lidar.materials = Materials(lidar.sensor.wavelength_nm, WARM_UP_MAP, options.get("ir_database") or None)
    centre = np.mean([(pose_matrix(HOST_CENTRE_M) @ mounted.default_mounting_pose)[:3, 3]
                      for mounted in twin.lidars], axis=0)
    radius_m = warm_up_radius_m(min(m.sensor.max_range_m for m in twin.lidars))
    ids = itertools.count(ENVIRONMENT_ID_BASE + 1)  # beside the OSI objects: the scene update never moves them
    parts = {name: [(next(ids), mesh, pose) for mesh, pose in placed]
             for name, placed in warm_up_scene(centre, radius_m).items()}
    for instance_id, mesh, pose in parts["grey"]:
        twin.scene.add_instance(instance_id, mesh, pose)
    far_m = FAR_BOX_RANGES * max(m.sensor.max_range_m for m in twin.lidars)
    period_s = min(m.sensor.frame_period_s for m in twin.lidars)
    for k, (weather, shown) in enumerate(STEPS):
        for name in ("glass", "mirror"):
            for instance_id, mesh, pose in parts[name]:
                if name in shown:
                    twin.scene.add_instance(instance_id, mesh, pose)
                elif instance_id in twin.scene:
                    twin.scene.remove_instance(instance_id)
        time_s = (k + 1) * period_s
        result = twin.step(warm_up_view(time_s, radius_m, weather, far_m), time_s)
        if not result.valid:
            raise RuntimeError(f"warm-up step {k + 1} ({weather}): {result.message}")


def warm_up_view(time_s: float, radius_m: float, weather: str = "clear", far_m: float = 0.0) -> bytes:
    """A SensorView at ``time_s``: the host driving along x and a car crossing ahead of it along y (both with OSI
    velocities, so that the frame's motion is taken into account), a box standing beside, a box ``far_m`` behind
    (0: none) and a road with a building (:func:`_road`); ``weather``:
    ``clear``, ``fog and rain`` or ``snow`` (OSI environmental conditions)."""
    from osi3.osi_sensorview_pb2 import SensorView

    from ..osi.encode import default_interface_version, set_timestamp

    view = SensorView()
    view.version.CopyFrom(default_interface_version())
    set_timestamp(view.timestamp, time_s)
    view.host_vehicle_id.value = HOST_ID
    gt = view.global_ground_truth
    gt.version.CopyFrom(view.version)
    gt.timestamp.CopyFrom(view.timestamp)
    gt.host_vehicle_id.value = HOST_ID
    hx, hy, hz = HOST_CENTRE_M
    objects = [(HOST_ID, (hx + HOST_SPEED_M_S * time_s, hy, hz), HOST_SIZE_M, (HOST_SPEED_M_S, 0.0)),
               (CAR_ID, (0.3 * radius_m, -0.3 * radius_m + CAR_SPEED_M_S * time_s, 0.75), CAR_SIZE_M,
                (0.0, CAR_SPEED_M_S)),
               (CAR_ID + 1, (-0.3 * radius_m, 0.2 * radius_m, 0.5), (1.0, 1.0, 1.0), (0.0, 0.0))]
    if far_m > 0.0:
        objects.append((CAR_ID + 2, (hx - far_m, hy, 0.5), (1.0, 1.0, 1.0), (0.0, 0.0)))
    for object_id, position, size, velocity in objects:
        obj = gt.moving_object.add()
        obj.id.value = object_id
        obj.base.position.x, obj.base.position.y, obj.base.position.z = position
        obj.base.dimension.length, obj.base.dimension.width, obj.base.dimension.height = size
        obj.base.velocity.x, obj.base.velocity.y = velocity
    _road(gt, radius_m)
    conditions = gt.environmental_conditions
    if weather == "fog and rain":
        conditions.fog = conditions.FOG_LIGHT
        conditions.precipitation = conditions.PRECIPITATION_MODERATE
    elif weather == "snow":
        conditions.precipitation = conditions.PRECIPITATION_LIGHT
        conditions.temperature = 263.15  # K: below freezing, so the precipitation is snow
    return view.SerializeToString()


def _road(gt, radius_m: float) -> None:
    """A lane the host drives in, between a painted line and a kerb, and an L-shaped building: the static ground
    truth the scene update builds its road, terrain and footprints from (:mod:`lidar_fmu.world`)."""
    for boundary_id, y_m, kind in ((10, 2.0, "TYPE_SOLID_LINE"), (11, -2.0, "TYPE_CURB")):
        boundary = gt.lane_boundary.add()
        boundary.id.value = boundary_id
        boundary.classification.type = boundary.classification.Type.Value(kind)
        for x_m in np.linspace(-0.8 * radius_m, 0.8 * radius_m, 9):
            point = boundary.boundary_line.add()
            point.position.x, point.position.y = float(x_m), y_m
            point.width, point.height = 0.15, 0.12
    lane = gt.lane.add()
    lane.id.value = 20
    lane.classification.type = lane.classification.TYPE_DRIVING
    lane.classification.left_lane_boundary_id.add().value = 10
    lane.classification.right_lane_boundary_id.add().value = 11
    building = gt.stationary_object.add()
    building.id.value = 30
    building.classification.type = building.classification.TYPE_BUILDING
    base = building.base
    base.position.x, base.position.y, base.position.z = -0.3 * radius_m, -0.3 * radius_m, 2.0
    base.dimension.length, base.dimension.width, base.dimension.height = 4.0, 4.0, 4.0
    for x_m, y_m in ((-2, -2), (2, -2), (2, 0), (0, 0), (0, 2), (-2, 2)):
        corner = base.base_polygon.add()
        corner.x, corner.y = x_m, y_m
