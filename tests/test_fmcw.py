"""FMCW radial velocity: the formula alone, the spec, scans, the co-simulation step and OSI, the Aeva Aeries II."""
import itertools
import math

import numpy as np
import pytest
from osi3.osi_sensordata_pb2 import SensorData

from helpers.osi_views import HOST_ID, sensor_view
from lidar_fmu import Lidar, Scene
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.geometry.scene import box_mesh
from lidar_fmu.geometry.transforms import angular_velocity, pose_matrix, rotation_matrix
from lidar_fmu.osi.detections import decode_detections, sensor_data_to_points
from lidar_fmu.physics.fmcw import measured_m_s, radial_velocity_m_s
from lidar_fmu.scan.motion import FrameMotion
from lidar_fmu.scan.velocity import SceneVelocities
from lidar_fmu.sensors import SensorSpecError, load_sensor

RESOLUTION_M_S = 2.0**-8  # the Aeries II's (nebula PointCloudPoint::velocity)
SWEEP = {"horizontal_fov_deg": [30, -30], "horizontal_samples": 61, "vertical_fov_deg": [-3, 3], "channels": 4,
         "frame_rate_hz": 10.0, "max_range_m": 120.0, "radial_velocity": {"resolution_m_s": RESOLUTION_M_S}}
WALL_ID, SPEED_M_S = 50, 10.0


def _wall(x_m, velocity=None, rate=None):
    """A 20 m high, 200 m wide OSI box standing across the x axis at ``x_m``."""
    return (WALL_ID, (x_m, 0.0, 2.0), (0, 0, 0), (0.2, 200.0, 20.0), "", velocity, rate)


# -- the effect alone ----------------------------------------------------------------------------------------------
def test_the_formula_is_the_relative_velocity_of_two_rigid_bodies_projected_on_the_ray():
    rng = np.random.default_rng(5)
    for _ in range(50):
        o, p, v_o, w_o, c_o, v_s, w_s, c_s = (tuple(rng.normal(size=3) * 5) for _ in range(8))
        u = np.subtract(p, o) / np.linalg.norm(np.subtract(p, o))
        point = np.add(v_o, np.cross(w_o, np.subtract(p, c_o)))
        origin = np.add(v_s, np.cross(w_s, np.subtract(o, c_s)))
        expected = float(np.dot(point - origin, u))
        got = radial_velocity_m_s(tuple(u), p, o, v_o, w_o, c_o, v_s, w_s, c_s)
        assert math.isclose(got, expected, rel_tol=1e-12, abs_tol=1e-12)
    # a range that grows reads positive, one that shrinks negative
    ahead = ((1.0, 0.0, 0.0), (20.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    still = (0.0, 0.0, 0.0)
    assert radial_velocity_m_s(*ahead, (3.0, 0, 0), still, still, still, still, still) == 3.0
    assert radial_velocity_m_s(*ahead, still, still, still, (3.0, 0, 0), still, still) == -3.0


def _reference_radial_velocities(points, ray_index, pattern, sensor_end_pose, motion, velocities, scene, unit,
                                 seed, frame):
    """The pass the compiled one replaced, step by step in numpy and Python: each ray gathered and turned to where it
    fired as the cast turns it (rotate_about, float32), then the formula, the noise and the quantum per return."""
    from lidar_fmu.physics.effects import draw_normal
    from lidar_fmu.physics.fmcw import DRAW_VELOCITY, frame_key_of
    from lidar_fmu.scan.motion import rotate_about, sensor_turn

    zero = np.zeros((1, 3), np.float32)
    if motion is None:
        directions, origins = pattern.directions[ray_index], (zero if pattern.origins is None else
                                                              pattern.origins[ray_index])
        dt_s = np.zeros(len(ray_index))
    else:
        time_s = pattern.time_offset_s[ray_index].astype(np.float64)
        back = motion.fraction(time_s) - 1.0
        dt_s = np.minimum(motion.window_start_s + time_s - motion.end_s, 0.0)
        rotvec, shift = sensor_turn(motion, sensor_end_pose)
        directions = rotate_about(pattern.directions[ray_index], rotvec, back, dtype=np.float32)
        origins = rotate_about(zero if pattern.origins is None else pattern.origins[ray_index], rotvec, back, shift,
                               dtype=np.float32)
    rotation, position = sensor_end_pose[:3, :3], sensor_end_pose[:3, 3]
    carrier = [velocities.carrier_velocity_m_s @ rotation, velocities.carrier_spin_rad_s @ rotation,
               (velocities.carrier_centre_m - position) @ rotation]
    bodies = {int(i): (v @ rotation, w @ rotation, (scene.pose_of(int(i))[:3, 3] - position) @ rotation)
              for i, v, w in zip(velocities.ids, velocities.velocity_m_s, velocities.spin_rad_s) if int(i) in scene}
    key, out = frame_key_of(seed, frame), np.empty(len(points), np.float32)
    for k, point in enumerate(points):
        u = tuple(float(x) for x in directions[k])
        o = tuple(float(x) for x in origins[0 if len(origins) == 1 else k])
        dt, r = float(dt_s[k]), float(point["range"])
        v, w, c = bodies.get(int(point["object_id"]), ((0.0,) * 3,) * 3)
        true = radial_velocity_m_s(u, tuple(o[i] + r * u[i] for i in range(3)), o, tuple(v), tuple(w),
                                   tuple(c[i] + v[i] * dt for i in range(3)), tuple(carrier[0]), tuple(carrier[1]),
                                   tuple(carrier[2][i] + carrier[0][i] * dt for i in range(3)))
        with np.errstate(over="ignore"):  # (the draws' hash wraps round in uint64, as compiled)
            normal = draw_normal(key, np.int64(ray_index[k]), DRAW_VELOCITY + 16 * np.int64(point["echo"]))
        out[k] = measured_m_s(true, unit.sigma_m_s, unit.resolution_m_s, normal)
    return out


@pytest.mark.parametrize("origins", [False, True])
def test_the_compiled_pass_is_the_ray_turned_as_cast_and_the_formula_bit_for_bit(origins):
    """Crafted returns of a sensor turning and driving through a frame, two bodies moving (one gone from the scene),
    a unit with a quantum and noise: the one compiled pass gives, bit for bit, each ray turned to where it fired as
    the cast turns it and the formula per return; a snapshot (no motion) likewise."""
    from lidar_fmu.geometry.pattern import RayPattern
    from lidar_fmu.physics.fmcw import RadialVelocity
    from lidar_fmu.pointcloud import POINT_DTYPE, Returns
    from lidar_fmu.scan.velocity import radial_velocity_of

    rng = np.random.default_rng(11)
    n, m = 96, 1000
    directions = rng.normal(size=(n, 3)).astype(np.float32)
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    time_offset_s = np.repeat(np.linspace(0.0, 0.1, n // 4, dtype=np.float32), 4)  # 4 lasers a firing
    pattern = RayPattern(directions, np.tile(np.arange(4, dtype=np.uint32), n // 4), np.repeat(
        np.arange(n // 4, dtype=np.uint32), 4), time_offset_s, 4, n // 4,
        origins=rng.normal(scale=0.05, size=(n, 3)).astype(np.float32) if origins else None)
    scene = Scene()
    mesh = box_mesh(1.0, 1.0, 1.0)
    for instance, xyz in ((7, (10.0, 2.0, 0.0)), (8, (-4.0, 6.0, 1.0))):
        scene.add_instance(instance, mesh, pose_matrix(xyz, (0.0, 0.0, 0.3 * instance)))
    ray_index = np.sort(rng.integers(0, n, m))
    points = np.zeros(m, POINT_DTYPE)
    points["range"] = rng.uniform(1.0, 80.0, m)
    points["object_id"] = rng.choice([0, 7, 8, 9], m)  # 9 moves but is no longer in the scene
    points["echo"] = rng.integers(0, 2, m)
    returns = Returns(points, ray_index.astype(np.int32), np.zeros(m, np.float32))
    end = pose_matrix((3.0, 1.0, 0.5), (0.01, -0.02, 0.4))
    motion = FrameMotion(0.0, 0.1, 0.004, end @ np.linalg.inv(pose_matrix((1.2, 0.1, 0.0), (0.0, 0.01, 0.05))))
    velocities = SceneVelocities((2.5, 1.0, 0.4), (12.0, 0.5, 0.1), (0.01, -0.02, 0.5), [9, 8, 7],
                                 [(1.0, 2.0, 0.0), (-3.0, 0.5, 0.2), (14.0, -1.0, 0.0)],
                                 [(0.0, 0.0, 0.2), (0.1, 0.0, -0.4), (0.0, 0.0, 0.0)])
    # (without a quantum every last bit shows; with one, the rounding to it)
    for unit, cast_with in itertools.product((RadialVelocity(sigma_m_s=0.1), RadialVelocity(RESOLUTION_M_S, 0.1)),
                                             (motion, None)):
        got = radial_velocity_of(returns, pattern, end, cast_with, velocities, scene, unit, 5, 3, noise=True)
        expected = _reference_radial_velocities(points, ray_index, pattern, end, cast_with, velocities, scene, unit,
                                                5, 3)
        assert np.ptp(got) > 5.0 and np.array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_quantization_rounds_to_the_resolution_symmetrically():
    assert measured_m_s(-10.0, 0.0, RESOLUTION_M_S, 0.0) == -10.0
    assert measured_m_s(0.3 * RESOLUTION_M_S, 0.0, RESOLUTION_M_S, 0.0) == 0.0
    assert measured_m_s(0.5 * RESOLUTION_M_S, 0.0, RESOLUTION_M_S, 0.0) == RESOLUTION_M_S
    assert measured_m_s(-0.5 * RESOLUTION_M_S, 0.0, RESOLUTION_M_S, 0.0) == -RESOLUTION_M_S
    assert measured_m_s(1.234, 0.1, 0.0, -2.0) == pytest.approx(1.034)  # σ · a normal number, not quantized


def test_orientation_rates_are_the_angular_velocity_of_the_turning_pose():
    """OSI's orientation_rate is d/dt of (roll, pitch, yaw): its angular velocity is what the rotation does."""
    orientation, rate, dt = np.array([0.2, -0.3, 1.1]), np.array([0.4, -0.7, 0.9]), 1e-6
    r0, r1 = rotation_matrix(*orientation), rotation_matrix(*(orientation + rate * dt))
    skew = (r1 - r0) / dt @ r0.T  # Ṙ Rᵀ = [ω]×
    assert np.allclose(angular_velocity(orientation, rate), [skew[2, 1], skew[0, 2], skew[1, 0]], atol=1e-5)
    assert np.array_equal(angular_velocity(orientation, None), np.zeros(3))


# -- the spec --------------------------------------------------------------------------------------------------------
def test_radial_velocity_is_switched_by_the_spec():
    base = {k: v for k, v in SWEEP.items() if k != "radial_velocity"}
    assert load_sensor(base).radial_velocity is None
    assert load_sensor(base | {"radial_velocity": False}).radial_velocity is None
    exact = load_sensor(base | {"radial_velocity": True}).radial_velocity
    assert exact is not None and exact.resolution_m_s == exact.sigma_m_s == 0.0
    unit = load_sensor(base | {"radial_velocity": {"resolution_m_s": 0.01, "sigma_m_s": 0.05}}).radial_velocity
    assert unit is not None and (unit.resolution_m_s, unit.sigma_m_s) == (0.01, 0.05)


@pytest.mark.parametrize("value, words", [
    ("yes", "radial_velocity must be true, false or a mapping"),
    ({"resolution": 0.1}, r"radial_velocity: unknown key 'resolution' \(did you mean 'resolution_m_s'\?\)"),
    ({"sigma_m_s": -0.1}, "radial_velocity.sigma_m_s must be a number in 0 … 10 m/s"),
    ({"resolution_m_s": float("nan")}, "radial_velocity.resolution_m_s must be a number"),
    ({"resolution_m_s": True}, "radial_velocity.resolution_m_s must be a number"),
])
def test_a_bad_radial_velocity_spec_is_one_line_naming_the_key(value, words):
    with pytest.raises(SensorSpecError, match=words) as info:
        load_sensor(SWEEP | {"radial_velocity": value})
    assert "\n" not in str(info.value)


# -- scans -----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wall_scene():
    scene = Scene()
    scene.add_instance(WALL_ID, box_mesh(0.2, 200.0, 20.0), pose_matrix((30.0, 0.0, 0.0)))
    return scene


def _along_ray(cloud, velocity_world):
    """Each return's ray direction (sensor frame = world here) dotted with a velocity."""
    return cloud.direction.astype(np.float64) @ np.asarray(velocity_world, np.float64)


def test_a_pulsed_sensor_gives_no_radial_velocity_and_files_the_same_fields(wall_scene):
    base = {k: v for k, v in SWEEP.items() if k != "radial_velocity"}
    cloud = Lidar(wall_scene, base, backend="embree").scan(np.eye(4))
    assert len(cloud) and cloud.radial_velocity_m_s is None and "radial_velocity" not in cloud.records().dtype.names
    fmcw = Lidar(wall_scene, SWEEP, backend="embree").scan(np.eye(4))
    assert fmcw.records().dtype.names == cloud.records().dtype.names + ("radial_velocity",)
    assert np.array_equal(fmcw.points, cloud.points) and np.all(fmcw.radial_velocity_m_s == 0.0)  # all stand still


def test_scans_read_the_relative_motion_along_each_ray(wall_scene):
    lidar = Lidar(wall_scene, SWEEP, backend="embree")
    host = lidar.scan(np.eye(4), velocities=SceneVelocities(carrier_velocity_m_s=(SPEED_M_S, 0.0, 0.0)))
    wall = lidar.scan(np.eye(4), velocities=SceneVelocities(ids=[WALL_ID], velocity_m_s=[(-SPEED_M_S, 0, 0)],
                                                            spin_rad_s=[(0, 0, 0)]))
    for cloud in (host, wall):  # approached at 10 m/s either way: −10 m/s along x, −10 cos(angle) off it
        assert len(cloud) == len(lidar.sensor.pattern)
        assert np.abs(cloud.radial_velocity_m_s - _along_ray(cloud, (-SPEED_M_S, 0, 0))).max() <= RESOLUTION_M_S / 2
        assert np.all(np.abs(cloud.radial_velocity_m_s / RESOLUTION_M_S % 1.0 - 0.5) == 0.5)  # on the quantum grid
    crossing = lidar.scan(np.eye(4), velocities=SceneVelocities(ids=[WALL_ID], velocity_m_s=[(0, SPEED_M_S, 0)],
                                                                spin_rad_s=[(0, 0, 0)]))
    ahead = np.abs(crossing.direction[:, 1]) < 1e-6  # the rays perpendicular to the motion read nothing
    assert ahead.sum() >= 4 and np.all(crossing.radial_velocity_m_s[ahead] == 0.0)
    assert np.abs(crossing.radial_velocity_m_s - _along_ray(crossing, (0, SPEED_M_S, 0))).max() <= RESOLUTION_M_S / 2


def test_a_turning_object_moves_its_surface_about_its_centre(wall_scene):
    """A wall turning about its centre (30 m ahead) at 0.5 rad/s: its far-left points recede, its right approach."""
    lidar = Lidar(wall_scene, SWEEP, backend="embree")
    spin = np.array([0.0, 0.0, 0.5])
    cloud = lidar.scan(np.eye(4), velocities=SceneVelocities(ids=[WALL_ID], velocity_m_s=[(0, 0, 0)],
                                                             spin_rad_s=[spin]))
    points = cloud.xyz.astype(np.float64)
    expected = np.einsum("ij,ij->i", np.cross(spin, points - (30.0, 0.0, 0.0)), cloud.direction.astype(np.float64))
    assert np.abs(cloud.radial_velocity_m_s - expected).max() <= RESOLUTION_M_S / 2 + 1e-5
    left = cloud.points["y"] > 5
    assert np.all(cloud.radial_velocity_m_s[left] < -0.1) and np.all(cloud.radial_velocity_m_s[~left & (
        cloud.points["y"] < -5)] > 0.1)


def test_a_turning_host_moves_a_sensor_mounted_off_its_centre(wall_scene):
    """The host turns at 0.5 rad/s about its centre 1.4 m behind the sensor: the sensor slides sideways at 0.7 m/s,
    so the still wall reads −0.7 m/s · sin(azimuth); the same through the step from the host's OSI yaw rate."""
    lidar = Lidar(wall_scene, SWEEP, backend="embree")
    cloud = lidar.scan(np.eye(4), velocities=SceneVelocities((-1.4, 0.0, 0.0), (0, 0, 0), (0.0, 0.0, 0.5)))
    assert np.abs(cloud.radial_velocity_m_s - _along_ray(cloud, (0.0, -0.7, 0.0))).max() <= RESOLUTION_M_S / 2
    assert np.ptp(cloud.radial_velocity_m_s) > 0.6
    model = OsiSensorModel(SWEEP | {"motion_distortion": False}, environment="none", backend="embree")
    # the sensor at the rear axle (bbcenter_to_rear −1.4 m), mounted 2.8 m ahead of it: 1.4 m ahead of the centre
    _step_views(model, [sensor_view([_wall(40.0)], 0.1 * k, host=(HOST_ID, (0.0, 0.0, 0.75), 0.05 * k),
                                    mounting=((2.8, 0.0, 0.45), (0.0, 0.0, 0.0)),
                                    host_orientation_rate=(0.0, 0.0, 0.5)) for k in (1, 2)])
    stepped = model.last_cloud
    assert np.abs(stepped.radial_velocity_m_s - _along_ray(stepped, (0.0, -0.7, 0.0))).max() <= RESOLUTION_M_S


def test_velocities_default_to_what_the_motion_implies(wall_scene):
    """A script's frame with a FrameMotion and no velocities: the sensor moved 1 m toward the wall in 0.1 s."""
    lidar = Lidar(wall_scene, SWEEP, backend="embree")
    end = pose_matrix((1.0, 0.0, 0.0))
    motion = FrameMotion(0.0, 0.1, 0.0, pose_matrix((0.0, 0.0, 0.0)))
    cloud = lidar.scan(end, 0.1, motion=motion)
    assert np.abs(cloud.radial_velocity_m_s - _along_ray(cloud, (-SPEED_M_S, 0, 0))).max() <= RESOLUTION_M_S / 2 + 1e-4
    # the wall turned 0.05 rad about its centre in the frame: 0.5 rad/s, as the explicit spin gives it
    still = lidar.scan(np.eye(4), 0.1, motion=FrameMotion(0.0, 0.1, 0.0, np.eye(4), {
        WALL_ID: pose_matrix((30.0, 0.0, 0.0), (0.0, 0.0, -0.05))}))
    spun = lidar.scan(np.eye(4), velocities=SceneVelocities(ids=[WALL_ID], velocity_m_s=[(0, 0, 0)],
                                                            spin_rad_s=[(0, 0, 0.5)]))
    assert np.array_equal(still.ray_index, spun.ray_index) and np.ptp(spun.radial_velocity_m_s) > 10.0
    # (the moving frame posed the wall at its slices' middles, the still one at its end: ranges differ a little)
    assert np.abs(still.radial_velocity_m_s - spun.radial_velocity_m_s).max() < 0.05


def test_noise_is_seeded_by_the_frame_and_has_the_units_sigma(wall_scene):
    spec = SWEEP | {"horizontal_samples": 601, "radial_velocity": {"resolution_m_s": 0.001, "sigma_m_s": 0.1},
                    "noise": {"seed": 7}}
    lidar = Lidar(wall_scene, spec, backend="embree")
    moving = SceneVelocities(carrier_velocity_m_s=(SPEED_M_S, 0.0, 0.0))
    first, again, second = (lidar.scan(np.eye(4), frame=f, velocities=moving) for f in (3, 3, 4))
    assert np.array_equal(first.radial_velocity_m_s, again.radial_velocity_m_s)
    assert not np.array_equal(first.radial_velocity_m_s, second.radial_velocity_m_s)
    error = first.radial_velocity_m_s - _along_ray(first, (-SPEED_M_S, 0, 0))
    assert len(error) > 2000 and abs(error.mean()) < 0.01 and 0.09 < error.std() < 0.11
    quiet = Lidar(wall_scene, spec | {"noise": None}, backend="embree").scan(np.eye(4), velocities=moving)
    assert np.abs(quiet.radial_velocity_m_s - _along_ray(quiet, (-SPEED_M_S, 0, 0))).max() <= 0.0005 + 1e-6


# -- the co-simulation step and OSI --------------------------------------------------------------------------------
def _step_views(model, views):
    results = [model.step(view, 0.1 * (k + 1)) for k, view in enumerate(views)]
    assert all(r.valid for r in results), [r.message for r in results]
    return results[-1]


def _wall_reading(model) -> np.ndarray:
    """The last step's radial velocity of the wall's returns divided by their rays' cosine to x."""
    cloud = model.last_cloud
    wall = cloud.points["object_id"] == WALL_ID
    assert wall.sum() == len(model.sensor.pattern)
    return cloud.radial_velocity_m_s[wall] / cloud.direction[wall, 0]


def test_a_wall_approached_at_10_m_s_reads_minus_10_m_s_either_way():
    """Through OsiSensorModel.step: the host driving at 10 m/s toward a still wall, or a wall driving at the still
    host, each with its OSI velocity; the OSI output carries +10 m/s (OSI: positive toward the sensor)."""
    host = OsiSensorModel(SWEEP, environment="none", backend="embree")
    out = _step_views(host, [sensor_view([_wall(60.0)], 0.1 * k, host=(HOST_ID, (SPEED_M_S * 0.1 * k, 0, 0.75), 0.0),
                                         host_velocity=(SPEED_M_S, 0, 0)) for k in (1, 2)])
    reading = _wall_reading(host)
    assert np.abs(reading + SPEED_M_S).max() <= 2 * RESOLUTION_M_S  # quantum / cos(30°) at the sweep's edges
    wall = OsiSensorModel(SWEEP, environment="none", backend="embree")
    _step_views(wall, [sensor_view([_wall(60.0 - SPEED_M_S * 0.1 * k, (-SPEED_M_S, 0, 0))], 0.1 * k)
                       for k in (1, 2)])
    assert np.array_equal(_wall_reading(wall), reading)
    # the SensorData: OSI's sign, decoded back to the unit's dr/dt
    detections = SensorData.FromString(bytes(out.sensor_data)).feature_data.lidar_sensor[0].detection
    osi = np.array([d.radial_velocity for d in detections])
    assert all(d.HasField("radial_velocity") for d in detections)
    assert np.array_equal(osi, 0.0 - host.last_cloud.radial_velocity_m_s.astype(np.float64))
    assert np.all(osi > 0) and osi.max() == SPEED_M_S
    assert np.array_equal(decode_detections(bytes(out.sensor_data))["radial_velocity"], osi)
    assert np.array_equal(sensor_data_to_points(bytes(out.sensor_data)).radial_velocity_m_s,
                          host.last_cloud.radial_velocity_m_s)


def test_a_crossing_object_and_a_turning_one_through_the_step():
    """An object crossing the sensor's view reads ≈ 0 on the rays square to its motion; one turning in place at its
    OSI orientation_rate reads its surface's speed about its centre."""
    crossing = OsiSensorModel(SWEEP, environment="none", backend="embree")
    _step_views(crossing, [sensor_view([_wall(40.0, (0, SPEED_M_S, 0))], 0.1 * k, host=None) for k in (1, 2)])
    cloud = crossing.last_cloud
    ahead = np.abs(cloud.direction[:, 1]) < 1e-6
    assert ahead.sum() == 4 and np.all(cloud.radial_velocity_m_s[ahead] == 0.0)
    assert np.abs(cloud.radial_velocity_m_s - _along_ray(cloud, (0, SPEED_M_S, 0))).max() <= RESOLUTION_M_S
    turning = OsiSensorModel(SWEEP | {"motion_distortion": False}, environment="none", backend="embree")
    yaw_rate = 0.2  # rad/s: 0.02 rad a frame
    _step_views(turning, [sensor_view([(WALL_ID, (40.0, 0.0, 2.0), (0, 0, yaw_rate * 0.1 * k), (0.2, 200.0, 20.0),
                                        "", None, (0.0, 0.0, yaw_rate))], 0.1 * k, host=None) for k in (1, 2)])
    cloud = turning.last_cloud
    points = cloud.xyz.astype(np.float64)
    expected = np.einsum("ij,ij->i", np.cross((0, 0, yaw_rate), points - (40.0, 0, 2.0)),
                         cloud.direction.astype(np.float64))
    assert np.abs(cloud.radial_velocity_m_s - expected).max() <= RESOLUTION_M_S
    assert np.ptp(cloud.radial_velocity_m_s) > 3.0  # ±23 m off the centre at 0.2 rad/s: ±4.6 m/s across the wall


def test_without_osi_velocities_the_pose_change_since_the_last_view_is_the_velocity():
    model = OsiSensorModel(SWEEP, environment="none", backend="embree")
    _step_views(model, [sensor_view([_wall(60.0 - SPEED_M_S * 0.1 * k)], 0.1 * k) for k in (1,)])
    assert np.all(model.last_cloud.radial_velocity_m_s == 0.0)  # nothing to tell its motion by yet
    _step_views(model, [sensor_view([_wall(60.0 - SPEED_M_S * 0.1 * k)], 0.1 * k) for k in (2,)])
    assert np.abs(_wall_reading(model) + SPEED_M_S).max() <= 2 * RESOLUTION_M_S


def test_a_pulsed_sensors_sensor_data_has_no_radial_velocity():
    base = {k: v for k, v in SWEEP.items() if k != "radial_velocity"}
    model = OsiSensorModel(base, environment="none", backend="embree")
    out = _step_views(model, [sensor_view([_wall(40.0, (-SPEED_M_S, 0, 0))], 0.1)])
    detections = SensorData.FromString(bytes(out.sensor_data)).feature_data.lidar_sensor[0].detection
    assert len(detections) and not any(d.HasField("radial_velocity") for d in detections)
    assert sensor_data_to_points(bytes(out.sensor_data)).radial_velocity_m_s is None


# -- the Aeva Aeries II ------------------------------------------------------------------------------------------
def test_the_aeries_ii_preset():
    sensor = load_sensor("aeva_aeries2")
    pattern = sensor.pattern
    # a raster: 4 beams (rows) a shot, 2331 shots a line group, 10 groups
    assert (pattern.rows, pattern.columns) == (4, 23310) and sensor.frame_rate_hz == 10.0
    assert sensor.wavelength_nm == 1550.0 and sensor.max_range_m == 500.0
    azimuth, elevation = np.degrees(pattern.azimuth_rad), np.degrees(pattern.elevation_rad)
    # shots at the middle of their 110°/2331 steps; lines from +7.2° to −7.2°
    assert np.isclose(np.ptp(azimuth), 110.0 * (1 - 1 / 2331), atol=1e-3) and np.isclose(np.ptp(elevation), 14.4, atol=1e-3)
    assert sensor.radial_velocity is not None and sensor.radial_velocity.resolution_m_s == RESOLUTION_M_S
    assert len(pattern) * sensor.frame_rate_hz == 932_400  # points a second
    assert len(np.unique(np.round(elevation[np.abs(azimuth) < 0.03], 3))) == 40  # 40 lines
    assert np.all(np.diff(pattern.time_offset_s) >= 0) and pattern.time_offset_s.max() < 0.1


# -- files -----------------------------------------------------------------------------------------------------------
def test_files_carry_an_fmcw_clouds_radial_velocity(wall_scene, tmp_path):
    """PCD, PLY, LAS (an extra-bytes dimension) and the ROS 2 bag's PointCloud2 get a float32 radial_velocity field,
    read back exactly; a pulsed unit's files have none (tests/test_io.py and the rest check those unchanged)."""
    import laspy
    import trimesh
    from kiss_icp.tools.point_cloud2 import read_points
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    from lidar_fmu.io import read_pcd, write_las, write_pcd, write_ply
    from lidar_fmu.io.rosbag import RosbagWriter

    velocities = SceneVelocities(ids=[WALL_ID], velocity_m_s=[(-SPEED_M_S, 3.0, 0)], spin_rad_s=[(0, 0, 0.1)])
    cloud = Lidar(wall_scene, SWEEP, backend="embree").scan(np.eye(4), 0.1, velocities=velocities)
    expected = cloud.radial_velocity_m_s
    assert expected is not None and np.ptp(expected) > 1.0
    write_pcd(tmp_path / "a.pcd", cloud, compression="binary_compressed")
    assert np.array_equal(read_pcd(tmp_path / "a.pcd")["radial_velocity"], expected)
    write_ply(tmp_path / "a.ply", cloud)
    vertex = trimesh.load(tmp_path / "a.ply").metadata["_ply_raw"]["vertex"]["data"]
    assert np.array_equal(vertex["radial_velocity"], expected)
    write_las(tmp_path / "a.las", cloud)
    las = laspy.read(tmp_path / "a.las")
    assert np.array_equal(np.asarray(las["radial_velocity"]), expected)
    with RosbagWriter(tmp_path / "bag") as bag:
        bag.add_lidar("lidar")
        bag.write("lidar", cloud, np.eye(4))
    with AnyReader([tmp_path / "bag"], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as reader:
        message = next(reader.deserialize(raw, c.msgtype) for c, _, raw in reader.messages()
                       if c.topic == "/lidar/points")
    assert ("radial_velocity", 7) in [(f.name, f.datatype) for f in message.fields]
    assert np.array_equal(read_points(message)["radial_velocity"], expected)
    pulsed = Lidar(wall_scene, {k: v for k, v in SWEEP.items() if k != "radial_velocity"}, backend="embree")
    write_pcd(tmp_path / "b.pcd", pulsed.scan(np.eye(4)))
    assert "radial_velocity" not in read_pcd(tmp_path / "b.pcd").dtype.names


def test_the_aeries_ii_scans_the_demo_street_from_a_moving_car(tmp_path):
    """Driving at 10 m/s down the demo street: most of its rays return, and everything there (the street, the parked
    cars) stands still, so each return reads the car's own motion along its ray, −10 m/s · cos(angle to x)."""
    from lidar_fmu.tools.demo_scene import generate_street, load_street_scene

    generate_street(tmp_path, seed=0)
    scene, layout = load_street_scene(tmp_path)
    lidar = Lidar(scene, "aeva_aeries2", materials="street", backend="embree")
    pose = pose_matrix((0.0, -2.0, 1.9))
    cloud = lidar.scan(pose, velocities=SceneVelocities(pose[:3, 3], (SPEED_M_S, 0.0, 0.0), (0.0, 0.0, 0.0)))
    assert 0.8 * len(lidar.sensor.pattern) < len(cloud) < len(lidar.sensor.pattern)
    cars = np.isin(cloud.points["object_id"], [car["id"] for car in layout["cars"]])
    assert cars.sum() > 1000 and np.percentile(cloud.points["range"], 99) > 60.0
    assert np.abs(cloud.radial_velocity_m_s - _along_ray(cloud, (-SPEED_M_S, 0, 0))).max() <= RESOLUTION_M_S / 2 + 1e-5


def test_a_replays_frame_pcds_carry_the_radial_velocity_osi_brought(tmp_path):
    """The replay writes its frame PCDs from the FMU's SensorData: an FMCW unit's radial velocities come along."""
    from lidar_fmu.io import read_pcd
    from lidar_fmu.pointcloud import beam_rings
    from lidar_fmu.tools.replay_outputs import FramePcds

    model = OsiSensorModel(SWEEP, environment="none", backend="embree")
    out = _step_views(model, [sensor_view([_wall(40.0, (-SPEED_M_S, 0, 0))], 0.1)])
    pcds = FramePcds(str(tmp_path), model.sensor, 0.1, every=1)
    decoded = sensor_data_to_points(bytes(out.sensor_data))
    decoded.beam_rings = beam_rings(model.sensor.pattern)  # as the replay gives them
    cloud, fields = pcds.fields_of(decoded)
    assert "radial_velocity" in fields and "time" in fields  # organized on the pattern: firing times known
    pcds.write(0, cloud, fields)
    written = read_pcd(tmp_path / "frame_0000.pcd")
    assert np.array_equal(written["radial_velocity"], model.last_cloud.radial_velocity_m_s)
    base = {k: v for k, v in SWEEP.items() if k != "radial_velocity"}
    pulsed = OsiSensorModel(base, environment="none", backend="embree")
    out = _step_views(pulsed, [sensor_view([_wall(40.0, (-SPEED_M_S, 0, 0))], 0.1)])
    fields = FramePcds(str(tmp_path), pulsed.sensor, 0.1, every=1).fields_of(
        sensor_data_to_points(bytes(out.sensor_data)))[1]
    assert fields == ("x", "y", "z", "range", "reflectivity", "beam_id", "object_id", "intensity", "ring", "time")
