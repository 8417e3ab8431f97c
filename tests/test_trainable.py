"""``layer.trainable`` as Keras 3 has it: setting it reaches every sublayer and the
weights' flags, and a frozen BatchNormalization runs on its moving statistics in fit.

The values are computed here with numpy; tests/test_vs_tensorflow_trainable.py checks
the same workflow against tf.keras."""

import numpy as np

import jittape as jt

K = jt.keras
L = jt.keras.layers

RNG = np.random.default_rng(3)
X = (RNG.standard_normal((8, 3)) * 2 + 1).astype(np.float32)
T = RNG.standard_normal((8, 1)).astype(np.float32)


def _model():
    jt.random.set_seed(1)
    base = K.Sequential([L.Dense(4), L.BatchNormalization()], name="base")
    inp = K.Input((3,))
    out = L.Dense(1, name="head")(base(inp))
    return K.Model(inp, out), base


def test_setting_trainable_reaches_every_sublayer_and_weight_flag():
    model, base = _model()
    dense, bn = base.layers
    base.trainable = False
    assert [dense.trainable, bn.trainable] == [False, False]
    assert not any(v.trainable for v in base.weights)
    assert base.trainable_weights == []
    assert len(model.trainable_weights) == 2  # the head's kernel and bias
    assert len(model.non_trainable_weights) == 6
    # a sublayer set back on its own is trainable again, though its parent is not
    bn.trainable = True
    assert base.trainable_weights == []  # base itself is still frozen
    assert [id(v) for v in model.trainable_weights] == [
        id(bn.gamma), id(bn.beta), *map(id, model.layers[-1].weights)]
    assert not bn.moving_mean.trainable  # made non-trainable: stays so
    base.trainable = True
    assert all(v.trainable for v in dense.weights)
    # assigning the value it already has changes nothing below (as tf.keras: its
    # attribute tracking skips `x = x`)
    dense.trainable = False
    base.trainable = True
    assert dense.trainable is False and not dense.kernel.trainable


def test_a_layer_made_frozen_makes_frozen_weights():
    m = K.Sequential([L.Dense(2, trainable=False), L.Dense(1)])
    m.build((None, 3))
    assert not m.layers[0].kernel.trainable
    assert [id(v) for v in m.trainable_weights] == list(map(id, m.layers[1].weights))


def test_fine_tuning_with_a_frozen_block_holding_batch_norm():
    model, base = _model()
    dense, bn = base.layers
    before = [v.numpy().copy() for v in model.weights]
    base.trainable = False
    model.compile(K.optimizers.SGD(0.1), "mse")
    model.fit(X, T, batch_size=8, epochs=1, shuffle=False, verbose=0)

    # the frozen block is an inference-mode function of the initial weights
    w, b, gamma, beta, mm, mv, hk, hb = before
    h = (X @ w + b - mm) / np.sqrt(mv + 1e-3) * gamma + beta
    g = 2 * (h @ hk + hb - T) / len(X)  # d mean((y - t)^2) / dy
    for v, want in zip(model.weights[:6], before[:6]):
        np.testing.assert_array_equal(v.numpy(), want)  # moving statistics untouched too
    np.testing.assert_allclose(model.weights[6].numpy(), hk - 0.1 * h.T @ g, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(model.weights[7].numpy(), hb - 0.1 * g.sum(0), rtol=1e-5,
                               atol=1e-6)

    # unfrozen and compiled again: batch statistics, and the moving ones move
    base.trainable = True
    model.compile(K.optimizers.SGD(0.0), "mse")
    model.fit(X, T, batch_size=8, epochs=1, shuffle=False, verbose=0)
    z = X @ w + b
    np.testing.assert_allclose(bn.moving_mean.numpy(), 0.99 * mm + 0.01 * z.mean(0),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.moving_variance.numpy(), 0.99 * mv + 0.01 * z.var(0),
                               rtol=1e-5, atol=1e-6)
    assert dense.trainable and len(model.trainable_weights) == 6


class _CountThenScale(L.Layer):
    """A non-trainable weight made before a trainable one."""

    def build(self, input_shape):
        self.count = self.add_weight(shape=(2,), initializer="zeros", trainable=False,
                                     name="count")
        self.scale = self.add_weight(shape=(2,), initializer="ones", name="scale")

    def call(self, x):
        return x * self.scale


def test_freezing_keeps_the_weights_h5_numbering(tmp_path):
    # Keras numbers a layer's variables trainable-as-made first (scale is vars/0, count
    # vars/1), whatever the layer's trainable is when the file is written
    frozen = K.Sequential([_CountThenScale()])
    frozen.build((None, 2))
    frozen.layers[0].count.assign([1.0, 2.0])
    frozen.layers[0].scale.assign([3.0, 4.0])
    frozen.trainable = False
    path = str(tmp_path / "m.weights.h5")
    frozen.save_weights(path)
    other = K.Sequential([_CountThenScale()])
    other.build((None, 2))
    other.load_weights(path)
    np.testing.assert_array_equal(other.layers[0].count.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(other.layers[0].scale.numpy(), [3.0, 4.0])
    assert other.layers[0].trainable  # trainable is not part of the weights file
