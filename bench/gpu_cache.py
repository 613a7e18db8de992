#!/usr/bin/env python3
"""The L0 device cache against the baselines of the HiPC'22 cache-allocation
paper (section V): what a capture blocks against a bare device-to-device
copy; the initialisation of the device buffer, incremental chunk mapping
against one allocation, by 1, 2, 4, 8 processes at once (Fig. 4a); the
uniform trace (N MiB x M checkpoints, compute intervals of 5-100 ms) in the
large-host configuration with the cache (ours) against the paper's direct
method (one up-front cuMemAlloc of the device buffer and one cuMemHostAlloc
of the host buffer), its incremental memset, UVM (cuMemAllocManaged with
prefetch), and allocation per checkpoint (Fig. 5a, 5b); the touch strategies
of the host buffer (Fig. 5c); an RTM-like trace of variable checkpoint sizes
in the large-device and large-host configurations (section V-C, Fig. 3);
1, 2, 4, 8 processes at once on one GPU (Fig. 6a, 6b); a growing host buffer
(Fig. 6c); and a restore of a version prefetched into L0 through the Store
against a bare device-to-device copy (issue 30's backward pass).

Runs bench/gpu_cache.cpp (build/cpp/bench/gpu_cache) once per measure and
repeat. Without a usable CUDA driver it runs the host analog (the same cache
over host memory; cuMemAlloc is mmap + memset, cuMemHostAlloc mmap with
MAP_POPULATE and mlock where allowed, no UVM) and says so in the report; the
issue's targets are then printed as ratios but never judged.

Every method's set-up is on the clock (the paper's Fig. 1A): the program
sets it up after the first compute interval and the first checkpoint waits
for it, so direct pays its up-front allocations there and ours its
reservation only.

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
in 128 checkpoints; on the host analog 512 MiB in 16 checkpoints, scaled
down so that the default run fits in about 8 minutes on a 2-core machine.
The paper does not give the number of checkpoints per shot: 128 and 16 are
ours. The RTM measure runs the trace of seed --seed.
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
from typing import Callable, Dict, List, Optional, Sequence, Tuple

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
# Issue 30's targets (for a GPU run; never judged on the host analog).
CHECKPOINT_TARGET = 12.0  # direct / l0 checkpoint blocking, uniform trace (the paper: 12.5x on an A100)
TOTAL_TARGET = 8.0  # direct / l0 checkpoint + restore blocking (the paper: 7.8x)
PREFETCH_TARGET = 1.2  # restart of a prefetched version / bare device-to-device copy
# Defaults per backend: the paper's sizes on a GPU (large-host: a device
# buffer of 4 GB for 32 GB of checkpoints, 1/8), a scaled-down analog on host
# that runs in about 8 minutes on 2 cores.
DEFAULTS = {
    "cuda": dict(sizes="128MiB,1GiB", chunk="1GiB", init_capacity="8GiB", init_processes="1,2,4,8",
                 trace_size="128MiB", count=256, intervals="5,10,20,50,100", touch_intervals="5,20,100",
                 rtm_total="2750MB", rtm_count=128, rtm_intervals="5,20,100", processes="1,2,4,8", process_count=64,
                 host_buffers="8GiB,16GiB,32GiB", prefetch_count=6),
    "host": dict(sizes="64MiB,256MiB", chunk="64MiB", init_capacity="256MiB", init_processes="1,2",
                 trace_size="32MiB", count=16, intervals="5,20,100", touch_intervals="5,100",
                 rtm_total="512MiB", rtm_count=16, rtm_intervals="5,100", processes="1,2,4", process_count=16,
                 host_buffers="256MiB,512MiB", prefetch_count=6),
}
# --quick, over the defaults (explicit options win), with 3 repeats: every
# table, fewer rows and shorter traces; on a GPU about 5 minutes by the
# estimate printed at the start (which guesses high: the old --quick took
# 132 s on an H100 against 156 s estimated).
QUICK = {
    "cuda": dict(init_capacity="2GiB", init_processes="1,4", count=32, intervals="5,20,100",
                 touch_intervals="5", rtm_count=32, rtm_intervals="20", processes="1,4", process_count=16,
                 host_buffers="8GiB"),
    "host": dict(count=8, intervals="5,100", touch_intervals="5", rtm_count=8, rtm_intervals="5", processes="1,2",
                 process_count=8, host_buffers="256MiB", init_processes="1,2", prefetch_count=4),
}
# --fake-driver: the runs of --quick against the test fake, whose device
# memory is host memory: a few MiB at a time, done in about a minute on 2 cores.
FAKE = dict(QUICK["cuda"], sizes="4MiB,8MiB", chunk="8MiB", init_capacity="16MiB",
            init_processes="1,2", trace_size="4MiB", count=8, rtm_total="32MiB", rtm_count=8, processes="1,2",
            process_count=8, host_buffers="32MiB", prefetch_count=4)
# The RTM-like size model (module docstring).
RTM_FLOOR = 0.25  # f: the first checkpoints' size relative to the peak's
RTM_PEAK = 0.4  # p: where in the forward pass the size peaks
RTM_NOISE = 0.15  # n: bounded noise per checkpoint
SHOT_SPREAD = 0.09  # d: a shot's total per process varies by this much
SIZE_QUANTUM = 4096  # q
# Rough costs, for the expected duration printed at the start only: the host
# analog on the 2-core development VM (its 2026-11-25 run), and guesses for a
# GPU machine (a process's CUDA start-up and teardown; host buffers allocated
# pinned and flushes, per byte).
HOST_SECONDS_PER_GIB = 1.5  # a trace run besides its sleeps, per GiB of checkpoints
CAPTURE_SECONDS_PER_GIB = 14.0  # one repeat of the capture and prefetch measures, per GiB of their size
CUDA_PROCESS_SECONDS = 1.0
CUDA_HOST_BYTES_PER_SECOND = 4e9


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
    few ms apart, against runs of a second or more), then waited for."""
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


INIT_METHODS = [("incremental", "incremental chunk mapping (L0)"), ("direct", "one allocation + first-touch memset")]


def measure_init(binary: Path, backend: str, capacity: int, chunk: int, first: int, counts: List[int],
                 repeats: int) -> Dict[int, dict]:
    """{processes: {method: {"usable", "first", "rate"}}}: each of n processes
    at once initialises `capacity`; per repeat the mean over the processes of
    the time until the whole cache is usable and of the first capture, and
    each process's rate (capacity / usable), averaged (Fig. 4a)."""
    out: Dict[int, dict] = {}
    for n in counts:
        out[n] = {m: {"usable": Series(label, m), "first": Series(label, m), "rate": Series(label, m)}
                  for m, label in INIT_METHODS}
        for r in range(repeats):
            for method, _ in rotated(INIT_METHODS, r):
                rows = run_together(binary, backend, [["--mode", "init", "--method", method, "--capacity-mib",
                                                       mib(capacity), "--chunk-mib", mib(chunk), "--mib", mib(first)]
                                                      for _ in range(n)])
                s = out[n][method]
                s["usable"].times.append(statistics.fmean(row["usable_seconds"] for row in rows))
                s["first"].times.append(statistics.fmean(row["first_capture_seconds"] for row in rows))
                s["rate"].times.append(statistics.fmean(capacity / row["usable_seconds"] for row in rows))
            log(f"init {human(capacity)} x {n} {r + 1}/{repeats}: " + ", ".join(
                f"{m} usable after {fmt_time(out[n][m]['usable'].times[-1])}" for m, _ in INIT_METHODS))
    return out


Blocking = Dict[str, Series]  # "checkpoint" and "total" (checkpoint + restore) of one method
Variants = List[Tuple[str, str]]  # (key, label)


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


def measure_blocking(binary: Path, backend: str, name: str, xs: Sequence, variants: Variants,
                     arg_lists: Callable[[object, str], List[List[str]]], repeats: int,
                     rows_of: Optional[Dict[str, List[dict]]] = None) -> dict:
    """{x: {key: Blocking}}: for each x and repeat, each variant once (in an
    order rotated at each repeat), its processes (arg_lists(x, key), one per
    process) run at once; rows_of, when given, collects each key's rows."""
    out: Dict[object, Dict[str, Blocking]] = {}
    for x in xs:
        out[x] = {key: blocking(label, key) for key, label in variants}
        for r in range(repeats):
            for key, _ in rotated(variants, r):
                rows = run_together(binary, backend, arg_lists(x, key))
                add_blocking(out[x][key], rows)
                if rows_of is not None:
                    rows_of.setdefault(key, []).extend(rows)
            log(f"{name} {fmt_x(x)} {r + 1}/{repeats}: " + ", ".join(
                f"{key} {fmt_time(out[x][key]['total'].times[-1])}" for key, _ in variants))
    return out


def fmt_x(x) -> str:
    """An interval or a process count as given, a size as a size."""
    return human(x) if isinstance(x, int) and x >= MiB else f"{x:g}"


def uniform(size: int, count: int) -> List[str]:
    return ["--mib", mib(size), "--count", str(count)]


def trace_args(method: str, workload: List[str], interval: float, chunk: int, fraction: float,
               touch: str = "auto") -> List[str]:
    return ["--mode", "trace", "--method", method, *workload, "--interval-ms", repr(interval), "--chunk-mib",
            mib(chunk), "--cache-fraction", repr(fraction), "--touch", touch]


UNIFORM_METHODS = [("l0", "L0 cache + late-pinned host buffer (ours)"),
                   ("direct", "direct: one cuMemAlloc + one cuMemHostAlloc up front"),
                   ("memset", "incremental memset"),
                   ("direct-each", "cuMemAlloc per checkpoint, no host buffer"),
                   ("uvm", "UVM (cuMemAllocManaged + prefetch)")]
TOUCH_VARIANTS = [("concurrent", "ours, touching concurrent with flushes"),
                  ("sequential", "ours, touching between flushes")]


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


def rtm_variants(backend: str, fraction: float) -> List[Tuple[str, str, float, str]]:
    """(key, method, cache fraction, label) of the RTM-like trace's runs."""
    variants = [("l0", "l0", 1.0, "L0 cache, large-device"),
                ("l0-host", "l0", fraction, f"L0 cache, large-host ({fraction:g} of the trace)"),
                ("direct", "direct", 1.0, "direct, large-device"),
                ("direct-host", "direct", fraction, "direct, large-host")]
    return variants + ([("uvm", "uvm", 1.0, "UVM (cuMemAllocManaged + prefetch)")] if backend == "cuda" else [])


def measure_prefetch(binary: Path, backend: str, size: int, count: int, chunk: int, repeats: int) -> dict:
    """Restarts of versions prefetched into L0 against a bare
    device-to-device copy, with compute intervals of 20 ms plus the time of a
    version at 2 GB/s (room for the prefetch's host-to-device copy)."""
    interval = 20 + 1e3 * size / 2e9
    out = {"prefetched": Series("restart of a prefetched version", "resurgo", size),
           "bare": Series("bare device-to-device copy", "floor", size),
           "ratio": Series("prefetched restart / bare copy", "ratio"), "staged": []}
    for r in range(repeats):
        row = run(binary, backend, "--mode", "prefetch", "--mib", mib(size), "--count", str(count),
                  "--interval-ms", repr(interval), "--chunk-mib", mib(chunk))
        out["staged"].append(row["restored_from_prefetch"])
        out["bare"].times.append(row["bare_median"])
        if row["prefetched_median"] >= 0:
            out["prefetched"].times.append(row["prefetched_median"])
            out["ratio"].times.append(row["prefetched_median"] / row["bare_median"])
        log(f"prefetch {human(size)} {r + 1}/{repeats}: {row['restored_from_prefetch']} of {count} restarts from a "
            f"prefetch, median {fmt_time(max(row['prefetched_median'], 0))} vs bare {fmt_time(row['bare_median'])}")
    return out


def ratio_series(num: Series, den: Series, label: str = "") -> Series:
    s = Series(label, "ratio")
    s.times = [a / b for a, b in zip(num.times, den.times)]
    return s


def fmt_ratio(value: float) -> str:
    return f"{value:.3g}×"


def floats(text: str) -> List[float]:
    return [float(t) for t in text.split(",") if t.strip()]


def ints(text: str) -> List[int]:
    return [int(t) for t in text.split(",") if t.strip()]


PROCESS_METHODS = [("l0", "L0 cache + late-pinned host buffer (ours)"),
                   ("direct", "direct: one cuMemAlloc + one cuMemHostAlloc up front")]


def measure_traces(binary: Path, backend: str, setup: dict, repeats: int, notes: List[str]) -> dict:
    """Every trace measure: uniform (Fig. 5a, 5b), touch strategies (5c),
    RTM-like (3b, 3c), processes (6a, 6b), host buffer sizes (6c)."""
    f, chunk, size, pause = setup["fraction"], setup["chunk"], setup["trace_size"], setup["process_interval"]
    work = uniform(size, setup["count"])
    methods = [(k, label) for k, label in UNIFORM_METHODS if backend == "cuda" or k != "uvm"]
    if backend != "cuda":
        notes.append("UVM is a CUDA feature: the host analog has no UVM column.")
    out: dict = {"uniform_rows": {}, "rtm_rows": {}}
    out["uniform"] = measure_blocking(binary, backend, "uniform trace", setup["intervals"], methods,
                                      lambda i, m: [trace_args(m, work, i, chunk, f)], repeats, out["uniform_rows"])
    out["touch"] = measure_blocking(binary, backend, "touch", setup["touch_intervals"], TOUCH_VARIANTS,
                                    lambda i, t: [trace_args("l0", work, i, chunk, f, t)], repeats)
    variants = rtm_variants(backend, f)
    spec = {key: (method, fraction) for key, method, fraction, _ in variants}
    with tempfile.TemporaryDirectory(prefix="gpu_cache-") as tmp:
        sizes = ["--sizes-file", str(write_sizes(Path(tmp) / "rtm.txt", setup["rtm"]))]
        out["rtm"] = measure_blocking(binary, backend, "RTM-like trace", setup["rtm_intervals"],
                                      [(key, label) for key, _, _, label in variants],
                                      lambda i, k: [trace_args(spec[k][0], sizes, i, chunk, spec[k][1])], repeats,
                                      out["rtm_rows"])
    per_process = uniform(size, setup["process_count"])
    out["processes"] = measure_blocking(binary, backend, "processes", setup["processes"], PROCESS_METHODS,
                                        lambda n, m: [trace_args(m, per_process, pause, chunk, f)] * n, repeats)
    device = f * setup["count"] * size  # the uniform trace's device buffer, kept as the host buffer grows
    out["host_buffers"] = measure_blocking(
        binary, backend, "host buffer", setup["host_buffers"], PROCESS_METHODS,
        lambda b, m: [trace_args(m, uniform(size, max(1, b // size)), pause, chunk, min(0.5, device / b))], repeats)
    return out


def expected_seconds(setup: dict, backend: str, repeats: int, skip_trace: bool) -> Tuple[float, float, int]:
    """A rough duration of the run: (the traces' compute sleeps, the rest,
    the processes started). The rest: on host at the analog's speed on the
    2-core VM; on cuda each process's start-up and the bytes the host
    buffers take (allocation, flushes), both guesses."""
    size = setup["trace_size"]
    runs = []  # (runs, processes per run, checkpoints, interval in ms, bytes per process)
    if not skip_trace:
        methods = len(UNIFORM_METHODS) - (backend != "cuda")
        runs += [(repeats * methods, 1, setup["count"], i, setup["count"] * size) for i in setup["intervals"]]
        runs += [(repeats * 2, 1, setup["count"], i, setup["count"] * size) for i in setup["touch_intervals"]]
        runs += [(repeats * (4 + (backend == "cuda")), 1, setup["rtm_count"], i, setup["rtm_total"])
                 for i in setup["rtm_intervals"]]
        runs += [(repeats * 2, n, setup["process_count"], setup["process_interval"], setup["process_count"] * size)
                 for n in setup["processes"]]
        runs += [(repeats * 2, 1, b // size, setup["process_interval"], b) for b in setup["host_buffers"]]
    sleeps = sum(times * count * interval / 1e3 for times, _, count, interval, _ in runs)
    processes = sum(times * n for times, n, _, _, _ in runs)
    processes += repeats * (2 * len(setup["sizes"]) + 2 * sum(setup["init_processes"]))
    sleeps += repeats * sum(setup["prefetch_count"] * (20 + 1e3 * s / 2e9) / 1e3 for s in setup["sizes"])
    moved = sum(times * n * nbytes for times, n, _, _, nbytes in runs)
    if backend == "host":
        rest = (HOST_SECONDS_PER_GIB * moved + repeats * CAPTURE_SECONDS_PER_GIB * sum(setup["sizes"])) / GiB
    else:
        rest = processes * CUDA_PROCESS_SECONDS + moved / CUDA_HOST_BYTES_PER_SECOND
    return sleeps, rest, processes


def main() -> None:
    args = parse_args()
    binary = args.binary if args.binary.is_absolute() else Path.cwd() / args.binary
    if not binary.is_file():
        sys.exit(f"{SCRIPT}: {args.binary} not found. Build it first:  cmake --build build/cpp --target gpu_cache")
    notes: List[str] = []
    why_not_cuda = probe_cuda(binary, ["--mode", "capture", "--mib", "1", "--iterations", "1", "--chunk-mib", "2"])
    backend = pick_backend(SCRIPT, "cuda" if args.fake_driver else args.backend, why_not_cuda)
    if backend == "host":
        cuda_here = why_not_cuda or "usable, but --backend host was asked for"
        notes.append(f"**Host analog only: no GPU measure was taken** (CUDA here: {cuda_here}). The same "
                     "cache logic runs over host memory; 'device-to-device copy' is memcpy, cuMemAlloc is an mmap "
                     "set to zero, cuMemHostAlloc an mmap with MAP_POPULATE (and mlock where RLIMIT_MEMLOCK "
                     "allows), 'allocation per checkpoint' an mmap whose pages the copy faults in, pinning is "
                     "mlock. The issue's targets are not judged on it.")
    if args.fake_driver:
        notes.append("**The CUDA driver was the test fake** (tests/cpp/fake_cuda): device memory is host memory, "
                     "copies run on the fake's stream threads, and the sizes are shrunk (`--fake-driver`); the "
                     "timings mean nothing.")
    preset = dict(DEFAULTS[backend], **(FAKE if args.fake_driver else QUICK[backend] if args.quick else {}))
    setup = make_setup(args, preset)
    check_resources(SCRIPT, ROOT, "the largest trace run", 1.3 * peak_bytes(setup, args.skip_trace), 0)
    sleeps, rest, processes = expected_seconds(setup, backend, args.repeats, args.skip_trace)
    where = "at the speed of a 2-core machine" if backend == "host" else (
        f"{sleeps:.0f} s of compute sleeps, {processes} processes at a guessed {CUDA_PROCESS_SECONDS:g} s of CUDA "
        "start-up each, host buffers")
    log(f"expected duration: about {(sleeps + rest) / 60:.1f} min ({where})")

    load_start = os.getloadavg()
    started = time.perf_counter()
    results = {"capture": {s: measure_capture(binary, backend, s, setup["chunk"], args.repeats)
                           for s in setup["sizes"]},
               "init": measure_init(binary, backend, setup["init_capacity"], setup["chunk"], setup["trace_size"],
                                    setup["init_processes"], args.repeats),
               "prefetch": {s: measure_prefetch(binary, backend, s, setup["prefetch_count"], setup["chunk"],
                                                args.repeats) for s in setup["sizes"]}}
    results["traces"] = {} if args.skip_trace else measure_traces(binary, backend, setup, args.repeats, notes)
    notes.append(f"The run took {time.perf_counter() - started:.0f} s; load average (1, 5, 15 min) "
                 f"{fmt_load(load_start)} at the start, {fmt_load(os.getloadavg())} at the end.")
    write_report(args, binary, backend, results, setup, notes)


def fmt_load(load: Tuple[float, float, float]) -> str:
    return ", ".join(f"{x:.2f}" for x in load)


def peak_bytes(setup: dict, skip_trace: bool) -> float:
    """The most host memory one measure holds at once (host buffers and, on
    the host analog, the device buffers too)."""
    peak = 2 * max(setup["sizes"]) + max(setup["init_processes"]) * setup["init_capacity"]
    if skip_trace:
        return peak
    return max(peak, setup["count"] * setup["trace_size"], setup["rtm_total"], max(setup["host_buffers"], default=0),
               max(setup["processes"], default=0) * setup["process_count"] * setup["trace_size"])


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY,
                    help="the gpu_cache program (default: build/cpp/bench/gpu_cache)")
    ap.add_argument("--backend", choices=["auto", "cuda", "host"], default="auto",
                    help="auto: cuda where a CUDA driver and GPU work, else the host analog")
    d, h = DEFAULTS["cuda"], DEFAULTS["host"]
    for option, what in (("sizes", "capture and prefetch sizes"), ("chunk", "mapping chunk"),
                         ("init-capacity", "cache each process initialises (Fig. 4a)"),
                         ("init-processes", "process counts of the initialisation (Fig. 4a)"),
                         ("trace-size", "checkpoint size of the uniform trace"),
                         ("intervals", "compute intervals of the uniform trace in ms"),
                         ("touch-intervals", "intervals of the touch strategies (Fig. 5c; those of --intervals only)"),
                         ("rtm-total", "mean total of the RTM-like trace per process"),
                         ("rtm-intervals", "compute intervals of the RTM-like trace in ms"),
                         ("processes", "process counts run at once on the uniform trace (Fig. 6a, 6b)"),
                         ("host-buffers", "host buffer sizes per process (Fig. 6c)")):
        key = option.replace("-", "_")
        ap.add_argument(f"--{option}", help=f"{what} (cuda: {d[key]}, host: {h[key]})")
    for option, what in (("count", "checkpoints in the uniform trace"),
                         ("rtm-count", "checkpoints in the RTM-like trace"),
                         ("process-count", "checkpoints per process of the processes measure"),
                         ("prefetch-count", "versions checkpointed, then restarted, by the prefetch measure")):
        key = option.replace("-", "_")
        ap.add_argument(f"--{option}", type=int, help=f"{what} (cuda: {d[key]}, host: {h[key]})")
    ap.add_argument("--cache-fraction", type=float, default=0.125,
                    help="large-host configuration: the device buffer as a fraction of the trace (default 0.125: "
                         "the paper's 4 GB for 32 GB)")
    ap.add_argument("--process-interval", type=float, default=20.0,
                    help="compute interval of the processes and host-buffer measures in ms (default 20, as Fig. 6)")
    ap.add_argument("--seed", type=int, default=2022, help="seed of the RTM-like trace (default 2022)")
    ap.add_argument("--skip-trace", action="store_true",
                    help="capture, initialisation and prefetch only (no trace measure)")
    ap.add_argument("--quick", action="store_true",
                    help=f"a shorter run with every table: {QUICK_REPEATS} repeats (allowed with --quick, the default "
                         "then), fewer intervals, process counts and host buffers, shorter traces (bench/README.md); "
                         "explicit options override these")
    ap.add_argument("--fake-driver", action="store_true",
                    help="against the test fake (tests/cpp/fake_cuda: put its libcuda.so.1 on LD_LIBRARY_PATH): "
                         "implies --smoke and the cuda backend, --quick's repeats, and sizes of a few MiB; the "
                         "report says the timings mean nothing. Implied (unless --backend host) when the "
                         "libcuda.so.1 found is the fake")
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
    for option in ("sizes", "intervals", "init_processes"):
        if getattr(args, option) is not None and not getattr(args, option).strip(","):
            ap.error(f"--{option.replace('_', '-')} needs at least one value (--skip-trace skips every trace)")
    return args


def make_setup(args, d: dict) -> dict:
    """The sizes, counts and intervals of the run (each option, else the
    preset `d`) and the RTM-like trace's sizes."""
    pick = lambda key: d[key] if getattr(args, key) is None else getattr(args, key)  # noqa: E731
    setup = dict(sizes=parse_sizes(pick("sizes")), chunk=parse_size(pick("chunk")),
                 init_capacity=parse_size(pick("init_capacity")), init_processes=ints(pick("init_processes")),
                 trace_size=parse_size(pick("trace_size")), count=pick("count"), intervals=floats(pick("intervals")),
                 rtm_total=parse_size(pick("rtm_total")), rtm_count=pick("rtm_count"),
                 rtm_intervals=floats(pick("rtm_intervals")), fraction=args.cache_fraction,
                 processes=ints(pick("processes")), process_count=pick("process_count"),
                 host_buffers=parse_sizes(pick("host_buffers")), prefetch_count=pick("prefetch_count"),
                 process_interval=args.process_interval, seed=args.seed)
    setup["touch_intervals"] = [i for i in floats(pick("touch_intervals")) if i in setup["intervals"]]
    setup["rtm"] = rtm_sizes(setup["rtm_total"], setup["rtm_count"], args.seed)
    return setup


def write_report(args, binary: Path, backend: str, results: dict, setup: dict, notes: List[str]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    machine = machine_description(args.out)
    machine.pop("target directory", None)
    machine["backend"] = backend
    if backend == "cuda":
        machine["GPU"] = ("the test fake, tests/cpp/fake_cuda (`--fake-driver`): host memory, no GPU"
                          if args.fake_driver else _nvidia_smi())
    machine["program"] = str(binary)
    title = ("L0 device cache against the paper's baselines (HiPC'22, section V)"
             + (" (host analog)" if backend == "host" else " (fake CUDA driver)" if args.fake_driver else ""))
    judged = backend == "cuda" and not args.fake_driver
    traces = results["traces"]
    targets = target_rows(results, judged, "host analog" if backend == "host" else "fake driver")
    lines = report_header(title, SCRIPT, args, extra="One process per measure and repeat (n at once where the "
                          "processes are counted).")
    lines += machine_lines(machine) + target_lines(targets)
    lines += capture_lines(results["capture"]) + init_lines(results["init"], setup)
    lines += prefetch_lines(results["prefetch"], setup)
    if traces:
        lines += uniform_lines(traces, setup) + touch_lines(traces, setup)
        lines += rtm_lines(traces, setup, backend) if traces["rtm"] else []
        lines += process_lines(traces["processes"], setup, backend) if traces["processes"] else []
        lines += host_buffer_lines(traces["host_buffers"], setup) if traces["host_buffers"] else []
    lines += ["## Notes", ""] + [f"- {n}" for n in notes] + ["", f"Plot: `{NAME}.png`.", ""]
    md = args.out / f"{NAME}.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")
    write_plot(args, title, results, setup)
    for what, value, target, verdict in targets:
        print(f"{what}: {value} (target {target}: {verdict})")


def target_rows(results: dict, judged: bool, why_not: str) -> List[Tuple[str, str, str, str]]:
    """(what, measured, target, verdict) of each of issue 30's targets that
    this run measured; verdicts only on a GPU."""
    verdict = lambda ok: ("met" if ok else "missed") if judged else f"not judged ({why_not})"  # noqa: E731
    rows = []
    traces = results["traces"]
    if traces:
        u = traces["uniform"]
        for measure, goal, name in (("checkpoint", CHECKPOINT_TARGET, "checkpoint blocking"),
                                    ("total", TOTAL_TARGET, "checkpoint + restore blocking")):
            r = {i: ratio_series(t["direct"][measure], t["l0"][measure]).median for i, t in u.items()}
            best = max(r, key=r.get)
            rows.append((f"{name}, direct / ours, uniform trace (best interval)", f"{r[best]:.3g}× at {best:g} ms",
                         f"≥ {goal:g}×", verdict(r[best] >= goal)))
        if "uvm" in next(iter(u.values())):
            r = {i: min(ratio_series(t["uvm"][m], t["l0"][m]).median for m in ("checkpoint", "total"))
                 for i, t in u.items()}
            worst = min(r, key=r.get)
            rows.append(("UVM / ours, uniform trace, every interval (the smaller of checkpoint and total)",
                         f"{r[worst]:.3g}× at {worst:g} ms (the least)", "> 1×", verdict(r[worst] > 1)))
        p = traces["processes"]
        if 1 in p and 4 in p:
            r1, r4 = (ratio_series(p[n]["direct"]["total"], p[n]["l0"]["total"]).median for n in (1, 4))
            rows.append(("direct / ours, checkpoint + restore, 1 → 4 processes", f"{r1:.3g}× → {r4:.3g}×",
                         "kept (4 processes ≥ 1 process, > 1×)", verdict(r4 > 1 and r4 >= r1)))
    for size, s in results["prefetch"].items():
        measured = f"{s['ratio'].median:.3g}×" if s["ratio"].times else "no restart came from a prefetch"
        met = bool(s["ratio"].times) and s["ratio"].median <= PREFETCH_TARGET
        rows.append((f"restart of a prefetched version / bare device-to-device copy, {human(size)}", measured,
                     f"≤ {PREFETCH_TARGET:g}×", verdict(met)))
    return rows


def target_lines(rows: List[Tuple[str, str, str, str]]) -> List[str]:
    lines = ["## Issue 30's targets", "",
             "Medians over the repeats of the per-repeat ratios (tables below). The targets are for a GPU run "
             "(scripts/gpu_check.sh on a GPU machine); on the host analog or the fake driver they are printed, "
             "never judged.", "",
             "| what | measured | target | verdict |", "|---|---|---|---|"]
    return lines + [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows] + [""]


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


def fmt_rate(value: float) -> str:
    return f"{value / GiB:.3g} GiB/s"


def init_lines(init: dict, setup: dict) -> List[str]:
    lines = [f"## Cache initialisation by 1 to {max(init)} processes at once (Fig. 4a): "
             f"{human(setup['init_capacity'])} each, chunks of {human(setup['chunk'])}", "",
             "Clock from open (context created before). Incremental: reserve, map chunk by chunk on the background "
             f"thread, a first capture of {human(setup['trace_size'])} at once; direct: one allocation of the whole "
             "capacity and a first-touch memset, then the same copy. n processes start together on one device "
             "(the paper: one per GPU); per repeat the mean over them; rate = capacity / time until usable, per "
             "process.", "",
             "| processes | incremental: usable after | direct: usable after | incremental: rate per process | "
             "direct: rate per process | incremental: first capture | direct: first capture | "
             "first capture, direct / incremental |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n, t in init.items():
        inc, direct = t["incremental"], t["direct"]
        lines.append(f"| {n} | {inc['usable'].cell()} | {direct['usable'].cell()} | {inc['rate'].cell(fmt_rate)} | "
                     f"{direct['rate'].cell(fmt_rate)} | {inc['first'].cell()} | {direct['first'].cell()} | "
                     f"{ratio_series(direct['first'], inc['first']).cell(fmt_ratio)} |")
    return lines + [""]


def prefetch_lines(prefetch: dict, setup: dict) -> List[str]:
    lines = ["## Backward pass: restart of a version prefetched into L0", "",
             f"Each process: a Store with one device region, L0 of two versions, {setup['prefetch_count']} "
             "checkpoints kept in the memory level (so the older ones are evicted from L0), `prefetch()` of the "
             "reverse order, then each `restart()` after a compute interval (20 ms + the version's time at 2 GB/s) "
             "and `discard()` of the restored version; the restarts that copied a version the prefetch staged "
             "(the store's `restored_from_prefetch` counter) against a bare device-to-device copy of the same "
             f"bytes. Target: ≤ {PREFETCH_TARGET}× the bare copy.", "",
             "| size | restarts from a prefetch (per run) | restart of a prefetched version | bare copy | ratio |",
             "|---|---:|---:|---:|---:|"]
    for size, s in prefetch.items():
        lines.append(f"| {human(size)} | {statistics.median(s['staged']):g} of {setup['prefetch_count']} | "
                     f"{s['prefetched'].cell()} | {s['bare'].cell()} | {s['ratio'].cell(fmt_ratio)} |")
    return lines + [""]


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
        ratios = [f"{ratio_series(t[m]['checkpoint'], t['l0']['checkpoint']).cell(fmt_ratio)} | "
                  f"{ratio_series(t[m]['total'], t['l0']['total']).cell(fmt_ratio)}" for m in others]
        lines.append("| " + " | ".join(cells + blocked + ratios) + " |")
    return lines + [""]


def method_legend(variants: Variants) -> str:
    return "; ".join(f"`{key}`: {label}" for key, label in variants) + "."


def uniform_lines(traces: dict, setup: dict) -> List[str]:
    trace = traces["uniform"]
    methods = list(next(iter(trace.values())))
    rows = traces["uniform_rows"]
    pinned = sum(r["host_pinned"] for r in rows.get("l0", []))
    lines = [f"## Uniform trace, large-host (Fig. 5a, 5b): {human(setup['trace_size'])} × {setup['count']} "
             f"checkpoints, a device buffer of {setup['fraction']:g} of the trace", "",
             "Each checkpoint after the compute interval (a sleep); the method is set up after the first interval, "
             "on the clock (its up-front allocations count in the checkpoint blocking); then every version "
             "restored in reverse order, back to back, from the device buffer or else the host buffer (no "
             "prefetch back into the device buffer: the prefetch section measures that through the Store). "
             "Total blocking of the application thread per run. Methods: "
             + method_legend([(k, label) for k, label in UNIFORM_METHODS if k in methods]), ""]
    lines += blocking_table(["interval"], [([f"{i:g} ms"], t) for i, t in trace.items()], methods)
    lines += [f"Ours: the host buffer was pinned by the last checkpoint in {pinned} of {len(rows.get('l0', []))} "
              "runs." + (f" UVM: the restores prefetched (cuMemPrefetchAsync) in "
                         f"{sum(r['prefetched'] for r in rows['uvm'])} of {len(rows['uvm'])} runs." if "uvm" in rows
                         else ""), ""]
    return lines


def touch_lines(traces: dict, setup: dict) -> List[str]:
    rows = [([f"{i:g} ms"], {"l0": traces["uniform"][i]["l0"], **t}) for i, t in traces["touch"].items()]
    if not rows:
        return []
    return (["## Touch strategies of the host buffer (Fig. 5c), uniform trace as above", "",
             "Ours with the touch strategy fixed against the touch model's choice (`l0`, `touch = auto`, the runs "
             "of the uniform table). Serial against parallel pinning across processes is not measured here: the "
             "registration token's tests cover its order.", ""]
            + blocking_table(["interval"], rows, ["l0"] + [k for k, _ in TOUCH_VARIANTS]))


def rtm_lines(traces: dict, setup: dict, backend: str) -> List[str]:
    rtm, sizes = traces["rtm"], setup["rtm"]
    has_uvm = "uvm" in next(iter(rtm.values()))
    rows = [([f"{i:g} ms", config], {"l0": t[l0], "direct": t[direct], **({"uvm": t["uvm"]} if has_uvm else {})})
            for i, t in rtm.items()
            for config, l0, direct in (("large-device", "l0", "direct"), ("large-host", "l0-host", "direct-host"))]
    host_runs = traces["rtm_rows"]["l0-host"]
    flush_wait = Series("flush wait", "resurgo", times=[r["flush_wait_seconds"] for r in host_runs])
    lines = [f"## RTM-like trace (Fig. 3b, 3c): {human(setup['rtm_total'])} per process in {setup['rtm_count']} "
             "checkpoints of variable size", "",
             "Sizes from the model of `bench/gpu_cache.py` (its docstring): checkpoint i of M, "
             "x_i = (i + ½) / M, size_i ∝ g(x_i) · (1 + n·u_i) with g(x) = f + (1 − f) · (x/p) · e^(1 − x/p), "
             "scaled so that the shot's total is T · (1 + d·v) and rounded to multiples of q; "
             f"f = {RTM_FLOOR}, p = {RTM_PEAK}, n = {RTM_NOISE}, d = {SHOT_SPREAD}, q = {human(SIZE_QUANTUM)}; "
             "v, then the u_i, uniform in [−1, 1] from Python's `random.Random(seed)` (the paper gives the sizes, "
             f"Fig. 3a, not a formula). This trace: seed {setup['seed']}, {human(sum(sizes))} in all, checkpoints "
             f"of {human(min(sizes))} to {human(max(sizes))} (median {human(statistics.median(sizes))}).", "",
             "As the uniform trace; ours and direct in two configurations (section V-C): large-device, a device "
             "buffer of the whole trace and no host buffer; large-host, a device buffer of "
             f"{setup['fraction']:g} of the trace ({human(host_runs[0]['cache_capacity'])}) over a host buffer of "
             "the whole trace." + (" UVM does not depend on the configuration: the same runs appear on both rows."
                                   if has_uvm else ""), ""]
    lines += blocking_table(["interval", "configuration"], rows, ["l0", "direct"] + (["uvm"] if has_uvm else []))
    lines += [f"Ours, large-host: {statistics.median(r['evicted'] for r in host_runs):g} of {setup['rtm_count']} "
              f"versions evicted, {statistics.median(r['restored_from_host'] for r in host_runs):g} restored from "
              f"the host buffer (medians over its {len(host_runs)} runs); captures waited for flushes "
              f"{flush_wait.cell()} per run.", ""]
    if backend == "host":
        lines += ["Host analog: the host buffer is ordinary memory like the device buffer, so a restore from it "
                  "costs about what a restore from the device buffer costs; large-host differs from large-device "
                  "by the flushes that compete with the captures for memory bandwidth, not by a slower link.", ""]
    return lines


def process_lines(processes: dict, setup: dict, backend: str) -> List[str]:
    counts = ", ".join(str(n) for n in processes)
    lines = [f"## Processes (Fig. 6a, 6b): {counts} at once on one device, uniform trace "
             f"{human(setup['trace_size'])} × {setup['process_count']} each, large-host, "
             f"{setup['process_interval']:g} ms", "",
             f"Each process its own trace, device buffer ({setup['fraction']:g} of it) and host buffer; the "
             "processes of a run are launched together (back to back, a few ms apart). Blocking per process: the "
             "total over the processes divided by their number (the paper's Fig. 6); median [min–max] over the "
             "repeats. Methods: " + method_legend(PROCESS_METHODS), ""]
    if backend == "host":
        lines += [f"Host analog: the processes share this machine's memory bandwidth and its {os.cpu_count()} "
                  "cores, so this measures their contention for host memory and cores, not for a GPU's links.", ""]
    return lines + blocking_table(["processes"], [([str(n)], t) for n, t in processes.items()],
                                  [m for m, _ in PROCESS_METHODS])


def host_buffer_lines(buffers: dict, setup: dict) -> List[str]:
    device = setup["fraction"] * setup["count"] * setup["trace_size"]
    return ([f"## Host buffer per process (Fig. 6c): {', '.join(human(b) for b in buffers)}, one process, "
             f"{setup['process_interval']:g} ms", "",
             f"Uniform traces of {human(setup['trace_size'])} checkpoints filling the host buffer; the device "
             f"buffer stays that of the uniform trace ({human(int(device))}, at most half the trace).", ""]
            + blocking_table(["host buffer"], [([human(b)], t) for b, t in buffers.items()],
                             [m for m, _ in PROCESS_METHODS]))


def blocking_lines(ax, data: dict, measures: Sequence[str], keys: Optional[Sequence[str]] = None) -> None:
    """Median and min–max of each method's blocking against the keys of
    data ({x: {method: Blocking}}): a colour per method, solid for
    checkpoint, dashed for checkpoint + restore."""
    xs = list(data)
    for colour, key in enumerate(keys or list(data[xs[0]])):
        for measure in measures:
            series = [data[x][key][measure] for x in xs]
            med = [s.median for s in series]
            ax.errorbar(xs, med, yerr=[[m - s.min for m, s in zip(med, series)],
                                       [s.max - m for m, s in zip(med, series)]],
                        marker="o", capsize=2, color=f"C{colour}", linestyle="-" if measure == "checkpoint" else "--",
                        label=key + ("" if measure == "checkpoint" else ", + restore"))
    ax.set_yscale("log")
    ax.legend(fontsize=7)


def write_plot(args, title: str, results: dict, setup: dict) -> None:
    plt = pyplot()
    traces = results["traces"]
    fig, axes = plt.subplots(3, 3, figsize=(17, 14)) if traces else plt.subplots(1, 3, figsize=(16, 5))
    axes = axes.flatten()
    capture_panel(axes[0], results["capture"])
    init_panel(axes[1], results["init"])
    prefetch_panel(axes[2], results["prefetch"])
    if traces:
        trace_panels(axes[3:], traces, setup)
    fig.suptitle(plot_title(title, args), fontsize=9)
    fig.tight_layout()
    png = args.out / f"{NAME}.png"
    fig.savefig(png, dpi=100)
    log(f"wrote {png}")


def paired_bars(ax, groups: dict, keys: Sequence[Tuple[str, str]], scale: float, ylabel: str, title: str) -> None:
    """One group of bars per key of `groups` ({x: {key: Series}}), a bar
    per (key, label), median with min–max."""
    xs = range(len(groups))
    width = 0.8 / len(keys)
    for i, (key, label) in enumerate(keys):
        series = [g[key] for g in groups.values()]
        med = [s.median * scale if s.times else 0 for s in series]
        ax.bar([x - 0.4 + width * (i + 0.5) for x in xs], med, width, label=label,
               yerr=[[m - (s.min * scale if s.times else 0) for m, s in zip(med, series)],
                     [(s.max * scale if s.times else 0) - m for m, s in zip(med, series)]], capsize=2)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([fmt_x(x) for x in groups])
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)


def capture_panel(ax, capture) -> None:
    paired_bars(ax, capture, [("capture", "capture into L0"), ("bare", "bare device-to-device copy")], 1e3,
                "blocking (ms)", "capture vs bare copy")


def init_panel(ax, init: dict) -> None:
    groups = {n: {m: t[m]["rate"] for m in t} for n, t in init.items()}
    paired_bars(ax, groups, INIT_METHODS, 1 / GiB, "GiB/s per process", "initialisation rate (Fig. 4a), processes")


def prefetch_panel(ax, prefetch: dict) -> None:
    paired_bars(ax, prefetch, [("prefetched", "restart of a prefetched version"), ("bare", "bare copy")], 1e3,
                "blocking (ms)", "backward pass: prefetched restart")


def trace_panels(axes, traces: dict, setup: dict) -> None:
    """Fig. 5a, 5b, 5c, 3b/c, 6a/b and 6c's analogs."""
    for ax, measure, fig in ((axes[0], "checkpoint", "5a"), (axes[1], "total", "5b")):
        blocking_lines(ax, traces["uniform"], [measure])
        ax.set_xscale("log")
        ax.set_xlabel("compute interval (ms)")
        ax.set_ylabel(("checkpoint" if measure == "checkpoint" else "checkpoint + restore") + " blocking (s)")
        ax.set_title(f"uniform {human(setup['trace_size'])} × {setup['count']}, large-host (Fig. {fig})")
    touch = {i: {"l0": traces["uniform"][i]["l0"], **t} for i, t in traces["touch"].items()}
    panel(axes[2], touch, "compute interval (ms)", "touch strategies (Fig. 5c)", log_x=True)
    panel(axes[3], traces["rtm"], "compute interval (ms)", f"RTM-like trace {human(setup['rtm_total'])}", log_x=True)
    panel(axes[4], traces["processes"], "processes at once", "processes, large-host (Fig. 6a, 6b)")
    buffers = {b / GiB: t for b, t in traces["host_buffers"].items()}
    panel(axes[5], buffers, "host buffer per process (GiB)", "host buffer (Fig. 6c)")


def panel(ax, data: dict, xlabel: str, title: str, log_x: bool = False) -> None:
    if not data:
        ax.axis("off")
        return
    blocking_lines(ax, data, ["checkpoint", "total"])
    if log_x:
        ax.set_xscale("log")
    else:
        ax.set_xticks(list(data))
    ax.set_xlabel(xlabel)
    ax.set_ylabel("blocking per process (s)")
    ax.set_title(title)


def _nvidia_smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (nvidia-smi failed)"


if __name__ == "__main__":
    main()
