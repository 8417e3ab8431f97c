"""jt.layers, jt.optimizers, jt.losses and the clipping functions against tf.keras (Keras 3)
and TensorFlow themselves, run only where TensorFlow is installed
(``pip install -e '.[tf]'``); the default suite does not need it.

Every check builds the same thing on both sides from the same fixed float32 inputs and
weights (``set_weights`` on both), runs it, and compares values and gradients with the
float32 row of the tolerance table.
"""

import re
import warnings

import numpy as np
import pytest
from tolerances import tol

import jittape as jt

tf = pytest.importorskip("tensorflow")
keras = tf.keras

T32 = tol("float32")
F32 = np.float32


def _rng(seed):
    return np.random.default_rng(seed)


def _np(x):
    if x is None:
        return None
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def close(got, want, t=T32, relative_to_max=False):
    """Elementwise within the float32 tolerances; with ``relative_to_max`` the absolute
    tolerance is relative to the largest |value| instead (for ill-conditioned entries,
    such as the derivative 1 - tanh(z)^2 of a saturated unit, where one ulp of TF's and
    jittape's float32 tanh already differ by more than 1e-5 relative)."""
    got, want = _np(got), _np(want)
    assert got.shape == want.shape, f"shape {got.shape} != TF's {want.shape}"
    atol = t.fwd_atol
    if relative_to_max and want.size and np.isfinite(want).all():
        atol = max(atol, t.fwd_rtol * float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=t.fwd_rtol, atol=atol)


def close_all(got, want, t=T32, relative_to_max=False):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert (g is None) == (w is None), f"item {i}: {g!r} against TF's {w!r}"
        if w is not None:
            try:
                close(g, w, t, relative_to_max)
            except AssertionError as e:
                raise AssertionError(f"item {i}: {e}") from None


def _kind(v) -> str:
    """A weight's own name without layer prefix or ':0' ("kernel", "moving_mean")."""
    return re.sub(r":\d+$", "", v.name).rsplit("/", 1)[-1]


@pytest.fixture(autouse=True)
def _unseed():
    yield
    jt.random.set_seed(None)


# ---------------------------------------------------------------------------
# Dense


X = _rng(0).standard_normal((4, 3)).astype(F32)
W = _rng(1).standard_normal((3, 5)).astype(F32)
B = _rng(2).standard_normal(5).astype(F32)
COT = _rng(3).standard_normal((4, 5)).astype(F32)  # cotangent: softmax's outputs sum to 1


def _layer_grads(m, layer, x, cot, training=None):
    """Output of ``layer`` on x and the gradients of sum(out * cot) w.r.t. x and its
    trainable weights."""
    xt = m.constant(x)
    with m.GradientTape() as tape:
        tape.watch(xt)
        y = layer(xt, training=training) if training is not None else layer(xt)
        s = m.reduce_sum(y * cot)
    return [y] + list(tape.gradient(s, [xt] + list(layer.trainable_variables)))


@pytest.mark.parametrize("scale", [1.0, 30.0])
@pytest.mark.parametrize("activation", sorted(jt.layers.ACTIVATIONS))
def test_dense_with_each_activation_matches_keras(activation, scale):
    if activation == "exponential" and scale > 1:
        pytest.skip("exp overflows float32 on both sides")
    x = X * F32(scale)
    kl = keras.layers.Dense(5, activation=activation)
    jl = jt.layers.Dense(5, activation=activation)
    kl(x), jl(x)
    for layer in (kl, jl):
        layer.set_weights([W, B])
    close_all(_layer_grads(jt, jl, x, COT), _layer_grads(tf, kl, x, COT),
              relative_to_max=scale > 1)


def test_dense_without_bias_and_rank3_inputs_match_keras():
    x = _rng(4).standard_normal((2, 4, 3)).astype(F32)
    cot = _rng(5).standard_normal((2, 4, 5)).astype(F32)
    kl = keras.layers.Dense(5, use_bias=False, activation="tanh")
    jl = jt.layers.Dense(5, use_bias=False, activation="tanh")
    kl(x), jl(x)
    assert len(jl.variables) == len(kl.weights) == 1
    for layer in (kl, jl):
        layer.set_weights([W])
    close_all(_layer_grads(jt, jl, x, cot), _layer_grads(tf, kl, x, cot))


def test_integer_inputs_to_flatten_dense_batch_norm_match_keras():
    x = _rng(6).integers(0, 256, (6, 2, 3)).astype(np.uint8)  # e.g. raw pixels
    km = keras.Sequential([keras.Input((2, 3), dtype="uint8"), keras.layers.Flatten(),
                           keras.layers.Dense(4), keras.layers.BatchNormalization()])
    jm = jt.Sequential([jt.layers.Flatten(input_shape=(2, 3)), jt.layers.Dense(4),
                        jt.layers.BatchNormalization()])
    weights = _fixed_weights(km)
    km.set_weights(weights)
    jm.set_weights(weights)
    assert jm.layers[0](x).dtype.name == km.layers[0](x).dtype.name == "uint8"
    for training in (True, False):
        want, got = km(x, training=training), jm(x, training=training)
        assert got.dtype.name == want.dtype.name == "float32"
        close(got, want, relative_to_max=True)
    close_all(jm.get_weights(), km.get_weights())


# ---------------------------------------------------------------------------
# Initializers (statistics only: the two sides draw from different generators)


INITIALIZERS = ["glorot_uniform", "glorot_normal", "he_normal", "he_uniform", "lecun_normal",
                "lecun_uniform", "random_normal", "random_uniform", "truncated_normal"]


@pytest.mark.parametrize("shape", [(400, 300), (5, 5, 32, 64), (50000,)], ids=str)
@pytest.mark.parametrize("name", INITIALIZERS)
def test_initializer_fans_bounds_and_spread_match_keras(name, shape):
    want = _np(keras.initializers.get(name)(shape)).astype(np.float64)
    got = _np(jt.initializers.get(name)(shape, dtype="float32"))
    assert got.shape == want.shape and got.dtype == np.float32
    got = got.astype(np.float64)
    # the same fan rule (receptive field times channels) gives the same spread and bounds
    np.testing.assert_allclose(got.std(), want.std(), rtol=0.03)
    np.testing.assert_allclose(np.abs(got).max(), np.abs(want).max(),
                               rtol=0.02 if "uniform" in name or "trunc" in name else 0.25)
    assert abs(got.mean()) < 4 * want.std() / np.sqrt(want.size) + 1e-3 * want.std()


def test_deterministic_initializers_match_keras():
    for name, kw in (("zeros", {}), ("ones", {}), ("constant", {"value": 0.3})):
        want = keras.initializers.get({"class_name": name.capitalize(), "config": kw})((3, 2))
        got = (jt.initializers.get(name) if not kw else jt.initializers.constant(**kw))((3, 2))
        close(got, want)


@pytest.mark.parametrize("mode", ["fan_in", "fan_out", "fan_avg"])
@pytest.mark.parametrize("distribution", ["truncated_normal", "untruncated_normal", "uniform"])
def test_variance_scaling_matches_keras(mode, distribution):
    kw = dict(scale=3.0, mode=mode, distribution=distribution)
    shape = (3, 3, 40, 200)
    want = _np(keras.initializers.VarianceScaling(**kw)(shape)).astype(np.float64)
    got = _np(jt.initializers.VarianceScaling(**kw)(shape)).astype(np.float64)
    np.testing.assert_allclose(got.std(), want.std(), rtol=0.03)
    if distribution != "untruncated_normal":
        np.testing.assert_allclose(np.abs(got).max(), np.abs(want).max(), rtol=0.02)


# ---------------------------------------------------------------------------
# BatchNormalization


def _bn_case(axis, shape):
    rng = _rng(10)
    c = shape[axis]
    xs = [(rng.standard_normal(shape) * 3 + 1.5).astype(F32) for _ in range(3)]
    weights = [
        rng.uniform(0.5, 2, c).astype(F32),  # gamma
        rng.standard_normal(c).astype(F32),  # beta
        rng.standard_normal(c).astype(F32),  # moving_mean
        rng.uniform(0.5, 2, c).astype(F32),  # moving_variance
    ]
    cot = rng.standard_normal(shape).astype(F32)
    return xs, weights, cot


@pytest.mark.parametrize(
    "axis, shape, kw",
    [
        (-1, (6, 4), {}),
        (-1, (6, 4), {"momentum": 0.9, "epsilon": 1e-5}),
        (1, (3, 4, 5), {}),
        (-1, (2, 3, 4), {"center": False}),
        (-1, (5, 4), {"scale": False}),
    ],
)
def test_batch_norm_training_inference_and_moving_statistics_match_keras(axis, shape, kw):
    xs, weights, cot = _bn_case(axis, shape)
    kl = keras.layers.BatchNormalization(axis=axis, **kw)
    jl = jt.layers.BatchNormalization(axis=axis, **kw)
    kl(xs[0]), jl(xs[0])
    keep = [w for w, on in zip(weights, [kw.get("scale", True), kw.get("center", True), 1, 1])
            if on]
    for layer in (kl, jl):
        layer.set_weights(keep)
    assert [_kind(v) for v in jl.weights] == [_kind(v) for v in kl.weights]
    assert [_kind(v) for v in jl.trainable_variables] == [
        _kind(v) for v in kl.trainable_variables]
    # two training steps: normalized with the batch statistics, moving statistics updated
    for x in xs[:2]:
        close_all(_layer_grads(jt, jl, x, cot, training=True),
                  _layer_grads(tf, kl, x, cot, training=True))
        close(jl.moving_mean, kl.moving_mean)
        close(jl.moving_variance, kl.moving_variance)
    # inference (training=False, and the default) uses the moving statistics, updates nothing
    for training in (False, None):
        close_all(_layer_grads(jt, jl, xs[2], cot, training=training),
                  _layer_grads(tf, kl, xs[2], cot, training=training))
    close_all(jl.get_weights(), kl.get_weights())


def test_frozen_batch_norm_runs_in_inference_mode_like_keras():
    xs, weights, cot = _bn_case(-1, (6, 4))
    kl, jl = keras.layers.BatchNormalization(), jt.layers.BatchNormalization()
    kl(xs[0]), jl(xs[0])
    for layer in (kl, jl):
        layer.set_weights(weights)
        layer.trainable = False
    assert jl.trainable_variables == [] and kl.trainable_variables == []
    close(jl(xs[0], training=True), kl(xs[0], training=True))
    close_all(jl.get_weights(), kl.get_weights())
    close_all(jl.get_weights(), weights)


# ---------------------------------------------------------------------------
# Dropout, Flatten


@pytest.mark.parametrize("rate", [0.25, 0.5])
def test_dropout_scaling_and_inference_identity_match_keras(rate):
    x = _rng(20).uniform(1, 2, (200, 50)).astype(F32)
    for layer, m in ((keras.layers.Dropout(rate, seed=1), tf), (jt.layers.Dropout(rate, seed=1), jt)):
        np.testing.assert_array_equal(_np(layer(x, training=False)), x)
        np.testing.assert_array_equal(_np(layer(x)), x)
        xt = m.constant(x)
        with m.GradientTape() as tape:
            tape.watch(xt)
            y = layer(xt, training=True)
        g, y = _np(tape.gradient(y, xt)), _np(y)
        kept = y != 0
        # survivors scaled by 1 / (1 - rate), the rest zero; the gradient is the same mask
        np.testing.assert_allclose(y[kept], x[kept] / F32(1 - rate), rtol=T32.fwd_rtol)
        np.testing.assert_allclose(g, kept / F32(1 - rate), rtol=T32.fwd_rtol)
        assert abs((1 - kept.mean()) - rate) < 0.03, type(layer)


def test_dropout_rate_zero_and_noise_shape_match_keras():
    x = _rng(21).uniform(1, 2, (64, 30)).astype(F32)
    for layer in (keras.layers.Dropout(0.0), jt.layers.Dropout(0.0)):
        np.testing.assert_array_equal(_np(layer(x, training=True)), x)
    for layer in (keras.layers.Dropout(0.5, noise_shape=(1, 30), seed=3),
                  jt.layers.Dropout(0.5, noise_shape=(1, 30), seed=3),
                  keras.layers.Dropout(0.5, noise_shape=(None, 1), seed=3),
                  jt.layers.Dropout(0.5, noise_shape=(None, 1), seed=3)):
        kept = _np(layer(x, training=True)) != 0
        axis = 0 if layer.noise_shape[0] == 1 else 1
        assert (kept == kept.take([0], axis=axis)).all(), "the mask must broadcast"
        assert 0 < kept.mean() < 1


@pytest.mark.parametrize("shape", [(2, 3, 4), (5,), (2, 1, 3, 2), (3, 7)])
def test_flatten_matches_keras(shape):
    x = _rng(22).standard_normal(shape).astype(F32)
    want = keras.layers.Flatten()(x)
    got = jt.layers.Flatten()(x)
    close(got, want)
    cot = _rng(23).standard_normal(tuple(want.shape)).astype(F32)
    close_all(_layer_grads(jt, jt.layers.Flatten(), x, cot),
              _layer_grads(tf, keras.layers.Flatten(), x, cot))


# ---------------------------------------------------------------------------
# Sequential


def _keras_model(final_activation=None, dropout=True):
    layers = [keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
              keras.layers.BatchNormalization()]
    if dropout:
        layers.append(keras.layers.Dropout(0.2))
    layers.append(keras.layers.Dense(3, activation=final_activation))
    return keras.Sequential(layers)


def _jt_model(final_activation=None, dropout=True):
    layers = [jt.layers.Dense(8, activation="relu", input_shape=(4,)),
              jt.layers.BatchNormalization()]
    if dropout:
        layers.append(jt.layers.Dropout(0.2))
    layers.append(jt.layers.Dense(3, activation=final_activation))
    return jt.Sequential(layers)


def _fixed_weights(model, seed=30):
    """Fixed weights in ``model.weights`` order (variances kept positive)."""
    rng = _rng(seed)
    out = []
    for v in model.weights:
        a = rng.standard_normal(tuple(v.shape)).astype(F32)
        if _kind(v) in ("moving_variance", "gamma"):
            a = np.abs(a) + F32(0.5)
        out.append(a)
    return out


def _summary_counts(model):
    lines = []
    model.summary(print_fn=lambda s, **kw: lines.append(str(s)))
    text = "\n".join(lines)
    return tuple(int(re.search(rf"{k} params: ([\d,]+)", text).group(1).replace(",", ""))
                 for k in ("Total", "Trainable", "Non-trainable"))


def test_sequential_variable_order_and_param_counts_match_keras():
    km, jm = _keras_model(), _jt_model()
    assert [_kind(v) for v in jm.weights] == [_kind(v) for v in km.weights]
    assert [tuple(v.shape) for v in jm.weights] == [tuple(v.shape) for v in km.weights]
    # Keras 3 also lists Dropout's seed-generator state in `variables` and
    # `non_trainable_variables` (not in the *_weights); jittape has no such variable
    for attr in ("trainable_weights", "non_trainable_weights"):
        assert [(_kind(v), tuple(v.shape)) for v in getattr(jm, attr)] == [
            (_kind(v), tuple(v.shape)) for v in getattr(km, attr)], attr
    assert [len(l.weights) for l in jm.layers] == [len(l.weights) for l in km.layers]
    assert [l.count_params() for l in jm.layers] == [l.count_params() for l in km.layers]
    assert jm.count_params() == km.count_params() == 99
    assert _summary_counts(jm) == _summary_counts(km) == (99, 83, 16)
    # a frozen layer leaves trainable_variables, and its weights count as non-trainable
    km.layers[0].trainable = False
    jm.layers[0].trainable = False
    assert [tuple(v.shape) for v in jm.trainable_variables] == [
        tuple(v.shape) for v in km.trainable_variables]
    assert _summary_counts(jm) == _summary_counts(km) == (99, 43, 56)


def test_sequential_get_and_set_weights_and_outputs_match_keras():
    km, jm = _keras_model("softmax"), _jt_model("softmax")
    weights = _fixed_weights(km)
    km.set_weights(weights)
    jm.set_weights(weights)
    close_all(jm.get_weights(), km.get_weights())
    x = _rng(31).standard_normal((6, 4)).astype(F32)
    close(jm(x), km(x))
    close(jm(x, training=False), km(x, training=False))


@pytest.mark.parametrize("training", [True, False])
def test_gradients_through_dense_bn_dense_match_keras(training):
    km, jm = _keras_model(dropout=False), _jt_model(dropout=False)
    weights = _fixed_weights(km)
    km.set_weights(weights)
    jm.set_weights(weights)
    x = _rng(32).standard_normal((8, 4)).astype(F32)
    y = _rng(33).integers(0, 3, 8)

    def run(m, model, loss_fn):
        with m.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=training))
        return [loss] + list(tape.gradient(loss, model.trainable_variables))

    want = run(tf, km, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    got = run(jt, jm, jt.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert len(got) == len(want) == 7
    close_all(got, want)
    close_all(jm.get_weights(), km.get_weights())  # moving statistics (updated if training)


def test_training_loop_with_adam_and_global_norm_clipping_matches_keras():
    km, jm = _keras_model(dropout=False), _jt_model(dropout=False)
    weights = _fixed_weights(km, seed=40)
    km.set_weights(weights)
    jm.set_weights(weights)
    kopt, jopt = keras.optimizers.Adam(0.05), jt.optimizers.Adam(0.05)
    kloss, jloss = keras.losses.MeanSquaredError(), jt.losses.MeanSquaredError()
    rng = _rng(41)
    for _ in range(3):
        x = rng.standard_normal((8, 4)).astype(F32)
        y = rng.standard_normal((8, 3)).astype(F32)
        with tf.GradientTape() as tape:
            lk = kloss(y, km(x, training=True))
        gk, nk = tf.clip_by_global_norm(tape.gradient(lk, km.trainable_variables), 1.0)
        kopt.apply_gradients(zip(gk, km.trainable_variables))
        with jt.GradientTape() as tape:
            lj = jloss(y, jm(x, training=True))
        gj, nj = jt.clip_by_global_norm(tape.gradient(lj, jm.trainable_variables), 1.0)
        jopt.apply_gradients(zip(gj, jm.trainable_variables))
        close(lj, lk)
        close(nj, nk)
        close_all(jm.get_weights(), km.get_weights())


# ---------------------------------------------------------------------------
# Optimizers


OPTIMIZERS = {
    "sgd": ("SGD", {"learning_rate": 0.1}),
    "sgd_momentum": ("SGD", {"learning_rate": 0.1, "momentum": 0.9}),
    "sgd_nesterov": ("SGD", {"learning_rate": 0.1, "momentum": 0.9, "nesterov": True}),
    "sgd_weight_decay": ("SGD", {"learning_rate": 0.1, "momentum": 0.5, "weight_decay": 0.05}),
    "adam": ("Adam", {"learning_rate": 0.01}),
    "adam_custom": ("Adam", {"learning_rate": 0.02, "beta_1": 0.5, "beta_2": 0.8,
                             "epsilon": 1e-3}),
    "adam_amsgrad": ("Adam", {"learning_rate": 0.01, "amsgrad": True}),
    "adam_weight_decay": ("Adam", {"learning_rate": 0.01, "weight_decay": 0.1}),
    "adamw": ("AdamW", {"learning_rate": 0.01, "weight_decay": 0.1}),
    "adamw_default_decay": ("AdamW", {"learning_rate": 0.01}),
    "adamw_amsgrad": ("AdamW", {"learning_rate": 0.01, "weight_decay": 0.1, "amsgrad": True}),
    "rmsprop": ("RMSprop", {"learning_rate": 0.01}),
    "rmsprop_rho": ("RMSprop", {"learning_rate": 0.01, "rho": 0.5, "epsilon": 1e-4}),
    "rmsprop_momentum": ("RMSprop", {"learning_rate": 0.01, "momentum": 0.9}),
    "rmsprop_centered": ("RMSprop", {"learning_rate": 0.01, "centered": True}),
    "rmsprop_centered_momentum": ("RMSprop", {"learning_rate": 0.01, "centered": True,
                                              "momentum": 0.5}),
}

_VARS0 = [_rng(50).standard_normal((3, 4)).astype(F32), _rng(51).standard_normal(4).astype(F32),
          np.asarray(F32(0.7))]


def _grad_sequence(n=3):
    """Gradients that shrink, grow and change sign (so AMSGrad's max matters)."""
    rng = _rng(52)
    scales = [3.0, 0.1, -1.5, 0.5, 2.0, -0.2]
    return [[(rng.standard_normal(v.shape) * s).astype(F32) for v in _VARS0]
            for s in scales[:n]]


def _run_optimizer(m, opt, grads_seq, init=_VARS0, changes=None):
    """Apply each gradient list in turn; the variables' values after every step."""
    Var = keras.Variable if m is tf else jt.Variable
    vs = [Var(a.copy()) for a in init]
    out = []
    for step, grads in enumerate(grads_seq):
        if changes and step in changes:
            changes[step](opt)
        opt.apply_gradients(zip([None if g is None else m.constant(g) for g in grads], vs))
        out.append([_np(v).copy() for v in vs] + [int(_np(opt.iterations))])
    return out


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_three_steps_match_keras(name):
    cls, kw = OPTIMIZERS[name]
    grads = _grad_sequence()
    want = _run_optimizer(tf, getattr(keras.optimizers, cls)(**kw), grads)
    got = _run_optimizer(jt, getattr(jt.optimizers, cls)(**kw), grads)
    for step, (g, w) in enumerate(zip(got, want)):
        assert g[-1] == w[-1] == step + 1
        close_all(g[:-1], w[:-1])


@pytest.mark.parametrize("name", ["sgd_nesterov", "adam_amsgrad", "adamw",
                                  "rmsprop_centered_momentum"])
def test_optimizer_on_float64_variables_matches_keras(name):
    """The float32 learning rate and the update's constants are cast to the variable's
    dtype on both sides."""
    cls, kw = OPTIMIZERS[name]
    init = [a.astype(np.float64) for a in _VARS0]
    grads = [[g.astype(np.float64) for g in gs] for gs in _grad_sequence()]
    want = _run_optimizer(tf, getattr(keras.optimizers, cls)(**kw), grads, init=init)
    got = _run_optimizer(jt, getattr(jt.optimizers, cls)(**kw), grads, init=init)
    for g, w in zip(got, want):
        assert all(a.dtype == np.float64 for a in g[:-1])
        close_all(g[:-1], w[:-1], t=tol("float64"))


def test_changing_the_learning_rate_between_steps_matches_keras():
    grads = _grad_sequence(4)

    def set_lr(value):
        def f(opt):
            opt.learning_rate = value
        return f

    changes = {1: set_lr(0.05), 3: set_lr(0.001)}
    for cls in ("SGD", "Adam", "RMSprop"):
        want = _run_optimizer(tf, getattr(keras.optimizers, cls)(0.1, ), grads, changes=changes)
        got = _run_optimizer(jt, getattr(jt.optimizers, cls)(0.1), grads, changes=changes)
        for g, w in zip(got, want):
            close_all(g[:-1], w[:-1])


def test_adamw_exclude_from_weight_decay_matches_keras():
    grads = _grad_sequence()
    out = []
    for m, mod in ((tf, keras.optimizers), (jt, jt.optimizers)):
        opt = mod.AdamW(0.01, weight_decay=0.2)
        Var = keras.Variable if m is tf else jt.Variable
        vs = [Var(a.copy()) for a in _VARS0]
        opt.exclude_from_weight_decay(var_list=[vs[1]])
        for gs in grads:
            opt.apply_gradients(zip([m.constant(g) for g in gs], vs))
        out.append([_np(v) for v in vs])
    close_all(out[1], out[0])


def test_none_gradient_is_skipped_like_keras():
    grads = _grad_sequence()
    grads = [[g[0], None, g[2]] for g in grads]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _run_optimizer(tf, keras.optimizers.Adam(0.01), grads)
        got = _run_optimizer(jt, jt.optimizers.Adam(0.01), grads)
    for g, w in zip(got, want):
        assert g[-1] == w[-1]
        close_all(g[:-1], w[:-1])
    close(got[-1][1], _VARS0[1])


@pytest.mark.parametrize("staircase", [False, True])
def test_exponential_decay_schedule_matches_keras(staircase):
    args = dict(initial_learning_rate=0.1, decay_steps=2, decay_rate=0.5, staircase=staircase)
    ks = keras.optimizers.schedules.ExponentialDecay(**args)
    js = jt.optimizers.schedules.ExponentialDecay(**args)
    for step in range(7):
        close(js(step), ks(step))
    grads = _grad_sequence(5)
    for cls, kw in (("SGD", {"momentum": 0.9}), ("Adam", {}), ("RMSprop", {"centered": True})):
        kopt = getattr(keras.optimizers, cls)(
            learning_rate=keras.optimizers.schedules.ExponentialDecay(**args), **kw)
        jopt = getattr(jt.optimizers, cls)(
            learning_rate=jt.optimizers.schedules.ExponentialDecay(**args), **kw)
        for g, w in zip(_run_optimizer(jt, jopt, grads), _run_optimizer(tf, kopt, grads)):
            close_all(g[:-1], w[:-1])
        close(jopt.learning_rate, kopt.learning_rate)


# ---------------------------------------------------------------------------
# Losses

N, C = 5, 4


def _loss_inputs(kind, extreme):
    rng = _rng(60)
    if kind == "regression":
        return (rng.standard_normal((N, C)).astype(F32),
                (rng.standard_normal((N, C)) * (1e3 if extreme else 1)).astype(F32))
    logits = rng.standard_normal((N, C)).astype(F32) * 2
    if extreme:
        logits[0] = [100.0, -100.0, 0.5, 50.0]
        logits[1] = [-1e4, 1e4, 30.0, -30.0]
        logits[2] = [20.0, 20.0, -20.0, 88.0]
    if kind == "binary":
        return rng.integers(0, 2, (N, C)).astype(F32), logits
    labels = rng.integers(0, C, N)
    labels[:3] = [1, 0, 3]  # the extreme rows put the label on a tiny probability
    if kind == "sparse":
        return labels, logits
    return np.eye(C, dtype=F32)[labels], logits


def _probs(kind, logits, extreme):
    if kind == "binary":
        with np.errstate(over="ignore"):
            p = (1 / (1 + np.exp(-logits.astype(np.float64)))).astype(F32)
    else:
        e = np.exp(logits.astype(np.float64) - logits.max(-1, keepdims=True))
        p = (e / e.sum(-1, keepdims=True)).astype(F32)
    if extreme:
        p[3] = [0.0, 1.0, 1e-12, 1 - 1e-9] if kind == "binary" else [0.0, 1.0, 0.0, 0.0]
        if kind != "binary":
            p[4] = [1e-12, 1e-9, 0.5, 0.5 - 1e-9]
    return p


LOSSES = {
    "mse": ("MeanSquaredError", {}, "regression"),
    "mae": ("MeanAbsoluteError", {}, "regression"),
    "bce": ("BinaryCrossentropy", {}, "binary"),
    "bce_logits": ("BinaryCrossentropy", {"from_logits": True}, "binary"),
    "bce_smoothing": ("BinaryCrossentropy", {"label_smoothing": 0.2}, "binary"),
    "bce_logits_smoothing": ("BinaryCrossentropy", {"from_logits": True,
                                                    "label_smoothing": 0.1}, "binary"),
    "cce": ("CategoricalCrossentropy", {}, "categorical"),
    "cce_logits": ("CategoricalCrossentropy", {"from_logits": True}, "categorical"),
    "cce_smoothing": ("CategoricalCrossentropy", {"label_smoothing": 0.2}, "categorical"),
    "cce_logits_smoothing": ("CategoricalCrossentropy", {"from_logits": True,
                                                         "label_smoothing": 0.1}, "categorical"),
    "scce": ("SparseCategoricalCrossentropy", {}, "sparse"),
    "scce_logits": ("SparseCategoricalCrossentropy", {"from_logits": True}, "sparse"),
}

SAMPLE_WEIGHTS = {
    None: None,
    "per_sample": _rng(61).uniform(0, 2, N).astype(F32),
    "column": _rng(61).uniform(0, 2, (N, 1)).astype(F32),
    "scalar": 2.5,
}


def _loss_and_grad(m, loss, y_true, y_pred, sample_weight):
    p = m.constant(y_pred)
    with m.GradientTape() as tape:
        tape.watch(p)
        value = loss(y_true, p, sample_weight=sample_weight)
    return [value, tape.gradient(value, p)]


@pytest.mark.parametrize("extreme", [False, True])
@pytest.mark.parametrize("sample_weight", list(SAMPLE_WEIGHTS), ids=str)
@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum", "none"])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_losses_match_keras(name, reduction, sample_weight, extreme):
    cls, kw, kind = LOSSES[name]
    y_true, logits = _loss_inputs(kind, extreme)
    y_pred = logits if kw.get("from_logits") or kind == "regression" else _probs(
        kind, logits, extreme)
    sw = SAMPLE_WEIGHTS[sample_weight]
    want = _loss_and_grad(tf, getattr(keras.losses, cls)(reduction=reduction, **kw),
                          y_true, y_pred, sw)
    got = _loss_and_grad(jt, getattr(jt.losses, cls)(reduction=reduction, **kw),
                         y_true, y_pred, sw)
    assert np.isfinite(_np(want[0])).all()
    close_all(got, want)


@pytest.mark.parametrize("reduction", ["mean", "mean_with_sample_weight"])
@pytest.mark.parametrize("name", ["mse", "bce_logits", "cce", "scce_logits"])
def test_mean_reductions_match_keras(name, reduction):
    cls, kw, kind = LOSSES[name]
    y_true, logits = _loss_inputs(kind, False)
    y_pred = logits if kw.get("from_logits") or kind == "regression" else _probs(
        kind, logits, False)
    for sw in list(SAMPLE_WEIGHTS.values()) + [np.zeros(N, F32)]:
        close_all(
            _loss_and_grad(jt, getattr(jt.losses, cls)(reduction=reduction, **kw),
                           y_true, y_pred, sw),
            _loss_and_grad(tf, getattr(keras.losses, cls)(reduction=reduction, **kw),
                           y_true, y_pred, sw))


@pytest.mark.parametrize(
    "activation, loss, labels",
    [
        ("sigmoid", "BinaryCrossentropy", "binary"),
        ("softmax", "CategoricalCrossentropy", "categorical"),
        ("softmax", "SparseCategoricalCrossentropy", "sparse"),
    ],
)
def test_crossentropy_of_an_activation_output_uses_its_logits_like_keras(
        activation, loss, labels):
    """Keras 3 keeps a sigmoid/softmax activation's input on its output
    (``_keras_logits``) and its crossentropies compute from it: saturated outputs give
    the exact loss and a nonzero gradient instead of clipped probabilities."""
    rng = _rng(90)
    x = (rng.standard_normal((6, 3)) * 40).astype(F32)  # saturates the activation
    w = rng.standard_normal((3, 4)).astype(F32)
    b = rng.standard_normal(4).astype(F32)
    y = rng.integers(0, 4, 6)
    y = {"binary": (rng.integers(0, 2, (6, 4))).astype(F32),
         "categorical": np.eye(4, dtype=F32)[y], "sparse": y}[labels]
    for from_logits in (False, True):
        out = []
        for m, mod in ((tf, keras), (jt, jt)):
            layer = mod.layers.Dense(4, activation=activation)
            layer(x)
            layer.set_weights([w, b])
            loss_fn = getattr(mod.losses, loss)(from_logits=from_logits)
            with m.GradientTape() as tape, warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                value = loss_fn(y, layer(x))
            out.append([value] + list(tape.gradient(value, layer.trainable_variables)))
            # from_logits=True on an activation's output: Keras warns, and uses the logits
            assert any("from_logits=True" in str(c.message) for c in caught) == from_logits
        close_all(out[1], out[0])
        assert np.abs(_np(out[1][1])).max() > 0


def test_a_sigmoid_output_changed_after_the_layer_is_clipped_like_keras():
    """Only the layer's own output carries its logits: a slice of it is a new tensor,
    and its probabilities are clipped on both sides."""
    rng = _rng(91)
    x = (rng.standard_normal((6, 3)) * 40).astype(F32)
    w = rng.standard_normal((3, 2)).astype(F32)
    y = rng.integers(0, 2, (6, 1)).astype(F32)
    out = []
    for m, mod in ((tf, keras), (jt, jt)):
        layer = mod.layers.Dense(2, activation="sigmoid", use_bias=False)
        layer(x)
        layer.set_weights([w])
        with m.GradientTape() as tape:
            value = mod.losses.BinaryCrossentropy()(y, layer(x)[:, :1])
        out.append([value] + list(tape.gradient(value, layer.trainable_variables)))
    close_all(out[1], out[0])


@pytest.mark.parametrize("name", ["mse", "bce", "bce_logits", "scce", "scce_logits"])
def test_losses_bring_a_trailing_unit_axis_to_the_same_rank_like_keras(name):
    cls, kw, kind = LOSSES[name]
    rng = _rng(62)
    if kind == "sparse":
        y_true = rng.integers(0, C, (N, 1))
        y_pred = rng.standard_normal((N, C)).astype(F32)
        if not kw:
            y_pred = _probs(kind, y_pred, False)
    else:
        y_true = rng.integers(0, 2, N).astype(F32)
        y_pred = rng.uniform(0.05, 0.95, (N, 1)).astype(F32)
    for reduction in ("sum_over_batch_size", "none"):
        for sw in (None, SAMPLE_WEIGHTS["per_sample"]):
            want = _loss_and_grad(tf, getattr(keras.losses, cls)(reduction=reduction, **kw),
                                  y_true, y_pred, sw)
            got = _loss_and_grad(jt, getattr(jt.losses, cls)(reduction=reduction, **kw),
                                 y_true, y_pred, sw)
            close_all(got, want)


def test_losses_on_rank3_predictions_match_keras():
    rng = _rng(63)
    y_true = rng.standard_normal((2, 3, 4)).astype(F32)
    y_pred = rng.standard_normal((2, 3, 4)).astype(F32)
    sw = rng.uniform(0, 1, (2, 3)).astype(F32)
    labels = rng.integers(0, 4, (2, 3))
    for reduction in ("sum_over_batch_size", "sum", "none"):
        for w in (None, sw):
            close_all(
                _loss_and_grad(jt, jt.losses.MeanSquaredError(reduction=reduction),
                               y_true, y_pred, w),
                _loss_and_grad(tf, keras.losses.MeanSquaredError(reduction=reduction),
                               y_true, y_pred, w))
            close_all(
                _loss_and_grad(jt, jt.losses.SparseCategoricalCrossentropy(
                    from_logits=True, reduction=reduction), labels, y_pred, w),
                _loss_and_grad(tf, keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True, reduction=reduction), labels, y_pred, w))


@pytest.mark.parametrize("name", ["mse", "mae", "binary", "categorical", "sparse"])
def test_loss_functions_match_keras(name):
    rng = _rng(64)
    fns = {
        "mse": ("mse", "regression", {}),
        "mae": ("mae", "regression", {}),
        "binary": ("binary_crossentropy", "binary", {"label_smoothing": 0.1}),
        "categorical": ("categorical_crossentropy", "categorical", {"label_smoothing": 0.1}),
        "sparse": ("sparse_categorical_crossentropy", "sparse", {}),
    }
    fn, kind, kw = fns[name]
    y_true, logits = _loss_inputs(kind, False)
    y_pred = logits if kind == "regression" else _probs(kind, logits, False)
    del rng
    close(getattr(jt.losses, fn)(y_true, y_pred, **kw),
          getattr(keras.losses, fn)(y_true, y_pred, **kw))
    if kind != "regression":
        close(getattr(jt.losses, fn)(y_true, logits, from_logits=True, **kw),
              getattr(keras.losses, fn)(y_true, logits, from_logits=True, **kw))


# ---------------------------------------------------------------------------
# Clipping


A = _rng(70).standard_normal((3, 4)).astype(F32)
V = _rng(71).standard_normal(4).astype(F32)
S = np.asarray(F32(-2.0))


def _clip_global(m, arrays, clip_norm, with_grads=True):
    ts = [None if a is None else m.constant(a) for a in arrays]
    live = [t for t in ts if t is not None]
    cots = [None if a is None else _rng(72 + i).standard_normal(a.shape).astype(F32)
            for i, a in enumerate(arrays)]
    with m.GradientTape() as tape:
        tape.watch(live)
        clipped, norm = m.clip_by_global_norm(ts, clip_norm)
        s = None
        for c, r in zip(clipped, cots):
            if c is not None:
                term = m.reduce_sum(c * r)
                s = term if s is None else s + term
    grads = tape.gradient(s, live) if with_grads else []
    return [norm] + list(clipped) + list(grads)


@pytest.mark.parametrize(
    "case, arrays, clip_norm",
    [
        ("clipped", [A, V, S], 1.5),
        ("unclipped", [A, V, S], 100.0),
        ("with_none", [A, None, V], 0.5),
        ("at_the_norm", [A], float(np.sqrt(np.sum(A.astype(np.float64) ** 2)))),
        ("zeros", [np.zeros((2, 2), F32), np.zeros(3, F32)], 1.0),
        ("huge", [A * F32(1e18), V], 1.0),
    ],
)
def test_clip_by_global_norm_matches_tensorflow(case, arrays, clip_norm):
    close_all(_clip_global(jt, arrays, clip_norm), _clip_global(tf, arrays, clip_norm))


@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_clip_by_global_norm_of_non_finite_tensors_matches_tensorflow(bad):
    a = A.copy()
    a[0, 0] = bad
    want = _clip_global(tf, [a, V], 1.0, with_grads=False)
    got = _clip_global(jt, [a, V], 1.0, with_grads=False)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.isnan(_np(g)), np.isnan(_np(w)))
    np.testing.assert_array_equal(_np(got[0]), _np(want[0]))


def _clip_norm(m, a, clip_norm, axes):
    t = m.constant(a)
    cot = _rng(80).standard_normal(a.shape).astype(F32)
    with m.GradientTape() as tape:
        tape.watch(t)
        y = m.clip_by_norm(t, clip_norm, axes=axes)
        s = m.reduce_sum(y * cot)
    return [y, tape.gradient(s, t)]


@pytest.mark.parametrize("axes", [None, 0, 1, [0, 1]], ids=str)
@pytest.mark.parametrize("clip_norm", [0.5, 1.5, 100.0])
def test_clip_by_norm_matches_tensorflow(clip_norm, axes):
    close_all(_clip_norm(jt, A, clip_norm, axes), _clip_norm(tf, A, clip_norm, axes))


def test_clip_by_norm_of_zeros_matches_tensorflow():
    z = np.zeros((2, 3), F32)
    close_all(_clip_norm(jt, z, 1.0, None), _clip_norm(tf, z, 1.0, None))
    z[0] = [3.0, 4.0, 0.0]  # one zero row with axes=1
    close_all(_clip_norm(jt, z, 1.0, 1), _clip_norm(tf, z, 1.0, 1))


# ---------------------------------------------------------------------------
# Core ops where jittape once differed from TF (fixed in jittape/ops/nn.py and clip.py)


def test_binary_crossentropy_gradient_at_a_zero_logit_matches_keras():
    y_true = np.array([[0.0, 1.0, 0.0, 1.0]], F32)
    z = np.zeros((1, 4), F32)
    loss = dict(from_logits=True)
    close_all(_loss_and_grad(jt, jt.losses.BinaryCrossentropy(**loss), y_true, z, None),
              _loss_and_grad(tf, keras.losses.BinaryCrossentropy(**loss), y_true, z, None))


def test_log_softmax_with_large_logits_matches_tensorflow():
    z = np.array([[300.0, 288.8, 0.0]], F32)
    close(jt.nn.log_softmax(jt.constant(z)), tf.nn.log_softmax(z))
