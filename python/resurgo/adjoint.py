"""Adjoint checkpointing: checkpoint_schedules' schedules with Resurgo as the storage.

An adjoint run saves forward states and restores them in reverse order,
following a schedule (Revolve and its multistage variants). ``run`` executes
every action of a checkpoint_schedules schedule on a model and a storage;
because a schedule knows its future, ``run`` tells the storage which states
it will load, in order, before it needs them, and :class:`ResurgoStorage`
turns that into ``Store.prefetch``: the backward pass reads states that
background threads already brought from disk into memory.

    from checkpoint_schedules import MultistageCheckpointSchedule
    from resurgo.adjoint import ResurgoStorage, run

    schedule = MultistageCheckpointSchedule(n_steps, snapshots_in_ram=4, snapshots_on_disk=16)
    with ResurgoStorage("shot-7", model.state, disk_path="/local/scratch") as storage:
        stats = run(schedule, model, storage, n_steps=n_steps)

``model`` is any object with ``state`` (a mapping of NumPy arrays: the
forward restart data), ``forward(n0, n1, adj_deps=...)`` and
``reverse(n1, n0, clear_adj_deps=...)`` (:class:`AdjointModel`).
pyrevolve users: see :mod:`resurgo.adjoint_pyrevolve`.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Protocol, Sequence

import numpy as np
from checkpoint_schedules import (
    CheckpointAction,
    CheckpointSchedule,
    Copy,
    EndForward,
    EndReverse,
    Forward,
    Move,
    Reverse,
    StorageType,
)

from resurgo import _core
from resurgo.errors import InvalidArgumentError, NotFoundError
from resurgo.store import Store

__all__ = [
    "AdjointModel",
    "CheckpointStorage",
    "Transfer",
    "SAVE",
    "LOAD",
    "DictStorage",
    "ResurgoStorage",
    "RunStats",
    "run",
    "planned_transfers",
]

# Where checkpoints go: WORK is the model's own working state, NONE is "nowhere".
STORED = (StorageType.RAM, StorageType.DISK)
SAVE, LOAD = "save", "load"


class AdjointModel(Protocol):
    """A time-stepping model. Its forward restart data (the checkpoint) is the
    arrays of ``state``, advanced in place by :meth:`forward`."""

    state: Mapping[str, np.ndarray]

    def forward(self, n0: int, n1: int, *, adj_deps: bool) -> None:
        """Advance ``state`` from step n0 to n1. When ``adj_deps``, also keep (in
        the model's own working memory) what the adjoint of steps n0..n1-1 needs."""

    def reverse(self, n1: int, n0: int, *, clear_adj_deps: bool) -> None:
        """Run the adjoint from step n1 back to n0 with the kept dependencies;
        drop them when ``clear_adj_deps``."""


class Transfer(NamedTuple):
    """One future use of a storage, in the order ``run`` will make it."""

    kind: str  # SAVE or LOAD
    step: int
    storage: StorageType


class CheckpointStorage(Protocol):
    """Where Forward's restart data goes (the arrays of the model's state)."""

    def save(self, step: int, storage: StorageType) -> None:
        """Keeps a copy of the model's state, which is at ``step``."""

    def load(self, step: int, storage: StorageType, *, delete: bool) -> None:
        """Copies the state saved for ``step`` into the model's arrays; with
        ``delete`` the copy is dropped afterwards (a Move)."""

    def delete(self, step: int, storage: StorageType) -> None:
        """Drops the state saved for ``step`` (Move to StorageType.NONE)."""

    def expect(self, transfers: Sequence[Transfer]) -> None:
        """Every save and load still to come, in order: a load of (step,
        storage) reads the latest save of that pair before it. A hint only."""

    def close(self) -> None: ...


_SCHEDULE_HINT = "a schedule must save a step (Forward with write_ics) before it copies, moves or deletes it"


def _not_held(what: str, key_name: str, key: int, where: str, held: Iterable[int], hint: str = _SCHEDULE_HINT) -> NotFoundError:
    return NotFoundError(f"{what}: {key_name} {key} is not held in {where} (held: {sorted(held)}); {hint}")


def _check_stored(what: str, storage: Any) -> None:
    if storage not in STORED:
        raise InvalidArgumentError(f"{what}: storage {storage!r} holds no checkpoints; expected StorageType.RAM or StorageType.DISK")


def _on_device(array: Any) -> bool:
    """Whether ``array`` is CUDA device memory shown as CuPy and PyTorch show
    it (``__cuda_array_interface__``; a CPU tensor raises on access)."""
    return hasattr(array, "__cuda_array_interface__")


def _copy_of(array: Any) -> Any:
    """A copy of a NumPy or CuPy array (``copy``) or a PyTorch tensor (``clone``)."""
    return array.clone() if hasattr(array, "clone") else array.copy()


def _device_bytes(state: Mapping[str, Any]) -> int:
    total = 0
    for array in state.values():
        if _on_device(array):
            interface = array.__cuda_array_interface__
            total += int(np.prod(interface["shape"], dtype=np.int64)) * np.dtype(interface["typestr"]).itemsize
    return total


def _check_state(state: Mapping[str, Any], *, device_allowed: bool = False) -> None:
    if not state:
        raise InvalidArgumentError("the model state must hold at least one array")
    expected = "a numpy.ndarray or a CUDA array (CuPy, PyTorch)" if device_allowed else "a numpy.ndarray"
    for label, array in state.items():
        if not isinstance(array, np.ndarray) and not (device_allowed and _on_device(array)):
            raise InvalidArgumentError(f"model state '{label}' is a {type(array).__name__}, expected {expected}")


class DictStorage:
    """The baseline: NumPy copies of the state in a dict per storage type
    (RAM and DISK alike stay in memory)."""

    def __init__(self, state: Mapping[str, np.ndarray]) -> None:
        _check_state(state)
        self._state = state
        self._held: Dict[StorageType, Dict[int, Dict[str, np.ndarray]]] = {storage: {} for storage in STORED}

    def save(self, step: int, storage: StorageType) -> None:
        _check_stored("save", storage)
        self._held[storage][step] = {label: array.copy() for label, array in self._state.items()}

    def load(self, step: int, storage: StorageType, *, delete: bool) -> None:
        saved = self._saved("load", step, storage)
        for label, array in self._state.items():
            np.copyto(array, saved[label])
        if delete:
            del self._held[storage][step]

    def delete(self, step: int, storage: StorageType) -> None:
        self._saved("delete", step, storage)
        del self._held[storage][step]

    def expect(self, transfers: Sequence[Transfer]) -> None:
        """Nothing to prepare: every copy is in memory already."""

    def close(self) -> None:
        for held in self._held.values():
            held.clear()

    def __enter__(self) -> "DictStorage":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _saved(self, what: str, step: int, storage: StorageType) -> Dict[str, np.ndarray]:
        _check_stored(what, storage)
        held = self._held[storage]
        if step not in held:
            raise _not_held(what, "step", step, repr(storage), held)
        return held[step]


class VersionMap:
    """Keys (steps, slots) of one Store -> its versions. Every save takes a
    fresh version larger than any the store holds, so saves in any key order
    satisfy the store's increasing versions; a key saved again discards the
    version it replaces."""

    def __init__(self, store: Store, where: str, key_name: str = "step", hint: str = _SCHEDULE_HINT) -> None:
        self.store = store
        self._where, self._key_name, self._hint = where, key_name, hint  # for error messages
        self._held: Dict[int, int] = {}
        self._next = 1 + max((info.version for info in store.versions()), default=-1)

    def save(self, key: int) -> None:
        version = self._next
        self.store.checkpoint(version)
        self._next += 1
        replaced = self._held.get(key)
        self._held[key] = version
        if replaced is not None:
            self.store.discard(replaced)

    def load(self, key: int, *, delete: bool) -> None:
        self.store.restart(self._version("load", key))
        if delete:
            self.store.discard(self._held.pop(key))

    def delete(self, key: int) -> None:
        self._version("delete", key)
        self.store.discard(self._held.pop(key))

    def discard_all(self) -> None:
        for version in self._held.values():
            self.store.discard(version)
        self._held.clear()

    def future_loads(self, uses: Iterable[tuple]) -> List[int]:
        """The versions that the future ``(kind, key)`` uses will restore, in
        order (a version loaded twice appears twice: the prefetcher keeps it
        until its last use); future saves get the versions they will be given."""
        held, next_version, order = dict(self._held), self._next, []
        for kind, key in uses:
            if kind == SAVE:
                held[key], next_version = next_version, next_version + 1
            elif key in held:  # a load of a key never saved fails when it comes
                order.append(held[key])
        return order

    def _version(self, what: str, key: int) -> int:
        if key not in self._held:
            raise _not_held(what, self._key_name, key, self._where, self._held, self._hint)
        return self._held[key]


# The states an L0 device cache holds by default (device_capacity overrides it).
_DEVICE_STATES = 4


def memory_store(name: str, state: Mapping[str, Any], capacity: Any = None, **overrides: Any) -> Store:
    """A store whose versions live only in memory (no files, no durability)."""
    route = dict(memory_every=1, memory_keep=0, memory_capacity=capacity, local_every=0, persistent_every=0)
    return _protected_store(name, state, route, overrides)


def disk_store(name: str, state: Mapping[str, Any], path: str, prefetch_capacity: Any = None, **overrides: Any) -> Store:
    """A store whose versions go to the node-local directory ``path`` (L2);
    its memory level holds only what ``prefetch`` brings back. Its files are
    scratch (``local_durable=False``: never synced): the run that wrote
    them is the only one that reads them, and discards them at close."""
    route = dict(local_path=path, local_every=1, local_keep=0, local_durable=False, persistent_every=0, memory_every=0,
                 memory_capacity=prefetch_capacity)
    return _protected_store(name, state, route, overrides)


def _protected_store(name: str, state: Mapping[str, Any], route: Dict[str, Any], overrides: Dict[str, Any]) -> Store:
    fixed = sorted(set(route) & set(overrides))
    if fixed:
        raise InvalidArgumentError(
            f"store '{name}': {', '.join(fixed)} set by the adjoint storage itself; "
            "choose the memory sizes with ram_capacity / prefetch_capacity and the directory with disk_path"
        )
    # One large version in flight is enough between two saves of a schedule
    # (they are a forward step apart or more); the default buffer (twice the
    # state) would add its memory to every store. Small states keep the
    # default floor: saves a few microseconds apart then never wait for the
    # worker that moves the previous one on.
    device_bytes = _device_bytes(state)
    state_bytes = device_bytes + sum(np.asarray(array).nbytes for array in state.values() if not _on_device(array))
    overrides = {"buffer_capacity": max(state_bytes, _core.SMALL_STATE_BUFFER), **overrides}
    if device_bytes:
        # Device arrays: an L0 device cache, into which the prefetch stages
        # the states the backward pass loads (docs/adjoint.md, "Backward
        # pass on the device"); a few states keep it ahead of the loads.
        overrides = {"device_capacity": _DEVICE_STATES * device_bytes, **overrides}
    store = Store(name, **route, **overrides)
    try:
        for label, array in state.items():
            store.protect(label, array)
    except BaseException:
        store.close()
        raise
    return store


class ResurgoStorage:
    """Checkpoints in Resurgo stores. RAM: a memory-only store (versions in
    its L1 memory level, at most ``ram_capacity`` bytes). DISK: a store whose
    versions go to files in ``disk_path`` (default: a temporary directory
    removed at close); with ``prefetch`` the states the schedule will load are
    brought back into its memory level (``prefetch_capacity`` bytes) ahead
    of the load. ``overrides`` are further Store settings (``pipeline_threads``...).
    Stores open on first use; versions still held at close are discarded.

    The state may hold CUDA arrays (CuPy, PyTorch CUDA tensors: anything
    with ``__cuda_array_interface__``). Both stores then keep an L0 device
    cache of ``device_capacity`` bytes (default: four states' device
    arrays), and the DISK store's prefetch stages the states to be loaded
    into it, so that a load copies them device to device (docs/adjoint.md,
    "Backward pass on the device")."""

    def __init__(
        self,
        name: str,
        state: Mapping[str, Any],
        *,
        ram_capacity: Any = None,
        disk_path: Optional[str] = None,
        prefetch: bool = True,
        prefetch_capacity: Any = None,
        **overrides: Any,
    ) -> None:
        _check_state(state, device_allowed=True)
        self._name = name
        self._state = state
        self._ram_capacity = ram_capacity
        self._disk_path = disk_path
        self._prefetch = prefetch
        self._prefetch_capacity = prefetch_capacity
        self._overrides = overrides
        self._temporary_directory: Optional[str] = None
        self._maps: Dict[StorageType, VersionMap] = {}

    @property
    def stores(self) -> Dict[StorageType, Store]:
        """The stores opened so far, for their statistics."""
        return {storage: versions.store for storage, versions in self._maps.items()}

    def save(self, step: int, storage: StorageType) -> None:
        self._map("save", storage).save(step)

    def load(self, step: int, storage: StorageType, *, delete: bool) -> None:
        self._map("load", storage).load(step, delete=delete)

    def delete(self, step: int, storage: StorageType) -> None:
        self._map("delete", storage).delete(step)

    def expect(self, transfers: Sequence[Transfer]) -> None:
        """Names the DISK versions to be loaded, in order, to the DISK store's
        prefetch (RAM versions are in memory already)."""
        if not self._prefetch:
            return
        uses = [(use.kind, use.step) for use in transfers if use.storage is StorageType.DISK]
        if any(kind == LOAD for kind, _ in uses):
            versions = self._map("expect", StorageType.DISK)
            versions.store.prefetch(versions.future_loads(uses))

    def close(self) -> None:
        try:
            for versions in self._maps.values():
                versions.discard_all()
        finally:
            maps, self._maps = self._maps, {}
            try:
                for versions in maps.values():
                    versions.store.close()
            finally:
                if self._temporary_directory is not None:
                    shutil.rmtree(self._temporary_directory, ignore_errors=True)
                    self._temporary_directory = None

    def __enter__(self) -> "ResurgoStorage":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
            return
        try:  # do not hide the run's exception behind a close error
            self.close()
        except Exception:  # noqa: BLE001
            pass

    def _map(self, what: str, storage: StorageType) -> VersionMap:
        # One lookup per save or load (a StorageType hashes in Python code);
        # the storage is checked when its store opens, the only time it can
        # be new.
        versions = self._maps.get(storage)
        if versions is None:
            _check_stored(what, storage)
            versions = self._maps[storage] = VersionMap(self._open(storage), repr(storage))
        return versions

    def _open(self, storage: StorageType) -> Store:
        options = self._overrides
        if storage is StorageType.RAM:
            return memory_store(f"{self._name}-ram", self._state, self._ram_capacity, **options)
        if self._disk_path is None and self._temporary_directory is None:
            self._temporary_directory = tempfile.mkdtemp(prefix="resurgo-adjoint-")
        path = self._disk_path if self._disk_path is not None else self._temporary_directory
        return disk_store(f"{self._name}-disk", self._state, path, self._prefetch_capacity, **options)


@dataclass
class RunStats:
    """Where the time of one adjoint run went."""

    forward_seconds: float = 0.0  # model.forward, recomputation included
    reverse_seconds: float = 0.0  # model.reverse
    save_seconds: float = 0.0  # time blocked in storage.save
    load_seconds: float = 0.0  # time blocked in storage.load
    saves: int = 0
    loads: int = 0


def planned_transfers(actions: Iterable[CheckpointAction]) -> List[Transfer]:
    """The saves and loads that ``run`` makes for ``actions``, in order."""
    transfers = []
    for action in actions:
        if isinstance(action, Forward) and action.write_ics and action.storage in STORED:
            transfers.append(Transfer(SAVE, action.n0, action.storage))
        elif isinstance(action, (Copy, Move)) and action.from_storage in STORED and action.to_storage is not StorageType.NONE:
            transfers.append(Transfer(LOAD, action.n, action.from_storage))
            if action.to_storage in STORED:
                transfers.append(Transfer(SAVE, action.n, action.to_storage))
    return transfers


def run(schedule: CheckpointSchedule, model: AdjointModel, storage: CheckpointStorage, *, n_steps: int) -> RunStats:
    """Runs the forward and the adjoint of ``model`` over ``n_steps`` steps as
    ``schedule`` says (Forward, Reverse, Copy, Move, EndForward, EndReverse;
    storage types RAM, DISK, WORK, NONE), until the first EndReverse.

    An offline schedule (``max_n`` set) must have ``max_n == n_steps``; an
    online one (``max_n`` None) is finalized when the forward reaches
    ``n_steps``. Once the number of steps is known, the remaining actions are
    read ahead and their saves and loads passed to ``storage.expect``.
    Actions and storage combinations this cannot execute raise
    InvalidArgumentError naming them."""
    return _Run(schedule, model, storage, n_steps).execute()


class _Run:
    def __init__(self, schedule: CheckpointSchedule, model: AdjointModel, storage: CheckpointStorage, n_steps: int) -> None:
        if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 1:
            raise InvalidArgumentError(f"run: n_steps must be a positive int (got {n_steps!r})")
        if schedule.max_n is not None and schedule.max_n != n_steps:
            raise InvalidArgumentError(f"run: {type(schedule).__name__} was made for max_n={schedule.max_n} steps, not n_steps={n_steps}")
        self.schedule = schedule
        self.model = model
        self.storage = storage
        self.n_steps = n_steps
        self.position = 0  # the step model.state is at
        self.adjoint_at = n_steps  # the step the adjoint has reached
        self.planned: Optional[Deque[CheckpointAction]] = None  # the actions read ahead
        self.stats = RunStats()
        self.handlers: Dict[type, Callable[[Any], None]] = {
            Forward: self._forward,
            Reverse: self._reverse,
            Copy: self._copy,
            Move: self._move,
            EndForward: self._end_forward,
            EndReverse: self._end_reverse,
        }

    def execute(self) -> RunStats:
        if self.schedule.max_n is not None:
            self._plan_ahead()
        for action in self._actions():
            self._handler(action)(action)
            if isinstance(action, EndReverse):
                break
        return self.stats

    def _actions(self) -> Iterator[CheckpointAction]:
        while True:
            if self.planned is not None:
                if not self.planned:
                    return
                yield self.planned.popleft()
            else:
                try:
                    yield next(self.schedule)
                except StopIteration:
                    return

    def _plan_ahead(self) -> None:
        """Reads the rest of the schedule (it is finite once max_n is known)
        and tells the storage what it will save and load."""
        planned: Deque[CheckpointAction] = deque()
        for action in self.schedule:
            planned.append(action)
            if isinstance(action, EndReverse):
                break
        self.planned = planned
        self.storage.expect(planned_transfers(planned))

    def _handler(self, action: Any) -> Callable[[Any], None]:
        for cls in type(action).__mro__:
            if cls in self.handlers:
                return self.handlers[cls]
        raise InvalidArgumentError(
            f"run: unsupported checkpoint_schedules action {action!r}; "
            "supported: Forward, Reverse, Copy, Move, EndForward, EndReverse"
        )

    def _forward(self, action: Forward) -> None:
        if action.n0 != self.position:
            raise InvalidArgumentError(f"run: {action!r} starts at step {action.n0}, but the model is at step {self.position}")
        if action.write_adj_deps and action.storage is not StorageType.WORK:
            raise _unsupported(action, "adjoint dependencies are kept by the model itself: write_adj_deps needs StorageType.WORK")
        if action.write_ics and action.storage not in STORED:
            raise _unsupported(action, "forward restart data (write_ics) goes to StorageType.RAM or StorageType.DISK")
        end = self._forward_end(action)
        if action.write_ics:
            self._save(action.n0, action.storage)
        started = time.perf_counter()
        self.model.forward(action.n0, end, adj_deps=action.write_adj_deps)
        self.stats.forward_seconds += time.perf_counter() - started
        self.position = end
        if self.schedule.max_n is None and end == self.n_steps:
            self.schedule.finalize(self.n_steps)
            self._plan_ahead()

    def _forward_end(self, action: Forward) -> int:
        if self.schedule.max_n is None:  # online: forwards run open-ended until finalize
            return min(action.n1, self.n_steps)
        if action.n1 > self.n_steps:
            raise InvalidArgumentError(f"run: {action!r} goes past n_steps={self.n_steps}")
        return action.n1

    def _reverse(self, action: Reverse) -> None:
        if action.n1 != self.adjoint_at:
            raise InvalidArgumentError(f"run: {action!r} starts at step {action.n1}, but the adjoint is at step {self.adjoint_at}")
        started = time.perf_counter()
        self.model.reverse(action.n1, action.n0, clear_adj_deps=action.clear_adj_deps)
        self.stats.reverse_seconds += time.perf_counter() - started
        self.adjoint_at = action.n0

    def _copy(self, action: Copy) -> None:
        self._transfer(action, delete=False)

    def _move(self, action: Move) -> None:
        self._transfer(action, delete=True)

    def _transfer(self, action: Any, *, delete: bool) -> None:
        source, target = action.from_storage, action.to_storage
        if source not in STORED:
            raise _unsupported(action, "data is copied or moved from StorageType.RAM or StorageType.DISK only")
        if target is StorageType.WORK:
            self._load(action.n, source, delete)
            self.position = action.n
        elif target is StorageType.NONE and delete:
            self.storage.delete(action.n, source)
        elif target in STORED and target is not source:
            self._between_storages(action.n, source, target, delete)
        else:
            raise _unsupported(action, "the target must be StorageType.WORK, the other stored type, or NONE for a Move (delete)")

    def _between_storages(self, step: int, source: StorageType, target: StorageType, delete: bool) -> None:
        """Passes the state through the model's arrays, which get their
        working contents back afterwards (by item assignment: NumPy, CuPy
        and PyTorch arrays alike)."""
        working = {label: _copy_of(array) for label, array in self.model.state.items()}
        self._load(step, source, delete)
        self._save(step, target)
        for label, array in self.model.state.items():
            array[...] = working[label]

    def _end_forward(self, action: EndForward) -> None:
        if self.position != self.n_steps:
            raise InvalidArgumentError(f"run: {action!r} at step {self.position}, before n_steps={self.n_steps}")

    def _end_reverse(self, action: EndReverse) -> None:
        if self.adjoint_at != 0:
            raise InvalidArgumentError(f"run: {action!r} with the adjoint at step {self.adjoint_at}, not 0")

    def _save(self, step: int, storage: StorageType) -> None:
        started = time.perf_counter()
        self.storage.save(step, storage)
        self.stats.save_seconds += time.perf_counter() - started
        self.stats.saves += 1

    def _load(self, step: int, storage: StorageType, delete: bool) -> None:
        started = time.perf_counter()
        self.storage.load(step, storage, delete=delete)
        self.stats.load_seconds += time.perf_counter() - started
        self.stats.loads += 1


def _unsupported(action: Any, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"run: unsupported action {action!r}: {why}")
