"""Clipping: by value, by norm, by global norm (TF's formulas)."""

from __future__ import annotations

import collections.abc

from ..errors import composite
from ..tensor import convert_args
from . import elementwise as E
from . import reduction as R


@composite("clip_by_value")
def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """min(max(t, lo), hi); the gradient passes at the bounds (inclusive)."""
    (x,) = convert_args((t,))
    return E.minimum(E.maximum(x, clip_value_min), clip_value_max)


@composite("clip_by_norm")
def clip_by_norm(t, clip_norm, axes=None, name=None):
    """t * clip_norm / max(||t||, clip_norm): unchanged when its L2 norm is small enough."""
    (x,) = convert_args((t,))
    sq = R.reduce_sum(E.square(x), axes, keepdims=True)
    # sqrt's derivative is infinite at 0: take it only where the norm is not 0 (as TF
    # does), so a zero tensor gets the gradient clip_norm / clip_norm = 1, not NaN
    pos = E.greater(sq, 0)
    l2 = E.where(pos, E.sqrt(E.where(pos, sq, E.ones_like(sq))), sq)
    return E.divide(E.multiply(x, clip_norm), E.maximum(l2, clip_norm))


@composite("global_norm")
def global_norm(t_list, name=None):
    """sqrt(sum of squared L2 norms) over the non-None tensors."""
    ts = [t for t in t_list if t is not None]
    if not ts:
        return E.zeros(())
    sq = [R.reduce_sum(E.square(t)) for t in convert_args(ts)]
    total = sq[0]
    for s in sq[1:]:
        total = E.add(total, s)
    return E.sqrt(total)


@composite("clip_by_global_norm")
def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """Scale every tensor by clip_norm / max(global_norm, clip_norm).

    Returns ``(clipped_list, global_norm)``. ``None`` entries pass through; an
    infinite or NaN global norm makes every output NaN, as in TF.
    """
    if not isinstance(t_list, collections.abc.Sequence) or isinstance(t_list, str):
        raise TypeError("t_list should be a sequence")
    t_list = list(t_list)
    gn = global_norm(t_list) if use_norm is None else convert_args((use_norm,))[0]
    scale = E.multiply(clip_norm, E.minimum(E.reciprocal(gn), 1.0 / clip_norm))
    scale = E.where(E.is_finite(gn), scale, E.fill((), float("nan"), gn.dtype))
    out = []
    for t in t_list:
        if t is None:
            out.append(None)
        else:
            (x,) = convert_args((t,))
            out.append(E.multiply(x, E.cast(scale, x.dtype)))
    return out, gn
