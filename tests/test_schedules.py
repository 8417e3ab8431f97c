"""jt.optimizers.schedules against Keras' documented formulas written out in numpy at many
steps; in ``@jt.function`` (one trace, the step read at run time) against eager; as an
optimizer's learning rate; configs, serialize/deserialize and errors."""

import math

import numpy as np
import pytest
from tolerances import tol

import jittape as jt
from jittape.keras.optimizers import schedules as S

T32 = tol("float32")
STEPS = np.arange(0, 161)


def exponential(step, initial_learning_rate, decay_steps, decay_rate, staircase=False):
    p = step / decay_steps
    return initial_learning_rate * decay_rate ** (math.floor(p) if staircase else p)


def piecewise(step, boundaries, values):
    for b, v in zip(boundaries, values):
        if step <= b:
            return v
    return values[-1]


def polynomial(step, initial_learning_rate, decay_steps, end_learning_rate=0.0001, power=1.0,
               cycle=False):
    if cycle:
        decay_steps = decay_steps * (1 if step == 0 else math.ceil(step / decay_steps))
    else:
        step = min(step, decay_steps)
    return (initial_learning_rate - end_learning_rate) * (1 - step / decay_steps) ** power + (
        end_learning_rate)


def inverse_time(step, initial_learning_rate, decay_steps, decay_rate, staircase=False):
    p = step / decay_steps
    return initial_learning_rate / (1 + decay_rate * (math.floor(p) if staircase else p))


def cosine(step, initial_learning_rate, decay_steps, alpha=0.0, warmup_target=None,
           warmup_steps=0):
    def decayed(s, start):
        return start * ((1 - alpha) * 0.5 * (1 + math.cos(math.pi * s / decay_steps)) + alpha)

    if warmup_target is None:
        return decayed(min(step, decay_steps), initial_learning_rate)
    step = min(step, decay_steps + warmup_steps)
    if step < warmup_steps:
        return initial_learning_rate + (warmup_target - initial_learning_rate) * (
            step / warmup_steps)
    return decayed(step - warmup_steps, warmup_target)


def cosine_restarts(step, initial_learning_rate, first_decay_steps, t_mul=2.0, m_mul=1.0,
                    alpha=0.0):
    """SGDR: walk the periods (first_decay_steps * t_mul^i long) to the one holding step."""
    start, length, i = 0.0, float(first_decay_steps), 0
    while step >= start + length - 1e-9:
        start += length
        length *= t_mul
        i += 1
    frac = (step - start) / length
    return initial_learning_rate * ((1 - alpha) * m_mul ** i * 0.5 * (1 + math.cos(
        math.pi * frac)) + alpha)


CASES = {
    "exponential": (S.ExponentialDecay, exponential,
                    {"initial_learning_rate": 0.5, "decay_steps": 9, "decay_rate": 0.7}),
    "exponential_staircase": (S.ExponentialDecay, exponential,
                              {"initial_learning_rate": 0.5, "decay_steps": 9,
                               "decay_rate": 0.7, "staircase": True}),
    "piecewise": (S.PiecewiseConstantDecay, piecewise,
                  {"boundaries": [10, 25, 26, 90], "values": [1.0, 0.5, 0.25, 0.1, 0.05]}),
    "piecewise_float_boundaries": (S.PiecewiseConstantDecay, piecewise,
                                   {"boundaries": [10.5, 40.0], "values": [0.3, 0.2, 0.1]}),
    "polynomial": (S.PolynomialDecay, polynomial,
                   {"initial_learning_rate": 0.1, "decay_steps": 100}),
    "polynomial_power": (S.PolynomialDecay, polynomial,
                         {"initial_learning_rate": 0.1, "decay_steps": 60,
                          "end_learning_rate": 0.02, "power": 0.5}),
    "polynomial_cycle": (S.PolynomialDecay, polynomial,
                         {"initial_learning_rate": 0.1, "decay_steps": 25,
                          "end_learning_rate": 0.01, "power": 2.0, "cycle": True}),
    "inverse_time": (S.InverseTimeDecay, inverse_time,
                     {"initial_learning_rate": 0.2, "decay_steps": 7, "decay_rate": 0.5}),
    "inverse_time_staircase": (S.InverseTimeDecay, inverse_time,
                               {"initial_learning_rate": 0.2, "decay_steps": 7,
                                "decay_rate": 0.5, "staircase": True}),
    "cosine": (S.CosineDecay, cosine, {"initial_learning_rate": 0.1, "decay_steps": 120}),
    "cosine_alpha": (S.CosineDecay, cosine,
                     {"initial_learning_rate": 0.1, "decay_steps": 70, "alpha": 0.2}),
    "cosine_warmup": (S.CosineDecay, cosine,
                      {"initial_learning_rate": 0.0, "decay_steps": 80, "alpha": 0.1,
                       "warmup_target": 0.3, "warmup_steps": 20}),
    "cosine_warmup_zero_steps": (S.CosineDecay, cosine,
                                 {"initial_learning_rate": 0.05, "decay_steps": 50,
                                  "warmup_target": 0.3}),
    "cosine_restarts": (S.CosineDecayRestarts, cosine_restarts,
                        {"initial_learning_rate": 0.1, "first_decay_steps": 10}),
    "cosine_restarts_mul": (S.CosineDecayRestarts, cosine_restarts,
                            {"initial_learning_rate": 0.1, "first_decay_steps": 7,
                             "t_mul": 1.5, "m_mul": 0.8, "alpha": 0.05}),
    "cosine_restarts_t1": (S.CosineDecayRestarts, cosine_restarts,
                           {"initial_learning_rate": 0.1, "first_decay_steps": 12,
                            "t_mul": 1.0, "m_mul": 0.5}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_schedule_matches_the_formula_at_many_steps(name):
    cls, formula, kw = CASES[name]
    s = cls(**kw)
    step = jt.Variable(np.int64(0), trainable=False)
    got, want = [], []
    for k in STEPS:
        step.assign(k)
        value = s(step)
        assert value.dtype == jt.float32 and value.shape == ()
        got.append(float(value))
        want.append(formula(int(k), **kw))
    np.testing.assert_allclose(got, want, rtol=T32.fwd_rtol, atol=T32.fwd_atol)
    assert len(set(np.round(got, 6))) > 1  # the schedule changes over these steps
    np.testing.assert_allclose(float(s(7)), formula(7, **kw), rtol=T32.fwd_rtol)  # a Python int


@pytest.mark.parametrize("name", ["piecewise", "polynomial_cycle", "cosine_warmup",
                                  "cosine_restarts_mul", "inverse_time_staircase"])
def test_schedule_inside_function_reads_the_step_at_run_time(name):
    cls, _, kw = CASES[name]
    s = cls(**kw)
    step = jt.Variable(np.int64(0), trainable=False)
    f = jt.function(lambda: s(step))
    for k in STEPS[::7]:
        step.assign(k)
        assert float(f()) == pytest.approx(float(s(step)), rel=1e-6, abs=1e-9)
    assert f.cache_info().traces == 1


def test_schedule_as_learning_rate_inside_a_compiled_step():
    sched = S.CosineDecay(0.0, decay_steps=6, warmup_target=0.5, warmup_steps=3)
    rates = [cosine(k, 0.0, 6, warmup_target=0.5, warmup_steps=3) for k in range(8)]
    opt = jt.optimizers.SGD(sched)
    v = jt.Variable(np.zeros(1))

    @jt.function
    def step():
        opt.apply_gradients([(jt.constant([1.0]), v)])

    for _ in range(8):
        step()
    np.testing.assert_allclose(v.numpy(), [-sum(rates)], rtol=T32.fwd_rtol)
    assert step.cache_info().traces == 1
    assert float(opt.learning_rate) == pytest.approx(
        cosine(8, 0.0, 6, warmup_target=0.5, warmup_steps=3), rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("name", sorted(CASES))
def test_config_round_trips_and_serializes_as_keras(name):
    cls, _, kw = CASES[name]
    s = cls(**kw, name="mine")
    config = s.get_config()
    assert config["name"] == "mine" and {k: config[k] for k in kw} == kw
    again = cls.from_config(config)
    assert again.get_config() == config
    d = S.serialize(s)
    assert d == {"module": "keras.optimizers.schedules", "class_name": cls.__name__,
                 "config": config, "registered_name": None}
    back = S.deserialize(d)
    assert type(back) is cls and back.get_config() == config
    assert float(back(13)) == float(s(13))


def test_default_names_are_keras():
    assert S.ExponentialDecay(0.1, 1, 0.5).name == "ExponentialDecay"
    assert S.PiecewiseConstantDecay([1], [0.1, 0.2]).name == "PiecewiseConstant"
    assert S.CosineDecayRestarts(0.1, 5).name == "SGDRDecay"
    assert S.CosineDecay(0.1, 5).get_config()["warmup_steps"] == 0


def test_custom_schedule_serializes_with_custom_objects():
    class Halving(S.LearningRateSchedule):
        def __init__(self, start):
            self.start = start

        def __call__(self, step):
            return self.start * jt.pow(0.5, jt.cast(step, "float32"))

        def get_config(self):
            return {"start": self.start}

    d = S.serialize(Halving(0.8))
    assert d["class_name"] == "Halving"
    with pytest.raises(ValueError, match="learning rate schedule identifier: 'Halving'.*custom_objects"):
        S.deserialize(d)
    back = S.deserialize(d, custom_objects={"Halving": Halving})
    assert float(back(2)) == pytest.approx(0.2)
    opt = jt.optimizers.SGD(Halving(0.8))
    again = jt.optimizers.deserialize(jt.optimizers.serialize(opt),
                                      custom_objects={"Halving": Halving})
    assert isinstance(again._schedule, Halving) and again._schedule.start == 0.8


def test_base_class_says_what_to_override():
    class Bare(S.LearningRateSchedule):
        pass

    with pytest.raises(NotImplementedError, match="'Bare' must override __call__"):
        Bare()(0)
    with pytest.raises(NotImplementedError, match="get_config"):
        Bare().get_config()
    assert repr(Bare()) == "Bare()"


@pytest.mark.parametrize("make,match", [
    (lambda: S.PolynomialDecay(0.1, 0), "PolynomialDecay: decay_steps must be > 0, got 0"),
    (lambda: S.InverseTimeDecay(0.1, -2, 0.5), "InverseTimeDecay: decay_steps must be > 0"),
    (lambda: S.CosineDecay(0.1, 0), "CosineDecay: decay_steps must be > 0"),
    (lambda: S.CosineDecay(0.1, 10, warmup_steps=-1), "warmup_steps must be >= 0, got -1"),
    (lambda: S.CosineDecayRestarts(0.1, 0), "first_decay_steps must be > 0, got 0"),
    (lambda: S.CosineDecayRestarts(0.1, 5, t_mul=0.0), "t_mul must be > 0, got 0.0"),
    (lambda: S.PiecewiseConstantDecay([1, 2], [0.1, 0.2]),
     "boundaries should be 1 less than the length of values"),
    (lambda: S.PiecewiseConstantDecay([5, 2], [0.1, 0.2, 0.3]), "boundaries must be increasing"),
    (lambda: S.deserialize({"config": {}}), "expected a dict with 'class_name'"),
])
def test_bad_arguments_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()
