"""What a replay says about itself: its SensorData trace (zstd MCAP unless asked otherwise) named with its size, and
``summary.json`` holding times as a person reads them."""
import json
import re

from helpers.fmu_inputs import SHARED_TRACE, SMALL_SENSOR
from lidar_fmu.tools.cli import main


def test_the_trace_is_mcap_by_default_and_the_summary_says_where_and_how_big(fmu_path, tmp_path, capsys):
    spec = tmp_path / "small.json"
    spec.write_text(json.dumps(SMALL_SENSOR))
    out = tmp_path / "out"
    argv = ["replay", str(SHARED_TRACE), "--sensor", str(spec), "--fmu", str(fmu_path), "-q", "--frames", "3"]
    assert main([*argv, "-o", str(out)]) == 0
    stdout = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    trace = out / summary["sensordata_trace"]
    assert trace.suffix == ".mcap" and trace.read_bytes()[:8] == b"\x89MCAP0\r\n"
    assert summary["sensordata_trace_bytes"] == trace.stat().st_size
    assert f"SensorData trace: {trace} ({trace.stat().st_size / 1e6:,.1f} MB)" in stdout
    assert main([*argv, "-o", str(tmp_path / "osi"), "--trace-format", "osi"]) == 0  # asked for: OSI's own format
    assert json.loads((tmp_path / "osi" / "summary.json").read_text())["sensordata_trace"].endswith(".osi")


def test_summary_times_are_rounded_as_people_read_them(fmu_path, tmp_path, capsys):
    """The views' times are whole tenths of a second; their sums in binary floating point are not
    (0.1 + 0.2 = 0.30000000000000004): summary.json keeps seconds to the nanosecond and milliseconds to the
    microsecond."""
    spec = tmp_path / "small.json"
    spec.write_text(json.dumps(SMALL_SENSOR))
    out = tmp_path / "out"
    assert main(["replay", str(SHARED_TRACE), "--sensor", str(spec), "--fmu", str(fmu_path), "-q", "--frames", "6",
                 "-o", str(out)]) == 0
    text = (out / "summary.json").read_text()
    assert not re.search(r"\d\.\d*(0000000|9999999)\d", text), text  # no float artifacts anywhere
    summary = json.loads(text)
    for times in (summary["frame_end_s"], summary["frame_first_firing_s"]):
        assert all(t == round(t, 9) for t in times)
    assert all(v == round(v, 3) for v in [summary["first_step_ms"], *summary["step_ms"].values()])


def test_the_preview_gif_has_axes_and_each_frames_time(fmu_path, tmp_path):
    """Each GIF frame is the bird's-eye view (600 px for 60 m each way at 0.2 m) framed by axes in metres and a
    title with the frame's time: frames of the same points still differ where their times are written."""
    import numpy as np
    from PIL import Image, ImageSequence

    from lidar_fmu.io.preview import FRAME_MARGINS_PX
    from lidar_fmu.tools.replay import replay

    spec = tmp_path / "small.json"
    spec.write_text(json.dumps(SMALL_SENSOR))
    out = tmp_path / "out"
    replay(SHARED_TRACE, out, fmu_path=fmu_path, max_frames=3, progress=False, overrides={"sensor": str(spec)})
    with Image.open(out / "preview.gif") as gif:
        frames = [np.asarray(frame.convert("RGB")) for frame in ImageSequence.Iterator(gif)]
    left, top, right, bottom = FRAME_MARGINS_PX
    assert len(frames) == 3 and frames[0].shape == (top + 600 + bottom, left + 600 + right, 3)
    for frame in frames:  # tick labels and axis titles: light pixels in the margins
        assert (frame[top + 600:, :, 0] > 150).sum() > 100 and (frame[:, :left, 0] > 150).sum() > 100
    titles = [frame[:top] for frame in frames]
    assert not np.array_equal(titles[0], titles[1]) and not np.array_equal(titles[1], titles[2])


def test_the_demo_says_what_is_on_and_how_to_turn_the_noise_on():
    from lidar_fmu.sensors import load_sensor
    from lidar_fmu.tools.demo import effects_line

    line = effects_line(load_sensor("ouster_os1_128"))
    assert "on: range–reflectivity limit, motion distortion;" in line and "off: noise" in line
    assert "Ranges are exact" in line and "`preset: ouster_os1_128` and `noise: true`" in line
    noisy = effects_line(load_sensor({"preset": "ouster_os1_128", "noise": True}))
    assert "noise;" not in noisy.split("off:")[1] and "Ranges are exact" not in noisy
