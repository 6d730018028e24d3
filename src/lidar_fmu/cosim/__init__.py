"""Co-simulation: one OSI sensor-model step without FMI, the scene it keeps, the OSMP plumbing, and the FMU
package built from ``fmu/`` (see ``docs/fmu.md``)."""
