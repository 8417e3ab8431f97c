"""``jt.optimizers.schedules``: learning rates that change with the step.

A schedule is any callable ``schedule(step) -> learning rate``; the optimizer calls it
with its ``iterations`` variable (an int64 ``jt.Variable`` counting the updates
applied so far, 0 at the first step) before each update.
"""

from __future__ import annotations

from .. import ops as _ops
from ..tensor import Tensor, Variable, convert_to_tensor

__all__ = ["LearningRateSchedule", "ExponentialDecay"]


class LearningRateSchedule:
    """Base class: subclasses implement ``__call__(step)`` with jittape ops."""

    def __call__(self, step):
        raise NotImplementedError

    def get_config(self) -> dict:
        return {}

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


def _step_float(step) -> Tensor:
    if isinstance(step, (Tensor, Variable)):
        return _ops.cast(step, "float32")
    return convert_to_tensor(float(step), dtype="float32")


class ExponentialDecay(LearningRateSchedule):
    """``initial_learning_rate * decay_rate ** (step / decay_steps)``, in float32.

    With ``staircase=True`` the exponent is ``floor(step / decay_steps)``, so the rate
    drops by ``decay_rate`` every ``decay_steps`` steps.
    """

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False,
                 name=None):
        if decay_steps <= 0:
            raise ValueError(f"ExponentialDecay: decay_steps must be positive, got {decay_steps}")
        self.initial_learning_rate = float(initial_learning_rate)
        self.decay_steps = decay_steps
        self.decay_rate = float(decay_rate)
        self.staircase = bool(staircase)
        self.name = name

    def __call__(self, step):
        p = _step_float(step) / float(self.decay_steps)
        if self.staircase:
            p = _ops.floor(p)
        return _ops.pow(self.decay_rate, p) * self.initial_learning_rate

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "decay_rate": self.decay_rate,
                "staircase": self.staircase}
