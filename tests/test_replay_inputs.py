"""What `replay` takes and where it writes: a bare SensorView trace, traces of other OSI messages refused by name,
no stale files of an earlier replay, a rig's lidars each in a folder of its own."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from helpers.fmu_inputs import SHARED_TRACE, SMALL_SENSOR
from helpers.osi_views import HOST_ID, sensor_view
from lidar_fmu.cosim.sensor_model import OsiSensorModel
from lidar_fmu.io import read_pcd
from lidar_fmu.osi.trace import TraceError, read_trace, write_trace
from lidar_fmu.tools.cli import main
from lidar_fmu.tools.replay import replay

#: where a replay lists the files it wrote
MANIFEST = "replay_files.txt"


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lidar-fmu: error:") and "Traceback" not in err, err
    return lines[0]


# -- a bare trace ------------------------------------------------------------------------------------------------
def test_a_bare_trace_replays_with_a_sensor_and_no_scenario_file(tmp_path, capsys):
    sensor = tmp_path / "small.json"
    sensor.write_text(json.dumps(SMALL_SENSOR))
    out = tmp_path / "out"
    code, stdout, err = run(["replay", SHARED_TRACE, "--sensor", sensor, "-o", out, "--frames", 3, "-q"], capsys)
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"] == "minimal_valid_example" and summary["frames"] == 3
    # the trace's car 250, ten metres ahead, is its OSI bounding box: every frame hits it
    assert all(250 in ids for ids in summary["objects_per_frame"]) and min(summary["returns_per_frame"]) > 0
    assert len(list((out / "frames").glob("frame_*.pcd"))) == 3 and "3 frames" in stdout


def test_a_bare_trace_without_a_sensor_is_one_line(tmp_path, capsys):
    code, _, err = run(["replay", SHARED_TRACE, "-o", tmp_path / "out", "-q"], capsys)
    assert code == 2 and "--sensor" in _one_error_line(err) and not (tmp_path / "out").exists()


def test_assets_find_the_trace_models(tmp_path, capsys):
    """--assets DIR: the trace's objects whose model_reference names a mesh there are that mesh, not a box."""
    import trimesh

    tall = trimesh.creation.box(extents=(4.0, 1.8, 6.0))  # 6 m tall where the OSI box says 1.5 m
    tall.export(tmp_path / "tall.obj")
    views = [sensor_view([(30, (10.0, 0.0, 0.75), (0, 0, 0), (4.0, 1.8, 1.5), "tall.obj")], time_s=0.1 * (k + 1),
                         host=None) for k in range(2)]
    write_trace(tmp_path / "views.osi", views)
    tops = {}
    for name, extra in (("boxes", []), ("models", ["--assets", tmp_path])):
        code, _, err = run(["replay", tmp_path / "views.osi", "--sensor", "ouster_os1_128", "-o", tmp_path / name,
                            "-q", *extra], capsys)
        assert code == 0, err
        points = read_pcd(tmp_path / name / "frames" / "frame_0001.pcd")
        tops[name] = float(points["z"][points["object_id"] == 30].max())
    assert tops["boxes"] == pytest.approx(1.5, abs=0.1) and tops["models"] > 2.5


# -- traces of other messages ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def other_traces(tmp_path_factory):
    """The shared trace's SensorData (the model's output), GroundTruth, and garbage, as .osi traces."""
    from osi3.osi_sensorview_pb2 import SensorView

    folder = tmp_path_factory.mktemp("traces")
    views = list(read_trace(SHARED_TRACE))[:3]
    model = OsiSensorModel(sensor=SMALL_SENSOR)
    # named as SensorViews: the content, not the name, is what counts
    write_trace(folder / "20240618T122540Z_sv_370_244_3_sensordata.osi",
                [bytes(model.step(view, 0.1 * (k + 1)).sensor_data) for k, view in enumerate(views)])
    write_trace(folder / "groundtruth.osi",
                [SensorView.FromString(view).global_ground_truth.SerializeToString() for view in views])
    write_trace(folder / "garbage.osi", [bytes(range(256)) * 4])
    return folder


@pytest.mark.parametrize("name, what", [("20240618T122540Z_sv_370_244_3_sensordata.osi", "a SensorData trace"),
                                        ("garbage.osi", "not an OSI trace")])
def test_a_trace_of_other_messages_is_refused_naming_what_it_is(other_traces, name, what, tmp_path, capsys):
    (other_traces / "scenario.yaml").write_text(json.dumps({"trace": name, "sensor": "velodyne_vlp16"}))
    code, _, err = run(["replay", other_traces, "-o", tmp_path / "out", "-q"], capsys)
    line = _one_error_line(err)
    assert code == 2 and what in line and "not a SensorView or GroundTruth trace" in line and name in line
    assert not (tmp_path / "out").exists()


def test_a_ground_truth_trace_replays_around_its_host(other_traces, tmp_path, capsys):
    """A GroundTruth trace (what esmini writes) is replayed as SensorViews around its host_vehicle_id."""
    (other_traces / "scenario.yaml").write_text(json.dumps({"trace": "groundtruth.osi", "sensor": "velodyne_vlp16"}))
    code, _, err = run(["replay", other_traces, "-o", tmp_path / "out", "-q"], capsys)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert code == 0 and summary["frames"] == 3 and min(summary["returns_per_frame"]) > 0


def test_a_sensordata_mcap_is_refused_by_its_schema(tmp_path, capsys):
    from lidar_fmu.osi.mcap import SensorDataMcapWriter
    from lidar_fmu.osi.trace import check_message_type

    model = OsiSensorModel(sensor=SMALL_SENSOR)
    with SensorDataMcapWriter(tmp_path / "sd.mcap") as writer:
        writer.write(bytes(model.step(next(iter(read_trace(SHARED_TRACE))), 0.1).sensor_data))
    with pytest.raises(TraceError, match="MCAP trace of SensorData, not of SensorView"):
        check_message_type(tmp_path / "sd.mcap")


def test_message_types_are_told_by_content():
    from osi3.osi_sensorview_pb2 import SensorView

    from lidar_fmu.osi.trace import check_message_type, identify_message

    view = next(iter(read_trace(SHARED_TRACE)))
    assert identify_message(view) == "SensorView"
    assert identify_message(SensorView.FromString(view).global_ground_truth.SerializeToString()) == "GroundTruth"
    data = bytes(OsiSensorModel(sensor=SMALL_SENSOR).step(view, 0.1).sensor_data)
    assert identify_message(data) == "SensorData" and identify_message(data, "SensorView") == "SensorData"
    assert identify_message(bytes(range(256))) is None
    check_message_type(SHARED_TRACE)  # a SensorView trace passes


# -- no stale files -------------------------------------------------------------------------------------------------
@pytest.fixture
def scenario(tmp_path):
    """The shared trace with the small sensor, as a scenario folder."""
    (tmp_path / "scenario.yaml").write_text(json.dumps({"trace": str(SHARED_TRACE), "sensor": SMALL_SENSOR,
                                                        "name": "minimal_valid_example"}))
    return tmp_path


def test_a_shorter_replay_leaves_no_frames_of_the_longer_one(scenario, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")  # the user's own file: never touched
    argv = ["replay", scenario, "-o", out, "-q"]
    assert run([*argv, "--frames", 6], capsys)[0] == 0
    assert len(list((out / "frames").glob("*.pcd"))) == 6
    (out / "frames" / "frame_9999.pcd").write_text("not the replay's")  # in its folder, but not written by it
    assert run([*argv, "--frames", 2, "--trace-format", "mcap"], capsys)[0] == 0
    frames = sorted(p.name for p in (out / "frames").glob("*.pcd"))
    assert frames == ["frame_0000.pcd", "frame_0001.pcd", "frame_9999.pcd"]
    traces = [p.name for p in out.iterdir() if "_sd_" in p.name]
    assert len(traces) == 1 and traces[0].endswith("_2_minimal_valid_example.mcap")
    assert (out / "notes.txt").read_text() == "mine"
    listed = (out / MANIFEST).read_text().split()
    assert "frames/frame_0001.pcd" in listed and "summary.json" in listed and "notes.txt" not in listed


def test_a_manifest_never_removes_files_outside_the_folder(tmp_path):
    from lidar_fmu.tools.replay import clear_previous_replay

    out, outside = tmp_path / "out", tmp_path / "precious.txt"
    out.mkdir()
    outside.write_text("keep")
    (out / "a.pcd").write_text("x")
    (out / MANIFEST).write_text(f"../precious.txt\n{outside}\na.pcd\n")
    assert clear_previous_replay(str(out)) == ["a.pcd"]
    assert outside.read_text() == "keep" and not (out / MANIFEST).exists()


def test_rerun_without_rerun_sdk_fails_before_anything_is_created(scenario, tmp_path):
    out = tmp_path / "out"
    script = ("import sys; sys.modules['rerun'] = None\n"
              "from lidar_fmu.tools.cli import main\n"
              "sys.exit(main(sys.argv[1:]))\n")
    for argv in (["replay", str(scenario), "-o", str(out / "replay"), "-q", "--rerun", str(out / "replay" / "r.rrd")],
                 ["demo", "-o", str(out / "demo"), "--frames", "1", "-q", "--rerun", str(tmp_path / "d.rrd")]):
        done = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True)
        assert done.returncode == 2 and "rerun-sdk" in _one_error_line(done.stderr), done.stderr
        assert not out.exists(), sorted(p.name for p in out.rglob("*"))


# -- rigs -----------------------------------------------------------------------------------------------------------
RIG = {"sensors": [
    {**SMALL_SENSOR, "name": "front", "channels": 8, "horizontal_samples": 180,
     "mounting": {"xyz_m": [2.0, 0.0, 1.4], "rpy_deg": [0, 0, 0]}},
    {**SMALL_SENSOR, "name": "rear", "channels": 4, "horizontal_samples": 90, "sensor_id": 7,
     "mounting": {"xyz_m": [-1.0, 0.0, 1.6], "rpy_deg": [0, 0, 180]}},
]}


def _rig_views():
    cars = [(20, (14.0, -3.0, 0.9), (0, 0, math.radians(25)), (4.6, 1.9, 1.8), ""),
            (21, (-9.0, 4.0, 0.9), (0, 0, math.radians(-60)), (4.2, 1.8, 1.6), "")]
    return [sensor_view(cars, time_s=t, host=(HOST_ID, (2.0 * t, 0.0, 0.75), 0.0)) for t in (0.1, 0.2)]


def test_a_rig_replays_each_lidar_into_a_folder_of_its_own(fmu_path, tmp_path):
    from osi3.osi_sensordata_pb2 import SensorData

    views = _rig_views()
    write_trace(tmp_path / "views.osi", views)
    (tmp_path / "rig.json").write_text(json.dumps(RIG))
    summary = replay(tmp_path / "views.osi", tmp_path / "out", fmu_path=fmu_path, progress=False,
                     overrides={"sensor": str(tmp_path / "rig.json"), "environment": "none"})
    # the same steps in-process: each lidar's cloud, in its own frame (the cars alone: no ground plane)
    model = OsiSensorModel(sensor=RIG, environment="none")
    for k, view in enumerate(views):
        assert model.step(view, 0.1 * (k + 1)).valid
    # the first lidar takes the SensorView's sensor_id (0) + its index, the second its own
    assert [(lidar["sensor_id"], lidar["folder"], lidar["sensor"]) for lidar in summary["lidars"]] == [
        (0, "sensor_0", "front"), (7, "sensor_7", "rear")]
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["frames"] == 2
    for lidar, cloud in zip(summary["lidars"], model.last_clouds):
        folder = tmp_path / "out" / lidar["folder"]
        points = read_pcd(folder / "frames" / "frame_0001.pcd")
        assert len(points) == len(cloud) > 0 and set(np.unique(points["object_id"])) <= {20, 21}
        assert np.allclose(np.stack([points[a] for a in "xyz"], 1), cloud.xyz, atol=1e-4)
        # the lidar's SensorData trace: its one entry, its id on the SensorData
        data = [SensorData.FromString(m) for m in read_trace(folder / lidar["sensordata_trace"], "SensorData")]
        assert len(data) == 2 and all(len(d.feature_data.lidar_sensor) == 1 for d in data)
        assert {d.sensor_id.value for d in data} == {lidar["sensor_id"]}
    front, rear = summary["lidars"]
    assert front["returns_per_frame"] != rear["returns_per_frame"]  # two lidars, not one written twice


def test_a_scenario_names_a_rig_inline_with_ground_truth(fmu_path, tmp_path):
    """``sensor: {sensors: [...]}`` in scenario.yaml: each lidar under its id, each PCD with its own lidar's
    ground truth."""
    from lidar_fmu.physics.ground_truth import GROUND_TRUTH_DTYPE

    noisy = {**SMALL_SENSOR, "noise": {"range_sigma_m": 0.02, "seed": 3}}
    rig = {"sensors": [{**noisy, "channels": 8}, {**noisy, "channels": 4, "noise": {"range_sigma_m": 0.02, "seed": 4},
                                                  "mounting": {"xyz_m": [0.5, 0.0, 2.5], "rpy_deg": [0, 10, 0]}}]}
    (tmp_path / "scenario.yaml").write_text(json.dumps({"trace": str(SHARED_TRACE), "sensor": rig,
                                                        "ground_truth": True}))
    summary = replay(tmp_path, tmp_path / "out", fmu_path=fmu_path, max_frames=2, progress=False)
    assert [lidar["folder"] for lidar in summary["lidars"]] == ["sensor_0", "sensor_1"]
    assert [lidar["rays_per_frame"] for lidar in summary["lidars"]] == [8 * 360, 4 * 360]
    for lidar in summary["lidars"]:
        points = read_pcd(tmp_path / "out" / lidar["folder"] / "frames" / "frame_0001.pcd")
        assert set(GROUND_TRUTH_DTYPE.names) <= set(points.dtype.names) and len(points) > 5
        error = points["range"] - points["range_true"]
        assert 0 < np.abs(error).max() < 0.2  # noise about the truth of this lidar's own rays


def test_a_rig_writes_one_ros_bag_with_a_topic_and_tf_frame_per_lidar(fmu_path, tmp_path):
    """--rosbag with a rig: every lidar's clouds on a topic and in a TF frame of its own, each at the pose the
    FMU measured it from (the host's pose times that lidar's mounting)."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    write_trace(tmp_path / "views.osi", _rig_views())
    (tmp_path / "rig.json").write_text(json.dumps(RIG))
    summary = replay(tmp_path / "views.osi", tmp_path / "out", fmu_path=fmu_path, progress=False,
                     overrides={"sensor": str(tmp_path / "rig.json")}, rosbag_path=str(tmp_path / "bag"))
    with AnyReader([tmp_path / "bag"], default_typestore=get_typestore(Stores.ROS2_HUMBLE)) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        messages = [(c.topic, reader.deserialize(raw, c.msgtype)) for c, _, raw in reader.messages()]
    assert counts == {"/tf": 4, "/sensor_0/points": 2, "/sensor_7/points": 2}
    for lidar in summary["lidars"]:
        clouds = [m for topic, m in messages if topic == f"/{lidar['folder']}/points"]
        assert [c.width for c in clouds] == lidar["returns_per_frame"]
        assert {c.header.frame_id for c in clouds} == {lidar["folder"]}
    poses = {m.transforms[0].child_frame_id: m.transforms[0].transform for topic, m in messages if topic == "/tf"}
    # the last frame: host at x = 0.4 m (rear axle), front lidar 2 m ahead of it, the rear one 1 m behind, turned
    front, rear = poses["sensor_0"], poses["sensor_7"]
    assert front.translation.x - rear.translation.x == pytest.approx(3.0, abs=1e-6)
    assert (front.translation.z, rear.translation.z) == pytest.approx((1.4 + 0.75, 1.6 + 0.75), abs=0.5)
    assert abs(front.rotation.w) == pytest.approx(1.0) and abs(rear.rotation.z) == pytest.approx(1.0)


def test_a_rig_records_one_rerun_scene_with_each_lidar_under_its_id(fmu_path, tmp_path):
    """--rerun with a rig: the scene once, and each lidar's points under world/sensor_<id>, at its own pose."""
    RrdReader = pytest.importorskip("rerun.chunk").RrdReader

    write_trace(tmp_path / "views.osi", _rig_views())
    (tmp_path / "rig.json").write_text(json.dumps(RIG))
    summary = replay(tmp_path / "views.osi", tmp_path / "out", fmu_path=fmu_path, progress=False,
                     overrides={"sensor": str(tmp_path / "rig.json")}, rerun_path=str(tmp_path / "rig.rrd"))
    rows: dict = {}
    for chunk in RrdReader(tmp_path / "rig.rrd").stream():
        batch = chunk.to_record_batch()
        for name in batch.column_names:
            if name.startswith(("Points3D:positions", "Transform3D:translation")):
                values = [v for v in batch.column(name).to_pylist() if v is not None]
                rows.setdefault(chunk.entity_path, []).extend(values)
    for lidar in summary["lidars"]:
        points = rows[f"/world/{lidar['folder']}/points"]
        assert [len(frame) for frame in points] == lidar["returns_per_frame"]
    front, rear = (np.array(rows[f"/world/sensor_{i}"][-1]).ravel() for i in (0, 7))
    assert front[0] - rear[0] == pytest.approx(3.0, abs=1e-5)  # 2 m ahead of the rear axle, 1 m behind it


def test_a_replay_whose_frames_the_fmu_flags_invalid_fails_in_one_line(tmp_path, capsys):
    """Frames the FMU says are no measurements (the host is not in the ground truth) make the replay fail (exit 2,
    one line with the count and the first reason), its outputs written and the reasons in summary.json."""
    from osi3.osi_sensorview_pb2 import SensorView

    views = []
    for t in (0.1, 0.2):
        view = SensorView.FromString(sensor_view([], time_s=t, host=None))
        view.host_vehicle_id.value = view.global_ground_truth.host_vehicle_id.value = 77
        views.append(view.SerializeToString())
    write_trace(tmp_path / "nohost.osi", views)
    (tmp_path / "small.json").write_text(json.dumps(SMALL_SENSOR))
    out = tmp_path / "out"
    assert main(["replay", str(tmp_path / "nohost.osi"), "--sensor", str(tmp_path / "small.json"), "-o", str(out),
                 "-q"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "2 of 2 frames invalid, the first (frame 0)" in line and "host vehicle 77 is not in the ground truth" in line
    summary = json.loads((out / "summary.json").read_text())
    assert [frame["index"] for frame in summary["invalid_frames"]] == [0, 1]
