"""Bad input, bad configuration and storage failures raise the documented
exception classes with messages that name the cause."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import resurgo
from resurgo import _core


def test_exception_hierarchy():
    for cls in (resurgo.ConfigError, resurgo.FormatError, resurgo.CorruptionError,
                resurgo.MismatchError, resurgo.StorageError, resurgo.StateError,
                resurgo.InvalidArgumentError, resurgo.NotFoundError):
        assert issubclass(cls, resurgo.Error)
    assert issubclass(resurgo.Error, Exception)
    assert issubclass(resurgo.InvalidArgumentError, ValueError)
    assert issubclass(resurgo.NotFoundError, LookupError)
    assert not issubclass(resurgo.CorruptionError, ValueError)


def test_zero_size_array(dirs):
    with resurgo.Store("zero", **dirs.kw()) as store:
        with pytest.raises(resurgo.InvalidArgumentError):
            store.protect("empty", np.zeros(0))
        with pytest.raises(resurgo.InvalidArgumentError):
            store.protect("empty2d", np.zeros((3, 0)))
        with pytest.raises(resurgo.InvalidArgumentError):
            store.protect("nothing", bytearray())


def test_duplicate_label(dirs):
    with resurgo.Store("dup", **dirs.kw()) as store:
        store.protect("u", np.zeros(4))
        with pytest.raises(resurgo.InvalidArgumentError, match="'u'"):
            store.protect("u", np.zeros(4))
        with pytest.raises(ValueError):
            store.protect("u", np.ones(8))


def test_checkpoint_with_nothing_protected(dirs):
    with resurgo.Store("nothing", **dirs.kw()) as store:
        with pytest.raises(resurgo.InvalidArgumentError):
            store.checkpoint(0)
        a = np.zeros(4)
        store.protect("a", a)
        store.unprotect("a")
        with pytest.raises(resurgo.InvalidArgumentError):
            store.checkpoint(0)
        assert store.latest() is None


def test_negative_version(dirs):
    with resurgo.Store("neg", **dirs.kw()) as store:
        store.protect("a", np.zeros(4))
        with pytest.raises(resurgo.InvalidArgumentError):
            store.checkpoint(-1)
        with pytest.raises(resurgo.InvalidArgumentError):
            store.checkpoint(-7)
        with pytest.raises(resurgo.InvalidArgumentError):
            store.checkpoint(2**40)
        with pytest.raises(resurgo.InvalidArgumentError):
            store.restart(-3)
        with pytest.raises(resurgo.InvalidArgumentError):
            store.wait(-2)
        with pytest.raises(TypeError):
            store.checkpoint(1.0)
        with pytest.raises(TypeError):
            store.checkpoint(True)
        store.checkpoint(np.int64(3))  # any integer type works
        store.wait(3)
        assert store.latest() == 3


def test_reused_or_older_version(dirs):
    with resurgo.Store("reuse", **dirs.kw()) as store:
        store.protect("a", np.zeros(4))
        store.checkpoint(3)
        with pytest.raises(resurgo.InvalidArgumentError, match="3"):
            store.checkpoint(3)
        with pytest.raises(resurgo.InvalidArgumentError):
            store.checkpoint(2)
        store.checkpoint(4)
        store.wait()
        assert store.latest() == 4
    with resurgo.Store("reuse", **dirs.kw()) as store:
        # a new instance knows the versions on disk
        store.protect("a", np.zeros(4))
        with pytest.raises(resurgo.InvalidArgumentError):
            store.checkpoint(4)
        store.checkpoint(5)


def test_bad_wait_level(dirs):
    with resurgo.Store("level", **dirs.kw()) as store:
        store.protect("a", np.zeros(4))
        store.checkpoint(0)
        with pytest.raises(resurgo.InvalidArgumentError):
            store.wait(0, level=7)
        store.wait(0, level=2)
        store.wait(0, level=1)  # captured into the host buffer long ago


def test_restart_into_array_of_another_size(dirs):
    with resurgo.Store("size", **dirs.kw()) as store:
        store.protect("field", np.zeros(10))  # 80 bytes
        store.checkpoint(0)
        store.wait()
    bigger = np.zeros(12)  # 96 bytes
    with resurgo.Store("size", **dirs.kw()) as store:
        store.protect("field", bigger)
        with pytest.raises(resurgo.MismatchError) as info:
            store.restart()
    message = str(info.value)
    assert "field" in message
    assert "80" in message and "96" in message, message
    assert (bigger == 0).all()


def test_restart_into_array_of_another_dtype(dirs):
    with resurgo.Store("dtype", **dirs.kw()) as store:
        store.protect("field", np.zeros(10, dtype=np.float64))
        store.checkpoint(0)
        store.wait()
    with resurgo.Store("dtype", **dirs.kw()) as store:
        store.protect("field", np.zeros(10, dtype=np.int64))  # same byte size
        with pytest.raises(resurgo.MismatchError, match="field"):
            store.restart()


def test_region_missing_on_restart(dirs):
    with resurgo.Store("regions", **dirs.kw()) as store:
        store.protect("u", np.ones(4))
        store.protect("v", np.ones(4))
        store.checkpoint(0)
        store.wait()
    with resurgo.Store("regions", **dirs.kw()) as store:
        store.protect("u", np.zeros(4))  # "v" not protected
        with pytest.raises(resurgo.MismatchError, match="v"):
            store.restart()


def test_region_extra_on_restart(dirs):
    with resurgo.Store("extra", **dirs.kw()) as store:
        store.protect("u", np.ones(4))
        store.checkpoint(0)
        store.wait()
    with resurgo.Store("extra", **dirs.kw()) as store:
        store.protect("u", np.zeros(4))
        store.protect("w", np.zeros(4))  # not in the checkpoint
        with pytest.raises(resurgo.MismatchError, match="w"):
            store.restart()


def test_bad_store_name(dirs):
    for name in ("a/b", "", ".", "..", "x y", "../escape"):
        with pytest.raises(resurgo.InvalidArgumentError):
            resurgo.Store(name, **dirs.kw())


def test_unknown_override_key(dirs):
    with pytest.raises(resurgo.ConfigError, match=r"local\.pathh"):
        resurgo.Store("cfg", **dirs.kw(local_pathh="/x"))
    with pytest.raises(resurgo.ConfigError, match=r"nosuch\.key"):
        resurgo.Store("cfg", **dirs.kw(nosuch_key=1))
    with pytest.raises(resurgo.ConfigError, match="nounderscore"):
        resurgo.Store("cfg", **dirs.kw(nounderscore=1))


def test_bad_override_names_the_keyword_as_typed(dirs):
    # The core only knows the derived key ('no.such_key'); the message must
    # also carry what the caller wrote, so that a search of the code finds it.
    with pytest.raises(resurgo.ConfigError, match="no_such_key") as info:
        resurgo.Store("cfg", **dirs.kw(no_such_key=1))
    assert "no.such_key" in str(info.value)
    with pytest.raises(resurgo.ConfigError, match="nosection_path"):
        resurgo.Store("cfg", **dirs.kw(nosection_path="/x"))
    with pytest.raises(resurgo.ConfigError, match="local_keep"):
        resurgo.Store("cfg", **dirs.kw(local_keep="many"))


def test_override_key_mapping_splits_at_first_underscore(dirs):
    # pipeline_chunk_size -> pipeline.chunk_size (not pipeline.chunk.size)
    a = np.zeros(200_000, dtype=np.uint8)
    kw = dirs.kw(pipeline_chunk_size="64KiB", local_keep=0, persistent_every=0,
                 pipeline_threads=1)
    with resurgo.Store("mapping", **kw) as store:
        store.protect("a", a)
        store.checkpoint(0)
        store.wait()
    info = _core.inspect(str(dirs.file(2, "mapping", 0)))
    assert info.chunk_size == 64 * 1024
    assert len(info.chunks) == 4


def test_bad_size_value(dirs):
    with pytest.raises(resurgo.ConfigError, match=r"buffer\.capacity"):
        resurgo.Store("cfg", **dirs.kw(buffer_capacity="12 parsecs"))
    with pytest.raises(resurgo.ConfigError, match=r"pipeline\.chunk_size"):
        resurgo.Store("cfg", **dirs.kw(pipeline_chunk_size="lots"))
    with pytest.raises(resurgo.ConfigError, match=r"pipeline\.chunk_size"):
        resurgo.Store("cfg", **dirs.kw(pipeline_chunk_size="1KiB"))  # below the minimum


def test_bad_integer_and_bool_values(dirs):
    with pytest.raises(resurgo.ConfigError, match=r"local\.keep"):
        resurgo.Store("cfg", **dirs.kw(local_keep="many"))
    with pytest.raises(resurgo.ConfigError, match=r"persistent\.every"):
        resurgo.Store("cfg", **dirs.kw(persistent_every=-1))
    with pytest.raises(resurgo.ConfigError):
        resurgo.Store("cfg", **dirs.kw(pipeline_compress="gzip9000"))


def test_unknown_key_in_config_file(dirs, tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[local]\npath = "/tmp/x"\ncolour = "blue"\n')
    with pytest.raises(resurgo.ConfigError, match=r"local\.colour"):
        resurgo.Store("cfg", config=cfg, **dirs.kw())
    with pytest.raises(resurgo.Error):
        resurgo.Store("cfg", config=tmp_path / "does-not-exist.toml", **dirs.kw())


def test_size_units_accepted(dirs):
    with resurgo.Store("units", **dirs.kw(buffer_capacity="64MiB",
                                          pipeline_chunk_size="1 MiB")) as store:
        store.protect("a", np.zeros(16))
        store.checkpoint(0)
        store.wait()
    assert _core.inspect(str(dirs.file(2, "units", 0))).chunk_size == 1 << 20


def test_l2_path_below_a_regular_file_is_a_storage_error(dirs, tmp_path):
    # mkdir fails with ENOTDIR even for root, unlike permission bits.
    blocker = tmp_path / "blocker"
    blocker.write_bytes(b"not a directory")
    with pytest.raises(resurgo.StorageError, match="blocker"):
        with resurgo.Store("nodir", local_path=str(blocker / "l2"),
                           persistent_path=str(dirs.l4)) as store:
            store.protect("a", np.zeros(4))
            store.checkpoint(0)
            store.wait(0, level=2)


def _permission_bits_ignored(tmp_path) -> bool:
    """True for root (CAP_DAC_OVERRIDE): it can write into a 0500 directory."""
    probe = tmp_path / "probe"
    probe.mkdir()
    probe.chmod(0o500)
    try:
        (probe / "x").write_bytes(b"")
        return True
    except PermissionError:
        return False
    finally:
        probe.chmod(0o700)


_UNWRITABLE_SCENARIO = """
import sys, numpy as np, resurgo
try:
    with resurgo.Store("s", local_path=sys.argv[1], persistent_path=sys.argv[2]) as store:
        store.protect("a", np.zeros(4))
        store.checkpoint(0)
        store.wait(0, level=2)
except resurgo.StorageError as error:
    print("StorageError:", error)
    sys.exit(0)
print("no error raised")
sys.exit(1)
"""


def test_unwritable_l2_directory(dirs, tmp_path):
    ro = tmp_path / "readonly"
    ro.mkdir()
    (ro / "s").mkdir()
    command = [sys.executable, "-c", _UNWRITABLE_SCENARIO, str(ro), str(dirs.l4)]
    if os.geteuid() == 0 and _permission_bits_ignored(tmp_path):
        # Root ignores permission bits; drop the capabilities that let it.
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: permission bits are not enforced")
        dropped = "-dac_override,-dac_read_search"
        command = [setpriv, f"--inh-caps={dropped}", f"--bounding-set={dropped}", *command]
    ro.chmod(0o500)
    (ro / "s").chmod(0o500)
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    finally:
        (ro / "s").chmod(0o700)
        ro.chmod(0o700)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "readonly" in result.stdout, result.stdout


def test_inspect_and_verify_errors(tmp_path):
    junk = tmp_path / "junk.rsg"
    junk.write_bytes(b"this is not a resurgo container" * 10)
    with pytest.raises(resurgo.FormatError):
        _core.inspect(str(junk))
    with pytest.raises(resurgo.FormatError):
        _core.verify(str(junk))
    with pytest.raises(resurgo.NotFoundError, match="absent.rsg"):
        _core.inspect(str(tmp_path / "absent.rsg"))
    empty = tmp_path / "empty.rsg"
    empty.write_bytes(b"")
    with pytest.raises((resurgo.FormatError, resurgo.CorruptionError)):
        _core.inspect(str(empty))


def test_l4_path_below_a_regular_file_fails_at_open(dirs, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_bytes(b"x")
    with pytest.raises(resurgo.StorageError, match="blocker"):
        resurgo.Store("l4bad", local_path=str(dirs.l2), persistent_path=str(blocker / "l4"))


def test_background_l4_failure_is_reported_by_wait_and_close(dirs):
    store = resurgo.Store("bg", **dirs.kw())
    try:
        store.protect("a", np.ones(16))
        # A file where the store's L4 directory is to be made (with the first
        # version sent there): every L4 write now fails (ENOTDIR, also for
        # root) while L2 keeps working.
        l4_store = dirs.level_dir(4, "bg")
        l4_store.parent.mkdir(parents=True, exist_ok=True)
        l4_store.write_bytes(b"in the way")
        store.checkpoint(0)
        store.wait(0, level=2)
        assert dirs.file(2, "bg", 0).is_file()
        with pytest.raises(resurgo.StorageError, match="L4"):
            store.wait(0, level=4)
        (stats,) = store.stats()
        assert "L4" in stats.error and str(l4_store) in stats.error
        assert stats.seconds_to(resurgo.L2) >= 0 and stats.seconds_to(resurgo.L4) is None
        store.checkpoint(1)  # the application keeps going
        store.wait(1, level=2)
        assert dirs.file(2, "bg", 1).is_file()
    finally:
        # version 1 also failed on L4 and nobody was told yet: close reports it
        with pytest.raises(resurgo.StorageError, match="version 1"):
            store.close()
    with pytest.raises(resurgo.StateError):
        store.checkpoint(2)


def test_label_limits(dirs):
    with resurgo.Store("labels", **dirs.kw()) as store:
        with pytest.raises(resurgo.InvalidArgumentError):
            store.protect("", np.zeros(2))
        with pytest.raises(resurgo.InvalidArgumentError):
            store.protect("x" * 256, np.zeros(2))  # format limit: 255 bytes
        with pytest.raises(resurgo.InvalidArgumentError):
            store.protect("nul\x00byte", np.zeros(2))
        store.protect("y" * 255, np.zeros(2))


def test_metadata_limit(dirs):
    with resurgo.Store("metalimit", **dirs.kw()) as store:
        with pytest.raises(resurgo.InvalidArgumentError):
            store.metadata = bytes((16 << 20) + 1)
        store.metadata = b"ok"
        assert store.metadata == b"ok"


def test_shape_rank_above_format_limit_is_refused_at_protect(dirs):
    """The container format bounds a shape's rank by 32 (kMaxShapeRank); the
    writer must not produce files its own reader rejects as damaged."""
    a = np.ones((1,) * 33)
    with resurgo.Store("rank", **dirs.kw()) as store:
        with pytest.raises(resurgo.InvalidArgumentError, match="r33"):
            store.protect("r33", a)
        store.protect("r32", np.ones((1,) * 32))
        store.checkpoint(0)
        store.wait()
    _core.verify(str(dirs.file(2, "rank", 0)))


def test_restart_matches_regions_by_label_not_protect_order(dirs):
    u, v = np.arange(4.0), np.arange(10, dtype=np.int16)
    with resurgo.Store("order", **dirs.kw()) as store:
        store.protect("u", u)
        store.protect("v", v)
        store.checkpoint(0)
        store.wait()
    u2, v2 = np.zeros(4), np.zeros(10, dtype=np.int16)
    with resurgo.Store("order", **dirs.kw()) as store:
        store.protect("v", v2)
        store.protect("u", u2)
        assert store.restart() == 0
    assert np.array_equal(u2, u) and np.array_equal(v2, v)
