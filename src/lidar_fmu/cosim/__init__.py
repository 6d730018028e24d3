"""Co-simulation: one OSI sensor-model step without FMI, the OSMP plumbing, and the FMU and SSP packages built
from ``fmu/`` (see ``docs/fmu.md``); the scene it keeps follows the ground truth by :mod:`lidar_fmu.world`."""
