"""Procedural, deterministic demo street scene (meshes on disk + parked-car layout).

:func:`generate_street` writes a ~200 m straight urban street as real mesh files with named visual materials:

* ``street.obj`` / ``street.mtl``: the static world (road, lane markings, kerbs, sidewalks, grass strips, buildings
  with recessed windows, street lights, trees, traffic signs) in one multi-material OBJ;
* ``car_<type>.obj`` / ``.mtl``: car models in the OSI object frame (origin at the bounding-box centre, x forward,
  y left, z up, metres);
* ``layout.json``: the parked cars (bounding-box-centre poses) and triangle totals.

World frame: x along the street (−100 m … +100 m), y across (road centred on y = 0), z up, road surface at z = 0.
Traffic drives on the right, so cars on the y < 0 kerb face +x and cars on the y > 0 kerb face −x.

Everything is drawn from one ``numpy.random.Generator(seed)`` in a fixed order and numbers are written with fixed
formats, so the same seed gives byte-identical files. :func:`load_street_scene` turns the files into a
:class:`~lidar_fmu.geometry.scene.Scene`.
"""
from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ..geometry.scene import Mesh, Scene, load_mesh, merge
from ..geometry.transforms import pose_matrix
from ..pointcloud import ENVIRONMENT_ID_BASE
from ..world.road_users import car_parts
from ..world.shapes import (
    add,
    box,
    cylinder_between,
    grid,
    place,
    quads,
    rotation_z,
    tile,
    triangles,
    unit_cylinder,
    unit_icosphere,
)

#: Bump when the generated content changes so :func:`ensure_street` regenerates.
GENERATOR_VERSION = 3

STREET_FILE = "street.obj"
LAYOUT_FILE = "layout.json"

# Cross-section of the street (|y| in m, z in m). Four 3.5 m driving lanes plus
# a 2.3 m parking lane on each side make up the asphalt.
STREET_HALF_LENGTH_M = 100.0
LANE_WIDTH_M = 3.5
DRIVING_HALF_WIDTH_M = 2 * LANE_WIDTH_M
ROAD_HALF_WIDTH_M = DRIVING_HALF_WIDTH_M + 2.3
CURB_WIDTH_M = 0.2
CURB_HEIGHT_M = 0.15
GRASS_OUTER_M = 11.0
SIDEWALK_OUTER_M = 14.0
#: Sidewalk slab reaches under the building fronts so no faces are coplanar.
SIDEWALK_SLAB_OUTER_M = 14.2
BACKYARD_OUTER_M = 40.0
GRASS_TOP_M = 0.17
MARKING_HEIGHT_M = 0.005
CROSSING_HALF_LENGTH_M = 2.0
#: Parked cars keep this clear of the zebra crossing (x = 0).
CROSSING_NO_PARKING_M = 10.0
#: The static world gets at least this many triangles (the road absorbs the rest).
STREET_MIN_TRIANGLES = 380_000

#: Diffuse colours (linear RGB) written to the MTL files; names are what matter.
MATERIAL_COLOURS = {
    "asphalt": (0.07, 0.07, 0.075),
    "road_marking_white": (0.9, 0.9, 0.88),
    "concrete_curb": (0.62, 0.62, 0.6),
    "concrete_sidewalk": (0.55, 0.54, 0.52),
    "grass": (0.2, 0.4, 0.12),
    "facade_plaster": (0.85, 0.8, 0.7),
    "facade_brick": (0.55, 0.25, 0.18),
    "facade_concrete": (0.6, 0.6, 0.58),
    "window_glass": (0.1, 0.15, 0.2),
    "window_frame": (0.88, 0.88, 0.88),
    "roof_tar": (0.12, 0.12, 0.12),
    "roof_unit_metal": (0.6, 0.6, 0.62),
    "metal_railing": (0.2, 0.2, 0.22),
    "metal_pole": (0.45, 0.47, 0.5),
    "lamp_glass": (0.95, 0.95, 0.85),
    "tree_bark": (0.3, 0.2, 0.12),
    "tree_leaves": (0.15, 0.35, 0.1),
    "sign_face": (0.85, 0.1, 0.1),
    "car_paint_red": (0.6, 0.04, 0.04),
    "car_paint_silver": (0.7, 0.72, 0.75),
    "car_paint_black": (0.03, 0.03, 0.035),
    "car_paint_white": (0.92, 0.92, 0.9),
    "car_glass": (0.05, 0.07, 0.08),
    "car_plastic_black": (0.05, 0.05, 0.05),
    "tyre_rubber": (0.03, 0.03, 0.03),
    "wheel_rim": (0.6, 0.6, 0.62),
    "headlight_glass": (0.9, 0.9, 0.92),
    "taillight_red": (0.7, 0.02, 0.02),
}
_TRANSLUCENT = {"window_glass": 0.3, "car_glass": 0.3, "headlight_glass": 0.5, "lamp_glass": 0.6}

#: Car types: outer dimensions and body proportions (m). ``cabin_*`` describe
#: the greenhouse above the belt line; tapers shrink its top towards the front
#: (windscreen rake) and rear; ``cargo_x_m`` ends the side windows of a van.
CAR_TYPES = {
    "car_sedan": dict(length_m=4.7, width_m=1.8, height_m=1.45, clearance_m=0.17, belt_m=0.9,
                      cabin_length_m=2.75, cabin_x_m=-0.25, taper_front=0.5, taper_rear=0.42,
                      wheel_radius_m=0.32, wheelbase_m=2.8, paint="car_paint_red",
                      body_cells=16, cabin_cells=14, cargo_x_m=None),
    "car_suv": dict(length_m=4.75, width_m=1.9, height_m=1.72, clearance_m=0.22, belt_m=1.05,
                    cabin_length_m=3.2, cabin_x_m=-0.35, taper_front=0.38, taper_rear=0.12,
                    wheel_radius_m=0.37, wheelbase_m=2.85, paint="car_paint_silver",
                    body_cells=16, cabin_cells=14, cargo_x_m=None),
    "car_van": dict(length_m=5.3, width_m=2.0, height_m=2.0, clearance_m=0.2, belt_m=1.08,
                    cabin_length_m=4.4, cabin_x_m=-0.35, taper_front=0.22, taper_rear=0.02,
                    wheel_radius_m=0.34, wheelbase_m=3.3, paint="car_paint_white",
                    body_cells=18, cabin_cells=16, cargo_x_m=0.55),
    "car_hatchback": dict(length_m=4.1, width_m=1.76, height_m=1.48, clearance_m=0.15, belt_m=0.9,
                          cabin_length_m=2.55, cabin_x_m=-0.3, taper_front=0.48, taper_rear=0.12,
                          wheel_radius_m=0.31, wheelbase_m=2.55, paint="car_paint_black",
                          body_cells=14, cabin_cells=12, cargo_x_m=None),
}
#: Relative frequency of each type among parked cars.
_CAR_SHARE = {"car_sedan": 0.35, "car_suv": 0.25, "car_van": 0.15, "car_hatchback": 0.25}

# Parts: material name → list of (vertices (V,3) m, faces (F,3)) in a common frame.
Parts = dict


# --------------------------------------------------------------------------
# street: ground, road and sidewalks
# --------------------------------------------------------------------------
def _slab(x0, x1, y0, y1, z_top_m, cell_m: float):
    """Raised slab from z = 0: tessellated top plus four side walls (no bottom)."""
    nx = max(1, int(round((x1 - x0) / cell_m)))
    ny = max(1, int(round((y1 - y0) / cell_m)))
    top = grid(x0, x1, y0, y1, z_top_m, nx, ny)
    z = z_top_m
    sides = quads([
        [[x0, y0, 0], [x1, y0, 0], [x1, y0, z], [x0, y0, z]],  # faces -y
        [[x1, y0, 0], [x1, y1, 0], [x1, y1, z], [x1, y0, z]],  # faces +x
        [[x1, y1, 0], [x0, y1, 0], [x0, y1, z], [x1, y1, z]],  # faces +y
        [[x0, y1, 0], [x0, y0, 0], [x0, y0, z], [x0, y1, z]],  # faces -x
    ])
    return merge([top, sides])


def _add_road(parts: Parts, min_triangles: int) -> None:
    """Asphalt as a fine grid (like a surveyed road mesh), at least ``min_triangles``.

    Finer than 1 m × 0.31 m only when the rest of the street came out small, so
    every seed gives a static world of comparable ray-tracing work.
    """
    length, width = 2 * STREET_HALF_LENGTH_M, 2 * ROAD_HALF_WIDTH_M
    cells = max(min_triangles // 2, int(length) * int(round(width / 0.31)))
    n_y = int(np.ceil(np.sqrt(cells * width / (3.0 * length))))  # cells ~3× longer than wide
    n_x = int(np.ceil(cells / n_y))
    add(parts, "asphalt", grid(-STREET_HALF_LENGTH_M, STREET_HALF_LENGTH_M,
                                  -ROAD_HALF_WIDTH_M, ROAD_HALF_WIDTH_M, 0.0, n_x, n_y))


def _stripes(x_starts_m, length_m, y_centre_m, width_m):
    """Flat marking rectangles just above the asphalt."""
    x0 = np.asarray(x_starts_m, float)
    x1 = x0 + length_m
    y0, y1 = y_centre_m - 0.5 * width_m, y_centre_m + 0.5 * width_m
    z = np.full_like(x0, MARKING_HEIGHT_M)
    corners = np.stack([
        np.column_stack([x0, np.full_like(x0, y0), z]),
        np.column_stack([x1, np.full_like(x0, y0), z]),
        np.column_stack([x1, np.full_like(x0, y1), z]),
        np.column_stack([x0, np.full_like(x0, y1), z]),
    ], axis=1)
    return quads(corners)


def _solid_line(y_centre_m, width_m):
    """Solid line along the street, interrupted at the zebra crossing."""
    gap = CROSSING_HALF_LENGTH_M + 0.5
    length = STREET_HALF_LENGTH_M - gap
    return merge([_stripes([-STREET_HALF_LENGTH_M], length, y_centre_m, width_m),
                   _stripes([gap], length, y_centre_m, width_m)])


def _add_markings(parts: Parts) -> None:
    lines = [_solid_line(y, 0.12) for y in (-0.15, 0.15)]  # double centre line
    lines += [_solid_line(y, 0.15) for y in (-DRIVING_HALF_WIDTH_M, DRIVING_HALF_WIDTH_M)]  # parking edge
    # Lane dividers: 3 m dashes every 9 m, kept off the crossing.
    starts = np.arange(-STREET_HALF_LENGTH_M + 1.0, STREET_HALF_LENGTH_M - 3.0, 9.0)
    starts = starts[(starts + 3.0 < -CROSSING_HALF_LENGTH_M - 0.5) | (starts > CROSSING_HALF_LENGTH_M + 0.5)]
    lines += [_stripes(starts, 3.0, y, 0.15) for y in (-LANE_WIDTH_M, LANE_WIDTH_M)]
    # Zebra crossing: 0.5 m bars along the driving direction, 1 m apart, kerb to kerb.
    bar_y = np.arange(-ROAD_HALF_WIDTH_M + 0.6, ROAD_HALF_WIDTH_M - 0.3, 1.0)
    lines += [_stripes([-CROSSING_HALF_LENGTH_M], 2 * CROSSING_HALF_LENGTH_M, y, 0.5) for y in bar_y]
    add(parts, "road_marking_white", merge(lines))


def _grass_intervals(rng):
    """Grass strips (x0, x1) per side: 10 m beds separated by 3 m paved gaps."""
    period, gap = 13.0, 3.0
    starts = np.arange(-STREET_HALF_LENGTH_M, STREET_HALF_LENGTH_M, period) + rng.uniform(0.0, 3.0)
    intervals = []
    for s in starts:
        x0, x1 = s + gap, min(s + period, STREET_HALF_LENGTH_M)
        # Keep the footway at the zebra crossing paved.
        for a, b in ((x0, min(x1, -CROSSING_HALF_LENGTH_M - 1.0)), (max(x0, CROSSING_HALF_LENGTH_M + 1.0), x1)):
            if b - a >= 2.0:
                intervals.append((a, b))
    return intervals


def _add_sidewalks(parts: Parts, grass: dict) -> None:
    for side in (-1.0, 1.0):
        curb = _slab(-STREET_HALF_LENGTH_M, STREET_HALF_LENGTH_M, ROAD_HALF_WIDTH_M,
                     ROAD_HALF_WIDTH_M + CURB_WIDTH_M, CURB_HEIGHT_M, 1.0)
        walk = _slab(-STREET_HALF_LENGTH_M, STREET_HALF_LENGTH_M, ROAD_HALF_WIDTH_M + CURB_WIDTH_M,
                     SIDEWALK_SLAB_OUTER_M, CURB_HEIGHT_M, 0.5)
        # Grass beds sit a little proud of the paving (soil), so they hide it.
        beds = [_slab(a, b, ROAD_HALF_WIDTH_M + CURB_WIDTH_M + 0.05, GRASS_OUTER_M, GRASS_TOP_M, 0.5)
                for a, b in grass[side]]
        yard = grid(-STREET_HALF_LENGTH_M, STREET_HALF_LENGTH_M, SIDEWALK_SLAB_OUTER_M, BACKYARD_OUTER_M,
                     0.0, 100, 13)
        for material, vf in (("concrete_curb", curb), ("concrete_sidewalk", walk),
                             ("grass", merge(beds)), ("grass", yard)):
            add(parts, material, _mirror_y(vf, side))


def _mirror_y(vf, side: float):
    """Mirror geometry built for y > 0 onto the y < 0 side (keeps faces outward)."""
    vertices, faces = vf
    if side > 0:
        return vertices, faces
    return vertices * np.array([1.0, -1.0, 1.0]), np.asarray(faces)[:, ::-1]


# --------------------------------------------------------------------------
# street: buildings
# --------------------------------------------------------------------------
def _window_cell(cell_w_m, cell_h_m, window, recess_m=0.2):
    """One facade cell with a recessed window, in facade coords (u along, v up, w out).

    Returns ``{"wall", "glass", "frame"}`` → (V, F). ``window`` is (u0, u1, v0, v1) m.
    """
    a, b, c, d = window
    r = -recess_m
    v = np.array([
        [0, 0, 0], [cell_w_m, 0, 0], [cell_w_m, cell_h_m, 0], [0, cell_h_m, 0],  # cell corners
        [a, c, 0], [b, c, 0], [b, d, 0], [a, d, 0],  # window opening at the wall surface
        [a, c, r], [b, c, r], [b, d, r], [a, d, r],  # opening at the glass
    ], float)
    wall_faces = np.array([
        [0, 1, 5], [0, 5, 4], [1, 2, 6], [1, 6, 5], [2, 3, 7], [2, 7, 6], [3, 0, 4], [3, 4, 7],  # wall ring
        [4, 5, 9], [4, 9, 8], [6, 7, 11], [6, 11, 10], [5, 6, 10], [5, 10, 9], [7, 4, 8], [7, 8, 11],  # reveals
    ])
    glass_faces = np.array([[8, 9, 10], [8, 10, 11]])
    mid_u, bar = 0.5 * (a + b), 0.06
    frame = merge([
        box((mid_u, 0.5 * (c + d), r + 0.03), (bar, d - c, 0.06)),  # mullion
        box((mid_u, c + 0.7 * (d - c), r + 0.03), (b - a, bar, 0.06)),  # transom
        box((mid_u, c - 0.03, 0.02), (b - a + 0.1, 0.06, 0.12)),  # sill, proud of the wall
    ])
    return {"wall": (v, wall_faces), "glass": (v, glass_faces), "frame": frame}


def _balcony_cell(cell_w_m, depth_m=1.1, rail_h_m=1.0, bar_step_m=0.28):
    """Balcony on a cell's floor line, in facade coords: slab plus a bar railing.

    Returns ``{"slab", "rail"}`` → (V, F); the bars let rays pass between them.
    """
    u0, u1 = 0.1 * cell_w_m, 0.9 * cell_w_m
    slab = box((0.5 * (u0 + u1), 0.0, 0.5 * depth_m), (u1 - u0, 0.15, depth_m))
    top = 0.075 + rail_h_m
    n_front = max(2, int(round((u1 - u0) / bar_step_m)))
    n_side = max(1, int(round(depth_m / bar_step_m)))
    front = np.column_stack([np.linspace(u0 + 0.03, u1 - 0.03, n_front), np.zeros(n_front),
                             np.full(n_front, depth_m - 0.03)])
    side_w = np.linspace(0.1, depth_m - 0.03 - bar_step_m, n_side)
    sides = np.concatenate([np.column_stack([np.full(n_side, u), np.zeros(n_side), side_w]) for u in (u0 + 0.03, u1 - 0.03)])
    bar = box((0.0, 0.5 * (0.075 + top), 0.0), (0.025, rail_h_m, 0.025))
    rails = [
        box((0.5 * (u0 + u1), top, depth_m - 0.03), (u1 - u0, 0.05, 0.05)),
        box((u0 + 0.03, top, 0.5 * depth_m), (0.05, 0.05, depth_m)),
        box((u1 - 0.03, top, 0.5 * depth_m), (0.05, 0.05, depth_m)),
    ]
    return {"slab": slab, "rail": merge([tile(bar, np.concatenate([front, sides]))] + rails)}


def _facade(parts: Parts, wall_material, origin_m, u_dir, n_dir, length_m, height_m, floor_m, pitch_m,
            shop_front: bool, balconies: bool = False) -> None:
    """Windowed facade: a grid of cells; the ground floor may be a shop front."""
    n_cols = max(1, int(round(length_m / pitch_m)))
    n_floors = max(2, int(round(height_m / floor_m)))
    cw, ch = length_m / n_cols, height_m / n_floors
    upper = _window_cell(cw, ch, (0.22 * cw, 0.78 * cw, 0.3 * ch, 0.85 * ch))
    ground = _window_cell(cw, ch, (0.08 * cw, 0.92 * cw, 0.15 * ch, 0.85 * ch)) if shop_front else upper
    cols = np.arange(n_cols) * cw
    rows = [(ground, np.zeros(1))] + [(upper, np.arange(1, n_floors) * ch)]
    basis = np.stack([np.asarray(u_dir, float), np.array([0.0, 0.0, 1.0]), np.asarray(n_dir, float)])
    if balconies:
        rows.append((_balcony_cell(cw), np.arange(1, n_floors) * ch))
    names = {"wall": wall_material, "glass": "window_glass", "frame": "window_frame",
             "slab": wall_material, "rail": "metal_railing"}
    for cell, heights in rows:
        gu, gv = np.meshgrid(cols, heights, indexing="ij")
        offsets = np.column_stack([gu.ravel(), gv.ravel(), np.zeros(gu.size)])
        for key, vf in cell.items():
            v, f = tile(vf, offsets)
            add(parts, names[key], (np.asarray(origin_m, float) + v @ basis, f))


def _plain_wall(parts: Parts, material, origin_m, u_dir, length_m, height_m) -> None:
    o, u = np.asarray(origin_m, float), np.asarray(u_dir, float) * length_m
    up = np.array([0.0, 0.0, height_m])
    add(parts, material, quads([[o, o + u, o + u + up, o + up]]))


def _add_building(parts: Parts, rng, x0, x1, y0, y1, height_m, open_left: bool, open_right: bool,
                  street_side: float, record: dict) -> None:
    """Box building on [x0,x1]×[y0,y1]; sides facing a narrow gap get no windows."""
    material = str(rng.choice(["facade_plaster", "facade_brick", "facade_concrete"]))
    record.setdefault("buildings", []).append({"x_m": [x0, x1], "y_m": [y0, y1], "height_m": height_m + 0.8,
                                               "facade": material})
    floor_m = float(rng.uniform(2.9, 3.4))
    pitch_m = float(rng.uniform(2.4, 3.4))
    balconies = bool(rng.random() < 0.85)  # mostly residential blocks with balconies onto the street
    # (origin, along-facade direction, outward normal, length, windowed?); u = z × n.
    facades = [
        ((x0, y0, 0), (1, 0, 0), (0, -1, 0), x1 - x0, True),
        ((x1, y0, 0), (0, 1, 0), (1, 0, 0), y1 - y0, open_right),
        ((x1, y1, 0), (-1, 0, 0), (0, 1, 0), x1 - x0, True),
        ((x0, y1, 0), (0, -1, 0), (-1, 0, 0), y1 - y0, open_left),
    ]
    for origin, u_dir, n_dir, length, windowed in facades:
        if windowed:
            shop = n_dir[1] == -street_side  # the facade that faces the street
            _facade(parts, material, origin, u_dir, n_dir, length, height_m, floor_m, pitch_m, bool(shop),
                    balconies and bool(shop))
        else:
            _plain_wall(parts, material, origin, u_dir, length, height_m)
    add(parts, "roof_tar", grid(x0, x1, y0, y1, height_m, 1, 1))
    # Parapet around the roof edge, then a few rooftop plant boxes.
    t, h = 0.25, 0.8
    cz = height_m + 0.5 * h
    parapet = [
        box((0.5 * (x0 + x1), y0 + 0.5 * t, cz), (x1 - x0, t, h)),
        box((0.5 * (x0 + x1), y1 - 0.5 * t, cz), (x1 - x0, t, h)),
        box((x0 + 0.5 * t, 0.5 * (y0 + y1), cz), (t, y1 - y0 - 2 * t, h)),
        box((x1 - 0.5 * t, 0.5 * (y0 + y1), cz), (t, y1 - y0 - 2 * t, h)),
    ]
    add(parts, material, merge(parapet))
    for _ in range(int(rng.integers(0, 4))):
        size = rng.uniform([1.0, 1.0, 0.8], [3.0, 3.0, 2.0])
        cx = rng.uniform(x0 + 1.0 + size[0] / 2, max(x0 + 1.0 + size[0] / 2, x1 - 1.0 - size[0] / 2))
        cy = rng.uniform(y0 + 1.0 + size[1] / 2, max(y0 + 1.0 + size[1] / 2, y1 - 1.0 - size[1] / 2))
        add(parts, "roof_unit_metal", box((cx, cy, height_m + size[2] / 2), size))


def _add_buildings(parts: Parts, rng, record: dict) -> None:
    for side in (-1.0, 1.0):
        x = -STREET_HALF_LENGTH_M + float(rng.uniform(0.0, 2.0))
        rows = []
        while x < STREET_HALF_LENGTH_M - 6.0:
            width = float(min(rng.uniform(8.0, 24.0), STREET_HALF_LENGTH_M - x))
            depth = float(rng.uniform(8.0, 20.0))
            height = float(rng.uniform(6.0, 30.0))
            # Mostly terraced (narrow gaps), sometimes an alley.
            gap = float(rng.uniform(0.2, 0.6) if rng.random() < 0.6 else rng.uniform(2.0, 6.0))
            rows.append((x, x + width, depth, height, gap))
            x += width + gap
        for i, (x0, x1, depth, height, gap_after) in enumerate(rows):
            gap_before = rows[i - 1][4] if i else 10.0
            near, far = SIDEWALK_OUTER_M, SIDEWALK_OUTER_M + depth
            y0, y1 = (near, far) if side > 0 else (-far, -near)
            _add_building(parts, rng, x0, x1, y0, y1, height, gap_before >= 1.5, gap_after >= 1.5, side, record)


# --------------------------------------------------------------------------
# street: furniture and vegetation
# --------------------------------------------------------------------------
def _add_tree(parts: Parts, rng, x_m, y_m, ground_m, record: dict) -> None:
    trunk_h = float(rng.uniform(2.6, 3.8))
    trunk_r = float(rng.uniform(0.12, 0.22))
    top = np.array([x_m, y_m, ground_m + trunk_h])
    add(parts, "tree_bark", cylinder_between((x_m, y_m, ground_m), top + (0, 0, 0.6), trunk_r, 12))
    unit_v, unit_f = unit_icosphere(3)
    lobes = []
    for _ in range(int(rng.integers(3, 6))):
        radius = float(rng.uniform(1.1, 1.9))
        centre = top + rng.uniform([-0.9, -0.9, 0.6], [0.9, 0.9, 1.8])
        # Lumpy foliage: per-vertex radial noise, slightly flattened lobes.
        noise = rng.uniform(0.86, 1.14, size=(len(unit_v), 1))
        v = unit_v * noise * (radius * np.array([1.0, 1.0, 0.85])) + centre
        # Lift the lobe so foliage clears parked vans (≥ 2.4 m above ground).
        v[:, 2] += max(0.0, ground_m + 2.4 - v[:, 2].min())
        lobes.append((v, unit_f))
    add(parts, "tree_leaves", merge(lobes))
    crown = np.concatenate([v for v, _ in lobes])
    lo = np.minimum(crown.min(axis=0), (x_m - trunk_r, y_m - trunk_r, ground_m))
    hi = np.maximum(crown.max(axis=0), (x_m + trunk_r, y_m + trunk_r, ground_m))
    record.setdefault("trees", []).append({"box_m": [lo.round(3).tolist(), hi.round(3).tolist()]})


def _add_street_light(parts: Parts, x_m, side: float, record: dict) -> None:
    """8 m pole at the kerb-side edge of the footway with an arm over the road."""
    y = side * (ROAD_HALF_WIDTH_M + CURB_WIDTH_M + 0.45)
    z0 = CURB_HEIGHT_M
    record.setdefault("poles", []).append({"position_m": [x_m, y, z0], "diameter_m": 0.18, "height_m": 8.0 - z0})
    arm_end = np.array([x_m, y - side * 1.9, 8.25])
    add(parts, "metal_pole", merge([
        box((x_m, y, z0 + 0.3), (0.32, 0.32, 0.6)),  # base housing
        cylinder_between((x_m, y, z0), (x_m, y, 8.0), 0.09, 16),
        cylinder_between((x_m, y, 7.7), arm_end, 0.045, 12),
        box(arm_end + (0, -side * 0.25, 0), (0.35, 0.7, 0.14)),  # lamp head
    ]))
    add(parts, "lamp_glass", box(arm_end + (0, -side * 0.25, -0.08), (0.28, 0.55, 0.03)))


def _add_sign(parts: Parts, rng, x_m, side: float, record: dict) -> None:
    """Pole with a round, square or triangular plate facing oncoming traffic."""
    y = side * (ROAD_HALF_WIDTH_M + CURB_WIDTH_M + 0.35)
    add(parts, "metal_pole", cylinder_between((x_m, y, CURB_HEIGHT_M), (x_m, y, 2.9), 0.035, 12))
    centre = (x_m + side * 0.05, y, 2.5)  # plate on the pole side that oncoming traffic sees
    kind = int(rng.integers(0, 3))
    size = (0.64, 0.64) if kind == 0 else ((0.6, 0.6) if kind == 1 else (0.73, 0.63))
    record.setdefault("signs", []).append({"position_m": list(centre), "yaw_rad": 0.0 if side > 0 else np.pi,
                                           "shape": ("round", "square", "triangle")[kind], "size_m": size})
    facing = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])  # axis z → x (plate normal)
    if kind == 0:
        plate = place(unit_cylinder(32), (0.32, 0.32, 0.02), facing, centre)
    elif kind == 1:
        plate = box(centre, (0.02, 0.6, 0.6))
    else:  # a 3-sided cylinder is a triangular plate; local -x ends up as +z: corner up
        rot = facing @ rotation_z(np.pi)
        plate = place(unit_cylinder(3), (0.42, 0.42, 0.02), rot, centre)
    add(parts, "sign_face", plate)


def _add_furniture(parts: Parts, rng, grass: dict, record: dict) -> None:
    bed_y = 0.5 * (ROAD_HALF_WIDTH_M + CURB_WIDTH_M + GRASS_OUTER_M)
    for side in (-1.0, 1.0):
        beds = grass[side]
        for a, b in beds:
            if b - a >= 4.0:
                x = 0.5 * (a + b) + float(rng.uniform(-1.0, 1.0))
                _add_tree(parts, rng, x, side * (bed_y + float(rng.uniform(-0.15, 0.15))), GRASS_TOP_M, record)
        # Poles stand in the paved gaps between beds: lights at alternate gaps
        # (staggered between the sides), signs at a few of the others.
        gaps = [0.5 * (beds[i][1] + beds[i + 1][0]) for i in range(len(beds) - 1)
                if beds[i + 1][0] - beds[i][1] >= 2.0]
        first = 0 if side < 0 else 1
        for x in gaps[first::2]:
            _add_street_light(parts, x, side, record)
        others = gaps[1 - first::2]
        for i in sorted(rng.choice(len(others), size=min(3, len(others)), replace=False)):
            _add_sign(parts, rng, others[i], side, record)


def _street_parts(rng, record: dict) -> Parts:
    """The static world, by material; the road goes last so it can top up the triangle count. ``record`` gets what
    stands in it (buildings, trees, poles, signs) as plain data, for the street's OSI ground truth."""
    parts: Parts = {}
    grass = {side: _grass_intervals(rng) for side in (-1.0, 1.0)}
    _add_markings(parts)
    _add_sidewalks(parts, grass)
    _add_buildings(parts, rng, record)
    _add_furniture(parts, rng, grass, record)
    _add_road(parts, STREET_MIN_TRIANGLES - triangles(parts))
    return parts


# --------------------------------------------------------------------------
# cars
# --------------------------------------------------------------------------
def _centre_parts(parts: Parts):
    """Shift so the bounding box (of the written, rounded vertices) is centred; return dims (m)."""
    rounded = {m: [(np.round(v, 4), f) for v, f in vfs] for m, vfs in parts.items()}
    allv = np.concatenate([v for vfs in rounded.values() for v, _ in vfs])
    lo, hi = allv.min(axis=0), allv.max(axis=0)
    centre = np.round(0.5 * (lo + hi), 4)
    centred = {m: [(np.round(v - centre, 4), f) for v, f in vfs] for m, vfs in rounded.items()}
    return centred, hi - lo


# --------------------------------------------------------------------------
# file writing
# --------------------------------------------------------------------------
def _obj_text(parts: Parts, mtl_name: str, title: str) -> str:
    """OBJ text: all vertices, then one ``usemtl`` section per material (1-based faces)."""
    merged = [(m, merge(vfs)) for m, vfs in parts.items() if vfs]
    vertices, faces = merge([vf for _, vf in merged])
    # +0.0 turns -0.0 into 0.0 so no "-0.0000" appears.
    vertices = np.round(vertices, 4) + 0.0
    # One %-format over a flat tuple formats every number in C; no per-vertex loop.
    lines = [f"# {title}\n", f"mtllib {mtl_name}\n", f"o {os.path.splitext(mtl_name)[0]}\n"]
    lines.append(("v %.4f %.4f %.4f\n" * len(vertices)) % tuple(vertices.ravel().tolist()))
    sections = np.split(faces + 1, np.cumsum([len(f) for _, (_, f) in merged])[:-1])  # OBJ counts from 1
    for (material, _), section in zip(merged, sections):
        lines.append(f"usemtl {material}\n")
        lines.append(("f %d %d %d\n" * len(section)) % tuple(section.ravel().tolist()))
    return "".join(lines)


def _mtl_text(materials) -> str:
    out = ["# lidar_fmu demo scene materials\n"]
    for name in materials:
        r, g, b = MATERIAL_COLOURS[name]
        out.append(
            f"newmtl {name}\nKa 0.0000 0.0000 0.0000\nKd {r:.4f} {g:.4f} {b:.4f}\n"
            f"Ks 0.1000 0.1000 0.1000\nNs 20.0000\nd {_TRANSLUCENT.get(name, 1.0):.4f}\nillum 2\n\n"
        )
    return "".join(out)


def _write_text(path: str, text: str) -> int:
    """Write atomically (temp file + rename) so readers never see half a file; return bytes."""
    data = text.encode("ascii")
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
    return len(data)


def _write_mesh(out_dir: str, stem: str, parts: Parts, title: str) -> dict:
    """Write ``stem.obj`` + ``stem.mtl``; return {file name: size in bytes}."""
    obj, mtl = stem + ".obj", stem + ".mtl"
    return {
        mtl: _write_text(os.path.join(out_dir, mtl), _mtl_text(list(parts))),
        obj: _write_text(os.path.join(out_dir, obj), _obj_text(parts, mtl, title)),
    }


# --------------------------------------------------------------------------
# layout
# --------------------------------------------------------------------------
def _park_side(rng, side: float, models: dict, first_id: int) -> list:
    """Cars nose-to-tail along one kerb, skipping the zebra crossing zone."""
    names = list(_CAR_SHARE)
    share = np.array([_CAR_SHARE[n] for n in names])
    cars: list[dict[str, Any]] = []
    x = -STREET_HALF_LENGTH_M + 1.0
    while True:
        name = names[int(rng.choice(len(names), p=share))]
        length, width, height = models[name]["dimension_m"]
        gap = rng.uniform(0.8, 2.5) if rng.random() < 0.85 else rng.uniform(5.0, 12.0)
        start = x + gap
        if start + length > STREET_HALF_LENGTH_M - 1.0:
            break
        if start < CROSSING_NO_PARKING_M and start + length > -CROSSING_NO_PARKING_M:
            x = CROSSING_NO_PARKING_M
            continue
        kerb_gap = rng.uniform(0.2, 0.35)
        y = side * (ROAD_HALF_WIDTH_M - kerb_gap - width / 2)
        yaw = (0.0 if side < 0 else np.pi) + rng.uniform(-0.025, 0.025)
        cars.append({
            "id": first_id + len(cars),
            "mesh": name + ".obj",
            "position_m": [round(float(start + length / 2), 4), round(float(y), 4), round(float(height / 2), 4)],
            "orientation_rad": [0.0, 0.0, round(float(yaw), 6)],
            "dimension_m": [round(float(d), 4) for d in (length, width, height)],
        })
        x = start + length
    return cars


def generate_street(out_dir, seed: int = 0) -> dict:
    """Write the street, car models and ``layout.json`` into ``out_dir``; return the layout.

    Same ``seed`` → byte-identical files. Sizes in metres, angles in radians.
    """
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(seed)
    files: dict[str, Any] = {}
    models: dict[str, dict[str, Any]] = {}
    for name, spec in CAR_TYPES.items():
        parts, dims = _centre_parts(car_parts(spec))
        files.update(_write_mesh(out_dir, name, parts, f"lidar_fmu demo car {name}: bbox-centred, x forward, z up, m"))
        models[name] = {"file": name + ".obj", "triangles": triangles(parts),
                        "dimension_m": [round(float(d), 4) for d in dims]}
    standing: dict[str, list] = {}
    street = _street_parts(rng, standing)
    files.update(_write_mesh(out_dir, "street", street, f"lidar_fmu demo street, seed {seed}: x along, z up, m"))
    cars = _park_side(rng, -1.0, models, 1)
    cars += _park_side(rng, 1.0, models, 1 + len(cars))
    street_tris = triangles(street)
    car_tris = sum(models[c["mesh"][:-4]]["triangles"] for c in cars)
    layout = {
        "generator_version": GENERATOR_VERSION,
        "seed": int(seed),
        "environment": STREET_FILE,
        "environment_id": ENVIRONMENT_ID_BASE,
        "car_models": models,
        "cars": cars,
        # what stands in the street, for its OSI ground truth (lidar_fmu.tools.demo.street_ground_truth)
        "standing": {key: _rounded(value) for key, value in standing.items()},
        "triangles": {"environment": street_tris, "cars": car_tris, "total": street_tris + car_tris},
        "files": files,
    }
    # layout.json goes last: its presence means every other file is complete.
    _write_text(os.path.join(out_dir, LAYOUT_FILE), json.dumps(layout, indent=1, sort_keys=True) + "\n")
    return layout


def _rounded(value):
    """Floats of a JSON-bound value rounded to 0.1 mm (numpy scalars as plain floats)."""
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return round(float(value), 4)
    return value


def _complete_layout(out_dir: str, seed: int):
    """The layout in ``out_dir`` if it and every file it lists are intact, else None."""
    try:
        with open(os.path.join(out_dir, LAYOUT_FILE), encoding="ascii") as fh:
            layout = json.load(fh)
        if layout.get("generator_version") != GENERATOR_VERSION or layout.get("seed") != seed:
            return None
        for name, size in layout["files"].items():
            if os.path.getsize(os.path.join(out_dir, name)) != size:
                return None
        return layout
    except (OSError, ValueError, KeyError, AttributeError):
        return None


def ensure_street(out_dir, seed: int = 0) -> dict:
    """Generate the street into ``out_dir`` unless a complete one for ``seed`` is there."""
    layout = _complete_layout(os.fspath(out_dir), seed)
    return layout if layout is not None else generate_street(out_dir, seed)


def load_street_scene(out_dir):
    """Load a generated street: returns ``(Scene, layout)``.

    The static world is one instance with id ``ENVIRONMENT_ID_BASE``; each
    parked car is an instance (id = layout id) of its shared car mesh, posed at
    its bounding-box centre.
    """
    out_dir = os.fspath(out_dir)
    with open(os.path.join(out_dir, LAYOUT_FILE), encoding="ascii") as fh:
        layout = json.load(fh)
    scene = Scene()
    scene.add_instance(ENVIRONMENT_ID_BASE, load_mesh(os.path.join(out_dir, layout["environment"])))
    meshes: dict[str, Mesh] = {}
    for car in layout["cars"]:
        mesh = meshes.get(car["mesh"])
        if mesh is None:
            mesh = meshes[car["mesh"]] = load_mesh(os.path.join(out_dir, car["mesh"]))
        scene.add_instance(car["id"], mesh, pose_matrix(car["position_m"], car["orientation_rad"]))
    return scene, layout
