"""The shipped / calibrated tables of docs/validation.md from ``lidar-fmu validate -o`` folders.

    python scripts/validation_tables.py SHIPPED_DIR CALIBRATED_DIR
    python scripts/validation_tables.py --held-out SHIPPED_DIR CALIBRATED_DIR
    python scripts/validation_tables.py --packets SHIPPED_DIR CALIBRATED_DIR
    python scripts/validation_tables.py --packets-kept-apart SHIPPED_DIR CALIBRATED_DIR

Each DIR holds ``lb_n3/``, ``dual/`` and ``os32/`` (with ``--held-out``: ``os0_128/``, ``os2_128/``,
``os0_32/``, ``os2_32/``, the units nothing was fitted on; with ``--packets``: ``vlp16/``, ``xt32/``,
``pandar64/``, ``qt64/``, the shared Velodyne and Hesai recordings; with ``--packets-kept-apart``:
``pandar40p/``, ``xt16/``, ``xt32m/``, ``qt128/``, ``vlp32/``, ``vls128/``), each a ``validation.json``; prints one
markdown table of the figures the targets name, a column per recording and run, and the noise σ per range band.
The packet recordings' table holds the issue's targets (docs/validation.md)."""
from __future__ import annotations

import json
import os
import sys

RECORDINGS = (("lb_n3", "OS-1-128 lb_n3"), ("dual", "OS-1-128 dual"), ("os32", "OS-1-32-G"))
HELD_OUT = (("os0_128", "OS-0-128"), ("os2_128", "OS-2-128"), ("os0_32", "OS-0-32 dual"), ("os2_32", "OS-2-32"))
PACKETS = (("vlp16", "VLP-16 dual"), ("xt32", "PandarXT-32"), ("pandar64", "Pandar64"), ("qt64", "PandarQT64"))
PACKETS_KEPT_APART = (("pandar40p", "Pandar40P"), ("xt16", "PandarXT-16"), ("xt32m", "XT32M2X"),
                      ("qt128", "QT128C2X"), ("vlp32", "VLP-32C"), ("vls128", "VLS-128"))
RUNS = ("shipped", "calibrated")


def _pct(x):
    return "–" if x is None else f"{100 * x:.1f} %"


def _cm(x):
    return "–" if x is None else f"{100 * x:.2f}"


def _agreement_rows(r, found, lacks, delta):
    """The rows every table has, their targets given."""
    a, edge = r["agreement"], r["abs_delta_away_from_edges"]
    return {
        f"real returns we find, inside the mesh ({found})": _pct(a["real_returns_found"]),
        f"our returns the unit lacks, inside the mesh ({lacks})": _pct(a["sim_returns_unit_lacks"]),
        "on the mesh's rim, apart: found / ours the unit lacks":
            f"{_pct(r['agreement_rim']['real_returns_found'])} / {_pct(r['agreement_rim']['sim_returns_unit_lacks'])}",
    }, {f"\\|Δr\\| median / p90 away from edges, cm ({delta})": f"{_cm(edge['median_m'])} / {_cm(edge['p90_m'])}"}


def rows(r):
    limit = r["range_limit"]
    bands = [b for b in limit["bands"] if not b["reflectivity"].startswith("101")]
    spear = r["intensity_spearman"]
    second = r.get("second_return")
    agreement, delta = _agreement_rows(r, "≥ 97 %", "≤ 1 %", "≤ 3 / ≤ 12")
    return {
        **agreement,
        "per-beam valid fraction, max abs diff (≤ 3 points)": f"{r['per_beam_valid']['max_abs_difference_points']:.1f}",
        **delta,
        "range bias, mm (± 5)": f"{1000 * r['range_bias_unit_convention_m']:+.1f}",
        "real returns below min / above max range (0)": f"{limit['below_min_range']} / {limit['above_max_range']}",
        "beyond r_L, REFL 0–4 / 5–9 / 10–19 / 20–49 / 50–100 (≤ 2 % each)":
            " / ".join(f"{100 * b['fraction']:.1f}" if b["fraction"] is not None else "–" for b in bands),
        "Spearman our intensity / reflectivity vs SIGNAL (≥ 0.7, intensity above)":
            (f"{spear['our_intensity_vs_signal']:.2f} / {spear['our_reflectivity_vs_signal']:.2f}"
             if "our_intensity_vs_signal" in spear else "–"),
        "Spearman our intensity vs REFLECTIVITY": f"{spear['our_intensity_vs_reflectivity']:.2f}",
        "second returns, unit vs ours, covered pixels (± 30 %)":
            f"{_pct(second['real_fraction_covered'])} vs {_pct(second['sim_fraction_covered'])}" if second else "–",
    }


def packet_rows(r):
    """The figures of a Velodyne or Hesai recording, with the issue's targets."""
    limit = r["range_limit"]
    outside = limit["below_min_range"] + limit["above_max_range"]
    second = r.get("second_return")
    agreement, delta = _agreement_rows(r, "≥ 95 %", "≤ 3 %", "≤ 3 / ≤ 15")
    return {
        **agreement, **delta,
        "range bias, mm": f"{1000 * r['range_bias_unit_convention_m']:+.1f}",
        "real returns outside our min / max range (≤ 0.5 %)":
            f"{_pct(outside / limit['returns'])} ({limit['below_min_range']:,} / {limit['above_max_range']:,})",
        "per-beam valid fraction, max abs diff, points": f"{r['per_beam_valid']['max_abs_difference_points']:.1f}",
        "Spearman our intensity vs reflectivity": f"{r['intensity_spearman']['our_intensity_vs_reflectivity']:.2f}",
        "second returns, unit vs ours, covered pixels":
            f"{_pct(second['real_fraction_covered'])} vs {_pct(second['sim_fraction_covered'])}" if second else "–",
        "frames, held-out pixels inside the mesh": f"{len(r['frames'])}, {r['inside_pixels']:,}",
    }


def main(dirs, recordings=RECORDINGS, runs=RUNS, figures=rows):
    results = {run: {key: json.load(open(os.path.join(d, key, "validation.json"), encoding="utf-8"))
                     for key, _ in recordings} for run, d in zip(runs, dirs)}
    header = [f"{name}: {run}" for _, name in recordings for run in runs]
    print("| figure (target) | " + " | ".join(header) + " |")
    print("|---" * (len(header) + 1) + "|")
    table = {(key, run): figures(results[run][key]) for key, _ in recordings for run in runs}
    for figure in table[recordings[0][0], runs[0]]:
        print(f"| {figure} | " + " | ".join(table[key, run][figure] for key, _ in recordings for run in runs) + " |")
    print()
    print("| range band | " + " | ".join(f"{name}: unit / {run}" for _, name in recordings for run in runs) + " |")
    print("|---" * (len(header) + 1) + "|")
    for i, band in enumerate(results[runs[0]][recordings[0][0]]["noise_bands"][:-1]):
        cells = []
        for key, _ in recordings:
            for run in runs:
                b = results[run][key]["noise_bands"][i]
                cells.append(f"{_cm(b['real_sigma_m'])} / {_cm(b['sim_sigma_m'])}" if b["real_sigma_m"] else "–")
        print(f"| {band['band_m']} m | " + " | ".join(cells) + " |")
    if "lb_n3" in results[runs[0]]:
        frame_to_frame(results, runs)


def frame_to_frame(results, runs):
    print()
    print("| range band | unit | " + " | ".join(runs) + " |")
    print("|---" * (len(runs) + 2) + "|")
    for i, band in enumerate(results[runs[0]]["lb_n3"]["noise_frame_to_frame"]["bands"][1:-1], start=1):
        cells = [_cm(results[run]["lb_n3"]["noise_frame_to_frame"]["bands"][i]["sim_sigma_m"]) for run in runs]
        print(f"| {band['band_m']} m | {_cm(band['real_sigma_m'])} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if sys.argv[1] == "--held-out":
        main(sys.argv[2:4], HELD_OUT)
    elif sys.argv[1] in ("--packets", "--packets-kept-apart"):
        main(sys.argv[2:4], PACKETS if sys.argv[1] == "--packets" else PACKETS_KEPT_APART, figures=packet_rows)
    else:
        main(sys.argv[1:3])
