#!/usr/bin/env python3
"""What a sanitizer tree's compiles cost with each compiler.

`make test` compiles the library in an ASan+UBSan tree (at -O0) and a TSan
tree (at -O1) besides build/cpp; on the 2-core machine those compiles are a
large part of the suite's time (bench/results/ci_time.md). This script
compiles some of the library's unity batches (one translation unit per
folder, as every tree builds them) with GCC and with clang under each
sanitizer, and reports the CPU time (user + system) of each compile: what
the build costs the machine's cores, which the other jobs of a parallel
build cannot use.

The compile commands are the TSan tree's (build/tsan, which `make
build-tsan` configures), with the compiler, the -fsanitize list and the
optimization level replaced; the object goes to a temporary file. ccache
is bypassed. Each repeat compiles every (batch, variant) once, in an order
rotated at each repeat.

    bench/compile_cost.py [--tree build/tsan] [--batches job] [--repeats 5]
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Variant:
    key: str
    label: str
    compiler: str  # gcc | clang
    sanitize: str
    optimize: str
    extra: tuple = ()  # more flags, as the Makefile's tree has them


VARIANTS = [
    Variant("gcc_asan", "GCC, ASan+UBSan, -O0", "gcc", "address,undefined", "-O0"),
    Variant("clang_asan", "clang, ASan+UBSan, -O0", "clang", "address,undefined", "-O0",
            ("-fsanitize-address-use-odr-indicator",)),
    Variant("gcc_tsan", "GCC, TSan, -O1", "gcc", "thread", "-O1"),
    Variant("clang_tsan", "clang, TSan, -O1", "clang", "thread", "-O1"),
]
# Pairs reported as a ratio (clang over GCC), per repeat.
PAIRS = [("clang_asan", "gcc_asan", "ASan+UBSan at -O0"), ("clang_tsan", "gcc_tsan", "TSan at -O1")]


def batch_command(tree: Path, batch: str) -> List[str]:
    """The tree's compile command of the library's unity batch `batch`."""
    target = f"src/CMakeFiles/resurgo_common_objects.dir/Unity/unity_{batch}_cxx.cxx.o"
    done = subprocess.run(["ninja", "-C", str(tree), "-t", "commands", target], capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        sys.exit(f"compile_cost: {tree} has no command for {target} "
                 f"({done.stderr.strip() or 'no output'}); run 'make build-tsan' first")
    return shlex.split(lines[-1])


def variant_command(command: List[str], variant: Variant, compilers: Dict[str, str], out: Path) -> List[str]:
    """`command` with its compiler, sanitizer, optimization level and output
    replaced, its dependency file and launcher dropped."""
    args = [a for a in command if a != "ccache"]
    args[0] = compilers[variant.compiler]
    result: List[str] = []
    skip = 0
    for i, arg in enumerate(args):
        if skip:
            skip -= 1
            continue
        if arg == "-MD":
            continue
        if arg in ("-MT", "-MF"):
            skip = 1
            continue
        if arg == "-o":
            result += ["-o", str(out)]
            skip = 1
            continue
        if arg.startswith("-fsanitize="):
            result += [f"-fsanitize={variant.sanitize}", *variant.extra]
            continue
        elif re.fullmatch(r"-O[0-3sg]", arg):
            arg = variant.optimize
        elif arg == "-Wno-subobject-linkage" and variant.compiler == "clang":
            continue
        result.append(arg)
    return result


def cpu_seconds(command: List[str], cwd: Path) -> float:
    """User + system CPU seconds of running `command` (its children included)."""
    before = os.times()
    done = subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    after = os.times()
    if done.returncode != 0:
        sys.exit(f"compile_cost: compile failed ({shlex.join(command[:3])} ...):\n{done.stderr[-2000:]}")
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def ratio_series(series: Dict[str, common.Series], top: str, bottom: str, label: str) -> common.Series:
    ratios = common.Series(label)
    ratios.times = [a / b for a, b in zip(series[top].times, series[bottom].times)]
    return ratios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", default="build/tsan", help="configured build tree whose commands are used")
    ap.add_argument("--batches", default="job", help="library folders (unity batches) to compile, comma-separated")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--gcc", default="g++")
    ap.add_argument("--clang", default="clang++")
    ap.add_argument("--out", default="", help="results folder (default bench/results; build/bench-smoke with --smoke)")
    ap.add_argument("--name", default="compile_cost")
    ap.add_argument("--smoke", action="store_true", help="one repeat of one batch: checks that the script works")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    if args.smoke:
        args.repeats, args.batches = 1, args.batches.split(",")[0]
    args.out = args.out or str(ROOT / ("build/bench-smoke" if args.smoke else "bench/results"))
    tree = (ROOT / args.tree).resolve()
    compilers = {"gcc": shutil.which(args.gcc), "clang": shutil.which(args.clang)}
    for name, path in compilers.items():
        if path is None:
            sys.exit(f"compile_cost: no {name} compiler ({args.gcc if name == 'gcc' else args.clang}) on PATH")
    batches = args.batches.split(",")
    commands = {batch: batch_command(tree, batch) for batch in batches}
    series = {(b, v.key): common.Series(v.label, v.compiler) for b in batches for v in VARIANTS}
    jobs = [(b, v) for b in batches for v in VARIANTS]
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="resurgo-compile-cost-") as scratch:
        out = Path(scratch) / "batch.o"
        for repeat in range(args.repeats):
            shift = repeat % len(jobs)
            for batch, variant in jobs[shift:] + jobs[:shift]:
                seconds = cpu_seconds(variant_command(commands[batch], variant, compilers, out), tree)
                series[(batch, variant.key)].times.append(seconds)
                common.log(f"repeat {repeat + 1}: {batch} {variant.label}: {seconds:.1f} s of CPU")
    write_report(args, batches, series, compilers, time.time() - started)


def versions(compilers: Dict[str, str]) -> Dict[str, str]:
    return {name: subprocess.run([path, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
            for name, path in compilers.items()}


def write_report(args, batches: List[str], series, compilers: Dict[str, str], elapsed: float) -> None:
    seconds = lambda s: f"{s:.1f} s"  # noqa: E731
    ratio = lambda r: f"{r:.2f}"  # noqa: E731
    machine = common.machine_description(Path(args.out))
    for name, version in versions(compilers).items():
        machine[f"{name} compiler"] = version
    machine["load average (1 min) at end"] = f"{os.getloadavg()[0]:.2f}"
    lines = common.report_header("Compile cost of the library's batches under each sanitizer", "compile_cost.py", args,
                                 "CPU seconds (user + system) of one compile.")
    lines += common.machine_lines(machine)
    lines += ["| batch | " + " | ".join(v.label for v in VARIANTS) + " | "
              + " | ".join(f"clang / GCC, {label}" for _, _, label in PAIRS) + " |",
              "|---|" + "---:|" * (len(VARIANTS) + len(PAIRS))]
    for batch in batches:
        by_key = {v.key: series[(batch, v.key)] for v in VARIANTS}
        cells = [by_key[v.key].cell(seconds) for v in VARIANTS]
        cells += [ratio_series(by_key, top, bottom, label).cell(ratio) for top, bottom, label in PAIRS]
        lines.append(f"| {batch} | " + " | ".join(cells) + " |")
    lines += ["", f"Ratios are paired by repeat (below 1: clang compiles with less CPU). The run took {elapsed:.0f} s.",
              f"Plot: `{args.name}.png`.", ""]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.md").write_text("\n".join(lines))
    plot(args, batches, series, out / f"{args.name}.png")
    print("\n".join(lines))


def plot(args, batches: List[str], series, path: Path) -> None:
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    groups = [(batch, {v.key: series[(batch, v.key)] for v in VARIANTS}) for batch in batches]
    common.grouped_bars(ax, groups, log_scale=False, keys=[v.key for v in VARIANTS])
    ax.set_ylabel("CPU seconds per compile")
    ax.set_xlabel("library batch (unity translation unit)")
    ax.set_title(common.plot_title("Compile CPU time by compiler and sanitizer", args), fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
