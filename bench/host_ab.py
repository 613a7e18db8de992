#!/usr/bin/env python3
"""Resurgo's host figures for two builds, process by process, taking turns.

bench/before_after.sh runs host_checkpoint.py once per build (before,
after, before again). On the 2-core VM that cannot tell a build's change
from the machine's: the blocking of a 256 MiB checkpoint, for one, has two
modes (about 10–11 and 15–16 ms) and the machine stays in one for many
seconds, whichever build runs. Here each build runs in --repeats fresh
processes, the builds taking turns (A B A B ...), and every process measures
what host_checkpoint.py measures of Resurgo, the same way:

  open + protect     a fresh store (default buffer, L2 only) in a new directory
  checkpoint k       blocking of checkpoints 1, 2 and 5 after open (and
                     open + protect + checkpoint 1: a store prepares a
                     missing directory at its first checkpoint), each
                     after --interval seconds of compute sweeps over the
                     state and waited for at L2 (host_checkpoint.py's "first
                     checkpoints", its --slowdown-interval); the same in a
                     store whose L2 directory was made before open; with
                     --first-stores N, N stores of each kind one after the
                     other (open + protect is the process's first store's)
  blocking           host_checkpoint.py's main loop: a store whose buffer
                     holds one state, local_keep=2, three warm-up versions,
                     then per checkpoint the memcpy floor (np.copyto into a
                     touched array), a small change, checkpoint(), wait(L2)
  to durable         checkpoint() until wait(v, level=2) returns
  restart            a new store in the same process: open + protect +
                     restart() of the newest version, from the page cache,
                     then with the files' pages evicted (posix_fadvise)

A process's figure is the median of its checkpoints (of its stores, for
the checkpoints after open: one ratio of two single checkpoints varies by
tens of percent from store to store on the 2-core VM, more than the 5 %
the A/B is to tell). Reported per build:
median [min–max] over the processes, and after / before paired by turn,
whose median is the build's change with the machine's modes shared by both.

    .venv/bin/python bench/host_ab.py --before-python /tmp/old/venv/bin/python \
        --before-label 9d8341d --after-label HEAD --repeats 10
    .venv/bin/python bench/host_ab.py --before-package /tmp/old-package \
        --before-label 9217f5b --after-label HEAD --repeats 8

--before-package DIR runs the old build with this interpreter, importing
resurgo from DIR (a copy of python/resurgo with its _core built at the old
commit) ahead of the editable install, as adjoint.py's does.
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
from typing import Dict, List, Tuple

from _common import (MiB, Series, add_common_args, evict, finish_common_args, fmt_time, log, machine_description,
                     machine_lines, parse_size, put_package_first, pyplot, report_header)

WARMUP_VERSIONS = 3  # as host_checkpoint.py
FIRST_CHECKPOINTS = 5  # as host_checkpoint.py: the 1st and 2nd against the 5th
SCHEDULING_POLICIES = {os.SCHED_OTHER: "SCHED_OTHER", os.SCHED_FIFO: "SCHED_FIFO", os.SCHED_RR: "SCHED_RR"}
# key: (label, ratio or time) in the order of the report
FIGURES = {
    "open": ("open + protect", False),
    "ckpt1_vs_5": (f"checkpoint 1 / checkpoint {FIRST_CHECKPOINTS} after open, blocking", True),
    "ckpt2_vs_5": (f"checkpoint 2 / checkpoint {FIRST_CHECKPOINTS} after open, blocking", True),
    "open_and_first": ("open + protect + checkpoint 1 blocking", False),
    "blocking": ("checkpoint() blocking, main loop", False),
    "blocking_vs_memcpy": ("checkpoint() blocking / memcpy floor", True),
    "durable": ("time to durable (L2), main loop", False),
    "ckpt1_vs_5_made": (f"checkpoint 1 / checkpoint {FIRST_CHECKPOINTS} after open, L2 directory there at open",
                        True),
    "restart": ("open + protect + restart in a new store (page cache)", False),
    "restart_cold": ("open + protect + restart in a new store (pages evicted)", False),
}


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def compute_step(state) -> None:
    """host_checkpoint.py's memory-bound sweep over the state, in place."""
    import numpy as np

    np.multiply(state, 0.5, out=state)
    np.add(state, 0.25, out=state)


def first_checkpoints(resurgo, state, where: Path, every: int, made: bool) -> tuple:
    """Open + protect and the blocking of each checkpoint after open."""
    config = dict(local_path=str(where / "l2"), persistent_path=str(where / "l4"), persistent_every=0, local_keep=2)
    if made:
        (where / "l2" / "ab-first").mkdir(mode=0o700, parents=True)
    started = time.perf_counter()
    store = resurgo.Store("ab-first", **config)
    store.protect("state", state)
    opened = time.perf_counter() - started
    blocked = []
    with store:
        for version in range(FIRST_CHECKPOINTS):
            for _ in range(every):
                compute_step(state)
            blocked.append(timed(lambda: store.checkpoint(version)))
            store.wait(version, level=2)
    return opened, blocked


def startup(resurgo, state, where: Path, interval: float, stores: int, out: Dict[str, List[float]]) -> None:
    step = statistics.median(timed(lambda: compute_step(state)) for _ in range(3))
    every = max(1, round(interval / step))
    for key in ("ckpt1_vs_5", "ckpt2_vs_5", "ckpt1_vs_5_made"):
        out[key] = []
    for store in range(stores):
        opened, blocked = first_checkpoints(resurgo, state, where / f"fresh{store}", every, False)
        if store == 0:  # the process's first open, as host_checkpoint.py's
            out["open"] = [opened]
            out["open_and_first"] = [opened + blocked[0]]
        out["ckpt1_vs_5"].append(blocked[0] / blocked[-1])
        out["ckpt2_vs_5"].append(blocked[1] / blocked[-1])
        _, blocked = first_checkpoints(resurgo, state, where / f"made{store}", every, True)
        out["ckpt1_vs_5_made"].append(blocked[0] / blocked[-1])


def main_loop(resurgo, state, where: Path, checkpoints: int, out: Dict[str, List[float]]) -> dict:
    import numpy as np

    config = dict(local_path=str(where / "l2"), persistent_every=0, persistent_path=str(where / "l4"),
                  buffer_capacity=state.nbytes, local_keep=2)
    scratch = np.empty_like(state)
    scratch.fill(0.0)  # the floor copies into a touched array, as host_checkpoint.py's
    stride = max(1, state.size // 1024)
    for key in ("blocking", "blocking_vs_memcpy", "durable"):
        out[key] = []
    with resurgo.Store("ab-loop", **config) as store:
        store.protect("state", state)
        for version in range(WARMUP_VERSIONS):
            store.checkpoint(version)
            store.wait(version, level=2)
        for k in range(checkpoints):
            version = WARMUP_VERSIONS + k
            memcpy = timed(lambda: np.copyto(scratch, state))
            state[k::stride] += 1.0
            started = time.perf_counter()
            store.checkpoint(version)
            blocked = time.perf_counter() - started
            store.wait(version, level=2)
            out["durable"].append(time.perf_counter() - started)
            out["blocking"].append(blocked)
            out["blocking_vs_memcpy"].append(blocked / memcpy)
    return config


def restart(resurgo, state, config: dict, out: Dict[str, List[float]]) -> None:
    for key, cold in (("restart", False), ("restart_cold", True)):
        if cold:
            for path in Path(config["local_path"]).rglob("*.rsg"):
                evict(path)
        state.fill(0.0)
        started = time.perf_counter()
        with resurgo.Store("ab-loop", **config) as store:
            store.protect("state", state)
            store.restart()
            out[key] = [time.perf_counter() - started]


def child(nbytes: int, checkpoints: int, interval: float, stores: int, work: Path, package: str) -> None:
    """One process of one build (resurgo from `package` when given): prints
    {figure: [values]} as JSON."""
    import numpy as np

    put_package_first(package)
    import resurgo

    state = np.arange(nbytes // 8, dtype=np.float64)
    out: Dict[str, List[float]] = {}
    startup(resurgo, state, work / "first", interval, stores, out)
    config = main_loop(resurgo, state, work / "loop", checkpoints, out)
    restart(resurgo, state, config, out)
    print(json.dumps(out))


def run_child(build: Tuple[str, str], args, work: Path) -> Dict[str, List[float]]:
    """`build`: (the Python to run, the package directory it imports resurgo from or "")."""
    python, package = build
    command = [python, str(Path(__file__).resolve()), "--child", "--size", str(args.size),
               "--checkpoints", str(args.checkpoints), "--interval", str(args.interval),
               "--first-stores", str(args.first_stores), "--dir", str(work), "--package", package]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"host_ab.py: a process of {python} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(args, builds: Dict[str, Tuple[str, str]], root: Path) -> Dict[str, Dict[str, Series]]:
    series = {label: {key: Series(text) for key, (text, _) in FIGURES.items()} for label in builds}
    every_blocking = {label: [] for label in builds}
    for turn in range(args.repeats):
        for label, build in builds.items():
            work = Path(tempfile.mkdtemp(dir=root, prefix=f"{label}-"))
            got = run_child(build, args, work)
            subprocess.run(["rm", "-rf", str(work)], check=True)
            for key in FIGURES:
                series[label][key].times.append(statistics.median(got[key]))
            every_blocking[label].extend(got["blocking"])
            log(f"turn {turn + 1}/{args.repeats} {label}: blocking " +
                " ".join(fmt_time(t) for t in got["blocking"]) +
                f"; open {fmt_time(got['open'][0])}, restart {fmt_time(got['restart'][0])}")
    args.every_blocking = every_blocking
    return series


def paired(before: Series, after: Series) -> Series:
    ratio = Series("after / before")
    ratio.times = [a / b for a, b in zip(after.times, before.times)]
    return ratio


def report_lines(args, series, before: str, after: str) -> List[str]:
    number = lambda x: f"{x:.2f}"
    lines = [f"| figure | {before} | {after} | {after} / {before}, paired by turn | |", "|---|---|---|---|---|"]
    within = slower = 0
    for key, (text, is_ratio) in FIGURES.items():
        change = paired(series[before][key], series[after][key])
        verdict = "within 5 %" if abs(change.median - 1) <= 0.05 else \
            "faster by more than 5 %" if change.median < 1 else "slower by more than 5 %"
        within += verdict == "within 5 %"
        slower += verdict.startswith("slower")
        cell = (lambda s: s.cell(number)) if is_ratio else (lambda s: s.cell())
        lines.append(f"| {text} | {cell(series[before][key])} | {cell(series[after][key])} | "
                     f"{change.cell(lambda x: f'{x:.3f}')} | {verdict} |")
    lines += ["", f"{within} of {len(FIGURES)} figures within 5 %, {slower} slower by more than 5 % (median of "
              "the paired ratios; every figure is better lower).", ""]
    lines += ["Every main-loop checkpoint's blocking, all processes together (median [min–max]):", ""]
    for label in (before, after):
        every = Series("", times=args.every_blocking[label])
        lines.append(f"- {label}: {every.cell()} over {len(every.times)} checkpoints")
    return lines


def plot(args, before: str, after: str) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for index, label in enumerate((before, after)):
        times = args.every_blocking[label]
        per_process = args.checkpoints
        xs = [2 * turn + index + (k + 0.5) / per_process
              for turn in range(len(times) // per_process) for k in range(per_process)]
        ax.plot(xs, [t * 1e3 for t in times], ".", label=label)
    ax.set_xlabel("process, in the order they ran (each one's checkpoints in order)")
    ax.set_ylabel("checkpoint() blocking (ms)")
    ax.set_title(f"{args.size // MiB} MiB checkpoint() blocking, builds taking turns")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "host_ab.png", dpi=120)


def report(args, series, before: str, after: str, machine) -> None:
    lines = report_header("Resurgo's host figures of two builds, process by process", "host_ab.py", args,
                          f"Each repeat is one fresh process per build (builds taking turns) with a "
                          f"{args.size // MiB} MiB state and {args.checkpoints} main-loop checkpoints; a "
                          "process's figure is the median of its checkpoints (for the figures after open, "
                          f"of its {args.first_stores} stores of each kind).")
    lines += machine_lines(machine) + report_lines(args, series, before, after)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "host_ab.md").write_text("\n".join(lines) + "\n")
    plot(args, before, after)
    log(f"wrote {args.out / 'host_ab.md'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, "host_ab", "where the stores go (default: a temporary directory in /tmp)")
    ap.add_argument("--before-python", help="the Python whose resurgo is the old build")
    ap.add_argument("--before-package", default="", metavar="DIR",
                    help="instead: a directory holding the old build's resurgo/ (with its _core), imported "
                         "by this interpreter ahead of the editable install")
    ap.add_argument("--package", default="", help=argparse.SUPPRESS)
    ap.add_argument("--before-label", default="before")
    ap.add_argument("--after-label", default="after", help="this interpreter's resurgo")
    ap.add_argument("--size", type=lambda t: parse_size(t), default=256 * MiB)
    ap.add_argument("--checkpoints", type=int, default=8, help="main-loop checkpoints per process")
    ap.add_argument("--interval", type=float, default=0.4,
                    help="seconds of computing before each checkpoint after open (host_checkpoint.py's "
                         "--slowdown-interval; default 0.4)")
    ap.add_argument("--first-stores", type=int, default=3,
                    help="stores per process for the figures after open, each kind (default 3)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    if args.child:
        child(args.size, args.checkpoints, args.interval, args.first_stores, args.dir, args.package)
        return
    if bool(args.before_python) == bool(args.before_package):
        ap.error("give one of --before-python and --before-package")
    finish_common_args(ap, args)
    if args.first_stores < 1:
        ap.error("--first-stores must be at least 1")
    root = Path(tempfile.mkdtemp(prefix="resurgo-host-ab-", dir=args.dir))
    builds = {args.before_label: (args.before_python or sys.executable, args.before_package),
              args.after_label: (sys.executable, "")}
    series = measure(args, builds, root)
    import resurgo

    machine = machine_description(root, resurgo)
    policy = os.sched_getscheduler(0)
    machine["scheduling policy"] = SCHEDULING_POLICIES.get(policy, "other") + \
        " (under `chrt -f`: the machine's other processes wait while the builds run)" * (policy == os.SCHED_FIFO)
    report(args, series, args.before_label, args.after_label, machine)
    if not args.keep:
        subprocess.run(["rm", "-rf", str(root)], check=True)


if __name__ == "__main__":
    main()
