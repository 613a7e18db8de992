"""Corruption campaign (docs/reliability.md).

Damages the newest committed file of a store in randomized ways (bit flips in
header, index, chunk records, chunk data and footer; truncation; appended
bytes; zeroed ranges; swapped chunks; a file of another version renamed in
place) and checks, for every damage, that

- `resurgo verify FILE` reports it (exit status 1, naming the file);
- restart never restores it: with an intact copy at the other level, restart
  restores the version from there and rewrites the damaged copy; when the
  damaged file is the only copy, restart falls back to the previous version,
  bit for bit, and quarantines the damaged file;
- nothing crashes (the campaign runs in this process: a crash ends it).

Every layout exists three times: written with capture.mode "copy", "fork"
(a forked child writes the first level) and "delta" (versions 2 and 3 are
deltas on 1 and 2, tracked by hash), so files of every writer are damaged;
under delta a damaged version 3 must fall back to version 2, rebuilt from
its own chain.

    python tests/fault/corruption_campaign.py [--trials N] [--seed S]

tests/python/test_campaigns.py runs 1,000 trials; `make soak` runs more.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import numpy as np

import resurgo
from resurgo import _core
from resurgo import cli

FOOTER_BYTES = 40
RECORD_BYTES = 48
VERSIONS = (1, 2, 3)  # 3 is the one damaged; 2 is the fallback


def container_name(version: int) -> str:
    return f"v{version:010d}.r000000.rsg"


def state_of(version: int, compressible: bool) -> Dict[str, np.ndarray]:
    """The protected arrays of `version`: random doubles, or smooth values
    that compress, plus an odd-sized integer region."""
    generator = np.random.default_rng(version)
    if compressible:
        field = np.repeat(generator.integers(0, 50, 3000).astype(np.float64), 10)
    else:
        field = generator.standard_normal(30000)
    return {"field": field, "cells": generator.integers(-9, 9, 17771, dtype=np.int32)}


@dataclass
class Layout:
    """One store whose versions 1-3 were written once; damage goes to a copy
    of version 3 and is undone after each trial."""

    root: Path
    name: str
    two_levels: bool  # L4 holds an intact copy of every version
    compressible: bool
    capture_mode: str  # "copy", "fork" or "delta": who wrote the files
    pristine: Dict[int, bytes] = field(default_factory=dict)

    def settings(self) -> dict:
        return dict(local_path=str(self.root / "l2"), persistent_path=str(self.root / "l4"),
                    persistent_every=1 if self.two_levels else 0, local_keep=0, persistent_keep=0,
                    pipeline_chunk_size="64KiB", pipeline_compress="zstd" if self.compressible else "none",
                    capture_mode=self.capture_mode, track_method="hash", log_level="off")

    def file(self, version: int, level: int = 2) -> Path:
        return self.root / ("l2" if level == 2 else "l4") / self.name / container_name(version)

    def write(self) -> None:
        arrays = {label: np.empty_like(a) for label, a in state_of(0, self.compressible).items()}
        with resurgo.Store(self.name, **self.settings()) as store:
            for label, array in arrays.items():
                store.protect(label, array)
            for version in VERSIONS:
                for label, array in state_of(version, self.compressible).items():
                    arrays[label][...] = array
                store.metadata = f"version {version}".encode()
                store.checkpoint(version)
            store.wait(level=4 if self.two_levels else 2)
            captured = {stats.capture for stats in store.stats()}
        # A delta store's first version is a full copy.
        if captured != ({"copy", "delta"} if self.capture_mode == "delta" else {self.capture_mode}):
            raise AssertionError(f"{self.name}: versions captured by {captured}, not {self.capture_mode}")
        self.pristine = {version: self.file(version).read_bytes() for version in VERSIONS}

    def undo(self) -> None:
        target = self.file(3)
        quarantined = target.with_name(target.name + ".damaged")
        if quarantined.exists():
            quarantined.unlink()
        target.write_bytes(self.pristine[3])


# ------------------------------------------------------------------ damages

Damage = Callable[[bytes, random.Random, "Layout"], bytes]


def _sections(data: bytes, path: Path) -> Tuple[int, int, Tuple[_core.ChunkInfo, ...]]:
    info = _core.inspect(str(path))
    chunks = info.chunks
    header_length = min(c.file_offset for c in chunks) - RECORD_BYTES
    return header_length, info.index_offset, chunks


def _flip_in(data: bytes, rng: random.Random, begin: int, end: int) -> bytes:
    out = bytearray(data)
    offset = rng.randrange(begin, end)
    out[offset] ^= 1 << rng.randrange(8)
    return bytes(out)


def flip_header(data, rng, layout):
    header_length, _, _ = _sections(data, layout.file(3))
    return _flip_in(data, rng, 0, header_length)


def flip_index(data, rng, layout):
    _, index_offset, _ = _sections(data, layout.file(3))
    return _flip_in(data, rng, index_offset, len(data) - FOOTER_BYTES)


def flip_chunk_record(data, rng, layout):
    chunk = rng.choice(_sections(data, layout.file(3))[2])
    return _flip_in(data, rng, chunk.file_offset - RECORD_BYTES, chunk.file_offset)


def flip_chunk_data(data, rng, layout):
    chunk = rng.choice(_sections(data, layout.file(3))[2])
    return _flip_in(data, rng, chunk.file_offset, chunk.file_offset + chunk.stored_length)


def flip_footer(data, rng, layout):
    return _flip_in(data, rng, len(data) - FOOTER_BYTES, len(data))


def truncate(data, rng, layout):
    return data[:rng.randrange(len(data))]


def append_bytes(data, rng, layout):
    return data + rng.randbytes(rng.randrange(1, 4096))


def zero_range(data, rng, layout):
    while True:
        begin = rng.randrange(len(data))
        end = min(len(data), begin + rng.randrange(1, 65536))
        if any(data[begin:end]):  # zeroing zeros changes nothing
            return data[:begin] + bytes(end - begin) + data[end:]


def swap_chunks(data, rng, layout):
    """Exchanges the stored bytes of two chunks of equal length, leaving every
    record and the index as they were."""
    by_length: Dict[int, List[_core.ChunkInfo]] = {}
    for chunk in _sections(data, layout.file(3))[2]:
        by_length.setdefault(chunk.stored_length, []).append(chunk)
    groups = [group for group in by_length.values() if len(group) >= 2]
    while groups:
        first, second = rng.sample(rng.choice(groups), 2)
        a = slice(first.file_offset, first.file_offset + first.stored_length)
        b = slice(second.file_offset, second.file_offset + second.stored_length)
        if data[a] != data[b]:
            out = bytearray(data)
            out[a], out[b] = data[b], data[a]
            return bytes(out)
    raise AssertionError(f"{layout.name}: no two distinct chunks of equal length to swap")


def other_version(data, rng, layout):
    return layout.pristine[rng.choice((1, 2))]


DAMAGES: Dict[str, Damage] = {
    "bit flip in header": flip_header,
    "bit flip in index": flip_index,
    "bit flip in chunk record": flip_chunk_record,
    "bit flip in chunk data": flip_chunk_data,
    "bit flip in footer": flip_footer,
    "truncation": truncate,
    "appended bytes": append_bytes,
    "zeroed range": zero_range,
    "swapped chunks": swap_chunks,
    "other version renamed in place": other_version,
}


# ------------------------------------------------------------------- checks

@dataclass
class Tally:
    trials: int = 0
    damages: Counter = field(default_factory=Counter)
    capture_modes: Counter = field(default_factory=Counter)  # trials per capture mode of the damaged file's writer
    missed_by_verify: int = 0
    missed_by_restart: int = 0       # restart returned the damaged version's bytes
    wrong_fallback: int = 0          # restart returned something else than it must
    not_repaired: int = 0            # damaged copy left in place or not quarantined
    failures: List[str] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return self.missed_by_verify + self.missed_by_restart + self.wrong_fallback + self.not_repaired

    def fail(self, counter: str, trial: int, layout: Layout, damage: str, what: str) -> None:
        setattr(self, counter, getattr(self, counter) + 1)
        self.failures.append(f"trial {trial} ({layout.name}, {damage}): {what}")


def verify_reports(path: Path) -> Tuple[bool, str]:
    """Runs `resurgo verify PATH` in this process; whether it reported damage
    naming the file, and its output."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(["verify", "--no-progress", str(path)])
    text = out.getvalue() + err.getvalue()
    return status == 1 and str(path) in text, text


def restart(layout: Layout) -> Tuple[int, Dict[str, np.ndarray], bytes, dict]:
    arrays = {label: np.full_like(a, -1) for label, a in state_of(0, layout.compressible).items()}
    with resurgo.Store(layout.name, **layout.settings()) as store:
        for label, array in arrays.items():
            store.protect(label, array)
        version = store.restart()
        return version, arrays, store.metadata, store.last_restart


def holds_exactly(version: int, arrays: Dict[str, np.ndarray], metadata: bytes, layout: Layout) -> bool:
    expected = state_of(version, layout.compressible)
    return metadata == f"version {version}".encode() and all(
        arrays[label].tobytes() == expected[label].tobytes() for label in expected)


def run_trial(number: int, layout: Layout, damage_name: str, rng: random.Random, tally: Tally) -> None:
    target = layout.file(3)
    target.write_bytes(DAMAGES[damage_name](layout.pristine[3], rng, layout))
    tally.damages[damage_name] += 1
    tally.capture_modes[layout.capture_mode] += 1

    reported, text = verify_reports(target)
    if not reported:
        tally.fail("missed_by_verify", number, layout, damage_name, "resurgo verify said: " + text.strip())

    version, arrays, metadata, report = restart(layout)
    expected = 3 if layout.two_levels else 2
    if version == 3 and not layout.two_levels:
        tally.fail("missed_by_restart", number, layout, damage_name, "restart restored the damaged version")
    elif version != expected or not holds_exactly(version, arrays, metadata, layout):
        tally.fail("wrong_fallback", number, layout, damage_name,
                   f"restart returned version {version}, expected exactly version {expected}")
    elif not any(str(target) in line for line in report.skipped):
        tally.fail("missed_by_restart", number, layout, damage_name, "restart did not name the damaged file")

    if layout.two_levels:
        if not target.exists() or target.read_bytes() != layout.pristine[3]:
            tally.fail("not_repaired", number, layout, damage_name, "the damaged L2 copy was not rewritten")
    elif target.exists() or not target.with_name(target.name + ".damaged").exists():
        tally.fail("not_repaired", number, layout, damage_name, "the damaged file was not quarantined")
    layout.undo()
    tally.trials += 1


def run(trials: int, seed: int, root: Path) -> Tally:
    layouts = [Layout(root / f"{name}-{mode}", f"{name}-{mode}", two_levels, compressible, mode)
               for name, two_levels, compressible in (("single", False, False), ("mirrored", True, False),
                                                      ("compressed", False, True))
               for mode in ("copy", "fork", "delta")]
    for layout in layouts:
        layout.write()
    rng = random.Random(seed)
    tally = Tally()
    names = list(DAMAGES)
    for number in range(trials):
        damage_name = names[number % len(names)]  # every kind equally often
        candidates = [l for l in layouts if damage_name != "swapped chunks" or not l.compressible]
        run_trial(number, rng.choice(candidates), damage_name, rng, tally)
    return tally


def summary(tally: Tally, seed: int, seconds: float) -> str:
    lines = [f"corruption campaign: seed {seed}, {tally.trials} damaged files in {seconds:.1f} s"]
    lines += [f"  {name:<32} {tally.damages[name]}" for name in DAMAGES]
    lines.append("  written by capture.mode: " + ", ".join(
        f"{mode} {tally.capture_modes[mode]}" for mode in ("copy", "fork", "delta")))
    lines.append(f"  missed by verify: {tally.missed_by_verify}; missed by restart: {tally.missed_by_restart}; "
                 f"wrong fallback: {tally.wrong_fallback}; not repaired or quarantined: {tally.not_repaired}")
    lines += ["  FAILED " + line for line in tally.failures[:20]]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4), "little"))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="resurgo-corruption-") as root:
        tally = run(args.trials, args.seed, Path(root))
    print(summary(tally, args.seed, time.perf_counter() - started))
    return 1 if tally.violations else 0


if __name__ == "__main__":
    sys.exit(main())
