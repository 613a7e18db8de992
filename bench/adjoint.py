"""Adjoint checkpointing benchmark: the misfit gradient of the wave example
(examples/adjoint_wave) with its checkpoints in NumPy memory, pyrevolve's
storages, checkpoint_schedules with a dict or raw files, and Resurgo with and
without schedule-driven prefetch. Writes results/adjoint.md and .png (--name
sets the name).

    .venv/bin/python bench/adjoint.py                      # 64 MiB and 512 MiB per checkpoint
    .venv/bin/python bench/adjoint.py --sizes 64MiB --rows resurgo_prefetch,cs_dict
    .venv/bin/python bench/adjoint.py --smoke --repeats 2 --sizes 4MiB --steps 40 --snapshots 6 \\
        --ram-snapshots 2 --disk-snapshots 4
    .venv/bin/python bench/adjoint.py --name adjoint_small --sizes 256KiB,1MiB --steps 2000 \\
        --snapshots 40 --ram-snapshots 10 --disk-snapshots 30 --memory-schedule multistage --rows all \\
        --repeats 7 --profile resurgo_prefetch,ms_resurgo_prefetch --perf resurgo_prefetch,ms_resurgo_prefetch

A checkpoint is the wave field's two time levels (two float64 arrays), so a
size S means a grid of S / 16 points. Two cases per size:

  memory  Revolve(steps, snapshots); every checkpoint fits in memory. With
          --memory-schedule multistage: MultistageCheckpointSchedule(steps,
          snapshots, 0), the same binomial schedule's forward steps, which
          checkpoint_schedules builds in milliseconds where its Revolve takes
          a minute at 2,000 steps (thousands-of-steps runs need it).
  disk    MultistageCheckpointSchedule(steps, ram_snapshots, disk_snapshots):
          the memory level holds ram_snapshots checkpoints, the rest go to
          files in --dir (the "checkpoints exceed the memory capacity" case).

States of 1 MiB or less (issue 27's small states, where an RTM code runs
thousands of steps) are held to issue 27's targets: wall within 1.1x of
pyrevolve's NumpyStorage in memory, 1.3x with a disk level. `--rows all`
adds pyrevolve's own Revolver with its slots in Resurgo
(resurgo.adjoint_pyrevolve, the Devito route), in memory and with every slot
in files; `--profile ROWS` runs those rows once more under cProfile per size
and writes their top functions into the report, `--perf ROWS` the same under
`perf record` (the library's C++ functions and the kernel's).

Every row of every repeat runs in a fresh subprocess (this script with
--worker), so its peak memory is that process's ru_maxrss; rows run in an
order rotated by one at each repeat. Observed traces are zeros (J is half the
energy of the synthetic traces): the cost of a step does not depend on them.
All rows must produce the same gradient bit for bit; the script stops
otherwise.

`--offcpu ROWS` runs those rows once more per size under a system-wide
record of context switches (bench/offcpu.py) and reports where the
worker's main thread was off the CPU: time no CPU profile shows, such as a
store call losing its CPU to a thread it has just woken.

`--before-package DIR` (a directory holding resurgo/ with its _core
extension, e.g. an older commit's python/resurgo with its build's _core)
adds every Resurgo row once more, run with that package ("ROW@before" rows,
labelled [before]), interleaved with the others in every repeat.

`--rotating` runs the model as Devito keeps a TimeFunction(time_order=2,
save=None): one time buffer of three levels indexed by step % 3, each step
writing the level two steps back, and pyrevolve's Checkpoint.get_data(t)
handing views of the levels of u[t-1] and u[t], new view objects over memory
that moves at every step. Without it the Checkpoint hands the same two arrays
at every step, which never times ResurgoRevolveStorage's handling of moved
arrays. Only the rows that drive the model through pyrevolve (and the ideal)
run it; all its rows must still agree bit for bit (the rotating model's
arithmetic is the fixed one's, so its gradient is the same too).

`--repoint-bytes LIST` (sizes, 0 or inf) runs each ResurgoRevolver row once
per value, with resurgo.adjoint_pyrevolve._REPOINT_BYTES set to it in the
worker ("ROW@repoint=VALUE" rows): a moved checkpoint array of at least that
many bytes has its store region pointed at it anew, a smaller one is copied
into the region's staging array. 0 re-points every moved array, inf stages
every one. The report then compares the values per row and size:

    .venv/bin/python bench/adjoint.py --rotating --name adjoint_rotating \\
        --sizes 64KiB,256KiB,1MiB,2MiB,4MiB --steps 2000 --snapshots 40 --repeats 5 \\
        --rows pyrevolve,pyrevolve_resurgo,pyrevolve_resurgo_disk --repoint-bytes 0,inf
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import hashlib
import json
import math
import os
import pstats
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    HERE, MiB, Series, add_common_args, check_resources, finish_common_args, fmt_time,
    grouped_bars, human, log, machine_description, machine_lines, mem_available, parse_size,
    parse_sizes, put_package_first, pyplot, report_header,
)
import offcpu  # noqa: E402

EXAMPLE_DIR = HERE.parent / "examples" / "adjoint_wave"  # acoustic.py, the model
FIELDS_PER_CHECKPOINT = 2
MODEL_FIELDS = 9  # state 2, scratch 1, velocity and c^2 2, adjoint 3, gradient sum 1
MEMCPY_REPEATS = 7
# Sources of a cold memcpy fill this much: twice the 32 MiB L3 of the
# machines measured here, so that each, copied once in turn, comes from DRAM.
COLD_SOURCE_BYTES = 64 * MiB
# The memory configured per version: a checkpoint plus one 2 MiB piece, what
# builds up to b01a0b4 took per version (whole pieces), so that before rows
# of such builds run with the same capacities; later builds take a version's
# container bytes, so the same memory holds more versions.
PIECE = 2 * MiB
TARGET_RESTORE_VS_MEMCPY = 1.2
TARGET_WALL_VS_MEMORY = 1.05
SMALL_STATE = MiB  # issue 27: states up to this size get its wall targets instead
TARGET_SMALL_WALL = {"memory": 1.1, "disk": 1.3}  # wall / pyrevolve's NumpyStorage, per case
PROFILE_TOP = 15  # functions in the report's profile table
PERF_TOP = 12  # entries in each of the --perf tables
PERF_RECORD = ["perf", "record", "-q", "-F", "1000", "--call-graph", "dwarf,16384"]
PERF_REPORT = ["perf", "report", "--children", "--sort", "symbol", "--stdio", "-g", "none"]
# children %, self %, [.] or [k], symbol; this perf pads each line with empty "-" columns
PERF_LINE = re.compile(r"^\s*([\d.]+)%\s+([\d.]+)%\s+\[(.)\]\s+(.*?)(?:\s+-)*\s*$")
SHOT_SCHEDULE = (1000, 40)  # Revolve steps and snapshots of a shot-sized run, for comparison
MEMORY_SCHEDULES = {"revolve": "Revolve", "multistage": "Multistage (RAM only)"}  # --memory-schedule
BEFORE = "@before"  # the suffix of a row run with --before-package
PACKAGE_VARIABLE = "ADJOINT_BENCH_PACKAGE"  # the worker imports resurgo from this directory
REPOINT = "@repoint="  # a ResurgoRevolver row run with --repoint-bytes: ROW@repoint=VALUE
# Devito's TimeFunction(time_order=2, save=None): u[t+1], u[t] and u[t-1] in
# a buffer of three levels indexed t % 3 (--rotating).
TIME_LEVELS = 3
# The rows that drive the model through pyrevolve, whose Checkpoint asks for
# the arrays at each step (and the ideal, which keeps copies): the others'
# storages hold model.state's arrays, fixed for the run, so only these run
# the rotating model.
ROTATING_ROWS = ("ideal", "pyrevolve", "pyrevolve_disk", "pyrevolve_resurgo", "pyrevolve_resurgo_disk")
ROTATING_DEFAULT_ROWS = "pyrevolve,pyrevolve_resurgo,pyrevolve_resurgo_disk"


def import_package_from_environment() -> None:
    """A worker of a before row: resurgo from $ADJOINT_BENCH_PACKAGE, ahead
    of the editable install's finders."""
    put_package_first(os.environ.get(PACKAGE_VARIABLE, ""))


def grid_shape(nbytes: int) -> Tuple[int, int]:
    """(ny, nx) of a grid whose checkpoint (two float64 fields) is nbytes: ny the
    largest power of two <= sqrt(points), so 64 MiB is 2048 x 2048 and 512 MiB
    4096 x 8192."""
    points = nbytes // (8 * FIELDS_PER_CHECKPOINT)
    ny = 1 << (points.bit_length() - 1) // 2
    if points * 8 * FIELDS_PER_CHECKPOINT != nbytes or points % ny or ny < 8:
        raise SystemExit(f"adjoint.py: a {human(nbytes)} checkpoint is not two float64 fields "
                         f"of a grid with {ny} rows; choose a multiple of {16 * ny} bytes, "
                         "e.g. a power of two of at least 1KiB")
    return ny, points // ny


# ==================================================================== worker
@dataclass
class Job:
    """What one worker process runs: one row, one size."""

    row: str
    nbytes: int
    steps: int
    snapshots: int
    ram_snapshots: int
    disk_snapshots: int
    prefetch_checkpoints: int
    directory: str
    memory_schedule: str  # a key of MEMORY_SCHEDULES
    package: str = ""  # the directory to import resurgo from (a before row), or "" for the installed one
    rotating: bool = False  # the model's field in a rotating time buffer (--rotating)
    repoint_bytes: Optional[float] = None  # _REPOINT_BYTES for the run (math.inf: never); None: the library's


def split_key(key: str) -> Tuple[str, bool, Optional[float]]:
    """A row key's row, whether it runs the before package, and its
    --repoint-bytes value (None: the library's): ROW[@repoint=VALUE][@before]."""
    key, before, _ = key.partition(BEFORE)
    row, _, repoint = key.partition(REPOINT)
    return row, bool(before), parse_repoint(repoint) if repoint else None


def parse_repoint(text: str) -> float:
    """A --repoint-bytes value: 0 (re-point every moved array), a size, or
    inf (never re-point: stage every moved array)."""
    text = text.strip().lower()
    if text == "inf":
        return math.inf
    return 0 if text == "0" else parse_size(text, multiple=1)


def make_job(key: str, nbytes: int, args, directory: Path) -> Job:
    row, before, repoint = split_key(key)
    return Job(row, nbytes, args.steps, args.snapshots, args.ram_snapshots, args.disk_snapshots,
               args.prefetch_checkpoints, str(directory), args.memory_schedule,
               str(args.before_package) if before else "", args.rotating, repoint)


@dataclass
class Measured:
    """What one worker reports (JSON on its last stdout line)."""

    wall: float = 0.0  # the adjoint run: forward, reverse and every storage call
    save_seconds: Optional[float] = None  # blocked in saves; None: the row makes none
    load_seconds: Optional[float] = None  # blocked in loads
    saves: int = 0
    loads: int = 0
    forward_steps: int = 0  # recomputation included
    load_times: List[float] = field(default_factory=list)  # each storage load, seconds
    load_storages: List[str] = field(default_factory=list)  # its StorageType name (RAM, DISK)
    load_levels: List[int] = field(default_factory=list)  # Resurgo level each load read (1: memory)
    memcpy_seconds: float = 0.0  # np.copyto of one checkpoint's bytes, median
    cold_memcpy_seconds: float = 0.0  # the same from a source out of the caches, median
    peak_rss: int = 0  # ru_maxrss, bytes
    start_rss: int = 0  # ru_maxrss after the imports, before the model
    model_bytes: int = 0  # the model's own arrays
    gradient_sha256: str = ""
    pid: int = 0  # the worker's process id (its main thread's, for --offcpu)
    schedule_seconds: float = 0.0  # listing a checkpoint_schedules schedule's actions, outside the wall


class TimedStorage:
    """A CheckpointStorage that times each load of the storage it wraps and
    notes the level a Resurgo store read it from."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.load_times: List[float] = []
        self.load_storages: List[str] = []
        self.load_levels: List[int] = []

    def save(self, step: int, storage: Any) -> None:
        self.inner.save(step, storage)

    def load(self, step: int, storage: Any, *, delete: bool) -> None:
        started = time.perf_counter()
        self.inner.load(step, storage, delete=delete)
        self.load_times.append(time.perf_counter() - started)
        self.load_storages.append(storage.name)
        stores = getattr(self.inner, "stores", None)
        if stores is not None:
            self.load_levels.append(stores[storage].last_restart.level)

    def delete(self, step: int, storage: Any) -> None:
        self.inner.delete(step, storage)

    def expect(self, transfers: Any) -> None:
        self.inner.expect(transfers)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> "TimedStorage":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class RawFileStorage:
    """The file baseline: RAM checkpoints in a DictStorage, DISK ones written
    synchronously as raw files (one per field, `ndarray.tofile`, no fsync)
    and read back straight into the state arrays (`readinto`)."""

    def __init__(self, state: Dict[str, np.ndarray], directory: Path) -> None:
        from resurgo.adjoint import DictStorage

        self._state = state
        self._ram = DictStorage(state)
        self._directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def _path(self, step: int, label: str) -> Path:
        return self._directory / f"step{step:08d}.{label}.raw"

    def save(self, step: int, storage: Any) -> None:
        if storage.name != "DISK":
            return self._ram.save(step, storage)
        for label, array in self._state.items():
            with open(self._path(step, label), "wb") as f:
                array.tofile(f)

    def load(self, step: int, storage: Any, *, delete: bool) -> None:
        if storage.name != "DISK":
            return self._ram.load(step, storage, delete=delete)
        for label, array in self._state.items():
            with open(self._path(step, label), "rb") as f:
                f.readinto(memoryview(array).cast("B"))
        if delete:
            self.delete(step, storage)

    def delete(self, step: int, storage: Any) -> None:
        if storage.name != "DISK":
            return self._ram.delete(step, storage)
        for label in self._state:
            self._path(step, label).unlink()

    def expect(self, transfers: Any) -> None:
        """Synchronous: nothing to prepare."""

    def close(self) -> None:
        self._ram.close()
        shutil.rmtree(self._directory, ignore_errors=True)


def checkpoint_arrays(model: Any) -> Callable[[int], List[np.ndarray]]:
    """The arrays pyrevolve's Checkpoint hands over for the state at the
    start of a step: views of (u[t-1], u[t]) in the rotating model's time
    buffer (new objects at each call, their memory moving from step to step,
    as Devito's), or the fixed model's two arrays, the same at every step."""
    if hasattr(model, "time_levels"):
        return lambda timestep: list(model.time_levels(timestep).values())
    fields = [model.state["u_prev"], model.state["u_curr"]]
    return lambda timestep: fields


def pyrevolve_parts(model: Any) -> Tuple[Any, Any, Any]:
    """pyrevolve's Checkpoint and forward/reverse Operators around the model.
    pyrevolve runs one forward step before each adjoint step, after which the
    state is (u[n], u[n+1]): the reverse operator keeps u[n] from there."""
    arrays = checkpoint_arrays(model)
    fields = arrays(0)

    class Checkpoint:
        dtype = np.float64
        size = sum(a.size for a in fields)
        nbytes = sum(a.nbytes for a in fields)

        def get_data(self, timestep: int) -> List[np.ndarray]:
            return arrays(timestep)

        get_data_location = get_data

    class Forward:
        def apply(self, t_start: int, t_end: int) -> None:
            model.forward(t_start, t_end, adj_deps=False)

    class Reverse:
        def apply(self, t_start: int, t_end: int) -> None:
            model.keep_adj_dep_of_last_step(t_start)
            model.reverse(t_end, t_start, clear_adj_deps=True)

    return Checkpoint(), Forward(), Reverse()


def pyrevolve_measured(revolver: Any) -> Measured:
    """Blocking from pyrevolve's own profiler (milliseconds): saves are
    takeshot; loads are restore, and remove (a multi-level pop loads too)."""
    timings, counts = revolver.profiler.timings, revolver.profiler.counts

    def total(table: Dict[str, Dict[str, float]], actions: List[Tuple[str, str]]) -> float:
        return sum(table.get(section, {}).get(action, 0) for section, action in actions)

    saves = [("forward", "takeshot"), ("reverse", "takeshot")]
    loads = [("reverse", "restore"), ("reverse", "remove")]
    return Measured(save_seconds=total(timings, saves) / 1e3, load_seconds=total(timings, loads) / 1e3,
                    saves=int(total(counts, saves)), loads=int(total(counts, loads)))


# ---------------------------------------------------------------- the rows
def row_ideal(model: Any, job: Job, actions: None) -> Measured:
    model.forward(0, job.steps, adj_deps=True)
    model.reverse(job.steps, 0, clear_adj_deps=True)
    return Measured()


def row_pyrevolve(model: Any, job: Job, actions: None) -> Measured:
    import pyrevolve

    revolver = pyrevolve.Revolver(*pyrevolve_parts(model), job.snapshots, job.steps)
    revolver.apply_forward()
    revolver.apply_reverse()
    return pyrevolve_measured(revolver)


def row_pyrevolve_disk(model: Any, job: Job, actions: None) -> Measured:
    import pyrevolve
    from pyrevolve.profiling import Profiler
    from pyrevolve.storage import DiskStorage, NumpyStorage

    checkpoint, forward, reverse = pyrevolve_parts(model)
    profiler = Profiler()
    levels = [NumpyStorage(checkpoint.size, job.ram_snapshots, checkpoint.dtype, profiler=profiler),
              DiskStorage(checkpoint.size, job.disk_snapshots, checkpoint.dtype, profiler=profiler,
                          filedir=job.directory + "/")]
    revolver = pyrevolve.MultiLevelRevolver(checkpoint, forward, reverse, job.steps,
                                            storage_list=levels, profiler=profiler)
    revolver.apply_forward()
    revolver.apply_reverse()
    return pyrevolve_measured(revolver)


def row_pyrevolve_resurgo(disk: bool) -> Callable[[Any, Job, None], Measured]:
    """pyrevolve's Revolver with its slots in Resurgo (the Devito route), in
    memory or with every slot in files under the job's directory."""
    def row(model: Any, job: Job, actions: None) -> Measured:
        from resurgo.adjoint_pyrevolve import ResurgoRevolver

        set_repoint_bytes(job)  # here, so that the import is timed as in the other rows
        room = job.nbytes + PIECE
        where = (dict(disk_path=str(Path(job.directory) / "resurgo"),
                      prefetch_capacity=job.prefetch_checkpoints * room) if disk
                 else dict(ram_capacity=(job.snapshots + 1) * room))
        revolver = ResurgoRevolver(*pyrevolve_parts(model), job.snapshots, job.steps, **where)
        revolver.apply_forward()
        revolver.apply_reverse()
        return pyrevolve_measured(revolver)
    return row


def memory_schedule(kind: str, steps: int, snapshots: int) -> Any:
    """The memory case's schedule (--memory-schedule)."""
    from checkpoint_schedules import MultistageCheckpointSchedule, Revolve

    if kind == "multistage":
        return MultistageCheckpointSchedule(steps, snapshots, 0)
    return Revolve(steps, snapshots)


def revolve(job: Job) -> Any:
    return memory_schedule(job.memory_schedule, job.steps, job.snapshots)


def multistage(job: Job) -> Any:
    from checkpoint_schedules import MultistageCheckpointSchedule

    return MultistageCheckpointSchedule(job.steps, job.ram_snapshots, job.disk_snapshots)


def dict_storage(model: Any, job: Job) -> Any:
    from resurgo.adjoint import DictStorage

    return DictStorage(model.state)


def file_storage(model: Any, job: Job) -> Any:
    return RawFileStorage(model.state, Path(job.directory) / "files")


def resurgo_storage(prefetch: bool) -> Callable[[Any, Job], Any]:
    def make(model: Any, job: Job) -> Any:
        from resurgo.adjoint import ResurgoStorage

        ram = job.snapshots if ROWS[job.row].case == "memory" else job.ram_snapshots
        room = job.nbytes + PIECE  # one version, its container header rounded up to pieces
        return ResurgoStorage("adjoint-bench", model.state, ram_capacity=(ram + 1) * room,
                              disk_path=str(Path(job.directory) / "resurgo"), prefetch=prefetch,
                              prefetch_capacity=job.prefetch_checkpoints * room)
    return make


class ListedSchedule:
    """An offline checkpoint_schedules schedule whose actions, up to the first
    EndReverse, were listed before the run: its pure-Python Revolve is slow to
    list them (the report gives the time), where pyrevolve's C++ Revolve (the
    baseline rows) takes milliseconds inside its run, and that time is the
    schedule's, not the storage's. resurgo.adjoint.run reads it as it reads
    the schedule (max_n, then its actions)."""

    def __init__(self, schedule: Any) -> None:
        from checkpoint_schedules import EndReverse

        self.max_n = schedule.max_n
        actions = []
        for action in schedule:
            actions.append(action)
            if isinstance(action, EndReverse):
                break
        self._actions = iter(actions)

    def __iter__(self) -> "ListedSchedule":
        return self

    def __next__(self) -> Any:
        return next(self._actions)


def scheduled(storage: Callable[[Any, Job], Any]):
    """A row's run: checkpoint_schedules' actions, listed before, run by
    resurgo.adjoint.run on `storage`."""
    def row(model: Any, job: Job, actions: ListedSchedule) -> Measured:
        from resurgo.adjoint import run

        with TimedStorage(storage(model, job)) as timed:
            stats = run(actions, model, timed, n_steps=job.steps)
        return Measured(save_seconds=stats.save_seconds, load_seconds=stats.load_seconds,
                        saves=stats.saves, loads=stats.loads, load_times=timed.load_times,
                        load_storages=timed.load_storages, load_levels=timed.load_levels)
    return row


@dataclass(frozen=True)
class Row:
    label: str
    case: str  # "memory" or "disk"
    role: str  # "ideal", "baseline" (in memory), "disk baseline" or "resurgo"
    # run(model, job, actions): `actions` are the checkpoint_schedules
    # schedule's, listed before the run is timed or profiled (schedule);
    # None for the rows without one (pyrevolve schedules inside its run).
    run: Callable[[Any, Job, Optional[ListedSchedule]], Measured]
    schedule: Optional[Callable[[Job], Any]] = None

    def list_actions(self, job: Job) -> Optional[ListedSchedule]:
        return ListedSchedule(self.schedule(job)) if self.schedule else None


ROWS: Dict[str, Row] = {
    "ideal": Row("every u[n] kept in NumPy memory (no recomputation)", "memory", "ideal", row_ideal),
    "pyrevolve": Row("pyrevolve Revolver, NumpyStorage", "memory", "baseline", row_pyrevolve),
    "cs_dict": Row("checkpoint_schedules {memory}, DictStorage", "memory", "baseline",
                   scheduled(dict_storage), revolve),
    "resurgo": Row("{memory}, ResurgoStorage(prefetch=False)", "memory", "resurgo",
                   scheduled(resurgo_storage(False)), revolve),
    "resurgo_prefetch": Row("{memory}, ResurgoStorage (prefetch)", "memory", "resurgo",
                            scheduled(resurgo_storage(True)), revolve),
    "ms_dict": Row("Multistage, DictStorage (RAM and DISK both in memory)", "disk", "baseline",
                   scheduled(dict_storage), multistage),
    "pyrevolve_disk": Row("pyrevolve MultiLevelRevolver, NumpyStorage + DiskStorage", "disk",
                          "disk baseline", row_pyrevolve_disk),
    "ms_files": Row("Multistage, dict RAM + raw files DISK", "disk", "disk baseline",
                    scheduled(file_storage), multistage),
    "ms_resurgo": Row("Multistage, ResurgoStorage(prefetch=False)", "disk", "resurgo",
                      scheduled(resurgo_storage(False)), multistage),
    "ms_resurgo_prefetch": Row("Multistage, ResurgoStorage (prefetch)", "disk", "resurgo",
                               scheduled(resurgo_storage(True)), multistage),
    "pyrevolve_resurgo": Row("pyrevolve Revolver, slots in Resurgo memory (ResurgoRevolver)", "memory",
                             "resurgo", row_pyrevolve_resurgo(disk=False)),
    "pyrevolve_resurgo_disk": Row("pyrevolve Revolver(snapshots), every slot in Resurgo files (ResurgoRevolver, "
                                  "disk_path, prefetch)", "disk", "resurgo", row_pyrevolve_resurgo(disk=True)),
}
DEFAULT_ROWS = [key for key in ROWS if not key.startswith("pyrevolve_resurgo")]  # the large runs' rows
# Each Resurgo row's schedule run with its checkpoints in NumPy memory: the
# difference in wall is the storage's alone, the schedule's work in neither
# wall (checkpoint_schedules' listed before) or in both (pyrevolve's).
SAME_SCHEDULE = {"resurgo": "cs_dict", "resurgo_prefetch": "cs_dict", "ms_resurgo": "ms_dict",
                 "ms_resurgo_prefetch": "ms_dict", "pyrevolve_resurgo": "pyrevolve",
                 "pyrevolve_resurgo_disk": "pyrevolve"}
CASES = {
    "memory": "memory case: {memory}, every checkpoint in memory",
    "disk": "disk case: Multistage, RAM snapshots in memory and DISK snapshots in files",
}
CASE_LOADS = {"memory": "RAM", "disk": "DISK"}  # the loads whose level each case reports


def max_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def memcpy_seconds(state: Dict[str, np.ndarray], cold: bool = False) -> float:
    """Median time of np.copyto of one checkpoint's bytes into the (touched)
    state: from one source again and again (it stays in the caches), or, when
    `cold`, from each of the copies that fill COLD_SOURCE_BYTES in turn (out of
    the caches, as a version saved or prefetched long before its load may be)."""
    nbytes = sum(array.nbytes for array in state.values())
    count = max(1, COLD_SOURCE_BYTES // nbytes) if cold else 1
    sources = [{label: array.copy() for label, array in state.items()} for _ in range(count)]
    times = []
    for repeat in range(max(MEMCPY_REPEATS, count)):
        source = sources[repeat % count]
        started = time.perf_counter()
        for label, array in state.items():
            np.copyto(array, source[label])
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def wave_module() -> Any:
    """examples/adjoint_wave/acoustic.py, the model."""
    if str(EXAMPLE_DIR) not in sys.path:
        sys.path.insert(0, str(EXAMPLE_DIR))
    import acoustic
    return acoustic


def make_model(job: Job) -> Any:
    wave = wave_module()
    shape = grid_shape(job.nbytes)
    model = rotating_model_class() if job.rotating else wave.WaveModel
    return model(wave.make_survey(shape, job.steps), wave.layered_velocity(shape), xp=np)


@functools.lru_cache(maxsize=None)
def rotating_model_class() -> type:
    """The wave model with its field in one time buffer of TIME_LEVELS levels
    (--rotating), defined once the example's module is imported."""
    wave = wave_module()

    class RotatingWaveModel(wave.WaveModel):
        """WaveModel keeping u as Devito keeps a TimeFunction(time_order=2,
        save=None): u[n] in level n % TIME_LEVELS, step n writing u[n+1]
        over u[n-2]. The same operations in the same order as WaveModel's
        step (which copies u[n] and u[n+1] into two fixed arrays instead), so
        the same gradient bit for bit. `state` holds the views of the last
        forward's end; what pyrevolve restores goes into time_levels(t)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.buffer = self.xp.zeros((TIME_LEVELS,) + self.survey.shape)
            self.state = self.time_levels(0)  # drops WaveModel's two fixed arrays

        def time_levels(self, n: int) -> Dict[str, np.ndarray]:
            """Views of the state at the start of step n: u[n-1] and u[n]."""
            return {"u_prev": self.buffer[(n - 1) % TIME_LEVELS], "u_curr": self.buffer[n % TIME_LEVELS]}

        def forward(self, n0: int, n1: int, *, adj_deps: bool) -> None:
            self._check_steps("forward", n0, n1)
            for n in range(n0, n1):
                if adj_deps:
                    self._adj_deps[n] = self.buffer[n % TIME_LEVELS].copy()
                self._step(n)
            self.state = self.time_levels(n1)

        def keep_adj_dep_of_last_step(self, n: int) -> None:
            self._adj_deps[n] = self.buffer[n % TIME_LEVELS].copy()

        def _step(self, n: int) -> None:
            levels = self.time_levels(n)
            u_prev, u_curr, nxt = levels["u_prev"], levels["u_curr"], self.buffer[(n + 1) % TIME_LEVELS]
            wave.laplacian(u_curr, nxt)
            nxt *= self._coef
            nxt += u_curr
            nxt += u_curr
            nxt -= u_prev
            nxt[self.survey.source] += self._source[n]
            self.traces[n] = nxt[self._receivers]
            self.steps_advanced += 1

    return RotatingWaveModel


def set_repoint_bytes(job: Job) -> None:
    """--repoint-bytes: the job's threshold into resurgo.adjoint_pyrevolve,
    which reads it at each save and load."""
    if job.repoint_bytes is None:
        return
    import resurgo.adjoint_pyrevolve as module

    if not hasattr(module, "_REPOINT_BYTES"):
        raise SystemExit(f"adjoint.py: {module.__file__} has no _REPOINT_BYTES to set; run --repoint-bytes "
                         "with a resurgo that re-points moved checkpoint arrays by size, or leave it out")
    module._REPOINT_BYTES = job.repoint_bytes


def worker(job: Job) -> Measured:
    wave_module()  # imported before start_rss, which counts the interpreter and its imports
    start_rss = max_rss()
    shape = grid_shape(job.nbytes)
    model = make_model(job)
    listing = time.perf_counter()
    actions = ROWS[job.row].list_actions(job)
    schedule_seconds = time.perf_counter() - listing if actions is not None else 0.0
    started = time.perf_counter()
    measured = ROWS[job.row].run(model, job, actions)
    measured.wall = time.perf_counter() - started
    measured.schedule_seconds = schedule_seconds
    measured.peak_rss = max_rss()  # before memcpy_seconds allocates its sources
    measured.start_rss = start_rss
    fields = MODEL_FIELDS + (TIME_LEVELS - FIELDS_PER_CHECKPOINT if job.rotating else 0)  # its buffer
    measured.model_bytes = (fields * math.prod(shape) + 2 * model.traces.size) * 8
    measured.forward_steps = model.steps_advanced
    measured.gradient_sha256 = hashlib.sha256(model.gradient().tobytes()).hexdigest()
    measured.memcpy_seconds = memcpy_seconds(model.state)
    measured.cold_memcpy_seconds = memcpy_seconds(model.state, cold=True)
    measured.pid = os.getpid()
    return measured


def profile_worker(job: Job) -> Dict[str, Any]:
    """One run of the job's row under cProfile: the run's wall and the
    PROFILE_TOP functions by own time (function, calls, own seconds,
    cumulative seconds), with the own time of all functions."""
    model = make_model(job)
    actions = ROWS[job.row].list_actions(job)  # not profiled: the schedule's, as in worker()
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    ROWS[job.row].run(model, job, actions)
    profiler.disable()
    wall_seconds = time.perf_counter() - started
    entries = pstats.Stats(profiler).stats  # (file, line, name) -> (cc, calls, own, cumulative, callers)
    top = sorted(entries.items(), key=lambda item: item[1][2], reverse=True)[:PROFILE_TOP]
    return {"wall": wall_seconds, "own_total": sum(e[2] for e in entries.values()),
            "top": [(function_name(*key), e[1], e[2], e[3]) for key, e in top]}


def function_name(file: str, line: int, name: str) -> str:
    if file == "~":  # a built-in: name is pstats' description, e.g. "<method 'copy' of ...>"
        return name
    return f"{Path(file).name}:{line} {name}"


def run_worker(job: Job, mode: str = "--worker") -> Tuple[Optional[Dict[str, Any]], str]:
    """(the worker's JSON result, "") or (None, why the worker failed)."""
    env = dict(os.environ, **{PACKAGE_VARIABLE: job.package}) if job.package else None
    done = subprocess.run([sys.executable, __file__, mode, json.dumps(asdict(job))],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or [f"exit status {done.returncode}"]
        return None, lines[-1]
    return json.loads(done.stdout.strip().splitlines()[-1]), ""


# ==================================================================== parent
@dataclass
class RowResult:
    key: str
    runs: List[Measured] = field(default_factory=list)
    failure: str = ""
    skipped: str = ""

    @property
    def row(self) -> Row:
        return ROWS[self.key]

    def series(self, label: str, value: Callable[[Measured], Optional[float]]) -> Series:
        values = [value(m) for m in self.runs]
        return Series(label=self.row.label, times=[v for v in values if v is not None])


def skip_reason(key: str, job: Job, available: Optional[int]) -> str:
    """Why a row cannot run at this size, or ''."""
    if key != "ideal" or available is None:
        return ""
    field_bytes = job.nbytes // FIELDS_PER_CHECKPOINT
    needed = (job.steps + MODEL_FIELDS) * field_bytes
    if needed > 0.8 * available:
        return (f"needs about {human(needed)} ({job.steps} fields of {human(field_bytes)} plus the "
                f"model) and {human(available)} of memory is available")
    return ""


def bench_size(nbytes: int, args, root: Path) -> Dict[str, RowResult]:
    results = {key: RowResult(key) for key in args.rows}
    jobs = {key: make_job(key, nbytes, args, root / key) for key in args.rows}
    available = mem_available()
    for key, result in results.items():
        result.skipped = skip_reason(key, jobs[key], available)
    order = [key for key in args.rows if not results[key].skipped]
    for repeat in range(args.repeats):
        shift = repeat % len(order) if order else 0
        for key in order[shift:] + order[:shift]:
            result = results[key]
            if result.failure:
                continue
            log(f"{human(nbytes)} repeat {repeat + 1}/{args.repeats}: {key}")
            measured, why = run_worker(jobs[key])
            shutil.rmtree(jobs[key].directory, ignore_errors=True)
            if measured is None:
                result.failure = why
                log(f"  {key} failed: {why}")
            else:
                result.runs.append(Measured(**measured))
    check_same_gradient(results, nbytes)
    return results


def profile_size(nbytes: int, args, root: Path) -> Dict[str, Dict[str, Any]]:
    """--profile: one more run of each of those rows at this size under cProfile."""
    profiles = {}
    for key in args.profile:
        job = make_job(key, nbytes, args, root / "profile")
        log(f"{human(nbytes)}: {key} under cProfile")
        profile, why = run_worker(job, "--profile-worker")
        shutil.rmtree(job.directory, ignore_errors=True)
        profiles[key] = profile or {"failure": why}
    return profiles


def perf_size(nbytes: int, args, root: Path) -> Dict[str, Dict[str, Any]]:
    """--perf: one more run of each of those rows at this size under `perf
    record` (every thread, call graphs), summarised by perf_summary."""
    summaries = {}
    for key in args.perf:
        job = make_job(key, nbytes, args, root / "perf")
        data = root / "perf.data"
        log(f"{human(nbytes)}: {key} under perf")
        recorded = subprocess.run(PERF_RECORD + ["-o", str(data), "--", sys.executable, __file__, "--worker",
                                                json.dumps(asdict(job))], capture_output=True, text=True)
        report = subprocess.run(PERF_REPORT + ["-i", str(data)], capture_output=True, text=True)
        shutil.rmtree(job.directory, ignore_errors=True)
        data.unlink(missing_ok=True)
        if recorded.returncode != 0 or report.returncode != 0:
            why = (recorded.stderr or report.stderr).strip().splitlines() or ["perf failed"]
            summaries[key] = {"failure": why[-1]}
            continue
        summaries[key] = perf_summary(report.stdout, json.loads(recorded.stdout.strip().splitlines()[-1]))
    return summaries


def offcpu_size(nbytes: int, args, root: Path) -> Dict[str, Dict[str, Any]]:
    """--offcpu: one more run of each of those rows at this size under
    bench/offcpu.py's record, with the run's wall and saves + loads."""
    results = {}
    for key in args.offcpu:
        job = make_job(key, nbytes, args, root / "offcpu")
        data = root / "offcpu.data"
        log(f"{human(nbytes)}: {key} under perf (context switches)")
        recorded = offcpu.record([sys.executable, __file__, "--worker", json.dumps(asdict(job))], data)
        shutil.rmtree(job.directory, ignore_errors=True)
        if recorded.returncode != 0:
            why = recorded.stderr.strip().splitlines() or ["perf failed"]
            results[key] = {"failure": why[-1]}
        else:
            measured = json.loads(recorded.stdout.strip().splitlines()[-1])
            results[key] = dict(offcpu.summary(data, measured["pid"]), wall=measured["wall"],
                                calls=measured["saves"] + measured["loads"])
        data.unlink(missing_ok=True)
    return results


def perf_summary(report: str, measured: Dict[str, Any]) -> Dict[str, Any]:
    """The CPU seconds sampled (cpu-clock counts nanoseconds), the PERF_TOP
    symbols by own samples, and the PERF_TOP resurgo:: functions by samples
    in them and their callees, as (symbol, children %, self %)."""
    count = re.search(r"Event count \(approx.\): (\d+)", report)
    entries = [(m.group(4), float(m.group(1)), float(m.group(2)), m.group(3))
               for m in map(PERF_LINE.match, report.splitlines()) if m]
    by_self = sorted(entries, key=lambda e: e[2], reverse=True)[:PERF_TOP]
    library = [e for e in entries if e[0].startswith("resurgo::")][:PERF_TOP]
    return {"cpu_seconds": int(count.group(1)) / 1e9 if count else 0.0, "wall": measured["wall"],
            "saves": measured["saves"], "loads": measured["loads"],
            "by_self": [e[:3] for e in by_self], "library": [e[:3] for e in library]}


def check_same_gradient(results: Dict[str, RowResult], nbytes: int) -> None:
    digests = {m.gradient_sha256: key for key, r in results.items() for m in r.runs}
    if len(digests) > 1:
        raise SystemExit(f"adjoint.py: at {human(nbytes)} the rows computed different gradients "
                         f"({', '.join(sorted(set(digests.values())))} disagree); the benchmark "
                         "compares nothing until they agree bit for bit")


# ------------------------------------------------------------------ figures
def wall(result: RowResult) -> Series:
    return result.series("wall", lambda m: m.wall)


def best_baseline(results: Dict[str, RowResult], case: str, role: str) -> Optional[RowResult]:
    candidates = [r for r in results.values()
                  if r.row.case == case and r.row.role == role and r.runs]
    return min(candidates, key=lambda r: wall(r).median, default=None)


def prefetched_restore_ratio(result: RowResult, storage: str, cold: bool) -> Series:
    """Per repeat: the median blocking of the loads of `storage` (RAM, DISK)
    that Resurgo served from its memory level / the same process's memcpy of
    one checkpoint (from a source out of the caches when `cold`). DISK loads
    served from memory are the prefetched ones."""
    def ratio(m: Measured) -> Optional[float]:
        times = [t for t, kind, level in zip(m.load_times, m.load_storages, m.load_levels)
                 if kind == storage and level == 1]
        floor = m.cold_memcpy_seconds if cold else m.memcpy_seconds
        return statistics.median(times) / floor if times else None
    return result.series("restore / memcpy", ratio)


def l1_share(m: Measured, storage: str) -> str:
    """'served from memory / all' for the loads of `storage` (RAM, DISK)."""
    levels = [level for kind, level in zip(m.load_storages, m.load_levels) if kind == storage]
    if not levels:
        return "—"
    return f"{sum(1 for level in levels if level == 1)}/{len(levels)}"


def storage_rss(m: Measured) -> float:
    """Peak RSS less the interpreter and the model's own arrays: what the
    checkpoints (and the storage's buffers) held at the peak."""
    return max(0.0, m.peak_rss - m.start_rss - m.model_bytes)


def fmt_bytes(value: float) -> str:
    return human(value) if value >= 1024 else f"{value:.0f}B"


def case_table(results: Dict[str, RowResult], case: str) -> List[str]:
    rows = [r for r in results.values() if r.row.case == case]
    if not rows:
        return []
    best = best_baseline(results, case, "baseline")
    lines = [f"### {CASES[case]}", "",
             "| row | forward blocking (saves) | backward blocking (loads) | total wall | "
             "wall / best in-memory baseline | (saves + loads) / wall | peak RSS | "
             "peak RSS − interpreter − model | "
             f"forward steps | saves / loads | {CASE_LOADS[case]} loads from Resurgo memory |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.skipped or not r.runs:
            why = f"skipped: {r.skipped}" if r.skipped else f"failed: {r.failure}"
            lines.append(f"| {r.row.label} | {why} |" + " |" * 9)
            continue
        first = r.runs[0]
        ratio = "—"
        if best is not None:
            ratio = wall_ratio(r, best).cell(lambda v: f"{v:.3f}")
        lines.append(
            f"| {r.row.label} | {r.series('save', lambda m: m.save_seconds).cell()} | "
            f"{r.series('load', lambda m: m.load_seconds).cell()} | {wall(r).cell()} | {ratio} | "
            f"{r.series('share', storage_share).cell(lambda v: f'{v:.3f}')} | "
            f"{r.series('rss', lambda m: m.peak_rss).cell(fmt_bytes)} | "
            f"{r.series('extra', storage_rss).cell(fmt_bytes)} | {first.forward_steps} | "
            f"{first.saves} / {first.loads} | {l1_share(first, CASE_LOADS[case])} |")
    if best is not None:
        lines += ["", f"Best in-memory baseline: {best.row.label}."]
    lines += [f"- {r.row.label}: failed after {len(r.runs)} repeats: {r.failure}"
              for r in rows if r.failure and r.runs]
    return lines + [""]


def wall_ratio(result: RowResult, best: RowResult) -> Series:
    """Per repeat: this row's wall / the wall of `best` in the same repeat
    (rows take turns within a repeat, so both saw the same machine)."""
    return Series(label=result.row.label, times=[m.wall / b.wall for m, b in zip(result.runs, best.runs)])


def storage_share(m: Measured) -> Optional[float]:
    """The share of the wall spent blocked in saves and loads."""
    if m.save_seconds is None or m.load_seconds is None:
        return None
    return (m.save_seconds + m.load_seconds) / m.wall


def target_row(what: str, series: Series, op: str, limit: float) -> str:
    if not series.times:
        verdict = "not measured"
    else:
        ok = series.median < limit if op == "<" else series.median <= limit
        verdict = "met" if ok else "**missed**"
    return f"| {what} {op} {limit:g} | {series.cell(lambda v: f'{v:.3f}')} | {verdict} |"


def configured_memory(result: RowResult, args, nbytes: int, buffer_floor: int) -> int:
    """The memory a Resurgo row configured: ram_capacity, plus
    prefetch_capacity in the disk case (see resurgo_storage), plus one
    staging buffer per store (resurgo.adjoint sets buffer.capacity to the
    state's bytes, at least `buffer_floor`; the disk case opens two stores).
    The ResurgoRevolver rows open one store, whose regions are the arrays
    this benchmark hands pyrevolve (the same ones at every step) or, with
    --rotating, staging arrays for the moved ones."""
    room, buffer = nbytes + PIECE, max(nbytes, buffer_floor)
    # --rotating: the regions' staging arrays, at most one checkpoint, hold the moved arrays.
    staging = nbytes if args.rotating else 0
    key = split_key(result.key)[0]
    if key == "pyrevolve_resurgo":
        return (args.snapshots + 1) * room + buffer + staging
    if key == "pyrevolve_resurgo_disk":
        return args.prefetch_checkpoints * room + buffer + staging
    if result.row.case == "memory":
        return (args.snapshots + 1) * room + buffer
    return (args.ram_snapshots + 1 + args.prefetch_checkpoints) * room + 2 * buffer


def wall_targets(results: Dict[str, RowResult], nbytes: int) -> List[str]:
    """Large states: the prefetching rows against the best baselines. Small
    states (issue 27): every Resurgo row against pyrevolve's NumpyStorage."""
    lines = []
    if nbytes > SMALL_STATE:
        for key, case, role, op, limit in (
                ("resurgo_prefetch", "memory", "baseline", "≤", TARGET_WALL_VS_MEMORY),
                ("ms_resurgo_prefetch", "disk", "disk baseline", "<", 1.0)):
            r, best = results.get(key), best_baseline(results, case, role)
            if r and r.runs and best is not None:
                lines.append(target_row(f"{r.row.label}: wall / best {role} ({best.row.label})",
                                        wall_ratio(r, best), op, limit))
        return lines
    numpy = results.get("pyrevolve")
    if numpy is None or not numpy.runs:
        return lines
    for r in results.values():
        if r.row.role == "resurgo" and r.runs:
            lines.append(target_row(f"{r.row.label}: wall / {numpy.row.label} (issue 27, "
                                    f"{'in memory' if r.row.case == 'memory' else 'a disk level'})",
                                    wall_ratio(r, numpy), "≤", TARGET_SMALL_WALL[r.row.case]))
    return lines


def target_lines(results: Dict[str, RowResult], args, nbytes: int) -> List[str]:
    lines = ["| target | measured (median [min–max] over repeats) | verdict |", "|---|---|---|"]
    for key, storage in (("resurgo_prefetch", "RAM"), ("ms_resurgo_prefetch", "DISK")):
        r = results.get(key)
        if r and r.runs:
            for cold, source in ((False, ""), (True, " from a source out of the caches")):
                lines.append(target_row(f"{r.row.label}: {storage} restore from memory / memcpy of the "
                                        f"same bytes{source}", prefetched_restore_ratio(r, storage, cold),
                                        "≤", TARGET_RESTORE_VS_MEMCPY))
    lines += wall_targets(results, nbytes)
    for r in results.values():
        if r.row.role == "resurgo" and r.runs:
            configured = configured_memory(r, args, nbytes, args.buffer_floor)
            lines.append(target_row(f"{r.row.label}: peak RSS − interpreter − model / configured memory "
                                    f"levels and buffers ({human(configured)})",
                                    r.series("", lambda m: storage_rss(m) / configured), "≤", 1.0))
    return lines + [""]


def same_schedule_lines(results: Dict[str, RowResult]) -> List[str]:
    """Each Resurgo row against its own schedule with NumPy storage, per repeat:
    the wall ratio and the extra wall per storage call (save or load)."""
    lines = []
    for key, base_key in SAME_SCHEDULE.items():
        r, base = results.get(key), results.get(base_key)
        if not (r and r.runs and base and base.runs):
            continue
        pairs = list(zip(r.runs, base.runs))
        extra = Series("", times=[(m.wall - b.wall) / (m.saves + m.loads) for m, b in pairs])
        lines.append(f"| {r.row.label} | {base.row.label} | "
                     f"{wall_ratio(r, base).cell(lambda v: f'{v:.3f}')} | {extra.cell()} |")
    if not lines:
        return []
    return ["Against the same schedule with its checkpoints in NumPy memory (per repeat; the extra "
            "wall per call is the wall difference over the Resurgo row's saves + loads):", "",
            "| row | same schedule, NumPy storage | wall ratio | extra wall per save or load |",
            "|---|---|---|---|"] + lines + [""]


def repoint_lines(results: Dict[str, RowResult]) -> List[str]:
    """--repoint-bytes: each ResurgoRevolver row's values side by side, per
    repeat against pyrevolve's NumpyStorage and against the row's first value."""
    groups: Dict[str, List[Tuple[str, RowResult]]] = {}
    for key, r in results.items():
        row, before, repoint = split_key(key)
        if repoint is not None and r.runs:
            groups.setdefault(ROWS[row].label + (" [before]" if before else ""), []).append(
                (key.partition(REPOINT)[2].partition(BEFORE)[0], r))
    numpy = results.get("pyrevolve")
    if not groups or numpy is None or not numpy.runs:
        return []
    lines = ["Re-pointing moved arrays against staging them (`_REPOINT_BYTES`, per repeat; blocking: "
             "seconds in saves + loads, where the two differ, without the model's compute around them):", "",
             f"| row | `_REPOINT_BYTES` | total wall | wall / {numpy.row.label} | wall / the row's first value | "
             "blocking | blocking / the row's first value's |",
             "|---|---|---|---|---|---|---|"]
    for label, variants in groups.items():
        first = variants[0][1]
        for text, r in variants:
            lines.append(f"| {label} | {text} | {wall(r).cell()} | "
                         f"{wall_ratio(r, numpy).cell(lambda v: f'{v:.3f}')} | "
                         f"{wall_ratio(r, first).cell(lambda v: f'{v:.3f}')} | {blocking(r).cell()} | "
                         f"{blocking_ratio(r, first).cell(lambda v: f'{v:.3f}')} |")
    return lines + [""]


def blocking(result: RowResult) -> Series:
    return result.series("blocking", lambda m: m.save_seconds + m.load_seconds)


def blocking_ratio(result: RowResult, other: RowResult) -> Series:
    """Per repeat: this row's saves + loads blocking / `other`'s in the same repeat."""
    pairs = zip(blocking(result).times, blocking(other).times)
    return Series(label=result.row.label, times=[a / b for a, b in pairs])


def schedule_line(results: Dict[str, RowResult]) -> str:
    """The time checkpoint_schedules took to list each case's actions, left out of the walls."""
    cells = []
    for case in CASES:
        listed = [m.schedule_seconds for r in results.values() if r.row.case == case for m in r.runs
                  if m.schedule_seconds > 0]
        if listed:
            cells.append(f"{case} case {Series('schedule', times=listed).cell()}")
    if not cells:
        return ""
    return ("Listing checkpoint_schedules' actions before each run (not in its wall; over all its workers): "
            + "; ".join(cells) + ".")


def memcpy_line(results: Dict[str, RowResult]) -> str:
    runs = [m for r in results.values() for m in r.runs]
    memcpy = Series("memcpy", times=[m.memcpy_seconds for m in runs])
    cold = Series("memcpy", times=[m.cold_memcpy_seconds for m in runs])
    return (f"memcpy of one checkpoint (np.copyto of both fields into the touched state, median of "
            f"{MEMCPY_REPEATS} in each worker; over all workers): {memcpy.cell()}; from a source out "
            f"of the caches (each of the copies that fill {human(COLD_SOURCE_BYTES)} once in turn): "
            f"{cold.cell()}.")


def schedule_code(args, steps: int, snapshots: int) -> str:
    """The memory case's schedule as Python."""
    if args.memory_schedule == "multistage":
        return f"MultistageCheckpointSchedule({steps}, {snapshots}, 0)"
    return f"Revolve({steps}, {snapshots})"


def schedule_regime(args, steps: int, snapshots: int) -> Tuple[float, float, float]:
    """Forward steps, saves and loads per step of the memory case's schedule."""
    from checkpoint_schedules import Copy, EndReverse, Forward, Move

    forward = saves = loads = 0
    for action in memory_schedule(args.memory_schedule, steps, snapshots):
        if isinstance(action, Forward):
            forward += action.n1 - action.n0
            saves += action.write_ics
        elif isinstance(action, (Copy, Move)):
            loads += 1
        elif isinstance(action, EndReverse):
            break
    return forward / steps, saves / steps, loads / steps


def scale_note(args) -> str:
    ours, shot = schedule_regime(args, args.steps, args.snapshots), schedule_regime(args, *SHOT_SCHEDULE)

    def regime(name: str, figures: Tuple[float, float, float]) -> str:
        return (f"`{name}` runs {figures[0]:.2f} forward steps per step and makes {figures[1]:.2f} "
                f"saves and {figures[2]:.2f} loads per step")

    scaled = ("this run is scaled down so that all rows and repeats finish in a sensible time on "
              "a small machine. " if args.steps < SHOT_SCHEDULE[0] else "")
    return (f"**Scale.** An RTM shot runs thousands of steps with a few tens of snapshots; {scaled}"
            f"What the storage sees per step is set by the schedule's regime, not its "
            f"length: {regime(schedule_code(args, args.steps, args.snapshots), ours)}; "
            f"{regime(schedule_code(args, *SHOT_SCHEDULE), shot)}. The ratio of copying to computing "
            f"is set by the grid (the checkpoint size), not by the number of steps.")


def write_markdown(path: Path, machine: Dict[str, str], by_size: Dict[int, Dict[str, RowResult]],
                   args, plot_name: str, profiles: Dict[int, Dict[str, Dict[str, Any]]],
                   perfs: Dict[int, Dict[str, Dict[str, Any]]],
                   offcpus: Dict[int, Dict[str, Dict[str, Any]]]) -> None:
    lines = report_header("Adjoint checkpointing benchmark", "adjoint.py", args)
    lines += machine_lines(machine)
    lines += ["## What is measured", "",
              f"The gradient of the wave example (`examples/adjoint_wave/acoustic.py`: 2-D acoustic "
              f"wave equation, leapfrog, exact discrete adjoint) over {args.steps} steps. Memory "
              f"case: `{schedule_code(args, args.steps, args.snapshots)}`; disk case: "
              f"`MultistageCheckpointSchedule({args.steps}, {args.ram_snapshots}, "
              f"{args.disk_snapshots})` (pyrevolve rows: its own CRevolve / HRevolve schedule "
              "with the same snapshot counts, so their forward step counts differ slightly). "
              "checkpoint_schedules' actions are listed before each run and that time is not in its "
              "wall (`ListedSchedule`: its pure-Python Revolve is slow to list them, the time is "
              "given under each size; pyrevolve's C++ schedule runs inside its run).", "",
              scale_note(args), "",
              "- **forward blocking**: seconds blocked in all saves (forward sweep and recomputation "
              "sweeps); **backward blocking**: seconds blocked in all loads. checkpoint_schedules "
              "rows: `RunStats` of `resurgo.adjoint.run`; pyrevolve rows: its profiler (takeshot; "
              "restore + remove, since a multi-level pop also loads).",
              "- **total wall**: the whole adjoint run in the worker (forward, reverse, storage "
              "calls, closing the storage); the ratio is to the best in-memory baseline of the same "
              "case, taken per repeat (each row's wall over the baseline's in the same repeat). "
              "**(saves + loads) / wall**: the share of the wall blocked in storage calls; the rest "
              "is the model's Python and NumPy compute.",
              f"- Targets: states over {human(SMALL_STATE)}: the prefetching rows against the best "
              f"baselines; states of {human(SMALL_STATE)} or less (issue 27): every Resurgo row's "
              f"wall / pyrevolve's NumpyStorage ≤ {TARGET_SMALL_WALL['memory']:g} in memory, "
              f"≤ {TARGET_SMALL_WALL['disk']:g} with a disk level (per repeat).",
              "- ResurgoRevolver rows (`--rows all`): pyrevolve's own Revolver, with the same "
              "schedule as the NumpyStorage row, its slots in a Resurgo store "
              "(resurgo.adjoint_pyrevolve, what a Devito user runs): in memory with `ram_capacity` "
              "= snapshots + 1 versions, or every slot in files under `--dir` with "
              "`prefetch_capacity` as below; blocking from pyrevolve's profiler.",
              "- **peak RSS**: the worker's `ru_maxrss`; the next column subtracts the RSS after "
              f"the imports and the model's own arrays ({MODEL_FIELDS} grid fields, "
              f"{MODEL_FIELDS + TIME_LEVELS - FIELDS_PER_CHECKPOINT} with `--rotating`), leaving what the "
              "checkpoints and the storage's buffers held.",
              *variant_notes(args),
              "- **loads from Resurgo memory**: RAM loads (memory case) or DISK loads (disk case: "
              "the prefetched ones) whose `Store.last_restart.level` was 1, of all such loads "
              "(first repeat).",
              f"- Resurgo stores: RAM `ram_capacity` = snapshots + 1 versions; DISK store under "
              f"`--dir` with `prefetch_capacity` = {args.prefetch_checkpoints} versions; a version "
              "is counted as a checkpoint plus 2 MiB, what builds up to b01a0b4 took (whole 2 MiB "
              "pieces; later ones take the container's bytes, so the same capacity holds more "
              "versions). `buffer.capacity` is the checkpoint's bytes, at least "
              f"{human(args.buffer_floor)} (resurgo.adjoint's choice: one large version in flight "
              "per store, small ones never wait); other settings are the defaults. "
              "Raw files and pyrevolve's DiskStorage write without fsync; nothing evicts the page "
              "cache, so their reads may be served from memory.", ""]
    for nbytes, results in by_size.items():
        ny, nx = grid_shape(nbytes)
        lines += [f"## Checkpoint {human(nbytes)} (grid {ny} x {nx})", ""]
        for case in CASES:
            lines += case_table(results, case)
        lines += ["### Targets", ""] + target_lines(results, args, nbytes) + same_schedule_lines(results)
        lines += repoint_lines(results)
        lines += [memcpy_line(results), "", schedule_line(results), ""]
        for key, profile in profiles.get(nbytes, {}).items():
            lines += profile_lines(key, profile)
        for key, summary in perfs.get(nbytes, {}).items():
            lines += perf_lines(key, summary)
        for key, result in offcpus.get(nbytes, {}).items():
            lines += offcpu.report_lines(f"### Off the CPU: {ROWS[key].label}, one run", result,
                                         result.get("wall", 0.0), result.get("calls", 0), fmt_time)
    lines += [f"![wall time, blocking and peak memory per row]({plot_name})", ""]
    path.write_text("\n".join(lines))


def variant_notes(args) -> List[str]:
    """The "What is measured" bullets of --rotating and --repoint-bytes."""
    notes = []
    if args.rotating:
        notes.append(f"- **Rotating time buffer** (`--rotating`): the wave field lives in one buffer of "
                     f"{TIME_LEVELS} levels indexed by step % {TIME_LEVELS}, each step writing the level two "
                     "steps back, as Devito's `TimeFunction(time_order=2, save=None)`; pyrevolve's "
                     "`Checkpoint.get_data(t)` hands new views of the levels of u[t-1] and u[t], so the "
                     "arrays a save or load gets lie elsewhere than the previous call's at almost every "
                     "call (Devito's route through ResurgoRevolveStorage's moved arrays).")
    if args.repoint_bytes:
        notes.append(f"- **`_REPOINT_BYTES`** (`--repoint-bytes {','.join(args.repoint_bytes)}`): each "
                     "ResurgoRevolver row runs once per value with `resurgo.adjoint_pyrevolve._REPOINT_BYTES` "
                     "set to it in the worker: a moved checkpoint array of at least that many bytes has its "
                     "store region protected anew (unprotect + protect), a smaller one is copied into the "
                     "region's staging array (one more copy per array per call). 0: always re-point; "
                     "inf: always stage.")
    return notes


def write_plot(path: Path, by_size: Dict[int, Dict[str, RowResult]]) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(len(by_size), 3, figsize=(20, 5.5 * len(by_size)), squeeze=False)
    for (nbytes, results), (ax_mem, ax_disk, ax_rss) in zip(by_size.items(), axes):
        for ax, case in ((ax_mem, "memory"), (ax_disk, "disk")):
            rows = [r for r in results.values() if r.row.case == case and r.runs]
            groups = [(name, {r.key: r.series(name, value) for r in rows}) for name, value in (
                ("total wall", lambda m: m.wall),
                ("forward blocking", lambda m: m.save_seconds),
                ("backward blocking", lambda m: m.load_seconds))]
            grouped_bars(ax, groups)
            ax.set_ylabel("seconds (median, bars: min–max)")
            ax.set_title(f"{human(nbytes)} checkpoints, {CASES[case].split(':')[0]}")
            ax.legend(fontsize=7, loc="upper right")
        # Bars keyed by the row's place in its case, so that each bar has the
        # colour of the same row in that case's panel.
        rss_groups = [(case, {f"place {i}": r.series("rss", lambda m: m.peak_rss / MiB)
                              for i, r in enumerate(r for r in results.values()
                                                    if r.row.case == case and r.runs)})
                      for case in CASES]
        grouped_bars(ax_rss, rss_groups, log_scale=False)
        ax_rss.set_ylabel("peak RSS, MiB (colours: the rows of each case's panel)")
        ax_rss.set_title(f"{human(nbytes)} checkpoints: peak memory per row")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def profile_lines(key: str, profile: Dict[str, Any]) -> List[str]:
    """The --profile table of one row at one size."""
    title = f"### Profile: {ROWS[key].label}, one run under cProfile"
    if "failure" in profile:
        return [title, "", f"failed: {profile['failure']}", ""]
    lines = [title, "",
             f"Wall under the profiler {fmt_time(profile['wall'])} (cProfile slows every Python call, "
             f"so shares, not times, compare with the table above); own time of all functions "
             f"{fmt_time(profile['own_total'])}. Top {PROFILE_TOP} by own time:", "",
             "| function | calls | own time | per call | share of own time | cumulative |",
             "|---|---|---|---|---|---|"]
    for name, calls, own, cumulative in profile["top"]:
        lines.append(f"| `{name}` | {calls} | {fmt_time(own)} | {fmt_time(own / calls)} | "
                     f"{own / profile['own_total']:.3f} | {fmt_time(cumulative)} |")
    return lines + [""]


def perf_lines(key: str, summary: Dict[str, Any]) -> List[str]:
    """The --perf tables of one row at one size."""
    title = f"### perf: {ROWS[key].label}, one run under `perf record`"
    if "failure" in summary:
        return [title, "", f"failed: {summary['failure']}", ""]
    cpu = summary["cpu_seconds"]

    def table(heading: str, rows: List[Tuple[str, float, float]]) -> List[str]:
        lines = [f"| {heading} | samples in it and its callees | own samples | CPU in it and its callees |",
                 "|---|---|---|---|"]
        return lines + [f"| `{name[:110]}` | {children:.2f} % | {own:.2f} % | {fmt_time(children / 100 * cpu)} |"
                        for name, children, own in rows] + [""]

    return ([title, "",
             f"`{' '.join(PERF_RECORD)}` of a `--worker` run (every thread of the whole process, "
             f"imports and model set-up included; `{' '.join(PERF_REPORT)}`): "
             f"the row's wall {fmt_time(summary['wall'])}, {fmt_time(cpu)} of CPU sampled, "
             f"{summary['saves']} saves and {summary['loads']} loads.", ""]
            + table("symbol, by own samples", summary["by_self"])
            + table("Resurgo function", summary["library"]))


def resurgo_source(resurgo: Any) -> str:
    """Where the imported package was built from: pip's record of its source
    tree, and that tree's commit, or else the module's path."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        record = json.loads(distribution("resurgo").read_text("direct_url.json") or "{}")
    except PackageNotFoundError:
        record = {}
    url = record.get("url", "")
    if not url.startswith("file://"):
        return f"{resurgo.__file__} (no source record)"
    tree = url[len("file://"):]
    git = ["git", "-C", tree]
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    changed = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"],
                             capture_output=True, text=True).stdout.strip()
    state = "with uncommitted changes" if changed else "clean"
    return f"{tree}, commit {head or 'unknown'} ({state}); module {resurgo.__file__}"


def load_average() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


# ------------------------------------------------------------------- main
def parse_args(argv: List[str]):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="64MiB,512MiB", help="bytes per checkpoint (default %(default)s)")
    ap.add_argument("--steps", type=int, default=64, help="time steps per shot (default %(default)s)")
    ap.add_argument("--snapshots", type=int, default=8,
                    help="Revolve snapshots, memory case (default %(default)s)")
    ap.add_argument("--memory-schedule", choices=MEMORY_SCHEDULES, default="revolve",
                    help="the memory case's checkpoint_schedules schedule (default %(default)s; "
                         "multistage: MultistageCheckpointSchedule(steps, snapshots, 0), for "
                         "thousands of steps)")
    ap.add_argument("--ram-snapshots", type=int, default=3,
                    help="RAM snapshots, disk case (default %(default)s)")
    ap.add_argument("--disk-snapshots", type=int, default=5,
                    help="DISK snapshots, disk case (default %(default)s)")
    ap.add_argument("--prefetch-checkpoints", type=int, default=2,
                    help="Resurgo prefetch_capacity in checkpoints, disk case (default %(default)s)")
    ap.add_argument("--rows", default=None,
                    help="rows to run, comma-separated, or 'all' (default: all but the "
                         f"pyrevolve_resurgo ones; with --rotating {ROTATING_DEFAULT_ROWS}): " + ", ".join(ROWS))
    ap.add_argument("--rotating", action="store_true",
                    help="the model's field in a rotating time buffer of three levels, pyrevolve's "
                         "Checkpoint handing views of it that move at every step, as Devito's "
                         f"(rows: {', '.join(ROTATING_ROWS)})")
    ap.add_argument("--repoint-bytes", default="", metavar="LIST",
                    help="run each ResurgoRevolver row once per value (sizes, 0 or inf, comma-separated) "
                         "with resurgo.adjoint_pyrevolve._REPOINT_BYTES set to it: moved checkpoint "
                         "arrays from that size up are re-pointed, smaller ones staged")
    ap.add_argument("--profile", default="", metavar="ROWS",
                    help="after the repeats, run each of these rows (comma-separated) once more per "
                         "size under cProfile and report its top functions")
    ap.add_argument("--perf", default="", metavar="ROWS",
                    help="after the repeats, run each of these rows once more per size under `perf "
                         "record` (needs perf) and report its top symbols and Resurgo functions")
    ap.add_argument("--offcpu", default="", metavar="ROWS",
                    help="after the repeats, run each of these rows once more per size under a system-wide "
                         "record of context switches (needs perf and root) and report where the worker's "
                         "main thread was off the CPU (bench/offcpu.py)")
    ap.add_argument("--before-package", type=Path, default=None, metavar="DIR",
                    help="a directory holding resurgo/ (with _core) of an older build: every Resurgo row "
                         "runs once more with it, interleaved (ROW@before)")
    ap.add_argument("--before-label", default="", help="what the before package is (e.g. its commit)")
    ap.add_argument("--name", default="adjoint",
                    help="the report's file name, without .md/.png (default %(default)s)")
    add_common_args(ap, "NAME", "directory of the DISK checkpoints (node-local disk); "
                    "default: a fresh directory under /tmp")
    args = ap.parse_args(argv)
    args.argv = argv
    finish_common_args(ap, args)
    if args.rows is None:
        args.rows = ROTATING_DEFAULT_ROWS if args.rotating else ",".join(DEFAULT_ROWS)
    args.rows = list(ROWS) if args.rows == "all" else [key.strip() for key in args.rows.split(",") if key.strip()]
    args.profile = [key.strip() for key in args.profile.split(",") if key.strip()]
    args.perf = [key.strip() for key in args.perf.split(",") if key.strip()]
    args.offcpu = [key.strip() for key in args.offcpu.split(",") if key.strip()]
    unknown = [key for key in args.rows + args.profile + args.perf + args.offcpu if key not in ROWS]
    if unknown:
        ap.error(f"unknown rows {unknown}; choose from {', '.join(ROWS)}")
    check_rotating_and_repoint(ap, args)
    if min(args.snapshots, args.ram_snapshots, args.disk_snapshots, args.prefetch_checkpoints) < 1:
        ap.error("snapshot and prefetch counts must be at least 1")
    if args.before_package is not None:
        if not (args.before_package / "resurgo" / "__init__.py").is_file():
            ap.error(f"--before-package {args.before_package}: no resurgo/__init__.py in it")
        args.rows += [key + BEFORE for key in args.rows if ROWS[split_key(key)[0]].role == "resurgo"]
    args.sizes = parse_sizes(args.sizes, multiple=16)
    for nbytes in args.sizes:
        grid_shape(nbytes)
    return args


def check_rotating_and_repoint(ap: argparse.ArgumentParser, args) -> None:
    """--rotating runs only ROTATING_ROWS; --repoint-bytes replaces each
    ResurgoRevolver row (in --rows, --profile, --perf, --offcpu) by one row
    per value."""
    if args.rotating:
        fixed = [key for key in args.rows + args.profile + args.perf + args.offcpu if key not in ROTATING_ROWS]
        if fixed:
            ap.error(f"--rotating: rows {fixed} run the model through resurgo.adjoint.run, whose storages "
                     f"hold model.state's arrays for the whole run; choose from {', '.join(ROTATING_ROWS)}")
    values = [text.strip() for text in args.repoint_bytes.split(",") if text.strip()]
    for text in values:
        try:
            parse_repoint(text)
        except argparse.ArgumentTypeError as error:
            ap.error(f"--repoint-bytes: {error}; give sizes, 0 or inf")
    args.repoint_bytes = values

    def expand(keys: List[str]) -> List[str]:
        expanded = []
        for key in keys:
            expanded += [key + REPOINT + text for text in values] if key.startswith("pyrevolve_resurgo") else [key]
        return expanded

    if values:
        if not any(key.startswith("pyrevolve_resurgo") for key in args.rows):
            ap.error("--repoint-bytes sets the threshold of the ResurgoRevolver rows; add "
                     "pyrevolve_resurgo or pyrevolve_resurgo_disk to --rows")
        args.rows, args.profile = expand(args.rows), expand(args.profile)
        args.perf, args.offcpu = expand(args.perf), expand(args.offcpu)


def register_variants(keys: List[str], before: str) -> None:
    """ROWS and SAME_SCHEDULE entries of the ROW@repoint=VALUE and ROW@before
    rows, labelled by what they change (`before`: the before rows' label)."""
    for key in keys:
        row, is_before, repoint = split_key(key)
        if key in ROWS:
            continue
        label = ROWS[row].label
        if repoint == 0:
            label += " [re-point every moved array]"
        elif repoint == math.inf:
            label += " [stage every moved array]"
        elif repoint is not None:
            label += f" [re-point moved arrays from {human(repoint)}, stage smaller ones]"
        ROWS[key] = replace(ROWS[row], label=label + (before if is_before else ""))
        if row in SAME_SCHEDULE:
            SAME_SCHEDULE[key] = SAME_SCHEDULE[row]


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    import_package_from_environment()
    if argv[:1] == ["--worker"]:
        print(json.dumps(asdict(worker(Job(**json.loads(argv[1]))))))
        return 0
    if argv[:1] == ["--profile-worker"]:
        print(json.dumps(profile_worker(Job(**json.loads(argv[1])))))
        return 0
    args = parse_args(argv)
    memory = MEMORY_SCHEDULES[args.memory_schedule]
    ROWS.update({key: replace(row, label=row.label.format(memory=memory)) for key, row in ROWS.items()})
    register_variants(args.rows + args.profile + args.perf + args.offcpu,
                      f" [before: {args.before_label or args.before_package}]")
    CASES["memory"] = CASES["memory"].format(memory=memory)
    import resurgo
    from resurgo import _core

    args.buffer_floor = _core.SMALL_STATE_BUFFER

    created = args.dir is None
    root = Path(tempfile.mkdtemp(prefix="resurgo-adjoint-", dir="/tmp")) if created else args.dir
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    for nbytes in args.sizes:
        # Model (9 fields) + the most any row but the ideal keeps (Revolve's
        # snapshots + one in flight); disk: the DISK snapshots, twice for slack.
        check_resources("adjoint.py", root, f"checkpoints of {human(nbytes)}",
                        (MODEL_FIELDS / 2 + args.snapshots + 2) * nbytes, 2 * args.disk_snapshots * nbytes)
    machine = machine_description(root, resurgo)
    machine["resurgo built from"] = resurgo_source(resurgo)
    if args.before_package is not None:
        machine["before rows' resurgo"] = f"{args.before_package} ({args.before_label or 'no label'})"
    machine["load average (1, 5, 15 min) at start"] = load_average()
    log(f"DISK checkpoints in {machine['target directory']}; sizes {[human(s) for s in args.sizes]}, "
        f"{args.repeats} repeats, rows {args.rows}")
    by_size: Dict[int, Dict[str, RowResult]] = {}
    profiles: Dict[int, Dict[str, Dict[str, Any]]] = {}
    perfs: Dict[int, Dict[str, Dict[str, Any]]] = {}
    offcpus: Dict[int, Dict[str, Dict[str, Any]]] = {}
    try:
        for nbytes in args.sizes:
            by_size[nbytes] = bench_size(nbytes, args, root)
            profiles[nbytes] = profile_size(nbytes, args, root)
            perfs[nbytes] = perf_size(nbytes, args, root)
            offcpus[nbytes] = offcpu_size(nbytes, args, root)
    finally:
        if created and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    machine["load average (1, 5, 15 min) at end"] = load_average()
    args.out.mkdir(parents=True, exist_ok=True)
    md, png = args.out / f"{args.name}.md", args.out / f"{args.name}.png"
    write_plot(png, by_size)
    write_markdown(md, machine, by_size, args, png.name, profiles, perfs, offcpus)
    for nbytes, results in by_size.items():
        print(f"checkpoint {human(nbytes)}:")
        for line in target_lines(results, args, nbytes)[2:-1]:
            print("  " + line.strip("|").replace(" | ", ": ", 1))
    print(f"wrote {md} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
