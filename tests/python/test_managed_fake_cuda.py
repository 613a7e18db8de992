"""CUDA managed memory through the Python API with device.backend = "cuda",
against the fake CUDA driver (tests/cpp/fake_cuda; docs/gpu.md, "Managed
memory"). As in test_fake_cuda_driver.py, each test runs a child Python
that loads the fake before resurgo. The child allocates managed memory with
cuMemAllocManaged and shows it as CuPy shows a managed array (a plain
__cuda_array_interface__), plays a GPU kernel that writes to it on a stream
of its own (fake_cuda_kernel_write: the bytes reach host loads only after a
synchronisation), and checks that the store takes the region as managed,
synchronises before copying it, and refuses host memory that claims to be
managed.
"""

from __future__ import annotations

import textwrap

import pytest
from test_fake_cuda_driver import FAKE, run_child

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not FAKE.exists(), reason=f"the fake CUDA driver is not built ({FAKE}; `make build` builds it)"),
]

MANAGED = textwrap.dedent(
    """
    alloc_managed = entry("cuMemAllocManaged", c.POINTER(c.c_uint64), c.c_size_t, c.c_uint)
    stream_create = entry("cuStreamCreate", c.POINTER(c.c_void_p), c.c_uint)
    stream_destroy = entry("cuStreamDestroy", c.c_void_p)
    kernel_write = fake.fake_cuda_kernel_write
    kernel_write.argtypes = [c.c_void_p, c.c_void_p, c.c_void_p, c.c_size_t]
    stream = c.c_void_p()
    check(stream_create(c.byref(stream), 1), "cuStreamCreate")  # CU_STREAM_NON_BLOCKING

    class ManagedArray:
        \"\"\"cuMemAllocManaged memory, shown as CuPy shows a managed array.\"\"\"
        def __init__(self, shape, dtype):
            self.shape, self.dtype = tuple(shape), np.dtype(dtype)
            self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
            self.address = c.c_uint64()
            check(alloc_managed(c.byref(self.address), self.nbytes, 1), "cuMemAllocManaged")  # ATTACH_GLOBAL
        @property
        def __cuda_array_interface__(self):
            return {"data": (self.address.value, False), "shape": self.shape,
                    "typestr": self.dtype.str, "strides": None, "version": 3}
        def host_view(self):
            \"\"\"What the host's loads see now.\"\"\"
            buffer = (c.c_char * self.nbytes).from_address(self.address.value)
            return np.frombuffer(buffer, dtype=self.dtype).reshape(self.shape)
        def launch_write(self, values):
            \"\"\"A kernel on `stream` writes `values`: not visible before a synchronisation.\"\"\"
            values = np.ascontiguousarray(values, dtype=self.dtype)
            check(kernel_write(stream, self.address.value, values.ctypes.data, self.nbytes), "fake_cuda_kernel_write")
        def free(self):
            check(mem_free(self.address.value), "cuMemFree")
    """
)


def run_managed_child(tmp_path, body: str) -> str:
    return run_child(tmp_path, MANAGED + textwrap.dedent(body))


def test_managed_arrays_are_taken_after_the_kernels_writes(tmp_path):
    run_managed_child(
        tmp_path,
        """
        rng = np.random.default_rng(3)
        for capacity in ("8MiB", "0"):
            field = ManagedArray((300, 200), "float32")
            field.host_view()[:] = 0
            with resurgo.Store(f"managed-{capacity}", device_capacity=capacity, **kw) as store:
                store.protect("field", field)
                written = rng.standard_normal(field.shape).astype(np.float32)
                field.launch_write(written)
                assert not np.array_equal(field.host_view(), written), "the fake showed the write unsynchronised"
                store.checkpoint(0)
                store.wait()
                (region,) = store.describe(0).regions
                assert region.kind == "managed", region
                field.host_view()[:] = 0
                assert store.restart(0) == 0
                assert np.array_equal(field.host_view(), written), (capacity, "the version missed the kernel's write")
            field.free()
        check(stream_destroy(stream), "cuStreamDestroy")
        release(0)
        assert leaks() == {}, leaks()
        """,
    )


def test_host_memory_claiming_to_be_managed_is_refused(tmp_path):
    run_managed_child(
        tmp_path,
        """
        class HostAsManaged:
            def __init__(self, array):
                self.array = array
                self.__cuda_array_interface__ = {"data": (array.ctypes.data, False), "shape": array.shape,
                                                 "typestr": array.dtype.str, "strides": None, "version": 3}
            def __dlpack_device__(self):
                return (13, 0)  # kDLCUDAManaged
        with resurgo.Store("claims", device_capacity="0", **kw) as store:
            try:
                store.protect("grid", HostAsManaged(np.zeros(256)))
                raise AssertionError("host memory declared managed was accepted")
            except resurgo.InvalidArgumentError as error:
                assert "'grid'" in str(error) and "its pointer is host memory" in str(error), error
        check(stream_destroy(stream), "cuStreamDestroy")
        release(0)
        assert leaks() == {}, leaks()
        """,
    )


def test_capture_streams_named_from_python_are_synchronised_instead_of_the_context(tmp_path):
    run_managed_child(
        tmp_path,
        """
        class StreamLike:
            \"\"\"A CuPy stream's face: the CUstream in .ptr.\"\"\"
            def __init__(self, handle):
                self.ptr = handle
        other = c.c_void_p()
        check(stream_create(c.byref(other), 1), "cuStreamCreate")
        named, unnamed = ManagedArray((1024,), "float32"), ManagedArray((1024,), "float32")
        named.host_view()[:] = 0
        unnamed.host_view()[:] = 0
        with resurgo.Store("managed-streams", device_capacity="0", **kw) as store:
            store.protect("named", named)
            store.protect("unnamed", unnamed)
            store.set_capture_streams([StreamLike(stream.value)])
            named.launch_write(np.ones(1024, np.float32))
            values = np.full(1024, 2, np.float32)
            check(kernel_write(other, unnamed.address.value, values.ctypes.data, unnamed.nbytes), "fake_cuda_kernel_write")
            store.checkpoint(0)
            store.wait()
            named.host_view()[:] = 0
            assert store.restart(0) == 0
            assert np.all(named.host_view() == 1), "the named stream's write is missing"
            assert np.all(unnamed.host_view() == 0), "a stream not named was synchronised"
            for bad in ("stream", -1):
                try:
                    store.set_capture_streams([bad])
                except (TypeError, resurgo.InvalidArgumentError):
                    pass
                else:
                    raise AssertionError(f"set_capture_streams accepted {bad!r}")
            store.set_capture_streams([])
        check(stream_destroy(other), "cuStreamDestroy")
        named.free()
        unnamed.free()
        check(stream_destroy(stream), "cuStreamDestroy")
        release(0)
        assert leaks() == {}, leaks()
        """,
    )
