#!/usr/bin/env python3
"""Resurgo demo (`make demo`): heat2d is killed with SIGKILL while a
checkpoint is being written in the background, started again, and must end
with exactly the bytes of a run that never checkpointed.

    demo.py --binary build/cpp/examples/heat2d/heat2d [--nx N --ny N
            --steps S --every K --seed N --keep]

Four runs of the C++ heat2d, each with fresh directories:
  a. --no-checkpoint: the reference field and the baseline wall time;
  b. with checkpoints, uninterrupted: blocking time and overhead;
  c. with checkpoints, killed right after a random checkpoint returned, as
     soon as its temporary file appears (a write is in flight);
  d. the command of c again: restarts from the newest intact version.
Exit status 1 when d's final field differs from a's (or any run fails).
"""
import argparse
import filecmp
import json
import os
import random
import signal
import statistics
import subprocess
import shutil
import sys
import tempfile
import time

STORE = "heat2d"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--binary", default="build/cpp/examples/heat2d/heat2d",
                   help="the C++ heat2d program")
    # 4096 x 2048 float64 = 64 MiB of state: big enough that a write takes
    # a visible time (~0.2 s at 350 MB/s), small enough for < 1 min in all.
    p.add_argument("--nx", type=int, default=4096)
    p.add_argument("--ny", type=int, default=2048)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--every", type=int, default=50)
    p.add_argument("--persistent-every", type=int, default=4,
                   help="every n-th checkpoint is also copied to L4 (persistent.every)")
    p.add_argument("--seed", type=int, help="seed of the kill point (default: random)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directories")
    return p.parse_args()


class Run:
    """One heat2d run in a directory of its own (L2 and L4 inside it)."""

    def __init__(self, args, root, tag, checkpoint=True):
        self.dir = os.path.join(root, tag)
        os.makedirs(self.dir)
        self.output = os.path.join(self.dir, "field.bin")
        self.local = os.path.join(self.dir, "local")
        self.persistent = os.path.join(self.dir, "persistent")
        self.cmd = [os.path.abspath(args.binary), "--nx", str(args.nx), "--ny", str(args.ny),
                    "--steps", str(args.steps), "--every", str(args.every), "--store", STORE,
                    "--output", self.output]
        if not checkpoint:
            self.cmd.append("--no-checkpoint")
        # The store reads RESURGO_<SECTION>_<KEY>: both levels go to fresh dirs.
        self.env = dict(os.environ, RESURGO_LOCAL_PATH=self.local,
                        RESURGO_PERSISTENT_PATH=self.persistent,
                        RESURGO_PERSISTENT_EVERY=str(args.persistent_every))

    def start(self):
        return subprocess.Popen(self.cmd, cwd=self.dir, env=self.env, text=True, bufsize=1,
                                stdout=subprocess.PIPE)

    def complete(self):
        """Runs to the end; returns the RESULT dictionary."""
        proc = self.start()
        out, _ = proc.communicate()
        if proc.returncode != 0:
            sys.exit(f"demo: {' '.join(self.cmd)} failed with exit status {proc.returncode}")
        results = [line[len("RESULT "):] for line in out.splitlines() if line.startswith("RESULT ")]
        if not results:
            sys.exit(f"demo: no RESULT line from {' '.join(self.cmd)}")
        return json.loads(results[-1])

    def temporaries(self):
        """Temporary container files (".<file>.tmp-<pid>") now in L2 and L4."""
        found = []
        for level, root in (("L2", self.local), ("L4", self.persistent)):
            try:
                names = os.listdir(os.path.join(root, STORE))
            except FileNotFoundError:
                continue
            found += [f"{name} in {level}" for name in names
                      if name.startswith(".") and ".tmp-" in name]
        return found

    def kill_during_write(self, index, timeout=2.0):
        """Starts the run, and after its checkpoint number `index` (0-based)
        returned, SIGKILLs it as soon as a temporary file exists (or after
        `timeout` s). Returns (step of that checkpoint, temporaries seen)."""
        proc = self.start()
        seen = 0
        for line in proc.stdout:
            if not line.startswith("checkpoint "):
                continue
            if seen == index:
                step = int(line.split()[1])
                deadline = time.monotonic() + timeout
                temporaries = self.temporaries()
                while not temporaries and time.monotonic() < deadline:
                    time.sleep(0.0005)
                    temporaries = self.temporaries()
                proc.send_signal(signal.SIGKILL)
                proc.communicate()
                return step, temporaries
            seen += 1
        proc.wait()
        sys.exit(f"demo: the run ended (status {proc.returncode}) before checkpoint {index}")


def ms(seconds):
    return f"{seconds * 1e3:.1f}"


def main():
    args = parse_args()
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"demo: {args.binary} is not an executable; build it first (make build)")
    checkpoints = args.steps // args.every
    if checkpoints < 3:
        sys.exit("demo: --steps / --every must give at least 3 checkpoints")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    # Neither the first checkpoint (nothing to restart from) nor the last.
    kill_index = random.Random(seed).randrange(1, checkpoints - 1)

    root = tempfile.mkdtemp(prefix="resurgo-demo-")
    try:
        mib = args.nx * args.ny * 8 / 2**20
        print(f"heat2d {args.nx} x {args.ny} ({mib:.0f} MiB), {args.steps} steps, "
              f"checkpoint every {args.every} steps (every {args.persistent_every}th also to L4); "
              f"seed {seed}; directories under {root}", flush=True)

        print("a. reference run without checkpoints ...", flush=True)
        ref = Run(args, root, "a-reference", checkpoint=False)
        a = ref.complete()

        print("b. run with checkpoints ...", flush=True)
        full = Run(args, root, "b-checkpointed")
        b = full.complete()

        print(f"c. run with checkpoints, SIGKILL after checkpoint #{kill_index + 1} ...",
              flush=True)
        crash = Run(args, root, "c-killed")
        kill_step, temporaries = crash.kill_during_write(kill_index)

        print("d. the same command again: restart ...", flush=True)
        d = crash.complete()

        same_b = filecmp.cmp(ref.output, full.output, shallow=False)
        same_d = filecmp.cmp(ref.output, crash.output, shallow=False)
        blocking = b["blocking_seconds"]
        rows = [
            ("steps", f"{b['steps']}"),
            ("checkpoints (run b)", f"{b['checkpoints']}"),
            ("blocking per checkpoint, ms",
             f"median {ms(statistics.median(blocking))}  min {ms(min(blocking))}  "
             f"max {ms(max(blocking))}" if blocking else "n/a"),
            ("wall without checkpoints, s", f"{a['wall_seconds']:.2f}"),
            ("wall with checkpoints, s", f"{b['wall_seconds']:.2f}"),
            ("overhead (wall b / wall a)", f"{b['wall_seconds'] / a['wall_seconds']:.3f}"),
            ("killed after checkpoint", f"step {kill_step}"),
            ("kill landed during a write",
             f"yes ({', '.join(temporaries)})" if temporaries else "no (no temporary file seen)"),
            ("restarted from version", f"{d['restarted_from']}"),
            ("restart time, ms", ms(d["restart_seconds"])),
            ("final field, run b vs a", "identical" if same_b else "DIFFERENT"),
            ("final field, run d vs a", "identical" if same_d else "DIFFERENT"),
        ]
        width = max(len(name) for name, _ in rows)
        print()
        for name, value in rows:
            print(f"  {name:<{width}}  {value}")
        print("  (times are single runs on a possibly busy machine; bench/ measures properly)")
        print()
        if d["restarted_from"] < 0:
            print("demo: FAILED: the restarted run did not restart from a checkpoint")
            return 1
        if not (same_b and same_d):
            print("demo: FAILED: a final field differs from the run without checkpoints")
            return 1
        print("demo: OK: killed, restarted, and bit-identical to the run without checkpoints")
        return 0
    finally:
        if args.keep:
            print(f"demo: kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
