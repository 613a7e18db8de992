"""capture_mode="delta" from Python: stats name the base and the bytes the
delta saved, and restart rebuilds the newest version from its chain."""

import mmap

import numpy as np
import pytest

import resurgo

PAGE = mmap.PAGESIZE


def _store(tmp_path, method="hash"):
    return resurgo.Store(
        "d",
        local_path=str(tmp_path / "l2"),
        persistent_every=0,
        capture_mode="delta",
        track_method=method,
        track_granularity=str(PAGE),
        log_level="off",
    )


def test_delta_saves_the_written_pages_and_restart_rebuilds_the_chain(tmp_path):
    state = np.zeros(64 * PAGE // 8)
    with _store(tmp_path) as store:
        store.protect("state", state)
        store.checkpoint(1)
        per_page = PAGE // 8
        for page in (2, 9, 33):
            state[page * per_page] = page
        store.checkpoint(2)
        state[40 * per_page] = 40
        store.checkpoint(3)
        store.wait()
        stats = {s.version: s for s in store.stats()}
        assert stats[1].base_version is None and stats[1].capture == "copy"
        assert stats[2].base_version == 1 and stats[2].capture == "delta"
        assert stats[2].captured_bytes == 3 * PAGE
        assert stats[3].captured_bytes == PAGE
        assert stats[3].tracker == "hash"
        assert stats[3].granularity_bytes == PAGE
        expected = state.copy()
        state[:] = -1
        assert store.restart() == 3
        np.testing.assert_array_equal(state, expected)


def test_unknown_tracking_method_is_a_config_error(tmp_path):
    with pytest.raises(resurgo.ConfigError, match="track.method"):
        _store(tmp_path, method="dirty")
