"""Export of one version of a store to HDF5 (``resurgo export``).

An MPI store: the job manifest of the version (``vNNNNNNNNNN.job`` in a
level's store directory, verified by the native reader) lists every rank's
container file and regions. A region declared as a block of a global array
(``protect(..., global_shape=, offset=)``) becomes, with the blocks of the
other ranks, one dataset ``/<label>`` of the global shape and dtype; any
other region becomes ``/rankNNNNNN/<label>``.

A store of a single process (a directory with no job manifest and only rank
0's files): each region of the version's file becomes ``/<label>``.

Every chunk's checksum is verified on the way, and the file appears under
its name only when complete.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from resurgo import _core
from resurgo.errors import CorruptionError, FormatError, NotFoundError

__all__ = ["ExportSummary", "export_version"]


@dataclass(frozen=True)
class ExportSummary:
    store: str
    version: int
    ranks: int
    global_arrays: int  # datasets assembled from the blocks of every rank
    rank_regions: int  # datasets under /rankNNNNNN, or /<label> for a single process
    single_process: bool = False  # a store opened without a communicator


def _numpy_dtype(region: _core.ManifestRegion) -> Optional[np.dtype]:
    """The region's element type, or None when it has none NumPy knows."""
    try:
        return np.dtype(region.dtype) if region.dtype else None
    except TypeError:
        return None


def _as_array(data: bytes, region: _core.ManifestRegion, path: Path) -> np.ndarray:
    """The region's bytes as its elements; as raw bytes when its element
    type is unknown (an untyped buffer)."""
    dtype = _numpy_dtype(region)
    shape = region.shape
    if dtype is None:
        dtype, shape = np.dtype(np.uint8), (len(data),)
    if math.prod(shape) * dtype.itemsize != len(data):
        raise FormatError(
            f"{path}: region '{region.label}' holds {len(data)} bytes, not the "
            f"{shape} {dtype.name} elements the job manifest declares"
        )
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def _global_arrays(manifest: _core.Manifest, where: str) -> Dict[str, Tuple[Tuple[int, ...], np.dtype]]:
    """Label -> (global shape, dtype) of each global array; its blocks must
    agree on both and hold at least as many elements as the array."""
    arrays: Dict[str, Tuple[Tuple[int, ...], np.dtype]] = {}
    elements: Dict[str, int] = {}
    for region in manifest.regions:
        if not region.global_shape:
            continue
        label = region.label
        dtype = _numpy_dtype(region)
        if dtype is None:
            raise FormatError(
                f"{where}: global array '{label}' has element type '{region.dtype}', which NumPy and "
                f"HDF5 do not know; it cannot be exported"
            )
        layout = (region.global_shape, dtype)
        if arrays.setdefault(label, layout) != layout:
            raise FormatError(
                f"{where}: the blocks of global array '{label}' disagree on its "
                f"shape or dtype ({arrays[label][0]} {arrays[label][1]} vs. {layout[0]} {layout[1]} on "
                f"rank {region.rank}); the ranks must protect it alike"
            )
        elements[label] = elements.get(label, 0) + math.prod(region.shape)
    for label, (shape, _) in arrays.items():
        if elements[label] < math.prod(shape):
            raise FormatError(
                f"{where}: the blocks of global array '{label}' hold "
                f"{elements[label]} elements, fewer than its shape {shape} has: they do not cover it"
            )
    return arrays


def _checked_file(store_dir: Path, manifest: _core.Manifest, entry: _core.ManifestFile) -> Path:
    """The container file of a rank, once it is the one the manifest names."""
    path = store_dir / entry.file
    if not path.is_file():
        raise NotFoundError(
            f"{path}: rank {entry.rank}'s file of version {manifest.version} is not in {store_dir}; a "
            f"node-local level (L2) holds only its node's ranks: export from the persistent level (L4), or "
            f"gather every node's files in one directory"
        )
    info = _core.inspect(str(path))
    identity = (info.store, info.version, info.rank)
    if identity != (manifest.store, manifest.version, entry.rank):
        raise CorruptionError(
            f"{path} holds store '{identity[0]}' version {identity[1]} rank {identity[2]}, not what the "
            f"job manifest names; the directory was altered (check it with `resurgo verify`)"
        )
    if info.checksum != entry.checksum:
        raise CorruptionError(
            f"{path} is not the file the job manifest of version {manifest.version} names (its "
            f"header+index checksum differs); the version was overwritten or damaged: export another "
            f"version or check it with `resurgo verify`"
        )
    return path


def _write(h5: Any, store_dir: Path, manifest: _core.Manifest) -> ExportSummary:
    where = f"job manifest of version {manifest.version} in {store_dir}"
    arrays = _global_arrays(manifest, where)
    datasets = {label: h5.create_dataset(label, shape=tuple(shape), dtype=dtype)
                for label, (shape, dtype) in arrays.items()}
    regions_of: Dict[int, List[_core.ManifestRegion]] = {}
    for region in manifest.regions:
        regions_of.setdefault(region.rank, []).append(region)
    rank_regions = 0
    for entry in manifest.files:
        path = _checked_file(store_dir, manifest, entry)
        for region in regions_of.get(entry.rank, []):
            block = _as_array(_core.read_region(str(path), region.id), region, path)
            if region.global_shape:
                if block.size:
                    place = tuple(slice(o, o + n) for o, n in zip(region.offset, block.shape))
                    datasets[region.label][place] = block
            else:
                h5.create_dataset(f"rank{entry.rank:06d}/{region.label}", data=block)
                rank_regions += 1
    h5.attrs["store"] = manifest.store
    h5.attrs["version"] = manifest.version
    h5.attrs["ranks"] = manifest.ranks
    return ExportSummary(manifest.store, manifest.version, manifest.ranks, len(arrays), rank_regions)


def _single_process_file(store_dir: Path, version: int) -> Optional[Path]:
    """The file of ``version`` when ``store_dir`` is the directory of a store
    opened without a communicator (no job manifest, only rank 0's files);
    None for an MPI store's. NotFoundError when it does not hold the version."""
    files: Dict[Tuple[int, int], str] = {}
    for name in os.listdir(store_dir):
        if _core.parse_manifest_file_name(name) is not None:
            return None
        parsed = _core.parse_container_file_name(name)
        if parsed is not None:
            files[parsed] = name
    if any(rank != 0 for _, rank in files):
        return None
    if (version, 0) not in files:
        raise NotFoundError(f"{store_dir} holds no file of version {version} (`resurgo ls {store_dir}` lists "
                            f"the versions there)")
    return store_dir / files[(version, 0)]


def _write_single_process(h5: Any, path: Path, version: int) -> ExportSummary:
    info = _core.inspect(str(path))
    if (info.version, info.rank) != (version, 0):
        raise CorruptionError(
            f"{path} holds version {info.version} of rank {info.rank}, not what its name says; the directory "
            f"was altered (check it with `resurgo verify`)"
        )
    for region in info.regions:
        h5.create_dataset(region.label, data=_as_array(_core.read_region(str(path), region.id), region, path))
    h5.attrs["store"] = info.store
    h5.attrs["version"] = info.version
    h5.attrs["ranks"] = 1
    return ExportSummary(info.store, info.version, 1, 0, len(info.regions), single_process=True)


def export_version(store_dir: "os.PathLike[str] | str", version: int,
                   output: "os.PathLike[str] | str") -> ExportSummary:
    """Writes ``version`` of the store whose level directory is
    ``store_dir`` (``<level path>/<store>``) to the HDF5 file ``output``.
    Raises NotFoundError when the version is not there (for an MPI store:
    when no job manifest of it is, as for a version the job did not commit),
    CorruptionError/FormatError for damage, InvalidArgumentError for a delta
    version (export a full one), ImportError without h5py."""
    import h5py

    store_dir = Path(store_dir)
    output = Path(output)
    single = _single_process_file(store_dir, version)
    manifest = None if single is not None else _core.read_manifest(str(store_dir), version)
    if manifest is not None and manifest.version != version:
        raise CorruptionError(
            f"the job manifest of version {version} in {store_dir} describes version {manifest.version}: "
            f"the directory was altered (check it with `resurgo verify`)"
        )
    partial = output.with_name(f".{output.name}.partial")
    try:
        with h5py.File(partial, "w") as h5:
            summary = _write_single_process(h5, single, version) if single else _write(h5, store_dir, manifest)
        os.replace(partial, output)
    finally:
        partial.unlink(missing_ok=True)
    return summary
