"""Callbacks that set the optimizer's learning rate between epochs:
``LearningRateScheduler`` (a function of the epoch) and ``ReduceLROnPlateau``.

They assign ``model.optimizer.learning_rate``, which a jittape optimizer keeps in a
variable: a ``@jt.function`` train step reads the new value on its next call, with no
retrace. An optimizer built with a ``LearningRateSchedule`` has no rate to assign, and
these callbacks refuse it. Both add ``learning_rate`` to the epoch's ``logs``.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np

from ...tensor import Tensor, Variable
from .base import Callback, print_msg
from .monitor import MonitorCallback, _count, _real

__all__ = ["LearningRateScheduler", "ReduceLROnPlateau"]


def _optimizers(cls_name, model):
    """The optimizers whose rate the callback sets (each of a multi-optimizer's)."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        raise ValueError(f"{cls_name}: the model has no optimizer (compile it first)")
    inner = getattr(optimizer, "optimizers", None)
    return list(inner) if inner is not None else [optimizer]


def _read_lr(cls_name, optimizer):
    if not hasattr(optimizer, "learning_rate"):
        raise ValueError(f'{cls_name}: optimizer must have a "learning_rate" attribute.')
    lr = optimizer.learning_rate
    if isinstance(lr, Tensor) and not isinstance(lr, Variable):
        raise TypeError(
            f"{cls_name}: the optimizer {getattr(optimizer, 'name', optimizer)!r} takes its "
            "learning rate from a LearningRateSchedule, so it has no rate to set. Give the "
            "optimizer a float learning rate to use this callback.")
    return float(lr)


def _takes_lr(schedule):
    """Whether ``schedule`` accepts ``(epoch, lr)``; None when its signature is unknown."""
    try:
        sig = inspect.signature(schedule)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(0, 0.0)
    except TypeError:
        return False
    return True


class LearningRateScheduler(Callback):
    """Sets the learning rate at the start of each epoch to ``schedule(epoch, lr)``.

    Args:
        schedule: a function of the epoch index (0-based) and the current learning rate
            (a float), returning the new rate as a float; a function of the epoch alone
            is called as ``schedule(epoch)``.
        verbose: 1 prints ``Epoch N: LearningRateScheduler setting learning rate to X.``

    Example::

        def schedule(epoch, lr):
            return lr if epoch < 10 else lr * 0.9

        model.fit(x, y, epochs=15, callbacks=[LearningRateScheduler(schedule)])
    """

    def __init__(self, schedule, verbose=0):
        super().__init__()
        if not callable(schedule):
            raise TypeError(
                f"LearningRateScheduler: schedule must be a function of the epoch (and the "
                f"learning rate), got {schedule!r}")
        self.schedule = schedule
        self.verbose = verbose
        self._with_lr = _takes_lr(schedule)

    def _new_lr(self, epoch, lr):
        if self._with_lr is None:
            try:  # a signature inspect cannot read: Keras' try-both
                return self.schedule(epoch, lr)
            except TypeError:
                return self.schedule(epoch)
        return self.schedule(epoch, lr) if self._with_lr else self.schedule(epoch)

    def _update(self, optimizer, epoch):
        new = self._new_lr(epoch, _read_lr("LearningRateScheduler", optimizer))
        if isinstance(new, bool) or not isinstance(new, (float, np.floating)):
            raise ValueError(
                "LearningRateScheduler: the output of the `schedule` function should be a "
                f"float. Got: {new!r} (at epoch {epoch})")
        optimizer.learning_rate = float(new)
        return float(new)

    def on_epoch_begin(self, epoch, logs=None):
        optimizer = getattr(self.model, "optimizer", None)
        many = hasattr(optimizer, "optimizers")
        for opt in _optimizers("LearningRateScheduler", self.model):
            lr = self._update(opt, epoch)
            if self.verbose > 0:
                which = f"{opt.name} " if many else ""
                print_msg(f"\nEpoch {epoch + 1}: LearningRateScheduler setting {which}"
                          f"learning rate to {lr}.")

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            _log_lr("LearningRateScheduler", self.model, logs)


def _log_lr(cls_name, model, logs):
    optimizer = model.optimizer
    if hasattr(optimizer, "optimizers"):
        for opt in optimizer.optimizers:
            logs[f"learning_rate_{opt.name}"] = _read_lr(cls_name, opt)
    else:
        logs["learning_rate"] = _read_lr(cls_name, optimizer)


class ReduceLROnPlateau(MonitorCallback):
    """Multiplies the learning rate by ``factor`` when the monitored quantity has not
    improved for ``patience`` epochs.

    At each epoch's end: a value better than the best (by more than ``min_delta``)
    becomes the best and resets the wait; otherwise, outside a cooldown, the wait grows,
    and when it reaches ``patience`` the rate becomes ``max(lr * factor, min_lr)`` (if it
    is above ``min_lr``), the wait restarts and ``cooldown`` epochs follow in which the
    wait stays 0.

    Args:
        monitor: the ``logs`` key to watch (default ``"val_loss"``).
        factor: the multiplier, in [0, 1).
        patience: epochs without improvement before a reduction.
        verbose: 1 prints ``Epoch N: ReduceLROnPlateau reducing learning rate to X.``
        mode: ``"auto"``, ``"min"`` or ``"max"`` (see ``MonitorCallback``).
        min_delta: the smallest change that counts as an improvement.
        cooldown: epochs to wait after a reduction before counting again.
        min_lr: the rate never goes below it.

    Example::

        reduce = ReduceLROnPlateau(monitor="val_loss", factor=0.2, patience=5, min_lr=1e-3)
        model.fit(x, y, validation_split=0.2, callbacks=[reduce])
    """

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto",
                 min_delta=1e-4, cooldown=0, min_lr=0.0):
        super().__init__(monitor, mode, min_delta=min_delta)
        factor = _real("ReduceLROnPlateau", "factor", factor)
        if factor >= 1.0:
            raise ValueError("ReduceLROnPlateau does not support a factor >= 1.0. "
                             f"Received factor={factor}")
        if factor < 0.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be in [0, 1), got {factor}")
        self.factor = factor
        self.min_lr = _real("ReduceLROnPlateau", "min_lr", min_lr)
        self.patience = _count("ReduceLROnPlateau", "patience", patience)
        self.cooldown = _count("ReduceLROnPlateau", "cooldown", cooldown)
        self.verbose = verbose
        self.cooldown_counter = 0
        self.wait = 0

    def _reset(self):
        self.best = None
        self.cooldown_counter = 0
        self.wait = 0

    def on_train_begin(self, logs=None):
        self._reset()

    def in_cooldown(self):
        return self.cooldown_counter > 0

    def _reduce(self, optimizer, epoch, name):
        old = _read_lr("ReduceLROnPlateau", optimizer)
        # the rate is a float32 variable: compare min_lr at that precision
        if not old > np.float32(self.min_lr):
            return False
        new = max(old * self.factor, self.min_lr)
        optimizer.learning_rate = new
        if self.verbose > 0:
            which = f" {name}" if name else ""
            print_msg(f"\nEpoch {epoch + 1}: ReduceLROnPlateau reducing{which} learning "
                      f"rate to {new}.")
        return True

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor_op is None:
            self._set_monitor_op()
        logs = {} if logs is None else logs
        _log_lr("ReduceLROnPlateau", self.model, logs)
        current = logs.get(self.monitor)
        if current is None:
            warnings.warn(
                f"Learning rate reduction is conditioned on metric `{self.monitor}` which is "
                f"not available. Available metrics are: {','.join(logs)}.", stacklevel=2)
            return
        if self.in_cooldown():
            self.cooldown_counter -= 1
            self.wait = 0
        if self._is_improvement(current, self.best):
            self.best = current
            self.wait = 0
            return
        if self.in_cooldown():
            return
        self.wait += 1
        if self.wait < self.patience:
            return
        many = hasattr(self.model.optimizer, "optimizers")
        reduced = False
        for opt in _optimizers("ReduceLROnPlateau", self.model):
            reduced |= self._reduce(opt, epoch, opt.name if many else "")
        if reduced:
            self.cooldown_counter = self.cooldown
            self.wait = 0
