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
from typing import Any, Callable, ContextManager, Iterable, List, Optional, Sequence, Tuple

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

    pyrevolve hands over different arrays at different time steps (Devito
    checkpoints views into its time buffers), while a store restores fixed
    memory, so every checkpoint passes through one staging array of
    ``size_ckp`` entries, the size of one of NumpyStorage's slots.

    For checkpoints on the device, ``device_staging`` is that array, on the
    device (``size_ckp`` entries of ``dtype``), and ``synchronize`` waits
    for the copies into it (``cupy.cuda.get_current_stream().synchronize``,
    ``torch.cuda.synchronize``). The store then has an L0 device cache and
    ``expect`` stages the versions to be loaded into it, from memory too."""

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
        if self._on_device:
            _check_device_staging(self._label, device_staging, size_ckp, dtype, synchronize)
            self._staging, self._synchronize = device_staging, synchronize
        else:
            self._staging, self._synchronize = np.zeros(size_ckp, dtype=dtype), None
        state = {"checkpoint": self._staging}
        if disk_path is None:
            store = memory_store(name, state, ram_capacity, **overrides)
        else:
            store = disk_store(name, state, disk_path, prefetch_capacity, **overrides)
        self._size = size_ckp
        # The staging array's parts for the last NumPy arrays handed over
        # (their shapes, one part per array): pyrevolve hands arrays of the
        # same shapes at every call, which then skip the checks and the
        # slicing.
        self._numpy_parts: Tuple[Optional[tuple], List[np.ndarray]] = (None, [])
        # Memory versions are in memory already, but those on the device
        # still gain from being staged into L0.
        self._prefetch = prefetch and (disk_path is not None or self._on_device)
        self._slots: Optional[VersionMap] = VersionMap(store, self._label, "slot", "pyrevolve restores only slots it saved")

    @property
    def store(self) -> Optional[Store]:
        """The Resurgo store (for its statistics); None once closed."""
        return self._slots.store if self._slots is not None else None

    @property
    def on_device(self) -> bool:
        """Whether the checkpoints pass through a device staging array."""
        return self._on_device

    def save(self, key: int, data_pointers: Sequence[Any]) -> None:
        with self._timer("copy_save"):
            for part, array in zip(self._parts(data_pointers, "save"), data_pointers):
                if self._on_device:
                    part[...] = array  # CuPy and PyTorch alike, on the current stream
                else:
                    np.copyto(part, array)  # NumpyStorage's casting
            if self._synchronize is not None:
                self._synchronize()  # the store copies the staging array on a stream of its own
            self._open_slots().save(key)

    def load(self, key: int, locations: Sequence[Any]) -> None:
        with self._timer("copy_load"):
            self._open_slots().load(key, delete=False)
            for part, array in zip(self._parts(locations, "load"), locations):
                if self._on_device:
                    array[...] = part
                else:
                    np.copyto(array, part)

    def expect(self, uses: Iterable[Tuple[str, int]]) -> None:
        """The future ``(SAVE | LOAD, slot)`` uses, in order: the versions the
        loads will restore go to the store's prefetch (disk stores, and any
        store of device checkpoints: into its L0 device cache)."""
        if self._prefetch:
            slots = self._open_slots()
            slots.store.prefetch(slots.future_loads(uses))

    def close(self) -> None:
        """Discards the versions held and closes the store; twice is a no-op."""
        slots, self._slots = self._slots, None
        if slots is not None:
            try:
                slots.discard_all()
            finally:
                slots.store.close()

    def _open_slots(self) -> VersionMap:
        if self._slots is None:
            raise InvalidArgumentError(f"{self._label} is closed")
        return self._slots

    def _parts(self, arrays: Sequence[Any], what: str) -> List[Any]:
        """The staging array's parts that hold ``arrays``, one after the
        other, each a view shaped like its array."""
        numpy = all(type(array) is np.ndarray for array in arrays)
        shapes = tuple(array.shape for array in arrays) if numpy else None
        known, parts = self._numpy_parts
        if shapes is not None and shapes == known:
            return parts
        parts, offset = [], 0
        for index, array in enumerate(arrays):
            size = self._entries(array, index, what)
            parts.append(self._staging_part(offset, size, what).reshape(array.shape))
            offset += size
        if shapes is not None:
            self._numpy_parts = (shapes, parts)
        return parts

    def _entries(self, array: Any, index: int, what: str) -> int:
        """The entries of ``array``, which must be where the staging array is."""
        if _on_device(array) != self._on_device:
            where, staging = ("in host memory", "a device_staging") if self._on_device else ("on the device", "no device_staging")
            raise InvalidArgumentError(
                f"{what} on {self._label}: checkpoint array {index} ({type(array).__name__}) is {where}, but the storage "
                f"has {staging} array; checkpoint arrays on the device need device_staging and synchronize, "
                "host ones none (docs/adjoint.md, \"pyrevolve (Devito)\")"
            )
        if self._on_device:
            return int(np.prod(array.__cuda_array_interface__["shape"], dtype=np.int64))
        return array.size

    def _staging_part(self, offset: int, size: int, what: str) -> Any:
        if offset + size > self._size:
            raise InvalidArgumentError(
                f"{what}: the checkpoint's arrays hold more than size_ckp={self._size} entries; "
                "Checkpoint.size must count every array that get_data returns"
            )
        return self._staging[offset:offset + size]

    def _timer(self, action: str) -> ContextManager[Any]:
        # pyrevolve's Revolvers hand their profiler over; a storage built alone may have none.
        return self.profiler.get_timer("storage", action) if self.profiler is not None else nullcontext()


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
