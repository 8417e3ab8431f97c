"""The convolution layers against Keras 3 itself, run only where TensorFlow is installed
(the default suite does not need it): for each layer class and a few configurations, the
config (through JSON), the weights' names and shapes, the outputs and the gradients of
the inputs and of every weight for the same weights (a Keras ``.weights.h5`` file loaded
here), and a file written here loaded into Keras."""

import json

import numpy as np
import pytest
from tolerances import tol

import jittape as jt

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

T32 = tol("float32")
RNG = np.random.default_rng(3)
SEQ = RNG.standard_normal((2, 9, 4)).astype(np.float32)
IMG = RNG.standard_normal((2, 7, 6, 4)).astype(np.float32)
VOL = RNG.standard_normal((2, 5, 4, 5, 2)).astype(np.float32)


def close(got, want, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != Keras' {want.shape}"
    atol = max(T32.fwd_atol, T32.fwd_rtol * float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=T32.fwd_rtol, atol=atol, err_msg=what)


def plain(config):
    """A config as JSON has it (tuples become lists), without the layer's name."""
    config = json.loads(json.dumps(config))
    config.pop("name", None)
    return config


CF = dict(data_format="channels_first")
# (class name, arguments, input); the bias initializer is random, so that a bias that is
# added on the wrong axis shows
B = dict(bias_initializer="random_normal")
CASES = [
    ("Conv1D", dict(filters=3, kernel_size=3, **B), SEQ),
    ("Conv1D", dict(filters=2, kernel_size=3, padding="causal", dilation_rate=2,
                    activation="relu", **B), SEQ),
    ("Conv1D", dict(filters=4, kernel_size=2, strides=2, padding="same", groups=2), SEQ),
    ("Conv2D", dict(filters=3, kernel_size=(3, 2), **B), IMG),
    ("Conv2D", dict(filters=4, kernel_size=3, strides=2, padding="same", groups=2, **B), IMG),
    ("Conv2D", dict(filters=2, kernel_size=3, dilation_rate=(2, 1), padding="same"), IMG),
    ("Conv3D", dict(filters=3, kernel_size=2, strides=(1, 2, 2), padding="same", **B), VOL),
    ("Conv1DTranspose", dict(filters=3, kernel_size=3, strides=2, **B), SEQ),
    ("Conv1DTranspose", dict(filters=2, kernel_size=4, strides=3, padding="same",
                             output_padding=1), SEQ),
    ("Conv2DTranspose", dict(filters=3, kernel_size=3, strides=2, **B), IMG),
    ("Conv2DTranspose", dict(filters=2, kernel_size=(3, 2), strides=(2, 3), padding="same",
                             output_padding=(1, 2), **B), IMG),
    ("Conv2DTranspose", dict(filters=2, kernel_size=2, strides=3), IMG),  # a gap: max(k, s)
    ("Conv3DTranspose", dict(filters=2, kernel_size=2, strides=2, padding="same", **B), VOL),
    ("DepthwiseConv1D", dict(kernel_size=3, depth_multiplier=2, padding="same", **B), SEQ),
    ("DepthwiseConv2D", dict(kernel_size=3, depth_multiplier=2, strides=2, **B), IMG),
    ("DepthwiseConv2D", dict(kernel_size=2, strides=2, dilation_rate=2, padding="same"), IMG),
    ("SeparableConv1D", dict(filters=3, kernel_size=3, depth_multiplier=2, **B), SEQ),
    ("SeparableConv2D", dict(filters=3, kernel_size=2, strides=2, padding="same", **B), IMG),
    ("SeparableConv2D", dict(filters=2, kernel_size=3, dilation_rate=2, depth_multiplier=3),
     IMG),
]
# TF's CPU kernels do not take channels_first convolutions, so these compare ours in
# channels_first with Keras' in channels_last (the same weights), and the configs with a
# Keras layer made with channels_first
CF_CASES = [
    ("Conv1D", dict(filters=3, kernel_size=3, strides=2, **B), SEQ),
    ("Conv1D", dict(filters=2, kernel_size=2, padding="causal", **B), SEQ),
    ("Conv2D", dict(filters=4, kernel_size=3, padding="same", groups=2, **B), IMG),
    ("Conv3D", dict(filters=2, kernel_size=2, **B), VOL),
    ("Conv2DTranspose", dict(filters=2, kernel_size=3, strides=2, output_padding=1, **B), IMG),
    ("DepthwiseConv1D", dict(kernel_size=2, depth_multiplier=2, **B), SEQ),
    ("DepthwiseConv2D", dict(kernel_size=3, strides=2, padding="same", **B), IMG),
    ("SeparableConv2D", dict(filters=3, kernel_size=2, depth_multiplier=2, **B), IMG),
]


def _first(x):
    return np.ascontiguousarray(np.moveaxis(x, -1, 1))


def _pair(name, kwargs, x, tmp_path):
    """The Keras layer, built on ``x``, and ours with its weights (from Keras' file)."""
    theirs = getattr(keras.layers, name)(**kwargs)
    theirs(x)
    path = str(tmp_path / "theirs.weights.h5")
    keras.Sequential([keras.Input(x.shape[1:]), theirs]).save_weights(path)
    ours = getattr(jt.layers, name)(**kwargs)
    model = jt.Sequential([jt.Input(x.shape[1:]), ours])
    model.load_weights(path)
    return theirs, ours, model


@pytest.mark.parametrize("name,kwargs,x", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_layer_against_keras(name, kwargs, x, tmp_path):
    theirs, ours, _ = _pair(name, kwargs, x, tmp_path)
    assert plain(ours.get_config()) == plain(theirs.get_config())
    again = getattr(jt.layers, name).from_config(json.loads(json.dumps(theirs.get_config())))
    assert plain(again.get_config()) == plain(theirs.get_config())
    assert ours.name.rstrip("_0123456789") == theirs.name.rstrip("_0123456789")
    assert [(w.name, tuple(w.shape)) for w in ours.weights] == [
        (w.name, tuple(w.shape)) for w in theirs.weights]
    assert tuple(ours.compute_output_shape((None,) + x.shape[1:])) == tuple(
        theirs.compute_output_shape((None,) + x.shape[1:]))

    u = RNG.standard_normal(theirs.compute_output_shape(x.shape)).astype(np.float32)
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        want = theirs(xt)
        want_loss = tf.reduce_sum(want * u)
    want_grads = tape.gradient(want_loss, [xt, *theirs.trainable_weights])
    xj = jt.constant(x)
    with jt.GradientTape() as jtape:
        jtape.watch(xj)
        got = ours(xj)
        loss = jt.reduce_sum(got * u)
    got_grads = jtape.gradient(loss, [xj, *ours.trainable_weights])
    close(got, want.numpy(), name)
    for w, g, h in zip(["input"] + [w.name for w in ours.weights], got_grads, want_grads):
        close(g, h.numpy(), f"{name}: gradient of the {w}")


@pytest.mark.parametrize("name,kwargs,x", CF_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CF_CASES)])
def test_channels_first_against_keras_channels_last(name, kwargs, x, tmp_path):
    theirs, _, _ = _pair(name, kwargs, x, tmp_path)
    first = dict(kwargs, data_format="channels_first")
    ours = getattr(jt.layers, name)(**first)
    jt.Sequential([jt.Input(_first(x).shape[1:]), ours]).load_weights(
        str(tmp_path / "theirs.weights.h5"))
    assert plain(ours.get_config()) == plain(getattr(keras.layers, name)(**first).get_config())
    assert tuple(ours.compute_output_shape((None,) + _first(x).shape[1:])) == (
        None, *_first(np.zeros(theirs.compute_output_shape(x.shape))).shape[1:])
    u = RNG.standard_normal(theirs.compute_output_shape(x.shape)).astype(np.float32)
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        want_loss = tf.reduce_sum(theirs(xt) * u)
    want_grads = tape.gradient(want_loss, [xt, *theirs.trainable_weights])
    xj = jt.constant(_first(x))
    with jt.GradientTape() as jtape:
        jtape.watch(xj)
        got = ours(xj)
        loss = jt.reduce_sum(got * _first(u))
    got_grads = jtape.gradient(loss, [xj, *ours.trainable_weights])
    close(got, _first(theirs(x).numpy()), name)
    close(got_grads[0], _first(want_grads[0].numpy()), f"{name}: gradient of the input")
    for w, g, h in zip(ours.weights, got_grads[1:], want_grads[1:]):
        close(g, h.numpy(), f"{name}: gradient of the {w.name}")


@pytest.mark.parametrize("name,kwargs,x", [CASES[4], CASES[10], CASES[14], CASES[17]],
                         ids=lambda c: c if isinstance(c, str) else "")
def test_weights_file_written_here_loads_into_keras(name, kwargs, x, tmp_path):
    ours = getattr(jt.layers, name)(**kwargs)
    model = jt.Sequential([jt.Input(x.shape[1:]), ours])
    path = str(tmp_path / "ours.weights.h5")
    model.save_weights(path)
    theirs = getattr(keras.layers, name)(**kwargs)
    keras.Sequential([keras.Input(x.shape[1:]), theirs]).load_weights(path)
    for a, b in zip(ours.weights, theirs.weights):
        close(b.numpy(), a.numpy(), a.name)
    close(ours(x), theirs(x).numpy(), name)


def test_keras_config_of_a_model_rebuilds_here():
    """A functional model's layers from Keras' serialized records."""
    theirs = keras.Sequential([keras.Input((8, 8, 3)),
                               keras.layers.Conv2D(4, 3, padding="same", activation="relu"),
                               keras.layers.SeparableConv2D(2, 3, strides=2),
                               keras.layers.Conv2DTranspose(3, 2, strides=2)])
    for layer in theirs.layers:
        record = json.loads(json.dumps(keras.layers.serialize(layer)))
        ours = jt.layers.deserialize(record)
        assert type(ours).__name__ == type(layer).__name__
        assert plain(ours.get_config()) == plain(layer.get_config())
        assert [tuple(w.shape) for w in ours.weights] == [tuple(w.shape) for w in layer.weights]


def test_batch_normalization_after_a_convolution_against_keras(tmp_path):
    """BatchNormalization over the channels of NHWC maps (axis=-1) and of NCHW maps
    (axis=1, against Keras' NHWC: TF's CPU convolutions take no NCHW)."""
    theirs = keras.Sequential([keras.Input(IMG.shape[1:]), keras.layers.Conv2D(3, 3),
                               keras.layers.BatchNormalization(momentum=0.5)])
    path = str(tmp_path / "bn.weights.h5")
    theirs.save_weights(path)
    want = theirs(IMG, training=True).numpy()
    for axis, fmt, x, back in [(-1, "channels_last", IMG, lambda y: y),
                               (1, "channels_first", _first(IMG), _first)]:
        ours = jt.Sequential([jt.Input(x.shape[1:]), jt.layers.Conv2D(3, 3, data_format=fmt),
                              jt.layers.BatchNormalization(axis=axis, momentum=0.5)])
        ours.load_weights(path)
        close(ours(x, training=True), back(want), f"axis {axis}")
        for a, b in zip(ours.weights, theirs.weights):
            close(a, b.numpy(), f"axis {axis}: {a.name}")


def test_keras_archives_go_both_ways(tmp_path):
    """A ``.keras`` file of a convolutional model written here loads into Keras, and one
    Keras writes loads here: same predictions."""
    x = IMG[..., :3]

    def layers(m):
        return [m.Input((7, 6, 3)), m.layers.Conv2D(4, 3, padding="same", activation="relu"),
                m.layers.DepthwiseConv2D(2, depth_multiplier=2, bias_initializer="ones"),
                m.layers.SeparableConv2D(3, 2, strides=2),
                m.layers.Conv2DTranspose(2, 3, strides=2, output_padding=1),
                m.layers.Conv2D(2, 1, groups=2, data_format="channels_last"),
                m.layers.Flatten()]

    ours = jt.Sequential(layers(jt.keras))
    ours.save(str(tmp_path / "ours.keras"))
    close(keras.models.load_model(str(tmp_path / "ours.keras"))(x).numpy(), ours(x), "ours")
    theirs = keras.Sequential(layers(keras))
    theirs.save(str(tmp_path / "theirs.keras"))
    close(jt.keras.models.load_model(str(tmp_path / "theirs.keras"))(x), theirs(x).numpy(),
          "theirs")
