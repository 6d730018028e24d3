"""An Ouster unit's own metadata as a sensor, held against ouster-sdk (XYZLut of the same unit, kept as data)."""
import os

import numpy as np
import pytest
import trimesh

from lidar_fmu import Lidar, Scene, load_sensor
from lidar_fmu.geometry.scene import Mesh
from lidar_fmu.raycast import make_backend
from lidar_fmu.sensors.spec import SensorSpecError

DATA = os.path.join(os.path.dirname(__file__), "data")
REFERENCE = os.path.join(DATA, "ouster_os1_128_xyzlut_every7.npz")
#: a second unit, firmware 3.1 metadata (beam_to_lidar_transform: 16.721 mm) and ouster-sdk's XYZLut of it
FW31_METADATA = os.path.join(DATA, "ouster_os1_128_fw3.1_122246000293.json")
FW31_REFERENCE = os.path.join(DATA, "ouster_os1_128_fw3.1_xyzlut_every7.npz")


@pytest.fixture(scope="module")
def sdk():
    """ouster-sdk's rays for every 7th pixel (scripts/ouster_reference.py): offset + r·direction, r in mm."""
    return np.load(REFERENCE)


def test_the_calibrated_pattern_is_the_units(sdk):
    sensor = load_sensor("ouster_os1_128_cal")
    p = sensor.pattern
    assert (p.rows, p.columns, len(p)) == (128, 1024, 131072) and sensor.frame_rate_hz == 10.0
    ray = sdk["column"] * 128 + sdk["beam"]  # our rays are column-major
    assert np.array_equal(p.beam_id[ray], sdk["beam"]) and np.array_equal(p.column[ray], sdk["column"])
    # the same line: our origin + t·d against ouster-sdk's offset + r·direction, r = t + 15.806 mm
    n_mm = 15.806
    for t_m in (0.5, 20.0, 120.0):
        ours = p.origins[ray].astype(np.float64) + t_m * p.directions[ray].astype(np.float64)
        theirs = sdk["offset_m"] + (t_m * 1e3 + n_mm) * sdk["direction_m_per_mm"]
        assert np.abs(ours - theirs).max() < 2e-5 * (1 + t_m), t_m  # float32 rounding only
    # beam origins on the 15.8 mm circle, 36.18 mm above the sensor frame's origin (lidar_to_sensor)
    radius = np.hypot(p.origins[:, 0], p.origins[:, 1])
    assert np.allclose(radius, 0.015806, atol=1e-6) and np.allclose(p.origins[:, 2], 0.03618, atol=1e-6)
    # elevations as the unit's calibration gives them, not the datasheet's even ±22.5°
    elevation = np.degrees(p.elevation_rad[:128])
    assert elevation.max() == pytest.approx(20.95, abs=0.01) and elevation.min() == pytest.approx(-21.82, abs=0.01)
    # columns fire evenly over the 100 ms turn
    assert p.time_offset_s[128] == pytest.approx(1e-1 / 1024) and p.time_offset_s.max() < 0.1


def test_points_in_a_closed_sphere_lie_on_the_units_rays_within_2_mm(sdk):
    """The issue's check: every point where the unit's XYZLut ray meets the sphere, within 2 mm."""
    tm = trimesh.creation.icosphere(subdivisions=6, radius=12.0)
    sphere = Mesh(tm.vertices, tm.faces, np.zeros(len(tm.faces), np.int32), ("wall",), "sphere")
    scene = Scene.from_meshes([sphere])
    cloud = Lidar(scene, "ouster_os1_128_cal", backend="embree").scan(np.eye(4))
    assert len(cloud) == 131072  # closed: every ray returns
    ray = sdk["column"] * 128 + sdk["beam"]
    position = {i: k for k, i in enumerate(cloud.ray_index)}
    rows = np.array([position[i] for i in ray])
    ours = np.stack([cloud.points[c][rows] for c in ("x", "y", "z")], axis=1).astype(np.float64)
    # the unit's rays, cast into the same mesh: offset + s·direction (unit direction, s in m)
    direction = sdk["direction_m_per_mm"] / np.linalg.norm(sdk["direction_m_per_mm"], axis=1, keepdims=True)
    hits = make_backend("embree", scene).cast(sdk["offset_m"].astype(np.float32), direction.astype(np.float32))
    theirs = sdk["offset_m"] + hits.range_m[:, None].astype(np.float64) * direction
    assert hits.hit.all()
    error_m = np.linalg.norm(ours - theirs, axis=1)
    assert error_m.max() < 2e-3, error_m.max()
    # the reported range is the unit's RANGE: ouster-sdk puts a pixel at offset + RANGE·direction, so RANGE is the
    # distance from the XYZLut's offset (not from the beam origin, 15.8 mm further out), as cast above
    assert np.abs(cloud.points["range"][rows] - hits.range_m).max() < 2e-3


def test_a_units_metadata_file_is_a_sensor_spec(tmp_path):
    import json
    import shutil

    source = os.path.join(os.path.dirname(__file__), "..", "src", "lidar_fmu", "sensors", "data",
                          "ouster_os1_128_v2.3.0_1024x10.json")
    legacy = tmp_path / "unit.json"
    shutil.copy(source, legacy)
    sensor = load_sensor(str(legacy))
    assert sensor.name == "unit" and len(sensor.pattern) == 131072 and sensor.pattern.origins is not None
    # the current layout (firmware ≥ 2.4 metadata: beam_intrinsics, lidar_intrinsics, ...) reads the same
    flat = json.loads(legacy.read_text())
    current = {
        "beam_intrinsics": {k: flat[k] for k in ("beam_altitude_angles", "beam_azimuth_angles",
                                                 "lidar_origin_to_beam_origin_mm")},
        "lidar_intrinsics": {"lidar_to_sensor_transform": flat["lidar_to_sensor_transform"]},
        "config_params": {"lidar_mode": "1024x20"},
        "lidar_data_format": {"column_window": [0, 1023], "columns_per_frame": 1024, "pixels_per_column": 128},
        "sensor_info": {k: flat[k] for k in ("prod_line", "prod_pn", "build_rev")},
    }
    path = tmp_path / "current.json"
    path.write_text(json.dumps(current))
    fast = load_sensor(str(path))
    assert fast.frame_rate_hz == 20.0 and np.allclose(fast.pattern.directions, sensor.pattern.directions)
    assert fast.pattern.time_offset_s.max() < 0.05


def test_a_second_unit_with_firmware_3_1_metadata_matches_ouster_sdk():
    """The other shared OS-1-128 (beam origins from beam_to_lidar_transform, 16.721 mm): its metadata file as the
    sensor spec, our lines against ouster-sdk's XYZLut of that unit for every 7th pixel, and the closed sphere."""
    from lidar_fmu.sensors.ouster import read_ouster_metadata

    sdk = np.load(FW31_REFERENCE)
    n_mm = read_ouster_metadata(FW31_METADATA).beam_origin_mm
    assert n_mm == pytest.approx(16.721)
    p = load_sensor(FW31_METADATA).pattern
    ray = sdk["column"] * 128 + sdk["beam"]
    for t_m in (0.5, 20.0, 120.0):
        ours = p.origins[ray].astype(np.float64) + t_m * p.directions[ray].astype(np.float64)
        theirs = sdk["offset_m"] + (t_m * 1e3 + n_mm) * sdk["direction_m_per_mm"]
        assert np.abs(ours - theirs).max() < 2e-5 * (1 + t_m), t_m
    tm = trimesh.creation.icosphere(subdivisions=5, radius=12.0)
    scene = Scene.from_meshes([Mesh(tm.vertices, tm.faces, np.zeros(len(tm.faces), np.int32), ("wall",), "sphere")])
    cloud = Lidar(scene, FW31_METADATA, backend="embree").scan(np.eye(4))
    rows = np.searchsorted(cloud.ray_index, ray)
    assert len(cloud) == 131072 and np.array_equal(cloud.ray_index[rows], ray)
    direction = sdk["direction_m_per_mm"] / np.linalg.norm(sdk["direction_m_per_mm"], axis=1, keepdims=True)
    hits = make_backend("embree", scene).cast(sdk["offset_m"].astype(np.float32), direction.astype(np.float32))
    theirs = sdk["offset_m"] + hits.range_m[:, None].astype(np.float64) * direction
    assert np.linalg.norm(cloud.xyz[rows].astype(np.float64) - theirs, axis=1).max() < 2e-3


# ---------------------------------------------------------------- which unit: prod_line and revision

UNITS = os.path.join(DATA, "ouster")  # the shared recordings' own metadata JSONs (NOTICE.md there)
LEGACY_32 = os.path.join(UNITS, "OS-1-32-G_v2.1.1_1024x10.json")  # legacy flat layout, firmware 2.1.1
CURRENT_128 = os.path.join(UNITS, "OS-1-128_767798045_1024x10_20230712_120049.json")  # current layout, fw 3.1


def unit_file(tmp_path, source, **sensor_info):
    """``source``'s metadata with its sensor_info fields replaced (a key set to None is removed)."""
    import json

    doc = json.loads(open(source).read())
    info = doc["sensor_info"] if "sensor_info" in doc else doc
    for key, value in sensor_info.items():
        info.pop(key, None)
        if value is not None:
            info[key] = value
    path = tmp_path / "unit.json"
    path.write_text(json.dumps(doc))
    return str(path)


def figures(sensor):
    """(min m, max m, [(reflectivity, range m), …] at > 90 % detection, range accuracy m) of a loaded sensor."""
    pairs = sensor.spec["range_reflectivity"]["pairs"]
    return (sensor.min_range_m, sensor.max_range_m, [tuple(p) for p in pairs], sensor.spec["range_accuracy_m"])


# (metadata, prod_line, prod_pn, build_rev) → the datasheet's (min, max, pairs, accuracy), as docs/sensors.md
# tabulates them: each line and revision resolves to its own figures, none to the OS1's
LINES = [
    ("OS-1-64", "840-101396-03", "v1.13.0", (0.8, 120.0, [(0.10, 40.0), (0.80, 120.0)], 0.03)),  # gen 1 by fw
    ("OS-0-128", "840-103574-06", "v2.3.0", (0.3, 50.0, [(0.10, 15.0), (0.80, 45.0)], 0.03)),
    # OS1 Rev 06: the figures fitted on the shared recordings replace the datasheet's range figures
    ("OS-1-128", "840-103575-06", "v2.3.0", (0.039, 249.4, [(0.005, 18.947), (1.0, 110.805)], 0.03)),
    ("OS-2-128", "840-103576-06", "v2.3.0", (1.0, 240.0, [(0.10, 80.0), (0.80, 210.0)], 0.03)),
    ("OS-0-32-G", "840-105008-070-A", "v3.0.1", (0.5, 75.0, [(0.10, 35.0), (0.80, 75.0)], 0.025)),
    ("OS-1-64-U", "840-105010-071-B", "v3.1.0", (0.5, 170.0, [(0.10, 90.0), (0.80, 170.0)], 0.025)),
    ("OS-2-128", "840-105012-07", "v2.5.2", (0.8, 350.0, [(0.10, 200.0), (0.80, 350.0)], 0.025)),
    ("OS-DOME-128", "", "v3.1.0", (0.5, 45.0, [(0.10, 20.0), (0.80, 45.0)], 0.025)),  # the OSDome's only rev
    ("OS-1-128", "840-106000-080-A", "v4.0.0", (0.5, 170.0, [(0.10, 90.0), (0.80, 170.0)], 0.025)),  # Rev 8: Rev 7's
]


@pytest.mark.parametrize("source", [LEGACY_32, CURRENT_128], ids=["legacy", "current"])
@pytest.mark.parametrize("prod_line, prod_pn, build_rev, expected", LINES, ids=[f"{x[0]}-{x[2]}" for x in LINES])
def test_each_prod_line_resolves_to_its_own_datasheet(tmp_path, source, prod_line, prod_pn, build_rev, expected):
    sensor = load_sensor(unit_file(tmp_path, source, prod_line=prod_line, prod_pn=prod_pn, build_rev=build_rev))
    assert figures(sensor) == expected
    assert prod_line in sensor.spec["description"]
    limit = sensor.range_limit  # the pairs are the range limit itself: r_L(ρ) passes through each
    for reflectivity, range_m in expected[2]:
        assert limit.max_range_m_for(np.array([reflectivity]))[0] == pytest.approx(range_m, rel=1e-4)


# the other units in tests/data/ouster (kept apart: nothing was fitted on them), as their own files say; a
# beam-spacing suffix with a digit (U0, U1) names the line as any other suffix does
HELD_OUT = [
    ("OS-0-128-U1_v2.3.0_1024x10.json", "OS0", 128, "Rev 06 by prod_pn 840-103574-06"),
    ("OS-2-128-U1_v2.3.0_1024x10.json", "OS2", 128, "Rev 06 by prod_pn 840-103576-06"),
    ("OS-0-32-U1_v2.2.0_1024x10.json", "OS0", 32, "Rev 06 by prod_pn 840-103574-06"),
    ("OS-2-32-U0_v2.0.0_1024x10.json", "OS2", 32, "Rev C by prod_pn 840-102146-C"),
]


@pytest.mark.parametrize("name, line, channels, revision", HELD_OUT, ids=[s[0].split("_")[0] for s in HELD_OUT])
def test_the_held_out_units_resolve_to_their_own_lines(name, line, channels, revision):
    sensor = load_sensor(os.path.join(UNITS, name))
    expected = {"OS0": (0.3, 50.0), "OS2": (1.0, 240.0)}[line]  # their Rev 06 datasheets (no fitted figures)
    assert (sensor.min_range_m, sensor.max_range_m) == expected
    assert len(sensor.pattern) == channels * 1024 and revision in sensor.spec["description"]
    # a footprint for every line (the OS1's scaled by the field of view, assumed), so that a dual-return unit of
    # any line simulates its second returns
    scale = {"OS0": 2.0, "OS2": 0.5}[line]
    os1 = np.radians(0.18 if channels == 128 else 0.13) * 1e3
    assert sensor.spec["beam_divergence_mrad"][0] == pytest.approx(os1 * scale, abs=1e-3)
    assert "scaled by the field of view (assumed)" in sensor.spec["description"]


def test_a_dual_return_unit_of_another_line_than_the_os1_simulates_its_second_returns():
    sensor = load_sensor(os.path.join(UNITS, "OS-0-32-U1_v2.2.0_1024x10.json"))
    assert sensor.footprint.mode == "dual" and sensor.footprint.samples > 1


# the shared recordings' units as their own files say: all OS1 (Rev 06, C, D), none a gen-1 OS1
SHARED = [
    ("OS-1-128_v2.3.0_1024x10.json", "Rev 06 by prod_pn 840-103575-06"),
    ("OS-1-128_767798045_1024x10_20230712_120049.json", "Rev C by prod_pn 840-104682-C"),
    ("OS-1-32-G_v2.1.1_1024x10.json", "Rev D by prod_pn 840-102145-D"),
]


@pytest.mark.parametrize("name, revision", SHARED, ids=[s[0].split("_")[0] for s in SHARED])
def test_the_shared_units_resolve_to_the_os1_rev06_datasheet(name, revision):
    sensor = load_sensor(os.path.join(UNITS, name))
    # the Rev 06 datasheet's accuracy and wavelength, its range figures as fitted on the shared recordings
    assert figures(sensor) == (0.039, 249.4, [(0.005, 18.947), (1.0, 110.805)], 0.03)
    assert revision in sensor.spec["description"] and sensor.wavelength_nm == 865.0
    assert "fitted by lidar-fmu calibrate on the OS-1-128 recording" in sensor.spec["description"]
    assert sensor.effects.detection == "logistic" and sensor.effects.noise is None  # noise only when asked
    assert load_sensor({"ouster_metadata": os.path.join(UNITS, name)} | sensor.spec | {"noise": True}
                       ).effects.noise.shot_sigma_m > 0


def test_the_units_own_minimum_range_setting_wins_over_the_datasheet(tmp_path):
    import json

    doc = json.loads(open(CURRENT_128).read())
    doc["config_params"]["min_range_threshold_cm"] = 0
    path = tmp_path / "near.json"
    path.write_text(json.dumps(doc))
    assert load_sensor(str(path)).min_range_m == 0.0
    doc["config_params"]["min_range_threshold_cm"] = "fifty"
    path.write_text(json.dumps(doc))
    with pytest.raises(SensorSpecError, match="min_range_threshold_cm"):
        load_sensor(str(path))


@pytest.mark.parametrize("prod_line", ["OS-3-128", "VLP-16", "DF-1"])  # none at all: told by the beams, below
def test_a_prod_line_we_have_no_datasheet_for_is_refused_in_one_line(tmp_path, prod_line):
    with pytest.raises(SensorSpecError) as error:
        load_sensor(unit_file(tmp_path, LEGACY_32, prod_line=prod_line))
    message = str(error.value)
    assert "\n" not in message and "prod_line" in message
    assert all(line in message for line in ("OS-0", "OS-1", "OS-2", "OS-DOME")) and "ouster_metadata" in message
    if prod_line is not None:
        assert prod_line in message
    # the way out it names: the rays from the metadata, the range figures from the user
    path = unit_file(tmp_path, LEGACY_32, prod_line=prod_line)
    sensor = load_sensor({"ouster_metadata": path, "min_range_m": 0.2, "max_range_m": 400.0})
    assert (sensor.min_range_m, sensor.max_range_m, len(sensor.pattern)) == (0.2, 400.0, 32 * 1024)


def test_a_revision_the_part_number_does_not_tell_warns_and_takes_rev06(tmp_path):
    with pytest.warns(UserWarning, match="prod_pn"):
        sensor = load_sensor(unit_file(tmp_path, LEGACY_32, prod_line="OS-2-64", prod_pn="custom", build_rev="v2.4"))
    assert figures(sensor)[:2] == (1.0, 240.0)


# ------------------------------------------------------------------------------------------ range convention


def xyzlut(path):
    """ouster-sdk's make_xyz_lut (ouster_core/src/xyzlut.cpp) written out from the metadata alone, in the sensor
    frame: per (beam, measurement column), the unit direction and the offset (m) with pixel = offset + RANGE·dir."""
    import json

    doc = json.loads(open(path).read())
    beams = doc.get("beam_intrinsics", doc)
    lidar = doc.get("lidar_intrinsics", doc)
    altitude = np.radians(np.array(beams["beam_altitude_angles"]))
    azimuth = -np.radians(np.array(beams["beam_azimuth_angles"]))
    if "beam_to_lidar_transform" in beams:
        b2l = np.array(beams["beam_to_lidar_transform"], float).reshape(4, 4)
        n, z0 = b2l[0, 3], b2l[2, 3]
    else:
        n, z0 = beams["lidar_origin_to_beam_origin_mm"], 0.0
    d = np.hypot(n, z0)
    columns = int(str(doc.get("config_params", doc)["lidar_mode"]).split("x")[0])
    encoder = 2 * np.pi * (1 - np.arange(columns) / columns)[None, :]  # (1, W)
    a, e = altitude[:, None], encoder + azimuth[:, None]  # (B, W)
    direction = np.stack([np.cos(e) * np.cos(a), np.sin(e) * np.cos(a), np.broadcast_to(np.sin(a), e.shape)], -1)
    origin = np.stack([n * np.cos(encoder), n * np.sin(encoder), np.full(encoder.shape, z0)], -1)
    offset = origin - d * direction  # mm
    m = np.array(lidar["lidar_to_sensor_transform"], float).reshape(4, 4)
    return direction @ m[:3, :3].T, (offset @ m[:3, :3].T + m[:3, 3]) * 1e-3


@pytest.mark.parametrize("name", ["OS-1-128_v2.3.0_1024x10.json", "OS-1-128_767798045_1024x10_20230712_120049.json"])
def test_a_flat_wall_reads_the_range_the_unit_would_report(name):
    """A wall 6 m ahead (x = 6 m in the sensor frame): each point's ``range`` is the RANGE the unit reports for it
    (offset + RANGE·direction on the wall, from the metadata alone) within 1 mm; x, y, z are those of the scan
    with the range measured from the beam origin, to the bit."""
    import dataclasses

    path = os.path.join(UNITS, name)
    wall_x = 6.0
    v = np.array([[wall_x, -60, -60], [wall_x, 60, -60], [wall_x, 60, 60], [wall_x, -60, 60]], float)
    scene = Scene.from_meshes([Mesh(v, [[0, 1, 2], [0, 2, 3]], [0, 0], ("wall",), "wall")])
    lidar = Lidar(scene, {"ouster_metadata": path, "max_range_m": 200.0, "min_range_m": 0.0}, backend="embree")
    cloud = lidar.scan(np.eye(4))
    assert len(cloud) > 10_000
    p = lidar.sensor.pattern
    beam, column = p.beam_id[cloud.ray_index], p.column[cloud.ray_index]
    direction, offset = xyzlut(path)
    direction, offset = direction[beam, column], offset[beam, column]
    expected_m = (wall_x - offset[:, 0]) / direction[:, 0]  # offset + RANGE·direction lies on x = wall_x
    assert np.abs(cloud.points["range"] - expected_m).max() < 1e-3
    xyz = cloud.xyz.astype(np.float64)
    assert np.abs(xyz - (offset + expected_m[:, None] * direction)).max() < 1e-3
    # the geometry is the beam's: the same rays with the range from the beam origin give the same x, y, z
    before = Lidar(scene, lidar.sensor, backend="embree").scan(
        np.eye(4), pattern=dataclasses.replace(p, range_offset_m=0.0))
    assert np.array_equal(before.ray_index, cloud.ray_index) and np.array_equal(before.xyz, cloud.xyz)
    d_m = np.linalg.norm(offset - p.origins[cloud.ray_index], axis=1)  # beam origin → offset, along the beam
    assert np.abs(cloud.points["range"] - before.points["range"] - d_m).max() < 1e-5
    # the ground truth beside the points reads its range the same way (range − range_true is the noise, here none)
    truth = lidar.scan(np.eye(4), ground_truth=True)
    assert np.array_equal(truth.ground_truth["range_true"], truth.points["range"])


def test_osi_detections_decode_to_the_points_of_an_ouster_unit():
    """OSI's Spherical3d position is the point (its distance from the sensor frame's origin), not the unit's
    range reading, which is measured from elsewhere (16.7 mm along the beam and 38 mm below, on this unit)."""
    from lidar_fmu.osi.detections import sensor_data_to_points
    from lidar_fmu.osi.encode import LidarDetectionBlock, encode_sensor_data

    tm = trimesh.creation.icosphere(subdivisions=4, radius=7.0)
    scene = Scene.from_meshes([Mesh(tm.vertices, tm.faces, np.zeros(len(tm.faces), np.int32), ("wall",), "s")])
    cloud = Lidar(scene, CURRENT_128, backend="embree").scan(np.eye(4))
    data = encode_sensor_data(LidarDetectionBlock(cloud, sensor_id=1, mounting_position=np.eye(4)), timestamp_s=0.0,
                              cycle_counter=0)
    decoded = sensor_data_to_points(data)
    assert np.abs(decoded.xyz.astype(np.float64) - cloud.xyz.astype(np.float64)).max() < 1e-5


def test_a_legacy_unit_without_prod_line_is_told_by_its_beam_span(tmp_path):
    """Legacy firmware leaves prod_line empty: an OS1-64's beams over +16.9…−16.6° are an OS1 (its datasheet's
    33.2° field of view), said in one warning; a span no line has is still refused."""
    import json

    from lidar_fmu.sensors.ouster import OusterMetadataError, read_ouster_metadata, unit_figures

    with open(os.path.join(DATA, "ouster", "OS-1-32-G_v2.1.1_1024x10.json")) as f:
        metadata = json.load(f)
    metadata.update(prod_line="", build_rev="v1.13.0", prod_pn="", beam_altitude_angles=list(
        np.linspace(16.9, -16.6, 64)), beam_azimuth_angles=[3.1, 0.9, -1.3, -3.5] * 16)
    path = tmp_path / "os1_64_legacy.json"
    path.write_text(json.dumps(metadata))
    with pytest.warns(UserWarning, match=r"prod_line empty, taken as OS-1-64 .*\+16\.9…-16\.6°"):
        unit = unit_figures(read_ouster_metadata(str(path)))
    assert (unit.line, unit.channels, unit.generation) == ("OS1", 64, "gen1") and "OS-1-64" in unit.why
    metadata["beam_altitude_angles"] = [0.0] * 64  # every beam level: no line's field of view
    path.write_text(json.dumps(metadata))
    with pytest.raises(OusterMetadataError, match="no prod_line"):
        unit_figures(read_ouster_metadata(str(path)))
