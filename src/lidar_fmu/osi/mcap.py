"""SensorData traces as MCAP, the container OSI recommends since 3.7, through ASAM's own trace tools.

``asam-osi-utilities`` (MPL-2.0, the OSI project's reference utilities) writes
the ``net.asam.osi.trace`` file metadata, the protobuf schema of the channel
and compressed chunks; a ``.osi`` trace (length-prefixed messages, what
openMSL's trace-file player reads) holds the same messages uncompressed.
"""
from __future__ import annotations

import os
from pathlib import Path

from .trace import TraceError, TraceWriter

#: chunk compression: zstd packs a lidar's SensorData ~4× (measured on the demo: docs/formats.md)
DEFAULT_COMPRESSION = "zstd"
#: the channel lidar-fmu writes its SensorData to
TOPIC = "SensorData"


def _channel_metadata() -> dict[str, str]:
    """The OSI and protobuf versions the channel's messages are written with (required by the OSI trace spec)."""
    import google.protobuf

    from .encode import default_interface_version  # lazy: the encoder compiles kernels; reading needs none

    v = default_interface_version()
    return {"net.asam.osi.trace.channel.osi_version": f"{v.version_major}.{v.version_minor}.{v.version_patch}",
            "net.asam.osi.trace.channel.protobuf_version": google.protobuf.__version__}


class SensorDataMcapWriter:
    """Append serialized ``osi3.SensorData`` messages to a ``.mcap`` trace (one channel, compressed chunks)."""

    def __init__(self, path, compression: str = DEFAULT_COMPRESSION, description: str = "lidar-fmu SensorData"):
        from osi3.osi_sensordata_pb2 import SensorData
        from osi_utilities.tracefile import MultiTraceWriter, prepare_required_file_metadata

        self.path = os.fspath(path)
        if not self.path.endswith(".mcap"):
            raise TraceError(f"an MCAP trace must end in .mcap: {self.path}")
        self._message = SensorData()
        metadata = prepare_required_file_metadata()
        metadata["description"] = description
        self._writer = MultiTraceWriter()
        if not self._writer.open(Path(self.path), metadata, compression=compression):
            raise TraceError(f"cannot open MCAP trace {self.path} for writing")
        self._writer.add_channel(TOPIC, SensorData, _channel_metadata())
        self.count = 0

    def write(self, data: bytes) -> None:
        # the writer takes messages: parse the bytes the FMU produced (they stay byte-identical on the way out)
        self._message.ParseFromString(bytes(data))
        if not self._writer.write_message(self._message, TOPIC):
            raise TraceError(f"writing message {self.count} to {self.path} failed")
        self.count += 1

    def close(self) -> None:
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_sensor_data_trace(path, description: str = "lidar-fmu SensorData") -> SensorDataMcapWriter | TraceWriter:
    """A writer of serialized ``osi3.SensorData`` to a new trace ``path``, chosen by its ending: ``.mcap``
    (:class:`SensorDataMcapWriter`, ``description`` in its metadata), ``.osi`` or ``.osi.xz``
    (:class:`~lidar_fmu.osi.trace.TraceWriter`); :class:`~lidar_fmu.osi.trace.TraceError` for any other."""
    text = os.fspath(path)
    if text.endswith(".mcap"):
        return SensorDataMcapWriter(text, description=description)
    if text.endswith((".osi", ".osi.xz")):
        return TraceWriter(text)
    raise TraceError(f"SensorData trace {text!r} must end in .osi, .osi.xz or .mcap")
