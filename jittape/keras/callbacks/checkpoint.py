"""``ModelCheckpoint``: saves the model or its weights during training, every epoch or
every N batches, optionally only when the monitored quantity improves."""

from __future__ import annotations

import os
import warnings

import numpy as np

from .base import print_msg
from .monitor import MonitorCallback

__all__ = ["ModelCheckpoint"]


class ModelCheckpoint(MonitorCallback):
    """Saves the model (``model.save``) or its weights (``model.save_weights``).

    Args:
        filepath: where to save; may hold ``str.format`` fields filled with ``epoch``
            (1-based), ``batch`` (1-based, when saving by batches) and the ``logs``
            keys: ``"ckpt-{epoch:02d}-{val_loss:.2f}.weights.h5"``. It must end in
            ``.weights.h5`` when ``save_weights_only``, else in ``.keras`` (or Keras'
            legacy ``.h5``). Missing directories are created.
        monitor: the ``logs`` key that decides what is best (default ``"val_loss"``).
        verbose: 1 prints a line for each save (and each skipped one).
        save_best_only: save only when ``monitor`` improves on the best so far. A fixed
            ``filepath`` then always holds the best model; a formatted one keeps a file
            per improvement.
        save_weights_only: ``model.save_weights(path)`` instead of ``model.save(path)``.
        mode: ``"auto"``, ``"min"`` or ``"max"`` (see ``MonitorCallback``).
        save_freq: ``"epoch"`` (at each epoch's end) or a positive integer: every that
            many training batches, counted across epochs.
        initial_value_threshold: the best value to beat at the start (with
            ``save_best_only``).

    Files are written only through the model's save methods (which write a new file and
    rename it over the old one), and never deleted: an interrupted run leaves the last
    complete save in place. ``best`` is updated only once its save has succeeded.

    Example::

        ckpt = jt.keras.callbacks.ModelCheckpoint(
            "ckpt/best.weights.h5", save_weights_only=True, monitor="val_loss",
            save_best_only=True)
        model.fit(x, y, validation_split=0.2, epochs=10, callbacks=[ckpt])
    """

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False,
                 save_weights_only=False, mode="auto", save_freq="epoch",
                 initial_value_threshold=None):
        super().__init__(monitor, mode, initial_value_threshold)
        try:
            self.filepath = os.fspath(filepath)
        except TypeError:
            raise TypeError(
                f"ModelCheckpoint: filepath must be a str or os.PathLike, got {filepath!r}"
            ) from None
        if isinstance(self.filepath, bytes):
            self.filepath = os.fsdecode(self.filepath)
        self.verbose = verbose
        self.save_best_only = bool(save_best_only)
        self.save_weights_only = bool(save_weights_only)
        if save_freq != "epoch" and (
            isinstance(save_freq, bool) or not isinstance(save_freq, int) or save_freq < 1
        ):
            raise ValueError(
                f"ModelCheckpoint: unrecognized save_freq: {save_freq!r}. Expected "
                "'epoch' or a positive integer (a number of batches)")
        self.save_freq = save_freq
        if self.save_weights_only and not self.filepath.endswith(".weights.h5"):
            raise ValueError(
                "ModelCheckpoint: when using save_weights_only=True, the filepath must end "
                f"in `.weights.h5` (the weights format). Received: filepath={self.filepath}")
        if not self.save_weights_only and not self.filepath.endswith((".keras", ".h5")):
            raise ValueError(
                "ModelCheckpoint: the filepath must end in `.keras` (the model format), or "
                "in `.weights.h5` with save_weights_only=True. Received: "
                f"filepath={self.filepath}")
        self._batches_since_save = 0
        self._last_batch = None
        self._current_epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._current_epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self._should_save_on_batch(batch):
            self._save_model(self._current_epoch, batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._save_model(epoch, None, logs)

    def _should_save_on_batch(self, batch):
        if self.save_freq == "epoch":
            return False
        if self._last_batch is None or batch <= self._last_batch:
            seen = batch + 1  # a new epoch: batches count from 0 again
        else:
            seen = batch - self._last_batch  # more than 1 with steps_per_execution
        self._batches_since_save += seen
        self._last_batch = batch
        if self._batches_since_save >= self.save_freq:
            self._batches_since_save = 0
            return True
        return False

    def _file_path(self, epoch, batch, logs):
        logs = logs or {}
        try:
            if batch is None or "batch" in logs:
                return self.filepath.format(epoch=epoch + 1, **logs)
            return self.filepath.format(epoch=epoch + 1, batch=batch + 1, **logs)
        except KeyError as e:
            raise KeyError(
                f"ModelCheckpoint: failed to format the filepath {self.filepath}: the field "
                f"{e.args[0]} is neither epoch, batch nor a logs key (the logs hold "
                f"{', '.join(sorted(logs)) or 'nothing'})"
            ) from None

    def _improved(self, epoch, logs, filepath):
        """Whether to save with ``save_best_only``; returns (save, new best or None)."""
        current = (logs or {}).get(self.monitor)
        if current is None:
            warnings.warn(f"Can save best model only with {self.monitor} available.",
                          stacklevel=3)
            return True, None
        if np.ndim(current) > 0:
            warnings.warn(
                f"Can save best model only when `monitor` is a scalar value. Received: "
                f"{current}. Falling back to `save_best_only=False`.", stacklevel=3)
            return True, None
        best_str = "None" if self.best is None else f"{self.best:.5f}"
        if self._is_improvement(current, self.best):
            if self.verbose > 0:
                print_msg(f"\nEpoch {epoch + 1}: {self.monitor} improved from {best_str} "
                          f"to {current:.5f}, saving model to {filepath}")
            return True, current
        if self.verbose > 0:
            print_msg(f"\nEpoch {epoch + 1}: {self.monitor} did not improve from {best_str}")
        return False, None

    def _save_model(self, epoch, batch, logs):
        filepath = self._file_path(epoch, batch, logs)
        new_best = None
        if self.save_best_only:
            if self.monitor_op is None:
                self._set_monitor_op()
            save, new_best = self._improved(epoch, logs, filepath)
            if not save:
                return
        elif self.verbose > 0:
            print_msg(f"\nEpoch {epoch + 1}: saving model to {filepath}")
        if os.path.isdir(filepath):
            raise IsADirectoryError(
                "ModelCheckpoint: please give a filepath that is not a directory; this one "
                f"is an existing directory: {filepath}")
        dirname = os.path.dirname(filepath)
        if dirname:
            os.makedirs(dirname, exist_ok=True)
        if self.save_weights_only:
            self.model.save_weights(filepath, overwrite=True)
        else:
            self.model.save(filepath, overwrite=True)
        if new_best is not None:
            self.best = new_best
        if self.verbose > 0:
            print_msg(f"\nEpoch {epoch + 1}: finished saving model to {filepath}")
