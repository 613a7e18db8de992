"""need_checkpoint from Python (docs/interval.md); the policies' arithmetic
is tested in C++ (checkpoint_interval_test.cpp)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import resurgo


def test_without_a_policy_need_checkpoint_is_an_error(dirs):
    with resurgo.Store("n", local_path=dirs.l2, persistent_every=0) as store:
        with pytest.raises(resurgo.StateError, match="interval.policy"):
            store.need_checkpoint()
        assert store.checkpoint_interval is None


def test_fixed_interval(dirs):
    with resurgo.Store("f", local_path=dirs.l2, persistent_every=0, interval_policy="seconds",
                       interval_seconds="1h") as store:
        assert store.need_checkpoint() is False
        assert store.checkpoint_interval == 3600


def test_young_daly_measures_the_cost_at_the_first_checkpoint(dirs):
    state = np.ones(4096)
    with resurgo.Store("y", local_path=dirs.l2, persistent_every=0, interval_policy="young-daly",
                       interval_mtbf="1d") as store:
        store.protect("u", state)
        assert store.need_checkpoint() is True
        store.checkpoint(1)
        cost = store.stats()[-1].blocking_seconds
        assert store.checkpoint_interval == pytest.approx(math.sqrt(2 * cost * 86400))
        assert store.need_checkpoint() is False  # minutes away, for a cost of microseconds


def test_bad_values_name_the_key(dirs):
    with pytest.raises(resurgo.ConfigError, match="interval"):
        resurgo.Store("b", local_path=dirs.l2, interval_policy="sometimes")
