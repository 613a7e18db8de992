"""Datasets of the automatic runtime declared as blocks of global arrays
(issue 31 part 3; docs/auto.md, "Restart on another rank count"): the
Python binding passes global_shape and offset through, refuses what cannot
map, and a job of one restores its own checkpoint of such datasets. The
restart on another rank count runs under mpirun
(tests/mpi/auto_rank_change.cmake)."""

from __future__ import annotations

import numpy as np
import pytest

import resurgo
from resurgo import auto


def _run(dirs, steps: int, trigger_at: int = 0) -> tuple:
    """A job of one whose field is the whole of an 8 x 4 global array (the
    block at offset 0): returns the final field and the restore report."""
    with resurgo.Store("auto-global", **dirs.kw()) as store, auto.Runtime(store) as rt:
        u = np.zeros((8, 4))
        U = rt.dataset("u", u, global_shape=(8, 4), offset=(0, 0))
        if rt.loop("init", U.write()):
            u[:] = np.arange(32.0).reshape(8, 4)
        rt.initphase_done()
        scale = 0.5
        for step in range(1, steps + 1):
            if step == trigger_at and not rt.restoring:
                rt.trigger()
            if rt.loop("scale", U.read_write()):
                u *= scale
                u += 1.0
            scale = rt.query(float(scale * 1.0625))
        return u.copy(), rt.last_restore


def test_job_of_one_restores_its_global_block_checkpoint(dirs):
    expected, _ = _run(dirs, 6)
    other = dirs.root / "second"
    dirs.l2, dirs.l4 = other / "l2", other / "l4"
    _run(dirs, 3, trigger_at=2)
    resumed, restore = _run(dirs, 6, trigger_at=2)
    assert restore is not None and restore.ranks == 1
    assert resumed.tobytes() == expected.tobytes()


def test_blocks_it_cannot_map_are_refused(dirs):
    with resurgo.Store("auto-global-bad", **dirs.kw()) as store, auto.Runtime(store) as rt:
        u = np.zeros((4, 4))
        with pytest.raises(resurgo.InvalidArgumentError, match="dataset 'u' as a block of a global array: a dataset with a halo"):
            rt.dataset("u", u, halo=1, global_shape=(8, 4), offset=(0, 0))
        with pytest.raises(resurgo.InvalidArgumentError, match=r"on axis 0 the block \[6, 10\) does not lie inside \[0, 8\)"):
            rt.dataset("v", u, global_shape=(8, 4), offset=(6, 0))
        with pytest.raises(TypeError, match="dataset 'w': offset must be a sequence of ints"):
            rt.dataset("w", u, global_shape=(8, 4), offset=0.5)
