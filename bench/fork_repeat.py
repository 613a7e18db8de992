#!/usr/bin/env python3
"""A store's later forks against its first, with and without the collapse of
the huge pages a forked writer split (issue 33, part 3; docs/config.md,
"Capture modes").

Runs build/cpp/bench/fork_repeat (bench/fork_repeat.cpp) once per (size,
collapse, repeat), in an order alternating off and on so that the machine's
other load falls on both alike. Each run forks --forks times (the first, then
the later ones): a float32 state in memory advised MADV_HUGEPAGE, written
whole by the application's steps while each child writes the version (no
compression, L2 only), then --interval seconds of steps before the next
checkpoint. Per size and collapse (off / on), median [min–max] over the
--repeats runs of:

  blocking          all of checkpoint(), wall time, and the CPU time of the
                    application thread in it (without the wait for the
                    child to be scheduled, milliseconds on a loaded machine;
                    the first also reads the mappings of the process, once
                    per protected set); the first fork of each run, and
                    every later fork of every run
  fork              its part from fork() until the child runs (the stats'
                    copy_seconds)
  later / first     per run: median of its later forks over its first
                    (target <= 1.2 for the blocking)
  huge at fork      the state's AnonHugePages when the first / a later fork
                    starts
  slowdown during   the application's mean step time while a child writes,
                    over its step time before the first fork
  slowdown between  the same over the --interval after each child (the
                    collapse pass runs then, when on)
  collapse CPU      CPU seconds of the collapse passes, per pass (on a
                    thread of the store, not the application's)

Writes bench/results/fork_repeat.md and .png (see --out).

    .venv/bin/python bench/fork_repeat.py                        # 2 and 4 GiB
    .venv/bin/python bench/fork_repeat.py --smoke --repeats 1 --sizes 64MiB --interval 0.5
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
import time
from pathlib import Path
from typing import Dict, List, Tuple

from _common import (GiB, Series, add_common_args, check_resources, finish_common_args, fmt_time, grouped_bars,
                     human, log, machine_description, machine_lines, parse_sizes, plot_title, pyplot,
                     report_header)

SCRIPT = "fork_repeat.py"
NAME = "fork_repeat"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BINARY = ROOT / "build" / "cpp" / "bench" / "fork_repeat"
MODES = ("off", "on")
TARGET_LATER_OVER_FIRST = 1.2


# The measures of a fork, each its first against its later ones: key in the
# driver's "fork" lines -> what the report calls it.
MEASURES = {
    "blocking_s": "blocking (wall)",
    "blocking_cpu_s": "blocking, CPU of the application thread",
    "fork_s": "fork() until the child runs (copy_seconds)",
}


class Measure:
    """One measure of the forks of one (size, collapse) over its runs."""

    def __init__(self) -> None:
        self.first = Series("first fork")
        self.later = Series("later forks")
        self.ratio = Series("later / first")  # per run: median of its later forks / its first

    def add_run(self, key: str, forks: List[dict]) -> None:
        first, later = forks[0][key], [f[key] for f in forks[1:]]
        self.first.times.append(first)
        self.later.times += later
        self.ratio.times.append(statistics.median(later) / first)


class Case:
    """The measures of one (size, collapse) over its runs."""

    def __init__(self, size: int, collapse: str) -> None:
        label = f"collapse {collapse}"
        self.size = size
        self.collapse = collapse
        self.measures = {key: Measure() for key in MEASURES}
        self.huge_at_first = Series(label)  # fraction of the state
        self.huge_at_later = Series(label)
        self.during_first = Series(label)
        self.during_later = Series(label)
        self.between = Series(label)
        self.collapse_cpu = Series(label)  # seconds per pass

    def add_run(self, lines: List[dict]) -> None:
        start = next(l["start"] for l in lines if "start" in l)
        forks = [l["fork"] for l in lines if "fork" in l]
        end = next(l["end"] for l in lines if "end" in l)
        base = start["baseline_step_s"]
        for key, measure in self.measures.items():
            measure.add_run(key, forks)
        first, later = forks[0], forks[1:]
        self.huge_at_first.times.append(first["huge_at_fork_bytes"] / start["bytes"])
        self.huge_at_later.times += [f["huge_at_fork_bytes"] / start["bytes"] for f in later]
        self.during_first.times.append(first["step_during_s"] / base)
        self.during_later.times += [f["step_during_s"] / base for f in later if f["steps_during"]]
        self.between.times += [f["step_between_s"] / base for f in forks if f["steps_between"]]
        if end["passes"]:
            self.collapse_cpu.times.append(end["collapse_cpu_s"] / end["passes"])


def run_driver(binary: Path, root: Path, size: int, collapse: str, args, index: int) -> List[dict]:
    work = root / f"run{index}"
    work.mkdir()
    cmd = [str(binary), "--dir", str(work), "--bytes", str(size), "--forks", str(args.forks),
           "--collapse", collapse, "--interval", str(args.interval)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if done.returncode != 0:
        sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed (status {done.returncode}): {done.stderr.strip()}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def run_all(args, binary: Path, root: Path) -> Dict[Tuple[int, str], Case]:
    cases = {(s, m): Case(s, m) for s in args.sizes for m in MODES}
    index = 0
    for r in range(args.repeats):
        for s in args.sizes:
            for m in (MODES if r % 2 == 0 else tuple(reversed(MODES))):
                index += 1
                t0 = time.perf_counter()
                cases[(s, m)].add_run(run_driver(binary, root, s, m, args, index))
                c = cases[(s, m)]
                blocking = c.measures["blocking_s"]
                log(f"repeat {r + 1}/{args.repeats}, {human(s)}, collapse {m}: first blocking "
                    f"{fmt_time(blocking.first.times[-1])}, later/first {blocking.ratio.times[-1]:.2f}, huge "
                    f"pages at later forks {fmt_percent(min(c.huge_at_later.times[-args.forks + 1:]))} "
                    f"({time.perf_counter() - t0:.1f} s)")
    return cases


# ------------------------------------------------------------------ report
def fmt_ratio(value: float) -> str:
    return f"{value:.2f}"


def fmt_percent(value: float) -> str:
    return f"{value * 100:.0f} %"


def sysfs(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return "unknown"


def size_section(size: int, cases: Dict[Tuple[int, str], Case]) -> List[str]:
    gib = size / GiB
    lines = [f"## State {human(size)}", "",
             "| measure | collapse | first fork | later forks | later / first (per run) | later forks, ms per GiB |",
             "|---|---|---|---|---|---|"]
    for key, name in MEASURES.items():
        for mode in MODES:
            m = cases[(size, mode)].measures[key]
            per_gib = Series("", times=[t * 1e3 / gib for t in m.later.times])
            lines.append(f"| {name} | {mode} | {m.first.cell()} | {m.later.cell()} | {m.ratio.cell(fmt_ratio)} "
                         f"| {per_gib.cell(fmt_ratio)} |")
    lines += ["", "| collapse | huge pages at the first fork | huge pages at later forks | slowdown while the "
              "first child writes | slowdown while later children write | slowdown between children "
              "| collapse CPU per pass |", "|---|---|---|---|---|---|---|"]
    for mode in MODES:
        c = cases[(size, mode)]
        lines.append(f"| {mode} | {c.huge_at_first.cell(fmt_percent)} | {c.huge_at_later.cell(fmt_percent)} "
                     f"| {c.during_first.cell(fmt_ratio)} | {c.during_later.cell(fmt_ratio)} "
                     f"| {c.between.cell(fmt_ratio)} | {c.collapse_cpu.cell(lambda v: f'{v:.2f} s')} |")
    return lines + [""]


def targets_section(args, cases: Dict[Tuple[int, str], Case]) -> List[str]:
    lines = ["## Target", "",
             f"Later forks ≤ {TARGET_LATER_OVER_FIRST}× the first fork's blocking (issue 33), judged on the "
             "median of the per-run ratios, wall and CPU.", "",
             "| state | collapse | blocking (wall): later / first | blocking (CPU): later / first | target |",
             "|---|---|---|---|---|"]
    for s in args.sizes:
        for mode in MODES:
            wall = cases[(s, mode)].measures["blocking_s"].ratio.median
            cpu = cases[(s, mode)].measures["blocking_cpu_s"].ratio.median
            met = max(wall, cpu) <= TARGET_LATER_OVER_FIRST
            lines.append(f"| {human(s)} | {mode} | {wall:.2f} | {cpu:.2f} | ≤ {TARGET_LATER_OVER_FIRST}: "
                         f"{'met' if met else '**missed**'} |")
    return lines + [""]


def write_plot(args, cases: Dict[Tuple[int, str], Case], png: Path) -> None:
    plt = pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8))
    groups = [(f"{human(s)}, collapse {m}", {"first": cases[(s, m)].measures["blocking_s"].first,
                                             "later": cases[(s, m)].measures["blocking_s"].later})
              for s in args.sizes for m in MODES]
    grouped_bars(top, groups)
    top.set_ylabel("checkpoint() blocking (s)")
    top.legend()
    ratios = []
    for s in args.sizes:
        for key, short in (("blocking_s", "wall"), ("blocking_cpu_s", "CPU")):
            series = {}
            for m in MODES:
                series[m] = cases[(s, m)].measures[key].ratio
                series[m].label = f"collapse {m}"
            ratios.append((f"{human(s)}, {short}", series))
    grouped_bars(bottom, ratios, log_scale=False)
    bottom.axhline(TARGET_LATER_OVER_FIRST, color="red", linestyle="--", label=f"target ≤ {TARGET_LATER_OVER_FIRST}")
    bottom.set_ylabel("later / first blocking (per run)")
    bottom.legend()
    fig.suptitle(plot_title("Later forks against the first, with and without the huge-page collapse", args))
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def write_report(args, binary: Path, root: Path, cases: Dict[Tuple[int, str], Case], elapsed: float) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    machine = machine_description(root)
    machine.pop("NumPy", None)
    machine["transparent huge pages"] = (f"enabled {sysfs('/sys/kernel/mm/transparent_hugepage/enabled')}, defrag "
                                         f"{sysfs('/sys/kernel/mm/transparent_hugepage/defrag')} (the state is "
                                         "advised MADV_HUGEPAGE)")
    machine["load average at the end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    machine["program"] = str(binary)
    lines = report_header("Later forks against the first, with and without the huge-page collapse", SCRIPT, args,
                          f"Each repeat is one process of {args.forks} forks (1 first, {args.forks - 1} later; "
                          f"the later forks of all runs pooled), {args.interval:g} s of application steps between "
                          f"a child's exit and the next checkpoint; {elapsed:.0f} s in all.")
    lines += machine_lines(machine)
    lines += ["Ratios are against a baseline of the same run: the first fork of the same process, and the step time "
              "of the same process before its first fork. *Slowdown* is the application's mean step time (a "
              "memory-bound pass negating a tenth of the state) over that baseline.", ""]
    for s in args.sizes:
        lines += size_section(s, cases)
    lines += targets_section(args, cases)
    lines += [f"![first and later forks, later/first]({NAME}.png)", ""]
    (args.out / f"{NAME}.md").write_text("\n".join(lines))
    write_plot(args, cases, args.out / f"{NAME}.png")
    log(f"wrote {args.out / (NAME + '.md')} and .png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY,
                    help="the fork_repeat program (default: build/cpp/bench/fork_repeat)")
    ap.add_argument("--sizes", type=parse_sizes, default=[2 * GiB, 4 * GiB], help="state sizes (default 2GiB,4GiB)")
    ap.add_argument("--forks", type=int, default=3, help="forks per run, the first included (default 3)")
    ap.add_argument("--interval", type=float, default=4.0,
                    help="seconds of application steps between a child's exit and the next checkpoint (default 4)")
    add_common_args(ap, NAME, "target directory (node-local disk, not tmpfs); default: a fresh directory under /tmp")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    if args.forks < 2:
        ap.error("--forks must be at least 2 (a first fork and a later one)")
    binary = args.binary if args.binary.is_absolute() else Path.cwd() / args.binary
    if not binary.is_file():
        sys.exit(f"{SCRIPT}: {args.binary} not found. Build it first: cmake --build build/cpp --target fork_repeat")
    created = args.dir is None
    root = Path(tempfile.mkdtemp(prefix="resurgo-bench-", dir="/tmp")) if created else args.dir
    root.mkdir(parents=True, exist_ok=True)
    # The state and the pages it duplicates while a child writes; one version on disk.
    check_resources(SCRIPT, root, human(max(args.sizes)) + " of state", 2.2 * max(args.sizes),
                    2.2 * max(args.sizes))
    try:
        started = time.perf_counter()
        cases = run_all(args, binary, root)
        write_report(args, binary, root, cases, time.perf_counter() - started)
    finally:
        if created and not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
