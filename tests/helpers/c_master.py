"""The tests' non-Python masters (tests/c_host/): compiled with the system's C compiler, run in docs/fmu.md's
environment for non-Python masters on Linux (libpython preloaded, this Python's packages on the path)."""
import os
import pathlib
import subprocess
import sysconfig

C_HOST = pathlib.Path(__file__).parent.parent / "c_host"


def compile_master(name: str, out_dir: pathlib.Path, include: pathlib.Path) -> pathlib.Path:
    """tests/c_host/``name``.c compiled against the FMI headers in ``include`` → the program."""
    program = out_dir / name
    subprocess.run(["cc", "-O1", "-Wall", f"-I{include}", str(C_HOST / f"{name}.c"), "-ldl", "-o", str(program)],
                   check=True)
    return program


def master_env() -> dict:
    """The environment a C master runs a pythonfmu FMU in (docs/fmu.md, "Non-Python masters on Linux")."""
    libpython = pathlib.Path(sysconfig.get_config_var("LIBDIR")) / sysconfig.get_config_var("LDLIBRARY")
    return dict(os.environ, LD_PRELOAD=str(libpython), PYTHONPATH=sysconfig.get_paths()["purelib"],
                PYTHONFAULTHANDLER="1")
