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

Open and restart (the fixed costs of short runs), per size: open + protect
of a fresh store (a hand-written program has nothing to open); the blocking
of checkpoints 1, 2 and 5 after open, with --slowdown-interval seconds of
computing before each (the staging buffer's pages are new; targets: 1 and
2 <= 1.5x the 5th); a restarted process's open + protect + restart of the
newest version against a process reading the same file by hand (open, read
into the array, XXH3 of the bytes through libxxhash; target <= 1.2x).

Restart and cat are measured twice: "warm" (the file was just written, so it
is read from the page cache) and "cold" (its pages were evicted with
posix_fadvise(POSIX_FADV_DONTNEED) before each repeat, which needs no root;
residency after eviction is checked with fincore when util-linux has it).

Application slowdown (--slowdown-size, default 256 MiB; 0 skips it): a
memory-bound loop sweeping the whole state runs N steps three ways in each
repeat: without checkpoints (wall W0), then with a checkpoint every
--slowdown-interval seconds of computing (default 0.4, turned into a number
of steps) in two configurations, L2 only and L2+L4 (wall W1, blocking sum B,
final wait F). Reported: W1 / (W0 + B + F), target <= 1.2.

Writes bench/results/host_checkpoint.md and .png (see --out).

    .venv/bin/python bench/host_checkpoint.py                  # full run
    .venv/bin/python bench/host_checkpoint.py --sizes 256MiB   # quick check
    .venv/bin/python bench/host_checkpoint.py --smoke --repeats 2 --sizes 16MiB \
        --slowdown-size 16MiB --slowdown-interval 0.1            # does it run?
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from _common import (GiB, MiB, Series, add_common_args, check_resources, evict,
                     finish_common_args, fmt_time, human, import_resurgo, log, machine_description,
                     machine_lines, parse_size, parse_sizes, pyplot, grouped_bars, report_header,
                     resident_fraction, timed, write_fsync)

resurgo = import_resurgo("host_checkpoint.py")

FILL_BLOCK = 16 * MiB  # elements per block when filling the state


# ----------------------------------------------------------------- helpers
def fill_state(arr: np.ndarray) -> None:
    """A deterministic, not trivially compressible pattern, block by block
    (no temporary as large as the state)."""
    n = arr.size
    for start in range(0, n, FILL_BLOCK):
        stop = min(n, start + FILL_BLOCK)
        block = arr[start:stop]
        np.multiply(np.arange(start, stop, dtype=np.float64), 1.000001e-3, out=block)
        np.sin(block, out=block)


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


# ----------------------------------------------------------- one state size
def bench_size(nbytes: int, repeats: int, root: Path, baselines: Dict[str, Callable],
               interval: float) -> dict:
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
        stats_rows = [row for row in store.stats() if row.version in measured]
        last = measured[-1]
    synchronous = [row.version for row in stats_rows if row.capture == "synchronous"]
    if synchronous:
        notes.append(f"Resurgo wrote versions {synchronous} synchronously (state larger than the "
                     "buffer): its blocking time is not the asynchronous path.")
    backpressure = [row.backpressure_seconds for row in stats_rows]
    if backpressure and max(backpressure) > 0:
        notes.append(f"Resurgo reported backpressure waits up to {fmt_time(max(backpressure))} "
                     "(included in the blocking time).")
    stored = [row.at(resurgo.L2).stored_bytes for row in stats_rows if row.version == last]

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
                level = store.last_restart.level
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

    del restored
    gc.collect()
    startup = bench_startup(state, repeats, work, interval, series, notes)
    del state
    gc.collect()
    shutil.rmtree(work, ignore_errors=True)
    return {"nbytes": nbytes, "series": series, "notes": notes, "file_bytes": file_bytes,
            "container": [p.name for p in container], "startup": startup}


# ------------------------------------------------ open, first checkpoints, restart
FIRST_CHECKPOINTS = 5  # checkpoints after open: the 1st and 2nd against the last
START_TARGETS = {"open_protect_seconds": 10e-3, "first_vs_later": 1.5, "restart_vs_hand": 1.2}

# A restarted process, timed from inside: its imports and its arrays
# (allocated and touched, as the application's own) come before the clock.
RESTARTED_RESURGO = r"""
import json, sys, time
import numpy as np
import resurgo
name, l2, l4, nbytes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
state = np.empty(nbytes // 8)
state.fill(0.0)  # the application's arrays, touched
t0 = time.perf_counter()
store = resurgo.Store(name, local_path=l2, persistent_path=l4, persistent_every=0, local_keep=2)
t1 = time.perf_counter()
store.protect("state", state)
t2 = time.perf_counter()
version = store.restart()
t3 = time.perf_counter()
store.close()
print(json.dumps({"seconds": t3 - t0, "open": t1 - t0, "protect": t2 - t1, "restart": t3 - t2,
                  "version": version, "sum": float(state[::4096].sum())}))
"""

# The same process written by hand: open the newest file, read the state's
# bytes into the array, XXH3 of them (libxxhash through ctypes: the xxhash
# module is not installed), one thread, as such a program would.
RESTARTED_BY_HAND = r"""
import ctypes, json, os, sys, time
import numpy as np
path, nbytes = sys.argv[1], int(sys.argv[2])
xxh = ctypes.CDLL("libxxhash.so.0")
xxh.XXH3_64bits.restype = ctypes.c_uint64
xxh.XXH3_64bits.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
state = np.empty(nbytes // 8)
state.fill(0.0)  # the application's arrays, touched
view = memoryview(state).cast("B")
t0 = time.perf_counter()
fd = os.open(path, os.O_RDONLY)
for offset in range(0, nbytes, 64 << 20):
    os.preadv(fd, [view[offset:offset + (64 << 20)]], offset)
os.close(fd)
digest = xxh.XXH3_64bits(state.ctypes.data, nbytes)
t1 = time.perf_counter()
print(json.dumps({"seconds": t1 - t0, "digest": digest}))
"""


def run_child(program: str, *args: str) -> dict:
    import json
    done = subprocess.run([sys.executable, "-c", program, *map(str, args)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"host_checkpoint.py: a restarted process failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def startup_config(where: Path) -> dict:
    return dict(local_path=str(where / "l2"), persistent_path=str(where / "l4"), persistent_every=0,
                local_keep=2)


def first_checkpoints(state: np.ndarray, name: str, where: Path, every: int,
                      made: bool) -> Tuple[float, List[float], List[float]]:
    """Opens a store in `where` (its L2 directory made beforehand when
    `made`: the route then prepares it at open, not at the first checkpoint),
    protects the state, takes FIRST_CHECKPOINTS checkpoints after `every`
    compute steps each. Returns open + protect, each checkpoint's blocking,
    and the first touch the first two reported."""
    config = startup_config(where)
    if made:
        (where / "l2" / name).mkdir(mode=0o700, parents=True)
        (where / "l2").chmod(0o700)
    t0 = time.perf_counter()
    store = resurgo.Store(name, **config)
    store.protect("state", state)
    opened = time.perf_counter() - t0
    blocked = []
    try:
        for v in range(FIRST_CHECKPOINTS):
            for _ in range(every):
                compute_step(state)
            blocked.append(timed(lambda: store.checkpoint(v)))
            store.wait(v, level=2)  # no backpressure: the later ones are the copy alone
        touch = [row.first_touch_seconds for row in store.stats()[:2]]
    finally:
        store.close()
    return opened, blocked, touch


def bench_startup(state: np.ndarray, repeats: int, work: Path, interval: float,
                  series: Dict[str, Series], notes: List[str]) -> Dict[str, Series]:
    """The fixed costs of a short run: open + protect, the blocking of the
    first checkpoints after open (the staging buffer's pages are new), and
    a restarted process's open + restart against a hand-written read.
    Returns the per-repeat ratios of the first checkpoints to a later one
    (keys 1 and 2), and of the first to the later one in a store whose L2
    directory was there at open (key "made"), the two stores' runs taking
    turns in each repeat."""
    nbytes = state.nbytes
    tag = human(nbytes)
    name = f"startup-{tag}"
    step_s = statistics.median(timed(lambda: compute_step(state)) for _ in range(3))
    every = max(1, int(round(interval / step_s)))
    opened = series["rsg_open"] = Series("Resurgo open + protect (hand-written: nothing)", "resurgo", 0)
    nth = []
    for k in (1, 2, FIRST_CHECKPOINTS):
        nth.append(series.setdefault(f"rsg_ckpt{k}", Series(f"Resurgo checkpoint {k} after open, blocking",
                                                            "resurgo")))
    made_first = series.setdefault("rsg_ckpt1_made", Series(
        "Resurgo checkpoint 1 after open, blocking, L2 directory there at open", "resurgo"))
    ratios = {k: Series(f"checkpoint {k} / checkpoint {FIRST_CHECKPOINTS} blocking") for k in (1, 2)}
    ratios["made"] = Series(f"checkpoint 1 / checkpoint {FIRST_CHECKPOINTS} blocking, L2 directory there at open")
    touch: List[float] = []
    for r in range(repeats):
        for made in ((False, True) if r % 2 == 0 else (True, False)):
            where = work / f"startup{r}{'-made' if made else ''}"
            open_s, blocked, first_touch = first_checkpoints(state, name, where, every, made)
            if made:
                made_first.times.append(blocked[0])
                ratios["made"].times.append(blocked[0] / blocked[-1])
                continue
            opened.times.append(open_s)
            touch += first_touch
            for s, b in zip(nth, (blocked[0], blocked[1], blocked[-1])):
                s.times.append(b)
            for k in (1, 2):
                ratios[k].times.append(blocked[k - 1] / blocked[-1])
            log(f"[{tag}] open + protect {fmt_time(open_s)}; checkpoints after open blocked "
                + ", ".join(fmt_time(b) for b in blocked))
        log(f"[{tag}] L2 directory there at open: checkpoint 1 blocked {fmt_time(made_first.times[-1])}")
    notes.append(f"First checkpoints after open: a fresh store (default `buffer.capacity`, L2 only), "
                 f"{every} compute steps ({fmt_time(every * step_s)}, for --slowdown-interval "
                 f"{interval:g} s) before each checkpoint, each waited for at L2 "
                 "before the next interval so that none waits for the previous one; first touch "
                 "reported by the first two: median " + fmt_time(statistics.median(touch)) +
                 f", max {fmt_time(max(touch))}. The same in a store whose L2 directory was made before "
                 "open (the route prepares a missing one at the first checkpoint that goes there, on the "
                 "application's thread), the two taking turns in each repeat.")
    restarted_by_hand(state, repeats, (name, startup_config(work / f"startup{repeats - 1}")), series, notes)
    return ratios


def restarted_by_hand(state: np.ndarray, repeats: int, store: tuple, series: Dict[str, Series],
                      notes: List[str]) -> None:
    """A new process's open + restart of the newest version against a new
    process reading the same file by hand, alternately first."""
    nbytes = state.nbytes
    name, config = store
    l2 = Path(config["local_path"])
    files = [p for p in l2.rglob("*.rsg") if p.is_file()]
    newest = max(files, key=lambda p: p.stat().st_mtime_ns)
    ours = series["rsg_reopen"] = Series("restarted process: Resurgo open + protect + restart "
                                         "(page cache)", "resurgo")
    hand = series["hand_read"] = Series("restarted process: hand-written open + read + XXH3 "
                                        "(page cache)", "floor")
    parts: Dict[str, List[float]] = {"open": [], "protect": [], "restart": []}
    for r in range(repeats):
        cat_seconds([newest])  # in the page cache for both
        runs = [("ours", RESTARTED_RESURGO, (name, config["local_path"], config["persistent_path"],
                                             nbytes)),
                ("hand", RESTARTED_BY_HAND, (newest, nbytes))]
        for who, program, args in (runs if r % 2 == 0 else runs[::-1]):
            got = run_child(program, *args)
            (ours if who == "ours" else hand).times.append(got["seconds"])
            if who == "ours":
                for key in parts:
                    parts[key].append(got[key])
        log(f"[{human(nbytes)}] restarted process {r + 1}/{repeats}: Resurgo open + restart "
            f"{fmt_time(ours.times[-1])}, by hand {fmt_time(hand.times[-1])}")
    notes.append("Restarted process (Resurgo), median parts: " +
                 ", ".join(f"{k} {fmt_time(statistics.median(v))}" for k, v in parts.items()) +
                 f"; both read {newest.name} from the page cache into a zeroed, touched array, in a new "
                 "Python process timed from inside (imports and the array before the clock).")


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


# ------------------------------------------------------- application slowdown
SLOWDOWN_TARGET = 1.2
SLOWDOWN_CONFIGS = {  # key: (label, overrides, level the final wait waits for)
    "l2": ("L2 only (persistent_every=0)", dict(persistent_every=0), 2),
    "l2l4": ("L2+L4 (persistent_every=1)", dict(persistent_every=1), 4),
}


def compute_step(state: np.ndarray) -> None:
    """One memory-bound sweep over the whole state, in place: x = 0.5 x + 0.25
    (two passes; the values stay bounded)."""
    np.multiply(state, 0.5, out=state)
    np.add(state, 0.25, out=state)


def run_app(state: np.ndarray, steps: int, store=None, every: int = 1,
            first_version: int = 0, wait_level: int = 2) -> Dict[str, float]:
    """Runs `steps` compute steps. With a store, a checkpoint follows every
    `every`-th step, and the run ends with store.wait(level=wait_level).
    Returns wall (all of it), blocking (sum of checkpoint calls), final (the
    last wait) and count (checkpoints)."""
    blocking = 0.0
    count = 0
    t0 = time.perf_counter()
    for i in range(1, steps + 1):
        compute_step(state)
        if store is not None and i % every == 0:
            tc = time.perf_counter()
            store.checkpoint(first_version + count)
            blocking += time.perf_counter() - tc
            count += 1
    final = 0.0
    if store is not None:
        tw = time.perf_counter()
        store.wait(level=wait_level)
        final = time.perf_counter() - tw
    return {"wall": time.perf_counter() - t0, "blocking": blocking, "final": final,
            "count": float(count)}


def bench_slowdown(nbytes: int, repeats: int, root: Path, interval: float,
                   steps: int) -> dict:
    """The application's view: wall time of a memory-bound loop with a
    checkpoint every `interval` s against the same loop without, in one run."""
    tag = human(nbytes)
    work = root / f"slowdown-{tag}"
    work.mkdir(parents=True, exist_ok=True)
    state = np.empty(nbytes // 8, dtype=np.float64)
    fill_state(state)
    for _ in range(3):  # untimed: fault the pages in, warm the caches
        compute_step(state)
    # The interval becomes a number of steps, so every run does the same
    # work and takes the same checkpoints at the same points.
    step_s = statistics.median(timed(lambda: compute_step(state)) for _ in range(5))
    every = max(1, int(round(interval / step_s)))
    if steps <= 0:  # auto: 20 checkpoints
        steps = 20 * every
    log(f"[slowdown {tag}] {steps} steps of {fmt_time(step_s)}, a checkpoint every {every} steps "
        f"(~{interval:g} s)")

    series: Dict[str, Series] = {"w0": Series("no checkpoints: wall W0")}
    for key, (label, _, _) in SLOWDOWN_CONFIGS.items():
        for part, text in (("wall", "wall W1"), ("blocking", "blocking B (sum)"),
                           ("final", "final wait F"), ("floor", "floor W0 + B + F"),
                           ("ratio", "W1 / floor"), ("slowdown", "W1 / W0"),
                           ("count", "checkpoints")):
            series[f"{key}_{part}"] = Series(f"{label}: {text}", key)
    stores = {}
    next_version = {}
    try:
        for key, (label, overrides, level) in SLOWDOWN_CONFIGS.items():
            store = resurgo.Store(f"slowdown-{key}", local_path=str(work / key / "l2"),
                                  persistent_path=str(work / key / "l4"), local_keep=2,
                                  persistent_keep=2, **overrides)
            store.protect("state", state)
            stores[key] = store
            # Untimed warm-up: the buffer's pages and the disk blocks cycled
            # by keep=2 are in use before the measured runs.
            got = run_app(state, 3 * every, store, every, 0, level)
            next_version[key] = int(got["count"])
        for r in range(repeats):
            w0 = run_app(state, steps)["wall"]
            series["w0"].times.append(w0)
            msg = [f"W0 {fmt_time(w0)}"]
            for key, (label, _, level) in SLOWDOWN_CONFIGS.items():
                got = run_app(state, steps, stores[key], every, next_version[key], level)
                next_version[key] += int(got["count"])
                floor = w0 + got["blocking"] + got["final"]
                for part in ("wall", "blocking", "final", "count"):
                    series[f"{key}_{part}"].times.append(got[part])
                series[f"{key}_floor"].times.append(floor)
                series[f"{key}_ratio"].times.append(got["wall"] / floor)
                series[f"{key}_slowdown"].times.append(got["wall"] / w0)
                msg.append(f"{key}: W1 {fmt_time(got['wall'])}, B {fmt_time(got['blocking'])}, "
                           f"F {fmt_time(got['final'])}, {int(got['count'])} checkpoints, "
                           f"W1/floor {got['wall'] / floor:.2f}")
            log(f"[slowdown {tag}] {r + 1}/{repeats}: " + "; ".join(msg))
        stats = {key: store.stats() for key, store in stores.items()}
    finally:
        for store in stores.values():
            store.close()
    notes: List[str] = []
    for key, rows in stats.items():
        sync = sum(1 for row in rows if row.capture == "synchronous")
        back = [row.backpressure_seconds for row in rows]
        first = sorted(rows, key=lambda row: row.version)[:4]
        later = sorted(row.blocking_seconds for row in rows[4:]) or [float("nan")]
        notes.append(f"{SLOWDOWN_CONFIGS[key][0]}: the first {len(first)} checkpoints after open "
                     "blocked " + ", ".join(fmt_time(row.blocking_seconds) for row in first) +
                     " (first touch of buffer pages: " +
                     ", ".join(fmt_time(row.first_touch_seconds) for row in first) +
                     f"); the median of the later ones {fmt_time(later[len(later) // 2])}.")
        if sync:
            notes.append(f"{SLOWDOWN_CONFIGS[key][0]}: {sync} checkpoints were written "
                         "synchronously (state larger than the buffer).")
        if back and max(back) > 1e-3:
            notes.append(f"{SLOWDOWN_CONFIGS[key][0]}: backpressure waits up to "
                         f"{fmt_time(max(back))}, total {fmt_time(sum(back))} over {len(rows)} "
                         "checkpoints (part of B).")
    del state
    gc.collect()
    shutil.rmtree(work, ignore_errors=True)
    return {"nbytes": nbytes, "steps": steps, "interval": interval, "every": every,
            "step_s": step_s, "series": series, "notes": notes}


# ----------------------------------------------------------------- reports
TARGETS = {
    "blocking_vs_memcpy": ("Resurgo blocking / memcpy floor", "<=", 1.2),
    "baseline_vs_blocking": ("best synchronous baseline / Resurgo blocking", ">=", 5.0),
    "restart_vs_cat": ("Resurgo restart throughput / cat throughput (page cache)", ">=", 0.8),
    "restart_vs_cat_cold": ("Resurgo restart throughput / cat throughput (cold)", None, None),
    "restart_vs_read_floor": ("Resurgo restart throughput / parallel pread into memory (page cache)", None, None),
    "read_floor_vs_cat": ("parallel pread into memory / cat throughput (the best any restore can do)", None, None),
    "durable_vs_write": ("Resurgo time to durable / write+fsync floor", None, None),
    "open_vs_memcpy": ("Resurgo open + protect / memcpy floor", None, None),
    "ckpt1_vs_later": (f"checkpoint 1 / checkpoint {FIRST_CHECKPOINTS} after open, blocking (per repeat)",
                       "<=", START_TARGETS["first_vs_later"]),
    "ckpt2_vs_later": (f"checkpoint 2 / checkpoint {FIRST_CHECKPOINTS} after open, blocking (per repeat)",
                       "<=", START_TARGETS["first_vs_later"]),
    "ckpt1_made_vs_later": (f"checkpoint 1 / checkpoint {FIRST_CHECKPOINTS} after open, L2 directory there "
                            "at open, blocking (per repeat)", None, None),
    "reopen_vs_hand": ("restarted process: Resurgo open + restart / hand-written read + XXH3 (page cache)",
                       "<=", START_TARGETS["restart_vs_hand"]),
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
    out["open_vs_memcpy"] = (s["rsg_open"].median / s["memcpy"].median, "")
    out["ckpt1_vs_later"] = (result["startup"][1].median, "")
    out["ckpt2_vs_later"] = (result["startup"][2].median, "")
    out["ckpt1_made_vs_later"] = (result["startup"]["made"].median, "")
    out["reopen_vs_hand"] = (s["rsg_reopen"].median / s["hand_read"].median, "")
    return out


def verdict(key: str, value: float) -> str:
    _, op, target = TARGETS[key]
    if op is None:
        return "(no target)"
    ok = value <= target if op == "<=" else value >= target
    return f"{op} {target:g}: {'met' if ok else '**missed**'}"


def slowdown_lines(slow: dict) -> List[str]:
    s = slow["series"]
    lines = [f"## Application slowdown ({human(slow['nbytes'])} state)", "",
             f"A memory-bound loop of {slow['steps']} steps, each sweeping the whole float64 state "
             "twice in place (`x = 0.5 x + 0.25`), run three ways in each repeat: without "
             f"checkpoints (wall **W0**), and with a checkpoint after every {slow['every']}-th "
             f"step (every {slow['interval']:g} s of computing: one step took "
             f"{fmt_time(slow['step_s'])} before the runs, so every run does the same work and "
             "the same checkpoints) in each configuration below (wall **W1**, which includes every checkpoint call, their "
             "sum **B**, and the final `store.wait` **F**: level 2 for L2 only, level 4 for "
             "L2+L4). Both stores use the default `buffer.capacity` (twice the state), "
             "`local_keep=2`, `persistent_keep=2`; L4 is a directory on the same disk. "
             "**floor = W0 + B + F** is what the run would take if the background work cost "
             "the application nothing; **W1 / floor** is computed per repeat "
             f"(target ≤ {SLOWDOWN_TARGET:g}). **W1 / W0** is the application's whole slowdown, "
             "blocking included: backpressure moves cost from the background into B, which "
             "raises the floor and lowers W1 / floor without making the run any faster.", "",
             "| configuration | checkpoints | W0 | W1 | B (sum) | F | floor | W1 / floor | target | W1 / W0 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for key, (label, _, _) in SLOWDOWN_CONFIGS.items():
        ratio = s[f"{key}_ratio"]
        ok = "met" if ratio.median <= SLOWDOWN_TARGET else "**missed**"
        count = s[f"{key}_count"]
        lines.append(
            f"| {label} | {count.median:g} [{count.min:g}–{count.max:g}] | {s['w0'].cell()} | "
            f"{s[key + '_wall'].cell()} | {s[key + '_blocking'].cell()} | "
            f"{s[key + '_final'].cell()} | {s[key + '_floor'].cell()} | "
            f"{ratio.cell(lambda v: f'{v:.3f}')} | ≤ {SLOWDOWN_TARGET:g}: {ok} | "
            f"{s[key + '_slowdown'].cell(lambda v: f'{v:.3f}')} |")
    lines.append("")
    if slow["notes"]:
        lines += [f"- {n}" for n in slow["notes"]] + [""]
    return lines


def write_markdown(path: Path, machine: Dict[str, str], results: List[dict], args,
                   global_notes: List[str], plot_name: str, slow: Optional[dict]) -> None:
    lines = report_header("Host-memory checkpoint benchmark", "host_checkpoint.py", args)
    lines += machine_lines(machine)
    lines += ["## What is measured", "",
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
              "their blocking time is their time to durable.",
              "- **Open + protect**: `resurgo.Store(...)` + `store.protect` of a fresh store "
              "(default `buffer.capacity`); a hand-written program has nothing to open (0).",
              f"- **Checkpoints 1, 2 and {FIRST_CHECKPOINTS} after open**: the blocking of each in that "
              "fresh store, each after the same compute steps (about `--slowdown-interval` seconds) "
              "and waited for at L2 before the next steps, so that none waits for another; ratios "
              "per repeat (targets ≤ 1.5).",
              "- **Restarted process**: a new Python process opens the store, protects a zeroed, "
              "touched array and restarts the newest version; the hand-written one opens the same "
              "container file, reads the state's bytes into such an array and computes XXH3 of them "
              "(libxxhash through ctypes, one thread); both timed from inside, the file in the page "
              "cache, the two alternately first (target ≤ 1.2).", ""]
    for res in results:
        tag = human(res["nbytes"])
        lines += [f"## State {tag}", "",
                  f"Container file: {', '.join(res['container'])} ({human(res['file_bytes'])}).", "",
                  "| method | median [min–max] | GiB/s (median) |", "|---|---|---|"]
        for s in res["series"].values():
            rate = f"{s.nbytes / s.median / GiB:.2f}" if s.nbytes else "—"
            lines.append(f"| {s.label} | {fmt_time(s.median)} [{fmt_time(s.min)}–{fmt_time(s.max)}] "
                         f"| {rate} |")
        lines.append("")
        opened = res["series"]["rsg_open"].median
        met = "met" if opened <= START_TARGETS["open_protect_seconds"] else "**missed**"
        lines += [f"- open + protect: {fmt_time(opened)} (target ≤ "
                  f"{fmt_time(START_TARGETS['open_protect_seconds'])} at 256 MiB: {met}).", ""]
        for k, ratio in res["startup"].items():
            lines.append(f"- {ratio.label}: {ratio.cell(lambda v: f'{v:.2f}')}.")
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
    if slow is not None:
        lines += slowdown_lines(slow)
    if global_notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in global_notes] + [""]
    lines += [f"![median times per method and size]({plot_name})", ""]
    path.write_text("\n".join(lines))


def write_plot(path: Path, results: List[dict], slow: Optional[dict]) -> None:
    plt = pyplot()
    n_groups = len(results)
    width = max(8, 2.2 * n_groups + 6)
    if slow is None:
        fig, ax = plt.subplots(figsize=(width, 6))
    else:
        fig, (ax, ax2) = plt.subplots(2, 1, figsize=(width, 10),
                                      gridspec_kw={"height_ratios": [3, 2]})
    grouped_bars(ax, [(f"state {human(r['nbytes'])}", r["series"]) for r in results])
    ax.set_ylabel("seconds (median, bars: min–max)")
    ax.set_title("Host-memory checkpoint: Resurgo vs floors and synchronous baselines")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if slow is not None:
        s = slow["series"]
        groups = [(label.split(" (")[0], {"ratio": s[f"{key}_ratio"]})
                  for key, (label, _, _) in SLOWDOWN_CONFIGS.items()]
        for _, g in groups:
            g["ratio"].label = "W1 / (W0 + B + F)"
        grouped_bars(ax2, groups, log_scale=False)
        ax2.axhline(SLOWDOWN_TARGET, color="red", linestyle="--",
                    label=f"target ≤ {SLOWDOWN_TARGET:g}")
        ax2.axhline(1.0, color="black", linewidth=0.8)
        top = max(SLOWDOWN_TARGET, max(g["ratio"].max for _, g in groups))
        bottom = min(0.8, min(g["ratio"].min for _, g in groups))
        ax2.set_ylim(bottom * 0.95, top * 1.05)
        ax2.set_ylabel("W1 / floor (median, bars: min–max)")
        ax2.set_title(f"Application slowdown: {human(slow['nbytes'])} state, a checkpoint every "
                      f"{slow['interval']:g} s")
        ax2.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


# -------------------------------------------------------------------- main
def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="256MiB,1GiB,4GiB",
                    help="state sizes, comma- or space-separated (default: %(default)s)")
    add_common_args(ap, "host_checkpoint", "target directory (node-local disk); default: a "
                    "fresh directory under /tmp")
    ap.add_argument("--slowdown-size", type=lambda t: parse_size(t) if t != "0" else 0,
                    default=256 * MiB,
                    help="state of the application-slowdown section; 0 skips it (default: 256MiB)")
    ap.add_argument("--slowdown-interval", type=float, default=0.4,
                    help="seconds of computing between checkpoints in the slowdown section, "
                         "turned into a number of steps from the measured step time "
                         "(default: 0.4)")
    ap.add_argument("--slowdown-steps", type=int, default=0,
                    help="compute steps per run in the slowdown section; 0 (default): "
                         "20 checkpoints' worth")
    args = ap.parse_args(argv)
    args.argv = argv
    finish_common_args(ap, args)
    sizes = parse_sizes(args.sizes)

    created = args.dir is None
    root = Path(tempfile.mkdtemp(prefix="resurgo-bench-", dir="/tmp")) if created else args.dir
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()

    # Peak memory: state + Resurgo's buffer (or state + memcpy destination,
    # or state + restore array). Peak disk: local_keep=2 versions + one in flight.
    for nbytes in sizes:
        check_resources("host_checkpoint.py", root, f"state {human(nbytes)}", 2.2 * nbytes,
                        3.2 * nbytes)
    if args.slowdown_size:
        # State + two stores' buffers (twice the state each); L2 and L4 of
        # both stores keep 2 versions, plus one in flight at each.
        check_resources("host_checkpoint.py", root, "the slowdown section",
                        5.2 * args.slowdown_size, 9 * args.slowdown_size)

    machine = machine_description(root, resurgo)
    load_before = os.getloadavg()[0]
    baselines, global_notes = make_baselines()
    log(f"target directory {machine['target directory']}; sizes {[human(s) for s in sizes]}, "
        f"{args.repeats} repeats")
    results = []
    slow = None
    try:
        for nbytes in sizes:
            results.append(bench_size(nbytes, args.repeats, root, baselines, args.slowdown_interval))
        if args.slowdown_size:
            slow = bench_slowdown(args.slowdown_size, args.repeats, root, args.slowdown_interval,
                                  args.slowdown_steps)
    finally:
        if created and not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    global_notes.append(f"load average (1 min) {load_before:.1f} at the start of the run and "
                        f"{os.getloadavg()[0]:.1f} at its end, on {os.cpu_count()} cores: other "
                        "jobs share the machine when it is above about 1.")
    args.out.mkdir(parents=True, exist_ok=True)
    md = args.out / "host_checkpoint.md"
    png = args.out / "host_checkpoint.png"
    write_plot(png, results, slow)
    write_markdown(md, machine, results, args, global_notes, png.name, slow)

    # Short summary on stdout.
    for res in results:
        print(f"state {human(res['nbytes'])}:")
        for key, (value, extra) in ratios(res).items():
            label = TARGETS[key][0]
            print(f"  {label:<58} {value:8.2f}  {verdict(key, value)}" + (f"  [{extra}]" if extra else ""))
    if slow is not None:
        print(f"application slowdown ({human(slow['nbytes'])}, checkpoint every "
              f"{slow['interval']:g} s):")
        for key, (label, _, _) in SLOWDOWN_CONFIGS.items():
            value = slow["series"][f"{key}_ratio"].median
            ok = "met" if value <= SLOWDOWN_TARGET else "**missed**"
            print(f"  {label + ': W1 / (W0 + B + F)':<58} {value:8.2f}  <= {SLOWDOWN_TARGET:g}: {ok}")
    print(f"wrote {md} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
