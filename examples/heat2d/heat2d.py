#!/usr/bin/env python3
"""heat2d in Python: the loop of heat2d.cpp with NumPy and the Python API.

    heat2d.py --nx N --ny N --steps S --every K --store NAME [--no-checkpoint]
              [--output FILE] [--stop-after T] [--config FILE]

Same options, same `checkpoint <step>` and `RESULT {...}` lines, and the
same output bytes (raw float64, ny rows of nx) as the C++ program.
"""
import argparse
import contextlib
import json
import sys
import time

import numpy as np

ALPHA = 0.2  # diffusion number; explicit Euler is stable up to 0.25


def initialize(nx, ny):
    """Hot disc of radius min(nx, ny)//8 at the centre, cold elsewhere."""
    r = min(nx, ny) // 8
    j, i = np.ogrid[0:ny, 0:nx]
    return np.where((i - nx // 2) ** 2 + (j - ny // 2) ** 2 <= r * r, 1.0, 0.0)


def step(u):
    """One explicit step, in place: NumPy evaluates the right-hand side into a
    temporary before assigning, and `u` never moves, so the protected buffer
    stays valid. The sum has the order of heat2d.cpp (same bits)."""
    c = u[1:-1, 1:-1]
    u[1:-1, 1:-1] = c + ALPHA * (u[1:-1, :-2] + u[1:-1, 2:] + u[:-2, 1:-1] + u[2:, 1:-1]
                                 - 4.0 * c)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nx", type=int, default=1024)
    p.add_argument("--ny", type=int, default=1024)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--every", type=int, default=10)
    p.add_argument("--store", default="heat2d")
    p.add_argument("--no-checkpoint", action="store_true")
    p.add_argument("--output")
    p.add_argument("--stop-after", type=int, default=-1)
    p.add_argument("--config")
    a = p.parse_args()

    u = np.ascontiguousarray(initialize(a.nx, a.ny), dtype=np.float64)
    step_no = np.zeros(1, dtype=np.int64)  # protected too: the state is (field, step)
    restarted_from, restart_seconds, checkpoints, computed = -1, 0.0, 0, 0

    with contextlib.ExitStack() as stack:
        store = None
        if not a.no_checkpoint:  # --no-checkpoint: the same loop without a store
            import resurgo  # only needed with checkpoints

            store = stack.enter_context(resurgo.Store(a.store, config=a.config))
            store.protect("field", u)
            store.protect("step", step_no)
            if store.latest() is not None:
                t0 = time.perf_counter()
                restarted_from = store.restart()  # newest intact version
                restart_seconds = time.perf_counter() - t0
                if int(step_no[0]) != restarted_from:
                    sys.exit(f"heat2d: version {restarted_from} holds step {int(step_no[0])}")

        t0 = time.perf_counter()
        while step_no[0] < a.steps and computed != a.stop_after:
            step(u)
            step_no[0] += 1
            computed += 1
            if store is not None and step_no[0] % a.every == 0:
                store.checkpoint(int(step_no[0]))  # the version is the step
                checkpoints += 1
                print(f"checkpoint {int(step_no[0])}", flush=True)
        blocking = []
        if store is not None:
            store.wait()  # every version durable at L2 before the run is done
            blocking = [s.blocking_seconds for s in store.stats()]
        wall = time.perf_counter() - t0

    if a.output and step_no[0] == a.steps:
        u.tofile(a.output)
    print("RESULT " + json.dumps({
        "steps": int(step_no[0]), "steps_run": computed, "checkpoints": checkpoints,
        "restarted_from": restarted_from, "wall_seconds": wall,
        "restart_seconds": restart_seconds, "state_bytes": u.nbytes + step_no.nbytes,
        "blocking_seconds": blocking}), flush=True)


if __name__ == "__main__":
    main()
