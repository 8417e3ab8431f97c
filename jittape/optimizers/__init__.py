"""``jt.optimizers``: SGD, Adam, AdamW and RMSprop with Keras 3 / tf.keras update rules.

Every update is written with jittape ops and applied with ``Variable.assign*``, and
keeps the variable's dtype: the gradient and the learning rate are cast to it, as
Keras does. The learning rate is stored in a float32 variable (assigning
``opt.learning_rate = 0.01`` changes it) or given as a schedule, a callable of the
step (see ``jt.optimizers.schedules``).

One ``apply_gradients`` call:

1. drops pairs whose gradient is ``None``, with one ``UserWarning`` naming their
   variables (a ``ValueError`` when no gradient is left);
2. checks every gradient's shape against its variable's;
3. creates the slot variables of variables it has not seen before (zeros);
4. reads the learning rate ``lr`` (the schedule at step ``iterations``);
5. applies weight decay when set: ``var <- var - var * weight_decay * lr`` (the decay
   rounded to float32, as Keras' TF backend casts it);
6. applies each optimizer's update rule;
7. increments ``iterations`` (an int64 variable) by one.
"""

from __future__ import annotations

import numbers
import re
import warnings

import numpy as np

from .. import ops as _ops
from .. import train as _train
from ..errors import InvalidArgumentError
from ..tensor import Tensor, Variable, convert_to_tensor
from . import schedules  # noqa: F401
from .schedules import ExponentialDecay, LearningRateSchedule  # noqa: F401

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "schedules", "get"]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _f32(x: float) -> float:
    """``x`` rounded to float32. Keras' TensorFlow backend brings some Python-float
    hyperparameters to the variable's dtype with ``ops.cast``, which goes through a
    float32 tensor: SGD's momentum, Adam's betas in ``beta ** t`` and the weight decay
    are float32 values even for float64 variables. jittape does the same (no change for
    float32 variables)."""
    return float(np.float32(x))


def _vname(v) -> str:
    name = v.name
    return name[:-2] if name.endswith(":0") else name


class Optimizer:
    """Base class. Subclasses declare their slots in ``_slot_names`` and implement
    ``update_step(gradient, variable, learning_rate)``."""

    _slot_names: tuple = ()

    def __init__(self, learning_rate=0.001, weight_decay=None, name=None):
        self.name = name or _snake(type(self).__name__)
        self._schedule = None
        self._lr = None
        self._set_learning_rate(learning_rate)
        if weight_decay is not None and (
            isinstance(weight_decay, bool) or not isinstance(weight_decay, numbers.Real)
            or weight_decay < 0
        ):
            raise ValueError(
                f"{type(self).__name__}: weight_decay must be a non-negative number or None, "
                f"got {weight_decay!r}"
            )
        self.weight_decay = None if weight_decay is None else float(weight_decay)
        self._exclude_names: tuple = ()
        self._exclude_ids: set = set()
        self.iterations = Variable(np.int64(0), trainable=False, name=f"{self.name}/iteration")
        self._slots: dict = {}  # var.ref() -> {slot name: Variable}
        self._slot_variables: list = []
        self._step_values: dict = {}

    # -- learning rate -----------------------------------------------------------
    def _set_learning_rate(self, lr):
        if isinstance(lr, LearningRateSchedule) or (
            callable(lr) and not isinstance(lr, (Tensor, Variable))
        ):
            self._schedule = lr
            return
        if isinstance(lr, bool):
            raise TypeError(f"learning_rate must be a number or a schedule, got {lr!r}")
        try:
            value = float(lr)
        except (TypeError, ValueError):
            raise TypeError(
                f"learning_rate must be a number or a schedule (a callable of the step), "
                f"got {type(lr).__name__}"
            ) from None
        self._schedule = None
        if self._lr is None:
            self._lr = Variable(np.float32(value), trainable=False,
                                name=f"{self.name}/learning_rate")
        else:
            self._lr.assign(np.float32(value))

    @property
    def learning_rate(self):
        """The learning rate for the next update: the learning-rate variable, or the
        schedule's value at the current step."""
        return self._current_learning_rate()

    @learning_rate.setter
    def learning_rate(self, value):
        self._set_learning_rate(value)

    lr = learning_rate

    def _current_learning_rate(self):
        if self._schedule is None:
            return self._lr
        lr = self._schedule(self.iterations)
        if not isinstance(lr, (Tensor, Variable)):
            lr = convert_to_tensor(np.float32(float(lr)))
        if not lr.dtype.is_floating:
            raise TypeError(
                f"{type(self).__name__}: the learning-rate schedule returned a "
                f"{lr.dtype.name} value; it must return a float"
            )
        return lr

    # -- slots ---------------------------------------------------------------------
    def add_variable_from_reference(self, variable, slot_name, initial_value=None):
        """A non-trainable slot variable shaped like ``variable`` (zeros by default)."""
        value = np.zeros(variable.shape, variable.dtype._np) if initial_value is None else (
            np.broadcast_to(np.asarray(initial_value, variable.dtype._np), variable.shape)
        )
        s = Variable(np.array(value), trainable=False,
                     name=f"{self.name}/{_vname(variable)}/{slot_name}")
        self._slots.setdefault(variable.ref(), {})[slot_name] = s
        self._slot_variables.append(s)
        if _train._PENDING:  # a checkpoint restored before this slot existed
            _train.restore_deferred()
        return s

    def _slot_names_for(self, variable) -> tuple:
        return self._slot_names

    def build(self, var_list):
        """Create the slot variables for ``var_list`` (done on first use otherwise)."""
        for v in var_list:
            if v.ref() not in self._slots:
                self._slots[v.ref()] = {}
                for s in self._slot_names_for(v):
                    self.add_variable_from_reference(v, s)

    def get_slot(self, var, slot_name):
        """The slot variable ``slot_name`` (e.g. ``"m"``) of ``var``."""
        slots = self._slots.get(var.ref())
        if slots is None:
            raise KeyError(f"{type(self).__name__} has no slots for variable {var.name!r} yet")
        if slot_name not in slots:
            raise KeyError(
                f"{type(self).__name__}: no slot {slot_name!r} for {var.name!r}; slots: "
                f"{sorted(slots)}"
            )
        return slots[slot_name]

    def get_slot_names(self) -> list:
        return list(self._slot_names)

    @property
    def variables(self) -> list:
        """``iterations``, the learning-rate variable (if any), then every slot variable."""
        return [self.iterations] + ([self._lr] if self._lr is not None else []) + list(
            self._slot_variables
        )

    # -- weight decay --------------------------------------------------------------------
    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        """Exempt variables (or variables whose name contains one of ``var_names``)."""
        for v in var_list or ():
            self._exclude_ids.add(v.ref())
        self._exclude_names = self._exclude_names + tuple(var_names or ())

    def _use_weight_decay(self, v) -> bool:
        if v.ref() in self._exclude_ids:
            return False
        return not any(n in v.name for n in self._exclude_names)

    # -- applying --------------------------------------------------------------------------
    def _check_pairs(self, grads_and_vars):
        pairs, missing = [], []
        for item in grads_and_vars:
            try:
                g, v = item
            except (TypeError, ValueError):
                raise TypeError(
                    f"{type(self).__name__}.apply_gradients expects (gradient, variable) pairs, "
                    f"e.g. zip(grads, model.trainable_variables); got {item!r}"
                ) from None
            if not isinstance(v, Variable):
                raise TypeError(
                    f"{type(self).__name__}.apply_gradients: the second element of each pair must "
                    f"be a jt.Variable, got {type(v).__name__}"
                )
            if g is None:
                missing.append(v)
                continue
            if not v.dtype.is_floating:
                raise TypeError(
                    f"{type(self).__name__}.apply_gradients: variable {v.name!r} has dtype "
                    f"{v.dtype.name}; only float variables can be optimized"
                )
            g = g if isinstance(g, Tensor) else convert_to_tensor(
                g.read_value() if isinstance(g, Variable) else np.asarray(g)
            )
            if not g.dtype.is_floating:
                raise TypeError(
                    f"{type(self).__name__}.apply_gradients: the gradient for {v.name!r} has "
                    f"dtype {g.dtype.name}; gradients must be floats"
                )
            if tuple(g.shape) != tuple(v.shape):
                raise InvalidArgumentError(
                    f"{type(self).__name__}.apply_gradients: the gradient for variable "
                    f"{v.name!r} has shape {list(g.shape)}, but the variable has shape "
                    f"{list(v.shape)}"
                )
            if g.dtype != v.dtype:
                g = _ops.cast(g, v.dtype)  # Keras casts gradients to the variable's dtype
            pairs.append((g, v))
        if missing:
            names = [v.name for v in missing]
            if not pairs:
                raise ValueError(
                    f"No gradients provided for any variable: {names}. Check that the loss "
                    "depends on the variables and was computed inside the GradientTape."
                )
            warnings.warn(
                f"Gradients do not exist for variables {names} when minimizing the loss; "
                "they were not updated. Check that the loss depends on them (and that they "
                "were read inside the GradientTape).",
                UserWarning,
                stacklevel=3,
            )
        return pairs

    def apply_gradients(self, grads_and_vars, name=None):
        """Apply ``(gradient, variable)`` pairs, e.g. ``zip(grads, model.trainable_variables)``.

        Returns the ``iterations`` variable after the increment.
        """
        pairs = self._check_pairs(grads_and_vars)
        self.build([v for _, v in pairs])
        self._step_values = {}  # per-step scalars shared by the variables of one dtype
        lr = self._current_learning_rate()
        if self.weight_decay:
            for _, v in pairs:
                if self._use_weight_decay(v):
                    lr_v = _ops.cast(lr, v.dtype)
                    v.assign(v - v * _f32(self.weight_decay) * lr_v)
        for g, v in pairs:
            self.update_step(g, v, _ops.cast(lr, v.dtype))
        self._step_values = {}
        self.iterations.assign_add(1)
        return self.iterations

    def minimize(self, loss, var_list, tape=None):
        """Compute gradients of ``loss`` and apply them (tf.keras 2's ``minimize``).

        ``loss`` is a callable returning the loss (run under a new tape), or a tensor
        recorded on ``tape``. ``var_list`` may be a callable returning the variables.
        """
        from ..tape import GradientTape

        if callable(loss):
            with GradientTape() as tape:
                value = loss()
        else:
            if tape is None:
                raise ValueError("minimize: a tensor loss needs the tape it was recorded on")
            value = loss
        if callable(var_list):
            var_list = var_list()
        var_list = list(var_list)
        grads = tape.gradient(value, var_list)
        return self.apply_gradients(zip(grads, var_list))

    def update_step(self, gradient, variable, learning_rate):
        raise NotImplementedError

    def _per_step(self, key, make):
        """``make()``, computed once per ``apply_gradients`` call for each ``key``."""
        cache = self._step_values
        if key not in cache:
            cache[key] = make()
        return cache[key]

    def _local_step(self, dtype):
        """``iterations + 1`` (the 1-based number of this update) in ``dtype``."""
        return _ops.cast(self.iterations + 1, dtype)

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r}, iterations={int(self.iterations)}>"


class SGD(Optimizer):
    """Stochastic gradient descent, with optional (Nesterov) momentum.

    Without momentum: ``var <- var - lr * g``. With momentum ``mu`` (slot
    ``"momentum"``, ``m``)::

        m   <- mu * m - lr * g
        var <- var + m                       (nesterov=False)
        var <- var + mu * m - lr * g         (nesterov=True, using the new m)

    ``mu`` is rounded to float32, as Keras' TF backend casts it (see ``_f32``).
    """

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=None,
                 name=None):
        super().__init__(learning_rate, weight_decay=weight_decay, name=name)
        if not 0 <= momentum <= 1:
            raise ValueError(f"SGD: momentum must be in [0, 1], got {momentum}")
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)
        self._slot_names = ("momentum",) if self.momentum != 0 else ()

    def update_step(self, gradient, variable, learning_rate):
        if self.momentum == 0:
            variable.assign_sub(gradient * learning_rate)
            return
        mu = _f32(self.momentum)
        m = self.get_slot(variable, "momentum")
        m.assign(m * mu - gradient * learning_rate)
        if self.nesterov:
            variable.assign_add(m * mu - gradient * learning_rate)
        else:
            variable.assign_add(m)


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
    """

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 amsgrad=False, weight_decay=None, name=None):
        super().__init__(learning_rate, weight_decay=weight_decay, name=name)
        for k, b in (("beta_1", beta_1), ("beta_2", beta_2)):
            if not 0 <= b < 1:
                raise ValueError(f"{type(self).__name__}: {k} must be in [0, 1), got {b}")
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
        m.assign_add((gradient - m) * (1.0 - self.beta_1))
        v.assign_add((_ops.square(gradient) - v) * (1.0 - self.beta_2))
        if self.amsgrad:
            vhat = self.get_slot(variable, "vhat")
            vhat.assign(_ops.maximum(vhat, v))
            v = vhat
        variable.assign_sub(m * alpha / (_ops.sqrt(v) + self.epsilon))


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter), as Keras applies it:
    before the Adam update, ``var <- var - var * weight_decay * lr`` (the learning
    rate of this step, not ``lr_t``); then the Adam update above.
    ``exclude_from_weight_decay`` exempts variables (biases, normalization weights).
    """

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-7, amsgrad=False, name=None):
        if weight_decay is None:
            raise ValueError("AdamW: weight_decay must be a number (use Adam for none)")
        super().__init__(learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                         amsgrad=amsgrad, weight_decay=weight_decay, name=name)


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
    """

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7,
                 centered=False, weight_decay=None, name=None):
        super().__init__(learning_rate, weight_decay=weight_decay, name=name)
        if not 0 <= rho < 1:
            raise ValueError(f"RMSprop: rho must be in [0, 1), got {rho}")
        if momentum < 0:
            raise ValueError(f"RMSprop: momentum must be >= 0, got {momentum}")
        self.rho, self.momentum = float(rho), float(momentum)
        self.epsilon = float(epsilon)
        self.centered = bool(centered)
        self._slot_names = ("rms",) + (("mg",) if self.centered else ()) + (
            ("momentum",) if self.momentum > 0 else ()
        )

    def update_step(self, gradient, variable, learning_rate):
        rho = self.rho
        rms = self.get_slot(variable, "rms")
        rms.assign(rms * rho + _ops.square(gradient) * (1.0 - rho))
        if self.centered:
            mg = self.get_slot(variable, "mg")
            mg.assign(mg * rho + gradient * (1.0 - rho))
            den = rms - _ops.square(mg) + self.epsilon
        else:
            den = rms + self.epsilon
        inc = learning_rate * gradient / _ops.sqrt(den)
        if self.momentum > 0:
            mom = self.get_slot(variable, "momentum")
            mom.assign(mom * self.momentum + inc)
            variable.assign_sub(mom)
        else:
            variable.assign_sub(inc)


_BY_NAME = {"sgd": SGD, "adam": Adam, "adamw": AdamW, "rmsprop": RMSprop}


def get(identifier):
    """An optimizer from a name (``"adam"``) with its defaults, or an instance."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise ValueError(
        f"Unknown optimizer {identifier!r}; known names: {', '.join(sorted(_BY_NAME))}"
    )
