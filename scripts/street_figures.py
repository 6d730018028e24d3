"""The figure of docs/world.md's "The street around the road": each style on the test road of tests/ (run by hand
in a checkout).

    .venv/bin/python scripts/street_figures.py [OUT_DIR]     # default docs/

``street_styles.png``: a bird's-eye view (top row) and a perspective from the road (bottom row) of ``urban``,
``suburban``, ``rural`` and ``highway``, their triangles drawn by semantic class (the road grey).
"""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "docs")
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from helpers.road_views import road_view  # noqa: E402
from lidar_fmu.osi.decode import decode_sensor_view  # noqa: E402
from lidar_fmu.osi.ground_truth import decode_road  # noqa: E402
from lidar_fmu.world.road import build_road  # noqa: E402
from lidar_fmu.world.shapes import MeshBuilder  # noqa: E402
from lidar_fmu.world.street import STREET_STYLES, build_street, street_seed  # noqa: E402

COLOURS = {"road": "#808080", "building": "#b07050", "glass": "#5080c0", "vegetation": "#3a8a30",
           "pole": "#202020", "traffic_sign": "#e0c000", "barrier": "#a060a0"}
EYE, LOOK = np.array([-45.0, -1.75, 1.9]), np.array([1.0, 0.25, -0.02])


def triangles(road, parts):
    """(T, 3, 3) triangles and their colours: the road's, then the street's."""
    mesh = road.builder.mesh("road")
    tris, colours = [mesh.vertices[mesh.faces]], [np.full(mesh.triangle_count, COLOURS["road"], object)]
    for part in parts:
        v, f = part.shape
        key = "glass" if part.material == "ir:glass_clear" else part.semantic
        tris.append(np.asarray(v)[np.asarray(f)])
        colours.append(np.full(len(f), COLOURS[key], object))
    return np.concatenate(tris), np.concatenate(colours)


def perspective(tris, colours):
    """Triangles projected through a pinhole at EYE looking along LOOK, far ones drawn first."""
    forward = LOOK / np.linalg.norm(LOOK)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    rel = tris - EYE
    depth = rel @ forward
    keep = np.all(depth > 0.5, axis=1)
    rel, depth, colours = rel[keep], depth[keep], colours[keep]
    xy = np.stack([rel @ right, rel @ up], axis=-1) / depth[..., None]
    order = np.argsort(-depth.mean(axis=1))
    return xy[order], colours[order]


def main() -> None:
    frame = decode_sensor_view(road_view())
    road_gt = decode_road(frame.road_part, frame.country_code)
    fig, axes = plt.subplots(2, 4, figsize=(16, 7))
    for column, style in enumerate(STREET_STYLES):
        road = build_road(road_gt, MeshBuilder())
        tris, colours = triangles(road, build_street(road, style, 200.0, None, street_seed(frame.road_part)))
        top = np.argsort(tris[:, :, 2].max(axis=1))  # high things over low ones
        axes[0, column].add_collection(PolyCollection(tris[top][:, :, :2], facecolors=colours[top], linewidths=0))
        axes[0, column].set(xlim=(-60, 60), ylim=(-50, 50), aspect="equal", title=f"{style}: from above (m)")
        xy, ordered = perspective(tris, colours)
        axes[1, column].add_collection(PolyCollection(xy, facecolors=ordered, linewidths=0))
        axes[1, column].set(xlim=(-1.0, 1.0), ylim=(-0.35, 0.6), aspect="equal", xticks=[], yticks=[],
                            title=f"{style}: from the road")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    fig.legend(handles, list(COLOURS), loc="lower center", ncol=len(COLOURS))
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(os.path.join(OUT, "street_styles.png"), dpi=60)


if __name__ == "__main__":
    main()
