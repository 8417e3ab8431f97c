"""Callbacks that watch one logged quantity: the shared rules (``mode``, ``min_delta``,
which direction is better) and ``EarlyStopping``.

With ``mode="auto"`` the direction follows Keras 3: ``loss`` and ``val_loss`` are
minimized; any other name (without its ``val_`` prefix) is looked up among the model's
metrics (``model.metrics``, containers with a ``metrics`` list searched too) and the
metric found decides: accuracies, AUC, precision, recall, IoU, R², cosine similarity
and correlations are maximized, errors, hinges and crossentropies minimized (a
metric's own ``_direction``, ``"up"`` or ``"down"``, wins). Any other name is an
error that asks for ``mode="min"`` or ``mode="max"``.
"""

from __future__ import annotations

import numbers
import warnings

from .base import Callback, print_msg

__all__ = ["MonitorCallback", "EarlyStopping"]

# Keras 3's metric directions, by class name (a subclass inherits its base's)
_UP = frozenset((
    "Accuracy", "BinaryAccuracy", "CategoricalAccuracy", "SparseCategoricalAccuracy",
    "TopKCategoricalAccuracy", "SparseTopKCategoricalAccuracy", "Precision", "Recall",
    "SensitivitySpecificityBase", "SensitivityAtSpecificity", "SpecificityAtSensitivity",
    "PrecisionAtRecall", "RecallAtPrecision", "AUC", "PearsonCorrelation",
    "ConcordanceCorrelation", "FBetaScore", "F1Score", "IoU", "BinaryIoU", "MeanIoU",
    "OneHotIoU", "OneHotMeanIoU", "CosineSimilarity", "R2Score",
))
_DOWN = frozenset((
    "Hinge", "SquaredHinge", "CategoricalHinge", "BinaryCrossentropy",
    "CategoricalCrossentropy", "SparseCategoricalCrossentropy", "MeanSquaredError",
    "MeanAbsoluteError", "MeanAbsolutePercentageError", "MeanSquaredLogarithmicError",
    "RootMeanSquaredError", "LogCoshError",
))


def _real(cls_name, arg, value, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{cls_name}: {arg} must be a number, got {value!r}")
    return float(value)


def _count(cls_name, arg, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{cls_name}: {arg} must be a non-negative integer, got {value!r}")
    return int(value)


def metric_direction(metric):
    """``"up"``, ``"down"`` or None: whether a larger value of ``metric`` is better."""
    direction = getattr(metric, "_direction", None)
    if direction in ("up", "down"):
        return direction
    for cls in type(metric).__mro__:
        if cls.__name__ in _UP:
            return "up"
        if cls.__name__ in _DOWN:
            return "down"
    return None


def _model_metrics(model):
    stack = list(getattr(model, "metrics", None) or [])[::-1]
    while stack:
        m = stack.pop()
        inner = getattr(m, "metrics", None)
        if isinstance(inner, (list, tuple)):
            stack.extend(list(inner)[::-1])
        else:
            yield m


class MonitorCallback(Callback):
    """Base of the callbacks that compare a logged quantity with its best value.

    Args:
        monitor: the ``logs`` key to watch.
        mode: ``"min"`` (smaller is better), ``"max"``, or ``"auto"`` (see the module).
        baseline: the starting best value (None: the first value seen).
        min_delta: a value is an improvement only when it beats the best by more than
            ``abs(min_delta)``.

    The direction is settled at the first ``on_epoch_end`` (the model's metrics exist
    by then), in ``_set_monitor_op``.
    """

    def __init__(self, monitor="val_loss", mode="auto", baseline=None, min_delta=0):
        super().__init__()
        name = type(self).__name__
        if not isinstance(monitor, str):
            raise TypeError(f"{name}: monitor must be a logs key (a str), got {monitor!r}")
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"{name}: mode must be 'auto', 'min' or 'max', got {mode!r}")
        self.monitor = monitor
        self.mode = mode
        self.best = _real(name, "baseline", baseline, allow_none=True)
        self.min_delta = abs(_real(name, "min_delta", min_delta))
        self.monitor_op = None  # "min" or "max" once settled

    def _set_monitor_op(self):
        if self.mode != "auto":
            self.monitor_op = self.mode
            return
        name = self.monitor.removeprefix("val_")
        op = "min" if name == "loss" else None
        for m in _model_metrics(self.model):
            if getattr(m, "name", None) == name:
                direction = metric_direction(m)
                if direction is not None:
                    op = "max" if direction == "up" else "min"
        if op is None:
            raise ValueError(
                f"{type(self).__name__} callback received monitor={self.monitor!r}, but "
                "cannot tell whether that metric should be maximized or minimized (it is "
                "not the loss, nor a metric of the model with a known direction). Pass "
                "mode='max' to monitor the highest value, or mode='min' for the lowest.")
        self.monitor_op = op

    def _is_improvement(self, value, reference):
        """Whether ``value`` beats ``reference`` (None: anything does) by ``min_delta``."""
        if reference is None:
            return True
        if self.monitor_op is None:
            self._set_monitor_op()
        if self.monitor_op == "min":
            return value + self.min_delta < reference
        return value - self.min_delta > reference


class EarlyStopping(MonitorCallback):
    """Stops training when the monitored quantity has stopped improving.

    At the end of each epoch from ``start_from_epoch`` on: a value better than the best
    so far (by more than ``min_delta``) becomes the best, and resets the count of epochs
    without improvement if it also beats ``baseline`` (when given). Otherwise the count
    grows, and once it reaches ``patience`` (at epoch 1 or later) training stops:
    ``model.stop_training = True``.

    Args:
        monitor: the ``logs`` key to watch (default ``"val_loss"``).
        min_delta: the smallest change that counts as an improvement.
        patience: epochs without improvement to wait before stopping.
        verbose: 1 prints ``Epoch N: early stopping`` (and the restore) at the end.
        mode: ``"auto"``, ``"min"`` or ``"max"`` (see ``MonitorCallback``).
        baseline: a value to beat: training stops after ``patience`` epochs that do not.
        restore_best_weights: at the end of training, set the weights of the best epoch
            (the first monitored epoch's when none improved).
        start_from_epoch: epochs of warm-up before monitoring starts.

    After training, ``stopped_epoch`` is the epoch that stopped it (0: none) and
    ``best_epoch`` the best one (0-based).

    Example::

        stop = jt.keras.callbacks.EarlyStopping(monitor="loss", patience=3)
        model.fit(x, y, epochs=100, callbacks=[stop])
    """

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto",
                 baseline=None, restore_best_weights=False, start_from_epoch=0):
        super().__init__(monitor, mode, min_delta=min_delta)
        self.patience = _count("EarlyStopping", "patience", patience)
        self.verbose = verbose
        self.baseline = _real("EarlyStopping", "baseline", baseline, allow_none=True)
        self.restore_best_weights = bool(restore_best_weights)
        self.start_from_epoch = _count("EarlyStopping", "start_from_epoch", start_from_epoch)
        self.wait = 0
        self.stopped_epoch = 0
        self.best_weights = None
        self.best_epoch = 0

    def on_train_begin(self, logs=None):
        # a callback may serve several fit() calls: each starts afresh
        self.wait = 0
        self.stopped_epoch = 0
        self.best = None
        self.best_weights = None
        self.best_epoch = 0

    def on_epoch_end(self, epoch, logs=None):
        if self.monitor_op is None:
            self._set_monitor_op()
        current = self.get_monitor_value(logs)
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            # the first monitored epoch is the best until one improves on it
            self.best_weights = self.model.get_weights()
            self.best_epoch = epoch
        self.wait += 1
        if self._is_improvement(current, self.best):
            self.best = current
            self.best_epoch = epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._is_improvement(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            print_msg(f"Epoch {self.stopped_epoch + 1}: early stopping")
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose > 0:
                print_msg("Restoring model weights from the end of the best epoch: "
                          f"{self.best_epoch + 1}.")
            self.model.set_weights(self.best_weights)

    def get_monitor_value(self, logs):
        """``logs[monitor]``, or None with a warning that lists the available keys."""
        logs = logs or {}
        value = logs.get(self.monitor)
        if value is None:
            warnings.warn(
                f"Early stopping conditioned on metric `{self.monitor}` which is not "
                f"available. Available metrics are: {','.join(logs)}", stacklevel=2)
        return value
