"""Which reader a recording is opened with: one row per maker (:data:`MAKERS`), naming how its unit's calibration
is recognised (``--metadata``: a preset of the maker's, or a file by its extension), the maker's presets, its
unit-file reader and its recording reader. :func:`open_recording` is what validate and calibrate call.

Recordings and calibrations each maker reads: docs/validation.md.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from ..sensors.hesai import HESAI_PRESETS, HesaiCalibrationError, read_hesai_calibration
from ..sensors.ouster import OUSTER_PRESETS, OusterMetadataError, read_ouster_metadata
from ..sensors.presets import PRESETS
from ..sensors.robosense import looks_like_robosense_angles
from ..sensors.spec import SensorSpecError, data_file
from ..sensors.velodyne import VELODYNE_PRESETS, VelodyneCalibrationError, read_velodyne_calibration
from .hesai import open_hesai
from .ouster import open_ouster
from .recording import Recording
from .units import UnitFile, UnitGeometry
from .velodyne import open_velodyne


@dataclass(frozen=True)
class Maker:
    """One maker's row: its calibration file's extensions and the key of its presets that names one, its presets,
    how the file is read (and the errors that say it is wrong), and how a recording is opened with it."""

    name: str
    extensions: tuple[str, ...]
    preset_key: str
    presets: Mapping[str, dict]
    read_unit: Callable[[str], Any]
    unit_errors: tuple[type[Exception], ...]
    open: Callable[[str, UnitFile], tuple[Recording, UnitGeometry]]


MAKERS = (
    Maker("Ouster", (".json",), "ouster_metadata", OUSTER_PRESETS, read_ouster_metadata,
          (OusterMetadataError, ValueError), open_ouster),
    Maker("Hesai", (".csv",), "calibration", HESAI_PRESETS, read_hesai_calibration, (HesaiCalibrationError,),
          open_hesai),
    Maker("Velodyne", (".yaml", ".yml", ".xml"), "calibration", VELODYNE_PRESETS, read_velodyne_calibration,
          (VelodyneCalibrationError, SensorSpecError), open_velodyne),
)


def open_recording(recording_path: str, metadata: str) -> tuple[Recording, UnitGeometry]:
    """The recording at ``recording_path`` and its unit, read as ``metadata`` (a calibration file or a preset)
    says; one :class:`~lidar_fmu.errors.UserError` line for a file that is neither, or one its maker cannot read."""
    maker = maker_of(metadata)
    preset = metadata if metadata in maker.presets else None
    path = data_file(maker.presets[metadata][maker.preset_key]) if preset else metadata
    try:
        calibration = maker.read_unit(path)
    except maker.unit_errors as exc:
        raise UserError(f"--metadata {metadata}: {exc}") from None
    return maker.open(recording_path, UnitFile(metadata, path, calibration, preset))


def maker_of(metadata: str) -> Maker:
    """The row whose reader ``--metadata`` (a preset or a calibration file) calls for."""
    if metadata in PRESETS:
        maker = next((m for m in MAKERS if metadata in m.presets and m.preset_key in m.presets[metadata]), None)
        if maker is None:
            raise UserError(f"--metadata {metadata}: this preset has no unit calibration (Ouster metadata, Hesai "
                            "angle correction or Velodyne calibration) to read a recording with")
        return maker
    if not os.path.isfile(metadata):
        raise UserError(f"--metadata {metadata}: file not found (give the unit's calibration file or a preset)")
    lower = metadata.lower()
    if lower.endswith(".csv") and looks_like_robosense_angles(metadata):
        raise UserError(f"--metadata {metadata}: a RoboSense angle.csv; RoboSense recordings are not read (Velodyne, "
                        "Hesai and Ouster ones are)")
    maker = next((m for m in MAKERS if lower.endswith(m.extensions)), None)
    if maker is None:
        raise UserError(f"--metadata {metadata}: expected an Ouster metadata .json, a Hesai angle-correction .csv or "
                        "a Velodyne calibration .yaml/.xml")
    return maker
