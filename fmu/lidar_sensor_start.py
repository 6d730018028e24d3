"""What an FMU of lidar-fmu finds in its ``resources/``: the start values a system gave it, and the files its
parameters name relative to it.

``lidar-fmu build --ssp`` (``lidar_fmu.cosim.ssp``) builds each FMU of the system it packs with the values of the
system's parameter sets as the FMU's own start values (``resources/start_values.json``), and puts the files those
values name (a sensor spec, a trace) into the FMU's ``resources/``: a master that applies no SSP parameter binding
(OpenMCx reads no ``.ssv`` file, FMPy's ``simulate_ssp`` applies none) runs the same system. Kept apart from the
slaves' FMI callbacks; shared by the lidar FMU and the OSI trace player and writer.
"""
import json
import os

#: the start values of an FMU's parameters, when a system gave it some: {"parameters": {name: value},
#: "default_experiment": {"start_time", "stop_time", "step_size"}} (each part optional)
START_VALUES = "start_values.json"


def start_values(resources):
    """The FMU's ``resources/start_values.json`` (``{}`` when it has none)."""
    path = os.path.join(resources or "", START_VALUES)
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)  # written by lidar-fmu build --ssp: a broken one is a bug there, not the master's input


def apply_start_values(slave, resources):
    """Set the slave's parameters (attributes it has already) to the start values its resources give, if any."""
    for name, value in start_values(resources).get("parameters", {}).items():
        if hasattr(slave, name):
            setattr(slave, name, value)


def in_resources(resources, name, exists=os.path.isfile):
    """``name`` (a file or folder a parameter names) as the FMU finds it: as given when it is absolute or ``exists``
    from the master's working directory, else the one in the FMU's ``resources/`` when that ``exists``, else as given
    (what reads it then says it is missing)."""
    if not name or os.path.isabs(name) or exists(name) or not resources:
        return name
    inside = os.path.join(resources, name)
    return inside if exists(inside) else name
