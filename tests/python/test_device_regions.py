"""Device regions through the Python API (docs/gpu.md, "Python").

Without a GPU, a store opened with device.backend = "host" takes host memory
for device memory, so these tests drive the whole device path (protect by
__cuda_array_interface__ or DLPack, the L0 cache, restart writing back)
with NumPy memory behind fake CUDA arrays. The tests at the end use CuPy and
PyTorch on a real GPU and skip where there is none.
"""

from __future__ import annotations

import ctypes
import gc
import weakref

import numpy as np
import pytest

import resurgo
from resurgo import _core
from helpers import bits_equal


def device_kw(dirs, **extra):
    """Overrides of a store whose device memory is host memory, with an L0 cache."""
    return dirs.kw(device_backend="host", device_capacity="4MiB", **extra)


def scribble(a: np.ndarray) -> None:
    raw = a.reshape(-1).view(np.uint8)
    raw[:] = raw ^ 0xA5


def sample(shape, dtype="float32", seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(size=shape) * 100).astype(dtype)


class FakeCudaArray:
    """A NumPy array's memory behind __cuda_array_interface__ (version 3), as
    CuPy, PyTorch or Numba expose device arrays. `dlpack_device` adds a
    __dlpack_device__ declaring where the memory is; `interface` entries
    replace the computed ones."""

    def __init__(self, array: np.ndarray, *, readonly=False, dlpack_device=None, **interface):
        self.array = array
        self._interface = {
            "data": (array.ctypes.data, readonly),
            "shape": array.shape,
            "typestr": array.dtype.str,
            "strides": None if array.flags.c_contiguous else array.strides,
            "version": 3,
            "stream": 1,
        }
        self._interface.update(interface)
        if dlpack_device is not None:
            self.__dlpack_device__ = lambda: dlpack_device

    @property
    def __cuda_array_interface__(self):
        return self._interface


# -- a DLPack producer on a CUDA device, built with ctypes ---------------------
# dlpack.h's structures (unversioned DLManagedTensor): a capsule named
# "dltensor" whose tensor says device type 2 (kDLCUDA) or 13 (kDLCUDAManaged)
# over a NumPy array's memory.


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_CAPSULE_NAME = b"dltensor"  # lives as long as the module: the capsule keeps the pointer
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_DL_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}  # kDLInt, kDLUInt, kDLFloat, kDLComplex, kDLBool


class FakeDLPackCuda:
    """A DLPack-only producer (no __cuda_array_interface__) whose tensor is
    on CUDA device type `device_type`, over `array`'s memory. `declared`:
    what __dlpack_device__ says (default: the same). The tensor has no
    deleter; this object keeps its structures alive."""

    def __init__(self, array: np.ndarray, device_type: int = 2, declared=None):
        self.array = array
        self.declared = device_type if declared is None else declared
        itemsize = array.dtype.itemsize
        self._shape = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
        self._strides = (ctypes.c_int64 * max(array.ndim, 1))(*(s // itemsize for s in array.strides))
        self._tensor = _DLManagedTensor()
        t = self._tensor.dl_tensor
        t.data = array.ctypes.data
        t.device = _DLDevice(device_type, 0)
        t.ndim = array.ndim
        t.dtype = _DLDataType(_DL_CODES[array.dtype.kind], itemsize * 8, 1)
        t.shape = self._shape
        t.strides = self._strides
        self.exports = 0

    def __dlpack__(self, **kwargs):
        self.exports += 1
        return _capsule_new(ctypes.addressof(self._tensor), _CAPSULE_NAME, None)

    def __dlpack_device__(self):
        return (self.declared, 0)


# -- round trips -----------------------------------------------------------------


@pytest.mark.parametrize("capacity", ["4MiB", "0"], ids=["l0-cache", "no-l0"])
def test_fake_device_array_round_trip(dirs, capacity):
    a = sample((64, 33), seed=1)
    expected = a.copy()
    with resurgo.Store("dev", **dirs.kw(device_backend="host", device_capacity=capacity)) as store:
        store.protect("a", FakeCudaArray(a))
        store.checkpoint(0)
        store.wait(level=4)
        scribble(a)
        assert not bits_equal(a, expected)
        assert store.restart() == 0
        assert bits_equal(a, expected)
        assert store.last_restart.bytes_from_device_cache == 0  # the newest intact: read from a level
        scribble(a)
        assert store.restart(0) == 0
        assert bits_equal(a, expected)
        from_cache = store.last_restart.bytes_from_device_cache
        assert from_cache == (a.nbytes if capacity != "0" else 0)
    (region,) = _core.inspect(str(dirs.file(2, "dev", 0))).regions
    assert region.kind == "device"
    assert region.dtype == "float32"
    assert region.shape == (64, 33)
    assert region.bytes == a.nbytes


def test_stats_report_the_device_path_and_the_caches(dirs):
    small = sample((1000,), seed=4)
    large = sample((2 * 1024 * 1024,), seed=5)  # 8 MiB: more than the 4 MiB of L0
    with resurgo.Store("stats", **device_kw(dirs, buffer_pin="off", buffer_touch="concurrent")) as store:
        before = store.device_stats()
        assert before.cache is not None and before.cache.capacity == 4 << 20
        assert before.staging is None
        store.protect("small", FakeCudaArray(small))
        store.checkpoint(1)
        store.protect("large", FakeCudaArray(large))
        store.checkpoint(2)
        store.wait()
        stats = {record.version: record for record in store.stats()}
        assert (stats[1].device_path, stats[1].device_bytes) == ("l0", small.nbytes)
        assert (stats[2].device_path, stats[2].device_bytes) == ("host", small.nbytes + large.nbytes)
        assert 0 <= stats[1].device_wait_seconds <= stats[1].copy_seconds
        device = store.device_stats()
    assert isinstance(device, resurgo.DeviceStats)
    assert device.cache.bypassed == 1
    assert device.cache.growth_stopped is None
    staging = device.staging
    assert isinstance(staging, resurgo.StagingBufferStats)
    assert (staging.pin, staging.touch, staging.strategy) == ("off", "concurrent", "concurrent")
    assert staging.checkpoints == 2
    assert not staging.pinned and staging.pin_failure is None
    assert isinstance(staging.measured, resurgo.TouchRates)
    if staging.decision is not None:  # once the rates it needs were measured
        assert staging.decision.strategy in ("concurrent", "sequential")
        assert staging.decision.description.startswith("touch model: ")


def test_stats_without_device_regions(dirs):
    with resurgo.Store("plain", **dirs.kw()) as store:
        store.protect("a", np.zeros(10))
        store.checkpoint(0)
        store.wait()
        (record,) = store.stats()
        assert (record.device_path, record.device_bytes) == (None, 0)
        device = store.device_stats()
        assert isinstance(device, resurgo.DeviceStats) and (device.cache, device.staging) == (None, None)


def test_mixed_host_and_device_regions(dirs):
    host = np.arange(1000, dtype=np.int64)
    dev = sample((256, 64), "float64", seed=2)
    dev16 = sample((3, 5, 7), "float16", seed=3)
    raw = bytearray(b"host bytes" * 10)
    snapshots = {}
    with resurgo.Store("mixed", **device_kw(dirs, local_keep=0, persistent_keep=0)) as store:
        store.protect("host", host)
        store.protect("dev", FakeCudaArray(dev))
        store.protect("raw", raw)
        store.protect("dev16", FakeCudaArray(dev16))
        for version in range(3):
            host += 1
            dev *= 1.5
            dev16[0, 0, version] = version
            raw[version] = version
            snapshots[version] = (host.copy(), dev.copy(), dev16.copy(), bytes(raw))
            store.checkpoint(version)
        store.wait()
        for version in (1, 0, 2):
            for a in (host, dev, dev16):
                scribble(a)
            raw[:] = bytes(len(raw))
            assert store.restart(version) == version
            assert bits_equal(host, snapshots[version][0])
            assert bits_equal(dev, snapshots[version][1])
            assert bits_equal(dev16, snapshots[version][2])
            assert bytes(raw) == snapshots[version][3]


def test_version_holds_its_own_copy_once_checkpoint_returned(dirs):
    """The device memory may change (or be freed after unprotect) as soon as
    checkpoint() returned: the version does not read it any more."""
    a = sample((128, 128), seed=4)
    expected = a.copy()
    with resurgo.Store("own", **device_kw(dirs)) as store:
        store.protect("a", FakeCudaArray(a))
        store.checkpoint(0)
        scribble(a)  # before the version reached any directory level
        store.wait(level=4)
        assert store.restart() == 0
    assert bits_equal(a, expected)


def test_restart_in_a_new_store_and_describe(dirs):
    a = sample((40,), "float64", seed=5)
    b = np.arange(7, dtype=np.uint16)
    expected_a, expected_b = a.copy(), b.copy()
    with resurgo.Store("again", **device_kw(dirs)) as store:
        store.protect("a", FakeCudaArray(a))
        store.protect("b", b)
        store.metadata = b"step 9"
        store.checkpoint(9)
        store.wait(level=4)
    scribble(a)
    scribble(b)
    with resurgo.Store("again", **device_kw(dirs)) as store:
        description = store.describe(9)
        assert description.version == 9
        assert description.metadata == b"step 9"
        by_label = {r.label: r for r in description.regions}
        assert by_label["a"].kind == "device"
        assert by_label["a"].dtype == "float64"
        assert by_label["a"].shape == (40,)
        assert by_label["a"].bytes == a.nbytes
        assert by_label["b"].kind == "host"
        assert by_label["b"].dtype == "uint16"
        for region in description.regions:  # protect what the version holds, by its kind
            source = a if region.label == "a" else b
            store.protect(region.label, FakeCudaArray(source) if region.kind == "device" else source)
        assert store.restart() == 9
        with pytest.raises(resurgo.NotFoundError):
            store.describe(10)
    assert bits_equal(a, expected_a)
    assert bits_equal(b, expected_b)


def test_managed_memory_declared_by_dlpack_device(dirs):
    a = sample((17, 3), seed=6)
    expected = a.copy()
    with resurgo.Store("managed", **device_kw(dirs)) as store:
        store.protect("m", FakeCudaArray(a, dlpack_device=(13, 0)))  # kDLCUDAManaged
        store.protect("d", FakeCudaArray(np.ones(4), dlpack_device=(2, 0)))  # kDLCUDA
        store.checkpoint(0)
        store.wait()
        scribble(a)
        assert store.restart() == 0
        kinds = {r.label: r.kind for r in store.describe(0).regions}
    assert bits_equal(a, expected)
    assert kinds == {"m": "managed", "d": "device"}


def test_store_keeps_the_object_until_unprotect(dirs):
    with resurgo.Store("alive", **device_kw(dirs)) as store:
        fake = FakeCudaArray(np.ones(32))
        ref = weakref.ref(fake)
        store.protect("a", fake)
        del fake
        gc.collect()
        assert ref() is not None
        store.unprotect("a")
        gc.collect()
        assert ref() is None


# -- DLPack-only producers on a CUDA device ---------------------------------------


@pytest.mark.parametrize("device_type,kind", [(2, "device"), (13, "managed")])
def test_dlpack_cuda_producer_round_trip(dirs, device_type, kind):
    a = sample((9, 11), seed=7)
    expected = a.copy()
    producer = FakeDLPackCuda(a, device_type)
    with resurgo.Store("dlcuda", **device_kw(dirs)) as store:
        store.protect("t", producer)
        assert producer.exports == 1
        store.checkpoint(0)
        store.wait()
        scribble(a)
        assert store.restart() == 0
        (region,) = store.describe(0).regions
    assert bits_equal(a, expected)
    assert (region.kind, region.dtype, region.shape, region.bytes) == (kind, "float32", (9, 11), a.nbytes)


def test_dlpack_cuda_producer_checks(dirs):
    with resurgo.Store("dlchecks", **device_kw(dirs)) as store:
        strided = np.zeros((4, 6))[:, ::2]
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'s'.*C-contiguous"):
            store.protect("s", FakeDLPackCuda(strided))
        # __dlpack_device__ says CUDA, the tensor itself says CPU.
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'x'.*device type 1.*not in device memory"):
            store.protect("x", FakeDLPackCuda(np.ones(4), device_type=1, declared=2))
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'r'.*DLPack device type 10"):
            store.protect("r", FakeDLPackCuda(np.ones(4), device_type=10))  # kDLROCM
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'e'.*empty"):
            store.protect("e", FakeDLPackCuda(np.ones((3, 0))))
        # A refused protect registers nothing: the labels are still free.
        store.protect("s", FakeDLPackCuda(np.ones(8)))
        store.protect("x", np.ones(8))


class FakeCudaArrayWithDLPack(FakeDLPackCuda):
    """Both interfaces over the same memory, like CuPy and PyTorch arrays;
    `typestr` replaces the interface's element type."""

    def __init__(self, array: np.ndarray, typestr=None):
        super().__init__(array)
        self._interface = FakeCudaArray(array)._interface
        if typestr is not None:
            self._interface["typestr"] = typestr

    @property
    def __cuda_array_interface__(self):
        return self._interface


def test_interface_preferred_over_dlpack(dirs):
    plain = FakeCudaArrayWithDLPack(np.ones(8, dtype=np.float16))
    opaque = FakeCudaArrayWithDLPack(np.ones(8, dtype=np.float16), typestr="<V2")  # PyTorch bfloat16
    with resurgo.Store("prefer", **device_kw(dirs)) as store:
        store.protect("plain", plain)
        assert plain.exports == 0  # the pointer came from the interface: no capsule consumed
        store.protect("opaque", opaque)
        assert opaque.exports == 1  # the interface cannot name the element type; DLPack can
        store.checkpoint(0)
        store.wait()
        dtypes = {r.label: (r.kind, r.dtype) for r in store.describe(0).regions}
    assert dtypes == {"plain": ("device", "float16"), "opaque": ("device", "float16")}


class FailingInterface:
    @property
    def __cuda_array_interface__(self):
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")


# -- refusals ------------------------------------------------------------------


def test_read_only_interface_refused(dirs):
    with resurgo.Store("ro", **device_kw(dirs)) as store:
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'ro'.*read-only"):
            store.protect("ro", FakeCudaArray(np.ones(8), readonly=True))
        store.protect("ro", FakeCudaArray(np.ones(8)))


def test_non_contiguous_strides_refused(dirs):
    base = np.arange(48, dtype=np.float32).reshape(6, 8)
    with resurgo.Store("strides", **device_kw(dirs)) as store:
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'v'.*C-contiguous.*strides"):
            store.protect("v", FakeCudaArray(base[:, ::2]))
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'f'.*C-contiguous"):
            store.protect("f", FakeCudaArray(np.asfortranarray(base)))
        # Explicit C strides, and any stride on an axis of extent 1, are contiguous.
        store.protect("c", FakeCudaArray(base, strides=(32, 4)))
        one = np.ones((1, 5), dtype=np.float64)
        store.protect("one", FakeCudaArray(one, strides=(999, 8)))
        store.checkpoint(0)
        store.wait()
        assert [r.label for r in store.describe(0).regions] == ["c", "one"]


def test_bad_interfaces_refused(dirs):
    with resurgo.Store("bad", **device_kw(dirs)) as store:
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'z'.*empty"):
            store.protect("z", FakeCudaArray(np.ones((4, 0)), data=(0, False)))
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'m'.*mask"):
            store.protect("m", FakeCudaArray(np.ones(4), mask=object()))
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'o'.*Python objects"):
            store.protect("o", FakeCudaArray(np.ones(4), typestr="|O"))
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'g'.*host regions only"):
            store.protect("g", FakeCudaArray(np.ones(4)), global_shape=[8], offset=[0])
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'h'.*host memory"):
            store.protect("h", FakeCudaArray(np.ones(4), dlpack_device=(1, 0)))
        broken = FakeCudaArray(np.ones(4))
        del broken._interface["typestr"]
        with pytest.raises(TypeError, match=r"'t'.*malformed __cuda_array_interface__"):
            store.protect("t", broken)
        with pytest.raises(TypeError, match=r"'s'.*malformed __cuda_array_interface__.*strides"):
            store.protect("s", FakeCudaArray(np.ones((2, 2)), strides=(8,)))
        with pytest.raises(TypeError, match=r"'q'.*__cuda_array_interface__ failed.*requires grad"):
            store.protect("q", FailingInterface())


def test_auto_capture_refuses_device_regions_and_fork_drains_them(dirs):
    with resurgo.Store("fork-auto", **device_kw(dirs, capture_mode="auto")) as store:
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'d'.*capture.mode = auto.*use capture.mode = fork"):
            store.protect("d", FakeCudaArray(np.ones(16)))
        store.protect("h", np.ones(16))  # host regions still go
        store.checkpoint(0)
        store.wait()
    # capture.mode = fork drains device regions to host memory, then forks.
    device = np.arange(16.0)
    with resurgo.Store("fork-fork", **device_kw(dirs, capture_mode="fork")) as store:
        store.protect("d", FakeCudaArray(device))
        store.checkpoint(0)
        device[:] = -1
        store.wait()
        assert store.restart(0) == 0
        assert bits_equal(device, np.arange(16.0))


def test_cuda_backend_without_a_usable_driver(dirs):
    """device.backend = "cuda" (the default) on a machine without a usable
    CUDA driver: protect of a device region raises StorageError saying why,
    and the store keeps working for host regions. Where a driver is usable,
    the fake array's host pointer is refused as host memory instead."""
    h = np.arange(10.0)
    expected = h.copy()
    with resurgo.Store("nocuda", **dirs.kw(device_capacity="4MiB")) as store:
        with pytest.raises((resurgo.StorageError, resurgo.InvalidArgumentError)) as info:
            store.protect("d", FakeCudaArray(np.ones(16)))
        if isinstance(info.value, resurgo.InvalidArgumentError):
            assert "host memory" in str(info.value)
        else:
            assert "CUDA" in str(info.value)
        store.protect("d", h)  # the label is still free
        store.checkpoint(0)
        store.wait()
        scribble(h)
        assert store.restart() == 0
        assert [r.kind for r in store.describe(0).regions] == ["host"]
    assert bits_equal(h, expected)


# -- real GPUs (skipped without one; marked gpu: scripts/gpu_check.sh runs them) -----


def _cupy():
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("CuPy sees no GPU")
    except cupy.cuda.runtime.CUDARuntimeError as error:
        pytest.skip(f"CuPy sees no GPU ({error})")
    return cupy


def _torch_cuda():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    return torch


def gpu_kw(dirs):
    return dirs.kw(device_capacity="64MiB")


@pytest.mark.gpu
def test_cupy_round_trip(dirs):
    cupy = _cupy()
    a = cupy.arange(1 << 18, dtype=cupy.float32).reshape(512, 512)
    expected = a.get()
    with resurgo.Store("cupy", **gpu_kw(dirs)) as store:
        store.protect("a", a)
        cupy.cuda.get_current_stream().synchronize()
        store.checkpoint(0)
        a *= -1
        cupy.cuda.get_current_stream().synchronize()
        store.wait(level=4)
        assert store.restart() == 0
        assert store.describe(0).regions[0].kind == "device"
    assert bits_equal(a.get(), expected)


@pytest.mark.gpu
def test_cupy_managed_memory(dirs):
    cupy = _cupy()
    previous = cupy.cuda.get_allocator()
    cupy.cuda.set_allocator(cupy.cuda.MemoryPool(cupy.cuda.malloc_managed).malloc)
    try:
        a = cupy.arange(4096, dtype=cupy.float64)
    finally:
        cupy.cuda.set_allocator(previous)
    expected = a.get()
    with resurgo.Store("cupymanaged", **gpu_kw(dirs)) as store:
        store.protect("m", a)
        cupy.cuda.get_current_stream().synchronize()
        store.checkpoint(0)
        store.wait()
        a.fill(0)
        cupy.cuda.get_current_stream().synchronize()
        assert store.restart() == 0
        assert store.describe(0).regions[0].kind == "managed"
    assert bits_equal(a.get(), expected)


@pytest.mark.gpu
def test_torch_cuda_tensor_round_trip(dirs):
    torch = _torch_cuda()
    t = torch.randn(300, 70, device="cuda")
    expected = t.cpu().numpy()
    with resurgo.Store("torch", **gpu_kw(dirs)) as store:
        store.protect("t", t)
        torch.cuda.synchronize()
        store.checkpoint(0)
        t.zero_()
        torch.cuda.synchronize()
        store.wait()
        assert store.restart() == 0
        (region,) = store.describe(0).regions
    assert bits_equal(t.cpu().numpy(), expected)
    assert (region.kind, region.dtype, region.shape) == ("device", "float32", (300, 70))


class DLPackOnly:
    """Hides __cuda_array_interface__: protect takes the DLPack path."""

    def __init__(self, tensor):
        self._tensor = tensor

    def __dlpack__(self, **kwargs):
        return self._tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._tensor.__dlpack_device__()


@pytest.mark.gpu
def test_torch_cuda_tensor_through_dlpack(dirs):
    torch = _torch_cuda()
    t = torch.randn(1000, device="cuda", dtype=torch.float64)
    b = torch.ones(64, device="cuda", dtype=torch.bfloat16)  # no __cuda_array_interface__ for bfloat16
    expected, expected_b = t.cpu().numpy(), b.float().cpu().numpy()
    with resurgo.Store("torchdl", **gpu_kw(dirs)) as store:
        store.protect("t", DLPackOnly(t))
        store.protect("b", b)
        torch.cuda.synchronize()
        store.checkpoint(0)
        t.fill_(7.0)
        b.zero_()
        torch.cuda.synchronize()
        store.wait()
        assert store.restart() == 0
        regions = {r.label: r for r in store.describe(0).regions}
    assert bits_equal(t.cpu().numpy(), expected)
    assert bits_equal(b.float().cpu().numpy(), expected_b)
    assert regions["t"].kind == "device" and regions["t"].dtype == "float64"
    assert regions["b"].kind == "device" and regions["b"].dtype == "bfloat16"
