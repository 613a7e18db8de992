"""resurgo.matrix.ConvergentMatrix from Python: the jobs of
mpi_programs/matrix_job.py run under mpirun (each rank asserts; rank 0 prints
"ok <check>" per check passed), and the Hessian example
(examples/hessian/hessian.py) is stopped, resumed and compared with an
uninterrupted run."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import numpy as np
import pytest

from resurgo import _core
from resurgo.errors import ConfigError
import resurgo
from resurgo.matrix import ConvergentMatrix, global_file_info, load_global, verify_global

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "python" / "mpi_programs" / "matrix_job.py"
HESSIAN = ROOT / "examples" / "hessian" / "hessian.py"
MPIRUN = shutil.which("mpirun")

sys.path.insert(0, str(HESSIAN.parent))
from scalapack import find_library  # noqa: E402  (the example's ctypes wrapper)
from helpers import run_cli

SCALAPACK = find_library()


def _why_no_mpi_job() -> str:
    if MPIRUN is None:
        return "no mpirun on PATH (Debian: apt-get install openmpi-bin)"
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed"
    if not _core.HAVE_MPI:
        return "resurgo was built without MPI"
    return ""


WHY_NO_MPI_JOB = _why_no_mpi_job()
needs_mpi = pytest.mark.skipif(bool(WHY_NO_MPI_JOB), reason=WHY_NO_MPI_JOB)
needs_scalapack = pytest.mark.skipif(
    SCALAPACK is None, reason="no ScaLAPACK for Open MPI (Debian: apt-get install libscalapack-openmpi-dev)")

# Ranks and the process grid of each checks job: square, 1 x Q and rectangular.
GRIDS = {1: "1x1", 2: "1x2", 4: "2x2", 6: "2x3"}


def assembly_cases(*variants: str) -> List[str]:
    return [f"assemble {variant} {dtype} {backend}" for variant in variants for dtype in ("float32", "float64")
            for backend in ("messages", "rma")]


def mpirun(ranks: int, program: Path, *args: object, env: dict = None) -> subprocess.CompletedProcess:
    """Runs `program` on `ranks` ranks (not checking how it ended). A job
    still running after 120 s is killed and reported with return code None
    and the output it had written."""
    command = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks), sys.executable,
               str(program), *map(str, args)]
    try:
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as timeout:
        def text(output) -> str:
            return output.decode(errors="replace") if isinstance(output, bytes) else output or ""
        return subprocess.CompletedProcess(command, None, text(timeout.stdout),
                                           text(timeout.stderr) + "\n(killed after 120 s)")


def succeeded(result: subprocess.CompletedProcess) -> List[str]:
    """The output lines of a job that must have succeeded."""
    assert result.returncode == 0, f"{' '.join(result.args)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout.splitlines()


def level_environment(tmp_path: Path) -> dict:
    return {**os.environ, "RESURGO_LOCAL_PATH": str(tmp_path / "l2"),
            "RESURGO_PERSISTENT_PATH": str(tmp_path / "l4"), "RESURGO_MPI_TIMEOUT": "60"}


@functools.lru_cache(maxsize=None)
def checks_job(ranks: int) -> subprocess.CompletedProcess:
    """One checks job per number of ranks, shared by the tests that read it."""
    return mpirun(ranks, JOB, "checks", GRIDS[ranks], SCALAPACK or "")


def assert_checks_passed(ranks: int, names: List[str]) -> None:
    result = checks_job(ranks)
    missing = [name for name in names if f"ok {name}" not in result.stdout.splitlines()]
    assert not missing, (f"{' '.join(result.args)}: no 'ok' for {missing} (rc {result.returncode}):\n"
                         f"{result.stdout}\n{result.stderr}")


# -- in this process: arguments refused before any MPI call --------------------

def test_unsupported_dtype_is_refused_by_name():
    for dtype in (np.int32, np.complex128, "float16"):
        with pytest.raises(TypeError, match=np.dtype(dtype).name):
            ConvergentMatrix(object(), (4, 4), dtype=dtype)


def test_a_build_without_mpi_says_so(monkeypatch):
    monkeypatch.setattr(_core, "HAVE_MPI", False)
    with pytest.raises(ConfigError, match="built without MPI"):
        ConvergentMatrix(object(), (4, 4))


@pytest.mark.skipif(not _core.HAVE_MPI, reason="resurgo was built without MPI")
def test_comm_must_be_an_mpi4py_communicator():
    with pytest.raises(TypeError, match="mpi4py communicator"):
        ConvergentMatrix("MPI_COMM_WORLD", (4, 4))


# -- under mpirun --------------------------------------------------------------

@needs_mpi
@pytest.mark.parametrize("ranks", sorted(GRIDS))
def test_assembly_equals_the_numpy_sum(ranks):
    # Random integer-valued updates (duplicate, unsorted indices) from every
    # rank, float32 and float64, both backends; the global matrix rebuilt from
    # each rank's local_data() must equal NumPy's sum exactly, and a symmetric
    # update sends (or adds here) only its upper-triangle pairs.
    assert_checks_passed(ranks, assembly_cases("general", "symmetric", "vector"))


@needs_mpi
@pytest.mark.parametrize("ranks", sorted(GRIDS))
def test_assembly_with_bins_past_the_eager_limit(ranks):
    # Bins of several KiB, which MPI may read from the sender's buffer long
    # after MPI_Isend returned.
    assert_checks_passed(ranks, assembly_cases("large-bins"))


@needs_mpi
@pytest.mark.parametrize("ranks", sorted(GRIDS))
def test_ownership_descriptor_and_default_grid(ranks):
    assert_checks_passed(ranks, ["ownership", "default grid"])


@needs_mpi
@pytest.mark.parametrize("ranks", [2, 6])
def test_local_data_is_a_writable_view_that_keeps_the_matrix_alive(ranks):
    assert_checks_passed(ranks, ["local_data view"])


@needs_mpi
@pytest.mark.parametrize("ranks", [1, 4])
def test_inline_progress_reset_and_progress_thread(ranks):
    # progress="inline" with check_collective and a timeout, progress(),
    # reset() (zeros, counters restarted, epoch kept) and a new assembly after
    # it, and progress="thread" where MPI_THREAD_MULTIPLE is provided.
    assert_checks_passed(ranks, ["lifecycle"])


@needs_mpi
@pytest.mark.parametrize("ranks", [1, 4])
def test_bad_input_raises_named_errors(ranks):
    # Out-of-range indices (InvalidArgumentError naming index and bound, and
    # nothing applied), shape mismatch (ValueError naming both shapes),
    # dtypes, bad layouts, a negative timeout, and StateError after free().
    assert_checks_passed(ranks, ["errors"])


@needs_mpi
@needs_scalapack
@pytest.mark.parametrize("ranks", sorted(GRIDS))
def test_scalapack_factors_and_multiplies_the_local_data_in_place(ranks):
    # pdgemm_ of two assembled matrices into a third and pdpotrf_ ("L") of an
    # assembled SPD matrix, on the local data through descriptor(): relative
    # Frobenius error below 1e-12 against NumPy.
    assert_checks_passed(ranks, ["scalapack pdgemm", "scalapack pdpotrf"])


@needs_mpi
def test_checkpoint_restores_the_values_and_the_epoch(tmp_path):
    environment = level_environment(tmp_path)
    succeeded(mpirun(4, JOB, "checkpoint-write", tmp_path, env=environment))
    lines = succeeded(mpirun(4, JOB, "checkpoint-restore", tmp_path, env=environment))
    assert lines == ["ok checkpoint restore", "ok checkpoint layout mismatch"]


@needs_mpi
def test_global_layout_files_are_read_back_on_another_grid(tmp_path):
    # write_global on 4 ranks (2 x 2, blocks 4 x 3), float32 and float64,
    # order "F" and "C": the raw file is the matrix in that order (read with
    # NumPy alone) and each write commits; read_global on 2 ranks (blocks
    # 5 x 7) gives back every element and the epoch; another shape, another
    # dtype and no file are refused by name.
    succeeded(mpirun(4, JOB, "global-write", tmp_path))
    assert succeeded(mpirun(2, JOB, "global-read", tmp_path)) == ["ok global read"]


@needs_mpi
def test_load_global_reads_a_file_alone_and_names_what_is_wrong(tmp_path):
    # load_global and global_file_info in this process, without MPI: the
    # column- and row-major files of one matrix give the same array, in the
    # file's memory order; a flipped bit names its part; a file that is no
    # global-layout file, a missing one and a path that is no path are
    # refused by name.
    succeeded(mpirun(4, JOB, "global-write", tmp_path))
    by_column, by_row = (tmp_path / f"matrix-float64-{order}.rsgm" for order in ("F", "C"))
    column_major, row_major = load_global(by_column), load_global(by_row)
    assert column_major.flags["F_CONTIGUOUS"] and row_major.flags["C_CONTIGUOUS"]
    assert np.array_equal(column_major, row_major) and column_major.shape == (37, 29)
    assert global_file_info(str(by_row))["order"] == "C"
    damaged = tmp_path / "damaged.rsgm"
    data = bytearray(by_column.read_bytes())
    data[-1] ^= 0x10
    damaged.write_bytes(bytes(data))
    with pytest.raises(resurgo.CorruptionError, match=r"damaged\.rsgm.*part 0 of 1"):
        load_global(damaged)
    text = tmp_path / "text.rsgm"
    text.write_bytes(b"x" * 100)
    with pytest.raises(resurgo.FormatError, match="no ConvergentMatrix global-layout file"):
        load_global(text)
    with pytest.raises(resurgo.NotFoundError, match="none.rsgm"):
        global_file_info(tmp_path / "none.rsgm")
    with pytest.raises(TypeError, match="load_global: path must be a str or os.PathLike, not int"):
        load_global(3)


# Two files write_global wrote (matrix_io_check), committed as the global
# fuzzer's seeds: read here without any MPI job.
GLOBAL_SEEDS = ROOT / "tests" / "fuzz" / "corpus" / "global"


def test_committed_files_are_read_and_verified_as_a_build_without_mpi_would(tmp_path, monkeypatch):
    # No mpirun, and HAVE_MPI off as in a build without MPI: load_global
    # gives the elements where the file's data offset says they lie (read
    # with NumPy alone), verify_global and global_file_info agree, and a
    # flipped bit is refused with its part named.
    monkeypatch.setattr(_core, "HAVE_MPI", False)
    path = GLOBAL_SEEDS / "float64-50x40-row-major.rsgm"
    info = global_file_info(path)
    assert info == {"shape": (50, 40), "dtype": np.dtype(np.float64), "order": "C", "epoch": 2}
    assert verify_global(path) == info
    with open(path, "rb") as file:
        file.seek(64)
        offset = int(np.frombuffer(file.read(8), dtype="<u8")[0])
    raw = np.fromfile(path, dtype=np.float64, offset=offset).reshape(50, 40)
    assert np.array_equal(load_global(path), raw)
    damaged = tmp_path / "damaged.rsgm"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x10
    damaged.write_bytes(bytes(data))
    with pytest.raises(resurgo.CorruptionError, match=r"verify_global_file: file '.*damaged\.rsgm'.*part 0 of 1"):
        verify_global(damaged)


def test_the_cli_inspects_and_verifies_global_layout_files(tmp_path):
    # `resurgo inspect` shows a global-layout file's header (text and JSON),
    # `resurgo verify` checks every part: intact files pass beside each
    # other, a flipped bit is DAMAGED with its part named and exit status 1
    # (before, both took the file for a damaged container file).
    by_row = GLOBAL_SEEDS / "float32-37x29.rsgm"
    shown = run_cli("inspect", by_row)
    assert shown.returncode == 0, shown.stderr
    assert "ConvergentMatrix global-layout file" in shown.stdout and "37 x 29" in shown.stdout
    assert "float32" in shown.stdout and "row-major (C)" in shown.stdout
    as_json = json.loads(run_cli("inspect", "--json", by_row).stdout)
    assert as_json["shape"] == [37, 29] and as_json["dtype"] == "float32" and as_json["order"] == "C"
    assert as_json["epoch"] == global_file_info(by_row)["epoch"]
    intact = sorted(GLOBAL_SEEDS.glob("*.rsgm"))
    verified = run_cli("verify", *intact)
    assert verified.returncode == 0 and f"verified {len(intact)} files, 0 damaged" in verified.stdout, verified
    damaged = tmp_path / "damaged.rsgm"
    data = bytearray((GLOBAL_SEEDS / "float64-50x40-row-major.rsgm").read_bytes())
    data[-1] ^= 0x10
    damaged.write_bytes(bytes(data))
    verified = run_cli("verify", damaged, *intact)
    assert verified.returncode == 1, verified
    assert re.search(r"DAMAGED .*damaged\.rsgm: .*part 0 of 1", verified.stdout), verified.stdout
    assert f"verified {len(intact) + 1} files, 1 damaged" in verified.stdout


def hessian_run(tmp_path: Path, store: str, *options: object) -> dict:
    """Runs the example on 2 ranks; returns its RESULT record."""
    arguments = ["--params", 480, "--layers", 8, "--events", 36, "--every", 8, "--block", 16, "--store", store,
                 *options]
    lines = succeeded(mpirun(2, HESSIAN, *arguments, env=level_environment(tmp_path)))
    results = [line for line in lines if line.startswith("RESULT ")]
    assert len(results) == 1, lines
    return {**json.loads(results[0][len("RESULT "):]), "lines": lines}


@needs_mpi
def test_hessian_example_resumes_to_the_bits_of_an_uninterrupted_run(tmp_path):
    # Panels hold multiples of 1/16: every sum is exact, so the order in
    # which owners apply the updates cannot change a bit and the comparison
    # can be exact.
    reference = hessian_run(tmp_path, "reference", "--output", tmp_path / "reference.npy")
    assert reference["restarted_from"] == -1 and reference["events_run"] == 36
    assert "check: equal to the serial NumPy sum" in reference["lines"]

    stopped = hessian_run(tmp_path, "interrupted", "--stop-after", 20)
    assert stopped["events_run"] == 20 and stopped["checkpoints"] == 2  # after events 8 and 16
    resumed = hessian_run(tmp_path, "interrupted", "--output", tmp_path / "resumed.npy",
                          "--write-global", tmp_path / "resumed.rsgm")
    assert resumed["restarted_from"] == 16 and resumed["events_run"] == 20

    expected, actual = np.load(tmp_path / "reference.npy"), np.load(tmp_path / "resumed.npy")
    assert expected.dtype == actual.dtype == np.float64
    assert expected.tobytes() == actual.tobytes()
    # The global-layout file of the resumed run: the same matrix, read by
    # this process alone after every part is verified.
    assert verify_global(tmp_path / "resumed.rsgm")["order"] == "F"
    assert load_global(tmp_path / "resumed.rsgm").tobytes(order="C") == actual.tobytes()
    if SCALAPACK is not None:
        assert any(line.startswith("cholesky: pdpotrf") for line in reference["lines"]), reference["lines"]

