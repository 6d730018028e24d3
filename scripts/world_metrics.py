"""The figures of docs/world.md, "How close": scenes from ground truth alone scanned by an Ouster OS1-128 on the
host's roof (run by hand in a checkout; the same measures as tests/test_ground_truth_scenes.py).

    .venv/bin/python scripts/world_metrics.py
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from helpers.road_views import ROAD_USERS, SIGN, road_view  # noqa: E402
from lidar_fmu.osi.ground_truth import ground_truth_view  # noqa: E402
from lidar_fmu.osi.trace import read_trace  # noqa: E402
from lidar_fmu.pointcloud import NO_OBJECT_ID  # noqa: E402
from lidar_fmu.world import build_road_world  # noqa: E402
from test_ground_truth_scenes import ROOF, expected_ids, scan  # noqa: E402
from test_world import street_and_side_road, surface_below  # noqa: E402

_, cloud, world, _ = scan(road_view(with_objects=False, mounting_z=ROOF))
ids, intensity = cloud.points["object_id"], cloud.intensity_percent
rays = len(cloud.pattern.directions)
asphalt = np.median(intensity[np.isin(ids, (12, 13))])
expected = expected_ids(world)
on = expected >= 0
print(f"flat road: {len(cloud):,} of {rays:,} rays return ({len(cloud) / rays:.1%})")
print(f"asphalt intensity {asphalt:.1f} %; edge lines {np.median(intensity[ids == 22]):.1f} / "
      f"{np.median(intensity[ids == 24]):.1f} % ({np.median(intensity[ids == 22]) / asphalt:.1f}× / "
      f"{np.median(intensity[ids == 24]) / asphalt:.1f}×), dashed line {np.median(intensity[ids == 23]):.1f} %")
print(f"returns on the road's surface labelled right: {(ids.astype(np.int64)[on] == expected[on]).mean():.1%} "
      f"of {on.sum():,}")
near = np.abs(world[:, 0]) < 15
print(f"kerb lift: {np.median(world[near & (ids == 15), 2]) - np.median(world[near & np.isin(ids, (12, 13)), 2]):.3f}"
      f" m; guard rail top {world[ids == 21, 2].max():.2f} m; ground returns {int((ids == NO_OBJECT_ID).sum()):,}")
_, cloud, world, _ = scan(road_view(with_objects=False, mounting_z=ROOF, sidewalk_z=0.15))
ids, near = cloud.points["object_id"], np.abs(world[:, 0]) < 15
road, ground = np.median(world[near & np.isin(ids, (12, 13)), 2]), world[ids == NO_OBJECT_ID]
print(f"the sidewalk's far line at 0.15 m in its points: {len(cloud) / rays:.1%} return; sidewalk lifted "
      f"{np.median(world[near & (ids == 15), 2]) - road:.3f} m; ground behind it "
      f"{np.median(ground[ground[:, 1] > 7, 2]) - road:.3f} m, past the rail {np.median(ground[ground[:, 1] < -6, 2]) - road:.3f} m")
street = build_road_world(street_and_side_road(0.15), 100.0).mesh
gx, gy = np.meshgrid(np.arange(-40.0, 40.01, 0.5), np.arange(-40.0, 40.01, 0.5))
within = np.hypot(gx, gy) <= 40.0
below = surface_below(street, gx[within], gy[within])
print(f"a street and a road 30 m beside it: {np.isnan(below).mean():.1%} of the area within 40 m without a surface")
_, cloud, world, _ = scan(road_view(with_objects=True, mounting_z=ROOF))
sign = cloud.points["object_id"] == SIGN[0]
print(f"sign: {sign.sum()} returns, intensity {np.median(cloud.intensity_percent[sign]):.0f} % "
      f"({np.median(cloud.intensity_percent[sign]) / asphalt:.0f}× asphalt)")
boxes = {i: (np.array(c), np.array(s), k) for i, k, c, s, _ in ROAD_USERS}
boxes[53] = (np.array((-20.0, 9.0, 3.65)), np.array((4.0, 4.0, 7.0)), "tree")
seen = {k: [] for k in boxes}
for host_x in (-60.0, -35.0, 0.0, 20.0, 45.0):
    _, cloud, world, _ = scan(road_view(host_x=host_x, mounting_z=ROOF))
    for k, (centre, _, _) in boxes.items():
        seen[k].append(world[cloud.points["object_id"] == k] - centre)
for k, (_, size, kind) in boxes.items():
    local = np.concatenate(seen[k])
    margin = (size / 2 - np.abs(local)).min(axis=1)
    print(f"{kind}: {len(local):,} returns, {(margin < 0.05).mean():.0%} within 5 cm of its box's faces, "
          f"{(margin > -0.01).mean():.1%} inside it")
data = os.path.join(HERE, "..", "tests", "data", "osi")
for name, message_type, host in (("esmini_acc_test_gt_31.osi", "GroundTruth", 0),
                                 ("osi3test_lane_boundaries_sv_6.osi", "SensorView", None),
                                 ("openmaterial_two_vehicles_sv_11.osi", "SensorView", None)):
    views = list(read_trace(os.path.join(data, name), message_type))
    if message_type == "GroundTruth":
        views = [ground_truth_view(v, host) for v in views]
    frame = {"esmini_acc_test_gt_31.osi": 3, "osi3test_lane_boundaries_sv_6.osi": 5}.get(name, 10)
    from lidar_fmu.cosim.sensor_model import OsiSensorModel
    from lidar_fmu.geometry.transforms import pose_matrix
    from lidar_fmu.tools.replay import roof_mounting

    host_id = host if host is not None else __import__("lidar_fmu.osi.decode", fromlist=["x"]).decode_sensor_view(
        views[0]).host_vehicle_id
    mounting = roof_mounting(views[0], host_id)
    model = OsiSensorModel(sensor="ouster_os1_128", warn=lambda m: None,
                           default_mounting_pose=pose_matrix(mounting["position_m"], mounting["orientation_rad"]))
    for view in (views[0], views[frame]):
        result = model.step(view, 0.0)
    c = model.last_cloud
    print(f"{name}: one sweep {len(c):,} returns ({len(c) / rays:.1%} of the rays), "
          f"{len(set(c.points['object_id'].tolist()))} ids")
