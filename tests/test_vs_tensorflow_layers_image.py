"""The image models' layers and losses against Keras 3 itself, run only where TensorFlow
is installed (the default suite does not need it): each layer's config (through JSON, as
a saved model carries it), its values and input gradients on the same float32 arrays,
the ``.weights.h5`` of the layers with weights (PReLU, BatchNormalization with renorm),
and the losses' values and configs."""

import json

import numpy as np
import pytest
from tolerances import tol

import jittape as jt

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

T32 = tol("float32")
RNG = np.random.default_rng(1)
IMG = RNG.standard_normal((2, 4, 6, 3)).astype(np.float32)
SEQ = IMG[:, 0]
VOL = IMG[..., None][:, :, :4]


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


# (class name, arguments, input): every layer here is deterministic in inference
CASES = [
    ("ZeroPadding1D", dict(padding=(2, 1)), SEQ),
    ("ZeroPadding2D", dict(padding=((1, 2), (0, 1))), IMG),
    ("ZeroPadding2D", dict(padding=1, data_format="channels_first"), IMG),
    ("ZeroPadding3D", dict(padding=(1, 0, 2)), VOL),
    ("Cropping1D", dict(cropping=(1, 2)), SEQ),
    ("Cropping2D", dict(cropping=((1, 0), (2, 1))), IMG),
    ("Cropping2D", dict(cropping=1, data_format="channels_first"), IMG),
    ("Cropping3D", dict(cropping=((1, 0), (1, 1), (0, 1))), VOL),
    ("UpSampling1D", dict(size=3), SEQ),
    ("UpSampling2D", dict(size=(2, 3)), IMG),
    ("UpSampling2D", dict(size=(2, 3), interpolation="bilinear"), IMG),
    ("UpSampling2D", dict(interpolation="bilinear", data_format="channels_first"), IMG),
    ("UpSampling3D", dict(size=(1, 2, 2)), VOL),
    ("Permute", dict(dims=(3, 1, 2)), IMG),
    ("RepeatVector", dict(n=3), IMG[:, 0, 0]),
    ("Flatten", dict(data_format="channels_first"), IMG),
    ("LeakyReLU", dict(), IMG),
    ("ReLU", dict(max_value=1.0, negative_slope=0.1, threshold=0.5), IMG),
    ("ReLU", dict(max_value=6.0), IMG * 4),
    ("ELU", dict(alpha=0.7), IMG),
    ("Softmax", dict(axis=1), IMG),
    ("Softmax", dict(axis=[1, 2]), IMG),
    ("SpatialDropout2D", dict(rate=0.3, data_format="channels_first"), IMG),
    ("GaussianNoise", dict(stddev=0.2, seed=1), IMG),
    ("GaussianDropout", dict(rate=0.2), IMG),
    ("AlphaDropout", dict(rate=0.2, noise_shape=(None, 1, 1, 3)), IMG),
    ("ActivityRegularization", dict(l1=0.1, l2=0.2), IMG),
]


@pytest.mark.parametrize("name,kwargs,x", CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                       enumerate(CASES)])
def test_layer_against_keras(name, kwargs, x):
    ours, theirs = getattr(jt.layers, name)(**kwargs), getattr(keras.layers, name)(**kwargs)
    assert plain(ours.get_config()) == plain(theirs.get_config())
    again = getattr(jt.layers, name).from_config(json.loads(json.dumps(theirs.get_config())))
    assert plain(again.get_config()) == plain(theirs.get_config())
    assert ours.name.rstrip("_0123456789") == theirs.name.rstrip("_0123456789")
    w = RNG.standard_normal(theirs.compute_output_shape(x.shape)).astype(np.float32)
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        want = theirs(xt)
        want_loss = tf.reduce_sum(want * w)
    xj = jt.constant(x)
    with jt.GradientTape() as jtape:
        jtape.watch(xj)
        got = ours(xj)
        loss = jt.reduce_sum(got * w)
    close(got, want.numpy(), name)
    close(jtape.gradient(loss, xj), tape.gradient(want_loss, xt).numpy(), f"{name} gradient")
    assert tuple(ours.compute_output_shape((None,) + x.shape[1:])) == tuple(
        theirs.compute_output_shape((None,) + x.shape[1:]))
    if name == "ActivityRegularization":
        close(ours.losses[0], theirs.losses[0].numpy(), "activity penalty")


def test_softmax_mask_against_keras():
    logits = IMG[0, 0]
    mask = np.array([[True, False, True]] * 5 + [[False] * 3])[:6]
    close(jt.layers.Softmax()(logits, mask=mask), keras.layers.Softmax()(logits, mask=mask))


def test_prelu_weights_and_gradients_against_keras(tmp_path):
    theirs = keras.layers.PReLU(alpha_initializer=keras.initializers.Constant(0.25),
                                shared_axes=[1, 2])
    theirs(IMG)
    ours = jt.layers.PReLU(shared_axes=[1, 2])
    _load_keras_weights(theirs, ours, IMG, tmp_path)
    close(ours.alpha, theirs.alpha.numpy())
    with tf.GradientTape() as tape:
        want = tf.reduce_sum(theirs(IMG) ** 2)
    with jt.GradientTape() as jtape:
        got = jt.reduce_sum(ours(IMG) ** 2)
    close(got, want.numpy())
    close(jtape.gradient(got, ours.alpha), tape.gradient(want, theirs.alpha).numpy())


@pytest.mark.parametrize("axis,x", [(-1, IMG), (1, np.transpose(IMG, (0, 3, 1, 2))),
                                    (-1, VOL[..., 0])])
def test_batch_renormalization_against_keras(tmp_path, axis, x):
    kw = dict(axis=axis, renorm=True, renorm_clipping={"rmax": 1.4, "rmin": 0.8, "dmax": 0.3},
              renorm_momentum=0.7, momentum=0.9)
    ours, theirs = jt.layers.BatchNormalization(**kw), keras.layers.BatchNormalization(**kw)
    assert plain(ours.get_config()) == plain(theirs.get_config())
    w = RNG.standard_normal(x.shape).astype(np.float32)  # not sum(y^2): its gradient cancels
    for step in range(3):
        batch = x * (1 + step) + step
        xt = tf.constant(batch)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            want_loss = tf.reduce_sum(theirs(xt, training=True) * w)
        xj = jt.constant(batch)
        with jt.GradientTape() as jtape:
            jtape.watch(xj)
            loss = jt.reduce_sum(ours(xj, training=True) * w)
        close(loss, want_loss.numpy(), f"step {step}")
        close(jtape.gradient(loss, xj), tape.gradient(want_loss, xt).numpy(), "gradient")
    for a, b in zip(ours.weights, theirs.weights):
        assert a.name == b.name
        close(a, b.numpy(), a.name)
    close(ours(x), theirs(x, training=False).numpy(), "inference")
    again = jt.layers.BatchNormalization(**kw)
    _load_keras_weights(theirs, again, x, tmp_path)
    close(again(x), theirs(x, training=False).numpy(), "loaded")


def _load_keras_weights(theirs, ours, x, tmp_path):
    """Keras' ``.weights.h5`` of a model holding ``theirs``, loaded into one of ``ours``."""
    path = str(tmp_path / "layer.weights.h5")
    keras.Sequential([keras.Input(x.shape[1:]), theirs]).save_weights(path)
    model = jt.Sequential([jt.Input(x.shape[1:]), ours])
    model.load_weights(path)


Y_TRUE = (RNG.random((2, 4, 4, 1)) > 0.5).astype(np.float32)
Y_PRED = RNG.random((2, 4, 4, 1)).astype(np.float32)
EMB = RNG.standard_normal((6, 4)).astype(np.float32)
EMB /= np.linalg.norm(EMB, axis=1, keepdims=True)
IDS = np.array([0, 1, 0, 1, 2, 2])
PROBS = keras.ops.softmax(RNG.standard_normal((6, 3)).astype(np.float32)).numpy()

LOSSES = [
    ("Dice", dict(), Y_TRUE, Y_PRED),
    ("Dice", dict(axis=(1, 2, 3), reduction="sum"), Y_TRUE, Y_PRED),
    ("Tversky", dict(alpha=0.3, beta=0.7, axis=(1, 2)), Y_TRUE, Y_PRED),
    ("Circle", dict(), IDS, EMB),
    ("Circle", dict(gamma=4.0, margin=0.25, remove_diagonal=False, reduction=None), IDS, EMB),
    ("CategoricalGeneralizedCrossEntropy", dict(q=0.7), np.array([0, 2, 1, 1, 0, 2]), PROBS),
]


@pytest.mark.parametrize("name,kwargs,y,p", LOSSES, ids=[f"{c[0]}-{i}" for i, c in
                                                        enumerate(LOSSES)])
def test_loss_against_keras(name, kwargs, y, p):
    ours, theirs = getattr(jt.losses, name)(**kwargs), getattr(keras.losses, name)(**kwargs)
    mine = plain(ours.get_config())
    assert mine.pop("dtype") is None  # jittape's losses write their dtype; Keras 3.15 does not
    assert mine == plain(theirs.get_config())
    pt = tf.constant(p)
    with tf.GradientTape() as tape:
        tape.watch(pt)
        want = theirs(y, pt)
        want_sum = tf.reduce_sum(want)
    pj = jt.constant(p)
    with jt.GradientTape() as jtape:
        jtape.watch(pj)
        got = ours(y, pj)
        got_sum = jt.reduce_sum(got)
    close(got, want.numpy(), name)
    close(jtape.gradient(got_sum, pj), tape.gradient(want_sum, pt).numpy(), f"{name} gradient")
