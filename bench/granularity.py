#!/usr/bin/env python3
"""Appicpr's trade-off measured (issue 33): the management block against
page faults, bytes saved and time per interval, with the mprotect and hash
trackers, for every fixed block from 4 KiB to 1 MiB and for both rules:
the tuner (track.granularity = "auto") and the slides' doubling rule alone
("doubling"). docs/tracking.md describes both.

Two workloads, one process per (repeat, workload, configuration), the
configurations in round-robin order within a repeat (starting one later at
each repeat), each process under build/cpp/bench/page_faults (perf's count
of the process's page faults):

- the benchmark patterns of bench/incremental.py, written by its program
  (build/cpp/bench/incremental: one store per pattern, version 0 full, then
  --intervals deltas, each waited for until durable at L2). Baseline: the
  same program in copy mode (a full copy per checkpoint, no tracking).
- the Himeno example (examples/himeno: the Fortran kernel, a checkpoint
  through appic_open/register/write/close after each range of S slices,
  every sweep). Baselines: the same run in copy mode, and without
  checkpoints (N = 0, copy mode: no tracking), which the checkpoint cost
  per interval is measured from.

Faults: mprotect takes one per saved block, hash none. For the patterns
they are counted per interval from the stats (captured bytes / block, one
region); for Himeno they are the mprotect run's page faults minus those of
the hash run with the same granularity (both save the same blocks). The
report says how far the patterns' count is from the same difference.

Writes bench/results/granularity.md and .png (see --out).

    .venv/bin/python bench/granularity.py                  # about 4 minutes on 2 cores
    .venv/bin/python bench/granularity.py --smoke --repeats 1 --intervals 4 --size 8MiB \\
        --himeno 33,33,33,2,8
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    MiB,
    Series,
    add_common_args,
    check_resources,
    finish_common_args,
    human,
    log,
    machine_description,
    machine_lines,
    parse_size,
    plot_title,
    pyplot,
    report_header,
)

SCRIPT = "granularity.py"
NAME = "granularity"
ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "cpp"
PROGRAMS = {"incremental": BUILD / "bench" / "incremental", "page_faults": BUILD / "bench" / "page_faults",
            "himeno": BUILD / "examples" / "himeno" / "himeno"}
TRACKERS = ["mprotect", "hash"]
FIXED = [str((4 << 10) << k) for k in range(9)]  # 4 KiB .. 1 MiB
RULES = {"auto": "tuner", "doubling": "doubling"}
COPY = ("copy", "")        # full copy per checkpoint, no tracking
NO_CHECKPOINT = ("none", "")  # Himeno with N = 0
DEFAULT_PATTERNS = "scattered:0.1,slab:0.1,himeno:0.1"
HIMENO = "Himeno example"
HIMENO_ARRAYS = {1: "p", 2: "wrk2"}  # appic's region ids: registration order
BLOCK_LINE = re.compile(r"region (\d+): management block of (\d+) bytes from the next interval")


def configurations() -> List[Tuple[str, str]]:
    return [COPY] + [(t, g) for t in TRACKERS for g in FIXED + list(RULES)]


def granularity_name(g: str) -> str:
    return RULES.get(g) or human(int(g))


def pattern_label(pattern: str) -> str:
    kind, fraction = pattern.split(":")
    name = "Himeno-like slices" if kind == "himeno" else kind
    return f"{float(fraction) * 100:g}% {name}"


# ------------------------------------------------------------------ running
def counted(cmd: List[str], env: Dict[str, str]) -> Tuple[subprocess.CompletedProcess, int]:
    """Runs cmd under page_faults; what it printed and its page-fault count. Exits on failure."""
    done = subprocess.run([str(PROGRAMS["page_faults"])] + cmd, capture_output=True, text=True,
                          env=dict(os.environ, **env))
    faults = [int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("page_faults ")]
    if done.returncode != 0 or not faults:
        sys.exit(f"{SCRIPT}: {' '.join(cmd)} failed with status {done.returncode}:\n{done.stderr.strip()[-3000:]}")
    return done, faults[-1]


def blocks_logged(stderr: str) -> Dict[int, int]:
    """Region id -> its last management block in bytes, from the tracker's debug lines."""
    return {int(m.group(1)): int(m.group(2)) for m in BLOCK_LINE.finditer(stderr)}


def run_patterns(args, work: Path, config: Tuple[str, str]) -> dict:
    tracker, granularity = config
    cmd = [str(PROGRAMS["incremental"]), "--dir", str(work), "--size", str(args.size),
           "--patterns", args.patterns, "--intervals", str(args.intervals)]
    if config == COPY:
        cmd += ["--mode", "copy"]
    else:
        cmd += ["--mode", "delta", "--method", tracker, "--granularity", granularity]
    done, faults = counted(cmd, {"RESURGO_LOG_LEVEL": "warn"})
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    wrong = {r["tracker"] for r in rows if config != COPY and r["tracker"] != tracker}
    if wrong:
        sys.exit(f"{SCRIPT}: {tracker} fell back to {', '.join(sorted(wrong))}; its figures would be another's")
    return {"rows": rows, "faults": faults}


def run_himeno(args, work: Path, config: Tuple[str, str]) -> dict:
    tracker, granularity = config
    nx, ny, nz, sweeps, slices = args.himeno
    every = 0 if config == NO_CHECKPOINT else 1
    # debug: the tracker logs each array's block (blocks_logged)
    env = {"RESURGO_LOG_LEVEL": "debug", "RESURGO_LOCAL_KEEP": "0", "RESURGO_DELTA_FULL_EVERY": "1000000"}
    if config in (COPY, NO_CHECKPOINT):
        env.update(RESURGO_CAPTURE_MODE="copy", RESURGO_LOCAL_KEEP="2")  # full versions: keep two
    else:
        env.update(RESURGO_TRACK_METHOD=tracker, RESURGO_TRACK_GRANULARITY=granularity)
    store = work / "state"
    cmd = [str(PROGRAMS["himeno"])] + [str(v) for v in (nx, ny, nz, sweeps, slices, every)] + [str(store), "-"]
    done, faults = counted(cmd, env)
    result = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT ")).split(" ", 1)[1])
    sizes = {int(p.name[1:11]): p.stat().st_size for p in store.glob("v*.rsg")} if store.is_dir() else {}
    result.update(faults=faults, sizes=sizes, blocks=blocks_logged(done.stderr))
    return result


def run_all(args, root: Path) -> Tuple[Dict, Dict]:
    """patterns[config] and himeno[config]: one result per repeat."""
    patterns = {c: [] for c in configurations()}
    himeno = {c: [] for c in [NO_CHECKPOINT] + configurations()}
    jobs = [("patterns", c) for c in patterns] + [("himeno", c) for c in himeno]
    for r in range(args.repeats):
        order = jobs[r % len(jobs):] + jobs[:r % len(jobs)]
        for n, (workload, config) in enumerate(order):
            work = root / f"r{r}-{n}"
            work.mkdir()
            if workload == "patterns":
                patterns[config].append(run_patterns(args, work, config))
            else:
                himeno[config].append(run_himeno(args, work, config))
            shutil.rmtree(work, ignore_errors=True)
        log(f"repeat {r + 1}/{args.repeats} done ({len(order)} runs)")
    return patterns, himeno


# ----------------------------------------------------------------- analysis
def steady(rows: List[dict], pattern: str, intervals: int) -> List[dict]:
    """The pattern's intervals of the second half: the rules have settled."""
    return [r for r in rows if r["kind"] == "interval" and r["pattern"] == pattern and r["interval"] > intervals // 2]


def interval_seconds(rows: List[dict]) -> float:
    """The application's time per interval: its write loop, then the checkpoint until durable."""
    return statistics.mean(r["write_seconds"] + r["durable_seconds"] for r in rows)


def pattern_cell(runs: List[dict], copies: List[dict], pattern: str, intervals: int, tracker: str) -> dict:
    time_ratio, saved, faults, loop = Series("time"), Series("saved"), Series("faults"), Series("loop")
    landing, steady_blocks = set(), set()
    for run, copy in zip(runs, copies):
        rows, full = steady(run["rows"], pattern, intervals), steady(copy["rows"], pattern, intervals)
        time_ratio.times.append(interval_seconds(rows) / interval_seconds(full))
        saved.times.append(sum(r["captured_bytes"] for r in rows) / sum(r["true_dirty_bytes"] for r in rows))
        loop.times.append(sum(r["write_seconds"] for r in rows) / sum(r["floor_seconds"] for r in rows))
        if tracker == "mprotect":
            faults.times.append(statistics.mean(r["captured_bytes"] / r["granularity_bytes"] for r in rows))
        landing.add(rows[-1]["granularity_bytes"])
        steady_blocks.update(r["granularity_bytes"] for r in rows)
    return dict(time=time_ratio, saved=saved, faults=faults, loop=loop, landing=[human(b) for b in sorted(landing)],
                steady=[human(b) for b in sorted(steady_blocks)])


def himeno_cell(runs: List[dict], copies: List[dict], bare: List[dict], hashed: Optional[List[dict]]) -> dict:
    time_ratio, saved, faults, slowdown = Series("time"), Series("saved"), Series("faults"), Series("slowdown")
    landing = {", ".join(f"{name} {human(run['blocks'][region])}" for region, name in HIMENO_ARRAYS.items())
               for run in runs}
    for i, (run, copy, none) in enumerate(zip(runs, copies, bare)):
        cost = (run["run_seconds"] - none["run_seconds"]) / run["checkpoints"]
        full_cost = (copy["run_seconds"] - none["run_seconds"]) / copy["checkpoints"]
        time_ratio.times.append(cost / full_cost)
        slowdown.times.append(run["run_seconds"] / none["run_seconds"])
        deltas = [size for version, size in run["sizes"].items() if version > 1]
        saved.times.append(statistics.mean(deltas) / statistics.mean(copy["sizes"].values()))
        if hashed is not None:
            faults.times.append((run["faults"] - hashed[i]["faults"]) / run["checkpoints"])
    return dict(time=time_ratio, saved=saved, faults=faults, loop=slowdown, landing=sorted(landing), steady=[])


def analyse(args, patterns: Dict, himeno: Dict) -> Dict[str, Dict[Tuple[str, str], dict]]:
    """table[workload][(tracker, granularity)] = the cell's Series."""
    tables: Dict[str, Dict[Tuple[str, str], dict]] = {}
    for pattern in args.patterns.split(","):
        tables[pattern_label(pattern)] = {
            c: pattern_cell(patterns[c], patterns[COPY], pattern, args.intervals, c[0])
            for c in configurations() if c != COPY}
    tables[HIMENO] = {
        c: himeno_cell(himeno[c], himeno[COPY], himeno[NO_CHECKPOINT],
                       himeno[("hash", c[1])] if c[0] == "mprotect" else None)
        for c in configurations() if c != COPY}
    return tables


def fault_check(patterns: Dict) -> float:
    """The largest gap, relative to the count, between the faults counted
    from the stats and the mprotect run's page faults minus the hash run's."""
    worst = 0.0
    for g in FIXED + list(RULES):
        for run, hashed in zip(patterns[("mprotect", g)], patterns[("hash", g)]):
            counted_faults = sum(r["captured_bytes"] // r["granularity_bytes"] for r in run["rows"]
                                 if r["kind"] == "interval")
            worst = max(worst, abs(run["faults"] - hashed["faults"] - counted_faults) / max(1, counted_faults))
    return worst


# ------------------------------------------------------------------- report
def ratio(value: float) -> str:
    return f"{value:.3g}"


def best_fixed(table: Dict[Tuple[str, str], dict], tracker: str) -> str:
    return min(FIXED, key=lambda g: table[(tracker, g)]["time"].median)


def landing(table: Dict[Tuple[str, str], dict], tracker: str, rule: str) -> str:
    """The block the rule ended at, the repeats' different ones apart."""
    return " / ".join(table[(tracker, rule)]["landing"])


def summary_lines(tables: Dict[str, Dict[Tuple[str, str], dict]]) -> List[str]:
    lines = ["## Where the rules land", "",
             "Time per interval against a full copy per checkpoint (median of the repeats); the best fixed "
             "block is the one with the lowest median.", "",
             "| workload | tracker | best fixed block | its time / full copy | tuner lands at | tuner: time / "
             "full copy | tuner / best fixed | doubling lands at | doubling: time / full copy | doubling / best "
             "fixed |", "|---|---|---|---:|---|---:|---:|---|---:|---:|"]
    for workload, table in tables.items():
        for tracker in TRACKERS:
            best = best_fixed(table, tracker)
            best_time = table[(tracker, best)]["time"].median
            cells = [workload, tracker, human(int(best)), ratio(best_time)]
            for rule in RULES:
                rule_time = table[(tracker, rule)]["time"].median
                cells += [landing(table, tracker, rule), ratio(rule_time), ratio(rule_time / best_time)]
            lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def workload_lines(workload: str, table: Dict[Tuple[str, str], dict]) -> List[str]:
    himeno = workload == HIMENO
    loop = "run / run without checkpoints" if himeno else "write loop / floor"
    saved = "stored per checkpoint / full copy's" if himeno else "saved / written"
    # hash adds nothing to the write loop: its loop / floor is noise around one.
    hash_loop = [f"hash: {loop}"] if himeno else []
    heads = ["mprotect: faults per interval", f"mprotect: {loop}", f"mprotect: {saved}",
             "mprotect: time / full copy"] + hash_loop + [f"hash: {saved}", "hash: time / full copy"]
    lines = [f"## {workload}", "", "| block | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(heads)]
    for g in FIXED + list(RULES):
        m, h = table[("mprotect", g)], table[("hash", g)]
        name = granularity_name(g) + (f" (→ {landing(table, 'mprotect', g)})" if g in RULES else "")
        cells = [m["faults"].cell(lambda v: f"{v:.0f}"), m["loop"].cell(ratio), m["saved"].cell(ratio),
                 m["time"].cell(ratio)] + ([h["loop"].cell(ratio)] if himeno else []) + \
                [h["saved"].cell(ratio), h["time"].cell(ratio)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + [""]


def method_lines(args) -> List[str]:
    nx, ny, nz, sweeps, slices = args.himeno
    return [
        "## What is measured", "",
        f"**Patterns** (`bench/incremental.cpp`, as `bench/incremental.py` runs it): {human(args.size)} of "
        f"anonymous memory (one region), one store per pattern, version 0 full, then {args.intervals} deltas, "
        "each checkpointed and waited for until durable at L2. Figures per interval are means over the second "
        f"half of the intervals ({args.intervals // 2 + 1}–{args.intervals}), where the rules have settled. "
        "*time / full copy*: (write loop + checkpoint until durable) / the same in copy mode (a full copy per "
        "checkpoint, no tracking), same repeat. *write loop / floor*: the tracked write loop / the same loop on "
        "untracked memory. *saved / written*: the delta's bytes / the pages the interval wrote. *faults*: "
        "mprotect takes one per saved block (captured bytes / block); hash takes none.", "",
        f"**Himeno example** (`examples/himeno`, the Fortran kernel through `appic_*`): grid {nx} × {ny} × {nz}, "
        f"{sweeps} sweeps, a checkpoint after each range of {slices} slices in every sweep (N = 1), local.keep = 0, "
        "one full version then deltas only. *time / full copy*: (run − the run without checkpoints) per "
        "checkpoint, against the same for the run in copy mode. *run / run without checkpoints*: the sweeps' "
        "wall time against the same run with N = 0 (copy mode: nothing tracked). *stored per checkpoint / full "
        "copy's*: mean size of the delta files / mean size of the copy run's files. *faults*: the mprotect run's "
        "page faults (perf, whole process) minus the hash run's with the same granularity, per checkpoint. "
        "Where a rule lands: the last block of `p` and `wrk2` the tracker logged (debug level).", "",
    ]


def same_blocks_gap(tables: Dict[str, Dict[Tuple[str, str], dict]]) -> Tuple[float, str]:
    """A rule that kept one fixed block through the second half of the
    intervals saved the same blocks as that size: the largest gap between
    their times is this machine's noise."""
    worst, where = 1.0, ""
    for workload, table in tables.items():
        for (tracker, g), cell in table.items():
            fixed = [f for f in FIXED if g in RULES and cell["steady"] == [human(int(f))]]
            if not fixed:
                continue
            gap = cell["time"].median / table[(tracker, fixed[0])]["time"].median
            gap = max(gap, 1 / gap)
            if gap > worst:
                worst, where = gap, f"{workload}, {tracker}, {RULES[g]} at {human(int(fixed[0]))}"
    return worst, where


def write_report(args, machine: Dict[str, str], tables, fault_gap: float, elapsed: float) -> None:
    lines = report_header("Appicpr's granularity trade-off: fixed blocks, the tuner and the doubling rule",
                          SCRIPT, args, "One process per (repeat, workload, configuration), round-robin order.")
    lines += machine_lines(machine)
    lines += method_lines(args) + summary_lines(tables)
    for workload, table in tables.items():
        lines += workload_lines(workload, table)
    notes = [f"Faults of the patterns counted from the stats against the mprotect run's page faults minus the "
             f"hash run's (perf, whole process, every interval): at most {fault_gap * 100:.2g} % apart."]
    if all(t[("mprotect", r)]["landing"] == t[("hash", r)]["landing"] for t in tables.values() for r in RULES):
        notes.append("Each rule lands at the same blocks with both trackers: both report whole blocks, so the "
                     "rules see the same blocks.")
    gap, where = same_blocks_gap(tables)
    if where:
        notes.append(f"Time differences up to {gap:.2f}× are noise here: a rule that kept one block through the "
                     f"second half saved the same blocks as that fixed size, yet their medians differ by up to "
                     f"{gap:.2f}× ({where}).")
    notes.append(f"The run took {elapsed:.0f} s on a machine shared with other work (2 cores): single timings are "
                 "noisy, hence the min–max.")
    lines += ["## Notes", ""] + [f"- {n}" for n in notes] + ["", f"Plot: `{NAME}.png`.", ""]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{NAME}.md").write_text("\n".join(lines))
    log(f"wrote {args.out / f'{NAME}.md'}")
    plot(args, tables)


def plot(args, tables) -> None:
    plt = pyplot()
    columns = 2
    rows = (len(tables) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(13, 4.5 * rows), squeeze=False)
    xs = [int(g) for g in FIXED]
    for ax, (workload, table) in zip(axes.flat, tables.items()):
        for colour, tracker in zip(("tab:red", "tab:blue"), TRACKERS):
            cells = [table[(tracker, g)]["time"] for g in FIXED]
            med = [c.median for c in cells]
            ax.errorbar(xs, med, yerr=[[m - c.min for m, c in zip(med, cells)], [c.max - m for m, c in zip(med, cells)]],
                        color=colour, marker="o", capsize=2, label=f"{tracker}, fixed block")
            for rule, style in zip(RULES, ("--", ":")):
                ax.axhline(table[(tracker, rule)]["time"].median, color=colour, linestyle=style,
                           label=f"{tracker}, {RULES[rule]}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([human(x) for x in xs], rotation=45)
        ax.set_title(workload)
        ax.set_ylabel("time per interval / full copy")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(tables):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(plot_title("Granularity: time per interval against a full copy", args))
    fig.tight_layout()
    fig.savefig(args.out / f"{NAME}.png", dpi=110)
    log(f"wrote {args.out / f'{NAME}.png'}")


# --------------------------------------------------------------------- main
def himeno_shape(text: str) -> Tuple[int, int, int, int, int]:
    values = [int(v) for v in text.split(",")]
    if len(values) != 5 or min(values) < 1 or min(values[:3]) < 3:
        raise argparse.ArgumentTypeError("give NX,NY,NZ,SWEEPS,S (NX, NY, NZ >= 3)")
    return tuple(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(ap, NAME, "where the stores go (a disk, not tmpfs); default: a fresh directory in /tmp")
    ap.add_argument("--size", type=parse_size, default=32 * MiB, help="the patterns' state (default 32MiB)")
    ap.add_argument("--intervals", type=int, default=16, help="deltas per pattern (default 16)")
    ap.add_argument("--patterns", default=DEFAULT_PATTERNS, help=f"default {DEFAULT_PATTERNS}")
    ap.add_argument("--himeno", type=himeno_shape, default=(129, 129, 129, 4, 4),
                    help="Himeno's NX,NY,NZ,SWEEPS,S (default 129,129,129,4,4)")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    if args.intervals < 2:
        ap.error("--intervals must be at least 2")
    for name, path in PROGRAMS.items():
        if not path.is_file():
            sys.exit(f"{SCRIPT}: {path} not found; build it:  cmake --build build/cpp --target {name}")
    created = args.dir is None
    args.root = Path(tempfile.mkdtemp(prefix="resurgo-granularity-", dir="/tmp")) if created else args.dir
    check_resources(SCRIPT, args.root, "this run", memory=3 * args.size + 64 * MiB, disk=4 * args.size)
    machine = machine_description(args.root)
    started = time.perf_counter()
    try:
        patterns, himeno = run_all(args, args.root)
    finally:
        if created and not args.keep:
            shutil.rmtree(args.root, ignore_errors=True)
    elapsed = time.perf_counter() - started
    write_report(args, machine, analyse(args, patterns, himeno), fault_check(patterns), elapsed)


if __name__ == "__main__":
    main()
