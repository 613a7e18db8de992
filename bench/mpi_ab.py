#!/usr/bin/env python3
"""mpi.py's blocking ratios for two builds, job by job, taking turns.

bench/before_after.sh runs mpi.py once per build; on the 2-core VM its
ratios move between runs of one build by more than the 5 % a change is
judged by (bench/results/before_after/comparison.md, "before again").
Here every job of mpi.py (rank counts, faked nodes, L3 schemes) runs with
both builds' mpi_driver in each repeat, one right after the other (which
first alternates by repeat), so that both meet the machine in the same
state. Per job and build: the blocking per checkpoint of the MPI store
against the same rank's single-process store (mpi.py's figure: the median
rank and the worst rank), and after / before paired by repeat.

    .venv/bin/python bench/mpi_ab.py --before-binary OLD/build/bench/mpi_driver \
        --before-label 9d8341d --binary build/cpp/bench/mpi_driver --after-label HEAD
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from _common import Series, add_common_args, finish_common_args, log, machine_description, machine_lines, \
    parse_size, pyplot, report_header
from mpi import DEFAULT_BINARY, Driver, Job, analyse, jobs_to_run, parse_ranks, probe

NAME = "mpi_ab"
RATIOS = {"blocking_ratio": "MPI / single (median rank)", "blocking_ratio_worst": "MPI / single (worst rank)"}


def run_turns(args, drivers: Dict[str, Driver], jobs: List[Job]) -> Dict[str, Dict[Job, List[List[dict]]]]:
    results = {label: {job: [] for job in jobs} for label in drivers}
    labels = list(drivers)
    for repeat in range(args.repeats):
        order = labels if repeat % 2 == 0 else labels[::-1]
        first = "single" if repeat % 2 == 0 else "mpi"
        for job in jobs[repeat % len(jobs):] + jobs[:repeat % len(jobs)]:
            for label in order:
                started = time.perf_counter()
                _, rows, stderr = drivers[label].run(job, first)
                results[label][job].append(rows + [{"kind": "stderr", "text": stderr}])
                log(f"repeat {repeat + 1}/{args.repeats}: {job.label}, {label} ({time.perf_counter() - started:.1f} s)")
    return results


def report(args, figures, before: str, after: str, jobs: List[Job], machine) -> List[str]:
    number = lambda x: f"{x:.3f}"
    lines = report_header("mpi.py's blocking ratios of two builds, taking turns", "mpi_ab.py", args,
                          "Each repeat ran every job with both builds, one right after the other.")
    lines += machine_lines(machine)
    lines += [f"| job | ratio | {before} | {after} | {after} / {before}, paired by repeat | |",
              "|---|---|---:|---:|---:|---|"]
    within = slower = 0
    for job in jobs:
        for key, text in RATIOS.items():
            old, new = figures[before][job].get(key), figures[after][job].get(key)
            change = Series("paired", times=[a / b for a, b in zip(new.times, old.times)])
            if not change.times:
                continue
            verdict = "within 5 %" if abs(change.median - 1) <= 0.05 else \
                "lower by more than 5 %" if change.median < 1 else "higher by more than 5 %"
            within += verdict == "within 5 %"
            slower += verdict.startswith("higher")
            lines.append(f"| {job.label} | {text} | {old.cell(number)} | {new.cell(number)} | "
                         f"{change.cell(number)} | {verdict} |")
    total = len(jobs) * len(RATIOS)
    lines += ["", f"{within} of {total} ratios within 5 %, {slower} higher by more than 5 % (median of the "
              "paired ratios; lower is better).", ""]
    return lines


def plot(args, figures, before: str, after: str, jobs: List[Job]) -> None:
    """One bar per job and ratio: after / before paired by repeat, median with min–max."""
    plt = pyplot()
    names, medians, low, high = [], [], [], []
    for job in jobs:
        for key, text in RATIOS.items():
            old, new = figures[before][job].get(key), figures[after][job].get(key)
            change = Series("paired", times=[a / b for a, b in zip(new.times, old.times)])
            if change.times:
                names.append(f"{job.label}\n{text.split('(')[1].rstrip(')')}")
                medians.append(change.median)
                low.append(change.median - change.min)
                high.append(change.max - change.median)
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(names) + 1.5))
    ax.barh(range(len(names)), medians, xerr=[low, high], color="tab:blue", alpha=0.7)
    ax.axvline(1.0, color="black", linewidth=0.8)
    for edge in (0.95, 1.05):
        ax.axvline(edge, color="grey", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names, fontsize=7)
    ax.set_xlabel(f"MPI / single blocking, {after} / {before}, paired by repeat (median, min–max)")
    ax.set_title("mpi.py's ratios, two builds taking turns")
    fig.tight_layout()
    fig.savefig(args.out / f"{NAME}.png", dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY, help="this build's mpi_driver")
    ap.add_argument("--after-label", default="after")
    ap.add_argument("--before-binary", type=Path, required=True, help="the old build's mpi_driver")
    ap.add_argument("--before-label", default="before")
    ap.add_argument("--bytes", type=lambda t: parse_size(t, 32), default=32 * (1 << 20))
    ap.add_argument("--ranks", type=parse_ranks, default=[1, 2, 4, 8])
    ap.add_argument("--ranks-per-node", type=int, default=2)
    ap.add_argument("--schemes", default="partner,xor")
    ap.add_argument("--set-size", type=int, default=4)
    ap.add_argument("--checkpoints", type=int, default=8)
    ap.add_argument("--compute-seconds", type=float, default=0.05)
    ap.add_argument("--comm-iterations", type=int, default=200)
    add_common_args(ap, NAME, "target directory (default: a fresh directory under /tmp)")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    root = Path(tempfile.mkdtemp(prefix="resurgo-mpi-ab-", dir=args.dir))
    try:
        drivers = {args.before_label: Driver(args, args.before_binary.resolve(), root / "before"),
                   args.after_label: Driver(args, args.binary.resolve(), root / "after")}
        for driver in drivers.values():
            driver.root.mkdir()
        schemes, _ = probe(drivers[args.after_label], [s for s in args.schemes.split(",") if s])
        jobs = jobs_to_run(args, schemes)
        results = run_turns(args, drivers, jobs)
        warmup = 1 if args.checkpoints > 1 else 0
        figures = {label: {job: analyse(job, rows, warmup) for job, rows in by_job.items()}
                   for label, by_job in results.items()}
        lines = report(args, figures, args.before_label, args.after_label, jobs, machine_description(root))
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{NAME}.md").write_text("\n".join(lines) + "\n")
        plot(args, figures, args.before_label, args.after_label, jobs)
        log(f"wrote {args.out / (NAME + '.md')}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
