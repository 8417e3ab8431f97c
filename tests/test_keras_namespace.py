"""jt.keras: the Keras names of jittape's objects, activations, callbacks and utils
(values against numpy and Keras 3's documented formulas)."""

import random

import numpy as np
import pytest

import jittape as jt
import jittape.keras
from jittape.keras import (  # noqa: F401
    activations, callbacks, initializers, layers, losses, metrics, optimizers, utils,
)
from jittape.keras.layers import Dense


def test_same_objects_as_the_short_forms():
    assert jittape.keras is jt.keras
    assert layers is jt.layers and Dense is jt.layers.Dense
    assert optimizers is jt.optimizers and losses is jt.losses
    assert metrics is jt.metrics and initializers is jt.initializers
    assert jt.keras.optimizers.schedules is jt.optimizers.schedules
    from jittape.keras.optimizers.schedules import ExponentialDecay
    assert ExponentialDecay is jt.optimizers.schedules.ExponentialDecay
    assert jt.keras.Sequential is jt.Sequential
    assert jt.keras.metrics.AUC is jt.metrics.AUC


def test_model_input_and_models_are_exported():
    assert jt.keras.Model is jt.Model is jt.keras.models.Model
    assert jt.keras.Input is jt.keras.layers.Input is jt.layers.Input
    assert jt.keras.InputLayer is jt.keras.layers.InputLayer is jt.layers.InputLayer
    assert jt.keras.models.Sequential is jt.Sequential
    from jittape.keras.models import Model  # noqa: F401
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        jt.keras.Nope  # noqa: B018


def test_callbacks_jittape_does_not_provide_say_so():
    with pytest.raises(AttributeError, match="TensorBoard is not provided by jittape"):
        callbacks.TensorBoard  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        callbacks.Nope  # noqa: B018


def test_callback_hooks_and_history():
    calls = []

    class Recorder(callbacks.Callback):
        def on_batch_end(self, batch, logs=None):
            calls.append(("batch", batch))

    r = Recorder()
    for hook in ("on_epoch_begin", "on_epoch_end", "on_train_batch_begin", "on_test_batch_end",
                 "on_predict_batch_begin", "on_train_begin", "on_train_end", "on_test_begin",
                 "on_test_end", "on_predict_begin", "on_predict_end"):
        assert callable(getattr(r, hook))
    r.on_train_batch_end(3, logs={"loss": 1.0})  # reaches Keras 2's on_batch_end
    assert calls == [("batch", 3)]
    h = callbacks.History()
    h.set_model(model := jt.Sequential([Dense(1)]))
    h.on_train_begin()
    h.on_epoch_end(0, {"loss": 2.0, "acc": 0.5})
    h.on_epoch_end(1, {"loss": 1.0, "acc": 0.75})
    assert h.history == {"loss": [2.0, 1.0], "acc": [0.5, 0.75]} and h.epoch == [0, 1]
    assert model.history is h


def test_activations():
    x = np.array([-3.0, -0.5, 0.0, 0.5, 7.0], np.float32)
    t = jt.constant(x)
    np.testing.assert_allclose(activations.relu(t).numpy(), np.maximum(x, 0))
    np.testing.assert_allclose(activations.relu(t, max_value=6.0).numpy(), np.clip(x, 0, 6))
    np.testing.assert_allclose(activations.relu(t, negative_slope=0.1, threshold=0.5).numpy(),
                               np.where(x > 0.5, x, 0.1 * (x - 0.5)), rtol=1e-6)
    np.testing.assert_allclose(activations.elu(t).numpy(), np.where(x > 0, x, np.expm1(x)),
                               rtol=1e-6)
    np.testing.assert_allclose(
        activations.selu(t).numpy(),
        1.05070098 * np.where(x > 0, x, 1.67326324 * np.expm1(x)), rtol=1e-6)
    np.testing.assert_allclose(activations.softsign(t).numpy(), x / (np.abs(x) + 1), rtol=1e-6)
    np.testing.assert_allclose(activations.hard_sigmoid(t).numpy(),
                               np.clip(x + 3, 0, 6) / 6, rtol=1e-6)
    np.testing.assert_allclose(
        activations.gelu(t, approximate=True).numpy(),
        0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), rtol=1e-5, atol=1e-6)
    from scipy.special import erf

    np.testing.assert_allclose(activations.gelu(t).numpy(),
                               0.5 * x * (1 + erf(x / np.sqrt(2))), rtol=1e-5, atol=1e-6)
    assert Dense(2, activation="gelu").activation is activations.gelu  # exact, as Keras
    np.testing.assert_allclose(activations.sigmoid(t).numpy(), 1 / (1 + np.exp(-x)), rtol=1e-6)
    assert activations.get(None) is activations.linear
    assert activations.get("elu") is activations.elu
    assert activations.serialize(activations.get("relu")) == "relu"
    assert activations.serialize(activations.tanh) == "tanh"
    d = Dense(2, activation="selu")  # the new names reach the layers
    assert d.activation is activations.selu
    with pytest.raises(ValueError, match="Unknown activation"):
        activations.get("nope")


def test_to_categorical_shape_rules():
    np.testing.assert_array_equal(utils.to_categorical([0, 2, 1]), np.eye(3)[[0, 2, 1]])
    out = utils.to_categorical([[1], [3]], num_classes=5)  # a trailing 1 is dropped
    assert out.shape == (2, 5) and out.dtype == np.float64
    out = utils.to_categorical([[0, 1], [2, 0]])  # (2, 2) -> (2, 2, 3)
    assert out.shape == (2, 2, 3)
    np.testing.assert_array_equal(out[1, 0], [0, 0, 1])
    assert utils.to_categorical(2, 4).shape == (4,)  # a scalar gives one row, unbatched
    t = utils.to_categorical(jt.constant([[1], [0]]), num_classes=2)
    assert isinstance(t, jt.Tensor) and t.dtype == jt.float32
    np.testing.assert_array_equal(t.numpy(), [[0, 1], [1, 0]])


def test_set_random_seed():
    def draw():
        return (random.random(), np.random.rand(), jt.random.normal([2]).numpy(),
                jt.initializers.GlorotUniform()((2, 2)))

    utils.set_random_seed(7)
    a = draw()
    utils.set_random_seed(7)
    b = draw()
    assert a[0] == b[0] and a[1] == b[1]
    np.testing.assert_array_equal(a[2], b[2])
    np.testing.assert_array_equal(np.asarray(a[3]), np.asarray(b[3]))
    with pytest.raises(ValueError, match="Expected `seed` argument to be an integer"):
        utils.set_random_seed(1.5)


def test_clear_session_resets_names():
    jt.keras.backend.clear_session()
    assert Dense(1).name == "dense"
    assert Dense(1).name == "dense_1"
    jt.keras.backend.clear_session()
    assert Dense(1).name == "dense"
    assert jt.keras.backend.floatx() == "float32"
