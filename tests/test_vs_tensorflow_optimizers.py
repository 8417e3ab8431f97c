"""Every optimizer, every base option and every schedule against tf.keras (Keras 3), run only
where TensorFlow is installed (``pip install -e '.[tf]'``); the default suite does not need it.

Both sides start from the same weights and get the same gradients for 5 steps; the
variables (and the EMA averages, accumulators and ``iterations``) are compared after
every step with the tolerance row of their dtype. Schedules are compared at many steps,
and configs are read across: Keras' ``get_config()`` into jittape's ``from_config`` and
jittape's ``serialize`` into Keras' ``deserialize``.
"""

import numpy as np
import pytest
from tolerances import tol

import jittape as jt

tf = pytest.importorskip("tensorflow")
keras = tf.keras

F32 = np.float32
STEPS = 5


def _rng(seed):
    return np.random.default_rng(seed)


def _vars0(dtype=F32):
    return [_rng(60).standard_normal((3, 4)).astype(dtype),
            _rng(61).standard_normal(4).astype(dtype)]


def _grads(dtype=F32, n=STEPS):
    """Gradients that shrink, grow and change sign (so AMSGrad's and Adamax's max matter)."""
    rng = _rng(62)
    scales = [3.0, 0.1, -1.5, 0.5, 2.0, -0.2, 1.0, -0.7]
    return [[(rng.standard_normal(v.shape) * s).astype(dtype) for v in _vars0()]
            for s in scales[:n]]


def _np(x):
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def close(got, want, dtype):
    t = tol(dtype)
    np.testing.assert_allclose(_np(got), _np(want), rtol=t.fwd_rtol, atol=t.fwd_atol)


def _run(m, opt, grads, init):
    """The variables (and ``iterations``) after each step."""
    Var = keras.Variable if m is tf else jt.Variable
    vs = [Var(a.copy()) for a in init]
    out = []
    for gs in grads:
        opt.apply_gradients(zip([m.constant(g) for g in gs], vs))
        out.append(([_np(v).copy() for v in vs], int(_np(opt.iterations))))
    return out, vs


def _compare(cls, kw, dtype=F32, n=STEPS):
    init, grads = _vars0(dtype), _grads(dtype, n)
    kopt, jopt = getattr(keras.optimizers, cls)(**kw), getattr(jt.optimizers, cls)(**kw)
    want, kvars = _run(tf, kopt, grads, init)
    got, jvars = _run(jt, jopt, grads, init)
    for step, ((g, gi), (w, wi)) in enumerate(zip(got, want)):
        assert gi == wi, f"step {step}: iterations {gi} != Keras' {wi}"
        for a, b in zip(g, w):
            assert a.dtype == dtype
            close(a, b, dtype)
    return kopt, jopt, kvars, jvars


OPTIMIZERS = {
    "sgd": ("SGD", {"learning_rate": 0.1}),
    "sgd_nesterov": ("SGD", {"learning_rate": 0.05, "momentum": 0.9, "nesterov": True}),
    "adam": ("Adam", {"learning_rate": 0.01}),
    "adam_amsgrad": ("Adam", {"learning_rate": 0.01, "amsgrad": True}),
    "adamw_amsgrad": ("AdamW", {"learning_rate": 0.01, "weight_decay": 0.1, "amsgrad": True}),
    "rmsprop_centered": ("RMSprop", {"learning_rate": 0.01, "centered": True, "momentum": 0.5}),
    "adagrad": ("Adagrad", {"learning_rate": 0.1}),
    "adagrad_start": ("Adagrad", {"learning_rate": 0.1, "initial_accumulator_value": 0.7,
                                  "epsilon": 1e-3}),
    "adadelta": ("Adadelta", {"learning_rate": 1.0}),
    "adadelta_rho": ("Adadelta", {"learning_rate": 0.5, "rho": 0.8, "epsilon": 1e-4}),
    "adamax": ("Adamax", {"learning_rate": 0.02}),
    "adamax_betas": ("Adamax", {"learning_rate": 0.02, "beta_1": 0.8, "beta_2": 0.9}),
    "nadam": ("Nadam", {"learning_rate": 0.02}),
    "nadam_betas": ("Nadam", {"learning_rate": 0.02, "beta_1": 0.85, "beta_2": 0.95}),
    "ftrl": ("Ftrl", {"learning_rate": 0.1}),
    "ftrl_regularized": ("Ftrl", {"learning_rate": 0.1, "learning_rate_power": -0.7,
                                  "l1_regularization_strength": 0.05,
                                  "l2_regularization_strength": 0.1,
                                  "l2_shrinkage_regularization_strength": 0.02,
                                  "beta": 0.3, "initial_accumulator_value": 0.2}),
    "lion": ("Lion", {"learning_rate": 0.01}),
    "lion_betas": ("Lion", {"learning_rate": 0.01, "beta_1": 0.5, "beta_2": 0.9}),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_five_steps_match_keras(name):
    _compare(*OPTIMIZERS[name])


@pytest.mark.parametrize("name", ["sgd_nesterov", "adagrad_start", "adadelta_rho",
                                  "adamax_betas", "nadam_betas", "ftrl_regularized",
                                  "lion_betas", "adamw_amsgrad"])
def test_optimizer_on_float64_variables_matches_keras(name):
    """Keras casts some hyperparameters through float32 (and some not); jittape rounds the
    same ones."""
    _compare(*OPTIMIZERS[name], dtype=np.float64)


OPTIONS = {
    "clipnorm": ("Adam", {"learning_rate": 0.01, "clipnorm": 1.0}),
    "clipvalue": ("SGD", {"learning_rate": 0.1, "momentum": 0.5, "clipvalue": 0.5}),
    "global_clipnorm": ("RMSprop", {"learning_rate": 0.01, "global_clipnorm": 2.0}),
    "weight_decay_sgd": ("SGD", {"learning_rate": 0.1, "weight_decay": 0.05}),
    "weight_decay_lion": ("Lion", {"learning_rate": 0.01, "weight_decay": 0.5}),
    "loss_scale": ("Adagrad", {"learning_rate": 0.1, "loss_scale_factor": 128.0}),
    "ema": ("Adam", {"learning_rate": 0.05, "use_ema": True, "ema_momentum": 0.9}),
    "ema_overwrite": ("SGD", {"learning_rate": 0.1, "use_ema": True, "ema_momentum": 0.8,
                              "ema_overwrite_frequency": 2}),
    "accumulation": ("Adam", {"learning_rate": 0.05, "gradient_accumulation_steps": 2}),
    "accumulation_nadam": ("Nadam", {"learning_rate": 0.05, "gradient_accumulation_steps": 3}),
    "accumulation_ema": ("SGD", {"learning_rate": 0.1, "momentum": 0.9,
                                 "gradient_accumulation_steps": 2, "use_ema": True,
                                 "ema_overwrite_frequency": 2}),
    "accumulation_clip_decay": ("AdamW", {"learning_rate": 0.05, "weight_decay": 0.2,
                                          "gradient_accumulation_steps": 2,
                                          "global_clipnorm": 1.0}),
    "loss_scale_clipnorm": ("Ftrl", {"learning_rate": 0.1, "loss_scale_factor": 4.0,
                                     "clipnorm": 0.5}),
}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_option_five_steps_match_keras(name):
    cls, kw = OPTIONS[name]
    kopt, jopt, kvars, jvars = _compare(cls, kw, n=7)
    if kw.get("use_ema"):
        for kv, jv, avg in zip(kvars, jvars, kopt._model_variables_moving_average):
            close(jopt.get_slot(jv, "average").numpy(), _np(avg), F32)
        kopt.finalize_variable_values(kvars)
        jopt.finalize_variable_values(jvars)
        for kv, jv in zip(kvars, jvars):
            close(jv.numpy(), _np(kv), F32)
    if kw.get("gradient_accumulation_steps"):
        for kv, jv, acc in zip(kvars, jvars, kopt._accumulated_gradients):
            close(jopt.get_slot(jv, "gradient_accumulator").numpy(), _np(acc), F32)


def test_schedule_as_learning_rate_with_accumulation_matches_keras():
    """The schedule reads the call count, ``iterations`` the update count."""
    def make(m):
        s = m.optimizers.schedules.PiecewiseConstantDecay([1, 3], [0.1, 0.05, 0.01])
        return m.optimizers.SGD(s, gradient_accumulation_steps=2)

    init, grads = _vars0(), _grads(n=7)
    want, _ = _run(tf, make(keras), grads, init)
    got, _ = _run(jt, make(jt), grads, init)
    for (g, gi), (w, wi) in zip(got, want):
        assert gi == wi
        for a, b in zip(g, w):
            close(a, b, F32)


SCHEDULES = {
    "exponential": ("ExponentialDecay", {"initial_learning_rate": 0.1, "decay_steps": 7,
                                         "decay_rate": 0.6}),
    "exponential_staircase": ("ExponentialDecay", {"initial_learning_rate": 0.1,
                                                   "decay_steps": 7, "decay_rate": 0.6,
                                                   "staircase": True}),
    "piecewise": ("PiecewiseConstantDecay", {"boundaries": [5, 12, 30],
                                             "values": [1.0, 0.5, 0.1, 0.01]}),
    "polynomial": ("PolynomialDecay", {"initial_learning_rate": 0.1, "decay_steps": 40,
                                       "end_learning_rate": 0.01, "power": 0.5}),
    "polynomial_cycle": ("PolynomialDecay", {"initial_learning_rate": 0.1, "decay_steps": 15,
                                             "power": 2.0, "cycle": True}),
    "inverse_time": ("InverseTimeDecay", {"initial_learning_rate": 0.1, "decay_steps": 6,
                                          "decay_rate": 0.5}),
    "inverse_time_staircase": ("InverseTimeDecay", {"initial_learning_rate": 0.1,
                                                    "decay_steps": 6, "decay_rate": 0.5,
                                                    "staircase": True}),
    "cosine": ("CosineDecay", {"initial_learning_rate": 0.1, "decay_steps": 50,
                               "alpha": 0.1}),
    "cosine_warmup": ("CosineDecay", {"initial_learning_rate": 0.01, "decay_steps": 50,
                                      "alpha": 0.05, "warmup_target": 0.2,
                                      "warmup_steps": 10}),
    "cosine_restarts": ("CosineDecayRestarts", {"initial_learning_rate": 0.1,
                                                "first_decay_steps": 10}),
    "cosine_restarts_mul": ("CosineDecayRestarts", {"initial_learning_rate": 0.1,
                                                    "first_decay_steps": 8, "t_mul": 1.5,
                                                    "m_mul": 0.7, "alpha": 0.1}),
    "cosine_restarts_t1": ("CosineDecayRestarts", {"initial_learning_rate": 0.1,
                                                   "first_decay_steps": 9, "t_mul": 1.0,
                                                   "m_mul": 0.5}),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_matches_keras_at_many_steps(name):
    cls, kw = SCHEDULES[name]
    ks, js = getattr(keras.optimizers.schedules, cls)(**kw), getattr(
        jt.optimizers.schedules, cls)(**kw)
    steps = np.arange(0, 150, dtype=np.int64)
    want = np.array([float(ks(tf.constant(s))) for s in steps])
    step = jt.Variable(np.int64(0), trainable=False)
    got = []
    for s in steps:
        step.assign(s)
        got.append(float(js(step)))
    close(np.array(got), want, F32)
    assert js.get_config() == ks.get_config()


@pytest.mark.parametrize("name", sorted({cls for cls, _ in OPTIMIZERS.values()}))
def test_keras_config_round_trips_through_jittape(name):
    kopt = getattr(keras.optimizers, name)(
        learning_rate=keras.optimizers.schedules.CosineDecay(0.1, 20, warmup_target=0.5,
                                                             warmup_steps=3),
        clipnorm=2.0, use_ema=True, ema_momentum=0.9, gradient_accumulation_steps=3)
    kconfig = kopt.get_config()
    jopt = getattr(jt.optimizers, name).from_config(kconfig)
    assert jopt.get_config() == kconfig
    assert jt.optimizers.serialize(jopt) == keras.optimizers.serialize(kopt)
    back = keras.optimizers.deserialize(jt.optimizers.serialize(jopt))
    assert back.get_config() == kconfig
    plain = getattr(keras.optimizers, name)(learning_rate=0.25)
    assert jt.optimizers.get(keras.optimizers.serialize(plain)).get_config() == (
        plain.get_config())


@pytest.mark.parametrize("name", ["adam", "sgd", "rmsprop", "adagrad", "adadelta", "adamax",
                                  "nadam", "ftrl", "lion", "adamw"])
def test_get_by_name_gives_keras_defaults(name):
    want = keras.optimizers.get(name).get_config()
    got = jt.optimizers.get(name).get_config()
    want.pop("name"), got.pop("name")
    assert got == want
