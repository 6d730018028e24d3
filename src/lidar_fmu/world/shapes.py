"""Shapes every generated mesh is made of: unit primitives, placed by scale, rotation and translation.

A shape is a pair ``(vertices (V, 3) float m, faces (F, 3) int)`` in a common
frame (Z up); unit shapes are built once and shared (read-only), callers
place copies. :class:`MeshBuilder` gathers shapes by visual material, OSI
id and semantic class into one :class:`~lidar_fmu.geometry.scene.Mesh`. Everything is plain numpy
(the unit primitives too, so building a scene never imports trimesh), deterministic for its inputs.
"""
from __future__ import annotations

import functools

import numpy as np

from ..geometry.scene import INSTANCE_ID, Mesh, box_shape, merge
from ..geometry.semantic import UNLABELLED
from .lines import fill_polygon

#: (vertices (V, 3) m, faces (F, 3)): one shape
Shape = tuple

#: sections of round shapes where the caller names none (assumed: round enough at a lidar's resolution)
DEFAULT_SECTIONS = 16
#: a rounded box's superellipsoid exponent where the caller names none (the larger, the squarer; assumed)
ROUNDED_BOX_EXPONENT = 8.0
#: a direction whose z is within this of -1 points straight down (float rounding)
ANTIPARALLEL_TOLERANCE = 1e-12
#: a part set smaller than this (m) along an axis keeps this size there (no division by zero)
MIN_SIZE_M = 1e-6
#: the regular icosahedron: its 12 vertices (±1, ±φ, 0) cyclically, φ the golden ratio, and its 20 outward triangles
GOLDEN_RATIO = (1.0 + 5.0**0.5) / 2.0
_PHI = GOLDEN_RATIO
ICOSAHEDRON_VERTICES = (
    (-1, _PHI, 0), (1, _PHI, 0), (-1, -_PHI, 0), (1, -_PHI, 0), (0, -1, _PHI), (0, 1, _PHI),
    (0, -1, -_PHI), (0, 1, -_PHI), (_PHI, 0, -1), (_PHI, 0, 1), (-_PHI, 0, -1), (-_PHI, 0, 1),
)
ICOSAHEDRON_FACES = (
    (0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2),
    (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5),
    (2, 4, 11), (6, 2, 10), (8, 6, 7), (9, 8, 1),
)


def frozen(*arrays):
    for a in arrays:
        a.flags.writeable = False
    return arrays


@functools.cache
def unit_box():
    """Side 1, centred at the origin: 8 corners, 12 outward triangles."""
    return frozen(*box_shape((1.0, 1.0, 1.0)))


def _ring(sections: int) -> np.ndarray:
    angle = np.linspace(0.0, 2.0 * np.pi, sections, endpoint=False)
    return np.column_stack([np.cos(angle), np.sin(angle)])


def _walls(lower: np.ndarray, upper: np.ndarray, outward: bool) -> np.ndarray:
    """Quads between two rings of vertex indices (same length), two triangles each, facing out (or in)."""
    nxt = np.roll(lower, -1), np.roll(upper, -1)
    a = np.column_stack([lower, nxt[0], nxt[1]])
    b = np.column_stack([lower, nxt[1], upper])
    faces = np.concatenate([a, b])
    return faces if outward else faces[:, ::-1]


@functools.cache
def unit_cylinder(sections: int):
    """Radius 1, height 1, axis z, centred at the origin, closed by two fans."""
    ring = _ring(sections)
    n = sections
    vertices = np.concatenate([
        np.column_stack([ring, np.full(n, -0.5)]),
        np.column_stack([ring, np.full(n, 0.5)]),
        [[0.0, 0.0, -0.5], [0.0, 0.0, 0.5]],
    ])
    i = np.arange(n)
    j = (i + 1) % n
    bottom = np.column_stack([np.full(n, 2 * n), j, i])
    top = np.column_stack([np.full(n, 2 * n + 1), n + i, n + j])
    return frozen(vertices, np.concatenate([_walls(i, n + i, True), bottom, top]).astype(np.int64))


@functools.cache
def unit_annulus(inner_ratio: float, sections: int):
    """Outer radius 1, inner radius ``inner_ratio``, height 1, axis z, centred at the origin."""
    ring = _ring(sections)
    n = sections
    vertices = np.concatenate([
        np.column_stack([ring, np.full(n, -0.5)]),  # outer bottom 0..n
        np.column_stack([ring, np.full(n, 0.5)]),  # outer top n..2n
        np.column_stack([inner_ratio * ring, np.full(n, -0.5)]),  # inner bottom 2n..3n
        np.column_stack([inner_ratio * ring, np.full(n, 0.5)]),  # inner top 3n..4n
    ])
    i = np.arange(n)
    faces = np.concatenate([
        _walls(i, n + i, True),  # outer wall, facing out
        _walls(2 * n + i, 3 * n + i, False),  # inner wall, facing the hole
        _walls(n + i, 3 * n + i, True),  # top ring, facing up
        _walls(i, 2 * n + i, False),  # bottom ring, facing down
    ])
    return frozen(vertices, faces.astype(np.int64))


@functools.cache
def unit_icosphere(subdivisions: int):
    """Radius 1: an icosahedron whose triangles are split in four ``subdivisions`` times, pushed onto the sphere."""
    vertices = np.array(ICOSAHEDRON_VERTICES, float)
    faces = np.array(ICOSAHEDRON_FACES, np.int64)
    for _ in range(subdivisions):
        edges = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1)
        unique, inverse = np.unique(edges, axis=0, return_inverse=True)
        mid = len(vertices) + inverse.reshape(3, -1).T  # (F, 3): midpoints of edges 01, 12, 20
        vertices = np.concatenate([vertices, 0.5 * (vertices[unique[:, 0]] + vertices[unique[:, 1]])])
        a, b, c = faces.T
        ab, bc, ca = mid.T
        faces = np.concatenate([
            np.column_stack([a, ab, ca]), np.column_stack([ab, b, bc]),
            np.column_stack([ca, bc, c]), np.column_stack([ab, bc, ca]),
        ])
    vertices = vertices / np.linalg.norm(vertices, axis=1, keepdims=True)
    return frozen(vertices, faces)


def rotation_onto(direction) -> np.ndarray:
    """The rotation turning +z onto the unit vector ``direction`` (Rodrigues; a half turn about x for -z)."""
    d = np.asarray(direction, float)
    c = float(d[2])
    if c < -1.0 + ANTIPARALLEL_TOLERANCE:
        return np.diag([1.0, -1.0, -1.0])
    k = np.array([[0.0, 0.0, d[0]], [0.0, 0.0, d[1]], [-d[0], -d[1], 0.0]])  # cross(z, d) as a matrix
    return np.eye(3) + k + k @ k / (1.0 + c)


def rotation_z(yaw_rad: float) -> np.ndarray:
    c, s = np.cos(yaw_rad), np.sin(yaw_rad)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rotation_x(roll_rad: float) -> np.ndarray:
    c, s = np.cos(roll_rad), np.sin(roll_rad)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def place(vf, scale=1.0, rotation=None, translation=(0.0, 0.0, 0.0)):
    """Scale (per axis, m), then rotate, then translate a unit shape."""
    vertices, faces = vf
    v = np.asarray(vertices, float) * np.asarray(scale, float)
    if rotation is not None:
        v = v @ np.asarray(rotation, float).T
    return v + np.asarray(translation, float), faces


def box(centre_m, size_m, yaw_rad: float = 0.0):
    return place(unit_box(), size_m, rotation_z(yaw_rad) if yaw_rad else None, centre_m)


def cylinder_between(p0_m, p1_m, radius_m: float, sections: int = DEFAULT_SECTIONS):
    """Cylinder whose axis runs from ``p0_m`` to ``p1_m``."""
    p0, p1 = np.asarray(p0_m, float), np.asarray(p1_m, float)
    axis = p1 - p0
    length = float(np.linalg.norm(axis))
    rotation = rotation_onto(axis / length)
    return place(unit_cylinder(sections), (radius_m, radius_m, length), rotation, 0.5 * (p0 + p1))


def grid(x0, x1, y0, y1, z_m, nx: int, ny: int):
    """Upward-facing flat grid of ``nx × ny`` quads at height ``z_m``."""
    xs, ys = np.linspace(x0, x1, nx + 1), np.linspace(y0, y1, ny + 1)
    gx, gy = np.meshgrid(xs, ys, indexing="ij")
    vertices = np.column_stack([gx.ravel(), gy.ravel(), np.full(gx.size, float(z_m))])
    i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    a = (i * (ny + 1) + j).ravel()
    b, c, d = a + ny + 1, a + ny + 2, a + 1  # (x+1,y), (x+1,y+1), (x,y+1): counter-clockwise from above
    faces = np.concatenate([np.column_stack([a, b, c]), np.column_stack([a, c, d])])
    return vertices, faces


def quads(corners_m):
    """(N, 4, 3) corners, counter-clockwise seen from the front → (V, F)."""
    corners = np.asarray(corners_m, float).reshape(-1, 4, 3)
    base = 4 * np.arange(len(corners))[:, None]
    faces = np.concatenate([base + [0, 1, 2], base + [0, 2, 3]])
    return corners.reshape(-1, 3), faces


def compact(vertices, faces):
    """Drop vertices no face uses (keeps the faces' vertex order)."""
    used, inverse = np.unique(np.asarray(faces).ravel(), return_inverse=True)
    return np.asarray(vertices)[used], inverse.reshape(-1, 3)


def tile(vf, offsets_m):
    """Copy a small (V, F) template at each offset (N, 3) without Python loops."""
    vertices, faces = vf
    offsets = np.asarray(offsets_m, float)
    v = (vertices[None, :, :] + offsets[:, None, :]).reshape(-1, 3)
    f = (faces[None, :, :] + (len(vertices) * np.arange(len(offsets)))[:, None, None]).reshape(-1, 3)
    return v, f


@functools.cache
def cube_surface(cells: int):
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
    return frozen(np.concatenate(vertices), np.concatenate(faces))


def superellipsoid(t, half_extents_m, exponent: float):
    """Push cube-surface points ``t`` radially onto |x/a|^k + |y/b|^k + |z/c|^k = 1."""
    scale = np.sum(np.abs(t) ** exponent, axis=1, keepdims=True) ** (-1.0 / exponent)
    return t * scale * np.asarray(half_extents_m, float)


def rounded_box(half_extents_m, cells: int, exponent: float = ROUNDED_BOX_EXPONENT):
    """Superellipsoid: a box with smoothly rounded edges, ``6·2·cells²`` triangles."""
    t, faces = cube_surface(cells)
    return superellipsoid(t, half_extents_m, exponent), faces


def superellipse_x(half_extents_m, y_m, z_m, exponent: float = ROUNDED_BOX_EXPONENT) -> float:
    """x of the rounded-box surface at (y, z) (used to seat lights on the body)."""
    a, b, c = half_extents_m
    rest = 1.0 - abs(y_m / b) ** exponent - abs(z_m / c) ** exponent
    return a * max(rest, 0.0) ** (1.0 / exponent)


def frustum(p0_m, p1_m, radius0_m: float, radius1_m: float, sections: int = DEFAULT_SECTIONS):
    """A truncated cone from ``p0_m`` (radius ``radius0_m``) to ``p1_m`` (``radius1_m``), closed at both ends."""
    vertices, faces = cylinder_between(p0_m, p1_m, 1.0, sections)
    p0, p1 = np.asarray(p0_m, float), np.asarray(p1_m, float)
    axis = (p1 - p0) / np.linalg.norm(p1 - p0)
    along = (vertices - p0) @ axis  # 0 at p0, the length at p1
    t = along / np.linalg.norm(p1 - p0)
    radial = vertices - p0 - along[:, None] * axis
    radius = radius0_m + (radius1_m - radius0_m) * t
    return p0 + along[:, None] * axis + radial * radius[:, None], faces


def ellipsoid(centre_m, radii_m, subdivisions: int = 2):
    """An ellipsoid (an icosphere stretched) of semi-axes ``radii_m`` at ``centre_m``."""
    return place(unit_icosphere(subdivisions), radii_m, None, centre_m)


def prism(outline_yz, x0_m: float, x1_m: float):
    """A flat outline (P, 2) in the (y, z) plane, counter-clockwise seen from +x, extruded from x0 to x1: a sign
    plate. → (front face at x1, back face and rim): two shapes."""
    outline = np.asarray(outline_yz, float)
    n = len(outline)
    caps = fill_polygon(outline)
    front = (np.column_stack([np.full(n, x1_m), outline]), caps)
    back_v = np.column_stack([np.full(n, x0_m), outline])
    i = np.arange(n)
    j = (i + 1) % n
    rim_faces = np.concatenate([np.column_stack([i, j, n + j]), np.column_stack([i, n + j, n + i])])
    rim = (np.concatenate([back_v, np.column_stack([np.full(n, x1_m), outline])]), rim_faces)
    return front, merge([(back_v, caps[:, ::-1]), rim])


def leaf_cloud(rng: np.random.Generator, centre_m, radii_m, count: int, size_m: float):
    """``count`` small square facets of side ``size_m``, randomly turned, scattered through an ellipsoid: foliage a
    beam partly passes through (the gaps between leaves), partly returns from at several depths."""
    centre, radii = np.asarray(centre_m, float), np.asarray(radii_m, float)
    # uniform in the ellipsoid: a direction, and a radius ∝ u^(1/3)
    direction = rng.normal(size=(count, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    at = centre + direction * radii * rng.random((count, 1)) ** (1.0 / 3.0)
    # each facet spans two random orthogonal unit vectors
    u = rng.normal(size=(count, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    w = np.cross(u, rng.normal(size=(count, 3)))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    half = 0.5 * size_m
    corners = np.stack([at - half * u - half * w, at + half * u - half * w, at + half * u + half * w,
                        at - half * u + half * w], axis=1)
    return quads(corners)


def normalised(parts: dict) -> tuple[dict, np.ndarray]:
    """``parts`` (material → shapes) moved to their bounding-box centre and scaled into the unit box
    [-0.5, 0.5]³; and the size (length, width, height) m they had. An instance pose scaled by an OSI object's
    ``base.dimension`` then fits them into its box."""
    vertices = np.concatenate([v for shapes in parts.values() for v, _ in shapes])
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    centre, size = 0.5 * (lo + hi), np.maximum(hi - lo, MIN_SIZE_M)
    return {m: [((np.asarray(v, float) - centre) / size, f) for v, f in shapes] for m, shapes in parts.items()}, size

def add(parts: dict, material: str, vf) -> None:
    """Append shape ``vf`` to ``parts`` (material → list of shapes)."""
    parts.setdefault(material, []).append(vf)


def triangles(parts: dict) -> int:
    """Triangles in ``parts`` (material → list of shapes)."""
    return int(sum(len(f) for vfs in parts.values() for _, f in vfs))


class MeshBuilder:
    """Shapes gathered by visual material, OSI id and semantic class, made into one :class:`Mesh` at the end.

    ``add(shape, material, osi_id, semantic)``: ``material`` is a visual material name
    (``ir:<IR name>`` names its infrared material itself,
    :mod:`lidar_fmu.physics.materials.mapping`); ``osi_id`` the OSI id the
    triangles report, ``None`` for their instance's; ``semantic`` their class
    (:mod:`lidar_fmu.geometry.semantic`), ``UNLABELLED`` for their instance's.
    """

    def __init__(self) -> None:
        self._shapes: list[tuple[np.ndarray, np.ndarray, int, np.uint64, int]] = []
        self._materials: dict[str, int] = {}

    def add(self, shape, material: str, osi_id: int | None = None, semantic: int = UNLABELLED) -> None:
        vertices, faces = shape
        if len(faces) == 0:
            return
        index = self._materials.setdefault(material, len(self._materials))
        label = INSTANCE_ID if osi_id is None else np.uint64(osi_id)
        self._shapes.append((np.asarray(vertices, np.float64), np.asarray(faces, np.int64), index, label, semantic))

    def extend(self, parts: dict, osi_id: int | None = None, semantic: int = UNLABELLED) -> None:
        """Add every shape of ``parts`` (material → list of shapes) under ``osi_id`` and ``semantic``."""
        for material, shapes in parts.items():
            for shape in shapes:
                self.add(shape, material, osi_id, semantic)

    @property
    def triangle_count(self) -> int:
        return sum(len(shape[1]) for shape in self._shapes)

    def mesh(self, name: str) -> Mesh | None:
        """The gathered shapes as one mesh (``None`` when there is none); OSI ids and semantic classes only where
        some shape has one."""
        if not self._shapes:
            return None
        vertices, faces = merge([(v, f) for v, f, *_ in self._shapes])
        counts = [len(f) for _, f, *_ in self._shapes]
        material = np.repeat([m for _, _, m, _, _ in self._shapes], counts).astype(np.int32)
        labels = np.repeat(np.array([i for _, _, _, i, _ in self._shapes], np.uint64), counts)
        codes = np.repeat(np.array([c for *_, c in self._shapes], np.uint8), counts)
        return Mesh(vertices, faces, material, tuple(self._materials), name, None,
                    None if np.all(labels == INSTANCE_ID) else labels, None,
                    None if np.all(codes == UNLABELLED) else codes)
