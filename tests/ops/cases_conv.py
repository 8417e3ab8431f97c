"""Catalogue cases for the convolution ops (``jittape/ops/window.py``): TF's functions
against a direct numpy reference written here from the definition, one output position
(or one scattered window) at a time, independent of the ops' own references."""

from __future__ import annotations

import itertools

import numpy as np

import jittape as jt

from .cases import F, case


def _pads(sizes, ksize, strides, dil, padding):
    """TF's pads per axis: SAME puts the odd one at the high end."""
    if not isinstance(padding, str):
        return [tuple(p) for p in padding]
    out = []
    for n, k, s, d in zip(sizes, ksize, strides, dil):
        if padding == "VALID":
            out.append((0, 0))
            continue
        eff = (k - 1) * d + 1
        total = max((-(-n // s) - 1) * s + eff - n, 0)
        out.append((total // 2, total - total // 2))
    return out


def _direct(x, w, strides, padding, dil=None, groups=1):
    """``out[n, o, f] = sum_{k, c} xpad[n, o*s + k*d, g*Cg + c] w[k, c, f]``, position
    by position."""
    ns = x.ndim - 2
    strides = [strides] * ns if np.isscalar(strides) else list(strides)
    dil = [1] * ns if dil is None else ([dil] * ns if np.isscalar(dil) else list(dil))
    ksize = w.shape[:ns]
    pads = _pads(x.shape[1:-1], ksize, strides, dil, padding)
    xp = np.pad(x, [(0, 0), *pads, (0, 0)])
    osize = [(xp.shape[1 + j] - (ksize[j] - 1) * dil[j] - 1) // strides[j] + 1
             for j in range(ns)]
    cg, f = w.shape[-2], w.shape[-1]
    fg = f // groups
    out = np.zeros((x.shape[0], *osize, f))
    for o in itertools.product(*(range(n) for n in osize)):
        for k in itertools.product(*(range(n) for n in ksize)):
            at = tuple(o[j] * strides[j] + k[j] * dil[j] for j in range(ns))
            v = xp[(slice(None), *at)]  # [N, C]
            for g in range(groups):
                out[(slice(None), *o, slice(g * fg, (g + 1) * fg))] += (
                    v[:, g * cg:(g + 1) * cg] @ w[k][:, g * fg:(g + 1) * fg])
    return out


def _direct_t(dy, w, xshape, strides, padding, dil=None):
    """The transposed convolution: each ``dy[n, o]`` scattered through its window."""
    ns = dy.ndim - 2
    strides = [strides] * ns if np.isscalar(strides) else list(strides)
    dil = [1] * ns if dil is None else ([dil] * ns if np.isscalar(dil) else list(dil))
    ksize = w.shape[:ns]
    pads = _pads(xshape[1:-1], ksize, strides, dil, padding)
    dxp = np.zeros((xshape[0], *(n + lo + hi for n, (lo, hi) in zip(xshape[1:-1], pads)),
                    xshape[-1]))
    for o in itertools.product(*(range(n) for n in dy.shape[1:-1])):
        for k in itertools.product(*(range(n) for n in ksize)):
            at = tuple(o[j] * strides[j] + k[j] * dil[j] for j in range(ns))
            dxp[(slice(None), *at)] += dy[(slice(None), *o)] @ w[k].T
    crop = tuple(slice(lo, lo + n) for n, (lo, _) in zip(xshape[1:-1], pads))
    return dxp[(slice(None), *crop)]


def _direct_filter(x, dy, fshape, strides, padding, dil=None):
    ns = x.ndim - 2
    strides = [strides] * ns if np.isscalar(strides) else list(strides)
    dil = [1] * ns if dil is None else ([dil] * ns if np.isscalar(dil) else list(dil))
    ksize = fshape[:ns]
    pads = _pads(x.shape[1:-1], ksize, strides, dil, padding)
    xp = np.pad(x, [(0, 0), *pads, (0, 0)])
    dw = np.zeros(fshape)
    for o in itertools.product(*(range(n) for n in dy.shape[1:-1])):
        for k in itertools.product(*(range(n) for n in ksize)):
            at = tuple(o[j] * strides[j] + k[j] * dil[j] for j in range(ns))
            dw[k] += xp[(slice(None), *at)].T @ dy[(slice(None), *o)]
    return dw


def _nchw(f):
    """A channels-last reference as a channels-first one."""
    def g(x, w, *a, **k):
        y = f(np.moveaxis(x, 1, -1), w, *a, **k)
        return np.moveaxis(y, -1, 1)
    return g


# -- conv (forward; its gradient runs both backprops) -------------------------------
case("conv", "conv2d_same_s1", lambda x, w: jt.nn.conv2d(x, w, 1, "SAME"),
     lambda x, w: _direct(x, w, 1, "SAME"), [F((2, 5, 4, 2)), F((3, 3, 2, 3))])
case("conv", "conv2d_valid_s2", lambda x, w: jt.nn.conv2d(x, w, 2, "VALID"),
     lambda x, w: _direct(x, w, 2, "VALID"), [F((1, 7, 6, 3)), F((3, 2, 3, 2))])
case("conv", "conv2d_same_s2_odd_pad", lambda x, w: jt.nn.conv2d(x, w, [1, 2, 2, 1], "SAME"),
     lambda x, w: _direct(x, w, 2, "SAME"), [F((1, 6, 5, 2)), F((2, 3, 2, 2))])
case("conv", "conv2d_explicit_pads",
     lambda x, w: jt.nn.conv2d(x, w, 1, [[0, 0], [2, 0], [1, 1], [0, 0]]),
     lambda x, w: _direct(x, w, 1, [(2, 0), (1, 1)]), [F((1, 4, 4, 2)), F((2, 2, 2, 2))])
case("conv", "conv2d_nchw", lambda x, w: jt.nn.conv2d(x, w, 1, "SAME", data_format="NCHW"),
     _nchw(lambda x, w: _direct(x, w, 1, "SAME")), [F((1, 2, 4, 5)), F((3, 3, 2, 2))])
case("conv", "conv2d_groups", lambda x, w: jt.nn.conv2d(x, w, 1, "SAME"),
     lambda x, w: _direct(x, w, 1, "SAME", groups=2), [F((1, 4, 4, 4)), F((3, 3, 2, 4))])
case("conv", "conv1d_dilated_same", lambda x, w: jt.nn.conv1d(x, w, 1, "SAME", dilations=2),
     lambda x, w: _direct(x, w, 1, "SAME", 2), [F((2, 9, 2)), F((3, 2, 3))])
case("conv", "conv1d_stride2_gemm", lambda x, w: jt.nn.conv1d(x, w, 2, "VALID"),
     lambda x, w: _direct(x, w, 2, "VALID"), [F((2, 11, 6)), F((3, 6, 4))])
case("conv", "conv3d_same", lambda x, w: jt.nn.conv3d(x, w, 1, "SAME"),
     lambda x, w: _direct(x, w, 1, "SAME"), [F((1, 3, 4, 3, 2)), F((2, 2, 2, 2, 2))])
case("conv", "convolution_2d_dilated",
     lambda x, w: jt.nn.convolution(x, w, padding="VALID", dilations=2),
     lambda x, w: _direct(x, w, 1, "VALID", 2), [F((1, 6, 6, 2)), F((2, 2, 2, 3))])
case("conv", "depthwise_conv2d",
     lambda x, w: jt.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME"),
     lambda x, w: _direct(x, w.reshape(3, 3, 1, 6), 1, "SAME", groups=3),
     [F((1, 4, 5, 3)), F((3, 3, 3, 2))])
case("separable_conv2d", "separable_s1",
     lambda x, dw, pw: jt.nn.separable_conv2d(x, dw, pw, [1, 1, 1, 1], "VALID"),
     lambda x, dw, pw: _direct(_direct(x, dw.reshape(2, 2, 1, 4), 1, "VALID", groups=2),
                               pw, 1, "VALID"),
     [F((1, 4, 4, 2)), F((2, 2, 2, 2)), F((1, 1, 4, 3))])

# -- conv_backprop_input (the transposed convolution) -------------------------------
case("conv_backprop_input", "conv2d_transpose_s2_same",
     lambda x, w: jt.nn.conv2d_transpose(x, w, [1, 5, 4, 2], 2, "SAME"),
     lambda x, w: _direct_t(x, w, (1, 5, 4, 2), 2, "SAME"), [F((1, 3, 2, 3)), F((3, 3, 2, 3))])
case("conv_backprop_input", "conv1d_transpose_valid",
     lambda x, w: jt.nn.conv1d_transpose(x, w, [2, 9, 2], 2, "VALID"),
     lambda x, w: _direct_t(x, w, (2, 9, 2), 2, "VALID"), [F((2, 4, 3)), F((3, 2, 3))])
case("conv_backprop_input", "conv2d_backprop_input_gemm",
     lambda w, dy: jt.nn.conv2d_backprop_input([2, 5, 5, 4], w, dy, [1, 1, 1, 1], "SAME"),
     lambda w, dy: _direct_t(dy, w, (2, 5, 5, 4), 1, "SAME"), [F((3, 3, 4, 2)), F((2, 5, 5, 2))])

# -- conv_backprop_filter -----------------------------------------------------------
case("conv_backprop_filter", "conv2d_backprop_filter_same",
     lambda x, dy: jt.nn.conv2d_backprop_filter(x, [3, 3, 2, 3], dy, [1, 1, 1, 1], "SAME"),
     lambda x, dy: _direct_filter(x, dy, (3, 3, 2, 3), 1, "SAME"),
     [F((2, 4, 4, 2)), F((2, 4, 4, 3))])
case("conv_backprop_filter", "conv2d_backprop_filter_s2_valid",
     lambda x, dy: jt.nn.conv2d_backprop_filter(x, [2, 2, 3, 2], dy, 2, "VALID"),
     lambda x, dy: _direct_filter(x, dy, (2, 2, 3, 2), 2, "VALID"),
     [F((1, 5, 4, 3)), F((1, 2, 2, 2))])
