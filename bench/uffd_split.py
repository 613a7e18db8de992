#!/usr/bin/env python3
"""Huge pages split by uffd tracking: how much of a tracked region stays
huge, and what the split costs the application's steps.

uffd's asynchronous write protection resolves the first write to a
transparent huge page by splitting it, and the memory stays in 4 KiB pages.
One float32 array (--size, aligned to the huge page size, in huge pages at
first touch) is rewritten whole per interval and checkpointed, under three
stores measured in the same run, interleaved per repeat:

- copy: no tracking (the baseline);
- split: the same, on an array first rewritten twice under uffd tracking
  (a delta store, closed before): what the split alone costs the steps,
  as `auto` paid it for a copied region at rest before its pages were
  collapsed again;
- delta: capture.mode = delta with track.method = uffd, tracked at every
  interval, so never collapsed (the kernel refuses MADV_COLLAPSE on
  write-protected pages);
- auto: capture.mode = auto, which copies the array (written whole) and
  tracks it one interval in 8; while it rests, its huge pages are collapsed
  again on a thread of their own (capture/auto_capture.h).

Per interval the application rewrites the array (np.negative), sums it
(sequential read) and gathers 2^20 random elements (TLB-bound reads), each timed in the application thread's CPU time, then
checkpoints and waits for the version. The share of the array in huge pages
(/proc/self/smaps AnonHugePages) is read just before each checkpoint.

    .venv/bin/python bench/uffd_split.py                 # about a minute
    .venv/bin/python bench/uffd_split.py --smoke --repeats 1 --intervals 4
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from _common import (MiB, Series, add_common_args, check_resources, finish_common_args, fmt_time,
                     import_resurgo, log, machine_description, machine_lines, parse_size, plot_title,
                     pyplot, report_header)

SCRIPT = "uffd_split.py"
resurgo = import_resurgo(SCRIPT)

ITEM = 4  # float32
HUGE = 2 * MiB
WARMUP_INTERVALS = 2
GATHERED = 1 << 20
UFFD_DELTA = {"capture_mode": "delta", "track_method": "uffd"}
ARMS = {
    "copy": {"capture_mode": "copy"},
    "split": {"capture_mode": "copy"},  # after WARMUP_INTERVALS under UFFD_DELTA
    "delta": UFFD_DELTA,
    "auto": {"capture_mode": "auto"},
}
# What each interval measures: the application thread's CPU seconds in each
# of the three steps (a busy machine's preemption does not inflate them), the process's
# CPU seconds per interval (every thread: tracking, pipeline, collapser), and
# the share of the array in huge pages.
MEASURES = ("write", "read", "gather", "process_cpu", "huge")


def aligned_array(nbytes: int) -> np.ndarray:
    """float32 array starting on a huge page boundary, advised MADV_HUGEPAGE
    by NumPy (its allocations of 4 MiB and more, Linux)."""
    raw = np.empty((nbytes + HUGE) // ITEM, dtype=np.float32)
    skip = (-raw.ctypes.data % HUGE) // ITEM
    arr = raw[skip : skip + nbytes // ITEM]
    arr[:] = np.arange(arr.size, dtype=np.float32)
    return arr


def huge_share(arr: np.ndarray) -> float:
    """AnonHugePages of the mapping holding `arr` / its bytes."""
    address = arr.ctypes.data
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                begin, end = (int(x, 16) for x in head.split("-"))
                inside = begin <= address < end
            elif inside and head == "AnonHugePages:":
                return min(1.0, int(line.split()[1]) * 1024 / arr.nbytes)
    return 0.0


def split_by_tracking(arr: np.ndarray, root: Path) -> None:
    """WARMUP_INTERVALS rewrites tracked by uffd, then the store closes (the
    tracking stops); its huge pages stay split."""
    l2 = root / "split-tracking"
    store = resurgo.Store("split-tracking", local_path=str(l2), persistent_every=0, local_keep=2,
                          buffer_capacity=2 * arr.nbytes, pipeline_compress="none", **UFFD_DELTA)
    try:
        store.protect("field", arr)
        for v in range(WARMUP_INTERVALS):
            np.negative(arr, out=arr)
            store.checkpoint(v)
        store.wait(WARMUP_INTERVALS - 1, level=2)
    finally:
        store.close()
        shutil.rmtree(l2, ignore_errors=True)


def run_arm(arm: str, nbytes: int, args, root: Path, gather_at: np.ndarray) -> Dict[str, float]:
    """One store over a fresh array: the median over the measured intervals."""
    arr = aligned_array(nbytes)
    initial_huge = huge_share(arr)
    if arm == "split":
        split_by_tracking(arr, root)
    l2 = root / f"split-{arm}"
    store = resurgo.Store(f"split-{arm}", local_path=str(l2), persistent_every=0, local_keep=2,
                          buffer_capacity=2 * nbytes, pipeline_compress="none", **ARMS[arm])
    seen: Dict[str, List[float]] = {m: [] for m in MEASURES}
    try:
        store.protect("field", arr)
        for v in range(WARMUP_INTERVALS + args.intervals):
            c0 = time.process_time()
            t0 = time.thread_time()
            np.negative(arr, out=arr)
            t1 = time.thread_time()
            float(np.sum(arr))
            t2 = time.thread_time()
            float(np.sum(arr[gather_at]))
            t3 = time.thread_time()
            share = huge_share(arr)
            store.checkpoint(v)
            store.wait(v, level=2)
            if v < WARMUP_INTERVALS:
                continue
            for name, value in zip(MEASURES, (t1 - t0, t2 - t1, t3 - t2, time.process_time() - c0, share)):
                seen[name].append(value)
    finally:
        store.close()
        shutil.rmtree(l2, ignore_errors=True)
    out = {m: statistics.median(seen[m]) for m in MEASURES}
    out["initial_huge"] = initial_huge
    log(f"{arm}: huge {out['huge']:.2f} (first touch {initial_huge:.2f}), write {fmt_time(out['write'])}, "
        f"read {fmt_time(out['read'])}, gather {fmt_time(out['gather'])}, process CPU {fmt_time(out['process_cpu'])}")
    return out


def two_places(x: float) -> str:
    return f"{x:.2f}"


def write_markdown(path: Path, machine: Dict[str, str], results: Dict[str, Dict[str, Series]],
                   ratios: Dict[str, Dict[str, Series]], args, png: str) -> None:
    lines = report_header("Huge pages split by uffd tracking", SCRIPT, args)
    lines += machine_lines(machine)
    lines += [f"Load average (1 min) at the start and the end of the run: {args.load[0]:.1f}, "
              f"{os.getloadavg()[0]:.1f} (the VM is shared: wall times are noisy).", ""]
    lines += ["## What is measured", "",
              f"- **State**: one float32 array of {args.size}, aligned to 2 MiB, rewritten whole per "
              f"interval; {args.intervals} measured intervals after {WARMUP_INTERVALS} warm-up ones per "
              "store; each repeat's figure is the median over its intervals.",
              "- **Stores**: `copy` (untracked, the baseline), `split` (untracked too, on an array first "
              f"rewritten {WARMUP_INTERVALS} times under uffd tracking by a delta store closed before: the "
              "split alone), `delta` with `track.method = uffd` "
              "(tracked at every interval), `auto` (the array, written whole, is copied and tracked one "
              "interval in 8; resting, its huge pages are collapsed again). `pipeline_compress=none`, "
              "`persistent_every=0`.",
              "- **huge**: AnonHugePages of the array's mapping / its bytes, just before each checkpoint "
              "(after the interval's steps). Steps, the application thread's CPU time (`time.thread_time`, which the shared VM's preemption does not inflate): **write**: `np.negative(arr, out=arr)`; **read**: `np.sum(arr)`; "
              f"**gather**: `np.sum(arr[idx])` of {GATHERED} random indices (TLB-bound); **process CPU**: "
              "the process's CPU time per interval, every thread (tracking, pipeline, collapser) included.",
              "- **Ratios**: each store's figure / copy's in the same repeat.", "", "## Results", "",
              "| store | huge share | huge at first touch | write | read | gather | process CPU / interval |",
              "|---|---|---|---|---|---|---|"]
    for arm, series in results.items():
        lines.append(f"| {arm} | {series['huge'].cell(two_places)} | {series['initial_huge'].cell(two_places)} | "
                     + " | ".join(series[m].cell() for m in ("write", "read", "gather", "process_cpu"))
                     + " |")
    lines += ["", "## Against the untracked copy store (ratio, same repeat)", "",
              "| store | write | read | gather | process CPU / interval |", "|---|---|---|---|---|"]
    for arm, series in ratios.items():
        lines.append(f"| {arm} | " + " | ".join(series[m].cell(two_places) for m in ("write", "read", "gather",
                                                                               "process_cpu")) + " |")
    lines += ["", f"![ratios]({png})", ""]
    path.write_text("\n".join(lines))


def write_plot(path: Path, results: Dict[str, Dict[str, Series]], ratios: Dict[str, Dict[str, Series]],
               args) -> None:
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    arms = list(results)
    medians = [results[a]["huge"].median for a in arms]
    left.bar(arms, medians, yerr=[[m - results[a]["huge"].min for a, m in zip(arms, medians)],
                                  [results[a]["huge"].max - m for a, m in zip(arms, medians)]], capsize=4)
    left.set_ylabel("share of the array in huge pages")
    left.set_ylim(0, 1.05)
    steps = ("write", "read", "gather", "process_cpu")
    width = 0.8 / len(ratios)
    for i, (arm, series) in enumerate(ratios.items()):
        xs = [j + i * width for j in range(len(steps))]
        med = [series[s].median for s in steps]
        right.bar(xs, med, width, label=arm,
                  yerr=[[m - series[s].min for s, m in zip(steps, med)],
                        [series[s].max - m for s, m in zip(steps, med)]], capsize=3)
    right.axhline(1.0, color="grey", linewidth=0.8)
    right.set_xticks([j + width * (len(ratios) - 1) / 2 for j in range(len(steps))], steps)
    right.set_ylabel("time / untracked copy store's")
    right.legend()
    fig.suptitle(plot_title(f"uffd tracking and huge pages, {args.size}", args))
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--size", default="128MiB", help="bytes of the array (default: %(default)s)")
    ap.add_argument("--intervals", type=int, default=10, help="measured intervals per store (default: %(default)s)")
    default_dir = Path(__file__).resolve().parent.parent / "build" / "bench"
    add_common_args(ap, "uffd_split", f"target directory (default: a fresh one under {default_dir}, deleted)")
    args = ap.parse_args(argv)
    args.argv = argv
    finish_common_args(ap, args)
    args.load = os.getloadavg()
    nbytes = parse_size(args.size, multiple=HUGE)
    default_dir.mkdir(parents=True, exist_ok=True)
    root = (args.dir or Path(tempfile.mkdtemp(prefix="resurgo-uffd-split-", dir=default_dir))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    check_resources(SCRIPT, root, f"array {args.size}", 4 * nbytes, 3 * nbytes)
    machine = machine_description(root, resurgo)
    gather_at = np.random.default_rng(0).integers(0, nbytes // ITEM, GATHERED)
    measures = MEASURES + ("initial_huge",)
    results = {a: {m: Series(a) for m in measures} for a in ARMS}
    ratios = {a: {m: Series(a) for m in MEASURES} for a in ARMS if a != "copy"}
    try:
        for r in range(args.repeats):
            log(f"repeat {r + 1} of {args.repeats}")
            figures = {arm: run_arm(arm, nbytes, args, root, gather_at) for arm in ARMS}
            for arm, fig in figures.items():
                for m in measures:
                    results[arm][m].times.append(fig[m])
                if arm in ratios:
                    for m in MEASURES[:-1]:
                        ratios[arm][m].times.append(fig[m] / figures["copy"][m])
    finally:
        if args.dir is None and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    md, png = args.out / "uffd_split.md", args.out / "uffd_split.png"
    write_plot(png, results, ratios, args)
    write_markdown(md, machine, results, ratios, args, png.name)
    print(md.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
