"""Adjoint staging from Python: the memory route, prefetch in restore order
into the room discard frees, and the errors of bad input (docs/adjoint.md).
The C++ suite (adjoint_staging_test.cpp) covers the faults in depth."""

from __future__ import annotations

import time

import numpy as np
import pytest

import resurgo


def _eventually(condition, seconds: float = 30.0) -> bool:
    """Polls a condition that background threads make true."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def _in_memory(store: resurgo.Store, version: int) -> bool:
    return any(v.version == version and v.levels[:1] == (resurgo.L1,) and not v.pending for v in store.versions())


def test_memory_only_store_restores_from_memory(dirs):
    state = np.zeros(1 << 18)
    with resurgo.Store("ram", local_path=dirs.l2, memory_every=1, memory_keep=0, local_every=0,
                       persistent_every=0, memory_capacity="64MiB") as store:
        store.protect("u", state)
        for version in range(1, 4):
            state[:] = version
            store.checkpoint(version)
        state[:] = 0
        assert store.restart(2) == 2
        assert np.all(state == 2)
        assert store.last_restart.level == resurgo.L1
    assert not list((dirs.l2 / "ram").glob("*.rsg"))


def test_prefetch_then_consume_in_reverse_order(dirs):
    state = np.zeros((3 << 20) // 8)
    with resurgo.Store("disk", local_path=dirs.l2, local_keep=0, persistent_every=0,
                       memory_capacity="8MiB") as store:
        store.protect("u", state)
        for version in range(1, 6):
            state[:] = version
            store.checkpoint(version)
        store.wait()
        store.prefetch(range(5, 0, -1))
        for version in range(5, 0, -1):
            assert _eventually(lambda: _in_memory(store, version)), version
            state[:] = 0
            assert store.restart(version) == version
            assert np.all(state == version)
            assert store.last_restart.level == resurgo.L1
            store.discard(version)
    assert not list((dirs.l2 / "disk").glob("*.rsg"))


def test_discard_errors(dirs):
    state = np.ones(1024)
    with resurgo.Store("e", local_path=dirs.l2, persistent_every=0) as store:
        store.protect("u", state)
        store.checkpoint(1)
        store.wait()
        with pytest.raises(resurgo.NotFoundError):
            store.discard(5)
        store.discard(1)
        with pytest.raises(resurgo.StateError, match="already discarded"):
            store.discard(1)
        with pytest.raises(resurgo.NotFoundError, match="discarded"):
            store.restart(1)
        with pytest.raises(resurgo.NotFoundError):
            store.prefetch([1])
        with pytest.raises(resurgo.InvalidArgumentError):
            store.prefetch([-3])
