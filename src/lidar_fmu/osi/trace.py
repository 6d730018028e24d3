"""OSI trace files: ``.osi`` (repeated [uint32 LE length][message]), ``.osi.xz`` and ``.mcap``.

Trace names follow the OSI convention
``<YYYYMMDDTHHMMSSZ>_<type>_<osi-version>_<protobuf-version>_<frames>_<name>.osi``
with type ``sv`` (SensorView), ``sd`` (SensorData) or ``gt`` (GroundTruth).

:func:`read_trace` is lazy and keeps what it can: it yields every intact
message and raises :class:`TraceError` (naming the frame and its byte offset)
only when it reaches the first damaged one — a length prefix past the end of
the file, a message that does not parse as the trace's type, an ``.xz``
stream that breaks off or is corrupt.
"""
from __future__ import annotations

import datetime
import lzma
import os
import re
import struct

from ..errors import LidarFmuError

_LENGTH = struct.Struct("<I")
#: compressed bytes fed to the xz decompressor at a time: the most a corrupt spot can take with it
_XZ_CHUNK = 2048
#: the message type a trace's OSI name declares (``…_sv_…``)
_NAME_TYPES = {"sv": "SensorView", "sd": "SensorData", "gt": "GroundTruth"}
#: the ``message_type`` of :func:`read_trace` that splits the messages without parsing them
_NO_CHECK = "-"


class TraceError(LidarFmuError, ValueError):
    """A trace file is missing, truncated, corrupt or of an unknown kind.

    ``frame`` (0-based) and ``offset`` (bytes into the file, or into the
    decompressed stream of an ``.xz``) name the first damaged frame when the
    error is damage found while reading; the frames before it were intact.
    """

    def __init__(self, message: str, frame: int | None = None, offset: int | None = None):
        super().__init__(message)
        self.frame, self.offset = frame, offset


def message_type_of(path) -> str | None:
    """The message type an OSI trace name declares (``_sv_`` → SensorView, ``_sd_``, ``_gt_``), else ``None``."""
    match = re.match(r"^\d{8}T\d{6}Z_([a-z]{2})_", os.path.basename(os.fspath(path)))
    return _NAME_TYPES.get(match.group(1)) if match else None


def _parser(message_type: str | None):
    """``bytes → None`` raising on a message that does not parse as ``message_type`` (``None``: no check)."""
    if message_type is None:
        return None
    from osi3trace.osi_trace import MESSAGES_TYPE

    cls = MESSAGES_TYPE.get(message_type)
    if cls is None:
        raise TraceError(f"unknown OSI message type {message_type!r}: one of {', '.join(MESSAGES_TYPE)}")
    return cls.FromString


def _damage(path, index: int, offset: int, why: str, where: str = "") -> TraceError:
    intact = "no intact frame before it" if index == 0 else f"frames 0–{index - 1} before it are intact"
    return TraceError(f"{path}: frame {index} (byte {offset}{where}) is damaged: {why}; {intact}", index, offset)


def _checked(path, index, offset, data, parse, message_type, where=""):
    # an empty message parses as an empty SensorView, but no trace writer writes one: a zero-filled tail
    # (a file preallocated, a crash before the data was flushed) would replay as frames of nothing
    if len(data) == 0:
        raise _damage(path, index, offset, "its length prefix says 0 bytes: no message (a zero-filled tail?)", where)
    if parse is not None:
        try:
            parse(data)
        except Exception as exc:  # DecodeError, or whatever the C++/upb parser raises on garbage
            raise _damage(path, index, offset, f"{len(data)} bytes that are not a {message_type} ({exc})",
                          where) from None
    return data


def _read_osi(path, parse, message_type):
    with open(path, "rb") as f:
        end = os.fstat(f.fileno()).st_size
        index = offset = 0
        while offset < end:
            head = f.read(4)
            if len(head) < 4:
                raise _damage(path, index, offset, f"the file ends inside its length prefix ({len(head)} of 4 bytes)")
            (size,) = _LENGTH.unpack(head)
            if offset + 4 + size > end:
                raise _damage(path, index, offset, f"its length prefix says {size} bytes, "
                                                   f"the file holds {end - offset - 4} more")
            data = f.read(size)
            if len(data) < size:  # the file shrank while we read it
                raise _damage(path, index, offset, f"only {len(data)} of {size} bytes could be read")
            yield _checked(path, index, offset, data, parse, message_type)
            offset += 4 + size
            index += 1


def _xz_chunks(f):
    """Decompressed chunks of an ``.xz`` file (several concatenated streams allowed); raises on damage."""
    decompressor = lzma.LZMADecompressor()
    started = False
    while True:
        raw = f.read(_XZ_CHUNK)  # small pieces: a corrupt spot loses only the output decoded from its own piece
        if not raw:
            if started and not decompressor.eof:
                raise EOFError("the compressed stream ends before its end marker (truncated)")
            return
        while raw:
            if decompressor.eof:  # a next stream (or padding) follows
                raw = raw.lstrip(b"\0")
                if not raw:
                    break
                decompressor, started = lzma.LZMADecompressor(), False
            started = True
            out = decompressor.decompress(raw)
            raw = decompressor.unused_data if decompressor.eof else b""
            if out:
                yield out


def _read_xz(path, parse, message_type):
    where = " of the decompressed stream"
    buffer, base, index = bytearray(), 0, 0  # base: stream offset of buffer[0]
    with open(path, "rb") as f:
        chunks = _xz_chunks(f)
        while True:
            try:
                chunk = next(chunks, None)
            except (lzma.LZMAError, EOFError) as exc:
                raise _damage(path, index, base, f"the xz stream breaks off here ({exc})", where) from None
            if chunk is None:
                break
            buffer += chunk
            pos = 0
            while len(buffer) - pos >= 4:
                (size,) = _LENGTH.unpack_from(buffer, pos)
                if len(buffer) - pos - 4 < size:
                    break
                data = bytes(buffer[pos + 4:pos + 4 + size])
                yield _checked(path, index, base + pos, data, parse, message_type, where)
                pos += 4 + size
                index += 1
            del buffer[:pos]
            base += pos
    if buffer:
        if len(buffer) < 4:
            why = f"the stream ends inside its length prefix ({len(buffer)} of 4 bytes)"
        else:
            why = f"its length prefix says {_LENGTH.unpack_from(buffer)[0]} bytes, the stream holds {len(buffer) - 4} more"
        raise _damage(path, index, base, why, where)


class _BrokenRecord(Exception):
    """The MCAP record at byte ``offset`` does not read: ``cause`` is what the mcap reader raised."""

    def __init__(self, offset: int, cause: Exception):
        super().__init__(f"byte {offset}: {cause}")
        self.offset, self.cause = offset, cause


def _mcap_records(f):
    """``(offset, record)`` of an open MCAP file in one forward pass from its start, a chunk's records each at the
    chunk's offset. Needs no summary (lost when a file is cut short); raises :class:`_BrokenRecord` at the first
    damaged record, after every record before it."""
    from mcap.records import Chunk
    from mcap.stream_reader import StreamReader, breakup_chunk

    # no record is longer than the file: a damaged length is refused before anything is allocated for it
    records = iter(StreamReader(f, emit_chunks=True, record_size_limit=os.fstat(f.fileno()).st_size).records)
    while True:
        offset = f.tell()
        try:
            record = next(records, None)
            inner = breakup_chunk(record) if isinstance(record, Chunk) else [record]
        except Exception as exc:  # the mcap reader's errors on a damaged file (there is no one base class)
            raise _BrokenRecord(offset, exc) from None
        if record is None:
            return
        for each in inner:
            yield offset, each


class _McapChannels:
    """The schema name of each channel (``osi3.`` dropped) an MCAP forward pass has met, in the order met."""

    def __init__(self) -> None:
        self._schemas: dict[int, str] = {}
        self.types: dict[int, str] = {}

    def note(self, record) -> None:
        """Take ``record`` in if it is a schema or a channel (a summary repeats them: the first one counts)."""
        from mcap.records import Channel, Schema

        if isinstance(record, Schema):
            self._schemas.setdefault(record.id, record.name.removeprefix("osi3."))
        elif isinstance(record, Channel):
            self.types.setdefault(record.id, self._schemas.get(record.schema_id, "no schema"))

    def first_of(self, message_type: str) -> int | None:
        """The id of the first channel of ``message_type`` met so far, as OSI's trace reader picks it."""
        return next((channel for channel, name in self.types.items() if name == message_type), None)


def _mcap_cut_short(path, offset: int) -> bool:
    """Whether the MCAP record at ``offset`` runs past the end of the file (its opcode and length say how far)."""
    with open(path, "rb") as f:
        end = os.fstat(f.fileno()).st_size
        f.seek(offset)
        head = f.read(9)
    return len(head) < 9 or offset + 9 + int.from_bytes(head[1:], "little") > end


def _mcap_damage(path, index: int, broken: _BrokenRecord) -> TraceError:
    cause = broken.cause
    why = ("the MCAP file is cut short here (this record, its footer and summary are missing or incomplete)"
           if _mcap_cut_short(path, broken.offset) else
           f"an MCAP record that does not read ({type(cause).__name__}: {cause})")
    return _damage(path, index, broken.offset, why)


def _read_mcap(path, message_type):
    """The messages of an MCAP trace's first ``message_type`` channel, in file order, from one forward pass."""
    from mcap.records import Message

    parse, channels = _parser(message_type), _McapChannels()
    channel_id: int | None = None
    index = 0
    with open(path, "rb") as f:
        records = _mcap_records(f)
        while True:
            try:
                offset, record = next(records, (0, None))
            except _BrokenRecord as broken:
                raise _mcap_damage(path, index, broken) from None
            if record is None:
                break
            channels.note(record)
            channel_id = channels.first_of(message_type) if channel_id is None else channel_id
            if isinstance(record, Message) and record.channel_id == channel_id:
                yield _checked(path, index, offset, record.data, parse, message_type)
                index += 1
    if channel_id is None:
        held = " and ".join(dict.fromkeys(channels.types.values())) or "no channel"
        raise TraceError(f"{path}: an MCAP trace of {held}, no channel of {message_type}")


def read_trace(path, message_type: str | None = None):
    """Yield each message of a trace as serialized bytes, lazily, up to the first damaged one.

    ``message_type`` (``"SensorView"``, ``"SensorData"``, …; default: the type
    the OSI trace name declares) is what every message of a ``.osi`` /
    ``.osi.xz`` must parse as; with no type known the messages are only split,
    not parsed. ``.mcap`` traces are read as ``message_type`` (default
    SensorView: the first channel of it), in file order and in one forward pass
    that needs no summary (a file cut short keeps its intact messages). Damage raises :class:`TraceError` with ``frame`` and
    ``offset`` after every intact message before it has been yielded.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise TraceError(f"trace file not found: {path}")
    message_type = None if message_type == _NO_CHECK else message_type or message_type_of(path)
    if path.endswith(".osi"):
        yield from _read_osi(path, _parser(message_type), message_type)
    elif path.endswith((".osi.xz", ".xz")):
        yield from _read_xz(path, _parser(message_type), message_type)
    elif path.endswith(".mcap"):
        yield from _read_mcap(path, message_type or "SensorView")
    else:
        raise TraceError(f"unknown trace format {path!r}: use .osi, .osi.xz or .mcap")


#: the most of a message's bytes its type may leave unparsed (fields of a newer OSI) and still be that type
_UNKNOWN_SHARE = 0.5


def identify_message(data: bytes, hint: str | None = None) -> str | None:
    """The OSI top-level message type ``data`` is, by its content, or ``None`` when it is no OSI message.

    Protobuf parses one message type's bytes as another's without complaint
    (field numbers and wire types overlap), so each type is tried and the one
    whose schema accounts for the most bytes wins (the fewest left as unknown
    fields at any depth); a tie goes to ``hint`` (the type the trace's name
    declares), else to SensorView.
    """
    from osi3trace.osi_trace import MESSAGES_TYPE

    data = bytes(data)
    order: list[str] = [name for name in (hint, "SensorView") if name is not None and name in MESSAGES_TYPE]
    order += [name for name in MESSAGES_TYPE if name not in order]
    best: tuple[int, str] | None = None
    for name in order:
        message = MESSAGES_TYPE[name]()
        try:
            message.ParseFromString(data)
        except Exception:  # DecodeError, or whatever the C++/upb parser raises on garbage
            continue
        message.DiscardUnknownFields()
        unknown = max(len(data) - int(message.ByteSize()), 0)
        if best is None or unknown < best[0]:
            best = (unknown, name)
    if best is None or best[0] > _UNKNOWN_SHARE * len(data):
        return None
    return best[1]


def _mcap_message_types(path) -> list[str]:
    """The message types of an MCAP file's channels (schema names, ``osi3.`` dropped), in channel order: from its
    summary, else (a file cut short loses its summary) from the channels a forward pass meets before any damage."""
    from mcap.reader import make_reader

    with open(path, "rb") as f:
        try:
            summary = make_reader(f).get_summary()
        except Exception:  # no footer to find the summary by: a file cut short
            summary = None
        if summary is not None:
            names = [summary.schemas[channel.schema_id].name if channel.schema_id in summary.schemas
                     else "no schema" for channel in summary.channels.values()]
            return list(dict.fromkeys(name.removeprefix("osi3.") for name in names))
        f.seek(0)
        channels = _McapChannels()
        try:
            for _, record in _mcap_records(f):
                channels.note(record)
        except _BrokenRecord:  # the damage itself is the reader's to name: the channels before it tell the type
            pass
    return list(dict.fromkeys(channels.types.values()))


def check_message_type(path, expected: str | tuple[str, ...] = "SensorView") -> str:
    """The message type of a trace, one of ``expected``; refused, in one line naming what it holds, otherwise.

    An MCAP trace says so in its channels' schemas (the first expected type it has wins); a ``.osi`` or ``.osi.xz``
    trace by its first message's content (:func:`identify_message`; the name's
    ``_sv_``/``_sd_``/``_gt_`` only breaks ties). A trace that cannot be told
    (missing, empty, its first message damaged) passes as the first expected type: reading it names that.
    """
    path = os.fspath(path)
    wanted = (expected,) if isinstance(expected, str) else tuple(expected)
    wanted_text = " or ".join(wanted)
    if not os.path.isfile(path):
        return wanted[0]
    if path.endswith(".mcap"):
        try:
            types = _mcap_message_types(path)
        except Exception:  # not an MCAP file, or a damaged one: the reader names it
            return wanted[0]
        found_types = [name for name in wanted if name in types]
        if types and not found_types:
            raise TraceError(f"{path} is an MCAP trace of {' and '.join(types)}, not of {wanted_text}: "
                             f"give the {wanted[0]} trace it was made from")
        return found_types[0] if found_types else wanted[0]
    try:
        first = next(iter(read_trace(path, _NO_CHECK)), None)
    except TraceError:
        return wanted[0]
    if not first:
        return wanted[0]
    found = identify_message(first, message_type_of(path))
    if found not in wanted:
        what = (f"a {found} trace" if found else
                f"not an OSI trace (its first message, {len(first)} bytes, is no OSI message)")
        raise TraceError(f"{path} is {what}, not a {wanted_text} trace: give the {wanted[0]} trace it was made "
                         "from")
    return str(found)


#: a trace's first views whose timestamps give its step (:func:`median_step_s`)
STEP_LOOKAHEAD = 64


def median_step_s(times_s, one_view_s: float) -> float:
    """The FMI step that replays a trace: the median spacing of its first views' timestamps ``times_s``; ``one_view_s``
    for a trace of one view, or of views whose time does not advance (an FMI step is > 0)."""
    import numpy as np

    spacing_s = float(np.median(np.diff(times_s))) if len(times_s) > 1 else 0.0
    return spacing_s if spacing_s > 0 else one_view_s


def count_frames(path) -> int | None:
    """Frames of a ``.osi`` trace from its length prefixes alone (up to the first one past the end), without reading
    the messages; ``None`` for compressed and MCAP traces, which would have to be read whole."""
    path = os.fspath(path)
    if not path.endswith(".osi") or not os.path.isfile(path):
        return None
    count = 0
    with open(path, "rb") as f:
        end = os.fstat(f.fileno()).st_size
        offset = 0
        while offset + 4 <= end:
            f.seek(offset)
            (size,) = _LENGTH.unpack(f.read(4))
            if offset + 4 + size > end:
                break
            offset += 4 + size
            count += 1
    return count


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

    from .encode import default_interface_version  # lazy: the encoder compiles kernels; reading needs none

    v = default_interface_version()
    when = when or datetime.datetime.now(datetime.timezone.utc)
    osi = f"{v.version_major}{v.version_minor}{v.version_patch}"
    protobuf = google.protobuf.__version__.replace(".", "")
    return f"{when:%Y%m%dT%H%M%SZ}_{kind}_{osi}_{protobuf}_{frames}_{name}.osi"
