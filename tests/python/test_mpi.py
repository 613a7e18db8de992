"""MPI stores from Python (issue 12): the jobs of mpi_programs/store_job.py
run under mpirun, each rank asserting what it restores; `resurgo export`
turns their versions into HDF5 files."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from resurgo import _core
from helpers import flip_byte, run_cli

MPIRUN = shutil.which("mpirun")
PROGRAM = Path(__file__).resolve().parent / "mpi_programs" / "store_job.py"

pytestmark = [
    pytest.mark.skipif(MPIRUN is None, reason="no mpirun on PATH (Debian: apt-get install openmpi-bin)"),
    pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="mpi4py is not installed"),
    pytest.mark.skipif(not _core.HAVE_MPI, reason="resurgo was built without MPI"),
]


def mpirun(ranks: int, *args: object, **environment: object) -> str:
    """Runs store_job.py on `ranks` ranks; returns its output. Fails the test
    when any rank fails."""
    env = {**os.environ, **{key: str(value) for key, value in environment.items()}}
    command = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks),
               sys.executable, str(PROGRAM), *map(str, args)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def export(store_dir: Path, version: int, output: Path) -> subprocess.CompletedProcess:
    return run_cli("export", store_dir, "--version", version, "-o", output)


def levels(tmp_path: Path, **extra: object) -> dict:
    return {"RESURGO_LOCAL_PATH": tmp_path / "l2", "RESURGO_PERSISTENT_PATH": tmp_path / "l4",
            "RESURGO_MPI_TIMEOUT": 60, **extra}


@pytest.mark.parametrize("ranks", [2, 4])
def test_collective_round_trip(tmp_path, ranks):
    # Two ranks per node: on 4 ranks the job has two nodes, each with its own
    # L2 directory and manifest.
    env = levels(tmp_path, RESURGO_LOCAL_PATH=tmp_path / "l2-{node}", RESURGO_MPI_RANKS_PER_NODE=2)
    mpirun(ranks, "write", 2, **env)
    nodes = sorted(p.name for p in tmp_path.glob("l2-*"))
    assert nodes == [f"l2-{node}" for node in range(ranks // 2)]
    for node in nodes:
        assert (tmp_path / node / "job" / "v0000000002.job").is_file()
    mpirun(ranks, "restore", 2, **env)


def test_global_array_exported_to_hdf5(tmp_path):
    h5py = pytest.importorskip("h5py")
    mpirun(4, "global", **levels(tmp_path, RESURGO_PERSISTENT_EVERY=1))
    output = tmp_path / "job.h5"
    result = export(tmp_path / "l4" / "job", 1, output)
    assert result.returncode == 0, result.stderr
    assert "1 global arrays, 4 regions of single ranks" in result.stdout
    with h5py.File(output, "r") as h5:
        assert (h5.attrs["store"], h5.attrs["version"], h5.attrs["ranks"]) == ("job", 1, 4)
        field = h5["field"][...]
        assert field.dtype == np.float32
        np.testing.assert_array_equal(field, np.arange(48, dtype=np.float32).reshape(6, 8))
        for rank in range(4):
            np.testing.assert_array_equal(h5[f"rank{rank:06d}/step"][...], [rank * 10])


def test_export_refuses_a_delta_version_and_a_damaged_manifest(tmp_path):
    pytest.importorskip("h5py")
    mpirun(2, "write", 2, **levels(tmp_path, RESURGO_CAPTURE_MODE="delta"))
    store_dir = tmp_path / "l2" / "job"
    output = tmp_path / "out" / "job.h5"
    output.parent.mkdir()
    result = export(store_dir, 2, output)
    assert result.returncode == 1
    assert "InvalidArgumentError" in result.stderr and "export a full version" in result.stderr
    assert list(output.parent.iterdir()) == []  # not even a partial file

    flip_byte(store_dir / "v0000000001.job", 2)
    result = export(store_dir, 1, output)
    assert result.returncode == 1
    assert "CorruptionError" in result.stderr and "v0000000001.job" in result.stderr
    assert not output.exists()

    result = export(store_dir, 7, output)
    assert result.returncode == 1 and "NotFoundError" in result.stderr


def test_ranks_naming_different_versions_raise_at_the_next_call_on_every_rank(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    mpirun(4, "mismatch", reports, **levels(tmp_path))
    assert sorted(p.name for p in reports.iterdir()) == [f"rank{rank}.txt" for rank in range(4)]
    for report in reports.iterdir():
        text = report.read_text()
        assert text.startswith("InvalidArgumentError") and "rank 3: 3" in text, text
