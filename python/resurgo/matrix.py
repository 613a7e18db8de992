"""A distributed dense matrix that converges under asynchronous ``+=`` updates.

    import numpy as np
    from mpi4py import MPI
    from resurgo.matrix import ConvergentMatrix

    with ConvergentMatrix(MPI.COMM_WORLD, (n, n), block=(64, 64)) as hessian:
        for ix, panel in my_events():                 # any rank, any indices
            hessian.update_symmetric(panel.T @ panel, ix)  # returns at once
        hessian.commit()                              # collective
        local = hessian.local_data()                  # ScaLAPACK's local array
        desc = hessian.descriptor(blacs_context)      # ... and its descriptor

The matrix is dealt out in ScaLAPACK's 2-D block-cyclic layout over a
``grid[0] x grid[1]`` process grid, rank ``r`` at grid position
``(r // grid[1], r % grid[1])`` (``Cblacs_gridinit(&ctx, "Row", P, Q)``).
Construction, :meth:`~ConvergentMatrix.commit`, :meth:`~ConvergentMatrix.reset`,
:meth:`~ConvergentMatrix.free` and the checkpoint calls are collective;
updates are not. docs/matrix.md has the details.
"""

from __future__ import annotations

import operator
import os
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from resurgo import _core
from resurgo.errors import ConfigError, InvalidArgumentError, StateError
from resurgo.store import Store, _fortran_handle, _optional_version_arg, _Region, _version_arg

__all__ = ["ConvergentMatrix", "global_file_info", "load_global", "verify_global"]

_CORE_CLASSES = {np.dtype(np.float32): "ConvergentMatrixFloat32", np.dtype(np.float64): "ConvergentMatrixFloat64"}


def _core_class(dtype: Any) -> Tuple[np.dtype, Any]:
    """The matrix dtype and the extension class that implements it."""
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"ConvergentMatrix: dtype {dtype!r} is not a NumPy dtype; use numpy.float32 or "
                        "numpy.float64") from None
    if resolved not in _CORE_CLASSES:
        raise TypeError(f"ConvergentMatrix: dtype {resolved.name} is not supported; use numpy.float32 or "
                        "numpy.float64")
    _require_mpi_build("ConvergentMatrix")
    return resolved, getattr(_core, _CORE_CLASSES[resolved])


def _require_mpi_build(what: str) -> None:
    if not _core.HAVE_MPI:
        raise ConfigError(f"{what} needs MPI, and resurgo was built without MPI: install MPI (Debian: "
                          "apt-get install libopenmpi-dev openmpi-bin) and rebuild the Python package (make python)")


def _pair(value: Any, what: str) -> Tuple[int, int]:
    try:
        first, second = value
        return operator.index(first), operator.index(second)
    except (TypeError, ValueError):
        raise TypeError(f"ConvergentMatrix: {what} must be a pair of ints, not {value!r}") from None


def _indices(values: Any, call: str, what: str) -> np.ndarray:
    """A 1-D C-contiguous int64 copy (or view) of an index sequence."""
    array = np.asarray(values)
    if array.size and array.dtype.kind not in "iu":
        raise TypeError(f"{call}: {what} must hold integers, not {array.dtype.name}")
    if array.ndim != 1:
        raise InvalidArgumentError(f"{call}: {what} must be 1-D, but it has shape {array.shape}")
    return np.ascontiguousarray(array, dtype=np.int64)


class ConvergentMatrix:
    """A ``shape[0] x shape[1]`` matrix of ``dtype`` (float32 or float64)
    distributed over the ranks of ``comm`` (an mpi4py communicator) in blocks
    of ``block`` on a ``grid`` of processes (None: the most nearly square).

    ``backend``: ``"messages"`` (each update's elements binned by owner and
    sent at once) or ``"rma"`` (MPI_Accumulate into a window).
    ``progress``: ``"thread"`` (a progress thread applies incoming updates;
    needs MPI_THREAD_MULTIPLE, which mpi4py asks for), ``"inline"`` (only
    inside update, commit and :meth:`progress`) or ``"auto"``.
    ``max_in_flight_bytes`` bounds both the updates copied and not yet sent
    (update() waits only when they reach it) and this rank's unacknowledged
    sends; ``seed`` seeds the random order in which an update visits its
    targets; ``check_collective`` makes commit() verify that every rank called
    it as often (a debug aid); ``timeout`` (seconds, 0: none) bounds how long
    update() waits for room and commit() for the other ranks before raising
    StateError naming the ranks waited for (a commit that timed out goes on
    when called again). Use it as a context manager (which frees it on a
    normal exit), or call :meth:`free` (collective) before MPI is finalized.
    An exception raised on one rank leaves the others waiting in the next
    collective call: catch it at the top and call ``comm.Abort()``.
    """

    def __init__(
        self,
        comm: Any,
        shape: Sequence[int],
        dtype: Any = np.float64,
        block: Sequence[int] = (64, 64),
        grid: Optional[Sequence[int]] = None,
        backend: str = "messages",
        progress: str = "auto",
        max_in_flight_bytes: int = 64 << 20,
        seed: int = 0x5EED,
        check_collective: bool = False,
        timeout: float = 0.0,
    ) -> None:
        self._dtype, core_class = _core_class(dtype)
        try:
            fortran_comm = _fortran_handle(comm)
        except TypeError:
            raise TypeError(f"ConvergentMatrix: comm must be an mpi4py communicator (mpi4py.MPI.COMM_WORLD), "
                            f"not {type(comm).__name__}") from None
        rows, cols = _pair(shape, "shape")
        row_block, col_block = _pair(block, "block")
        grid_rows, grid_cols = (0, 0) if grid is None else _pair(grid, "grid")
        self._comm = comm
        self._core = core_class(fortran_comm, rows, cols, row_block, col_block, grid_rows, grid_cols, backend,
                                progress, operator.index(max_in_flight_bytes), operator.index(seed),
                                bool(check_collective), float(timeout))
        # The geometry never changes: kept here, it stays readable after free().
        layout = self._core.layout()
        self._shape, self._block, self._grid = layout[0:2], layout[2:4], layout[4:6]
        self._grid_position = self._core.grid_position()
        self._local_shape = self._core.local_shape()
        self._leading_dimension = self._core.leading_dimension()
        self._freed = False
        # (store, label) of each protect(); weak: the store holds this matrix.
        self._protected_in: List[Tuple["weakref.ref[Store]", str]] = []

    # -- geometry -------------------------------------------------------------
    @property
    def shape(self) -> Tuple[int, int]:
        """(rows, cols) of the global matrix."""
        return self._shape

    @property
    def block(self) -> Tuple[int, int]:
        """(row_block, col_block): ScaLAPACK's MB and NB."""
        return self._block

    @property
    def grid(self) -> Tuple[int, int]:
        """(grid_rows, grid_cols) of the process grid."""
        return self._grid

    @property
    def grid_position(self) -> Tuple[int, int]:
        """This rank's (grid_row, grid_col): (rank // grid_cols, rank % grid_cols)."""
        return self._grid_position

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def local_shape(self) -> Tuple[int, int]:
        """Shape of this rank's part (:meth:`local_data`); may hold zeros."""
        return self._local_shape

    @property
    def leading_dimension(self) -> int:
        """ScaLAPACK's LLD of the local part: max(1, local rows)."""
        return self._leading_dimension

    def __repr__(self) -> str:
        state = " freed" if self._freed else ""
        return (f"<resurgo.matrix.ConvergentMatrix {self._shape[0]}x{self._shape[1]} {self._dtype.name} "
                f"block={self._block} grid={self._grid} at {self._grid_position}{state}>")

    # -- lifecycle ------------------------------------------------------------
    def __enter__(self) -> "ConvergentMatrix":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # Leaving on an exception, which may have been raised on this rank
        # alone, a collective free() could wait forever for the other ranks
        # (and keep the exception from reaching an MPI_Abort): the matrix is
        # freed when the object is collected instead.
        if exc_type is None:
            self.free()

    def free(self) -> None:
        """Collective: releases the storage, the window and the progress
        thread, after unprotecting the local part from the open stores that
        protect it. Views from :meth:`local_data` must not be used
        afterwards; any later call raises StateError. Freeing twice is a
        no-op."""
        if self._freed:
            return
        self._freed = True
        for store_ref, label in self._protected_in:
            store = store_ref()
            region = None if store is None or store._closed else store._regions.get(label)
            if region is not None and region.source is self:
                store.unprotect(label)  # its checkpoints must not read freed memory
        self._protected_in.clear()
        self._core.free()

    # -- updates ----------------------------------------------------------------
    def _values(self, values: Any, call: str, expected: Tuple[int, ...], names: str) -> np.ndarray:
        """``values`` as a C-contiguous array of the matrix dtype, of shape ``expected``."""
        array = np.asarray(values)
        if not np.can_cast(array.dtype, self._dtype, casting="same_kind"):
            raise TypeError(f"{call}: values of dtype {array.dtype.name} cannot be added to a "
                            f"{self._dtype.name} matrix")
        if array.shape != expected:
            raise InvalidArgumentError(f"{call}: values have shape {array.shape}, but {names} ask for shape "
                                       f"{expected}")
        return np.ascontiguousarray(array, dtype=self._dtype)

    def update(self, values: Any, rows: Any, cols: Any) -> None:
        """``A[rows[i], cols[j]] += values[i, j]``; indices in any order, with
        duplicates summed. Returns once the update is copied (backend
        "messages": the progress thread sends it) or handed to its owners
        ("rma"); the arguments may be reused at once; it is applied by the next
        commit(). An index out of range raises InvalidArgumentError and applies
        nothing."""
        rows = _indices(rows, "ConvergentMatrix.update", "rows")
        cols = _indices(cols, "ConvergentMatrix.update", "cols")
        values = self._values(values, "ConvergentMatrix.update", (len(rows), len(cols)), "rows and cols")
        self._core.update(values, rows, cols)

    def update_symmetric(self, values: Any, ix: Any) -> None:
        """The upper triangle of ``A[ix, ix] += values``: element (i, j) of the
        n x n ``values`` is added only where ``ix[i] <= ix[j]``, and only those
        values are sent."""
        ix = _indices(ix, "ConvergentMatrix.update_symmetric", "ix")
        values = self._values(values, "ConvergentMatrix.update_symmetric", (len(ix), len(ix)), "the indices ix")
        self._core.update_symmetric(values, ix)

    def update_vector(self, values: Any, rows: Any) -> None:
        """``A[rows[i], 0] += values[i]`` for a matrix of one column."""
        rows = _indices(rows, "ConvergentMatrix.update_vector", "rows")
        values = self._values(values, "ConvergentMatrix.update_vector", (len(rows),), "rows")
        self._core.update_vector(values, rows)

    def commit(self) -> None:
        """Collective: returns once every update issued before it, on any
        rank, is applied to this rank's part. The epoch (stats()["commits"])
        grows by one. With ``timeout``, StateError names the ranks it still
        waits for; called again, it goes on waiting."""
        self._core.commit()

    def progress(self) -> None:
        """Applies the updates that have arrived for this rank, without
        waiting (for progress="inline" between long computations)."""
        self._core.progress()

    def reset(self) -> None:
        """Collective: commit(), then every element is zero and the statistics
        start again (the epoch is kept)."""
        self._core.reset()

    # -- the local part -------------------------------------------------------
    def local_data(self) -> np.ndarray:
        """This rank's elements as a writable Fortran-ordered view (no copy)
        of shape :attr:`local_shape`: ScaLAPACK's local array. It keeps the
        matrix object alive but is invalid after :meth:`free`. Read it after
        commit()."""
        return self._core.local_data()

    def local_indices(self) -> Tuple[np.ndarray, np.ndarray]:
        """(rows, cols): the global indices of the local part's rows and
        columns, ascending; ``local_data()[i, j]`` is element
        ``(rows[i], cols[j])``."""
        return self._owned_indices(self._grid_position)

    def _owned_indices(self, grid_position: Tuple[int, int]) -> Tuple[np.ndarray, np.ndarray]:
        return tuple(_owned(extent, block, processes, position) for extent, block, processes, position
                     in zip(self._shape, self._block, self._grid, grid_position))

    def descriptor(self, context: int) -> np.ndarray:
        """ScaLAPACK's array descriptor (int32[9]) for the BLACS context of
        ``Cblacs_gridinit(&context, "Row", *grid)`` over the same ranks."""
        return np.array(self._core.descriptor(operator.index(context)), dtype=np.int32)

    def owns(self, row: int, col: int) -> bool:
        """Whether global element (row, col) is stored on this rank."""
        return self._core.owns(operator.index(row), operator.index(col))

    def owner(self, row: int, col: int) -> int:
        """The rank that stores global element (row, col)."""
        return self._core.owner(operator.index(row), operator.index(col))

    def at(self, row: int, col: int) -> float:
        """The value of global element (row, col), stored on this rank (else
        InvalidArgumentError)."""
        return self._core.at(operator.index(row), operator.index(col))

    def gather(self, root: int = 0) -> Optional[np.ndarray]:
        """Collective: the whole matrix as a NumPy array on ``root`` (None on
        the other ranks), from every rank's local part. For small matrices
        and checks: root holds all of it."""
        parts = self._comm.gather((self._grid_position, self.local_data()), root=root)
        if parts is None:
            return None
        whole = np.zeros(self._shape, dtype=self._dtype)
        for grid_position, local in parts:
            whole[np.ix_(*self._owned_indices(grid_position))] = local
        return whole

    def stats(self) -> Dict[str, Any]:
        """This rank's counters since construction or reset(): updates,
        elements_sent, elements_local, bytes_sent, bins_received, the seconds
        the calling thread spent in update (of which backpressure: waiting for
        room) and commit, binning_seconds (sorting by owner and packing, on
        whichever thread did it: the progress thread's with "messages" and
        progress="thread"), and commits (the epoch)."""
        return self._core.stats()

    # -- checkpoints ------------------------------------------------------------
    def protect(self, store: Store, id: Optional[int] = None, label: str = "matrix") -> None:  # noqa: A002
        """Collective: registers the local part as region ``label`` of
        ``store`` (a resurgo.Store opened with comm= over the same ranks), so
        that the store's checkpoints hold it. ``id``: the region id (None: the
        lowest one the store has free, as Store.protect chooses; a restarted
        run must protect in the same order). The store keeps this matrix
        alive until ``store.unprotect(label)`` or :meth:`free`."""
        core_store = _core_store(store, "protect")
        if label in store._regions:
            raise InvalidArgumentError(f"ConvergentMatrix.protect: label '{label}' is already protected")
        used = {region.id for region in store._regions.values()}
        region_id = next(i for i in range(len(used) + 1) if i not in used) if id is None else operator.index(id)
        if region_id in used:
            raise InvalidArgumentError(f"ConvergentMatrix.protect: region id {region_id} is already protected")
        self._core.protect(core_store, region_id, label)
        store._regions[label] = _Region(region_id, label, source=self, view=None)
        self._protected_in.append((weakref.ref(store), label))

    def checkpoint(self, store: Store, version: int) -> None:
        """Collective: commit(), then checkpoints ``version`` of ``store`` with
        the epoch and the layout in its metadata."""
        self._core.checkpoint(_core_store(store, "checkpoint"), _version_arg(version, "checkpoint"))

    # -- global-layout files -----------------------------------------------------
    def write_global(self, path: Union[str, "os.PathLike[str]"], order: str = "F") -> None:
        """Collective: commit(), then writes the whole matrix to one file at
        ``path`` in its global layout, every rank writing its share in
        parallel: column-major (``order="F"``, ScaLAPACK's and Fortran's; the
        default) or row-major (``"C"``, NumPy's default). The file appears
        whole or not at all (written under a temporary name, synced, then
        renamed); its header holds the shape, the dtype, the order and the
        epoch, and a checksum per MiB of elements. Any grid, rank count or
        block size reads it back with :meth:`read_global`. StorageError
        naming the file when a rank cannot write its share."""
        if order not in ("F", "C"):
            raise ValueError(f"ConvergentMatrix.write_global: order must be 'F' (column-major) or 'C' (row-major), "
                             f"not {order!r}")
        self._core.write_global(_path_arg(path, "ConvergentMatrix.write_global"), order == "C")

    def read_global(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Collective: reads a file :meth:`write_global` wrote, by a matrix of
        the same shape and dtype on any grid, rank count or block size, into
        this matrix, whose epoch becomes the file's. Refused before anything
        is read (MismatchError, FormatError, CorruptionError naming the file
        and what differs) when the file is of another shape or dtype, no such
        file, or its header is damaged; CorruptionError naming the part when
        an element does not match its checksum (the matrix is then zeroed)."""
        self._core.read_global(_path_arg(path, "ConvergentMatrix.read_global"))

    def restart(self, store: Store, version: Optional[int] = None) -> int:
        """Collective: restores ``version`` (None: the newest intact one) of
        ``store`` into the local part and the epoch; returns the version.
        MismatchError when it was written by a matrix of another layout."""
        return self._core.restart(_core_store(store, "restart"),
                                  _optional_version_arg(version, "restart", _core.LATEST))


def _header_info(header: Tuple[int, int, int, bool, int]) -> Dict[str, Any]:
    """The dict of global_file_info from _core's (rows, cols, element bytes,
    row-major, epoch)."""
    rows, cols, element_bytes, row_major, epoch = header
    return {"shape": (rows, cols), "dtype": np.dtype(np.float32 if element_bytes == 4 else np.float64),
            "order": "C" if row_major else "F", "epoch": epoch}


def global_file_info(path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """The header of a global-layout file (:meth:`ConvergentMatrix.write_global`),
    read by this process alone, without MPI: ``shape``, ``dtype``, ``order``
    ("F" column-major, "C" row-major) and ``epoch`` (the writer's commits).
    NotFoundError, FormatError or CorruptionError naming the file. Works in
    a build of resurgo without MPI too."""
    return _header_info(_core.read_global_file_header(_path_arg(path, "global_file_info")))


def verify_global(path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """Checks the header and every 1 MiB part of a global-layout file against
    their checksums, in this process alone and without keeping the elements
    (8 MiB of memory, whatever the matrix's size): a copied or archived file
    checked before it is used. Returns :func:`global_file_info`'s dict when
    the whole file is intact; CorruptionError naming the file and the first
    damaged part otherwise (and global_file_info's errors)."""
    return _header_info(_core.verify_global_file(_path_arg(path, "verify_global")))


def load_global(path: Union[str, "os.PathLike[str]"]) -> np.ndarray:
    """The whole matrix of a global-layout file as a NumPy array, read by this
    process alone, without MPI (a serial solver stage, a check): shape and
    dtype as written, Fortran-ordered for a column-major file and C-ordered
    for a row-major one, so that the file's bytes land as they lie. Each MiB
    of elements is checked against its checksum: CorruptionError naming the
    file and the part. Needs memory for the whole matrix; a matrix that a
    job holds across nodes is read back with :meth:`ConvergentMatrix.read_global`.
    Works in a build of resurgo without MPI too."""
    text = _path_arg(path, "load_global")
    info = global_file_info(text)
    array = np.empty(info["shape"], dtype=info["dtype"], order=info["order"])
    _core.read_global_file(text, array.reshape(-1, order="A").view(np.uint8))
    return array


def _path_arg(path: Any, call: str) -> str:
    try:
        text = os.fspath(path)
    except TypeError:
        raise TypeError(f"{call}: path must be a str or os.PathLike, not {type(path).__name__}") from None
    if not isinstance(text, str):
        text = os.fsdecode(text)
    return text


def _owned(extent: int, block: int, processes: int, position: int) -> np.ndarray:
    """The global indices along one axis stored at grid ``position``, in
    local order (block-cyclic: ascending)."""
    indices = np.arange(extent)
    return indices[(indices // block) % processes == position]


def _core_store(store: Any, call: str) -> Any:
    if not isinstance(store, Store):
        raise TypeError(f"ConvergentMatrix.{call}: expected a resurgo.Store, not {type(store).__name__}")
    if store._closed:
        raise StateError(f"ConvergentMatrix.{call}: store '{store.name}' is closed")
    return store._core
