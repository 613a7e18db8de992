"""One shot of the adjoint wave example: the misfit gradient with respect to
the velocity, computed under a checkpoint_schedules schedule with Resurgo (or
a dict of NumPy copies) as the checkpoint storage.

    .venv/bin/python examples/adjoint_wave/main.py --shape 512x512 --steps 400 --snapshots 10
    .venv/bin/python examples/adjoint_wave/main.py --snapshots 4 --disk-snapshots 8 --disk-path /local/scratch
    .venv/bin/python examples/adjoint_wave/main.py --check     # also the store-everything reference

Revolve when --disk-snapshots is 0, MultistageCheckpointSchedule (RAM, then
DISK snapshots) otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import List, Optional, Tuple

import numpy as np
from checkpoint_schedules import MultistageCheckpointSchedule, Revolve

from resurgo.adjoint import DictStorage, ResurgoStorage, run
from acoustic import WaveModel, layered_velocity, make_survey, record, store_everything_gradient, with_anomaly

PIECE = 2 << 20  # Resurgo's memory level holds each version in whole 2 MiB pieces


def parse_shape(text: str) -> Tuple[int, int]:
    try:
        ny, nx = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad grid shape '{text}' (expected NYxNX, e.g. 512x512)")
    return ny, nx


def make_storage(args, state, nbytes: int):
    if args.storage == "dict":
        return DictStorage(state)
    room = nbytes + PIECE
    return ResurgoStorage("adjoint-wave", state, ram_capacity=(args.snapshots + 1) * room,
                          disk_path=args.disk_path, prefetch=not args.no_prefetch,
                          prefetch_capacity=2 * room)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", type=parse_shape, default=(256, 256), help="grid NYxNX (default 256x256)")
    ap.add_argument("--steps", type=int, default=400, help="time steps (default 400)")
    ap.add_argument("--snapshots", type=int, default=10, help="checkpoints in RAM (default 10)")
    ap.add_argument("--disk-snapshots", type=int, default=0,
                    help="checkpoints on disk; > 0 uses MultistageCheckpointSchedule (default 0)")
    ap.add_argument("--disk-path", default=None, help="directory of the DISK checkpoints "
                    "(default: a temporary directory)")
    ap.add_argument("--storage", choices=("resurgo", "dict"), default="resurgo")
    ap.add_argument("--no-prefetch", action="store_true", help="Resurgo without schedule-driven prefetch")
    ap.add_argument("--check", action="store_true",
                    help="compare with the store-everything gradient (must be the same bits)")
    args = ap.parse_args(argv)

    survey = make_survey(args.shape, args.steps)
    background = layered_velocity(args.shape)
    observed = record(survey, with_anomaly(background), xp=np)
    model = WaveModel(survey, background, observed, xp=np)
    nbytes = sum(array.nbytes for array in model.state.values())
    schedule = (Revolve(args.steps, args.snapshots) if args.disk_snapshots == 0 else
                MultistageCheckpointSchedule(args.steps, args.snapshots, args.disk_snapshots))

    started = time.perf_counter()
    with make_storage(args, model.state, nbytes) as storage:
        stats = run(schedule, model, storage, n_steps=args.steps)
    wall = time.perf_counter() - started
    gradient = model.gradient()
    print(f"{type(schedule).__name__}, {args.storage} storage, checkpoint {nbytes / 2**20:.2f} MiB: "
          f"J = {model.misfit():.6e}, |dJ/dc| = {np.linalg.norm(gradient):.6e}")
    print(f"wall {wall:.3f} s: forward {stats.forward_seconds:.3f} s ({model.steps_advanced} steps "
          f"for {args.steps}), reverse {stats.reverse_seconds:.3f} s, blocked in {stats.saves} saves "
          f"{stats.save_seconds:.3f} s and in {stats.loads} loads {stats.load_seconds:.3f} s")
    if args.check:
        _, expected = store_everything_gradient(WaveModel(survey, background, observed, xp=np))
        same = np.array_equal(gradient, expected)
        print(f"store-everything reference: {'same bits' if same else 'DIFFERENT'}")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
