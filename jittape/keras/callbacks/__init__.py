"""``jt.keras.callbacks``: Keras 3's callbacks, driven by ``Model.fit`` or by a loop of
your own through ``CallbackList``.

``base``: ``Callback`` (the hooks), ``CallbackList``, ``History``, ``LambdaCallback``,
``TerminateOnNaN``; ``monitor``: ``EarlyStopping`` and the rules of ``mode="auto"``;
``checkpoint``: ``ModelCheckpoint``; ``learning_rate``: ``LearningRateScheduler``,
``ReduceLROnPlateau``; ``csv_logger``: ``CSVLogger``; ``progbar``: ``ProgbarLogger``.

Example::

    cbs = [jt.keras.callbacks.EarlyStopping(monitor="val_loss", patience=2),
           jt.keras.callbacks.ModelCheckpoint("best.weights.h5", save_weights_only=True,
                                              save_best_only=True)]
    model.fit(x, y, validation_split=0.2, epochs=20, callbacks=cbs)
"""

from __future__ import annotations

from .base import Callback, CallbackList, History, LambdaCallback, TerminateOnNaN
from .checkpoint import ModelCheckpoint
from .csv_logger import CSVLogger
from .learning_rate import LearningRateScheduler, ReduceLROnPlateau
from .monitor import EarlyStopping, MonitorCallback
from .progbar import ProgbarLogger

__all__ = [
    "Callback", "CallbackList", "History", "LambdaCallback", "TerminateOnNaN",
    "EarlyStopping", "MonitorCallback", "ModelCheckpoint", "LearningRateScheduler",
    "ReduceLROnPlateau", "CSVLogger", "ProgbarLogger",
]

_NOT_PROVIDED = ("BackupAndRestore", "OrbaxCheckpoint", "RemoteMonitor", "SwapEMAWeights",
                 "TensorBoard")


def __getattr__(name):
    if name in _NOT_PROVIDED:
        raise AttributeError(
            f"jt.keras.callbacks.{name} is not provided by jittape. Subclass "
            "jt.keras.callbacks.Callback to do what it does from the hooks.")
    raise AttributeError(f"module 'jittape.keras.callbacks' has no attribute {name!r}")
