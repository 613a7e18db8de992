"""Automatic checkpointing from declared data accesses (docs/auto.md).

The application declares its arrays as datasets and, before each parallel
loop, the loop's name and how it accesses them; every value the loops
compute that reaches the control flow goes through :meth:`Runtime.query`.
The runtime then decides where to checkpoint and which datasets to save, and
a restarted run restores by replay: :meth:`Runtime.loop` returns False (skip
the loop) and queries return the values of the checkpointed run until the
point where the datasets are restored.

    import numpy as np
    import resurgo
    from resurgo import auto

    u = np.zeros((n + 2, n + 2))
    v = np.zeros_like(u)
    with resurgo.Store("heat", local_path="/dev/shm/ckpt") as store, auto.Runtime(store) as rt:
        U, V = rt.dataset("u", u, halo=1), rt.dataset("v", v, halo=1)
        for step in range(steps):
            if rt.loop("stencil", U.read(), V.write(range="interior")):
                v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
            ...
            residual = rt.query(float(np.abs(v - u).max()))

The model to respect: datasets change only inside declared loops (or in
code before :meth:`Runtime.initphase_done`, which a restart runs again), and
the control flow depends only on values returned by :meth:`Runtime.query`.
"""

from __future__ import annotations

import enum
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from resurgo import _core
from resurgo.array_view import array_view, index_list
from resurgo.errors import InvalidArgumentError
from resurgo.store import Store

__all__ = ["Runtime", "Dataset", "Arg", "Access", "Range", "CheckpointReport", "RestoreReport"]


class Access(enum.IntEnum):
    """How a loop accesses a dataset. WRITE: every element the loop covers is
    written before it is read; INCREMENT (``+=``) reads the old value."""

    READ = 0
    WRITE = 1
    READ_WRITE = 2
    INCREMENT = 3


class Range(enum.IntEnum):
    """The part of a dataset a loop covers: every element, the interior only,
    or the halo ring only (a dataset declared with ``halo > 0``)."""

    ALL = 0
    INTERIOR = 1
    HALO = 2


RangeLike = Union[Range, str]  # a Range or its name: "all", "interior", "halo"


class Arg(NamedTuple):
    """One argument of a loop; made by :meth:`Dataset.read` and its siblings."""

    dataset: int
    access: Access
    range: Range


def _range_arg(value: RangeLike) -> Range:
    if isinstance(value, Range):
        return value
    if isinstance(value, str):
        try:
            return Range[value.upper()]
        except KeyError:
            pass
    raise InvalidArgumentError(f"range must be 'all', 'interior' or 'halo', not {value!r}")


@dataclass(frozen=True, eq=False)
class Dataset:
    """An array declared to a :class:`Runtime`; its methods describe how a
    loop accesses it. Holds a reference to the array."""

    name: str
    id: int
    array: np.ndarray = field(repr=False)
    halo: int = 0

    def read(self, range: RangeLike = Range.ALL) -> Arg:
        return Arg(self.id, Access.READ, _range_arg(range))

    def write(self, range: RangeLike = Range.ALL) -> Arg:
        return Arg(self.id, Access.WRITE, _range_arg(range))

    def read_write(self, range: RangeLike = Range.ALL) -> Arg:
        return Arg(self.id, Access.READ_WRITE, _range_arg(range))

    def increment(self, range: RangeLike = Range.ALL) -> Arg:
        return Arg(self.id, Access.INCREMENT, _range_arg(range))


# The reports are the C++ API's own (include/resurgo/auto.hpp), bound once by
# the extension.
CheckpointReport = _core.CheckpointReport
RestoreReport = _core.RestoreReport


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not bool")
    count = operator.index(value)
    if count < 0:
        raise InvalidArgumentError(f"{what} must be >= 0 (got {count})")
    return count


def _bytes_of(array: np.ndarray) -> np.ndarray:
    """A flat uint8 view of a C-contiguous array: what the core takes."""
    return array.reshape(-1).view(np.uint8)


def _plain_copy(value: Any, what: str) -> np.ndarray:
    array = np.array(value, order="C")
    if array.dtype.hasobject:
        raise TypeError(f"{what}: {type(value).__name__} of Python objects has no fixed bytes to log")
    return array


# Python numbers go through the runtime as these NumPy types and come back
# as the Python type; bool before int, since bool is an int.
_PYTHON_NUMBERS: Tuple[Tuple[type, type], ...] = (
    (bool, np.bool_),
    (int, np.int64),
    (float, np.float64),
    (complex, np.complex128),
)


def _payload_buffer(payload: Any, what: str) -> Tuple[np.ndarray, Callable[[np.ndarray], Any]]:
    """A writable copy of ``payload`` and how to turn the copy back into a
    payload of the same kind once the runtime restored into it."""
    if isinstance(payload, np.ndarray):
        copy = _plain_copy(payload, what)
        return copy, lambda restored: restored
    if isinstance(payload, str):
        raise TypeError(f"{what}: payload must be bytes or a NumPy array, not str (encode it first)")
    try:
        data = memoryview(payload).tobytes()
    except TypeError:
        raise TypeError(
            f"{what}: payload must be bytes or a NumPy array, not {type(payload).__name__}"
        ) from None
    return np.frombuffer(data, dtype=np.uint8).copy(), lambda restored: restored.tobytes()


class Runtime:
    """Automatic checkpointing attached to a :class:`resurgo.Store` (which must
    stay open while the runtime is). When the store holds an automatic
    checkpoint, the runtime starts restoring: it was read at construction and
    is restored by replay. Use it as a context manager, or call :meth:`close`.
    A runtime is for one thread: the one that runs the loops.

    A checkpoint is due every ``interval_loops`` loops when > 0, else
    ``interval_seconds`` after the previous one when > 0, else when the
    store's ``interval_policy`` says so, else only after :meth:`trigger`.
    ``region_timeout_loops`` bounds the loops a checkpointing region spans
    (it also ends when its first loop comes round again); in an MPI job the
    ranks exchange whether a checkpoint is due every ``agreement_loops`` loops;
    ``diagnostics`` (0-3) writes what the runtime decides to standard error;
    ``check_access`` hashes read-only datasets to catch access modes that lie
    (MismatchError); ``flush_on_termination`` writes the newest in-memory
    checkpoint to L2 on SIGTERM or SIGINT.
    """

    def __init__(
        self,
        store: Store,
        *,
        interval_loops: int = 0,
        interval_seconds: float = 0.0,
        region_timeout_loops: int = 20000,
        agreement_loops: int = 64,
        diagnostics: int = 0,
        check_access: bool = False,
        flush_on_termination: bool = True,
    ) -> None:
        if not isinstance(store, Store):
            raise TypeError(f"Runtime needs a resurgo.Store, not {type(store).__name__}")
        seconds = float(interval_seconds)
        if not seconds >= 0:
            raise InvalidArgumentError(f"interval_seconds must be >= 0 (got {interval_seconds})")
        self._datasets: List[Dataset] = []
        self._store = store
        self._closed = False
        self._core = _core.AutoRuntime(
            store._core,
            _count(interval_loops, "interval_loops"),
            seconds,
            _count(region_timeout_loops, "region_timeout_loops"),
            _count(agreement_loops, "agreement_loops"),
            _count(diagnostics, "diagnostics"),
            bool(check_access),
            bool(flush_on_termination),
        )

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def close(self) -> None:
        """Detaches from the store; later calls raise StateError. Closing twice is a no-op."""
        if self._closed:
            return
        self._closed = True
        self._core.close()
        self._datasets.clear()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._datasets)} datasets, loop {self._core.loop_index}"
        return f"<resurgo.auto.Runtime on {self._store.name!r}: {state}>"

    # -- declarations ---------------------------------------------------------
    def dataset(
        self,
        name: str,
        array: np.ndarray,
        halo: int = 0,
        *,
        global_shape: Optional[Sequence[int]] = None,
        offset: Optional[Sequence[int]] = None,
    ) -> Dataset:
        """Declares ``array`` (a writable C-contiguous NumPy array, kept
        referenced) as the dataset ``name``; its dtype and shape are recorded,
        the halo ring counted in the shape. ``global_shape`` and ``offset``
        (MPI jobs, row-major, no halo) declare it as this rank's block of a
        global array, as ``Store.protect`` does: when every dataset is
        declared so, a checkpoint restarts on another rank count."""
        if not isinstance(name, str):
            raise TypeError(f"dataset name must be a str, not {type(name).__name__}")
        if not isinstance(array, np.ndarray):
            raise TypeError(f"dataset '{name}': expected a NumPy array, not {type(array).__name__}")
        view = array_view(array, f"dataset '{name}'")  # a NumPy array: host memory
        if not view.writable:
            raise InvalidArgumentError(f"dataset '{name}' is read-only; a restore writes into it")
        halo = _count(halo, f"dataset '{name}': halo")
        block = (index_list(global_shape, f"dataset '{name}': global_shape"),
                 index_list(offset, f"dataset '{name}': offset"))
        dataset_id = self._core.dataset(name, view.pointer, view.bytes, view.dtype, list(view.shape), halo, *block)
        dataset = Dataset(name, dataset_id, array, halo)
        self._datasets.append(dataset)
        return dataset

    def _ids(self, datasets: Sequence[Dataset], what: str) -> List[int]:
        ids = []
        for dataset in datasets:
            if not isinstance(dataset, Dataset):
                raise TypeError(f"{what}: expected Dataset objects, not {type(dataset).__name__}")
            if not any(dataset is mine for mine in self._datasets):
                raise InvalidArgumentError(f"{what}: dataset '{dataset.name}' was not declared to this runtime")
            ids.append(dataset.id)
        return ids

    # -- the loop sequence ----------------------------------------------------
    def loop(self, name: str, *args: Arg) -> bool:
        """Call before each parallel loop with its arguments
        (``U.read()``, ``V.write(range="interior")``, ...). Returns whether to
        execute it: False while replaying towards the restore point."""
        for position, arg in enumerate(args):
            if not isinstance(arg, Arg):
                raise TypeError(
                    f"loop '{name}': argument {position} must come from Dataset.read(), .write(), "
                    f".read_write() or .increment(), not {type(arg).__name__}"
                )
        return self._core.loop(name, args)

    def query(self, value: Any) -> Any:
        """Routes a value computed by the loops (a reduction, a norm, a time
        step) to the control flow: logged, and while restoring replaced by the
        value the checkpointed run saw. Takes a Python number, a NumPy scalar or
        an array, and returns the same kind (the argument is not modified)."""
        if isinstance(value, np.ndarray):
            buffer = _plain_copy(value, "query")
            self._core.query(_bytes_of(buffer))
            return buffer
        if isinstance(value, np.generic):
            buffer = _plain_copy(value, "query")
            self._core.query(_bytes_of(buffer))
            return buffer[()]
        for python_type, numpy_type in _PYTHON_NUMBERS:
            if isinstance(value, python_type):
                buffer = np.array(value, dtype=numpy_type)
                self._core.query(_bytes_of(buffer))
                return python_type(buffer[()])
        raise TypeError(f"query takes a number, a NumPy scalar or an array, not {type(value).__name__}")

    def initphase_done(self) -> None:
        """Ends the initialisation phase: what it wrote is not saved, and a
        restarted run executes it again instead of skipping it."""
        self._core.initphase_done()

    def fastfw(self, payload: Any) -> Any:
        """A checkpoint location named by the application, with its own state
        (``payload``: bytes or a NumPy array, such as the step and the
        simulated time) saved in the checkpoint. Returns None, except on the
        call that restores: then the saved payload, as bytes or as an array of
        the payload's dtype and shape; the application continues from it."""
        buffer, rebuild = _payload_buffer(payload, "fastfw")
        return rebuild(buffer) if self._core.fastfw(_bytes_of(buffer)) else None

    def datlist(self, datasets: Sequence[Dataset], payload: Any = None) -> Any:
        """As :meth:`fastfw`, saving the ``datasets`` listed here. Without a
        payload a restarted run replays up to this call, and the call that
        restores returns ``b""`` (compare the result with None)."""
        ids = self._ids(datasets, "datlist")
        if payload is None:
            return b"" if self._core.datlist(ids, None) else None
        buffer, rebuild = _payload_buffer(payload, "datlist")
        return rebuild(buffer) if self._core.datlist(ids, _bytes_of(buffer)) else None

    def trigger(self) -> None:
        """A checkpoint is due now, whatever the interval says."""
        self._core.trigger()

    # -- state and reports ----------------------------------------------------
    @property
    def restoring(self) -> bool:
        return self._core.restoring

    @property
    def loop_index(self) -> int:
        """Loops declared so far (the 1-based index of the last)."""
        return self._core.loop_index

    @property
    def location(self) -> Optional[str]:
        """The loop chosen (or named) as checkpoint location; None before a choice."""
        return self._core.location or None

    @property
    def last_checkpoint(self) -> Optional[CheckpointReport]:
        return self._core.last_checkpoint()

    @property
    def last_restore(self) -> Optional[RestoreReport]:
        return self._core.last_restore()

    @property
    def bookkeeping_bytes(self) -> int:
        """Bytes the runtime holds for itself: query log, statistics, staged copies."""
        return self._core.bookkeeping_bytes
