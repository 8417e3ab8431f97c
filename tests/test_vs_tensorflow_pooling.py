"""Pooling against TensorFlow itself (skipped when TF is not installed): ``jt.nn.max_pool``,
``avg_pool`` and ``pool`` on random inputs and geometries, forward and gradient (ties
and NaN included for max), and the Keras pooling layers against Keras'."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

import jittape as jt  # noqa: E402

CONFIGS = [
    # (spatial shape, ksize, strides, padding)
    ((7,), 3, 2, "VALID"), ((6,), 2, 1, "SAME"),
    ((5, 6), 3, 2, "SAME"), ((4, 4), 2, 2, "VALID"), ((5, 5), (3, 2), (1, 2), "SAME"),
    ((3, 4, 3), 2, 1, "SAME"), ((4, 3, 5), (2, 1, 3), 2, "VALID"),
]


def _tf_and_jt(fn_tf, fn_jt, x):
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        yt = fn_tf(xt)
    u = np.random.default_rng(1).normal(size=yt.shape).astype(x.dtype)
    gt = tape.gradient(yt, xt, output_gradients=tf.constant(u))
    xj = jt.constant(x)
    with jt.GradientTape() as tape:
        tape.watch(xj)
        yj = fn_jt(xj)
    gj = tape.gradient(yj, xj, output_gradients=jt.constant(u))
    return (yt.numpy(), gt.numpy()), (yj.numpy(), gj.numpy())


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("spatial, k, s, padding", CONFIGS)
def test_random_inputs_match_tensorflow(kind, spatial, k, s, padding):
    rng = np.random.default_rng(0)
    # integers: ties within windows (max routes each to the first, as TF)
    x = rng.integers(-3, 4, size=(2, *spatial, 3)).astype(np.float32)
    if kind == "max" and len(spatial) == 3:
        # TF's MaxPool3D differs from its 1-d and 2-d max pooling: a NaN wins its window,
        # and the gradient goes to every tied maximum; jittape keeps the 1-d/2-d rules
        x = rng.permutation(x.size).reshape(x.shape).astype(np.float32)
    elif kind == "max":
        x.ravel()[rng.choice(x.size, 4, replace=False)] = np.nan
    # TF's generic max_pool leaves data_format None, which MaxPool3D's gradient cannot read
    f_tf = getattr(tf.nn, f"{kind}_pool{len(spatial)}d")
    f_jt = getattr(jt.nn, f"{kind}_pool{len(spatial)}d")
    (yt, gt), (yj, gj) = _tf_and_jt(lambda t: f_tf(t, k, s, padding),
                                    lambda t: f_jt(t, k, s, padding), x)
    np.testing.assert_allclose(yj, yt, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gj, gt, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["MAX", "AVG"])
def test_dilated_pool_matches_tensorflow(kind):
    x = np.random.default_rng(3).normal(size=(2, 7, 6, 2)).astype(np.float32)
    (yt, gt), (yj, gj) = _tf_and_jt(
        lambda t: tf.nn.pool(t, [2, 3], kind, padding="VALID", dilations=[2, 2]),
        lambda t: jt.nn.pool(t, [2, 3], kind, padding="VALID", dilations=[2, 2]), x)
    np.testing.assert_allclose(yj, yt, rtol=1e-6)
    np.testing.assert_allclose(gj, gt, rtol=1e-5, atol=1e-6)


def test_explicit_padding_matches_tensorflow():
    x = np.random.default_rng(4).normal(size=(1, 5, 4, 2)).astype(np.float32)
    pads = [[0, 0], [1, 2], [0, 1], [0, 0]]
    (yt, gt), (yj, gj) = _tf_and_jt(lambda t: tf.nn.max_pool2d(t, 3, 2, pads),
                                    lambda t: jt.nn.max_pool2d(t, 3, 2, pads), x)
    np.testing.assert_array_equal(yj, yt)
    np.testing.assert_array_equal(gj, gt)


@pytest.mark.parametrize("name, kwargs, shape", [
    ("MaxPooling1D", {"pool_size": 3, "strides": 2, "padding": "same"}, (2, 7, 3)),
    ("AveragePooling2D", {"pool_size": (2, 3), "padding": "same"}, (2, 5, 5, 2)),
    ("AveragePooling2D", {"pool_size": 2, "data_format": "channels_first"}, (2, 3, 4, 4)),
    ("MaxPooling3D", {"pool_size": 2, "strides": 1}, (1, 3, 3, 3, 2)),
    ("GlobalMaxPooling2D", {"keepdims": True}, (2, 3, 4, 2)),
    ("GlobalAveragePooling3D", {"data_format": "channels_first"}, (2, 2, 3, 3, 3)),
    ("GlobalAveragePooling1D", {}, (2, 5, 3)),
])
def test_layers_match_keras(name, kwargs, shape):
    x = np.random.default_rng(5).normal(size=shape).astype(np.float32)
    theirs = getattr(keras.layers, name)(**kwargs)
    ours = getattr(jt.layers, name)(**kwargs)
    np.testing.assert_allclose(ours(x).numpy(), np.asarray(theirs(x)), rtol=1e-6)
    want = {k: v for k, v in theirs.get_config().items() if k not in ("name", "dtype")}
    got = {k: v for k, v in ours.get_config().items() if k not in ("name", "dtype")}
    assert got == want
    assert tuple(ours.compute_output_shape((None, *shape[1:]))) == \
        tuple(theirs.compute_output_shape((None, *shape[1:])))


def test_keras_config_loads():
    config = keras.layers.serialize(keras.layers.MaxPooling2D((3, 3), strides=1,
                                                              padding="same"))
    layer = jt.layers.deserialize(config)
    assert isinstance(layer, jt.layers.MaxPooling2D)
    assert (layer.pool_size, layer.strides, layer.padding) == ((3, 3), (1, 1), "same")
