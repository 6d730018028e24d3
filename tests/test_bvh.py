"""Binned-SAH BVH (raycast.bvh): structure invariants and CPU traversal against brute force and Embree."""
import numpy as np
import pytest
import trimesh

from helpers.meshes import ground_of_cells, landing_on_ground
from lidar_fmu import Scene, load_sensor
from lidar_fmu.geometry.scene import Mesh
from lidar_fmu.geometry.transforms import pose_matrix
from lidar_fmu.raycast import RayBatch, make_backend
from lidar_fmu.raycast.bvh import LEAF_SIZE, build_bvh, cast_instances, cast_one_bvh, concatenate, instance_table


def soup(n=2000, seed=0):
    """``n`` random triangles (0.2–1 m) in a 20 m cube, plus a stack of coincident ones."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10, 10, (n, 1, 3))
    corners = centres + rng.normal(scale=0.5, size=(n, 3, 3))
    corners[-12:] = corners[-13]  # coincident centroids: the builder must still split them
    return corners.reshape(-1, 3).astype(np.float32), np.arange(3 * n, dtype=np.int32).reshape(n, 3)


def rays_at(vertices, n, seed=1):
    """Rays from a 30 m shell towards points near the geometry (unit directions)."""
    rng = np.random.default_rng(seed)
    origins = rng.normal(size=(n, 3))
    origins *= 30.0 / np.linalg.norm(origins, axis=1, keepdims=True)
    targets = vertices[rng.integers(len(vertices), size=n)] + rng.normal(scale=0.7, size=(n, 3))
    d = targets - origins
    return origins.astype(np.float32), (d / np.linalg.norm(d, axis=1, keepdims=True)).astype(np.float32)


def brute_force(vertices, faces, origins, directions):
    """Möller–Trumbore over every triangle in float64 → (t (inf on miss), face index (-1))."""
    v = vertices.astype(np.float64)
    p0, e1, e2 = v[faces[:, 0]], v[faces[:, 1]] - v[faces[:, 0]], v[faces[:, 2]] - v[faces[:, 0]]
    best_t = np.full(len(origins), np.inf)
    best_f = np.full(len(origins), -1)
    for i, (o, d) in enumerate(zip(origins.astype(np.float64), directions.astype(np.float64))):
        p = np.cross(d, e2)
        det = np.einsum("ij,ij->i", e1, p)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / det
            s = o - p0
            u = np.einsum("ij,ij->i", s, p) * inv
            q = np.cross(s, e1)
            w = (q @ d) * inv
            t = np.einsum("ij,ij->i", e2, q) * inv
        ok = (det != 0) & (u >= 0) & (w >= 0) & (u + w <= 1) & (t > 0)
        if ok.any():
            k = np.flatnonzero(ok)[np.argmin(t[ok])]
            best_t[i], best_f[i] = t[k], k
    return best_t, best_f


@pytest.fixture(scope="module")
def mesh_and_bvh():
    vertices, faces = soup()
    return vertices, faces, build_bvh(vertices, faces)


def test_every_triangle_in_exactly_one_leaf(mesh_and_bvh):
    _, faces, bvh = mesh_and_bvh
    leaves = bvh.node_count > 0
    assert bvh.node_count.max() <= LEAF_SIZE
    covered = np.zeros(len(faces), np.int64)
    for first, count in zip(bvh.node_child_or_first[leaves], bvh.node_count[leaves]):
        covered[first:first + count] += 1
    np.testing.assert_array_equal(covered, 1)  # leaf ranges tile the reordered triangles
    np.testing.assert_array_equal(np.sort(bvh.tri_index), np.arange(len(faces)))  # a permutation
    # every node but the root is the child of exactly one inner node
    inner = np.flatnonzero(bvh.node_count == 0)
    children = np.concatenate([bvh.node_child_or_first[inner], bvh.node_child_or_first[inner] + 1])
    np.testing.assert_array_equal(np.sort(children), np.arange(1, len(bvh.node_count)))


def test_node_boxes_contain_triangles_and_children(mesh_and_bvh):
    vertices, faces, bvh = mesh_and_bvh
    corners = vertices[faces[bvh.tri_index]]  # (F, 3, 3) in leaf order
    np.testing.assert_array_equal(corners[:, 0], bvh.tri_v0)
    np.testing.assert_array_equal(corners[:, 1], bvh.tri_v1)
    np.testing.assert_array_equal(corners[:, 2], bvh.tri_v2)
    lo, hi = corners.min(axis=1), corners.max(axis=1)
    for node in range(len(bvh.node_count)):
        first, count = bvh.node_child_or_first[node], bvh.node_count[node]
        if count:
            assert np.all(bvh.node_lo[node] <= lo[first:first + count])
            assert np.all(bvh.node_hi[node] >= hi[first:first + count])
        else:
            for child in (first, first + 1):
                assert np.all(bvh.node_lo[node] <= bvh.node_lo[child])
                assert np.all(bvh.node_hi[node] >= bvh.node_hi[child])


def test_traversal_equals_brute_force(mesh_and_bvh):
    vertices, faces, bvh = mesh_and_bvh
    origins, directions = rays_at(vertices, 2000)
    t, face, u, v = cast_one_bvh(bvh, origins, directions)
    t_ref, face_ref = brute_force(vertices, faces, origins, directions)
    hit, hit_ref = np.isfinite(t), np.isfinite(t_ref)
    assert 0.2 < hit.mean() < 0.95
    assert (hit != hit_ref).mean() <= 0.001  # grazing rays only
    both = hit & hit_ref
    assert np.abs(t[both] - t_ref[both]).max() < 1e-4 * (1 + t_ref[both]).max()
    stacked = face_ref >= len(faces) - 13  # coincident triangles: any of them is the closest
    np.testing.assert_array_equal(face[both & ~stacked], face_ref[both & ~stacked])
    assert np.all(face[both & stacked] >= len(faces) - 13)
    # the returned (u, v) reproduce the hit point
    p = vertices[faces[face[hit]]].astype(np.float64)
    w = np.stack([1 - u[hit] - v[hit], u[hit], v[hit]], axis=1)[:, :, None]
    np.testing.assert_allclose((w * p).sum(axis=1), origins[hit] + t[hit, None] * directions[hit], atol=1e-3)


def mesh_of(tm):
    return Mesh(tm.vertices, tm.faces, np.zeros(len(tm.faces), np.int32), ("m",), "m")


def test_traversal_equals_embree():
    tm = trimesh.creation.icosphere(subdivisions=4)  # 5k triangles, closed
    mesh = mesh_of(tm)
    scene = Scene.from_meshes([mesh])
    origins, directions = rays_at(mesh.vertices * 1.2, 2000, seed=3)
    ref = make_backend("embree", scene).cast(origins, directions)
    t, face, _, _ = cast_one_bvh(build_bvh(mesh.vertices, mesh.faces), origins, directions)
    hit = np.isfinite(t)
    assert 0.2 < hit.mean() < 0.95
    assert (hit != ref.hit).mean() <= 0.001
    both = hit & ref.hit
    np.testing.assert_allclose(t[both], ref.range_m[both], rtol=1e-5, atol=1e-4)
    assert (face[both] == ref.primitive_id[both]).mean() > 0.999


def two_instance_scene():
    tm = trimesh.creation.icosphere(subdivisions=3)
    mesh = Mesh(tm.vertices * [2.0, 1.0, 0.5], tm.faces, np.zeros(len(tm.faces), np.int32), ("m",), "m")
    a = np.eye(4)
    a[:3, 3] = [5.0, 0.0, 0.0]
    b = np.eye(4)
    c, s = np.cos(0.7), np.sin(0.7)
    b[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    b[:3, 3] = [0.0, 6.0, 1.0]
    scene = Scene()
    scene.add_instance(3, mesh, a)
    scene.add_instance(9, mesh, b)
    rng = np.random.default_rng(1)
    n = 1000
    origins = np.zeros((n, 3), np.float32)
    origins[:, 2] = 0.3
    targets = np.where(rng.random((n, 1)) < 0.5, [5.0, 0, 0], [0, 6.0, 1.0]) + rng.normal(scale=1.2, size=(n, 3))
    d = targets - origins
    return scene, origins, (d / np.linalg.norm(d, axis=1, keepdims=True)).astype(np.float32)


def test_two_level_cpu_equals_embree():
    scene, origins, directions = two_instance_scene()
    t, slot, normal, prim = cast_two_level(scene, origins, directions)
    ref = make_backend("embree", scene).cast(origins, directions)
    hit = slot >= 0
    assert 0.2 < hit.mean() < 0.9 and set(slot[hit]) == {0, 1}
    np.testing.assert_array_equal(hit, ref.hit)
    np.testing.assert_allclose(t[hit], ref.range_m[hit], rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(slot, ref.instance_index)
    np.testing.assert_array_equal(prim[hit], ref.primitive_id[hit])
    np.testing.assert_allclose(normal[hit], ref.normal[hit], atol=1e-4)


def many_instance_scene(count=40, seed=5):
    """``count`` posed, rotated and scaled copies of two small meshes on a 30 m grid."""
    rng = np.random.default_rng(seed)
    meshes = [mesh_of(trimesh.creation.icosphere(subdivisions=2)), mesh_of(trimesh.creation.box(extents=(2, 1, 3)))]
    scene = Scene()
    for k in range(count):
        angle = rng.uniform(-np.pi, np.pi)
        pose = np.eye(4)
        pose[:3, :3] = np.array([[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]]) \
            * rng.uniform(0.5, 1.5)
        pose[:3, 3] = rng.uniform(-15, 15, 3)
        scene.add_instance(100 + k, meshes[k % 2], pose)
    return scene


def cast_two_level(scene, origins, directions):
    """The CPU twin of the CUDA kernel → (t, instance slot, world normal, original face index)."""
    bvhs = [build_bvh(m.vertices, m.faces) for m in scene.meshes]
    arrays, tri_index, roots = concatenate(bvhs)
    table = instance_table(bvhs, roots, scene.instance_mesh_index, scene.poses)
    n = len(directions)
    t, slot, tri = np.empty(n, np.float32), np.empty(n, np.int32), np.empty(n, np.int32)
    u, v, normal = np.empty(n, np.float32), np.empty(n, np.float32), np.empty((n, 3), np.float32)
    cast_instances(*arrays, *table, origins, directions, np.float32(1e30), t, slot, tri, u, v, normal)
    return t, slot, normal, tri_index[tri]


def test_top_level_bvh_holds_every_instance_once_in_boxes_that_contain_it():
    scene = many_instance_scene()
    bvhs = [build_bvh(m.vertices, m.faces) for m in scene.meshes]
    _, _, roots = concatenate(bvhs)
    lo, hi, child, count, instance = instance_table(bvhs, roots, scene.instance_mesh_index, scene.poses)[3:]
    leaves = np.flatnonzero(count > 0)
    held = np.concatenate([instance[child[k]:child[k] + count[k]] for k in leaves])
    np.testing.assert_array_equal(np.sort(held), np.arange(len(scene)))
    vertices, _ = world_of(scene)
    for k in leaves:  # each leaf box contains the world vertices of its instances
        for slot in instance[child[k]:child[k] + count[k]]:
            corners = vertices[slot]
            assert np.all(lo[k] <= corners.min(axis=0) + 1e-5) and np.all(hi[k] >= corners.max(axis=0) - 1e-5)


def world_of(scene):
    """Per instance slot its world vertices; and all placed triangles as one soup (vertices, faces, slot)."""
    per_slot, soup_v, soup_f, soup_slot, offset = [], [], [], [], 0
    for slot, (mesh_index, pose) in enumerate(zip(scene.instance_mesh_index, scene.poses)):
        mesh = scene.meshes[mesh_index]
        world = mesh.vertices.astype(np.float64) @ pose[:3, :3].T + pose[:3, 3]
        per_slot.append(world)
        soup_v.append(world)
        soup_f.append(mesh.faces + offset)
        soup_slot.append(np.full(len(mesh.faces), slot))
        offset += len(world)
    return per_slot, (np.concatenate(soup_v), np.concatenate(soup_f), np.concatenate(soup_slot))


def test_two_level_traversal_equals_brute_force_over_many_instances():
    scene = many_instance_scene()
    _, (vertices, faces, face_slot) = world_of(scene)
    origins, directions = rays_at(vertices, 600, seed=7)
    t, slot, _, _ = cast_two_level(scene, origins, directions)
    t_ref, face_ref = brute_force(vertices, faces, origins, directions)
    hit, hit_ref = slot >= 0, np.isfinite(t_ref)
    assert 0.3 < hit.mean() < 0.95 and len(set(slot[hit])) > 20
    assert (hit != hit_ref).mean() <= 0.002  # grazing rays only
    both = hit & hit_ref
    np.testing.assert_allclose(t[both], t_ref[both], rtol=1e-5, atol=1e-4)
    assert (slot[both] == face_slot[face_ref[both]]).mean() > 0.998


def test_bvh_is_kept_on_disk_per_asset(tmp_path):
    from lidar_fmu.raycast.bvh import cached_bvh

    vertices, faces = soup(300)
    first = cached_bvh(vertices, faces, cache_dir=str(tmp_path))
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].suffix == ".npz"
    again = cached_bvh(vertices, faces, cache_dir=str(tmp_path))
    for name in ("node_lo", "node_hi", "node_child_or_first", "node_count", "tri_v0", "tri_index"):
        np.testing.assert_array_equal(getattr(first, name), getattr(again, name))
    assert again.depth == first.depth
    moved = cached_bvh(vertices + 1.0, faces, cache_dir=str(tmp_path))  # other geometry: its own entry
    assert len(list(tmp_path.iterdir())) == 2 and not np.array_equal(moved.node_lo, first.node_lo)
    files[0].write_bytes(b"not an npz")  # a broken cache file is rebuilt, not trusted
    rebuilt = cached_bvh(vertices, faces, cache_dir=str(tmp_path))
    np.testing.assert_array_equal(rebuilt.node_lo, first.node_lo)


def test_two_level_cpu_reaches_the_ground_along_shared_edges_at_yaw_90():
    """The CPU twin of the CUDA kernel on the rays the Embree packets once lost: an OS1-128 at yaw exactly 90°
    over a 1 m ground, whose cell edges run along the rays at azimuth −90°."""
    scene = Scene.from_meshes([ground_of_cells(20.0)])
    rays = RayBatch.from_pattern(load_sensor("ouster_os1_128").pattern,
                                 pose_matrix((0.0, -2.0, 1.9), (0.0, 0.0, np.radians(90.0))), 1000.0)
    origins, directions = rays.world_rays()
    slot = cast_two_level(scene, origins, directions)[1]
    inside, outside = landing_on_ground(origins[0].astype(np.float64), directions.astype(np.float64), 10.0)
    assert inside.sum() > 30_000 and (slot[inside] == 0).all() and (slot[outside] == -1).all()
