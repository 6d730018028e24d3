"""What the world builder keeps (:mod:`lidar_fmu.world.bounds`): lines cut to a working radius around the host, sizes
within their bounds, each repair named in one line; a road that cannot be built fails its step, not the next."""
import time
import tracemalloc

import numpy as np
import pytest
from osi3.osi_sensorview_pb2 import SensorView

from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.geometry.scene import Scene
from lidar_fmu.osi.decode import decode_sensor_view
from lidar_fmu.osi.ground_truth import BoundaryLine, LaneStrip, PlacedThing, RoadGroundTruth
from lidar_fmu.pointcloud import ENVIRONMENT_ID_BASE
from lidar_fmu.world import build_road_world
from lidar_fmu.world.bounds import LINE_BOUNDS_M, REBUILD_AFTER_M, WORKING_RADIUS_M, bounded
from lidar_fmu.world.lines import arc_length
from lidar_fmu.world.road import build_road, dash_intervals
from lidar_fmu.world.scene_update import SceneUpdater

FAR_M = 9.9e6  # inside the world's ±1e7 m


def _line(line_id, kind, points, width=0.0, height=0.0):
    points = np.asarray(points, float)
    n = len(points)
    return BoundaryLine(line_id, kind, "WHITE", points, np.full(n, width), np.full(n, height), np.zeros(n, np.int8))


def _across(y, line_id, kind="SOLID_LINE"):
    """A two-point line from x = −9.9e6 to 9.9e6 m."""
    return _line(line_id, kind, [[-FAR_M, y, 0.0], [FAR_M, y, 0.0]])


FAR_ROADS = {
    "guard rail": RoadGroundTruth((), (_across(0.0, 5, "GUARD_RAIL"),)),
    "lane": RoadGroundTruth((LaneStrip(1, "DRIVING", "NORMAL", np.zeros((0, 3)), (5,), (6,)),),
                            (_across(1.75, 5), _across(-1.75, 6))),
    "dashed line": RoadGroundTruth((), (_line(5, "DASHED_LINE", [[-FAR_M, 0, 0], [1.0, 0, 0], [FAR_M, 0, 0]]),)),
}


@pytest.mark.parametrize("name", list(FAR_ROADS))
def test_a_line_across_the_whole_world_is_built_within_the_working_radius_in_bounded_time_and_memory(name):
    build_road_world(FAR_ROADS["lane"], 50.0)  # the kernels compiled, not timed
    tracemalloc.start()
    start = time.perf_counter()
    world = build_road_world(FAR_ROADS[name], 200.0)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert seconds < 60 and peak < 200e6, (seconds, peak)  # before: 174 s and a MemoryError at 7.4 GB
    x = world.mesh.vertices[:, 0]
    assert x.min() >= -WORKING_RADIUS_M - 1e3 and x.max() <= WORKING_RADIUS_M + 1e3  # (terrain past the cut ends)
    assert np.abs(x).max() > 0.9 * WORKING_RADIUS_M  # and the road does reach out to the radius
    said = [p for p in world.problems if "farther than" in p]
    assert len(said) == 1 and f"{WORKING_RADIUS_M:g} m from the host" in said[0] and world.cut_lines >= 1


def test_a_cut_dashed_line_keeps_the_dashes_the_whole_line_has_there():
    """A 100 km line, evenly sampled (the standard pattern from its first point on), and one whose points say
    where its dashes are: cut to 20 km around a host 3 km along, the dashes within are the uncut line's."""
    xs = np.linspace(-50_000.0, 50_000.0, 41)
    pattern = _line(5, "DASHED_LINE", np.column_stack([xs, np.zeros_like(xs), np.zeros_like(xs)]))
    ends = np.arange(-50_000.0, 50_000.0, 7.0)  # 3 m dashes, 4 m gaps, by OSI's point rule
    ends = np.column_stack([ends, ends + 3.0]).ravel()
    pairs = _line(6, "DASHED_LINE", np.column_stack([ends, np.ones_like(ends), np.zeros_like(ends)]))
    for line in (pattern, pairs):
        within = bounded(RoadGroundTruth((), (line,)), (3_000.0, 0.0))
        (cut,) = within.road.boundaries
        s = arc_length(cut.position_m)
        got = dash_intervals(cut, s, 0, []) + cut.position_m[0, 0] + 50_000.0  # in the whole line's arc length
        span = (cut.position_m[0, 0] + 50_000.0, cut.position_m[-1, 0] + 50_000.0)
        whole = dash_intervals(line, arc_length(line.position_m), 0, [])
        whole = np.clip(whole, *span)
        whole = whole[whole[:, 1] - whole[:, 0] > 1e-4]
        assert span == pytest.approx((50_000.0 + 3_000.0 - WORKING_RADIUS_M, 50_000.0 + 3_000.0 + WORKING_RADIUS_M))
        np.testing.assert_allclose(got, whole, atol=1e-6)


def test_a_line_that_leaves_the_radius_and_comes_back_keeps_the_part_nearest_the_host():
    hairpin = _line(5, "SOLID_LINE", [[0.0, 0.0, 0.0], [FAR_M, 0.0, 0.0], [0.0, 100.0, 0.0], [-50.0, 100.0, 0.0]])
    (cut,) = bounded(RoadGroundTruth((), (hairpin,)), (0.0, 90.0)).road.boundaries
    assert cut.position_m[-1].tolist() == [-50.0, 100.0, 0.0] and cut.position_m[:, 1].min() > 99.0


def _view(host_x: float) -> bytes:
    """A SensorView of a guard rail across the world, 5 m beside the host at ``host_x``."""
    view = SensorView()
    view.host_vehicle_id.value = 1
    gt = view.global_ground_truth
    rail = gt.lane_boundary.add()
    rail.id.value = 5
    rail.classification.type = rail.classification.TYPE_GUARD_RAIL
    for x in (-FAR_M, FAR_M):
        point = rail.boundary_line.add()
        point.position.x, point.position.y = x, 5.0
    host = gt.moving_object.add()
    host.id.value = 1
    host.base.position.x, host.base.position.z = host_x, 0.75
    host.base.dimension.length, host.base.dimension.width, host.base.dimension.height = 4.5, 1.8, 1.5
    return view.SerializeToString()


def test_a_road_that_was_cut_is_built_again_once_the_host_has_moved_far():
    scene = Scene()
    updater = SceneUpdater(scene, warn=(warnings := []).append)
    extent = {}
    for host_x in (0.0, 0.6 * REBUILD_AFTER_M, 1.2 * REBUILD_AFTER_M):
        updater.apply(decode_sensor_view(_view(host_x)))
        mesh = scene.mesh_of(ENVIRONMENT_ID_BASE)
        extent[host_x] = (mesh, mesh.vertices[:, 0].min(), mesh.vertices[:, 0].max())
    first, same, moved = extent.values()
    assert same[0] is first[0]  # not yet: the cut still lies far beyond the terrain's reach
    assert moved[0] is not first[0]
    assert moved[1] > first[1] + REBUILD_AFTER_M and moved[2] > first[2] + REBUILD_AFTER_M
    assert sum("farther than" in w for w in warnings) == 2 and not any("Traceback" in w for w in warnings)


def test_a_road_that_cannot_be_built_fails_its_step_in_one_line_and_the_next_step_builds_it(monkeypatch):
    from lidar_fmu.world import scene_update

    real, calls = scene_update.build_road_world, []

    def out_of_memory_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise MemoryError
        return real(*args, **kwargs)

    monkeypatch.setattr(scene_update, "build_road_world", out_of_memory_once)
    model = OsiSensorModel(sensor="velodyne_vlp16")
    failed = model.step(_view(0.0), 0.1)
    assert not failed.valid and "out of memory" in failed.message and "\n" not in failed.message
    assert ENVIRONMENT_ID_BASE not in model.scene
    later = model.step(_view(0.0), 0.2)  # the same road bytes: built now
    assert later.valid and later.count > 0 and ENVIRONMENT_ID_BASE in model.scene and len(calls) == 2


def test_sizes_beyond_their_bounds_are_clamped_or_left_out_each_named_once():
    paint = _line(10, "SOLID_LINE", [[-50, -3.5, 0], [50, -3.5, 0]], width=1e9)
    kerb = _line(12, "CURB", [[-50, 3.5, 0], [50, 3.5, 0]], width=1e9, height=1e9)
    far = _line(13, "NO_LINE", [[-50, 6.0, 0], [50, 6.0, 0]])
    centre = _line(11, "DASHED_LINE", [[-50, 0, 0], [50, 0, 0]])
    lanes = (LaneStrip(1, "DRIVING", "NORMAL", np.zeros((0, 3)), (11,), (10,), (), ()),
             LaneStrip(2, "DRIVING", "NORMAL", np.zeros((0, 3)), (12,), (11,), (3,), ()),
             LaneStrip(3, "NONDRIVING", "SIDEWALK", np.zeros((0, 3)), (13,), (12,), (), (2,)))
    box = dict(position_m=(10.0, 8.0, 1.5), orientation_rad=(0.0, 0.0, 0.0))
    signs = (PlacedThing(40, "main:STOP", dimension_m=(0.01, 1e9, 0.8), **box),
             PlacedThing(41, "main:STOP", dimension_m=(0.01, 0.8, 0.8), **box))
    lights = (PlacedThing(50, "light", dimension_m=(0.3, 0.3, 1e9), **box),)
    markings = (PlacedThing(60, "GENERIC_SYMBOL", dimension_m=(1e9, 1.0, 0.0), **box),)
    road = RoadGroundTruth(lanes, (paint, centre, kerb, far), markings, signs, lights)
    world = build_road_world(road, 100.0)
    problems = world.problems
    for words in (("lane_boundary 10 (SOLID_LINE): width above 0.6 m", "taken as 0.6 m"),
                  ("lane_boundary 12 (CURB): width above 0.5 m",), ("lane_boundary 12 (CURB): height above 0.5 m",),
                  ("traffic_sign 40 (main:STOP): dimension.width 1e+09 m is above the 10 m", "left out"),
                  ("traffic_light 50: dimension.height 1e+09 m is above the 5 m",),
                  ("road_marking 60: dimension.length 1e+09 m is above the 200 m",)):
        assert sum(all(w in p for w in words) for p in problems) == 1, (words, problems)
    assert len(problems) == 6, problems  # nothing else: no sign blamed for the kerb
    ids = set(world.mesh.face_object_id.tolist())
    assert {41, 10, 12} <= ids and not {40, 50, 60} & ids
    z = world.mesh.vertices[:, 2]
    assert z.max() < 3.0  # the kerb lifts the sidewalk 0.5 m at most; the sign stands on it
    paint_faces = world.mesh.faces[world.mesh.face_object_id == 10]
    assert np.ptp(world.mesh.vertices[paint_faces.ravel(), 1]) == pytest.approx(LINE_BOUNDS_M["SOLID_LINE"][0],
                                                                               abs=1e-4)


def test_a_line_of_identical_points_is_named_when_it_is_left_out():
    same = _line(7, "SOLID_LINE", np.tile([[3.0, 4.0, 0.0]], (61, 1)))
    problems = build_road(RoadGroundTruth((), (same,))).problems
    assert problems == ["lane_boundary 7: its 61 points lie within 0.1 mm of one another (no length); left out"]
