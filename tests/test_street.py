"""The street around the road (environment: urban | suburban | rural | highway): built from the road's own edges,
the same for the same road, never on the road's surface or in an object's box, open at junctions, and the
``environment`` values accepted (FMU parameter, scenario, replay) or refused in one line."""
from __future__ import annotations

import os

import numpy as np
import pytest

from helpers.road_views import road_view
from lidar_fmu.errors import UserError
from lidar_fmu.geometry.scene import Scene
from lidar_fmu.geometry.semantic import SEMANTIC_CLASSES
from lidar_fmu.osi.decode import decode_sensor_view
from lidar_fmu.osi.ground_truth import BoundaryLine, LaneStrip, RoadGroundTruth, decode_road
from lidar_fmu.pointcloud import ENVIRONMENT_ID_BASE
from lidar_fmu.world import build_road_world
from lidar_fmu.world.road import RoadEdge, build_road
from lidar_fmu.world.scene_update import STREET_ID, SceneSettingError, SceneUpdater
from lidar_fmu.world.shapes import MeshBuilder
from lidar_fmu.world.street import (
    CLEARANCE_HEIGHT_M,
    STREET_STYLES,
    box_corners,
    build_street,
    chained_edges,
    end_pairs,
    street_mesh,
    street_seed,
)

#: what each style must build at least (semantic classes of its parts) on the test road
STYLE_CLASSES = {"urban": {"building", "vegetation", "pole", "traffic_sign"},
                 "suburban": {"building", "vegetation", "pole", "barrier"},
                 "rural": {"building", "vegetation", "pole", "barrier"},
                 "highway": {"vegetation", "pole", "barrier"}}


def line(points) -> np.ndarray:
    return np.asarray(points, float)


def boundary(line_id: int, points, kind: str = "SOLID_LINE") -> BoundaryLine:
    n = len(points)
    return BoundaryLine(line_id, kind, "WHITE", line(points), np.full(n, 0.12), np.zeros(n), np.zeros(n, np.int8))


def straight(x0, y0, x1, y1, n=41):
    return np.column_stack([np.linspace(x0, x1, n), np.linspace(y0, y1, n), np.zeros(n)])


def junction() -> RoadGroundTruth:
    """A 7 m road along x (−100…100 m) and a 7 m side road joining it from the north at x = 0 (y 3.5…100 m)."""
    boundaries = (boundary(10, straight(-100, -3.5, 100, -3.5)), boundary(11, straight(-100, 0, 100, 0), "DASHED_LINE"),
                  boundary(12, straight(-100, 3.5, 100, 3.5)),
                  boundary(20, straight(-3.5, 3.5, -3.5, 100)), boundary(21, straight(0, 3.5, 0, 100), "DASHED_LINE"),
                  boundary(22, straight(3.5, 3.5, 3.5, 100)))
    lanes = (LaneStrip(1, "DRIVING", "NORMAL", np.zeros((0, 3)), (11,), (10,), (2,), ()),
             LaneStrip(2, "DRIVING", "NORMAL", np.zeros((0, 3)), (12,), (11,), (), (1,)),
             LaneStrip(3, "DRIVING", "NORMAL", np.zeros((0, 3)), (20,), (21,), (4,), ()),
             LaneStrip(4, "DRIVING", "NORMAL", np.zeros((0, 3)), (21,), (22,), (), (3,)))
    return RoadGroundTruth(lanes, boundaries)


@pytest.fixture(scope="module")
def test_road():
    frame = decode_sensor_view(road_view())
    return frame, decode_road(frame.road_part, frame.country_code)


def streets(road_gt: RoadGroundTruth, style: str, boxes=None, seed: int = 1):
    road = build_road(road_gt, MeshBuilder())
    return road, build_street(road, style, 200.0, boxes, seed)


def inside_triangles(points_xy: np.ndarray, vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Which points lie inside any triangle's horizontal projection (edges excluded by 1 mm)."""
    hit = np.zeros(len(points_xy), bool)
    # points sorted by x: each triangle looks only at those within its x extent (a slice), not at all of them
    order = np.argsort(points_xy[:, 0], kind="stable")
    xs = points_xy[order, 0]
    for a, b, c in vertices[faces][:, :, :2]:
        lo, hi = np.minimum(np.minimum(a, b), c), np.maximum(np.maximum(a, b), c)
        span = order[np.searchsorted(xs, lo[0], "left"):np.searchsorted(xs, hi[0], "right")]
        near = span[np.all((points_xy[span] >= lo) & (points_xy[span] <= hi), axis=1)]
        if not len(near):
            continue
        p = points_xy[near]
        d = [np.cross(q - p0, p - p0) for p0, q in ((a, b), (b, c), (c, a))]
        scale = [np.linalg.norm(q - p0) for p0, q in ((a, b), (b, c), (c, a))]
        d = [di / max(si, 1e-12) for di, si in zip(d, scale)]
        inner = (np.all(np.array(d) > 1e-3, axis=0) | np.all(np.array(d) < -1e-3, axis=0))
        hit[near[inner]] = True
    return hit


def low_points(parts) -> np.ndarray:
    """Every vertex, and every triangle's centroid, of the parts' triangles that come below CLEARANCE_HEIGHT_M."""
    out = []
    for part in parts:
        v, f = part.shape
        tri = np.asarray(v)[np.asarray(f)]
        low = tri[:, :, 2].min(axis=1) < CLEARANCE_HEIGHT_M
        out += [tri[low].reshape(-1, 3), tri[low].mean(axis=1)]
    return np.concatenate(out)[:, :2]


@pytest.mark.parametrize("style", STREET_STYLES)
def test_each_style_builds_its_parts_off_the_road_surface(test_road, style):
    _, road_gt = test_road
    road, parts = streets(road_gt, style)
    assert STYLE_CLASSES[style] <= {p.semantic for p in parts}
    surface = road.builder.mesh("surface")
    assert not inside_triangles(low_points(parts), surface.vertices, surface.faces).any()
    mesh = street_mesh(parts)
    assert mesh is not None and mesh.face_semantic is not None
    assert {SEMANTIC_CLASSES[code] for code in np.unique(mesh.face_semantic)} == {p.semantic for p in parts}
    assert mesh.face_object_id is None  # the faces take their instance's id: the environment's


def test_the_same_road_gives_the_same_street_and_another_road_another(test_road):
    frame, road_gt = test_road
    seed = street_seed(frame.road_part)
    assert seed == street_seed(bytes(frame.road_part))
    first = street_mesh(streets(road_gt, "urban", seed=seed)[1])
    again = street_mesh(streets(road_gt, "urban", seed=seed)[1])
    other = street_mesh(streets(road_gt, "urban", seed=street_seed(frame.road_part + b"\0"))[1])
    assert first.vertices.tobytes() == again.vertices.tobytes() and first.faces.tobytes() == again.faces.tobytes()
    assert first.vertices.tobytes() != other.vertices.tobytes()


@pytest.mark.parametrize("style", STREET_STYLES)
def test_nothing_stands_in_a_ground_truth_objects_box(test_road, style):
    frame, road_gt = test_road
    # a parked van beside the road and a box on the verge, where the street would otherwise build
    boxes = box_corners(np.array([[10.0, 9.0, 1.0], [-20.0, -8.0, 1.0]]), np.array([0.3, 0.0]),
                        np.array([[6.0, 2.5, 2.0], [4.0, 4.0, 2.0]]))
    _, parts = streets(road_gt, style, boxes)
    points = low_points(parts)
    for corners in boxes:
        centre, (u, v) = corners.mean(axis=0), (corners[1] - corners[0], corners[3] - corners[0])
        a = (points - centre) @ u / (u @ u)
        b = (points - centre) @ v / (v @ v)
        assert not np.any((np.abs(a) < 0.5) & (np.abs(b) < 0.5))


def test_frontages_leave_a_gap_where_a_side_road_joins():
    road, parts = streets(junction(), "urban")
    buildings = np.concatenate([np.asarray(p.shape[0]) for p in parts if p.semantic == "building"])
    north = buildings[buildings[:, 1] > 3.5]
    assert np.any(north[:, 0] < -10) and np.any(north[:, 0] > 10)  # the frontage runs on both sides
    assert not np.any(np.abs(north[:, 0]) < 3.5)  # but not across the side road
    surface = road.builder.mesh("surface")
    assert not inside_triangles(low_points(parts), surface.vertices, surface.faces).any()


def test_the_scene_updater_builds_the_street_as_an_environment_instance():
    view = road_view()
    auto, urban = Scene(), Scene()
    SceneUpdater(auto).apply(decode_sensor_view(view))
    SceneUpdater(urban, environment="Urban").apply(decode_sensor_view(view))
    assert STREET_ID not in auto and STREET_ID in urban and STREET_ID > ENVIRONMENT_ID_BASE
    # the road itself is built as auto builds it
    frame = decode_sensor_view(view)
    road = decode_road(frame.road_part, frame.country_code)
    plain, with_street = build_road_world(road, 200.0), build_road_world(road, 200.0, street="urban")
    assert plain.street is None and with_street.street is not None
    assert plain.mesh.vertices.tobytes() == with_street.mesh.vertices.tobytes()


def test_an_unknown_style_is_refused_in_one_line_naming_the_key():
    with pytest.raises(SceneSettingError) as caught:
        SceneUpdater(Scene(), environment="urbn")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("environment:") and "did you mean 'urban'?" in message


def test_scenario_and_replay_take_the_styles_as_words(tmp_path):
    from lidar_fmu.tools.cli import build_parser, cmd_replay
    from lidar_fmu.tools.replay import load_scenario

    (tmp_path / "scenario.yaml").write_text("trace: t.osi\nenvironment: highway\n")
    assert load_scenario(tmp_path)["environment"] == "highway"  # a word, not a file in the scenario's folder
    args = build_parser().parse_args(["replay", str(tmp_path), "-o", str(tmp_path / "out"), "--environment", "rurl"])
    with pytest.raises(UserError, match=r"--environment 'rurl': no such mesh file \(did you mean 'rural'\?"):
        cmd_replay(args)


def test_the_fmu_parameter_names_the_styles():
    slave = os.path.join(os.path.dirname(__file__), os.pardir, "fmu", "lidar_sensor_slave.py")
    with open(slave, encoding="utf-8") as handle:
        text = handle.read()
    assert all(f'"{style}"' in text for style in STREET_STYLES)


def cut_road(pieces: int) -> RoadGroundTruth:
    """A 7 m road along x (−100…100 m) cut into ``pieces`` lanes one after another on each side (as a map cuts
    its lane segments at every crossing)."""
    boundaries, lanes = [], []
    xs = np.linspace(-100, 100, pieces + 1)
    for k in range(pieces):
        b = 100 + 3 * k
        boundaries += [boundary(b, straight(xs[k], -3.5, xs[k + 1], -3.5, 6)),
                       boundary(b + 1, straight(xs[k], 0, xs[k + 1], 0, 6), "DASHED_LINE"),
                       boundary(b + 2, straight(xs[k], 3.5, xs[k + 1], 3.5, 6))]
        lanes += [LaneStrip(10 * k + 1, "DRIVING", "NORMAL", np.zeros((0, 3)), (b + 1,), (b,), (10 * k + 2,), ()),
                  LaneStrip(10 * k + 2, "DRIVING", "NORMAL", np.zeros((0, 3)), (b + 2,), (b + 1,), (), (10 * k + 1,))]
    return RoadGroundTruth(tuple(lanes), tuple(boundaries))


def frontage_share(parts, side: float) -> float:
    """The share of the road's 200 m along which a building stands on the given side (+1 north, −1 south)."""
    covered = np.zeros(200, bool)
    for part in parts:
        if part.semantic != "building":
            continue
        xy = np.asarray(part.shape[0])[:, :2]
        if np.sign(xy[:, 1].mean()) == side:
            covered[int(np.clip(xy[:, 0].min() + 100, 0, 199)):int(np.clip(xy[:, 0].max() + 100, 0, 200))] = True
    return float(covered.mean())


def test_an_urban_frontage_runs_on_across_a_maps_cuts_and_its_buildings_touch():
    """A road cut into 20 m lane segments gets the frontage a road in one piece gets: the side edges are chained
    before the buildings are walked, and buildings side by side (no gap drawn) are not refused for touching."""
    shares = {}
    for pieces in (1, 10):
        _, parts = streets(cut_road(pieces), "urban")
        shares[pieces] = min(frontage_share(parts, 1.0), frontage_share(parts, -1.0))
    assert shares[10] > 0.7 and shares[1] > 0.7  # 20 % of the gaps are 3.5–5 m alleys: ≥ 80 % built, less ends


def side_edge(points, outward=(0.0, 1.0)) -> RoadEdge:
    """A side edge through ``points`` (x, y) facing ``outward`` at every point."""
    xy = np.asarray(points, float)
    n = len(xy)
    return RoadEdge(np.column_stack([xy, np.zeros(n)]), np.tile([*outward, 0.0], (n, 1)), 0.0, "asphalt")


@pytest.mark.parametrize("order", [(0, 1, 2), (0, 2, 1), (2, 1, 0), (1, 2, 0)])
def test_a_kerb_runs_on_round_its_blocks_corner_whatever_the_order_of_the_edges(order):
    """Three ends meet at one point, as where a map's lane boundary runs on across a junction and the kerb turns
    off into the side road: the kerb (outward: north) runs on into the edge that turns towards its outward side,
    round the block's corner, not across the junction's mouth; the order of the edges changes nothing."""
    edges = [side_edge([(-20, 0), (-10, 0), (0, 0)]),                # runs east into the point
             side_edge([(0, 0), (10, 0), (20, 0)]),                   # on across the junction
             side_edge([(0, 0), (7, 7), (14, 14)], (-0.7071, 0.7071))]  # the kerb turning north-east
    chains = chained_edges([edges[k] for k in order])
    assert sorted(len(points) for points, _ in chains) == [3, 5]
    round_the_corner = next(points for points, _ in chains if len(points) == 5)
    assert sorted(map(tuple, round_the_corner[[0, -1], :2].tolist())) == [(-20.0, 0.0), (14.0, 14.0)]


def test_end_pairs_are_every_pair_within_reach_and_no_other():
    rng = np.random.default_rng(3)
    ends = rng.uniform(0.0, 30.0, (1500, 2))
    ends[500:800] = ends[:300] + rng.normal(0.0, 0.2, (300, 2))  # many within reach of another
    i, j = end_pairs(ends, 0.5)
    gap = np.linalg.norm(ends[:, None] - ends[None], axis=2)
    want_i, want_j = np.nonzero((gap <= 0.5) & (np.arange(len(ends))[:, None] < np.arange(len(ends))[None]))
    assert sorted(zip(i.tolist(), j.tolist())) == sorted(zip(want_i.tolist(), want_j.tolist()))
    assert len(i) > 300


def test_twenty_thousand_cut_edges_chain_in_bounded_memory():
    """A large map's kerb cut into 20,000 pieces is one chain; the ends are paired through cells, not through a
    40,000 × 40,000 table of distances (12.8 GB)."""
    import tracemalloc

    xs = np.arange(20001, dtype=float) * 2.0
    edges = [side_edge([(xs[k], 0.0), (xs[k + 1], 0.0)]) for k in range(20000)]
    tracemalloc.start()
    chains = chained_edges(edges)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(chains) == 1 and len(chains[0][0]) == 20001
    assert peak < 100e6
