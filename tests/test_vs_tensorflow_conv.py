"""The convolution ops against TensorFlow's (values and gradients), when TF is installed."""

import numpy as np
import pytest

import jittape as jt

tf = pytest.importorskip("tensorflow")

RNG = np.random.default_rng(7)

CASES_2D = [  # (input shape, filter shape, strides, padding, dilations)
    ((2, 7, 6, 3), (3, 2, 3, 4), 2, "SAME", 1),
    ((2, 8, 8, 3), (3, 3, 3, 5), 1, "VALID", 1),
    ((1, 9, 9, 2), (3, 3, 2, 2), 1, "SAME", 2),
    ((2, 6, 5, 4), (2, 2, 4, 3), (1, 2), "VALID", 1),
    ((2, 6, 6, 3), (3, 3, 3, 2), 1, [[0, 0], [1, 2], [0, 1], [0, 0]], 1),
    ((2, 10, 10, 1), (5, 5, 1, 4), 3, "SAME", 1),
]


def _grads(fn, *args):
    args = [tf.constant(a) for a in args]
    with tf.GradientTape() as t:
        t.watch(args)
        y = fn(*args)
        loss = tf.reduce_sum(y * tf.cos(y))
    return y.numpy(), [g.numpy() for g in t.gradient(loss, args)]


def _jt_grads(fn, *args):
    args = [jt.constant(a) for a in args]
    with jt.GradientTape() as t:
        for a in args:
            t.watch(a)
        y = fn(*args)
        loss = jt.reduce_sum(y * jt.cos(y))
    return y.numpy(), [g.numpy() for g in t.gradient(loss, args)]


@pytest.mark.parametrize("xs,ws,s,p,d", CASES_2D)
def test_conv2d_matches_tf(xs, ws, s, p, d):
    x, w = RNG.normal(size=xs), RNG.normal(size=ws)
    # tf.nn.convolution: TF's Conv2D kernels have no dilated gradient on the CPU
    tf_conv = tf.nn.convolution if d != 1 else tf.nn.conv2d
    y0, g0 = _grads(lambda a, b: tf_conv(a, b, s, p, dilations=d), x, w)
    y1, g1 = _jt_grads(lambda a, b: jt.nn.conv2d(a, b, s, p, dilations=d), x, w)
    np.testing.assert_allclose(y1, y0, rtol=1e-9, atol=1e-9)
    for a, b in zip(g1, g0):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("xs,ws,s,p", [((2, 9, 3), (3, 3, 4), 2, "SAME"),
                                       ((2, 9, 3), (4, 3, 2), 1, "VALID")])
def test_conv1d_matches_tf(xs, ws, s, p):
    x, w = RNG.normal(size=xs), RNG.normal(size=ws)
    y0, g0 = _grads(lambda a, b: tf.nn.conv1d(a, b, s, p), x, w)
    y1, g1 = _jt_grads(lambda a, b: jt.nn.conv1d(a, b, s, p), x, w)
    np.testing.assert_allclose(y1, y0, rtol=1e-9, atol=1e-9)
    for a, b in zip(g1, g0):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def test_conv3d_and_nchw_match_tf():
    x, w = RNG.normal(size=(1, 4, 5, 5, 2)), RNG.normal(size=(2, 3, 2, 2, 3))
    y0 = tf.nn.conv3d(x, w, [1, 1, 2, 1, 1], "SAME").numpy()
    np.testing.assert_allclose(jt.nn.conv3d(x, w, (1, 2, 1), "SAME").numpy(), y0, atol=1e-9)
    x2, w2 = RNG.normal(size=(2, 3, 7, 6)), RNG.normal(size=(3, 3, 3, 4))
    ref = tf.transpose(tf.nn.conv2d(tf.transpose(x2, (0, 2, 3, 1)), w2, 2, "SAME"), (0, 3, 1, 2))
    got = jt.nn.conv2d(x2, w2, 2, "SAME", data_format="NCHW")
    np.testing.assert_allclose(got.numpy(), ref.numpy(), atol=1e-9)


@pytest.mark.parametrize("out,s,p", [((2, 8, 8, 3), 2, "SAME"), ((2, 9, 9, 3), 2, "SAME"),
                                     ((2, 9, 9, 3), 2, "VALID"), ((2, 7, 7, 3), 1, "VALID")])
def test_conv2d_transpose_matches_tf(out, s, p):
    w = RNG.normal(size=(3, 3, 3, 4))
    y_shape = tf.nn.conv2d(np.zeros(out), w, s, p).shape
    x = RNG.normal(size=y_shape)
    y0, g0 = _grads(lambda a, b: tf.nn.conv2d_transpose(a, b, out, s, p), x, w)
    y1, g1 = _jt_grads(lambda a, b: jt.nn.conv2d_transpose(a, b, out, s, p), x, w)
    np.testing.assert_allclose(y1, y0, rtol=1e-9, atol=1e-9)
    for a, b in zip(g1, g0):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def test_depthwise_and_separable_match_tf():
    x = RNG.normal(size=(2, 7, 7, 3))
    dw, pw = RNG.normal(size=(3, 3, 3, 2)), RNG.normal(size=(1, 1, 6, 4))
    y0, g0 = _grads(lambda a, b: tf.nn.depthwise_conv2d(a, b, [1, 2, 2, 1], "SAME"), x, dw)
    y1, g1 = _jt_grads(lambda a, b: jt.nn.depthwise_conv2d(a, b, [1, 2, 2, 1], "SAME"), x, dw)
    np.testing.assert_allclose(y1, y0, atol=1e-9)
    for a, b in zip(g1, g0):
        np.testing.assert_allclose(a, b, atol=1e-9)
    y0 = tf.nn.separable_conv2d(x, dw, pw, [1, 1, 1, 1], "VALID").numpy()
    y1 = jt.nn.separable_conv2d(x, dw, pw, [1, 1, 1, 1], "VALID").numpy()
    np.testing.assert_allclose(y1, y0, atol=1e-9)


def test_errors_and_empty_results_as_tf():
    x, w = np.zeros((1, 4, 4, 3)), np.zeros((5, 5, 3, 2))
    # a window larger than the input: an empty result, not an error
    assert jt.nn.conv2d(x, w, 1, "VALID").shape == tuple(tf.nn.conv2d(x, w, 1, "VALID").shape)
    with pytest.raises(tf.errors.InvalidArgumentError, match="evenly divisible"):
        tf.nn.conv2d(x, np.zeros((1, 1, 2, 2)), 1, "VALID")
    with pytest.raises(jt.errors.InvalidArgumentError, match="evenly divisible"):
        jt.nn.conv2d(x, np.zeros((1, 1, 2, 2)), 1, "VALID")
