"""Catalogue cases for pooling (``jittape/ops/pooling.py``; see cases.py for the format);
importing this module appends them to ``cases.CASES``.

The references loop over the output positions and take each window as a slice of the
padded input: written apart from the ops' vectorized references, which they check.
Max-pooling inputs are drawn distinct (no tie within a finite-difference step).
"""

from __future__ import annotations

import itertools

import numpy as np

import jittape as jt
from jittape.ops import pooling as P

from .cases import F, I, case


def _geometry(x, k, s, pads, d):
    ns = x.ndim - 2
    k, s, d = ((v,) * ns if isinstance(v, int) else tuple(v) for v in (k, s, d))
    pads = ((0, 0),) * ns if pads is None else tuple(pads)
    outs = [(n + lo + hi - ((kk - 1) * dd + 1)) // ss + 1
            for n, kk, ss, dd, (lo, hi) in zip(x.shape[1:-1], k, s, d, pads)]
    return k, s, pads, d, outs


def _window(o, k, s, pads, d):
    """The padded-input slices of the window at output position ``o``."""
    return tuple(slice(oo * ss, oo * ss + (kk - 1) * dd + 1, dd)
                 for oo, kk, ss, dd in zip(o, k, s, d))


def _np_pool(x, k, s, pads=None, d=1, kind="max"):
    k, s, pads, d, outs = _geometry(x, k, s, pads, d)
    fill = -np.inf if kind == "max" else np.nan
    xp = np.pad(x, ((0, 0), *pads, (0, 0)), constant_values=fill)
    y = np.zeros((x.shape[0], *outs, x.shape[-1]), x.dtype)
    for o in itertools.product(*map(range, outs)):
        w = xp[(slice(None), *_window(o, k, s, pads, d), slice(None))]
        w = w.reshape(x.shape[0], -1, x.shape[-1])
        y[(slice(None), *o, slice(None))] = (w.max(axis=1) if kind == "max"
                                             else np.nanmean(w, axis=1))
    return y


def _np_max_pool_grad(x, dy, k, s, pads=None, d=1):
    """dx: each window's dy at its maximum (the inputs have no ties)."""
    k, s, pads, d, outs = _geometry(x, k, s, pads, d)
    xp = np.pad(x, ((0, 0), *pads, (0, 0)), constant_values=-np.inf)
    dxp = np.zeros_like(xp)
    for o in itertools.product(*map(range, outs)):
        win = _window(o, k, s, pads, d)
        for n, c in itertools.product(range(x.shape[0]), range(x.shape[-1])):
            w = xp[(n, *win, c)]
            at = np.unravel_index(np.argmax(w), w.shape)
            pos = tuple(sl.start + j * sl.step for sl, j in zip(win, at))
            dxp[(n, *pos, c)] += dy[(n, *o, c)]
    return dxp[(slice(None), *(slice(lo, lo + n) for (lo, _), n in zip(pads, x.shape[1:-1])),
                slice(None))]


def _np_max_pool_grad_grad(x, g, k, s, pads=None, d=1):
    """g read at each window's maximum: the transpose of max_pool_grad in dy."""
    _, _, _, _, outs = _geometry(x, k, s, pads, d)
    y = np.zeros((x.shape[0], *outs, x.shape[-1]))
    for idx in np.ndindex(*y.shape):
        e = np.zeros_like(y)
        e[idx] = 1.0
        y[idx] = np.sum(_np_max_pool_grad(x, e, k, s, pads, d) * g)
    return y


def _np_avg_pool_grad(dy, sizes, k, s, pads=None, d=1):
    shape = (dy.shape[0], *sizes, dy.shape[-1])
    x0 = np.zeros(shape)
    _, _, _, _, outs = _geometry(x0, k, s, pads, d)
    dx = np.zeros(shape)
    for idx in np.ndindex(*shape):  # the adjoint of the (linear) average, column by column
        e = np.zeros(shape)
        e[idx] = 1.0
        dx[idx] = np.sum(_np_pool(e, k, s, pads, d, "avg") * dy)
    return dx


def _same(sizes, k, s):
    out = []
    for n in sizes:
        total = max((-(-n // s) - 1) * s + k - n, 0)
        out.append((total // 2, total - total // 2))
    return out


# the largest case of each op (which tests/test_cpu_backend.py compiles) shares one
# geometry, so that its kernels compile once: 3x3 windows, stride 2, SAME, on [2,5,6,3]
_X = (2, 5, 6, 3)
_SAME = _same((5, 6), 3, 2)  # [(1, 1), (0, 1)]
_Y = (2, 3, 3, 3)

case("max_pool", "2d_k3_s2_same", lambda x: jt.nn.max_pool2d(x, 3, 2, "SAME"),
     lambda x: _np_pool(x, 3, 2, _SAME), [F(_X, "distinct")])
case("max_pool", "1d_k3_s2_valid", lambda x: jt.nn.max_pool1d(x, 3, 2, "VALID"),
     lambda x: _np_pool(x, 3, 2), [F((2, 7, 3), "distinct")])
case("max_pool", "2d_k2_s2_same_odd", lambda x: jt.nn.max_pool2d(x, 2, 2, "SAME"),
     lambda x: _np_pool(x, 2, 2, _same((3, 5), 2, 2)), [F((1, 3, 5, 2), "distinct")])
case("max_pool", "3d_k2_s1_valid", lambda x: jt.nn.max_pool3d(x, 2, 1, "VALID"),
     lambda x: _np_pool(x, 2, 1), [F((1, 3, 2, 3, 2), "distinct")])
case("max_pool", "2d_explicit_nchw",
     lambda x: jt.nn.max_pool(x, [1, 1, 2, 2], [1, 1, 1, 2], [[0, 0], [0, 0], [1, 0], [0, 1]],
                              data_format="NCHW"),
     lambda x: np.transpose(_np_pool(np.transpose(x, (0, 2, 3, 1)), 2, (1, 2),
                                     [(1, 0), (0, 1)]), (0, 3, 1, 2)),
     [F((1, 2, 3, 4), "distinct")])
case("max_pool", "dilated", lambda x: jt.nn.pool(x, [2, 2], "MAX", dilations=[2, 1]),
     lambda x: _np_pool(x, 2, 1, d=(2, 1)), [F((1, 4, 3, 2), "distinct")])
case("max_pool", "int32", lambda x: jt.nn.max_pool2d(x, 2, 2, "SAME"),
     lambda x: _np_pool(x.astype(np.float64), 2, 2, _same((3, 3), 2, 2)).astype(np.int32),
     [I(np.arange(18).reshape(1, 3, 3, 2) * 7 % 11)], grad="skip")

case("avg_pool", "2d_k3_s2_same", lambda x: jt.nn.avg_pool2d(x, 3, 2, "SAME"),
     lambda x: _np_pool(x, 3, 2, _SAME, kind="avg"), [F(_X)])
case("avg_pool", "1d_k2_s1_same", lambda x: jt.nn.avg_pool1d(x, 2, 1, "SAME"),
     lambda x: _np_pool(x, 2, 1, _same((5,), 2, 1), kind="avg"), [F((2, 5, 3))])
case("avg_pool", "3d_k2_s2_same_ncdhw",
     lambda x: jt.nn.avg_pool3d(x, 2, 2, "SAME", data_format="NCDHW"),
     lambda x: np.transpose(_np_pool(np.transpose(x, (0, 2, 3, 4, 1)), 2, 2,
                                     _same((3, 2, 3), 2, 2), kind="avg"), (0, 4, 1, 2, 3)),
     [F((1, 2, 3, 2, 3))])
case("avg_pool", "dilated", lambda x: jt.nn.pool(x, [2], "AVG", dilations=[3]),
     lambda x: _np_pool(x, 2, 1, d=3, kind="avg"), [F((2, 6, 2))])

_G = dict(ksize=(3, 3), strides=(2, 2), pads=tuple(_SAME))
case("max_pool_grad", "2d_k3_s2_same", lambda x, dy: P.max_pool_grad(x, dy, **_G),
     lambda x, dy: _np_max_pool_grad(x, dy, 3, 2, _SAME), [F(_X, "distinct"), F(_Y)])
case("max_pool_grad", "1d_overlapping",
     lambda x, dy: P.max_pool_grad(x, dy, (3,), (1,), ((1, 1),)),
     lambda x, dy: _np_max_pool_grad(x, dy, 3, 1, [(1, 1)]),
     [F((1, 5, 2), "distinct"), F((1, 5, 2))])
case("max_pool_grad_grad", "2d_k3_s2_same", lambda x, g: P.max_pool_grad_grad(x, g, **_G),
     lambda x, g: _np_max_pool_grad_grad(x, g, 3, 2, _SAME), [F(_X, "distinct"), F(_X)])
case("avg_pool_grad", "2d_k3_s2_same", lambda dy: P.avg_pool_grad(dy, (5, 6), **_G),
     lambda dy: _np_avg_pool_grad(dy, (5, 6), 3, 2, _SAME), [F(_Y)])
case("avg_pool_grad", "1d_k2_s2_valid",
     lambda dy: P.avg_pool_grad(dy, (5,), (2,), (2,), ((0, 0),)),
     lambda dy: _np_avg_pool_grad(dy, (5,), 2, 2), [F((2, 2, 3))])
