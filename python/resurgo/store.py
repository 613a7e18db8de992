"""The Python face of a Resurgo store (typed layer over ``resurgo._core``)."""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Union

import numpy as np

from resurgo import _core
from resurgo.array_view import array_view, index_list
from resurgo.printable import printable
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
    "TouchModelInputs",
    "TouchEstimate",
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
_INT32_MIN = -(2**31)
_ALL = _core.ALL_VERSIONS
_LATEST = _core.LATEST

PathLike = Union[str, "os.PathLike[str]"]


# The records the store returns are the C++ API's own (include/resurgo/
# resurgo.hpp and device_stats.hpp), bound once by the extension: read-only,
# compared, hashed and printed field by field, with _asdict().
VersionInfo = _core.VersionInfo
LevelStats = _core.LevelStats
VersionStats = _core.VersionStats
RestartReport = _core.RestartReport
RegionDescription = _core.RegionDescription
VersionDescription = _core.VersionDescription
DeviceCacheStats = _core.DeviceCacheStats
TouchRates = _core.TouchRates
TouchDecision = _core.TouchDecision
TouchModelInputs = _core.TouchModelInputs
TouchEstimate = _core.TouchEstimate
StagingBufferStats = _core.StagingBufferStats
DeviceStats = _core.DeviceStats


class _CoreArgs(NamedTuple):
    """What _core.protect is given, in its order."""

    id: int
    kind: str
    pointer: int
    bytes: int
    label: str
    dtype: str
    shape: List[int]
    global_shape: List[int]
    offset: List[int]


@dataclass
class _Region:
    id: int
    label: str
    source: Any  # the object the caller passed (kept alive while protected)
    view: Any  # what pins the memory handed to the core (ArrayView.keep)
    # What _core.protect was given, so that restart(regions=) can protect it
    # again; None for a region protected another way (a ConvergentMatrix).
    core_args: Optional[_CoreArgs] = None


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


def _stream_handle(stream: Any, what: str) -> int:
    """The CUstream of a CuPy stream (.ptr), a PyTorch one (.cuda_stream) or
    an int handle."""
    for attribute in ("ptr", "cuda_stream"):
        if hasattr(stream, attribute):
            stream = getattr(stream, attribute)
            break
    if isinstance(stream, bool):
        raise TypeError(f"{what}: a stream must be a CUDA stream object or an int handle, not bool")
    try:
        handle = operator.index(stream)
    except TypeError:
        raise TypeError(f"{what}: a stream must be a CUDA stream object (.ptr, .cuda_stream) or an int handle, "
                        f"not {type(stream).__name__}") from None
    if not 0 <= handle < 2**64:
        raise InvalidArgumentError(f"{what}: stream handle {handle} is not a pointer")
    return handle


def _optional_version_arg(value: Any, what: str, sentinel: int) -> int:
    """None -> the C++ sentinel; an explicit negative number is refused here
    because it would alias that sentinel."""
    if value is None:
        return sentinel
    version = _version_arg(value, what)
    if version < 0:
        raise InvalidArgumentError(f"{what}: version must be >= 0 (got {version})")
    return version


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

    def _call(self, call: str) -> str:
        """How a failure of ``call`` begins, in every language (core/errors.h)."""
        return f"{call} on store '{self.name}'"

    # The per-call checks of a version. An int in range, the case of every
    # call an adjoint makes thousands of times, costs one type test and one
    # comparison; the message naming the call and the store (a property read
    # from the core and a format) is built only for a value that fails.
    def _version(self, value: Any, call: str) -> int:
        if type(value) is int and _INT32_MIN <= value <= _INT32_MAX:
            return value
        return _version_arg(value, self._call(call))

    def _optional_version(self, value: Any, call: str, sentinel: int) -> int:
        if value is None:
            return sentinel
        if type(value) is int and 0 <= value <= _INT32_MAX:
            return value
        return _optional_version_arg(value, self._call(call), sentinel)

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
            raise TypeError(f"{self._call('protect')}: label must be a str, not {type(label).__name__}")
        if not label:
            raise InvalidArgumentError(f"{self._call('protect')}: the label must be a non-empty str")
        if label in self._regions:
            raise InvalidArgumentError(f"{self._call('protect')}: label '{printable(label)}' is already protected")
        used = {region.id for region in self._regions.values()}
        region_id = next(i for i in range(len(used) + 1) if i not in used)
        block = index_list(global_shape, "protect: global_shape"), index_list(offset, "protect: offset")

        view = array_view(array, f"{self._call('protect')}: region '{printable(label)}'")
        if not view.writable:
            raise InvalidArgumentError(f"{self._call('protect')}: region '{printable(label)}' is read-only; restart needs writable memory")
        if view.kind != "host" and (block[0] or block[1]):
            raise InvalidArgumentError(
                f"{self._call('protect')}: region '{printable(label)}' is in CUDA {view.kind} memory; global_shape and offset "
                "(a block of a global array) are supported for host regions only"
            )
        core_args = _CoreArgs(region_id, view.kind, view.pointer, view.bytes, label, view.dtype, list(view.shape), *block)
        self._core.protect(*core_args)
        self._regions[label] = _Region(region_id, label, array, view.keep, core_args)

    def _repoint(self, label: str, array: Any, address: int) -> None:
        """Points the protected host region ``label`` at ``array``, a
        writable C-contiguous NumPy array at ``address`` of the region's
        dtype and shape, as unprotect and protect would (the region goes
        last in the table). For callers that checked the array themselves
        (ResurgoRevolveStorage, at a save or load of a moved array): protect's
        general route (array_view, a new id) costs several times the core's
        two calls, more than a copy of a 100 KiB array. Another array goes
        that route. When the core refuses the new memory, the region is
        left unprotected."""
        region = self._regions.get(label)
        args = None if region is None else region.core_args
        # The dtype against the array protected before (an ndarray's
        # dtype.name costs two microseconds).
        if (args is None or args.kind != "host" or type(region.source) is not np.ndarray
                or region.source.dtype != array.dtype or args.bytes != array.nbytes or args.shape != list(array.shape)):
            self.unprotect(label)
            self.protect(label, array)
            return
        core_args = _CoreArgs(args.id, args.kind, address, *args[3:])
        self._core.unprotect(region.id)
        del self._regions[label]
        self._core.protect(*core_args)
        region.source = region.view = array  # a NumPy array keeps its memory where it is
        region.core_args = core_args
        self._regions[label] = region

    def unprotect(self, label: str) -> None:
        region = self._regions.get(label)
        if region is None:
            raise NotFoundError(f"{self._call('unprotect')}: no region labelled '{printable(label)}' is protected")
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
        self._core.checkpoint(self._version(version, "checkpoint"))

    def wait(self, version: Optional[int] = None, level: int = 2) -> None:
        """Blocks until ``version`` (None: every pending one) is durable at
        ``level`` (1, 2 or 4; 3 for an MPI store with partner.scheme), or raises
        the background error that prevented it."""
        self._core.wait(self._optional_version(version, "wait", _ALL), operator.index(level))

    def latest(self) -> Optional[int]:
        """The version ``restart()`` restores, judged from headers, indexes and
        job manifests without reading the data, or None when the store holds
        no version; StateError when it holds versions but could restore none
        (Store::latest in resurgo.hpp says more)."""
        return self._core.latest()

    def restart(self, version: Optional[int] = None, *, regions: Optional[Iterable[str]] = None) -> int:
        """Restores ``version`` (None: the newest intact one, falling back past
        damaged versions) into the protected regions; returns the version.

        ``regions``: the labels of the protected arrays to restore. None (the
        default) restores every protected array, and the version must hold
        exactly those. With a list, only the listed arrays are written, each
        of which the version must hold; the version's other arrays are not
        read, and the protected arrays not listed keep their values. So a
        program that protects a new array restarts from a checkpoint written
        before it existed, and one that dropped an array from a checkpoint
        that still holds it::

            store.protect("u", u); store.protect("w", w)  # w is new
            store.restart(regions=["u"])                  # w keeps its initial values

        (C++: ``restart(version, RestartScope::kProtectedRegions)`` with the
        arrays not listed unprotected meanwhile.)

        The header and index of every version of the chain are checked
        before a byte is written, then each chunk as it is read into its
        region. A copy that fails is read again from another level (and
        None falls back to an older version): the arrays then hold that
        version whole. When restart raises, the message names the arrays it
        may have partly overwritten, with which version's data, and those it
        left unchanged ("regions 'u', 'v' may have been partly overwritten
        with version 7's data before the failure; 'w' is unchanged");
        device arrays change only once the whole version was read. A
        restart on another number of MPI ranks cannot tell how far it came:
        its errors say that any array may have been partly overwritten."""
        version_arg = self._optional_version(version, "restart", _LATEST)
        if regions is None:
            return self._core.restart(version_arg)
        wanted = self._restart_labels(regions)
        left_out = [r for label, r in self._regions.items() if label not in wanted]
        for region in left_out:
            if region.core_args is None:
                raise InvalidArgumentError(f"{self._call('restart')}: region '{region.label}' cannot be left out of regions (a "
                                           f"ConvergentMatrix is restored with its store); list it too")
        for region in left_out:
            self._core.unprotect(region.id)
        try:
            return self._core.restart(version_arg, protected_only=True)
        finally:
            for region in left_out:
                self._core.protect(*region.core_args)

    def _restart_labels(self, regions: Iterable[str]) -> set:
        """The labels of ``restart(regions=...)``, each a protected array's."""
        if isinstance(regions, (str, bytes)):
            raise TypeError(f"{self._call('restart')}: regions must be a list of labels, not a {type(regions).__name__} "
                            f"(regions=[{regions!r}])")
        labels = set()
        for label in regions:
            if not isinstance(label, str):
                raise TypeError(f"{self._call('restart')}: a label in regions must be a str, not {type(label).__name__}")
            if label not in self._regions:
                protected = ", ".join(f"'{known}'" for known in self._regions) or "none"
                raise InvalidArgumentError(f"{self._call('restart')}: region '{printable(label)}' in regions is not protected (protected: "
                                           f"{protected}); protect it first, or leave it out of regions")
            labels.add(label)
        if not labels:
            raise InvalidArgumentError(f"{self._call('restart')}: regions is empty; name the protected arrays to restore, or "
                                       "pass regions=None for all of them")
        return labels

    def prefetch(self, versions: Iterable[int]) -> None:
        """Announces the order in which ``versions`` will be restored (an
        adjoint's backward pass): background threads copy the next ones from
        disk into the memory level (``memory_capacity``) in that order, as
        room allows, so that :meth:`restart` of one reads memory. Versions not
        written yet are fetched once written. Replaces the previous order."""
        self._core.prefetch([self._version(v, "prefetch") for v in versions])

    def set_capture_streams(self, streams: Iterable[Any]) -> None:
        """The CUDA streams whose work later checkpoints wait for before they
        copy managed regions, instead of the whole context (docs/gpu.md):
        CuPy streams (``.ptr``), PyTorch streams (``.cuda_stream``) or raw
        ``CUstream`` handles as ints. The application then promises that only
        these streams write managed regions before a checkpoint. An empty
        iterable: the whole context again."""
        self._core.set_capture_streams([_stream_handle(s, self._call("set_capture_streams")) for s in streams])

    def discard(self, version: int) -> None:
        """The version was consumed: it leaves memory at once and its files are
        removed in the background. Raises NotFoundError for a version the store
        does not hold and StateError for one already discarded."""
        self._core.discard(self._version(version, "discard"))

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
        return self._core.describe(self._version(version, "describe"))

    def versions(self) -> List[VersionInfo]:
        return self._core.versions()

    def stats(self) -> List[VersionStats]:
        """One record per recent version: capture mode, blocking time and
        where it went, and per level of its route the time to durable, the
        bytes stored and the write time (None where not reached yet)."""
        return self._core.stats()

    def device_stats(self) -> DeviceStats:
        """The L0 device cache's counters and the staging buffer's: mapping
        progress, evictions and bypasses; touching, pinning, and the touch
        model's choice with its inputs (docs/gpu.md)."""
        return self._core.device_stats()

    @property
    def last_restart(self) -> RestartReport:
        """Report of the last restart: version, level, seconds, bytes, skipped."""
        return self._core.last_restart()
