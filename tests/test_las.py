"""LAS/LAZ output: laspy reads back positions within the millimetre scale and every field."""
import dataclasses

import laspy
import numpy as np
import pytest

from lidar_fmu import POINT_DTYPE, Lidar, Scene, box_mesh
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.io import PointCloudFileError, write_las, write_point_cloud
from lidar_fmu.io.las import LAS_SCALE_M
from lidar_fmu.pointcloud import ENVIRONMENT_ID_BASE, NO_OBJECT_ID

CAR_ID = 2**40 + 5
EXTRA = ("range", "reflectivity", "normal_x", "normal_y", "normal_z", "beam_id", "object_id", "saturated", "ring",
         "semantic")


@pytest.fixture(scope="module")
def cloud():
    scene = Scene()
    scene.add_instance(ENVIRONMENT_ID_BASE, box_mesh(100, 100, 0.2), pose_matrix((0, 0, -1.9)))
    scene.add_instance(CAR_ID, box_mesh(4.5, 1.9, 1.5), pose_matrix((8, -3, -1.05), (0, 0, 0.3)))
    lidar = Lidar(scene, "velodyne_vlp16", backend="embree")
    cloud = lidar.scan(pose_matrix((1.0, -0.5, 0.2), (0.0, 0.0, 0.4)), timestamp_s=1.25)
    assert {int(NO_OBJECT_ID), CAR_ID} <= set(np.unique(cloud.points["object_id"]).tolist())
    return cloud


def _xyz(las):
    return np.stack([np.asarray(las.x), np.asarray(las.y), np.asarray(las.z)], axis=1)


def _check_positions(las, expected):
    # quantized to the 1 mm scale: at most half a unit off, plus float rounding
    assert np.abs(_xyz(las) - expected).max() <= LAS_SCALE_M / 2 + 1e-9


@pytest.mark.parametrize("ext", [".las", ".laz"])
def test_las_round_trip(cloud, tmp_path, ext):
    if ext == ".laz" and not laspy.LazBackend.detect_available():
        pytest.skip("no LAZ backend (pip install 'laspy[lazrs]')")
    path = tmp_path / f"scan{ext}"
    write_las(path, cloud)
    las = laspy.read(path)
    header = las.header
    assert (header.version.major, header.version.minor, header.point_format.id) == (1, 4, 6)
    assert header.are_points_compressed == (ext == ".laz")
    assert np.allclose(header.scales, LAS_SCALE_M) and np.array_equal(header.offsets, [0, 0, 0])
    assert len(las.points) == header.point_count == len(cloud)
    _check_positions(las, cloud.xyz.astype(np.float64))
    # the OSI intensity (0–100 %) in LAS's 16 bits
    expected = np.rint(np.clip(cloud.intensity_percent, 0, 100) * 655.35).astype(np.uint16)
    assert np.array_equal(np.asarray(las.intensity), expected) and expected.max() > 1000
    assert np.all(np.asarray(las.return_number) == 1) and np.all(np.asarray(las.number_of_returns) == 1)
    # the firing time of each return's ray after the frame's first firing (unknown here: the timestamp)
    assert np.allclose(np.asarray(las.gps_time), 1.25 + cloud.time_offset_s.astype(np.float64), atol=1e-9)
    assert np.all(np.asarray(las.classification) == 0)  # unlabelled meshes: ASPRS "never classified"
    assert tuple(header.point_format.extra_dimension_names) == EXTRA
    records = cloud.records()
    for name in EXTRA:
        assert np.asarray(las[name]).dtype == records.dtype[name], name
        assert np.array_equal(np.asarray(las[name]), records[name]), name  # object_id: all 64 bits


def test_laz_holds_the_same_points_in_fewer_bytes(cloud, tmp_path):
    if not laspy.LazBackend.detect_available():
        pytest.skip("no LAZ backend")
    write_point_cloud(tmp_path / "scan.las", cloud)
    write_point_cloud(tmp_path / "scan.laz", cloud)
    las, laz = laspy.read(tmp_path / "scan.las"), laspy.read(tmp_path / "scan.laz")
    assert np.array_equal(np.asarray(las.points.array), np.asarray(laz.points.array))
    assert (tmp_path / "scan.laz").stat().st_size < (tmp_path / "scan.las").stat().st_size / 2


def test_las_uses_echo_and_time_fields(cloud, tmp_path):
    """echo (0 = first return) → return number; returns sharing a ray → number of returns; time → GPS time."""
    first = cloud.points.copy()
    first["time"] = np.linspace(0.0, 0.05, len(cloud), dtype=np.float32)
    second = first[:10].copy()  # ten rays with a second return behind the first
    second["echo"], second["x"] = 1, second["x"] + 2.0
    points = np.concatenate([first, second])
    ray_index = np.concatenate([cloud.ray_index, cloud.ray_index[:10]])
    two = dataclasses.replace(cloud, points=points, ray_index=ray_index,
                              intensity_percent=np.concatenate([cloud.intensity_percent, cloud.intensity_percent[:10]]),
                              semantic=np.concatenate([cloud.semantic, cloud.semantic[:10]]))
    write_las(tmp_path / "echo.las", two)
    las = laspy.read(tmp_path / "echo.las")
    assert np.array_equal(np.asarray(las.return_number), points["echo"] + 1)
    expected = np.ones(len(points), np.uint8)
    expected[:10] = expected[-10:] = 2
    assert np.array_equal(np.asarray(las.number_of_returns), expected)
    assert np.allclose(np.asarray(las.gps_time), 1.25 + points["time"].astype(np.float64), atol=1e-9)
    assert "echo" not in las.point_format.extra_dimension_names and "time" not in las.point_format.extra_dimension_names
    _check_positions(las, np.stack([points["x"], points["y"], points["z"]], axis=1).astype(np.float64))


def test_las_of_points_without_rays(cloud, tmp_path):
    """A structured array (or a cloud decoded from OSI): one return per ray, GPS time from the points' time field,
    else the frame timestamp."""
    write_las(tmp_path / "plain.las", cloud.points)
    las = laspy.read(tmp_path / "plain.las")
    assert len(las.points) == len(cloud) and np.ptp(cloud.points["time"]) > 0.04  # a VLP-16 frame: 50 ms
    assert np.allclose(np.asarray(las.gps_time), cloud.points["time"].astype(np.float64), atol=1e-9)
    no_time = np.zeros(len(cloud), [(n, cloud.points.dtype[n]) for n in POINT_DTYPE.names if n != "time"])
    for name in no_time.dtype.names:
        no_time[name] = cloud.points[name]
    osi_like = dataclasses.replace(cloud, points=no_time, ray_index=np.full(len(cloud), -1, np.int32), pattern=None,
                                   rows=0, columns=0)
    write_las(tmp_path / "osi.las", osi_like)
    assert np.all(np.asarray(laspy.read(tmp_path / "osi.las").gps_time) == 1.25)


def test_las_world_frame(cloud, tmp_path):
    write_las(tmp_path / "world.las", cloud, frame="world")
    las = laspy.read(tmp_path / "world.las")
    pose = cloud.sensor_pose
    world = cloud.xyz.astype(np.float64) @ pose[:3, :3].T + pose[:3, 3]
    _check_positions(las, world)
    offsets = np.asarray(las.header.offsets)
    assert np.array_equal(offsets, np.floor(world.min(axis=0)))


def test_las_empty_and_bad_input(tmp_path):
    write_las(tmp_path / "empty.las", np.empty(0, POINT_DTYPE))
    assert len(laspy.read(tmp_path / "empty.las").points) == 0
    bad = np.zeros(3, POINT_DTYPE)
    bad["echo"] = 15
    with pytest.raises(PointCloudFileError, match="echo must be 0–14"):
        write_las(tmp_path / "bad.las", bad)
    with pytest.raises(PointCloudFileError, match="unknown LAS frame"):
        write_las(tmp_path / "bad.las", bad, frame="vehicle")
