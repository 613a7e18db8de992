"""device.ordinal through the Python API (docs/gpu.md, "Which device").

The device choice itself runs against the fake CUDA driver in the C++
suite (tests/cpp/gpu_device_ordinal_test.cpp); here: the keyword reaches
the key, bad values are refused naming it, and the L0 cache's stats say
which device it is on (0 for the host backend, which has no devices).
"""

from __future__ import annotations

import pytest

import resurgo


def test_the_l0_stats_name_the_device(dirs):
    kw = dirs.kw(device_backend="host", device_capacity="4MiB", device_ordinal="auto")
    with resurgo.Store("ordinal", **kw) as store:
        cache = store.device_stats().cache
        assert cache is not None
        assert cache.device == 0


@pytest.mark.parametrize("value", ["-1", "first", "1.5"])
def test_a_bad_ordinal_is_refused_naming_the_key(dirs, value):
    with pytest.raises(resurgo.ConfigError, match=r"device\.ordinal.*\"auto\" or a device ordinal"):
        resurgo.Store("ordinal", **dirs.kw(device_backend="host", device_ordinal=value))
