"""jt.losses: per-sample functions and reductions against Keras' formulas in numpy,
numerical stability at extreme inputs, analytic gradients, shapes and errors."""

import numpy as np
import pytest
from tolerances import tol

import jittape as jt
from jittape.keras import losses as Ls

T64 = tol("float64")
T32 = tol("float32")
EPS = 1e-7
RNG = np.random.default_rng(0)


def close(actual, expected, t=T64):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=t.fwd_rtol, atol=t.fwd_atol)


def np_log_softmax(z):
    m = z.max(-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def np_sigmoid(z):
    return 1 / (1 + np.exp(-z))


Y = RNG.standard_normal((4, 3))
P = RNG.standard_normal((4, 3))
SW = np.array([1.0, 0.5, 0.0, 2.0])


# --------------------------------------------------------------------------
# MSE / MAE and reductions


def test_mse_mae_per_sample_and_reductions():
    mse = ((P - Y) ** 2).mean(-1)
    mae = np.abs(P - Y).mean(-1)
    close(Ls.mean_squared_error(Y, jt.constant(P)).numpy(), mse)
    close(Ls.mean_absolute_error(Y, jt.constant(P)).numpy(), mae)
    close(float(Ls.MeanSquaredError()(Y, jt.constant(P))), mse.mean())
    close(float(Ls.MeanSquaredError(reduction="sum")(Y, jt.constant(P))), mse.sum())
    close(Ls.MeanSquaredError(reduction="none")(Y, jt.constant(P)).numpy(), mse)
    close(Ls.MeanSquaredError(reduction=None)(Y, jt.constant(P)).numpy(), mse)
    close(float(Ls.MeanAbsoluteError()(Y, jt.constant(P))), mae.mean())
    # sample weights: "sum_over_batch_size" divides the weighted sum by the batch size
    close(float(Ls.MeanSquaredError()(Y, jt.constant(P), sample_weight=SW)),
          (mse * SW).sum() / 4)
    close(float(Ls.MeanSquaredError(reduction="sum")(Y, jt.constant(P), sample_weight=SW)),
          (mse * SW).sum())
    close(float(Ls.MeanAbsoluteError()(Y, jt.constant(P), sample_weight=SW[:, None])),
          (mae * SW).sum() / 4)


def test_mean_reductions():
    mse = ((P - Y) ** 2).mean(-1)
    # "mean" is "sum_over_batch_size"; "mean_with_sample_weight" divides by the weights' sum
    close(float(Ls.MeanSquaredError(reduction="mean")(Y, jt.constant(P), sample_weight=SW)),
          (mse * SW).sum() / 4)
    loss = Ls.MeanSquaredError(reduction="mean_with_sample_weight")
    close(float(loss(Y, jt.constant(P), sample_weight=SW)), (mse * SW).sum() / SW.sum())
    close(float(loss(Y, jt.constant(P))), mse.mean())
    close(float(loss(Y, jt.constant(P), sample_weight=2.0)), (mse * 2).sum() / 2)  # as given
    p = jt.Variable(P)
    with jt.GradientTape() as tape:
        value = loss(Y, p, sample_weight=np.zeros(4))  # Keras' divide_no_nan: 0, not NaN
    assert float(value) == 0.0
    np.testing.assert_array_equal(tape.gradient(value, p).numpy(), np.zeros_like(P))


def test_sample_weight_alignment_follows_keras():
    mse = ((P - Y) ** 2).mean(-1)
    none = Ls.MeanSquaredError(reduction="none")
    # a (batch, 1) weight makes the per-sample values a column, as in Keras
    close(none(Y, jt.constant(P), sample_weight=SW[:, None]).numpy(), (mse * SW)[:, None])
    close(none(Y, jt.constant(P), sample_weight=SW).numpy(), mse * SW)
    # per-sample values (batch, t, 1) against a (batch, t) weight: the values are squeezed
    y3, p3 = RNG.standard_normal((4, 2, 1, 3)), RNG.standard_normal((4, 2, 1, 3))
    w2 = RNG.uniform(0, 1, (4, 2))
    per = ((p3 - y3) ** 2).mean(-1)
    got = none(y3, jt.constant(p3), sample_weight=w2)
    assert got.shape == (4, 2)
    close(got.numpy(), per[..., 0] * w2)
    # a (batch,) weight scales each sample of rank-2 per-sample values
    got = none(y3[:, :, 0], jt.constant(p3[:, :, 0]), sample_weight=SW)
    close(got.numpy(), per[..., 0] * SW[:, None])


def test_batch_vector_against_column_never_broadcasts_to_a_matrix():
    y = np.array([1.0, 2.0, 3.0])
    p = jt.constant(np.array([[1.5], [2.0], [2.0]]))
    per = Ls.mean_squared_error(y, p)
    assert per.shape == (3,)
    close(per.numpy(), [0.25, 0.0, 1.0])
    close(float(Ls.MeanSquaredError()(y[:, None], jt.constant(np.array([1.5, 2.0, 2.0])))),
          1.25 / 3)


def test_loss_dtypes():
    p32 = jt.constant(P.astype(np.float32))
    assert Ls.MeanSquaredError()(Y, p32).dtype == jt.float32  # y_true takes y_pred's dtype
    assert Ls.MeanSquaredError()(jt.constant(Y), p32).dtype == jt.float32
    assert Ls.MeanSquaredError()(Y, jt.constant(P)).dtype == jt.float64


def test_mse_gradient_is_two_errors_over_n():
    p = jt.Variable(P)
    with jt.GradientTape() as tape:
        loss = Ls.MeanSquaredError()(Y, p)
    close(tape.gradient(loss, p).numpy(), 2 * (P - Y) / P.size)


def test_shape_and_argument_errors():
    with pytest.raises(jt.errors.InvalidArgumentError,
                       match=r"mean_squared_error: y_true and y_pred must have the same shape, "
                             r"got y_true \[4, 2\] and y_pred \[4, 3\]"):
        Ls.mean_squared_error(np.zeros((4, 2)), jt.constant(P))
    with pytest.raises(ValueError, match="Invalid value for argument `reduction`: 'avg'"):
        Ls.MeanSquaredError(reduction="avg")
    with pytest.raises(jt.errors.InvalidArgumentError, match="sample_weight"):
        Ls.MeanSquaredError()(Y, jt.constant(P), sample_weight=np.ones(3))


# --------------------------------------------------------------------------
# binary crossentropy


def bce_np(y, p):
    q = np.clip(p, EPS, 1 - EPS)
    return -(y * np.log(q) + (1 - y) * np.log(1 - q)).mean(-1)


def bce_logits_np(y, z):
    return (np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))).mean(-1)


def test_binary_crossentropy_probabilities():
    y = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    p = np.array([[0.9, 0.2, 0.6], [0.3, 0.0, 1.0]])  # exact 0 and 1 are clipped
    per = Ls.binary_crossentropy(y, jt.constant(p))
    close(per.numpy(), bce_np(y, p))
    close(float(Ls.BinaryCrossentropy()(y, jt.constant(p))), bce_np(y, p).mean())
    # a confident wrong prediction costs -log(1e-7), not inf
    wrong = Ls.binary_crossentropy(np.array([[1.0]]), jt.constant(np.array([[0.0]])))
    close(wrong.numpy(), [-np.log(EPS)])


def test_binary_crossentropy_from_logits_is_stable():
    y = np.array([[1.0, 0.0, 1.0, 0.0]])
    z = np.array([[100.0, -100.0, -50.0, 800.0]])
    per = Ls.binary_crossentropy(y, jt.constant(z), from_logits=True)
    close(per.numpy(), [(0 + 0 + 50 + 800) / 4])
    z2 = RNG.standard_normal((4, 3))
    y2 = (RNG.random((4, 3)) > 0.5).astype(float)
    close(Ls.BinaryCrossentropy(from_logits=True)(y2, jt.constant(z2)).numpy(),
          bce_logits_np(y2, z2).mean())
    # same value as the probability form away from the clip
    close(Ls.binary_crossentropy(y2, jt.constant(np_sigmoid(z2))).numpy(),
          bce_logits_np(y2, z2))


def test_binary_crossentropy_gradients():
    y = (RNG.random((4, 3)) > 0.5).astype(float)
    z = jt.Variable(RNG.standard_normal((4, 3)) * 3)
    with jt.GradientTape() as tape:
        loss = Ls.BinaryCrossentropy(from_logits=True)(y, z)
    close(tape.gradient(loss, z).numpy(), (np_sigmoid(z.numpy()) - y) / 12)
    # probability form: d/dp = (p - y) / (p (1 - p)) / n inside the clip, 0 outside
    p = jt.Variable(np.array([[0.25, 0.0, 0.5]]))
    with jt.GradientTape() as tape:
        loss = Ls.BinaryCrossentropy()(np.array([[1.0, 1.0, 0.0]]), p)
    g = tape.gradient(loss, p).numpy()
    assert np.all(np.isfinite(g))
    close(g, [[(0.25 - 1) / (0.25 * 0.75) / 3, 0.0, 0.5 / 0.25 / 3]])


def test_label_smoothing():
    y = np.array([[1.0, 0.0]])
    p = np.array([[0.8, 0.3]])
    ys = y * 0.8 + 0.2 / 2
    close(Ls.binary_crossentropy(y, jt.constant(p), label_smoothing=0.2).numpy(), bce_np(ys, p))
    yc = y * 0.8 + 0.2 / 2
    q = p / p.sum()
    close(Ls.categorical_crossentropy(y, jt.constant(p), label_smoothing=0.2).numpy(),
          -(yc * np.log(q)).sum(-1))


# --------------------------------------------------------------------------
# categorical crossentropy


def test_categorical_crossentropy_probabilities_are_normalized_and_clipped():
    y = np.eye(3)[[0, 2, 1, 1]]
    p = RNG.random((4, 3)) * 2  # not normalized
    p[3, 1] = 0.0
    q = np.clip(p / p.sum(-1, keepdims=True), EPS, 1 - EPS)
    expected = -(y * np.log(q)).sum(-1)
    close(Ls.categorical_crossentropy(y, jt.constant(p)).numpy(), expected)
    close(float(Ls.CategoricalCrossentropy()(y, jt.constant(p))), expected.mean())
    assert np.isfinite(expected[3])


def test_categorical_crossentropy_from_logits_is_stable_and_has_softmax_gradient():
    y = np.eye(3)[[0, 2, 1, 1]]
    z = RNG.standard_normal((4, 3))
    z[0] += 1000.0
    close(Ls.categorical_crossentropy(y, jt.constant(z), from_logits=True).numpy(),
          -(y * np_log_softmax(z)).sum(-1))
    zv = jt.Variable(z)
    with jt.GradientTape() as tape:
        loss = Ls.CategoricalCrossentropy(from_logits=True)(y, zv)
    close(tape.gradient(loss, zv).numpy(), (np.exp(np_log_softmax(z)) - y) / 4)


# --------------------------------------------------------------------------
# sparse categorical crossentropy


def test_sparse_categorical_crossentropy_matches_dense_form():
    labels = np.array([0, 2, 1, 1])
    z = RNG.standard_normal((4, 3))
    expected = -np_log_softmax(z)[np.arange(4), labels]
    close(Ls.sparse_categorical_crossentropy(labels, jt.constant(z), from_logits=True).numpy(),
          expected)
    # labels as a column, as floats, as an int32 tensor
    for lab in (labels[:, None], labels.astype(float), jt.constant(labels.astype(np.int32))):
        close(Ls.SparseCategoricalCrossentropy(from_logits=True)(lab, jt.constant(z)).numpy(),
              expected.mean())
    p = np.exp(np_log_softmax(z))
    close(Ls.sparse_categorical_crossentropy(labels, jt.constant(p)).numpy(), expected)
    # probabilities: clipped, then renormalized through the log
    p0 = np.array([[0.0, 0.25, 0.75]])
    q = np.clip(p0, EPS, 1 - EPS)
    close(Ls.sparse_categorical_crossentropy([0], jt.constant(p0)).numpy(),
          [-np.log(q[0, 0] / q.sum())])


def test_sparse_categorical_crossentropy_gradient():
    labels = np.array([0, 2, 1])
    zv = jt.Variable(RNG.standard_normal((3, 4)))
    with jt.GradientTape() as tape:
        loss = Ls.SparseCategoricalCrossentropy(from_logits=True)(labels, zv)
    onehot = np.eye(4)[labels]
    close(tape.gradient(loss, zv).numpy(), (np.exp(np_log_softmax(zv.numpy())) - onehot) / 3)


def test_sparse_categorical_crossentropy_errors():
    z = jt.constant(np.zeros((3, 4)))
    with pytest.raises(jt.errors.InvalidArgumentError, match="outside the valid range"):
        Ls.sparse_categorical_crossentropy([0, 4, 1], z, from_logits=True)
    with pytest.raises(jt.errors.InvalidArgumentError,
                       match=r"labels of shape \[2\] do not match predictions of shape \[3, 4\]"):
        Ls.sparse_categorical_crossentropy([0, 1], z, from_logits=True)
    with pytest.raises(jt.errors.InvalidArgumentError, match="whole numbers"):
        Ls.sparse_categorical_crossentropy([0.5, 1, 2], z)


def test_second_derivative_through_a_loss():
    # d2/dz2 of mean BCE-with-logits = sigmoid(z)(1 - sigmoid(z)) / n
    z = jt.Variable(np.array([[0.3, -1.2]]))
    y = np.array([[1.0, 0.0]])
    with jt.GradientTape() as outer:
        with jt.GradientTape() as inner:
            loss = Ls.BinaryCrossentropy(from_logits=True)(y, z)
        g = inner.gradient(loss, z)
    h = outer.gradient(g, z)
    s = np_sigmoid(z.numpy())
    close(h.numpy(), s * (1 - s) / 2)


def test_get_by_name():
    # Keras 3: a function's name gives the function, a class's name a new instance
    assert Ls.get("mse") is Ls.mean_squared_error
    assert isinstance(Ls.get("SparseCategoricalCrossentropy"),
                      Ls.SparseCategoricalCrossentropy)
    with pytest.raises(ValueError, match="Could not interpret loss identifier: 'nope'"):
        Ls.get("nope")


# --------------------------------------------------------------------------
# a layer's sigmoid / softmax output: the loss uses the logits, as Keras 3 does


def _dense(activation, w, x):
    layer = jt.layers.Dense(w.shape[1], activation=activation, use_bias=False,
                            dtype="float64")
    layer(x)
    layer.set_weights([w])
    return layer


def test_crossentropy_of_a_layer_sigmoid_output_is_computed_from_its_logits():
    x = np.array([[40.0, -1.0], [-40.0, 2.0], [0.3, 0.1]])
    w = np.array([[1.0, -2.0], [0.5, 1.0]])
    y = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    layer = _dense("sigmoid", w, x)
    z = x @ w
    with jt.GradientTape() as tape:
        value = Ls.BinaryCrossentropy()(y, layer(x))
    # exact from the logits: far beyond the loss of probabilities clipped at 1e-7
    close(float(value), bce_logits_np(y, z).mean())
    assert float(value) > 3 * float(Ls.BinaryCrossentropy()(y, np_sigmoid(z)))
    (g,) = tape.gradient(value, [layer.kernel])
    close(g.numpy(), x.T @ ((np_sigmoid(z) - y) / y.size))
    # the same tensor after another op (a new tensor) is clipped, as in Keras
    out = layer(x) * 1.0
    close(float(Ls.BinaryCrossentropy()(y, out)), bce_np(y, np_sigmoid(z)).mean())
    # from_logits=True on an activation's output warns and still uses the logits
    with pytest.warns(UserWarning, match="from_logits=True, but y_pred was produced by a "
                                         "sigmoid activation"):
        value = Ls.BinaryCrossentropy(from_logits=True)(y, layer(x))
    close(float(value), bce_logits_np(y, z).mean())
    # jt.nn.sigmoid itself (like tf.nn.sigmoid) remembers nothing
    close(float(Ls.BinaryCrossentropy()(y, jt.nn.sigmoid(jt.constant(z)))),
          bce_np(y, np_sigmoid(z)).mean())


def test_loss_warnings_point_at_the_callers_line():
    # a loss class, its function and the helpers that warn sit in different modules of
    # jt.losses: the warning names the line that called the loss, not one of them
    x = np.array([[0.3, 0.1]])
    layer = _dense("softmax", np.array([[1.0, -2.0], [0.5, 1.0]]), x)
    y = np.array([[0.0, 1.0]])
    with pytest.warns(UserWarning, match="from_logits=True") as record:
        Ls.CategoricalCrossentropy(from_logits=True)(y, layer(x))
        Ls.categorical_crossentropy(y, layer(x), from_logits=True)
    with pytest.warns(SyntaxWarning, match="binary_crossentropy") as more:
        Ls.CategoricalFocalCrossentropy()(np.ones((3, 1)), np.ones((3, 1)) * 0.5)
    assert [w.filename for w in [*record, *more]] == [__file__] * 3


def test_crossentropy_of_a_layer_softmax_output_is_computed_from_its_logits():
    x = np.array([[40.0, -1.0], [-40.0, 2.0], [0.3, 0.1]])
    w = np.array([[1.0, -2.0, 0.0], [0.5, 1.0, 3.0]])
    labels = np.array([1, 0, 2])
    layer = _dense("softmax", w, x)
    want = -np_log_softmax(x @ w)[np.arange(3), labels]
    close(Ls.SparseCategoricalCrossentropy(reduction="none")(labels, layer(x)).numpy(), want)
    close(Ls.CategoricalCrossentropy(reduction="none")(np.eye(3)[labels], layer(x)).numpy(),
          want)
    act = jt.layers.Activation("softmax", dtype="float64")
    close(Ls.sparse_categorical_crossentropy(labels, act(jt.constant(x @ w))).numpy(), want)
    # a sigmoid's logits are not a softmax's: BCE of a softmax output uses the probabilities
    p = np.exp(np_log_softmax(x @ w))
    close(Ls.binary_crossentropy(np.eye(3)[labels], layer(x)).numpy(),
          bce_np(np.eye(3)[labels], p))
