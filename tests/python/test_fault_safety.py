"""What a failed restart leaves in the protected arrays, as the Python layer
reports it (issue 26): the error names the arrays it may have partly
overwritten and those it left unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import resurgo
from helpers import flip_byte, flip_chunk_byte

N = 131072  # float64: 1 MiB, four chunks of 256 KiB
SENTINEL = -7.0


def test_a_failed_restart_names_the_arrays_it_changed(dirs):
    # One pipeline thread reads the chunks in file order: all of 'u', then
    # the damaged first chunk of 'v' (read straight into 'v') stops it.
    kw = dirs.kw(persistent_every=0, pipeline_threads=1, pipeline_chunk_size="256KiB")
    arrays = {label: np.full(N, float(i + 1)) for i, label in enumerate("uvw")}
    with resurgo.Store("faults", **kw) as store:
        for label, array in arrays.items():
            store.protect(label, array)
        store.checkpoint(1)
        store.wait(1)
    flip_chunk_byte(dirs.file(2, "faults", 1), chunk=4)

    for array in arrays.values():
        array[:] = SENTINEL
    with resurgo.Store("faults", **kw) as store:
        for label, array in arrays.items():
            store.protect(label, array)
        with pytest.raises(resurgo.CorruptionError) as raised:
            store.restart(1)
    message = str(raised.value)
    assert ("regions 'u', 'v' may have been partly overwritten with version 1's data before the failure; "
            "'w' is unchanged") in message
    assert np.all(arrays["u"] == 1.0)
    assert np.all(arrays["w"] == SENTINEL)


def test_a_header_found_damaged_changes_no_array(dirs):
    kw = dirs.kw(persistent_every=0)
    a = np.arange(1000, dtype=np.float64)
    with resurgo.Store("header", **kw) as store:
        store.protect("a", a)
        store.checkpoint(1)
        store.wait(1)
    flip_byte(dirs.file(2, "header", 1), 12)  # inside the header: found before any chunk is read
    a[:] = SENTINEL
    with resurgo.Store("header", **kw) as store:
        store.protect("a", a)
        with pytest.raises(resurgo.CorruptionError, match=r"the protected regions are unchanged"):
            store.restart(1)
    assert np.all(a == SENTINEL)
