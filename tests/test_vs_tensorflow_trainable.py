"""``trainable`` and fine-tuning against tf.keras (Keras 3), run only where TensorFlow is
installed: freezing a block that holds a BatchNormalization, training the head, then
unfreezing and training everything must give tf.keras' weights and history."""

import numpy as np
import pytest

import jittape as jt

tf = pytest.importorskip("tensorflow")
keras = tf.keras

RNG = np.random.default_rng(5)
X = (RNG.standard_normal((24, 3)) * 2 + 1).astype(np.float32)
Y = RNG.integers(0, 2, 24).astype(np.float32)[:, None]


def _close(a, b, rtol=2e-4, atol=2e-5):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                               rtol=rtol, atol=atol)


def _model(lib):
    base = lib.Sequential([lib.layers.Dense(5, activation="relu"),
                           lib.layers.BatchNormalization(), lib.layers.Dropout(0.0)],
                          name="base")
    inp = lib.Input((3,))
    out = lib.layers.Dense(1, activation="sigmoid")(base(inp))
    return lib.Model(inp, out), base


def _state(model, base):
    return ([layer.trainable for layer in base.layers],
            len(base.trainable_weights), len(base.non_trainable_weights),
            len(model.trainable_weights), len(model.non_trainable_weights))


def test_trainable_flags_follow_keras():
    (km, kb), (jm, jb) = _model(keras), _model(jt.keras)
    km(X[:1])
    jm(X[:1])
    steps = [lambda m, b: setattr(b, "trainable", False),
             lambda m, b: setattr(b.layers[1], "trainable", True),
             lambda m, b: setattr(b, "trainable", True),
             lambda m, b: setattr(b.layers[0], "trainable", False),
             lambda m, b: setattr(b, "trainable", True),  # already True: nothing changes
             lambda m, b: setattr(m, "trainable", False),
             lambda m, b: setattr(m, "trainable", True)]
    for step in steps:
        step(km, kb)
        step(jm, jb)
        assert _state(jm, jb) == _state(km, kb)


def test_fine_tuning_a_frozen_block_with_batch_norm_matches_keras():
    (km, kb), (jm, jb) = _model(keras), _model(jt.keras)
    km(X[:1])
    jm(X[:1])
    jm.set_weights(km.get_weights())
    histories = []
    for lib, m, b in ((keras, km, kb), (jt.keras, jm, jb)):
        b.trainable = False
        m.compile(lib.optimizers.Adam(0.05), "binary_crossentropy", metrics=["accuracy"])
        h1 = m.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
        b.trainable = True
        m.compile(lib.optimizers.Adam(0.01), "binary_crossentropy", metrics=["accuracy"])
        h2 = m.fit(X, Y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
        histories.append((h1, h2))
    for kh, jh in zip(*histories):
        assert set(kh) == set(jh)
        for k in kh:
            _close(jh[k], kh[k])
    for a, b in zip(jm.get_weights(), km.get_weights()):
        _close(a, b)
    _close(jm.predict(X, verbose=0), km.predict(X, verbose=0))


def test_a_trainable_change_after_fit_waits_for_compile_as_in_keras():
    (km, kb), (jm, jb) = _model(keras), _model(jt.keras)
    km(X[:1])
    jm(X[:1])
    jm.set_weights(km.get_weights())
    for lib, m, b in ((keras, km, kb), (jt.keras, jm, jb)):
        m.compile(lib.optimizers.SGD(0.1), "mse")
        m.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        b.trainable = False  # the traced step keeps training the block
        m.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(jm.get_weights(), km.get_weights()):
        _close(a, b)
