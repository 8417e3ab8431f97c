"""The optimizer base class: learning rate, slots, and the options every Keras 3 optimizer takes.

Every update is written with jittape ops and applied with ``Variable.assign*``, so a
train step compiled by ``@jt.function`` runs it with no Python per step. A decision
that depends on the step count (gradient accumulation, EMA overwrites) is a tensor
mask on the values assigned, never a Python ``if`` on a tensor.
"""

from __future__ import annotations

import inspect
import numbers
import re
import warnings

import numpy as np

from ... import ops as _ops
from ... import train as _train
from ...tensor import Tensor, Variable, convert_to_tensor
from ..variables import KerasVariable, name_scope
from . import schedules
from .pairs import checked_pairs
from .schedules import LearningRateSchedule

_EMA_SLOT = "average"
_ACCUMULATOR_SLOT = "gradient_accumulator"


def _snake(name: str) -> str:
    """``AdamW`` -> ``adam_w``, ``RMSprop`` -> ``rm_sprop`` (Keras' default names)."""
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def _f32(x: float) -> float:
    """``x`` rounded to float32. Keras' TensorFlow backend brings some Python-float
    hyperparameters to the variable's dtype with ``ops.cast``, which goes through a
    float32 tensor: SGD's momentum, Adam's betas in ``beta ** t`` and the weight decay
    are float32 values even for float64 variables. jittape does the same (no change for
    float32 variables). Where Keras multiplies by the Python float itself, it is exact."""
    return float(np.float32(x))


def _reference_name(v) -> str:
    """A model variable as the names of its slots start (Keras 3's
    ``add_variable_from_reference``): a Keras variable's path with ``_`` for ``/``
    (``dense_kernel``), a plain ``jt.Variable``'s TF name likewise (``x_0``)."""
    if isinstance(v, KerasVariable):
        return v.path.replace("/", "_")
    return v._label.replace("/", "_").replace(":", "_")


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _takes_step(fn) -> bool:
    """Whether the learning-rate callable ``fn`` takes the step (Keras calls a plain
    callable with no argument; jittape also accepts ``fn(step)``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
               for p in params)


class Optimizer:
    """Base class of the optimizers, with Keras 3's options.

    Subclasses declare their slots in ``_slot_names`` (or ``_slot_names_for``) and
    implement ``update_step(gradient, variable, learning_rate)`` with ``self.assign``,
    ``self.assign_add`` and ``self.assign_sub`` (which gradient accumulation masks).

    Args (keyword arguments of every optimizer):
        learning_rate: a float (kept in a float32 variable), a
            ``jt.optimizers.schedules.LearningRateSchedule``, or a callable returning
            the rate (called with the step, or with no argument as Keras does).
        weight_decay: ``var <- var - var * weight_decay * lr`` before each update.
        clipnorm: clip each gradient to this L2 norm.
        clipvalue: clip each gradient's elements to ``[-clipvalue, clipvalue]``.
        global_clipnorm: scale all gradients so their global norm is at most this.
            At most one of the three clips may be set.
        use_ema: keep an exponential moving average of the variables (slot
            ``"average"``): ``average <- m * average + (1 - m) * var``, with
            ``m = ema_momentum`` except at the first step (``m = 0``).
        ema_momentum: the ``m`` above, in ``[0, 1]`` (0.99).
        ema_overwrite_frequency: every this many steps, ``var <- average``; with
            ``None``, only ``finalize_variable_values`` does it.
        loss_scale_factor: gradients are divided by it before anything else;
            ``scale_loss(loss)`` multiplies a loss by it.
        gradient_accumulation_steps: ``N >= 2``: gradients are summed in the slot
            ``"gradient_accumulator"`` and the variables change every ``N``-th call
            only, with the mean of the ``N`` gradients; ``iterations`` then counts
            those updates (``calls // N``) while schedules see the calls.
        name: the prefix of the optimizer's variable names.

    Example::

        opt = jt.optimizers.Adam(1e-3, global_clipnorm=1.0, use_ema=True)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    """

    _slot_names: tuple = ()
    # the slots' names in Keras 3's variables (``adam/dense_kernel_momentum``) where they
    # differ from the slots' own names, which stay tf.keras 2's: checkpoints key slots by them
    _keras_slot_names: dict = {}
    # set by jt.distributed.DistributedOptimizer: (grads, variables) -> reduced grads
    _reduce_gradients = None
    # jt.train.Checkpoint saves the slot variables (``_slots``) under the paths of the
    # variables they belong to, as TF saves an optimizer's slots
    _checkpoint_has_slots = True

    def __init__(self, learning_rate=0.001, weight_decay=None, clipnorm=None, clipvalue=None,
                 global_clipnorm=None, use_ema=False, ema_momentum=0.99,
                 ema_overwrite_frequency=None, loss_scale_factor=None,
                 gradient_accumulation_steps=None, name=None, **kwargs):
        cls = type(self).__name__
        if kwargs.pop("decay", None) is not None:
            warnings.warn(f"{cls}: the argument `decay` is no longer supported (Keras 3) and "
                          "is ignored; use a learning-rate schedule", UserWarning, stacklevel=3)
        if kwargs:
            raise ValueError(f"{cls}: argument(s) not recognized: {kwargs}")
        self.name = name or _snake(cls)
        self.weight_decay = self._nonnegative("weight_decay", weight_decay)
        self.clipnorm = self._nonnegative("clipnorm", clipnorm)
        self.clipvalue = self._nonnegative("clipvalue", clipvalue)
        self.global_clipnorm = self._nonnegative("global_clipnorm", global_clipnorm)
        clips = {"clipnorm": clipnorm, "clipvalue": clipvalue, "global_clipnorm": global_clipnorm}
        if sum(v is not None for v in clips.values()) > 1:
            raise ValueError(
                f"{cls}: only one of `clipnorm`, `clipvalue` and `global_clipnorm` can be set; "
                "got " + ", ".join(f"{k}={v}" for k, v in clips.items()))
        self.use_ema = bool(use_ema)
        if self.use_ema:
            if not _is_number(ema_momentum) or not 0 <= ema_momentum <= 1:
                raise ValueError(f"{cls}: ema_momentum must be in [0, 1], got {ema_momentum!r}")
            if ema_overwrite_frequency is not None and (
                not isinstance(ema_overwrite_frequency, numbers.Integral)
                or isinstance(ema_overwrite_frequency, bool) or ema_overwrite_frequency < 1
            ):
                raise ValueError(f"{cls}: ema_overwrite_frequency must be an integer >= 1 or "
                                 f"None, got {ema_overwrite_frequency!r}")
        self.ema_momentum = ema_momentum
        self.ema_overwrite_frequency = ema_overwrite_frequency
        if loss_scale_factor is not None and (
            not _is_number(loss_scale_factor) or not loss_scale_factor > 0
        ):
            raise ValueError(f"{cls}: loss_scale_factor must be a positive number or None, "
                             f"got {loss_scale_factor!r}")
        self.loss_scale_factor = loss_scale_factor
        if gradient_accumulation_steps is not None and (
            not isinstance(gradient_accumulation_steps, numbers.Integral)
            or isinstance(gradient_accumulation_steps, bool) or gradient_accumulation_steps < 2
        ):
            raise ValueError(f"{cls}: gradient_accumulation_steps must be an integer >= 2 or "
                             f"None, got {gradient_accumulation_steps!r}")
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self._schedule = None
        self._lr = None
        self._set_learning_rate(learning_rate)
        self._exclude_names: tuple = ()
        self._exclude_ids: set = set()
        self._iterations = self._variable(np.int64(0), "iteration")
        self._slots: dict = {}  # var.ref() -> {slot name: Variable}
        self._slot_variables: list = []  # every optimizer variable but iterations and lr
        self._shared: dict = {}  # name -> optimizer variable not tied to one model variable
        self._trainable_variables: list = []  # the variables built, in order
        self._step_values: dict = {}
        self._update_mask = None  # under gradient accumulation: "this call updates"
        self.built = False  # True once build() has run (Keras' flag)

    def _nonnegative(self, arg, value):
        if value is None:
            return None
        if not _is_number(value) or value < 0:
            raise ValueError(f"{type(self).__name__}: {arg} must be a non-negative number or "
                             f"None, got {value!r}")
        return float(value)

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
        if self._schedule is not None:
            raise TypeError(
                f"{type(self).__name__} was created with a learning-rate schedule, so its "
                f"learning rate cannot be set to {value}; create it with a float learning_rate "
                "to change the rate between steps")
        if self._lr is None:
            self._lr = self._variable(np.float32(value), "learning_rate")
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
        s = self._schedule
        if isinstance(s, LearningRateSchedule) or _takes_step(s):
            lr = s(self._iterations)  # schedules see every call, accumulated or not
        else:
            lr = s()
        if not isinstance(lr, (Tensor, Variable)):
            lr = convert_to_tensor(np.float32(float(lr)))
        if not lr.dtype.is_floating:
            raise TypeError(
                f"{type(self).__name__}: the learning-rate schedule returned a "
                f"{lr.dtype.name} value; it must return a float"
            )
        return lr

    # -- iterations --------------------------------------------------------------
    @property
    def iterations(self):
        """The number of updates applied: the int64 ``iterations`` variable, or, with
        ``gradient_accumulation_steps=N``, that variable (which counts the calls of
        ``apply_gradients``) floor-divided by ``N``, as Keras counts."""
        if self.gradient_accumulation_steps:
            return _ops.floordiv(self._iterations, self.gradient_accumulation_steps)
        return self._iterations

    def _local_step(self, dtype):
        """``iterations + 1`` (the 1-based number of this update) in ``dtype``."""
        return _ops.cast(self.iterations + 1, dtype)

    # -- slots ---------------------------------------------------------------------
    def add_variable(self, shape, initializer="zeros", dtype="float32", name=None):
        """A non-trainable optimizer variable (not tied to one model variable).

        ``initializer`` is ``"zeros"``, ``"ones"`` or a number.
        """
        if isinstance(initializer, str):
            if initializer not in ("zeros", "ones"):
                raise ValueError(f"{type(self).__name__}.add_variable: initializer must be "
                                 f"'zeros', 'ones' or a number, got {initializer!r}")
            initializer = 0.0 if initializer == "zeros" else 1.0
        from ...dtypes import as_dtype

        np_dtype = as_dtype(dtype)._np
        v = self._variable(np.full(tuple(shape), initializer, np_dtype), name or "variable")
        self._shared[name or f"variable_{len(self._shared)}"] = v
        self._slot_variables.append(v)
        if _train._PENDING:
            _train.restore_deferred()
        return v

    def add_variable_from_reference(self, variable, slot_name, initial_value=None):
        """A non-trainable slot variable shaped like ``variable`` (zeros by default)."""
        value = np.zeros(variable.shape, variable.dtype._np) if initial_value is None else (
            np.broadcast_to(np.asarray(initial_value, variable.dtype._np), variable.shape)
        )
        keras_name = self._keras_slot_names.get(slot_name, slot_name)
        s = self._variable(np.array(value), f"{_reference_name(variable)}_{keras_name}")
        self._slots.setdefault(variable.ref(), {})[slot_name] = s
        self._slot_variables.append(s)
        if _train._PENDING:  # a checkpoint restored before this slot existed
            _train.restore_deferred()
        return s

    def _variable(self, value, name):
        """A non-trainable Keras variable in the optimizer's scope (``adam/iteration``)."""
        with name_scope(self.name, caller=self):
            return KerasVariable(value, trainable=False, name=name)

    def _slot_names_for(self, variable) -> tuple:
        return self._slot_names

    def _initial_slot_value(self, slot_name):
        """The value a slot starts at (``None``: zeros)."""
        return None

    def build(self, var_list):
        """Create the slot variables for ``var_list`` (done on first use otherwise).

        Variables seen for the first time get, in Keras' order: their EMA slots, their
        gradient accumulators, then each optimizer's own slots, variable by variable.
        """
        new = []
        for v in var_list:
            if v.ref() not in self._slots:
                self._slots[v.ref()] = {}
                self._trainable_variables.append(v)
                new.append(v)
        if self.use_ema:
            for v in new:
                self.add_variable_from_reference(v, _EMA_SLOT)
        if self.gradient_accumulation_steps:
            for v in new:
                self.add_variable_from_reference(v, _ACCUMULATOR_SLOT)
        for v in new:
            for s in self._slot_names_for(v):
                self.add_variable_from_reference(v, s, self._initial_slot_value(s))
        self.built = True

    def get_slot(self, var, slot_name):
        """The slot variable ``slot_name`` (e.g. ``"m"``) of ``var``."""
        slots = self._slots.get(var.ref())
        which = getattr(var, "path", var.name)
        if slots is None:
            raise KeyError(f"{type(self).__name__} has no slots for variable {which!r} yet")
        if slot_name not in slots:
            raise KeyError(
                f"{type(self).__name__}: no slot {slot_name!r} for {which!r}; slots: "
                f"{sorted(slots)}"
            )
        return slots[slot_name]

    def get_slot_names(self) -> list:
        """The names of the slots each variable gets."""
        out = [_EMA_SLOT] if self.use_ema else []
        out += [_ACCUMULATOR_SLOT] if self.gradient_accumulation_steps else []
        return out + list(self._slot_names)

    @property
    def variables(self) -> list:
        """``iterations``, the learning-rate variable (if any), then every other optimizer
        variable in creation order."""
        return [self._iterations] + ([self._lr] if self._lr is not None else []) + list(
            self._slot_variables
        )

    def _obj_type(self) -> str:
        """What the ``.weights.h5`` writer takes this object for (Keras 3's
        ``KerasSaveable._obj_type``)."""
        return "Optimizer"

    def _checkpoint_children(self) -> list:
        """``(name, variable)`` of the optimizer's variables that are not slots."""
        out = [("iterations", self._iterations)]
        if self._lr is not None:
            out.append(("learning_rate", self._lr))
        return out + list(self._shared.items())

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

    # -- assignments (masked under gradient accumulation) ---------------------------------
    def assign(self, variable, value):
        """``variable <- value``; with gradient accumulation, only on the calls that
        update (a ``where`` on the value, so a compiled step decides at run time)."""
        if self._update_mask is not None:
            value = _ops.where(self._update_mask, value, variable)
        variable.assign(value)

    def assign_add(self, variable, value):
        """``variable <- variable + value`` (masked like ``assign``)."""
        if self._update_mask is None:
            variable.assign_add(value)
        else:
            self.assign(variable, variable + value)

    def assign_sub(self, variable, value):
        """``variable <- variable - value`` (masked like ``assign``)."""
        if self._update_mask is None:
            variable.assign_sub(value)
        else:
            self.assign(variable, variable - value)

    # -- applying --------------------------------------------------------------------------
    def apply_gradients(self, grads_and_vars, name=None):
        """Apply ``(gradient, variable)`` pairs, e.g. ``zip(grads, model.trainable_variables)``.

        In order, as Keras 3 does: drop ``None`` gradients (one warning naming them);
        divide by ``loss_scale_factor``; with gradient accumulation, add to the
        accumulators and continue with their mean on every ``N``-th call only; clip;
        apply weight decay; each optimizer's update rule; the EMA of the variables
        (and its overwrite); each updated variable's ``constraint``; finally
        ``iterations`` (the int64 count of calls) goes up by one.

        Returns the ``iterations`` variable after the increment.
        """
        grads_and_vars = list(grads_and_vars)
        pairs = checked_pairs(self, grads_and_vars)
        # every variable named gets its slots, with a gradient or not (Keras builds on all)
        self.build([v for _, v in grads_and_vars if v.dtype.is_floating])
        grads = [g for g, _ in pairs]
        variables = [v for _, v in pairs]
        if self._reduce_gradients is not None:  # jt.distributed.DistributedOptimizer
            grads = self._reduce_gradients(grads, variables)
        if self.loss_scale_factor is not None:
            grads = [g / self.loss_scale_factor for g in grads]
        self._step_values = {}  # per-step scalars shared by the variables of one dtype
        lr = self._current_learning_rate()
        n = self.gradient_accumulation_steps
        if n:
            accumulators = [self.get_slot(v, _ACCUMULATOR_SLOT) for v in variables]
            mean = [(g + a) / n for g, a in zip(grads, accumulators)]
            self._update_mask = _ops.equal(_ops.floormod(self._iterations + 1, n), 0)
            try:
                self._apply_update(mean, variables, lr)
            finally:
                mask, self._update_mask = self._update_mask, None
            for g, a in zip(grads, accumulators):
                a.assign(_ops.where(mask, _ops.zeros_like(a), a + g))
        else:
            self._apply_update(grads, variables, lr)
        if self.use_ema:
            self._update_moving_averages()
        for v in variables:
            constraint = getattr(v, "constraint", None)
            if constraint is not None:
                v.assign(constraint(v))
        self._step_values = {}
        self._iterations.assign_add(1)
        return self._iterations

    def apply(self, grads, trainable_variables=None):
        """Keras 3's form of ``apply_gradients``: ``grads`` in the order of
        ``trainable_variables``, or of the variables the optimizer was built with.

        Example::

            opt.apply(tape.gradient(loss, model.trainable_variables),
                      model.trainable_variables)
        """
        grads = list(grads)
        if trainable_variables is None:
            if not self.built:
                raise ValueError(
                    f"{type(self).__name__}.apply: without trainable_variables the optimizer "
                    "must be built first; call optimizer.build(trainable_variables)")
            trainable_variables = self._trainable_variables
        trainable_variables = list(trainable_variables)
        if len(grads) != len(trainable_variables):
            raise ValueError(
                f"{type(self).__name__}.apply: got {len(grads)} gradients for "
                f"{len(trainable_variables)} variables")
        if not grads:
            return self._iterations  # nothing to apply, as in Keras
        return self.apply_gradients(zip(grads, trainable_variables))

    def _apply_update(self, grads, variables, lr):
        """Clip, decay and update (the part gradient accumulation does every N-th call)."""
        grads = self._clip_gradients(grads)
        if self.weight_decay:
            for v in variables:
                if self._use_weight_decay(v):
                    lr_v = _ops.cast(lr, v.dtype)
                    self.assign(v, v - v * _f32(self.weight_decay) * lr_v)
        self._update_variables(grads, variables, lr)

    def _update_variables(self, grads, variables, lr):
        """Each variable's ``update_step`` (an optimizer with a state shared by all
        variables updates it here first)."""
        for g, v in zip(grads, variables):
            self.update_step(g, v, _ops.cast(lr, v.dtype))

    def _clip_gradients(self, grads):
        if self.clipnorm:
            return [_ops.clip_by_norm(g, self.clipnorm) for g in grads]
        if self.global_clipnorm:
            return self._clip_by_global_norm(grads)
        if self.clipvalue:
            c = self.clipvalue
            return [_ops.clip_by_value(g, -c, c) for g in grads]
        return grads

    def _clip_by_global_norm(self, grads):
        """Keras' rule, ``g * clip * min(1 / norm, 1 / clip)``, NaN for an infinite norm;
        the norm is summed in the widest float dtype among the gradients."""
        wide = max((g.dtype for g in grads), key=lambda d: d._np.itemsize)
        total = None
        for g in grads:
            s = _ops.cast(_ops.reduce_sum(_ops.square(g)), wide)
            total = s if total is None else total + s
        clipped, _ = _ops.clip_by_global_norm(grads, self.global_clipnorm,
                                              use_norm=_ops.sqrt(total))
        return clipped

    def _update_moving_averages(self):
        """``average <- m * average + (1 - m) * var`` for every variable built (``m`` is 0
        at the first update), then the overwrite every ``ema_overwrite_frequency``
        updates. Neither is masked by gradient accumulation, as in Keras."""
        not_first = _ops.not_equal(self.iterations, 0)
        for v in self._trainable_variables:
            avg = self.get_slot(v, _EMA_SLOT)
            m = _ops.cast(not_first, v.dtype) * self.ema_momentum
            avg.assign(m * avg + (1 - m) * v)
        if self.ema_overwrite_frequency:
            now = _ops.equal(_ops.floormod(self.iterations + 1, self.ema_overwrite_frequency), 0)
            for v in self._trainable_variables:
                v.assign(_ops.where(now, self.get_slot(v, _EMA_SLOT), v))

    def finalize_variable_values(self, var_list):
        """With ``use_ema``, set each variable of ``var_list`` to its moving average
        (``fit`` does this after the last epoch); otherwise nothing."""
        if not self.use_ema:
            return
        for v in var_list:
            slots = self._slots.get(v.ref(), {})
            if _EMA_SLOT not in slots:
                raise ValueError(
                    f"{type(self).__name__}.finalize_variable_values: variable {v.name!r} has "
                    "no moving average; pass the variables this optimizer updated")
            v.assign(slots[_EMA_SLOT])

    def scale_loss(self, loss):
        """``loss * loss_scale_factor`` (unchanged without one)."""
        if self.loss_scale_factor is not None:
            return loss * self.loss_scale_factor
        return loss

    def minimize(self, loss, var_list, tape=None):
        """Compute gradients of ``loss`` and apply them (tf.keras 2's ``minimize``).

        ``loss`` is a callable returning the loss (run under a new tape), or a tensor
        recorded on ``tape``. ``var_list`` may be a callable returning the variables.
        """
        from ...tape import GradientTape

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

    # -- configuration ------------------------------------------------------------------------
    def get_config(self) -> dict:
        """The constructor arguments, under Keras' keys (a schedule as its serialized dict,
        the learning-rate variable as its float32 value)."""
        if self._schedule is None:
            lr = float(self._lr.numpy())
        elif isinstance(self._schedule, LearningRateSchedule):
            lr = schedules.serialize(self._schedule)
        else:
            lr = self._schedule  # a plain callable: kept as the object itself
        return {
            "name": self.name,
            "learning_rate": lr,
            "weight_decay": self.weight_decay,
            "clipnorm": self.clipnorm,
            "global_clipnorm": self.global_clipnorm,
            "clipvalue": self.clipvalue,
            "use_ema": self.use_ema,
            "ema_momentum": self.ema_momentum,
            "ema_overwrite_frequency": self.ema_overwrite_frequency,
            "loss_scale_factor": self.loss_scale_factor,
            "gradient_accumulation_steps": self.gradient_accumulation_steps,
        }

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """A new optimizer (without state) from ``get_config()``'s dict, jittape's or Keras'."""
        config = dict(config)
        if isinstance(config.get("learning_rate"), dict):
            config["learning_rate"] = schedules.deserialize(config["learning_rate"],
                                                            custom_objects=custom_objects)
        return cls(**config)

    def __repr__(self):
        return (f"<{type(self).__name__} name={self.name!r}, "
                f"iterations={int(self._iterations.numpy())}>")
