"""The presets of sensors/automotive.py: each pattern as its sources describe it, and each scans the demo street."""
import numpy as np
import pytest

from lidar_fmu import Lidar
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.pointcloud import ENVIRONMENT_ID_BASE
from lidar_fmu.sensors import load_sensor, preset_rows
from lidar_fmu.sensors.automotive import AUTOMOTIVE_PRESETS
from lidar_fmu.sensors.hesai_at128 import FIRING_OFFSETS_NS, channel_table

#: rays a frame and frame rate: the counts their sources give (module docs of sensors/automotive.py)
FRAMES = {
    "robosense_helios_5515": (57_568, 10.0), "robosense_helios_16p": (28_784, 10.0),
    "robosense_ruby_plus": (230_272, 10.0), "robosense_m1": (78_750, 10.0), "robosense_m2": (157_500, 10.0),
    "hesai_at128": (153_600, 10.0), "valeo_scala_gen2": (17_040, 25.0), "valeo_scala_gen3": (180_000, 25.0),
    "luminar_iris": (256_000, 10.0), "seyond_falcon_k": (192_000, 10.0), "innoviz_two": (307_200, 10.0),
}


def _deg(values, shape):
    return np.degrees(values).reshape(shape)


def test_every_automotive_preset_is_listed_with_its_rays_and_rate():
    rows = {name: (rays, rate) for name, _, _, rays, rate, _ in preset_rows() if name in AUTOMOTIVE_PRESETS}
    assert rows == FRAMES
    for name in FRAMES:
        sensor = load_sensor(name)
        time_s = sensor.pattern.time_offset_s
        assert 0 <= time_s.min() and time_s.max() < sensor.frame_period_s, name
        shots = time_s.reshape(sensor.pattern.columns, sensor.pattern.rows).min(axis=1)
        assert np.all(np.diff(shots) > 0), f"{name}: shots fire in order"
        assert sensor.range_limit is not None and sensor.spec["range_accuracy_m"] > 0, name
        assert len(sensor.spec["beam_divergence_mrad"]) == 2 and sensor.spec["wavelength_nm"] in (905.0, 1550.0)


def test_robosense_m1_is_five_zones_of_126_lines_by_125_columns_in_z_order():
    """rs_driver: 630 packets × 25 blocks × 5 points a 100 ms frame; each zone 126 × 125, top-down, Z order."""
    pattern = load_sensor("robosense_m1").pattern
    assert (pattern.rows, pattern.columns) == (5, 126 * 125) and len(pattern) == 630 * 25 * 5
    azimuth = _deg(pattern.azimuth_rad, (126, 125, 5))
    elevation = _deg(pattern.elevation_rad, (126, 125, 5))
    assert np.all(np.diff(azimuth, axis=1) < 0)  # every line left to right ("same": Z order)
    assert np.all(np.diff(elevation[:, 0, 0]) < 0)  # lines top-down
    np.testing.assert_allclose(np.ptp(elevation), 25.0, atol=0.01)  # 126 lines 0.2° apart (25.2° envelope)
    assert azimuth.max() - azimuth.min() == pytest.approx(120.0 - 24.0 / 125, abs=1e-3)
    np.testing.assert_allclose(np.diff(azimuth[0, 0]), -24.0, atol=1e-3)  # zones side by side, 24° apart
    shot_s = np.diff(pattern.time_offset_s.astype(np.float64)[::5])
    np.testing.assert_allclose(shot_s, 0.1 / 15_750, atol=1e-8)  # one shot of 5 points every 6.35 µs


def test_hesai_at128_sweeps_its_128_channels_once_in_the_first_half_of_the_frame():
    pattern = load_sensor("hesai_at128").pattern
    assert (pattern.rows, pattern.columns) == (128, 1200)
    elevation = _deg(pattern.elevation_rad, (1200, 128))
    table = channel_table()
    np.testing.assert_allclose(elevation[600], table[:, 1], atol=1e-4)
    assert table[:, 1].max() == pytest.approx(12.93) and table[:, 1].min() == pytest.approx(-12.47)  # 25.4°
    time_s = pattern.time_offset_s.astype(np.float64).reshape(1200, 128)
    np.testing.assert_allclose(time_s[:, 0] - time_s[:, 0][0], np.arange(1200) * 0.05 / 1200, atol=1e-8)  # 41.667 µs
    np.testing.assert_allclose(time_s[7] - time_s[7, 0], np.asarray(FIRING_OFFSETS_NS) * 1e-9, atol=1e-8)
    assert time_s.max() < 0.05  # the field of view takes 50 ms of the mirror's 100 ms field
    azimuth = _deg(pattern.azimuth_rad, (1200, 128))
    np.testing.assert_allclose(np.diff(azimuth[:, 0]), -0.1, atol=1e-4)  # 0.1° left to right
    assert azimuth[:, 0].max() - azimuth[:, 0].min() == pytest.approx(119.9, abs=1e-3)


def test_seyond_falcon_fires_four_stacked_lasers_off_a_polygon_with_a_dense_region():
    pattern = load_sensor("seyond_falcon_k").pattern
    elevation = _deg(pattern.elevation_rad, (40, 1200, 4))
    np.testing.assert_allclose(np.diff(elevation[..., :], axis=2), -196 * 180 / 32768, atol=1e-4)  # 1.0767°
    assert 24.5 < np.ptp(elevation) <= 25.4  # product page: 25.4°
    swath = elevation[:, 0, 1:3].mean(axis=1)  # each sweep's scan direction
    step = -np.diff(swath)
    in_roi = (swath[1:] < 2) & (swath[:-1] > -3)
    assert step[in_roi].max() < step[~in_roi].min()  # the region of interest holds the sweeps closer
    time_s = pattern.time_offset_s.astype(np.float64).reshape(40, 1200, 4)[..., 0]
    line_s = time_s[1, 0] - time_s[0, 0]
    assert line_s == pytest.approx(0.1 / 40, rel=1e-5)
    assert time_s[0, -1] - time_s[0, 0] == pytest.approx(line_s * 120 / 144 * 1199 / 1200, rel=1e-4)  # 5 facets


def test_luminar_iris_reaches_300_points_per_square_degree_at_the_horizon():
    pattern = load_sensor("luminar_iris").pattern
    elevation = np.degrees(pattern.elevation_rad)
    outer_step = 50.0 / 128  # 22° of weight 1 and 4° of weight 7: 50 weighted degrees over 128 lines
    assert np.ptp(elevation) + outer_step == pytest.approx(26.0, abs=1e-3)  # lines at their cells' centres
    assert load_sensor("luminar_iris").wavelength_nm == 1550
    density = np.count_nonzero(np.abs(elevation) < 2.0) / (120.0 * 4.0)
    assert density >= 300.0  # product page: "over 300 points per square degree"
    assert np.count_nonzero(np.abs(elevation) > 4.0) / (120.0 * 18.0) < density / 5


def test_innoviz_two_and_valeo_fields():
    innoviz = load_sensor("innoviz_two").pattern
    assert np.ptp(np.degrees(innoviz.elevation_rad)) + 61.0 / 256 == pytest.approx(43.0, abs=1e-3)
    azimuth = _deg(innoviz.azimuth_rad, (256, 1200))
    np.testing.assert_allclose(azimuth[1], azimuth[0][::-1], atol=1e-4)  # a resonant mirror scans both ways
    gen2 = load_sensor("valeo_scala_gen2")
    assert gen2.pattern.rows == 16 and gen2.frame_rate_hz == 25.0
    np.testing.assert_allclose(np.ptp(gen2.spec["vertical_angles_deg"]), 10.0 - 0.625)
    gen3 = load_sensor("valeo_scala_gen3")
    assert len(gen3.pattern) * gen3.frame_rate_hz == 4.5e6  # press release: 4.5 million points a second


@pytest.mark.parametrize("name", sorted(AUTOMOTIVE_PRESETS))
def test_each_preset_scans_the_demo_street(street, name):
    """From a car roof down the street (the README's pose): buildings, road and parked cars give most rays a
    return; every return lies within the unit's range window and on the scene."""
    lidar = Lidar(street, name, materials="street")
    cloud = lidar.scan(pose_matrix((0.0, -2.0, 1.9), (0.0, 0.0, np.pi / 2)))
    rays, returns = len(lidar.sensor.pattern), len(cloud.points)
    assert 0.75 * rays < returns <= rays, f"{name}: {returns} returns of {rays} rays"
    on_cars = np.count_nonzero(cloud.points["object_id"] < ENVIRONMENT_ID_BASE)
    assert on_cars > 0.01 * returns, f"{name}: {on_cars} returns on the parked cars"
    assert cloud.points["range"].min() >= lidar.sensor.min_range_m - 0.05
    assert cloud.points["range"].max() <= lidar.sensor.max_range_m + 0.05


@pytest.mark.parametrize("name, horizontal_deg", [("robosense_m1", 119.8), ("hesai_at128", 124.7),
                                                  ("robosense_helios_5515", 360.0)])
def test_osi_view_configuration_gives_the_whole_field(name, horizontal_deg):
    """The SensorViewConfiguration a master receives: the field every channel covers (the M1's five zones),
    its rays and their firing times."""
    from osi3.osi_sensorviewconfiguration_pb2 import SensorViewConfiguration

    from lidar_fmu.osi.config import sensor_view_configuration

    sensor = load_sensor(name)
    config = SensorViewConfiguration()
    config.ParseFromString(sensor_view_configuration(sensor, np.eye(4)))
    lidar = config.lidar_sensor_view_configuration[0]
    assert np.degrees(lidar.field_of_view_horizontal) == pytest.approx(horizontal_deg, abs=0.05)
    assert lidar.num_of_pixels == len(sensor.pattern) == len(lidar.timings) == len(lidar.directions)
    assert list(lidar.timings[:3]) == list(np.round(sensor.pattern.time_offset_s[:3] * 1e6).astype(int))
