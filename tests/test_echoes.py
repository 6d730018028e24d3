"""Beam divergence and multiple echoes: sub-rays across the footprint, echoes formed from their hits."""
import dataclasses
import json
import pathlib

import numpy as np
import pytest
from osi3.osi_sensordata_pb2 import SensorData

from helpers.osi_views import sensor_view
from lidar_fmu import Lidar, Scene
from lidar_fmu.geometry.scene import box_mesh
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.osi.detections import sensor_data_to_points
from lidar_fmu.osi.encode import LidarDetectionBlock, encode_sensor_data
from lidar_fmu.physics.echoes import Footprint, footprint_offsets, sub_ray_pattern
from lidar_fmu.scan.motion import FrameMotion
from lidar_fmu.sensors import SensorSpecError, load_sensor
from lidar_fmu.tools.bench_encode import build_sensor_data_reference
from lidar_fmu.tools.replay import organize

DATA = pathlib.Path(__file__).parent / "data"
WALL_ID, PLATE_ID = 1, 2
#: 16 beams over ±6°, 400 columns over 20° (0.87 mrad apart): a few columns straddle the plate's edge
SPEC = {"vertical_fov_deg": [-6, 6], "channels": 16, "horizontal_fov_deg": [10, -10], "horizontal_samples": 400,
        "max_range_m": 100.0, "beam_divergence_mrad": [3.0, 3.0], "divergence_samples": 16,
        "motion_distortion": False}
#: 1/e² half-width of the beam (rad): the footprint's edge
HALF_WIDTH_RAD = 3e-3 / np.sqrt(2 * np.log(2))


def plate_scene(plate_gap_m: float = 10.0) -> Scene:
    """A wall at 20 m and, ``plate_gap_m`` in front of it, a plate covering the right half (y < 0) of the view."""
    scene = Scene()
    scene.add_instance(WALL_ID, box_mesh(0.2, 80.0, 40.0), pose_matrix((20.1, 0.0, 0.0)))
    scene.add_instance(PLATE_ID, box_mesh(0.05, 10.0, 10.0), pose_matrix((20.0 - plate_gap_m - 0.025, -5.0, 0.0)))
    return scene


def scan(mode: str, scene=None, **extra):
    lidar = Lidar(scene or plate_scene(), SPEC | {"returns": mode} | extra)
    return lidar, lidar.scan(np.eye(4))


def azimuth_rad(cloud):
    return np.arctan2(cloud.direction[:, 1], cloud.direction[:, 0])


def test_footprint_weights_and_spread():
    offsets, weights = footprint_offsets(Footprint((3e-3, 1.5e-3), 32))
    assert weights.sum() == pytest.approx(1.0) and np.all(weights > 0)
    # within the 1/e² ellipse, the centre weighted most, the spread follows each axis's divergence
    half = np.array([3e-3, 1.5e-3]) / np.sqrt(2 * np.log(2))
    assert np.all(((offsets / half) ** 2).sum(axis=1) <= 1.0 + 1e-12)
    assert weights[0] == weights.max()
    rms = np.sqrt((weights[:, None] * offsets**2).sum(axis=0))
    assert rms[0] == pytest.approx(2 * rms[1], rel=0.05)
    one, unit = footprint_offsets(Footprint((3e-3, 3e-3), 1))
    assert np.array_equal(one, np.zeros((1, 2))) and np.array_equal(unit, np.ones(1))


def test_sub_rays_are_adjacent_and_around_their_beam():
    sensor = load_sensor(SPEC)
    sub = sub_ray_pattern(sensor.pattern, sensor.footprint)
    s = sensor.footprint.samples
    assert len(sub) == s * len(sensor.pattern)
    beams = sub.directions.reshape(-1, s, 3).astype(np.float64)
    # the angle from the beam axis (float32 directions: ~1e-7 rad exact)
    angle = np.arcsin(np.linalg.norm(np.cross(beams, sensor.pattern.directions[:, None, :].astype(np.float64)), axis=2))
    assert angle.max() <= HALF_WIDTH_RAD * 1.001 and angle.max() > 0.5 * HALF_WIDTH_RAD
    assert np.array_equal(sub.beam_id, np.repeat(sensor.pattern.beam_id, s))
    assert np.array_equal(sub.time_offset_s, np.repeat(sensor.pattern.time_offset_s, s))


def test_dual_gives_a_second_echo_on_the_wall_behind_a_plates_edge():
    _, cloud = scan("dual")
    rays, count = np.unique(cloud.ray_index, return_counts=True)
    two = rays[count == 2]
    assert len(two) >= 16 * 4  # every beam, several columns at the edge
    points = cloud.points
    first = points[np.isin(cloud.ray_index, two) & (points["echo"] == 0)]
    second = points[np.isin(cloud.ray_index, two) & (points["echo"] == 1)]
    assert np.all(first["object_id"] == PLATE_ID) and np.all(second["object_id"] == WALL_ID)
    cos = np.cos(azimuth_rad(cloud)[np.isin(cloud.ray_index, two) & (points["echo"] == 0)])
    assert np.allclose(first["range"] * cos, 10.0, atol=0.1)
    assert np.all(second["range"] > 19.5)
    # only beams whose footprint straddles the edge (azimuth 0) see both; those right on it all do
    azimuth = azimuth_rad(cloud)
    assert np.abs(azimuth[np.isin(cloud.ray_index, two)]).max() < HALF_WIDTH_RAD
    on_edge = np.unique(cloud.ray_index[np.abs(azimuth) < 0.3 * HALF_WIDTH_RAD])
    assert np.all(np.isin(on_edge, two))
    # each echo carries its share of the footprint's energy: together the whole beam's reflectivity
    open_wall = points[(azimuth > 2 * HALF_WIDTH_RAD) & (azimuth < 0.01)]["reflectivity"].mean()
    shares = np.bincount(cloud.ray_index[np.isin(cloud.ray_index, two)],
                         points["reflectivity"][np.isin(cloud.ray_index, two)])[two]
    assert np.all(points["reflectivity"][np.isin(cloud.ray_index, two)] < open_wall)
    assert np.median(shares) == pytest.approx(open_wall, rel=0.2)  # plate and wall alike (same material)


def test_strongest_first_last_give_one_point_per_ray():
    clouds = {mode: scan(mode)[1] for mode in ("strongest", "first", "last")}
    for cloud in clouds.values():
        assert len(np.unique(cloud.ray_index)) == len(cloud)
        assert np.all(cloud.points["echo"] == 0)
    _, dual = scan("dual")
    rays, count = np.unique(dual.ray_index, return_counts=True)
    two = rays[count == 2]
    for mode, nearer in (("first", True), ("last", False)):
        cloud = clouds[mode]
        r = cloud.points["range"][np.isin(cloud.ray_index, two)]
        assert np.all(r < 15.0) if nearer else np.all(r > 15.0)
    # rays away from the edge are the same in every mode
    single = ~np.isin(clouds["first"].ray_index, two)
    assert np.array_equal(clouds["first"].points[single], clouds["last"].points[~np.isin(clouds["last"].ray_index,
                                                                                          two)])


def test_close_echoes_merge_within_the_separation():
    near = plate_scene(plate_gap_m=0.5)
    _, merged = scan("dual", near)
    assert len(np.unique(merged.ray_index)) == len(merged)
    _, apart = scan("dual", near, echo_separation_m=0.3)
    assert len(apart) > len(merged)
    # a merged echo's pulse is stretched by its range spread (every beam cast as sub-rays: adaptive sampling casts
    # one ray where neighbouring beams lie closer than the separation)
    lidar, cloud = scan("dual", near, divergence_sampling="full")
    assert cloud.echo_pulse_width_m is not None and len(cloud.echo_pulse_width_m) == len(cloud)
    edge = np.abs(azimuth_rad(cloud)) < 0.3 * HALF_WIDTH_RAD
    assert np.all(cloud.echo_pulse_width_m[edge] > 1.3) and np.all(cloud.echo_pulse_width_m >= 1.0)


def test_one_sample_is_the_single_ray_model_exactly():
    """divergence_samples 1 (every preset's default): the same points, bytes and SensorData as without the keys."""
    scene = plate_scene()
    plain = {k: v for k, v in SPEC.items() if k not in ("beam_divergence_mrad", "divergence_samples")}
    base = Lidar(scene, plain).scan(np.eye(4))
    for extra in ({"divergence_samples": 1}, {"divergence_samples": 1, "returns": "dual"}):
        cloud = Lidar(scene, SPEC | extra).scan(np.eye(4))
        assert cloud.points.tobytes() == base.points.tobytes()
        assert np.array_equal(cloud.ray_index, base.ray_index) and cloud.echo_pulse_width_m is None
        assert np.all(cloud.points["echo"] == 0)


def test_range_limit_applies_to_each_echo_share():
    """A sliver of the footprint on a far wall carries too little energy to be seen; the whole beam is."""
    limit = {"range_reflectivity": {"pairs": [[0.10, 30.0], [0.80, 90.0]], "fit": "log"}}
    _, limited = scan("dual", **limit)
    _, unlimited = scan("dual")
    assert len(limited) < len(unlimited)
    weak = limited.points["reflectivity"].min()
    assert weak > unlimited.points["reflectivity"].min()


def test_effects_act_on_each_echo():
    _, exact = scan("dual")
    _, noisy = scan("dual", noise={"range_sigma_m": 0.05, "seed": 3})
    assert np.array_equal(exact.ray_index, noisy.ray_index)
    assert np.array_equal(exact.points["echo"], noisy.points["echo"])
    second = exact.points["echo"] == 1
    moved = noisy.points["range"].astype(np.float64) - exact.points["range"]
    assert np.all(moved[second] != 0.0) and moved.std() == pytest.approx(0.05, rel=0.15)
    _, dropped = scan("dual", noise={"dropout": 0.5, "seed": 3})
    assert 0.4 * len(exact) < len(dropped) < 0.6 * len(exact)
    # a ray's two echoes draw their own numbers: their noise is not the same offset twice
    rays = exact.ray_index[second]
    first_of = {ray: k for k, ray in enumerate(exact.ray_index) if exact.points["echo"][k] == 0}
    paired = np.array([first_of[ray] for ray in rays])
    assert not np.any(moved[second] == moved[paired])
    assert abs(np.corrcoef(moved[second], moved[paired])[0, 1]) < 0.35


def test_ground_truth_is_each_echo_before_the_noise():
    lidar = Lidar(plate_scene(), SPEC | {"returns": "dual", "noise": {"range_sigma_m": 0.05, "seed": 1}})
    cloud = lidar.scan(np.eye(4), ground_truth=True)
    truth, second = cloud.ground_truth, cloud.points["echo"] == 1
    assert np.count_nonzero(second) >= 64 and np.all(truth["range_true"][second] > 19.5)
    paired = np.isin(cloud.ray_index, cloud.ray_index[second]) & ~second
    assert np.all(truth["range_true"][paired] < 10.5)  # echo 0 of those rays: the plate's
    residual = cloud.points["range"].astype(np.float64) - truth["range_true"]
    assert residual.std() == pytest.approx(0.05, rel=0.15)


def test_backends_form_the_same_echoes():
    clouds = [Lidar(plate_scene(), SPEC | {"returns": "dual"}, backend=name).scan(np.eye(4))
              for name in ("embree", "embreex")]
    for name in clouds[0].points.dtype.names:  # values (embreex may give a normal's 0 as -0.0)
        assert np.array_equal(clouds[0].points[name], clouds[1].points[name]), name
    assert np.array_equal(clouds[0].echo_pulse_width_m, clouds[1].echo_pulse_width_m)


def test_motion_distortion_with_sub_rays():
    """The sensor moves during the frame: sub-rays leave from where it was, echoes still form at the edge and
    every echo lies on its beam's ray in the sensor frame of its firing."""
    lidar = Lidar(plate_scene(), SPEC | {"returns": "dual", "motion_distortion": True})
    period = lidar.sensor.frame_period_s
    motion = FrameMotion(0.0, period, 0.0, pose_matrix((-0.5, 0.0, 0.0)))
    moving = lidar.scan(np.eye(4), motion=motion)
    still = lidar.scan(np.eye(4))
    assert np.any(moving.points["echo"] == 1)
    assert not np.array_equal(moving.points["range"][: len(still)], still.points["range"][: len(moving)])
    direction = moving.xyz / np.linalg.norm(moving.xyz, axis=1, keepdims=True)
    assert np.abs(direction - moving.direction).max() < 1e-5
    second = moving.points[moving.points["echo"] == 1]
    assert np.all(second["object_id"] == WALL_ID)


def test_osi_carries_one_detection_per_echo_with_its_pulse_width():
    _, cloud = scan("dual")
    block = LidarDetectionBlock(cloud, sensor_id=3, mounting_position=np.eye(4),
                                intensity_percent=cloud.intensity_percent, echo_pulse_width_m=cloud.echo_pulse_width_m)
    data = encode_sensor_data(block, timestamp_s=0.1, cycle_counter=1)
    assert data == build_sensor_data_reference(block, timestamp_s=0.1, cycle_counter=1).SerializeToString()
    message = SensorData()
    message.ParseFromString(data)
    detections = message.feature_data.lidar_sensor[0].detection
    assert len(detections) == len(cloud)
    assert np.allclose([d.echo_pulse_width for d in detections], cloud.echo_pulse_width_m)
    # back from OSI (no echo numbers there): organized on the pattern, each ray's echoes numbered by range again
    decoded = sensor_data_to_points(data)
    again = organize(decoded, load_sensor(SPEC).pattern, max_echoes=2)
    assert np.array_equal(again.ray_index, cloud.ray_index)
    assert np.array_equal(again.points["echo"], cloud.points["echo"])
    with pytest.raises(Exception, match="more than 1 point"):
        organize(decoded, load_sensor(SPEC).pattern)


def test_ptx_writes_the_second_echoes_in_a_grid_of_their_own(tmp_path):
    from lidar_fmu.io import read_ptx, write_ptx

    _, cloud = scan("dual")
    write_ptx(tmp_path / "scan.ptx", cloud)
    _, first = read_ptx(tmp_path / "scan.ptx")
    _, second = read_ptx(tmp_path / "scan.echo1.ptx")
    assert np.count_nonzero(np.any(first[..., :3] != 0, axis=2)) == np.count_nonzero(cloud.points["echo"] == 0)
    assert np.count_nonzero(np.any(second[..., :3] != 0, axis=2)) == np.count_nonzero(cloud.points["echo"] == 1)
    _, single = scan("strongest")
    write_ptx(tmp_path / "single.ptx", single)
    assert not (tmp_path / "single.echo1.ptx").exists()


@pytest.mark.parametrize("bad, message", [
    ({"returns": "second"}, "returns must be one of"),
    ({"divergence_samples": 0}, "divergence_samples must be"),
    ({"divergence_samples": 4, "beam_divergence_mrad": [0, 0]}, "needs a beam_divergence_mrad"),
    ({"beam_divergence_mrad": [3.0]}, "beam_divergence_mrad must be"),
    ({"echo_separation_m": -1}, "echo_separation_m must be"),
    ({"return_order": "STRONGEST"}, "return_order must be one of"),
    ({"divergence_sampling": "some"}, "divergence_sampling must be one of"),
])
def test_bad_specs_name_the_key(bad, message):
    with pytest.raises(SensorSpecError, match=message):
        load_sensor(SPEC | bad)


def test_presets_carry_their_datasheet_divergence():
    assert load_sensor("ouster_os1_128").footprint.divergence_rad == pytest.approx((3.142e-3, 3.142e-3), rel=1e-3)
    assert load_sensor("velodyne_vlp16").footprint.divergence_rad == (3.0e-3, 1.5e-3)
    assert load_sensor("velodyne_vlp16").footprint.samples == 1


# -- through the command line and the FMU -----------------------------------------------------------------
def test_scan_command_writes_the_second_echoes(tmp_path):
    import trimesh

    from lidar_fmu.io import read_pcd
    from lidar_fmu.tools.cli import main

    trimesh.creation.box(extents=(0.2, 80.0, 40.0)).apply_translation((20.1, 0, 0)).export(tmp_path / "wall.obj")
    trimesh.creation.box(extents=(0.05, 10.0, 10.0)).apply_translation((10.0, -5.0, 0)).export(tmp_path / "plate.obj")
    counts = {}
    for mode in ("dual", "strongest"):
        (tmp_path / f"{mode}.json").write_text(json.dumps(SPEC | {"returns": mode}))
        out = tmp_path / f"{mode}.pcd"
        assert main(["scan", "--mesh", str(tmp_path / "wall.obj"), "--mesh", str(tmp_path / "plate.obj"),
                     "--sensor", str(tmp_path / f"{mode}.json"), "--pose", "0,0,0", "-o", str(out)]) == 0
        points = read_pcd(out)
        counts[mode] = np.count_nonzero(points["echo"] == 1)
        if mode == "dual":
            assert np.all(points["object_id"][points["echo"] == 1] == 0)  # the wall: the first mesh
            assert np.all(points["range"][points["echo"] == 1] > 19.5)
    assert counts["dual"] >= 64 and counts["strongest"] == 0


def test_dual_returns_through_the_fmu(tmp_path):
    from lidar_fmu.cosim.fmu_host import FmuInstance
    from lidar_fmu.cosim.fmu_package import DEFAULT_FMU, build_fmu, sources_newer_than

    if sources_newer_than(DEFAULT_FMU):
        build_fmu(DEFAULT_FMU)
    host = (99, (0.0, 0.0, 0.75), 0.0)  # the sensor on the host's origin, the host car not drawn
    objects = [(10, (20.1, 0.0, 0.75), (0, 0, 0), (0.2, 80.0, 40.0), ""),
               (11, (10.0, -5.0, 0.75), (0, 0, 0), (0.05, 10.0, 10.0), "")]
    results = {}
    for mode in ("dual", "strongest"):
        spec = tmp_path / f"{mode}.json"
        spec.write_text(json.dumps(SPEC | {"returns": mode, "frame_rate_hz": 10.0}))
        with FmuInstance(DEFAULT_FMU, {"sensor": str(spec), "environment": "none"}) as fmu:  # the objects alone
            data = bytes(fmu.step(sensor_view(objects, time_s=0.1, host=host), 0.0, 0.1).sensor_data)
        message = SensorData()
        message.ParseFromString(data)
        results[mode] = (sensor_data_to_points(data), message.feature_data.lidar_sensor[0].detection)
    pattern = load_sensor(SPEC).pattern
    dual, detections = results["dual"]
    organized = organize(dual, pattern, max_echoes=2)
    second = organized.points["echo"] == 1
    assert np.count_nonzero(second) >= 64 and np.all(organized.points["object_id"][second] == 10)
    assert all(d.HasField("echo_pulse_width") and d.echo_pulse_width >= 1.0 for d in detections)
    strongest, detections = results["strongest"]
    assert len(np.unique(organize(strongest, pattern).ray_index)) == len(strongest)
    assert len(detections) == len(strongest) and all(d.HasField("echo_pulse_width") for d in detections)


# -- the real dual-return recording and the room built to compare with it -----------------------------------
REAL = json.loads((pathlib.Path(__file__).parent / "data" / "ouster_os1_128_dual_returns.json").read_text())


def test_the_default_echo_separation_is_the_recordings_smallest_gap():
    from lidar_fmu.physics.echoes import DEFAULT_ECHO_SEPARATION_M

    assert REAL["second_echo_pixels"] == sum(REAL["gap_histogram"]["counts"]) > 1000
    assert REAL["second_echo_fraction_of_returning"] == pytest.approx(0.0665, abs=5e-4)
    assert DEFAULT_ECHO_SEPARATION_M == pytest.approx(REAL["gap_m"]["p0"], abs=0.01)


def test_room_second_echoes_near_the_sensor_need_the_exit_beam():
    """In the room (a cabinet 0.45 m away), the 10 mm exit beam, not the 3 mrad divergence, makes footprints
    wide enough to straddle edges: with it about 3× the second echoes of a point source, every gap ≥ 1 m."""
    from lidar_fmu.physics.echoes import second_echo_stats
    from lidar_fmu.tools.figures import indoor_room_scene

    scene, pose = indoor_room_scene()
    meta = str(pathlib.Path(__file__).parent / "data" / "ouster_os1_128_fw3.1_122246000293.json")
    spec = {"preset": "ouster_os1_128_cal", "ouster_metadata": meta, "returns": "dual", "divergence_samples": 16,
            "motion_distortion": False}
    stats = {}
    for label, extra in (("aperture", {}), ("point", {"beam_diameter_m": 0.0})):
        lidar = Lidar(scene, spec | extra)
        azimuth = np.degrees(lidar.sensor.pattern.azimuth_rad)
        sector = np.flatnonzero((azimuth >= 134.0) | (azimuth <= -179.0))
        stats[label] = second_echo_stats(lidar.scan(pose), sector)
    assert stats["aperture"]["second_echo_rays"] > 2 * stats["point"]["second_echo_rays"] > 100
    assert 0.01 < stats["aperture"]["second_echo_fraction"] < REAL["second_echo_fraction_of_returning"]
    assert stats["aperture"]["gap_m"].min() >= 1.0


def test_dual_returns_png(tmp_path):
    from lidar_fmu.tools.figures import indoor_room_scene, plot_dual_returns

    scene, pose = indoor_room_scene()
    cloud = Lidar(scene, {"preset": "ouster_os1_64", "returns": "dual", "divergence_samples": 8}).scan(pose)
    path = tmp_path / "dual.png"
    plot_dual_returns(path, [("room", cloud, 3.0), ("room, wider", cloud, 5.0)])
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000


def footprint_returns(surfaces, samples: int = 4):
    """One beam of ``samples`` sub-rays, sub-ray k meeting ``surfaces[k]`` = (range m, reflectivity): its
    :class:`~lidar_fmu.pointcloud.Returns` and one-beam pattern, as a backend would give them."""
    from lidar_fmu.geometry.pattern import RayPattern
    from lidar_fmu.pointcloud import POINT_DTYPE, Returns

    points = np.zeros(samples, POINT_DTYPE)
    points["range"] = [r for r, _ in surfaces]
    points["reflectivity"] = [rho for _, rho in surfaces]
    points["object_id"] = np.arange(samples)
    pattern = RayPattern(np.array([[1.0, 0.0, 0.0]], np.float32), np.zeros(1, np.uint32), np.zeros(1, np.uint32),
                         np.zeros(1, np.float32), 1, 1)
    return Returns(points, np.arange(samples, dtype=np.int32), np.zeros(samples, np.float32)), pattern


def echoes_of(surfaces, mode: str = "dual", **spec):
    from lidar_fmu.physics.echoes import form_echoes

    sensor = load_sensor(SPEC | {"divergence_samples": len(surfaces), "returns": mode} | spec)
    returns, pattern = footprint_returns(surfaces, len(surfaces))
    echoes, _ = form_echoes(returns, pattern, sensor.footprint, sensor.physics_range_limit, sensor.max_range_m)
    return [round(float(r), 3) for r in echoes.points["range"][np.argsort(echoes.points["echo"])]]


def test_ouster_return_orders_report_the_two_strongest_in_the_units_order():
    """Two sub-rays on a dark surface at 5 m (the heavier, central ones), two on a bright one at 12 m: the far
    echo is the stronger (Σ wρ/r²: 0.6·0.05/25 < 0.4·0.9/144)."""
    _, weights = footprint_offsets(Footprint((3e-3, 3e-3), 4))
    near, far = weights[:2].sum() * 0.05 / 25.0, weights[2:].sum() * 0.9 / 144.0
    assert far > near
    two = [(5.0, 0.05), (5.0, 0.05), (12.0, 0.9), (12.0, 0.9)]
    assert echoes_of(two, return_order="strongest_to_weakest") == [12.0, 5.0]
    assert echoes_of(two, return_order="nearest_to_farthest") == [5.0, 12.0]
    assert echoes_of(two, return_order="farthest_to_nearest") == [12.0, 5.0]
    # three surfaces: Ouster reports the two strongest, whatever their order
    three = [(4.0, 0.5), (8.0, 0.5), (30.0, 0.1), (30.0, 0.1)]
    assert echoes_of(three, return_order="strongest_to_weakest") == [4.0, 8.0]
    assert echoes_of(three, return_order="farthest_to_nearest") == [8.0, 4.0]
    assert echoes_of(three, return_order="nearest_to_farthest") == [4.0, 8.0]


def test_velodyne_dual_is_the_strongest_and_the_last():
    """VLP-16 manual §9.3: strongest and last; where the last is the strongest, the second strongest with it;
    numbered by range."""
    three = [(4.0, 0.5), (8.0, 0.5), (30.0, 0.1), (30.0, 0.1)]
    assert echoes_of(three) == [4.0, 30.0]  # strongest (4 m) and last (30 m), not the second strongest (8 m)
    last_strongest = [(4.0, 0.01), (8.0, 0.08), (12.0, 0.9), (12.0, 0.9)]
    assert echoes_of(last_strongest) == [8.0, 12.0]  # the last is the strongest: the second strongest goes with it
    assert load_sensor("velodyne_vlp16").footprint.order == "strongest_last"


def test_ouster_units_take_their_return_order_and_dual_profile_from_metadata(tmp_path):
    dual = DATA / "ouster" / "OS-1-128_767798045_1024x10_20230712_120049.json"
    sensor = load_sensor(str(dual))
    assert (sensor.footprint.mode, sensor.footprint.order) == ("dual", "strongest_to_weakest")  # the default
    assert sensor.footprint.samples > 1 and sensor.footprint.sampling == "adaptive"
    meta = json.loads(dual.read_text())
    meta["config_params"]["return_order"] = "NEAREST_TO_FARTHEST"
    (tmp_path / "near.json").write_text(json.dumps(meta))
    assert load_sensor(str(tmp_path / "near.json")).footprint.order == "nearest_to_farthest"
    meta["config_params"]["return_order"] = "SOONEST"
    (tmp_path / "bad.json").write_text(json.dumps(meta))
    with pytest.raises(SensorSpecError, match="return_order"):
        load_sensor(str(tmp_path / "bad.json"))
    meta["config_params"]["return_order"] = "FARTHEST_TO_NEAREST"
    meta["config_params"]["udp_profile_lidar"] = "RNG19_RFL8_SIG16_NIR16"
    (tmp_path / "single.json").write_text(json.dumps(meta))
    single = load_sensor(str(tmp_path / "single.json")).footprint
    assert (single.mode, single.order, single.active) == ("strongest", "farthest_to_nearest", False)
    assert load_sensor("ouster_os1_128").footprint.order == "strongest_to_weakest"


def test_dual_unit_gives_second_echoes_along_the_edge_as_its_footprint_predicts():
    """A dual-return spec without divergence_samples samples its footprint. On the plate's edge (10 m ahead
    of the wall), the beams whose 1/e² footprint straddles it give two echoes: per row, about the footprint's
    width over the column pitch (6 mrad / 0.87 mrad, so 5–8 columns), and no beam farther away."""
    spec = {k: v for k, v in SPEC.items() if k != "divergence_samples"}
    lidar = Lidar(plate_scene(), spec | {"returns": "dual"})
    cloud = lidar.scan(np.eye(4))
    rays, count = np.unique(cloud.ray_index, return_counts=True)
    two = rays[count == 2]
    per_row = np.bincount(lidar.sensor.pattern.beam_id[two].astype(np.int64), minlength=16)
    assert np.all((per_row >= 5) & (per_row <= 8)), per_row
    azimuth = lidar.sensor.pattern.azimuth_rad[two]
    assert np.all(np.abs(azimuth) <= HALF_WIDTH_RAD + 0.5 * 20 * np.pi / 180 / 400)


def pole_scene() -> Scene:
    """The plate scene with a 1 cm pole 15 m out, narrower than the columns' spacing there (1.3 cm)."""
    scene = plate_scene()
    scene.add_instance(3, box_mesh(0.01, 0.01, 10.0), pose_matrix((15.0, 0.05, 0.0)))
    return scene


def test_adaptive_sampling_finds_full_samplings_second_echoes_casting_far_fewer_rays():
    scene = pole_scene()
    full = Lidar(scene, SPEC | {"returns": "dual", "divergence_sampling": "full"}).scan(np.eye(4))
    lidar = Lidar(scene, SPEC | {"returns": "dual"})
    adaptive = lidar.scan(np.eye(4))

    def second_echoes(cloud):
        ray = cloud.ray_index
        two = np.bincount(ray, minlength=16 * 400)[ray] == 2
        return set(zip(ray[two & (cloud.points["echo"] == 1)].tolist(),
                       cloud.points["range"][two & (cloud.points["echo"] == 1)].round(3).tolist()))

    wanted, found = second_echoes(full), second_echoes(adaptive)
    assert len(wanted) > 16 * 8  # the plate's edge and the pole, on every beam
    assert len(found & wanted) >= 0.95 * len(wanted) and found <= wanted
    beams, samples = len(lidar.sensor.pattern), SPEC["divergence_samples"]
    assert beams + lidar.last_refined * samples < 0.2 * beams * samples  # rays cast against full sampling's
    again = Lidar(scene, SPEC | {"returns": "dual"}).scan(np.eye(4))
    assert np.array_equal(again.points, adaptive.points) and np.array_equal(again.ray_index, adaptive.ray_index)


def test_validate_second_return_rate_on_the_dual_recording_is_the_units():
    """The shared dual-return OS-1-128 recording as `lidar-fmu validate` compares it (the scene rebuilt from even
    columns, both returns; the unit from its metadata): our second-return fraction on the covered held-out pixels
    within ±30 % of the unit's, and on the same pixels for many of them."""
    from lidar_fmu.recordings.validate import validate

    base = DATA / "ouster" / "OS-1-128_767798045_1024x10_20230712_120049"
    second = validate(str(base) + ".npz", str(base) + ".json", echo=lambda line: None)["second_return"]
    assert second["sim_fraction_covered"] == pytest.approx(second["real_fraction_covered"], rel=0.3)
    assert second["both"] > 0.3 * (second["both"] + second["only_real"])


def test_echoes_are_the_same_whatever_order_the_sub_rays_returns_come_in():
    """form_echoes groups the returns by beam itself: a batch shuffled (as a caster without packet order gives
    it) forms the same echoes, fields, materials and pulse widths as the batch in sub-ray order."""
    from lidar_fmu.physics.echoes import form_echoes
    from lidar_fmu.pointcloud import take_returns

    lidar = Lidar(plate_scene(), SPEC | {"returns": "dual", "divergence_sampling": "full"})
    pattern, footprint = lidar.sensor.pattern, lidar.sensor.footprint
    model = dataclasses.replace(lidar.return_model().unlimited(), keep_material=True)
    job, _ = lidar._cast_job(lidar.sub_rays(pattern), np.eye(4), None, model, True)
    returns = lidar.backend.returns_together([job])[0]
    assert returns.material_id is not None
    shuffled = take_returns(returns, np.random.default_rng(0).permutation(len(returns.ray_index)))
    args = (pattern, footprint, lidar.sensor.physics_range_limit, lidar.sensor.max_range_m)
    (ordered, ordered_pulse_m), (again, again_pulse_m) = form_echoes(returns, *args), form_echoes(shuffled, *args)
    assert np.count_nonzero(ordered.points["echo"] == 1) > 16 * 4  # second echoes along the plate's edge
    assert ordered.points.tobytes() == again.points.tobytes()
    assert np.array_equal(ordered.ray_index, again.ray_index)
    assert np.array_equal(ordered.material_id, again.material_id)
    assert np.array_equal(ordered_pulse_m, again_pulse_m)
    assert np.array_equal(ordered.intensity_percent, again.intensity_percent)


def test_take_returns_and_nearest_range_keep_each_rays_returns():
    from lidar_fmu.physics.echoes import nearest_range_m
    from lidar_fmu.pointcloud import POINT_DTYPE, Returns, take_returns

    points = np.zeros(4, POINT_DTYPE)
    points["range"] = [3.0, 7.0, 5.0, 9.0]  # ray 1 sees a glass pane at 7 m, then the wall at 9 m
    points["object_id"] = [10, 11, 12, 13]
    returns = Returns(points, np.array([0, 1, 2, 1], np.int32), np.arange(4, dtype=np.float32),
                      np.arange(4, dtype=np.int16))
    # a ray's returns come in range order: ray 1's 7 m then 9 m
    returns = take_returns(returns, np.array([0, 1, 3, 2]))
    assert returns.points["object_id"].tolist() == [10, 11, 13, 12]
    assert returns.ray_index.tolist() == [0, 1, 1, 2] and returns.material_id.tolist() == [0, 1, 3, 2]
    assert returns.intensity_percent.tolist() == [0.0, 1.0, 3.0, 2.0]
    assert nearest_range_m(returns, 4).tolist() == [3.0, 7.0, 5.0, np.inf]


def test_adaptive_scan_times_its_parts():
    """An adaptive frame's timings name its parts; "cast" holds both casts, the first cast's alone is kept."""
    from lidar_fmu.scan.lidar import ADAPTIVE_STAGES

    lidar = Lidar(pole_scene(), SPEC | {"returns": "dual"})
    lidar.scan(np.eye(4))
    timings = lidar.last_timings
    assert lidar.last_refined > 0 and set(ADAPTIVE_STAGES) <= set(timings)
    assert all(timings[key] >= 0.0 for key in ADAPTIVE_STAGES) and timings["points"] >= 0.0
    assert timings["cast"] > timings["first cast"] > 0.0 and timings["refinement cast"] > 0.0
    full = Lidar(pole_scene(), SPEC | {"returns": "dual", "divergence_sampling": "full"})
    full.scan(np.eye(4))
    assert not set(ADAPTIVE_STAGES) & set(full.last_timings)


def test_a_thin_objects_step_marks_the_footprints_beside_it_across_as_well():
    """An OS1-like grid (beams and columns 6.1 mrad apart, footprints narrower). A thin object the first cast met in
    one cell: the cells along both its steps and, across them, the two rows and columns beside, where it lies in
    footprints whose own first cast missed it. A plate's straight edge: only the cells either side of it."""
    from lidar_fmu.physics.echoes import THIN_ACROSS_REACH, ScanGrid, refine_mask

    index = np.arange(81).reshape(9, 9)
    grid = ScanGrid(index, 6.1e-3, 6.1e-3)
    range_m = np.full(81, 20.0)
    range_m[index[4, 4]] = 12.0
    reach = THIN_ACROSS_REACH
    for samples in (4, 16):
        mask = refine_mask(grid, range_m, Footprint((3e-3, 3e-3), samples)).reshape(9, 9)
        want = np.zeros((9, 9), bool)
        want[4 - reach:5 + reach, 3:6] = True  # the steps along the row, and the rows beside them
        want[3:6, 4 - reach:5 + reach] = True  # the steps along the column, and the columns beside them
        assert np.array_equal(mask, want), mask.astype(int)
    plate = np.full((9, 9), 20.0)
    plate[:, 5:] = 12.0
    mask = refine_mask(grid, plate.ravel(), Footprint((3e-3, 3e-3), 16)).reshape(9, 9)
    want = np.zeros((9, 9), bool)
    want[:, 4:6] = True
    assert np.array_equal(mask, want), mask.astype(int)


@pytest.mark.parametrize("moving", [False, True])
def test_adaptive_first_cast_is_grouped_into_packets_by_the_beams_own_directions(moving):
    """The first cast's sub-rays are the beams turned a little each way: casters group them into packets as they do
    the centre rays (the pattern's own directions, one packet order per pattern), with the same returns as without."""
    lidar = Lidar(pole_scene(), SPEC | {"returns": "dual"})
    pattern = lidar.sensor.pattern
    motion = FrameMotion(0.0, 0.1, 0.0, pose_matrix((-0.5, 0.0, 0.0))) if moving else None
    plan = lidar.plan_scan(np.eye(4), motion=motion)
    assert plan.job.rays.coherence_key is not None and not plan.job.rays.in_packet_order
    assert np.array_equal(plan.job.rays.coherence_key, pattern.directions)
    grouped = lidar.backend.returns_together([plan.job])[0]
    own = lidar.backend.returns_together([plan.job._replace(
        rays=dataclasses.replace(plan.job.rays, coherence_key=None))])[0]
    assert np.array_equal(grouped.ray_index, own.ray_index)
    for name in set(grouped.points.dtype.names) - {"time"}:  # a return's time is set with the cloud
        assert np.array_equal(grouped.points[name], own.points[name]), name


def test_pulse_widths_after_effects_find_each_returns_echo_in_any_order():
    """Effects drop returns, add weather echoes and may reorder: each kept return gets its own echo's pulse width
    (same ray, same echo number), a weather echo or a return without an echo the bare pulse."""
    from lidar_fmu.physics.echoes import pulse_widths_after
    from lidar_fmu.physics.weather import WEATHER_OBJECT_ID
    from lidar_fmu.pointcloud import POINT_DTYPE, Returns

    def returns(ray, echo, object_id):
        points = np.zeros(len(ray), POINT_DTYPE)
        points["echo"], points["object_id"] = echo, object_id
        return Returns(points, np.asarray(ray, np.int32), np.zeros(len(ray), np.float32))

    echoes = returns([0, 0, 2, 5, 5, 9], [0, 1, 0, 0, 1, 0], 7)
    pulse = np.array([1.1, 1.2, 1.3, 1.4, 1.5, 1.6])
    kept = returns([5, 0, 2, 3, 5, 9, 0, 12], [1, 1, 0, 0, 0, 0, 0, 0],
                   [7, 7, 7, WEATHER_OBJECT_ID, 7, WEATHER_OBJECT_ID, 7, 7])
    assert pulse_widths_after(echoes, pulse, kept, 1.0).tolist() == [1.5, 1.2, 1.3, 1.0, 1.4, 1.0, 1.1, 1.0]
    assert pulse_widths_after(returns([], [], 7), np.zeros(0), kept, 1.0).tolist() == [1.0] * 8


def test_merge_order_sorts_two_ascending_key_arrays_first_before_second_on_ties():
    from lidar_fmu.physics.echoes import merge_order

    first, second = np.array([1, 4, 4, 9]), np.array([0, 4, 5, 10, 11])
    order = merge_order(first, second)
    assert np.concatenate([first, second])[order].tolist() == [0, 1, 4, 4, 4, 5, 9, 10, 11]
    assert order.tolist() == [4, 0, 1, 2, 5, 6, 3, 7, 8]
    assert merge_order(np.zeros(0, np.int64), second).tolist() == list(range(5))


def test_refined_beams_echo_exactly_as_full_sampling_and_reuse_their_first_cast_sub_ray():
    """A refined beam's echoes are full sampling's, to the bit (its first-cast sub-ray's return joins the S − 1
    sub-rays cast again, in sub-ray order); a frame casts one ray per beam and S − 1 per refined beam."""
    scene = pole_scene()
    spec = SPEC | {"returns": "dual"}
    full = Lidar(scene, spec | {"divergence_sampling": "full"}).scan(np.eye(4), frame=0, ground_truth=True)
    lidar = Lidar(scene, spec)
    adaptive = lidar.scan(np.eye(4), frame=0, ground_truth=True)
    beams, samples = len(lidar.sensor.pattern), SPEC["divergence_samples"]
    assert lidar.last_rays_cast == beams + lidar.last_refined * (samples - 1)
    first = lidar.first_pass_ids(lidar.sensor.pattern)
    assert np.array_equal(first % samples, (lidar.sensor.pattern.beam_id + lidar.sensor.pattern.column) % samples)
    # the beams that give two echoes in the adaptive frame are refined ones: their echoes are full sampling's
    two = np.unique(adaptive.ray_index[adaptive.points["echo"] == 1])
    assert len(two) > 16 * 8
    mine, theirs = np.isin(adaptive.ray_index, two), np.isin(full.ray_index, two)
    for name in ("range", "reflectivity", "normal_x", "object_id", "echo"):
        assert np.array_equal(adaptive.points[name][mine], full.points[name][theirs]), name
    assert np.array_equal(adaptive.echo_pulse_width_m[mine], full.echo_pulse_width_m[theirs])
    assert adaptive.ground_truth[mine].tobytes() == full.ground_truth[theirs].tobytes()


def test_sub_ray_stream_reads_parts_in_sub_ray_order_without_moving_them():
    from lidar_fmu.physics.echoes import sub_ray_stream
    from lidar_fmu.pointcloud import POINT_DTYPE, Returns

    def part(sub_ray):
        points = np.zeros(len(sub_ray), POINT_DTYPE)
        points["range"] = np.asarray(sub_ray) + 0.5
        return Returns(points, np.asarray(sub_ray, np.int64), np.zeros(len(sub_ray), np.float32))

    # the first cast's sub-rays, a ray with two returns (glass) among them; then two casts of others
    stream, order = sub_ray_stream([part([1, 6, 6, 11]), part([0, 2, 3, 12]), part([4, 5, 13])])
    assert stream.ray_index.tolist() == [1, 6, 6, 11, 0, 2, 3, 12, 4, 5, 13]
    assert stream.ray_index[order].tolist() == [0, 1, 2, 3, 4, 5, 6, 6, 11, 12, 13]
    assert np.array_equal(stream.points["range"][order], stream.ray_index[order] + 0.5)
    assert order[6:8].tolist() == [1, 2]  # a ray's returns keep their order

