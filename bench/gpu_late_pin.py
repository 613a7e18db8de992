#!/usr/bin/env python3
"""The L1 host buffer that pins late (HiPC'22 cache-allocation paper,
sections IV-A and IV-B), host analog: what a short forward pass blocks with
eager pinning (populate + mlock of the whole buffer before the first
checkpoint: the paper's "direct pin" baseline, initialisation counted) against
the lazy pin (touching ahead of the flushes, mlock once every page is
touched) with each touch strategy, and without pinning; plus the host rates
the touch model works from (touch, flush into untouched / touched / locked
pages, flush beside touching, mlock of touched and untouched pages).

Runs bench/gpu_late_pin.cpp (build/cpp/bench/gpu_late_pin) once per measure
and repeat. A flush is a memcpy (the stand-in for a device-to-host copy) and
pinning is mlock, which faults in and locks every page as cuMemHostRegister
does; no GPU is used.
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
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    MiB,
    Series,
    finish_common_args,
    fmt_time,
    human,
    log,
    machine_description,
    machine_lines,
    parse_size,
    pyplot,
    report_header,
)

SCRIPT = "gpu_late_pin.py"
NAME = "gpu_late_pin"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BINARY = ROOT / "build" / "cpp" / "bench" / "gpu_late_pin"
TARGET = 3.0  # eager blocking / lazy blocking (issue 9: "blocks >= 3x less than eager pinning")
METHODS = [("eager", "eager: populate + mlock up front"), ("concurrent", "lazy, touch concurrent"),
           ("sequential", "lazy, touch sequential"), ("auto", "lazy, touch auto (model)"),
           ("off", "no pin (touch auto)")]
LAZY = ["concurrent", "sequential", "auto"]
RATES = [("touch_alone", "touch alone (MADV_POPULATE_WRITE), T"),
         ("touch_concurrent", "touch beside a flush, Tc"),
         ("flush_untouched", "flush into untouched pages, Fu"),
         ("flush_touched", "flush into touched pages, Ft"),
         ("flush_concurrent", "flush into touched pages beside touching, Fc"),
         ("flush_pinned", "flush into mlocked pages"),
         ("mlock_touched", "mlock of touched pages"),
         ("mlock_untouched", "mlock of untouched pages")]


def run(binary: Path, *args: str) -> dict:
    cmd = [str(binary), *args]
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


def measure_rates(binary: Path, size: int, repeats: int) -> Dict[str, Series]:
    out = {key: Series(label, "rate", size) for key, label in RATES}
    for r in range(repeats):
        row = run(binary, "--mode", "rates", "--mib", mib(size))
        for key, _ in RATES:
            out[key].times.append(row[key])
        log(f"rates {r + 1}/{repeats}: T {gbps(row['touch_alone'])}, Fu {gbps(row['flush_untouched'])}, "
            f"Ft {gbps(row['flush_touched'])}, mlock touched {gbps(row['mlock_touched'])}")
    return out


def trace_args(capacity: int, size: int, count: int, interval: float) -> List[str]:
    return ["--mode", "trace", "--capacity-mib", mib(capacity), "--mib", mib(size), "--count", str(count),
            "--interval-ms", repr(interval)]


def measure_trace(binary: Path, capacity: int, size: int, count: int, intervals: List[float], methods: List[str],
                  repeats: int) -> Dict[float, Dict[str, dict]]:
    """Per interval and method: Series of blocking and first flush, and the
    rows (for pinning, strategy and model details)."""
    out: Dict[float, Dict[str, dict]] = {}
    for interval in intervals:
        out[interval] = {m: {"blocking": Series(m, m), "first": Series(m, m), "rows": []} for m in methods}
        for r in range(repeats):
            order = methods[r % len(methods):] + methods[:r % len(methods)]
            for method in order:
                row = run(binary, "--method", method, *trace_args(capacity, size, count, interval))
                cell = out[interval][method]
                cell["blocking"].times.append(row["blocking_seconds"])
                cell["first"].times.append(row["first_flush_seconds"])
                cell["rows"].append(row)
            log(f"trace {interval:g} ms {r + 1}/{repeats}: " + ", ".join(
                f"{m} {fmt_time(out[interval][m]['blocking'].times[-1])}" for m in methods))
    return out


def measure_pass_lengths(binary: Path, capacity: int, size: int, counts: List[int], interval: float,
                         repeats: int) -> Dict[int, Dict[str, Series]]:
    out: Dict[int, Dict[str, Series]] = {}
    for count in counts:
        out[count] = {m: Series(m, m) for m in ("eager", "auto")}
        for r in range(repeats):
            for method in (("eager", "auto") if r % 2 == 0 else ("auto", "eager")):
                row = run(binary, "--method", method, *trace_args(capacity, size, count, interval))
                out[count][method].times.append(row["blocking_seconds"])
        log(f"pass of {count} checkpoints at {interval:g} ms: eager {out[count]['eager'].cell()}, "
            f"auto {out[count]['auto'].cell()}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY,
                    help="the gpu_late_pin program (default: build/cpp/bench/gpu_late_pin)")
    ap.add_argument("--capacity", default="1GiB", help="host buffer size (default 1GiB)")
    ap.add_argument("--size", default="64MiB", help="checkpoint size (default 64MiB)")
    ap.add_argument("--count", type=int, default=0,
                    help="checkpoints in the pass (default: capacity / size, one pass over the buffer)")
    ap.add_argument("--intervals", default="5,10,20,50,100", help="compute intervals in ms (default 5,10,20,50,100)")
    ap.add_argument("--methods", default=",".join(m for m, _ in METHODS),
                    help="methods (default: eager,concurrent,sequential,auto,off)")
    ap.add_argument("--pass-counts", default="2,4,8",
                    help="shorter passes for eager vs lazy+auto at --pass-interval (default 2,4,8; empty: none)")
    ap.add_argument("--pass-interval", type=float, default=20.0,
                    help="compute interval of the shorter passes in ms (default 20, the paper's RTM mean)")
    ap.add_argument("--rates-size", default="256MiB", help="memory per rate measure (default 256MiB)")
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
        sys.exit(f"{SCRIPT}: {args.binary} not found. Build it first:  cmake --build build/cpp --target gpu_late_pin")
    capacity, size = parse_size(args.capacity), parse_size(args.size)
    count = args.count or capacity // size
    intervals = [float(t) for t in args.intervals.split(",") if t.strip()]
    methods = [m for m in args.methods.split(",") if m.strip()]
    unknown = set(methods) - {m for m, _ in METHODS}
    if unknown or "eager" not in methods:
        ap.error(f"--methods takes {', '.join(m for m, _ in METHODS)} and must include eager (the baseline)")
    pass_counts = [int(c) for c in args.pass_counts.split(",") if c.strip()]

    started = time.perf_counter()
    load_before = os.getloadavg()
    rates = measure_rates(binary, parse_size(args.rates_size), args.repeats)
    trace = measure_trace(binary, capacity, size, count, intervals, methods, args.repeats)
    passes = measure_pass_lengths(binary, capacity, size, pass_counts, args.pass_interval, args.repeats)
    notes = [f"The run took {time.perf_counter() - started:.0f} s; load average (1 min) {load_before[0]:.2f} before, "
             f"{os.getloadavg()[0]:.2f} after."]
    write_report(args, binary, rates, trace, passes, dict(capacity=capacity, size=size, count=count), methods, notes)


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


def write_report(args, binary: Path, rates, trace, passes, setup: dict, methods: List[str], notes: List[str]) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    machine = machine_description(args.out)
    machine.pop("target directory", None)
    machine["program"] = str(binary)
    machine["memory locking"] = memlock_note()
    title = "L1 host buffer: late pin against eager pinning (host analog)"
    lines = report_header(title, SCRIPT, args, extra="One process per measure and repeat.")
    lines += machine_lines(machine)
    labels = dict(METHODS)

    lines += [f"## Host rates: fresh memory of {human(parse_size(args.rates_size))} per measure", "",
              "Touch = MADV_POPULATE_WRITE (what the forerunner does), flush = memcpy from memory touched before. "
              "The touch model's inputs (docs/gpu_late_pin.md) are the first five.", "",
              "| rate | median [min–max] |", "|---|---:|"]
    for key, label in RATES:
        lines.append(f"| {label} | {rates[key].cell(gbps)} |")
    lines += ["", f"Flush into touched / untouched pages: "
              f"{ratio_series(rates['flush_touched'], rates['flush_untouched']).cell(fmt_ratio)}; "
              f"mlock of touched / untouched pages: "
              f"{ratio_series(rates['mlock_touched'], rates['mlock_untouched']).cell(fmt_ratio)}.", ""]

    eager = "eager"
    lines += [f"## Forward pass: {setup['count']} checkpoints of {human(setup['size'])} into a buffer of "
              f"{human(setup['capacity'])}", "",
              "Each checkpoint after the compute interval (a sleep); its flush (memcpy) bracketed by "
              "flush_begins/flush_ends, then checkpoint_taken. Blocking = building the buffer (eager: populate + "
              "mlock of the whole buffer, as the paper's direct-pin baseline pays its initialisation at the first "
              "checkpoint) + every flush. The application waits for each flush (flushes_overlap_compute = false). "
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
              f"mlock {fmt_time(median_of(eager_rows, 'pin_seconds'))}), then the flushes {fmt_time(flushes)}, "
              "which every method pays alike. So over a pass that writes the whole buffer once the ratio cannot "
              f"exceed 1 + build / flushes = {1 + build / flushes:.2f}×. "
              + (f"The lazy pin (mlock of touched pages, off the application's thread) took "
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

    notes = pin_failures(trace) + notes
    notes.append("Each process first touches and gives back as much memory as it uses: this virtual machine reports "
                 "freed memory to its host at once (virtio_balloon free page reporting), and touching such memory "
                 "again costs a host-side fault as well (0.3-0.6 GB/s here instead of 4-9 GB/s). Memory given back "
                 "a moment ago is reused before it is reported, so the figures are mostly the kernel's first-touch "
                 "cost; runs where it was reported anyway are the outliers in the max columns.")
    notes.append("Host analog: a memcpy stands for the device-to-host copy and mlock for cuMemHostRegister. "
                 "mlock of pages already touched only sets flags, while cuMemHostRegister also builds the driver's "
                 "page tables, so the late pin is cheaper here than on a GPU; the pinned flush is no faster than "
                 "the touched one on the host (on an A100 pinned D2H runs at about twice the pageable bandwidth).")
    notes.append("Measured on a 2-core development machine shared with other jobs: the spreads are wide.")
    lines += ["## Notes", ""] + [f"- {n}" for n in notes] + ["", f"Plot: `{NAME}.png`.", ""]
    md = args.out / f"{NAME}.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")
    plot(args, trace, rates, methods, labels, title)
    for line in lines:
        if line.startswith("| ") and ("ms |" in line or "×" in line):
            print(line)


def plot(args, trace, rates, methods: List[str], labels: Dict[str, str], title: str) -> None:
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
    keys = [k for k, _ in RATES]
    med = [rates[k].median / 1e9 for k in keys]
    ax.barh(range(len(keys)), med, xerr=[[m - rates[k].min / 1e9 for m, k in zip(med, keys)],
                                          [rates[k].max / 1e9 - m for m, k in zip(med, keys)]], capsize=2)
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels([label for _, label in RATES], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("GB/s")
    ax.set_title("host rates")
    fig.suptitle(("SMOKE RUN, not a result — " if args.smoke else "") + title
                 + f", median [min–max] of {args.repeats}")
    fig.tight_layout()
    png = args.out / f"{NAME}.png"
    fig.savefig(png, dpi=110)
    log(f"wrote {png}")


if __name__ == "__main__":
    main()
