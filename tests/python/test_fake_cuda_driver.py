"""Device regions through the Python API with device.backend = "cuda", against
the fake CUDA driver of tests/cpp/fake_cuda (an emulation of the driver API
on host memory, built with the C++ tests as build/cpp/.../libcuda.so.1).

Each test runs a child Python that loads the fake by its path before
importing resurgo: the fake's soname is libcuda.so.1, so resurgo's
dlopen("libcuda.so.1") gets it. A child keeps the driver out of this
process, where the other tests take host memory for device memory. The
child allocates device memory through the fake, shows it to the store by
__cuda_array_interface__ (as CuPy and PyTorch do), and checks the round
trip through L0 and through the bypass, the pointer-kind checks, the
statistics, and that nothing is leaked once the store is closed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAKE = Path(os.environ.get("RESURGO_FAKE_CUDA", REPO / "build/cpp/tests/cpp/fake_cuda/libcuda.so.1"))

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not FAKE.exists(), reason=f"the fake CUDA driver is not built ({FAKE}; `make build` builds it)"),
]

# The child's preamble: the fake's entry points through cuGetProcAddress, a
# device array type, and helpers to fill and read device memory.
PREAMBLE = textwrap.dedent(
    """
    import ctypes, sys
    import numpy as np
    fake = ctypes.CDLL(sys.argv[1])
    import resurgo

    c = ctypes
    _get = fake.cuGetProcAddress_v2
    _get.argtypes = [c.c_char_p, c.POINTER(c.c_void_p), c.c_int, c.c_uint64, c.POINTER(c.c_int)]

    def entry(name, *argtypes):
        pointer, status = c.c_void_p(), c.c_int()
        assert _get(name.encode(), c.byref(pointer), 12000, 0, c.byref(status)) == 0, name
        return c.CFUNCTYPE(c.c_int, *argtypes)(pointer.value)

    def check(result, call):
        assert result == 0, f"{call} returned CUresult {result}"

    cuInit = entry("cuInit", c.c_uint)
    retain = entry("cuDevicePrimaryCtxRetain", c.POINTER(c.c_void_p), c.c_int)
    release = entry("cuDevicePrimaryCtxRelease", c.c_int)
    set_current = entry("cuCtxSetCurrent", c.c_void_p)
    mem_alloc = entry("cuMemAlloc", c.POINTER(c.c_uint64), c.c_size_t)
    mem_free = entry("cuMemFree", c.c_uint64)
    to_device = entry("cuMemcpyHtoD", c.c_uint64, c.c_void_p, c.c_size_t)
    to_host = entry("cuMemcpyDtoH", c.c_void_p, c.c_uint64, c.c_size_t)
    synchronize = entry("cuStreamSynchronize", c.c_void_p)
    check(cuInit(0), "cuInit")
    context = c.c_void_p()
    check(retain(c.byref(context), 0), "cuDevicePrimaryCtxRetain")
    check(set_current(context), "cuCtxSetCurrent")

    class DeviceArray:
        \"\"\"Device memory of the fake driver, shown as CuPy shows its arrays.\"\"\"
        def __init__(self, shape, dtype):
            self.shape, self.dtype = tuple(shape), np.dtype(dtype)
            self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
            self.address = c.c_uint64()
            check(mem_alloc(c.byref(self.address), self.nbytes), "cuMemAlloc")
        @property
        def __cuda_array_interface__(self):
            return {"data": (self.address.value, False), "shape": self.shape,
                    "typestr": self.dtype.str, "strides": None, "version": 3}
        def set(self, values):
            # As CuPy's set(): a pageable copy returns before the bytes land,
            # and the application synchronises before checkpoint().
            values = np.ascontiguousarray(values, dtype=self.dtype)
            check(to_device(self.address.value, values.ctypes.data, self.nbytes), "cuMemcpyHtoD")
            check(synchronize(None), "cuStreamSynchronize")
        def get(self):
            out = np.empty(self.shape, self.dtype)
            check(to_host(out.ctypes.data, self.address.value, self.nbytes), "cuMemcpyDtoH")
            return out
        def free(self):
            check(mem_free(self.address.value), "cuMemFree")

    class Counters(c.Structure):
        _fields_ = [(name, c.c_uint64) for name in (
            "device_bytes", "device_allocations", "managed_allocations", "host_allocations",
            "physical_allocations", "reservations", "mappings", "registered_bytes",
            "registered_ranges", "streams", "events", "context_references",
            "largest_registration", "async_failures")]

    def leaks():
        \"\"\"The driver's live objects, after the test gave its own back.\"\"\"
        counters = Counters()
        fake.fake_cuda_counters(c.byref(counters))
        return {name: getattr(counters, name) for name, _ in Counters._fields_[:12] if getattr(counters, name)}

    kw = dict(local_path=sys.argv[2], persistent_every=0, device_backend="cuda",
              device_chunk="2MiB", log_level="warn")
    """
)


def run_child(tmp_path: Path, body: str) -> str:
    script = PREAMBLE + textwrap.dedent(body) + "\nprint('child ok')\n"
    result = subprocess.run(
        [sys.executable, "-c", script, str(FAKE), str(tmp_path / "l2")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and "child ok" in result.stdout, (
        f"child failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    )
    return result.stdout


def test_device_arrays_round_trip_through_l0_and_the_bypass(tmp_path):
    run_child(
        tmp_path,
        """
        rng = np.random.default_rng(7)
        for capacity in ("8MiB", "0"):
            field = DeviceArray((512, 300), "float32")
            host = np.arange(1000, dtype=np.int64)
            with resurgo.Store(f"fake-{capacity}", device_capacity=capacity, **kw) as store:
                store.protect("field", field)
                store.protect("host", host)
                saved = {}
                for version in range(3):
                    values = rng.standard_normal(field.shape).astype(np.float32)
                    field.set(values)
                    host += 1
                    saved[version] = (values, host.copy())
                    store.checkpoint(version)
                store.wait()
                stats = {record.version: record for record in store.stats()}
                expected_path = "l0" if capacity != "0" else "host"
                assert all(stats[v].device_path == expected_path for v in saved), stats
                for version in (1, 2):
                    field.set(np.zeros(field.shape, np.float32))
                    host[:] = 0
                    assert store.restart(version) == version
                    assert np.array_equal(field.get(), saved[version][0]), (capacity, version)
                    assert np.array_equal(host, saved[version][1])
                from_cache = store.last_restart.bytes_from_device_cache
                assert from_cache == (field.nbytes if capacity != "0" else 0), from_cache
                device = store.device_stats()
                if capacity != "0":
                    assert device.cache.mapped == 8 << 20 and device.cache.growth_stopped is None, device.cache
                else:
                    assert device.cache is None
                assert device.staging.flushes >= 3, device.staging
            field.free()
        release(0)
        assert leaks() == {}, leaks()
        """,
    )


def test_pointers_of_the_other_kind_are_refused(tmp_path):
    run_child(
        tmp_path,
        """
        class HostAsDevice:
            def __init__(self, array):
                self.array = array
                self.__cuda_array_interface__ = {"data": (array.ctypes.data, False), "shape": array.shape,
                                                 "typestr": array.dtype.str, "strides": None, "version": 3}
        device = DeviceArray((1024,), "float64")
        with resurgo.Store("kinds", device_capacity="4MiB", **kw) as store:
            try:
                store.protect("host_as_device", HostAsDevice(np.zeros(1024)))
                raise AssertionError("host memory behind __cuda_array_interface__ was accepted")
            except resurgo.InvalidArgumentError as error:
                assert "host" in str(error), error
            store.protect("device", device)
            store.checkpoint(0)
        device.free()
        release(0)
        assert leaks() == {}, leaks()
        """,
    )
