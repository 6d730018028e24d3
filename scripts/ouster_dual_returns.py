"""Write the second-echo statistics of the real OS-1-128 dual-return recording (run by hand).

    /tmp/ouster-venv/bin/python scripts/ouster_dual_returns.py [PCAP METADATA.json OUT.json]

ouster-sdk (1.0.1 here) cannot share the test venv (see
``scripts/ouster_reference.py``), so its answer is kept as data with this
script as its provenance. It reads the recording with
``ouster.sdk.open_source``; per frame, only the columns the unit sent
(``LidarScan.status`` bit 0: the recording is one partial frame) count. A
pixel returns when ``ChanField.RANGE`` > 0 (the unit reports 0 for none) and
has a second echo when ``ChanField.RANGE2`` > 0 too. For each such pixel the
gap is far − near of its two ranges (the unit sorts its two returns by
strength; the nearer is our echo 0). Default recording: ``../shared/data/ouster/``
``OS-1-128_767798045_1024x10_20230712_120049`` (FUSA_RNG15_RFL8_NIR8_DUAL,
indoor, ouster-sdk's test data, BSD-3-Clause).
"""
import importlib.metadata
import json
import os
import sys

import numpy as np
from ouster.sdk import core, open_source

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "data", "ouster")
NAME = "OS-1-128_767798045_1024x10_20230712_120049"
PCAP, METADATA = os.path.join(DATA, NAME + ".pcap"), os.path.join(DATA, NAME + ".json")
OUT = os.path.join(HERE, "..", "tests", "data", "ouster_os1_128_dual_returns.json")
if len(sys.argv) == 4:
    PCAP, METADATA, OUT = sys.argv[1:]
GAP_BINS_M = [0.0, 0.5, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 4.0, 6.0, 10.0, 20.0, 50.0]
PERCENTILES = [0, 1, 5, 10, 25, 50, 75, 90, 95, 99, 100]

source = open_source(PCAP, meta=[METADATA], sensor_idx=0)
info = source.sensor_info[0]
xyz_of = core.XYZLut(info, use_extrinsics=False)
first, second, azimuth, strongest_first, frames, columns = [], [], [], [], [], 0
for frame_set in source:
    for scan in frame_set.valid_frames():
        sent = (np.asarray(scan.status) & 1).astype(bool)
        columns += int(sent.sum())
        r1 = np.asarray(scan.field(core.ChanField.RANGE))[:, sent] / 1000.0
        r2 = np.asarray(scan.field(core.ChanField.RANGE2))[:, sent] / 1000.0
        refl1 = np.asarray(scan.field(core.ChanField.REFLECTIVITY))[:, sent]
        refl2 = np.asarray(scan.field(core.ChanField.REFLECTIVITY2))[:, sent]
        xyz = xyz_of(scan)[:, sent]  # sensor frame, m
        first.append(r1.ravel())
        second.append(r2.ravel())
        azimuth.append(np.degrees(np.arctan2(xyz[..., 1], xyz[..., 0])).ravel())
        both = (r1 > 0) & (r2 > 0)
        strongest_first.append(refl1[both] >= refl2[both])
        frames.append(int(scan.frame_id))
first, second, azimuth = np.concatenate(first), np.concatenate(second), np.concatenate(azimuth)
returns = first > 0
both = returns & (second > 0)
near, far = np.minimum(first[both], second[both]), np.maximum(first[both], second[both])
gap = far - near


def percentiles(values):
    return {f"p{p}": round(float(np.percentile(values, p)), 4) for p in PERCENTILES} if len(values) else {}


result = {
    "recording": os.path.basename(PCAP),
    "metadata": os.path.basename(METADATA),
    "sensor": f"{info.prod_line} sn {info.sn} fw {info.fw_rev}",
    "udp_profile_lidar": str(info.format.udp_profile_lidar),
    "ouster_sdk_version": importlib.metadata.version("ouster-sdk"),
    "frames": len(frames),
    "frame_ids": frames,
    "columns_sent": columns,
    "pixels": int(first.size),
    "returning_pixels": int(returns.sum()),
    "second_echo_pixels": int(both.sum()),
    "second_echo_fraction_of_returning": float(both.sum() / max(returns.sum(), 1)),
    "second_echo_fraction_of_pixels": float(both.sum() / max(first.size, 1)),
    "first_return_range_m": percentiles(first[returns]),
    "near_echo_range_m": percentiles(near),
    "far_echo_range_m": percentiles(far),
    "gap_m": percentiles(gap),
    "gap_histogram": {"edges_m": GAP_BINS_M, "counts": np.histogram(gap, GAP_BINS_M)[0].tolist()},
    "first_return_at_least_as_reflective": float(np.concatenate(strongest_first).mean()) if both.any() else None,
    "returning_azimuth_deg": percentiles(azimuth[returns]),
    "definitions": "a pixel returns when RANGE > 0; it has a second echo when RANGE2 > 0 too; gap = far - near "
                   "of its two ranges; only the columns the unit sent (status bit 0) count",
}
with open(OUT, "w") as f:
    json.dump(result, f, indent=1)
    f.write("\n")
print(f"{result['frames']} frame(s), {columns} columns of {result['recording']}: second echo on "
      f"{100 * result['second_echo_fraction_of_returning']:.2f} % of returning pixels; gap median "
      f"{result['gap_m'].get('p50')} m, min {result['gap_m'].get('p0')} m; wrote {os.path.normpath(OUT)}")
