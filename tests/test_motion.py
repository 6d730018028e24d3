"""Firing time and motion distortion: poses interpolated over a frame, partial sweeps, the moving-wall check."""
import json
import math

import numpy as np
import pytest

from helpers.osi_views import HOST_ID, sensor_view
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.scan.motion import (
    FrameMotion,
    PoseInterpolation,
    fire,
    interpolate_pose,
    is_jump,
    rates_jump,
    rotate_about,
    rotation_vector,
)
from lidar_fmu.sensors import load_sensor

# a 120° sweep over the whole 100 ms frame: the wall ahead is seen from start to end of the frame
SWEEP = {"horizontal_fov_deg": [60, -60], "horizontal_samples": 240, "vertical_fov_deg": [-5, 5], "channels": 8,
         "frame_rate_hz": 10.0, "max_range_m": 120.0}
WALL_ID, WALL_X_M, SPEED_M_S = 50, 60.0, 20.0
WALL = (WALL_ID, (WALL_X_M, 0.0, 2.0), (0, 0, 0), (0.2, 200.0, 20.0), "")


def _wall_views(frames: int, speed_m_s: float = SPEED_M_S):
    """The host drives at ``speed_m_s`` along x toward a stationary wall (a box) 60 m ahead; views every 0.1 s."""
    return [sensor_view([WALL], time_s=0.1 * k, host=(HOST_ID, (speed_m_s * 0.1 * k, 0.0, 0.75), 0.0),
                        host_velocity=(speed_m_s, 0.0, 0.0)) for k in range(1, frames + 1)]


def _wall_slope(points) -> float:
    """Slope (m/s) of the wall points' x against their firing time."""
    wall = points[points["object_id"] == WALL_ID]
    assert len(wall) > 500 and np.ptp(wall["time"]) > 0.09  # the sweep spans the frame
    return float(np.polyfit(wall["time"].astype(np.float64), wall["x"].astype(np.float64), 1)[0])


# -- poses --------------------------------------------------------------------------------------------------
def test_interpolation_is_linear_in_position_and_slerp_in_rotation():
    start = pose_matrix((0, 0, 0), (0, 0, 0))
    end = pose_matrix((10, -4, 2), (0.2, -0.1, 1.2))
    assert np.allclose(interpolate_pose(start, end, 0.0), start) and np.allclose(interpolate_pose(start, end, 1.0), end)
    half = interpolate_pose(start, end, 0.5)
    assert np.allclose(half[:3, 3], (5, -2, 1))
    # slerp: the half-way rotation turns half the angle about the same axis, both halves equal
    total = rotation_vector(end[:3, :3])
    assert np.allclose(rotation_vector(half[:3, :3]), 0.5 * total)
    assert np.allclose(rotation_vector(half[:3, :3].T @ end[:3, :3]), 0.5 * total)
    # an OSI box scaled by its pose keeps its scale
    scaled = end.copy()
    scaled[:3, :3] *= (4.0, 1.8, 1.5)
    assert np.allclose(np.linalg.norm(interpolate_pose(start, scaled, 0.3)[:3, :3], axis=0), 1 + 0.3 * np.array(
        [3.0, 0.8, 0.5]))


def test_rotation_vector_round_trips_at_every_angle():
    rng = np.random.default_rng(3)
    for angle in (0.0, 1e-9, 1e-3, 1.0, math.pi - 1e-6, math.pi):
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        rotation = rotate_about(np.eye(3), axis * angle, np.ones(3)).T
        back = rotate_about(np.eye(3), rotation_vector(rotation), np.ones(3)).T
        assert np.abs(back - rotation).max() < 1e-9, angle


def test_many_objects_interpolate_as_each_one_alone():
    """The turns of many objects, found all at once, are bit for bit those of each object alone (a scene's poses do
    not move by an ulp with the number of objects): every Shepperd branch, no turn, half turns."""
    from lidar_fmu.geometry.transforms import pose_matrices

    rng = np.random.default_rng(43)
    count = 400
    start = pose_matrices(rng.uniform(-50, 50, (count, 3)), rng.uniform(-math.pi, math.pi, (count, 3)))
    turns = rng.normal(0.0, 1.0, (count, 3)) * rng.choice([0.0, 1e-6, 0.1, 1.0], (count, 1))
    end = start.copy()
    end[:, :3, :3] = start[:, :3, :3] @ pose_matrices(np.zeros((count, 3)), turns)[:, :3, :3]
    end[:3, :3, :3] = start[:3, :3, :3] @ np.diag([1.0, -1.0, -1.0])  # half turns about each axis
    end[3, :3, :3] = start[3, :3, :3] @ np.diag([-1.0, 1.0, -1.0])
    end[4, :3, :3] = start[4, :3, :3] @ np.diag([-1.0, -1.0, 1.0])
    end[:, :3, :3] *= rng.uniform(0.5, 4.0, (count, 1, 3))  # OSI boxes, scaled by their poses
    together = PoseInterpolation(start, end)
    assert np.abs(together.at(1.0) - end).max() < 1e-9  # each turn found: the end poses reached
    for k in range(count):
        alone = PoseInterpolation(start[k], end[k])
        assert np.array_equal(alone.angle[0], together.angle[k]) and np.array_equal(alone.skew[0], together.skew[k])
        assert np.array_equal(alone.at(0.37)[0], together.at(0.37)[k])


@pytest.mark.parametrize("in_order", [True, False])
@pytest.mark.parametrize("own_origins", [False, True])
def test_the_firing_pass_turns_rays_as_rotate_about_does(in_order, own_origins):
    """One compiled pass (fire) gives each ray's fraction and its direction and origin turned, bit for bit as
    FrameMotion.fraction and rotate_about give them, signed zeros and rays past the view included."""
    rng = np.random.default_rng(7)
    n = 9000  # three chunks of the parallel pass
    directions = rng.normal(size=(n, 3)).astype(np.float32)
    directions[::7, 1], directions[::11, 2] = -0.0, 0.0
    time_s = rng.uniform(0.0, 0.1, n).astype(np.float32)
    time_s = np.sort(time_s) if in_order else time_s
    time_s[-5:] = 0.1  # the last lasers of a column fire just past the view: posed at it
    origins = rng.normal(size=(n, 3)).astype(np.float32) if own_origins else np.zeros((1, 3))
    motion = FrameMotion(0.0, 0.095, 0.001, np.eye(4))
    fraction = motion.fraction(time_s)
    for rotvec in (np.zeros(3), np.array([0.01, -0.02, 0.3])):
        shift = np.array([0.8, -0.1, 0.0])
        fired = fire(motion, time_s, directions, origins, rotvec, shift)
        assert fired.fraction.tobytes() == fraction.tobytes()
        assert fired.directions.tobytes() == rotate_about(directions, rotvec, fraction - 1.0, dtype=np.float32).tobytes()
        assert fired.origins.tobytes() == rotate_about(origins, rotvec, fraction - 1.0, shift, np.float32).tobytes()
        assert (fired.first, fired.last) == (fraction.min(), fraction.max())
        assert fired.in_order == in_order


def test_jumps_are_not_motion():
    start = pose_matrix((0, 0, 0), (0, 0, 0))
    assert not is_jump(start, pose_matrix((2, 0, 0), (0, 0, 0.1)), 0.1)  # 20 m/s, 1 rad/s
    assert is_jump(start, pose_matrix((20, 0, 0), (0, 0, 0)), 0.1)  # 200 m/s: a teleport
    assert is_jump(start, pose_matrix((0, 0, 0), (0, 0, 2.0)), 0.1)  # a turn of 115° in one frame
    assert not is_jump(start, pose_matrix((14.9, 0, 0)), 0.1) and is_jump(start, pose_matrix((15.1, 0, 0)), 0.1)


def test_osi_rates_beyond_any_vehicle_are_a_jump_by_the_same_rule():
    """What the first frame is taken back along (OSI velocity, orientation rate) obeys the bounds between views."""
    assert rates_jump((149.0, 0, 0), None, -0.1) == ""
    assert "speed 151 m/s is beyond 150 m/s" in rates_jump((0, 151.0, 0), (0, 0, 1.0), -0.1)
    assert rates_jump(None, (0, 0, 15.0), -0.1) == ""
    assert "quarter turn" in rates_jump(None, (0, 0, 16.0), -0.1)
    assert "beyond 7.85 rad/s" in rates_jump(None, (0, 0, 16.0), -0.2)  # a quarter turn over a longer frame
    assert rates_jump((math.nan, 0, 0), None, -0.1) and rates_jump(None, (0, math.inf, 0), -0.1)  # no motion either
    assert rates_jump((1e30, 0, 0), (1e30, 0, 0), 0.0) == ""  # over no time nothing moves


def test_an_object_first_seen_with_rates_beyond_any_vehicle_stands_still():
    """A new object is taken back along its own OSI rates, by the same rule: 1e30 m/s is a jump (it stands still over
    the frame, one warning names it), 20 m/s is motion."""
    from osi3.osi_sensorview_pb2 import SensorView

    car = (10, (12.0, 0.0, 0.75), (0, 0, 0), (4.0, 1.8, 1.5), "")

    def step(speed_m_s):
        view = SensorView.FromString(sensor_view([car, WALL]))
        view.global_ground_truth.moving_object[1].base.velocity.y = speed_m_s  # [0] is the host
        said = []
        model = OsiSensorModel(sensor=SWEEP, warn=said.append)
        assert model.step(view.SerializeToString(), 0.1).valid
        return model.last_cloud.points, said

    still, none = step(0.0)
    absurd, said = step(1e30)
    assert np.array_equal(absurd, still) and not none
    assert len(said) == 1 and "object 10: speed 1e+30 m/s is beyond 150 m/s" in said[0] and "host" not in said[0]
    moving, said = step(20.0)
    assert not said and not np.array_equal(moving, still)


# -- partial sweeps -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["velodyne_vlp16", "ouster_os1_128_cal"])
def test_steps_shorter_than_a_frame_fire_each_column_once(preset):
    """Four quarter-frame windows fire every column of the frame once, in firing order, times counted from each
    window's start; a window straddling the frame's end wraps into the next frame."""
    sensor = load_sensor(preset)
    period = sensor.frame_period_s
    edges = np.linspace(0.0, period, 5)
    parts = [sensor.rays_between(a, b) for a, b in zip(edges[:-1], edges[1:])]
    columns = np.concatenate([p.column[:: p.rows] for p in parts])
    assert np.array_equal(np.sort(columns), np.sort(sensor.pattern.column[:: sensor.pattern.rows]))
    for (a, b), part in zip(zip(edges[:-1], edges[1:]), parts):
        assert part.rows == sensor.pattern.rows and 0 <= part.time_offset_s.min() and part.time_offset_s.max() < b - a
    wrapped = sensor.rays_between(0.75 * period + 7 * period, 1.25 * period + 7 * period)
    assert wrapped.columns == parts[3].columns + parts[0].columns
    assert np.array_equal(wrapped.directions, np.concatenate([parts[3].directions, parts[0].directions]))
    assert sensor.rays_between(0.0, period) is sensor.pattern and sensor.rays_between(1e-6, 2e-6) is None


def test_partial_steps_through_the_model_add_up_to_the_frame():
    """A static scene stepped at a quarter of the frame period returns, over four steps, the frame's returns."""
    views = [sensor_view([WALL], time_s=t, host=(HOST_ID, (0.0, 0.0, 0.75), 0.0)) for t in (0.1, 0.125, 0.15, 0.175,
                                                                                           0.2)]
    whole = OsiSensorModel(sensor=SWEEP)
    whole.step(views[0], 0.1)
    frame = whole.step(views[-1], 0.2)
    quarters = OsiSensorModel(sensor=SWEEP)
    quarters.step(views[0], 0.1)
    counts = [quarters.step(view, 0.0).count for view in views[1:]]
    assert all(c > 0 for c in counts) and sum(counts) == frame.count


def test_a_step_longer_than_the_frame_warns_once_and_takes_the_last_frame():
    said = []
    model = OsiSensorModel(sensor=SWEEP, warn=said.append)
    for t in (0.1, 0.4, 0.7):
        assert model.step(sensor_view([WALL], time_s=t), t).valid
    assert len(said) == 1 and "longer than" in said[0]
    assert len(model.last_cloud) == OsiSensorModel(sensor=SWEEP).step(sensor_view([WALL], 0.1), 0.1).count
    assert np.ptp(model.last_cloud.points["time"]) > 0.09  # one whole frame


# -- the moving wall ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("distortion", [True, False])
def test_moving_wall_slope_in_the_model(distortion):
    """Driving at 20 m/s at a stationary wall: x against firing time has slope −20 m/s (within 5 %), ≈ 0 without."""
    model = OsiSensorModel(sensor=SWEEP | {"motion_distortion": distortion})
    for k, view in enumerate(_wall_views(3)):
        assert model.step(view, 0.1 * (k + 1)).valid
        slope = _wall_slope(model.last_cloud.points)
        if distortion:  # the first frame too: extrapolated back along the host's OSI velocity
            assert slope == pytest.approx(-SPEED_M_S, rel=0.05), k
            # and each point where the wall is, seen from where the sensor was when it fired
            wall = model.last_cloud.points[model.last_cloud.points["object_id"] == WALL_ID]
            sensor_x = SPEED_M_S * (0.1 * k + wall["time"].astype(np.float64)) + (-1.4)  # rear axle, no mounting
            assert np.abs(wall["x"] + sensor_x - (WALL_X_M - 0.1)).max() < 2e-3
        else:
            assert abs(slope) < 0.05, k


def test_moving_wall_slope_through_the_fmu_replay(tmp_path):
    """The same check on `lidar-fmu replay`'s frame PCDs (OSI SensorData out of the FMU, each ray's time back)."""
    from lidar_fmu.io import read_pcd
    from lidar_fmu.osi.trace import write_trace
    from lidar_fmu.tools.cli import main

    slopes = {}
    for distortion in (True, False):
        scenario = tmp_path / f"wall_{distortion}"
        scenario.mkdir()
        write_trace(scenario / "views.osi", _wall_views(3))
        (scenario / "scenario.yaml").write_text(json.dumps(
            {"trace": "views.osi", "sensor": SWEEP | {"motion_distortion": distortion}, "step_size_s": 0.1}))
        out = tmp_path / f"out_{distortion}"
        assert main(["replay", str(scenario), "-o", str(out), "-q"]) == 0
        frames = sorted((out / "frames").glob("*.pcd"))
        assert len(frames) == 3
        if distortion:
            slopes[distortion] = [_wall_slope(read_pcd(path)) for path in frames]
        else:  # a snapshot: every point cast from the view's pose, no per-point time for a reader to deskew by
            for path in frames:
                points = read_pcd(path)
                assert "time" not in points.dtype.names and {"intensity", "ring"} <= set(points.dtype.names)
                assert np.ptp(points["x"][points["object_id"] == WALL_ID]) < 0.01
    assert slopes[True] == pytest.approx([-SPEED_M_S] * 3, rel=0.05)


def test_a_moving_object_is_met_where_it_is_when_each_ray_fires():
    """A still sensor, a wall coming at it at 20 m/s: the same slope, from the object's poses over the frame."""
    views = [sensor_view([(WALL_ID, (WALL_X_M - SPEED_M_S * 0.1 * k, 0.0, 2.0), (0, 0, 0), (0.2, 200.0, 20.0), "")],
                         time_s=0.1 * k) for k in (1, 2)]
    model = OsiSensorModel(sensor=SWEEP | {"motion_slices": 50})
    model.step(views[0], 0.1)
    assert model.step(views[1], 0.2).valid
    # 50 slices of 2 ms: the staircase's fitted slope is the motion's
    assert _wall_slope(model.last_cloud.points) == pytest.approx(-SPEED_M_S, rel=0.05)


def test_motion_distortion_is_the_default_and_a_spec_key():
    assert load_sensor("ouster_os1_128").motion_distortion is True
    assert load_sensor({"preset": "ouster_os1_128", "motion_distortion": False}).motion_distortion is False
    from lidar_fmu.sensors import SensorSpecError

    with pytest.raises(SensorSpecError, match="motion_distortion"):
        load_sensor({"preset": "ouster_os1_128", "motion_distortion": "yes"})
    with pytest.raises(SensorSpecError, match="motion_slices"):
        load_sensor({"preset": "ouster_os1_128", "motion_slices": 0})


# -- patterns that do not repeat ----------------------------------------------------------------------------
def test_a_livox_pattern_goes_on_across_steps_as_the_unit_does():
    """Stepped at 20 Hz or at 10 Hz, a Livox Mid-70 fires the same shots: two half steps hold one whole step's
    rays, and the next step goes on with new ones (no frame repeats)."""
    wall = (WALL_ID, (20.0, 0.0, 2.0), (0, 0, 0), (0.2, 200.0, 40.0), "")
    views = {t: sensor_view([wall], time_s=t, host=(HOST_ID, (0.0, 0.0, 0.75), 0.0)) for t in (0.1, 0.15, 0.2, 0.3)}
    halves = OsiSensorModel(sensor="livox_mid70")
    halves.step(views[0.1], 0.1)
    clouds = []
    for t in (0.15, 0.2):
        assert halves.step(views[t], t).valid
        clouds.append(halves.last_cloud)
    first, second = clouds
    whole = OsiSensorModel(sensor="livox_mid70")
    whole.step(views[0.1], 0.1)
    whole.step(views[0.2], 0.2)
    both = np.concatenate([first.pattern.directions, second.pattern.directions])
    assert np.array_equal(both, whole.last_cloud.pattern.directions)
    assert len(first) + len(second) == len(whole.last_cloud) > 1000
    frame_one = whole.last_cloud.pattern.directions
    whole.step(views[0.3], 0.3)
    assert len(whole.last_cloud.pattern) == len(frame_one) and not np.array_equal(whole.last_cloud.pattern.directions,
                                                                                  frame_one)


def test_an_airsim_origin_is_the_default_mounting(tmp_path):
    spec = {"id": "lidar1", "type": "lidar", "lidar-type": "generic_cylindrical", "number-of-channels": 16,
            "points-per-second": 100000, "horizontal-rotation-frequency": 10,
            "origin": {"xyz": "0.5 0 -1.8", "rpy-deg": "0 0 0"}}
    model = OsiSensorModel(sensor=spec)
    assert np.allclose(model.default_mounting_pose[:3, 3], (0.5, 0.0, 1.8))  # NED z down → our z up
    placed = OsiSensorModel(sensor=spec, default_mounting_pose=pose_matrix((1.0, 0.0, 2.0)))
    assert np.allclose(placed.default_mounting_pose[:3, 3], (1.0, 0.0, 2.0))  # the caller's mounting wins
    # AirSim's disable-self-hits (default false: the robot's own body returns) unless the caller says
    assert model.updater.disable_self_hits is False
    assert OsiSensorModel(sensor=spec | {"disable-self-hits": True}).updater.disable_self_hits is True
    assert OsiSensorModel(sensor=spec, disable_self_hits=True).updater.disable_self_hits is True
    assert OsiSensorModel(sensor="velodyne_vlp16").updater.disable_self_hits is True


# -- windows on the sensor's own clock (review findings) -------------------------------------------------------
def test_windows_of_any_length_fire_each_column_by_the_sensors_clock():
    """Steps of 0.1, 0.05, 0.1, 0.05 s on a 10 Hz, 8-column sensor: [0.1, 0.3) holds every column exactly twice,
    in firing order, whatever the steps (a whole-frame step in mid-sweep starts where the head is)."""
    sensor = load_sensor({"horizontal_fov_deg": [180, -180], "horizontal_samples": 8, "vertical_angles_deg": [0.0]})
    edges = [0.0, 0.1, 0.15, 0.25, 0.3]
    parts = [sensor.rays_between(a, b) for a, b in zip(edges[:-1], edges[1:])]
    assert np.array_equal(parts[2].column, [4, 5, 6, 7, 0, 1, 2, 3])  # the head is half-way round at 0.15 s
    later = np.concatenate([p.column for p in parts[1:]])
    assert np.array_equal(np.bincount(later, minlength=8), [2] * 8)


def test_steps_rounded_to_nanoseconds_lose_no_column():
    """A 30 Hz master whose times are whole nanoseconds: every step fires the 1,024 columns of one turn."""
    sensor = load_sensor({"preset": "ouster_os1_64", "frame_rate_hz": 30.0})
    times = np.round(np.arange(31) / 30.0 * 1e9) * 1e-9
    counts = [sensor.rays_between(a, b).columns for a, b in zip(times[:-1], times[1:])]
    assert counts == [1024] * 30


def test_a_rosette_after_a_long_gap_fires_one_frame_and_goes_on():
    """Views at 0.1 and 0.2 s, then none until 6000 s: the step publishes the last frame period's shots
    (warned once), and the next steps are valid again."""
    said = []
    model = OsiSensorModel(sensor="livox_mid70", warn=said.append)
    wall = (WALL_ID, (20.0, 0.0, 2.0), (0, 0, 0), (0.2, 200.0, 40.0), "")
    for t in (0.1, 0.2, 6000.0, 6000.1):
        result = model.step(sensor_view([wall], time_s=t), t)
        assert result.valid, result.message
        assert len(model.last_cloud.pattern) == 10_000  # 100 k points/s over 0.1 s
    assert len(said) == 1 and "longer than" in said[0]

