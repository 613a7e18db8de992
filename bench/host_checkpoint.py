#!/usr/bin/env python3
"""Host-memory checkpoint benchmark: Resurgo against physical floors and
against what Python users do today, all measured in the same run.

For each state size (default 256 MiB, 1 GiB, 4 GiB) and --repeats repeats
(default 5), median / min / max of:

  floors     memcpy        np.copyto into an already-touched buffer
             write+fsync   os.write in 64 MiB blocks + os.fsync (new file)
             cat           `cat FILE > /dev/null` of the Resurgo container file
  Resurgo    blocking      store.checkpoint(v): the time the caller is stopped
             to durable    from the checkpoint call until store.wait(v, level=2)
             restart       store.restart(v) in a new store (like a new process)
  baselines  numpy.save + fsync, h5py dataset + flush + fsync,
             torch.save + fsync (only when `import torch` works)

Restart and cat are measured twice: "warm" (the file was just written, so it
is read from the page cache) and "cold" (its pages were evicted with
posix_fadvise(POSIX_FADV_DONTNEED) before each repeat, which needs no root;
residency after eviction is checked with fincore when util-linux has it).

Writes bench/results/host_checkpoint.md and .png (see --out).

    .venv/bin/python bench/host_checkpoint.py                  # full run
    .venv/bin/python bench/host_checkpoint.py --sizes 256MiB   # quick check
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np

try:
    import resurgo
except ImportError as exc:  # pragma: no cover - depends on the build
    sys.exit(
        f"host_checkpoint.py: cannot import resurgo ({exc}).\n"
        "Build and install the Python package first:  make python\n"
        "(or: .venv/bin/pip install --no-build-isolation -e .), and run this\n"
        "script with that interpreter: .venv/bin/python bench/host_checkpoint.py"
    )

MiB = 1 << 20
GiB = 1 << 30
WRITE_BLOCK = 64 * MiB
FILL_BLOCK = 16 * MiB  # elements per block when filling the state

HERE = Path(__file__).resolve().parent


# ----------------------------------------------------------------- helpers
def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]i?B?|B)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size '{text}' (e.g. 256MiB, 1GiB, 4GiB)")
    value = float(m.group(1))
    unit = (m.group(2) or "B").upper()
    scale = {"B": 1, "K": 1 << 10, "M": MiB, "G": GiB, "T": 1 << 40}[unit[0]]
    if unit[0] != "B" and "I" not in unit and unit.endswith("B"):
        scale = {"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}[unit[0]]
    nbytes = int(value * scale)
    if nbytes < 8 or nbytes % 8:
        raise argparse.ArgumentTypeError(f"size '{text}' must be a positive multiple of 8 bytes")
    return nbytes


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
    """Repeated timings of one method at one size."""

    label: str
    group: str  # floor | resurgo | baseline
    nbytes: int  # bytes the method moves (for the bandwidth column)
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


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
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


def fill_state(arr: np.ndarray) -> None:
    """A deterministic, not trivially compressible pattern, block by block
    (no temporary as large as the state)."""
    n = arr.size
    for start in range(0, n, FILL_BLOCK):
        stop = min(n, start + FILL_BLOCK)
        block = arr[start:stop]
        np.multiply(np.arange(start, stop, dtype=np.float64), 1.000001e-3, out=block)
        np.sin(block, out=block)


def write_fsync(path: Path, buf: memoryview) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        off = 0
        total = len(buf)
        while off < total:
            off += os.write(fd, buf[off : off + WRITE_BLOCK])
        os.fsync(fd)
    finally:
        os.close(fd)


def timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


WARMUP_VERSIONS = 3
READ_THREADS = min(2, os.cpu_count() or 1)  # Resurgo's default pipeline.threads


def pread_into(path: Path, array: np.ndarray) -> None:
    """Reads the file into the array's memory with READ_THREADS threads."""
    target = memoryview(array).cast("B")
    size = min(path.stat().st_size, len(target))
    fd = os.open(path, os.O_RDONLY)
    try:
        def read_range(begin: int, end: int) -> None:
            for offset in range(begin, end, 4 << 20):
                os.preadv(fd, [target[offset:min(offset + (4 << 20), end)]], offset)
        step = -(-size // READ_THREADS)
        threads = [threading.Thread(target=read_range, args=(b, min(b + step, size)))
                   for b in range(0, size, step)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        os.close(fd)


def cat_seconds(files: List[Path]) -> float:
    cmd = "cat " + " ".join(f"'{f}'" for f in files) + " > /dev/null"
    t0 = time.perf_counter()
    subprocess.run(cmd, shell=True, check=True)
    return time.perf_counter() - t0


# -------------------------------------------------------------- the machine
def machine_description(target: Path) -> Dict[str, str]:
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
    info["resurgo"] = str(getattr(resurgo, "__version__", "unknown"))
    info["date"] = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return info


# ----------------------------------------------------------- one state size
def bench_size(nbytes: int, repeats: int, root: Path, baselines: Dict[str, Callable]) -> dict:
    tag = human(nbytes)
    work = root / tag
    work.mkdir(parents=True, exist_ok=True)
    n = nbytes // 8
    series: Dict[str, Series] = {}
    notes: List[str] = []

    def add(key: str, label: str, group: str, moved: int = nbytes, note: str = "") -> Series:
        series[key] = Series(label, group, moved, note=note)
        return series[key]

    log(f"[{tag}] allocating and filling the state ({n} float64)")
    state = np.empty(n, dtype=np.float64)
    fill_state(state)
    raw = memoryview(state).cast("B")

    # (a) memcpy floor: measured right before each Resurgo checkpoint (c),
    # so both see the same machine; shared machines drift within minutes.
    memcpy = add("memcpy", "memcpy floor (np.copyto)", "floor")

    # (b) write+fsync floor: a new file each repeat, like a new checkpoint.
    s = add("write_fsync", "write+fsync floor", "floor")
    path = work / "floor.bin"
    for r in range(repeats):
        s.times.append(timed(lambda: write_fsync(path, raw)))
        path.unlink()
        log(f"[{tag}] write+fsync floor {r + 1}/{repeats}: {fmt_time(s.times[-1])}")

    # (e) what users do today: synchronous writes from the caller.
    for key, (label, fn, suffix) in baselines.items():
        s = add(key, label, "baseline")
        path = work / f"baseline{suffix}"
        for r in range(repeats):
            s.times.append(timed(lambda: fn(path, state)))
            path.unlink()
            log(f"[{tag}] {label} {r + 1}/{repeats}: {fmt_time(s.times[-1])}")

    # (c) Resurgo: blocking time and time to durable on L2.
    l2 = work / "l2"
    config = dict(
        local_path=str(l2),
        persistent_every=0,
        persistent_path=str(work / "l4"),
        buffer_capacity=nbytes,
        local_keep=2,
    )
    name = f"bench-{tag}"
    blocking = add("rsg_blocking", "Resurgo checkpoint() blocking", "resurgo")
    durable = add("rsg_durable", "Resurgo time to durable (L2)", "resurgo")
    stats_rows: List[dict] = []
    with resurgo.Store(name, **config) as store:
        store.protect("state", state)
        # With local_keep=2 three files cycle through the disk; warming up
        # with three versions lets every measured one reuse freed blocks, as
        # the floor and the baselines (a file written and unlinked per
        # repeat) do. First writes to fresh blocks of a virtual disk are
        # several times slower and would otherwise bias the comparison.
        log(f"[{tag}] Resurgo warm-up checkpoints")
        for v in range(WARMUP_VERSIONS):
            store.checkpoint(v)
            store.wait(v, level=2)
        stride = max(1, n // 1024)
        dst = np.empty_like(state)
        dst.fill(0.0)  # the floor copies into an already-touched buffer
        for r in range(repeats):
            v = WARMUP_VERSIONS + r
            memcpy.times.append(timed(lambda: np.copyto(dst, state)))
            state[r::stride] += 1.0  # modify the state a little
            t0 = time.perf_counter()
            store.checkpoint(v)
            t1 = time.perf_counter()
            store.wait(v, level=2)
            t2 = time.perf_counter()
            blocking.times.append(t1 - t0)
            durable.times.append(t2 - t0)
            log(f"[{tag}] Resurgo v{v}: memcpy floor {fmt_time(memcpy.times[-1])}, blocking "
                f"{fmt_time(t1 - t0)}, durable@L2 {fmt_time(t2 - t0)}")
        del dst
        measured = range(WARMUP_VERSIONS, WARMUP_VERSIONS + repeats)
        stats_rows = [row for row in store.stats() if int(row.get("version", -1)) in measured]
        last = measured[-1]
    synchronous = [row["version"] for row in stats_rows if row.get("synchronous")]
    if synchronous:
        notes.append(f"Resurgo wrote versions {synchronous} synchronously (state larger than the "
                     "buffer): its blocking time is not the asynchronous path.")
    backpressure = [float(row.get("backpressure_seconds", 0.0)) for row in stats_rows]
    if backpressure and max(backpressure) > 0:
        notes.append(f"Resurgo reported backpressure waits up to {fmt_time(max(backpressure))} "
                     "(included in the blocking time).")
    stored = [int(row.get("stored_bytes", 0)) for row in stats_rows if row.get("version") == last]

    # Container file of the last version: the newest file in the L2 tree of
    # the size stats() reports (else the newest one holding the state).
    files = sorted((p for p in l2.rglob("*") if p.is_file()), key=lambda p: p.stat().st_mtime_ns)
    files = [p for p in files if not p.name.startswith(".") and not p.name.endswith(".tmp")]
    exact = [p for p in files if stored and p.stat().st_size == stored[0]]
    big = [p for p in files if p.stat().st_size >= nbytes // 2]
    pick = exact or big or files
    if not pick:
        raise SystemExit(f"host_checkpoint.py: no container file found under {l2}")
    container = [pick[-1]]
    if not exact:
        notes.append(f"no L2 file has the size stats() reports for v{last} "
                     f"({stored[0] if stored else 'n/a'} B); measured cat on {container[0].name}.")
    file_bytes = sum(p.stat().st_size for p in container)

    # (d) restart in a new store (as a restarted process would), into a
    # separate, touched array, then the cat floor on the same file(s).
    del raw
    restored = np.empty_like(state)
    restored.fill(0.0)
    warm = add("rsg_restart", "Resurgo restart (page cache)", "resurgo")
    cold = add("rsg_restart_cold", "Resurgo restart (cold, evicted)", "resurgo")
    # The floor of any restore: the same bytes read from the page cache into a
    # touched array of the application, on as many threads as Resurgo's
    # pipeline uses. Unlike cat, it has to write them into memory.
    read_floor = add("pread", f"parallel pread into memory ({READ_THREADS} threads, page cache)",
                     "floor", file_bytes)
    cat_warm = add("cat", "cat FILE > /dev/null (page cache)", "floor", file_bytes)
    cat_cold = add("cat_cold", "cat FILE > /dev/null (cold, evicted)", "floor", file_bytes)
    residency: List[float] = []

    def evict_container() -> None:
        for p in container:
            evict(p)
        frac = [resident_fraction(p) for p in container]
        if all(f is not None for f in frac):
            residency.append(max(frac))  # type: ignore[arg-type]

    # Each repeat measures Resurgo and its floors back to back, page cache
    # first, then cold after evicting the file from the page cache.
    with resurgo.Store(name, **config) as store:
        store.protect("state", restored)
        for r in range(repeats):
            got = None

            def do_restart() -> None:
                nonlocal got
                got = store.restart(last)

            # One untimed read first: the first reader of pages just read
            # from disk pays the kernel's LRU activation, and it must not
            # always be the same contender.
            cat_seconds(container)
            warm.times.append(timed(do_restart))
            if got != last:
                raise SystemExit(f"host_checkpoint.py: restart({last}) restored version {got}")
            if r == 0:
                if not np.array_equal(restored, state):
                    raise SystemExit("host_checkpoint.py: restored state differs from the state")
                level = store.last_restart.get("level")
                if level != 2:
                    notes.append(f"restart read from level {level}, not L2.")
            read_floor.times.append(timed(lambda: pread_into(container[0], restored)))
            cat_warm.times.append(cat_seconds(container))
            evict_container()
            cold.times.append(timed(do_restart))
            evict_container()
            cat_cold.times.append(cat_seconds(container))
            log(f"[{tag}] restart {r + 1}/{repeats}: page cache: Resurgo {fmt_time(warm.times[-1])}, "
                f"pread {fmt_time(read_floor.times[-1])}, cat {fmt_time(cat_warm.times[-1])}; cold: "
                f"Resurgo {fmt_time(cold.times[-1])}, cat {fmt_time(cat_cold.times[-1])}")
    spawn = statistics.median(cat_seconds([Path("/dev/null")]) for _ in range(5))
    notes.append(f"`cat` times include starting the process (about {fmt_time(spawn)}, the median "
                 "of `cat /dev/null`), which favours Resurgo slightly in the restart ratio.")
    if residency:
        notes.append(f"after eviction at most {100 * max(residency):.1f}% of the container file "
                     "was still in the page cache (fincore) before a cold restart.")
    else:
        notes.append("eviction (POSIX_FADV_DONTNEED) could not be checked: fincore is missing.")

    del restored, state
    gc.collect()
    shutil.rmtree(work, ignore_errors=True)
    return {"nbytes": nbytes, "series": series, "notes": notes, "file_bytes": file_bytes,
            "container": [p.name for p in container]}


# --------------------------------------------------------------- baselines
def make_baselines() -> tuple[Dict[str, tuple], List[str]]:
    notes: List[str] = []
    out: Dict[str, tuple] = {}

    def numpy_save(path: Path, arr: np.ndarray) -> None:
        with open(path, "wb") as f:
            np.save(f, arr)
            f.flush()
            os.fsync(f.fileno())

    out["numpy"] = ("numpy.save + fsync", numpy_save, ".npy")

    try:
        import h5py

        def h5py_write(path: Path, arr: np.ndarray) -> None:
            with h5py.File(path, "w") as f:
                f.create_dataset("state", data=arr)
                f.flush()
                fd = f.id.get_vfd_handle()
                os.fsync(fd if isinstance(fd, int) else fd.fileno())

        out["h5py"] = (f"h5py {h5py.__version__} dataset + flush + fsync", h5py_write, ".h5")
    except ImportError as exc:
        notes.append(f"h5py baseline skipped: {exc}")

    try:
        import torch  # optional: never a dependency

        def torch_save(path: Path, arr: np.ndarray) -> None:
            with open(path, "wb") as f:
                torch.save(torch.from_numpy(arr), f)
                f.flush()
                os.fsync(f.fileno())

        out["torch"] = (f"torch.save + fsync (torch {torch.__version__})", torch_save, ".pt")
    except Exception as exc:  # noqa: BLE001 - any import failure means: skip
        notes.append(f"torch.save baseline skipped: `import torch` failed ({type(exc).__name__}: "
                     f"{exc}); torch is optional and not installed by the project.")
    return out, notes


# ----------------------------------------------------------------- reports
TARGETS = {
    "blocking_vs_memcpy": ("Resurgo blocking / memcpy floor", "<=", 1.2),
    "baseline_vs_blocking": ("best synchronous baseline / Resurgo blocking", ">=", 5.0),
    "restart_vs_cat": ("Resurgo restart throughput / cat throughput (page cache)", ">=", 0.8),
    "restart_vs_cat_cold": ("Resurgo restart throughput / cat throughput (cold)", None, None),
    "restart_vs_read_floor": ("Resurgo restart throughput / parallel pread into memory (page cache)", None, None),
    "read_floor_vs_cat": ("parallel pread into memory / cat throughput (the best any restore can do)", None, None),
    "durable_vs_write": ("Resurgo time to durable / write+fsync floor", None, None),
}


def ratios(result: dict) -> Dict[str, tuple]:
    s = result["series"]
    nbytes = result["nbytes"]
    fbytes = result["file_bytes"]
    out: Dict[str, tuple] = {}
    out["blocking_vs_memcpy"] = (s["rsg_blocking"].median / s["memcpy"].median, "")
    base = [v for v in s.values() if v.group == "baseline"]
    if base:
        best = min(base, key=lambda v: v.median)
        out["baseline_vs_blocking"] = (best.median / s["rsg_blocking"].median, best.label)
    for key, r, c in (("restart_vs_cat", "rsg_restart", "cat"),
                      ("restart_vs_cat_cold", "rsg_restart_cold", "cat_cold")):
        out[key] = ((nbytes / s[r].median) / (fbytes / s[c].median), "")
    out["restart_vs_read_floor"] = ((nbytes / s["rsg_restart"].median) / (fbytes / s["pread"].median), "")
    out["read_floor_vs_cat"] = (s["cat"].median / s["pread"].median, "")
    out["durable_vs_write"] = (s["rsg_durable"].median / s["write_fsync"].median, "")
    return out


def verdict(key: str, value: float) -> str:
    _, op, target = TARGETS[key]
    if op is None:
        return "(no target)"
    ok = value <= target if op == "<=" else value >= target
    return f"{op} {target:g}: {'met' if ok else '**missed**'}"


def write_markdown(path: Path, machine: Dict[str, str], results: List[dict], args,
                   global_notes: List[str], plot_name: str) -> None:
    lines = ["# Host-memory checkpoint benchmark", ""]
    lines += [f"Generated by `bench/host_checkpoint.py {' '.join(args.argv)}`".rstrip() + "; "
              f"median [min–max] of {args.repeats} repeats, all measured in the same run.", ""]
    lines += ["## Machine", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in machine.items()]
    lines += ["", "## What is measured", "",
              "- **memcpy floor**: `np.copyto` into an already-touched buffer of the same size.",
              "- **write+fsync floor**: `os.write` in 64 MiB blocks to a new file + `os.fsync`.",
              "- **Resurgo blocking**: `store.checkpoint(v)` with `buffer_capacity` = state size, "
              "`persistent_every=0`, `local_keep=2`, after three warm-up checkpoints; the state is "
              "modified a little before each checkpoint.",
              "- **Resurgo time to durable**: from the `checkpoint(v)` call until "
              "`store.wait(v, level=2)` returns.",
              "- **Resurgo restart**: `store.restart(v)` in a new store into a separate "
              "(touched) array, as a restarted process would.",
              "- **cat**: `cat FILE > /dev/null` of the same container file, timed as a subprocess.",
              "- **Page cache**: the page cache was *not* dropped (that needs root). The "
              "\"page cache\" restart and cat rows read a file that had just been written, so they "
              "are served from memory. The \"cold\" rows first evict the file's pages with "
              "`posix_fadvise(POSIX_FADV_DONTNEED)` (no root needed), so they read the disk.",
              "- **Baselines**: synchronous writes from the caller, each followed by `fsync`; "
              "their blocking time is their time to durable.", ""]
    for res in results:
        tag = human(res["nbytes"])
        lines += [f"## State {tag}", "",
                  f"Container file: {', '.join(res['container'])} ({human(res['file_bytes'])}).", "",
                  "| method | median [min–max] | GiB/s (median) |", "|---|---|---|"]
        for s in res["series"].values():
            rate = s.nbytes / s.median / GiB
            lines.append(f"| {s.label} | {fmt_time(s.median)} [{fmt_time(s.min)}–{fmt_time(s.max)}] "
                         f"| {rate:.2f} |")
        lines.append("")
        if res["notes"]:
            lines += [f"- {n}" for n in res["notes"]] + [""]
    lines += ["## Ratios (medians)", "",
              "| ratio | " + " | ".join(human(r["nbytes"]) for r in results) + " | target |",
              "|---|" + "---|" * len(results) + "---|"]
    table = [ratios(r) for r in results]
    for key, (label, op, target) in TARGETS.items():
        if not all(key in t for t in table):
            continue
        cells = []
        for t in table:
            value, extra = t[key]
            cells.append(f"{value:.2f} ({verdict(key, value).split(': ')[-1]})" if op else f"{value:.2f}")
        tgt = f"{op} {target:g}" if op else "—"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {tgt} |")
    best = {human(r["nbytes"]): t["baseline_vs_blocking"][1] for r, t in zip(results, table)
            if "baseline_vs_blocking" in t}
    if best:
        lines += ["", "Best synchronous baseline per size: " +
                  ", ".join(f"{k}: {v}" for k, v in best.items()) + "."]
    lines += ["", "Restart throughput is the state size over the restart time; cat throughput is "
              "the container file size over the cat time.", ""]
    if global_notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in global_notes] + [""]
    lines += [f"![median times per method and size]({plot_name})", ""]
    path.write_text("\n".join(lines))


def write_plot(path: Path, results: List[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys: List[str] = []
    for res in results:
        for k in res["series"]:
            if k not in keys:
                keys.append(k)
    labels = {k: s.label for res in results for k, s in res["series"].items()}
    n_groups = len(results)
    width = 0.8 / max(1, len(keys))
    fig, ax = plt.subplots(figsize=(max(8, 2.2 * n_groups + 6), 6))
    cmap = plt.get_cmap("tab20")
    for i, key in enumerate(keys):
        xs, meds, lo, hi = [], [], [], []
        for g, res in enumerate(results):
            s = res["series"].get(key)
            if s is None:
                continue
            xs.append(g - 0.4 + width * (i + 0.5))
            meds.append(s.median)
            lo.append(s.median - s.min)
            hi.append(s.max - s.median)
        ax.bar(xs, meds, width, yerr=[lo, hi], capsize=2, label=labels[key], color=cmap(i % 20))
    ax.set_xticks(range(n_groups))
    ax.set_xticklabels([f"state {human(r['nbytes'])}" for r in results])
    ax.set_yscale("log")
    ax.set_ylabel("seconds (median, bars: min–max)")
    ax.set_title("Host-memory checkpoint: Resurgo vs floors and synchronous baselines")
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -------------------------------------------------------------------- main
def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="256MiB,1GiB,4GiB",
                    help="state sizes, comma- or space-separated (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=5, help="repeats per measure (>= 5; default 5)")
    ap.add_argument("--dir", type=Path, default=None,
                    help="target directory (node-local disk); default: a fresh directory under /tmp")
    ap.add_argument("--out", type=Path, default=HERE / "results",
                    help="where host_checkpoint.md/.png go (default: bench/results)")
    ap.add_argument("--keep", action="store_true", help="keep the target directory")
    args = ap.parse_args(argv)
    args.argv = argv
    sizes = [parse_size(t) for t in re.split(r"[,\s]+", args.sizes.strip()) if t]
    if args.repeats < 5:
        ap.error("--repeats must be at least 5 (median/min/max of >= 5 repeats)")

    created = args.dir is None
    root = Path(tempfile.mkdtemp(prefix="resurgo-bench-", dir="/tmp")) if created else args.dir
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()

    # Peak memory: state + Resurgo's buffer (or state + memcpy destination,
    # or state + restore array). Peak disk: local_keep=2 versions + one in flight.
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable"))
    except (OSError, StopIteration):
        avail = None
    free_disk = shutil.disk_usage(root).free
    for nbytes in sizes:
        if avail is not None and 2.2 * nbytes > avail:
            sys.exit(f"host_checkpoint.py: state {human(nbytes)} needs about {human(2.2 * nbytes)} "
                     f"of memory; {human(avail)} is available")
        if 3.2 * nbytes > free_disk:
            sys.exit(f"host_checkpoint.py: state {human(nbytes)} needs about {human(3.2 * nbytes)} "
                     f"free in {root}; {human(free_disk)} is free")

    machine = machine_description(root)
    baselines, global_notes = make_baselines()
    log(f"target directory {machine['target directory']}; sizes {[human(s) for s in sizes]}, "
        f"{args.repeats} repeats")
    results = []
    try:
        for nbytes in sizes:
            results.append(bench_size(nbytes, args.repeats, root, baselines))
    finally:
        if created and not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    args.out.mkdir(parents=True, exist_ok=True)
    md = args.out / "host_checkpoint.md"
    png = args.out / "host_checkpoint.png"
    write_plot(png, results)
    write_markdown(md, machine, results, args, global_notes, png.name)

    # Short summary on stdout.
    for res in results:
        print(f"state {human(res['nbytes'])}:")
        for key, (value, extra) in ratios(res).items():
            label = TARGETS[key][0]
            print(f"  {label:<58} {value:8.2f}  {verdict(key, value)}" + (f"  [{extra}]" if extra else ""))
    print(f"wrote {md} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
