"""Numerical edge cases where jittape follows TF's formulation of a composite op."""

import numpy as np

import jittape as jt


def test_sigmoid_xent_gradient_at_zero_logit_is_sigmoid_minus_label():
    z = jt.constant(np.zeros(2, np.float32))
    y = np.array([0.0, 1.0], np.float32)
    with jt.GradientTape() as t:
        t.watch(z)
        loss = jt.reduce_sum(jt.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=z))
    np.testing.assert_allclose(t.gradient(loss, z).numpy(), [0.5, -0.5])
    np.testing.assert_allclose(loss.numpy(), 2 * np.log(2.0), rtol=1e-6)


def test_log_softmax_keeps_small_values_next_to_a_large_max():
    x = np.array([[300.0, 288.8, 0.0]], np.float32)
    got = jt.nn.log_softmax(jt.constant(x)).numpy()
    x64 = x.astype(np.float64)
    want = (x64 - x64.max()) - np.log(np.exp(x64 - x64.max()).sum())
    assert got[0, 0] < 0  # -1.37e-5, not rounded to 0
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)  # float32: 1 + 1.4e-5


def test_clip_by_norm_gradient_at_zero_is_finite():
    x = jt.constant(np.zeros((2, 3), np.float32))
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    with jt.GradientTape() as t:
        t.watch(x)
        s = jt.reduce_sum(jt.clip_by_norm(x, 1.0) * w)
    np.testing.assert_allclose(t.gradient(s, x).numpy(), w)


def test_where_forward_is_np_where_bit_for_bit():
    """The where op's forward selects on the bits (branch-free) for large arrays: the
    same bits as np.where, NaN payloads, -0 and broadcasting included."""
    from jittape.ops.elementwise import _where_fwd

    rng = np.random.default_rng(0)
    for dt in (np.float32, np.float64, np.int32, np.int64):
        for cs, xs, ys in [((100, 100), (100, 100), (100, 100)), ((100, 1), (1, 100), ()),
                           ((), (64, 64), (64, 64)), ((64, 64), (64,), (64, 1))]:
            c = np.asarray(rng.random(cs) > 0.5)
            x = (rng.standard_normal(xs) * 10).astype(dt)
            y = (rng.standard_normal(ys) * 10).astype(dt)
            a, b = np.where(c, x, y), _where_fwd(c, x, y)
            assert a.shape == b.shape and a.dtype == b.dtype
            assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), (dt, cs, xs, ys)
    x = np.array([np.nan, -0.0, np.inf] * 2000, np.float32)
    c = np.tile([True, True, False], 2000)
    y = np.full(6000, -np.inf, np.float32)
    assert np.array_equal(np.where(c, x, y).view(np.uint32), _where_fwd(c, x, y).view(np.uint32))
