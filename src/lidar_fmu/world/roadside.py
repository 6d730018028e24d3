"""What stands beside the road: traffic signs and lights on posts, and stationary objects by their OSI class.

Signs are plates of retroreflective sheeting (their faces; aluminium behind) in
the outline their type has (Vienna Convention: triangles warn, circles
prohibit and order, an octagon stops, an inverted triangle gives way; others
rectangles), on a post down to the ground under them. Traffic lights are dark
housings with a lens, on a pole. Both are built into the road's mesh with their
OSI ids (:func:`add_signs`, :func:`add_lights`).

Stationary objects become instances (:func:`stationary_mesh`): a building is its
base polygon (else its box) extruded to its height; every other class is a
shared mesh in the unit box that its instance pose stretches to the object's
``base.dimension`` — poles, traffic cones, delineators, trees and bushes
(a trunk and a crown of scattered leaves that lets part of a beam through, so
a crown gives several echoes), barriers, walls, gantries, building-site
barriers, speed bumps, bridges.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ..geometry.scene import Mesh
from ..geometry.semantic import POLE, TRAFFIC_LIGHT, TRAFFIC_SIGN
from ..geometry.transforms import pose_matrix
from ..osi.decode import ObjectState
from .lines import fill_polygon, footprint, sweep
from .road import JERSEY_PROFILE_M, ir
from .shapes import (
    MeshBuilder,
    add,
    box,
    cylinder_between,
    frustum,
    leaf_cloud,
    normalised,
    prism,
)

#: sign posts: 60.3 mm steel tube (the common German "Rohrpfosten" for signs up to ~1 m²; assumed), standing
#: behind the plate
SIGN_POST_RADIUS_M = 0.03
#: plate thickness where OSI gives none (m): aluminium sign blanks are 2–3 mm (EN 12899-1; assumed 3 mm)
PLATE_THICKNESS_M = 0.003
#: a plate whose bottom is higher above the ground under it than this hangs from a gantry (no post of its own)
HANGING_ABOVE_M = 3.5
#: a sign or light farther than this above (or below) the ground under it stands on no ground this scene has:
#: left out, named (the tallest sign gantries and traffic-light masts are 6–10 m; assumed)
MAX_ABOVE_GROUND_M = 30.0
#: traffic-light poles: 0.08 m radius (street-light style masts, assumed); housings 0.1 m deeper and wider than
#: the light OSI gives, dark plastic
LIGHT_POLE_RADIUS_M = 0.08
LIGHT_HOUSING_MARGIN_M = 0.1
#: a light's size where OSI gives it smaller (m), its housing at least this deep (m) (a signal head is 0.2–0.3 m
#: deep, assumed); its lens this thick (m), on the housing's face
LIGHT_MIN_SIZE_M, LIGHT_MIN_DEPTH_M, LENS_THICKNESS_M = 0.05, 0.25, 0.01
#: a light higher than this share of MAX_ABOVE_GROUND_M above the ground under it hangs (no pole of its own)
LIGHT_POLE_UP_TO_SHARE = 2 / 3
#: sections of sign posts and light poles (assumed: round enough at a lidar's resolution)
POST_SECTIONS = 12
#: a stop sign is an octagon (Vienna Convention B2a), turned by half a side so a side lies on top; round signs are
#: drawn as this many sides (assumed: round enough at a lidar's resolution)
STOP_SIDES, CIRCLE_SIDES = 8, 24
#: OSI stationary classification material → IR material (stone as concrete and mud as soil: assumed, no
#: spectra of them are bundled)
OSI_MATERIALS = {"wood": "wood", "plastic": "plastic_white", "concrete": "concrete", "metal": "metal_painted",
                 "stone": "concrete", "glass": "glass_clear", "mud": "soil"}

# warning signs (OSI's TYPE_DANGER_SPOT … TYPE_RAILWAY_TRAFFIC_PRIORITY, the Vienna Convention's A signs)
_TRIANGLES = frozenset({
    "DANGER_SPOT", "ZEBRA_CROSSING", "FLIGHT", "CATTLE", "HORSE_RIDERS", "AMPHIBIANS", "FALLING_ROCKS",
    "SNOW_OR_ICE", "LOOSE_GRAVEL", "WATERSIDE", "CLEARANCE", "MOVABLE_BRIDGE", "RIGHT_BEFORE_LEFT_NEXT_INTERSECTION",
    "TURN_LEFT", "TURN_RIGHT", "DOUBLE_TURN_LEFT", "DOUBLE_TURN_RIGHT", "HILL_DOWNWARDS", "HILL_UPWARDS",
    "UNEVEN_ROAD", "ROAD_SLIPPERY_WET_OR_DIRTY", "SIDE_WINDS", "ROAD_NARROWING", "ROAD_NARROWING_RIGHT",
    "ROAD_NARROWING_LEFT", "ROAD_WORKS", "TRAFFIC_QUEUES", "TWO_WAY_TRAFFIC", "ATTENTION_TRAFFIC_LIGHT",
    "PEDESTRIANS", "CHILDREN_CROSSING", "CYCLE_ROUTE", "DEER_CROSSING", "UNGATED_LEVEL_CROSSING",
    "RAILWAY_TRAFFIC_PRIORITY"})
_CIRCLE_WORDS = ("PROHIBITED", "SPEED_LIMIT", "OVERTAKING_BAN", "PRESCRIBED", "DO_NOT_ENTER", "NO_", "MINIMUM_SPEED",
                 "_ONLY", "PASS_", "ROUNDABOUT", "SNOW_CHAINS", "RESTRICTIONS_END", "MINIMUM_DISTANCE")


def plate_outline(kind: str, width_m: float, height_m: float) -> np.ndarray:
    """(P, 2) outline (y, z) of a sign plate of type ``kind`` ("main:STOP", "supplementary", …) filling its box,
    counter-clockwise seen from the front (+x)."""
    name = kind.split(":", 1)[1] if ":" in kind else ""
    hw, hh = 0.5 * width_m, 0.5 * height_m
    if name in _TRIANGLES:
        return np.array([[hw, -hh], [0.0, hh], [-hw, -hh]])
    if name == "GIVE_WAY":
        return np.array([[0.0, -hh], [hw, hh], [-hw, hh]])
    if name == "STOP" or (name and any(word in name for word in _CIRCLE_WORDS)):
        sides = STOP_SIDES if name == "STOP" else CIRCLE_SIDES
        angle = -np.arange(sides) * 2 * np.pi / sides + (np.pi / STOP_SIDES if sides == STOP_SIDES else 0.0)
        return np.column_stack([-hw * np.sin(angle), hh * np.cos(angle)])
    return np.array([[hw, -hh], [hw, hh], [-hw, hh], [-hw, -hh]])


def add_signs(builder: MeshBuilder, signs, ground_z: Callable[[np.ndarray], np.ndarray], problems: list[str]) -> None:
    """Sign plates (retroreflective faces) on posts; ``ground_z(xy (N, 2)) → (N,)`` the ground height under each
    (NaN: none known, no post)."""
    for plate in signs:
        length, width, height = plate.dimension_m
        if not (width > 0 and height > 0):
            problems.append(f"traffic_sign {plate.id} ({plate.kind}): no width or height; left out")
            continue
        pose = pose_matrix(plate.position_m, plate.orientation_rad)
        ground = float(ground_z(np.asarray(plate.position_m)[None, :2])[0])
        bottom = plate.position_m[2] - 0.5 * height
        if np.isfinite(ground) and abs(bottom - ground) > MAX_ABOVE_GROUND_M:
            problems.append(f"traffic_sign {plate.id}: its plate is {bottom - ground:.0f} m above the ground under "
                            f"it; left out")
            continue
        half = 0.5 * max(length, PLATE_THICKNESS_M)
        front, rest = prism(plate_outline(plate.kind, width, height), -half, half)
        builder.add(_posed(front, pose), ir("retroreflector"), plate.id, TRAFFIC_SIGN)
        builder.add(_posed(rest, pose), ir("aluminum"), plate.id, TRAFFIC_SIGN)
        if np.isfinite(ground) and bottom - ground < HANGING_ABOVE_M:
            behind = pose[:3, :3] @ np.array([-(half + SIGN_POST_RADIUS_M), 0.0, 0.0]) + pose[:3, 3]
            builder.add(cylinder_between((behind[0], behind[1], ground), (behind[0], behind[1], bottom + height),
                                         SIGN_POST_RADIUS_M, POST_SECTIONS), ir("aluminum"), plate.id, POLE)


def add_lights(builder: MeshBuilder, lights, ground_z: Callable[[np.ndarray], np.ndarray],
               problems: list[str]) -> None:
    """Traffic lights: a dark housing around each light OSI gives, a lens on its face, a pole to the ground."""
    for light in lights:
        length, width, height = (max(v, LIGHT_MIN_SIZE_M) for v in light.dimension_m)
        pose = pose_matrix(light.position_m, light.orientation_rad)
        ground = float(ground_z(np.asarray(light.position_m)[None, :2])[0])
        bottom = light.position_m[2] - 0.5 * height
        if np.isfinite(ground) and abs(bottom - ground) > MAX_ABOVE_GROUND_M:
            problems.append(f"traffic_light {light.id}: {bottom - ground:.0f} m above the ground under it; left out")
            continue
        depth = max(length, LIGHT_MIN_DEPTH_M)
        margin = LIGHT_HOUSING_MARGIN_M
        housing = box((-0.5 * depth, 0.0, 0.0), (depth, width + margin, height + margin))
        lens = box((0.5 * LENS_THICKNESS_M, 0.0, 0.0), (LENS_THICKNESS_M, width, height))
        builder.add(_posed(housing, pose), ir("plastic_black"), light.id, TRAFFIC_LIGHT)
        builder.add(_posed(lens, pose), ir("glass_clear"), light.id, TRAFFIC_LIGHT)
        if np.isfinite(ground) and bottom - ground < LIGHT_POLE_UP_TO_SHARE * MAX_ABOVE_GROUND_M:
            behind = pose[:3, :3] @ np.array([-depth - LIGHT_POLE_RADIUS_M, 0.0, 0.0]) + pose[:3, 3]
            builder.add(cylinder_between((behind[0], behind[1], ground), (behind[0], behind[1],
                                                                          light.position_m[2] + 0.5 * height),
                                         LIGHT_POLE_RADIUS_M, POST_SECTIONS), ir("metal_painted"), light.id, POLE)


def _posed(shape, pose: np.ndarray):
    vertices, faces = shape
    return np.asarray(vertices, float) @ pose[:3, :3].T + pose[:3, 3], faces


# ------------------------------------------------------------------------------------------------ stationary objects
# Class meshes are drawn in a unit box (x, y across 1, z from 0 to 1, before :func:`normalised`) that the instance
# pose stretches to the object's size: boxes are (centre, size) as shares of it. Where no source is cited a part's
# share is assumed, read off photographs of a typical one, because the object's own box gives its real size.

#: a glass building's concrete core stands this far inside its glazing (m; assumed: a curtain wall's depth and a
#: corridor); a polygon no larger than this (m) has no core
GLASS_CORE_INSET_M, MIN_POLYGON_SIZE_M = 1.0, 1e-6
#: a pole's sections
POLE_SECTIONS = 16
#: a traffic cone (EN 13422, the 0.75 m size): base plate (centre, size m), the cone from its foot to its top (m)
#: and radii there (m), its sections; two retroreflective sleeves (from, to m) standing this far out of the cone (m)
CONE_BASE_M = ((0, 0, 0.02), (0.38, 0.38, 0.04))
CONE_FOOT_M, CONE_TOP_M, CONE_FOOT_RADIUS_M, CONE_TOP_RADIUS_M, CONE_SECTIONS = 0.04, 0.75, 0.16, 0.03, 24
CONE_SLEEVES_M, CONE_SLEEVE_PROUD_M = ((0.35, 0.45), (0.52, 0.6)), 0.003
#: a delineator post (1 m above ground; RPS / TL-Leitpfosten, proportions assumed): white post and black band
#: (centre, size), the retroreflectors on its faces (at ± x, centre z, size)
DELINEATOR_POST = ((0, 0, 0.4), (0.12, 0.1, 0.8))
DELINEATOR_BAND = ((0, 0, 0.9), (0.12, 0.1, 0.2))
DELINEATOR_REFLECTOR_X, DELINEATOR_REFLECTOR_Z, DELINEATOR_REFLECTOR_SIZE = 0.061, 0.88, (0.002, 0.05, 0.1)


def stationary_mesh(state: ObjectState, problems: list[str]) -> tuple[Mesh, bool]:
    """The mesh of a stationary object without a model of its own, and whether its instance pose scales it into
    the object's box (class meshes) or not (a building, built to its own size)."""
    if state.object_class == "building":
        return building_mesh(state, problems), False
    material = OSI_MATERIALS.get(state.material, "")
    return class_mesh(state.object_class or "unknown", material), True


def building_mesh(state: ObjectState, problems: list[str]) -> Mesh:
    """Walls up from the base polygon (else the box footprint) to the box's height, a flat roof; glass buildings
    get a concrete core 1 m inside their glazing (the return comes from behind the glass)."""
    length, width, height = state.dimension_m
    polygon = footprint(state.base_polygon_m, length, width, f"stationary_object {state.id}", problems)
    assert polygon is not None  # (the scene updater places only boxes of positive size)
    material = OSI_MATERIALS.get(state.material, "concrete")
    builder = MeshBuilder()
    lo, hi = -0.5 * height, 0.5 * height
    ring = np.column_stack([polygon, np.full(len(polygon), lo)])
    ring = np.concatenate([ring, ring[:1]])
    walls = sweep(ring, [[0.0, 0.0], [0.0, height]])
    builder.add(walls, ir(material))
    roof = (np.column_stack([polygon, np.full(len(polygon), hi)]), fill_polygon(polygon))
    builder.add(roof, ir("roof_tar" if material != "glass_clear" else "concrete"))
    if material == "glass_clear":
        inner = polygon * np.maximum(0.0, 1.0 - GLASS_CORE_INSET_M / max(np.abs(polygon).max(), MIN_POLYGON_SIZE_M))
        core = np.concatenate([np.column_stack([inner, np.full(len(inner), lo)]),
                               np.column_stack([inner[:1], [lo]])])
        builder.add(sweep(core, [[0.0, 0.0], [0.0, height]]), ir("concrete"))
    mesh = builder.mesh(f"building {state.id}")
    assert mesh is not None
    return mesh


@functools.cache
def class_mesh(object_class: str, material: str = "") -> Mesh:
    """The shared unit-box mesh of a stationary class (``material``: an IR material the OSI classification names,
    "" for the class's own)."""
    parts = _CLASS_PARTS.get(object_class, _block)(material)
    unit, _ = normalised(parts)
    builder = MeshBuilder()
    builder.extend(unit)
    mesh = builder.mesh(f"osi {object_class}")
    assert mesh is not None
    return mesh


def _block(material: str, default: str = "concrete") -> dict:
    return {ir(material or default): [box((0.0, 0.0, 0.5), (1.0, 1.0, 1.0))]}


def _pole(material: str) -> dict:
    """A round pole filling its box (height 1, diameter 1 before scaling)."""
    return {ir(material or "aluminum"): [cylinder_between((0, 0, 0), (0, 0, 1), 0.5, POLE_SECTIONS)]}


def _cone(material: str) -> dict:
    """A traffic cone (EN 13422): base plate, orange cone, two retroreflective sleeves; 0.75 m reference size."""
    parts: dict = {}
    add(parts, ir("plastic_black"), box(*CONE_BASE_M))
    add(parts, ir(material or "plastic_orange"), frustum((0, 0, CONE_FOOT_M), (0, 0, CONE_TOP_M), CONE_FOOT_RADIUS_M,
                                                         CONE_TOP_RADIUS_M, CONE_SECTIONS))
    for z0, z1 in CONE_SLEEVES_M:
        r0, r1 = (CONE_FOOT_RADIUS_M - (CONE_FOOT_RADIUS_M - CONE_TOP_RADIUS_M) * (z - CONE_FOOT_M)
                  / (CONE_TOP_M - CONE_FOOT_M) + CONE_SLEEVE_PROUD_M for z in (z0, z1))
        add(parts, ir("retroreflector"), frustum((0, 0, z0), (0, 0, z1), r0, r1, CONE_SECTIONS))
    return parts


def _delineator(material: str) -> dict:
    """A roadside delineator post (German "Leitpfosten", 1 m above ground): white post, black band, a
    retroreflector on either face (RPS / TL-Leitpfosten, assumed proportions)."""
    parts: dict = {}
    add(parts, ir(material or "plastic_white"), box(*DELINEATOR_POST))
    add(parts, ir("plastic_black"), box(*DELINEATOR_BAND))
    for x in (DELINEATOR_REFLECTOR_X, -DELINEATOR_REFLECTOR_X):
        add(parts, ir("retroreflector"), box((x, 0, DELINEATOR_REFLECTOR_Z), DELINEATOR_REFLECTOR_SIZE))
    return parts


#: the tree crown's leaves: 512 facets of 4 % of the box's size in the crown's ellipsoid give an optical depth of
#: about 1.2 across its middle, i.e. ~30 % of a beam passes straight through (Beer–Lambert gap fraction with a
#: spherical leaf-angle distribution, G = 0.5, Ross 1981 / Nilson 1971; urban crowns' gap fractions are 0.2–0.4,
#: assumed from that range)
CROWN_FACETS, CROWN_FACET_SIZE = 512, 0.04
#: a tree: its trunk up to this share of the height, radius and sections; its crown from there to the top (centre
#: and half height); a seed of its own, so one shared crown is the same in every run
TREE_TRUNK_TOP, TREE_TRUNK_RADIUS, TREE_TRUNK_SECTIONS = 0.55, 0.05, 12
TREE_CROWN_Z, TREE_CROWN_HALF_HEIGHT, TREE_SEED = 0.675, 0.325, 7
#: a bush: a ball of leaves (centre z, semi-axes; bigger, fewer-per-volume leaves than a crown, assumed) and its seed
BUSH_CENTRE_Z, BUSH_RADIUS, BUSH_FACETS, BUSH_FACET_SIZE, BUSH_SEED = 0.5, 0.47, 700, 0.06, 11
#: a gantry: legs at ± y (centre z, size), the beam (centre, size)
GANTRY_LEG_Y, GANTRY_LEG = 0.45, (0.4, (0.2, 0.1, 0.8))
GANTRY_BEAM = ((0, 0, 0.9), (0.2, 1.0, 0.2))
#: a building-site barrier (TL-Absperrschranken; proportions assumed): the board (centre, size), feet at ± y with a
#: post (centre z, size) and a foot plate (centre z, size)
SITE_BOARD = ((0, 0, 0.8), (0.03, 1.0, 0.25))
SITE_FOOT_Y, SITE_POST, SITE_FOOT = 0.4, (0.35, (0.05, 0.05, 0.7)), (0.02, (0.6, 0.2, 0.04))
#: a speed bump: its arc in this many points, its height as a share of its box's
BUMP_POINTS, BUMP_HEIGHT = 17, 0.1
#: a bridge: its deck (centre z, size) on piers at ± x (centre z, size)
BRIDGE_DECK = (0.92, (1.0, 1.0, 0.16))
BRIDGE_PIER_X, BRIDGE_PIER = 0.25, (0.42, (0.06, 0.5, 0.84))


def _tree(material: str) -> dict:
    rng = np.random.default_rng(TREE_SEED)  # one shared crown: the same for every run
    parts: dict = {}
    add(parts, ir("bark"), cylinder_between((0, 0, 0), (0, 0, TREE_TRUNK_TOP), TREE_TRUNK_RADIUS, TREE_TRUNK_SECTIONS))
    add(parts, ir(material or "leaves_deciduous"),
        leaf_cloud(rng, (0.0, 0.0, TREE_CROWN_Z),
                   (0.5 - CROWN_FACET_SIZE, 0.5 - CROWN_FACET_SIZE, TREE_CROWN_HALF_HEIGHT - CROWN_FACET_SIZE),
                   CROWN_FACETS, CROWN_FACET_SIZE))
    return parts


def _bush(material: str) -> dict:
    rng = np.random.default_rng(BUSH_SEED)
    return {ir(material or "leaves_deciduous"): [leaf_cloud(rng, (0, 0, BUSH_CENTRE_Z), (BUSH_RADIUS,) * 3,
                                                            BUSH_FACETS, BUSH_FACET_SIZE)]}


def _barrier(material: str) -> dict:
    """A concrete safety-shape barrier along the box's length (x)."""
    line = np.array([[-0.5, 0.0, 0.0], [0.5, 0.0, 0.0]])
    return {ir(material or "concrete"): [sweep(line, JERSEY_PROFILE_M, closed=True)]}


def _gantry(material: str) -> dict:
    """An overhead structure: two legs at the box's sides (y) and a beam across the top fifth."""
    parts: dict = {}
    steel = ir(material or "steel_galvanized")
    leg_z, leg_size = GANTRY_LEG
    for y in (-GANTRY_LEG_Y, GANTRY_LEG_Y):
        add(parts, steel, box((0, y, leg_z), leg_size))
    add(parts, steel, box(*GANTRY_BEAM))
    return parts


def _site_barrier(material: str) -> dict:
    """A building-site barrier board (red and white retroreflective sheeting, TL-Absperrschranken) on two feet."""
    parts: dict = {}
    add(parts, ir("retroreflector"), box(*SITE_BOARD))
    (post_z, post_size), (foot_z, foot_size) = SITE_POST, SITE_FOOT
    for y in (-SITE_FOOT_Y, SITE_FOOT_Y):
        add(parts, ir(material or "metal_painted"), box((0, y, post_z), post_size))
        add(parts, ir("plastic_black"), box((0, y, foot_z), foot_size))
    return parts


def _speed_bump(material: str) -> dict:
    """A hump across the road: a circular segment along x, extruded across y."""
    angle = np.linspace(0.0, np.pi, BUMP_POINTS)
    line = np.array([[0.0, -0.5, 0.0], [0.0, 0.5, 0.0]])
    profile = np.column_stack([0.5 * np.cos(angle), np.sin(angle) * BUMP_HEIGHT])
    vertices, faces = sweep(line, profile)
    return {ir(material or "asphalt"): [(vertices[:, [1, 0, 2]] * (1, -1, 1), faces)]}


def _bridge(material: str) -> dict:
    """A deck across the box's top sixth on two piers."""
    parts: dict = {}
    concrete = ir(material or "concrete")
    deck_z, deck_size = BRIDGE_DECK
    add(parts, concrete, box((0, 0, deck_z), deck_size))
    pier_z, pier_size = BRIDGE_PIER
    for x in (-BRIDGE_PIER_X, BRIDGE_PIER_X):
        add(parts, concrete, box((x, 0, pier_z), pier_size))
    return parts


def _reflective(material: str) -> dict:
    return _block(material, "retroreflector")


def _wall(material: str) -> dict:
    return _block(material, "concrete")


_CLASS_PARTS = {"pole": _pole, "pylon": _cone, "delineator": _delineator, "tree": _tree, "vegetation": _bush,
                "barrier": _barrier, "overhead_structure": _gantry, "construction_site_element": _site_barrier,
                "speed_bump": _speed_bump, "bridge": _bridge, "reflective_structure": _reflective,
                "wall": _wall, "curbstone": _wall}
