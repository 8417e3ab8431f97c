"""jt.keras.callbacks against Keras 3's callbacks, run only where TensorFlow is installed
(``pip install -e '.[tf]'``); the default suite does not need it.

Both sides are driven by the same loop (Keras 3's fit order of hooks) with the same
metric sequences and a fake model of each kind (a Keras or a jittape SGD optimizer, a
weights marker, save methods that record the paths), and must agree on when training
stops, the learning rates, the files saved and written, and the messages printed.
"""

import io
import os
import re

import numpy as np
import pytest

import jittape as jt
from jittape.keras import callbacks as J

tf = pytest.importorskip("tensorflow")
keras = tf.keras
K = keras.callbacks
# Keras reading its own learning-rate variable through numpy 2
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


class FakeModel:
    def __init__(self, optimizer):
        self.stop_training = False
        self.optimizer = optimizer
        self.metrics = []
        self.marker = -1.0
        self.saves = []

    def get_weights(self):
        return [np.array(self.marker)]

    def set_weights(self, weights):
        self.marker = float(weights[0])

    def save_weights(self, filepath, overwrite=True):
        self.saves.append(("weights", os.path.basename(filepath), self.marker))

    def save(self, filepath, overwrite=True):
        self.saves.append(("model", os.path.basename(filepath), self.marker))


def drive(side, callbacks, epoch_logs, steps=3, batch_logs=None, lr=0.1):
    """Keras 3's fit loop over given logs; returns the model, History and epochs run."""
    ns, opt = (K, keras.optimizers.SGD(lr)) if side == "keras" else (J, jt.optimizers.SGD(lr))
    model = FakeModel(opt)
    cbs = ns.CallbackList(callbacks, add_history=True, model=model, epochs=len(epoch_logs),
                          steps=steps, verbose=0)
    cbs.on_train_begin()
    ran = 0
    for epoch, logs in enumerate(epoch_logs):
        cbs.on_epoch_begin(epoch)
        for b in range(steps):
            cbs.on_train_batch_begin(b)
            model.marker = float(epoch)
            cbs.on_train_batch_end(b, batch_logs(epoch, b) if batch_logs else dict(logs))
            if model.stop_training:
                break
        cbs.on_epoch_end(epoch, dict(logs))
        ran += 1
        if model.stop_training:
            break
    cbs.on_train_end()
    return model, model.history, ran


def both(capsys, make, epoch_logs, **kw):
    """``make(namespace)`` builds the callbacks of one side; both sides run them, and
    each side's (model, history, epochs run) come back with what it printed."""
    capsys.readouterr()
    k = drive("keras", make(K), epoch_logs, **kw)
    k_out = capsys.readouterr().out
    j = drive("jt", make(J), epoch_logs, **kw)
    return k, j, k_out, capsys.readouterr().out


def _sequences(seed, n=12):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        trend = rng.choice([-0.03, 0.0, 0.02])
        yield [float(v) for v in np.round(rng.normal(1.0, 0.05, 9) + trend * np.arange(9), 3)]


@pytest.mark.parametrize("kw", [
    dict(patience=0), dict(patience=2), dict(patience=1, min_delta=0.02),
    dict(patience=2, mode="max"), dict(patience=1, baseline=0.97), dict(patience=3, baseline=0.8),
    dict(patience=1, start_from_epoch=3), dict(patience=2, restore_best_weights=True),
    dict(patience=1, mode="max", baseline=1.02, restore_best_weights=True),
])
def test_early_stopping_as_keras(kw, capsys):
    for values in _sequences(1):
        logs = [{"val_loss": v, "loss": 1.0} for v in values]
        (km, kh, kran), (jm, jh, jran), k_out, j_out = both(
            capsys, lambda ns: [ns.EarlyStopping(verbose=1, **kw)], logs)
        assert jran == kran, (values, kw)
        assert jm.marker == km.marker and jh.history == kh.history
        assert j_out == k_out


def _plateau_case(seed):
    rng = np.random.default_rng(seed)
    kw = dict(factor=float(rng.choice([0.1, 0.5])), patience=int(rng.integers(0, 3)),
              cooldown=int(rng.integers(0, 3)), min_lr=float(rng.choice([0.0, 0.004])),
              min_delta=float(rng.choice([1e-4, 0.01])), mode=str(rng.choice(["min", "max"])))
    return kw


@pytest.mark.parametrize("seed", range(6))
def test_reduce_lr_on_plateau_as_keras(seed, capsys):
    kw = _plateau_case(seed)
    for values in _sequences(seed + 10, n=4):
        logs = [{"val_loss": v} for v in values]
        (km, kh, _), (jm, jh, _), k_out, j_out = both(
            capsys, lambda ns: [ns.ReduceLROnPlateau(verbose=1, **kw)], logs)
        assert jh.history["learning_rate"] == kh.history["learning_rate"], (values, kw)
        assert float(jm.optimizer.learning_rate) == float(
            np.asarray(km.optimizer.learning_rate)), (values, kw)
        assert j_out == k_out


def test_learning_rate_scheduler_as_keras(capsys):
    def schedule(epoch, lr):
        return lr * 0.7 if epoch % 2 else lr + 0.01

    (km, kh, _), (jm, jh, _), k_out, j_out = both(
        capsys, lambda ns: [ns.LearningRateScheduler(schedule, verbose=1)], [{"loss": 1.0}] * 6)
    assert jh.history["learning_rate"] == kh.history["learning_rate"]
    assert j_out == k_out and k_out.count("LearningRateScheduler setting") == 6
    (km, kh, _), (jm, jh, _), _, _ = both(
        capsys, lambda ns: [ns.LearningRateScheduler(lambda epoch: 0.2 / (1 + epoch))],
        [{"loss": 1}] * 4)
    assert jh.history["learning_rate"] == kh.history["learning_rate"]


@pytest.mark.parametrize("kw, path", [
    (dict(save_weights_only=True), "ckpt-{epoch:02d}-{val_loss:.2f}.weights.h5"),
    (dict(save_best_only=True), "best.keras"),
    (dict(save_best_only=True, mode="max", monitor="val_acc"), "m-{epoch}-{val_acc:.3f}.keras"),
    (dict(save_best_only=True, initial_value_threshold=1.01), "t-{epoch}.keras"),
    (dict(save_freq=4, save_weights_only=True), "b-{epoch}-{batch}.weights.h5"),
    (dict(save_freq=2, save_best_only=True, monitor="loss"), "bb-{epoch}-{batch}.keras"),
])
def test_model_checkpoint_as_keras(kw, path, tmp_path, capsys):
    filepath = str(tmp_path / path)
    saved = 0
    for values in _sequences(3, n=4):
        logs = [{"val_loss": v, "val_acc": 2 - v, "loss": v} for v in values]
        batch_logs = lambda e, b: {"loss": values[e] + 0.01 * b}
        (km, _, _), (jm, _, _), k_out, j_out = both(
            capsys, lambda ns: [ns.ModelCheckpoint(filepath, verbose=1, **kw)], logs,
            batch_logs=batch_logs)
        assert jm.saves == km.saves, (values, kw)
        assert j_out == k_out
        saved += len(km.saves)
    assert saved


def test_csv_logger_as_keras(tmp_path):
    logs = [{"loss": 0.5, "acc": 0.25, "lst": [1, 2]}, {"loss": 0.123456789, "acc": 1.0}]
    for extra in ({}, {"val_loss": 0.75}):
        for sep, append in ((",", False), (";", True)):
            files = []
            for side, ns in (("keras", K), ("jt", J)):
                path = str(tmp_path / f"{side}.csv")
                for _ in range(2):  # twice: append adds rows, no second header
                    drive(side, [ns.CSVLogger(path, separator=sep, append=append)],
                          [dict(lg, **extra) for lg in logs])
                with open(path, "rb") as f:
                    files.append(f.read())
            assert files[1] == files[0], (extra, sep, append)


def test_terminate_on_nan_as_keras(capsys):
    losses = {(1, 1): float("nan"), (2, 0): float("inf")}
    (km, kh, kran), (jm, jh, jran), k_out, j_out = both(
        capsys, lambda ns: [ns.TerminateOnNaN()], [{"loss": 1.0}] * 4,
        batch_logs=lambda e, b: {"loss": losses.get((e, b), 0.5)})
    assert (jran, jm.marker) == (kran, km.marker) == (2, 1.0)
    assert j_out == k_out == "Batch 1: Invalid loss, terminating training\n"


def _times_out(text):
    return re.sub(r" - \d+s - \d+(us|ms|s)/step", " - Ts - T/step", text)


@pytest.mark.parametrize("epochs", [1, 3])
def test_progbar_lines_as_keras_verbose_2(epochs, capsys):
    logs = {"loss": 0.123456, "accuracy": 0.9, "val_loss": 0.0001234, "big": 12345.678}

    def run(ns, make):
        cbs = ns.CallbackList([make()], model=FakeModel(None), epochs=epochs, steps=12,
                              verbose=2)
        cbs.on_train_begin()
        for epoch in range(epochs):
            cbs.on_epoch_begin(epoch)
            for b in range(12):
                cbs.on_train_batch_end(b, {"loss": 1.0})
            cbs.on_epoch_end(epoch, dict(logs))
        cbs.on_train_end()
        # a new logger: Keras' stays silent for evaluation once it has served a fit
        cbs = ns.CallbackList([make()], model=FakeModel(None), epochs=1, steps=5, verbose=2)
        cbs.on_test_begin()
        for b in range(5):
            cbs.on_test_batch_end(b, {"loss": 2.0})
        cbs.on_test_end({"loss": 2.0, "mae": 0.5})

    run(K, K.ProgbarLogger)
    keras_out = capsys.readouterr().out
    stream = io.StringIO()
    run(J, lambda: J.ProgbarLogger(stream=stream))
    assert _times_out(stream.getvalue()) == _times_out(keras_out)
    assert "12/12 - Ts - T/step - accuracy: 0.9000" in _times_out(keras_out)
