"""IR material database, spectrum and angle-table readers, visual → IR mapping, a user's database, per-face
reflectance from meshes."""
import json
import os
import uuid

import numpy as np
import pytest

from lidar_fmu.geometry.scene import Mesh, load_mesh
from lidar_fmu.physics.materials import (
    ANGLES_DEG,
    DEFAULT_MAP,
    MATERIAL_CLASSES,
    IRMaterial,
    MaterialDatabase,
    MaterialError,
    MaterialMap,
    load_database,
    load_material_map,
    read_angle_table_csv,
    read_aster_spectrum,
    resolve_mesh_materials,
    spectrum_reflectance,
    street_material_map,
)
from lidar_fmu.physics.returns import Materials

SPECTRA = os.path.join(os.path.dirname(__file__), "..", "src", "lidar_fmu", "physics", "materials", "data", "spectra")


def spectrum(name):
    return os.path.join(SPECTRA, name)


@pytest.fixture(scope="module")
def db():
    return load_database(905.0)


def multi_material_mesh(names, name="multi"):
    """One triangle per material name (all on a shared vertex triple)."""
    n = len(names)
    return Mesh(np.eye(3), np.tile([0, 1, 2], (n, 1)), np.arange(n), tuple(names), name)


# --------------------------------------------------------------------------- spectra
def test_aster_parsing_matches_reference_values():
    wl, rho = read_aster_spectrum(spectrum("asphalt.txt"))
    assert wl[0] == pytest.approx(420.0) and wl[-1] == pytest.approx(14000.0)
    assert np.all(np.diff(wl) > 0) and 0 <= rho.min() and rho.max() <= 1
    # REFERENCE §5: asphaltic concrete 27.7 % at 0.90 µm, 28.4 % at 0.94 µm
    assert spectrum_reflectance(spectrum("asphalt.txt"), 900) == pytest.approx(0.277, abs=0.002)
    assert spectrum_reflectance(spectrum("asphalt.txt"), 940) == pytest.approx(0.284, abs=0.002)
    assert 0.277 <= spectrum_reflectance(spectrum("asphalt.txt"), 905) <= 0.284
    assert 0.59 <= spectrum_reflectance(spectrum("aluminum.txt"), 905) <= 0.63
    assert spectrum_reflectance(spectrum("grass.txt"), 905) == pytest.approx(0.51, abs=0.01)
    assert spectrum_reflectance(spectrum("wood.txt"), 1550) == pytest.approx(0.57, abs=0.01)


def test_every_bundled_spectrum_parses():
    for file in sorted(os.listdir(SPECTRA)):
        if file.endswith(".txt"):
            wl, rho = read_aster_spectrum(spectrum(file))
            assert len(wl) > 400 and wl[0] < 850 and wl[-1] > 1550, file


def test_spectrum_linear_interpolation(tmp_path):
    path = tmp_path / "two.txt"
    path.write_text("Name: test\nX Units: Wavelength (micrometers)\nY Units: Reflectance (percent)\n\n"
                    "0.9\t20\n1.0\t40\t\n\n")
    assert spectrum_reflectance(path, 950) == pytest.approx(0.30)
    assert spectrum_reflectance(path, 900) == pytest.approx(0.20)


def test_spectrum_errors_name_the_file(tmp_path):
    with pytest.raises(ValueError, match=r"20000 nm.*asphalt\.txt"):
        spectrum_reflectance(spectrum("asphalt.txt"), 20000)  # spectrum ends at 14 µm
    with pytest.raises(ValueError, match="asphalt.txt"):
        spectrum_reflectance(spectrum("asphalt.txt"), 300)  # spectrum starts at 420 nm
    bad = tmp_path / "bad.txt"
    bad.write_text("Name: x\n0.9\t20\n1.0\tforty\n")
    with pytest.raises(ValueError, match="bad.txt"):
        spectrum_reflectance(bad, 950)
    with pytest.raises(ValueError, match="missing.txt"):
        read_aster_spectrum(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="empty.txt"):
        (tmp_path / "empty.txt").write_text("Name: nothing\n")
        read_aster_spectrum(tmp_path / "empty.txt")


# --------------------------------------------------------------------------- angle dependence
def test_lambertian_cosine():
    m = IRMaterial("m", "general", 0.6, None, "test")
    theta = np.radians([0, 30, 60, 89, 90, 120, -30])
    expected = 0.6 * np.array([1, np.cos(np.radians(30)), 0.5, np.cos(np.radians(89)), 0, 0, np.cos(np.radians(30))])
    np.testing.assert_allclose(m.reflectance_at(theta), expected, atol=1e-12)
    assert m.reflectance_at(0.0).shape == ()


def test_table_interpolation_and_fall_to_zero():
    table = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1]
    m = IRMaterial("t", "general", None, table, "test")
    deg = np.array([0, 5, 10, 45, 80, 85, 90, 100])
    np.testing.assert_allclose(m.reflectance_at(np.radians(deg)), [0.9, 0.85, 0.8, 0.45, 0.1, 0.05, 0, 0],
                               atol=1e-12)
    assert m.angle_table.flags.writeable is False


def test_material_validation():
    with pytest.raises(ValueError):
        IRMaterial("x", "shiny", 0.5, None, "s")
    with pytest.raises(ValueError):
        IRMaterial("x", "general", 0.5, [0.5] * 9, "s")  # both
    with pytest.raises(ValueError):
        IRMaterial("x", "general", None, None, "s")  # neither
    with pytest.raises(ValueError):
        IRMaterial("x", "general", 1.2, None, "s")  # > 1 only for retroreflectors
    with pytest.raises(ValueError):
        IRMaterial("x", "general", None, [0.5] * 8, "s")
    assert IRMaterial("r", "retroreflective", 50.0, None, "s").reflectance == 50.0
    assert IRMaterial("m", "mirror", 0.9, None, "s").class_code == MATERIAL_CLASSES.index("mirror")
    assert IRMaterial("a", "general", None, [0.5] * 9, "s") == IRMaterial("a", "general", None, [0.5] * 9, "s")


# --------------------------------------------------------------------------- angle-table CSV
def test_angle_table_csv_round_trip(tmp_path):
    path = tmp_path / "tables.csv"
    angles = np.array(ANGLES_DEG, float)
    paint = 0.6 * np.cos(np.radians(angles))
    lines = ["material,angle_deg,reflectance"]
    lines += [f"paint,{a:g},{v:.6f}" for a, v in zip(angles, paint)]
    # coarser sampling (0, 20, …, 80) is interpolated onto the 10° bins
    lines += [f"foil,{a:g},{0.8 - a / 200:.6f}" for a in angles[::2]]
    path.write_text("\n".join(lines) + "\n")
    tables = read_angle_table_csv(path)
    assert set(tables) == {"paint", "foil"}
    np.testing.assert_allclose(tables["paint"], paint, atol=1e-6)
    np.testing.assert_allclose(tables["foil"], 0.8 - angles / 200, atol=1e-6)
    # the same CSV as a user material file of the database
    db = load_database(905.0, files=[path])
    assert db["paint"].material_class == "general"
    np.testing.assert_allclose(db["paint"].angle_table, paint, atol=1e-6)


def test_angle_table_csv_percent_headerless_and_semicolons(tmp_path):
    path = tmp_path / "percent.csv"
    path.write_text("".join(f"white;{a};{95 - a / 2}\n" for a in ANGLES_DEG))
    np.testing.assert_allclose(read_angle_table_csv(path)["white"], (95 - np.array(ANGLES_DEG) / 2) / 100)


def test_angle_table_csv_coverage_error_names_file_and_material(tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("m,0,0.5\nm,40,0.4\n")
    with pytest.raises(ValueError, match=r"short\.csv.*'m'"):
        read_angle_table_csv(path)
    bad = tmp_path / "garbled.csv"
    bad.write_text("m,0,0.5\nm,ten,0.4\n")
    with pytest.raises(ValueError, match="garbled.csv"):
        read_angle_table_csv(bad)


# --------------------------------------------------------------------------- database
CONTRACT = {
    "lambertian_10": "general", "lambertian_50": "general", "lambertian_95": "general",
    "glass_clear": "transparent", "absorber": "absorbent", "retroreflector": "retroreflective",
    "asphalt": "general", "concrete": "general", "grass": "general", "grass_dry": "general",
    "leaves_deciduous": "general", "leaves_conifer": "general", "wood": "general", "aluminum": "general",
    "copper": "general", "shingle_gray": "general", "shingle_red": "general", "metal_painted": "general",
    "car_paint_white": "general", "car_paint_silver": "general", "car_paint_red": "general",
    "car_paint_black": "general", "road_marking_white": "general", "rubber_tyre": "general",
    "plastic_black": "general", "brick": "general", "plaster": "general", "roof_tar": "general",
    "default_grey": "general",
}


def test_contract_names_and_classes(db):
    for name, cls in CONTRACT.items():
        assert db[name].material_class == cls, name
    assert db["lambertian_10"].reflectance == 0.10
    assert db["lambertian_50"].reflectance == 0.50
    assert db["lambertian_95"].reflectance == 0.95
    assert db["default_grey"].reflectance == pytest.approx(0.3)
    assert db["retroreflector"].reflectance_at(0.0) >= 1.0
    assert db["asphalt"].reflectance == pytest.approx(0.28, abs=0.005)
    assert 0.59 <= db["aluminum"].reflectance <= 0.63
    assert db["grass"].reflectance == pytest.approx(0.51, abs=0.01)
    assert any(m.angle_table is not None and m.material_class == "general" for m in db)
    for m in db:
        assert m.source.strip(), m.name
    # an assumed value says so
    assert db["concrete"].assumed and not db["asphalt"].assumed


def test_spectrum_entries_follow_the_wavelength():
    at_1550 = load_database(1550.0)
    assert at_1550["asphalt"].reflectance == pytest.approx(0.36, abs=0.01)
    assert at_1550["grass"].reflectance == pytest.approx(0.24, abs=0.01)
    assert at_1550["lambertian_50"].reflectance == 0.50  # fixed values stay
    with pytest.raises(ValueError, match="asphalt.txt"):
        load_database(300.0)


def test_index_lookup_and_suggestions(db):
    assert db[db.index("asphalt")].name == "asphalt"
    assert db.names[db.index("grass")] == "grass"
    with pytest.raises(KeyError, match="asphalt"):
        db.index("asphallt")
    assert db[np.int16(0)] is db.materials[0]


def test_arrays_layout(db):
    codes, table = db.arrays()
    assert codes.dtype == np.int8 and codes.shape == (len(db),)
    assert table.dtype == np.float32 and table.shape == (len(db), 10)
    assert np.all(table[:, -1] == 0)
    for i, m in enumerate(db.materials):
        assert codes[i] == MATERIAL_CLASSES.index(m.material_class)
        # each row is ρ(θ) at 0, 10, …, 80°
        np.testing.assert_allclose(table[i, :9], m.reflectance_at(np.radians(ANGLES_DEG)), rtol=1e-6, atol=1e-7)
    i = db.index("lambertian_50")
    np.testing.assert_allclose(table[i], 0.5 * np.cos(np.radians(np.arange(0, 100, 10))), atol=1e-7)


def test_add_merge_replace_keeps_id():
    db = MaterialDatabase([IRMaterial("a", "general", 0.1, None, "s")], 905.0)
    assert db.add(IRMaterial("b", "absorbent", 0.0, None, "s")) == 1
    db.merge(MaterialDatabase([IRMaterial("a", "general", 0.7, None, "user")]))
    assert db.index("a") == 0 and db["a"].reflectance == 0.7 and len(db) == 2


def test_user_material_file(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "materials:\n"
        "  - {name: asphalt, reflectance: 0.12, source: wet asphalt measurement}\n"
        f"  - {{name: my_asphalt_spectrum, spectrum: {spectrum('asphalt.txt')}, source: s}}\n"
        "  - {name: foil, class: mirror, angle_table: [1, 0.5, 0.2, 0.1, 0, 0, 0, 0, 0], source: s}\n"
    )
    db = load_database(905.0, files=[path])
    base = load_database(905.0)
    assert db.index("asphalt") == base.index("asphalt") and db["asphalt"].reflectance == 0.12
    assert db["my_asphalt_spectrum"].reflectance == pytest.approx(base["asphalt"].reflectance)
    assert db["foil"].material_class == "mirror"
    (tmp_path / "bad.json").write_text(json.dumps([{"name": "x", "reflectance": 0.1, "colour": "red"}]))
    with pytest.raises(ValueError, match=r"bad\.json.*colour"):
        load_database(905.0, files=[tmp_path / "bad.json"])


# --------------------------------------------------------------------------- mapping
def test_map_resolution_order(db):
    m = load_material_map({
        "default": "default_grey",
        "materials": {"paint_*": "car_paint_white", "paint_red": "car_paint_red", "p*": "asphalt",
                      "glass": "glass_clear"},
    })
    assert m.ir_name("paint_red") == ("car_paint_red", True)  # exact beats glob
    assert m.ir_name("paint_blue") == ("car_paint_white", True)  # first matching glob in file order
    assert m.ir_name("pole") == ("asphalt", True)
    assert m.ir_name("tree") == ("default_grey", False)
    mesh = multi_material_mesh(["paint_red", "paint_blue", "pole", "glass", f"unmapped_{uuid.uuid4().hex}"])
    ids = resolve_mesh_materials(mesh, m, db, warn=lambda msg: None)
    assert ids.dtype == np.int16 and ids.shape == (5,)
    assert [db.names[i] for i in ids] == ["car_paint_red", "car_paint_white", "asphalt", "glass_clear",
                                          "default_grey"]


def test_resolution_follows_face_material(db):
    m = MaterialMap("default_grey", {"a": "asphalt", "b": "grass"}, ())
    mesh = Mesh(np.eye(3), np.tile([0, 1, 2], (4, 1)), [1, 0, 1, 1], ("a", "b"), "m")
    np.testing.assert_array_equal(resolve_mesh_materials(mesh, m, db),
                                  [db.index("grass"), db.index("asphalt"), db.index("grass"), db.index("grass")])


def test_unmapped_name_reported_once_across_meshes(db):
    name = f"mystery_{uuid.uuid4().hex}"
    messages = []
    for mesh_name in ("one", "two"):
        resolve_mesh_materials(multi_material_mesh([name, "asphalt"], mesh_name),
                               MaterialMap("default_grey", {"asphalt": "asphalt"}, ()), db, messages.append)
    assert len(messages) == 1 and name in messages[0] and "default_grey" in messages[0]


def test_unknown_ir_name_in_map_is_named(db):
    m = load_material_map({"materials": {"road": "asphalt", "car_*": "car_paint_purple"}})
    with pytest.raises(ValueError, match=r"car_\*.*car_paint_purple"):
        resolve_mesh_materials(multi_material_mesh(["road"]), m, db)
    with pytest.raises(ValueError, match="no_such"):
        resolve_mesh_materials(multi_material_mesh(["road"]), MaterialMap("no_such", {}, ()), db)


def test_malformed_map_file_is_named(tmp_path):
    cases = {
        "broken.yaml": "default: [unclosed\n",
        "list.yaml": "- asphalt\n- grass\n",
        "typo.yaml": "default: default_grey\nmaterial: {a: b}\n",
        "nested.json": json.dumps({"materials": {"a": {"ir": "asphalt"}}}),
    }
    for file, text in cases.items():
        (tmp_path / file).write_text(text)
        with pytest.raises(ValueError, match=file.replace(".", r"\.")):
            load_material_map(tmp_path / file)
    with pytest.raises(ValueError, match="nowhere.yaml"):
        load_material_map(tmp_path / "nowhere.yaml")


def test_map_file_round_trip(tmp_path, db):
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"default": "concrete", "materials": {"Asphalt": "asphalt", "*glass*": "glass_clear"}}))
    m = load_material_map(path)
    assert m.default == "concrete" and m.exact == {"Asphalt": "asphalt"} and m.globs == (("*glass*", "glass_clear"),)
    assert load_material_map("street") == street_material_map()
    assert DEFAULT_MAP.ir_name("anything") == ("default_grey", False)
    assert DEFAULT_MAP.default in db


def test_street_map_covers_every_demo_material(tmp_path, db):
    from lidar_fmu.tools.demo_scene import MATERIAL_COLOURS, generate_street

    layout = generate_street(tmp_path)
    files = [layout["environment"]] + sorted({car["mesh"] for car in layout["cars"]})
    used = set()
    street_map = street_material_map()
    messages = []
    for file in files:
        mesh = load_mesh(tmp_path / file)
        used.update(mesh.material_names)
        ids = resolve_mesh_materials(mesh, street_map, db, messages.append)
        assert ids.shape == (mesh.triangle_count,)
    assert used and messages == []
    for name in used | set(MATERIAL_COLOURS):
        assert street_map.ir_name(name)[1], f"{name} falls to the default"
    # the glass and sign materials get their special classes
    assert db[street_map.ir_name("window_glass")[0]].material_class == "transparent"
    assert db[street_map.ir_name("sign_face")[0]].material_class == "retroreflective"


def test_without_a_map_nothing_is_reported_and_builtin_names_never_are(db, recwarn):
    """The default map gives every triangle default_grey by design; our own names need no entry in a user's map."""
    from lidar_fmu.physics.materials import DEFAULT_MAP

    messages = []
    name = f"mystery_{uuid.uuid4().hex}"
    resolve_mesh_materials(multi_material_mesh([name, "asphalt"], "plain"), DEFAULT_MAP, db, messages.append)
    assert messages == []
    user_map = MaterialMap("default_grey", {"asphalt": "asphalt"}, ())
    resolve_mesh_materials(multi_material_mesh(["osi_bounding_box", "default", "asphalt"], "boxes"), user_map, db,
                           messages.append)
    assert messages == []
    names = [f"unmapped_{i}_{uuid.uuid4().hex}" for i in range(3)]
    resolve_mesh_materials(multi_material_mesh(names, "many"), user_map, db, messages.append)
    assert len(messages) == 1 and all(n in messages[0] for n in names) and "'many'" in messages[0]
    assert not [w for w in recwarn if "visual material" in str(w.message)]


# --------------------------------------------------------------------------- per-face reflectance, user databases
#: 5 beams × 41 columns straight ahead: every ray meets the walls below at normal incidence or close to it
GRID = {"vertical_fov_deg": [-5, 5], "channels": 5, "horizontal_fov_deg": [-20, 20], "horizontal_samples": 41,
        "max_range_m": 100.0}


def write_wall_ply(path, values=(0.1, 0.9), kind="float"):
    """An ASCII PLY wall in the plane x = 10 m, z from -0.1 to 3 m (the upper three beams of GRID): its right half
    (y < 0) one quad carrying ``values[0]`` as face property ``reflectivity``, its left half another ``values[1]``."""
    corners = [(10, -5, -0.1), (10, 0, -0.1), (10, 0, 3), (10, -5, 3), (10, 5, -0.1), (10, 5, 3)]
    lines = ["ply", "format ascii 1.0", f"element vertex {len(corners)}", "property float x", "property float y",
             "property float z", "element face 2", "property list uchar int vertex_indices",
             f"property {kind} reflectivity", "end_header"]
    lines += [" ".join(map(str, c)) for c in corners]
    lines += [f"4 0 1 2 3 {values[0]}", f"4 1 4 5 2 {values[1]}"]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def back_wall(material="wall"):
    """A plain wall (one visual material, no per-face reflectance) at x = 15 m behind the PLY wall, seen below it."""
    corners = [(15, -10, -5), (15, 10, -5), (15, 10, 5), (15, -10, 5)]
    return Mesh(np.array(corners, float), np.array([[0, 1, 2], [0, 2, 3]]), np.zeros(2, np.int32), (material,), "back")


def write_wall_obj(path, x):
    """An OBJ wall of visual material ``wall`` in the plane x = ``x``, 20 m × 10 m, with its MTL beside it."""
    path.with_suffix(".mtl").write_text("newmtl wall\nKd 0.5 0.5 0.5\n")
    path.write_text(f"mtllib {path.with_suffix('.mtl').name}\nv {x} -10 -5\nv {x} 10 -5\nv {x} 10 5\nv {x} -10 5\n"
                    "usemtl wall\nf 1 2 3\nf 1 3 4\n")


def rho0(cloud):
    """The Lambertian ρ0 each return's reflectivity stands for: ρ / cos θ (the walls face -x)."""
    return cloud.points["reflectivity"] / (np.abs(cloud.points["x"]) / cloud.points["range"])


@pytest.mark.parametrize("backend", ["embree", "embreex"])
def test_ply_face_reflectivity_overrides_the_material_per_triangle(tmp_path, backend):
    """Two halves of a wall, 0.1 and 0.9, mapped to glass (which alone would let every ray through): each ray
    returns its face's ρ0·cos θ and the intensity that gives; the back wall, without the property, keeps its
    material; ground truth names the reserved material face_reflectivity."""
    from lidar_fmu import Lidar, Scene
    from lidar_fmu.physics.materials import FACE_REFLECTIVITY

    scene = Scene()
    scene.add_instance(0, load_mesh(write_wall_ply(tmp_path / "wall.ply")))
    scene.add_instance(1, back_wall())
    materials = {"default": "glass_clear", "materials": {"wall": "lambertian_50"}}
    lidar = Lidar(scene, GRID, backend=backend, materials=materials)
    cloud = lidar.scan(np.eye(4), ground_truth=True)
    assert len(cloud) == 5 * 41
    points = cloud.points
    front, y = points["range"] < 12.0, points["y"]
    right, left = front & (y < -0.05), front & (y > 0.05)
    assert right.sum() == left.sum() == 3 * 20
    np.testing.assert_allclose(rho0(cloud)[right], 0.1, rtol=1e-5)
    np.testing.assert_allclose(rho0(cloud)[left], 0.9, rtol=1e-5)
    np.testing.assert_allclose(rho0(cloud)[~front], 0.5, rtol=1e-5)  # the back wall's lambertian_50
    r, rho = points["range"], points["reflectivity"]
    np.testing.assert_allclose(cloud.intensity_percent, 100 * np.minimum(1, rho * (10 / np.maximum(r, 10)) ** 2),
                               rtol=1e-5)
    material = cloud.ground_truth["material_id"]
    assert set(material[front]) == {lidar.materials.database.index(FACE_REFLECTIVITY)}
    assert set(material[~front]) == {lidar.materials.database.index("lambertian_50")}


def test_face_reflectance_survives_instancing_and_the_range_limit(tmp_path):
    """One mesh placed twice shares its per-face array (each instance finds its own triangles); the range limit
    reads the face's ρ: at 10 m a 10 % face is beyond a limit of 8 m for 10 %, a 90 % face is not."""
    from lidar_fmu import Lidar, Scene
    from lidar_fmu.geometry.transforms import pose_matrix

    wall = load_mesh(write_wall_ply(tmp_path / "wall.ply"))
    scene = Scene()
    scene.add_instance(0, back_wall())
    scene.add_instance(3, wall)
    scene.add_instance(7, wall, pose_matrix((0, 0, -3.2)))  # the same wall again, below (now seen by every beam)
    limited = GRID | {"range_reflectivity": {"pairs": [[0.10, 8.0], [0.90, 60.0]], "fit": "linear"}}
    cloud = Lidar(scene, limited, materials={"materials": {"wall": "lambertian_50"}}).scan(np.eye(4))
    points = cloud.points
    walls = (points["object_id"] != 0) & (np.abs(points["y"]) > 0.05)  # (the column at y = 0 meets both halves)
    assert set(points["object_id"][walls]) == {3, 7}
    assert np.all(points["y"][walls] > 0)  # only the 90 % halves returned
    assert (walls & (points["object_id"] == 7)).sum() == 2 * 20 and (walls & (points["object_id"] == 3)).sum() == 3 * 20
    np.testing.assert_allclose(rho0(cloud)[walls], 0.9, rtol=1e-5)


def test_a_map_may_not_name_the_reserved_face_material(db):
    with pytest.raises(ValueError, match="entry 'x'.*'face_reflectivity' is reserved"):
        Materials(905.0, {"materials": {"x": "face_reflectivity"}})


USER_DATABASE = (
    "description: paints measured on our own rig\n"
    "materials:\n"
    "  - {name: my_paint, reflectance: 0.42, source: 'our goniometer, 905 nm'}\n"
    "  - {name: default_grey, reflectance: 0.2, source: our fallback}\n"
)


def test_a_user_database_material_reaches_the_returns_through_a_map(tmp_path):
    """A new material used through a map gives its reflectance; a redefined built-in (default_grey) replaces the
    built-in one for the triangles the map leaves to it; Materials takes the file as its database."""
    from lidar_fmu import Lidar, Scene

    path = tmp_path / "ours.yaml"
    path.write_text(USER_DATABASE)
    scene = Scene()
    scene.add_instance(1, back_wall("wall"))
    found = {}
    for materials in ({"materials": {"wall": "my_paint"}}, None):
        cloud = Lidar(scene, GRID, materials=materials, ir_database=str(path)).scan(np.eye(4))
        assert len(cloud) == 5 * 41
        found[materials is None] = np.unique(np.round(rho0(cloud).astype(float), 5)).tolist()
    assert found == {False: [0.42], True: [0.2]}
    from_file = Materials(905.0, {"materials": {"wall": "my_paint"}}, database=path)
    assert from_file.database["my_paint"].reflectance == 0.42
    assert from_file.database.index("asphalt") == load_database(905.0).index("asphalt")  # built-ins stay


@pytest.mark.parametrize(("text", "key"), [
    ("materials:\n  - {name: p, reflectance: high}\n", "reflectance"),
    ("materials:\n  - {name: p, reflectance: 1.5}\n", "reflectance"),
    ("materials:\n  - {name: p, angle_table: [0.5, 0.4]}\n", "angle_table"),
    ("materials:\n  - {name: p, reflectance: 0.5, class: shiny}\n", "class"),
    ("materials:\n  - {name: p, reflectance: 0.5, assumed: maybe}\n", "assumed"),
    ("materials:\n  - {name: p, reflectance: 0.5, colour: red}\n", "colour"),
    ("materails:\n  - {name: p, reflectance: 0.5}\n", "materails"),
    ("materials:\n  - {name: p, spectrum: [1, 2]}\n", "spectrum"),
    ("materials:\n  - {name: face_reflectivity, reflectance: 0.5}\n", "face_reflectivity"),
    ("default: asphalt\nmaterials: {road: asphalt}\n", "--materials"),
])
def test_a_malformed_user_database_is_refused_naming_the_file_and_key(tmp_path, text, key):
    path = tmp_path / f"db_{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(text)
    with pytest.raises(MaterialError) as error:
        Materials(905.0, None, database=str(path))
    message = str(error.value)
    assert path.name in message and key in message and "\n" not in message, message


def test_a_database_given_as_a_map_says_where_it_goes(tmp_path):
    path = tmp_path / "ours.yaml"
    path.write_text(USER_DATABASE)
    with pytest.raises(MaterialError, match=r"ours\.yaml.*--ir-database"):
        load_material_map(path)
    with pytest.raises(MaterialError, match=r"not found.*nowhere\.yaml"):
        Materials(905.0, None, database=tmp_path / "nowhere.yaml")


def test_scan_takes_a_map_and_an_ir_database(tmp_path, capsys):
    """`lidar-fmu scan --materials MAP --ir-database FILE`: the map's material from the user's database; a
    malformed database is one line and exit 2, no file written."""
    from lidar_fmu.io import read_pcd
    from lidar_fmu.tools.cli import main

    write_wall_obj(tmp_path / "wall.obj", 15.0)
    (tmp_path / "map.yaml").write_text("materials: {wall: my_paint}\n")
    (tmp_path / "ours.yaml").write_text(USER_DATABASE)
    (tmp_path / "grid.json").write_text(json.dumps(GRID))
    out = tmp_path / "scan.pcd"
    argv = ["scan", "--mesh", str(tmp_path / "wall.obj"), "--sensor", str(tmp_path / "grid.json"), "-o", str(out),
            "--materials", str(tmp_path / "map.yaml"), "--ir-database", str(tmp_path / "ours.yaml")]
    assert main(argv) == 0, capsys.readouterr().err
    points = read_pcd(out)
    np.testing.assert_allclose(points["reflectivity"] / (points["x"] / points["range"]), 0.42, rtol=1e-5)
    (tmp_path / "ours.yaml").write_text("materials:\n  - {name: my_paint, reflectance: -1}\n")
    out.unlink()
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "ours.yaml" in err[0] and "reflectance" in err[0], err
    assert not out.exists()


def test_a_scenario_takes_a_map_and_an_ir_database(tmp_path):
    """scenario.yaml's ``materials:`` and ``ir_database:`` reach the model the FMU builds (a PLY by model_reference
    keeps its per-face reflectances there too); a malformed database stops the replay before it starts."""
    from helpers.osi_views import sensor_view
    from lidar_fmu.errors import LidarFmuError
    from lidar_fmu.tools.replay import _scenario_and_rig, fmu_parameters, load_scenario, model_of

    assets = tmp_path / "assets"
    assets.mkdir()
    write_wall_ply(assets / "wall.ply")
    write_wall_obj(assets / "back.obj", 0.0)
    (tmp_path / "map.yaml").write_text("materials: {wall: my_paint}\n")
    (tmp_path / "ours.yaml").write_text(USER_DATABASE)
    (tmp_path / "scenario.yaml").write_text(f"trace: views.osi\nsensor: {json.dumps(GRID)}\nassets: assets\n"
                                            "materials: map.yaml\nir_database: ours.yaml\n")
    scenario, _ = _scenario_and_rig(tmp_path, None)
    parameters = fmu_parameters(scenario, str(tmp_path))
    assert parameters["ir_database"] == str(tmp_path / "ours.yaml")
    model = model_of(parameters)
    view = sensor_view([(5, (0, 0, 0), (0, 0, 0), (0.1, 10, 3), "wall.ply"),
                        (6, (15, 0, 0), (0, 0, 0), (0.1, 20, 10), "back.obj")], 0.1, host=None)
    assert model.step(view, 0.1).valid
    cloud = model.last_clouds[0]
    by_object = {k: np.unique(np.round(rho0(cloud)[cloud.points["object_id"] == k].astype(float), 5)).tolist()
                 for k in (5, 6)}
    assert by_object == {5: [0.1, 0.9], 6: [0.42]}
    (tmp_path / "ours.yaml").write_text("materials:\n  - {name: my_paint, reflectance: 0.4, finish: matte}\n")
    with pytest.raises(LidarFmuError, match=r"ours\.yaml.*finish"):
        _scenario_and_rig(tmp_path, None)
    (tmp_path / "scenario.yaml").write_text("trace: views.osi\nir_database: [a.yaml, b.yaml]\n")
    with pytest.raises(LidarFmuError, match="ir_database must be a file"):
        load_scenario(tmp_path)


def test_an_angle_table_that_is_no_text_is_one_line(tmp_path):
    """A binary file given as an angle table: one line naming the file, read within a bound."""
    path = tmp_path / "bin.csv"
    path.write_bytes(b"PK\x03\x04\xb4\x00" * 100)
    with pytest.raises(ValueError, match=r"cannot read angle table .*bin\.csv: not UTF-8") as info:
        read_angle_table_csv(path)
    assert "\n" not in str(info.value)
