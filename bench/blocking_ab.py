#!/usr/bin/env python3
"""checkpoint() blocking of two builds, process by process, taking turns.

host_checkpoint.py measures the blocking of a few checkpoints in one
process per build; bench/before_after.sh runs it once per build (before,
after, before again). On the 2-core VM the blocking of a 256 MiB checkpoint
has two modes, about 10 and about 16 ms, and a process often stays in one
for seconds: three processes cannot tell a build's change from the machine's
mode. Here each build runs in --processes fresh processes, the builds taking
turns (A B A B ...), each process doing what host_checkpoint.py's main loop
does (buffer of one state, local_keep=2, three warm-up versions, then
checkpoint / wait(L2)); before every checkpoint the process times the same
memcpy floor as host_checkpoint.py (np.copyto of the state into a touched
array, one thread), at the same place (after the previous wait).

Reported per build: blocking, memcpy and blocking / memcpy (median
[min–max] of the processes' medians), and after / before paired by turn.

    .venv/bin/python bench/blocking_ab.py --before-python /tmp/old/venv/bin/python \
        --before-label 9d8341d --processes 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from _common import (MiB, Series, add_common_args, finish_common_args, fmt_time, log, machine_description,
                     machine_lines, parse_size, pyplot, report_header)

WARMUP_VERSIONS = 3  # as host_checkpoint.py
SCHEDULING_POLICIES = {os.SCHED_OTHER: "SCHED_OTHER", os.SCHED_FIFO: "SCHED_FIFO", os.SCHED_RR: "SCHED_RR"}


def memcpy(dst, src) -> float:
    import numpy as np

    started = time.perf_counter()
    np.copyto(dst, src)
    return time.perf_counter() - started


def child(nbytes: int, checkpoints: int, work: Path) -> None:
    """One process: prints {"blocking": [...], "floor": [...]} as JSON."""
    import numpy as np
    import resurgo

    state = np.arange(nbytes // 8, dtype=np.float64)
    scratch = np.empty_like(state)
    scratch.fill(0.0)  # touched, as host_checkpoint.py's floor
    out: Dict[str, List[float]] = {"blocking": [], "floor": []}
    config = dict(local_path=str(work / "l2"), persistent_every=0, persistent_path=str(work / "l4"),
                  buffer_capacity=nbytes, local_keep=2)
    stride = max(1, state.size // 1024)
    with resurgo.Store("blocking-ab", **config) as store:
        store.protect("state", state)
        for version in range(WARMUP_VERSIONS):
            store.checkpoint(version)
            store.wait(version, level=2)
        for k in range(checkpoints):
            version = WARMUP_VERSIONS + k
            out["floor"].append(memcpy(scratch, state))
            state[k::stride] += 1.0
            started = time.perf_counter()
            store.checkpoint(version)
            out["blocking"].append(time.perf_counter() - started)
            store.wait(version, level=2)
    print(json.dumps(out))


def run_child(python: str, args, work: Path) -> Dict[str, List[float]]:
    command = [python, str(Path(__file__).resolve()), "--child", "--size", str(args.size),
               "--checkpoints", str(args.checkpoints), "--dir", str(work)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(args, builds: Dict[str, str], root: Path) -> Dict[str, Dict[str, Series]]:
    series = {label: {"blocking": Series(f"{label}: checkpoint() blocking"),
                      "floor": Series(f"{label}: memcpy"),
                      "ratio": Series(f"{label}: blocking / memcpy"),
                      "all": Series(f"{label}: every checkpoint")} for label in builds}
    for turn in range(args.repeats):
        for label, python in builds.items():
            work = Path(tempfile.mkdtemp(dir=root, prefix=f"{label}-"))
            got = run_child(python, args, work)
            subprocess.run(["rm", "-rf", str(work)], check=True)
            ratios = [b / f for b, f in zip(got["blocking"], got["floor"])]
            series[label]["blocking"].times.append(statistics.median(got["blocking"]))
            series[label]["floor"].times.append(statistics.median(got["floor"]))
            series[label]["ratio"].times.append(statistics.median(ratios))
            series[label]["all"].times.extend(got["blocking"])
            log(f"turn {turn + 1}/{args.repeats} {label}: blocking " +
                " ".join(fmt_time(t) for t in got["blocking"]) +
                f"; floor median {fmt_time(statistics.median(got['floor']))}")
    return series


def paired(series: Dict[str, Dict[str, Series]], before: str, after: str, key: str) -> Series:
    ratio = Series(f"{after} / {before}, {key}")
    ratio.times = [a / b for a, b in zip(series[after][key].times, series[before][key].times)]
    return ratio


def report(args, series, before: str, after: str, machine) -> None:
    number = lambda x: f"{x:.2f}"
    lines = report_header("checkpoint() blocking of two builds, process by process", "blocking_ab.py", args,
                          f"Each repeat is one fresh process per build (builds taking turns), each with "
                          f"{args.checkpoints} checkpoints of {args.size // MiB} MiB; a process's figure is "
                          "the median of its checkpoints.")
    lines += machine_lines(machine)
    lines += ["| build | blocking | memcpy (same process) | blocking / memcpy |", "|---|---|---|---|"]
    for label in (before, after):
        s = series[label]
        lines.append(f"| {label} | {s['blocking'].cell()} | {s['floor'].cell()} | {s['ratio'].cell(number)} |")
    lines += ["", f"Paired by turn ({after} / {before}): blocking {paired(series, before, after, 'blocking').cell(number)}, "
              f"blocking / memcpy {paired(series, before, after, 'ratio').cell(number)}.", ""]
    lines += ["Every checkpoint's blocking, all processes together (median [min–max]):", ""]
    for label in (before, after):
        lines.append(f"- {label}: {series[label]['all'].cell()} over {len(series[label]['all'].times)} checkpoints")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "blocking_ab.md").write_text("\n".join(lines) + "\n")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for index, label in enumerate((before, after)):
        per_process = args.checkpoints
        times = series[label]["all"].times
        xs = [2 * turn + index + (k + 0.5) / per_process
              for turn in range(len(times) // per_process) for k in range(per_process)]
        ax.plot(xs, [t * 1e3 for t in times], ".", label=label)
    ax.set_xlabel("process, in the order they ran (each one's checkpoints in order)")
    ax.set_ylabel("checkpoint() blocking (ms)")
    ax.set_title(f"{args.size // MiB} MiB checkpoint() blocking, builds taking turns")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "blocking_ab.png", dpi=120)
    log(f"wrote {args.out / 'blocking_ab.md'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, "blocking_ab", "where the stores go (default: a temporary directory in /tmp)")
    ap.add_argument("--before-python", help="the Python whose resurgo is the old build")
    ap.add_argument("--before-label", default="before")
    ap.add_argument("--after-label", default="after", help="this interpreter's resurgo")
    ap.add_argument("--size", type=lambda t: parse_size(t), default=256 * MiB)
    ap.add_argument("--checkpoints", type=int, default=8, help="measured checkpoints per process")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    if args.child:
        child(args.size, args.checkpoints, args.dir)
        return
    if not args.before_python:
        ap.error("--before-python is required")
    finish_common_args(ap, args)
    root = Path(tempfile.mkdtemp(prefix="resurgo-blocking-ab-", dir=args.dir))
    builds = {args.before_label: args.before_python, args.after_label: sys.executable}
    series = measure(args, builds, root)
    import resurgo

    machine = machine_description(root, resurgo)
    machine["scheduling policy"] = SCHEDULING_POLICIES.get(os.sched_getscheduler(0), "other") + \
        " (under `chrt -f`, the machine's other processes wait while the builds run)" * \
        (os.sched_getscheduler(0) == os.SCHED_FIFO)
    report(args, series, args.before_label, args.after_label, machine)
    if not args.keep:
        subprocess.run(["rm", "-rf", str(root)], check=True)


if __name__ == "__main__":
    main()
