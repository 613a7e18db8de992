#!/usr/bin/env python3
"""Incremental ("delta") checkpoints from write-tracked memory (issue 8):
what tracking costs the application, what a delta checkpoint costs against a
full one, the bytes it writes against the bytes truly dirtied, how fast a
chain of deltas restores, and the granularity tuner against every fixed
granularity; and what compacting a chain (delta.compact_after) costs: its CPU
off the application's path, and the application's slowdown while it runs.

Runs build/cpp/bench/incremental (bench/incremental.cpp, the public C++ API)
once per (repeat, method): one process writes every pattern, each into a
store of its own (version 0 full, then --intervals deltas), and restores the
newest version of each chain in a new store. A copy-mode process of the same
size in the same repeat gives the full checkpoint and the full restore.
Patterns: 1 %, 10 %, 50 % of the pages per interval, scattered, strided and
in 1 MiB slabs, and a Himeno-like 3-D array updated slice range by slice
range. The fixed-granularity sweep (4 KiB to 4 MiB) runs once per size, all
patterns in one store. Compaction's cost: one process per repeat (the
driver's --compaction-cost) builds --compaction-cycles chains of
--compaction-deltas deltas in one store and times an application loop while
the newest version of each is compacted, against the same loop with nothing
running just before and just after.

Writes bench/results/incremental.md and .png (see --out).

    .venv/bin/python bench/incremental.py                      # 1 GiB, 5 repeats
    .venv/bin/python bench/incremental.py --size 64MiB         # quick
    .venv/bin/python bench/incremental.py --smoke --repeats 1 --size 16MiB --intervals 3
    .venv/bin/python bench/incremental.py --section compaction  # only compaction's cost (a few minutes):
                                                                # replaces its section of incremental.md
    .venv/bin/python bench/incremental.py --section compaction --before-binary /tmp/old/build/cpp/bench/incremental \
        --out bench/results/compaction_stream   # the same, against another build (the code before a change),
                                                # taking turns with it in every repeat
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    GiB,
    MiB,
    Series,
    add_common_args,
    check_resources,
    finish_common_args,
    fmt_time,
    grouped_bars,
    human,
    log,
    machine_description,
    machine_lines,
    parse_size,
    pyplot,
    report_header,
)

SCRIPT = "incremental.py"
NAME = "incremental"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BINARY = ROOT / "build" / "cpp" / "bench" / "incremental"
METHODS = ["uffd", "soft-dirty", "mprotect", "hash"]
PATTERNS = [f"{kind}:{fraction}" for kind in ("scattered", "strided", "slab") for fraction in (0.01, 0.1, 0.5)]
PATTERNS.append("himeno:0.1")
SCATTERED = [p for p in PATTERNS if p.startswith("scattered:")]
GRANULARITIES = [(4 << 10) << k for k in range(11)]  # 4 KiB .. 4 MiB
UNAVAILABLE = 3  # the driver's exit status when the store refuses the method

TARGET_BYTES = 1.15      # stored / truly dirty, scattered, tuner on
TARGET_DURABLE = 0.2     # delta / full time to durable at 10 % dirty
TARGET_UFFD = 1 / 3      # uffd / mprotect cost per first write
TARGET_TUNER = 1.10      # tuner / best fixed granularity
TARGET_RESTART = 0.8     # chain restart throughput / full restore throughput
TARGET_COMPACTION_SLOWDOWN = 1.05  # application loop while a compaction runs / without
COMPACTION_PATTERN = "scattered:0.1"
COMPACTION_HEADING = "## Compaction's own cost"


# ------------------------------------------------------------------ naming
def pattern_label(pattern: str) -> str:
    kind, fraction = pattern.split(":")
    if kind == "himeno":
        return f"Himeno ({float(fraction) * 100:g}% of slices)"
    return f"{float(fraction) * 100:g}% {kind}"


def fmt_ratio(value: float) -> str:
    return f"{value:.3g}"


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} µs"


def fmt_gibs(value: float) -> str:
    return f"{value:.2f}"


def series(label: str, values) -> Series:
    s = Series(label)
    s.times = [v for v in values if v is not None]
    return s


def verdict(ok: Optional[bool]) -> str:
    return "—" if ok is None else ("met" if ok else "missed")


# ------------------------------------------------------------------ running
class Driver:
    """Runs the incremental program and collects its JSON lines."""

    def __init__(self, binary: Path, root: Path):
        self.binary = binary
        self.root = root
        self.runs = 0

    def run(self, size: int, mode: str, patterns: List[str], intervals: int, method: str = "auto",
            granularity: str = "auto", restart: bool = False, one_store: bool = False,
            extra: Tuple[str, ...] = ()) -> Tuple[int, List[dict], str]:
        self.runs += 1
        work = self.root / f"run{self.runs}"
        work.mkdir(parents=True)
        cmd = [str(self.binary), "--dir", str(work), "--size", str(size), "--mode", mode, "--method", method,
               "--granularity", granularity, "--patterns", ",".join(patterns), "--intervals", str(intervals)]
        if restart:
            cmd.append("--restart")
        if one_store:
            cmd.append("--one-store")
        cmd += extra
        env = dict(os.environ, RESURGO_LOG_LEVEL="info")  # the library says when a region falls back to hash
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        shutil.rmtree(work, ignore_errors=True)
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode not in (0, UNAVAILABLE):
            sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed with status {done.returncode}:\n{done.stderr.strip()[-3000:]}")
        return done.returncode, rows, done.stderr


def fallback_lines(stderr: str) -> List[str]:
    return sorted({line.strip() for line in stderr.splitlines() if "tracked by hash" in line})


def probe(driver: Driver, methods: List[str], size_for: Dict[str, int]) -> Tuple[List[str], List[str]]:
    """The methods the store accepts here (one 1-interval chain each), and a
    note for each one skipped, with the library's reason."""
    ok, notes = [], []
    for method in methods:
        status, _, stderr = driver.run(min(size_for[method], 4 * MiB), "delta", ["scattered:0.1"], 1, method)
        if status == UNAVAILABLE:
            reason = next((l for l in stderr.splitlines() if l.startswith("unavailable")), stderr.strip())
            notes.append(f"`{method}` skipped: {reason.removeprefix('unavailable: ')}")
            log(f"{method} skipped: {reason}")
        else:
            ok.append(method)
    return ok, notes


# ----------------------------------------------------------------- analysis
def deltas(rows: List[dict], pattern: str) -> List[dict]:
    return [r for r in rows if r["kind"] == "interval" and r["pattern"] == pattern]


def restart_of(rows: List[dict], pattern: str) -> Optional[dict]:
    return next((r for r in rows if r["kind"] == "restart" and r["pattern"] == pattern), None)


def chain_of(ds: List[dict]) -> List[int]:
    """The versions the newest one needs, newest first, from the stats'
    base_version links (version 0, full, prints no row)."""
    base = {d["version"]: d["base_version"] for d in ds}
    chain = [max(base)] if base else []
    while chain and base.get(chain[-1], -1) >= 0:
        chain.append(base[chain[-1]])
    return chain


def median(values) -> Optional[float]:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


class Results:
    """Every run's rows, by repeat."""

    def __init__(self):
        self.delta: Dict[str, List[List[dict]]] = {}     # method -> one row list per repeat
        self.full: Dict[int, List[List[dict]]] = {}      # size -> copy-mode rows per repeat
        self.sweep: Dict[str, List[dict]] = {}           # granularity -> rows (one run)
        self.stderr: Dict[str, str] = {}

    def full_durable(self, size: int, repeat: int) -> Optional[float]:
        rows = [r for r in self.full[size][repeat] if r["kind"] == "interval"]
        return median(r["durable_seconds"] for r in rows)

    def full_blocking(self, size: int, repeat: int) -> Optional[float]:
        rows = [r for r in self.full[size][repeat] if r["kind"] == "interval"]
        return median(r["blocking_seconds"] for r in rows)

    def full_restore(self, size: int, repeat: int) -> Optional[dict]:
        return next((r for r in self.full[size][repeat] if r["kind"] == "restart"), None)


def analyse_method(res: Results, method: str, size: int) -> dict:
    """Per pattern: Series of the per-repeat figures (each repeat's figure is
    the median over its chain's deltas, or the chain's sum for bytes)."""
    out = {}
    for pattern in PATTERNS:
        per = {k: [] for k in ("slowdown", "cost", "floor", "blocking", "durable", "durable_ratio",
                               "blocking_ratio", "stored_ratio", "captured_ratio", "tracker_ratio",
                               "chain_gibs", "full_gibs", "restart_ratio")}
        trackers, granularity, chain_len, fulls, failures = set(), [], [], 0, []
        for repeat, rows in enumerate(res.delta[method]):
            ds = deltas(rows, pattern)
            if not ds:
                continue
            fulls += sum(1 for d in ds if d["base_version"] < 0)
            ds_delta = [d for d in ds if d["base_version"] >= 0]
            trackers.update(d["tracker"] for d in ds)
            granularity.append(ds[-1]["granularity_bytes"])
            pages = [d["true_dirty_bytes"] / 4096 for d in ds]
            per["slowdown"].append(median(d["write_seconds"] / d["floor_seconds"] for d in ds))
            per["cost"].append(median((d["write_seconds"] - d["floor_seconds"]) / p for d, p in zip(ds, pages)))
            per["floor"].append(median(d["floor_seconds"] / p for d, p in zip(ds, pages)))
            durable = median(d["durable_seconds"] for d in ds_delta)
            blocking = median(d["blocking_seconds"] for d in ds_delta)
            per["durable"].append(durable)
            per["blocking"].append(blocking)
            full_durable, full_blocking = res.full_durable(size, repeat), res.full_blocking(size, repeat)
            if durable is not None and full_durable:
                per["durable_ratio"].append(durable / full_durable)
            if blocking is not None and full_blocking:
                per["blocking_ratio"].append(blocking / full_blocking)
            dirty = sum(d["true_dirty_bytes"] for d in ds_delta)
            if dirty:
                per["stored_ratio"].append(sum(d["stored_bytes"] for d in ds_delta) / dirty)
                per["captured_ratio"].append(sum(d["captured_bytes"] for d in ds_delta) / dirty)
                per["tracker_ratio"].append(sum(d["dirty_bytes"] for d in ds_delta) / dirty)
            restart, full = restart_of(rows, pattern), res.full_restore(size, repeat)
            chain_len.append(restart["links_read"] if restart else len(chain_of(ds)))
            full_gibs = full["state_bytes"] / full["seconds"] / GiB if full and full["verified"] else None
            per["full_gibs"].append(full_gibs)
            if restart and not restart["verified"]:
                failures.append(restart)
            elif restart:
                per["chain_gibs"].append(restart["state_bytes"] / restart["seconds"] / GiB)
                if full_gibs:
                    per["restart_ratio"].append(per["chain_gibs"][-1] / full_gibs)
        out[pattern] = {k: series(k, v) for k, v in per.items()}
        out[pattern].update(trackers=sorted(trackers), granularity=granularity, chain=chain_len, fulls=fulls,
                            failures=failures)
    return out


def analyse_sweep(res: Results, tuner_rows: List[List[dict]], intervals: int) -> dict:
    """Per pattern and granularity: bytes stored / truly dirty over the first
    `intervals` deltas, and the time to durable per delta (median [min–max]
    over those deltas; for the tuner over those of every repeat)."""
    out = {}
    for pattern in PATTERNS:
        row = {}
        for g, rows in res.sweep.items():
            ds = [d for d in deltas(rows, pattern) if d["base_version"] >= 0][:intervals]
            row[g] = sweep_cell(ds)
        tuner = []
        for rows in tuner_rows:
            tuner += [d for d in deltas(rows, pattern) if d["interval"] <= intervals and d["base_version"] >= 0]
        row["auto"] = sweep_cell(tuner)
        row["auto"]["end"] = [d["granularity_bytes"] for d in tuner if d["interval"] == intervals]
        out[pattern] = row
    return out


def sweep_cell(ds: List[dict]) -> dict:
    dirty = sum(d["true_dirty_bytes"] for d in ds)
    return dict(bytes=(sum(d["stored_bytes"] for d in ds) / dirty) if dirty else None,
                durable=series("durable", [d["durable_seconds"] for d in ds]),
                blocking=series("blocking", [d["blocking_seconds"] for d in ds]))


def best_fixed(row: dict, key: str) -> Tuple[Optional[str], Optional[float]]:
    values = {g: (c[key] if key == "bytes" else (c[key].median if c[key].times else None))
              for g, c in row.items() if g != "auto"}
    values = {g: v for g, v in values.items() if v is not None}
    if not values:
        return None, None
    g = min(values, key=values.get)
    return g, values[g]


def tracking_overhead_figures(path: Path) -> List[Tuple[str, str, bool]]:
    """(case, 'median [min–max]', met) from bench/results/tracking_overhead.md's
    target table, or [] if it is not there."""
    try:
        text = path.read_text()
    except OSError:
        return []
    section = text.split("## Target: uffd", 1)[-1]
    rows = re.findall(r"^\| ([^|]+) \| ([0-9.]+ \[[^\]]+\]) \| ≤ [0-9.]+ \| (met|missed) \|$", section, re.MULTILINE)
    return [(case.strip(), cell, met == "met") for case, cell, met in rows]


# ------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY,
                    help="the incremental program (default: build/cpp/bench/incremental)")
    ap.add_argument("--size", type=parse_size, default=GiB, help="state size (default 1GiB)")
    ap.add_argument("--methods", default=",".join(METHODS),
                    help="tracking methods, comma-separated (default: uffd,soft-dirty,mprotect,hash)")
    ap.add_argument("--mprotect-size", type=parse_size, default=96 * MiB,
                    help="state size of the mprotect runs (default 96MiB, at most --size): the library's "
                         "mprotect tracker watches at most half of vm.max_map_count pages (128 MiB of 4 KiB "
                         "pages by default) and leaves larger regions to hash")
    ap.add_argument("--intervals", type=int, default=10, help="deltas per chain (default 10)")
    ap.add_argument("--sweep-intervals", type=int, default=3,
                    help="deltas per pattern in the fixed-granularity sweep (default 3; 0 skips the sweep)")
    ap.add_argument("--compact-after", type=int, default=0,
                    help="delta.compact_after of the delta chains (default 0: never compacted; the restart rows "
                         "then read the chain as compaction left it, after the store's close)")
    ap.add_argument("--section", choices=("all", "compaction"), default="all",
                    help="all (default), or compaction: only compaction's cost, whose section replaces the one "
                         "in the existing incremental.md (or starts one)")
    ap.add_argument("--compaction-size", type=parse_size, default=128 * MiB,
                    help="state size of the compaction runs (default 128MiB)")
    ap.add_argument("--compaction-deltas", type=int, default=3,
                    help="deltas in each chain compacted (default 3, at least 2; compact_after = this - 1)")
    ap.add_argument("--compaction-cycles", type=int, default=4,
                    help="chains compacted per process, each between two windows without compaction (default 4)")
    ap.add_argument("--before-binary", type=Path, default=None,
                    help="with --section compaction: another build of the incremental program (the code before a "
                         "change), run in every repeat too, the two in an order alternated at each repeat; the "
                         "section then compares them")
    add_common_args(ap, NAME, "target directory (node-local disk, not tmpfs); default: a fresh directory "
                              "under /tmp")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    if args.size % 4096 or args.mprotect_size % 4096:
        ap.error("--size and --mprotect-size must be whole pages")
    if args.intervals < 1 or args.sweep_intervals < 0 or args.sweep_intervals > args.intervals:
        ap.error("--intervals must be >= 1 and --sweep-intervals in [0, --intervals]")
    if args.compact_after < 0:
        ap.error("--compact-after must be >= 0")
    if args.compaction_size % 4096 or args.compaction_deltas < 2 or args.compaction_cycles < 1:
        ap.error("--compaction-size must be whole pages, --compaction-deltas >= 2, --compaction-cycles >= 1")
    methods = [m for m in args.methods.split(",") if m]
    unknown = set(methods) - set(METHODS)
    if unknown:
        ap.error(f"unknown methods {sorted(unknown)}; choose from {METHODS}")
    binary = args.binary if args.binary.is_absolute() else Path.cwd() / args.binary
    if not binary.is_file():
        sys.exit(f"{SCRIPT}: {args.binary} not found. Build it first:  make build\n"
                 "(or: cmake --build build/cpp --target incremental), or name it with --binary")
    if args.before_binary is not None and (args.section != "compaction" or not args.before_binary.is_file()):
        ap.error("--before-binary takes --section compaction and an existing program")

    created = args.dir is None
    root = Path(tempfile.mkdtemp(prefix="resurgo-bench-", dir="/tmp")) if created else args.dir
    root.mkdir(parents=True, exist_ok=True)
    size = args.size
    msize = min(args.mprotect_size, size)
    size_for = {m: (msize if m == "mprotect" else size) for m in methods}
    # The state, the untracked floor array, the restore array and the L1
    # buffer; on disk one chain (a full version and its deltas, up to half the
    # state each) at a time.
    csize = args.compaction_size
    if args.section == "compaction":
        check_resources(SCRIPT, root, human(csize) + " of state", 2.5 * csize,
                        csize * (2 + 1.5 * args.compaction_cycles) + GiB)
    else:
        check_resources(SCRIPT, root, human(size) + " of state", 4.2 * size, size * (1 + args.intervals / 2) + GiB)
    try:
        started = time.perf_counter()
        driver = Driver(binary, root)
        if args.section == "compaction":
            before = Driver(args.before_binary.resolve(), root / "before") if args.before_binary else None
            compaction, compaction_before = run_compaction(args, driver, before)
            write_compaction_only(args, binary, root, compaction, time.perf_counter() - started, compaction_before)
            return
        available, notes = probe(driver, methods, size_for)
        res = run_all(args, driver, available, size, msize)
        compaction, _ = run_compaction(args, driver)
        elapsed = time.perf_counter() - started
        write_report(args, binary, root, res, available, notes, size, msize, elapsed, compaction)
    finally:
        if created and not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def run_all(args, driver: Driver, methods: List[str], size: int, msize: int) -> Results:
    res = Results()
    sizes = sorted({size} | ({msize} if "mprotect" in methods else set()))
    full_intervals = 2
    for s in sizes:
        res.full[s] = []
    for m in methods:
        res.delta[m] = []
    # One process per (repeat, run), in an order rotated by one at each repeat.
    runs = [("copy", s) for s in sizes] + [(m, None) for m in methods]
    for r in range(args.repeats):
        order = runs[r % len(runs):] + runs[:r % len(runs)]
        for what, s in order:
            t0 = time.perf_counter()
            if what == "copy":
                _, rows, _ = driver.run(s, "copy", [PATTERNS[0]], full_intervals, restart=True)
                res.full[s].append(rows)
                log(f"repeat {r + 1}/{args.repeats}: full checkpoints of {human(s)} "
                    f"({time.perf_counter() - t0:.1f} s)")
            else:
                msz = msize if what == "mprotect" else size
                _, rows, stderr = driver.run(msz, "delta", PATTERNS, args.intervals, what, restart=True,
                                             extra=("--compact-after", str(args.compact_after)))
                res.delta[what].append(rows)
                res.stderr[what] = res.stderr.get(what, "") + stderr
                log(f"repeat {r + 1}/{args.repeats}: {what} chains of {human(msz)} "
                    f"({time.perf_counter() - t0:.1f} s)")
    if args.sweep_intervals and "uffd" in methods:
        for g in GRANULARITIES:
            t0 = time.perf_counter()
            _, rows, _ = driver.run(size, "delta", PATTERNS, args.sweep_intervals, "uffd", human(g), one_store=True)
            res.sweep[human(g)] = rows
            log(f"sweep: granularity {human(g)} ({time.perf_counter() - t0:.1f} s)")
    return res


class CompactionRuns:
    """The driver's "compaction" lines, one per cycle (--compaction-cycles per
    repeat), and the load average around the runs."""

    def __init__(self, size: int, deltas: int):
        self.size = size
        self.deltas = deltas
        self.rows: List[dict] = []
        self.load: List[float] = []

    def series(self) -> Dict[str, Series]:
        def per_slice(row: dict) -> float:
            return row["loop_seconds"] / row["slices"]

        def baseline_per_slice(row: dict) -> float:
            return row["baseline_seconds"] / row["baseline_slices"]

        def cpu_per_slice(row: dict) -> float:
            return row["loop_cpu_seconds"] / row["slices"]

        def baseline_cpu_per_slice(row: dict) -> float:
            return row["baseline_cpu_seconds"] / row["baseline_slices"]
        rows = self.rows
        return {
            "wall": series("wall", [r["compaction_seconds"] for r in rows]),
            "eviction_cpu": series("eviction_cpu", [r["eviction_thread_cpu_seconds"] for r in rows]),
            "background_cpu": series("background_cpu", [r["background_cpu_seconds"] for r in rows]),
            "baseline_background_cpu": series("baseline_background_cpu",
                                              [r["baseline_background_cpu_seconds"] for r in rows]),
            "slice_with": series("with", [per_slice(r) for r in rows]),
            "slice_without": series("without", [baseline_per_slice(r) for r in rows]),
            "slowdown": series("slowdown", [per_slice(r) / baseline_per_slice(r) for r in rows]),
            "cpu_with": series("with", [cpu_per_slice(r) for r in rows]),
            "cpu_without": series("without", [baseline_cpu_per_slice(r) for r in rows]),
            "cpu_slowdown": series("cpu slowdown", [cpu_per_slice(r) / baseline_cpu_per_slice(r) for r in rows]),
            "slices": series("slices", [r["slices"] for r in rows]),
            # What the compaction cost the application in all: the per-slice
            # slowdown times the window's length, which the ratio alone hides.
            "lost": series("lost", [r["loop_seconds"] - r["slices"] * baseline_per_slice(r) for r in rows]),
        }


def run_compaction(args, driver: Driver,
                   before: Optional[Driver] = None) -> Tuple[CompactionRuns, Optional[CompactionRuns]]:
    """The runs of `driver` and, when given, of `before`: one process of
    each per repeat, which of the two goes first alternated at each repeat."""
    runs = CompactionRuns(args.compaction_size, args.compaction_deltas)
    before_runs = CompactionRuns(args.compaction_size, args.compaction_deltas) if before else None
    turns = [(driver, runs)] + ([(before, before_runs)] if before else [])
    runs.load.append(os.getloadavg()[0])
    for r in range(args.repeats):
        for program, into in (turns if r % 2 == 0 else turns[::-1]):
            t0 = time.perf_counter()
            extra = ("--compaction-cost", "--compaction-cycles", str(args.compaction_cycles))
            _, rows, _ = program.run(args.compaction_size, "delta", [COMPACTION_PATTERN], args.compaction_deltas,
                                     extra=extra)
            into.rows += [row for row in rows if row["kind"] == "compaction"]
            into.load.append(os.getloadavg()[0])
            log(f"repeat {r + 1}/{args.repeats}: {args.compaction_cycles} compactions of "
                f"{human(args.compaction_size)} by {program.binary} ({time.perf_counter() - t0:.1f} s)")
    return runs, before_runs


def compaction_rows(runs: CompactionRuns) -> List[Tuple[str, str]]:
    """(quantity, 'median [min–max]') of the section's table."""
    s = runs.series()
    gib = runs.size / GiB
    slowdown = s["slowdown"]
    ok = slowdown.median <= TARGET_COMPACTION_SLOWDOWN if slowdown.times else None
    return [
        ("compaction's wall time (newest version durable → compacted file in place)", s["wall"].cell()),
        ("its CPU: every thread's but the application's meanwhile (`getrusage`, threads that ended included)",
         s["background_cpu"].cell()),
        ("the same per GiB of state", series("", [v / gib for v in s["background_cpu"].times]).cell()),
        ("of which the eviction thread's (`/proc/self/task/*/schedstat` of \"rsg evict\")",
         s["eviction_cpu"].cell()),
        ("the same as its CPU during the baseline's windows (no compaction)", s["baseline_background_cpu"].cell()),
        ("application loop, time per slice while the compaction runs",
         f"{s['slice_with'].cell()} ({s['slices'].cell(lambda v: f'{v:.0f}')} slices)"),
        ("application loop, time per slice with nothing in the background", s["slice_without"].cell()),
        ("**slowdown while compacting** (per-slice time with / without, per compaction) "
         f"≤ {TARGET_COMPACTION_SLOWDOWN}",
         f"{slowdown.cell(fmt_ratio)} ({verdict(ok)})"),
        ("application time lost in all (time of the slices while compacting − as many slices at the baseline's "
         "time per slice, per compaction)", s["lost"].cell()),
        ("application thread's CPU time per slice while compacting", s["cpu_with"].cell()),
        ("the same with nothing in the background", s["cpu_without"].cell()),
        ("the same, with / without, per compaction (contention for memory and caches, without the time the thread "
         "waited for a core)", s["cpu_slowdown"].cell(fmt_ratio)),
    ]


def comparison_rows(runs: CompactionRuns, before: CompactionRuns) -> List[Tuple[str, str]]:
    """Ratios of this program's figures to the --before-binary's, repeat by
    compaction by compaction (the two ran in the same repeat, one after the other)."""
    s, b = runs.series(), before.series()

    def ratio(key: str) -> str:
        return series("", [x / y for x, y in zip(s[key].times, b[key].times)]).cell(fmt_ratio)
    return [("compaction's wall time, this build / before (per compaction)", ratio("wall")),
            ("its CPU (every thread but the application's), this build / before (per compaction)",
             ratio("background_cpu")),
            ("slowdown while compacting, this build / before (per compaction)", ratio("slowdown")),
            ("the same in the loop thread's CPU time, this build / before (per compaction)", ratio("cpu_slowdown"))]


def compaction_section(runs: CompactionRuns, repeats: int, elapsed: Optional[float] = None,
                       before: Optional[CompactionRuns] = None, before_name: str = "") -> List[str]:
    cycles = len(runs.rows) // max(repeats, 1)
    lines = [COMPACTION_HEADING, "",
             f"Chains of {runs.deltas} deltas ({pattern_label(COMPACTION_PATTERN)} per "
             f"interval) of a {human(runs.size)} state, `delta.compact_after = {runs.deltas - 1}`: once the newest "
             "version is durable at L2, the store merges the chain in the background and commits it as a full "
             "version (docs/tracking.md, \"Compaction\": on which thread, at which priority). Meanwhile the "
             "application thread runs its loop "
             "in slices (one sweep of a 32 MiB array of doubles each, `value = value * 0.999 + 1`: memory-bound) "
             "until the full version is in place of the delta (the file grows to the state's size). Its "
             "baseline is the same loop with nothing in the background, 200 slices just before the chain's newest "
             "checkpoint and 200 just after the compaction: the two bracket the compaction's window, a second or so "
             "apart, in the same process and store. One process per repeat compacts "
             f"{cycles} chains one after the other, each on the compacted version of the one before "
             f"(bench/incremental.cpp `--compaction-cost`); median [min–max] over the {len(runs.rows)} compactions "
             f"of {repeats} repeats, each ratio taken within its compaction.", ""]
    loads = runs.load + (before.load if before else [])
    lines += [f"Load average (1 min) at the start and after each run: {min(loads):.2f}–{max(loads):.2f}, median "
              f"{statistics.median(loads):.2f}, on {os.cpu_count()} cores (the VM is shared: the loop's times carry "
              "that noise).", ""]
    rows = compaction_rows(runs)
    if before is None:
        lines += ["| quantity | median [min–max] |", "|---|---:|"] + [f"| {q} | {v} |" for q, v in rows]
    else:
        lines += [f"Each repeat ran this build and the one before (`{before_name}`), one process each, which "
                  "of the two first alternated at each repeat; the ratios between the builds pair the n-th "
                  "compaction of one with the n-th of the other.", "",
                  "| quantity | this build | before |", "|---|---:|---:|"]
        lines += [f"| {q} | {v} | {w} |" for (q, v), (_, w) in zip(rows, compaction_rows(before))]
        lines += [f"| {q} | {v} | |" for q, v in comparison_rows(runs, before)]
    lines += ["",
              "The wall-time ratio is the target's measure; on this shared VM it also carries the other "
              "processes' load, which changes even between windows a second apart: the CPU-time ratio leaves "
              "out the time the application thread waited for a core.", ""]
    if elapsed is not None:
        lines += [f"These runs took {elapsed:.0f} s.", ""]
    return lines


def write_compaction_only(args, binary: Path, root: Path, runs: CompactionRuns, elapsed: float,
                          before: Optional[CompactionRuns] = None) -> None:
    """Replaces the compaction section of incremental.md (the rest of the file
    is another run's), or starts a file with it."""
    args.out.mkdir(parents=True, exist_ok=True)
    md = args.out / f"{NAME}.md"
    machine = machine_description(root)
    machine.pop("NumPy", None)
    machine["program"] = f"{binary} ({build_type(binary)})"
    if args.before_binary:
        machine["program before"] = f"{args.before_binary} ({build_type(args.before_binary)})"
    section = compaction_section(runs, args.repeats, elapsed, before, str(args.before_binary))
    section[1:1] = ["", f"Generated by `bench/{SCRIPT} {' '.join(args.argv)}` on {machine.get('date', '?')}"
                    f"{' (SMOKE RUN, not a result)' if args.smoke else ''}: this section only; the rest of this file "
                    "comes from the run named at its top. Its machine:", "", "| | |", "|---|---|"] \
        + [f"| {k} | {v} |" for k, v in machine.items()]
    text = md.read_text() if md.exists() else "\n".join(
        report_header("Incremental checkpoints: tracking, delta versus full, chains, granularity", SCRIPT, args)
        + ["", ""])
    md.write_text(replace_section(text, COMPACTION_HEADING, section))
    log(f"wrote {md}")
    plot_compaction(args, runs)


def replace_section(text: str, heading: str, section: List[str]) -> str:
    """`text` with the section under `heading` (up to the next "## ") replaced
    by `section`, or `section` inserted before "## Notes" (else appended)."""
    lines = text.splitlines()
    if heading in lines:
        begin = lines.index(heading)
        end = next((i for i in range(begin + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    else:
        begin = end = lines.index("## Notes") if "## Notes" in lines else len(lines)
    return "\n".join(lines[:begin] + section + lines[end:]) + "\n"


def plot_compaction(args, runs: CompactionRuns) -> None:
    plt = pyplot()
    s = runs.series()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    repeats = range(1, len(runs.rows) + 1)
    width = 0.4
    left.bar([r - width / 2 for r in repeats], [v * 1e3 for v in s["slice_with"].times], width,
             label="while compacting")
    left.bar([r + width / 2 for r in repeats], [v * 1e3 for v in s["slice_without"].times], width,
             label="nothing in the background")
    left.set_xlabel("compaction (repeat by repeat)")
    left.set_ylabel("application loop: ms per slice")
    left.set_title(f"slowdown median {s['slowdown'].median:.3f}× (target ≤ {TARGET_COMPACTION_SLOWDOWN})")
    left.legend()
    right.bar([r - width / 2 for r in repeats], s["wall"].times, width, label="wall time")
    right.bar([r + width / 2 for r in repeats], s["background_cpu"].times, width,
              label="CPU (every thread but the application's)")
    right.set_xlabel("compaction (repeat by repeat)")
    right.set_ylabel("seconds")
    right.set_title(f"compaction of {human(runs.size)}, {runs.deltas} deltas")
    right.legend()
    fig.suptitle(("SMOKE RUN, not a result — " if args.smoke else "")
                 + f"Compaction's own cost, load {runs.load[0]:.1f} → {runs.load[-1]:.1f}")
    fig.tight_layout()
    png = args.out / f"{NAME}_compaction.png"
    fig.savefig(png, dpi=100)
    log(f"wrote {png}")


# ------------------------------------------------------------------ report
def sysfs(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return "unknown"


def build_type(binary: Path) -> str:
    try:
        for line in (binary.parent.parent / "CMakeCache.txt").read_text().splitlines():
            if line.startswith("CMAKE_BUILD_TYPE:"):
                return "build type " + (line.split("=", 1)[1] or "unset")
    except OSError:
        pass
    return "build type unknown"


def write_report(args, binary: Path, root: Path, res: Results, methods: List[str], notes: List[str],
                 size: int, msize: int, elapsed: float, compaction: CompactionRuns) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    machine = machine_description(root)
    machine.pop("NumPy", None)
    machine["page size"] = f"{os.sysconf('SC_PAGE_SIZE')} B"
    machine["transparent huge pages"] = (sysfs("/sys/kernel/mm/transparent_hugepage/enabled")
                                         + " (off for the state: MADV_NOHUGEPAGE)")
    machine["vm.unprivileged_userfaultfd"] = sysfs("/proc/sys/vm/unprivileged_userfaultfd")
    machine["vm.max_map_count"] = sysfs("/proc/sys/vm/max_map_count")
    machine["program"] = f"{binary} ({build_type(binary)})"
    machine["machine"] = platform.machine()

    sizes_of = {m: (msize if m == "mprotect" else size) for m in methods}
    tables = {m: analyse_method(res, m, sizes_of[m]) for m in methods}
    sweep = analyse_sweep(res, res.delta.get("uffd", []), args.sweep_intervals) if res.sweep else None

    lines = report_header("Incremental checkpoints: tracking, delta versus full, chains, granularity", SCRIPT, args,
                          extra=f"State {human(size)} (mprotect: {human(msize)}); one process per (repeat, "
                                "method) and per full baseline, in an order rotated at each repeat.")
    lines += machine_lines(machine)
    lines += what_is_measured(args, size, msize)
    lines += tracker_section(methods, notes, tables, res, sizes_of)
    lines += overhead_section(methods, tables, sizes_of)
    lines += checkpoint_section(methods, tables, res, sizes_of)
    lines += bytes_section(methods, tables)
    lines += restart_section(methods, tables, sizes_of)
    if sweep:
        lines += sweep_section(args, sweep)
    lines += targets_section(methods, tables, sweep, args)
    lines += compaction_section(compaction, args.repeats)
    notes = list(notes) + [f"The run took {elapsed:.0f} s ({elapsed / 60:.1f} min)."]
    lines += ["## Notes", ""] + [f"- {n}" for n in notes] + ["", f"Plot: `{NAME}.png`.", ""]
    md = args.out / f"{NAME}.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")
    plot(args, methods, tables, sweep, size)
    plot_compaction(args, compaction)


def what_is_measured(args, size: int, msize: int) -> List[str]:
    return [
        "## What is measured",
        "",
        f"`bench/incremental.cpp` (public C++ API) holds the state in {human(size)} of anonymous private memory, "
        "transparent huge pages off (`MADV_NOHUGEPAGE`), prefaulted. For each pattern it opens a `resurgo::Store` "
        "on a fresh directory under the target directory (`local.path`, `local.keep = 0`, `persistent.every = 0`, "
        "`buffer.capacity` = the state), takes version 0 (full) and then, for each of "
        f"{args.intervals} intervals: writes the interval's pages into a second, untracked array (the **floor**: "
        "the same loop, no tracker, in the same process), writes them into the state, calls `checkpoint(i)` and "
        "`wait(i, 2)`. `delta.full_every` is intervals + 1, so each chain is one full version and "
        f"{args.intervals} deltas, compacted on the level once a chain holds more than "
        f"`delta.compact_after` = {args.compact_after} of them (0: never). It then closes the store (which waits "
        "for the compactions), opens a new one on the same directory (as a restarted "
        "process would) protecting a third, touched array, calls `restart()` for the newest version and checks "
        "that it equals the state bit for bit (or the run stops).",
        "",
        "Patterns (the same pages in every run: fixed seeds per pattern and interval):",
        "",
        "| pattern | pages written per interval | how |",
        "|---|---|---|",
        "| scattered | 1 %, 10 %, 50 % of the pages, a new random draw each interval | one 8-byte store per page "
        "(increment of its first word): the tracking worst case, a first write per page for almost no work |",
        "| strided | every k-th page, k = 100, 10, 2 (the same pages each interval) | one 8-byte store per page |",
        "| slab | 1 MiB slabs of whole pages at random page offsets (not 1 MiB-aligned), a new draw each "
        "interval, 1 %, 10 %, 50 % of the state | every 8-byte word of the slab incremented (whole pages) |",
        "| Himeno | a 3-D float array of Himeno \"L\" planes (257 × 513 floats = 527,364 bytes, not a whole number "
        "of pages), updated slice by slice; each interval rewrites the next 10 % of the slices (wrapping), then a "
        "checkpoint | every float of the slices `+= 1` |",
        "",
        "**Truly dirty bytes** = the pages the pattern wrote × 4 KiB, counted by the driver itself.",
        "",
        "Per (pattern, method) and repeat, the figure of the repeat is the median over the chain's deltas "
        "(sums for bytes); the tables give median [min–max] over the repeats.",
        "",
        "- **tracking overhead** = write loop on the tracked state / the same loop on the untracked floor array "
        "(a fresh, cold array: the floor is if anything slower than an untracked state, so the overhead is not "
        "overstated); **cost per written page** = (tracked − floor) / pages written.",
        "- **blocking** = `VersionStats.blocking_seconds`; **time to durable** = `LevelStats.seconds_to_level` at "
        "L2 (from the `checkpoint()` call until the version is durable in the local directory). The full "
        "checkpoint is `capture.mode = \"copy\"` of the same size, in the same repeat (median of its "
        "versions 1 and 2).",
        "- **bytes** = `LevelStats.stored_bytes` at L2 (the file, headers included) summed over the deltas / the "
        "truly dirty bytes; also `captured_bytes` (whole blocks) and the tracker's `dirty_bytes`.",
        "- **restart** = `Store::restart()` of the newest version (wall time of the call) in a new store; "
        "throughput = state bytes / seconds, counted only when the restore is the newest version bit for bit. "
        "The full restore is the copy-mode store's restart in the same repeat. **The page cache was not dropped** (that needs root): "
        "every restart reads files just written, from the page cache.",
        "",
    ]


def tracker_section(methods, notes, tables, res, sizes_of) -> List[str]:
    lines = ["## Trackers", "", "| method | state | trackers named in `VersionStats.tracker` | "
             "library log: regions left to hash |", "|---|---|---|---|"]
    for m in methods:
        named = sorted({t for p in tables[m].values() for t in p["trackers"]})
        fallback = fallback_lines(res.stderr.get(m, ""))
        lines.append(f"| {m} | {human(sizes_of[m])} | {', '.join(named) or '—'} | "
                     f"{'<br>'.join(fallback[:2]) or 'none'} |")
    lines += [""] + [f"- {n}" for n in notes] + [""]
    return lines


def overhead_section(methods, tables, sizes_of) -> List[str]:
    lines = ["## Tracking overhead on the application", "",
             "Write loop with tracking / the same loop untracked (floor), and the extra cost per written page.", "",
             "| pattern | " + " | ".join(f"{m} ({human(sizes_of[m])}): loop / floor | {m}: cost per page"
                                      for m in methods) + " |",
             "|---|" + "---:|---:|" * len(methods)]
    for p in PATTERNS:
        cells = [f"{tables[m][p]['slowdown'].cell(fmt_ratio)} | {tables[m][p]['cost'].cell(fmt_us)}" for m in methods]
        lines.append(f"| {pattern_label(p)} | " + " | ".join(cells) + " |")
    lines += ["", "Slabs and Himeno write whole pages, so the loop itself is long and the ratio small; scattered "
              "and strided write 8 bytes per page, so the ratio shows the per-fault cost almost alone.", ""]
    return lines


def checkpoint_section(methods, tables, res, sizes_of) -> List[str]:
    lines = ["## Checkpoint time: delta against full", ""]
    full_cells = []
    for s in sorted(res.full):
        durable = series("", [res.full_durable(s, r) for r in range(len(res.full[s]))])
        blocking = series("", [res.full_blocking(s, r) for r in range(len(res.full[s]))])
        full_cells.append(f"full checkpoint (`capture.mode = \"copy\"`) of {human(s)}: blocking "
                          f"{blocking.cell()}, time to durable {durable.cell()}")
    lines += [f"- {c}" for c in full_cells] + [""]
    lines += ["| pattern | " + " | ".join(f"{m}: blocking | {m}: / full | {m}: to durable | {m}: / full"
                                          for m in methods) + " |",
              "|---|" + "---:|---:|---:|---:|" * len(methods)]
    for p in PATTERNS:
        cells = [f"{t['blocking'].cell()} | {t['blocking_ratio'].cell(fmt_ratio)} | {t['durable'].cell()} | "
                 f"{t['durable_ratio'].cell(fmt_ratio)}" for t in (tables[m][p] for m in methods)]
        lines.append(f"| {pattern_label(p)} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def bytes_section(methods, tables) -> List[str]:
    lines = ["## Bytes written against truly dirty bytes", "",
             "Sums over each chain's deltas, divided by the truly dirty bytes (pages written × 4 KiB). "
             "Granularity: `auto` (the tuner); the last column per method is the granularity in force at the "
             "chain's last delta.", "",
             "| pattern | " + " | ".join(f"{m}: stored / dirty | {m}: captured / dirty | {m}: tracker's dirty / "
                                      f"dirty | {m}: granularity at the end" for m in methods) + " |",
             "|---|" + "---:|---:|---:|---:|" * len(methods)]
    for p in PATTERNS:
        cells = []
        for m in methods:
            t = tables[m][p]
            grans = sorted(set(t["granularity"]))
            cells.append(f"{t['stored_ratio'].cell(fmt_ratio)} | {t['captured_ratio'].cell(fmt_ratio)} | "
                         f"{t['tracker_ratio'].cell(fmt_ratio)} | {', '.join(human(g) for g in grans) or '—'}")
        lines.append(f"| {pattern_label(p)} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def restart_section(methods, tables, sizes_of) -> List[str]:
    lines = ["## Restart: a chain of deltas against a full version (page cache)", "",
             "GiB/s = state bytes / `restart()` wall time. Chain = the versions `restart()` read (its report's "
             "`chain`: the newest, then its bases down to a full version; a compacted version is one).", "",
             "| pattern | " + " | ".join(f"{m}: chain GiB/s | {m}: full GiB/s | {m}: chain / full | {m}: chain"
                                      for m in methods) + " |",
             "|---|" + "---:|---:|---:|---:|" * len(methods)]
    for p in PATTERNS:
        cells = []
        for m in methods:
            t = tables[m][p]
            chain = sorted(set(t["chain"]))
            chain_gibs = t["chain_gibs"].cell(fmt_gibs)
            if t["failures"]:
                chain_gibs += f" ({len(t['failures'])} wrong restores)"
            cells.append(f"{chain_gibs} | {t['full_gibs'].cell(fmt_gibs)} | "
                         f"{t['restart_ratio'].cell(fmt_ratio)} | "
                         f"{', '.join(f'{n} versions' for n in chain) or '—'}")
        lines.append(f"| {pattern_label(p)} | " + " | ".join(cells) + " |")
    lines.append("")
    failures = [(m, p, f) for m in methods for p in PATTERNS for f in tables[m][p]["failures"]]
    if failures:
        m, p, f = failures[0]
        lines += [f"**{len(failures)} restores of a delta chain did not give the newest version bit for bit**, "
                  "and have no throughput above. The first: "
                  f"{m}, {pattern_label(p)}: asked for the newest version {f['newest']}, `restart()` returned "
                  f"version {f['version']}" + (f"; the library skipped: {'; '.join(f['skipped'][:3])}"
                                               if f["skipped"] else "") + ".", ""]
    return lines


def sweep_section(args, sweep) -> List[str]:
    grans = [human(g) for g in GRANULARITIES]
    lines = ["## The tuner against every fixed granularity (uffd)", "",
             f"**Fewer repeats here.** Each fixed granularity is one run, every pattern in one store after one "
             f"full version, {args.sweep_intervals} deltas per pattern: the time cells are median [min–max] over "
             f"those {args.sweep_intervals} deltas, not over repeats (bytes are the same in every run: the pages "
             "are fixed). The tuner (`auto`) is the uffd chains above, each pattern in a fresh store starting "
             f"from one page: its first {args.sweep_intervals} deltas of every repeat (settling included).", "",
             "### Bytes stored / truly dirty", "",
             "| pattern | " + " | ".join(grans) + " | tuner | best fixed | tuner / best |",
             "|---|" + "---:|" * (len(grans) + 3)]
    for p in PATTERNS:
        row = sweep[p]
        g_best, v_best = best_fixed(row, "bytes")
        tuner = row["auto"]["bytes"]
        cells = [fmt_ratio(row[g]["bytes"]) if g in row and row[g]["bytes"] is not None else "—" for g in grans]
        ratio = tuner / v_best if tuner is not None and v_best else None
        lines.append(f"| {pattern_label(p)} | " + " | ".join(cells) + f" | {fmt_ratio(tuner) if tuner else '—'} | "
                     f"{g_best or '—'} | {fmt_ratio(ratio) if ratio else '—'} |")
    lines += ["", "### Time to durable per delta (median of the deltas)", "",
              "| pattern | " + " | ".join(grans) + " | tuner | best fixed | tuner / best | tuner ends at |",
              "|---|" + "---:|" * (len(grans) + 4)]
    for p in PATTERNS:
        row = sweep[p]
        g_best, v_best = best_fixed(row, "durable")
        tuner = row["auto"]["durable"]
        cells = [fmt_time(row[g]["durable"].median) if g in row and row[g]["durable"].times else "—" for g in grans]
        ratio = tuner.median / v_best if tuner.times and v_best else None
        ends = sorted(set(row["auto"]["end"]))
        lines.append(f"| {pattern_label(p)} | " + " | ".join(cells) + f" | {tuner.cell()} | {g_best or '—'} | "
                     f"{fmt_ratio(ratio) if ratio else '—'} | {', '.join(human(e) for e in ends) or '—'} |")
    lines.append("")
    return lines


def targets_section(methods, tables, sweep, args) -> List[str]:
    lines = ["## Targets (issue 8)", "", "| target | measured (median [min–max]) | |", "|---|---|---|"]
    if "uffd" in methods:
        for p in SCATTERED:
            s = tables["uffd"][p]["stored_ratio"]
            ok = s.median <= TARGET_BYTES if s.times else None
            lines.append(f"| bytes stored ≤ {TARGET_BYTES}× truly dirty, {pattern_label(p)}, uffd, tuner | "
                         f"{s.cell(fmt_ratio)} | {verdict(ok)} |")
    for m in methods:
        for p in ("scattered:0.1", "strided:0.1", "slab:0.1", "himeno:0.1"):
            s = tables[m][p]["durable_ratio"]
            ok = s.median <= TARGET_DURABLE if s.times else None
            lines.append(f"| time to durable ≤ {TARGET_DURABLE}× full, {pattern_label(p)}, {m} | "
                         f"{s.cell(fmt_ratio)} | {verdict(ok)} |")
    cited = tracking_overhead_figures(ROOT / "bench" / "results" / "tracking_overhead.md")
    for case, cell, met in cited:
        lines.append(f"| uffd ≤ 1/3 of mprotect per first write, {case} (bench/results/tracking_overhead.md, "
                     f"64 MiB) | {cell} | {verdict(met)} |")
    if "uffd" in methods and "mprotect" in methods:
        for p in SCATTERED:
            u, mp = tables["uffd"][p]["cost"], tables["mprotect"][p]["cost"]
            if u.times and mp.times and mp.median > 0:
                ratio = u.median / mp.median
                lines.append(f"| uffd ≤ 1/3 of mprotect per first write, {pattern_label(p)} (this run; uffd on "
                             f"{human(args.size)}, mprotect on {human(min(args.mprotect_size, args.size))}; ratio "
                             f"of medians) | {fmt_ratio(ratio)} ({fmt_us(u.median)} / {fmt_us(mp.median)}) | "
                             f"{verdict(ratio <= TARGET_UFFD)} |")
    if sweep:
        for p in PATTERNS:
            for key, label in (("bytes", "bytes"), ("durable", "time to durable")):
                g_best, v_best = best_fixed(sweep[p], key)
                tuner = sweep[p]["auto"][key]
                value = tuner if key == "bytes" else (tuner.median if tuner.times else None)
                ratio = value / v_best if value is not None and v_best else None
                lines.append(f"| tuner ≤ {TARGET_TUNER}× best fixed granularity ({label}), {pattern_label(p)} | "
                             f"{fmt_ratio(ratio) if ratio else '—'} (best {g_best or '—'}) | "
                             f"{verdict(None if ratio is None else ratio <= TARGET_TUNER)} |")
    restart_method = "uffd" if "uffd" in methods else (methods[0] if methods else None)
    for p in PATTERNS if restart_method else []:
        s = tables[restart_method][p]["restart_ratio"]
        ok = s.median >= TARGET_RESTART if s.times else None
        lines.append(f"| {args.intervals}-delta chain restart ≥ {TARGET_RESTART}× full restore throughput, "
                     f"{pattern_label(p)}, {restart_method} (page cache) | {s.cell(fmt_ratio)} | {verdict(ok)} |")
    lines += ["", "Verdicts are on the medians. The tuner's time is compared with the fastest of eleven fixed "
              "granularities, each a median of a few noisy deltas: that minimum is biased low, so a time "
              "verdict within the noise of the sweep's table says little; the bytes comparison is exact "
              "(the pages are fixed).", ""]
    return lines


def plot(args, methods, tables, sweep, size: int) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(16, 10))
    labels = [pattern_label(p) for p in PATTERNS]
    for ax, key, ylabel, title, log_scale in (
            (axes[0][0], "slowdown", "write loop tracked / untracked", "tracking overhead on the application",
             True),
            (axes[0][1], "durable_ratio", "delta / full time to durable", "checkpoint time to durable (L2)", True),
            (axes[1][0], "stored_ratio", "bytes stored / truly dirty", "bytes written (tuner)", False)):
        groups = [(label, {m: _named(tables[m][p][key], m) for m in methods}) for label, p in zip(labels, PATTERNS)]
        grouped_bars(ax, groups, log_scale=log_scale, keys=methods)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.tick_params(axis="x", labelrotation=45)
        ax.legend()
    axes[1][0].axhline(TARGET_BYTES, color="red", linewidth=0.8, linestyle="--")
    axes[0][1].axhline(TARGET_DURABLE, color="red", linewidth=0.8, linestyle="--")
    ax = axes[1][1]
    if sweep:
        xs = GRANULARITIES
        for p in PATTERNS:
            ys = [sweep[p][human(g)]["durable"].median if human(g) in sweep[p] and sweep[p][human(g)]["durable"].times
                  else float("nan") for g in xs]
            line, = ax.plot([x / 1024 for x in xs], [y * 1e3 for y in ys], marker=".", label=pattern_label(p))
            tuner = sweep[p]["auto"]["durable"]
            if tuner.times:
                ax.axhline(tuner.median * 1e3, color=line.get_color(), linewidth=0.6, linestyle=":")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("fixed granularity (KiB); dotted: the tuner")
        ax.set_ylabel("time to durable per delta (ms)")
        ax.set_title("fixed granularity sweep (uffd)")
        ax.legend(fontsize=7)
    else:
        ax.set_axis_off()
    title = f"Incremental checkpoints, {human(size)} state, median [min–max] of {args.repeats}"
    fig.suptitle(("SMOKE RUN, not a result — " if args.smoke else "") + title)
    fig.tight_layout()
    png = args.out / f"{NAME}.png"
    fig.savefig(png, dpi=100)
    log(f"wrote {png}")


def _named(s: Series, label: str) -> Series:
    s.label = label
    return s


if __name__ == "__main__":
    main()
