"""OSMP buffers as (address, size): an input's bytes copied while valid, outputs kept valid as long as OSMP asks.

How FMI carries them, and the variables' names: :mod:`.osmp_variables`.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..errors import LidarFmuError


class OSMPBufferError(LidarFmuError, ValueError):
    """An OSMP buffer (address, size) that cannot be read."""


def read_buffer(address: int, size: int) -> bytes | None:
    """Copy the bytes an OSMP buffer holds; ``None`` for a null pointer or size 0.

    The copy is taken because the input buffer is only valid until the end of
    the current ``fmi2DoStep``.
    """
    if address == 0 or size == 0:
        return None
    if size < 0:
        raise OSMPBufferError(f"negative buffer size {size}")
    return ctypes.string_at(address, size)


class DoubleBuffer:
    """Output buffers that stay valid as OSMP requires.

    A published buffer must live from the end of the ``fmi2DoStep`` that made it
    until the start of the second ``fmi2DoStep`` after that, so two buffers
    alternate and each is rewritten only every other step. Writers can encode
    straight into :meth:`next` (no copy); anything else is copied in.
    """

    def __init__(self):
        self._buffers = [np.zeros(0, np.uint8), np.zeros(0, np.uint8)]
        self._next = 0

    def next(self) -> np.ndarray:
        """The buffer the coming :meth:`publish` will hand out (write into it)."""
        return self._buffers[self._next]

    def publish(self, data) -> tuple[int, int]:
        """Hand out ``data`` (bytes, or a view at the start of :meth:`next`) → (address, size); (0, 0) for none."""
        size = len(data)
        buffer = self._buffers[self._next]
        in_place = isinstance(data, np.ndarray) and size and data.ctypes.data == buffer.ctypes.data
        if not in_place and size:
            if len(buffer) < size:
                buffer = np.zeros(int(size * 1.25), np.uint8)  # headroom: scans vary in size
                self._buffers[self._next] = buffer
            buffer[:size] = np.frombuffer(data, np.uint8)
        self._next ^= 1
        return (buffer.ctypes.data, size) if size else (0, 0)

    def clear(self) -> None:
        self._buffers = [np.zeros(0, np.uint8), np.zeros(0, np.uint8)]
