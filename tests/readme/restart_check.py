#!/usr/bin/env python3
"""Runs a README program (examples/readme/) as its reader would, with
SIGKILL, and fails unless every run ends as an uninterrupted one does.

    restart_check.py WORKDIR COMMAND...

The program opens the store "heat", checkpoints with the number of steps
done as the version, prints "resumed after step N" when it restored one and
ends with a line "<steps> steps: ...". Every run has its own directories
under WORKDIR (RESURGO_LOCAL_PATH, RESURGO_PERSISTENT_PATH, working
directory):

  full:     the run, uninterrupted: the reference last line;
  killed:   a fresh run, SIGKILLed a random time (up to a tenth of the
            full run) after a random version of the first half of the run
            is committed;
  resumed:  the same command again: resumes after a step no earlier than
            that version and prints the reference last line;
  finished: once more: restores the last step, computes nothing, and
            prints the reference last line again;
  refused:  a fresh run with a bad configuration value: the store cannot
            open, so the run must exit non-zero and say why on stderr.

Importable (tests/python/test_readme_snippets.py): check_program().
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional, Sequence, Set, Tuple

STORE = "heat"
RESUMED = re.compile(r"^resumed after step (\d+)$", re.MULTILINE)
RESULT = re.compile(r"^(\d+) steps: .*$")
# A value the configuration refuses at open, whatever else the environment holds.
BAD_CONFIG = {"RESURGO_PIPELINE_COMPRESS": "no-such-codec"}
TIMEOUT = 120  # seconds for one run, far above the few the tests take


class CheckFailed(Exception):
    pass


class Tree:
    """A working directory with its own L2 and L4 directories."""

    def __init__(self, root: Path, tag: str) -> None:
        self.dir = root / tag
        self.dir.mkdir(parents=True)
        self.l2 = self.dir / "l2"
        self.env = dict(os.environ, RESURGO_LOCAL_PATH=str(self.l2),
                        RESURGO_PERSISTENT_PATH=str(self.dir / "l4"))

    def committed_versions(self) -> List[int]:
        """Versions whose file is in L2 under its final name (v<version>.r<rank>.rsg)."""
        found = []
        for path in (self.l2 / STORE).glob("v*.r*.rsg"):
            version = path.name[1:].split(".", 1)[0]
            if version.isdigit():
                found.append(int(version))
        return found

    def start(self, command: Sequence[str], extra_env: Optional[dict] = None) -> subprocess.Popen:
        env = dict(self.env, **(extra_env or {}))
        return subprocess.Popen(list(command), cwd=self.dir, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(tag: str, proc: subprocess.Popen) -> str:
    """Waits for a run that must succeed and end with a result line; returns its stdout."""
    out, err = proc.communicate(timeout=TIMEOUT)
    print(f"--- {tag}: exit {proc.returncode}\n{out}{err}", end="")
    if proc.returncode != 0:
        raise CheckFailed(f"{tag}: exit status {proc.returncode}:\n{err}")
    if not out.strip() or not RESULT.match(out.strip().splitlines()[-1]):
        raise CheckFailed(f"{tag}: the last line is not '<steps> steps: ...':\n{out}")
    return out


def watch(tree: Tree, proc: subprocess.Popen, enough=lambda seen: False) -> Set[int]:
    """Polls L2 every millisecond until enough(versions seen so far) or the
    process exits; returns the versions seen."""
    seen: Set[int] = set()
    while not enough(seen):
        seen.update(tree.committed_versions())
        if proc.poll() is not None:
            return seen
        time.sleep(0.001)
    return seen


def run_full(tree: Tree, command: Sequence[str]) -> Tuple[str, List[int], float]:
    """The uninterrupted run: its stdout, the versions seen committed, and the
    seconds it ran on after the first one."""
    proc = tree.start(command)
    watch(tree, proc, lambda seen: bool(seen))
    committed = time.monotonic()
    seen = watch(tree, proc)
    out = finish("full", proc)
    return out, sorted(seen), time.monotonic() - committed


def resumed_after(tag: str, out: str) -> int:
    steps = [int(found) for found in RESUMED.findall(out)]
    if len(steps) != 1:
        raise CheckFailed(f"{tag}: expected one 'resumed after step N' line:\n{out}")
    return steps[0]


def kill_in_the_middle(tree: Tree, command: Sequence[str], target: int, delay: float) -> None:
    """Starts `command` and SIGKILLs it `delay` seconds after a version of
    at least `target` is committed."""
    proc = tree.start(command)
    watch(tree, proc, lambda seen: bool(seen) and max(seen) >= target)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=TIMEOUT)
    print(f"--- killed {delay:.3f} s after version {target}: exit {proc.returncode}\n{out}{err}", end="")
    if proc.returncode != -signal.SIGKILL:
        raise CheckFailed(f"killed: ended before the kill (exit {proc.returncode}):\n{err}")


def check_refused_open(root: Path, command: Sequence[str]) -> None:
    proc = Tree(root, "refused").start(command, BAD_CONFIG)
    out, err = proc.communicate(timeout=TIMEOUT)
    print(f"--- refused: exit {proc.returncode}\n{out}{err}", end="")
    if proc.returncode == 0:
        raise CheckFailed("refused: a store that could not open exited 0")
    if "pipeline.compress" not in err:
        raise CheckFailed(f"refused: stderr does not say why the store could not open:\n{err}")


def check_program(root: Path, command: Sequence[str], seed: Optional[int] = None) -> None:
    """The five runs of the module docstring, in fresh trees under `root`."""
    # Each run has its own working directory: a relative program path would not hold there.
    command = [os.path.abspath(command[0]) if os.sep in command[0] else command[0], *command[1:]]
    seed = random.randrange(1 << 32) if seed is None else seed
    print(f"seed {seed}")
    rng = random.Random(seed)

    full, seen, window = run_full(Tree(root, "full"), command)
    if RESUMED.search(full):
        raise CheckFailed(f"full: resumed in a fresh directory:\n{full}")
    reference = full.strip().splitlines()[-1]
    steps = int(RESULT.match(reference).group(1))

    # A version of the first half, then up to a tenth of the rest of the run:
    # far enough from the end that a run slower or faster than `full` is
    # still killed in the middle, in a computation or a checkpoint.
    targets = [version for version in seen if version <= steps // 2]
    if not targets:
        raise CheckFailed(f"full: no version seen committed in the first half of the run: {seen}")
    target, delay = rng.choice(targets), rng.uniform(0, window / 10)
    tree = Tree(root, "interrupted")
    kill_in_the_middle(tree, command, target, delay)
    resumed = finish("resumed", tree.start(command))
    step = resumed_after("resumed", resumed)
    if not target <= step <= steps:
        raise CheckFailed(f"resumed: after step {step}, but version {target} was committed before the kill")
    finished = finish("finished", tree.start(command))
    if resumed_after("finished", finished) != steps:
        raise CheckFailed(f"finished: expected to resume after the last step, {steps}")
    for tag, out in (("resumed", resumed), ("finished", finished)):
        last = out.strip().splitlines()[-1]
        if last != reference:
            raise CheckFailed(f"{tag}: ended with '{last}', the uninterrupted run with '{reference}'")

    check_refused_open(root, command)
    print(f"killed after version {target}, resumed after step {step}: '{reference}' every time")


def main(argv: List[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[1])
    shutil.rmtree(root, ignore_errors=True)
    try:
        check_program(root, argv[2:])
    except CheckFailed as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
