"""jittape against TensorFlow itself, run only where TensorFlow is installed
(``pip install -e '.[tf]'``); the default suite does not need it.

Each program is written once against the shared TF/jittape names (``m`` is either
``tensorflow`` or ``jittape``) and must give the same values and gradients.
"""

import numpy as np
import pytest

import jittape as jt

tf = pytest.importorskip("tensorflow")

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((4, 2))
V = RNG.standard_normal(4)
TIES = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]])
LABELS = np.array([1, 0, 3])


def _grad(m, f, *arrays, order=1):
    """Value of f and its gradient (order 1) or the gradient of sum(grad) (order 2)."""
    xs = [m.constant(a) for a in arrays]
    if order == 1:
        with m.GradientTape() as tape:
            tape.watch(xs)
            y = f(m, *xs)
        return [y] + list(tape.gradient(y, xs))
    with m.GradientTape() as outer:
        outer.watch(xs)
        with m.GradientTape() as inner:
            inner.watch(xs)
            y = f(m, *xs)
        gs = inner.gradient(y, xs)
        s = m.add_n([m.reduce_sum(g) for g in gs]) if m is tf else _sum(gs)
    return [y] + list(outer.gradient(s, xs))


def _sum(gs):
    s = jt.reduce_sum(gs[0])
    for g in gs[1:]:
        s = s + jt.reduce_sum(g)
    return s


PROGRAMS = {
    "mlp": (lambda m, a, b: m.reduce_sum(m.tanh(m.matmul(a, b)) ** 2), (A, B)),
    "sigmoid_log1p": (lambda m, a: m.reduce_mean(m.math.log1p(m.sigmoid(a))), (A,)),
    "broadcast": (lambda m, a, v: m.reduce_sum(m.sin(a * v + v) / (1.0 + v * v)), (A, V)),
    "softmax_xent": (
        lambda m, a: m.reduce_mean(
            m.nn.sparse_softmax_cross_entropy_with_logits(labels=LABELS, logits=a)
        ),
        (A,),
    ),
    "log_softmax": (lambda m, a: m.reduce_sum(m.nn.log_softmax(a) * a), (A,)),
    "reduce_max_ties": (lambda m, t: m.reduce_sum(m.reduce_max(t, axis=1) * 3.0), (TIES,)),
    "reduce_min_ties": (lambda m, t: m.reduce_sum(m.reduce_min(t, axis=0)), (TIES,)),
    "maximum_tie": (lambda m, t: m.reduce_sum(m.maximum(t, 2.0) + m.minimum(t, 3.0)), (TIES,)),
    "relu_abs_at_zero": (
        lambda m, a: m.reduce_sum(m.nn.relu(a * 0.0) + m.abs(a * 0.0) + a), (A,)
    ),
    "clip_at_bounds": (lambda m, t: m.reduce_sum(m.clip_by_value(t, 2.0, 3.0) * t), (TIES,)),
    "pow": (lambda m, a, v: m.reduce_sum(m.pow(m.abs(a) + 0.5, v)), (A, V)),
    "slicing": (lambda m, a: m.reduce_sum(a[1:, ::2] * a[:-1, 1::2] + a[0, -1]), (A,)),
    "gather_repeat": (lambda m, a: m.reduce_sum(m.gather(a, [2, 0, 2]) ** 2), (A,)),
    "concat_stack": (
        lambda m, a: m.reduce_sum(m.concat([a, a * 2.0], axis=1) * m.stack([a, a], 0)[0, :, :1]),
        (A,),
    ),
    "transpose_reshape": (
        lambda m, a: m.reduce_sum(m.reshape(m.transpose(a), [2, 6]) ** 3), (A,)
    ),
    "where": (lambda m, a: m.reduce_sum(m.where(a > 0.0, a * a, m.exp(a))), (A,)),
    "norm": (lambda m, a: m.norm(a) + m.reduce_sum(m.norm(a, axis=1)), (A,)),
    "logsumexp": (lambda m, a: m.reduce_sum(m.reduce_logsumexp(a, axis=0)), (A,)),
    "expand_squeeze": (
        lambda m, a: m.reduce_sum(m.squeeze(m.expand_dims(a, 1) * 2.0, 1) * a), (A,)
    ),
    "sqrt_exp_log": (lambda m, a: m.reduce_sum(m.sqrt(m.exp(a)) + m.math.log(m.square(a))), (A,)),
    "clip_by_norm": (lambda m, a: m.reduce_sum(m.clip_by_norm(a, 1.0) * a), (A,)),
}


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_values_and_gradients_match_tensorflow(name, order):
    f, arrays = PROGRAMS[name]
    want = _grad(tf, f, *arrays, order=order)
    got = _grad(jt, f, *arrays, order=order)
    for w, g in zip(want, got):
        if w is None:
            assert g is None
            continue
        w = tf.convert_to_tensor(w).numpy()
        if g is None:
            # a path only through ops with a zero derivative (sign, comparisons): TF builds
            # zeros, jittape says "not connected" (DESIGN: VJPs never build zeros)
            np.testing.assert_array_equal(w, np.zeros_like(w))
            continue
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-9, atol=1e-12)


def test_clip_by_global_norm_matches_tensorflow():
    ts = [A, None, B]
    want, wn = tf.clip_by_global_norm([None if t is None else tf.constant(t) for t in ts], 1.5)
    got, gn = jt.clip_by_global_norm([None if t is None else jt.constant(t) for t in ts], 1.5)
    np.testing.assert_allclose(float(gn), float(wn), rtol=1e-12)
    for w, g in zip(want, got):
        assert (w is None) == (g is None)
        if w is not None:
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12)


def test_jacobians_match_tensorflow():
    for m in (tf, jt):
        x = m.constant(A)
        with m.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = m.tanh(x) * m.reduce_sum(x, axis=1, keepdims=True)
        if m is tf:
            jw, bw = tape.jacobian(y, x), tape.batch_jacobian(y, x)
        else:
            jg, bg = tape.jacobian(y, x), tape.batch_jacobian(y, x)
    np.testing.assert_allclose(jg.numpy(), jw.numpy(), rtol=1e-12)
    np.testing.assert_allclose(bg.numpy(), bw.numpy(), rtol=1e-12)


def test_integer_reduce_mean_and_empty_max_match_tensorflow():
    i = np.array([[-3, -2], [3, 2], [-4, 1]], np.int32)
    np.testing.assert_array_equal(
        jt.reduce_mean(jt.constant(i), 1).numpy(), tf.reduce_mean(tf.constant(i), 1).numpy()
    )
    e = np.zeros((0, 3))
    np.testing.assert_array_equal(
        jt.reduce_max(jt.constant(e), 0).numpy(), tf.reduce_max(tf.constant(e), 0).numpy()
    )
