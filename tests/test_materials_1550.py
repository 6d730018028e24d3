"""The IR materials at 1550 nm: what the sources say changes (water, snow, ice, skin, vegetation) does, every
material resolves, docs/physics.md's table is the database's, and wavelength_factors is checked in one line."""
import re
from pathlib import Path

import numpy as np
import pytest

from lidar_fmu import Lidar, Scene
from lidar_fmu.geometry.scene import Mesh
from lidar_fmu.physics.materials import MaterialError, load_database, read_material_file

DOC = Path(__file__).resolve().parent.parent / "docs" / "physics.md"


def _rho0(material):
    return material.reflectance if material.reflectance is not None else float(material.angle_table[0])


@pytest.fixture(scope="module")
def both():
    return load_database(905.0), load_database(1550.0)


def test_what_water_does_at_1550_nm(both):
    at_905, at_1550 = both
    ratio = {m.name: _rho0(at_1550[m.name]) / _rho0(m) for m in at_905 if _rho0(m) > 0}
    # water absorbs ~10 cm⁻¹ at 1550 nm (Hale & Querry 1973): water, ice and snow lose most of their return
    assert ratio["water"] <= 0.11 and ratio["ice"] <= 0.11
    assert _rho0(at_905["snow"]) >= 0.85 and 0.1 <= _rho0(at_1550["snow"]) <= 0.3  # Warren 1982
    assert _rho0(at_1550["skin"]) < 0.15  # Anderson & Parrish 1981: dermal water
    # vegetation: ~50 % at 905 nm, ~25 % at 1550 nm (ASTER)
    for name in ("grass", "leaves_deciduous"):
        assert 0.5 <= _rho0(at_905[name]) <= 0.56 and 0.23 <= _rho0(at_1550[name]) <= 0.26, name
    assert _rho0(at_1550["asphalt"]) == pytest.approx(0.36, abs=0.01)  # REFERENCE: asphaltic concrete 36 %
    assert ratio["aluminum"] > 1.3 and ratio["car_paint_silver"] == pytest.approx(ratio["aluminum"], rel=0.01)
    for name in ("lambertian_50", "road_marking_white", "car_paint_black", "concrete", "retroreflector"):
        assert ratio[name] == 1.0, name


def test_every_material_resolves_at_1550_nm(both):
    at_905, at_1550 = both
    assert at_905.names == at_1550.names and at_1550.wavelength_nm == 1550.0
    codes, table = at_1550.arrays()
    assert np.all(np.isfinite(table)) and table.min() >= 0
    general = codes == 0
    assert table[general, 1:].max() <= 1.0  # glossy tables may pass 1 only at normal incidence


def test_the_docs_table_is_the_databases(both):
    """Every material whose ρ(0) differs between 905 and 1550 nm is in docs/physics.md with these values."""
    at_905, at_1550 = both
    section = DOC.read_text(encoding="utf-8").split("### Materials at 1550 nm")[1].split("\n## ")[0]
    rows = {m: (float(a), float(b)) for m, a, b in
            re.findall(r"^\| `(\w+)` \| ([\d.]+) \| ([\d.]+) \|", section, flags=re.MULTILINE)}
    differ = {m.name for m in at_905 if _rho0(m) > 0 and abs(_rho0(at_1550[m.name]) - _rho0(m)) > 1e-6}
    assert set(rows) == differ
    for name, (a, b) in rows.items():
        assert (a, b) == (round(_rho0(at_905[name]), 3), round(_rho0(at_1550[name]), 3)), name


def test_a_1550_nm_sensor_sees_grass_at_half_its_905_nm_reflectivity():
    """Through a scan: the same grass wall, the raster of a 1550 nm unit and the same unit at 905 nm."""
    wall = Mesh(np.array([[5, -3, -3], [5, 3, -3], [5, 0, 4]], np.float32), np.array([[0, 1, 2]]),
                np.zeros(1, np.int32), ("lawn",), "wall")
    scene = Scene()
    scene.add_instance(0, wall)
    raster = {"horizontal_fov_deg": [10, -10], "columns": 11, "lines": 5, "vertical_fov_deg": [5, -5]}
    seen = {}
    for wavelength in (905.0, 1550.0):
        spec = {"raster": raster, "wavelength_nm": wavelength}
        lidar = Lidar(scene, spec, materials={"materials": {"lawn": "grass"}})
        seen[wavelength] = lidar.scan(np.eye(4)).points["reflectivity"]
    assert len(seen[905.0]) == len(seen[1550.0]) == 55
    np.testing.assert_allclose(seen[1550.0] / seen[905.0], 0.243 / 0.509, rtol=0.01)


@pytest.mark.parametrize("factors, message", [
    ("half", "wavelength_factors must be [[wavelength_nm, factor], …]"),
    ([[1550, 0.1], [905, 1.0]], "wavelengths ascending"),
    ([[905, -1.0]], "factors ≥ 0"),
    ([[905, 1.0, 2.0]], "wavelength_factors must be"),
])
def test_bad_wavelength_factors_are_one_line(tmp_path, factors, message):
    import json

    path = tmp_path / "ours.json"
    path.write_text(json.dumps({"materials": [{"name": "puddle", "reflectance": 0.05,
                                               "wavelength_factors": factors}]}))
    with pytest.raises(MaterialError) as info:
        read_material_file(path, 1550.0)
    assert message in str(info.value) and "ours.json, entry 0 ('puddle')" in str(info.value)
    assert "\n" not in str(info.value)


def test_wavelength_factors_scale_fixed_values_and_tables_not_spectra(tmp_path):
    import json

    path = tmp_path / "ours.json"
    entries = [{"name": "a", "reflectance": 0.4, "wavelength_factors": [[905, 1.0], [1550, 0.5]]},
               {"name": "b", "angle_table": [0.9] * 9, "wavelength_factors": [[1000, 2.0]]}]
    path.write_text(json.dumps({"materials": entries}))
    a, b = read_material_file(path, 1227.5)
    assert a.reflectance == pytest.approx(0.3) and np.allclose(b.angle_table, 1.8)  # halfway; held beyond
    path.write_text(json.dumps({"materials": [{"name": "c", "spectrum": "x.txt", "wavelength_factors": [[905, 1]]}]}))
    with pytest.raises(MaterialError, match="a spectrum already gives every wavelength"):
        read_material_file(path, 905.0)
