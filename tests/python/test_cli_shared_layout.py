"""`resurgo ls|inspect|verify|rm` on the shared files of an MPI store with
persistent.layout = shared (v<N>.shared.rsg: every rank's part of a version
in one file). The files come from a real job: mpi_programs/store_job.py on
2 ranks under mpirun, once per module, copied for each test."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from resurgo import _core
from helpers import flip_byte, run_cli

MPIRUN = shutil.which("mpirun")
PROGRAM = Path(__file__).resolve().parent / "mpi_programs" / "store_job.py"
RANKS = 2

pytestmark = [
    pytest.mark.skipif(MPIRUN is None, reason="no mpirun on PATH (Debian: apt-get install openmpi-bin)"),
    pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="mpi4py is not installed"),
    pytest.mark.skipif(not _core.HAVE_MPI, reason="resurgo was built without MPI"),
]


def shared(l4: Path, version: int) -> Path:
    return l4 / "job" / f"v{version:010d}.shared.rsg"


def write_job(root: Path) -> Path:
    """Versions 1 and 2 of store 'job', written on L4 in the shared layout
    under `root`: the L4 directory."""
    env = {**os.environ, "RESURGO_LOCAL_PATH": str(root / "l2"), "RESURGO_PERSISTENT_PATH": str(root / "l4"),
           "RESURGO_PERSISTENT_EVERY": "1", "RESURGO_PERSISTENT_LAYOUT": "shared", "RESURGO_MPI_TIMEOUT": "60"}
    command = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(RANKS), sys.executable, str(PROGRAM),
               "write", "2"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    l4 = root / "l4"
    assert sorted(p.name for p in (l4 / "job").glob("*.rsg")) == [shared(l4, 1).name, shared(l4, 2).name]
    return l4


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    return write_job(tmp_path_factory.mktemp("shared-layout"))


@pytest.fixture
def l4(written, tmp_path) -> Path:
    copy = tmp_path / "l4"
    shutil.copytree(written, copy)
    return copy


def ls_rows(path: Path):
    result = run_cli("ls", path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].split() == ["STORE", "VERSION", "RANK", "BASE", "SIZE", "REGIONS", "STATE"]
    return lines[1:]


def test_ls_lists_one_row_per_version_with_every_rank(l4):
    for path in (l4, l4 / "job", shared(l4, 2)):
        rows = ls_rows(path)
        for row in rows:
            assert f"all ({RANKS})" in row, row
            assert row.split()[0] == "job" and row.endswith("ok"), row
        assert [row.split()[1] for row in rows] == (["2"] if path.is_file() else ["1", "2"])


def test_ls_names_a_torn_file_an_uncommitted_version_and_a_quarantined_copy(l4):
    path = shared(l4, 2)
    os.truncate(path, path.stat().st_size - 100)
    (row,) = [row for row in ls_rows(l4) if row.split()[1] == "2"]
    assert "damaged:" in row and "torn" in row, row
    (l4 / "job" / "v0000000001.job").unlink()
    (row,) = [row for row in ls_rows(l4) if row.split()[1] == "1"]
    assert "uncommitted" in row, row
    path.rename(path.with_name(path.name + ".damaged"))
    (row,) = [row for row in ls_rows(l4) if row.split()[1] == "2"]
    assert "quarantined (damaged:" in row, row


def test_ls_refuses_a_file_that_is_not_the_one_the_manifest_names(l4, tmp_path):
    # Version 1's file under version 2's name: its parts hold version 1.
    shutil.copyfile(shared(l4, 1), shared(l4, 2))
    (row,) = [row for row in ls_rows(l4) if row.split()[1] == "2"]
    assert "damaged:" in row and "version 1" in row, row
    # Version 2 of another run: intact, but not the parts this manifest names.
    shutil.copyfile(shared(write_job(tmp_path / "other"), 2), shared(l4, 2))
    (row,) = [row for row in ls_rows(l4) if row.split()[1] == "2"]
    assert "damaged: rank 0's part is not the file the job manifest of version 2 names" in row, row


def test_inspect_shows_each_ranks_part(l4):
    result = run_cli("inspect", shared(l4, 2))
    assert result.returncode == 0, result.stderr
    assert "parts      2 (one per rank" in result.stdout
    info = _core.inspect_shared(str(shared(l4, 2)))
    for rank, offset, size, container in info[2]:
        assert container.rank == rank and container.version == 2
        assert any(line.split()[:3] == [str(rank), str(offset), str(size)] for line in result.stdout.splitlines())
    result = run_cli("inspect", "--json", shared(l4, 2))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["version"] == 2 and out["file_size"] == shared(l4, 2).stat().st_size
    assert [part["rank"] for part in out["parts"]] == list(range(RANKS))
    # Each part in its rank's slot: in rank order, a hole after each part.
    assert out["parts"][0]["offset"] == 0
    assert out["parts"][1]["offset"] >= out["parts"][0]["bytes"]
    assert {part["container"]["regions"][0]["label"] for part in out["parts"]} == {"u"}


def test_inspect_of_a_torn_shared_file_fails_naming_it(l4):
    path = shared(l4, 2)
    os.truncate(path, 10)
    result = run_cli("inspect", path)
    assert result.returncode == 1
    assert "CorruptionError" in result.stderr and path.name in result.stderr, result.stderr


def test_verify_checks_every_parts_chunks(l4):
    result = run_cli("verify", l4)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verified 2 files, 0 damaged" in result.stdout
    # One byte of rank 1's chunk: the index still parses (ls says ok), the chunk's checksum fails.
    _, _, parts = _core.inspect_shared(str(shared(l4, 2)))
    _, offset, _, container = parts[1]
    chunk = container.chunks[0]
    flip_byte(shared(l4, 2), offset + chunk.file_offset + chunk.stored_length // 2)
    assert all(row.endswith("ok") for row in ls_rows(l4))
    for target in (l4, shared(l4, 2)):
        result = run_cli("verify", target)
        assert result.returncode == 1, result.stdout
        assert "DAMAGED" in result.stdout and "rank 1's part" in result.stdout, result.stdout


def test_rm_removes_a_shared_version(l4):
    result = run_cli("rm", l4, "--version", 1)
    assert result.returncode == 0, result.stderr
    assert f"removed {shared(l4, 1)}" in result.stdout
    assert not shared(l4, 1).exists() and shared(l4, 2).exists()
    assert [row.split()[1] for row in ls_rows(l4)] == ["2"]
    assert run_cli("rm", l4, "--version", 1).returncode == 1  # nothing left of it
