"""``jt.optimizers.schedules``: learning rates that change with the step (Keras 3's schedules).

A schedule is any callable ``schedule(step) -> learning rate``; the optimizer calls it
with its ``iterations`` variable (an int64 ``jt.Variable`` counting the calls of
``apply_gradients`` so far, 0 at the first step) before each update. The built-in
schedules compute in float32 with jittape ops, so a train step compiled by
``@jt.function`` reads the step at run time: no schedule decision is frozen at trace
time (a ``where``, never a Python ``if``, picks warmup or decay).
"""

from __future__ import annotations

import math

import numpy as np

from ..saving import serialization as _config
from ... import ops as _ops
from ...tensor import Tensor, Variable, convert_to_tensor

__all__ = ["LearningRateSchedule", "ExponentialDecay", "PiecewiseConstantDecay",
           "PolynomialDecay", "InverseTimeDecay", "CosineDecay", "CosineDecayRestarts",
           "serialize", "deserialize"]


class LearningRateSchedule:
    """Base class: subclasses implement ``__call__(step)`` with jittape ops and
    ``get_config()`` (the constructor's arguments), which ``from_config`` inverts."""

    def __call__(self, step):
        raise NotImplementedError(
            f"Learning rate schedule {type(self).__name__!r} must override __call__(self, step)")

    def get_config(self) -> dict:
        raise NotImplementedError(
            f"Learning rate schedule {type(self).__name__!r} must override get_config() to "
            "be serializable")

    @classmethod
    def from_config(cls, config):
        """A schedule from ``get_config()``'s dict."""
        return cls(**config)

    def __repr__(self):
        return _config.config_repr(self)


def _step_float(step) -> Tensor:
    """The step as float32 (Keras casts the int64 step to the schedule's dtype)."""
    if isinstance(step, (Tensor, Variable)):
        return _ops.cast(step, "float32")
    return convert_to_tensor(np.float32(step))


def _c(x) -> Tensor:
    """A float32 constant (Keras converts each hyperparameter to a float32 tensor)."""
    return convert_to_tensor(np.float32(x))


def _positive_steps(cls, arg, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{cls}: {arg} must be > 0, got {value!r}")
    return value


class _TimeDecay(LearningRateSchedule):
    """What ExponentialDecay and InverseTimeDecay share: their arguments, their config,
    and the progress ``step / decay_steps`` (floored with ``staircase``)."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False,
                 name=None):
        self.initial_learning_rate = initial_learning_rate
        self.decay_steps = _positive_steps(type(self).__name__, "decay_steps", decay_steps)
        self.decay_rate = decay_rate
        self.staircase = bool(staircase)
        self.name = name or type(self).__name__

    def _progress(self, step):
        p = _step_float(step) / _c(self.decay_steps)
        return _ops.floor(p) if self.staircase else p

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "decay_rate": self.decay_rate,
                "staircase": self.staircase, "name": self.name}


class ExponentialDecay(_TimeDecay):
    """``initial_learning_rate * decay_rate ** (step / decay_steps)``, in float32.

    With ``staircase=True`` the exponent is ``floor(step / decay_steps)``, so the rate
    drops by ``decay_rate`` every ``decay_steps`` steps.

    Example::

        lr = jt.optimizers.schedules.ExponentialDecay(1e-2, decay_steps=1000, decay_rate=0.9)
        opt = jt.optimizers.SGD(lr)
    """

    def __call__(self, step):
        p = self._progress(step)
        return _c(self.initial_learning_rate) * _ops.pow(_c(self.decay_rate), p)



class PiecewiseConstantDecay(LearningRateSchedule):
    """``values[0]`` up to ``boundaries[0]`` (inclusive), ``values[i]`` for
    ``boundaries[i-1] < step <= boundaries[i]``, ``values[-1]`` after the last
    boundary. The result is float32.

    Example::

        # 1.0 for the first 100001 steps, 0.5 for the next 10000, then 0.1
        lr = jt.optimizers.schedules.PiecewiseConstantDecay([100000, 110000], [1.0, 0.5, 0.1])
    """

    def __init__(self, boundaries, values, name="PiecewiseConstant"):
        boundaries, values = list(boundaries), list(values)
        if len(boundaries) != len(values) - 1:
            raise ValueError(
                "PiecewiseConstantDecay: the length of boundaries should be 1 less than the "
                f"length of values; got boundaries={boundaries} of length {len(boundaries)} "
                f"and values={values} of length {len(values)}")
        if any(b > a for a, b in zip(boundaries[1:], boundaries[:-1])):
            raise ValueError(f"PiecewiseConstantDecay: boundaries must be increasing, got "
                             f"{boundaries}")
        self.boundaries = boundaries
        self.values = values
        self.name = name

    def __call__(self, step):
        # an integer step compares as float64: s <= b for an integer s is s <= floor(b),
        # Keras' comparison after casting the boundaries to the step's integer dtype
        if isinstance(step, (Tensor, Variable)):
            s = _ops.cast(step, "float64")
        else:
            s = convert_to_tensor(np.float64(step))
        bounds = [float(b) for b in self.boundaries]
        values = [_c(v) for v in self.values]
        if not bounds:
            return values[0] + 0.0 * _ops.cast(s, "float32")
        pieces = [(_ops.less_equal(s, bounds[0]), values[0]),
                  (_ops.greater(s, bounds[-1]), values[-1])]
        for lo, hi, v in zip(bounds[:-1], bounds[1:], values[1:-1]):
            pieces.append((_ops.logical_and(_ops.greater(s, lo), _ops.less_equal(s, hi)), v))
        out = None
        for inside, v in pieces:  # exactly one piece holds: a sum of one value and zeros
            term = _ops.cast(inside, "float32") * v
            out = term if out is None else out + term
        return out

    def get_config(self):
        return {"boundaries": self.boundaries, "values": self.values, "name": self.name}


class PolynomialDecay(LearningRateSchedule):
    """From ``initial_learning_rate`` to ``end_learning_rate`` in ``decay_steps`` steps::

        step' = min(step, decay_steps)
        lr    = (initial - end) * (1 - step' / decay_steps) ** power + end

    With ``cycle=True`` the decay restarts: ``decay_steps`` is multiplied by
    ``ceil(step / decay_steps)`` (1 at step 0) and the step is not capped.

    Example::

        lr = jt.optimizers.schedules.PolynomialDecay(0.1, 10000, end_learning_rate=0.01,
                                                      power=0.5)
    """

    def __init__(self, initial_learning_rate, decay_steps, end_learning_rate=0.0001, power=1.0,
                 cycle=False, name="PolynomialDecay"):
        self.initial_learning_rate = initial_learning_rate
        self.decay_steps = _positive_steps("PolynomialDecay", "decay_steps", decay_steps)
        self.end_learning_rate = end_learning_rate
        self.power = power
        self.cycle = bool(cycle)
        self.name = name

    def __call__(self, step):
        initial, end = _c(self.initial_learning_rate), _c(self.end_learning_rate)
        s = _step_float(step)
        decay_steps = _c(self.decay_steps)
        if self.cycle:
            ceil = -_ops.floor(-(s / _c(self.decay_steps)))  # ceil(x) = -floor(-x)
            decay_steps = decay_steps * _ops.where(_ops.equal(s, 0.0), _c(1.0), ceil)
        else:
            s = _ops.minimum(s, decay_steps)
        p = s / decay_steps
        return (initial - end) * _ops.pow(1.0 - p, _c(self.power)) + end

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "end_learning_rate": self.end_learning_rate,
                "power": self.power, "cycle": self.cycle, "name": self.name}


class InverseTimeDecay(_TimeDecay):
    """``initial_learning_rate / (1 + decay_rate * step / decay_steps)``, in float32;
    with ``staircase=True``, ``step / decay_steps`` is floored.

    Example::

        lr = jt.optimizers.schedules.InverseTimeDecay(0.1, decay_steps=1.0, decay_rate=0.5)
    """

    def __call__(self, step):
        p = self._progress(step)
        return _c(self.initial_learning_rate) / (_c(1.0) + _c(self.decay_rate) * p)



def _cosine(fraction, alpha):
    """``(1 - alpha) * 0.5 * (1 + cos(pi * fraction)) + alpha``."""
    cosine = 0.5 * (1.0 + _ops.cos(_c(math.pi) * fraction))
    return (1.0 - alpha) * cosine + alpha


class CosineDecay(LearningRateSchedule):
    """Cosine decay (Loshchilov and Hutter, SGDR), with an optional linear warmup.

    Without ``warmup_target``: for ``s = min(step, decay_steps)``::

        lr = initial * ((1 - alpha) * 0.5 * (1 + cos(pi * s / decay_steps)) + alpha)

    With ``warmup_target``: ``s = min(step, warmup_steps + decay_steps)``; while
    ``s < warmup_steps`` the rate goes linearly from ``initial_learning_rate`` to
    ``warmup_target``, then decays from ``warmup_target`` as above over
    ``s - warmup_steps``.

    Example::

        lr = jt.optimizers.schedules.CosineDecay(0.0, decay_steps=1000, warmup_target=0.1,
                                                  warmup_steps=100)
    """

    def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, name="CosineDecay",
                 warmup_target=None, warmup_steps=0):
        self.initial_learning_rate = initial_learning_rate
        self.decay_steps = _positive_steps("CosineDecay", "decay_steps", decay_steps)
        self.alpha = alpha
        self.name = name
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, (int, float)) or (
            warmup_steps < 0
        ):
            raise ValueError(f"CosineDecay: warmup_steps must be >= 0, got {warmup_steps!r}")
        self.warmup_steps = warmup_steps
        self.warmup_target = warmup_target

    def __call__(self, step):
        initial = _c(self.initial_learning_rate)
        decay_steps = _c(self.decay_steps)
        s = _step_float(step)
        alpha = float(self.alpha)
        if self.warmup_target is None:
            s = _ops.minimum(s, decay_steps)
            return initial * _cosine(s / decay_steps, alpha)
        target, warmup = _c(self.warmup_target), _c(self.warmup_steps)
        s = _ops.minimum(s, decay_steps + warmup)
        # both branches are computed and one is picked: the warmup's s / 0 with no warmup
        # is never the one returned
        warming = (target - initial) * (s / warmup) + initial
        decaying = target * _cosine((s - warmup) / decay_steps, alpha)
        return _ops.where(_ops.less(s, warmup), warming, decaying)

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "alpha": self.alpha, "name": self.name,
                "warmup_target": self.warmup_target, "warmup_steps": self.warmup_steps}


class CosineDecayRestarts(LearningRateSchedule):
    """Cosine decay with warm restarts (SGDR). The ``i``-th period lasts
    ``first_decay_steps * t_mul ** i`` steps and starts at ``initial * m_mul ** i``::

        f  = step / first_decay_steps
        i  = floor(log(1 - f * (1 - t_mul)) / log(t_mul))     (t_mul != 1; floor(f) if 1)
        f' = (f - (1 - t_mul ** i) / (1 - t_mul)) / t_mul ** i  (f - i if t_mul == 1)
        lr = initial * ((1 - alpha) * m_mul ** i * 0.5 * (1 + cos(pi * f')) + alpha)

    Example::

        lr = jt.optimizers.schedules.CosineDecayRestarts(0.1, first_decay_steps=1000)
    """

    def __init__(self, initial_learning_rate, first_decay_steps, t_mul=2.0, m_mul=1.0,
                 alpha=0.0, name="SGDRDecay"):
        self.initial_learning_rate = initial_learning_rate
        self.first_decay_steps = _positive_steps("CosineDecayRestarts", "first_decay_steps",
                                                 first_decay_steps)
        if isinstance(t_mul, bool) or not isinstance(t_mul, (int, float)) or t_mul <= 0:
            raise ValueError(f"CosineDecayRestarts: t_mul must be > 0, got {t_mul!r}")
        self._t_mul = t_mul
        self._m_mul = m_mul
        self.alpha = alpha
        self.name = name

    def __call__(self, step):
        initial = _c(self.initial_learning_rate)
        alpha = _c(self.alpha)
        t_mul, m_mul = _c(self._t_mul), _c(self._m_mul)
        f = _step_float(step) / _c(self.first_decay_steps)
        if float(np.float32(self._t_mul)) == 1.0:  # a constructor argument, not a step value
            i = _ops.floor(f)
            f = f - i
        else:
            i = _ops.floor(_ops.log(1.0 - f * (1.0 - t_mul)) / _ops.log(t_mul))
            sum_r = (1.0 - _ops.pow(t_mul, i)) / (1.0 - t_mul)
            f = (f - sum_r) / _ops.pow(t_mul, i)
        cosine = 0.5 * _ops.pow(m_mul, i) * (1.0 + _ops.cos(_c(math.pi) * f))
        return initial * ((1.0 - alpha) * cosine + alpha)

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate,
                "first_decay_steps": self.first_decay_steps, "t_mul": self._t_mul,
                "m_mul": self._m_mul, "alpha": self.alpha, "name": self.name}


_BY_NAME = {cls.__name__: cls for cls in (
    ExponentialDecay, PiecewiseConstantDecay, PolynomialDecay, InverseTimeDecay, CosineDecay,
    CosineDecayRestarts)}


def serialize(learning_rate_schedule) -> dict:
    """A schedule as Keras serializes it: ``{"module", "class_name", "config",
    "registered_name"}``.

    Example::

        d = jt.optimizers.schedules.serialize(CosineDecay(0.1, 100))
        same = jt.optimizers.schedules.deserialize(d)
    """
    if not isinstance(learning_rate_schedule, LearningRateSchedule):
        raise TypeError(f"serialize: expected a LearningRateSchedule, got "
                        f"{type(learning_rate_schedule).__name__}")
    return _config.serialize(learning_rate_schedule, "keras.optimizers.schedules", _BY_NAME,
                             "learning rate schedule")


def deserialize(config, custom_objects=None):
    """A schedule from ``serialize()``'s dict (jittape's or Keras'); ``custom_objects``
    maps class names to your own schedule classes."""
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(f"deserialize: expected a dict with 'class_name' and 'config', got "
                         f"{config!r}")
    with _config.custom_object_scope(custom_objects):
        cls = _config.find(config, "learning rate schedule", _BY_NAME)
    return cls.from_config(dict(config.get("config", {})))


_config.export("learning rate schedule", ("keras.optimizers.schedules",),
               LearningRateSchedule, _BY_NAME, serialize, deserialize)
