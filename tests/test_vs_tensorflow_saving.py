"""``jt.keras.saving`` against Keras 3's ``keras.saving``, run only where TensorFlow is
installed: registered objects' records are Keras' own, and a ``.keras`` file with a
registered custom layer, loss, metric and activation written on one side loads on the
other where the same names are registered there."""

import json
import zipfile

import numpy as np
import pytest

import jittape as jt

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

PKG = "vs_tf"


def _jt_parts():
    register = jt.keras.saving.register_keras_serializable

    @register(package=PKG)
    class Scale(jt.layers.Layer):
        def __init__(self, factor=2.0, **kwargs):
            super().__init__(**kwargs)
            self.factor = factor

        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")

        def call(self, x):
            return self.factor * self.w * x

        def get_config(self):
            return {**super().get_config(), "factor": self.factor}

    @register(package=PKG)
    def half_mse(y_true, y_pred):
        return 0.5 * jt.ops.reduce_mean(jt.ops.square(y_true - y_pred), axis=-1)

    @register(package=PKG)
    def abs_err(y_true, y_pred):
        return jt.ops.reduce_mean(jt.ops.abs(y_true - y_pred), axis=-1)

    @register(package=PKG)
    def soft_relu(x):
        return jt.ops.nn.softplus(x) - 0.5

    return Scale, half_mse, abs_err, soft_relu


def _keras_parts():
    register = keras.saving.register_keras_serializable
    ops = keras.ops

    @register(package=PKG)
    class Scale(keras.layers.Layer):
        def __init__(self, factor=2.0, **kwargs):
            super().__init__(**kwargs)
            self.factor = factor

        def build(self, input_shape):
            self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")

        def call(self, x):
            return self.factor * self.w * x

        def get_config(self):
            return {**super().get_config(), "factor": self.factor}

    @register(package=PKG)
    def half_mse(y_true, y_pred):
        return 0.5 * ops.mean(ops.square(y_true - y_pred), axis=-1)

    @register(package=PKG)
    def abs_err(y_true, y_pred):
        return ops.mean(ops.abs(y_true - y_pred), axis=-1)

    @register(package=PKG)
    def soft_relu(x):
        return ops.softplus(x) - 0.5

    return Scale, half_mse, abs_err, soft_relu


X = np.random.default_rng(0).standard_normal((8, 3)).astype("float32")
Y = np.random.default_rng(1).standard_normal((8, 2)).astype("float32")


def _model(side, parts):
    Scale, half_mse, abs_err, soft_relu = parts
    inputs = side.Input((3,))
    h = Scale(3.0, name="scale")(inputs)
    out = side.layers.Dense(2, activation=soft_relu, name="out")(h)
    model = side.Model(inputs, out)
    model.compile(optimizer="sgd", loss=half_mse, metrics=[abs_err])
    return model


def test_registered_records_are_keras_records():
    ours, theirs = _jt_parts(), _keras_parts()
    for a, b in zip(ours[1:], theirs[1:]):
        assert jt.keras.saving.serialize_keras_object(a) == \
            keras.saving.serialize_keras_object(b)
        assert jt.keras.saving.get_registered_name(a) == keras.saving.get_registered_name(b)
    mine = jt.keras.saving.serialize_keras_object(ours[0](3.0, name="s"))
    want = keras.saving.serialize_keras_object(theirs[0](3.0, name="s"))
    assert mine == want
    assert mine["registered_name"] == f"{PKG}>Scale"
    assert keras.saving.deserialize_keras_object(mine).factor == 3.0
    assert type(jt.keras.saving.deserialize_keras_object(want)) is ours[0]
    for value in ([1, (2, 3), {"a": None}], b"x", slice(1, 2), np.arange(3), np.float32(2)):
        got = jt.keras.saving.serialize_keras_object(value)
        assert got == keras.saving.serialize_keras_object(value), value


def test_keras_loads_a_file_with_registered_objects_written_here(tmp_path):
    model = _model(jt, _jt_parts())
    model.fit(X, Y, epochs=1, batch_size=4, verbose=0)
    model.save(tmp_path / "m.keras")
    _keras_parts()  # the same names registered in Keras
    theirs = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(theirs.predict(X, verbose=0), model.predict(X, verbose=0),
                               rtol=1e-5, atol=1e-6)
    assert theirs.get_layer("scale").factor == 3.0
    assert theirs.loss.__name__ == "half_mse"


def test_a_keras_file_with_registered_objects_loads_here(tmp_path):
    theirs = _model(keras, _keras_parts())
    theirs.fit(X, Y, epochs=1, batch_size=4, verbose=0)
    theirs.save(tmp_path / "k.keras")
    config = json.loads(zipfile.ZipFile(tmp_path / "k.keras").read("config.json"))
    assert config["compile_config"]["loss"]["config"] == f"{PKG}>half_mse"
    parts = _jt_parts()
    ours = jt.keras.saving.load_model(tmp_path / "k.keras")
    assert type(ours.get_layer("scale")) is parts[0]
    assert ours.get_layer("out").activation is parts[3] and ours.loss is parts[1]
    np.testing.assert_allclose(ours.predict(X, verbose=0), theirs.predict(X, verbose=0),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.evaluate(X, Y, verbose=0), theirs.evaluate(X, Y, verbose=0),
                               rtol=1e-5, atol=1e-6)


def test_lambda_layer_configs_are_keras_configs():
    @keras.saving.register_keras_serializable(package=PKG)
    @jt.keras.saving.register_keras_serializable(package=PKG)
    def shift(x, by=1.0):  # one function, registered on both sides
        return x + by

    theirs = keras.layers.Lambda(shift, output_shape=(3,), arguments={"by": 2.0}, name="l")
    ours = jt.layers.Lambda(shift, output_shape=(3,), arguments={"by": 2.0}, name="l")
    want = json.loads(json.dumps(theirs.get_config()))
    assert json.loads(json.dumps(ours.get_config())) == want
    assert want["function"]["config"] == f"{PKG}>shift"
    assert jt.layers.Lambda.from_config(want).function is shift
    assert keras.layers.Lambda.from_config(ours.get_config()).function is shift
