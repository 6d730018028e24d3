"""OSMP binary variables: a buffer address split into two signed int32 plus a size.

``<prefix>.base.lo`` / ``.base.hi`` hold the low / high 32 bits of the address,
each reinterpreted as a signed 32-bit integer (FMI Integers are signed), and
``<prefix>.size`` the byte count. Address 0 or size 0 means "no buffer".
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..errors import LidarFmuError


def _signed32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= (1 << 31) else value


def split_address(address: int) -> tuple[int, int]:
    """Address → (lo, hi) signed int32."""
    return _signed32(address), _signed32(address >> 32)


def join_address(lo: int, hi: int) -> int:
    """(lo, hi) signed int32 → unsigned 64-bit address."""
    return ((int(hi) & 0xFFFFFFFF) << 32) | (int(lo) & 0xFFFFFFFF)


class OSMPBufferError(LidarFmuError, ValueError):
    """An OSMP pointer/size triple that cannot be read."""


def read_buffer(lo: int, hi: int, size: int) -> bytes | None:
    """Copy the bytes an OSMP triple points at; ``None`` for a null pointer or size 0.

    The copy is taken because the input buffer is only valid until the end of
    the current ``fmi2DoStep``.
    """
    address = join_address(lo, hi)
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
        self.lo = self.hi = self.size = 0

    def next(self) -> np.ndarray:
        """The buffer the coming :meth:`publish` will hand out (write into it)."""
        return self._buffers[self._next]

    def publish(self, data) -> tuple[int, int, int]:
        """Hand out ``data`` (bytes, or a view at the start of :meth:`next`) → (lo, hi, size)."""
        size = len(data)
        buffer = self._buffers[self._next]
        in_place = isinstance(data, np.ndarray) and size and data.ctypes.data == buffer.ctypes.data
        if not in_place and size:
            if len(buffer) < size:
                buffer = np.zeros(int(size * 1.25), np.uint8)  # headroom: scans vary in size
                self._buffers[self._next] = buffer
            buffer[:size] = np.frombuffer(data, np.uint8)
        self._next ^= 1
        if size == 0:
            self.lo = self.hi = self.size = 0
        else:
            self.lo, self.hi = split_address(buffer.ctypes.data)
            self.size = size
        return self.lo, self.hi, self.size

    def clear(self) -> None:
        self._buffers = [np.zeros(0, np.uint8), np.zeros(0, np.uint8)]
        self.lo = self.hi = self.size = 0
