"""The Python layer's own cost per call (issue 27, part 4), for
small_checkpoints.py: each public call an adjoint makes thousands of times
(Store.checkpoint, restart and discard; resurgo.adjoint.ResurgoStorage's
save and load; resurgo.adjoint_pyrevolve.ResurgoRevolveStorage's save and
load), timed with the store's core calls replaced by a C function that does
nothing (``abs``), less the time of calling that function directly (the
store's name, which messages quote, is still read from the real core). What is
left is what the Python code around the core costs, without the core's work
or its noise (thread hand-offs, the copy), so a few tenths of a microsecond
compare between two builds.

The state is two float64 arrays of 8 entries (an adjoint's two time levels),
handed to ResurgoRevolveStorage at every call, whose regions therefore stay
pointed at them.

The bindings release the GIL around every store call. Whether that costs a
caller anything when another Python thread wants the GIL (the thread that
released it may have to wait for it back) is measured too: the real
Store.checkpoint, restart and discard of a 256 KiB memory-only state, alone
and with a Python thread spinning beside them.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any, Callable, Dict, List

import numpy as np

ROUNDS = 2000  # calls per timing
TIMINGS = 7  # timings per call; the median is reported

GIL_STATE_BYTES = 256 * 1024
GIL_CALLS = 500  # checkpoint, restart, discard cycles per measure
# (call, what it measures), in the report's order
CALLS = [
    ("Store.checkpoint", "version check, core call"),
    ("Store.restart", "version check, core call"),
    ("Store.discard", "version check, core call"),
    ("ResurgoStorage.save", "the store of the storage type, its version, Store.checkpoint"),
    ("ResurgoStorage.load", "the version of the step, Store.restart, Store.discard (a Move)"),
    ("ResurgoRevolveStorage.save", "regions checked against the arrays handed over, Store.checkpoint, Store.discard of the slot's old version"),
    ("ResurgoRevolveStorage.load", "regions checked against the arrays handed over, Store.restart into them"),
]


def per_call(fn: Callable[[int], Any]) -> float:
    """Median over TIMINGS of the mean time of ROUNDS calls fn(0..ROUNDS-1)."""
    timings = []
    for timing in range(TIMINGS):
        first = timing * ROUNDS
        started = time.perf_counter()
        for i in range(first, first + ROUNDS):
            fn(i)
        timings.append((time.perf_counter() - started) / ROUNDS)
    return statistics.median(timings)


def stub(store: Any) -> Any:
    """Replaces the core of `store` by one whose calls do nothing; returns
    the core to put back."""
    core = store._core

    class NoOpCore:
        checkpoint = restart = discard = abs
        name = property(lambda self: core.name)

    store._core = NoOpCore()
    return core


def store_calls(state: Dict[str, np.ndarray]) -> Dict[str, float]:
    from resurgo.adjoint import memory_store

    store = memory_store("python-layer", state)
    core = stub(store)
    try:
        return {"Store.checkpoint": per_call(store.checkpoint), "Store.restart": per_call(store.restart),
                "Store.discard": per_call(store.discard)}
    finally:
        store._core = core
        store.close()


def adjoint_calls(state: Dict[str, np.ndarray]) -> Dict[str, float]:
    from checkpoint_schedules import StorageType
    from resurgo.adjoint import ResurgoStorage

    ram = StorageType.RAM
    with ResurgoStorage("python-layer", state) as storage:
        storage.save(-1, ram)  # opens the store
        store = storage.stores[ram]
        core = stub(store)
        try:
            save = per_call(lambda step: storage.save(step, ram))
            load = per_call(lambda step: storage.load(step, ram, delete=True))
        finally:
            store._core = core
            storage.load(-1, ram, delete=True)
    return {"ResurgoStorage.save": save, "ResurgoStorage.load": load}


def pyrevolve_calls(state: Dict[str, np.ndarray]) -> Dict[str, float]:
    from resurgo.adjoint_pyrevolve import ResurgoRevolveStorage

    arrays = list(state.values())
    storage = ResurgoRevolveStorage(sum(a.size for a in arrays), 4, np.float64, name="python-layer")
    storage.save(0, arrays)  # opens the slot
    core = stub(storage.store)
    try:
        save = per_call(lambda call: storage.save(call % 4, arrays))
        load = per_call(lambda call: storage.load(0, arrays))
    finally:
        storage.store._core = core
        storage._slots._held = {0: 0}  # the versions the stubbed saves named were never made
        storage.close()
    return {"ResurgoRevolveStorage.save": save, "ResurgoRevolveStorage.load": load}


def layer_costs() -> Dict[str, float]:
    """Seconds per call of each of CALLS over the bare no-op call, with the
    resurgo package that is imported."""
    state = {"u_prev": np.ones(8), "u_curr": np.ones(8)}
    floor = per_call(abs)
    measured = {**store_calls(state), **adjoint_calls(state), **pyrevolve_calls(state)}
    return {**{call: seconds - floor for call, seconds in measured.items()}, **gil_costs()}


def real_calls(store: Any, first: int) -> Dict[str, float]:
    """Median seconds of GIL_CALLS real checkpoint, restart and discard calls."""
    times: Dict[str, List[float]] = {"checkpoint": [], "restart": [], "discard": []}
    for version in range(first, first + GIL_CALLS):
        for call, fn in (("checkpoint", store.checkpoint), ("restart", store.restart), ("discard", store.discard)):
            started = time.perf_counter()
            fn(version)
            times[call].append(time.perf_counter() - started)
    return {call: statistics.median(values) for call, values in times.items()}


def gil_costs() -> Dict[str, float]:
    """The real calls alone ("alone <call>") and beside a spinning Python
    thread ("busy <call>"), in seconds."""
    from resurgo.adjoint import memory_store

    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    with memory_store("python-layer-gil", {"u": np.ones(GIL_STATE_BYTES // 8)}) as store:
        alone = real_calls(store, 0)
        thread = threading.Thread(target=spin)
        thread.start()
        try:
            busy = real_calls(store, GIL_CALLS)
        finally:
            stop.set()
            thread.join()
    return {**{f"alone {call}": s for call, s in alone.items()}, **{f"busy {call}": s for call, s in busy.items()}}


def report_lines(results: Dict[str, Dict[str, List[float]]], fmt_time: Callable[[float], str]) -> List[str]:
    """The table of layer_costs over the repeats: build -> call -> seconds per repeat."""
    builds = list(results)
    lines = ["## The Python layer's own cost per call", "",
             "Each call with the store's core calls replaced by a C function that does nothing, less that "
             "function called directly (bench/python_layer.py): the Python code around the core, without the "
             f"core's work. Median [min–max] over the repeats, each the median of {TIMINGS} timings of "
             f"{ROUNDS} calls. The state: two float64 arrays of 8 entries.", "",
             "| call | what runs | " + " | ".join(builds) + " |",
             "|---|---|" + "---:|" * len(builds)]
    for call, what in CALLS:
        cells = []
        for build in builds:
            times = results[build].get(call, [])
            cells.append(f"{fmt_time(statistics.median(times))} [{fmt_time(min(times))}–{fmt_time(max(times))}]"
                         if times else "—")
        lines.append(f"| `{call}` | {what} | " + " | ".join(cells) + " |")
    return lines + [""] + gil_lines(results, fmt_time)


def gil_lines(results: Dict[str, Dict[str, List[float]]], fmt_time: Callable[[float], str]) -> List[str]:
    lines = ["### The GIL", "",
             f"The real Store calls on a memory-only store of one {GIL_STATE_BYTES // 1024} KiB array, median of "
             f"{GIL_CALLS} calls, alone and with a Python thread spinning beside them (it wants the GIL the "
             "bindings release during each call); median [min–max] over the repeats.", "",
             "| build | call | alone | beside a spinning Python thread |", "|---|---|---:|---:|"]
    for build, calls in results.items():
        for call in ("checkpoint", "restart", "discard"):
            cells = [calls.get(f"{when} {call}", []) for when in ("alone", "busy")]
            lines.append(f"| {build} | `Store.{call}` | " + " | ".join(
                f"{fmt_time(statistics.median(t))} [{fmt_time(min(t))}–{fmt_time(max(t))}]" if t else "—"
                for t in cells) + " |")
    return lines + [""]
