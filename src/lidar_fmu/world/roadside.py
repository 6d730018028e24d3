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
        sides = 8 if name == "STOP" else 24
        angle = -np.arange(sides) * 2 * np.pi / sides + (np.pi / 8 if sides == 8 else 0.0)
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
        builder.add(_posed(front, pose), ir("retroreflector"), plate.id)
        builder.add(_posed(rest, pose), ir("aluminum"), plate.id)
        if np.isfinite(ground) and bottom - ground < HANGING_ABOVE_M:
            behind = pose[:3, :3] @ np.array([-(half + SIGN_POST_RADIUS_M), 0.0, 0.0]) + pose[:3, 3]
            builder.add(cylinder_between((behind[0], behind[1], ground), (behind[0], behind[1], bottom + height),
                                         SIGN_POST_RADIUS_M, 12), ir("aluminum"), plate.id)


def add_lights(builder: MeshBuilder, lights, ground_z: Callable[[np.ndarray], np.ndarray],
               problems: list[str]) -> None:
    """Traffic lights: a dark housing around each light OSI gives, a lens on its face, a pole to the ground."""
    for light in lights:
        length, width, height = (max(v, 0.05) for v in light.dimension_m)
        pose = pose_matrix(light.position_m, light.orientation_rad)
        ground = float(ground_z(np.asarray(light.position_m)[None, :2])[0])
        bottom = light.position_m[2] - 0.5 * height
        if np.isfinite(ground) and abs(bottom - ground) > MAX_ABOVE_GROUND_M:
            problems.append(f"traffic_light {light.id}: {bottom - ground:.0f} m above the ground under it; left out")
            continue
        depth = max(length, 0.25)
        margin = LIGHT_HOUSING_MARGIN_M
        housing = box((-0.5 * depth, 0.0, 0.0), (depth, width + margin, height + margin))
        lens = box((0.005, 0.0, 0.0), (0.01, width, height))
        builder.add(_posed(housing, pose), ir("plastic_black"), light.id)
        builder.add(_posed(lens, pose), ir("glass_clear"), light.id)
        if np.isfinite(ground) and bottom - ground < 2 * MAX_ABOVE_GROUND_M / 3:
            behind = pose[:3, :3] @ np.array([-depth - LIGHT_POLE_RADIUS_M, 0.0, 0.0]) + pose[:3, 3]
            builder.add(cylinder_between((behind[0], behind[1], ground), (behind[0], behind[1],
                                                                          light.position_m[2] + 0.5 * height),
                                         LIGHT_POLE_RADIUS_M, 12), ir("metal_painted"), light.id)


def _posed(shape, pose: np.ndarray):
    vertices, faces = shape
    return np.asarray(vertices, float) @ pose[:3, :3].T + pose[:3, 3], faces


# ------------------------------------------------------------------------------------------------ stationary objects


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
        inner = polygon * np.maximum(0.0, 1.0 - 1.0 / max(np.abs(polygon).max(), 1e-6))
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
    return {ir(material or "aluminum"): [cylinder_between((0, 0, 0), (0, 0, 1), 0.5, 16)]}


def _cone(material: str) -> dict:
    """A traffic cone (EN 13422): base plate, orange cone, two retroreflective sleeves; 0.75 m reference size."""
    parts: dict = {}
    add(parts, ir("plastic_black"), box((0, 0, 0.02), (0.38, 0.38, 0.04)))
    add(parts, ir(material or "plastic_orange"), frustum((0, 0, 0.04), (0, 0, 0.75), 0.16, 0.03, 24))
    for z0, z1 in ((0.35, 0.45), (0.52, 0.6)):
        r0, r1 = (0.16 - 0.13 * (z - 0.04) / 0.71 + 0.003 for z in (z0, z1))
        add(parts, ir("retroreflector"), frustum((0, 0, z0), (0, 0, z1), r0, r1, 24))
    return parts


def _delineator(material: str) -> dict:
    """A roadside delineator post (German "Leitpfosten", 1 m above ground): white post, black band, a
    retroreflector on either face (RPS / TL-Leitpfosten, assumed proportions)."""
    parts: dict = {}
    add(parts, ir(material or "plastic_white"), box((0, 0, 0.4), (0.12, 0.1, 0.8)))
    add(parts, ir("plastic_black"), box((0, 0, 0.9), (0.12, 0.1, 0.2)))
    for x in (0.061, -0.061):
        add(parts, ir("retroreflector"), box((x, 0, 0.88), (0.002, 0.05, 0.1)))
    return parts


#: the tree crown's leaves: 512 facets of 4 % of the box's size in the crown's ellipsoid give an optical depth of
#: about 1.2 across its middle, i.e. ~30 % of a beam passes straight through (Beer–Lambert gap fraction with a
#: spherical leaf-angle distribution, G = 0.5, Ross 1981 / Nilson 1971; urban crowns' gap fractions are 0.2–0.4,
#: assumed from that range)
CROWN_FACETS, CROWN_FACET_SIZE = 512, 0.04


def _tree(material: str) -> dict:
    rng = np.random.default_rng(7)  # one shared crown: the same for every run
    parts: dict = {}
    add(parts, ir("bark"), cylinder_between((0, 0, 0), (0, 0, 0.55), 0.05, 12))
    add(parts, ir(material or "leaves_deciduous"),
        leaf_cloud(rng, (0.0, 0.0, 0.675), (0.5 - CROWN_FACET_SIZE, 0.5 - CROWN_FACET_SIZE, 0.325 - CROWN_FACET_SIZE),
                   CROWN_FACETS, CROWN_FACET_SIZE))
    return parts


def _bush(material: str) -> dict:
    rng = np.random.default_rng(11)
    return {ir(material or "leaves_deciduous"): [leaf_cloud(rng, (0, 0, 0.5), (0.47, 0.47, 0.47), 700, 0.06)]}


def _barrier(material: str) -> dict:
    """A concrete safety-shape barrier along the box's length (x)."""
    line = np.array([[-0.5, 0.0, 0.0], [0.5, 0.0, 0.0]])
    return {ir(material or "concrete"): [sweep(line, JERSEY_PROFILE_M, closed=True)]}


def _gantry(material: str) -> dict:
    """An overhead structure: two legs at the box's sides (y) and a beam across the top fifth."""
    parts: dict = {}
    steel = ir(material or "steel_galvanized")
    for y in (-0.45, 0.45):
        add(parts, steel, box((0, y, 0.4), (0.2, 0.1, 0.8)))
    add(parts, steel, box((0, 0, 0.9), (0.2, 1.0, 0.2)))
    return parts


def _site_barrier(material: str) -> dict:
    """A building-site barrier board (red and white retroreflective sheeting, TL-Absperrschranken) on two feet."""
    parts: dict = {}
    add(parts, ir("retroreflector"), box((0, 0, 0.8), (0.03, 1.0, 0.25)))
    for y in (-0.4, 0.4):
        add(parts, ir(material or "metal_painted"), box((0, y, 0.35), (0.05, 0.05, 0.7)))
        add(parts, ir("plastic_black"), box((0, y, 0.02), (0.6, 0.2, 0.04)))
    return parts


def _speed_bump(material: str) -> dict:
    """A hump across the road: a circular segment along x, extruded across y."""
    angle = np.linspace(0.0, np.pi, 17)
    line = np.array([[0.0, -0.5, 0.0], [0.0, 0.5, 0.0]])
    profile = np.column_stack([0.5 * np.cos(angle), np.sin(angle) * 0.1])
    vertices, faces = sweep(line, profile)
    return {ir(material or "asphalt"): [(vertices[:, [1, 0, 2]] * (1, -1, 1), faces)]}


def _bridge(material: str) -> dict:
    """A deck across the box's top sixth on two piers."""
    parts: dict = {}
    concrete = ir(material or "concrete")
    add(parts, concrete, box((0, 0, 0.92), (1.0, 1.0, 0.16)))
    for x in (-0.25, 0.25):
        add(parts, concrete, box((x, 0, 0.42), (0.06, 0.5, 0.84)))
    return parts


def _reflective(material: str) -> dict:
    return _block(material, "retroreflector")


def _wall(material: str) -> dict:
    return _block(material, "concrete")


_CLASS_PARTS = {"pole": _pole, "pylon": _cone, "delineator": _delineator, "tree": _tree, "vegetation": _bush,
                "barrier": _barrier, "overhead_structure": _gantry, "construction_site_element": _site_barrier,
                "speed_bump": _speed_bump, "bridge": _bridge, "reflective_structure": _reflective,
                "wall": _wall, "curbstone": _wall}
