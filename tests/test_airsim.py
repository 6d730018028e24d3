"""Project AirSim lidar settings as sensor specs; rosettes and Livox units as patterns that never repeat."""
import json

import numpy as np
import pytest

from lidar_fmu.sensors import SensorSpecError, load_sensor

# The documentation's two sample configs (seed 003), verbatim.
CYLINDRICAL = """{
"sensors": [
  {
    "id": "lidar1",
    "type": "lidar",
    "enabled": true,
    "parent-link": "LidarMountPoint",
    "lidar-type": "generic-cylindrical",
    "number-of-channels": 16,
    "range" : 100,
    "points-per-second": 100000,
    "report-frequency": 0,
    "horizontal-rotation-frequency":10.0,
    "horizontal-fov-start-deg": 0.0,
    "horizontal-fov-end-deg": 360.0,
    "vertical-rotation-frequency": 0.0,
    "vertical-fov-lower-deg": -45.0,
    "vertical-fov-upper-deg": -15.0,
    "radial-scaling": 1.0,
    "disable-self-hits": false,
    "draw-debug-points": false,
    "origin": {
      "xyz": "0.6 0 0",
      "rpy-deg": "0 0 0"
    }
  }]
}"""
MID70 = """{
"sensors": [
  {
    "id": "lidar1",
    "type": "lidar",
    "enabled": true,
    "parent-link": "LidarMountPoint",
    "lidar-type": "livox_mid70",
    "draw-debug-points": false,
    "origin": {
      "xyz": "0.6 0 0",
      "rpy-deg": "0 0 0"
    }
  }
}"""  # sic: the documentation's sample lacks the closing "]"


def test_the_documented_cylindrical_sample_loads_unchanged(tmp_path):
    path = tmp_path / "robot.jsonc"
    path.write_text("// Project AirSim robot config\n" + CYLINDRICAL)
    sensor = load_sensor(str(path))
    p = sensor.pattern
    # 100 000 points/s over 16 channels at 10 turns/s: 625 columns a turn, 16 beams −45 … −15°
    assert (p.rows, p.columns) == (16, 625) and sensor.frame_rate_hz == 10.0 and sensor.max_range_m == 100.0
    elevation = np.degrees(p.elevation_rad[:16])
    np.testing.assert_allclose(elevation, np.linspace(-45, -15, 16), atol=1e-4)
    assert np.all(p.time_offset_s[:16] == 0)  # channels fire at once
    assert sensor.spec["airsim_origin"] == {"xyz_m": [0.6, -0.0, -0.0], "rpy_deg": [0.0, -0.0, -0.0]}
    assert sensor.spec["airsim_disable_self_hits"] is False and sensor.continuous is None


def test_cylindrical_fov_is_converted_to_our_azimuth():
    entry = json.loads(CYLINDRICAL)["sensors"][0] | {"horizontal-fov-start-deg": 10.0,
                                                     "horizontal-fov-end-deg": 100.0}
    p = load_sensor(entry).pattern
    az = np.degrees(p.azimuth_rad[:: p.rows])
    # AirSim 10° … 100° clockwise from ahead = our −10° … −100°, swept clockwise; 625·90/360 steps + 1
    assert p.columns == 157 and az[0] == pytest.approx(-10) and az[-1] == pytest.approx(-100)
    assert np.all(np.diff(az) < 0)


def test_origin_is_converted_from_ned():
    entry = json.loads(CYLINDRICAL)["sensors"][0] | {"origin": {"xyz": "0.5 0.2 -1.5", "rpy-deg": "1 2 30"}}
    assert load_sensor(entry).spec["airsim_origin"] == {"xyz_m": [0.5, -0.2, 1.5], "rpy_deg": [1.0, -2.0, -30.0]}


def test_the_documented_mid70_sample_loads_as_a_continuous_scan():
    entry = json.loads(MID70.replace("  }\n}", "  }]\n}"))
    sensor = load_sensor(entry)
    assert sensor.continuous is not None and sensor.continuous.shots_per_second == 100000
    assert len(sensor.pattern) == 10000 and sensor.frame_rate_hz == 10.0  # the first 0.1 s of shots
    tilt = np.degrees(np.arccos(sensor.pattern.directions[:, 0].astype(np.float64)))
    assert tilt.max() <= 35.2 + 1e-3 and tilt.max() > 35.0  # fills its 70.4° circle to the edge


def rosette(**settings):
    return {"type": "lidar", "lidar-type": "generic_rosette", "number-of-channels": 2, "points-per-second": 20000,
            "horizontal-rotation-frequency": 7.0, "vertical-rotation-frequency": 60.0,
            "vertical-fov-lower-deg": 90.0, "vertical-fov-upper-deg": 60.0} | settings


@pytest.mark.parametrize("vertical_hz, scaling", [(60.0, 1.0), (-60.0, 1.0), (60.0, 1.6)])
def test_rosette_stays_in_its_cone_and_continues_exactly_across_windows(vertical_hz, scaling):
    sensor = load_sensor(rosette(**{"vertical-rotation-frequency": vertical_hz, "radial-scaling": scaling}))
    whole = sensor.rays_between(0.0, 0.3)
    elevation = np.degrees(whole.elevation_rad)
    assert elevation.min() >= 60 - 1e-3  # a cone of 30° about +z: polar radius 1 ↔ upper = 60°
    assert elevation.max() > 89 and elevation.min() < 60.5
    first, second = sensor.rays_between(0.0, 0.1234567), sensor.rays_between(0.1234567, 0.3)
    assert np.array_equal(np.concatenate([first.directions, second.directions]), whole.directions)
    assert np.array_equal(np.concatenate([first.beam_id, second.beam_id]), whole.beam_id)
    # firing times continue: the second window's shots come after its start, 1/10 000 s apart
    np.testing.assert_allclose(np.concatenate([first.time_offset_s, second.time_offset_s + 0.1234567]),
                               whole.time_offset_s, atol=1e-6)


def test_epitrochoid_and_radial_scaling_change_the_curve():
    base = load_sensor(rosette()).rays_between(0, 0.05).directions
    epi = load_sensor(rosette(**{"vertical-rotation-frequency": -60.0})).rays_between(0, 0.05).directions
    wide = load_sensor(rosette(**{"radial-scaling": 1.6})).rays_between(0, 0.05).directions
    assert np.abs(base - epi).max() > 0.1 and np.abs(base - wide).max() > 0.01


def test_livox_mid70_fills_90_percent_of_its_fov_in_one_second():
    """Coverage of 0.5° cells of the 70.4° circle (docs/livox_coverage.png: 23 % at 0.1 s, 80 % at 0.5 s, 93 % at 1 s)."""
    directions = load_sensor("livox_mid70").rays_between(0.0, 1.0).directions.astype(np.float64)
    az, el = np.degrees(np.arctan2(directions[:, 1], directions[:, 0])), np.degrees(np.arcsin(directions[:, 2]))
    edges = np.arange(-36.0, 36.5, 0.5)
    hits, _, _ = np.histogram2d(az, el, [edges, edges])
    centre = (edges[:-1] + edges[1:]) / 2
    inside = np.hypot(*np.meshgrid(centre, centre, indexing="ij")) <= 35.2
    assert (hits[inside] > 0).mean() >= 0.90


def test_livox_avia_has_six_channels_and_its_oval_fov():
    sensor = load_sensor("livox_avia")
    p = sensor.pattern
    assert p.rows == 6 and len(p) == 24000 and set(np.unique(p.beam_id)) == set(range(6))
    d = p.directions.astype(np.float64)
    assert np.degrees(np.arctan2(d[:, 1], d[:, 0])).max() == pytest.approx(35.2, abs=0.1)
    assert np.degrees(np.arcsin(d[:, 2])).max() == pytest.approx(38.6, abs=0.1)


@pytest.mark.parametrize("entry, message", [
    (rosette(**{"points-per-secnd": 5}),
     r"AirSim lidar entry: unknown key 'points-per-secnd' \(did you mean 'points-per-second'\?\)"),
    (rosette(**{"lidar-type": "livox_mid360"}), "unknown AirSim lidar-type 'livox_mid360'"),
    (rosette(**{"horizontal-fov-end-deg": 180.0}), "narrower than 360"),
    ({"type": "lidar", "lidar-type": "livox_avia", "vertical-fov-lower-deg": 0}, "takes its FOV from the datasheet"),
    ({"sensors": [{"type": "camera"}]}, "no sensor of type 'lidar'"),
    ({"sensors": ["velodyne_vlp16", {"preset": "ouster_os1_128"}]}, "a rig of 2 lidars .* where one lidar is expected"),
    ({"sensors": [rosette(id="a"), rosette(id="b")]}, "2 lidars.*airsim_id"),
    (rosette(origin={"xyz": "1 2"}), "origin.xyz must be 3 numbers"),
    (rosette(**{"number-of-channels": 0}), "number-of-channels"),
    (rosette(**{"radial-scaling": float("nan")}), r"'radial-scaling' must be a finite number, got nan$"),
    (rosette(**{"range": -1}), r"'range' must be a finite number ≥ 0, got -1.0$"),
    (rosette(**{"report-point-cloud": "yes"}), "'report-point-cloud' must be true or false"),
    (rosette(**{"no-return-point-value": "0 0"}), "'no-return-point-value' must be 3 numbers"),
    (rosette(**{"no-return-point-value": [0, True, 0]}), "'no-return-point-value' must be 3 numbers"),
    (rosette(**{"report-point-cloud": False}), "both false: such a lidar reports no points"),
])
def test_bad_airsim_settings_name_the_problem(entry, message):
    with pytest.raises(SensorSpecError, match=message):
        load_sensor(entry)


def test_one_of_several_lidars_by_id():
    sensor = load_sensor({"sensors": [rosette(id="a"), rosette(id="b", **{"number-of-channels": 3})],
                          "airsim_id": "b"})
    assert sensor.name == "b" and sensor.continuous.channels == 3


def test_livox_coverage_figure(tmp_path):
    """docs/livox_coverage.png's function: its coverage grows with time and ends ≥ 90 % (the check above)."""
    from lidar_fmu.tools.figures import plot_livox_coverage

    path = tmp_path / "coverage.png"
    fractions = plot_livox_coverage(path, "livox_mid70", times_s=(0.1, 0.5, 1.0))
    assert fractions[0] < 0.3 < fractions[1] < fractions[2] and fractions[2] >= 0.90
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size < 300_000


@pytest.mark.parametrize("suffix", [".json", ".jsonc", ".yaml"])
def test_a_single_lidar_entry_saved_as_a_file_loads(tmp_path, suffix):
    entry = json.loads(CYLINDRICAL)["sensors"][0]
    named, anonymous = tmp_path / f"named{suffix}", tmp_path / f"roof_lidar{suffix}"
    named.write_text(json.dumps(entry))
    anonymous.write_text(json.dumps({k: v for k, v in entry.items() if k != "id"}))
    sensor = load_sensor(str(named))
    assert sensor.name == "lidar1" and (sensor.pattern.rows, sensor.pattern.columns) == (16, 625)
    assert load_sensor(str(anonymous)).name == "roof_lidar"  # no id: the file's name, as for our own specs


def test_every_documented_report_setting_is_accepted_and_leaves_the_rays_alone():
    entry = json.loads(CYLINDRICAL)["sensors"][0]
    plain = load_sensor(entry)
    for settings in ({"report-no-return-points": True, "no-return-point-value": "0 0 0", "report-point-cloud": True,
                      "report-azimuth-elevation-range": True},
                     {"report-no-return-points": False, "no-return-point-value": [1e3, 0, -5.5]},
                     {"report-point-cloud": False, "report-azimuth-elevation-range": True}):
        sensor = load_sensor(entry | settings)
        assert np.array_equal(sensor.pattern.directions, plain.pattern.directions)
        assert sensor.frame_rate_hz == plain.frame_rate_hz and sensor.max_range_m == plain.max_range_m
    mid70 = json.loads(MID70.replace("  }\n}", "  }]\n}"))["sensors"][0]
    assert load_sensor(mid70 | {"report-no-return-points": True}).continuous is not None
