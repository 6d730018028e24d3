"""Measurement noise, dropout and detection probability: measured against their settings, reproducible by seed."""
import math

import numpy as np
import pytest
from osi3.osi_sensordata_pb2 import SensorData

from helpers.osi_views import sensor_view
from lidar_fmu import Lidar, Scene
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.geometry.scene import box_mesh
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.physics.effects import detection_probability, inverse_normal_cdf, uniform
from lidar_fmu.sensors import SensorSpecError, load_sensor

WALL_X_M = 20.0


def wall_scene(distance_m: float = WALL_X_M) -> Scene:
    """A 0.2 m thick wall, 80 m wide and 40 m tall, facing the sensor at the origin."""
    scene = Scene()
    scene.add_instance(1, box_mesh(0.2, 80.0, 40.0), pose_matrix((distance_m + 0.1, 0.0, 0.0)))
    return scene


def scan_pair(spec_noise: dict, frames: int = 1, preset: str = "velodyne_vlp16", scene=None):
    """(exact, noisy) clouds of the same rays: frames of the noisy sensor against the exact one."""
    scene = scene or wall_scene()
    exact = Lidar(scene, preset).scan(np.eye(4))
    noisy = Lidar(scene, {"preset": preset, "noise": spec_noise})
    return exact, [noisy.scan(np.eye(4)) for _ in range(frames)]


def residual_m(exact, noisy) -> np.ndarray:
    """Range of each noisy return minus its ray's exact range."""
    index = {ray: k for k, ray in enumerate(exact.ray_index)}
    rows = np.array([index[ray] for ray in noisy.ray_index])
    return noisy.points["range"].astype(np.float64) - exact.points["range"][rows]


def test_range_sigma_is_measured_within_10_percent_on_a_flat_wall():
    exact, noisy = scan_pair({"range_sigma_m": 0.05, "seed": 1}, frames=3)
    residual = np.concatenate([residual_m(exact, cloud) for cloud in noisy])
    assert len(residual) > 10_000
    assert residual.std() == pytest.approx(0.05, rel=0.10) and abs(residual.mean()) < 0.005
    # and the points stay on their rays: only the range moved
    cloud = noisy[0]
    direction = cloud.xyz / np.linalg.norm(cloud.xyz, axis=1, keepdims=True)
    assert np.abs(direction - cloud.direction).max() < 1e-5


@pytest.mark.parametrize("distance_m", [10.0, 40.0])
def test_relative_sigma_grows_with_range(distance_m):
    """σ = range_sigma_per_m · r (Rmagine's relative Gaussian): residual / range has σ = 0.002 at any range."""
    exact, noisy = scan_pair({"range_sigma_per_m": 0.002, "seed": 1}, frames=2, scene=wall_scene(distance_m))
    relative = np.concatenate([residual_m(exact, cloud) / cloud.points["range"] for cloud in noisy])
    assert relative.std() == pytest.approx(0.002, rel=0.1)


def test_laser_bias_is_one_offset_per_beam_for_the_whole_unit():
    """BlenSor's per-laser noise: each VLP-16 beam keeps its own offset frame after frame; the 16 offsets
    spread with the given σ."""
    exact, noisy = scan_pair({"laser_bias_sigma_m": 0.04, "seed": 9}, frames=2)
    offsets = []
    for cloud in noisy:
        residual = residual_m(exact, cloud)
        per_beam = [residual[cloud.points["beam_id"] == b] for b in range(16)]
        assert all(np.ptp(r) < 1e-5 for r in per_beam if len(r))  # one offset per beam, no per-ray noise
        offsets.append([r[0] for r in per_beam if len(r)])
    assert np.allclose(offsets[0], offsets[1])  # the same unit in the next frame
    assert 0.015 < np.std(offsets[0]) < 0.08  # 16 draws of σ = 4 cm: visibly spread


def test_angle_noise_moves_points_off_their_rays_by_the_given_sigma():
    exact, noisy = scan_pair({"angle_sigma_deg": 0.2, "seed": 4})
    cloud = noisy[0]
    direction = cloud.xyz / np.linalg.norm(cloud.xyz, axis=1, keepdims=True)
    angle = np.degrees(np.arccos(np.clip(np.einsum("ij,ij->i", direction, cloud.direction), -1, 1)))
    # the angle off the ray of a 2-D Gaussian of σ per axis is Rayleigh: mean σ·√(π/2)
    assert angle.mean() == pytest.approx(0.2 * math.sqrt(math.pi / 2), rel=0.1)


def test_dropout_loses_its_fraction_of_returns():
    exact, noisy = scan_pair({"dropout": 0.25, "seed": 2}, frames=2)
    kept = np.mean([len(cloud) for cloud in noisy]) / len(exact)
    assert kept == pytest.approx(0.75, abs=0.02)


def test_same_seed_and_frame_give_the_same_bytes_and_nothing_depends_on_the_clock():
    spec = {"preset": "velodyne_vlp16", "noise": {"range_sigma_m": 0.03, "laser_bias_sigma_m": 0.01,
                                                  "angle_sigma_deg": 0.05, "dropout": 0.1, "seed": 5},
            "detection": "probabilistic"}
    scene = wall_scene()
    first, second = Lidar(scene, spec), Lidar(scene, spec)
    a = [first.scan(np.eye(4)).points.tobytes() for _ in range(3)]
    b = [second.scan(np.eye(4)).points.tobytes() for _ in range(3)]
    assert a == b  # frame after frame
    assert a[0] != a[1]  # each frame draws anew
    other = Lidar(scene, spec | {"noise": spec["noise"] | {"seed": 6}}).scan(np.eye(4)).points.tobytes()
    assert other != a[0]
    assert Lidar(scene, spec).scan(np.eye(4), frame=2).points.tobytes() == a[2]  # the frame counter decides


def test_counter_based_uniforms_are_uniform_and_independent():
    with np.errstate(over="ignore"):  # uint64 arithmetic wraps on purpose (silently, once compiled)
        u = np.array([uniform(np.uint64(1), np.uint64(f), np.uint64(r), np.uint64(1)) for f in range(20)
                      for r in range(500)])
    assert 0 < u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01 and abs(u.std() - math.sqrt(1 / 12)) < 0.01
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.03


def test_normal_draws_follow_the_inverse_normal_cdf_closely():
    """The noise's normal numbers come from Acklam's inverse CDF: within 1e-8 of the exact quantile over the
    whole of (0, 1), tails included."""
    from statistics import NormalDist

    exact = NormalDist().inv_cdf
    p = np.concatenate([np.geomspace(1e-15, 0.5, 400), np.linspace(0.01, 0.99, 999), 1 - np.geomspace(1e-12, 0.5, 400)])
    error = max(abs(inverse_normal_cdf(float(q)) - exact(float(q))) for q in p)
    assert error < 1e-8


def test_detection_probability_law():
    assert detection_probability(1.0) == pytest.approx(0.9, abs=1e-12)
    assert detection_probability(0.8) > 0.9999 and detection_probability(1.4) < 0.06
    assert detection_probability(2.0) < 1e-3  # where the physics pass stops keeping returns
    xs = np.linspace(0.05, 3.0, 300)
    p = np.array([detection_probability(x) for x in xs])
    assert np.all(np.diff(p) <= 0)  # smooth and falling


def test_probabilistic_detection_sees_90_percent_at_the_limit_and_the_threshold_all():
    """A 50 % wall facing the sensor exactly at its r_L (single-pair root-2 limit: 50 % at 20 m): ~90 % of the
    rays return with probabilistic detection, all with the threshold; OSI-ready existence probabilities."""
    spec = {"angle_pairs_deg": [[az, el] for az in np.linspace(-0.5, 0.5, 60) for el in np.linspace(-0.5, 0.5, 60)],
            "max_range_m": 100.0, "range_reflectivity": {"pairs": [[0.5, 20.0]], "fit": "root2"}}
    scene = wall_scene(19.98)  # every ray's ρ = 0.5·cos θ ≥ 0.49996 has r_L ≥ 19.9996 m: inside, x ≥ 0.999
    materials = {"default": "lambertian_50"}
    threshold = Lidar(scene, spec, materials=materials, warn=lambda message: None).scan(np.eye(4))
    assert len(threshold) == 3600
    lidar = Lidar(scene, spec | {"detection": "probabilistic"}, materials=materials, warn=lambda message: None)
    seen = [lidar.scan(np.eye(4)) for _ in range(4)]
    fraction = np.mean([len(c) for c in seen]) / 3600
    assert fraction == pytest.approx(0.9, abs=0.015)
    p = seen[0].existence_probability
    assert p.min() > 0.899 and p.max() < 0.903


def test_datasheet_noise_and_bad_specs():
    assert load_sensor({"preset": "ouster_os1_128", "noise": "datasheet"}).effects.noise.range_sigma_m == 0.03
    assert load_sensor("velodyne_vlp16").effects.active is False  # exact by default
    for bad, key in (({"noise": {"range_sigma_m": -1}}, "range_sigma_m"), ({"noise": {"dropout": 2}}, "dropout"),
                     ({"noise": {"sigma": 1}}, "sigma"), ({"noise": {"seed": 1.5}}, "seed"),
                     ({"detection": "maybe"}, "detection"), ({"noise": "loud"}, "noise")):
        with pytest.raises(SensorSpecError, match=key):
            load_sensor({"preset": "velodyne_vlp16"} | bad)
    with pytest.raises(SensorSpecError, match="range_accuracy_m"):
        load_sensor({"horizontal_samples": 10, "vertical_fov_deg": [-1, 1], "channels": 2, "noise": "datasheet"})


def test_noise_and_existence_probability_through_the_model():
    """The FMU's model: noisy steps are byte-identical for a seed, and OSI detections carry P."""
    spec = {"preset": "velodyne_vlp16", "noise": {"range_sigma_m": 0.02, "seed": 3}, "detection": "probabilistic",
            "motion_distortion": False}
    view = sensor_view([(10, (30.0, 0.0, 0.75), (0, 0, 0), (0.2, 60.0, 30.0), "")], time_s=0.1)
    runs = []
    for _ in range(2):
        model = OsiSensorModel(sensor=spec)
        runs.append([bytes(model.step(view, 0.1).sensor_data) for _ in range(2)])
    assert runs[0] == runs[1] and runs[0][0] != runs[0][1]
    detections = SensorData.FromString(runs[0][0]).feature_data.lidar_sensor[0].detection
    p = np.array([d.existence_probability for d in detections])
    # the VLP-16 preset has no reflectivity pairs: r_L is its 100 m maximum range
    expected = [detection_probability(d.position.distance / 100.0) for d in detections]
    assert len(p) > 100 and np.allclose(p, expected, atol=1e-6)


# -- weather ----------------------------------------------------------------------------------------------
FORWARD = {"preset": "ouster_os1_128", "horizontal_fov_deg": [30, -30], "horizontal_samples": 100}
FIFTY_PERCENT = {"default": "lambertian_50"}


def weather_scan(distance_m: float, weather: dict, **more):
    scene = wall_scene(distance_m)
    lidar = Lidar(scene, FORWARD | {"weather": weather} | more, materials=FIFTY_PERCENT, warn=lambda message: None)
    return lidar.scan(np.eye(4))


def test_the_issues_wall_checks_in_fog():
    """A 50 % wall: in clear air at 60 m every ray returns; in fog of 50 m visibility none of it at 60 m (the
    fog's own echo near the sensor instead), while at 10 m every ray still returns from the wall, which
    outshines the fog's echo (a strongest-return sensor reports the stronger one)."""
    from lidar_fmu.physics.weather import WEATHER_OBJECT_ID

    clear = weather_scan(60.0, {})
    no_weather = Lidar(wall_scene(60.0), FORWARD, materials=FIFTY_PERCENT, warn=lambda message: None).scan(np.eye(4))
    assert len(clear) == len(no_weather) and np.all(clear.points["object_id"] == 1)  # every ray on the wall
    wall_rays = len(clear)
    foggy = weather_scan(60.0, {"fog_visibility_m": 50.0})
    assert not np.any(foggy.points["object_id"] == 1)
    near = weather_scan(10.0, {"fog_visibility_m": 50.0})
    wall = near.points["object_id"] == 1
    fog = near.points["object_id"] == WEATHER_OBJECT_ID
    assert np.all(wall) and not np.any(fog) and len(near) == len(near.pattern)  # every ray on the wall
    assert np.all(foggy.points["object_id"] == WEATHER_OBJECT_ID) and len(foggy) == len(foggy.pattern)
    assert foggy.points["range"].max() < 10.0  # fog echoes lie near the sensor
    # the wall's survivors are dimmer: two-way extinction exp(−2·0.078·10) = 0.21 on the intensity
    clear_near = weather_scan(10.0, {})
    assert np.median(near.intensity_percent[wall]) < 0.3 * np.median(clear_near.intensity_percent)
    assert wall_rays > 1000


def test_rain_dims_a_little_and_adds_sparse_clutter():
    from lidar_fmu.physics.weather import WEATHER_OBJECT_ID

    clear, rainy = weather_scan(60.0, {}), weather_scan(60.0, {"rain_mm_h": 25.0})
    wall = rainy.points["object_id"] == 1
    assert wall.sum() > 0.9 * len(clear)
    drops = rainy.points["object_id"] == WEATHER_OBJECT_ID
    assert 0 < drops.sum() < 0.1 * len(clear) and rainy.points["range"][drops].max() < 60.0


def test_weather_is_reproducible_and_the_spec_wins_over_the_sensor_view():
    from osi3.osi_environment_pb2 import EnvironmentalConditions
    from osi3.osi_sensorview_pb2 import SensorView

    from lidar_fmu.physics.weather import WEATHER_OBJECT_ID

    a = weather_scan(20.0, {"fog_visibility_m": 80.0}).points.tobytes()
    assert a == weather_scan(20.0, {"fog_visibility_m": 80.0}).points.tobytes()
    view = SensorView.FromString(sensor_view([(10, (40.0, 0.0, 0.75), (0, 0, 0), (0.2, 80.0, 40.0), "")],
                                             time_s=0.1))
    view.global_ground_truth.environmental_conditions.fog = EnvironmentalConditions.FOG_DENSE
    data = view.SerializeToString()
    spec = FORWARD | {"motion_distortion": False}
    from_view = OsiSensorModel(sensor=spec)
    assert from_view.step(data, 0.1).valid
    ids = from_view.last_cloud.points["object_id"]
    assert not np.any(ids == 10) and np.any(ids == WEATHER_OBJECT_ID)  # dense fog: the wall at 40 m is gone
    told = OsiSensorModel(sensor=spec | {"weather": {}})  # the spec says clear air: it wins
    assert told.step(data, 0.1).valid and np.any(told.last_cloud.points["object_id"] == 10)


def test_bad_weather_specs_name_the_key():
    for bad, key in (({"fog_visibility_m": -1}, "fog_visibility_m"), ({"hail_mm_h": 3}, "hail_mm_h")):
        with pytest.raises(SensorSpecError, match=key):
            load_sensor({"preset": "velodyne_vlp16", "weather": bad})


# -- through the command line and the FMU -----------------------------------------------------------------
def test_scan_command_measures_the_noise_it_was_given(tmp_path):
    import json

    import trimesh

    from lidar_fmu.io import read_pcd
    from lidar_fmu.tools.cli import main

    trimesh.creation.box(extents=(0.2, 80.0, 40.0)).export(tmp_path / "wall.obj")
    clouds = {}
    for name, extra in (("exact", {}), ("noisy", {"noise": {"range_sigma_m": 0.05, "seed": 1}})):
        (tmp_path / f"{name}.json").write_text(json.dumps({"preset": "velodyne_vlp16"} | extra))
        out = tmp_path / f"{name}.pcd"
        assert main(["scan", "--mesh", str(tmp_path / "wall.obj"), "--sensor", str(tmp_path / f"{name}.json"),
                     "--pose", "-20.1,0,0", "-o", str(out)]) == 0
        clouds[name] = read_pcd(out)
    exact, noisy = clouds["exact"], clouds["noisy"]
    assert len(exact) == len(noisy) > 3000  # range noise drops nothing
    residual = noisy["range"].astype(np.float64) - exact["range"]  # same rays, same order
    assert residual.std() == pytest.approx(0.05, rel=0.1)


def test_noise_through_the_fmu_is_reproducible(tmp_path):
    import json

    from lidar_fmu.cosim.fmu_host import FmuInstance
    from lidar_fmu.cosim.fmu_package import DEFAULT_FMU, build_fmu, sources_newer_than
    from lidar_fmu.osi.detections import sensor_data_to_points

    if sources_newer_than(DEFAULT_FMU):
        build_fmu(DEFAULT_FMU)
    spec = tmp_path / "noisy.json"
    spec.write_text(json.dumps({"preset": "velodyne_vlp16", "noise": {"range_sigma_m": 0.05, "seed": 7},
                                "motion_distortion": False}))
    views = [sensor_view([(10, (20.1, 0.0, 0.75), (0, 0, 0), (0.2, 80.0, 40.0), "")], time_s=0.05 * k)
             for k in (1, 2)]
    runs = []
    for _ in range(2):
        with FmuInstance(DEFAULT_FMU, {"sensor": str(spec)}) as fmu:
            runs.append([bytes(fmu.step(view, 0.05 * k, 0.05).sensor_data) for k, view in enumerate(views)])
    assert runs[0] == runs[1] and runs[0][0] != runs[0][1]
    wall = sensor_data_to_points(runs[0][0]).points
    assert np.std(wall["x"] - np.median(wall["x"])) > 0.02  # not a flat, exact wall
