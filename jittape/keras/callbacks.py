"""``jt.keras.callbacks``: the ``Callback`` base class with Keras' hooks, and ``History``.

A training loop calls the hooks; ``Model.fit`` (a later issue) will. The other Keras
callbacks (EarlyStopping, ModelCheckpoint, ...) come with that issue: their names
raise an ``AttributeError`` that says so.
"""

from __future__ import annotations

__all__ = ["Callback", "History"]


class Callback:
    """Base class: override the hooks you need; each takes ``logs`` (a dict or None).

    ``params`` and ``model`` are set by the loop (``set_params``, ``set_model``).
    """

    def __init__(self):
        self.params = None
        self._model = None

    def set_params(self, params):
        self.params = params

    def set_model(self, model):
        self._model = model

    @property
    def model(self):
        return self._model

    def on_batch_begin(self, batch, logs=None):
        """Keras 2's name of ``on_train_batch_begin``."""

    def on_batch_end(self, batch, logs=None):
        """Keras 2's name of ``on_train_batch_end``."""

    def on_epoch_begin(self, epoch, logs=None):
        """At the start of an epoch of training."""

    def on_epoch_end(self, epoch, logs=None):
        """At the end of an epoch; ``logs`` holds the epoch's metric results."""

    def on_train_batch_begin(self, batch, logs=None):
        self.on_batch_begin(batch, logs=logs)

    def on_train_batch_end(self, batch, logs=None):
        self.on_batch_end(batch, logs=logs)

    def on_test_batch_begin(self, batch, logs=None):
        """Before a batch of evaluation."""

    def on_test_batch_end(self, batch, logs=None):
        """After a batch of evaluation."""

    def on_predict_batch_begin(self, batch, logs=None):
        """Before a batch of prediction."""

    def on_predict_batch_end(self, batch, logs=None):
        """After a batch of prediction."""

    def on_train_begin(self, logs=None):
        """At the start of training."""

    def on_train_end(self, logs=None):
        """At the end of training."""

    def on_test_begin(self, logs=None):
        """At the start of evaluation."""

    def on_test_end(self, logs=None):
        """At the end of evaluation."""

    def on_predict_begin(self, logs=None):
        """At the start of prediction."""

    def on_predict_end(self, logs=None):
        """At the end of prediction."""


class History(Callback):
    """Records each epoch's ``logs``: ``history.history["loss"]`` lists the losses, and
    ``history.epoch`` the epoch numbers."""

    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []

    def on_train_begin(self, logs=None):
        self.epoch = []

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self.epoch.append(epoch)
        for k, v in logs.items():
            self.history.setdefault(k, []).append(v)
        if self._model is not None:
            self._model.history = self


_LATER = (
    "BackupAndRestore", "CSVLogger", "CallbackList", "EarlyStopping", "LambdaCallback",
    "LearningRateScheduler", "ModelCheckpoint", "ProgbarLogger", "ReduceLROnPlateau",
    "RemoteMonitor", "SwapEMAWeights", "TensorBoard", "TerminateOnNaN",
)


def __getattr__(name):
    if name in _LATER:
        raise AttributeError(
            f"jt.keras.callbacks.{name} is not available yet: the callbacks other than "
            "Callback and History come with the later issue that adds jt.keras.Model.fit. "
            "Until then, subclass jt.keras.callbacks.Callback and call its hooks from "
            "your training loop.")
    raise AttributeError(f"module 'jittape.keras.callbacks' has no attribute {name!r}")
