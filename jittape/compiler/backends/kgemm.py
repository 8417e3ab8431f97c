"""The GEMM that generated kernels call: ``gemm(a, b, out, beta)`` is ``out = a @ b +
beta * out`` through scipy's BLAS (the OpenBLAS that Numba's ``np.dot`` reaches), for
2-d float32/float64 operands that are row- or column-major views (a slice of rows, a
``.T``) with any leading dimension.

Why not ``np.dot(a, b, out)``: Numba types and lowers its whole implementation (shape
checks, layout dispatch, copies) into every kernel that calls it, and it has no
``beta``, so a convolution's filter gradient summed over batch tiles needed a buffer
and an add loop of its own. ``gemm`` is an intrinsic: a few integer instructions that
read the operands' strides and one call, written into the kernel where it is called
(an ``@njit`` helper instead was compiled for every combination of operand layouts and
linked into, and optimized again with, each kernel: LeNet's step compiled in 5.9 s
against 4.5 s with ``np.dot``). The call into BLAS is Numba's own ``numba_xxgemm``
(column-major, as BLAS): a row-major ``C = A B`` is the column-major ``C^T = B^T A^T``,
so the operands swap and each one's layout becomes its transpose flag.

Kernels print it only where ``beta`` is not 0 (a convolution's filter gradient summed
over batch tiles); plain products stay ``np.dot``, which also copies a strided operand.
An operand must have a unit stride along one of its axes, and ``out`` along its rows
(the scheduler passes arrays, row slices and ``.T`` views); anything else raises
``ValueError``. Kernels hold the generated code, so a change here must bump
``emit.GENERATOR_VERSION``.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.linalg import ensure_blas

ensure_blas()  # scipy's cython_blas, which numba_xxgemm calls into

_CHAR = ir.IntType(8)
_DTYPES = {types.float32: "s", types.float64: "d"}


@intrinsic
def gemm(typingctx, a, b, out, beta):
    """``out = a @ b + beta * out`` (``beta`` 0: ``out``'s old values are not read)."""
    arrays = (a, b, out)
    if not all(isinstance(t, types.Array) and t.ndim == 2 for t in arrays):
        return None
    if len({t.dtype for t in arrays}) != 1 or a.dtype not in _DTYPES:
        return None
    if not isinstance(beta, (types.Float, types.Integer)):
        return None
    sig = types.void(a, b, out, beta)

    def codegen(context, builder, sig, args):
        dt = sig.args[0].dtype
        intp = context.get_value_type(types.intp)
        isz = context.get_constant(types.intp, context.get_abi_sizeof(
            context.get_data_type(dt)))
        zero, one = ir.Constant(intp, 0), ir.Constant(intp, 1)
        arr = [context.make_array(t)(context, builder, v) for t, v in zip(sig.args[:3], args[:3])]
        shp = [cgutils.unpack_tuple(builder, x.shape, 2) for x in arr]
        std = [cgutils.unpack_tuple(builder, x.strides, 2) for x in arr]
        m, k = shp[0]
        n = shp[2][1]

        def cmp(op, x, y):
            return builder.icmp_signed(op, x, y)

        def imax(*xs):
            r = xs[0]
            for x in xs[1:]:
                r = builder.select(cmp(">", r, x), r, x)
            return r

        bad = builder.or_(builder.or_(cmp("!=", shp[1][0], k), cmp("!=", shp[1][1], n)),
                          cmp("!=", shp[2][0], m))
        with builder.if_then(bad, likely=False):
            context.call_conv.return_user_exc(
                builder, ValueError, ("gemm: operand shapes do not match",))

        def layout(j, rows, cols):
            """(flag, ld) of operand ``j``: row-major 'n', column-major 't'."""
            s0, s1 = std[j]
            row = builder.or_(cmp("==", s1, isz), cmp("<=", cols, one))
            col = builder.or_(cmp("==", s0, isz), cmp("<=", rows, one))
            with builder.if_then(builder.not_(builder.or_(row, col)), likely=False):
                context.call_conv.return_user_exc(
                    builder, ValueError, ("gemm: an operand has no unit stride",))
            flag = builder.select(row, ir.Constant(_CHAR, ord("n")), ir.Constant(_CHAR, ord("t")))
            ld = builder.select(row, imax(builder.sdiv(s0, isz), cols, one),
                                imax(builder.sdiv(s1, isz), rows, one))
            return flag, ld

        vp = cgutils.voidptr_t
        fnty = ir.FunctionType(ir.IntType(32), [_CHAR, _CHAR, _CHAR, intp, intp, intp, vp,
                                                vp, intp, vp, intp, vp, vp, intp])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "numba_xxgemm")

        def scalar(v, ty):  # alpha and beta, by address, in the arrays' dtype
            v = context.cast(builder, v, ty, dt)
            return builder.bitcast(cgutils.alloca_once_value(builder, v), vp)

        def data(j):
            return builder.bitcast(arr[j].data, vp)

        empty = builder.or_(cmp("==", m, zero), cmp("==", n, zero))
        with builder.if_then(builder.not_(empty), likely=True):  # an empty array's strides are 0
            ta, lda = layout(0, m, k)
            tb, ldb = layout(1, k, n)
            c_row = builder.or_(cmp("==", std[2][1], isz), cmp("<=", n, one))
            with builder.if_then(builder.not_(c_row), likely=False):
                context.call_conv.return_user_exc(
                    builder, ValueError, ("gemm: the output's rows are not contiguous",))
            ldc = imax(builder.sdiv(std[2][0], isz), n, one)
            # row-major out = a @ b is column-major out^T = b^T a^T
            res = builder.call(fn, (
                ir.Constant(_CHAR, ord(_DTYPES[dt])), tb, ta, n, m, k,
                scalar(context.get_constant(types.float64, 1.0), types.float64),
                data(1), ldb, data(0), lda, scalar(args[3], sig.args[3]), data(2), ldc))
            with builder.if_then(cgutils.is_not_null(builder, res), likely=False):
                pyapi = context.get_python_api(builder)
                pyapi.gil_ensure()
                pyapi.fatal_error("BLAS gemm returned an error")
        return context.get_dummy_value()

    return sig, codegen
