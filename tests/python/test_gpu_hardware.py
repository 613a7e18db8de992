"""The GPU paths of issues 29 and 30 on a real GPU, through CuPy (run by
scripts/gpu_check.sh on a GPU machine; skipped where CuPy sees no GPU):
managed memory written by kernels on a named capture stream, forked
checkpoints of device and managed regions while kernels go on, and the
adjoint backward pass staged into the L0 device cache by the prefetch. The
fake-driver suites (test_managed_fake_cuda.py, test_device_prefetch.py) hold
the same scenarios against the test fake; these check what only a driver
can: that the kernels' writes are the ones a checkpoint holds."""

from __future__ import annotations

import time

import numpy as np
import pytest

import resurgo
from test_device_regions import _cupy

pytestmark = pytest.mark.gpu


@pytest.fixture
def cupy():
    return _cupy()


def managed_array(cupy, shape, dtype):
    previous = cupy.cuda.get_allocator()
    cupy.cuda.set_allocator(cupy.cuda.MemoryPool(cupy.cuda.malloc_managed).malloc)
    try:
        return cupy.zeros(shape, dtype)
    finally:
        cupy.cuda.set_allocator(previous)


def test_a_checkpoint_waits_for_the_kernels_of_its_capture_stream(cupy, dirs):
    """The kernels are launched on a stream of their own and not
    synchronised before the checkpoint: the checkpoint must wait for that
    stream. Each version is restored once written (the levels keep only the
    newest ones)."""
    grid = managed_array(cupy, (256, 1024), cupy.float64)
    stream = cupy.cuda.Stream(non_blocking=True)
    with resurgo.Store("managed-stream", **dirs.kw(device_capacity="0")) as store:
        store.protect("grid", grid)
        store.set_capture_streams([stream])
        for version in range(3):
            with stream:
                for _ in range(20):  # enough work that a copy not waiting for it reads old values
                    grid += 1.0
                    grid *= 1.0000001
            store.checkpoint(version)
            stream.synchronize()
            expected = grid.get()
            store.wait()
            grid.fill(-1.0)
            cupy.cuda.Device().synchronize()
            assert store.restart(version) == version
            assert store.describe(version).regions[0].kind == "managed"
            np.testing.assert_array_equal(grid.get(), expected, err_msg=f"version {version}")


@pytest.mark.parametrize("kind", ["device", "managed"])
def test_a_forked_checkpoint_holds_the_state_while_kernels_go_on(cupy, dirs, kind):
    shape = (512, 512)
    grid = cupy.zeros(shape, cupy.float32) if kind == "device" else managed_array(cupy, shape, cupy.float32)
    with resurgo.Store(f"fork-{kind}", **dirs.kw(capture_mode="fork", device_capacity="0")) as store:
        store.protect("grid", grid)
        for version in range(3):
            grid += cupy.arange(grid.size, dtype=cupy.float32).reshape(shape)
            cupy.cuda.Device().synchronize()
            expected = grid.get()
            store.checkpoint(version)
            grid *= -3.0  # runs while the child writes the version
            store.wait()
            assert store.stats()[-1].capture == "fork"
            assert store.restart(version) == version
            assert store.describe(version).regions[0].kind == kind
            np.testing.assert_array_equal(grid.get(), expected, err_msg=f"version {version}")


def test_the_backward_pass_stages_device_states_into_l0(cupy, dirs):
    """An adjoint's backward pass over a state in device memory (the route
    of resurgo.adjoint.disk_store, docs/adjoint.md): the versions the
    forward pass's captures no longer hold in L0 are staged back into it by
    the prefetch, so that their restarts copy device to device."""
    field = cupy.zeros((512, 512), cupy.float32)  # 1 MiB: L0 holds four
    rng = np.random.default_rng(3)
    saved = {}
    route = dict(local_path=str(dirs.l2), local_every=1, local_keep=0, persistent_every=0, memory_every=0)
    with resurgo.Store("backward", device_capacity="4MiB", device_chunk="2MiB", **route) as store:
        store.protect("field", field)
        for step in range(6):  # L0 keeps the captures of steps 2 to 5
            saved[step] = rng.standard_normal(field.shape).astype(np.float32)
            field.set(saved[step])
            cupy.cuda.Device().synchronize()
            store.checkpoint(step)
        store.wait()
        assert store.device_stats().cache.device == cupy.cuda.Device().id
        store.prefetch(reversed(range(6)))
        from_device = {}
        for step in reversed(range(6)):
            if step == 1:  # steps 5 to 2 were discarded: L0 holds 1 and 0 once staged
                deadline = time.monotonic() + 10
                while store.device_stats().cache.versions != 2 and time.monotonic() < deadline:
                    time.sleep(0.001)
            field.fill(0)
            cupy.cuda.Device().synchronize()
            assert store.restart(step) == step
            np.testing.assert_array_equal(field.get(), saved[step], err_msg=f"step {step}")
            from_device[step] = store.last_restart.bytes_from_device_cache
            store.discard(step)
        assert from_device[1] == from_device[0] == field.nbytes, (from_device, store.device_stats().cache)
