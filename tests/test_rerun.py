"""Rerun recordings: the .rrd loads back with every frame's points, the sensor poses, the meshes and their poses."""
import numpy as np
import pytest

from lidar_fmu import Lidar, Scene, box_mesh
from lidar_fmu.errors import LidarFmuError
from lidar_fmu.geometry.semantic import CAR, TERRAIN
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.io import RerunRecording
from lidar_fmu.pointcloud import ENVIRONMENT_ID_BASE, NO_OBJECT_ID
from lidar_fmu.world.scene_update import GROUND_PLANE_ID, SensorViewScene

pytest.importorskip("rerun")
RrdReader = pytest.importorskip("rerun.chunk").RrdReader

CAR_ID = 2**40 + 5
TIMES_S = (0.0, 0.1, 0.2)


def _read(path) -> dict:
    """entity path → {"static": {component: value}, frame: {component: value}} from the file's chunks."""
    out: dict = {}
    for chunk in RrdReader(path).stream():
        batch = chunk.to_record_batch()
        entity = out.setdefault(chunk.entity_path, {})
        columns = [name for name in batch.column_names if ":" in name or name == "object_id"]
        frames = batch.column("frame").to_pylist() if "frame" in batch.column_names else [None] * batch.num_rows
        times = (batch.column("time").cast("int64").to_pylist() if "time" in batch.column_names
                 else [None] * batch.num_rows)
        for row, (frame, time_ns) in enumerate(zip(frames, times)):
            slot = entity.setdefault("static" if chunk.is_static else frame, {})
            if time_ns is not None:
                slot["time_ns"] = time_ns
            for name in columns:
                value = batch.column(name)[row]
                if value.is_valid:
                    slot[name] = value
    return out


def _array(value, width=None):
    """One row's component as numpy: a list of fixed-size vectors becomes (N, width)."""
    import pyarrow as pa

    values = value.values
    while pa.types.is_fixed_size_list(values.type):
        values = values.flatten()
    arr = values.to_numpy(zero_copy_only=False)
    return arr.reshape(-1, width) if width else arr


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Three frames: the sensor drives forward, the car moves; meshes logged every frame."""
    scene = Scene()
    scene.add_instance(ENVIRONMENT_ID_BASE, box_mesh(100, 100, 0.2, name="ground"), pose_matrix((0, 0, -0.1)),
                       TERRAIN)
    car = box_mesh(4.5, 1.9, 1.5, name="car")
    scene.add_instance(CAR_ID, car, pose_matrix((8, -3, 0.75)), CAR)
    scene.add_instance(7, car, pose_matrix((-6, 3, 0.75)))
    lidar = Lidar(scene, "velodyne_vlp16", backend="embree")
    path = tmp_path_factory.mktemp("rerun") / "replay.rrd"
    clouds, car_poses = [], []
    with RerunRecording(path, recording_name="test replay") as rec:
        for k, t in enumerate(TIMES_S):
            scene.set_pose(CAR_ID, pose_matrix((8 + 2 * k, -3, 0.75), (0, 0, 0.1 * k)))
            car_poses.append(scene.pose_of(CAR_ID))
            cloud = lidar.scan(pose_matrix((1.0 * k, 0.5, 1.9), (0, 0, 0.2 * k)), timestamp_s=t)
            rec.log_meshes(scene, t, k)
            rec.log_meshes(scene, t, k)  # unchanged scene: nothing logged twice
            rec.log_frame(cloud, t, k)
            clouds.append(cloud)
    return path, clouds, car_poses


def test_recording_holds_every_frame_s_points(recorded):
    path, clouds, _ = recorded
    data = _read(path)
    points = data["/world/sensor/points"]
    assert sorted(k for k in points if k != "static") == [0, 1, 2]
    for k, cloud in enumerate(clouds):
        row = points[k]
        assert row["time_ns"] == round(TIMES_S[k] * 1e9)
        xyz = _array(row["Points3D:positions"], 3)
        assert len(xyz) == len(cloud) > 1000
        assert np.array_equal(xyz, cloud.xyz)  # sensor frame, float32, exact
        # the class of what each point hit, and its object id beside it
        classes = _array(row["Points3D:class_ids"])
        environment = cloud.points["object_id"] == NO_OBJECT_ID
        assert np.array_equal(classes, cloud.semantic) and np.all(classes[environment] == TERRAIN)
        assert np.any(classes == CAR)
        assert np.array_equal(_array(row["object_id"]), cloud.points["object_id"])
        colors = _array(row["Points3D:colors"])
        assert len(colors) == len(cloud) and len(np.unique(colors)) > 10  # a colour map over reflectivity
        pose = cloud.sensor_pose
        transform = data["/world/sensor"][k]
        assert np.allclose(_array(transform["Transform3D:translation"]), pose[:3, 3], atol=1e-6)
        assert np.allclose(_array(transform["Transform3D:mat3x3"]).reshape(3, 3).T, pose[:3, :3], atol=1e-6)


def test_recording_holds_class_labels_and_meshes(recorded):
    path, clouds, car_poses = recorded
    data = _read(path)
    context = str(data["/world"]["static"]["AnnotationContext:context"])
    assert all(name in context for name in ("unlabelled", "road", "lane_marking", "car", "pedestrian", "weather"))
    meshes = {entity: slots for entity, slots in data.items() if entity.startswith("/world/meshes/")}
    assert len(meshes) == 2  # ground and the car mesh shared by two instances
    car_entity = next(e for e in meshes if e.endswith("_car"))
    assert "Mesh3D:vertex_positions" in meshes[car_entity]["static"]
    assert "Mesh3D:vertex_normals" in meshes[car_entity]["static"]
    for k, pose in enumerate(car_poses):
        translations = _array(meshes[car_entity][k]["InstancePoses3D:translations"], 3)
        assert len(translations) == 2 and np.any(np.all(np.isclose(translations, pose[:3, 3]), axis=1))


def test_recording_needs_an_existing_folder(tmp_path):
    from lidar_fmu.io.rerun import check_rerun_output

    for make in (RerunRecording, check_rerun_output):
        with pytest.raises(LidarFmuError, match="does not exist"):
            make(tmp_path / "missing" / "x.rrd")
    assert not (tmp_path / "missing").exists()


def test_sensor_view_scene_matches_the_sensor_model(tmp_path):
    """The host-side mirror of the FMU's scene gives the model's sensor pose and instances."""
    from helpers.osi_views import sensor_view
    from lidar_fmu.cosim.sensor_model import OsiSensorModel

    view = sensor_view([(42, (10.0, 2.0, 0.75), (0, 0, 0.5), (4.0, 1.8, 1.5), "")],
                       mounting=((1.0, 0.0, 1.2), (0.0, 0.0, 0.1)))
    model = OsiSensorModel("velodyne_vlp16", backend="embree")
    assert model.step(view, 0.1).valid
    mirror = SensorViewScene({"disable_self_hits": True, "sensor": "velodyne_vlp16"})
    pose = mirror.update(view)
    assert np.allclose(pose, model.last_sensor_pose)
    # the object and, the trace having no lanes, the ground plane under the host
    assert sorted(mirror.scene.instance_ids.tolist()) == sorted(model.scene.instance_ids.tolist()) == [
        42, GROUND_PLANE_ID]
    assert np.allclose(mirror.scene.pose_of(GROUND_PLANE_ID), model.scene.pose_of(GROUND_PLANE_ID))
    assert np.allclose(mirror.scene.pose_of(42), model.scene.pose_of(42))
