"""``.keras`` archives written by tf.keras (Keras 3) load in jittape with the same
predictions, for functional models that use every layer jittape has; run only where
TensorFlow is installed.

Keras records call arguments in each node of the config (``"mask": null`` for a
BatchNormalization, ``"training": false`` for a Dropout): the loaded layers must take
them, and the model's own ``training`` must still win over the recorded one."""

import numpy as np
import pytest

import jittape as jt

tf = pytest.importorskip("tensorflow")
keras = tf.keras
KL = keras.layers

RNG = np.random.default_rng(11)
XA = RNG.standard_normal((6, 4)).astype(np.float32)
XB = RNG.standard_normal((6, 2, 3)).astype(np.float32)


def _close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                               rtol=rtol, atol=atol)


def _every_layer(rate, both=True):
    a = keras.Input((4,), name="a")
    b = keras.Input((2, 3), name="b")
    h = KL.Dense(6, activation="tanh")(a)
    h = KL.BatchNormalization(momentum=0.9)(h)
    h = KL.Dropout(rate)(h)
    h = KL.Activation("relu")(h)
    fb = KL.Flatten()(b)
    g = KL.Dense(6)(fb)
    merged = [KL.Add()([h, g]), KL.Subtract()([h, g]), KL.Multiply()([h, g]),
              KL.Average()([h, g]), KL.Maximum()([h, g]), KL.Minimum()([h, g])]
    dot = KL.Dot(axes=1, normalize=True)([h, g])
    c = KL.Concatenate()(merged + [dot])
    c = KL.Identity()(c)
    r = KL.Reshape((37, 1))(c)
    r = KL.BatchNormalization(axis=1)(r)
    out = KL.Dense(3, name="out")(KL.Flatten()(r))
    return keras.Model({"a": a, "b": b}, {"out": out, "h": h} if both else out)


def _with_statistics(model):
    """Moving statistics away from 0 and 1, so that inference BN is not the identity."""
    for layer in model.layers:
        if isinstance(layer, KL.BatchNormalization):
            n = layer.moving_mean.shape[0]
            layer.moving_mean.assign(RNG.standard_normal(n).astype(np.float32) * 0.3)
            layer.moving_variance.assign(RNG.uniform(0.5, 2.0, n).astype(np.float32))
            layer.gamma.assign(RNG.uniform(0.5, 1.5, n).astype(np.float32))
    return model


def test_every_layer_loads_from_a_tf_keras_archive(tmp_path):
    km = _with_statistics(_every_layer(0.0))
    path = str(tmp_path / "every.keras")
    km.save(path)
    jm = jt.keras.models.load_model(path)
    x = {"a": XA, "b": XB}
    kp, jp = km.predict(x, verbose=0), jm.predict(x, verbose=0)
    assert set(kp) == set(jp)
    for k in kp:
        _close(jp[k], kp[k])
    # training mode (no dropout here): batch statistics, as Keras
    kt, jt_ = km(x, training=True), jm(x, training=True)
    for k in kp:
        _close(jt_[k].numpy(), kt[k].numpy(), rtol=1e-4, atol=1e-5)
    assert [type(layer).__name__ for layer in jm.layers] == [
        type(layer).__name__ for layer in km.layers]


def test_a_loaded_dropout_drops_out_in_training_as_in_keras(tmp_path):
    a = keras.Input((4,))
    km = keras.Model(a, KL.Dropout(0.5)(KL.BatchNormalization()(KL.Dense(50)(a))))
    path = str(tmp_path / "dropout.keras")
    km.save(path)
    jm = jt.keras.models.load_model(path)
    x = np.tile(XA, (40, 1))
    _close(jm(x).numpy(), km(x).numpy())  # the recorded training=False, as Keras
    assert np.mean(jm(x, training=False).numpy() == 0) == 0
    # the model's training=True wins over the recorded False: about half are dropped
    dropped = float(np.mean(jm(x, training=True).numpy() == 0))
    assert 0.45 < dropped < 0.55, dropped


def test_fit_after_loading_matches_keras(tmp_path):
    km = _with_statistics(_every_layer(0.0, both=False))
    path = str(tmp_path / "fit.keras")
    km.compile(keras.optimizers.SGD(0.05), "mse")
    km.save(path)
    jm = jt.keras.models.load_model(path)
    x, y = {"a": XA, "b": XB}, RNG.standard_normal((6, 3)).astype(np.float32)
    kh = km.fit(x, y, batch_size=3, epochs=2, shuffle=False, verbose=0).history
    jh = jm.fit(x, y, batch_size=3, epochs=2, shuffle=False, verbose=0).history
    _close(jh["loss"], kh["loss"], rtol=2e-4, atol=2e-5)
    for a, b in zip(jm.get_weights(), km.get_weights()):
        _close(a, b, rtol=2e-4, atol=2e-5)
