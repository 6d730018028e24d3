"""Several lidars on one vehicle: a rig spec → the sensors and where each is mounted.

A rig is a list of sensor specs, given as

* a YAML/JSON list: ``["velodyne_vlp16", {"preset": "ouster_os1_128", "mounting": {...}}]`` (inline text
  starting with ``[``, e.g. the FMU's ``sensor`` parameter), or
* a mapping (or spec file) with the one key ``sensors: [...]``.

Each entry is anything :func:`~lidar_fmu.sensors.load_sensor` takes, a mapping optionally adding

* ``mounting: {"xyz_m": [x, y, z], "rpy_deg": [roll, pitch, yaw]}``: the lidar's pose on the vehicle
  (vehicle_from_sensor, m and degrees, OSI's vehicle frame and R = Rz(yaw)·Ry(pitch)·Rx(roll));
* ``sensor_id``: the id its detection header carries (default: :func:`rig_sensor_ids`).

A Project AirSim robot config (a file or mapping whose ``sensors`` entries each name their ``type``) is the rig
of its lidars: each takes its mounting from its ``origin`` and its name from its ``id``; one lidar alone is a
single sensor, as anywhere a lidar goes. Any other spec (a preset name, a file, a mapping without ``sensors``)
is a rig of one.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..documents import parse_document, refuse_unknown_keys
from ..geometry.transforms import pose_matrix
from .airsim import robot_config_lidars
from .spec import Sensor, SensorSpecError, _read_spec_file, load_sensor

#: at most this many lidars in one rig (each keeps its pattern and buffers; a bound against typos)
MAX_RIG_SIZE = 64
#: OSI identifiers are uint64: ids given to lidars count on modulo this
SENSOR_ID_MODULUS = 2**64
#: a rig file's keys
RIG_KEYS = ("sensors", "name", "description")


@dataclass(frozen=True)
class RigMember:
    """One lidar of a rig: the sensor, its spec mounting (4×4 vehicle_from_sensor, None: not set) and id."""

    sensor: Sensor
    mounting_pose: np.ndarray | None = None
    sensor_id: int | None = None


def load_rig(spec) -> list[RigMember]:
    """The lidars of ``spec`` (module doc); SensorSpecError naming the entry on bad input."""
    if isinstance(spec, Sensor):
        return [RigMember(spec)]
    if isinstance(spec, RigMember):
        return [spec]
    if isinstance(spec, (list, tuple)) and spec and all(isinstance(m, RigMember) for m in spec):
        return list(spec)
    entries = _entries(spec)
    if entries is None:
        return [RigMember(load_sensor(spec))]
    if len(entries) > MAX_RIG_SIZE:
        raise SensorSpecError(f"sensors: at most {MAX_RIG_SIZE} lidars in one rig, got {len(entries)}")
    members = [_member(entry, k) for k, entry in entries]
    first: dict[int, int] = {}
    for (k, _), member in zip(entries, members):
        if member.sensor_id is not None and first.setdefault(member.sensor_id, k) != k:
            raise SensorSpecError(f"sensors[{k}].sensor_id: two lidars with the same sensor_id {member.sensor_id} "
                                  f"(sensors[{first[member.sensor_id]}] has it too)")
    return members


def rig_sensor_ids(explicit_ids: list[int | None], base_id: int) -> list[int]:
    """The sensor id of each lidar of a rig whose entries give ``explicit_ids`` (None: not given).

    An entry's own ``sensor_id`` is kept. Lidar ``k`` without one gets ``base_id + k`` (the FMU's or the
    SensorView's sensor id; a rig of one: ``base_id``), or, where an entry names that id or an earlier lidar got
    it, the next id up that is free; ids count on modulo 2⁶⁴ (OSI identifiers are uint64: 2⁶⁴−1 is followed by
    0). Ids are never refused at run time: the base id comes from the SensorView, which the rig's author does
    not know, and every lidar gets an id no other lidar of the rig has.
    """
    taken = {i for i in explicit_ids if i is not None}
    ids = []
    for k, explicit in enumerate(explicit_ids):
        if explicit is None:
            explicit = (int(base_id) + k) % SENSOR_ID_MODULUS
            while explicit in taken:  # at most MAX_RIG_SIZE steps: every other lidar holds one id
                explicit = (explicit + 1) % SENSOR_ID_MODULUS
            taken.add(explicit)
        ids.append(explicit)
    return ids


def _entries(spec) -> list[tuple[int, Any]] | None:
    """The rig's entries with their indices in the ``sensors`` list, or None for a single sensor spec."""
    if isinstance(spec, (list, tuple)):
        return _indexed(list(spec))
    if isinstance(spec, (str, os.PathLike)):
        text = os.fspath(spec).strip()
        if text.startswith("["):
            return _indexed(parse_document(text, "the sensor list", SensorSpecError))  # JSON is YAML; bounded
        if os.path.isfile(text) and text.lower().endswith((".json", ".jsonc", ".yaml", ".yml")):
            data = _read_spec_file(text)
            if "sensors" in data:
                return _rig_entries(data, text)
        return None
    if isinstance(spec, dict) and "sensors" in spec:
        return _rig_entries(spec, "the rig spec")
    return None


def _rig_entries(data: dict, where: str) -> list[tuple[int, Any]] | None:
    """A mapping with ``sensors``: a rig's entries, or None where it is one lidar (of an AirSim config)."""
    if "airsim_id" in data:  # one lidar of an AirSim config, picked by its id
        return None
    lidars = robot_config_lidars(data)
    if lidars is None:
        return _indexed(_only_sensors(data, where))
    if len(lidars) < 2:  # none or one: load_sensor's one line, or the lidar
        return None
    return [(k, s) for k, s in enumerate(data["sensors"]) if any(s is lidar for lidar in lidars)]


def _indexed(entries) -> list[tuple[int, Any]]:
    if not isinstance(entries, list) or not entries:
        raise SensorSpecError("sensors must be a non-empty list of sensor specs")
    return list(enumerate(entries))


def _only_sensors(data: dict, where: str):
    refuse_unknown_keys(data, RIG_KEYS, where, SensorSpecError)
    return data["sensors"]


def _member(entry, k: int) -> RigMember:
    where = f"sensors[{k}]"
    mounting = sensor_id = None
    if isinstance(entry, dict):
        entry = dict(entry)
        mounting = _mounting(entry.pop("mounting"), where) if "mounting" in entry else None
        if "sensor_id" in entry:
            sensor_id = entry.pop("sensor_id")
            if isinstance(sensor_id, bool) or not isinstance(sensor_id, int) or not 0 <= sensor_id < 2**63:
                raise SensorSpecError(f"{where}.sensor_id must be an integer in 0 … 2⁶³−1, got {sensor_id!r}")
    try:
        return RigMember(load_sensor(entry), mounting, sensor_id)
    except SensorSpecError as exc:
        raise SensorSpecError(f"{where}: {exc}") from None


def _mounting(value, where: str) -> np.ndarray:
    if not isinstance(value, dict) or set(value) - {"xyz_m", "rpy_deg"}:
        raise SensorSpecError(f"{where}.mounting must be a mapping of xyz_m and rpy_deg, got {value!r}")
    xyz, rpy = value.get("xyz_m", [0, 0, 0]), value.get("rpy_deg", [0, 0, 0])
    for key, triple in (("xyz_m", xyz), ("rpy_deg", rpy)):
        if (not isinstance(triple, (list, tuple)) or len(triple) != 3
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                           for v in triple)):
            raise SensorSpecError(f"{where}.mounting.{key} must be three finite numbers, got {triple!r}")
    return pose_matrix(xyz, np.radians(rpy))


__all__ = ["MAX_RIG_SIZE", "SENSOR_ID_MODULUS", "RigMember", "load_rig", "rig_sensor_ids"]
