"""pyrevolve with its checkpoints on the device (issue 30, part 2;
docs/adjoint.md, "pyrevolve (Devito)"): ResurgoRevolveStorage copies CUDA
arrays through a device staging array into a store with an L0 device cache,
and the restores the schedule announces are staged into L0 ahead of the
backward pass, from memory and from disk. Against the fake CUDA driver in a
child process (test_fake_cuda_driver.py says why), with a stand-in for
CuPy's arrays: slices and reshapes are views, and an assignment is a
device-to-device copy on the null stream, as CuPy's on its current one."""

from __future__ import annotations

import numpy as np
import pytest

from test_fake_cuda_driver import FAKE, run_child

pyrevolve = pytest.importorskip("pyrevolve")

# Device views over the fake's memory, as CuPy's arrays behave for the
# storage: `view[a:b]`, `reshape`, `view[...] = other` (cuMemcpyDtoDAsync).
VIEWS = """
import faulthandler, time
faulthandler.dump_traceback_later(60, exit=True)  # a hang fails with its stack, before the parent's timeout
copy_async = entry("cuMemcpyDtoDAsync", c.c_uint64, c.c_uint64, c.c_size_t, c.c_void_p)

class View(DeviceArray):
    def __init__(self, address, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
        self.address = c.c_uint64(address)
    def __getitem__(self, key):
        start, stop, _ = key.indices(self.shape[0])
        return View(self.address.value + start * self.dtype.itemsize, (stop - start,), self.dtype)
    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        assert int(np.prod(shape)) * self.dtype.itemsize == self.nbytes, (shape, self.shape)
        return View(self.address.value, shape, self.dtype)
    def __setitem__(self, key, source):
        assert key is Ellipsis and source.nbytes == self.nbytes, (key, source.nbytes, self.nbytes)
        check(copy_async(self.address.value, source.address.value, self.nbytes, None), "cuMemcpyDtoDAsync")

synchronized = []
def wait_for_copies():  # the storage's synchronize, counted
    synchronized.append(1)
    check(synchronize(None), "cuStreamSynchronize")

def wait_for(done, what):
    deadline = time.monotonic() + 10
    while not done() and time.monotonic() < deadline:
        time.sleep(0.001)
    assert done(), what
"""

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not FAKE.exists(), reason=f"the fake CUDA driver is not built ({FAKE}; `make build` builds it)"),
]


@pytest.mark.parametrize("on_disk", [False, True], ids=["memory", "disk"])
def test_device_checkpoints_are_staged_into_l0_ahead_of_their_loads(tmp_path, on_disk):
    run_child(
        tmp_path,
        VIEWS
        + f"""
on_disk = {on_disk!r}
"""
        + """
from resurgo.adjoint import LOAD, SAVE
from resurgo.adjoint_pyrevolve import ResurgoRevolveStorage

size = 128 * 1024  # two arrays of 64 Ki float32 per checkpoint: 512 KiB
staging = DeviceArray((size,), "float32")
u, v = DeviceArray((256, 256), "float32"), DeviceArray((256, 256), "float32")
options = dict(device_capacity="1MiB", device_chunk="2MiB", log_level="warn")  # L0: two checkpoints
if on_disk:
    options["disk_path"] = sys.argv[2]
storage = ResurgoRevolveStorage(size, 6, np.float32, name="slots", device_staging=View(staging.address.value, (size,), "float32"),
                                synchronize=wait_for_copies, **options)
store = storage.store
assert store.device_stats().cache is not None, "no L0 for device checkpoints"
rng = np.random.default_rng(5)
saved = {}
for slot in range(6):
    saved[slot] = [rng.standard_normal(u.shape).astype(np.float32) for _ in range(2)]
    u.set(saved[slot][0]); v.set(saved[slot][1])
    storage.save(slot, [View(u.address.value, u.shape, "float32"), View(v.address.value, v.shape, "float32")])
assert len(synchronized) == 6, "each save waits for its copies into the staging array"
order = list(reversed(range(6)))
storage.expect([(LOAD, slot) for slot in order])
from_device = {}
for slot in order:
    if slot == 1:  # L0 holds two: slots 1 and 0 are staged once 5 to 2 are consumed
        wait_for(lambda: store.device_stats().cache.prefetched >= 2, store.device_stats().cache)
    u.set(np.zeros(u.shape, np.float32)); v.set(np.zeros(v.shape, np.float32))
    storage.load(slot, [View(u.address.value, u.shape, "float32"), View(v.address.value, v.shape, "float32")])
    wait_for_copies()
    assert np.array_equal(u.get(), saved[slot][0]) and np.array_equal(v.get(), saved[slot][1]), slot
    from_device[slot] = store.last_restart.bytes_from_device_cache
assert from_device[1] == from_device[0] == 4 * size, from_device
assert store.device_stats().cache.restored_from_prefetch >= 2, store.device_stats().cache
storage.close()
for array in (staging, u, v):
    array.free()
release(0)
assert leaks() == {}, leaks()
""",
    )


def test_a_revolver_with_device_checkpoints_computes_the_numpy_gradient(tmp_path):
    """The whole Revolve schedule on device arrays gives pyrevolve's own
    NumPy result, and apply_reverse announces the reverse pass's restores
    again, now written, for the prefetch to stage them into L0 (L0 holds
    two of the three slots). The schedule saves again during the reverse
    pass, into an L0 full of staged checkpoints: such a save once waited for
    ever for their restores (next test)."""
    run_child(
        tmp_path,
        VIEWS
        + """
import pyrevolve
from resurgo.adjoint_pyrevolve import ResurgoRevolver

N, STEPS, SLOTS = 128 * 1024, 24, 3  # 1 MiB a checkpoint: L0 (2 MiB) holds two of the three

class Checkpoint(pyrevolve.Checkpoint):
    def __init__(self, field):
        self.field = field
    def get_data_location(self, timestep):
        return [self.field]
    def get_data(self, timestep):
        return [self.field]
    @property
    def size(self):
        return N
    @property
    def dtype(self):
        return np.float64

class Forward(pyrevolve.Operator):  # u <- 0.5 u + sin(t), on the host through get/set
    def __init__(self, field):
        self.field = field
    def apply(self, t_start, t_end):
        values = self.field.get()
        for t in range(t_start, t_end):
            values = 0.5 * values + np.sin(t + np.arange(N) / N)
        self.field.set(values)

class Reverse(pyrevolve.Operator):  # accumulates the forward state of each step
    def __init__(self, field, gradient):
        self.field, self.gradient = field, gradient
    def apply(self, t_start, t_end):
        self.gradient += self.field.get() * (t_start + 1)

caches, orders, restarted = [], [], []

def gradient(revolver_class, field, **options):
    gradient = np.zeros(N)
    field.set(np.linspace(0, 1, N))
    revolver = revolver_class(Checkpoint(field), Forward(field), Reverse(field, gradient), SLOTS, STEPS, **options)
    storage = getattr(revolver, "resurgo_storage", None)
    if storage is not None:  # the orders announced, the restores, and L0 as apply_reverse closes the store
        store, close = storage.store, storage.close
        prefetch, restart = store.prefetch, store.restart
        store.prefetch = lambda order: (orders.append(list(order)), prefetch(order))[1]
        store.restart = lambda version: (restarted.append(version), restart(version))[1]
        storage.close = lambda: (caches.append(store.device_stats().cache), close())
    revolver.apply_forward()
    revolver.apply_reverse()
    return gradient, revolver

host_field = np.zeros(N)
class NumpyField(np.ndarray):
    def get(self):
        return np.array(self)
    def set(self, values):
        self[:] = values
expected, _ = gradient(pyrevolve.Revolver, host_field.view(NumpyField))

memory = DeviceArray((N,), "float64")
staging = DeviceArray((N,), "float64")
field = View(memory.address.value, (N,), "float64")
staged = View(staging.address.value, (N,), "float64")
result, revolver = gradient(ResurgoRevolver, field, device_staging=staged, synchronize=wait_for_copies,
                            device_capacity="2MiB", device_chunk="2MiB", log_level="warn")
assert np.array_equal(result, expected), np.abs(result - expected).max()
assert synchronized, "the saves waited for their copies"
assert len(orders) == 2 and orders[1] == restarted, (orders, restarted)  # forward, then reverse: every restore
assert caches[0].capacity > 0, caches
assert revolver.resurgo_storage.store is None, "closed by apply_reverse"
for array in (memory, staging):
    array.free()
release(0)
assert leaks() == {}, leaks()
""",
    )


def test_a_save_into_an_l0_full_of_staged_checkpoints_does_not_wait_for_their_loads(tmp_path):
    """Two checkpoints staged for the reverse pass fill L0; a save before
    their loads (a schedule's recomputation) takes the room of the first
    instead of waiting for ever for its load, which then reads memory."""
    run_child(
        tmp_path,
        VIEWS
        + """
from resurgo.adjoint import LOAD
from resurgo.adjoint_pyrevolve import ResurgoRevolveStorage

size = 256 * 1024  # 1 MiB of float32: L0 (2 MiB) holds two
staging, u = DeviceArray((size,), "float32"), DeviceArray((size,), "float32")
field = View(u.address.value, (size,), "float32")
storage = ResurgoRevolveStorage(size, 4, np.float32, name="full", device_staging=View(staging.address.value, (size,), "float32"),
                                synchronize=wait_for_copies, device_capacity="2MiB", device_chunk="2MiB", log_level="warn")
store = storage.store
for slot in range(3):
    u.set(np.full(size, slot, np.float32))
    storage.save(slot, [field])
storage.expect([(LOAD, 0), (LOAD, 1)])  # evicts the captures of slots 1 and 2 (flushed) for them
wait_for(lambda: store.device_stats().cache.prefetched == 2, store.device_stats().cache)
u.set(np.full(size, 3, np.float32))
storage.save(3, [field])  # no room but the staged versions', before any load
from_device = {}
for slot in (0, 1):
    u.set(np.zeros(size, np.float32))
    storage.load(slot, [field])
    wait_for_copies()
    assert (u.get() == slot).all(), slot
    from_device[slot] = store.last_restart.bytes_from_device_cache
assert from_device == {0: 0, 1: 4 * size}, from_device  # 0 was dropped for the save; 1 is still staged
storage.close()
for array in (staging, u):
    array.free()
release(0)
assert leaks() == {}, leaks()
""",
    )


def test_device_staging_is_checked_and_arrays_must_be_where_the_staging_is():
    from resurgo.adjoint_pyrevolve import ResurgoRevolveStorage
    from resurgo.errors import InvalidArgumentError

    class Device:  # a device array's description only: never copied here
        def __init__(self, shape, typestr="<f4"):
            self.__cuda_array_interface__ = {"data": (0, False), "shape": shape, "typestr": typestr, "strides": None,
                                             "version": 3}

    with pytest.raises(InvalidArgumentError, match="device_staging is a ndarray, not a CUDA array"):
        ResurgoRevolveStorage(8, 2, np.float32, device_staging=np.zeros(8, np.float32), synchronize=lambda: None)
    with pytest.raises(InvalidArgumentError, match=r"shape \(4,\) and dtype float32; .* size_ckp=8 entries of float32"):
        ResurgoRevolveStorage(8, 2, np.float32, device_staging=Device((4,)), synchronize=lambda: None)
    with pytest.raises(InvalidArgumentError, match="dtype float64"):
        ResurgoRevolveStorage(8, 2, np.float32, device_staging=Device((8,), "<f8"), synchronize=lambda: None)
    with pytest.raises(InvalidArgumentError, match="device_staging needs synchronize"):
        ResurgoRevolveStorage(8, 2, np.float32, device_staging=Device((8,)))
    storage = ResurgoRevolveStorage(8, 2, np.float32, name="host")
    try:
        refused = (r"save on pyrevolve storage 'host': checkpoint array 1 \(Device\) is on the device, "
                   "but the storage has no device_staging")
        with pytest.raises(InvalidArgumentError, match=refused):
            storage.save(0, [np.zeros(4, np.float32), Device((4,))])
    finally:
        storage.close()
