"""The few ScaLAPACK calls the Hessian example needs, through ctypes.

A ConvergentMatrix's local part is ScaLAPACK's local array and
``descriptor(context)`` its array descriptor, so a factorization needs no copy:

    lib = Scalapack(find_library())
    with lib.grid(*hessian.grid) as context:
        info = lib.potrf("U", hessian, context)   # in place, on every rank

The BLACS grid is made over MPI_COMM_WORLD with ``Cblacs_gridinit(&context,
"Row", P, Q)``: rank r at (r // Q, r % Q), the matrix's own placement. Fortran
conventions: every argument by pointer, each character argument followed by
its hidden length (gfortran passes it last, as a size_t).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import glob
from typing import Iterator, Optional, Tuple

import numpy as np

_DEBIAN_PATTERN = "/usr/lib/x86_64-linux-gnu/libscalapack-openmpi.so*"


def find_library() -> Optional[str]:
    """The ScaLAPACK built for Open MPI (Debian: libscalapack-openmpi-dev), or None."""
    name = ctypes.util.find_library("scalapack-openmpi")
    if name:
        return name
    candidates = sorted(glob.glob(_DEBIAN_PATTERN))
    return candidates[0] if candidates else None


def _int(value: int) -> ctypes.c_int:
    return ctypes.c_int(value)


def _char(letter: str) -> ctypes.c_char_p:
    return ctypes.c_char_p(letter.encode("ascii"))


_CHAR_LENGTH = ctypes.c_size_t(1)  # the hidden length of a one-letter argument


def _pointer(array: np.ndarray) -> ctypes.c_void_p:
    return array.ctypes.data_as(ctypes.c_void_p)


class Scalapack:
    """BLACS grids, p?potrf_ and p?gemm_ of one ScaLAPACK library."""

    def __init__(self, path: str) -> None:
        self._lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)

    @contextlib.contextmanager
    def grid(self, rows: int, cols: int) -> Iterator[int]:
        """A BLACS context for a rows x cols grid in row-major order over
        MPI_COMM_WORLD (collective); released on exit."""
        context = ctypes.c_int()
        self._lib.Cblacs_get(_int(-1), _int(0), ctypes.byref(context))  # the default system context
        self._lib.Cblacs_gridinit(ctypes.byref(context), b"Row", _int(rows), _int(cols))
        try:
            yield context.value
        finally:
            self._lib.Cblacs_gridexit(_int(context.value))

    def grid_info(self, context: int) -> Tuple[int, int, int, int]:
        """(grid rows, grid cols, my row, my col) of a BLACS context."""
        values = [ctypes.c_int() for _ in range(4)]
        self._lib.Cblacs_gridinfo(_int(context), *map(ctypes.byref, values))
        return tuple(v.value for v in values)

    def potrf(self, uplo: str, matrix, context: int) -> int:
        """Cholesky factorization of the whole square ``matrix`` in place
        (``uplo`` "U": A = U^T U in the upper triangle, "L": A = L L^T in the
        lower one). Returns INFO: 0, or k > 0 when the leading minor of
        order k is not positive definite."""
        routine = self._routine("potrf_", matrix.dtype)
        local, descriptor = matrix.local_data(), matrix.descriptor(context)
        info = ctypes.c_int()
        one = ctypes.byref(_int(1))
        routine(_char(uplo), ctypes.byref(_int(matrix.shape[0])), _pointer(local), one, one, _pointer(descriptor),
                ctypes.byref(info), _CHAR_LENGTH)
        return info.value

    def gemm(self, a, b, c, context: int, alpha: float = 1.0, beta: float = 0.0) -> None:
        """``c = alpha * a @ b + beta * c`` on three matrices of one dtype and grid."""
        routine = self._routine("gemm_", c.dtype)
        scalar = ctypes.c_double if c.dtype == np.float64 else ctypes.c_float
        one = ctypes.byref(_int(1))
        m, k = a.shape
        n = b.shape[1]
        # Named, so that every array outlives the call that reads its address.
        arrays = [array for matrix in (a, b, c) for array in (matrix.local_data(), matrix.descriptor(context))]
        a_local, a_descriptor, b_local, b_descriptor, c_local, c_descriptor = map(_pointer, arrays)
        routine(_char("N"), _char("N"), ctypes.byref(_int(m)), ctypes.byref(_int(n)), ctypes.byref(_int(k)),
                ctypes.byref(scalar(alpha)), a_local, one, one, a_descriptor, b_local, one, one, b_descriptor,
                ctypes.byref(scalar(beta)), c_local, one, one, c_descriptor, _CHAR_LENGTH, _CHAR_LENGTH)

    def _routine(self, name: str, dtype: np.dtype):
        prefix = {np.dtype(np.float32): "ps", np.dtype(np.float64): "pd"}[np.dtype(dtype)]
        return getattr(self._lib, prefix + name)
