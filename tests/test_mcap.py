"""SensorData traces as MCAP (asam-osi-utilities): the FMU's bytes come back unchanged, the OSI metadata is there."""
import numpy as np
from mcap.reader import make_reader

from lidar_fmu import Lidar, Scene
from lidar_fmu.geometry.scene import box_mesh
from lidar_fmu.osi.encode import LidarDetectionBlock, encode_sensor_data_buffer
from lidar_fmu.osi.mcap import TOPIC, SensorDataMcapWriter
from lidar_fmu.osi.trace import TraceWriter, read_trace


def _frames(count):
    scene = Scene.from_meshes([box_mesh(2.0, 2.0, 2.0)])
    spec = {"horizontal_fov_deg": [-30, 30], "horizontal_resolution_deg": 0.2, "vertical_fov_deg": [-10, 10],
            "channels": 64, "max_range_m": 60.0}
    lidar = Lidar(scene, spec, backend="embree")
    frames = []
    for k in range(count):
        pose = np.eye(4)
        pose[:3, 3] = [-6.0 - 0.5 * k, 0.0, 0.2]
        cloud = lidar.scan(pose, timestamp_s=0.1 * k)
        block = LidarDetectionBlock(cloud, sensor_id=7, mounting_position=np.eye(4),
                                    intensity_percent=cloud.intensity_percent)
        frames.append(bytes(encode_sensor_data_buffer(block, timestamp_s=0.1 * k, cycle_counter=k)))
    return frames


def test_mcap_trace_holds_the_same_messages_and_the_osi_metadata(tmp_path):
    frames = _frames(4)
    assert all(len(f) > 1000 for f in frames)
    path = tmp_path / "trace.mcap"
    with SensorDataMcapWriter(path) as writer:
        for data in frames:
            writer.write(data)
    assert writer.count == 4
    assert list(read_trace(path, "SensorData")) == frames  # byte for byte
    with open(path, "rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        channels = {c.topic: c for c in summary.channels.values()}
        assert set(channels) == {TOPIC} and summary.schemas[channels[TOPIC].schema_id].name == "osi3.SensorData"
        assert {"net.asam.osi.trace.channel.osi_version", "net.asam.osi.trace.channel.protobuf_version"} <= set(
            channels[TOPIC].metadata)
        metadata = {m.name: m.metadata for m in reader.iter_metadata()}
        assert "net.asam.osi.trace" in metadata
    # compressed: smaller than the same messages as a .osi trace
    with TraceWriter(tmp_path / "trace.osi") as plain:
        for data in frames:
            plain.write(data)
    assert path.stat().st_size < 0.8 * (tmp_path / "trace.osi").stat().st_size
