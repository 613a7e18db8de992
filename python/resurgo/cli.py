"""``resurgo``: command-line tool for Resurgo checkpoint directories.

    resurgo ls PATH                      list container files (tier or store dir)
    resurgo inspect FILE [--json]        header, base, metadata, regions, chunks
    resurgo verify PATH...               full checksum verification (files or dirs;
                                         in a dir, also every delta's chain)
    resurgo rm PATH --version N [--store NAME] [--with-dependents]
                                         delete one version (and the deltas on it)
    resurgo export DIR --version N -o FILE.h5
                                         one version of an MPI store as HDF5:
                                         global arrays whole, other regions
                                         under /rankNNNNNN (needs h5py)

Container files are ``<tier>/<store>/v<version:010>.r<rank:06>.rsg``. The tool
only parses them with the native reader; it never evaluates their contents.
Whatever it prints that comes from a file or a path (store names, labels,
metadata, paths, error messages) has its control characters escaped (``\x1b``),
so that a hostile file cannot drive the terminal or forge output lines.
Exit codes: 0 success, 1 failure or damage found, 2 usage error.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import errno
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import resurgo
from resurgo import _core

QUARANTINE_SUFFIX = ".damaged"


def _parse_name(name: str) -> Optional[Tuple[int, int, bool]]:
    """(version, rank, quarantined) of a container file name, else None. The
    naming rule itself lives in the C++ core."""
    if not name.isascii():  # as every name the library writes; nor can it take a name that is not UTF-8
        return None
    quarantined = name.endswith(QUARANTINE_SUFFIX)
    parsed = _core.parse_container_file_name(name[: -len(QUARANTINE_SUFFIX)] if quarantined else name)
    return None if parsed is None else (parsed[0], parsed[1], quarantined)
PROGRESS_THRESHOLD = 64 << 20  # bytes: show a progress bar above this total

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2

# C0, DEL and C1 controls (ESC among them), the Unicode line separators, and
# the lone surrogates that stand for undecodable bytes of a file name.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _escaped(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for the byte code - 0xDC00
        code -= 0xDC00
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _safe(value: object) -> str:
    """``str(value)`` with every control character escaped, for printing text
    that comes from a file or a path."""
    return _CONTROL.sub(lambda match: _escaped(match.group()), str(value))


def _native(path: object) -> str:
    """``path`` as the native reader takes it; OSError for a path that is not
    UTF-8 (a name of undecodable bytes), which it cannot open."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise OSError(errno.EILSEQ, "the path is not UTF-8; rename it to read it", _safe(text)) from None
    return text


class UsageError(Exception):
    pass


@dataclass
class Entry:
    store: str
    version: int
    rank: int
    path: Path
    quarantined: bool


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
        parsed = _parse_name(name)
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
        parsed = _parse_name(path.name)
        if parsed:
            version, rank, quarantined = parsed
            return [Entry(path.parent.name, version, rank, path, quarantined)]
        raise UsageError(f"{path}: not a container file name (v<version>.r<rank>.rsg)")
    entries = _entries_in(path, path.resolve().name)
    for sub in sorted(path.iterdir()):
        if sub.is_dir() and not sub.name.startswith("."):
            entries.extend(_entries_in(sub, sub.name))
    entries.sort(key=lambda e: (e.store, e.version, e.rank, e.quarantined))
    return entries


def _print_table(rows: Sequence[Sequence[object]], out=None) -> None:
    out = out or sys.stdout
    rows = [[_safe(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [c.ljust(w) for c, w in zip(row, widths)]
        print("  ".join(cells).rstrip(), file=out)


# --- ls ------------------------------------------------------------------------

def cmd_ls(args: argparse.Namespace) -> int:
    entries = _scan(Path(args.path))
    if not entries:
        print(f"no container files under {_safe(args.path)}")
        return EXIT_OK
    rows = [("STORE", "VERSION", "RANK", "BASE", "SIZE", "REGIONS", "STATE")]
    for e in entries:
        try:
            size = _human(e.path.stat().st_size)
        except OSError:
            size = "?"
        regions = "-"
        base = "-"
        try:
            info = _core.inspect(_native(e.path))
            regions = str(len(info.regions))
            base = _base_text(info, short=True)
            state = "ok"
        except resurgo.Error as exc:
            state = f"damaged: {_first_line(exc)}"
        except OSError as exc:
            state = f"unreadable: {_first_line(exc)}"
        if e.quarantined:
            state = f"quarantined ({state})"
        rows.append((e.store, str(e.version), str(e.rank), base, size, regions, state))
    _print_table(rows)
    return EXIT_OK


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


def cmd_inspect(args: argparse.Namespace) -> int:
    path = str(args.file)
    if not os.path.isfile(path):
        raise UsageError(f"{path}: not a file")
    info = _core.inspect(_native(path))
    if args.json:
        # JSON escapes every control character but DEL.
        print(json.dumps(_jsonable(info, path), indent=2).replace("\x7f", "\\u007f"))
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
        ("metadata", _metadata_preview(info.metadata)),
    ]
    if info.base_version >= 0:
        region_bytes = sum(r.bytes for r in info.regions)
        fields.append(("extents", f"{len(chunks)}, {_human(raw)} of {_human(region_bytes)} "
                                  f"({raw} of {region_bytes} bytes; the base holds the rest)"))
    width = max(len(k) for k, _ in fields)
    for key, value in fields:
        print(f"{key.ljust(width)}  {_safe(value)}")
    print()
    print(f"regions ({len(info.regions)}):")
    rows = [("  ID", "LABEL", "KIND", "BYTES", "DTYPE", "SHAPE")]
    for r in info.regions:
        rows.append((f"  {r.id}", r.label, r.kind, str(r.bytes), r.dtype or "-", str(r.shape)))
    _print_table(rows)
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
            _core.verify(_native(f), progress)
        except resurgo.Error as exc:
            damaged.add(f)
            report(f"DAMAGED {_safe(f)}: {_safe(exc)}")
        except OSError as exc:
            unreadable.add(f)
            report(f"UNREADABLE {_safe(f)}: {_safe(exc)}")
        if advance is not None:
            advance(size - state["seen"])
    return damaged, unreadable


def _tables_differ(a: _core.ContainerInfo, b: _core.ContainerInfo) -> bool:
    try:
        return a.regions != b.regions
    except UnicodeDecodeError:  # a name that is not UTF-8: restart compares the bytes, this tool cannot
        return False


def _broken_chains(files: List[Path], damaged: Set[Path]) -> List[str]:
    """One line per delta whose chain is broken: a base (in the same directory,
    of the same rank) missing, damaged, or with another region table, down to
    a full version. What restart would find, without reading chunks again."""
    links: Dict[Tuple[Path, int, int], Tuple[Path, Optional[_core.ContainerInfo]]] = {}
    for f in files:
        parsed = _parse_name(f.name)
        if parsed is None or parsed[2]:
            continue
        version, rank, _ = parsed
        info = None
        if f not in damaged:
            try:
                info = _core.inspect(_native(f))
            except (resurgo.Error, OSError):
                pass
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

    lines = []
    for key in sorted(links):
        path, info = links[key]
        if info is None or info.base_version < 0:
            continue
        why = break_in(key)
        if why is not None:
            lines.append(f"BROKEN CHAIN {_safe(path)}: {_safe(why)}")
    return lines


def _verify_targets(paths: Sequence[str]) -> Tuple[List[Path], List[Path], List[Path]]:
    """(every file to verify, those found in directories, the paths missing)."""
    files: Dict[Path, None] = {}  # ordered, without repeats
    in_directories: Dict[Path, None] = {}
    missing = []
    for root in map(Path, paths):
        if not root.exists():
            missing.append(root)
            continue
        found = _collect_for_verify(root)
        files.update(dict.fromkeys(found))
        if root.is_dir():
            in_directories.update(dict.fromkeys(found))
    return list(files), list(in_directories), missing


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
    """Verifies every path given, going on past each failure; a missing path
    is a usage error (exit 2), damage a failure (exit 1)."""
    files, in_directories, missing = _verify_targets(args.path)
    for root in missing:
        print(f"resurgo verify: {_safe(root)}: no such file or directory", file=sys.stderr)
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
    if missing:
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
        print(f"resurgo rm: no container files of version {args.version} in {_safe(where)}",
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
                    print(f"removed {_safe(e.path)}")
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
        print(f"resurgo export: needs h5py ({_safe(exc)}): pip install h5py", file=sys.stderr)
        return EXIT_FAIL
    print(f"exported version {summary.version} of store '{_safe(summary.store)}' ({summary.ranks} ranks) to "
          f"{_safe(args.output)}: {summary.global_arrays} global arrays, {summary.rank_regions} regions of "
          f"single ranks")
    return EXIT_OK


# --- main -------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="resurgo", description="Inspect and manage Resurgo checkpoint files.")
    parser.add_argument("--version", action="version", version=f"resurgo {resurgo.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("ls", help="list the container files of a tier or store directory")
    p.add_argument("path", metavar="PATH")
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("inspect", help="show the header, regions and chunks of a container file")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("verify", help="verify every checksum of files or of directory trees, "
                                      "and in a tree every delta's chain")
    p.add_argument("path", metavar="PATH", nargs="+")
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("rm", help="delete the container files of one version")
    p.add_argument("path", metavar="PATH", help="tier directory or store directory")
    p.add_argument("--version", type=int, required=True, metavar="N", dest="version")
    p.add_argument("--store", metavar="NAME", help="store name (inside a tier directory)")
    p.add_argument("--with-dependents", action="store_true",
                   help="also remove the delta versions that stand on it (newest first)")
    p.set_defaults(func=cmd_rm)

    p = sub.add_parser("export", help="write one version of an MPI store to an HDF5 file")
    p.add_argument("path", metavar="DIR", help="a level's store directory (<level path>/<store>)")
    p.add_argument("--version", type=int, required=True, metavar="N", dest="version")
    p.add_argument("-o", "--output", required=True, metavar="FILE.h5", help="HDF5 file to write (replaced)")
    p.set_defaults(func=cmd_export)
    return parser


def main(argv: Optional[Iterable[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(None if argv is None else list(argv))
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"resurgo {args.command}: {_safe(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except resurgo.Error as exc:
        print(f"resurgo {args.command}: {type(exc).__name__}: {_safe(exc)}", file=sys.stderr)
        return EXIT_FAIL
    except UnicodeDecodeError as exc:  # a name in a file (label, store, dtype) that Python cannot show
        print(f"resurgo {args.command}: a name read from the file is not UTF-8 ({_safe(exc.reason)} at byte "
              f"{exc.start}); `resurgo verify` checks the file", file=sys.stderr)
        return EXIT_FAIL
    except BrokenPipeError:
        # Output piped into a reader that stopped early (resurgo ls | head).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:
        print(f"resurgo {args.command}: {_safe(exc)}", file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
