"""The container reader rejects damaged files with resurgo errors (never a
crash, never silently accepting damaged header, index, footer or data)."""

from __future__ import annotations

import random

import numpy as np
import pytest

import resurgo
from resurgo import _core

RECORD_BYTES = 48  # in-stream chunk record header (format::kChunkRecordBytes)


@pytest.fixture
def container(dirs):
    a = np.arange(300, dtype=np.float64)
    b = np.arange(50, dtype=np.int8)
    with resurgo.Store("fmt", **dirs.kw(persistent_every=0)) as store:
        store.protect("a", a)
        store.protect("b", b)
        store.metadata = b"meta"
        store.checkpoint(3)
        store.wait()
    path = dirs.file(2, "fmt", 3)
    return path, path.read_bytes(), _core.inspect(str(path))


def _write(tmp_path, data: bytes):
    p = tmp_path / "mutant.rsg"
    p.write_bytes(data)
    return str(p)


def test_inspect_fields(container):
    path, raw, info = container
    assert info.store == "fmt" and info.version == 3 and info.rank == 0
    assert info.file_size == len(raw)
    assert info.metadata == b"meta"
    assert info.created_unix_ns > 0
    assert 0 < info.index_offset < len(raw)
    for c in info.chunks:
        assert c.file_offset + c.stored_length <= info.index_offset
        assert isinstance(c.checksum, int) and 0 <= c.checksum < 2**64


def test_every_header_index_footer_byte_is_covered(container, tmp_path):
    path, raw, info = container
    data_or_record = set()
    for c in info.chunks:
        data_or_record.update(range(c.file_offset - RECORD_BYTES,
                                    c.file_offset + c.stored_length))
    structural = [i for i in range(len(raw)) if i not in data_or_record]
    assert len(structural) > 100
    undetected = []
    for offset in structural:
        mutant = bytearray(raw)
        mutant[offset] ^= 0x10
        try:
            _core.inspect(_write(tmp_path, bytes(mutant)))
            undetected.append(offset)
        except (resurgo.CorruptionError, resurgo.FormatError):
            pass
    assert undetected == []


def test_chunk_data_damage_is_found_by_verify_not_inspect(container, tmp_path):
    path, raw, info = container
    rng = random.Random(7)
    for c in info.chunks:
        for _ in range(20):
            offset = c.file_offset + rng.randrange(c.stored_length)
            mutant = bytearray(raw)
            mutant[offset] ^= 1 << rng.randrange(8)
            p = _write(tmp_path, bytes(mutant))
            _core.inspect(p)  # header and index are intact
            with pytest.raises(resurgo.CorruptionError):
                _core.verify(p)


def test_truncated_and_random_files_raise_resurgo_errors(container, tmp_path):
    path, raw, info = container
    for length in range(0, len(raw), 13):
        p = _write(tmp_path, raw[:length])
        with pytest.raises((resurgo.CorruptionError, resurgo.FormatError)):
            _core.verify(p)
    rng = random.Random(11)
    detected = 0
    for _ in range(200):
        mutant = bytearray(raw)
        start = rng.randrange(len(raw) - 8)
        mutant[start:start + 8] = rng.randbytes(8)
        try:
            _core.verify(_write(tmp_path, bytes(mutant)))
        except (resurgo.CorruptionError, resurgo.FormatError):
            detected += 1  # anything else (crash, MemoryError, ...) fails the test
    # Only windows entirely inside the redundant in-stream chunk record
    # headers (2 x 48 of ~2900 bytes) may go unnoticed.
    assert detected >= 180
