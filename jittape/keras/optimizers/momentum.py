"""SGD (with momentum and Nesterov momentum) and Lion: updates driven by a momentum slot."""

from __future__ import annotations

from ... import ops as _ops
from .base import Optimizer, _f32, _is_number


class SGD(Optimizer):
    """Stochastic gradient descent, with optional (Nesterov) momentum.

    Without momentum: ``var <- var - lr * g``. With momentum ``mu`` (slot
    ``"momentum"``, ``m``)::

        m   <- mu * m - lr * g
        var <- var + m                       (nesterov=False)
        var <- var + mu * m - lr * g         (nesterov=True, using the new m)

    ``mu`` is rounded to float32, as Keras' TF backend casts it (see ``_f32``).
    Takes every option of ``Optimizer`` (``clipnorm``, ``use_ema``, ...) by keyword.

    Example::

        opt = jt.optimizers.SGD(0.01, momentum=0.9, nesterov=True)
    """

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, **kwargs):
        super().__init__(learning_rate, **kwargs)
        if not _is_number(momentum) or not 0 <= momentum <= 1:
            raise ValueError(f"SGD: momentum must be in [0, 1], got {momentum!r}")
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)
        self._slot_names = ("momentum",) if self.momentum != 0 else ()

    def update_step(self, gradient, variable, learning_rate):
        if self.momentum == 0:
            self.assign_sub(variable, gradient * learning_rate)
            return
        mu = _f32(self.momentum)
        m = self.get_slot(variable, "momentum")
        self.assign(m, m * mu - gradient * learning_rate)
        if self.nesterov:
            self.assign_add(variable, m * mu - gradient * learning_rate)
        else:
            self.assign_add(variable, m)

    def get_config(self):
        return {**super().get_config(), "momentum": self.momentum, "nesterov": self.nesterov}


class Lion(Optimizer):
    """Lion (Chen et al., 2023, "Symbolic Discovery of Optimization Algorithms"): the
    sign of an interpolated momentum. With slot ``"momentum"`` (``m``)::

        var <- var - lr * sign(beta_1 * m + (1 - beta_1) * g)
        m   <- beta_2 * m + (1 - beta_2) * g

    Both betas are rounded to float32 (Keras casts them), ``1 - beta`` included.
    ``beta_1`` must be in ``(0, 1]``. A Lion learning rate is usually 3-10 times
    smaller than Adam's.

    Example::

        opt = jt.optimizers.Lion(1e-4, weight_decay=0.1)
    """

    _slot_names = ("momentum",)

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.99, **kwargs):
        super().__init__(learning_rate, **kwargs)
        if not _is_number(beta_1) or not 0 < beta_1 <= 1:
            raise ValueError(f"Lion: beta_1 must be in (0, 1] (otherwise Lion is sign SGD), "
                             f"got {beta_1!r}")
        if not _is_number(beta_2) or not 0 <= beta_2 <= 1:
            raise ValueError(f"Lion: beta_2 must be in [0, 1], got {beta_2!r}")
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)

    def update_step(self, gradient, variable, learning_rate):
        b1, b2 = _f32(self.beta_1), _f32(self.beta_2)
        m = self.get_slot(variable, "momentum")
        self.assign_sub(variable, learning_rate * _ops.sign(m * b1 + gradient * (1.0 - b1)))
        self.assign(m, m * b2 + gradient * (1.0 - b2))

    def get_config(self):
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2}
