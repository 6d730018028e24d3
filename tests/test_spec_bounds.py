"""Hostile and malformed sensor specs, calibrations and unit metadata: one short line naming the key or file, fast,
through load_sensor, the command line (exit 2) and the FMU (fmi2Error with the line logged)."""
import json
import os

import pytest
import trimesh

from helpers.osi_views import sensor_view
from lidar_fmu.cosim.fmu_host import FmuInstance
from lidar_fmu.documents import MAX_DEPTH, parse_document, read_document, shown
from lidar_fmu.errors import LidarFmuError
from lidar_fmu.sensors import SensorSpecError, load_sensor

DATA = os.path.join(os.path.dirname(__file__), "..", "src", "lidar_fmu", "sensors", "data")
OUSTER = os.path.join(DATA, "ouster_os1_128_v2.3.0_1024x10.json")
VELODYNE = os.path.join(DATA, "velodyne_VLP16db.yaml")
LONGEST_LINE = 600  # characters an error line may have (lidar_fmu.documents.MESSAGE_CHARS)


def laughs() -> str:
    """Eight nested aliases in ~260 bytes of YAML: 9⁸ = 43 million strings when expanded."""
    anchors = ["&a [l,l,l,l,l,l,l,l,l]"]
    for previous, anchor in zip("abcdef", "bcdefg"):
        anchors.append(f"&{anchor} [" + ",".join([f"*{previous}"] * 9) + "]")
    anchors.append("[" + ",".join(["*g"] * 9) + "]")
    return "[" + ", ".join(anchors) + "]"


def billion_laughs(key: str) -> str:
    """A spec of ~280 bytes whose ``key`` holds :func:`laughs`."""
    return f"preset: velodyne_vlp16\n{key}: {laughs()}\n"


def ouster_metadata(**changes) -> dict:
    """The packaged OS1-128 metadata (legacy flat layout) with ``changes``."""
    with open(OUSTER, encoding="utf-8") as f:
        data = json.load(f)
    return data | changes


def velodyne_with(laser: int, **changes) -> str:
    import yaml

    with open(VELODYNE, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    data["lasers"][laser].update(changes)
    return yaml.safe_dump(data)


def written(tmp_path, name: str, content) -> str:
    """``content`` (text, bytes, or a mapping as JSON) written to ``tmp_path / name`` → its path."""
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def velodyne_spec(tmp_path, calibration_text) -> str:
    cal = written(tmp_path, "cal.yaml", calibration_text)
    return written(tmp_path, "spec.json", {"calibration": cal, "horizontal_samples": 100})


# (case id, file name, content, what the line must name)
LAUGHS = [(f"laughs-{key}", "laughs.yaml", billion_laughs(key), "aliases expand")
          for key in ("noise", "name", "horizontal_samples", "vertical_angles_deg", "weather")]
MALFORMED = [
    ("beam_to_lidar_transform-text", "unit.json", ouster_metadata(beam_to_lidar_transform="abc"),
     "beam_to_lidar_transform"),
    ("beam_altitude_angles-text", "unit.json", ouster_metadata(beam_altitude_angles="abc"), "beam_altitude_angles"),
    ("beam_altitude_angles-object", "unit.json", ouster_metadata(beam_altitude_angles={"a": 1}),
     "beam_altitude_angles"),
    ("beam_origin-text", "unit.json", ouster_metadata(lidar_origin_to_beam_origin_mm="x"),
     "lidar_origin_to_beam_origin_mm"),
    ("lidar_to_sensor-3", "unit.json", ouster_metadata(lidar_to_sensor_transform=[1, 0, 0]),
     "lidar_to_sensor_transform"),
    ("lidar_mode-0x10", "unit.json", ouster_metadata(lidar_mode="0x10"), "lidar_mode"),
    ("lidar_mode-negative", "unit.json", ouster_metadata(lidar_mode="-1024x10"), "lidar_mode"),
    ("column_window-1e12", "unit.json", ouster_metadata(lidar_data_format={"column_window": [0, 1e12]}),
     "column_window"),
    ("column_window-negative", "unit.json", ouster_metadata(lidar_data_format={"column_window": [-5, 2000]}),
     "column_window"),
    ("column_window-one", "unit.json", ouster_metadata(lidar_data_format={"column_window": [3]}), "column_window"),
    ("column_window-text", "unit.json", ouster_metadata(lidar_data_format={"column_window": "ab"}),
     "column_window"),
    ("lidar_data_format-list", "unit.json", ouster_metadata(lidar_data_format=[0, 1023]), "lidar_data_format"),
    ("preset-list", "spec.yaml", "preset: [x]\n", "'preset'"),
    ("airsim-points-per-second", "robot.json",
     {"sensors": [{"id": "lidar1", "type": "lidar", "lidar-type": "generic_rosette", "points-per-second": 1e12}]},
     "points-per-second"),
]
GARBAGE = [
    ("frame_rate_hz-tiny", "spec.yaml", "preset: velodyne_vlp16\nframe_rate_hz: 1.0e-300\n", "frame_rate_hz"),
    ("firing_interval_s-huge", "spec.yaml", "preset: velodyne_vlp16\nfiring_interval_s: 1.0e+300\n",
     "firing_interval_s"),
    ("ouster-nan-angle", "unit.json", ouster_metadata(beam_altitude_angles=[float("nan")] + [0.0] * 127),
     "beam_altitude_angles"),
    ("ouster-inf-azimuth", "unit.json", ouster_metadata(beam_azimuth_angles=[float("inf")] + [0.0] * 127),
     "beam_azimuth_angles"),
    ("beam_origin-nan", "unit.json", ouster_metadata(lidar_origin_to_beam_origin_mm=float("nan")),
     "lidar_origin_to_beam_origin_mm"),
    ("beam_origin-huge", "unit.json", ouster_metadata(lidar_origin_to_beam_origin_mm=1e300),
     "lidar_origin_to_beam_origin_mm"),
    ("lidar_to_sensor-zero", "unit.json", ouster_metadata(lidar_to_sensor_transform=[0] * 16),
     "lidar_to_sensor_transform"),
]
VELODYNE_CASES = [  # (case id, calibration file content, what the line must name)
    ("syntax-error", "lasers:\n  - {laser_id: 0, vert_correction: 0.1\n  - x\n", "cal.yaml: expected ',' or '}'"),
    ("nul-bytes", b"lasers:\n  - {laser_id: 0,\x00 vert_correction: 0.1}\n", "NUL byte"),
    ("deep-nesting", "lasers: " + "[" * 20_000 + "]" * 20_000 + "\n", f"deeper than {MAX_DEPTH}"),
    ("vert_offset_correction-huge", velodyne_with(3, vert_offset_correction=1e300), "lasers[3].vert_offset_correction"),
]


def spec_cases(tmp_path):
    """(case id, spec path, what the line must name) of every case above, written to files."""
    cases = []
    for case, name, content, key in LAUGHS + MALFORMED + GARBAGE:
        (tmp_path / case).mkdir()
        cases.append((case, written(tmp_path / case, name, content), key))
    for case, text, key in VELODYNE_CASES:
        (tmp_path / case).mkdir()
        cases.append((case, velodyne_spec(tmp_path / case, text), key))
    return cases


ALL_IDS = [c[0] for c in LAUGHS + MALFORMED + GARBAGE] + [c[0] for c in VELODYNE_CASES]


def assert_one_short_line(message: str, names: str) -> None:
    assert names in message, message
    assert "\n" not in message.strip() and len(message) <= LONGEST_LINE, message[:2000]
    assert "Traceback" not in message


@pytest.mark.parametrize("case", ALL_IDS)
def test_a_bad_spec_is_one_short_line_naming_the_key(tmp_path, case):
    _, path, names = next(c for c in spec_cases(tmp_path) if c[0] == case)
    with pytest.raises(SensorSpecError) as info:
        load_sensor(path)
    assert_one_short_line(str(info.value), names)


@pytest.mark.parametrize("case", ALL_IDS)
def test_a_bad_spec_on_the_command_line_exits_2_with_one_line(tmp_path, capsys, case):
    from lidar_fmu.tools.cli import main

    _, path, names = next(c for c in spec_cases(tmp_path) if c[0] == case)
    trimesh.creation.box().export(tmp_path / "box.stl")
    code = main(["scan", "--mesh", str(tmp_path / "box.stl"), "--sensor", path, "-o", str(tmp_path / "o.pcd")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("lidar-fmu: error: ") and err.count("\n") == 1, err[:2000]
    assert_one_short_line(err, names)


@pytest.mark.parametrize("case", ["laughs-noise", "laughs-weather", "lidar_mode-0x10", "column_window-1e12",
                                  "nul-bytes", "deep-nesting", "preset-list", "airsim-points-per-second",
                                  "lidar_to_sensor-zero"])
def test_a_bad_spec_in_the_fmu_is_fmi2error_with_the_line_logged(fmu_path, tmp_path, case):
    from fmpy.fmi1 import FMICallException

    _, path, names = next(c for c in spec_cases(tmp_path) if c[0] == case)
    with FmuInstance(fmu_path, initialize=False) as fmu:
        with pytest.raises(FMICallException, match="fmi2ExitInitializationMode failed with status 3"):
            fmu.initialize({"sensor": path})
        with pytest.raises(FMICallException, match="fmi2DoStep failed with status 3"):  # a failed start fails each step
            fmu.step(sensor_view([]), 0, 0.1)
        errors = [text for status, text in fmu.messages if status == "ERROR"]
    assert errors and all(len(text) <= LONGEST_LINE + 100 for _, text in fmu.messages)
    assert any(names in text for text in errors), errors
    assert not any("modulo" in text or "Traceback" in text for text in errors)


def test_an_inline_sensor_list_is_bounded_too():
    from lidar_fmu.sensors.rig import load_rig

    text = f"[{{preset: velodyne_vlp16, noise: {laughs()}}}]"
    with pytest.raises(SensorSpecError, match="aliases expand") as info:
        load_rig(text)
    assert_one_short_line(str(info.value), "the sensor list")


# -- the bounded reader ----------------------------------------------------------------------------------------
def test_aliases_within_the_budget_and_ordinary_files_read_as_before(tmp_path):
    text = "base: &b {preset: velodyne_vlp16, max_range_m: 80}\nsensors: [*b, *b, *b]\n"
    assert parse_document(text, "x")["sensors"] == [{"preset": "velodyne_vlp16", "max_range_m": 80}] * 3
    assert read_document(VELODYNE, "calibration")["lasers"][0]["laser_id"] == 0
    assert read_document(OUSTER, "metadata")["lidar_mode"] == "1024x10"


@pytest.mark.parametrize("text, syntax, message", [
    ("a: &a [1, *a]\n", "yaml", "inside its own anchor"),
    ("[" * 100 + "]" * 100, "json", f"deeper than {MAX_DEPTH} levels at line 1, column {MAX_DEPTH + 1}"),
    ('{"a": "[[[[[[", "b": 1,}', "json", "line 1, column 24"),
    ("a: [" + ",".join(["1"] * 200_001) + "]", "yaml", "more than 200,000 YAML nodes"),
    ("a: 1\x00", "yaml", "NUL byte at line 1, column 5"),
])
def test_the_reader_refuses_in_one_line(text, syntax, message):
    with pytest.raises(LidarFmuError, match=message) as info:
        parse_document(text, "test doc", syntax=syntax)
    assert_one_short_line(str(info.value), "test doc")


def test_oversized_and_binary_files_are_refused_before_parsing(tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as f:
        f.truncate(5 * 2**20)  # sparse: nothing written, 5 MiB long
    with pytest.raises(LidarFmuError, match="larger than the limit of 4 MiB"):
        read_document(big, "sensor spec")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(LidarFmuError, match="not UTF-8 text"):
        read_document(latin, "sensor spec")


def test_shown_values_are_short_however_large():
    huge = [["x" * 1000] * 1000] * 1000
    assert len(shown(huge)) <= 80 and len(shown("y" * 10**6)) <= 80 and shown(1.5) == "1.5"


@pytest.mark.parametrize("reader", ["scenario", "sweep", "materials"])
def test_scenario_sweep_and_material_files_are_read_within_bounds(tmp_path, reader):
    from lidar_fmu.physics.materials.database import read_material_file
    from lidar_fmu.tools.replay import load_scenario
    from lidar_fmu.tools.sweep import load_sweep

    path = tmp_path / ("scenario.yaml" if reader == "scenario" else f"{reader}.yaml")
    path.write_text(f"name: {laughs()}\ntrace: t.osi\n")
    read = {"scenario": load_scenario, "sweep": load_sweep, "materials": read_material_file}[reader]
    with pytest.raises(LidarFmuError, match="aliases expand") as info:  # refused before any expansion
        read(str(path))
    assert_one_short_line(str(info.value), path.name)
