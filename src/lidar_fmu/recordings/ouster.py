"""An Ouster recording: its ``.pcap`` (through ouster-sdk) or the ``.npz`` ``scripts/extract_ouster_frames.py``
writes from it, and the unit's rays from its metadata JSON.

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

import math
import os
import zipfile
import zlib
from typing import Any

import numpy as np

from ..errors import UserError
from ..physics.echoes import DEFAULT_DUAL_SAMPLES
from ..physics.range_limit import RangeReflectivityLimit
from ..sensors.ouster import (
    OusterCalibration,
    OusterMetadataError,
    beam_footprint,
    ouster_rays,
    range_offset_m,
    read_ouster_metadata,
    unit_figures,
    unit_spec,
)
from ..sensors.spec import Sensor, resolve_spec
from .recording import FIELDS, Recording, RecordingError
from .units import PixelRays, UnitFile, UnitGeometry


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


#: largest extracted recording read, on disk and expanded (an .npz is unpacked whole into memory: ~10⁹ pixels of
#: 16-bit fields)
MAX_NPZ_BYTES = 2 * 2**30


def _read_npz(path: str) -> Recording:
    try:
        if os.stat(path).st_size > MAX_NPZ_BYTES:
            raise RecordingError(f"recording {path} is over {MAX_NPZ_BYTES >> 30} GiB: give fewer frames")
        arrays = _npz_arrays(path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
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


def _npz_arrays(path: str) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz``, each expanded only as far as its zip entry and its ``.npy`` header both declare,
    and those checked against :data:`MAX_NPZ_BYTES` before anything expands: a header claiming more than its entry
    holds, or an entry that expands past its declared size (a zip bomb), is refused after reading no more than
    was declared."""
    with zipfile.ZipFile(path) as archive:
        members = [info for info in archive.infolist() if info.filename.endswith(".npy")]
        declared = sum(info.file_size for info in members)
        if declared > MAX_NPZ_BYTES:
            raise RecordingError(f"recording {path} expands to {declared / 2**30:.1f} GiB, over "
                                 f"{MAX_NPZ_BYTES >> 30} GiB: give fewer frames")
        return {info.filename.removesuffix(".npy"): _npy_member(archive, info, path) for info in members}


def _npy_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> np.ndarray:
    """One ``.npy`` of an ``.npz``, read to exactly the size its header declares, which must be its entry's."""
    with archive.open(info) as f:
        assert isinstance(f, zipfile.ZipExtFile)  # what ZipFile.open reads with (typed as IO[bytes])
        version = np.lib.format.read_magic(f)
        shape, fortran, dtype = (np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                                 else np.lib.format.read_array_header_2_0(f))
        if dtype.hasobject:
            raise RecordingError(f"recording {path}: {info.filename} holds Python objects, not numbers")
        data_bytes = math.prod(shape) * dtype.itemsize
        if f.tell() + data_bytes != info.file_size:
            raise RecordingError(f"recording {path}: {info.filename}'s header declares {data_bytes:,} bytes of "
                                 f"{dtype} {shape}, its zip entry {info.file_size - f.tell():,}")
        data = bytearray(data_bytes)
        if f.readinto(data) != data_bytes or f.read(1):  # the entry stops at its declared size; the CRC checks it
            raise RecordingError(f"recording {path}: {info.filename} does not hold the {data_bytes:,} bytes it "
                                 f"declares")
    return np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")


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


def pixel_rays(cal: OusterCalibration) -> PixelRays:
    """The rays of every pixel of the unit's staggered image, as :func:`ouster_rays` fires them."""
    origins, directions, beam, column, _ = ouster_rays(cal)
    B, W = cal.beams, cal.columns
    origin = np.full((B, W, 3), np.nan)
    direction = np.full((B, W, 3), np.nan)
    index = np.full((B, W), -1, np.int64)
    origin[beam, column] = origins
    direction[beam, column] = directions
    direction /= np.linalg.norm(direction, axis=2, keepdims=True)
    index[beam, column] = np.arange(len(beam))
    shift = np.rint(W * np.asarray(cal.azimuth_deg) / 360.0).astype(np.int64)
    grid = (np.arange(W)[None, :] + shift[:, None]) % W
    return PixelRays(origin, direction, index, range_offset_m(cal), grid)


def unit_metadata(metadata_path: str) -> OusterCalibration:
    """The unit's calibration from its metadata JSON (``--metadata``), or one line saying what is wrong with it."""
    if not os.path.isfile(metadata_path):
        raise UserError(f"--metadata {metadata_path}: file not found")
    try:
        return read_ouster_metadata(metadata_path)
    except (OusterMetadataError, ValueError) as exc:
        raise UserError(f"--metadata {metadata_path}: {exc}") from None


def sensor_spec(metadata_path: str, cal: OusterCalibration, spec: str | None, dual: bool) -> dict[str, Any]:
    """The spec of the unit simulated: ``spec`` (preset or file; default the metadata's own resolution) with the
    unit's calibration as its geometry; for a dual-return recording, ``returns: dual`` unless the spec says."""
    resolved = resolve_spec(metadata_path if spec is None else spec)
    resolved = resolved | {"ouster_metadata": os.path.abspath(metadata_path), "frame_rate_hz": cal.frame_rate_hz}
    for key in ("vertical_angles_deg", "vertical_fov_deg", "channels", "calibration", "horizontal_samples",
                "horizontal_resolution_deg", "horizontal_fov_deg"):
        resolved.pop(key, None)
    if dual and "returns" not in resolved:
        resolved |= {"returns": "dual", "divergence_samples": resolved.get("divergence_samples", DEFAULT_DUAL_SAMPLES)}
        if not resolved.get("beam_divergence_mrad"):  # a spec without a footprint: the unit's own
            try:
                line = unit_figures(cal).line
            except OusterMetadataError:  # a line without datasheet figures: the OS1's footprint (assumed)
                line = "OS1"
            resolved |= beam_footprint(line, cal.beams)
    resolved["motion_distortion"] = False  # the mesh is the scene as the unit saw it, motion included
    return resolved


class OusterGeometry(UnitGeometry):
    """An Ouster unit: the same rays every frame, from its metadata (:func:`pixel_rays`)."""

    def __init__(self, cal: OusterCalibration, metadata_path: str) -> None:
        self.cal = cal
        self.name = cal.name
        self.metadata_path = metadata_path
        self.beams, self.columns = cal.beams, cal.columns
        self.beam_origin_mm = cal.beam_origin_mm
        self._rays: PixelRays | None = None

    def rays(self, recording: Recording, frame: int) -> PixelRays:
        if self._rays is None:
            self._rays = pixel_rays(self.cal)
        return self._rays

    def frame_sensor(self, sensor: Sensor, rays: PixelRays) -> Sensor:
        return sensor

    def own_spec(self) -> dict[str, Any]:
        return unit_spec(self.cal, os.path.abspath(self.metadata_path))

    def sensor_spec(self, spec: str | None, dual: bool) -> dict[str, Any]:
        return sensor_spec(self.metadata_path, self.cal, spec, dual)

    def base_spec(self) -> dict[str, Any]:
        return self.own_spec()

    def datasheet_limit(self, max_range_m: float) -> RangeReflectivityLimit:
        return RangeReflectivityLimit(unit_figures(self.cal).datasheet.pairs, "log", max_range_m)


def open_ouster(recording_path: str, unit: UnitFile) -> tuple[Recording, OusterGeometry]:
    """An Ouster recording and its unit (``unit``: a metadata JSON or a preset naming one)."""
    return read_recording(recording_path, unit.calibration, unit.path), OusterGeometry(unit.calibration, unit.path)
