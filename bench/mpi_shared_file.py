#!/usr/bin/env python3
"""One file per version on L4 (issue 31, part 4): persistent.layout = shared
against per-rank files, for the time until a version is durable for the job
(checkpoint + wait(v, L4)) and the time of a fresh store's restart(), on 1,
2 and 4 ranks (oversubscribed), with a floor measured in the same run: the
same bytes written + fsynced (and read back) by a plain program, one file
per rank.

Runs build/cpp/bench/mpi_shared_file_driver under mpirun, one job per
(repeat, rank count, case); within a repeat the three cases of a rank count
run back to back in an order that rotates from repeat to repeat, and each
ratio is taken within its repeat before the median is. Restart reads files
just written (the page cache holds them): it measures the layout's reading
path, not the disk.

Writes bench/results/mpi_shared_file.md and .png (see --out).

    .venv/bin/python bench/mpi_shared_file.py                      # 64 MiB per rank, 5 repeats
    .venv/bin/python bench/mpi_shared_file.py --smoke --repeats 1 --bytes 4MiB
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    MiB,
    add_common_args,
    finish_common_args,
    human,
    log,
    machine_description,
    machine_lines,
    parse_size,
    pyplot,
    report_header,
)

SCRIPT = "mpi_shared_file.py"
NAME = "mpi_shared_file"
ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "build" / "cpp" / "bench" / "mpi_shared_file_driver"
CASES = ["floor", "per-rank", "shared"]
MEASURES = ["write_s", "restart_s"]


def run_case(target: Path, ranks: int, case: str, nbytes: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"{case}-", dir=target))
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += [str(BINARY), "--dir", str(work), "--case", case, "--bytes", str(nbytes)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    shutil.rmtree(work, ignore_errors=True)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or len(rows) != 1 or not rows[0]["bit_for_bit"]:
        sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return rows[0]


def measure(args) -> Dict[Tuple[int, str], List[dict]]:
    results: Dict[Tuple[int, str], List[dict]] = {}
    for repeat in range(args.repeats):
        for ranks in args.ranks:
            order = CASES[repeat % len(CASES):] + CASES[:repeat % len(CASES)]
            for case in order:
                row = run_case(args.dir, ranks, case, args.bytes)
                results.setdefault((ranks, case), []).append(row)
                log(f"repeat {repeat + 1}/{args.repeats}, {ranks} ranks, {case}: write {row['write_s']:.4f} s, "
                    f"restart {row['restart_s']:.4f} s")
    return results


def spread(values: List[float], digits: str = ".3g") -> str:
    return f"{statistics.median(values):{digits}} [{min(values):{digits}}–{max(values):{digits}}]"


def ratios(results, ranks: int, case: str, over: str, measure_name: str) -> List[float]:
    return [a[measure_name] / b[measure_name] for a, b in zip(results[(ranks, case)], results[(ranks, over)])]


def report(args, results) -> List[str]:
    lines = report_header("One file per version on L4 against per-rank files", SCRIPT, args,
                          extra=f"{human(args.bytes)} per rank; one `mpirun` job per (repeat, rank count, case), "
                                f"the cases of a rank count interleaved in a rotating order.")
    lines += ["## Time until the version is durable for the job (checkpoint + wait(v, L4))", "",
              "| ranks | floor (s) | per-rank (s) | shared (s) | per-rank / floor | shared / floor | "
              "shared / per-rank |", "|---|---|---|---|---|---|---|"]
    for ranks in args.ranks:
        cells = [spread([r["write_s"] for r in results[(ranks, case)]]) for case in CASES]
        cells += [spread(ratios(results, ranks, "per-rank", "floor", "write_s")),
                  spread(ratios(results, ranks, "shared", "floor", "write_s")),
                  spread(ratios(results, ranks, "shared", "per-rank", "write_s"))]
        lines.append(f"| {ranks} | " + " | ".join(cells) + " |")
    lines += ["", "## Restart of a fresh store (files in the page cache)", "",
              "| ranks | floor read (s) | per-rank (s) | shared (s) | shared / per-rank |", "|---|---|---|---|---|"]
    for ranks in args.ranks:
        cells = [spread([r["restart_s"] for r in results[(ranks, case)]]) for case in CASES]
        cells.append(spread(ratios(results, ranks, "shared", "per-rank", "restart_s")))
        lines.append(f"| {ranks} | " + " | ".join(cells) + " |")
    lines += ["", "Each cell: median [min–max] over the repeats; a ratio is taken within each repeat, then its "
              "median. The floor writes each rank's bytes to a file of its own with write() and fsync() and syncs "
              "the directory; it reads them back with read(). The shared layout writes each rank's container "
              "first as scratch (renamed into place, not synced), then the store's job thread, which runs ten "
              "nice steps below the application, copies it into the version's shared file at its offset and "
              "fdatasyncs it: its figure includes that copy, which on a loaded machine waits for a core.", ""]
    return lines + machine_lines(machine_description(args.dir))


def plot(args, results, path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    width = 0.25
    for axis, measure_name, title in zip(axes, MEASURES, ["durable on L4 (s)", "restart (s)"]):
        for index, case in enumerate(CASES):
            xs = [position + (index - 1) * width for position in range(len(args.ranks))]
            medians = [statistics.median(r[measure_name] for r in results[(ranks, case)]) for ranks in args.ranks]
            axis.bar(xs, medians, width, label=case)
        axis.set_xticks(range(len(args.ranks)), [f"{ranks} ranks" for ranks in args.ranks])
        axis.set_title(title)
    axes[0].legend()
    fig.suptitle(f"One file per version vs per-rank files, {human(args.bytes)} per rank (median)")
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, NAME, "where the runs write (default: a temporary directory under build/)")
    ap.add_argument("--bytes", type=parse_size, default=64 * MiB, help="state per rank (default 64MiB)")
    ap.add_argument("--ranks", type=lambda text: [int(n) for n in text.split(",")], default=[1, 2, 4],
                    help="rank counts (default 1,2,4)")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    if not BINARY.exists():
        sys.exit(f"{SCRIPT}: {BINARY} not found; build it: cmake --build build/cpp --target mpi_shared_file_driver")
    if not shutil.which("mpirun"):
        sys.exit(f"{SCRIPT}: mpirun not found; install Open MPI or MPICH")
    made = args.dir is None
    args.dir = Path(tempfile.mkdtemp(prefix="mpi-shared-", dir=ROOT / "build")) if made else args.dir
    args.dir.mkdir(parents=True, exist_ok=True)
    try:
        results = measure(args)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{NAME}.md").write_text("\n".join(report(args, results)))
        plot(args, results, args.out / f"{NAME}.png")
        log(f"wrote {args.out / (NAME + '.md')} and .png")
    finally:
        if made and not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
