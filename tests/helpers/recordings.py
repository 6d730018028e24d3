"""Recordings for the validate and calibrate tests: the shared units' extracted frames, and a unit simulated in a
room and written as the unit would write its range images."""
import os

import numpy as np
import trimesh

from lidar_fmu.geometry.scene import Mesh, Scene
from lidar_fmu.recordings.recording import Recording
from lidar_fmu.recordings.validate import sensor_spec
from lidar_fmu.scan.lidar import Lidar

DATA = os.path.join(os.path.dirname(__file__), os.pardir, "data", "ouster")


def room_scene():
    """A 30 × 20 × 8 m room (walls 10–15 m from the unit) with a block and a pillar standing in it."""
    room = trimesh.creation.box(extents=(30, 20, 8))
    room.apply_translation((0, 0, 2))
    block = trimesh.creation.box(extents=(2, 3, 4))
    block.apply_translation((6, 2, 0))
    pillar = trimesh.creation.box(extents=(1, 1, 8))
    pillar.apply_translation((-4, -5, 1))
    scene = Scene()
    for i, part in enumerate((room, block, pillar)):
        scene.add_instance(i, Mesh(part.vertices, part.faces, np.zeros(len(part.faces), int), ("default",)), np.eye(4))
    return scene


def corrugated_wall_scene(amplitude_m=0.3, period_m=1.5, x_m=10.0):
    """A wall x = x_m + amplitude · sin(2π y / period) in front of the unit, 8 m wide and 10 m high: a surface whose
    shape shows in a chord over a few pixels."""
    y = np.linspace(-4.0, 4.0, 401)
    z = np.array([-5.0, 5.0])
    yy, zz = np.meshgrid(y, z, indexing="ij")
    vertices = np.stack([x_m + amplitude_m * np.sin(2 * np.pi * yy / period_m), yy, zz], -1).reshape(-1, 3)
    i = np.arange(len(y) - 1)
    faces = np.concatenate([np.stack([2 * i, 2 * i + 2, 2 * i + 1], 1), np.stack([2 * i + 1, 2 * i + 2, 2 * i + 3], 1)])
    scene = Scene()
    scene.add_instance(0, Mesh(vertices, faces, np.zeros(len(faces), int), ("default",)), np.eye(4))
    return scene


def simulated_recording(cal, metadata, off_by_one=False, poses=None, spec=None, scene=None):
    """The unit simulated in a room, written as the unit would: its range image in RANGE's convention, placed by
    each return's beam and the pattern's measurement column, one frame per pose. ``off_by_one``: each odd
    (held-out) column holds the next column's pixels instead, as a matching one column off would compare them."""
    poses = [np.eye(4)] if poses is None else poses
    lidar = Lidar(room_scene() if scene is None else scene, spec or sensor_spec(metadata, cal, None, False), backend="embree")
    range_mm = np.zeros((len(poses), cal.beams, cal.columns), np.uint32)
    reflectivity = np.zeros_like(range_mm, dtype=np.uint16)
    for f, pose in enumerate(poses):
        cloud = lidar.scan(pose)
        beam = cloud.points["beam_id"].astype(int)
        column = lidar.sensor.pattern.column[cloud.ray_index].astype(int)
        range_m = cloud.points["range"]  # already RANGE's convention (the unit's own)
        range_mm[f, beam, column] = np.rint(range_m * 1000).astype(np.uint32)
        reflectivity[f, beam, column] = np.rint(100 * cloud.points["reflectivity"]).astype(np.uint16)
    if off_by_one:
        range_mm[:, :, 1::2] = np.roll(range_mm, -1, axis=2)[:, :, 1::2]
    images = {"range_mm": range_mm, "reflectivity": reflectivity}
    frames = len(poses)
    return Recording("room", images, np.ones((frames, cal.columns), np.uint32),
                     np.zeros((frames, cal.columns), np.uint64), np.arange(frames), "simulated")
