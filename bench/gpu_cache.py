#!/usr/bin/env python3
"""The L0 device cache (HiPC'22 cache-allocation paper, section IV-A): what
a capture blocks against a bare device-to-device copy, how long until the
whole cache is usable with incremental chunk mapping against one allocation
plus a first-touch memset, the paper's uniform trace (N MiB x M checkpoints,
compute intervals of 5-100 ms) with the cache against direct allocation per
checkpoint and UVM, an RTM-like trace of variable checkpoint sizes in the
large-device and large-host configurations (section V-C, Fig. 3), and 1, 2,
4 processes at once (Fig. 6).

Runs bench/gpu_cache.cpp (build/cpp/bench/gpu_cache) once per measure and
repeat. Without a usable CUDA driver it runs the host analog (the same cache
over host memory, mmap per checkpoint as direct allocation, no UVM) and says
so in the report.

The RTM-like trace. RTM checkpoints lossy-compressed wavefields of the
forward pass: the first are small (a point source compresses well), the size
grows as the wavefront spreads through the model and falls again as energy
leaves through the absorbing boundaries and the error-bounded compressor
gains on the lower amplitudes. The paper gives the sizes of 8 shots on 8
processes (Fig. 3a), 20-24 GB per shot, but not the formula; this model is
ours. Checkpoint i of M (x_i = (i + 1/2) / M) of the shot with seed s:

    g(x)    = f + (1 - f) * (x / p) * exp(1 - x / p)     smooth: f at x = 0, 1 at the peak x = p
    raw_i   = g(x_i) * (1 + n * u_i)                     u_i uniform in [-1, 1]: bounded noise
    T_s     = T * (1 + d * v)                            v uniform in [-1, 1]: the shot's total
    size_i  = q * max(1, round(T_s * raw_i / sum(raw) / q))

with f = 0.25, p = 0.4, n = 0.15, d = 0.09 (20-24 GB is 22 GB +- 9 %) and
q = 4 KiB; v, then u_0..u_{M-1}, drawn from Python's random.Random(s). T,
the mean total per process: on a GPU 2750 MB (22 GB per shot / 8 processes)
in 128 checkpoints; on the host analog 1 GiB in 32 checkpoints, scaled down
so that the default run fits in about 8 minutes on a 2-core machine. The
paper does not give the number of checkpoints per shot: 128 and 32 are ours.
The RTM measure runs the trace of seed --seed; the processes measure gives
process k the seed --seed + k.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    QUICK_REPEATS,
    GiB,
    MiB,
    Series,
    check_resources,
    finish_gpu_args,
    fmt_time,
    human,
    log,
    machine_description,
    machine_lines,
    parse_size,
    parse_sizes,
    pick_backend,
    plot_title,
    probe_cuda,
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
COMMON = dict(intervals="5,10,20,50,100", rtm_intervals="5,20,100", processes="1,2,4")
DEFAULTS = {
    "cuda": dict(COMMON, sizes="128MiB,1GiB", capacity="32GiB", chunk="1GiB", trace_size="128MiB", count=256,
                 rtm_total="2750MB", rtm_count=128),
    "host": dict(COMMON, sizes="128MiB,1GiB", capacity="2GiB", chunk="256MiB", trace_size="64MiB", count=32,
                 rtm_total="1GiB", rtm_count=32),
}
# --quick, over the defaults (explicit options win), sized for about 3
# minutes on a GPU machine (16 cores, an H100) with 3 repeats: every table,
# fewer rows. From expected_seconds: 81 processes (capture 2 sizes x 3,
# init 2 x 3, uniform 3 intervals x 3 methods x 3, RTM-like 2 x 4 x 3,
# processes (1 + 2) x 2 methods x 3) at about CUDA_PROCESS_SECONDS each,
# 53 s of compute sleeps (uniform 32 x 125 ms x 9 runs, RTM-like 32 x 25 ms
# x 12, processes 32 x 20 ms x 12) and about 25 s of device-to-host copies
# (the captures' Store.checkpoint, the large-host flushes): 2.6 minutes.
# The paper's checkpoint sizes and the RTM-like trace's total per process
# (2750 MB) stay; the traces are shorter (32 checkpoints; the cache then
# has 4 GiB to map for the uniform trace), the initialisation of 8 GiB (4 s
# of mapping at most at 2 GiB/s, against 32 GiB).
QUICK = {
    "cuda": dict(capacity="8GiB", count=32, intervals="5,20,100", rtm_count=32, rtm_intervals="5,20",
                 processes="1,2"),
    "host": dict(count=16, rtm_count=16, intervals="5,20,100", rtm_intervals="5,20", processes="1,2"),
}
# --fake-driver: the runs of --quick against the test fake, whose device
# memory is host memory: at most about 250 MiB at once (a capture of 8 MiB:
# source, copy, cache, the store's L0 and its memory level of 4 x 8 MiB +
# 64 MiB), done in under a minute on 2 cores.
FAKE = dict(QUICK["cuda"], sizes="4MiB,8MiB", capacity="64MiB", chunk="8MiB", trace_size="4MiB", count=8,
            rtm_total="32MiB", rtm_count=8)
# The RTM-like size model (module docstring).
RTM_FLOOR = 0.25  # f: the first checkpoints' size relative to the peak's
RTM_PEAK = 0.4  # p: where in the forward pass the size peaks
RTM_NOISE = 0.15  # n: bounded noise per checkpoint
SHOT_SPREAD = 0.09  # d: a shot's total per process varies by this much
SIZE_QUANTUM = 4096  # q
# Rough costs of the host analog on the 2-core development VM (its 2026-11-25
# run), for the expected duration printed at the start only.
CAPTURE_SECONDS_PER_GIB = 9.0  # one repeat of the capture measure, per GiB captured
INIT_SECONDS_PER_GIB = 1.0  # one repeat of both initialisations, per GiB of capacity
TRACE_SECONDS_PER_GIB = 1.1  # one trace run besides its sleeps, per GiB of all its processes' traces
# Guesses for a GPU machine (not measured yet), for the same purpose: a
# process's CUDA start-up and teardown (cuInit, the primary context; more
# without persistence mode), and device-to-host copies into pageable memory.
CUDA_PROCESS_SECONDS = 1.0
CUDA_D2H_BYTES_PER_SECOND = 5e9


def start(binary: Path, backend: str, *args: str) -> Tuple[List[str], subprocess.Popen]:
    cmd = [str(binary), "--backend", backend, *args]
    return cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(cmd: List[str], proc: subprocess.Popen) -> Optional[dict]:
    """The result of a started run; None when the backend is unavailable."""
    stdout, stderr = proc.communicate()
    if proc.returncode == UNAVAILABLE and "unavailable" in stderr:
        return None
    if proc.returncode != 0:
        sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed with status {proc.returncode}:\n{stderr.strip()}")
    return json.loads(stdout.strip().splitlines()[-1])


def run(binary: Path, backend: str, *args: str) -> Optional[dict]:
    """One run of the program; None when the backend is unavailable."""
    return finish(*start(binary, backend, *args))


def run_together(binary: Path, backend: str, arg_lists: List[List[str]]) -> List[dict]:
    """One process per argument list, all at once: started back to back (a
    few ms apart, against traces that run for seconds), then waited for."""
    started = [start(binary, backend, *args) for args in arg_lists]
    return [finish(*s) for s in started]


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
Blocking = Dict[str, Series]  # "checkpoint" and "total" (checkpoint + restore) of one method


def blocking(label: str, key: str) -> Blocking:
    return {"checkpoint": Series(label, key), "total": Series(label, key)}


def add_blocking(s: Blocking, rows: List[dict]) -> None:
    """One repeat's blocking per process: the total over `rows` (one per
    process) divided by their number, as the paper's Fig. 6."""
    s["checkpoint"].times.append(statistics.fmean(r["checkpoint_seconds"] for r in rows))
    s["total"].times.append(statistics.fmean(r["checkpoint_seconds"] + r["restore_seconds"] for r in rows))


def rotated(items: Sequence, r: int) -> list:
    """items in the order of repeat r: rotated by one at each repeat."""
    return list(items[r % len(items):]) + list(items[:r % len(items)])


def measure_trace(binary: Path, backend: str, size: int, count: int, chunk: int, intervals: List[float],
                  repeats: int, notes: List[str]) -> dict:
    out: Dict[float, Dict[str, Blocking]] = {}
    methods = [m for m, _ in TRACE_METHODS if backend == "cuda" or m != "uvm"]
    if backend != "cuda":
        notes.append("UVM is a CUDA feature: the host analog has no UVM column.")
    for interval in intervals:
        out[interval] = {m: blocking(label, m) for m, label in TRACE_METHODS if m in methods}
        for r in range(repeats):
            for method in rotated(methods, r):
                row = run(binary, backend, "--mode", "trace", "--method", method, "--mib", mib(size),
                          "--count", str(count), "--interval-ms", repr(interval), "--chunk-mib", mib(chunk))
                add_blocking(out[interval][method], [row])
            log(f"trace {interval:g} ms {r + 1}/{repeats}: " + ", ".join(
                f"{m} {fmt_time(out[interval][m]['checkpoint'].times[-1])}" for m in methods))
    return out


def rtm_sizes(total: int, count: int, seed: int) -> List[int]:
    """The checkpoint sizes of one RTM-like shot on one process (the model
    of the module docstring)."""
    rng = random.Random(seed)
    shot_total = total * (1 + SHOT_SPREAD * rng.uniform(-1, 1))
    shape = [RTM_FLOOR + (1 - RTM_FLOOR) * (x / RTM_PEAK) * math.exp(1 - x / RTM_PEAK)
             for x in ((i + 0.5) / count for i in range(count))]
    raw = [g * (1 + RTM_NOISE * rng.uniform(-1, 1)) for g in shape]
    scale = shot_total / sum(raw) / SIZE_QUANTUM
    return [SIZE_QUANTUM * max(1, round(r * scale)) for r in raw]


def write_sizes(path: Path, sizes: List[int]) -> Path:
    """A --sizes-file for the program: one byte count per line."""
    path.write_text("".join(f"{s}\n" for s in sizes))
    return path


def trace_args(method: str, sizes_file: Path, interval: float, chunk: int, fraction: float) -> List[str]:
    return ["--mode", "trace", "--method", method, "--sizes-file", str(sizes_file), "--interval-ms", repr(interval),
            "--chunk-mib", mib(chunk), "--cache-fraction", repr(fraction)]


def rtm_variants(backend: str, fraction: float) -> List[Tuple[str, str, float, str]]:
    """(key, method, cache fraction, label) of the RTM-like trace's runs."""
    variants = [("l0", "l0", 1.0, "L0 cache, large-device"),
                ("l0-host", "l0", fraction, f"L0 cache, large-host ({fraction:g} of the trace)"),
                ("direct", "direct", 1.0, "direct allocation per checkpoint")]
    return variants + ([("uvm", "uvm", 1.0, "UVM (cuMemAllocManaged)")] if backend == "cuda" else [])


def measure_rtm(binary: Path, backend: str, sizes_file: Path, chunk: int, fraction: float, intervals: List[float],
                repeats: int) -> dict:
    """{"blocking": {interval: {variant: Blocking}}, "large_host": the large-host runs' rows}."""
    variants = rtm_variants(backend, fraction)
    out: Dict[float, Dict[str, Blocking]] = {}
    large_host: List[dict] = []
    for interval in intervals:
        out[interval] = {key: blocking(label, key) for key, _, _, label in variants}
        for r in range(repeats):
            for key, method, f, _ in rotated(variants, r):
                row = run(binary, backend, *trace_args(method, sizes_file, interval, chunk, f))
                add_blocking(out[interval][key], [row])
                if key == "l0-host":
                    large_host.append(row)
            log(f"RTM-like trace {interval:g} ms {r + 1}/{repeats}: " + ", ".join(
                f"{key} {fmt_time(out[interval][key]['total'].times[-1])}" for key, _, _, _ in variants))
    return {"blocking": out, "large_host": large_host}


PROCESS_METHODS = [("l0", "L0 cache, large-host"), ("direct", "direct allocation per checkpoint")]


def measure_processes(binary: Path, backend: str, sizes_files: List[Path], counts: List[int], chunk: int,
                      fraction: float, interval: float, repeats: int) -> Dict[int, Dict[str, Blocking]]:
    """{processes: {method: Blocking}}: process k runs the trace sizes_files[k]."""
    out: Dict[int, Dict[str, Blocking]] = {}
    for n in counts:
        out[n] = {m: blocking(label, m) for m, label in PROCESS_METHODS}
        for r in range(repeats):
            for method, _ in rotated(PROCESS_METHODS, r):
                f = fraction if method == "l0" else 1.0
                rows = run_together(binary, backend,
                                    [trace_args(method, sizes_files[k], interval, chunk, f) for k in range(n)])
                add_blocking(out[n][method], rows)
            log(f"{n} processes {r + 1}/{repeats}: " + ", ".join(
                f"{m} {fmt_time(out[n][m]['total'].times[-1])}" for m, _ in PROCESS_METHODS))
    return out


def ratio_series(num: Series, den: Series, label: str) -> Series:
    s = Series(label, "ratio")
    s.times = [a / b for a, b in zip(num.times, den.times)]
    return s


def fmt_ratio(value: float) -> str:
    return f"{value:.3g}×"


def expected_seconds(setup: dict, backend: str, repeats: int, skip_trace: bool) -> Tuple[float, float, int]:
    """A rough duration of the run: (the traces' compute sleeps, the rest,
    the processes started). The rest: on host at the analog's speed on the
    2-core VM; on cuda each process's start-up and the device-to-host
    copies into pageable memory (the captures' Store.checkpoint into the
    memory level, the large-host flushes), both guesses."""
    captured = sum(setup["sizes"])
    processes = repeats * (len(setup["sizes"]) + 2)  # capture, init
    rest = repeats * (CAPTURE_SECONDS_PER_GIB * captured + INIT_SECONDS_PER_GIB * setup["capacity"]) / GiB
    d2h = repeats * 22 * captured  # 2 warm-up + 20 checkpoints per capture run
    sleeps = 0.0
    if not skip_trace:
        methods = 3 if backend == "cuda" else 2
        # (runs per interval, processes per run, checkpoints, bytes of a run's traces, intervals)
        runs = [(repeats * methods, 1, setup["count"], setup["count"] * setup["trace_size"], setup["intervals"]),
                (repeats * (methods + 1), 1, setup["rtm_count"], setup["rtm_total"], setup["rtm_intervals"])]
        runs += [(repeats * 2, n, setup["rtm_count"], n * setup["rtm_total"], [setup["process_interval"]])
                 for n in setup["processes"]]
        sleeps = sum(times * count * t / 1e3 for times, _, count, _, intervals in runs for t in intervals)
        rest += sum(times * len(intervals) * TRACE_SECONDS_PER_GIB * nbytes / GiB
                    for times, _, _, nbytes, intervals in runs)
        processes += sum(times * n * len(intervals) for times, n, _, _, intervals in runs)
        large_host = repeats * len(setup["rtm_intervals"]) + repeats * sum(setup["processes"])
        d2h += large_host * setup["rtm_total"]
    if backend == "cuda":
        rest = processes * CUDA_PROCESS_SECONDS + d2h / CUDA_D2H_BYTES_PER_SECOND
    return sleeps, rest, processes


def floats(text: str) -> List[float]:
    return [float(t) for t in text.split(",") if t.strip()]


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
    ap.add_argument("--intervals", help="compute intervals in ms (default 5,10,20,50,100)")
    ap.add_argument("--rtm-total", help="mean total of the RTM-like trace per process (cuda: 2750MB, host: 1GiB)")
    ap.add_argument("--rtm-count", type=int, help="checkpoints in the RTM-like trace (cuda: 128, host: 32)")
    ap.add_argument("--rtm-intervals", help="compute intervals of the RTM-like trace in ms (default 5,20,100)")
    ap.add_argument("--cache-fraction", type=float, default=0.25,
                    help="large-host configuration: the device cache as a fraction of the trace (default 0.25)")
    ap.add_argument("--processes",
                    help="process counts run at once on RTM-like traces, large-host (default 1,2,4; '' for none)")
    ap.add_argument("--process-interval", type=float, default=20.0,
                    help="compute interval of the processes measure in ms (default 20, as the paper's Fig. 6)")
    ap.add_argument("--seed", type=int, default=2022,
                    help="seed of the RTM-like trace; process k of the processes measure gets seed + k (default 2022)")
    ap.add_argument("--skip-trace", action="store_true",
                    help="measure capture and initialisation only (no uniform or RTM-like trace, no processes)")
    ap.add_argument("--quick", action="store_true",
                    help=f"a shorter run with every table, about 3 minutes on a GPU machine (16 cores, an H100): "
                         f"{QUICK_REPEATS} repeats (allowed with --quick, the default then); on cuda capture sizes "
                         "128MiB,1GiB, initialisation of 8GiB, uniform trace 128MiB x 32 at 5,20,100 ms, RTM-like "
                         "trace 2750MB in 32 checkpoints at 5,20 ms, processes 1,2 (host: traces of 16 "
                         "checkpoints, the same intervals and processes). Estimate: 81 processes at about 1 s of "
                         "CUDA start-up each, 53 s of compute sleeps, about 25 s of device-to-host copies. "
                         "Explicit options override these")
    ap.add_argument("--fake-driver", action="store_true",
                    help="against the test fake (tests/cpp/fake_cuda: put its libcuda.so.1 on LD_LIBRARY_PATH): "
                         "implies --smoke and the cuda backend, --quick's intervals, processes and repeats, and "
                         "sizes that end in under a minute on 2 cores with at most about 250 MiB at once (captures "
                         "4MiB,8MiB, initialisation 64MiB in chunks of 8MiB, uniform trace 4MiB x 8, RTM-like 32MiB "
                         "in 8); the report says the timings mean nothing. Implied (unless "
                         "--backend host) when the libcuda.so.1 found is the fake")
    ap.add_argument("--repeats", type=int, default=None,
                    help=f"repeats per measure (>= 5, default 5; --quick: >= {QUICK_REPEATS}, default {QUICK_REPEATS})")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"where {NAME}.md/.png go (default: bench/results; with --smoke: build/bench-smoke; with "
                         "--quick: build/bench-quick)")
    ap.add_argument("--smoke", action="store_true",
                    help="check that the script runs: allows --repeats < 5; the report says it is no result")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    finish_gpu_args(ap, args)
    if not 0 < args.cache_fraction < 1:
        ap.error("--cache-fraction must lie in (0, 1): 1 is the large-device configuration, measured anyway")
    if args.rtm_intervals is not None and not floats(args.rtm_intervals):
        ap.error("--rtm-intervals needs at least one interval (--skip-trace skips every trace)")
    binary = args.binary if args.binary.is_absolute() else Path.cwd() / args.binary
    if not binary.is_file():
        sys.exit(f"{SCRIPT}: {args.binary} not found. Build it first:  cmake --build build/cpp --target gpu_cache")

    notes: List[str] = []
    why_not_cuda = probe_cuda(binary, ["--mode", "capture", "--mib", "1", "--iterations", "1", "--chunk-mib", "2"])
    backend = pick_backend(SCRIPT, "cuda" if args.fake_driver else args.backend, why_not_cuda)
    if backend == "host":
        cuda_here = why_not_cuda or "usable, but --backend host was asked for"
        notes.append(f"**Host analog only: no GPU measure was taken** (CUDA here: {cuda_here}). The same "
                     "cache logic runs over host memory; 'device-to-device copy' is memcpy, 'direct allocation' "
                     "is an mmap per checkpoint whose pages the copy faults in.")
    if args.fake_driver:
        notes.append("**The CUDA driver was the test fake** (tests/cpp/fake_cuda): device memory is host memory, "
                     "copies run on the fake's stream threads, and the sizes are shrunk (`--fake-driver`); the "
                     "timings mean nothing.")
    preset = dict(DEFAULTS[backend], **(FAKE if args.fake_driver else QUICK[backend] if args.quick else {}))
    setup = make_setup(args, preset)
    if not args.skip_trace and setup["processes"]:
        check_resources(SCRIPT, ROOT, f"{max(setup['processes'])} processes at once",
                        max(setup["processes"]) * setup["rtm_total"] * (1.2 + setup["fraction"]), 0)
    sleeps, rest, processes = expected_seconds(setup, backend, args.repeats, args.skip_trace)
    if backend == "host":
        log(f"expected duration: about {(sleeps + rest) / 60:.1f} min (at the speed of a 2-core machine)")
    else:
        log(f"expected duration on a GPU machine: about {(sleeps + rest) / 60:.1f} min ({sleeps:.0f} s of compute "
            f"sleeps, {processes} processes at a guessed {CUDA_PROCESS_SECONDS:g} s of CUDA start-up each, "
            "device-to-host copies)")

    started = time.perf_counter()
    capture = {size: measure_capture(binary, backend, size, setup["chunk"], args.repeats) for size in setup["sizes"]}
    init = measure_init(binary, backend, setup["capacity"], setup["chunk"], setup["trace_size"], args.repeats)
    traces = {} if args.skip_trace else measure_traces(binary, backend, setup, args.repeats, notes)
    notes.append(f"The run took {time.perf_counter() - started:.0f} s.")
    write_report(args, binary, backend, capture, init, traces, setup, notes)


def make_setup(args, d: dict) -> dict:
    """The sizes, counts and intervals of the run (each option, else the
    preset `d`), with the RTM-like traces of every process (process 0's is
    the RTM measure's)."""
    pick = lambda key: d[key] if getattr(args, key) is None else getattr(args, key)  # noqa: E731
    setup = dict(sizes=parse_sizes(pick("sizes")), capacity=parse_size(pick("capacity")),
                 chunk=parse_size(pick("chunk")), trace_size=parse_size(pick("trace_size")),
                 count=pick("count"), intervals=floats(pick("intervals")),
                 rtm_total=parse_size(pick("rtm_total")), rtm_count=pick("rtm_count"),
                 rtm_intervals=floats(pick("rtm_intervals")), fraction=args.cache_fraction,
                 processes=[int(n) for n in pick("processes").split(",") if n.strip()],
                 process_interval=args.process_interval, seed=args.seed)
    setup["traces"] = [rtm_sizes(setup["rtm_total"], setup["rtm_count"], args.seed + k)
                       for k in range(max(setup["processes"], default=1))]
    return setup


def measure_traces(binary: Path, backend: str, setup: dict, repeats: int, notes: List[str]) -> dict:
    """The uniform trace, the RTM-like trace and the processes; the RTM-like
    traces' size files lie in a temporary directory meanwhile."""
    uniform = measure_trace(binary, backend, setup["trace_size"], setup["count"], setup["chunk"], setup["intervals"],
                            repeats, notes)
    with tempfile.TemporaryDirectory(prefix="gpu_cache-") as tmp:
        files = [write_sizes(Path(tmp) / f"rtm-{k}.txt", sizes) for k, sizes in enumerate(setup["traces"])]
        rtm = measure_rtm(binary, backend, files[0], setup["chunk"], setup["fraction"], setup["rtm_intervals"],
                          repeats)
        processes = measure_processes(binary, backend, files, setup["processes"], setup["chunk"], setup["fraction"],
                                      setup["process_interval"], repeats)
    return {"uniform": uniform, "rtm": rtm, "processes": processes}


def write_report(args, binary: Path, backend: str, capture, init, traces: dict, setup: dict,
                 notes: List[str]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    machine = machine_description(args.out)
    machine.pop("target directory", None)
    machine["backend"] = backend
    if backend == "cuda":
        machine["GPU"] = ("the test fake, tests/cpp/fake_cuda (`--fake-driver`): host memory, no GPU"
                          if args.fake_driver else _nvidia_smi())
    machine["program"] = str(binary)
    title = ("L0 device cache: capture, initialisation, uniform and RTM-like traces"
             + (" (host analog)" if backend == "host" else " (fake CUDA driver)" if args.fake_driver else ""))
    lines = report_header(title, SCRIPT, args, extra="One process per measure and repeat.")
    lines += machine_lines(machine)
    lines += capture_lines(capture) + init_lines(init, setup)
    if traces:
        lines += uniform_lines(traces["uniform"], setup) + rtm_lines(traces["rtm"], setup, backend)
        if traces["processes"]:
            lines += process_lines(traces["processes"], setup, backend)
    lines += ["## Notes", ""] + [f"- {n}" for n in notes] + ["", f"Plot: `{NAME}.png`.", ""]
    md = args.out / f"{NAME}.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")
    write_plot(args, title, capture, init, traces, setup)
    for size, s in capture.items():
        print(f"capture {human(size)}: {s['ratio'].cell(fmt_ratio)} of a bare copy, Store.checkpoint "
              f"{s['checkpoint_ratio'].cell(fmt_ratio)} (target <= {CAPTURE_TARGET})")


def capture_lines(capture) -> List[str]:
    lines = ["## Capture blocking: mapped L0 cache vs a bare device-to-device copy", "",
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
    return lines + [""]


def init_lines(init, setup: dict) -> List[str]:
    inc, direct = init["incremental"], init["direct"]
    rate = lambda s: f"{setup['capacity'] / s.median / GiB:.3g} GiB/s"  # noqa: E731
    return [f"## Cache initialisation: {human(setup['capacity'])}, chunks of {human(setup['chunk'])}", "",
            "Clock from open (context created before). Incremental: reserve, map chunk by chunk on the "
            f"background thread, a first capture of {human(setup['trace_size'])} at once; direct: one "
            "allocation of the whole capacity and a first-touch memset, then the same copy.", "",
            "| method | whole cache usable after | rate | first capture blocks |", "|---|---:|---:|---:|",
            f"| incremental (L0) | {inc['usable'].cell()} | {rate(inc['usable'])} | {inc['first'].cell()} |",
            f"| direct | {direct['usable'].cell()} | {rate(direct['usable'])} | {direct['first'].cell()} |",
            "", f"First capture: direct / incremental = "
            f"{ratio_series(direct['first'], inc['first'], '').cell(fmt_ratio)}.", ""]


def blocking_table(heads: List[str], rows: List[Tuple[List[str], Dict[str, Blocking]]],
                   methods: List[str]) -> List[str]:
    """Checkpoint and checkpoint + restore blocking of each method, then each
    method's ratio to l0; one row per (first cells, {method: Blocking})."""
    others = [m for m in methods if m != "l0"]
    lines = ["| " + " | ".join(heads + [f"{m}: checkpoint | {m}: checkpoint + restore" for m in methods]
                               + [f"{m} / l0 checkpoint | {m} / l0 total" for m in others]) + " |",
             "|" + "---|" * len(heads) + "---:|---:|" * (len(methods) + len(others))]
    for cells, t in rows:
        blocked = [f"{t[m]['checkpoint'].cell()} | {t[m]['total'].cell()}" for m in methods]
        ratios = [f"{ratio_series(t[m]['checkpoint'], t['l0']['checkpoint'], '').cell(fmt_ratio)} | "
                  f"{ratio_series(t[m]['total'], t['l0']['total'], '').cell(fmt_ratio)}" for m in others]
        lines.append("| " + " | ".join(cells + blocked + ratios) + " |")
    return lines + [""]


def uniform_lines(trace: dict, setup: dict) -> List[str]:
    methods = [m for m, _ in TRACE_METHODS if m in next(iter(trace.values()))]
    return ([f"## Uniform trace: {human(setup['trace_size'])} × {setup['count']} checkpoints", "",
             "Each checkpoint after the compute interval (a sleep); then every version restored in "
             "reverse order, back to back. Total blocking of the application thread per run.", ""]
            + blocking_table(["interval"], [([f"{i:g} ms"], t) for i, t in trace.items()], methods))


OTHER_NAMES = {"direct": "direct allocation", "uvm": "UVM"}


def rtm_lines(rtm: dict, setup: dict, backend: str) -> List[str]:
    sizes = setup["traces"][0]
    others = [m for m in ("direct", "uvm") if m in next(iter(rtm["blocking"].values()))]
    rows = [([f"{i:g} ms", config], {"l0": t[key], **{m: t[m] for m in others}})
            for i, t in rtm["blocking"].items()
            for config, key in (("large-device", "l0"), ("large-host", "l0-host"))]
    host_runs = rtm["large_host"]
    flush_wait = Series("flush wait", "resurgo", times=[r["flush_wait_seconds"] for r in host_runs])
    lines = [f"## RTM-like trace: {human(setup['rtm_total'])} per process in {setup['rtm_count']} checkpoints of "
             "variable size", "",
             "Sizes from the model of `bench/gpu_cache.py` (its docstring): checkpoint i of M, "
             "x_i = (i + ½) / M, size_i ∝ g(x_i) · (1 + n·u_i) with g(x) = f + (1 − f) · (x/p) · e^(1 − x/p), "
             "scaled so that the shot's total is T · (1 + d·v) and rounded to multiples of q; "
             f"f = {RTM_FLOOR}, p = {RTM_PEAK}, n = {RTM_NOISE}, d = {SHOT_SPREAD}, q = {human(SIZE_QUANTUM)}; "
             "v, then the u_i, uniform in [−1, 1] from Python's `random.Random(seed)`. The size rises as the "
             "wavefront spreads, peaks at p and falls as energy leaves the model (the paper gives the sizes, "
             f"Fig. 3a, not a formula). T = {human(setup['rtm_total'])} per process (defaults: 2750 MB in 128 "
             "checkpoints on a GPU, 22 GB per shot over 8 processes, the middle of Fig. 3a's 20–24 GB; 1 GiB in "
             "32 on the host analog, scaled down to keep the run near 8 minutes on 2 cores). This trace: seed "
             f"{setup['seed']}, {human(sum(sizes))} in all, checkpoints of {human(min(sizes))} to "
             f"{human(max(sizes))} (median {human(statistics.median(sizes))}).", "",
             "Each checkpoint after the compute interval (a sleep), then every version restored in reverse order, "
             "back to back. The l0 method in two configurations (section V-C): large-device, a cache of the whole "
             f"trace and no host buffer; large-host, a cache of {setup['fraction']:g} of the trace "
             f"({human(host_runs[0]['cache_capacity'])}) over a host buffer of the whole trace: a background thread "
             "copies each version there once it is captured (pageable memory, not touched before), the cache may "
             "evict a version only then, and an evicted version is restored from the host buffer (no prefetch "
             "back into the cache). " + " and ".join(OTHER_NAMES[m] for m in others).capitalize()
             + (" do" if len(others) > 1 else " does") + " not depend on the configuration: the same runs appear "
             "on both rows.", ""]
    lines += blocking_table(["interval", "configuration"], rows, ["l0"] + others)
    lines += [f"Large-host: {statistics.median(r['evicted'] for r in host_runs):g} of {setup['rtm_count']} "
              f"versions evicted, {statistics.median(r['restored_from_host'] for r in host_runs):g} restored from "
              f"the host buffer (medians over its {len(host_runs)} runs); captures waited for flushes "
              f"{flush_wait.cell()} per run.", ""]
    if backend == "host":
        lines += ["Host analog: the host buffer is ordinary memory like the cache, so a restore from it costs "
                  "about what a restore from the cache costs. Large-host differs from large-device here by the "
                  "flushes that compete with the captures for memory bandwidth and by the captures' waits for "
                  "them, not by a slower link to the host.", ""]
    return lines


def process_lines(processes: dict, setup: dict, backend: str) -> List[str]:
    counts = ", ".join(str(n) for n in processes)
    lines = [f"## Processes: {counts} at once, RTM-like traces, large-host, {setup['process_interval']:g} ms", "",
             f"Process k runs its own RTM-like trace (seed {setup['seed']} + k: sizes and total differ per "
             "process, as in Fig. 3a), with the l0 method in the large-host configuration (a cache of "
             f"{setup['fraction']:g} of its trace) or with direct allocation; the processes of a run are launched "
             "together (back to back, a few ms apart). Blocking per process: the total over the processes divided "
             "by their number (the paper's Fig. 6, which uses its uniform trace); median [min–max] over the "
             "repeats.", ""]
    if backend == "host":
        lines += [f"Host analog: the processes share this machine's memory bandwidth and its {os.cpu_count()} "
                  "cores, so this measures their contention for host memory, not for a GPU's links.", ""]
    return lines + blocking_table(["processes"], [([str(n)], t) for n, t in processes.items()],
                                  [m for m, _ in PROCESS_METHODS])


def blocking_lines(ax, data: dict, measures: Sequence[str]) -> None:
    """Median and min–max of each method's blocking against the keys of
    data ({x: {method: Blocking}}): a colour per method, solid for
    checkpoint, dashed for checkpoint + restore."""
    xs = list(data)
    for colour, key in enumerate(data[xs[0]]):
        for measure in measures:
            series = [data[x][key][measure] for x in xs]
            med = [s.median for s in series]
            ax.errorbar(xs, med, yerr=[[m - s.min for m, s in zip(med, series)],
                                       [s.max - m for m, s in zip(med, series)]],
                        marker="o", capsize=2, color=f"C{colour}", linestyle="-" if measure == "checkpoint" else "--",
                        label=series[0].label + ("" if measure == "checkpoint" else ", + restore"))
    ax.set_yscale("log")
    ax.legend(fontsize=7)


def write_plot(args, title: str, capture, init, traces: dict, setup: dict) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(16, 10)) if traces else plt.subplots(1, 2, figsize=(11, 5))
    axes = axes.flatten()
    capture_panel(axes[0], capture)
    init_panel(axes[1], init, setup)
    if traces:
        trace_panels(axes[2:], traces, setup)
    fig.suptitle(plot_title(title, args))
    fig.tight_layout()
    png = args.out / f"{NAME}.png"
    fig.savefig(png, dpi=110)
    log(f"wrote {png}")


def capture_panel(ax, capture) -> None:
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


def init_panel(ax, init, setup: dict) -> None:
    inc, direct = init["incremental"], init["direct"]
    labels = ["incremental\nusable", "incremental\nfirst capture", "direct\nusable"]
    series = [inc["usable"], inc["first"], direct["usable"]]
    ax.bar(labels, [s.median for s in series],
           yerr=[[s.median - s.min for s in series], [s.max - s.median for s in series]], capsize=2)
    ax.set_ylabel("seconds")
    ax.set_title(f"initialisation of {human(setup['capacity'])}")


def trace_panels(axes, traces: dict, setup: dict) -> None:
    """The uniform trace, the RTM-like sizes (Fig. 3a's analog), the RTM-like
    trace, and the processes when measured."""
    ax = axes[0]
    blocking_lines(ax, traces["uniform"], ["checkpoint"])
    ax.set_xscale("log")
    ax.set_xlabel("compute interval (ms)")
    ax.set_ylabel("total checkpoint blocking (s)")
    ax.set_title(f"uniform trace {human(setup['trace_size'])} × {setup['count']}")
    ax = axes[1]
    for k, sizes in enumerate(setup["traces"]):
        ax.plot(range(1, len(sizes) + 1), [s / MiB for s in sizes], label=f"process {k} (seed {setup['seed'] + k})")
    ax.set_xlabel("checkpoint")
    ax.set_ylabel("size (MiB)")
    ax.set_title("RTM-like checkpoint sizes (model)")
    ax.legend(fontsize=7)
    ax = axes[2]
    blocking_lines(ax, traces["rtm"]["blocking"], ["checkpoint", "total"])
    ax.set_xscale("log")
    ax.set_xlabel("compute interval (ms)")
    ax.set_ylabel("total blocking (s)")
    ax.set_title(f"RTM-like trace, {human(setup['rtm_total'])} × {setup['rtm_count']}")
    ax = axes[3]
    if not traces["processes"]:
        ax.axis("off")
        return
    blocking_lines(ax, traces["processes"], ["checkpoint", "total"])
    ax.set_xticks(list(traces["processes"]))
    ax.set_xlabel("processes at once")
    ax.set_ylabel("total blocking per process (s)")
    ax.set_title(f"processes, large-host, {setup['process_interval']:g} ms")


def _nvidia_smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (nvidia-smi failed)"


if __name__ == "__main__":
    main()
