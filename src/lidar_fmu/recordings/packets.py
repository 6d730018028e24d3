"""A unit's UDP packets from a packet capture (``.pcap``, ``.pcapng``) or a ROS 2 bag of packet messages.

Captures are read with dpkt (a dependency of velodyne-decoder): Ethernet, Linux cooked (SLL, SLL2), BSD loopback
and raw-IP link layers, IPv4 and IPv6; every UDP datagram is kept with its destination port and capture time.

ROS 2 bags (a bag folder with ``metadata.yaml``, or its ``.db3`` / ``.mcap`` file) are read with rosbags, the
packet message types registered from their definitions:

* ``pandar_msgs/msg/PandarScan`` of ``PandarPacket`` (tier4/nebula, ``src/nebula_hesai/pandar_msgs/msg/``:
  ``builtin_interfaces/Time stamp``, ``uint8[1500] data``, ``uint32 size``);
* ``velodyne_msgs/msg/VelodyneScan`` of ``VelodynePacket`` (ros-drivers/velodyne, ``velodyne_msgs/msg/``:
  ``builtin_interfaces/Time stamp``, ``uint8[1206] data``);
* ``nebula_msgs/msg/NebulaPackets`` of ``NebulaPacket`` (tier4/nebula, ``src/nebula_core/nebula_msgs/msg/``:
  ``builtin_interfaces/Time stamp``, ``uint8[] data``).

A ``.db3`` without its ``metadata.yaml`` beside it is read straight from its SQLite tables (rosbag2's schema:
``topics``, ``messages``).
"""
from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass

import numpy as np

from ..errors import LidarFmuError


class PacketSourceError(LidarFmuError, ValueError):
    """A file that is no packet capture or bag of lidar packets this module reads."""


#: largest capture or bag read (packets are held in memory: ~10 minutes of a 128-channel unit)
MAX_SOURCE_BYTES = 2 * 2**30

#: packet message definitions (name → .msg text), as their packages define them (module doc)
PACKET_MESSAGES = {
    "pandar_msgs/msg/PandarPacket": "builtin_interfaces/Time stamp\nuint8[1500] data\nuint32 size",
    "pandar_msgs/msg/PandarScan": "std_msgs/Header header\npandar_msgs/PandarPacket[] packets",
    "velodyne_msgs/msg/VelodynePacket": "builtin_interfaces/Time stamp\nuint8[1206] data",
    "velodyne_msgs/msg/VelodyneScan": "std_msgs/Header header\nvelodyne_msgs/VelodynePacket[] packets",
    "nebula_msgs/msg/NebulaPacket": "builtin_interfaces/Time stamp\nuint8[] data",
    "nebula_msgs/msg/NebulaPackets": "std_msgs/Header header\nnebula_msgs/NebulaPacket[] packets",
}
#: the scan messages whose packets are read
SCAN_TYPES = ("pandar_msgs/msg/PandarScan", "velodyne_msgs/msg/VelodyneScan", "nebula_msgs/msg/NebulaPackets")

CAPTURE_EXTENSIONS = (".pcap", ".pcapng", ".cap")
BAG_EXTENSIONS = (".db3", ".mcap")


@dataclass(frozen=True)
class Packets:
    """UDP payloads in recorded order: ``payloads[i]`` received at ``stamp_s[i]`` (capture or message time, s),
    to ``port[i]`` (UDP destination port; −1 from a bag)."""

    source: str
    payloads: list[bytes]
    stamp_s: np.ndarray
    port: np.ndarray

    def __len__(self) -> int:
        return len(self.payloads)


def is_packet_source(path: str) -> bool:
    """Does ``path`` name a capture or a bag (by extension, or a folder holding a bag's ``metadata.yaml``)?"""
    lower = path.lower()
    return lower.endswith(CAPTURE_EXTENSIONS + BAG_EXTENSIONS) or (
        os.path.isdir(path) and os.path.isfile(os.path.join(path, "metadata.yaml")))


def read_packets(path: str) -> Packets:
    """The UDP payloads of a capture or bag (module doc); :class:`PacketSourceError` in one line otherwise."""
    if not os.path.exists(path):
        raise PacketSourceError(f"recording not found: {path}")
    if os.path.isdir(path) or path.lower().endswith(BAG_EXTENSIONS):
        return _read_bag(path)
    if os.stat(path).st_size > MAX_SOURCE_BYTES:
        raise PacketSourceError(f"recording {path} is over {MAX_SOURCE_BYTES >> 30} GiB: cut it shorter")
    return _read_capture(path)


def _read_capture(path: str) -> Packets:
    import dpkt

    with open(path, "rb") as f:
        magic = f.read(4)
        f.seek(0)
        try:
            reader = dpkt.pcapng.Reader(f) if magic == b"\x0a\x0d\x0d\x0a" else dpkt.pcap.Reader(f)
        except (ValueError, dpkt.dpkt.NeedData, dpkt.dpkt.UnpackError) as exc:
            raise PacketSourceError(f"recording {path} is no packet capture (pcap or pcapng): {exc}") from None
        link = reader.datalink()
        decode = _link_decoder(link)
        if decode is None:
            raise PacketSourceError(f"recording {path}: link layer type {link} is not read (Ethernet, Linux cooked, "
                                    "loopback or raw IP)")
        payloads, stamps, ports = [], [], []
        try:
            for stamp, frame in reader:
                udp = _udp_of(decode, frame)
                if udp is not None:
                    payloads.append(bytes(udp.data))
                    stamps.append(float(stamp))
                    ports.append(int(udp.dport))
        except (dpkt.dpkt.NeedData, dpkt.dpkt.UnpackError, ValueError) as exc:
            if not payloads:
                raise PacketSourceError(f"recording {path}: cannot read its packets: {exc}") from None
            # a capture cut short mid-record (a stopped tcpdump) keeps what came before
    if not payloads:
        raise PacketSourceError(f"recording {path} holds no UDP packet")
    return Packets(path, payloads, np.asarray(stamps, np.float64), np.asarray(ports, np.int64))


#: raw-IP link types: LINKTYPE_RAW (101) and the platform DLT_RAW values (12, 14)
_RAW_IP_LINKS = (101, 12, 14)


def _link_decoder(link: int):
    """The dpkt class that unpacks one captured frame of link type ``link``, or None where it is not read."""
    import dpkt

    layers = {dpkt.pcap.DLT_EN10MB: dpkt.ethernet.Ethernet, dpkt.pcap.DLT_LINUX_SLL: dpkt.sll.SLL,
              276: dpkt.sll2.SLL2,  # LINKTYPE_LINUX_SLL2
              dpkt.pcap.DLT_NULL: dpkt.loopback.Loopback, dpkt.pcap.DLT_LOOP: dpkt.loopback.Loopback}
    if link in _RAW_IP_LINKS:
        return lambda frame: dpkt.ip6.IP6(frame) if frame and frame[0] >> 4 == 6 else dpkt.ip.IP(frame)
    return layers.get(link)


def _udp_of(decode, frame: bytes):
    """The UDP datagram inside a captured frame, or None (not IP, not UDP, truncated, a later fragment)."""
    import dpkt

    try:
        packet = decode(frame)
        while packet is not None and not isinstance(packet, (dpkt.ip.IP, dpkt.ip6.IP6)):
            packet = getattr(packet, "data", None)
            if isinstance(packet, (bytes, bytearray)):
                return None
        if packet is None:
            return None
        udp = packet.data
    except (dpkt.dpkt.NeedData, dpkt.dpkt.UnpackError, ValueError, IndexError):
        return None
    return udp if isinstance(udp, dpkt.udp.UDP) else None


def _typestore():
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    types: dict = {}
    for name, text in PACKET_MESSAGES.items():
        types.update(get_types_from_msg(text, name))
    store.register(types)
    return store


def _read_bag(path: str) -> Packets:
    """Every packet of every scan message of a packet type in the bag, in message order."""
    folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    store = _typestore()
    messages: list[tuple[int, str, bytes]] = []
    if os.path.isfile(os.path.join(folder, "metadata.yaml")):
        from rosbags.rosbag2 import Reader

        try:
            with Reader(folder) as reader:
                connections = [c for c in reader.connections if c.msgtype in SCAN_TYPES]
                if not connections:
                    types = sorted({c.msgtype for c in reader.connections})
                    raise PacketSourceError(f"bag {path} holds no lidar packet scans ({', '.join(SCAN_TYPES)}); "
                                            f"its topics carry {', '.join(types) or 'nothing'}")
                for connection, stamp, raw in reader.messages(connections=connections):
                    messages.append((stamp, connection.msgtype, bytes(raw)))
        except PacketSourceError:
            raise
        except Exception as exc:  # rosbags' own errors on a damaged bag (ReaderError and kin)
            files = sorted(f for f in os.listdir(folder) if f.lower().endswith(".db3"))
            if not files:
                raise PacketSourceError(f"cannot read bag {path}: {exc}") from None
            # metadata rosbags does not take (an early rosbag2's, storage left blank): the SQLite files alone
            messages = [m for name in files for m in _sqlite_messages(os.path.join(folder, name))]
    elif path.lower().endswith(".db3"):
        messages = _sqlite_messages(path)
    else:
        raise PacketSourceError(f"bag {path}: its metadata.yaml is missing beside it")
    payloads, stamps = [], []
    for stamp, msgtype, raw in messages:
        try:
            scan = store.deserialize_cdr(raw, msgtype)
        except Exception as exc:  # a message that does not deserialize as its declared type
            raise PacketSourceError(f"bag {path}: a {msgtype} message does not decode: {exc}") from None
        for packet in scan.packets:
            data = np.asarray(packet.data, np.uint8)
            size = int(getattr(packet, "size", len(data)))
            payloads.append(data[:size].tobytes())
            stamps.append(packet.stamp.sec + packet.stamp.nanosec * 1e-9 if packet.stamp.sec else stamp * 1e-9)
    if not payloads:
        raise PacketSourceError(f"bag {path} holds no packets")
    return Packets(path, payloads, np.asarray(stamps, np.float64), np.full(len(payloads), -1, np.int64))


def _sqlite_messages(path: str) -> list[tuple[int, str, bytes]]:
    """(stamp ns, type, CDR bytes) of the packet-scan messages of a rosbag2 SQLite file read without its
    metadata."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            topics = {tid: msgtype for tid, msgtype in db.execute("SELECT id, type FROM topics")}
            wanted = [tid for tid, msgtype in topics.items() if msgtype in SCAN_TYPES]
            if not wanted:
                raise PacketSourceError(f"bag {path} holds no lidar packet scans ({', '.join(SCAN_TYPES)})")
            rows = db.execute(f"SELECT timestamp, topic_id, data FROM messages WHERE topic_id IN "
                              f"({','.join('?' * len(wanted))}) ORDER BY timestamp", wanted).fetchall()
    except sqlite3.Error as exc:
        raise PacketSourceError(f"cannot read bag {path}: {exc}") from None
    return [(int(stamp), topics[tid], bytes(data)) for stamp, tid, data in rows]
