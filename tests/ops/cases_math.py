"""Catalogue cases for the ops of math, nn activations, linalg, random and image (see cases.py for
the format); importing this module appends them to ``cases.CASES``."""

from __future__ import annotations

import numpy as np  # noqa: F401
from scipy import special

import jittape as jt  # noqa: F401

from .cases import GENS, F, I, _shape_name, case, fixed  # noqa: F401


# ---------------------------------------------------------------------------
# Inputs for linear algebra: matrices far from singular, so that finite differences of
# an inverse or a determinant are meaningful


def _gen_well_conditioned(rng, shape):
    """The identity plus small noise, per matrix of the last two axes."""
    n = shape[-1]
    return np.eye(n) + 0.25 * rng.normal(size=shape)


def _gen_spd(rng, shape):
    """Symmetric positive definite: M M^T / n + I."""
    m = rng.normal(size=shape)
    return m @ np.swapaxes(m, -1, -2) / shape[-1] + np.eye(shape[-1])


GENS.setdefault("well_conditioned", _gen_well_conditioned)
GENS.setdefault("spd", _gen_spd)


def _like(x, a):
    """The numpy array ``a`` as a constant of ``x``'s dtype (float32 runs too)."""
    return jt.constant(a, dtype=x.dtype)


# ---------------------------------------------------------------------------
# Elementwise primitives (tf.math)

_UNARY_SHAPES = [(), (5,), (2, 3), (0, 3)]
for _s in _UNARY_SHAPES:
    _nm = _shape_name(_s)
    case("rsqrt", _nm, jt.math.rsqrt, lambda x: 1.0 / np.sqrt(x), [F(_s, "positive")])
    case("erf", _nm, jt.math.erf, special.erf, [F(_s)])
    case("erfc", _nm, jt.math.erfc, special.erfc, [F(_s)])
    case("expm1", _nm, jt.math.expm1, np.expm1, [F(_s)])
case("erfc", "tail", jt.math.erfc, special.erfc, [fixed([3.0, 5.0, 8.0], "float64")],
     f32=False)
case("expm1", "tiny", jt.math.expm1, np.expm1, [fixed([1e-10, -3e-9, 2e-7], "float64")])

# ---------------------------------------------------------------------------
# Activations (composites)

_SELU_A, _SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _np_gelu(x):
    return 0.5 * x * (1 + special.erf(x / np.sqrt(2)))


def _np_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def _np_softplus(x):
    return np.logaddexp(0.0, x)


_ACT = {
    # name: (function, numpy expression, generator)
    "elu": (jt.nn.elu, lambda x: np.where(x < 0, np.expm1(np.minimum(x, 0)), x), "away"),
    "selu": (jt.nn.selu,
             lambda x: _SELU_S * np.where(x < 0, _SELU_A * np.expm1(np.minimum(x, 0)), x),
             "away"),
    "gelu": (jt.nn.gelu, _np_gelu, "real"),
    "gelu_tanh": (lambda x: jt.nn.gelu(x, approximate=True), _np_gelu_tanh, "real"),
    "softplus": (jt.nn.softplus, _np_softplus, "real"),
    "softsign": (jt.nn.softsign, lambda x: x / (1 + np.abs(x)), "away"),
    "silu": (jt.nn.silu, lambda x: x / (1 + np.exp(-x)), "real"),
    "swish": (jt.nn.swish, lambda x: x / (1 + np.exp(-x)), "real"),
    "leaky_relu": (jt.nn.leaky_relu, lambda x: np.where(x > 0, x, 0.2 * x), "away"),
    "log_sigmoid": (jt.math.log_sigmoid, lambda x: -np.logaddexp(0.0, -x), "real"),
}
for _op, (_fn, _ref, _g) in _ACT.items():
    for _s in [(), (7,), (2, 3), (0, 2)]:
        case(_op, _shape_name(_s), _fn, _ref, [F(_s, _g)])
_BIG = fixed([-800.0, -30.0, -1.5, 0.5, 40.0, 800.0], "float64")
for _op in ("elu", "selu", "softplus", "log_sigmoid", "silu", "gelu"):
    case(_op, "large_magnitudes", _ACT[_op][0], _ACT[_op][1], [_BIG])
case("silu", "beta", lambda x: jt.nn.silu(x, beta=0.5), lambda x: x / (1 + np.exp(-0.5 * x)),
     [F((2, 3))])
case("leaky_relu", "alpha", lambda x: jt.nn.leaky_relu(x, alpha=0.01),
     lambda x: np.where(x > 0, x, 0.01 * x), [F((2, 3), "away")])

# ---------------------------------------------------------------------------
# Normalization


def _np_l2n(axis, eps=1e-12):
    def ref(x):
        ax = None if axis is None else tuple(np.atleast_1d(axis))
        return x / np.sqrt(np.maximum(np.sum(x * x, axis=ax, keepdims=True), eps))

    return ref


for _s, _ax in [((5,), None), ((2, 3), None), ((2, 3), 1), ((2, 3), 0), ((2, 3, 2), [0, 2]),
                ((2, 3), -1)]:
    case("l2_normalize", f"{_shape_name(_s)}_axis{_ax}",
         lambda x, _a=_ax: jt.math.l2_normalize(x, axis=_a), _np_l2n(_ax), [F(_s)])


def _np_moments(axes, keepdims):
    def ref(x):
        ax = tuple(np.atleast_1d(axes))
        return [np.mean(x, axis=ax, keepdims=keepdims), np.var(x, axis=ax, keepdims=keepdims)]

    return ref


for _s, _ax, _kd in [((4, 3), [0], False), ((4, 3), [0, 1], False), ((2, 3, 4), [0, 1], True),
                     ((2, 3, 4), [-1], False), ((5,), 0, False)]:
    case("moments", f"{_shape_name(_s)}_axes{_ax}_keepdims{_kd}",
         lambda x, _a=_ax, _k=_kd: jt.nn.moments(x, _a, keepdims=_k), _np_moments(_ax, _kd),
         [F(_s)])

# ---------------------------------------------------------------------------
# Linear algebra primitives (registry names) and composites


def _sym(a):
    r = len(a.shape)
    return (a + jt.transpose(a, list(range(r - 2)) + [r - 1, r - 2])) * 0.5


def _np_sym(a):
    return (a + np.swapaxes(a, -1, -2)) * 0.5


_SQUARE = [(3, 3), (1, 1), (2, 3, 3), (2, 1, 2, 2)]
for _s in _SQUARE:
    _nm = _shape_name(_s)
    _wc = F(_s, "well_conditioned")
    case("matrix_inverse", _nm, jt.linalg.inv, np.linalg.inv, [_wc])
    case("matrix_determinant", _nm, jt.linalg.det, np.linalg.det, [_wc])
    case("log_abs_det", _nm, lambda a: jt.linalg.slogdet(a)[1],
         lambda a: np.log(np.abs(np.linalg.det(a))), [_wc])
    case("det_sign", _nm, lambda a: jt.linalg.slogdet(a)[0], lambda a: np.sign(np.linalg.det(a)),
         [_wc], grad="none")
    # the op reads the lower triangle: differentiate through a symmetric input
    case("cholesky", _nm, lambda a: jt.linalg.cholesky(_sym(a)),
         lambda a: np.linalg.cholesky(_np_sym(a)), [F(_s, "spd")])
    case("slogdet", _nm, jt.linalg.slogdet,
         lambda a: [np.sign(np.linalg.det(a)), np.log(np.abs(np.linalg.det(a)))], [_wc])
    case("logdet", _nm, lambda a: jt.linalg.logdet(_sym(a)),
         lambda a: np.log(np.linalg.det(_np_sym(a))), [F(_s, "spd")])

_NEG_DET = fixed([[0.2, 1.0], [1.1, 0.3]], "float64")
case("matrix_determinant", "negative", jt.linalg.det, np.linalg.det, [_NEG_DET])
case("slogdet", "negative_det", jt.linalg.slogdet,
     lambda a: [np.sign(np.linalg.det(a)), np.log(np.abs(np.linalg.det(a)))], [_NEG_DET])
case("det_sign", "negative", lambda a: jt.linalg.slogdet(a)[0], lambda a: np.float64(-1.0),
     [_NEG_DET], grad="none")
case("matrix_inverse", "adjoint", lambda a: jt.linalg.inv(a, adjoint=True),
     lambda a: np.linalg.inv(np.swapaxes(a, -1, -2)), [F((2, 3, 3), "well_conditioned")])

for _sa, _sb in [((3, 3), (3, 2)), ((3, 3), (3, 1)), ((2, 3, 3), (2, 3, 4)), ((1, 1), (1, 3))]:
    case("matrix_solve", _shape_name(_sa, _sb), jt.linalg.solve, np.linalg.solve,
         [F(_sa, "well_conditioned"), F(_sb)])
case("matrix_solve", "adjoint", lambda a, b: jt.linalg.solve(a, b, adjoint=True),
     lambda a, b: np.linalg.solve(np.swapaxes(a, -1, -2), b),
     [F((2, 3, 3), "well_conditioned"), F((2, 3, 2))])

for _s in [(3, 3), (2, 3, 4), (4, 2), (2, 2, 3, 3)]:
    case("trace", _shape_name(_s), jt.linalg.trace, lambda a: np.trace(a, axis1=-2, axis2=-1),
         [F(_s)])
    case("diag_part", _shape_name(_s), jt.linalg.diag_part,
         lambda a: np.diagonal(a, axis1=-2, axis2=-1), [F(_s)])
for _s in [(3,), (1,), (2, 4), (0,)]:
    case("diag", _shape_name(_s), jt.linalg.diag,
         lambda d: d[..., :, None] * np.eye(d.shape[-1]), [F(_s)])
case("linalg.matmul", "alias", jt.linalg.matmul, lambda a, b: a @ b, [F((2, 3)), F((3, 4))])


# ---------------------------------------------------------------------------
# image.resize: TF 2's half-pixel centres, written out per output pixel


def _np_taps(n, m):
    lo, hi, w = [], [], []
    for i in range(m):
        pos = (i + 0.5) * n / m - 0.5
        fl = np.floor(pos)
        lo.append(max(int(fl), 0))
        hi.append(min(int(np.ceil(pos)), n - 1))
        w.append(pos - fl)
    return np.array(lo), np.array(hi), np.array(w)


def _np_bilinear(size):
    def ref(x):
        single = x.ndim == 3
        x = (x[None] if single else x).astype(np.float64)
        (lh, hh, wh), (lw, hw, ww) = _np_taps(x.shape[1], size[0]), _np_taps(x.shape[2], size[1])
        y = x[:, lh] + (x[:, hh] - x[:, lh]) * wh[None, :, None, None]
        y = y[:, :, lw] + (y[:, :, hw] - y[:, :, lw]) * ww[None, None, :, None]
        return (y[0] if single else y).astype(np.float32)

    return ref


def _np_nearest(size):
    def ref(x):
        single = x.ndim == 3
        x = x[None] if single else x
        ih = [min(int(np.floor((i + 0.5) * x.shape[1] / size[0])), x.shape[1] - 1)
              for i in range(size[0])]
        iw = [min(int(np.floor((j + 0.5) * x.shape[2] / size[1])), x.shape[2] - 1)
              for j in range(size[1])]
        y = x[:, ih][:, :, iw]
        return y[0] if single else y

    return ref


for _s, _size in [((1, 4, 4, 2), (8, 8)), ((2, 4, 6, 1), (2, 3)), ((1, 3, 5, 2), (7, 4)),
                  ((4, 4, 3), (6, 2)), ((1, 2, 2, 1), (2, 2)), ((1, 1, 3, 1), (4, 3))]:
    _nm = f"{_shape_name(_s)}_to_{_size}"
    case("resize", f"bilinear_{_nm}", lambda x, _z=_size: jt.image.resize(x, _z),
         _np_bilinear(_size), [F(_s)])
    case("resize", f"nearest_{_nm}", lambda x, _z=_size: jt.image.resize(x, _z, "nearest"),
         _np_nearest(_size), [F(_s)])
# composites' cases are gradient-checked ones (the cpu suite compiles the forwards of the
# others and looks for the op's node): integer images and l2_normalize of zeros are in
# tests/ops/test_math_edges.py
