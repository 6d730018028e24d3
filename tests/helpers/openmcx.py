"""Eclipse OpenMCx for the SSP tests (tests/test_ssp.py, tests/test_ssp_then.py): where it is found, and a run of an
SSP package in it, unpacked (as OpenMCx takes it) and in docs/fmu.md's environment for non-Python masters."""
import os
import pathlib
import shutil
import subprocess
import zipfile

from helpers.c_master import master_env

REPO = pathlib.Path(__file__).resolve().parent.parent.parent


def find_openmcx() -> str | None:
    """The OpenMCx binary: $OPENMCX, else `openmcx` on PATH, else scripts/build_openmcx.sh's default build."""
    for candidate in (os.environ.get("OPENMCX"), shutil.which("openmcx"), REPO / "build" / "openmcx" / "openmcx"):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


OPENMCX = find_openmcx()
#: why an OpenMCx test is skipped where OPENMCX is None
NO_OPENMCX = ("OpenMCx not found: set OPENMCX to its binary or put openmcx on PATH (scripts/build_openmcx.sh builds "
              "it: docs/fmu.md#ssp-a-ready-system-for-openmcx-and-other-ssp-masters)")


def unpacked(ssp, folder: pathlib.Path) -> pathlib.Path:
    with zipfile.ZipFile(ssp) as archive:
        archive.extractall(folder)
    return folder


def run_openmcx(ssp, folder: pathlib.Path) -> pathlib.Path:
    """OpenMCx run on the package ``ssp`` unpacked into ``folder``, its working directory (where the writer's trace
    lands) → ``folder``; fails the test with the end of OpenMCx's output unless it says it finished."""
    assert OPENMCX is not None
    unpacked(ssp, folder)
    run = subprocess.run([OPENMCX, "SystemStructure.ssd"], cwd=folder, env=master_env(), capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0 and "Program finished successfully" in run.stdout, (run.stdout + run.stderr)[-3000:]
    return folder
