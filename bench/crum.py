#!/usr/bin/env python3
"""CRUM's evaluation as far as one GPU allows (issue 29 part 6; CRUM,
../shared/papers/crum-unified-memory-forked-checkpointing.txt, section IV):
a unified-memory application (bench/crum/crum_app.cu, a 3-D 7-point Jacobi
smoother over two cudaMallocManaged arrays) run for a fixed wall time and
checkpointed every --interval seconds through the Resurgo C API, in each way
of taking the state: a synchronous write (copy, then wait until durable at
L2), copy into host staging by DMA with a background write, copy into the
L0 device cache, and forked (CRUM's drain, then fork); each with and without
compression. It measures the application's throughput against a run
without checkpoints, the time each checkpoint blocks, the step time while a
version is being written, restart, and the bare device-to-host copy of the
state as the floor of managed capture.

The program is compiled at run time: with nvcc on a GPU machine (the real
figures), else with the host C++ compiler as the host analog, which runs the
same loop on the CPU against the test fake of the CUDA driver
(tests/cpp/fake_cuda: managed memory is host memory the fake knows); its
timings are no GPU figures and the report says so.
"""

from __future__ import annotations

import argparse
import ctypes
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
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    MiB,
    QUICK_REPEATS,
    Series,
    cuda_driver_is_fake,
    finish_common_args,
    fmt_time,
    grouped_bars,
    human,
    log,
    machine_description,
    machine_lines,
    parse_size,
    plot_title,
    pyplot,
    report_header,
)

SCRIPT = "crum.py"
NAME = "crum"
ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "bench" / "crum" / "crum_app.cu"
# Targets (issue 29): forked blocking >= 20x less than a synchronous write,
# step time while the child writes <= 1.05x the step time without
# checkpoints, managed capture at >= 80 % of the bare D2H copy.
FORK_TARGET, STEP_TARGET, CAPTURE_TARGET = 20.0, 1.05, 0.8


@dataclass
class Way:
    """One way of checkpointing the application (a row of the report)."""

    key: str
    label: str
    mode: str = "copy"  # capture.mode; "" = no checkpoints
    l0: bool = False     # device.capacity = twice the state
    sync: bool = False   # wait until durable at L2 after each checkpoint


WAYS = [
    Way("none", "no checkpoints (baseline)", mode=""),
    Way("sync", "synchronous write: copy, then wait until durable at L2", sync=True),
    Way("copy", "copy into host staging (DMA), written in the background"),
    Way("l0", "copy into the L0 device cache, written in the background", l0=True),
    Way("fork", "forked (CRUM: drain into host staging, then fork a writer)", mode="fork"),
]
WAY = {w.key: w for w in WAYS}
# Sizes: the GPU run (about 3.5 min on an H100 with a fast local disk, 1 GiB
# state), --quick (about 1.5 min), and the host analog (16 MiB, about 12 s
# per repeat on 2 cores: 9 runs of 1 s plus compiling).
GPU = dict(size="1GiB", seconds=4.0, interval=1.0)
QUICK = dict(size="1GiB", seconds=2.5, interval=0.6)
HOST = dict(size="16MiB", seconds=1.0, interval=0.25)


@dataclass
class Cell:
    """Per-run figures of one way and codec, one value per repeat."""

    runs: List[dict] = field(default_factory=list)
    error: str = ""
    series: Dict[str, Series] = field(default_factory=dict)

    def add(self, name: str, value: Optional[float]) -> None:
        if value is not None:
            self.series.setdefault(name, Series(name, name)).times.append(value)

    def get(self, name: str) -> Series:
        return self.series.get(name, Series(name, name))


# ------------------------------------------------------------ the program
def nvcc_path() -> Optional[str]:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    for candidate in ([f"{home}/bin/nvcc"] if home else []) + [shutil.which("nvcc") or "", "/usr/local/cuda/bin/nvcc"]:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def compile_program(backend: str, lib_dir: Path, work: Path):
    """bench/crum/crum_app.cu built against libresurgo.so in lib_dir: with
    nvcc (cuda) or as C++ (the host analog). (binary, None) or (None, why not)."""
    binary = work / f"crum_app_{backend}"
    common = [str(SOURCE), f"-I{ROOT / 'include'}", f"-L{lib_dir}", "-lresurgo", "-o", str(binary)]
    if backend == "cuda":
        cmd = [nvcc_path() or "nvcc", "-O3", "-std=c++17", "-arch=native", *common, f"-Xlinker=-rpath,{lib_dir}"]
    else:
        cmd = [os.environ.get("CXX", "c++"), "-O2", "-std=c++20", "-x", "c++", *common, "-ldl",
               f"-Wl,-rpath,{lib_dir}"]
    log(" ".join(cmd))
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return None, f"compiling {SOURCE.name} failed:\n{done.stderr.strip()}"
    return binary, None


def probe(binary: Path, env: dict) -> Optional[str]:
    """None when the program finds a device, else why not."""
    done = subprocess.run([str(binary), "--probe"], capture_output=True, text=True, env=env)
    if done.returncode == 0:
        return None
    return (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]


def real_driver() -> Optional[str]:
    """None when NVIDIA's libcuda.so.1 loads here, else why not."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return f"no CUDA driver ({exc})"
    return "the libcuda.so.1 found is the test fake" if cuda_driver_is_fake() else None


def pick_backend(args, lib_dir: Path, work: Path, host_env: dict):
    """(backend, binary, environment, why cuda was not used)."""
    why = None
    if args.backend != "host":
        why = real_driver() or (None if nvcc_path() else "no nvcc (set CUDA_HOME)")
        if why is None:
            binary, why = compile_program("cuda", lib_dir, work)
            why = why or probe(binary, dict(os.environ))
            if why is None:
                return "cuda", binary, dict(os.environ), None
    if args.backend == "cuda":
        sys.exit(f"{SCRIPT}: the cuda backend is unavailable: {why}")
    binary, failure = compile_program("host", lib_dir, work)
    if binary is None:
        sys.exit(f"{SCRIPT}: {failure}")
    failure = probe(binary, host_env)
    if failure:
        sys.exit(f"{SCRIPT}: the host analog finds no fake CUDA driver ({failure}); build it first:  "
                 "cmake --build build/cpp --target resurgo_fake_cuda, or give --fake-lib")
    return "host", binary, host_env, why or "--backend host was asked for"


def store_config(path: Path, way: Way, codec: str, nbytes: int, l2: Path) -> None:
    capacity = 2 * nbytes if way.l0 else 0
    path.write_text(f"""[capture]
mode = "{way.mode}"
[device]
capacity = {capacity}
chunk = {min(capacity, 1 << 30) if capacity else 1 << 30}
[local]
path = "{l2}"
keep = 2
[persistent]
every = 0
[pipeline]
compress = "{codec}"
[log]
level = "error"
""")


def run_once(binary: Path, env: dict, args, way: Way, codec: str, nbytes: int, scratch: Path) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=scratch))
    try:
        cmd = [str(binary), "--mib", str(nbytes // MiB), "--seconds", repr(args.seconds)]
        if way.mode:
            config = run_dir / "store.toml"
            store_config(config, way, codec, nbytes, run_dir / "l2")
            cmd += ["--interval", repr(args.interval), "--config", str(config), "--restart"]
            cmd += ["--sync"] if way.sync else []
        else:
            cmd += ["--interval", "0"]
        # A run that crashes or hangs becomes its row's error, so that an
        # unattended GPU check still reports the other rows.
        limit = 10 * args.seconds + 60
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=limit)
        except subprocess.TimeoutExpired:
            return {"error": f"the run did not end within {limit:g} s ({' '.join(cmd)})"}
        lines = done.stdout.strip().splitlines()
        if done.returncode not in (0, 3) or not lines:
            why = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return {"error": f"exit status {done.returncode}: {why} ({' '.join(cmd)})"}
        return json.loads(lines[-1])
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


# ------------------------------------------------------------ the figures
def median(values: List[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def writing_steps(run: dict) -> List[float]:
    """Step times of the steps that began while a version was being written
    (after checkpoint() returned, before it was durable at L2)."""
    windows = [(c["start"] + c["blocked"], c["start"] + c["to_l2"]) for c in run["checkpoints"] if "to_l2" in c]
    return [t for s, t in zip(run["step_start"], run["step_seconds"]) if any(a <= s < b for a, b in windows)]


def steps_after(run: dict) -> List[float]:
    """The first step after each checkpoint returned: pages the checkpoint
    left migrated to the host would fault back to the device in it."""
    out = []
    for c in run["checkpoints"]:
        back = c["start"] + c["blocked"]
        out += [t for s, t in zip(run["step_start"], run["step_seconds"]) if s >= back][:1]
    return out


def digest(cell: Cell, run: dict) -> None:
    """One run's figures into the cell's series."""
    cell.runs.append(run)
    cell.add("throughput", len(run["step_seconds"]) / run["total_seconds"])
    cell.add("step", median(run["step_seconds"]))
    cell.add("floor_bw", run["bytes"] / run["d2h_floor_seconds"])
    checkpoints = run.get("checkpoints", [])
    if not checkpoints:
        return
    cell.add("blocked", median([c["blocked"] for c in checkpoints]))
    cell.add("first_blocked", checkpoints[0]["blocked"])
    later = checkpoints[1:]
    if later:
        cell.add("later_blocked", median([c["blocked"] for c in later]))
    for part in PARTS:
        values = [c[part] for c in later if part in c]
        if values:
            cell.add(f"later_{part}", median(values))
    cell.add("step_writing", median(writing_steps(run)))
    cell.add("step_after", median(steps_after(run)))
    cell.add("capture_bw", median([c["device_bytes"] / c["copy"] for c in checkpoints if c.get("copy")]))
    cell.add("stored", median([c["stored_l2"] / run["bytes"] for c in checkpoints if c.get("stored_l2", -1) > 0]))
    cell.add("restart", run["restart_seconds"])
    if not run["restart_verified"]:
        cell.error = cell.error or "restart did not give back the checkpointed state (checksum differs)"


def measure(binary: Path, env: dict, args, nbytes: int, scratch: Path) -> Dict[tuple, Cell]:
    keys = [("none", "none")] + [(w.key, c) for w in WAYS if w.mode for c in args.codecs]
    cells = {k: Cell() for k in keys}
    for r in range(args.repeats):
        order = keys[r % len(keys):] + keys[:r % len(keys)]
        for key in order:
            cell = cells[key]
            if cell.error:
                continue  # a refused way is not asked again
            run = run_once(binary, env, args, WAY[key[0]], key[1], nbytes, scratch)
            if run.get("error"):
                cell.error = run["error"]
                log(f"{key[0]}/{key[1]}: {cell.error}")
                continue
            digest(cell, run)
            if cell.error:
                log(f"{key[0]}/{key[1]}: {cell.error}")
        log(f"repeat {r + 1}/{args.repeats}: " + ", ".join(
            f"{w}/{c} {fmt_time(cells[(w, c)].get('blocked').times[-1])}" for w, c in keys
            if cells[(w, c)].get("blocked").times))
    return cells


def paired(num: Series, den: Series, scale: float = 1.0) -> Series:
    s = Series("ratio", "ratio")
    s.times = [scale * a / b for a, b in zip(num.times, den.times) if b]
    return s


def ratio_cell(s: Series) -> str:
    return s.cell(lambda v: f"{v:.3g}×") if s.times else "—"


def gbps(value: float) -> str:
    return f"{value / 1e9:.3g} GB/s"


# ------------------------------------------------------------ the report
def table(cells: Dict[tuple, Cell], codecs: List[str]) -> List[str]:
    base = cells[("none", "none")]
    lines = ["| way | codec | checkpoint blocks | throughput (steps/s) | throughput without / with | step time "
             "while writing / without checkpoints | restart | stored / state | capture rate (device bytes / copy time) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines.append(f"| {WAY['none'].label} | — | — | {base.get('throughput').cell(lambda v: f'{v:.4g}')} | 1× | — | — "
                 f"| — | — |")
    for way in WAYS[1:]:
        for codec in codecs:
            c = cells[(way.key, codec)]
            if c.error and not c.runs:
                lines.append(f"| {way.label} | {codec} | refused: {c.error} | | | | | | |")
                continue
            lines.append(
                f"| {way.label} | {codec} | {c.get('blocked').cell()} | "
                f"{c.get('throughput').cell(lambda v: f'{v:.4g}')} | "
                f"{ratio_cell(paired(base.get('throughput'), c.get('throughput')))} | "
                f"{ratio_cell(paired(c.get('step_writing'), base.get('step')))} | {c.get('restart').cell()} | "
                f"{c.get('stored').cell(lambda v: f'{v:.3f}')} | {c.get('capture_bw').cell(gbps)} |")
    return lines


# The parts of a checkpoint's blocking the statistics give (VersionStats):
# the copy (the drain: synchronisation and the driver's copies), the wait
# for room in the staging (or for a free half of the fork staging), and the
# first touch of staging pages. The rest is the fork, the bookkeeping, and
# for the synchronous write the wait until durable.
PARTS = ("copy", "backpressure", "first_touch")


def breakdown(cells: Dict[tuple, Cell], codecs: List[str]) -> List[str]:
    """Where a checkpoint's blocking goes: the first checkpoint of a run
    (which maps, touches and pins its staging) apart from the later ones."""
    lines = ["| way | codec | first checkpoint blocks | later checkpoints block | of which: copy | backpressure | "
             "first touch |", "|---|---|---:|---:|---:|---:|---:|"]
    for way in WAYS[1:]:
        for codec in codecs:
            c = cells[(way.key, codec)]
            if c.runs:
                parts = " | ".join(c.get(f"later_{part}").cell() if c.get(f"later_{part}").times else "—"
                                   for part in PARTS)
                lines.append(f"| {way.label} | {codec} | {c.get('first_blocked').cell()} | "
                             f"{c.get('later_blocked').cell() if c.get('later_blocked').times else '—'} | {parts} |")
    return lines


def verdict(value: Optional[float], target: float, above: bool, gpu: bool) -> str:
    if value is None:
        return "not measured"
    met = value >= target if above else value <= target
    word = "met" if met else "missed"
    return word if gpu else f"{word} on the host analog (no GPU claim)"


def targets(cells: Dict[tuple, Cell], codecs: List[str], gpu: bool) -> List[str]:
    base = cells[("none", "none")]
    lines = ["| target | codec | measured: median [min–max] | result |", "|---|---|---:|---|"]
    for codec in codecs:
        fork, sync = cells.get(("fork", codec), Cell()), cells.get(("sync", codec), Cell())
        if fork.error and not fork.runs:
            lines.append(f"| synchronous write / forked blocking ≥ {FORK_TARGET:g}× | {codec} | — | not measured: "
                         f"fork refused ({fork.error}) |")
            lines.append(f"| step time while the child writes / without checkpoints ≤ {STEP_TARGET:g}× | {codec} "
                         "| — | not measured: fork refused |")
            continue
        r = paired(sync.get("blocked"), fork.get("blocked"))
        lines.append(f"| synchronous write / forked blocking ≥ {FORK_TARGET:g}× | {codec} | {ratio_cell(r)} | "
                     f"{verdict(r.median if r.times else None, FORK_TARGET, True, gpu)} |")
        s = paired(fork.get("step_writing"), base.get("step"))
        lines.append(f"| step time while the child writes / without checkpoints ≤ {STEP_TARGET:g}× | {codec} | "
                     f"{ratio_cell(s)} | {verdict(s.median if s.times else None, STEP_TARGET, False, gpu)} |")
    copy = cells.get(("copy", codecs[0]), Cell())
    c = paired(copy.get("capture_bw"), copy.get("floor_bw"))
    lines.append(f"| managed capture / bare D2H copy ≥ {CAPTURE_TARGET:g} | {codecs[0]} (copy into host staging) | "
                 f"{ratio_cell(c)} | {verdict(c.median if c.times else None, CAPTURE_TARGET, True, gpu)} |")
    for key in ("copy", "fork"):
        after = paired(cells.get((key, codecs[0]), Cell()).get("step_after"), base.get("step"))
        lines.append(f"| as resident on the device after the checkpoint as before: first step after it / step "
                     f"without checkpoints ≈ 1 | {codecs[0]} ({key}) | {ratio_cell(after)} | reported (a proxy: pages "
                     "left on the host would fault back in that step) |")
    return lines


def notes(args, backend: str, why_not_cuda: Optional[str], cells: Dict[tuple, Cell], nbytes: int,
          started: float, load_before) -> List[str]:
    out = [f"**{w}/{c}: {cell.error}; its later repeats were not run.**" for (w, c), cell in cells.items()
           if cell.error and cell.runs]
    if backend == "host":
        out.append(f"**Host analog, not GPU figures** (CUDA not used: {why_not_cuda}). The same loop ran on the CPU "
                   "against the test fake of the CUDA driver (tests/cpp/fake_cuda), whose managed memory is host "
                   "memory; the \"D2H\" copies are the fake's memcpy. The targets are GPU targets: no result here "
                   "claims them.")
    any_run = next((r for c in cells.values() for r in c.runs), {})
    out.append(f"State: two arrays of {any_run.get('n', '?')}³ float32 ({human(nbytes)} in all), protected with "
               f"rsg_protect_managed; {args.seconds:g} s of steps per run, a checkpoint every {args.interval:g} s "
               "of stepping, then one more checkpoint (durable at L2) restarted in a new store and checked "
               "against a checksum of the state. One process per run; runs in rotated order per repeat.")
    out.append("Checkpoint blocks: the wall time the application spent in rsg_checkpoint (and, for the synchronous "
               "write, rsg_wait until durable at L2), median per run. Step time while writing: the median step "
               "that began after rsg_checkpoint returned and before the version was durable at L2, over the "
               "median step of the run without checkpoints. Throughput: steps per second over the whole run. "
               "Managed capture: device bytes / copy_seconds of the statistics (synchronisation and the DMA copies "
               "into the staging buffer) against the bare copy of the same bytes into pinned host memory "
               "(cudaMemcpy; in the host analog the fake's cuMemcpyDtoH into malloc'd memory), measured at the "
               f"start of every run: {cells[('none', 'none')].get('floor_bw').cell(gbps)}. The staging buffer pins "
               "late (docs/gpu_late_pin.md): a run's first checkpoints may copy into pages not pinned yet, as an "
               "application's do.")
    out.append(f"Store: local.keep = 2, persistent.every = 0 (L2 only, in {args.dir or 'a fresh directory under build/crum'}), "
               "buffer.capacity auto, device.capacity 0 (twice the state for the L0 row), log level error.")
    out.append(f"The run took {time.perf_counter() - started:.0f} s; load average (1 min) {load_before[0]:.2f} before, "
               f"{os.getloadavg()[0]:.2f} after.")
    return out


def write_report(args, backend: str, device: str, why_not_cuda: Optional[str], cells: Dict[tuple, Cell], nbytes: int,
                 started: float, load_before) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    gpu = backend == "cuda"
    title = f"CRUM's evaluation: checkpoints of a unified-memory application ({device}" \
            + (")" if gpu else ", not GPU figures)")
    lines = report_header(title, SCRIPT, args)
    if not gpu:
        lines += ["**Host analog, not GPU figures.**", ""]
    machine = machine_description(args.dir or ROOT / "build" / "crum")
    machine["device"] = device
    machine["program"] = f"{SOURCE.relative_to(ROOT)} ({'nvcc' if gpu else 'host C++ compiler, fake CUDA driver'})"
    lines += machine_lines(machine)
    lines += ["## Checkpointing the application", ""] + table(cells, args.codecs) + [""]
    lines += ["## Where a checkpoint's blocking goes", "", "Medians per run over the checkpoints after the first "
              "(the first maps, touches and pins its staging); the parts are the statistics' copy_seconds, "
              "backpressure_seconds and first_touch_seconds.", ""] + breakdown(cells, args.codecs) + [""]
    lines += ["## Targets (issue 29)", ""] + targets(cells, args.codecs, gpu) + [""]
    lines += ["## Notes", ""] + [f"- {n}" for n in notes(args, backend, why_not_cuda, cells, nbytes, started,
                                                         load_before)]
    lines += ["", f"Plot: `{NAME}.png`.", ""]
    md = args.out / f"{NAME}.md"
    md.write_text("\n".join(lines))
    log(f"wrote {md}")
    plot(args, cells, title)
    for line in lines:
        if line.startswith("| ") and "×" in line:
            print(line)


def plot(args, cells: Dict[tuple, Cell], title: str) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    ways = [w for w in WAYS if w.mode]
    groups = [(w.key, {c: Series(c, c, times=cells[(w.key, c)].get("blocked").times) for c in args.codecs})
              for w in ways]
    grouped_bars(axes[0], groups)
    axes[0].set_ylabel("checkpoint blocks (s)")
    axes[0].legend(title="codec", fontsize=8)
    base = cells[("none", "none")].get("throughput")
    groups = [(w.key, {c: Series(c, c, times=paired(base, cells[(w.key, c)].get("throughput")).times)
                       for c in args.codecs}) for w in ways]
    grouped_bars(axes[1], groups, log_scale=False)
    axes[1].axhline(1.0, color="grey", lw=0.8)
    axes[1].set_ylabel("time per step with / without checkpoints (throughput ratio)")
    fig.suptitle(plot_title(title, args), fontsize=9)
    fig.tight_layout()
    png = args.out / f"{NAME}.png"
    fig.savefig(png, dpi=110)
    log(f"wrote {png}")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["auto", "cuda", "host"], default="auto",
                    help="auto (default): cuda where nvcc builds the program and it finds a GPU, else the host analog")
    ap.add_argument("--fake-driver", action="store_true",
                    help="the host analog against the test fake, as scripts/gpu_check.sh --fake-driver runs it: "
                         "implies --backend host and --smoke")
    ap.add_argument("--fake-lib", type=Path, default=ROOT / "build" / "cpp" / "tests" / "cpp" / "fake_cuda",
                    help="the folder of the fake's libcuda.so.1 (host analog; default build/cpp/tests/cpp/fake_cuda)")
    ap.add_argument("--lib-dir", type=Path, default=ROOT / "build" / "cpp" / "src",
                    help="the folder of libresurgo.so (default build/cpp/src)")
    ap.add_argument("--size", help="state size, two arrays (GPU default 1GiB; 1-16 GiB fit; host analog 16MiB)")
    ap.add_argument("--seconds", type=float, help="stepping per run (GPU default 4, --quick 2.5; host 1)")
    ap.add_argument("--interval", type=float, help="seconds of stepping between checkpoints (GPU 1, --quick 0.6; "
                                                   "host 0.25)")
    ap.add_argument("--codecs", default="none,lz4", help="pipeline.compress values (default none,lz4)")
    ap.add_argument("--ways", default=",".join(w.key for w in WAYS[1:]),
                    help="ways to checkpoint (default sync,copy,l0,fork; the baseline always runs)")
    ap.add_argument("--quick", action="store_true",
                    help=f"{QUICK_REPEATS} repeats of shorter runs (about 1.5 min on an H100)")
    ap.add_argument("--repeats", type=int, default=None, help="repeats per measure (>= 5, default 5)")
    ap.add_argument("--dir", type=Path, default=None,
                    help="where the runs write (node-local disk, never tmpfs; default: a fresh folder in build/crum, "
                         "deleted afterwards)")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"where {NAME}.md/.png go (default bench/results; --smoke: build/bench-smoke; --quick: "
                         "build/bench-quick)")
    ap.add_argument("--smoke", action="store_true", help="check that the script runs: allows --repeats < 5")
    args = ap.parse_args()
    args.argv = sys.argv[1:]
    if args.fake_driver:
        if args.backend == "cuda":
            ap.error("--fake-driver runs the host analog")
        args.backend, args.smoke = "host", True
        args.repeats = args.repeats or QUICK_REPEATS
    finish_common_args(ap, args)
    args.codecs = [c for c in args.codecs.split(",") if c.strip()]
    ways = [w for w in args.ways.split(",") if w.strip()]
    if set(ways) - set(WAY) - {"none"} or not args.codecs:
        ap.error("--ways takes sync, copy, l0, fork; --codecs at least one codec")
    WAYS[1:] = [w for w in WAYS[1:] if w.key in ways]
    return args


def main() -> None:
    args = parse_args()
    lib_dir = args.lib_dir.resolve()
    if not (lib_dir / "libresurgo.so").exists():
        sys.exit(f"{SCRIPT}: no libresurgo.so in {lib_dir}; build it:  cmake --build build/cpp --target resurgo")
    host_env = dict(os.environ)
    host_env["LD_LIBRARY_PATH"] = f"{args.fake_lib.resolve()}:{host_env.get('LD_LIBRARY_PATH', '')}".rstrip(":")
    # One folder per invocation for the program and the runs' files, so that
    # two invocations (a GPU check beside a manual run) never share them.
    parent = args.dir or ROOT / "build" / "crum"
    parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="crum-", dir=parent))
    try:
        backend, binary, env, why_not_cuda = pick_backend(args, lib_dir, scratch, host_env)
        preset = dict(GPU, **(QUICK if args.quick else {})) if backend == "cuda" else HOST
        args.size = args.size or preset["size"]
        args.seconds = args.seconds or preset["seconds"]
        args.interval = args.interval or preset["interval"]
        nbytes = parse_size(args.size)
        device = subprocess.run([str(binary), "--probe"], capture_output=True, text=True, env=env).stdout.strip()
        log(f"{device}; state {human(nbytes)}, {args.repeats} repeats of {1 + len(WAYS[1:]) * len(args.codecs)} "
            "runs")
        started, load_before = time.perf_counter(), os.getloadavg()
        cells = measure(binary, env, args, nbytes, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    write_report(args, backend, device, why_not_cuda, cells, nbytes, started, load_before)


if __name__ == "__main__":
    main()
