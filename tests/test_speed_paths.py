"""The fast paths give the same answers as the plain ones: reused hit buffers, time slices cast in
the pattern's packet order, tiles chosen from the scan's steps, detections and returns written in parts, a
rig's shared motion slices, and no scene rebuild for an instance back at identity."""
import numpy as np
import pytest
import trimesh

from helpers.meshes import to_mesh
from helpers.osi_views import sensor_view
from lidar_fmu import Lidar, Scene, box_mesh
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.osi import encode as encode_module
from lidar_fmu.physics import returns as physics_module
from lidar_fmu.pointcloud import CAST_FIELDS
from lidar_fmu.raycast import BackendError, Hits, make_backend
from lidar_fmu.raycast.embree4 import packet_tiles, scan_steps_deg
from lidar_fmu.scan.motion import FrameMotion, ScenePose
from lidar_fmu.sensors import load_sensor

HIT_FIELDS = ("range_m", "hit", "normal", "instance_id", "primitive_id", "u", "v", "instance_index")


def street() -> tuple[Scene, list]:
    """A ground, a wall and two cars (moving instances), seen from the origin."""
    scene = Scene()
    scene.add_instance(1, to_mesh(trimesh.creation.box(extents=(120, 120, 0.2)), "asphalt"), pose_matrix((0, 0, -1.6)))
    scene.add_instance(2, to_mesh(trimesh.creation.box(extents=(0.5, 60, 8)), "plaster"), pose_matrix((25, 0, 2)))
    cars = [pose_matrix((8, 3, -0.8)), pose_matrix((-6, -2.5, -0.8), (0, 0, 0.4))]
    for k, pose in enumerate(cars):
        scene.add_instance(10 + k, box_mesh(4.5, 1.8, 1.5, material="paint"), pose)
    return scene, cars


def assert_same_hits(a: Hits, b: Hits):
    for name in HIT_FIELDS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize("backend", ["embree", "embreex"])
def test_a_reused_hit_buffer_is_written_in_every_slot(backend):
    scene, _ = street()
    lidar = Lidar(scene, "velodyne_vlp16", backend=backend)
    rays = lidar.rays(np.eye(4))
    fresh = lidar.backend.cast_batch(rays)
    assert fresh.hit.any() and not fresh.hit.all()
    stale = Hits.empty(len(rays))
    for array in (stale.range_m, stale.normal, stale.u, stale.v):
        array[...] = 7.0  # garbage from an earlier frame
    stale.hit[...], stale.instance_id[...], stale.primitive_id[...], stale.instance_index[...] = True, 99, 99, 99
    reused = lidar.backend.cast_batch(rays, out=stale)
    assert reused is stale
    assert_same_hits(reused, fresh)


def test_time_slices_keep_the_patterns_packet_order_and_its_hits():
    """Slices cast through cast_span (each in the whole pattern's tile order) hit what one cast hits."""
    scene, _ = street()
    for preset in ("velodyne_vlp16", "ouster_os1_64"):
        lidar = Lidar(scene, preset, backend="embree")
        backend = lidar.backend
        rays = lidar.rays(np.eye(4))
        whole = backend.cast_batch(rays)
        sliced = Hits.empty(len(rays))
        bounds = np.linspace(0, len(rays), 8).astype(int)
        through = lidar.return_model().continuation()
        for start, stop in zip(bounds[:-1], bounds[1:]):
            backend.cast_span(rays, int(start), int(stop), through, sliced)
        assert_same_hits(sliced, whole)


def test_packet_tiles_follow_the_scans_steps():
    vlp = load_sensor("velodyne_vlp16").pattern.directions
    os1 = load_sensor("ouster_os1_64").pattern.directions
    row_step, column_step = scan_steps_deg(vlp)
    assert row_step == pytest.approx(2.0, abs=1e-3) and column_step == pytest.approx(0.4, abs=1e-3)
    for directions, rows in ((vlp, 1), (os1, 2)):
        order = packet_tiles(directions)
        assert np.array_equal(np.sort(order), np.arange(len(directions)))  # every ray once
        elevation = np.round(np.degrees(np.arcsin(directions[order[: len(order) // 8 * 8], 2])), 2).reshape(-1, 8)
        distinct = np.array([len(set(tile)) for tile in elevation])
        assert np.median(distinct) == rows  # VLP-16: one beam × 8 shots; OS1: 2 beams × 4 shots
    rosette = load_sensor("livox_mid70").pattern.directions
    assert scan_steps_deg(rosette) is None
    assert np.array_equal(np.sort(packet_tiles(rosette)), np.arange(len(rosette)))


def test_detections_written_in_parts_are_the_same_bytes(monkeypatch):
    rng = np.random.default_rng(3)
    cloud = np.zeros(1001, physics_module.POINT_DTYPE)
    for name in ("x", "y", "z"):
        cloud[name] = rng.uniform(-50, 50, len(cloud))
    cloud["range"] = np.sqrt(cloud["x"] ** 2 + cloud["y"] ** 2 + cloud["z"] ** 2)
    cloud["reflectivity"] = rng.uniform(0, 1, len(cloud))
    cloud["beam_id"] = rng.integers(0, 200, len(cloud))
    cloud["object_id"] = rng.integers(0, 2**40, len(cloud))
    block = encode_module.LidarDetectionBlock(
        cloud, sensor_id=3, mounting_position=np.eye(4), existence_probability=rng.uniform(0, 1, len(cloud)),
        intensity_percent=rng.uniform(0, 100, len(cloud)), echo_pulse_width_m=rng.uniform(1, 5, len(cloud)))
    whole = bytes(encode_module.encode_sensor_data_buffer(block, timestamp_s=1.5, cycle_counter=4))
    monkeypatch.setattr(encode_module, "_CHUNK_POINTS", 97)  # 11 parts, the last one short
    assert bytes(encode_module.encode_sensor_data_buffer(block, timestamp_s=1.5, cycle_counter=4)) == whole


def test_returns_filled_in_parts_are_the_same(monkeypatch):
    scene, _ = street()
    lidar = Lidar(scene, "velodyne_vlp16")
    rays = lidar.rays(np.eye(4))
    hits = lidar.backend.cast_batch(rays)
    model = lidar.return_model()
    whole = physics_module.returns_of_hits(hits, rays, model)
    monkeypatch.setattr(physics_module, "_FILL_RAYS", 1000)  # 15 parts: most of them close up
    parts = physics_module.returns_of_hits(hits, rays, model)
    assert len(whole.points) > 1000
    for name in (*CAST_FIELDS, "echo"):  # ("time" is the cloud's to fill)
        np.testing.assert_array_equal(whole.points[name], parts.points[name], err_msg=name)
    np.testing.assert_array_equal(whole.ray_index, parts.ray_index)
    np.testing.assert_array_equal(whole.intensity_percent, parts.intensity_percent)


def test_a_rigs_identical_lidars_share_their_motion_slices(monkeypatch):
    """Two identical lidars: the cars are posed once per slice for both, and each lidar's points are the
    bytes a lone lidar at its mounting gives."""
    spec = {"horizontal_fov_deg": [-180, 180], "horizontal_resolution_deg": 2.0, "vertical_fov_deg": [-15, 5],
            "channels": 8, "max_range_m": 60, "motion_slices": 5}
    front, rear = {"xyz_m": [1.0, 0.0, 1.2], "rpy_deg": [0, 0, 0]}, {"xyz_m": [-1.0, 0.0, 1.2], "rpy_deg": [0, 0, 180]}
    rig = {"sensors": [spec | {"mounting": front}, spec | {"mounting": rear}]}

    def views(k):  # cars driving past, so that every slice poses them anew
        cars = [(10, (12.0 - 8 * k, 3.0, 0.75), (0.0, 0.0, 0.0), (4.0, 1.8, 1.5), ""),
                (11, (-15.0 + 6 * k, -3.0, 0.75), (0.0, 0.0, 0.0), (4.0, 1.8, 1.5), "")]
        return sensor_view(cars, time_s=0.1 * (k + 1))

    posings = []
    original = ScenePose.__call__
    monkeypatch.setattr(ScenePose, "__call__", lambda self: (posings.append(self.key), original(self))[1])
    together = OsiSensorModel(sensor=rig)
    for k in range(3):
        assert together.step(views(k), 0.1 * (k + 1)).valid
    rig_posings, posings[:] = len(posings), []
    alone = [OsiSensorModel(sensor=spec, default_mounting_pose=pose_matrix(m["xyz_m"], np.radians(m["rpy_deg"])))
             for m in (front, rear)]
    for k in range(3):
        for model in alone:
            model.step(views(k), 0.1 * (k + 1))
    # per step: 5 slices posed once for both lidars, then one restore per lidar (steps 2 and 3 move the cars)
    assert rig_posings == 2 * (5 + 2)
    assert len(posings) == 2 * 2 * (5 + 1)
    for cloud, model in zip(together.last_clouds, alone):
        assert len(cloud) > 0 and cloud.points.tobytes() == model.last_cloud.points.tobytes()


def test_an_instance_back_at_identity_does_not_rebuild_the_scene(monkeypatch):
    scene, _ = street()
    mover = box_mesh(1, 1, 1)
    scene.add_instance(50, mover, np.eye(4))
    backend = make_backend("embree", scene)
    rebuilds = []
    original = type(backend)._rebuild
    monkeypatch.setattr(type(backend), "_rebuild", lambda self, mask: (rebuilds.append(mask.copy()), original(self, mask))[1])
    for x in (2.0, 0.0, 3.0, 0.0):  # away from identity and back, as a frame's motion slices do
        scene.set_poses([50], pose_matrix((x, 0, 0))[None])
        backend.update()
        hits = backend.cast(np.array([-5.0, 0.0, 0.0]), np.array([[1.0, 0.0, 0.0]]))
        assert hits.instance_id[0] == 50 and hits.range_m[0] == pytest.approx(x + 4.5, abs=1e-4)
    assert len(rebuilds) == 1  # once, when it first left identity


def two_cars() -> Scene:
    scene = Scene()
    scene.add_instance(1, box_mesh(60, 60, 0.2, material="asphalt"), pose_matrix((0, 0, -1.6)))
    scene.add_instance(10, box_mesh(4.5, 1.8, 1.5, material="paint"), pose_matrix((8, 0, -0.8)))
    scene.add_instance(11, box_mesh(4.5, 1.8, 1.5, material="paint"), pose_matrix((-8, 0, -0.8)))
    return scene


ALL_ROUND = {"horizontal_fov_deg": [-180, 180], "horizontal_resolution_deg": 2.0, "vertical_fov_deg": [-10, 2],
             "channels": 4, "max_range_m": 60, "motion_slices": 3}


@pytest.mark.parametrize("backend", ["embree", "embreex"])
def test_jobs_cast_together_see_the_scene_each_would_see_alone(backend):
    """Cast together, a lidar without motion sees the end poses, and one whose objects are a subset of another's
    sees the others at their end poses: each job's points are those it gives alone."""
    scene = two_cars()
    end = scene.poses.copy()
    both = FrameMotion(0.0, 0.1, 0.0, np.eye(4), {10: pose_matrix((8, -3, -0.8)), 11: pose_matrix((-8, 3, -0.8))})
    only10 = FrameMotion(0.0, 0.1, 0.0, np.eye(4), {10: pose_matrix((8, -3, -0.8))})
    first = Lidar(scene, ALL_ROUND, backend=backend)
    lidars = [first, Lidar(scene, ALL_ROUND, backend=first.backend),
              Lidar(scene, ALL_ROUND | {"motion_distortion": False}, backend=first.backend)]
    motions = [both, only10, both]
    alone = [lidar.scan(np.eye(4), 0.1, motion=motion) for lidar, motion in zip(lidars, motions)]
    plans = [lidar.plan_scan(np.eye(4), 0.1, motion=motion) for lidar, motion in zip(lidars, motions)]
    together = [plan.finish(r) for plan, r in zip(plans, first.backend.returns_together([p.job for p in plans]))]
    for a, t in zip(alone, together):
        assert {10, 11} <= set(t.points["object_id"].tolist())
        assert a.points.tobytes() == t.points.tobytes()
    np.testing.assert_array_equal(scene.poses, end)


def test_a_reused_buffer_must_fit_the_cast():
    scene, _ = street()
    lidar = Lidar(scene, "velodyne_vlp16")
    rays = lidar.rays(np.eye(4))
    with pytest.raises(BackendError, match="holds 10 rays"):
        lidar.backend.cast_batch(rays, out=Hits.empty(10))


def test_instances_out_of_reach_leave_the_top_level_and_no_point_changes(monkeypatch):
    """A ring of moving cars, a third beyond the lidar's range, the others straddling it: the top level of each
    motion slice holds only those some ray can reach, only they are posed for the slices, and the points are the
    bytes of a cast that poses every car and keeps it in the top level."""
    from lidar_fmu.raycast.backend import Backend
    from lidar_fmu.raycast.embree4 import EmbreeBackend
    from lidar_fmu.scan import motion as motion_module

    spec = ALL_ROUND | {"max_range_m": 30}
    angles = np.radians(np.arange(0, 360, 7.5))
    distances = np.where(np.arange(len(angles)) % 3 == 0, 200.0, 30.0 + 2.0 * np.sin(angles))  # beyond, or at 30 m

    def scene_and_motion():
        scene = Scene()
        scene.add_instance(1, box_mesh(500, 500, 0.2, material="asphalt"), pose_matrix((0, 0, -1.6)))
        starts = {}
        for k, (angle, distance) in enumerate(zip(angles, distances)):
            x, y = distance * np.cos(angle), distance * np.sin(angle)
            scene.add_instance(10 + k, box_mesh(4.5, 1.8, 1.5, material="paint"), pose_matrix((x, y, -0.8), (0, 0, angle)))
            starts[10 + k] = pose_matrix((x - 1.5, y, -0.8), (0, 0, angle))
        return scene, FrameMotion(0.0, 0.1, 0.0, np.eye(4), starts)

    enabled = []
    original = EmbreeBackend._switch_to_reach
    monkeypatch.setattr(EmbreeBackend, "_switch_to_reach",
                        lambda self: (original(self), enabled.append(int(self._enabled.sum())))[0])
    posed = []
    monkeypatch.setattr(ScenePose, "__call__", lambda self: (posed.append(len(self.ids)), self.scene.set_poses(
        self.ids, self.poses))[0])
    scene, motion = scene_and_motion()
    focused = Lidar(scene, spec, backend="embree").scan(np.eye(4), 0.1, motion=motion)
    near = np.count_nonzero(distances < 100)
    assert min(enabled) == 1 + near  # the ground and the cars at the range kept
    assert set(posed) == {near}
    monkeypatch.setattr(EmbreeBackend, "focus", Backend.focus)
    reach = motion_module._moving_in_reach
    monkeypatch.setattr(motion_module, "_moving_in_reach", lambda scene, starts, pose, reach_m: reach(
        scene, starts, pose, np.inf))
    scene, motion = scene_and_motion()
    posed.clear()
    everything = Lidar(scene, spec, backend="embree").scan(np.eye(4), 0.1, motion=motion)
    assert set(posed) == {len(angles)}
    assert len(set(focused.points["object_id"].tolist()) - {1}) > 10
    assert focused.points.tobytes() == everything.points.tobytes()
