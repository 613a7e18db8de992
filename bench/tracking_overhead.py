#!/usr/bin/env python3
"""What dirty-page tracking costs the application (src/track/, docs/tracking.md).

Runs build/cpp/bench/track_overhead (bench/track_overhead.cpp) once per
(repeat, case, method), methods in round-robin order within each repeat, so
that noise hits every method alike. For each case and method it reports:

- the tracking cost per first write: the time of the loop writing one byte
  into each chosen page, per page written, minus the same loop's time without
  a tracker (`none`) in the same repeat;
- the collect time (read the written pages + re-arm) per MiB of region, and
  its ratio to one read of the whole region measured by the `none` run.

Issue target: uffd's cost per first write <= 1/3 of mprotect's. Issue 8
quoted 1.2 µs against 4.7 µs per page, measured on the 2-core development
machine by no committed script; the Appicpr slides give no such figures.
Benchmarks are never timed tests; see bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    MiB,
    Series,
    finish_common_args,
    grouped_bars,
    log,
    machine_description,
    machine_lines,
    mem_available,
    pyplot,
    report_header,
)

SCRIPT = "tracking_overhead.py"
NAME = "tracking_overhead"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BINARY = ROOT / "build" / "cpp" / "bench" / "track_overhead"
METHODS = ["uffd", "soft-dirty", "mprotect", "hash"]
FLOOR = "none"
# (fraction of pages written per interval, pattern)
CASES: List[Tuple[float, str]] = [(1.0, "scattered"), (0.1, "scattered"), (0.01, "scattered"),
                                  (0.1, "contiguous")]
TARGET = 1 / 3  # uffd / mprotect cost per first write
UNAVAILABLE = 3  # track_overhead's exit status for a method this machine lacks


def case_name(case: Tuple[float, str]) -> str:
    fraction, pattern = case
    return f"{fraction * 100:g}% {pattern}"


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} µs"


def fmt_ratio(value: float) -> str:
    return f"{value:.3g}"


def run_binary(binary: Path, method: str, mib: int, case: Tuple[float, str]) -> subprocess.CompletedProcess:
    fraction, pattern = case
    cmd = [str(binary), "--method", method, "--mib", str(mib), "--fraction", repr(fraction),
           "--pattern", pattern, "--repeats", "1"]
    return subprocess.run(cmd, capture_output=True, text=True)


def measure(binary: Path, method: str, mib: int, case: Tuple[float, str]) -> dict:
    done = run_binary(binary, method, mib, case)
    if done.returncode != 0:
        sys.exit(f"{SCRIPT}: track_overhead --method {method} ({case_name(case)}) failed with status "
                 f"{done.returncode}:\n{done.stderr.strip()}")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if len(rows) != 1 or rows[0]["method"] != method:
        sys.exit(f"{SCRIPT}: unexpected output of track_overhead --method {method}:\n{done.stdout}")
    return rows[0]


def available_methods(binary: Path) -> Tuple[List[str], List[str]]:
    """The methods this machine offers (a 1 MiB probe each), and notes on
    those skipped."""
    methods, notes = [], []
    for method in METHODS:
        done = run_binary(binary, method, 1, (1.0, "scattered"))
        if done.returncode == UNAVAILABLE and "unavailable" in done.stderr:
            reason = done.stderr.strip().splitlines()[-1]
            notes.append(f"`{method}` skipped: {reason}")
            log(f"{method} skipped: {reason}")
        elif done.returncode != 0:
            sys.exit(f"{SCRIPT}: the probe of {method} failed with status {done.returncode}:\n"
                     f"{done.stderr.strip()}")
        else:
            methods.append(method)
    return methods, notes


def sysfs(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY,
                    help="the track_overhead program (default: build/cpp/bench/track_overhead)")
    # 64 MiB: the mprotect tracker watches at most half of vm.max_map_count
    # pages (128 MiB of 4 KiB pages by default; docs/tracking.md).
    ap.add_argument("--mib", type=int, default=64, help="region size in MiB (default 64)")
    ap.add_argument("--repeats", type=int, default=5, help="repeats per measure (>= 5; default 5)")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"where {NAME}.md/.png go (default: bench/results; with --smoke: "
                         "build/bench-smoke)")
    ap.add_argument("--smoke", action="store_true",
                    help="check that the script runs: allows --repeats < 5 and writes to "
                         "build/bench-smoke unless --out is given; the report says it is no result")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    if args.mib < 1:
        ap.error("--mib must be at least 1")
    binary = args.binary if args.binary.is_absolute() else Path.cwd() / args.binary
    if not binary.is_file():
        sys.exit(f"{SCRIPT}: {args.binary} not found. Build it first:  make build\n"
                 "(or: cmake --build build/cpp --target track_overhead), or name it with --binary")
    avail = mem_available()
    if avail is not None and 2 * args.mib * MiB > avail:
        sys.exit(f"{SCRIPT}: --mib {args.mib} needs about {2 * args.mib} MiB of memory; "
                 f"{avail // MiB} MiB is available")

    methods, notes = available_methods(binary)
    if not methods:
        sys.exit(f"{SCRIPT}: no tracking method is available here")
    runs = [FLOOR] + methods
    # results[case][method] = one row per repeat
    results: Dict[Tuple[float, str], Dict[str, List[dict]]] = {c: {m: [] for m in runs} for c in CASES}
    started = time.perf_counter()
    for r in range(args.repeats):
        for case in CASES:
            # Round robin, starting one method later each repeat: no method is
            # always first after the previous case's runs.
            order = runs[r % len(runs):] + runs[:r % len(runs)]
            for method in order:
                results[case][method].append(measure(binary, method, args.mib, case))
            floor = results[case][FLOOR][-1]
            log(f"repeat {r + 1}/{args.repeats}, {case_name(case)}: " + ", ".join(
                f"{m} {fmt_us(results[case][m][-1]['write_seconds'] / floor['pages_written'])}/page"
                for m in runs))
    elapsed = time.perf_counter() - started

    tables = analyse(results, methods)
    write_report(args, binary, methods, tables, notes, elapsed)


def analyse(results, methods: List[str]) -> dict:
    """Series per case: cost per first write, write loop / floor, collect per
    MiB, collect / read floor, and uffd / mprotect."""
    out = {}
    for case in CASES:
        floor_rows = results[case][FLOOR]
        floor_write = Series("floor: write loop, no tracker (per page)", "floor")
        floor_read = Series("floor: one read of the region (per MiB)", "floor")
        for row in floor_rows:
            floor_write.times.append(row["write_seconds"] / row["pages_written"])
            floor_read.times.append(row["read_seconds"] / row["mib"])
        cost, slowdown, collect, collect_ratio, written = {}, {}, {}, {}, {}
        for m in methods:
            cost[m] = Series(m, "cost")
            slowdown[m] = Series(m, "slowdown")
            collect[m] = Series(m, "collect")
            collect_ratio[m] = Series(m, "collect")
            for row, base in zip(results[case][m], floor_rows):
                pages = row["pages_written"]
                assert pages == base["pages_written"] and row["exact"] is True
                cost[m].times.append(row["write_seconds"] / pages - base["write_seconds"] / pages)
                slowdown[m].times.append(row["write_seconds"] / base["write_seconds"])
                collect[m].times.append(row["collect_seconds"] / row["mib"])
                collect_ratio[m].times.append(row["collect_seconds"] / base["read_seconds"])
            written[m] = results[case][m][0]["pages_written"]
        ratio = None
        if "uffd" in methods and "mprotect" in methods:
            ratio = Series("uffd / mprotect cost per first write", "ratio")
            ratio.times = [u / p if p > 0 else float("inf")
                           for u, p in zip(cost["uffd"].times, cost["mprotect"].times)]
        out[case] = dict(floor_write=floor_write, floor_read=floor_read, cost=cost, slowdown=slowdown,
                         collect=collect, collect_ratio=collect_ratio, ratio=ratio,
                         pages=floor_rows[0]["pages_written"], region=floor_rows[0]["region_pages"])
    return out


def write_report(args, binary: Path, methods: List[str], tables: dict, notes: List[str],
                 elapsed: float) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    machine = machine_description(args.out)
    machine.pop("target directory", None)  # nothing is written to disk
    machine.pop("NumPy", None)
    machine["page size"] = f"{os.sysconf('SC_PAGE_SIZE')} B"
    machine["transparent huge pages"] = (sysfs("/sys/kernel/mm/transparent_hugepage/enabled")
                                         + " (off for the measured region: MADV_NOHUGEPAGE)")
    machine["vm.unprivileged_userfaultfd"] = sysfs("/proc/sys/vm/unprivileged_userfaultfd")
    machine["program"] = f"{binary} ({_build_type(binary)})"
    machine["machine"] = platform.machine()

    lines = report_header("Dirty-page tracking: what it costs the application", SCRIPT, args,
                          extra=f"Region {args.mib} MiB; one process per (repeat, case, method), "
                                "methods in round-robin order within each repeat.")
    lines += machine_lines(machine)
    lines += [
        "## What is measured",
        "",
        f"`bench/track_overhead.cpp`, once per (repeat, case, method): {args.mib} MiB of anonymous "
        "private memory, transparent huge pages off for it (`MADV_NOHUGEPAGE`: the per-page costs are "
        "what is measured; a huge page would take one fault for 512 pages), prefaulted by `memset`, "
        "watched as one region and collected once (that arms tracking). Then it times (a) the loop "
        "that changes one byte in each chosen page, in ascending address order: the first write of "
        "the interval to each page, and (b) one `collect(id, 1)`: read the written pages and re-arm. "
        "Scattered cases pick the pages with a fixed-seed shuffle; the contiguous case takes the first "
        "pages. Each method's own tracker is used (no fallback to hash), and every collect is checked "
        "to return exactly the written pages, then nothing at the collect after, or the run stops.",
        "",
        "Floors, measured by the `none` run of the same repeat and case: the same write loop without "
        "a tracker, and one read of the whole region (8-byte words).",
        "",
        "- **cost per first write** = (write loop with the tracker − write loop without) / pages written;",
        "- **write loop / floor** = the write loop with the tracker / without;",
        "- **collect per MiB** = collect time / region MiB; **collect / read** = collect time / one "
        "read of the region.",
        "",
    ]

    lines += ["## Tracking cost per first write", "",
              "| case | pages written | floor (no tracker, per page) | "
              + " | ".join(f"{m}: cost per first write | {m}: write loop / floor" for m in methods) + " |",
              "|---|---:|---:|" + "---:|---:|" * len(methods)]
    for case, t in tables.items():
        cells = [f"{t['cost'][m].cell(fmt_us)} | {t['slowdown'][m].cell(fmt_ratio)}" for m in methods]
        lines.append(f"| {case_name(case)} | {t['pages']} of {t['region']} | "
                     f"{t['floor_write'].cell(fmt_us)} | " + " | ".join(cells) + " |")
    lines.append("")

    lines += ["## Collect (read + re-arm)", "",
              "| case | floor: read of the region, per MiB | "
              + " | ".join(f"{m}: collect per MiB | {m}: collect / read" for m in methods) + " |",
              "|---|---:|" + "---:|---:|" * len(methods)]
    for case, t in tables.items():
        cells = [f"{t['collect'][m].cell(fmt_us)} | {t['collect_ratio'][m].cell(fmt_ratio)}"
                 for m in methods]
        lines.append(f"| {case_name(case)} | {t['floor_read'].cell(fmt_us)} | " + " | ".join(cells) + " |")
    lines.append("")

    lines += ["## Target: uffd ≤ 1/3 of mprotect per first write", ""]
    verdicts = []
    if all(t["ratio"] is not None for t in tables.values()):
        lines += ["| case | uffd / mprotect (median [min–max]) | target | |", "|---|---:|---:|---|"]
        for case, t in tables.items():
            met = t["ratio"].median <= TARGET
            verdicts.append(met)
            lines.append(f"| {case_name(case)} | {t['ratio'].cell(fmt_ratio)} | ≤ {TARGET:.3g} | "
                         f"{'met' if met else 'missed'} |")
        lines += ["", f"Target (on the median) **{'met' if all(verdicts) else 'missed'}** in "
                      f"{sum(verdicts)} of {len(verdicts)} cases. Issue 8 quoted 1.2 µs for uffd against "
                      "4.7 µs for mprotect per page (0.26), measured on the 2-core development machine "
                      "by no committed script; the Appicpr slides give no such figures.", ""]
    else:
        lines += ["Not checked: uffd or mprotect is unavailable here.", ""]

    notes = list(notes)
    notes.append(f"The run took {elapsed:.0f} s.")
    notes.append("hash adds nothing to a write (it reads the whole region at collect): its cost per "
                 "first write is noise around zero and may be negative, its write loop / floor noise "
                 "around one.")
    lines += ["## Notes", ""] + [f"- {n}" for n in notes] + ["", f"Plot: `{NAME}.png`.", ""]
    md = args.out / f"{NAME}.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")

    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    to_us = lambda s: (s.median * 1e6, s.min * 1e6, s.max * 1e6)  # noqa: E731
    groups = [(case_name(c), t["cost"]) for c, t in tables.items()]
    grouped_bars(ax1, groups, value=to_us, log_scale=False, keys=methods)
    ax1.axhline(0, color="black", linewidth=0.5)
    ax1.set_ylabel("tracking cost per first write (µs)")
    ax1.set_title("first write: loop with tracker − without, per page")
    ax1.legend()
    groups = [(case_name(c), t["collect"]) for c, t in tables.items()]
    grouped_bars(ax2, groups, value=to_us, log_scale=True, keys=methods)
    ax2.set_ylabel("collect time per MiB of region (µs)")
    ax2.set_title("collect (read + re-arm)")
    ax2.legend()
    title = f"Dirty-page tracking, {args.mib} MiB region, median [min–max] of {args.repeats}"
    fig.suptitle(("SMOKE RUN, not a result — " if args.smoke else "") + title)
    fig.tight_layout()
    png = args.out / f"{NAME}.png"
    fig.savefig(png, dpi=110)
    log(f"wrote {png}")

    for case, t in tables.items():
        if t["ratio"] is not None:
            med = t["ratio"].median
            print(f"{case_name(case)}: uffd / mprotect per first write {t['ratio'].cell(fmt_ratio)} "
                  f"(target <= {TARGET:.3g}): {'met' if med <= TARGET else 'missed'}")


def _build_type(binary: Path) -> str:
    cache = binary.parent.parent / "CMakeCache.txt"
    try:
        for line in cache.read_text().splitlines():
            if line.startswith("CMAKE_BUILD_TYPE:"):
                return "build type " + (line.split("=", 1)[1] or "unset")
    except OSError:
        pass
    return "build type unknown"


if __name__ == "__main__":
    main()
