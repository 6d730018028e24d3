"""Ground truth becomes geometry (:mod:`lidar_fmu.world`), piece by piece, without a co-simulation.

Lines made surfaces, dashes where the trace puts them, the road's lanes, paint, kerbs and rails labelled by OSI id,
terrain that never runs onto a road, signs, and the class meshes of road users and stationary objects.
"""
import numpy as np
import pytest

from lidar_fmu.geometry.scene import INSTANCE_ID, Scene
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.osi.ground_truth import DASH_END, DASH_START, BoundaryLine, LaneStrip, PlacedThing, RoadGroundTruth
from lidar_fmu.scan.lidar import Lidar
from lidar_fmu.world import build_road_world, ground_plane_mesh, road_user_mesh
from lidar_fmu.world.lines import (
    chain,
    convex_hull,
    cut,
    fill_polygon,
    loft,
    polygon_problem,
    ribbon,
    signed_area,
)
from lidar_fmu.world.road import DEFAULT_DASH_M, STANDARD_DASHES_M, build_road, dash_intervals
from lidar_fmu.world.roadside import class_mesh, plate_outline


def area(vertices, faces) -> float:
    a, b, c = vertices[faces[:, 0]], vertices[faces[:, 1]], vertices[faces[:, 2]]
    return float(0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1).sum())


def line(y, x0=-50.0, x1=50.0, n=21, z=0.0):
    x = np.linspace(x0, x1, n)
    return np.column_stack([x, np.full(n, y), np.full(n, z)])


# -- lines ----------------------------------------------------------------------------------------------------------
def test_a_loft_between_two_sides_covers_the_lane_once_facing_up():
    left, right = line(1.75, n=11), line(-1.75, n=37)  # different point counts
    vertices, faces = loft(left, right)
    assert area(vertices, faces) == pytest.approx(100.0 * 3.5, rel=1e-9)
    a, b, c = vertices[faces[:, 0]], vertices[faces[:, 1]], vertices[faces[:, 2]]
    assert np.all(np.cross(b - a, c - a)[:, 2] > 0)  # every triangle faces up
    assert len(faces) == 11 + 37 - 2


def test_a_ribbon_is_as_wide_as_its_line_and_follows_a_bend():
    angle = np.linspace(0, np.pi / 2, 40)
    arc = np.column_stack([20 * np.cos(angle), 20 * np.sin(angle), np.zeros(40)])
    vertices, faces = ribbon(arc, 0.15)
    assert area(vertices, faces) == pytest.approx(0.15 * 20 * np.pi / 2, rel=1e-3)


def test_cut_and_chain_keep_arc_length():
    points = line(0.0)
    s = np.linspace(0, 100, 21)
    piece = cut(points, s, 12.5, 20.0)
    assert piece[0][0] == pytest.approx(-37.5) and piece[-1][0] == pytest.approx(-30.0)
    joined = chain([line(0.0, 10, 20, 3), line(0.0, -10, 0, 3)[::-1], line(0.0, 0, 10, 3)])
    if joined[0, 0] > joined[-1, 0]:  # (a chain runs either way: its caller aligns it with the lane's other side)
        joined = joined[::-1]
    assert np.all(np.diff(joined[:, 0]) > 0) and joined[0, 0] == -10 and joined[-1, 0] == 20


def test_polygons_are_filled_in_either_orientation_and_bad_ones_named():
    l_shape = np.array([[0, 0], [2, 0], [2, 1], [1, 1], [1, 2], [0, 2]], float)
    for polygon in (l_shape, l_shape[::-1]):
        faces = fill_polygon(polygon)
        assert len(faces) == 4
        flat = np.column_stack([polygon, np.zeros(len(polygon))])
        assert area(flat, faces) == pytest.approx(3.0)
    bow_tie = np.array([[0, 0], [1, 1], [1, 0], [0, 1]], float)
    assert polygon_problem(bow_tie) == "edges that cross each other"
    assert polygon_problem(l_shape) == "" and polygon_problem(l_shape[:2]) == "fewer than 3 vertices"
    hull = convex_hull(bow_tie)
    assert signed_area(bow_tie[hull]) == pytest.approx(1.0)


# -- dashes ----------------------------------------------------------------------------------------------------------
def boundary(points, kind="DASHED_LINE", dash=None, width=0.12, height=0.0, line_id=7, color="WHITE"):
    n = len(points)
    return BoundaryLine(line_id, kind, color, np.asarray(points, float), np.full(n, width), np.full(n, height),
                        np.zeros(n, np.int8) if dash is None else np.asarray(dash, np.int8))


def test_dashes_follow_the_points_dash_states():
    xs = [0.0, 3.0, 3.0 + 1.0, 9.0, 12.0, 15.0]  # START END START (continue) END START END
    dash = [DASH_START, DASH_END, DASH_START, 3, DASH_END, DASH_START]
    b = boundary(np.column_stack([xs, np.zeros(6), np.zeros(6)]), dash=dash)
    intervals = dash_intervals(b, np.array(xs), 0, problems := [])
    assert intervals.tolist() == [[0.0, 3.0], [4.0, 12.0], [15.0, 15.0]] and problems == []


def test_dashes_by_osi_point_rule_and_a_standard_pattern_for_evenly_sampled_lines():
    # esmini's way: a point at each dash's start and end (4 m dashes, 8 m gaps)
    xs = np.array([0.0, 4.0, 12.0, 16.0, 24.0, 28.0])
    b = boundary(np.column_stack([xs, np.zeros(6), np.zeros(6)]))
    assert dash_intervals(b, xs, 0, []).tolist() == [[0, 4], [12, 16], [24, 28]]
    # OSI3Test's way: points every 5 m along a dashed line say nothing of its dashes: the country's standard
    xs = np.arange(0.0, 101.0, 5.0)
    b = boundary(np.column_stack([xs, np.zeros(len(xs)), np.zeros(len(xs))]))
    dash, gap = DEFAULT_DASH_M
    assert dash_intervals(b, xs, 276, [])[:2].tolist() == [[0, dash], [dash + gap, 2 * dash + gap]]
    us_dash, us_gap = STANDARD_DASHES_M[840]
    assert dash_intervals(b, xs, 840, [])[1, 0] == pytest.approx(us_dash + us_gap)  # MUTCD: 10 ft / 30 ft


def test_dash_states_out_of_order_are_named_and_fall_back():
    xs = np.array([0.0, 3.0, 9.0, 12.0])
    b = boundary(np.column_stack([xs, np.zeros(4), np.zeros(4)]), dash=[DASH_END, DASH_START, DASH_END, DASH_START])
    problems: list[str] = []
    intervals = dash_intervals(b, xs, 0, problems)
    assert len(problems) == 1 and "lane_boundary 7" in problems[0] and "out of order" in problems[0]
    assert intervals.tolist() == [[0, 3], [9, 12]]  # OSI's point rule instead


# -- the road --------------------------------------------------------------------------------------------------------
def two_lane_road(extra_boundaries=(), lanes=None) -> RoadGroundTruth:
    """Two driving lanes (ids 1, 2) between a solid edge (10), a dashed centre line (11) and a kerb (12) with a
    sidewalk (3) up to a last line (13)."""
    boundaries = [boundary(line(-3.5), "SOLID_LINE", line_id=10, width=0.15),
                  boundary(line(0.0)[[0, -1]], "DASHED_LINE", line_id=11),
                  boundary(line(3.5), "CURB", line_id=12, width=0.0, height=0.15),
                  boundary(line(6.0), "NO_LINE", line_id=13, width=0.0)] + list(extra_boundaries)
    lanes = lanes or [LaneStrip(1, "DRIVING", "NORMAL", np.zeros((0, 3)), (11,), (10,), (2,), ()),
                      LaneStrip(2, "DRIVING", "NORMAL", np.zeros((0, 3)), (12,), (11,), (3,), (1,)),
                      LaneStrip(3, "NONDRIVING", "SIDEWALK", np.zeros((0, 3)), (13,), (12,), (), (2,))]
    return RoadGroundTruth(tuple(lanes), tuple(boundaries))


def faces_of(mesh, osi_id):
    ids = mesh.face_object_id
    return mesh.faces[ids == np.uint64(osi_id)]


def test_lanes_paint_and_kerbs_carry_their_osi_ids_and_materials():
    road = build_road(two_lane_road())
    mesh = road.builder.mesh("road")
    names = np.array(mesh.material_names)[mesh.face_material]
    for lane_id, material in ((1, "ir:asphalt"), (2, "ir:asphalt"), (3, "ir:concrete")):
        faces = faces_of(mesh, lane_id)
        assert area(mesh.vertices.astype(float), faces) == pytest.approx(100 * (2.5 if lane_id == 3 else 3.5))
        assert set(names[mesh.face_object_id == np.uint64(lane_id)]) == {material}
    edge = faces_of(mesh, 10)
    assert area(mesh.vertices.astype(float), edge) == pytest.approx(100 * 0.15, rel=1e-6)
    assert set(names[mesh.face_object_id == np.uint64(10)]) == {"ir:road_marking_white"}
    # the sidewalk stands on the kerb's height; the kerb is its face
    sidewalk = mesh.vertices[faces_of(mesh, 3).ravel()]
    assert sidewalk[:, 2].min() == pytest.approx(0.15, abs=1e-6)
    kerb = mesh.vertices[faces_of(mesh, 12).ravel()]
    assert kerb[:, 2].min() == pytest.approx(0.0, abs=1e-6) and kerb[:, 2].max() == pytest.approx(0.15, abs=1e-6)
    assert road.problems == []


def test_the_road_ends_where_its_outer_edges_are_and_ground_goes_on_beyond():
    road = build_road(two_lane_road())
    outer = sorted(e.points[0, 1] for e in road.edges if not e.cap)
    assert outer == [-3.5, 6.0]  # the edge line and the sidewalk's far line, not the centre line or the kerb
    beyond = [e for e in road.edges if not e.cap and e.points[0, 1] == 6.0][0]
    assert beyond.lift_m == pytest.approx(0.15)  # the ground past the sidewalk starts at its height
    world = build_road_world(two_lane_road(), 120.0)
    ground = world.mesh.face_object_id == INSTANCE_ID
    vertices = world.mesh.vertices[world.mesh.faces[ground].ravel()]
    assert vertices[:, 1].min() < -100 and vertices[:, 1].max() > 100  # out to the reach, both sides
    assert vertices[:, 0].min() < -150 and vertices[:, 0].max() > 150  # and past the road's ends
    # nowhere does ground come up through the road: under it, it lies below the surface
    centroid = world.mesh.vertices[world.mesh.faces[ground]].mean(axis=1)
    on_road = (np.abs(centroid[:, 0]) < 50) & (centroid[:, 1] > -3.5) & (centroid[:, 1] < 3.5)
    assert not on_road.any() or centroid[on_road, 2].max() < 0.0


def test_a_guard_rail_is_a_beam_on_posts_at_its_height_and_walls_stand_as_high_as_they_say():
    rail = boundary(line(-5.0), "GUARD_RAIL", line_id=20, width=0.0, height=0.75)
    wall = boundary(line(9.0), "SOUND_BARRIER", line_id=21, width=0.2, height=4.0)
    lanes = [LaneStrip(1, "DRIVING", "", np.zeros((0, 3)), (11,), (20,), (), ()),
             LaneStrip(2, "DRIVING", "", np.zeros((0, 3)), (21,), (11,), (), ())]
    mesh = build_road(RoadGroundTruth(tuple(lanes), (rail, wall, boundary(line(0.0)[[0, -1]], line_id=11)))).builder.mesh("r")
    beam = mesh.vertices[faces_of(mesh, 20).ravel()]
    assert beam[:, 2].max() == pytest.approx(0.75, abs=1e-6) and beam[:, 2].min() == pytest.approx(0.0, abs=1e-6)
    assert len(faces_of(mesh, 20)) > 50 * 12  # posts every 2 m and the beam's corrugations
    sound = mesh.vertices[faces_of(mesh, 21).ravel()]
    assert sound[:, 2].max() == pytest.approx(4.0, abs=1e-5) and np.ptp(sound[:, 1]) == pytest.approx(0.2, abs=1e-5)


def test_lanes_from_centerlines_alone_take_their_width_from_their_neighbours():
    lanes = [LaneStrip(1, "DRIVING", "", line(-1.6), (), (), (2,), ()),
             LaneStrip(2, "DRIVING", "", line(1.6), (), (), (), (1,))]
    mesh = build_road(RoadGroundTruth(tuple(lanes))).builder.mesh("r")
    for lane_id in (1, 2):
        assert area(mesh.vertices.astype(float), faces_of(mesh, lane_id)) == pytest.approx(100 * 3.2, rel=1e-6)


def test_a_lane_width_from_neighbours_is_their_gaps_median_on_an_uneven_road():
    from lidar_fmu.world.road import _lane_width

    rng = np.random.default_rng(7)
    cases = {"uneven": (line(3.0, n=17) + [0, 1, 0] * rng.uniform(0, 1, (17, 1)),
                        line(-2.5, n=23) + [1, 0, 0] * rng.uniform(-1, 1, (23, 1))),
             "one beyond the bounds": (line(3.0, n=17), line(-25.0, n=5)),
             # two gaps, 0.6 and 19 m: their mean, 9.8 m, is kept though one of them lies past the bound
             "gaps astride the bound": (line(3.0, n=17), np.array([[-50.0, -0.6, 0.0], [50.0, -19.0, 0.0]]))}
    for name, sides in cases.items():
        own = line(0.0, n=2) if name == "gaps astride the bound" else line(0.0, n=41)
        centerlines = {1: own, 2: sides[0], 3: sides[1]}
        # every point against every point: the width's definition, on a small lane
        gaps = [np.median(np.hypot(*(own[:, None, :2] - other[None, :, :2]).transpose(2, 0, 1)).min(axis=1))
                for other in sides]
        kept = [gap for gap in gaps if 0.5 <= gap <= 10.0]
        lane = LaneStrip(1, "DRIVING", "", own, (), (), (2,), (3,))
        assert _lane_width(lane, centerlines) == np.median(kept), name


def test_a_lane_of_20000_centerline_points_takes_its_width_in_bounded_memory():
    import time
    import tracemalloc

    lanes = [LaneStrip(k, "DRIVING", "", line(3.5 * k, x0=-1000.0, x1=1000.0, n=20_000), (), (),
                       (k + 1,) if k < 3 else (), (k - 1,) if k > 1 else ()) for k in (1, 2, 3)]
    build_road(RoadGroundTruth(tuple(lanes[1:2])))  # compiles what the build needs, outside the measurement
    tracemalloc.start()
    start_s = time.perf_counter()
    try:
        mesh = build_road(RoadGroundTruth(tuple(lanes))).builder.mesh("r")
        peak_b = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # every centerline point against every neighbour point would be 20,000² distances: 3.2 GB apiece
    assert peak_b < 200e6 and time.perf_counter() - start_s < 10.0
    assert area(mesh.vertices.astype(float), faces_of(mesh, 2)) == pytest.approx(2000 * 3.5, rel=1e-6)


def test_a_double_line_between_two_lanes_is_paved_not_ground():
    lines = [boundary(line(-3.5), "SOLID_LINE", line_id=10), boundary(line(-0.15), "SOLID_LINE", line_id=11),
             boundary(line(0.15), "SOLID_LINE", line_id=12), boundary(line(3.5), "SOLID_LINE", line_id=13)]
    lanes = [LaneStrip(1, "DRIVING", "", np.zeros((0, 3)), (11,), (10,), (2,), ()),
             LaneStrip(2, "DRIVING", "", np.zeros((0, 3)), (13,), (12,), (), (1,))]
    road = build_road(RoadGroundTruth(tuple(lanes), tuple(lines)))
    assert sorted(e.points[0, 1] for e in road.edges if not e.cap) == [-3.5, 3.5]
    mesh = road.builder.mesh("r")
    assert area(mesh.vertices.astype(float), faces_of(mesh, 1)) == pytest.approx(100 * 3.35, rel=1e-6)
    # the strip between the two lines: paved, labelled as the lane on its left
    assert area(mesh.vertices.astype(float), faces_of(mesh, 2)) == pytest.approx(100 * (3.35 + 0.3), rel=1e-6)


def test_markings_signs_and_lights_from_their_boxes_and_polygons():
    arrow = np.array([[-2, -0.2], [1, -0.2], [1, -0.5], [2, 0], [1, 0.5], [1, 0.2], [-2, 0.2]], float)
    road = RoadGroundTruth(*two_lane_road().__dict__.values())
    road = RoadGroundTruth(road.lanes, road.boundaries,
                           markings=(PlacedThing(30, "GENERIC_SYMBOL", (10.0, -1.75, 0.0), (0, 0, 0), (4, 1, 0),
                                                 arrow, "WHITE"),
                                     PlacedThing(31, "GENERIC_LINE", (20.0, -1.75, 0.0), (0, 0, 0.1), (0.5, 3.0, 0))),
                           signs=(PlacedThing(40, "main:STOP", (30.0, 7.0, 2.2), (0, 0, np.pi), (0.003, 0.6, 0.6)),),
                           lights=(PlacedThing(50, "light", (40.0, -4.0, 5.0), (0, 0, np.pi), (0.1, 0.3, 0.3)),))
    world = build_road_world(road, 120.0)
    mesh = world.mesh
    assert area(mesh.vertices.astype(float), faces_of(mesh, 30)) == pytest.approx(1.2 + 0.5, abs=1e-4)  # shaft, head
    assert area(mesh.vertices.astype(float), faces_of(mesh, 31)) == pytest.approx(1.5, abs=1e-4)
    names = np.array(mesh.material_names)[mesh.face_material]
    sign = names[mesh.face_object_id == np.uint64(40)]
    assert {"ir:retroreflector", "ir:aluminum"} <= set(sign)
    post = mesh.vertices[faces_of(mesh, 40).ravel()]
    assert post[:, 2].min() == pytest.approx(0.15, abs=1e-3)  # down to the ground under it (the sidewalk)
    assert len(faces_of(mesh, 50)) > 12 and world.problems == ()


def test_sign_plates_take_their_types_outline():
    assert len(plate_outline("main:STOP", 0.6, 0.6)) == 8
    assert len(plate_outline("main:DANGER_SPOT", 0.9, 0.8)) == 3
    assert len(plate_outline("main:SPEED_LIMIT_BEGIN", 0.6, 0.6)) == 24
    assert len(plate_outline("supplementary", 0.6, 0.3)) == 4


# -- class meshes ----------------------------------------------------------------------------------------------------
def test_class_meshes_fill_the_unit_box_and_are_built_once():
    for mesh in (road_user_mesh("car", "car_paint_white"), road_user_mesh("pedestrian"),
                 class_mesh("tree"), class_mesh("pylon")):
        np.testing.assert_allclose(mesh.bounds, [[-0.5] * 3, [0.5] * 3], atol=1e-6)
    assert road_user_mesh("car", "car_paint_white") is road_user_mesh("car", "car_paint_white")
    assert road_user_mesh("rocket") is None
    plates = set(np.array(road_user_mesh("car").material_names))
    assert {"ir:retroreflector", "ir:glass_clear", "ir:rubber_tyre"} <= plates


def test_a_vlp32c_sees_bollards_and_parked_bicycles_as_the_real_unit_does():
    """The shared Argoverse 2 drive's bollards (0.42 × 0.16 × 0.95 m, 0.25 × 0.34 × 0.94 m) at 14–15 m and parked
    bicycles (1.6 × 0.5 × 1.2 m) at 20–27 m: its VLP-32C sees each with ≥ 5 points (5–7 and 21–34 in one sweep);
    so does ours, standing on open ground."""
    from lidar_fmu.sensors.spec import resolve_spec

    objects = {1: (class_mesh("pole"), (14.0, 0.0, 0.475), (0.42, 0.16, 0.95), 0.3),
               2: (class_mesh("pole"), (15.0, 3.0, 0.47), (0.25, 0.34, 0.94), 0.0),
               3: (road_user_mesh("bicycle", "car_paint_white", False), (20.0, -4.0, 0.6), (1.62, 0.5, 1.2), 1.2),
               4: (road_user_mesh("bicycle", "car_paint_black", False), (27.0, -8.0, 0.6), (1.61, 0.5, 1.21), 1.4)}
    scene = Scene()
    for object_id, (mesh, centre, size, yaw) in objects.items():
        scene.add_instance(object_id, mesh, pose_matrix(centre, (0.0, 0.0, yaw)) @ np.diag([*size, 1.0]))
    cloud = Lidar(scene, resolve_spec("velodyne_vlp32c")).scan(pose_matrix((0.0, 0.0, 1.64)))  # the drive's height
    for object_id in objects:
        assert (cloud.points["object_id"] == object_id).sum() >= 5, object_id


def test_beams_through_a_cars_side_windows_cross_its_cabin_over_the_backrests():
    """A horizontal fan through a parked car's side glass, 0.18 m over its belt line (over the backrests, under the
    head restraints): three in four rays leave by the far windows and reach a wall behind (the rest meet pillars),
    as the drive's VLP-32C sees bollards through parked cars; seats filling the window band stop far more."""
    from lidar_fmu.world.road_users import CAR_SPECS

    spec = CAR_SPECS["car"]
    size = (spec["length_m"], spec["width_m"], spec["height_m"])
    scene = Scene()
    scene.add_instance(1, road_user_mesh("car", "car_paint_white"), pose_matrix((0.0, 0.0, 0.5 * size[2]))
                       @ np.diag([*size, 1.0]))
    scene.add_instance(2, class_mesh("wall"), pose_matrix((0.0, 6.0, 1.0)) @ np.diag([40.0, 0.3, 3.0, 1.0]))
    fan = {"horizontal_fov_deg": [60, 120], "horizontal_resolution_deg": 0.05, "vertical_fov_deg": [-0.01, 0.01],
           "channels": 2, "max_range_m": 100}
    cloud = Lidar(scene, fan).scan(pose_matrix((0.0, -4.0, spec["belt_m"] + 0.18)))
    d = cloud.pattern.directions
    through_glass = np.abs(d[:, 0] * (4.0 - 0.5 * size[1]) / d[:, 1]) < 1.2  # between the A and C pillars
    reached = dict(zip(cloud.ray_index.tolist(), cloud.points["object_id"].tolist()))
    assert np.mean([reached.get(k, -1) == 2 for k in np.flatnonzero(through_glass)]) > 0.7


def test_road_users_paints_follow_the_world_s_colour_shares_and_dark_paints_return_little():
    from lidar_fmu.physics.materials import load_database
    from lidar_fmu.world.road_users import PAINT_SHARES, paint_of

    ids = np.arange(1, 20001)
    drawn = np.array([paint_of(i) for i in ids])
    assert [paint_of(i) for i in ids[:50]] == list(drawn[:50])  # the same id keeps its paint
    wanted: dict[str, float] = {}
    for name, share in PAINT_SHARES:
        wanted[name] = wanted.get(name, 0.0) + share
    for name, share in wanted.items():
        assert np.mean(drawn == name) == pytest.approx(share, abs=0.01)
    database = load_database(905.0)
    dark = np.mean([float(database[name].reflectance_at(0.0)) < 0.1 for name in drawn])
    assert dark == pytest.approx(0.19 + 0.18 + 0.07, abs=0.01)  # black, grey and blue: carbon black absorbs the NIR


def test_a_tree_crown_lets_part_of_a_beam_through_and_gives_several_echoes():
    scene = Scene()
    scene.add_instance(7, class_mesh("tree"), pose_matrix((20.0, 0.0, 3.5)) @ np.diag([5.0, 5.0, 7.0, 1.0]))
    spec = {"horizontal_fov_deg": [-8, 8], "horizontal_resolution_deg": 0.2, "vertical_fov_deg": [2, 12],
            "channels": 40, "max_range_m": 100, "returns": "dual", "beam_divergence_mrad": 3.0}
    cloud = Lidar(scene, spec).scan(pose_matrix((0.0, 0.0, 1.5)))
    crown = cloud.points[cloud.points["z"] > 1.5]  # the crown lies above the trunk (rays from 1.5 m going up)
    assert len(crown) > 200
    second = crown["echo"] == 1
    assert second.sum() > 0.1 * (~second).sum()  # beams split between leaves at different depths
    rays = len(np.unique(cloud.ray_index)), len(cloud.pattern.directions)
    assert rays[0] < rays[1]  # some rays passed through the crown and met nothing


def test_the_ground_plane_is_asphalt_under_its_origin():
    mesh = ground_plane_mesh(300.0)
    np.testing.assert_allclose(mesh.bounds, [[-300, -300, 0], [300, 300, 0]])
    assert mesh.material_names == ("ir:asphalt",)


def test_a_source_with_only_logical_lanes_gets_its_lanes_from_them():
    """OSI 3.6's reference lines with logical lanes and logical boundaries (points with world positions), no
    physical lanes: the road is built from the logical ones."""
    from osi3.osi_groundtruth_pb2 import GroundTruth

    from lidar_fmu.osi.ground_truth import decode_road

    gt = GroundTruth()
    line = gt.reference_line.add()
    line.id.value = 1
    for y, boundary_id in ((-3.5, 20), (0.0, 21), (3.5, 22)):
        boundary = gt.logical_lane_boundary.add()
        boundary.id.value = boundary_id
        boundary.reference_line_id.value = 1
        for x in (-50.0, 0.0, 50.0):
            point = boundary.boundary_line.add()
            point.position.x, point.position.y = x, y
            point.s_position, point.t_position = x + 50.0, y
    for lane_id, right, left in ((30, 20, 21), (31, 21, 22)):
        lane = gt.logical_lane.add()
        lane.id.value = lane_id
        lane.type = lane.TYPE_NORMAL
        lane.reference_line_id.value = 1
        lane.right_boundary_id.add().value = right
        lane.left_boundary_id.add().value = left
    road = decode_road(gt.SerializeToString())
    assert road.logical and [lane.id for lane in road.lanes] == [30, 31] and road.problems == ()
    mesh = build_road(road).builder.mesh("r")
    for lane_id in (30, 31):
        assert area(mesh.vertices.astype(float), faces_of(mesh, lane_id)) == pytest.approx(100 * 3.5, rel=1e-6)


# -- the ground without holes or steps -------------------------------------------------------------------------------
def street_and_side_road(sidewalk_z: float) -> RoadGroundTruth:
    """A street and, 30 m beside it, a one-lane road, each 200 m long along x, from +y to −y:

        y  6.0   NO_LINE (its points at ``sidewalk_z``: a trace that gives the sidewalk's height)    boundary 24
                 sidewalk (NONDRIVING/SIDEWALK)                                                       lane 4
        y  3.5   CURB 0.15 m                                                                          boundary 23
                 driving lanes 3 and 2 on either side of a dashed line at y 0                         boundary 22
        y −3.5   SOLID_LINE (a painted edge)                                                          boundary 21
                 shoulder (NONDRIVING/SHOULDER)                                                       lane 1
        y −5.0   GUARD_RAIL 0.75 m                                                                    boundary 20
        y −35.0  SOLID_LINE, the side road's painted edge                                             boundary 30
                 the side road's lane 6 (its right side free: no boundary, no neighbour)
        y −38.5  (mirrored from the lane's centerline)
    """
    x = (-100.0, 100.0)
    boundaries = [boundary(line(6.0, *x, z=sidewalk_z), "NO_LINE", line_id=24, width=0.0),
                  boundary(line(3.5, *x), "CURB", line_id=23, width=0.0, height=0.15),
                  boundary(line(0.0, *x)[[0, -1]], "DASHED_LINE", line_id=22),
                  boundary(line(-3.5, *x), "SOLID_LINE", line_id=21, width=0.15),
                  boundary(line(-5.0, *x), "GUARD_RAIL", line_id=20, width=0.0, height=0.75),
                  boundary(line(-35.0, *x), "SOLID_LINE", line_id=30, width=0.15)]
    none = np.zeros((0, 3))
    lanes = [LaneStrip(4, "NONDRIVING", "SIDEWALK", none, (24,), (23,), (), (3,)),
             LaneStrip(3, "DRIVING", "NORMAL", none, (23,), (22,), (4,), (2,)),
             LaneStrip(2, "DRIVING", "NORMAL", none, (22,), (21,), (3,), (1,)),
             LaneStrip(1, "NONDRIVING", "SHOULDER", none, (21,), (20,), (2,), ()),
             LaneStrip(6, "DRIVING", "NORMAL", line(-36.75, *x), (30,), (), (), ())]
    return RoadGroundTruth(tuple(lanes), tuple(boundaries))


def surface_below(mesh, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Height of the topmost surface of ``mesh`` (a mesh or a scene) under each (x, y) (NaN: nothing there), by rays
    cast straight down."""
    from lidar_fmu.raycast.factory import make_backend

    backend = make_backend("embree", mesh if isinstance(mesh, Scene) else Scene.from_meshes([mesh]))
    top = 50.0
    origins = np.column_stack([x, y, np.full(len(x), top)])
    hits = backend.cast(origins, np.tile([0.0, 0.0, -1.0], (len(x), 1)))
    return np.where(hits.hit, top - hits.range_m, np.nan)


@pytest.mark.parametrize("sidewalk_z", [0.0, 0.15])
def test_ground_covers_everything_between_and_beyond_the_roads_at_the_heights_the_ground_truth_implies(sidewalk_z):
    """Rays cast down on a 1 m grid within 100 m of the street's middle meet a surface everywhere (between the
    street and the side road, past the rail, the painted edges and the free side, past the roads' ends); a painted
    edge lifts nothing, the 0.15 m kerb lifts the sidewalk once whether the trace's points already stand at its
    height or not, and the ground behind the sidewalk goes on at the sidewalk's height."""
    mesh = build_road_world(street_and_side_road(sidewalk_z), 100.0).mesh
    gx, gy = np.meshgrid(np.arange(-99.5, 100.0, 1.0), np.arange(-99.5, 100.0, 1.0))
    z = surface_below(mesh, gx.ravel(), gy.ravel())
    assert np.isfinite(z).all(), f"{np.isnan(z).sum()} of {z.size} rays down meet nothing"

    def height(y0: float, y1: float) -> float:
        y = np.linspace(y0, y1, 9)
        return float(np.median(surface_below(mesh, np.repeat(np.arange(-40.0, 41.0, 10.0), 9),
                                             np.tile(y, 9))))

    road = height(-3.0, 3.0)
    assert road == pytest.approx(0.0, abs=0.01)
    assert height(4.0, 5.5) - road == pytest.approx(0.15, abs=0.03)  # the sidewalk, lifted once
    assert height(7.0, 15.0) - road == pytest.approx(0.15, abs=0.03)  # the ground behind it, at its height
    assert height(-14.0, -6.0) == pytest.approx(0.0, abs=0.03)  # past the rail
    assert height(-34.8, -34.0) == pytest.approx(0.0, abs=0.03)  # past the side road's painted edge: no kerb
    assert height(-60.0, -40.0) == pytest.approx(0.0, abs=0.03)  # past its free side
    assert height(-30.0, -10.0) == pytest.approx(0.0, abs=0.03)  # between the two roads




def lane_bending_down(heading_deg: float = 10.0, grade: float = 0.04):
    """(ground truth, surface height at arc length s) of a lane 3.5 wide from (0, 0, 3) on, bent ``heading_deg``
    to +y and going down ``grade`` for 100 m, its sides' points 5 m apart (a map's sparse vertices)."""
    s = np.arange(0.0, 100.1, 5.0)
    heading = np.radians(heading_deg)
    along, left = np.array([np.cos(heading), np.sin(heading)]), np.array([-np.sin(heading), np.cos(heading)])

    def side(offset_m: float) -> np.ndarray:
        return np.column_stack([s[:, None] * along + offset_m * left, 3.0 - grade * s])

    boundaries = [boundary(side(1.75), "NO_LINE", line_id=42, width=0.0),
                  boundary(side(-1.75), "NO_LINE", line_id=43, width=0.0)]
    lanes = [LaneStrip(8, "DRIVING", "NORMAL", np.zeros((0, 3)), (42,), (43,))]
    return RoadGroundTruth(tuple(lanes), tuple(boundaries)), (lambda at: 3.0 - grade * at)


def test_the_ground_carried_on_past_an_open_end_stops_where_it_comes_onto_the_road():
    """A side edge that ends with no road point within a metre of the point a metre on (here the lane before
    the bending one, its own points left out; on the Argoverse 2 drive the next lane's first point lay 2.8 m on
    and the side's own end a rounding error past the probe) is carried on past its end as the ground past a road
    that ends: it stops where it comes onto a road, as the rings out from an edge do. It does not run on 200 m
    straight at its end's height over the road that goes on, bending away and down (on the drive: grass 2.2 m
    above the road 60 m on, 0.2 m above the roof lidar)."""
    from lidar_fmu.world.road import Road, RoadEdge
    from lidar_fmu.world.shapes import MeshBuilder
    from lidar_fmu.world.terrain import build_terrain

    ground_truth, surface_z = lane_bending_down()
    lane = build_road(ground_truth)
    x = np.arange(-50.0, 0.1, 5.0)
    side = np.column_stack([x, np.full(len(x), 1.75), np.full(len(x), 3.0)])
    ending = RoadEdge(side, np.tile([0.0, 1.0, 0.0], (len(x), 1)), 0.0, "grass")
    terrain = MeshBuilder()
    build_terrain(terrain, Road(terrain, lane.points, [ending]), 200.0)
    mesh = Scene.from_meshes([lane.builder.mesh("lane"), terrain.mesh("terrain")])
    s, offset = np.meshgrid(np.arange(1.0, 90.0, 0.5), np.arange(-1.5, 1.6, 0.25))
    heading = np.radians(10.0)
    x = s * np.cos(heading) - offset * np.sin(heading)
    y = s * np.sin(heading) + offset * np.cos(heading)
    above = surface_below(mesh, x.ravel(), y.ravel()) - surface_z(s.ravel())
    assert np.abs(above).max() < 0.02, f"{(above >= 0.02).sum()} points of the lane roofed, up to {above.max():.2f} m"
