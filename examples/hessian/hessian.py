#!/usr/bin/env python3
"""Gauss-Newton Hessian assembly with a ConvergentMatrix, checkpointed.

    mpirun -np P hessian.py [--params N] [--layers L] [--events E] [--samples K]
        [--every C] [--store NAME] [--stop-after S] [--output FILE.npy] [--write-global FILE]
        [--dtype float64|float32] [--block B] [--backend messages|rma]
        [--compute-seconds T] [--damping D] [--no-check] [--config FILE]

Each event (a source-receiver path) yields a K x n Jacobian panel J on a
strided set of n model parameters (the path's cells in every depth layer,
about 4 % of N); its Gauss-Newton contribution J^T J goes into the distributed
N x N Hessian with update_symmetric. Every C events the ranks checkpoint the
matrix (the version is the number of events done); started again, the run
resumes from the newest version. See README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Tuple

import numpy as np
from mpi4py import MPI

import resurgo
from resurgo.matrix import ConvergentMatrix

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scalapack import Scalapack, find_library  # noqa: E402

PATH_FRACTION = 0.04  # cells of a layer that one path crosses
QUANTUM = 16  # Jacobian entries are multiples of 1/16: every sum of J^T J is exact
CHECK_MAX_PARAMS = 4000  # the serial NumPy check rebuilds the whole Hessian on rank 0
SEED = 2024


def parse_arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--params", type=int, default=2000, help="N, model parameters (layers x cells)")
    p.add_argument("--layers", type=int, default=20, help="depth layers")
    p.add_argument("--events", type=int, default=200, help="events (data) to assimilate")
    p.add_argument("--samples", type=int, default=16, help="K, time samples per event")
    p.add_argument("--every", type=int, default=50, help="checkpoint every C events")
    p.add_argument("--store", default="hessian")
    p.add_argument("--stop-after", type=int, default=-1, help="end after S events of this run (an interruption)")
    p.add_argument("--output", help="the assembled upper triangle, as .npy (rank 0)")
    p.add_argument("--write-global", metavar="FILE",
                   help="the assembled upper triangle as a global-layout file, written by every rank "
                        "(column-major; resurgo.matrix.load_global reads it, resurgo verify checks it)")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--backend", choices=("messages", "rma"), default="messages")
    p.add_argument("--compute-seconds", type=float, default=0.0, help="simulated cost of one Jacobian panel")
    p.add_argument("--damping", type=float, default=1.0, help="added to the diagonal before the Cholesky")
    p.add_argument("--no-check", action="store_true", help="skip the serial NumPy check")
    p.add_argument("--config", help="Resurgo configuration file")
    args = p.parse_args()
    if args.params % args.layers:
        p.error(f"--params {args.params} is not a multiple of --layers {args.layers}")
    return args


def jacobian_panel(event: int, args: argparse.Namespace) -> Tuple[np.ndarray, np.ndarray]:
    """(ix, J) of one event: the indices of the parameters its path touches
    (one run of cells per layer, so ix is strided) and the K x n panel.
    Deterministic in the event: any rank, any run computes the same."""
    rng = np.random.default_rng([SEED, event])
    cells = args.params // args.layers
    width = max(1, round(PATH_FRACTION * cells))
    path = (rng.integers(cells) + np.arange(width)) % cells  # wraps around: ix need not be sorted
    depth = np.repeat(np.arange(args.layers), width)
    ix = depth * cells + np.tile(path, args.layers)
    time_samples = np.arange(args.samples)[:, None]
    kernel = np.cos(0.3 * time_samples * (1 + depth) + rng.uniform(0, 2 * np.pi, len(ix)))
    kernel *= np.exp(-depth / args.layers)  # sensitivity fades with depth
    if args.compute_seconds:
        time.sleep(args.compute_seconds)  # stands in for the path integration
    return ix, np.round(QUANTUM * kernel) / QUANTUM


def serial_hessian(args: argparse.Namespace) -> np.ndarray:
    """The upper triangle of sum_e J_e^T J_e, in one process."""
    hessian = np.zeros((args.params, args.params))
    for event in range(args.events):
        ix, jacobian = jacobian_panel(event, args)
        upper = ix[:, None] <= ix[None, :]
        hessian[np.ix_(ix, ix)] += np.where(upper, jacobian.T @ jacobian, 0)
    return hessian


def add_to_diagonal(matrix: ConvergentMatrix, value: float) -> None:
    """Adds `value` to the diagonal elements stored here, in local_data()."""
    rows, cols = matrix.local_indices()
    local_rows, local_cols = np.nonzero(rows[:, None] == cols[None, :])
    matrix.local_data()[local_rows, local_cols] += value


def assemble(hessian: ConvergentMatrix, store: resurgo.Store, args: argparse.Namespace, comm) -> dict:
    """The event loop: round-robin over the ranks, checkpoint every C events."""
    rank, size = comm.Get_rank(), comm.Get_size()
    run = {"restarted_from": -1, "restart_seconds": 0.0, "checkpoints": 0, "events_run": 0}
    events_done = 0
    if store.latest() is not None:
        started = time.perf_counter()
        events_done = run["restarted_from"] = hessian.restart(store)
        run["restart_seconds"] = time.perf_counter() - started
    while events_done < args.events and (args.stop_after < 0 or run["events_run"] < args.stop_after):
        event = events_done + rank
        if event < args.events:
            ix, jacobian = jacobian_panel(event, args)
            hessian.update_symmetric(jacobian.T @ jacobian, ix)  # returns at once
        round_events = min(size, args.events - events_done)
        run["events_run"] += round_events
        events_done += round_events
        if events_done // args.every > (events_done - round_events) // args.every:
            hessian.checkpoint(store, events_done)  # commits, then checkpoints
            run["checkpoints"] += 1
            if rank == 0:
                print(f"checkpoint {events_done}", flush=True)
    run["events"] = events_done
    return run


def check_and_factor(hessian: ConvergentMatrix, args: argparse.Namespace, comm) -> None:
    """Rank 0 compares the assembled matrix with the serial sum; then, when
    ScaLAPACK is there, every rank factors H + damping * I in place."""
    check = not args.no_check and args.params <= CHECK_MAX_PARAMS
    assembled = hessian.gather() if check or args.output else None
    serial = serial_hessian(args) if check and comm.Get_rank() == 0 else None
    if comm.Get_rank() == 0:
        if args.output:
            np.save(args.output, assembled)
        if not check:
            print(f"check: skipped (--no-check, or more than {CHECK_MAX_PARAMS} parameters)")
        elif np.array_equal(assembled, serial):
            print("check: equal to the serial NumPy sum")
        else:
            sys.exit(f"check: differs from the serial NumPy sum by up to {np.abs(assembled - serial).max()}")

    library = find_library()
    if library is None:
        if comm.Get_rank() == 0:
            print("cholesky: skipped (no ScaLAPACK for Open MPI found)")
        return
    add_to_diagonal(hessian, args.damping)
    lapack = Scalapack(library)
    with lapack.grid(*hessian.grid) as context:
        started = time.perf_counter()
        info = lapack.potrf("U", hessian, context)  # H + D I = U^T U, U in the upper triangle
        seconds = comm.allreduce(time.perf_counter() - started, op=MPI.MAX)
    if info != 0:
        sys.exit(f"cholesky: pdpotrf INFO = {info} on rank {comm.Get_rank()}")
    factor = hessian.gather() if check else None
    if comm.Get_rank() == 0:
        message = f"cholesky: pdpotrf {seconds:.3f} s"
        if check:
            symmetric = serial + np.triu(serial, 1).T + args.damping * np.eye(args.params)
            exact = np.linalg.cholesky(symmetric).T
            error = np.linalg.norm(np.triu(factor) - exact) / np.linalg.norm(exact)
            message += f", relative error against NumPy {error:.1e}"
        print(message, flush=True)


def main(args: argparse.Namespace) -> None:
    comm = MPI.COMM_WORLD
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(resurgo.Store(args.store, config=args.config, comm=comm))
        hessian = stack.enter_context(ConvergentMatrix(comm, (args.params, args.params), dtype=args.dtype,
                                                       block=(args.block, args.block), backend=args.backend))
        hessian.protect(store)
        run = assemble(hessian, store, args, comm)
        if run["events"] == args.events:
            hessian.commit()
            if args.write_global:
                hessian.write_global(args.write_global)  # collective; before the damping and the factor
            check_and_factor(hessian, args, comm)
        store.wait()
        stats = hessian.stats()
    slowest = {key: comm.reduce(stats[key], op=MPI.MAX) for key in ("update_seconds", "commit_seconds")}
    if comm.Get_rank() == 0:
        print("RESULT " + json.dumps({**run, "ranks": comm.Get_size(), "grid": hessian.grid,
                                      "wall_seconds": time.perf_counter() - started, **slowest}), flush=True)


if __name__ == "__main__":
    arguments = parse_arguments()  # the same on every rank: a usage error ends each one
    try:
        main(arguments)
    except BaseException as error:
        # Raised on this rank alone, maybe: the others may be waiting in a
        # collective call, so end them too.
        if isinstance(error, SystemExit):
            print(error.code, file=sys.stderr)
        else:
            traceback.print_exc()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
