"""One rank of the ConvergentMatrix jobs that tests/python/test_matrix.py runs
under mpirun:

    python matrix_job.py checks PxQ [SCALAPACK]   assembly, ownership, view,
                                                  lifecycle and error checks,
                                                  and with the library's path
                                                  ScaLAPACK's, on a PxQ grid
    python matrix_job.py checkpoint-write DIR     versions 1 and 2 of store "matrix"
    python matrix_job.py checkpoint-restore DIR   a fresh job restarts them
    python matrix_job.py global-write DIR         global-layout files of both dtypes and orders,
                                                  and rank 0 reads each alone (load_global)
    python matrix_job.py global-read DIR          another grid reads them back

Every rank runs every check; rank 0 prints "ok <check>" once a check passed
on all ranks. A failed assertion aborts the job (MPI_Abort), which fails
mpirun. Updates are integer-valued, so every summation order gives the same
sums exactly.
"""

from __future__ import annotations

import functools
import json
import sys
import traceback
from pathlib import Path
from typing import Callable, List, Tuple

import numpy as np
from mpi4py import MPI

import resurgo
from resurgo.matrix import ConvergentMatrix, global_file_info, load_global

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "hessian"))
from scalapack import Scalapack  # noqa: E402  (the example's ctypes wrapper)

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

DTYPES = (np.float32, np.float64)
BACKENDS = ("messages", "rma")
UPDATES_PER_RANK = 6


def report(name: str) -> None:
    """Reached by every rank once its part of check `name` passed."""
    comm.Barrier()
    if rank == 0:
        print(f"ok {name}", flush=True)


def layout_of(global_rows: int, global_cols: int, block: Tuple[int, int], grid: Tuple[int, int],
              position: Tuple[int, int]) -> Tuple[np.ndarray, np.ndarray]:
    """The oracle: global rows and columns held at grid `position`, in local
    (ascending) order, from the block-cyclic rule alone."""
    rows, cols = np.arange(global_rows), np.arange(global_cols)
    return (rows[(rows // block[0]) % grid[0] == position[0]],
            cols[(cols // block[1]) % grid[1] == position[1]])


def rebuild(matrix: ConvergentMatrix) -> np.ndarray:
    """Rank 0: the global matrix from every rank's local_data() and grid
    position (None elsewhere)."""
    parts = comm.gather((matrix.grid_position, np.array(matrix.local_data())), root=0)
    if rank != 0:
        return None
    whole = np.full(matrix.shape, np.nan)
    for position, local in parts:
        rows, cols = layout_of(*matrix.shape, matrix.block, matrix.grid, position)
        assert local.shape == (len(rows), len(cols)), f"grid {position}: local shape {local.shape}"
        whole[np.ix_(rows, cols)] = local
    return whole


# -- updates: (values, indices...) of one rank, and their NumPy sum ----------

def general_updates(source: int, shape: Tuple[int, int], seed: int, max_length: int = 8) -> List[tuple]:
    rng = np.random.default_rng([seed, source])
    updates = []
    for _ in range(UPDATES_PER_RANK):
        rows = rng.integers(0, shape[0], rng.integers(1, max_length + 1))  # unsorted, with duplicates
        cols = rng.integers(0, shape[1], rng.integers(1, max_length + 1))
        updates.append((rng.integers(-8, 9, (len(rows), len(cols))), rows, cols))
    return updates


def symmetric_updates(source: int, shape: Tuple[int, int], seed: int) -> List[tuple]:
    rng = np.random.default_rng([seed, source])
    updates = []
    for _ in range(UPDATES_PER_RANK):
        ix = rng.integers(0, shape[0], rng.integers(1, 9))
        updates.append((rng.integers(-8, 9, (len(ix), len(ix))), ix))
    return updates


def vector_updates(source: int, shape: Tuple[int, int], seed: int) -> List[tuple]:
    rng = np.random.default_rng([seed, source])
    updates = []
    for _ in range(UPDATES_PER_RANK):
        rows = rng.integers(0, shape[0], rng.integers(1, 9))
        updates.append((rng.integers(-8, 9, len(rows)), rows))
    return updates


def add_general(total: np.ndarray, values, rows, cols) -> None:
    np.add.at(total, (rows[:, None], cols[None, :]), values)


def add_symmetric(total: np.ndarray, values, ix) -> None:
    upper = ix[:, None] <= ix[None, :]
    i, j = np.nonzero(upper)
    np.add.at(total, (ix[i], ix[j]), values[upper])


def add_vector(total: np.ndarray, values, rows) -> None:
    np.add.at(total, (rows, 0), values)


VARIANTS = {
    # name: (shape, block, make updates, apply one to the matrix, add one to the NumPy sum)
    "general": ((37, 29), (4, 3), general_updates, ConvergentMatrix.update, add_general),
    "symmetric": ((30, 30), (4, 4), symmetric_updates, ConvergentMatrix.update_symmetric, add_symmetric),
    "vector": ((41, 1), (5, 1), vector_updates, ConvergentMatrix.update_vector, add_vector),
    # Bins of up to 60 x 60 values (14 KiB and more): past Open MPI's eager
    # limit, a send's buffer is read by the receiver until the send completes.
    "large-bins": ((200, 180), (16, 12), functools.partial(general_updates, max_length=120),
                   ConvergentMatrix.update, add_general),
}
SMALL_VARIANTS = ("general", "symmetric", "vector")


def expected_sum(variant: str, seed: int, sources: range) -> np.ndarray:
    shape, _, make, _, add = VARIANTS[variant]
    total = np.zeros(shape)
    for source in sources:
        for update in make(source, shape, seed):
            add(total, *update)
    return total


def assemble(variant: str, seed: int, **options) -> ConvergentMatrix:
    """A committed matrix holding every rank's updates of `variant`."""
    shape, block, make, apply, _ = VARIANTS[variant]
    matrix = ConvergentMatrix(comm, shape, block=block, **options)
    for update in make(rank, shape, seed):
        apply(matrix, *update)
    matrix.commit()
    return matrix


# -- checks ----------------------------------------------------------------

def check_assembly(grid: Tuple[int, int], variants: Tuple[str, ...]) -> None:
    for case, (variant, dtype, backend) in enumerate(
            (v, d, b) for v in variants for d in DTYPES for b in BACKENDS):
        with assemble(variant, case, dtype=dtype, backend=backend, grid=grid) as matrix:
            assert matrix.stats()["updates"] == UPDATES_PER_RANK and matrix.stats()["commits"] == 1
            whole, gathered = rebuild(matrix), matrix.gather()
            if rank == 0:
                expected = expected_sum(variant, case, range(size))
                assert np.array_equal(whole, expected), f"{variant} {dtype.__name__} {backend}: wrong sums"
                assert gathered.dtype == dtype and np.array_equal(gathered, expected), "gather() differs"
            if variant == "symmetric" and backend == "messages":
                # Only the upper triangle travels (or is added here).
                stats, shape = matrix.stats(), VARIANTS[variant][0]
                pairs = sum(int(np.count_nonzero(ix[:, None] <= ix[None, :]))
                            for _, ix in symmetric_updates(rank, shape, case))
                assert stats["elements_sent"] + stats["elements_local"] == pairs, (stats, pairs)
        report(f"assemble {variant} {np.dtype(dtype).name} {backend}")


def check_ownership(grid: Tuple[int, int]) -> None:
    with assemble("general", 1, grid=grid) as matrix:
        assert matrix.grid == grid and matrix.grid_position == divmod(rank, grid[1])
        rows, cols = layout_of(*matrix.shape, matrix.block, grid, matrix.grid_position)
        assert matrix.local_shape == (len(rows), len(cols)) and matrix.leading_dimension == max(1, len(rows))
        assert all(np.array_equal(a, b) for a, b in zip(matrix.local_indices(), (rows, cols)))
        local = matrix.local_data()
        for i in range(matrix.shape[0]):
            for j in range(matrix.shape[1]):
                grid_row, grid_col = (i // matrix.block[0]) % grid[0], (j // matrix.block[1]) % grid[1]
                assert matrix.owner(i, j) == grid_row * grid[1] + grid_col, f"owner({i}, {j})"
                assert matrix.owns(i, j) == (matrix.owner(i, j) == rank), f"owns({i}, {j})"
        for li, i in enumerate(rows):
            for lj, j in enumerate(cols):
                assert matrix.at(i, j) == local[li, lj], f"at({i}, {j})"
        descriptor = matrix.descriptor(7)
        assert descriptor.dtype == np.int32
        assert descriptor.tolist() == [1, 7, 37, 29, 4, 3, 0, 0, max(1, len(rows))], descriptor
    report("ownership")
    with ConvergentMatrix(comm, (10, 10), block=(2, 2)) as default:
        assert default.grid == tuple(MPI.Compute_dims(size, 2)), default.grid
    report("default grid")


def check_view(grid: Tuple[int, int]) -> None:
    with assemble("general", 2, grid=grid) as matrix:
        view = matrix.local_data()
        assert view.flags.f_contiguous and view.flags.writeable and view.shape == matrix.local_shape
        assert view.dtype == np.float64
        if view.size:
            view[-1, 0] = 42.5
            rows, cols = matrix.local_indices()
            assert matrix.at(rows[-1], cols[0]) == 42.5, "writing to local_data() did not change at()"
            assert np.shares_memory(view, matrix.local_data())
    # The view alone keeps its matrix alive; dropping it frees the matrix on
    # every rank at the same point (the destructor is collective).
    orphan = assemble("general", 3, grid=grid).local_data()
    orphan += 1
    assert np.isfinite(orphan).all()
    del orphan
    report("local_data view")


def check_lifecycle(grid: Tuple[int, int]) -> None:
    expected = expected_sum("general", 4, range(size))
    with assemble("general", 4, grid=grid, progress="inline", check_collective=True, timeout=60) as matrix:
        matrix.progress()  # nothing left to apply: a no-op
        whole = rebuild(matrix)
        assert rank != 0 or np.array_equal(whole, expected), "progress='inline' assembled wrong sums"
        matrix.reset()
        stats = matrix.stats()
        assert not matrix.local_data().any(), "reset() left values"
        assert stats["updates"] == 0 and stats["commits"] == 2, stats  # reset commits; the epoch is kept
        for update in general_updates(rank, matrix.shape, 4):
            matrix.update(*update)
        matrix.commit()
        whole = rebuild(matrix)
        assert rank != 0 or np.array_equal(whole, expected), "the matrix assembled wrong sums after reset()"
    if MPI.Query_thread() == MPI.THREAD_MULTIPLE:
        with assemble("general", 4, grid=grid, progress="thread") as matrix:
            whole = rebuild(matrix)
            assert rank != 0 or np.array_equal(whole, expected), "progress='thread' assembled wrong sums"
    report("lifecycle")


def raises(exception: type, call: Callable[[], object], *fragments: str) -> None:
    try:
        call()
    except exception as error:
        for fragment in fragments:
            assert fragment in str(error), f"{exception.__name__} '{error}' does not name '{fragment}'"
    else:
        raise AssertionError(f"no {exception.__name__} from {call}")


def check_errors(grid: Tuple[int, int]) -> None:
    matrix = ConvergentMatrix(comm, (37, 29), block=(4, 3), grid=grid)
    one = np.ones((1, 1))
    raises(resurgo.InvalidArgumentError, lambda: matrix.update(np.ones((2, 1)), [0, 40], [0]), "40", "37")
    raises(resurgo.InvalidArgumentError, lambda: matrix.update(one, [0], [29]), "29")
    raises(resurgo.InvalidArgumentError, lambda: matrix.update(one, [-1], [0]), "-1")
    raises(ValueError, lambda: matrix.update(np.ones((2, 3)), [0, 1, 2], [0, 1]), "(2, 3)", "(3, 2)")
    raises(resurgo.InvalidArgumentError, lambda: matrix.update_symmetric(np.ones((2, 2)), [0, 1, 2]), "(2, 2)")
    raises(resurgo.InvalidArgumentError, lambda: matrix.update_vector(np.ones(1), [0]))  # 29 columns
    raises(TypeError, lambda: matrix.update(np.ones((1, 1), dtype=complex), [0], [0]), "complex128")
    raises(TypeError, lambda: matrix.update(one, [0.5], [0]), "float64")
    matrix.commit()
    # The refused update with row 0 applied nothing.
    assert not matrix.local_data().any(), "a refused update changed the matrix"
    raises(resurgo.InvalidArgumentError, lambda: matrix.at(0, 29), "29")
    matrix.free()
    matrix.free()  # a no-op
    for call in (lambda: matrix.update(one, [0], [0]), matrix.commit, matrix.local_data,
                 lambda: matrix.at(0, 0), lambda: matrix.descriptor(0)):
        raises(resurgo.StateError, call)
    raises(TypeError, lambda: ConvergentMatrix(comm, (4, 4), dtype=np.int32), "int32")
    raises(resurgo.InvalidArgumentError, lambda: ConvergentMatrix(comm, (4, 4), backend="shmem"), "shmem")
    raises(resurgo.InvalidArgumentError, lambda: ConvergentMatrix(comm, (4, 4), block=(0, 4)))
    raises(resurgo.InvalidArgumentError, lambda: ConvergentMatrix(comm, (4, 4), timeout=-1), "timeout_seconds")
    raises(resurgo.InvalidArgumentError, lambda: ConvergentMatrix(comm, (4, 4), grid=(size + 1, 1)),
           str(size + 1))
    report("errors")


def spd_panels(n: int, seed: int) -> List[tuple]:
    """This rank's J^T J panels on strided index sets, plus its share of n*I."""
    rng = np.random.default_rng([seed, rank])
    updates = []
    for _ in range(4):
        ix = rng.integers(0, 4) + rng.integers(2, 5) * np.arange(n // 5)
        ix = ix[ix < n]
        jacobian = rng.integers(-3, 4, (8, len(ix))).astype(np.float64)
        updates.append((jacobian.T @ jacobian, ix, ix))
    diagonal = np.arange(rank, n, size)
    updates.append((n * np.eye(len(diagonal)), diagonal, diagonal))
    return updates


def relative_error(approximation: np.ndarray, exact: np.ndarray) -> float:
    return float(np.linalg.norm(approximation - exact) / np.linalg.norm(exact))


def check_scalapack(grid: Tuple[int, int], library: str) -> None:
    n, right_cols, block = 50, 23, (4, 4)
    lib = Scalapack(library)
    with lib.grid(*grid) as context:
        assert lib.grid_info(context) == (*grid, *divmod(rank, grid[1])), lib.grid_info(context)
        a = ConvergentMatrix(comm, (n, n), block=block, grid=grid)
        b = ConvergentMatrix(comm, (n, right_cols), block=block, grid=grid)
        c = ConvergentMatrix(comm, (n, right_cols), block=block, grid=grid)
        for update in spd_panels(n, seed=11):
            a.update(*update)
        for values, rows, cols in general_updates(rank, (n, right_cols), seed=12):
            b.update(values, rows, cols)
        for matrix in (a, b, c):
            matrix.commit()
        whole_a, whole_b = a.gather(), b.gather()

        lib.gemm(a, b, c, context)
        product = c.gather()
        if rank == 0:
            error = relative_error(product, whole_a @ whole_b)
            assert error < 1e-12, f"pdgemm: relative error {error}"
        report("scalapack pdgemm")

        info = lib.potrf("L", a, context)
        assert info == 0, f"pdpotrf: INFO = {info}"
        factor = a.gather()
        if rank == 0:
            error = relative_error(np.tril(factor), np.linalg.cholesky(whole_a))
            assert error < 1e-12, f"pdpotrf: relative error {error}"
        report("scalapack pdpotrf")
        for matrix in (a, b, c):
            matrix.free()


def checks(grid_text: str, library: str = "") -> None:
    grid = tuple(int(n) for n in grid_text.split("x"))
    check_assembly(grid, SMALL_VARIANTS)
    check_ownership(grid)
    check_view(grid)
    check_lifecycle(grid)
    check_errors(grid)
    if library:
        check_scalapack(grid, library)
    check_assembly(grid, ("large-bins",))  # last: its failure would end the job


# -- checkpoint / restart ---------------------------------------------------

CHECKPOINTED = dict(shape=(37, 29), block=(4, 3))


def apply_round(matrix: ConvergentMatrix, seed: int) -> None:
    for update in general_updates(rank, CHECKPOINTED["shape"], seed):
        matrix.update(*update)


def assert_holds(matrix: ConvergentMatrix, seeds: Tuple[int, ...], what: str) -> None:
    whole = matrix.gather()
    if rank == 0:
        expected = sum(expected_sum("general", seed, range(size)) for seed in seeds)
        assert np.array_equal(whole, expected), f"{what}: the matrix does not hold rounds {seeds}"


def checkpoint_write(directory: str) -> None:
    epochs = {}
    with resurgo.Store("matrix", comm=comm) as store:
        with ConvergentMatrix(comm, **CHECKPOINTED) as matrix:
            matrix.protect(store)
            for version, seed in ((1, 101), (2, 102)):
                apply_round(matrix, seed)
                matrix.checkpoint(store, version)
                epochs[version] = matrix.stats()["commits"]
            apply_round(matrix, 103)  # after the last checkpoint: lost on restart
            matrix.commit()
            store.wait()
        # free() unprotected the local part: no checkpoint can read freed memory.
        raises(resurgo.NotFoundError, lambda: store.unprotect("matrix"), "matrix")
    assert epochs[1] >= 1 and epochs[2] > epochs[1], epochs
    if rank == 0:
        (Path(directory) / "epochs.json").write_text(json.dumps(epochs))
    report("checkpoint write")


def checkpoint_restore(directory: str) -> None:
    epochs = {int(k): v for k, v in json.loads((Path(directory) / "epochs.json").read_text()).items()}
    with resurgo.Store("matrix", comm=comm) as store, ConvergentMatrix(comm, **CHECKPOINTED) as matrix:
        matrix.protect(store)
        assert matrix.restart(store, 1) == 1
        assert matrix.stats()["commits"] == epochs[1], (matrix.stats()["commits"], epochs)
        assert_holds(matrix, (101,), "version 1")
        assert matrix.restart(store) == 2
        assert matrix.stats()["commits"] == epochs[2], (matrix.stats()["commits"], epochs)
        assert_holds(matrix, (101, 102), "version 2")
        apply_round(matrix, 104)  # the restored matrix goes on
        matrix.commit()
        assert matrix.stats()["commits"] == epochs[2] + 1
        assert_holds(matrix, (101, 102, 104), "version 2 plus a round")
    report("checkpoint restore")
    with resurgo.Store("matrix", comm=comm) as store, \
            ConvergentMatrix(comm, CHECKPOINTED["shape"], block=(3, 4)) as other_layout:
        other_layout.protect(store)
        raises(resurgo.MismatchError, lambda: other_layout.restart(store))
    report("checkpoint layout mismatch")


# -- global-layout files -----------------------------------------------------

GLOBAL_WRITERS = 4
GLOBAL_SEED = 201


def global_name(directory: str, dtype: type, order: str) -> str:
    return str(Path(directory) / f"matrix-{np.dtype(dtype).name}-{order}.rsgm")


def raw_elements(path: str, dtype: type, order: str) -> np.ndarray:
    """The file's elements as a program without resurgo reads them: the data
    offset from the header (bytes 64-71), then the matrix in `order`."""
    with open(path, "rb") as file:
        file.seek(64)
        offset = int(np.frombuffer(file.read(8), dtype="<u8")[0])
    flat = np.fromfile(path, dtype=dtype, offset=offset)
    return flat.reshape(CHECKPOINTED["shape"], order=order)


def global_write(directory: str) -> None:
    """4 ranks, a 2 x 2 grid: both dtypes in both orders, each file's raw
    elements in NumPy's order of it, and the epoch up by one per write."""
    expected = expected_sum("general", GLOBAL_SEED, range(GLOBAL_WRITERS))
    for dtype in DTYPES:
        with ConvergentMatrix(comm, **CHECKPOINTED, dtype=dtype, grid=(2, 2)) as matrix:
            apply_round(matrix, GLOBAL_SEED)
            for order in ("F", "C"):
                commits = matrix.stats()["commits"]
                matrix.write_global(Path(global_name(directory, dtype, order)), order=order)  # a PathLike
                assert matrix.stats()["commits"] == commits + 1, "write_global commits first"
                if rank == 0:
                    path = global_name(directory, dtype, order)
                    raw = raw_elements(path, dtype, order)
                    assert np.array_equal(raw, expected.astype(dtype)), f"{dtype.__name__} {order}: raw layout"
                    alone = load_global(path)  # this process alone, no MPI call
                    assert alone.dtype == dtype and np.array_equal(alone, raw), f"{path}: load_global"
                    assert alone.flags["F_CONTIGUOUS" if order == "F" else "C_CONTIGUOUS"], f"{path}: order"
                    info = global_file_info(path)
                    assert info == {"shape": CHECKPOINTED["shape"], "dtype": np.dtype(dtype), "order": order,
                                    "epoch": commits + 1}, info
            raises(ValueError, lambda: matrix.write_global(global_name(directory, dtype, "X"), order="X"), "'X'")
            raises(TypeError, lambda: matrix.write_global(3), "os.PathLike", "int")
    report("global write")


def global_read(directory: str) -> None:
    """Another rank count, grid and block size reads every file back; files
    of another shape or dtype, and no file, are refused by name."""
    expected = expected_sum("general", GLOBAL_SEED, range(GLOBAL_WRITERS))
    for dtype in DTYPES:
        for order in ("F", "C"):
            path = global_name(directory, dtype, order)
            with ConvergentMatrix(comm, CHECKPOINTED["shape"], block=(5, 7), dtype=dtype) as matrix:
                matrix.read_global(path)
                whole = matrix.gather()
                assert rank != 0 or np.array_equal(whole, expected.astype(dtype)), f"{path}: values"
                epoch = 1 if order == "F" else 2  # the writer's commits: one per write_global
                assert matrix.stats()["commits"] == epoch, (path, matrix.stats())
    float64 = global_name(directory, np.float64, "F")
    with ConvergentMatrix(comm, (37, 30), dtype=np.float64) as other_shape:
        raises(resurgo.MismatchError, lambda: other_shape.read_global(float64), float64, "37 x 30")
    with ConvergentMatrix(comm, CHECKPOINTED["shape"], dtype=np.float32) as other_dtype:
        raises(resurgo.MismatchError, lambda: other_dtype.read_global(float64), float64, "float64", "float32")
        missing = str(Path(directory) / "none.rsgm")
        raises(resurgo.NotFoundError, lambda: other_dtype.read_global(missing), missing)
    report("global read")


if __name__ == "__main__":
    modes = {"checks": checks, "checkpoint-write": checkpoint_write, "checkpoint-restore": checkpoint_restore,
             "global-write": global_write, "global-read": global_read}
    try:
        modes[sys.argv[1]](*sys.argv[2:])
    except BaseException:
        # The other ranks may be waiting in a collective call: end them too.
        traceback.print_exc()
        sys.stderr.flush()
        comm.Abort(1)
