"""A damaged trace keeps what it can: the intact frames are replayed, then one line names the bad frame (exit 2)."""
import json
import lzma
import pathlib
import shutil
import struct
import tempfile

import pytest

from helpers.fmu_inputs import SHARED_TRACE, SMALL_SENSOR
from lidar_fmu.osi.trace import TraceError, count_frames, read_trace
from lidar_fmu.tools.cli import main

FRAMES = 20  # in SHARED_TRACE
SENSOR = SMALL_SENSOR  # 5,760 rays: fast


def _offsets(raw: bytes) -> list[int]:
    """Byte offset of every frame's length prefix in a .osi trace (plus the end)."""
    offsets = [0]
    while offsets[-1] < len(raw):
        offsets.append(offsets[-1] + 4 + struct.unpack_from("<I", raw, offsets[-1])[0])
    return offsets


def _scenario(folder: pathlib.Path, trace_bytes: bytes, trace_name: str = "trace.osi") -> pathlib.Path:
    folder.mkdir()
    (folder / trace_name).write_bytes(trace_bytes)
    (folder / "scenario.yaml").write_text(json.dumps({"name": "damaged", "trace": trace_name, "sensor": SENSOR,
                                                      "step_size_s": 0.1}))
    return folder


def _replay(scenario, out, fmu_path, capsys, *extra):
    code = main(["replay", str(scenario), "-o", str(out), "--fmu", str(fmu_path), "-q", *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def clean(fmu_path, tmp_path_factory):
    """The PCDs of a clean replay of the whole trace, frame index → bytes."""
    from lidar_fmu.tools.replay import replay

    base = tmp_path_factory.mktemp("clean")
    scenario = _scenario(base / "scenario", SHARED_TRACE.read_bytes())
    summary = replay(scenario, base / "out", fmu_path=fmu_path, progress=False)
    assert summary["frames"] == FRAMES and summary["damaged_frame"] is None
    return {k: (base / "out" / "frames" / f"frame_{k:04d}.pcd").read_bytes() for k in range(FRAMES)}


def _check_partial(out: pathlib.Path, code, stdout, err, clean, bad: int):
    """Frames 0..bad-1 replayed exactly as in the clean replay, nothing after; one error line naming frame ``bad``."""
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lidar-fmu: error: "), err
    assert f"frame {bad} " in lines[0] and "damaged" in lines[0] and "Traceback" not in err
    assert f"damaged: {bad} frames of" in stdout  # the summary of what was replayed comes first
    pcds = sorted(p.name for p in (out / "frames").iterdir())
    assert pcds == [f"frame_{k:04d}.pcd" for k in range(bad)]
    for k in range(bad):
        assert (out / "frames" / f"frame_{k:04d}.pcd").read_bytes() == clean[k], f"frame {k}"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frames"] == bad and len(summary["returns_per_frame"]) == bad
    assert summary["damaged_frame"]["index"] == bad and f"frame {bad} " in summary["damaged_frame"]["error"]
    sd_trace = out / summary["sensordata_trace"]
    assert f"_{bad}_damaged.mcap" in sd_trace.name and len(list(read_trace(sd_trace, "SensorData"))) == bad
    assert (out / "preview.png").is_file() and (out / "preview.gif").is_file()
    assert not (out / "sensordata.tmp.mcap").exists()
    return summary


def test_truncated_osi_replays_the_intact_frames(fmu_path, clean, tmp_path, capsys):
    raw = SHARED_TRACE.read_bytes()
    cut = _offsets(raw)[12] + 4 + 100  # inside frame 12's message
    scenario = _scenario(tmp_path / "scenario", raw[:cut])
    code, stdout, err = _replay(scenario, tmp_path / "out", fmu_path, capsys)
    summary = _check_partial(tmp_path / "out", code, stdout, err, clean, 12)
    assert summary["damaged_frame"]["byte_offset"] == _offsets(raw)[12]
    assert "length prefix says" in err


def test_a_corrupt_message_in_the_middle_stops_there(fmu_path, clean, tmp_path, capsys):
    raw = SHARED_TRACE.read_bytes()
    offsets = _offsets(raw)
    garbage = b"\xff" * 300  # a valid length prefix, then bytes no protobuf parser takes
    damaged = raw[:offsets[7]] + struct.pack("<I", len(garbage)) + garbage + raw[offsets[8]:]
    scenario = _scenario(tmp_path / "scenario", damaged)
    code, stdout, err = _replay(scenario, tmp_path / "out", fmu_path, capsys)
    _check_partial(tmp_path / "out", code, stdout, err, clean, 7)
    assert "not a SensorView" in err


def test_a_truncated_xz_trace_replays_what_decompresses(fmu_path, clean, tmp_path, capsys):
    raw = SHARED_TRACE.read_bytes()
    compressed = lzma.compress(raw, format=lzma.FORMAT_XZ)
    truncated = compressed[: len(compressed) * 2 // 3]
    # what an independent decoder gets out of the truncated file: its complete frames are the intact ones
    decoded = lzma.LZMADecompressor().decompress(truncated)
    intact = sum(1 for end in _offsets(raw)[1:] if end <= len(decoded))
    assert 0 < intact < FRAMES
    scenario = _scenario(tmp_path / "scenario", truncated, "trace.osi.xz")
    code, stdout, err = _replay(scenario, tmp_path / "out", fmu_path, capsys)
    _check_partial(tmp_path / "out", code, stdout, err, clean, intact)
    assert "xz stream breaks off" in err


def test_damage_at_the_first_frame_is_one_line_and_no_output(fmu_path, tmp_path, capsys):
    scenario = _scenario(tmp_path / "scenario", struct.pack("<I", 1000) + b"\0" * 10)
    code, stdout, err = _replay(scenario, tmp_path / "out", fmu_path, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "frame 0 (byte 0)" in err
    assert "no intact frame" in err and not (tmp_path / "out" / "summary.json").exists()


def test_damage_past_the_frames_asked_for_goes_unseen(fmu_path, clean, tmp_path, capsys):
    raw = SHARED_TRACE.read_bytes()
    scenario = _scenario(tmp_path / "scenario", raw[:_offsets(raw)[12] + 50])
    code, stdout, err = _replay(scenario, tmp_path / "out", fmu_path, capsys, "--frames", "5")
    assert code == 0, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["frames"] == 5 and summary["damaged_frame"] is None
    assert (tmp_path / "out" / "frames" / "frame_0004.pcd").read_bytes() == clean[4]


# -- the reader itself ----------------------------------------------------------------------------------------------
def test_reader_yields_the_intact_frames_before_raising(tmp_path):
    raw = SHARED_TRACE.read_bytes()
    offsets = _offsets(raw)
    clean = list(read_trace(SHARED_TRACE))
    assert len(clean) == FRAMES and count_frames(SHARED_TRACE) == FRAMES
    cases = {
        "prefix.osi": (raw + b"\x01\x02", FRAMES, offsets[FRAMES], "inside its length prefix"),
        "cut.osi": (raw[:offsets[5] + 9], 5, offsets[5], "length prefix says"),
        "garbage.osi": (raw[:offsets[3]] + struct.pack("<I", 5) + b"\xff" * 5 + raw[offsets[4]:], 3, offsets[3],
                        "not a SensorView"),
        "not_xz.osi.xz": (raw, 0, 0, "xz stream breaks off"),
        "zeros.osi": (raw + bytes(4096), FRAMES, offsets[FRAMES], "0 bytes: no message"),
    }
    for name, (data, good, offset, why) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        got = []
        with pytest.raises(TraceError, match=why) as info:
            for message in read_trace(path, "SensorView"):
                got.append(message)
        assert got == clean[:good], name
        assert (info.value.frame, info.value.offset) == (good, offset), name
        assert f"frame {good} (byte {offset}" in str(info.value), name
    assert count_frames(tmp_path / "cut.osi") == 5  # stops at the first prefix past the end


def test_reader_takes_concatenated_xz_streams_and_checks_the_declared_type(tmp_path):
    raw = SHARED_TRACE.read_bytes()
    path = tmp_path / "two.osi.xz"
    path.write_bytes(lzma.compress(raw) + lzma.compress(raw))
    assert len(list(read_trace(path, "SensorView"))) == 2 * FRAMES
    # the OSI name declares the type: a SensorView trace whose messages are not SensorViews is damaged
    named = tmp_path / "20240101T000000Z_sv_370_244_1_x.osi"
    named.write_bytes(struct.pack("<I", 4) + b"\xff" * 4)
    with pytest.raises(TraceError, match="frame 0 .* not a SensorView"):
        list(read_trace(named))
    # no type known: split, not parsed
    plain = tmp_path / "plain.osi"
    shutil.copy(named, plain)
    assert list(read_trace(plain)) == [b"\xff" * 4]


# -- timestamps that run backwards ----------------------------------------------------------------------------------
def _untimed_scenario(folder: pathlib.Path, messages: list[bytes]) -> pathlib.Path:
    """A scenario of ``messages`` without ``step_size_s``: the replay takes its step and the GIF's from the trace."""
    folder.mkdir()
    (folder / "trace.osi").write_bytes(b"".join(struct.pack("<I", len(m)) + m for m in messages))
    (folder / "scenario.yaml").write_text(json.dumps({"name": "backwards", "trace": "trace.osi", "sensor": SENSOR}))
    return folder


def _gif_frame_ms(path: pathlib.Path) -> list[int]:
    from PIL import Image

    with Image.open(path) as gif:
        return [gif.seek(k) or gif.info["duration"] for k in range(gif.n_frames)]


def test_frames_whose_time_runs_backwards_are_replayed_in_file_order_with_one_warning(fmu_path, tmp_path, capsys):
    views = list(read_trace(SHARED_TRACE))
    order = [0, 5, 4, 3, 2, 1]  # most steps backwards: the median spacing is −0.1 s, no GIF frame time
    code, stdout, err = _replay(_untimed_scenario(tmp_path / "s", [views[k] for k in order]), tmp_path / "out",
                                fmu_path, capsys)
    assert code == 0 and "Traceback" not in err, err
    warnings = [line for line in stdout.splitlines() if line.strip().startswith("warning:")]
    assert len(warnings) == 1 and "4 of 6 frames run backwards, first at frame 2" in warnings[0], stdout
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    times = summary["frame_end_s"]
    assert summary["frames"] == 6 and times[2] < times[1] and summary["time_note"] in warnings[0]
    assert all(20 <= ms <= 10_000 for ms in _gif_frame_ms(tmp_path / "out" / "preview.gif"))


def test_a_sensor_view_trace_followed_by_ground_truth_ends_without_a_traceback(fmu_path, tmp_path, capsys):
    from osi3.osi_groundtruth_pb2 import GroundTruth

    views = list(read_trace(SHARED_TRACE))[:3]
    truths = []
    for k in range(2):  # esmini's GroundTruth trace: time from 0 again, parsed as views whose time starts over
        truth = GroundTruth()
        truth.timestamp.nanos = k * 33_000_000
        truth.host_vehicle_id.value = 0
        truths.append(truth.SerializeToString())
    code, stdout, err = _replay(_untimed_scenario(tmp_path / "s", views + truths), tmp_path / "out", fmu_path, capsys)
    assert "Traceback" not in err and "internal error" not in err, err
    assert "1 of 5 frames run backwards, first at frame 3" in stdout
    assert all(20 <= ms <= 10_000 for ms in _gif_frame_ms(tmp_path / "out" / "preview.gif"))


# -- a GroundTruth MCAP cut short -------------------------------------------------------------------------------------
def _ground_truth_mcap() -> tuple[bytes, list[bytes], list[int]]:
    """The shared trace's ground truths as an MCAP of small chunks (what esmini's MCAP output holds) → its bytes, the
    messages, and the byte offset of each message's chunk."""
    import io

    from mcap.records import Chunk
    from mcap.stream_reader import StreamReader, breakup_chunk
    from mcap_protobuf.writer import Writer
    from osi3.osi_sensorview_pb2 import SensorView

    truths = [SensorView.FromString(view).global_ground_truth for view in read_trace(SHARED_TRACE)]
    buffer = io.BytesIO()
    with Writer(buffer, chunk_size=1024) as writer:
        for k, truth in enumerate(truths):
            writer.write_message("ground_truth", truth, log_time=k * 100_000_000)
    raw = buffer.getvalue()
    stream, chunk_of_message = io.BytesIO(raw), []
    offset = 0
    for record in StreamReader(stream, emit_chunks=True).records:
        if isinstance(record, Chunk):
            chunk_of_message += [offset] * sum(1 for r in breakup_chunk(record) if type(r).__name__ == "Message")
        offset = stream.tell()
    return raw, [truth.SerializeToString() for truth in truths], chunk_of_message


def test_a_ground_truth_mcap_cut_short_is_named_and_its_intact_messages_read():
    from lidar_fmu.osi.trace import check_message_type

    raw, messages, chunks = _ground_truth_mcap()
    assert len(messages) == FRAMES and len(set(chunks)) > 3, "several chunks, or a cut loses everything"
    cases = {"summary lost": (len(raw) * 9 // 10, FRAMES, None),
             "inside the data": (chunks[15] + 20, chunks.index(chunks[15]), chunks[15])}
    for name, (cut, intact, offset) in cases.items():
        with tempfile.TemporaryDirectory() as folder:
            path = pathlib.Path(folder) / "gt.mcap"
            path.write_bytes(raw[:cut])
            assert check_message_type(path, ("SensorView", "GroundTruth")) == "GroundTruth", name
            got = []
            with pytest.raises(TraceError, match="MCAP file is cut short") as info:
                got.extend(read_trace(path, "GroundTruth"))
            assert got == messages[:intact] and info.value.frame == intact, name
            assert offset is None or info.value.offset == offset, name
    # the whole file: every message, byte for byte, and no damage
    with tempfile.TemporaryDirectory() as folder:
        (pathlib.Path(folder) / "gt.mcap").write_bytes(raw)
        assert list(read_trace(pathlib.Path(folder) / "gt.mcap", "GroundTruth")) == messages


def test_a_ground_truth_mcap_cut_short_replays_its_intact_frames(fmu_path, tmp_path, capsys):
    raw, _, chunks = _ground_truth_mcap()
    intact = chunks.index(chunks[15])
    scenario = _scenario(tmp_path / "scenario", raw[:chunks[15] + 20], "gt.mcap")
    code, stdout, err = _replay(scenario, tmp_path / "out", fmu_path, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert f"frame {intact} " in lines[0] and "MCAP file is cut short" in lines[0] and "SensorView" not in lines[0]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["frames"] == intact and min(summary["returns_per_frame"]) > 0
    assert summary["damaged_frame"]["index"] == intact
