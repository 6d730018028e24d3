"""``lidar-fmu validate``: pixel placement against ouster-sdk, the scene rebuilt from pixels, the comparison's
figures on a case with a known answer, and the command end to end on an extracted real recording."""
import json
import os

import numpy as np
import pytest

from helpers.recordings import DATA, simulated_recording
from lidar_fmu.geometry.scene import Scene
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.recordings.ouster import OusterGeometry, read_recording
from lidar_fmu.recordings.recording import Recording, RecordingError, read_kitti_poses
from lidar_fmu.recordings.validate import (
    compare_frame,
    frame_to_frame_noise,
    mesh_from_pixels,
    pixel_rays,
    sensor_spec,
    spearman,
    summarize,
    unit_points,
)
from lidar_fmu.scan.lidar import Lidar
from lidar_fmu.sensors.ouster import read_ouster_metadata
from lidar_fmu.tools.cli import main

RECORDINGS = {  # extracted recording → its metadata
    "OS-1-128_v2.3.0_1024x10_lb_n3": "OS-1-128_v2.3.0_1024x10",
    "OS-1-128_767798045_1024x10_20230712_120049": "OS-1-128_767798045_1024x10_20230712_120049",
    "OS-1-32-G_v2.1.1_1024x10": "OS-1-32-G_v2.1.1_1024x10",
}
OS1_32 = "OS-1-32-G_v2.1.1_1024x10"


def _paths(name):
    return os.path.join(DATA, name + ".npz"), os.path.join(DATA, RECORDINGS[name] + ".json")


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_pixels_land_where_ouster_sdk_puts_them(name):
    npz, metadata = _paths(name)
    cal = read_ouster_metadata(metadata)
    rays = pixel_rays(cal)
    with np.load(npz) as data:
        beam, column = data["xyzlut_pixel"].T
        direction, offset = data["xyzlut_direction"], data["xyzlut_offset_m"]
        recording = read_recording(npz, cal, metadata)
    assert recording.images["range_mm"].shape[1:] == (cal.beams, cal.columns)
    for range_mm in (500.0, 10_000.0, 120_000.0):
        ours = unit_points(rays, np.full((cal.beams, cal.columns), range_mm * 1e-3))[beam, column]
        theirs = offset + range_mm * direction
        assert np.abs(ours - theirs).max() < 1e-3  # < 1 mm (float32 rays: µm in fact)


def _wall_ranges(rays, x_of_y):
    """Unit-convention ranges of every pixel to a wall x = x_of_y(y) in front of the unit (NaN elsewhere)."""
    d, o = rays.direction, rays.origin
    ahead = d[..., 0] > 0.5
    t = np.full(d.shape[:2], np.nan)
    for x_m, side in x_of_y:  # a wall per side of y = 0
        tt = (x_m - o[..., 0]) / np.where(ahead, d[..., 0], np.nan)
        y = o[..., 1] + tt * d[..., 1]
        t = np.where(ahead & side(y), tt, t)
    return t + rays.beam_origin_m


def test_a_plane_meshes_into_the_plane():
    cal = read_ouster_metadata(_paths(OS1_32)[1])
    rays = pixel_rays(cal)
    range_m = _wall_ranges(rays, [(8.0, lambda y: np.ones_like(y, bool))])
    even = np.broadcast_to(np.arange(cal.columns)[None, :] % 2 == 0, range_m.shape)
    mesh, rho0 = mesh_from_pixels(rays, range_m, np.full(range_m.shape, 40), even)
    assert np.abs(mesh.vertices[:, 0] - 8.0).max() < 1e-4
    # every grid cell of the wall (beams × even columns ahead, less one row and one column) holds two triangles
    columns = np.isfinite(range_m[:, ::2]).all(axis=0).sum()
    assert mesh.triangle_count >= 2 * (cal.beams - 1) * (columns - 1)
    # REFLECTIVITY 40 seen head-on is ρ0 = 0.4; seen obliquely, ρ0 = 0.4 / cos θ
    assert rho0.min() == pytest.approx(0.4, abs=0.01) and rho0.max() > 0.4


def test_a_depth_edge_is_not_bridged():
    cal = read_ouster_metadata(_paths(OS1_32)[1])
    rays = pixel_rays(cal)
    range_m = _wall_ranges(rays, [(8.0, lambda y: y >= 0), (16.0, lambda y: y < 0)])
    even = np.broadcast_to(np.arange(cal.columns)[None, :] % 2 == 0, range_m.shape)
    mesh, _ = mesh_from_pixels(rays, range_m, np.full(range_m.shape, 40), even)
    x = mesh.vertices[mesh.faces][..., 0]  # (F, 3) corner x
    assert set(np.round(np.unique(x), 3)) == {8.0, 16.0}
    assert np.all(np.ptp(x, axis=1) < 1e-3)  # no triangle spans the two walls
    # with a looser rule (a range may double) the edge is bridged: the check above can fail
    mesh, _ = mesh_from_pixels(rays, range_m, np.full(range_m.shape, 40), even, max_jump=1.5)
    assert np.any(np.ptp(mesh.vertices[mesh.faces][..., 0], axis=1) > 1.0)


@pytest.mark.parametrize("off_by_one", [False, True])
def test_the_unit_against_itself_agrees_pixel_for_pixel(off_by_one):
    npz, metadata = _paths(OS1_32)
    cal = read_ouster_metadata(metadata)
    rays = pixel_rays(cal)
    recording = simulated_recording(cal, metadata, off_by_one)
    spec = sensor_spec(metadata, cal, None, False)
    unit = OusterGeometry(cal, metadata)
    result = summarize([compare_frame(recording, 0, unit, rays, spec, "embree")], recording, unit)
    a = result["agreement"]
    if not off_by_one:
        assert a["both"] > 10_000
        assert a["only_real"] + a["only_sim"] <= 0.002 * a["both"]  # mesh seams only
        assert result["abs_delta_all"]["median_m"] < 1e-3  # the RANGE image rounds to 1 mm
        assert abs(result["range_bias_unit_convention_m"]) < 1e-3
        assert result["per_beam_valid"]["max_abs_difference_points"] < 1.0
    else:  # held-out pixels compared one column off: the figures show it
        assert result["abs_delta_all"]["median_m"] > 5e-3


def test_spearman_ranks():
    x = np.arange(50.0)
    assert spearman(x, x ** 3) == pytest.approx(1.0)
    assert spearman(x, -x) == pytest.approx(-1.0)
    assert spearman(np.r_[x, x], np.r_[x, x]) == pytest.approx(1.0)  # ties


def run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_validate_command_writes_table_json_and_figure(tmp_path, capsys):
    npz, metadata = _paths(OS1_32)
    out = tmp_path / "new" / "val"
    code, stdout, err = run(["validate", npz, "--metadata", metadata, "-o", str(out), "--backend", "embree"], capsys)
    assert code == 0, err
    assert "real returns we find" in stdout and "our `intensity` against the unit's SIGNAL" in stdout
    result = json.loads((out / "validation.json").read_text())
    assert result["agreement"]["real_returns_found"] > 0.9
    assert result["abs_delta_away_from_edges"]["median_m"] < 0.05
    assert (out / "validation.png").stat().st_size > 20_000


@pytest.mark.parametrize("case, message", [
    ("missing", "recording not found"),
    ("text", "expected a .pcap"),
    ("other_unit", "describes 128 beams"),
    ("pcap", "needs ouster-sdk"),
    ("broken_npz", "lacks"),
    ("not_ouster", "--metadata"),
    ("output_is_a_file", "is a file"),
])
def test_validate_refuses_bad_input_in_one_line(case, message, tmp_path, capsys):
    npz, metadata = _paths(OS1_32)
    recording = {"missing": str(tmp_path / "none.npz"), "text": str(tmp_path / "a.txt"), "other_unit": npz,
                 "pcap": str(tmp_path / "a.pcap"), "broken_npz": str(tmp_path / "b.npz"), "not_ouster": npz,
                 "output_is_a_file": npz}[case]
    (tmp_path / "a.txt").write_text("hello")
    (tmp_path / "a.pcap").write_bytes(b"\xd4\xc3\xb2\xa1")
    np.savez(tmp_path / "b.npz", range_mm=np.zeros((1, 32, 1024), np.uint32))
    if case == "other_unit":
        metadata = _paths("OS-1-128_v2.3.0_1024x10_lb_n3")[1]
    if case == "not_ouster":
        metadata = str(tmp_path / "a.txt")
    if case == "pcap":
        try:
            import ouster.sdk  # noqa: F401
            pytest.skip("ouster-sdk is installed here")
        except ImportError:
            pass
    extra = ["-o", str(tmp_path / "a.txt" / "out")] if case == "output_is_a_file" else []
    code, stdout, err = run(["validate", recording, "--metadata", metadata, *extra], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_a_recording_of_another_shape_is_refused():
    npz, metadata = _paths(OS1_32)
    cal = read_ouster_metadata(_paths("OS-1-128_v2.3.0_1024x10_lb_n3")[1])
    with pytest.raises(RecordingError, match="128 beams"):
        read_recording(npz, cal, metadata)


def test_extracted_frames_hold_what_ouster_sdk_counted_in_them():
    """The npz images against numbers ouster-sdk gave earlier (tests/data/ouster_os1_128_*.json)."""
    here = os.path.join(os.path.dirname(__file__), "data")
    with open(os.path.join(here, "ouster_os1_128_return_fraction_by_band.json")) as f:
        bands = json.load(f)
    npz, metadata = _paths("OS-1-128_v2.3.0_1024x10_lb_n3")
    recording = read_recording(npz, read_ouster_metadata(metadata), metadata)
    assert recording.frame_id.tolist() == bands["frame_ids"]
    assert (recording.images["range_mm"] > 0).sum(axis=(0, 2)).tolist() == bands["beam_returns"]
    with open(os.path.join(here, "ouster_os1_128_dual_returns.json")) as f:
        dual = json.load(f)
    npz, metadata = _paths("OS-1-128_767798045_1024x10_20230712_120049")
    recording = read_recording(npz, read_ouster_metadata(metadata), metadata)
    sent = recording.sent(0)
    first, second = recording.images["range_mm"][0][:, sent], recording.images["range2_mm"][0][:, sent]
    assert sent.sum() == dual["columns_sent"]
    assert (first > 0).sum() == dual["returning_pixels"] and ((first > 0) & (second > 0)).sum() == dual[
        "second_echo_pixels"]


def test_a_dual_return_recording_reports_second_returns():
    npz, metadata = _paths("OS-1-128_767798045_1024x10_20230712_120049")
    cal = read_ouster_metadata(metadata)
    recording = read_recording(npz, cal, metadata)
    spec = sensor_spec(metadata, cal, None, recording.dual)
    assert spec["returns"] == "dual"
    unit = OusterGeometry(cal, metadata)
    result = summarize([compare_frame(recording, 0, unit, pixel_rays(cal), spec, "embree")], recording, unit)
    second = result["second_return"]
    assert second["real_fraction_all_sent"] == pytest.approx(1089 / 16373)
    assert second["both"] + second["only_real"] == round(second["real_fraction_covered"]
                                                         * second["real_returning_covered"])
    assert 0 <= second["sim_fraction_covered"] <= 1
    # only the 128 columns the unit sent are compared
    assert result["held_out_pixels"] == 64 * cal.beams


def test_noise_from_frame_to_frame_finds_the_noise_a_unit_has():
    """A unit with σ = 2 cm recorded from two poses 0.25 m apart: its noise, measured from frame to frame after
    the poses, is 2 cm; ours simulated with the same noise reads the same, without noise nothing."""
    npz, metadata = _paths(OS1_32)
    cal = read_ouster_metadata(metadata)
    noisy = sensor_spec(metadata, cal, None, False) | {"noise": {"range_sigma_m": 0.02, "seed": 3}}
    poses = np.stack([np.eye(4), pose_matrix((0.25, 0.05, 0.0), (0.0, 0.0, np.radians(1.0)))])
    recording = simulated_recording(cal, metadata, poses=poses, spec=noisy)
    rays = pixel_rays(cal)
    for spec, ours in ((noisy, 0.02), (sensor_spec(metadata, cal, None, False), 0.0)):
        bands = [b for b in frame_to_frame_noise(recording, rays, spec, poses, "embree")["bands"] if b["real_n"] > 1000]
        assert bands
        for band in bands:
            assert band["real_sigma_m"] == pytest.approx(0.02, rel=0.15)
            assert band["sim_sigma_m"] == pytest.approx(ours, abs=0.003)


def test_kitti_poses_are_read_and_checked(tmp_path):
    poses = read_kitti_poses(os.path.join(DATA, "OS-1-128_v2.3.0_1024x10_lb_n3_poses_kitti.txt"), 3)
    assert poses.shape == (3, 4, 4) and np.allclose(poses[0], np.eye(4))
    assert poses[2][0, 3] == pytest.approx(0.4978, abs=1e-4)  # the unit moves ≈ 0.25 m per frame
    with pytest.raises(RecordingError, match="3 poses for a recording of 2"):
        read_kitti_poses(os.path.join(DATA, "OS-1-128_v2.3.0_1024x10_lb_n3_poses_kitti.txt"), 2)
    bad = tmp_path / "poses.txt"
    bad.write_text("1 0 0 0 0 1 0 0 0 0 1\n")
    with pytest.raises(RecordingError, match="12 finite numbers"):
        read_kitti_poses(str(bad), 1)


def _wall_recording(cal, rays, x_m, reflectivity):
    range_m = _wall_ranges(rays, [(x_m, lambda y: np.abs(y) < 5.0)])
    range_mm = np.where(np.isfinite(range_m), np.rint(range_m * 1000), 0).astype(np.uint32)[None]
    images = {"range_mm": range_mm, "reflectivity": np.full(range_mm.shape, reflectivity, np.uint16)}
    return Recording("wall", images, np.ones((1, cal.columns), np.uint32), np.zeros((1, cal.columns), np.uint64),
                     np.array([0]), "synthetic")


def test_pixels_on_the_meshs_rim_are_compared_apart():
    """A wall whose foot lies between two beams below the horizon: the unit returned on the even pixels of the
    wall's lowest beam but not on the odd ones (their footprints half off the foot). The mesh's edge between two
    pixels of a beam bows away from the horizon (a chord of the beam's cone), so those rays meet the row of
    triangles above it, and the surface ends right below them: they are counted on the rim, not in the agreement
    figures."""
    npz, metadata = _paths(OS1_32)
    cal = read_ouster_metadata(metadata)
    rays = pixel_rays(cal)
    recording = _wall_recording(cal, rays, 10.0, 40)
    foot = int(np.argmin(np.abs(np.asarray(cal.altitude_deg) + 7.0)))  # beams are ordered top down
    range_mm = recording.images["range_mm"]
    range_mm[:, foot + 1:] = 0
    range_mm[:, foot, 1::2] = 0
    spec = sensor_spec(metadata, cal, None, False)
    unit = OusterGeometry(cal, metadata)
    result = summarize([compare_frame(recording, 0, unit, rays, spec, "embree")], recording, unit)
    inside, rim = result["agreement"], result["agreement_rim"]
    assert inside["both"] > 1000 and inside["only_sim"] == 0 and inside["only_real"] == 0
    assert rim["only_sim"] > 0.5 * np.count_nonzero(range_mm[0, foot - 1, 1::2])
    assert result["per_beam_valid"]["inside"][foot] == 0
    assert result["per_beam_valid"]["max_abs_difference_points"] < 1.0


@pytest.mark.parametrize("x_m, returns", [(10.0, True), (40.0, False)])
def test_the_units_reflectivity_reaches_our_range_limit(x_m, returns):
    """A 2 % wall (REFLECTIVITY 2) as the unit saw it: within our r_L for 2 % we return on it, beyond, not."""
    npz, metadata = _paths(OS1_32)
    cal = read_ouster_metadata(metadata)
    rays = pixel_rays(cal)
    spec = sensor_spec(metadata, cal, None, False)
    limit = Lidar(Scene(), spec, backend="embree").sensor.range_limit.max_range_m_for(0.02)
    assert 11.0 < limit < 38.0  # the wall's ranges (10–11 m at 10 m, 40–40.3 m at 40 m) lie on either side
    recording = _wall_recording(cal, rays, x_m, 2)
    unit = OusterGeometry(cal, metadata)
    a = summarize([compare_frame(recording, 0, unit, rays, spec, "embree")], recording, unit)["agreement"]
    assert a["both"] + a["only_real"] > 500
    assert (a["real_returns_found"] > 0.95) if returns else (a["both"] == 0)


@pytest.mark.parametrize("change, message", [
    ({"frame_id": np.arange(5)}, "frame_id must hold one integer per frame"),
    ({"status": np.full((1, 1024), "x")}, "status must be integers"),
    ({"timestamp_ns": np.zeros((1, 3), np.uint64)}, "timestamp_ns must be integers of shape"),
    ({"range2_mm": np.zeros((1, 32, 1024), np.uint32)}, "range2_mm and reflectivity2"),
])
def test_an_extracted_recording_whose_arrays_do_not_fit_is_refused(change, message, tmp_path):
    npz, metadata = _paths(OS1_32)
    with np.load(npz) as data:
        arrays = {key: data[key] for key in data.files}
    np.savez(tmp_path / "bad.npz", **(arrays | change))
    with pytest.raises(RecordingError, match=message):
        read_recording(str(tmp_path / "bad.npz"), read_ouster_metadata(metadata), metadata)


def _npy_header(shape, dtype=np.uint16) -> bytes:
    import io

    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": np.dtype(dtype).str, "fortran_order": False,
                                                  "shape": shape})
    return buffer.getvalue()


def _patch_declared_size(path, member: str, size: int) -> None:
    """Set the uncompressed size a zip's local and central headers declare for ``member`` (its only entry)."""
    import struct

    raw = bytearray(path.read_bytes())
    local, central = raw.index(b"PK\x03\x04"), raw.index(b"PK\x01\x02")
    assert raw[local + 30:local + 30 + len(member)] == member.encode()
    struct.pack_into("<I", raw, local + 22, size)
    struct.pack_into("<I", raw, central + 24, size)
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("case, message", [
    ("bad_zip", "File is not a zip file"),
    ("header_claims_64_GiB", "range_mm.npy's header declares 68,719,476,736 bytes"),
    ("declares_3_GiB", "expands to 3.0 GiB, over 2 GiB"),
    ("bomb", "range_mm.npy"),  # 50 MB of zeros under a zip entry that declares 64 kB: the CRC gives it away
])
def test_a_damaged_or_hostile_npz_is_one_line_naming_it_in_bounded_memory(case, message, tmp_path):
    import tracemalloc
    import zipfile

    path = tmp_path / "r.npz"
    if case == "bad_zip":
        path.write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    else:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            if case == "header_claims_64_GiB":
                archive.writestr("range_mm.npy", _npy_header((1, 2**15, 2**20)))
            else:
                header = _npy_header((1, 32, 1024))
                archive.writestr("range_mm.npy", header + bytes(50_000_000 if case == "bomb" else 65_536))
        if case in ("bomb", "declares_3_GiB"):
            _patch_declared_size(path, "range_mm.npy", len(header) + 65_536 if case == "bomb" else 3 * 2**30)
    metadata = _paths(OS1_32)[1]
    cal = read_ouster_metadata(metadata)
    tracemalloc.start()
    try:
        with pytest.raises(RecordingError) as raised:
            read_recording(str(path), cal, metadata)
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    text = str(raised.value)
    assert str(path) in text and message in text and "\n" not in text, text
    assert peak_bytes < 5_000_000  # nothing expanded past what was declared (64 kB)
