"""Automatic checkpointing benchmark (issue 11): the two mini-apps of
examples/auto/ run in every mode of resurgo::autockpt, as in Tables 1 and 3
of the OPS paper. Writes results/auto.md and results/auto.png; with --mpi,
the paper's multi-process figures instead (issue 31 part 6): results/auto_mpi.md and .png.

    .venv/bin/python bench/auto.py                          # both apps, 5 repeats
    .venv/bin/python bench/auto.py --apps tealeaf --size tealeaf=512 --steps tealeaf=6
    .venv/bin/python bench/auto.py --smoke --repeats 1 --size 64 --steps tealeaf=5,cloverleaf=40
    .venv/bin/python bench/auto.py --mpi                    # 1, 2, 4, 8 ranks, 5 repeats
    .venv/bin/python bench/auto.py --mpi --smoke --repeats 1 --mpi-ranks 1,4

The programs are auto_tealeaf and auto_cloverleaf (`cmake --build BUILD
--target auto_tealeaf auto_cloverleaf`); their command line and RESULT line
are those of examples/auto/harness.h. Rows, one process each:

  plain            --mode none: no store, no runtime (the baseline)
  no information   --mode noinfo --synchronous
  init phase       --mode initphase --synchronous
  + fast-forward   --mode fastfw --synchronous
  datlist          --mode datlist --synchronous
  manual trigger   --mode trigger --synchronous
  thread offload   --mode trigger (the store's background pipeline)
  in-memory        --mode trigger --in-memory

--synchronous makes the store write the checkpoint before the runtime lets
the application go on: the blocking write of the paper's rows.

Each checkpointing row makes three runs per repeat, each in a fresh store
directory under --dir: the measured run (checkpoints requested in step K
and every E steps after it, run to the end), a run killed at the top of step K + 1 once that
checkpoint is durable (--kill-step; in-memory: --term-step, since SIGKILL
would lose a checkpoint held only in memory), and the same command again
without the kill, which restores from it. Every run must end with the plain
run's checksum; the script stops otherwise.

--mpi runs examples/auto/tealeaf_mpi (`--target auto_tealeaf_mpi`) under
`mpirun --oversubscribe` on --mpi-ranks ranks, each with the same
--mpi-block, through each route of its --checkpoints (L2 synchronous, thread
offload, in-memory) and without checkpoints; it reports checkpoint blocking
in iterations and seconds, saved bytes and per-rank files against ranks, and
the 4-rank job's blocking over the single process's.
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
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    HERE, Series, add_common_args, finish_common_args, fmt_time, human, log, machine_description,
    machine_lines, plot_title, pyplot, report_header,
)
from mpi import mpi_version  # noqa: E402

REPO = HERE.parent
APPS = ("tealeaf", "cloverleaf")
# Runs of 2-3 s each on the 2-core development machine (the apps' defaults).
DEFAULT_SIZE = {"tealeaf": 256, "cloverleaf": 256}
DEFAULT_STEPS = {"tealeaf": 10, "cloverleaf": 150}
STORE = "auto"
FLOOR_REPEATS = 7

TARGET_SAVED_VS_HAND = 1.05  # automatic saved state / hand-minimal state
TARGET_BLOCKING_ITERATIONS = 0.1  # checkpoint blocking, in iterations
TARGET_RESTORE_ITERATIONS = 0.1  # restore (read + replay) beyond the read floor, in iterations


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    mode: str
    flags: Sequence[str] = ()
    death: str = "--kill-step"  # how the interrupted run dies

    @property
    def checkpoints(self) -> bool:
        return self.mode != "none"


ROWS: Dict[str, Row] = {row.key: row for row in (
    Row("plain", "plain (no runtime)", "none"),
    Row("noinfo", "no information", "noinfo", ("--synchronous",)),
    Row("initphase", "init phase", "initphase", ("--synchronous",)),
    Row("fastfw", "+ fast-forward", "fastfw", ("--synchronous",)),
    Row("datlist", "datlist", "datlist", ("--synchronous",)),
    Row("trigger", "manual trigger", "trigger", ("--synchronous",)),
    Row("offload", "thread offload", "trigger"),
    Row("inmemory", "in-memory", "trigger", ("--in-memory",), "--term-step"),
)}


# ------------------------------------------------------------ running a program
class RunFailed(SystemExit):
    """A mini-app did not do what harness.h promises: the command and its output."""

    def __init__(self, why: str, command: List[str], done: Optional[subprocess.CompletedProcess] = None):
        text = f"auto.py: {why}\n  command: {' '.join(command)}"
        if done is not None:
            text += f"\n  exit status: {done.returncode}\n  stdout:\n{done.stdout}\n  stderr:\n{done.stderr}"
        super().__init__(text)


def parse_result(stdout: str) -> Optional[Dict[str, Any]]:
    """The JSON object of the last 'RESULT ' line, or None."""
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][len("RESULT "):]) if lines else None


def run(command: List[str]) -> tuple:
    """(completed process, wall seconds of the whole process)."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    return done, time.perf_counter() - started


def run_to_end(command: List[str]) -> tuple:
    """(RESULT object, wall seconds) of a run that must finish."""
    done, wall = run(command)
    result = parse_result(done.stdout)
    if done.returncode != 0 or result is None:
        raise RunFailed("the run did not finish with a RESULT line", command, done)
    return result, wall


def run_to_death(command: List[str], signum: int) -> None:
    done, _ = run(command)
    if done.returncode != -signum or parse_result(done.stdout) is not None:
        raise RunFailed(f"the run did not die by {signal.Signals(signum).name} without a RESULT line",
                        command, done)


# ------------------------------------------------------------ one app, one row
@dataclass
class AppSetup:
    app: str
    binary: Path
    size: int
    steps: int
    checkpoint_step: int
    checkpoint_every: int  # the later checkpoints: the steady state after the first
    root: Path  # the store directories of this app's runs go under it

    def command(self, row: Row, directory: Path, *extra: str) -> List[str]:
        return [str(self.binary), "--mode", row.mode, "--size", str(self.size), "--steps", str(self.steps),
                "--store", STORE, "--dir", str(directory), *row.flags, *extra]

    def measured_command(self, row: Row, directory: Path) -> List[str]:
        if not row.checkpoints:
            return self.command(row, directory)
        return self.command(row, directory, "--checkpoint-step", str(self.checkpoint_step),
                            "--checkpoint-every", str(self.checkpoint_every))

    def killed_command(self, row: Row, directory: Path) -> List[str]:
        return self.measured_command(row, directory) + [row.death, str(self.checkpoint_step + 1)]


@dataclass
class Repeat:
    """What one repeat of one row measured."""

    wall: float
    result: Dict[str, Any]  # the measured run's RESULT
    restored: Optional[Dict[str, Any]] = None  # the restarted run's RESULT
    version_file_bytes: int = 0
    read_floor_seconds: float = 0.0  # page-cache read of the restored version's file


def version_files(store_dir: Path, version: int) -> List[Path]:
    return sorted(store_dir.glob(f"v{version:010d}.*.rsg"))


def read_floor(files: List[Path]) -> float:
    """Median time to open and read the files whole into an already-touched
    buffer, through the page cache (their pages are there: just written)."""
    buffer = bytearray(max(f.stat().st_size for f in files))
    view = memoryview(buffer)
    times = []
    for _ in range(FLOOR_REPEATS):
        started = time.perf_counter()
        for path in files:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.readv(fd, [view[:path.stat().st_size]])
            finally:
                os.close(fd)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def fresh(directory: Path) -> Path:
    shutil.rmtree(directory, ignore_errors=True)
    return directory


def measure_row(setup: AppSetup, row: Row) -> Repeat:
    directory = setup.root / row.key
    command = setup.measured_command(row, fresh(directory))
    result, wall = run_to_end(command)
    repeat = Repeat(wall, result)
    if not row.checkpoints:
        return repeat
    if "checkpoint" not in result or "restore" in result:
        raise RunFailed("the measured run should take checkpoints and restore nothing", command)
    if len(result.get("checkpoints", [])) < 2:
        raise RunFailed("the measured run should take a first checkpoint and later ones", command)
    killed = setup.killed_command(row, fresh(directory))
    run_to_death(killed, signal.SIGKILL if row.death == "--kill-step" else signal.SIGTERM)
    # The floor is read before the restarted run, whose own later checkpoints
    # may evict the version it restored.
    newest = max((int(f.name[1:11]) for f in (directory / STORE).glob("v*.rsg")), default=None)
    if newest is None:
        raise RunFailed(f"the killed run left no version under {directory / STORE}", killed)
    files = version_files(directory / STORE, newest)
    repeat.version_file_bytes = sum(f.stat().st_size for f in files)
    repeat.read_floor_seconds = read_floor(files)
    repeat.restored, _ = run_to_end(command)
    if repeat.restored.get("restore", {}).get("version") != newest:
        raise RunFailed(f"after the run killed by `{' '.join(killed)}`, the same run did not restore version "
                        f"{newest}, the newest it left", command)
    shutil.rmtree(directory, ignore_errors=True)
    return repeat


# ------------------------------------------------------------ the figures of a row
def saved_bytes(result: Dict[str, Any]) -> int:
    c = result["checkpoint"]
    return c["dataset_bytes"] + c["query_log_bytes"] + c["payload_bytes"]


def restore_seconds(restored: Dict[str, Any]) -> float:
    r = restored["restore"]
    return r["read_seconds"] + r["replay_seconds"]


@dataclass
class RowResult:
    row: Row
    repeats: List[Repeat] = field(default_factory=list)

    def series(self, value: Callable[[Repeat], float]) -> Series:
        return Series(self.row.label, times=[value(r) for r in self.repeats])

    def saved_vs_hand(self) -> Series:
        return self.series(lambda r: saved_bytes(r.result) / r.result["hand_minimal_bytes"])

    def saved_vs_all(self) -> Series:
        return self.series(lambda r: saved_bytes(r.result) / r.result["all_dataset_bytes"])

    def blocking_iterations(self) -> Series:
        """The first checkpoint of the run: it also makes the store's buffer."""
        return self.series(lambda r: r.result["checkpoints"][0]["blocking_seconds"] / r.result["iteration_seconds"])

    def later_blocking_iterations(self) -> Series:
        """The median of the run's later checkpoints: the steady state."""
        return self.series(lambda r: statistics.median(c["blocking_seconds"] for c in r.result["checkpoints"][1:])
                           / r.result["iteration_seconds"])

    def restore_iterations(self) -> Series:
        return self.series(lambda r: restore_seconds(r.restored) / r.restored["iteration_seconds"])

    def restore_beyond_floor(self) -> Series:
        """(read + replay - read floor) in iterations of the restarted run: the target's measure."""
        return self.series(lambda r: (restore_seconds(r.restored) - r.read_floor_seconds)
                           / r.restored["iteration_seconds"])

    def read_vs_floor(self) -> Series:
        return self.series(lambda r: r.restored["restore"]["read_seconds"] / r.read_floor_seconds)

    def wall_vs(self, plain: "RowResult") -> Series:
        """Whole run time over the plain run's of the same repeat."""
        return Series(self.row.label, times=[r.wall / p.wall for r, p in zip(self.repeats, plain.repeats)])


def ratio_cell(series: Series, digits: int = 3) -> str:
    return series.cell(lambda v: f"{v:.{digits}f}")


def percent_cell(series: Series) -> str:
    return series.cell(lambda v: f"{100 * v:.1f} %")


def bytes_cell(series: Series) -> str:
    return series.cell(lambda v: f"{v:,.0f} B")


def verdict(series: Series, target: float) -> str:
    return "met" if series.median <= target else "not met"


def verdicts(result: RowResult) -> str:
    return (f"size {verdict(result.saved_vs_hand(), TARGET_SAVED_VS_HAND)}; "
            f"blocking first {verdict(result.blocking_iterations(), TARGET_BLOCKING_ITERATIONS)}, "
            f"later {verdict(result.later_blocking_iterations(), TARGET_BLOCKING_ITERATIONS)}; "
            f"restore {verdict(result.restore_beyond_floor(), TARGET_RESTORE_ITERATIONS)}")


# ------------------------------------------------------------ the report
def main_table(results: Dict[str, RowResult]) -> List[str]:
    plain = results["plain"]
    lines = ["| row | saved / hand-minimal | saved / all datasets | first checkpoint blocking (iterations) | "
             "later checkpoints blocking (iterations) | run time / plain | restore read + replay (iterations) | restore beyond the read floor "
             "(iterations) | restore read / read floor | targets |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for key, r in results.items():
        if key == "plain":
            lines.append(f"| {r.row.label} | — | — | — | — | {ratio_cell(r.wall_vs(plain))} | — | — | — | — |")
            continue
        lines.append(f"| {r.row.label} | {ratio_cell(r.saved_vs_hand())} | {percent_cell(r.saved_vs_all())} | "
                     f"{ratio_cell(r.blocking_iterations())} | {ratio_cell(r.later_blocking_iterations())} | "
                     f"{ratio_cell(r.wall_vs(plain))} | "
                     f"{ratio_cell(r.restore_iterations())} | {ratio_cell(r.restore_beyond_floor())} | "
                     f"{ratio_cell(r.read_vs_floor(), 2)} | {verdicts(r)} |")
    return lines + [""]


def absolute_table(results: Dict[str, RowResult]) -> List[str]:
    lines = ["| row | run time | iteration (measured run) | saved bytes | first checkpoint blocking | "
             "version file | restore read | read floor (page cache) | restore replay | "
             "iteration (restarted run) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for key, r in results.items():
        cells = [r.series(lambda x: x.wall).cell(), r.series(lambda x: x.result["iteration_seconds"]).cell()]
        if key == "plain":
            cells += ["—"] * 7
        else:
            cells += [bytes_cell(r.series(lambda x: saved_bytes(x.result))),
                      r.series(lambda x: x.result["checkpoints"][0]["blocking_seconds"]).cell(),
                      bytes_cell(r.series(lambda x: x.version_file_bytes)),
                      r.series(lambda x: x.restored["restore"]["read_seconds"]).cell(),
                      r.series(lambda x: x.read_floor_seconds).cell(),
                      r.series(lambda x: x.restored["restore"]["replay_seconds"]).cell(),
                      r.series(lambda x: x.restored["iteration_seconds"]).cell()]
        lines.append(f"| {r.row.label} | " + " | ".join(cells) + " |")
    return lines + [""]


def what_was_saved(results: Dict[str, RowResult]) -> List[str]:
    """Where each row checkpointed and what it saved (first repeat; the same in every repeat
    unless said)."""
    lines = ["| row | location (loop index) | datasets saved whole | halo rings saved | region loops | "
             "query log | payload | staged | restore |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, r in results.items():
        if key == "plain":
            continue
        c, rs = r.repeats[0].result["checkpoint"], r.repeats[0].restored["restore"]
        varies = len({json.dumps(x.result["checkpoint"]["saved"]) for x in r.repeats}) > 1
        how = "fast-forward" if rs["fast_forward"] else f"replay of {rs['skipped_loops']} loops"
        saved = (", ".join(c["saved"]) or "—") + (" (varies)" if varies else "")
        lines.append(f"| {r.row.label} | `{c['location']}` ({c['loop_index']}) | "
                     f"{saved} | {', '.join(c['halos']) or '—'} | "
                     f"{c['region_loops']}{' (timed out)' if c['timed_out'] else ''} | {c['query_log_bytes']} B | "
                     f"{c['payload_bytes']} B | {human(c['staged_bytes'])} | {how} |")
    return lines + [""]


def app_section(setup: AppSetup, results: Dict[str, RowResult]) -> List[str]:
    first = results["plain"].repeats[0].result
    everything, minimal = first["all_dataset_bytes"], first["hand_minimal_bytes"]
    row = ROWS["initphase"]
    lines = [f"## {setup.app}", "",
             f"`--size {setup.size} --steps {setup.steps}`, checkpoints requested in step "
             f"{setup.checkpoint_step} and every {setup.checkpoint_every} steps after it; all datasets {everything:,} B, hand-minimal "
             f"{minimal:,} B ({100 * minimal / everything:.1f} %). "
             f"Checksum of every run: `{first['checksum']}`.", "",
             "Commands (init phase row; the other rows change `--mode` and the flags as listed above):", "",
             "```",
             "measured:  " + " ".join(setup.measured_command(row, Path("DIR"))),
             "killed:    " + " ".join(setup.killed_command(row, Path("DIR"))),
             "restarted: " + " ".join(setup.measured_command(row, Path("DIR"))),
             "```", "",
             "### Ratios", ""]
    lines += main_table(results)
    lines += ["### Absolute times and sizes", ""] + absolute_table(results)
    lines += ["### What each row saved (first repeat)", ""] + what_was_saved(results)
    return lines


def target_summary(by_app: Dict[str, Dict[str, RowResult]]) -> List[str]:
    lines = ["| app | row | saved / hand-minimal ≤ 1.05 | first checkpoint blocking ≤ 0.1 iteration | "
             "later checkpoints blocking ≤ 0.1 iteration | restore ≤ 0.1 iteration + read floor |",
             "|---|---|---|---|---|---|"]
    for app, results in by_app.items():
        for key, r in results.items():
            if key == "plain":
                continue
            lines.append(f"| {app} | {r.row.label} | "
                         f"{verdict(r.saved_vs_hand(), TARGET_SAVED_VS_HAND)} ({r.saved_vs_hand().median:.3f}) | "
                         f"{verdict(r.blocking_iterations(), TARGET_BLOCKING_ITERATIONS)} "
                         f"({r.blocking_iterations().median:.3f}) | "
                         f"{verdict(r.later_blocking_iterations(), TARGET_BLOCKING_ITERATIONS)} "
                         f"({r.later_blocking_iterations().median:.3f}) | "
                         f"{verdict(r.restore_beyond_floor(), TARGET_RESTORE_ITERATIONS)} "
                         f"({r.restore_beyond_floor().median:.3f}) |")
    return lines + [""]


def build_lines(args) -> List[str]:
    """The machine table's rows about what was measured and how busy the machine was."""
    cache = args.build / "CMakeCache.txt"
    build_type = "unknown"
    if cache.exists():
        for line in cache.read_text().splitlines():
            if line.startswith("CMAKE_BUILD_TYPE:"):
                build_type = line.split("=", 1)[1] or "(none)"
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip() or "unknown"
    return [f"| mini-apps | {args.build}/examples/auto/auto_{{tealeaf,cloverleaf}} ({build_type}) |",
            f"| source | git {commit} |",
            "| load average (1 min) at start, end | " + ", ".join(f"{v:.2f}" for v in args.load) + " |"]


def write_markdown(path: Path, machine: Dict[str, str], setups: Dict[str, AppSetup],
                   by_app: Dict[str, Dict[str, RowResult]], args, plot_name: str) -> None:
    lines = report_header("Automatic checkpointing benchmark", "auto.py", args)
    lines += machine_lines(machine)[:-1] + build_lines(args) + [""]
    lines += ["## Targets (issue 11)", "",
              f"- Automatic saved state ≤ {TARGET_SAVED_VS_HAND}× the hand-minimal state.",
              f"- Checkpoint blocking ≤ {TARGET_BLOCKING_ITERATIONS} iteration.",
              f"- Restore (read + replay) ≤ {TARGET_RESTORE_ITERATIONS} iteration + the read at file-read floor.",
              "", "Verdicts on the medians:", ""] + target_summary(by_app)
    lines += ["## What is measured", "",
              "- **saved**: `checkpoint.dataset_bytes + query_log_bytes + payload_bytes` of the "
              "measured run's last checkpoint; over `hand_minimal_bytes` (what an expert would save, "
              "documented per app) and over `all_dataset_bytes`.",
              "- **checkpoint blocking**: `blocking_seconds` (the time the runtime held "
              "the application over the checkpointing region) over the same run's "
              "`iteration_seconds` (the median time of its steps); for the run's first checkpoint "
              "(which also makes the store's buffer and faults its pages in) and the median of its "
              "later ones (the steady state of a long run).",
              "- **run time / plain**: the whole measured process (start to exit, store closed), "
              "over the plain run's of the same repeat: the application's whole slowdown.",
              "- **restore**: `restore.read_seconds + restore.replay_seconds` of the restarted run "
              "(the measured command run again after the killed one), over that run's "
              "`iteration_seconds` (the steps it executed). Replay time runs from the end of the read "
              "(or of the initialisation phase, which a run from scratch executes too) to the resume "
              "point; the read is the version's whole read at the runtime's start.",
              f"- **read floor**: the restored version's file(s) (`v<version>.*.rsg` in the store's "
              f"L2 directory) opened and read whole by this script into an already-touched buffer, "
              f"median of {FLOOR_REPEATS} reads, right after the restarted run. This is a "
              "**page-cache** read, as is the restore's: the killed run had just written the file. "
              "A cold read would need root to drop the page cache, so none is measured. "
              "**beyond the read floor** = (read + replay − floor) / iteration: the restore target's measure.",
              "- Rows run in an order rotated by one at each repeat; each run has a fresh store "
              "directory under the target directory.", ""]
    for app, results in by_app.items():
        lines += app_section(setups[app], results)
    lines += [f"![saved state, blocking, restore and run time per row]({plot_name})", ""]
    path.write_text("\n".join(lines))


def bars(ax, results: List[RowResult], series: Callable[[RowResult], Series], target: float, title: str,
         line_label: str = "") -> None:
    """Median bars with min–max whiskers, and a dashed line at `target`."""
    cmap = pyplot().get_cmap("tab10")
    highest = 0.0
    for i, r in enumerate(results):
        s = series(r)
        highest = max(highest, s.max, target)
        colour = cmap(list(ROWS).index(r.row.key) % 10)  # a row has one colour in every panel
        ax.bar(i, s.median, 0.7, yerr=[[s.median - s.min], [s.max - s.median]], capsize=3, color=colour)
    ax.axhline(target, color="red", linestyle="--", linewidth=1, label=line_label or f"target {target}")
    ax.legend(fontsize=7)
    ax.set_ylim(top=1.5 * highest)
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels([r.row.label for r in results], rotation=35, ha="right", fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)


def write_plot(path: Path, by_app: Dict[str, Dict[str, RowResult]]) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(len(by_app), 5, figsize=(25, 4.8 * len(by_app)), squeeze=False)
    for (app, results), (ax_size, ax_first, ax_block, ax_restore, ax_wall) in zip(by_app.items(), axes):
        rows = [r for key, r in results.items() if key != "plain"]
        plain = results["plain"]
        bars(ax_size, rows, RowResult.saved_vs_hand, TARGET_SAVED_VS_HAND, f"{app}: saved / hand-minimal")
        bars(ax_first, rows, RowResult.blocking_iterations, TARGET_BLOCKING_ITERATIONS,
             f"{app}: first checkpoint blocking (iterations)")
        bars(ax_block, rows, RowResult.later_blocking_iterations, TARGET_BLOCKING_ITERATIONS,
             f"{app}: later checkpoints blocking (iterations)")
        bars(ax_restore, rows, RowResult.restore_beyond_floor, TARGET_RESTORE_ITERATIONS,
             f"{app}: restore beyond the read floor (iterations)")
        bars(ax_wall, list(results.values()), lambda r: r.wall_vs(plain), 1.0, f"{app}: run time / plain",
             "plain")
        for ax in (ax_first, ax_block, ax_restore):
            ax.set_yscale("symlog", linthresh=1e-3)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


# ------------------------------------------------------------ multi-process figures (--mpi)
# Issue 31 part 6: the OPS paper's multi-process figures on one node, with
# examples/auto/tealeaf_mpi under mpirun; each rank keeps the same block
# (weak scaling), so a job of P ranks holds P times the state of one process.
MPI_STORE = "tealeaf_mpi"
MPI_ROUTES: Dict[str, str] = {  # tealeaf_mpi --checkpoints, and the row's label
    "none": "no checkpoint",
    "synchronous": "L2, synchronous",
    "offload": "L2, thread offload",
    "in-memory": "in-memory (L1)",
}
MPI_RANKS_PER_NODE = 2  # fake nodes of 2 ranks: node{node} directories, as the MPI tests use
TARGET_MPI_BLOCKING_RATIO = 1.1  # 4-rank blocking / 1-process blocking, same per-rank state
# Open MPI's ranks busy-poll while they wait; oversubscribed, that starves the
# rank they wait for (a 4-rank run on 2 cores took 100 times longer).
MPI_ENVIRONMENT = {"OMPI_MCA_mpi_yield_when_idle": "1", "RESURGO_MPI_RANKS_PER_NODE": str(MPI_RANKS_PER_NODE),
                   "RESURGO_LOG_LEVEL": "error", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@dataclass
class MpiSetup:
    binary: Path
    rows_per_rank: int
    cols: int
    steps: int
    every: int  # rank 0 requests a checkpoint in every `every`-th step
    root: Path

    def command(self, ranks: int, route: str) -> List[str]:
        launch = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks)]
        return launch + [str(self.binary), "--size", str(self.cols), "--rows", str(self.rows_per_rank * ranks),
                         "--steps", str(self.steps), "--checkpoint-every", str(0 if route == "none" else self.every),
                         "--checkpoints", "offload" if route == "none" else route]

    @property
    def checkpoints(self) -> int:
        return self.steps // self.every


@dataclass
class MpiRun:
    wall: float
    result: Dict[str, Any]
    version_files: int = 0  # the newest version's files on L2, every rank's
    version_bytes: int = 0


def measure_mpi(setup: MpiSetup, ranks: int, route: str) -> MpiRun:
    directory = fresh(setup.root / f"np{ranks}-{route}")
    command = setup.command(ranks, route)
    environment = {**os.environ, **MPI_ENVIRONMENT, "RESURGO_LOCAL_PATH": f"{directory}/node{{node}}"}
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=environment)
    wall = time.perf_counter() - started
    result = parse_result(done.stdout)
    if done.returncode != 0 or result is None:
        raise RunFailed("the run did not finish with a RESULT line", command, done)
    expected = 0 if route == "none" else setup.checkpoints
    if result["checkpoints"] != expected or len(result["blocking_seconds"]) != expected:
        raise RunFailed(f"the run took {result['checkpoints']} checkpoints, not {expected}", command, done)
    run = MpiRun(wall, result)
    files = sorted(directory.glob(f"node*/{MPI_STORE}/v*.r*.rsg"))
    if files:
        newest = max(f.name[:11] for f in files)
        run.version_files = sum(1 for f in files if f.name.startswith(newest))
        run.version_bytes = sum(f.stat().st_size for f in files if f.name.startswith(newest))
    shutil.rmtree(directory, ignore_errors=True)
    return run


class MpiResults:
    """Every run, by (ranks, route), in repeat order."""

    def __init__(self, ranks: Sequence[int]):
        self.ranks = list(ranks)
        self.runs: Dict[tuple, List[MpiRun]] = {(p, r): [] for p in ranks for r in MPI_ROUTES}

    def series(self, ranks: int, route: str, value: Callable[[MpiRun], float]) -> Series:
        return Series(f"{route} np{ranks}", times=[value(x) for x in self.runs[ranks, route]])

    def paired(self, ranks: int, route: str, base: tuple, value: Callable[[MpiRun], float]) -> Series:
        """value(run) / value(base run of the same repeat)."""
        return Series(f"{route} np{ranks}", times=[value(x) / value(b) for x, b in
                                                   zip(self.runs[ranks, route], self.runs[base])])


def first_blocking(run: MpiRun) -> float:
    return run.result["blocking_seconds"][0]


def later_blocking(run: MpiRun) -> float:
    return statistics.median(run.result["blocking_seconds"][1:])


def later_copy(run: MpiRun) -> float:
    return statistics.median(run.result["copy_seconds"][1:])


def in_iterations(seconds: Callable[[MpiRun], float]) -> Callable[[MpiRun], float]:
    return lambda run: seconds(run) / run.result["iteration_seconds"]


def saved_per_rank(run: MpiRun) -> float:
    return run.result["saved_bytes"][-1] / run.result["ranks"]


def bench_mpi(setup: MpiSetup, args) -> MpiResults:
    results = MpiResults(args.mpi_ranks)
    order = [(p, r) for p in args.mpi_ranks for r in MPI_ROUTES]
    for repeat in range(args.repeats):
        shift = repeat % len(order)
        for ranks, route in order[shift:] + order[:shift]:
            log(f"mpi repeat {repeat + 1}/{args.repeats}: {ranks} ranks, {route}")
            results.runs[ranks, route].append(measure_mpi(setup, ranks, route))
    sums = {(p, x.result["checksum"]) for (p, _), runs in results.runs.items() for x in runs}
    if len(sums) != len(args.mpi_ranks):
        raise SystemExit(f"auto.py: runs of the same rank count ended with different checksums: {sorted(sums)}")
    return results


def mpi_table(results: MpiResults, title: str, cell: Callable[[int, str], str],
              routes: Sequence[str] = tuple(MPI_ROUTES)[1:]) -> List[str]:
    lines = [f"| {title} | " + " | ".join(f"{p} rank{'s' if p > 1 else ''}" for p in results.ranks) + " |",
             "|---" * (len(results.ranks) + 1) + "|"]
    for route in routes:
        lines.append(f"| {MPI_ROUTES[route]} | " + " | ".join(cell(p, route) for p in results.ranks) + " |")
    return lines + [""]


def mpi_target_lines(results: MpiResults) -> List[str]:
    if 4 not in results.ranks:
        return ["(the target needs 4 in --mpi-ranks)", ""]
    lines = ["| route | later checkpoints: seconds, 4 ranks / 1 | later: iterations, 4 / 1 | "
             "first checkpoint: seconds, 4 / 1 | hand-written copy (later): seconds, 4 / 1 | "
             "verdict: seconds, iterations (later) |", "|---|---|---|---|---|---|"]
    for route in tuple(MPI_ROUTES)[1:]:
        seconds = results.paired(4, route, (1, route), later_blocking)
        iterations = results.paired(4, route, (1, route), in_iterations(later_blocking))
        first = results.paired(4, route, (1, route), first_blocking)
        copy = results.paired(4, route, (1, route), later_copy)
        lines.append(f"| {MPI_ROUTES[route]} | {ratio_cell(seconds, 2)} | {ratio_cell(iterations, 2)} | "
                     f"{ratio_cell(first, 2)} | {ratio_cell(copy, 2)} | "
                     f"{verdict(seconds, TARGET_MPI_BLOCKING_RATIO)}, "
                     f"{verdict(iterations, TARGET_MPI_BLOCKING_RATIO)} |")
    return lines + ["The hand-written copy is each rank's memcpy of its datasets' bytes into memory already "
                    "there, timed at the loop after each checkpoint (the longest over ranks): the floor of a "
                    "checkpoint at that point of the job. Where its own 4 / 1 ratio passes the target, waiting "
                    "for a core alone makes the 4-rank job's checkpoints longer than one process's on this "
                    "machine.", ""]


def mpi_setup_lines(setup: MpiSetup, results: MpiResults) -> List[str]:
    """What runs, the routes and what each figure is."""
    cores = os.cpu_count() or 0
    ranks = ", ".join(map(str, results.ranks))
    return ["## What runs", "",
            f"`examples/auto/tealeaf_mpi` (TeaLeaf-like conjugate gradients, 9 float64 datasets with a ring of "
            f"one cell, halo exchanges and reductions as loops) under `mpirun` on {ranks} ranks. Every rank "
            f"holds a block of {setup.rows_per_rank} x {setup.cols} cells (plus its ring) of a global grid of "
            f"({setup.rows_per_rank} x ranks) x {setup.cols}: the same per-rank state at every rank count. "
            f"{setup.steps} steps, rank 0 requests a checkpoint every {setup.every} step(s) (init phase mode: "
            f"{setup.checkpoints} checkpoints a run). Fake nodes of {MPI_RANKS_PER_NODE} ranks "
            f"(`RESURGO_MPI_RANKS_PER_NODE`), L2 in one directory per fake node. **This machine has {cores} "
            f"cores: runs of more than {cores} ranks are oversubscribed**, so their iterations and blocking in "
            "seconds grow with the rank count for want of cores, not of the checkpoint.", "",
            "Routes (`tealeaf_mpi --checkpoints`): **L2, synchronous** (a one-page store buffer: the checkpoint "
            "is written to L2 before the runtime lets the application go on, the paper's blocking write); "
            "**L2, thread offload** (the store's background pipeline writes it); **in-memory (L1)** (L1 only, "
            "no file); **no checkpoint** (the same run without requests: the run-time baseline).", "",
            "- **blocking**: per checkpoint, the longest any rank was held by the runtime "
            "(`blocking_seconds`, the maximum over ranks: the job's halo exchanges and reductions make it wait "
            "for its slowest rank); **first** checkpoint (makes the store's buffer) and the median of the "
            "**later** ones. The ranks' agreement on when to checkpoint is not in it: it runs on a thread of "
            "its own (MPI_THREAD_MULTIPLE), each answer collected an exchange later (docs/auto.md, \"MPI jobs\").",
            "- **iterations**: blocking over the same run's `iteration_seconds` (rank 0's median step), the unit "
            "of Tables 1 and 3 of the OPS paper.",
            "- **saved**: dataset + query log + payload bytes of the run's last checkpoint, summed over ranks "
            "(the query log grows with the conjugate-gradient iterations, which a taller grid needs more of).",
            "- Ratios between rank counts pair the runs of the same repeat; every figure comes from this run.",
            "- **Not measured: one file per version** (`persistent.layout = shared`, docs/mpi.md): only "
            "per-rank files are measured here; the column is left out.", ""]


def mpi_figure_lines(results: MpiResults) -> List[str]:
    """The tables against ranks, after the target's."""
    def iterations(seconds: Callable[[MpiRun], float]) -> Callable[[int, str], str]:
        return lambda p, r: ratio_cell(results.series(p, r, in_iterations(seconds)), 4)

    def files(p: int, r: str) -> str:
        return f"{results.runs[p, r][0].version_files} file(s), " + bytes_cell(
            results.series(p, r, lambda x: x.version_bytes))

    def saved_vs_one(p: int, r: str) -> str:
        return ratio_cell(Series(r, times=[a / b for a, b in zip(results.series(p, r, saved_per_rank).times,
                                                                 results.series(1, r, saved_per_rank).times)]))

    lines = ["## Checkpoint blocking in iterations", "", "Later checkpoints (median of each run's):", ""]
    lines += mpi_table(results, "route", iterations(later_blocking))
    lines += ["First checkpoint:", ""] + mpi_table(results, "route", iterations(first_blocking))
    lines += ["## Blocking in seconds, and the iteration", "", "Later checkpoints:", ""]
    lines += mpi_table(results, "route", lambda p, r: results.series(p, r, later_blocking).cell())
    lines += ["The hand-written copy of the same bytes at the loop after each checkpoint (later checkpoints):", ""]
    lines += mpi_table(results, "route", lambda p, r: results.series(p, r, later_copy).cell())
    lines += ["Iteration (rank 0's median step):", ""]
    lines += mpi_table(results, "route", lambda p, r: results.series(p, r, lambda x: x.result["iteration_seconds"])
                       .cell(), tuple(MPI_ROUTES))
    lines += ["## Saved bytes", "", "Per rank (last checkpoint):", ""]
    lines += mpi_table(results, "route", lambda p, r: bytes_cell(results.series(p, r, saved_per_rank)))
    lines += ["All ranks over the single process's × ranks (same repeat):", ""]
    lines += mpi_table(results, "route", saved_vs_one)
    lines += ["Per-rank files of the newest version on L2 (count, bytes; in-memory writes none):", ""]
    lines += mpi_table(results, "route", files, tuple(MPI_ROUTES)[1:3])
    lines += ["## Run time over the run without checkpoints (same repeat)", ""]
    lines += mpi_table(results, "route", lambda p, r: ratio_cell(results.paired(p, r, (p, "none"), lambda x: x.wall)))
    return lines


def write_mpi_markdown(path: Path, machine: Dict[str, str], setup: MpiSetup, results: MpiResults, args,
                       plot_name: str) -> None:
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip() or "unknown"
    lines = report_header("Automatic checkpointing in MPI jobs", "auto.py", args)
    lines += machine_lines(machine)[:-1] + [
        f"| MPI | {mpi_version()} (`mpirun --oversubscribe --bind-to none -np N`, "
        "`OMPI_MCA_mpi_yield_when_idle=1`) |",
        f"| mini-app | {setup.binary} |",
        f"| source | git {commit} |",
        "| load average (1 min) at start, end | " + ", ".join(f"{v:.2f}" for v in args.load) + " |", ""]
    lines += mpi_setup_lines(setup, results)
    lines += [f"## Target: blocking of a 4-rank job ≤ {TARGET_MPI_BLOCKING_RATIO}× the single process's", "",
              "Same per-rank state; verdicts on the medians of the later checkpoints, in seconds and in "
              f"iterations. The 4-rank job runs 4 ranks on {os.cpu_count()} cores: its seconds include waiting "
              "for a core, its iterations are as long as 4 ranks sharing the cores make them.", ""]
    lines += mpi_target_lines(results) + mpi_figure_lines(results)
    lines += [f"![blocking, 4-rank target and saved bytes against ranks]({plot_name})", ""]
    path.write_text("\n".join(lines))


def write_mpi_plot(path: Path, results: MpiResults, args) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    panels = [("later checkpoints blocking (iterations)",
               lambda p, r: results.series(p, r, in_iterations(later_blocking))),
              ("later checkpoints blocking / 1 process (seconds, same repeat)",
               lambda p, r: results.paired(p, r, (1, r), later_blocking)),
              ("saved bytes per rank", lambda p, r: results.series(p, r, saved_per_rank))]
    for ax, (title, series) in zip(axes, panels):
        for route in tuple(MPI_ROUTES)[1:]:
            s = [series(p, route) for p in results.ranks]
            ax.errorbar(results.ranks, [x.median for x in s],
                        yerr=[[x.median - x.min for x in s], [x.max - x.median for x in s]],
                        marker="o", capsize=3, label=MPI_ROUTES[route])
        ax.set_xscale("log", base=2)
        ax.set_xticks(results.ranks)
        ax.set_xticklabels([str(p) for p in results.ranks])
        ax.set_xlabel(f"ranks (oversubscribed above {os.cpu_count()})")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[2].set_ylim(0, 1.25 * axes[2].get_ylim()[1])  # from zero, the points clear of the top
    axes[1].axhline(TARGET_MPI_BLOCKING_RATIO, color="red", linestyle="--", linewidth=1,
                    label=f"target at 4 ranks: {TARGET_MPI_BLOCKING_RATIO}")
    axes[1].legend(fontsize=7)
    fig.suptitle(plot_title("tealeaf_mpi, same block per rank", args), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main_mpi(args, root: Path) -> int:
    binary = args.build / "examples" / "auto" / "auto_tealeaf_mpi"
    if not binary.exists():
        raise SystemExit(f"auto.py: {binary} does not exist; build it first:\n"
                         f"  cmake --build {args.build} --target auto_tealeaf_mpi")
    setup = MpiSetup(binary, args.mpi_block[0], args.mpi_block[1], args.mpi_steps, args.mpi_every, root)
    machine = machine_description(root)
    args.load = [os.getloadavg()[0]]
    results = bench_mpi(setup, args)
    args.load.append(os.getloadavg()[0])
    args.out.mkdir(parents=True, exist_ok=True)
    md, png = args.out / "auto_mpi.md", args.out / "auto_mpi.png"
    write_mpi_plot(png, results, args)
    write_mpi_markdown(md, machine, setup, results, args, png.name)
    print("\n".join(mpi_target_lines(results)))
    print(f"wrote {md} and {png}")
    return 0


# ------------------------------------------------------------ main
def per_app(text: str, option: str, defaults: Dict[str, int]) -> Dict[str, int]:
    """'N' (every app) or 'app=N,app=N' over the defaults."""
    values = dict(defaults)
    for item in filter(None, (t.strip() for t in text.split(","))):
        app, _, number = item.rpartition("=")
        if app and app not in APPS:
            raise argparse.ArgumentTypeError(f"{option}: unknown app '{app}' (choose from {', '.join(APPS)})")
        if not number.isdigit() or int(number) < 1:
            raise argparse.ArgumentTypeError(f"{option}: '{item}' is not APP=N or N with N >= 1")
        for name in ([app] if app else APPS):
            values[name] = int(number)
    return values


def parse_args(argv: List[str]):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", type=Path, default=REPO / "build" / "cpp",
                    help="CMake build directory holding examples/auto/auto_* (default build/cpp)")
    ap.add_argument("--apps", default=",".join(APPS), help="apps to run (default %(default)s)")
    ap.add_argument("--size", default="", help="grid size N (N x N cells): N for every app or "
                    "app=N,... (default " + ",".join(f"{a}={n}" for a, n in DEFAULT_SIZE.items()) + ")")
    ap.add_argument("--steps", default="", help="time steps, as --size (default "
                    + ",".join(f"{a}={n}" for a, n in DEFAULT_STEPS.items()) + ")")
    ap.add_argument("--rows", default=",".join(ROWS), help="rows to run (plain is always run): " + ", ".join(ROWS))
    ap.add_argument("--mpi", action="store_true", help="the multi-process figures instead (tealeaf_mpi under "
                    "mpirun): results/auto_mpi.md and .png")
    ap.add_argument("--mpi-ranks", default="1,2,4,8", help="rank counts (default %(default)s)")
    ap.add_argument("--mpi-block", default="32x128", help="each rank's block, ROWSxCOLS cells (default %(default)s)")
    ap.add_argument("--mpi-steps", type=int, default=8, help="time steps (default %(default)s)")
    ap.add_argument("--mpi-every", type=int, default=1, help="a checkpoint every N steps (default %(default)s)")
    add_common_args(ap, "auto", "where the runs' store directories go (node-local disk, not tmpfs); "
                    "default: a fresh directory under /tmp")
    args = ap.parse_args(argv)
    args.argv = argv
    finish_common_args(ap, args)
    try:
        args.size = per_app(args.size, "--size", DEFAULT_SIZE)
        args.steps = per_app(args.steps, "--steps", DEFAULT_STEPS)
    except argparse.ArgumentTypeError as exc:
        ap.error(str(exc))
    args.apps = [a.strip() for a in args.apps.split(",") if a.strip()]
    args.rows = ["plain"] + [k.strip() for k in args.rows.split(",") if k.strip() and k.strip() != "plain"]
    for name, chosen, known in (("app", args.apps, APPS), ("row", args.rows, ROWS)):
        unknown = [k for k in chosen if k not in known]
        if unknown:
            ap.error(f"unknown {name} {unknown}; choose from {', '.join(known)}")
    if min(args.steps[a] for a in args.apps) < 3:
        ap.error("--steps must be at least 3: a checkpoint, a kill after it, a step to restore into")
    args.build = args.build.resolve()
    try:
        args.mpi_ranks = sorted({int(n) for n in args.mpi_ranks.split(",") if n.strip()})
        args.mpi_block = tuple(int(n) for n in args.mpi_block.lower().split("x"))
    except ValueError:
        ap.error("--mpi-ranks takes N,N,... and --mpi-block ROWSxCOLS")
    if (len(args.mpi_block) != 2 or min(args.mpi_block) < 2 or not args.mpi_ranks or args.mpi_ranks[0] != 1
            or args.mpi_every < 1 or args.mpi_steps // args.mpi_every < 2):
        ap.error("--mpi-block needs 2 numbers >= 2, --mpi-ranks numbers >= 1 and 1 among them (the single "
                 "process, the baseline of the ratios), and --mpi-steps / --mpi-every >= 2 (a first checkpoint and "
                 "later ones)")
    return args


def app_setup(app: str, args, root: Path) -> AppSetup:
    binary = args.build / "examples" / "auto" / f"auto_{app}"
    if not binary.exists():
        raise SystemExit(f"auto.py: {binary} does not exist; build it first:\n"
                         f"  cmake --build {args.build} --target auto_tealeaf auto_cloverleaf")
    steps = args.steps[app]
    # A third into the run, so that a region that spans steps (no information:
    # closed by the runtime's timeout) ends before the run does.
    checkpoint_step = max(2, steps // 3 + 1)
    # Three or four more checkpoints in the rest of the run.
    checkpoint_every = max(1, (steps - checkpoint_step) // 4)
    return AppSetup(app, binary, args.size[app], steps, checkpoint_step, checkpoint_every, root / app)


def bench_app(setup: AppSetup, args) -> Dict[str, RowResult]:
    results = {key: RowResult(ROWS[key]) for key in args.rows}
    order = list(args.rows)
    for repeat in range(args.repeats):
        shift = repeat % len(order)
        for key in order[shift:] + order[:shift]:
            log(f"{setup.app} repeat {repeat + 1}/{args.repeats}: {key}")
            results[key].repeats.append(measure_row(setup, ROWS[key]))
    check_same_checksum(setup, results)
    return results


def check_same_checksum(setup: AppSetup, results: Dict[str, RowResult]) -> None:
    sums = {}
    for key, r in results.items():
        for x in r.repeats:
            sums.setdefault(x.result["checksum"], key)
            if x.restored is not None:
                sums.setdefault(x.restored["checksum"], f"{key} (restarted)")
    if len(sums) > 1:
        raise SystemExit(f"auto.py: {setup.app} ended with different checksums: "
                         + ", ".join(f"{c} ({k})" for c, k in sums.items())
                         + "; a restart that is not bit-identical is a bug, not a figure")


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    created = args.dir is None
    root = Path(tempfile.mkdtemp(prefix="resurgo-auto-", dir="/tmp")) if created else args.dir
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    if args.mpi:
        try:
            return main_mpi(args, root)
        finally:
            if created and not args.keep:
                shutil.rmtree(root, ignore_errors=True)
    setups = {app: app_setup(app, args, root) for app in args.apps}
    machine = machine_description(root)
    args.load = [os.getloadavg()[0]]
    log(f"stores under {machine['target directory']}; apps {args.apps}, {args.repeats} repeats, rows {args.rows}")
    try:
        by_app = {app: bench_app(setup, args) for app, setup in setups.items()}
    finally:
        if created and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    args.load.append(os.getloadavg()[0])
    args.out.mkdir(parents=True, exist_ok=True)
    md, png = args.out / "auto.md", args.out / "auto.png"
    write_plot(png, by_app)
    write_markdown(md, machine, setups, by_app, args, png.name)
    print("\n".join(target_summary(by_app)))
    print(f"wrote {md} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
