"""Procedural, deterministic demo street scene (meshes on disk + parked-car layout).

:func:`generate_street` writes a ~200 m straight urban street as real mesh files
with named visual materials:

* ``street.obj`` / ``street.mtl`` – the static world (road, lane markings,
  kerbs, sidewalks, grass strips, buildings with recessed windows, street
  lights, trees, traffic signs) in one multi-material OBJ;
* ``car_<type>.obj`` / ``.mtl`` – car models in the OSI object frame (origin at
  the bounding-box centre, x forward, y left, z up, metres);
* ``layout.json`` – the parked cars (bounding-box-centre poses) and triangle
  totals.

World frame: x along the street (−100 m … +100 m), y across (road centred on
y = 0), z up, road surface at z = 0. Traffic drives on the right, so cars on the
y < 0 kerb face +x and cars on the y > 0 kerb face −x.

Everything is drawn from one ``numpy.random.Generator(seed)`` in a fixed order
and numbers are written with fixed formats, so the same seed gives
byte-identical files. :func:`load_street_scene` turns the files into a
:class:`~lidar_fmu.geometry.scene.Scene`.
"""
from __future__ import annotations

import functools
import json
import os
from typing import Any

import numpy as np

from ..geometry.scene import Mesh, Scene, load_mesh
from ..geometry.transforms import pose_matrix
from ..pointcloud import ENVIRONMENT_ID_BASE

#: Bump when the generated content changes so :func:`ensure_street` regenerates.
GENERATOR_VERSION = 1

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
# primitives (unit shapes are built once; callers scale/rotate/translate them)
# --------------------------------------------------------------------------
def _frozen(*arrays):
    for a in arrays:
        a.flags.writeable = False
    return arrays


@functools.cache
def _unit_box():
    import trimesh

    tm = trimesh.creation.box(extents=(1.0, 1.0, 1.0))
    return _frozen(np.asarray(tm.vertices, float), np.asarray(tm.faces, np.int64))


@functools.cache
def _unit_cylinder(sections: int):
    """Radius 1, height 1, axis z, centred at the origin."""
    import trimesh

    tm = trimesh.creation.cylinder(radius=1.0, height=1.0, sections=sections)
    return _frozen(np.asarray(tm.vertices, float), np.asarray(tm.faces, np.int64))


@functools.cache
def _unit_annulus(inner_ratio: float, sections: int):
    """Outer radius 1, height 1, axis z, centred at the origin."""
    import trimesh

    tm = trimesh.creation.annulus(r_min=inner_ratio, r_max=1.0, height=1.0, sections=sections)
    return _frozen(np.asarray(tm.vertices, float), np.asarray(tm.faces, np.int64))


@functools.cache
def _unit_icosphere(subdivisions: int):
    import trimesh

    tm = trimesh.creation.icosphere(subdivisions=subdivisions, radius=1.0)
    return _frozen(np.asarray(tm.vertices, float), np.asarray(tm.faces, np.int64))


def _rotation_z(yaw_rad: float) -> np.ndarray:
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _rotation_x(roll_rad: float) -> np.ndarray:
    c, s = np.cos(roll_rad), np.sin(roll_rad)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def _place(vf, scale=1.0, rotation=None, translation=(0.0, 0.0, 0.0)):
    """Scale (per axis, m), then rotate, then translate a unit shape."""
    vertices, faces = vf
    v = np.asarray(vertices, float) * np.asarray(scale, float)
    if rotation is not None:
        v = v @ np.asarray(rotation, float).T
    return v + np.asarray(translation, float), faces


def _box(centre_m, size_m, yaw_rad: float = 0.0):
    return _place(_unit_box(), size_m, _rotation_z(yaw_rad) if yaw_rad else None, centre_m)


def _cylinder_between(p0_m, p1_m, radius_m: float, sections: int = 16):
    """Cylinder whose axis runs from ``p0_m`` to ``p1_m``."""
    import trimesh

    p0, p1 = np.asarray(p0_m, float), np.asarray(p1_m, float)
    axis = p1 - p0
    length = float(np.linalg.norm(axis))
    rotation = trimesh.geometry.align_vectors([0.0, 0.0, 1.0], axis / length)[:3, :3]
    return _place(_unit_cylinder(sections), (radius_m, radius_m, length), rotation, 0.5 * (p0 + p1))


def _grid(x0, x1, y0, y1, z_m, nx: int, ny: int):
    """Upward-facing flat grid of ``nx × ny`` quads at height ``z_m``."""
    xs, ys = np.linspace(x0, x1, nx + 1), np.linspace(y0, y1, ny + 1)
    gx, gy = np.meshgrid(xs, ys, indexing="ij")
    vertices = np.column_stack([gx.ravel(), gy.ravel(), np.full(gx.size, float(z_m))])
    i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    a = (i * (ny + 1) + j).ravel()
    b, c, d = a + ny + 1, a + ny + 2, a + 1  # (x+1,y), (x+1,y+1), (x,y+1): counter-clockwise from above
    faces = np.concatenate([np.column_stack([a, b, c]), np.column_stack([a, c, d])])
    return vertices, faces


def _quads(corners_m):
    """(N, 4, 3) corners, counter-clockwise seen from the front → (V, F)."""
    corners = np.asarray(corners_m, float).reshape(-1, 4, 3)
    base = 4 * np.arange(len(corners))[:, None]
    faces = np.concatenate([base + [0, 1, 2], base + [0, 2, 3]])
    return corners.reshape(-1, 3), faces


def _slab(x0, x1, y0, y1, z_top_m, cell_m: float):
    """Raised slab from z = 0: tessellated top plus four side walls (no bottom)."""
    nx = max(1, int(round((x1 - x0) / cell_m)))
    ny = max(1, int(round((y1 - y0) / cell_m)))
    top = _grid(x0, x1, y0, y1, z_top_m, nx, ny)
    z = z_top_m
    sides = _quads([
        [[x0, y0, 0], [x1, y0, 0], [x1, y0, z], [x0, y0, z]],  # faces -y
        [[x1, y0, 0], [x1, y1, 0], [x1, y1, z], [x1, y0, z]],  # faces +x
        [[x1, y1, 0], [x0, y1, 0], [x0, y1, z], [x1, y1, z]],  # faces +y
        [[x0, y1, 0], [x0, y0, 0], [x0, y0, z], [x0, y1, z]],  # faces -x
    ])
    return _merge([top, sides])


def _merge(vf_list):
    """Concatenate (V, F) pairs into one, offsetting face indices."""
    vertices = [np.asarray(v, float) for v, _ in vf_list]
    offsets = np.cumsum([0] + [len(v) for v in vertices[:-1]])
    faces = [np.asarray(f, np.int64) + o for (_, f), o in zip(vf_list, offsets)]
    return np.concatenate(vertices), np.concatenate(faces)


def _compact(vertices, faces):
    """Drop vertices no face uses (keeps the faces' vertex order)."""
    used, inverse = np.unique(np.asarray(faces).ravel(), return_inverse=True)
    return np.asarray(vertices)[used], inverse.reshape(-1, 3)


def _tile(vf, offsets_m):
    """Copy a small (V, F) template at each offset (N, 3) without Python loops."""
    vertices, faces = vf
    offsets = np.asarray(offsets_m, float)
    v = (vertices[None, :, :] + offsets[:, None, :]).reshape(-1, 3)
    f = (faces[None, :, :] + (len(vertices) * np.arange(len(offsets)))[:, None, None]).reshape(-1, 3)
    return v, f


def _add(parts: Parts, material: str, vf) -> None:
    parts.setdefault(material, []).append(vf)


def _triangles(parts: Parts) -> int:
    return int(sum(len(f) for vfs in parts.values() for _, f in vfs))


# --------------------------------------------------------------------------
# street: ground, road and sidewalks
# --------------------------------------------------------------------------
def _add_road(parts: Parts, min_triangles: int) -> None:
    """Asphalt as a fine grid (like a surveyed road mesh), at least ``min_triangles``.

    Finer than 1 m × 0.31 m only when the rest of the street came out small, so
    every seed gives a static world of comparable ray-tracing work.
    """
    length, width = 2 * STREET_HALF_LENGTH_M, 2 * ROAD_HALF_WIDTH_M
    cells = max(min_triangles // 2, int(length) * int(round(width / 0.31)))
    n_y = int(np.ceil(np.sqrt(cells * width / (3.0 * length))))  # cells ~3× longer than wide
    n_x = int(np.ceil(cells / n_y))
    _add(parts, "asphalt", _grid(-STREET_HALF_LENGTH_M, STREET_HALF_LENGTH_M,
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
    return _quads(corners)


def _solid_line(y_centre_m, width_m):
    """Solid line along the street, interrupted at the zebra crossing."""
    gap = CROSSING_HALF_LENGTH_M + 0.5
    length = STREET_HALF_LENGTH_M - gap
    return _merge([_stripes([-STREET_HALF_LENGTH_M], length, y_centre_m, width_m),
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
    _add(parts, "road_marking_white", _merge(lines))


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
        yard = _grid(-STREET_HALF_LENGTH_M, STREET_HALF_LENGTH_M, SIDEWALK_SLAB_OUTER_M, BACKYARD_OUTER_M,
                     0.0, 100, 13)
        for material, vf in (("concrete_curb", curb), ("concrete_sidewalk", walk),
                             ("grass", _merge(beds)), ("grass", yard)):
            _add(parts, material, _mirror_y(vf, side))


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
    frame = _merge([
        _box((mid_u, 0.5 * (c + d), r + 0.03), (bar, d - c, 0.06)),  # mullion
        _box((mid_u, c + 0.7 * (d - c), r + 0.03), (b - a, bar, 0.06)),  # transom
        _box((mid_u, c - 0.03, 0.02), (b - a + 0.1, 0.06, 0.12)),  # sill, proud of the wall
    ])
    return {"wall": (v, wall_faces), "glass": (v, glass_faces), "frame": frame}


def _balcony_cell(cell_w_m, depth_m=1.1, rail_h_m=1.0, bar_step_m=0.28):
    """Balcony on a cell's floor line, in facade coords: slab plus a bar railing.

    Returns ``{"slab", "rail"}`` → (V, F); the bars let rays pass between them.
    """
    u0, u1 = 0.1 * cell_w_m, 0.9 * cell_w_m
    slab = _box((0.5 * (u0 + u1), 0.0, 0.5 * depth_m), (u1 - u0, 0.15, depth_m))
    top = 0.075 + rail_h_m
    n_front = max(2, int(round((u1 - u0) / bar_step_m)))
    n_side = max(1, int(round(depth_m / bar_step_m)))
    front = np.column_stack([np.linspace(u0 + 0.03, u1 - 0.03, n_front), np.zeros(n_front),
                             np.full(n_front, depth_m - 0.03)])
    side_w = np.linspace(0.1, depth_m - 0.03 - bar_step_m, n_side)
    sides = np.concatenate([np.column_stack([np.full(n_side, u), np.zeros(n_side), side_w]) for u in (u0 + 0.03, u1 - 0.03)])
    bar = _box((0.0, 0.5 * (0.075 + top), 0.0), (0.025, rail_h_m, 0.025))
    rails = [
        _box((0.5 * (u0 + u1), top, depth_m - 0.03), (u1 - u0, 0.05, 0.05)),
        _box((u0 + 0.03, top, 0.5 * depth_m), (0.05, 0.05, depth_m)),
        _box((u1 - 0.03, top, 0.5 * depth_m), (0.05, 0.05, depth_m)),
    ]
    return {"slab": slab, "rail": _merge([_tile(bar, np.concatenate([front, sides]))] + rails)}


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
            v, f = _tile(vf, offsets)
            _add(parts, names[key], (np.asarray(origin_m, float) + v @ basis, f))


def _plain_wall(parts: Parts, material, origin_m, u_dir, length_m, height_m) -> None:
    o, u = np.asarray(origin_m, float), np.asarray(u_dir, float) * length_m
    up = np.array([0.0, 0.0, height_m])
    _add(parts, material, _quads([[o, o + u, o + u + up, o + up]]))


def _add_building(parts: Parts, rng, x0, x1, y0, y1, height_m, open_left: bool, open_right: bool,
                  street_side: float) -> None:
    """Box building on [x0,x1]×[y0,y1]; sides facing a narrow gap get no windows."""
    material = str(rng.choice(["facade_plaster", "facade_brick", "facade_concrete"]))
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
    _add(parts, "roof_tar", _grid(x0, x1, y0, y1, height_m, 1, 1))
    # Parapet around the roof edge, then a few rooftop plant boxes.
    t, h = 0.25, 0.8
    cz = height_m + 0.5 * h
    parapet = [
        _box((0.5 * (x0 + x1), y0 + 0.5 * t, cz), (x1 - x0, t, h)),
        _box((0.5 * (x0 + x1), y1 - 0.5 * t, cz), (x1 - x0, t, h)),
        _box((x0 + 0.5 * t, 0.5 * (y0 + y1), cz), (t, y1 - y0 - 2 * t, h)),
        _box((x1 - 0.5 * t, 0.5 * (y0 + y1), cz), (t, y1 - y0 - 2 * t, h)),
    ]
    _add(parts, material, _merge(parapet))
    for _ in range(int(rng.integers(0, 4))):
        size = rng.uniform([1.0, 1.0, 0.8], [3.0, 3.0, 2.0])
        cx = rng.uniform(x0 + 1.0 + size[0] / 2, max(x0 + 1.0 + size[0] / 2, x1 - 1.0 - size[0] / 2))
        cy = rng.uniform(y0 + 1.0 + size[1] / 2, max(y0 + 1.0 + size[1] / 2, y1 - 1.0 - size[1] / 2))
        _add(parts, "roof_unit_metal", _box((cx, cy, height_m + size[2] / 2), size))


def _add_buildings(parts: Parts, rng) -> None:
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
            _add_building(parts, rng, x0, x1, y0, y1, height, gap_before >= 1.5, gap_after >= 1.5, side)


# --------------------------------------------------------------------------
# street: furniture and vegetation
# --------------------------------------------------------------------------
def _add_tree(parts: Parts, rng, x_m, y_m, ground_m) -> None:
    trunk_h = float(rng.uniform(2.6, 3.8))
    trunk_r = float(rng.uniform(0.12, 0.22))
    top = np.array([x_m, y_m, ground_m + trunk_h])
    _add(parts, "tree_bark", _cylinder_between((x_m, y_m, ground_m), top + (0, 0, 0.6), trunk_r, 12))
    unit_v, unit_f = _unit_icosphere(3)
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
    _add(parts, "tree_leaves", _merge(lobes))


def _add_street_light(parts: Parts, x_m, side: float) -> None:
    """8 m pole at the kerb-side edge of the footway with an arm over the road."""
    y = side * (ROAD_HALF_WIDTH_M + CURB_WIDTH_M + 0.45)
    z0 = CURB_HEIGHT_M
    arm_end = np.array([x_m, y - side * 1.9, 8.25])
    _add(parts, "metal_pole", _merge([
        _box((x_m, y, z0 + 0.3), (0.32, 0.32, 0.6)),  # base housing
        _cylinder_between((x_m, y, z0), (x_m, y, 8.0), 0.09, 16),
        _cylinder_between((x_m, y, 7.7), arm_end, 0.045, 12),
        _box(arm_end + (0, -side * 0.25, 0), (0.35, 0.7, 0.14)),  # lamp head
    ]))
    _add(parts, "lamp_glass", _box(arm_end + (0, -side * 0.25, -0.08), (0.28, 0.55, 0.03)))


def _add_sign(parts: Parts, rng, x_m, side: float) -> None:
    """Pole with a round, square or triangular plate facing oncoming traffic."""
    y = side * (ROAD_HALF_WIDTH_M + CURB_WIDTH_M + 0.35)
    _add(parts, "metal_pole", _cylinder_between((x_m, y, CURB_HEIGHT_M), (x_m, y, 2.9), 0.035, 12))
    centre = (x_m + side * 0.05, y, 2.5)  # plate on the pole side that oncoming traffic sees
    kind = int(rng.integers(0, 3))
    facing = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])  # axis z → x (plate normal)
    if kind == 0:
        plate = _place(_unit_cylinder(32), (0.32, 0.32, 0.02), facing, centre)
    elif kind == 1:
        plate = _box(centre, (0.02, 0.6, 0.6))
    else:  # a 3-sided cylinder is a triangular plate; local -x ends up as +z: corner up
        rot = facing @ _rotation_z(np.pi)
        plate = _place(_unit_cylinder(3), (0.42, 0.42, 0.02), rot, centre)
    _add(parts, "sign_face", plate)


def _add_furniture(parts: Parts, rng, grass: dict) -> None:
    bed_y = 0.5 * (ROAD_HALF_WIDTH_M + CURB_WIDTH_M + GRASS_OUTER_M)
    for side in (-1.0, 1.0):
        beds = grass[side]
        for a, b in beds:
            if b - a >= 4.0:
                x = 0.5 * (a + b) + float(rng.uniform(-1.0, 1.0))
                _add_tree(parts, rng, x, side * (bed_y + float(rng.uniform(-0.15, 0.15))), GRASS_TOP_M)
        # Poles stand in the paved gaps between beds: lights at alternate gaps
        # (staggered between the sides), signs at a few of the others.
        gaps = [0.5 * (beds[i][1] + beds[i + 1][0]) for i in range(len(beds) - 1)
                if beds[i + 1][0] - beds[i][1] >= 2.0]
        first = 0 if side < 0 else 1
        for x in gaps[first::2]:
            _add_street_light(parts, x, side)
        others = gaps[1 - first::2]
        for i in sorted(rng.choice(len(others), size=min(3, len(others)), replace=False)):
            _add_sign(parts, rng, others[i], side)


def _street_parts(rng) -> Parts:
    """The static world, by material; the road goes last so it can top up the triangle count."""
    parts: Parts = {}
    grass = {side: _grass_intervals(rng) for side in (-1.0, 1.0)}
    _add_markings(parts)
    _add_sidewalks(parts, grass)
    _add_buildings(parts, rng)
    _add_furniture(parts, rng, grass)
    _add_road(parts, STREET_MIN_TRIANGLES - _triangles(parts))
    return parts


# --------------------------------------------------------------------------
# cars
# --------------------------------------------------------------------------
@functools.cache
def _cube_surface(cells: int):
    """Surface grid of the cube [-1, 1]^3 with ``cells × cells`` quads per side."""
    t = np.linspace(-1.0, 1.0, cells + 1)
    gu: np.ndarray  # the grid, then flat
    gv: np.ndarray
    gu, gv = np.meshgrid(t, t, indexing="ij")
    gu, gv = gu.ravel(), gv.ravel()
    i, j = np.meshgrid(np.arange(cells), np.arange(cells), indexing="ij")
    a = (i * (cells + 1) + j).ravel()
    quad = np.column_stack([a, a + cells + 1, a + cells + 2, a + 1])
    tri = np.concatenate([quad[:, [0, 1, 2]], quad[:, [0, 2, 3]]])
    vertices, faces = [], []
    for axis in range(3):
        b, c = (axis + 1) % 3, (axis + 2) % 3  # (b, c, axis) is right-handed: u × v = +axis
        for sign in (1.0, -1.0):
            v = np.empty((len(gu), 3))
            v[:, axis], v[:, b], v[:, c] = sign, gu, gv
            vertices.append(v)
            faces.append((tri if sign > 0 else tri[:, ::-1]) + (cells + 1) ** 2 * (len(vertices) - 1))
    return _frozen(np.concatenate(vertices), np.concatenate(faces))


def _superellipsoid(t, half_extents_m, exponent: float):
    """Push cube-surface points ``t`` radially onto |x/a|^k + |y/b|^k + |z/c|^k = 1."""
    scale = np.sum(np.abs(t) ** exponent, axis=1, keepdims=True) ** (-1.0 / exponent)
    return t * scale * np.asarray(half_extents_m, float)


def _rounded_box(half_extents_m, cells: int, exponent: float = 8.0):
    """Superellipsoid: a box with smoothly rounded edges, ``6·2·cells²`` triangles."""
    t, faces = _cube_surface(cells)
    return _superellipsoid(t, half_extents_m, exponent), faces


def _superellipse_x(half_extents_m, y_m, z_m, exponent: float = 8.0) -> float:
    """x of the rounded-box surface at (y, z) (used to seat lights on the body)."""
    a, b, c = half_extents_m
    rest = 1.0 - abs(y_m / b) ** exponent - abs(z_m / c) ** exponent
    return a * max(rest, 0.0) ** (1.0 / exponent)


def _car_body(spec):
    """Lower body from the sill to the belt line, with the bonnet falling to the nose."""
    half = np.array([spec["length_m"] / 2, spec["width_m"] / 2, (spec["belt_m"] - spec["clearance_m"]) / 2])
    v, f = _rounded_box(half, spec["body_cells"])
    # Bonnet and boot lids slope down towards the ends (quadratic in x, more on top).
    ends = np.clip((np.abs(v[:, 0]) - 0.45 * half[0]) / (0.55 * half[0]), 0.0, 1.0) ** 2
    top = np.clip(v[:, 2] / half[2], 0.0, 1.0)
    v[:, 2] -= 0.35 * half[2] * ends * top
    v[:, 2] += spec["clearance_m"] + half[2]
    return (v, f), half


def _car_cabin(spec):
    """Greenhouse above the belt line; its surface is split into glass and paint.

    Glass is chosen per quad in the undeformed cube parameters ``t`` so window
    edges follow grid lines (straight) instead of zig-zagging across triangles.
    """
    z0 = spec["belt_m"] - 0.12  # overlap the body so there is no seam
    half = np.array([spec["cabin_length_m"] / 2, 0.92 * spec["width_m"] / 2, (spec["height_m"] - z0) / 2])
    t, f = _cube_surface(spec["cabin_cells"])
    v = _superellipsoid(t, half, 6.0)
    rise = np.clip((v[:, 2] + half[2]) / (2 * half[2]), 0.0, 1.0)  # 0 at the belt, 1 at the roof
    taper = np.where(v[:, 0] > 0, spec["taper_front"], spec["taper_rear"])
    v[:, 0] *= 1.0 - taper * rise ** 1.2
    v[:, 1] *= 1.0 - 0.12 * rise  # tumblehome: side windows lean inwards
    v += (spec["cabin_x_m"], 0.0, z0 + half[2])
    corners = t[f]
    quad = 0.5 * (corners.min(axis=1) + corners.max(axis=1))  # a half-quad triangle spans its whole quad
    step = 2.0 / spec["cabin_cells"]
    band = (quad[:, 2] > (spec["belt_m"] + 0.03 - z0) / half[2] - 1.0) & (quad[:, 2] < 0.75)
    side = np.abs(quad[:, 1]) > 1.0 - 1e-9
    ends = np.abs(quad[:, 0]) > 1.0 - 1e-9
    side_glass = side & (np.abs(quad[:, 0]) < 0.82) & (np.abs(quad[:, 0] - 0.1) > 0.5 * step)  # A/C, B pillars
    if spec["cargo_x_m"] is not None:  # panel van: no side glass behind the cab
        side_glass &= quad[:, 0] > (spec["cargo_x_m"] - spec["cabin_x_m"]) / half[0]
    glass = band & (side_glass | (ends & (np.abs(quad[:, 1]) < 0.8)))
    return _compact(v, f[~glass]), _compact(v, f[glass])


def _car_wheels(spec):
    """Four tyres (annuli) with rims, axis along y, standing on z = 0."""
    r = spec["wheel_radius_m"]
    tyre_w = 0.22 if spec["width_m"] < 1.85 else 0.24
    y = spec["width_m"] / 2 - tyre_w / 2 - 0.03
    axle_x = spec["wheelbase_m"] / 2
    to_y = _rotation_x(np.pi / 2)  # cylinder axis z → y
    tyres, rims = [], []
    for x in (-axle_x, axle_x):
        for sy in (-y, y):
            centre = (x, sy, r)
            tyres.append(_place(_unit_annulus(0.62, 32), (r, r, tyre_w), to_y, centre))
            rims.append(_place(_unit_cylinder(24), (0.63 * r, 0.63 * r, tyre_w - 0.02), to_y, centre))
    return _merge(tyres), _merge(rims)


def _car_lights_and_bumpers(spec, body_half):
    """Head/tail lights seated into the body ends, bumpers below them."""
    centre_z = spec["clearance_m"] + body_half[2]
    light_z = spec["belt_m"] - 0.17
    light_y = spec["width_m"] / 2 - 0.27
    unit = _unit_icosphere(2)
    lights: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {"headlight_glass": [], "taillight_red": []}
    for end, material in ((1.0, "headlight_glass"), (-1.0, "taillight_red")):
        for sy in (-light_y, light_y):
            surface_x = _superellipse_x(body_half, sy, light_z - centre_z)
            centre = (end * (surface_x - 0.045), sy, light_z)
            lights[material].append(_place(unit, (0.07, 0.22, 0.07), None, centre))
    bumper_half = np.array([0.12, spec["width_m"] / 2 - 0.02, 0.1])
    bumpers = []
    for end in (1.0, -1.0):
        x = end * (spec["length_m"] / 2 - 0.1)
        v, f = _rounded_box(bumper_half, 6)
        bumpers.append((v + (x, 0.0, spec["clearance_m"] + 0.16), f))
    return {k: _merge(v) for k, v in lights.items()}, _merge(bumpers)


def _car_parts(spec) -> Parts:
    """A car in its own frame, not yet centred: ground at z = 0, x forward."""
    parts: Parts = {}
    body, body_half = _car_body(spec)
    paint_cabin, glass = _car_cabin(spec)
    _add(parts, spec["paint"], body)
    _add(parts, spec["paint"], paint_cabin)
    _add(parts, "car_glass", glass)
    tyres, rims = _car_wheels(spec)
    _add(parts, "tyre_rubber", tyres)
    _add(parts, "wheel_rim", rims)
    lights, bumpers = _car_lights_and_bumpers(spec, body_half)
    for material, vf in lights.items():
        _add(parts, material, vf)
    _add(parts, "car_plastic_black", bumpers)
    return parts


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
    merged = [(m, _merge(vfs)) for m, vfs in parts.items() if vfs]
    # +0.0 turns -0.0 into 0.0 so no "-0.0000" appears.
    vertices = np.round(np.concatenate([v for _, (v, _) in merged]), 4) + 0.0
    # One %-format over a flat tuple formats every number in C; no per-vertex loop.
    lines = [f"# {title}\n", f"mtllib {mtl_name}\n", f"o {os.path.splitext(mtl_name)[0]}\n"]
    lines.append(("v %.4f %.4f %.4f\n" * len(vertices)) % tuple(vertices.ravel().tolist()))
    offset = 1
    for material, (v, f) in merged:
        lines.append(f"usemtl {material}\n")
        lines.append(("f %d %d %d\n" * len(f)) % tuple((f + offset).ravel().tolist()))
        offset += len(v)
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
        parts, dims = _centre_parts(_car_parts(spec))
        files.update(_write_mesh(out_dir, name, parts, f"lidar_fmu demo car {name}: bbox-centred, x forward, z up, m"))
        models[name] = {"file": name + ".obj", "triangles": _triangles(parts),
                        "dimension_m": [round(float(d), 4) for d in dims]}
    street = _street_parts(rng)
    files.update(_write_mesh(out_dir, "street", street, f"lidar_fmu demo street, seed {seed}: x along, z up, m"))
    cars = _park_side(rng, -1.0, models, 1)
    cars += _park_side(rng, 1.0, models, 1 + len(cars))
    street_tris = _triangles(street)
    car_tris = sum(models[c["mesh"][:-4]]["triangles"] for c in cars)
    layout = {
        "generator_version": GENERATOR_VERSION,
        "seed": int(seed),
        "environment": STREET_FILE,
        "environment_id": ENVIRONMENT_ID_BASE,
        "car_models": models,
        "cars": cars,
        "triangles": {"environment": street_tris, "cars": car_tris, "total": street_tris + car_tris},
        "files": files,
    }
    # layout.json goes last: its presence means every other file is complete.
    _write_text(os.path.join(out_dir, LAYOUT_FILE), json.dumps(layout, indent=1, sort_keys=True) + "\n")
    return layout


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
