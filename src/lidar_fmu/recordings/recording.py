"""A real lidar recording as range images: an Ouster ``.pcap`` (through ouster-sdk) or its extracted ``.npz``.

Images are **staggered**, the unit's own pixel order: row = beam (the metadata's ``beam_altitude_angles``
order), column = measurement column (one firing time), exactly as ouster-sdk's ``LidarScan`` holds them. Pixel
(beam ``b``, column ``m``) is then ray ``(m − first) · B + b`` of :func:`lidar_fmu.sensors.ouster.ouster_rays`
(``first`` = the metadata's first ``column_window`` column), with no destaggering in between.

``RANGE`` is the unit's: millimetres from the lidar origin, so a return lies at
``beam origin + (RANGE − d) · direction`` with ``d`` = √(n² + z0²) (n: ``lidar_origin_to_beam_origin_mm``,
z0: the beam origin's height; :func:`lidar_fmu.sensors.ouster.range_offset_m`, after ouster-sdk's
``make_xyz_lut``, whose output ``scripts/extract_ouster_frames.py`` stores beside the images and the tests hold
our placement against). ``0`` means no return.

ouster-sdk pins old versions of common packages (``psutil<6``, ``click<8.1.8``), so lidar-fmu never needs it:
``scripts/extract_ouster_frames.py`` (run in ouster-sdk's own venv) writes the ``.npz`` this module reads.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..documents import read_text
from ..errors import LidarFmuError
from ..sensors.ouster import OusterCalibration

#: range-image fields (npz key → ouster-sdk ChanField name) a recording may hold
FIELDS = {"range_mm": "RANGE", "reflectivity": "REFLECTIVITY", "signal": "SIGNAL", "near_ir": "NEAR_IR",
          "range2_mm": "RANGE2", "reflectivity2": "REFLECTIVITY2"}


class RecordingError(LidarFmuError, ValueError):
    """A recording that cannot be read as range images of its unit."""


@dataclass(frozen=True)
class Recording:
    """Frames of one unit: ``images[key]`` (F, beams, columns) per :data:`FIELDS` key present."""

    name: str
    images: dict[str, np.ndarray]
    status: np.ndarray  # (F, columns) uint32; bit 0: the unit sent that column
    timestamp_ns: np.ndarray  # (F, columns)
    frame_id: np.ndarray  # (F,)
    profile: str  # the unit's udp_profile_lidar, e.g. RNG15_RFL8_NIR8

    @property
    def frames(self) -> int:
        return len(self.frame_id)

    @property
    def dual(self) -> bool:
        return "range2_mm" in self.images

    def sent(self, frame: int) -> np.ndarray:
        """(columns,) bool: the columns the unit sent in ``frame``."""
        return (self.status[frame] & 1).astype(bool)

    def first_returns(self) -> np.ndarray:
        """(F, beams, columns) bool: the pixels of the sent columns that hold a first return."""
        return (self.images["range_mm"] > 0) & (self.status & 1).astype(bool)[:, None, :]


def read_recording(path: str, cal: OusterCalibration, metadata_path: str) -> Recording:
    """The range images of ``path`` (``.pcap`` or ``.npz``), checked against the unit's calibration ``cal``
    (read from ``metadata_path``, which ouster-sdk reads too for a ``.pcap``)."""
    if not os.path.isfile(path):
        raise RecordingError(f"recording not found: {path}")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npz":
        recording = _read_npz(path)
    elif ext in (".pcap", ".pcapng"):
        recording = _read_pcap(path, metadata_path)
    else:
        raise RecordingError(f"recording {path}: expected a .pcap (ouster-sdk) or an extracted .npz, got {ext or 'no extension'!r}")
    shape = recording.images["range_mm"].shape[1:]
    if shape != (cal.beams, cal.columns):
        raise RecordingError(f"recording {path}: range images of {shape[0]}×{shape[1]} pixels, but the metadata "
                             f"{cal.name} describes {cal.beams} beams × {cal.columns} columns")
    if not recording.frames:
        raise RecordingError(f"recording {path} holds no frame")
    return recording


#: largest extracted recording read (an .npz is unpacked whole into memory: ~3 × 10⁸ pixels of 16-bit fields)
MAX_NPZ_BYTES = 2 * 2**30


def _read_npz(path: str) -> Recording:
    try:
        if os.stat(path).st_size > MAX_NPZ_BYTES:
            raise RecordingError(f"recording {path} is over {MAX_NPZ_BYTES >> 30} GiB: give fewer frames")
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except (OSError, ValueError, EOFError) as exc:
        raise RecordingError(f"cannot read recording {path}: {exc}") from None
    missing = [key for key in ("range_mm", "reflectivity", "status", "frame_id") if key not in arrays]
    if missing:
        raise RecordingError(f"recording {path} lacks {', '.join(missing)} (write it with "
                             f"scripts/extract_ouster_frames.py)")
    images = {key: np.asarray(arrays[key]) for key in FIELDS if key in arrays}
    frames = images["range_mm"].shape
    for key, image in images.items():
        if image.ndim != 3 or image.shape != frames or not np.issubdtype(image.dtype, np.integer):
            raise RecordingError(f"recording {path}: {key} must be integer images of shape {frames}, "
                                 f"got {image.dtype} {image.shape}")
    if ("range2_mm" in images) != ("reflectivity2" in images):
        raise RecordingError(f"recording {path}: range2_mm and reflectivity2 (a dual return's second) come "
                             f"together, got only {'range2_mm' if 'range2_mm' in images else 'reflectivity2'}")
    per_column = {"status": np.asarray(arrays["status"])}
    if "timestamp_ns" in arrays:
        per_column["timestamp_ns"] = np.asarray(arrays["timestamp_ns"])
    for key, values in per_column.items():
        if values.shape != (frames[0], frames[2]) or not np.issubdtype(values.dtype, np.integer):
            raise RecordingError(f"recording {path}: {key} must be integers of shape (frames, columns) = "
                                 f"{(frames[0], frames[2])}, got {values.dtype} {values.shape}")
    status = per_column["status"]
    timestamp = per_column.get("timestamp_ns", np.zeros(status.shape, np.uint64))
    frame_id = np.asarray(arrays["frame_id"]).reshape(-1)
    if len(frame_id) != frames[0] or not np.issubdtype(frame_id.dtype, np.integer):
        raise RecordingError(f"recording {path}: frame_id must hold one integer per frame ({frames[0]}), got "
                             f"{frame_id.dtype} × {len(frame_id)}")
    profile = str(arrays["udp_profile_lidar"]) if "udp_profile_lidar" in arrays else "unknown"
    return Recording(os.path.splitext(os.path.basename(path))[0], images, status.astype(np.uint32), timestamp,
                     frame_id, profile)


def _read_pcap(path: str, metadata_path: str) -> Recording:
    try:
        from ouster.sdk import core, open_source
    except ImportError:
        raise RecordingError(f"reading {path} needs ouster-sdk (pip install 'lidar-fmu[ouster]', in a venv "
                             f"of its own: it pins old psutil and click); "
                             f"or give the .npz that scripts/extract_ouster_frames.py writes") from None
    try:
        source = open_source(path, meta=[metadata_path], sensor_idx=0)
        images: dict[str, list] = {key: [] for key in FIELDS}
        status, timestamp, frame_id = [], [], []
        for frame_set in source:
            for scan in frame_set.valid_frames():
                present = set(scan.fields)
                for key, field in FIELDS.items():
                    if field in present:
                        images[key].append(np.asarray(scan.field(getattr(core.ChanField, field))))
                status.append(np.asarray(scan.status, np.uint32))
                timestamp.append(np.asarray(scan.timestamp, np.uint64))
                frame_id.append(int(scan.frame_id))
        profile = str(source.sensor_info[0].format.udp_profile_lidar)
    except (RuntimeError, ValueError) as exc:  # ouster-sdk's errors on a damaged or foreign capture
        raise RecordingError(f"ouster-sdk cannot read {path}: {exc}") from None
    if not frame_id:
        raise RecordingError(f"recording {path} holds no complete frame of this unit")
    return Recording(os.path.splitext(os.path.basename(path))[0],
                     {key: np.stack(v) for key, v in images.items() if v}, np.stack(status), np.stack(timestamp),
                     np.asarray(frame_id), profile)


#: largest KITTI pose file read (12 numbers a frame: room for 10⁴ frames and more)
MAX_POSES_BYTES = 2**22


def read_kitti_poses(path: str, frames: int) -> np.ndarray:
    """(frames, 4, 4) world_from_sensor poses from a KITTI pose file: one row-major 3×4 matrix (12 numbers) per
    line, one line per frame of the recording."""
    text = read_text(path, "poses", RecordingError, limit=MAX_POSES_BYTES)
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if len(lines) != frames:
        raise RecordingError(f"poses {path}: {len(lines)} poses for a recording of {frames} frame(s)")
    try:
        values = np.array([[float(v) for v in line] for line in lines])
    except ValueError:
        values = np.empty((0, 0))
    if values.shape != (frames, 12) or not np.all(np.isfinite(values)):
        raise RecordingError(f"poses {path}: each line must hold 12 finite numbers (a 3×4 matrix, KITTI layout)")
    poses = np.tile(np.eye(4), (frames, 1, 1))
    poses[:, :3, :] = values.reshape(frames, 3, 4)
    return poses
