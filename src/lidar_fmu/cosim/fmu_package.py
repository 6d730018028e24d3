"""Package the FMU slave with the ``lidar_fmu`` package into ``LidarSensor.fmu``.

The FMU's ``resources/`` holds the slave script, this package (so the FMU
does not depend on a source checkout) and the OSMP annotation templates.
Third-party packages (numpy, embreex, numba, osi3, …) come from the Python
that runs the FMU.

The slave and the templates are edited in the repository's ``fmu/`` and
``modelDescription/``. A regular install (``pip install .``, a wheel) carries
them as ``lidar_fmu/_fmu/`` and ``lidar_fmu/_fmu/modelDescription/``
(``package-dir`` in pyproject.toml maps the two folders there); a source
checkout, editable install included, reads them where they are.
"""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
import zipfile
from pathlib import Path

from ..cache import cache_dir

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the lidar_fmu package (this module is in cosim/)
_PACKAGED = PACKAGE_DIR / "_fmu"
if _PACKAGED.is_dir():  # installed: no repository around
    REPO_ROOT = None
    SLAVE_SCRIPT = _PACKAGED / "LidarSensor.py"
    STATUS_SHIM = _PACKAGED / "status_shim.c"
    ANNOTATIONS_DIR = _PACKAGED / "modelDescription"
    # one FMU per installation, in the user cache: sources_newer_than compares it with this installation's files
    DEFAULT_FMU = cache_dir("fmu", hashlib.sha256(str(PACKAGE_DIR).encode()).hexdigest()[:12], "LidarSensor.fmu")
else:  # a source checkout
    REPO_ROOT = PACKAGE_DIR.parent.parent
    SLAVE_SCRIPT = REPO_ROOT / "fmu" / "LidarSensor.py"
    STATUS_SHIM = REPO_ROOT / "fmu" / "status_shim.c"
    ANNOTATIONS_DIR = REPO_ROOT / "modelDescription"
    DEFAULT_FMU = REPO_ROOT / "dist" / "LidarSensor.fmu"
#: the slave's helper modules beside it (pythonfmu workaround, package cache, OSMP annotations)
SLAVE_HELPERS = sorted(SLAVE_SCRIPT.parent.glob("lidar_sensor_*.py"))


def _source_files():
    """Every file that goes into the FMU (the package, the templates, the slave and its helpers, the shim), caches aside."""
    for root in (PACKAGE_DIR, ANNOTATIONS_DIR, SLAVE_SCRIPT, *SLAVE_HELPERS, STATUS_SHIM):
        files = [root] if root.is_file() else sorted(root.rglob("*"))
        yield from (f for f in files if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc")


def sources_newer_than(fmu_path: Path) -> bool:
    """Does any source that goes into the FMU post-date ``fmu_path``?"""
    fmu_path = Path(fmu_path)
    if not fmu_path.exists():
        return True
    built = fmu_path.stat().st_mtime
    return any(f.stat().st_mtime > built for f in _source_files())


def content_hash() -> str:
    """SHA-256 (hex) of what goes into the FMU: every source file's place and bytes, and pythonfmu's version."""
    import pythonfmu

    digest = hashlib.sha256(f"pythonfmu {pythonfmu.__version__}".encode())
    top = PACKAGE_DIR.parent.parent  # the checkout (src/, fmu/, modelDescription/) or site-packages' parent
    for path in _source_files():
        digest.update(f"\0{os.path.relpath(path, top)}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cached_fmu() -> Path:
    """The FMU of these sources in the user cache, named by their content hash; built once when missing.

    Several processes may ask at once (the workers of a sweep): one builds
    under a file lock while the others wait, and the FMU appears by an atomic
    rename, so nobody reads a half-written one.
    """
    path = cache_dir("fmu", f"sha256-{content_hash()[:16]}", "LidarSensor.fmu")
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / "build.lock", "w") as lock:
        _lock_file(lock)
        if not path.is_file():
            staged = build_fmu(path.with_name(f"LidarSensor.{os.getpid()}.fmu"))
            os.replace(staged, path)
    return path


def _lock_file(handle) -> None:
    """An exclusive lock on an open file, held until it is closed (no-op where ``fcntl`` is missing: Windows)."""
    try:
        import fcntl
    except ImportError:  # the rename alone keeps the FMU whole; two processes may just both build it
        return
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)


def _package_files(folder, names):
    """What of the package goes into ``resources/lidar_fmu``: sources and data, no caches, not ``_fmu``."""
    ignored = set(shutil.ignore_patterns("__pycache__", "*.pyc")(folder, names))
    if Path(folder) == PACKAGE_DIR:
        ignored.add("_fmu")  # the slave and the templates have their own places in resources/
    return ignored


def build_fmu(dest: str | os.PathLike = DEFAULT_FMU, script: Path = SLAVE_SCRIPT, resources=()) -> Path:
    """Build the FMU (FMI 2.0 co-simulation, no external tool needed) and return its path.

    ``script``: the slave, the lidar's or another of ``fmu/`` (an SSP system's trace player and writer,
    :mod:`~lidar_fmu.cosim.ssp`), which gets the same package, templates and helpers; ``resources``: more files
    and folders for its ``resources/``.
    """
    from pythonfmu.builder import FmuBuilder

    if not script.is_file():
        raise FileNotFoundError(f"FMU slave {script} not found: lidar-fmu is installed incompletely")
    dest = Path(dest).resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lidar_fmu_build_") as staging:
        # copy without caches so the FMU carries sources only
        package = Path(staging) / "lidar_fmu"
        shutil.copytree(PACKAGE_DIR, package, ignore=_package_files)
        annotations = Path(staging) / "modelDescription"
        shutil.copytree(ANNOTATIONS_DIR, annotations, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        path = FmuBuilder.build_FMU(
            script, dest=dest, project_files=[package, annotations, *SLAVE_HELPERS, *map(Path, resources)],
            needsExecutionTool="false",
        )
        put_status_shim(Path(path), Path(staging))
    with zipfile.ZipFile(path) as built:
        if not any(name.startswith("binaries/") for name in built.namelist()):
            import pythonfmu

            raise RuntimeError(f"the FMU {path} has no binaries: pythonfmu was imported from {pythonfmu.__file__}, "
                               "a copy without them (an FMU run in this process shadows the installed pythonfmu; "
                               "build before running one)")
    return Path(path)


#: what the FMU's Linux binary is when no C compiler could build the status shim
SHIM_FALLBACK = ("the FMU's Linux binary is pythonfmu's own, which answers a master's misuse with fmi2OK (the "
                 "refusal is still logged)")
SHIM_MISSING = f"no C compiler (cc) found: {SHIM_FALLBACK}; install gcc and rebuild for fmi2Error"


def put_status_shim(fmu_path: Path, work_dir: Path) -> bool:
    """Put the status shim (``fmu/status_shim.c``) in front of pythonfmu's Linux binary in ``fmu_path``.

    pythonfmu 0.7.0 can only answer fmi2OK or fmi2Fatal; the shim answers
    fmi2Error where the slave refused a call (see the C file). Compiled here
    with the system's C compiler; without one the FMU keeps pythonfmu's
    binary and a warning says so (:data:`SHIM_MISSING`). → whether the shim
    went in.
    """
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        # pythonfmu ships an x86-64 Linux binary: a shim built here for another machine could not load it
        warnings.warn(f"the FMU's status shim is built on x86-64 Linux only (this is {platform.system()} "
                      f"{platform.machine()}): {SHIM_FALLBACK}", stacklevel=3)
        return False
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        warnings.warn(SHIM_MISSING, stacklevel=3)
        return False
    shim = work_dir / "status_shim.so"
    built = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-o", str(shim),
                            str(STATUS_SHIM), "-ldl", "-lpthread"], capture_output=True, text=True)
    if built.returncode != 0:
        warnings.warn(f"{compiler} could not build the FMU's status shim ({built.stderr.strip()[-300:]}): "
                      f"{SHIM_FALLBACK}", stacklevel=3)
        return False
    rebuilt = fmu_path.with_suffix(".shim.tmp")
    with zipfile.ZipFile(fmu_path) as source, zipfile.ZipFile(rebuilt, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename.startswith("binaries/linux64/") and item.filename.endswith(".so"):
                inner = zipfile.ZipInfo(item.filename[:-3] + ".pythonfmu.so", item.date_time)  # beside the shim
                inner.external_attr, inner.compress_type = item.external_attr, zipfile.ZIP_DEFLATED
                target.writestr(inner, data)
                item.compress_type = zipfile.ZIP_DEFLATED
                target.writestr(item, shim.read_bytes())
            else:
                target.writestr(item, data)
    os.replace(rebuilt, fmu_path)
    return True


def validate(fmu_path) -> list[str]:
    """Problems FMPy's validator finds in the FMU's model description (empty = valid)."""
    from fmpy.validation import validate_fmu

    return list(validate_fmu(str(fmu_path)))


# Run in a Python of its own that has not imported lidar_fmu, so that the FMU imports its per-user package copy as
# a master's process does (fmu/lidar_sensor_package.py) and its kernels compile into that copy's cache.
_LOAD_AS_A_MASTER = r"""
import shutil, sys, tempfile
from fmpy import extract, read_model_description
from fmpy.fmi2 import FMU2Slave, defaultCallbacks, fmi2CallbackFunctions, fmi2CallbackLoggerTYPE

path = sys.argv[1]
folder = tempfile.mkdtemp(prefix="lidar_fmu_warm_")
try:
    extract(path, unzipdir=folder)
    description = read_model_description(path)
    slave = FMU2Slave(guid=description.guid, unzipDirectory=folder, instanceName="warm-up",
                      modelIdentifier=description.coSimulation.modelIdentifier)
    def log(component, instance, status, category, message):
        print(f"{status} {message.decode('utf-8', 'replace')}", flush=True)
    logger = fmi2CallbackLoggerTYPE(log)
    callbacks = fmi2CallbackFunctions()
    callbacks.logger = logger
    callbacks.allocateMemory, callbacks.freeMemory = defaultCallbacks.allocateMemory, defaultCallbacks.freeMemory
    slave.instantiate(callbacks=callbacks, loggingOn=True)
    slave.setupExperiment(startTime=0.0)
    slave.enterInitializationMode()
    slave.exitInitializationMode()
    slave.terminate()
    slave.freeInstance()
finally:
    shutil.rmtree(folder, ignore_errors=True)
"""


def warm_kernel_cache(fmu_path) -> str:
    """Initialize the FMU once as a master does, in a fresh Python, so that a machine's first master run finds its
    kernels in Numba's cache (the initialization compiles them: lidar_fmu.cosim.warm_up) → the FMU's line saying
    what that took. :class:`~lidar_fmu.errors.UserError` with what the FMU logged when it cannot start."""
    import sys

    from ..errors import UserError

    run = subprocess.run([sys.executable, "-c", _LOAD_AS_A_MASTER, str(fmu_path)], capture_output=True, text=True)
    lines = [line.split(" ", 1)[-1] for line in run.stdout.splitlines()]
    said = [line for line in lines if "kernels" in line]
    if run.returncode != 0 or not said:
        why = " ".join((run.stderr.strip().splitlines() or lines or ["no output"])[-1:])
        raise UserError(f"{fmu_path}: its first initialization failed: {why}")
    return said[-1]
