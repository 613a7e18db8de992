#!/usr/bin/env python3
"""The per-element work of ConvergentMatrix's global-layout files against a
memcpy of the same bytes, measured in the same process.

build/cpp/bench/matrix_kernels times, per repeat, on one rank's part of an
8192 x 8192 float32 matrix split over two ranks (4096 x 8192, 128 MiB):
  memcpy      the floor: the part copied once;
  part sums   add_part_sums() over the part (src/matrix/part_checksums.h);
  rows out    the column-major local array to row-major lines, 2 MiB of
              whole rows at a time (LocalRows::copy_out, as write_global);
  rows in     the inverse (LocalRows::copy_in, as read_global).
Figures: each step's time over the memcpy's in the same repeat, median
[min-max] of --repeats (>= 5). With --before-binary (the same program built
against an earlier tree) the two programs alternate, one repeat each, and a
before/after table gives each step's time paired by repeat.

    .venv/bin/python bench/matrix_kernels.py
    .venv/bin/python bench/matrix_kernels.py --before-binary /tmp/old/build/cpp/bench/matrix_kernels
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

from _common import (MiB, Series, add_common_args, finish_common_args, grouped_bars, log, machine_description,
                     machine_lines, pyplot, report_header)

SCRIPT = "matrix_kernels.py"
NAME = "matrix_kernels"
DEFAULT_BINARY = Path(__file__).resolve().parent.parent / "build" / "cpp" / "bench" / "matrix_kernels"
STEPS = {"part_sums": "part sums", "rows_out": "rows out", "rows_in": "rows in"}


def one_repeat(args, binary: Path) -> dict:
    cmd = [str(binary), "--rows", str(args.rows), "--cols", str(args.cols), "--repeats", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-600:]}")
    return json.loads(done.stdout.splitlines()[-1])


def ratios(runs: List[dict]) -> Dict[str, Series]:
    series = {"memcpy": Series("memcpy", times=[r["memcpy_s"] for r in runs])}
    for step, label in STEPS.items():
        series[step] = Series(label, times=[r[f"{step}_s"] for r in runs])
        series[f"{step}_ratio"] = Series(label, times=[r[f"{step}_s"] / r["memcpy_s"] for r in runs])
    return series


def cell(s: Series, unit: str = "") -> str:
    if unit == "ms":
        return f"{s.median * 1e3:.1f} [{s.min * 1e3:.1f}–{s.max * 1e3:.1f}]"
    return f"{s.median:.2f} [{s.min:.2f}–{s.max:.2f}]"


def report(args, now: List[dict], before: Optional[List[dict]], machine: Dict[str, str]) -> None:
    nbytes = now[0]["bytes"]
    lines = report_header("ConvergentMatrix file kernels against memcpy", SCRIPT, args,
                          f"One rank's part, {args.rows} x {args.cols} float32 ({nbytes / MiB:.0f} MiB); "
                          "one process per repeat" + (", alternating with the before binary." if before else "."))
    series = ratios(now)
    lines += ["## Time over a memcpy of the same bytes (1.00: as fast as the copy)", "",
              "| step | ms | / memcpy |", "|---|---:|---:|",
              f"| memcpy | {cell(series['memcpy'], 'ms')} | 1.00 |"]
    lines += [f"| {label} | {cell(series[step], 'ms')} | {cell(series[f'{step}_ratio'])} |"
              for step, label in STEPS.items()]
    lines.append("")
    if before:
        old = ratios(before)
        lines += ["## Before and after", "",
                  f"`{args.before_binary}` (before) and `{args.binary}` (now), one repeat each in turn. "
                  "\"now / before\": the step's time, paired by repeat (below 1: faster now).", "",
                  "| step | before / memcpy | now / memcpy | now / before |", "|---|---:|---:|---:|"]
        for step, label in STEPS.items():
            paired = Series(label, times=[n[f"{step}_s"] / b[f"{step}_s"] for n, b in zip(now, before)])
            lines.append(f"| {label} | {cell(old[f'{step}_ratio'])} | {cell(series[f'{step}_ratio'])} | "
                         f"{cell(paired)} |")
        same = all(n["sum0"] == b["sum0"] for n, b in zip(now, before))
        lines += ["", f"First part's checksum, repeat by repeat: {'the same' if same else 'DIFFERENT'} in both "
                  "builds.", ""]
    lines += ["Cells: median [min–max] over the repeats.", ""]
    lines += machine_lines(machine)
    out = args.out / f"{NAME}.md"
    out.write_text("\n".join(lines) + "\n")
    log(f"wrote {out}")


def plot(args, now: List[dict], before: Optional[List[dict]]) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    builds = [("now", ratios(now))] + ([("before", ratios(before))] if before else [])
    groups = [(label, {name: Series(name, times=series[f"{step}_ratio"].times) for name, series in builds})
              for step, label in STEPS.items()]
    grouped_bars(ax, groups, log_scale=False)
    ax.axhline(1.0, color="gray", linestyle="--", linewidth=1, label="memcpy")
    ax.set_ylabel("time / memcpy of the same bytes")
    ax.set_title(("SMOKE RUN — " if args.smoke else "") +
                 f"global-layout file kernels, median [min–max] of {args.repeats}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / f"{NAME}.png", dpi=120)
    log(f"wrote {args.out / NAME}.png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(ap, NAME, "unused (the kernels write no file)")
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY, help="matrix_kernels (default: build/cpp/bench)")
    ap.add_argument("--before-binary", type=Path, default=None,
                    help="matrix_kernels built against an earlier tree (a before/after table)")
    ap.add_argument("--rows", type=int, default=4096, help="local rows (default 4096)")
    ap.add_argument("--cols", type=int, default=8192, help="local columns (default 8192)")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    if args.smoke:
        args.rows = min(args.rows, 256)
        args.repeats = args.repeats or 2
    finish_common_args(ap, args)
    for binary in filter(None, (args.binary, args.before_binary)):
        if not binary.exists():
            sys.exit(f"{SCRIPT}: {binary} is missing: cmake --build build/cpp --target matrix_kernels")
    args.out.mkdir(parents=True, exist_ok=True)
    now: List[dict] = []
    before: List[dict] = []
    for repeat in range(args.repeats):
        log(f"repeat {repeat + 1} of {args.repeats}")
        if args.before_binary:
            before.append(one_repeat(args, args.before_binary))
        now.append(one_repeat(args, args.binary))
    machine = machine_description(args.out)
    report(args, now, before or None, machine)
    plot(args, now, before or None)


if __name__ == "__main__":
    main()
