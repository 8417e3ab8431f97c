"""Every optimizer's update rule against Keras' formulas written out in numpy
(``optimizer_reference.py``), over several steps on random float32 and float64 variables;
defaults, slots, validation and the optimizers inside ``@jt.function``."""

import numpy as np
import pytest
from optimizer_reference import RULES, apply_reference, f32
from tolerances import tol

import jittape as jt
from jittape.keras import optimizers as O

STEPS = 4
LR = 0.0625  # a float32 value: the rate lives in a float32 variable, as in Keras

CASES = {
    "sgd": ("SGD", {}),
    "sgd_momentum": ("SGD", {"momentum": 0.9}),
    "sgd_nesterov": ("SGD", {"momentum": 0.7, "nesterov": True}),
    "adam": ("Adam", {}),
    "adam_amsgrad": ("Adam", {"amsgrad": True, "beta_1": 0.8}),
    "rmsprop_centered": ("RMSprop", {"centered": True, "momentum": 0.3}),
    "adagrad": ("Adagrad", {}),
    "adagrad_start": ("Adagrad", {"initial_accumulator_value": 0.3, "epsilon": 1e-3}),
    "adadelta": ("Adadelta", {}),
    "adadelta_rho": ("Adadelta", {"rho": 0.7, "epsilon": 1e-4}),
    "adamax": ("Adamax", {}),
    "adamax_betas": ("Adamax", {"beta_1": 0.7, "beta_2": 0.9}),
    "nadam": ("Nadam", {}),
    "nadam_betas": ("Nadam", {"beta_1": 0.8, "beta_2": 0.95, "epsilon": 1e-5}),
    "ftrl": ("Ftrl", {}),
    "ftrl_regularized": ("Ftrl", {"learning_rate_power": -0.6, "l1_regularization_strength": 0.01,
                                  "l2_regularization_strength": 0.2,
                                  "l2_shrinkage_regularization_strength": 0.05, "beta": 0.4,
                                  "initial_accumulator_value": 0.2}),
    "lion": ("Lion", {}),
    "lion_betas": ("Lion", {"beta_1": 0.6, "beta_2": 0.95}),
}


def data(dtype, steps=STEPS, seed=0):
    rng = np.random.default_rng(seed)
    ws = [rng.standard_normal((3, 4)).astype(dtype), rng.standard_normal(5).astype(dtype)]
    scales = [2.0, 0.1, -1.0, 0.5, 1.5, -0.3, 0.8, 1.0]
    grads = [[(rng.standard_normal(w.shape) * s).astype(dtype) for w in ws]
             for s in scales[:steps]]
    return ws, grads


def run_eager(opt, ws, grads):
    vs = [jt.Variable(w.copy(), name=f"w{i}") for i, w in enumerate(ws)]
    history = []
    for gs in grads:
        opt.apply_gradients(zip([jt.constant(g) for g in gs], vs))
        history.append([v.numpy().copy() for v in vs])
    return history, vs


def close(got, want, dtype):
    t = tol(dtype)
    np.testing.assert_allclose(got, want, rtol=t.fwd_rtol, atol=t.fwd_atol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_update_rule_matches_the_keras_formula(name, dtype):
    cls, hyper = CASES[name]
    ws, grads = data(dtype)
    got, vs = run_eager(getattr(O, cls)(LR, **hyper), ws, grads)
    want, _, _ = apply_reference(cls, hyper, ws, grads, LR)
    for step, (g, w) in enumerate(zip(got, want)):
        for a, b in zip(g, w):
            assert a.dtype == dtype
            close(a, b, dtype)
    assert not np.allclose(got[-1][0], ws[0])  # something moved


def test_the_float32_rounding_matters_for_float64_variables():
    """The float64 comparison above is tight enough to see the float32 casts: without
    them the reference is off by more than the float64 tolerance."""
    ws, grads = data(np.float64)
    got, _ = run_eager(O.Nadam(LR, beta_1=0.8), ws, grads)
    init, step = RULES["Nadam"](beta_1=0.8)
    w, s = ws[0].copy(), init(ws[0])
    for t, gs in enumerate(grads, start=1):
        # Nadam with exact betas: the same formula without the float32 casts
        s["u_product"] *= 0.8 * (1 - 0.5 * 0.96 ** t)
        mu_t, mu_next = 0.8 * (1 - 0.5 * 0.96 ** t), 0.8 * (1 - 0.5 * 0.96 ** (t + 1))
        g = gs[0]
        s["m"] = s["m"] + (g - s["m"]) * 0.2
        s["v"] = s["v"] + (g * g - s["v"]) * (1 - 0.999)
        m_hat = mu_next * s["m"] / (1 - s["u_product"] * mu_next) + (1 - mu_t) * g / (
            1 - s["u_product"])
        w = w - m_hat * LR / (np.sqrt(s["v"] / (1 - 0.999 ** t)) + 1e-7)
    t64 = tol("float64")
    assert not np.allclose(got[-1][0], w, rtol=t64.fwd_rtol, atol=t64.fwd_atol)
    np.testing.assert_allclose(got[-1][0], w, rtol=1e-5)  # but only by float32 roundings


def test_defaults_are_keras():
    expect = {  # Keras 3's documented defaults
        O.Adagrad: {"learning_rate": f32(0.001), "initial_accumulator_value": 0.1,
                    "epsilon": 1e-7},
        O.Adadelta: {"learning_rate": f32(0.001), "rho": 0.95, "epsilon": 1e-7},
        O.Adamax: {"learning_rate": f32(0.001), "beta_1": 0.9, "beta_2": 0.999,
                   "epsilon": 1e-7},
        O.Nadam: {"learning_rate": f32(0.001), "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
        O.Ftrl: {"learning_rate": f32(0.001), "learning_rate_power": -0.5,
                 "initial_accumulator_value": 0.1, "l1_regularization_strength": 0.0,
                 "l2_regularization_strength": 0.0, "l2_shrinkage_regularization_strength": 0.0,
                 "beta": 0.0},
        O.Lion: {"learning_rate": f32(0.001), "beta_1": 0.9, "beta_2": 0.99},
        O.SGD: {"learning_rate": f32(0.01), "momentum": 0.0, "nesterov": False},
        O.Adam: {"learning_rate": f32(0.001), "amsgrad": False},
        O.AdamW: {"weight_decay": 0.004, "amsgrad": False},
        O.RMSprop: {"rho": 0.9, "momentum": 0.0, "centered": False},
    }
    for cls, want in expect.items():
        config = cls().get_config()
        for k, v in want.items():
            assert config[k] == v, (cls.__name__, k)


SLOTS = {"SGD": ({"momentum": 0.5}, ["momentum"]), "Adagrad": ({}, ["accumulator"]),
         "Adadelta": ({}, ["accum_grad", "accum_var"]), "Adamax": ({}, ["m", "v"]),
         "Nadam": ({}, ["m", "v"]), "Ftrl": ({}, ["accumulator", "linear"]),
         "Lion": ({}, ["momentum"])}


@pytest.mark.parametrize("cls", sorted(SLOTS))
def test_slots_and_their_starting_values(cls):
    hyper, names = SLOTS[cls]
    opt = getattr(O, cls)(LR, **hyper)
    v = jt.Variable(np.ones((2, 2), np.float32), name="k")
    opt.build([v])
    assert opt.get_slot_names() == names
    for s in names:
        slot = opt.get_slot(v, s)
        assert slot.dtype == jt.float32 and slot.shape == (2, 2) and not slot.trainable
        start = f32(0.1) if s == "accumulator" else 0.0  # Adagrad's and Ftrl's default
        np.testing.assert_array_equal(slot.numpy(), np.full((2, 2), start, np.float32))
    n_extra = 1 if cls == "Nadam" else 0  # Nadam's u_product
    assert len(opt.variables) == 2 + len(names) + n_extra


def test_nadam_keeps_one_u_product_in_the_first_variables_dtype():
    opt = O.Nadam(LR)
    a, b = jt.Variable(np.ones(2)), jt.Variable(np.ones(3, np.float32))
    for _ in range(3):
        opt.apply_gradients([(np.full(2, 0.5), a), (np.full(3, 0.5, np.float32), b)])
    u = [v for v in opt.variables if v.name == "u_product"]
    assert len(u) == 1 and u[0].dtype == jt.float64
    want = 1.0
    for t in (1, 2, 3):
        want *= 0.9 * (1 - 0.5 * 0.96 ** t)
    np.testing.assert_allclose(u[0].numpy(), want, rtol=1e-12)


def test_ftrl_l1_sets_small_coordinates_to_zero():
    opt = O.Ftrl(0.5, l1_regularization_strength=10.0)
    v = jt.Variable(np.array([0.3, -0.2]))
    opt.apply_gradients([(np.array([0.1, -0.05]), v)])
    np.testing.assert_array_equal(v.numpy(), [0.0, 0.0])


def test_lion_steps_are_the_learning_rate_in_size():
    opt = O.Lion(0.25)
    v = jt.Variable(np.zeros(3))
    opt.apply_gradients([(np.array([3.0, -1e-3, 0.0]), v)])
    np.testing.assert_array_equal(v.numpy(), [-0.25, 0.25, 0.0])


@pytest.mark.parametrize("make,match", [
    (lambda: O.Lion(beta_1=0.0), "Lion: beta_1 must be in \\(0, 1\\].*got 0.0"),
    (lambda: O.Adamax(beta_2=1.0), "Adamax: beta_2 must be in \\[0, 1\\), got 1.0"),
    (lambda: O.Nadam(beta_1=-0.1), "Nadam: beta_1"),
    (lambda: O.Adagrad(initial_accumulator_value=-1), "Adagrad: initial_accumulator_value"),
    (lambda: O.Ftrl(learning_rate_power=0.5), "Ftrl: learning_rate_power must be <= 0, got 0.5"),
    (lambda: O.Ftrl(l1_regularization_strength=-1.0), "Ftrl: l1_regularization_strength"),
    (lambda: O.Ftrl(beta=-1.0), "Ftrl: beta must be >= 0"),
    (lambda: O.Adadelta(rho=2.0), "Adadelta: rho must be in \\[0, 1\\], got 2.0"),
    (lambda: O.SGD(momentum="a lot"), "SGD: momentum"),
    (lambda: O.Adam(nonsense=1), "Adam: argument\\(s\\) not recognized: \\{'nonsense': 1\\}"),
])
def test_bad_hyperparameters_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_keras_decay_argument_warns_and_is_ignored():
    with pytest.warns(UserWarning, match="`decay` is no longer supported"):
        opt = O.Adagrad(0.5, decay=0.1)
    assert "decay" not in opt.get_config()


FUNCTION_CASES = ["sgd_nesterov", "adagrad_start", "adadelta", "adamax", "nadam",
                  "ftrl_regularized", "lion", "adam_amsgrad"]


@pytest.mark.parametrize("name", FUNCTION_CASES)
def test_optimizer_inside_function_matches_eager(name):
    cls, hyper = CASES[name]
    ws, grads = data(np.float64, steps=5, seed=3)
    want, _ = run_eager(getattr(O, cls)(LR, **hyper), ws, grads)
    opt = getattr(O, cls)(LR, **hyper)
    vs = [jt.Variable(w.copy()) for w in ws]

    @jt.function
    def step(g0, g1):
        opt.apply_gradients([(g0, vs[0]), (g1, vs[1])])

    for i, gs in enumerate(grads):
        step(jt.constant(gs[0]), jt.constant(gs[1]))
        for v, w in zip(vs, want[i]):
            np.testing.assert_allclose(v.numpy(), w, rtol=1e-12, atol=1e-14)
    assert step.cache_info().traces == 1
    assert int(opt.iterations.numpy()) == len(grads)
