"""The GEMM that generated kernels call: ``gemm(a, b, out, beta)`` is ``out = a @ b +
beta * out`` through scipy's BLAS (the OpenBLAS that Numba's ``np.dot`` reaches), for
2-d float32/float64 operands that are row- or column-major views (a slice of rows, a
``.T``) with any leading dimension.

Why not ``np.dot(a, b, out)``: Numba types and lowers its whole implementation (shape
checks, layout dispatch, copies) into every kernel that calls it, about 0.07 s of
compile per call site, and it has no ``beta``, so a convolution's filter gradient
summed over batch tiles needed a buffer and an add loop of its own. This helper is one
``@njit`` function compiled once per operand layout (and cached on disk); a kernel
calls it. The call into BLAS is Numba's own ``numba_xxgemm`` (column-major, as BLAS):
a row-major ``C = A B`` is the column-major ``C^T = B^T A^T``, so the operands swap and
each one's layout becomes its transpose flag.

Kernels inline what they call, so a change here must bump ``emit.GENERATOR_VERSION``
(the kernels' cached code would keep the old helper otherwise).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.linalg import ensure_blas

ensure_blas()  # scipy's cython_blas, which numba_xxgemm calls into

_CHAR = ir.IntType(8)
_N, _T = ord("n"), ord("t")


@intrinsic
def _xxgemm(typingctx, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """BLAS ``?gemm`` (column-major) on the data of arrays ``a``, ``b``, ``c``."""
    sig = types.void(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

    def codegen(context, builder, sig, args):
        ta_, tb_, m_, n_, k_, al, a_, lda_, b_, ldb_, be, c_, ldc_ = args
        intp = context.get_value_type(types.intp)
        vp = cgutils.voidptr_t
        fnty = ir.FunctionType(ir.IntType(32), [_CHAR, _CHAR, _CHAR, intp, intp, intp, vp,
                                                vp, intp, vp, intp, vp, vp, intp])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "numba_xxgemm")
        dt = sig.args[6].dtype
        kind = ir.Constant(_CHAR, ord("s" if dt == types.float32 else "d"))

        def data(j, v):
            return builder.bitcast(context.make_array(sig.args[j])(context, builder, v).data, vp)

        def scalar(j, v):  # alpha and beta, by address, in the arrays' dtype
            v = context.cast(builder, v, sig.args[j], dt)
            return builder.bitcast(cgutils.alloca_once_value(builder, v), vp)

        def char(v):
            return builder.trunc(v, _CHAR)

        def size(j, v):
            return context.cast(builder, v, sig.args[j], types.intp)

        res = builder.call(fn, (kind, char(ta_), char(tb_), size(2, m_), size(3, n_),
                                size(4, k_), scalar(5, al), data(6, a_), size(7, lda_),
                                data(8, b_), size(9, ldb_), scalar(10, be), data(11, c_),
                                size(12, ldc_)))
        with builder.if_then(cgutils.is_not_null(builder, res), likely=False):
            pyapi = context.get_python_api(builder)
            pyapi.gil_ensure()
            pyapi.fatal_error("BLAS gemm returned an error")
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(cache=True, nogil=True)
def _layout(x, rows, cols, isz):
    """``(flag, ld)`` of a row-major (``n``) or column-major (``t``) operand; ``(0, 0)``
    when neither axis has a unit stride."""
    if x.strides[1] == isz or cols <= 1:
        return _N, max(x.strides[0] // isz, cols, 1)
    if x.strides[0] == isz or rows <= 1:
        return _T, max(x.strides[1] // isz, rows, 1)
    return 0, 0


@numba.njit(cache=True, nogil=True)
def _gemm(a, b, out, beta):
    m, k = a.shape
    n = b.shape[1]
    isz = out.itemsize
    ta, lda = _layout(a, m, k, isz)
    if ta == 0:  # strided both ways: BLAS reads a copy
        a = np.ascontiguousarray(a)
        ta, lda = _N, max(k, 1)
    tb, ldb = _layout(b, k, n, isz)
    if tb == 0:
        b = np.ascontiguousarray(b)
        tb, ldb = _N, max(n, 1)
    # row-major out = a @ b is column-major out^T = b^T a^T
    _xxgemm(tb, ta, n, m, k, 1.0, b, ldb, a, lda, beta, out, max(out.strides[0] // isz, n, 1))


@numba.njit(cache=True, nogil=True)
def gemm(a, b, out, beta):
    """``out = a @ b + beta * out`` (``beta`` 0: ``out``'s old values are not read)."""
    m, k = a.shape
    n = out.shape[1]
    if b.shape[0] != k or b.shape[1] != n or out.shape[0] != m:
        raise ValueError("gemm: operand shapes do not match")
    if m == 0 or n == 0:
        return
    isz = out.itemsize
    if out.strides[1] == isz or n <= 1:
        _gemm(a, b, out, beta)
    elif out.strides[0] == isz or m <= 1:
        _gemm(b.T, a.T, out.T, beta)  # out^T = b^T a^T, row-major
    else:  # a strided target: the product in a buffer, then added in place
        tmp = np.empty((m, n), out.dtype)
        _gemm(a, b, tmp, 0.0)
        for i in range(m):
            for j in range(n):
                out[i, j] = tmp[i, j] + beta * out[i, j] if beta != 0.0 else tmp[i, j]
