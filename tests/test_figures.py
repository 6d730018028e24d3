"""LiMOX-style figures: valid PNGs of sensible size, no pyplot state touched."""
import sys

import matplotlib.image
import numpy as np
import pytest

from lidar_fmu.pointcloud import POINT_DTYPE
from lidar_fmu.tools.figures import plot_range_limits, plot_reflectivity_bev

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def rings(radii_m=(5.0, 15.0, 25.0, 35.0, 45.0, 55.0), per_ring=360):
    """Rings round the sensor whose reflectivity rises with azimuth from 0 to 1."""
    radius = np.repeat(radii_m, per_ring)
    azimuth = np.tile(np.linspace(0.0, 2 * np.pi, per_ring, endpoint=False), len(radii_m))
    points = np.zeros(radius.size, POINT_DTYPE)
    points["x"], points["y"] = radius * np.cos(azimuth), radius * np.sin(azimuth)
    points["z"] = -1.8
    points["range"] = np.hypot(radius, 1.8)
    points["reflectivity"] = azimuth / (2 * np.pi)
    return points


def read_png(path):
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[2] in (3, 4)
    assert float(image[..., :3].std()) > 0.01  # not blank
    return image


def test_range_limits_png(tmp_path):
    path = tmp_path / "fig7.png"
    plot_range_limits(path)
    height, width = read_png(path).shape[:2]
    assert 600 <= width <= 3000 and 400 <= height <= 2000


def test_range_limits_subset_of_fits(tmp_path):
    path = tmp_path / "fig7_roots.png"
    plot_range_limits(path, pairs=((0.10, 50.0), (0.80, 120.0)), max_range_m=np.inf, fits=("root2", "root3", "root4"))
    read_png(path)


def test_range_limits_bad_fit(tmp_path):
    with pytest.raises(ValueError, match="unknown range-reflectivity fit"):
        plot_range_limits(tmp_path / "x.png", fits=("cubic",))


def test_bev_png(tmp_path):
    points = rings()
    near = points[points["range"] <= 30.0]
    path = tmp_path / "bev.png"
    plot_reflectivity_bev(path, [("all rings", points), ("within 30 m", near), ("empty", points[:0])], extent_m=60.0)
    height, width = read_png(path).shape[:2]
    assert width > 2 * height  # three panels side by side
    assert 1000 <= width <= 5000 and 400 <= height <= 1500


def test_bev_colours_follow_reflectivity(tmp_path):
    # One panel, a bright ring on the left (+y) and a dark one on the right (−y).
    points = np.zeros(2000, POINT_DTYPE)
    points["x"] = np.tile(np.linspace(-20.0, 20.0, 1000), 2)
    points["y"] = np.repeat([30.0, -30.0], 1000)
    points["reflectivity"] = np.repeat([1.0, 0.0], 1000)
    path = tmp_path / "sides.png"
    plot_reflectivity_bev(path, [("sides", points)], extent_m=40.0, point_size=20.0)
    image = read_png(path)[..., :3]
    # viridis: 1.0 is yellow (high red+green, low blue); 0.0 is dark purple.
    yellow = (image[..., 0] > 0.8) & (image[..., 1] > 0.8) & (image[..., 2] < 0.35)
    columns = np.flatnonzero(yellow.any(axis=0))
    colourbar_start = int(0.8 * image.shape[1])
    panel_columns = columns[columns < colourbar_start]
    assert panel_columns.size and panel_columns.mean() < 0.45 * image.shape[1]  # +y is drawn on the left


def test_bev_needs_fields(tmp_path):
    xyz_only = np.zeros(3, dtype=[("x", "f4"), ("y", "f4"), ("z", "f4")])
    with pytest.raises(ValueError, match="reflectivity"):
        plot_reflectivity_bev(tmp_path / "x.png", [("no reflectivity", xyz_only)])
    with pytest.raises(ValueError, match="at least one"):
        plot_reflectivity_bev(tmp_path / "x.png", [])


def test_no_pyplot_state(tmp_path):
    pyplot = sys.modules.get("matplotlib.pyplot")
    before = pyplot.get_fignums() if pyplot else None
    plot_range_limits(tmp_path / "a.png")
    plot_reflectivity_bev(tmp_path / "b.png", [("rings", rings())])
    if pyplot is None:
        assert "matplotlib.pyplot" not in sys.modules or not sys.modules["matplotlib.pyplot"].get_fignums()
    else:
        assert pyplot.get_fignums() == before


def test_scan_pattern_and_motion_distortion_pngs(tmp_path):
    from lidar_fmu.sensors import load_sensor
    from lidar_fmu.tools.figures import plot_motion_distortion, plot_scan_patterns

    path = tmp_path / "patterns.png"
    plot_scan_patterns(path, [("grid", load_sensor("ouster_os1_64").pattern),
                              ("unit", load_sensor("ouster_os1_128_cal").pattern)])
    assert read_png(path).shape[1] > 800
    points = rings()
    points["time"] = np.linspace(0.0, 0.1, len(points))
    path = tmp_path / "motion.png"
    plot_motion_distortion(path, [("still", points), ("moving", points)])
    assert read_png(path).shape[1] > 800


def test_detection_probability_png(tmp_path):
    from lidar_fmu.physics.range_limit import fit_range_limit
    from lidar_fmu.tools.figures import plot_detection_probability

    path = tmp_path / "p.png"
    plot_detection_probability(path, fit_range_limit([[0.10, 40.0], [0.80, 120.0]], "log", 120.0))
    assert read_png(path).shape[1] > 600


def test_mirror_ghost_png(tmp_path):
    """The README's mirror figure: the ghosts are drawn red, past the mirror."""
    from lidar_fmu.tools.figures import plot_mirror_ghost

    path = tmp_path / "ghost.png"
    ghosts, returns = plot_mirror_ghost(path)
    assert 100 < ghosts < returns  # the mirror's share of the sweep (its ±6° at 10 m, less the box's shadow)
    image = read_png(path)[..., :3]  # floats 0–1
    red = (image[..., 0] > 0.7) & (image[..., 1] < 0.35) & (image[..., 2] < 0.35)
    assert red.sum() > 200
