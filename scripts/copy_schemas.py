#!/usr/bin/env python3
"""Copy the XML schemas the tests check the FMU against into tests/data/schemas/, from clones of their repositories.

    python3 scripts/copy_schemas.py SSP_LS_TRACEABILITY SSP_STANDARD OSMP [OUT_DIR]

Each argument is a git clone (a bare one does) of, in turn, github.com/modelica/ssp-ls-traceability,
github.com/modelica/ssp-standard and github.com/OpenSimulationInterface/osi-sensor-model-packaging. The files are
taken at the commits below, byte for byte, and keep their places relative to each other, so that the schemas'
own ``schemaLocation`` imports resolve (tests/data/schemas/NOTICE.md says what each is and its licence).
"""
import pathlib
import subprocess
import sys

#: (repository argument index, commit, path in the repository, path under OUT_DIR)
FILES = [
    (0, "b277def", "SRMD.xsd", "srmd/SRMD.xsd"),
    (0, "b277def", "STC.xsd", "srmd/STC.xsd"),
    (0, "b277def", "LICENSE.txt", "srmd/LICENSE.txt"),
    # ssp-ls-traceability's submodule ssp-standard at the commit it pins
    (1, "2ad515ae5ae546950bd6e6825eafbf908b51e515", "schema/SystemStructureCommon.xsd",
     "srmd/ssp-standard/schema/SystemStructureCommon.xsd"),
    (2, "9fe6d0b", "osmp.xsd", "osmp/osmp.xsd"),
    (2, "9fe6d0b", "LICENSE", "osmp/LICENSE"),
]


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__)
        return 2
    repositories = argv[:3]
    out = pathlib.Path(argv[3] if len(argv) > 3 else pathlib.Path(__file__).parent.parent / "tests/data/schemas")
    for index, commit, path, target in FILES:
        data = subprocess.run(["git", "-C", repositories[index], "show", f"{commit}:{path}"], check=True,
                              capture_output=True).stdout
        destination = out / target
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(data)
        print(f"{destination} ({len(data)} bytes) ← {repositories[index]} {commit}:{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
