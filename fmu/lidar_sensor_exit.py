"""A workaround for pythonfmu 0.7.0's binary (and pythonfmu3's, built from the same code), which corrupts the heap
when the process exits (Linux).

Kept apart from the slave's FMI callbacks (``LidarSensor.py``): it is about pythonfmu, not the model.
"""
import os
import sys

_EXIT_CHECKED = set()  # FMU binaries looked at by finalize_pythonfmu_before_exit


def finalize_pythonfmu_before_exit():
    """Keep pythonfmu 0.7.0's binary from corrupting the heap when the process exits (Linux).

    The binary keeps its interpreter state in a static ``std::shared_ptr`` and
    also clears that pointer from a library destructor (its exported
    ``finalizePythonInterpreter``). glibc never unloads the binary (it has
    STB_GNU_UNIQUE symbols), ``dlclose`` or not, so at exit() the static
    destructor runs first (it finalizes the interpreter and frees the
    pointer's control block), then the library destructor, which decrements
    a count inside the freed block: glibc's free-list pointers. A later
    ``free`` aborts ("corrupted double-linked list"). An exit handler
    registered now runs before that static destructor (handlers run in
    reverse order of registration, the static one was registered when the
    binary was loaded) and calls ``finalizePythonInterpreter`` while the
    pointer is alive: the interpreter is finalized as before, on pythonfmu's
    own thread, and the destructors after it find the pointer empty.
    ``RTLD_NODELETE`` makes sure the handler's address stays valid. Every
    pythonfmu or pythonfmu3 FMU binary loaded in the process by now (each has its
    own copy of the bug: pythonfmu3 0.3.4 keeps the same static pointer and
    library destructor) gets one handler. Never raises: it runs inside FMI calls.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libdl = libc if hasattr(libc, "dlopen") else ctypes.CDLL("libdl.so.2")  # glibc < 2.34
        dlopen, dlsym, dlclose, cxa_atexit = libdl.dlopen, libdl.dlsym, libdl.dlclose, libc.__cxa_atexit
        dlopen.restype, dlopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
        dlsym.restype, dlsym.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]
        dlclose.argtypes = [ctypes.c_void_p]
        cxa_atexit.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        with open("/proc/self/maps") as maps:
            paths = {parts[5].strip() for parts in (line.split(maxsplit=5) for line in maps) if len(parts) == 6}
        binaries = [p for p in paths - _EXIT_CHECKED if p.endswith(".so") and
                    ("/binaries/linux64/" in p or "/binaries/x86_64-linux/" in p)]  # FMI 2.0, FMI 3.0
        for path in sorted(binaries):
            _EXIT_CHECKED.add(path)
            handle = dlopen(path.encode(), os.RTLD_NOW | os.RTLD_NOLOAD)  # loaded already, or nothing
            if not handle:
                continue
            finalize = dlsym(handle, b"finalizePythonInterpreter")
            pinned = finalize and dlopen(path.encode(), os.RTLD_NOW | os.RTLD_NOLOAD | os.RTLD_NODELETE)
            if pinned:
                dlclose(pinned)  # RTLD_NODELETE stays
                cxa_atexit(finalize, None, None)
            dlclose(handle)
    except Exception:
        pass
