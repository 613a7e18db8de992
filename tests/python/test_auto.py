"""resurgo.auto: automatic checkpointing through NumPy arrays. A small heat
stencil is checkpointed by trigger() and restored by replay (or from a
fast-forward payload) in a new store and runtime, and once after SIGKILL of
a child process; bad input maps to the resurgo error classes.

Run as a script, this file is that child (see child_main)."""

from __future__ import annotations

import json
import signal
import struct
import subprocess
import sys
from typing import Callable, List, Optional

import numpy as np
import pytest

import resurgo
from helpers import kill_after_lines
from resurgo import auto

CELLS = 16  # interior cells per side; the halo ring makes it 18
STEPS = 10
CHECKPOINT_STEP = 4


class Heat:
    """A stencil on u (halo 1) with a coefficient field written only by the
    initialisation, queries of three kinds and a branch on a queried value."""

    def __init__(self, rt: auto.Runtime) -> None:
        side = CELLS + 2
        self.u = np.zeros((side, side))
        self.v = np.zeros((side, side))
        self.coeff = np.zeros((side, side))
        self.U = rt.dataset("u", self.u, halo=1)
        self.V = rt.dataset("v", self.v, halo=1)
        self.C = rt.dataset("coeff", self.coeff)
        self.queries: List[float] = []  # every queried value, as the program saw it
        self.resumed_at: Optional[int] = None  # the step a fast-forward restore continued from

    def run(self, rt: auto.Runtime, location: str = "runtime",
            on_step: Callable[[int], None] = lambda step: None) -> None:
        """location: "runtime" (the runtime chooses), "fastfw" (ndarray
        payload) or "datlist" (bytes payload, u listed)."""
        if rt.loop("init", self.U.write(), self.C.write()):
            cells = np.arange(self.u.size).reshape(self.u.shape)
            self.u[...] = (cells % 7) * 0.25
            self.coeff[...] = 0.2 + (cells % 5) * 0.01
        rt.initphase_done()
        step = 0
        while step < STEPS:
            on_step(step)
            if step == CHECKPOINT_STEP:
                rt.trigger()
            if location == "fastfw":
                saved = rt.fastfw(np.array([step, sum(self.queries)], dtype=np.float64))
                if saved is not None:
                    step, self.queries = int(saved[0]), [float(saved[1])]
                    self.resumed_at = step
            elif location == "datlist":
                saved = rt.datlist([self.U], struct.pack("<qd", step, sum(self.queries)))
                if saved is not None:
                    step, total = struct.unpack("<qd", saved)
                    self.queries, self.resumed_at = [total], step
            self.step(rt)
            step += 1

    def step(self, rt: auto.Runtime) -> None:
        u, v, c = self.u, self.v, self.coeff
        if rt.loop("boundary", self.U.write(range="halo")):
            u[0, :] = u[-1, :] = u[:, 0] = u[:, -1] = 1.0
        if rt.loop("stencil", self.U.read(), self.C.read(), self.V.write(range="interior")):
            laplace = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1]
            v[1:-1, 1:-1] = u[1:-1, 1:-1] + c[1:-1, 1:-1] * laplace
        if rt.loop("copy", self.V.read(range="interior"), self.U.write(range="interior")):
            u[1:-1, 1:-1] = v[1:-1, 1:-1]
        residual, hot, profile = np.float64(0), 0, np.zeros(CELLS)
        if rt.loop("reduce", self.U.read(range="interior")):
            residual = u[1:-1, 1:-1].sum()
            hot = int(np.count_nonzero(u[1:-1, 1:-1] > 0.9))
            profile = u[1:-1, 1:-1].sum(axis=0)
        residual, hot, profile = rt.query(residual), rt.query(hot), rt.query(profile)
        self.queries += [float(residual), float(hot), float(profile.sum())]
        # Control flow on queried values: a replay must take the same branches.
        if residual > 0.5 * CELLS * CELLS and rt.loop("damp", self.U.read_write(range="interior")):
            u[1:-1, 1:-1] *= 0.5


def assert_same_state(a: Heat, b: Heat) -> None:
    for name in ("u", "v", "coeff"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.tobytes() == y.tobytes(), f"{name} differs after the restart"
    assert np.float64(sum(a.queries)).tobytes() == np.float64(sum(b.queries)).tobytes()


@pytest.mark.parametrize("location", ["runtime", "fastfw", "datlist"])
def test_triggered_checkpoint_restores_bit_identical(dirs, location):
    with resurgo.Store("auto-py", **dirs.kw()) as store, auto.Runtime(store) as rt:
        assert not rt.restoring and rt.last_restore is None and rt.last_checkpoint is None
        first = Heat(rt)
        first.run(rt, location)
        checkpoint = rt.last_checkpoint
        assert checkpoint is not None, "trigger() led to no checkpoint"
        assert 0 < checkpoint.dataset_bytes <= 3 * first.u.nbytes
        assert checkpoint.query_log_bytes > 0 or location != "runtime"
        assert rt.loop_index > checkpoint.loop_index
        store.wait(checkpoint.version, level=2)

    with resurgo.Store("auto-py", **dirs.kw()) as store, auto.Runtime(store) as rt:
        assert rt.restoring
        second = Heat(rt)
        second.run(rt, location)
        assert not rt.restoring
        restore = rt.last_restore
    assert restore is not None and restore.version == checkpoint.version
    if location == "runtime":
        assert not restore.fast_forward
        assert restore.loop_index == checkpoint.loop_index
        assert restore.skipped_loops > 0 and restore.replayed_queries > 0
    else:
        assert restore.fast_forward and checkpoint.location == location
        assert second.resumed_at == CHECKPOINT_STEP
    assert_same_state(first, second)


def test_query_returns_the_kind_it_was_given(dirs):
    with resurgo.Store("auto-query", **dirs.kw()) as store, auto.Runtime(store) as rt:
        assert rt.query(1.5) == 1.5 and type(rt.query(1.5)) is float
        assert rt.query(-3) == -3 and type(rt.query(-3)) is int
        assert rt.query(True) is True
        assert rt.query(2 + 1j) == 2 + 1j
        scalar = rt.query(np.float32(2.5))
        assert scalar == 2.5 and scalar.dtype == np.float32
        given = np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2]  # a strided view
        back = rt.query(given)
        assert back is not given and back.dtype == given.dtype and np.array_equal(back, given)
        with pytest.raises(TypeError):
            rt.query("1.5")
        with pytest.raises(TypeError):
            rt.query(np.array([object()]))
        with pytest.raises(OverflowError):
            rt.query(2**70)


def test_replay_asking_another_size_raises_mismatch(dirs):
    def program(rt: auto.Runtime, as_value: Callable[[float], object]) -> None:
        x = np.zeros(8)
        X = rt.dataset("x", x)
        for step in range(6):
            if step == 2:
                rt.trigger()
            if rt.loop("add", X.increment()):
                x += 1
            rt.query(as_value(x.sum()))

    with resurgo.Store("auto-diverge", **dirs.kw()) as store, auto.Runtime(store) as rt:
        program(rt, float)
        assert rt.last_checkpoint is not None
    with resurgo.Store("auto-diverge", **dirs.kw()) as store, auto.Runtime(store) as rt:
        assert rt.restoring
        with pytest.raises(resurgo.MismatchError):
            program(rt, np.float32)  # 4 bytes where the checkpointed run logged 8


def test_bad_input_maps_to_resurgo_errors(dirs):
    with pytest.raises(TypeError):
        auto.Runtime(object())
    with resurgo.Store("auto-bad", **dirs.kw()) as store:
        with pytest.raises(resurgo.InvalidArgumentError):
            auto.Runtime(store, interval_loops=-1)
        with auto.Runtime(store) as rt:
            with pytest.raises(TypeError):
                rt.dataset("list", [1.0, 2.0])
            with pytest.raises(resurgo.InvalidArgumentError, match="not C-contiguous"):
                rt.dataset("strided", np.zeros((4, 4))[:, ::2])
            frozen = np.zeros(4)
            frozen.flags.writeable = False
            with pytest.raises(resurgo.InvalidArgumentError, match="read-only"):
                rt.dataset("frozen", frozen)
            with pytest.raises(resurgo.InvalidArgumentError):
                rt.dataset("negative-halo", np.zeros((4, 4)), halo=-1)
            flat = rt.dataset("flat", np.zeros(16))
            with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError too
                flat.read(range="edge")
            with pytest.raises(TypeError, match="argument 1"):
                rt.loop("sweep", flat.read(), ("flat", "read"))
            with pytest.raises(resurgo.InvalidArgumentError, match="sweep"):
                rt.loop("sweep", auto.Arg(flat.id + 41, auto.Access.READ, auto.Range.ALL))
            with pytest.raises(resurgo.InvalidArgumentError, match="sweep"):
                rt.loop("sweep", flat.read(range="halo"))  # flat has no halo
            with pytest.raises(resurgo.InvalidArgumentError, match="not declared"):
                rt.datlist([auto.Dataset("stranger", flat.id, np.zeros(16))])
            with pytest.raises(TypeError):
                rt.fastfw("step=3")
            assert rt.loop("sweep", flat.read_write()) is True
        rt.close()  # again: a no-op
        with pytest.raises(resurgo.StateError):
            rt.loop("sweep", flat.read())


# -- SIGKILL of a child process ------------------------------------------------

KILL_STEP = CHECKPOINT_STEP + 3  # the child stops here, past the checkpoint, to be killed


def child_main(l2: str, l4: str, out: str, mode: str) -> None:
    """Runs Heat on the store in l2/l4 and saves the final state to `out`.
    mode "kill": at KILL_STEP, waits until the checkpoint is durable at L2,
    says so on stdout and blocks on stdin until the parent kills it."""
    with resurgo.Store("auto-kill", local_path=l2, persistent_path=l4) as store, auto.Runtime(store) as rt:
        heat = Heat(rt)

        def on_step(step: int) -> None:
            if mode == "kill" and step == KILL_STEP:
                checkpoint = rt.last_checkpoint
                store.wait(checkpoint.version, level=2)
                print(f"durable {checkpoint.version}", flush=True)
                sys.stdin.readline()

        heat.run(rt, on_step=on_step)
        restore = rt.last_restore
    np.savez(out, u=heat.u, v=heat.v, coeff=heat.coeff, queries=np.array(heat.queries))
    print(json.dumps({"restored": None if restore is None else restore.version}), flush=True)


def child_command(dirs, tag: str, mode: str) -> List[str]:
    """The child on the store under dirs.root/tag, saving to dirs.root/tag.npz."""
    root = dirs.root
    return [sys.executable, __file__, str(root / tag / "l2"), str(root / tag / "l4"), str(root / f"{tag}.npz"), mode]


def run_child(dirs, tag: str) -> dict:
    """Runs the child to the end; returns its last line."""
    done = subprocess.run(child_command(dirs, tag, "finish"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_restart_after_sigkill_matches_an_uninterrupted_run(dirs):
    lines, returncode, stderr = kill_after_lines(child_command(dirs, "killed", "kill"), lambda lines: bool(lines),
                                                 timeout=120)
    line = lines[0] if lines else ""
    assert line.startswith("durable "), f"the child died before its checkpoint was durable: {stderr}"
    assert returncode == -signal.SIGKILL
    durable = int(line.split()[1])

    assert run_child(dirs, "killed") == {"restored": durable}
    assert run_child(dirs, "clean") == {"restored": None}
    restarted, uninterrupted = np.load(dirs.root / "killed.npz"), np.load(dirs.root / "clean.npz")
    for name in ("u", "v", "coeff", "queries"):
        assert restarted[name].tobytes() == uninterrupted[name].tobytes(), f"{name} differs"


if __name__ == "__main__":
    child_main(*sys.argv[1:])
