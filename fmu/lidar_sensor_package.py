"""The FMU imports ``lidar_fmu`` from a per-user copy keyed by its content hash (a stable path for Numba's cache).

Kept apart from the slave's FMI callbacks (``LidarSensor.py``); it runs before ``lidar_fmu`` is imported.
"""
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile


def use_cached_package(resources):
    """Import ``lidar_fmu`` from a per-user copy keyed by its content hash.

    Masters unpack an FMU to a new temporary folder each run, and Numba keys
    its on-disk cache of compiled kernels by source path, so importing from
    ``resources/`` would recompile every kernel (seconds) on every run. A copy
    at a stable path keeps that cache warm. Falls back to ``resources/``
    silently, and does nothing if the host already imported ``lidar_fmu``.
    The cache folder comes from the package's own ``cache.py``, loaded from
    its file: importing ``lidar_fmu`` here would pin it to ``resources/``.
    """
    package = os.path.join(resources or "", "lidar_fmu")
    if "lidar_fmu" in sys.modules or not os.path.isdir(package):
        return
    try:
        digest = hashlib.sha256()
        for folder, dirs, files in sorted(os.walk(package)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                path = os.path.join(folder, name)
                digest.update(os.path.relpath(path, package).encode())
                with open(path, "rb") as f:
                    digest.update(f.read())
        spec = importlib.util.spec_from_file_location("_lidar_fmu_cache", os.path.join(package, "cache.py"))
        cache_module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cache_module)
        cache = str(cache_module.cache_dir("fmu-packages", digest.hexdigest()[:16]))
        if not os.path.isdir(os.path.join(cache, "lidar_fmu")):
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            staging = tempfile.mkdtemp(dir=os.path.dirname(cache))
            shutil.copytree(package, os.path.join(staging, "lidar_fmu"))
            try:
                os.rename(staging, cache)  # atomic: a concurrent instance may have won, which is fine
            except OSError:
                shutil.rmtree(staging, ignore_errors=True)
        sys.path.insert(0, cache)
    except Exception:  # no cached copy: import from resources/
        pass
