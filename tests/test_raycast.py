import numpy as np
import pytest
import trimesh

from helpers.meshes import ground_of_cells, landing_on_ground, to_mesh
from lidar_fmu import Lidar, Scene, box_mesh, load_sensor
from lidar_fmu.geometry.scene import Mesh, concatenate
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.raycast import BackendError, RayBatch, make_backend


@pytest.fixture(params=["embree", "embreex"])
def backend(request):
    """Both CPU casters: Embree 4 native (instancing, packets) and the embreex-API two-level path."""
    return request.param


def world_copy(mesh: Mesh, pose) -> Mesh:
    pose = np.asarray(pose)
    return Mesh(mesh.vertices @ pose[:3, :3].T + pose[:3, 3], mesh.faces, mesh.face_material, mesh.material_names)


def test_plane_at_known_distance(plane_mesh, backend):
    spec = {"horizontal_fov_deg": [-45, 45], "horizontal_resolution_deg": 1.0,
            "vertical_fov_deg": [-30, 30], "channels": 16, "max_range_m": 100}
    lidar = Lidar(Scene.from_meshes([plane_mesh]), spec, backend=backend)
    cloud = lidar.scan(np.eye(4))
    assert len(cloud) == 91 * 16  # every ray hits
    assert np.abs(cloud.points["x"] - 10.0).max() < 1e-3
    np.testing.assert_allclose(cloud.points["normal_x"], -1.0, atol=1e-6)  # facing the sensor
    expected_range = 10.0 / lidar.sensor.pattern.directions[cloud.ray_index, 0]
    np.testing.assert_allclose(cloud.points["range"], expected_range, rtol=1e-5)


def test_plane_seen_by_spinning_sensor(plane_mesh, backend):
    lidar = Lidar(Scene.from_meshes([plane_mesh]), "velodyne_vlp16", backend=backend)
    cloud = lidar.scan(np.eye(4))
    d = lidar.sensor.pattern.directions
    # the rays that point forward and reach the wall within 100 m, no others
    t = 10.0 / np.where(d[:, 0] > 0, d[:, 0], np.nan)
    y, z = t * d[:, 1], t * d[:, 2]
    expected = (d[:, 0] > 0) & (t <= 100) & (np.abs(y) <= 100) & (np.abs(z) <= 100)
    assert len(cloud) == expected.sum()
    assert np.abs(cloud.points["x"] - 10.0).max() < 1e-3


def test_sphere_from_inside(backend):
    radius = 12.0
    sphere = to_mesh(trimesh.creation.icosphere(subdivisions=6, radius=radius))
    lidar = Lidar(Scene.from_meshes([sphere]), "ouster_os1_64", backend=backend)
    cloud = lidar.scan(np.eye(4))
    assert len(cloud) == len(lidar.sensor.pattern)
    # flat facets sit at most the sagitta inside the true sphere
    assert np.all(cloud.points["range"] <= radius + 1e-4)
    assert np.all(cloud.points["range"] >= radius * (1 - 1e-3))


def test_moved_instances_equal_a_mesh_placed_at_that_pose(backend):
    car = box_mesh(4.5, 1.8, 1.5, material="paint")
    ground = to_mesh(trimesh.creation.box(extents=(200, 200, 0.2)), "asphalt")
    ground_pose = pose_matrix((0, 0, -0.85))
    scene = Scene()
    scene.add_instance(0, ground, ground_pose)
    poses = {10 + k: pose_matrix((8 + 3 * k, -6 + 4 * k, 0), (0, 0, 0.3 * k)) for k in range(4)}
    for instance_id, pose in poses.items():
        scene.add_instance(instance_id, car, pose)
    caster = make_backend(backend, scene)
    lidar_pattern = load_sensor("ouster_os1_64").pattern
    origin = np.array([0, 0, 1.0], np.float32)
    caster.cast(origin, lidar_pattern.directions, 120)  # build, then move
    moved = {k: pose_matrix((10 + 2 * k, 5 - 3 * k, 0.1), (0.05, -0.02, 1.0 + 0.4 * k)) for k in range(4)}
    for k, pose in moved.items():
        scene.set_pose(10 + k, pose)
    hits = caster.cast(origin, lidar_pattern.directions, 120)

    reference = Scene.from_meshes(
        [world_copy(ground, ground_pose)] + [world_copy(car, pose) for pose in moved.values()]
    )
    ref = make_backend(backend, reference).cast(origin, lidar_pattern.directions, 120)
    np.testing.assert_array_equal(hits.hit, ref.hit)
    np.testing.assert_allclose(hits.range_m[hits.hit], ref.range_m[ref.hit], atol=1e-4)
    np.testing.assert_allclose(hits.normal[hits.hit], ref.normal[ref.hit], atol=1e-4)
    # instance ids map back: reference ids 1..4 are cars 10..13
    hit_cars = hits.instance_id[hits.hit & (hits.instance_id >= 10)]
    ref_cars = ref.instance_id[ref.hit & (ref.instance_id >= 1)] + 9
    np.testing.assert_array_equal(np.sort(hit_cars), np.sort(ref_cars))
    assert len(set(hit_cars.tolist())) == 4


def test_poses_set_again_unchanged_commit_nothing_and_a_moved_one_only_its_own(monkeypatch):
    """Embree's top level is built again at every commit: a step whose poses are those already committed (a view of
    objects that stand still) must not commit, and one that moves an instance rewrites that one alone, casting as
    a backend built afresh on the same poses."""
    from lidar_fmu.raycast.embree4 import embree

    car = box_mesh(4.5, 1.8, 1.5, material="paint")
    scene = Scene()
    poses = {10 + k: pose_matrix((8 + 3 * k, -6 + 4 * k, 0), (0, 0, 0.3 * k)) for k in range(40)}
    for instance_id, pose in poses.items():
        scene.add_instance(instance_id, car, pose)
    caster = make_backend("embree", scene)
    directions = load_sensor("ouster_os1_64").pattern.directions
    origin = np.array([0, 0, 1.0], np.float32)
    before = caster.cast(origin, directions, 120)
    lib, calls = embree().lib, {"commits": 0}
    commit = lib.rtcCommitScene

    def counted_commit(top):
        calls["commits"] += 1
        return commit(top)

    monkeypatch.setattr(lib, "rtcCommitScene", counted_commit)
    scene.set_poses(list(poses), np.array(list(poses.values())))  # the same poses again: a new pose revision
    again = caster.cast(origin, directions, 120)
    assert calls["commits"] == 0
    for name in ("hit", "range_m", "instance_id", "normal"):
        np.testing.assert_array_equal(getattr(again, name), getattr(before, name))
    scene.set_pose(12, pose_matrix((9.0, 2.0, 0.0), (0, 0, 1.2)))
    moved = caster.cast(origin, directions, 120)
    assert calls["commits"] == 1
    fresh = make_backend("embree", scene).cast(origin, directions, 120)
    for name in ("hit", "range_m", "instance_id", "normal"):
        np.testing.assert_array_equal(getattr(moved, name), getattr(fresh, name))
    assert not np.array_equal(moved.instance_id == 12, before.instance_id == 12)


def test_remove_and_readd_instances(backend):
    car = box_mesh(4.0, 2.0, 1.5)
    scene = Scene()
    scene.add_instance(5, car, pose_matrix((10, 0, 0)))
    caster = make_backend(backend, scene)
    d = np.array([[1.0, 0, 0]], np.float32)
    assert caster.cast(np.zeros(3), d).range_m[0] == pytest.approx(8.0)
    scene.remove_instance(5)
    assert not caster.cast(np.zeros(3), d).hit[0]
    scene.add_instance(6, car, pose_matrix((20, 0, 0)))
    hits = caster.cast(np.zeros(3), d)
    assert hits.range_m[0] == pytest.approx(18.0) and hits.instance_id[0] == 6


def test_scaled_instance_poses_are_honoured(backend):
    unit = box_mesh(1.0, 1.0, 1.0)
    scene = Scene()
    pose = pose_matrix((10, 0, 0))
    pose[:3, :3] *= 4.0  # a 4 m cube
    scene.add_instance(1, unit, pose)
    hits = make_backend(backend, scene).cast(np.zeros(3), np.array([[1.0, 0, 0], [0.0, 1, 0]], np.float32))
    assert hits.range_m[0] == pytest.approx(8.0, abs=1e-5) and not hits.hit[1]
    np.testing.assert_allclose(hits.normal[0], [-1, 0, 0], atol=1e-6)


def test_cross_check_with_trimesh_intersector(backend):
    rng = np.random.default_rng(1)
    knot = trimesh.creation.torus(major_radius=5, minor_radius=1.5, major_sections=48, minor_sections=24)
    box = trimesh.creation.box(extents=(3, 3, 3))
    box.apply_translation((0, 0, 4))
    tm = trimesh.util.concatenate([knot, box])
    mesh = to_mesh(tm)
    scene = Scene()
    pose = pose_matrix((1, 2, 0.5), (0.1, 0.2, 0.3))
    scene.add_instance(3, mesh, pose)
    origins = rng.uniform(-12, 12, (1000, 3)).astype(np.float32)
    targets = rng.uniform(-4, 4, (1000, 3))
    d = (targets - origins) / np.linalg.norm(targets - origins, axis=1, keepdims=True)
    hits = make_backend(backend, scene).cast(origins, d.astype(np.float32))

    world = tm.copy()
    world.apply_transform(pose)
    intersector = trimesh.ray.ray_triangle.RayMeshIntersector(world)
    locations, ray_idx, tri_idx = intersector.intersects_location(origins, d, multiple_hits=True)
    expected = np.full(len(d), np.inf)
    dist = np.einsum("ij,ij->i", locations - origins[ray_idx], d[ray_idx])
    np.minimum.at(expected, ray_idx, dist)
    ref_hit = np.isfinite(expected)
    assert np.mean(hits.hit == ref_hit) > 0.998  # grazing edge cases may differ
    both = hits.hit & ref_hit
    np.testing.assert_allclose(hits.range_m[both], expected[both], atol=2e-4)
    assert np.all(hits.instance_id[hits.hit] == 3)
    # normals are unit and face the rays
    assert np.allclose(np.linalg.norm(hits.normal[hits.hit], axis=1), 1.0, atol=1e-5)
    assert np.all(np.einsum("ij,ij->i", hits.normal[hits.hit], d[hits.hit]) <= 1e-6)


@pytest.mark.parametrize("samples, expected", [(512, 7), (1024, 14), (2048, 28)])
def test_limox_pattern_validation_car_columns(samples, expected, backend):
    """LiMOX: a 1.72 m wide car 20 m ahead spans 7/14/28 columns of an OS1-128."""
    car = box_mesh(4.2, 1.72, 1.5)
    scene = Scene()
    scene.add_instance(7, car, pose_matrix((20 + 2.1, 0, 0)))  # rear face 20 m ahead
    lidar = Lidar(scene, {"preset": "ouster_os1_128", "horizontal_samples": samples}, backend=backend)
    cloud = lidar.scan(np.eye(4))
    columns = np.unique(lidar.sensor.pattern.column[cloud.ray_index])
    assert abs(len(columns) - expected) <= 1


def test_max_range_and_min_range_cut(plane_mesh, backend):
    near = Lidar(Scene.from_meshes([plane_mesh]), {"vertical_angles_deg": [0], "horizontal_fov_deg": [-10, 10],
                                                    "horizontal_samples": 11, "max_range_m": 9.0}, backend=backend)
    assert len(near.scan(np.eye(4))) == 0
    blind = Lidar(Scene.from_meshes([plane_mesh]), {"vertical_angles_deg": [0], "horizontal_fov_deg": [-10, 10],
                                                     "horizontal_samples": 11, "min_range_m": 11.0}, backend=backend)
    assert len(blind.scan(np.eye(4))) == 0


def test_bad_rays_and_backends(plane_mesh, backend):
    caster = make_backend(backend, Scene.from_meshes([plane_mesh]))
    with pytest.raises(ValueError, match="NaN"):
        caster.cast(np.zeros(3), np.array([[np.nan, 0, 0]], np.float32))
    with pytest.raises(ValueError, match="origins"):
        caster.cast(np.zeros((2, 3)), np.ones((3, 3), np.float32))
    with pytest.raises(BackendError, match="unknown backend"):
        make_backend("optix", Scene())


def test_empty_scene_returns_nothing(backend):
    hits = make_backend(backend, Scene()).cast(np.zeros(3), np.eye(3, dtype=np.float32))
    assert not hits.hit.any() and np.all(np.isinf(hits.range_m)) and np.all(hits.instance_id == -1)


def test_world_mesh_with_many_car_instances_matches_merged_mesh(backend):
    """Single-origin angular culling must not lose hits: compare against one merged mesh."""
    rng = np.random.default_rng(4)
    ground = to_mesh(trimesh.creation.box(extents=(120, 120, 0.2)))
    car = to_mesh(trimesh.creation.capsule(height=3.0, radius=0.9, count=[16, 16]))
    scene = Scene()
    scene.add_instance(0, ground, pose_matrix((0, 0, -0.1)))
    placed = [world_copy(ground, pose_matrix((0, 0, -0.1)))]
    for k in range(60):
        pose = pose_matrix((rng.uniform(-50, 50), rng.uniform(-50, 50), 0.9), (0, np.pi / 2, rng.uniform(-3, 3)))
        scene.add_instance(100 + k, car, pose)
        placed.append(world_copy(car, pose))
    pattern = load_sensor("ouster_os1_64").pattern
    origin = np.array([0.3, -0.2, 1.8], np.float32)
    ours = make_backend(backend, scene).cast(origin, pattern.directions, 120)
    ref = make_backend(backend, Scene.from_meshes([concatenate(placed)])).cast(origin, pattern.directions, 120)
    np.testing.assert_array_equal(ours.hit, ref.hit)
    np.testing.assert_allclose(ours.range_m[ours.hit], ref.range_m[ref.hit], atol=1e-4)


def test_rays_along_shared_edges_at_yaw_90_all_reach_the_ground(backend):
    """The README's pose turned exactly 90°: a 1 m ground's cell edges run along the rays at azimuth −90°, whose
    world directions keep a ~1e-24 crosswise residue of cos 90°; every ray landing inside the ground hits it."""
    scene = Scene.from_meshes([ground_of_cells(20.0)])
    rays = RayBatch.from_pattern(load_sensor("ouster_os1_128").pattern,
                                 pose_matrix((0.0, -2.0, 1.9), (0.0, 0.0, np.radians(90.0))), 1000.0)
    hits = make_backend(backend, scene).cast_batch(rays)
    origin, directions = rays.world_rays()
    inside, outside = landing_on_ground(origin[0].astype(np.float64), directions.astype(np.float64), 10.0)
    assert inside.sum() > 30_000
    assert hits.hit[inside].all(), f"{int((~hits.hit[inside]).sum())} rays lost between the triangles"
    assert not hits.hit[outside].any()


def test_a_cast_whose_helper_thread_cannot_start_is_whole_and_returns(plane_mesh):
    """Embree's packets are claimed by the casting thread and pool threads as they come (parallel.helped): with
    every pool thread held, the caster alone casts every ray, the same hits, and returns without waiting for one."""
    import threading

    from lidar_fmu import parallel

    scene = Scene.from_meshes([plane_mesh])
    caster = make_backend("embree", scene)
    caster.threads = 2
    directions = load_sensor("ouster_os1_64").pattern.directions
    origin = np.array([0, 0, 1.0], np.float32)
    helped = caster.cast(origin, directions, 120)
    pool, gate = parallel._shared_pool(), threading.Event()
    held = [pool.submit(gate.wait, 60) for _ in range(pool._max_workers)]
    try:
        alone = caster.cast(origin, directions, 120)
        assert not any(future.done() for future in held)  # it did not wait for its helper to come after them
    finally:
        gate.set()
        for future in held:
            future.result()
    assert alone.hit.any() and not alone.hit.all()
    for name in ("hit", "range_m", "instance_id", "primitive_id", "u", "v", "normal"):
        np.testing.assert_array_equal(getattr(alone, name), getattr(helped, name))
