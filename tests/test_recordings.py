"""Velodyne and Hesai recordings: the packet decoders against nebula's reference clouds, captures against bags,
and validate / calibrate on the shared units' extracts (tests/data/recordings, NOTICE.md there)."""
import functools
import os
import shutil

import numpy as np
import pytest

from helpers.matching import nearest_distances, same_returns
from lidar_fmu.recordings.hesai import decode_hesai, scan_points
from lidar_fmu.recordings.makers import open_recording
from lidar_fmu.recordings.packets import read_packets
from lidar_fmu.recordings.validate import validate
from lidar_fmu.sensors.hesai import read_hesai_calibration
from lidar_fmu.tools.cli import main

DATA = os.path.join(os.path.dirname(__file__), "data", "recordings")
#: unit → (calibration file, nebula's decoder-test range window: hesai_ros_decoder_test_main.cpp)
HESAI = {"hesai-xt32-nebula": ("PandarXT32.csv", 0.05, 120.0), "hesai-pandar64-nebula": ("Pandar64.csv", 0.3, 200.0),
         "hesai-qt64-nebula": ("PandarQT64.csv", 0.1, 60.0)}
UNITS = {**{unit: figures[0] for unit, figures in HESAI.items()}, "velodyne-vlp16-nebula": "VLP16.yaml"}


def _paths(unit):
    return os.path.join(DATA, unit, f"{unit}.pcap"), os.path.join(DATA, unit, UNITS[unit])


def _reference(unit):
    return np.load(os.path.join(DATA, unit, "reference_every20.npz"))


@pytest.mark.parametrize("unit", list(HESAI))
def test_hesai_packets_decode_to_nebulas_reference_points(unit):
    """nebula's reference cloud of the frame (every 20th point kept): each point lies within 0.01 mm of one we
    decode, in our frame (nebula's Hesai x right, y forward is our −y, x)."""
    capture, calibration = _paths(unit)
    _, low, high = HESAI[unit]
    points = scan_points(decode_hesai(read_packets(capture)), read_hesai_calibration(calibration),
                         min_range_m=low, max_range_m=high)
    xyz = _reference(unit)["xyz"].astype(np.float64)
    ours = np.stack([xyz[:, 1], -xyz[:, 0], xyz[:, 2]], axis=1)
    assert np.all(nearest_distances(points["xyz"], ours) < 1e-5)


def test_velodyne_decoder_reproduces_nebulas_returns():
    """The VLP-16 through velodyne-decoder against nebula's reference: every reference return is one of ours (same
    laser, distance and intensity) within 0.5° of azimuth, and most within 0.02°. The two interpolate the head's
    azimuth differently (nebula leaves the last block pair of a dual-return packet unrotated), so 81 % of the points
    lie within 1 mm (docs/validation.md gives the full frame's figures)."""
    import velodyne_decoder as vd

    capture, calibration = _paths("velodyne-vlp16-nebula")
    packets = read_packets(capture)
    config = vd.Config(calibration=vd.Calibration.read(calibration), min_range=0.3, max_range=300.0)
    points = vd.ScanDecoder(config).decode(vd.PacketVector([vd.VelodynePacket(float(t), p) for t, p in
                                                            zip(packets.stamp_s, packets.payloads)]),
                                           as_pcl_structs=True)[1]
    ours = np.stack([points["x"], points["y"], points["z"]], axis=1).astype(np.float64)
    reference = _reference("velodyne-vlp16-nebula")
    distance = nearest_distances(ours, reference["xyz"].astype(np.float64))
    assert (distance < 1e-3).mean() >= 0.78 and (distance < 2e-3).mean() >= 0.85
    fields = np.zeros(len(reference["xyz"]), [("x", "f4"), ("y", "f4"), ("channel", "u2"), ("distance", "f4"),
                                               ("intensity", "u1")])
    fields["x"], fields["y"] = reference["xyz"][:, 0], reference["xyz"][:, 1]
    for key in ("channel", "distance", "intensity"):
        fields[key] = reference[key]
    same = same_returns(points, fields)
    assert np.all(same < 0.5) and (same < 0.02).mean() >= 0.80


def test_a_bag_and_a_capture_of_the_same_packets_give_the_same_recording():
    capture, calibration = _paths("velodyne-vlp16-nebula")
    from_capture, _ = open_recording(capture, calibration)
    from_bag, _ = open_recording(os.path.join(DATA, "velodyne-vlp16-nebula", "bag_vlp16"), calibration)
    for key, image in from_capture.images.items():
        np.testing.assert_array_equal(image, from_bag.images[key])
    np.testing.assert_array_equal(from_capture.azimuth_rad, from_bag.azimuth_rad)
    # Hesai: the QT64's first 50 packets as a PandarScan bag, through its folder and its .db3 alone
    capture, calibration = _paths("hesai-qt64-nebula")
    packets = read_packets(capture)
    bag = read_packets(os.path.join(DATA, "hesai-qt64-nebula", "bag_qt64_50"))
    assert bag.payloads == packets.payloads[:50]
    np.testing.assert_allclose(bag.stamp_s, packets.stamp_s[:50], atol=1e-6)


def test_a_bags_sqlite_file_reads_without_its_metadata(tmp_path):
    source = os.path.join(DATA, "hesai-qt64-nebula", "bag_qt64_50")
    db3 = next(f for f in os.listdir(source) if f.endswith(".db3"))
    shutil.copy(os.path.join(source, db3), tmp_path / "alone.db3")
    alone = read_packets(str(tmp_path / "alone.db3"))
    assert alone.payloads == read_packets(source).payloads


@functools.cache  # each unit's comparison once for the tests that read it
def validated(unit: str, sensor: str | None = None) -> dict:
    capture, calibration = _paths(unit)
    return validate(capture, calibration, sensor=sensor, backend="embree", echo=lambda line: None)


@pytest.mark.parametrize("unit", list(UNITS))
def test_validate_meets_the_targets_on_each_units_recording(unit):
    """The issue's targets on each shared unit (docs/validation.md has the figures): ≥ 95 % of the real returns
    found and ≤ 3 % returns the unit lacks (inside the mesh), |Δr| median ≤ 3 cm and p90 ≤ 15 cm away from depth
    edges, ≤ 0.5 % of the real returns outside our min/max range (the QT64's preset takes the nearest return its
    recording shows, its base plate 2.7 cm away, not its datasheet's 0.1 m: next test)."""
    result = validated(unit)
    assert result["agreement"]["real_returns_found"] >= 0.95
    assert result["agreement"]["sim_returns_unit_lacks"] <= 0.03
    edge_free = result["abs_delta_away_from_edges"]
    assert edge_free["median_m"] <= 0.03 and edge_free["p90_m"] <= 0.15
    limit = result["range_limit"]
    assert (limit["below_min_range"] + limit["above_max_range"]) / limit["returns"] <= 0.005


def test_the_qt64_reports_returns_nearer_than_its_datasheet_and_calibrate_takes_them(tmp_path):
    """12 % of the QT64's returns lie 2.7–10 cm away (its base plate, seen by its lowest channels), below the 0.1 m
    where its datasheet's measurement range starts: with the datasheet's minimum they fall outside the range;
    calibrate widens min_range_m to the unit's nearest return, as the preset does, and none lies outside."""
    capture, calibration = _paths("hesai-qt64-nebula")
    datasheet = tmp_path / "datasheet.yaml"
    datasheet.write_text("preset: hesai_qt64\nmin_range_m: 0.1\n")
    limit = validate(capture, calibration, sensor=str(datasheet), backend="embree", echo=lambda line: None)["range_limit"]
    assert limit["min_range_m"] == 0.1 and limit["below_min_range"] > 0.05 * limit["returns"]
    spec = tmp_path / "qt64.yaml"
    assert main(["calibrate", capture, "--metadata", calibration, "-o", str(spec)]) == 0
    result = validate(capture, calibration, sensor=str(spec), backend="embree", echo=lambda line: None)
    assert result["range_limit"]["below_min_range"] == 0 and result["range_limit"]["above_max_range"] == 0
    assert result["agreement"]["real_returns_found"] >= 0.95


def test_a_preset_stands_for_the_units_calibration():
    capture, _ = _paths("hesai-xt32-nebula")
    recording, geometry = open_recording(capture, "hesai_xt32")
    assert geometry.own_spec()["preset"] == "hesai_xt32" and recording.images["range_mm"].shape[1:] == (32, 2000)


@pytest.mark.parametrize("recording, metadata, message", [
    ("hesai-xt32-nebula", "Pandar64.csv", "is a PandarXT32 (32 channels), but Pandar64.csv calibrates 64 channels"),
    ("hesai-xt32-nebula", "hesai_pandar64", "is a PandarXT32, not the preset hesai_pandar64's Pandar64"),
    ("velodyne-vlp16-nebula", "PandarXT32.csv", "no Hesai point-cloud packet"),
    ("hesai-xt32-nebula", "VLP16.yaml", "holds no Velodyne data packet"),
    ("text", "PandarXT32.csv", "is a .pcap/.pcapng capture or a ROS 2 bag"),
    ("garbage.pcap", "PandarXT32.csv", "is no packet capture"),
    ("hesai-xt32-nebula", "unit.txt", "expected an Ouster metadata .json, a Hesai angle-correction .csv"),
    ("hesai-xt32-nebula", "broken.csv", "must name the columns"),
])
def test_validate_refuses_a_recording_that_does_not_fit_in_one_line(recording, metadata, message, tmp_path, capsys):
    (tmp_path / "text").write_text("hello")
    (tmp_path / "garbage.pcap").write_bytes(b"not a capture at all")
    (tmp_path / "unit.txt").write_text("hello")
    (tmp_path / "broken.csv").write_text("a,b\n1,2\n")
    shutil.copy(os.path.join(DATA, "hesai-pandar64-nebula", "Pandar64.csv"), tmp_path)
    shutil.copy(os.path.join(DATA, "hesai-xt32-nebula", "PandarXT32.csv"), tmp_path)
    shutil.copy(os.path.join(DATA, "velodyne-vlp16-nebula", "VLP16.yaml"), tmp_path)
    path = _paths(recording)[0] if recording in UNITS else str(tmp_path / recording)
    meta = metadata if metadata.startswith("hesai_") else str(tmp_path / metadata)
    assert main(["validate", path, "--metadata", meta]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err, err


def _db_xml(yaml_path, xml_path, resolution_cm=0.2):
    """The calibration YAML written as VeloView's db.xml (degrees, centimetres), as Velodyne ships it."""
    import yaml

    lasers = yaml.safe_load(open(yaml_path))["lasers"]
    items = "".join(
        f"<item><px><id_>{laser['laser_id']}</id_><rotCorrection_>{float(np.degrees(laser['rot_correction']))!r}"
        f"</rotCorrection_><vertCorrection_>{float(np.degrees(laser['vert_correction']))!r}</vertCorrection_>"
        f"<distCorrection_>{100 * laser['dist_correction']!r}</distCorrection_><vertOffsetCorrection_>"
        f"{100 * laser['vert_offset_correction']!r}</vertOffsetCorrection_><horizOffsetCorrection_>"
        f"{100 * laser['horiz_offset_correction']!r}</horizOffsetCorrection_></px></item>" for laser in lasers)
    enabled = "".join("<item>1</item>" for _ in lasers)
    xml_path.write_text(f"<?xml version='1.0'?><boost_serialization><DB><distLSB_>{resolution_cm}</distLSB_>"
                        f"<enabled_><count>{len(lasers)}</count>{enabled}</enabled_><points_>"
                        f"<count>{len(lasers)}</count>{items}</points_></DB></boost_serialization>")


def test_a_velodyne_db_xml_is_the_same_calibration_as_its_yaml(tmp_path):
    from lidar_fmu.sensors import load_sensor
    from lidar_fmu.sensors.velodyne import VelodyneCalibrationError, read_velodyne_calibration

    capture, calibration = _paths("velodyne-vlp16-nebula")
    _db_xml(calibration, tmp_path / "db.xml")
    from_yaml, from_xml = read_velodyne_calibration(calibration), read_velodyne_calibration(tmp_path / "db.xml")
    np.testing.assert_allclose(from_xml.vert_correction_rad, from_yaml.vert_correction_rad, atol=1e-12)
    np.testing.assert_allclose(from_xml.rot_correction_rad, from_yaml.rot_correction_rad, atol=1e-12)
    spec = {"preset": "velodyne_vlp16", "calibration": str(tmp_path / "db.xml")}
    np.testing.assert_allclose(load_sensor(spec).pattern.directions, load_sensor("velodyne_vlp16").pattern.directions,
                               atol=1e-6)
    recording, _ = open_recording(capture, str(tmp_path / "db.xml"))
    np.testing.assert_array_equal(recording.images["range_mm"], open_recording(capture, calibration)[0].images["range_mm"])
    (tmp_path / "bomb.xml").write_text('<!DOCTYPE x [<!ENTITY a "aaaa">]><DB>&a;</DB>')
    with pytest.raises(VelodyneCalibrationError, match="entity declaration is not read"):
        read_velodyne_calibration(tmp_path / "bomb.xml")
    (tmp_path / "other.xml").write_text("<root><thing/></root>")
    with pytest.raises(VelodyneCalibrationError, match="no DB/points_"):
        read_velodyne_calibration(tmp_path / "other.xml")


def test_a_pcapng_capture_and_an_mcap_bag_read_as_their_classic_kin(tmp_path):
    """The same packets as a pcapng capture (dpkt's writer) and as an MCAP bag (rosbags' writer) read as the pcap
    and the sqlite3 bag do."""
    import dpkt
    from rosbags.rosbag2 import Reader, StoragePlugin, Writer

    capture, _ = _paths("hesai-qt64-nebula")
    packets = read_packets(capture)
    with open(capture, "rb") as source, open(tmp_path / "unit.pcapng", "wb") as target:
        writer = dpkt.pcapng.Writer(target, snaplen=65535)
        for stamp, frame in dpkt.pcap.Reader(source):
            writer.writepkt(frame, ts=stamp)
    again = read_packets(str(tmp_path / "unit.pcapng"))
    assert again.payloads == packets.payloads and again.port.tolist() == packets.port.tolist()
    np.testing.assert_allclose(again.stamp_s, packets.stamp_s, atol=1e-6)
    sqlite = os.path.join(DATA, "hesai-qt64-nebula", "bag_qt64_50")
    with Reader(sqlite) as reader, Writer(tmp_path / "mcap", version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        for connection in reader.connections:
            out = writer.add_connection(connection.topic, connection.msgtype, msgdef=connection.msgdef.data,
                                        rihs01=connection.digest)
            for _, stamp, raw in reader.messages(connections=[connection]):
                writer.write(out, stamp, raw)
    assert read_packets(str(tmp_path / "mcap")).payloads == read_packets(sqlite).payloads
