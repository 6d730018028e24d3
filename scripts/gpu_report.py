"""scripts/gpu_check.sh's report: the steps, the parity, and the GPU figures beside the CPU's, with their goals.

    python3 scripts/gpu_report.py OUT

Reads what the steps left in ``OUT`` (steps.tsv, env.txt, parity.json,
bench_cuda.json, bench_embree.json), whatever of it there is, and writes
``OUT/report.md`` (also printed): a figure whose step failed or did not run
reads "–". Standard library only, so it runs even where the install failed.
"""
from __future__ import annotations

import json
import os
import sys

#: the steps of scripts/gpu_check.sh, in order
STEPS = ("environment", "install", "smoke", "tests", "parity", "bench-cuda", "bench-cpu")


def load(out: str, name: str) -> dict | None:
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        return {"error": f"{name} unreadable: {exc}"}


def get(data, *path):
    """``data[path[0]][path[1]]…``, or None where any part is missing."""
    for key in path:
        try:
            data = data[key]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def fmt(value, form: str = ".2f", unit: str = "") -> str:
    return "–" if value is None else f"{value:{form}}{unit}"


def frame_row(bench, scene: str):
    """The bench's cast row of the frame sensor (the OS1-128, listed after the VLP-16; or the one --sensor)."""
    rows = [r for r in (get(bench, "cast") or []) if r.get("scene") == scene]
    return rows[-1] if rows else None


def gpu_row(bench, scene: str):
    return next((r for r in (get(bench, "gpu") or []) if r.get("scene") == scene), None)


def motion_row(bench, slices: int):
    return next((r for r in (get(bench, "motion") or []) if r.get("slices") == slices), None)


def figure_rows(gpu, cpu) -> list[list[str]]:
    """(figure, goal, cuda, embree) cells of the figures issue 35 asks for."""
    street_gpu, street_cpu = frame_row(gpu, "street"), frame_row(cpu, "street")
    sphere_cpu = frame_row(cpu, "sphere")
    step_gpu, step_cpu = get(gpu, "step"), get(cpu, "step")

    def stages(step):
        return "" if not step else " (" + ", ".join(f"{k} {v:.2f}" for k, v in step["stages_ms"].items()) + ")"

    rows = [
        ["frame cast, demo street (kernel only, to a device sync)", "≤ 0.3 ms (LiMOX: 1.16 ms, RTX 2080, OptiX)",
         fmt(get(gpu_row(gpu, "street"), "frame_kernel_ms"), ".3f", " ms"), "–"],
        ["frame cast, demo street (`cast_batch`, hits back on the host)", "",
         fmt(get(street_gpu, "cast_ms"), ".3f", " ms"), fmt(get(street_cpu, "cast_ms"), ".3f", " ms")],
        ["whole frame (`Lidar.scan`), demo street", "", fmt(get(street_gpu, "frame_ms"), ".2f", " ms"),
         fmt(get(street_cpu, "frame_ms"), ".2f", " ms")],
        ["batched rays, 1 M-triangle sphere", "≥ 2 G rays/s (Rmagine: 4.2 G, RTX 2070 S, OptiX)",
         fmt(get(gpu_row(gpu, "sphere"), "batch_grays_s"), ".2f", " G rays/s"),
         fmt(None if sphere_cpu is None else sphere_cpu["mrays_s"] / 1e3, ".3f", " G rays/s (one frame)")],
        ["FMU doStep, demo (FMPy), stages in-process", "≤ 5 ms",
         fmt(get(step_gpu, "fmu_step_ms"), ".2f", " ms") + stages(step_gpu),
         fmt(get(step_cpu, "fmu_step_ms"), ".2f", " ms") + stages(step_cpu)],
    ]
    g, c = motion_row(gpu, 10), motion_row(cpu, 10)
    rows.append(["motion distortion, sensor and objects move, 10 slices (× still)", "",
                 fmt(get(g, "frame_ms"), ".2f", " ms") + ratio(g, "frame_ms", "still_ms"),
                 fmt(get(c, "frame_ms"), ".2f", " ms") + ratio(c, "frame_ms", "still_ms")])
    cases = [r["case"] for r in (get(gpu, "echoes") or get(cpu, "echoes") or [])]
    for case in cases:
        g = next((r for r in get(gpu, "echoes") or [] if r["case"] == case), None)
        c = next((r for r in get(cpu, "echoes") or [] if r["case"] == case), None)
        rows.append([f"dual returns: {case} (× one ray per beam)", "",
                     fmt(get(g, "frame_ms"), ".2f", " ms") + ratio(g, "frame_ms", "plain_ms"),
                     fmt(get(c, "frame_ms"), ".2f", " ms") + ratio(c, "frame_ms", "plain_ms")])
    g, c = get(gpu, "rig"), get(cpu, "rig")
    rows.append(["4 lidars on one scene, model step (× one lidar)", "", fmt(get(g, "rig_ms"), ".2f", " ms")
                 + ratio(g, "rig_ms", "one_ms"), fmt(get(c, "rig_ms"), ".2f", " ms") + ratio(c, "rig_ms", "one_ms")])
    g, c = get(gpu, "ground_truth"), get(cpu, "ground_truth")
    rows.append(["street from ground truth alone, model step (× from meshes)", "",
                 fmt(get(g, "step_ms", "ground truth"), ".2f", " ms") + (f" ({g['ratio']:.2f}×)" if g else ""),
                 fmt(get(c, "step_ms", "ground truth"), ".2f", " ms") + (f" ({c['ratio']:.2f}×)" if c else "")])
    road_km = get(g, "road_km") or get(c, "road_km") or 10
    rows.append([f"first step of a {road_km:g} km road from ground truth", "",
                 fmt(get(g, "road", "auto", "first_step_s"), ".2f", " s"),
                 fmt(get(c, "road", "auto", "first_step_s"), ".2f", " s")])
    rows.append(["the urban street around that road, later step (× the bare road's)", "",
                 fmt(get(g, "road", "urban", "step_ms"), ".2f", " ms") + (f" ({g['urban_ratio']:.2f}×)" if g else ""),
                 fmt(get(c, "road", "urban", "step_ms"), ".2f", " ms") + (f" ({c['urban_ratio']:.2f}×)" if c else "")])
    return rows


def ratio(row, numerator: str, denominator: str) -> str:
    if not row or not row.get(denominator):
        return ""
    return f" ({row[numerator] / row[denominator]:.2f}×)"


def parity_lines(parity) -> list[str]:
    if parity is None:
        return ["not measured (the parity step did not finish)"]
    if "error" in parity:
        return [parity["error"]]
    try:
        street = ", the street from its ground truth alone" if parity.get("ground_truth_only") else ""
        lines = [f"device {parity['device']}, sensor {parity['sensor']}{street}, {parity['frames']} frames, tolerance "
                 f"{parity['tolerance_m']:g} m: **{'parity holds' if parity['pass'] else 'PARITY FAILS'}**", ""]
        for mode, r in parity["runs"].items():
            line = (f"- {mode} frames: {r['rays_returning']:,} returning rays; {r['rays_equal']:,} equal within the "
                    f"tolerance, {r['rays_close']:,} close (within {parity['close_relative']:g}·(1 + r)), "
                    f"{r['rays_differ']:,} differ (a return on one side only: embree {r['hit_only_embree']}, cuda "
                    f"{r['hit_only_cuda']}; another object {r['object_off']}; range {r['range_off']}); worst gap "
                    f"{r['max_gap_m']:.2e} m ({r['max_ulps']:.1f} float32 ulps)")
            if "edge_ties" in r:
                cast = r["cast"]
                line += (f"; the differing rays: {r['edge_ties']} ties on triangle edges, {r['near_surfaces']} "
                         f"between surfaces of one object within {parity['near_surface_m'] * 100:g} cm, "
                         f"{r['continuation']} only through glass or mirrors (continuation), {r['cast_off_edges']} "
                         f"cast differently otherwise, {r['physics_differs']} with equal casts (physics); the frames "
                         f"cast again: {cast['differ']:,} of {cast['rays']:,} rays differ, {cast['at_edges']:,} of "
                         f"them at edges, {cast['near_surfaces']:,} between near surfaces, {cast['continuation']:,} "
                         f"only with continuation")
            lines.append(line)
    except (KeyError, TypeError, ValueError) as exc:  # a parity.json of another version: say so, show it raw
        return [f"parity.json not as expected ({exc.__class__.__name__}: {exc}); as written:", "", "```",
                json.dumps(parity, indent=1)[:4000], "```"]
    return lines


def main(out: str) -> int:
    steps = []
    if os.path.exists(os.path.join(out, "steps.tsv")):
        with open(os.path.join(out, "steps.tsv"), encoding="utf-8") as f:
            steps = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    ran = {s[0] for s in steps}
    gpu, cpu = load(out, "bench_cuda.json"), load(out, "bench_embree.json")
    env = ""
    if os.path.exists(os.path.join(out, "env.txt")):
        with open(os.path.join(out, "env.txt"), encoding="utf-8") as f:
            env = "".join(f.readlines()[:6]).strip()
    info = get(gpu, "info") or get(cpu, "info") or {}
    lines = ["# GPU check (scripts/gpu_check.sh)", "",
             f"GPU: {info.get('gpu', '–')}; CPU: {info.get('cpu', '–')}, {info.get('cpus', '–')} cores; "
             f"Python {info.get('python', '–')}, Numba {info.get('numba', '–')}", "", "```", env, "```", "",
             "## Steps", "", "| step | status | exit | s |", "|---|---|---|---|"]
    lines += [f"| {' | '.join(s)} |" for s in steps]
    lines += [f"| {name} | not run | – | – |" for name in STEPS if name not in ran]
    lines += ["", "## Parity: the demo through the FMU, cuda against embree", "",
              *parity_lines(load(out, "parity.json")), "",
              f"## Figures, same machine (medians of {get(gpu, 'repeat') or get(cpu, 'repeat') or '–'})", "",
              "| figure | goal | cuda | embree |", "|---|---|---|---|"]
    try:
        lines += ["| " + " | ".join(cells) + " |" for cells in figure_rows(gpu, cpu)]
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:  # a bench JSON of another version
        lines += ["", f"(the bench JSON is not as expected: {exc.__class__.__name__}: {exc}; see bench_*.json)"]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "report.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: python3 scripts/gpu_report.py OUT (the folder scripts/gpu_check.sh wrote)")
    sys.exit(main(sys.argv[1]))
