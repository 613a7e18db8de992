"""``resurgo``: command-line tool for Resurgo checkpoint directories.

    resurgo ls PATH                      list container files (tier or store dir)
                                         with a cheap check of each (STATE)
    resurgo inspect FILE [--json]        header, base, format version, metadata,
                                         regions (a managed region's recorded
                                         device: "device 1", "host", "unknown"),
                                         chunks
    resurgo verify PATH...               full checksum verification (files or dirs;
                                         in a dir, also every delta's chain)
    resurgo rm PATH --version N [--store NAME] [--with-dependents]
                                         delete one version (and the deltas on it)
    resurgo export DIR --version N -o FILE.h5
                                         one version as HDF5 (needs h5py): of an
                                         MPI store, global arrays whole and other
                                         regions under /rankNNNNNN; of a single
                                         process's store, each region as /<label>

Container files are ``<tier>/<store>/v<version:010>.r<rank:06>.rsg``; an MPI
store with ``persistent.layout = shared`` keeps a version of every rank in one
shared file, ``v<version:010>.shared.rsg``, which ``ls`` lists as one row (RANK
``all (N)``: its N ranks' parts), ``inspect`` shows part by part, ``verify``
checks part by part and ``rm`` removes with the version. ``inspect`` and
``verify`` also take a ConvergentMatrix global-layout file (any name; written
by ``write_global``, told by its first bytes): its shape, dtype, order and
epoch, and every 1 MiB part against its checksum. The tool
only parses them with the native reader; it never evaluates their contents.
Whatever it prints that comes from a file or a path (store names, labels,
metadata, paths, error messages) has its control characters escaped (``\x1b``),
so that a hostile file cannot drive the terminal or forge output lines.
Store names may begin with '.' or '-' (src/base/names.cpp): ``ls`` and
``verify`` list ``.hidden`` stores like any other, and a path or name that
begins with '-' follows ``--`` (``resurgo ls -- -dash``) or ``--store``
(``resurgo rm DIR --version 3 --store -dash``).
Exit codes: 0 success, 1 failure or damage found, 2 usage error (a missing
path, or a directory that holds no container file for ``verify``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import errno
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

import resurgo
from resurgo import _core
from resurgo.matrix import global_file_info, verify_global
from resurgo.printable import printable

QUARANTINE_SUFFIX = ".damaged"
# What says that a file could not be read (permissions, a symbolic link, an
# I/O error, a file gone meanwhile), not that its bytes are wrong.
UNREADABLE_ERRORS = (OSError, resurgo.StorageError, resurgo.NotFoundError)


def _parse_name(name: str) -> Optional[Tuple[int, int, bool]]:
    """(version, rank, quarantined) of a container file name, else None. The
    naming rule itself lives in the C++ core."""
    if not name.isascii():  # as every name the library writes; nor can it take a name that is not UTF-8
        return None
    quarantined = name.endswith(QUARANTINE_SUFFIX)
    parsed = _core.parse_container_file_name(name[: -len(QUARANTINE_SUFFIX)] if quarantined else name)
    return None if parsed is None else (parsed[0], parsed[1], quarantined)


SHARED_RANK = -1  # an Entry's rank for a shared file: every rank's part


def _parse_any_name(name: str) -> Optional[Tuple[int, int, bool]]:
    """(version, rank, quarantined) of a container file name, or of a shared
    file's name (v<version>.shared.rsg) with the rank SHARED_RANK; else None."""
    parsed = _parse_name(name)
    if parsed is not None or not name.isascii():
        return parsed
    quarantined = name.endswith(QUARANTINE_SUFFIX)
    version = _core.parse_shared_file_name(name[: -len(QUARANTINE_SUFFIX)] if quarantined else name)
    return None if version is None else (version, SHARED_RANK, quarantined)


PROGRESS_THRESHOLD = 64 << 20  # bytes: show a progress bar above this total

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

def _native(path: object) -> str:
    """``path`` as the native reader takes it; OSError for a path that is not
    UTF-8 (a name of undecodable bytes), which it cannot open."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise OSError(errno.EILSEQ, "the path is not UTF-8; rename it to read it", printable(text)) from None
    return text


class UsageError(Exception):
    pass


@dataclass
class Entry:
    store: str
    version: int
    rank: int  # SHARED_RANK for a shared file
    path: Path
    quarantined: bool

    @property
    def shared(self) -> bool:
        return self.rank == SHARED_RANK


@dataclass
class SharedPart:
    rank: int
    offset: int  # where the part starts in the shared file
    bytes: int
    info: _core.ContainerInfo  # the part as the container file it was


@dataclass
class SharedInfo:
    """A shared file's part index and each part's header and index."""
    version: int
    file_size: int
    parts: List[SharedPart]  # by rank


def _inspect_shared(path: Path) -> SharedInfo:
    version, file_size, parts = _core.inspect_shared(_native(path))
    return SharedInfo(version, file_size, [SharedPart(*part) for part in parts])


def _human(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # unreachable


def _entries_in(directory: Path, store: str) -> List[Entry]:
    out = []
    try:
        names = os.listdir(directory)
    except OSError:
        return out
    for name in names:
        path = directory / name
        parsed = _parse_any_name(name)
        if parsed and path.is_file():
            version, rank, quarantined = parsed
            out.append(Entry(store, version, rank, path, quarantined))
    return out


def _scan(path: Path) -> List[Entry]:
    """Container files of a store directory, or of every store directory
    inside a tier directory (both when the directory holds both)."""
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if path.is_file():
        parsed = _parse_any_name(path.name)
        if parsed:
            version, rank, quarantined = parsed
            return [Entry(path.parent.name, version, rank, path, quarantined)]
        raise UsageError(f"{path}: not a container file name (v<version>.r<rank>.rsg, or v<version>.shared.rsg "
                         "for every rank's part)")
    entries = _entries_in(path, path.resolve().name)
    for sub in sorted(path.iterdir()):
        if sub.is_dir():  # '.hidden' too: a store may have that name
            entries.extend(_entries_in(sub, sub.name))
    entries.sort(key=lambda e: (e.store, e.version, e.rank, e.quarantined))
    return entries


def _print_table(rows: Sequence[Sequence[object]], out=None) -> None:
    out = out or sys.stdout
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row, widths)]
        print("  ".join(cells).rstrip(), file=out)


# --- ls ------------------------------------------------------------------------

LS_STATES = """\
STATE is what ls can check without reading the chunks (the header, index and
footer of each file, the job manifests, the files of a delta's chain);
`resurgo verify` reads every chunk and checks its checksum:
  ok                  intact as far as ls checks
  damaged: WHY        its header, index or footer fails its checks, or it is
                      not the file the version's job manifest names
  unreadable: WHY     it cannot be read (permissions, a symbolic link, which
                      the library never follows, an I/O error)
  broken chain: WHY   a delta whose base (down to a full version) is missing,
                      damaged or of another region table: restart cannot use it
  uncommitted         a version of an MPI store without its job manifest here:
                      the job did not commit it (a rank failed), restart skips it
  incomplete: WHY     the job manifest names files of other ranks that should be
                      here and are not (a node-local directory holds the files
                      of its node's ranks only)
  quarantined (...)   a damaged copy restart set aside (<file>.damaged)
A shared file (RANK "all (N)") is checked part by part: damaged when a part
fails its checks or is not the file the job manifest names for its rank."""

Inspected = Union[_core.ContainerInfo, SharedInfo]


def _inspected(e: Entry) -> Tuple[Optional[Inspected], str]:
    """The file's header and index (each part's, of a shared file), or none
    and what ls says instead."""
    try:
        return (_inspect_shared(e.path) if e.shared else _core.inspect(_native(e.path))), "ok"
    except UNREADABLE_ERRORS as exc:
        return None, f"unreadable: {_first_line(exc)}"
    except resurgo.Error as exc:
        return None, f"damaged: {_first_line(exc)}"


def _manifests_in(directory: Path) -> Optional[Dict[int, object]]:
    """Version -> job manifest (or why it cannot be read) of the directory's
    job manifests; None when it holds none."""
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    found: Dict[int, object] = {}
    for name in names:
        version = _core.parse_manifest_file_name(name) if name.isascii() else None
        if version is None:
            continue
        try:
            found[version] = _core.read_manifest(_native(directory), version)
        except (resurgo.Error, OSError) as exc:
            found[version] = _first_line(exc)
    return found or None


@dataclass
class JobVersion:
    """What a version's job manifest says of one directory of an MPI store."""
    checksums: Dict[int, int]  # rank -> the header+index checksum of the file it names
    missing: List[int]  # ranks whose files should be in the directory and are not


def _job_version(manifest: object, ranks_here: Set[int]) -> Union[JobVersion, str]:
    """The JobVersion of a manifest (`ranks_here`: the ranks whose file of
    the version is in the directory), or what ls says when there is none."""
    if manifest is None:
        return "uncommitted: no job manifest here (the job did not commit this version)"
    if isinstance(manifest, str):
        return f"damaged: its job manifest cannot be read: {manifest}"
    # A node-local directory holds its node's ranks; one that holds ranks of
    # several nodes is shared, and holds every rank's file.
    nodes = {f.node for f in manifest.files if f.rank in ranks_here}
    missing = [f.rank for f in manifest.files if f.rank not in ranks_here and (len(nodes) > 1 or f.node in nodes)]
    return JobVersion({f.rank: f.checksum for f in manifest.files}, missing)


def _shared_state(shared: SharedInfo, manifest: object) -> Optional[str]:
    """What ls says of a shared file whose job manifest is missing or does not
    name each part as it is; None when it does."""
    job = _job_version(manifest, {part.rank for part in shared.parts})
    if not isinstance(job, JobVersion):
        return job
    for part in shared.parts:
        if job.checksums.get(part.rank) != part.info.checksum:
            return (f"damaged: rank {part.rank}'s part is not the file the job manifest of version "
                    f"{shared.version} names")
    if len(job.checksums) != len(shared.parts):
        return f"damaged: {len(shared.parts)} parts, and the job manifest names {len(job.checksums)} ranks"
    return None


def _committed_state(e: Entry, info: _core.ContainerInfo, job: Union[JobVersion, str]) -> Optional[str]:
    """What ls says of a file of an MPI store whose job manifest does not
    name it as it is, or names files missing here; None when all is there."""
    if not isinstance(job, JobVersion):
        return job
    if job.checksums.get(e.rank) != info.checksum:
        return f"damaged: not the file the job manifest of version {e.version} names"
    if job.missing:
        listed = ", ".join(map(str, job.missing[:8])) + (", ..." if len(job.missing) > 8 else "")
        return f"incomplete: the file of rank {listed} that the job manifest names is missing here"
    return None


def _ls_states(entries: List[Entry]) -> Dict[Path, Tuple[Optional[Inspected], str]]:
    """Each file's header and index (None when unreadable) and its STATE."""
    out = {e.path: _inspected(e) for e in entries}
    by_directory: Dict[Path, List[Entry]] = {}
    for e in entries:
        if not e.quarantined:
            by_directory.setdefault(e.path.parent, []).append(e)
    for directory, here in sorted(by_directory.items()):
        manifests = _manifests_in(directory)
        for e in (e for e in here if e.shared and out[e.path][0] is not None):
            info, state = out[e.path]
            out[e.path] = (info, _shared_state(info, (manifests or {}).get(e.version)) or state)
        here = [e for e in here if not e.shared]
        # A store opened without a communicator writes no manifest, and only rank 0.
        collective = manifests is not None or any(e.rank != 0 for e in here)
        breaks = _chain_breaks({e.path: out[e.path][0] for e in here})
        ranks: Dict[int, Set[int]] = {}
        for e in here:
            ranks.setdefault(e.version, set()).add(e.rank)
        jobs = {version: _job_version((manifests or {}).get(version), held) for version, held in ranks.items()}
        for e in here:
            info, state = out[e.path]
            if info is None:
                continue
            state = (_committed_state(e, info, jobs[e.version]) if collective else None) or state
            if e.path in breaks and state == "ok":
                state = f"broken chain: {breaks[e.path]}"
            out[e.path] = (info, state)
    return out


def cmd_ls(args: argparse.Namespace) -> int:
    entries = _scan(Path(args.path))
    if not entries:
        print(f"no container files under {printable(args.path)}")
        return EXIT_OK
    states = _ls_states(entries)
    rows = [("STORE", "VERSION", "RANK", "BASE", "SIZE", "REGIONS", "STATE")]
    for e in entries:
        try:
            size = _human(e.path.stat().st_size)
        except OSError:
            size = "?"
        info, state = states[e.path]
        if e.quarantined:
            state = f"quarantined ({state})"
        if e.shared:
            rows.append(_shared_row(e, info, size, state))
            continue
        regions = "-" if info is None else str(len(info.regions))
        base = "-" if info is None else _base_text(info, short=True)
        rows.append((e.store, str(e.version), str(e.rank), base, size, regions, state))
    _print_table(rows)
    return EXIT_OK


def _shared_row(e: Entry, info: Optional[SharedInfo], size: str, state: str) -> Tuple[str, ...]:
    """A shared file's ls row: RANK "all (N)", BASE of its parts ("mixed"
    when they differ), REGIONS summed over its parts."""
    if info is None:
        return (e.store, str(e.version), "all", "-", size, "-", state)
    bases = {_base_text(part.info, short=True) for part in info.parts}
    base = bases.pop() if len(bases) == 1 else "mixed"
    regions = sum(len(part.info.regions) for part in info.parts)
    return (e.store, str(e.version), f"all ({len(info.parts)})", base, size, str(regions), state)


def _base_text(info: _core.ContainerInfo, short: bool = False) -> str:
    """'full', or the base of a delta ('delta of version N'; just N when short)."""
    base = info.base_version
    if base < 0:
        return "full"
    return str(base) if short else f"delta of version {base}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --- inspect ----------------------------------------------------------------------

def _jsonable(info: _core.ContainerInfo, path: str) -> dict:
    out = info._asdict()
    meta: bytes = out.pop("metadata")
    out["path"] = path
    out["metadata_size"] = len(meta)
    out["metadata_hex"] = meta.hex()
    return out


def _metadata_preview(meta: bytes, limit: int = 64) -> str:
    if not meta:
        return "(none)"
    head = meta[:limit]
    try:
        text = head.decode("utf-8")
        if text.isprintable():
            preview = repr(text)
        else:
            preview = head.hex()
    except UnicodeDecodeError:
        preview = head.hex()
    more = "..." if len(meta) > limit else ""
    return f"{len(meta)} bytes: {preview}{more}"


def _print_json(data: dict) -> None:
    # JSON escapes every control character but DEL.
    print(json.dumps(data, indent=2).replace("\x7f", "\\u007f"))


def _print_fields(fields: Sequence[Tuple[str, str]]) -> None:
    """One "key  value" line per field, the values aligned."""
    width = max(len(k) for k, _ in fields)
    for key, value in fields:
        print(f"{key.ljust(width)}  {printable(value)}")


def _is_global_file(path: Union[str, Path]) -> bool:
    """Whether the regular file `path` begins with the magic of a
    ConvergentMatrix global-layout file (``ConvergentMatrix.write_global``)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(_core.GLOBAL_FILE_MAGIC)) == _core.GLOBAL_FILE_MAGIC
    except OSError:
        return False


def _inspect_global_file(path: str, as_json: bool) -> int:
    """A global-layout file: its header, checked (`resurgo verify` checks
    every part)."""
    info = global_file_info(_native(path))
    size = os.path.getsize(path)
    rows, cols = info["shape"]
    if as_json:
        _print_json({"path": path, "kind": "matrix global-layout file", "shape": [rows, cols],
                     "dtype": info["dtype"].name, "order": info["order"], "epoch": info["epoch"],
                     "file_size": size})
        return EXIT_OK
    order = "row-major (C)" if info["order"] == "C" else "column-major (Fortran, ScaLAPACK)"
    _print_fields([("file", path), ("kind", "ConvergentMatrix global-layout file (write_global)"),
                   ("shape", f"{rows} x {cols}"), ("dtype", info["dtype"].name), ("order", order),
                   ("epoch", f"{info['epoch']} (the writer's commits)"),
                   ("file size", f"{_human(size)} ({size} bytes)")])
    return EXIT_OK


def _inspect_shared_file(path: str, as_json: bool) -> int:
    """A shared file: its part index, then one line per rank's part (`resurgo
    verify` reads every chunk)."""
    shared = _inspect_shared(Path(path))
    if as_json:
        parts = [{"rank": p.rank, "offset": p.offset, "bytes": p.bytes, "container": _jsonable(p.info, path)}
                 for p in shared.parts]
        _print_json({"path": path, "version": shared.version, "file_size": shared.file_size, "parts": parts})
        return EXIT_OK
    store = shared.parts[0].info.store if shared.parts else "-"
    fields = [("file", path), ("store", store), ("version", str(shared.version)),
              ("parts", f"{len(shared.parts)} (one per rank, persistent.layout = shared)"),
              ("file size", f"{_human(shared.file_size)} ({shared.file_size} bytes)")]
    _print_fields(fields)
    print()
    rows = [("  RANK", "OFFSET", "BYTES", "BASE", "REGIONS", "CHUNKS", "CHECKSUM")]
    for p in shared.parts:
        rows.append((f"  {p.rank}", str(p.offset), str(p.bytes), _base_text(p.info, short=True),
                     str(len(p.info.regions)), str(len(p.info.chunks)), f"{p.info.checksum:016x}"))
    _print_table(rows)
    return EXIT_OK


def _device_text(device: Union[int, str, None]) -> str:
    """A region's recorded device (ContainerRegion.device) as inspect shows
    it: "device 0", "host", "unknown", or "-" where nothing is recorded."""
    if device is None:
        return "-"
    return device if isinstance(device, str) else f"device {device}"


def _region_rows(regions: Sequence[_core.ContainerRegion]) -> List[Tuple[str, ...]]:
    """The region table; with a DEVICE column where a region records one
    (format version 3: managed regions)."""
    with_device = any(r.device is not None for r in regions)
    rows = [("  ID", "LABEL", "KIND", "BYTES", "DTYPE", "SHAPE") + (("DEVICE",) if with_device else ())]
    for r in regions:
        row = (f"  {r.id}", r.label, r.kind, str(r.bytes), r.dtype or "-", str(r.shape))
        rows.append(row + ((_device_text(r.device),) if with_device else ()))
    return rows


def cmd_inspect(args: argparse.Namespace) -> int:
    path = str(args.file)
    if not os.path.isfile(path):
        raise UsageError(f"{path}: not a file")
    if Path(path).name.isascii() and _core.parse_shared_file_name(Path(path).name) is not None:
        return _inspect_shared_file(path, args.json)
    if _is_global_file(path):
        return _inspect_global_file(path, args.json)
    info = _core.inspect(_native(path))
    if args.json:
        _print_json(_jsonable(info, path))
        return EXIT_OK
    created = _dt.datetime.fromtimestamp(info.created_unix_ns / 1e9, tz=_dt.timezone.utc)
    chunks = info.chunks
    raw = sum(c.raw_length for c in chunks)
    fields = [
        ("file", path),
        ("store", info.store),
        ("version", str(info.version)),
        ("rank", str(info.rank)),
        ("base", _base_text(info)),
        ("created", created.isoformat(timespec="milliseconds")),
        ("chunk size", _human(info.chunk_size)),
        ("file size", f"{_human(info.file_size)} ({info.file_size} bytes)"),
        ("format", f"version {info.format_version}"),
        ("metadata", _metadata_preview(info.metadata)),
    ]
    if info.base_version >= 0:
        region_bytes = sum(r.bytes for r in info.regions)
        fields.append(("extents", f"{len(chunks)}, {_human(raw)} of {_human(region_bytes)} "
                                  f"({raw} of {region_bytes} bytes; the base holds the rest)"))
    _print_fields(fields)
    print()
    print(f"regions ({len(info.regions)}):")
    _print_table(_region_rows(info.regions))
    stored = sum(c.stored_length for c in chunks)
    codecs: dict = {}
    for c in chunks:
        codecs[c.codec] = codecs.get(c.codec, 0) + 1
    ratio = f"{raw / stored:.2f}x" if stored else "-"
    codec_text = ", ".join(f"{name} x{count}" for name, count in sorted(codecs.items())) or "-"
    print()
    print(f"chunks: {len(chunks)}, raw {_human(raw)}, stored {_human(stored)} "
          f"(ratio {ratio}), codecs: {codec_text}")
    return EXIT_OK


# --- verify -----------------------------------------------------------------------

def _collect_for_verify(path: Path) -> List[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*.rsg") if p.is_file())


def _verify_files(files: List[Path], report: Callable[[str], None],
                  advance: Optional[Callable[[int], None]] = None) -> Tuple[Set[Path], Set[Path]]:
    """Verifies each file, going on past each failure; returns the damaged
    ones and those that could not be read at all."""
    damaged: Set[Path] = set()
    unreadable: Set[Path] = set()
    for f in files:
        try:
            size = f.stat().st_size
        except OSError:
            size = 0
        progress = None
        if advance is not None:
            state = {"seen": 0}

            def progress(done: int, total: int, _size=size, _state=state) -> None:
                # Map the raw bytes of this file onto its share of the total.
                target = _size if total == 0 else int(_size * done / total)
                advance(target - _state["seen"])
                _state["seen"] = target
        try:
            if _is_global_file(f):
                verify_global(_native(f))
            else:
                _core.verify(_native(f), progress)
        except UNREADABLE_ERRORS as exc:
            unreadable.add(f)
            report(f"UNREADABLE {printable(f)}: {printable(exc)}")
        except resurgo.Error as exc:
            damaged.add(f)
            report(f"DAMAGED {printable(f)}: {printable(exc)}")
        if advance is not None:
            advance(size - state["seen"])
    return damaged, unreadable


def _region_table(info: _core.ContainerInfo) -> List[dict]:
    """The region table a delta shares with its base: not the managed
    regions' devices, whose pages move between versions (docs/format.md)."""
    return [{k: v for k, v in r._asdict().items() if k != "device"} for r in info.regions]


def _tables_differ(a: _core.ContainerInfo, b: _core.ContainerInfo) -> bool:
    try:
        return _region_table(a) != _region_table(b)
    except UnicodeDecodeError:  # a name that is not UTF-8: restart compares the bytes, this tool cannot
        return False


def _broken_chains(files: List[Path], damaged: Set[Path]) -> List[str]:
    """One line per delta whose chain is broken (_chain_breaks), the damaged
    files counting as damaged bases."""
    infos: Dict[Path, Optional[_core.ContainerInfo]] = {}
    for f in files:
        infos[f] = None
        if f not in damaged:
            try:
                infos[f] = _core.inspect(_native(f))
            except (resurgo.Error, OSError):
                pass
    return [f"BROKEN CHAIN {printable(path)}: {printable(why)}" for path, why in sorted(_chain_breaks(infos).items())]


def _chain_breaks(infos: Dict[Path, Optional[_core.ContainerInfo]]) -> Dict[Path, str]:
    """Why each delta's chain is broken: a base (in the same directory, of
    the same rank) missing, damaged (None), or with another region table, down
    to a full version. What restart would find, without reading chunks.
    Deltas whose chains are whole, and full versions, are not in it."""
    links: Dict[Tuple[Path, int, int], Tuple[Path, Optional[_core.ContainerInfo]]] = {}
    for f, info in infos.items():
        parsed = _parse_name(f.name)
        if parsed is None or parsed[2]:
            continue
        version, rank, _ = parsed
        links[(f.parent, rank, version)] = (f, info)

    def break_in(key: Tuple[Path, int, int]) -> Optional[str]:
        directory, rank, version = key
        info = links[key][1]
        while info.base_version >= 0:
            base = info.base_version
            base_key = (directory, rank, base)
            if base_key not in links:
                return f"its base {base} is missing from {directory}"
            base_path, base_info = links[base_key]
            if base_info is None:
                return f"its base {base} ({base_path}) is damaged"
            # The region tables must be equal field by field, as restart requires.
            if _tables_differ(base_info, info):
                return f"version {version} is a delta of version {base} but their region tables differ"
            version, info = base, base_info
        return None

    breaks = {}
    for key in sorted(links):
        path, info = links[key]
        if info is None or info.base_version < 0:
            continue
        why = break_in(key)
        if why is not None:
            breaks[path] = why
    return breaks


@dataclass
class VerifyTargets:
    files: List[Path]  # every file to verify
    in_directories: List[Path]  # those found in directories
    missing: List[Path]  # paths that do not exist
    empty: List[Path]  # directories that hold no container file


def _verify_targets(paths: Sequence[str]) -> VerifyTargets:
    files: Dict[Path, None] = {}  # ordered, without repeats
    in_directories: Dict[Path, None] = {}
    targets = VerifyTargets([], [], [], [])
    for root in map(Path, paths):
        if not root.exists():
            targets.missing.append(root)
            continue
        found = _collect_for_verify(root)
        files.update(dict.fromkeys(found))
        if root.is_dir():
            in_directories.update(dict.fromkeys(found))
            if not found:
                targets.empty.append(root)
    targets.files, targets.in_directories = list(files), list(in_directories)
    return targets


def _verify_with_bar(files: List[Path], total: int) -> Tuple[Set[Path], Set[Path]]:
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn,
                               TimeRemainingColumn, TransferSpeedColumn)

    console = Console(stderr=True)
    with Progress(TextColumn("verify"), BarColumn(), DownloadColumn(binary_units=True),
                  TransferSpeedColumn(), TimeRemainingColumn(), console=console,
                  transient=True) as bar:
        task = bar.add_task("verify", total=total)
        return _verify_files(files, lambda line: bar.console.print(line, markup=False, highlight=False),
                             lambda n: bar.advance(task, n))


def cmd_verify(args: argparse.Namespace) -> int:
    """Verifies every path given, going on past each failure; a missing path,
    or a directory without a container file (verifying nothing proves
    nothing), is a usage error (exit 2), damage a failure (exit 1)."""
    targets = _verify_targets(args.path)
    files, in_directories = targets.files, targets.in_directories
    for root in targets.missing:
        print(f"resurgo verify: {printable(root)}: no such file or directory", file=sys.stderr)
    for root in targets.empty:
        print(f"resurgo verify: {printable(root)} holds no container file (v<version>.r<rank>.rsg or "
              f"v<version>.shared.rsg), so nothing was "
              f"verified; give a level directory (local.path or persistent.path), a store directory in it or "
              f"a file (`resurgo ls` lists them)", file=sys.stderr)
    total = 0
    for f in files:
        try:
            total += f.stat().st_size
        except OSError:
            pass
    if sys.stderr.isatty() and total > PROGRESS_THRESHOLD and not args.no_progress:
        damaged, unreadable = _verify_with_bar(files, total)
    else:
        damaged, unreadable = _verify_files(files, print)
    broken = _broken_chains(in_directories, damaged | unreadable)
    for line in broken:
        print(line)
    also = f", {len(unreadable)} unreadable" if unreadable else ""
    print(f"verified {len(files)} files, {len(damaged)} damaged, {len(broken)} broken chains{also}")
    if targets.missing or targets.empty:
        return EXIT_USAGE
    return EXIT_FAIL if damaged or unreadable or broken else EXIT_OK


# --- rm ---------------------------------------------------------------------------

def cmd_rm(args: argparse.Namespace) -> int:
    root = Path(args.path)
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory")
    scanned = [e for e in _scan(root) if not e.quarantined]
    if args.store is not None:
        scanned = [e for e in scanned if e.store == args.store]
    entries = [e for e in scanned if e.version == args.version]
    stores = sorted({e.store for e in entries})
    if not entries:
        where = f"store '{args.store}' under {root}" if args.store else str(root)
        print(f"resurgo rm: no container files of version {args.version} in {printable(where)}",
              file=sys.stderr)
        return EXIT_FAIL
    if len(stores) > 1:
        raise UsageError(f"version {args.version} exists in several stores ({', '.join(stores)}); "
                         "choose one with --store")
    # Through the library's level code and the store's lock: a store open on
    # the directory makes this fail instead of racing with its eviction. The
    # library refuses to remove a base of other versions unless told to
    # remove them too (newest first).
    for directory in sorted({e.path.parent for e in entries}):
        removed = _core.remove_version(_native(directory), args.version, args.with_dependents)
        for version in removed:
            for e in scanned:
                if e.path.parent == directory and e.version == version:
                    print(f"removed {printable(e.path)}")
    return EXIT_OK


# --- export -------------------------------------------------------------------------

def cmd_export(args: argparse.Namespace) -> int:
    store_dir = Path(args.path)
    if not store_dir.is_dir():
        raise UsageError(f"{store_dir}: not a directory (give a level's store directory, as `resurgo ls` shows)")
    try:
        from resurgo.export import export_version

        summary = export_version(_native(store_dir), args.version, _native(args.output))
    except ImportError as exc:
        print(f"resurgo export: needs h5py ({printable(exc)}): pip install h5py", file=sys.stderr)
        return EXIT_FAIL
    if summary.single_process:
        print(f"exported version {summary.version} of store '{printable(summary.store)}' (a single process) to "
              f"{printable(args.output)}: {summary.rank_regions} regions")
        return EXIT_OK
    print(f"exported version {summary.version} of store '{printable(summary.store)}' ({summary.ranks} ranks) to "
          f"{printable(args.output)}: {summary.global_arrays} global arrays, {summary.rank_regions} regions of "
          f"single ranks")
    return EXIT_OK


# --- main -------------------------------------------------------------------------

NAMES_WITH_DASHES = ("A store name or path that begins with '-' follows '--' (resurgo ls -- -dash) or "
                     "--store (--store -dash).")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="resurgo", description="Inspect and manage Resurgo checkpoint files.", epilog=NAMES_WITH_DASHES)
    parser.add_argument("--version", action="version", version=f"resurgo {resurgo.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("ls", help="list the container files of a tier or store directory, each with a cheap "
                                  "check (verify reads every chunk)",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=LS_STATES + "\n\n" + NAMES_WITH_DASHES)
    p.add_argument("path", metavar="PATH", help="a level directory (local.path, persistent.path), a store "
                                                "directory in it, or a container file")
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("inspect", help="show the header, regions and chunks of a container file (of a shared "
                                       "file, each rank's part; of a matrix's global-layout file, its shape, "
                                       "dtype, order and epoch)")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("verify", help="verify every checksum of files (container files, matrices' "
                                      "global-layout files) or of directory trees, and in a tree every "
                                      "delta's chain",
                       epilog="Exit status: 0 all intact, 1 damage found, 2 a path missing or a directory "
                              "holding no container file. " + NAMES_WITH_DASHES)
    p.add_argument("path", metavar="PATH", nargs="+")
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("rm", help="delete the container files of one version", epilog=NAMES_WITH_DASHES)
    p.add_argument("path", metavar="PATH", help="tier directory or store directory")
    p.add_argument("--version", type=int, required=True, metavar="N", dest="version")
    p.add_argument("--store", metavar="NAME", help="store name (inside a tier directory); may begin with '-'")
    p.add_argument("--with-dependents", action="store_true",
                   help="also remove the delta versions that stand on it (newest first)")
    p.set_defaults(func=cmd_rm)

    p = sub.add_parser("export", help="write one version of a store to an HDF5 file",
                       description="Writes one full version to HDF5 (needs h5py). Of an MPI store (its job "
                                   "manifest names every rank's file): each global array whole as /<label>, "
                                   "the other regions as /rankNNNNNN/<label>. Of a single process's store: "
                                   "each region as /<label>.")
    p.add_argument("path", metavar="DIR", help="a level's store directory (<level path>/<store>)")
    p.add_argument("--version", type=int, required=True, metavar="N", dest="version")
    p.add_argument("-o", "--output", required=True, metavar="FILE.h5", help="HDF5 file to write (replaced)")
    p.set_defaults(func=cmd_export)
    return parser


def _store_values_joined(argv: List[str]) -> List[str]:
    """``--store -dash`` as ``--store=-dash``: a store name may begin with
    '-', which argparse would take for an option ('--...' stays one)."""
    out: List[str] = []
    at = 0
    while at < len(argv):
        word = argv[at]
        if word == "--":
            return out + argv[at:]
        following = argv[at + 1] if at + 1 < len(argv) else ""
        if word == "--store" and following.startswith("-") and not following.startswith("--"):
            out.append(f"--store={following}")
            at += 2
            continue
        out.append(word)
        at += 1
    return out


def main(argv: Optional[Iterable[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(_store_values_joined(sys.argv[1:] if argv is None else list(argv)))
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"resurgo {args.command}: {printable(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except resurgo.Error as exc:
        print(f"resurgo {args.command}: {type(exc).__name__}: {printable(exc)}", file=sys.stderr)
        return EXIT_FAIL
    except UnicodeDecodeError as exc:  # a name in a file (label, store, dtype) that Python cannot show
        print(f"resurgo {args.command}: a name read from the file is not UTF-8 ({printable(exc.reason)} at byte "
              f"{exc.start}); `resurgo verify` checks the file", file=sys.stderr)
        return EXIT_FAIL
    except BrokenPipeError:
        # Output piped into a reader that stopped early (resurgo ls | head).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:
        print(f"resurgo {args.command}: {printable(exc)}", file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
