"""Backward graphs are cached by structure: a training loop traces the VJP rules once."""

import numpy as np

import jittape as jt
from jittape import autodiff


def _grad(x_arr, w_arr, b_arr):
    x, w, b = jt.constant(x_arr), jt.Variable(w_arr), jt.Variable(b_arr)
    with jt.GradientTape() as tape:
        loss = jt.reduce_sum(jt.tanh(x @ w + b) ** 2)
    gw, gb = tape.gradient(loss, [w, b])
    return gw.numpy(), gb.numpy()


def _reference(x, w, b):
    z = np.tanh(x @ w + b)
    gz = 2 * z * (1 - z**2)
    return x.T @ gz, gz.sum(0) if b.ndim == 1 else gz.sum(0, keepdims=True)


def test_same_structure_hits_the_cache_with_fresh_values():
    rng = np.random.default_rng(0)
    before = dict(autodiff.plan_stats)
    for step in range(5):
        x = rng.standard_normal((4, 3))
        w = rng.standard_normal((3, 2))
        b = rng.standard_normal(2)
        gw, gb = _grad(x, w, b)
        rw, rb = _reference(x, w, b)
        np.testing.assert_allclose(gw, rw, rtol=1e-10)
        np.testing.assert_allclose(gb, rb, rtol=1e-10)
    assert autodiff.plan_stats["hits"] - before["hits"] >= 4


def test_different_broadcast_of_an_input_is_a_different_graph():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3))
    w = rng.standard_normal((3, 2))
    for b in (rng.standard_normal(2), rng.standard_normal((1, 2)), rng.standard_normal((4, 2))):
        gw, gb = _grad(x, w, b)
        z = np.tanh(x @ w + b)
        gz = 2 * z * (1 - z**2)
        np.testing.assert_allclose(gw, x.T @ gz, rtol=1e-10)
        want = gz.sum(0).reshape(b.shape) if b.shape != gz.shape else gz
        np.testing.assert_allclose(gb, want, rtol=1e-10)


def test_custom_gradient_is_never_served_from_the_cache():
    calls = []

    @jt.custom_gradient
    def scaled(x, k):
        def grad(dy):
            calls.append(k)
            return dy * k, None

        return jt.identity(x), grad

    for k in (2.0, 3.0):
        x = jt.constant(1.5)
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = scaled(x, k)
        assert float(tape.gradient(y, x)) == k
    assert calls == [2.0, 3.0]


def test_cache_is_bounded():
    assert len(autodiff._PLANS) <= jt.config.cache_limits()["plans"]


def test_backward_graph_computes_only_what_sources_need():
    x = jt.constant(np.ones((32, 784), np.float32))
    w = jt.Variable(np.ones((784, 10), np.float32))
    c = jt.constant(np.ones(10, np.float32))
    with jt.GradientTape() as tape:
        loss = jt.reduce_mean(jt.square(jt.tanh(x @ w + jt.stop_gradient(c * 2.0))))
    g, feeds, computed, _ = autodiff.backward_graph(tape._nodes, [loss], [None], [w._id],
                                                     tape._values)
    ops = [n.op.name for n in g.nodes]
    # one matmul (for w); none for x's gradient, nothing behind stop_gradient
    assert ops.count("matmul") == 1, ops
    assert set(feeds) == set(g.inputs)
    used = {i for n in g.nodes for i in n.inputs}
    assert set(g.inputs) <= used


def test_python_literals_are_part_of_the_cached_structure():
    # x * 2.0 and x * 3.0 record the same ops and types; the literal decides the gradient
    for k in (2.0, 3.0, 2.0, 3.0):
        x = jt.constant(np.arange(3.0))
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = jt.reduce_sum(x * k)
        np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [k, k, k])
