"""Per-coordinate adaptive rates: RMSprop, Adagrad, Adadelta and FTRL (Keras 3's rules)."""

from __future__ import annotations

from ... import ops as _ops
from .base import Optimizer, _f32, _is_number


class RMSprop(Optimizer):
    """RMSprop. With slots ``"rms"`` (mean square), ``"mg"`` (mean gradient, when
    ``centered``) and ``"momentum"`` (when ``momentum > 0``)::

        rms <- rho * rms + (1 - rho) * g^2
        mg  <- rho * mg + (1 - rho) * g                        (centered)
        den  = rms - mg^2 + epsilon   (centered)   |   rms + epsilon
        inc  = lr * g / sqrt(den)
        mom <- momentum * mom + inc;  var <- var - mom        (momentum > 0)
        var <- var - inc                                      (otherwise)

    ``epsilon`` sits inside the square root, as in TF's ApplyRMSProp kernel and Keras 3.

    Example::

        opt = jt.optimizers.RMSprop(1e-3, momentum=0.9, centered=True)
    """

    _keras_slot_names = {"rms": "velocity", "mg": "average_gradient"}

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7,
                 centered=False, **kwargs):
        super().__init__(learning_rate, **kwargs)
        if not _is_number(rho) or not 0 <= rho < 1:
            raise ValueError(f"RMSprop: rho must be in [0, 1), got {rho!r}")
        if not _is_number(momentum) or momentum < 0:
            raise ValueError(f"RMSprop: momentum must be >= 0, got {momentum!r}")
        self.rho, self.momentum = float(rho), float(momentum)
        self.epsilon = float(epsilon)
        self.centered = bool(centered)
        self._slot_names = ("rms",) + (("mg",) if self.centered else ()) + (
            ("momentum",) if self.momentum > 0 else ()
        )

    def update_step(self, gradient, variable, learning_rate):
        rho = self.rho
        rms = self.get_slot(variable, "rms")
        self.assign(rms, rms * rho + _ops.square(gradient) * (1.0 - rho))
        if self.centered:
            mg = self.get_slot(variable, "mg")
            self.assign(mg, mg * rho + gradient * (1.0 - rho))
            den = rms - _ops.square(mg) + self.epsilon
        else:
            den = rms + self.epsilon
        inc = learning_rate * gradient / _ops.sqrt(den)
        if self.momentum > 0:
            mom = self.get_slot(variable, "momentum")
            self.assign(mom, mom * self.momentum + inc)
            self.assign_sub(variable, mom)
        else:
            self.assign_sub(variable, inc)

    def get_config(self):
        return {**super().get_config(), "rho": self.rho, "momentum": self.momentum,
                "epsilon": self.epsilon, "centered": self.centered}


def _accumulator_start(cls, value):
    if not _is_number(value) or value < 0:
        raise ValueError(f"{cls}: initial_accumulator_value must be >= 0, got {value!r}")
    return float(value)


class Adagrad(Optimizer):
    """Adagrad: the rate of each coordinate shrinks with its summed squared gradients.
    With slot ``"accumulator"`` (starting at ``initial_accumulator_value``)::

        acc <- acc + g^2
        var <- var - lr * g / sqrt(acc + epsilon)

    The starting value is rounded to float32 (Keras' constant initializer casts it).

    Example::

        opt = jt.optimizers.Adagrad(0.01, initial_accumulator_value=0.1)
    """

    _slot_names = ("accumulator",)

    def __init__(self, learning_rate=0.001, initial_accumulator_value=0.1, epsilon=1e-7,
                 **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.initial_accumulator_value = _accumulator_start("Adagrad",
                                                            initial_accumulator_value)
        self.epsilon = float(epsilon)

    def _initial_slot_value(self, slot_name):
        return _f32(self.initial_accumulator_value)

    def update_step(self, gradient, variable, learning_rate):
        acc = self.get_slot(variable, "accumulator")
        self.assign_add(acc, _ops.square(gradient))
        self.assign_sub(variable, learning_rate * gradient / _ops.sqrt(acc + self.epsilon))

    def get_config(self):
        return {**super().get_config(),
                "initial_accumulator_value": self.initial_accumulator_value,
                "epsilon": self.epsilon}


class Adadelta(Optimizer):
    """Adadelta (Zeiler, 2012): steps scaled by the ratio of two running RMS values.
    With slots ``"accum_grad"`` (``E[g^2]``) and ``"accum_var"`` (``E[dx^2]``)::

        E[g^2]  <- rho * E[g^2] + (1 - rho) * g^2
        dx       = -sqrt(E[dx^2] + epsilon) / sqrt(E[g^2] + epsilon) * g
        E[dx^2] <- rho * E[dx^2] + (1 - rho) * dx^2
        var     <- var + lr * dx

    Keras' default learning rate is 0.001; the paper's method is ``learning_rate=1.0``.

    Example::

        opt = jt.optimizers.Adadelta(1.0, rho=0.95)
    """

    _keras_slot_names = {"accum_grad": "accumulated_grad", "accum_var": "accumulated_delta_var"}

    _slot_names = ("accum_grad", "accum_var")

    def __init__(self, learning_rate=0.001, rho=0.95, epsilon=1e-7, **kwargs):
        super().__init__(learning_rate, **kwargs)
        if not _is_number(rho) or not 0 <= rho <= 1:
            raise ValueError(f"Adadelta: rho must be in [0, 1], got {rho!r}")
        self.rho = float(rho)
        self.epsilon = float(epsilon)

    def update_step(self, gradient, variable, learning_rate):
        rho, eps = self.rho, self.epsilon
        acc_g = self.get_slot(variable, "accum_grad")
        acc_dx = self.get_slot(variable, "accum_var")
        self.assign(acc_g, acc_g * rho + _ops.square(gradient) * (1.0 - rho))
        dx = -(_ops.sqrt(acc_dx + eps) * gradient) / _ops.sqrt(acc_g + eps)
        self.assign(acc_dx, acc_dx * rho + _ops.square(dx) * (1.0 - rho))
        self.assign_add(variable, learning_rate * dx)

    def get_config(self):
        return {**super().get_config(), "rho": self.rho, "epsilon": self.epsilon}


class Ftrl(Optimizer):
    """FTRL-Proximal (McMahan et al., 2013), with Keras' L2 shrinkage and ``beta``.
    With slots ``"accumulator"`` (``n``, starting at ``initial_accumulator_value``)
    and ``"linear"`` (``z``), ``p = -learning_rate_power`` (0.5 by default)::

        g'   = g + 2 * l2_shrinkage * var
        n'   = n + g^2
        z   <- z + g' - (n'^p - n^p) / lr * var
        q    = n'^p / lr + 2 * (l2 + beta / (2 * lr))
        var <- (clip(z, -l1, l1) - z) / q
        n   <- n'

    The accumulator's starting value is rounded to float32 (Keras casts it).

    Example::

        opt = jt.optimizers.Ftrl(0.1, l1_regularization_strength=0.01)
    """

    _slot_names = ("accumulator", "linear")

    def __init__(self, learning_rate=0.001, learning_rate_power=-0.5,
                 initial_accumulator_value=0.1, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, l2_shrinkage_regularization_strength=0.0,
                 beta=0.0, **kwargs):
        super().__init__(learning_rate, **kwargs)
        self.initial_accumulator_value = _accumulator_start("Ftrl", initial_accumulator_value)
        if not _is_number(learning_rate_power) or learning_rate_power > 0:
            raise ValueError(f"Ftrl: learning_rate_power must be <= 0, got "
                             f"{learning_rate_power!r}")
        for k, val in (("l1_regularization_strength", l1_regularization_strength),
                       ("l2_regularization_strength", l2_regularization_strength),
                       ("l2_shrinkage_regularization_strength",
                        l2_shrinkage_regularization_strength),
                       ("beta", beta)):
            if not _is_number(val) or val < 0:
                raise ValueError(f"Ftrl: {k} must be >= 0, got {val!r}")
        self.learning_rate_power = float(learning_rate_power)
        self.l1_regularization_strength = float(l1_regularization_strength)
        self.l2_regularization_strength = float(l2_regularization_strength)
        self.l2_shrinkage_regularization_strength = float(l2_shrinkage_regularization_strength)
        self.beta = float(beta)

    def _initial_slot_value(self, slot_name):
        return _f32(self.initial_accumulator_value) if slot_name == "accumulator" else None

    def update_step(self, gradient, variable, learning_rate):
        p = -self.learning_rate_power
        l1 = self.l1_regularization_strength
        l2 = self.l2_regularization_strength + self.beta / (2.0 * learning_rate)
        n = self.get_slot(variable, "accumulator")
        z = self.get_slot(variable, "linear")
        g = gradient + variable * (2 * self.l2_shrinkage_regularization_strength)
        new_n = n + _ops.square(gradient)
        self.assign_add(z, g - (_ops.pow(new_n, p) - _ops.pow(n, p)) / learning_rate * variable)
        q = _ops.pow(new_n, p) / learning_rate + 2 * l2
        self.assign(variable, (_ops.clip_by_value(z, -l1, l1) - z) / q)
        self.assign(n, new_n)

    def get_config(self):
        return {**super().get_config(),
                "learning_rate_power": self.learning_rate_power,
                "initial_accumulator_value": self.initial_accumulator_value,
                "l1_regularization_strength": self.l1_regularization_strength,
                "l2_regularization_strength": self.l2_regularization_strength,
                "l2_shrinkage_regularization_strength":
                    self.l2_shrinkage_regularization_strength,
                "beta": self.beta}
