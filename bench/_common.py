"""Helpers shared by the benchmark scripts in bench/ (one piece of code per
idea): sizes and times in text, repeated timings, files written and synced,
page-cache eviction, the machine description, the resources check and the
report header. Not a benchmark itself.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as _dt
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

MiB = 1 << 20
GiB = 1 << 30
WRITE_BLOCK = 64 * MiB

QUICK_REPEATS = 3  # the fewest repeats --quick allows, and its default

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SMOKE_OUT = HERE.parent / "build" / "bench-smoke"
QUICK_OUT = HERE.parent / "build" / "bench-quick"  # bench/results holds only full runs


def put_package_first(package: str) -> None:
    """Makes `import resurgo` load the package in the directory `package`
    (resurgo/ with its _core, e.g. an older build's), ahead of the editable
    install's finders; nothing when `package` is empty. How a benchmark runs
    an older build beside the current one without a venv of its own."""
    if package:
        sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__name__.startswith("ScikitBuild")]
        sys.path.insert(0, package)


def import_resurgo(script: str):
    """Imports resurgo, or exits with how to build it."""
    try:
        import resurgo
    except ImportError as exc:  # pragma: no cover - depends on the build
        sys.exit(
            f"{script}: cannot import resurgo ({exc}).\n"
            "Build and install the Python package first:  make python\n"
            "(or: .venv/bin/pip install --no-build-isolation -e .), and run this\n"
            f"script with that interpreter: .venv/bin/python bench/{script}"
        )
    return resurgo


# ----------------------------------------------------------------- text
def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_size(text: str, multiple: int = 8) -> int:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]i?B?|B)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size '{text}' (e.g. 256MiB, 1GiB, 4GiB)")
    value = float(m.group(1))
    unit = (m.group(2) or "B").upper()
    scale = {"B": 1, "K": 1 << 10, "M": MiB, "G": GiB, "T": 1 << 40}[unit[0]]
    if unit[0] != "B" and "I" not in unit and unit.endswith("B"):
        scale = {"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}[unit[0]]
    nbytes = int(value * scale)
    if nbytes < multiple or nbytes % multiple:
        raise argparse.ArgumentTypeError(
            f"size '{text}' must be a positive multiple of {multiple} bytes")
    return nbytes


def parse_sizes(text: str, multiple: int = 8) -> List[int]:
    return [parse_size(t, multiple) for t in re.split(r"[,\s]+", text.strip()) if t]


def human(nbytes: float) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", 1 << 10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:g}{unit}" if value == int(value) else f"{value:.2f}{unit}"
    return f"{int(nbytes)}B"


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


@dataclass
class Series:
    """Repeated measurements of one quantity (seconds unless said)."""

    label: str
    group: str = ""  # floor | resurgo | baseline | ...
    nbytes: int = 0  # bytes the method moves (for a bandwidth column)
    times: List[float] = field(default_factory=list)
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def max(self) -> float:
        return max(self.times)

    def cell(self, fmt: Callable[[float], str] = fmt_time) -> str:
        """'median [min–max]', or '—' when nothing was measured."""
        if not self.times:
            return "—"
        return f"{fmt(self.median)} [{fmt(self.min)}–{fmt(self.max)}]"


def timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ----------------------------------------------------------------- files
def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_fsync(path: Path, buf: memoryview) -> None:
    """os.write in WRITE_BLOCK pieces to a new file, then os.fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        off = 0
        total = len(buf)
        while off < total:
            off += os.write(fd, buf[off : off + WRITE_BLOCK])
        os.fsync(fd)
    finally:
        os.close(fd)


def evict(path: Path) -> None:
    """Drops a file's (clean) pages from the page cache; no root needed."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages cannot be dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_fraction(path: Path) -> Optional[float]:
    """Fraction of the file in the page cache (util-linux fincore), or None."""
    if not shutil.which("fincore"):
        return None
    try:
        out = subprocess.run(
            ["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES,SIZE", str(path)],
            capture_output=True, text=True, check=True,
        ).stdout.split()
        res, size = int(out[0]), int(out[1])
        return res / size if size else None
    except (subprocess.CalledProcessError, ValueError, IndexError):
        return None


def tree_bytes(path: Path, prefix: str = "") -> int:
    """Bytes of the regular files under path whose name starts with prefix."""
    return sum(p.stat().st_size for p in path.rglob(f"{prefix}*") if p.is_file())


# -------------------------------------------------------------- the machine
def machine_description(target: Path, resurgo_module=None) -> Dict[str, str]:
    info: Dict[str, str] = {}
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info["CPU"] = cpu
    info["cores (os.cpu_count)"] = str(os.cpu_count())
    try:
        info["cores usable (affinity)"] = str(len(os.sched_getaffinity(0)))
    except AttributeError:
        pass
    try:
        with open("/proc/meminfo") as f:
            mem = {l.split(":")[0]: l.split(":")[1].strip() for l in f}
        info["RAM"] = f"{int(mem['MemTotal'].split()[0]) / (1 << 20):.1f} GiB"
    except (OSError, KeyError, ValueError):
        info["RAM"] = "unknown"
    info["kernel"] = f"{platform.system()} {platform.release()}"
    try:
        df = subprocess.run(["df", "-T", str(target)], capture_output=True, text=True,
                            check=True).stdout.splitlines()[-1].split()
        info["target directory"] = f"{target} ({df[1]} on {df[0]}, mounted at {df[-1]})"
    except (subprocess.CalledProcessError, IndexError, FileNotFoundError):
        info["target directory"] = str(target)
    info["Python"] = platform.python_version()
    info["NumPy"] = np.__version__
    if resurgo_module is not None:
        info["resurgo"] = str(getattr(resurgo_module, "__version__", "unknown"))
    info["date"] = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return info


def machine_lines(machine: Dict[str, str]) -> List[str]:
    """The '## Machine' section of a report."""
    return ["## Machine", "", "| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in machine.items()] + [""]


def mem_available() -> Optional[int]:
    try:
        with open("/proc/meminfo") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable"))
    except (OSError, StopIteration):
        return None


def check_resources(script: str, root: Path, label: str, memory: float, disk: float) -> None:
    """Exits with a message when `memory` bytes of RAM or `disk` bytes free
    in root are not there."""
    avail = mem_available()
    if avail is not None and memory > avail:
        sys.exit(f"{script}: {label} needs about {human(memory)} of memory; "
                 f"{human(avail)} is available")
    free = shutil.disk_usage(root).free
    if disk > free:
        sys.exit(f"{script}: {label} needs about {human(disk)} free in {root}; {human(free)} is free")


# ------------------------------------------------------------ the command line
def add_common_args(ap: argparse.ArgumentParser, name: str, dir_help: str) -> None:
    ap.add_argument("--repeats", type=int, default=5, help="repeats per measure (>= 5; default 5)")
    ap.add_argument("--dir", type=Path, default=None, help=dir_help)
    ap.add_argument("--out", type=Path, default=None,
                    help=f"where {name}.md/.png go (default: bench/results; "
                         f"with --smoke: build/bench-smoke)")
    ap.add_argument("--keep", action="store_true", help="keep the target directory")
    ap.add_argument("--smoke", action="store_true",
                    help="check that the script runs: allows --repeats < 5 and writes to "
                         "build/bench-smoke unless --out is given; the report says it is no result")


def finish_common_args(ap: argparse.ArgumentParser, args) -> None:
    """Checks --repeats (default 5; with --quick, where a script has it, 3)
    and sets the default --out (bench/results only for full runs)."""
    quick = getattr(args, "quick", False)
    if args.repeats is None:
        args.repeats = QUICK_REPEATS if quick else 5
    least = 1 if args.smoke else QUICK_REPEATS if quick else 5
    if args.repeats < least:
        allows = f"--quick allows {QUICK_REPEATS}, --smoke fewer" if hasattr(args, "quick") else "--smoke allows fewer"
        ap.error(f"--repeats must be at least 5 (median/min/max of >= 5 repeats; {allows})")
    if args.out is None:
        args.out = SMOKE_OUT if args.smoke else QUICK_OUT if quick else RESULTS


def finish_gpu_args(ap: argparse.ArgumentParser, args) -> None:
    """finish_common_args for the GPU benchmarks (--backend, --fake-driver):
    the test fake as libcuda.so.1 means --fake-driver, which implies --smoke."""
    if not args.fake_driver and args.backend != "host" and cuda_driver_is_fake():
        log("the CUDA driver here is the test fake (tests/cpp/fake_cuda): running as with --fake-driver")
        args.fake_driver = True
    if args.fake_driver:
        if args.backend == "host":
            ap.error("--fake-driver runs the cuda backend")
        args.smoke = True
        if args.repeats is None:
            args.repeats = QUICK_REPEATS
    finish_common_args(ap, args)


def report_header(title: str, script: str, args, extra: str = "") -> List[str]:
    lines = [f"# {title}", ""]
    if args.smoke:
        lines += ["**SMOKE RUN (`--smoke`): a check that the script works, not a result.**", ""]
    if getattr(args, "fake_driver", False):
        lines += ["**FAKE CUDA DRIVER (`--fake-driver`, implied when it is the libcuda.so.1 found): the driver was "
                  "the test fake (tests/cpp/fake_cuda), whose "
                  "device memory is host memory; every code path ran, the timings mean nothing.**", ""]
    if getattr(args, "quick", False):
        lines += [f"**quick run: {args.repeats} repeats** (`--quick`: fewer rows and repeats than the full run).",
                  ""]
    lines += [f"Generated by `bench/{script} {' '.join(args.argv)}`".rstrip() + "; "
              f"median [min–max] of {args.repeats} repeats, all measured in the same run."
              + (f" {extra}" if extra else ""), ""]
    return lines


def plot_title(title: str, args) -> str:
    """A plot's title: what kind of run it was, the title, and the repeats."""
    kinds = (["SMOKE RUN, not a result"] if args.smoke else []) \
        + (["fake CUDA driver, timings meaningless"] if getattr(args, "fake_driver", False) else []) \
        + ([f"quick run: {args.repeats} repeats"] if getattr(args, "quick", False) else [])
    return "".join(f"{k} — " for k in kinds) + title + f", median [min–max] of {args.repeats}"


# ------------------------------------------------------------- GPU backends
def probe_cuda(binary: Path, args: Sequence[str]) -> Optional[str]:
    """None when `binary --backend cuda ARGS` (a short run) works here, else
    why not: the last line of its error output."""
    done = subprocess.run([str(binary), "--backend", "cuda", *args], capture_output=True, text=True)
    if done.returncode == 0:
        return None
    return (done.stderr.strip().splitlines() or [f"exit status {done.returncode}, no output"])[-1]


def cuda_driver_is_fake() -> bool:
    """Whether the libcuda.so.1 the programs would load (the same
    LD_LIBRARY_PATH) is the test fake, tests/cpp/fake_cuda, which exports
    its control API (fake_cuda_reset) beside the driver's entry points.
    Loading the library runs nothing of the driver (no cuInit)."""
    try:
        return hasattr(ctypes.CDLL("libcuda.so.1"), "fake_cuda_reset")
    except OSError:
        return False


def pick_backend(script: str, asked: str, why_not_cuda: Optional[str]) -> str:
    """The backend to run for --backend auto|cuda|host given the probe's
    answer: auto is cuda where it works, else host; cuda where it does not
    work exits with why."""
    if asked == "cuda" and why_not_cuda:
        sys.exit(f"{script}: the cuda backend is unavailable: {why_not_cuda}")
    if asked == "auto":
        return "host" if why_not_cuda else "cuda"
    return asked


# ------------------------------------------------------------------- plots
def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def grouped_bars(ax, groups: List[tuple], value: Callable[[Series], tuple] = None,
                 log_scale: bool = True, keys: Optional[List[str]] = None) -> None:
    """Bars of median with min–max error bars: one group per (name, {key:
    Series}) in groups, one colour per key (labelled with Series.label).
    value(series) -> (median, min, max) overrides what is drawn; keys fixes
    the order, colours and places of the bars (to match other axes)."""
    value = value or (lambda s: (s.median, s.min, s.max))
    order: List[str] = list(keys or [])
    labels: Dict[str, str] = {}
    for _, series in groups:
        for k, s in series.items():
            if s.times:
                labels.setdefault(k, s.label)
                if k not in order:
                    order.append(k)
    keys = order
    width = 0.8 / max(1, len(keys))
    cmap = pyplot().get_cmap("tab20")
    for i, key in enumerate(keys):
        xs, meds, lo, hi = [], [], [], []
        for g, (_, series) in enumerate(groups):
            s = series.get(key)
            if s is None or not s.times:
                continue
            med, mn, mx = value(s)
            xs.append(g - 0.4 + width * (i + 0.5))
            meds.append(med)
            lo.append(med - mn)
            hi.append(mx - med)
        if xs:
            ax.bar(xs, meds, width, yerr=[lo, hi], capsize=2, label=labels[key],
                   color=cmap(i % 20))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([name for name, _ in groups])
    if log_scale:
        ax.set_yscale("log")
    ax.grid(axis="y", which="both", alpha=0.3)
