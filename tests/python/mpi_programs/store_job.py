"""One rank of the MPI jobs that tests/python/test_mpi.py runs under mpirun:

    python store_job.py write LAST     checkpoint versions 1..LAST, wait(LAST, L2)
    python store_job.py restore LAST   a fresh job: restart gives LAST's bytes back
    python store_job.py global         rank blocks of GLOBAL_SHAPE, version 1 to L4
    python store_job.py mismatch DIR   each rank names another version and
                                       writes the error it got to DIR/rankN.txt

The levels' paths come from the environment (RESURGO_LOCAL_PATH, ...). Each
rank asserts what it sees; a failure exits non-zero, which fails mpirun.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

import resurgo

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()

GLOBAL_SHAPE = (6, 8)  # split into a 2 x 2 grid of blocks on 4 ranks


def state(version: int) -> np.ndarray:
    """What this rank protects at `version`: different on every rank."""
    return np.arange(1000, dtype=np.float64) + rank * 10_000 + version


def write(last: int) -> None:
    u = np.empty(1000)
    with resurgo.Store("job", comm=comm) as store:
        store.protect("u", u)
        for version in range(1, last + 1):
            u[:] = state(version)
            store.checkpoint(version)
        store.wait(last, resurgo.L2)


def restore(last: int) -> None:
    u = np.zeros(1000)
    with resurgo.Store("job", comm=comm) as store:
        store.protect("u", u)
        assert store.latest() == last, f"rank {rank}: latest() is {store.latest()}, not {last}"
        restored = store.restart()
        assert restored == last, f"rank {rank}: restart() restored {restored}, not {last}"
    assert np.array_equal(u, state(last)), f"rank {rank}: restart did not restore version {last}'s bytes"


def global_block() -> None:
    assert size == 4, "the global job runs on 4 ranks"
    rows, cols = GLOBAL_SHAPE[0] // 2, GLOBAL_SHAPE[1] // 2
    offset = ((rank // 2) * rows, (rank % 2) * cols)
    whole = np.arange(np.prod(GLOBAL_SHAPE), dtype=np.float32).reshape(GLOBAL_SHAPE)
    block = np.ascontiguousarray(whole[offset[0]:offset[0] + rows, offset[1]:offset[1] + cols])
    step = np.array([rank * 10], dtype=np.int64)
    with resurgo.Store("job", comm=comm) as store:
        store.protect("field", block, global_shape=GLOBAL_SHAPE, offset=offset)
        store.protect("step", step)
        store.checkpoint(1)
        store.wait(1, resurgo.L4)


def mismatch(report_dir: str) -> None:
    u = np.zeros(10)
    with resurgo.Store("job", comm=comm) as store:
        store.protect("u", u)
        store.checkpoint(rank)  # hands the version to the job, which finds the ranks disagree
        try:
            store.wait(level=resurgo.L2)
        except resurgo.InvalidArgumentError as exc:
            # A file per rank: mpirun may interleave the ranks' output.
            (Path(report_dir) / f"rank{rank}.txt").write_text(f"InvalidArgumentError: {exc}")
        else:
            raise SystemExit(f"rank {rank}: wait after checkpoint({rank}) did not raise")
        store.checkpoint(size)  # the store is still usable once the ranks agree
        store.wait(size, resurgo.L2)


if __name__ == "__main__":
    modes = {"write": lambda last: write(int(last)), "restore": lambda last: restore(int(last)),
             "global": global_block, "mismatch": mismatch}
    modes[sys.argv[1]](*sys.argv[2:])
