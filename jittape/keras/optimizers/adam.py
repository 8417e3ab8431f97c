"""The Adam family: Adam (with AMSGrad), AdamW, Adamax and Nadam, with Keras 3's update rules."""

from __future__ import annotations

from ... import ops as _ops
from .base import Optimizer, _f32, _is_number


def _check_betas(cls, **betas):
    for k, b in betas.items():
        if not _is_number(b) or not 0 <= b < 1:
            raise ValueError(f"{cls}: {k} must be in [0, 1), got {b!r}")


class Adam(Optimizer):
    """Adam with Keras' bias correction folded into the step size. At update ``t``
    (1-based), with slots ``"m"``, ``"v"`` (and ``"vhat"`` for AMSGrad)::

        m    <- m + (g - m) * (1 - beta_1)          (= beta_1 m + (1 - beta_1) g)
        v    <- v + (g^2 - v) * (1 - beta_2)
        lr_t  = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
        vhat <- max(vhat, v); use vhat for v        (amsgrad=True)
        var  <- var - lr_t * m / (sqrt(v) + epsilon)

    ``epsilon`` (1e-7, Keras' default) is added to ``sqrt(v)``, not to the
    bias-corrected ``sqrt(v_hat)`` of the paper. In ``beta ** t`` the betas are rounded
    to float32, as Keras' TF backend casts them (``1 - beta`` is not; see ``_f32``).

    Example::

        opt = jt.optimizers.Adam(1e-3, amsgrad=True, global_clipnorm=1.0)
    """

    _keras_slot_names = {"m": "momentum", "v": "velocity", "vhat": "velocity_hat"}

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 amsgrad=False, **kwargs):
        super().__init__(learning_rate, **kwargs)
        _check_betas(type(self).__name__, beta_1=beta_1, beta_2=beta_2)
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)
        self.epsilon = float(epsilon)
        self.amsgrad = bool(amsgrad)
        self._slot_names = ("m", "v", "vhat") if self.amsgrad else ("m", "v")

    def _step_size(self, learning_rate, dtype):
        t = self._local_step(dtype)
        b1_power = _ops.pow(_f32(self.beta_1), t)
        b2_power = _ops.pow(_f32(self.beta_2), t)
        return learning_rate * _ops.sqrt(1.0 - b2_power) / (1.0 - b1_power)

    def update_step(self, gradient, variable, learning_rate):
        alpha = self._per_step(("alpha", variable.dtype.name),
                               lambda: self._step_size(learning_rate, variable.dtype))
        m = self.get_slot(variable, "m")
        v = self.get_slot(variable, "v")
        self.assign_add(m, (gradient - m) * (1.0 - self.beta_1))
        self.assign_add(v, (_ops.square(gradient) - v) * (1.0 - self.beta_2))
        if self.amsgrad:
            vhat = self.get_slot(variable, "vhat")
            self.assign(vhat, _ops.maximum(vhat, v))
            v = vhat
        self.assign_sub(variable, m * alpha / (_ops.sqrt(v) + self.epsilon))

    def get_config(self):
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon, "amsgrad": self.amsgrad}


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter), as Keras applies it:
    before the Adam update, ``var <- var - var * weight_decay * lr`` (the learning
    rate of this step, not ``lr_t``); then the Adam update above.
    ``exclude_from_weight_decay`` exempts variables (biases, normalization weights).

    Example::

        opt = jt.optimizers.AdamW(1e-3, weight_decay=0.01)
        opt.exclude_from_weight_decay(var_names=["bias"])
    """

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-7, amsgrad=False, **kwargs):
        if weight_decay is None:
            raise ValueError("AdamW: weight_decay must be a number (use Adam for none), "
                             "got None")
        super().__init__(learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                         amsgrad=amsgrad, weight_decay=weight_decay, **kwargs)


class Adamax(Optimizer):
    """Adamax, Adam with the infinity norm (Kingma and Ba, section 7). At update ``t``,
    with slots ``"m"`` and ``"v"`` (the weighted infinity norm ``u``)::

        m   <- m + (g - m) * (1 - beta_1)
        u   <- max(beta_2 * u, |g|)
        var <- var - lr * m / ((1 - beta_1^t) * (u + epsilon))

    In ``beta_1^t`` the beta is rounded to float32 (Keras casts it); elsewhere the
    betas are exact.

    Example::

        opt = jt.optimizers.Adamax(2e-3)
    """

    _keras_slot_names = {"m": "momentum", "v": "norm"}

    _slot_names = ("m", "v")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 **kwargs):
        super().__init__(learning_rate, **kwargs)
        _check_betas("Adamax", beta_1=beta_1, beta_2=beta_2)
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)
        self.epsilon = float(epsilon)

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        b1_power = self._per_step(
            ("b1_power", dtype.name),
            lambda: _ops.pow(_f32(self.beta_1), self._local_step(dtype)))
        m = self.get_slot(variable, "m")
        u = self.get_slot(variable, "v")
        self.assign_add(m, (gradient - m) * (1.0 - self.beta_1))
        self.assign(u, _ops.maximum(u * self.beta_2, _ops.abs(gradient)))
        self.assign_sub(variable,
                        learning_rate * m / ((1.0 - b1_power) * (u + self.epsilon)))

    def get_config(self):
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon}


class Nadam(Optimizer):
    """Nadam, Adam with Nesterov momentum (Dozat, 2016), with Keras' momentum schedule
    ``mu_t = beta_1 * (1 - 0.5 * 0.96^t)``. At update ``t``, with slots ``"m"``,
    ``"v"`` and one variable ``u_product`` (``prod mu_1..mu_t``, starting at 1)::

        u_product <- u_product * mu_t                  (once per update, for all variables)
        m     <- m + (g - m) * (1 - beta_1)
        v     <- v + (g^2 - v) * (1 - beta_2)
        m_hat  = mu_{t+1} m / (1 - u_product mu_{t+1}) + (1 - mu_t) g / (1 - u_product)
        v_hat  = v / (1 - beta_2^t)
        var   <- var - lr * m_hat / (sqrt(v_hat) + epsilon)

    In the per-variable rule the betas and 0.96 are rounded to float32 (Keras casts
    them); in ``u_product``'s update they are exact. ``u_product`` has the dtype of
    the first variable the optimizer sees, as in Keras.

    Example::

        opt = jt.optimizers.Nadam(2e-3)
    """

    _keras_slot_names = {"m": "momentum", "v": "velocity"}

    _slot_names = ("m", "v")

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 **kwargs):
        super().__init__(learning_rate, **kwargs)
        _check_betas("Nadam", beta_1=beta_1, beta_2=beta_2)
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)
        self.epsilon = float(epsilon)
        self._u_product = None

    def build(self, var_list):
        super().build(var_list)
        if self._u_product is None and self._trainable_variables:
            self._u_product = self.add_variable(
                (), initializer=1.0, dtype=self._trainable_variables[0].dtype, name="u_product")

    def _update_variables(self, grads, variables, lr):
        u = self._u_product
        t = _ops.cast(self.iterations + 1, u.dtype)
        self.assign(u, u * self.beta_1 * (1.0 - 0.5 * _ops.pow(0.96, t)))
        super()._update_variables(grads, variables, lr)

    def _coefficients(self, dtype):
        """``(mu_t, mu_{t+1}, u_product, u_product * mu_{t+1}, beta_2^t)`` in ``dtype``."""
        b1, b2, decay = _f32(self.beta_1), _f32(self.beta_2), _f32(0.96)
        t = self._local_step(dtype)
        u_t = b1 * (1.0 - 0.5 * _ops.pow(decay, t))
        u_t1 = b1 * (1.0 - 0.5 * _ops.pow(decay, t + 1.0))
        u_prod = _ops.cast(self._u_product, dtype)
        return u_t, u_t1, u_prod, u_prod * u_t1, _ops.pow(b2, t)

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        u_t, u_t1, u_prod, u_prod1, b2_power = self._per_step(
            ("nadam", dtype.name), lambda: self._coefficients(dtype))
        b1, b2 = _f32(self.beta_1), _f32(self.beta_2)
        m = self.get_slot(variable, "m")
        v = self.get_slot(variable, "v")
        self.assign_add(m, (gradient - m) * (1.0 - b1))
        self.assign_add(v, (_ops.square(gradient) - v) * (1.0 - b2))
        m_hat = u_t1 * m / (1.0 - u_prod1) + (1.0 - u_t) * gradient / (1.0 - u_prod)
        v_hat = v / (1.0 - b2_power)
        self.assign_sub(variable, m_hat * learning_rate / (_ops.sqrt(v_hat) + self.epsilon))

    def get_config(self):
        return {**super().get_config(), "beta_1": self.beta_1, "beta_2": self.beta_2,
                "epsilon": self.epsilon}
