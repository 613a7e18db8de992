#!/usr/bin/env python3
"""Compression and forked checkpointing (the study of the CRUM paper's Table
II): a float32 state written synchronously (raw or compressed) against
Resurgo's copy and fork capture, all measured in the same run.

For each state size (--sizes, default 2 GiB and 4 GiB), each content
(--contents: "random", 100 % random floats; "half", 50 % random, see
fill_state) and each row (--rows), median [min–max] of --repeats (>= 5) of:

  blocking          how long the application is stopped by the call
  time to durable   until the data is on disk: fsync done (synchronous rows),
                    store.wait(v, level=2) returned (Resurgo rows)
  stored size       bytes on disk (Resurgo: the files of that version in L2)
  parent slowdown   Resurgo rows: mean time of a memory-bound step that
                    rewrites a rotating 10 % of the state, while the
                    background write is in flight / the same before the
                    checkpoint

Rows (--rows, comma-separated, default all):
  floor          memcpy floor (np.copyto into a touched buffer) and
                 write+fsync floor (os.write in 64 MiB blocks + os.fsync)
  naive          state.tofile + flush + os.fsync
  gzip           zlib level 1 (gzip container), streamed in 64 MiB blocks,
                 + write + fsync
  lz4            lz4.frame (default, fast level), streamed + write + fsync
  zstd           zstandard level 1, streamed + write + fsync
  shuffle-zstd   blosc2: byte shuffle (typesize 4) + zstd clevel 1, one
                 thread, 64 MiB chunks + write + fsync
  copy           resurgo.Store(..., capture_mode="copy")
  fork           resurgo.Store(..., capture_mode="fork")

Resurgo rows use persistent_every=0, local_keep=2, buffer_capacity = state
size, pipeline_compress = --resurgo-compress (default zstd, level 1), three
untimed warm-up checkpoints per store. If this build of resurgo rejects the
key capture.mode, the fork row is skipped with a message and the copy row
runs without the key (copy is then the only capture there is).

Writes bench/results/compression_fork.md and .png (see --out).

--mixed runs another study instead: capture.mode copy, fork and auto (copy
or fork per region from its measured write share) on a mixed state (one
write-heavy and one read-mostly region of --mixed-size each) and on single
regions of given write shares; blocking, parent slowdown and parent time
lost (application thread CPU), with auto's ratios against the better of
copy and fork. Each mode runs in a process of its own, the three modes'
checkpoint cycles interleaved (one at a time, in an order rotated at each
version). It writes compression_fork_mixed.md and .png.

    .venv/bin/python bench/compression_fork.py                    # full run
    .venv/bin/python bench/compression_fork.py --smoke --repeats 2 --sizes 32MiB \\
        --rows floor,naive,zstd,copy                              # does it run?
    .venv/bin/python bench/compression_fork.py --mixed            # auto, a few minutes
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from _common import (GiB, MiB, WRITE_BLOCK, Series, add_common_args, check_resources,
                     finish_common_args, fmt_time, grouped_bars, human, import_resurgo, log,
                     machine_description, machine_lines, parse_size, parse_sizes, plot_title,
                     pyplot, report_header, timed, tree_bytes, write_fsync)

SCRIPT = "compression_fork.py"
resurgo = import_resurgo(SCRIPT)

ITEM = 4  # float32
FILL_BLOCK = MiB // ITEM  # elements per block of the "half" content (1 MiB)
PATTERN_PERIOD = 4096  # elements (16 KiB): within the window of every codec
WARMUP_VERSIONS = 3
SWEEP_STEPS = 10  # steps of the parent loop per sweep of the whole state (10 % each)

CONTENTS = {
    "random": "100 % random",
    "half": "50 % random",
}
ALL_ROWS = ["floor", "naive", "gzip", "lz4", "zstd", "shuffle-zstd", "copy", "fork"]

TARGET_FORK_MS_PER_GIB = 12.0
TARGET_NAIVE_OVER_FORK = 60.0
TARGET_SLOWDOWN = 1.10


# ------------------------------------------------------------------- state
def fill_state(arr: np.ndarray, content: str, seed: int) -> None:
    """random: every element uniform in [0, 1) (numpy Generator.random,
    float32: random mantissas, exponents of a uniform draw).
    half: the state in blocks of 1 MiB (262,144 elements); even blocks as
    "random", odd blocks the ramp 0, 0.25, 0.5, ..., 1023.75 repeated (period
    4096 elements = 16 KiB, exactly representable, so every codec, zlib's
    32 KiB window included, can find the repeats)."""
    rng = np.random.default_rng(seed)
    n = arr.size
    if content == "random":
        for start in range(0, n, 16 * FILL_BLOCK):
            stop = min(n, start + 16 * FILL_BLOCK)
            rng.random(stop - start, dtype=np.float32, out=arr[start:stop])
        return
    ramp = np.tile(np.arange(PATTERN_PERIOD, dtype=np.float32) * np.float32(0.25),
                   FILL_BLOCK // PATTERN_PERIOD)
    for b, start in enumerate(range(0, n, FILL_BLOCK)):
        stop = min(n, start + FILL_BLOCK)
        if b % 2 == 0:
            rng.random(stop - start, dtype=np.float32, out=arr[start:stop])
        else:
            arr[start:stop] = ramp[: stop - start]


class ParentLoop:
    """The application: each step rewrites a rotating tenth of the state in
    place with np.negative (memory-bound; exact and reversible, so the
    content, and how well it compresses, never changes)."""

    def __init__(self, state: np.ndarray) -> None:
        self.state = state
        self.slice = -(-state.size // SWEEP_STEPS)
        self.i = 0

    def step(self) -> float:
        start = (self.i % SWEEP_STEPS) * self.slice
        self.i += 1
        part = self.state[start : start + self.slice]
        t0 = time.perf_counter()
        np.negative(part, out=part)
        return time.perf_counter() - t0


def resident_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


# ------------------------------------------------------------------ rows
class Row:
    """The measures of one method for one (size, content)."""

    def __init__(self, key: str, label: str, group: str) -> None:
        self.key = key
        self.label = label
        self.group = group  # floor | sync | resurgo
        self.blocking = Series(label, group)
        self.durable = Series(label, group)
        self.stored = Series(label, group)  # bytes, in .times
        self.slowdown = Series(label, group)
        self.rss = Series(label, group)  # bytes resident at the checkpoint
        self.notes: List[str] = []


def stream_compressed(path: Path, state: np.ndarray, make: Callable[[], Tuple[Callable, Callable]]
                      ) -> None:
    """Compresses the state in 64 MiB blocks (compress(block) -> bytes, then
    flush() -> bytes), writing each result as it comes, then fsync."""
    compress, flush = make()
    step = WRITE_BLOCK // ITEM
    with open(path, "wb") as f:
        for start in range(0, state.size, step):
            f.write(compress(state[start : start + step]))
        f.write(flush())
        f.flush()
        os.fsync(f.fileno())


def sync_writers(rows: List[str]) -> Tuple[Dict[str, Tuple[str, Callable]], List[str]]:
    """The synchronous rows asked for whose library imports: key -> (label,
    fn(path, state))."""
    out: Dict[str, Tuple[str, Callable]] = {}
    notes: List[str] = []

    if "naive" in rows:
        def naive(path: Path, state: np.ndarray) -> None:
            with open(path, "wb") as f:
                state.tofile(f)
                f.flush()
                os.fsync(f.fileno())

        out["naive"] = ("naive: tofile + fsync", naive)

    if "gzip" in rows:
        import zlib

        def gzip1(path: Path, state: np.ndarray) -> None:
            def make():
                c = zlib.compressobj(1, zlib.DEFLATED, 31)  # wbits 31: gzip container
                return c.compress, c.flush
            stream_compressed(path, state, make)

        out["gzip"] = (f"gzip -1 (zlib {zlib.ZLIB_RUNTIME_VERSION}) + fsync", gzip1)

    def optional(key: str, module: str, build: Callable) -> None:
        if key not in rows:
            return
        try:
            out[key] = build(__import__(module, fromlist=["_"]))
        except ImportError as exc:
            notes.append(f"row {key} skipped: cannot import {module} ({exc}); "
                         "make python installs it into .venv")
            log(f"row {key} skipped: cannot import {module} ({exc})")

    def build_lz4(lz4frame):
        import lz4

        def fn(path: Path, state: np.ndarray) -> None:
            def make():
                c = lz4frame.LZ4FrameCompressor()
                head = [c.begin()]

                def compress(block):
                    data = c.compress(block)
                    if head:
                        data = head.pop() + data
                    return data
                return compress, c.flush
            stream_compressed(path, state, make)

        return (f"lz4 frame (python-lz4 {lz4.__version__}) + fsync", fn)

    def build_zstd(zstandard):
        def fn(path: Path, state: np.ndarray) -> None:
            def make():
                c = zstandard.ZstdCompressor(level=1).compressobj()
                return c.compress, c.flush
            stream_compressed(path, state, make)

        return (f"zstd -1 (zstandard {zstandard.__version__}) + fsync", fn)

    def build_shuffle(blosc2):
        def fn(path: Path, state: np.ndarray) -> None:
            def make():
                def compress(block):
                    return blosc2.compress2(block, typesize=ITEM, clevel=1,
                                            filters=[blosc2.Filter.SHUFFLE],
                                            codec=blosc2.Codec.ZSTD, nthreads=1)
                return compress, lambda: b""
            stream_compressed(path, state, make)

        return (f"shuffle + zstd -1 (blosc2 {blosc2.__version__}, 1 thread) + fsync", fn)

    optional("lz4", "lz4.frame", build_lz4)
    optional("zstd", "zstandard", build_zstd)
    optional("shuffle-zstd", "blosc2", build_shuffle)
    return out, notes


def probe_capture_modes(root: Path, modes: List[str], notes: List[str]) -> Dict[str, bool]:
    """For each mode asked for: True when this build accepts
    capture_mode=mode, False when copy runs without the key (copy is then
    the only capture), absent when the row is skipped (printed and noted)."""
    out: Dict[str, bool] = {}
    for mode in modes:
        probe = root / f"probe-{mode}"
        try:
            resurgo.Store(f"probe-{mode}", local_path=str(probe), persistent_every=0,
                          capture_mode=mode).close()
            out[mode] = True
        except resurgo.ConfigError as exc:
            if mode == "copy":
                out[mode] = False
                notes.append("this build of resurgo does not know the key `capture.mode`; the "
                             "copy rows ran without it (copying into the buffer is its only "
                             f"capture): {exc}")
                log(f"capture.mode rejected ({exc}); the copy rows run without the key")
            else:
                print(f"{SCRIPT}: this build of resurgo rejects capture_mode=\"{mode}\" "
                      f"(configuration key 'capture.mode'): {exc}\n"
                      f"{SCRIPT}: skipping the Resurgo {mode} rows; the others run.",
                      file=sys.stderr, flush=True)
                notes.append(f"Resurgo {mode} rows skipped: this build rejects the configuration "
                             f"key `capture.mode` = `\"{mode}\"` ({exc}).")
        finally:
            shutil.rmtree(probe, ignore_errors=True)
    return out


RESURGO_CODECS = ("none", "lz4", "zstd", "blosc-lz4", "blosc-zstd")


def open_store(name: str, l2: Path, nbytes: int, mode: str, use_key: bool, compress: str):
    config = dict(local_path=str(l2), persistent_every=0, local_keep=2, buffer_capacity=nbytes,
                  pipeline_compress=compress, pipeline_compress_level=1)
    if use_key:
        config["capture_mode"] = mode
    return resurgo.Store(name, **config)


def bench_resurgo(row: Row, store, state: np.ndarray, l2: Path, repeats: int, tag: str) -> None:
    """Warm-up, then per repeat: a sweep of parent steps (before), the
    checkpoint (blocking), parent steps until store.wait(v, 2) returns in
    another thread (during; time to durable), the files of v (stored)."""
    loop = ParentLoop(state)
    store.protect("state", state)
    for v in range(WARMUP_VERSIONS):
        store.checkpoint(v)
        store.wait(v, level=2)
    during_counts: List[int] = []
    for r in range(repeats):
        v = WARMUP_VERSIONS + r
        before = [loop.step() for _ in range(SWEEP_STEPS)]
        row.rss.times.append(resident_bytes())
        done = threading.Event()
        t_done: List[float] = []
        failure: List[BaseException] = []

        def waiter() -> None:
            try:
                store.wait(v, level=2)
            except BaseException as exc:  # noqa: BLE001 - reported below
                failure.append(exc)
            t_done.append(time.perf_counter())
            done.set()

        t0 = time.perf_counter()
        store.checkpoint(v)
        t1 = time.perf_counter()
        th = threading.Thread(target=waiter)
        th.start()
        during = []
        while not done.is_set():
            during.append(loop.step())
        th.join()
        if failure:
            raise failure[0]
        row.blocking.times.append(t1 - t0)
        row.durable.times.append(t_done[0] - t0)
        row.slowdown.times.append(statistics.fmean(during) / statistics.fmean(before))
        during_counts.append(len(during))
        files = tree_bytes(l2, f"v{v:010d}.")
        if files == 0:
            stats = {s.version: s for s in store.stats()}
            files = stats[v].at(resurgo.L2).stored_bytes if v in stats else 0
            if "no-files" not in row.notes:
                row.notes.append("no-files")
        row.stored.times.append(files)
        log(f"[{tag}] {row.label} v{v}: blocking {fmt_time(t1 - t0)}, durable "
            f"{fmt_time(t_done[0] - t0)}, {human(files)}, slowdown {row.slowdown.times[-1]:.2f} "
            f"({len(during)} steps during)")
    if "no-files" in row.notes:
        row.notes.remove("no-files")
        row.notes.append("no L2 file named v<version>.* was found: stored size from stats().")
    row.notes.append(f"parent steps while the write was in flight: "
                     f"{min(during_counts)}–{max(during_counts)} per checkpoint")
    measured = [s for s in store.stats() if s.version >= WARMUP_VERSIONS]
    sync = [s.version for s in measured if s.capture == "synchronous"]
    if sync:
        row.notes.append(f"versions {sync} were written synchronously (larger than the buffer)")
    back = [s.backpressure_seconds for s in measured]
    if back and max(back) > 1e-4:
        row.notes.append(f"backpressure waits up to {fmt_time(max(back))} (part of blocking)")


# ----------------------------------------------------- one size, one content
def bench_case(nbytes: int, content: str, args, root: Path,
               writers: Dict[str, Tuple[str, Callable]]) -> dict:
    tag = f"{human(nbytes)} {CONTENTS[content]}"
    work = root / f"{human(nbytes)}-{content}"
    work.mkdir(parents=True, exist_ok=True)
    repeats = args.repeats
    rows: Dict[str, Row] = {}
    notes: List[str] = []

    log(f"[{tag}] allocating and filling the state ({nbytes // ITEM} float32)")
    state = np.empty(nbytes // ITEM, dtype=np.float32)
    fill_state(state, content, seed=nbytes + len(content))

    if "floor" in args.rows:
        memcpy = rows["memcpy"] = Row("memcpy", "memcpy floor (np.copyto)", "floor")
        dst = np.empty_like(state)
        dst.fill(0.0)  # already touched
        for r in range(repeats):
            memcpy.blocking.times.append(timed(lambda: np.copyto(dst, state)))
        del dst
        log(f"[{tag}] memcpy floor: {memcpy.blocking.cell()}")
        wf = rows["write_fsync"] = Row("write_fsync", "write+fsync floor (os.write 64 MiB + fsync)",
                                       "floor")
        raw = memoryview(state).cast("B")
        path = work / "floor.bin"
        for r in range(repeats):
            t = timed(lambda: write_fsync(path, raw))
            wf.blocking.times.append(t)
            wf.durable.times.append(t)
            wf.stored.times.append(path.stat().st_size)
            path.unlink()
        del raw
        log(f"[{tag}] write+fsync floor: {wf.blocking.cell()}")

    for key, (label, fn) in writers.items():
        row = rows[key] = Row(key, label, "sync")
        path = work / f"{key}.out"
        for r in range(repeats):
            t = timed(lambda: fn(path, state))
            row.blocking.times.append(t)
            row.durable.times.append(t)
            row.stored.times.append(path.stat().st_size)
            path.unlink()
            log(f"[{tag}] {label} {r + 1}/{repeats}: {fmt_time(t)}, {human(row.stored.times[-1])}")

    for mode, use_key in args.capture_modes.items():
        for codec in args.resurgo_compress:
            key = f"{mode}-{codec}"
            l2 = work / key
            shutil.rmtree(l2, ignore_errors=True)
            store = open_store(f"cf-{mode}-{codec}", l2, nbytes, mode, use_key, codec)
            lvl = "-1" if codec.endswith("zstd") else ""
            row = rows[key] = Row(key, f"Resurgo {mode} mode ({codec}{lvl})", "resurgo")
            try:
                with store:
                    bench_resurgo(row, store, state, l2, repeats, tag)
            except resurgo.Error as exc:
                # A mode still being built must not cost the other rows.
                print(f"{SCRIPT}: [{tag}] {row.label} failed: {type(exc).__name__}: {exc}; "
                      "row dropped", file=sys.stderr, flush=True)
                notes.append(f"{row.label} failed and was dropped: {type(exc).__name__}: {exc}")
                del rows[key]
            shutil.rmtree(l2, ignore_errors=True)

    del state
    gc.collect()
    shutil.rmtree(work, ignore_errors=True)
    return {"nbytes": nbytes, "content": content, "rows": rows, "notes": notes}


# ----------------------------------------------------------------- reports
def ratios(case: dict) -> List[Tuple[str, float, str]]:
    """(what, value, verdict) of the targets for one case."""
    rows = case["rows"]
    out: List[Tuple[str, float, str]] = []

    def check(value: float, op: str, target: float) -> str:
        ok = value <= target if op == "<=" else value >= target
        return f"{op} {target:g}: {'met' if ok else '**missed**'}"

    for key, row in rows.items():
        if row.group != "resurgo":
            continue
        fork = key.startswith("fork")
        per_gib = 1e3 * row.blocking.median / (statistics.median(row.rss.times) / GiB)
        out.append((f"{row.label}: blocking, ms per GiB resident", per_gib,
                    check(per_gib, "<=", TARGET_FORK_MS_PER_GIB) if fork else "(no target)"))
        if "naive" in rows:
            ratio = rows["naive"].blocking.median / row.blocking.median
            out.append((f"naive sync write blocking / {row.label} blocking", ratio,
                        check(ratio, ">=", TARGET_NAIVE_OVER_FORK) if fork else "(no target)"))
        slow = row.slowdown.median
        out.append((f"{row.label}: parent slowdown (step time during / before)", slow,
                    check(slow, "<=", TARGET_SLOWDOWN) if fork else "(no target)"))
        if "write_fsync" in rows:
            out.append((f"{row.label}: time to durable / write+fsync floor",
                        row.durable.median / rows["write_fsync"].durable.median, "(no target)"))
    return out


def size_cell(s: Series, nbytes: int) -> str:
    if not s.times:
        return "—"
    med = s.median
    spread = "" if s.min == s.max else f" [{human(s.min)}–{human(s.max)}]"
    return f"{human(med)}{spread} ({100 * med / nbytes:.1f} %)"


def write_markdown(path: Path, machine: Dict[str, str], cases: List[dict], args,
                   global_notes: List[str], plot_name: str) -> None:
    lines = report_header("Compression and forked checkpointing (CRUM Table II study)", SCRIPT,
                          args)
    lines += machine_lines(machine)
    lines += ["## What is measured", "",
              "- **State**: one float32 NumPy array. *100 % random*: every element uniform in "
              "[0, 1) (`numpy.random.Generator.random`). *50 % random*: blocks of 1 MiB "
              "alternate between such random floats and the ramp 0, 0.25, …, 1023.75 repeated "
              "(period 16 KiB, within every codec's window).",
              "- **Blocking**: how long the call stops the application. For the synchronous rows "
              "this is the whole compress + write + fsync; for Resurgo, `store.checkpoint(v)`.",
              "- **Time to durable**: synchronous rows: until `fsync` returned (= blocking). "
              "Resurgo: from the `checkpoint(v)` call until `store.wait(v, level=2)` returned, "
              "measured while the parent loop kept running (so it includes the competition for "
              "the cores and the memory bus).",
              "- **Stored size**: bytes on disk; for Resurgo, the files of that version "
              "(`v<version>.*`) under the store's L2 directory. In parentheses: % of the state.",
              "- **Parent slowdown** (Resurgo rows): the parent loop rewrites a rotating 10 % "
              "of the state per step (`np.negative` in place: memory-bound, exact and reversible, "
              "so the content and its compressibility stay the same). Mean step time while "
              "the background write is in flight / mean step time of the 10 steps (one sweep) "
              "right before the checkpoint. The synchronous rows stop the application for the "
              "whole write: nothing runs in parallel (—).",
              "- **Synchronous compressors** stream the state in 64 MiB blocks on the calling "
              "thread (no copy of the whole state): zlib level 1 with a gzip container, "
              "lz4.frame at its default (fast) level, zstandard level 1, and blosc2 byte shuffle "
              "(typesize 4) + zstd clevel 1 on one thread. Each repeat writes a new file that is "
              "removed afterwards.",
              f"- **Resurgo rows**: `resurgo.Store(name, local_path=DIR, persistent_every=0, "
              f"capture_mode=\"copy\"|\"fork\", pipeline_compress=…, pipeline_compress_level=1, "
              f"local_keep=2, buffer_capacity=<state size>)`, {WARMUP_VERSIONS} untimed warm-up "
              "checkpoints first (so measured writes reuse freed disk blocks, like the other "
              "rows' files).",
              "- **Floors**: memcpy (`np.copyto` into an already-touched buffer) and write+fsync "
              "(`os.write` in 64 MiB blocks to a new file + `os.fsync`) of the same state in "
              "the same run.", ""]
    for case in cases:
        nbytes = case["nbytes"]
        lines += [f"## State {human(nbytes)}, {CONTENTS[case['content']]}", "",
                  "| method | blocking | time to durable | stored size | parent slowdown | "
                  "GiB/s (state / blocking) |", "|---|---|---|---|---|---|"]
        for row in case["rows"].values():
            rate = nbytes / row.blocking.median / GiB
            lines.append(f"| {row.label} | {row.blocking.cell()} | {row.durable.cell()} | "
                         f"{size_cell(row.stored, nbytes)} | "
                         f"{row.slowdown.cell(lambda v: f'{v:.3f}')} | {rate:.2f} |")
        lines.append("")
        notes = case["notes"] + [f"{row.label}: {n}" for row in case["rows"].values()
                                 for n in row.notes]
        if notes:
            lines += [f"- {n}" for n in notes] + [""]
        table = ratios(case)
        if table:
            lines += ["| ratio (medians) | value | target |", "|---|---|---|"]
            lines += [f"| {what} | {value:.2f} | {verdict} |" for what, value, verdict in table]
            lines.append("")
    lines += ["## Targets", "",
              f"- Fork blocking ≤ {TARGET_FORK_MS_PER_GIB:g} ms per GiB resident (VmRSS of the "
              "process right before the checkpoint).",
              f"- Naive synchronous write blocking / fork blocking ≥ {TARGET_NAIVE_OVER_FORK:g}.",
              f"- Parent slowdown with fork ≤ {100 * (TARGET_SLOWDOWN - 1):.0f} % "
              f"(ratio ≤ {TARGET_SLOWDOWN:.2f}).",
              "- Copy-mode rows are reported against the same measures without a target.", ""]
    if global_notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in global_notes] + [""]
    lines += [f"![blocking, time to durable, stored size and parent slowdown]({plot_name})", ""]
    path.write_text("\n".join(lines))


def write_plot(path: Path, cases: List[dict], contents: List[str]) -> None:
    plt = pyplot()
    measures = [
        ("blocking", "blocking (s)", True, None),
        ("durable", "time to durable (s)", True, None),
        ("stored", "stored size / state size", False, "stored"),
        ("slowdown", "parent slowdown (during / before)", False, None),
    ]
    sizes = sorted({c["nbytes"] for c in cases})
    keys: List[str] = []
    for case in cases:
        keys += [k for k in case["rows"] if k not in keys]
    fig, axes = plt.subplots(len(measures), len(contents), squeeze=False,
                             figsize=(6.5 * len(contents) + 3, 3.6 * len(measures)))
    for j, content in enumerate(contents):
        mine = {c["nbytes"]: c for c in cases if c["content"] == content}
        for i, (attr, ylabel, log_scale, kind) in enumerate(measures):
            ax = axes[i][j]
            groups = []
            for nbytes in sizes:
                case = mine.get(nbytes)
                if case is None:
                    continue
                series = {k: getattr(row, attr) for k, row in case["rows"].items()}
                if kind == "stored":
                    series = {k: Series(s.label, s.group, nbytes, [t / nbytes for t in s.times])
                              for k, s in series.items()}
                groups.append((f"state {human(nbytes)}", series))
            grouped_bars(ax, groups, log_scale=log_scale, keys=keys)
            if attr == "slowdown":
                ax.axhline(TARGET_SLOWDOWN, color="red", linestyle="--",
                           label=f"fork target ≤ {TARGET_SLOWDOWN:.2f}")
                ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_ylabel(ylabel)
            if i == 0:
                ax.set_title(CONTENTS[content])
    handles, labels = {}, {}
    for ax in axes.flat:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                labels[l] = l
                handles[l] = h
    fig.legend(list(handles.values()), list(labels.values()), fontsize=8, loc="upper left",
               bbox_to_anchor=(1.0, 0.98))
    fig.suptitle("Checkpoint of a float32 state: synchronous (compressed) writes vs Resurgo "
                 "copy and fork (median, bars: min–max)")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


# ------------------------------------------------------ mixed state (--mixed)
# capture.mode = "auto" chooses copy or fork per region from the share of it
# written per interval (docs/tracking.md). Each pattern is a list of
# (region, share of it the parent writes per interval); regions of share 0
# are read (np.sum), the others rewritten in place (np.negative, exact and
# reversible) over their first `share` of elements.
MIXED_MODES = ("copy", "fork", "auto")


def mixed_patterns(size: int) -> Dict[str, List[Tuple[str, int, float]]]:
    """name -> [(label, bytes, written share)]: the same state in all."""
    return {
        "mixed: 1 write-heavy + 1 read-mostly": [("heavy", size, 1.0), ("light", size, 0.0)],
        "write-heavy (100 %)": [("field", 2 * size, 1.0)],
        "read-mostly (2 %)": [("field", 2 * size, 0.02)],
        "one region, 5 % written": [("field", 2 * size, 0.05)],
        "one region, 10 % written": [("field", 2 * size, 0.10)],
        "one region, 15 % written": [("field", 2 * size, 0.15)],
        "one region, 20 % written": [("field", 2 * size, 0.20)],
        "one region, 25 % written": [("field", 2 * size, 0.25)],
        "one region, 50 % written": [("field", 2 * size, 0.50)],
    }


class MixedLoop:
    """One step: the next tenth of each written region's hot part is negated,
    the next tenth of each read-mostly region summed; one sweep (SWEEP_STEPS
    steps) writes exactly each region's share."""

    def __init__(self, regions: List[Tuple[np.ndarray, float]]) -> None:
        self.parts = []
        for arr, share in regions:
            hot = arr[: max(1, int(arr.size * share))] if share > 0 else arr
            self.parts.append((hot, share > 0, -(-hot.size // SWEEP_STEPS)))
        self.i = 0

    def step(self) -> Tuple[float, float]:
        """(wall seconds, this thread's CPU seconds) of one step."""
        k = self.i % SWEEP_STEPS
        self.i += 1
        t0, c0 = time.perf_counter(), time.thread_time()
        for hot, writes, piece in self.parts:
            part = hot[k * piece : (k + 1) * piece]
            if writes:
                np.negative(part, out=part)
            else:
                float(np.sum(part))
        return time.perf_counter() - t0, time.thread_time() - c0


class MixedRun:
    """One mode's store on its own copy of a pattern's state. The modes of a
    pattern run side by side, one checkpoint cycle each in turn (bench_mixed_case),
    so that the shared VM's load falls on all of them alike."""

    def __init__(self, mode: str, pattern: List[Tuple[str, int, float]], args, root: Path) -> None:
        self.mode = mode
        self.arrays = []
        for i, (_, nbytes, _) in enumerate(pattern):
            arr = np.empty(nbytes // ITEM, dtype=np.float32)
            fill_state(arr, "half", seed=i)
            self.arrays.append(arr)
        self.loop = MixedLoop([(arr, share) for arr, (_, _, share) in zip(self.arrays, pattern)])
        self.pattern, self.args = pattern, args
        self.l2 = root / f"mixed-{mode}"
        self.out = {k: Series(f"{mode}", "resurgo") for k in ("blocking", "slowdown", "cpu_slowdown", "lost")}
        self.store = None
        for _ in range(2 * SWEEP_STEPS):
            self.loop.step()
        self.quiet_cpu = statistics.median(self.loop.step()[1] for _ in range(3 * SWEEP_STEPS))

    def open(self) -> None:
        """After every mode's quiet steps: a buffer's background touch would share the cores."""
        total = sum(n for _, n, _ in self.pattern)
        self.store = resurgo.Store(f"mixed-{self.mode}", local_path=str(self.l2), persistent_every=0,
                                   local_keep=2, buffer_capacity=total, pipeline_compress="none",
                                   capture_mode=self.mode, capture_auto_copy_above=self.args.copy_above)
        for arr, (label, _, _) in zip(self.arrays, self.pattern):
            self.store.protect(label, arr)

    def cycle(self, v: int) -> None:
        """A sweep, checkpoint(v), steps until v is durable; recorded after the warm-up."""
        before = [self.loop.step() for _ in range(SWEEP_STEPS)]
        t0, c0 = time.perf_counter(), time.thread_time()
        self.store.checkpoint(v)
        blocking, blocking_cpu = time.perf_counter() - t0, time.thread_time() - c0
        done = threading.Event()
        failure: List[BaseException] = []

        def waiter() -> None:
            try:
                self.store.wait(v, level=2)
            except BaseException as exc:  # noqa: BLE001 - raised below
                failure.append(exc)
            done.set()

        threading.Thread(target=waiter).start()
        during = []
        while not done.is_set():
            during.append(self.loop.step())
        if failure:
            raise failure[0]
        if v < WARMUP_VERSIONS:
            return
        step = statistics.fmean(w for w, _ in before)
        step_cpu = statistics.fmean(c for _, c in before)
        during_cpu = [c for _, c in during]
        self.out["blocking"].times.append(blocking)
        self.out["slowdown"].times.append(statistics.fmean(w for w, _ in during) / step)
        self.out["cpu_slowdown"].times.append(statistics.fmean(during_cpu) / step_cpu)
        cycle_cpu = blocking_cpu + sum(during_cpu) + sum(c for _, c in before)
        self.out["lost"].times.append(cycle_cpu - (len(during) + len(before)) * self.quiet_cpu)

    def close(self, tag: str) -> Dict[str, object]:
        captures = sorted({s.capture for s in self.store.stats() if s.version >= WARMUP_VERSIONS})
        store, self.store = self.store, None
        store.close()
        shutil.rmtree(self.l2, ignore_errors=True)
        out = self.out
        log(f"[{tag}] {self.mode}: blocking {fmt_time(out['blocking'].median)}, slowdown "
            f"{out['slowdown'].median:.2f}, CPU slowdown {out['cpu_slowdown'].median:.2f}, CPU lost "
            f"{fmt_time(out['lost'].median)} ({', '.join(captures)})")
        return {**out, "captures": captures}


def mixed_worker(conn, mode: str, pattern: List[Tuple[str, int, float]], args, root: Path, tag: str) -> None:
    """One mode in a process of its own, so that a fork copies the page tables
    of that mode's state only: runs what the parent sends ("open",
    ("cycle", v), "close") and answers each with ("ok", result) or ("error", text)."""
    run = None
    try:
        run = MixedRun(mode, pattern, args, root)
        conn.send(("ok", None))
        while True:
            what = conn.recv()
            if what == "open":
                run.open()
                conn.send(("ok", None))
            elif what == "close":
                conn.send(("ok", run.close(tag)))
                return
            else:
                run.cycle(what[1])
                conn.send(("ok", None))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises
        import traceback
        conn.send(("error", f"{mode}: {traceback.format_exc()}"))
    finally:
        if run is not None and run.store is not None:
            run.store.close()
        if run is not None:
            shutil.rmtree(run.l2, ignore_errors=True)


def bench_mixed_case(pattern: List[Tuple[str, int, float]], args, root: Path, tag: str) -> Dict[str, dict]:
    """Blocking, parent slowdowns and parent CPU lost (write_mixed_markdown
    says what each is) of --repeats checkpoints per mode. Each mode runs in a
    process of its own (mixed_worker); their checkpoint cycles alternate, one
    at a time, in an order rotated at each version."""
    import multiprocessing
    spawn = multiprocessing.get_context("spawn")
    workers = {}
    for mode in MIXED_MODES:
        parent, child = spawn.Pipe()
        proc = spawn.Process(target=mixed_worker, args=(child, mode, pattern, args, root, tag))
        proc.start()
        workers[mode] = (proc, parent)

    def ask(mode: str, what=None) -> object:
        """Sends `what` (if any) to the mode's process and returns its answer."""
        conn = workers[mode][1]
        if what is not None:
            conn.send(what)
        status, result = conn.recv()
        if status != "ok":
            sys.exit(f"{SCRIPT}: [{tag}] {result}")
        return result

    try:
        for mode in MIXED_MODES:  # every mode's quiet steps done before any store opens
            ask(mode)
        for mode in MIXED_MODES:
            ask(mode, "open")
        for v in range(WARMUP_VERSIONS + args.repeats):
            for i in range(len(MIXED_MODES)):
                ask(MIXED_MODES[(v + i) % len(MIXED_MODES)], ("cycle", v))
        return {mode: ask(mode, "close") for mode in MIXED_MODES}
    finally:
        for proc, conn in workers.values():
            conn.close()
            proc.join()


def best_of_copy_fork(results: Dict[str, dict], what: str) -> float:
    return min(results[m][what].median for m in ("copy", "fork"))


def write_mixed_markdown(path: Path, machine: Dict[str, str], cases: Dict[str, dict], args,
                         size: int, plot_name: str) -> None:
    lines = report_header("capture.mode = auto on a mixed state: copy or fork per region",
                          SCRIPT, args)
    lines += machine_lines(machine)
    lines += [f"Load average (1 min) at the start and the end of the run: {args.load[0]:.1f}, "
              f"{os.getloadavg()[0]:.1f} (the VM is shared: wall times are noisy, the CPU columns "
              "less so).", ""]
    lines += ["## What is measured", "",
              f"- **State**: float32 NumPy arrays, {human(2 * size)} in all (small sizes, to keep the "
              "run short on this shared 2-core VM), content \"50 % random\" (fill_state). "
              "*mixed*: two regions of "
              f"{human(size)}, one rewritten whole per interval, one only read; the other patterns: one "
              f"region of {human(2 * size)} whose first 2, 5, 10, 15, 20, 25, 50 or 100 % the parent "
              "rewrites per interval. Each mode has its own process (a fork copies the page tables "
              "of its own state only), state and store, all open at once; their checkpoint cycles "
              "alternate, one at a time, in an order rotated at each version, so that the shared "
              "VM's load falls on the three alike.",
              "- **Parent loop**: one step negates the next tenth of each written region's written part "
              "and sums the next tenth of each read-only region; the interval before each checkpoint "
              "is one sweep (10 steps), so each region is written exactly its share.",
              "- **Blocking**: wall time of `store.checkpoint(v)`. **Parent slowdown**: mean step "
              "wall time while the version is written (until `store.wait(v, 2)` returns) / mean step "
              "wall time of the sweep before. **CPU slowdown**: the same with the application "
              "thread's CPU time (`time.thread_time`), which a busy machine's preemption does not "
              "inflate. **Parent CPU lost**: per checkpoint, the application thread's CPU time over "
              "the whole cycle (the sweep before, `checkpoint`, the steps while the version is "
              "written) − its step count × the median CPU time of a step measured before the store "
              "was opened: what checkpointing costs the application thread in all, the faults "
              "of dirty tracking and of copy-on-write, and what a child leaves behind after it "
              "exits, included (the part of a copy done by idle pipeline threads is not, but it is "
              "in the blocking).",
              f"- **Stores**: `capture_mode` copy, fork or auto (`capture_auto_copy_above="
              f"{args.copy_above}`), `pipeline_compress=\"none\"`, `buffer_capacity` = the state, "
              f"`local_keep=2`, `persistent_every=0`, {WARMUP_VERSIONS} untimed warm-up checkpoints. "
              "*auto's capture*: the `capture` of its measured versions in `stats()`.",
              "- **Ratios**: auto's median against the better median of copy and fork (≤ 1: auto "
              "is at least as good).", ""]
    ratio = lambda x: f"{x:.2f}"  # noqa: E731
    lines += ["## Results", "",
              "| pattern | mode | blocking | parent slowdown | CPU slowdown | parent CPU lost | "
              "auto's capture |",
              "|---|---|---|---|---|---|---|"]
    for name, results in cases.items():
        for mode in MIXED_MODES:
            r = results[mode]
            lines.append(f"| {name} | {mode} | {r['blocking'].cell()} | {r['slowdown'].cell(ratio)} | "
                         f"{r['cpu_slowdown'].cell(ratio)} | {r['lost'].cell()} | "
                         f"{', '.join(r['captures']) if mode == 'auto' else ''} |")
    lines += ["", "## auto against the better of copy and fork", "",
              "Each column divides auto's median by the lower of copy's and fork's medians of that "
              "column (the better mode differs per column: fork always blocks less).", "",
              "| pattern | blocking | parent slowdown | CPU slowdown | parent CPU lost |",
              "|---|---|---|---|---|"]
    for name, results in cases.items():
        cells = [f"{results['auto'][w].median / best_of_copy_fork(results, w):.2f}"
                 for w in ("blocking", "slowdown", "cpu_slowdown", "lost")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", f"![auto against copy and fork]({plot_name})", ""]
    path.write_text("\n".join(lines))


def write_mixed_plot(path: Path, cases: Dict[str, dict], args) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(4, 1, figsize=(11, 13))
    for ax, (what, ylabel) in zip(axes, (("blocking", "blocking (s)"),
                                         ("slowdown", "parent slowdown (wall)"),
                                         ("cpu_slowdown", "parent CPU slowdown"),
                                         ("lost", "parent CPU lost (s)"))):
        groups = [(name.split(":")[0], {m: r[m][what] for m in MIXED_MODES}) for name, r in cases.items()]
        grouped_bars(ax, groups, log_scale=what == "blocking", keys=list(MIXED_MODES))
        ax.set_ylabel(ylabel)
        ax.tick_params(axis="x", labelsize=7)
    axes[0].legend(fontsize=8)
    fig.suptitle(plot_title("capture.mode copy, fork and auto per pattern", args))
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main_mixed(args, root: Path) -> int:
    args.load = os.getloadavg()
    size = parse_size(args.mixed_size, multiple=ITEM)
    # Each of the three modes' processes holds its own state, buffer and child.
    check_resources(SCRIPT, root, f"mixed state {human(2 * size)}", 3 * 6.5 * size, 3 * 6.5 * size)
    machine = machine_description(root, resurgo)
    cases: Dict[str, dict] = {}
    for name, pattern in mixed_patterns(size).items():
        cases[name] = bench_mixed_case(pattern, args, root, name)
        gc.collect()
    args.out.mkdir(parents=True, exist_ok=True)
    md = args.out / "compression_fork_mixed.md"
    png = args.out / "compression_fork_mixed.png"
    write_mixed_plot(png, cases, args)
    write_mixed_markdown(md, machine, cases, args, size, png.name)
    print(md.read_text())
    return 0


# -------------------------------------------------------------------- main
def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--sizes", default="2GiB,4GiB",
                    help="state sizes, comma- or space-separated (default: %(default)s)")
    ap.add_argument("--contents", default="random,half",
                    help="state contents: random (100 %% random), half (50 %% random); "
                         "default: %(default)s")
    ap.add_argument("--rows", default=",".join(ALL_ROWS),
                    help="rows to run, comma-separated, of: " + ", ".join(ALL_ROWS) +
                         " (default: all)")
    ap.add_argument("--resurgo-compress", default="zstd",
                    help="pipeline_compress of the Resurgo rows, comma-separated, of none, lz4, "
                         "blosc-lz4, blosc-zstd (byte shuffle by the float32 element size), "
                         "zstd (level 1); one row per codec and mode (default: %(default)s)")
    ap.add_argument("--mixed", action="store_true",
                    help="instead of the study above: copy, fork and auto on a mixed state and on "
                         "single regions of given write shares (compression_fork_mixed.md/.png)")
    ap.add_argument("--mixed-size", default="256MiB",
                    help="--mixed: bytes of each region of the mixed state (default: %(default)s)")
    ap.add_argument("--copy-above", default="0.15",
                    help="--mixed: capture.auto_copy_above of the auto stores (default: %(default)s)")
    default_dir = Path(os.environ.get("TMPDIR") or (Path(__file__).resolve().parent.parent /
                                                    "build" / "bench"))
    add_common_args(ap, "compression_fork",
                    "target directory on the local disk, never tmpfs (durability is measured); "
                    f"default: a fresh directory under {default_dir} ($TMPDIR, else build/bench), "
                    "deleted afterwards")
    args = ap.parse_args(argv)
    args.argv = argv
    finish_common_args(ap, args)
    sizes = parse_sizes(args.sizes, multiple=ITEM)
    contents = [c.strip() for c in args.contents.split(",") if c.strip()]
    args.rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    args.resurgo_compress = [c.strip() for c in args.resurgo_compress.split(",") if c.strip()]
    for c in contents:
        if c not in CONTENTS:
            ap.error(f"unknown content '{c}' (known: {', '.join(CONTENTS)})")
    for r in args.rows:
        if r not in ALL_ROWS:
            ap.error(f"unknown row '{r}' (known: {', '.join(ALL_ROWS)})")
    for c in args.resurgo_compress:
        if c not in RESURGO_CODECS:
            ap.error(f"unknown --resurgo-compress codec '{c}' ({', '.join(RESURGO_CODECS)})")

    created = args.dir is None
    if created:
        default_dir.mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix="resurgo-compression-fork-", dir=default_dir))
    else:
        root = args.dir
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()

    if args.mixed:
        try:
            return main_mixed(args, root)
        finally:
            if created and not args.keep:
                shutil.rmtree(root, ignore_errors=True)

    # Peak memory: state + memcpy destination, or state + Resurgo's buffer,
    # or (fork) state + buffer (if the mode keeps one) + the pages the parent
    # rewrites while the child writes. Peak disk: local_keep=2 versions + one
    # in flight (raw at worst).
    for nbytes in sizes:
        check_resources(SCRIPT, root, f"state {human(nbytes)}", 3.2 * nbytes, 3.2 * nbytes)

    machine = machine_description(root, resurgo)
    writers, global_notes = sync_writers(args.rows)
    args.capture_modes = probe_capture_modes(root, [m for m in ("copy", "fork") if m in args.rows],
                                             global_notes)
    if "(tmpfs " in machine["target directory"]:
        global_notes.append("the target directory is on tmpfs: fsync does not reach a disk.")
    log(f"target directory {machine['target directory']}; sizes {[human(s) for s in sizes]}, "
        f"contents {contents}, rows {args.rows}, {args.repeats} repeats")
    cases = []
    try:
        for nbytes in sizes:
            for content in contents:
                cases.append(bench_case(nbytes, content, args, root, writers))
    finally:
        if created and not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    args.out.mkdir(parents=True, exist_ok=True)
    md = args.out / "compression_fork.md"
    png = args.out / "compression_fork.png"
    write_plot(png, cases, contents)
    write_markdown(md, machine, cases, args, global_notes, png.name)

    for case in cases:
        print(f"state {human(case['nbytes'])}, {CONTENTS[case['content']]}:")
        for row in case["rows"].values():
            print(f"  {row.label:<58} blocking {fmt_time(row.blocking.median):>10}  "
                  f"durable {fmt_time(row.durable.median) if row.durable.times else '—':>10}  "
                  f"stored {human(row.stored.median) if row.stored.times else '—':>10}"
                  + (f"  slowdown {row.slowdown.median:.2f}" if row.slowdown.times else ""))
        for what, value, verdict in ratios(case):
            print(f"  {what:<70} {value:8.2f}  {verdict}")
    print(f"wrote {md} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
