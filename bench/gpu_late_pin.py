#!/usr/bin/env python3
"""The L1 host buffer that pins late (HiPC'22 cache-allocation paper,
sections IV-A and IV-B): what a short forward pass blocks with eager pinning
(populate + pin of the whole buffer before the first checkpoint: the paper's
"direct pin" baseline, initialisation counted) against the lazy pin
(touching ahead of the flushes, pinning once every page is touched) with
each touch strategy, and without pinning; plus the rates the touch model
works from (touch, flush into untouched / touched / pinned pages, flush
beside touching, pin of touched and untouched pages).

Runs bench/gpu_late_pin.cpp (build/cpp/bench/gpu_late_pin) once per measure
and repeat, with one of two backends. cuda: a flush is a cuMemcpyDtoHAsync
from device memory and pinning is cuMemHostRegister. host (the analog, where
no CUDA driver works): a flush is a memcpy and pinning is mlock, which faults
in and locks every page as cuMemHostRegister does; no GPU is used.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    MiB,
    QUICK_REPEATS,
    Series,
    finish_gpu_args,
    fmt_time,
    human,
    log,
    machine_description,
    machine_lines,
    parse_size,
    pick_backend,
    plot_title,
    probe_cuda,
    pyplot,
    report_header,
)

SCRIPT = "gpu_late_pin.py"
NAME = "gpu_late_pin"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BINARY = ROOT / "build" / "cpp" / "bench" / "gpu_late_pin"
TARGET = 3.0  # eager blocking / lazy blocking (issue 9: "blocks >= 3x less than eager pinning")
LAZY = ["concurrent", "sequential", "auto"]
# What the program does per backend, in the report's words.
WORDS = {
    "host": dict(pin="mlock", pinned="mlocked", flush="memcpy",
                 source="memcpy from host memory touched before"),
    "cuda": dict(pin="register", pinned="registered", flush="cuMemcpyDtoHAsync",
                 source="cuMemcpyDtoHAsync from device memory (filled before) on a stream of the program's own, "
                        "then cuStreamSynchronize"),
}
# Option defaults: the full run, then what --quick and --fake-driver change
# (explicit options win over both). The full run: 5 intervals x 5 methods +
# 3 pass lengths x 2 methods + 1 rates run = 32 processes per repeat.
# --quick, sized for about 1.5 minutes on a GPU machine (16 cores, an H100):
# 3 repeats of 3 intervals x 5 methods + 2 x 2 + 1 = 20 processes, 60 in
# all, with 31 s of compute sleeps (16 checkpoints x 125 ms x 15 runs, and
# the short passes) and about 1 s per process besides (CUDA start-up, the
# warm-up and eager pin of 1 GiB). --fake-driver: the same runs on the test
# fake (tests/cpp/fake_cuda, whose device memory is host memory) at sizes
# that keep the run under a minute on 2 cores, with pin pieces of 16 MiB and
# checkpoints of 12 MiB so that flushes cross piece boundaries.
DEFAULTS = dict(capacity="1GiB", size="64MiB", intervals="5,10,20,50,100", pass_counts="2,4,8",
                rates_size="256MiB", pin_piece=None)
QUICK = dict(intervals="5,20,100", pass_counts="2,8")
FAKE = dict(QUICK, capacity="64MiB", size="12MiB", rates_size="24MiB", pin_piece="16MiB")


def method_labels(words: dict) -> List[Tuple[str, str]]:
    return [("eager", f"eager: populate + {words['pin']} up front"), ("concurrent", "lazy, touch concurrent"),
            ("sequential", "lazy, touch sequential"), ("auto", "lazy, touch auto (model)"),
            ("off", "no pin (touch auto)")]


METHODS = [m for m, _ in method_labels(WORDS["host"])]


def rate_labels(words: dict) -> List[Tuple[str, str]]:
    """(JSON key, label); the mlock_* keys are the pinner's rates whatever it is."""
    return [("touch_alone", "touch alone (MADV_POPULATE_WRITE), T"),
            ("touch_concurrent", "touch beside a flush, Tc"),
            ("flush_untouched", "flush into untouched pages, Fu"),
            ("flush_touched", "flush into touched pages, Ft"),
            ("flush_concurrent", "flush into touched pages beside touching, Fc"),
            ("flush_pinned", f"flush into {words['pinned']} pages"),
            ("mlock_touched", f"{words['pin']} of touched pages"),
            ("mlock_untouched", f"{words['pin']} of untouched pages")]


RATE_KEYS = [k for k, _ in rate_labels(WORDS["host"])]


def run(program: List[str], *args: str) -> dict:
    """One run of the program (its path, backend and pin piece) with `args`."""
    cmd = [*program, *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed with status {done.returncode}:\n{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def mib(nbytes: int) -> str:
    return str(max(1, nbytes // MiB))


def gbps(value: float) -> str:
    gb = value / 1e9
    return f"{gb:.3g} GB/s" if gb < 1000 else f"{gb:.0f} GB/s"


def fmt_ratio(value: float) -> str:
    return f"{value:.3g}×"


def ratio_series(num: Series, den: Series) -> Series:
    s = Series("", "ratio")
    s.times = [a / b for a, b in zip(num.times, den.times)]
    return s


def measure_rates(program: List[str], size: int, repeats: int) -> Tuple[Dict[str, Series], dict]:
    """The rates' Series, and the first run's row (the backend's details)."""
    out = {key: Series(key, "rate", size) for key in RATE_KEYS}
    first: dict = {}
    for r in range(repeats):
        row = run(program, "--mode", "rates", "--mib", mib(size))
        first = first or row
        for key in RATE_KEYS:
            out[key].times.append(row[key])
        log(f"rates {r + 1}/{repeats}: T {gbps(row['touch_alone'])}, Fu {gbps(row['flush_untouched'])}, "
            f"Ft {gbps(row['flush_touched'])}, {row['pinner']} of touched pages {gbps(row['mlock_touched'])}")
    return out, first


def trace_args(capacity: int, size: int, count: int, interval: float) -> List[str]:
    return ["--mode", "trace", "--capacity-mib", mib(capacity), "--mib", mib(size), "--count", str(count),
            "--interval-ms", repr(interval)]


def measure_trace(program: List[str], capacity: int, size: int, count: int, intervals: List[float], methods: List[str],
                  repeats: int) -> Dict[float, Dict[str, dict]]:
    """Per interval and method: Series of blocking and first flush, and the
    rows (for pinning, strategy and model details)."""
    out: Dict[float, Dict[str, dict]] = {}
    for interval in intervals:
        out[interval] = {m: {"blocking": Series(m, m), "first": Series(m, m), "rows": []} for m in methods}
        for r in range(repeats):
            order = methods[r % len(methods):] + methods[:r % len(methods)]
            for method in order:
                row = run(program, "--method", method, *trace_args(capacity, size, count, interval))
                cell = out[interval][method]
                cell["blocking"].times.append(row["blocking_seconds"])
                cell["first"].times.append(row["first_flush_seconds"])
                cell["rows"].append(row)
            log(f"trace {interval:g} ms {r + 1}/{repeats}: " + ", ".join(
                f"{m} {fmt_time(out[interval][m]['blocking'].times[-1])}" for m in methods))
    return out


def measure_pass_lengths(program: List[str], capacity: int, size: int, counts: List[int], interval: float,
                         repeats: int) -> Dict[int, Dict[str, Series]]:
    out: Dict[int, Dict[str, Series]] = {}
    for count in counts:
        out[count] = {m: Series(m, m) for m in ("eager", "auto")}
        for r in range(repeats):
            for method in (("eager", "auto") if r % 2 == 0 else ("auto", "eager")):
                row = run(program, "--method", method, *trace_args(capacity, size, count, interval))
                out[count][method].times.append(row["blocking_seconds"])
        log(f"pass of {count} checkpoints at {interval:g} ms: eager {out[count]['eager'].cell()}, "
            f"auto {out[count]['auto'].cell()}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY,
                    help="the gpu_late_pin program (default: build/cpp/bench/gpu_late_pin)")
    ap.add_argument("--backend", choices=["auto", "cuda", "host"], default="auto",
                    help="auto (default): cuda where `gpu_late_pin --backend cuda` works here, else the host analog")
    ap.add_argument("--capacity", help="host buffer size (default 1GiB)")
    ap.add_argument("--size", help="checkpoint size (default 64MiB)")
    ap.add_argument("--count", type=int, default=0,
                    help="checkpoints in the pass (default: capacity / size, one pass over the buffer)")
    ap.add_argument("--intervals", help="compute intervals in ms (default 5,10,20,50,100)")
    ap.add_argument("--methods", default=",".join(METHODS),
                    help="methods (default: eager,concurrent,sequential,auto,off)")
    ap.add_argument("--pass-counts",
                    help="shorter passes for eager vs lazy+auto at --pass-interval (default 2,4,8; empty: none)")
    ap.add_argument("--pass-interval", type=float, default=20.0,
                    help="compute interval of the shorter passes in ms (default 20, the paper's RTM mean)")
    ap.add_argument("--rates-size", help="memory per rate measure (default 256MiB)")
    ap.add_argument("--pin-piece",
                    help="pin in pieces of at most this (whole MiB; default: the pinner's own, 1GiB for "
                         "cuMemHostRegister, 256MiB for mlock); each flush is one copy per piece it spans")
    ap.add_argument("--quick", action="store_true",
                    help=f"a shorter run, about 1.5 minutes on a GPU machine (16 cores, an H100): {QUICK_REPEATS} "
                         "repeats (allowed with --quick, the default then), intervals 5,20,100, pass counts 2,8 (60 "
                         "processes, 31 s of compute sleeps); explicit options override these")
    ap.add_argument("--fake-driver", action="store_true",
                    help="against the test fake (tests/cpp/fake_cuda: put its libcuda.so.1 on LD_LIBRARY_PATH): "
                         "implies --smoke and the cuda backend, --quick's intervals and repeats, and sizes that "
                         "end in under a minute on 2 cores (buffer 64MiB, checkpoints 12MiB, rates 24MiB, pin "
                         "pieces 16MiB so that flushes cross them); the report says the timings mean nothing. "
                         "Implied (unless --backend host) when the libcuda.so.1 found is the fake")
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
    preset = dict(DEFAULTS, **(FAKE if args.fake_driver else QUICK if args.quick else {}))
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    binary = args.binary if args.binary.is_absolute() else Path.cwd() / args.binary
    if not binary.is_file():
        sys.exit(f"{SCRIPT}: {args.binary} not found. Build it first:  cmake --build build/cpp --target gpu_late_pin")
    capacity, size = parse_size(args.capacity), parse_size(args.size)
    count = args.count or capacity // size
    intervals = [float(t) for t in args.intervals.split(",") if t.strip()]
    methods = [m for m in args.methods.split(",") if m.strip()]
    unknown = set(methods) - set(METHODS)
    if unknown or "eager" not in methods:
        ap.error(f"--methods takes {', '.join(METHODS)} and must include eager (the baseline)")
    pass_counts = [int(c) for c in args.pass_counts.split(",") if c.strip()]
    pin_piece = parse_size(args.pin_piece) if args.pin_piece else 0
    if pin_piece % MiB:
        ap.error("--pin-piece must be whole MiB")

    why_not_cuda = probe_cuda(binary, ["--mode", "rates", "--mib", "1"])
    backend = pick_backend(SCRIPT, "cuda" if args.fake_driver else args.backend, why_not_cuda)
    program = [str(binary), "--backend", backend] + (["--pin-piece-mib", mib(pin_piece)] if pin_piece else [])
    runs = 1 + len(intervals) * len(methods) + 2 * len(pass_counts)
    sleeps = (len(methods) * count * sum(intervals) + 2 * sum(pass_counts) * args.pass_interval) / 1e3
    log(f"{backend} backend; {runs * args.repeats} processes with {sleeps * args.repeats:.0f} s of compute sleeps "
        f"in all")

    started = time.perf_counter()
    load_before = os.getloadavg()
    rates, info = measure_rates(program, parse_size(args.rates_size), args.repeats)
    trace = measure_trace(program, capacity, size, count, intervals, methods, args.repeats)
    passes = measure_pass_lengths(program, capacity, size, pass_counts, args.pass_interval, args.repeats)
    notes = [f"The run took {time.perf_counter() - started:.0f} s; load average (1 min) {load_before[0]:.2f} before, "
             f"{os.getloadavg()[0]:.2f} after."]
    if backend == "host":
        cuda_here = why_not_cuda or "usable, but --backend host was asked for"
        notes.insert(0, f"**Host analog: no GPU was used** (CUDA here: {cuda_here}).")
    write_report(args, binary, info, rates, trace, passes, dict(capacity=capacity, size=size, count=count), methods,
                 notes)


def memlock_note() -> str:
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    limit = "unlimited" if soft == resource.RLIM_INFINITY else human(soft)
    who = "root (CAP_IPC_LOCK: no limit applies)" if os.geteuid() == 0 else "not root"
    return f"RLIMIT_MEMLOCK {limit}, running as {who}."


def pin_failures(trace) -> List[str]:
    seen = Counter()
    for per_method in trace.values():
        for method, cell in per_method.items():
            for row in cell["rows"]:
                if row["pin_failure"]:
                    seen[(method, row["pin_failure"])] += 1
    return [f"**{method}: the pin failed in {n} runs**: {why}" for (method, why), n in seen.items()]


def strategy_cell(rows: List[dict]) -> str:
    chosen = Counter((row["decision"] or {}).get("strategy", "no decision") for row in rows)
    return ", ".join(f"{s} ×{n}" for s, n in chosen.most_common())


def median_of(rows: List[dict], key: str) -> float:
    values = sorted(row[key] for row in rows)
    return values[len(values) // 2]


def driver_version(version: int) -> str:
    """13000 -> '13.0 (13000)', as cuDriverGetVersion encodes it."""
    return f"{version // 1000}.{version % 1000 // 10} ({version})" if version else "unknown"


def backend_title(info: dict) -> str:
    if info["backend"] == "host":
        return "host analog"
    return f"CUDA, {info['device']}"


def backend_machine(info: dict) -> Dict[str, str]:
    """The machine section's rows on the backend."""
    if info["backend"] == "host":
        return {"backend": "host analog: memcpy for the device-to-host copy, mlock for the registration",
                "pin pieces": human(info["pin_piece"]), "memory locking": memlock_note()}
    return {"backend": "cuda: cuMemcpyDtoHAsync from device memory, cuMemHostRegister", "GPU": info["device"],
            "CUDA driver": driver_version(info["driver_version"]), "pin pieces": human(info["pin_piece"])}


def crossing_flushes(setup: dict, piece: int) -> int:
    """How many flushes of the forward pass span a pin piece boundary (the
    program's ring: a flush that would pass the end starts again at 0)."""
    offset, crossing = 0, 0
    for _ in range(setup["count"]):
        if offset + setup["size"] > setup["capacity"]:
            offset = 0
        crossing += offset // piece != (offset + setup["size"] - 1) // piece
        offset += setup["size"]
    return crossing


def backend_notes(args, info: dict, setup: dict) -> List[str]:
    """The notes on the backend that ran."""
    if info["backend"] == "cuda":
        notes = []
        if "fake" in info["device"].lower() and not args.fake_driver:
            notes.append(f"**The driver was a fake ({info['device']}): the timings mean nothing.**")
        notes.append(
            f"CUDA backend on {info['device']}, driver {driver_version(info['driver_version'])}: a flush is "
            f"{WORDS['cuda']['source']}; pinning is the library's cuMemHostRegister pinner "
            "(CU_MEMHOSTREGISTER_PORTABLE, open_host_pinner), the buffer registered in pieces of "
            f"{human(info['pin_piece'])} from its start. The driver refuses a copy into memory registered in part, "
            "so a flush that spans a piece boundary is one copy per piece, all queued before the one "
            "synchronisation and bracketed once by flush_begins/flush_ends"
            f" ({crossing_flushes(setup, info['pin_piece'])} of the forward pass's {setup['count']} flushes span "
            "one).")
        notes.append("Each process first touches and gives back as much host memory as it uses, so that the "
                     "figures are the kernel's first-touch cost (on the development VM freed memory is reported to "
                     "its host at once and costs a host-side fault when touched again).")
        return notes
    return ["Each process first touches and gives back as much memory as it uses: this virtual machine reports "
            "freed memory to its host at once (virtio_balloon free page reporting), and touching such memory "
            "again costs a host-side fault as well (0.3-0.6 GB/s here instead of 4-9 GB/s). Memory given back "
            "a moment ago is reused before it is reported, so the figures are mostly the kernel's first-touch "
            "cost; runs where it was reported anyway are the outliers in the max columns.",
            "Host analog: a memcpy stands for the device-to-host copy and mlock for cuMemHostRegister. "
            "mlock of pages already touched only sets flags, while cuMemHostRegister also builds the driver's "
            "page tables, so the late pin is cheaper here than on a GPU; the pinned flush is no faster than "
            "the touched one on the host (on an A100 pinned D2H runs at about twice the pageable bandwidth).",
            "Measured on a 2-core development machine shared with other jobs: the spreads are wide."]


def write_report(args, binary: Path, info: dict, rates, trace, passes, setup: dict, methods: List[str],
                 notes: List[str]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    words = WORDS[info["backend"]]
    machine = machine_description(args.out)
    machine.pop("target directory", None)
    machine["program"] = str(binary)
    machine.update(backend_machine(info))
    title = f"L1 host buffer: late pin against eager pinning ({backend_title(info)})"
    lines = report_header(title, SCRIPT, args, extra="One process per measure and repeat.")
    lines += machine_lines(machine)
    labels = dict(method_labels(words))
    rate_names = rate_labels(words)

    heading = "Host rates" if info["backend"] == "host" else "Device-to-host rates"
    lines += [f"## {heading}: fresh memory of {human(parse_size(args.rates_size))} per measure", "",
              f"Touch = MADV_POPULATE_WRITE (what the forerunner does), flush = {words['source']}. "
              "The touch model's inputs (docs/gpu_late_pin.md) are the first five.", "",
              "| rate | median [min–max] |", "|---|---:|"]
    for key, label in rate_names:
        lines.append(f"| {label} | {rates[key].cell(gbps)} |")
    lines += ["", f"Flush into touched / untouched pages: "
              f"{ratio_series(rates['flush_touched'], rates['flush_untouched']).cell(fmt_ratio)}; "
              f"{words['pin']} of touched / untouched pages: "
              f"{ratio_series(rates['mlock_touched'], rates['mlock_untouched']).cell(fmt_ratio)}.", ""]

    eager = "eager"
    lines += [f"## Forward pass: {setup['count']} checkpoints of {human(setup['size'])} into a buffer of "
              f"{human(setup['capacity'])}", "",
              f"Each checkpoint after the compute interval (a sleep); its flush ({words['flush']}) bracketed by "
              "flush_begins/flush_ends, then checkpoint_taken. Blocking = building the buffer (eager: populate + "
              f"{words['pin']} of the whole buffer, as the paper's direct-pin baseline pays its initialisation at the "
              "first checkpoint) + every flush. The application waits for each flush "
              "(flushes_overlap_compute = false). "
              f"Target: eager / lazy ≥ {TARGET:g}×.", "",
              "| interval | " + " | ".join(labels[m] for m in methods) + " | "
              + " | ".join(f"eager / {m}" for m in methods if m != eager) + " |",
              "|---|" + "---:|" * (2 * len(methods) - 1)]
    for interval, t in trace.items():
        cells = [t[m]["blocking"].cell() for m in methods]
        ratios = [ratio_series(t[eager]["blocking"], t[m]["blocking"]).cell(fmt_ratio) for m in methods if m != eager]
        lines.append(f"| {interval:g} ms | " + " | ".join(cells + ratios) + " |")
    eager_rows = [row for t in trace.values() for row in t[eager]["rows"]]
    lazy_rows = [row for t in trace.values() for m in LAZY if m in t for row in t[m]["rows"] if row["pinned"]]
    build, flushes = median_of(eager_rows, "construction_seconds"), median_of(eager_rows, "flush_seconds")
    lines += ["", f"Where eager's time goes (medians over all its runs): building the buffer {fmt_time(build)} "
              f"(populate {fmt_time(median_of(eager_rows, 'touch_seconds'))}, "
              f"{words['pin']} {fmt_time(median_of(eager_rows, 'pin_seconds'))}), then the flushes "
              f"{fmt_time(flushes)}, which every method pays alike. So over a pass that writes the whole buffer once "
              f"the ratio cannot exceed 1 + build / flushes = {1 + build / flushes:.2f}×. "
              + (f"The lazy pin ({words['pin']} of touched pages, off the application's thread) took "
                 f"{fmt_time(median_of(lazy_rows, 'pin_seconds'))}." if lazy_rows else ""), ""]
    lazy = [m for m in methods if m in LAZY + ["off"]]
    lines += ["Per run (medians over the repeats): the first flush, the flushes that found untouched pages, the "
              "first checkpoint that found the buffer pinned (— : in half of the runs or more, not within the "
              "pass), and the model's latest choice in the auto runs (no decision: every page was touched before "
              "the model had both flush rates).", "",
              "| interval | " + " | ".join(f"{m}: first flush | {m}: to untouched | {m}: pinned by" for m in lazy)
              + " | eager: first flush | auto: model's choice |",
              "|---|" + "---:|---:|---:|" * len(lazy) + "---:|---|"]
    for interval, t in trace.items():
        cells = []
        for m in lazy:
            rows = t[m]["rows"]
            pinned_by = median_of(rows, "pinned_by_checkpoint")
            cells += [fmt_time(t[m]["first"].median), f"{median_of(rows, 'flushes_to_untouched'):g}",
                      "—" if pinned_by < 0 else f"#{pinned_by:g}"]
        auto_choice = strategy_cell(t["auto"]["rows"]) if "auto" in t else "—"
        lines.append(f"| {interval:g} ms | " + " | ".join(cells) + f" | {fmt_time(t[eager]['first'].median)} | "
                     f"{auto_choice} |")
    lines.append("")

    if passes:
        lines += [f"## Shorter passes at {args.pass_interval:g} ms: eager against lazy + auto", "",
                  "The same buffer; passes that write part of it (the buffer sized for a longer run).", "",
                  "| checkpoints | bytes written | eager | lazy, auto | eager / lazy | target |",
                  "|---:|---:|---:|---:|---:|---|"]
        for count, s in passes.items():
            ratio = ratio_series(s["eager"], s["auto"])
            met = "met" if ratio.median >= TARGET else "missed"
            lines.append(f"| {count} | {human(count * setup['size'])} | {s['eager'].cell()} | {s['auto'].cell()} | "
                         f"{ratio.cell(fmt_ratio)} | ≥ {TARGET:g}: {met} |")
        lines.append("")

    notes = pin_failures(trace) + notes + backend_notes(args, info, setup)
    lines += ["## Notes", ""] + [f"- {n}" for n in notes] + ["", f"Plot: `{NAME}.png`.", ""]
    md = args.out / f"{NAME}.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")
    plot(args, trace, rates, rate_names, methods, labels, title)
    for line in lines:
        if line.startswith("| ") and ("ms |" in line or "×" in line):
            print(line)


def plot(args, trace, rates, rate_names: List[Tuple[str, str]], methods: List[str], labels: Dict[str, str],
         title: str) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(14, 5))
    ax = axes[0]
    intervals = list(trace)
    for m in methods:
        med = [trace[i][m]["blocking"].median for i in intervals]
        ax.errorbar(intervals, med, yerr=[[v - trace[i][m]["blocking"].min for v, i in zip(med, intervals)],
                                          [trace[i][m]["blocking"].max - v for v, i in zip(med, intervals)]],
                    marker="o", capsize=2, label=labels[m])
    ax.set_xscale("log")
    ax.set_xlabel("compute interval (ms)")
    ax.set_ylabel("total blocking (s)")
    ax.set_title("forward pass: build + flushes")
    ax.legend(fontsize=8)
    ax = axes[1]
    keys = [k for k, _ in rate_names]
    med = [rates[k].median / 1e9 for k in keys]
    ax.barh(range(len(keys)), med, xerr=[[m - rates[k].min / 1e9 for m, k in zip(med, keys)],
                                          [rates[k].max / 1e9 - m for m, k in zip(med, keys)]], capsize=2)
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels([label for _, label in rate_names], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("GB/s")
    ax.set_title("rates")
    fig.suptitle(plot_title(title, args))
    fig.tight_layout()
    png = args.out / f"{NAME}.png"
    fig.savefig(png, dpi=110)
    log(f"wrote {png}")


if __name__ == "__main__":
    main()
