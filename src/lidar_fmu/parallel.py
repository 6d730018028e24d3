"""Numba's threading layer, chosen once for the package: one that several threads may enter at once.

Two sensor models stepped from two host threads run the parallel ``prange`` kernels concurrently; Numba's own
``workqueue`` layer aborts the process then (SIGABRT), and Numba falls back to it silently where neither GNU OpenMP
nor TBB loads. So :func:`threadsafe_layer` picks the layer before Numba starts its threads:

* ``omp`` where ``libgomp.so.1`` loads (it comes with gcc; Debian/Ubuntu package ``libgomp1``);
* else ``tbb`` where a TBB 2021.6 or later loads, a PyPI ``tbb`` in ``<prefix>/lib`` included;
* else ``workqueue``, and :func:`serial` then lets one thread at a time into a scan: correct, not concurrent.

Idle threads **sleep** (``OMP_WAIT_POLICY=PASSIVE``, set before libgomp loads unless the environment sets it), so
that what runs next in a co-simulation does not share the cores with spinning threads (measured: docs/architecture.md,
"Threads"). ``NUMBA_THREADING_LAYER`` set to anything but ``default`` is respected; if the layer it names is not
thread-safe, :func:`serial` serialises too. So does a process whose threads Numba launched before this module chose.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import numba

#: layers that may be entered from several threads at once (Numba's documentation)
THREADSAFE_LAYERS = ("omp", "tbb")

_lock = threading.Lock()
_choice_lock = threading.Lock()
_layer: str | None = None
_serialised = False


def _loads(layer: str) -> bool:
    """Can Numba load this layer's library here (without starting it)?"""
    try:
        if layer == "omp":
            from numba.np.ufunc import omppool  # type: ignore[attr-defined]  # noqa: F401  (ImportError without libgomp)
        else:
            from numba.np.ufunc import parallel

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "TBB too old" (embreex ships an older one): we just don't use it
                parallel._check_tbb_version_compatible()
            from numba.np.ufunc import tbbpool  # type: ignore[attr-defined]  # noqa: F401
        return True
    except Exception:  # ImportError, OSError: the library is missing or unusable
        return False


def _preload_pip_tbb() -> None:
    """Load PyPI ``tbb``'s ``libtbb.so.12`` from ``<prefix>/lib`` so that Numba's ``tbbpool`` finds it."""
    if not sys.platform.startswith("linux"):
        return
    for prefix in dict.fromkeys((sys.prefix, sys.exec_prefix, sys.base_prefix)):
        path = os.path.join(prefix, "lib", "libtbb.so.12")
        if os.path.isfile(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                return
            except OSError:
                pass


def _automatic() -> str:
    if _loads("omp"):
        return "omp"
    _preload_pip_tbb()
    return "tbb" if _loads("tbb") else "workqueue"


def threadsafe_layer() -> str:
    """Choose (once) and start Numba's threading layer; returns its name (``numba.threading_layer()``)."""
    global _layer, _serialised
    if _layer is not None:
        return _layer
    with _choice_lock:
        if _layer is not None:
            return _layer
        from numba.np.ufunc import parallel

        # numba.config's settings are made from the environment at import: its types name none of them
        config: Any = numba.config
        if not parallel._is_initialized:  # nobody has started Numba's threads yet: we choose
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when libgomp loads (module doc)
            requested = str(config.THREADING_LAYER).lower()
            config.THREADING_LAYER = _automatic() if requested == "default" else requested
            try:
                numba.get_num_threads()  # starts the threads now: nothing later can change the layer
            except ValueError as exc:  # the layer NUMBA_THREADING_LAYER names cannot load here
                config.THREADING_LAYER = _automatic()
                warnings.warn(f"NUMBA_THREADING_LAYER={requested}: {exc}; using "
                              f"{config.THREADING_LAYER!r}", RuntimeWarning, stacklevel=2)
                numba.get_num_threads()
        _serialised = numba.threading_layer() not in THREADSAFE_LAYERS
        _layer = numba.threading_layer()
    return _layer


def serialised() -> bool:
    """Do scans run one at a time (no thread-safe layer here)?"""
    threadsafe_layer()
    return _serialised


def serialised_message() -> str:
    return (f"Numba's threading layer here is {threadsafe_layer()!r}, which is not thread-safe: scans of "
            "several instances run one at a time (install libgomp1, the GNU OpenMP runtime, or `pip install "
            "tbb` for concurrent scans)")


@contextlib.contextmanager
def serial():
    """Hold the package's scan lock if the threading layer is not thread-safe (else nothing)."""
    if serialised():
        with _lock:
            yield
    else:
        yield


__all__ = ["THREADSAFE_LAYERS", "helped", "serial", "serialised", "serialised_message", "side_by_side",
           "threadsafe_layer"]


_pool: ThreadPoolExecutor | None = None


def side_by_side(fn, argument_tuples) -> list:
    """``[fn(*args) for args in argument_tuples]``, run on Numba's number of threads when there are several.

    For compiled serial kernels that release the GIL (``nogil``) over parts of one array that are known in
    advance, e.g. a frame's detections in chunks (:mod:`lidar_fmu.osi.encode`): a few threads, no ``prange``.
    """
    if len(argument_tuples) < 2:
        return [fn(*args) for args in argument_tuples]
    return list(_shared_pool().map(lambda args: fn(*args), argument_tuples))


def _shared_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _choice_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=max(1, numba.get_num_threads()),
                                           thread_name_prefix="lidar-fmu")
    return _pool


def helped(fn, args: tuple, helpers: int) -> None:
    """``fn(*args)`` on this thread while up to ``helpers`` pool threads run ``fn(*args)`` too.

    For a compiled kernel that releases the GIL (``nogil``) and whose calls share its work out among themselves as
    they come (each claims its next run, e.g. by an atomic counter, so a call that comes when none is left does
    nothing): this returns once this thread's call has and every helper that started has finished; a helper not
    started by then is called off. A machine too busy to start a thread at once leaves the work to this thread,
    where a ``prange`` would wait for every one of its threads to have run.
    """
    futures = [_shared_pool().submit(fn, *args) for _ in range(helpers)]
    try:
        fn(*args)
    finally:
        started = [future for future in futures if not future.cancel()]
        wait(started)  # all of them, before a helper's error is raised: none writes on after this returns
    for future in started:
        future.result()
