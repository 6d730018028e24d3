"""LAS 1.4 / LAZ point-cloud files through ``laspy`` (LAZ compressed by ``lazrs``).

Point data record format 6, one record per return: ``X Y Z`` in millimetres (sensor frame, or world with
``frame="world"``), the OSI intensity scaled to 16 bits, ``return_number`` / ``number_of_returns`` from the
``echo`` field, ``gps_time`` the scenario time each point fired at, ``classification`` the ASPRS class of each
point's ``semantic`` class where the cloud has them (:func:`~lidar_fmu.geometry.semantic.asprs_classes`), and every
other field exactly among the extra bytes (``object_id`` as uint64, ``semantic`` as our own codes). A VLR (user id
``lidar_fmu``, record 1) holds the frame's times as JSON.
The dimensions one by one: docs/formats.md, "LAS / LAZ".
"""
from __future__ import annotations

import json
import os

import numpy as np

from .._version import __version__
from ..geometry.semantic import asprs_classes
from ._common import PointCloudFileError
from .pcd import _points_array

#: metres per LAS integer unit: millimetres
LAS_SCALE_M = 0.001
#: point fields that become LAS standard dimensions, not extra bytes
_STANDARD = ("x", "y", "z", "echo", "time", "intensity")
#: the VLR that holds a cloud's frame times (JSON)
STAMPS_VLR_USER_ID, STAMPS_VLR_RECORD_ID = "lidar_fmu", 1


def _as_cloud(cloud_or_points):
    """(points, ray_index or None, timestamp_s, sensor_pose or None, firing times or None): firing times (s
    after the first firing) from the pattern, none for a snapshot cloud."""
    points = _points_array(cloud_or_points)
    ray_index = getattr(cloud_or_points, "ray_index", None)
    if ray_index is not None:
        ray_index = np.asarray(ray_index)
        if len(ray_index) != len(points) or (len(ray_index) and ray_index.min() < 0):
            ray_index = None  # decoded from OSI: the rays are unknown
    firing_s = None
    pattern = getattr(cloud_or_points, "pattern", None)
    if pattern is not None and ray_index is not None and not getattr(cloud_or_points, "snapshot", False):
        firing_s = np.asarray(pattern.time_offset_s)[ray_index]
    return (points, ray_index, float(getattr(cloud_or_points, "timestamp_s", 0.0)),
            getattr(cloud_or_points, "sensor_pose", None), firing_s)


def _returns(points: np.ndarray, ray_index) -> tuple[np.ndarray, np.ndarray]:
    """(return_number, number_of_returns), 1-based, LAS 1.4 range 1–15."""
    n = len(points)
    assert points.dtype.names is not None  # structured (_points_array)
    if "echo" not in points.dtype.names:
        return np.ones(n, np.uint8), np.ones(n, np.uint8)
    return_number = points["echo"].astype(np.int64) + 1
    if return_number.size and (return_number.min() < 1 or return_number.max() > 15):
        raise PointCloudFileError(f"echo must be 0–14 for LAS (return numbers 1–15), got "
                                  f"{return_number.min() - 1}…{return_number.max() - 1}")
    number_of_returns = return_number.copy()
    if ray_index is not None and n:
        per_ray = np.bincount(ray_index)[ray_index]
        number_of_returns = np.maximum(number_of_returns, per_ray)
    return return_number.astype(np.uint8), np.minimum(number_of_returns, 15).astype(np.uint8)


def _extra_dims(points: np.ndarray):
    import laspy

    params = []
    assert points.dtype.names is not None and points.dtype.fields is not None  # structured (_points_array)
    for name in points.dtype.names:
        if name in _STANDARD:
            continue
        dt = points.dtype.fields[name][0]
        if dt.subdtype is not None:
            raise PointCloudFileError(f"LAS extra bytes are scalars here; field {name!r} has shape {dt.shape}")
        if dt.kind == "b":
            dt = np.dtype("u1")
        if dt.kind not in "uif" or len(name) > 32:
            raise PointCloudFileError(f"field {name!r} ({dt}) cannot be a LAS extra-bytes dimension")
        params.append(laspy.ExtraBytesParams(name=name, type=dt.newbyteorder("<"),
                                             description=_DESCRIPTIONS.get(name, "")))
    return params


_DESCRIPTIONS = {
    "range": "m along the beam",
    "reflectivity": "0-1 Lambertian-equivalent",
    "normal_x": "unit normal x", "normal_y": "unit normal y", "normal_z": "unit normal z",
    "beam_id": "emitter index",
    "object_id": "hit instance; 2^64-1 environment",
    "saturated": "1: retroreflector saturated",
    "ring": "beam by elevation, 0 lowest",
    "radial_velocity": "dr/dt m/s, <0 approaching",
    "semantic": "class hit (lidar-fmu codes)",
    "x_true": "noise-free x (m)", "y_true": "noise-free y (m)", "z_true": "noise-free z (m)",
    "range_true": "noise-free range (m)",
    "material_id": "IR material id; 65535 none",
    "incidence_angle_rad": "ray to surface normal (rad)",
}


def write_las(path, cloud, *, frame: str = "sensor", compress: bool | None = None) -> None:
    """Write ``cloud`` (a PointCloud or structured point array) as LAS 1.4, point format 6.

    ``.laz`` is LAZ-compressed (``compress`` overrides the extension);
    ``frame="world"`` writes positions moved by ``cloud.sensor_pose``. See
    docs/formats.md, "LAS / LAZ", for the dimensions.
    """
    try:
        import laspy
    except ImportError:
        raise PointCloudFileError(f"{os.fspath(path)}: writing LAS needs the 'laspy' package "
                                  "(pip install 'laspy[lazrs]')") from None
    if frame not in ("sensor", "world"):
        raise PointCloudFileError(f"unknown LAS frame {frame!r}; expected 'sensor' or 'world'")
    points, ray_index, timestamp_s, sensor_pose, firing_s = _as_cloud(cloud)
    if compress is None:
        compress = os.fspath(path).lower().endswith(".laz")
    if compress and not laspy.LazBackend.detect_available():
        raise PointCloudFileError(f"{os.fspath(path)}: writing LAZ needs a LAZ backend "
                                  "(pip install 'laspy[lazrs]')")

    xyz = np.stack([points["x"], points["y"], points["z"]], axis=1).astype(np.float64)
    offsets = np.zeros(3)
    if frame == "world":
        pose = np.eye(4) if sensor_pose is None else np.asarray(sensor_pose, np.float64)
        xyz = xyz @ pose[:3, :3].T + pose[:3, 3]
        if len(xyz):
            offsets = np.floor(xyz.min(axis=0))
    if len(xyz) and np.abs(xyz - offsets).max() / LAS_SCALE_M >= 2**31 - 1:
        raise PointCloudFileError(f"{os.fspath(path)}: points span more than LAS's int32 millimetres")

    header = laspy.LasHeader(version="1.4", point_format=6)
    header.scales = np.full(3, LAS_SCALE_M)
    header.offsets = offsets
    header.system_identifier = "lidar-fmu simulation"
    header.generating_software = f"lidar-fmu {__version__}"[:32]
    header.add_extra_dims(_extra_dims(points))
    stamps = getattr(cloud, "frame_stamps", None)
    if stamps:
        header.vlrs.append(laspy.VLR(STAMPS_VLR_USER_ID, STAMPS_VLR_RECORD_ID, "frame times (s)",
                                     json.dumps(stamps).encode("ascii")))
    las = laspy.LasData(header, points=laspy.ScaleAwarePointRecord.zeros(len(points), header=header))
    las.x, las.y, las.z = xyz[:, 0], xyz[:, 1], xyz[:, 2]
    las.intensity = np.rint(np.clip(points["intensity"], 0.0, 100.0) * 655.35).astype(np.uint16) \
        if "intensity" in points.dtype.names else np.zeros(len(points), np.uint16)
    las.return_number, las.number_of_returns = _returns(points, ray_index)
    if "semantic" in points.dtype.names:
        las.classification = asprs_classes(points["semantic"])
    first_firing_s = getattr(cloud, "first_firing_s", None)
    first_firing_s = timestamp_s if first_firing_s is None else float(first_firing_s)
    if "time" in points.dtype.names:
        las.gps_time = first_firing_s + points["time"].astype(np.float64)
    elif firing_s is not None:
        las.gps_time = first_firing_s + firing_s.astype(np.float64)
    else:
        las.gps_time = np.full(len(points), timestamp_s)
    for name in points.dtype.names:
        if name not in _STANDARD:
            las[name] = points[name].astype(las[name].dtype) if points.dtype[name].kind == "b" else points[name]
    las.update_header()
    las.write(os.fspath(path), do_compress=compress)


__all__ = ["write_las", "LAS_SCALE_M"]
