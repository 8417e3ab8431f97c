"""The options every optimizer takes (Keras 3's base optimizer): clipping, weight decay, EMA,
loss scaling, gradient accumulation and variable constraints, against Keras' pipeline written
out in numpy (``optimizer_reference.py``), each alone and combined; inside ``@jt.function``
(one trace, many calls) against the eager run; validation; configs and ``get``."""

import numpy as np
import pytest
from optimizer_reference import apply_reference, f32
from tolerances import tol

import jittape as jt
from jittape.keras import optimizers as O

LR = 0.125


def data(dtype, steps, seed=1):
    rng = np.random.default_rng(seed)
    ws = [rng.standard_normal((2, 3)).astype(dtype), rng.standard_normal(4).astype(dtype)]
    scales = [3.0, 0.2, -1.0, 0.5, 2.0, -0.4, 1.0, 0.7]
    return ws, [[(rng.standard_normal(w.shape) * s).astype(dtype) for w in ws]
                for s in scales[:steps]]


class ConstrainedVariable(jt.Variable):
    """A stand-in for ``jt.Variable(..., constraint=...)``: the optimizer only reads
    ``getattr(v, "constraint", None)``."""

    def __init__(self, value, constraint, name=None):
        super().__init__(value, name=name)
        self.constraint = constraint


def make_vars(ws, constraint=None):
    if constraint is None:
        return [jt.Variable(w.copy(), name=f"w{i}") for i, w in enumerate(ws)]
    return [ConstrainedVariable(w.copy(), constraint, name=f"w{i}") for i, w in enumerate(ws)]


def run(opt, vs, grads, compiled=False):
    def step(g0, g1):
        opt.apply_gradients([(g0, vs[0]), (g1, vs[1])])

    if compiled:
        step = jt.function(step)
    history = []
    for gs in grads:
        step(jt.constant(gs[0]), jt.constant(gs[1]))
        history.append([v.numpy().copy() for v in vs])
    if compiled:
        assert step.cache_info().traces == 1  # no decision was frozen at trace time
    return history


def close(got, want, dtype):
    t = tol(dtype)
    np.testing.assert_allclose(got, want, rtol=t.fwd_rtol, atol=t.fwd_atol)


# (optimizer, its hyperparameters, base options): each option alone, then combined
OPTIONS = {
    "clipnorm": ("SGD", {}, {"clipnorm": 1.0}),
    "clipvalue": ("Adam", {}, {"clipvalue": 0.5}),
    "global_clipnorm": ("RMSprop", {}, {"global_clipnorm": 1.5}),
    "weight_decay_sgd": ("SGD", {"momentum": 0.5}, {"weight_decay": 0.1}),
    "weight_decay_adagrad": ("Adagrad", {}, {"weight_decay": 0.2}),
    "weight_decay_lion": ("Lion", {}, {"weight_decay": 0.3}),
    "ema": ("Adam", {}, {"use_ema": True, "ema_momentum": 0.9}),
    "ema_overwrite": ("SGD", {}, {"use_ema": True, "ema_momentum": 0.8,
                                  "ema_overwrite_frequency": 2}),
    "loss_scale": ("Adadelta", {}, {"loss_scale_factor": 64.0}),
    "accumulation": ("SGD", {"momentum": 0.9}, {"gradient_accumulation_steps": 3}),
    "accumulation_adam": ("Adam", {}, {"gradient_accumulation_steps": 2}),
    "accumulation_nadam": ("Nadam", {}, {"gradient_accumulation_steps": 2}),
    "accumulation_clipnorm": ("Adamax", {}, {"gradient_accumulation_steps": 2,
                                             "clipnorm": 0.5}),
    "accumulation_ema": ("Ftrl", {}, {"gradient_accumulation_steps": 2, "use_ema": True,
                                      "ema_momentum": 0.7, "ema_overwrite_frequency": 2}),
    "accumulation_decay": ("AdamW", {}, {"gradient_accumulation_steps": 3,
                                         "weight_decay": 0.25}),
    "loss_scale_global_clipnorm": ("Lion", {}, {"loss_scale_factor": 8.0,
                                                "global_clipnorm": 0.25}),
    "ema_clipvalue_decay": ("RMSprop", {"centered": True},
                            {"use_ema": True, "clipvalue": 0.3, "weight_decay": 0.05}),
}
STEPS = 7


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_option_matches_the_keras_pipeline(name, dtype):
    cls, hyper, options = OPTIONS[name]
    ws, grads = data(dtype, STEPS)
    opt = getattr(O, cls)(LR, **hyper, **options)
    vs = make_vars(ws)
    got = run(opt, vs, grads)
    want, averages, accumulators = apply_reference(cls, hyper, ws, grads, LR, options)
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            assert a.dtype == dtype
            close(a, b, dtype)
    if options.get("use_ema"):
        for v, avg in zip(vs, averages):
            close(opt.get_slot(v, "average").numpy(), avg, dtype)
    if options.get("gradient_accumulation_steps"):
        for v, acc in zip(vs, accumulators):
            close(opt.get_slot(v, "gradient_accumulator").numpy(), acc, dtype)


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_option_inside_function_matches_eager(name):
    cls, hyper, options = OPTIONS[name]
    ws, grads = data(np.float64, STEPS, seed=2)
    eager_opt, compiled_opt = (getattr(O, cls)(LR, **hyper, **options) for _ in range(2))
    want = run(eager_opt, make_vars(ws), grads)
    got = run(compiled_opt, make_vars(ws), grads, compiled=True)
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    for a, b in zip(compiled_opt.variables, eager_opt.variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-14)


def test_clipnorm_clips_each_gradient_on_its_own():
    opt = O.SGD(1.0, clipnorm=1.0)
    big, small = jt.Variable(np.zeros(2)), jt.Variable(np.zeros(2))
    opt.apply_gradients([(np.array([3.0, 4.0]), big), (np.array([0.3, 0.4]), small)])
    np.testing.assert_allclose(big.numpy(), [-0.6, -0.8])
    np.testing.assert_allclose(small.numpy(), [-0.3, -0.4])


def test_global_clipnorm_scales_all_gradients_together():
    opt = O.SGD(1.0, global_clipnorm=2.5)  # the global norm is sqrt(3^2 + 4^2) = 5
    a, b = jt.Variable(np.zeros(1)), jt.Variable(np.zeros(1))
    opt.apply_gradients([(np.array([3.0]), a), (np.array([4.0]), b)])
    np.testing.assert_allclose([a.numpy()[0], b.numpy()[0]], [-1.5, -2.0])


def test_global_clipnorm_with_mixed_dtypes():
    opt = O.SGD(1.0, global_clipnorm=2.5)
    a, b = jt.Variable(np.zeros(1, np.float32)), jt.Variable(np.zeros(1))
    opt.apply_gradients([(np.array([3.0], np.float32), a), (np.array([4.0]), b)])
    assert a.dtype == jt.float32 and b.dtype == jt.float64
    np.testing.assert_allclose([a.numpy()[0], b.numpy()[0]], [-1.5, -2.0], rtol=1e-6)


def test_only_one_clip_option():
    with pytest.raises(ValueError, match="only one of `clipnorm`, `clipvalue` and "
                                         "`global_clipnorm` can be set; got clipnorm=1.0, "
                                         "clipvalue=0.5, global_clipnorm=None"):
        O.Adam(clipnorm=1.0, clipvalue=0.5)
    with pytest.raises(ValueError, match="Lion: only one of"):
        O.Lion(clipnorm=1.0, global_clipnorm=2.0)


def test_a_zero_clip_is_no_clip():
    g = np.array([30.0, -40.0])
    for kw in ({"clipnorm": 0.0}, {"clipvalue": 0.0}, {"global_clipnorm": 0.0}):
        v = jt.Variable(np.zeros(2))
        O.SGD(0.5, **kw).apply_gradients([(g, v)])
        np.testing.assert_allclose(v.numpy(), -0.5 * g)


def test_weight_decay_on_every_optimizer():
    """Every optimizer takes weight_decay (Keras' base does): the result is the rule applied
    to the decayed variable."""
    for cls in ("SGD", "Adam", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam", "Ftrl",
                "Lion"):
        ws, grads = data(np.float64, 3)
        got = run(getattr(O, cls)(LR, weight_decay=0.5), make_vars(ws), grads)
        want, _, _ = apply_reference(cls, {}, ws, grads, LR, {"weight_decay": 0.5})
        plain, _, _ = apply_reference(cls, {}, ws, grads, LR)
        close(got[-1][0], want[-1][0], np.float64)
        assert not np.allclose(got[-1][0], plain[-1][0]), cls


def test_ema_first_step_copies_then_averages_and_finalize_overwrites():
    opt = O.SGD(1.0, use_ema=True, ema_momentum=0.75)
    v = jt.Variable(np.array([1.0]))
    avg_want, values = None, []
    for g in (0.5, 1.0, -2.0):
        opt.apply_gradients([(np.array([g]), v)])
        values.append(v.numpy()[0])
        avg_want = values[0] if avg_want is None else 0.75 * avg_want + 0.25 * values[-1]
        np.testing.assert_allclose(opt.get_slot(v, "average").numpy(), [avg_want])
    np.testing.assert_allclose(v.numpy(), [values[-1]])  # no overwrite without a frequency
    opt.finalize_variable_values([v])
    np.testing.assert_allclose(v.numpy(), [avg_want])
    O.SGD(1.0).finalize_variable_values([v])  # without EMA: nothing happens
    np.testing.assert_allclose(v.numpy(), [avg_want])
    with pytest.raises(ValueError, match="variable 'other:0' has no moving average"):
        opt.finalize_variable_values([jt.Variable(np.ones(1), name="other")])


def test_ema_covers_variables_without_a_gradient_this_step():
    opt = O.SGD(1.0, use_ema=True, ema_momentum=0.5)
    a, b = jt.Variable(np.array([1.0]), name="a"), jt.Variable(np.array([4.0]), name="b")
    opt.apply_gradients([(np.array([1.0]), a), (np.array([1.0]), b)])
    with pytest.warns(UserWarning, match="b:0"):
        opt.apply_gradients([(np.array([1.0]), a), (None, b)])
    np.testing.assert_allclose(opt.get_slot(b, "average").numpy(), [3.0])  # 0.5*3 + 0.5*3
    np.testing.assert_allclose(opt.get_slot(a, "average").numpy(), [-0.5])  # 0.5*0 + 0.5*-1


def test_loss_scale_factor_divides_the_gradients_and_scales_the_loss():
    opt = O.SGD(0.5, loss_scale_factor=1024.0)
    v = jt.Variable(np.array([1.0, 2.0]))
    with jt.GradientTape() as tape:
        loss = opt.scale_loss(jt.reduce_sum(v * v))
    np.testing.assert_allclose(float(loss), 1024.0 * 5.0)
    opt.apply_gradients([(tape.gradient(loss, v), v)])
    np.testing.assert_allclose(v.numpy(), [1.0 - 0.5 * 2.0, 2.0 - 0.5 * 4.0])
    assert float(O.SGD().scale_loss(jt.constant(3.0))) == 3.0


def test_gradient_accumulation_updates_every_nth_call_with_the_mean():
    opt = O.SGD(1.0, gradient_accumulation_steps=3)
    v = jt.Variable(np.array([0.0]))
    seen, iterations = [], []
    for g in (1.0, 2.0, 6.0, 4.0, 4.0, 1.0, 9.0):
        opt.apply_gradients([(np.array([g]), v)])
        seen.append(v.numpy()[0])
        iterations.append(int(opt.iterations.numpy()))
    assert seen == [0.0, 0.0, -3.0, -3.0, -3.0, -6.0, -6.0]
    assert iterations == [0, 0, 1, 1, 1, 2, 2]  # updates; the variable counts calls
    assert int(opt._iterations.numpy()) == 7
    np.testing.assert_allclose(opt.get_slot(v, "gradient_accumulator").numpy(), [9.0])


def test_schedule_sees_calls_and_adam_sees_updates_under_accumulation():
    sched = O.schedules.PiecewiseConstantDecay([1, 3], [0.5, 0.25, 0.125])
    ws, grads = data(np.float64, 6)
    got = run(O.Adam(sched, gradient_accumulation_steps=2), make_vars(ws), grads)
    rates = lambda call: 0.5 if call <= 1 else (0.25 if call <= 3 else 0.125)
    want, _, _ = apply_reference("Adam", {}, ws, grads, rates,
                                 {"gradient_accumulation_steps": 2})
    close(got[-1][0], want[-1][0], np.float64)


def test_gradient_accumulation_inside_function_is_decided_at_run_time():
    opt = O.SGD(1.0, gradient_accumulation_steps=2)
    v = jt.Variable(np.array([0.0]))

    @jt.function
    def step(g):
        opt.apply_gradients([(g, v)])
        return opt.iterations

    out = [(float(step(jt.constant([g]))), v.numpy()[0]) for g in (1.0, 3.0, 5.0, 7.0)]
    assert out == [(0.0, 0.0), (1.0, -2.0), (1.0, -2.0), (2.0, -8.0)]
    assert step.cache_info().traces == 1


def test_constraint_is_assigned_after_each_update():
    nonneg = lambda w: jt.maximum(w, 0.0)
    ws, grads = data(np.float64, 4)
    for options in ({}, {"gradient_accumulation_steps": 2}, {"use_ema": True}):
        for compiled in (False, True):
            vs = make_vars(ws, constraint=nonneg)
            got = run(O.Adam(LR, **options), vs, grads, compiled=compiled)
            want, _, _ = apply_reference("Adam", {}, ws, grads, LR, options,
                                         constraint=lambda w: np.maximum(w, 0.0))
            for g, w in zip(got, want):
                for a, b in zip(g, w):
                    close(a, b, np.float64)
            assert all((v.numpy() >= 0).all() for v in vs)


def test_plain_variables_have_no_constraint_attribute_needed():
    v = jt.Variable(np.array([-1.0]))
    O.SGD(1.0).apply_gradients([(np.array([1.0]), v)])
    np.testing.assert_allclose(v.numpy(), [-2.0])


@pytest.mark.parametrize("kwargs,match", [
    ({"gradient_accumulation_steps": 1}, "gradient_accumulation_steps must be an integer >= 2"
                                         " or None, got 1"),
    ({"gradient_accumulation_steps": 2.5}, "gradient_accumulation_steps.*got 2.5"),
    ({"use_ema": True, "ema_momentum": 1.5}, "ema_momentum must be in \\[0, 1\\], got 1.5"),
    ({"use_ema": True, "ema_overwrite_frequency": 0}, "ema_overwrite_frequency must be an "
                                                      "integer >= 1 or None, got 0"),
    ({"loss_scale_factor": 0.0}, "loss_scale_factor must be a positive number or None, got 0.0"),
    ({"clipnorm": -1.0}, "clipnorm must be a non-negative number or None, got -1.0"),
    ({"clipvalue": "big"}, "clipvalue must be a non-negative number or None, got 'big'"),
    ({"weight_decay": -0.1}, "weight_decay must be a non-negative number"),
])
def test_bad_options_are_named(kwargs, match):
    with pytest.raises(ValueError, match="Nadam: " + match):
        O.Nadam(**kwargs)


def test_slots_for_options_come_first_and_are_checkpointed(tmp_path):
    opt = O.Nadam(LR, use_ema=True, gradient_accumulation_steps=2)
    v = jt.Variable(np.ones(3), name="k")
    opt.apply_gradients([(np.ones(3), v)])
    assert opt.get_slot_names() == ["average", "gradient_accumulator", "m", "v"]
    names = [s.name for s in opt.variables]
    assert names == [  # Keras 3's names: <the variable's name>_<the slot's>
        "iteration", "learning_rate", "k_0_average", "k_0_gradient_accumulator",
        "k_0_momentum", "k_0_velocity", "u_product"]
    ckpt = jt.train.Checkpoint(opt=opt, v=v)
    path = ckpt.save(str(tmp_path / "ckpt"))
    opt2 = O.Nadam(LR, use_ema=True, gradient_accumulation_steps=2)
    v2 = jt.Variable(np.zeros(3), name="k")
    jt.train.Checkpoint(opt=opt2, v=v2).restore(path)
    opt2.build([v2])
    for a, b in zip(opt2.variables, opt.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert int(opt2._iterations.numpy()) == 1


def test_learning_rate_cannot_be_set_on_a_schedule():
    opt = O.SGD(O.schedules.ExponentialDecay(0.1, 10, 0.5))
    with pytest.raises(TypeError, match="SGD was created with a learning-rate schedule"):
        opt.learning_rate = 0.5


def test_zero_argument_callable_learning_rate_as_keras_calls_it():
    rate = jt.Variable(np.float32(0.5), trainable=False)
    opt = O.SGD(lambda: rate)
    v = jt.Variable(np.zeros(1))
    opt.apply_gradients([(np.ones(1), v)])
    rate.assign(0.25)
    opt.apply_gradients([(np.ones(1), v)])
    np.testing.assert_allclose(v.numpy(), [-0.75])


# --------------------------------------------------------------------------
# configs, serialize, get

ALL = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam", "Ftrl",
       "Lion"]
BASE_KEYS = ["name", "learning_rate", "weight_decay", "clipnorm", "global_clipnorm",
             "clipvalue", "use_ema", "ema_momentum", "ema_overwrite_frequency",
             "loss_scale_factor", "gradient_accumulation_steps"]  # Keras 3's, in its order
OWN_KEYS = {"SGD": ["momentum", "nesterov"], "Adam": ["beta_1", "beta_2", "epsilon", "amsgrad"],
            "AdamW": ["beta_1", "beta_2", "epsilon", "amsgrad"],
            "RMSprop": ["rho", "momentum", "epsilon", "centered"],
            "Adagrad": ["initial_accumulator_value", "epsilon"], "Adadelta": ["rho", "epsilon"],
            "Adamax": ["beta_1", "beta_2", "epsilon"], "Nadam": ["beta_1", "beta_2", "epsilon"],
            "Ftrl": ["learning_rate_power", "initial_accumulator_value",
                     "l1_regularization_strength", "l2_regularization_strength",
                     "l2_shrinkage_regularization_strength", "beta"],
            "Lion": ["beta_1", "beta_2"]}


@pytest.mark.parametrize("cls", ALL)
def test_config_has_keras_keys_and_round_trips(cls):
    sched = O.schedules.CosineDecay(0.5, 100, alpha=0.1, warmup_target=1.0, warmup_steps=5)
    opt = getattr(O, cls)(sched, clipvalue=0.5, use_ema=True, ema_momentum=0.9,
                          ema_overwrite_frequency=3, loss_scale_factor=2.0,
                          gradient_accumulation_steps=4, name="mine")
    config = opt.get_config()
    assert list(config) == BASE_KEYS + OWN_KEYS[cls]
    assert config["learning_rate"] == {
        "module": "keras.optimizers.schedules", "class_name": "CosineDecay",
        "config": sched.get_config(), "registered_name": None}
    again = getattr(O, cls).from_config(config)
    assert again.get_config() == config and again is not opt
    assert isinstance(again._schedule, O.schedules.CosineDecay)
    s = O.serialize(opt)
    assert (s["module"], s["class_name"], s["registered_name"]) == ("keras.optimizers", cls, None)
    back = O.deserialize(s)
    assert type(back) is type(opt) and back.get_config() == config
    assert O.get(s).get_config() == config
    plain = getattr(O, cls)(0.3)
    assert plain.get_config()["learning_rate"] == f32(0.3)  # the float32 variable's value
    assert O.deserialize(O.serialize(plain)).get_config() == plain.get_config()


def test_a_round_tripped_optimizer_trains_the_same():
    opt = O.Ftrl(0.25, l1_regularization_strength=0.01, clipnorm=1.0, use_ema=True)
    twin = O.deserialize(O.serialize(opt))
    ws, grads = data(np.float64, 3)
    a, b = run(opt, make_vars(ws), grads), run(twin, make_vars(ws), grads)
    np.testing.assert_array_equal(a[-1][0], b[-1][0])


@pytest.mark.parametrize("name", ["adam", "sgd", "rmsprop", "adagrad", "adadelta", "adamax",
                                  "nadam", "ftrl", "lion", "adamw"])
def test_get_resolves_every_keras_name(name):
    opt = O.get(name)
    cls = {c.lower(): c for c in ALL}[name]
    assert type(opt) is getattr(O, cls)
    assert type(O.get(name.upper())) is type(opt)
    assert type(O.get({"class_name": cls, "config": {}})) is type(opt)
    assert jt.keras.optimizers.get(name).get_config() == opt.get_config()


def test_get_instances_none_dicts_and_unknowns():
    opt = O.Lion()
    assert O.get(opt) is opt and O.get(None) is None
    got = O.get({"class_name": "SGD", "config": {"learning_rate": 0.5, "momentum": 0.5}})
    assert isinstance(got, O.SGD) and got.momentum == 0.5
    with pytest.raises(ValueError, match="Could not interpret optimizer identifier: 'adamm'"):
        O.get("adamm")
    with pytest.raises(ValueError, match="Could not interpret optimizer identifier: 'Nope'"):
        O.get({"class_name": "Nope", "config": {}})
    with pytest.raises(ValueError, match="Could not interpret optimizer identifier: 3"):
        O.get(3)


def test_deserialize_custom_objects():
    class Mine(O.SGD):
        pass

    s = O.serialize(Mine(0.5))
    assert s["class_name"] == "Mine" and s["registered_name"] == "Mine"
    with pytest.raises(ValueError, match="'Mine'"):
        O.deserialize(s)
    assert type(O.deserialize(s, custom_objects={"Mine": Mine})) is Mine


def test_apply_keras_3_form():
    ws, grads = data(np.float64, 2)
    a, b = make_vars(ws), make_vars(ws)
    opt_a, opt_b = O.Adamax(LR), O.Adamax(LR)
    for gs in grads:
        opt_a.apply_gradients(zip(gs, a))
    opt_b.apply(grads[0], b)  # builds on the first call
    opt_b.apply(grads[1])  # then in the order it was built with
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    with pytest.raises(ValueError, match="Adamax.apply: got 1 gradients for 2 variables"):
        opt_b.apply(grads[0][:1])
    with pytest.raises(ValueError, match="must be built first"):
        O.SGD().apply(grads[0])
    assert int(O.SGD().apply([], []).numpy()) == 0


def test_combined_options_compiled_on_cpu_match_eager():
    """One Numba-compiled step with accumulation, EMA overwrites, clipping, decay, loss
    scaling and a constraint (the where-masks and the int64 step arithmetic in kernels)."""
    options = {"gradient_accumulation_steps": 2, "use_ema": True, "ema_momentum": 0.5,
               "ema_overwrite_frequency": 2, "global_clipnorm": 1.0, "weight_decay": 0.1,
               "loss_scale_factor": 4.0}
    ws, grads = data(np.float64, 6, seed=5)
    clip = lambda w: jt.clip_by_value(w, -1.0, 1.0)

    def run_with(compiled):
        opt, vs = O.Nadam(LR, **options), make_vars(ws, constraint=clip)

        def step(g0, g1):
            opt.apply_gradients([(g0, vs[0]), (g1, vs[1])])

        if compiled:
            step = jt.function(step, backend="cpu")
        for gs in grads:
            step(jt.constant(gs[0]), jt.constant(gs[1]))
        if compiled:
            assert step.cache_info().traces == 1
        return [v.numpy() for v in vs + opt.variables]

    want = run_with(False)
    ref, _, _ = apply_reference("Nadam", {}, ws, grads, LR, options,
                                constraint=lambda w: np.clip(w, -1.0, 1.0))
    for a, b in zip(want[:2], ref[-1]):
        close(a, b, np.float64)
    for a, b in zip(run_with(True), want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
