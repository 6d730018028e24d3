"""Extract the shared Ouster recordings into compact range-image test data (run by hand, ouster-sdk needed).

    python3 -m venv .venv-ouster && .venv-ouster/bin/pip install ouster-sdk
    .venv-ouster/bin/python scripts/extract_ouster_frames.py [SOURCE_DIR [OUT_DIR [SDK_PCAPS_DIR]]]

ouster-sdk pins ``psutil<6``, ``rosbags==0.9.23`` and ``click<8.1.8``, so it lives in its own venv and
``lidar-fmu`` reads what this script writes instead (``lidar_fmu.recordings.recording``). For every recording of
``SOURCE_DIR`` (default ``../shared/data/ouster``; ouster-sdk's ``tests/pcaps``, BSD-3-Clause) it writes
``OUT_DIR/<recording>.npz`` (default ``tests/data/ouster``), compressed, holding per frame ``f``:

* ``range_mm[f, beam, column]`` (uint32; 0 = no return), ``reflectivity``, ``near_ir``, ``signal`` (where the
  profile has it), ``range2_mm``/``reflectivity2`` (dual-return profiles): **staggered** images, the unit's
  own pixel order: row = beam (``beam_altitude_angles`` order), column = measurement column (one firing
  time; ``LidarScan`` as ouster-sdk returns it, not destaggered);
* ``timestamp_ns[f, column]``, ``status[f, column]`` (bit 0: the unit sent that column), ``frame_id[f]``;
* ``xyzlut_pixel`` (beam, column) of every 97th pixel with ouster-sdk's ``XYZLut`` (no extrinsics)
  ``xyzlut_direction`` and ``xyzlut_offset_m`` there: the unit's point is ``offset + RANGE_mm · direction``.
  The tests hold our own placement from the metadata JSON (``lidar_fmu.sensors.ouster``) against them;
* ``udp_profile_lidar``, ``prod_line``, ``ouster_sdk_version`` (strings), ``metadata`` (the JSON file's name,
  copied beside the npz).

The metadata JSONs, the lb_n3 recording's poses and the licence are copied to ``OUT_DIR`` as they are.

With ``SDK_PCAPS_DIR`` (ouster-sdk's own ``tests/pcaps``, e.g. a checkout of ouster-lidar/ouster-sdk at
release 1.0.1, commit 46b7bce) it also extracts :data:`HELD_OUT`: other units' recordings (OS-0, OS-2) that
nothing in lidar-fmu was fitted on, so ``validate`` checks the shipped figures on units kept apart.
"""
import importlib.metadata
import os
import shutil
import sys

import numpy as np
from ouster.sdk import core, open_source

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared", "data", "ouster")
if not os.path.isdir(SOURCE):
    SOURCE = "/work/shared/data/ouster"
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "tests", "data", "ouster")
#: (recording pcap stem, metadata JSON stem)
RECORDINGS = (
    ("OS-1-128_v2.3.0_1024x10_lb_n3", "OS-1-128_v2.3.0_1024x10"),
    ("OS-1-128_767798045_1024x10_20230712_120049", "OS-1-128_767798045_1024x10_20230712_120049"),
    ("OS-1-32-G_v2.1.1_1024x10", "OS-1-32-G_v2.1.1_1024x10"),
)
#: other units' recordings in ouster-sdk's tests/pcaps (same licence), each with its metadata JSON of the same stem
HELD_OUT = ("OS-0-128-U1_v2.3.0_1024x10", "OS-2-128-U1_v2.3.0_1024x10", "OS-0-32-U1_v2.2.0_1024x10",
            "OS-2-32-U0_v2.0.0_1024x10")
COPIED = ("LICENSE", "OS-1-128_v2.3.0_1024x10_lb_n3_poses_kitti.txt")
FIELDS = {  # npz key: (ChanField name, dtype)
    "range_mm": ("RANGE", np.uint32), "reflectivity": ("REFLECTIVITY", np.uint16), "signal": ("SIGNAL", np.uint16),
    "near_ir": ("NEAR_IR", np.uint16), "range2_mm": ("RANGE2", np.uint32), "reflectivity2": ("REFLECTIVITY2", np.uint16),
}
LUT_STEP = 97

SDK_PCAPS = sys.argv[3] if len(sys.argv) > 3 else None

os.makedirs(OUT, exist_ok=True)
for name in COPIED:
    shutil.copyfile(os.path.join(SOURCE, name), os.path.join(OUT, name))
JOBS = [(SOURCE, recording, metadata) for recording, metadata in RECORDINGS]
JOBS += [(SDK_PCAPS, stem, stem) for stem in HELD_OUT] if SDK_PCAPS else []
for folder, recording, metadata in JOBS:
    json_path = os.path.join(folder, metadata + ".json")
    shutil.copyfile(json_path, os.path.join(OUT, metadata + ".json"))
    source = open_source(os.path.join(folder, recording + ".pcap"), meta=[json_path], sensor_idx=0)
    info = source.sensor_info[0]
    images: dict[str, list] = {key: [] for key in FIELDS}
    timestamp, status, frame_id = [], [], []
    for frame_set in source:
        for scan in frame_set.valid_frames():
            present = set(scan.fields)
            for key, (field, dtype) in FIELDS.items():
                if field in present:
                    images[key].append(np.asarray(scan.field(getattr(core.ChanField, field))).astype(dtype))
            timestamp.append(np.asarray(scan.timestamp, np.uint64))
            status.append(np.asarray(scan.status, np.uint32))
            frame_id.append(int(scan.frame_id))
    h, w = info.format.pixels_per_column, info.format.columns_per_frame
    lut = core.XYZLut(info, use_extrinsics=False)
    direction = np.asarray(lut.direction, np.float64).reshape(h, w, 3)
    offset = np.asarray(lut.offset, np.float64).reshape(h, w, 3)
    beam, column = np.divmod(np.arange(0, h * w, LUT_STEP), w)
    arrays = {key: np.stack(frames) for key, frames in images.items() if frames}
    out = os.path.join(OUT, recording + ".npz")
    np.savez_compressed(
        out, **arrays, timestamp_ns=np.stack(timestamp), status=np.stack(status),
        frame_id=np.array(frame_id, np.int64), xyzlut_pixel=np.stack([beam, column], axis=1).astype(np.int32),
        xyzlut_direction=direction[beam, column], xyzlut_offset_m=offset[beam, column],
        udp_profile_lidar=np.array(str(info.format.udp_profile_lidar)), prod_line=np.array(str(info.prod_line)),
        metadata=np.array(metadata + ".json"), ouster_sdk_version=np.array(importlib.metadata.version("ouster-sdk")))
    print(f"{recording}: {len(frame_id)} frame(s) {h}×{w}, fields {', '.join(arrays)} → "
          f"{os.path.normpath(out)} ({os.path.getsize(out):,} bytes)")
