"""OSI trace files: ``.osi`` (repeated [uint32 LE length][message]), ``.osi.xz`` and ``.mcap``.

Trace names follow the OSI convention
``<YYYYMMDDTHHMMSSZ>_<type>_<osi-version>_<protobuf-version>_<frames>_<name>.osi``
with type ``sv`` (SensorView), ``sd`` (SensorData) or ``gt`` (GroundTruth).
"""
from __future__ import annotations

import datetime
import lzma
import os
import struct

from ..errors import LidarFmuError

_LENGTH = struct.Struct("<I")


class TraceError(LidarFmuError, ValueError):
    """A trace file is missing, truncated or of an unknown kind."""


def _read_length_prefixed(stream, path):
    index = 0
    while True:
        head = stream.read(4)
        if not head:
            return
        if len(head) < 4:
            raise TraceError(f"{path}: truncated length prefix after message {index}")
        (size,) = _LENGTH.unpack(head)
        data = stream.read(size)
        if len(data) < size:
            raise TraceError(f"{path}: message {index} truncated ({len(data)} of {size} bytes)")
        yield data
        index += 1


def read_trace(path, message_type: str = "SensorView"):
    """Yield each message of a trace as serialized bytes."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise TraceError(f"trace file not found: {path}")
    if path.endswith(".osi"):
        with open(path, "rb") as f:
            yield from _read_length_prefixed(f, path)
    elif path.endswith((".osi.xz", ".xz")):
        with lzma.open(path, "rb") as f:
            yield from _read_length_prefixed(f, path)
    elif path.endswith(".mcap"):
        from osi3trace.osi_trace import OSITrace

        trace = OSITrace(path, message_type)
        try:
            for message in trace:
                yield message.SerializeToString()
        finally:
            trace.close()
    else:
        raise TraceError(f"unknown trace format {path!r}: use .osi, .osi.xz or .mcap")


class TraceWriter:
    """Append serialized messages to a ``.osi`` (or ``.osi.xz``) trace."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._file = lzma.open(self.path, "wb") if self.path.endswith(".xz") else open(self.path, "wb")
        self.frames = 0

    def write(self, data: bytes) -> None:
        self._file.write(_LENGTH.pack(len(data)))
        self._file.write(data)
        self.frames += 1

    def close(self) -> None:
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def write_trace(path, messages) -> int:
    """Write serialized messages to ``path``; returns the frame count."""
    with TraceWriter(path) as writer:
        for data in messages:
            writer.write(data)
    return writer.frames


def trace_name(kind: str, frames: int, name: str, when: datetime.datetime | None = None) -> str:
    """File name per the OSI trace naming convention (``kind``: sv, sd or gt)."""
    import google.protobuf

    from .encode import default_interface_version

    v = default_interface_version()
    when = when or datetime.datetime.now(datetime.timezone.utc)
    osi = f"{v.version_major}{v.version_minor}{v.version_patch}"
    protobuf = google.protobuf.__version__.replace(".", "")
    return f"{when:%Y%m%dT%H%M%SZ}_{kind}_{osi}_{protobuf}_{frames}_{name}.osi"
