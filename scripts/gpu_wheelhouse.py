"""Wheels of the project's dependencies for a GPU machine that reaches no package registry (run where pip does).

    python3 scripts/gpu_wheelhouse.py [--dest .whl] [--python-version 3.12] [--have scripts/gpu_image_packages.txt]

``scripts/gpu_check.sh`` installs the project on the GPU machine with
``pip install --no-index --find-links .whl``: pip takes what that machine's
Python already has (its image brings numpy, Numba, numba-cuda with the CUDA
libraries, matplotlib, pytest, ...) and the rest from these wheels. So this
script resolves the project's runtime dependencies for the GPU machine's
Python (CPython ``--python-version`` on x86-64 manylinux, binary wheels only),
downloads them, and keeps in ``--dest`` every wheel except those of packages
the ``--have`` list names that weigh more than ``--keep-below-mib``: the small
ones stay, so pip can still take a newer one where the image's is too old, and
so do the build backend's (setuptools, wheel: the project is installed
without build isolation, from these). It
fails if the kept wheels weigh more than ``--max-mib`` (what a device call
carries is limited: the working tree and the wheels together). ``--dest`` is
emptied of wheels first and gets ``MANIFEST.txt``, the list of what was kept
and left out.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
#: manylinux tags pip must be told one by one to accept for another machine (glibc 2.5 … 2.35, and their aliases)
PLATFORMS = ["manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64",
             *(f"manylinux_2_{n}_x86_64" for n in (5, 12, 17, 24, 26, 27, 28, 31, 34, 35))]


def normalized(name: str) -> str:
    """A project name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pyproject() -> dict:
    """The checkout's pyproject.toml."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        sys.exit("gpu_wheelhouse: needs Python 3.11 or later (tomllib) to read pyproject.toml")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def image_packages(path: str) -> set[str]:
    """The package names of ``path``: one a line, '#' starts a comment."""
    with open(path, encoding="utf-8") as f:
        return {normalized(line.split("#", 1)[0].strip()) for line in f if line.split("#", 1)[0].strip()}


def target_options(python_version: str) -> list[str]:
    return ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
            *(option for tag in PLATFORMS for option in ("--platform", tag))]


def pip(*args: str) -> None:
    command = [sys.executable, "-m", "pip", *args]
    done = subprocess.run(command, text=True, capture_output=True, check=False)
    if done.returncode:
        sys.exit(f"gpu_wheelhouse: pip {args[0]} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", default=os.path.join(ROOT, ".whl"), help="wheel folder (default: .whl)")
    parser.add_argument("--python-version", default="3.12", help="the GPU machine's Python (default 3.12)")
    parser.add_argument("--have", default=os.path.join(HERE, "gpu_image_packages.txt"),
                        help="packages the GPU machine's Python already has (default: scripts/gpu_image_packages.txt)")
    parser.add_argument("--keep-below-mib", type=float, default=1.0,
                        help="keep a wheel the machine has when it is smaller than this (default 1 MiB)")
    parser.add_argument("--max-mib", type=float, default=48.0, help="fail above this many MiB of wheels (default 48)")
    args = parser.parse_args(argv)
    have = image_packages(args.have)
    project = pyproject()
    # the build backend's own requirements always travel: the install builds the project without isolation
    build = {normalized(re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0]) for r in project["build-system"]["requires"]}
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        pip("install", "--quiet", "--dry-run", "--ignore-installed", "--report", report, "--target",
            os.path.join(tmp, "target"), *target_options(args.python_version), *project["project"]["dependencies"],
            *project["build-system"]["requires"])
        with open(report, encoding="utf-8") as f:
            pins = [f"{item['metadata']['name']}=={item['metadata']['version']}" for item in json.load(f)["install"]]
        every = os.path.join(tmp, "every")
        pip("download", "--quiet", "--no-deps", "--dest", every, *target_options(args.python_version), *pins)
        os.makedirs(args.dest, exist_ok=True)
        for old in os.listdir(args.dest):
            if old.endswith(".whl"):
                os.remove(os.path.join(args.dest, old))
        kept, left = [], []
        for wheel in sorted(os.listdir(every)):
            size_mib = os.path.getsize(os.path.join(every, wheel)) / 2**20
            name = normalized(wheel.split("-", 1)[0])
            if name in have and size_mib >= args.keep_below_mib and name not in build:
                left.append((wheel, size_mib))
            else:
                shutil.copy2(os.path.join(every, wheel), args.dest)
                kept.append((wheel, size_mib))
    total = sum(size for _, size in kept)
    with open(os.path.join(args.dest, "MANIFEST.txt"), "w", encoding="utf-8") as f:
        f.write(f"# wheels for CPython {args.python_version}, x86-64 manylinux: {len(kept)} kept, {total:.1f} MiB\n")
        f.writelines(f"{wheel}\t{size:.2f} MiB\n" for wheel, size in kept)
        f.write(f"# left out: the GPU machine has them ({os.path.relpath(args.have, ROOT)})\n")
        f.writelines(f"# {wheel}\t{size:.2f} MiB\n" for wheel, size in left)
    print(f"gpu_wheelhouse: {len(kept)} wheels, {total:.1f} MiB in {args.dest}; left out {len(left)} the GPU "
          f"machine has ({', '.join(w.split('-', 1)[0] for w, _ in left)})")
    if total > args.max_mib:
        print(f"gpu_wheelhouse: {total:.1f} MiB of wheels is more than --max-mib {args.max_mib:g}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
