#!/usr/bin/env python3
"""MPI stores (issue 12): what a store of an MPI job costs the application
against the same rank's single-process store, how long a version takes to
be durable for the whole job at L2, L3 (partner or XOR copies, when built)
and L4, what the collective calls cost, how long a restart takes that
rebuilds a lost node's files, the storage each scheme needs against SCR's
formulas, and a model that projects blocking and time to durable to 10^4
ranks from what was measured.

Runs build/cpp/bench/mpi_driver (bench/mpi_driver.cpp, the public C++ API)
under mpirun, one job per (repeat, rank count, scheme), nodes faked on this
one machine (mpi.ranks_per_node, local.path ".../{node}").

Writes bench/results/mpi.md and .png (see --out).

    .venv/bin/python bench/mpi.py                                 # 32 MiB per rank, 1-8 ranks
    .venv/bin/python bench/mpi.py --smoke --repeats 1 --bytes 1MiB --checkpoints 2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    GiB,
    MiB,
    Series,
    add_common_args,
    check_resources,
    finish_common_args,
    fmt_time,
    grouped_bars,
    human,
    log,
    machine_description,
    machine_lines,
    parse_size,
    pyplot,
    report_header,
)

SCRIPT = "mpi.py"
NAME = "mpi"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BINARY = ROOT / "build" / "cpp" / "bench" / "mpi_driver"
SCHEMES = ["partner", "xor"]
UNAVAILABLE = 3  # the driver's exit status when the configuration refuses partner.scheme
LEVELS = (2, 3, 4)
CALLS = ("allreduce", "allgather", "barrier", "messages", "message_bytes")  # counted per version
CALL_TIMES = ("allreduce_seconds", "allgather_seconds", "barrier_seconds", "p2p_seconds")  # time in them

TARGET_BLOCKING = 1.1  # MPI store blocking / the same rank's single-process store
MODEL_RANKS = [1, 8, 64, 512, 4096, 10_000]


# ------------------------------------------------------------------ naming
def fmt_ratio(value: float) -> str:
    return f"{value:.3g}"


def fmt_gibs(value: float) -> str:
    return f"{value / GiB:.2f} GiB/s"


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} µs"


def series(label: str, values) -> Series:
    s = Series(label)
    s.times = [v for v in values if v is not None]
    return s


def median(values) -> Optional[float]:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def verdict(ok: Optional[bool]) -> str:
    return "—" if ok is None else ("met" if ok else "missed")


# ------------------------------------------------------------------ layout
@dataclass(frozen=True)
class Job:
    """One configuration: a rank count, its faked nodes and an L3 scheme."""

    ranks: int
    ranks_per_node: int
    scheme: str = "none"
    set_size: int = 0

    @property
    def nodes(self) -> int:
        return math.ceil(self.ranks / self.ranks_per_node)

    @property
    def label(self) -> str:
        text = f"{self.ranks} rank{'s' if self.ranks > 1 else ''}, {self.nodes} node{'s' if self.nodes > 1 else ''}"
        if self.scheme == "xor":
            return f"{text}, XOR set {self.set_size}"
        return f"{text}, {self.scheme}" if self.scheme != "none" else text


def job_for(ranks: int, ranks_per_node: int, scheme: str, set_size: int) -> Job:
    """At most `ranks_per_node` ranks per node, and at least two nodes from
    two ranks on (a partner or XOR copy needs another node)."""
    per_node = max(1, min(ranks_per_node, ranks // 2)) if ranks > 1 else 1
    nodes = math.ceil(ranks / per_node)
    return Job(ranks, per_node, scheme, min(set_size, nodes) if scheme == "xor" else 0)


# ------------------------------------------------------------------ running
class Driver:
    """Runs mpi_driver under mpirun and collects rank 0's JSON lines."""

    def __init__(self, args, binary: Path, root: Path):
        self.args = args
        self.binary = binary
        self.root = root
        self.runs = 0

    def command(self, job: Job, work: Path, first: str, nbytes: int, checkpoints: int) -> List[str]:
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(job.ranks)]
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
        cmd += [str(self.binary), "--dir", str(work), "--bytes", str(nbytes), "--checkpoints", str(checkpoints),
                "--compute-seconds", str(self.args.compute_seconds), "--ranks-per-node", str(job.ranks_per_node),
                "--scheme", job.scheme, "--first", first, "--comm-iterations", str(self.args.comm_iterations)]
        if job.scheme != "none":
            cmd += ["--rebuild"] + (["--set-size", str(job.set_size)] if job.set_size else [])
        return cmd

    def run(self, job: Job, first: str = "single", nbytes: Optional[int] = None,
            checkpoints: Optional[int] = None) -> Tuple[int, List[dict], str]:
        self.runs += 1
        work = self.root / f"run{self.runs}"
        cmd = self.command(job, work, first, nbytes or self.args.bytes, checkpoints or self.args.checkpoints)
        done = subprocess.run(cmd, capture_output=True, text=True)
        shutil.rmtree(work, ignore_errors=True)
        rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        unavailable = "unavailable:" in done.stderr
        if done.returncode != 0 and not unavailable:
            sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed with status {done.returncode}:\n"
                     f"{done.stderr.strip()[-3000:]}")
        return (UNAVAILABLE if unavailable else 0), rows, done.stderr


def probe(driver: Driver, schemes: List[str]) -> Tuple[List[str], List[str]]:
    """The L3 schemes the library accepts (a tiny 2-rank job each), and a
    note with the library's reason for each one it refuses."""
    ok, notes = [], []
    for scheme in schemes:
        status, _, stderr = driver.run(job_for(2, 1, scheme, 2), nbytes=MiB, checkpoints=1)
        if status == UNAVAILABLE:
            reason = next((line for line in stderr.splitlines() if line.startswith("unavailable")), stderr.strip())
            reason = reason.removeprefix("unavailable: ").split("; known keys")[0]
            notes.append(f"L3 `{scheme}` skipped: the library refuses `partner.scheme = \"{scheme}\"` ({reason}): "
                         "the partner level is not built yet, so no L3, rebuild or storage rows for it.")
            log(f"{scheme} skipped: {reason}")
        else:
            ok.append(scheme)
    return ok, notes


def jobs_to_run(args, schemes: List[str]) -> List[Job]:
    jobs = [job_for(p, args.ranks_per_node, "none", 0) for p in args.ranks]
    for scheme in schemes:
        jobs += [job for p in args.ranks if (job := job_for(p, args.ranks_per_node, scheme, args.set_size)).nodes >= 2]
    return jobs


def run_all(args, driver: Driver, jobs: List[Job]) -> Dict[Job, List[List[dict]]]:
    """Every job once per repeat, in an order rotated by one at each repeat;
    the single-process phase comes first in even repeats, second in odd
    ones, so that neither store always runs on a cold or a warm machine."""
    results: Dict[Job, List[List[dict]]] = {job: [] for job in jobs}
    for r in range(args.repeats):
        order = jobs[r % len(jobs):] + jobs[:r % len(jobs)]
        first = "single" if r % 2 == 0 else "mpi"
        for job in order:
            t0 = time.perf_counter()
            _, rows, stderr = driver.run(job, first)
            results[job].append(rows + [{"kind": "stderr", "text": stderr}])
            log(f"repeat {r + 1}/{args.repeats}: {job.label} ({time.perf_counter() - t0:.1f} s)")
    return results


# ----------------------------------------------------------------- analysis
def checkpoints(rows: List[dict], store: str, warmup: int) -> List[dict]:
    """The store's checkpoint lines after the warm-up versions (the first
    checkpoints fault in the capture buffer), or all of them when none is left."""
    mine = [r for r in rows if r["kind"] == "checkpoint" and r["store"] == store]
    measured = [r for r in mine if r["version"] > warmup]
    return measured or mine


def per_rank_medians(lines: List[dict], key: str) -> List[Optional[float]]:
    """For each rank, the median over versions of `key` (None when the level
    was not reached: -1)."""
    ranks = len(lines[0][key]) if lines else 0
    return [median(line[key][r] for line in lines if line[key][r] >= 0) for r in range(ranks)]


def job_median(lines: List[dict], key: str) -> Optional[float]:
    """Median over versions of the slowest rank's value: the job's."""
    return median(max(line[key]) for line in lines if min(line[key]) >= 0)


def line_of(rows: List[dict], kind: str) -> Optional[dict]:
    return next((r for r in rows if r["kind"] == kind), None)


@dataclass
class Figures:
    """Per job: one value per repeat for each figure (Series), plus the
    counted Comm calls and the rebuild trials."""

    job: Job
    s: Dict[str, Series] = field(default_factory=dict)
    calls: Dict[str, Dict[str, List[float]]] = field(default_factory=dict)
    rebuilds: List[dict] = field(default_factory=list)
    storage: List[dict] = field(default_factory=list)

    def add(self, key: str, value: Optional[float]) -> None:
        self.s.setdefault(key, Series(key))
        if value is not None:
            self.s[key].times.append(value)

    def get(self, key: str) -> Series:
        return self.s.get(key, Series(key))


def analyse(job: Job, repeats: List[List[dict]], warmup: int) -> Figures:
    fig = Figures(job)
    for rows in repeats:
        single, mpi = checkpoints(rows, "single", warmup), checkpoints(rows, "mpi", warmup)
        add_blocking(fig, single, mpi)
        for level in LEVELS:
            fig.add(f"single_l{level}", median(per_rank_medians(single, f"own_l{level}")))
            fig.add(f"own_l{level}", median(per_rank_medians(mpi, f"own_l{level}")))
            fig.add(f"job_l{level}", job_median(mpi, f"job_l{level}"))
        for level in (2, 4):
            fig.add(f"single_l{level}_bandwidth", median(
                median(l[f"l{level}_bytes"][r] / l[f"l{level}_write_seconds"][r] for l in single
                       if l[f"l{level}_write_seconds"][r] > 0) for r in range(job.ranks)))
        fig.add("commit_overhead", median(max(l["job_l4"]) - max(l["own_l4"]) for l in mpi))
        fig.add("l2_wait_after_l4", median(max(l["job_l2"]) - max(l["own_l4"]) for l in mpi))
        comm = line_of(rows, "comm")
        for op in ("allreduce", "allgather", "barrier"):
            fig.add(op, comm[f"{op}_seconds"] if comm else None)
        add_calls(fig, mpi)
        fig.storage += [r for r in rows if r["kind"] == "storage"]
        intact, rebuilt = line_of(rows, "restart_intact"), line_of(rows, "rebuild")
        if rebuilt:
            errors = [l for r in rows if r["kind"] == "stderr" for l in r["text"].splitlines() if ": rebuild: " in l]
            fig.rebuilds.append(dict(rebuilt, intact=intact, error=errors[0] if errors else ""))
            fig.add("rebuild", rebuilt["seconds"])
            fig.add("restart_intact", intact["seconds"] if intact else None)
            if intact and intact["seconds"] > 0:
                fig.add("rebuild_ratio", rebuilt["seconds"] / intact["seconds"])
    return fig


def add_blocking(fig: Figures, single: List[dict], mpi: List[dict]) -> None:
    """Blocking of each store (median over ranks of each rank's median over
    versions) and each rank's MPI / single ratio: the median rank and the
    worst rank."""
    mine, alone = per_rank_medians(mpi, "blocking"), per_rank_medians(single, "blocking")
    ratios = [m / s for m, s in zip(mine, alone) if m is not None and s]
    fig.add("single_blocking", median(alone))
    fig.add("mpi_blocking", median(mine))
    fig.add("blocking_ratio", median(ratios))
    fig.add("blocking_ratio_worst", max(ratios) if ratios else None)
    for name, lines in (("single", single), ("mpi", mpi)):
        fig.add(f"{name}_copy", median(per_rank_medians(lines, "copy_seconds")))
        fig.add(f"{name}_comm", median(median(comm_seconds(line, r) for line in lines)
                                       for r in range(len(lines[0]["blocking"])) if lines))
        fig.add(f"{name}_stalls", median(median(line["first_touch_seconds"][r] + line["backpressure_seconds"][r]
                                                for line in lines) for r in range(len(lines[0]["blocking"])) if lines))
        fig.add(f"{name}_other", median(median(other_blocking(line, r) for line in lines)
                                        for r in range(len(lines[0]["blocking"])) if lines))


def other_blocking(line: dict, rank: int) -> float:
    """The part of a checkpoint's blocking neither the library nor the Comm
    wrapper names: not the copy, first touch, backpressure or Comm calls."""
    named = ("copy_seconds", "first_touch_seconds", "backpressure_seconds")
    named += tuple(f"checkpoint_{t}" for t in CALL_TIMES)
    return line["blocking"][rank] - sum(line[k][rank] for k in named)


def comm_seconds(line: dict, rank: int) -> float:
    return sum(line[f"checkpoint_{t}"][rank] for t in CALL_TIMES)


def add_calls(fig: Figures, mpi: List[dict]) -> None:
    """Comm calls per version inside checkpoint() and inside the waits, at
    rank 0 and at the busiest other rank (they differ where rank 0 gathers)."""
    for phase in ("checkpoint", "wait"):
        for call in CALLS + CALL_TIMES:
            key = f"{phase}_{call}"
            for who, pick in (("rank 0", lambda v: v[0]), ("others", lambda v: max(v[1:]) if len(v) > 1 else None)):
                values = [pick(line[key]) for line in mpi]
                fig.calls.setdefault(f"{key}|{who}", []).extend(v for v in values if v is not None)


def calls_per_version(fig: Figures, phase: str, call: str, who: str) -> float:
    values = fig.calls.get(f"{phase}_{call}|{who}", [])
    return statistics.median(values) if values else 0.0


# -------------------------------------------------------------------- model
@dataclass
class Fit:
    """cost(P) = a + b * x(P), x = log2(P) or P - 1, least squares on the
    measured points (P >= 2), with a, b >= 0 (a negative slope is noise:
    then the mean, flat; a negative constant: then the line through the
    origin); P = 1 costs nothing (no message leaves)."""

    a: float
    b: float
    form: str  # "log2" | "linear"
    points: List[Tuple[int, float]]

    def x(self, ranks: float) -> float:
        return math.log2(ranks) if self.form == "log2" else ranks - 1

    def __call__(self, ranks: float) -> float:
        return 0.0 if ranks <= 1 else max(0.0, self.a + self.b * self.x(ranks))

    def text(self) -> str:
        var = "log2(P)" if self.form == "log2" else "(P − 1)"
        return f"{fmt_us(self.a)} + {fmt_us(self.b)} × {var}"


def fit(points: List[Tuple[int, float]], form: str) -> Fit:
    usable = [(p, t) for p, t in points if p >= 2 and t is not None]
    if not usable:
        return Fit(0.0, 0.0, form, usable)
    xs = np.array([math.log2(p) if form == "log2" else p - 1 for p, _ in usable], dtype=float)
    ys = np.array([t for _, t in usable], dtype=float)
    if len(set(xs)) < 2:
        return Fit(float(ys.mean()), 0.0, form, usable)
    b, a = np.polyfit(xs, ys, 1)
    if b < 0:  # noise, not a cost that falls with the rank count: the mean, flat
        return Fit(float(ys.mean()), 0.0, form, usable)
    if a < 0:  # no negative constant: the line through the origin
        return Fit(0.0, float(xs @ ys / (xs @ xs)), form, usable)
    return Fit(float(a), float(b), form, usable)


@dataclass
class Model:
    """Inputs, all measured in this run (medians over repeats) except those
    marked as assumptions (command-line arguments)."""

    state: int                  # B, bytes per rank
    capture: float              # single-process blocking at 1 rank (s)
    l2_bandwidth: float         # one node's L2 write bandwidth, 1 rank writing (B/s)
    l4_bandwidth: float         # one node's write bandwidth into L4 (B/s)
    commit: float               # job commit at 1 rank: wait(L4) returned − the rank's L4 copy durable (s)
    allreduce: Fit
    allgather: Fit
    barrier: Fit
    calls: Dict[str, Dict[str, float]]  # phase -> call -> per version (busiest rank)
    root_messages: Dict[str, float]     # phase -> messages each other rank sends per version
    gather_per_rank: float      # rank 0's cost per rank of a gather: the allgather fit's slope (s)
    ranks_per_node: int         # assumption
    pfs_bandwidth: float        # assumption: the shared file system's aggregate bandwidth
    network_bandwidth: float    # assumption: one node's network bandwidth, each way
    set_size: int               # XOR set size (assumption at scale)

    def messages(self, phase: str, ranks: int) -> float:
        """Collective and root-gathered message costs of one call phase."""
        c = self.calls[phase]
        gathered = self.root_messages[phase] * (ranks - 1) * self.gather_per_rank
        return (c["allreduce"] * self.allreduce(ranks) + c["allgather"] * self.allgather(ranks)
                + c["barrier"] * self.barrier(ranks) + gathered)

    def blocking(self, ranks: int) -> float:
        return self.capture + self.messages("checkpoint", ranks)

    def project(self, ranks: int, ranks_per_node: Optional[int] = None, shared_disk: bool = False) -> Dict[str, float]:
        """Blocking and job time to durable at `ranks`. `shared_disk`: every
        node writes to one disk (this machine), instead of one disk per node
        and a shared file system of pfs_bandwidth."""
        k = min(ranks, ranks_per_node or self.ranks_per_node)
        nodes = math.ceil(ranks / k)
        node_bytes = k * self.state
        l2_rate = self.l2_bandwidth / nodes if shared_disk else self.l2_bandwidth
        l4_rate = (self.l4_bandwidth / nodes if shared_disk
                   else min(self.l4_bandwidth, self.pfs_bandwidth / nodes))
        blocking = self.blocking(ranks)
        commit = self.commit + self.messages("wait", ranks)
        l2 = blocking + node_bytes / l2_rate + commit
        network = node_bytes / self.network_bandwidth
        parity = node_bytes / max(1, min(self.set_size, nodes) - 1)
        no_l3 = nodes < 2  # a copy on another node needs one: NaN, drawn as a gap, written as "—"
        return {
            "blocking": blocking,
            "ratio": blocking / self.capture,
            "l2": l2,
            "l3_partner": math.nan if no_l3 else l2 + network + node_bytes / l2_rate,
            "l3_xor": math.nan if no_l3 else l2 + network + parity / l2_rate,
            "l4": l2 + node_bytes / l4_rate,
        }


def build_model(args, figures: Dict[Job, Figures]) -> Optional[Model]:
    base = next((f for j, f in figures.items() if j.ranks == 1 and j.scheme == "none"), None)
    none = sorted((f for j, f in figures.items() if j.scheme == "none"), key=lambda f: f.job.ranks)
    if base is None or not base.get("single_blocking").times:
        return None
    points = {op: [(f.job.ranks, f.get(op).median if f.get(op).times else None) for f in none]
              for op in ("allreduce", "allgather", "barrier")}
    widest = none[-1]
    calls = {phase: {call: calls_per_version(widest, phase, call, "rank 0") for call in CALLS}
             for phase in ("checkpoint", "wait")}
    root_messages = {phase: calls_per_version(widest, phase, "messages", "others") for phase in ("checkpoint", "wait")}
    allgather = fit(points["allgather"], "linear")
    return Model(
        state=args.bytes,
        capture=base.get("single_blocking").median,
        l2_bandwidth=base.get("single_l2_bandwidth").median,
        l4_bandwidth=base.get("single_l4_bandwidth").median,
        commit=base.get("commit_overhead").median if base.get("commit_overhead").times else 0.0,
        allreduce=fit(points["allreduce"], "log2"),
        allgather=allgather,
        barrier=fit(points["barrier"], "log2"),
        calls=calls,
        root_messages=root_messages,
        gather_per_rank=max(0.0, allgather.b),
        ranks_per_node=args.model_ranks_per_node,
        pfs_bandwidth=args.pfs_bandwidth,
        network_bandwidth=args.network_bandwidth,
        set_size=args.model_set_size,
    )


# ------------------------------------------------------------------- main
def parse_ranks(text: str) -> List[int]:
    try:
        ranks = sorted({int(t) for t in text.split(",") if t.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad rank list '{text}' (e.g. 1,2,4,8)")
    if not ranks or ranks[0] < 1 or ranks[-1] > 64:
        raise argparse.ArgumentTypeError("rank counts must be in 1..64")
    return ranks


def parse_bandwidth(text: str) -> float:
    return float(parse_size(text.removesuffix("/s"), 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY,
                    help="the mpi_driver program (default: build/cpp/bench/mpi_driver)")
    ap.add_argument("--bytes", type=lambda t: parse_size(t, 32), default=32 * MiB,
                    help="state per rank (default 32MiB)")
    ap.add_argument("--ranks", type=parse_ranks, default=[1, 2, 4, 8], help="rank counts (default 1,2,4,8)")
    ap.add_argument("--ranks-per-node", type=int, default=2,
                    help="faked ranks per node, at most; from 2 ranks on at least two nodes (default 2)")
    ap.add_argument("--schemes", default=",".join(SCHEMES), help="L3 schemes to try (default partner,xor)")
    ap.add_argument("--set-size", type=int, default=4, help="XOR set size, at most the node count (default 4)")
    ap.add_argument("--checkpoints", type=int, default=8,
                    help="checkpoints per store and job; the first is a warm-up (default 8)")
    ap.add_argument("--compute-seconds", type=float, default=0.05,
                    help="sleep standing in for computing before each checkpoint (default 0.05)")
    ap.add_argument("--comm-iterations", type=int, default=200,
                    help="allreduce_min and allgather calls timed per job (default 200)")
    ap.add_argument("--model-ranks-per-node", type=int, default=8,
                    help="ranks per node at scale (model assumption, default 8)")
    ap.add_argument("--model-set-size", type=int, default=8, help="XOR set size at scale (default 8)")
    ap.add_argument("--pfs-bandwidth", type=parse_bandwidth, default=parse_bandwidth("1TB"),
                    help="aggregate bandwidth of the shared file system at scale (assumption, default 1TB/s)")
    ap.add_argument("--network-bandwidth", type=parse_bandwidth, default=parse_bandwidth("12.5GB"),
                    help="one node's network bandwidth, each way, at scale (assumption, default 12.5GB/s: "
                         "100 Gb/s)")
    add_common_args(ap, NAME, "target directory (node-local disk, not tmpfs); default: a fresh directory "
                              "under /tmp")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    if args.checkpoints < 1 or args.ranks_per_node < 1 or args.set_size < 2:
        ap.error("--checkpoints and --ranks-per-node must be >= 1, --set-size >= 2")
    if not shutil.which("mpirun"):
        sys.exit(f"{SCRIPT}: mpirun not found; install Open MPI or MPICH (Debian: openmpi-bin libopenmpi-dev)")
    binary = args.binary if args.binary.is_absolute() else Path.cwd() / args.binary
    if not binary.is_file():
        sys.exit(f"{SCRIPT}: {args.binary} not found. Build it first (it needs MPI):  make build\n"
                 "(or: cmake --build build/cpp --target mpi_driver), or name it with --binary")

    created = args.dir is None
    root = Path(tempfile.mkdtemp(prefix="resurgo-bench-", dir="/tmp")) if created else args.dir
    root.mkdir(parents=True, exist_ok=True)
    widest = max(args.ranks)
    # Per rank: the state, a restore copy, and the capture buffer (2x the state by default).
    # On disk: L2 and L4 keep two versions each, plus partner copies.
    check_resources(SCRIPT, root, f"{widest} ranks of {human(args.bytes)}", 4.5 * widest * args.bytes,
                    8 * widest * args.bytes + GiB)
    try:
        started = time.perf_counter()
        driver = Driver(args, binary, root)
        schemes, notes = probe(driver, [s for s in args.schemes.split(",") if s])
        jobs = jobs_to_run(args, schemes)
        results = run_all(args, driver, jobs)
        elapsed = time.perf_counter() - started
        figures = {job: analyse(job, rows, warmup=1 if args.checkpoints > 1 else 0) for job, rows in results.items()}
        write_report(args, binary, root, figures, notes, elapsed)
    finally:
        if created and not args.keep:
            shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------ report
def build_type(binary: Path) -> str:
    try:
        for line in (binary.parent.parent / "CMakeCache.txt").read_text().splitlines():
            if line.startswith("CMAKE_BUILD_TYPE:"):
                return "build type " + (line.split("=", 1)[1] or "unset")
    except OSError:
        pass
    return "build type unknown"


def mpi_version() -> str:
    try:
        out = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
        return out.splitlines()[0].strip() if out else "unknown"
    except OSError:
        return "unknown"


def write_report(args, binary: Path, root: Path, figures: Dict[Job, Figures], notes: List[str],
                 elapsed: float) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    machine = machine_description(root)
    machine["MPI"] = mpi_version() + " (`mpirun --oversubscribe --bind-to none`)"
    machine["program"] = f"{binary} ({build_type(binary)})"
    machine["load average (1, 5, 15 min) at the end"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    model = build_model(args, figures)
    jobs = list(figures)
    lines = report_header("MPI stores: blocking, time to durable per level, rebuild, scale model", SCRIPT, args,
                          extra=f"State {human(args.bytes)} per rank; one `mpirun` job per (repeat, rank count, "
                                "scheme), in an order rotated at each repeat.")
    lines += machine_lines(machine)
    lines += honesty_section(args)
    lines += measured_section(args)
    lines += blocking_section(jobs, figures)
    lines += durable_section(jobs, figures)
    lines += comm_section(jobs, figures, model)
    lines += l3_section(jobs, figures, notes)
    if model:
        lines += model_section(args, model, figures)
    lines += targets_section(jobs, figures)
    lines += ["## Notes", ""] + [f"- {n}" for n in notes + [f"The run took {elapsed:.0f} s ({elapsed / 60:.1f} min)."]]
    lines += ["", f"Plot: `{NAME}.png`.", ""]
    md = args.out / f"{NAME}.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")
    plot(args, jobs, figures, model)


def honesty_section(args) -> List[str]:
    return [
        "## What one 2-core machine can show",
        "",
        f"Every rank runs on this one machine: with {max(args.ranks)} ranks on "
        f"{os.cpu_count()} cores the ranks are oversubscribed (each rank's store also runs its pipeline threads), "
        "so every rank's capture, write and message competes for the same cores, memory bus and disk. The "
        "\"nodes\" are faked (`mpi.ranks_per_node`): their node-local directories (`local.path = .../{node}`) "
        "and the \"shared\" L4 directory all sit on the same disk, and messages between \"nodes\" go through "
        "shared memory, not a network. So the times at 2 or more ranks measure this machine's contention, not a "
        "cluster's: the collective costs include the operating system's scheduling of ranks that wait for a "
        "core, and an L2 write at P ranks shares one disk among all P. What this run does show reliably: the "
        "blocking *ratio* of an MPI store to a single-process store in the same contention, the Comm calls a "
        "checkpoint and a wait make (exact counts), the bytes each scheme stores, and whether a rebuild "
        "restores every byte. The scale model below uses the measured single-rank bandwidths, the counted "
        "calls and collective costs fitted on the measured points, and states what it assumes for a cluster.",
        "",
    ]


def measured_section(args) -> List[str]:
    return [
        "## What is measured",
        "",
        "`bench/mpi_driver.cpp` (public C++ API), started by `mpirun -np P`. Each rank holds a state of "
        f"{human(args.bytes)} in three float64 arrays (1/2, 1/4, 1/4 of it). Per job, in one process per rank:",
        "",
        f"1. **Collective costs**: {args.comm_iterations} `allreduce_min` calls, then {args.comm_iterations} "
        "`allgather(value, mpi.timeout)` calls (the path the store takes: a gather at rank 0 with a deadline, "
        "polled every 0.1 ms), then as many barriers, back to back on `resurgo::mpi_comm(MPI_COMM_WORLD)`; the "
        "mean per call on the slowest rank.",
        "2. **Two stores, one after the other** (which one first alternates between repeats): each rank's "
        "single-process store (`Store(name, config)`, its own L2 and L4 directories) and the MPI store "
        "(`Store(name, config, comm)` with `comm` = `mpi_comm(MPI_COMM_WORLD)` behind a wrapper that counts "
        "the Comm calls the store makes; L2 in `local.path = .../nodes/{node}`, L4 in one shared directory). "
        f"Both with `persistent.every = 1` (every version goes to L2 and then L4), `local.keep = "
        f"persistent.keep = 2`, the default buffer (2× the state) and pipeline threads (2). For each of "
        f"{args.checkpoints} versions: one word per page of the state changes, a sleep of "
        f"{args.compute_seconds:g} s stands in for computing (a sleep, not a busy loop, so that oversubscribed "
        "ranks do not steal the cores the stores' threads need), the ranks meet at an `MPI_Barrier` (an "
        "application's own halo exchange keeps its ranks in step; without it the MPI store would be charged "
        "with the ranks' imbalance), then `checkpoint(v)`, `wait(v, 2)`, `wait(v, 3)` when L3 exists, "
        "`wait(v, 4)`. The first version is a warm-up (it faults the capture buffer in) and is not counted.",
        "3. **With an L3 scheme**: a store with L4 off takes one version; the bytes of every file under the "
        "node-local roots are summed (storage); `restart()` runs in a fresh store with every node intact, then "
        "again after the last node's directory was deleted (rebuild), each timed on the slowest rank and "
        "compared bit for bit with the state.",
        "",
        "| figure | how (each repeat gives one value; cells are median [min–max] over repeats) |",
        "|---|---|",
        "| blocking | `VersionStats.blocking_seconds`; per rank the median over versions, then the median rank |",
        "| MPI / single | per rank: its MPI store's blocking / its single-process store's, same job; the median "
        "rank, and the worst rank |",
        "| own copy durable at Ln | `LevelStats.seconds_to_level`: from `checkpoint()` until this rank's file "
        "is durable there (median rank) |",
        "| job durable at Ln | wall time from the `checkpoint()` call until `wait(v, n)` returned: every rank's "
        "file and the job manifest are durable (the slowest rank, median over versions) |",
        "| commit overhead | job durable at L4 − the slowest rank's own copy durable at L4: the manifests and "
        "the waits' calls after the last level |",
        "| single-process bandwidth | `LevelStats.stored_bytes / write_seconds` of the single-process store |",
        "",
    ]


def blocking_section(jobs: List[Job], figures: Dict[Job, Figures]) -> List[str]:
    lines = ["## Blocking per checkpoint: MPI store against the same rank's single-process store", "",
             f"Target (issue 12): MPI / single ≤ {TARGET_BLOCKING} (the collective work off the application's "
             "path).", "",
             "| job | single-process | MPI store | MPI / single (median rank) | MPI / single (worst rank) |",
             "|---|---:|---:|---:|---:|"]
    for job in jobs:
        f = figures[job]
        lines.append(f"| {job.label} | {f.get('single_blocking').cell()} | {f.get('mpi_blocking').cell()} | "
                     f"{f.get('blocking_ratio').cell(fmt_ratio)} | {f.get('blocking_ratio_worst').cell(fmt_ratio)} |")
    lines += ["", "Where the blocking goes: the copy into the buffer, first touch + backpressure "
              "(`VersionStats`), the time inside the store's Comm calls (the MPI store's agreement with the other "
              "ranks, timed by the wrapper), and the rest (blocking − those: the store's own work, and any time "
              "the application thread waited for a core):", "",
              "| job | single: copy | single: touch + backpressure | single: rest | MPI: copy | "
              "MPI: touch + backpressure | MPI: Comm calls | MPI: rest |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    parts = [("single", "copy"), ("single", "stalls"), ("single", "other"), ("mpi", "copy"), ("mpi", "stalls"),
             ("mpi", "comm"), ("mpi", "other")]
    for job in jobs:
        f = figures[job]
        lines.append(f"| {job.label} | " + " | ".join(f.get(f"{name}_{part}").cell() for name, part in parts) + " |")
    lines.append("")
    lines += contention_note(jobs, figures)
    return lines


def contention_note(jobs: List[Job], figures: Dict[Job, Figures]) -> List[str]:
    """The widest job's time in the checkpoint()'s Comm calls against what
    the same calls cost when measured alone (the collective costs below)."""
    none = [j for j in jobs if j.scheme == "none" and j.ranks > 1]
    if not none:
        return []
    f = figures[max(none, key=lambda j: j.ranks)]
    inside = {op: calls_per_version(f, "checkpoint", f"{op}_seconds", "others") for op in ("allreduce", "allgather")}
    count = {op: calls_per_version(f, "checkpoint", op, "others") for op in ("allreduce", "allgather")}
    alone = sum(count[op] * f.get(op).median for op in count if f.get(op).times)
    if not any(count.values()):
        return [f"At {f.job.ranks} ranks checkpoint() made no Comm call: the MPI store hands each version to its "
                "job thread, which agrees with the other ranks and commits the manifests off the application's "
                "path (those calls appear under the waits below). Where the MPI store still blocks longer than "
                "the single-process one, the difference is in \"rest\": on this machine P ranks' application, "
                "pipeline, job and L3 threads share 2 cores, so any background work of the MPI store (its job "
                "thread's steps and manifests, the L3 copies) can delay an application thread; the single-process "
                "store has none of it.", ""]
    return [f"At {f.job.ranks} ranks the checkpoint()'s {count['allreduce']:g} allreduce_min and "
            f"{count['allgather']:g} allgather calls took {fmt_time(inside['allreduce'])} and "
            f"{fmt_time(inside['allgather'])} per version (the slowest rank other than rank 0; median over "
            f"versions and repeats), against {fmt_time(alone)} for the same calls timed back to back with no store "
            "open (next section). A collective waits for the last rank to arrive: the calls made after the version "
            "is handed to the pipeline (the progress of the job's manifests, an allreduce_min per level) run while "
            "every rank's writer threads compete with the application threads for the 2 cores, and wait for the "
            "rank the scheduler served last.", ""]


def durable_section(jobs: List[Job], figures: Dict[Job, Figures]) -> List[str]:
    lines = ["## Time to durable", "",
             "From the `checkpoint()` call. \"own\": this rank's file (`seconds_to_level`); \"job\": `wait()` "
             "returned, i.e. every rank's file and the job manifest are durable. Single: the single-process "
             "store's own copy.", "",
             "| job | single L2 | MPI own L2 | MPI job L2 | commit overhead | single L4 | MPI own L4 | MPI job L4 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for job in jobs:
        f = figures[job]
        lines.append(f"| {job.label} | {f.get('single_l2').cell()} | {f.get('own_l2').cell()} | "
                     f"{f.get('job_l2').cell()} | {f.get('commit_overhead').cell()} | {f.get('single_l4').cell()} | "
                     f"{f.get('own_l4').cell()} | {f.get('job_l4').cell()} |")
    lines += wait_note(jobs, figures)
    lines += ["", "Single-process write bandwidth per rank (`stored_bytes / write_seconds`; at P ranks, P writers "
              "share the disk):", "", "| job | L2 | L4 |", "|---|---:|---:|"]
    for job in jobs:
        if job.scheme == "none":
            f = figures[job]
            lines.append(f"| {job.label} | {f.get('single_l2_bandwidth').cell(fmt_gibs)} | "
                         f"{f.get('single_l4_bandwidth').cell(fmt_gibs)} |")
    lines.append("")
    return lines


def wait_note(jobs: List[Job], figures: Dict[Job, Figures]) -> List[str]:
    """Says so when the job's wait for L2 returned only after the L4 copies:
    then the job L2 column measures L4, not L2."""
    after = [figures[j].get("l2_wait_after_l4") for j in jobs]
    if not all(s.times and s.median >= 0 for s in after):
        return []
    return ["", "**The job's L2 time includes L4.** In every job, `wait(v, 2)` on the MPI store returned after "
            "the slowest rank's L4 copy was durable (job L2 − own L4: " + ", ".join(
                f"{j.ranks} rk {s.cell()}" for j, s in zip(jobs, after) if j.scheme == "none") + "): the store's "
            "wait settles each version on every level it goes to before it commits the job's manifests, so "
            "an MPI job learns that a version is durable at L2 only once it is at L4 too. The \"own L2\" "
            "column is the time the L2 copies themselves took."]


def comm_section(jobs: List[Job], figures: Dict[Job, Figures], model: Optional[Model]) -> List[str]:
    none = [j for j in jobs if j.scheme == "none"]
    lines = ["## Collective costs and the calls a store makes", "",
             "| ranks | allreduce_min | allgather (with deadline) | barrier |", "|---|---:|---:|---:|"]
    for job in none:
        f = figures[job]
        lines.append(f"| {job.ranks} | {f.get('allreduce').cell(fmt_us)} | {f.get('allgather').cell(fmt_us)} | "
                     f"{f.get('barrier').cell(fmt_us)} |")
    if model:
        lines += ["", f"Fits on the medians of 2 ranks and more: allreduce = {model.allreduce.text()}, allgather = "
                  f"{model.allgather.text()} (rank 0 receives and answers every rank: linear in P), barrier = "
                  f"{model.barrier.text()}."]
    lines += ["", "Comm calls the MPI store made per version (median over versions and repeats; counted by a "
              "wrapper around the store's Comm, its duplicates included; \"messages\" are point-to-point sends):",
              "", "| ranks | where | " + " | ".join(CALLS) + " | " + " | ".join(
                  f"time in {t.removesuffix('_seconds')}" for t in CALL_TIMES) + " |",
              "|---|---|" + "---:|" * (len(CALLS) + len(CALL_TIMES))]
    for job in none:
        f = figures[job]
        for phase in ("checkpoint", "wait"):
            for who in ("rank 0", "others"):
                if who == "others" and job.ranks == 1:
                    continue
                cells = [f"{calls_per_version(f, phase, call, who):g}" for call in CALLS]
                cells += [fmt_time(calls_per_version(f, phase, t, who)) for t in CALL_TIMES]
                lines.append(f"| {job.ranks} | {phase}(), {who} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def l3_section(jobs: List[Job], figures: Dict[Job, Figures], notes: List[str]) -> List[str]:
    l3 = [j for j in jobs if j.scheme != "none"]
    lines = ["## L3 partner and XOR copies: time to durable, storage, rebuild", ""]
    if not l3:
        lines += ["No L3 rows: " + (" ".join(n for n in notes if n.startswith("L3")) or "no scheme was asked for."),
                  "", "SCR's formulas for the storage each rank needs on node-local disks (state B): partner 2B "
                  "(its own file and its partner's); XOR B·N/(N−1) for a set of N nodes (its file and 1/(N−1) of "
                  "parity).", ""]
        return lines
    lines += ["| job | blocking MPI / single | own L3 | job L3 | job L2 | job L4 |", "|---|---:|---:|---:|---:|---:|"]
    for job in l3:
        f = figures[job]
        lines.append(f"| {job.label} | {f.get('blocking_ratio').cell(fmt_ratio)} | {f.get('own_l3').cell()} | "
                     f"{f.get('job_l3').cell()} | {f.get('job_l2').cell()} | {f.get('job_l4').cell()} |")
    lines += ["", "Storage on the node-local disks per rank for one version (every file under the node roots: "
              "L2, the L3 copies, manifests), against SCR's formulas:", "",
              "| job | bytes per rank / B | SCR's formula | formula / B |", "|---|---:|---|---:|"]
    for job in l3:
        f = figures[job]
        ratios = [s["node_local_bytes"] / s["ranks"] / s["state_bytes"] for s in f.storage]
        formula, value = (("2B", 2.0) if job.scheme == "partner"
                          else (f"B·N/(N−1), N = {job.set_size}", job.set_size / (job.set_size - 1)))
        lines.append(f"| {job.label} | {series('', ratios).cell(fmt_ratio)} | {formula} | {value:.3g} |")
    lines += ["", "Rebuild: `restart()` in a fresh store after the last node's L2 directory was deleted, L4 off "
              "(slowest rank), against the same restart with every node intact:", "",
              "| job | intact restart | rebuild | rebuild / intact | bit for bit | lost node's file written back | "
              "levels read |", "|---|---:|---:|---:|---:|---:|---|"]
    for job in l3:
        f = figures[job]
        ok = sum(1 for r in f.rebuilds if r["verified"])
        back = sum(1 for r in f.rebuilds if r["rewritten"])
        levels = sorted({int(x) for r in f.rebuilds for x in r["levels"]})
        lines.append(f"| {job.label} | {f.get('restart_intact').cell()} | {f.get('rebuild').cell()} | "
                     f"{f.get('rebuild_ratio').cell(fmt_ratio)} | {ok}/{len(f.rebuilds)} | "
                     f"{back}/{len(f.rebuilds)} | {', '.join(f'L{x}' for x in levels) or '—'} |")
    lines.append("")
    failed = [(job, r) for job in l3 for r in figures[job].rebuilds if not r["verified"]]
    if failed:
        job, r = failed[0]
        lines += [f"**{len(failed)} rebuilds did not restore the state bit for bit.** The first ({job.label}): "
                  + (r["error"] or "the restored bytes differ from the state") + ".", ""]
    return lines


def model_section(args, model: Model, figures: Dict[Job, Figures]) -> List[str]:
    lines = [
        "## Scale model: projection to 10^4 ranks", "",
        "**Inputs measured in this run** (medians over repeats):", "",
        "| input | value | from |", "|---|---:|---|",
        f"| state per rank B | {human(model.state)} | `--bytes` |",
        f"| capture (blocking of a single-process store) | {fmt_time(model.capture)} | 1 rank |",
        f"| L2 write bandwidth of one node, one writer | {fmt_gibs(model.l2_bandwidth)} | 1 rank, single-process |",
        f"| L4 write bandwidth of one node (copy L2 → L4) | {fmt_gibs(model.l4_bandwidth)} | 1 rank, "
        "single-process |",
        f"| job commit (manifests written, wait's barriers) | {fmt_time(model.commit)} | 1 rank, MPI store: job "
        "L4 − own L4 |",
        f"| allreduce_min(P) | {model.allreduce.text()} | fitted on 2..{max(args.ranks)} ranks |",
        f"| allgather with deadline(P) | {model.allgather.text()} | fitted, linear: rank 0 handles every rank |",
        f"| barrier(P) | {model.barrier.text()} | fitted |",
        "| calls per checkpoint() | " + ", ".join(f"{model.calls['checkpoint'][c]:g} {c}" for c in CALLS[:3])
        + f" | counted at {max(args.ranks)} ranks, rank 0 |",
        "| calls in the waits of one version | " + ", ".join(f"{model.calls['wait'][c]:g} {c}" for c in CALLS[:3])
        + f"; {model.root_messages['wait']:g} messages from every other rank to rank 0 | counted |",
        "",
        "**Assumptions** (arguments; not measured here):", "",
        f"- {model.ranks_per_node} ranks per node (`--model-ranks-per-node`); each node has its own node-local "
        "disk with the L2 bandwidth measured above, shared by its ranks.",
        "- The capture (a copy into the host buffer) costs the same at every scale: each rank copies its own "
        "B on its own core; the node's memory bandwidth is not the limit.",
        f"- L4 is a shared file system of {args.pfs_bandwidth / 1e12:g} TB/s aggregate (`--pfs-bandwidth`), "
        "divided evenly among the nodes, each node capped at the L4 bandwidth measured here.",
        f"- L3 copies go over a network of {args.network_bandwidth / 1e9:g} GB/s per node each way "
        "(`--network-bandwidth`), after the L2 write (the node reads its files from L2 and sends them); the "
        "partner's copy is then written to the receiving node's L2; an XOR set of "
        f"{model.set_size} nodes (`--model-set-size`) sends each rank's B once (a reduce-scatter ring) and "
        "writes B/(N−1) of parity; the XOR arithmetic itself is not counted.",
        "- Message costs follow the fits: an allreduce and a barrier grow as log2(P); the store's allgather "
        "with a deadline and every gather at rank 0 grow linearly in P (rank 0 receives one message per rank, "
        "at the fitted allgather slope per rank). The fits come from shared-memory messages between "
        "oversubscribed ranks: a real network has a higher constant and a lower slope per rank, and these "
        "fits do not know that.",
        "- Per version: blocking = capture + the checkpoint()'s calls; job durable at L2 = blocking + the "
        "node's L2 write (k·B / L2 bandwidth) + commit + the wait's calls; L4 adds k·B / (the node's share of "
        "L4); L3 adds the network transfer and the partner copy's or parity's L2 write. The model's job L2 is "
        "a wait for L2 that does not wait for L4 (where this run's did, the section on time to durable says so).",
        "",
        "| ranks | nodes | blocking | blocking / single-process | job L2 | job L3 partner | job L3 XOR | job L4 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for ranks in MODEL_RANKS:
        p = model.project(ranks)
        nodes = math.ceil(ranks / min(ranks, model.ranks_per_node))
        l3 = [fmt_time(p[k]) if not math.isnan(p[k]) else "— (one node)" for k in ("l3_partner", "l3_xor")]
        lines.append(f"| {ranks:,} | {nodes:,} | {fmt_time(p['blocking'])} | {fmt_ratio(p['ratio'])} | "
                     f"{fmt_time(p['l2'])} | {l3[0]} | {l3[1]} | {fmt_time(p['l4'])} |")
    top = model.project(MODEL_RANKS[-1])
    per_us = model.calls["checkpoint"]["allgather"] * (MODEL_RANKS[-1] - 1) * 1e-6
    if model.calls["checkpoint"]["allgather"] > 0:
        lines += ["", f"At {MODEL_RANKS[-1]:,} ranks the linear terms dominate: the checkpoint()'s allgather "
                  f"costs {model.calls['checkpoint']['allgather']:g} × (P − 1) × the per-rank slope, so each µs of "
                  f"that slope adds {fmt_time(per_us)} of blocking there (projected: {fmt_time(top['blocking'])} "
                  f"with the fitted {fmt_us(model.allgather.b)}); a gather along a tree instead of at rank 0 would "
                  "make it grow as log2(P)."]
    else:
        lines += ["", f"checkpoint() makes no Comm call, so blocking stays the capture's at every scale. At "
                  f"{MODEL_RANKS[-1]:,} ranks the linear terms dominate the time to durable instead: the version "
                  "agreement (an allgather at rank 0, to name missing ranks) and the manifest's gather at rank 0 "
                  f"grow as P × the fitted {fmt_us(model.allgather.b)} per rank; a gather along a tree would make "
                  "them grow as log2(P)."]
    lines += ["", "**The model against this run.** The same model with this machine's layout (the measured "
              "ranks per node, one disk shared by every node for L2 and L4) and the measured collective costs "
              "instead of the fits:", "",
              "| job | blocking: model | measured | job L2: model | measured | job L4: model | measured |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for job, f in figures.items():
        if job.scheme != "none":
            continue
        local = measured_model(model, f)
        p = local.project(job.ranks, job.ranks_per_node, shared_disk=True)
        lines.append(f"| {job.label} | {fmt_time(p['blocking'])} | {f.get('mpi_blocking').cell()} | "
                     f"{fmt_time(p['l2'])} | {f.get('job_l2').cell()} | {fmt_time(p['l4'])} | "
                     f"{f.get('job_l4').cell()} |")
    lines += ["", "Where model and measure part here, oversubscription is the usual cause: P ranks' captures "
              "and pipeline threads share 2 cores, which the model (one core per rank) does not charge.", ""]
    return lines


def measured_model(model: Model, f: Figures) -> Model:
    """The model with the job's measured collective costs in place of the fits."""
    def constant(op: str) -> Fit:
        s = f.get(op)
        return Fit(s.median if s.times else 0.0, 0.0, "log2", [])
    return dataclasses.replace(model, allreduce=constant("allreduce"), allgather=constant("allgather"),
                               barrier=constant("barrier"))


def targets_section(jobs: List[Job], figures: Dict[Job, Figures]) -> List[str]:
    lines = ["## Targets (issue 12)", "", "| target | measured (median [min–max]) | |", "|---|---|---|"]
    for job in jobs:
        s = figures[job].get("blocking_ratio")
        ok = s.median <= TARGET_BLOCKING if s.times else None
        lines.append(f"| blocking MPI / single ≤ {TARGET_BLOCKING}, {job.label} (median rank) | "
                     f"{s.cell(fmt_ratio)} | {verdict(ok)} |")
    for job in (j for j in jobs if j.scheme != "none"):
        trials = figures[job].rebuilds
        ok = sum(1 for r in trials if r["verified"])
        lines.append(f"| rebuild after losing one node: 100 % of trials bit for bit, {job.label} | "
                     f"{ok}/{len(trials)} | {verdict(ok == len(trials) if trials else None)} |")
    lines += ["", "Verdicts are on the medians. The N→M restart target (bytes read / restored ≤ 1.05) is "
              "measured by bench/mpi_redistribution.py (bench/results/mpi_redistribution.md).", ""]
    return lines


# ------------------------------------------------------------------- plot
def plot(args, jobs: List[Job], figures: Dict[Job, Figures], model: Optional[Model]) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(15, 10))
    none = [j for j in jobs if j.scheme == "none"]
    names = [f"{j.ranks} rk" for j in none]

    ax = axes[0][0]
    grouped_bars(ax, [(n, {"single": relabel(figures[j].get("single_blocking"), "single-process"),
                           "mpi": relabel(figures[j].get("mpi_blocking"), "MPI store")}) for n, j in zip(names, none)],
                 value=lambda s: (s.median * 1e3, s.min * 1e3, s.max * 1e3))
    ax.set_ylabel("blocking per checkpoint (ms)")
    ax.set_title("blocking: MPI store against the same rank's single-process store")
    ax.legend()

    ax = axes[0][1]
    keys = [("single_l2", "single L2"), ("job_l2", "MPI job L2"), ("job_l3", "MPI job L3"),
            ("single_l4", "single L4"), ("job_l4", "MPI job L4")]
    grouped_bars(ax, [(n, {k: relabel(figures[j].get(k), label) for k, label in keys}) for n, j in zip(names, none)],
                 value=lambda s: (s.median * 1e3, s.min * 1e3, s.max * 1e3))
    ax.set_ylabel("from checkpoint() to durable (ms)")
    ax.set_title(f"time to durable, {human(args.bytes)} per rank (oversubscribed above 2 ranks)")
    ax.legend(fontsize=8)

    ax = axes[1][0]
    for op, marker in (("allreduce", "o"), ("allgather", "s"), ("barrier", "^")):
        xs = [j.ranks for j in none if figures[j].get(op).times]
        ys = [figures[j].get(op).median * 1e6 for j in none if figures[j].get(op).times]
        line, = ax.plot(xs, ys, marker=marker, linestyle="", label=f"{op} (measured)")
        if model:
            f = getattr(model, op)
            grid = np.linspace(2, max(args.ranks), 50)
            ax.plot(grid, [f(p) * 1e6 for p in grid], color=line.get_color(), linewidth=0.8,
                    label=f"fit: {f.text()}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("ranks")
    ax.set_ylabel("µs per call")
    ax.set_title("collective costs on this machine (shared memory, oversubscribed)")
    ax.legend(fontsize=7)

    ax = axes[1][1]
    if model:
        grid = sorted(set(np.unique(np.logspace(0, 4, 40).astype(int))) | {10_000})
        for key, label in (("blocking", "blocking"), ("l2", "job L2"), ("l3_partner", "job L3 partner"),
                           ("l3_xor", "job L3 XOR"), ("l4", "job L4")):
            ax.plot(grid, [model.project(int(p))[key] for p in grid], label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ranks")
        ax.set_ylabel("seconds")
        ax.set_title(f"model: {model.ranks_per_node} ranks/node, PFS {args.pfs_bandwidth / 1e12:g} TB/s, "
                     f"network {args.network_bandwidth / 1e9:g} GB/s")
        ax.legend(fontsize=8)
    else:
        ax.set_axis_off()
    title = f"MPI stores, {human(args.bytes)} per rank, median [min–max] of {args.repeats}"
    fig.suptitle(("SMOKE RUN, not a result — " if args.smoke else "") + title)
    fig.tight_layout()
    png = args.out / f"{NAME}.png"
    fig.savefig(png, dpi=100)
    log(f"wrote {png}")


def relabel(s: Series, label: str) -> Series:
    s.label = label
    return s


if __name__ == "__main__":
    main()
