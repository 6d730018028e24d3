"""The demo replayed through the FMU with ``backend: cuda`` against ``embree``: the same returns? (GPU check step.)

    python scripts/gpu_parity.py --out parity.json [--frames 10] [--sensor NAME|FILE] [--work DIR]
                                 [--ground-truth-only]

The demo scenario (``lidar-fmu demo``'s street, cars and traffic) is replayed
through the built FMU four times: with each backend, once as the demo runs
(motion distortion on: host and traffic move, the frame cast in time slices)
and once with ``motion_distortion: false``. Each frame's SensorData is decoded
and every detection given back its ray (``PointCloud.with_pattern``); then the
two backends' returns are compared ray by ray (a dual-return sensor: echo by
echo):

* **equal**: the same echoes, distances within ``--tolerance-m`` (1e-5 m), the
  same object ids;
* **close**: the same echoes and ids, distances farther apart than the
  tolerance but within the suite's CPU/CUDA tolerance, ``CLOSE_RELATIVE`` ·
  (1 + range) (tests/test_cuda_sim.py): both casters compute the hit distance
  in float32, by different formulas, so they part by a few ulps, more at
  grazing incidence (at 120 m one ulp is 7.6e-6 m: 1e-5 m is 1.3 ulps there);
  counted, with the worst gap in ulps;
* **edge tie** (still frames only): the frame's rays cast again in this process
  with both backends on the model's scene as the FMU posed it (``Backend.
  cast_batch``: closest hits with triangle and barycentric coordinates), and
  the two disagree on that ray where either hit lies within
  ``EDGE_BARYCENTRIC`` of its triangle's edge: a ray through an exact edge may
  count for either triangle, or for neither at an object's outline;
* **near surfaces** (still frames only): the recast disagrees off the edges,
  but both hit the same object within ``NEAR_SURFACE_M``: two surfaces that
  close (the demo street's lane markings lie 5 mm above the asphalt) part the
  casters on a few rays (docs/backends.md: 3 of 131,072 rays, ≤ 2.1 mm, for
  the CPU twin of the GPU's traversal against Embree);
* **continuation** (still frames only): the recast disagrees, but the same
  rays cast without going on through glass and off mirrors agree: the
  backends continue differently (embreex, which recasts past each pane,
  parts from Embree so on 81 of the demo's 131,072 rays, by a pane's
  thickness);
* **unexplained**: anything else (the recast disagrees otherwise, or agrees
  while the FMU's returns do not: the per-hit physics differs, or the glass
  passed before the last surface, which a closest-hit cast does not show).

A moving frame's rays leave from the pose at their own firing time and see
each object in its slice's pose, so they cannot be cast again here one by one;
its differences are counted, not classified. Verdict: the still frames have no
ray that differs by continuation or unexplained, and the moving frames differ
beyond "close" on at most
``MOVING_DIFFER_SHARE`` of the rays. Prints the figures; writes them to
``--out`` as JSON; exit 0 when parity holds, 1 when it does not, 2 on bad input.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

import numpy as np

#: a hit this close to its triangle's edge (in barycentric coordinates, min(u, v, 1 − u − v)) is on the edge; the
#: tolerance tests/test_cuda_sim.py gives edge hits (assumed: 1e-4 of a 1 m triangle is 0.1 mm)
EDGE_BARYCENTRIC = 1e-4
#: two hits on one object this close along the ray are a tie between near surfaces (assumed: twice the demo
#: street's 5 mm lane markings above the asphalt)
NEAR_SURFACE_M = 0.01
#: relative distance tolerance of the suite's CPU/CUDA parity tests (tests/test_cuda_sim.py: 1e-4 · (1 + range))
CLOSE_RELATIVE = 1e-4
#: share of a moving frame's rays allowed to differ beyond "close" (assumed: edge ties on the still demo frames
#: are far rarer; this bound only catches a broken kernel, the still frames check the ties themselves)
MOVING_DIFFER_SHARE = 1e-3
BACKENDS = ("embree", "cuda")


def replay_backend(scenario_dir: str, out_dir: str, backend: str, sensor, frames: int) -> list[bytes]:
    """The scenario replayed through the FMU with ``backend`` (and ``sensor``) → each frame's SensorData."""
    from lidar_fmu.osi.trace import read_trace
    from lidar_fmu.tools.replay import invalid_frames_message, replay

    summary = replay(scenario_dir, out_dir, max_frames=frames, progress=False, write_pcd_every=0,
                     trace_format="osi", overrides={"backend": backend, "sensor": sensor})
    invalid = invalid_frames_message(summary)
    if invalid:
        raise RuntimeError(f"the replay with backend {backend}: {invalid}")
    (trace,) = glob.glob(os.path.join(out_dir, "*_sd_*.osi"))
    return list(read_trace(trace))


def returns_by_ray(sensor_data: bytes, pattern, echoes: int):
    """(key = ray · echoes + echo, distance m, object id) of every detection, sorted by key."""
    from lidar_fmu.osi.detections import sensor_data_to_points

    cloud = sensor_data_to_points(sensor_data).with_pattern(pattern, echoes)
    ray = np.asarray(cloud.ray_index, np.int64)
    echo = cloud.points["echo"].astype(np.int64) if echoes > 1 else np.zeros(len(ray), np.int64)
    key = ray * echoes + echo
    order = np.argsort(key, kind="stable")
    return key[order], cloud.points["range"][order].astype(np.float64), cloud.points["object_id"][order]


def compare_frame(a, b, echoes: int, tolerance_m: float) -> dict:
    """Ray-level comparison of two frames' returns (:func:`returns_by_ray`) → rays per category, worst gap."""
    key_a, range_a, id_a = a
    key_b, range_b, id_b = b
    common, ia, ib = np.intersect1d(key_a, key_b, assume_unique=True, return_indices=True)
    gap = np.abs(range_a[ia] - range_b[ib])
    spacing = np.spacing(np.maximum(range_a[ia], range_b[ib]).astype(np.float32)).astype(np.float64)
    ulps = gap / spacing
    only_a = np.setdiff1d(key_a, key_b, assume_unique=True) // echoes
    only_b = np.setdiff1d(key_b, key_a, assume_unique=True) // echoes
    object_off = common[id_a[ia] != id_b[ib]] // echoes
    beyond_close = common[gap > CLOSE_RELATIVE * (1.0 + range_a[ia])] // echoes
    beyond_tolerance = common[gap > tolerance_m] // echoes
    differ = np.unique(np.concatenate([only_a, only_b, object_off, beyond_close]))
    close = np.setdiff1d(np.unique(beyond_tolerance), differ)
    rays = np.unique(np.concatenate([key_a, key_b]) // echoes)
    return {"rays_returning": len(rays), "returns": [len(key_a), len(key_b)], "differ": differ, "close": close,
            "hit_only": [np.unique(only_a), np.unique(only_b)], "object_off": np.unique(object_off),
            "range_off": np.unique(beyond_close), "max_gap_m": float(gap.max()) if len(gap) else 0.0,
            "max_ulps": float(ulps.max()) if len(ulps) else 0.0}


def edge_hits(hits) -> np.ndarray:
    """Rays whose closest hit lies on (within :data:`EDGE_BARYCENTRIC` of) its triangle's edge."""
    w = 1.0 - hits.u - hits.v
    return hits.hit & (np.minimum(np.minimum(hits.u, hits.v), w) < EDGE_BARYCENTRIC)


def hits_differ(a, b) -> tuple[np.ndarray, np.ndarray]:
    """(rays whose closest hits differ: hit or miss, object, range beyond ``CLOSE_RELATIVE``·(1 + r); the range
    gap in m, 0 where either missed)."""
    both = a.hit & b.hit
    ref_m = np.where(both, a.range_m, 0).astype(np.float64)
    gap = np.abs(np.where(both, b.range_m, 0) - ref_m)
    return (a.hit != b.hit) | (both & (a.instance_id != b.instance_id)) | (gap > CLOSE_RELATIVE * (1 + ref_m)), gap


def still_recast(scenario_dir: str, sensor, views: list[bytes], step_s: float):
    """Each still frame's rays cast again on the scene the model (the FMU's own, in-process) posed for it, by both
    backends → per frame (rays the casts disagree on, those of them at an edge, those of them between near
    surfaces of one object off the edges, those the casts without continuation agree on), and the cast-level
    totals."""
    from lidar_fmu.raycast import make_backend
    from lidar_fmu.tools.replay import fmu_parameters, load_scenario, model_of

    scenario = load_scenario(scenario_dir) | {"backend": "embree", "sensor": sensor}
    model = model_of(fmu_parameters(scenario, scenario_dir))
    gpu = None
    per_frame = []
    totals = {"rays": 0, "differ": 0, "at_edges": 0, "near_surfaces": 0, "continuation": 0, "primitive_differs": 0}
    for k, view in enumerate(views):
        result = model.step(view, step_s * k)
        if not result.valid:
            raise RuntimeError(f"in-process model, frame {k}: invalid step: {result.message}")
        gpu = gpu or make_backend("cuda", model.scene)
        lidar = model.lidar
        rays, through = lidar.rays(model.last_sensor_pose), lidar.return_model().continuation()
        cpu_hits, gpu_hits = lidar.backend.cast_batch(rays, through), gpu.cast_batch(rays, through)
        off, gap = hits_differ(cpu_hits, gpu_hits)
        plain_off, _ = hits_differ(lidar.backend.cast_batch(rays), gpu.cast_batch(rays))
        edge = edge_hits(cpu_hits) | edge_hits(gpu_hits)
        near = off & ~edge & cpu_hits.hit & gpu_hits.hit & (cpu_hits.instance_id == gpu_hits.instance_id) & (
            gap <= NEAR_SURFACE_M)
        continued = off & ~edge & ~near & ~plain_off
        per_frame.append(tuple(np.flatnonzero(m) for m in (off, off & edge, near, continued)))
        totals["rays"] += len(off)
        totals["differ"] += int(off.sum())
        totals["at_edges"] += int((off & edge).sum())
        totals["near_surfaces"] += int(near.sum())
        totals["continuation"] += int(continued.sum())
        both = cpu_hits.hit & gpu_hits.hit
        totals["primitive_differs"] += int((both & (cpu_hits.primitive_id != gpu_hits.primitive_id)).sum())
    return per_frame, totals


def compare_runs(frames_a: list[bytes], frames_b: list[bytes], pattern, echoes: int, tolerance_m: float,
                 recast=None) -> dict:
    """Every frame of two backends' replays compared (:func:`compare_frame`); with ``recast`` (still frames:
    :func:`still_recast`'s per-frame rays) the differing rays classified."""
    if len(frames_a) != len(frames_b):
        raise RuntimeError(f"the replays have {len(frames_a)} and {len(frames_b)} frames")
    total = {"frames": len(frames_a), "rays_in_pattern": len(pattern), "rays_returning": 0, "returns_embree": 0,
             "returns_cuda": 0, "rays_equal": 0, "rays_close": 0, "rays_differ": 0, "hit_only_embree": 0,
             "hit_only_cuda": 0, "object_off": 0, "range_off": 0, "max_gap_m": 0.0, "max_ulps": 0.0}
    if recast is not None:
        total.update(edge_ties=0, near_surfaces=0, continuation=0, cast_off_edges=0, physics_differs=0)
    examples = []
    for k, (a, b) in enumerate(zip(frames_a, frames_b)):
        c = compare_frame(returns_by_ray(a, pattern, echoes), returns_by_ray(b, pattern, echoes), echoes,
                          tolerance_m)
        total["rays_returning"] += c["rays_returning"]
        total["returns_embree"] += c["returns"][0]
        total["returns_cuda"] += c["returns"][1]
        total["rays_close"] += len(c["close"])
        total["rays_differ"] += len(c["differ"])
        total["rays_equal"] += c["rays_returning"] - len(c["close"]) - len(c["differ"])
        total["hit_only_embree"] += len(c["hit_only"][0])
        total["hit_only_cuda"] += len(c["hit_only"][1])
        total["object_off"] += len(c["object_off"])
        total["range_off"] += len(c["range_off"])
        total["max_gap_m"] = max(total["max_gap_m"], c["max_gap_m"])
        total["max_ulps"] = max(total["max_ulps"], c["max_ulps"])
        kind = np.full(len(c["differ"]), "differs", dtype=object)
        if recast is not None:
            off, at_edges, near_surfaces, continued = (np.isin(c["differ"], rays) for rays in recast[k])
            tie = at_edges
            near = near_surfaces & ~tie
            through = continued & ~tie & ~near
            cast_off = off & ~tie & ~near & ~through
            physics = ~off
            kind = np.select([tie, near, through, cast_off], ["edge tie", "near surfaces", "continuation",
                                                                "cast differs"], "physics differs")
            total["edge_ties"] += int(tie.sum())
            total["near_surfaces"] += int(near.sum())
            total["continuation"] += int(through.sum())
            total["cast_off_edges"] += int(cast_off.sum())
            total["physics_differs"] += int(physics.sum())
        examples += [{"frame": k, "ray": int(r), "kind": str(why)} for r, why in zip(c["differ"][:5], kind[:5])]
    total["examples"] = examples[:20]
    share = total["rays_differ"] / max(total["rays_returning"], 1)
    total["differ_share"] = share
    if recast is not None:
        total["unexplained"] = total["cast_off_edges"] + total["physics_differs"]
        total["pass"] = total["unexplained"] + total["continuation"] == 0
    else:
        total["pass"] = share <= MOVING_DIFFER_SHARE
    return total


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write the figures to")
    parser.add_argument("--frames", type=int, default=10, help="demo frames per replay (default 10)")
    parser.add_argument("--sensor", default="ouster_os1_128", help="preset or spec file (default: the demo's)")
    parser.add_argument("--work", default=None, help="folder for the scenario and replays (default: beside --out)")
    parser.add_argument("--tolerance-m", type=float, default=1e-5, help="distance tolerance (default 1e-5 m)")
    parser.add_argument("--ground-truth-only", action="store_true",
                        help="the demo street from its ground truth alone (no meshes to load in each of the four "
                             "replays: scripts/gpu_check.sh's dry run)")
    args = parser.parse_args(argv)
    if args.frames < 1:
        parser.error(f"--frames must be at least 1, got {args.frames}")

    from lidar_fmu.errors import LidarFmuError
    from lidar_fmu.osi.trace import read_trace
    from lidar_fmu.raycast import cuda_available
    from lidar_fmu.sensors import load_sensor, resolve_spec
    from lidar_fmu.tools.demo import make_demo_scenario
    from lidar_fmu.tools.replay import load_scenario

    if not cuda_available():
        print("gpu_parity: numba-cuda sees no GPU (and NUMBA_ENABLE_CUDASIM is off): nothing to compare",
              file=sys.stderr)
        return 2
    work = os.path.abspath(args.work or os.path.join(os.path.dirname(os.path.abspath(args.out)), "parity_work"))
    try:
        sensor = os.path.abspath(args.sensor) if os.path.isfile(args.sensor) else args.sensor
        spec = resolve_spec(sensor)
        t0 = time.perf_counter()
        scenario_dir = make_demo_scenario(os.path.join(work, "scenario"), frames=args.frames,
                                          ground_truth_only=args.ground_truth_only)
        views = list(read_trace(load_scenario(scenario_dir)["trace"]))[: args.frames]
        runs = {}
        for mode, mode_spec in (("moving", spec), ("still", spec | {"motion_distortion": False})):
            loaded = load_sensor(mode_spec)
            echoes = loaded.footprint.max_echoes if loaded.footprint.active else 1
            replays = [replay_backend(scenario_dir, os.path.join(work, f"{mode}_{b}"), b, mode_spec, args.frames)
                       for b in BACKENDS]
            recast, cast_totals = (None, None)
            if mode == "still":
                recast, cast_totals = still_recast(scenario_dir, mode_spec, views, loaded.frame_period_s)
            runs[mode] = compare_runs(*replays, loaded.pattern, echoes, args.tolerance_m, recast)
            if cast_totals is not None:
                runs[mode]["cast"] = cast_totals
    except LidarFmuError as exc:
        print(f"gpu_parity: {exc}", file=sys.stderr)
        return 2
    from lidar_fmu.raycast.cuda import device_name

    simulated = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
    report = {"device": "Numba's CUDA simulator" if simulated else device_name(), "sensor": args.sensor,
              "frames": args.frames, "ground_truth_only": args.ground_truth_only, "tolerance_m": args.tolerance_m,
              "edge_barycentric": EDGE_BARYCENTRIC, "near_surface_m": NEAR_SURFACE_M, "close_relative": CLOSE_RELATIVE,
              "moving_differ_share_allowed": MOVING_DIFFER_SHARE, "seconds": time.perf_counter() - t0,
              "runs": runs, "pass": all(run["pass"] for run in runs.values())}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    from gpu_report import parity_lines  # beside this script (its folder is the first on sys.path)

    print("\n".join(parity_lines(report)))
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
