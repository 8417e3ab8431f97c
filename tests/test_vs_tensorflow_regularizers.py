"""jt.regularizers, jt.constraints, layer losses and configs against tf.keras (Keras 3), run
only where TensorFlow is installed (``pip install -e '.[tf]'``); the default suite does not
need it.

Values: the same float32 inputs and weights on both sides. Configs: Keras' ``get_config()``
of a layer equals jittape's for the same arguments, Keras' configs build jittape layers
(and jittape's build Keras layers) that give the same config back and compute the same
with the same weights.
"""

import numpy as np
import pytest
from tolerances import tol

import jittape as jt

tf = pytest.importorskip("tensorflow")
keras = tf.keras

T32 = tol("float32")
F32 = np.float32
X = np.random.default_rng(0).standard_normal((5, 4)).astype(F32)
W = np.random.default_rng(1).standard_normal((4, 3)).astype(F32) * 1.5
B = np.random.default_rng(2).standard_normal(3).astype(F32)


@pytest.fixture(autouse=True)
def _unseed():
    yield
    jt.random.set_seed(None)


def close(got, want, t=T32):
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    want = np.asarray(want.numpy() if hasattr(want, "numpy") else want)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=t.fwd_rtol, atol=t.fwd_atol)


# factors exactly representable in float32: Keras keeps L1's and the orthogonal factor as
# float32 tensors, so its config of L1(0.01) reads 0.009999999776482582
REGULARIZERS = {
    "L1": ({"l1": 0.25}, "L1"), "L2": ({"l2": 0.5}, "L2"),
    "L1L2": ({"l1": 0.125, "l2": 0.5}, "L1L2"),
    "orthogonal_rows": ({"factor": 0.5, "mode": "rows"}, "OrthogonalRegularizer"),
    "orthogonal_columns": ({"factor": 0.5, "mode": "columns"}, "OrthogonalRegularizer"),
}


@pytest.mark.parametrize("name", sorted(REGULARIZERS))
def test_regularizer_values_and_records(name):
    config, cls = REGULARIZERS[name]
    ours = getattr(jt.regularizers, cls)(**config)
    theirs = getattr(keras.regularizers, cls)(**config)
    close(ours(jt.constant(W)), theirs(tf.constant(W)))
    assert jt.regularizers.serialize(ours) == keras.regularizers.serialize(theirs)


CONSTRAINTS = {
    "MaxNorm": {"max_value": 2.0, "axis": 0}, "MaxNorm_axes": {"max_value": 3, "axis": [0, 1]},
    "NonNeg": {}, "UnitNorm": {"axis": 1},
    "MinMaxNorm": {"min_value": 2.5, "max_value": 3.0, "rate": 0.5, "axis": 0},
}


@pytest.mark.parametrize("name", sorted(CONSTRAINTS))
def test_constraint_values_and_records(name):
    cls, config = name.split("_")[0], CONSTRAINTS[name]
    ours = getattr(jt.constraints, cls)(**config)
    theirs = getattr(keras.constraints, cls)(**config)
    close(ours(jt.constant(W)), theirs(tf.constant(W)))
    assert jt.constraints.serialize(ours) == keras.constraints.serialize(theirs)


def _dense_pair(**kw):
    ours = jt.layers.Dense(3, **kw)
    theirs = keras.layers.Dense(3, **kw)
    ours(X)
    theirs(X)
    ours.set_weights([W, B])
    theirs.set_weights([W, B])
    return ours, theirs


REG_ARGS = {
    "kernel_regularizer": "l2", "bias_regularizer": "l1",
    "activity_regularizer": "l2",
}


def test_dense_losses_and_their_gradients():
    ours, theirs = _dense_pair(activation="tanh", **REG_ARGS)
    with jt.GradientTape() as tape:
        loss = jt.reduce_mean(jt.square(ours(X))) + jt.add_n(ours.losses)
    g_ours = tape.gradient(loss, ours.trainable_variables)
    with tf.GradientTape() as tape:
        want = tf.reduce_mean(tf.square(theirs(X))) + tf.add_n(theirs.losses)
    g_theirs = tape.gradient(want, theirs.trainable_variables)
    assert len(ours.losses) == len(theirs.losses) == 3
    for a, b in zip(ours.losses, theirs.losses):
        close(a, b)
    close(loss, want)
    for a, b in zip(g_ours, g_theirs):
        close(a, b)
    ours.trainable = theirs.trainable = False
    assert len(ours.losses) == len(theirs.losses) == 1
    close(ours.losses[0], theirs.losses[0])


def test_sequential_losses_inside_function_match_keras():
    ours = jt.Sequential([jt.layers.Dense(3, **REG_ARGS), jt.layers.BatchNormalization(
        gamma_regularizer="l2"), jt.layers.Dense(2, kernel_regularizer="l1")])
    theirs = keras.Sequential([keras.layers.Dense(3, **REG_ARGS), keras.layers.BatchNormalization(
        gamma_regularizer="l2"), keras.layers.Dense(2, kernel_regularizer="l1")])
    ours(X)
    theirs(X)
    theirs.set_weights(ours.get_weights())

    @jt.function
    def penalties(x):
        ours(x, training=True)
        return jt.add_n(ours.losses)

    theirs(X, training=True)
    close(penalties(jt.constant(X)), tf.add_n(theirs.losses))


# ---------------------------------------------------------------------------
# configs


def _strip(config):
    """A config without the layer's name (automatic names differ between the libraries)."""
    return {k: v for k, v in config.items() if k != "name"}


LAYERS = {
    "dense": ("Dense", dict(units=3, activation="relu", kernel_regularizer={"class_name": "L2",
              "config": {"l2": 0.5}}, activity_regularizer={"class_name": "L1L2", "config": {
              "l1": 0.25, "l2": 0.5}}, kernel_constraint="max_norm", bias_constraint="non_neg",
              kernel_initializer="he_normal", bias_initializer="ones")),
    "dense_plain": ("Dense", dict(units=2, use_bias=False, dtype="float64")),
    "batch_norm": ("BatchNormalization", dict(momentum=0.9, epsilon=0.01, center=False,
                   beta_regularizer="l2", gamma_constraint="unit_norm")),
    "dropout": ("Dropout", dict(rate=0.25, seed=3, noise_shape=(None, 1))),
    "flatten": ("Flatten", dict(data_format="channels_first")),
    "activation": ("Activation", dict(activation="softmax")),
}


def _both(name):
    cls, kw = LAYERS[name]
    return getattr(jt.layers, cls)(**kw), getattr(keras.layers, cls)(**kw)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_config_equals_keras(name):
    ours, theirs = _both(name)
    assert _strip(ours.get_config()) == _strip(theirs.get_config())


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_configs_cross_over_both_ways(name):
    ours, theirs = _both(name)
    from_keras = type(ours).from_config(theirs.get_config())
    assert from_keras.get_config() == theirs.get_config()
    to_keras = type(theirs).from_config(ours.get_config())
    assert to_keras.get_config() == ours.get_config()


def test_keras_sequential_rebuilt_by_jittape_and_back():
    theirs = keras.Sequential([
        keras.Input((4,)),
        keras.layers.Dense(3, activation="tanh", kernel_regularizer="l2"),
        keras.layers.BatchNormalization(),
        keras.layers.Dense(2, activation="softmax", kernel_constraint="max_norm"),
    ])
    theirs.layers[1].set_weights([np.full(3, 1.5, F32), np.full(3, 0.25, F32),
                                  np.full(3, 0.1, F32), np.full(3, 2.0, F32)])
    record = keras.layers.serialize(theirs)
    ours = jt.layers.deserialize(record)
    assert ours.built and [type(l).__name__ for l in ours.layers] == [
        "Dense", "BatchNormalization", "Dense"]
    ours.set_weights(theirs.get_weights())
    close(ours(X), theirs(X, training=False))
    close(jt.add_n(ours.losses), tf.add_n(theirs.losses))
    back = keras.layers.deserialize(jt.layers.serialize(ours))
    back.set_weights(ours.get_weights())
    close(back(X, training=False), ours(X))
    got, want = back.get_config(), theirs.get_config()
    assert [r["config"] for r in got["layers"][1:]] == [r["config"] for r in want["layers"][1:]]
    assert got["build_input_shape"] == want["build_input_shape"]


def test_initializer_records_equal_keras():
    for name in ("Zeros", "Ones", "RandomUniform", "RandomNormal", "TruncatedNormal",
                 "VarianceScaling", "GlorotUniform", "GlorotNormal", "HeNormal", "HeUniform",
                 "LecunNormal", "LecunUniform"):
        ours = getattr(jt.initializers, name)(seed=5) if name not in ("Zeros", "Ones") else \
            getattr(jt.initializers, name)()
        theirs = keras.initializers.get(jt.initializers.serialize(ours))
        assert keras.initializers.serialize(theirs) == jt.initializers.serialize(ours), name
    assert (jt.initializers.serialize(jt.initializers.Constant(2.0))
            == keras.initializers.serialize(keras.initializers.Constant(2.0)))
