"""The `resurgo` tool as a new user meets it (issue 28): export of a single
process's store, ls telling damaged, broken and uncommitted versions from
intact ones, verify refusing to verify nothing, stores named '.hidden' or
'-dash'."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import resurgo
from resurgo import _core
from helpers import container_name, flip_byte, run_cli

MPIRUN = shutil.which("mpirun")
STORE_JOB = Path(__file__).resolve().parent / "mpi_programs" / "store_job.py"


def states(output: str) -> dict:
    """(version, rank) -> STATE of each row `resurgo ls` printed."""
    header, *rows = output.strip().splitlines()
    at = header.index("STATE")  # the columns are aligned; SIZE holds a space ("4.0 KiB")
    return {(int(row.split()[1]), int(row.split()[2])): row[at:] for row in rows}


def write_version(directory: Path, version: int, base: int = -1, rank: int = 0) -> Path:
    """Version `version` of rank `rank` of store 'tool' (base -1: full),
    one region 'u' of 4096 bytes."""
    directory.mkdir(parents=True, exist_ok=True)
    region = _core.RegionDescription(id=0, label="u", bytes=4096, dtype="uint8", shape=[4096])
    header = _core.ContainerHeader(store="tool", version=version, rank=rank, base_version=base, chunk_size=4096,
                                   regions=[region])
    path = directory / container_name(version, rank)
    _core._write_container(str(path), header, [(0, 0, bytes([version]) * (4096 if base < 0 else 64))])
    return path


@pytest.fixture
def solo(dirs):
    """Store 'solo' of a single process: versions 1..3 at L2 and L4."""
    u = np.zeros((4, 8), dtype=np.float64)
    step = np.zeros(1, dtype=np.int64)
    with resurgo.Store("solo", **dirs.kw(local_keep=0, persistent_keep=0)) as store:
        store.protect("u", u)
        store.protect("step", step)
        for version in range(1, 4):
            u[...] = version
            step[0] = version * 10
            store.checkpoint(version)
        store.wait(level=4)
    return dirs


# --- export ----------------------------------------------------------------------

def test_export_of_a_single_process_store(solo, tmp_path):
    h5py = pytest.importorskip("h5py")
    output = tmp_path / "solo.h5"
    result = run_cli("export", solo.level_dir(2, "solo"), "--version", 2, "-o", output)
    assert result.returncode == 0, result.stderr
    assert "exported version 2 of store 'solo' (a single process)" in result.stdout
    assert "2 regions" in result.stdout
    with h5py.File(output, "r") as h5:
        assert (h5.attrs["store"], h5.attrs["version"], h5.attrs["ranks"]) == ("solo", 2, 1)
        np.testing.assert_array_equal(h5["u"][...], np.full((4, 8), 2.0))
        np.testing.assert_array_equal(h5["step"][...], [20])


def test_export_of_a_version_a_single_process_store_lacks(solo, tmp_path):
    pytest.importorskip("h5py")
    result = run_cli("export", solo.level_dir(4, "solo"), "--version", 7, "-o", tmp_path / "none.h5")
    assert result.returncode == 1
    assert "holds no file of version 7" in result.stderr
    assert "manifest" not in result.stderr
    assert not (tmp_path / "none.h5").exists()


# --- ls --------------------------------------------------------------------------

def test_ls_tells_damaged_and_broken_versions_from_intact_ones(tmp_path):
    store_dir = tmp_path / "l2" / "tool"
    write_version(store_dir, 1)
    write_version(store_dir, 2, base=1)
    write_version(store_dir, 3, base=2)
    write_version(store_dir, 4)
    flip_byte(write_version(store_dir, 5), 8)  # the header: inspect fails
    (store_dir / container_name(1)).unlink()  # deleted by hand: 2 and 3 lose their chain
    result = run_cli("ls", store_dir)
    assert result.returncode == 0, result.stderr
    found = states(result.stdout)
    assert found[(2, 0)] == "broken chain: its base 1 is missing from " + str(store_dir)
    assert found[(3, 0)].startswith("broken chain: its base 1 is missing")
    assert found[(4, 0)] == "ok"
    assert found[(5, 0)].startswith("damaged: ")
    help_text = run_cli("ls", "--help").stdout
    for state in ("broken chain", "uncommitted", "incomplete", "damaged", "resurgo verify"):
        assert state in help_text


def test_ls_calls_the_versions_of_several_ranks_without_a_manifest_uncommitted(tmp_path):
    store_dir = tmp_path / "l4" / "tool"
    for rank in (0, 1):
        write_version(store_dir, 1, rank=rank)
    result = run_cli("ls", store_dir)
    assert result.returncode == 0, result.stderr
    assert set(states(result.stdout).values()) == {
        "uncommitted: no job manifest here (the job did not commit this version)"}


@pytest.mark.skipif(MPIRUN is None, reason="no mpirun on PATH")
@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="mpi4py is not installed")
@pytest.mark.skipif(not _core.HAVE_MPI, reason="resurgo was built without MPI")
def test_ls_checks_each_file_against_the_job_manifest(tmp_path):
    env = {**os.environ, "RESURGO_LOCAL_PATH": str(tmp_path / "l2"), "RESURGO_PERSISTENT_PATH": str(tmp_path / "l4"),
           "RESURGO_LOCAL_KEEP": "0", "RESURGO_MPI_TIMEOUT": "60"}
    job = subprocess.run([MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "2", sys.executable,
                          str(STORE_JOB), "write", "3"], env=env, capture_output=True, text=True, timeout=120)
    assert job.returncode == 0, job.stdout + job.stderr
    store_dir = tmp_path / "l2" / "job"
    assert states(run_cli("ls", store_dir).stdout) == {(v, r): "ok" for v in (1, 2, 3) for r in (0, 1)}
    (store_dir / "v0000000003.job").unlink()  # as if a rank had died before the job committed 3
    shutil.copyfile(store_dir / container_name(2, 1), store_dir / container_name(1, 1))  # another file under 1's name
    (store_dir / container_name(2, 1)).unlink()  # deleted by hand
    found = states(run_cli("ls", store_dir).stdout)
    assert found[(3, 0)].startswith("uncommitted") and found[(3, 1)].startswith("uncommitted")
    assert found[(1, 1)] == "damaged: not the file the job manifest of version 1 names"
    assert found[(2, 0)] == "incomplete: the file of rank 1 that the job manifest names is missing here"
    assert found[(1, 0)] == "ok"


# --- verify ----------------------------------------------------------------------

def test_verify_of_an_empty_or_wrong_directory_fails(solo, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    wrong = tmp_path / "notes"
    wrong.mkdir()
    (wrong / "readme.txt").write_text("not a store")
    for directory in (empty, wrong):
        result = run_cli("verify", directory)
        assert result.returncode == 2, result.stdout + result.stderr
        assert f"{directory} holds no container file" in result.stderr
        assert "verified 0 files" in result.stdout
    result = run_cli("verify", solo.level_dir(2, "solo"), empty)  # the store is verified all the same
    assert result.returncode == 2
    assert "verified 3 files, 0 damaged" in result.stdout
    assert run_cli("verify", solo.level_dir(2, "solo")).returncode == 0


# --- store names -----------------------------------------------------------------

def test_a_hidden_store_is_listed_and_verified(dirs):
    u = np.arange(8.0)
    with resurgo.Store(".hidden", **dirs.kw()) as store:
        store.protect("u", u)
        store.checkpoint(1)
    result = run_cli("ls", dirs.l2)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].split()[:3] == [".hidden", "1", "0"]
    result = run_cli("verify", dirs.l2)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verified 1 files, 0 damaged" in result.stdout


def test_a_store_whose_name_begins_with_a_dash(dirs):
    u = np.arange(8.0)
    with resurgo.Store("-dash", **dirs.kw(local_keep=0)) as store:
        store.protect("u", u)
        store.checkpoint(1)
        store.checkpoint(2)
    result = run_cli("ls", "--", "-dash", cwd=dirs.l2)
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()[1:]] == ["-dash", "-dash"]
    result = run_cli("rm", dirs.l2, "--version", 1, "--store", "-dash")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (dirs.l2 / "-dash").glob("*.rsg")) == [container_name(2)]
    assert "--store -dash" in run_cli("rm", "--help").stdout
