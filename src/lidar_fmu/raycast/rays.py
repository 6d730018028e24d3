"""What every backend takes: a batch of rays, and what to do where a ray meets a surface it passes.

A :class:`RayBatch` gives per-ray origins and unit directions in one frame
(a sensor's, or the world's), the frame's pose, per-ray firing times and beam
ids, and a maximum range. Casters place the frame in the world themselves:
CPU casters rotate the rays (or move the instances into the frame), the CUDA
one makes the rays on the GPU from directions kept resident there, so a frame
of a lidar costs one 4×4 upload.

A :class:`Continuation` says which surfaces rays go on through (transparent
materials) or reflect off (mirrors) and how many; every caster applies the
same rule, :func:`lidar_fmu.physics.hit_rules.segment_after`, inside its own loop.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import LidarFmuError
from ..geometry.transforms import largest_scale

if TYPE_CHECKING:
    from ..geometry.pattern import RayPattern


class RayError(LidarFmuError, ValueError):
    """Rays that cannot be cast: wrong shapes, NaN or infinite values, zero directions."""


#: the origin of the frame, for rays that all leave it (a rotating lidar's one centre)
_AT_FRAME_ORIGIN = np.zeros((1, 3), np.float32)
_AT_FRAME_ORIGIN.setflags(write=False)


@dataclass(frozen=True, eq=False)
class RayBatch:
    """Rays of one cast (m, s); arrays are contiguous, ``float32`` unless said.

    ``origins``: ``(N, 3)``, or ``(1, 3)`` when every ray leaves the same
    point, in the frame. ``directions``: ``(N, 3)`` unit, in the frame.
    ``world_from_frame``: ``(4, 4)`` float64 pose of the frame. ``time_s``:
    ``(N,)`` firing time of each ray after the batch's first; casters cast
    the scene as it is posed now, so a caller that models motion casts a
    frame in time slices (:meth:`span`). ``beam_id``: ``(N,)`` uint32 emitter
    of each ray, carried to the returns. ``max_range_m``: nothing farther is hit.
    """

    origins: NDArray[np.float32]
    directions: NDArray[np.float32]
    world_from_frame: NDArray[np.float64]
    time_s: NDArray[np.float32]
    beam_id: NDArray[np.uint32]
    max_range_m: float
    #: directions a caster may group rays by instead of ``directions`` (same shape): the pattern's own, when
    #: the rays are the pattern turned a little (motion), so an order computed once per pattern still holds
    coherence_key: NDArray[np.float32] | None = None
    #: the rays' own order already keeps neighbours together (a spinning pattern's firing order): keep it
    in_packet_order: bool = False

    def __len__(self) -> int:
        return len(self.directions)

    @property
    def shared_origin(self) -> bool:
        """Do all rays leave one point (``origins`` is ``(1, 3)``)?"""
        return self.origins.shape[0] == 1

    def reach_m(self) -> float:
        """How far from the frame's origin (world) any ray of the batch can meet something: :func:`reach_m`."""
        return reach_m(self.origins, self.max_range_m, self.world_from_frame)

    @property
    def in_world_frame(self) -> bool:
        return bool(np.array_equal(self.world_from_frame, np.eye(4)))

    @classmethod
    def from_pattern(cls, pattern: RayPattern, world_from_sensor: ArrayLike, max_range_m: float) -> RayBatch:
        """A sensor's pattern (:class:`~lidar_fmu.sensors.RayPattern`) from its pose; no copies of the pattern."""
        origins = _AT_FRAME_ORIGIN if getattr(pattern, "origins", None) is None else pattern.origins
        return cls(np.ascontiguousarray(origins, np.float32), np.ascontiguousarray(pattern.directions, np.float32),
                   np.asarray(world_from_sensor, np.float64), np.ascontiguousarray(pattern.time_offset_s, np.float32),
                   np.ascontiguousarray(pattern.beam_id, np.uint32), float(max_range_m))

    @classmethod
    def in_world(cls, origins: ArrayLike, directions: ArrayLike, max_range_m: float = np.inf) -> RayBatch:
        """Rays given in the world frame (validated; directions normalised), fired at once, beam 0."""
        origins, directions = as_rays(origins, directions)
        n = len(directions)
        return cls(origins.reshape(-1, 3), directions, np.eye(4), np.zeros(n, np.float32), np.zeros(n, np.uint32),
                   float(max_range_m))

    def span(self, start: int, stop: int) -> RayBatch:
        """Rays ``start:stop`` of this batch as views (no copies), e.g. one time slice of rays gathered by slice."""
        origins = self.origins if self.shared_origin else self.origins[start:stop]
        key = None if self.coherence_key is None else self.coherence_key[start:stop]
        return RayBatch(origins, self.directions[start:stop], self.world_from_frame, self.time_s[start:stop],
                        self.beam_id[start:stop], self.max_range_m, key, self.in_packet_order)

    def world_rays(self) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """(origins (N, 3) or (1, 3), unit directions (N, 3)) in the world frame, float32."""
        R = self.world_from_frame[:3, :3]
        origins = (self.origins.astype(np.float64) @ R.T + self.world_from_frame[:3, 3]).astype(np.float32)
        directions = (self.directions.astype(np.float64) @ R.T).astype(np.float32)
        return origins, directions


def as_rays(origins: ArrayLike, directions: ArrayLike) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """Validate and normalise ray arrays → (origins (N,3) or (3,), unit directions (N,3)) float32."""
    d = np.asarray(directions, dtype=np.float32)
    if d.ndim != 2 or d.shape[1] != 3:
        raise RayError(f"directions must be (N, 3), got {d.shape}")
    o = np.asarray(origins, dtype=np.float32)
    if o.shape not in ((3,), (len(d), 3)):
        raise RayError(f"origins must be (3,) or ({len(d)}, 3), got {o.shape}")
    if not (np.all(np.isfinite(o)) and np.all(np.isfinite(d))):
        raise RayError("ray origins/directions contain NaN or infinite values")
    squared = np.einsum("ij,ij->i", d, d)
    if np.abs(squared - 1.0).max(initial=0.0) > 1e-5:
        if np.any(squared == 0):
            raise RayError("ray directions must be non-zero")
        d = d / np.sqrt(squared)[:, None]
    return np.ascontiguousarray(o), np.ascontiguousarray(d)


def reach_m(origins: np.ndarray, max_range_m: float, world_from_frame: np.ndarray) -> float:
    """A bound (m, world) on how far from the frame's origin rays leaving ``origins`` (·, 3, in the frame) reach
    within ``max_range_m``: the farthest origin (bounded by √3 × its largest coordinate: no square root per ray)
    plus the range, stretched by the frame's largest scale; ∞ where that is not a number (anywhere)."""
    spread = float(np.sqrt(3.0)) * float(np.abs(origins).max(initial=0.0))
    radius = max(1.0, float(largest_scale(world_from_frame))) * (spread + float(max_range_m))
    return float("inf") if np.isnan(radius) else radius
