#!/usr/bin/env python3
"""ConvergentMatrix's global-layout files (issue 32 part 3): write_global()
and read_global() against the floor of the same bytes, measured in the same
jobs.

One mpirun job per (rank count, order) runs build/cpp/bench/matrix_io_driver:
a float32 N x N matrix (--size, default 8192: 256 MiB), --block blocks, the
most nearly square grid. Each repeat, the floor and the global file in an
order that alternates:
  floor write   every rank pwrite()s its local part as one piece of one file
                (the same bytes, no layout, no checksum), then fsync();
  write         write_global(): each rank's own lines or its slab (after the
                exchange with the owners) in 2 MiB chunks of MPI_File_write_at,
                part checksums, MPI_File_sync,
                rename;
  floor read    every rank pread()s its piece back;
  read          read_global(): header, chunks of MPI_File_read_at, part
                checksums, the exchange back to the owners;
each from a barrier to the last rank's end; before the reads both files'
pages are dropped from the page cache (posix_fadvise, after fsync). For
write and read, also the memory each rank made resident beyond what it
held at the step's start (the largest over the ranks).

Figures: the throughput of each (bytes / seconds) and, per repeat, the
floor's time over the global file's (1.0: as fast as the floor; the issue's
target is >= 0.8), median [min-max] of --repeats (>= 5).

    .venv/bin/python bench/matrix_io.py                       # 8192, 2 and 4 ranks, both orders, 5 repeats
    .venv/bin/python bench/matrix_io.py --smoke               # seconds
    .venv/bin/python bench/matrix_io.py --before-binary OLD   # and an earlier driver's ratios, job by job
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

from _common import (MiB, RESULTS, Series, add_common_args, finish_common_args, log, machine_description,
                     machine_lines, pyplot, report_header)

SCRIPT = "matrix_io.py"
NAME = "matrix_io"
DEFAULT_BINARY = Path(__file__).resolve().parent.parent / "build" / "cpp" / "bench" / "matrix_io_driver"
STEPS = ("floor_write", "write", "floor_read", "read")


def run_job(args, binary: Path, ranks: int, order: str, directory: Path) -> List[dict]:
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks)]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    cmd += [str(binary), "--rows", str(args.size), "--cols", str(args.size), "--block", str(args.block),
            "--order", order, "--repeats", str(args.repeats), "--dir", str(directory)]
    log(" ".join(cmd))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode != 0:
        sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-600:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"kind": "run"')]


def summarize(runs: List[dict]) -> Dict[str, Series]:
    """Seconds of each step, and the floor's time over the global file's per repeat."""
    series = {step: Series(step, times=[r[f"{step}_s"] for r in runs]) for step in STEPS}
    series["write_ratio"] = Series("write / floor", times=[r["floor_write_s"] / r["write_s"] for r in runs])
    series["read_ratio"] = Series("read / floor", times=[r["floor_read_s"] / r["read_s"] for r in runs])
    series["read_vs_write_floor"] = Series("read / write floor",
                                           times=[r["floor_write_s"] / r["read_s"] for r in runs])
    for step in ("write", "read"):
        series[f"{step}_extra"] = Series(f"{step} extra MiB", times=[r[f"{step}_extra_bytes"] / MiB for r in runs])
    return series


def throughput(nbytes: int, s: Series) -> str:
    rate = lambda t: f"{nbytes / t / MiB:.0f}"  # noqa: E731
    return f"{rate(s.median)} [{rate(s.max)}–{rate(s.min)}]"


def ratio(s: Series) -> str:
    return f"{s.median:.2f} [{s.min:.2f}–{s.max:.2f}]"


def before_lines(args, results: Dict[tuple, Dict[str, Series]],
                 before: Dict[tuple, Dict[str, Series]]) -> List[str]:
    """The same table's ratios for --before-binary, its jobs alternating with the current one's."""
    if not before:
        return []
    lines = ["## Before and after", "",
             f"The ratios of `{args.before_binary}` (before), its job for each row run right before the current "
             "binary's, so that both met the same machine:", "",
             "| ranks | order | write / floor, before | write / floor, now | read / floor, before | read / floor, now |",
             "|---|---|---|---|---|---|"]
    for (ranks, order), old in before.items():
        new = results[(ranks, order)]
        lines.append(f"| {ranks} | {order}-major | {ratio(old['write_ratio'])} | {ratio(new['write_ratio'])} | "
                     f"{ratio(old['read_ratio'])} | {ratio(new['read_ratio'])} |")
    return lines + [""]


def mib(s: Series) -> str:
    if s.min < 0:  # the driver's -1: some rank could not reset the kernel's peak (clear_refs)
        return "not measured"
    return f"{s.median:.1f} [{s.min:.1f}–{s.max:.1f}]"


def memory_lines(results: Dict[tuple, Dict[str, Series]], before: Dict[tuple, Dict[str, Series]],
                 nbytes: int) -> List[str]:
    """What the global steps made resident beyond what each rank held, against the rank's part."""
    columns = ["write_global", "read_global"] + (["write_global, before", "read_global, before"] if before else [])
    lines = ["## Memory", "",
             "The most any rank's resident memory grew during the step above what it held at its start (MiB; the "
             "kernel's peak reset first, /proc/self/clear_refs), against the rank's part of the matrix:", "",
             "| ranks | order | part per rank | " + " | ".join(columns) + " |",
             "|---|---|---|" + "---|" * len(columns)]
    for (ranks, order), s in results.items():
        cells = [mib(s["write_extra"]), mib(s["read_extra"])]
        if before:
            cells += [mib(before[(ranks, order)]["write_extra"]), mib(before[(ranks, order)]["read_extra"])]
        lines.append(f"| {ranks} | {order}-major | {nbytes / ranks / MiB:.0f} | " + " | ".join(cells) + " |")
    return lines + [""]


def report(args, results: Dict[tuple, Dict[str, Series]], before: Dict[tuple, Dict[str, Series]], nbytes: int,
           machine: Dict[str, str]) -> None:
    lines = report_header("ConvergentMatrix global-layout files against the write+fsync floor", SCRIPT, args,
                          f"float32 {args.size} x {args.size} ({nbytes / MiB:.0f} MiB), {args.block} x {args.block} "
                          "blocks, the most nearly square grid; one `mpirun --oversubscribe --bind-to none` job per "
                          "row.")
    lines += ["## Throughput (MiB/s) and ratios against the floor of the same bytes", "",
              "Ratios are the floor's time over the global file's in the same repeat (1.00: as fast as the "
              "floor; target >= 0.80). The write floor: each rank pwrite()s its part as one piece of one file, "
              "then fsync(); the read floor: each rank pread()s it back after the page cache dropped it.", "",
              "| ranks | order | floor write | write_global | write / floor | floor read | read_global | "
              "read / read floor | read / write floor |",
              "|---|---|---|---|---|---|---|---|---|"]
    for (ranks, order), s in results.items():
        lines.append(f"| {ranks} | {order}-major | {throughput(nbytes, s['floor_write'])} | "
                     f"{throughput(nbytes, s['write'])} | {ratio(s['write_ratio'])} | "
                     f"{throughput(nbytes, s['floor_read'])} | {throughput(nbytes, s['read'])} | "
                     f"{ratio(s['read_ratio'])} | {ratio(s['read_vs_write_floor'])} |")
    lines += ["", "Throughput cells: median [min–max] over the repeats (the max from the slowest repeat). "
              "The floors share the disk and the cores with whatever else runs: figures to quote come from a run "
              "on a quiet machine (see the load average below).", ""]
    lines += before_lines(args, results, before)
    lines += memory_lines(results, before, nbytes)
    lines += machine_lines(machine)
    out = args.out / f"{NAME}.md"
    out.write_text("\n".join(lines) + "\n")
    log(f"wrote {out}")


def plot(args, results: Dict[tuple, Dict[str, Series]]) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [f"{ranks} ranks\n{order}-major" for ranks, order in results]
    for offset, key, name in ((-0.2, "write_ratio", "write_global / write floor"),
                              (0.2, "read_ratio", "read_global / read floor")):
        values = [s[key] for s in results.values()]
        xs = [i + offset for i in range(len(values))]
        ax.bar(xs, [v.median for v in values], width=0.4, label=name,
               yerr=[[v.median - v.min for v in values], [v.max - v.median for v in values]], capsize=3)
    ax.axhline(0.8, color="gray", linestyle="--", linewidth=1, label="target 0.8")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylabel("floor time / global-file time")
    ax.set_title(("SMOKE RUN — " if args.smoke else "") +
                 f"global-layout files vs the floor, median [min–max] of {args.repeats}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / f"{NAME}.png", dpi=120)
    log(f"wrote {args.out / NAME}.png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(ap, NAME, "where the files go (default: a new directory under build/)")
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY, help="matrix_io_driver (default: build/cpp/bench)")
    ap.add_argument("--size", type=int, default=8192, help="N of the N x N float32 matrix (default 8192: 256 MiB)")
    ap.add_argument("--block", type=int, default=64, help="block size (default 64)")
    ap.add_argument("--ranks", default="2,4", help="rank counts (default 2,4)")
    ap.add_argument("--orders", default="cols,rows", help="file orders (default cols,rows)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds one mpirun job may take (default 300)")
    ap.add_argument("--before-binary", type=Path, default=None,
                    help="an earlier matrix_io_driver, run before the current one for each row (a before/after table)")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    if args.smoke:
        args.size = min(args.size, 1024)
        args.repeats = args.repeats or 2
    finish_common_args(ap, args)
    if not args.binary.exists():
        sys.exit(f"{SCRIPT}: {args.binary} is missing: cmake --build build/cpp --target matrix_io_driver")
    if not shutil.which("mpirun"):
        sys.exit(f"{SCRIPT}: mpirun not found; install Open MPI (Debian: openmpi-bin libopenmpi-dev)")
    args.out.mkdir(parents=True, exist_ok=True)
    root = args.dir or Path(__file__).resolve().parent.parent / "build"
    root.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="matrix-io-", dir=root))
    results: Dict[tuple, Dict[str, Series]] = {}
    before: Dict[tuple, Dict[str, Series]] = {}
    load_before = os.getloadavg()[0]
    try:
        for ranks in [int(r) for r in args.ranks.split(",")]:
            for order in args.orders.split(","):
                if args.before_binary:
                    before[(ranks, order)] = summarize(run_job(args, args.before_binary, ranks, order, directory))
                results[(ranks, order)] = summarize(run_job(args, args.binary, ranks, order, directory))
        machine = machine_description(directory)
        # A shared machine: the other work on it is part of what was measured.
        machine["load average (1 min) before / after"] = f"{load_before:.1f} / {os.getloadavg()[0]:.1f}"
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    nbytes = args.size * args.size * 4
    report(args, results, before, nbytes, machine)
    plot(args, results)


if __name__ == "__main__":
    main()
