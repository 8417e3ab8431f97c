"""Reductions over any axes, with ``keepdims``."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from ..ir import NO_GRADIENT, Type
from ..tensor import apply, convert_args
from . import elementwise as E
from . import shaping as S
from .registry import defop, normalize_axis


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


def _np_reduce(fn):
    def forward(x, axis, keepdims):
        if x.size == 0 and fn in (np.max, np.min):
            raise InvalidArgumentError(f"reduce_{fn.__name__} of an empty tensor")
        r = fn(x, axis=axis, keepdims=keepdims)
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
reduce_min_op = defop(
    "reduce_min", inputs=1, kind="reduction", forward=_np_reduce(np.min), infer=_reduce_infer,
    vjp=_extreme_vjp, monoid="min", domain=("no_ties",),
)


def _reducer(op):
    def fn(input_tensor, axis=None, keepdims=False, name=None):
        (x,) = convert_args((input_tensor,))
        try:
            ax = normalize_axis(axis, x.ndim, op.name)
        except ValueError as e:
            raise InvalidArgumentError(f"{e} [input: {x._type}]") from None
        if not ax and not keepdims:
            return x
        return apply(op, x, axis=ax, keepdims=bool(keepdims))

    fn.__name__ = op.name
    fn.__doc__ = f"{op.name} over ``axis`` (all axes when None)."
    return fn


reduce_sum = _reducer(reduce_sum_op)
reduce_max = _reducer(reduce_max_op)
reduce_min = _reducer(reduce_min_op)


def reduce_mean(input_tensor, axis=None, keepdims=False, name=None):
    """Mean over ``axis``; integer tensors divide with truncation, as TF does."""
    (x,) = convert_args((input_tensor,))
    ax = normalize_axis(axis, x.ndim, "reduce_mean")
    n = int(np.prod([x._type.shape[a] for a in ax])) if ax else 1
    s = reduce_sum(x, ax, keepdims)
    if x.dtype.is_floating:
        return E.multiply(s, 1.0 / n) if n else E.divide(s, 0.0)
    return E.floordiv(s, max(n, 1))


def reduce_any(input_tensor, axis=None, keepdims=False, name=None):
    (x,) = convert_args((input_tensor,))
    return E.greater(reduce_sum(E.cast(x, "int32"), axis, keepdims), 0)


def reduce_all(input_tensor, axis=None, keepdims=False, name=None):
    (x,) = convert_args((input_tensor,))
    return E.logical_not(reduce_any(E.logical_not(x), axis, keepdims))


def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None):
    """log(sum(exp(x))) computed stably (the max is subtracted first)."""
    (x,) = convert_args((input_tensor,))
    m = E.stop_gradient(reduce_max(x, axis, keepdims=True))
    # an all -inf row would give inf - inf; TF leaves that to the user too
    s = E.log(reduce_sum(E.exp(E.subtract(x, m)), axis, keepdims=True))
    r = E.add(s, m)
    if not keepdims:
        ax = normalize_axis(axis, x.ndim, "reduce_logsumexp")
        r = S.reshape(r, [d for i, d in enumerate(r._type.shape) if i not in ax])
    return r


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


def argmax(input, axis=None, output_type="int64", name=None):
    """Index of the largest value along ``axis`` (0 when None, as TF)."""
    (x,) = convert_args((input,))
    from ..dtypes import as_dtype

    ax = 0 if axis is None else int(axis) % max(x.ndim, 1)
    return apply(argmax_op, x, axis=ax, output_type=as_dtype(output_type).name)


def argmin(input, axis=None, output_type="int64", name=None):
    (x,) = convert_args((input,))
    from ..dtypes import as_dtype

    ax = 0 if axis is None else int(axis) % max(x.ndim, 1)
    return apply(argmin_op, x, axis=ax, output_type=as_dtype(output_type).name)
