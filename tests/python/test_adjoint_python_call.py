"""The per-call paths of the Python layer that an adjoint takes thousands of
times (issue 27, part 4): their shortcuts (an int version taken as it is,
a pyrevolve storage's regions left pointed at the arrays it last saw,
the store of a storage type looked up once) must check and copy what the
general paths do. Timings are bench/small_checkpoints.py's, not tests'."""

from __future__ import annotations

import numpy as np
import pytest
from checkpoint_schedules import StorageType

import resurgo
from resurgo.adjoint import ResurgoStorage, memory_store

pytest.importorskip("pyrevolve")
from resurgo.adjoint_pyrevolve import ResurgoRevolveStorage  # noqa: E402


class DeviceLike:
    """Shows itself as CUDA memory, as CuPy arrays do."""

    def __init__(self, shape):
        self.shape = shape
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f8", "data": (0, False), "version": 3}


@pytest.fixture
def slots():
    storage = ResurgoRevolveStorage(12, 3, np.float64, name="call-paths")
    yield storage
    storage.close()


def test_pyrevolve_storage_restores_every_layout_it_was_handed(slots):
    rng = np.random.default_rng(7)
    first = [rng.random(4), rng.random((2, 3))]
    slots.save(0, first)
    second = [rng.random(12)]
    slots.save(1, second)  # another layout: the regions are pointed anew
    third = [rng.random((3, 2)).astype(np.float32), rng.random(8)[::2]]  # cast, and a strided array
    slots.save(2, third)

    out = [np.empty(4), np.empty((2, 3))]
    slots.load(0, out)
    for got, want in zip(out, first):
        np.testing.assert_array_equal(got, want)
    out = [np.empty(12)]
    slots.load(1, out)
    np.testing.assert_array_equal(out[0], second[0])
    out = [np.empty((3, 2), np.float32), np.empty(8)[::2]]
    slots.load(2, out)
    for got, want in zip(out, third):
        np.testing.assert_array_equal(got, want)


def test_pyrevolve_storage_checks_arrays_of_new_shapes_after_known_ones(slots):
    slots.save(0, [np.ones(6), np.ones(6)])
    with pytest.raises(resurgo.InvalidArgumentError, match=r"more than size_ckp=12 entries"):
        slots.save(1, [np.ones(6), np.ones(7)])
    with pytest.raises(resurgo.InvalidArgumentError, match=r"is on the device, but the storage has no device_staging"):
        slots.save(1, [np.ones(6), DeviceLike((6,))])
    out = [np.zeros(6), np.zeros(6)]
    slots.load(0, out)  # the shapes saved first are still copied right
    np.testing.assert_array_equal(out, np.ones((2, 6)))


def test_store_version_checks_name_the_call_and_the_store():
    with memory_store("calls", {"u": np.zeros(4)}) as store:
        with pytest.raises(resurgo.InvalidArgumentError, match=r"checkpoint on store 'calls': version 2147483648 is out of range"):
            store.checkpoint(2**31)
        with pytest.raises(TypeError, match=r"discard on store 'calls': version must be an int, not str"):
            store.discard("3")
        with pytest.raises(resurgo.InvalidArgumentError, match=r"restart on store 'calls': version must be >= 0 \(got -1\)"):
            store.restart(-1)
        with pytest.raises(TypeError, match=r"prefetch on store 'calls': version must be an int, not bool"):
            store.prefetch([1, True])
        store.checkpoint(np.int32(5))  # other integer types take the general path
        assert store.restart(np.int64(5)) == 5
        store.discard(5)


def test_resurgo_storage_checks_the_storage_type_once_its_stores_are_open():
    state = {"u": np.arange(4.0)}
    with ResurgoStorage("calls", state) as storage:
        storage.save(0, StorageType.RAM)
        with pytest.raises(resurgo.InvalidArgumentError, match=r"save: storage StorageType.WORK holds no checkpoints"):
            storage.save(1, StorageType.WORK)
        with pytest.raises(resurgo.InvalidArgumentError, match=r"load: storage StorageType.NONE holds no checkpoints"):
            storage.load(0, StorageType.NONE, delete=False)
        state["u"][:] = 0
        storage.load(0, StorageType.RAM, delete=True)
        np.testing.assert_array_equal(state["u"], np.arange(4.0))
