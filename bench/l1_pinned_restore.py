#!/usr/bin/env python3
"""Host-to-device restores out of the L1 memory level's pieces (issue 30,
part 3; docs/gpu.md, "Pinned versions in memory").

Runs bench/l1_pinned_restore.cpp (build/cpp/bench/l1_pinned_restore) once:
the same bytes copied to the device from pageable memory (the restore from
host copies), from 2 MiB pieces registered one by one (what the memory level
does, one copy per piece), and from one buffer registered once whole (the
paper's host buffer); and the registration of those bytes in pieces against
once whole. The three copies interleave within each repeat. Every figure is
a per-repeat ratio against a case of the same repeat: median [min-max].

CUDA only (no host analog: pinning is what is measured). With --fake-driver
it runs against the test driver (tests/cpp/fake_cuda), to check that it runs
to the end; those timings mean nothing and the report says so.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def cell(values) -> str:
    return f"{statistics.median(values):.3g} [{min(values):.3g}–{max(values):.3g}]"


def ms_cell(values) -> str:
    return cell([v * 1e3 for v in values]) + " ms"


RATIOS = [("pageable_over_pieces", "pageable /\npinned pieces"), ("pageable_over_whole", "pageable /\npinned whole"),
          ("pieces_over_whole", "pieces /\nwhole (copy)"), ("register_pieces_over_whole", "pieces /\nwhole (register)")]


def plot(r: dict, path: Path, device: str):
    """The four ratios, median with min-max bars; None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return None
    medians = [statistics.median(r[key]) for key, _ in RATIOS]
    low = [m - min(r[key]) for m, (key, _) in zip(medians, RATIOS)]
    high = [max(r[key]) - m for m, (key, _) in zip(medians, RATIOS)]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(range(len(RATIOS)), medians, yerr=[low, high], capsize=4, color="#4477aa")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(RATIOS)), [label for _, label in RATIOS])
    ax.set_ylabel("ratio (median, min-max over repeats)")
    ax.set_title(f"L1 restore, {r['bytes'] >> 20} MiB: {device}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=1024, help="bytes restored, MiB (default 1024)")
    ap.add_argument("--piece-mib", type=int, default=2, help="the memory level's piece, MiB (default 2)")
    ap.add_argument("--repeats", type=int, default=7, help="repeats, at least 5 (default 7)")
    ap.add_argument("--fake-driver", action="store_true", help="run against the test driver (timings meaningless)")
    ap.add_argument("--binary", type=Path, default=ROOT / "build/cpp/bench/l1_pinned_restore")
    ap.add_argument("--out", type=Path, default=HERE / "results/l1_pinned_restore.md")
    args = ap.parse_args()
    if args.repeats < 5 and not args.fake_driver:
        ap.error("--repeats must be at least 5")
    env = dict(os.environ)
    if args.fake_driver:  # a fake already on the path (scripts/gpu_check.sh's build) comes first
        fake = str(ROOT / "build/cpp/tests/cpp/fake_cuda")
        env["LD_LIBRARY_PATH"] = ":".join(p for p in (env.get("LD_LIBRARY_PATH"), fake) if p)
    run = subprocess.run([str(args.binary), "--mib", str(args.mib), "--piece-mib", str(args.piece_mib),
                          "--repeats", str(args.repeats)], capture_output=True, text=True, env=env)
    if run.returncode != 0:
        sys.stderr.write(run.stderr)
        return run.returncode
    r = json.loads(run.stdout.strip().splitlines()[-1])
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True) if not args.fake_driver else None
    device = "the fake CUDA driver (tests/cpp/fake_cuda): TIMINGS MEANINGLESS" if args.fake_driver else (
        smi.stdout.strip() if smi and smi.returncode == 0 else "unknown (nvidia-smi failed)")
    lines = [
        "# L1 restore: pageable, pinned pieces, pinned whole",
        "",
        f"`python3 bench/l1_pinned_restore.py --mib {args.mib} --piece-mib {args.piece_mib} --repeats {args.repeats}"
        + (" --fake-driver" if args.fake_driver else "") + "`",
        "",
        f"Device: {device}. {r['bytes'] >> 20} MiB host to device, pieces of {r['piece'] >> 20} MiB, "
        f"{r['repeats']} repeats (median [min–max] over repeats; ratios per repeat).",
        "",
        "| figure | value |",
        "|---|---|",
        f"| pageable copy / copy from pinned pieces (speed-up of the pinned L1) | {cell(r['pageable_over_pieces'])} |",
        f"| pageable copy / copy from one buffer pinned whole | {cell(r['pageable_over_whole'])} |",
        f"| copy from pieces / copy from whole (> 1: whole is faster) | {cell(r['pieces_over_whole'])} |",
        f"| registration in pieces / once whole (> 1: whole is faster) | {cell(r['register_pieces_over_whole'])} |",
        f"| copy, pageable | {ms_cell(r['copy_pageable'])} |",
        f"| copy, pinned pieces | {ms_cell(r['copy_pieces'])} |",
        f"| copy, pinned whole | {ms_cell(r['copy_whole'])} |",
        f"| registration, pieces | {ms_cell(r['register_pieces'])} |",
        f"| registration, whole | {ms_cell(r['register_whole'])} |",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    png = plot(r, args.out.with_suffix(".png"), device)
    if png:
        lines += [f"![ratios]({png.name})", ""]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
