"""Round trips through the Python API: protect, checkpoint, wait, restart."""

from __future__ import annotations

import array
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import resurgo
from resurgo import _core
from helpers import bits_equal, container_name

DTYPES = [
    "bool",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
    "complex64", "complex128",
]


def make_array(dtype: str, shape, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    if dt.kind == "f":
        a = (rng.standard_normal(size=shape) * 1e3).astype(dt)
        a.reshape(-1)[0] = np.nan  # NaN must come back bit-identical too
        return a
    if dt.kind == "c":
        a = rng.standard_normal(size=shape) + 1j * rng.standard_normal(size=shape)
        return a.astype(dt)
    raise AssertionError(dtype)


def scramble(a: np.ndarray) -> None:
    """Overwrites every byte of `a` in place (the 'application keeps going')."""
    raw = a.reshape(-1).view(np.uint8)
    raw[:] = (raw.astype(np.uint16) * 7 + 13).astype(np.uint8) ^ 0xFF


@pytest.mark.parametrize("dtype", DTYPES)
def test_roundtrip_each_dtype(dirs, dtype):
    a = make_array(dtype, (37,), seed=1)
    expected = a.copy()
    with resurgo.Store("dtypes", **dirs.kw()) as store:
        store.protect("a", a)
        store.checkpoint(0)
        store.wait()
        scramble(a)
        assert not bits_equal(a, expected)
        assert store.restart() == 0
        assert bits_equal(a, expected)


@pytest.mark.parametrize("shape", [(1,), (1000,), (16, 9), (3, 5, 7), (2, 1, 4, 3)])
@pytest.mark.parametrize("dtype", ["float64", "int16", "complex64"])
def test_roundtrip_shapes(dirs, dtype, shape):
    a = make_array(dtype, shape, seed=2)
    expected = a.copy()
    with resurgo.Store("shapes", **dirs.kw()) as store:
        store.protect("a", a)
        store.checkpoint(5)
        store.wait()
        scramble(a)
        assert store.restart() == 5
    assert bits_equal(a, expected)
    info = _core.inspect(str(dirs.file(2, "shapes", 5)))
    (region,) = info.regions
    assert region.label == "a"
    assert region.dtype == dtype
    assert region.shape == tuple(shape)
    assert region.bytes == a.nbytes
    assert region.kind == "host"


def test_all_dtypes_in_one_store_restored_by_new_instance(dirs):
    arrays = {dt: make_array(dt, (4, 5), seed=i) for i, dt in enumerate(DTYPES)}
    expected = {dt: a.copy() for dt, a in arrays.items()}
    with resurgo.Store("many", **dirs.kw()) as store:
        for dt, a in arrays.items():
            store.protect(dt, a)
        store.checkpoint(1)
        store.wait(level=4)
    fresh = {dt: np.zeros_like(a) for dt, a in arrays.items()}
    with resurgo.Store("many", **dirs.kw()) as store:
        for dt, a in fresh.items():
            store.protect(dt, a)
        assert store.latest() == 1
        assert store.restart() == 1
    for dt in DTYPES:
        assert bits_equal(fresh[dt], expected[dt]), dt
    info = _core.inspect(str(dirs.file(2, "many", 1)))
    assert [r.label for r in info.regions] == DTYPES
    assert [r.id for r in info.regions] == list(range(len(DTYPES)))
    assert [r.dtype for r in info.regions] == DTYPES


def test_bytearray_and_array_module_buffers(dirs):
    raw = bytearray(b"resurgo-" * 64)
    doubles = array.array("d", [1.5, -2.25, 3.0e10, 0.0])
    expected_raw, expected_doubles = bytes(raw), doubles.tolist()
    with resurgo.Store("buffers", **dirs.kw()) as store:
        store.protect("raw", raw)
        store.protect("doubles", doubles)
        store.checkpoint(0)
        store.wait()
        raw[:] = b"\0" * len(raw)
        for i in range(len(doubles)):
            doubles[i] = -1.0
        assert store.restart() == 0
    assert bytes(raw) == expected_raw
    assert doubles.tolist() == expected_doubles
    regions = {r.label: r for r in _core.inspect(str(dirs.file(2, "buffers", 0))).regions}
    assert regions["raw"].dtype == "uint8" and regions["raw"].bytes == 512
    assert regions["doubles"].dtype == "float64" and regions["doubles"].shape == (4,)


def test_protected_buffer_is_pinned(dirs):
    raw = bytearray(64)
    with resurgo.Store("pin", **dirs.kw()) as store:
        store.protect("raw", raw)
        with pytest.raises(BufferError):
            raw.extend(b"x" * 4096)  # would move the memory the store reads
        store.unprotect("raw")
        raw.extend(b"x")  # released again
    assert len(raw) == 65


def test_fortran_order_rejected(dirs):
    a = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    with resurgo.Store("order", **dirs.kw()) as store:
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'f'.*Fortran"):
            store.protect("f", a)
        # A rejected protect registers nothing: the label is still free.
        store.protect("f", np.ascontiguousarray(a))


def test_non_contiguous_view_rejected(dirs):
    a = np.arange(20.0)
    with resurgo.Store("view", **dirs.kw()) as store:
        with pytest.raises(resurgo.InvalidArgumentError, match=r"'v'.*(contiguous|strided)"):
            store.protect("v", a[::2])
        with pytest.raises(resurgo.InvalidArgumentError, match="contiguous"):
            store.protect("t", np.arange(12.0).reshape(3, 4).T[:, :2])
        with pytest.raises(resurgo.InvalidArgumentError, match="contiguous"):
            store.protect("m", memoryview(bytearray(16))[::2])


def test_read_only_and_non_buffers_rejected(dirs):
    ro = np.arange(4.0)
    ro.flags.writeable = False
    with resurgo.Store("ro", **dirs.kw()) as store:
        with pytest.raises(resurgo.InvalidArgumentError, match="read-only"):
            store.protect("ro", ro)
        with pytest.raises(resurgo.InvalidArgumentError, match="read-only"):
            store.protect("bytes", b"immutable")
        with pytest.raises(TypeError):
            store.protect("list", [1.0, 2.0])
        with pytest.raises(TypeError):
            store.protect(3, np.zeros(2))
        with pytest.raises(resurgo.InvalidArgumentError, match="Python objects"):
            store.protect("obj", np.array([object(), object()]))


def test_mutate_then_restart_is_bit_identical_per_version(dirs):
    a = np.zeros((64, 64), dtype=np.float64)
    snapshots = {}
    with resurgo.Store("steps", **dirs.kw(local_keep=0, persistent_keep=0)) as store:
        store.protect("a", a)
        for step in range(4):
            a += np.random.default_rng(step).standard_normal(a.shape)
            snapshots[step] = a.copy()
            store.checkpoint(step)
            store.wait(step)
        for step in (1, 3, 0, 2):
            scramble(a)
            assert store.restart(step) == step
            assert bits_equal(a, snapshots[step])
            assert store.last_restart.version == step


def test_checkpoint_is_asynchronous_and_wait_makes_files_appear(dirs):
    a = np.arange(1 << 20, dtype=np.float64)  # 8 MiB
    with resurgo.Store("async", **dirs.kw()) as store:
        store.protect("a", a)
        store.checkpoint(7)
        store.wait(7, level=2)
        assert dirs.file(2, "async", 7).is_file()
        store.wait(7, level=4)
        assert dirs.file(4, "async", 7).is_file()
        (stats,) = [s for s in store.stats() if s.version == 7]
    assert isinstance(stats, resurgo.VersionStats)
    assert stats.bytes == a.nbytes
    assert stats.capture == "copy"
    assert stats.error is None
    assert [entry.level for entry in stats.levels] == [resurgo.L2, resurgo.L4]
    l2, l4 = stats.at(resurgo.L2), stats.at(resurgo.L4)
    assert l2.stored_bytes >= a.nbytes and l4.stored_bytes == l2.stored_bytes
    # checkpoint() returned after the capture; durability came later.
    assert 0 <= stats.blocking_seconds < stats.seconds_to(resurgo.L2)
    assert stats.seconds_to(resurgo.L2) <= stats.seconds_to(resurgo.L4)
    assert stats.backpressure_seconds + stats.first_touch_seconds + stats.copy_seconds <= stats.blocking_seconds
    assert 0 < l2.write_seconds <= l2.seconds_to_level
    assert l2.throughput == l2.stored_bytes / l2.write_seconds
    assert stats.at(resurgo.L3) is None and stats.seconds_to(resurgo.L3) is None
    names = sorted(p.name for p in (dirs.l2 / "async").iterdir())
    assert container_name(7) in names
    assert not [n for n in names if ".tmp-" in n], names  # no temporaries left behind


def test_wait_for_all_pending_versions(dirs):
    a = np.ones(1000)
    with resurgo.Store("all", **dirs.kw(local_keep=0, persistent_keep=0)) as store:
        store.protect("a", a)
        for v in range(3):
            a *= 2
            store.checkpoint(v)
        store.wait(level=4)  # version=None: every pending one
        infos = store.versions()
        assert [i.version for i in infos] == [0, 1, 2]
        assert all(not i.pending for i in infos)
    assert [p.name for p in dirs.files(4, "all")] == [container_name(v) for v in range(3)]


def test_latest(dirs):
    a = np.ones(10)
    with resurgo.Store("latest", **dirs.kw()) as store:
        assert store.latest() is None
        store.protect("a", a)
        for v in (0, 4, 9):
            store.checkpoint(v)
        store.wait()
        assert store.latest() == 9
    with resurgo.Store("latest", **dirs.kw()) as store:
        assert store.latest() == 9  # from the files alone
    with resurgo.Store("other", **dirs.kw()) as store:
        assert store.latest() is None


def test_versions_levels(dirs):
    a = np.ones(10)
    with resurgo.Store("levels", **dirs.kw()) as store:
        store.protect("a", a)
        store.checkpoint(0)
        store.wait(level=4)
        (info,) = store.versions()
        assert (info.version, info.levels, info.pending) == (0, (2, 4), False)
        assert info == store.versions()[0] and hash(info) == hash(store.versions()[0])
        assert repr(info) == "VersionInfo(version=0, levels=(2, 4), pending=False)"
        assert info._asdict() == {"version": 0, "levels": (2, 4), "pending": False}
        with pytest.raises(AttributeError):
            info.version = 3  # read-only, as a frozen dataclass

    with resurgo.Store("l2only", **dirs.kw(persistent_every=0)) as store:
        store.protect("a", a)
        store.checkpoint(0)
        store.wait()
        assert [(i.version, i.levels) for i in store.versions()] == [(0, (2,))]
    assert dirs.files(4, "l2only") == []

    kw = dirs.kw(persistent_every=2, local_keep=0, persistent_keep=0)
    with resurgo.Store("every2", **kw) as store:
        store.protect("a", a)
        for v in range(4):
            store.checkpoint(v)
        store.wait(level=2)
        store.wait(level=4)
        infos = store.versions()
    assert [i.version for i in infos] == [0, 1, 2, 3]
    assert all(2 in i.levels for i in infos)
    assert sum(4 in i.levels for i in infos) == 2
    assert len(dirs.files(4, "every2")) == 2


def test_keep_limits_versions_per_level(dirs):
    a = np.ones(10)
    with resurgo.Store("keep", **dirs.kw(local_keep=2, persistent_keep=3)) as store:
        store.protect("a", a)
        for v in range(6):
            store.checkpoint(v)
            store.wait(v, level=4)
        assert store.latest() == 5
    # Eviction of older versions may still run after wait() returned; close()
    # waits for it.
    assert [p.name for p in dirs.files(2, "keep")] == [container_name(v) for v in (4, 5)]
    assert [p.name for p in dirs.files(4, "keep")] == [container_name(v) for v in (3, 4, 5)]
    with resurgo.Store("keep", **dirs.kw(local_keep=2, persistent_keep=3)) as store:
        levels = {i.version: i.levels for i in store.versions()}
    assert levels == {3: (4,), 4: (2, 4), 5: (2, 4)}


def test_restart_none_picks_newest(dirs):
    a = np.zeros(100, dtype=np.int32)
    with resurgo.Store("newest", **dirs.kw(local_keep=0, persistent_keep=0)) as store:
        store.protect("a", a)
        for v in (2, 5, 11):
            a[:] = v
            store.checkpoint(v)
        store.wait()
    b = np.zeros(100, dtype=np.int32)
    with resurgo.Store("newest", **dirs.kw(local_keep=0, persistent_keep=0)) as store:
        store.protect("a", b)
        assert store.restart() == 11
        assert (b == 11).all()
        report = store.last_restart
        assert report.version == 11
        assert report.level == 2  # node-local copy preferred
        assert report.bytes == b.nbytes
        assert report.skipped == ()
        assert report.seconds >= 0
        assert store.restart(5) == 5
        assert (b == 5).all()


def test_restart_missing_version_raises_not_found(dirs):
    a = np.zeros(4)
    with resurgo.Store("missing", **dirs.kw()) as store:
        store.protect("a", a)
        with pytest.raises(resurgo.NotFoundError):
            store.restart()  # nothing checkpointed yet
        store.checkpoint(1)
        store.wait()
        with pytest.raises(resurgo.NotFoundError, match="7"):
            store.restart(7)
        with pytest.raises(LookupError):
            store.restart(8)


def test_metadata_roundtrip_in_process(dirs):
    a = np.zeros(8)
    with resurgo.Store("meta", **dirs.kw(local_keep=0, persistent_keep=0)) as store:
        assert store.metadata == b""
        store.protect("a", a)
        store.metadata = b"first"
        store.checkpoint(0)
        store.metadata = bytearray(b"second\x00\xff")
        store.checkpoint(1)
        store.metadata = memoryview(b"third")
        assert store.metadata == b"third"
        store.wait()
        assert store.restart(0) == 0
        assert store.metadata == b"first"
        assert isinstance(store.metadata, bytes)
        assert store.restart(1) == 1
        assert store.metadata == b"second\x00\xff"
        with pytest.raises(TypeError):
            store.metadata = "text is not bytes"
        with pytest.raises(TypeError):
            store.metadata = 12


def test_metadata_roundtrip_across_processes(dirs):
    writer = textwrap.dedent(
        """
        import sys, numpy as np, resurgo
        l2, l4 = sys.argv[1:3]
        a = np.arange(256, dtype=np.uint16)
        with resurgo.Store("meta-x", local_path=l2, persistent_path=l4, persistent_every=1) as s:
            s.protect("a", a)
            s.metadata = b"step=41;dt=0.5;\\x00binary\\xfe"
            s.checkpoint(41)
            s.wait(level=4)
        """
    )
    subprocess.run([sys.executable, "-c", writer, str(dirs.l2), str(dirs.l4)], check=True,
                   timeout=60)
    b = np.zeros(256, dtype=np.uint16)
    with resurgo.Store("meta-x", **dirs.kw()) as store:
        store.protect("a", b)
        assert store.metadata == b""
        assert store.restart() == 41
        assert store.metadata == b"step=41;dt=0.5;\x00binary\xfe"
    assert (b == np.arange(256, dtype=np.uint16)).all()
    info = _core.inspect(str(dirs.file(4, "meta-x", 41)))
    assert info.metadata == b"step=41;dt=0.5;\x00binary\xfe"


def test_store_identity_and_lifecycle(dirs):
    store = resurgo.Store("life", **dirs.kw())
    assert store.name == "life"
    assert store.rank == 0
    assert "life" in repr(store)
    a = np.ones(4)
    store.protect("a", a)
    store.checkpoint(0)
    store.close()
    store.close()  # idempotent in Python
    assert dirs.file(2, "life", 0).is_file()  # close waited for pending work
    with pytest.raises(resurgo.StateError):
        store.checkpoint(1)
    with pytest.raises(resurgo.StateError):
        store.restart()


def test_context_manager_closes_even_on_error(dirs):
    a = np.ones(4)
    with pytest.raises(KeyError):
        with resurgo.Store("ctx", **dirs.kw()) as store:
            store.protect("a", a)
            store.checkpoint(3)
            raise KeyError("application failure")
    assert dirs.file(2, "ctx", 3).is_file()
    with pytest.raises(resurgo.StateError):
        store.checkpoint(4)


def test_unprotect(dirs):
    a, b = np.ones(4), np.zeros(4)
    with resurgo.Store("unprot", **dirs.kw()) as store:
        store.protect("a", a)
        store.protect("b", b)
        store.unprotect("a")
        with pytest.raises(resurgo.NotFoundError, match="'a'"):
            store.unprotect("a")
        store.checkpoint(0)
        store.wait()
    info = _core.inspect(str(dirs.file(2, "unprot", 0)))
    assert [r.label for r in info.regions] == ["b"]


def test_store_with_config_file(dirs, tmp_path):
    cfg = tmp_path / "resurgo.toml"
    cfg.write_text(
        f'[local]\npath = "{dirs.l2}"\nkeep = 0\n\n'
        f'[persistent]\npath = "{dirs.l4}"\nevery = 0\n\n'
        '[pipeline]\nchunk_size = "64KiB"\n'
    )
    a = np.arange(100_000, dtype=np.float32)  # 400 KB -> 7 chunks of 64 KiB
    with resurgo.Store("cfg", config=cfg) as store:
        store.protect("a", a)
        store.checkpoint(0)
        store.wait()
    info = _core.inspect(str(dirs.file(2, "cfg", 0)))
    assert info.chunk_size == 64 * 1024
    assert len(info.chunks) == -(-a.nbytes // (64 * 1024))
    assert dirs.files(4, "cfg") == []
    # An explicit override beats the file.
    with resurgo.Store("cfg2", config=str(cfg), persistent_every=1) as store:
        store.protect("a", a)
        store.checkpoint(0)
        store.wait(level=4)
    assert dirs.file(4, "cfg2", 0).is_file()


def test_environment_overrides(dirs, monkeypatch, tmp_path):
    env_l2 = tmp_path / "env-l2"
    monkeypatch.setenv("RESURGO_LOCAL_PATH", str(env_l2))
    monkeypatch.setenv("RESURGO_PERSISTENT_PATH", str(dirs.l4))
    a = np.ones(4)
    with resurgo.Store("env") as store:
        store.protect("a", a)
        store.checkpoint(0)
        store.wait()
    assert (env_l2 / "env" / container_name(0)).is_file()
    with resurgo.Store("env2", local_path=dirs.l2) as store:  # argument beats env; PathLike ok
        store.protect("a", a)
        store.checkpoint(0)
        store.wait()
    assert dirs.file(2, "env2", 0).is_file()
    assert not (env_l2 / "env2").exists()


def test_default_local_path_honours_tmpdir(tmp_path):
    path = _core.default_local_path()
    assert path.startswith(str(tmp_path / "tmpdir")), path
    assert re.search(r"resurgo-\d+/cwd-[0-9a-f]{16}$", path), path



@pytest.mark.parametrize("codec", ["none", "lz4", "zstd", "blosc-lz4", "blosc-zstd"])
def test_compression_roundtrip(dirs, codec):
    a = np.repeat(np.arange(64, dtype=np.float64), 4096)  # 2 MiB, compressible
    a[::997] = np.random.default_rng(3).standard_normal(a[::997].size)
    expected = a.copy()
    with resurgo.Store("zip", **dirs.kw(pipeline_compress=codec)) as store:
        store.protect("a", a)
        store.checkpoint(0)
        store.wait(level=4)
        scramble(a)
        assert store.restart() == 0
        (stats,) = store.stats()
    assert bits_equal(a, expected)
    info = _core.inspect(str(dirs.file(4, "zip", 0)))
    assert {c.codec for c in info.chunks} == {codec}
    stored = sum(c.stored_length for c in info.chunks)
    if codec == "none":
        assert stored == a.nbytes
    else:
        assert stored < a.nbytes // 2
        assert stats.at(resurgo.L2).stored_bytes < a.nbytes // 2
    _core.verify(str(dirs.file(4, "zip", 0)))


def test_state_larger_than_buffer_is_written_synchronously(dirs):
    a = make_array("float32", (1 << 19,), seed=4)  # 2 MiB > 1 MiB buffer
    expected = a.copy()
    with resurgo.Store("sync", **dirs.kw(buffer_capacity="1MiB")) as store:
        store.protect("a", a)
        store.checkpoint(0)
        (stats,) = store.stats()
        assert stats.capture == "synchronous"
        assert stats.seconds_to(resurgo.L2) >= 0  # durable at L2 when checkpoint() returned
        assert dirs.file(2, "sync", 0).is_file()
        store.wait(level=4)
        scramble(a)
        assert store.restart() == 0
    assert bits_equal(a, expected)


def test_largest_version_number(dirs):
    with resurgo.Store("big", **dirs.kw()) as store:
        store.protect("a", np.ones(3))
        store.checkpoint(2**31 - 1)
        store.wait()
        assert store.latest() == 2**31 - 1
    assert dirs.file(2, "big", 2**31 - 1).name == "v2147483647.r000000.rsg"


def test_same_store_open_twice_is_refused(dirs):
    with resurgo.Store("once", **dirs.kw()):
        with pytest.raises(resurgo.StateError, match="once"):
            resurgo.Store("once", **dirs.kw())
    with resurgo.Store("once", **dirs.kw()) as store:  # free again after close
        assert store.latest() is None


class DLPackOnly:
    """A producer that offers only __dlpack__ (like a CPU torch tensor)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_producer(dirs):
    a = make_array("float32", (6, 5), seed=5)
    expected = a.copy()
    with resurgo.Store("dlpack", **dirs.kw()) as store:
        store.protect("t", DLPackOnly(a))
        with pytest.raises(resurgo.InvalidArgumentError, match="contiguous"):
            store.protect("strided", DLPackOnly(np.zeros((4, 4))[:, ::2]))
        store.checkpoint(0)
        store.wait()
        scramble(a)
        assert store.restart() == 0
    assert bits_equal(a, expected)
    (region,) = _core.inspect(str(dirs.file(2, "dlpack", 0))).regions
    assert region.dtype == "float32"
    assert region.shape == (6, 5)
    assert region.bytes == a.nbytes


def test_trace_and_log_overrides(dirs, tmp_path):
    import json

    trace = tmp_path / "trace.json"
    with resurgo.Store("traced", **dirs.kw(trace_path=trace, log_level="error")) as store:
        store.protect("a", np.ones(100))
        store.checkpoint(0)
        store.wait(level=4)
        assert store.restart() == 0
        assert not trace.exists()  # written at close
    doc = json.loads(trace.read_text())
    assert isinstance(doc["traceEvents"], list) and doc["traceEvents"]
