"""Any OSI source, a scene that looks like the road: ground-truth-only SensorViews and real tools' traces, scanned by an
Ouster OS1-128 on the host's roof (the roof of its 1.5 m box: 1.6 m above the road).

What a perception stack looks for: most rays return on a flat road, markings and signs stand out from the asphalt,
dashes lie where the trace puts them, a kerb lifts the sidewalk, guard rails and ground past the road, the returns
labelled with the OSI ids of what they hit, road users shaped (not boxes) and inside their boxes; bad ground truth
stays local to the element that has it.
"""
import json
import math
import os

import numpy as np
import pytest

from helpers.road_views import (
    BOUNDARIES,
    DASH_M,
    LANES,
    ROAD_USERS,
    SIGN,
    dash_starts,
    road_view,
)
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.pointcloud import ENVIRONMENT_ID_BASE, NO_OBJECT_ID
from lidar_fmu.tools.cli import main as cli_main
from lidar_fmu.world.scene_update import GROUND_PLANE_ID
from lidar_fmu.world.terrain import VERGE_DROP_M

DATA = os.path.join(os.path.dirname(__file__), "data", "osi")
ROOF = 1.3  # above the rear axle (0.3 m up): the top of the host's 1.5 m box, plus 0.1 m
ASPHALT_LANES = (12, 13)


def scan(view: bytes, time_s: float = 0.1, **options):
    warnings: list[str] = []
    model = OsiSensorModel(sensor="ouster_os1_128", warn=warnings.append, **options)
    result = model.step(view, time_s)
    assert result.valid, result.message
    cloud = model.last_cloud
    world = cloud.xyz @ model.last_sensor_pose[:3, :3].T + model.last_sensor_pose[:3, 3]
    return model, cloud, world, warnings


def expected_ids(world: np.ndarray) -> np.ndarray:
    """The OSI id a return on the road's surface at ``world`` should carry (−1: not on the road)."""
    x, y = world[:, 0], world[:, 1]
    edges = {b[0]: b[1] for b in BOUNDARIES}
    expected = np.full(len(world), -1, np.int64)
    for lane_id, _, _, left, right in LANES:
        expected[(y > edges[right]) & (y < edges[left])] = lane_id
    starts = dash_starts()
    k = np.maximum(np.searchsorted(starts, x) - 1, 0)
    for line_id, y_line, kind, width, _ in BOUNDARIES:
        if kind in ("SOLID_LINE", "DASHED_LINE"):
            on = np.abs(y - y_line) < width / 2
            if kind == "DASHED_LINE":
                on &= (x >= starts[k]) & (x - starts[k] <= DASH_M)
            expected[on] = line_id
    surface = np.where(y > 3.75, 0.15, 0.0)  # the sidewalk stands on its kerb
    expected[np.abs(world[:, 2] - surface) > 0.03] = -1
    return expected


@pytest.fixture(scope="module")
def flat_road():
    return scan(road_view(with_objects=False, mounting_z=ROOF))


@pytest.fixture(scope="module")
def full_road():
    return scan(road_view(with_objects=True, mounting_z=ROOF))


def test_a_flat_road_from_ground_truth_alone_returns_most_downward_rays(flat_road):
    model, cloud, world, warnings = flat_road
    assert len(cloud) >= 0.40 * len(cloud.pattern.directions)  # ≥ 40 % of the 131,072 rays
    assert warnings == []
    ids = set(cloud.points["object_id"].tolist())
    assert {11, 12, 13, 14, 15, 21, 22, 23, 24, 25} <= ids and int(NO_OBJECT_ID) in ids  # lanes, lines, terrain


def test_markings_and_signs_stand_out_from_the_asphalt(flat_road, full_road):
    _, cloud, world, _ = flat_road
    intensity, ids = cloud.intensity_percent, cloud.points["object_id"]
    asphalt = np.median(intensity[np.isin(ids, ASPHALT_LANES)])
    for edge in (22, 24):  # the solid edge lines
        assert np.median(intensity[ids == edge]) >= 2 * asphalt
    _, cloud, _, _ = full_road
    sign = cloud.points["object_id"] == SIGN[0]
    assert sign.sum() >= 3 and np.median(cloud.intensity_percent[sign]) >= 5 * asphalt


def test_returns_on_the_road_carry_the_osi_ids_of_its_lanes_and_lines(flat_road):
    _, cloud, world, _ = flat_road
    expected = expected_ids(world)
    on_road = expected >= 0
    got = cloud.points["object_id"].astype(np.int64)
    assert on_road.sum() > 20_000
    assert (got[on_road] == expected[on_road]).mean() >= 0.80
    for line_id in (22, 23, 24):
        assert (got[expected == line_id] == line_id).mean() >= 0.80


@pytest.mark.parametrize("dash_states", [False, True])
def test_dashes_lie_where_the_trace_puts_them(dash_states):
    """The dashed centre line's points mark each dash's start and end (OSI's rule), with or without dash states."""
    _, cloud, world, _ = scan(road_view(with_objects=False, mounting_z=ROOF, dash_states=dash_states))
    on_line = cloud.points["object_id"] == 23
    x = world[on_line, 0]
    starts = dash_starts()
    k = np.maximum(np.searchsorted(starts, x) - 1, 0)
    assert on_line.sum() > 50 and np.all(x - starts[k] <= DASH_M + 0.05)
    assert len(np.unique(k)) >= 4  # several dashes, each with a gap after it


def test_a_kerb_lifts_the_sidewalk_and_ground_goes_on_past_the_road(flat_road):
    _, cloud, world, _ = flat_road
    ids = cloud.points["object_id"]
    near = np.abs(world[:, 0]) < 15
    sidewalk, road = near & (ids == 15), near & np.isin(ids, ASPHALT_LANES)
    assert np.median(world[sidewalk, 2]) - np.median(world[road, 2]) == pytest.approx(0.15, abs=0.01)
    rail = world[ids == 21]
    assert rail[:, 2].max() == pytest.approx(0.75, abs=0.05) and len(rail) > 100  # beam on posts, 0.75 m high
    ground = world[ids == NO_OBJECT_ID]
    assert ground[:, 1].min() < -10 and ground[:, 1].max() > 10  # beyond both edges
    beyond_kerb = ground[(ground[:, 1] > 7) & (np.abs(ground[:, 0]) < 15)]
    assert np.median(beyond_kerb[:, 2]) == pytest.approx(0.15 - VERGE_DROP_M, abs=0.01)  # the sidewalk's height


def test_a_trace_that_gives_the_sidewalks_height_has_it_lifted_once_and_ground_past_every_edge():
    """The road (lanes, paint, a kerb, a sidewalk, a guard rail, a free boundary) from a trace whose sidewalk's far
    line stands at the sidewalk's height in its points: ≥ 40 % of an OS1-128's rays return, the 0.15 m kerb lifts
    the sidewalk by 0.15 m (not again by the points' height), and the ground goes on past the rail at the road's
    height and behind the sidewalk at the sidewalk's."""
    _, cloud, world, _ = scan(road_view(with_objects=False, mounting_z=ROOF, sidewalk_z=0.15))
    assert len(cloud) >= 0.40 * len(cloud.pattern.directions)
    ids = cloud.points["object_id"]
    near = np.abs(world[:, 0]) < 15
    road = np.median(world[near & np.isin(ids, ASPHALT_LANES), 2])
    assert np.median(world[near & (ids == 15), 2]) - road == pytest.approx(0.15, abs=0.03)
    ground = world[ids == NO_OBJECT_ID]
    past_rail, behind_sidewalk = ground[ground[:, 1] < -6], ground[ground[:, 1] > 7]
    assert len(past_rail) > 100 and len(behind_sidewalk) > 100
    assert np.median(past_rail[:, 2]) - road == pytest.approx(0.0, abs=0.03)
    assert np.median(behind_sidewalk[:, 2]) - road == pytest.approx(0.15, abs=0.03)


def box_frame(world: np.ndarray, centre) -> np.ndarray:
    return world - np.asarray(centre)


def test_road_users_and_trees_are_shaped_and_inside_their_boxes():
    """A box puts every return on its faces; the class meshes put at most 60–75 % within 5 cm of them."""
    boxes = {i: (np.array(centre), np.array(size)) for i, _, centre, size, _ in ROAD_USERS}
    boxes[53] = (np.array((-20.0, 9.0, 3.65)), np.array((4.0, 4.0, 7.0)))  # the tree
    seen: dict[int, list[np.ndarray]] = {k: [] for k in boxes}
    for host_x in (-60.0, -35.0, 0.0, 20.0, 45.0):
        _, cloud, world, _ = scan(road_view(host_x=host_x, mounting_z=ROOF))
        for k, (centre, _) in boxes.items():
            seen[k].append(world[cloud.points["object_id"] == k] - centre)
    for k, kind in ((2, "car"), (4, "motorcycle"), (6, "pedestrian"), (53, "tree")):
        local, size = np.concatenate(seen[k]), boxes[k][1]
        margin = (size / 2 - np.abs(local)).min(axis=1)
        assert len(local) > 100, kind
        assert (margin < 0.05).mean() <= 0.75, kind
        assert (margin > -0.01).all(), kind  # inside the box


def test_a_model_reference_of_another_tool_falls_back_to_the_class_mesh_once():
    model = OsiSensorModel(sensor="ouster_os1_128", warn=(warnings := []).append)
    for k in range(3):
        assert model.step(road_view(time_s=0.1 * (k + 1), mounting_z=ROOF), 0.1 * (k + 1)).valid
    said = [w for w in warnings if "Truck.osgb" in w]
    assert len(said) == 1 and "heavy_truck" in said[0]
    assert model.scene.mesh_of(3).name == "osi heavy_truck"


def test_objects_as_boxes_and_an_environment_of_none():
    model, cloud, world, _ = scan(road_view(mounting_z=ROOF), objects="boxes")
    assert model.scene.mesh_of(2).name == "osi bounding box"
    assert model.scene.mesh_of(53).name == "osi bounding box"  # stationary objects too
    model, cloud, world, _ = scan(road_view(mounting_z=ROOF), environment="none")
    assert ENVIRONMENT_ID_BASE not in model.scene and GROUND_PLANE_ID not in model.scene
    assert set(cloud.points["object_id"].tolist()) <= {o[0] for o in ROAD_USERS} | {51, 52, 53}


def test_the_static_road_is_built_once_per_content_and_kept_when_a_message_sends_none():
    model = OsiSensorModel(sensor="ouster_os1_128")
    assert model.step(road_view(time_s=0.1, mounting_z=ROOF), 0.1).valid
    road = model.scene.mesh_of(ENVIRONMENT_ID_BASE)
    assert model.step(road_view(time_s=0.2, mounting_z=ROOF), 0.2).valid  # the same road again: kept
    assert model.scene.mesh_of(ENVIRONMENT_ID_BASE) is road
    kept = model.step(road_view(time_s=0.3, mounting_z=ROOF, static=False), 0.3)  # esmini's later messages
    assert kept.valid and model.scene.mesh_of(ENVIRONMENT_ID_BASE) is road and 51 in model.scene
    assert np.isin([12, 13, 23], model.last_cloud.points["object_id"]).all()
    changed = road_view(time_s=0.4, mounting_z=ROOF, dash_states=True)  # other content: built again
    assert model.step(changed, 0.4).valid and model.scene.mesh_of(ENVIRONMENT_ID_BASE) is not road


def test_a_trace_without_lanes_gets_a_ground_plane_under_the_host():
    from lidar_fmu.osi.trace import read_trace

    trace = os.path.join(os.path.dirname(__file__), "..", "scenarios", "osi_validation_minimal",
                         "20240618T122540Z_sv_370_244_20_minimal_valid_example.osi")
    views = list(read_trace(trace))[:2]
    model = OsiSensorModel(sensor="ouster_os1_128", default_mounting_pose=np.diag([1.0, 1, 1, 1]))
    counts = [model.step(view, 0.1 * (k + 1)).count for k, view in enumerate(views)]
    host = next(o for o in __import__("lidar_fmu.osi.decode", fromlist=["x"]).decode_sensor_view(views[-1]).objects
                if o.id == 113)
    pose = model.scene.pose_of(GROUND_PLANE_ID)
    assert pose[2, 3] == pytest.approx(host.position_m[2] - host.dimension_m[2] / 2)
    assert pose[0, 3] == pytest.approx(host.position_m[0])
    assert min(counts) > 20_000  # the ground under the scene, not one box in a void


# -- bad ground truth stays local -------------------------------------------------------------------------------------
def _bad(kind: str) -> bytes:
    """The road with one element broken in the way ``kind`` says."""
    from osi3.osi_sensorview_pb2 import SensorView

    view = SensorView.FromString(road_view(mounting_z=ROOF))
    gt = view.global_ground_truth
    if kind == "nan_points":
        gt.lane_boundary[1].boundary_line[5].position.x = math.nan
        gt.lane_boundary[1].boundary_line[6].position.y = math.inf
    elif kind == "million_points":
        line = gt.lane_boundary[4]  # the kerb: 10⁶ points
        del line.boundary_line[:]
        for x in np.linspace(-150, 150, 1_000_000):
            p = line.boundary_line.add()
            p.position.x, p.position.y = x, 3.75
        line.boundary_line[0].height = 0.15
    elif kind == "negative_width":
        gt.lane_boundary[1].boundary_line[0].width = -0.3
        gt.lane_boundary[3].boundary_line[0].width = 0.0
    elif kind == "self_intersecting":
        polygon = gt.stationary_object[0].base.base_polygon
        polygon[1].x, polygon[1].y, polygon[2].x, polygon[2].y = 10, 0, 10, -7.5  # a bow tie
    elif kind == "missing_boundary":
        gt.lane[1].classification.left_lane_boundary_id[0].value = 999
    elif kind == "dashes_out_of_order":
        for k, p in enumerate(gt.lane_boundary[2].boundary_line):
            p.dash = p.DASH_END if k % 2 == 0 else p.DASH_START
    elif kind == "sign_10_km_up":
        gt.traffic_sign[0].main_sign.base.position.z = 10_000.0
    elif kind == "huge_polygon":
        polygon = gt.stationary_object[0].base.base_polygon
        del polygon[:]
        angle = np.linspace(0, 2 * np.pi, 100_000, endpoint=False)
        for a in angle:
            corner = polygon.add()
            corner.x, corner.y = 9 * math.cos(a), 7 * math.sin(a)
    return view.SerializeToString()


#: kind → (the id the warning names, a word it says)
BAD = {"nan_points": ("lane_boundary 22", "not finite"), "million_points": ("lane_boundary 25", "thinned"),
       "negative_width": ("lane_boundary 22", "negative"), "self_intersecting": ("stationary_object 51", "cross"),
       "missing_boundary": ("lane 12", "999"), "dashes_out_of_order": ("lane_boundary 23", "out of order"),
       "sign_10_km_up": ("traffic_sign 41", "above the ground"), "huge_polygon": ("stationary_object 51", "thinned")}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_ground_truth_is_named_once_and_the_rest_of_the_road_builds(kind):
    view = _bad(kind)
    model = OsiSensorModel(sensor="ouster_os1_128", warn=(warnings := []).append)
    for k in range(2):
        result = model.step(view, 0.1 * (k + 1))
        assert result.valid and result.count > 30_000, result.message
    name, word = BAD[kind]
    said = [w for w in warnings if name in w]
    assert len(said) == 1 and word in said[0], warnings
    ids = set(model.last_cloud.points["object_id"].tolist())
    assert {11, 13, 24} <= ids  # the rest of the road is there
    assert (12 in ids) == (kind != "missing_boundary")  # (a lane with no left side has no surface)
    mesh = model.scene.mesh_of(ENVIRONMENT_ID_BASE)
    assert mesh.triangle_count < 2_000_000  # bounded whatever the message holds


# -- real tools' traces ----------------------------------------------------------------------------------------------
def run(args, capsys):
    code = cli_main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_an_esmini_ground_truth_trace_needs_a_host_and_keeps_its_road(tmp_path, capsys):
    trace = os.path.join(DATA, "esmini_acc_test_gt_31.osi")
    code, _, err = run(["replay", trace, "--sensor", "ouster_os1_128", "-o", tmp_path / "refused", "-q"], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "--host" in lines[0] and "0, 1" in lines[0]
    code, _, err = run(["replay", trace, "--sensor", "ouster_os1_128", "--host", "0", "-o", tmp_path / "out", "-q",
                        "--frames", "7"], capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["frames"] == 7 and not summary["invalid_frames"]
    # 30 Hz: each step publishes its third of the 10 Hz sweep, the road (sent in the first message only) in each
    returns = summary["returns_per_frame"]
    assert min(returns[1:]) > 0.25 * 0.40 * 131_072 and max(returns[1:]) < 0.5 * 131_072
    assert all({0, 1, 2, 4, 5, 6} & set(ids) for ids in summary["objects_per_frame"])  # lanes in every frame


def test_an_osi3test_trace_gets_its_kerb_guard_rail_and_standard_dashes():
    from lidar_fmu.osi.trace import read_trace

    views = list(read_trace(os.path.join(DATA, "osi3test_lane_boundaries_sv_6.osi")))
    model, cloud, world, warnings = scan(views[5], time_s=0.1)
    ids = cloud.points["object_id"]
    assert warnings == [] and {1, 2, 3, 4, 8} <= set(ids.tolist())
    rail = world[ids == 8]
    assert rail[:, 2].max() == pytest.approx(0.6, abs=0.05)  # its points' height
    beyond = world[(ids == NO_OBJECT_ID) & (world[:, 1] < -6) & (np.abs(world[:, 0] - 25) < 10)]
    assert np.median(beyond[:, 2]) == pytest.approx(0.2 - VERGE_DROP_M, abs=0.01)  # the 0.2 m kerb lifts the ground past it


def test_a_trace_kept_apart_the_openmaterial_example_builds_its_road(tmp_path, capsys):
    """The ASAM OpenMATERIAL scenario example (esmini SensorViews; model references are paths of its author's
    machine): nothing was developed on it."""
    trace = os.path.join(DATA, "openmaterial_two_vehicles_sv_11.osi")
    code, _, err = run(["replay", trace, "--sensor", "ouster_os1_128", "-o", tmp_path / "out", "-q"], capsys)
    assert code == 0, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["frames"] == 11 and not summary["invalid_frames"]
    messages = " ".join(summary["fmu_messages"])
    assert messages.count("vehicle_example.xoma") == 1 and messages.count("environment_example.xoma") == 1
