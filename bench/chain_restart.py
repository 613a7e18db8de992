#!/usr/bin/env python3
"""Newest-version restart of a 10-delta chain against a full restore (issue
33), for this build and, with --before-binary, another one (the code before a
change), side by side.

Runs build/cpp/bench/incremental (bench/incremental.cpp) once per (repeat,
build, mode): a copy-mode process takes full checkpoints and restores the
newest (the full restore); a delta-mode process writes every pattern of
bench/incremental.py (one full version, then --intervals deltas,
delta.compact_after = 0: chains left as they are), closes its store and
restores each pattern's newest version in a new store, checked bit for bit.
The order of the processes rotates at each repeat. Restores read the page
cache (dropping it needs root).

Per pattern and build, each repeat's figure is the chain's restore
throughput against the full restore of the same build in the same repeat;
with --before-binary also the chain restore's time, this build against the
other, paired by repeat.

Writes bench/results/chain_restart.md and .png.

    .venv/bin/python bench/chain_restart.py --size 256MiB --before-binary /tmp/incremental_before
    .venv/bin/python bench/chain_restart.py --smoke --repeats 1 --size 16MiB
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
    grouped_bars,
    human,
    log,
    machine_description,
    machine_lines,
    parse_size,
    plot_title,
    pyplot,
    report_header,
)
from incremental import DEFAULT_BINARY, PATTERNS, TARGET_RESTART, Driver, build_type, fmt_ratio, pattern_label, series  # noqa: E402

SCRIPT = "chain_restart.py"
NAME = "chain_restart"
FULL_INTERVALS = 2  # the copy-mode process: the newest of two full versions restored


def restart_seconds(rows: List[dict], pattern: Optional[str] = None) -> Optional[float]:
    row = next((r for r in rows if r["kind"] == "restart" and (pattern is None or r["pattern"] == pattern)), None)
    if row is None:
        return None
    if not row["verified"]:
        sys.exit(f"{SCRIPT}: the restart of {row['pattern']} did not give the newest version {row['newest']} bit "
                 f"for bit (version {row['version']}; skipped: {'; '.join(row['skipped']) or 'nothing'})")
    return row["seconds"]


def run(args, drivers: Dict[str, Driver]) -> Dict[str, Dict[str, List[List[dict]]]]:
    """{build: {"copy": [rows per repeat], "delta": [rows per repeat]}}."""
    runs = {build: {"copy": [], "delta": []} for build in drivers}
    kinds = [(build, mode) for build in drivers for mode in ("copy", "delta")]
    for r in range(args.repeats):
        for build, mode in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
            t0 = time.perf_counter()
            if mode == "copy":
                _, rows, _ = drivers[build].run(args.size, "copy", [PATTERNS[0]], FULL_INTERVALS, restart=True)
            else:
                _, rows, _ = drivers[build].run(args.size, "delta", PATTERNS, args.intervals, args.method,
                                                restart=True, extra=("--compact-after", "0"))
            runs[build][mode].append(rows)
            log(f"repeat {r + 1}/{args.repeats}: {build}, {mode} ({time.perf_counter() - t0:.1f} s)")
    return runs


def analyse(runs: Dict[str, Dict[str, List[List[dict]]]]) -> Dict[str, Dict[str, object]]:
    """Per pattern: the Series "ratio <build>" (full / chain restore time,
    i.e. throughput chain / full) and, with two builds, "after / before"."""
    builds = list(runs)
    out: Dict[str, Dict[str, object]] = {}
    for p in PATTERNS:
        per: Dict[str, List[Optional[float]]] = {}
        chain = {b: [restart_seconds(rows, p) for rows in runs[b]["delta"]] for b in builds}
        for b in builds:
            full = [restart_seconds(rows) for rows in runs[b]["copy"]]
            per[f"ratio {b}"] = [f / c if f and c else None for f, c in zip(full, chain[b])]
        if len(builds) == 2:
            per["after / before"] = [a / b if a and b else None for a, b in zip(chain["this"], chain["before"])]
        out[p] = {k: series(k, v) for k, v in per.items()}
    return out


def write_report(args, root: Path, table: Dict, elapsed: float, load: List[float]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    machine = machine_description(root)
    machine.pop("NumPy", None)
    machine["program"] = f"{args.binary} ({build_type(args.binary)})"
    if args.before_binary:
        machine["before"] = f"{args.before_binary} ({build_type(args.before_binary)})"
    machine["load average (1 min) at start and end"] = f"{load[0]:.2f}, {load[-1]:.2f}"
    lines = report_header(f"Chain restart: the newest of {args.intervals} deltas against a full restore", SCRIPT,
                          args, extra=f"State {human(args.size)}, tracking `{args.method}`; one process per "
                                      "(repeat, build, mode), in an order rotated at each repeat.")
    lines += machine_lines(machine)
    columns = list(next(iter(table.values())))
    lines += ["`ratio`: full restore time / chain restore time of the same build in the same repeat (the "
              f"throughput ratio; target ≥ {TARGET_RESTART}). `after / before`: this build's chain restore time "
              "over the other build's, paired by repeat (below 1: faster now).", "",
              "| pattern | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for p in PATTERNS:
        lines.append(f"| {pattern_label(p)} | " + " | ".join(table[p][c].cell(fmt_ratio) for c in columns) + " |")
    met = sum(1 for p in PATTERNS if table[p]["ratio this"].times and table[p]["ratio this"].median >= TARGET_RESTART)
    lines += ["", f"This build meets the target on {met} of {len(PATTERNS)} patterns. The run took {elapsed:.0f} s. "
              f"Plot: `{NAME}.png`.", ""]
    md = args.out / f"{NAME}.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")
    plot(args, table, columns)


def plot(args, table: Dict, columns: List[str]) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(12, 5))
    ratios = [c for c in columns if c.startswith("ratio")]
    groups = [(pattern_label(p), {c: table[p][c] for c in ratios}) for p in PATTERNS]
    grouped_bars(ax, groups, keys=ratios, log_scale=False)
    ax.axhline(TARGET_RESTART, color="black", linestyle="--", label=f"target {TARGET_RESTART}")
    ax.set_xticklabels([name for name, _ in groups], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("chain restore / full restore (throughput)")
    ax.legend(fontsize=8)
    ax.set_title(plot_title(f"newest of {args.intervals} deltas against a full restore, {human(args.size)}", args))
    fig.tight_layout()
    png = args.out / f"{NAME}.png"
    fig.savefig(png, dpi=100)
    log(f"wrote {png}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY,
                    help="the incremental program (default: build/cpp/bench/incremental)")
    ap.add_argument("--before-binary", type=Path, default=None,
                    help="another build of the incremental program, run in every repeat too")
    ap.add_argument("--size", type=parse_size, default=256 * MiB, help="state size (default 256MiB)")
    ap.add_argument("--method", default="auto", help="tracking method (default auto: uffd where available)")
    ap.add_argument("--intervals", type=int, default=10, help="deltas per chain (default 10)")
    add_common_args(ap, NAME, "target directory (node-local disk, not tmpfs); default: a fresh directory "
                              "under /tmp")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    if args.size % 4096 or args.intervals < 1:
        ap.error("--size must be whole pages and --intervals >= 1")
    args.binary = args.binary.resolve()
    for binary in (args.binary, args.before_binary):
        if binary is not None and not binary.is_file():
            sys.exit(f"{SCRIPT}: {binary} not found. Build it first: cmake --build build/cpp --target incremental")
    created = args.dir is None
    root = Path(tempfile.mkdtemp(prefix="resurgo-bench-", dir="/tmp")) if created else args.dir
    root.mkdir(parents=True, exist_ok=True)
    check_resources(SCRIPT, root, human(args.size) + " of state", 4.2 * args.size,
                    args.size * (1 + args.intervals / 2) + 1024 * MiB)
    drivers = {"this": Driver(args.binary, root / "this")}
    if args.before_binary:
        args.before_binary = args.before_binary.resolve()
        drivers["before"] = Driver(args.before_binary, root / "before")
    try:
        load = [os.getloadavg()[0]]
        started = time.perf_counter()
        runs = run(args, drivers)
        load.append(os.getloadavg()[0])
        write_report(args, root, analyse(runs), time.perf_counter() - started, load)
    finally:
        if created and not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
