#!/usr/bin/env python3
"""Restart on another number of ranks (issue 12): a version of a float64
global array written by N ranks, restarted by M ranks, against the same
version restarted by N ranks. Per case: the bytes the restart reads from
the old ranks' files against the bytes it restores (target: at most 1.05
when the array is split by rows), against the least a reader of those
chunked files must read, and the restart time against the same-count one.

Runs bench/mpi_driver.cpp's modes `write` and `restart` (the public C++
API) under mpirun: per case one job of N ranks writes the version (durable
at L4, the level a job of another size reads from), then, at each repeat,
one job of N ranks and one of M ranks restart it from L4, each after the
version's files were dropped from the page cache.

Writes bench/results/mpi_redistribution.md and .png (see --out).

    .venv/bin/python bench/mpi_redistribution.py                  # 32 MiB per old rank
    .venv/bin/python bench/mpi_redistribution.py --smoke --repeats 1 --bytes 256KiB --pairs 4:2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    MiB,
    Series,
    add_common_args,
    check_resources,
    evict,
    finish_common_args,
    human,
    log,
    machine_description,
    machine_lines,
    parse_size,
    parse_sizes,
    pyplot,
    report_header,
)
from mpi import build_type, fmt_ratio, mpi_version, verdict  # noqa: E402

SCRIPT = "mpi_redistribution.py"
NAME = "mpi_redistribution"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BINARY = ROOT / "build" / "cpp" / "bench" / "mpi_driver"
FLOAT64 = 8
TARGET_READ = 1.05  # bytes read / bytes restored, blocks split by rows


# ------------------------------------------------------------------ layout
@dataclass(frozen=True)
class Case:
    """A version written by `writers` ranks, restarted by `readers`."""

    writers: int
    readers: int
    split: str  # rows | cols
    chunk: int

    @property
    def label(self) -> str:
        return f"{self.writers}→{self.readers}, {self.split}, {human(self.chunk)} chunks"


def share(extent: int, rank: int, ranks: int) -> Tuple[int, int]:
    """[first, first + count) of `extent` for rank `rank` of `ranks`: a share
    in proportion to rank + 1 (the driver's uneven_share)."""
    def bound(k: int) -> int:
        return extent * k * (k + 1) // (ranks * (ranks + 1))
    return bound(rank), bound(rank + 1) - bound(rank)


def block(split: str, shape: Tuple[int, int], rank: int, ranks: int) -> Tuple[int, int, int, int]:
    """(first row, first column, rows, columns) of a rank's block."""
    rows, cols = shape
    if split == "rows":
        first, count = share(rows, rank, ranks)
        return first, 0, count, cols
    first, count = share(cols, rank, ranks)
    return 0, first, rows, count


def chunk_floor(case: Case, shape: Tuple[int, int], new_rank: int) -> int:
    """Bytes of the old files' chunks holding a piece of the new rank's block:
    the least any reader of files chunked this way (each block cut into
    chunks of case.chunk bytes from its start) must read."""
    nr0, nc0, nrows, ncols = block(case.split, shape, new_rank, case.readers)
    total = 0
    for old in range(case.writers):
        or0, oc0, orows, ocols = block(case.split, shape, old, case.writers)
        r0, r1 = max(nr0, or0), min(nr0 + nrows, or0 + orows)
        c0, c1 = max(nc0, oc0), min(nc0 + ncols, oc0 + ocols)
        if r0 >= r1 or c0 >= c1:
            continue
        starts = ((np.arange(r0, r1, dtype=np.int64) - or0) * ocols + (c0 - oc0)) * FLOAT64
        first, last = starts // case.chunk, (starts + (c1 - c0) * FLOAT64 - 1) // case.chunk
        old_bytes = orows * ocols * FLOAT64
        chunks = -(-old_bytes // case.chunk)
        edges = np.zeros(chunks + 1, dtype=np.int64)  # +1 where a run of chunks starts, -1 after it ends
        np.add.at(edges, first, 1)
        np.add.at(edges, last + 1, -1)
        touched = np.flatnonzero(np.cumsum(edges)[:chunks] > 0)
        total += int(np.minimum(case.chunk, old_bytes - touched * case.chunk).sum())
    return total


def global_shape(args, case: Case) -> Tuple[int, int]:
    """args.bytes per old rank on average, rows of args.cols float64."""
    return case.writers * args.bytes // (args.cols * FLOAT64), args.cols


# ------------------------------------------------------------------ running
class Driver:
    """Runs mpi_driver's write and restart modes under mpirun; returns rank
    0's JSON line."""

    def __init__(self, binary: Path):
        self.binary = binary

    def run(self, mode: str, ranks: int, work: Path, case: Case, shape: Tuple[int, int]) -> dict:
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks)]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        cmd += [str(self.binary), "--mode", mode, "--dir", str(work), "--rows", str(shape[0]), "--cols",
                str(shape[1]), "--split", case.split, "--chunk-size", str(case.chunk), "--ranks-per-node", "2"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not rows:
            sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed with status {done.returncode}:\n"
                     f"{done.stderr.strip()[-3000:]}")
        return rows[0]


def drop_cache(work: Path) -> None:
    """The version's files out of the page cache: a restarted job reads them
    from storage, not from the memory of the job that wrote them."""
    for path in (work / "shared").rglob("*"):
        if path.is_file():
            evict(path)


def run_case(args, driver: Driver, case: Case, work: Path) -> Tuple[dict, List[dict], List[dict]]:
    """The write, then at each repeat the same-count restart and the N→M one,
    in an order that alternates so that neither always runs second."""
    shape = global_shape(args, case)
    written = driver.run("write", case.writers, work, case, shape)
    same, other = [], []
    for r in range(args.repeats):
        order = [(same, case.writers), (other, case.readers)]
        for into, ranks in (order if r % 2 == 0 else order[::-1]):
            drop_cache(work)
            into.append(driver.run("restart", ranks, work, case, shape))
    shutil.rmtree(work, ignore_errors=True)
    return written, same, other


def cases_to_run(args) -> List[Case]:
    cases = [Case(n, m, "rows", chunk) for chunk in args.chunk_sizes for n, m in args.pairs]
    return cases + [Case(n, m, "cols", args.chunk_sizes[0]) for n, m in args.column_pairs]


# ----------------------------------------------------------------- analysis
@dataclass
class Figures:
    """One case: a Series per figure (one value per repeat), and the checks."""

    case: Case
    shape: Tuple[int, int]
    written: dict
    s: Dict[str, Series] = field(default_factory=dict)
    checks: List[str] = field(default_factory=list)  # failures, one line each
    restarts: int = 0

    def add(self, key: str, value: float) -> None:
        self.s.setdefault(key, Series(key)).times.append(value)

    def get(self, key: str) -> Series:
        return self.s.get(key, Series(key))


def check(fig: Figures, line: dict, written_by: int, repeat: int) -> None:
    """Every rank restored version 1 from L4, bit for bit, through the path
    its rank count calls for (written_by_ranks: 0 = this job's count)."""
    fig.restarts += 1
    what = f"repeat {repeat + 1}, {line['ranks']} ranks"
    if not all(line["verified"]):
        fig.checks.append(f"{what}: ranks {[r for r, ok in enumerate(line['verified']) if not ok]} "
                          "hold values other than those written")
    if set(line["version"]) != {1} or set(line["level"]) != {4}:
        fig.checks.append(f"{what}: restored versions {line['version']} from levels {line['level']}, not 1 from L4")
    if set(line["written_by_ranks"]) != {written_by}:
        fig.checks.append(f"{what}: written_by_ranks {line['written_by_ranks']}, expected {written_by}")


def analyse(args, case: Case, written: dict, same: List[dict], other: List[dict]) -> Figures:
    shape = global_shape(args, case)
    fig = Figures(case, shape, written)
    floors = [chunk_floor(case, shape, r) for r in range(case.readers)]
    fig.add("floor_rank", max(f / b for f, b in zip(floors, other[0]["bytes"])))
    fig.add("floor_job", sum(floors) / sum(other[0]["bytes"]))
    for r, (base, line) in enumerate(zip(same, other)):
        check(fig, base, 0, r)
        check(fig, line, case.writers if case.readers != case.writers else 0, r)
        fig.add("read_rank", max(rd / b for rd, b in zip(line["bytes_read"], line["bytes"])))
        fig.add("read_job", sum(line["bytes_read"]) / sum(line["bytes"]))
        fig.add("floor_gap", max(rd - f for rd, f in zip(line["bytes_read"], floors)))
        fig.add("syscall_job", sum(line["syscall_read_bytes"]) / sum(line["bytes"]))
        fig.add("syscall_same", sum(base["syscall_read_bytes"]) / sum(base["bytes"]))
        fig.add("storage_job", sum(line["storage_read_bytes"]) / max(1, sum(line["syscall_read_bytes"])))
        fig.add("seconds", max(line["seconds"]))
        fig.add("seconds_same", max(base["seconds"]))
        fig.add("ratio", max(line["seconds"]) / max(base["seconds"]))
    return fig


def fixed(s: Series, fmt=fmt_ratio) -> str:
    """The value when every repeat gave the same (a count of bytes), else
    median [min–max]."""
    if s.times and s.min == s.max:
        return fmt(s.median)
    return s.cell(fmt)


# ------------------------------------------------------------------- main
def parse_pairs(text: str) -> List[Tuple[int, int]]:
    try:
        pairs = [tuple(int(x) for x in p.split(":")) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad pair list '{text}' (e.g. 4:2,2:3)")
    if any(len(p) != 2 or min(p) < 1 or max(p) > 64 for p in pairs):
        raise argparse.ArgumentTypeError(f"bad pair list '{text}': N:M, rank counts in 1..64")
    return pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY,
                    help="the mpi_driver program (default: build/cpp/bench/mpi_driver)")
    ap.add_argument("--bytes", type=lambda t: parse_size(t, FLOAT64), default=32 * MiB,
                    help="global array per old rank, on average (default 32MiB)")
    ap.add_argument("--cols", type=int, default=1024, help="columns of the global array (default 1024)")
    ap.add_argument("--pairs", type=parse_pairs, default=parse_pairs("4:2,2:3,8:5,2:8"),
                    help="N:M pairs split by rows (default 4:2,2:3,8:5,2:8)")
    ap.add_argument("--column-pairs", type=parse_pairs, default=parse_pairs("2:3"),
                    help="N:M pairs split by columns, at the first chunk size (default 2:3)")
    ap.add_argument("--chunk-sizes", type=parse_sizes, default=parse_sizes("4MiB,1MiB"),
                    help="pipeline.chunk_size values (default 4MiB,1MiB)")
    add_common_args(ap, NAME, "target directory (node-local disk, not tmpfs); default: a fresh directory "
                              "under /tmp")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    if not shutil.which("mpirun"):
        sys.exit(f"{SCRIPT}: mpirun not found; install Open MPI or MPICH (Debian: openmpi-bin libopenmpi-dev)")
    binary = args.binary if args.binary.is_absolute() else Path.cwd() / args.binary
    if not binary.is_file():
        sys.exit(f"{SCRIPT}: {args.binary} not found. Build it first (it needs MPI):  make build\n"
                 "(or: cmake --build build/cpp --target mpi_driver), or name it with --binary")
    cases = cases_to_run(args)
    for case in cases:
        rows, cols = global_shape(args, case)
        extent, ranks = (rows, max(case.writers, case.readers)) if case.split == "rows" else (cols, case.readers)
        if extent < ranks * (ranks + 1) // 2:
            ap.error(f"{case.label}: a {rows} x {cols} array leaves a rank without {case.split}; raise --bytes "
                     "or --cols")

    created = args.dir is None
    root = Path(tempfile.mkdtemp(prefix="resurgo-bench-", dir="/tmp")) if created else args.dir
    root.mkdir(parents=True, exist_ok=True)
    widest = max(c.writers for c in cases) * args.bytes
    # The written job holds its array and the capture buffer; on disk L2 and L4 at once.
    check_resources(SCRIPT, root, f"{human(widest)} of global array", 4 * widest, 3 * widest + (1 << 30))
    try:
        started = time.perf_counter()
        driver = Driver(binary)
        figures = []
        for number, case in enumerate(cases):
            t0 = time.perf_counter()
            written, same, other = run_case(args, driver, case, root / f"case{number}")
            figures.append(analyse(args, case, written, same, other))
            log(f"{case.label}: {args.repeats} repeats ({time.perf_counter() - t0:.1f} s)")
        write_report(args, binary, root, figures, time.perf_counter() - started)
    finally:
        if created and not args.keep:
            shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------ report
def write_report(args, binary: Path, root: Path, figures: List[Figures], elapsed: float) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    machine = machine_description(root)
    machine["MPI"] = mpi_version() + " (`mpirun --oversubscribe --bind-to none`)"
    machine["program"] = f"{binary} ({build_type(binary)})"
    machine["load average (1, 5, 15 min) at the end"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = report_header("Restart on another number of ranks: bytes read and time", SCRIPT, args,
                          extra=f"Global float64 array of {human(args.bytes)} per old rank on average, "
                                f"{args.cols} columns; one `mpirun` job per write and per restart.")
    lines += machine_lines(machine)
    lines += honesty_section(figures)
    lines += measured_section(args)
    lines += results_section(figures)
    lines += targets_section(figures)
    lines += ["## Notes", "", f"- The run took {elapsed:.0f} s ({elapsed / 60:.1f} min).", "",
              f"Plot: `{NAME}.png`.", ""]
    md = args.out / f"{NAME}.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")
    plot(args, figures)


def oversubscribed(case: Case) -> bool:
    return max(case.writers, case.readers) > (os.cpu_count() or 1)


def honesty_section(figures: List[Figures]) -> List[str]:
    over = [f.case for f in figures if oversubscribed(f.case)]
    pairs = ", ".join(dict.fromkeys(f"{c.writers}→{c.readers}" for c in over)) or "none"
    widest = max(max(f.case.writers, f.case.readers) for f in figures)
    cores = os.cpu_count() or 1
    return [
        "## What one machine can show",
        "",
        f"Every rank runs on this one machine ({os.cpu_count()} cores), and L4 is a directory on its one disk. "
        f"Jobs of more ranks than cores are oversubscribed: here {pairs} (the {widest}-rank jobs run "
        f"{widest / cores:g} ranks per core), so their ranks' reads, checksums and copies take turns on the "
        "cores, and a rank's restart time includes waiting for one. The bytes read are exact counts whatever "
        "the load; the times, and their ratio to the same-count restart, are this machine's (one disk shared "
        "by every rank), not a cluster's, where each node reads from a parallel file system at its own rate.",
        "",
    ]


def measured_section(args) -> List[str]:
    return [
        "## What is measured",
        "",
        "`bench/mpi_driver.cpp --mode write|restart` (public C++ API). The global array is R x C float64 "
        f"(C = {args.cols}, R such that it holds {human(args.bytes)} per old rank on average), split by rows "
        "(or by columns) unevenly: rank r of n owns a share in proportion to r + 1, so no new block lines up "
        "with an old one. Each rank protects its block with `GlobalBlock{{R, C}, offset}`.",
        "",
        "1. **Write** (N ranks, once per case): `checkpoint(1)`, `wait(1, 4)` (`persistent.every = 1`, "
        "`pipeline.chunk_size` as the table says), then the job's L2 is removed.",
        "2. **Restart** (at each repeat, a job of N ranks and one of M ranks, alternating which goes first): "
        "the version's files are dropped from the page cache (`posix_fadvise(DONTNEED)`); each rank opens a "
        "fresh store with an empty L2 (so it reads L4, the level a job of another size reads from), protects a "
        "zeroed block of its new share, meets the others at a barrier and times `restart()`; then checks every "
        "value bit for bit, and that it restored version 1 from L4 with `written_by_ranks` = N (0 for the "
        "same-count job, which reads its own file whole).",
        "",
        "Figures: **bytes read / bytes restored** is `RestartReport::bytes_read` (stored bytes of the chunks "
        "read from the old ranks' files) over `bytes`, for the rank with the highest ratio and for the job "
        "(sums over ranks). The **chunk floor** is the same ratio for the least any reader of these files must "
        "read: every chunk holding a byte of the new block, counted from the layout (chunks of the chunk size "
        "from each old block's start). Splitting by rows, a new block's two ends fall inside old chunks, so a "
        "rank reads less than 2 chunks more than it restores, and the job at most M − 1 chunks more (each "
        "inner boundary's chunk is read by the two ranks on its sides). **Read syscalls** are the bytes the "
        "restarting processes read through system calls during `restart()` (`/proc/self/io` rchar: chunks, "
        "headers, indexes, manifests): a check on `bytes_read` from outside the library. **Restart** is the "
        "slowest rank's `restart()`; its ratio is to the same-count restart of the same repeat.",
        "",
    ]


def results_section(figures: List[Figures]) -> List[str]:
    lines = ["## Results", "",
             "| N→M | split | chunk | restored (job) | read / restored: worst rank | its chunk floor | job | "
             "job's chunk floor | restart N→M (slowest rank) | same-count restart N→N | ratio |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for f in figures:
        c = f.case
        mark = " (oversubscribed)" if oversubscribed(c) else ""
        lines.append(f"| {c.writers}→{c.readers}{mark} | {c.split} | {human(c.chunk)} | "
                     f"{human(sum(f.written['bytes']))} | {fixed(f.get('read_rank'))} | {fixed(f.get('floor_rank'))} | "
                     f"{fixed(f.get('read_job'))} | {fixed(f.get('floor_job'))} | {f.get('seconds').cell()} | "
                     f"{f.get('seconds_same').cell()} | {f.get('ratio').cell(fmt_ratio)} |")
    lines += ["", "Byte ratios are exact counts, the same at every repeat (one value), else median [min–max].", ""]
    return lines + checks_section(figures)


def checks_section(figures: List[Figures]) -> List[str]:
    lines = ["## Checks", "",
             "| N→M | split | chunk | bit for bit | read syscalls / restored: N→M | same-count N→N | "
             "from storage / read syscalls: N→M |", "|---|---|---:|---|---:|---:|---:|"]
    for f in figures:
        c = f.case
        ok = f"{f.restarts}/{f.restarts}" if not f.checks else f"**{len(f.checks)} failed**"
        lines.append(f"| {c.writers}→{c.readers} | {c.split} | {human(c.chunk)} | {ok} | "
                     f"{f.get('syscall_job').cell(fmt_ratio)} | {f.get('syscall_same').cell(fmt_ratio)} | "
                     f"{f.get('storage_job').cell(fmt_ratio)} |")
    gaps = [g for f in figures for g in f.get("floor_gap").times]
    exact = bool(gaps) and min(gaps) == max(gaps) == 0
    lines += ["", "Bit for bit: restarts (N→N and N→M) whose every value matched and that restored version 1 from "
              "L4 through the expected path, of those run. "
              + ("`bytes_read` equals the chunk floor on every rank of every restart." if exact else
                 f"`bytes_read` minus the chunk floor, worst rank: {min(gaps):.0f} to {max(gaps):.0f} bytes." if gaps
                 else ""),
              "", "From storage: `/proc/self/io` read_bytes over rchar during `restart()`. Below 1, part came from the "
              "page cache: a chunk or header another rank of the same job had just read (neighbouring new ranks "
              "share their boundary chunks; split by columns, several new ranks read the same old file), or "
              "pages read ahead; 0 where the kernel does not count them.", ""]
    return lines + failures(figures)


def failures(figures: List[Figures]) -> List[str]:
    lines = []
    for f in figures:
        if f.checks:
            lines += [f"**{f.case.label}: {len(f.checks)} checks failed.** The first: {f.checks[0]}.", ""]
    return lines


def targets_section(figures: List[Figures]) -> List[str]:
    lines = ["## Targets (issue 12)", "", f"N→M restart reads each needed byte once: bytes read / bytes restored ≤ "
             f"{TARGET_READ}.", "", "| case | bytes read / restored, job | |", "|---|---|---|"]
    for f in figures:
        s = f.get("read_job")
        ok = s.median <= TARGET_READ if f.case.split == "rows" else None
        what = "" if f.case.split == "rows" else " (no target: the cost the docs describe)"
        lines.append(f"| {f.case.label}{what} | {fixed(s)} (chunk floor {fixed(f.get('floor_job'))}) | "
                     f"{verdict(ok)} |")
    missed = [f for f in figures if f.case.split == "rows" and f.get("read_job").median > TARGET_READ]
    lines += ["", "Verdicts are on the job's sums (the results give the worst rank too)."]
    if missed:
        at_floor = all(f.get("read_job").median <= f.get("floor_job").median for f in missed)
        lines += [("Every row split that misses it reads no more than its chunk floor: " if at_floor else
                   "Row splits that miss it: ") + "; ".join(f.case.label for f in missed) + ". Each of the M − 1 "
                  "inner boundaries of the new blocks cuts a chunk that the ranks on both sides read whole, which "
                  "weighs more the smaller a new block is against a chunk; only smaller chunks (or blocks that "
                  "line up with them) read less."]
    return lines + [""]


# ------------------------------------------------------------------- plot
def plot(args, figures: List[Figures]) -> None:
    plt = pyplot()
    from matplotlib import ticker

    fig, axes = plt.subplots(1, 2, figsize=(15, 5.5))
    names = [f"{f.case.writers}→{f.case.readers}\n{f.case.split}\n{human(f.case.chunk)}" for f in figures]
    xs = np.arange(len(figures))

    ax = axes[0]
    for offset, key, floor, label in ((-0.2, "read_rank", "floor_rank", "worst rank"),
                                      (0.2, "read_job", "floor_job", "job")):
        ax.bar(xs + offset, [f.get(key).median for f in figures], 0.4, label=f"bytes read / restored, {label}")
        ax.plot(xs + offset, [f.get(floor).median for f in figures], "k_", markersize=14)
    ax.plot([], [], "k_", label="chunk floor (least a reader of these files must read)")
    ax.axhline(TARGET_READ, color="red", linestyle="--", linewidth=1, label=f"target ≤ {TARGET_READ} (row splits)")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ticker.ScalarFormatter())
    ax.yaxis.set_minor_formatter(ticker.ScalarFormatter())
    ax.set_xticks(xs)
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel("bytes read / bytes restored")
    ax.set_title("bytes read from the old ranks' files")
    ax.legend(fontsize=8)

    ax = axes[1]
    for offset, key, label in ((-0.2, "seconds_same", "same-count restart N→N"), (0.2, "seconds", "restart N→M")):
        s = [f.get(key) for f in figures]
        med = np.array([x.median for x in s])
        ax.bar(xs + offset, med, 0.4, yerr=[med - [x.min for x in s], [x.max for x in s] - med], capsize=2,
               label=label)
    ax.set_xticks(xs)
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel("restart() of the slowest rank (s)")
    ax.set_title(f"restart from L4, page cache dropped ({os.cpu_count()} cores: more ranks oversubscribed)")
    ax.legend(fontsize=8)
    title = (f"Restart on another number of ranks, {human(args.bytes)} per old rank, "
             f"median [min–max] of {args.repeats}")
    fig.suptitle(("SMOKE RUN, not a result — " if args.smoke else "") + title)
    fig.tight_layout()
    png = args.out / f"{NAME}.png"
    fig.savefig(png, dpi=100)
    log(f"wrote {png}")


if __name__ == "__main__":
    main()
