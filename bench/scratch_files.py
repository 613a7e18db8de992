#!/usr/bin/env python3
"""What each version costs on an L2 directory whose versions are removed
soon after they are written (an adjoint's DISK store, issue 27): the
default durable L2 against a scratch one (`local.durable = false`: nothing
synced, and the files of removed versions written over by later versions,
docs/config.md), measured in the same run.

One run (a process of its own) opens a store with its versions on L2 only
(`local.keep = 0`, the store's memory level off), protects one array of the
state's size, and --versions times writes a word of it, checkpoints it and
discards the version --lag versions back, then waits for the last; the
process's wall and CPU time (user + system, every thread: the writer's
file system work included) over that loop, per version, are the figures,
beside the copy of the state (np.copyto, the floor of a capture) measured
in the same process. Rows run interleaved in every repeat, in an order
that turns from repeat to repeat.

With --before-package (a directory holding resurgo/ with its _core
extension, e.g. an older commit's python/resurgo with its build's _core),
the scratch row runs once more with that package: the before/after of a
change to the scratch level.

Writes bench/results/scratch_files.md and .png (--name for another name).

    .venv/bin/python bench/scratch_files.py
    .venv/bin/python bench/scratch_files.py --smoke --repeats 1 --versions 200
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (Series, add_common_args, finish_common_args, fmt_time, human, log, machine_description,  # noqa: E402
                     machine_lines, parse_sizes, plot_title, pyplot, grouped_bars, report_header)

ROWS = ("durable", "scratch")
BEFORE = "scratch@before"


def worker(args) -> None:
    """One run: prints {wall, cpu, copy} in seconds per version as JSON."""
    if args.package:
        sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__name__.startswith("ScikitBuild")]
        sys.path.insert(0, args.package)
    import numpy as np
    import resurgo

    state = np.zeros(args.bytes // 8)
    touched = np.ones_like(state)
    copies = []
    for _ in range(7):
        start = time.perf_counter()
        np.copyto(touched, state)
        copies.append(time.perf_counter() - start)
    store = resurgo.Store("scratch-files", local_path=args.dir, local_every=1, local_keep=0, persistent_every=0,
                          memory_every=0, local_durable=args.row == "durable", buffer_capacity="64MiB")
    store.protect("state", state)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    for version in range(args.versions):
        state[version % state.size] = version
        store.checkpoint(version)
        if version >= args.lag:
            store.discard(version - args.lag)
        if args.step_us:
            time.sleep(args.step_us * 1e-6)
    store.wait()
    wall = time.perf_counter() - start
    end = resource.getrusage(resource.RUSAGE_SELF)
    store.close()
    cpu = (end.ru_utime - usage.ru_utime) + (end.ru_stime - usage.ru_stime)
    print(json.dumps({"wall": wall / args.versions, "cpu": cpu / args.versions, "copy": sorted(copies)[3]}))


def run_one(row: str, nbytes: int, args, root: Path) -> Dict[str, float]:
    directory = tempfile.mkdtemp(prefix="run-", dir=root)
    package = str(args.before_package) if row == BEFORE else ""
    command = [sys.executable, __file__, "--worker", "--row", row.split("@")[0], "--bytes", str(nbytes),
               "--versions", str(args.versions), "--lag", str(args.lag), "--step-us", str(args.step_us),
               "--dir", directory, "--package", package]
    try:
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return json.loads(output.splitlines()[-1])


def measure(args, root: Path) -> Dict[tuple, Dict[str, Series]]:
    rows = list(ROWS) + ([BEFORE] if args.before_package else [])
    results: Dict[tuple, Dict[str, Series]] = {}
    for repeat in range(args.repeats):
        for nbytes in args.sizes:
            # Each row follows each other in turn: a run that removed many
            # files makes the next one's creations dearer on some file
            # systems (ext4 without a journal skips recently freed inodes).
            for row in rows[repeat % len(rows):] + rows[:repeat % len(rows)]:
                log(f"repeat {repeat + 1}/{args.repeats}: {human(nbytes)} {row}")
                figures = run_one(row, nbytes, args, root)
                series = results.setdefault((nbytes, row), {k: Series(k) for k in ("wall", "cpu", "copy",
                                                                                   "wall ratio", "cpu ratio")})
                for key in ("wall", "cpu", "copy"):
                    series[key].times.append(figures[key])
            for row in rows:
                series, durable = results[(nbytes, row)], results[(nbytes, "durable")]
                series["wall ratio"].times.append(series["wall"].times[-1] / durable["wall"].times[-1])
                series["cpu ratio"].times.append(series["cpu"].times[-1] / durable["cpu"].times[-1])
    return results


def row_name(row: str, args) -> str:
    names = {"durable": "durable L2 (default)", "scratch": "scratch L2 (local.durable = false)"}
    return names.get(row, f"scratch L2, before: {args.before_label or args.before_package}")


def report(results, args, machine) -> List[str]:
    ratio = lambda x: f"{x:.3f}"  # noqa: E731
    lines = report_header("A scratch L2 against a durable one: versions removed soon after", "scratch_files.py", args)
    lines += machine_lines(machine)
    lines += ["## What is measured", "",
              f"{args.versions} checkpoints of one array, each version discarded {args.lag} versions later, "
              f"{args.step_us:g} µs of sleep between checkpoints; L2 only (`local.keep = 0`, memory level off, "
              "`buffer.capacity = 64MiB`). Per version: the process's wall and CPU (user + system, every thread) "
              "over the loop and the final wait; ratios to the durable row of the same repeat. The copy is "
              "np.copyto of the state (the floor of a capture). The rows' order turns from repeat to repeat.", "",
              "| state | row | wall per version | CPU per version | wall / durable | CPU / durable | copy of the state |",
              "|---|---|---|---|---|---|---|"]
    for (nbytes, row), s in results.items():
        lines.append(f"| {human(nbytes)} | {row_name(row, args)} | {s['wall'].cell()} | {s['cpu'].cell()} | "
                     f"{s['wall ratio'].cell(ratio)} | {s['cpu ratio'].cell(ratio)} | {s['copy'].cell()} |")
    return lines + [""]


def plot(results, args, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    groups = []
    for nbytes in args.sizes:
        series = {row: results[(nbytes, row)]["cpu"] for row in ROWS + ((BEFORE,) if args.before_package else ())}
        for row, s in series.items():
            s.label = row_name(row, args)
        groups.append((human(nbytes), series))
    grouped_bars(ax, groups)
    ax.set_ylabel("CPU seconds per version (every thread)")
    ax.set_title(plot_title("CPU per version on L2", args), fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=parse_sizes, default=parse_sizes("64KiB,256KiB,1MiB"),
                    help="state sizes (default 64KiB,256KiB,1MiB)")
    ap.add_argument("--versions", type=int, default=3000, help="checkpoints per run (default 3000)")
    ap.add_argument("--lag", type=int, default=8, help="a version is discarded this many versions later (default 8)")
    ap.add_argument("--step-us", type=float, default=0, help="sleep between checkpoints in µs (default 0)")
    ap.add_argument("--before-package", type=Path, default=None, metavar="DIR")
    ap.add_argument("--before-label", default="")
    ap.add_argument("--name", default="scratch_files")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--row", help=argparse.SUPPRESS)
    ap.add_argument("--bytes", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--package", default="", help=argparse.SUPPRESS)
    add_common_args(ap, "scratch_files", "where the runs' directories go (default: a temporary directory)")
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    if args.before_package is not None and not (args.before_package / "resurgo" / "__init__.py").is_file():
        ap.error(f"--before-package {args.before_package}: no resurgo/__init__.py in it")
    root = Path(tempfile.mkdtemp(prefix="resurgo-scratch-", dir=args.dir))
    try:
        machine = machine_description(root)
        machine["load average (1, 5, 15 min) at start"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        results = measure(args, root)
        machine["load average (1, 5, 15 min) at end"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.md").write_text("\n".join(report(results, args, machine)))
    plot(results, args, args.out / f"{args.name}.png")
    print("\n".join(report(results, args, machine)[-len(results) - 1:]))
    log(f"wrote {args.out / args.name}.md and .png")


if __name__ == "__main__":
    main()
