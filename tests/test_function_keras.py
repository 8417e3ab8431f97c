"""Optimizers, losses, layers and clipping inside ``@jt.function``: the same numbers as
the eager code (whose numbers ``test_optimizers.py``, ``test_losses.py`` and
``test_layers.py`` check against the Keras formulas), and the same variable states."""

from __future__ import annotations

import numpy as np
import pytest

import jittape as jt
from jittape.keras import optimizers as O

BACKENDS = ["interpret", "cpu"]
W0 = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
B0 = np.array([0.1, -0.2, 0.3])
GRADS = [(np.array([[0.1, -0.2, 0.3], [0.4, 0.0, -0.6]]), np.array([0.3, -0.1, 0.2])),
         (np.array([[-0.3, 0.5, 0.05], [0.2, 0.1, 0.9]]), np.array([-0.2, 0.4, 0.0])),
         (np.array([[0.2, 0.2, -0.1], [-0.5, 0.3, 0.0]]), np.array([0.1, 0.1, -0.3]))]

OPTIMIZERS = {
    "sgd": lambda: O.SGD(0.125),
    "sgd_momentum": lambda: O.SGD(0.25, momentum=0.75),
    "sgd_nesterov": lambda: O.SGD(0.25, momentum=0.75, nesterov=True),
    "adam": lambda: O.Adam(0.125),
    "adam_amsgrad": lambda: O.Adam(0.125, amsgrad=True),
    "adamw": lambda: O.AdamW(0.125, weight_decay=0.5),
    "rmsprop": lambda: O.RMSprop(0.125),
    "rmsprop_centered_momentum": lambda: O.RMSprop(0.125, centered=True, momentum=0.5),
    "adam_schedule": lambda: O.Adam(O.schedules.ExponentialDecay(0.5, 2, 0.5)),
}


def _run_optimizer(make, compiled, backend):
    w, b = jt.Variable(W0.copy(), name="w"), jt.Variable(B0.copy(), name="b")
    opt = make()

    def step(gw, gb):
        opt.apply_gradients([(gw, w), (gb, b)])

    if compiled:
        step = jt.function(step, backend=backend)
    for gw, gb in GRADS:
        step(jt.constant(gw), jt.constant(gb))
    if compiled:
        assert step.cache_info().traces == 1
    return [v.numpy() for v in (w, b)] + [v.numpy() for v in opt.variables]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_inside_function_matches_eager(name, backend):
    want = _run_optimizer(OPTIMIZERS[name], False, backend)
    got = _run_optimizer(OPTIMIZERS[name], True, backend)
    assert len(got) == len(want)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)


def test_none_gradient_inside_function_warns_at_trace_and_skips():
    w, u = jt.Variable(np.ones(2)), jt.Variable(np.ones(2), name="unused")
    opt = O.SGD(0.5)

    @jt.function
    def step():
        with jt.GradientTape() as tape:
            loss = jt.reduce_sum(w * w)
        opt.apply_gradients(zip(tape.gradient(loss, [w, u]), [w, u]))

    with pytest.warns(UserWarning, match="unused"):
        step()
    step()  # the trace is reused: the warning was a trace-time message
    np.testing.assert_allclose(w.numpy(), [0.0, 0.0])
    np.testing.assert_allclose(u.numpy(), [1.0, 1.0])
    assert int(opt.iterations.numpy()) == 2


LOSSES = {
    "mse": (lambda: jt.losses.MeanSquaredError(), "regression"),
    "mae_sum": (lambda: jt.losses.MeanAbsoluteError(reduction="sum"), "regression"),
    "bce_logits": (lambda: jt.losses.BinaryCrossentropy(from_logits=True), "binary"),
    "bce_probs": (lambda: jt.losses.BinaryCrossentropy(), "binary_probs"),
    "cce_logits": (lambda: jt.losses.CategoricalCrossentropy(from_logits=True), "onehot"),
    "cce_smooth": (lambda: jt.losses.CategoricalCrossentropy(from_logits=True,
                                                             label_smoothing=0.1), "onehot"),
    "scce_logits": (lambda: jt.losses.SparseCategoricalCrossentropy(from_logits=True),
                    "sparse"),
    "scce_none": (lambda: jt.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                  reduction="none"), "sparse"),
}


def _loss_data(kind):
    rng = np.random.default_rng(4)
    pred = rng.normal(size=(6, 4))
    if kind == "regression":
        return rng.normal(size=(6, 4)), pred
    if kind == "binary":
        return (rng.random((6, 4)) > 0.5).astype(np.float64), pred
    if kind == "binary_probs":
        return (rng.random((6, 4)) > 0.5).astype(np.float64), 1 / (1 + np.exp(-pred))
    labels = rng.integers(0, 4, size=6)
    if kind == "onehot":
        return np.eye(4)[labels], pred
    return labels.astype(np.int32), pred


@pytest.mark.filterwarnings("ignore:.*triggered tracing")  # a new jt.function per case, by design
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_and_its_gradient_inside_function_match_eager(name, backend):
    make, kind = LOSSES[name]
    y, p = _loss_data(kind)
    loss = make()

    def f(y, p):
        with jt.GradientTape() as tape:
            tape.watch(p)
            value = loss(y, p)
        return value, tape.gradient(value, p)

    want = [t.numpy() for t in f(jt.constant(y), jt.constant(p))]
    got = [t.numpy() for t in jt.function(f, backend=backend)(y, p)]
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)


def _model(seed):
    jt.random.set_seed(seed)
    return jt.Sequential([
        jt.layers.Flatten(input_shape=(2, 3)),
        jt.layers.Dense(8, activation="relu", dtype="float64"),
        jt.layers.BatchNormalization(dtype="float64"),
        jt.layers.Dropout(0.25),
        jt.layers.Dense(5, activation="tanh", dtype="float64"),
        jt.layers.Dense(3, activation="softmax", dtype="float64"),
    ])


@pytest.mark.parametrize("backend", BACKENDS)
def test_sequential_with_batchnorm_and_dropout_trains_the_same_compiled(backend):
    rng = np.random.default_rng(8)
    xs = [rng.normal(size=(10, 2, 3)) for _ in range(3)]
    ys = [rng.integers(0, 3, size=10).astype(np.int32) for _ in range(3)]

    def run(compiled):
        model = _model(21)
        opt = O.Adam(0.05)
        loss_fn = jt.losses.SparseCategoricalCrossentropy()

        def step(x, y):
            with jt.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            clipped, norm = jt.clip_by_global_norm(grads, 1.0)
            opt.apply_gradients(zip(clipped, model.trainable_variables))
            return loss, norm, model(x, training=False)

        if compiled:
            step = jt.function(step, backend=backend)
        jt.random.set_seed(5)  # the dropout masks
        outs = []
        for x, y in zip(xs, ys):
            outs.append([t.numpy() for t in step(jt.constant(x), jt.constant(y))])
        return outs, [v.numpy() for v in model.variables]

    want, want_vars = run(False)
    got, got_vars = run(True)
    for g, e in zip(got, want):
        for a, b in zip(g, e):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    assert len(got_vars) == len(want_vars) == 10  # 3 kernels and biases, gamma, beta, moving stats
    for a, b in zip(got_vars, want_vars):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_model_built_lazily_on_the_first_trace(backend):
    jt.random.set_seed(3)
    model = jt.Sequential([jt.layers.Dense(4, activation="relu"), jt.layers.Dense(2)])
    opt = O.SGD(0.1, momentum=0.9)

    @jt.function(backend=backend)
    def step(x):
        with jt.GradientTape() as tape:
            loss = jt.reduce_mean(jt.square(model(x)))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))
        return loss

    x = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
    losses = [float(step(x)) for _ in range(5)]
    assert len(model.variables) == 4 and len(opt.variables) == 2 + 4
    assert losses[-1] < losses[0]
    step(x[:5])  # a new batch size: a new trace that creates nothing
    assert step.cache_info().traces == 2
