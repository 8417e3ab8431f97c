"""Pooling: max and average over sliding windows (``tf.nn.max_pool``, ``avg_pool``,
``pool``), as primitives of kind ``window`` with their gradients.

The primitives see channels-last inputs ``x[N, *S, C]`` (1, 2 or 3 spatial axes) and
plain ints: per spatial axis a window size (``ksize``), a stride, a dilation and a pair
of explicit pads (low, high), computed by the public functions from TF's arguments
(``window_geometry.py``). Channels-first data formats are transposes around them.

TF's rules, pinned by ``tests/test_pooling.py`` (values from TF 2.21):

- max: the padding never wins, NaN is skipped (a window of NaNs, or of -inf, gives the
  dtype's lowest finite value: TF's reduction starts there);
- the gradient of a window goes to its first position in the input (row-major) unless a
  later one is strictly greater: among tied maxima, the first; a NaN at a window's first
  position keeps the gradient (``v > NaN`` is false), a NaN elsewhere never gets it;
- average: the mean of the window's positions inside the input (SAME's padding is not
  counted).

These are TF's 1-d and 2-d max pooling rules, and jittape keeps them in 3-d, where TF's
MaxPool3D differs (a NaN wins its window, and its gradient goes to every tied maximum,
so that tied windows pass on more than their gradient).

The three max ops close under differentiation: ``max_pool -> max_pool_grad(x, g)``,
``max_pool_grad(x, dy) -> (None, max_pool_grad_grad(x, g))`` (dx is linear in dy and
locally constant in x), ``max_pool_grad_grad(x, g) -> (None, max_pool_grad(x, gg))``
(the transpose of that linear map: both route through the same argmax, so second
derivatives are exact; TF's own MaxPoolGradGrad skips a first-position NaN instead, a
difference only where the input has NaNs). Average pooling's pair is linear:
``avg_pool -> avg_pool_grad``, ``avg_pool_grad -> avg_pool``.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..compiler.ir import Type
from ..errors import InvalidArgumentError, composite
from ..tensor import apply, convert_args
from . import shaping as S
from .registry import defop
from .window_geometry import CHANNELS_LAST, channels_first, out_size, pads_for, per_axis

# ---------------------------------------------------------------------------
# Geometry of the primitives' attributes


def _fmt(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def _pooled_shape(opname, shape, ksize, strides, pads, dilations) -> tuple:
    """``(N, *O, C)`` for an input of ``shape``; raises (ValueError: ``apply`` names the
    op and the inputs) when the rank does not fit the window."""
    ns = len(ksize)
    if len(shape) != ns + 2:
        raise ValueError(
            f"input must be rank {ns + 2} ({CHANNELS_LAST[ns]}: batch, {ns} spatial "
            f"dimension{'s' if ns > 1 else ''}, channels) for a {ns}-d window, got shape "
            f"{_fmt(shape)}")
    outs = []
    for a, (n, k, s, d, (lo, hi)) in enumerate(zip(shape[1:-1], ksize, strides, dilations,
                                                    pads)):
        if not isinstance(n, (int, np.integer)):
            raise ValueError(f"spatial dimension {a + 1} of {_fmt(shape)} must be known "
                             "(only the batch and channel sizes may be symbolic)")
        outs.append(out_size(int(n), k, s, d, lo, hi))
    return (shape[0], *outs, shape[-1])


def _check_float(t, opname):
    if not np.issubdtype(np.dtype(t.dtype), np.floating):
        raise TypeError(f"{opname} needs a float input (half, bfloat16, float, double), "
                        f"got {t.dtype}")


def _max_infer(types, ksize, strides, pads, dilations):
    (x,) = types
    if x.dtype == "bool" or np.dtype(x.dtype).kind not in "fiu":
        raise TypeError(f"max_pool needs a real input, got {x.dtype}")
    return Type(_pooled_shape("max_pool", x.shape, ksize, strides, pads, dilations), x.dtype)


def _same_types(x, y, want, what) -> None:
    if tuple(y.shape) != tuple(want):
        raise ValueError(f"{what} must have shape {_fmt(want)}, got {_fmt(y.shape)}")
    if y.dtype != x.dtype:
        raise TypeError(f"{what} must be {x.dtype} as the input, got {y.dtype}")


def _max_grad_infer(types, ksize, strides, pads, dilations):
    x, dy = types
    _check_float(x, "max_pool_grad")
    _same_types(x, dy, _pooled_shape("max_pool_grad", x.shape, ksize, strides, pads,
                                     dilations), "the output gradient")
    return Type(x.shape, x.dtype)


def _max_grad_grad_infer(types, ksize, strides, pads, dilations):
    x, g = types
    _check_float(x, "max_pool_grad_grad")
    _same_types(x, g, x.shape, "the input gradient's gradient")
    return Type(_pooled_shape("max_pool_grad_grad", x.shape, ksize, strides, pads, dilations),
                x.dtype)


def _avg_infer(types, ksize, strides, pads, dilations):
    (x,) = types
    _check_float(x, "avg_pool")
    return Type(_pooled_shape("avg_pool", x.shape, ksize, strides, pads, dilations), x.dtype)


def _avg_grad_infer(types, ksize, strides, pads, dilations, sizes):
    (dy,) = types
    _check_float(dy, "avg_pool_grad")
    shape = (dy.shape[0], *sizes, dy.shape[-1]) if len(dy.shape) == len(sizes) + 2 else None
    if shape is None or tuple(dy.shape) != _pooled_shape(
            "avg_pool_grad", shape, ksize, strides, pads, dilations):
        want = None if shape is None else _pooled_shape("avg_pool_grad", shape, ksize, strides,
                                                        pads, dilations)
        raise ValueError(f"the output gradient must have shape "
                         f"{_fmt(want) if want else f'of rank {len(sizes) + 2}'} for spatial "
                         f"input sizes {list(sizes)}, got {_fmt(dy.shape)}")
    return Type(shape, dy.dtype)


# ---------------------------------------------------------------------------
# numpy references: windows of a padded array (sliding_window_view), or per window
# position a strided slice (the scatters of the gradients)


def _lowest(dtype):
    dt = np.dtype(dtype)
    return np.finfo(dt).min if dt.kind == "f" else np.iinfo(dt).min


def _padded(x, pads, value):
    return np.pad(x, ((0, 0), *pads, (0, 0)), constant_values=value)


def _windows(xp, ksize, strides, dilations, out_shape):
    """``w[N, *O, C, K]``: each output position's window of the padded ``xp``, its ``K``
    positions in row-major order."""
    ns = len(ksize)
    spans = [(k - 1) * d + 1 for k, d in zip(ksize, dilations)]
    axes = tuple(range(1, ns + 1))
    if any(xp.shape[a] < sp for a, sp in zip(axes, spans)) or 0 in out_shape:
        return np.zeros((*out_shape, int(np.prod(ksize))), xp.dtype)
    v = sliding_window_view(xp, spans, axis=axes)
    key = ((slice(None),) + tuple(slice(0, (o - 1) * s + 1, s)
                                  for o, s in zip(out_shape[1:-1], strides))
           + (slice(None),) + tuple(slice(None, None, d) for d in dilations))
    return v[key].reshape(*out_shape, -1)


def _inside(x_shape, ksize, strides, pads, dilations, out_shape):
    """``[1, *O, 1, K]`` bool: which window positions lie inside the input."""
    ones = np.ones((1, *x_shape[1:-1], 1), bool)
    return _windows(_padded(ones, pads, False), ksize, strides, dilations,
                    (1, *out_shape[1:-1], 1))


def _max_pool_forward(x, ksize, strides, pads, dilations):
    out = _pooled_shape("max_pool", x.shape, ksize, strides, pads, dilations)
    lowest = _lowest(x.dtype)
    if x.dtype.kind == "f":  # NaN is skipped, the padding never wins
        x = np.where(np.isnan(x), -np.inf, x)
    w = _windows(_padded(x, pads, lowest if x.dtype.kind != "f" else -np.inf), ksize, strides,
                 dilations, out)
    if w.shape[-1] == 0 or 0 in out:
        return np.full(out, lowest, x.dtype)
    return np.maximum(w.max(axis=-1), lowest).astype(x.dtype)


def _argmax(x, ksize, strides, pads, dilations):
    """``at[N, *O, C]``: the window position (row-major, 0..K-1) whose input gets the
    window's gradient (TF's rule, see the module docstring); -1 for a window with no
    position inside the input."""
    out = _pooled_shape("max_pool_grad", x.shape, ksize, strides, pads, dilations)
    inside = _inside(x.shape, ksize, strides, pads, dilations, out)
    raw = _windows(_padded(x, pads, 0), ksize, strides, dilations, out)
    key = np.where(inside, np.where(np.isnan(raw), -np.inf, raw), -np.inf)
    best = key.max(axis=-1, keepdims=True, initial=-np.inf)
    at = np.argmax(inside & (key == best), axis=-1)
    first = np.argmax(inside, axis=-1)  # [1, *O, 1]
    first_nan = np.isnan(np.take_along_axis(raw, np.broadcast_to(
        first[..., None], raw.shape[:-1] + (1,)), axis=-1)[..., 0])
    at = np.where(first_nan, first, at)
    return np.where(inside.any(axis=-1), at, -1)


def _taps(ksize, strides, dilations, out_shape):
    """Per window position ``j`` (row-major): its index in the window, and the key of the
    strided slice of the padded input that holds it for every output position."""
    for k, tap in enumerate(np.ndindex(*ksize)):
        key = tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                    for t, d, s, o in zip(tap, dilations, strides, out_shape[1:-1]))
        yield k, (slice(None), *key, slice(None))


def _crop(xp, pads):
    key = tuple(slice(lo, xp.shape[a + 1] - hi) for a, (lo, hi) in enumerate(pads))
    return np.ascontiguousarray(xp[(slice(None), *key, slice(None))])


def _max_pool_grad_forward(x, dy, ksize, strides, pads, dilations):
    at = _argmax(x, ksize, strides, pads, dilations)
    dxp = _padded(np.zeros_like(x), pads, 0)
    if dy.size:
        for k, key in _taps(ksize, strides, dilations, dy.shape):
            dxp[key] += np.where(at == k, dy, 0)  # one slice's positions never overlap
    return _crop(dxp, pads)


def _max_pool_grad_grad_forward(x, g, ksize, strides, pads, dilations):
    at = _argmax(x, ksize, strides, pads, dilations)
    out = np.zeros(at.shape, x.dtype)
    if out.size:
        gp = _padded(g, pads, 0)
        for k, key in _taps(ksize, strides, dilations, out.shape):
            out += np.where(at == k, gp[key], 0)
    return out


def _counts(x_shape, ksize, strides, pads, dilations, out_shape, dtype):
    """``[1, *O, 1]``: how many of each window's positions lie inside the input (at
    least 1: a window with none averages nothing to 0)."""
    n = _inside(x_shape, ksize, strides, pads, dilations, out_shape).sum(axis=-1)
    return np.maximum(n, 1).astype(dtype)


def _avg_pool_forward(x, ksize, strides, pads, dilations):
    out = _pooled_shape("avg_pool", x.shape, ksize, strides, pads, dilations)
    if 0 in out:
        return np.zeros(out, x.dtype)
    w = _windows(_padded(x, pads, 0), ksize, strides, dilations, out)
    return (w.sum(axis=-1) / _counts(x.shape, ksize, strides, pads, dilations, out, x.dtype)
            ).astype(x.dtype)


def _avg_pool_grad_forward(dy, ksize, strides, pads, dilations, sizes):
    shape = (dy.shape[0], *sizes, dy.shape[-1])
    dxp = _padded(np.zeros(shape, dy.dtype), pads, 0)
    if dy.size:
        share = dy / _counts(shape, ksize, strides, pads, dilations, dy.shape, dy.dtype)
        for _k, key in _taps(ksize, strides, dilations, dy.shape):
            dxp[key] += share  # the padding's shares are cropped away
    return _crop(dxp, pads)


# ---------------------------------------------------------------------------
# The primitives (kind "window": opaque to fusion, each lowered as a loop nest of its
# own on the cpu backend, schedule_pool.py)


def _geom(attrs):
    return {k: attrs[k] for k in ("ksize", "strides", "pads", "dilations")}


def _max_pool_vjp(g, out, x, **attrs):
    return (max_pool_grad(x, g, **_geom(attrs)),)


def _max_pool_grad_vjp(g, out, x, dy, **attrs):
    return (None, max_pool_grad_grad(x, g, **_geom(attrs)))


def _max_pool_grad_grad_vjp(g, out, x, gx, **attrs):
    return (None, max_pool_grad(x, g, **_geom(attrs)))


def _avg_pool_vjp(g, out, x, **attrs):
    return (avg_pool_grad(g, sizes=tuple(x._type.shape[1:-1]), **_geom(attrs)),)


def _avg_pool_grad_vjp(g, out, dy, **attrs):
    return (_avg_pool_prim(g, **_geom(attrs)),)


max_pool_op = defop(
    "max_pool", inputs=1, kind="window", forward=_max_pool_forward, infer=_max_infer,
    vjp=_max_pool_vjp, domain=("no_ties",),
)
max_pool_grad_op = defop(
    "max_pool_grad", inputs=2, kind="window", forward=_max_pool_grad_forward,
    infer=_max_grad_infer, vjp=_max_pool_grad_vjp,
)
max_pool_grad_grad_op = defop(
    "max_pool_grad_grad", inputs=2, kind="window", forward=_max_pool_grad_grad_forward,
    infer=_max_grad_grad_infer, vjp=_max_pool_grad_grad_vjp,
)
avg_pool_op = defop(
    "avg_pool", inputs=1, kind="window", forward=_avg_pool_forward, infer=_avg_infer,
    vjp=_avg_pool_vjp,
)
avg_pool_grad_op = defop(
    "avg_pool_grad", inputs=1, kind="window", forward=_avg_pool_grad_forward,
    infer=_avg_grad_infer, vjp=_avg_pool_grad_vjp,
)


def _attrs(ksize, strides, pads, dilations=None) -> dict:
    ns = len(ksize)
    return {"ksize": tuple(int(k) for k in ksize), "strides": tuple(int(s) for s in strides),
            "pads": tuple((int(lo), int(hi)) for lo, hi in pads),
            "dilations": (1,) * ns if dilations is None else tuple(int(d) for d in dilations)}


def _max_pool_prim(x, ksize, strides, pads, dilations=None):
    return apply(max_pool_op, x, **_attrs(ksize, strides, pads, dilations))


def max_pool_grad(x, dy, ksize, strides, pads, dilations=None):
    """dx of ``max_pool``: each window's ``dy`` added at its maximum's position."""
    return apply(max_pool_grad_op, x, dy, **_attrs(ksize, strides, pads, dilations))


def max_pool_grad_grad(x, g, ksize, strides, pads, dilations=None):
    """``g`` (x-shaped) read at each window's maximum: max_pool_grad's transpose in dy."""
    return apply(max_pool_grad_grad_op, x, g, **_attrs(ksize, strides, pads, dilations))


def _avg_pool_prim(x, ksize, strides, pads, dilations=None):
    return apply(avg_pool_op, x, **_attrs(ksize, strides, pads, dilations))


def avg_pool_grad(dy, sizes, ksize, strides, pads, dilations=None):
    """dx of ``avg_pool`` for an input of spatial ``sizes``: each window's ``dy`` shared
    equally by its positions inside the input."""
    return apply(avg_pool_grad_op, dy, sizes=tuple(int(n) for n in sizes),
                 **_attrs(ksize, strides, pads, dilations))


# ---------------------------------------------------------------------------
# Public functions: TF's signatures


def _spatial(who, x, nspatial=None) -> int:
    r = x._type.rank
    ns = r - 2 if nspatial is None else nspatial
    if ns not in (1, 2, 3) or r != ns + 2:
        want = "3, 4 or 5" if nspatial is None else str(nspatial + 2)
        raise InvalidArgumentError(
            f"{who}: input must be rank {want} (batch, spatial dimensions, channels), got "
            f"shape {_fmt(x._type.shape)}")
    return ns


def _to_last(x, first):
    r = x._type.rank
    return S.transpose(x, [0, *range(2, r), 1]) if first else x


def _to_first(y, first):
    r = y._type.rank
    return S.transpose(y, [0, r - 1, *range(1, r - 1)]) if first else y


def _geometry(who, x, ns, first, ksize, strides, padding, dilations, explicit):
    """``(ksize, strides, pads, dilations)`` as the primitives take them."""
    k = per_axis(who, "ksize", ksize, ns, first)
    s = per_axis(who, "strides", strides, ns, first)
    d = per_axis(who, "dilations", 1 if dilations is None else dilations, ns, first)
    shape = x._type.shape
    sizes = shape[2:] if first else shape[1:-1]
    if not isinstance(padding, str) and not explicit:
        raise InvalidArgumentError(
            f"{who}: padding must be 'SAME' or 'VALID' (TF's {who} takes no explicit "
            f"padding), got {padding!r}")
    if isinstance(padding, str) and padding.upper() == "SAME" and any(
            not isinstance(n, (int, np.integer)) for n in sizes):
        raise InvalidArgumentError(f"{who}: SAME padding needs known spatial sizes, got shape "
                                   f"{_fmt(shape)}")
    pads = pads_for(who, padding, sizes, k, s, d, first)
    if not isinstance(padding, str):  # TF's check: each pad smaller than its window
        for (lo, hi), kk in zip(pads, k):
            for side, p in (("Left", lo), ("Right", hi)):
                if p >= kk:
                    raise InvalidArgumentError(
                        f"{who}: {side} padding {p} needs to be smaller than the window size "
                        f"{kk}")
    return k, s, pads, d


def _pool(who, prim, input, ksize, strides, padding, data_format, nspatial, explicit,
          dilations=None):
    (x,) = convert_args((input,))
    ns = _spatial(who, x, nspatial)
    first = channels_first(who, data_format, ns)
    k, s, pads, d = _geometry(who, x, ns, first, ksize, strides, padding, dilations, explicit)
    return _to_first(prim(_to_last(x, first), k, s, pads, d), first)


@composite("max_pool")
def max_pool(input, ksize, strides, padding, data_format=None, name=None):
    """The maximum of each window over the spatial axes (1, 2 or 3, from the input's
    rank), as ``tf.nn.max_pool``.

    Args:
        input: ``[N, *spatial, C]`` (or channels first, by ``data_format``).
        ksize, strides: an int, one per spatial axis, or one per axis (batch and
            channel entries 1).
        padding: ``"VALID"``, ``"SAME"`` or explicit ``[[0, 0], [lo, hi], ..., [0, 0]]``
            (each pad smaller than its window, as TF).
        data_format: ``"NWC"``/``"NHWC"``/``"NDHWC"`` (None) or ``"NCW"``/``"NCHW"``/
            ``"NCDHW"``.

    NaN is skipped, and the gradient goes to the first of tied maxima, as in TF.

    Example: ``jt.nn.max_pool(jt.ones([1, 4, 4, 3]), 2, 2, "VALID").shape`` is
    ``[1, 2, 2, 3]``."""
    return _pool("max_pool", _max_pool_prim, input, ksize, strides, padding, data_format,
                 None, True)


@composite("max_pool1d")
def max_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):
    """``max_pool`` over one spatial axis (``[N, W, C]``)."""
    return _pool("max_pool1d", _max_pool_prim, input, ksize, strides, padding, data_format,
                 1, True)


@composite("max_pool2d")
def max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):
    """``max_pool`` over two spatial axes (``[N, H, W, C]``)."""
    return _pool("max_pool2d", _max_pool_prim, input, ksize, strides, padding, data_format,
                 2, True)


@composite("max_pool3d")
def max_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None):
    """``max_pool`` over three spatial axes (``[N, D, H, W, C]``); TF takes no explicit
    padding here."""
    return _pool("max_pool3d", _max_pool_prim, input, ksize, strides, padding, data_format,
                 3, False)


@composite("avg_pool")
def avg_pool(input, ksize, strides, padding, data_format=None, name=None):
    """The mean of each window over the spatial axes, as ``tf.nn.avg_pool``: with
    ``"SAME"``, of the window's positions inside the input (the padding is not counted).
    ``padding`` is ``"SAME"`` or ``"VALID"`` (TF takes no explicit pads here).

    Example: ``jt.nn.avg_pool(jt.reshape(jt.range(1., 10.), [1, 3, 3, 1]), 2, 2, "SAME")``
    is ``[[3, 4.5], [7.5, 9]]`` (per channel)."""
    return _pool("avg_pool", _avg_pool_prim, input, ksize, strides, padding, data_format,
                 None, False)


@composite("avg_pool1d")
def avg_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):
    """``avg_pool`` over one spatial axis."""
    return _pool("avg_pool1d", _avg_pool_prim, input, ksize, strides, padding, data_format,
                 1, False)


@composite("avg_pool2d")
def avg_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):
    """``avg_pool`` over two spatial axes."""
    return _pool("avg_pool2d", _avg_pool_prim, input, ksize, strides, padding, data_format,
                 2, False)


@composite("avg_pool3d")
def avg_pool3d(input, ksize, strides, padding, data_format="NDHWC", name=None):
    """``avg_pool`` over three spatial axes."""
    return _pool("avg_pool3d", _avg_pool_prim, input, ksize, strides, padding, data_format,
                 3, False)


@composite("pool")
def pool(input, window_shape, pooling_type, strides=None, padding="VALID", data_format=None,
         dilations=None, name=None):
    """``tf.nn.pool``: ``"MAX"`` or ``"AVG"`` pooling of windows of ``window_shape``
    (one size per spatial axis), with ``dilations`` (the window's positions that far
    apart). As TF: dilations above 1 need ``"VALID"`` padding and strides of 1.

    Example: ``jt.nn.pool(x, [2, 2], "MAX", padding="VALID", dilations=[2, 2])``."""
    (x,) = convert_args((input,))
    ws = [int(w) for w in window_shape]
    ns = len(ws)
    if pooling_type not in ("MAX", "AVG"):
        raise InvalidArgumentError(f"pool: {ns}-D {pooling_type} pooling is not supported "
                                   "(pooling_type must be 'MAX' or 'AVG')")
    if ns not in (1, 2, 3) or x._type.rank != ns + 2:
        raise InvalidArgumentError(
            f"pool: input must be rank {ns + 2} for a window_shape of {ns} sizes {ws}, got "
            f"shape {_fmt(x._type.shape)}")
    s = [1] * ns if strides is None else list(strides)
    d = [1] * ns if dilations is None else list(dilations)
    if any(v > 1 for v in d):
        if not isinstance(padding, str) or padding.upper() != "VALID":
            raise InvalidArgumentError(
                f"pool: pooling with {padding!r} padding is not implemented for dilations > "
                f"1 (TF's rule; use 'VALID'). Received: dilations={d}")
        if any(v > 1 for v in s):
            raise InvalidArgumentError(
                f"pool: strides > 1 are not supported in conjunction with dilations > 1 "
                f"(TF's rule). Received: strides={s} and dilations={d}")
    prim = _max_pool_prim if pooling_type == "MAX" else _avg_pool_prim
    return _pool("pool", prim, x, ws, s, padding, data_format, ns, False, d)


__all__ = ["max_pool", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool", "avg_pool1d",
           "avg_pool2d", "avg_pool3d", "pool"]
