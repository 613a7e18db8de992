"""The `resurgo` command-line tool on real container files."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np

import pytest

import resurgo
from resurgo import _core
from helpers import container_name, flip_byte, flip_chunk_byte, run_cli


@pytest.fixture
def populated(dirs):
    """Store 'heat' with versions 0..2 (u: float64 (8, 16), v: int32 (100,))
    and store 'wave' with version 5, on L2 and L4."""
    u = np.arange(128, dtype=np.float64).reshape(8, 16)
    v = np.arange(100, dtype=np.int32)
    with resurgo.Store("heat", **dirs.kw(local_keep=0, persistent_keep=0)) as store:
        store.protect("u", u)
        store.protect("v", v)
        for version in range(3):
            u += 1
            store.metadata = b"t=%d" % version
            store.checkpoint(version)
        store.wait(level=4)
    w = np.ones(1000, dtype=np.float32)
    with resurgo.Store("wave", **dirs.kw()) as store:
        store.protect("w", w)
        store.checkpoint(5)
        store.wait(level=4)
    return dirs


def test_help_and_usage_errors():
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("ls", "inspect", "verify", "rm", "export"):
        assert command in result.stdout
    assert run_cli().returncode == 2
    assert run_cli("frobnicate").returncode == 2
    assert run_cli("rm", "/tmp").returncode == 2  # --version is required


def test_console_script_entry_point_exists():
    from importlib.metadata import entry_points

    eps = entry_points()
    scripts = eps.select(group="console_scripts") if hasattr(eps, "select") else eps["console_scripts"]
    (ep,) = [e for e in scripts if e.name == "resurgo"]
    assert ep.value == "resurgo.cli:main"


def test_ls_tier_directory(populated):
    result = run_cli("ls", populated.l2)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].split() == ["STORE", "VERSION", "RANK", "BASE", "SIZE", "REGIONS", "STATE"]
    rows = [line.split() for line in lines[1:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("heat", "0", "0"), ("heat", "1", "0"), ("heat", "2", "0"), ("wave", "5", "0")]
    heat_regions = {r[-2] for r in rows if r[0] == "heat"}
    assert heat_regions == {"2"}
    assert {r[3] for r in rows} == {"full"}
    assert all(r[-1] == "ok" for r in rows)


def test_ls_store_directory_and_damaged_state(populated):
    store_dir = populated.level_dir(4, "heat")
    path = store_dir / container_name(1)
    flip_byte(path, 8)  # header damage: the header/index checksum fails
    result = run_cli("ls", store_dir)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[1]: line for line in result.stdout.strip().splitlines()[1:]}
    assert set(rows) == {"0", "1", "2"}
    assert rows["0"].rstrip().endswith("ok")
    assert "damaged:" in rows["1"]
    assert rows["2"].rstrip().endswith("ok")


def test_ls_ignores_temporaries_and_marks_quarantined(populated):
    store_dir = populated.level_dir(2, "wave")
    (store_dir / ".v0000000006.r000000.rsg.tmp-777").write_bytes(b"partial")
    (store_dir / "v12.r0.rsg").write_bytes(b"not a canonical name")  # the core ignores it too
    good = store_dir / container_name(5)
    good.rename(store_dir / (container_name(5) + ".damaged"))
    result = run_cli("ls", store_dir)
    assert result.returncode == 0
    body = result.stdout.strip().splitlines()[1:]
    assert len(body) == 1
    assert "quarantined" in body[0]
    assert "tmp" not in result.stdout


def test_ls_empty_and_missing(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cli("ls", empty)
    assert result.returncode == 0
    assert "no container files" in result.stdout
    assert run_cli("ls", tmp_path / "missing").returncode == 2


def test_inspect_human(populated):
    path = populated.file(2, "heat", 2)
    result = run_cli("inspect", path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "heat" in out
    assert "version" in out and " 2" in out
    assert "metadata" in out and "3 bytes" in out and "'t=2'" in out
    assert "float64" in out and "(8, 16)" in out
    assert "int32" in out and "(100,)" in out
    assert "chunks:" in out
    assert "full" in out and "extents" not in out


def test_inspect_json(populated):
    path = populated.file(4, "heat", 1)
    result = run_cli("inspect", path, "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["store"] == "heat"
    assert info["version"] == 1
    assert info["rank"] == 0
    assert info["base_version"] == -1
    assert info["metadata_size"] == 3
    assert bytes.fromhex(info["metadata_hex"]) == b"t=1"
    assert [(r["id"], r["label"], r["dtype"], r["shape"], r["bytes"]) for r in info["regions"]] == [
        (0, "u", "float64", [8, 16], 1024), (1, "v", "int32", [100], 400)]
    assert info["file_size"] == path.stat().st_size
    assert sum(c["raw_length"] for c in info["chunks"]) == 1424
    assert all(c["codec"] == "none" for c in info["chunks"])
    covered = {(c["region"], c["offset"], c["raw_length"]) for c in info["chunks"]}
    assert (0, 0, 1024) in covered and (1, 0, 400) in covered
    native = _core.inspect(str(path))._asdict()
    assert native.pop("metadata") == b"t=1"
    assert {k: v for k, v in info.items()
            if k not in ("path", "metadata_size", "metadata_hex")} == json.loads(json.dumps(native))


def test_inspect_errors(tmp_path):
    junk = tmp_path / "junk.rsg"
    junk.write_bytes(b"\x00" * 4096)
    result = run_cli("inspect", junk)
    assert result.returncode == 1
    assert "FormatError" in result.stderr
    assert run_cli("inspect", tmp_path / "absent.rsg").returncode == 2


def test_verify_intact_then_damaged(populated):
    result = run_cli("verify", populated.root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verified 8 files, 0 damaged" in result.stdout

    victim = populated.file(2, "heat", 1)
    flip_chunk_byte(victim)
    result = run_cli("verify", populated.root)
    assert result.returncode == 1
    assert "verified 8 files, 1 damaged" in result.stdout
    damaged_lines = [line for line in result.stdout.splitlines() if line.startswith("DAMAGED")]
    assert len(damaged_lines) == 1
    assert str(victim) in damaged_lines[0]

    # a single file
    assert run_cli("verify", victim).returncode == 1
    ok = run_cli("verify", populated.file(4, "heat", 1))
    assert ok.returncode == 0
    assert "verified 1 files, 0 damaged" in ok.stdout


def test_verify_detects_a_file_of_another_version_renamed_in_place(populated, tmp_path):
    victim = populated.file(2, "heat", 1)
    shutil.copyfile(populated.file(2, "heat", 0), victim)
    result = run_cli("verify", victim)
    assert result.returncode == 1
    assert "holds store 'heat' version 0" in result.stdout
    # Under a name that is not a version's, the same bytes are an intact file.
    moved = tmp_path / "copy.rsg"
    shutil.copyfile(victim, moved)
    assert run_cli("verify", moved).returncode == 0


def test_a_file_that_cannot_be_read_is_unreadable_not_damaged(populated, tmp_path):
    # A symbolic link, which the library never follows, cannot be read: ls
    # and verify say unreadable (exit 1 still), while a truncated file is
    # damaged. Before, any error of the library was called damage.
    link = populated.file(2, "heat", 1).parent / "v0000000009.r000000.rsg"
    link.symlink_to(populated.file(2, "heat", 1))
    truncated = tmp_path / "truncated.rsg"
    truncated.write_bytes(populated.file(2, "heat", 1).read_bytes()[:200])
    result = run_cli("verify", link, truncated)
    assert result.returncode == 1
    assert f"UNREADABLE {link}: " in result.stdout and "symbolic link" in result.stdout, result.stdout
    assert f"DAMAGED {truncated}: " in result.stdout, result.stdout
    assert "verified 2 files, 1 damaged, 0 broken chains, 1 unreadable" in result.stdout
    listed = run_cli("ls", link.parent)
    (row,) = [line for line in listed.stdout.splitlines() if line.split()[1:2] == ["9"]]
    assert "unreadable: " in row and "symbolic link" in row, listed.stdout


def test_verify_usage_error(tmp_path):
    result = run_cli("verify", tmp_path / "missing")
    assert result.returncode == 2
    assert "missing" in result.stderr


def test_verify_progress_callback(populated):
    calls = []
    summary = _core.verify(str(populated.file(2, "heat", 0)),
                           progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1] == (1424, 1424)
    assert summary.bytes == 1424
    assert summary.chunks >= 2

    def failing(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _core.verify(str(populated.file(2, "heat", 0)), progress=failing)


def test_rm_version(populated):
    result = run_cli("rm", populated.l2, "--version", 1)
    assert result.returncode == 0, result.stderr
    assert not populated.file(2, "heat", 1).exists()
    assert populated.file(2, "heat", 0).exists()
    assert populated.file(4, "heat", 1).exists()  # other tier untouched
    again = run_cli("rm", populated.l2, "--version", 1)
    assert again.returncode == 1
    assert "version 1" in again.stderr

    # store directory form
    result = run_cli("rm", populated.level_dir(4, "heat"), "--version", 2)
    assert result.returncode == 0
    assert not populated.file(4, "heat", 2).exists()

    # --store picks the store inside a tier directory
    assert run_cli("rm", populated.l4, "--version", 5, "--store", "heat").returncode == 1
    assert run_cli("rm", populated.l4, "--version", 5, "--store", "wave").returncode == 0
    assert not populated.file(4, "wave", 5).exists()

    # a store that restarts afterwards no longer sees the removed versions
    u = np.zeros((8, 16))
    v = np.zeros(100, dtype=np.int32)
    with resurgo.Store("heat", **populated.kw(local_keep=0, persistent_keep=0)) as store:
        store.protect("u", u)
        store.protect("v", v)
        assert [i.version for i in store.versions()] == [0, 1, 2]
        levels = {i.version: i.levels for i in store.versions()}
        assert levels[1] == (4,) and levels[2] == (2,)
        assert store.restart(1) == 1
        assert store.last_restart.level == 4


def test_rm_refuses_while_the_store_is_open(dirs):
    a = np.arange(16.0)
    with resurgo.Store("busy", **dirs.kw()) as store:
        store.protect("a", a)
        store.checkpoint(1)
        store.wait(level=2)
        result = run_cli("rm", dirs.level_dir(2, "busy"), "--version", 1)
        assert result.returncode != 0
        assert "locked" in result.stderr, result.stderr
        assert dirs.file(2, "busy", 1).exists()
    assert run_cli("rm", dirs.level_dir(2, "busy"), "--version", 1).returncode == 0
    assert not dirs.file(2, "busy", 1).exists()


def test_rm_ambiguous_without_store(dirs):
    for name in ("one", "two"):
        with resurgo.Store(name, **dirs.kw()) as store:
            store.protect("a", np.zeros(4))
            store.checkpoint(3)
            store.wait()
    result = run_cli("rm", dirs.l2, "--version", 3)
    assert result.returncode == 2
    assert "--store" in result.stderr
    assert dirs.file(2, "one", 3).exists() and dirs.file(2, "two", 3).exists()


# --- chains of delta versions ----------------------------------------------------

REGION_BYTES = 4096


def write_version(directory, version, base, extents, dtype="uint8"):
    """Writes version `version` of store 'chain' (base -1: full) into
    `directory`: region 'u' of 4096 bytes; a delta holds `extents`
    [(offset, length)], each byte the version number."""
    directory.mkdir(parents=True, exist_ok=True)
    if base < 0:
        extents = [(0, REGION_BYTES)]
    region = _core.RegionDescription(id=0, label="u", bytes=REGION_BYTES, dtype=dtype, shape=[REGION_BYTES])
    header = _core.ContainerHeader(store="chain", version=version, base_version=base, chunk_size=1024,
                                   regions=[region])
    chunks = []
    for offset, length in extents:
        for start in range(offset, offset + length, 1024):
            chunks.append((0, start, bytes([version]) * min(1024, offset + length - start)))
    _core._write_container(str(directory / container_name(version)), header, chunks)


@pytest.fixture
def chains(dirs):
    """Store 'chain' on L2 and L4: 0 <- 1 <- 2 and 3 <- 4."""
    for level in (2, 4):
        directory = dirs.level_dir(level, "chain")
        write_version(directory, 0, -1, [])
        write_version(directory, 1, 0, [(0, 100)])
        write_version(directory, 2, 1, [(50, 100), (2000, 100)])
        write_version(directory, 3, -1, [])
        write_version(directory, 4, 3, [(4000, 96)])
    return dirs


def test_inspect_and_ls_show_bases(chains):
    result = run_cli("inspect", chains.file(2, "chain", 2))
    assert result.returncode == 0, result.stderr
    assert "delta of version 1" in result.stdout
    assert re.search(r"^extents +2, 200 B of 4.0 KiB ", result.stdout, re.MULTILINE), result.stdout
    full = run_cli("inspect", chains.file(2, "chain", 0))
    assert "full" in full.stdout and "extents" not in full.stdout

    result = run_cli("ls", chains.level_dir(2, "chain"))
    assert result.returncode == 0, result.stderr
    bases = {line.split()[1]: line.split()[3] for line in result.stdout.strip().splitlines()[1:]}
    assert bases == {"0": "full", "1": "0", "2": "1", "3": "full", "4": "3"}


def test_restart_reads_the_chain(chains):
    u = np.zeros(REGION_BYTES, dtype=np.uint8)
    # Files written by a tool carry no store identity: a store restarts from
    # them only when told to accept foreign versions.
    with resurgo.Store("chain", **chains.kw(restart_accept_foreign=True)) as store:
        store.protect("u", u)
        assert store.restart(2) == 2
        assert store.last_restart.chain == (2, 1, 0)
        assert (u[:50] == 1).all() and (u[50:150] == 2).all() and (u[150:2000] == 0).all()
        assert (u[2000:2100] == 2).all() and (u[2100:] == 0).all()
        assert store.restart() == 4
        assert store.last_restart.chain == (4, 3)


def test_verify_checks_whole_chains(chains):
    result = run_cli("verify", chains.root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verified 10 files, 0 damaged, 0 broken chains" in result.stdout

    l2 = chains.level_dir(2, "chain")
    chains.file(2, "chain", 1).unlink()  # deleted by hand
    flip_chunk_byte(chains.file(2, "chain", 3))
    write_version(chains.level_dir(4, "chain"), 5, 4, [(0, 10)], dtype="int8")
    result = run_cli("verify", chains.root)
    assert result.returncode == 1
    assert "1 damaged, 3 broken chains" in result.stdout
    broken = {line.split()[2].rstrip(":"): line for line in result.stdout.splitlines()
              if line.startswith("BROKEN CHAIN")}
    assert f"its base 1 is missing from {l2}" in broken[str(chains.file(2, "chain", 2))]
    assert f"its base 3 ({chains.file(2, 'chain', 3)}) is damaged" in broken[str(chains.file(2, "chain", 4))]
    assert "region tables differ" in broken[str(chains.file(4, "chain", 5))]
    # A single file is checked alone.
    assert run_cli("verify", chains.file(2, "chain", 2)).returncode == 0


def test_rm_refuses_to_break_a_chain_unless_told(chains):
    store_dir = chains.level_dir(2, "chain")
    result = run_cli("rm", store_dir, "--version", 0)
    assert result.returncode == 1
    assert "InvalidArgumentError" in result.stderr
    assert "base of version(s) 1, 2" in result.stderr and "--with-dependents" in result.stderr
    assert chains.file(2, "chain", 0).exists() and chains.file(2, "chain", 2).exists()

    assert run_cli("rm", store_dir, "--version", 4).returncode == 0  # nothing stands on it
    result = run_cli("rm", store_dir, "--version", 1, "--with-dependents")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"removed {chains.file(2, 'chain', 2)}",
                                          f"removed {chains.file(2, 'chain', 1)}"]
    assert [p.name for p in chains.files(2, "chain")] == [container_name(0), container_name(3)]
    assert len(chains.files(4, "chain")) == 5  # other level untouched
