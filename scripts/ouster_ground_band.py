"""Write the fraction of rays that return, per elevation band, of a real OS-1-128 recording (run by hand).

    /tmp/ouster-venv/bin/python scripts/ouster_ground_band.py [PCAP METADATA.json OUT.json]

ouster-sdk (1.0.1 here) cannot share the test venv (see
``scripts/ouster_reference.py``), so its answer is kept as data with this
script as its provenance. It reads every frame of the recording with
``ouster.sdk.open_source`` and counts, per beam (row of the staggered
``LidarScan``; a row is one beam whatever the column), the pixels whose
``ChanField.RANGE`` is nonzero (the unit reports 0 for no return). Per-beam
counts are stored so that any band can be summed from them; the 2° bands
(edges at even degrees, from the unit's ``beam_altitude_angles``) and the
−11…−5° band (the road 10–22 m ahead of a roof-mounted unit) are
stored summed. Default recording: ``../shared/data/ouster/`` OS-1-128
v2.3.0 1024x10 single return (``lb_n3``; the other pcap there is dual return).
"""
import importlib.metadata
import json
import math
import os
import sys

import numpy as np
from ouster.sdk import core, open_source

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data", "ouster")
PCAP = os.path.join(DATA, "OS-1-128_v2.3.0_1024x10_lb_n3.pcap")
METADATA = os.path.join(DATA, "OS-1-128_v2.3.0_1024x10.json")
OUT = os.path.join(HERE, "..", "tests", "data", "ouster_os1_128_return_fraction_by_band.json")
if len(sys.argv) == 4:
    PCAP, METADATA, OUT = sys.argv[1:]
BAND_DEG = 2.0
ISSUE_BAND_DEG = (-11.0, -5.0)

source = open_source(PCAP, meta=[METADATA], sensor_idx=0)
info = source.sensor_info[0]
altitude = np.asarray(info.beam_altitude_angles, np.float64)
returns = np.zeros(len(altitude), np.int64)
pixels = np.zeros(len(altitude), np.int64)
frame_ids = []
for frame_set in source:
    for scan in frame_set.valid_frames():
        range_mm = np.asarray(scan.field(core.ChanField.RANGE))
        returns += (range_mm > 0).sum(axis=1)
        pixels += range_mm.shape[1]
        frame_ids.append(int(scan.frame_id))


def band(lo, hi):
    beams = (altitude >= lo) & (altitude < hi)
    count = int(pixels[beams].sum())
    return {"lo_deg": lo, "hi_deg": hi, "beams": int(beams.sum()), "pixels": count,
            "return_fraction": float(returns[beams].sum() / count) if count else None}


edges = np.arange(BAND_DEG * math.floor(altitude.min() / BAND_DEG), altitude.max() + BAND_DEG, BAND_DEG)
result = {
    "recording": os.path.basename(PCAP),
    "metadata": os.path.basename(METADATA),
    "sensor": f"{info.prod_line} sn {info.sn} fw {info.fw_rev}",
    "ouster_sdk_version": importlib.metadata.version("ouster-sdk"),
    "frames": len(frame_ids),
    "frame_ids": frame_ids,
    "return": "pixel with ChanField.RANGE > 0",
    "band_deg": BAND_DEG,
    "bands": [band(float(lo), float(lo + BAND_DEG)) for lo in edges[:-1]],
    "issue_band": band(*ISSUE_BAND_DEG),
    "beam_altitude_deg": altitude.tolist(),
    "beam_returns": returns.tolist(),
    "beam_pixels": pixels.tolist(),
}
with open(OUT, "w") as f:
    json.dump(result, f, indent=1)
    f.write("\n")
print(f"{len(frame_ids)} frames of {result['recording']}: -11..-5 deg returns "
      f"{result['issue_band']['return_fraction']:.3f}; wrote {os.path.normpath(OUT)}")
