"""``scan --mesh FILE@x,y,z[,roll,pitch,yaw]``: a mesh placed where it is asked, a bad placement refused in one line,
and a scan's file saying when its frame fired."""
import numpy as np
import pytest
import trimesh

from lidar_fmu.io import read_pcd
from lidar_fmu.tools.cli import main


@pytest.fixture
def wall(tmp_path):
    """A 4 m × 4 m square authored around its origin, facing ±x (as object models are: centred, x forward)."""
    mesh = trimesh.Trimesh(vertices=[[0, -2, -2], [0, 2, -2], [0, 2, 2], [0, -2, 2]], faces=[[0, 1, 2], [0, 2, 3]],
                           process=False)
    path = tmp_path / "wall.stl"
    mesh.export(path)
    return str(path)


def _scan(argv, capsys):
    code = main(["scan", "--sensor", "velodyne_vlp16", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_placed_mesh_stands_where_it_is_asked(wall, tmp_path, capsys):
    out = tmp_path / "placed.pcd"
    code, stdout, err = _scan(["--mesh", f"{wall}@10,1,0", "--mesh", f"{wall}@0,-8,0,0,0,90", "-o", str(out)],
                              capsys)
    assert code == 0, err
    points = read_pcd(out)
    ahead, right = points["object_id"] == 0, points["object_id"] == 1
    assert ahead.sum() > 50 and right.sum() > 50
    np.testing.assert_allclose(points["x"][ahead], 10.0, atol=2e-3)  # moved 10 m forward
    assert np.all(np.abs(points["y"][ahead] - 1.0) <= 2.0 + 1e-3)
    np.testing.assert_allclose(points["y"][right], -8.0, atol=2e-3)  # turned 90° to face the sensor, 8 m right
    unplaced = tmp_path / "unplaced.pcd"
    assert _scan(["--mesh", wall, "-o", str(unplaced)], capsys)[0] == 0
    assert len(read_pcd(unplaced)) == 0  # as authored: the sensor sits in its plane and sees its edge only


@pytest.mark.parametrize("placement", ["@1,2", "@a,b,c", "@nan,0,0", "@1,2,3,4", "@", "@inf,0,0"])
def test_a_bad_placement_is_one_line(wall, tmp_path, capsys, placement):
    out = tmp_path / "x.pcd"
    code, _, err = _scan(["--mesh", wall + placement, "-o", str(out)], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("lidar-fmu: error: "), err
    assert "Traceback" not in err and not out.exists()


def test_a_file_whose_name_holds_an_at_sign_is_read_whole(wall, tmp_path, capsys):
    named = tmp_path / "wall@2.stl"
    named.write_bytes(open(wall, "rb").read())
    assert _scan(["--mesh", str(named), "-o", str(tmp_path / "a.pcd")], capsys)[0] == 0


def test_a_scan_file_says_when_its_frame_fired(wall, tmp_path, capsys):
    """The sensor fires from its start: first_firing_s 0 (what `time` counts from), timestamp_s the frame's end."""
    out = tmp_path / "timed.pcd"
    assert _scan(["--mesh", f"{wall}@5,0,0", "-o", str(out)], capsys)[0] == 0
    head = out.read_bytes()[:300].decode("ascii", "replace")
    assert "# lidar_fmu timestamp_s 0.05\n# lidar_fmu first_firing_s 0.0\n" in head  # a 20 Hz VLP-16
    assert 0.0 <= read_pcd(out)["time"].min() and read_pcd(out)["time"].max() < 0.05
