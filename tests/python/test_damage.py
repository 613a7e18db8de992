"""Restart with damaged copies: fallback to older versions, repair from the
other level, quarantine of versions damaged everywhere."""

from __future__ import annotations

import numpy as np
import pytest

import resurgo
from resurgo import _core
from helpers import flip_byte, flip_chunk_byte

N = 5000


def write_versions(dirs, name, versions=(1, 2)):
    a = np.zeros(N, dtype=np.float64)
    with resurgo.Store(name, **dirs.kw()) as store:
        store.protect("a", a)
        for v in versions:
            a[:] = v
            store.metadata = f"v{v}".encode()
            store.checkpoint(v)
        store.wait(level=4)
    for v in versions:
        assert dirs.file(2, name, v).is_file()
        assert dirs.file(4, name, v).is_file()


def fresh_store(dirs, name):
    a = np.full(N, -1.0)
    store = resurgo.Store(name, **dirs.kw())
    store.protect("a", a)
    return store, a


def test_damaged_on_both_levels_falls_back_to_previous_version(dirs):
    write_versions(dirs, "both")
    flip_chunk_byte(dirs.file(2, "both", 2))
    flip_chunk_byte(dirs.file(4, "both", 2))
    store, a = fresh_store(dirs, "both")
    with store:
        assert store.restart() == 1
        assert (a == 1).all()
        assert store.metadata == b"v1"
        report = store.last_restart
        assert report.version == 1
        assert len(report.skipped) >= 2  # one line per damaged copy
        joined = "\n".join(report.skipped)
        assert str(dirs.file(2, "both", 2)) in joined
        assert str(dirs.file(4, "both", 2)) in joined
        # The damaged version is quarantined and no longer offered.
        assert store.latest() == 1
        assert [i.version for i in store.versions()] == [1]
    for level in (2, 4):
        path = dirs.file(level, "both", 2)
        assert not path.exists()
        assert path.with_name(path.name + ".damaged").is_file()


def test_damaged_on_l2_only_restores_newest_from_l4_and_repairs_l2(dirs):
    write_versions(dirs, "l2bad")
    l2 = dirs.file(2, "l2bad", 2)
    flip_chunk_byte(l2)
    with pytest.raises(resurgo.CorruptionError):
        _core.verify(str(l2))
    store, a = fresh_store(dirs, "l2bad")
    with store:
        assert store.restart() == 2
        assert (a == 2).all()
        report = store.last_restart
        assert report.level == 4
        assert any(str(l2) in line for line in report.skipped), report.skipped
        store.wait()  # a repair may run in the background
    # Repaired: the L2 copy verifies again and holds version 2.
    assert l2.is_file()
    _core.verify(str(l2))
    assert _core.inspect(str(l2)).version == 2
    store, a = fresh_store(dirs, "l2bad")
    with store:
        assert store.restart() == 2
        assert store.last_restart.level == 2
        assert (a == 2).all()


def test_specific_version_damaged_everywhere_raises(dirs):
    write_versions(dirs, "specific")
    flip_chunk_byte(dirs.file(2, "specific", 2))
    flip_chunk_byte(dirs.file(4, "specific", 2))
    store, a = fresh_store(dirs, "specific")
    with store:
        with pytest.raises(resurgo.CorruptionError, match="2"):
            store.restart(2)
        assert store.restart(1) == 1
        assert (a == 1).all()


def test_damaged_header_on_both_levels_falls_back(dirs):
    write_versions(dirs, "header")
    for level in (2, 4):
        flip_byte(dirs.file(level, "header", 2), 12)  # inside the header
    store, a = fresh_store(dirs, "header")
    with store:
        assert store.restart() == 1
        assert (a == 1).all()


def test_truncated_newest_falls_back(dirs):
    write_versions(dirs, "trunc")
    for level in (2, 4):
        path = dirs.file(level, "trunc", 2)
        size = path.stat().st_size
        with open(path, "r+b") as f:
            f.truncate(size // 2)
    store, a = fresh_store(dirs, "trunc")
    with store:
        assert store.restart() == 1
        assert (a == 1).all()


def test_damage_on_l4_only_does_not_matter_for_restart(dirs):
    write_versions(dirs, "l4bad")
    flip_chunk_byte(dirs.file(4, "l4bad", 2))
    store, a = fresh_store(dirs, "l4bad")
    with store:
        assert store.restart() == 2
        assert store.last_restart.level == 2
        assert (a == 2).all()


def test_missing_l2_copy_restores_from_l4(dirs):
    write_versions(dirs, "gone")
    dirs.file(2, "gone", 2).unlink()
    store, a = fresh_store(dirs, "gone")
    with store:
        assert store.latest() == 2
        assert store.restart() == 2
        assert store.last_restart.level == 4
        assert (a == 2).all()


def test_leftover_temporary_file_is_ignored(dirs):
    write_versions(dirs, "tmpfile")
    junk = dirs.level_dir(2, "tmpfile") / ".v0000000009.r000000.rsg.tmp-4242"
    junk.write_bytes(b"half-written" * 100)
    store, a = fresh_store(dirs, "tmpfile")
    with store:
        assert store.latest() == 2
        assert store.restart() == 2
        assert (a == 2).all()
        assert 9 not in [i.version for i in store.versions()]


def test_every_version_damaged_raises_corruption(dirs):
    write_versions(dirs, "allbad")
    for v in (1, 2):
        for level in (2, 4):
            flip_chunk_byte(dirs.file(level, "allbad", v))
    store, a = fresh_store(dirs, "allbad")
    with store:
        with pytest.raises(resurgo.CorruptionError):
            store.restart()


def test_damaged_middle_chunk_of_a_multi_chunk_version(dirs):
    a = np.zeros(100_000, dtype=np.float64)  # 800 KB = 13 chunks of 64 KiB
    kw = dirs.kw(pipeline_chunk_size="64KiB")
    with resurgo.Store("chunks", **kw) as store:
        store.protect("a", a)
        for v in (1, 2):
            a[:] = np.arange(a.size) * v
            store.checkpoint(v)
        store.wait(level=4)
    info = _core.inspect(str(dirs.file(2, "chunks", 2)))
    assert len(info.chunks) == 13
    for level in (2, 4):
        flip_chunk_byte(dirs.file(level, "chunks", 2), chunk=7)
    b = np.full(100_000, -1.0)
    with resurgo.Store("chunks", **kw) as store:
        store.protect("a", b)
        assert store.restart() == 1
    assert np.array_equal(b, np.arange(b.size) * 1.0)
