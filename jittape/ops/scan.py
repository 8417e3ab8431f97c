"""Scans: cumsum and cumprod along one axis (exclusive, reverse), as TF's."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from ..compiler.ir import Type
from ..tensor import apply, convert_args
from . import elementwise as E
from .registry import defop


def _scan_infer(types, axis, exclusive, reverse):
    (x,) = types
    if x.dtype == "bool":
        raise TypeError("a scan is not defined for bool (cast to an integer first)")
    if not 0 <= axis < x.rank:
        raise ValueError(f"ScanOp: Expected scan axis in the range [0, {x.rank}), but got "
                         f"{axis}")
    return Type(x.shape, x.dtype)


def _scan_forward(ufunc):
    def forward(x, axis, exclusive, reverse):
        if reverse:
            x = np.flip(x, axis)
        with np.errstate(all="ignore"):
            r = ufunc.accumulate(x, axis=axis, dtype=x.dtype)
        if exclusive:  # shift by one along the axis, the identity in front
            r = np.moveaxis(r, axis, 0)
            shifted = np.empty_like(r)
            shifted[:1] = ufunc.identity
            shifted[1:] = r[:-1]
            r = np.moveaxis(shifted, 0, axis)
        if reverse:
            r = np.flip(r, axis)
        return np.ascontiguousarray(r)

    return forward


def _cumsum_vjp(g, out, x, axis, exclusive, reverse):
    return (cumsum(g, axis, exclusive, not reverse),)


def _cumprod_vjp(g, out, x, axis, exclusive, reverse):
    # TF's rule: sum over the later products, divided by x (0 where x is 0, as
    # div_no_nan: wrong at zeros, as TF's is)
    s = cumsum(E.multiply(out, g), axis, exclusive, not reverse)
    zero = E.equal(x, 0)
    safe = E.where(zero, E.ones_like(x), x)
    return (E.where(zero, E.zeros_like(s), E.divide(s, safe)),)


# primitives, not composites: a scan is a loop carrying one value (a cumsum as a
# triangular matmul would be O(n^2), cumprod as exp(cumsum(log)) wrong for x <= 0)
cumsum_op = defop(
    "cumsum", inputs=1, kind="other", forward=_scan_forward(np.add), infer=_scan_infer,
    vjp=_cumsum_vjp,
)
cumprod_op = defop(
    "cumprod", inputs=1, kind="other", forward=_scan_forward(np.multiply), infer=_scan_infer,
    vjp=_cumprod_vjp, domain=("away_from_zero",),
)


def _scan(op, x, axis, exclusive, reverse):
    (x,) = convert_args((x,))
    r = x.ndim
    axis = int(axis)
    if not -r <= axis < r:
        raise InvalidArgumentError(
            f"{op.name}: Expected scan axis in the range [{-r}, {r}), but got {axis} "
            f"[input: {x._type}]")
    return apply(op, x, axis=axis % r, exclusive=bool(exclusive), reverse=bool(reverse))


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    """Cumulative sum along ``axis``; ``exclusive`` leaves out each element itself,
    ``reverse`` sums from the end.

    Example: ``jt.cumsum([1, 2, 3], exclusive=True, reverse=True)`` is ``[5, 3, 0]``."""
    return _scan(cumsum_op, x, axis, exclusive, reverse)


def cumprod(x, axis=0, exclusive=False, reverse=False, name=None):
    """Cumulative product along ``axis`` (``exclusive`` and ``reverse`` as ``cumsum``).

    Example: ``jt.math.cumprod([1., 2., 3.], exclusive=True)`` is ``[1., 1., 2.]``."""
    return _scan(cumprod_op, x, axis, exclusive, reverse)
