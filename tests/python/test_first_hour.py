"""What a new user meets in the first hour (issue 28), from Python: a store
makes its directories only when the first version goes there, and a program
that protects a new array still restarts from its old checkpoints
(restart(regions=...))."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import resurgo


def everything_under(path: Path) -> list:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# --- directories -------------------------------------------------------------------

def test_a_store_that_never_wrote_leaves_no_directory():
    # The defaults: L2 under $TMPDIR, L4 under ./checkpoints (conftest isolates both).
    u = np.zeros(16)
    with resurgo.Store("quiet") as store:
        store.protect("u", u)
        assert store.latest() is None
        with pytest.raises(resurgo.NotFoundError):
            store.restart()
    with resurgo.Store("memory", memory_every=1, local_every=0, persistent_every=0) as store:
        store.protect("u", u)
        store.checkpoint(1)
        store.wait(1, level=resurgo.L1)
    assert everything_under(Path.cwd()) == []
    assert everything_under(Path(os.environ["TMPDIR"])) == []


def test_the_first_version_makes_only_the_directories_it_goes_to():
    u = np.zeros(16)
    with resurgo.Store("first") as store:
        store.protect("u", u)
        store.checkpoint(1)
        store.wait(1, level=resurgo.L2)
        assert any(Path(os.environ["TMPDIR"]).rglob("v0000000001.r000000.rsg"))
        assert not (Path.cwd() / "checkpoints").exists(), "only every tenth version goes to L4"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory all the same")
def test_a_read_only_working_directory_stops_only_l4():
    cwd = Path.cwd()
    cwd.chmod(0o500)
    try:
        u = np.zeros(16)
        store = resurgo.Store("ro", persistent_every=2)
        store.protect("u", u)
        store.checkpoint(1)
        store.wait(1, level=resurgo.L2)
        store.checkpoint(2)
        with pytest.raises(resurgo.StorageError, match="persistent.path"):
            store.wait(2, level=resurgo.L4)
        store.close()
    finally:
        cwd.chmod(0o700)


# --- restart of some regions --------------------------------------------------------

def test_a_program_with_a_new_array_restarts_from_its_old_checkpoint(dirs):
    u = np.arange(10.0)
    with resurgo.Store("grow", **dirs.kw()) as store:
        store.protect("u", u)
        store.checkpoint(1)
    u = np.zeros(10)
    w = np.full(3, 7.0)  # new in this version of the program
    with resurgo.Store("grow", **dirs.kw()) as store:
        store.protect("u", u)
        store.protect("w", w)
        with pytest.raises(resurgo.MismatchError, match="'w' is protected but the checkpoint does not hold it"):
            store.restart()
        assert store.restart(regions=["u"]) == 1
        np.testing.assert_array_equal(u, np.arange(10.0))
        np.testing.assert_array_equal(w, np.full(3, 7.0))  # left as it was
        store.checkpoint(2)  # every protected array again
        assert [r.label for r in store.describe(2).regions] == ["u", "w"]
        u[:] = 0
        w[:] = 0
        assert store.restart() == 2
        np.testing.assert_array_equal(w, np.full(3, 7.0))


def test_a_program_that_dropped_an_array_restarts_the_arrays_it_kept(dirs):
    u = np.arange(4.0)
    old = np.ones(4)
    with resurgo.Store("shrink", **dirs.kw()) as store:
        store.protect("u", u)
        store.protect("old", old)
        store.checkpoint(1)
    u = np.zeros(4)
    with resurgo.Store("shrink", **dirs.kw()) as store:
        store.protect("u", u)
        assert store.restart(1, regions=("u",)) == 1
        np.testing.assert_array_equal(u, np.arange(4.0))


def test_restart_regions_are_checked_before_anything_is_read(dirs):
    u = np.zeros(4)
    with resurgo.Store("names", **dirs.kw()) as store:
        store.protect("u", u)
        store.checkpoint(1)
        with pytest.raises(resurgo.InvalidArgumentError, match="region 'v' in regions is not protected"):
            store.restart(regions=["u", "v"])
        with pytest.raises(resurgo.InvalidArgumentError, match="regions is empty"):
            store.restart(regions=[])
        with pytest.raises(TypeError, match=r"regions=\['u'\]"):
            store.restart(regions="u")
        assert store.restart(regions=iter(["u"])) == 1  # any iterable of labels
