#!/usr/bin/env python3
"""ConvergentMatrix (issue 13): the distributed Hessian assembly of the
ConvergentMatrix paper (papers/convergent-matrix-distributed-hessian-
assembly.txt, section IV) at small scale: time to solution, the share of
the update communication hidden behind the application's compute, where the
application thread's time goes, peak memory and a check of every assembled
matrix, for ConvergentMatrix (kMessages), its MPI_Accumulate backend (kRma),
the replicated approach, PETSc's MATSCALAPACK assembly and Global Arrays.

The workload (bench/matrix_workload.h, shared by every program): a float32
N x N matrix (--size, default 16384), 64 x 64 blocks, 2-D block-cyclic over
the most nearly square grid (MPI_Dims_create). Each rank issues
--updates-per-rank updates (default 16; weak scaling, the same at every rank
count): update u of rank p is the symmetric n x n update of a Gauss-Newton
Hessian, A[ix, ix] += G^T G, upper triangle only (element (i, j) added where
i <= j; resurgo's update_symmetric), n = --update-fraction x N (default 4 %),
ix a sorted strided index set (a random stride in [S/2, S], S = (N-1)/(n-1),
and a random start where it fits: every update spans 50-100 % of the
matrix). Values are multiples of 2^-10 in [0, 1) hashed from (seed, p, u, i,
j), generated before the timed part, and chosen so that every sum is exact
in float32: the checks compare with zero tolerance. Before each update a
simulated compute step sleeps --compute-ms (the core stays free, as the
paper's update thread waits on its OpenMP team), the same for every row;
the default, 100 ms, is 4x the convergent row's communication alone per
update at 8 ranks and N = 16384 on this machine (about 25 ms), so that the
communication could be hidden.

Figures: T (slowest rank, barrier to the end call's return), T_comm (the
same row with --compute-ms 0, same repeat), hidden = 1 - (T - T_compute) /
T_comm with T_compute = updates x compute, the application thread's time in
update() (MatrixStats: backpressure, rest; binning, which the convergent row
does on its progress thread) and commit(), VmHWM and Pss per rank, and the
checks (zero tolerance: every sum is exact). With --baseline-runs (a file
--save-runs wrote with the code before a change, same settings), the report
also sets the two runs side by side. With --before-binary (a matrix_driver
built from the code before a change), each convergent job is preceded by
the same job of that driver, in the same repeat: an extra row, "before",
in every table, and a before/after section paired repeat by repeat. With
--profile, one more convergent job with compute at 2 ranks and at the
most runs rank 0 under perf record (bench/matrix_profile.py): where its
CPU time went, by thread and class.

Rows: convergent (MatrixBackend::kMessages), rma (MatrixBackend::kRma:
MPI_Accumulate under an exclusive lock), replicated (a full local copy per
rank, then one MPI_Reduce per owner into its local array, or with
--collective reduce_scatter one MPI_Reduce_scatter), petsc
(MatSetValues(ADD_VALUES) per upper-triangle row of each update, then
MatAssemblyBegin/End), ga (NGA_Strided_acc64 per upper-triangle row, then
GA_Sync; only where Global Arrays links). Every (row, rank count) runs twice
per repeat, with the compute step and with --compute-ms 0 (communication
alone), one mpirun job each, in an order rotated at each repeat.

Runs build/cpp/bench/matrix_driver, matrix_petsc and matrix_ga (see
--binary-dir) under `mpirun --oversubscribe --bind-to none -np P`; writes
bench/results/matrix.md and .png (see --out).

    .venv/bin/python bench/matrix.py                                       # 16384, 1-8 ranks, 5 repeats
    .venv/bin/python bench/matrix.py --size 8192 --compute-ms 60          # a quicker full run
    .venv/bin/python bench/matrix.py --smoke                               # under a minute
    .venv/bin/python bench/matrix.py --rows convergent,rma --ranks 2,4,8 \
        --baseline-runs /tmp/matrix-before.json                            # after a change, against before
    .venv/bin/python bench/matrix.py --rows convergent,rma --ranks 2,4,8 \
        --before-binary /work/wt/build/cpp/bench/matrix_driver             # the same, interleaved job by job
    .venv/bin/python bench/matrix.py --experiment part4                    # order, strong scaling (~5 min)

--experiment part4 (issue 32 part 4) runs the convergent row only and
writes bench/results/matrix_part4.md and .png instead: the time to commit
with MatrixOptions::target_order fixed against random (the default) under a
hotspot pattern (--hot-fraction of each rank's updates all on rank 0;
--order-ranks, default 4,8; communication alone), and strong scaling as the
paper's Table I (--strong-total-updates, default 32, dealt over --ranks,
with and without the compute step: time, speedup and E_R).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from matrix_profile import profile_section  # noqa: E402
from _common import (  # noqa: E402
    GiB,
    mem_available,
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
    plot_title,
    pyplot,
    report_header,
)

SCRIPT = "matrix.py"
NAME = "matrix"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BINARY_DIR = ROOT / "build" / "cpp" / "bench"
UNAVAILABLE = 3  # a driver's exit status when it cannot run the row

ROWS = ["convergent", "rma", "replicated", "petsc", "ga"]
PROGRAM = {"convergent": "matrix_driver", "rma": "matrix_driver", "replicated": "matrix_driver",
           "petsc": "matrix_petsc", "ga": "matrix_ga"}
LABEL = {"convergent": "ConvergentMatrix (messages)", "rma": "ConvergentMatrix kRma (MPI_Accumulate)",
         "replicated": "replicated + MPI_Reduce per owner", "petsc": "PETSc MATSCALAPACK",
         "ga": "Global Arrays NGA_Strided_acc"}
BEFORE = "before"  # the convergent row of --before-binary
LABEL[BEFORE] = "ConvergentMatrix (messages), before the change"
DRIVER_ROW = {BEFORE: "convergent"}  # what --row the driver gets, where it differs from the row's name
LIBRARY_ROWS = ("convergent", "rma", BEFORE)  # with MatrixStats

TARGET_SPEEDUP = 2.0   # ConvergentMatrix against rma and petsc at the largest rank count
TARGET_HIDDEN = 0.90   # of the update communication hidden behind compute
TARGET_WEAK = 1.10     # T(largest) / T(2 ranks)


# ------------------------------------------------------------------ naming
def fmt_ratio(value: float) -> str:
    return f"{value:.3g}"


def fmt_pct(value: float) -> str:
    return f"{100 * value:.1f} %"


def fmt_bytes(value: float) -> str:
    return human(value)


def series(label: str, values) -> Series:
    s = Series(label)
    s.times = [v for v in values if v is not None]
    return s


def verdict(ok: Optional[bool]) -> str:
    return "—" if ok is None else ("met" if ok else "missed")


def median(values) -> Optional[float]:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# ------------------------------------------------------------------ running
@dataclass(frozen=True)
class Job:
    row: str
    ranks: int
    compute: bool  # with the compute step (False: --compute-ms 0)
    updates: int = 0       # updates per rank; 0: --updates-per-rank (strong scaling sets its own)
    order: str = "random"  # MatrixOptions::target_order of the ConvergentMatrix rows
    hot: float = 0.0       # the workload's --hot-fraction

    def updates_per_rank(self, args) -> int:
        return self.updates or args.updates_per_rank

    @property
    def label(self) -> str:
        extra = (f", {self.updates} updates/rank" if self.updates else "") + \
            (f", {self.order} order, {self.hot:g} hot" if self.hot or self.order != "random" else "")
        return f"{self.row}, {self.ranks} rank{'s' if self.ranks > 1 else ''}, " + \
            ("compute" if self.compute else "comm only") + extra


@dataclass
class Outcome:
    """One job's runs over the repeats: the JSON lines, and failures."""

    runs: List[Optional[dict]] = field(default_factory=list)  # per repeat; None where it failed
    failures: List[str] = field(default_factory=list)
    skipped: str = ""  # why it was not run (not enough memory)


class Runner:
    def __init__(self, args, binaries: Dict[str, Path]):
        self.args = args
        self.binaries = binaries

    def command(self, job: Job) -> List[str]:
        a = self.args
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(job.ranks)]
        if os.geteuid() == 0:
            cmd.insert(1, "--allow-run-as-root")
        cmd += [str(self.binaries[job.row]), "--row", DRIVER_ROW.get(job.row, job.row), "--size", str(a.size), "--block", str(a.block),
                "--updates-per-rank", str(job.updates_per_rank(a)), "--update-fraction", repr(a.update_fraction),
                "--compute-ms", repr(a.compute_ms if job.compute else 0.0), "--seed", str(a.seed),
                "--samples", str(a.samples)]
        if job.row in LIBRARY_ROWS:
            cmd += ["--progress", a.progress, "--max-in-flight-mib", str(a.max_in_flight_mib)]
        if job.order != "random":  # only where asked: drivers built before issue 32 part 4 lack the flags
            cmd += ["--target-order", job.order]
        if job.hot:
            cmd += ["--hot-fraction", repr(job.hot)]
        if job.row == "replicated":
            cmd += ["--collective", a.collective]
        return cmd

    def memory_needed(self, job: Job) -> float:
        """A generous estimate of the job's memory, all ranks (bytes)."""
        a = self.args
        n = max(1, round(a.update_fraction * a.size))
        matrix = a.size * a.size * 4
        updates = job.updates_per_rank(a)
        per_rank = updates * n * n * 4 * (3 if job.row == "petsc" else 1) + 256 * MiB
        per_rank += matrix / job.ranks * (2 if job.row == "petsc" else 1) * 2
        if job.row == "replicated":
            per_rank += matrix * (2 if a.collective == "reduce_scatter" else 1.1)
        if job.row == "petsc":  # the stash: a double and two PetscInt per element sent
            per_rank += updates * n * n / 2 * 16
        return job.ranks * per_rank + (matrix if job.row == "rma" else 0)

    def run(self, job: Job) -> Tuple[Optional[dict], str, bool]:
        """(the run's line, why it failed or was unavailable, "ok" | "failed" |
        "unavailable" | "skipped")."""
        cmd = self.command(job)
        need, avail = self.memory_needed(job), mem_available()
        if avail is not None and need > avail - self.args.memory_margin:
            return None, (f"not run: needs about {human(need)} of memory, {human(avail)} was available "
                          f"(keeping {human(self.args.memory_margin)} free)"), "skipped"
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=self.args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the mpirun this call started, and its ranks
            out, err = proc.communicate()
            return None, f"timed out after {self.args.timeout:g} s: {' '.join(cmd)}", "failed"
        lines = [json.loads(l) for l in out.splitlines() if l.startswith('{"kind": "run"')]
        if proc.returncode == UNAVAILABLE or "unavailable:" in err:
            reason = next((l for l in err.splitlines() if l.startswith("unavailable:")), err.strip()[-300:])
            return None, reason.removeprefix("unavailable: "), "unavailable"
        if proc.returncode != 0 or not lines:
            tail = " | ".join(err.strip().splitlines()[-4:])
            return None, f"exit status {proc.returncode}: {tail}", "failed"
        run = lines[-1]
        if not run["check"]["ok"]:
            c = run["check"]
            why = (f"wrong matrix: sum {c['sum']!r} (expected {c['expected_sum']!r}), weighted "
                   f"{c['weighted']!r} (expected {c['expected_weighted']!r}), {c['sample_mismatches']} of "
                   f"{c['samples']} samples differ ({c['samples_found']} found); {c['first_mismatch']}")
            return None, why, "failed"
        return run, "", "ok"


def jobs_to_run(args, rows: List[str]) -> List[Job]:
    return [Job(row, p, compute) for row in rows for p in args.ranks for compute in (True, False)]


def run_all(args, runner: Runner, jobs: List[Job]) -> Tuple[Dict[Job, Outcome], Dict[str, str]]:
    """Every job once per repeat; the order is rotated by a different amount
    at each repeat, so no job always runs first, last or after the same one.
    A --before-binary job runs right before its convergent job."""
    results = {job: Outcome() for job in jobs}
    unavailable: Dict[str, str] = {}
    current = [job for job in jobs if job.row != BEFORE]
    step = max(1, len(current) // max(1, args.repeats))
    for r in range(args.repeats):
        k = (r * step) % len(current)
        for job in current[k:] + current[:k]:
            before = replace(job, row=BEFORE)
            for each in ([before] if job.row == "convergent" and before in results else []) + [job]:
                run_one(args, runner, each, r, results, unavailable)
    return results, unavailable


def run_one(args, runner: Runner, job: Job, r: int, results: Dict[Job, Outcome], unavailable: Dict[str, str]) -> None:
    if job.row in unavailable:
        return
    t0 = time.perf_counter()
    run, why, status = runner.run(job)
    if status == "unavailable":
        unavailable[job.row] = why
        log(f"{job.row} unavailable: {why}")
        return
    if status == "skipped":
        results[job].skipped = why
        log(f"repeat {r + 1}/{args.repeats}: {job.label} {why}")
        return
    results[job].runs.append(run)
    if run is None:
        results[job].failures.append(why)
        log(f"repeat {r + 1}/{args.repeats}: {job.label} FAILED: {why}")
    else:
        log(f"repeat {r + 1}/{args.repeats}: {job.label}: T {fmt_time(max(run['total_s']))} "
            f"({time.perf_counter() - t0:.1f} s with mpirun)")


# ----------------------------------------------------------------- analysis
def slowest(run: dict, key: str) -> float:
    return max(run[key])


def median_rank(run: dict, key: str) -> float:
    return statistics.median(run[key])


@dataclass
class Cell:
    """Per (row, ranks): one value per repeat of each figure."""

    row: str
    ranks: int
    s: Dict[str, Series] = field(default_factory=dict)
    failures: List[str] = field(default_factory=list)
    runs_ok: int = 0
    runs: int = 0
    skipped: str = ""
    sums: List[float] = field(default_factory=list)  # the assembled matrices' sums
    expected_sums: List[float] = field(default_factory=list)
    binning_in_update: bool = True  # MatrixStats' binning is part of update_seconds

    def add(self, key: str, value: Optional[float]) -> None:
        self.s.setdefault(key, Series(key))
        if value is not None:
            self.s[key].times.append(value)

    def get(self, key: str) -> Series:
        return self.s.get(key, Series(key))

    @property
    def failed(self) -> bool:
        return bool(self.failures)


def analyse(args, rows: List[str], results: Dict[Job, Outcome]) -> Dict[Tuple[str, int], Cell]:
    floor = args.updates_per_rank * args.compute_ms / 1e3
    cells: Dict[Tuple[str, int], Cell] = {}
    for row in rows:
        for p in args.ranks:
            with_c, alone = results.get(Job(row, p, True)), results.get(Job(row, p, False))
            if with_c is None:
                continue
            cell = Cell(row, p)
            cell.skipped = with_c.skipped or alone.skipped
            if not with_c.runs and not alone.runs and not cell.skipped:
                continue
            cells[(row, p)] = cell
            cell.failures = with_c.failures + alone.failures
            cell.runs = len(with_c.runs) + len(alone.runs)
            cell.runs_ok = sum(1 for r in with_c.runs + alone.runs if r is not None)
            for run in (r for r in with_c.runs + alone.runs if r is not None):
                cell.sums.append(run["check"]["sum"])
                cell.expected_sums.append(run["check"]["expected_sum"])
            if cell.failed:  # a row that failed once is reported as failed, never timed
                continue
            for r in range(min(len(with_c.runs), len(alone.runs))):
                run, comm = with_c.runs[r], alone.runs[r]
                t, t_comm = slowest(run, "total_s"), slowest(comm, "total_s")
                cell.add("T", t)
                cell.add("T_comm", t_comm)
                cell.add("overhead", t - floor)
                cell.add("hidden", 1 - (t - floor) / t_comm if t_comm > 0 else None)
                cell.add("compute_measured", slowest(run, "compute_s"))
                cell.add("in_calls", max(u + c for u, c in zip(run["update_s"], run["commit_s"])))
                for key, run_of in (("", run), ("comm_", comm)):
                    update = [u for u in run_of["update_s"]]
                    cell.add(f"{key}update", statistics.median(update))
                    cell.add(f"{key}commit", median_rank(run_of, "commit_s"))
                    if row in LIBRARY_ROWS:
                        binning = median_rank(run_of, "binning_s")
                        back = median_rank(run_of, "backpressure_s")
                        stats_update = median_rank(run_of, "stats_update_s")
                        in_update = run_of.get("binning_in_update", True)  # runs of before issue 32 binned there
                        cell.add(f"{key}binning", binning)
                        cell.add(f"{key}backpressure", back)
                        cell.add(f"{key}rest", stats_update - back - (binning if in_update else 0.0))
                        cell.binning_in_update = in_update
                        cell.add(f"{key}stats_update", stats_update)
                        cell.add(f"{key}stats_commit", median_rank(run_of, "stats_commit_s"))
                cell.add("vmhwm", slowest(run, "vmhwm_bytes"))
                cell.add("vmhwm_comm", slowest(comm, "vmhwm_bytes"))
                cell.add("pss", slowest(run, "pss_bytes"))
                cell.add("local_bytes", slowest(run, "local_bytes"))
                if "replica_bytes" in run:
                    cell.add("replica_bytes", slowest(run, "replica_bytes"))
                if row in LIBRARY_ROWS:
                    cell.add("bytes_sent", median_rank(run, "bytes_sent"))
                    cell.add("elements_sent", median_rank(run, "elements_sent"))
                    cell.add("elements_local", median_rank(run, "elements_local"))
                cell.add("elements", run["elements_per_rank"])
    return cells


def ceiling(args, cells, row: str, p: int) -> Series:
    """Per repeat: T_row / T_compute, the most T_row / T_convergent can be (T_convergent >= T_compute)."""
    c = cells.get((row, p))
    floor = args.updates_per_rank * args.compute_ms / 1e3
    if c is None or c.failed or c.skipped or floor <= 0:
        return Series("")
    return series("", [t / floor for t in c.get("T").times])


def paired(cells, a: Tuple[str, int], b: Tuple[str, int], key: str) -> Series:
    """Per repeat: cells[a][key] / cells[b][key] (both from the same repeat)."""
    if a not in cells or b not in cells or cells[a].failed or cells[b].failed:
        return Series("")
    if cells[a].skipped or cells[b].skipped:
        return Series("")
    xa, xb = cells[a].get(key).times, cells[b].get(key).times
    return series("", [x / y for x, y in zip(xa, xb) if y > 0])


# ------------------------------------------------------------------- main
def parse_ranks(text: str) -> List[int]:
    try:
        ranks = sorted({int(t) for t in text.split(",") if t.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad rank list '{text}' (e.g. 1,2,4,8)")
    if not ranks or ranks[0] < 1 or ranks[-1] > 64:
        raise argparse.ArgumentTypeError("rank counts must be in 1..64")
    return ranks


def parse_rows(text: str) -> List[str]:
    rows = [t.strip() for t in text.split(",") if t.strip()]
    bad = [r for r in rows if r not in ROWS]
    if bad or not rows:
        raise argparse.ArgumentTypeError(f"rows are among {', '.join(ROWS)}")
    return [r for r in ROWS if r in rows]


def read_unavailable(binary_dir: Path) -> Dict[str, str]:
    """bench/CMakeLists.txt's reasons, by program."""
    reasons: Dict[str, str] = {}
    try:
        for line in (binary_dir / "matrix_unavailable.txt").read_text().splitlines():
            program, _, why = line.partition(": ")
            if why:
                reasons[program] = why
    except OSError:
        pass
    return reasons


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary-dir", type=Path, default=DEFAULT_BINARY_DIR,
                    help="where matrix_driver, matrix_petsc and matrix_ga are (default: build/cpp/bench)")
    ap.add_argument("--rows", type=parse_rows, default=list(ROWS),
                    help=f"rows to run (default: {','.join(ROWS)})")
    ap.add_argument("--ranks", type=parse_ranks, default=None, help="rank counts (default 1,2,4,8)")
    ap.add_argument("--size", type=int, default=None, help="N, the matrix is N x N float32 (default 16384)")
    ap.add_argument("--block", type=int, default=64, help="row and column block (default 64)")
    ap.add_argument("--updates-per-rank", type=int, default=None, help="updates each rank issues (default 16)")
    ap.add_argument("--update-fraction", type=float, default=0.04,
                    help="n / N of every update, within 0.02-0.08 (default 0.04)")
    ap.add_argument("--compute-ms", type=float, default=None,
                    help="simulated compute before each update, ms (default 100: 4x the convergent row's "
                         "communication alone per update at 8 ranks and N = 16384, measured here)")
    ap.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    ap.add_argument("--samples", type=int, default=64, help="elements checked one by one per run (default 64)")
    ap.add_argument("--progress", choices=("auto", "thread", "inline"), default="auto",
                    help="MatrixOptions::progress of the ConvergentMatrix rows (default auto)")
    ap.add_argument("--max-in-flight-mib", type=int, default=64,
                    help="MatrixOptions::max_in_flight_bytes of the ConvergentMatrix rows, MiB (default 64)")
    ap.add_argument("--collective", choices=("reduce", "reduce_scatter"), default="reduce",
                    help="the replicated row's reduction: one MPI_Reduce per owner (default) or one "
                         "MPI_Reduce_scatter (Open MPI's needs a second full copy per rank)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds one mpirun job may take before it counts as failed (default 600; --smoke 30)")
    ap.add_argument("--save-runs", type=Path, default=None,
                    help="also write every run's JSON line to this file (to render the report again later)")
    ap.add_argument("--load-runs", type=Path, default=None,
                    help="run nothing: render the report from a file --save-runs wrote (its settings are used)")
    ap.add_argument("--baseline-runs", type=Path, default=None,
                    help="a file --save-runs wrote with the code before a change, with the same workload: the "
                         "report sets it beside this run (before and after)")
    ap.add_argument("--before-binary", type=Path, default=None,
                    help="a matrix_driver built from the code before a change: its convergent row runs right "
                         "before each convergent job (row 'before' in every table, and a paired before/after "
                         "section)")
    ap.add_argument("--profile", action="store_true",
                    help="also run the convergent row with compute once at 2 ranks and at the most, rank 0 under "
                         "perf record, and report where its CPU time went (bench/matrix_profile.py)")
    ap.add_argument("--memory-margin", type=lambda t: float(t) * GiB, default=3 * GiB,
                    help="GiB of memory to leave to others: a job that would leave less is not run (default 3)")
    ap.add_argument("--experiment", choices=("assembly", "part4"), default="assembly",
                    help="assembly (default): the rows against each other, to matrix.md; part4: the convergent "
                         "row's target order under a hotspot and its strong scaling, to matrix_part4.md")
    ap.add_argument("--hot-fraction", type=float, default=0.5,
                    help="part4: the fraction of each rank's updates that are hot (default 0.5)")
    ap.add_argument("--order-ranks", type=parse_ranks, default=None,
                    help="part4: rank counts of the target-order comparison (default 4,8)")
    ap.add_argument("--strong-total-updates", type=int, default=None,
                    help="part4: the updates of all ranks together in the strong scaling (default 32; --smoke 8)")
    add_common_args(ap, NAME, "unused: nothing is written to disk but the results")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    if args.experiment == "part4" and (args.load_runs or args.save_runs or args.baseline_runs):
        ap.error("--save-runs, --load-runs and --baseline-runs are for --experiment assembly")
    if args.load_runs:
        render_saved(args)
        return
    smoke = args.smoke
    args.timeout = args.timeout or (30.0 if smoke else 600.0)
    if smoke and not any(a == "--repeats" or a.startswith("--repeats=") for a in args.argv):
        args.repeats = 2
    args.ranks = args.ranks or ([1, 2, 4] if smoke else [1, 2, 4, 8])
    args.size = args.size or (2048 if smoke else 16384)
    args.updates_per_rank = args.updates_per_rank or (4 if smoke else 16)
    args.compute_ms = args.compute_ms if args.compute_ms is not None else (10.0 if smoke else 100.0)
    if not 0.02 <= args.update_fraction <= 0.08 and not smoke:
        ap.error("--update-fraction must be within 0.02-0.08 (the paper's updates are a few % of N)")
    if args.size < 2 or args.block < 1 or args.updates_per_rank < 1 or args.compute_ms < 0:
        ap.error("--size >= 2, --block >= 1, --updates-per-rank >= 1, --compute-ms >= 0")
    if max(args.ranks) * args.updates_per_rank > 1 << 14:
        ap.error("at most 16384 updates in all, so that every sum stays exact in float32")
    if args.experiment == "part4":
        args.rows = ["convergent"]
        args.order_ranks = args.order_ranks or ([2, 4] if smoke else [4, 8])
        args.strong_total_updates = args.strong_total_updates or (8 if smoke else 32)
        if not 0 < args.hot_fraction <= 1:
            ap.error("--hot-fraction must be in (0, 1]")
        if any(args.strong_total_updates % p for p in args.ranks) or args.strong_total_updates > 1 << 14:
            ap.error("--strong-total-updates must be a multiple of every rank count, at most 16384")
    if not shutil.which("mpirun"):
        sys.exit(f"{SCRIPT}: mpirun not found; install Open MPI (Debian: openmpi-bin libopenmpi-dev)")
    binary_dir = args.binary_dir if args.binary_dir.is_absolute() else Path.cwd() / args.binary_dir
    reasons = read_unavailable(binary_dir)
    binaries: Dict[str, Path] = {}
    unavailable: Dict[str, str] = {}
    for row in args.rows:
        path = binary_dir / PROGRAM[row]
        if path.is_file():
            binaries[row] = path
        else:
            unavailable[row] = reasons.get(PROGRAM[row], f"{path} was not built (cmake --build BUILD --target "
                                                         f"{PROGRAM[row]})")
    if any(PROGRAM[r] == "matrix_driver" for r in args.rows) and not (binary_dir / "matrix_driver").is_file():
        sys.exit(f"{SCRIPT}: {binary_dir / 'matrix_driver'} not found. Build it first (it needs MPI):  make build\n"
                 "(or: cmake --build build/cpp --target matrix_driver), or name the folder with --binary-dir")
    if not binaries:
        sys.exit(f"{SCRIPT}: none of the rows asked for can run: "
                 + "; ".join(f"{r}: {w}" for r, w in unavailable.items()))
    n = max(1, round(args.update_fraction * args.size))
    widest = max(args.ranks)
    values = max(args.updates_per_rank, args.strong_total_updates or 0) * n * n * 4
    # The smallest job at the widest rank count must fit; larger ones are skipped one by one (memory_needed).
    check_resources(SCRIPT, ROOT, f"{widest} ranks of {args.size}² float32",
                    widest * (values + 256 * MiB) + args.size * args.size * 4 * 2, 0)
    load_start = os.getloadavg()
    started = time.perf_counter()
    rows = [r for r in args.rows if r in binaries]
    if args.before_binary and "convergent" in rows:
        if not args.before_binary.is_file():
            sys.exit(f"{SCRIPT}: --before-binary {args.before_binary} is no file")
        binaries[BEFORE] = args.before_binary.resolve()
        rows.append(BEFORE)
    runner = Runner(args, binaries)
    if args.experiment == "part4":
        results, _ = run_all(args, runner, part4_jobs(args))
        write_part4(args, binary_dir, results, time.perf_counter() - started, load_start, os.getloadavg())
        return
    results, refused = run_all(args, runner, jobs_to_run(args, rows))
    unavailable.update(refused)
    if args.profile and "convergent" in rows:
        args.profile_lines = profile_section(args, runner, Job)
    elapsed = time.perf_counter() - started
    load_end = os.getloadavg()
    if args.save_runs:
        save_runs(args, binary_dir, rows, results, unavailable, elapsed, load_start, load_end)
    cells = analyse(args, rows, results)
    write_report(args, binary_dir, rows, cells, unavailable, elapsed, load_start, load_end)


WORKLOAD = ("size", "block", "updates_per_rank", "update_fraction", "compute_ms", "seed", "progress",
            "max_in_flight_mib")


def load_baseline(args) -> Optional[dict]:
    """The cells and settings of --baseline-runs, which must have run this
    workload; None without it."""
    if not args.baseline_runs:
        return None
    data = json.loads(args.baseline_runs.read_text())
    differ = [k for k in WORKLOAD if data["args"][k] != getattr(args, k)]
    if differ:
        sys.exit(f"{SCRIPT}: {args.baseline_runs} ran another workload ({', '.join(differ)} differ): run both "
                 "with the same settings")
    results = {Job(j["row"], j["ranks"], j["compute"]): Outcome(j["runs"], j["failures"], j["skipped"])
               for j in data["jobs"]}
    return {"cells": analyse(args, data["rows"], results), "rows": data["rows"], "path": args.baseline_runs,
            "programs": data["binary_dir"],
            "elapsed": data["elapsed"], "load": data["load_start"] + data["load_end"],
            "ranks": sorted({j["ranks"] for j in data["jobs"]})}


SAVED = ("argv", "repeats", "smoke", "ranks", "size", "block", "updates_per_rank", "update_fraction", "compute_ms",
         "seed", "samples", "progress", "max_in_flight_mib", "collective", "timeout", "memory_margin")


def save_runs(args, binary_dir: Path, rows, results: Dict[Job, Outcome], unavailable, elapsed, load_start,
              load_end) -> None:
    data = {"args": {k: getattr(args, k) for k in SAVED}, "binary_dir": str(binary_dir), "rows": rows,
            "unavailable": unavailable, "elapsed": elapsed, "load_start": list(load_start),
            "load_end": list(load_end), "machine": machine_description(ROOT),
            "jobs": [{"row": j.row, "ranks": j.ranks, "compute": j.compute, "runs": o.runs, "failures": o.failures,
                      "skipped": o.skipped} for j, o in results.items()],
            "before_binary": str(args.before_binary or ""), "profile_lines": getattr(args, "profile_lines", [])}
    args.save_runs.parent.mkdir(parents=True, exist_ok=True)
    args.save_runs.write_text(json.dumps(data))
    log(f"wrote {args.save_runs}")


def render_saved(args) -> None:
    data = json.loads(args.load_runs.read_text())
    out, load_from, baseline = args.out, args.load_runs, args.baseline_runs
    for key, value in data["args"].items():
        setattr(args, key, value)
    args.out, args.baseline_runs = out, baseline
    args.machine = data.get("machine")
    args.before_binary = data.get("before_binary") or None
    args.profile_lines = data.get("profile_lines", [])
    args.argv = list(args.argv)
    results = {Job(j["row"], j["ranks"], j["compute"]): Outcome(j["runs"], j["failures"], j["skipped"])
               for j in data["jobs"]}
    cells = analyse(args, data["rows"], results)
    log(f"rendering the runs of {load_from}")
    write_report(args, Path(data["binary_dir"]), data["rows"], cells, data["unavailable"], data["elapsed"],
                 data["load_start"], data["load_end"])


# ------------------------------------------------------------------ report
def build_type(binary_dir: Path) -> str:
    try:
        for line in (binary_dir.parent / "CMakeCache.txt").read_text().splitlines():
            if line.startswith("CMAKE_BUILD_TYPE:"):
                return "build type " + (line.split("=", 1)[1] or "unset")
    except OSError:
        pass
    return "build type unknown"


def tool_version(cmd: List[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True).stdout
        return out.splitlines()[0].strip() if out else "unknown"
    except OSError:
        return "unknown"


def report_machine(args, binary_dir: Path, load_start, load_end) -> Dict[str, str]:
    machine = dict(getattr(args, "machine", None) or machine_description(ROOT))  # a saved run's own machine
    machine.pop("target directory", None)
    machine["MPI"] = tool_version(["mpirun", "--version"]) + " (`mpirun --oversubscribe --bind-to none`)"
    machine["PETSc"] = tool_version(["pkg-config", "--modversion", "PETSc"])
    machine["programs"] = f"{binary_dir} ({build_type(binary_dir)})"
    machine["load average (1, 5, 15 min) at the start"] = ", ".join(f"{x:.2f}" for x in load_start)
    machine["load average (1, 5, 15 min) at the end"] = ", ".join(f"{x:.2f}" for x in load_end)
    return machine


def write_report(args, binary_dir: Path, rows: List[str], cells: Dict[Tuple[str, int], Cell],
                 unavailable: Dict[str, str], elapsed: float, load_start, load_end) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    args.load_start, args.load_end = load_start, load_end
    machine = report_machine(args, binary_dir, load_start, load_end)
    n = max(1, round(args.update_fraction * args.size))
    lines = report_header("ConvergentMatrix: distributed Hessian assembly against its baselines", SCRIPT, args,
                          extra=f"N = {args.size}, n = {n}, {args.updates_per_rank} updates per rank, "
                                f"{args.compute_ms:g} ms of simulated compute before each; one `mpirun` job per "
                                "(repeat, row, rank count, with or without compute), in an order rotated at each "
                                "repeat.")
    lines += machine_lines(machine)
    lines += honesty_section(args)
    lines += workload_section(args, n)
    lines += time_section(args, rows, cells)
    lines += hidden_section(args, rows, cells)
    lines += ratio_section(args, rows, cells)
    lines += split_section(args, rows, cells)
    lines += getattr(args, "profile_lines", [])
    lines += memory_section(args, rows, cells)
    lines += check_section(args, rows, cells)
    lines += unavailable_section(unavailable)
    baseline = load_baseline(args)
    lines += targets_section(args, cells)
    lines += before_after_section(args, cells, baseline)
    lines += interleaved_section(args, cells)
    lines += discussion_section(args, cells)
    notes = [f"The run took {elapsed:.0f} s ({elapsed / 60:.1f} min)."]
    if baseline:
        notes.append(f"The run before the change ({baseline['path'].name}) took {baseline['elapsed']:.0f} s; load "
                     "averages (1, 5, 15 min) at its start and end: "
                     + ", ".join(f"{x:.2f}" for x in baseline["load"]) + ".")
    lines += ["## Notes", ""] + [f"- {x}" for x in notes] + ["", f"Plot: `{NAME}.png`.", ""]
    md = args.out / f"{NAME}.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")
    plot(args, rows, cells, baseline)


def honesty_section(args) -> List[str]:
    return [
        "## What one 2-core machine can show",
        "",
        f"Every rank runs on this one machine: at {max(args.ranks)} ranks on {os.cpu_count()} cores the ranks are "
        "oversubscribed, and so are the threads they start (ConvergentMatrix's progress thread, Open MPI's). The "
        "simulated compute is a sleep, so P ranks can \"compute\" at once on 2 cores, but everything else (binning, "
        "copying, applying bins, the replicated row's additions and reduction, PETSc's stash) competes for the same "
        "2 cores and memory bus, and messages go through shared memory, not a network. So: the times measure "
        "this machine's contention at 4 and 8 ranks, not a cluster's; weak scaling past 2 ranks is bounded by the 2 "
        "cores (P ranks' communication work is done by 2 cores: from 2 to 8 ranks the work per core grows 4x); "
        "MPI_Accumulate goes through Open MPI's shared-memory or point-to-point one-sided components rather than "
        "an RDMA network, so the rma row says nothing about a Cray's. What it does show: whether each row "
        "computes the right matrix (exact checks), how much of each row's communication the application "
        "thread can hide behind its compute when cores are free (1 and 2 ranks) and when they are not (4, 8), "
        "where the application thread's time goes (MatrixStats), and the memory each approach needs per rank.",
        "",
    ]


def workload_section(args, n: int) -> List[str]:
    floor = args.updates_per_rank * args.compute_ms / 1e3
    elements = n * (n + 1) // 2
    return [
        "## Workload and definitions",
        "",
        f"A synthetic Hessian assembly after the paper (section IV), in `bench/matrix_workload.h`, shared by "
        f"every program: a float32 {args.size} × {args.size} matrix ({human(args.size * args.size * 4)}), "
        f"{args.block} × {args.block} blocks dealt 2-D block-cyclically over the most nearly square grid "
        "(`MPI_Dims_create`: 1×1, 2×1, 2×2, 4×2). Each rank issues "
        f"{args.updates_per_rank} updates at every rank count (weak scaling, as the paper's Table II: the total "
        "grows with P). An update is the symmetric update of a Gauss-Newton Hessian, "
        f"`A[ix, ix] += G^T G`, n = {n} ({100 * args.update_fraction:g} % of N), upper triangle only "
        f"({elements:,} elements, {human(elements * 4)} of float32 values per update; resurgo's "
        "`update_symmetric`, and the same elements in every baseline). `ix` is sorted and strided, as path "
        "integration produces it: a random stride in [S/2, S], S = (N − 1)/(n − 1), and a random start where "
        "it fits, so each update spans 50–100 % of the matrix and touches every owner. The values are multiples "
        "of 2^-10 in [0, 1), hashed from (seed, rank, update, i, j), generated before the timed part. Before each "
        f"update a simulated compute step sleeps {args.compute_ms:g} ms (the core stays free, as the paper's "
        "update thread waits on its OpenMP team), the same for every row; T_compute = updates × compute = "
        f"{fmt_time(floor)} is the floor of every row's time to solution.",
        "",
        "| row | what each update does | the end |",
        "|---|---|---|",
        "| convergent | `ConvergentMatrix<float>::update_symmetric` with `MatrixBackend::kMessages`: copies the "
        "update into a bounded queue and returns; the progress thread bins it by owner and sends each bin "
        "(non-blocking; the upper triangle's values only), the owner applies it | `commit()` |",
        "| rma | the same class with `MatrixBackend::kRma`: `MPI_Accumulate(MPI_SUM)` of an indexed type per bin "
        "under an exclusive lock of the target (section IV-B) | `commit()` |",
        "| replicated | the paper's starting point (II-B3): each rank adds its updates into its own full N × N "
        "copy, laid out owner by owner so that each owner's part is its ScaLAPACK local array | "
        + ("one `MPI_Reduce(MPI_SUM)` per owner, rooted there, of its part (no packing) |"
           if args.collective == "reduce" else
           "one `MPI_Reduce_scatter(MPI_SUM)` into the owners' local arrays (no packing) |"),
        "| petsc | PETSc `MATSCALAPACK` on the same grid and blocks: `MatSetValues(ADD_VALUES)` of each "
        "upper-triangle row of the update (n calls); what another rank owns goes to PETSc's stash. PETSc here is "
        "a float64 build: values go in as double | `MatAssemblyBegin/End` |",
        "| ga | Global Arrays, regular distribution: `NGA_Strided_acc64` of each upper-triangle row | "
        "`GA_Sync()` |",
        "",
        f"Progress of the ConvergentMatrix rows: `MatrixProgress::k{args.progress.capitalize()}` (with "
        "`MPI_THREAD_MULTIPLE`, which the driver asks for, kAuto starts a progress thread); max in flight "
        f"{args.max_in_flight_mib} MiB.",
        "",
        "| figure | definition (each repeat gives one value; cells are median [min–max] over repeats) |",
        "|---|---|",
        "| T, time to solution | the slowest rank's time from the barrier before the first compute step to the "
        "return of `commit()` (assembly, reduction, `GA_Sync`) |",
        "| T_comm | T of the same row and rank count with `--compute-ms 0`, in the same repeat: the communication "
        "(and the row's own update work) alone |",
        "| hidden | 1 − (T − T_compute) / T_comm, T_compute = updates × compute (the nominal sleep): 1 when the "
        "compute hides all of it, 0 when none is hidden (T = T_compute + T_comm), below 0 when the row is "
        "slower with compute than its communication alone would add; computed per repeat |",
        "| update split | the application thread's time in the update calls, per rank (median rank): for "
        "ConvergentMatrix `MatrixStats`: backpressure (waiting for room under max in flight), binning (sorting "
        "by owner and packing bins: inside update() for rma, on the progress thread for convergent, where it "
        "is not part of the update total) and the rest (the update total less backpressure and, where it ran "
        "there, binning: checking, copying, sending, applying); for the baselines the wall time in their "
        "calls |",
        "| commit | time in `commit()` (`MatrixStats.commit_seconds`) or the baseline's end, median rank |",
        "| peak memory | `VmHWM` of `/proc/self/status` at the end, the largest rank; beside it the matrix's "
        "local array (and the replicated row's copy) |",
        "",
    ]


def t_cell(cells, row: str, p: int, key: str, fmt=fmt_time) -> str:
    cell = cells.get((row, p))
    if cell is None:
        return "—"
    if cell.failed:
        return "**failed**"
    if cell.skipped:
        return "not run (memory)"
    return cell.get(key).cell(fmt)


def time_section(args, rows, cells) -> List[str]:
    floor = args.updates_per_rank * args.compute_ms / 1e3
    head = "| row | " + " | ".join(f"{p} rk" for p in args.ranks) + " |"
    rule = "|---|" + "---:|" * len(args.ranks)
    lines = ["## Time to solution", "",
             f"With the compute step (floor T_compute = {fmt_time(floor)}):", "", head, rule]
    for row in rows:
        lines.append(f"| {LABEL[row]} | " + " | ".join(t_cell(cells, row, p, "T") for p in args.ranks) + " |")
    lines += ["", "Communication alone (`--compute-ms 0`), T_comm:", "", head, rule]
    for row in rows:
        lines.append(f"| {LABEL[row]} | " + " | ".join(t_cell(cells, row, p, "T_comm") for p in args.ranks) + " |")
    lines += ["", "T − T_compute (what the compute did not hide):", "", head, rule]
    for row in rows:
        lines.append(f"| {LABEL[row]} | " + " | ".join(t_cell(cells, row, p, "overhead") for p in args.ranks)
                     + " |")
    lines.append("")
    return lines


def hidden_section(args, rows, cells) -> List[str]:
    head = "| row | " + " | ".join(f"{p} rk" for p in args.ranks) + " |"
    rule = "|---|" + "---:|" * len(args.ranks)
    lines = ["## Update communication hidden behind compute", "",
             f"hidden = 1 − (T − T_compute) / T_comm; target (issues 13, 32) ≥ {fmt_pct(TARGET_HIDDEN)} for "
             "ConvergentMatrix.", "", head, rule]
    for row in rows:
        lines.append(f"| {LABEL[row]} | " + " | ".join(t_cell(cells, row, p, "hidden", fmt_pct) for p in args.ranks)
                     + " |")
    lines += ["", "At 1 rank nothing is communicated (every element is the rank's own), so there the figure only "
              "compares the rank's own update work with and without the sleeps between updates; the target is for "
              "2 ranks and more.", "",
              "What was not hidden, T − T_compute, against the time the application thread itself spent in the "
              "update calls and the commit (the largest sum over ranks), with compute. In this driver the compute "
              "step and the update call run one after the other on the application thread, so the update call's "
              "own work (for ConvergentMatrix: checking and copying the update; for rma: binning and "
              "accumulating) cannot overlap the compute and counts as not hidden, and neither can the work on "
              "the last update, which follows the last compute step (the commit waits for it); in the paper the "
              "update thread worked while the OpenMP team computed. What remains beyond the calls is late "
              "wake-ups from the sleeps and waiting for the slowest rank:", "", head, rule]
    for row in rows:
        lines.append(f"| {LABEL[row]} | " + " | ".join(
            "—" if (c := cells.get((row, p))) is None or c.failed or c.skipped else
            f"{fmt_time(c.get('overhead').median)} / {fmt_time(c.get('in_calls').median)}"
            for p in args.ranks) + " |")
    lines += ["", "(medians: T − T_compute / time in update calls + commit)", ""]
    lines += ["The compute steps as measured (the slowest rank's sum of its sleeps; the floor is "
              f"{fmt_time(args.updates_per_rank * args.compute_ms / 1e3)}; a sleep that wakes late on a busy "
              "core counts against hiding):", "", head, rule]
    for row in rows:
        lines.append(f"| {LABEL[row]} | " + " | ".join(t_cell(cells, row, p, "compute_measured")
                                                      for p in args.ranks) + " |")
    lines.append("")
    return lines


def ratio_section(args, rows, cells) -> List[str]:
    top = max(args.ranks)
    lines = ["## Ratios", "",
             f"At {top} ranks, each a ratio of two runs of the same repeat (then median [min–max] over repeats); "
             "above 1 ConvergentMatrix is faster:", "",
             "| ratio | with compute (T) | ceiling: T_row / T_compute | communication alone (T_comm) |",
             "|---|---:|---:|---:|"]
    for other in rows:
        if other == "convergent":
            continue
        with_c = paired(cells, (other, top), ("convergent", top), "T")
        alone = paired(cells, (other, top), ("convergent", top), "T_comm")
        lines.append(f"| {other} / convergent | {with_c.cell(fmt_ratio)} | "
                     f"{ceiling(args, cells, other, top).cell(fmt_ratio)} | {alone.cell(fmt_ratio)} |")
    lines += ["", "The ceiling: no row finishes before T_compute = updates × compute (the floor of every row), so "
              "with compute T_row / T_convergent can never exceed T_row / T_compute, whatever ConvergentMatrix "
              "does; computed per repeat from the row's own T in this run."]
    lines += ["", "Weak scaling (the same updates per rank, the total growing with P): T(P) / T(2 ranks), "
              f"target ≤ {TARGET_WEAK} from 2 to {top} ranks for ConvergentMatrix:", "",
              "| row | " + " | ".join(f"{p} / 2 rk" for p in args.ranks if p > 2) + " | T_comm: "
              + " | ".join(f"{p} / 2 rk" for p in args.ranks if p > 2) + " |",
              "|---|" + "---:|" * (2 * len([p for p in args.ranks if p > 2]))]
    if 2 in args.ranks:
        for row in rows:
            cells_t = [paired(cells, (row, p), (row, 2), "T").cell(fmt_ratio) for p in args.ranks if p > 2]
            cells_c = [paired(cells, (row, p), (row, 2), "T_comm").cell(fmt_ratio) for p in args.ranks if p > 2]
            lines.append(f"| {LABEL[row]} | " + " | ".join(cells_t + cells_c) + " |")
    lines.append("")
    return lines


def binning_cell(c: Cell, key: str) -> str:
    return c.get(key).cell() + ("" if c.binning_in_update else " †")


def split_section(args, rows, cells) -> List[str]:
    lines = ["## Where the application thread's time goes", "",
             "Per rank over the whole run, with the compute step (median rank; median [min–max] over repeats). "
             "ConvergentMatrix rows from `MatrixStats`; binning marked † ran on the progress thread, outside the "
             "update total:", "",
             "| row | ranks | update total | binning | backpressure | rest | commit | bytes sent per rank | "
             "elements sent / local per rank |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in (r for r in rows if r in LIBRARY_ROWS):
        for p in args.ranks:
            c = cells.get((row, p))
            if c is None or c.failed or c.skipped:
                continue
            sent, local = c.get("elements_sent"), c.get("elements_local")
            lines.append(f"| {row} | {p} | {c.get('stats_update').cell()} | {binning_cell(c, 'binning')} | "
                         f"{c.get('backpressure').cell()} | {c.get('rest').cell()} | {c.get('stats_commit').cell()} | "
                         f"{c.get('bytes_sent').cell(fmt_bytes)} | "
                         f"{sent.median if sent.times else 0:,.0f} / {local.median if local.times else 0:,.0f} |")
    lines += ["", "The same without compute (communication alone):", "",
              "| row | ranks | update total | binning | backpressure | rest | commit |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for row in (r for r in rows if r in LIBRARY_ROWS):
        for p in args.ranks:
            c = cells.get((row, p))
            if c is None or c.failed or c.skipped:
                continue
            lines.append(f"| {row} | {p} | {c.get('comm_stats_update').cell()} | {binning_cell(c, 'comm_binning')} | "
                         f"{c.get('comm_backpressure').cell()} | {c.get('comm_rest').cell()} | "
                         f"{c.get('comm_stats_commit').cell()} |")
    lines += ["", "Baselines (wall time in their calls: the replicated row's local additions, PETSc's "
              "`MatSetValues` into the stash, GA's accumulates; then the reduction, assembly or sync):", "",
              "| row | ranks | in update calls | at the end | without compute: update calls | at the end |",
              "|---|---:|---:|---:|---:|---:|"]
    for row in (r for r in rows if r not in LIBRARY_ROWS):
        for p in args.ranks:
            c = cells.get((row, p))
            if c is None or c.failed or c.skipped:
                continue
            lines.append(f"| {row} | {p} | {c.get('update').cell()} | {c.get('commit').cell()} | "
                         f"{c.get('comm_update').cell()} | {c.get('comm_commit').cell()} |")
    lines.append("")
    return lines


def memory_section(args, rows, cells) -> List[str]:
    n = max(1, round(args.update_fraction * args.size))
    values = args.updates_per_rank * n * n * 4
    lines = ["## Peak memory per rank", "",
             f"`VmHWM` at the end of the run with compute (the largest rank). Every rank also holds its "
             f"generated updates ({human(values)} of float32 n × n values; PETSc's row a float64 copy besides) "
             "and the MPI library's buffers, so the local array is a lower bound:", "",
             "| row | ranks | peak (VmHWM) | Pss at the end | matrix's local array | replicated copy |",
             "|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        for p in args.ranks:
            c = cells.get((row, p))
            if c is None or c.failed or c.skipped:
                continue
            lines.append(f"| {row} | {p} | {c.get('vmhwm').cell(fmt_bytes)} | {c.get('pss').cell(fmt_bytes)} | "
                         f"{c.get('local_bytes').cell(fmt_bytes)} | {c.get('replica_bytes').cell(fmt_bytes)} |")
    lines += ["", "VmHWM counts every page the process touched, shared ones included: Open MPI's one-sided window "
              "on one node is shared memory that origins write into directly, so the rma row's VmHWM counts the "
              "pages of other ranks' parts it accumulated into as well as its own, though they exist once. Pss "
              "(proportional set size, `/proc/self/smaps_rollup`, at the end, not a peak) divides each shared page "
              "among the processes that map it.", ""]
    return lines


def check_section(args, rows, cells) -> List[str]:
    lines = ["## Correctness", "",
             "Every run's assembled matrix is checked after the timing (`verify` in `bench/matrix_workload.h`): the "
             "sum of all elements and a position-weighted sum (w = 1 + (7r + 3c) mod 11, which a misplaced or "
             f"transposed element changes), reduced over ranks in float64, and {args.samples} sampled elements "
             "(three in four on some update's index set), each read where it is stored and compared with the sum "
             "of its contributions recomputed from the generator. **Tolerance: zero.** Every value is a multiple of "
             "2^-10 below 1 and an element gets at most P × updates-per-rank ≤ 2^14 contributions, so every "
             "partial sum is exact in float32 (24-bit significand) whatever the order of the additions, and so are "
             "the float64 checksums; a row that differs by one ulp anywhere it is checked computed a wrong matrix. "
             "A run that fails the check is not timed: its row is reported as failed.", "",
             "| ranks | expected sum | " + " | ".join(rows) + " |", "|---:|---:|" + "---|" * len(rows)]
    for p in args.ranks:
        expected = sorted({s for row in rows if (row, p) in cells for s in cells[(row, p)].expected_sums})
        cells_text = []
        for row in rows:
            c = cells.get((row, p))
            if c is None:
                cells_text.append("—")
                continue
            if c.skipped and not c.sums:
                cells_text.append("not run (memory)")
                continue
            got = sorted(set(c.sums))
            state = "ok" if not c.failed else "**FAILED**"
            cells_text.append(f"{state} {c.runs_ok}/{c.runs} runs" + (f", sum {got[0]:.10g}" if len(got) == 1 else
                                                                       f", sums {', '.join(f'{g:.10g}' for g in got)}"))
        lines.append(f"| {p} | {', '.join(f'{e:.10g}' for e in expected) or '—'} | " + " | ".join(cells_text) + " |")
    failed = [(row, p, c) for (row, p), c in cells.items() if c.failed]
    if failed:
        lines += ["", "Failures (each distinct reason once, with how many runs gave it):", ""]
        for row, p, c in failed:
            reasons: Dict[str, int] = {}
            for why in c.failures:
                key = why[:400]
                reasons[key] = reasons.get(key, 0) + 1
            lines += [f"- {row}, {p} ranks, {count} of {c.runs} runs: {why}" for why, count in reasons.items()]
    skipped = [(row, p, c.skipped) for (row, p), c in cells.items() if c.skipped]
    if skipped:
        lines += ["", "Not run:", ""]
        lines += [f"- {row}, {p} ranks: {why}" for row, p, why in skipped]
    lines.append("")
    return lines


def unavailable_section(unavailable: Dict[str, str]) -> List[str]:
    if not unavailable:
        return []
    lines = ["## Rows not run", ""]
    lines += [f"- **{row}** ({LABEL[row]}): {why}" for row, why in unavailable.items()]
    lines.append("")
    return lines


def targets_section(args, cells) -> List[str]:
    top = max(args.ranks)
    lines = ["## Targets (issues 13 and 32)", "", "| target | measured (median [min–max]) | |", "|---|---|---|"]
    for other in ("rma", "petsc"):
        s = paired(cells, (other, top), ("convergent", top), "T")
        ok = s.median >= TARGET_SPEEDUP if s.times else None
        lines.append(f"| ConvergentMatrix ≥ {TARGET_SPEEDUP:g}× faster than {other} at {top} ranks (T {other} / T "
                     f"convergent, with compute) | {s.cell(fmt_ratio)} | {verdict(ok)} |")
        s = paired(cells, (other, top), ("convergent", top), "T_comm")
        ok = s.median >= TARGET_SPEEDUP if s.times else None
        lines.append(f"| the same, communication alone (T_comm) | {s.cell(fmt_ratio)} | {verdict(ok)} |")
    for p in (p for p in args.ranks if p >= 2):
        c = cells.get(("convergent", p))
        s = c.get("hidden") if c and not c.failed and not c.skipped else Series("")
        ok = s.median >= TARGET_HIDDEN if s.times else None
        lines.append(f"| ≥ {fmt_pct(TARGET_HIDDEN)} of update communication hidden, ConvergentMatrix, {p} ranks | "
                     f"{s.cell(fmt_pct)} | {verdict(ok)} |")
    if 2 in args.ranks and top > 2:
        s = paired(cells, ("convergent", top), ("convergent", 2), "T")
        ok = s.median <= TARGET_WEAK if s.times else None
        lines.append(f"| weak scaling: T({top}) / T(2) ≤ {TARGET_WEAK}, ConvergentMatrix | {s.cell(fmt_ratio)} | "
                     f"{verdict(ok)} |")
    lines += ["", "Verdicts are on the medians.", ""]
    return lines


def before_after_section(args, cells, baseline: Optional[dict]) -> List[str]:
    """--baseline-runs beside this run: the figures issue 32 changed."""
    if not baseline:
        return []
    before, top = baseline["cells"], max(args.ranks)

    def cell(where, row: str, p: int, key: str, fmt=fmt_time) -> str:
        c = where.get((row, p))
        return "—" if c is None or c.failed or c.skipped or not c.get(key).times else c.get(key).cell(fmt)

    figures = [("hidden", "hidden", fmt_pct), ("T, with compute", "T", fmt_time),
               ("T − T_compute", "overhead", fmt_time), ("T_comm", "T_comm", fmt_time),
               ("in update() per rank", "stats_update", fmt_time), ("in commit() per rank", "stats_commit", fmt_time),
               ("bytes sent per rank", "bytes_sent", fmt_bytes)]
    lines = ["## Before and after (issue 32)", "",
             f"The same workload run with the code before the change (programs {baseline['programs']}; its runs "
             f"`{baseline['path'].name}`, written by this script's --save-runs), shortly before this run on the "
             "same machine. Since then ConvergentMatrix's "
             "update() returns after copying the update into a bounded queue (the progress thread bins, packs and "
             "sends it, and adds the rank's own elements), a symmetric update's bins carry one triangle, and "
             "commit() converges through a point-to-point rendezvous instead of a reduction and a barrier. Median "
             "[min–max] over each run's repeats; the two runs saw different loads from other work (Notes), so "
             "the ratios within a run compare best:", "",
             "| figure, ConvergentMatrix | ranks | before | after |", "|---|---:|---:|---:|"]
    for label, key, fmt in figures:
        for p in (p for p in args.ranks if p >= 2):
            lines.append(f"| {label} | {p} | {cell(before, 'convergent', p, key, fmt)} | "
                         f"{cell(cells, 'convergent', p, key, fmt)} |")
    ratio_before = paired(before, ("rma", top), ("convergent", top), "T")
    ratio_after = paired(cells, ("rma", top), ("convergent", top), "T")
    lines.append(f"| T rma / T convergent, with compute | {top} | {ratio_before.cell(fmt_ratio)} | "
                 f"{ratio_after.cell(fmt_ratio)} |")
    lines.append("")
    return lines


def interleaved_section(args, cells) -> List[str]:
    """--before-binary: the convergent row before and after, job beside job."""
    if not any(row == BEFORE for row, _ in cells):
        return []

    def cell(row: str, p: int, key: str, fmt=fmt_time) -> str:
        c = cells.get((row, p))
        return "—" if c is None or c.failed or c.skipped or not c.get(key).times else c.get(key).cell(fmt)

    figures = [("hidden", "hidden", fmt_pct), ("T − T_compute", "overhead", fmt_time),
               ("T_comm", "T_comm", fmt_time), ("compute steps as measured", "compute_measured", fmt_time),
               ("in update() per rank", "stats_update", fmt_time), ("in commit() per rank", "stats_commit", fmt_time),
               ("binning per rank (progress thread)", "binning", fmt_time),
               ("commit() per rank, communication alone", "comm_stats_commit", fmt_time)]
    lines = ["## Before and after, interleaved", "",
             f"The convergent row of `{getattr(args, 'before_binary', None) or '--before-binary'}` (before) ran right before each convergent job of this "
             "build (after), with the same arguments, in every repeat: both saw the same load. Median [min–max] "
             "over the repeats; the last line pairs the two jobs of each repeat (below 1: less left unhidden "
             "after):", "", "| figure, ConvergentMatrix | ranks | before | after |", "|---|---:|---:|---:|"]
    for label, key, fmt in figures:
        for p in (p for p in args.ranks if p >= 2):
            lines.append(f"| {label} | {p} | {cell(BEFORE, p, key, fmt)} | {cell('convergent', p, key, fmt)} |")
    for p in (p for p in args.ranks if p >= 2):
        s = paired(cells, ("convergent", p), (BEFORE, p), "overhead")
        lines.append(f"| (T − T_compute) after / before, same repeat | {p} | | {s.cell(fmt_ratio)} |")
    lines += ["", "hidden = 1 − (T − T_compute) / T_comm divides what was not hidden by the communication's own time: "
              "a change that makes the communication cheaper lowers T_comm as well as what is left unhidden, and "
              "the fraction moves with their ratio. Per rank count, medians before → after:", ""]
    for p in (p for p in args.ranks if p >= 2):
        b, a = cells.get((BEFORE, p)), cells.get(("convergent", p))
        if not b or not a or b.failed or a.failed or not b.get("T").times or not a.get("T").times:
            continue
        lines.append(f"- {p} ranks: T − T_compute {fmt_time(b.get('overhead').median)} → "
                     f"{fmt_time(a.get('overhead').median)}, T_comm {fmt_time(b.get('T_comm').median)} → "
                     f"{fmt_time(a.get('T_comm').median)}, hidden {fmt_pct(b.get('hidden').median)} → "
                     f"{fmt_pct(a.get('hidden').median)}.")
    lines.append("")
    return lines


def load_of(args) -> List[float]:
    return list(getattr(args, "load_start", [])) + list(getattr(args, "load_end", [])) or [0.0]


def ceiling_sentence(args, cells, ratio: Series, top: int) -> str:
    """What the floor T_compute lets the rma ratio reach with compute, against the target."""
    most = ceiling(args, cells, "rma", top)
    if not most.times:
        return ""
    floor = args.updates_per_rank * args.compute_ms / 1e3
    t_rma = cells[("rma", top)].get("T").median
    reach = ("so the target was out of reach of any ConvergentMatrix in this run" if most.median < TARGET_SPEEDUP
             else "so the target was within reach")
    return (f"The ratio can never exceed T_rma / T_compute, as no row finishes before the {fmt_time(floor)} of "
            f"compute: here rma's T was {fmt_time(t_rma)}, a ceiling of {fmt_ratio(most.median)} "
            f"[{fmt_ratio(min(most.times))}–{fmt_ratio(max(most.times))}], {reach} (2× would need rma's T to be "
            f"at least {fmt_time(TARGET_SPEEDUP * floor)}); ConvergentMatrix reached "
            f"{fmt_pct(ratio.median / most.median)} of the ceiling. The ceiling moves with rma's own T, which a "
            "loaded machine inflates: compare the ratio with its ceiling, not with another run's ratio.")


def discussion_section(args, cells) -> List[str]:
    """The targets met and missed, and what the measured figures say about why."""
    top = max(args.ranks)

    def good(row: str, p: int) -> Optional[Cell]:
        c = cells.get((row, p))
        return c if c is not None and not c.failed and not c.skipped and c.get("T").times else None

    def med(c: Cell, key: str) -> float:
        s = c.get(key)
        return s.median if s.times else 0.0

    lines = ["## What the measurements say", ""]
    floor = args.updates_per_rank * args.compute_ms / 1e3
    parts, overs, beyond, commits, copies = [], [], [], [], []
    for p in (p for p in args.ranks if p >= 2):
        c = good("convergent", p)
        if c is None:
            continue
        over, calls, comm = med(c, "overhead"), med(c, "in_calls"), med(c, "T_comm")
        rest = over - calls
        overs.append(over)
        commits.append(med(c, "stats_commit"))
        copies.append(med(c, "stats_update"))
        if comm > 0:
            beyond.append(1 - rest / comm)
        parts.append(f"at {p} ranks T − T_compute was {fmt_time(over)}, of which {fmt_time(calls)} inside update() "
                     f"and commit() (update() {fmt_time(med(c, 'stats_update'))} per rank, commit "
                     f"{fmt_time(med(c, 'stats_commit'))}), leaving {fmt_time(rest)} against a T_comm of "
                     f"{fmt_time(comm)}: apart from the application thread's own calls, "
                     f"{fmt_pct(1 - rest / comm) if comm > 0 else '—'} of the communication was hidden")
    if parts:
        flat = max(overs) <= 1.5 * min(overs)
        commit_grows = len(commits) > 1 and commits[-1] > 1.5 * commits[0]
        commits_lead = sum(commits) > sum(copies)
        mostly = "almost entirely" if min(beyond, default=0) >= TARGET_HIDDEN else "largely"
        lines += ["**Hidden communication (ConvergentMatrix).** The target counts everything the application "
                  "thread waits for. update() only checks and copies the update into the queue (the progress "
                  "thread bins, packs, sends and adds the rank's own elements while the application sleeps), so "
                  "what the application thread still waits for is the copies, and the commit: the work on the "
                  "last update, which comes after the last compute step and which no compute can hide, and the "
                  "wait for the slowest rank: " + "; ".join(parts) + ". The unhidden part is thus mostly "
                  + ("the commit" if commits_lead else "the copies")
                  + (", which grows with the rank count (P ranks' last updates share the cores)"
                     if commits_lead and commit_grows else "")
                  + f"; the transfers and the owners' additions of the other updates are {mostly} hidden. "
                  + ("The unhidden time stays about the same at every rank count while T_comm grows with it, which "
                     "is why the fraction rises with P. " if flat else "")
                  + "In the paper's arrangement, where an OpenMP team computes while the update thread calls "
                  "update(), the copies would overlap the compute too.", ""]
    c, r = good("convergent", top), good("rma", top)
    if c and r:
        ratio = paired(cells, ("rma", top), ("convergent", top), "T")
        alone = paired(cells, ("rma", top), ("convergent", top), "T_comm")
        lines += [f"**Against MPI_Accumulate (rma).** At {top} ranks rma / convergent is {fmt_ratio(ratio.median)} "
                  f"with compute and {fmt_ratio(alone.median)} for the communication alone. The rma backend "
                  f"accumulates each bin under an exclusive lock from inside update(): its application thread spent "
                  f"{fmt_time(med(r, 'in_calls'))} in update() and commit() against {fmt_time(med(c, 'in_calls'))} "
                  f"for the message backend (binning {fmt_time(med(r, 'binning'))} inside update() against "
                  f"{fmt_time(med(c, 'binning'))} on the progress thread), and none of it overlaps the compute. "
                  "With compute the ratio is "
                  f"(T_compute + rma's unhidden time) / (T_compute + convergent's): the {fmt_time(floor)} of "
                  "compute both share dilutes it, and it falls as the compute grows, so the 2× target "
                  f"{'is met' if ratio.median >= TARGET_SPEEDUP else 'is missed'} with compute at "
                  f"{args.compute_ms:g} ms per update and {'met' if alone.median >= TARGET_SPEEDUP else 'missed'} "
                  "for the communication alone. " + ceiling_sentence(args, cells, ratio, top)
                  + " Open MPI's one-sided operations here go through shared memory between processes of one "
                  "machine, not an RDMA network.", ""]
    c, e = good("convergent", top), good("petsc", top)
    if c and e:
        ratio = paired(cells, ("petsc", top), ("convergent", top), "T")
        lines += [f"**Against PETSc.** At {top} ranks petsc / convergent is {fmt_ratio(ratio.median)} with compute: "
                  f"`MatSetValues` stashes every off-rank element one at a time in the application thread "
                  f"({fmt_time(med(e, 'update'))} per rank over the run) and nothing moves until "
                  f"`MatAssemblyBegin/End`, which took {fmt_time(med(e, 'commit'))}: all of PETSc's communication "
                  "comes after the last compute step, so none of it is hidden. PETSc also moves float64 values with "
                  "two PetscInt indices per element (this PETSc is a double build).", ""]
    if 2 in args.ranks and top > 2 and good("convergent", 2) and good("convergent", top):
        weak = paired(cells, ("convergent", top), ("convergent", 2), "T")
        grew = paired(cells, ("convergent", top), ("convergent", 2), "T_comm")
        lines += [f"**Weak scaling.** ConvergentMatrix's T({top}) / T(2) is {fmt_ratio(weak.median)} while its "
                  f"communication alone grew {fmt_ratio(grew.median)}× over the same ranks (the total volume "
                  f"grows with P and {top} ranks share {os.cpu_count()} cores)"
                  + (", so the sleeps absorbed the growth. " if weak.median <= TARGET_WEAK else
                     ": more than the sleeps could absorb. ")
                  + "The baselines' T grows more with P because their communication waits for the end.", ""]
    rep = good("replicated", top)
    if rep:
        lines += [f"**Replicated.** Every rank holds a full copy ({human(med(rep, 'replica_bytes'))}) besides its "
                  f"local array, and the reduction of P copies took {fmt_time(med(rep, 'commit'))} at {top} ranks: "
                  "the volume each rank reduces is the whole matrix at every P, so it grows with P on a fixed "
                  "machine, which is why the paper left this approach.", ""]
    cores = os.cpu_count() or 1
    lines += ["**This machine.** " + (f"The run shared the {cores} cores with other work (the load averages above "
              f"exceed {cores}), which widens the min–max at the higher rank counts. " if max(load_of(args)) > cores
              else "") + "Above 2 ranks the absolute times are this machine's contention, not a cluster's; the "
              "ratios within a repeat and the checks are the figures to trust.", ""]
    return lines


# ------------------------------------------------------------------- plot
def plot(args, rows, cells, baseline: Optional[dict] = None) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(15, 10))
    names = [f"{p} rk" for p in args.ranks]
    floor = args.updates_per_rank * args.compute_ms / 1e3

    def groups(key: str, relabel: bool = True):
        out = []
        for p, name in zip(args.ranks, names):
            entry = {}
            for row in rows:
                c = cells.get((row, p))
                if c is not None and not c.failed and c.get(key).times:
                    s = c.get(key)
                    s.label = LABEL[row]
                    entry[row] = s
            out.append((name, entry))
        return out

    ax = axes[0][0]
    grouped_bars(ax, groups("T"), keys=rows, log_scale=False)
    ax.axhline(floor, color="k", linewidth=0.8, linestyle="--", label=f"T_compute = {fmt_time(floor)}")
    ax.set_ylabel("time to solution T (s)")
    ax.set_title(f"T with {args.compute_ms:g} ms compute per update (weak scaling)")
    ax.legend(fontsize=7)

    ax = axes[0][1]
    grouped_bars(ax, groups("T_comm"), keys=rows)
    ax.set_ylabel("T_comm (s), --compute-ms 0")
    ax.set_title("communication alone")
    ax.legend(fontsize=7)

    ax = axes[1][0]
    hidden = groups("hidden")
    if baseline:  # the same rows before the change, beside
        for (_, entry), p in zip(hidden, args.ranks):
            for row in rows:
                c = baseline["cells"].get((row, p))
                if c is not None and not c.failed and c.get("hidden").times:
                    s = c.get("hidden")
                    s.label = f"{LABEL[row]}, before issue 32"
                    entry[f"{row} before"] = s
    grouped_bars(ax, hidden, log_scale=False, keys=rows + [f"{row} before" for row in rows] if baseline else rows,
                 value=lambda s: (s.median * 100, s.min * 100, s.max * 100))
    ax.axhline(TARGET_HIDDEN * 100, color="k", linewidth=0.8, linestyle="--", label="target 90 %")
    low, high = ax.get_ylim()
    ax.set_ylim(max(low, -150), max(high, 105))  # bars below are cut: the table has their values
    ax.set_ylabel("hidden = 1 − (T − T_compute) / T_comm (%)")
    ax.set_title("update communication hidden behind compute")
    ax.legend(fontsize=7)

    ax = axes[1][1]
    grouped_bars(ax, groups("vmhwm"), keys=rows, value=lambda s: (s.median / MiB, s.min / MiB, s.max / MiB))
    ax.set_ylabel("peak memory per rank, VmHWM (MiB)")
    ax.set_title("peak memory (largest rank)")
    ax.legend(fontsize=7)

    n = max(1, round(args.update_fraction * args.size))
    title = (f"ConvergentMatrix assembly, N = {args.size}, n = {n}, {args.updates_per_rank} updates/rank, "
             f"median [min–max] of {args.repeats}")
    fig.suptitle(("SMOKE RUN, not a result — " if args.smoke else "") + title)
    fig.tight_layout()
    png = args.out / f"{NAME}.png"
    fig.savefig(png, dpi=100)
    log(f"wrote {png}")


# ------------------------------------------------------------ issue 32 part 4
ORDERS = ("fixed", "random")


def part4_jobs(args) -> List[Job]:
    """The target order under the hotspot pattern (communication alone, each
    order at each rank count), then strong scaling: the same total of updates
    spread over each rank count, with and without the compute step."""
    order = [Job("convergent", p, False, order=o, hot=args.hot_fraction) for p in args.order_ranks for o in ORDERS]
    strong = [Job("convergent", p, c, updates=args.strong_total_updates // p) for p in args.ranks
              for c in (True, False)]
    return order + strong


def per_repeat(outcome: Outcome, key: str, reduce=slowest) -> List[Optional[float]]:
    """One value per repeat (None where that run failed)."""
    return [None if run is None else reduce(run, key) for run in outcome.runs]


def ratio_series(over: List[Optional[float]], under: List[Optional[float]]) -> Series:
    """Per repeat over / under, both runs of the same repeat."""
    return series("", [a / b for a, b in zip(over, under) if a is not None and b]) if over and under else Series("")


def checks_cell(outcome: Outcome) -> str:
    ok = sum(1 for run in outcome.runs if run is not None)
    cell = f"ok {ok}/{len(outcome.runs)}"
    return cell + (f"; {outcome.failures[0]}" if outcome.failures else "")


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def oversubscribed(p: int) -> str:
    cores = usable_cores()
    return f"{p} ranks on {cores} cores: oversubscribed" if p > cores else f"{p} of {cores} cores"


def order_section(args, results: Dict[Job, Outcome]) -> Tuple[List[str], Dict[int, Series]]:
    lines = [
        "## Random against fixed target order under a hotspot",
        "",
        f"The workload of `matrix.md` with the hotspot pattern (`--hot-fraction {args.hot_fraction:g}`, "
        "`bench/matrix_workload.h`): that fraction of each rank's updates, spread evenly over its sequence, are "
        "hot: their n indices fill whole blocks, the blocks 0, L, 2L, … with L the least common multiple of the "
        "grid's dimensions, so every element of a hot update lies on grid process (0, 0): rank 0 receives all "
        "of them, on top of its share of the other updates. `MatrixOptions::target_order` is "
        "`kRandom` (the default: each rank visits the owners of an update in its own random order, the paper's "
        "section III-C2) or `kFixed` (every rank visits them in rank order, so every rank starts each update "
        "with rank 0, the hot owner). Communication alone (`--compute-ms 0`, "
        f"{args.updates_per_rank} updates per rank): with the compute step the sleeps would hide the "
        "difference. T = time to commit: the slowest rank's time from the barrier to the return of `commit()`; "
        "ratio = T(fixed) / T(random) of the two runs of one repeat, above 1 when random is faster.",
        "",
        "| ranks | T fixed | T random | commit fixed (slowest rank) | commit random | T fixed / T random | "
        "checks fixed | checks random |",
        "|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    ratios: Dict[int, Series] = {}
    for p in args.order_ranks:
        out = {o: results[Job("convergent", p, False, order=o, hot=args.hot_fraction)] for o in ORDERS}
        t = {o: per_repeat(out[o], "total_s") for o in ORDERS}
        commit = {o: per_repeat(out[o], "commit_s") for o in ORDERS}
        ratios[p] = ratio_series(t["fixed"], t["random"])
        lines.append(f"| {p} | " + " | ".join(series("", t[o]).cell() for o in ORDERS) + " | "
                     + " | ".join(series("", commit[o]).cell() for o in ORDERS) + f" | "
                     f"{ratios[p].cell(fmt_ratio)} | " + " | ".join(checks_cell(out[o]) for o in ORDERS) + " |")
    better = [p for p, r in ratios.items() if r.times and r.min > 1]
    lines += [
        "",
        "Target (issue 32): random order measurably better than fixed under the hotspot pattern, taken here as "
        "every repeat's ratio above 1 (min > 1): "
        + (f"met at {', '.join(map(str, better))} ranks" if better else "not met at any rank count measured")
        + (f", not at {', '.join(str(p) for p in ratios if p not in better)} ranks"
           if better and len(better) < len(ratios) else "") + ".",
        "",
    ]
    if len(better) < len(ratios):
        lines += [
            "Why the order can matter little on one node: an update's bins are posted as non-blocking sends one "
            "after the other within microseconds (the cap on bytes in flight, "
            f"{args.max_in_flight_mib} MiB, holds every bin of several updates), and on one machine they go "
            "through shared memory, which the receivers drain as their progress threads get a core; the paper "
            "met its hotspots as network congestion on a Cray XC30 when every rank sent to the same target at "
            "once. The hot owner has the same bins to add whatever order they were posted in.",
            "",
        ]
    return lines, ratios


def strong_section(args, results: Dict[Job, Outcome]) -> Tuple[List[str], Dict[str, Dict[int, Series]]]:
    total = args.strong_total_updates
    base = min(args.ranks)
    lines = [
        "## Strong scaling (the paper's Table I)",
        "",
        f"A fixed total of {total} updates (the workload of `matrix.md`, uniform pattern, random order) dealt "
        f"evenly over P ranks: {total} / P per rank. With the compute step ({args.compute_ms:g} ms of sleep "
        "before each update) the floor is T_compute(P) = (total / P) × compute; without it "
        "(`--compute-ms 0`) T is the communication and the ranks' own update work alone. Speedup S(P) = "
        f"T({base}) / T(P) and the paper's relative efficiency E_R(P) = T({base}) × {base} / (T(P) × P), each from "
        f"the runs of one repeat. Above {usable_cores()} "
        "ranks the ranks are oversubscribed on this machine's cores: the sleeps leave the cores free, but "
        "binning, copying, sending and adding share them, so the communication alone cannot speed up past the "
        "core count.",
        "",
        "| P | cores | updates per rank | floor T_compute | T (with compute) | S | E_R | T_comm (no compute) | "
        "S_comm | E_R comm | checks |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    figures: Dict[str, Dict[int, Series]] = {"T": {}, "T_comm": {}, "S": {}, "S_comm": {}}
    outcome = {(p, c): results[Job("convergent", p, c, updates=total // p)] for p in args.ranks for c in (True, False)}
    for p in args.ranks:
        cells = []
        for compute, key in ((True, ""), (False, "_comm")):
            t, t_base = per_repeat(outcome[(p, compute)], "total_s"), per_repeat(outcome[(base, compute)], "total_s")
            speedup = ratio_series(t_base, t)
            efficiency = series("", [x * base / p for x in speedup.times])
            figures["T" + key][p], figures["S" + key][p] = series("", t), speedup
            cells += [series("", t).cell(), speedup.cell(fmt_ratio), efficiency.cell(fmt_pct)]
        floor = total // p * args.compute_ms / 1e3
        checks = checks_cell(outcome[(p, True)]) + ", " + checks_cell(outcome[(p, False)])
        lines.append(f"| {p} | {oversubscribed(p)} | {total // p} | {fmt_time(floor)} | {' | '.join(cells[:3])} | "
                     f"{' | '.join(cells[3:])} | {checks} |")
    lines += [
        "",
        "The paper's T included a thread team computing on every core; here the compute is a sleep, so the "
        "with-compute column scales with the floor as long as the communication hides behind the sleeps, "
        f"and the no-compute column shows what the {usable_cores()} cores do with the same total communication "
        "split over more ranks. At 1 rank nothing is communicated (every element is the rank's own), so S_comm "
        "compares the communication of P ranks with one rank adding everything itself.",
        "",
    ]
    return lines, figures


def write_part4(args, binary_dir: Path, results: Dict[Job, Outcome], elapsed: float, load_start,
                load_end) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    n = max(1, round(args.update_fraction * args.size))
    lines = report_header("ConvergentMatrix: target order under a hotspot, and strong scaling (issue 32 part 4)",
                          SCRIPT, args,
                          extra=f"N = {args.size}, n = {n}, blocks {args.block} × {args.block}, the most nearly "
                                "square grid; one `mpirun` job per (repeat, experiment, rank count), in an order "
                                "rotated at each repeat. Every run's matrix is checked exactly as in `matrix.md` "
                                "(zero tolerance); a failed check is reported, never timed.")
    lines += machine_lines(report_machine(args, binary_dir, load_start, load_end))
    order_lines, ratios = order_section(args, results)
    strong_lines, figures = strong_section(args, results)
    lines += order_lines + strong_lines
    notes = [f"The run took {elapsed:.0f} s ({elapsed / 60:.1f} min)."]
    if max(load_start[0], load_end[0]) > usable_cores():
        notes.append(f"The 1-minute load average ({load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end) "
                     f"exceeded the {usable_cores()} cores: other work shared them, which widens the min–max; the "
                     "ratios within a repeat are the figures to trust.")
    lines += ["## Notes", ""] + [f"- {x}" for x in notes] + ["", f"Plot: `{NAME}_part4.png`.", ""]
    md = args.out / f"{NAME}_part4.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")
    plot_part4(args, results, ratios, figures)


def plot_part4(args, results: Dict[Job, Outcome], ratios: Dict[int, Series],
               figures: Dict[str, Dict[int, Series]]) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(14, 5.5))
    ax = axes[0]
    groups = []
    for p in args.order_ranks:
        entry = {}
        for o in ORDERS:
            s = series(f"{o} order", per_repeat(results[Job("convergent", p, False, order=o, hot=args.hot_fraction)],
                                                "total_s"))
            if s.times:
                entry[o] = s
        groups.append((f"{p} rk (fixed / random {fmt_ratio(ratios[p].median) if ratios[p].times else '—'})", entry))
    grouped_bars(ax, groups, keys=list(ORDERS), log_scale=False)
    ax.set_ylabel("time to commit T (s), communication alone")
    ax.set_title(f"target order, {args.hot_fraction:g} of the updates hot (all on rank 0)")
    ax.legend(fontsize=8)

    ax = axes[1]
    for key, label in (("T", f"with {args.compute_ms:g} ms compute per update"), ("T_comm", "communication alone")):
        ps = [p for p in args.ranks if figures[key][p].times]
        s = [figures[key][p] for p in ps]
        ax.errorbar(ps, [x.median for x in s], yerr=[[x.median - x.min for x in s], [x.max - x.median for x in s]],
                    marker="o", capsize=3, label=label)
        if ps:
            ax.plot(ps, [s[0].median * ps[0] / p for p in ps], linestyle=":", color="grey")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(args.ranks, [str(p) for p in args.ranks])
    ax.set_xlabel("ranks P (oversubscribed past the core count)")
    ax.set_ylabel("T (s)")
    ax.set_title(f"strong scaling: {args.strong_total_updates} updates in all (dotted: ideal)")
    ax.legend(fontsize=8)
    fig.suptitle(plot_title(f"ConvergentMatrix, issue 32 part 4, N = {args.size}", args))
    fig.tight_layout()
    png = args.out / f"{NAME}_part4.png"
    fig.savefig(png, dpi=100)
    log(f"wrote {png}")


if __name__ == "__main__":
    main()
