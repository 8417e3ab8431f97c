"""jt.optimizers: each update rule against the Keras formulas computed by hand in numpy
(float64 variables, learning rates exact in float32 since Keras keeps the rate in a
float32 variable), slots, iterations, schedules, None gradients and errors."""

import math
import warnings

import numpy as np
import pytest
from tolerances import tol

import jittape as jt
from jittape.keras import optimizers as O

T64 = tol("float64")
T32 = tol("float32")

W0 = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
GRADS = [np.array([[0.1, -0.2, 0.3], [0.4, 0.0, -0.6]]),
         np.array([[-0.3, 0.5, 0.05], [0.2, 0.1, 0.9]]),
         np.array([[0.2, 0.2, -0.1], [-0.5, 0.3, 0.0]])]


def close(actual, expected, t=T64):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=t.fwd_rtol, atol=t.fwd_atol)


def run(opt, grads=GRADS, w0=W0, dtype=np.float64):
    v = jt.Variable(w0.astype(dtype), name="w")
    for g in grads:
        opt.apply_gradients([(jt.constant(g.astype(dtype)), v)])
    return v


# --------------------------------------------------------------------------
# update rules


def test_sgd_plain():
    lr = 0.125
    w = W0.copy()
    for g in GRADS:
        w = w - lr * g
    opt = O.SGD(lr)
    v = run(opt)
    close(v.numpy(), w)
    assert opt.variables == [opt.iterations, opt.variables[1]]  # no slots without momentum
    with pytest.raises(KeyError, match="no slot 'momentum'"):
        opt.get_slot(v, "momentum")


@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_momentum(nesterov):
    lr, mu = 0.25, 0.75
    w, m = W0.copy(), np.zeros_like(W0)
    for g in GRADS:
        m = mu * m - lr * g
        w = w + (mu * m - lr * g if nesterov else m)
    opt = O.SGD(lr, momentum=mu, nesterov=nesterov)
    v = run(opt)
    close(v.numpy(), w)
    close(opt.get_slot(v, "momentum").numpy(), m)


def f32(x):
    return float(np.float32(x))


def adam_reference(grads, w, lr, b1=0.9, b2=0.999, eps=1e-7, amsgrad=False, wd=None):
    """Keras' Adam: bias correction folded into the step size; the betas of the powers
    (and the weight decay) are float32 values, as Keras' TF backend casts them."""
    m, v, vhat = np.zeros_like(w), np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        if wd is not None:
            w = w - w * f32(wd) * lr
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        lr_t = lr * math.sqrt(1 - f32(b2)**t) / (1 - f32(b1)**t)
        if amsgrad:
            vhat = np.maximum(vhat, v)
            w = w - lr_t * m / (np.sqrt(vhat) + eps)
        else:
            w = w - lr_t * m / (np.sqrt(v) + eps)
    return w, m, v


def test_adam_two_steps_by_hand():
    # step 1 with g: m = 0.1 g, v = 0.001 g^2, lr_t = lr sqrt(0.001) / 0.1, so the step is
    # lr * g / (|g| + eps / sqrt(0.001)), i.e. about lr * sign(g)
    lr = 0.5
    g1, g2 = GRADS[0], GRADS[1]
    m1, v1 = 0.1 * g1, 0.001 * g1**2
    # (in the bias correction the betas are float32 values, as in Keras' TF backend)
    b1, b2 = f32(0.9), f32(0.999)
    w1 = W0 - lr * math.sqrt(1 - b2) / (1 - b1) * m1 / (np.sqrt(v1) + 1e-7)
    m2, v2 = 0.9 * m1 + 0.1 * g2, 0.999 * v1 + 0.001 * g2**2
    w2 = w1 - lr * math.sqrt(1 - b2**2) / (1 - b1**2) * m2 / (np.sqrt(v2) + 1e-7)
    opt = O.Adam(lr)
    v = run(opt, [g1, g2])
    close(v.numpy(), w2)
    close(opt.get_slot(v, "m").numpy(), m2)
    close(opt.get_slot(v, "v").numpy(), v2)
    assert int(opt.iterations) == 2


def test_adam_defaults_are_keras():
    opt = O.Adam()
    assert (opt.beta_1, opt.beta_2, opt.epsilon, opt.amsgrad) == (0.9, 0.999, 1e-7, False)
    assert float(opt.learning_rate) == np.float32(0.001)
    lr = float(np.float32(0.001))  # the rate lives in a float32 variable, as in Keras
    close(run(opt).numpy(), adam_reference(GRADS, W0, lr)[0])


def test_adam_amsgrad_keeps_the_largest_second_moment():
    grads = [np.full((2, 3), 3.0), np.full((2, 3), 0.01), np.full((2, 3), -0.02)]
    opt = O.Adam(0.25, amsgrad=True)
    v = run(opt, grads)
    close(v.numpy(), adam_reference(grads, W0, 0.25, amsgrad=True)[0])
    assert not np.allclose(v.numpy(), adam_reference(grads, W0, 0.25)[0])
    assert np.all(opt.get_slot(v, "vhat").numpy() > opt.get_slot(v, "v").numpy())


def test_adamw_decays_then_steps():
    opt = O.AdamW(0.125, weight_decay=0.5)
    v = run(opt)
    close(v.numpy(), adam_reference(GRADS, W0, 0.125, wd=0.5)[0])
    assert O.AdamW().weight_decay == 0.004


def test_adamw_exclusion():
    opt = O.AdamW(0.125, weight_decay=0.5)
    w = jt.Variable(W0.copy(), name="layer/kernel")
    b = jt.Variable(W0[0].copy(), name="layer/bias")
    opt.exclude_from_weight_decay(var_names=["bias"])
    for g in GRADS:
        opt.apply_gradients([(g, w), (g[0], b)])
    close(w.numpy(), adam_reference(GRADS, W0, 0.125, wd=0.5)[0])
    close(b.numpy(), adam_reference([g[0] for g in GRADS], W0[0], 0.125)[0])


def rmsprop_reference(grads, w, lr, rho=0.9, mom=0.0, eps=1e-7, centered=False):
    ms, mg, mo = np.zeros_like(w), np.zeros_like(w), np.zeros_like(w)
    for g in grads:
        ms = rho * ms + (1 - rho) * g * g
        if centered:
            mg = rho * mg + (1 - rho) * g
            den = ms - mg * mg + eps
        else:
            den = ms + eps
        inc = lr * g / np.sqrt(den)
        if mom > 0:
            mo = mom * mo + inc
            w = w - mo
        else:
            w = w - inc
    return w, ms


@pytest.mark.parametrize("momentum,centered", [(0.0, False), (0.5, False), (0.0, True),
                                               (0.5, True)])
def test_rmsprop(momentum, centered):
    opt = O.RMSprop(0.125, momentum=momentum, centered=centered)
    v = run(opt)
    w, ms = rmsprop_reference(GRADS, W0, 0.125, mom=momentum, centered=centered)
    close(v.numpy(), w)
    close(opt.get_slot(v, "rms").numpy(), ms)
    assert ("mg" in opt.get_slot_names()) == centered
    assert ("momentum" in opt.get_slot_names()) == (momentum > 0)


def test_rmsprop_defaults():
    opt = O.RMSprop()
    assert (opt.rho, opt.momentum, opt.epsilon, opt.centered) == (0.9, 0.0, 1e-7, False)


@pytest.mark.parametrize("make", [lambda: O.SGD(0.125, momentum=0.5), lambda: O.Adam(0.125),
                                  lambda: O.AdamW(0.125), lambda: O.RMSprop(0.125)],
                         ids=["sgd", "adam", "adamw", "rmsprop"])
def test_float32_variables_stay_float32(make):
    opt = make()
    v = run(opt, dtype=np.float32)
    assert v.dtype == jt.float32
    assert all(s.dtype == jt.float32 for s in opt.variables[2:])
    ref = run(make(), dtype=np.float64).numpy()
    close(v.numpy(), ref, T32)


# --------------------------------------------------------------------------
# apply_gradients mechanics


def test_slots_are_created_on_first_use_and_iterations_count():
    opt = O.Adam(0.125)
    a = jt.Variable(np.ones(3), name="a")
    assert int(opt.iterations) == 0 and opt.iterations.dtype == jt.int64
    with pytest.raises(KeyError, match="no slots for variable 'a:0'"):
        opt.get_slot(a, "m")
    opt.apply_gradients([(np.ones(3), a)])
    assert opt.get_slot(a, "m").shape == (3,) and not opt.get_slot(a, "m").trainable
    assert int(opt.iterations) == 1
    b = jt.Variable(np.ones(2), name="b")  # a variable seen later gets its slots then
    opt.apply_gradients([(np.ones(3), a), (np.ones(2), b)])
    assert opt.get_slot(b, "v").shape == (2,)
    assert int(opt.iterations) == 2
    assert len(opt.variables) == 2 + 4


def test_none_gradients_are_skipped_with_one_warning_naming_them():
    opt = O.SGD(0.5)
    a = jt.Variable(np.ones(2), name="a")
    b = jt.Variable(np.ones(2), name="b")
    c = jt.Variable(np.ones(2), name="c")
    with pytest.warns(UserWarning) as rec:
        opt.apply_gradients([(None, a), (np.ones(2), b), (None, c)])
    msgs = [str(w.message) for w in rec if issubclass(w.category, UserWarning)]
    assert len(msgs) == 1
    assert "Gradients do not exist for variables ['a:0', 'c:0']" in msgs[0]
    np.testing.assert_array_equal(a.numpy(), np.ones(2))
    np.testing.assert_array_equal(b.numpy(), np.full(2, 0.5))
    assert rec[0].filename == __file__  # points at the caller's line
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        opt.apply_gradients([(None, a)])


def test_no_warning_when_every_gradient_is_present():
    opt = O.SGD(0.5)
    a = jt.Variable(np.ones(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.apply_gradients(zip([np.ones(2)], [a]))


def test_apply_gradients_errors():
    opt = O.Adam()
    v = jt.Variable(np.ones((2, 3)), name="kernel")
    with pytest.raises(jt.errors.InvalidArgumentError,
                       match=r"gradient for variable 'kernel:0' has shape \[3, 2\], but the "
                             r"variable has shape \[2, 3\]"):
        opt.apply_gradients([(np.ones((3, 2)), v)])
    with pytest.raises(TypeError, match="must be a jt.Variable, got Tensor"):
        opt.apply_gradients([(np.ones(2), jt.constant(np.ones(2)))])
    with pytest.raises(TypeError, match="pairs"):
        opt.apply_gradients([np.ones(3)])
    with pytest.raises(TypeError, match="only float variables"):
        opt.apply_gradients([(np.ones(2), jt.Variable([1, 2]))])
    assert int(opt.iterations) == 0  # nothing was applied
    with pytest.raises(ValueError, match="beta_1"):
        O.Adam(beta_1=1.0)
    with pytest.raises(TypeError, match="learning_rate"):
        O.SGD("fast")


def test_gradient_dtype_is_cast_to_the_variable():
    v = jt.Variable(np.ones(2))  # float64
    O.SGD(0.5).apply_gradients([(jt.constant(np.ones(2, np.float32)), v)])
    assert v.dtype == jt.float64
    close(v.numpy(), np.full(2, 0.5))


def test_minimize_and_training_converges():
    target = np.array([3.0, -2.0])
    v = jt.Variable(np.zeros(2))
    opt = O.Adam(0.125)
    for _ in range(200):
        opt.minimize(lambda: jt.reduce_sum(jt.square(v - target)), [v])
    np.testing.assert_allclose(v.numpy(), target, atol=0.05)


def test_updates_are_not_recorded_as_gradient_paths():
    # the update reads the variable inside no tape: a later tape sees plain values
    v = jt.Variable(np.ones(2))
    opt = O.Adam(0.125)
    with jt.GradientTape() as tape:
        loss = jt.reduce_sum(v * v)
    opt.apply_gradients([(tape.gradient(loss, v), v)])
    with jt.GradientTape() as tape:
        loss = jt.reduce_sum(v * v)
    close(tape.gradient(loss, v).numpy(), 2 * v.numpy())


# --------------------------------------------------------------------------
# learning rates


def test_learning_rate_setter():
    opt = O.SGD(0.5)
    v = jt.Variable(np.ones(2))
    opt.apply_gradients([(np.ones(2), v)])
    opt.learning_rate = 0.25
    assert float(opt.learning_rate) == 0.25
    opt.apply_gradients([(np.ones(2), v)])
    close(v.numpy(), np.full(2, 1 - 0.5 - 0.25))


def test_exponential_decay_values():
    s = O.schedules.ExponentialDecay(0.5, decay_steps=4, decay_rate=0.25)
    for step in (0, 1, 4, 7):
        close(float(s(step)), 0.5 * 0.25 ** (step / 4), T32)
    st = O.schedules.ExponentialDecay(0.5, decay_steps=4, decay_rate=0.25, staircase=True)
    for step in (0, 3, 4, 9):
        close(float(st(step)), 0.5 * 0.25 ** (step // 4), T32)
    assert s(jt.Variable(np.int64(2), trainable=False)).dtype == jt.float32
    with pytest.raises(ValueError, match="decay_steps"):
        O.schedules.ExponentialDecay(0.1, 0, 0.5)


def test_optimizer_uses_schedule_at_the_current_step():
    s = O.schedules.ExponentialDecay(0.5, decay_steps=1, decay_rate=0.5)
    opt = O.SGD(s)
    v = jt.Variable(np.zeros(1))
    for _ in range(3):
        opt.apply_gradients([(np.ones(1), v)])
    # rates at steps 0, 1, 2: 0.5, 0.25, 0.125
    close(v.numpy(), [-(0.5 + 0.25 + 0.125)], T32)
    close(float(opt.learning_rate), 0.0625, T32)


def test_plain_callable_schedule():
    opt = O.SGD(lambda step: 1.0 / (1 + int(step)))
    v = jt.Variable(np.zeros(1))
    for _ in range(3):
        opt.apply_gradients([(np.ones(1), v)])
    close(v.numpy(), [-(1 + 1 / 2 + 1 / 3)], T32)


def test_get_by_name():
    assert isinstance(O.get("adam"), O.Adam)
    assert isinstance(O.get("RMSprop"), O.RMSprop)
    assert isinstance(O.get("adagrad"), O.Adagrad)
    with pytest.raises(ValueError, match="Could not interpret optimizer identifier: 'adagrd'"):
        O.get("adagrd")


def test_float64_variables_use_float32_hyperparameters_like_keras():
    """Keras' TF backend casts SGD's momentum, Adam's betas (in beta ** t) and the weight
    decay through float32 tensors; jittape rounds them the same way."""
    mu = 0.9  # not a float32 value
    w, m = W0.copy(), np.zeros_like(W0)
    for g in GRADS:
        m = f32(mu) * m - 0.125 * g
        w = w + m
    close(run(O.SGD(0.125, momentum=mu)).numpy(), w)
    close(run(O.AdamW(0.125, weight_decay=0.1)).numpy(),
          adam_reference(GRADS, W0, 0.125, wd=0.1)[0])
