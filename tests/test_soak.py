"""``lidar-fmu soak``: runs, reports every N steps (no timing assertions: machines differ)."""
import re

import numpy as np
from osi3.osi_sensorview_pb2 import SensorView

from lidar_fmu.tools import soak
from lidar_fmu.tools.cli import main

LINE = re.compile(r"^step +[\d,]+: RSS +[\d.]+ MiB.*median step [\d.]+ ms over the last [\d,]+$")


def test_soak_prints_one_line_per_report(capsys):
    code = main(["soak", "--steps", "30", "--report-every", "10"])  # the default sensor and 20 pedestrians
    captured = capsys.readouterr()
    assert code == 0, captured.err
    lines = captured.out.strip().splitlines()
    assert len(lines) == 3, captured.out
    assert all(LINE.match(line) for line in lines), lines
    assert [int(re.search(r"step +([\d,]+)", line).group(1)) for line in lines] == [10, 20, 30]
    assert "invalid" not in captured.out  # every step delivered data
    assert "20 pedestrians" in captured.err and "velodyne_vlp16" in captured.err


def test_soak_through_the_fmu(fmu_path, capsys):
    code = main(["soak", "--fmu", str(fmu_path), "--steps", "4", "--report-every", "2", "--objects", "3",
                 "--sensor", "ibeo_lux"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert len(captured.out.strip().splitlines()) == 2 and "via FMPy" in captured.err


def test_soak_with_a_bad_sensor_is_one_line(capsys):
    code = main(["soak", "--steps", "3", "--sensor", "velodyne_vlp61"])
    err = capsys.readouterr().err
    assert code == 2 and "lidar-fmu: error:" in err and "Traceback" not in err


def test_boxes_jitter_by_at_most_2_cm_and_pedestrians_walk():
    scene = soak.PedestrianScene(objects=8, seed=3)
    views = [SensorView.FromString(scene.view_at(0.1 * k)) for k in range(1, 30)]

    def pedestrians(view):
        objects = [o for o in view.global_ground_truth.moving_object if o.id.value != soak.HOST_ID]
        dims = np.array([[o.base.dimension.length, o.base.dimension.width, o.base.dimension.height] for o in objects])
        xy = np.array([[o.base.position.x, o.base.position.y] for o in objects])
        return dims, xy

    dims, xy = zip(*map(pedestrians, views))
    dims, xy = np.array(dims), np.array(xy)
    assert dims.shape == (29, 8, 3)
    assert np.abs(np.diff(dims, axis=0)).max() <= soak.JITTER_M + 1e-12
    assert np.abs(dims - soak.PEDESTRIAN_M).max() <= 0.5 * soak.JITTER_M + 1e-12
    speed = np.linalg.norm(np.diff(xy, axis=0), axis=2) / 0.1
    assert 0.9 < speed.min() and speed.max() < 1.9  # walking pace


def test_rss_falls_back_to_the_peak_without_proc(monkeypatch):
    now, peak = soak.rss_mb()
    assert now > 10
    def no_proc(*args, **kwargs):
        raise OSError("no /proc here")

    monkeypatch.setattr(soak, "open", no_proc, raising=False)
    fallback, is_peak = soak.rss_mb()
    assert is_peak and fallback >= now * 0.5


def _rig_file(tmp_path):
    import json

    spec = {"horizontal_fov_deg": [-60, 60], "horizontal_resolution_deg": 1.0, "vertical_fov_deg": [-15, 5],
            "channels": 8, "max_range_m": 60}
    rig = {"sensors": [spec | {"mounting": {"xyz_m": [3.0, 0, 1.2]}},
                       spec | {"frame_rate_hz": 20, "mounting": {"xyz_m": [-0.5, 0, 1.2], "rpy_deg": [0, 0, 180]}}]}
    path = tmp_path / "rig.json"
    path.write_text(json.dumps(rig))
    return path


def test_soak_runs_a_rig_as_it_runs_one_lidar(tmp_path, capsys):
    code = main(["soak", "--steps", "4", "--report-every", "2", "--objects", "3", "--sensor", str(_rig_file(tmp_path))])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    lines = captured.out.strip().splitlines()
    assert len(lines) == 2 and all(LINE.match(line) for line in lines), captured.out
    assert "invalid" not in captured.out


def test_soak_runs_a_rig_through_the_fmu(fmu_path, tmp_path, capsys):
    code = main(["soak", "--fmu", str(fmu_path), "--steps", "4", "--report-every", "2", "--objects", "3",
                 "--sensor", str(_rig_file(tmp_path))])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert len(captured.out.strip().splitlines()) == 2 and "invalid" not in captured.out
