#!/usr/bin/env bash
# ASAM osi-validation's rules on lidar-fmu's SensorData with every OSI layer (docs/fmu.md, "OSI layers").
# By hand, not in the test command: osi-validation is not on the package registries.
#   scripts/osi_validation_check.sh OSI_VALIDATION_SRC OSI_SRC [WORK_DIR]
# OSI_VALIDATION_SRC: a checkout of github.com/OpenSimulationInterface/osi-validation; OSI_SRC: one of
# github.com/OpenSimulationInterface/open-simulation-interface (its rules are generated from OSI's .proto files,
# checked out at the osi-python version lidar-fmu uses, v3.8.0).
set -euo pipefail
VALIDATION=$(realpath "$1"); OSI=$(realpath "$2"); WORK=$(realpath -m "${3:-build/osi_validation}")
REPO=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$WORK"
git -C "$OSI" checkout -q v3.8.0
python3 -m venv "$WORK/venv"
# the validator reads FieldDescriptor.label: protobuf 6.30–6.31 still has it (pure Python), later ones do not
"$WORK/venv/bin/pip" install -q tqdm tabulate ruamel.yaml defusedxml iso3166 yamale osi-python==3.8.0 \
    "protobuf>=6.30.2,<6.32"
"$WORK/venv/bin/pip" install -q --no-deps "$VALIDATION"
# rules2yml.py reads open-simulation-interface/*.proto below the folder it runs in
(cd "$WORK" && ln -sfn "$OSI" open-simulation-interface && "$WORK/venv/bin/python" "$VALIDATION/rules2yml.py" --dir rules)
"$REPO/.venv/bin/lidar-fmu" replay "$REPO/scenarios/osi_validation_minimal" --sensor velodyne_vlp16 \
    --outputs detections,reflections,logical,objects -q -o "$WORK/replay" --pcd-every 0
"$REPO/.venv/bin/python" - "$WORK" <<'PY'
import glob, sys
from lidar_fmu.osi.trace import read_trace, write_trace
work = sys.argv[1]
mcap = glob.glob(f"{work}/replay/*_sd_*.mcap")[0]
print(write_trace(f"{work}/sensordata.osi", (bytes(m) for m in read_trace(mcap, "SensorData"))), "SensorData")
PY
PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python "$WORK/venv/bin/osivalidator" --data "$WORK/sensordata.osi" \
    --rules "$WORK/rules" --type SensorData --output "$WORK/logs"
