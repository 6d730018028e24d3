"""What a replay writes: the SensorData trace as .osi or .mcap, compressed PCDs every N frames, a Rerun recording,
and the first (model-loading) step reported apart from the step percentiles."""
import json
import shutil

import numpy as np

from helpers.fmu_inputs import SHARED_TRACE, SMALL_SENSOR
from lidar_fmu.io import read_pcd
from lidar_fmu.osi.trace import read_trace
from lidar_fmu.tools.replay import replay


def _scenario(tmp_path):
    folder = tmp_path / "scenario"
    folder.mkdir()
    shutil.copy(SHARED_TRACE, folder / "trace.osi")
    (folder / "scenario.yaml").write_text(json.dumps({"trace": "trace.osi", "sensor": SMALL_SENSOR}))
    return folder


def test_mcap_trace_pcd_cadence_rerun_and_first_step(tmp_path):
    scenario = _scenario(tmp_path)
    osi_out, mcap_out = tmp_path / "osi", tmp_path / "mcap"
    plain = replay(scenario, osi_out, max_frames=6, progress=False, trace_format="osi")
    packed = replay(scenario, mcap_out, max_frames=6, progress=False, write_pcd_every=4,  # MCAP: the default
                    rerun_path=str(tmp_path / "replay.rrd"))
    assert plain["sensordata_trace"].endswith(".osi") and packed["sensordata_trace"].endswith(".mcap")
    for summary, out in ((plain, osi_out), (packed, mcap_out)):  # the summary says how big its trace is
        assert summary["sensordata_trace_bytes"] == (out / summary["sensordata_trace"]).stat().st_size
    # the same SensorData in both containers (timestamps aside, the FMU is deterministic)
    a = list(read_trace(osi_out / plain["sensordata_trace"], "SensorData"))
    b = list(read_trace(mcap_out / packed["sensordata_trace"], "SensorData"))
    assert len(a) == len(b) == 6 and a == b
    assert sorted(p.name for p in (mcap_out / "frames").iterdir()) == ["frame_0000.pcd", "frame_0004.pcd"]
    header = (mcap_out / "frames" / "frame_0004.pcd").read_bytes()[:400]
    assert b"DATA binary_compressed" in header and b"normal_x" not in header  # OSI has no normals
    assert np.array_equal(read_pcd(mcap_out / "frames" / "frame_0004.pcd")["x"],
                          read_pcd(osi_out / "frames" / "frame_0004.pcd")["x"])
    assert (tmp_path / "replay.rrd").stat().st_size > 1000
    for summary in (plain, packed):
        assert summary["first_step_ms"] > 0 and set(summary["step_ms"]) == {"p50", "p90", "p99", "max"}
