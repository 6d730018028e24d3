#!/usr/bin/env bash
# Build Eclipse OpenMCx (the co-simulation master the openMSL credibility process runs SSP systems in) from source,
# for tests/test_ssp.py and for running `lidar-fmu build --ssp` packages by hand (docs/fmu.md#ssp-a-ready-system-for-openmcx-and-other-ssp-masters).
#
#   scripts/build_openmcx.sh [PREFIX]        # → PREFIX/openmcx (default PREFIX: build/openmcx)
#   export OPENMCX=PREFIX/openmcx            # what tests/test_ssp.py runs (else `openmcx` on PATH)
#
# Needs: gcc/g++ ≥ 8, make, CMake 3.x (≥ 3.14; not 4), git, python3, and Debian's libxml2-dev and zlib1g-dev
# (`apt-get install -y build-essential cmake git libxml2-dev zlib1g-dev`).
#
# Sources: OpenMCx at OPENMCX_COMMIT and the fmi-library commit OpenMCx's own CMake pins (FMIL_COMMIT, which its
# cmake/fmi-library/CMakeLists.txt clones at configure time), both cloned from GitHub; or, on a machine without
# GitHub, from local clones or unpacked snapshots given as OPENMCX_SRC and FMIL_SRC (a git clone is checked out
# at the pinned commit; a plain folder is copied as it is).
set -euo pipefail

PREFIX="$(realpath -m "${1:-build/openmcx}")"
OPENMCX_COMMIT="${OPENMCX_COMMIT:-6e5e7bfc14bc4fe00fb2eeb392013f3942d3b0d4}"  # eclipse/openmcx main, 2023-07-28
FMIL_COMMIT="d5ce0b923dd42fbc59b61edb17e837cd148e9501"  # pinned by that commit's cmake/fmi-library/CMakeLists.txt
JOBS="${JOBS:-$(nproc)}"
SRC="$PREFIX/src"

for tool in gcc g++ make git python3; do
    command -v "$tool" >/dev/null || { echo "build_openmcx.sh: $tool not found (see this script's header)" >&2; exit 2; }
done

# CMake 3.14 … 3.x: the fmi-library commit OpenMCx pins reads targets' LOCATION (policy CMP0026), which CMake 4 no
# longer allows; a pip-installed CMake 4 in front of the system's 3.x on PATH is passed over for /usr/bin/cmake
cmake_major() { "$1" --version 2>/dev/null | sed -n 's/^cmake version \([0-9]*\)\..*/\1/p'; }
if [ -z "${CMAKE:-}" ]; then
    for candidate in "$(command -v cmake || true)" /usr/bin/cmake /usr/local/bin/cmake; do
        major="$(cmake_major "$candidate")"
        if [ -n "$major" ] && [ "$major" -eq 3 ]; then CMAKE="$candidate"; break; fi
    done
fi
[ -n "${CMAKE:-}" ] || { echo "build_openmcx.sh: no CMake 3.x found (CMake 4 cannot configure fmi-library 2.x;" \
    "install Debian's: apt-get install -y cmake, or set CMAKE=/path/to/cmake-3.x)" >&2; exit 2; }

# copy_source NAME URL COMMIT LOCAL DEST: DEST gets the sources at COMMIT, from LOCAL (a clone or a folder) or URL
copy_source() {
    local name="$1" url="$2" commit="$3" local_src="$4" dest="$5"
    rm -rf "$dest"
    if [ -z "$local_src" ]; then
        git clone --quiet "$url" "$dest"
        git -C "$dest" checkout --quiet "$commit"
    elif git -C "$local_src" rev-parse --git-dir >/dev/null 2>&1; then
        mkdir -p "$dest"
        git -C "$local_src" archive "$commit" | tar -x -C "$dest"
    else
        echo "build_openmcx.sh: $name from the folder $local_src as it is (not checked against $commit)" >&2
        cp -a "$local_src" "$dest"
    fi
}

mkdir -p "$PREFIX"
copy_source OpenMCx https://github.com/eclipse/openmcx.git "$OPENMCX_COMMIT" "${OPENMCX_SRC:-}" "$SRC"
# OpenMCx's CMake clones fmi-library into extern/ unless it is there already
copy_source fmi-library https://github.com/modelon-community/fmi-library.git "$FMIL_COMMIT" "${FMIL_SRC:-}" \
    "$SRC/extern/fmi-library"

# Release build; multithreading and result files as OpenMCx's own build.sh has them (the defaults)
"$CMAKE" -S "$SRC" -B "$SRC/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX/install" \
    >"$PREFIX/cmake.log"
make -C "$SRC/build" -j"$JOBS" install >"$PREFIX/make.log" 2>&1 || { tail -30 "$PREFIX/make.log" >&2; exit 1; }
ln -sf "$PREFIX/install/openmcx" "$PREFIX/openmcx"
{ "$PREFIX/openmcx" 2>&1 || true; } | grep -q "Usage:" || { echo "build_openmcx.sh: $PREFIX/openmcx does not run" >&2; exit 1; }
echo "built $PREFIX/openmcx  (export OPENMCX=$PREFIX/openmcx)"
