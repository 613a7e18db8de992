"""The adjoint storage with a state on the device (issue 30, part 2;
docs/adjoint.md, "Backward pass on the device"), against the fake CUDA
driver in a child process (test_fake_cuda_driver.py says why): the DISK
store gets an L0 device cache, and the states the forward pass's captures
no longer hold there are staged into it by the prefetch, so that their
loads copy them device to device."""

from __future__ import annotations

import pytest

from test_fake_cuda_driver import FAKE, run_child

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not FAKE.exists(), reason=f"the fake CUDA driver is not built ({FAKE}; `make build` builds it)"),
]


def test_loads_of_device_states_are_staged_into_l0_by_the_prefetch(tmp_path):
    run_child(
        tmp_path,
        """
        import time
        from checkpoint_schedules import StorageType
        from resurgo.adjoint import LOAD, ResurgoStorage, Transfer

        DISK = StorageType.DISK
        field = DeviceArray((512, 512), "float32")  # 1 MiB: L0 holds four (4 MiB by default)
        host = np.zeros(100, np.int64)
        rng = np.random.default_rng(3)
        saved = {}
        with ResurgoStorage("adj", {"field": field, "host": host}, disk_path=sys.argv[2],
                            device_chunk="2MiB", log_level="warn") as storage:
            for step in range(6):  # L0 keeps the captures of steps 2 to 5
                saved[step] = rng.standard_normal(field.shape).astype(np.float32)
                field.set(saved[step])
                host[:] = step
                storage.save(step, DISK)
            store = storage.stores[DISK]
            assert store.device_stats().cache is not None, "no L0 for a state on the device"
            storage.expect([Transfer(LOAD, step, DISK) for step in reversed(range(6))])
            from_device = {}
            for step in reversed(range(6)):
                if step == 1:  # steps 5 to 2 were discarded: L0 holds 1 and 0 once staged
                    deadline = time.monotonic() + 10
                    while store.device_stats().cache.versions != 2 and time.monotonic() < deadline:
                        time.sleep(0.001)
                    assert store.device_stats().cache.versions == 2, store.device_stats().cache
                field.set(np.zeros(field.shape, np.float32))
                host[:] = -1
                storage.load(step, DISK, delete=True)
                assert np.array_equal(field.get(), saved[step]), step
                assert (host == step).all(), step
                from_device[step] = store.last_restart.bytes_from_device_cache
            assert from_device[1] == from_device[0] == field.nbytes, from_device
            assert store.device_stats().cache.evicted >= 2, store.device_stats().cache
        field.free()
        release(0)
        assert leaks() == {}, leaks()
        """,
    )


def test_a_state_of_other_objects_is_refused_naming_both_kinds():
    from resurgo.adjoint import ResurgoStorage
    from resurgo.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="expected a numpy.ndarray or a CUDA array"):
        ResurgoStorage("adj", {"u": [1.0, 2.0]})


def test_moving_a_state_between_storages_copies_tensors_with_clone():
    """PyTorch tensors have clone(), not copy(): the RAM<->DISK move of the
    working state takes either (no torch here; a stand-in shows the call)."""
    import numpy as np

    from resurgo.adjoint import _copy_of

    class Tensor:
        def __init__(self, values):
            self.values = values

        def clone(self):
            return Tensor(list(self.values))

    tensor = Tensor([1.0, 2.0])
    copied = _copy_of(tensor)
    assert copied is not tensor and copied.values == tensor.values
    array = np.arange(4.0)
    assert np.array_equal(_copy_of(array), array) and _copy_of(array) is not array
