"""One path from any array Resurgo accepts to what the core registers: where
its bytes lie, how many, what they are and in which memory.

Accepted: NumPy arrays; other buffers (bytearray, array.array, memoryview);
objects with ``__cuda_array_interface__`` (CuPy, PyTorch CUDA tensors, Numba,
JAX); DLPack producers (``__dlpack__``, on the CPU or a CUDA device).
:meth:`resurgo.Store.protect` and :meth:`resurgo.auto.Runtime.dataset` use
it, so that an array is refused with the same message whichever call it is
given to, naming the region.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from resurgo import _core
from resurgo.errors import InvalidArgumentError

__all__ = ["ArrayView", "array_view", "index_list"]


def index_list(values: Optional[Sequence[int]], what: str) -> List[int]:
    """A global_shape or offset (of protect or dataset) as a list of ints ([] for
    None); TypeError naming ``what`` otherwise."""
    if values is None:
        return []
    try:
        return [operator.index(v) for v in values]
    except TypeError:
        raise TypeError(f"{what} must be a sequence of ints, not {values!r}") from None

# DLPack device types (dlpack.h DLDeviceType) and the memory kind each is.
_DLPACK_KINDS = {1: "host", 3: "host", 2: "device", 13: "managed"}  # CPU, CUDA host, CUDA, CUDA managed

_CONTIGUOUS_HINT = "numpy.ascontiguousarray, cupy.ascontiguousarray, tensor.contiguous()"


@dataclass(frozen=True)
class ArrayView:
    """An array as the core takes it."""

    kind: str  # "host", "device" (CUDA device memory) or "managed" (CUDA managed memory)
    pointer: int  # address of the first byte
    bytes: int
    dtype: str  # NumPy's dtype name ("float32", "bfloat16" from DLPack); "" when not known
    shape: Tuple[int, ...]
    writable: bool
    keep: Any  # holds the memory in place while registered: a buffer export, or the object itself


def array_view(obj: Any, name: str) -> ArrayView:
    """The memory behind ``obj``, which must be C-contiguous, of plain
    (not Python object) elements and at least one byte; ``name`` says what
    it is in messages ("protect: region 'u'", "dataset 'u'"). Raises
    InvalidArgumentError for an array it refuses, TypeError for an object
    that is no array. Whether the memory is writable is the caller's
    question (``ArrayView.writable``)."""
    if isinstance(obj, np.ndarray):
        return _numpy_view(obj, name)
    interface = _cuda_array_interface(obj, name)
    if interface is not None:
        return _cuda_interface_view(obj, interface, name)
    try:
        buffer = memoryview(obj)
    except TypeError:
        buffer = None
    if buffer is not None:
        return _buffer_view(obj, buffer, name)
    if hasattr(obj, "__dlpack__"):
        return _dlpack_view(obj, name)
    raise TypeError(
        f"{name}: {type(obj).__name__} is not an array (expected a NumPy array, bytearray or another "
        "buffer, an object with __cuda_array_interface__, or a DLPack producer)"
    )


def _numpy_view(array: np.ndarray, name: str) -> ArrayView:
    _check_plain_dtype(name, array.dtype)
    _check_layout(name, array.shape, array.strides, array.dtype.itemsize, array.nbytes)
    # A flat byte view of the same memory: works for every dtype (including
    # ones DLPack cannot describe) and pins the buffer while registered.
    flat = array.reshape(-1).view(np.uint8)
    return ArrayView("host", _address(flat), array.nbytes, array.dtype.name, tuple(array.shape),
                     bool(array.flags.writeable), flat)


def _buffer_view(obj: Any, buffer: memoryview, name: str) -> ArrayView:
    with buffer:
        try:
            dtype = np.dtype(buffer.format)
        except (TypeError, ValueError):
            dtype = None
        if dtype is not None:
            _check_plain_dtype(name, dtype)
        shape = tuple(int(n) for n in (buffer.shape or ()))
        _check_layout(name, shape, buffer.strides or (), buffer.itemsize, buffer.nbytes)
        writable = not buffer.readonly
    # The export pins the memory: a bytearray cannot be resized under it.
    flat = np.frombuffer(obj, dtype=np.uint8)
    return ArrayView("host", _address(flat), flat.nbytes, "" if dtype is None else dtype.name, shape, writable, flat)


def _cuda_array_interface(obj: Any, name: str) -> Optional[Dict[str, Any]]:
    """``obj.__cuda_array_interface__``, or None when it has none (a CPU
    torch tensor raises AttributeError) or when DLPack describes the array
    better: an element type the interface cannot name (PyTorch bfloat16 is
    typestr '<V2', or a KeyError in older versions)."""
    dlpack = hasattr(obj, "__dlpack__")
    try:
        interface = obj.__cuda_array_interface__
    except AttributeError:
        return None
    except Exception as exc:  # noqa: BLE001  (PyTorch: RuntimeError for a tensor that requires grad)
        if dlpack and isinstance(exc, (TypeError, KeyError)):
            return None
        raise TypeError(
            f"{name}: its __cuda_array_interface__ failed ({type(exc).__name__}: {exc})"
        ) from exc
    if dlpack and isinstance(interface, dict) and str(interface.get("typestr", ""))[1:2] == "V":
        return None
    return interface


def _cuda_interface_view(obj: Any, interface: Dict[str, Any], name: str) -> ArrayView:
    """A CUDA array interface of any version (data, shape, typestr, strides
    and mask mean the same in 0 to 3). The stream (version 3) is not used: a
    region is read at each checkpoint, not now; the application finishes its
    writes before checkpoint()."""
    try:
        pointer, readonly = interface["data"]
        shape = tuple(operator.index(n) for n in interface["shape"])
        typestr = interface["typestr"]
        operator.index(interface["version"])
    except (KeyError, TypeError, ValueError) as exc:
        raise TypeError(
            f"{name}: malformed __cuda_array_interface__ "
            f"(needs data=(pointer, read-only flag), shape, typestr and version): {exc!r}"
        ) from None
    if interface.get("mask") is not None:
        raise InvalidArgumentError(f"{name} is a masked array; pass its data alone")
    try:
        dtype = np.dtype(typestr)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{name} has the element type {typestr!r}, which NumPy does not know") from None
    _check_plain_dtype(name, dtype)
    strides = interface.get("strides")
    if strides is not None and len(strides) != len(shape):
        raise TypeError(f"{name}: malformed __cuda_array_interface__ (strides {tuple(strides)} for shape {shape})")
    nbytes = math.prod(shape) * dtype.itemsize
    _check_layout(name, shape, strides, dtype.itemsize, nbytes)
    pointer = operator.index(pointer)
    # The driver knows managed memory even where the object does not say so
    # (Numba, a PyTorch managed allocator).
    kind = "managed" if _core.cuda_memory_kind(pointer) == "managed" else _declared_kind(obj, name) or "device"
    if kind == "host":
        raise InvalidArgumentError(
            f"{name} is host memory (its __dlpack_device__ says so) seen through __cuda_array_interface__; "
            "pass a host (NumPy) view of it"
        )
    return ArrayView(kind, pointer, nbytes, dtype.name, shape, not readonly, obj)


def _dlpack_view(obj: Any, name: str) -> ArrayView:
    declared = _declared_kind(obj, name) or "host"
    try:
        pointer, device_type, dtype, bits, shape, strides = _core.dlpack_tensor(obj)
    except TypeError as exc:
        where = {"host": "CPU", "device": "CUDA device", "managed": "CUDA managed"}[declared]
        raise TypeError(
            f"{name}: {type(obj).__name__} is not a writable C-contiguous {where} array ({exc})"
        ) from None
    if _DLPACK_KINDS.get(device_type) != declared:
        raise InvalidArgumentError(
            f"{name} is an array on DLPack device type {device_type}, not in {declared} memory "
            "(host: CPU 1 or CUDA host 3; device: CUDA 2; managed: CUDA managed 13)"
        )
    if bits == 0 or bits % 8 != 0:
        raise InvalidArgumentError(f"{name} has an element type that is not a whole number of bytes")
    itemsize = bits // 8
    nbytes = math.prod(shape) * itemsize
    _check_layout(name, shape, [stride * itemsize for stride in strides], itemsize, nbytes)
    # nanobind imports only writable tensors: a read-only one is a TypeError above.
    return ArrayView(declared, pointer, nbytes, dtype, tuple(shape), True, obj)


def _declared_kind(obj: Any, name: str) -> Optional[str]:
    """The memory kind ``obj.__dlpack_device__()`` declares; None without one."""
    method = getattr(obj, "__dlpack_device__", None)
    if method is None:
        return None
    device_type = int(method()[0])
    kind = _DLPACK_KINDS.get(device_type)
    if kind is None:
        raise InvalidArgumentError(
            f"{name} is on DLPack device type {device_type}, not in host, CUDA device "
            "or CUDA managed memory; copy it to one of those"
        )
    return kind


def _check_plain_dtype(name: str, dtype: np.dtype) -> None:
    if dtype.hasobject:
        raise InvalidArgumentError(
            f"{name} holds Python objects (dtype {dtype}); only plain numeric/bytes data can be checkpointed"
        )


def _check_layout(name: str, shape: Sequence[int], strides: Optional[Sequence[int]], itemsize: int,
                  nbytes: int) -> None:
    """At least one byte, C-contiguous: ``strides`` in bytes (None: the
    producer says C-contiguous); an axis of extent 1 may have any stride."""
    if nbytes == 0:
        raise InvalidArgumentError(f"{name} is empty (no elements); a region needs at least one byte")
    if strides is None or _dense(reversed(shape), reversed(strides), itemsize):
        return
    if len(shape) > 1 and _dense(shape, strides, itemsize):
        why = "is Fortran-ordered (not C-contiguous)"
    else:
        why = f"is not C-contiguous (a strided view: strides {tuple(strides)} in bytes)"
    raise InvalidArgumentError(f"{name} {why}; pass a C-contiguous array ({_CONTIGUOUS_HINT}) and keep that "
                               "array as the live state")


def _dense(extents: Iterable[int], strides: Iterable[int], itemsize: int) -> bool:
    """Whether the axes, innermost first, step through one dense block."""
    expected = itemsize
    for extent, stride in zip(extents, strides):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


def _address(flat: np.ndarray) -> int:
    return flat.__array_interface__["data"][0]
