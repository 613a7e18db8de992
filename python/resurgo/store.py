"""The Python face of a Resurgo store (typed layer over ``resurgo._core``)."""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from resurgo import _core
from resurgo.errors import ConfigError, InvalidArgumentError, NotFoundError

__all__ = [
    "Store",
    "VersionInfo",
    "VersionStats",
    "LevelStats",
    "DeviceStats",
    "DeviceCacheStats",
    "StagingBufferStats",
    "TouchDecision",
    "TouchRates",
    "RestartReport",
    "VersionDescription",
    "RegionDescription",
    "L0",
    "L1",
    "L2",
    "L3",
    "L4",
]

# The levels: L0 device cache, L1 host buffer, L2 node-local directory,
# L3 partner copy, L4 persistent directory.
L0, L1, L2, L3, L4 = 0, 1, 2, 3, 4

_INT32_MAX = 2**31 - 1
_ALL = _core.ALL_VERSIONS
_LATEST = _core.LATEST

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class VersionInfo:
    """One version of a store: where complete copies live and whether the
    pipeline still has work to do for it."""

    version: int
    levels: Tuple[int, ...]  # levels holding a complete copy, ascending
    pending: bool  # captured, not yet durable everywhere it goes


@dataclass(frozen=True)
class LevelStats:
    """One level of a version's route."""

    level: int
    seconds_to_level: Optional[float]  # from checkpoint() until durable there; None: not (yet)
    stored_bytes: int  # bytes of the version's file at this level
    write_seconds: float  # the write (or the copy from the level before) itself

    @property
    def throughput(self) -> Optional[float]:
        """Bytes stored per second of the write, or None before it."""
        return self.stored_bytes / self.write_seconds if self.write_seconds > 0 else None


@dataclass(frozen=True)
class VersionStats:
    """What one checkpoint cost, and where it went."""

    version: int
    capture: str  # "copy", "synchronous" (larger than the buffer), "fork" or "delta"
    bytes: int  # protected bytes (the state)
    blocking_seconds: float  # time checkpoint() blocked the caller, in all
    backpressure_seconds: float  # ... waiting for buffer space or the previous forked writer
    first_touch_seconds: float  # ... faulting in buffer pages the prefault had not reached
    copy_seconds: float  # ... copying into the buffer (copy) or forking (fork)
    copy_on_write_bytes: int  # fork: pages the application wrote while the child wrote
    base_version: Optional[int]  # the version a delta builds on; None for a full version
    captured_bytes: int  # bytes captured: the state, or a delta's blocks
    dirty_bytes: int  # delta mode: bytes in the pages the tracker reported written
    granularity_bytes: int  # delta mode: largest management block in force
    tracker: Optional[str]  # delta mode: "uffd", "soft-dirty", "mprotect" or "hash"
    levels: Tuple[LevelStats, ...]  # the version's route, in order
    error: Optional[str]  # background error of this version
    device_bytes: int = 0  # bytes of device regions
    # "l0": copied device to device into the L0 device cache; "host": copied
    # to host memory before checkpoint() returned; None: no device regions
    device_path: Optional[str] = None
    device_wait_seconds: float = 0.0  # part of copy_seconds waiting for L0 chunks to be mapped or flushed

    def at(self, level: int) -> Optional[LevelStats]:
        """The record of ``level``, or None when the version does not go there."""
        return next((entry for entry in self.levels if entry.level == level), None)

    def seconds_to(self, level: int) -> Optional[float]:
        """Seconds from checkpoint() until durable at ``level``, or None."""
        entry = self.at(level)
        return entry.seconds_to_level if entry is not None else None


@dataclass(frozen=True)
class RestartReport:
    """What the last restart restored, from where, and what it skipped."""

    version: Optional[int]  # None before any restart succeeded
    level: Optional[int]
    seconds: float
    bytes: int
    skipped: Tuple[str, ...]  # one line per damaged copy skipped or repaired, and per broken newer chain
    chain: Tuple[int, ...] = ()  # versions read, newest first, down to a full version
    bytes_from_device_cache: int = 0  # of `bytes`, device regions copied from the L0 device cache


@dataclass(frozen=True)
class RegionDescription:
    """A region as a version's region table records it."""

    id: int
    label: str
    kind: str  # "host", "device" (CUDA device memory) or "managed" (CUDA managed memory)
    bytes: int
    dtype: str  # NumPy's dtype name ("float32"); "" when not known
    shape: Tuple[int, ...]


@dataclass(frozen=True)
class VersionDescription:
    """What a committed version holds, read from its header (not its data)."""

    version: int
    regions: Tuple[RegionDescription, ...]
    metadata: bytes


@dataclass(frozen=True)
class DeviceCacheStats:
    """The L0 device cache: its mapping, the versions it holds, what it cost."""

    capacity: int  # reserved bytes
    mapped: int  # bytes usable now
    used: int  # bytes held by cached versions
    versions: int  # cached versions
    evicted: int  # versions evicted so far
    bypassed: int  # captures too large for the cache, copied to host memory at once
    growth_done: bool  # fully mapped, or stopped growing
    growth_stopped: Optional[str]  # why mapping stopped early
    mapping_seconds: float  # from open to the end of mapping (once growth_done)
    map_wait_seconds: float  # captures waiting for chunks to be mapped, in all
    flush_wait_seconds: float  # captures waiting for the oldest version to be flushed, in all


@dataclass(frozen=True)
class TouchRates:
    """Bandwidths in bytes per second; 0 where there was no sample."""

    touch_alone: float  # T: touching, no flush running
    touch_concurrent: float  # Tc: touching while a flush runs
    flush_touched: float  # Ft: a flush into touched pages, no touching meanwhile
    flush_untouched: float  # Fu: a flush into untouched pages
    flush_concurrent: float  # Fc: a flush into touched pages while touching runs


@dataclass(frozen=True)
class TouchDecision:
    """The touch model's latest choice, with its inputs and both estimates."""

    strategy: str  # "concurrent" or "sequential"
    measured: TouchRates  # the rates it was given
    rates: TouchRates  # completed: measured, or derived as ``derived`` says
    derived: str  # the rates derived, e.g. "Tc, Fc"; "" when all were measured
    inputs: Dict[str, Any]  # checkpoint_bytes, compute_seconds, untouched_bytes, ...
    horizon_iterations: int
    concurrent_flush_seconds: float
    sequential_flush_seconds: float
    description: str  # the line the log shows


@dataclass(frozen=True)
class StagingBufferStats:
    """The L1 host buffer device regions are staged in, which pins late."""

    capacity: int
    pin: str  # "lazy", "eager" or "off"
    touch: str  # "auto", "concurrent" or "sequential" (the setting)
    state: str  # "touching", "pinning", "pinned", "pin failed", ...
    strategy: str  # the touch strategy in force
    touched_bytes: int
    touch_seconds: float
    touch_stopped: Optional[str]  # why touching stopped early
    pinned: bool
    pin_pieces: int
    pin_seconds: float
    token_wait_seconds: float
    pin_failure: Optional[str]  # the driver's error when pinning failed
    flushes: int
    flushes_to_untouched: int
    bytes_flushed_to_untouched: int
    checkpoints: int
    measured: TouchRates
    decision: Optional[TouchDecision]


@dataclass(frozen=True)
class DeviceStats:
    """Store.device_stats(): each part is None until the store has it."""

    cache: Optional[DeviceCacheStats]  # with device.capacity > 0 and a usable backend
    staging: Optional[StagingBufferStats]  # from the first checkpoint of a device region


def _device_stats(record: Dict[str, Any]) -> DeviceStats:
    cache = record["cache"]
    if cache is not None:
        cache = DeviceCacheStats(**{**cache, "growth_stopped": cache["growth_stopped"] or None})
    staging = record["staging"]
    if staging is not None:
        decision = staging["decision"]
        if decision is not None:
            decision = TouchDecision(
                **{**decision, "measured": TouchRates(**decision["measured"]), "rates": TouchRates(**decision["rates"])}
            )
        staging = StagingBufferStats(
            **{
                **staging,
                "touch_stopped": staging["touch_stopped"] or None,
                "pin_failure": staging["pin_failure"] or None,
                "measured": TouchRates(**staging["measured"]),
                "decision": decision,
            }
        )
    return DeviceStats(cache=cache, staging=staging)


def _version_stats(record: Dict[str, Any]) -> VersionStats:
    levels = tuple(LevelStats(**entry) for entry in record.pop("levels"))
    return VersionStats(levels=levels, **{**record, "error": record["error"] or None})


@dataclass
class _Region:
    id: int
    label: str
    source: Any  # the object the caller passed (kept alive while protected)
    view: Any  # the buffer handed to the core (pins the memory)


def _override_key(name: str) -> str:
    section, sep, key = name.partition("_")
    if not sep or not section or not key:
        raise ConfigError(
            f"configuration override '{name}': expected <section>_<key> "
            "(for example local_path -> local.path)"
        )
    return f"{section}.{key}"


def _name_override_keyword(error: ConfigError, keywords: Dict[str, str]) -> ConfigError:
    """The core names the key it derived ('no.such_key'); the caller typed a
    keyword (no_such_key=...). Put that keyword in front of the message so
    that it can be found in the code.

    Overrides are applied after the file and the environment, whose messages
    start with "configuration file" / "environment variable": an error
    without those prefixes that quotes a derived key came from its keyword.
    """
    message = str(error)
    if not message.startswith(("configuration file", "environment variable")):
        for key, keyword in keywords.items():
            if f"'{key}'" in message:
                if message.startswith("unknown configuration key"):
                    message += " (as keywords, '_' replaces the first '.': local_path)"
                return ConfigError(f"Store({keyword}=...): {message}")
    return error


def _override_value(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise ConfigError(
        f"configuration override '{name}': unsupported value type {type(value).__name__}"
    )


def _version_arg(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{what}: version must be an int, not bool")
    try:
        version = operator.index(value)
    except TypeError:
        raise TypeError(f"{what}: version must be an int, not {type(value).__name__}") from None
    if version > _INT32_MAX or version < -_INT32_MAX - 1:
        raise InvalidArgumentError(f"{what}: version {version} is out of range (0..{_INT32_MAX})")
    return version


def _optional_version_arg(value: Any, what: str, sentinel: int) -> int:
    """None -> the C++ sentinel; an explicit negative number is refused here
    because it would alias that sentinel."""
    if value is None:
        return sentinel
    version = _version_arg(value, what)
    if version < 0:
        raise InvalidArgumentError(f"{what}: version must be >= 0 (got {version})")
    return version


def _index_list(values: Optional[Sequence[int]], what: str) -> List[int]:
    """A global_shape or offset as a list of ints ([] for None)."""
    if values is None:
        return []
    try:
        return [operator.index(v) for v in values]
    except TypeError:
        raise TypeError(f"protect: {what} must be a sequence of ints, not {values!r}") from None


_CONTIGUOUS_HINT = "numpy.ascontiguousarray, cupy.ascontiguousarray, tensor.contiguous()"


def _read_only(label: str, what: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"protect: region '{label}' is {what}; restart needs writable memory"
    )


def _not_contiguous(label: str, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"protect: region '{label}' {why}; pass a C-contiguous array "
        f"({_CONTIGUOUS_HINT}) and keep that array as the live state"
    )


def _check_plain_dtype(label: str, dtype: np.dtype) -> None:
    if dtype.hasobject:
        raise InvalidArgumentError(
            f"protect: region '{label}' holds Python objects (dtype {dtype}); "
            "only plain numeric/bytes data can be checkpointed"
        )


def _describe_numpy(label: str, array: np.ndarray) -> Tuple[Any, str, List[int]]:
    _check_plain_dtype(label, array.dtype)
    if not array.flags.c_contiguous:
        if array.ndim > 1 and array.flags.f_contiguous:
            raise _not_contiguous(label, "is Fortran-ordered (not C-contiguous)")
        raise _not_contiguous(label, "is a non-contiguous (strided) view")
    if not array.flags.writeable:
        raise _read_only(label, "read-only")
    # A flat byte view of the same memory: works for every dtype (including
    # ones DLPack cannot describe) and pins the buffer while protected.
    flat = array.reshape(-1).view(np.uint8)
    return flat, array.dtype.name, [int(n) for n in array.shape]


def _describe_buffer(label: str, obj: Any) -> Optional[Tuple[Any, str, List[int]]]:
    try:
        mv = memoryview(obj)
    except TypeError:
        return None
    with mv:
        if mv.readonly:
            raise _read_only(label, "a read-only buffer")
        if not mv.c_contiguous:
            raise InvalidArgumentError(
                f"protect: region '{label}' is not a C-contiguous buffer"
            )
        try:
            dtype = np.dtype(mv.format).name
        except (TypeError, ValueError):
            dtype = ""
        shape = [int(n) for n in (mv.shape or ())]
    flat = np.frombuffer(obj, dtype=np.uint8)
    return flat, dtype, shape


# DLPack device types (dlpack.h DLDeviceType) and the memory kind each is.
_DLPACK_KINDS = {1: "host", 3: "host", 2: "device", 13: "managed"}  # CPU, CUDA host, CUDA, CUDA managed


def _declared_kind(label: str, obj: Any) -> Optional[str]:
    """The memory kind ``obj.__dlpack_device__()`` declares; None without one."""
    method = getattr(obj, "__dlpack_device__", None)
    if method is None:
        return None
    device_type = int(method()[0])
    kind = _DLPACK_KINDS.get(device_type)
    if kind is None:
        raise InvalidArgumentError(
            f"protect: region '{label}' is on DLPack device type {device_type}, not in host, CUDA device "
            "or CUDA managed memory; copy it to one of those"
        )
    return kind


def _cuda_array_interface(label: str, obj: Any) -> Optional[Dict[str, Any]]:
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
            f"protect: region '{label}': its __cuda_array_interface__ failed ({type(exc).__name__}: {exc})"
        ) from exc
    if dlpack and isinstance(interface, dict) and str(interface.get("typestr", ""))[1:2] == "V":
        return None
    return interface


def _describe_cuda_array(label: str, interface: Dict[str, Any]) -> Tuple[int, int, str, List[int]]:
    """(pointer, bytes, dtype name, shape) of a CUDA array interface (any
    version: data, shape, typestr, strides and mask mean the same in 0 to 3).
    The stream (version 3) is not used: a region is read at each checkpoint,
    not now; the application finishes its writes before checkpoint()."""
    try:
        pointer, readonly = interface["data"]
        shape = [operator.index(n) for n in interface["shape"]]
        typestr = interface["typestr"]
        operator.index(interface["version"])
    except (KeyError, TypeError, ValueError) as exc:
        raise TypeError(
            f"protect: region '{label}': malformed __cuda_array_interface__ "
            f"(needs data=(pointer, read-only flag), shape, typestr and version): {exc!r}"
        ) from None
    if readonly:
        raise _read_only(label, "read-only (its __cuda_array_interface__ says so)")
    if interface.get("mask") is not None:
        raise InvalidArgumentError(f"protect: region '{label}' is a masked array; pass its data alone")
    try:
        dtype = np.dtype(typestr)
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"protect: region '{label}' has the element type {typestr!r}, which NumPy does not know"
        ) from None
    _check_plain_dtype(label, dtype)
    elements = 1
    for extent in shape:
        elements *= extent
    if elements == 0:
        raise InvalidArgumentError(
            f"protect: region '{label}' is empty (no elements); a region needs at least one byte"
        )
    strides = interface.get("strides")
    if strides is not None:
        strides = tuple(strides)
        if len(strides) != len(shape):
            raise TypeError(
                f"protect: region '{label}': malformed __cuda_array_interface__ "
                f"(strides {strides} for shape {tuple(shape)})"
            )
        expected = dtype.itemsize
        for extent, stride in zip(reversed(shape), reversed(strides)):
            if extent != 1 and stride != expected:
                raise _not_contiguous(label, f"is not C-contiguous (strides {strides} in bytes)")
            expected *= extent
    return operator.index(pointer), elements * dtype.itemsize, dtype.name, shape


def _fortran_handle(comm: Any) -> int:
    """The Fortran handle of an mpi4py communicator: the extension builds the
    C communicator from it, so it needs no mpi4py at build time."""
    py2f = getattr(comm, "py2f", None)
    if not callable(py2f):
        raise TypeError(
            f"Store(comm=...): expected an mpi4py communicator (mpi4py.MPI.COMM_WORLD), "
            f"not {type(comm).__name__}"
        )
    return operator.index(py2f())


class Store:
    """One named stream of checkpoints of this process, or of each rank of an
    MPI job.

    ``Store(name, config=None, comm=None, **overrides)``: ``config`` is the
    path of a TOML file (or None: defaults and RESURGO_<SECTION>_<KEY>
    environment variables); keyword overrides ``section_key=value`` set the
    key ``section.key`` (``local_path`` -> ``local.path``,
    ``pipeline_chunk_size`` -> ``pipeline.chunk_size``). ``None`` values are
    ignored. ``comm``: an mpi4py communicator; then every rank of it opens
    the store and calls checkpoint, wait, latest, restart and close together
    (docs/mpi.md). Use it as a context manager, or call :meth:`close` (for an
    MPI store, before MPI is finalized).
    """

    def __init__(
        self, name: str, config: Optional[PathLike] = None, comm: Any = None, **overrides: Any
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"Store name must be a str, not {type(name).__name__}")
        config_path = "" if config is None else os.fspath(config)
        mapped: Dict[str, str] = {}
        keywords: Dict[str, str] = {}  # configuration key -> keyword as the caller typed it
        for keyword, value in overrides.items():
            if value is None:
                continue
            key = _override_key(keyword)
            mapped[key] = _override_value(keyword, value)
            keywords[key] = keyword
        mpi_comm = None if comm is None else _fortran_handle(comm)
        self._regions: Dict[str, _Region] = {}
        self._closed = False
        try:
            self._core = _core.Store(name, config_path, mapped, mpi_comm)
        except ConfigError as error:
            raise _name_override_keyword(error, keywords) from None

    # -- identity ---------------------------------------------------------
    @property
    def name(self) -> str:
        return self._core.name

    @property
    def rank(self) -> int:
        return self._core.rank

    def __repr__(self) -> str:
        core = getattr(self, "_core", None)
        if core is None:
            return "<resurgo.Store (not opened)>"
        state = "closed" if self._closed else f"{len(self._regions)} regions"
        return f"<resurgo.Store {core.name!r} rank={core.rank} {state}>"

    # -- lifecycle --------------------------------------------------------
    def __enter__(self) -> "Store":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            # Do not hide the application's exception behind a close error.
            try:
                self.close()
            except Exception:  # noqa: BLE001
                pass

    def close(self) -> None:
        """Waits for pending work and stops the pipeline; raises the first
        background error not yet reported. Closing twice is a no-op."""
        if self._closed:
            return
        self._closed = True
        try:
            self._core.close()
        finally:
            self._regions.clear()

    # -- regions ----------------------------------------------------------
    def protect(
        self,
        label: str,
        array: Any,
        *,
        global_shape: Optional[Sequence[int]] = None,
        offset: Optional[Sequence[int]] = None,
    ) -> None:
        """Registers ``array`` under ``label``: a writable C-contiguous array
        in host memory (NumPy array, bytearray, array.array, a CPU DLPack
        producer), in CUDA device memory (an object with
        ``__cuda_array_interface__``, such as CuPy, PyTorch CUDA tensors,
        Numba, JAX; or a DLPack producer on a CUDA device), or in CUDA
        managed memory (the CUDA driver or ``__dlpack_device__`` says so).
        The memory is read at each checkpoint and overwritten by
        restart; the store keeps a reference to ``array`` until
        :meth:`unprotect`. Device regions need ``capture_mode`` copy or
        delta, and a GPU unless ``device_backend="host"`` (docs/gpu.md).

        ``global_shape`` and ``offset`` (MPI stores, host regions) declare
        ``array`` as this rank's block of a global array: the global array's
        shape and the element index of the block's first element in it, one
        entry per axis of ``array``, whose shape and dtype are the block's.
        Restart on another number of ranks reassembles such regions, and
        ``resurgo export`` writes them as one HDF5 dataset."""
        if not isinstance(label, str):
            raise TypeError(f"protect: label must be a str, not {type(label).__name__}")
        if not label:
            raise InvalidArgumentError("protect: the label must be a non-empty str")
        if label in self._regions:
            raise InvalidArgumentError(f"protect: label '{label}' is already protected")
        used = {region.id for region in self._regions.values()}
        region_id = next(i for i in range(len(used) + 1) if i not in used)
        block = _index_list(global_shape, "global_shape"), _index_list(offset, "offset")

        # What to hand the core: host memory as a buffer; CUDA memory by the
        # pointer of its CUDA array interface (no DLPack capsule consumed)
        # or, for a DLPack-only producer, as an array the core imports.
        kind, view = "host", array
        if isinstance(array, np.ndarray):
            view, dtype, shape = _describe_numpy(label, array)
            entry, args = self._core.protect, (view, label, dtype, shape, *block)
        elif (interface := _cuda_array_interface(label, array)) is not None:
            pointer, nbytes, dtype, shape = _describe_cuda_array(label, interface)
            # The driver knows managed memory even where the object does not
            # say so (Numba, a PyTorch managed allocator).
            if _core._cuda_pointer_is_managed(pointer):
                kind = "managed"
            else:
                kind = _declared_kind(label, array) or "device"
            if kind == "host":
                raise InvalidArgumentError(
                    f"protect: region '{label}' is host memory (its __dlpack_device__ says so) seen "
                    "through __cuda_array_interface__; protect a host (NumPy) view of it"
                )
            entry, args = getattr(self._core, f"protect_{kind}"), (pointer, nbytes, label, dtype, shape)
        else:
            described = _describe_buffer(label, array)
            if described is not None:
                view, dtype, shape_arg = described
                entry, args = self._core.protect, (view, label, dtype, shape_arg, *block)
            elif hasattr(array, "__dlpack__"):
                kind = _declared_kind(label, array) or "host"
                if kind == "host":
                    entry, args = self._core.protect, (array, label, "", None, *block)
                else:
                    entry, args = getattr(self._core, f"protect_{kind}"), (array, label)
            else:
                raise TypeError(
                    f"protect: region '{label}': {type(array).__name__} is not a buffer "
                    "(expected a NumPy array, bytearray or another writable buffer, an object with "
                    "__cuda_array_interface__, or a DLPack producer)"
                )
        if kind != "host" and (block[0] or block[1]):
            raise InvalidArgumentError(
                f"protect: region '{label}' is in CUDA {kind} memory; global_shape and offset "
                "(a block of a global array) are supported for host regions only"
            )
        try:
            entry(region_id, *args)
        except TypeError as exc:
            where = {"host": "CPU", "device": "CUDA device", "managed": "CUDA managed"}[kind]
            raise TypeError(
                f"protect: region '{label}': {type(array).__name__} is not a writable "
                f"C-contiguous {where} array ({exc})"
            ) from None
        self._regions[label] = _Region(region_id, label, array, view)

    def unprotect(self, label: str) -> None:
        region = self._regions.get(label)
        if region is None:
            raise NotFoundError(f"unprotect: no region labelled '{label}' is protected")
        self._core.unprotect(region.id)
        del self._regions[label]

    # -- metadata -----------------------------------------------------------
    @property
    def metadata(self) -> bytes:
        """User bytes stored with each checkpoint; after a restart, those of
        the version restored."""
        return self._core.metadata()

    @metadata.setter
    def metadata(self, value: Any) -> None:
        if isinstance(value, str):
            raise TypeError("metadata must be bytes-like, not str (encode it first)")
        try:
            data = memoryview(value).tobytes()
        except TypeError:
            raise TypeError(
                f"metadata must be bytes-like, not {type(value).__name__}"
            ) from None
        self._core.set_metadata(data)

    # -- checkpoint / restart ---------------------------------------------------
    def checkpoint(self, version: int) -> None:
        """Captures every protected region as ``version`` (>= 0, larger than
        every version held). Returns once the bytes are captured."""
        self._core.checkpoint(_version_arg(version, "checkpoint"))

    def wait(self, version: Optional[int] = None, level: int = 2) -> None:
        """Blocks until ``version`` (None: every pending one) is durable at
        ``level`` (1, 2 or 4; 3 for an MPI store with partner.scheme), or raises
        the background error that prevented it."""
        self._core.wait(_optional_version_arg(version, "wait", _ALL), operator.index(level))

    def latest(self) -> Optional[int]:
        """Newest version complete on some directory level, or None."""
        return self._core.latest()

    def restart(self, version: Optional[int] = None) -> int:
        """Restores ``version`` (None: the newest intact one, falling back past
        damaged versions) into the protected regions; returns the version."""
        return self._core.restart(_optional_version_arg(version, "restart", _LATEST))

    def prefetch(self, versions: Iterable[int]) -> None:
        """Announces the order in which ``versions`` will be restored (an
        adjoint's backward pass): background threads copy the next ones from
        disk into the memory level (``memory_capacity``) in that order, as
        room allows, so that :meth:`restart` of one reads memory. Versions not
        written yet are fetched once written. Replaces the previous order."""
        self._core.prefetch([_version_arg(v, "prefetch") for v in versions])

    def discard(self, version: int) -> None:
        """The version was consumed: it leaves memory at once and its files are
        removed in the background. Raises NotFoundError for a version the store
        does not hold and StateError for one already discarded."""
        self._core.discard(_version_arg(version, "discard"))

    def need_checkpoint(self) -> bool:
        """Whether a checkpoint is due by the ``interval_policy`` (``seconds``,
        ``overhead`` or ``young-daly``; docs/interval.md). Raises StateError
        when no policy is configured."""
        return self._core.need_checkpoint()

    @property
    def checkpoint_interval(self) -> Optional[float]:
        """The policy's current interval in seconds; None before the first
        checkpoint measured its cost (or with no policy)."""
        return self._core.checkpoint_interval()

    def describe(self, version: int) -> VersionDescription:
        """The regions (label, kind, bytes, dtype, shape) and metadata of the
        committed ``version``, read from the header of its fastest intact
        copy without reading its data. NotFoundError when no level holds it."""
        record = self._core.describe(_version_arg(version, "describe"))
        regions = tuple(
            RegionDescription(**{**region, "shape": tuple(region["shape"])}) for region in record["regions"]
        )
        return VersionDescription(version=record["version"], regions=regions, metadata=record["metadata"])

    def versions(self) -> List[VersionInfo]:
        return [
            VersionInfo(version=v, levels=tuple(levels), pending=bool(pending))
            for v, levels, pending in self._core.versions()
        ]

    def stats(self) -> List[VersionStats]:
        """One record per recent version: capture mode, blocking time and
        where it went, and per level of its route the time to durable, the
        bytes stored and the write time (None where not reached yet)."""
        return [_version_stats(record) for record in self._core.stats()]

    def device_stats(self) -> DeviceStats:
        """The L0 device cache's counters and the staging buffer's: mapping
        progress, evictions and bypasses; touching, pinning, and the touch
        model's choice with its inputs (docs/gpu.md)."""
        return _device_stats(self._core.device_stats())

    @property
    def last_restart(self) -> RestartReport:
        """Report of the last restart: version, level, seconds, bytes, skipped."""
        record = self._core.last_restart()
        return RestartReport(**{**record, "skipped": tuple(record["skipped"]), "chain": tuple(record["chain"])})
