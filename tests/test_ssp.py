"""`lidar-fmu build --ssp`: the SSP system (OSI trace player → lidar FMU → OSI trace writer) is valid SSP 1.0,
its FMUs pass FMPy's validation, and it replays a trace in OpenMCx and in FMPy's SSP master to the SensorData
`lidar-fmu replay` writes, detection for detection."""
import pathlib
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import trimesh
import yaml
from lxml import etree
from osi3.osi_sensordata_pb2 import SensorData

from helpers.fmu_inputs import SHARED_TRACE, SMALL_SENSOR
from helpers.openmcx import NO_OPENMCX, OPENMCX, run_openmcx, unpacked
from helpers.osi_views import sensor_view
from lidar_fmu.cosim.fmu_host import FmuInstance
from lidar_fmu.cosim.ssp import build_ssp, validate_ssp
from lidar_fmu.osi.trace import read_trace, write_trace
from lidar_fmu.tools.cli import main
from lidar_fmu.tools.replay import replay

SCHEMAS = pathlib.Path(__file__).parent / "data" / "ssp"
NS = {"ssd": "http://ssp-standard.org/SSP1/SystemStructureDescription",
      "ssv": "http://ssp-standard.org/SSP1/SystemStructureParameterValues",
      "mc": "com.avl.model.connect.ssp.task"}
FRAMES = 20  # SensorViews in the shared trace, 0.1 s apart from 0.1 s


def spec_file(folder: pathlib.Path, **keys) -> str:
    path = folder / "vlp16.yaml"
    path.write_text(yaml.safe_dump({"preset": "velodyne_vlp16", **keys}))
    return str(path)


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    """The system for the shared trace and a VLP-16 given as a spec file (carried into the lidar FMU)."""
    folder = tmp_path_factory.mktemp("ssp")
    return build_ssp(folder / "replay.ssp", str(SHARED_TRACE), spec_file(folder))


def replayed(tmp_path: pathlib.Path, sensor: str) -> list[bytes]:
    """The SensorData `lidar-fmu replay` writes for the shared trace and ``sensor``."""
    summary = replay(str(SHARED_TRACE), tmp_path / "replay", overrides={"sensor": sensor}, trace_format="osi",
                     write_pcd_every=0, progress=False)
    return list(read_trace(tmp_path / "replay" / summary["sensordata_trace"], "SensorData"))


def detections(sensor_data: bytes) -> list:
    """Every lidar's detections of a SensorData (protobuf messages: compared field by field)."""
    return [list(lidar.detection) for lidar in SensorData.FromString(sensor_data).feature_data.lidar_sensor]


def test_the_package_is_valid_ssp_1_0_and_its_fmus_pass_fmpy_validation(system, tmp_path):
    names = set(zipfile.ZipFile(system.path).namelist())
    assert names == {"SystemStructure.ssd", "resources/OsiTracePlayer.fmu", "resources/LidarSensor.fmu",
                     "resources/OsiTraceWriter.fmu", "resources/player.ssv", "resources/lidar.ssv",
                     "resources/writer.ssv"}
    folder = unpacked(system.path, tmp_path)
    # the standard's own schemas (tests/data/ssp, from modelica/ssp-standard v1.0.1), not FMPy's copy
    ssd = etree.parse(str(folder / "SystemStructure.ssd"))
    etree.XMLSchema(file=str(SCHEMAS / "SystemStructureDescription.xsd")).assertValid(ssd)
    ssv_schema = etree.XMLSchema(file=str(SCHEMAS / "SystemStructureParameterValues.xsd"))
    values = {}
    for component in ("player", "lidar", "writer"):
        ssv = etree.parse(str(folder / "resources" / f"{component}.ssv"))
        ssv_schema.assertValid(ssv)
        values[component] = {p.get("name"): p.find("ssv:String", NS).get("value")
                             for p in ssv.iterfind("ssv:Parameters/ssv:Parameter", NS)}
    assert values == {"player": {"trace": f"ssp_files/{SHARED_TRACE.name}"},
                      "lidar": {"sensor": "ssp_files/sensor/vlp16.yaml"}, "writer": {"trace": "sensordata.osi"}}
    bindings = [b.get("source") for b in ssd.iterfind(".//ssd:Component/ssd:ParameterBindings/ssd:ParameterBinding",
                                                      NS)]
    assert bindings == ["resources/player.ssv", "resources/lidar.ssv", "resources/writer.ssv"]
    # one step per SensorView, each ending at its view's time: 0 → 2 s in 0.1 s steps, stepped in turn
    experiment = ssd.find("ssd:DefaultExperiment", NS)
    assert (float(experiment.get("startTime")), float(experiment.get("stopTime"))) == (0.0, 2.0)
    task = experiment.find(".//mc:Task", NS)
    assert (task.get("stepType"), float(task.get("deltaTime"))) == ("sequential", 0.1)
    assert (system.frames, system.step_s, system.start_s, system.stop_s) == (FRAMES, 0.1, 0.0, 2.0)
    assert validate_ssp(system.path) == []  # FMPy reads the SSD and SSVs against its schemas, validates each FMU
    # a master that applies no binding (OpenMCx reads no .ssv) runs the same system: the FMUs start at those values
    from fmpy import read_model_description

    for component, model in (("player", "OsiTracePlayer"), ("lidar", "LidarSensor"), ("writer", "OsiTraceWriter")):
        description = read_model_description(str(folder / "resources" / f"{model}.fmu"))
        starts = {v.name: v.start for v in description.modelVariables}
        assert {name: starts[name] for name in values[component]} == values[component]


def test_fmpy_reads_the_system(system):
    from fmpy.ssp.ssd import find_components, get_connections, read_ssd

    ssd = read_ssd(str(system.path))  # validates the SSD and the parameter sets against FMPy's SSP 1.0 schemas
    components = {c.name: c for c in find_components(ssd.system)}
    assert {name: c.source for name, c in components.items()} == {
        "player": "resources/OsiTracePlayer.fmu", "lidar": "resources/LidarSensor.fmu",
        "writer": "resources/OsiTraceWriter.fmu"}
    connections = {(a.parent.name, a.name, b.parent.name, b.name) for a, b in get_connections(ssd.system)}
    assert len(connections) == 6
    assert ("player", "OSMPSensorViewOut.base.lo", "lidar", "OSMPSensorViewIn.base.lo") in connections
    assert ("lidar", "OSMPSensorDataOut.size", "writer", "OSMPSensorDataIn.size") in connections
    [binding] = components["lidar"].parameterBindings
    assert [(p.name, p.type, p.value) for p in binding.parameterValues[0].parameters] == [
        ("sensor", "String", "ssp_files/sensor/vlp16.yaml")]


# FMPy's SSP master, in a Python of its own (three pythonfmu FMUs in one process; the writer writes to its cwd)
FMPY_MASTER = """
import sys
from fmpy.ssp.simulation import simulate_ssp

simulate_ssp(sys.argv[1], start_time=float(sys.argv[2]), stop_time=float(sys.argv[3]), step_size=float(sys.argv[4]))
"""


@pytest.mark.slow
def test_fmpy_simulates_the_system_to_the_replays_detections_a_step_later(system, tmp_path):
    """FMPy's simulate_ssp steps every FMU, then passes outputs on (Jacobi): each connection delays by a step, so
    the lidar's first step has no SensorView (an invalid SensorData, no detections) and the writer records every
    SensorData a step after it was made; two steps more give every view. FMPy 0.3.32 applies no parameter binding
    (and sets no String): the system runs on the FMUs' start values, which are the bound values."""
    run_s = (system.stop_s - system.start_s) + 1.5 * system.step_s  # two steps more, not a third
    run = subprocess.run([sys.executable, "-c", FMPY_MASTER, str(system.path), str(system.start_s),
                          str(system.start_s + run_s), str(system.step_s)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    written = list(read_trace(tmp_path / system.sensordata, "SensorData"))
    expected = replayed(tmp_path, spec_file(tmp_path))
    assert len(expected) == FRAMES and len(written) == FRAMES + 1
    first = SensorData.FromString(written[0])
    assert first.feature_data.lidar_sensor[0].header.number_of_valid_detections == 0  # no SensorView yet
    for k, (ours, theirs) in enumerate(zip(written[1:], expected)):
        assert detections(ours) == detections(theirs) and len(detections(ours)[0]) > 7000, f"frame {k}"
        assert SensorData.FromString(ours).timestamp == SensorData.FromString(theirs).timestamp


@pytest.mark.slow
@pytest.mark.skipif(OPENMCX is None, reason=NO_OPENMCX)
def test_openmcx_runs_the_system_to_the_replays_sensor_data(tmp_path):
    """OpenMCx 6e5e7bf steps the player, the lidar and the writer in turn (the SSD's sequential task): the writer's
    trace is the replay's, message for message; with noise on, whose numbers come from the seed and the frame
    counter, so the lidar steps exactly once per view. OpenMCx reads no .ssv (it warns and runs on the FMUs' start
    values, the bound ones) and takes an unpacked SSP."""
    spec = spec_file(tmp_path, noise=True)
    system = build_ssp(tmp_path / "noisy.ssp", str(SHARED_TRACE), spec)
    # docs/fmu.md's recipe for non-Python masters on Linux: pythonfmu's binary does not link libpython
    folder = run_openmcx(system.path, tmp_path / "system")
    written = list(read_trace(folder / system.sensordata, "SensorData"))
    expected = replayed(tmp_path, spec)
    assert len(written) == len(expected) == FRAMES
    for k, (ours, theirs) in enumerate(zip(written, expected)):
        assert detections(ours) == detections(theirs) and len(detections(ours)[0]) > 7000, f"frame {k}"
        assert ours == theirs, f"frame {k}"  # the whole SensorData, header and cycle counter included


# -- the trace player and writer alone, as a master drives them ----------------------------------------------
def component_fmu(system, model: str, folder: pathlib.Path) -> pathlib.Path:
    with zipfile.ZipFile(system.path) as archive:
        return pathlib.Path(archive.extract(f"resources/{model}.fmu", folder))


def sensor_data_trace(path: pathlib.Path) -> pathlib.Path:
    """A one-message SensorData trace (a detection: what tells it from a SensorView)."""
    message = SensorData(timestamp={"seconds": 1},
                         feature_data={"lidar_sensor": [{"detection": [{"position": {"distance": 5.0}}]}]})
    write_trace(path, [message.SerializeToString()])
    return path


def errors(fmu: FmuInstance) -> str:
    return " ".join(text for status, text in fmu.messages if status == "ERROR")


def test_the_player_sends_each_view_once_then_none(system, tmp_path):
    views = list(read_trace(SHARED_TRACE))
    with FmuInstance(component_fmu(system, "OsiTracePlayer", tmp_path)) as player:  # its start values: the trace
        sent = []
        for k in range(FRAMES + 2):
            player.fmu.doStep(k * 0.1, 0.1)
            sent.append(player.get_binary("OSMPSensorViewOut"))
        assert sent[:FRAMES] == views
        assert sent[FRAMES:] == [b"", b""]
        frames, valid = player.fmu.getInteger([player.vr["frames"].valueReference])[0], player.fmu.getBoolean(
            [player.vr["valid"].valueReference])[0]
        assert (frames, valid) == (FRAMES, False)
        assert any("ended after 20 SensorViews" in text for _, text in player.messages)


def test_the_player_refuses_a_missing_or_wrong_trace_with_fmi2error(system, tmp_path):
    from fmpy.fmi1 import FMICallException

    sensor_data = sensor_data_trace(tmp_path / "sd.osi")
    fmu = component_fmu(system, "OsiTracePlayer", tmp_path)
    for trace, said in ((tmp_path / "missing.osi", "trace file not found"), (sensor_data, "SensorData trace")):
        with FmuInstance(fmu, initialize=False) as player:
            with pytest.raises(FMICallException, match=r"status 3 \(error\)"):
                player.initialize({"trace": str(trace)})
            assert said in errors(player) and str(trace) in errors(player)
            with pytest.raises(FMICallException, match=r"status 3 \(error\)"):  # no step plays nothing silently
                player.fmu.doStep(0.0, 0.1)


def test_the_player_plays_a_damaged_trace_up_to_its_damage_then_fails_the_step(system, tmp_path):
    from fmpy.fmi1 import FMICallException

    views = list(read_trace(SHARED_TRACE))[:3]
    damaged = tmp_path / "damaged.osi"
    write_trace(damaged, views)
    with open(damaged, "ab") as f:
        f.write((10_000).to_bytes(4, "little") + b"cut short")  # a length prefix past the end of the file
    with FmuInstance(component_fmu(system, "OsiTracePlayer", tmp_path), {"trace": str(damaged)}) as player:
        for k in range(3):
            player.fmu.doStep(k * 0.1, 0.1)
            assert player.get_binary("OSMPSensorViewOut") == views[k]
        with pytest.raises(FMICallException, match=r"status 3 \(error\)"):
            player.fmu.doStep(0.3, 0.1)
        assert "frame 3 (byte" in errors(player) and player.get_binary("OSMPSensorViewOut") == b""


def test_the_writer_writes_what_it_gets_and_refuses_an_unwritable_trace(system, tmp_path):
    from fmpy.fmi1 import FMICallException

    fmu = component_fmu(system, "OsiTraceWriter", tmp_path)
    messages = [SensorData(timestamp={"seconds": k}).SerializeToString() for k in (1, 2)]
    out = tmp_path / "out.mcap"
    with FmuInstance(fmu, {"trace": str(out)}) as writer:
        for k, data in enumerate([messages[0], None, messages[1]]):  # a step without a buffer writes nothing
            writer.set_binary("OSMPSensorDataIn", data)
            writer.fmu.doStep(k * 0.1, 0.1)
        assert writer.fmu.getInteger([writer.vr["frames"].valueReference]) == [2]
    assert list(read_trace(out, "SensorData")) == messages
    with FmuInstance(fmu, initialize=False) as writer:
        with pytest.raises(FMICallException, match=r"status 3 \(error\)"):
            writer.initialize({"trace": str(tmp_path / "no such folder" / "sd.osi")})
        assert "cannot write trace" in errors(writer)


def test_an_assets_folder_travels_inside_the_lidar_fmu(tmp_path):
    """--assets: the folder the views' model_reference strings name goes into the lidar FMU, which finds it there
    at its start values (run here from the package alone, in another folder than the assets)."""
    assets = tmp_path / "assets"
    assets.mkdir()
    trimesh.creation.icosphere(subdivisions=3, radius=1.0).export(assets / "ball.stl")
    ball = [(30, (10, 0, 1.0), (0, 0, 0), (2.0, 2.0, 2.0), "ball.stl")]
    trace = tmp_path / "balls.osi"
    write_trace(trace, [sensor_view(ball, 0.1 * (k + 1)) for k in range(3)])
    spec = tmp_path / "small.yaml"
    spec.write_text(yaml.safe_dump(SMALL_SENSOR))
    system = build_ssp(tmp_path / "balls.ssp", str(trace), str(spec), assets=str(assets))
    assert system.components[1].parameters == {"sensor": "ssp_files/sensor/small.yaml", "assets": "ssp_files/assets"}
    shutil.rmtree(assets)  # only the package's copy is left
    with FmuInstance(component_fmu(system, "LidarSensor", tmp_path / "unpacked")) as lidar:
        for k, view in enumerate(read_trace(trace)):
            out = lidar.step(view, 0.1 * k, 0.1)
        assert out.valid, lidar.messages
    from lidar_fmu.osi.detections import sensor_data_to_points

    points = sensor_data_to_points(out.sensor_data).points
    hit = np.stack([points[c][points["object_id"] == 30] for c in "xyz"], axis=1)
    centre = np.array([10 + 1.4, 0, 1.0 - 0.3])  # the sensor sits at the host's rear axle (tests/test_fmu.py)
    assert len(hit) > 20 and np.abs(np.linalg.norm(hit - centre, axis=1) - 1.0).max() < 0.03  # the sphere, no box


# -- the command line ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arguments, said", [
    (["--ssp"], "needs --trace"),
    (["--trace", str(SHARED_TRACE)], "--trace goes with --ssp"),
    (["--ssp", "--trace", "missing.osi"], "trace file not found: missing.osi"),
    (["--ssp", "--trace", str(SHARED_TRACE), "--sensor", "no_such_lidar"], "no_such_lidar"),
    (["--ssp", "--trace", str(SHARED_TRACE), "-o", "replay.zip"], "must end in .ssp"),
    (["--ssp", "--trace", str(SHARED_TRACE), "--sensordata", "sd.pcd"], "must end in .osi, .osi.xz or .mcap"),
])
def test_bad_build_ssp_arguments_are_one_line_and_exit_2(arguments, said, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["build", *arguments]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("lidar-fmu: error:") and said in err and len(err.splitlines()) == 1
    assert not list(tmp_path.glob("*.ssp"))


def test_a_sensor_data_trace_or_a_spec_naming_files_elsewhere_is_refused(tmp_path, capsys):
    sensor_data = sensor_data_trace(tmp_path / "sd.osi")
    assert main(["build", "--ssp", "--trace", str(sensor_data), "-o", str(tmp_path / "a.ssp")]) == 2
    assert "is a SensorData trace, not a SensorView trace" in capsys.readouterr().err
    (tmp_path / "unit").mkdir()
    calibration = pathlib.Path(__file__).parent.parent / "src/lidar_fmu/sensors/data/velodyne_VLP16db.yaml"
    shutil.copy(calibration, tmp_path / "vlp16_calibration.yaml")
    spec = tmp_path / "unit" / "spec.yaml"  # its calibration one folder up: not beside it, not carried
    spec.write_text(yaml.safe_dump({"preset": "velodyne_vlp16", "calibration": "../vlp16_calibration.yaml"}))
    assert main(["build", "--ssp", "--trace", str(SHARED_TRACE), "--sensor", str(spec), "-o",
                 str(tmp_path / "b.ssp")]) == 2
    assert "names files that do not go with it into the SSP" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.ssp"))


def test_build_ssp_writes_into_the_default_fmus_folder_not_the_current_one(tmp_path, capsys, monkeypatch):
    from lidar_fmu.cosim import fmu_package

    dist = tmp_path / "dist"  # not there yet: made, as build makes it for the FMU
    monkeypatch.setattr(fmu_package, "DEFAULT_FMU", dist / "LidarSensor.fmu")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert main(["build", "--ssp", "--trace", str(SHARED_TRACE), "--sensor", "velodyne_vlp16"]) in (0, None)
    built = dist / "minimal_valid_example.ssp"  # NAME from the trace's OSI name
    assert f"built {built}:" in capsys.readouterr().out
    assert built.is_file() and not list((tmp_path / "here").iterdir())
