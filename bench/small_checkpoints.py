#!/usr/bin/env python3
"""Fixed costs of checkpoint() and restart() at small states (issue 27),
against the copy of the same bytes measured in the same run.

For each state size (default 4 KiB, 64 KiB, 256 KiB, 1 MiB, 16 MiB), route
(memory: L1 memory level only; memory+L2; L2: node-local directory only),
compute step between calls (0 = back to back, and 500 µs) and API (C++:
build/cpp/bench/small_checkpoints; Python: the same loop with NumPy), one
run is: --calls checkpoints of one array (each after a compute step and a
write of every word), timed call by call, then as many restart() of the
newest version; and in the same process the floor, memcpy / np.copyto of
the state into a touched buffer and back. A run reports per-call medians;
--repeats runs (default 5) give the median, min and max of those medians.

Reported per case: checkpoint blocking and restore against the copy, the
excess (checkpoint - copy), and how many of the run's versions waited for
buffer space (backpressure > 0: a version that waited for the previous
one's write and fsync). Targets (issue 27): memory route checkpoint <= copy
+ 5 µs (C++) / + 15 µs (Python); restore <= 1.5 x copy + 10 µs; L2 with the
default configuration: no backpressure for states <= 1 MiB at a 0.5 ms step.

With the Python API, each repeat also measures the Python layer's own cost
per call (bench/python_layer.py: the calls an adjoint makes, with the
store's core calls made no-ops), and the report sets each Python case
beside the C++ case of the same repeat: what the Python API adds.

With --before-binary and --before-package (a C++ driver and a Python
package, resurgo/ with its _core extension, built from an older commit;
the package only when the Python API is measured),
every case also runs against that build, interleaved with the current one:
the before/after table. The Python cases run in a process of their own, so
that each imports the package it measures.

With --chunk-sizes (e.g. default,64KiB), every case runs once per
pipeline chunk size (RESURGO_PIPELINE_CHUNK_SIZE in the runs' environment;
"default": unset, 4 MiB chunks): with small chunks one array is several
chunks, as a state of several arrays is several regions.

With --profile (C++, memory route), the report adds where checkpoint()
spends its time, per size and build: a `perf record -g --call-graph dwarf`
of one run of --profile-calls checkpoints, its samples inside
resurgo::Store::checkpoint, the share under the copy and checksum kernel,
and the library's functions by inclusive share.

Writes bench/results/small_checkpoints.md and .png (see --out; --name for
another file name, e.g. for a run limited with --apis and --routes).

    .venv/bin/python bench/small_checkpoints.py                 # full run
    .venv/bin/python bench/small_checkpoints.py --smoke --repeats 1 --sizes 4KiB --calls 50
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
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

from _common import (MiB, Series, add_common_args, finish_common_args, fmt_time, human, import_resurgo,
                     log, machine_description, machine_lines, parse_sizes, put_package_first, pyplot,
                     report_header)
import python_layer

PACKAGE_VARIABLE = "SMALL_CHECKPOINTS_PACKAGE"


def import_package():
    """resurgo from the directory $SMALL_CHECKPOINTS_PACKAGE names (ahead of
    the editable install's finders), else the installed one."""
    put_package_first(os.environ.get(PACKAGE_VARIABLE, ""))
    return import_resurgo("small_checkpoints.py")


resurgo = import_package()

NAME = "small_checkpoints"
SCRIPT = "small_checkpoints.py"
DEFAULT_BINARY = Path(__file__).resolve().parent.parent / "build" / "cpp" / "bench" / "small_checkpoints"
APIS = ("C++", "Python")
ROUTES = ("memory", "memory+L2", "L2")
STEPS_US = (0.0, 500.0)
CHUNK_VARIABLE = "RESURGO_PIPELINE_CHUNK_SIZE"
DEFAULT_CHUNKS = "default"  # the variable unset: the configuration's chunk size
BYTES_PER_CASE = 2 << 30  # a case writes at most this much (fewer calls for large states)


def route_options(route: str, directory: str) -> dict:
    return dict(memory_every=1 if "memory" in route else 0, memory_keep=2,
                local_every=1 if "L2" in route else 0, local_path=directory, persistent_every=0)


def spin(microseconds: float) -> None:
    if microseconds <= 0:
        return
    until = time.perf_counter() + microseconds * 1e-6
    while time.perf_counter() < until:
        pass


def per_call(fn, calls: int, before=None) -> List[float]:
    times = []
    for call in range(calls):
        if before:
            before(call)
        started = time.perf_counter()
        fn(call)
        times.append(time.perf_counter() - started)
    return times


def python_run(nbytes: int, route: str, calls: int, step_us: float, directory: str) -> dict:
    state = np.ones(nbytes // 8, dtype=np.uint64)
    copy = np.zeros_like(state)

    def step(call: int) -> None:
        spin(step_us)
        np.add(state, call, out=state)

    copy_times = per_call(lambda _: np.copyto(copy, state), calls, step)
    copy_back_times = per_call(lambda _: np.copyto(state, copy), calls)
    store = resurgo.Store("small-checkpoints", **route_options(route, directory))
    try:
        store.protect("state", state)
        checkpoint_times = per_call(store.checkpoint, calls, step)
        store.wait(level=1 if route == "memory" else 2)
        restart_times = per_call(lambda _: store.restart(calls - 1), calls)
        stats = store.stats()
    finally:
        store.close()
    waited = [s.backpressure_seconds for s in stats if s.backpressure_seconds > 0]
    return dict(copy=statistics.median(copy_times), copy_back=statistics.median(copy_back_times),
                checkpoint=statistics.median(checkpoint_times), restart=statistics.median(restart_times),
                backpressured_versions=len(waited), backpressure_seconds=sum(waited))


def case_arguments(nbytes: int, route: str, calls: int, step_us: float, directory: str) -> List[str]:
    return ["--bytes", str(nbytes), "--route", route, "--calls", str(calls), "--step-us", str(step_us),
            "--dir", directory]


def chunk_environment(chunks: str) -> dict:
    env = dict(os.environ)
    env.pop(CHUNK_VARIABLE, None)
    if chunks != DEFAULT_CHUNKS:
        env[CHUNK_VARIABLE] = chunks
    return env


def cpp_run(binary: Path, chunks: str, *case) -> dict:
    out = subprocess.run([str(binary), *case_arguments(*case)], capture_output=True, text=True, check=True,
                         env=chunk_environment(chunks)).stdout
    return json.loads(out)


def python_subprocess_run(package: str, *arguments: str, chunks: str = DEFAULT_CHUNKS) -> dict:
    env = chunk_environment(chunks)
    if package:
        env[PACKAGE_VARIABLE] = package
    out = subprocess.run([sys.executable, __file__, *arguments], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


Case = Tuple[str, str, str, int, float, str]  # build (before/after), api, route, bytes, step_us, chunks
FIELDS = ("copy", "copy_back", "checkpoint", "restart", "backpressured_versions")
Layer = Dict[str, Dict[str, List[float]]]  # build -> call -> seconds per repeat (python_layer.py)


def run_case(case: Case, builds: dict, args) -> dict:
    build, api, route, nbytes, step, chunks = case
    calls = max(20, min(args.calls, BYTES_PER_CASE // nbytes))
    directory = tempfile.mkdtemp(prefix="small-ckpt-", dir=args.dir)
    binary, package = builds[build]
    try:
        if api == "C++":
            return dict(cpp_run(binary, chunks, nbytes, route, calls, step, directory), calls=calls)
        return dict(python_subprocess_run(package, "--one-case", *case_arguments(nbytes, route, calls, step, directory),
                                          chunks=chunks), calls=calls)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def run_all(args) -> Tuple[Dict[Case, Dict[str, Series]], Layer]:
    results: Dict[Case, Dict[str, Series]] = {}
    layer: Layer = {}
    builds = {"after": (args.binary, args.package)}
    if args.before_binary:
        builds["before"] = (args.before_binary, args.before_package)
    cases = [(build, api, route, nbytes, step, chunks) for chunks in args.chunk_sizes for api in args.apis
             for route in args.routes for nbytes in args.sizes for step in STEPS_US for build in builds]
    for repeat in range(args.repeats):
        log(f"repeat {repeat + 1}/{args.repeats}: {len(cases)} cases")
        for case in cases:
            run = run_case(case, builds, args)
            series = results.setdefault(case, {f: Series(f) for f in FIELDS})
            for f in FIELDS:
                series[f].times.append(float(run[f]))
            series["calls"] = run["calls"]
        for build, (_, package) in builds.items() if "Python" in args.apis else ():
            for call, seconds in python_subprocess_run(package, "--one-layer").items():
                layer.setdefault(build, {}).setdefault(call, []).append(seconds)
    return results, layer


def target_text(api: str, route: str, nbytes: int, step: float, s: Dict[str, Series]) -> str:
    copy, checkpoint, restart = s["copy"].median, s["checkpoint"].median, s["restart"].median
    checks = []
    if route == "memory":
        allowed = 5e-6 if api == "C++" else 15e-6
        checks.append("ckpt " + ("met" if checkpoint <= copy + allowed else "missed"))
        checks.append("restore " + ("met" if restart <= 1.5 * s["copy_back"].median + 10e-6 else "missed"))
    if route == "L2" and nbytes <= MiB and step > 0:
        checks.append("no wait " + ("met" if s["backpressured_versions"].max == 0 else "missed"))
    return ", ".join(checks) or "—"


def report(args, results: Dict[Case, Dict[str, Series]], machine: Dict[str, str]) -> List[str]:
    before = f" \"before\" rows ran {args.before_binary}{' and ' + args.before_package if args.before_package else ''} ({args.before_label}), interleaved with the current build (\"after\")." if args.before_binary else ""
    count = lambda x: f"{x:.0f}"
    lines = report_header("Small checkpoints: fixed costs against the copy", SCRIPT, args)
    lines += machine_lines(machine)
    lines += ["Times are per call, median [min–max] over the repeats of each run's median. "
              "\"excess\" is checkpoint − copy (medians). \"waited\" is the number of versions of a "
              "run whose capture waited for buffer space (median [min–max] over the repeats), out of "
              "\"calls\". Targets from issue 27: memory route checkpoint ≤ copy + 5 µs (C++) or + 15 µs "
              "(Python), restore ≤ 1.5 × copy back + 10 µs; L2, states ≤ 1 MiB at a 0.5 ms step: no version waits." + before, "",
              f"\"chunks\" is {CHUNK_VARIABLE} in the runs' environment ({DEFAULT_CHUNKS}: unset).", "",
              "| build | API | route | chunks | state | step | calls | copy | checkpoint | excess | copy back | restart | waited | targets |",
              "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for (build, api, route, nbytes, step, chunks), s in results.items():
        excess = s["checkpoint"].median - s["copy"].median
        lines.append(f"| {build} | {api} | {route} | {chunks} | {human(nbytes)} | {step:g} µs | {s['calls']} | {call_time(s['copy'].median)} | "
                     f"{s['checkpoint'].cell(call_time)} | {call_time(excess)} | {call_time(s['copy_back'].median)} | "
                     f"{s['restart'].cell(call_time)} | {s['backpressured_versions'].cell(count)} | "
                     f"{target_text(api, route, nbytes, step, s)} |")
    lines.append("")
    lines.append(f"Load average (1 min) {args.loads[0]:.1f} at the start of the run and {args.loads[1]:.1f} at its end, "
                 f"on {os.cpu_count()} cores: above about 1, other jobs shared the machine.")
    return lines + [""] + python_over_cpp_lines(results)


def microseconds(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} µs"


def call_time(seconds: float) -> str:
    """A per-call time: to a hundredth of a µs below 1 ms, where the fixed
    costs this script compares differ by fractions of a µs."""
    return microseconds(seconds) if abs(seconds) < 1e-3 else fmt_time(seconds)


def python_over_cpp_lines(results: Dict[Case, Dict[str, Series]]) -> List[str]:
    """What the Python API adds to the C++ one, case by case: per repeat,
    the Python run's median less the C++ run's (both ran in that repeat)."""
    pairs = [(case, (case[0], "C++", *case[2:])) for case in results if case[1] == "Python"]
    pairs = [(python, cpp) for python, cpp in pairs if cpp in results]
    if not pairs:
        return []
    lines = ["## The Python API over the C++ API", "",
             "Per repeat, the Python run's median call less the C++ run's of the same case and repeat; "
             "median [min–max] over the repeats.", "",
             "| build | route | chunks | state | step | checkpoint: Python − C++ | restart: Python − C++ |",
             "|---|---|---|---:|---:|---:|---:|"]
    for python, cpp in pairs:
        build, _, route, nbytes, step, chunks = python
        cells = []
        for field in ("checkpoint", "restart"):
            diff = [p - c for p, c in zip(results[python][field].times, results[cpp][field].times)]
            cells.append(Series(field, times=diff).cell(microseconds))
        lines.append(f"| {build} | {route} | {chunks} | {human(nbytes)} | {step:g} µs | {cells[0]} | {cells[1]} |")
    return lines + [""]

PROFILE_ROOT = "resurgo::Store::checkpoint"
PROFILE_COPY = "copy_checksum_long"  # the one-pass copy and checksum kernel (base/copy_checksum.cpp)
PROFILE_TOP = 25
PROFILE_LEAVES = 12


def perf_samples(binary: Path, nbytes: int, chunks: str, calls: int) -> List[List[str]]:
    """The call stacks (leaf first, function names) of a perf record of one
    run of the driver, memory route, back to back."""
    with tempfile.TemporaryDirectory(prefix="small-ckpt-perf-") as work:
        data = Path(work) / "perf.data"
        subprocess.run(["perf", "record", "-q", "-F", "10000", "-g", "--call-graph", "dwarf,16384", "-o", str(data),
                        str(binary), *case_arguments(nbytes, "memory", calls, 0.0, work)],
                       env=chunk_environment(chunks), check=True, capture_output=True)
        text = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip,sym"], check=True,
                              capture_output=True, text=True).stdout
    stacks, frames = [], []
    for line in text.splitlines() + [""]:
        if not line.strip():
            if frames:
                stacks.append(frames)
            frames = []
            continue
        parts = line.split(None, 1)
        frames.append(parts[1].removesuffix(" (inlined)") if len(parts) > 1 else "?")
    return stacks


def profile_shares(stacks: List[List[str]]) -> Tuple[int, float, List[Tuple[str, float]], List[Tuple[str, float]]]:
    """Samples inside checkpoint(), the share under the copy kernel, and,
    of the samples outside it, the library's functions (resurgo::, not
    std::) by inclusive share and the functions they were taken in (any
    library: malloc, system calls) by share, both of all the checkpoint's
    samples."""
    inside = [stack for stack in stacks if any(PROFILE_ROOT in frame for frame in stack)]
    if not inside:
        return 0, 0.0, [], []
    rest = [stack for stack in inside if not any(PROFILE_COPY in frame for frame in stack)]
    copy = 1 - len(rest) / len(inside)
    counts: Dict[str, int] = {}
    for stack in rest:
        for name in {frame for frame in stack if frame.startswith(("resurgo::", "non-virtual thunk to resurgo::"))}:
            counts[name] = counts.get(name, 0) + 1
    leaves: Dict[str, int] = {}
    for stack in rest:
        leaves[stack[0]] = leaves.get(stack[0], 0) + 1
    ranked = sorted(counts.items(), key=lambda item: -item[1])[:PROFILE_TOP]
    leaves_ranked = sorted(leaves.items(), key=lambda item: -item[1])[:PROFILE_LEAVES]
    share = lambda items: [(name, count / len(inside)) for name, count in items]
    return len(inside), copy, share(ranked), share(leaves_ranked)


def profile_lines(args) -> List[str]:
    if shutil.which("perf") is None:
        return ["## Profile", "", "perf is not installed here: no profile.", ""]
    builds = [("after", args.binary)] + ([("before", args.before_binary)] if args.before_binary else [])
    lines = ["## Profile of checkpoint()", "",
             f"One run per row of `perf record -F 10000 -g --call-graph dwarf` of the C++ driver, memory route, "
             f"{args.profile_calls} checkpoints back to back; of its samples, those inside {PROFILE_ROOT} "
             f"(the rest: the driver's writes of the state, the copies and the restarts). \"copy\" is the share "
             f"under {PROFILE_COPY} (the copy into the memory level, checksummed in the same pass); the table "
             f"after each row lists where the rest goes: the library's functions by their share of the "
             f"checkpoint's samples outside the copy, inclusive (a caller counts its callees' samples; "
             f"sampling adds its own cost: shares, not times).", ""]
    for chunks in args.chunk_sizes:
        for nbytes in args.profile:
            for build, binary in builds:
                samples, copy, ranked, leaves = profile_shares(perf_samples(binary, nbytes, chunks, args.profile_calls))
                lines += [f"### {build}, {human(nbytes)}, chunks: {chunks}", "",
                          f"{samples} samples inside checkpoint(); copy: {copy:.1%}, the rest: {1 - copy:.1%}.", ""]
                for title, rows in (("function (inclusive, outside the copy)", ranked),
                                    ("function the sample was taken in (outside the copy)", leaves)):
                    lines += [f"| {title} | share |", "|---|---:|"]
                    lines += [f"| `{name[:120]}` | {share:.1%} |" for name, share in rows] + [""]
    return lines



def plot(args, results: Dict[Case, Dict[str, Series]], path: Path) -> None:
    plt = pyplot()
    rows = [(api, chunks) for api in args.apis for chunks in args.chunk_sizes]
    fig, axes = plt.subplots(len(rows), len(args.routes), figsize=(5 * len(args.routes), 4 * len(rows)), squeeze=False)
    for row, (api, chunks) in enumerate(rows):
        for col, route in enumerate(args.routes):
            ax = axes[row][col]
            for build, line in (("after", "-"), ("before", ":")):
                for field, marker in (("copy", "k"), ("checkpoint", "o"), ("restart", "s")):
                    for step in STEPS_US:
                        if field == "copy" and (step > 0 or build == "before"):
                            continue
                        xs = [n for n in args.sizes if (build, api, route, n, step, chunks) in results]
                        ys = [results[(build, api, route, n, step, chunks)][field].median for n in xs]
                        if xs:
                            ax.plot(xs, ys, marker + ("--" if field == "copy" else line),
                                    label=field if field == "copy" else f"{build}: {field}, step {step:g} µs")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"{api}, {route}, chunks: {chunks}")
            ax.set_xlabel("state bytes")
            ax.set_ylabel("seconds per call (median)")
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=parse_sizes, default=parse_sizes("4KiB,64KiB,256KiB,1MiB,16MiB"))
    ap.add_argument("--calls", type=int, default=1000, help="checkpoints (and restarts) per run (default 1000)")
    ap.add_argument("--binary", type=Path, default=DEFAULT_BINARY, help="the C++ driver")
    ap.add_argument("--package", default="", help="a directory holding resurgo/ (with _core) to measure "
                                                  "instead of the installed package")
    ap.add_argument("--before-binary", type=Path, help="the C++ driver built from an older commit")
    ap.add_argument("--before-package", default="", help="a directory holding resurgo/ (with _core) of that commit")
    ap.add_argument("--before-label", default="", help="what the before build is (e.g. its commit)")
    ap.add_argument("--apis", type=lambda text: text.split(","), default=list(APIS),
                    help="comma-separated APIs to measure (default: C++,Python)")
    ap.add_argument("--routes", type=lambda text: text.split(","), default=list(ROUTES),
                    help="comma-separated routes to measure (default: memory,memory+L2,L2)")
    ap.add_argument("--chunk-sizes", type=lambda text: text.split(","), default=[DEFAULT_CHUNKS],
                    help=f"comma-separated {CHUNK_VARIABLE} values to run every case with "
                         f"({DEFAULT_CHUNKS}: unset; default: {DEFAULT_CHUNKS})")
    ap.add_argument("--profile", type=parse_sizes, default=[],
                    help="sizes to profile checkpoint() at (C++, memory route, perf; see above)")
    ap.add_argument("--profile-calls", type=int, default=20000, help="checkpoints of a profiled run (default 20000)")
    ap.add_argument("--name", default=NAME, help=f"results file name, without .md (default {NAME}; "
                                                 f"e.g. {NAME}_memory for a run of the memory route only)")
    ap.add_argument("--one-case", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--one-layer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bytes", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--route", help=argparse.SUPPRESS)
    ap.add_argument("--step-us", type=float, help=argparse.SUPPRESS)
    add_common_args(ap, NAME, "directory for L2 (default: a temporary directory)")
    args = ap.parse_args()
    if args.one_case:  # a Python case in a process of its own (python_subprocess_run)
        print(json.dumps(python_run(args.bytes, args.route, args.calls, args.step_us, str(args.dir))))
        return
    if args.one_layer:  # python_layer.py's measures, in a process of its own
        print(json.dumps(python_layer.layer_costs()))
        return
    args.argv = sys.argv[1:]
    finish_common_args(ap, args)
    if not set(args.apis) <= set(APIS) or not set(args.routes) <= set(ROUTES):
        ap.error(f"--apis takes {','.join(APIS)} and --routes {','.join(ROUTES)}")
    if args.before_binary and not args.before_package and "Python" in args.apis:
        ap.error("--before-binary needs --before-package when the Python API is measured")
    if not args.binary.is_file():
        sys.exit(f"{SCRIPT}: {args.binary} not found; build it: cmake --build build/cpp --target small_checkpoints")
    args.dir = str(args.dir) if getattr(args, "dir", None) else None
    machine = machine_description(Path(args.dir or tempfile.gettempdir()), resurgo)
    load_before = os.getloadavg()[0]
    results, layer = run_all(args)
    args.loads = (load_before, os.getloadavg()[0])
    args.out.mkdir(parents=True, exist_ok=True)
    lines = report(args, results, machine) + (python_layer.report_lines(layer, microseconds) if layer else [])
    lines += profile_lines(args) if args.profile else []
    (args.out / f"{args.name}.md").write_text("\n".join(lines))
    plot(args, results, args.out / f"{args.name}.png")
    log(f"wrote {args.out / (args.name + '.md')} and .png")


if __name__ == "__main__":
    main()
