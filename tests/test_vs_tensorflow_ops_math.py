"""The math, nn, linalg and image ops against TensorFlow itself (values, dtypes, first and
second derivatives), run only where TensorFlow is installed; the default suite does not
need it. Each program is written once against the shared names (``m`` is either
``tensorflow`` or ``jittape``)."""

import numpy as np
import pytest

import jittape as jt

tf = pytest.importorskip("tensorflow")

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4)) * 2
POS = RNG.uniform(0.3, 3.0, (3, 4))
SQ = np.eye(3) + 0.3 * RNG.standard_normal((2, 3, 3))
_M = RNG.standard_normal((2, 3, 3))
SPD = _M @ np.swapaxes(_M, -1, -2) / 3 + np.eye(3)
RHS = RNG.standard_normal((2, 3, 2))
IMG = RNG.standard_normal((2, 5, 7, 3))


def _values(m, f, arrays, dtype, order):
    """f's outputs, the gradient of their weighted sum, and (order 2) the gradient of the
    sum of that gradient."""
    xs = [m.constant(a.astype(dtype)) for a in arrays]
    with m.GradientTape() as outer:
        outer.watch(xs)
        with m.GradientTape() as inner:
            inner.watch(xs)
            ys = f(m, *xs)
            ys = list(ys) if isinstance(ys, (tuple, list)) else [ys]
            fl = [y for y in ys if y.dtype.is_floating]
            s = fl[0] * 0.0
            for k, y in enumerate(fl):
                s = s + m.reduce_sum(y * (k + 1.5))
        gs = inner.gradient(s, xs)
        t = None
        for g in gs:
            if g is not None:
                t = m.reduce_sum(g * g) if t is None else t + m.reduce_sum(g * g)
    hs = outer.gradient(t, xs) if order == 2 and t is not None else []
    return ys, gs, hs


def _sym(m, a):
    return (a + m.linalg.matrix_transpose(a)) * 0.5 if m is tf else \
        (a + jt.transpose(a, [0, 2, 1])) * 0.5


PROGRAMS = {
    # name: (program, inputs, derivative order checked)
    "rsqrt": (lambda m, x: m.math.rsqrt(x), [POS], 2),
    "erf": (lambda m, x: m.math.erf(x), [X], 2),
    "erfc": (lambda m, x: m.math.erfc(x), [X], 2),
    "expm1": (lambda m, x: m.math.expm1(x), [X], 2),
    "elu": (lambda m, x: m.nn.elu(x), [X], 2),
    "selu": (lambda m, x: m.nn.selu(x), [X], 2),
    "gelu": (lambda m, x: m.nn.gelu(x), [X], 2),
    "gelu_tanh": (lambda m, x: m.nn.gelu(x, approximate=True), [X], 2),
    "softplus": (lambda m, x: m.nn.softplus(x), [X], 2),
    "softsign": (lambda m, x: m.nn.softsign(x), [X], 1),  # TF: no gradient of SoftsignGrad
    "silu": (lambda m, x: m.nn.silu(x), [X], 2),
    "swish_beta": (lambda m, x: m.nn.swish(x, beta=0.7), [X], 2),
    "leaky_relu": (lambda m, x: m.nn.leaky_relu(x), [X], 1),
    "log_sigmoid": (lambda m, x: m.math.log_sigmoid(x), [X], 2),
    "l2_normalize": (lambda m, x: m.nn.l2_normalize(x, axis=1), [X], 2),
    "l2_normalize_all": (lambda m, x: m.math.l2_normalize(x), [X], 2),
    # TF's variance holds the mean constant: its second derivative differs (see
    # jt.nn.moments), so first order only
    "moments": (lambda m, x: m.nn.moments(x, axes=[0]), [X], 1),
    "moments_keepdims": (lambda m, x: m.nn.moments(x, axes=[0, 1], keepdims=True), [X], 1),
    "inv": (lambda m, a: m.linalg.inv(a), [SQ], 2),
    "inv_adjoint": (lambda m, a: m.linalg.inv(a, adjoint=True), [SQ], 1),
    "det": (lambda m, a: m.linalg.det(a), [SQ], 2),
    "slogdet": (lambda m, a: tuple(m.linalg.slogdet(a)), [SQ], 2),
    "logdet": (lambda m, a: m.linalg.logdet(_sym(m, a)), [SPD], 1),
    "solve": (lambda m, a, b: m.linalg.solve(a, b), [SQ, RHS], 2),
    "solve_adjoint": (lambda m, a, b: m.linalg.solve(a, b, adjoint=True), [SQ, RHS], 1),
    "cholesky": (lambda m, a: m.linalg.cholesky(_sym(m, a)), [SPD], 2),
    "trace": (lambda m, a: m.linalg.trace(a), [X], 1),
    "diag": (lambda m, d: m.linalg.diag(d), [X], 1),
    "diag_part": (lambda m, a: m.linalg.diag_part(a), [X], 1),
    "diag_part_tall": (lambda m, a: m.linalg.diag_part(m.transpose(a)), [X], 1),
    "linalg_matmul": (lambda m, a, b: m.linalg.matmul(a, b, transpose_b=True), [X, X], 1),
}
for _size in [(10, 14), (3, 4), (5, 7), (2, 9), (1, 1), (8, 3)]:
    for _method in ["bilinear", "nearest"]:
        PROGRAMS[f"resize_{_method}_{_size[0]}x{_size[1]}"] = (
            lambda m, x, _s=_size, _me=_method: m.image.resize(x, _s, method=_me), [IMG], 1)
PROGRAMS["resize_hwc"] = (lambda m, x: m.image.resize(x[0], (9, 4)), [IMG], 1)


# TF's float64 results here are only float32-accurate (float32 constants: LeakyRelu's
# alpha attribute is a float; jittape's match numpy/scipy to 1e-12 in
# tests/ops/cases_math.py), and bilinear resizes compute in float32 (their gradients
# too): compared at float32's tolerance
TF_F32_ACCURATE = {"gelu", "gelu_tanh", "leaky_relu", "swish_beta"}


def _close(a, b, dtype, what):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{what}: shape {a.shape} vs TF {b.shape}"
    rtol, atol = (1e-9, 1e-10) if dtype == "float64" else (2e-4, 2e-5)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_same_values_dtypes_and_gradients_as_tf(name, dtype):
    f, arrays, order = PROGRAMS[name]
    want = _values(tf, f, arrays, dtype, order)
    got = _values(jt, f, arrays, dtype, order)
    for kind, gs, ws in zip(("value", "gradient", "second derivative"), got, want):
        assert len(gs) == len(ws), f"{kind}: {len(gs)} results, TF has {len(ws)}"
        for k, (g, w) in enumerate(zip(gs, ws)):
            assert (g is None) == (w is None), f"{kind} {k}: None where TF is not, or back"
            if g is None:
                continue
            assert g.dtype.name == w.dtype.name, f"{kind} {k}: {g.dtype.name} vs TF {w.dtype.name}"
            # bilinear resizes in float32 whatever the input, as TF does
            dt = "float32" if w.dtype.name == "float32" or name in TF_F32_ACCURATE \
                or name.startswith("resize") else dtype
            _close(g.numpy(), w.numpy(), dt, f"{name} {kind} {k}")


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float16"])
def test_resize_dtypes_as_tf(dtype):
    x = (np.abs(IMG) * 40).astype(dtype)
    for method in ["bilinear", "nearest"]:
        w = tf.image.resize(x, (4, 11), method=method)
        g = jt.image.resize(jt.constant(x), (4, 11), method=method)
        assert g.dtype.name == w.dtype.name, method
        np.testing.assert_allclose(g.numpy().astype(np.float64), w.numpy().astype(np.float64),
                                   rtol=2e-4, atol=1e-3, err_msg=method)


def test_errors_like_tf():
    with pytest.raises(tf.errors.InvalidArgumentError, match="must be square"):
        tf.linalg.inv(tf.zeros([2, 3]))
    with pytest.raises(jt.errors.InvalidArgumentError, match=r"matrix_inverse.*square.*\[2,3\]"):
        jt.linalg.inv(jt.zeros([2, 3]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="not invertible"):
        tf.linalg.inv(tf.zeros([2, 2]))
    with pytest.raises(jt.errors.InvalidArgumentError, match="not invertible"):
        jt.linalg.inv(jt.zeros([2, 2]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="incompatible"):
        tf.linalg.solve(tf.eye(3), tf.ones([2, 1]))
    with pytest.raises(jt.errors.InvalidArgumentError, match=r"matrix_solve.*incompatible"):
        jt.linalg.solve(jt.constant(np.eye(3, dtype=np.float32)), jt.ones([2, 1]))
    with pytest.raises(ValueError, match="3 or 4 dimensions"):
        tf.image.resize(tf.zeros([4, 5]), [2, 2])
    with pytest.raises(jt.errors.InvalidArgumentError, match=r"resize.*3 or 4 dimensions.*\[4, 5\]"):
        jt.image.resize(jt.zeros([4, 5]), [2, 2])
