#!/usr/bin/env python3
"""Which default for delta.compact_after (issue 33): the disk traffic that
compaction adds against the restart time it saves, per threshold n.

Runs build/cpp/bench/incremental (bench/incremental.cpp) once per (repeat,
n): one process writes every pattern of bench/incremental.py into a store of
its own (version 0 full, then deltas, delta.compact_after = n, the default
pacing), closes it (which waits for the compactions) and restores the newest
version in a new store. A copy-mode process in the same repeat gives the full
restore and the full checkpoint's blocking time. The order of the processes
rotates at each repeat.

Per pattern and n, each repeat's figures:
  - traffic: the bytes the process wrote (/proc/self/io write_bytes, every
    thread's, compactions included) from the first delta to the store's
    close, per checkpoint, against the same with n = 0 (the deltas alone);
  - restart: the newest version's restore throughput against the full
    restore's. Each chain runs to a newest version that holds n deltas on
    its (compacted) full version, the longest chain the threshold leaves: the
    first n + k (n + 1) >= --intervals (n = 0: --intervals deltas);
  - blocking: a delta checkpoint's blocking time (median over the chain)
    against a full checkpoint's.

Writes bench/results/compaction_threshold/compaction_threshold.md and .png.

    .venv/bin/python bench/compaction_threshold.py --size 64MiB
    .venv/bin/python bench/compaction_threshold.py --smoke --repeats 1 --size 8MiB --counts 0,1
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    MiB,
    add_common_args,
    check_resources,
    finish_common_args,
    human,
    log,
    machine_description,
    machine_lines,
    parse_size,
    pyplot,
    report_header,
)
from incremental import (  # noqa: E402
    DEFAULT_BINARY,
    PATTERNS,
    TARGET_RESTART,
    Driver,
    build_type,
    fmt_ratio,
    median,
    pattern_label,
    series,
)

SCRIPT = "compaction_threshold.py"
NAME = "compaction_threshold"
COUNTS = [0, 1, 2, 4, 8]
FULL_INTERVALS = 2  # the copy-mode process: full checkpoints timed, the newest restored


def intervals_for(n: int, least: int) -> int:
    """Deltas in a chain with compact_after = n whose newest version holds n
    deltas on a full version: the first n + k (n + 1) >= least."""
    if n == 0:
        return least
    k = max(0, -(-(least - n) // (n + 1)))
    return n + k * (n + 1)


def loadavg() -> float:
    return os.getloadavg()[0]


# ------------------------------------------------------------------ running
def run(args, driver: Driver) -> Dict[str, List]:
    """{"copy": [rows per repeat], n: [rows per repeat]}."""
    runs: Dict = {"copy": []}
    runs.update({n: [] for n in args.counts})
    kinds = ["copy"] + args.counts
    for r in range(args.repeats):
        for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
            t0 = time.perf_counter()
            if kind == "copy":
                _, rows, _ = driver.run(args.size, "copy", [PATTERNS[0]], FULL_INTERVALS, restart=True)
            else:
                _, rows, _ = driver.run(args.size, "delta", PATTERNS, intervals_for(kind, args.intervals),
                                        args.method, restart=True, extra=("--compact-after", str(kind)))
            wrong = [r for r in rows if r["kind"] == "restart" and not r["verified"]]
            if wrong:
                sys.exit(f"{SCRIPT}: the restart of {wrong[0]['pattern']} (compact_after {kind}) did not give the "
                         f"newest version {wrong[0]['newest']} bit for bit (version {wrong[0]['version']}; the "
                         f"library skipped: {'; '.join(wrong[0]['skipped']) or 'nothing'})")
            runs[kind].append(rows)
            log(f"repeat {r + 1}/{args.repeats}: {'full' if kind == 'copy' else f'compact_after {kind}'} "
                f"({time.perf_counter() - t0:.1f} s)")
    return runs


# ----------------------------------------------------------------- analysis
def row_of(rows: List[dict], kind: str, pattern: Optional[str] = None) -> Optional[dict]:
    return next((r for r in rows if r["kind"] == kind and (pattern is None or r["pattern"] == pattern)), None)


def traffic_per_checkpoint(rows: List[dict], pattern: str) -> Optional[float]:
    t = row_of(rows, "traffic", pattern)
    return t["write_bytes"] / t["deltas"] if t else None


def restart_ratio(rows: List[dict], full_rows: List[dict], pattern: str) -> Optional[float]:
    chain, full = row_of(rows, "restart", pattern), row_of(full_rows, "restart")
    if not (chain and full and chain["verified"] and full["verified"]):
        return None
    return full["seconds"] / chain["seconds"]  # the same state bytes: throughput chain / full


def blocking_ratio(rows: List[dict], full_rows: List[dict], pattern: str) -> Optional[float]:
    ds = [r["blocking_seconds"] for r in rows if r["kind"] == "interval" and r["pattern"] == pattern]
    full = median(r["blocking_seconds"] for r in full_rows if r["kind"] == "interval")
    return median(ds) / full if ds and full else None


def analyse(args, runs: Dict[str, List]) -> Dict:
    """Per n and pattern: Series of the per-repeat figures, and the links
    restart read."""
    out = {}
    for n in args.counts:
        out[n] = {}
        for p in PATTERNS:
            per = {"traffic": [], "traffic_ratio": [], "restart": [], "blocking": [], "links": set()}
            for repeat, rows in enumerate(runs[n]):
                full_rows = runs["copy"][repeat]
                traffic = traffic_per_checkpoint(rows, p)
                base = traffic_per_checkpoint(runs[0][repeat], p) if 0 in runs else None
                per["traffic"].append(traffic)
                per["traffic_ratio"].append(traffic / base if traffic and base else None)
                per["restart"].append(restart_ratio(rows, full_rows, p))
                per["blocking"].append(blocking_ratio(rows, full_rows, p))
                restart = row_of(rows, "restart", p)
                if restart:
                    per["links"].add(restart["links_read"])
            out[n][p] = {k: (v if k == "links" else series(k, v)) for k, v in per.items()}
    return out


def meets_restart(table: Dict, n: int) -> bool:
    return all(table[n][p]["restart"].times and table[n][p]["restart"].median >= TARGET_RESTART for p in PATTERNS)


def median_traffic(table: Dict, n: int) -> Optional[float]:
    return median(table[n][p]["traffic_ratio"].median for p in PATTERNS if table[n][p]["traffic_ratio"].times)


def worst_restart(table: Dict, n: int) -> Optional[float]:
    """The lowest median restart ratio over the patterns."""
    medians = [table[n][p]["restart"].median for p in PATTERNS if table[n][p]["restart"].times]
    return min(medians) if len(medians) == len(PATTERNS) else None


def least_traffic(table: Dict, counts: List[int]) -> Optional[int]:
    counts = [n for n in counts if median_traffic(table, n) is not None]
    return min(counts, key=lambda n: median_traffic(table, n)) if counts else None


def choice(table: Dict, counts: List[int]) -> Optional[int]:
    """The n > 0 that meets the restart target on every pattern with the
    least traffic (median over the patterns of its traffic ratio); None
    where no n does: compaction's writes would then buy no target met."""
    positive = [n for n in counts if n > 0 and worst_restart(table, n) is not None]
    return least_traffic(table, [n for n in positive if meets_restart(table, n)])


# ------------------------------------------------------------------ report
def cell(s) -> str:
    return s.cell(fmt_ratio)


def pattern_cell(table: Dict, key: str, n: int, p: str) -> str:
    t = table[n][p]
    if key == "traffic_ratio" and n == 0:  # the baseline itself, in MiB
        return t["traffic"].cell(lambda b: f"{b / MiB:.3g} MiB") if t["traffic"].times else "—"
    links = f" ({', '.join(str(x) for x in sorted(t['links']))} read)" if key == "restart" else ""
    return t[key].cell(fmt_ratio) + links


def summary_cell(table: Dict, key: str, n: int) -> str:
    if key == "restart":
        return "met" if meets_restart(table, n) else "missed"
    traffic = median_traffic(table, n) if n > 0 else None
    return f"{traffic:.3g}" if traffic is not None else "—"


def pattern_table(args, table: Dict, key: str, summary: Optional[str] = None) -> List[str]:
    """One row per pattern, one column per n; `summary` names a last row."""
    lines = ["| pattern | " + " | ".join(f"n = {n}" for n in args.counts) + " |",
             "|---|" + "---:|" * len(args.counts)]
    for p in PATTERNS:
        lines.append(f"| {pattern_label(p)} | " + " | ".join(pattern_cell(table, key, n, p) for n in args.counts)
                     + " |")
    if summary:
        lines.append(f"| **{summary}** | " + " | ".join(summary_cell(table, key, n) for n in args.counts) + " |")
    return lines + [""]


def write_report(args, binary: Path, root: Path, table: Dict, elapsed: float, load: List[float]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    machine = machine_description(root)
    machine.pop("NumPy", None)
    machine["program"] = f"{binary} ({build_type(binary)})"
    machine["load average (1 min) at start and end"] = f"{load[0]:.2f}, {load[-1]:.2f}"
    chains = ", ".join(f"n = {n}: {intervals_for(n, args.intervals)}" for n in args.counts)
    lines = report_header("Compaction: disk traffic against restart time, per delta.compact_after", SCRIPT, args,
                          extra=f"State {human(args.size)}, tracking `{args.method}`, `delta.compact_share` at "
                                "its default; one process per (repeat, n) and per full baseline, in an order "
                                "rotated at each repeat.")
    lines += machine_lines(machine)
    lines += ["## What is measured", "",
              "bench/incremental.cpp's chains (bench/incremental.md describes the patterns), one store per "
              f"pattern, with `delta.compact_after` = n. Deltas per chain ({chains}): the newest version then "
              "holds n deltas on a full version, the longest chain the threshold leaves once the compactions "
              "are done (n = 0: never compacted).", "",
              "- **Traffic**: `write_bytes` of `/proc/self/io` (every thread of the process: the deltas' "
              "writes and the compactions') from the first delta to the store's close, which waits for the "
              "compactions, per checkpoint. The n = 0 column gives it in MiB (the deltas alone); the others, "
              "against n = 0 in the same repeat.",
              "- **Restart**: `restart()` of the newest version in a new store (page cache) against the full "
              "restore of the copy-mode process in the same repeat, as throughput; in brackets the versions "
              "restart read (its report's `chain`).",
              "- **Blocking**: `checkpoint()` of a delta (median over the chain) against a full checkpoint's "
              "(copy mode, same repeat).", ""]
    lines += ["## Traffic per checkpoint, against the deltas alone (n = 0)", ""]
    lines += pattern_table(args, table, "traffic_ratio", "median over the patterns")
    lines += [f"## Restart: newest version against a full restore (target ≥ {TARGET_RESTART})", ""]
    lines += pattern_table(args, table, "restart", f"≥ {TARGET_RESTART} on every pattern")
    lines += ["## Checkpoint blocking: delta against full", ""]
    lines += pattern_table(args, table, "blocking")
    chosen = choice(table, args.counts)
    worst = " | ".join(f"{worst_restart(table, n):.3g}" if worst_restart(table, n) is not None else "—"
                       for n in args.counts)
    lines += ["## Choice", "",
              "| | " + " | ".join(f"n = {n}" for n in args.counts) + " |", "|---|" + "---:|" * len(args.counts),
              f"| worst pattern's restart (lowest median) | {worst} |", "",
              "Rule: of the n > 0 that meet the restart target on every pattern, the one with the least traffic "
              "(median over the patterns); where none does, n = 0 (never): compaction's writes would buy no "
              "target met, and `delta.full_every` (default 10) bounds a chain anyway. Here: "
              + ("**n = 0**: no n meets the restart target on every pattern." if chosen is None else
                 f"**n = {chosen}** (traffic {median_traffic(table, chosen):.3g}× the deltas alone)."), "",
              f"The run took {elapsed:.0f} s. Plot: `{NAME}.png`.", ""]
    md = args.out / f"{NAME}.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")
    plot(args, table)


def plot(args, table: Dict) -> None:
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    counts = [n for n in args.counts if n > 0]
    for p in PATTERNS:
        traffic = [table[n][p]["traffic_ratio"].median if table[n][p]["traffic_ratio"].times else float("nan")
                   for n in counts]
        restart = [table[n][p]["restart"].median if table[n][p]["restart"].times else float("nan")
                   for n in args.counts]
        left.plot(counts, traffic, marker="o", label=pattern_label(p))
        right.plot(args.counts, restart, marker="o", label=pattern_label(p))
    left.set_yscale("log")
    left.set_xlabel("delta.compact_after (n)")
    left.set_ylabel("bytes written per checkpoint / deltas alone (n = 0)")
    left.set_title("disk traffic")
    right.axhline(TARGET_RESTART, color="black", linestyle="--", label=f"target {TARGET_RESTART}")
    right.set_xlabel("delta.compact_after (n; 0 = never)")
    right.set_ylabel("newest-version restart / full restore (throughput)")
    right.set_title("restart of the longest chain n leaves")
    right.legend(fontsize=7)
    fig.suptitle(("SMOKE RUN, not a result — " if args.smoke else "")
                 + f"delta.compact_after: traffic against restart, {human(args.size)}, {args.method}, "
                   f"median of {args.repeats}")
    fig.tight_layout()
    png = args.out / f"{NAME}.png"
    fig.savefig(png, dpi=100)
    log(f"wrote {png}")


# ------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY,
                    help="the incremental program (default: build/cpp/bench/incremental)")
    ap.add_argument("--size", type=parse_size, default=64 * MiB, help="state size (default 64MiB)")
    ap.add_argument("--method", default="hash", help="tracking method (default hash)")
    ap.add_argument("--intervals", type=int, default=10, help="at least this many deltas per chain (default 10)")
    ap.add_argument("--counts", default=",".join(map(str, COUNTS)),
                    help="values of delta.compact_after, comma-separated, 0 (the baseline) first "
                         f"(default {','.join(map(str, COUNTS))})")
    add_common_args(ap, NAME, "target directory (node-local disk, not tmpfs); default: a fresh directory "
                              "under /tmp")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    out_given = args.out is not None
    finish_common_args(ap, args)
    if not out_given and not args.smoke:
        args.out = args.out / NAME
    args.counts = [int(c) for c in args.counts.split(",") if c]
    if not args.counts or args.counts[0] != 0 or min(args.counts) < 0 or args.size % 4096 or args.intervals < 1:
        ap.error("--counts must start with 0 and hold no negative value; --size whole pages; --intervals >= 1")
    binary = args.binary if args.binary.is_absolute() else Path.cwd() / args.binary
    if not binary.is_file():
        sys.exit(f"{SCRIPT}: {args.binary} not found. Build it first: cmake --build build/cpp --target incremental")
    created = args.dir is None
    root = Path(tempfile.mkdtemp(prefix="resurgo-bench-", dir="/tmp")) if created else args.dir
    root.mkdir(parents=True, exist_ok=True)
    longest = max(intervals_for(n, args.intervals) for n in args.counts)
    check_resources(SCRIPT, root, human(args.size) + " of state", 4.2 * args.size,
                    args.size * (2 + longest / 2) + 1024 * MiB)
    try:
        load = [loadavg()]
        started = time.perf_counter()
        runs = run(args, Driver(binary, root))
        load.append(loadavg())
        write_report(args, binary, root, analyse(args, runs), time.perf_counter() - started, load)
    finally:
        if created and not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
