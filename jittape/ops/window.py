"""Convolution: one N-d primitive and its two backprops, and TF's functions over them.

The primitives are channels last (``x[N, *S, C]``), with the filter as TF keeps it
(``w[*K, C // groups, F]``), and see plain ints only: per spatial axis a stride, a
dilation and explicit pads ``(low, high)`` (``window_geometry`` turns TF's arguments
into those). ``groups`` splits the channels: ``C = groups * w.shape[-2]``, and output
channel ``f`` reads group ``f // (F // groups)``; a depthwise convolution is
``groups = C``.

- ``conv(x, w)``: ``out[n, o, f] = sum_{k, c} xpad[n, o * s + k * d, g*Cg + c] w[k, c, f]``.
- ``conv_backprop_input(dy, w, input_shape)``: the gradient with respect to ``x``
  (and TF's transposed convolution).
- ``conv_backprop_filter(x, dy, filter_shape)``: the gradient with respect to ``w``.

Each VJP is written in these three ops (each is linear in each input, and the three
are each other's adjoints), so every derivative order exists. The numpy references
loop over the window's positions (``prod(K)`` of them) and do one matrix product per
position, over the whole batch.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..compiler.ir import Type
from ..errors import InvalidArgumentError, composite
from ..tensor import Tensor, apply, convert_args
from . import shaping as S
from .registry import defop, same_dtype, symbolic_probe
from .window_geometry import channels_first, out_size, pads_for, per_axis

# ---------------------------------------------------------------------------
# Geometry of one call


def _spatial_out(sizes, ksize, strides, dilations, pads) -> tuple:
    """The output's spatial sizes; 0 where the window is larger than the padded input
    (TF gives an empty result there, not an error)."""
    return tuple(out_size(n, k, s, d, lo, hi)
                 for n, k, s, d, (lo, hi) in zip(sizes, ksize, strides, dilations, pads))


def _conv_out_shape(xshape, wshape, strides, dilations, pads, groups, who="conv") -> tuple:
    ns = len(strides)
    if len(xshape) != ns + 2:
        raise ValueError(f"input must be {ns + 2}-dimensional, got shape {list(xshape)}")
    if len(wshape) != ns + 2:
        raise ValueError(f"filter must be {ns + 2}-dimensional, got shape {list(wshape)}")
    c, cg, f = xshape[-1], wshape[-2], wshape[-1]
    if isinstance(c, int) and c != cg * groups:
        raise ValueError(f"input depth must be evenly divisible by filter depth: {c} vs {cg}"
                         if groups == 1 or c % cg else
                         f"input depth {c} is not groups ({groups}) times the filter depth {cg}")
    if f % groups:
        raise ValueError(f"the filter count {f} is not a multiple of groups ({groups})")

    def rule(shape, size):
        sp = _spatial_out(shape[1:-1], [size(k) for k in wshape[:-2]], strides, dilations,
                          pads)
        return (shape[0], *sp, f)

    return symbolic_probe(xshape, rule)


def _check_ints(shape, what):
    if any(not isinstance(d, (int, np.integer)) for d in shape[:-1][1:]):
        raise ValueError(f"the spatial sizes of the {what} must be known, got {list(shape)}")


def _conv_infer(types, strides, dilations, pads, groups):
    x, w = types
    dt = same_dtype(types)
    if not x.is_float:
        raise TypeError(f"needs float tensors, got {dt}")
    return Type(_conv_out_shape(x.shape, w.shape, strides, dilations, pads, groups), dt)


def _bi_infer(types, input_shape, strides, dilations, pads, groups):
    dy, w = types
    dt = same_dtype(types)
    want = _conv_out_shape(tuple(input_shape), w.shape, strides, dilations, pads, groups,
                           "conv_backprop_input")
    if len(dy.shape) != len(want) or any(
            isinstance(a, int) and isinstance(b, int) and a != b
            for a, b in zip(dy.shape, want)):
        raise ValueError(
            f"the output gradient has shape {list(dy.shape)}, but a convolution of an input "
            f"of shape {list(input_shape)} with a filter of shape {list(w.shape)} gives "
            f"{list(want)}")
    return Type(tuple(input_shape), dt)


def _bf_infer(types, filter_shape, strides, dilations, pads, groups):
    x, dy = types
    dt = same_dtype(types)
    want = _conv_out_shape(x.shape, tuple(filter_shape), strides, dilations, pads, groups,
                           "conv_backprop_filter")
    if len(dy.shape) != len(want) or any(
            isinstance(a, int) and isinstance(b, int) and a != b
            for a, b in zip(dy.shape, want)):
        raise ValueError(
            f"the output gradient has shape {list(dy.shape)}, but a convolution of an input "
            f"of shape {list(x.shape)} with a filter of shape {list(filter_shape)} gives "
            f"{list(want)}")
    return Type(tuple(filter_shape), dt)


# ---------------------------------------------------------------------------
# numpy references


def _taps(ksize, strides, dilations, osize):
    """Per window position ``k``: the slices of the padded input that it reads."""
    for k in itertools.product(*(range(n) for n in ksize)):
        yield k, tuple(slice(ki * d, ki * d + (o - 1) * s + 1, s)
                       for ki, s, d, o in zip(k, strides, dilations, osize))


def _padded(x, pads):
    return np.pad(x, [(0, 0), *pads, (0, 0)]) if any(p for pr in pads for p in pr) else x


def _mm(patch, wk, groups):
    """``patch[..., C] @ wk[Cg, F]`` per group."""
    if groups == 1:
        return patch @ wk
    cg, f = wk.shape
    p = patch.reshape(*patch.shape[:-1], groups, cg)
    r = np.einsum("...gc,cgf->...gf", p, wk.reshape(cg, groups, f // groups))
    return r.reshape(*patch.shape[:-1], f)


def _mm_t(dy, wk, groups):
    """``dy[..., F] @ wk[Cg, F].T`` per group: ``[..., C]``."""
    if groups == 1:
        return dy @ wk.T
    cg, f = wk.shape
    d = dy.reshape(*dy.shape[:-1], groups, f // groups)
    r = np.einsum("...gf,cgf->...gc", d, wk.reshape(cg, groups, f // groups))
    return r.reshape(*dy.shape[:-1], groups * cg)


def _conv_fwd(x, w, strides, dilations, pads, groups):
    ns = len(strides)
    osize = _spatial_out(x.shape[1:-1], w.shape[:ns], strides, dilations, pads)
    out = np.zeros((x.shape[0], *osize, w.shape[-1]), dtype=x.dtype)
    if out.size == 0 or x.shape[-1] == 0:
        return out
    xp = _padded(x, pads)
    for k, sl in _taps(w.shape[:ns], strides, dilations, osize):
        out += _mm(xp[(slice(None), *sl)], w[k], groups)
    return out


def _bi_fwd(dy, w, input_shape, strides, dilations, pads, groups):
    ns = len(strides)
    shape = tuple(int(d) for d in input_shape)
    padded = (shape[0], *(n + lo + hi for n, (lo, hi) in zip(shape[1:-1], pads)), shape[-1])
    dxp = np.zeros(padded, dtype=dy.dtype)
    osize = dy.shape[1:-1]
    if dy.size and dxp.size:
        for k, sl in _taps(w.shape[:ns], strides, dilations, osize):
            dxp[(slice(None), *sl)] += _mm_t(dy, w[k], groups)
    crop = tuple(slice(lo, lo + n) for n, (lo, _) in zip(shape[1:-1], pads))
    return np.ascontiguousarray(dxp[(slice(None), *crop)])


def _bf_fwd(x, dy, filter_shape, strides, dilations, pads, groups):
    ns = len(strides)
    fshape = tuple(int(d) for d in filter_shape)
    dw = np.zeros(fshape, dtype=x.dtype)
    if dy.size == 0 or x.size == 0:
        return dw
    xp = _padded(x, pads)
    cg, f = fshape[-2], fshape[-1]
    d2 = dy.reshape(-1, f)
    for k, sl in _taps(fshape[:ns], strides, dilations, dy.shape[1:-1]):
        p = xp[(slice(None), *sl)].reshape(-1, groups * cg)
        if groups == 1:
            dw[k] = p.T @ d2
        else:
            r = np.einsum("mgc,mgf->cgf", p.reshape(-1, groups, cg),
                          d2.reshape(-1, groups, f // groups))
            dw[k] = r.reshape(cg, f)
    return dw


# ---------------------------------------------------------------------------
# The ops


def _geom(attrs):
    return {k: attrs[k] for k in ("strides", "dilations", "pads", "groups")}


def _conv_vjp(g, out, x, w, **a):
    return (conv_backprop_input(g, w, x._type.shape, **a),
            conv_backprop_filter(x, g, w._type.shape, **a))


def _bi_vjp(g, out, dy, w, input_shape, **a):
    # <g, bi(dy, w)> = <conv(g, w), dy>
    return (conv_op_call(g, w, **a), conv_backprop_filter(g, dy, w._type.shape, **a))


def _bf_vjp(g, out, x, dy, filter_shape, **a):
    # <g, bf(x, dy)> = <conv(x, g), dy>
    return (conv_backprop_input(dy, g, x._type.shape, **a), conv_op_call(x, g, **a))


conv_op = defop(
    "conv", inputs=2, kind="window", epilogue=True, forward=_conv_fwd, infer=_conv_infer,
    vjp=_conv_vjp,
    doc="N-d convolution, channels last (TF's Conv2D/Conv3D; conv1d with one spatial axis).",
)
conv_backprop_input_op = defop(
    "conv_backprop_input", inputs=2, kind="window", epilogue=True, forward=_bi_fwd, infer=_bi_infer,
    vjp=_bi_vjp,
    doc="The gradient of conv with respect to its input (TF's Conv2DBackpropInput, and "
        "the transposed convolution).",
)
conv_backprop_filter_op = defop(
    "conv_backprop_filter", inputs=2, kind="window", forward=_bf_fwd, infer=_bf_infer,
    vjp=_bf_vjp,
    doc="The gradient of conv with respect to its filter (TF's Conv2DBackpropFilter).",
)


def _attrs(strides, dilations, pads, groups):
    return dict(strides=tuple(int(s) for s in strides),
                dilations=tuple(int(d) for d in dilations),
                pads=tuple((int(lo), int(hi)) for lo, hi in pads), groups=int(groups))


def conv_op_call(x, w, strides, dilations, pads, groups):
    return apply(conv_op, x, w, **_attrs(strides, dilations, pads, groups))


def conv_backprop_input(dy, w, input_shape, strides, dilations, pads, groups):
    return apply(conv_backprop_input_op, dy, w, input_shape=tuple(input_shape),
                 **_attrs(strides, dilations, pads, groups))


def conv_backprop_filter(x, dy, filter_shape, strides, dilations, pads, groups):
    return apply(conv_backprop_filter_op, x, dy, filter_shape=tuple(filter_shape),
                 **_attrs(strides, dilations, pads, groups))


# ---------------------------------------------------------------------------
# TF's functions


def _to_last(x, first: bool):
    if not first:
        return x
    return S.transpose(x, (0, *range(2, x.ndim), 1))


def _to_first(x, first: bool):
    if not first:
        return x
    return S.transpose(x, (0, x.ndim - 1, *range(1, x.ndim - 1)))


def _spatial_known(who, x, ns):
    sizes = x.shape[1:1 + ns]
    if any(d is None for d in sizes):
        raise InvalidArgumentError(f"{who}: the spatial sizes of the input must be known, got "
                                   f"{x._type}")
    return tuple(sizes)


def _conv(who, input, filters, strides, padding, data_format, dilations, ns):
    x, w = convert_args((input, filters))
    if x.ndim != ns + 2:
        raise InvalidArgumentError(
            f"{who}: input must be {ns + 2}-dimensional ({'NCHW' if ns == 2 else 'channels'} "
            f"and batch), got shape {x.shape} [input: {x._type}, filters: {w._type}]")
    if w.ndim != ns + 2:
        raise InvalidArgumentError(
            f"{who}: filters must be {ns + 2}-dimensional (spatial, in, out), got shape "
            f"{w.shape} [input: {x._type}, filters: {w._type}]")
    first = channels_first(who, data_format, ns)
    st = per_axis(who, "strides", 1 if strides is None else strides, ns, first)
    dl = per_axis(who, "dilations", 1 if dilations is None else dilations, ns, first)
    x = _to_last(x, first)
    c, cg = x.shape[-1], w.shape[-2]
    if isinstance(c, int) and (cg == 0 or c % cg):
        raise InvalidArgumentError(
            f"{who}: input depth must be evenly divisible by filter depth: {c} vs {cg} "
            f"[input: {x._type}, filters: {w._type}]")
    groups = c // cg if isinstance(c, int) else 1
    sizes = _spatial_known(who, x, ns)
    pads = pads_for(who, padding, sizes, w.shape[:ns], st, dl, first)
    try:
        y = conv_op_call(x, w, st, dl, pads, groups)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{who}: {str(e).removeprefix('conv: ')}") from None
    return _to_first(y, first)


@composite("conv1d")
def conv1d(input, filters, stride=1, padding="VALID", data_format="NWC", dilations=None,
           name=None):
    """1-d convolution of ``input[N, W, C]`` (or ``NCW``) with ``filters[K, C, F]``."""
    return _conv("conv1d", input, filters, stride, padding, data_format, dilations, 1)


@composite("conv2d")
def conv2d(input, filters, strides=1, padding="VALID", data_format="NHWC", dilations=None,
           name=None):
    """2-d convolution of ``input[N, H, W, C]`` (or ``NCHW``) with ``filters[KH, KW, C, F]``
    (``C`` may be a divisor of the input's channels: a grouped convolution)."""
    return _conv("conv2d", input, filters, strides, padding, data_format, dilations, 2)


@composite("conv3d")
def conv3d(input, filters, strides=1, padding="VALID", data_format="NDHWC", dilations=None,
           name=None):
    """3-d convolution of ``input[N, D, H, W, C]`` with ``filters[KD, KH, KW, C, F]``."""
    return _conv("conv3d", input, filters, strides, padding, data_format, dilations, 3)


@composite("convolution")
def convolution(input, filters, strides=None, padding="VALID", data_format=None,
                dilations=None, name=None):
    """N-d convolution: the number of spatial axes is the filter's rank minus 2."""
    (w,) = convert_args((filters,))
    ns = w.ndim - 2
    if ns not in (1, 2, 3):
        raise InvalidArgumentError(
            f"convolution: filters must have 3 to 5 dimensions, got shape {w.shape}")
    return _conv("convolution", input, w, strides, padding, data_format, dilations, ns)


def _output_shape(who, output_shape, ns, first, channels):
    if isinstance(output_shape, Tensor):
        if output_shape._tracer is not None:
            raise InvalidArgumentError(
                f"{who}: output_shape must be known when the function is traced (a Python "
                "list or a constant), got a symbolic tensor")
        output_shape = output_shape.numpy()
    shape = [int(d) for d in np.asarray(output_shape).reshape(-1)]
    if len(shape) == ns:  # spatial sizes only
        return shape
    if len(shape) != ns + 2:
        raise InvalidArgumentError(
            f"{who}: output_shape must have {ns + 2} elements, got {shape}")
    if (shape[1] if first else shape[-1]) != channels:
        raise InvalidArgumentError(
            f"{who}: output_shape {shape} has {shape[1] if first else shape[-1]} channels, but "
            f"the filter makes {channels}")
    return shape[2:] if first else shape[1:-1]


def _conv_transpose(who, input, filters, output_shape, strides, padding, data_format,
                    dilations, ns):
    x, w = convert_args((input, filters))
    if x.ndim != ns + 2 or w.ndim != ns + 2:
        raise InvalidArgumentError(
            f"{who}: input and filters must be {ns + 2}-dimensional, got {x._type} and "
            f"{w._type}")
    first = channels_first(who, data_format, ns)
    st = per_axis(who, "strides", strides, ns, first)
    dl = per_axis(who, "dilations", 1 if dilations is None else dilations, ns, first)
    x = _to_last(x, first)
    if isinstance(x.shape[-1], int) and x.shape[-1] != w.shape[-1]:
        raise InvalidArgumentError(
            f"{who}: the input has {x.shape[-1]} channels, but the filter expects "
            f"{w.shape[-1]} (its last axis) [input: {x._type}, filters: {w._type}]")
    sizes = _output_shape(who, output_shape, ns, first, w.shape[-2])
    pads = pads_for(who, padding, sizes, w.shape[:ns], st, dl, first)
    full = (x.shape[0], *sizes, w.shape[-2])
    try:
        y = conv_backprop_input(x, w, full, st, dl, pads, 1)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(
            f"{who}: {str(e).removeprefix('conv_backprop_input: ')}") from None
    return _to_first(y, first)


@composite("conv1d_transpose")
def conv1d_transpose(input, filters, output_shape, strides, padding="SAME", data_format="NWC",
                     dilations=None, name=None):
    """The transpose (gradient) of conv1d: ``filters[K, out_channels, in_channels]``."""
    return _conv_transpose("conv1d_transpose", input, filters, output_shape, strides, padding,
                           data_format, dilations, 1)


@composite("conv2d_transpose")
def conv2d_transpose(input, filters, output_shape, strides, padding="SAME", data_format="NHWC",
                     dilations=None, name=None):
    """The transpose (gradient) of conv2d: ``filters[KH, KW, out_channels, in_channels]``,
    ``output_shape`` the shape of the result (TF checks that conv2d of a tensor of that
    shape has the input's shape)."""
    return _conv_transpose("conv2d_transpose", input, filters, output_shape, strides, padding,
                           data_format, dilations, 2)


@composite("conv3d_transpose")
def conv3d_transpose(input, filters, output_shape, strides, padding="SAME",
                     data_format="NDHWC", dilations=None, name=None):
    """The transpose (gradient) of conv3d."""
    return _conv_transpose("conv3d_transpose", input, filters, output_shape, strides, padding,
                           data_format, dilations, 3)


@composite("conv_transpose")
def conv_transpose(input, filters, output_shape, strides, padding="SAME", data_format=None,
                   dilations=None, name=None):
    """The transpose of an N-d convolution (the spatial rank from the filter's)."""
    (w,) = convert_args((filters,))
    ns = w.ndim - 2
    return _conv_transpose("conv_transpose", input, w, output_shape, strides, padding,
                           data_format, dilations, ns)


def _sizes(who, sizes, n):
    if isinstance(sizes, Tensor):
        sizes = sizes.numpy()
    out = tuple(int(d) for d in np.asarray(sizes).reshape(-1))
    if len(out) != n:
        raise InvalidArgumentError(f"{who}: expected {n} sizes, got {list(out)}")
    return out


@composite("conv2d_backprop_filter")
def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                           data_format="NHWC", dilations=None, name=None):
    """TF's ``conv2d_backprop_filter`` (``tf.compat.v1.nn``): the gradient of conv2d with
    respect to a filter of shape ``filter_sizes``."""
    who = "conv2d_backprop_filter"
    x, dy = convert_args((input, out_backprop))
    fs = _sizes(who, filter_sizes, 4)
    first = channels_first(who, data_format, 2)
    st = per_axis(who, "strides", strides, 2, first)
    dl = per_axis(who, "dilations", 1 if dilations is None else dilations, 2, first)
    x, dy = _to_last(x, first), _to_last(dy, first)
    pads = pads_for(who, padding, _spatial_known(who, x, 2), fs[:2], st, dl, first)
    groups = x.shape[-1] // fs[-2] if fs[-2] else 1
    return conv_backprop_filter(x, dy, fs, st, dl, pads, groups)


@composite("conv2d_backprop_input")
def conv2d_backprop_input(input_sizes, filter, out_backprop, strides, padding,
                          data_format="NHWC", dilations=None, name=None):
    """TF's ``conv2d_backprop_input`` (``tf.compat.v1.nn``): the gradient of conv2d with
    respect to an input of shape ``input_sizes``."""
    who = "conv2d_backprop_input"
    w, dy = convert_args((filter, out_backprop))
    xs = _sizes(who, input_sizes, 4)
    first = channels_first(who, data_format, 2)
    st = per_axis(who, "strides", strides, 2, first)
    dl = per_axis(who, "dilations", 1 if dilations is None else dilations, 2, first)
    dy = _to_last(dy, first)
    xs = (xs[0], *xs[2:], xs[1]) if first else xs
    pads = pads_for(who, padding, xs[1:3], w.shape[:2], st, dl, first)
    groups = xs[-1] // w.shape[-2] if w.shape[-2] else 1
    return _to_first(conv_backprop_input(dy, w, xs, st, dl, pads, groups), first)


def _depthwise(who, x, w, strides, padding, data_format, dilations, ns):
    """``filter[*K, C, M]`` as a grouped convolution with ``groups = C``: output channel
    ``c * M + m`` (TF's order)."""
    first = channels_first(who, data_format, ns)
    st = per_axis(who, "strides", strides, ns, first)
    dl = per_axis(who, "dilations", 1 if dilations is None else dilations, ns, first)
    x = _to_last(x, first)
    if w.ndim != ns + 2:
        raise InvalidArgumentError(
            f"{who}: filter must be {ns + 2}-dimensional (spatial, channels, multiplier), got "
            f"{w._type}")
    c, m = w.shape[-2], w.shape[-1]
    if x.ndim != ns + 2 or x.shape[-1] != c:
        raise InvalidArgumentError(
            f"{who}: input has {x.shape[-1] if x.ndim else '?'} channels, but the filter "
            f"expects {c} [input: {x._type}, filter: {w._type}]")
    sizes = _spatial_known(who, x, ns)
    pads = pads_for(who, padding, sizes, w.shape[:ns], st, dl, first)
    wg = S.reshape(w, (*w.shape[:ns], 1, c * m))
    return _to_first(conv_op_call(x, wg, st, dl, pads, c), first)


@composite("depthwise_conv2d")
def depthwise_conv2d(input, filter, strides, padding, data_format=None, dilations=None,
                     name=None):
    """Each input channel convolved with its own ``M`` filters (``filter[KH, KW, C, M]``),
    giving ``C * M`` channels."""
    x, w = convert_args((input, filter))
    return _depthwise("depthwise_conv2d", x, w, strides, padding, data_format, dilations, 2)


@composite("separable_conv2d")
def separable_conv2d(input, depthwise_filter, pointwise_filter, strides, padding,
                     data_format=None, dilations=None, name=None):
    """A depthwise convolution, then a 1x1 convolution across its channels
    (``pointwise_filter[1, 1, C * M, F]``)."""
    x, dw, pw = convert_args((input, depthwise_filter, pointwise_filter))
    first = channels_first("separable_conv2d", data_format, 2)
    y = _depthwise("separable_conv2d", x, dw, strides, padding, data_format, dilations, 2)
    y = _to_last(y, first)
    if pw.ndim != 4 or tuple(pw.shape[:2]) != (1, 1):
        raise InvalidArgumentError(
            f"separable_conv2d: pointwise_filter must have shape [1, 1, in, out], got {pw._type}")
    z = conv_op_call(y, pw, (1, 1), (1, 1), ((0, 0), (0, 0)), 1)
    return _to_first(z, first)


__all__ = [
    "conv1d", "conv2d", "conv3d", "convolution", "conv1d_transpose", "conv2d_transpose",
    "conv3d_transpose", "conv_transpose", "depthwise_conv2d", "separable_conv2d",
]
