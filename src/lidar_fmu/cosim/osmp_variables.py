"""OSMP's vocabulary, one copy for the package and the FMU slaves: the lidar's binary variables, how FMI carries a
buffer, the MIME types and the annotations' namespace (OSMP 1.6.0, doc/spec/binary_variables.adoc).

A buffer is an (address, size) until FMI 2.0 carries it: there as three Integers, ``<prefix>.base.lo`` and
``.base.hi`` (the address's low and high 32 bits, each a signed int32: FMI Integers are signed) and ``.size``
(the byte count; address 0 or size 0: no buffer). FMI 3.0 carries each as one Binary.

Plain Python that imports nothing: the slaves in fmu/ load it from its file (``fmu/lidar_sensor_osmp.py``) without
importing ``lidar_fmu``, so an FMU whose Python lacks lidar-fmu's dependencies still starts and says so.
"""

OSMP_NS = "http://xsd.pmsf.net/OSISensorModelPackaging"
OSMP_VERSION = "1.6.0"
#: the lidar FMU's binary variables: prefix → (OSI type, causality, variability, initial)
BINARY_VARIABLES = {
    "OSMPSensorViewIn": ("SensorView", "input", "discrete", None),
    "OSMPSensorDataOut": ("SensorData", "output", "discrete", "exact"),
    "OSMPSensorViewInConfigRequest": ("SensorViewConfiguration", "calculatedParameter", "fixed", "calculated"),
    "OSMPSensorViewInConfig": ("SensorViewConfiguration", "parameter", "fixed", None),
}
#: FMI 2.0's three Integers of a binary variable, ``<prefix>.<role>``; FMI 3.0's one Binary is role "full"
ROLES = ("base.lo", "base.hi", "size")


def mime_type(osi_type: str, osi_version: str) -> str:
    """OSMP's MIME type of a binary variable carrying OSI message ``osi_type`` (SensorView, …)."""
    return f"application/x-open-simulation-interface; type={osi_type}; version={osi_version}"


def _signed32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= (1 << 31) else value


def split_address(address: int) -> tuple[int, int]:
    """Address → (lo, hi) signed int32."""
    return _signed32(address), _signed32(address >> 32)


def join_address(lo: int, hi: int) -> int:
    """(lo, hi) signed int32 → unsigned 64-bit address."""
    return ((int(hi) & 0xFFFFFFFF) << 32) | (int(lo) & 0xFFFFFFFF)
