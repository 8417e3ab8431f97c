"""jt.constraints: the projections against numpy written out from Keras 3's formulas (its
epsilon 1e-7 included), ``Variable(constraint=)``, the layers' ``*_constraint`` arguments,
a short projected training loop (eager and inside ``@jt.function``), identifiers and
configs."""

import numpy as np
import pytest
from tolerances import tol

import jittape as jt
from jittape.keras import constraints as C
from jittape.keras import layers as L

T64 = tol("float64")
T32 = tol("float32")
EPS = 1e-7  # Keras' backend.epsilon()
W = np.random.default_rng(5).standard_normal((4, 3)) * 2.0


def close(actual, expected, t=T64):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=t.fwd_rtol, atol=t.fwd_atol)


def np_norms(w, axis):
    return np.sqrt(np.sum(w ** 2, axis=axis, keepdims=True))


def np_max_norm(w, m, axis):
    n = np_norms(w, axis)
    return w * (np.clip(n, 0, m) / (EPS + n))


def np_min_max_norm(w, lo, hi, rate, axis):
    n = np_norms(w, axis)
    return w * ((rate * np.clip(n, lo, hi) + (1 - rate) * n) / (EPS + n))


CASES = {
    "max_norm": (lambda: C.MaxNorm(2.0), lambda w: np_max_norm(w, 2.0, 0)),
    "max_norm_axis1": (lambda: C.MaxNorm(1.5, axis=1), lambda w: np_max_norm(w, 1.5, 1)),
    "max_norm_axes": (lambda: C.MaxNorm(3.0, axis=[0, 1]), lambda w: np_max_norm(w, 3.0, (0, 1))),
    "non_neg": (lambda: C.NonNeg(), lambda w: np.maximum(w, 0)),
    "unit_norm": (lambda: C.UnitNorm(), lambda w: w / (EPS + np_norms(w, 0))),
    "unit_norm_axis1": (lambda: C.UnitNorm(axis=1), lambda w: w / (EPS + np_norms(w, 1))),
    "min_max_norm": (lambda: C.MinMaxNorm(2.5, 3.0), lambda w: np_min_max_norm(w, 2.5, 3.0, 1.0,
                                                                              0)),
    "min_max_norm_rate": (lambda: C.MinMaxNorm(0.5, 1.0, rate=0.25, axis=1),
                          lambda w: np_min_max_norm(w, 0.5, 1.0, 0.25, 1)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_projection_matches_formula(name):
    make, ref = CASES[name]
    out = make()(jt.constant(W))
    assert out.shape == W.shape and out.dtype == jt.float64
    close(out.numpy(), ref(W))
    out32 = make()(jt.Variable(W.astype(np.float32)))
    assert out32.dtype == jt.float32
    close(out32.numpy(), ref(W.astype(np.float32)), T32)


def test_keras_docstring_values_and_the_base():
    close(C.MaxNorm(2.0)(jt.constant([[3.0], [4.0]])).numpy(), [[1.2], [1.6]], T32)
    close(C.UnitNorm()(jt.constant([[3.0], [4.0]])).numpy(), [[0.6], [0.8]], T32)
    close(C.NonNeg()(jt.constant([-1.0, 2.0])).numpy(), [0.0, 2.0], T32)
    w = jt.constant(W)
    assert C.Constraint()(w) is w
    small = W / 100  # norms below max_value: only the epsilon changes them
    close(C.MaxNorm(2.0)(jt.constant(small)).numpy(), small * (np_norms(small, 0) / (EPS + np_norms(
        small, 0))))


def test_defaults_and_aliases():
    assert C.MaxNorm().get_config() == {"max_value": 2, "axis": 0}
    assert C.UnitNorm().get_config() == {"axis": 0}
    assert C.MinMaxNorm().get_config() == {"min_value": 0.0, "max_value": 1.0, "rate": 1.0,
                                           "axis": 0}
    assert C.NonNeg().get_config() == {}
    assert C.max_norm is C.MaxNorm and C.non_neg is C.NonNeg
    assert C.unit_norm is C.UnitNorm and C.min_max_norm is C.MinMaxNorm
    import jittape.keras.constraints as KC

    assert KC is C and jt.keras.constraints is C


@pytest.mark.parametrize("ident, cls", [
    ("max_norm", C.MaxNorm), ("MaxNorm", C.MaxNorm), ("non_neg", C.NonNeg),
    ("NonNeg", C.NonNeg), ("unit_norm", C.UnitNorm), ("UnitNorm", C.UnitNorm),
    ("min_max_norm", C.MinMaxNorm), ("MinMaxNorm", C.MinMaxNorm),
])
def test_get_by_name(ident, cls):
    assert type(C.get(ident)) is cls


def test_get_objects_classes_functions_and_records():
    c = C.MaxNorm(3.0)
    assert C.get(c) is c and C.get(None) is None
    assert isinstance(C.get(C.UnitNorm), C.UnitNorm)
    fn = jt.nn.relu
    assert C.get(fn) is fn
    got = C.get({"class_name": "MaxNorm", "config": {"max_value": 3, "axis": [0, 1]}})
    assert type(got) is C.MaxNorm and got.get_config() == {"max_value": 3, "axis": [0, 1]}


@pytest.mark.parametrize("make, match", [
    (lambda: C.get("nope"), r"Could not interpret constraint identifier: 'nope'; known"),
    (lambda: C.get(2.0), r"Could not interpret constraint identifier: 2.0"),
    (lambda: C.MaxNorm(-1.0), r"MaxNorm: invalid value for argument `max_value`.*max_value=-1.0"),
    (lambda: C.MaxNorm(axis="rows"), r"MaxNorm: invalid value for argument `axis`.*'rows'"),
    (lambda: C.UnitNorm(axis=[]), r"UnitNorm: invalid value for argument `axis`"),
    (lambda: C.MinMaxNorm(2.0, 1.0), r"MinMaxNorm: .*`max_value`.*>= 2.0.*max_value=1.0"),
    (lambda: C.MinMaxNorm(rate=1.5), r"MinMaxNorm: .*`rate`.*\[0.0, 1.0\].*rate=1.5"),
    (lambda: jt.Variable(1.0, constraint="non_neg"), r"`constraint` argument must be a callable"),
])
def test_bad_arguments_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("c", [C.MaxNorm(3, axis=[0, 1]), C.NonNeg(), C.UnitNorm(1),
                               C.MinMaxNorm(0.5, 2.0, 0.5, 1)], ids=lambda c: type(c).__name__)
def test_config_round_trips(c):
    record = C.serialize(c)
    assert record == {"module": "keras.constraints", "class_name": type(c).__name__,
                      "config": c.get_config(), "registered_name": None}
    again = C.deserialize(record)
    assert type(again) is type(c) and again.get_config() == c.get_config()
    close(type(c).from_config(c.get_config())(jt.constant(W)).numpy(), c(jt.constant(W)).numpy())


# ---------------------------------------------------------------------------
# variables and layers


def test_variable_keeps_its_constraint():
    c = C.NonNeg()
    v = jt.Variable(np.array([-1.0, 1.0]), constraint=c)
    assert v.constraint is c and jt.Variable(1.0).constraint is None


def test_layers_give_their_weights_the_constraints():
    d = L.Dense(2, kernel_constraint="max_norm", bias_constraint=C.NonNeg())
    d(np.ones((1, 3), np.float32))
    assert isinstance(d.kernel.constraint, C.MaxNorm) and isinstance(d.bias.constraint, C.NonNeg)
    assert isinstance(d.kernel_constraint, C.MaxNorm)
    bn = L.BatchNormalization(gamma_constraint="unit_norm", beta_constraint="non_neg")
    bn(np.ones((2, 3), np.float32))
    assert isinstance(bn.gamma.constraint, C.UnitNorm) and isinstance(bn.beta.constraint, C.NonNeg)
    assert bn.moving_mean.constraint is None


def _sgd_with_constraints(variables, grads, lr):
    """A local stand-in for the optimizers' side: an SGD step, then each variable's
    constraint applied to its new value."""
    for v, g in zip(variables, grads):
        v.assign(v - lr * g)
        if v.constraint is not None:
            v.assign(v.constraint(v))


X = np.random.default_rng(6).standard_normal((8, 3))
Y = np.random.default_rng(7).standard_normal((8, 2))


def _reference_run(w, b, steps, lr):
    """The same loop in numpy: MSE gradient step, then MaxNorm(1.0) on w, NonNeg on b."""
    for _ in range(steps):
        err = X @ w + b - Y
        gw, gb = 2 * X.T @ err / err.size, 2 * err.sum(0) / err.size
        w, b = w - lr * gw, b - lr * gb
        w, b = np_max_norm(w, 1.0, 0), np.maximum(b, 0)
    return w, b


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "function"])
def test_training_loop_keeps_the_weights_projected(compiled):
    layer = L.Dense(2, dtype="float64", kernel_constraint=C.MaxNorm(1.0),
                    bias_constraint=C.NonNeg())
    layer(X)
    w0 = np.random.default_rng(8).standard_normal((3, 2)) * 3
    b0 = np.array([-0.5, 0.5])
    layer.set_weights([w0, b0])

    def step(x, y):
        with jt.GradientTape() as tape:
            loss = jt.reduce_mean(jt.square(layer(x) - y))
        grads = tape.gradient(loss, layer.trainable_variables)
        _sgd_with_constraints(layer.trainable_variables, grads, 0.5)
        return loss

    if compiled:
        step = jt.function(step)
    for _ in range(4):
        step(jt.constant(X), jt.constant(Y))
        assert (np_norms(layer.kernel.numpy(), 0) <= 1.0 + 1e-12).all()
        assert (layer.bias.numpy() >= 0).all()
    if compiled:
        assert step.cache_info().traces == 1
    w, b = _reference_run(w0, b0, 4, 0.5)
    close(layer.kernel.numpy(), w)
    close(layer.bias.numpy(), b)
