#!/usr/bin/env bash
# Copy the SSP 1.0 XML schemas tests/test_ssp.py validates against into tests/data/ssp/, unchanged, from the
# Modelica Association's ssp-standard repository at tag v1.0.1 (the SSP 1.0.1 release; the schemas are version 1.0).
#   scripts/ssp_schemas.sh [CLONE]   (CLONE: a clone of github.com/modelica/ssp-standard; default: cloned here)
set -euo pipefail
DEST="$(dirname "$0")/../tests/data/ssp"
CLONE="${1:-}"
if [ -z "$CLONE" ]; then
    CLONE="$(mktemp -d)/ssp-standard"
    git clone --quiet https://github.com/modelica/ssp-standard.git "$CLONE"
fi
mkdir -p "$DEST"
for schema in SystemStructureCommon SystemStructureDescription SystemStructureParameterValues; do
    git -C "$CLONE" show "v1.0.1:schema/$schema.xsd" >"$DEST/$schema.xsd"
done
# the licence of the schemas: the BSD 2-Clause part of the repository's LICENSE.txt (its documents are CC-BY-SA)
git -C "$CLONE" show v1.0.1:LICENSE.txt | sed -n '1,/ADVISED OF THE POSSIBILITY OF SUCH DAMAGE\./p' >"$DEST/LICENSE"
