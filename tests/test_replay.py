"""Clouds decoded from OSI SensorData get their rays back exactly: the replay's organized cloud is the scan's."""
import json
import math

import numpy as np
import pytest

from helpers.osi_views import HOST_ID, sensor_view
from lidar_fmu import POINT_DTYPE, Lidar, Scene, box_mesh, load_sensor
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.errors import LidarFmuError
from lidar_fmu.geometry.pattern import angle_list
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.osi.detections import sensor_data_to_points
from lidar_fmu.osi.encode import LidarDetectionBlock, encode_sensor_data
from lidar_fmu.pointcloud import ENVIRONMENT_ID_BASE, RayMatchError, match_rays

#: a sensor no preset is named after: interleaved beams (like Velodyne's), a 270° sweep
CUSTOM_SENSOR = {"name": "test_rig_interleaved", "vertical_angles_deg": [-1, -15, 3, -11, 7, -7, 11, -3, 15, 1],
                 "horizontal_samples": 300, "horizontal_fov_deg": [135, -135], "max_range_m": 80}


def _room():
    """Ground, walls and a ceiling with a hole: some rays hit, some miss."""
    scene = Scene()
    parts = [((60, 60, 0.2), (0, 0, -1.8)), ((60, 1, 6), (0, 14, 1)), ((1, 30, 6), (22, 0, 1)),
             ((20, 20, 0.2), (-12, 0, 6))]
    for k, (dims, (x, y, z)) in enumerate(parts):
        scene.add_instance(ENVIRONMENT_ID_BASE + k, box_mesh(*dims, name=f"part{k}"), pose_matrix((x, y, z)))
    scene.add_instance(42, box_mesh(4.5, 1.9, 1.5), pose_matrix((9, -3, -1.05), (0, 0, 0.3)))
    return scene


def _through_osi(cloud):
    data = encode_sensor_data(LidarDetectionBlock(cloud, sensor_id=1, mounting_position=np.eye(4)), timestamp_s=1.0,
                              cycle_counter=1)
    return sensor_data_to_points(data)


@pytest.fixture(scope="module")
def room():
    return _room()


@pytest.mark.parametrize("sensor", [
    CUSTOM_SENSOR,
    "velodyne_vlp16",
    "ouster_os1_128",
    {"pinhole": {"width_px": 160, "height_px": 120, "horizontal_fov_deg": 100}},
    # one beam, so only the direction tells rays apart: same azimuths, and rays next to the zenith
    {"angle_pairs_deg": [[a, e] for a in (-30, 0, 0.05, 30) for e in (-20, -10, -9.95, 0, 45, 89.999)]},
])
def test_rays_come_back_exactly_through_osi(room, sensor):
    lidar = Lidar(room, sensor, backend="embree")
    cloud = lidar.scan(pose_matrix((0.5, -0.2, 0.1), (0.02, -0.03, 0.4)))
    assert 0 < len(cloud) < len(lidar.sensor.pattern)
    decoded = _through_osi(cloud)
    assert decoded.pattern is None and np.all(decoded.ray_index == -1)
    organized = decoded.with_pattern(lidar.sensor.pattern)
    assert organized.pattern is lidar.sensor.pattern
    assert (organized.rows, organized.columns) == (cloud.rows, cloud.columns)
    assert np.array_equal(organized.ray_index, cloud.ray_index)
    assert np.array_equal(organized.column, cloud.column)


def test_points_off_their_rays_are_refused_not_guessed(room):
    lidar = Lidar(room, CUSTOM_SENSOR, backend="embree")
    cloud = lidar.scan(np.eye(4))
    points = cloud.points.copy()
    points["z"][5] += 0.02 * points["range"][5]  # 1° off its ray: nearest would still pick some ray
    with pytest.raises(RayMatchError, match=r"1 lie on no ray of their beam.*point 5"):
        match_rays(points, lidar.sensor.pattern)
    # another sensor's pattern: refused as a whole
    other = load_sensor({**CUSTOM_SENSOR, "horizontal_samples": 301})
    with pytest.raises(RayMatchError, match="not cast with this pattern"):
        match_rays(cloud.points, other.pattern)
    # a beam the pattern does not have
    points = cloud.points.copy()
    points["beam_id"][0] = 99
    with pytest.raises(RayMatchError):
        match_rays(points, lidar.sensor.pattern)
    assert issubclass(RayMatchError, LidarFmuError)


def test_a_pattern_repeating_a_direction_is_ambiguous():
    pattern = angle_list(np.radians([0.0, 10.0, 10.0]), np.radians([0.0, 5.0, 5.0]), frame_period_s=0.1)
    points = np.zeros(2, POINT_DTYPE)
    d = pattern.directions[[0, 1]].astype(np.float64) * 5.0
    points["x"], points["y"], points["z"], points["range"] = d[:, 0], d[:, 1], d[:, 2], 5.0
    with pytest.raises(RayMatchError, match="several rays"):
        match_rays(points, pattern)
    assert np.array_equal(match_rays(points[:1], pattern), [0])


# -- through the FMU, as the replay does it ------------------------------------------------------
def _views():
    """Two SensorViews of cars around a host driving along x (no environment: the cars are boxes)."""
    cars = [(20, (14.0, -3.0, 0.9), (0, 0, math.radians(25)), (4.6, 1.9, 1.8), ""),
            (21, (-9.0, 4.0, 0.9), (0, 0, math.radians(-60)), (4.2, 1.8, 1.6), ""),
            (22, (3.0, 8.0, 1.2), (0, 0, 0.0), (8.0, 2.5, 2.4), "")]
    return [sensor_view(cars, time_s=t, host=(HOST_ID, (2.0 * t, 0.0, 0.75), 0.05 * t),
                        mounting=((1.0, 0.0, 1.2), (0.0, math.radians(2), 0.0))) for t in (0.1, 0.2)]


def test_replay_organizes_the_fmu_output_as_the_scan(fmu_path, tmp_path, monkeypatch):
    """The replay's preview cloud, decoded from the FMU's SensorData, has the direct scan's rays."""
    import lidar_fmu.tools.replay as replay_module
    from lidar_fmu.osi.trace import write_trace

    views = _views()
    scenario = tmp_path / "scenario"
    scenario.mkdir()
    write_trace(scenario / "views.osi", views)
    (scenario / "scenario.yaml").write_text(json.dumps({"trace": "views.osi", "sensor": CUSTOM_SENSOR}))
    organized, original = [], replay_module.organize

    def organize(cloud, pattern, max_echoes=1):  # keep what the replay draws its preview from
        organized.append(original(cloud, pattern, max_echoes))
        return organized[-1]

    monkeypatch.setattr("lidar_fmu.tools.replay_outputs.organize", organize)
    summary = replay_module.replay(scenario, tmp_path / "out", fmu_path=fmu_path, progress=False)
    assert "preview_note" not in summary and (tmp_path / "out" / "preview.png").is_file()

    direct = OsiSensorModel(sensor=CUSTOM_SENSOR)
    for k, view in enumerate(views):
        assert direct.step(view, 0.1 * (k + 1)).valid
    scan = direct.last_cloud
    # each frame's PCD (for its firing times), then the preview: the last frame
    assert len(organized) == 3 and 0 < len(scan) < len(direct.sensor.pattern)
    cloud = organized[-1]
    assert cloud.sensor_name == "test_rig_interleaved"
    assert (cloud.rows, cloud.columns) == (scan.rows, scan.columns)
    assert np.array_equal(cloud.pattern.directions, scan.pattern.directions)
    assert np.array_equal(cloud.ray_index, scan.ray_index)
    assert np.array_equal(cloud.points["beam_id"], scan.points["beam_id"])
    assert np.allclose(cloud.xyz, scan.xyz, atol=1e-5, rtol=0)


def test_organize_matches_a_direct_step(fmu_path):
    """One FMU step: ``organize`` of the decoded SensorData gives the in-process scan's ray indices."""
    from lidar_fmu.cosim.fmu_host import FmuInstance
    from lidar_fmu.tools.replay import organize

    view = _views()[0]
    with FmuInstance(fmu_path, {"sensor": "velodyne_vlp16"}) as fmu:
        out = fmu.step(view, 0.0, 0.1)
    direct = OsiSensorModel(sensor="velodyne_vlp16")
    assert direct.step(view, 0.1).valid
    cloud = organize(sensor_data_to_points(out.sensor_data), direct.sensor.pattern)
    assert len(cloud) == len(direct.last_cloud) > 0
    assert np.array_equal(cloud.ray_index, direct.last_cloud.ray_index)


def test_scenario_up_axis_reaches_the_fmu(tmp_path):
    from lidar_fmu.errors import UserError
    from lidar_fmu.tools.replay import fmu_parameters, load_scenario

    (tmp_path / "scenario.yaml").write_text("trace: views.osi\nup_axis: Y\n")
    assert fmu_parameters(load_scenario(tmp_path), str(tmp_path))["up_axis"] == "y"
    (tmp_path / "scenario.yaml").write_text("trace: views.osi\n")
    assert fmu_parameters(load_scenario(tmp_path), str(tmp_path))["up_axis"] == ""  # by format
    (tmp_path / "scenario.yaml").write_text("trace: views.osi\nup_axis: x\n")
    with pytest.raises(UserError, match="up_axis"):
        load_scenario(tmp_path)


def test_the_fmu_stands_a_gltf_asset_up(fmu_path, tmp_path):
    """Through the FMU: a glTF car (Y-up by its specification) is seen lying along x, as long as it is; with
    up_axis z it lies on its side."""
    import trimesh

    from lidar_fmu.cosim.fmu_host import FmuInstance
    from lidar_fmu.osi.detections import sensor_data_to_points

    trimesh.creation.box(extents=(1.8, 1.5, 4.0)).export(tmp_path / "car.glb")
    view = sensor_view([(30, (10.0, 0.0, 0.75), (0, 0, 0), (4.0, 1.8, 1.5), "car.glb")], time_s=0.1, host=None)
    tops = {}
    for up_axis in ("", "z"):
        params = {"sensor": "ouster_os1_128", "assets": str(tmp_path), "up_axis": up_axis}
        with FmuInstance(fmu_path, params) as fmu:
            points = sensor_data_to_points(fmu.step(view, 0.0, 0.1).sensor_data).points
        car = points[points["object_id"] == 30]
        tops[up_axis] = float(car["z"].max())
    assert tops[""] == pytest.approx(1.5, abs=0.07)  # (beams 5 cm apart there) 0.75 m centre + half of 1.5 m: standing on its wheels
    assert tops["z"] == pytest.approx(2.75, abs=0.07)  # 4 m tall: the glTF taken Z-up stands on its tail


def test_replay_writes_ground_truth_beside_the_fmu_points(fmu_path, tmp_path):
    """``ground_truth: true``: every frame PCD carries the in-process twin's truth, point for point (noise on: the
    measured ranges scatter about it)."""
    import lidar_fmu.tools.replay as replay_module
    from lidar_fmu.io import read_pcd
    from lidar_fmu.osi.trace import write_trace
    from lidar_fmu.physics.ground_truth import GROUND_TRUTH_DTYPE

    scenario = tmp_path / "scenario"
    scenario.mkdir()
    write_trace(scenario / "views.osi", _views())
    sensor = {**CUSTOM_SENSOR, "noise": {"range_sigma_m": 0.02, "seed": 5}}
    (scenario / "scenario.yaml").write_text(json.dumps({"trace": "views.osi", "sensor": sensor,
                                                        "ground_truth": True}))
    replay_module.replay(scenario, tmp_path / "out", fmu_path=fmu_path, progress=False)
    frames = sorted((tmp_path / "out" / "frames").glob("*.pcd"))
    assert len(frames) == 2
    for frame in frames:
        points = read_pcd(frame)
        assert set(GROUND_TRUTH_DTYPE.names) <= set(points.dtype.names) and len(points) > 100
        # and the twin's semantic classes: an OSI object's is its class's, never unlabelled
        objects = points["object_id"] < 2**63
        assert objects.any() and np.all(points["semantic"][objects] != 0)
        error = points["range"] - points["range_true"]
        assert 0.015 < error.std() < 0.025 and np.abs(error).max() < 0.2
        on_ray = np.stack([points[a] for a in "xyz"], 1) / points["range"][:, None]
        truth_ray = np.stack([points[a + "_true"] for a in "xyz"], 1) / points["range_true"][:, None]
        np.testing.assert_allclose(on_ray, truth_ray, atol=1e-4)  # the same ray: the truth is this point's
    (scenario / "scenario.yaml").write_text(json.dumps({"trace": "views.osi", "ground_truth": "yes"}))
    with pytest.raises(LidarFmuError, match="ground_truth"):
        replay_module.load_scenario(scenario)
