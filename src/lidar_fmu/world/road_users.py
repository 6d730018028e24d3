"""Road users by what OSI says they are: parametric meshes of vehicles, riders, pedestrians and animals.

Each class mesh is built once, in the OSI object frame (origin at the
bounding-box centre, x forward, y left, z up) and normalised to the unit box
[-0.5, 0.5]³, so an instance pose ``pose · diag(length, width, height, 1)``
fits it into any object's ``base.dimension`` (as the unit box of an object
without a model is). Parts carry visual names ``ir:<IR material>``
(:mod:`lidar_fmu.physics.materials`): paint, glass, tyres, retroreflective
licence plates and rear reflectors, lamps.
"""
from __future__ import annotations

import functools
import itertools

import numpy as np

from ..geometry.scene import Mesh, merge
from .shapes import (
    MeshBuilder,
    add,
    box,
    compact,
    cube_surface,
    cylinder_between,
    ellipsoid,
    frustum,
    normalised,
    place,
    rotation_x,
    rounded_box,
    superellipse_x,
    superellipsoid,
    unit_annulus,
    unit_cylinder,
    unit_icosphere,
)

# --------------------------------------------------------------------------------------------- car proportions
# Where no source is cited, a value is assumed: read off photographs of typical cars, because no standard gives a
# body's shape; a lidar sees these parts at a few centimetres' resolution at best.

#: bonnet and boot lids fall from this share of the half length to the ends, by this share of the body's half
#: height at the top
LID_START_SHARE, LID_SPAN_SHARE, LID_DROP_SHARE = 0.45, 0.55, 0.35
#: the cabin overlaps the body below the belt line by this much (m), so there is no seam
CABIN_OVERLAP_M = 0.12
#: cabin width as a share of the body's; its superellipsoid exponent (the larger, the squarer)
CABIN_WIDTH_SHARE, CABIN_EXPONENT = 0.92, 6.0
#: how the windscreen and rear window lean in with height (taper · rise^this) and the sides' tumblehome share
TAPER_POWER, TUMBLEHOME_SHARE = 1.2, 0.12
#: glass band of the cabin: from this far above the belt line (m) up to this share of the cabin's half height
#: (parameter t of its cube surface, -1 at the bottom, 1 at the top)
GLASS_ABOVE_BELT_M, GLASS_TOP_T = 0.03, 0.75
#: side glass ends at the A and C pillars (|t| of the length), the B pillar stands at this t; windscreen and rear
#: window span this |t| of the width
PILLAR_AC_T, PILLAR_B_T, END_GLASS_T = 0.82, 0.1, 0.8
#: a cube-surface parameter within this of ±1 lies on that side (float rounding)
SIDE_TOLERANCE = 1e-9
#: tyre width (m): 205 mm tyres on cars narrower than 1.85 m, 235–245 mm on wider ones (ETRTO sizes of the models
#: in CAR_SPECS); the tyre's outer side stands this far inside the body (m)
NARROW_TYRE_M, WIDE_TYRE_M, WIDE_CAR_M, TYRE_INSET_M = 0.22, 0.24, 1.85, 0.03
#: rim radius over tyre radius (an R16–R17 rim in a 16–17 in wheel's tyre: 0.62–0.63) and the rim's tyre width
#: less this (m); sections of tyre and rim
TYRE_INNER_SHARE, RIM_SHARE, RIM_NARROWER_M, TYRE_SECTIONS, RIM_SECTIONS = 0.62, 0.63, 0.02, 32, 24
#: head and tail lamps: this far below the belt line (m), their centres this far inside the body's sides (m), sunk
#: this far into the body (m), semi-axes (m)
LAMP_BELOW_BELT_M, LAMP_INSET_M, LAMP_SINK_M, LAMP_RADII_M = 0.17, 0.27, 0.045, (0.07, 0.22, 0.07)
#: icosphere subdivisions of lamps, heads and round parts (320 triangles: round enough at a lidar's resolution)
ROUND_SUBDIVISIONS = 2
#: bumpers: half depth and half height (m), this far inside the body's sides and ends (m), centred this high
#: above the clearance (m), cells of their rounded box
BUMPER_HALF_DEPTH_M, BUMPER_HALF_HEIGHT_M, BUMPER_INSET_M, BUMPER_END_INSET_M = 0.12, 0.1, 0.02, 0.1
BUMPER_ABOVE_CLEARANCE_M, BUMPER_CELLS = 0.16, 6


def car_body(spec):
    """Lower body from the sill to the belt line, with the bonnet falling to the nose."""
    half = np.array([spec["length_m"] / 2, spec["width_m"] / 2, (spec["belt_m"] - spec["clearance_m"]) / 2])
    v, f = rounded_box(half, spec["body_cells"])
    # Bonnet and boot lids slope down towards the ends (quadratic in x, more on top).
    ends = np.clip((np.abs(v[:, 0]) - LID_START_SHARE * half[0]) / (LID_SPAN_SHARE * half[0]), 0.0, 1.0) ** 2
    top = np.clip(v[:, 2] / half[2], 0.0, 1.0)
    v[:, 2] -= LID_DROP_SHARE * half[2] * ends * top
    v[:, 2] += spec["clearance_m"] + half[2]
    return (v, f), half


def car_cabin(spec):
    """Greenhouse above the belt line; its surface is split into glass and paint.

    Glass is chosen per quad in the undeformed cube parameters ``t`` so window
    edges follow grid lines (straight) instead of zig-zagging across triangles.
    """
    z0 = spec["belt_m"] - CABIN_OVERLAP_M
    half = np.array([spec["cabin_length_m"] / 2, CABIN_WIDTH_SHARE * spec["width_m"] / 2, (spec["height_m"] - z0) / 2])
    t, f = cube_surface(spec["cabin_cells"])
    v = superellipsoid(t, half, CABIN_EXPONENT)
    rise = np.clip((v[:, 2] + half[2]) / (2 * half[2]), 0.0, 1.0)  # 0 at the belt, 1 at the roof
    taper = np.where(v[:, 0] > 0, spec["taper_front"], spec["taper_rear"])
    v[:, 0] *= 1.0 - taper * rise ** TAPER_POWER
    v[:, 1] *= 1.0 - TUMBLEHOME_SHARE * rise  # tumblehome: side windows lean inwards
    v += (spec["cabin_x_m"], 0.0, z0 + half[2])
    corners = t[f]
    quad = 0.5 * (corners.min(axis=1) + corners.max(axis=1))  # a half-quad triangle spans its whole quad
    step = 2.0 / spec["cabin_cells"]
    band = (quad[:, 2] > (spec["belt_m"] + GLASS_ABOVE_BELT_M - z0) / half[2] - 1.0) & (quad[:, 2] < GLASS_TOP_T)
    side = np.abs(quad[:, 1]) > 1.0 - SIDE_TOLERANCE
    ends = np.abs(quad[:, 0]) > 1.0 - SIDE_TOLERANCE
    side_glass = side & (np.abs(quad[:, 0]) < PILLAR_AC_T) & (np.abs(quad[:, 0] - PILLAR_B_T) > 0.5 * step)
    if spec["cargo_x_m"] is not None:  # panel van: no side glass behind the cab
        side_glass &= quad[:, 0] > (spec["cargo_x_m"] - spec["cabin_x_m"]) / half[0]
    glass = band & (side_glass | (ends & (np.abs(quad[:, 1]) < END_GLASS_T)))
    return compact(v, f[~glass]), compact(v, f[glass])


def car_wheels(spec):
    """Four tyres (annuli) with rims, axis along y, standing on z = 0."""
    r = spec["wheel_radius_m"]
    tyre_w = NARROW_TYRE_M if spec["width_m"] < WIDE_CAR_M else WIDE_TYRE_M
    y = spec["width_m"] / 2 - tyre_w / 2 - TYRE_INSET_M
    axle_x = spec["wheelbase_m"] / 2
    to_y = rotation_x(np.pi / 2)  # cylinder axis z → y
    tyres, rims = [], []
    for x in (-axle_x, axle_x):
        for sy in (-y, y):
            centre = (x, sy, r)
            tyres.append(place(unit_annulus(TYRE_INNER_SHARE, TYRE_SECTIONS), (r, r, tyre_w), to_y, centre))
            rims.append(place(unit_cylinder(RIM_SECTIONS), (RIM_SHARE * r, RIM_SHARE * r, tyre_w - RIM_NARROWER_M),
                              to_y, centre))
    return merge(tyres), merge(rims)


def car_lights_and_bumpers(spec, body_half):
    """Head/tail lights seated into the body ends, bumpers below them."""
    centre_z = spec["clearance_m"] + body_half[2]
    light_z = spec["belt_m"] - LAMP_BELOW_BELT_M
    light_y = spec["width_m"] / 2 - LAMP_INSET_M
    unit = unit_icosphere(ROUND_SUBDIVISIONS)
    lights: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {"headlight_glass": [], "taillight_red": []}
    for end, material in ((1.0, "headlight_glass"), (-1.0, "taillight_red")):
        for sy in (-light_y, light_y):
            surface_x = superellipse_x(body_half, sy, light_z - centre_z)
            centre = (end * (surface_x - LAMP_SINK_M), sy, light_z)
            lights[material].append(place(unit, LAMP_RADII_M, None, centre))
    bumper_half = np.array([BUMPER_HALF_DEPTH_M, spec["width_m"] / 2 - BUMPER_INSET_M, BUMPER_HALF_HEIGHT_M])
    bumpers = []
    for end in (1.0, -1.0):
        x = end * (spec["length_m"] / 2 - BUMPER_END_INSET_M)
        v, f = rounded_box(bumper_half, BUMPER_CELLS)
        bumpers.append((v + (x, 0.0, spec["clearance_m"] + BUMPER_ABOVE_CLEARANCE_M), f))
    return {k: merge(v) for k, v in lights.items()}, merge(bumpers)


def car_parts(spec) -> dict:
    """A car in its own frame, not yet centred: ground at z = 0, x forward."""
    parts: dict = {}
    body, body_half = car_body(spec)
    paint_cabin, glass = car_cabin(spec)
    add(parts, spec["paint"], body)
    add(parts, spec["paint"], paint_cabin)
    add(parts, "car_glass", glass)
    tyres, rims = car_wheels(spec)
    add(parts, "tyre_rubber", tyres)
    add(parts, "wheel_rim", rims)
    lights, bumpers = car_lights_and_bumpers(spec, body_half)
    for material, vf in lights.items():
        add(parts, material, vf)
    add(parts, "car_plastic_black", bumpers)
    return parts


# ------------------------------------------------------------------------------------------------ classes

#: visual names of :func:`car_parts` (the demo's car models keep them, mapped by the street's material map) → the
#: IR materials the class meshes name directly (the same as ``physics/materials/data/street_map.yaml``)
CAR_PART_MATERIALS = {"car_glass": "glass_clear", "tyre_rubber": "rubber_tyre", "wheel_rim": "aluminum",
                      "headlight_glass": "glass_clear", "taillight_red": "glass_clear",
                      "car_plastic_black": "plastic_black"}

#: body paint of road users whose OSI object says no colour: the world's car colours by share, Axalta Global
#: Automotive Color Popularity Report 2023 (white 35 %, black 19 %, grey 18 %, silver 10 %, blue 7 %, red 6 %,
#: others 5 %), each as the IR material of its near-infrared reflectance: grey and blue as a dark paint, because
#: dark greys and dark blues are tinted with carbon black, which absorbs the lidar's near infrared as black paint
#: does (BASF, on its 2018-19 automotive colours: "dark paints such as black, gray and dark blue tend to absorb the
#: radiation"); the other colours (beige, brown, green, yellow, ...) as a mid-tone paint
PAINT_SHARES = (("car_paint_white", 0.35), ("car_paint_black", 0.19), ("metal_painted_dark", 0.18),
                ("car_paint_silver", 0.10), ("metal_painted_dark", 0.07), ("car_paint_red", 0.06),
                ("metal_painted", 0.05))
PAINTS = tuple(sorted({name for name, _ in PAINT_SHARES}))
#: an id's paint draw: Fibonacci hashing (Knuth, TAOCP vol. 3, §6.4: multiply by 2⁶⁴/φ, keep 64 bits), scaled to
#: [0, 1)
FIBONACCI_HASH, HASH_MASK, HASH_RANGE = 0x9E3779B97F4A7C15, 0xFFFFFFFFFFFFFFFF, 2.0**64

#: car classes: the proportions of a typical model of each (the instance pose fits the mesh into the object's own
#: box). Small: VW up! 3.60 × 1.64 × 1.50 m; compact: VW Golf 8 4.28 × 1.79 × 1.46 m; car (OSI's medium): VW Passat
#: B8 4.77 × 1.83 × 1.46 m; luxury: Mercedes-Benz S-Class W223 5.18 × 1.95 × 1.50 m; van: VW Crafter 5.99 × 2.04 ×
#: 2.36 m (manufacturers' data sheets); clearance, belt line, cabin, tapers, wheels and mesh cells assumed from
#: photographs of the same models, one row per class in the columns of _CAR_SPEC_FIELDS
_CAR_SPEC_FIELDS = ("length_m", "width_m", "height_m", "clearance_m", "belt_m", "cabin_length_m", "cabin_x_m",
                    "taper_front", "taper_rear", "wheel_radius_m", "wheelbase_m", "body_cells", "cabin_cells",
                    "cargo_x_m")
CAR_SPECS: dict[str, dict] = {name: dict(zip(_CAR_SPEC_FIELDS, row)) for name, row in {
    #              length width height clear. belt  cabin  cab_x  taper f/r    wheel wheelb. cells   cargo_x
    "small_car": (3.6, 1.64, 1.5, 0.15, 0.92, 2.3, -0.2, 0.45, 0.12, 0.3, 2.42, 14, 12, None),
    "compact_car": (4.28, 1.79, 1.46, 0.15, 0.92, 2.6, -0.3, 0.48, 0.15, 0.32, 2.63, 14, 12, None),
    "car": (4.77, 1.83, 1.46, 0.15, 0.92, 2.8, -0.25, 0.5, 0.42, 0.33, 2.79, 16, 14, None),
    "luxury_car": (5.18, 1.95, 1.5, 0.14, 0.95, 3.1, -0.3, 0.5, 0.45, 0.35, 3.11, 16, 14, None),
    "van": (5.99, 2.04, 2.36, 0.2, 1.15, 5.0, -0.45, 0.2, 0.02, 0.36, 3.64, 18, 16, 0.6),
}.items()}
#: classes drawn as one of the cars above
CAR_CLASSES = {"land_vehicle": "car", "vehicle": "car"}
#: a rider (or a person on a wheelchair or scooter) is drawn where the object's box is at least this tall (m): OSI
#: boxes of ridden two-wheelers include the rider
RIDER_HEIGHT_M = 1.3
#: licence plates (EU: 520 × 110 mm, retroreflective: DIN 74069 / ECE sheeting) and rear reflex reflectors (ECE R3
#: class IA, red cube-corner prisms whose dye is transparent in the near infrared): retroreflective
PLATE_SIZE_M = (0.52, 0.11)
#: plate and reflector thickness (m) and how far they stand out of the body (m): assumed, a pressed aluminium plate
PLATE_THICKNESS_M, PLATE_PROUD_M = 0.01, 0.005
#: rear reflex reflectors (width, height m; ECE R3 class IA: at least 25 cm², typical 80 × 40 mm), this share of
#: the width out from the centre line
REFLECTOR_SIZE_M, REFLECTOR_Y_SHARE = (0.08, 0.04), 0.4
#: a car's plates and reflectors this high above its clearance (m): assumed, as on the models in CAR_SPECS
PLATE_ABOVE_CLEARANCE_M, REFLECTOR_ABOVE_CLEARANCE_M = 0.3, 0.35
#: a car's seats, placed from the H-point (the seated hip joint of SAE J826's manikin): this far below the belt
#: line (m; assumed: SAE J1100's H5, the H-point's height above the ground, is about 0.50-0.55 m in sedans whose
#: belt lines stand 0.9 m up); the front row and the rear bench this far from the cabin's centre (m)
H_POINT_BELOW_BELT_M, SEAT_ROWS_X_M = 0.4, (0.25, -0.6)
#: cushions (depth, thickness m) under the H-point; backrests (depth m) set back (m) and up to this far above the
#: H-point (m): assumed, a backrest ends at the shoulder blades of a seated adult, the head restraint above it
CUSHION_DEPTH_M, CUSHION_THICKNESS_M = 0.5, 0.25
BACKREST_DEPTH_M, BACKREST_BACK_M, BACKREST_ABOVE_H_M = 0.12, 0.25, 0.55
#: two front seats, each this share of the car's width, centred this share of it out from the middle (assumed:
#: 0.5 m seats either side of a console; SAE J1100's W20, the driver's offset from the centre line, is about
#: 0.37 m); the rear bench this share of the width
FRONT_SEAT_WIDTH_SHARE, FRONT_SEAT_Y_SHARE, REAR_BENCH_WIDTH_SHARE = 0.28, 0.2, 0.8
#: head restraints over the outboard seats of both rows: their tops this far above the H-point (m; FMVSS 202a
#: S4.2.1: front outboard at least 800 mm, rear outboard 750 mm, taken alike) and (depth, width, height m; width:
#: FMVSS 202a S4.2.3 asks at least 170 mm, 0.25 m assumed): a beam through the side windows above the backrests
#: meets only these, as through a real car's cabin
HEADREST_TOP_ABOVE_H_M, HEADREST_SIZE_M = 0.8, (0.1, 0.25, 0.2)
#: dashboard: its front this far behind the cabin's front (m), (depth m, width share, height m)
DASHBOARD_BACK_M, DASHBOARD_SIZE = 0.35, (0.4, 0.85, 0.25)


def paint_of(object_id: int) -> str:
    """The body paint of an object that says no colour: drawn from :data:`PAINT_SHARES` by a hash of its id (the
    same object keeps its colour, run after run)."""
    u = ((int(object_id) * FIBONACCI_HASH) & HASH_MASK) / HASH_RANGE
    total = 0.0
    for name, share in PAINT_SHARES:
        total += share
        if u < total:
            return name
    return PAINT_SHARES[-1][0]


#: where each paint's share ends, summed in :func:`paint_of`'s order (so that both draw alike)
_PAINT_ENDS = tuple(itertools.accumulate(share for _, share in PAINT_SHARES))


def paint_indices(object_ids) -> np.ndarray:
    """:func:`paint_of` of many ids (non-negative, below 2⁶⁴) at once, as indices into :data:`PAINT_SHARES`: uint64
    products wrap modulo 2⁶⁴ as the hash's mask keeps them."""
    with np.errstate(over="ignore"):
        u = (np.asarray(object_ids).astype(np.uint64) * np.uint64(FIBONACCI_HASH)).astype(np.float64) / HASH_RANGE
    return np.minimum(np.searchsorted(_PAINT_ENDS, u, side="right"), len(PAINT_SHARES) - 1).astype(np.int64)


def paints_of(object_ids) -> list[str]:
    """:func:`paint_of` of many ids at once (:func:`paint_indices`)."""
    return [PAINT_SHARES[k][0] for k in paint_indices(object_ids).tolist()]


def _ir_parts(parts: dict, paint: str) -> dict:
    """``parts`` with their visual names turned into ``ir:`` names (``paint`` for the body)."""
    out: dict = {}
    for material, shapes in parts.items():
        name = paint if material.startswith("car_paint") or material == "paint" else CAR_PART_MATERIALS.get(
            material, material)
        out.setdefault(name if name.startswith("ir:") else f"ir:{name}", []).extend(shapes)
    return out


def _plates_and_reflectors(parts: dict, length_m: float, width_m: float, plate_z_m: float, front: bool = True,
                           reflector_z_m: float | None = None) -> None:
    """Licence plates at the ends (front too unless ``front`` is False), two rear reflex reflectors."""
    w, h = PLATE_SIZE_M
    ends = (1.0, -1.0) if front else (-1.0,)
    for end in ends:
        add(parts, "ir:retroreflector", box((end * (0.5 * length_m + PLATE_PROUD_M), 0.0, plate_z_m),
                                            (PLATE_THICKNESS_M, w, h)))
    z = plate_z_m if reflector_z_m is None else reflector_z_m
    for y in (-REFLECTOR_Y_SHARE * width_m, REFLECTOR_Y_SHARE * width_m):
        add(parts, "ir:retroreflector", box((-(0.5 * length_m + PLATE_PROUD_M), y, z),
                                            (PLATE_THICKNESS_M, *REFLECTOR_SIZE_M)))


def _seats(parts: dict, cabin_x_m: float, h_point_z_m: float, width_m: float) -> None:
    """Two front seats and a rear bench, each a cushion and a backrest, with head restraints over the outboard
    places (the sizes above)."""
    front_y = FRONT_SEAT_Y_SHARE * width_m
    rows = ((cabin_x_m + SEAT_ROWS_X_M[0], (-front_y, front_y), FRONT_SEAT_WIDTH_SHARE * width_m),
            (cabin_x_m + SEAT_ROWS_X_M[1], (0.0,), REAR_BENCH_WIDTH_SHARE * width_m))
    back_z = h_point_z_m + 0.5 * BACKREST_ABOVE_H_M
    rest_depth, rest_width, rest_height = HEADREST_SIZE_M
    rest_z = h_point_z_m + HEADREST_TOP_ABOVE_H_M - 0.5 * rest_height
    for x, ys, seat_width in rows:
        back_x = x - BACKREST_BACK_M
        for y in ys:
            add(parts, "ir:textile", box((x, y, h_point_z_m - 0.5 * CUSHION_THICKNESS_M),
                                         (CUSHION_DEPTH_M, seat_width, CUSHION_THICKNESS_M)))
            add(parts, "ir:textile", box((back_x, y, back_z), (BACKREST_DEPTH_M, seat_width, BACKREST_ABOVE_H_M)))
        for y in (-front_y, front_y):
            add(parts, "ir:textile", box((back_x, y, rest_z), (rest_depth, rest_width, rest_height)))


def _car(spec: dict, paint: str) -> dict:
    """A car with its interior (seats and dashboard behind the glass), plates and rear reflectors."""
    parts = _ir_parts(car_parts({**spec, "paint": "paint"}), f"ir:{paint}")
    length, width = spec["length_m"], spec["width_m"]
    # the body spans −L/2…L/2 (car_body); seats and dashboard stand in the cabin, the window band above the
    # backrests left clear but for the head restraints
    belt, cabin_x = spec["belt_m"], spec["cabin_x_m"]
    _seats(parts, cabin_x, belt - H_POINT_BELOW_BELT_M, width)
    depth, width_share, height = DASHBOARD_SIZE
    add(parts, "ir:plastic_black", box((cabin_x + 0.5 * spec["cabin_length_m"] - DASHBOARD_BACK_M, 0.0, belt),
                                       (depth, width_share * width, height)))
    _plates_and_reflectors(parts, length, width, spec["clearance_m"] + PLATE_ABOVE_CLEARANCE_M,
                           reflector_z_m=spec["clearance_m"] + REFLECTOR_ABOVE_CLEARANCE_M)
    return parts


# ------------------------------------------------------------------------------ trucks, buses, trams and trains
# Overall sizes are the cited models'; where no source is cited a part's size or place is assumed, read off
# photographs of the same models, because no standard gives a body's parts (a lidar sees them at a few centimetres'
# resolution at best). Boxes are written (centre (x, y, z) m, size (length, width, height) m) in the vehicle's own
# frame: ground at z = 0, x forward, the body's middle at x = 0.

#: heavy vehicles' wheels: tyre radius (m) and width (m), near a 315/80 R22.5 truck tyre (1.08 m across, 0.32 m
#: wide, ETRTO) rounded (assumed); the tyre's centre this far inside the body's side (m); sections of tyre and rim
HEAVY_WHEEL_RADIUS_M, HEAVY_TYRE_WIDTH_M, HEAVY_TYRE_INSET_M = 0.5, 0.4, 0.25
HEAVY_TYRE_SECTIONS, HEAVY_RIM_SECTIONS = 24, 16
#: a truck cab: cells and exponent of its rounded box (squarer than a car's, assumed); windows above this share of
#: its height up to this far below its roof (m), the windscreen within this of its front and the side windows within
#: this of its sides (m), as far back as this from its front (m); the driver's seat this far behind the front (m),
#: (depth m, width share, height m)
CAB_CELLS, CAB_EXPONENT = 10, 6.0
CAB_WINDOW_FROM_SHARE, CAB_WINDOW_BELOW_ROOF_M, CAB_GLASS_DEPTH_M, CAB_SIDE_WINDOW_LENGTH_M = 0.62, 0.15, 0.08, 1.0
CAB_SEAT_BACK_M, CAB_SEAT_SIZE = 1.0, (0.6, 0.8, 0.6)
#: thin round parts (forks, handlebars, drawbars, legs): sections of their tubes (assumed: a few centimetres across,
#: 8 sections are round enough at a lidar's resolution)
TUBE_SECTIONS = 8

#: a rigid truck (MAN TGM-like, 9.4 × 2.55 × 3.6 m; EU limits: 2.55 m wide, 4 m high, Directive 96/53/EC): length,
#: width (m); the cab's length, bottom and top (m); the box body's centre x and z, how much shorter than the truck
#: and how high (m)
TRUCK_LENGTH_M, TRUCK_WIDTH_M = 9.4, 2.55
TRUCK_CAB_LENGTH_M, TRUCK_CAB_BOTTOM_M, TRUCK_CAB_TOP_M = 2.2, 0.6, 3.1
TRUCK_BOX_X_M, TRUCK_BOX_Z_M, TRUCK_BOX_SHORTER_M, TRUCK_BOX_HEIGHT_M = -1.1, 2.2, 2.4, 2.8
#: the truck's frame: centre height, how much shorter than the truck, (width, depth) (m)
TRUCK_FRAME_Z_M, TRUCK_FRAME_SHORTER_M, TRUCK_FRAME_SIZE_M = 0.75, 0.4, (0.9, 0.3)
#: side guards (UN ECE R73 lateral protection, lower edge at most 0.55 m above the road): centre x, this far
#: inside the sides, centre height (m), size (m)
TRUCK_GUARD_X_M, TRUCK_GUARD_INSET_M, TRUCK_GUARD_Z_M, TRUCK_GUARD_SIZE_M = -0.5, 0.05, 0.6, (3.0, 0.05, 0.25)
#: axles x (m): one front, a tandem at the rear
TRUCK_AXLES_X_M = (3.0, -2.2, -3.55)
#: heavy vehicles' licence plates this high (m): within the 0.3–1.2 m Regulation (EU) No 1003/2010 allows
HEAVY_PLATE_Z_M = 0.6

#: a semitrailer tractor (6.0 × 2.5 × 3.9 m, a two-axle long-haul tractor): length, width (m); cab length, bottom and
#: top (m); its frame (centre (x, z), how much shorter than the tractor, width, depth m); the fifth wheel (a box:
#: centre, size m, at the usual coupling height of about 1.1–1.2 m, assumed); axles x (m)
TRACTOR_LENGTH_M, TRACTOR_WIDTH_M = 6.0, 2.5
TRACTOR_CAB_LENGTH_M, TRACTOR_CAB_BOTTOM_M, TRACTOR_CAB_TOP_M = 2.3, 0.6, 3.9
TRACTOR_FRAME_X_M, TRACTOR_FRAME_Z_M, TRACTOR_FRAME_SHORTER_M, TRACTOR_FRAME_SIZE_M = -0.6, 0.9, 1.2, (1.0, 0.3)
TRACTOR_FIFTH_WHEEL_M = ((-1.8, 0.0, 1.1), (1.0, 1.2, 0.12))
TRACTOR_AXLES_X_M = (1.5, -2.2)

#: box trailers: (length, width, height m, axles x m, floor height m). A semitrailer 13.6 × 2.55 × 4.0 m (the EU's
#: standard box semitrailer, within Directive 96/53/EC), three axles at the rear; a drawbar trailer 7.0 × 2.55 ×
#: 3.5 m, two axles in its middle (floors and axles assumed)
SEMITRAILER = (13.6, 2.55, 4.0, (-3.8, -5.1, -6.4), 1.25)
DRAWBAR_TRAILER = (7.0, 2.55, 3.5, (0.7, -0.7), 1.1)
#: a drawbar: from this far below the floor (m) this far ahead of the box (m) down to this height (m), radius (m)
DRAWBAR_BELOW_FLOOR_M, DRAWBAR_LENGTH_M, DRAWBAR_HITCH_Z_M, DRAWBAR_RADIUS_M = 0.1, 1.5, 0.5, 0.05
#: a semitrailer's landing legs: this far out from the centre line (m), this far behind its front (m), (side m)
LANDING_LEG_Y_M, LANDING_LEG_BACK_M, LANDING_LEG_SIDE_M = 0.8, 2.0, 0.1
#: a trailer's plate this far below its floor (m)
TRAILER_PLATE_BELOW_FLOOR_M = 0.2

#: a city bus (Mercedes-Benz Citaro-like 12.1 × 2.55 × 3.1 m, data sheet): length, width, height, body above the
#: road from (m); cells and exponent of its rounded box (squarer than a cab, assumed)
BUS_LENGTH_M, BUS_WIDTH_M, BUS_HEIGHT_M, BUS_CLEARANCE_M = 12.1, 2.55, 3.1, 0.3
BUS_CELLS, BUS_EXPONENT = 16, 10.0
#: the bus's side window band (m above the road) ending this far from the ends (m); its windscreen within this of
#: the front (m), from and to (m above the road)
BUS_WINDOWS_Z_M, BUS_WINDOW_END_INSET_M = (1.15, 2.75), 0.2
BUS_WINDSCREEN_DEPTH_M, BUS_WINDSCREEN_Z_M = 0.1, (0.9, 2.8)
#: the bus's seat rows: from this far ahead of its rear to this far behind its front (m), this many rows, centre
#: height (m), (depth, width, height m)
BUS_SEATS_FROM_REAR_M, BUS_SEATS_FROM_FRONT_M, BUS_SEAT_ROWS = 1.5, 2.0, 8
BUS_SEAT_Z_M, BUS_SEAT_SIZE_M = 1.0, (0.5, 2.0, 0.9)
#: the bus's front and rear overhangs (m), its tyres this far inside its sides (m), radius and width (m), its
#: plates this high (m)
BUS_FRONT_OVERHANG_M, BUS_REAR_OVERHANG_M, BUS_TYRE_INSET_M = 2.7, 3.4, 0.3
BUS_WHEEL_RADIUS_M, BUS_TYRE_WIDTH_M, BUS_PLATE_Z_M = 0.5, 0.35, 0.5

#: rail vehicles: (length, width, height, floor m). A low-floor tram (Siemens Combino-like 30 × 2.65 × 3.4 m, floor
#: assumed), a passenger coach (UIC-X 26.4 × 2.83 × 4.05 m, floor 1.2 m assumed)
TRAM = (30.0, 2.65, 3.4, 0.35)
COACH = (26.4, 2.83, 4.05, 1.2)
#: a rail car's rounded box: cells and exponent (as the bus's, assumed); windows from and to this far above the
#: floor (m)
RAILCAR_CELLS, RAILCAR_EXPONENT, RAILCAR_WINDOWS_ABOVE_FLOOR_M = 20, 10.0, (0.9, 2.0)
#: its seat rows: this far from both ends (m), this many, this far above the floor (m), (depth m, narrower than the
#: car by m, height m)
RAILCAR_SEATS_END_M, RAILCAR_SEAT_ROWS, RAILCAR_SEAT_ABOVE_FLOOR_M = 1.5, 10, 0.5
RAILCAR_SEAT_DEPTH_M, RAILCAR_SEAT_NARROWER_M, RAILCAR_SEAT_HEIGHT_M = 0.5, 0.6, 0.9
#: its bogies: at ± this share of its length from its middle, (length m, narrower than the car by m)
RAILCAR_BOGIE_X_SHARE, RAILCAR_BOGIE_LENGTH_M, RAILCAR_BOGIE_NARROWER_M = 0.35, 2.5, 0.5


def _wheels(parts: dict, xs, half_track_m: float, radius_m: float, width_m: float,
            inner: float = TYRE_INNER_SHARE) -> None:
    to_y = rotation_x(np.pi / 2)
    for x in xs:
        for y in (-half_track_m, half_track_m):
            add(parts, "ir:rubber_tyre", place(unit_annulus(inner, HEAVY_TYRE_SECTIONS), (radius_m, radius_m, width_m),
                                                to_y, (x, y, radius_m)))
            add(parts, "ir:aluminum", place(unit_cylinder(HEAVY_RIM_SECTIONS),
                                            (inner * radius_m, inner * radius_m, width_m - RIM_NARROWER_M),
                                            to_y, (x, y, radius_m)))


def _cab(parts: dict, front_x: float, length_m: float, width_m: float, bottom_m: float, top_m: float,
         paint: str) -> None:
    """A truck or bus cab: a rounded box with a windscreen and side windows in its upper third."""
    half = np.array([0.5 * length_m, 0.5 * width_m, 0.5 * (top_m - bottom_m)])
    centre = (front_x - half[0], 0.0, bottom_m + half[2])
    v, f = rounded_box(half, CAB_CELLS, CAB_EXPONENT)
    v = v + centre
    tri = v[f].mean(axis=1)
    window = (tri[:, 2] > bottom_m + CAB_WINDOW_FROM_SHARE * (top_m - bottom_m)) & (
        tri[:, 2] < top_m - CAB_WINDOW_BELOW_ROOF_M) & ((tri[:, 0] > front_x - CAB_GLASS_DEPTH_M) | (
            (np.abs(tri[:, 1]) > 0.5 * width_m - CAB_GLASS_DEPTH_M) & (tri[:, 0] > front_x - CAB_SIDE_WINDOW_LENGTH_M)))
    add(parts, f"ir:{paint}", compact(v, f[~window]))
    add(parts, "ir:glass_clear", compact(v, f[window]))
    depth, width_share, height = CAB_SEAT_SIZE
    add(parts, "ir:textile", box((front_x - CAB_SEAT_BACK_M, 0.0, bottom_m + 0.5 * (top_m - bottom_m)),
                                 (depth, width_share * width_m, height)))


def _heavy_truck(paint: str) -> dict:
    """A rigid truck (:data:`TRUCK_LENGTH_M` …): cab, box body, three axles, side guards, plates and reflectors."""
    parts: dict = {}
    length, width = TRUCK_LENGTH_M, TRUCK_WIDTH_M
    _cab(parts, 0.5 * length, TRUCK_CAB_LENGTH_M, width, TRUCK_CAB_BOTTOM_M, TRUCK_CAB_TOP_M, paint)
    add(parts, "ir:plastic_white", box((TRUCK_BOX_X_M, 0.0, TRUCK_BOX_Z_M),
                                       (length - TRUCK_BOX_SHORTER_M, width, TRUCK_BOX_HEIGHT_M)))
    add(parts, "ir:metal_painted_dark", box((0.0, 0.0, TRUCK_FRAME_Z_M),
                                            (length - TRUCK_FRAME_SHORTER_M, *TRUCK_FRAME_SIZE_M)))
    add(parts, "ir:metal_painted_dark", box((TRUCK_GUARD_X_M, 0.5 * width - TRUCK_GUARD_INSET_M, TRUCK_GUARD_Z_M),
                                            TRUCK_GUARD_SIZE_M))
    add(parts, "ir:metal_painted_dark", box((TRUCK_GUARD_X_M, -0.5 * width + TRUCK_GUARD_INSET_M, TRUCK_GUARD_Z_M),
                                            TRUCK_GUARD_SIZE_M))
    _wheels(parts, TRUCK_AXLES_X_M, 0.5 * width - HEAVY_TYRE_INSET_M, HEAVY_WHEEL_RADIUS_M, HEAVY_TYRE_WIDTH_M)
    _plates_and_reflectors(parts, length, width, HEAVY_PLATE_Z_M)
    return parts


def _semitractor(paint: str) -> dict:
    """A semitrailer tractor (:data:`TRACTOR_LENGTH_M` …): cab, chassis with the fifth wheel, two axles."""
    parts: dict = {}
    length, width = TRACTOR_LENGTH_M, TRACTOR_WIDTH_M
    _cab(parts, 0.5 * length, TRACTOR_CAB_LENGTH_M, width, TRACTOR_CAB_BOTTOM_M, TRACTOR_CAB_TOP_M, paint)
    add(parts, "ir:metal_painted_dark", box((TRACTOR_FRAME_X_M, 0.0, TRACTOR_FRAME_Z_M),
                                            (length - TRACTOR_FRAME_SHORTER_M, *TRACTOR_FRAME_SIZE_M)))
    add(parts, "ir:metal_painted_dark", box(*TRACTOR_FIFTH_WHEEL_M))
    _wheels(parts, TRACTOR_AXLES_X_M, 0.5 * width - HEAVY_TYRE_INSET_M, HEAVY_WHEEL_RADIUS_M, HEAVY_TYRE_WIDTH_M)
    _plates_and_reflectors(parts, length, width, HEAVY_PLATE_Z_M)
    return parts


def _box_trailer(length_m: float, width_m: float, height_m: float, axles, floor_m: float, drawbar: bool) -> dict:
    """A box body on axles: a semitrailer (landing legs at the front) or a drawbar trailer."""
    parts: dict = {}
    add(parts, "ir:plastic_white", box((0.0, 0.0, floor_m + 0.5 * (height_m - floor_m)),
                                       (length_m, width_m, height_m - floor_m)))
    _wheels(parts, axles, 0.5 * width_m - HEAVY_TYRE_INSET_M, HEAVY_WHEEL_RADIUS_M, HEAVY_TYRE_WIDTH_M)
    if drawbar:
        add(parts, "ir:metal_painted_dark", frustum((0.5 * length_m, 0.0, floor_m - DRAWBAR_BELOW_FLOOR_M),
                                                    (0.5 * length_m + DRAWBAR_LENGTH_M, 0.0, DRAWBAR_HITCH_Z_M),
                                                    DRAWBAR_RADIUS_M, DRAWBAR_RADIUS_M, TUBE_SECTIONS))
    else:
        for y in (-LANDING_LEG_Y_M, LANDING_LEG_Y_M):
            add(parts, "ir:metal_painted_dark", box((0.5 * length_m - LANDING_LEG_BACK_M, y, 0.5 * floor_m),
                                                    (LANDING_LEG_SIDE_M, LANDING_LEG_SIDE_M, floor_m)))
    _plates_and_reflectors(parts, length_m, width_m, floor_m - TRAILER_PLATE_BELOW_FLOOR_M, front=False)
    return parts


def _semitrailer(paint: str) -> dict:
    """A box semitrailer (:data:`SEMITRAILER`), three axles at the rear."""
    return _box_trailer(*SEMITRAILER, False)


def _trailer(paint: str) -> dict:
    """A drawbar box trailer (:data:`DRAWBAR_TRAILER`), two axles in its middle."""
    return _box_trailer(*DRAWBAR_TRAILER, True)


def _bus(paint: str) -> dict:
    """A city bus (:data:`BUS_LENGTH_M` …): body, window band, two axles."""
    parts: dict = {}
    length, width, height = BUS_LENGTH_M, BUS_WIDTH_M, BUS_HEIGHT_M
    half = np.array([0.5 * length, 0.5 * width, 0.5 * (height - BUS_CLEARANCE_M)])
    v, f = rounded_box(half, BUS_CELLS, BUS_EXPONENT)
    v = v + (0.0, 0.0, BUS_CLEARANCE_M + half[2])
    tri = v[f].mean(axis=1)
    (window_from, window_to), (screen_from, screen_to) = BUS_WINDOWS_Z_M, BUS_WINDSCREEN_Z_M
    window = (tri[:, 2] > window_from) & (tri[:, 2] < window_to) & (
        np.abs(tri[:, 0]) < 0.5 * length - BUS_WINDOW_END_INSET_M)
    window |= (tri[:, 0] > 0.5 * length - BUS_WINDSCREEN_DEPTH_M) & (tri[:, 2] > screen_from) & (
        tri[:, 2] < screen_to)
    add(parts, f"ir:{paint}", compact(v, f[~window]))
    add(parts, "ir:glass_clear", compact(v, f[window]))
    # seats behind the windows
    for x in np.linspace(-0.5 * length + BUS_SEATS_FROM_REAR_M, 0.5 * length - BUS_SEATS_FROM_FRONT_M, BUS_SEAT_ROWS):
        add(parts, "ir:textile", box((x, 0.0, BUS_SEAT_Z_M), BUS_SEAT_SIZE_M))
    _wheels(parts, (0.5 * length - BUS_FRONT_OVERHANG_M, -0.5 * length + BUS_REAR_OVERHANG_M),
            0.5 * width - BUS_TYRE_INSET_M, BUS_WHEEL_RADIUS_M, BUS_TYRE_WIDTH_M)
    _plates_and_reflectors(parts, length, width, BUS_PLATE_Z_M)
    return parts


def _railcar(length_m: float, width_m: float, height_m: float, floor_m: float, paint: str) -> dict:
    """A tram or a coach: body with a window band, bogies under it."""
    parts: dict = {}
    half = np.array([0.5 * length_m, 0.5 * width_m, 0.5 * (height_m - floor_m)])
    v, f = rounded_box(half, RAILCAR_CELLS, RAILCAR_EXPONENT)
    v = v + (0.0, 0.0, floor_m + half[2])
    tri = v[f].mean(axis=1)
    window_from, window_to = RAILCAR_WINDOWS_ABOVE_FLOOR_M
    window = (tri[:, 2] > floor_m + window_from) & (tri[:, 2] < floor_m + window_to)
    add(parts, f"ir:{paint}", compact(v, f[~window]))
    add(parts, "ir:glass_clear", compact(v, f[window]))
    for x in np.linspace(-0.5 * length_m + RAILCAR_SEATS_END_M, 0.5 * length_m - RAILCAR_SEATS_END_M,
                         RAILCAR_SEAT_ROWS):
        add(parts, "ir:textile", box((x, 0.0, floor_m + RAILCAR_SEAT_ABOVE_FLOOR_M),
                                     (RAILCAR_SEAT_DEPTH_M, width_m - RAILCAR_SEAT_NARROWER_M, RAILCAR_SEAT_HEIGHT_M)))
    for x in (-RAILCAR_BOGIE_X_SHARE * length_m, RAILCAR_BOGIE_X_SHARE * length_m):
        add(parts, "ir:metal_painted_dark", box((x, 0.0, 0.5 * floor_m),
                                                (RAILCAR_BOGIE_LENGTH_M, width_m - RAILCAR_BOGIE_NARROWER_M, floor_m)))
    return parts


def _tram(paint: str) -> dict:
    """A low-floor tram (:data:`TRAM`)."""
    return _railcar(*TRAM, paint)


def _train(paint: str) -> dict:
    """A passenger coach (:data:`COACH`)."""
    return _railcar(*COACH, paint)


# ----------------------------------------------------------------------------- people, riders and animals

#: body segment positions and lengths as shares of standing height (Drillis & Contini 1966, "Body segment
#: parameters", NYU report 1166-03): shoulder 0.818, hip 0.530, knee 0.285, ankle 0.039, wrist 0.485 (standing);
#: upper arm 0.186, forearm 0.146, thigh 0.245, shank 0.246, foot 0.152, head 0.130, shoulder width 0.259, hip width
#: 0.191
SHOULDER, HIP, KNEE, ANKLE = 0.818, 0.530, 0.285, 0.039
UPPER_ARM, FOREARM, THIGH, SHANK, FOOT, HEAD = 0.186, 0.146, 0.245, 0.246, 0.152, 0.130
SHOULDER_WIDTH, HIP_WIDTH = 0.259, 0.191

#: a person's proportions the model assumes as shares of standing height, where Drillis & Contini give none: read
#: off photographs, because a lidar sees a person's parts at a few centimetres' resolution at best. Limb radius
#: (thighs 1.6, shanks 1.2, upper arms 1.1, forearms 0.9 of it; each segment narrows to this share at its far end,
#: these many sections); the legs stand this share of the hip width out from the centre line
PERSON_HEIGHT_M = 1.75  # an adult's stature (assumed: adult means in Europe lie between 1.65 and 1.80 m)
PERSON_LIMB_SHARE, PERSON_LIMB_TAPER, PERSON_LIMB_SECTIONS = 0.028, 0.85, 10
PERSON_THIGH_LIMBS, PERSON_SHANK_LIMBS, PERSON_UPPER_ARM_LIMBS, PERSON_FOREARM_LIMBS = 1.6, 1.2, 1.1, 0.9
PERSON_LEG_Y_SHARE = 0.25
#: walking: half a stride forward and back, knees this far ahead of the line from hip to ankle, arms swinging this
#: far at the elbow and 1.3 times that at the hand
PERSON_STRIDE_SHARE, PERSON_KNEE_AHEAD_SHARE, PERSON_ARM_SWING_SHARE, PERSON_HAND_SWING = 0.12, 0.02, 0.06, 1.3
#: feet: this share of their length ahead of the ankle, as wide as this share of height (Drillis & Contini: foot
#: breadth 0.055); a seated person's feet this far below the ankle and this high
PERSON_FOOT_AHEAD, PERSON_FOOT_WIDTH_SHARE = 0.3, 0.055
PERSON_SEATED_FOOT_DROP_SHARE, PERSON_SEATED_FOOT_HEIGHT_SHARE = 0.02, 0.04
#: sitting and riding: hips this far above the seat; a rider leans forward by this; the thigh reaches forward this
#: share of its length (seated 0.95, riding 0.7), a rider's knee this far lower; shins this far forward to the
#: ankle, the ankle at least this high (m)
PERSON_SEAT_HIP_SHARE, PERSON_RIDE_LEAN_SHARE = 0.06, 0.08
PERSON_SIT_THIGH_REACH, PERSON_RIDE_THIGH_REACH, PERSON_RIDE_KNEE_DROP_SHARE = 0.95, 0.7, 0.1
PERSON_SHIN_AHEAD_SHARE, PERSON_MIN_ANKLE_M = 0.05, 0.05
#: the torso: half depth, this much narrower than the shoulders, cells and exponent of its rounded box
PERSON_TORSO_HALF_DEPTH_SHARE, PERSON_TORSO_NARROWER_SHARE = 0.07, 0.03
PERSON_TORSO_CELLS, PERSON_TORSO_EXPONENT = 6, 4.0
#: neck length and radius; the head this far forward of the neck, its semi-axes (length, width; its height half of
#: Drillis & Contini's HEAD); hair this far back and up on the head, its semi-axes
PERSON_NECK_LENGTH_SHARE, PERSON_NECK_RADIUS_SHARE, PERSON_HEAD_AHEAD_SHARE = 0.05, 0.032, 0.01
PERSON_HEAD_RADII_SHARE = (0.058, 0.05)
PERSON_HAIR_BACK_SHARE, PERSON_HAIR_UP_SHARE, PERSON_HAIR_RADII_SHARE = 0.008, 0.018, (0.057, 0.051, 0.05)
#: shoulders this much narrower than the shoulder width and this far below its top; a rider's hands this far out
#: from the grip's centre, elbows this far out and down; hands' semi-axes, icosphere subdivisions of a hand
PERSON_ARMS_NARROWER_SHARE, PERSON_SHOULDER_DROP_SHARE = 0.02, 0.02
PERSON_GRIP_Y_SHARE, PERSON_ELBOW_OUT_SHARE, PERSON_ELBOW_DROP_SHARE = 0.2, 0.03, 0.04
PERSON_HAND_RADII_SHARE, PERSON_HAND_SUBDIVISIONS = (0.03, 0.018, 0.045), 1


def person_parts(height_m: float = PERSON_HEIGHT_M, pose: str = "walk", seat_m: tuple = (0.0, 0.0, 0.0),
                 hands_m: tuple | None = None) -> dict:
    """A person ``height_m`` tall, facing +x: ``pose`` "walk" (feet at z = 0, mid-stride), "stand", "sit" (hips at
    ``seat_m``, thighs forward), "ride" (hips at ``seat_m``, leaning to ``hands_m``). Clothes are textile, face and
    hands skin, hair on the head, shoes dark."""
    h = height_m
    parts: dict = {}
    limb = PERSON_LIMB_SHARE * h

    def segment(a, b, radius, material):
        add(parts, material, frustum(a, b, radius, PERSON_LIMB_TAPER * radius, PERSON_LIMB_SECTIONS))

    if pose in ("walk", "stand"):
        stride = PERSON_STRIDE_SHARE * h if pose == "walk" else 0.0
        hip_z = HIP * h
        for side, step in ((1.0, stride), (-1.0, -stride)):
            y = side * PERSON_LEG_Y_SHARE * HIP_WIDTH * h
            hip = np.array([0.0, y, hip_z])
            ankle = np.array([step, y, ANKLE * h])
            knee = 0.5 * (hip + ankle) + (PERSON_KNEE_AHEAD_SHARE * h, 0.0, 0.0)
            segment(hip, knee, PERSON_THIGH_LIMBS * limb, "ir:textile_dark")
            segment(knee, ankle, PERSON_SHANK_LIMBS * limb, "ir:textile_dark")
            add(parts, "ir:plastic_black", box((step + PERSON_FOOT_AHEAD * FOOT * h, y, 0.5 * ANKLE * h),
                                               (FOOT * h, PERSON_FOOT_WIDTH_SHARE * h, ANKLE * h)))
        pelvis = np.array([0.0, 0.0, hip_z])
        lean = np.zeros(3)
    else:
        pelvis = np.asarray(seat_m, float) + (0.0, 0.0, PERSON_SEAT_HIP_SHARE * h)
        lean = np.array([PERSON_RIDE_LEAN_SHARE * h if pose == "ride" else 0.0, 0.0, 0.0])
        for side in (1.0, -1.0):
            y = side * PERSON_LEG_Y_SHARE * HIP_WIDTH * h
            hip = pelvis + (0.0, y, 0.0)
            knee = hip + (THIGH * h * (PERSON_SIT_THIGH_REACH if pose == "sit" else PERSON_RIDE_THIGH_REACH), 0.0,
                          0.0 if pose == "sit" else -PERSON_RIDE_KNEE_DROP_SHARE * h)
            ankle = np.array([knee[0] + PERSON_SHIN_AHEAD_SHARE * h, y, max(knee[2] - SHANK * h, PERSON_MIN_ANKLE_M)])
            segment(hip, knee, PERSON_THIGH_LIMBS * limb, "ir:textile_dark")
            segment(knee, ankle, PERSON_SHANK_LIMBS * limb, "ir:textile_dark")
            add(parts, "ir:plastic_black", box(ankle + (PERSON_FOOT_AHEAD * FOOT * h, 0.0,
                                                        -PERSON_SEATED_FOOT_DROP_SHARE * h),
                                               (FOOT * h, PERSON_FOOT_WIDTH_SHARE * h,
                                                PERSON_SEATED_FOOT_HEIGHT_SHARE * h)))
    torso_height = (SHOULDER - HIP) * h
    shoulder_z = pelvis[2] + torso_height
    torso_centre = pelvis + lean * 0.5 + (0.0, 0.0, 0.5 * torso_height)
    v, f = rounded_box((PERSON_TORSO_HALF_DEPTH_SHARE * h, 0.5 * (SHOULDER_WIDTH - PERSON_TORSO_NARROWER_SHARE) * h,
                        0.5 * torso_height), PERSON_TORSO_CELLS, PERSON_TORSO_EXPONENT)
    add(parts, "ir:textile", (v + torso_centre, f))
    neck = pelvis + lean + (0.0, 0.0, torso_height)
    segment(neck, neck + (0.0, 0.0, PERSON_NECK_LENGTH_SHARE * h), PERSON_NECK_RADIUS_SHARE * h, "ir:skin")
    head = neck + (PERSON_HEAD_AHEAD_SHARE * h, 0.0, PERSON_NECK_LENGTH_SHARE * h + 0.5 * HEAD * h)
    head_length, head_width = PERSON_HEAD_RADII_SHARE
    add(parts, "ir:skin", ellipsoid(head, (head_length * h, head_width * h, 0.5 * HEAD * h), ROUND_SUBDIVISIONS))
    add(parts, "ir:hair", ellipsoid(head + (-PERSON_HAIR_BACK_SHARE * h, 0.0, PERSON_HAIR_UP_SHARE * h),
                                    tuple(share * h for share in PERSON_HAIR_RADII_SHARE), ROUND_SUBDIVISIONS))
    for side in (1.0, -1.0):
        shoulder = np.array([neck[0], side * 0.5 * (SHOULDER_WIDTH - PERSON_ARMS_NARROWER_SHARE) * h,
                             shoulder_z - PERSON_SHOULDER_DROP_SHARE * h])
        if hands_m is not None:
            hand = np.asarray(hands_m, float) + (0.0, side * PERSON_GRIP_Y_SHARE * h, 0.0)
            elbow = 0.5 * (shoulder + hand) + (0.0, side * PERSON_ELBOW_OUT_SHARE * h, -PERSON_ELBOW_DROP_SHARE * h)
        else:
            swing = (PERSON_ARM_SWING_SHARE * h if pose == "walk" else 0.0) * -side
            elbow = shoulder + (swing, 0.0, -UPPER_ARM * h)
            hand = elbow + (PERSON_HAND_SWING * swing, 0.0, -FOREARM * h)
        segment(shoulder, elbow, PERSON_UPPER_ARM_LIMBS * limb, "ir:textile")
        segment(elbow, hand, PERSON_FOREARM_LIMBS * limb, "ir:skin")
        add(parts, "ir:skin", ellipsoid(hand, tuple(share * h for share in PERSON_HAND_RADII_SHARE),
                                        PERSON_HAND_SUBDIVISIONS))
    return parts


#: two-wheelers' tyres: sections of the annulus
TWO_WHEEL_TYRE_SECTIONS = 32
#: wheels of two-wheelers and scooters: (radius m, tyre width m, rim radius over tyre radius, wheelbase m)
#: a motorcycle near a 120/70 R17 front tyre (0.60 m across, ETRTO), a 1.42 m wheelbase (a mid-size road bike,
#: assumed); a bicycle's 35-622 tyre (ISO 5775: 622 mm rim, 35 mm tyre, 0.69 m across) and a 1.05 m wheelbase
#: (a city bike, assumed); an e-scooter's 8.5 in tyres (0.22 m across, typical) and a 0.85 m wheelbase (assumed)
MOTORCYCLE_WHEELS = (0.31, 0.13, 0.7, 1.42)
BICYCLE_WHEELS = (0.35, 0.035, 0.9, 1.05)
SCOOTER_WHEELS = (0.1, 0.05, 0.5, 0.85)
#: a motorcycle's parts (assumed, read off photographs of a mid-size road motorcycle, 2.1 m long): engine and seat
#: and tail and plate as boxes (centre m, size m), tank and headlamp as ellipsoids (centre m, semi-axes m), the fork
#: (lower end, upper end, radius m), the handlebar (left end, right end, radius m); the rider's seat and hands (m)
MOTORCYCLE_ENGINE_M = ((0.0, 0.0, 0.45), (0.55, 0.3, 0.35))
MOTORCYCLE_TANK_M = ((0.2, 0.0, 0.85), (0.3, 0.16, 0.13))
MOTORCYCLE_SEAT_M = ((-0.35, 0.0, 0.83), (0.6, 0.25, 0.1))
MOTORCYCLE_TAIL_M = ((-0.75, 0.0, 0.75), (0.45, 0.2, 0.15))
MOTORCYCLE_FORK_M = ((0.71, 0.0, 0.31), (0.55, 0.0, 1.0), 0.03)
MOTORCYCLE_BAR_M = ((0.5, -0.35, 1.02), (0.5, 0.35, 1.02), 0.015)
MOTORCYCLE_HEADLAMP_M = ((0.68, 0.0, 0.9), (0.04, 0.09, 0.09))
MOTORCYCLE_PLATE_M = ((-1.0, 0.0, 0.62), (0.01, 0.2, 0.13))
MOTORCYCLE_RIDER_SEAT_M, MOTORCYCLE_RIDER_HANDS_M = (-0.3, 0.0, 0.88), (0.5, 0.0, 1.02)
#: a bicycle's frame (assumed, a city bike's diamond frame): bottom bracket, seat and head tube tops (m), rear and
#: front axle (x, z m: the wheels' hubs); tube radius (m); saddle (centre, size m), handlebar (left end, right end,
#: radius m), rear reflector (centre, size m; StVZO §67); the rider's seat and hands (m)
BICYCLE_BOTTOM_M, BICYCLE_SEAT_TOP_M, BICYCLE_HEAD_TOP_M = (0.0, 0, 0.3), (-0.15, 0, 0.85), (0.4, 0, 0.85)
BICYCLE_REAR_HUB_M, BICYCLE_FRONT_HUB_M, BICYCLE_TUBE_RADIUS_M = (-0.525, 0, 0.35), (0.525, 0, 0.35), 0.018
BICYCLE_SADDLE_M = ((-0.17, 0.0, 0.9), (0.25, 0.12, 0.06))
BICYCLE_BAR_M = ((0.42, -0.28, 1.0), (0.42, 0.28, 1.0), 0.012)
BICYCLE_REFLECTOR_M = ((-0.55, 0.0, 0.75), (0.01, 0.06, 0.05))
BICYCLE_RIDER_SEAT_M, BICYCLE_RIDER_HANDS_M = (-0.17, 0.0, 0.93), (0.42, 0.0, 1.0)
#: a manual wheelchair (1.1 × 0.65 m): wheels this far out from the centre line (m); drive wheels 24 in (ISO 5775
#: 540 mm rim: 0.6 m across) and castors (rim over tyre radius, sections, radius m, centre x m), tyre width (m);
#: seat and backrest (centre, size m); its user's seat (m) and stature (m), all assumed from photographs of a
#: standard folding wheelchair
WHEELCHAIR_WHEEL_Y_M, WHEELCHAIR_TYRE_WIDTH_M = 0.3, 0.03
WHEELCHAIR_DRIVE_WHEEL = (0.9, 32, 0.3, -0.15)
WHEELCHAIR_CASTOR = (0.5, 12, 0.08, 0.35)
WHEELCHAIR_SEAT_M = ((0.0, 0.0, 0.5), (0.45, 0.45, 0.05))
WHEELCHAIR_BACKREST_M = ((-0.22, 0.0, 0.75), (0.04, 0.45, 0.45))
WHEELCHAIR_USER_SEAT_M, WHEELCHAIR_USER_HEIGHT_M = (-0.05, 0.0, 0.52), 1.7
#: a stand-up e-scooter (1.1 m; assumed from photographs of common rental models): deck (centre, size m), stem
#: (lower end, upper end, radius m), handlebar (left end, right end, radius m), rear reflector (centre, size m); its
#: rider stands this high above the ground, this far back (m)
SCOOTER_DECK_M = ((0.0, 0.0, 0.14), (0.6, 0.15, 0.05))
SCOOTER_STEM_M = ((0.42, 0.0, 0.12), (0.38, 0.0, 1.1), 0.02)
SCOOTER_BAR_M = ((0.38, -0.25, 1.1), (0.38, 0.25, 1.1), 0.015)
SCOOTER_REFLECTOR_M = ((-0.43, 0.0, 0.2), (0.01, 0.05, 0.04))
SCOOTER_RIDER_AT_M = (-0.05, 0.0, 0.17)
#: a deer-sized animal (1.6 m long, 1.3 m tall at the head; assumed, between a roe and a red deer, the animals most
#: often met on European roads): body and head as ellipsoids (centre, semi-axes m), the neck a frustum (lower end,
#: upper end, radii m); legs at these x and y (m), from this height down (m), radii at top and hoof (m)
ANIMAL_BODY_M = ((0.0, 0.0, 0.95), (0.6, 0.2, 0.25))
ANIMAL_NECK_M = ((0.45, 0.0, 1.05), (0.62, 0.0, 1.35), 0.1, 0.07)
ANIMAL_HEAD_M = ((0.72, 0.0, 1.38), (0.14, 0.07, 0.08))
ANIMAL_LEGS_X_M, ANIMAL_LEGS_Y_M, ANIMAL_LEG_TOP_M, ANIMAL_LEG_RADII_M = (-0.45, 0.4), (-0.1, 0.1), 0.85, (0.045, 0.02)
#: a vehicle OSI says no more of: half extents of its body (m), cells and exponent of its rounded box, its centre
#: height (m); axles x (m), half track, wheel radius, tyre width (m) (assumed: a generic mid-size machine)
VEHICLE_BODY_HALF_M, VEHICLE_CELLS, VEHICLE_EXPONENT, VEHICLE_BODY_Z_M = (2.0, 1.0, 0.9), 10, 4.0, 1.4
VEHICLE_AXLES_X_M, VEHICLE_HALF_TRACK_M, VEHICLE_WHEEL_RADIUS_M, VEHICLE_TYRE_WIDTH_M = (-1.3, 1.3), 0.75, 0.45, 0.35


def _with(parts: dict, more: dict) -> dict:
    """``parts`` with ``more``'s shapes added (a rider to a vehicle)."""
    for material, shapes in more.items():
        parts.setdefault(material, []).extend(shapes)
    return parts


def _pedestrian(paint: str) -> dict:
    return person_parts(PERSON_HEIGHT_M, "walk")


def _two_wheel(radius_m: float, tyre_m: float, inner: float, wheelbase_m: float, parts: dict) -> None:
    to_y = rotation_x(np.pi / 2)
    for x in (-0.5 * wheelbase_m, 0.5 * wheelbase_m):
        add(parts, "ir:rubber_tyre", place(unit_annulus(inner, TWO_WHEEL_TYRE_SECTIONS),
                                            (radius_m, radius_m, tyre_m), to_y, (x, 0.0, radius_m)))


def _motorcycle(paint: str, rider: bool = True) -> dict:
    """A motorcycle (2.1 m long, wheels 0.31 m), its rider where ``rider``."""
    parts: dict = {}
    _two_wheel(*MOTORCYCLE_WHEELS, parts)
    add(parts, "ir:metal_painted_dark", box(*MOTORCYCLE_ENGINE_M))
    add(parts, f"ir:{paint}", ellipsoid(*MOTORCYCLE_TANK_M, ROUND_SUBDIVISIONS))
    add(parts, "ir:plastic_black", box(*MOTORCYCLE_SEAT_M))
    add(parts, f"ir:{paint}", box(*MOTORCYCLE_TAIL_M))
    lower, upper, radius = MOTORCYCLE_FORK_M
    add(parts, "ir:metal_painted_dark", frustum(lower, upper, radius, radius, TUBE_SECTIONS))
    add(parts, "ir:metal_painted_dark", cylinder_between(*MOTORCYCLE_BAR_M, TUBE_SECTIONS))
    add(parts, "ir:glass_clear", ellipsoid(*MOTORCYCLE_HEADLAMP_M, 1))
    add(parts, "ir:retroreflector", box(*MOTORCYCLE_PLATE_M))
    return _with(parts, person_parts(PERSON_HEIGHT_M, "ride", MOTORCYCLE_RIDER_SEAT_M, MOTORCYCLE_RIDER_HANDS_M)
                 if rider else {})


def _bicycle(paint: str, rider: bool = True) -> dict:
    """A bicycle (wheels 0.35 m, thin: beams pass between its spokes), its rider where ``rider``."""
    parts: dict = {}
    _two_wheel(*BICYCLE_WHEELS, parts)
    frame = f"ir:{paint}"
    bottom, seat, head = np.array(BICYCLE_BOTTOM_M), np.array(BICYCLE_SEAT_TOP_M), np.array(BICYCLE_HEAD_TOP_M)
    for a, b in ((bottom, seat), (bottom, head), (seat, head), (bottom, BICYCLE_REAR_HUB_M),
                 (seat, BICYCLE_REAR_HUB_M), (head, BICYCLE_FRONT_HUB_M)):
        add(parts, frame, cylinder_between(a, b, BICYCLE_TUBE_RADIUS_M, TUBE_SECTIONS))
    add(parts, "ir:plastic_black", box(*BICYCLE_SADDLE_M))
    add(parts, frame, cylinder_between(*BICYCLE_BAR_M, TUBE_SECTIONS))
    add(parts, "ir:retroreflector", box(*BICYCLE_REFLECTOR_M))
    return _with(parts, person_parts(PERSON_HEIGHT_M, "ride", BICYCLE_RIDER_SEAT_M, BICYCLE_RIDER_HANDS_M)
                 if rider else {})


def _wheelchair(paint: str, rider: bool = True) -> dict:
    """A manual wheelchair (1.1 × 0.65 m, wheels 0.3 m), its user seated where ``rider``."""
    parts: dict = {}
    to_y = rotation_x(np.pi / 2)
    for y in (-WHEELCHAIR_WHEEL_Y_M, WHEELCHAIR_WHEEL_Y_M):
        for inner, sections, radius, x in (WHEELCHAIR_DRIVE_WHEEL, WHEELCHAIR_CASTOR):
            add(parts, "ir:rubber_tyre", place(unit_annulus(inner, sections),
                                                (radius, radius, WHEELCHAIR_TYRE_WIDTH_M), to_y, (x, y, radius)))
    add(parts, "ir:textile", box(*WHEELCHAIR_SEAT_M))
    add(parts, "ir:textile", box(*WHEELCHAIR_BACKREST_M))
    return _with(parts, person_parts(WHEELCHAIR_USER_HEIGHT_M, "sit", WHEELCHAIR_USER_SEAT_M) if rider else {})


def _scooter(paint: str, rider: bool = True) -> dict:
    """A stand-up e-scooter (1.1 m, wheels 0.1 m), its rider standing where ``rider``."""
    parts: dict = {}
    _two_wheel(*SCOOTER_WHEELS, parts)
    add(parts, "ir:metal_painted_dark", box(*SCOOTER_DECK_M))
    add(parts, "ir:metal_painted_dark", cylinder_between(*SCOOTER_STEM_M, TUBE_SECTIONS))
    add(parts, "ir:metal_painted_dark", cylinder_between(*SCOOTER_BAR_M, TUBE_SECTIONS))
    add(parts, "ir:retroreflector", box(*SCOOTER_REFLECTOR_M))
    standing = {m: [place(s, 1.0, None, SCOOTER_RIDER_AT_M) for s in shapes]  # on the deck
                for m, shapes in person_parts(PERSON_HEIGHT_M, "stand").items()} if rider else {}
    return _with(parts, standing)


def _animal(paint: str) -> dict:
    """A deer-sized animal (:data:`ANIMAL_BODY_M` …): body, neck, head, four legs, fur."""
    parts: dict = {}
    fur = "ir:fur"
    add(parts, fur, ellipsoid(*ANIMAL_BODY_M, ROUND_SUBDIVISIONS))
    add(parts, fur, frustum(*ANIMAL_NECK_M, PERSON_LIMB_SECTIONS))
    add(parts, fur, ellipsoid(*ANIMAL_HEAD_M, ROUND_SUBDIVISIONS))
    top_radius, hoof_radius = ANIMAL_LEG_RADII_M
    for x in ANIMAL_LEGS_X_M:
        for y in ANIMAL_LEGS_Y_M:
            add(parts, fur, frustum((x, y, ANIMAL_LEG_TOP_M), (x, y, 0.0), top_radius, hoof_radius, TUBE_SECTIONS))
    return parts


def _vehicle(paint: str) -> dict:
    """A vehicle OSI says no more of (a work machine, a watercraft on a trailer, …): a rounded body on wheels."""
    parts: dict = {}
    v, f = rounded_box(VEHICLE_BODY_HALF_M, VEHICLE_CELLS, VEHICLE_EXPONENT)
    add(parts, f"ir:{paint}", (v + (0.0, 0.0, VEHICLE_BODY_Z_M), f))
    _wheels(parts, VEHICLE_AXLES_X_M, VEHICLE_HALF_TRACK_M, VEHICLE_WHEEL_RADIUS_M, VEHICLE_TYRE_WIDTH_M)
    return parts


_BUILDERS = {"heavy_truck": _heavy_truck, "semitractor": _semitractor, "semitrailer": _semitrailer,
             "trailer": _trailer, "bus": _bus, "tram": _tram, "train": _train, "pedestrian": _pedestrian,
             "animal": _animal, "work_machine": _vehicle, "watercraft": _vehicle, "aircraft": _vehicle}
_RIDDEN = {"motorcycle": _motorcycle, "bicycle": _bicycle, "wheelchair": _wheelchair,
           "standup_scooter": _scooter, "micromobility_device": _scooter}
#: the classes that have a mesh of their own (others stay OSI's box)
ROAD_USER_CLASSES = frozenset(CAR_SPECS) | frozenset(CAR_CLASSES) | frozenset(_BUILDERS) | frozenset(_RIDDEN)


@functools.cache
def road_user_mesh(object_class: str, paint: str = "car_paint_white", rider: bool = True) -> Mesh | None:
    """The shared unit-box mesh of a road-user class (``None`` for a class without one): built once per class,
    paint and rider."""
    spec_name = CAR_CLASSES.get(object_class, object_class)
    if spec_name in CAR_SPECS:
        parts = _car(CAR_SPECS[spec_name], paint)
    elif object_class in _RIDDEN:
        parts = _RIDDEN[object_class](paint, rider)
    elif object_class in _BUILDERS:
        parts = _BUILDERS[object_class](paint)
    else:
        return None
    unit, _ = normalised(parts)
    builder = MeshBuilder()
    builder.extend(unit)
    return builder.mesh(f"osi {object_class}")
