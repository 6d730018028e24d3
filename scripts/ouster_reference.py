"""Write the ouster-sdk reference the tests hold our Ouster rays against (run by hand; ouster-sdk needed).

    pip install ouster-sdk && python scripts/ouster_reference.py [METADATA.json OUT.npz]

For every 7th pixel of the packaged OS1-128 metadata it stores ouster-sdk's
``XYZLut`` ``direction`` and ``offset`` (sensor frame, no extrinsics): the
unit's ray for that pixel is ``offset + r · direction`` (r: the range the
unit reports, mm). ouster-sdk cannot share the test venv (it pins psutil<6,
rerun-sdk needs ≥7), so its answer is kept as data, with this script as its
provenance.
"""
import importlib.metadata
import os
import sys

import numpy as np
from ouster.sdk import core

HERE = os.path.dirname(os.path.abspath(__file__))
METADATA = os.path.join(HERE, "..", "src", "lidar_fmu", "sensors", "data", "ouster_os1_128_v2.3.0_1024x10.json")
OUT = os.path.join(HERE, "..", "tests", "data", "ouster_os1_128_xyzlut_every7.npz")
if len(sys.argv) == 3:  # another unit: tests/data/ouster_os1_128_fw3.1_* came so
    METADATA, OUT = sys.argv[1:]
STEP = 7

with open(METADATA) as f:
    info = core.SensorInfo(f.read())
lut = core.XYZLut(info, use_extrinsics=False)
h, w = info.format.pixels_per_column, info.format.columns_per_frame
direction = np.asarray(lut.direction, np.float64).reshape(h, w, 3)
offset = np.asarray(lut.offset, np.float64).reshape(h, w, 3)
beam, column = np.divmod(np.arange(0, h * w, STEP), w)
np.savez_compressed(OUT, beam=beam.astype(np.int32), column=column.astype(np.int32),
                    direction_m_per_mm=direction[beam, column], offset_m=offset[beam, column],
                    ouster_sdk_version=np.array(importlib.metadata.version("ouster-sdk")))
print(f"wrote {len(beam)} pixels to {os.path.normpath(OUT)}")
