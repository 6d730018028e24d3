"""Package the FMU slave with the ``lidar_fmu`` package into ``LidarSensor.fmu`` (FMI 2.0 or FMI 3.0).

The FMU's ``resources/`` holds the slave script, this package (so the FMU
does not depend on a source checkout) and the OSMP annotation templates;
``documentation/`` the FMU's documents (``docs/fmu.md``, ``docs/validation.md``);
``extra/org.ssp-standard.ssp-traceability.srmd/resourceMetaData.srmd`` its
SRMD (:mod:`lidar_fmu.cosim.srmd`). Third-party packages (numpy, embreex,
numba, osi3, …) come from the Python that runs the FMU.

The FMI 2.0 slave is built with pythonfmu, the FMI 3.0 one with pythonfmu3,
both from the same model (``fmu/lidar_sensor_slave.py``). The slaves and the
templates are edited in the repository's ``fmu/`` and ``modelDescription/``. A
regular install (``pip install .``, a wheel) carries them as ``lidar_fmu/_fmu/``
and ``lidar_fmu/_fmu/modelDescription/``, and the documents as
``lidar_fmu/_fmu/documentation/`` (``package-dir`` in pyproject.toml maps the
folders there); a source checkout, editable install included, reads them where
they are.
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
from ..errors import UserError
from .srmd import DOCUMENTS  # the documents each FMU carries in documentation/, which its SRMD links

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the lidar_fmu package (this module is in cosim/)
_PACKAGED = PACKAGE_DIR / "_fmu"
if _PACKAGED.is_dir():  # installed: no repository around
    REPO_ROOT = None
    SLAVE_DIR = _PACKAGED
    ANNOTATIONS_DIR = _PACKAGED / "modelDescription"
    DOCS_DIR = _PACKAGED / "documentation"
    # one FMU per installation, in the user cache: sources_newer_than compares it with this installation's files
    DEFAULT_FMU = cache_dir("fmu", hashlib.sha256(str(PACKAGE_DIR).encode()).hexdigest()[:12], "LidarSensor.fmu")
else:  # a source checkout
    REPO_ROOT = PACKAGE_DIR.parent.parent
    SLAVE_DIR = REPO_ROOT / "fmu"
    ANNOTATIONS_DIR = REPO_ROOT / "modelDescription"
    DOCS_DIR = REPO_ROOT / "docs"
    DEFAULT_FMU = REPO_ROOT / "dist" / "LidarSensor.fmu"
if os.environ.get("LIDAR_FMU_DIST"):  # another folder for the default FMUs (a read-only checkout, a test session)
    DEFAULT_FMU = Path(os.environ["LIDAR_FMU_DIST"]).resolve() / "LidarSensor.fmu"
#: the FMI 3.0 FMU beside the FMI 2.0 one (its model identifier is LidarSensor too)
DEFAULT_FMU3 = DEFAULT_FMU.with_name("LidarSensor-fmi3.fmu")
#: per FMI version: the slave script and the C status shim in front of the library's binary
SLAVE_SCRIPTS = {2: SLAVE_DIR / "LidarSensor.py", 3: SLAVE_DIR / "LidarSensorFmi3.py"}
STATUS_SHIMS = {2: SLAVE_DIR / "status_shim.c", 3: SLAVE_DIR / "status_shim3.c"}
STATUS_SHIM_HEADER = SLAVE_DIR / "status_shim_inner.h"  # both shims' way to the library they stand before
#: the slaves' helper modules beside them (the shared model slave, pythonfmu workaround, package cache, OSMP)
SLAVE_HELPERS = sorted(SLAVE_DIR.glob("lidar_sensor_*.py"))


def _source_files():
    """Every file that goes into the FMU (the package, the templates, the slaves and their helpers, the shims, the
    documents), caches aside."""
    documents = [DOCS_DIR / name for name in DOCUMENTS]
    for root in (PACKAGE_DIR, ANNOTATIONS_DIR, *SLAVE_SCRIPTS.values(), *SLAVE_HELPERS, *STATUS_SHIMS.values(),
                 STATUS_SHIM_HEADER, *documents):
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


def build_fmu(dest: str | os.PathLike = DEFAULT_FMU, script: Path | None = None, resources=(),
              fmi_version: int = 2) -> Path:
    """Build the FMU (co-simulation, no external tool needed) and return its path: FMI 2.0 (pythonfmu) or, with
    ``fmi_version=3``, FMI 3.0 (pythonfmu3), the same model either way.

    ``script``: the slave, the lidar's (default) or another of ``fmu/`` (an SSP system's trace player and writer,
    :mod:`~lidar_fmu.cosim.ssp`, FMI 2.0), which gets the same package, templates and helpers; ``resources``: more
    files and folders for its ``resources/``. The lidar's FMU also carries its documents and its SRMD.
    """
    if fmi_version not in SLAVE_SCRIPTS:
        raise ValueError(f"fmi_version must be 2 or 3, not {fmi_version!r}")
    script = SLAVE_SCRIPTS[fmi_version] if script is None else Path(script)
    lidar = script in SLAVE_SCRIPTS.values()
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
        documentation = _documentation(Path(staging) / "documentation", fmi_version) if lidar else None
        project_files = [package, annotations, *SLAVE_HELPERS, *map(Path, resources)]
        if fmi_version == 2:
            from pythonfmu.builder import FmuBuilder

            path = FmuBuilder.build_FMU(script, dest=dest, project_files=project_files,
                                        documentation_folder=documentation, needsExecutionTool="false")
        else:
            from pythonfmu3.builder import FmuBuilder as Fmu3Builder

            # pythonfmu3 builds <model identifier>.fmu into a folder: built apart, then moved to dest
            built = Fmu3Builder.build_FMU(script, dest=Path(staging) / "built", project_files=project_files,
                                          documentation_folder=documentation, needsExecutionTool="false",
                                          canHandleVariableCommunicationStepSize="true")
            path = Path(shutil.move(str(built), str(dest)))
        shimmed = put_status_shim(Path(path), Path(staging), fmi_version)
        if fmi_version == 3 and not shimmed:
            Path(path).unlink()
            raise UserError("the FMI 3.0 FMU needs its status shim, built on x86-64 Linux with a C compiler (cc or "
                            "gcc): pythonfmu3's own binary has no Binary variables, so OSMP's SensorView and SensorData "
                            "could not pass")
        if lidar:
            put_resource_meta_data(Path(path))
    with zipfile.ZipFile(path) as built_fmu:
        if not any(name.startswith("binaries/") for name in built_fmu.namelist()):
            library = "pythonfmu" if fmi_version == 2 else "pythonfmu3"
            module = __import__(library)
            raise RuntimeError(f"the FMU {path} has no binaries: {library} was imported from {module.__file__}, "
                               "a copy without them (an FMU run in this process shadows the installed "
                               f"{library}; build before running one)")
    return Path(path)


def _documentation(folder: Path, fmi_version: int) -> Path:
    """The FMU's documentation/: the documents (:data:`DOCUMENTS`) and the entry page FMI names (FMI 2.0:
    ``_main.html``, FMI 3.0: ``index.html``) linking them."""
    folder.mkdir()
    links = []
    for name in DOCUMENTS:
        source = DOCS_DIR / name
        if source.is_file():
            shutil.copy2(source, folder / name)
            links.append(f'<li><a href="{name}">{name}</a></li>')
    from .. import __version__

    page = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>LidarSensor (lidar-fmu)</title></head>"
            f"<body><h1>LidarSensor, lidar-fmu {__version__}</h1><ul>{''.join(links)}</ul></body></html>\n")
    (folder / ("_main.html" if fmi_version == 2 else "index.html")).write_text(page, encoding="utf-8")
    return folder


def put_resource_meta_data(fmu_path: Path) -> None:
    """Add the FMU's SRMD (:mod:`lidar_fmu.cosim.srmd`), written from its model description, to ``fmu_path``."""
    from .srmd import SRMD_ENTRY, resource_meta_data

    with zipfile.ZipFile(fmu_path) as fmu:
        srmd = resource_meta_data(fmu.read("modelDescription.xml"))
    with zipfile.ZipFile(fmu_path, "a", zipfile.ZIP_DEFLATED) as fmu:
        fmu.writestr(SRMD_ENTRY, srmd)


#: what the FMU's Linux binary is when no C compiler could build the status shim
SHIM_FALLBACK = ("the FMU's Linux binary is pythonfmu's own, which answers a master's misuse with OK (the "
                 "refusal is still logged), and an FMI 3.0 FMU's has no Binary variables")
SHIM_MISSING = f"no C compiler (cc) found: {SHIM_FALLBACK}; install gcc and rebuild for the Error status"


#: per FMI version: the folder of the Linux binary, and what pythonfmu's own is called beside the shim
LINUX_BINARIES = {2: ("binaries/linux64/", ".pythonfmu.so"), 3: ("binaries/x86_64-linux/", ".pythonfmu3.so")}


def put_status_shim(fmu_path: Path, work_dir: Path, fmi_version: int = 2) -> bool:
    """Put the status shim (``fmu/status_shim.c``, FMI 3.0: ``fmu/status_shim3.c``) in front of the pythonfmu
    library's Linux binary in ``fmu_path``.

    pythonfmu 0.7.0 can only answer fmi2OK or fmi2Fatal, pythonfmu3 likewise outside fmi3DoStep and has no Binary
    variables; the shim answers Error and Warning where the slave gave them, and (FMI 3.0) the Binary calls (see
    the C files). Compiled here with the system's C compiler (FMI 3.0: against the FMI 3.0 headers pythonfmu3
    ships); without one the FMU keeps the library's binary and a warning says so (:data:`SHIM_MISSING`). → whether
    the shim went in.
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
    command = [compiler, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-o", str(shim),
               str(STATUS_SHIMS[fmi_version]), "-ldl", "-lpthread"]  # (status_shim_inner.h is beside it)
    if fmi_version == 3:
        import pythonfmu3

        command.insert(1, f"-I{Path(pythonfmu3.__file__).parent / 'pythonfmu-export' / 'src' / 'fmi'}")
    built = subprocess.run(command, capture_output=True, text=True)
    if built.returncode != 0:
        warnings.warn(f"{compiler} could not build the FMU's status shim ({built.stderr.strip()[-300:]}): "
                      f"{SHIM_FALLBACK}", stacklevel=3)
        return False
    folder, inner_suffix = LINUX_BINARIES[fmi_version]
    rebuilt = fmu_path.with_suffix(".shim.tmp")
    with zipfile.ZipFile(fmu_path) as source, zipfile.ZipFile(rebuilt, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            data = source.read(item)
            if fmi_version == 3 and item.filename.startswith("binaries/") and not item.filename.startswith(folder):
                continue  # pythonfmu3's other binaries (Windows) have no Binary variables and no shim: left out
            if item.filename.startswith(folder) and item.filename.endswith(".so"):
                inner = zipfile.ZipInfo(item.filename[:-3] + inner_suffix, item.date_time)  # beside the shim
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

path = sys.argv[1]
folder = tempfile.mkdtemp(prefix="lidar_fmu_warm_")
try:
    extract(path, unzipdir=folder)
    description = read_model_description(path)
    identifier = description.coSimulation.modelIdentifier
    if description.fmiVersion.startswith("3"):
        from fmpy.fmi3 import FMU3Slave

        slave = FMU3Slave(guid=description.instantiationToken, unzipDirectory=folder, instanceName="warm-up",
                          modelIdentifier=identifier)
        slave.instantiate(loggingOn=True, logMessage=lambda env, status, category, message: print(
            f"{status} {message.decode('utf-8', 'replace')}", flush=True))
        slave.enterInitializationMode(startTime=0.0)
    else:
        from fmpy.fmi2 import FMU2Slave, defaultCallbacks, fmi2CallbackFunctions, fmi2CallbackLoggerTYPE

        slave = FMU2Slave(guid=description.guid, unzipDirectory=folder, instanceName="warm-up",
                          modelIdentifier=identifier)
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

    run = subprocess.run([sys.executable, "-c", _LOAD_AS_A_MASTER, str(fmu_path)], capture_output=True, text=True)
    lines = [line.split(" ", 1)[-1] for line in run.stdout.splitlines()]
    said = [line for line in lines if "kernels" in line]
    if run.returncode != 0 or not said:
        why = " ".join((run.stderr.strip().splitlines() or lines or ["no output"])[-1:])
        raise UserError(f"{fmu_path}: its first initialization failed: {why}")
    return said[-1]
