"""Sorting: argsort (the one primitive), sort and top_k built on it."""

from __future__ import annotations

import collections

import numpy as np

from ..dtypes import as_dtype
from ..errors import InvalidArgumentError, composite
from ..compiler.ir import NO_GRADIENT, Type
from ..tensor import apply, convert_args, convert_to_tensor
from . import elementwise as E
from . import shaping as S
from .registry import defop


def _argsort_infer(types, descending):
    (x,) = types
    if x.rank < 1:
        raise ValueError(f"argsort needs a tensor of rank >= 1, got shape {list(x.shape)}")
    if x.dtype == "bool":
        raise TypeError("argsort is not defined for bool")
    return Type(x.shape, "int32")


def _argsort_fwd(x, descending):
    if not descending:
        return np.argsort(x, axis=-1, kind="stable").astype(np.int32)
    # the reversed row sorted stably, read backwards: ties keep their order, as TF's
    n = x.shape[-1]
    r = np.argsort(np.flip(x, -1), axis=-1, kind="stable")
    return np.ascontiguousarray(n - 1 - np.flip(r, -1)).astype(np.int32)


# a primitive: the one sort (a merge sort per row of the last axis); sort and top_k
# gather by its indices, so their gradients are gather's
argsort_op = defop(
    "argsort", inputs=1, kind="other", forward=_argsort_fwd, infer=_argsort_infer,
    vjp=NO_GRADIENT, domain=("no_ties",),
)

_DIRECTIONS = ("ASCENDING", "DESCENDING")


def _check_direction(direction):
    if direction not in _DIRECTIONS:
        raise ValueError(f"Argument `direction` should be one of ASCENDING, DESCENDING. "
                         f"Received: direction={direction}")
    return direction == "DESCENDING"


def _to_last(x, axis, opname):
    r = x.ndim
    if r == 0:
        raise InvalidArgumentError(f"{opname} needs a tensor of rank >= 1, got {x._type}")
    if not -r <= int(axis) < r:
        raise InvalidArgumentError(f"{opname}: axis {axis} out of range for {x._type}")
    a = int(axis) % r
    perm = tuple(i for i in range(r) if i != a) + (a,)
    return S.transpose(x, perm), perm


def _from_last(y, perm):
    inv = tuple(int(i) for i in np.argsort(perm))
    return S.transpose(y, inv)


def _take_last(x, idx):
    """``x[..., idx[..., j]]`` row by row (``np.take_along_axis`` on the last axis), as one
    gather from the flattened ``x``: its gradient is gather's (a scatter_add)."""
    shape = x._type.shape
    n, rows = shape[-1], int(np.prod(shape[:-1], dtype=np.int64))
    k = idx._type.shape[-1]
    it = "int64" if rows * n >= 2**31 else "int32"
    offsets = np.arange(rows, dtype=it).reshape(shape[:-1] + (1,)) * n
    flat = E.add(E.cast(idx, it), convert_to_tensor(offsets))
    out = S.gather(S.reshape(x, (rows * n,)), S.reshape(flat, (rows * k,)))
    return S.reshape(out, shape[:-1] + (k,))


def argsort(values, axis=-1, direction="ASCENDING", stable=False, name=None):
    """The indices (int32) that sort ``values`` along ``axis``. The sort is always
    stable (ties keep their order), which ``stable=False`` allows.

    Example: ``jt.argsort([3., 1., 2.])`` is ``[1, 2, 0]``."""
    desc = _check_direction(direction)
    (x,) = convert_args((values,))
    xt, perm = _to_last(x, axis, "argsort")
    return _from_last(apply(argsort_op, xt, descending=desc), perm)


@composite("sort")
def sort(values, axis=-1, direction="ASCENDING", name=None):
    """``values`` sorted along ``axis``; the gradient goes back to where each value came
    from.

    Example: ``jt.sort([3., 1., 2.], direction="DESCENDING")`` is ``[3., 2., 1.]``."""
    desc = _check_direction(direction)
    (x,) = convert_args((values,))
    xt, perm = _to_last(x, axis, "sort")
    idx = apply(argsort_op, xt, descending=desc)
    return _from_last(_take_last(xt, idx), perm)


TopKV2 = collections.namedtuple("TopKV2", ["values", "indices"])


@composite("top_k")
def top_k(input, k=1, sorted=True, index_type="int32", name=None):
    """The ``k`` largest entries of the last axis and their indices (int32), largest
    first; ties: the lower index first, as TF's. Returns ``(values, indices)``.

    Example: ``jt.math.top_k([1., 5., 3.], 2)`` is ``TopKV2(values=[5., 3.], indices=[1, 2])``."""
    (x,) = convert_args((input,))
    if x.ndim < 1:
        raise InvalidArgumentError(f"top_k: input must be >= 1-D, got shape {list(x.shape)}")
    k = int(k)
    n = x._type.shape[-1]
    if k < 0 or k > n:
        raise InvalidArgumentError(
            f"top_k: input must have at least k columns. Had {n}, needed {k} "
            f"[input: {x._type}]")
    idx = apply(argsort_op, x, descending=True)
    if k != n:
        idx = idx[..., :k]
    values = _take_last(x, idx)
    dt = as_dtype(index_type).name
    return TopKV2(values, E.cast(idx, dt))
