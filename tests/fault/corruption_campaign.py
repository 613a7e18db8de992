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

Every layout exists four times: written with capture.mode "copy", "fork"
(a forked child writes the first level), "delta" (versions 2 and 3 are
deltas on 1 and 2, tracked by hash) and "compacted" (the same deltas with
delta.compact_after = 1: version 3, two deltas deep, is rewritten as a full
version on every level by a compaction; version 2 changes only the field
and version 3 only half the cells, so a restart of a chain reads every
link), so
files of every writer are damaged; under delta a damaged version 3 must fall
back to version 2, rebuilt from its own chain.

Compaction trials (one per 40 trials) damage a link of a chain before the
compaction runs: versions 1 and 2 are checkpointed, a chunk of version 1 or 2
that version 3 needs is damaged at L2, then version 3 is checkpointed and the
store closed. The compaction must leave version 3 a delta (never a full
version built from damaged bytes), and restart must restore version 3 from
L4's intact chain when there is one, else the newest version whose chain is
intact (version 1 when version 2 was damaged), else raise CorruptionError
naming the damaged file (version 1 damaged: no chain is intact).

    python tests/fault/corruption_campaign.py [--trials N] [--seed S]

tests/python/test_campaigns.py runs 1,000 trials; `make soak` runs more.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import shutil
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
WRITERS = ("copy", "fork", "delta", "compacted")
COMPACTION_TRIAL_EVERY = 40
CELLS_KEPT = 8192  # cells version 3 leaves as version 1 wrote them: 8 blocks of 4 KiB


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


def chain_state_of(version: int, compressible: bool) -> Dict[str, np.ndarray]:
    """The arrays of `version` in a chain where each version changes part of
    the state: 2 the field, 3 the second half of the cells. Restoring 3 needs
    chunks of every link: 1's first half of the cells, 2's field."""
    cells = state_of(1, compressible)["cells"].copy()
    if version >= 3:
        cells[CELLS_KEPT:] = state_of(version, compressible)["cells"][CELLS_KEPT:]
    return {"field": state_of(min(version, 2), compressible)["field"], "cells": cells}


@dataclass
class Layout:
    """One store whose versions 1-3 were written once; damage goes to a copy
    of version 3 and is undone after each trial."""

    root: Path
    name: str
    two_levels: bool  # L4 holds an intact copy of every version
    compressible: bool
    writer: str  # one of WRITERS: who wrote the files
    pristine: Dict[int, bytes] = field(default_factory=dict)

    def settings(self) -> dict:
        return dict(local_path=str(self.root / "l2"), persistent_path=str(self.root / "l4"),
                    persistent_every=1 if self.two_levels else 0, local_keep=0, persistent_keep=0,
                    pipeline_chunk_size="64KiB", pipeline_compress="zstd" if self.compressible else "none",
                    capture_mode="delta" if self.writer == "compacted" else self.writer, track_method="hash",
                    delta_compact_after=1 if self.writer == "compacted" else 0, log_level="off")

    def state(self, version: int) -> Dict[str, np.ndarray]:
        return (chain_state_of if self.writer == "compacted" else state_of)(version, self.compressible)

    def file(self, version: int, level: int = 2) -> Path:
        return self.root / ("l2" if level == 2 else "l4") / self.name / container_name(version)

    def write(self, before_last: Callable[[], None] = lambda: None) -> None:
        """Checkpoints VERSIONS; `before_last` runs once the others are
        durable on every level, before the last one is taken. Closing the
        store waits for its compactions."""
        arrays = {label: np.empty_like(a) for label, a in self.state(0).items()}
        with resurgo.Store(self.name, **self.settings()) as store:
            for label, array in arrays.items():
                store.protect(label, array)
            for version in VERSIONS:
                if version == VERSIONS[-1]:
                    store.wait(level=4 if self.two_levels else 2)
                    before_last()
                for label, array in self.state(version).items():
                    arrays[label][...] = array
                store.metadata = f"version {version}".encode()
                store.checkpoint(version)
            store.wait(level=4 if self.two_levels else 2)
            captured = {stats.capture for stats in store.stats()}
        # A delta store's first version is a full copy.
        expected = {"copy", "delta"} if self.settings()["capture_mode"] == "delta" else {self.writer}
        if captured != expected:
            raise AssertionError(f"{self.name}: versions captured by {captured}, not {self.writer}")

    def write_pristine(self) -> None:
        self.write()
        if self.writer == "compacted":
            for level in ((2, 4) if self.two_levels else (2,)):
                bases = [base_of(self.file(version, level)) for version in VERSIONS]
                if bases != [-1, 1, -1]:
                    raise AssertionError(f"{self.name}: L{level} bases {bases}, not a compacted version 3")
        self.pristine = {version: self.file(version).read_bytes() for version in VERSIONS}

    def undo(self) -> None:
        target = self.file(3)
        quarantined = target.with_name(target.name + ".damaged")
        if quarantined.exists():
            quarantined.unlink()
        target.write_bytes(self.pristine[3])


# ------------------------------------------------------------------ damages

Damage = Callable[[bytes, random.Random, "Layout"], bytes]


def base_of(path: Path) -> int:
    return _core.inspect(str(path)).base_version


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
    writers: Counter = field(default_factory=Counter)  # trials per writer (WRITERS) of the damaged file
    compaction_trials: Counter = field(default_factory=Counter)  # per layout and damaged link
    compaction_used_damage: int = 0  # a compaction wrote a full version from a damaged chain
    missed_by_verify: int = 0
    missed_by_restart: int = 0       # restart returned the damaged version's bytes
    wrong_fallback: int = 0          # restart returned something else than it must
    not_repaired: int = 0            # damaged copy left in place or not quarantined
    failures: List[str] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return (self.missed_by_verify + self.missed_by_restart + self.wrong_fallback + self.not_repaired
                + self.compaction_used_damage)

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
    arrays = {label: np.full_like(a, -1) for label, a in layout.state(0).items()}
    with resurgo.Store(layout.name, **layout.settings()) as store:
        for label, array in arrays.items():
            store.protect(label, array)
        version = store.restart()
        return version, arrays, store.metadata, store.last_restart


def holds_exactly(version: int, arrays: Dict[str, np.ndarray], metadata: bytes, layout: Layout) -> bool:
    expected = layout.state(version)
    return metadata == f"version {version}".encode() and all(
        arrays[label].tobytes() == expected[label].tobytes() for label in expected)


def run_trial(number: int, layout: Layout, damage_name: str, rng: random.Random, tally: Tally) -> None:
    target = layout.file(3)
    target.write_bytes(DAMAGES[damage_name](layout.pristine[3], rng, layout))
    tally.damages[damage_name] += 1
    tally.writers[layout.writer] += 1

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


def damage_needed_chunk(layout: Layout, version: int, rng: random.Random) -> Path:
    """Flips a bit in a chunk of `version`'s L2 copy that restoring version 3
    reads (chain_state_of: version 2's field, version 1's first cells)."""
    target = layout.file(version)
    data = target.read_bytes()
    needed = [c for c in _core.inspect(str(target)).chunks
              if (c.region, version) == (0, 2) or (c.region, version) == (1, 1) and c.offset < CELLS_KEPT * 4]
    chunk = rng.choice(needed)
    target.write_bytes(_flip_in(data, rng, chunk.file_offset, chunk.file_offset + chunk.stored_length))
    return target


def run_compaction_trial(number: int, root: Path, rng: random.Random, tally: Tally) -> None:
    """Damages a link of version 3's chain before its compaction runs."""
    two_levels, link = rng.random() < 0.5, rng.choice((1, 2))
    name = f"link-{number}"
    layout = Layout(root / name, name, two_levels, rng.random() < 0.5, "compacted")
    damaged: List[Path] = []
    layout.write(before_last=lambda: damaged.append(damage_needed_chunk(layout, link, rng)))
    expected = 3 if two_levels else 1 if link == 2 else None
    outcome = f"{'mirrored' if two_levels else 'single'}, version {link} damaged"
    tally.compaction_trials[outcome] += 1
    what = f"compaction over a damaged version {link}"
    if base_of(layout.file(3)) != 2:
        tally.compaction_used_damage += 1
        tally.failures.append(f"compaction trial {number} ({outcome}): version 3 at L2 is no longer a delta on 2")
    try:
        version, arrays, metadata, report = restart(layout)
    except resurgo.CorruptionError as error:
        if expected is not None or str(damaged[0]) not in str(error):
            tally.fail("wrong_fallback", number, layout, what, f"restart raised: {error}")
    else:
        if version != expected or not holds_exactly(version, arrays, metadata, layout):
            tally.fail("wrong_fallback", number, layout, what,
                       f"restart returned version {version}, expected exactly version {expected}")
        elif not two_levels and not any(str(damaged[0]) in line for line in report.skipped):
            tally.fail("missed_by_restart", number, layout, what, "restart did not name the damaged file")
    shutil.rmtree(layout.root)


def run(trials: int, seed: int, root: Path) -> Tally:
    layouts = [Layout(root / f"{name}-{writer}", f"{name}-{writer}", two_levels, compressible, writer)
               for name, two_levels, compressible in (("single", False, False), ("mirrored", True, False),
                                                      ("compressed", False, True))
               for writer in WRITERS]
    for layout in layouts:
        layout.write_pristine()
    rng = random.Random(seed)
    tally = Tally()
    names = list(DAMAGES)
    for number in range(trials):
        damage_name = names[number % len(names)]  # every kind equally often
        candidates = [l for l in layouts if damage_name != "swapped chunks" or not l.compressible]
        run_trial(number, rng.choice(candidates), damage_name, rng, tally)
        if number % COMPACTION_TRIAL_EVERY == COMPACTION_TRIAL_EVERY - 1:
            run_compaction_trial(number, root, rng, tally)
    return tally


def summary(tally: Tally, seed: int, seconds: float) -> str:
    lines = [f"corruption campaign: seed {seed}, {tally.trials} damaged files in {seconds:.1f} s"]
    lines += [f"  {name:<32} {tally.damages[name]}" for name in DAMAGES]
    lines.append("  written by: " + ", ".join(f"{writer} {tally.writers[writer]}" for writer in WRITERS))
    lines.append(f"  compaction trials (a link damaged before the compaction): {sum(tally.compaction_trials.values())}"
                 + "".join(f"; {outcome}: {count}" for outcome, count in sorted(tally.compaction_trials.items())))
    lines.append(f"  missed by verify: {tally.missed_by_verify}; missed by restart: {tally.missed_by_restart}; "
                 f"wrong fallback: {tally.wrong_fallback}; not repaired or quarantined: {tally.not_repaired}; "
                 f"compactions over damage: {tally.compaction_used_damage}")
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
