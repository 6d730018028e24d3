"""Ground truth becomes geometry: what OSI sends without meshes, made into meshes.

Real scenario tools send ground truth, not meshes. This stage, between OSI decoding and the scene, turns it into
triangles with infrared materials and OSI ids, in plain functions of decoded ground truth (no FMI, no scene):

* :func:`build_road_world` — the static road of a :class:`~lidar_fmu.osi.ground_truth.RoadGroundTruth`: lane
  surfaces, paint, kerbs, rails, walls, road markings (:mod:`.road`), signs and traffic lights
  (:mod:`.roadside`), and the terrain past the road's edges out to the sensor's reach (:mod:`.terrain`), as one
  mesh whose faces carry the OSI id they came from;
* :func:`~.street.build_street` — on request (``environment: urban | suburban | rural | highway``), the street
  around the road: frontages, trees, lights, poles, fences, hedges and barriers from its outer edges
  (:mod:`.street`), a mesh of its own;
* :func:`ground_plane_mesh` — the ground of a trace without lanes;
* :func:`road_user_mesh` and :func:`stationary_mesh` — the shared meshes of road users and stationary objects by
  their OSI class (:mod:`.road_users`, :mod:`.roadside`), for objects without a model of their own.

:mod:`.scene_update` keeps a scene in step with the ground truth each step, deciding what to rebuild.

Every material is named ``ir:<IR material>`` (:mod:`lidar_fmu.physics.materials`); docs/world.md shows what the
road looks like and what is still approximate.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..geometry.scene import Mesh
from ..geometry.semantic import TERRAIN
from ..osi.ground_truth import RoadGroundTruth
from .bounds import bounded
from .nearest import PointIndex
from .road import build_road
from .road_users import RIDER_HEIGHT_M, ROAD_USER_CLASSES, paint_of, road_user_mesh
from .roadside import add_lights, add_signs, stationary_mesh
from .shapes import MeshBuilder
from .street import build_street, street_mesh
from .terrain import build_terrain, ground_plane

#: the terrain reaches at most this far from the road (m), whatever the sensor's range: beyond, returns from
#: level ground at grazing incidence are below every lidar's range limit
MAX_REACH_M = 1000.0


@dataclass(frozen=True)
class RoadWorld:
    """The static road built from ground truth: one mesh (None when nothing could be built) and the problems met
    (each names its OSI element)."""

    mesh: Mesh | None
    problems: tuple[str, ...]
    #: the street around the road (:mod:`.street`), when one was asked for and anything could stand
    street: Mesh | None = None
    #: how many lines were cut to the working radius (:mod:`.bounds`): the road is built again as the host moves
    cut_lines: int = 0


def build_road_world(road: RoadGroundTruth, reach_m: float, ground_z_m: float | None = None, street: str = "",
                     avoid_boxes: np.ndarray | None = None, seed: int = 0, centre_xy=(0.0, 0.0)) -> RoadWorld:
    """The road of ``road`` with its signs, lights and terrain out to ``reach_m`` (at most MAX_REACH_M).

    ``ground_z_m``: the ground height under signs and lights where no road point is near (a trace of signs without
    lanes); ``None``: such signs get no post. ``street``: a style of :data:`~.street.STREET_STYLES` builds the
    street around the road too, off ``avoid_boxes`` (:func:`~.street.box_corners`), its choices seeded by ``seed``
    (:func:`~.street.street_seed`); '' none. ``centre_xy``: the host's position, around which the lines are built
    (:func:`~.bounds.bounded`: within its working radius, sizes within their bounds).
    """
    builder = MeshBuilder()
    within = bounded(road, centre_xy)
    road = within.road
    built = build_road(road, builder)
    street_part = None
    if street:
        street_part = street_mesh(build_street(built, street, min(float(reach_m), MAX_REACH_M), avoid_boxes, seed))
    index = PointIndex(built.points)

    def ground_z(xy: np.ndarray) -> np.ndarray:
        if not len(index):
            return np.full(len(xy), np.nan if ground_z_m is None else ground_z_m)
        _, nearest = index.nearest(xy)
        return built.points[nearest, 2]

    add_signs(builder, road.signs, ground_z, built.problems)
    add_lights(builder, road.lights, ground_z, built.problems)
    build_terrain(builder, built, min(float(reach_m), MAX_REACH_M), index)
    return RoadWorld(builder.mesh("road from OSI ground truth"), tuple(built.problems), street_part, within.cut_lines)


def ground_plane_mesh(reach_m: float) -> Mesh:
    """A square of asphalt 2·reach wide (at most MAX_REACH_M), centred on its origin: the ground of a trace
    without lanes, placed under the host each step."""
    builder = MeshBuilder()
    builder.add(ground_plane(min(float(reach_m), MAX_REACH_M)), "ir:asphalt", semantic=TERRAIN)
    mesh = builder.mesh("ground plane")
    assert mesh is not None
    return mesh


__all__ = ["RoadWorld", "build_road_world", "ground_plane_mesh", "road_user_mesh", "stationary_mesh", "paint_of",
           "ROAD_USER_CLASSES", "RIDER_HEIGHT_M", "MAX_REACH_M"]
