"""lidar-fmu validate LOG: a real Argoverse 2 drive against its replay through the FMU. The measures on crafted
inputs whose answer is known, and one run on the shared log (../shared: its licence keeps it out of the
repository)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.recordings import drive_validate as dv
from lidar_fmu.tools.cli import main
from test_convert_argoverse2 import LOG, needs_log


def _grid(spacing_m: float = 5.0) -> np.ndarray:
    axis = np.arange(-20.0, 20.1, spacing_m)
    return np.stack(np.meshgrid(axis, axis, [0.0, spacing_m], indexing="ij"), axis=-1).reshape(-1, 3)


def test_identical_clouds_chamfer_zero_f_score_one():
    cloud = _grid()
    c = dv.chamfer(dv.nearest_distance_m(cloud, cloud), dv.nearest_distance_m(cloud, cloud))
    assert c["real_to_sim_m"] == c["sim_to_real_m"] == 0.0
    assert c["f_score"] == c["precision"] == c["recall"] == 1.0


def test_a_cloud_shifted_by_one_metre():
    real = _grid()
    sim = real + (0.0, 0.0, 1.0)  # the grid's points lie 5 m apart: each one's nearest is its own shifted copy
    c = dv.chamfer(dv.nearest_distance_m(real, sim), dv.nearest_distance_m(sim, real))
    assert c["real_to_sim_m"] == pytest.approx(1.0) and c["sim_to_real_m"] == pytest.approx(1.0)
    assert c["f_score"] == 0.0


def test_nearest_distance_as_brute_force():
    rng = np.random.default_rng(3)
    points = rng.uniform(-30, 30, (2000, 3)) * (1, 1, 0.1)
    queries = rng.uniform(-45, 45, (500, 3))  # some outside the points' grid
    brute = np.linalg.norm(queries[:, None] - points[None], axis=2).min(axis=1)
    assert np.allclose(dv.nearest_distance_m(queries, points), brute)
    assert np.isinf(dv.nearest_distance_m(queries, np.empty((0, 3)))).all()


def test_points_in_and_out_of_a_turned_box():
    box = pose_matrix((10.0, 5.0, 0.5), (0.0, 0.0, np.pi / 2))[None]  # 4 m long along y, 2 m wide along x
    size = np.array([[4.0, 2.0, 1.0]])
    points = np.array([[10.0, 5.0, 0.5], [10.0, 6.9, 0.5], [10.9, 5.0, 0.1], [11.5, 5.0, 0.5], [10.0, 7.5, 0.5],
                       [10.0, 5.0, 1.2]])
    assert dv.points_in_boxes(points, box, size).tolist() == [3]


def test_object_ratios_and_objects_we_miss():
    real = np.array([10, 20, 8, 3, 6])
    sim = np.array([10, 40, 0, 0, 3])
    r = dv.object_ratios(real, sim, np.array(["CAR", "CAR", "BOLLARD", "BOLLARD", "PEDESTRIAN"]))
    assert r["objects"] == 4  # the one with 3 real points does not count
    assert r["median"] == pytest.approx(0.75)  # ratios 1, 2, 0, 0.5
    assert r["missed"] == 1 and r["missed_categories"] == ["BOLLARD"]


def test_ring_fractions_from_a_crafted_layout():
    unit = dv.Unit(np.array([100, 100, 100, 100]), np.array([-10.0, -3.0, 0.0, 5.0]))
    sweeps = [np.repeat([0, 1, 2, 3], [100, 90, 50, 0]), np.repeat([0, 1, 2, 3], [100, 70, 30, 10])]
    assert dv.ring_fractions(sweeps, unit).tolist() == [1.0, 0.8, 0.4, 0.05]
    groups = dv.ring_groups(sweeps, unit, dv.RING_GROUPS["upper"])
    assert groups["all"]["fraction"] == pytest.approx(0.5625)
    assert groups["-4.7..-1.7 deg"]["fraction"] == pytest.approx(0.8) and groups["-4.7..-1.7 deg"]["rings"] == 1
    assert groups["around 0 deg"]["fraction"] == pytest.approx(0.4)
    assert groups["above +1.7 deg"]["fraction"] == pytest.approx(0.05)
    assert groups["-15.6..-1.7 deg"]["fraction"] == pytest.approx(0.9)
    assert groups["-15.6..-1.7 deg"]["ring_min"] == 0.8 and groups["-15.6..-1.7 deg"]["ring_max"] == 1.0


def test_ground_reach_per_sector():
    ranges = np.arange(1.0, 21.0)  # 20 points straight ahead (sector 18 from −180°), none elsewhere
    reach = dv.ground_reach_m(np.column_stack([ranges, np.zeros(20), np.zeros(20)]))
    assert len(reach) == 36 and reach[18] == pytest.approx(np.percentile(ranges, 95))
    assert all(r is None for k, r in enumerate(reach) if k != 18)


def test_paint_over_asphalt():
    distance = np.array([0.0, 0.05, 0.5, 2.0, 3.0, 3.0])
    on_road = np.array([True, True, True, True, True, False])
    r = dv.paint_ratio(np.array([30.0, 10.0, 99.0, 8.0, 12.0, 500.0]), distance, on_road)
    assert r["paint_points"] == 2 and r["asphalt_points"] == 2  # 0.5 m: neither; off the road: no asphalt
    assert r["ratio"] == pytest.approx(2.0)


def test_ground_height_through_the_raster_transform():
    raster = np.arange(12.0).reshape(3, 4)  # rows: y, columns: x
    drive_map = dv.DriveMap(raster, {"R": [1, 0, 0, 1], "t": [-100.0, -200.0], "s": 2.0}, None, [])
    heights = dv.ground_height_m(drive_map, np.array([[100.0, 200.0], [101.5, 201.0], [99.0, 200.0]]))
    assert heights[0] == 0.0 and heights[1] == raster[2, 3] and np.isnan(heights[2])


def test_a_recording_without_metadata_is_refused_in_one_line(tmp_path, capsys):
    recording = tmp_path / "unit.pcap"
    recording.write_bytes(b"")
    assert main(["validate", str(recording)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--metadata" in lines[0] and "unit.pcap" in lines[0]


@pytest.mark.slow
@needs_log
def test_the_shared_drive_end_to_end(tmp_path, capsys):
    assert main(["validate", str(LOG), "-o", str(tmp_path), "--frames", "1"]) == 0
    result = json.loads((tmp_path / "validation.json").read_text())
    assert (tmp_path / "validation.png").stat().st_size > 10_000
    assert len(result["sweeps"]) == 1 and result["run_s"] > 0
    for name in ("upper", "lower"):
        lidar = result["lidars"][name]
        for side in ("real", "sim"):
            assert len(lidar[side]["ring_fraction"]) == 32
            assert set(lidar[side]["ring_groups"]) == set(dv.RING_GROUPS[name])
            assert len(lidar[side]["ground_reach_m"]) == 36
            assert lidar[side]["paint"]["ratio"] is not None
        assert lidar["objects"]["objects"] > 0 and lidar["objects"]["median"] is not None
        assert lidar["chamfer"]["real_to_sim_m"] is not None and 0 <= lidar["chamfer"]["f_score"] <= 1
    # the real upper unit as the table measured it: 0.90 of its rays return
    assert result["lidars"]["upper"]["real"]["ring_groups"]["all"]["fraction"] == pytest.approx(0.90, abs=0.02)
    assert result["both"]["chamfer"]["real_points"] > 10_000
    assert "| upper lidar: rays that return" in capsys.readouterr().out
