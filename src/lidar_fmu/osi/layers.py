"""The OSI layers a lidar publishes beside its detections: reflections and logical detections (the moving objects:
:mod:`.objects`), each serialized whole for :func:`~lidar_fmu.osi.encode.encode_lidars_buffer`'s ``layers``.

* ``sensor_view[k].lidar_sensor_view[0]``: lidar k's ``view_configuration`` (the step's rays: ``directions``,
  ``timings``) and one ``reflection`` per ray in that order: ``time_of_flight`` = 2·range/c, ``signal_strength``
  the echo's relative power (:func:`~lidar_fmu.physics.range_limit.relative_power_db`), ``doppler_shift`` =
  −2·(dr/dt)/λ (Hz, positive approaching), ``normal_to_surface`` (sensor frame), ``object_id``. A ray with no
  reported return gives ``signal_strength`` = −∞ dB alone; a ray of several echoes gives its nearest.
* ``logical_detection_data``: one logical detection per detection, every lidar's, in the vehicle frame
  (mounting applied), with intensity, ``snr`` (relative power over the unit's detection floor,
  :func:`~lidar_fmu.physics.range_limit.detection_floor_db`), ``sensor_id`` and the classification the point's
  semantic class gives (:data:`LOGICAL_CLASSIFICATION`).

Written by Numba kernels in protobuf wire format, as the detections are: the bytes are what ``SerializeToString()``
of the same message gives. Conventions, units and frames: docs/fmu.md#osi-layers.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange
from osi3.osi_logicaldetectiondata_pb2 import LogicalDetectionData, LogicalDetectionDataHeader
from osi3.osi_sensorview_pb2 import SensorView

from ..geometry import semantic
from ..parallel import side_by_side
from ..physics.range_limit import detection_floor_db, relative_power_db
from ..pointcloud import PointCloud
from ..sensors import Sensor
from .config import SPEED_OF_LIGHT_M_S, directions_bytes, lidar_view_configuration
from .encode import (
    InPlace,
    OtherLayers,
    default_interface_version,
    put_double,
    put_identifier,
    put_varint,
    set_mounting_position,
    set_timestamp,
    varint,
    varint_bytes,
    wire_tag,
)
from .objects import ObjectList, ObjectReturns, posed_xyz

_WIRE_VARINT, _WIRE_FIXED64, _WIRE_LEN = 0, 1, 2
# LidarSensorView.Reflection: signal_strength 1, time_of_flight 2, doppler_shift 3, normal_to_surface 5, object_id 6
_T_STRENGTH, _T_TOF, _T_DOPPLER = (wire_tag(n, _WIRE_FIXED64) for n in (1, 2, 3))
_T_NORMAL, _T_REFLECTION_OBJECT = wire_tag(5, _WIRE_LEN), wire_tag(6, _WIRE_LEN)
_T_REFLECTION = wire_tag(2, _WIRE_LEN)  # LidarSensorView.reflection
_T_X, _T_Y, _T_Z = (wire_tag(n, _WIRE_FIXED64) for n in (1, 2, 3))  # Vector3d
_T_TIMING = wire_tag(12, _WIRE_VARINT)  # LidarSensorViewConfiguration.timings (uint32, not packed: proto2)
# LogicalDetection: existence_probability 1, object_id 2, position 3, intensity 7, snr 8, sensor_id 10,
# classification 11, echo_pulse_width 12
_T_EXISTENCE, _T_LD_OBJECT, _T_POSITION = wire_tag(1, _WIRE_FIXED64), wire_tag(2, _WIRE_LEN), wire_tag(3, _WIRE_LEN)
_T_INTENSITY, _T_SNR = wire_tag(7, _WIRE_FIXED64), wire_tag(8, _WIRE_FIXED64)
_T_SENSOR_ID, _T_CLASSIFICATION = wire_tag(10, _WIRE_LEN), wire_tag(11, _WIRE_VARINT)
_T_PULSE_WIDTH = wire_tag(12, _WIRE_FIXED64)
_T_LOGICAL_DETECTION = wire_tag(3, _WIRE_LEN)  # LogicalDetectionData.logical_detection
_SENSOR_VIEW_FIELD, _LIDAR_SENSOR_VIEW_FIELD, _LOGICAL_DATA_FIELD = 8, 1002, 27

_CLASSIFICATION = LogicalDetectionData.DESCRIPTOR.file.enum_types_by_name["LogicalDetectionClassification"]
_OVERDRIVABLE = _CLASSIFICATION.values_by_name["LOGICAL_DETECTION_CLASSIFICATION_OVERDRIVABLE"].number
_CLUTTER = _CLASSIFICATION.values_by_name["LOGICAL_DETECTION_CLASSIFICATION_CLUTTER"].number
_OTHER = _CLASSIFICATION.values_by_name["LOGICAL_DETECTION_CLASSIFICATION_OTHER"].number
_UNKNOWN = _CLASSIFICATION.values_by_name["LOGICAL_DETECTION_CLASSIFICATION_UNKNOWN"].number
#: OSI LogicalDetectionClassification of each semantic class, by code: the ground's surfaces a car drives over,
#: weather echoes clutter, every other known class an obstacle (OTHER), unlabelled UNKNOWN. OSI's UNDERDRIVABLE
#: needs what lies below a surface, which a point's class does not say: no class gives it.
LOGICAL_CLASSIFICATION = np.full(len(semantic.SEMANTIC_TABLE), _OTHER, np.uint8)
LOGICAL_CLASSIFICATION[[semantic.ROAD, semantic.LANE_MARKING, semantic.KERB, semantic.SIDEWALK,
                        semantic.TERRAIN]] = _OVERDRIVABLE
LOGICAL_CLASSIFICATION[semantic.WEATHER] = _CLUTTER
LOGICAL_CLASSIFICATION[semantic.UNLABELLED] = _UNKNOWN


class LayerLidar(NamedTuple):
    """One lidar's part of the layers: its step's cloud (sensor frame, with its ray pattern), the sensor it is,
    where it sits (4×4 vehicle_from_sensor) and its id."""

    cloud: PointCloud
    sensor: Sensor
    mounting: np.ndarray
    sensor_id: int


@njit(cache=True, nogil=True, parallel=True)
def relative_powers(points, range_offset_m):
    """(M,) float64: each point's received power (dB, :func:`~lidar_fmu.physics.range_limit.relative_power_db`),
    its light's path the ``range`` less the unit's ``range_offset_m`` (along the beam from its origin)."""
    out = np.empty(points.shape[0])
    for k in prange(points.shape[0]):
        out[k] = relative_power_db(np.float64(points[k].reflectivity), np.float64(points[k].range) - range_offset_m)
    return out


def cloud_powers(cloud: PointCloud) -> np.ndarray:
    """:func:`relative_powers` of a step's cloud, at its pattern's range offset (none without a pattern)."""
    return relative_powers(np.ascontiguousarray(cloud.points),
                           0.0 if cloud.pattern is None else float(cloud.pattern.range_offset_m))


# ---------------------------------------------------------------- reflections


@njit(cache=True, nogil=True)
def _nearest_per_ray(ray_index, range_m, rays):
    """(rays,) the index of each ray's nearest return, −1 for a ray without one."""
    nearest = np.full(rays, -1, np.int64)
    for k in range(ray_index.shape[0]):
        r = ray_index[k]
        if nearest[r] < 0 or range_m[k] < range_m[nearest[r]]:
            nearest[r] = k
    return nearest


@njit(cache=True, nogil=True)
def _reflections_nbytes(points, nearest):
    total = 0
    for r in range(nearest.shape[0]):
        k = nearest[r]
        # miss: signal_strength alone; hit: three doubles, the normal (2 + 27) and the object id (3 + varint)
        total += 2 + (9 if k < 0 else 27 + 29 + 3 + varint_bytes(points[k].object_id))
    return total


@njit(cache=True, nogil=True, error_model="numpy")
def _write_reflections(buf, points, nearest, power_db, range_offset_m, radial_velocity, metres_to_hz):
    """Each ray's reflection (module doc) into ``buf`` (exactly their bytes); ``power_db`` each point's
    :func:`relative_powers`; ``radial_velocity`` one dr/dt per point, or empty (all 0); ``metres_to_hz`` = 2/λ."""
    pos = 0
    with_velocity = radial_velocity.shape[0] > 0
    for r in range(nearest.shape[0]):
        k = nearest[r]
        buf[pos] = _T_REFLECTION
        if k < 0:
            buf[pos + 1] = 9
            pos = put_double(buf, pos + 2, _T_STRENGTH, -np.inf)
            continue
        p = points[k]
        buf[pos + 1] = 27 + 29 + 3 + varint_bytes(p.object_id)
        beam_m = np.float64(p.range) - range_offset_m  # the light's path is along the beam from its origin
        pos = put_double(buf, pos + 2, _T_STRENGTH, power_db[k])
        pos = put_double(buf, pos, _T_TOF, 2.0 * beam_m / SPEED_OF_LIGHT_M_S)
        doppler = -np.float64(radial_velocity[k]) * metres_to_hz if with_velocity else 0.0
        pos = put_double(buf, pos, _T_DOPPLER, doppler)
        buf[pos] = _T_NORMAL
        buf[pos + 1] = 27
        pos = put_double(buf, pos + 2, _T_X, np.float64(p.normal_x))
        pos = put_double(buf, pos, _T_Y, np.float64(p.normal_y))
        pos = put_double(buf, pos, _T_Z, np.float64(p.normal_z))
        pos = put_identifier(buf, pos, _T_REFLECTION_OBJECT, p.object_id)
    return pos


@njit(cache=True, nogil=True)
def _timings_bytes(microseconds):
    """``repeated uint32 timings`` (one tag and varint each)."""
    total = 0
    for i in range(microseconds.shape[0]):
        total += 1 + varint_bytes(microseconds[i])
    buf = np.empty(total + 10, np.uint8)  # (the varint writer's fast path may write 10 bytes past the last)
    pos = 0
    for i in range(microseconds.shape[0]):
        buf[pos] = _T_TIMING
        pos = put_varint(buf, pos + 1, microseconds[i])
    return buf[:total]


def reflections_piece(cloud, rays: int, range_offset_m: float, wavelength_nm: float, power_db: np.ndarray) -> InPlace:
    """The ``reflection`` fields of ``cloud``'s ``rays`` rays (module doc), in ray order; ``power_db``: its points'
    :func:`relative_powers` (at ``range_offset_m``)."""
    points = np.ascontiguousarray(cloud.points)
    nearest = _nearest_per_ray(np.ascontiguousarray(cloud.ray_index, np.int64), points["range"], rays)
    velocity = cloud.radial_velocity_m_s
    velocity = np.empty(0, np.float32) if velocity is None else np.ascontiguousarray(velocity, np.float32)
    return InPlace(_reflections_nbytes(points, nearest), lambda view: _write_reflections(
        view, points, nearest, power_db, float(range_offset_m), velocity, 2.0 / (wavelength_nm * 1e-9)))


class ViewConfigurations:
    """A lidar's step ``view_configuration`` bytes, kept while its rays and mounting stay (every full-frame step of
    a spinning unit fires the same pattern)."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._bytes = b""

    def of(self, sensor, pattern, mounting: np.ndarray, sensor_id: int) -> bytes:
        key = (pattern, mounting.tobytes(), sensor_id)
        if self._key is None or self._key[0] is not pattern or self._key[1:] != key[1:]:
            config = lidar_view_configuration(sensor, pattern, mounting, sensor_id).SerializeToString()
            microseconds = np.round(np.maximum(pattern.time_offset_s.astype(np.float64), 0.0) * 1e6).astype(np.uint64)
            self._bytes = config + directions_bytes(pattern.directions) + _timings_bytes(microseconds).tobytes()
            self._key = key
        return self._bytes


def _length_prefix(field_number: int, nbytes: int) -> bytes:
    return varint(wire_tag(field_number, _WIRE_LEN)) + varint(nbytes)


def sensor_view_pieces(lidar: LayerLidar, power_db: np.ndarray, config: ViewConfigurations, timestamp_s: float,
                       host=None) -> list:
    """One ``sensor_view`` (SensorData field 8, tag and length included) holding ``lidar``'s reflections (its
    points' :func:`relative_powers` ``power_db``), as pieces (bytes and uint8 arrays) that follow one another;
    ``host``: the input view's host vehicle
    (:class:`~lidar_fmu.osi.decode.ObjectState`), named by ``host_vehicle_id`` and carried as the one moving object
    of ``global_ground_truth`` (OSI's rules ask a SensorView for its host, and the id must resolve), where it has
    one."""
    cloud, sensor = lidar.cloud, lidar.sensor
    view = SensorView()
    view.version.CopyFrom(default_interface_version())
    set_timestamp(view.timestamp, timestamp_s)
    view.sensor_id.value = int(lidar.sensor_id)
    if host is not None:
        view.host_vehicle_id.value = int(host.id)
        truth = view.global_ground_truth
        truth.version.CopyFrom(default_interface_version())
        set_timestamp(truth.timestamp, timestamp_s)
        truth.host_vehicle_id.value = int(host.id)
        moving = truth.moving_object.add()
        moving.id.value = int(host.id)
        moving.type = moving.TYPE_VEHICLE
        base = moving.base
        base.position.x, base.position.y, base.position.z = (float(v) for v in host.position_m)
        base.orientation.roll, base.orientation.pitch, base.orientation.yaw = (float(v) for v in host.orientation_rad)
        base.dimension.length, base.dimension.width, base.dimension.height = (float(v) for v in host.dimension_m)
        # a vehicle's attributes and classification must be set: what the input said of them, else present empty
        moving.vehicle_classification.SetInParent()
        moving.vehicle_attributes.SetInParent()
        if host.bbcenter_to_rear_m is not None:
            rear = moving.vehicle_attributes.bbcenter_to_rear
            rear.x, rear.y, rear.z = (float(v) for v in host.bbcenter_to_rear_m)
    set_mounting_position(view.mounting_position, lidar.mounting)
    pattern = cloud.pattern
    if pattern is None:  # nothing fired this step: a configuration of no rays
        configuration = lidar_view_configuration(sensor, sensor.pattern, lidar.mounting,
                                                 lidar.sensor_id).SerializeToString()
        reflections: bytes | InPlace = b""
    else:
        configuration = config.of(sensor, pattern, lidar.mounting, lidar.sensor_id)
        reflections = reflections_piece(cloud, len(pattern), pattern.range_offset_m, sensor.wavelength_nm, power_db)
    lidar_view = _length_prefix(1, len(configuration))
    lidar_view_nbytes = len(lidar_view) + len(configuration) + len(reflections)
    head = view.SerializeToString() + _length_prefix(_LIDAR_SENSOR_VIEW_FIELD, lidar_view_nbytes) + lidar_view
    return [_length_prefix(_SENSOR_VIEW_FIELD, len(head) + len(configuration) + len(reflections)) + head,
            configuration, reflections]


# ------------------------------------------------------------ logical detections


@njit(cache=True, nogil=True)
def _logical_nbytes(points, sensor_id, with_snr, with_pulse):
    fixed = 9 + 3 + (2 + 27) + 9 + (9 if with_snr else 0) + 3 + varint_bytes(sensor_id) + 2 + (9 if with_pulse else 0)
    total = 0
    for k in range(points.shape[0]):
        total += 2 + fixed + varint_bytes(points[k].object_id)
    return total


@njit(cache=True, nogil=True, error_model="numpy")
def _write_logical(buf, pos, points, mounting, existence, intensity, power_db, snr_floor_db, sensor_id,
                   classification, pulse_width):
    """Each point's logical detection (module doc) from ``pos``; ``mounting`` (4×4 vehicle_from_sensor) places the
    points in the vehicle frame; ``existence``, ``intensity`` one per point or one for all; ``power_db`` each
    point's :func:`relative_powers`, ``snr_floor_db`` NaN: no snr; ``pulse_width`` one per point or empty (not
    written)."""
    with_snr = snr_floor_db == snr_floor_db
    with_pulse = pulse_width.shape[0] > 0
    one_existence = existence.shape[0] == 1
    derive_intensity = intensity.shape[0] == 0
    fixed = 9 + 3 + (2 + 27) + 9 + (9 if with_snr else 0) + 3 + varint_bytes(sensor_id) + 2 + (9 if with_pulse else 0)
    for k in range(points.shape[0]):
        p = points[k]
        buf[pos] = _T_LOGICAL_DETECTION
        buf[pos + 1] = fixed + varint_bytes(p.object_id)
        pos = put_double(buf, pos + 2, _T_EXISTENCE, existence[0] if one_existence else existence[k])
        pos = put_identifier(buf, pos, _T_LD_OBJECT, p.object_id)
        x, y, z = posed_xyz(mounting, np.float64(p.x), np.float64(p.y), np.float64(p.z))
        buf[pos] = _T_POSITION
        buf[pos + 1] = 27
        pos = put_double(buf, pos + 2, _T_X, x)
        pos = put_double(buf, pos, _T_Y, y)
        pos = put_double(buf, pos, _T_Z, z)
        pos = put_double(buf, pos, _T_INTENSITY,
                         np.float64(p.reflectivity) * 100.0 if derive_intensity else intensity[k])
        if with_snr:
            pos = put_double(buf, pos, _T_SNR, power_db[k] - snr_floor_db)
        pos = put_identifier(buf, pos, _T_SENSOR_ID, sensor_id)
        buf[pos] = _T_CLASSIFICATION
        buf[pos + 1] = classification[k]
        pos += 2
        if with_pulse:
            pos = put_double(buf, pos, _T_PULSE_WIDTH, pulse_width[k])
    return pos


def _logical_records(lidar: LayerLidar, power_db: np.ndarray, existence, intensity, pulse_width) -> InPlace:
    cloud, sensor = lidar.cloud, lidar.sensor
    points = np.ascontiguousarray(cloud.points)
    m = len(points)
    floor = detection_floor_db(sensor.range_limit)
    pulse = np.empty(0, np.float64) if pulse_width is None else np.ascontiguousarray(pulse_width, np.float64)
    codes = cloud.semantic
    classification = (np.full(m, _UNKNOWN, np.uint8) if codes is None
                      else LOGICAL_CLASSIFICATION[np.minimum(np.asarray(codes, np.int64), len(LOGICAL_CLASSIFICATION) - 1)])
    sensor_id = np.uint64(lidar.sensor_id)
    nbytes = _logical_nbytes(points, sensor_id, floor is not None, len(pulse) > 0)
    existence = np.ascontiguousarray(np.asarray(existence, np.float64).reshape(-1))
    intensity = np.empty(0) if intensity is None else np.ascontiguousarray(intensity, np.float64)
    mounting = np.ascontiguousarray(lidar.mounting, np.float64)
    return InPlace(nbytes, lambda view: _write_logical(view, 0, points, mounting, existence, intensity, power_db,
                                                       np.nan if floor is None else floor, sensor_id,
                                                       np.ascontiguousarray(classification), pulse))


def logical_pieces(lidars: list[LayerLidar], powers_db: list[np.ndarray], timestamp_s: float) -> list:
    """``logical_detection_data`` (SensorData field 27, tag and length included): every lidar's detections in the
    vehicle frame (each by its mounting), their snr from ``powers_db`` (each lidar's :func:`cloud_powers`), as
    pieces (bytes and uint8 arrays)."""
    data = LogicalDetectionData()
    data.version.CopyFrom(default_interface_version())
    header = data.header
    set_timestamp(header.logical_detection_time, timestamp_s)
    header.data_qualifier = LogicalDetectionDataHeader.DATA_QUALIFIER_AVAILABLE
    header.number_of_valid_logical_detections = sum(len(lidar.cloud) for lidar in lidars)
    for lidar in lidars:
        header.sensor_id.add().value = int(lidar.sensor_id)
    records = [_logical_records(lidar, power_db, 1.0 if lidar.cloud.existence_probability is None
                                else lidar.cloud.existence_probability, lidar.cloud.intensity_percent,
                                lidar.cloud.echo_pulse_width_m) for lidar, power_db in zip(lidars, powers_db)]
    head = data.SerializeToString()
    return [_length_prefix(_LOGICAL_DATA_FIELD, len(head) + sum(len(r) for r in records)) + head, *records]




class LayerEncoder:
    """A model's layers beside its detections (``outputs``: :data:`~lidar_fmu.sensors.outputs.OUTPUT_LAYERS`),
    step by step: keeps each lidar's view configuration and the object list's ages between steps."""

    def __init__(self, outputs: tuple[str, ...]):
        self.outputs = outputs
        self._configs: dict[int, ViewConfigurations] = {}
        self._objects = ObjectList()

    def layers(self, lidars: list[LayerLidar], frame, timestamp_s: float, cycle_counter: int) -> OtherLayers:
        """This step's layers: ``lidars`` in rig order (the first one's mounting is the SensorData's, which the
        objects are reported in), ``frame`` the decoded SensorView (its moving objects and host). The layers are
        built side by side (their kernels release the GIL): the object list, and the reflections and logical
        detections, which take each echo's relative power from one pass."""
        def per_ray_and_point() -> dict:
            powers = [cloud_powers(lidar.cloud) for lidar in lidars]
            host = None if frame is None else frame.host()
            built = {}
            if "reflections" in self.outputs:
                built["reflections"] = [
                    piece for k, (lidar, power_db) in enumerate(zip(lidars, powers))
                    for piece in sensor_view_pieces(lidar, power_db, self._configs.setdefault(k, ViewConfigurations()),
                                                    timestamp_s, host)]
            if "logical" in self.outputs:
                built["logical"] = logical_pieces(lidars, powers, timestamp_s)
            return built

        def objects() -> dict:
            returns = [ObjectReturns(lidar.cloud.points, lidar.mounting, 1.0 if lidar.cloud.existence_probability
                                     is None else lidar.cloud.existence_probability, lidar.sensor_id)
                       for lidar in lidars]
            return {"objects": self._objects.serialized(returns, frame, lidars[0].mounting, timestamp_s,
                                                        cycle_counter)}

        tasks = [task for task, wanted in ((objects, "objects" in self.outputs), (per_ray_and_point, (
            "reflections" in self.outputs or "logical" in self.outputs))) if wanted]
        built: dict = {}
        for part in side_by_side(lambda build: build(), [(task,) for task in tasks]):
            built.update(part)
        return OtherLayers(tuple(built.get("reflections", ())), built.get("objects", b""),
                           tuple(built.get("logical", ())), "detections" in self.outputs)


__all__ = ["LOGICAL_CLASSIFICATION", "LayerEncoder", "LayerLidar", "ViewConfigurations", "cloud_powers",
           "logical_pieces", "reflections_piece", "relative_powers", "sensor_view_pieces"]
