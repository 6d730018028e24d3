"""PCD v0.7 point-cloud files (the Point Cloud Library format).

The header is derived from the numpy dtype of the points, so a field added to
:data:`~lidar_fmu.pointcloud.POINT_DTYPE` later (a ``saturated`` u1 flag, say)
is written and read back without touching this module. Binary data is the
packed little-endian record, one per point, exactly ``points.tobytes()``.

Type letters follow PCL: ``F`` float, ``U`` unsigned, ``I`` signed integer,
with SIZE in bytes. ``U 8``/``I 8`` (our ``object_id``) are read by PCL ≥ 1.11,
pypcd4 and Open3D's tensor reader, but older readers may refuse them.

``compression="binary_compressed"`` writes PCL's compressed form: the fields
one after another (structure of arrays), LZF-compressed (``python-neo-lzf``,
the LZF binding pypcd4 uses), after two little-endian uint32 words, the
compressed and the uncompressed size (PCL's layout; Open3D's two readers and
pypcd4 read it back exactly, see tests/test_io.py). ``fields=`` writes only the named fields, in that order: a cloud
decoded from OSI SensorData has no normals and no saturation flag, so
:data:`OSI_FIELDS` leaves those out instead of writing zeros.
"""
from __future__ import annotations

import os
from typing import Any, NoReturn

import numpy as np

from ._common import PointCloudFileError

#: the fields a cloud decoded from OSI SensorData carries (OSI LidarDetection has no normal and
#: no saturation flag: :func:`~lidar_fmu.osi.detections.sensor_data_to_points` leaves them zero)
OSI_FIELDS = ("x", "y", "z", "range", "reflectivity", "beam_id", "object_id")
#: ``compression`` values of :func:`write_pcd` → the PCD DATA type they write
COMPRESSIONS = {"none": "binary", "binary_compressed": "binary_compressed"}

#: numpy kind → PCD TYPE letter; bool is stored as an unsigned byte
_PCD_TYPE = {"f": "F", "u": "U", "i": "I", "b": "U"}
_NUMPY_KIND = {"F": "f", "U": "u", "I": "i"}
_VALID_SIZES = {"F": (2, 4, 8), "U": (1, 2, 4, 8), "I": (1, 2, 4, 8)}


def _points_array(cloud_or_points) -> np.ndarray:
    """A structured array from a PointCloud (its points, and ground truth when it has any), a structured array or
    (N, 3) xyz."""
    records = getattr(cloud_or_points, "records", None)
    points = records() if callable(records) else getattr(cloud_or_points, "points", cloud_or_points)
    points = np.asarray(points)
    if points.dtype.names is None:
        if points.ndim != 2 or points.shape[1] != 3:
            raise ValueError(f"expected a structured point array or (N, 3) xyz, got shape {points.shape}")
        xyz = np.empty(len(points), np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4")]))
        xyz["x"], xyz["y"], xyz["z"] = points.T
        return xyz
    return points.ravel()


def _select_fields(points: np.ndarray, fields) -> np.ndarray:
    """``points`` restricted to ``fields`` (in that order); all of them for None."""
    if fields is None:
        return points
    if isinstance(fields, str):
        fields = (fields,)
    fields = list(fields)
    assert points.dtype.names is not None  # structured (_points_array)
    missing = [name for name in fields if name not in points.dtype.names]
    if missing or not fields or len(set(fields)) != len(fields):
        problem = (f"unknown field(s) {', '.join(map(repr, missing))}" if missing
                   else "no fields" if not fields else "a field named twice")
        raise PointCloudFileError(f"cannot write PCD fields {fields}: {problem}; "
                                  f"the points have {' '.join(points.dtype.names)}")
    return points[fields]  # a view with gaps; _packed_little_endian packs it


def _packed_little_endian(points: np.ndarray) -> np.ndarray:
    """``points`` as a packed, C-contiguous, little-endian record array (no copy if already so)."""
    fields = []
    assert points.dtype.names is not None and points.dtype.fields is not None  # structured (_points_array)
    for name in points.dtype.names:
        dt = points.dtype.fields[name][0]
        base, shape = (dt.subdtype or (dt, ()))
        if base.kind not in _PCD_TYPE:
            raise ValueError(f"field {name!r} has dtype {base}, which PCD cannot store (only float, int, uint, bool)")
        fields.append((name, base.newbyteorder("<") if base.itemsize > 1 else base, shape))
    packed = np.dtype(fields)
    if points.dtype == packed and points.flags.c_contiguous:
        return points
    out = np.empty(len(points), packed)
    assert packed.names is not None
    for name in packed.names:
        out[name] = points[name]
    return out


def frame_stamp_lines(cloud_or_points) -> list[str]:
    """``"timestamp_s 1.25"``, ``"first_firing_s 1.15"``: the frame's times (s) a file records, exactly (``repr``),
    for a :class:`~lidar_fmu.PointCloud` (none for bare arrays)."""
    stamps = getattr(cloud_or_points, "frame_stamps", None)
    return [f"{key} {value!r}" for key, value in (stamps or {}).items()]


def pcd_header(dtype: np.dtype, n_points: int, data: str = "binary", comments: list[str] | None = None) -> str:
    """The PCD v0.7 header text (ending in the DATA line) for ``n_points`` records of ``dtype``; ``comments`` go
    after the first line as ``# lidar_fmu …`` lines (PCL, Open3D and pypcd4 skip lines starting with ``#``)."""
    names, sizes, types, counts = [], [], [], []
    assert dtype.names is not None and dtype.fields is not None, "a structured dtype"
    for name in dtype.names:
        dt = dtype.fields[name][0]
        base, shape = (dt.subdtype or (dt, ()))
        if " " in name:
            raise ValueError(f"PCD field names cannot contain spaces: {name!r}")
        names.append(name)
        types.append(_PCD_TYPE[base.kind])
        sizes.append(str(base.itemsize))
        counts.append(str(int(np.prod(shape, dtype=np.int64))))
    return (
        "# .PCD v0.7 - Point Cloud Data file format\n"
        + "".join(f"# lidar_fmu {line}\n" for line in comments or ())
        + "VERSION .7\n"
        f"FIELDS {' '.join(names)}\n"
        f"SIZE {' '.join(sizes)}\n"
        f"TYPE {' '.join(types)}\n"
        f"COUNT {' '.join(counts)}\n"
        f"WIDTH {n_points}\n"
        "HEIGHT 1\n"
        "VIEWPOINT 0 0 0 1 0 0 0\n"
        f"POINTS {n_points}\n"
        f"DATA {data}\n"
    )


def _data_type(compression: str) -> str:
    try:
        return COMPRESSIONS[compression]
    except KeyError:
        raise PointCloudFileError(f"unknown PCD compression {compression!r}; "
                                  f"expected one of {', '.join(COMPRESSIONS)}") from None


def _compressed_body(points: np.ndarray) -> bytes:
    """The binary_compressed data after the header: sizes (2 × uint32 LE) and the LZF block of the columns."""
    import lzf  # python-neo-lzf

    n = len(points)
    # PCL's layout: each field's values for all points, one field after another
    assert points.dtype.names is not None  # structured (_packed_little_endian)
    columns = b"".join(np.ascontiguousarray(points[name]).tobytes() for name in points.dtype.names)
    if not columns:  # no points: PCL, Open3D and pypcd4 read two zero sizes and no block
        return np.zeros(2, "<u4").tobytes()
    # LZF grows incompressible input by at most one byte in 32; compress() returns None only past max_length
    block = lzf.compress(columns, len(columns) + len(columns) // 32 + 64)
    assert block is not None and n * points.dtype.itemsize == len(columns)
    return np.array([len(block), len(columns)], "<u4").tobytes() + block


def _pcd_parts(cloud_or_points, compression: str, fields) -> list:
    data = _data_type(compression)
    points = _packed_little_endian(_select_fields(_points_array(cloud_or_points), fields))
    header = pcd_header(points.dtype, len(points), data, frame_stamp_lines(cloud_or_points)).encode("ascii")
    if data == "binary_compressed":
        return [header, _compressed_body(points)]
    # a memoryview passes the records straight from the array, no bytes copy
    return [header, memoryview(points.view(np.uint8))]  # type: ignore[arg-type]  # numpy types arrays as buffers from Python 3.12


def pcd_bytes(cloud_or_points, *, compression: str = "none", fields=None) -> bytes:
    """The complete PCD file of :func:`write_pcd` (same options) as bytes."""
    return b"".join(_pcd_parts(cloud_or_points, compression, fields))


def write_pcd(path, cloud_or_points, *, compression: str = "none", fields=None) -> None:
    """Write a PCD v0.7 file: ``DATA binary`` (``compression="none"``, the default) or ``binary_compressed``.

    ``cloud_or_points`` is a :class:`~lidar_fmu.PointCloud`, a structured
    array (every field becomes a PCD field, subarray fields a COUNT > 1) or an
    (N, 3) xyz array. ``fields`` (names, in the order to write them) leaves
    the others out, e.g. :data:`OSI_FIELDS` for a cloud decoded from OSI. The
    cloud is unorganized (HEIGHT 1) and in the sensor frame (identity
    VIEWPOINT), coordinates in metres. A cloud's frame times are comment lines
    of the header: ``# lidar_fmu timestamp_s …`` (when the frame ends) and
    ``# lidar_fmu first_firing_s …`` (what the points' ``time`` counts from).
    """
    parts = _pcd_parts(cloud_or_points, compression, fields)
    with open(path, "wb") as f:
        f.writelines(parts)


def _fail(path: str | os.PathLike[str], message: str) -> NoReturn:
    raise PointCloudFileError(f"{os.fspath(path)}: {message}")


def _parse_header(path, raw: bytes) -> tuple[dict, int]:
    """Header keys → values (str lists) and the byte offset where the data starts."""
    header: dict[str, list[str]] = {}
    pos = 0
    while True:
        end = raw.find(b"\n", pos)
        if end < 0:
            _fail(path, "not a PCD file: no DATA line in the header")
        line = raw[pos:end].decode("ascii", errors="replace").strip()
        pos = end + 1
        if not line or line.startswith("#"):
            continue
        key, *values = line.split()
        key = key.upper()
        if key not in {"VERSION", "FIELDS", "SIZE", "TYPE", "COUNT", "WIDTH", "HEIGHT", "VIEWPOINT", "POINTS", "DATA"}:
            _fail(path, f"not a PCD file: unexpected header line {line[:60]!r}")
        header[key] = values
        if key == "DATA":
            return header, pos


def _header_dtype(path, header: dict) -> tuple[np.dtype, int, str]:
    for key in ("FIELDS", "SIZE", "TYPE", "DATA"):
        if key not in header or not header[key]:
            _fail(path, f"PCD header lacks {key}")
    names = header["FIELDS"]
    n_fields = len(names)
    try:
        sizes = [int(s) for s in header["SIZE"]]
        counts = [int(c) for c in header.get("COUNT", ["1"] * n_fields)]
        width = int(header["WIDTH"][0]) if "WIDTH" in header else None
        height = int(header["HEIGHT"][0]) if "HEIGHT" in header else 1
        n_points = int(header["POINTS"][0]) if "POINTS" in header else None
    except (ValueError, IndexError):
        _fail(path, "PCD header has a non-integer SIZE, COUNT, WIDTH, HEIGHT or POINTS")
    types = header["TYPE"]
    if not len(sizes) == len(types) == len(counts) == n_fields:
        _fail(path, f"PCD header FIELDS/SIZE/TYPE/COUNT disagree in length "
                    f"({n_fields}/{len(sizes)}/{len(types)}/{len(counts)})")
    if n_points is None:
        if width is None:
            _fail(path, "PCD header has neither POINTS nor WIDTH")
        n_points = width * height
    if n_points < 0 or (width is not None and width * height != n_points):
        _fail(path, f"PCD header POINTS {n_points} does not match WIDTH × HEIGHT = {width} × {height}")
    fields: list[tuple[Any, ...]] = []
    seen: dict[str, int] = {}
    for name, size, kind, count in zip(names, sizes, types, counts):
        kind = kind.upper()
        if kind not in _VALID_SIZES or size not in _VALID_SIZES[kind] or count < 1:
            _fail(path, f"PCD field {name!r} has unsupported TYPE {kind} SIZE {size} COUNT {count}")
        # PCL pads with repeated fields named "_"; numpy needs unique names
        if name in seen:
            seen[name] += 1
            name = f"{name}{seen[name]}"
        else:
            seen[name] = 0
        dt = np.dtype(f"<{_NUMPY_KIND[kind]}{size}")
        fields.append((name, dt) if count == 1 else (name, dt, (count,)))
    return np.dtype(fields), n_points, header["DATA"][0].lower()


def read_pcd(path) -> np.ndarray:
    """Read a PCD file (DATA binary, ascii or binary_compressed) → structured array, one record per point.

    Field names, types and counts come from the header (repeated padding
    fields ``_`` get a numeric suffix). Raises :class:`PointCloudFileError`
    (a ``ValueError`` and a :class:`~lidar_fmu.errors.LidarFmuError`) naming
    the file if the header is malformed or the data is shorter than it announces.
    """
    with open(path, "rb") as f:
        raw = f.read()
    header, offset = _parse_header(path, raw)
    dtype, n, data = _header_dtype(path, header)
    if data == "binary":
        need = n * dtype.itemsize
        if len(raw) - offset < need:
            _fail(path, f"truncated PCD data: {n} points × {dtype.itemsize} B need {need} B, "
                        f"file has {len(raw) - offset} B")
        return np.frombuffer(raw, dtype, count=n, offset=offset).copy()
    if data == "ascii":
        lines = raw[offset:].decode("ascii", errors="replace").split("\n")
        lines = [line for line in lines if line.strip()]
        if len(lines) < n:
            _fail(path, f"truncated PCD data: header announces {n} points, file has {len(lines)} lines")
        if n == 0:
            return np.empty(0, dtype)
        try:
            # the structured-dtype loader parses u8 exactly (no float round trip)
            return np.loadtxt(lines[:n], dtype=dtype, ndmin=1)
        except ValueError as exc:
            _fail(path, f"malformed ascii PCD data: {exc}")
    if data == "binary_compressed":
        return _read_compressed(path, raw, offset, dtype, n)
    _fail(path, f"unknown PCD DATA type {data!r} (expected binary, ascii or binary_compressed)")


def _read_compressed(path, raw: bytes, offset: int, dtype: np.dtype, n: int) -> np.ndarray:
    """binary_compressed: LZF over the fields stored one after another (structure of arrays)."""
    try:
        import lzf  # python-neo-lzf
    except ImportError:
        _fail(path, "DATA binary_compressed needs the 'python-neo-lzf' package (pip install python-neo-lzf)")
    if len(raw) - offset < 8:
        _fail(path, "truncated PCD data: no binary_compressed size words")
    compressed, uncompressed = np.frombuffer(raw, "<u4", count=2, offset=offset)
    body = raw[offset + 8: offset + 8 + int(compressed)]
    if len(body) < compressed or uncompressed != n * dtype.itemsize:
        _fail(path, "truncated or inconsistent binary_compressed PCD data")
    try:
        buffer = lzf.decompress(body, int(uncompressed)) if n else b""
    except ValueError as exc:
        _fail(path, f"cannot decompress PCD data: {exc}")
    if buffer is None or len(buffer) != uncompressed:
        _fail(path, "cannot decompress PCD data: wrong decompressed size")
    out = np.empty(n, dtype)
    start = 0
    assert dtype.names is not None and dtype.fields is not None  # structured (_header_dtype)
    for name in dtype.names:
        field = dtype.fields[name][0]
        size = field.itemsize * n
        count = n * int(np.prod(field.shape, dtype=np.int64))
        out[name] = np.frombuffer(buffer, field.base, count=count, offset=start).reshape((n,) + field.shape)
        start += size
    return out
