"""jt.regularizers and a layer's losses: the penalties against numpy written out from Keras
3's documented formulas, their gradients against finite differences (float64), Keras 3's
rules for ``layer.losses`` (activity penalties and add_loss of the last top-level call,
then the weights' penalties; none for frozen layers), the same values inside
``@jt.function``, ``add_weight``'s two forms, identifiers and configs."""

import numpy as np
import pytest
from tolerances import tol

import jittape as jt
from jittape.keras import layers as L
from jittape.keras import regularizers as R

T64 = tol("float64")
T32 = tol("float32")
RNG = np.random.default_rng(7)
M = RNG.standard_normal((4, 3))  # a float64 weight; no entry is 0 (|x| is smooth there)


@pytest.fixture(autouse=True)
def _unseed():
    yield
    jt.random.set_seed(None)


def close(actual, expected, t=T64):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=t.fwd_rtol, atol=t.fwd_atol)


def np_orthogonal(x, factor, mode):
    """Keras' OrthogonalRegularizer, written out: normalize rows (columns), |dot products|
    of distinct pairs, factor * 0.5 * their sum over the pairs counted once each."""
    x = x if mode == "rows" else x.T
    unit = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-7)
    p = np.abs(unit @ unit.T)
    n = x.shape[0]
    off = p.sum() - np.trace(p)
    return factor * 0.5 * off / (n * (n - 1) / 2)


def assert_grad_matches_fd(f, value, t=T64, seed=0):
    """d/dw f(w) at ``value`` against central differences along a random direction."""
    v = jt.Variable(value)
    with jt.GradientTape() as tape:
        y = f(v)
    g = tape.gradient(y, v).numpy()
    d = np.random.default_rng(seed).standard_normal(value.shape)
    fd = (float(f(jt.constant(value + t.fd_eps * d))) - float(f(jt.constant(value - t.fd_eps * d)))
          ) / (2 * t.fd_eps)
    lhs = float(np.sum(g * d))
    assert abs(lhs - fd) <= t.fd_rtol * float(np.sum(np.abs(g * d))) + t.fd_atol, (lhs, fd)


# ---------------------------------------------------------------------------
# formulas


CASES = {
    "L1": (lambda: R.L1(0.3), lambda x: 0.3 * np.abs(x).sum()),
    "L2": (lambda: R.L2(0.2), lambda x: 0.2 * np.square(x).sum()),
    "L1L2": (lambda: R.L1L2(l1=0.1, l2=0.4), lambda x: 0.1 * np.abs(x).sum()
             + 0.4 * np.square(x).sum()),
    "L1L2_only_l2": (lambda: R.L1L2(l2=0.4), lambda x: 0.4 * np.square(x).sum()),
    "orthogonal_rows": (lambda: R.OrthogonalRegularizer(0.5), lambda x: np_orthogonal(
        x, 0.5, "rows")),
    "orthogonal_columns": (lambda: R.OrthogonalRegularizer(0.5, mode="columns"),
                           lambda x: np_orthogonal(x, 0.5, "columns")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_penalty_matches_formula_and_keeps_the_dtype(name):
    make, ref = CASES[name]
    out = make()(jt.constant(M))
    assert out.shape == () and out.dtype == jt.float64
    close(out.numpy(), ref(M))
    out32 = make()(jt.Variable(M.astype(np.float32)))  # a variable is read as a tensor
    assert out32.dtype == jt.float32
    close(out32.numpy(), ref(M.astype(np.float32)), T32)


@pytest.mark.parametrize("name", sorted(CASES))
def test_penalty_gradient_matches_finite_differences(name):
    make, _ = CASES[name]
    assert_grad_matches_fd(make(), M)


def test_keras_docstring_examples():
    # Keras' Regularizer docstring: L2(2.) of ones(5, 5) is 50; Dense(5) with ones
    # kernel, L1(0.01) on it and L2(0.01) activity on inputs of 2s: 0.25 + 5.0
    close(R.L2(2.0)(jt.ones((5, 5))).numpy(), 50.0, T32)
    layer = L.Dense(5, kernel_initializer="ones", kernel_regularizer=R.L1(0.01),
                    activity_regularizer=R.L2(0.01))
    layer(jt.ones((5, 5)) * 2.0)
    kernel_term = 0.01 * 25
    activity_term = 0.01 * np.sum(np.full((5, 5), 10.0) ** 2) / 5
    close(float(jt.add_n(layer.losses)), kernel_term + activity_term, T32)


def test_zero_factors_and_the_base_add_nothing():
    assert float(R.L1L2()(jt.constant(M))) == 0.0
    assert R.L1L2()(jt.constant(M)).dtype == jt.float64
    assert R.Regularizer()(jt.constant(M)) == 0.0


def test_orthogonal_regularizer_edge_cases():
    close(R.OrthogonalRegularizer(1.0)(jt.eye(3, dtype="float64")).numpy(), 0.0)
    x = M.copy()
    x[1] = 0.0  # an all-zero row: its cosines are 0 and the gradient stays finite
    close(R.OrthogonalRegularizer(0.5)(jt.constant(x)).numpy(), np_orthogonal(x, 0.5, "rows"))
    v = jt.Variable(x)
    with jt.GradientTape() as tape:
        y = R.OrthogonalRegularizer(0.5)(v)
    assert np.isfinite(tape.gradient(y, v).numpy()).all()
    # one column: no pairs, no penalty (Keras divides 0 by 0 here)
    assert float(R.OrthogonalRegularizer(0.5, "columns")(jt.constant(M[:, :1]))) == 0.0
    with pytest.raises(ValueError, match=r"OrthogonalRegularizer: inputs must have rank 2.*\[4\]"):
        R.OrthogonalRegularizer()(jt.constant(np.ones(4)))


# ---------------------------------------------------------------------------
# defaults, identifiers, errors


def test_keras3_defaults_and_aliases():
    assert R.L1().l1 == 0.01 and R.L2().l2 == 0.01
    assert R.L1(None).l1 == 0.01 and R.L1L2(None, None).get_config() == {"l1": 0.0, "l2": 0.0}
    assert (R.L1L2().l1, R.L1L2().l2) == (0.0, 0.0)  # Keras 3: L1L2(l2=0.1) has no L1 part
    assert R.l1 is R.L1 and R.l2 is R.L2 and R.l1_l2 is R.L1L2
    assert R.orthogonal_regularizer is R.OrthogonalRegularizer
    o = R.OrthogonalRegularizer()
    assert (o.factor, o.mode) == (0.01, "rows")
    import jittape.keras.regularizers as KR

    assert KR is R and jt.keras.regularizers is R


@pytest.mark.parametrize("ident, cls, config", [
    ("l1", R.L1, {"l1": 0.01}), ("L1", R.L1, {"l1": 0.01}), ("l2", R.L2, {"l2": 0.01}),
    ("L2", R.L2, {"l2": 0.01}), ("L1L2", R.L1L2, {"l1": 0.0, "l2": 0.0}),
    ("l1l2", R.L1L2, {"l1": 0.0, "l2": 0.0}),
    ("l1_l2", R.L1L2, {"l1": 0.01, "l2": 0.01}),  # the defaults Keras documents for the name
    ("orthogonal_regularizer", R.OrthogonalRegularizer, {"factor": 0.01, "mode": "rows"}),
    ("OrthogonalRegularizer", R.OrthogonalRegularizer, {"factor": 0.01, "mode": "rows"}),
])
def test_get_by_name(ident, cls, config):
    reg = R.get(ident)
    assert type(reg) is cls and reg.get_config() == config


def test_get_passes_objects_and_functions_and_makes_classes():
    reg = R.L2(0.5)
    assert R.get(reg) is reg and R.get(None) is None
    assert isinstance(R.get(R.L1), R.L1)

    def fn(x):
        return jt.reduce_sum(x)

    assert R.get(fn) is fn
    got = R.get({"class_name": "L2", "config": {"l2": 0.3}})
    assert type(got) is R.L2 and got.l2 == 0.3


@pytest.mark.parametrize("ident, match", [
    ("nope", r"Could not interpret regularizer identifier: 'nope'; known names"),
    (3, r"Could not interpret regularizer identifier: 3"),
    ({"class_name": "Nope", "config": {}}, r"regularizer identifier: 'Nope'.*custom_objects"),
    ({"config": {}}, r"regularizer identifier: .*expected a name or a dict"),
])
def test_bad_identifiers_are_named(ident, match):
    with pytest.raises(ValueError, match=match):
        R.get(ident)


@pytest.mark.parametrize("make, match", [
    (lambda: R.L1(-1.0), r"L1: invalid value for argument `l1`.*l1=-1.0"),
    (lambda: R.L2(float("nan")), r"L2: invalid value for argument `l2`.*l2=nan"),
    (lambda: R.L1L2(l2="big"), r"L1L2: invalid value for argument `l2`.*l2='big'"),
    (lambda: R.L1(True), r"L1: invalid value for argument `l1`.*l1=True"),
    (lambda: R.OrthogonalRegularizer(mode="diag"), r"`mode`.*mode='diag'"),
    (lambda: R.OrthogonalRegularizer(factor=-0.1), r"`factor`.*factor=-0.1"),
])
def test_bad_arguments_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# ---------------------------------------------------------------------------
# configs


@pytest.mark.parametrize("reg", [R.L1(0.25), R.L2(0.5), R.L1L2(0.1, 0.2),
                                 R.OrthogonalRegularizer(0.3, "columns")],
                         ids=lambda r: type(r).__name__)
def test_config_round_trips(reg):
    record = R.serialize(reg)
    assert record == {"module": "keras.regularizers", "class_name": type(reg).__name__,
                      "config": reg.get_config(), "registered_name": None}
    again = R.deserialize(record)
    assert type(again) is type(reg) and again.get_config() == reg.get_config()
    again = type(reg).from_config(reg.get_config())
    close(again(jt.constant(M)).numpy(), reg(jt.constant(M)).numpy())


class Scaled(R.Regularizer):
    def __init__(self, k=1.0):
        self.k = k

    def __call__(self, x):
        return self.k * jt.reduce_sum(x)

    def get_config(self):
        return {"k": self.k}


def sum_penalty(x):
    return jt.reduce_sum(x)


def test_custom_regularizers_need_custom_objects():
    record = R.serialize(Scaled(3.0))
    assert record["class_name"] == "Scaled" and record["registered_name"] == "Scaled"
    with pytest.raises(ValueError, match=r"regularizer identifier: 'Scaled'.*custom_objects"):
        R.deserialize(record)
    again = R.deserialize(record, custom_objects={"Scaled": Scaled})
    assert isinstance(again, Scaled) and again.k == 3.0
    fn_record = R.serialize(sum_penalty)
    assert fn_record["class_name"] == "function" and fn_record["config"] == "sum_penalty"
    with pytest.raises(ValueError, match=r"regularizer identifier: function 'sum_penalty'"):
        R.deserialize(fn_record)
    assert R.deserialize(fn_record, {"sum_penalty": sum_penalty}) is sum_penalty
    with pytest.raises(NotImplementedError, match="does not implement get_config"):
        R.Regularizer().get_config()


# ---------------------------------------------------------------------------
# layer.losses


X = RNG.standard_normal((5, 3))
W = RNG.standard_normal((3, 2))
B = RNG.standard_normal(2)


def dense(**kw):
    layer = L.Dense(2, dtype="float64", **kw)
    layer(X)
    layer.set_weights([W, B])
    return layer


def test_dense_losses_activity_first_then_kernel_and_bias():
    layer = dense(kernel_regularizer=R.L2(0.1), bias_regularizer=R.L1(0.5),
                  activity_regularizer=R.L1(0.01))
    y = layer(X)
    losses = [float(v) for v in layer.losses]
    close(losses, [0.01 * np.abs(X @ W + B).sum() / 5, 0.1 * (W ** 2).sum(), 0.5 * np.abs(B).sum()])
    close(y.numpy(), X @ W + B)
    assert all(v.dtype == jt.float64 for v in layer.losses)


def test_weight_penalties_follow_the_current_weights():
    layer = dense(kernel_regularizer=R.L2(1.0))
    layer.kernel.assign(2 * W)
    close(float(layer.losses[0]), 4 * (W ** 2).sum())


def test_frozen_layer_keeps_its_activity_penalty_but_adds_no_weight_penalty():
    layer = dense(kernel_regularizer=R.L2(0.1), activity_regularizer=R.L2(0.1))
    layer(X)
    activity = 0.1 * ((X @ W + B) ** 2).sum() / 5
    layer.trainable = False
    close([float(v) for v in layer.losses], [activity])  # as Keras 3: trainable_weights only
    layer(X)
    close([float(v) for v in layer.losses], [activity])
    layer.trainable = True
    assert len(layer.losses) == 2


def test_non_trainable_weight_with_a_regularizer_adds_nothing():
    class Two(L.Layer):
        def build(self, shape):
            self.a = self.add_weight(shape=(2,), initializer="ones", regularizer=R.L1(1.0))
            self.b = self.add_weight(shape=(2,), initializer="ones", regularizer=R.L1(1.0),
                                     trainable=False)

    layer = Two()
    layer(np.zeros((1, 2), np.float32))
    assert [float(v) for v in layer.losses] == [2.0]


class Twice(L.Layer):
    """A layer that adds a loss and calls its sublayer twice (Keras' nesting rules)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.inner = L.Dense(1, kernel_initializer="ones", activity_regularizer="l2")

    def call(self, x):
        self.add_loss(jt.reduce_sum(x))
        h = self.inner(x)
        return self.inner(h * jt.ones((1, 3)))


def test_nested_losses_accumulate_within_a_call_and_clear_at_the_next():
    x = np.ones((4, 3), np.float32)
    layer = Twice()
    layer(x)
    first = 0.01 * np.sum(np.full((4, 1), 3.0) ** 2) / 4   # inner(x) = 3 per row
    second = 0.01 * np.sum(np.full((4, 1), 9.0) ** 2) / 4  # inner(3 * ones) = 9
    want = [12.0, first, second]
    close([float(v) for v in layer.losses], want, T32)
    close([float(v) for v in layer.inner.losses], want[1:], T32)
    layer(x)  # a new top-level call replaces them
    close([float(v) for v in layer.losses], want, T32)
    layer.inner(x)  # the sublayer called on its own clears only its own losses
    close([float(v) for v in layer.inner.losses], [first], T32)
    close([float(v) for v in layer.losses], [12.0, first], T32)


def test_sequential_collects_sublayer_losses_and_skips_frozen_ones():
    model = jt.Sequential([
        L.Dense(2, kernel_initializer="ones", kernel_regularizer="l2", activity_regularizer="l1"),
        L.Dense(1, kernel_initializer="ones", kernel_regularizer="l2"),
    ])
    x = np.ones((2, 3), np.float32)
    model(x)
    activity = 0.01 * np.abs(np.full((2, 2), 3.0)).sum() / 2
    close([float(v) for v in model.losses], [activity, 0.01 * 6, 0.01 * 2], T32)
    model.layers[0].trainable = False
    close([float(v) for v in model.losses], [activity, 0.01 * 2], T32)


def test_activity_penalty_of_several_outputs_and_of_a_scalar():
    class Pair(L.Layer):
        def call(self, x):
            return [x, jt.reduce_sum(x)]

    layer = Pair(activity_regularizer=R.L1(1.0))
    layer(np.ones((4, 3), np.float32))
    assert [float(v) for v in layer.losses] == [3.0, 12.0]  # 12 / 4 rows; a scalar is not divided
    empty = L.Dense(2, activity_regularizer="l2")
    empty(np.zeros((0, 3), np.float32))
    assert [float(v) for v in empty.losses] == [0.0]


def test_activity_regularizer_is_settable_by_name():
    layer = L.Dense(2)
    layer.activity_regularizer = "l2"
    assert isinstance(layer.activity_regularizer, R.L2)
    with pytest.raises(ValueError, match="Could not interpret regularizer identifier: 'l3'"):
        layer.activity_regularizer = "l3"


def test_add_loss_takes_tensors_only():
    layer = L.Layer()
    with pytest.raises(ValueError, match=r'layer "layer.*": add_loss\(\) takes tensors.*1.0'):
        layer.add_loss(1.0)
    layer.add_loss([jt.constant(1.0), jt.constant(2.0)])
    assert [float(v) for v in layer.losses] == [1.0, 2.0]


def test_shape_probes_record_no_losses():
    class Custom(L.Layer):  # no compute_output_shape: a Sequential probes it on zeros
        def call(self, x):
            self.add_loss(jt.reduce_sum(x) + 1.0)
            return x * 2.0

    model = jt.Sequential([Custom(activity_regularizer="l1"), L.Dense(1)])
    model(np.ones((2, 3), np.float32))
    assert len(model.layers[0].losses) == 2  # this call's add_loss and activity penalty
    model.summary(print_fn=lambda *_: None)  # probes again, outside any call
    assert len(model.layers[0].losses) == 2


def test_regularized_loss_gradient_matches_finite_differences():
    layer = dense(kernel_regularizer=R.L1L2(0.05, 0.1), bias_regularizer=R.L2(0.2),
                  activity_regularizer=R.L2(0.03))

    def total(params):
        w, b = params
        y = X @ w + b
        return ((y ** 2).mean() + 0.05 * np.abs(w).sum() + 0.1 * (w ** 2).sum()
                + 0.2 * (b ** 2).sum() + 0.03 * (y ** 2).sum() / 5)

    with jt.GradientTape() as tape:
        y = layer(X)
        loss = jt.reduce_mean(jt.square(y)) + jt.add_n(layer.losses)
    close(float(loss), total([W, B]))
    grads = tape.gradient(loss, layer.trainable_variables)
    rng = np.random.default_rng(1)
    for i, (p, g) in enumerate(zip([W, B], grads)):
        d = rng.standard_normal(p.shape)
        plus, minus = [W.copy(), B.copy()], [W.copy(), B.copy()]
        plus[i], minus[i] = p + T64.fd_eps * d, p - T64.fd_eps * d
        fd = (total(plus) - total(minus)) / (2 * T64.fd_eps)
        lhs = float(np.sum(g.numpy() * d))
        assert abs(lhs - fd) <= T64.fd_rtol * float(np.sum(np.abs(g.numpy() * d))) + T64.fd_atol


# ---------------------------------------------------------------------------
# inside @jt.function


def _model():
    jt.random.set_seed(3)
    model = jt.Sequential([
        L.Dense(3, activation="tanh", kernel_regularizer=R.L2(0.1), activity_regularizer="l1"),
        L.BatchNormalization(gamma_regularizer="l2", beta_regularizer=R.L1(0.2)),
        L.Dense(2, kernel_regularizer=R.OrthogonalRegularizer(0.2, "columns")),
    ])
    return model


def test_losses_inside_function_equal_eager():
    x = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    model = _model()
    model(x)
    w0 = model.get_weights()

    def step(x):
        with jt.GradientTape() as tape:
            y = model(x, training=True)
            penalties = model.losses
            loss = jt.reduce_mean(jt.square(y)) + jt.add_n(penalties)
        return loss, penalties, tape.gradient(loss, model.trainable_variables)

    want = step(jt.constant(x))
    compiled = jt.function(step, reduce_retracing=True)
    for batch in (5, 5, 3):  # the second call runs the compiled step; the third a symbolic batch
        model.set_weights(w0)
        want = step(jt.constant(x[:batch]))
        model.set_weights(w0)
        got = compiled(jt.constant(x[:batch]))
        assert len(got[1]) == len(want[1]) == 5
        close(float(got[0]), float(want[0]), T32)
        for g, e in zip(got[1], want[1]):
            close(float(g), float(e), T32)
        for g, e in zip(got[2], want[2]):
            close(g.numpy(), e.numpy(), T32)
    assert compiled.cache_info().traces <= 2


def test_losses_of_a_trace_are_out_of_scope_afterwards():
    layer = L.Dense(2, activity_regularizer="l2")
    f = jt.function(lambda x: layer(x))
    f(np.ones((2, 3), np.float32))
    (loss,) = layer.losses
    with pytest.raises(TypeError, match="out of scope"):
        float(loss)


# ---------------------------------------------------------------------------
# add_weight


class Weights(L.Layer):
    def build(self, shape):
        self.a = self.add_weight(shape=(4, 5))  # float: glorot_uniform
        self.b = self.add_weight(shape=(3,), dtype="int32")  # not float: zeros
        self.c = self.add_weight((2, 2), "ones", "float64", name="c", regularizer="l1",
                                 constraint="non_neg")  # Keras 3's positional order
        self.d = self.add_weight("d", (2,), "zeros", False)  # jittape's positional form
        self.e = self.add_weight()  # a scalar


def test_add_weight_forms_and_defaults():
    jt.random.set_seed(11)
    layer = Weights(name="w")
    layer(np.zeros((1, 2), np.float32))
    jt.random.set_seed(11)
    np.testing.assert_array_equal(layer.a.numpy(), jt.initializers.GlorotUniform()((4, 5)).numpy())
    assert layer.b.dtype == jt.int32 and (layer.b.numpy() == 0).all()
    assert layer.c.dtype == jt.float64 and (layer.c.numpy() == 1).all()
    assert isinstance(layer.c.constraint, jt.constraints.NonNeg) and layer.a.constraint is None
    assert not layer.d.trainable and layer.d.name == "d" and layer.d.path == "w/d"
    assert layer.e.shape == ()
    assert [v.path for v in (layer.a, layer.b, layer.e)] == [
        "w/variable", "w/variable_1", "w/variable_2"]
    assert [float(v) for v in layer.losses] == [0.04]


def test_add_weight_errors_name_the_argument():
    layer = L.Layer(name="lay")
    with pytest.raises(TypeError, match=r'"lay": add_weight\(\) got multiple values for .*shape'):
        layer.add_weight((2,), shape=(3,))
    with pytest.raises(TypeError, match=r"at most 3 positional"):
        layer.add_weight((2,), "zeros", "float32", True)
    with pytest.raises(ValueError, match=r"'k' needs a shape of non-negative ints.*\(None, 2\)"):
        layer.add_weight(shape=(None, 2), name="k")
    with pytest.raises(ValueError, match="Could not interpret regularizer identifier: 'l9'"):
        layer.add_weight(shape=(2,), regularizer="l9")
