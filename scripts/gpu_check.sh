#!/usr/bin/env bash
# The GPU backend on a real GPU, in one run: install, GPU tests, CPU/CUDA parity through the FMU, bench figures.
#
#   scripts/gpu_check.sh                        # on a machine with an NVIDIA GPU (docs/benchmarks.md, "GPU run")
#   GPU_CHECK_DRY_RUN=1 scripts/gpu_check.sh    # anywhere: Numba's CUDA simulator, a tiny sensor, no install
#
# Steps, in order, each time-boxed (`timeout`) inside one budget for the whole run:
#   environment  nvidia-smi (driver, the CUDA version it supports), Python; skipped in a dry run
#   install      the project with the numba-cuda build for that driver: from the wheelhouse .whl/ when there is
#                one (a machine without a package registry: scripts/gpu_wheelhouse.py made it), else from PyPI
#                into the venv .venv-gpu (numba-cuda[cu13], or [cu12] for a CUDA 12 driver); skipped in a dry run
#   smoke        numba-cuda sees the GPU and runs a kernel; the backend 'auto' picks cuda
#   tests        the CPU/CUDA parity tests (tests/test_cuda_sim.py, the cuda tests of test_scene_update.py)
#                and every test marked `gpu`, on the device
#   parity       the demo replayed through the FMU with backend cuda and embree (scripts/gpu_parity.py)
#   bench-cuda   lidar-fmu bench --backend cuda   (the parts issue 35 asks for)
#   bench-cpu    lidar-fmu bench --backend embree (the same parts, same machine)
# then report: scripts/gpu_report.py puts the figures side by side with the goals (always, even after a failure).
#
# Everything goes under $OUT (default out/gpu_check), at most 8 files: gpu_check.log (all output), steps.tsv
# (step, status, exit code, seconds), env.txt, parity.json, bench_cuda.json, bench_embree.json, report.md.
# The first broken step stops the run (GPU_CHECK_KEEP_GOING=1: go on), is named on stderr and in steps.tsv and
# report.md, and the exit status is non-zero.
#
# Environment: OUT; GPU_CHECK_DRY_RUN=1; GPU_CHECK_BUDGET_S (whole run, default 470 s; dry run 3600 s);
# GPU_CHECK_KEEP_GOING=1; GPU_CHECK_WHEELHOUSE (default .whl); PYTHON (the interpreter: default python3 on a
# wheelhouse install, .venv-gpu's after a PyPI install, .venv's or python3 in a dry run); GPU_CHECK_TESTS (pytest
# arguments in place of the parity tests; a dry run's default: one of them); GPU_CHECK_FRAMES, GPU_CHECK_REPEAT
# (demo frames of the parity and the bench, timed repetitions); GPU_CHECK_WORK (work folder, kept; default a
# temporary one, removed); GPU_CHECK_CUDA_SECTIONS (the bench parts on cuda: default all, a dry run's the
# backend's own: cast, echoes, gpu).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/out/gpu_check}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
DRY="${GPU_CHECK_DRY_RUN:-0}"
[ "$DRY" = "0" ] && DRY="" || DRY=1
KEEP_GOING="${GPU_CHECK_KEEP_GOING:-}"
WHEELHOUSE="${GPU_CHECK_WHEELHOUSE:-$ROOT/.whl}"
BUDGET_S="${GPU_CHECK_BUDGET_S:-$([ -n "$DRY" ] && echo 3600 || echo 470)}"
START_S=$(date +%s)
DEADLINE_S=$((START_S + BUDGET_S))
# the work folder (demo scenario, replays, bench street) stays out of $OUT: only the few result files come back;
# the compiled kernels and lidar-fmu's cache go where they always do (a fresh machine compiles once, in the
# first step that needs them, and the later steps load them)
WORK="${GPU_CHECK_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")}"
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
: >"$OUT/steps.tsv"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
TEE_PID=$!

if [ -n "$DRY" ]; then
    export NUMBA_ENABLE_CUDASIM=1
    PY="${PYTHON:-$([ -x "$ROOT/.venv/bin/python" ] && echo "$ROOT/.venv/bin/python" || echo python3)}"
    FRAMES="${GPU_CHECK_FRAMES:-1}"
    REPEAT="${GPU_CHECK_REPEAT:-1}"
    CAP_SCALE=4  # the simulator: each step's time box four times the GPU's
    # one of the parity tests, to show the step runs them (all of them take the simulator a minute: the test suite
    # runs them so, in tests/test_cuda_sim.py)
    TESTS="${GPU_CHECK_TESTS:-tests/test_cuda_sim.py::test_world_rays_hit_what_embree_hits}"
    # a 3 × 7 ray sensor with a divergent beam (the dual-return part needs one): the simulator runs ~1k rays/s
    SENSOR="$ROOT/scripts/gpu_check_tiny_sensor.yaml"
    # the parity's demo street from its ground truth alone: no street and car meshes to load in each of its four
    # FMU replays (~3 s each); the real run replays the demo as it is
    PARITY_STREET=--ground-truth-only
    POSES=3
    SPHERE_TRIANGLES=20000
    # the ground-truth part's winding road: 1 km (its urban street builds 3.2 M triangles in 16 s at 10 km)
    ROAD_KM=1
    # the simulator takes about a second a frame whatever the rays: the CUDA bench runs the parts that are the
    # backend's own (the frame cast, sub-ray echoes, batched poses); the parity step has already driven the FMU on
    # cuda, and bench-cpu runs every part on the same code path with the other backend
    CUDA_SECTIONS="${GPU_CHECK_CUDA_SECTIONS:-cast,echoes,gpu}"
else
    PY="${PYTHON:-python3}"
    FRAMES="${GPU_CHECK_FRAMES:-10}"
    REPEAT="${GPU_CHECK_REPEAT:-5}"
    CAP_SCALE=1
    TESTS="${GPU_CHECK_TESTS:-}"  # (empty: the parity tests, below)
    SENSOR=""  # the demo's OS1-128 (and the bench's VLP-16 beside it)
    PARITY_STREET=""
    POSES=10000
    SPHERE_TRIANGLES=1000000
    ROAD_KM=10
    CUDA_SECTIONS="${GPU_CHECK_CUDA_SECTIONS:-cast,motion,echoes,gpu,step,rig,ground-truth}"
fi
# the steps run in child shells under `timeout`: they see these
export ROOT OUT WORK WHEELHOUSE PY FRAMES REPEAT SENSOR POSES SPHERE_TRIANGLES ROAD_KM PARITY_STREET
FAILED=""

log() { printf '%s\n' "gpu_check: $*"; }

record() {  # step status exit-code seconds
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$OUT/steps.tsv"
}

finish() {
    local rc=$?
    trap - EXIT
    log "report (scripts/gpu_report.py → $OUT/report.md)"
    python3 "$ROOT/scripts/gpu_report.py" "$OUT" || log "the report could not be written (exit $?)"
    if [ -n "$FAILED" ]; then
        log "FAILED at step '$FAILED' (steps.tsv and report.md say what ran); results in $OUT" >&2
        rc=1
    elif [ "$rc" -ne 0 ]; then
        log "FAILED outside a step (exit $rc); results in $OUT" >&2
    else
        log "all steps passed in $(($(date +%s) - START_S)) s; results in $OUT"
    fi
    [ -z "${GPU_CHECK_WORK:-}" ] && rm -rf "$WORK"
    exec >&- 2>&-  # the log complete before the caller reads it
    wait "$TEE_PID" 2>/dev/null || true
    exit "$rc"
}
trap finish EXIT

# step NAME CAP_S COMMAND...: run COMMAND under `timeout` (CAP_S, or what is left of the budget if less)
step() {
    local name=$1 cap=$2
    shift 2
    local left=$((DEADLINE_S - $(date +%s)))
    cap=$((cap * CAP_SCALE))
    local limit=$((cap < left ? cap : left))
    if [ "$limit" -lt 5 ]; then
        record "$name" "no time left" - 0
        log "step '$name' FAILED: the ${BUDGET_S} s budget is spent" >&2
        FAILED="${FAILED:-$name}"
        [ -n "$KEEP_GOING" ] && return 0 || exit 1
    fi
    log "=== step '$name' (time box ${limit} s) ==="
    local t0 rc
    t0=$(date +%s)
    set +e
    if declare -F "$1" >/dev/null; then  # one of the functions below, exported: in a child bash, as strict
        timeout --kill-after=10 "$limit" bash -c 'set -euo pipefail; "$@"' "$1" "$@"
    else
        timeout --kill-after=10 "$limit" "$@"
    fi
    rc=$?
    set -e
    local took=$(($(date +%s) - t0))
    if [ "$rc" -eq 0 ]; then
        record "$name" ok 0 "$took"
        log "step '$name' ok in ${took} s"
        return 0
    fi
    local why="exit $rc"
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && why="timed out after ${limit} s"
    record "$name" "failed ($why)" "$rc" "$took"
    log "step '$name' FAILED ($why)" >&2
    FAILED="${FAILED:-$name}"
    [ -n "$KEEP_GOING" ] && return 0 || exit 1
}

skip() {  # NAME WHY
    record "$1" "skipped ($2)" - 0
    log "step '$1' skipped: $2"
}

cuda_major() {  # the CUDA version the driver supports, from nvidia-smi's header (13 for driver 580 and later)
    nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\).*/\1/p' | head -n 1
}

environment() {
    {
        echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "host: $(uname -srm)"
        nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
        echo "driver supports CUDA $(cuda_major)"
        nvidia-smi
        echo "python: $("$PY" --version 2>&1) at $(command -v "$PY")"
    } | tee "$OUT/env.txt"
    [ -n "$(cuda_major)" ] || { echo "nvidia-smi names no CUDA version: no NVIDIA driver here?" >&2; return 1; }
}

install() {  # wheelhouse | pypi
    if [ "$1" = wheelhouse ]; then
        # no registry needed: what the machine's Python has (numba-cuda with the CUDA libraries, numpy, ...)
        # and the wheelhouse's wheels
        log "installing from the wheelhouse $WHEELHOUSE into the environment of $PY"
        local build
        build="$("$PY" -c 'import sys, tomllib; print(*tomllib.load(open(sys.argv[1], "rb"))["build-system"]["requires"])' \
            "$ROOT/pyproject.toml")"
        # shellcheck disable=SC2086  # the build backend's requirements, one word each
        "$PY" -m pip install -q --no-index --find-links "$WHEELHOUSE" $build
        if ! "$PY" -m pip install -q --no-index --find-links "$WHEELHOUSE" --no-build-isolation -e "$ROOT"; then
            # a requirement the machine's own package does not meet and the wheelhouse lacks (FMPy's cmake>=4:
            # only for building FMUs from sources): every wheel as it is, then pip check says what is off
            log "the resolver could not satisfy every requirement offline: installing the wheels without it"
            "$PY" -m pip install -q --no-index --no-deps "$WHEELHOUSE"/*.whl
            "$PY" -m pip install -q --no-index --no-deps --no-build-isolation -e "$ROOT"
            "$PY" -m pip check || log "pip check found the above (the smoke step shows whether it matters)"
        fi
    else
        local major extra=cu13
        major="$(cuda_major)"
        [ "${major:-13}" -lt 13 ] && extra=cu12
        log "installing from PyPI into $ROOT/.venv-gpu with numba-cuda[$extra] (the driver supports CUDA $major)"
        python3 -m venv "$ROOT/.venv-gpu"
        "$PY" -m pip install -q -e "$ROOT" "numba-cuda[$extra]>=0.20" pytest
    fi
    "$PY" -m pip list 2>/dev/null | grep -iE '^(numba|numba-cuda|cuda-bindings|cuda-core|numpy|llvmlite|embreex) ' \
        | tee -a "$OUT/env.txt"
    "$PY" -c "from numba import cuda" || { echo "numba-cuda is not importable from $PY" >&2; return 1; }
}

smoke() {
    "$PY" - <<'EOF' | tee -a "$OUT/env.txt"
import os

import numba
import numpy as np
from numba import cuda

import lidar_fmu
from lidar_fmu.geometry.scene import Scene
from lidar_fmu.raycast import make_backend

simulated = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
if not cuda.is_available():
    raise SystemExit("numba-cuda sees no GPU: " + ("" if simulated else "is the driver there? (nvidia-smi)"))


@cuda.jit
def twice(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= 2


x = cuda.to_device(np.arange(1000, dtype=np.float32))
twice[8, 128](x)
assert np.array_equal(x.copy_to_host(), 2 * np.arange(1000, dtype=np.float32)), "a trivial kernel computed wrong"
if simulated:
    print("device: Numba's CUDA simulator")
else:
    from lidar_fmu.raycast.cuda import device_name

    print(f"device: {device_name()}")
    backend = make_backend("auto", Scene()).name
    assert backend == "cuda", f"backend 'auto' picked {backend} on a machine with a GPU"
print(f"lidar-fmu {lidar_fmu.__version__}, numba {numba.__version__}, a kernel ran")
EOF
}

gpu_tests() {
    local args=("$@")
    if [ "${#args[@]}" -eq 0 ]; then
        # (the PTX test compiles for sm_90 without a GPU: CI runs it; here the kernels compile for the device)
        args=(tests/test_cuda_sim.py tests/test_scene_update.py -k "cuda and not kernels_compile_for_a_real_gpu")
    fi
    "$PY" -m pytest -q -p no:cacheprovider -rfEs "${args[@]}"
    local marked
    mapfile -t marked < <(grep -l "pytest.mark.gpu" tests/test_*.py || true)
    if [ "${#marked[@]}" -gt 0 ]; then
        "$PY" -m pytest -q -p no:cacheprovider -rfEs -m gpu "${marked[@]}"
    fi
}

bench() {  # BACKEND JSON SECTIONS
    local sizes=(--poses "$POSES" --sphere-triangles "$SPHERE_TRIANGLES" --road-km "$ROAD_KM")
    [ -n "$SENSOR" ] && sizes+=(--sensor "$SENSOR")
    "$PY" -m lidar_fmu bench --backend "$1" --json "$2" --sections "$3" --repeat "$REPEAT" --frames "$((FRAMES + 1))" \
        --scenes street,sphere --work-dir "$WORK/bench" "${sizes[@]}"
}

parity() {
    local sizes=()
    [ -n "$SENSOR" ] && sizes+=(--sensor "$SENSOR")
    [ -n "$PARITY_STREET" ] && sizes+=("$PARITY_STREET")
    "$PY" "$ROOT/scripts/gpu_parity.py" --out "$OUT/parity.json" --frames "$FRAMES" --work "$WORK/parity" \
        ${sizes[@]+"${sizes[@]}"}
}

export -f log cuda_major environment install smoke gpu_tests bench parity

log "start $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${BUDGET_S} s, ${DRY:+dry run (CUDA simulator), }results in $OUT"
if [ -n "$DRY" ]; then
    skip environment "dry run: no nvidia-smi"
    echo "dry run: Numba's CUDA simulator, $("$PY" --version 2>&1) at $PY" >"$OUT/env.txt"
    skip install "dry run: the interpreter's own environment"
else
    step environment 20 environment
    if [ -d "$WHEELHOUSE" ] && ls "$WHEELHOUSE"/*.whl >/dev/null 2>&1; then
        step install 150 install wheelhouse
    else
        PY="$ROOT/.venv-gpu/bin/python"
        export PY
        step install 300 install pypi
    fi
fi
step smoke 120 smoke
# shellcheck disable=SC2086  # TESTS: pytest arguments, split on spaces
step tests 180 gpu_tests $TESTS
step parity 150 parity
step bench-cuda 150 bench cuda "$OUT/bench_cuda.json" "$CUDA_SECTIONS"
step bench-cpu 120 bench embree "$OUT/bench_embree.json" cast,motion,echoes,step,rig,ground-truth
