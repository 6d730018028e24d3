"""The command line: scans that write files, and one clear line (exit 2) for every user error."""
import json
import subprocess
import sys

import numpy as np
import pytest
import trimesh

from lidar_fmu.io import read_pcd
from lidar_fmu.tools.cli import main


@pytest.fixture
def room(tmp_path):
    box = trimesh.creation.box(extents=(30, 20, 8))
    box.apply_translation((0, 0, 3))
    path = tmp_path / "room.stl"
    box.export(path)
    return str(path)


def run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_scan_writes_cloud_and_preview(room, tmp_path, capsys):
    out = tmp_path / "scan.pcd"
    png = tmp_path / "scan.png"
    code, stdout, err = run(["scan", "--mesh", room, "--sensor", "velodyne_vlp16", "--pose", "1,2,1.5,0,0,30",
                             "-o", str(out), "--preview", str(png), "--backend", "embree"], capsys)
    assert code == 0, err
    points = read_pcd(out)
    assert len(points) == 14_400  # a closed room: every ray returns
    assert png.stat().st_size > 10_000
    assert "14400 returns" in stdout.replace(",", "")
    # the room's walls are at x = ±15, y = ±10 in the mesh frame: check in the sensor frame
    yaw = np.radians(30)
    world_x = 1 + points["x"] * np.cos(yaw) - points["y"] * np.sin(yaw)
    world_y = 2 + points["x"] * np.sin(yaw) + points["y"] * np.cos(yaw)
    world_z = 1.5 + points["z"]
    on_wall = (np.isclose(np.abs(world_x), 15, atol=2e-3) | np.isclose(np.abs(world_y), 10, atol=2e-3)
               | np.isclose(world_z, -1, atol=2e-3) | np.isclose(world_z, 7, atol=2e-3))
    assert on_wall.all()


@pytest.mark.parametrize("ext", ["ply", "ptx"])
def test_scan_other_formats(room, tmp_path, capsys, ext):
    out = tmp_path / f"scan.{ext}"
    code, _, err = run(["scan", "--mesh", room, "--sensor", "ibeo_lux", "-o", str(out)], capsys)
    assert code == 0, err and out.stat().st_size > 1000


def test_presets_lists_the_sensors(capsys):
    code, stdout, _ = run(["presets"], capsys)
    assert code == 0
    for name in ("velodyne_vlp16", "ouster_os1_128", "ibeo_lux", "velodyne_hdl64e"):
        assert name in stdout
    assert "131072" in stdout


def bad_sensor_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    return str(path)


@pytest.mark.parametrize(
    "case, expect",
    [
        ("unknown_preset", "did you mean velodyne_vlp16"),
        ("missing_mesh", "mesh file not found"),
        ("empty_mesh", "no triangles"),
        ("garbage_mesh", "cannot"),
        ("bad_pose", "pose"),
        ("nan_pose", "NaN"),
        ("bad_sensor_file", "bad.json"),
        ("bad_extension", "must end in .pcd, .ply or .ptx"),
    ],
)
def test_user_errors_are_one_line_exit_2(case, expect, room, tmp_path, capsys):
    args = {"sensor": "velodyne_vlp16", "mesh": room, "pose": "0,0,1", "out": str(tmp_path / "o.pcd")}
    if case == "unknown_preset":
        args["sensor"] = "velodyne_vlp61"
    elif case == "missing_mesh":
        args["mesh"] = str(tmp_path / "nope.obj")
    elif case == "empty_mesh":
        (tmp_path / "empty.obj").write_text("# nothing here\n")
        args["mesh"] = str(tmp_path / "empty.obj")
    elif case == "garbage_mesh":
        (tmp_path / "garbage.glb").write_bytes(b"\x00\x01garbage" * 50)
        args["mesh"] = str(tmp_path / "garbage.glb")
    elif case == "bad_pose":
        args["pose"] = "1,2"
    elif case == "nan_pose":
        args["pose"] = "nan,0,0"
    elif case == "bad_sensor_file":
        args["sensor"] = bad_sensor_file(tmp_path)
    elif case == "bad_extension":
        args["out"] = str(tmp_path / "o.xyz")
    code, _, err = run(["scan", "--mesh", args["mesh"], "--sensor", args["sensor"], "--pose", args["pose"],
                        "-o", args["out"]], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lidar-fmu: error:") and expect in lines[0]
    assert "Traceback" not in err


def test_console_script_error_has_no_traceback(tmp_path):
    run = subprocess.run([sys.executable, "-m", "lidar_fmu.tools.cli", "scan", "--mesh", str(tmp_path / "x.obj"),
                          "--sensor", "ouster_os1_128", "-o", str(tmp_path / "x.pcd")], capture_output=True, text=True)
    assert run.returncode == 2 and "Traceback" not in run.stderr and "not found" in run.stderr


def test_replay_of_a_bad_scenario_is_a_user_error(tmp_path, capsys):
    (tmp_path / "scenario.yaml").write_text(json.dumps({"trace": "missing.osi", "sensor": "ouster_os1_128"}))
    code, _, err = run(["replay", str(tmp_path), "-o", str(tmp_path / "out"), "-q"], capsys)
    assert code == 2 and "missing.osi" in err


def test_scan_with_a_material_map(room, tmp_path, capsys):
    import json

    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"default": "lambertian_10"}))
    out = tmp_path / "scan.pcd"
    code, _, err = run(["scan", "--mesh", room, "--sensor", "velodyne_vlp16", "--materials", str(mapping),
                        "-o", str(out)], capsys)
    assert code == 0, err
    points = read_pcd(out)
    assert 0 < points["reflectivity"].max() <= 0.1 + 1e-6
    assert "saturated" in points.dtype.names


def test_scan_with_a_bad_material_map_is_a_user_error(room, tmp_path, capsys):
    mapping = tmp_path / "map.yaml"
    mapping.write_text("default: not_a_material\n")
    code, _, err = run(["scan", "--mesh", room, "--sensor", "velodyne_vlp16", "--materials", str(mapping),
                        "-o", str(tmp_path / "o.pcd")], capsys)
    assert code == 2 and "not_a_material" in err and "Traceback" not in err


def test_replay_with_a_bad_material_map_is_a_user_error(tmp_path, capsys):
    import shutil

    from helpers.fmu_inputs import SHARED_TRACE

    shutil.copy(SHARED_TRACE, tmp_path / "trace.osi")
    (tmp_path / "map.yaml").write_text("default: no_such_material\n")
    (tmp_path / "scenario.yaml").write_text(json.dumps({"trace": "trace.osi", "materials": "map.yaml"}))
    code, _, err = run(["replay", str(tmp_path), "-o", str(tmp_path / "out"), "-q"], capsys)
    assert code == 2 and "no_such_material" in err


def test_cuda_backend_without_a_gpu_is_a_clear_error(room, tmp_path, capsys):
    from lidar_fmu.raycast import cuda_available

    if cuda_available():
        pytest.skip("a GPU (or the simulator) is present")
    code, _, err = run(["scan", "--mesh", room, "--sensor", "ibeo_lux", "-o", str(tmp_path / "o.pcd"),
                        "--backend", "cuda"], capsys)
    assert code == 2 and "NUMBA_ENABLE_CUDASIM" in err


# -- the error boundary: LidarFmuError and OSError are the user's, anything else is a bug ---------------------------
def _scan_raising(exc, room, tmp_path, capsys, monkeypatch):
    from lidar_fmu.scan.lidar import Lidar

    def broken_scan(self, *args, **kwargs):
        raise exc

    monkeypatch.setattr(Lidar, "scan", broken_scan)
    return run(["scan", "--mesh", room, "--sensor", "ibeo_lux", "-o", str(tmp_path / "o.pcd"), "--backend", "embree"],
               capsys)


def test_an_unexpected_exception_is_reported_as_a_bug(room, tmp_path, capsys, monkeypatch):
    code, _, err = _scan_raising(KeyError("cast"), room, tmp_path, capsys, monkeypatch)
    assert code == 1  # not 2: nothing the user typed is wrong
    assert "Traceback (most recent call last)" in err and "KeyError: 'cast'" in err and "broken_scan" in err
    assert "lidar-fmu: error:" not in err
    last = err.strip().splitlines()
    assert any("bug in lidar-fmu" in line for line in last[-3:])
    assert "report" in err and "scan --mesh" in last[-1]  # the command line to report with
    assert err.index("Traceback") < err.index("bug in lidar-fmu")


@pytest.mark.parametrize("exc", [ValueError("bad value"), RuntimeError("boom"), TypeError("x")],
                         ids=["ValueError", "RuntimeError", "TypeError"])
def test_other_exceptions_are_bugs_too(exc, room, tmp_path, capsys, monkeypatch):
    code, _, err = _scan_raising(exc, room, tmp_path, capsys, monkeypatch)
    assert code == 1 and "Traceback" in err and "bug in lidar-fmu" in err


@pytest.mark.parametrize("make", ["LidarFmuError", "UserError", "OSError", "multi_line"])
def test_a_lidar_fmu_error_is_one_line_exit_2(make, room, tmp_path, capsys, monkeypatch):
    from lidar_fmu.errors import LidarFmuError, UserError

    exc = {"LidarFmuError": LidarFmuError("the sensor fell off"), "UserError": UserError("the sensor fell off"),
           "OSError": FileNotFoundError(2, "No such file or directory: the sensor fell off"),
           "multi_line": LidarFmuError("the sensor\nfell off")}[make]
    code, _, err = _scan_raising(exc, room, tmp_path, capsys, monkeypatch)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lidar-fmu: error:"), err
    assert "fell off" in lines[0] and "Traceback" not in err and "bug" not in err


def test_user_facing_errors_derive_from_lidar_fmu_error():
    from lidar_fmu.cosim.osmp import OSMPBufferError
    from lidar_fmu.errors import LidarFmuError, UserError
    from lidar_fmu.geometry.scene import MeshError
    from lidar_fmu.geometry.transforms import PoseError
    from lidar_fmu.osi.decode import SensorViewError
    from lidar_fmu.osi.trace import TraceError
    from lidar_fmu.physics.materials.spectra import MaterialError
    from lidar_fmu.physics.range_limit import RangeLimitError
    from lidar_fmu.sensors import SensorSpecError

    assert issubclass(UserError, LidarFmuError)
    for cls in (MaterialError, SensorViewError, TraceError, OSMPBufferError, RangeLimitError, MeshError,
                SensorSpecError, PoseError):
        assert issubclass(cls, LidarFmuError) and issubclass(cls, ValueError), cls  # ValueError kept for callers


def test_unknown_bench_scene_is_a_user_error(capsys):
    code, _, err = run(["bench", "--scenes", "nowhere", "--backend", "embree", "--skip-step"], capsys)
    assert code == 2 and "unknown bench scene 'nowhere'" in err and "Traceback" not in err


def test_unknown_bench_section_is_a_user_error(capsys):
    code, _, err = run(["bench", "--sections", "cast,warp", "--backend", "embree"], capsys)
    assert code == 2 and "--sections 'cast,warp': unknown section 'warp'" in err and "Traceback" not in err


def test_replay_and_bench_do_not_import_the_cli():
    code = ("import sys, lidar_fmu.tools.replay, lidar_fmu.tools.bench; "
            "sys.exit('lidar_fmu.tools.cli' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_scan_with_a_bad_preview_extension_fails_before_any_work(room, tmp_path, capsys):
    out = tmp_path / "o.pcd"
    code, _, err = run(["scan", "--mesh", room, "--sensor", "ibeo_lux", "-o", str(out), "--preview",
                        str(tmp_path / "p.xyz")], capsys)
    assert code == 2 and "p.xyz" in err and ".png" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("fmu", ["missing.fmu", "not_a_zip.fmu", "zip_without_model.fmu"])
def test_replay_with_something_that_is_not_an_fmu_is_a_user_error(fmu, tmp_path, capsys):
    import zipfile

    (tmp_path / "not_a_zip.fmu").write_text("hello")
    with zipfile.ZipFile(tmp_path / "zip_without_model.fmu", "w") as archive:
        archive.writestr("readme.txt", "hello")
    (tmp_path / "scenario.yaml").write_text(json.dumps({"trace": "trace.osi"}))
    code, _, err = run(["replay", str(tmp_path), "-o", str(tmp_path / "out"), "--fmu", str(tmp_path / fmu), "-q"],
                       capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and fmu in lines[0] and "FMU" in lines[0]


# -- a newcomer's first hour: the checks come before the work -----------------------------------------------------
def test_a_pose_may_start_with_a_minus_sign(room, tmp_path, capsys):
    out = tmp_path / "neg.pcd"
    code, stdout, err = run(["scan", "--mesh", room, "--sensor", "velodyne_vlp16", "--pose", "-3,0,1.5",
                             "-o", str(out), "--backend", "embree"], capsys)
    assert code == 0, err
    points = read_pcd(out)
    # the room's +x wall (x = 15) seen from x = -3 is 18 m ahead
    ahead = (np.abs(points["y"]) < 0.2) & (np.abs(points["z"]) < 0.2) & (points["x"] > 0)
    assert np.allclose(points["x"][ahead], 18.0, atol=0.05)


def test_missing_folders_and_folder_meshes_fail_before_any_cast(room, tmp_path, capsys, monkeypatch):
    from lidar_fmu.scan.lidar import Lidar

    def no_cast(*args, **kwargs):
        raise AssertionError("the scan ran before the arguments were checked")

    monkeypatch.setattr(Lidar, "scan", no_cast)
    for argv, needle in (
        (["--mesh", room, "-o", str(tmp_path / "missing" / "o.pcd")], "does not exist"),
        (["--mesh", room, "-o", str(tmp_path / "o.pcd"), "--preview", str(tmp_path / "nope" / "p.png")],
         "does not exist"),
        (["--mesh", str(tmp_path), "-o", str(tmp_path / "o.pcd")], "is a folder"),
        (["--mesh", str(tmp_path / "absent.obj"), "-o", str(tmp_path / "o.pcd")], "not found"),
    ):
        code, _, err = run(["scan", "--sensor", "velodyne_vlp16", *argv], capsys)
        assert code == 2 and needle in err and err.count("\n") == 1, err


def test_no_point_cloud_is_left_behind_when_the_preview_fails(room, tmp_path, capsys, monkeypatch):
    import lidar_fmu.io as io

    def broken_preview(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(io, "write_preview", broken_preview)
    out = tmp_path / "scan.pcd"
    code, _, err = run(["scan", "--mesh", room, "--sensor", "velodyne_vlp16", "-o", str(out),
                        "--preview", str(tmp_path / "p.png"), "--backend", "embree"], capsys)
    assert code == 2 and "disk full" in err and not out.exists()


def test_demo_with_no_frames_is_refused_before_anything_is_written(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--frames", "0", "-o", str(tmp_path / "demo")])
    assert exit_info.value.code == 2 and "at least 1" in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()


def test_help_reads_as_plain_text_with_every_default():
    from lidar_fmu.tools.cli import _HelpFormatter, build_parser

    parser = build_parser()
    assert "``" not in parser.format_help()
    formatter = _HelpFormatter("lidar-fmu")
    for name, sub in parser._subparsers._group_actions[0].choices.items():
        assert "``" not in sub.format_help(), name
        for action in sub._actions:
            if not action.option_strings or action.dest == "help":
                continue
            assert action.help, f"{name} {action.option_strings} has no help"
            if action.default not in (None, False) and not action.required:
                assert "(default: %(default)s)" in formatter._get_help_string(action), (name, action.option_strings)


def test_gltf_stands_up_by_its_specification_and_up_can_be_given(tmp_path, capsys):
    """A Y-up wall 10 m in front (glTF: +Z is the asset's front, +Y up) is seen 10 m ahead along +x, not below."""
    wall = trimesh.creation.box(extents=(8, 4, 0.2))  # glTF frame: 8 m wide (x), 4 m tall (y), at z = 10
    wall.apply_translation((0, 2, 10))
    gltf = tmp_path / "wall.glb"
    wall.export(gltf)
    out = tmp_path / "w.pcd"
    code, _, err = run(["scan", "--mesh", str(gltf), "--sensor", "velodyne_vlp16", "--pose", "0,0,1",
                        "-o", str(out), "--backend", "embree"], capsys)
    assert code == 0, err
    points = read_pcd(out)
    assert len(points) and np.allclose(points["x"], 9.9, atol=0.02) and points["z"].max() < 3.01
    # the same file forced Z-up stands on its side: nothing 10 m ahead at the sensor's height
    code, _, err = run(["scan", "--mesh", str(gltf), "--sensor", "velodyne_vlp16", "--pose", "0,0,1", "--up", "z",
                        "-o", str(out), "--backend", "embree"], capsys)
    assert code == 0, err
    assert not np.any(np.abs(read_pcd(out)["x"] - 9.9) < 0.05)


def test_scan_writes_las_and_a_rerun_recording(room, tmp_path, capsys):
    import laspy

    out, rrd = tmp_path / "scan.laz", tmp_path / "scan.rrd"
    code, _, err = run(["scan", "--mesh", room, "--sensor", "velodyne_vlp16", "--pose", "1,2,1.5", "-o", str(out),
                        "--rerun", str(rrd), "--backend", "embree"], capsys)
    assert code == 0, err
    las = laspy.read(out)
    assert len(las.points) == 14_400 and rrd.stat().st_size > 1000


def test_scan_duration_integrates_a_livox_and_cuts_a_sweep(room, tmp_path, capsys):
    """--duration S: S seconds of a Livox Mid-70's non-repeating shots (more rays, new directions), or part of a
    spinning sensor's sweep; points carry their firing time."""
    from lidar_fmu.io import read_pcd

    counts = {}
    for duration in ("0.1", "0.5"):
        out = tmp_path / f"livox_{duration}.pcd"
        code, stdout, err = run(["scan", "--mesh", room, "--sensor", "livox_mid70", "--duration", duration,
                                 "-o", str(out)], capsys)
        assert code == 0, err
        points = read_pcd(out)
        counts[duration] = len(points)
        assert 0.9 * float(duration) < points["time"].max() < float(duration)
    assert counts["0.5"] > 4.5 * counts["0.1"]  # the room surrounds the sensor: nearly every shot returns
    half = tmp_path / "half.pcd"
    assert run(["scan", "--mesh", room, "--sensor", "velodyne_vlp16", "--duration", "0.025", "-o", str(half)],
               capsys)[0] == 0
    assert len(read_pcd(half)) == 16 * 450  # half of a 20 Hz VLP-16 turn, all on the walls
    with pytest.raises(SystemExit) as exit_info:
        main(["scan", "--mesh", room, "--sensor", "velodyne_vlp16", "--duration", "-1", "-o", str(half)])
    assert exit_info.value.code == 2 and "--duration" in capsys.readouterr().err


def test_version_prints_the_package_version():
    from lidar_fmu._version import __version__

    run = subprocess.run([sys.executable, "-m", "lidar_fmu", "--version"], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == f"lidar-fmu {__version__}"


def test_ground_truth_into_a_ptx_is_refused_not_ignored(room, tmp_path, capsys):
    out = tmp_path / "scan.ptx"
    code, _, err = run(["scan", "--mesh", room, "--sensor", "ibeo_lux", "-o", str(out), "--ground-truth"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "--ground-truth" in lines[0] and "PTX" in lines[0]
    assert not out.exists()


def test_figures_and_the_scaling_bench_write_under_the_current_folder(tmp_path, monkeypatch, capsys):
    from lidar_fmu.tools import bench_scaling
    from lidar_fmu.tools.cli import build_parser

    monkeypatch.chdir(tmp_path)
    # where the figure goes is the point here: the sweeps with no option of their own as small as
    # tests/test_scaling.py runs them (8 lidars and 200,000 stationary objects took the test 31 s, not 8)
    monkeypatch.setattr(bench_scaling, "LIDAR_STEPS", (1, 2))
    monkeypatch.setattr(bench_scaling, "STATIONARY_STEPS", (1, 100))
    assert build_parser().parse_args(["figures"]).output == "figures"
    code, _, err = run(["bench", "--scaling", "--repeat", "1", "--max-triangles", "10000", "--max-instances", "10"],
                       capsys)
    assert code == 0, err
    assert (tmp_path / "bench" / "scaling.png").stat().st_size > 10_000 and not (tmp_path / "docs").exists()


@pytest.mark.parametrize("argv, option", [
    (["replay", "trace.osi", "-o", "out", "--host", "18446744073709551616"], "--host"),  # 2⁶⁴: past OSI's uint64
    (["replay", "trace.osi", "-o", "out", "--frames", str(2**70)], "--frames"),  # past what islice counts to
    (["soak", "--seed", "-1"], "--seed"),
    (["bench", "--repeat", "0"], "--repeat"),
    (["validate", "r.npz", "--metadata", "m.json", "-o", "out", "--frames", str(2**64)], "--frames"),
])
def test_an_integer_option_out_of_its_range_is_one_line_exit_2(argv, option, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2
    assert f"argument {option}: must be at " in err[-1] and "Traceback" not in "\n".join(err)
