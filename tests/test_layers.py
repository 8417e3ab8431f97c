"""jt.layers and jt.Sequential: forward values from Keras' formulas on fixed weights,
gradients against finite differences (float64), BatchNormalization's moving statistics,
Dropout, building, weights, summary and errors."""

import re

import numpy as np
import pytest
from tolerances import tol

import jittape as jt
from jittape.keras import layers as L

T64 = tol("float64")
T32 = tol("float32")


@pytest.fixture(autouse=True)
def _unseed():
    yield
    jt.random.set_seed(None)


def close(actual, expected, t=T64):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=t.fwd_rtol, atol=t.fwd_atol)


def assert_directional_fd(f, params, grads, t=T64, seed=0):
    """<grad, d> against (f(p + eps d) - f(p - eps d)) / (2 eps) for a random direction d
    in each parameter; f maps a list of numpy arrays to a float."""
    rng = np.random.default_rng(seed)
    for i, (p, g) in enumerate(zip(params, grads)):
        assert g is not None, f"parameter {i}: gradient is None"
        g = np.asarray(g)
        assert g.shape == p.shape
        d = rng.standard_normal(p.shape)
        plus = [q.copy() for q in params]
        minus = [q.copy() for q in params]
        plus[i] = p + t.fd_eps * d
        minus[i] = p - t.fd_eps * d
        fd = (f(plus) - f(minus)) / (2 * t.fd_eps)
        lhs = float(np.sum(g * d))
        bound = t.fd_rtol * float(np.sum(np.abs(g * d))) + t.fd_atol
        assert abs(lhs - fd) <= bound, f"parameter {i}: analytic {lhs} vs finite diff {fd}"


RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 3))
W = RNG.standard_normal((3, 4))
B = RNG.standard_normal(4)


def np_softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


ACTS = {
    None: lambda z: z,
    "linear": lambda z: z,
    "relu": lambda z: np.maximum(z, 0),
    "sigmoid": lambda z: 1 / (1 + np.exp(-z)),
    "tanh": np.tanh,
    "softmax": np_softmax,
    "leaky_relu": lambda z: np.where(z > 0, z, 0.2 * z),
    "softplus": lambda z: np.log1p(np.exp(z)),
}


# --------------------------------------------------------------------------
# Dense


@pytest.mark.parametrize("activation", list(ACTS), ids=[str(a) for a in ACTS])
def test_dense_forward_matches_formula(activation):
    layer = L.Dense(4, activation=activation, dtype="float64")
    y = layer(X)
    layer.set_weights([W, B])
    y = layer(X)
    assert y.dtype == jt.float64 and y.shape == (5, 4)
    close(y.numpy(), ACTS[activation](X @ W + B))


def test_dense_callable_activation_and_no_bias():
    layer = L.Dense(4, activation=lambda z: z * z, use_bias=False, dtype="float64")
    layer(X)
    assert [(v.name, v.path) for v in layer.variables] == [("kernel", f"{layer.name}/kernel")]
    layer.set_weights([W])
    close(layer(X).numpy(), (X @ W) ** 2)


def test_dense_on_rank_3_inputs_uses_the_last_axis():
    x = RNG.standard_normal((2, 5, 3))
    layer = L.Dense(4, dtype="float64")
    layer(x)
    layer.set_weights([W, B])
    close(layer(x).numpy(), x @ W + B)


def test_dense_weights_shapes_names_and_initializers():
    layer = L.Dense(6, kernel_initializer="ones", bias_initializer=jt.initializers.Constant(0.5))
    assert layer.variables == [] and not layer.built
    layer(np.zeros((2, 3), np.float32))
    assert layer.built
    k, b = layer.trainable_variables
    assert k.shape == (3, 6) and b.shape == (6,)
    assert k.dtype == jt.float32
    assert k.name == "kernel" and b.name == "bias"  # Keras 3: the short name, and the path
    assert k.path == f"{layer.name}/kernel" and b.path == f"{layer.name}/bias"
    np.testing.assert_array_equal(k.numpy(), np.ones((3, 6)))
    np.testing.assert_array_equal(b.numpy(), np.full(6, 0.5))
    assert layer.non_trainable_variables == []
    assert layer.count_params() == 3 * 6 + 6


def test_dense_glorot_uniform_kernel_bounds():
    layer = L.Dense(50)
    layer(np.zeros((1, 30), np.float32))
    limit = np.sqrt(6 / (30 + 50))
    k = layer.kernel.numpy()
    assert np.abs(k).max() <= limit and np.abs(k).max() > 0.9 * limit
    np.testing.assert_array_equal(layer.bias.numpy(), np.zeros(50))


def test_layer_names_are_unique_per_type():
    a, b, c = L.Dense(1), L.Dense(1), L.Dropout(0.1)
    assert a.name != b.name
    assert re.fullmatch(r"dense(_\d+)?", a.name) and re.fullmatch(r"dense_\d+", b.name)
    assert re.fullmatch(r"dropout(_\d+)?", c.name)
    assert L.BatchNormalization(name="bn").name == "bn"


def test_dense_errors_name_the_layer_and_shapes():
    layer = L.Dense(2, name="head")
    layer(np.zeros((4, 3), np.float32))
    with pytest.raises(jt.errors.InvalidArgumentError) as e:
        layer(np.zeros((4, 5), np.float32))
    msg = str(e.value)
    assert 'layer "head"' in msg and "expected axis -1 of input shape to have value 3" in msg
    assert "(4, 5)" in msg and "test_layers.py" in msg
    with pytest.raises(ValueError, match=r'layer "vec".*min_ndim=2.*\(3,\)'):
        L.Dense(2, name="vec")(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="Unknown activation 'rellu'.*relu"):
        L.Dense(2, activation="rellu")
    with pytest.raises(ValueError, match="units"):
        L.Dense(0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        L.Dense(2, unitz=3)


def test_float_inputs_are_cast_to_the_layer_dtype():
    layer = L.Dense(2)  # float32
    y = layer(np.ones((1, 3)))  # float64 numpy
    assert y.dtype == jt.float32
    y = layer(jt.constant(np.ones((1, 3))))  # float64 tensor
    assert y.dtype == jt.float32


def test_dense_gradients_match_finite_differences():
    layer = L.Dense(4, activation="tanh", dtype="float64")
    layer(X)
    layer.set_weights([W, B])
    x = jt.constant(X)
    c = RNG.standard_normal((5, 4))

    def f(ps):
        return float(np.sum(np.tanh(ps[0] @ ps[1] + ps[2]) * c))

    with jt.GradientTape() as tape:
        tape.watch(x)
        loss = jt.reduce_sum(layer(x) * c)
    gx, gw, gb = tape.gradient(loss, [x, layer.kernel, layer.bias])
    close(float(loss), f([X, W, B]))
    assert_directional_fd(f, [X, W, B], [gx, gw, gb])


# --------------------------------------------------------------------------
# Activation, Flatten


def test_activation_layer_and_flatten():
    close(L.Activation("sigmoid", dtype="float64")(X).numpy(), ACTS["sigmoid"](X))
    x = RNG.standard_normal((2, 3, 4))
    f = L.Flatten(dtype="float64")
    y = f(x)
    assert y.shape == (2, 12)
    close(y.numpy(), x.reshape(2, 12))
    assert f.compute_output_shape((None, 3, 4)) == (None, 12)
    assert L.Flatten()(np.ones(3, np.float32)).shape == (3, 1)
    xt = jt.constant(x)
    with jt.GradientTape() as tape:
        tape.watch(xt)
        out = jt.reduce_sum(f(xt) * np.arange(12.0))
    close(tape.gradient(out, xt).numpy(), np.broadcast_to(np.arange(12.0).reshape(3, 4), x.shape))


def test_integer_and_bool_inputs_take_the_layer_dtype_in_dense_and_batchnorm():
    x = np.arange(12, dtype=np.uint8).reshape(4, 3)
    d = L.Dense(2, kernel_initializer="ones")
    y = d(x)
    assert y.dtype == jt.float32
    close(y.numpy(), x.astype(np.float64).sum(1, keepdims=True).repeat(2, 1), T32)
    assert L.Dense(2, dtype="float64")(x % 2 == 0).dtype == jt.float64
    bn = L.BatchNormalization()
    assert bn(x, training=True).dtype == jt.float32
    assert L.Flatten()(x).dtype == jt.uint8  # no weights: as in Keras, the dtype stays
    model = jt.Sequential([L.Flatten(input_shape=(2, 2)), L.Dense(3)])
    assert model(np.ones((5, 2, 2), np.uint8)).shape == (5, 3)


def test_sigmoid_and_softmax_outputs_remember_their_logits_while_alive():
    import gc

    from jittape.keras.layers.activations import _LOGITS

    before = len(_LOGITS)
    z = jt.constant(X)
    s = L.Activation("sigmoid", dtype="float64")(z)
    p = L.Dense(3, activation="softmax", dtype="float64")(z)
    assert L.keras_logits(s, "sigmoid") is z and L.keras_logits(s, "softmax") is None
    assert L.keras_logits(p, "softmax") is not None
    assert L.keras_logits(jt.nn.sigmoid(z), "sigmoid") is None  # jt.nn.sigmoid: as tf.nn
    assert L.keras_logits(s * 1.0, "sigmoid") is None
    assert L.keras_logits(L.get_activation("softmax")(z, axis=0), "softmax") is None
    assert len(_LOGITS) >= before + 2
    del s, p
    gc.collect()
    assert len(_LOGITS) == before


# --------------------------------------------------------------------------
# Dropout


def test_dropout_is_identity_unless_training():
    d = L.Dropout(0.5)
    x = jt.constant(np.ones((4, 4), np.float32))
    assert d(x) is x
    assert d(x, training=False) is x
    assert L.Dropout(0.0)(x, training=True) is x


def test_dropout_training_zeroes_and_rescales():
    jt.random.set_seed(0)
    rate = 0.25
    x = RNG.uniform(1, 2, (200, 50))
    y = L.Dropout(rate, dtype="float64")(x, training=True).numpy()
    kept = y != 0
    # inverted dropout: kept values are x / (1 - rate)
    close(y[kept], x[kept] / (1 - rate))
    frac = 1 - kept.mean()
    assert abs(frac - rate) < 0.02  # 10000 draws: sd of the fraction 0.004


def test_dropout_gradient_is_the_scaled_mask():
    rate = 0.5
    x = jt.constant(RNG.uniform(1, 2, (6, 5)))
    d = L.Dropout(rate, seed=1, dtype="float64")
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = d(x, training=True)
    g = tape.gradient(y, x).numpy()
    mask = y.numpy() != 0
    close(g, np.where(mask, 1 / (1 - rate), 0.0))


def test_dropout_seeding():
    x = np.ones((8, 8), np.float32)
    a, b = L.Dropout(0.5, seed=3), L.Dropout(0.5, seed=3)
    a1, a2 = a(x, training=True).numpy(), a(x, training=True).numpy()
    assert not np.array_equal(a1, a2)  # a new mask at every call
    np.testing.assert_array_equal(b(x, training=True).numpy(), a1)
    np.testing.assert_array_equal(b(x, training=True).numpy(), a2)
    jt.random.set_seed(5)
    c1 = L.Dropout(0.5)(x, training=True).numpy()
    jt.random.set_seed(5)
    np.testing.assert_array_equal(L.Dropout(0.5)(x, training=True).numpy(), c1)


def test_dropout_noise_shape_and_bad_rate():
    jt.random.set_seed(2)
    y = L.Dropout(0.5, noise_shape=(None, 1))(np.ones((64, 6), np.float32), training=True)
    rows = y.numpy()
    assert all(len(set(r)) == 1 for r in rows)  # a whole row is kept or dropped
    assert 0 < (rows[:, 0] == 0).sum() < 64
    for bad in (1.0, -0.1, "0.5"):
        with pytest.raises(ValueError, match="rate"):
            L.Dropout(bad)


# --------------------------------------------------------------------------
# BatchNormalization


def bn_np(x, gamma, beta, mean, var, eps=1e-3):
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def test_batchnorm_defaults_and_variables():
    bn = L.BatchNormalization()
    assert bn.momentum == 0.99 and bn.epsilon == 1e-3 and bn.axis == -1
    bn(np.zeros((2, 3), np.float32))
    names = [v.name for v in bn.variables]
    assert names == ["gamma", "beta", "moving_mean", "moving_variance"]
    assert [v.name for v in bn.trainable_variables] == ["gamma", "beta"]
    assert [v.name for v in bn.non_trainable_variables] == ["moving_mean", "moving_variance"]
    np.testing.assert_array_equal(bn.moving_mean.numpy(), np.zeros(3))
    np.testing.assert_array_equal(bn.moving_variance.numpy(), np.ones(3))
    assert not bn.moving_mean.trainable


def test_batchnorm_training_uses_batch_statistics_and_updates_moving_ones():
    x1 = RNG.standard_normal((8, 3)) * 2 + 1
    x2 = RNG.standard_normal((8, 3)) - 3
    gamma, beta = RNG.uniform(0.5, 1.5, 3), RNG.standard_normal(3)
    bn = L.BatchNormalization(momentum=0.9, dtype="float64")
    bn(x1)  # inference call: builds, changes nothing
    np.testing.assert_array_equal(bn.moving_mean.numpy(), np.zeros(3))
    bn.set_weights([gamma, beta, np.zeros(3), np.ones(3)])

    mm, mv = np.zeros(3), np.ones(3)
    for x in (x1, x2):
        y = bn(x, training=True)
        mean, var = x.mean(0), x.var(0)  # biased variance (ddof=0)
        close(y.numpy(), bn_np(x, gamma, beta, mean, var))
        mm = mm * 0.9 + mean * 0.1
        mv = mv * 0.9 + var * 0.1
        close(bn.moving_mean.numpy(), mm)
        close(bn.moving_variance.numpy(), mv)

    # inference: moving statistics, and no update
    for training in (False, None):
        y = bn(x1, training=training)
        close(y.numpy(), bn_np(x1, gamma, beta, mm, mv))
        close(bn.moving_mean.numpy(), mm)
        close(bn.moving_variance.numpy(), mv)


def test_batchnorm_channels_axis_and_no_center_scale():
    x = RNG.standard_normal((4, 3, 5))  # channels on axis 1
    bn = L.BatchNormalization(axis=1, center=False, scale=False, dtype="float64")
    y = bn(x, training=True)
    assert [v.name for v in bn.variables] == ["moving_mean", "moving_variance"]
    mean = x.mean(axis=(0, 2), keepdims=True)
    var = x.var(axis=(0, 2), keepdims=True)
    close(y.numpy(), (x - mean) / np.sqrt(var + 1e-3))
    close(bn.moving_mean.numpy(), 0.01 * mean.ravel())
    close(bn.moving_variance.numpy(), 0.99 + 0.01 * var.ravel())
    with pytest.raises(jt.errors.InvalidArgumentError, match="expected axis 1 of input shape"):
        bn(np.zeros((4, 2, 5)))


def test_batchnorm_frozen_runs_in_inference_mode():
    bn = L.BatchNormalization(dtype="float64")
    bn(X)
    bn.trainable = False
    y = bn(X, training=True)
    close(y.numpy(), X / np.sqrt(1 + 1e-3))
    np.testing.assert_array_equal(bn.moving_mean.numpy(), np.zeros(3))
    assert bn.trainable_variables == [] and len(bn.non_trainable_variables) == 4


def test_batchnorm_gradients_match_finite_differences():
    gamma, beta = RNG.uniform(0.5, 1.5, 3), RNG.standard_normal(3)
    bn = L.BatchNormalization(dtype="float64")
    bn(X)
    bn.set_weights([gamma, beta, np.zeros(3), np.ones(3)])
    c = RNG.standard_normal(X.shape)
    x = jt.constant(X)

    def f(ps):
        xx, g, b = ps
        return float(np.sum(bn_np(xx, g, b, xx.mean(0), xx.var(0)) * c))

    with jt.GradientTape() as tape:
        tape.watch(x)
        loss = jt.reduce_sum(bn(x, training=True) * c)
    grads = tape.gradient(loss, [x, bn.gamma, bn.beta])
    assert set(v.name for v in tape.watched_variables()) == {bn.gamma.name, bn.beta.name}
    close(float(loss), f([X, gamma, beta]))
    assert_directional_fd(f, [X, gamma, beta], grads)


# --------------------------------------------------------------------------
# Sequential


def make_mlp(**kw):
    return jt.Sequential([
        L.Dense(4, activation="tanh", dtype="float64", **kw),
        L.BatchNormalization(dtype="float64"),
        L.Dropout(0.5, dtype="float64"),
        L.Dense(2, activation="softmax", dtype="float64"),
    ])


def test_sequential_builds_lazily_and_orders_variables():
    model = make_mlp()
    assert not model.built and model.variables == []
    y = model(X)
    assert model.built and y.shape == (5, 2) and y.dtype == jt.float64
    d1, bn, _, d2 = model.layers
    assert model.trainable_variables == [d1.kernel, d1.bias, bn.gamma, bn.beta, d2.kernel,
                                         d2.bias]
    assert model.non_trainable_variables == [bn.moving_mean, bn.moving_variance]
    assert model.variables == [d1.kernel, d1.bias, bn.gamma, bn.beta, bn.moving_mean,
                               bn.moving_variance, d2.kernel, d2.bias]
    assert [w.shape for w in model.get_weights()] == [(3, 4), (4,), (4,), (4,), (4,), (4,),
                                                      (4, 2), (2,)]


def test_sequential_builds_from_input_shape():
    model = jt.Sequential([L.Dense(8, input_shape=(3,)), L.Dense(1)])
    assert model.built
    assert [tuple(v.shape) for v in model.trainable_variables] == [(3, 8), (8,), (8, 1), (1,)]
    model.add(L.Dense(5))  # added to a built model: built at once
    assert model.layers[-1].kernel.shape == (1, 5)
    assert model(np.ones((2, 3), np.float32)).shape == (2, 5)
    with pytest.raises(jt.errors.InvalidArgumentError, match="expected axis -1.*value 3"):
        model(np.ones((2, 4), np.float32))


def test_sequential_input_and_output_shape_as_keras():
    """TF's DCGAN tutorial asserts ``model.output_shape`` after each ``add``."""
    model = jt.keras.Sequential()
    with pytest.raises(AttributeError, match="no defined output shape yet"):
        model.output_shape
    model.add(L.Dense(7 * 7 * 4, use_bias=False, input_shape=(10,)))
    model.add(L.Reshape((7, 7, 4)))
    assert model.input_shape == (None, 10) and model.output_shape == (None, 7, 7, 4)
    model.add(L.Conv2DTranspose(2, (5, 5), strides=(2, 2), padding="same"))
    assert model.output_shape == (None, 14, 14, 2)
    fixed = jt.keras.Sequential([jt.keras.Input(shape=(3,), batch_size=8), L.Dense(2)])
    assert fixed.input_shape == (8, 3) and fixed.output_shape == (8, 2)
    lazy = jt.keras.Sequential([L.Dense(2)])
    with pytest.raises(AttributeError, match="no defined input shape yet"):
        lazy.input_shape
    lazy(np.ones((5, 3), np.float32))  # built by its first call
    assert lazy.input_shape == (None, 3) and lazy.output_shape == (None, 2)


def test_sequential_forward_matches_numpy_and_training_flag():
    model = make_mlp()
    model(X)
    w = [RNG.standard_normal(s.shape) * 0.5 for s in model.get_weights()]
    w[4], w[5] = RNG.standard_normal(4) * 0.1, RNG.uniform(0.5, 1.5, 4)  # moving stats
    model.set_weights(w)
    k1, b1, g, bt, mm, mv, k2, b2 = w
    h = np.tanh(X @ k1 + b1)
    expected_inference = np_softmax(bn_np(h, g, bt, mm, mv) @ k2 + b2)
    close(model(X).numpy(), expected_inference)
    close(model(X, training=False).numpy(), expected_inference)
    # training: batch statistics and an active dropout change the output
    jt.random.set_seed(0)
    yt = model(X, training=True).numpy()
    assert not np.allclose(yt, expected_inference)
    close(yt.sum(-1), np.ones(5))


def test_sequential_gradients_match_finite_differences():
    model = jt.Sequential([L.Dense(4, activation="tanh", dtype="float64"),
                           L.BatchNormalization(dtype="float64"),
                           L.Dense(2, activation="softmax", dtype="float64")])
    model(X)
    params0 = [v.numpy() for v in model.trainable_variables]
    c = RNG.standard_normal((5, 2))

    def f(ps):
        k1, b1, g, bt, k2, b2 = ps
        h = np.tanh(X @ k1 + b1)
        return float(np.sum(np_softmax(bn_np(h, g, bt, h.mean(0), h.var(0)) @ k2 + b2) * c))

    with jt.GradientTape() as tape:
        loss = jt.reduce_sum(model(X, training=True) * c)
    grads = tape.gradient(loss, model.trainable_variables)
    close(float(loss), f(params0))
    assert_directional_fd(f, params0, grads)


def test_get_set_weights_round_trip_and_errors():
    model = make_mlp()
    with pytest.raises(ValueError, match="no weights yet"):
        model.set_weights([])
    model(X)
    w = model.get_weights()
    w2 = [a + 1.0 for a in w]
    model.set_weights(w2)
    for a, b in zip(model.get_weights(), w2):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="length 7, but the layer was expecting 8 weights"):
        model.set_weights(w2[:-1])
    bad = list(w)
    bad[6] = np.zeros((2, 4))
    with pytest.raises(ValueError, match=r"weight 6 \(sequential\w*/dense\w*/kernel\) has shape \(4, 2\), "
                                         r"but the value given has shape \(2, 4\)"):
        model.set_weights(bad)
    # nothing was assigned by the failed call
    for a, b in zip(model.get_weights(), w2):
        np.testing.assert_array_equal(a, b)


def test_summary_prints_layers_shapes_and_counts(capsys):
    model = jt.Sequential([L.Dense(4, input_shape=(3,), name="hidden"),
                           L.BatchNormalization(name="bn"), L.Dense(1, name="out")],
                          name="regressor")
    assert model.summary() is None
    out = capsys.readouterr().out
    assert 'Model: "regressor"' in out
    assert re.search(r"hidden \(Dense\)\s+\(None, 4\)\s+16\b", out)
    assert re.search(r"bn \(BatchNormalization\)\s+\(None, 4\)\s+16\b", out)
    assert re.search(r"out \(Dense\)\s+\(None, 1\)\s+5\b", out)
    assert "Total params: 37" in out
    assert "Trainable params: 29" in out
    assert "Non-trainable params: 8" in out
    with pytest.raises(ValueError, match="not been built"):
        jt.Sequential([L.Dense(1)]).summary()


def test_sequential_add_and_errors():
    model = jt.Sequential()
    model.add(L.Dense(3))
    model.add(L.Dense(1))
    assert model(np.ones((2, 5), np.float32)).shape == (2, 1)
    with pytest.raises(TypeError, match="expected a jt.layers.Layer, got function"):
        model.add(lambda x: x)
    with pytest.raises(ValueError, match="already in the model"):
        model.add(model.layers[0])
    with pytest.raises(ValueError, match="no layers"):
        jt.Sequential()(np.ones((1, 2)))


class Residual(L.Layer):
    """A user layer: its own weight plus a tracked sublayer."""

    def __init__(self, units, **kw):
        super().__init__(**kw)
        self.inner = L.Dense(units, activation="tanh", dtype=kw.get("dtype"))

    def build(self, input_shape):
        self.scale = self.add_weight("scale", (input_shape[-1],), "ones")

    def call(self, x):
        return x * self.scale + self.inner(x)


def test_custom_layers_track_weights_and_work_in_sequential():
    model = jt.Sequential([Residual(3, dtype="float64", name="res"), L.Dense(1, dtype="float64")])
    y = model(X)
    assert y.shape == (5, 1)
    res = model.layers[0]
    assert [v.name for v in res.variables] == ["scale", "kernel", "bias"]
    assert [v.path for v in res.variables] == [
        f"{model.name}/res/scale", f"{model.name}/res/{res.inner.name}/kernel",
        f"{model.name}/res/{res.inner.name}/bias"]
    assert len(model.trainable_variables) == 5
    with jt.GradientTape() as tape:
        loss = jt.reduce_sum(model(X))
    assert all(g is not None for g in tape.gradient(loss, model.trainable_variables))
    res.trainable = False
    assert len(model.trainable_variables) == 2 and len(model.non_trainable_variables) == 3


class BadMatmul(L.Layer):
    def call(self, x):
        return jt.matmul(x, jt.ones((7, 2), dtype=x.dtype))


def test_an_op_error_inside_a_layer_names_the_layer():
    with pytest.raises(jt.errors.InvalidArgumentError,
                       match=r'calling layer "oops" \(BadMatmul\): matmul: Matrix '
                             r"size-incompatible"):
        BadMatmul(name="oops")(np.ones((2, 3), np.float32))


class Blend(L.Layer):
    """A user layer taking two inputs: build sees both shapes."""

    def build(self, input_shape):
        a, b = input_shape
        self.seen = input_shape
        self.w = self.add_weight("w", (a[-1], b[-1]), "ones")

    def call(self, inputs):
        a, b = inputs
        return a @ self.w + b


def test_layers_taking_a_list_of_tensors_keep_their_gradient_paths():
    a = jt.constant(RNG.standard_normal((2, 3)))
    b = jt.Variable(RNG.standard_normal((2, 4)))
    layer = Blend(dtype="float64")
    with jt.GradientTape() as tape:
        tape.watch(a)
        y = layer([a, b])
    assert layer.seen == [(2, 3), (2, 4)]
    ga, gb = tape.gradient(y, [a, b])
    close(ga.numpy(), np.full((2, 3), 4.0))  # each input element feeds 4 outputs via ones
    close(gb.numpy(), np.ones((2, 4)))
