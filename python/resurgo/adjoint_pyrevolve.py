"""pyrevolve with its checkpoints kept in Resurgo.

pyrevolve's ``Revolver`` keeps its checkpoint slots in one preallocated NumPy
array. :class:`ResurgoRevolver` is the same Revolver (same Revolve schedule,
same calls to the user's Operators and Checkpoint) whose slots are versions
of a Resurgo store: in memory only by default; with ``disk_path``, files in
that node-local directory whose restores pyrevolve's schedule announces in
advance, so that background threads bring them back into memory before the
backward pass asks for them. A Devito user changes one line:

    from pyrevolve import Revolver                                       # before
    from resurgo.adjoint_pyrevolve import ResurgoRevolver as Revolver    # after

and may add Resurgo settings to the call that builds it, e.g.
``Revolver(cp, wrap_fw, wrap_rev, n_checkpoints, nt, disk_path="/local/scratch")``.
The store closes when ``apply_reverse`` returns (a Revolver runs once).
``MultiLevelRevolver`` users put :class:`ResurgoRevolveStorage` objects in its
storage list instead (no prefetch there: H-Revolve's stack calls are not
announced ahead).

Checkpoints on the device (CuPy arrays, PyTorch CUDA tensors: anything with
``__cuda_array_interface__``) pass through a device staging array the
caller allocates, with the call that waits for the copies into it:

    Revolver(cp, fwd_op, rev_op, n_checkpoints, nt,
             device_staging=cupy.empty(cp.size, cp.dtype),
             synchronize=cupy.cuda.get_current_stream().synchronize)

The store then keeps an L0 device cache (four checkpoints by default,
``device_capacity`` sets it), and the restores the schedule announces are
staged into it ahead of the backward pass, from memory or from
``disk_path`` (docs/adjoint.md, "Backward pass on the device").
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import partial
from typing import Any, Callable, ContextManager, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
from pyrevolve.pyrevolve import SingleLevelRevolver
from pyrevolve.schedulers import Action
from pyrevolve.storage import Storage

from resurgo.adjoint import LOAD, SAVE, VersionMap, _on_device, disk_store, memory_store
from resurgo.errors import InvalidArgumentError
from resurgo.store import Store

__all__ = ["ResurgoRevolveStorage", "ResurgoRevolver", "slot_uses"]


class ResurgoRevolveStorage(Storage):
    """A pyrevolve storage whose ``n_ckp`` slots are versions of one Resurgo
    store (memory-only, or files in ``disk_path`` prefetched into memory).

    NumPy checkpoints: the store has one region per checkpoint array
    (``checkpoint.0``, ``checkpoint.1``, ...), pointed before each save and
    load at the array pyrevolve hands over, so that the store copies straight
    from and into it, once, as NumpyStorage does. pyrevolve hands other
    arrays at other steps (Devito checkpoints views into its time buffers,
    whose levels rotate); a region is protected again only when its array
    lies elsewhere in memory and holds at least 512 KiB (a smaller one is
    copied into the region's staging array instead). An array the store cannot take as it is (not C-contiguous, of
    another dtype than ``dtype``, which NumpyStorage casts to, or read-only)
    passes through a staging array of its region, with the same bytes in the
    version. The store opens at the first save, from the arrays handed over;
    a slot restores only into arrays of the sizes it saved.

    For checkpoints on the device, ``device_staging`` is an array on the
    device (``size_ckp`` entries of ``dtype``) through which every checkpoint
    passes, and ``synchronize`` waits for the copies into it
    (``cupy.cuda.get_current_stream().synchronize``,
    ``torch.cuda.synchronize``). The store then opens at once, with an L0
    device cache, and ``expect`` stages the versions to be loaded into it,
    from memory too."""

    def __init__(
        self,
        size_ckp: int,
        n_ckp: int,
        dtype: Any,
        profiler: Any = None,
        *,
        name: str = "pyrevolve",
        disk_path: Optional[str] = None,
        ram_capacity: Any = None,
        prefetch: bool = True,
        prefetch_capacity: Any = None,
        wd: float = 0,
        rd: float = 0,
        device_staging: Any = None,
        synchronize: Optional[Callable[[], Any]] = None,
        **overrides: Any,
    ) -> None:
        super().__init__(size_ckp, n_ckp, dtype, profiler, wd=wd, rd=rd, name="ResurgoStorage")
        self._label = f"pyrevolve storage '{name}'"
        self._on_device = device_staging is not None
        self._size = size_ckp
        if disk_path is None:
            self._open_store = partial(memory_store, name, capacity=ram_capacity, **overrides)
        else:
            self._open_store = partial(disk_store, name, path=disk_path, prefetch_capacity=prefetch_capacity, **overrides)
        # Memory versions are in memory already, but those on the device
        # still gain from being staged into L0.
        self._prefetch = prefetch and (disk_path is not None or self._on_device)
        self._expected: Optional[List[Tuple[str, int]]] = None  # announced before the store opened
        self._slots: Optional[VersionMap] = None
        self._closed = False
        if self._on_device:
            _check_device_staging(self._label, device_staging, size_ckp, dtype, synchronize)
            self._staging, self._synchronize = device_staging, synchronize
            self._open({"checkpoint": device_staging})
        else:
            self._regions = _ArrayRegions(self._label, size_ckp, np.dtype(dtype))
            self._saved_sizes: Dict[int, Tuple[int, ...]] = {}  # slot -> entries of each array it holds

    @property
    def store(self) -> Optional[Store]:
        """The Resurgo store (for its statistics); None before the first save
        of NumPy checkpoints, and once closed."""
        return self._slots.store if self._slots is not None else None

    @property
    def on_device(self) -> bool:
        """Whether the checkpoints pass through a device staging array."""
        return self._on_device

    def save(self, key: int, data_pointers: Sequence[Any]) -> None:
        with self._timer("copy_save"):
            if self._on_device:
                self._save_through_device_staging(key, data_pointers)
                return
            aim = self._regions.aim(data_pointers, "save")
            slots = self._point(aim)
            for staging, array in aim.staged:
                np.copyto(staging, array)  # NumpyStorage's casting
            slots.save(key)
            self._saved_sizes[key] = aim.sizes

    def load(self, key: int, locations: Sequence[Any]) -> None:
        with self._timer("copy_load"):
            if self._on_device:
                self._load_through_device_staging(key, locations)
                return
            aim = self._regions.aim(locations, "load")
            saved = self._saved_sizes.get(key)
            if saved is not None and saved != aim.sizes:
                raise InvalidArgumentError(
                    f"load on {self._label}: slot {key} holds checkpoint arrays of {list(saved)} entries, but the arrays "
                    f"to restore into have {list(aim.sizes)}; a slot restores only into arrays of the sizes it saved "
                    "(Checkpoint.get_data_location must return arrays like get_data's)"
                )
            self._point(aim).load(key, delete=False)
            for staging, array in aim.staged:
                np.copyto(array, staging)

    def expect(self, uses: Iterable[Tuple[str, int]]) -> None:
        """The future ``(SAVE | LOAD, slot)`` uses, in order: the versions the
        loads will restore go to the store's prefetch (disk stores, and any
        store of device checkpoints: into its L0 device cache); uses
        announced before the store opens go to it when it opens."""
        if not self._prefetch:
            return
        if self._slots is None and not self._closed:
            self._expected = list(uses)
            return
        slots = self._open_slots()
        slots.store.prefetch(slots.future_loads(uses))

    def close(self) -> None:
        """Discards the versions held and closes the store; twice is a no-op."""
        slots, self._slots, self._closed = self._slots, None, True
        if slots is not None:
            try:
                slots.discard_all()
            finally:
                slots.store.close()

    def _open(self, state: Dict[str, Any]) -> VersionMap:
        self._slots = VersionMap(self._open_store(state=state), self._label, "slot", "pyrevolve restores only slots it saved")
        expected, self._expected = self._expected, None
        if expected:
            self.expect(expected)
        return self._slots

    def _open_slots(self) -> VersionMap:
        if self._slots is None:
            raise InvalidArgumentError(f"{self._label} is closed")
        return self._slots

    def _point(self, aim: "_Aim") -> VersionMap:
        """The slots, their store's regions pointed at the arrays of ``aim``
        (the store opens with them at the first call)."""
        if self._closed:
            raise InvalidArgumentError(f"{self._label} is closed")
        if self._slots is None:
            slots = self._open({region.label: memory for region, memory, _, _ in aim.moves})
            self._regions.pointed(aim)
            return slots
        if aim.moves or aim.dropped:
            self._regions.protect(self._slots.store, aim)
        return self._slots

    def _save_through_device_staging(self, key: int, arrays: Sequence[Any]) -> None:
        for part, array in zip(self._parts(arrays, "save"), arrays):
            part[...] = array  # CuPy and PyTorch alike, on the current stream
        self._synchronize()  # the store copies the staging array on a stream of its own
        self._open_slots().save(key)

    def _load_through_device_staging(self, key: int, arrays: Sequence[Any]) -> None:
        self._open_slots().load(key, delete=False)
        for part, array in zip(self._parts(arrays, "load"), arrays):
            array[...] = part

    def _parts(self, arrays: Sequence[Any], what: str) -> List[Any]:
        """The device staging array's parts that hold ``arrays``, one after
        the other, each a view shaped like its array."""
        parts, offset = [], 0
        for index, array in enumerate(arrays):
            if not _on_device(array):
                raise _misplaced(self._label, array, index, what, self._on_device)
            size = int(np.prod(array.__cuda_array_interface__["shape"], dtype=np.int64))
            if offset + size > self._size:
                raise _larger_than_slots(self._label, what, self._size)
            parts.append(self._staging[offset:offset + size].reshape(array.shape))
            offset += size
        return parts

    def _timer(self, action: str) -> ContextManager[Any]:
        # pyrevolve's Revolvers hand their profiler over; a storage built alone may have none.
        return self.profiler.get_timer("storage", action) if self.profiler is not None else nullcontext()


# A region whose array moves (Devito hands the storage views of its time
# buffers, which rotate from step to step) is pointed at the new array only
# from this size up; a smaller array is copied into the region's staging
# array instead. Pointing a region anew (Store._repoint: the core's
# unprotect and protect, about 2 us, plus the array's address, 1 us) is a
# fixed cost that a copy of a small array undercuts. Measured
# (bench/results/adjoint_rotating.md, docs/adjoint.md: blocking, staging
# over re-pointing, median per repeat): arrays of 512 KiB 1.19 in memory
# and 1.08 with disk_path, arrays of 128 KiB 0.87 and 0.87.
_REPOINT_BYTES = 512 << 10


class _Region:
    """One checkpoint array's region of the store (``checkpoint.<index>``)."""

    __slots__ = ("label", "protected", "array", "staging", "staging_place", "staging_view")

    def __init__(self, label: str) -> None:
        self.label = label
        # (address, entries) of the memory the store has for it; None: not protected.
        self.protected: Optional[Tuple[int, int]] = None
        # The array protected as it is, whose next handing over is known at a
        # glance (the store keeps it alive: no other array can take its
        # place); None when the region is the staging array.
        self.array: Any = None
        self.staging: Optional[np.ndarray] = None
        # The staging array's (address, entries), and its last view shaped
        # like a checkpoint array: found once, not at every save and load
        # (an ndarray's address costs a microsecond through ctypes).
        self.staging_place: Optional[Tuple[int, int]] = None
        self.staging_view: Optional[np.ndarray] = None

    def on_staging(self) -> bool:
        """Whether the store has the region's staging array, which no
        checkpoint array handed over can share memory with."""
        return self.protected is not None and self.protected == self.staging_place

    def staging_for(self, size: int, dtype: np.dtype) -> np.ndarray:
        """The region's staging array, of ``size`` entries."""
        if self.staging is None or self.staging.size != size:
            self.staging = np.empty(size, dtype)
            self.staging_place = (self.staging.ctypes.data, size)
            self.staging_view = None
        return self.staging

    def staged_as(self, shape: Tuple[int, ...]) -> np.ndarray:
        """The staging array shaped ``shape`` (as many entries)."""
        view = self.staging_view
        if view is None or view.shape != shape:
            view = self.staging_view = self.staging.reshape(shape)
        return view


class _Aim(NamedTuple):
    """Where one save or load points the store's regions."""

    sizes: Tuple[int, ...]  # the entries of each array handed over
    # The regions to protect anew: (region, its flat memory, that memory's
    # address and entries, the array protected as it is or None).
    moves: List[Tuple[_Region, np.ndarray, Tuple[int, int], Any]]
    dropped: List[_Region]  # protected regions past the arrays handed over
    staged: List[Tuple[np.ndarray, Any]]  # (staging array shaped like the array, the array)


class _ArrayRegions:
    """The regions of a store of NumPy checkpoints, one per checkpoint array
    (ResurgoRevolveStorage): the first ones protected, as many as the
    arrays of the last save or load."""

    def __init__(self, where: str, size_ckp: int, dtype: np.dtype) -> None:
        self._where, self._size, self._dtype = where, size_ckp, dtype  # where: the storage, for messages
        self._regions: List[_Region] = []

    def aim(self, arrays: Sequence[Any], what: str) -> _Aim:
        """The regions for ``arrays``; checks every array before a region moves."""
        sizes, moves, staged = [], [], []
        for index, array in enumerate(arrays):
            if index == len(self._regions):
                self._regions.append(_Region(f"checkpoint.{index}"))
            region = self._regions[index]
            if array is region.array:  # the array of the last call, protected as it is
                sizes.append(region.protected[1])
                continue
            size = self._entries(array, index, what)
            sizes.append(size)
            if _as_it_is(array, self._dtype) and not (region.on_staging() and array.nbytes < _REPOINT_BYTES):
                place = (array.ctypes.data, size)
                if place == region.protected:
                    region.array = array  # another view of the memory the store has
                    continue
                if region.protected is None or array.nbytes >= _REPOINT_BYTES:
                    moves.append((region, array.reshape(-1), place, array))
                    continue
            staging = region.staging_for(size, self._dtype)
            if region.staging_place != region.protected:
                moves.append((region, staging, region.staging_place, None))
            staged.append((region.staged_as(array.shape), array))
        if sum(sizes) > self._size:
            raise _larger_than_slots(self._where, what, self._size)
        dropped = [region for region in self._regions[len(sizes):] if region.protected is not None]
        return _Aim(tuple(sizes), moves, dropped, staged)

    def protect(self, store: Store, aim: _Aim) -> None:
        """Points the store's regions as ``aim`` says. A region is marked
        unprotected before it is protected anew: a failure in between
        leaves it to be protected at the next call."""
        for region in aim.dropped:
            self._unprotect(store, region)
        for region, memory, place, array in aim.moves:
            if region.protected is None:
                store.protect(region.label, memory)
            elif region.protected[1] == place[1]:  # as many entries: the region's memory alone moves
                self._repoint(store, region, memory, place[0])
            else:
                self._unprotect(store, region)
                store.protect(region.label, memory)
            region.protected, region.array = place, array

    def pointed(self, aim: _Aim) -> None:
        """The store opened protecting the memory of ``aim``'s moves."""
        for region, _, place, array in aim.moves:
            region.protected, region.array = place, array

    @staticmethod
    def _repoint(store: Store, region: _Region, memory: np.ndarray, address: int) -> None:
        try:
            store._repoint(region.label, memory, address)
        except BaseException:
            if region.label not in store._regions:  # unprotected, the new memory refused
                region.protected = region.array = None
            raise

    @staticmethod
    def _unprotect(store: Store, region: _Region) -> None:
        store.unprotect(region.label)
        region.protected = region.array = None

    def _entries(self, array: Any, index: int, what: str) -> int:
        if not isinstance(array, np.ndarray) and _on_device(array):
            raise _misplaced(self._where, array, index, what, False)
        size = array.size
        if size == 0:
            raise InvalidArgumentError(
                f"{what} on {self._where}: checkpoint array {index} is empty; a store region holds at least one entry, "
                "so Checkpoint.get_data must leave empty arrays out"
            )
        return size


def _as_it_is(array: Any, dtype: np.dtype) -> bool:
    """Whether the store can copy from and into ``array`` itself."""
    return isinstance(array, np.ndarray) and array.dtype == dtype and array.flags.c_contiguous and array.flags.writeable


def _misplaced(where: str, array: Any, index: int, what: str, on_device: bool) -> InvalidArgumentError:
    place, staging = ("in host memory", "a device_staging") if on_device else ("on the device", "no device_staging")
    return InvalidArgumentError(
        f"{what} on {where}: checkpoint array {index} ({type(array).__name__}) is {place}, but the storage "
        f"has {staging} array; checkpoint arrays on the device need device_staging and synchronize, "
        "host ones none (docs/adjoint.md, \"pyrevolve (Devito)\")"
    )


def _larger_than_slots(where: str, what: str, size_ckp: int) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{what} on {where}: the checkpoint's arrays hold more than size_ckp={size_ckp} entries; "
        "Checkpoint.size must count every array that get_data returns"
    )


def _check_device_staging(label: str, staging: Any, size_ckp: int, dtype: Any, synchronize: Any) -> None:
    if not _on_device(staging):
        raise InvalidArgumentError(
            f"{label}: device_staging is a {type(staging).__name__}, not a CUDA array (CuPy, PyTorch); "
            "allocate it on the device, e.g. cupy.empty(size_ckp, dtype), or leave it out for NumPy checkpoints"
        )
    interface = staging.__cuda_array_interface__
    shape, typestr = tuple(interface["shape"]), np.dtype(interface["typestr"])
    if shape != (size_ckp,) or typestr != np.dtype(dtype) or interface.get("strides") not in (None, (typestr.itemsize,)):
        raise InvalidArgumentError(
            f"{label}: device_staging has shape {shape} and dtype {typestr}; it must be one contiguous "
            f"array of size_ckp={size_ckp} entries of {np.dtype(dtype)}"
        )
    if not callable(synchronize):
        raise InvalidArgumentError(
            f"{label}: device_staging needs synchronize, the call that waits for the copies into it "
            "(cupy.cuda.get_current_stream().synchronize, torch.cuda.synchronize)"
        )


def slot_uses(oplist: Iterable[Any]) -> List[Tuple[str, int]]:
    """The slot saves and restores of a CRevolve operation list, in order."""
    kinds = {Action.TAKESHOT: SAVE, Action.RESTORE: LOAD}
    return [(kinds[action.type], action.ckp) for action in oplist if action.type in kinds]


class ResurgoRevolver(SingleLevelRevolver):
    """pyrevolve's ``Revolver`` (single-level Revolve) with its checkpoints in
    Resurgo; the keyword arguments after ``profiler`` go to
    :class:`ResurgoRevolveStorage`. The store is ``resurgo_storage.store``."""

    def __init__(
        self,
        checkpoint: Any,
        fwd_operator: Any,
        rev_operator: Any,
        n_checkpoints: Optional[int],
        n_timesteps: int,
        timings: Any = None,
        profiler: Any = None,
        **resurgo_options: Any,
    ) -> None:
        # SingleLevelRevolver.__init__ calls addNumpyStorage, which needs these.
        self._resurgo_options = resurgo_options
        self.resurgo_storage: Optional[ResurgoRevolveStorage] = None
        super().__init__(checkpoint, fwd_operator, rev_operator, n_checkpoints, n_timesteps, timings=timings, profiler=profiler)

    def addNumpyStorage(self, compression_params: Any = None) -> int:  # noqa: N802 (pyrevolve's name)
        """SingleLevelRevolver's in-memory slots, kept in Resurgo instead
        (``compression_params`` is pyrevolve's; Resurgo compresses in its
        pipeline: ``pipeline_compress=...``)."""
        self.resurgo_storage = ResurgoRevolveStorage(
            self.checkpoint.size, self.n_checkpoints, self.checkpoint.dtype, self.profiler, **self._resurgo_options
        )
        self.addStorage(self.resurgo_storage)
        return len(self.storage_list) - 1

    def apply_forward(self) -> None:
        # CRevolve computed its whole operation list up front: the future is known.
        self.resurgo_storage.expect(slot_uses(self.scheduler.oplist))
        super().apply_forward()

    def apply_reverse(self) -> None:
        if self.resurgo_storage.on_device:
            # The forward pass's own captures pushed the early checkpoints out
            # of L0 as they came: now that they are written, the reverse
            # pass's restores again, to stage them into L0.
            oplist = list(self.scheduler.oplist)
            last_forward = next(i for i, action in enumerate(oplist) if action.type == Action.LASTFW)
            self.resurgo_storage.expect(slot_uses(oplist[last_forward + 1:]))
        super().apply_reverse()
        self.resurgo_storage.close()
