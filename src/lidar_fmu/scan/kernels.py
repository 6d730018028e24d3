"""The compiled kernels: whether Numba's cache holds them, how long compiling took, and a warm-up scene.

Numba compiles a kernel the first time it is called and keeps it in its
on-disk cache (``__pycache__`` beside the sources, or ``$NUMBA_CACHE_DIR``):
on a machine that has never run lidar-fmu the first scan compiles every
kernel it needs (tens of seconds), later processes load them (well under a
second). Whoever runs that first scan says so beforehand
(:func:`kernels_cached`) and times it apart (:func:`compile_timer`); both a
co-simulation (:mod:`lidar_fmu.cosim.warm_up`) and ``scan`` compile before
they time a frame by scanning :func:`warm_up_scene`: a small scene with every
material class a kernel branches on (glass, mirror, retroreflector, grey
walls and boxes, a thin pole), all around the sensor, cast with and without
glass and mirrors, so that it runs every kernel a real frame runs.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from ..geometry.scene import Mesh, box_mesh
from ..geometry.transforms import pose_matrix

#: what a machine's first warm-up takes, for the messages that announce it: measured 26–37 s on an empty cache and
#: 2 idle cores, 47–80 s on 2 busy ones (the OS1-128 and a small sensor; 2-core x86-64 VM; docs/benchmarks.md, "A
#: machine's first run")
FIRST_COMPILE_TEXT = "40–80 s"

#: visual material names of the warm-up scene's panes and the IR material each stands for (built-in materials of
#: the transparent, mirror and retroreflective classes, and the default grey)
WARM_UP_MATERIALS = {"warm_up_glass": "glass_clear", "warm_up_mirror": "mirror",
                     "warm_up_retroreflector": "retroreflector", "warm_up_grey": "default_grey",
                     "osi_bounding_box": "default_grey"}
#: the material map a warm-up scan resolves the scene with (every other name: the default grey)
WARM_UP_MAP = {"default": "default_grey", "materials": WARM_UP_MATERIALS}


def _representative_kernels() -> list:
    """Kernels every frame on the CPU runs, whatever the sensor and its effects: the physics pass and Embree's
    packet cast."""
    from ..physics.returns import _fill_returns
    from ..raycast.embree4 import cast_packets

    return [_fill_returns, cast_packets]


def kernels_cached() -> bool:
    """Does Numba's on-disk cache hold the kernels of a frame for these sources? ``False`` also when that cannot
    be told (a Numba whose cache is laid out otherwise): the caller then announces a compile that may not come."""
    try:
        for kernel in _representative_kernels():
            if kernel.overloads:  # compiled or loaded in this process already
                continue
            # the index Numba checks against the source file's time stamp: empty when missing or stale
            if not kernel._cache._cache_file._load_index():
                return False
        return True
    except Exception:  # a private part of Numba: anything unexpected reads as "not known to be cached"
        return False


@contextlib.contextmanager
def compile_timer() -> Iterator[list[float]]:
    """Times Numba's compiling inside the block: the list it gives holds the seconds once the block ends
    (outermost compile events only: a kernel compiled inside another's compile counts once). Loading a kernel
    from the cache is no compile."""
    from numba.core import event

    seconds: list[float] = []
    with event.install_recorder("numba:compile") as recorder:
        try:
            yield seconds
        finally:  # (a block that raised has its compile time too)
            seconds.append(compile_seconds(recorder))


def compile_seconds(recorder) -> float:
    """Seconds Numba spent compiling (outermost compile events only) in a recorded span."""
    depth, start, total = 0, 0.0, 0.0
    for timestamp, event in recorder.buffer:
        if event.is_start:
            if depth == 0:
                start = timestamp
            depth += 1
        elif event.is_end and depth:
            depth -= 1
            if depth == 0:
                total += timestamp - start
    return total


def warm_up_scene(centre_m, radius_m: float) -> dict[str, list[tuple[Mesh, np.ndarray]]]:
    """(mesh, world pose) of the parts of a scene that runs every kernel of a frame cast from near ``centre_m``,
    by part: ``grey``, a room ``radius_m`` around it (every ray meets a wall) and, around the centre, every
    45°, a grey box and a thin pole before it (the range steps that adaptive sampling refines and that make
    second echoes) or a retroreflector; ``glass``, glass panes before a grey box; ``mirror``, mirrors turned off
    the beams. A scene with or without glass, with or without mirrors, runs kernels of its own (the casts skip
    what the scene lacks), so a warm-up casts each combination. Its materials are :data:`WARM_UP_MAP`'s."""
    cx, cy, cz = (float(v) for v in centre_m)
    r = float(radius_m)
    tall = r  # parts reach ±r/2 about the centre's height: every elevation a lidar fires at within ±26°
    room = box_mesh(2 * r, 2 * r, 2 * r, "warm_up_grey", "warm-up room")
    block = box_mesh(0.1 * r, 0.1 * r, tall, "warm_up_grey", "warm-up box")
    pole = box_mesh(0.004 * r, 0.004 * r, tall, "warm_up_grey", "warm-up pole")
    retro = box_mesh(0.01 * r, 0.1 * r, tall, "warm_up_retroreflector", "warm-up retroreflector")
    glass = box_mesh(0.01 * r, 0.2 * r, tall, "warm_up_glass", "warm-up glass")
    mirror = box_mesh(0.01 * r, 0.2 * r, tall, "warm_up_mirror", "warm-up mirror")

    def at(distance_m: float, yaw: float, side_m: float = 0.0, turn: float = 0.0) -> np.ndarray:
        along, across = np.array([np.cos(yaw), np.sin(yaw)]), np.array([-np.sin(yaw), np.cos(yaw)])
        x, y = np.array([cx, cy]) + distance_m * along + side_m * across
        return pose_matrix((x, y, cz), (0.0, 0.0, yaw + turn))

    parts: dict[str, list[tuple[Mesh, np.ndarray]]] = {"grey": [(room, pose_matrix((cx, cy, cz)))], "glass": [],
                                                       "mirror": []}
    for k in range(8):  # every 45°, so that a lidar looking any way sees each part
        yaw = k * np.pi / 4
        parts["grey"] += ([(block, at(0.6 * r, yaw)), (pole, at(0.4 * r, yaw, 0.02 * r))] if k % 2 else
                          [(retro, at(0.5 * r, yaw))])
        # between those: glass before a box, and a mirror turned 30° (its reflection meets the room's wall)
        parts["glass"] += [(glass, at(0.4 * r, yaw + np.pi / 8)), (block, at(0.7 * r, yaw + np.pi / 8))]
        parts["mirror"].append((mirror, at(0.5 * r, yaw - np.pi / 16, turn=np.pi / 6)))
    return parts


def warm_up_radius_m(max_range_m: float) -> float:
    """The warm-up room's half side for a lidar reaching ``max_range_m``: its walls well within reach, the parts
    inside it beyond any minimum range (within 2–40 m)."""
    return float(np.clip(0.4 * max_range_m, 2.0, 40.0))


#: the combinations of glass and mirrors a warm-up casts (:func:`warm_up_scene`: a scene without them runs casts of
#: its own)
WARM_UP_PARTS = ((), ("glass", "mirror"), ("glass",), ("mirror",))


def warm_up_scans(sensor, sensor_pose, backend: str = "auto", ir_database=None, pattern=None,
                  ground_truth: bool = False) -> None:
    """Scan :func:`warm_up_scene` around ``sensor_pose`` with ``sensor`` (a :class:`~lidar_fmu.sensors.Sensor`)
    through ``backend`` with and without glass and mirrors: every kernel a still scan of ``pattern`` (default: the
    sensor's frame) runs is then compiled, or loaded from Numba's cache, and the next scan's timings are its own."""
    from ..geometry.scene import Scene
    from .lidar import Lidar

    pose = np.asarray(sensor_pose, np.float64)
    parts = warm_up_scene(pose[:3, 3], warm_up_radius_m(sensor.max_range_m))
    for shown in WARM_UP_PARTS:
        scene = Scene()
        placed = parts["grey"] + [part for name in shown for part in parts[name]]
        for k, (mesh, part_pose) in enumerate(placed):
            scene.add_instance(k, mesh, part_pose)
        lidar = Lidar(scene, sensor, backend=backend, materials=WARM_UP_MAP, ir_database=ir_database,
                      warn=lambda message: None)
        lidar.scan(pose, pattern=pattern, ground_truth=ground_truth)
