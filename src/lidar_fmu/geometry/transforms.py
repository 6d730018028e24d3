"""Rigid poses as 4×4 homogeneous matrices (float64, metres and radians).

Rotation convention is OSI's ``Orientation3d``: intrinsic z-y'-x'' (yaw, pitch,
roll), i.e. ``R = Rz(yaw) · Ry(pitch) · Rx(roll)`` and
``v_parent = R · v_local + translation``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..errors import LidarFmuError


class PoseError(LidarFmuError, ValueError):
    """A pose (4×4 matrix or ``x,y,z[,roll,pitch,yaw]`` text) that cannot be used."""


def rotation_matrix(roll_rad: float, pitch_rad: float, yaw_rad: float) -> np.ndarray:
    """3×3 rotation ``Rz(yaw) · Ry(pitch) · Rx(roll)``."""
    cr, sr = np.cos(roll_rad), np.sin(roll_rad)
    cp, sp = np.cos(pitch_rad), np.sin(pitch_rad)
    cy, sy = np.cos(yaw_rad), np.sin(yaw_rad)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def pose_matrix(
    position_m=(0.0, 0.0, 0.0), orientation_rad=(0.0, 0.0, 0.0)
) -> np.ndarray:
    """4×4 pose from a translation (x, y, z) in m and (roll, pitch, yaw) in rad."""
    pose = np.eye(4)
    pose[:3, :3] = rotation_matrix(*orientation_rad)
    pose[:3, 3] = position_m
    return pose


def pose_matrices(positions_m, orientations_rad) -> np.ndarray:
    """(K, 4, 4) poses from (K, 3) positions (m) and (K, 3) roll, pitch, yaw (rad), vectorized."""
    p = np.asarray(positions_m, dtype=np.float64).reshape(-1, 3)
    roll, pitch, yaw = np.asarray(orientations_rad, dtype=np.float64).reshape(-1, 3).T
    cr, sr, cp, sp, cy, sy = np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch), np.cos(yaw), np.sin(yaw)
    poses = np.zeros((len(p), 4, 4))
    poses[:, 0, 0], poses[:, 0, 1], poses[:, 0, 2] = cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr
    poses[:, 1, 0], poses[:, 1, 1], poses[:, 1, 2] = sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr
    poses[:, 2, 0], poses[:, 2, 1], poses[:, 2, 2] = -sp, cp * sr, cp * cr
    poses[:, :3, 3] = p
    poses[:, 3, 3] = 1.0
    return poses


def roll_pitch_yaw(rotation: np.ndarray) -> tuple[float, float, float]:
    """Inverse of :func:`rotation_matrix` (pitch in [-π/2, π/2])."""
    pitch = float(np.arcsin(np.clip(-rotation[2, 0], -1.0, 1.0)))
    roll = float(np.arctan2(rotation[2, 1], rotation[2, 2]))
    yaw = float(np.arctan2(rotation[1, 0], rotation[0, 0]))
    return roll, pitch, yaw


#: file formats whose specification fixes +Y as up (glTF 2.0, §3.4 "Coordinate System and Units")
Y_UP_FORMATS = (".gltf", ".glb")


def up_axis_pose(up: str) -> np.ndarray:
    """4×4 pose that stands a mesh authored ``up`` ∈ {"z", "y"} in our Z-up world.

    Y-up follows glTF's axes (+Y up, the asset's front toward +Z, so +X is its
    left): +Z → our +X (forward), +X → +Y (left), +Y → +Z (up). Many Y-up OBJ
    exports share it; one whose front faces elsewhere needs a yaw in its pose.
    Z-up is identity.
    """
    if up == "z":
        return np.eye(4)
    if up == "y":
        pose = np.eye(4)
        pose[:3, :3] = [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]  # columns: images of +X, +Y, +Z
        return pose
    raise PoseError(f"up axis must be 'y' or 'z', got {up!r}")


def up_axis_of(path: str, up: str | None) -> str:
    """The up axis to load ``path`` with: ``up`` if given, else its format's (Y for glTF), else Z."""
    if up:
        return up.lower()
    return "y" if str(path).lower().endswith(Y_UP_FORMATS) else "z"


def check_pose(pose, what: str = "pose") -> np.ndarray:
    """Validate a 4×4 pose; raise :class:`PoseError` (a ``ValueError``) naming ``what`` if it is malformed."""
    pose = np.asarray(pose, dtype=np.float64)
    if pose.shape != (4, 4):
        raise PoseError(f"{what} must be a 4x4 matrix, got shape {pose.shape}")
    if not np.all(np.isfinite(pose)):
        raise PoseError(f"{what} contains NaN or infinite values")
    if not np.allclose(pose[3], (0.0, 0.0, 0.0, 1.0)):
        raise PoseError(f"{what} last row must be (0, 0, 0, 1)")
    if abs(np.linalg.det(pose[:3, :3])) < 1e-12:
        raise PoseError(f"{what} has a singular rotation/scale part")
    return pose


def parse_pose_deg(text: str) -> np.ndarray:
    """Parse ``"x,y,z[,roll,pitch,yaw]"`` (m and degrees) into a 4×4 pose."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise PoseError(f"pose {text!r} is not a comma-separated list of numbers") from None
    if len(values) not in (3, 6):
        raise PoseError(f"pose {text!r} needs 3 (x,y,z) or 6 (x,y,z,roll,pitch,yaw) values, got {len(values)}")
    if not all(np.isfinite(values)):
        raise PoseError(f"pose {text!r} contains NaN or infinite values")
    xyz = values[:3]
    rpy = np.radians(values[3:]) if len(values) == 6 else (0.0, 0.0, 0.0)
    return pose_matrix(xyz, rpy)


@njit(cache=True, nogil=True)
def _rotate(vectors, rotation, out):
    for i in range(vectors.shape[0]):
        x, y, z = vectors[i, 0], vectors[i, 1], vectors[i, 2]
        for r in range(3):
            out[i, r] = rotation[r, 0] * x + rotation[r, 1] * y + rotation[r, 2] * z
    return out


def rotate(vectors: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    """``rotation @ v`` for each row of (N, 3) float32 ``vectors``.

    A compiled loop: numpy would hand this (N×3)·(3×3) product to a threaded
    BLAS, whose thread wake-ups cost more than the arithmetic and fight the
    ray caster's threads for the cores.
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    return _rotate(vectors, np.ascontiguousarray(rotation, dtype=np.float32), np.empty_like(vectors))


def split_scale(poses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rotations (..., 3, 3), per-axis scales (..., 3)) of poses (..., 4, 4) whose 3×3 is ``R · diag(scale)``
    (OSI boxes are placed so: a unit box stretched by the instance pose)."""
    poses = np.asarray(poses, np.float64)
    scale = np.linalg.norm(poses[..., :3, :3], axis=-2)  # column norms
    return poses[..., :3, :3] / np.where(scale > 0, scale, 1.0)[..., None, :], scale


def largest_scale(poses: np.ndarray) -> np.ndarray:
    """(...) the largest column length of each pose's 3×3 (poses (..., 4, 4)): how far the pose stretches a
    distance at most (a bounding sphere's radius scales by it)."""
    return np.linalg.norm(np.asarray(poses, np.float64)[..., :3, :3], axis=-2).max(axis=-1)


def angular_velocity(orientation_rad, orientation_rate_rad_s) -> np.ndarray:
    """(3,) world angular velocity (rad/s) of a body at OSI ``orientation`` (roll φ, pitch θ, yaw ψ; rad) turning
    at ``orientation_rate`` (their time derivatives, as OSI's ``base.orientation_rate`` and
    :func:`extrapolate_pose` take them; None: zero).

    ``R = Rz(ψ)·Ry(θ)·Rx(φ)`` turns at ``ω = ψ̇·ẑ + θ̇·Rz(ψ)ŷ + φ̇·Rz(ψ)Ry(θ)x̂``: each rate about its own axis as
    the earlier rotations have placed it.
    """
    if orientation_rate_rad_s is None:
        return np.zeros(3)
    _, pitch, yaw = (float(a) for a in orientation_rad)
    roll_rate, pitch_rate, yaw_rate = (float(a) for a in orientation_rate_rad_s)
    cp, sp, cy, sy = np.cos(pitch), np.sin(pitch), np.cos(yaw), np.sin(yaw)
    return np.array([roll_rate * cy * cp - pitch_rate * sy, roll_rate * sy * cp + pitch_rate * cy,
                     yaw_rate - roll_rate * sp])


def extrapolate_pose(pose: np.ndarray, velocity_m_s, orientation_rate_rad_s, dt_s: float) -> np.ndarray:
    """``pose`` moved by ``dt_s`` seconds at OSI ``base.velocity`` (world, m/s) and ``base.orientation_rate``
    (unset: zero); how poses are taken back before a first SensorView.

    OSI's ``orientation_rate`` is the time derivative of (roll, pitch, yaw),
    so the angles move by ``rate · dt``; a scaled pose keeps its scale.
    """
    rotation, scale = split_scale(pose)
    rate = np.zeros(3) if orientation_rate_rad_s is None else np.asarray(orientation_rate_rad_s, np.float64)
    velocity = np.zeros(3) if velocity_m_s is None else np.asarray(velocity_m_s, np.float64)
    moved = pose_matrix(np.asarray(pose)[:3, 3] + dt_s * velocity, np.asarray(roll_pitch_yaw(rotation)) + dt_s * rate)
    moved[:3, :3] *= scale
    return moved
