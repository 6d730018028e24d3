"""PTX files (Leica's ASCII format for one organized scan) and the organized grid they need.

A header (columns, rows, the scanner's registered position and axes, the world-from-sensor matrix in Leica's
row-vector convention), then ``x y z intensity`` for rows × columns cells, column after column, each from the
lowest to the highest beam; a cell without a return is ``0 0 0 0``. The grid is the cloud's own ray pattern
(``PointCloud.pattern``), never guessed, so a cloud without one cannot be written as PTX. A dual-return scan's
second echoes go to a second grid, ``NAME.echo1.ptx`` (as Ouster's ``RANGE2``). The layout line by line:
docs/formats.md, "PTX".
"""
from __future__ import annotations

import os

import numpy as np

#: decimals of every value in the body: 1 µm in position, 1e-6 in intensity
_DECIMALS = 6


def grid_index(cloud, echo: int = 0) -> np.ndarray:
    """(rows, columns) index into ``cloud.points`` of each grid cell's return number ``echo`` (0: the nearest),
    −1 where the ray has none.

    Rows are the pattern's rows (not yet sorted by elevation); see
    :func:`row_order`.
    """
    index = np.full(cloud.rows * cloud.columns, -1, np.int64)
    of_echo = np.flatnonzero(cloud.points["echo"] == echo) if "echo" in cloud.points.dtype.names else (
        np.arange(len(cloud.points)) if echo == 0 else np.zeros(0, np.int64))
    index[np.asarray(cloud.ray_index, np.int64)[of_echo]] = of_echo
    # ray i sits at row i % rows, column i // rows: the flat grid is column-major
    return index.reshape(cloud.columns, cloud.rows).T


def cloud_pattern(cloud, pattern=None, what: str = "this"):
    """``pattern``, else the one the cloud carries (:class:`~lidar_fmu.pointcloud.NoRayPatternError` if none).

    A pattern given explicitly must have the cloud's grid shape.
    """
    if pattern is None:
        return cloud.require_pattern(what)
    if (pattern.rows, pattern.columns) != (cloud.rows, cloud.columns):
        raise ValueError(f"pattern grid {pattern.rows}×{pattern.columns} does not match "
                         f"the cloud's {cloud.rows}×{cloud.columns}")
    return pattern


def row_elevation_rad(cloud, pattern=None) -> np.ndarray:
    """(rows,) elevation of each pattern row (rad): the median over its columns.

    A scan grid has one elevation per beam; a pinhole's rows bend slightly.
    From ``pattern``, by default the one the cloud carries.
    """
    pattern = cloud_pattern(cloud, pattern, "ordering the grid rows by elevation")
    return np.median(pattern.elevation_rad.reshape(pattern.columns, pattern.rows), axis=0)


def row_order(cloud, pattern=None) -> np.ndarray:
    """(rows,) pattern row of each output row, from the lowest elevation to the highest."""
    return np.argsort(row_elevation_rad(cloud, pattern), kind="stable")


def _fixed_point_text(values: np.ndarray, blank: np.ndarray) -> bytes:
    """Rows of ``values`` (N, K) as text, ``%.6f``-style, space separated, one line per row.

    Rows where ``blank`` is set print as ``0 0 … 0``. Built as a fixed-width
    character grid with numpy and then compacted by dropping the padding,
    because ``%``-formatting 500k floats costs ~0.25 s and this a fraction of that.
    """
    n, k = values.shape
    if n == 0:
        return b""
    scale = 10 ** _DECIMALS
    values = np.where(blank[:, None], 0.0, values.astype(np.float64))
    scaled = np.rint(np.abs(values) * scale)
    negative = (values < 0) & (scaled > 0)
    # 32-bit integer digit arithmetic is several times faster than 64-bit
    # scaled holds integers, so true division then floor is exact (and 4× faster than //)
    integer = np.floor(scaled / scale).astype(np.uint32)
    fraction = (scaled - integer.astype(np.float64) * scale).astype(np.uint32)
    int_digits = max(1, len(str(int(integer.max()))))
    # per value: sign slot, integer digits, point, fraction digits, separator
    width = 1 + int_digits + 1 + _DECIMALS + 1
    chars = np.zeros((width, n, k), np.uint8)  # 0 = padding, removed at the end
    shown = np.ones((n, k), np.int64)  # integer digits printed (no leading zeros)
    q = integer
    for j in range(int_digits - 1, -1, -1):  # loops over digit positions, not points
        rest = q // 10
        digit = (q - rest * 10).astype(np.uint8)
        position = int_digits - 1 - j  # 0 = units
        if position == 0:
            chars[1 + j] = ord("0") + digit
        else:
            significant = integer >= 10 ** position
            chars[1 + j] = np.where(significant, ord("0") + digit, 0)
            shown += significant
        q = rest
    chars[1 + int_digits] = ord(".")
    q = fraction
    for j in range(_DECIMALS - 1, -1, -1):
        rest = q // 10
        chars[2 + int_digits + j] = ord("0") + (q - rest * 10).astype(np.uint8)
        q = rest
    rows, cols = np.nonzero(negative)
    chars[int_digits - shown[rows, cols], rows, cols] = ord("-")
    chars[1 + int_digits:-1, blank] = 0  # "0" instead of "0.000000"
    chars[-1] = ord(" ")
    chars[-1, :, -1] = ord("\n")
    flat = chars.transpose(1, 2, 0).ravel()
    return flat[flat != 0].tobytes()


def _format_header_numbers(rows_of_numbers) -> str:
    return "".join(" ".join(f"{v:.10g}" for v in row) + "\n" for row in rows_of_numbers)


def write_ptx(path, cloud, pattern=None) -> None:
    """Write ``cloud`` as a PTX file of its organized ``rows × columns`` grid (docs/formats.md, "PTX").

    The grid is the ray pattern's: ``pattern``, by default the one the cloud
    carries (a scan does; points read from a file or decoded from OSI do not,
    and then this raises :class:`~lidar_fmu.pointcloud.NoRayPatternError`).
    """
    pattern = cloud_pattern(cloud, pattern, "a PTX file (an organized scan grid)")
    pose = np.asarray(cloud.sensor_pose, np.float64)
    if pose.shape != (4, 4):
        raise ValueError(f"sensor_pose must be 4×4, got {pose.shape}")
    _write_grid(path, cloud, pattern, pose, 0)
    if "echo" in cloud.points.dtype.names and np.any(cloud.points["echo"] == 1):
        stem, suffix = os.path.splitext(os.fspath(path))
        _write_grid(f"{stem}.echo1{suffix}", cloud, pattern, pose, 1)


def _write_grid(path, cloud, pattern, pose, echo: int) -> None:
    """One PTX file: the grid of the returns numbered ``echo``."""
    index = grid_index(cloud, echo)[row_order(cloud, pattern)]  # (rows, columns), rows by elevation
    flat = index.T.ravel()  # PTX body: all rows of column 0, then column 1, …
    hit = flat >= 0
    points = cloud.points
    values = np.zeros((len(flat), 4), np.float64)
    source = points[flat[hit]]
    values[hit, 0] = source["x"]
    values[hit, 1] = source["y"]
    values[hit, 2] = source["z"]
    values[hit, 3] = np.clip(source["reflectivity"], 0.0, 1.0)
    rotation, position = pose[:3, :3], pose[:3, 3]
    header = f"{cloud.columns}\n{cloud.rows}\n" + _format_header_numbers(
        [position, *rotation.T, *pose.T]
    )
    body = _fixed_point_text(values, ~hit)
    with open(path, "wb") as f:
        f.write(header.encode("ascii"))
        f.write(body)


def read_ptx(path) -> tuple[dict, np.ndarray]:
    """Read the first scan of a PTX file → (header, grid).

    ``header``: ``columns``, ``rows`` (int), ``position`` (3,), ``axes``
    (3, 3, one axis per row), ``world_from_sensor`` (4, 4, column-vector
    convention, i.e. the file's matrix transposed). ``grid``: (rows, columns,
    K) float64, K = 4 (x y z intensity) or 7 with colour. Raises ``ValueError``
    naming the file if it is malformed or short.
    """
    name = os.fspath(path)
    with open(path, encoding="ascii") as f:
        lines = f.read().splitlines()
    try:
        columns, rows = int(lines[0]), int(lines[1])
        numbers = [np.array(line.split(), np.float64) for line in lines[2:10]]
    except (IndexError, ValueError):
        raise ValueError(f"{name}: malformed PTX header") from None
    if any(len(v) != n for v, n in zip(numbers, [3, 3, 3, 3, 4, 4, 4, 4])) or len(numbers) != 8:
        raise ValueError(f"{name}: malformed PTX header")
    n = rows * columns
    body = lines[10:10 + n]
    if len(body) < n:
        raise ValueError(f"{name}: PTX body has {len(body)} lines, header announces {rows} × {columns} = {n}")
    try:
        data = np.loadtxt(body, np.float64, ndmin=2) if n else np.zeros((0, 4))
    except ValueError as exc:
        raise ValueError(f"{name}: malformed PTX point line: {exc}") from None
    header = {
        "columns": columns,
        "rows": rows,
        "position": numbers[0],
        "axes": np.stack(numbers[1:4]),
        "world_from_sensor": np.stack(numbers[4:8]).T,
    }
    # the body runs column after column: reshape column-major
    return header, data.reshape(columns, rows, -1).transpose(1, 0, 2)
