"""jt.keras.Model: subclassing, the functional API, and their errors."""

import numpy as np
import pytest

import jittape as jt
from jittape.errors import InvalidArgumentError

K = jt.keras
L = jt.keras.layers


def _np_dense(x, layer, act=None):
    y = x @ layer.kernel.numpy() + layer.bias.numpy()
    return np.maximum(y, 0) if act == "relu" else y


# ---------------------------------------------------------------------------
# subclassing


class MLP(K.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = L.Dense(5, activation="relu")
        self.out = L.Dense(2)

    def call(self, inputs, training=None):
        return self.out(self.hidden(inputs))


def test_subclassed_model_tracks_layers_and_computes():
    m = MLP()
    assert m.name.startswith("mlp")
    assert not m.built
    x = np.random.default_rng(0).random((3, 4), dtype=np.float32)
    y = m(x)
    assert m.built
    assert [l.name for l in m.layers] == [m.hidden.name, m.out.name]
    assert [v.shape for v in m.trainable_variables] == [(4, 5), (5,), (5, 2), (2,)]
    want = _np_dense(_np_dense(x, m.hidden, "relu"), m.out)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)
    assert isinstance(m, K.Model) and isinstance(m, L.Layer)


def test_layers_in_lists_and_dicts_and_nested_models_are_tracked():
    class Deep(K.Model):
        def __init__(self):
            super().__init__()
            self.blocks = [L.Dense(3), L.Dense(3)]
            self.heads = {"a": L.Dense(1), "b": L.Dense(2)}
            self.inner = MLP()

        def call(self, x):
            for b in self.blocks:
                x = b(x)
            return self.heads["a"](x), self.heads["b"](x), self.inner(x)

    m = Deep()
    m(np.ones((2, 4), np.float32))
    assert len(m.layers) == 5

    class Nested(K.Model):
        def __init__(self):
            super().__init__()
            self.stages = [[L.Dense(2), L.Dense(2)], {"last": (L.Dense(1),)}]

        def call(self, x):
            for d in self.stages[0]:
                x = d(x)
            return self.stages[1]["last"][0](x)

    n = Nested()
    n(np.ones((1, 3), np.float32))
    assert len(n.layers) == 3 and len(n.trainable_variables) == 6
    assert len(m.trainable_variables) == 2 * 2 + 2 * 2 + 4
    assert m.inner in m.layers
    # weights() / get_weights() / set_weights() round-trip
    ws = m.get_weights()
    m.set_weights([w + 1 for w in ws])
    np.testing.assert_allclose(m.get_weights()[0], ws[0] + 1)
    with pytest.raises(ValueError, match="weight list of length"):
        m.set_weights(ws[:-1])


def test_frozen_model_has_no_trainable_variables():
    m = MLP()
    m(np.ones((1, 4), np.float32))
    m.trainable = False
    assert m.trainable_variables == []
    assert len(m.non_trainable_variables) == 4
    m.trainable = True
    m.hidden.trainable = False
    assert len(m.trainable_variables) == 2


def test_explicit_build_creates_weights_outside_tapes():
    m = MLP()
    with jt.GradientTape() as tape:
        m.build((None, 4))
    assert m.built and len(m.variables) == 4
    assert tape.watched_variables() == ()
    m.summary(print_fn=lambda s: None)


def test_unbuilt_summary_and_missing_call_raise():
    with pytest.raises(ValueError, match="has not yet been built"):
        MLP().summary()

    class NoCall(K.Model):
        pass

    with pytest.raises(NotImplementedError, match="call"):
        NoCall()(np.ones((1, 2), np.float32))


def test_method_function_traces_per_instance():
    class M(MLP):
        @jt.function
        def predict_fn(self, x):
            return self(x)

    a, b = M(), M()
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(a.predict_fn(x).numpy(), a(x).numpy(), rtol=1e-6)
    b.predict_fn(x)
    assert not np.allclose(a.predict_fn(x).numpy(), b.predict_fn(x).numpy())


def test_metric_attributes_are_tracked_in_metrics():
    class WithMetric(MLP):
        def __init__(self):
            super().__init__()
            self.tracker = jt.metrics.Mean(name="my_loss")

    m = WithMetric()
    assert [x.name for x in m.metrics] == ["my_loss"]


# ---------------------------------------------------------------------------
# the functional API


def test_input_and_symbolic_calls():
    x = K.Input(shape=(4,), name="features")
    assert x.shape == (None, 4) and x.dtype == jt.float32
    h = L.Dense(3)(x)
    assert h.shape == (None, 3)
    z = K.Input(shape=(None, 6))
    assert L.Dense(2)(z).shape == (None, None, 2)
    with pytest.raises(TypeError, match="symbolic"):
        bool(x)
    with pytest.raises(TypeError, match="Lambda"):
        np.asarray(x)


def test_functional_model_matches_the_layers_it_calls():
    inp = K.Input(shape=(4,))
    d1, d2 = L.Dense(6, activation="relu"), L.Dense(2)
    model = K.Model(inputs=inp, outputs=d2(d1(inp)))
    assert type(model).__name__ == "Functional"
    assert isinstance(model, K.Model)
    x = np.random.default_rng(1).random((5, 4), dtype=np.float32)
    np.testing.assert_allclose(model(x).numpy(), d2(d1(x)).numpy(), rtol=1e-6)
    assert [type(l).__name__ for l in model.layers] == ["InputLayer", "Dense", "Dense"]
    assert model.get_layer(index=1) is d1 and model.get_layer(d2.name) is d2
    assert model.input_shape == (None, 4) and model.output_shape == (None, 2)
    with pytest.raises(ValueError, match="No such layer"):
        model.get_layer("nope")


def test_functional_layer_order_is_keras_order():
    a, b = K.Input(shape=(4,), name="a"), K.Input(shape=(2,), name="b")
    h = L.Dense(8, name="h")(a)
    c = L.Concatenate(name="cat")([h, b])
    m = K.Model([a, b], [L.Dense(1, name="reg")(c), L.Dense(3, name="cls")(c)])
    # the order Keras 3.15 gives the same graph (checked with keras)
    assert [l.name for l in m.layers] == ["a", "h", "b", "cat", "reg", "cls"]
    assert m.output_names == ["reg", "cls"]


def test_multi_input_output_structures():
    a, b = K.Input(shape=(3,), name="left"), K.Input(shape=(2,), name="right")
    merged = L.concatenate([L.Dense(4)(a), b])
    out = {"score": L.Dense(1)(merged), "probs": L.Dense(3, activation="softmax")(merged)}
    m = K.Model(inputs={"left": a, "right": b}, outputs=out)
    xa, xb = np.ones((2, 3), np.float32), np.ones((2, 2), np.float32)
    y = m({"left": xa, "right": xb})
    assert set(y) == {"score", "probs"}
    assert y["score"].shape == (2, 1) and y["probs"].shape == (2, 3)
    np.testing.assert_allclose(y["probs"].numpy().sum(axis=1), 1.0, rtol=1e-5)
    m2 = K.Model([a, b], [out["score"]])
    np.testing.assert_allclose(m2([xa, xb])[0].numpy(), y["score"].numpy(), rtol=1e-6)
    # inputs given by name to a list-input model
    np.testing.assert_allclose(m2({"left": xa, "right": xb})[0].numpy(), y["score"].numpy(),
                               rtol=1e-6)


def test_shared_layer_and_model_as_layer():
    shared = L.Dense(3)
    a, b = K.Input(shape=(4,)), K.Input(shape=(4,))
    m = K.Model([a, b], L.Subtract()([shared(a), shared(b)]))
    assert len(m.trainable_variables) == 2  # one kernel and bias, used twice
    x = np.random.default_rng(2).random((2, 4), dtype=np.float32)
    np.testing.assert_allclose(m([x, x]).numpy(), 0.0, atol=1e-6)
    inner_in = K.Input(shape=(4,))
    inner = K.Model(inner_in, L.Dense(2)(inner_in), name="inner")
    outer_in = K.Input(shape=(4,))
    outer = K.Model(outer_in, L.Dense(1)(inner(outer_in)))
    assert inner in outer.layers
    np.testing.assert_allclose(
        outer(x).numpy(), outer.layers[-1](inner(x)).numpy(), rtol=1e-6)
    assert len(outer.trainable_variables) == 4


def test_operators_and_lambda_on_keras_tensors():
    x = K.Input(shape=(3,))
    y = (x * 2.0 + 1.0) - x[:, :1]
    z = L.Lambda(lambda t: jt.reduce_sum(t, axis=1, keepdims=True))(y)
    m = K.Model(x, [y, z])
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = m(v)
    want = v * 2 + 1 - v[:, :1]
    np.testing.assert_allclose(out[0].numpy(), want)
    np.testing.assert_allclose(out[1].numpy(), want.sum(1, keepdims=True))


def test_functional_errors_name_the_layer_and_shapes():
    x = K.Input(shape=(4,))
    with pytest.raises(InvalidArgumentError, match=r'"cat".*\(None, 4\)|cat.*\[2, 4\]'):
        L.Concatenate(axis=1, name="cat")([x, K.Input(shape=(4, 2))])
    d = L.Dense(3, name="d3")
    d(x)
    with pytest.raises(InvalidArgumentError, match="d3"):
        d(K.Input(shape=(5,)))
    other = K.Input(shape=(2,))
    y = L.Concatenate()([L.Dense(2)(x), other])
    with pytest.raises(ValueError, match="Graph disconnected"):
        K.Model(x, y)
    m = K.Model(x, L.Dense(1)(x))
    with pytest.raises(InvalidArgumentError, match=r"expected shape=\(None, 4\), found shape=\(2, 5\)"):
        m(np.ones((2, 5), np.float32))
    with pytest.raises(ValueError, match="expects 1 input"):
        m([np.ones((2, 4), np.float32), np.ones((2, 4), np.float32)])


def test_functional_model_under_function_and_tape():
    inp = K.Input(shape=(4,))
    m = K.Model(inp, L.Dense(1)(L.Dense(3, activation="tanh")(inp)))
    x = np.random.default_rng(3).random((6, 4), dtype=np.float32)

    def loss_grads():
        with jt.GradientTape() as tape:
            loss = jt.reduce_mean(jt.square(m(x, training=True)))
        return [loss] + tape.gradient(loss, m.trainable_variables)

    eager = loss_grads()
    compiled = jt.function(loss_grads)()
    for a, b in zip(eager, compiled):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_functional_input_dtype_conversion():
    ids = K.Input(shape=(3,), dtype="int32")
    m = K.Model(ids, L.Lambda(lambda t: jt.cast(t, "float32") * 2.0)(ids))
    np.testing.assert_allclose(m(np.array([[1, 2, 3]])).numpy(), [[2, 4, 6]])
    x = K.Input(shape=(2,))
    m2 = K.Model(x, x * 1.0)
    assert m2(np.ones((1, 2), np.float64)).dtype == jt.float32


def test_merge_layers_compute_as_numpy():
    a, b = np.random.default_rng(4).random((2, 3, 4), dtype=np.float32)
    for layer, want in [(L.Add(), a + b), (L.Subtract(), a - b), (L.Multiply(), a * b),
                        (L.Average(), (a + b) / 2), (L.Maximum(), np.maximum(a, b)),
                        (L.Minimum(), np.minimum(a, b)),
                        (L.Concatenate(axis=0), np.concatenate([a, b], 0)),
                        (L.Dot(axes=1), (a * b).sum(1, keepdims=True))]:
        np.testing.assert_allclose(layer([a, b]).numpy(), want, rtol=1e-6)
    with pytest.raises(ValueError, match="at least 2 inputs"):
        L.Add()([a])
    np.testing.assert_allclose(L.Reshape((2, 2))(a).numpy(), a.reshape(3, 2, 2))
    with pytest.raises(InvalidArgumentError, match="Reshape"):
        L.Reshape((5,))(a)
