#!/usr/bin/env python3
"""The L0 device cache (HiPC'22 cache-allocation paper, section IV-A): what
a capture blocks against a bare device-to-device copy, how long until the
whole cache is usable with incremental chunk mapping against one allocation
plus a first-touch memset, and the paper's uniform trace (N MiB x M
checkpoints, compute intervals of 5-100 ms) with the cache against direct
allocation per checkpoint and UVM.

Runs bench/gpu_cache.cpp (build/cpp/bench/gpu_cache) once per measure and
repeat. Without a usable CUDA driver it runs the host analog (the same cache
over host memory, mmap per checkpoint as direct allocation, no UVM) and says
so in the report.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    GiB,
    MiB,
    Series,
    finish_common_args,
    fmt_time,
    human,
    log,
    machine_description,
    machine_lines,
    parse_size,
    parse_sizes,
    pyplot,
    report_header,
)

SCRIPT = "gpu_cache.py"
NAME = "gpu_cache"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BINARY = ROOT / "build" / "cpp" / "bench" / "gpu_cache"
UNAVAILABLE = 3
CAPTURE_TARGET = 1.2  # capture / bare device-to-device copy
# Defaults per backend: the paper's sizes on a GPU, a scaled-down analog on host.
DEFAULTS = {
    "cuda": dict(sizes="128MiB,1GiB", capacity="32GiB", chunk="1GiB", trace_size="128MiB", count=256),
    "host": dict(sizes="128MiB,1GiB", capacity="2GiB", chunk="256MiB", trace_size="64MiB", count=32),
}


def run(binary: Path, backend: str, *args: str) -> Optional[dict]:
    """One run of the program; None when the backend is unavailable."""
    cmd = [str(binary), "--backend", backend, *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode == UNAVAILABLE and "unavailable" in done.stderr:
        return None
    if done.returncode != 0:
        sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed with status {done.returncode}:\n{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def probe_cuda(binary: Path) -> Optional[str]:
    """None when the cuda backend works here, else why not."""
    cmd = [str(binary), "--backend", "cuda", "--mode", "capture", "--mib", "1", "--iterations", "1",
           "--chunk-mib", "2"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode == 0:
        return None
    return (done.stderr.strip().splitlines() or ["no output"])[-1]


def mib(nbytes: int) -> str:
    return str(max(1, nbytes // MiB))


def measure_capture(binary: Path, backend: str, size: int, chunk: int, repeats: int) -> Dict[str, Series]:
    out = {"capture": Series("capture into the mapped L0 cache", "resurgo", size),
           "checkpoint": Series("Store.checkpoint of the device region", "resurgo", size),
           "bare": Series("bare device-to-device copy", "floor", size),
           "ratio": Series("capture / bare copy", "ratio"),
           "checkpoint_ratio": Series("checkpoint / bare copy", "ratio")}
    for r in range(repeats):
        row = run(binary, backend, "--mode", "capture", "--mib", mib(size), "--chunk-mib", mib(chunk),
                  "--iterations", "20")
        out["capture"].times.append(row["capture_median"])
        out["bare"].times.append(row["bare_median"])
        out["ratio"].times.append(row["capture_median"] / row["bare_median"])
        out["checkpoint"].times.append(row["checkpoint_median"])
        out["checkpoint_ratio"].times.append(row["checkpoint_median"] / row["bare_median"])
        log(f"capture {human(size)} {r + 1}/{repeats}: {fmt_time(row['capture_median'])}, checkpoint "
            f"{fmt_time(row['checkpoint_median'])} vs bare {fmt_time(row['bare_median'])}")
    return out


def measure_init(binary: Path, backend: str, capacity: int, chunk: int, first: int, repeats: int) -> dict:
    out = {m: {"usable": Series(label, m), "first": Series(label, m)}
           for m, label in (("incremental", "incremental chunk mapping (L0)"),
                            ("direct", "one allocation + first-touch memset"))}
    for r in range(repeats):
        order = ["incremental", "direct"] if r % 2 == 0 else ["direct", "incremental"]
        for method in order:
            row = run(binary, backend, "--mode", "init", "--method", method, "--capacity-mib", mib(capacity),
                      "--chunk-mib", mib(chunk), "--mib", mib(first))
            out[method]["usable"].times.append(row["usable_seconds"])
            out[method]["first"].times.append(row["first_capture_seconds"])
        log(f"init {human(capacity)} {r + 1}/{repeats}: incremental usable after "
            f"{fmt_time(out['incremental']['usable'].times[-1])}, first capture "
            f"{fmt_time(out['incremental']['first'].times[-1])}; direct {fmt_time(out['direct']['usable'].times[-1])}")
    return out


TRACE_METHODS = [("l0", "L0 cache, incremental mapping"), ("direct", "direct allocation per checkpoint"),
                 ("uvm", "UVM (cuMemAllocManaged)")]


def measure_trace(binary: Path, backend: str, size: int, count: int, chunk: int, intervals: List[float],
                  repeats: int, notes: List[str]) -> dict:
    out: Dict[float, Dict[str, Dict[str, Series]]] = {}
    methods = [m for m, _ in TRACE_METHODS if backend == "cuda" or m != "uvm"]
    if backend != "cuda":
        notes.append("UVM is a CUDA feature: the host analog has no UVM column.")
    for interval in intervals:
        out[interval] = {m: {"checkpoint": Series(label, m), "total": Series(label, m)}
                         for m, label in TRACE_METHODS if m in methods}
        for r in range(repeats):
            order = methods[r % len(methods):] + methods[:r % len(methods)]
            for method in order:
                row = run(binary, backend, "--mode", "trace", "--method", method, "--mib", mib(size),
                          "--count", str(count), "--interval-ms", repr(interval), "--chunk-mib", mib(chunk))
                s = out[interval][method]
                s["checkpoint"].times.append(row["checkpoint_seconds"])
                s["total"].times.append(row["checkpoint_seconds"] + row["restore_seconds"])
            log(f"trace {interval:g} ms {r + 1}/{repeats}: " + ", ".join(
                f"{m} {fmt_time(out[interval][m]['checkpoint'].times[-1])}" for m in methods))
    return out


def ratio_series(num: Series, den: Series, label: str) -> Series:
    s = Series(label, "ratio")
    s.times = [a / b for a, b in zip(num.times, den.times)]
    return s


def fmt_ratio(value: float) -> str:
    return f"{value:.3g}×"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY,
                    help="the gpu_cache program (default: build/cpp/bench/gpu_cache)")
    ap.add_argument("--backend", choices=["auto", "cuda", "host"], default="auto",
                    help="auto: cuda where a CUDA driver and GPU work, else the host analog")
    ap.add_argument("--sizes", help="capture sizes (default 128MiB,1GiB)")
    ap.add_argument("--capacity", help="cache capacity for the initialisation measure (cuda: 32GiB, host: 2GiB)")
    ap.add_argument("--chunk", help="mapping chunk (cuda: 1GiB, host: 256MiB)")
    ap.add_argument("--trace-size", help="checkpoint size of the trace (cuda: 128MiB, host: 64MiB)")
    ap.add_argument("--count", type=int, help="checkpoints in the trace (cuda: 256, host: 32)")
    ap.add_argument("--intervals", default="5,10,20,50,100", help="compute intervals in ms (default 5,10,20,50,100)")
    ap.add_argument("--skip-trace", action="store_true", help="measure capture and initialisation only")
    ap.add_argument("--repeats", type=int, default=5, help="repeats per measure (>= 5; default 5)")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"where {NAME}.md/.png go (default: bench/results; with --smoke: build/bench-smoke)")
    ap.add_argument("--smoke", action="store_true",
                    help="check that the script runs: allows --repeats < 5; the report says it is no result")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    binary = args.binary if args.binary.is_absolute() else Path.cwd() / args.binary
    if not binary.is_file():
        sys.exit(f"{SCRIPT}: {args.binary} not found. Build it first:  cmake --build build/cpp --target gpu_cache")

    notes: List[str] = []
    backend = args.backend
    why_not_cuda = probe_cuda(binary)
    if backend == "cuda" and why_not_cuda:
        sys.exit(f"{SCRIPT}: the cuda backend is unavailable: {why_not_cuda}")
    if backend == "auto":
        backend = "host" if why_not_cuda else "cuda"
    if backend == "host":
        cuda_here = why_not_cuda or "usable, but --backend host was asked for"
        notes.append(f"**Host analog only: no GPU measure was taken** (CUDA here: {cuda_here}). The same "
                     "cache logic runs over host memory; 'device-to-device copy' is memcpy, 'direct allocation' "
                     "is an mmap per checkpoint whose pages the copy faults in.")
    d = DEFAULTS[backend]
    sizes = parse_sizes(args.sizes or d["sizes"])
    capacity = parse_size(args.capacity or d["capacity"])
    chunk = parse_size(args.chunk or d["chunk"])
    trace_size = parse_size(args.trace_size or d["trace_size"])
    count = args.count or d["count"]
    intervals = [float(t) for t in args.intervals.split(",") if t.strip()]

    started = time.perf_counter()
    capture = {size: measure_capture(binary, backend, size, chunk, args.repeats) for size in sizes}
    init = measure_init(binary, backend, capacity, chunk, trace_size, args.repeats)
    trace = None if args.skip_trace else measure_trace(binary, backend, trace_size, count, chunk, intervals,
                                                       args.repeats, notes)
    notes.append(f"The run took {time.perf_counter() - started:.0f} s.")
    write_report(args, binary, backend, capture, init, trace, dict(capacity=capacity, chunk=chunk,
                 trace_size=trace_size, count=count), notes)


def write_report(args, binary: Path, backend: str, capture, init, trace, setup: dict, notes: List[str]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    machine = machine_description(args.out)
    machine.pop("target directory", None)
    machine["backend"] = backend
    if backend == "cuda":
        machine["GPU"] = _nvidia_smi()
    machine["program"] = str(binary)
    title = "L0 device cache: capture, initialisation, uniform trace" + (" (host analog)" if backend == "host" else "")
    lines = report_header(title, SCRIPT, args, extra="One process per measure and repeat.")
    lines += machine_lines(machine)

    lines += ["## Capture blocking: mapped L0 cache vs a bare device-to-device copy", "",
              "Each process: a cache of twice the size, fully mapped; 2 warm-up then 20 interleaved captures "
              "(each version marked flushed, so FIFO eviction runs) and bare copies into memory allocated and "
              "touched before, and `Store.checkpoint()` of the same bytes protected as a device region (L0 of "
              "twice the size, versions kept in the memory level, each settled before the next checkpoint); the "
              f"process reports the median of each. Target: ≤ {CAPTURE_TARGET}× the bare copy.", "",
              "| size | capture | Store.checkpoint | bare copy | capture / bare | checkpoint / bare | target |",
              "|---|---:|---:|---:|---:|---:|---|"]
    for size, s in capture.items():
        met = max(s["ratio"].median, s["checkpoint_ratio"].median) <= CAPTURE_TARGET
        lines.append(f"| {human(size)} | {s['capture'].cell()} | {s['checkpoint'].cell()} | {s['bare'].cell()} | "
                     f"{s['ratio'].cell(fmt_ratio)} | {s['checkpoint_ratio'].cell(fmt_ratio)} | "
                     f"≤ {CAPTURE_TARGET}: {'met' if met else 'missed'} |")
    lines.append("")

    inc, direct = init["incremental"], init["direct"]
    rate = lambda s: f"{setup['capacity'] / s.median / GiB:.3g} GiB/s"  # noqa: E731
    lines += [f"## Cache initialisation: {human(setup['capacity'])}, chunks of {human(setup['chunk'])}", "",
              "Clock from open (context created before). Incremental: reserve, map chunk by chunk on the "
              f"background thread, a first capture of {human(setup['trace_size'])} at once; direct: one "
              "allocation of the whole capacity and a first-touch memset, then the same copy.", "",
              "| method | whole cache usable after | rate | first capture blocks |", "|---|---:|---:|---:|",
              f"| incremental (L0) | {inc['usable'].cell()} | {rate(inc['usable'])} | {inc['first'].cell()} |",
              f"| direct | {direct['usable'].cell()} | {rate(direct['usable'])} | {direct['first'].cell()} |",
              "", f"First capture: direct / incremental = "
              f"{ratio_series(direct['first'], inc['first'], '').cell(fmt_ratio)}.", ""]

    if trace:
        methods = [m for m, _ in TRACE_METHODS if m in next(iter(trace.values()))]
        lines += [f"## Uniform trace: {human(setup['trace_size'])} × {setup['count']} checkpoints", "",
                  "Each checkpoint after the compute interval (a sleep); then every version restored in "
                  "reverse order, back to back. Total blocking of the application thread per run.", "",
                  "| interval | " + " | ".join(f"{m}: checkpoint | {m}: checkpoint + restore" for m in methods)
                  + " | " + " | ".join(f"{m} / l0 checkpoint | {m} / l0 total" for m in methods if m != "l0") + " |",
                  "|---|" + "---:|---:|" * len(methods) + "---:|---:|" * (len(methods) - 1)]
        for interval, t in trace.items():
            cells = [f"{t[m]['checkpoint'].cell()} | {t[m]['total'].cell()}" for m in methods]
            ratios = [f"{ratio_series(t[m]['checkpoint'], t['l0']['checkpoint'], '').cell(fmt_ratio)} | "
                      f"{ratio_series(t[m]['total'], t['l0']['total'], '').cell(fmt_ratio)}"
                      for m in methods if m != "l0"]
            lines.append(f"| {interval:g} ms | " + " | ".join(cells + ratios) + " |")
        lines.append("")

    lines += ["## Notes", ""] + [f"- {n}" for n in notes] + ["", f"Plot: `{NAME}.png`.", ""]
    md = args.out / f"{NAME}.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")

    plt = pyplot()
    fig, axes = plt.subplots(1, 3 if trace else 2, figsize=(16 if trace else 11, 5))
    ax = axes[0]
    xs = range(len(capture))
    for i, (key, s_key) in enumerate((("capture", "capture"), ("bare", "bare"))):
        med = [s[s_key].median * 1e3 for s in capture.values()]
        ax.bar([x - 0.2 + 0.4 * i for x in xs], med, 0.4, label=next(iter(capture.values()))[s_key].label,
               yerr=[[m - s[s_key].min * 1e3 for m, s in zip(med, capture.values())],
                     [s[s_key].max * 1e3 - m for m, s in zip(med, capture.values())]], capsize=2)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([human(s) for s in capture])
    ax.set_ylabel("blocking (ms)")
    ax.set_title("capture vs bare copy")
    ax.legend(fontsize=8)
    ax = axes[1]
    labels = ["incremental\nusable", "incremental\nfirst capture", "direct\nusable"]
    series = [inc["usable"], inc["first"], direct["usable"]]
    ax.bar(labels, [s.median for s in series],
           yerr=[[s.median - s.min for s in series], [s.max - s.median for s in series]], capsize=2)
    ax.set_ylabel("seconds")
    ax.set_title(f"initialisation of {human(setup['capacity'])}")
    if trace:
        ax = axes[2]
        for m, label in TRACE_METHODS:
            if m not in next(iter(trace.values())):
                continue
            ivs = list(trace)
            med = [trace[i][m]["checkpoint"].median for i in ivs]
            ax.errorbar(ivs, med, yerr=[[v - trace[i][m]["checkpoint"].min for v, i in zip(med, ivs)],
                                        [trace[i][m]["checkpoint"].max - v for v, i in zip(med, ivs)]],
                        marker="o", capsize=2, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("compute interval (ms)")
        ax.set_ylabel("total checkpoint blocking (s)")
        ax.set_title(f"uniform trace {human(setup['trace_size'])} × {setup['count']}")
        ax.legend(fontsize=8)
    fig.suptitle(("SMOKE RUN, not a result — " if args.smoke else "") + title
                 + f", median [min–max] of {args.repeats}")
    fig.tight_layout()
    png = args.out / f"{NAME}.png"
    fig.savefig(png, dpi=110)
    log(f"wrote {png}")
    for size, s in capture.items():
        print(f"capture {human(size)}: {s['ratio'].cell(fmt_ratio)} of a bare copy, Store.checkpoint "
              f"{s['checkpoint_ratio'].cell(fmt_ratio)} (target <= {CAPTURE_TARGET})")


def _nvidia_smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (nvidia-smi failed)"


if __name__ == "__main__":
    main()
