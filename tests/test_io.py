"""Point-cloud files and previews: our readers and third-party readers get back what we wrote."""
import dataclasses
import os

import numpy as np
import pytest

from lidar_fmu import POINT_DTYPE, Lidar, Scene, box_mesh
from lidar_fmu.errors import LidarFmuError
from lidar_fmu.io import (
    bev_image,
    read_pcd,
    read_ptx,
    write_pcd,
    write_ply,
    write_point_cloud,
    write_preview,
    write_ptx,
)
from lidar_fmu.io.pcd import pcd_bytes
from lidar_fmu.io.ptx import row_elevation_rad
from lidar_fmu.pointcloud import ENVIRONMENT_ID_BASE, NO_OBJECT_ID, NoRayPatternError

CAR_ID = 2**40 + 5  # needs all 64 bits of object_id to survive


def _pose(x, y, z, yaw=0.0):
    c, s = np.cos(yaw), np.sin(yaw)
    pose = np.eye(4)
    pose[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    pose[:3, 3] = (x, y, z)
    return pose


@pytest.fixture(scope="module")
def scene():
    """Ground (environment), a wall (environment) and a car-sized box (object); open sky, so rays miss."""
    scene = Scene()
    scene.add_instance(ENVIRONMENT_ID_BASE, box_mesh(100, 100, 0.2, name="ground"), _pose(0, 0, -1.9))
    scene.add_instance(ENVIRONMENT_ID_BASE + 1, box_mesh(40, 1, 5, name="wall"), _pose(0, 12, 0.5))
    scene.add_instance(CAR_ID, box_mesh(4.5, 1.9, 1.5), _pose(8, -3, -1.05, 0.3))
    scene.add_instance(7, box_mesh(0.6, 0.6, 1.8), _pose(-4, 2, -1.0))
    return scene


@pytest.fixture(scope="module")
def lidar(scene):
    return Lidar(scene, "velodyne_vlp16", backend="embree")


@pytest.fixture(scope="module")
def cloud(lidar):
    # a moved and turned sensor, so the PTX header carries a non-trivial pose
    cloud = lidar.scan(_pose(1.0, -0.5, 0.2, 0.4), timestamp_s=1.25)
    # the sensor pose moves the scene relative to it; the fixture must still have all kinds of returns
    ids = set(np.unique(cloud.points["object_id"]).tolist())
    assert {int(NO_OBJECT_ID), CAR_ID, 7} <= ids
    assert 0 < len(cloud) < cloud.rows * cloud.columns
    return cloud


def _header_lines(path):
    with open(path, "rb") as f:
        raw = f.read()
    head, _, _ = raw.partition(b"DATA binary\n")
    return head.decode().splitlines(), raw


# -- PCD -------------------------------------------------------------------------------------------
def test_pcd_round_trip_is_exact(cloud, tmp_path):
    path = tmp_path / "scan.pcd"
    write_pcd(path, cloud)
    lines, raw = _header_lines(path)
    header = {line.split()[0]: line.split()[1:] for line in lines if not line.startswith("#")}
    assert header["VERSION"] == [".7"]
    # the point record, then the OSI intensity and the ring as ROS tools read them (x y z intensity ring time), then
    # the semantic class
    assert header["FIELDS"] == [*POINT_DTYPE.names, "intensity", "ring", "semantic"]
    assert header["SIZE"] == ["4"] * 9 + ["8", "1", "4", "1", "4", "2", "1"]
    assert header["TYPE"] == ["F"] * 8 + ["U", "U", "U", "F", "U", "F", "U", "U"]
    assert header["COUNT"] == ["1"] * 16
    assert header["WIDTH"] == [str(len(cloud))] and header["HEIGHT"] == ["1"]
    assert header["POINTS"] == [str(len(cloud))]
    assert header["VIEWPOINT"] == ["0", "0", "0", "1", "0", "0", "0"]
    assert "# lidar_fmu timestamp_s 1.25" in lines  # the frame's time, in a comment every reader skips
    assert raw.endswith(cloud.records().tobytes())
    assert pcd_bytes(cloud) == raw
    back = read_pcd(path)
    assert back.dtype == cloud.records().dtype
    assert np.array_equal(back, cloud.records())
    assert np.array_equal(back[list(POINT_DTYPE.names)], cloud.points)
    assert np.array_equal(back["intensity"], cloud.intensity_percent)
    assert back.flags.writeable


def test_pcd_header_follows_the_dtype(cloud, tmp_path):
    """A field added later (a saturation flag, a 3-vector) needs no change to the writer or reader."""
    dtype = np.dtype(POINT_DTYPE.descr + [("rgb", "<f4", (3,)), ("t", "<f8"), ("d", "<i2")])
    points = np.zeros(len(cloud), dtype)
    for name in POINT_DTYPE.names:
        points[name] = cloud.points[name]
    points["saturated"] = points["range"] < 5
    points["rgb"] = np.arange(3 * len(points)).reshape(-1, 3)
    points["t"] = np.linspace(0, 0.1, len(points))
    points["d"] = -np.arange(len(points)) % 3000
    path = tmp_path / "extra.pcd"
    write_pcd(path, points)
    lines, _ = _header_lines(path)
    assert "TYPE F F F F F F F F U U U F U F F I" in lines
    assert "SIZE 4 4 4 4 4 4 4 4 4 8 1 4 1 4 8 2" in lines
    assert "COUNT 1 1 1 1 1 1 1 1 1 1 1 1 1 3 1 1" in lines
    assert np.array_equal(read_pcd(path), points)


def test_pcd_writes_plain_xyz_and_unpacked_arrays(tmp_path):
    xyz = np.array([[1.0, 2.0, 3.0], [-4.0, 5.5, 6.25]])
    write_pcd(tmp_path / "xyz.pcd", xyz)
    back = read_pcd(tmp_path / "xyz.pcd")
    assert back.dtype.names == ("x", "y", "z")
    assert np.array_equal(np.stack([back["x"], back["y"], back["z"]], 1), xyz)
    # big-endian and padded (aligned) records are repacked little-endian
    odd = np.zeros(3, np.dtype([("x", ">f4"), ("id", ">u8")], align=True))
    odd["x"], odd["id"] = [1.5, 2.5, 3.5], [1, 2**63, 2**64 - 1]
    write_pcd(tmp_path / "odd.pcd", odd)
    back = read_pcd(tmp_path / "odd.pcd")
    assert back.dtype == np.dtype([("x", "<f4"), ("id", "<u8")])
    assert np.array_equal(back["x"], odd["x"]) and np.array_equal(back["id"], odd["id"])


def test_pcd_empty_cloud(tmp_path):
    write_pcd(tmp_path / "empty.pcd", np.empty(0, POINT_DTYPE))
    back = read_pcd(tmp_path / "empty.pcd")
    assert back.dtype == POINT_DTYPE and len(back) == 0


def test_read_pcd_ascii_keeps_64_bit_ids(tmp_path):
    path = tmp_path / "ascii.pcd"
    path.write_text(
        "# hand-written\nVERSION .7\nFIELDS x y z object_id _ _\nSIZE 4 4 4 8 1 1\nTYPE F F F U U U\n"
        "COUNT 1 1 1 1 1 1\nWIDTH 2\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS 2\nDATA ascii\n"
        "1.5 -2 3e-3 18446744073709551615 0 0\nnan 0 0 7 1 2\n"
    )
    back = read_pcd(path)
    assert back.dtype.names == ("x", "y", "z", "object_id", "_", "_1")  # PCL padding fields made unique
    assert back["object_id"].tolist() == [2**64 - 1, 7]
    assert back["x"][0] == np.float32(1.5) and np.isnan(back["x"][1])
    assert back["z"][0] == np.float32(3e-3)


@pytest.mark.parametrize(
    "text, message",
    [
        (b"hello world\n", "unexpected header line"),
        (b"VERSION .7\nFIELDS x y z\nSIZE 4 4\nTYPE F F F\nWIDTH 1\nPOINTS 1\nDATA binary\n" + b"\0" * 12,
         "disagree in length"),
        (b"VERSION .7\nFIELDS x\nSIZE 3\nTYPE F\nWIDTH 1\nPOINTS 1\nDATA binary\n" + b"\0" * 3, "unsupported TYPE"),
        (b"VERSION .7\nFIELDS x\nSIZE 4\nTYPE F\nWIDTH 2\nHEIGHT 1\nPOINTS 3\nDATA binary\n", "does not match"),
        (b"VERSION .7\nFIELDS x\nSIZE 4\nTYPE F\nWIDTH 4\nPOINTS 4\nDATA binary\n" + b"\0" * 15, "truncated"),
        (b"VERSION .7\nFIELDS x\nSIZE 4\nTYPE F\nWIDTH 3\nPOINTS 3\nDATA ascii\n1\n2\n", "truncated"),
        (b"VERSION .7\nFIELDS x\nSIZE 4\nTYPE F\nWIDTH 1\nPOINTS 1\nDATA ascii\nabc\n", "malformed ascii"),
        (b"VERSION .7\nFIELDS x\nSIZE 4\nTYPE F\nWIDTH one\nDATA binary\n", "non-integer"),
        (b"VERSION .7\nFIELDS x\nSIZE 4\nTYPE F\nWIDTH 1\nDATA zipped\n", "unknown PCD DATA"),
        (b"VERSION .7\nFIELDS x\nSIZE 4\nTYPE F\nWIDTH 1\n", "no DATA line"),
    ],
)
def test_read_pcd_rejects_malformed_files_naming_them(tmp_path, text, message):
    path = tmp_path / "broken.pcd"
    path.write_bytes(text)
    with pytest.raises(ValueError, match=message) as info:
        read_pcd(path)
    assert str(path) in str(info.value)


def test_pcd_open3d_legacy_reads_positions_and_normals(cloud, tmp_path):
    o3d = pytest.importorskip("open3d")
    path = tmp_path / "scan.pcd"
    write_pcd(path, cloud)
    pc = o3d.io.read_point_cloud(str(path))
    assert np.array_equal(np.asarray(pc.points), cloud.xyz.astype(np.float64))
    # the legacy reader also maps normal_x/y/z to normals
    normals = np.stack([cloud.points[f"normal_{a}"] for a in "xyz"], axis=1)
    assert pc.has_normals() and np.array_equal(np.asarray(pc.normals), normals.astype(np.float64))


def test_pcd_open3d_tensor_reads_every_field(cloud, tmp_path):
    o3d = pytest.importorskip("open3d")
    path = tmp_path / "scan.pcd"
    write_pcd(path, cloud)
    pc = o3d.t.io.read_point_cloud(str(path))
    point = {key: pc.point[key].numpy() for key in pc.point}
    assert np.array_equal(point["positions"], cloud.xyz)
    normals = np.stack([cloud.points[f"normal_{a}"] for a in "xyz"], axis=1)
    assert np.array_equal(point["normals"], normals)
    for name in ("range", "reflectivity", "beam_id", "object_id"):
        assert point[name].dtype == cloud.points.dtype[name], name  # u4 and u8 survive as such
        assert np.array_equal(point[name][:, 0], cloud.points[name]), name


def test_pcd_pypcd4_reads_every_field(cloud, tmp_path):
    pypcd4 = pytest.importorskip("pypcd4")
    path = tmp_path / "scan.pcd"
    write_pcd(path, cloud)
    pc = pypcd4.PointCloud.from_path(path)
    assert pc.fields == cloud.records().dtype.names
    assert pc.pc_data.dtype == cloud.records().dtype
    assert np.array_equal(pc.pc_data, cloud.records())  # incl. beam_id, ring and 64-bit object_id
    # .numpy() stacks into one float64 array: fine for geometry, lossy for ids ≥ 2**53
    assert np.array_equal(pc.numpy(("x", "y", "z")), cloud.xyz.astype(np.float64))
    assert np.array_equal(pc.numpy(("beam_id",))[:, 0], cloud.points["beam_id"])


def test_read_pcd_binary_compressed_from_pypcd4(cloud, tmp_path):
    pypcd4 = pytest.importorskip("pypcd4")
    pytest.importorskip("lzf")
    path = tmp_path / "compressed.pcd"
    pypcd4.PointCloud.from_points(
        [cloud.points[name] for name in POINT_DTYPE.names], POINT_DTYPE.names,
        [POINT_DTYPE[name] for name in POINT_DTYPE.names],
    ).save(path, encoding=pypcd4.Encoding.BINARY_COMPRESSED)
    assert b"DATA binary_compressed" in path.read_bytes()[:600]
    assert np.array_equal(read_pcd(path), cloud.points)


# -- PLY -------------------------------------------------------------------------------------------
def test_ply_open3d_reads_points_and_normals(cloud, tmp_path):
    o3d = pytest.importorskip("open3d")
    path = tmp_path / "scan.ply"
    write_ply(path, cloud)
    pc = o3d.io.read_point_cloud(str(path))
    assert np.array_equal(np.asarray(pc.points), cloud.xyz.astype(np.float64))
    normals = np.stack([cloud.points[f"normal_{a}"] for a in "xyz"], axis=1)
    assert pc.has_normals() and np.array_equal(np.asarray(pc.normals), normals.astype(np.float64))


def test_ply_trimesh_reads_every_property(cloud, tmp_path):
    trimesh = pytest.importorskip("trimesh")
    path = tmp_path / "scan.ply"
    write_ply(path, cloud)
    header = path.read_bytes().partition(b"end_header\n")[0].decode()
    assert "format binary_little_endian 1.0" in header
    assert f"element vertex {len(cloud)}" in header
    assert "property int object_id_low\nproperty int object_id_high" in header
    assert "property uint" not in header and "property ushort" not in header  # Open3D skips those
    pc = trimesh.load(path)
    assert isinstance(pc, trimesh.PointCloud)
    assert np.array_equal(pc.vertices, cloud.xyz.astype(np.float64))
    vertex = pc.metadata["_ply_raw"]["vertex"]["data"]
    for ours, theirs in [("range", "range"), ("reflectivity", "reflectivity"), ("normal_x", "nx"),
                         ("normal_y", "ny"), ("normal_z", "nz"), ("beam_id", "beam_id")]:
        assert np.array_equal(vertex[theirs], cloud.points[ours]), ours
    object_id = _object_id(vertex["object_id_low"], vertex["object_id_high"])
    assert np.array_equal(object_id, cloud.points["object_id"])
    assert np.array_equal(vertex["ring"], cloud.records()["ring"])


def _object_id(low, high):
    """A 64-bit id from the two 32-bit words PLY holds it in."""
    low, high = np.asarray(low).astype(np.int32), np.asarray(high).astype(np.int32)
    return low.view(np.uint32).astype(np.uint64) | (high.view(np.uint32).astype(np.uint64) << np.uint64(32))


def test_ply_open3d_tensor_reads_every_property(cloud, tmp_path):
    o3d = pytest.importorskip("open3d")
    path = tmp_path / "scan.ply"
    write_ply(path, cloud)
    pc = o3d.t.io.read_point_cloud(str(path))
    point = {key: pc.point[key].numpy()[:, 0] for key in pc.point if key not in ("positions", "normals")}
    records = cloud.records()
    assert set(point) == set(records.dtype.names) - {"x", "y", "z", "normal_x", "normal_y", "normal_z", "object_id"} \
        | {"object_id_low", "object_id_high"}
    for name in ("range", "reflectivity", "beam_id", "saturated", "time", "echo", "intensity", "ring"):
        assert np.array_equal(point[name], records[name]), name
    assert np.array_equal(_object_id(point["object_id_low"], point["object_id_high"]), cloud.points["object_id"])


# -- PTX -------------------------------------------------------------------------------------------
def test_ptx_organized_grid(cloud, lidar, tmp_path):
    path = tmp_path / "scan.ptx"
    write_ptx(path, cloud)
    with open(path) as f:
        lines = f.read().splitlines()
    rows, columns = cloud.rows, cloud.columns
    assert len(lines) == 10 + rows * columns
    assert (int(lines[0]), int(lines[1])) == (columns, rows)

    header, grid = read_ptx(path)
    pose = cloud.sensor_pose
    assert np.allclose(header["position"], pose[:3, 3], atol=1e-9)
    assert np.allclose(header["axes"], pose[:3, :3].T, atol=1e-9)  # one sensor axis (in the world) per line
    assert np.allclose(header["world_from_sensor"], pose, atol=1e-9)
    assert np.allclose(np.array(lines[9].split(), float), [*pose[:3, 3], 1.0])  # Leica: translation last
    assert grid.shape == (rows, columns, 4)

    # misses are the literal line "0 0 0 0"; every return appears once, at its own cell
    body = lines[10:]
    miss = np.array([line == "0 0 0 0" for line in body])
    assert miss.sum() == rows * columns - len(cloud)
    assert not (grid.reshape(-1, 4)[~miss.reshape(columns, rows).T.ravel()] == 0).all(axis=1).any()

    # rows ascend in elevation within every column
    hit = ~miss.reshape(columns, rows).T
    elevation = np.degrees(_elevation_rad(grid))
    expected = np.sort(np.degrees(lidar.sensor.pattern.elevation_rad[:rows]))
    assert np.allclose(np.where(hit, elevation, expected[:, None]), expected[:, None], atol=1e-3)

    # cell contents equal the returns (6 decimals)
    ray_row = cloud.ray_index % rows
    ray_column = cloud.ray_index // rows
    ptx_row = np.argsort(np.argsort(lidar.sensor.pattern.elevation_rad[:rows], kind="stable"), kind="stable")
    cells = grid[ptx_row[ray_row], ray_column]
    assert np.allclose(cells[:, :3], cloud.xyz, atol=5e-7, rtol=0)
    assert np.allclose(cells[:, 3], np.clip(cloud.points["reflectivity"], 0, 1), atol=5e-7, rtol=0)


def test_ptx_row_order_comes_from_the_cloud_pattern(cloud, lidar, tmp_path):
    exact = row_elevation_rad(cloud, lidar.sensor.pattern)
    assert cloud.pattern is lidar.sensor.pattern
    assert np.array_equal(row_elevation_rad(cloud), exact)  # the pattern the cloud carries
    write_ptx(tmp_path / "a.ptx", cloud)
    write_ptx(tmp_path / "b.ptx", cloud, pattern=lidar.sensor.pattern)
    assert (tmp_path / "a.ptx").read_bytes() == (tmp_path / "b.ptx").read_bytes()
    # without its pattern a cloud has no grid, whatever its sensor_name says: nothing is guessed
    assert cloud.sensor_name == "velodyne_vlp16"
    bare = dataclasses.replace(cloud, pattern=None)
    with pytest.raises(NoRayPatternError, match="PTX.*ray pattern"):
        write_ptx(tmp_path / "c.ptx", bare)
    assert not (tmp_path / "c.ptx").exists()
    with pytest.raises(NoRayPatternError):
        row_elevation_rad(bare)
    assert issubclass(NoRayPatternError, LidarFmuError)


#: a sensor no preset is named after, with interleaved beams (beam id ≠ elevation order)
CUSTOM_SENSOR = {"name": "test_rig_interleaved", "vertical_angles_deg": [-1, -15, 3, -11, 7, -7, 11, -3, 15, 1],
                 "horizontal_samples": 240, "horizontal_fov_deg": [120, -120], "max_range_m": 60}


def test_ptx_of_a_custom_sensor_is_organized_by_its_pattern(scene, tmp_path):
    from lidar_fmu.sensors import PRESETS

    lidar = Lidar(scene, CUSTOM_SENSOR, backend="embree")
    cloud = lidar.scan(_pose(0.5, -0.5, 0.1, -0.3))
    pattern = lidar.sensor.pattern
    assert cloud.sensor_name == "test_rig_interleaved" and cloud.sensor_name not in PRESETS
    assert cloud.pattern is pattern and 0 < len(cloud) < len(pattern)
    rows, columns = pattern.rows, pattern.columns
    assert (rows, columns) == (10, 240)
    # the hard case for estimating rows from returns: beams without any return
    beams_hit = np.unique(cloud.points["beam_id"])
    assert 0 < len(beams_hit) < rows

    write_ptx(tmp_path / "rig.ptx", cloud)
    header, grid = read_ptx(tmp_path / "rig.ptx")
    assert (header["rows"], header["columns"]) == (rows, columns)
    # PTX row r holds beam order[r] (ascending elevation); each return at (its beam's row, its column)
    order = np.argsort(CUSTOM_SENSOR["vertical_angles_deg"])
    rank = np.argsort(order)
    expected = np.zeros((rows, columns, 4))
    cell = rank[pattern.beam_id[cloud.ray_index]], pattern.column[cloud.ray_index]
    expected[cell[0], cell[1], :3] = cloud.xyz
    expected[cell[0], cell[1], 3] = np.clip(cloud.points["reflectivity"], 0, 1)
    assert np.allclose(grid, expected, atol=5e-7, rtol=0)
    # and every return lies on the ray of its cell
    hit = grid[..., :3].any(axis=2)
    assert hit.sum() == len(cloud)
    ray = pattern.directions.reshape(columns, rows, 3)[:, order].transpose(1, 0, 2)  # (PTX row, column, xyz)
    assert _angle_rad(grid[..., :3][hit], ray[hit]).max() < 1e-5


def test_cloud_knows_each_return_s_ray(cloud, lidar):
    pattern = lidar.sensor.pattern
    assert np.array_equal(cloud.column, pattern.column[cloud.ray_index])
    assert np.array_equal(cloud.row, cloud.ray_index % pattern.rows)
    assert np.array_equal(cloud.points["beam_id"], pattern.beam_id[cloud.ray_index])
    assert np.array_equal(cloud.time_offset_s, pattern.time_offset_s[cloud.ray_index])
    assert _angle_rad(cloud.xyz, cloud.direction).max() < 1e-6
    bare = dataclasses.replace(cloud, pattern=None)
    with pytest.raises(NoRayPatternError, match="firing column"):
        _ = bare.column
    with pytest.raises(ValueError, match="does not match"):
        dataclasses.replace(cloud, rows=cloud.rows + 1)


def test_preview_of_a_cloud_without_pattern_is_the_bird_s_eye_view_alone(cloud, tmp_path):
    from matplotlib.image import imread

    from lidar_fmu.osi.detections import sensor_data_to_points
    from lidar_fmu.osi.encode import LidarDetectionBlock, encode_sensor_data

    write_preview(tmp_path / "grid.png", cloud)
    write_preview(tmp_path / "bare.png", dataclasses.replace(cloud, pattern=None))
    with_grid, bare = imread(tmp_path / "grid.png"), imread(tmp_path / "bare.png")
    assert bare.shape[1] == with_grid.shape[1] and bare.shape[0] < with_grid.shape[0]
    assert bare[..., :3].std() > 0.05
    # points decoded from OSI know no grid either (rows = columns = 0) until organized
    decoded = sensor_data_to_points(encode_sensor_data(
        LidarDetectionBlock(cloud, sensor_id=1, mounting_position=np.eye(4)), timestamp_s=1.25, cycle_counter=1))
    write_preview(tmp_path / "decoded.png", decoded)
    assert imread(tmp_path / "decoded.png").shape == bare.shape


def _angle_rad(a, b):
    """Angle between the rows of ``a`` and ``b`` (rad), accurate for tiny angles."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.arctan2(np.linalg.norm(np.cross(a, b), axis=1), np.einsum("ij,ij->i", a, b))


def _elevation_rad(grid):
    """Elevation of each PTX cell, NaN for misses."""
    norm = np.linalg.norm(grid[..., :3], axis=2)
    return np.where(norm > 0, np.arcsin(np.clip(grid[..., 2] / np.where(norm > 0, norm, 1), -1, 1)), np.nan)


def test_ptx_numbers_match_printf(tmp_path):
    """The numpy formatter writes what "%.6f" would (without negative zeros)."""
    from lidar_fmu.io.ptx import _fixed_point_text

    rng = np.random.default_rng(3)
    values = np.concatenate([
        rng.normal(0, 60, (500, 4)), rng.normal(0, 1e-3, (200, 4)),
        [[0, 4e-7, 9.9999996, 1234.5678904], [-1e-7, -0.5, 10, -99999.25]],
    ])
    blank = np.zeros(len(values), bool)
    blank[[3, 600]] = True
    got = _fixed_point_text(values, blank).decode().splitlines()
    want = ["0 0 0 0" if b else " ".join(f"{v:.6f}" for v in row).replace("-0.000000", "0.000000")
            for row, b in zip(values, blank)]
    assert got == want


def test_read_ptx_rejects_short_files(tmp_path):
    path = tmp_path / "short.ptx"
    path.write_text("2\n1\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n1 0 0 0\n0 1 0 0\n0 0 1 0\n0 0 0 1\n1 2 3 0.5\n")
    with pytest.raises(ValueError, match="short.ptx"):
        read_ptx(path)


# -- previews and dispatch -------------------------------------------------------------------------
def test_preview_png(cloud, lidar, tmp_path):
    from matplotlib.image import imread

    path = tmp_path / "preview.png"
    write_preview(path, cloud)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = imread(path)
    height, width = image.shape[:2]
    assert 800 <= width <= 2000 and 900 <= height <= 2000
    assert image[..., :3].std() > 0.05  # not blank
    write_preview(tmp_path / "fixed.png", cloud, max_range_m=30, pattern=lidar.sensor.pattern)
    assert imread(tmp_path / "fixed.png").shape == image.shape


def test_bev_image_orientation():
    points = np.zeros(3, POINT_DTYPE)
    points["x"] = [9.0, 0.0, -9.0]  # forward, left, behind
    points["y"] = [0.0, 9.0, 0.0]
    points["range"] = [9.0, 9.0, 9.0]
    image = bev_image(points, 10.0, 0.5, background=(0, 0, 0))
    assert image.shape == (40, 40, 3) and image.dtype == np.uint8
    lit = np.argwhere(image.any(axis=2))
    assert sorted(map(tuple, lit)) == [(2, 20), (20, 2), (38, 20)]  # up = forward, left = left
    # asymmetric extents, (N, 2) input, a point outside is dropped, growth fills neighbours
    image = bev_image(np.array([[1.0, -1.0], [100.0, 0.0]]), (0, 4, -2, 2), 0.25, point_size_px=3)
    assert image.shape == (16, 16, 3)
    assert image.any(axis=2).sum() == 9


def test_bev_image_highest_point_wins():
    points = np.zeros(2, POINT_DTYPE)
    points["x"], points["z"], points["range"] = 5.0, [2.0, -1.0], [1.0, 10.0]  # same pixel, high point near
    image = bev_image(points, 10.0, 1.0, max_range_m=10.0)
    near = bev_image(points[:1], 10.0, 1.0, max_range_m=10.0)
    assert np.array_equal(image, near)


def test_write_point_cloud_dispatches_on_extension(cloud, tmp_path):
    for ext in (".pcd", ".PLY", ".ptx"):
        write_point_cloud(tmp_path / f"scan{ext}", cloud)
        assert os.path.getsize(tmp_path / f"scan{ext}") > len(cloud) * 12
    assert np.array_equal(read_pcd(tmp_path / "scan.pcd"), cloud.records())
    with pytest.raises(ValueError, match=r"'\.xyz'.*\.pcd, \.ply, \.ptx"):
        write_point_cloud(tmp_path / "scan.xyz", cloud)


# -- PCD binary_compressed and field selection -----------------------------------------------------
def test_pcd_binary_compressed_round_trip_is_exact(cloud, tmp_path):
    pytest.importorskip("lzf")
    path = tmp_path / "compressed.pcd"
    write_pcd(path, cloud, compression="binary_compressed")
    raw = path.read_bytes()
    head, _, body = raw.partition(b"DATA binary_compressed\n")
    assert body and b"FIELDS " + " ".join(cloud.records().dtype.names).encode() in head
    compressed, uncompressed = np.frombuffer(body[:8], "<u4")
    assert uncompressed == len(cloud) * cloud.records().dtype.itemsize and compressed == len(body) - 8
    assert compressed < uncompressed  # the columns compress
    assert np.array_equal(read_pcd(path), cloud.records())
    assert pcd_bytes(cloud, compression="binary_compressed") == raw


def test_pcd_binary_compressed_is_read_exactly_by_pypcd4_and_open3d(cloud, tmp_path):
    pytest.importorskip("lzf")
    pypcd4 = pytest.importorskip("pypcd4")
    o3d = pytest.importorskip("open3d")
    path = tmp_path / "compressed.pcd"
    write_pcd(path, cloud, compression="binary_compressed")
    pc = pypcd4.PointCloud.from_path(path)
    assert pc.pc_data.dtype == cloud.records().dtype and np.array_equal(pc.pc_data, cloud.records())  # u8 ids in full
    tensor = o3d.t.io.read_point_cloud(str(path))
    point = {key: tensor.point[key].numpy() for key in tensor.point}
    assert np.array_equal(point["positions"], cloud.xyz)
    normals = np.stack([cloud.points[f"normal_{a}"] for a in "xyz"], axis=1)
    assert np.array_equal(point["normals"], normals)
    records = cloud.records()
    for name in ("range", "reflectivity", "beam_id", "object_id", "saturated", "intensity", "ring"):
        assert point[name].dtype == records.dtype[name], name
        assert np.array_equal(point[name][:, 0], records[name]), name
    legacy = o3d.io.read_point_cloud(str(path))
    assert np.array_equal(np.asarray(legacy.points), cloud.xyz.astype(np.float64))
    assert np.array_equal(np.asarray(legacy.normals), normals.astype(np.float64))


@pytest.mark.parametrize("compression", ["none", "binary_compressed"])
def test_pcd_fields_leave_the_others_out(cloud, tmp_path, compression):
    from lidar_fmu.io import OSI_FIELDS

    pytest.importorskip("lzf")
    path = tmp_path / "osi.pcd"
    write_pcd(path, cloud, compression=compression, fields=OSI_FIELDS)
    back = read_pcd(path)
    assert back.dtype.names == OSI_FIELDS and "normal_x" not in back.dtype.names
    for name in OSI_FIELDS:
        assert np.array_equal(back[name], cloud.points[name]), name
    # any order, any subset of a structured array
    write_pcd(path, cloud.points, compression=compression, fields=["object_id", "x"])
    back = read_pcd(path)
    assert back.dtype.names == ("object_id", "x") and np.array_equal(back["object_id"], cloud.points["object_id"])


def test_pcd_options_are_checked(cloud, tmp_path):
    from lidar_fmu.io import PointCloudFileError

    for kwargs, message in (({"compression": "gzip"}, "unknown PCD compression 'gzip'"),
                            ({"fields": ["x", "rgb"]}, "unknown field.*'rgb'"),
                            ({"fields": []}, "no fields"), ({"fields": ["x", "x"]}, "named twice")):
        with pytest.raises(PointCloudFileError, match=message):
            write_pcd(tmp_path / "bad.pcd", cloud, **kwargs)
        assert issubclass(PointCloudFileError, LidarFmuError)
    assert not (tmp_path / "bad.pcd").exists()


def test_pcd_binary_compressed_empty_and_corrupt(tmp_path):
    pytest.importorskip("lzf")
    path = tmp_path / "empty.pcd"
    write_pcd(path, np.empty(0, POINT_DTYPE), compression="binary_compressed")
    assert read_pcd(path).dtype == POINT_DTYPE and len(read_pcd(path)) == 0
    points = np.zeros(500, POINT_DTYPE)
    points["x"] = np.arange(500)
    write_pcd(path, points, compression="binary_compressed")
    raw = bytearray(path.read_bytes())
    start = raw.index(b"DATA binary_compressed\n") + len(b"DATA binary_compressed\n") + 8
    raw[start + 4: start + 40] = b"\xff" * 36
    path.write_bytes(bytes(raw))
    with pytest.raises(LidarFmuError, match="cannot decompress") as info:
        read_pcd(path)
    assert str(path) in str(info.value)


def test_write_point_cloud_passes_options_and_writes_las(cloud, tmp_path):
    pytest.importorskip("lzf")
    write_point_cloud(tmp_path / "scan.pcd", cloud, compression="binary_compressed")
    assert b"DATA binary_compressed" in (tmp_path / "scan.pcd").read_bytes()[:600]
    assert np.array_equal(read_pcd(tmp_path / "scan.pcd"), cloud.records())
    laspy = pytest.importorskip("laspy")
    write_point_cloud(tmp_path / "scan.LAS", cloud)
    assert len(laspy.read(tmp_path / "scan.LAS").points) == len(cloud)
