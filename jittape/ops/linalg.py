"""Linear algebra on the last two axes (leading axes are batch dims): the LAPACK-backed
primitives (inverse, determinant, log|det| and its sign, solve, Cholesky), each lowered
on cpu to a loop over the batch that calls Numba's ``np.linalg``, and the composites
(trace, diag, diag_part) that fuse.

VJP rules are written with these ops and matmul, so second derivatives work.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError, composite
from ..compiler.ir import NO_GRADIENT, Type
from ..tensor import apply, convert_args
from . import elementwise as E
from . import reduction as R
from . import shaping as S
from .contraction import matmul
from .registry import defop, same_dtype, same_shape


def _dims(shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _float_matrix(t: Type, what: str):
    if t.dtype not in ("float32", "float64"):
        raise TypeError(f"{what} must be float32 or float64, got {t.dtype}")
    if t.rank < 2:
        raise ValueError(f"{what} must have rank >= 2 (a matrix or a batch of them), got "
                         f"shape {_dims(t.shape)}")


def _square(t: Type, what="the input"):
    _float_matrix(t, what)
    if not same_shape(t.shape[-1:], t.shape[-2:-1]):
        raise ValueError(f"Input matrix must be square, got shape {_dims(t.shape)}")


def _square_infer(types):
    _square(types[0])
    return types[0]


def _det_infer(types):
    _square(types[0])
    return Type(types[0].shape[:-2], types[0].dtype)


def _batched(f, core):
    """numpy reference: ``f`` of each matrix (numpy's linalg is batched already; this
    gives a clear error instead of LinAlgError, and keeps the dtype)."""

    def forward(x, *rest):
        try:
            with np.errstate(all="ignore"):
                r = f(x, *rest)
        except np.linalg.LinAlgError as e:
            raise InvalidArgumentError(core(e)) from None
        return np.asarray(r).astype(x.dtype, copy=False)

    forward.__name__ = getattr(f, "__name__", "forward")
    return forward


def _not_invertible(opname):
    return lambda e: f"{opname}: Input is not invertible ({e})"


def _trailing(g, n=2):
    """``g`` with ``n`` axes of size 1 appended (a per-matrix scalar against matrices)."""
    for _ in range(n):
        g = S.expand_dims(g, -1)
    return g


def _inv_vjp(g, out, x):
    # d(A^-1) = -A^-1 dA A^-1, so dL/dA = -A^-T g A^-T
    return (E.negative(matmul(out, matmul(g, out, transpose_b=True), transpose_a=True)),)


matrix_inverse_op = defop(
    "matrix_inverse", inputs=1, kind="other",
    forward=_batched(np.linalg.inv, _not_invertible("matrix_inverse")),
    infer=_square_infer, vjp=_inv_vjp,
    doc="the inverse of each matrix of the last two axes (tf.linalg.inv)",
)


def _det_vjp(g, out, x):
    # d det(A) = det(A) tr(A^-1 dA): dL/dA = g det(A) A^-T, TF's rule
    return (E.multiply(_trailing(E.multiply(g, out)), S.swap_last(inv(x))),)


matrix_determinant_op = defop(
    "matrix_determinant", inputs=1, kind="other", forward=_batched(np.linalg.det, str),
    infer=_det_infer, vjp=_det_vjp,
    doc="the determinant of each matrix of the last two axes (tf.linalg.det)",
)


def _log_abs_det_vjp(g, out, x):
    return (E.multiply(_trailing(g), S.swap_last(inv(x))),)


log_abs_det_op = defop(
    "log_abs_det", inputs=1, kind="other",
    forward=_batched(lambda x: np.linalg.slogdet(x)[1], str),
    infer=_det_infer, vjp=_log_abs_det_vjp,
    doc="log |det| of each matrix of the last two axes (slogdet's second output)",
)
# a primitive of its own: sign(det(A)) would be 0 where det underflows
det_sign_op = defop(
    "det_sign", inputs=1, kind="other",
    forward=_batched(lambda x: np.linalg.slogdet(x)[0], str),
    infer=_det_infer, vjp=NO_GRADIENT,  # piecewise constant
    doc="the sign of the determinant of each matrix (slogdet's first output)",
)


def _solve_infer(types):
    a, b = types
    _square(a, "matrix")
    _float_matrix(b, "rhs")
    same_dtype(types, "matrix and rhs")
    if a.rank != b.rank or not same_shape(a.shape[:-1], b.shape[:-1]):
        raise ValueError(
            "Input matrix and rhs are incompatible: matrix [..., M, M] needs rhs [..., M, K] "
            f"with the same batch dims, got matrix {_dims(a.shape)} and rhs {_dims(b.shape)}")
    return b


def _solve_vjp(g, out, a, b):
    # X = A^-1 B: dL/dB = A^-T g, dL/dA = -(dL/dB) X^T
    gb = solve(a, g, adjoint=True)
    return E.negative(matmul(gb, out, transpose_b=True)), gb


matrix_solve_op = defop(
    "matrix_solve", inputs=2, kind="other",
    forward=_batched(np.linalg.solve, _not_invertible("matrix_solve")),
    infer=_solve_infer, vjp=_solve_vjp,
    doc="X with A X = B for each matrix of the last two axes (tf.linalg.solve)",
)


def _cholesky_vjp(g, out, x):
    """TF's rule (Murray 2016, "Differentiation of the Cholesky decomposition"):
    Phi(L^T g) (the lower triangle, its diagonal halved), sandwiched by L^-T and
    L^-1, then symmetrized, since the op reads a symmetric matrix."""
    n = int(x._type.shape[-1])
    linv = inv(out)
    lower_half_diag = np.tril(np.ones((n, n))) - 0.5 * np.eye(n)
    middle = E.multiply(matmul(out, g, transpose_a=True), lower_half_diag)
    ga = matmul(matmul(linv, middle, transpose_a=True), linv)
    return (E.multiply(E.add(ga, S.swap_last(ga)), 0.5),)


def _cholesky_fwd(x):
    try:
        return np.linalg.cholesky(x).astype(x.dtype, copy=False)
    except np.linalg.LinAlgError:
        raise InvalidArgumentError(
            "cholesky: Cholesky decomposition was not successful. The input might not be "
            f"valid (not symmetric positive definite), shape {list(x.shape)}") from None


cholesky_op = defop(
    "cholesky", inputs=1, kind="other", forward=_cholesky_fwd, infer=_square_infer,
    vjp=_cholesky_vjp,
    doc="the lower Cholesky factor L (A = L L^T) of each symmetric positive definite matrix",
)


# ---------------------------------------------------------------------------
# Public functions (tf.linalg names)


def _apply(op, *args):
    return apply(op, *convert_args(args))


def inv(input, adjoint=False, name=None):
    """The inverse of each matrix of the last two axes (``tf.linalg.inv``)."""
    (x,) = convert_args((input,))
    return apply(matrix_inverse_op, S.swap_last(x) if adjoint else x)


def det(input, name=None):
    """The determinant of each matrix of the last two axes (``tf.linalg.det``)."""
    return _apply(matrix_determinant_op, input)


def slogdet(input, name=None):
    """``(sign, log_abs_determinant)`` of each matrix (``tf.linalg.slogdet``)."""
    (x,) = convert_args((input,))
    return apply(det_sign_op, x), apply(log_abs_det_op, x)


def logdet(matrix, name=None):
    """log det of each Hermitian positive definite matrix (``tf.linalg.logdet``)."""
    return _apply(log_abs_det_op, matrix)


def solve(matrix, rhs, adjoint=False, name=None):
    """X with ``matrix @ X = rhs`` (``matrix^T`` with ``adjoint``), matrix ``[..., M, M]``,
    rhs ``[..., M, K]`` with the same batch dims (``tf.linalg.solve``)."""
    a, b = convert_args((matrix, rhs))
    return apply(matrix_solve_op, S.swap_last(a) if adjoint else a, b)


def cholesky(input, name=None):
    """The lower-triangular L with ``L @ L^T = input`` (``tf.linalg.cholesky``); only the
    lower triangle of ``input`` is read."""
    return _apply(cholesky_op, input)


def _matrix_rank2(x, opname):
    if x._type.rank < 2:
        raise InvalidArgumentError(
            f"{opname}: input must be at least 2-D (a matrix or a batch), got shape "
            f"{list(x._type.shape)}")


@composite("diag_part")
def diag_part(input, name="diag_part", k=0, padding_value=0, align="RIGHT_LEFT"):
    """The main diagonal of each matrix of the last two axes, ``[..., min(M, N)]``
    (``tf.linalg.diag_part``; only ``k=0``): the flattened matrix read with stride N+1."""
    (x,) = convert_args((input,))
    _matrix_rank2(x, "diag_part")
    if k != 0:
        raise NotImplementedError("diag_part: only k=0 (the main diagonal) is supported")
    *batch, m, n = x._type.shape
    d = min(int(m), int(n))
    flat = S.reshape(x, (*batch, int(m) * int(n)))
    return flat[..., 0:max((d - 1) * (int(n) + 1) + 1, 0):int(n) + 1]


@composite("trace")
def trace(x, name=None):
    """The sum of each matrix's main diagonal (``tf.linalg.trace``)."""
    return R.reduce_sum(diag_part(x), -1)


@composite("diag")
def diag(diagonal, name="diag", k=0, num_rows=-1, num_cols=-1, padding_value=0,
         align="RIGHT_LEFT"):
    """Matrices with ``diagonal`` (``[..., N]``) on their main diagonal, zeros elsewhere,
    ``[..., N, N]`` (``tf.linalg.diag``; only ``k=0`` and the default sizes)."""
    (x,) = convert_args((diagonal,))
    if x._type.rank < 1:
        raise InvalidArgumentError("diag: diagonal must be at least 1-D, got a scalar")
    if k != 0 or num_rows != -1 or num_cols != -1 or padding_value != 0:
        raise NotImplementedError("diag: only k=0, the default num_rows/num_cols and "
                                  "padding_value=0 are supported")
    n = int(x._type.shape[-1])
    return E.multiply(S.expand_dims(x, -1), np.eye(n))

