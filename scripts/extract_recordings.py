"""Extract small test recordings from the shared Velodyne and Hesai packet recordings (run by hand, in the dev venv).

    .venv/bin/python scripts/extract_recordings.py [SOURCE_DIR [OUT_DIR]]

``SOURCE_DIR`` (default ``../shared/data/recordings``) holds one folder per unit as tier4/nebula's decoder test
data gives it (Apache-2.0; SOURCE.md in each): the packets as a capture (``*.derived.pcap``), the ROS 2 bag they
came from, the calibration file nebula's test uses and nebula's reference cloud (``reference_*.pcd``: nebula's
decoder output for one frame of that bag). For each unit this writes to ``OUT_DIR/<unit>/`` (default
``tests/data/recordings``):

* ``<unit>.pcap``: the packets of the frame nebula's reference holds, and 4 % of a turn on either side (so that
  the frame is whole in our azimuth bins), payloads and capture times unchanged, written as a classic pcap
  (Ethernet/IPv4/UDP to port 2368, as the shared captures are);
* the calibration file, unchanged;
* ``reference_every20.npz``: every 20th point of nebula's reference cloud (``xyz`` float32, nebula's own frame:
  Hesai points as nebula writes them, x right, y forward; Velodyne points x forward, y left), and for the
  Velodyne unit also nebula's ``channel`` and ``distance`` of each;
* a bag of packets for two units, for the test that a bag and a capture give the same points: the VLP-16's
  extract as one ``velodyne_msgs/msg/VelodyneScan`` (``bag_vlp16/``), the QT64's first 50 packets as one
  ``pandar_msgs/msg/PandarScan`` (``bag_qt64_50/``), both sqlite3 rosbag2 bags written with rosbags.

The VLP-16's reference is the recording's last turn (the scan its last message completes): velodyne-decoder's
decoding of those packets holds every one of its returns (laser, distance, intensity), 83 % of them within 0.02°
of nebula's azimuth and all within 0.5°: nebula leaves the last block pair of each dual-return packet unrotated
(``azimuth_diff = 0`` for it in ``vlp16_decoder.cpp``), velodyne-decoder rotates every firing over the packet.

It prints, per unit, how many of nebula's reference points our decoding of the full shared recording reproduces
within 1 mm and 0.01 mm (docs/validation.md), and writes ``NOTICE.md`` and nebula's ``LICENSE`` beside them.
"""
import os
import shutil
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from helpers.matching import nearest_distances, same_returns  # noqa: E402
from lidar_fmu.recordings.hesai import decode_hesai, scan_points  # noqa: E402
from lidar_fmu.recordings.packets import read_packets  # noqa: E402
from lidar_fmu.sensors.hesai import read_hesai_calibration  # noqa: E402

SOURCE = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "shared", "data", "recordings")
if not os.path.isdir(SOURCE):
    SOURCE = "/work/shared/data/recordings"
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "..", "tests", "data", "recordings")

#: unit → (calibration file, nebula's min/max range for its decoder test: hesai_ros_decoder_test_main.cpp)
HESAI = {"hesai-xt32-nebula": ("PandarXT32.csv", 0.05, 120.0), "hesai-pandar64-nebula": ("Pandar64.csv", 0.3, 200.0),
         "hesai-qt64-nebula": ("PandarQT64.csv", 0.1, 60.0)}
VELODYNE = {"velodyne-vlp16-nebula": "VLP16.yaml"}
MARGIN_TURN = 0.04
EVERY = 20


def reference_of(folder: str):
    import pypcd4

    name = next(f for f in os.listdir(folder) if f.startswith("reference_") and f.endswith(".pcd"))
    return pypcd4.PointCloud.from_path(os.path.join(folder, name)).pc_data


def write_pcap(path: str, stamps, payloads) -> None:
    """A classic pcap (microsecond stamps, Ethernet) of UDP datagrams 127.0.0.1:2368 → 127.0.0.1:2368."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for stamp, payload in zip(stamps, payloads):
            udp = struct.pack("!HHHH", 2368, 2368, 8 + len(payload), 0) + payload
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, bytes([127, 0, 0, 1]),
                             bytes([127, 0, 0, 1])) + udp
            frame = b"\x00" * 12 + b"\x08\x00" + ip
            seconds = int(stamp)
            f.write(struct.pack("<IIII", seconds, int(round((stamp - seconds) * 1e6)), len(frame), len(frame)))
            f.write(frame)


def write_bag(folder: str, msgtype: str, topic: str, stamps, payloads) -> None:
    """One scan message of ``msgtype`` holding the packets, as a sqlite3 rosbag2 bag."""
    from rosbags.rosbag2 import Writer

    from lidar_fmu.recordings.packets import _typestore

    store = _typestore()
    types = store.types
    Time = types["builtin_interfaces/msg/Time"]
    packets = []
    for stamp, payload in zip(stamps, payloads):
        time = Time(sec=int(stamp), nanosec=int(round((stamp - int(stamp)) * 1e9)))
        data = np.frombuffer(payload, np.uint8)
        if msgtype.startswith("pandar"):
            padded = np.zeros(1500, np.uint8)
            padded[:len(data)] = data
            packets.append(types["pandar_msgs/msg/PandarPacket"](stamp=time, data=padded, size=len(data)))
        else:
            packets.append(types["velodyne_msgs/msg/VelodynePacket"](stamp=time, data=data.copy()))
    header = types["std_msgs/msg/Header"](stamp=Time(sec=int(stamps[-1]), nanosec=0), frame_id="lidar")
    message = types[msgtype](header=header, packets=packets)
    if os.path.exists(folder):
        shutil.rmtree(folder)
    with Writer(folder, version=8) as writer:
        connection = writer.add_connection(topic, msgtype, typestore=store)
        writer.write(connection, int(stamps[-1] * 1e9), store.serialize_cdr(message, msgtype))


def hesai_unit(unit: str, calibration: str, min_range: float, max_range: float):
    folder = os.path.join(SOURCE, unit)
    packets = read_packets(os.path.join(folder, f"{unit}.derived.pcap"))
    scan = decode_hesai(packets)
    cal = read_hesai_calibration(os.path.join(folder, calibration))
    points = scan_points(scan, cal, min_range_m=min_range, max_range_m=max_range)
    reference = reference_of(folder)
    xyz = np.stack([reference["x"], reference["y"], reference["z"]], axis=1).astype(np.float64)
    ours = np.stack([xyz[:, 1], -xyz[:, 0], xyz[:, 2]], axis=1)  # nebula's Hesai frame (x right, y forward)
    distance = nearest_distances(points["xyz"], ours)
    print(f"{unit}: {scan.profile}; of nebula's {len(xyz):,} reference points {int((distance < 1e-3).sum()):,} lie "
          f"within 1 mm of ours, {int((distance < 1e-5).sum()):,} within 0.01 mm (largest "
          f"{np.max(distance) * 1e3:.4f} mm)")
    groups = scan.distance_m.shape[0] // scan.packets
    # each point's turn, cut as nebula cuts (a channel's own azimuth passing the front): the head's turns (its
    # Azimuth wrapping) and where the channel's offset carries it past the front; the reference frame is the turn
    # most of whose points match it (a static scene repeats points from turn to turn)
    head_turn = np.concatenate([[0], np.cumsum(np.diff(scan.azimuth_cdeg) < -18000)])
    raw = scan.azimuth_cdeg[points["firing"]] / 100.0 + cal.azimuth_offset_deg[points["channel"]]
    turn = head_turn[points["firing"]] + np.floor_divide(raw, 360.0).astype(np.int64)
    matched = nearest_distances(ours, points["xyz"]) < 1e-5
    frame = np.bincount(turn[matched] - turn.min()).argmax() + turn.min()
    in_frame = turn == frame
    first, last = points["firing"][in_frame].min() // groups, points["firing"][in_frame].max() // groups
    margin = int(np.ceil(MARGIN_TURN * (last - first + 1)))
    keep = np.arange(max(first - margin, 0), min(last + margin + 1, len(packets)))
    return packets, keep, xyz


def velodyne_unit(unit: str, calibration: str):
    import velodyne_decoder as vd

    folder = os.path.join(SOURCE, unit)
    packets = read_packets(os.path.join(folder, f"{unit}.derived.pcap"))
    reference = reference_of(folder)
    xyz = np.stack([reference["x"], reference["y"], reference["z"]], axis=1).astype(np.float64)
    # the reference is the recording's last turn (nebula's scan that the last message completes; checked: its points
    # are velodyne-decoder's decoding of these packets, not of the turns before): the packets after the last wrap
    block_azimuth = np.array([struct.unpack_from("<H", p, 2)[0] for p in packets.payloads])
    wraps = np.flatnonzero(np.diff(block_azimuth) < 0) + 1
    first, last = wraps[-1], len(packets) - 1
    margin = int(np.ceil(MARGIN_TURN * (last - first + 1)))
    keep = np.arange(max(first - margin, 0), min(last + margin + 1, len(packets)))
    config = vd.Config(calibration=vd.Calibration.read(os.path.join(folder, calibration)), min_range=0.3,
                       max_range=300.0)
    decoded = vd.ScanDecoder(config).decode(vd.PacketVector([vd.VelodynePacket(float(packets.stamp_s[i]),
                                                                               packets.payloads[i]) for i in keep]),
                                            as_pcl_structs=True)[1]
    ours = np.stack([decoded["x"], decoded["y"], decoded["z"]], axis=1).astype(np.float64)
    distance = nearest_distances(ours, xyz)
    same = same_returns(decoded, reference)
    print(f"{unit}: of nebula's {len(xyz):,} reference points {int((distance < 1e-3).sum()):,} lie within 1 mm of "
          f"velodyne-decoder's, {int((distance < 2e-3).sum()):,} within 2 mm; the same return (laser, distance, "
          f"intensity) within 0.02° for {int((same < 0.02).sum()):,}, within 0.5° for {int((same < 0.5).sum()):,}")
    return packets, keep, xyz, reference


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    for unit, (calibration, lo, hi) in HESAI.items():
        packets, keep, xyz = hesai_unit(unit, calibration, lo, hi)
        target = os.path.join(OUT, unit)
        os.makedirs(target, exist_ok=True)
        write_pcap(os.path.join(target, f"{unit}.pcap"), packets.stamp_s[keep], [packets.payloads[i] for i in keep])
        shutil.copy(os.path.join(SOURCE, unit, calibration), target)
        np.savez_compressed(os.path.join(target, f"reference_every{EVERY}.npz"), xyz=xyz[::EVERY].astype(np.float32))
        if unit == "hesai-qt64-nebula":
            write_bag(os.path.join(target, "bag_qt64_50"), "pandar_msgs/msg/PandarScan", "/pandar_packets",
                      packets.stamp_s[keep[:50]], [packets.payloads[i] for i in keep[:50]])
        print(f"  → {target}: {len(keep)} packets")
    for unit, calibration in VELODYNE.items():
        packets, keep, xyz, reference = velodyne_unit(unit, calibration)
        target = os.path.join(OUT, unit)
        os.makedirs(target, exist_ok=True)
        stamps, payloads = packets.stamp_s[keep], [packets.payloads[i] for i in keep]
        write_pcap(os.path.join(target, f"{unit}.pcap"), stamps, payloads)
        shutil.copy(os.path.join(SOURCE, unit, calibration), target)
        np.savez_compressed(os.path.join(target, f"reference_every{EVERY}.npz"), xyz=xyz[::EVERY].astype(np.float32),
                            channel=reference["channel"][::EVERY], distance=reference["distance"][::EVERY],
                            intensity=reference["intensity"][::EVERY])
        write_bag(os.path.join(target, "bag_vlp16"), "velodyne_msgs/msg/VelodyneScan", "/velodyne_packets", stamps,
                  payloads)
        print(f"  → {target}: {len(keep)} packets")
    shutil.copy(os.path.join(SOURCE, "hesai-xt32-nebula", "LICENSE"), os.path.join(OUT, "LICENSE"))


if __name__ == "__main__":
    main()
