"""Extract the first frames of real scenario tools' OSI traces into small test traces (run by hand).

    .venv/bin/python scripts/extract_osi_traces.py [SHARED_TRACES_DIR [OPENMATERIAL_CHECKOUT [OUT_DIR]]]

Ground truth as scenario tools send it, for the tests of the geometry built from it (``lidar_fmu.world``):

* from ``SHARED_TRACES_DIR`` (default ``../shared/data/osi-traces``): esmini's GroundTruth traces ``acc-test.osi``
  and ``alks_cut-in.osi`` (via ika-rwth-aachen/omega-prime, MPL-2.0; 30 Hz, the road only in the first message):
  their first 31 messages (1 s); PMSF OSI3Test's ``sensorDataDetectedLaneBoundaries.mcap`` (via
  lichtblick-suite/asam-osi-converter, MIT; 50 Hz SensorViews with solid, dashed, kerb and guard-rail boundaries):
  its first 6 SensorViews (0.1 s), written as a ``.osi`` trace;
* from ``OPENMATERIAL_CHECKOUT`` (a checkout of asam-ev/OpenMATERIAL, MPL-2.0; commit d8fe683 was used): the
  first 11 SensorViews (0.1 s, 100 Hz) of ``examples/scenario_example/…_scenario_example_two_vehicles.osi``
  (esmini with ASAM OpenMATERIAL 3D model references) — a trace kept apart: nothing was developed on it.

The messages are copied byte for byte; ``OUT_DIR`` (default ``tests/data/osi``) gets NOTICE.md beside them.
"""
import itertools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from lidar_fmu.osi.trace import read_trace, write_trace  # noqa: E402

SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "shared", "data", "osi-traces")
OPENMATERIAL = sys.argv[2] if len(sys.argv) > 2 else None
OUT = sys.argv[3] if len(sys.argv) > 3 else os.path.join(HERE, "..", "tests", "data", "osi")

EXTRACTS = [  # (source, message type, frames, output)
    (os.path.join(SHARED, "esmini", "acc-test.osi"), "GroundTruth", 31, "esmini_acc_test_gt_31.osi"),
    (os.path.join(SHARED, "esmini", "alks_cut-in.osi"), "GroundTruth", 31, "esmini_alks_cut_in_gt_31.osi"),
    (os.path.join(SHARED, "osi3test", "sensorDataDetectedLaneBoundaries.mcap"), "SensorView", 6,
     "osi3test_lane_boundaries_sv_6.osi"),
]
if OPENMATERIAL:
    EXTRACTS.append((os.path.join(OPENMATERIAL, "examples", "scenario_example",
                                  "20250130T100644Z_sv_370_2112_700_scenario_example_two_vehicles.osi"),
                     "SensorView", 11, "openmaterial_two_vehicles_sv_11.osi"))

os.makedirs(OUT, exist_ok=True)
for source, message_type, frames, name in EXTRACTS:
    count = write_trace(os.path.join(OUT, name), itertools.islice(read_trace(source, message_type), frames))
    print(f"{name}: {count} {message_type} messages of {source}")
