#!/usr/bin/env python3
"""ConvergentMatrix's update() on the application thread (issue 32 part 3):
the time update() takes per update, with the code before a change and
after it, run alternately in the same run on the same workload (bench/matrix.py's
convergent row: N = 16384, 16 symmetric updates of 655 x 655 per rank,
100 ms of simulated compute before each, so that the progress thread has
sent each update, and recycled its arrays, before the next is copied).

update() checks the indices and copies the update into the rank's queue.
Figures, per update call, median rank: the application thread's CPU time
in update() (CLOCK_THREAD_CPUTIME_ID around each call: what update() costs,
not counting waits for a core on a loaded machine) and its wall time
(MatrixStats::update_seconds). Each ratio after / before is taken per repeat
between the two runs of that repeat. Every run's matrix is checked exactly
(bench/matrix_workload.h). Both programs must report update_cpu_s
(bench/matrix_workload.h since issue 32 part 3).

    .venv/bin/python bench/matrix_update_copy.py --before-binary /tmp/before/matrix_driver
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    GiB,
    add_common_args,
    finish_common_args,
    fmt_time,
    grouped_bars,
    log,
    machine_description,
    machine_lines,
    plot_title,
    pyplot,
    report_header,
)
from matrix import DEFAULT_BINARY_DIR, ROOT, Job, Runner, fmt_ratio, series, usable_cores  # noqa: E402

SCRIPT = "matrix_update_copy.py"
NAME = "matrix_update_copy"
SIDES = ("before", "after")


FIGURES = {"cpu": ("update_cpu_s", "CPU time in update() per call"),
           "wall": ("stats_update_s", "wall time in update() per call")}


def per_update(run: dict, figure: str = "cpu") -> float:
    """The median rank's seconds in update() per update call."""
    return statistics.median(run[FIGURES[figure][0]]) / run["updates_per_rank"]


def measure(args, runners: Dict[str, Runner]) -> Dict[str, List[Optional[dict]]]:
    """Each repeat runs both sides, in an order that alternates."""
    runs: Dict[str, List[Optional[dict]]] = {side: [] for side in SIDES}
    for r in range(args.repeats):
        for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
            run, why, status = runners[side].run(Job("convergent", args.ranks, True))
            runs[side].append(run)
            if run is None:
                log(f"repeat {r + 1}/{args.repeats}: {side} {status}: {why}")
            else:
                log(f"repeat {r + 1}/{args.repeats}: {side}: update() {fmt_time(per_update(run))} CPU per call")
    return runs


def write_report(args, runs: Dict[str, List[Optional[dict]]], load_start, load_end, elapsed: float) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    machine = machine_description(ROOT)
    machine.pop("target directory", None)
    machine["load average (1, 5, 15 min) at the start"] = ", ".join(f"{x:.2f}" for x in load_start)
    machine["load average (1, 5, 15 min) at the end"] = ", ".join(f"{x:.2f}" for x in load_end)
    values = {(side, figure): [None if run is None else per_update(run, figure) for run in runs[side]]
              for side in SIDES for figure in FIGURES}
    ratio = {figure: series("", [a / b for a, b in zip(values[("after", figure)], values[("before", figure)])
                                 if a is not None and b]) for figure in FIGURES}
    failed = {side: sum(1 for run in runs[side] if run is None) for side in SIDES}
    lines = report_header("ConvergentMatrix: update() on the application thread, before and after", SCRIPT, args,
                          extra=f"{args.ranks} ranks, N = {args.size}, {args.updates_per_rank} updates per rank, "
                                f"{args.compute_ms:g} ms of simulated compute before each; the two programs "
                                "alternate within each repeat.")
    lines += machine_lines(machine)
    lines += [
        "## update() per call",
        "",
        f"before: `{args.before_binary}`; after: `{args.after_binary}`. Per update call, median rank: the "
        "application thread's CPU time in update() (checking the indices and copying the update into the "
        "queue; `CLOCK_THREAD_CPUTIME_ID` around each call) and its wall time (`MatrixStats::update_seconds`, "
        "which also counts waiting for a core); ratio: after / before of the two runs of one repeat, below 1 "
        "when the change made update() faster.",
        "",
        "| program | CPU time per call | wall time per call | runs failed (wrong matrix or error) |",
        "|---|---:|---:|---:|",
    ]
    for side in SIDES:
        cells = " | ".join(series("", values[(side, figure)]).cell() for figure in FIGURES)
        lines.append(f"| {side} | {cells} | {failed[side]} of {len(runs[side])} |")
    lines.append("| after / before | " + " | ".join(ratio[figure].cell(fmt_ratio) for figure in FIGURES) + " | |")
    notes = [f"The run took {elapsed:.0f} s."]
    if max(load_start[0], load_end[0]) > usable_cores():
        notes.append(f"The 1-minute load average ({load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end) "
                     f"exceeded the {usable_cores()} cores: the wall times include time the application thread "
                     "waited for a core inside update(); the CPU times do not.")
    lines += ["", "## Notes", ""] + [f"- {x}" for x in notes] + ["", f"Plot: `{NAME}.png`.", ""]
    md = args.out / f"{NAME}.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    groups = []
    for figure, (_, label) in FIGURES.items():
        entry = {}
        for side in SIDES:
            s = series(side, [v * 1e3 for v in values[(side, figure)] if v is not None])
            if s.times:
                entry[side] = s
        shown = fmt_ratio(ratio[figure].median) if ratio[figure].times else "—"
        groups.append((f"{label}\n(after / before {shown})", entry))
    grouped_bars(ax, groups, keys=list(SIDES), log_scale=False)
    ax.set_ylabel(f"update() per call, median rank, {args.ranks} ranks (ms)")
    ax.legend(fontsize=8)
    ax.set_title(plot_title("ConvergentMatrix update() per call", args), fontsize=9)
    fig.tight_layout()
    png = args.out / f"{NAME}.png"
    fig.savefig(png, dpi=100)
    log(f"wrote {png}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before-binary", type=Path, required=True, help="matrix_driver built before the change")
    ap.add_argument("--after-binary", type=Path, default=DEFAULT_BINARY_DIR / "matrix_driver",
                    help="matrix_driver after the change (default: build/cpp/bench/matrix_driver)")
    ap.add_argument("--ranks", type=int, default=2, help="ranks (default 2: one per core here)")
    add_common_args(ap, NAME, "unused")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    for binary in (args.before_binary, args.after_binary):
        if not binary.is_file():
            sys.exit(f"{SCRIPT}: {binary} not found")
    args.size = 2048 if args.smoke else 16384
    args.updates_per_rank = 4 if args.smoke else 16
    args.compute_ms = 10.0 if args.smoke else 100.0
    settings = SimpleNamespace(size=args.size, block=64, updates_per_rank=args.updates_per_rank, update_fraction=0.04,
                               compute_ms=args.compute_ms, seed=1, samples=16, progress="auto", max_in_flight_mib=64,
                               timeout=120.0, memory_margin=3 * GiB)
    runners = {side: Runner(settings, {"convergent": binary})
               for side, binary in zip(SIDES, (args.before_binary, args.after_binary))}
    load_start = os.getloadavg()
    started = time.perf_counter()
    runs = measure(args, runners)
    write_report(args, runs, load_start, os.getloadavg(), time.perf_counter() - started)


if __name__ == "__main__":
    main()
