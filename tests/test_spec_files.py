"""Spec files as people write and move them: a mistyped key gets the key it resembles, and the files a spec names
(a unit's metadata, a calibration) are found beside it wherever it is run from or moved to."""
import os
import shutil

import pytest
import yaml

from helpers.recordings import DATA
from lidar_fmu.sensors import SensorSpecError, load_sensor
from lidar_fmu.tools.cli import main

OS1_32 = os.path.join(DATA, "OS-1-32-G_v2.1.1_1024x10")


@pytest.mark.parametrize("key, meant", [("noize", "noise"), ("max_rang_m", "max_range_m"),
                                        ("beam_divergance_mrad", "beam_divergence_mrad")])
def test_a_mistyped_key_gets_the_key_it_resembles(key, meant):
    with pytest.raises(SensorSpecError, match=f"'{key}' \\(did you mean '{meant}'\\?\\)"):
        load_sensor({"preset": "velodyne_vlp16", key: 1})


def test_a_key_like_none_and_many_keys_stay_one_short_line():
    with pytest.raises(SensorSpecError) as error:
        load_sensor({"preset": "velodyne_vlp16", "zzzz": 1})
    assert "did you mean" not in str(error.value)
    with pytest.raises(SensorSpecError) as error:
        load_sensor({"preset": "velodyne_vlp16"} | {f"key{k}": k for k in range(10_000)})
    assert "and 9995 more" in str(error.value) and len(str(error.value)) < 400


def test_the_command_line_names_the_meant_key(tmp_path, capsys):
    spec = tmp_path / "noisy.yaml"
    spec.write_text("preset: velodyne_vlp16\nnoize: true\n")
    mesh = tmp_path / "wall.obj"
    mesh.write_text("v 5 -5 -5\nv 5 5 -5\nv 5 5 5\nf 1 2 3\n")
    assert main(["scan", "--mesh", str(mesh), "--sensor", str(spec), "-o", str(tmp_path / "a.pcd")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "did you mean 'noise'?" in err


def test_a_spec_finds_its_metadata_beside_it_wherever_it_is_run_from(tmp_path, monkeypatch):
    unit = tmp_path / "unit"
    unit.mkdir()
    shutil.copy(OS1_32 + ".json", unit / "metadata.json")
    (unit / "unit.yaml").write_text(yaml.safe_dump({"ouster_metadata": "metadata.json", "max_range_m": 90}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    shutil.move(unit, tmp_path / "moved")
    sensor = load_sensor(str(tmp_path / "moved" / "unit.yaml"))
    assert sensor.pattern.rows == 32 and sensor.max_range_m == 90


def test_calibrate_names_the_metadata_from_the_specs_folder(tmp_path, monkeypatch):
    """The spec calibrate writes names the metadata relative to itself: the two move together."""
    unit = tmp_path / "unit"
    unit.mkdir()
    shutil.copy(OS1_32 + ".json", unit / "metadata.json")
    assert main(["calibrate", OS1_32 + ".npz", "--metadata", str(unit / "metadata.json"),
                 "-o", str(unit / "unit.yaml")]) == 0
    assert yaml.safe_load((unit / "unit.yaml").read_text())["ouster_metadata"] == "metadata.json"
    shutil.move(unit, tmp_path / "moved")
    monkeypatch.chdir(tmp_path)
    assert load_sensor(str(tmp_path / "moved" / "unit.yaml")).pattern.rows == 32
