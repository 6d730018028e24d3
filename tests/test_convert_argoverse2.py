"""lidar-fmu convert: an Argoverse 2 sensor log → SensorView trace, rig and scenario (the shared drive, read from
../shared: its licence keeps it out of the repository), and bad logs refused in one line."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from lidar_fmu.osi.decode import decode_sensor_view
from lidar_fmu.osi.ground_truth import decode_road, decode_stationary
from lidar_fmu.osi.trace import read_trace
from lidar_fmu.recordings import argoverse2
from lidar_fmu.recordings.argoverse2 import DriveLogError, convert, poses, read_feather, read_log
from lidar_fmu.sensors.rig import load_rig
from lidar_fmu.tools.cli import main

#: the shared drive beside the checkout (../shared), or beside the folder of worktrees a checkout may sit in
_DRIVE = Path("shared") / "data" / "drives" / "argoverse2" / "7fab2350-7eaf-3b7e-a39d-6937a4c1bede"
LOG = next((p.resolve() for p in (Path(__file__).parents[1] / ".." / _DRIVE, Path(__file__).parents[1] / ".." / ".."
                                  / _DRIVE) if p.is_dir()), (Path(__file__).parents[1] / ".." / _DRIVE).resolve())
needs_log = pytest.mark.skipif(not LOG.is_dir(), reason=f"the shared Argoverse 2 log is not here ({LOG})")


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("converted")
    written = convert(LOG, out)
    views = [decode_sensor_view(v) for v in read_trace(written["trace"])]
    return written, views, read_log(LOG)


@needs_log
def test_one_view_per_sweep_and_host_at_the_ego_pose(converted):
    written, views, log = converted
    assert written["frames"] == len(views) == len(log.timestamps_ns) == 156
    origin = np.array(written["origin_m"])
    assert np.array_equal(origin, np.round(log.city_from_ego[0, :3, 3]))
    times = np.array([v.timestamp_s for v in views])
    assert np.allclose(times, (log.timestamps_ns - log.timestamps_ns[0]) * 1e-9, atol=1e-9)
    for view, city_from_ego in zip(views, log.city_from_ego):
        pose = view.host_pose()
        assert np.abs(pose[:3, 3] + origin - city_from_ego[:3, 3]).max() < 1e-3
        assert np.abs(pose[:3, :3] - city_from_ego[:3, :3]).max() < 1e-6


@needs_log
def test_every_annotated_object_with_its_class_and_unique_ids(converted):
    _, views, log = converted
    a = log.annotations
    ids = argoverse2.track_ids(a["track_uuid"])
    expected = {"REGULAR_VEHICLE": "car", "PEDESTRIAN": "pedestrian", "BICYCLE": "bicycle", "BOLLARD": "pole",
                "MOTORCYCLE": "motorcycle", "BOX_TRUCK": "heavy_truck", "TRUCK_CAB": "semitractor",
                "VEHICULAR_TRAILER": "trailer", "STROLLER": "", "CONSTRUCTION_CONE": "pylon"}
    road = decode_road(decode_sensor_view(next(read_trace(converted[0]["trace"]))).road_part)
    road_ids = {lane.id for lane in road.lanes} | {b.id for b in road.boundaries} | {m.id for m in road.markings}
    for k in (0, 77, 155):
        view = views[k]
        stationary, problems = decode_stationary(view.stationary_part)
        assert problems == ()
        classes = {o.id: o.object_class for o in view.objects + stationary}
        rows = np.flatnonzero(a["timestamp_ns"] == log.timestamps_ns[k])
        for row in rows:
            assert classes[ids[str(a["track_uuid"][row])]] == expected[str(a["category"][row])]
        assert len(classes) == len(rows) + 1  # and the host
        assert not road_ids & set(classes)
    assert len(set(ids.values())) == len(ids)


@needs_log
def test_lane_boundaries_where_the_map_puts_them(converted):
    written, views, log = converted
    road = decode_road(views[0].road_part)
    assert road.problems == ()
    origin = np.array(written["origin_m"])
    lanes = log.vector_map["lane_segments"]
    assert sum(lane.kind in ("DRIVING", "INTERSECTION") for lane in road.lanes) == len(lanes)
    boundaries = {b.id: b for b in road.boundaries}
    for key, segment in lanes.items():
        left = boundaries[argoverse2._id(argoverse2.KIND_BOUNDARY, int(key) << 1)]
        mapped = np.array([(p["x"], p["y"], p["z"]) for p in segment["left_lane_boundary"]]) - origin
        shift = 0.5 * (argoverse2.LINE_WIDTH_M + argoverse2.DOUBLE_LINE_GAP_M) \
            if segment["left_lane_mark_type"].startswith(("DOUBLE", "DASH_SOLID", "SOLID_DASH")) else 0.0
        assert np.abs(np.linalg.norm(left.position_m - mapped, axis=1) - shift).max() < 1e-3
        kind, color = argoverse2.LANE_MARKS[segment["left_lane_mark_type"]][-1]
        assert (left.kind, left.color) == (kind, color)
    assert len(road.markings) == len(log.vector_map["pedestrian_crossings"])
    assert views[0].country_code == 840


@needs_log
def test_rig_and_view_mountings_are_the_calibration(converted):
    written, views, log = converted
    rig = load_rig(written["rig"])
    assert [m.sensor.name for m in rig] == ["velodyne_vlp32c"] * 2
    for member, (name, sensor_id), mounting in zip(rig, argoverse2.LIDARS, views[0].lidar_mountings):
        assert member.sensor_id == sensor_id
        assert np.allclose(member.mounting_pose, log.ego_from_lidar[name], atol=1e-5)
        assert np.allclose(mounting, log.ego_from_lidar[name], atol=1e-9)
    assert rig[1].mounting_pose[2, 2] < -0.99  # the lower lidar is upside down: its z axis points down


@needs_log
def test_nothing_of_the_built_world_lies_within_2_m_above_either_lidar(converted):
    """Rays cast up (every direction above 5° over the horizon) from both lidars into the scene the FMU builds from
    the first view meet nothing within 2 m: the sweeps have nothing there (the ego's returns removed, nothing over a
    car's roof), where the side of a lane carried on straight down the hill once put grass 0.2 m above them."""
    from lidar_fmu.geometry.scene import Scene
    from lidar_fmu.raycast.factory import make_backend
    from lidar_fmu.world.scene_update import SceneUpdater

    written, views, _ = converted
    scene = Scene()
    SceneUpdater(scene).apply(views[0])
    azimuth, elevation = np.meshgrid(np.radians(np.arange(0.0, 360.0, 5.0)), np.radians(np.arange(5.0, 90.1, 5.0)))
    up = np.column_stack([(np.cos(elevation) * np.cos(azimuth)).ravel(), (np.cos(elevation) * np.sin(azimuth)).ravel(),
                          np.sin(elevation).ravel()])
    backend = make_backend("embree", scene)
    for member in load_rig(written["rig"]):
        position = (views[0].host_pose() @ member.mounting_pose)[:3, 3]
        hits = backend.cast(np.tile(position, (len(up), 1)), up, 2.0)
        assert not hits.hit.any(), f"{hits.hit.sum()} rays up from lidar {member.sensor_id} meet the scene within 2 m"


@pytest.mark.slow
@needs_log
def test_replay_of_two_frames_returns_from_both_lidars(converted, tmp_path):
    from lidar_fmu.tools.replay import replay

    summary = replay(os.path.dirname(converted[0]["scenario"]), tmp_path / "replay", max_frames=2, progress=False)
    assert [lidar["frames"] for lidar in summary["lidars"]] == [2, 2]
    # measured: 0.64 (upper) and 0.39 (lower) of the rays return; the lower unit's upward rings see the sky, as
    # nothing of the default environment stands above the car (no buildings, no trees)
    for lidar in summary["lidars"]:
        assert min(lidar["returns_per_frame"]) > 0.3 * lidar["rays_per_frame"]


# ------------------------------------------------------------------------------------------------ bad logs


def _small_log(tmp_path) -> Path:
    """A log of one frame, crafted small: the shape of an Argoverse 2 log, none of its data."""
    import json

    import pyarrow as pa
    import pyarrow.feather as feather

    log = tmp_path / "log"
    (log / "calibration").mkdir(parents=True)
    (log / "map").mkdir()
    pose = {"qw": [1.0], "qx": [0.0], "qy": [0.0], "qz": [0.0], "tx_m": [100.2], "ty_m": [50.7], "tz_m": [3.0]}
    feather.write_feather(pa.table({"timestamp_ns": [1_000_000_000], **pose}), log / "city_SE3_egovehicle.feather")
    feather.write_feather(pa.table({"sensor_name": ["up_lidar", "down_lidar"],
                                    **{k: v * 2 for k, v in pose.items()}}),
                          log / "calibration" / "egovehicle_SE3_sensor.feather")
    feather.write_feather(pa.table({"timestamp_ns": [1_000_000_000], "track_uuid": ["a"], "category": ["BOLLARD"],
                                    "length_m": [0.2], "width_m": [0.2], "height_m": [1.0], **pose,
                                    "num_interior_pts": [10]}), log / "annotations.feather")
    line = [{"x": 100.0, "y": 50.0, "z": 3.0}, {"x": 120.0, "y": 50.0, "z": 3.0}]
    other = [{"x": 100.0, "y": 46.5, "z": 3.0}, {"x": 120.0, "y": 46.5, "z": 3.0}]
    vector_map = {"lane_segments": {"7": {"id": 7, "is_intersection": False, "lane_type": "VEHICLE",
                                          "left_lane_boundary": line, "right_lane_boundary": other,
                                          "left_lane_mark_type": "DOUBLE_SOLID_YELLOW",
                                          "right_lane_mark_type": "SOLID_WHITE", "successors": [],
                                          "predecessors": [], "left_neighbor_id": None, "right_neighbor_id": None}},
                  "drivable_areas": {"8": {"id": 8, "area_boundary": line + other[::-1]}},
                  "pedestrian_crossings": {"9": {"id": 9, "edge1": line, "edge2": other}}}
    (log / "map" / "log_map_archive_x.json").write_text(json.dumps(vector_map))
    return log


def test_a_crafted_log_converts(tmp_path):
    written = convert(_small_log(tmp_path), tmp_path / "out")
    view = decode_sensor_view(next(read_trace(written["trace"])))
    assert written["origin_m"] == [100.0, 51.0, 3.0]
    road = decode_road(view.road_part)
    assert len(road.lanes) == 2 and len(road.boundaries) == 5 and len(road.markings) == 1  # a double line: 2
    assert {b.color for b in road.boundaries if b.kind == "SOLID_LINE"} == {"YELLOW", "WHITE"}
    assert (tmp_path / "out" / "scenario.yaml").is_file()


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    return lines[0]


def test_a_folder_that_is_no_log(tmp_path, capsys):
    message = _error(capsys, ["convert", str(tmp_path), "-o", str(tmp_path / "out")])
    assert "city_SE3_egovehicle.feather: not found" in message


@pytest.mark.parametrize("name", ["annotations.feather", "calibration/egovehicle_SE3_sensor.feather"])
def test_a_missing_or_corrupt_feather(tmp_path, capsys, name):
    log = _small_log(tmp_path)
    (log / name).write_bytes(b"ARROW1 but not really")
    assert "not a readable feather file" in _error(capsys, ["convert", str(log), "-o", str(tmp_path / "o")])
    (log / name).unlink()
    assert f"{name.split('/')[-1]}: not found" in _error(capsys, ["convert", str(log), "-o", str(tmp_path / "o")])


def test_a_feather_without_its_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.feather as feather

    path = tmp_path / "poses.feather"
    feather.write_feather(pa.table({"timestamp_ns": [1]}), path)
    with pytest.raises(DriveLogError, match="has no column qw, qx"):
        read_feather(str(path), ("timestamp_ns", "qw", "qx"))


def test_a_corrupt_or_missing_map(tmp_path, capsys):
    log = _small_log(tmp_path)
    path = log / "map" / "log_map_archive_x.json"
    path.write_text('{"lane_segments": {"7": ')
    assert "log_map_archive_x.json" in _error(capsys, ["convert", str(log), "-o", str(tmp_path / "o")])
    path.write_text('{"lane_segments": {"7": {"left_lane_boundary": [{"x": 1}]}}}')
    message = _error(capsys, ["convert", str(log), "-o", str(tmp_path / "o")])
    assert "lane_segments[7].left_lane_boundary: not a list of points" in message
    shutil.rmtree(log / "map")
    assert "no log_map_archive_*.json" in _error(capsys, ["convert", str(log), "-o", str(tmp_path / "o")])


def test_quaternions_become_rotations():
    half = np.sqrt(0.5)
    pose = poses({"qw": [half], "qx": [0.0], "qy": [0.0], "qz": [half], "tx_m": [1.0], "ty_m": [2.0], "tz_m": [3.0]})
    assert np.allclose(pose[0], [[0, -1, 0, 1], [1, 0, 0, 2], [0, 0, 1, 3], [0, 0, 0, 1]])


def test_a_concave_drivable_area_is_paved_inside_its_outline_only():
    """A junction's cross-shaped area: cut into convex pieces, each a lane; no paved triangle reaches outside the
    outline (one strip between the outline's two halves would pave the blocks at its corners)."""
    from matplotlib.path import Path as Outline
    from osi3.osi_groundtruth_pb2 import GroundTruth

    from lidar_fmu.world.road import build_road
    from lidar_fmu.world.shapes import MeshBuilder

    arms = np.array([[10, 0], [20, 0], [20, 10], [30, 10], [30, 20], [20, 20], [20, 30], [10, 30], [10, 20], [0, 20],
                     [0, 10], [10, 10]], float)
    ring = [{"x": x, "y": y, "z": 0.0} for x, y in arms]
    gt = GroundTruth()
    argoverse2.add_drivable_areas(gt, {"5": {"id": 5, "area_boundary": ring + ring[:1]}}, np.zeros(3), "map")
    assert len(gt.lane) > 1  # a cross is no convex piece
    builder = MeshBuilder()
    build_road(decode_road(gt.SerializeToString()), builder)
    mesh = builder.mesh("area")
    centres = np.asarray(mesh.vertices)[np.asarray(mesh.faces)].mean(axis=1)[:, :2]
    assert Outline(arms).contains_points(centres).all()
    corners = np.asarray(mesh.vertices, float)[np.asarray(mesh.faces)][:, :, :2]
    u, v = corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]
    assert 0.5 * np.abs(u[:, 0] * v[:, 1] - u[:, 1] * v[:, 0]).sum() == pytest.approx(500.0, rel=1e-3)  # 5 squares


def test_convex_pieces_cover_a_polygon_once_and_are_convex():
    from lidar_fmu.world.lines import convex_pieces

    rng = np.random.default_rng(3)
    angles = np.sort(rng.uniform(0, 2 * np.pi, 40))
    star = np.column_stack([np.cos(angles), np.sin(angles)]) * rng.uniform(0.3, 1.0, (40, 1))  # star-shaped, simple
    total = 0.5 * abs(np.sum(star[:, 0] * np.roll(star[:, 1], -1) - np.roll(star[:, 0], -1) * star[:, 1]))
    pieces = convex_pieces(star)
    areas = []
    for piece in pieces:
        p = star[piece]
        signed = 0.5 * np.sum(p[:, 0] * np.roll(p[:, 1], -1) - np.roll(p[:, 0], -1) * p[:, 1])
        areas.append(signed)
        a, b = p - np.roll(p, 1, axis=0), np.roll(p, -1, axis=0) - p
        turn = a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]
        assert (turn >= -1e-12).all()  # counter-clockwise, convex
    assert min(areas) > 0 and sum(areas) == pytest.approx(total, rel=1e-9)
    assert len(pieces) < len(star) - 2  # merged: fewer than the triangles
