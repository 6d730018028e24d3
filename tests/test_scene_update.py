"""OSI ground truth → scene instances (:class:`lidar_fmu.world.scene_update.SceneUpdater`).

Objects without a model share one unit box stretched by their instance pose,
so sizes that jitter every step add no meshes; meshes no instance uses leave
the scene and every per-mesh cache (backends, IR materials). An object that
cannot be placed is skipped with one warning naming its id; the frame goes on.
"""
import math

import numpy as np
import pytest
import trimesh

from helpers.osi_views import sensor_view
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.geometry.scene import Scene, box_mesh
from lidar_fmu.geometry.transforms import PoseError, pose_matrix
from lidar_fmu.osi.decode import MovingObjects, ObjectState, SensorViewFrame
from lidar_fmu.physics.returns import Materials
from lidar_fmu.raycast import cuda_available
from lidar_fmu.scan.lidar import Lidar
from lidar_fmu.world.scene_update import UNUSED_MESHES_KEPT, SceneUpdater

#: a small pattern all round (360 × 16 rays), for speed
SPEC = {"horizontal_fov_deg": [-180, 180], "horizontal_resolution_deg": 1.0, "vertical_fov_deg": [-15, 15],
        "channels": 16, "max_range_m": 100}
SENSOR_POSE = pose_matrix((0.0, 0.0, 1.0))
CPU_BACKENDS = ["embree", "embreex"]
needs_cuda = pytest.mark.skipif(not cuda_available(),
                                reason="no GPU and the CUDA simulator is off (NUMBA_ENABLE_CUDASIM=1 runs it)")


def frame(objects, time_s=0.0, host=None) -> SensorViewFrame:
    """objects: (id, position, (roll, pitch, yaw), (length, width, height)[, model_reference])."""
    states = [ObjectState(o[0], tuple(o[1]), tuple(o[2]), tuple(o[3]), o[4] if len(o) > 4 else "") for o in objects]
    return SensorViewFrame(timestamp_s=time_s, sensor_id=0, host_vehicle_id=host, moving=MovingObjects.of_states(states))


def mesh_cache(backend) -> dict:
    """The backend's per-mesh cache (keyed by id(mesh))."""
    return getattr(backend, {"embree": "_meshes", "embreex": "_mesh_scenes", "cuda": "_bvhs"}[backend.name])


def crowd(rng, count=50):
    """``count`` pedestrians on a ring 8–30 m out, sizes jittering by up to 2 cm (as tracked sizes do)."""
    angle = np.linspace(0, 2 * np.pi, count, endpoint=False)
    radius = np.linspace(8.0, 30.0, count)
    sizes = np.array([0.6, 0.6, 1.8]) + rng.uniform(-0.02, 0.02, (count, 3))
    return [(100 + i, (radius[i] * math.cos(a), radius[i] * math.sin(a), 0.9), (0.0, 0.0, a), tuple(sizes[i]))
            for i, a in enumerate(angle)]


# -- caches stay bounded ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_jittering_box_sizes_keep_every_mesh_cache_bounded(backend):
    scene = Scene()
    updater = SceneUpdater(scene)
    lidar = Lidar(scene, SPEC, backend=backend)
    rng = np.random.default_rng(7)
    for step in range(1000):
        objects = crowd(rng)
        updater.apply(frame(objects, 0.01 * step))
        cloud = lidar.scan(SENSOR_POSE, 0.01 * step)
        assert len(scene) == 50
        assert len(scene.meshes) <= 2 and len(updater._meshes) <= 2
        assert len(mesh_cache(lidar.backend)) <= 2 and len(lidar.materials._mesh_ids) <= 2
    assert scene.meshes == [updater.unit_box]
    assert len(cloud) > 100 and set(np.unique(cloud.points["object_id"])) <= {o[0] for o in objects}
    for object_id, _, _, size in objects:  # the pose carries the size: its axes are length, width, height long
        np.testing.assert_allclose(np.linalg.norm(scene.pose_of(object_id)[:3, :3], axis=0), size, rtol=1e-12)


def _cube_files(folder, count):
    """``count`` STL cubes of sides 1.0, 1.05, … m; (file name, side)."""
    files = []
    for k in range(count):
        side = 1.0 + 0.05 * k
        name = f"cube_{k:02d}.stl"
        trimesh.creation.box(extents=(side, side, side)).export(folder / name)
        files.append((name, side))
    return files


def _cycle_model_references(tmp_path, backend_name):
    """One object in front of the sensor takes the next of 30 model files every step (twice round)."""
    files = _cube_files(tmp_path, 30)
    scene = Scene()
    updater = SceneUpdater(scene, str(tmp_path))
    lidar = Lidar(scene, SPEC, backend=backend_name)
    ray = np.array([[1.0, 0.0, 0.0]], np.float32)
    for step in range(60):
        name, side = files[step % len(files)]
        updater.apply(frame([(1, (10.0, 0.0, 0.0), (0, 0, 0), (1, 1, 1), name),
                             (2, (0.0, 10.0, 0.0), (0, 0, 0), (1, 1, 1.5))], 0.1 * step))
        lidar.return_model()  # the IR materials follow the scene (as a scan's do)
        # the new geometry is cast, never a freed mesh's whose id Python gave to the new one
        hits = lidar.backend.cast(np.zeros(3), ray)
        assert hits.instance_id[0] == 1 and hits.range_m[0] == pytest.approx(10.0 - side / 2, abs=1e-4)
        assert len(scene.meshes) == 2  # this step's cube and the unit box
        assert len(updater._meshes) <= 1 + UNUSED_MESHES_KEPT
        assert len(mesh_cache(lidar.backend)) == 2
        assert len(lidar.materials._mesh_ids) <= 2 + Materials.KEEP_LEFT_MESHES


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_cycling_model_references_keeps_caches_bounded_and_geometry_right(tmp_path, backend):
    _cycle_model_references(tmp_path, backend)


@needs_cuda
def test_cycling_model_references_on_cuda(tmp_path):
    _cycle_model_references(tmp_path, "cuda")


def test_a_mesh_leaves_the_scene_with_its_last_instance():
    scene = Scene()
    a, b, c = box_mesh(1, 1, 1, name="a"), box_mesh(2, 2, 2, name="b"), box_mesh(3, 3, 3, name="c")
    scene.add_instance(1, a)
    scene.add_instance(2, b)
    scene.add_instance(3, c)
    scene.add_instance(4, b)
    revision = scene.revision
    scene.remove_instance(2)
    assert scene.meshes == [a, b, c]  # b still has instance 4
    scene.remove_instance(1)
    assert scene.revision > revision and {id(m) for m in scene.meshes} == {id(b), id(c)}
    assert scene.mesh_of(3) is c and scene.mesh_of(4) is b  # indices follow the mesh moved into the hole
    scene.add_instance(3, b)  # c's last instance takes another mesh
    assert scene.meshes == [b] and scene.mesh_of(3) is b and scene.mesh_of(4) is b
    assert list(scene.instance_mesh_index) == [0, 0]
    scene.remove_instance(3)
    scene.remove_instance(4)
    assert scene.meshes == [] and len(scene) == 0
    scene.add_instance(5, a)
    assert scene.meshes == [a] and scene.mesh_of(5) is a


def test_instance_poses_may_scale_small_but_not_collapse():
    scene = Scene()
    pose = pose_matrix((3, 0, 0), (0.1, 0.2, 0.3))
    pose[:3, :3] *= 5e-5  # determinant 1.25e-13: small, not singular
    scene.add_instance(1, box_mesh(1, 1, 1), pose)
    np.testing.assert_array_equal(scene.pose_of(1), pose)
    flat = pose_matrix((3, 0, 0))
    flat[:3, 2] = 0.0
    with pytest.raises(PoseError, match="singular"):
        scene.add_instance(2, box_mesh(1, 1, 1), flat)
    sheared = np.eye(4)
    sheared[:3, 1] = sheared[:3, 0]  # two parallel axes
    with pytest.raises(PoseError, match="singular"):
        scene.set_pose(1, sheared)


# -- a box object is the box it was ------------------------------------------------------------------------------
BOXES = [(10, (12.0, 0.5, 0.75), (0.0, 0.0, 0.3), (4.2, 1.8, 1.5)),
         (11, (-8.0, 6.0, 1.0), (0.05, -0.1, 2.0), (0.6, 0.5, 1.8)),
         (12, (3.0, -15.0, 2.0), (0.3, 0.2, -1.0), (10.0, 2.5, 4.0)),
         (13, (-20.0, -9.0, 0.5), (0.0, 0.0, 0.0), (0.05, 3.0, 1.0))]


def _box_object_clouds(backend, spec=SPEC):
    scene = Scene()
    SceneUpdater(scene).apply(frame(BOXES))
    reference = Scene()
    for object_id, position, rpy, dims in BOXES:
        reference.add_instance(object_id, box_mesh(*dims, material="osi_bounding_box"), pose_matrix(position, rpy))
    return (Lidar(scene, spec, backend=backend).scan(SENSOR_POSE),
            Lidar(reference, spec, backend=backend).scan(SENSOR_POSE))


def _same_returns(got, ref, least=200):
    assert len(got) == len(ref) > least
    np.testing.assert_array_equal(got.ray_index, ref.ray_index)
    np.testing.assert_array_equal(got.points["object_id"], ref.points["object_id"])
    assert set(np.unique(got.points["object_id"]).tolist()) == {o[0] for o in BOXES}
    for field in ("x", "y", "z", "range", "normal_x", "normal_y", "normal_z"):
        np.testing.assert_allclose(got.points[field], ref.points[field], atol=1e-4, err_msg=field)
    np.testing.assert_allclose(got.points["reflectivity"], ref.points["reflectivity"], atol=1e-4)
    normal = np.stack([got.points[f"normal_{a}"] for a in "xyz"], axis=1)
    xyz = np.stack([got.points[a] for a in "xyz"], axis=1)
    np.testing.assert_allclose(np.linalg.norm(normal, axis=1), 1.0, atol=1e-5)  # unit after the scaling
    assert np.all(np.einsum("ij,ij->i", normal, xyz) < 0)  # facing the sensor


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_box_objects_return_what_an_explicit_box_returns(backend):
    _same_returns(*_box_object_clouds(backend))


@needs_cuda
def test_box_objects_return_what_an_explicit_box_returns_on_cuda():
    # fewer rays (2° × 8 channels): the simulator casts about a thousand rays a second
    _same_returns(*_box_object_clouds("cuda", {**SPEC, "horizontal_resolution_deg": 2.0, "channels": 8}), least=50)


# -- one bad object never spoils a frame ----------------------------------------------------------------------
NAN, INF = float("nan"), float("inf")
GOOD = (10, (12.0, 0.0, 0.75), (0.0, 0.0, 0.0), (4.0, 1.8, 1.5))
BAD = {  # id → (object, what its one warning says)
    11: ((11, (15.0, 5.0, 1.0), (0, 0, 0), (1e-5, 1.0, 1.0)), "below 5e-05 m"),
    12: ((12, (15.0, -5.0, 1.0), (0, 0, 0), (3e-5, 3e-5, 3e-5)), "below 5e-05 m"),
    13: ((13, (-15.0, 5.0, 1.0), (0, 0, 0), (1e5, 1.0, 1.0)), "above 10000 m"),
    14: ((14, (-15.0, -5.0, 1.0), (0, 0, 0), (1.0, 1e30, 1.0)), "above 10000 m"),
    15: ((15, (1e8, 0.0, 1.0), (0, 0, 0), (1.0, 1.0, 1.0)), "beyond ±1e+07 m"),
    16: ((16, (0.0, 20.0, 1.0), (0, 0, 0), (0.0, 1.0, 1.0)), "no positive dimension"),
    17: ((17, (NAN, 20.0, 1.0), (0, 0, 0), (1.0, 1.0, 1.0)), "position is not finite"),
    18: ((18, (0.0, -20.0, 1.0), (0, INF, 0), (1.0, 1.0, 1.0)), "orientation is not finite"),
    19: ((19, (20.0, 20.0, 1.0), (0, 0, 0), (1.0, NAN, 1.0)), "dimension is not finite"),
}
#: what a SensorView can carry: the decoder refuses NaN and infinity in any object (the whole frame), before this
IN_BYTES = [11, 12, 13, 14, 15, 16]


def _one_warning_each(warnings, ids):
    for object_id in ids:
        mine = [w for w in warnings if w.startswith(f"object {object_id} ") or w.startswith(f"object {object_id}:")]
        assert len(mine) == 1, (object_id, warnings)
        assert BAD[object_id][1] in mine[0] and "ignored" in mine[0]
    assert len(warnings) == len(ids), warnings


def test_unusable_objects_are_skipped_with_one_warning_each():
    warnings = []
    scene = Scene()
    updater = SceneUpdater(scene, warn=warnings.append)
    lidar = Lidar(scene, SPEC)
    for step in range(3):
        updater.apply(frame([GOOD] + [obj for obj, _ in BAD.values()], 0.1 * step))
        cloud = lidar.scan(SENSOR_POSE)
        assert list(scene.instance_ids) == [GOOD[0]]
        assert len(cloud) > 20 and set(cloud.points["object_id"].tolist()) == {GOOD[0]}
    _one_warning_each(warnings, list(BAD))
    # an object that becomes usable comes in; one that becomes unusable leaves (its warning given once before)
    updater.apply(frame([GOOD, (11, (15.0, 5.0, 1.0), (0, 0, 0), (0.5, 1.0, 1.0))]))
    assert sorted(scene.instance_ids.tolist()) == [10, 11]
    updater.apply(frame([GOOD, BAD[11][0]]))
    assert list(scene.instance_ids) == [GOOD[0]] and len(warnings) == len(BAD)


def test_unusable_objects_in_a_sensor_view_keep_the_frame_valid():
    warnings = []
    model = OsiSensorModel(sensor=SPEC, warn=warnings.append, environment="none")  # the objects alone
    reference = None
    for step in range(1, 4):
        objects = [GOOD + ("",)] + [BAD[i][0] + ("",) for i in IN_BYTES]
        result = model.step(sensor_view(objects, 0.1 * step), 0.1 * step)
        assert result.valid and result.message == "" and result.count > 20
        assert set(model.last_cloud.points["object_id"].tolist()) == {GOOD[0]}
        if reference is None:
            scene = Scene()
            scene.add_instance(GOOD[0], box_mesh(*GOOD[3], material="osi_bounding_box"), pose_matrix(*GOOD[1:3]))
            reference = Lidar(scene, SPEC).scan(model.last_sensor_pose)
        assert result.count == len(reference)
    assert not any("Traceback" in w for w in warnings)
    _one_warning_each(warnings, IN_BYTES)


def test_a_moving_object_whose_dimension_is_not_finite_costs_only_that_object():
    """NaN or ∞ in a moving object's size (negative: above) leaves that object out with one line naming it; the
    rest of the SensorView is used, every step."""
    warnings = []
    model = OsiSensorModel(sensor=SPEC, warn=warnings.append, environment="none")
    sizes = {21: (NAN, 1.0, 1.0), 22: (1.0, INF, 1.0), 23: (1.0, 1.0, -INF), 24: (-1.0, 1.0, 1.0)}
    for step in range(1, 3):
        objects = [GOOD + ("",)] + [(i, (15.0, 3.0 * (i - 22), 1.0), (0, 0, 0), size, "") for i, size in sizes.items()]
        result = model.step(sensor_view(objects, 0.1 * step), 0.1 * step)
        assert result.valid and result.count > 20
        assert set(model.last_cloud.points["object_id"].tolist()) == {GOOD[0]}
    for object_id in sizes:
        mine = [w for w in warnings if f"object {object_id} " in w]
        assert len(mine) == 1, warnings
        assert "not finite" in mine[0] or "NaN or infinite" in mine[0] or "no positive dimension" in mine[0]
    assert len(warnings) == len(sizes)


# -- duplicate ids ---------------------------------------------------------------------------------------------
def test_duplicate_ids_use_the_first_occurrence_s_mesh_and_pose(tmp_path):
    (name, side), = _cube_files(tmp_path, 1)
    warnings = []
    scene = Scene()
    updater = SceneUpdater(scene, str(tmp_path), warn=warnings.append)
    lidar = Lidar(scene, SPEC)
    for step in range(3):
        first = (5, (10.0, 0.0, 1.0), (0.0, 0.0, 0.1 * step), (2.0, 2.0, 2.0))
        later = (5, (0.0, 10.0 + step, 1.0), (0.0, 0.0, 0.0), (4.0, 4.0, 4.0), name)
        updater.apply(frame([first, later]))
        expected = pose_matrix(first[1], first[2]) @ np.diag([2.0, 2.0, 2.0, 1.0])
        np.testing.assert_allclose(scene.pose_of(5), expected, atol=1e-12)
        assert scene.mesh_of(5) is updater.unit_box
        cloud = lidar.scan(SENSOR_POSE)
        xyz = np.stack([cloud.points[a] for a in "xyz"], axis=1)
        assert len(cloud) > 20 and np.all(xyz[:, 0] > 8.5)  # only where the first one stands
    # the other way round: the model of the first, at the first's pose
    updater.apply(frame([(5, (0.0, -10.0, 1.0), (0, 0, 0), (1, 1, 1), name), (5, (10.0, 0.0, 1.0), (0, 0, 0), (2, 2, 2))]))
    assert scene.mesh_of(5).name == name
    np.testing.assert_allclose(scene.pose_of(5), pose_matrix((0.0, -10.0, 1.0)), atol=1e-12)
    assert warnings == ["object id 5 appears more than once in one SensorView; the first one is used"]
    # an unusable first occurrence is not replaced by a later one: the object is left out
    updater.apply(frame([BAD[11][0][:1] + ((10.0, 0.0, 1.0),) + BAD[11][0][2:],
                         (11, (10.0, 0.0, 1.0), (0, 0, 0), (2.0, 2.0, 2.0))]))
    assert 11 not in scene and len(warnings) == 3
    assert any(w.startswith("object 11 has no usable model") for w in warnings)
    assert "object id 11 appears more than once in one SensorView; the first one is used" in warnings


@pytest.mark.parametrize("name, up_axis, long_axis", [
    ("car.glb", "", 0),  # glTF is Y-up with its front toward +Z: stood up, the front faces our +x
    ("car.glb", "z", 2),  # told Z-up: taken as it is, the long side stays on z
    ("car.obj", "", 2),  # other formats are Z-up unless told
    ("car.obj", "y", 0),
])
def test_model_references_stand_up_by_their_up_axis(tmp_path, name, up_axis, long_axis):
    """A glTF car authored Y-up (4 m along its +Z front, 1.5 m tall along +Y) stands on its wheels in the scene."""
    box = trimesh.creation.box(extents=(1.8, 1.5, 4.0))  # x: width, y: height, z: length (glTF's car axes)
    box.export(tmp_path / name)
    scene = Scene()
    updater = SceneUpdater(scene, assets_dir=str(tmp_path), up_axis=up_axis)
    updater.apply(frame([(7, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (4.0, 1.8, 1.5), name)]))
    extent = np.ptp(scene.mesh_of(7).vertices, axis=0)
    assert extent[long_axis] == pytest.approx(4.0)
    if long_axis == 0:
        assert extent == pytest.approx((4.0, 1.8, 1.5))


def test_a_bad_up_axis_is_refused():
    with pytest.raises(PoseError, match="up_axis"):
        SceneUpdater(Scene(), up_axis="x")


# -- the static part: cut out of the view, compared by its bytes -------------------------------------------------
def with_stationary(view: bytes, count: int, moved: int | None = None, lanes: bool = False) -> bytes:
    """``view`` with ``count`` stationary 1 m boxes on a 3 m grid (ids 1000…), box ``moved`` 0.5 m along x, and
    with ``lanes`` one lane boundary and the weather."""
    from osi3.osi_sensorview_pb2 import SensorView

    message = SensorView.FromString(view)
    gt = message.global_ground_truth
    for k in range(count):
        o = gt.stationary_object.add()
        o.id.value = 1000 + k
        o.base.position.x, o.base.position.y, o.base.position.z = 10.0 + 3.0 * (k % 50) + 0.5 * (k == moved), \
            3.0 * (k // 50) - 60.0, 0.5
        o.base.dimension.length = o.base.dimension.width = o.base.dimension.height = 1.0
    if lanes:
        line = gt.lane_boundary.add()
        line.id.value = 7
        for x in (0.0, 50.0):
            point = line.boundary_line.add()
            point.position.x, point.position.y = x, 5.0
        gt.environmental_conditions.fog = gt.environmental_conditions.FOG_THICK
    return message.SerializeToString()


def test_the_static_part_is_cut_out_and_the_rest_parses_as_the_whole_view():
    from osi3.osi_groundtruth_pb2 import GroundTruth
    from osi3.osi_sensorview_pb2 import SensorView

    from lidar_fmu.osi.decode import decode_sensor_view, static_parts

    view = with_stationary(sensor_view([(5, (8.0, 0.0, 0.75), (0, 0, 0), (4.0, 2.0, 1.5), "")]), 30, lanes=True)
    road, stationary, rest = static_parts(view)
    whole = SensorView.FromString(view)
    assert GroundTruth.FromString(stationary).stationary_object == whole.global_ground_truth.stationary_object
    assert GroundTruth.FromString(road).lane_boundary == whole.global_ground_truth.lane_boundary
    del whole.global_ground_truth.stationary_object[:], whole.global_ground_truth.lane_boundary[:]
    assert SensorView.FromString(rest) == whole and len(rest) < len(view) - len(road) - len(stationary) + 8
    frame = decode_sensor_view(view)
    assert [o.id for o in frame.objects] == [1, 5] and frame.weather is not None
    assert (frame.road_part, frame.stationary_part) == (road, stationary)
    plain = sensor_view([])
    assert static_parts(plain) == (b"", b"", plain)


def test_one_changed_stationary_object_of_2000_is_noticed():
    updater = SceneUpdater(Scene())
    updater.apply(_decoded(with_stationary(sensor_view([]), 2000)))
    revision = updater.scene.revision
    assert len(updater.scene) == 2001 and updater.scene.pose_of(1234)[0, 3] == 10.0 + 3.0 * 34
    updater.apply(_decoded(with_stationary(sensor_view([], time_s=0.2), 2000)))  # the same objects: kept
    assert updater.scene.revision == revision
    updater.apply(_decoded(with_stationary(sensor_view([], time_s=0.3), 2000, moved=234)))
    assert updater.scene.pose_of(1234)[0, 3] == 10.5 + 3.0 * 34 and updater.scene.pose_of(1233)[0, 3] == 10.0 + 99.0


def test_a_malformed_stationary_object_rejects_every_view_that_sends_it():
    """The view is parsed without its static part: stationary objects that do not parse are still refused, in
    one line, and again in the next step that sends the same bytes (never taken as the part already placed)."""
    bad = b"\x22\x03\x0a\x05\x08"  # stationary_object { id: 5 bytes promised, 1 given }
    view = sensor_view([]) + b"\x3a" + bytes([len(bad)]) + bad  # a second global_ground_truth field merges in
    model = OsiSensorModel(sensor=SPEC)
    for time_s in (0.1, 0.2):
        result = model.step(view, time_s)
        assert not result.valid and "stationary objects" in result.message and "\n" not in result.message


def _decoded(view: bytes) -> SensorViewFrame:
    from lidar_fmu.osi.decode import decode_sensor_view

    return decode_sensor_view(view)


# -- many moving objects, checked all at once ---------------------------------------------------------------------
def test_a_thousand_moving_objects_are_posed_as_each_one_alone():
    """1,000 road users of mixed classes, with a few unusable, duplicate and out-of-range ones among them, placed
    in one update: each instance's mesh, pose and class equal those of the object placed on its own."""
    from lidar_fmu.geometry.transforms import pose_matrices
    from lidar_fmu.pointcloud import ENVIRONMENT_ID_BASE
    from lidar_fmu.world.road_users import paint_of, paints_of

    rng = np.random.default_rng(43)
    classes = ["car", "pedestrian", "bicycle", "heavy_truck", "", "bus", "animal"]
    count = 1000
    positions = rng.uniform(-500, 500, (count, 3))
    orientations = rng.uniform(-np.pi, np.pi, (count, 3))
    dimensions = rng.uniform(0.5, 12.0, (count, 3))
    states = [ObjectState(10 + k, tuple(positions[k]), tuple(orientations[k]), tuple(dimensions[k]),
                          object_class=classes[k % len(classes)]) for k in range(count)]
    states[5].position_m = (float("nan"), 0.0, 0.0)  # an unusable pose
    states[6].dimension_m = (1.0, 0.0, 1.0)  # an unusable box
    states[7].id, states[8].id = 2**62, 2**64 - 1  # beyond the supported range (the second: OSI's largest id)
    states.append(ObjectState(12, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)))  # a duplicate of id 12
    warnings = []
    updater = SceneUpdater(Scene(), warn=warnings.append)
    updater.apply(SensorViewFrame(timestamp_s=0.0, sensor_id=0, host_vehicle_id=11,
                                   moving=MovingObjects.of_states(states)))
    scene = updater.scene
    kept = [s for k, s in enumerate(states[:count]) if k not in (1, 5, 6, 7, 8)]  # 11 is the host
    objects = [int(i) for i in scene.instance_ids if i < ENVIRONMENT_ID_BASE]  # (not the ground plane)
    assert sorted(objects) == sorted(s.id for s in kept)
    assert len(warnings) == 5 and all(any(str(i) in w for w in warnings) for i in (15, 16, 2**62, 2**64 - 1, 12))
    for state in kept:
        alone = SceneUpdater(Scene())
        alone.apply(SensorViewFrame(timestamp_s=0.0, sensor_id=0, host_vehicle_id=None,
                                    moving=MovingObjects.of_states([state])))
        index = scene.indices_of([state.id])[0]
        mesh, expected_mesh = scene.meshes[scene.instance_mesh_index[index]], alone.scene.meshes[0]
        # the class meshes are shared by all updaters; the unit box is each updater's own
        assert mesh is expected_mesh if expected_mesh is not alone.unit_box else mesh is updater.unit_box
        np.testing.assert_array_equal(scene.pose_of(state.id), alone.scene.pose_of(state.id))
        expected = pose_matrices([state.position_m], [state.orientation_rad])[0]
        expected[:3, :3] *= np.asarray(state.dimension_m)[None, :]
        np.testing.assert_array_equal(scene.pose_of(state.id), expected)
    ids = np.concatenate([np.array([0, 1, 2**64 - 1], np.uint64), rng.integers(0, 2**63, 2000).astype(np.uint64)])
    assert paints_of(ids) == [paint_of(int(i)) for i in ids]
