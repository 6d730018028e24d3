"""Sensor models as data: a spec (preset name, dict or JSON/YAML file) → :class:`Sensor`.

The spec's keys are documented in :mod:`.spec` and ``docs/sensors.md``; the unit formats each have a module
(:mod:`.ouster`, :mod:`.velodyne`, :mod:`.airsim`, :mod:`.ibeo`, :mod:`.rosette`), and :mod:`.rig` several lidars.
"""
from .presets import PRESETS
from .spec import MAX_RAYS_PER_FRAME, Sensor, SensorSpecError, load_sensor, preset_rows, resolve_spec

__all__ = ["MAX_RAYS_PER_FRAME", "PRESETS", "Sensor", "SensorSpecError", "load_sensor", "preset_rows", "resolve_spec"]
