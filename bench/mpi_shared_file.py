#!/usr/bin/env python3
"""One file per version on L4 (issue 31, part 4): persistent.layout = shared
against per-rank files, for the time until a version is durable for the job
(checkpoint + wait(v, L4)) and the time of a fresh store's restart(), on 1,
2 and 4 ranks (oversubscribed), with a floor measured in the same run: the
same bytes written + fsynced (and read back) by a plain program, one file
per rank.

Runs build/cpp/bench/mpi_shared_file_driver under mpirun, one job per
(repeat, rank count, case); within a repeat the three cases of a rank count
run back to back in an order that rotates from repeat to repeat, and each
ratio is taken within its repeat before the median is. Restart reads files
just written (the page cache holds them): it measures the layout's reading
path, not the disk.

With --before-binary (the driver built from another commit, e.g. in a git
worktree of HEAD), a fourth case runs that build's shared layout in the same
rotation, and the tables add its figures and the ratio of this build's
shared layout to it within each repeat.

Writes bench/results/mpi_shared_file.md and .png (see --out), with the load
average before and after the runs.

    .venv/bin/python bench/mpi_shared_file.py                      # 64 MiB per rank, 5 repeats
    .venv/bin/python bench/mpi_shared_file.py --before-binary /work/wt/build/cpp/bench/mpi_shared_file_driver
    .venv/bin/python bench/mpi_shared_file.py --smoke --repeats 1 --bytes 4MiB
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
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    MiB,
    add_common_args,
    finish_common_args,
    human,
    log,
    machine_description,
    machine_lines,
    parse_size,
    pyplot,
    report_header,
)

SCRIPT = "mpi_shared_file.py"
NAME = "mpi_shared_file"
ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "build" / "cpp" / "bench" / "mpi_shared_file_driver"
CASES = ["floor", "per-rank", "shared"]
BEFORE = "shared (before)"  # --before-binary's shared layout
MEASURES = ["write_s", "restart_s"]


def run_case(args, ranks: int, case: str) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"{case.split()[0]}-", dir=args.dir))
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    binary, driver_case = (args.before_binary, "shared") if case == BEFORE else (BINARY, case)
    cmd += [str(binary), "--dir", str(work), "--case", driver_case, "--bytes", str(args.bytes)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    shutil.rmtree(work, ignore_errors=True)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or len(rows) != 1 or not rows[0]["bit_for_bit"]:
        sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return rows[0]


def measure(args) -> Dict[Tuple[int, str], List[dict]]:
    results: Dict[Tuple[int, str], List[dict]] = {}
    for repeat in range(args.repeats):
        for ranks in args.ranks:
            order = args.cases[repeat % len(args.cases):] + args.cases[:repeat % len(args.cases)]
            for case in order:
                row = run_case(args, ranks, case)
                results.setdefault((ranks, case), []).append(row)
                log(f"repeat {repeat + 1}/{args.repeats}, {ranks} ranks, {case}: write {row['write_s']:.4f} s, "
                    f"restart {row['restart_s']:.4f} s")
    return results


def spread(values: List[float], digits: str = ".3g") -> str:
    return f"{statistics.median(values):{digits}} [{min(values):{digits}}–{max(values):{digits}}]"


def ratios(results, ranks: int, case: str, over: str, measure_name: str) -> List[float]:
    return [a[measure_name] / b[measure_name] for a, b in zip(results[(ranks, case)], results[(ranks, over)])]


def table(args, results, measure_name: str, ratio_pairs: List[Tuple[str, str]]) -> List[str]:
    heads = [f"{case} (s)" for case in args.cases] + [f"{a} / {b}" for a, b in ratio_pairs]
    lines = ["| ranks | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for ranks in args.ranks:
        cells = [spread([r[measure_name] for r in results[(ranks, case)]]) for case in args.cases]
        cells += [spread(ratios(results, ranks, a, b, measure_name)) for a, b in ratio_pairs]
        lines.append(f"| {ranks} | " + " | ".join(cells) + " |")
    return lines


def report(args, results) -> List[str]:
    before = f" `shared (before)` is the shared layout of `{args.before_binary}`." if args.before_binary else ""
    lines = report_header("One file per version on L4 against per-rank files", SCRIPT, args,
                          extra=f"{human(args.bytes)} per rank; one `mpirun` job per (repeat, rank count, case), "
                                f"the cases of a rank count interleaved in a rotating order.{before} Load average "
                                f"(1 min) {args.load[0]:.2f} before the runs, {args.load[1]:.2f} after.")
    pairs = [("per-rank", "floor"), ("shared", "floor"), ("shared", "per-rank")]
    if args.before_binary:
        pairs += [(BEFORE, "per-rank"), ("shared", BEFORE)]
    lines += ["## Time until the version is durable for the job (checkpoint + wait(v, L4))", ""]
    lines += table(args, results, "write_s", pairs)
    lines += ["", "## Restart of a fresh store (files in the page cache)", ""]
    lines += table(args, results, "restart_s", [pair for pair in pairs if pair[1] != "floor"])
    lines += ["", "Each cell: median [min–max] over the repeats; a ratio is taken within each repeat, then its "
              "median. The floor writes each rank's bytes to a file of its own with write() and fsync() and syncs "
              "the directory; it reads them back with read(). The shared layout writes each rank's container "
              "once, straight into the rank's slot of the version's shared temporary (reserved when the ranks "
              "agree on the version), and the store's job thread, which runs ten nice steps below the "
              "application, fdatasyncs the parts, appends the part index and publishes the file. `shared (before)`, "
              "where shown, is the layout as it was: each container written as a scratch file first, then copied "
              "by the job thread into the shared file.", ""]
    return lines + machine_lines(machine_description(args.dir))


def plot(args, results, path: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    width = 0.8 / len(args.cases)
    for axis, measure_name, title in zip(axes, MEASURES, ["durable on L4 (s)", "restart (s)"]):
        for index, case in enumerate(args.cases):
            xs = [position + (index - (len(args.cases) - 1) / 2) * width for position in range(len(args.ranks))]
            medians = [statistics.median(r[measure_name] for r in results[(ranks, case)]) for ranks in args.ranks]
            axis.bar(xs, medians, width, label=case)
        axis.set_xticks(range(len(args.ranks)), [f"{ranks} ranks" for ranks in args.ranks])
        axis.set_title(title)
    axes[0].legend()
    fig.suptitle(f"One file per version vs per-rank files, {human(args.bytes)} per rank (median)")
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(ap, NAME, "where the runs write (default: a temporary directory under build/)")
    ap.add_argument("--bytes", type=parse_size, default=64 * MiB, help="state per rank (default 64MiB)")
    ap.add_argument("--ranks", type=lambda text: [int(n) for n in text.split(",")], default=[1, 2, 4],
                    help="rank counts (default 1,2,4)")
    ap.add_argument("--before-binary", type=Path, default=None,
                    help="mpi_shared_file_driver of another build: its shared layout runs as a fourth case")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    args.cases = CASES + ([BEFORE] if args.before_binary else [])
    if args.before_binary and not args.before_binary.exists():
        sys.exit(f"{SCRIPT}: --before-binary {args.before_binary} not found")
    if not BINARY.exists():
        sys.exit(f"{SCRIPT}: {BINARY} not found; build it: cmake --build build/cpp --target mpi_shared_file_driver")
    if not shutil.which("mpirun"):
        sys.exit(f"{SCRIPT}: mpirun not found; install Open MPI or MPICH")
    made = args.dir is None
    args.dir = Path(tempfile.mkdtemp(prefix="mpi-shared-", dir=ROOT / "build")) if made else args.dir
    args.dir.mkdir(parents=True, exist_ok=True)
    try:
        args.load = [os.getloadavg()[0]]
        results = measure(args)
        args.load.append(os.getloadavg()[0])
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{NAME}.md").write_text("\n".join(report(args, results)))
        plot(args, results, args.out / f"{NAME}.png")
        log(f"wrote {args.out / (NAME + '.md')} and .png")
    finally:
        if made and not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
