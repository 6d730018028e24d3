"""Which OSI layers a lidar model publishes: spec key and FMU parameter ``outputs``.

A comma list (or, in a spec, a list) of :data:`OUTPUT_LAYERS`: ``detections`` (``feature_data.lidar_sensor[].
detection``, the default and the only layer of a model that names none), ``reflections`` (``sensor_view[].
lidar_sensor_view[].reflection``, one per ray), ``logical`` (``logical_detection_data``, vehicle frame) and
``objects`` (``moving_object``, boxes fitted to each object's returns). What each layer fills: docs/fmu.md#osi-layers.
"""
from __future__ import annotations

from ..documents import shown
from ..errors import LidarFmuError

#: the layers, in the order a SensorData carries them
OUTPUT_LAYERS = ("detections", "reflections", "logical", "objects")
#: what a model publishes when neither its spec nor its FMU parameter says
DEFAULT_OUTPUTS = ("detections",)


class OutputsError(LidarFmuError, ValueError):
    """An ``outputs`` list that names no layer or one that does not exist."""


def parse_outputs(value, what: str = "outputs") -> tuple[str, ...] | None:
    """``value`` (a comma list, a list of names, or None / "" for not given) → the layers it names, in
    :data:`OUTPUT_LAYERS` order, or None when not given; :class:`OutputsError` naming ``what`` otherwise."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        names = [name.strip().lower() for name in value.split(",")]
    elif isinstance(value, (list, tuple)) and all(isinstance(name, str) for name in value):
        names = [name.strip().lower() for name in value]
    else:
        raise OutputsError(f"{what} must be a comma list of {', '.join(OUTPUT_LAYERS)}, got {shown(value)}")
    unknown = [name for name in names if name not in OUTPUT_LAYERS]
    if unknown or not names:
        raise OutputsError(f"{what}: unknown layer {shown(unknown[0] if unknown else '')}; choose a comma list of "
                           f"{', '.join(OUTPUT_LAYERS)}")
    return tuple(layer for layer in OUTPUT_LAYERS if layer in names)


def model_outputs(parameter, specs) -> tuple[str, ...]:
    """The layers a model publishes: the FMU parameter ``parameter`` where it names some, else every layer its
    lidars' specs (``specs``: their ``outputs`` keys) name, else :data:`DEFAULT_OUTPUTS`."""
    chosen = parse_outputs(parameter, "outputs parameter")
    if chosen is not None:
        return chosen
    named = {layer for spec in specs for layer in (parse_outputs(spec, "sensor spec key 'outputs'") or ())}
    return tuple(layer for layer in OUTPUT_LAYERS if layer in named) or DEFAULT_OUTPUTS


__all__ = ["DEFAULT_OUTPUTS", "OUTPUT_LAYERS", "OutputsError", "model_outputs", "parse_outputs"]
