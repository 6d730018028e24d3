"""A Velodyne recording (packet capture or ROS 2 bag of ``velodyne_msgs`` packets) decoded with velodyne-decoder,
as rings × azimuth bins.

velodyne-decoder (PyPI ``velodyne-decoder``, Martin Valgur; BSD-3-Clause) decodes every model's packets with the
unit's calibration YAML (the ros-drivers / velodyne-decoder format, :mod:`lidar_fmu.sensors.velodyne`), single
and dual return, and detects the model from the packets (an HDL-64E's from the calibration's laser count). Its
points carry ``ring`` (the laser's rank by elevation, 0 lowest), ``column`` (the firing sequence), ``time`` and
``return_type`` (1 strongest, 2 last, 3 both: a dual-return unit's two returns of one firing).

Each firing's strongest return is the first return, its last (where it is another) the second: Ouster's
strongest-first order, what validate compares. A point's azimuth is its own (velodyne-decoder interpolates the
head's azimuth to each laser's firing time), its range the distance from the laser's origin (the calibration's
offsets). velodyne-decoder emits returns only, so a frame's firings without a return are taken as every
returning ring firing in every bin between the frame's first and last return
(:func:`~lidar_fmu.recordings.recording.binned_recording`).

**Checked against nebula's decoder**: docs/validation.md gives how many of nebula's reference points of the
shared VLP-16 recording velodyne-decoder reproduces within 1 mm; the two round the head's azimuth to 0.01° after
interpolating it differently (nebula to the next block, velodyne-decoder over the packet).
"""
from __future__ import annotations

import os

import numpy as np

from ..sensors.velodyne import MODEL_PRESETS, VelodyneCalibration, beam_geometry, velodyne_xml
from .packets import PacketSourceError, read_packets
from .recording import Firings, Recording, RecordingError, sweep_rate_deg_per_s
from .units import BinnedGeometry, BinnedUnit, UnitFile, open_binned

#: the head's horizontal step per model at 10 Hz (the firing sequence's period × 3600°/s): VLP-16 55.296 µs,
#: HDL-32E 46.08 µs, VLP-32C 55.296 µs, VLS-128 53.3 µs, HDL-64E 48 µs (lidar_fmu.sensors.velodyne.FIRING)
SEQUENCE_S = {"VLP16": 55.296e-6, "PuckLite": 55.296e-6, "PuckHiRes": 55.296e-6, "HDL32E": 46.08e-6,
              "VLP32C": 55.296e-6, "VLS128": 53.3e-6, "AlphaPrime": 53.3e-6, "HDL64E_S1": 48e-6,
              "HDL64E_S2": 48e-6, "HDL64E_S3": 48e-6}
#: the packet size velodyne-decoder decodes (1206-byte data packets; 512-byte position packets are skipped)
PACKET_BYTES = 1206
#: a data packet's model byte (its last, the user manuals' "factory bytes") → the model's distance unit (m): VLP-16,
#: Puck Hi-Res and HDL-32E 2 mm, VLP-32C and VLS-128 4 mm (the manuals' data packet chapters, as velodyne-decoder's
#: ``calib_db.cpp`` lists them)
DISTANCE_UNIT_M = {0x22: 0.002, 0x24: 0.002, 0x21: 0.002, 0x28: 0.004, 0xA1: 0.004}


def decode_velodyne(recording_path: str, cal_path: str, lasers: int):
    """(model name, return mode name, points, stamp s, notes) of every data packet of the recording, decoded as one
    sequence by velodyne-decoder with the calibration at ``cal_path``.

    The calibration's ``distance_resolution`` scales every range velodyne-decoder reports; where it is not the
    model's own unit (the packets' model byte, :data:`DISTANCE_UNIT_M`) the model's is used and a note says so
    (nebula's ``VLS128.yaml`` says 7 mm, which nebula's VLS-128 decoder ignores for the 4 mm of the manual)."""
    import velodyne_decoder as vd

    try:
        packets = read_packets(recording_path)
    except PacketSourceError as exc:
        raise RecordingError(str(exc)) from None
    sizes = np.array([len(payload) for payload in packets.payloads])
    port = packets.port[np.argmax(sizes == PACKET_BYTES)]  # a capture of two units keeps the first's port
    data = [(stamp, payload) for stamp, payload, size, at in zip(packets.stamp_s, packets.payloads, sizes, packets.port)
            if size == PACKET_BYTES and at == port]
    if not data:
        raise RecordingError(f"recording {recording_path} holds no Velodyne data packet ({PACKET_BYTES} bytes)")
    notes = []
    try:
        if cal_path.lower().endswith(".xml"):  # a db.xml: velodyne-decoder reads the YAML it converts to
            import yaml

            calibration = vd.Calibration.from_string(yaml.safe_dump(velodyne_xml(cal_path)))
        else:
            calibration = vd.Calibration.read(cal_path)
        unit_m = DISTANCE_UNIT_M.get(data[0][1][-1])
        text = calibration.to_string()
        stated = next((float(line.split(":")[1]) for line in text.splitlines()
                       if line.startswith("distance_resolution:")), None)
        if unit_m is not None and stated is not None and abs(stated - unit_m) > 1e-6:
            notes.append(f"{os.path.basename(cal_path)} gives a distance resolution of {stated * 1000:g} mm; the "
                         f"packets' model measures in {unit_m * 1000:g} mm, which is used")
            calibration = vd.Calibration.from_string("\n".join(
                f"distance_resolution: {unit_m}" if line.startswith("distance_resolution:") else line
                for line in text.splitlines()))
        config = vd.Config(calibration=calibration, min_range=0.0, max_range=1e4)
        if lasers == 64:  # an HDL-64E: its packets carry no model id
            config.model = vd.Model.HDL64E_S3 if "S3" in os.path.basename(cal_path).upper() else vd.Model.HDL64E_S2
        decoder = vd.ScanDecoder(config)
        stamp, points = decoder.decode(vd.PacketVector([vd.VelodynePacket(float(t), p) for t, p in data]),
                                       as_pcl_structs=True)
    except (RuntimeError, ValueError) as exc:  # velodyne-decoder's errors on foreign packets or calibrations
        raise RecordingError(f"velodyne-decoder cannot decode {recording_path} with {os.path.basename(cal_path)}: "
                             f"{exc}") from None
    model = decoder.model_id.name if decoder.model_id is not None else "unknown"
    mode = decoder.return_mode.name if decoder.return_mode is not None else "unknown"
    return model, mode, points, float(stamp.device), notes


def velodyne_firings(points: np.ndarray, cal: VelodyneCalibration, stamp_s: float) -> tuple[Firings, np.ndarray]:
    """(firings, laser id of each vd ring) of velodyne-decoder's points (module doc): one firing per (ring,
    column), its strongest return first and its last second."""
    by_elevation = np.argsort(cal.vert_correction_rad, kind="stable")  # vd's ring r is laser by_elevation[r]
    laser = by_elevation[points["ring"].astype(np.int64)]
    xyz = np.stack([points["x"], points["y"], points["z"]], axis=1).astype(np.float64)
    azimuth = np.arctan2(xyz[:, 1], xyz[:, 0])  # the laser's own azimuth, refined past its origin below
    for _ in range(2):
        origin, _ = beam_geometry(cal, laser, azimuth - cal.rot_correction_rad[laser])
        azimuth = np.arctan2(xyz[:, 1] - origin[:, 1], xyz[:, 0] - origin[:, 0])
    range_m = np.linalg.norm(xyz - origin, axis=1)
    key = points["column"].astype(np.int64) * len(cal.laser_id) + laser
    strongest = (points["return_type"] & 1).astype(bool)
    order = np.lexsort((~strongest, key))  # per firing: its strongest first
    key, first = key[order], np.ones(len(order), bool)
    first[1:] = key[1:] != key[:-1]
    head = order[first]
    second = np.zeros(len(head))
    second_refl = np.zeros(len(head))
    other = order[~first]  # a firing's second point: its last return
    slot = np.searchsorted(key[first], key[~first])
    second[slot] = range_m[other]
    second_refl[slot] = points["intensity"][other]
    dual = bool((points["return_type"] != points["return_type"][0]).any() or len(other))
    time_ns = np.rint((stamp_s + points["time"][head].astype(np.float64)) * 1e9).astype(np.int64)
    firings = Firings(laser[head], np.mod(-np.degrees(azimuth[head]), 360.0), time_ns, range_m[head],
                      points["intensity"][head].astype(np.float64), second if dual else None,
                      second_refl if dual else None)
    return firings, by_elevation


def open_velodyne(recording_path: str, unit: UnitFile) -> tuple[Recording, BinnedGeometry]:
    """A Velodyne recording (capture or bag) and its unit (``unit``: a calibration YAML or a ``velodyne_*``
    preset). One line where the recording is no Velodyne capture or its unit does not match."""
    return open_binned(recording_path, unit, "Velodyne", _binned_unit)


def _binned_unit(recording_path: str, unit: UnitFile) -> BinnedUnit:
    cal: VelodyneCalibration = unit.calibration
    model, mode, points, stamp_s, notes = decode_velodyne(recording_path, unit.path, cal.lasers)
    if not len(points):
        raise RecordingError(f"recording {recording_path} holds no return")
    if model not in MODEL_PRESETS:
        raise RecordingError(f"recording {recording_path}: velodyne-decoder found a {model}, a model without a preset "
                             "here")
    if int(points["ring"].max()) >= cal.lasers:
        raise RecordingError(f"recording {recording_path} is a {model}, but {os.path.basename(unit.path)} calibrates "
                             f"{cal.lasers} lasers")
    firings, by_elevation = velodyne_firings(points, cal, stamp_s)
    step = sweep_rate_deg_per_s(firings) * SEQUENCE_S[model]  # the sweep of one firing sequence
    if not step > 0:
        raise RecordingError(f"recording {recording_path}: the head is not turning")
    profile = f"Velodyne {model}, {'dual' if firings.range2_m is not None else 'single'} return ({mode.lower()})"

    def origin(laser, azimuth):
        return beam_geometry(cal, laser, azimuth - cal.rot_correction_rad[laser])[0]

    offsets = np.any(cal.vert_offset_m) or np.any(cal.horiz_offset_m)
    return BinnedUnit(model, profile, firings, by_elevation[::-1], cal.vert_correction_rad, step, False,
                      {"preset": unit.preset or MODEL_PRESETS[model], "calibration": os.path.abspath(unit.path)},
                      origin=origin if offsets else None, calibration_notes=tuple(notes))
