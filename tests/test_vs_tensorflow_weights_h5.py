"""``.weights.h5`` files between tf.keras (Keras 3) and jittape, both directions, run only
where TensorFlow is installed (``pip install -e '.[tf]'``).

Each check builds the same architecture on both sides, gives the saving side random
weights (and, for optimizers, a trained state), saves, loads on the other side with
Keras' strict loader or jittape's, and compares predictions with the float32 row of
the tolerance table; for optimizers both sides then take one more training step and
the weights are compared, so a slot loaded into the wrong place is seen.
"""

import os
import warnings

import numpy as np
import pytest
from tolerances import tol

import jittape as jt

tf = pytest.importorskip("tensorflow")
pytest.importorskip("h5py")
keras = tf.keras
KL = keras.layers
JL = jt.layers

T32 = tol("float32")
F32 = np.float32


def _x(shape, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(F32)


def close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != Keras' {want.shape}"
    np.testing.assert_allclose(got, want, rtol=T32.fwd_rtol, atol=T32.fwd_atol)


def _randomize(variables, seed):
    """Random values for weights given as Keras or jittape variables (positive, so that
    moving variances are valid)."""
    rng = np.random.default_rng(seed)
    for v in variables:
        v.assign(rng.uniform(0.25, 1.25, tuple(v.shape)).astype(F32))


def _keras_predict(model, x):
    return np.asarray(model(x, training=False))


def _jt_predict(model, x):
    return model(x, training=False).numpy()


def _strict_keras_load(model, path):
    """Keras' load_weights, with any warning (a skipped object) as an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model.load_weights(path)


# ---------------------------------------------------------------------------
# Sequential


def _keras_sequential():
    return keras.Sequential([keras.Input((4,)), KL.Dense(3, activation="tanh"),
                             KL.BatchNormalization(), KL.Dropout(0.5), KL.Dense(2)])


def _jt_sequential():
    return jt.Sequential([JL.Dense(3, activation="tanh", input_shape=(4,)),
                          JL.BatchNormalization(), JL.Dropout(0.5), JL.Dense(2)])


def test_sequential_from_keras(tmp_path):
    km, jm = _keras_sequential(), _jt_sequential()
    _randomize(km.weights, 1)
    path = str(tmp_path / "seq.weights.h5")
    km.save_weights(path)
    jm.load_weights(path)
    x = _x((5, 4), 2)
    close(_jt_predict(jm, x), _keras_predict(km, x))


def test_sequential_to_keras(tmp_path):
    km, jm = _keras_sequential(), _jt_sequential()
    _randomize(jm.variables, 3)
    path = str(tmp_path / "seq.weights.h5")
    jm.save_weights(path)
    _strict_keras_load(km, path)
    x = _x((5, 4), 4)
    close(_keras_predict(km, x), _jt_predict(jm, x))


def test_nested_sequential_both_ways(tmp_path):
    def k():
        return keras.Sequential([keras.Input((2,)), KL.Dense(3),
                                 keras.Sequential([KL.Dense(3), KL.Dense(3, activation="relu")]),
                                 KL.Dense(1)])

    def j():
        return jt.Sequential([JL.Dense(3, input_shape=(2,)),
                              jt.Sequential([JL.Dense(3), JL.Dense(3, activation="relu")]),
                              JL.Dense(1)])

    km, jm = k(), j()
    _randomize(km.weights, 5)
    path = str(tmp_path / "nested.weights.h5")
    km.save_weights(path)
    jm.load_weights(path)
    x = _x((4, 2), 6)
    close(_jt_predict(jm, x), _keras_predict(km, x))
    km2, jm2 = k(), j()
    _randomize(jm2.variables, 7)
    jm2.save_weights(path)
    _strict_keras_load(km2, path)
    close(_keras_predict(km2, x), _jt_predict(jm2, x))


# ---------------------------------------------------------------------------
# Subclassed layers: attributes, lists (nested), dicts, private, own weights


def _net_classes():
    class KNet(KL.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.encoder = keras.Sequential([KL.Dense(3), KL.Dropout(0.5)])
            self.blocks = [KL.Dense(3), [KL.Dense(3), KL.Dense(3, use_bias=False)]]
            self.heads = {"b": KL.Dense(2), "a": KL.Dense(2)}
            self.bn = KL.BatchNormalization()
            self._gate = KL.Dense(2)

        def build(self, input_shape):
            self.count = self.add_weight(shape=(), initializer="zeros", trainable=False,
                                         name="count")
            self.scale = self.add_weight(shape=(2,), initializer="ones", name="scale")

        def call(self, x, training=None):
            x = self.encoder(x, training=training)
            x = self.blocks[1][1](self.blocks[1][0](self.blocks[0](x)))
            x = self.bn(x, training=training)
            y = self.heads["b"](x) + self.heads["a"](x)
            return self._gate(y) * self.scale + self.count

    class JNet(JL.Layer):
        def __init__(self):
            super().__init__()
            self.encoder = jt.Sequential([JL.Dense(3), JL.Dropout(0.5)])
            self.blocks = [JL.Dense(3), [JL.Dense(3), JL.Dense(3, use_bias=False)]]
            self.heads = {"b": JL.Dense(2), "a": JL.Dense(2)}
            self.bn = JL.BatchNormalization()
            self._gate = JL.Dense(2)

        def build(self, input_shape):
            self.count = self.add_weight("count", (), "zeros", trainable=False)
            self.scale = self.add_weight("scale", (2,), "ones")

        def call(self, x, training=None):
            x = self.encoder(x, training=training)
            x = self.blocks[1][1](self.blocks[1][0](self.blocks[0](x)))
            x = self.bn(x, training=training)
            y = self.heads["b"](x) + self.heads["a"](x)
            return self._gate(y) * self.scale + self.count

    return KNet, JNet


def _jnet_variables(net):
    """Every weight of a JNet (the saving walk is what is under test, so not through it)."""
    out = [net.scale, net.count]
    for layer in (net._gate, net.blocks[0], net.blocks[1][0], net.blocks[1][1], net.bn,
                  net.encoder.layers[0], net.heads["a"], net.heads["b"]):
        out += layer._own_weights
    return out


def test_subclassed_model_holding_a_layer_both_ways(tmp_path):
    # Keras' public API: a Model whose attribute "body" holds the layer writes "body/..."
    KNet, JNet = _net_classes()

    class KModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.body = KNet()

        def call(self, x, training=None):
            return self.body(x, training=training)

    class JModel(JL.Layer):
        def __init__(self):
            super().__init__()
            self.body = JNet()

        def call(self, x, training=None):
            return self.body(x, training=training)

    x = _x((5, 4), 8)
    km, jm = KModel(), JModel()
    km(x), jm(x)
    _randomize(km.weights, 9)
    path = str(tmp_path / "net.weights.h5")
    km.save_weights(path)
    jm.load_weights(path)
    close(_jt_predict(jm, x), _keras_predict(km, x))

    km2, jm2 = KModel(), JModel()
    km2(x), jm2(x)
    _randomize(_jnet_variables(jm2.body), 10)
    jm2.save_weights(path)
    _strict_keras_load(km2, path)
    close(_keras_predict(km2, x), _jt_predict(jm2, x))


def test_subclassed_layer_at_the_root_both_ways(tmp_path):
    # Keras saves a bare layer through saving_lib (what Model.save_weights runs)
    saving_lib = pytest.importorskip("keras.src.saving.saving_lib")
    KNet, JNet = _net_classes()
    x = _x((5, 4), 11)
    kn, jn = KNet(), JNet()
    kn(x), jn(x)
    _randomize(kn.weights, 12)
    path = str(tmp_path / "layer.weights.h5")
    saving_lib.save_weights_only(kn, path)
    jn.load_weights(path)
    close(_jt_predict(jn, x), _keras_predict(kn, x))
    _randomize(_jnet_variables(jn), 13)
    jn.save_weights(path)
    saving_lib.load_weights_only(kn, path)
    close(_keras_predict(kn, x), _jt_predict(jn, x))


# ---------------------------------------------------------------------------
# Optimizer state: both sides take one more step from the loaded state


OPTIMIZERS = {
    "sgd_momentum": (lambda: keras.optimizers.SGD(0.1, momentum=0.9),
                     lambda: jt.optimizers.SGD(0.1, momentum=0.9)),
    "adam_amsgrad": (lambda: keras.optimizers.Adam(0.05, amsgrad=True),
                     lambda: jt.optimizers.Adam(0.05, amsgrad=True)),
    "rmsprop_centered_momentum": (
        lambda: keras.optimizers.RMSprop(0.01, momentum=0.5, centered=True),
        lambda: jt.optimizers.RMSprop(0.01, momentum=0.5, centered=True)),
}

XB, YB = _x((8, 4), 20), _x((8, 2), 21)


def _keras_trained(make_opt, steps):
    km = keras.Sequential([keras.Input((4,)), KL.Dense(3, activation="tanh"), KL.Dense(2)])
    km.compile(make_opt(), "mse")
    km.optimizer.build(km.trainable_variables)
    for _ in range(steps):
        km.train_on_batch(XB, YB)
    return km


def _jt_model(make_opt):
    jm = jt.Sequential([JL.Dense(3, activation="tanh", input_shape=(4,)), JL.Dense(2)])
    jm.optimizer = make_opt()  # a compiled model's attribute
    jm.optimizer.build(jm.trainable_variables)
    return jm


def _jt_step(jm):
    with jt.GradientTape() as tape:
        loss = jt.reduce_mean(jt.square(jm(XB) - YB))
    grads = tape.gradient(loss, jm.trainable_variables)
    jm.optimizer.apply_gradients(zip(grads, jm.trainable_variables))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_state_from_keras(tmp_path, name):
    make_k, make_j = OPTIMIZERS[name]
    km = _keras_trained(make_k, 2)
    path = str(tmp_path / "opt.weights.h5")
    km.save_weights(path)
    jm = _jt_model(make_j)
    jm.load_weights(path)
    assert int(jm.optimizer.iterations.numpy()) == 2
    km.train_on_batch(XB, YB)
    _jt_step(jm)
    for got, want in zip(jm.get_weights(), km.get_weights()):
        close(got, want)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_state_to_keras(tmp_path, name):
    make_k, make_j = OPTIMIZERS[name]
    jm = _jt_model(make_j)
    _randomize(jm.variables, 22)
    for _ in range(2):
        _jt_step(jm)
    path = str(tmp_path / "opt.weights.h5")
    jm.save_weights(path)
    km = _keras_trained(make_k, 0)
    _strict_keras_load(km, path)
    assert int(km.optimizer.iterations.numpy()) == 2
    km.train_on_batch(XB, YB)
    _jt_step(jm)
    for got, want in zip(jm.get_weights(), km.get_weights()):
        close(got, want)


# ---------------------------------------------------------------------------
# jt.keras.Model: subclassed and functional (the lead's Model; skipped until it exists)


def _jt_model_class():
    try:
        return jt.keras.Model
    except AttributeError as e:
        pytest.skip(f"jt.keras.Model does not exist yet ({e})")


def test_subclassed_keras_model_both_ways(tmp_path):
    # attributes named after "layers" ("head", "out", "_gate") are written under layers/
    # by Keras, through the Model's layers property
    Model = _jt_model_class()

    class KSub(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = KL.Dense(3, activation="tanh")
            self.blocks = [KL.Dense(3), KL.BatchNormalization()]
            self.head = KL.Dense(2)
            self.out = KL.Dense(2)
            self._gate = KL.Dense(2)

        def call(self, x, training=None):
            x = self.blocks[1](self.blocks[0](self.dense(x)), training=training)
            return self._gate(self.out(self.head(x)))

    class JSub(Model):
        def __init__(self):
            super().__init__()
            self.dense = JL.Dense(3, activation="tanh")
            self.blocks = [JL.Dense(3), JL.BatchNormalization()]
            self.head = JL.Dense(2)
            self.out = JL.Dense(2)
            self._gate = JL.Dense(2)

        def call(self, x, training=None):
            x = self.blocks[1](self.blocks[0](self.dense(x)), training=training)
            return self._gate(self.out(self.head(x)))

    x = _x((5, 4), 30)
    km, jm = KSub(), JSub()
    km(x), jm(x)
    _randomize(km.weights, 31)
    path = str(tmp_path / "sub.weights.h5")
    km.save_weights(path)
    jm.load_weights(path)
    close(_jt_predict(jm, x), _keras_predict(km, x))
    km2, jm2 = KSub(), JSub()
    km2(x), jm2(x)
    _randomize(jm2.variables, 32)
    jm2.save_weights(path)
    _strict_keras_load(km2, path)
    close(_keras_predict(km2, x), _jt_predict(jm2, x))


def test_functional_model_both_ways(tmp_path):
    Model = _jt_model_class()

    def k():
        inp = keras.Input((4,))
        h = KL.BatchNormalization()(KL.Dense(3, activation="tanh")(inp))
        return keras.Model(inp, KL.Dense(2)(KL.Dropout(0.5)(h)))

    def j():
        inp = jt.keras.Input((4,))
        h = JL.BatchNormalization()(JL.Dense(3, activation="tanh")(inp))
        return Model(inp, JL.Dense(2)(JL.Dropout(0.5)(h)))

    x = _x((5, 4), 33)
    km, jm = k(), j()
    _randomize(km.weights, 34)
    path = str(tmp_path / "fn.weights.h5")
    km.save_weights(path)
    jm.load_weights(path)
    close(_jt_predict(jm, x), _keras_predict(km, x))
    km2, jm2 = k(), j()
    _randomize(jm2.variables, 35)
    jm2.save_weights(path)
    _strict_keras_load(km2, path)
    close(_keras_predict(km2, x), _jt_predict(jm2, x))


def test_fitted_models_optimizer_state_both_ways(tmp_path):
    # compile/fit on both sides; the state saved by one side's fit continues on the other
    Model = _jt_model_class()
    x, y = _x((16, 4), 40), _x((16, 2), 41)

    def k():
        inp = keras.Input((4,))
        h = KL.BatchNormalization()(KL.Dense(3, activation="tanh")(inp))
        m = keras.Model(inp, KL.Dense(2)(h))
        m.compile(keras.optimizers.Adam(0.01), "mse", metrics=["mae"])
        return m

    def j():
        inp = jt.keras.Input((4,))
        h = JL.BatchNormalization()(JL.Dense(3, activation="tanh")(inp))
        m = Model(inp, JL.Dense(2)(h))
        m.compile(jt.optimizers.Adam(0.01), "mse", metrics=["mae"])
        return m

    def fit(m):
        m.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)

    path = str(tmp_path / "fit.weights.h5")
    km, jm = k(), j()
    _randomize(km.weights, 42)
    fit(km)
    km.save_weights(path)
    jm.optimizer.build(jm.trainable_variables)
    jm.load_weights(path)
    fit(km), fit(jm)
    for got, want in zip(jm.get_weights(), km.get_weights()):
        close(got, want)

    km2, jm2 = k(), j()
    _randomize(jm2.variables, 43)
    fit(jm2)
    jm2.save_weights(path)
    km2.optimizer.build(km2.trainable_variables)
    _strict_keras_load(km2, path)
    assert int(km2.optimizer.iterations.numpy()) == 2
    fit(km2), fit(jm2)
    for got, want in zip(jm2.get_weights(), km2.get_weights()):
        close(got, want)


def test_keras_refuses_a_file_of_another_architecture(tmp_path):
    # the other side's strictness: what jittape writes is checked by Keras too
    jm = jt.Sequential([JL.Dense(3, input_shape=(4,)), JL.Dense(2)])
    path = str(tmp_path / "m.weights.h5")
    jm.save_weights(path)
    km = keras.Sequential([keras.Input((4,)), KL.Dense(3), KL.Dense(5)])
    with pytest.raises(ValueError, match="could not be loaded"):
        km.load_weights(path)
    assert os.path.exists(path)
