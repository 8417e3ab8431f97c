"""Reductions over any axes, with ``keepdims``."""

from __future__ import annotations

import numpy as np

from ..dtypes import as_dtype
from ..errors import InvalidArgumentError, composite
from ..compiler.ir import NO_GRADIENT, Type
from ..tensor import apply, convert_args
from . import elementwise as E
from . import shaping as S
from ..compiler.dims import is_symbolic
from .registry import defop, normalize_axis
from .sizes import symbolic_size


def _reduce_infer(types, axis, keepdims):
    (x,) = types
    for a in axis:
        if not 0 <= a < max(x.rank, 1):
            raise ValueError(f"axis {a} out of range for rank {x.rank}")
    if keepdims:
        shape = tuple(1 if i in axis else d for i, d in enumerate(x.shape))
    else:
        shape = tuple(d for i, d in enumerate(x.shape) if i not in axis)
    return Type(shape, x.dtype)


def _kept_shape(x, axis):
    return tuple(1 if i in axis else d for i, d in enumerate(x._type.shape))


def _sum_vjp(g, out, x, axis, keepdims):
    return (S.broadcast_to(S.reshape(g, _kept_shape(x, axis)), x._type.shape),)


def _extreme_vjp(g, out, x, axis, keepdims):
    # ties share the gradient evenly, as TF does
    kept = _kept_shape(x, axis)
    hit = E.cast(E.equal(x, S.reshape(out, kept)), x.dtype)
    count = reduce_sum(hit, axis, keepdims=True)
    return (E.multiply(E.divide(hit, count), S.reshape(g, kept)),)


def _identity_element(fn, dtype):
    """max over nothing is -inf (the dtype's lowest integer), min +inf, as TF gives."""
    if dtype.kind == "f":
        return -np.inf if fn is np.max else np.inf
    if dtype.kind == "b":
        return fn is np.min
    info = np.iinfo(dtype)
    return info.min if fn is np.max else info.max


def _np_reduce(fn):
    def forward(x, axis, keepdims):
        if fn is np.sum or fn is np.prod:
            r = fn(x, axis=axis, keepdims=keepdims)
        else:
            r = fn(x, axis=axis, keepdims=keepdims, initial=_identity_element(fn, x.dtype))
        return np.asarray(r, dtype=x.dtype)

    return forward


reduce_sum_op = defop(
    "reduce_sum", inputs=1, kind="reduction", forward=_np_reduce(np.sum), infer=_reduce_infer,
    vjp=_sum_vjp, monoid="add",
)
reduce_max_op = defop(
    "reduce_max", inputs=1, kind="reduction", forward=_np_reduce(np.max), infer=_reduce_infer,
    vjp=_extreme_vjp, monoid="max", domain=("no_ties",),
)


def _prod_vjp(g, out, x, axis, keepdims):
    """TF's rule, right at zeros: the reduced axes packed into one in front, each
    element's gradient the product of the others, from two exclusive cumprods."""
    from .scan import cumprod

    shape = x._type.shape
    other = tuple(i for i in range(len(shape)) if i not in axis)
    perm = tuple(axis) + other
    n_red = int(np.prod([shape[i] for i in axis], dtype=np.int64))
    n_other = int(np.prod([shape[i] for i in other], dtype=np.int64))
    flat = S.reshape(S.transpose(x, perm), (n_red, n_other))
    left = cumprod(flat, 0, exclusive=True)
    right = cumprod(flat, 0, exclusive=True, reverse=True)
    y = S.reshape(E.multiply(left, right), tuple(shape[i] for i in perm))
    y = S.transpose(y, tuple(int(i) for i in np.argsort(perm)))
    return (E.multiply(y, S.reshape(g, _kept_shape(x, axis))),)


reduce_prod_op = defop(
    "reduce_prod", inputs=1, kind="reduction", forward=_np_reduce(np.prod),
    infer=_reduce_infer, vjp=_prod_vjp, monoid="mul",
)
reduce_min_op = defop(
    "reduce_min", inputs=1, kind="reduction", forward=_np_reduce(np.min), infer=_reduce_infer,
    vjp=_extreme_vjp, monoid="min", domain=("no_ties",),
)


def _axes(axis, x, opname) -> tuple:
    try:
        return normalize_axis(axis, x.ndim, opname)
    except ValueError as e:
        raise InvalidArgumentError(f"{e} [input: {x._type}]") from None


def _reducer(op):
    def fn(input_tensor, axis=None, keepdims=False, name=None):
        (x,) = convert_args((input_tensor,))
        ax = _axes(axis, x, op.name)
        if not ax and not keepdims:
            return x
        return apply(op, x, axis=ax, keepdims=bool(keepdims))

    fn.__name__ = op.name
    fn.__doc__ = f"{op.name} over ``axis`` (all axes when None)."
    return fn


reduce_sum = _reducer(reduce_sum_op)
reduce_max = _reducer(reduce_max_op)
reduce_min = _reducer(reduce_min_op)
_reduce_prod = _reducer(reduce_prod_op)


def reduce_prod(input_tensor, axis=None, keepdims=False, name=None):
    """Product over ``axis`` (all axes when None); the product of nothing is 1."""
    (x,) = convert_args((input_tensor,))
    if x.dtype.is_bool:
        raise InvalidArgumentError(f"reduce_prod is not defined for bool [input: {x._type}]")
    return _reduce_prod(x, axis, keepdims)


@composite("reduce_mean")
def reduce_mean(input_tensor, axis=None, keepdims=False, name=None):
    """Mean over ``axis``; integer tensors divide truncating toward zero, as TF does."""
    (x,) = convert_args((input_tensor,))
    ax = _axes(axis, x, "reduce_mean")
    if any(is_symbolic(x._type.shape[a]) for a in ax):
        # the count is known only when a call binds the sizes: a node until then
        # (a constant after ir.concretize, so the compiled mean is the same)
        s = reduce_sum(x, ax, keepdims)
        if x.dtype.is_floating:
            return E.multiply(s, E.reciprocal(symbolic_size(x, ax, x._type.dtype)))
        return E.cast(E.divide(s, symbolic_size(x, ax, s._type.dtype)), x.dtype)
    n = int(np.prod([x._type.shape[a] for a in ax])) if ax else 1
    s = reduce_sum(x, ax, keepdims)
    if x.dtype.is_floating:
        return E.multiply(s, 1.0 / n) if n else E.divide(s, 0.0)
    return E.cast(E.divide(s, max(n, 1)), x.dtype)  # float64 quotient, cast truncates


@composite("reduce_any")
def reduce_any(input_tensor, axis=None, keepdims=False, name=None):
    (x,) = convert_args((input_tensor,))
    return E.greater(reduce_sum(E.cast(x, "int32"), axis, keepdims), 0)


@composite("reduce_all")
def reduce_all(input_tensor, axis=None, keepdims=False, name=None):
    (x,) = convert_args((input_tensor,))
    return E.logical_not(reduce_any(E.logical_not(x), axis, keepdims))


@composite("reduce_logsumexp")
def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None):
    """log(sum(exp(x))) computed stably (the max is subtracted first)."""
    (x,) = convert_args((input_tensor,))
    raw = reduce_max(x, axis, keepdims=True)
    # TF's guard: an infinite max is replaced by 0, so an all -inf row gives -inf (not
    # inf - inf = nan), as masked logits (where(mask, x, -inf)) need
    m = E.stop_gradient(E.where(E.is_finite(raw), raw, E.zeros_like(raw)))
    s = E.log(reduce_sum(E.exp(E.subtract(x, m)), axis, keepdims=True))
    r = E.add(s, m)
    if not keepdims:
        ax = _axes(axis, x, "reduce_logsumexp")
        r = S.reshape(r, [d for i, d in enumerate(r._type.shape) if i not in ax])
    return r


@composite("norm")
def norm(tensor, ord="euclidean", axis=None, keepdims=False, name=None):
    """Vector norm over ``axis`` (whole tensor when None): 'euclidean'/2, 1 or np.inf."""
    (x,) = convert_args((tensor,))
    if ord in ("euclidean", 2, "fro"):
        return E.sqrt(reduce_sum(E.square(x), axis, keepdims))
    if ord == 1:
        return reduce_sum(E.abs(x), axis, keepdims)
    if ord == np.inf:
        return reduce_max(E.abs(x), axis, keepdims)
    raise InvalidArgumentError(f"norm: ord {ord!r} is not supported (use 'euclidean', 1, np.inf)")


def _arg_infer(types, axis, output_type):
    (x,) = types
    if not 0 <= axis < x.rank:
        raise ValueError(f"axis {axis} out of range for rank {x.rank}")
    return Type(tuple(d for i, d in enumerate(x.shape) if i != axis), output_type)


argmax_op = defop(
    "argmax", inputs=1, kind="reduction", infer=_arg_infer, vjp=NO_GRADIENT,
    forward=lambda x, axis, output_type: np.argmax(x, axis=axis).astype(output_type),
)
argmin_op = defop(
    "argmin", inputs=1, kind="reduction", infer=_arg_infer, vjp=NO_GRADIENT,
    forward=lambda x, axis, output_type: np.argmin(x, axis=axis).astype(output_type),
)


def _one_axis(axis, x, opname) -> int:
    (a,) = _axes(int(axis), x, opname)
    return a


def _arg(op):
    def fn(input, axis=None, output_type="int64", name=None):
        (x,) = convert_args((input,))
        ax = _one_axis(0 if axis is None else axis, x, op.name)
        return apply(op, x, axis=ax, output_type=as_dtype(output_type).name)

    fn.__name__ = op.name
    fn.__doc__ = f"Index of the {'largest' if op is argmax_op else 'smallest'} value along " \
        "``axis`` (0 when None, as TF)."
    return fn


argmax = _arg(argmax_op)
argmin = _arg(argmin_op)
