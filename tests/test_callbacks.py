"""jt.keras.callbacks driven through their hooks by a small loop with a fake model (the
attributes Model.fit gives them), so these tests don't need jt.keras.Model.

Each rule is checked against a numpy reference written from Keras 3's documentation of
the callback (and hand-worked sequences); the compiled-step tests run a
``@jt.function`` train step under the callbacks and compare with the eager run.
"""

from __future__ import annotations

import io
import os
import re
import sys

import numpy as np
import pytest

import jittape as jt
from jittape.keras import callbacks as C
from jittape.keras.callbacks import progbar as progbar_module


class FakeModel:
    """What the callbacks read of a model: ``stop_training``, ``optimizer``, ``metrics``,
    ``get_weights``/``set_weights`` and the save methods (which write a small file)."""

    def __init__(self, lr=0.1, metrics=(), optimizer=None):
        self.stop_training = False
        self.optimizer = optimizer if optimizer is not None else jt.optimizers.SGD(lr)
        self.metrics = list(metrics)
        self.weights = [np.zeros(2), np.zeros(())]
        self.saves = []  # (method, path, the weights' marker)
        self.fail_save = False

    def get_weights(self):
        return [w.copy() for w in self.weights]

    def set_weights(self, weights):
        self.weights = [np.array(w) for w in weights]

    def _write(self, kind, filepath, overwrite):
        assert overwrite is True
        if self.fail_save:
            raise OSError(f"disk full while writing {filepath}")
        with open(filepath, "w") as f:
            f.write(f"{kind} {self.weights[1].item()}")
        self.saves.append((kind, filepath, self.weights[1].item()))

    def save_weights(self, filepath, overwrite=True):
        self._write("weights", filepath, overwrite)

    def save(self, filepath, overwrite=True):
        self._write("model", filepath, overwrite)


def fit(callbacks, epoch_logs, model=None, steps=2, batch_logs=None, verbose=0,
        add_history=True):
    """Keras 3's fit loop over given logs: the weights' marker becomes the epoch number
    during epoch ``e``; ``epoch_logs[e]`` are the epoch's logs, ``batch_logs(e, b)``
    each step's. Returns (model, history, epochs run)."""
    model = model or FakeModel()
    cbs = C.CallbackList(callbacks, add_history=add_history, model=model,
                         epochs=len(epoch_logs), steps=steps, verbose=verbose)
    cbs.on_train_begin()
    ran = 0
    for epoch, logs in enumerate(epoch_logs):
        cbs.on_epoch_begin(epoch)
        for b in range(steps or 0):
            cbs.on_train_batch_begin(b)
            model.weights = [np.full(2, float(epoch)), np.array(float(epoch))]
            cbs.on_train_batch_end(b, batch_logs(epoch, b) if batch_logs else logs)
            if model.stop_training:
                break
        cbs.on_epoch_end(epoch, dict(logs))
        ran += 1
        if model.stop_training:
            break
    cbs.on_train_end()
    return model, getattr(model, "history", None), ran


# -- numpy references, from Keras 3's documented rules ------------------------------------
def early_stopping_reference(values, patience=0, min_delta=0.0, mode="min", baseline=None,
                             start_from_epoch=0):
    """(epoch that stops or None, best epoch) under the EarlyStopping docstring's rule."""
    sign = 1.0 if mode == "min" else -1.0  # compare sign * value: smaller is better

    def beats(v, ref):
        return ref is None or sign * v + min_delta < sign * ref

    best = best_epoch = None
    wait = 0
    for epoch, v in enumerate(values):
        if epoch < start_from_epoch:
            continue
        wait += 1
        if beats(v, best):
            best, best_epoch = v, epoch
            if baseline is None or beats(v, baseline):
                wait = 0
        elif wait >= patience and epoch > 0:
            return epoch, best_epoch
    return None, best_epoch


def plateau_reference(values, lr, factor, patience, cooldown=0, min_lr=0.0, min_delta=1e-4,
                      mode="min"):
    """The learning rate after each epoch under ReduceLROnPlateau's rule (the rate is a
    float32 variable, as the optimizer keeps it)."""
    sign = 1.0 if mode == "min" else -1.0
    lr = float(np.float32(lr))
    best, wait, cool, out = None, 0, 0, []
    for v in values:
        if cool > 0:
            cool, wait = cool - 1, 0
        if best is None or sign * v + min_delta < sign * best:
            best, wait = v, 0
        elif cool == 0:
            wait += 1
            if wait >= patience and lr > np.float32(min_lr):
                lr = float(np.float32(max(lr * factor, min_lr)))
                cool, wait = cooldown, 0
        out.append(lr)
    return out


# -- CallbackList -------------------------------------------------------------------------
def test_callback_list_forwards_every_hook_in_order():
    calls = []

    class Recorder(C.Callback):
        def __init__(self, tag):
            super().__init__()
            self.tag = tag

    for hook in C.base.HOOKS:
        def record(self, *a, _hook=hook, **kw):
            # logs come by keyword to batch hooks, by position to the others (as Keras)
            assert ("logs" in kw) == ("batch" in _hook), (_hook, a, kw)
            args, logs = (a, kw["logs"]) if "logs" in kw else (a[:-1], a[-1])
            calls.append((self.tag, _hook, args, logs))
        setattr(Recorder, hook, record)
    model = FakeModel()
    a, b = Recorder("a"), Recorder("b")
    cbs = C.CallbackList([a, [b]], model=model, epochs=3, steps=4, verbose=0)
    assert list(cbs) == [a, b] and len(cbs) == 2
    assert a.model is model and b.params == {"epochs": 3, "steps": 4, "verbose": 0}
    for hook, args in C.base.HOOKS.items():
        if hook.endswith("_end") and not args:
            getattr(cbs, hook.replace("_end", "_begin"))()
            calls.clear()
        getattr(cbs, hook)(*[7] * len(args), logs={"z": 1, "a": jt.constant(2.5)})
        want = {"a": 2.5, "z": 1.0}
        assert calls == [("a", hook, (7,) * len(args), want), ("b", hook, (7,) * len(args), want)]
        assert list(calls[0][3]) == ["a", "z"]  # sorted, as Keras orders logs
        assert type(calls[0][3]["a"]) is float
        calls.clear()


def test_callback_list_history_progbar_append_and_logs():
    model = FakeModel()
    h = C.History()
    cbs = C.CallbackList([h], add_history=True, add_progbar=True, model=model, epochs=1,
                         steps=1, verbose=0)
    assert [type(c) for c in cbs] == [C.History, C.ProgbarLogger] and cbs.callbacks[0] is h
    assert model.history is h
    late = C.LambdaCallback()
    cbs.append(late)
    assert cbs.callbacks[-1] is late and late.model is model and late.params["steps"] == 1
    seen = []
    cbs.append(C.LambdaCallback(on_epoch_end=lambda e, logs: seen.append(logs)))
    cbs.on_epoch_end(0, {"outer": {"inner": np.float32(0.5)}, "loss": np.float64(1.5),
                         "name": "x", "vec": np.array([1.0, 2.0])})
    # sorted, a nested dict's items in its place
    assert list(seen[0]) == ["loss", "name", "inner", "vec"]
    assert seen[0]["inner"] == 0.5 and seen[0]["name"] == "x" and seen[0]["vec"].shape == (2,)
    with pytest.raises(ValueError, match="on_train_end was called without the matching "
                                         "on_train_begin"):
        C.CallbackList([]).on_train_end()
    with pytest.raises(TypeError, match="must be a jt.keras.callbacks.Callback.*'nope'"):
        C.CallbackList([C.History(), "nope"])
    assert C.CallbackList(None).callbacks == []


def test_history_records_epochs():
    model, h, ran = fit([], [{"loss": 2.0, "acc": 0.5}, {"loss": 1.0, "acc": 0.75}])
    assert h.history == {"acc": [0.5, 0.75], "loss": [2.0, 1.0]} and h.epoch == [0, 1]
    assert ran == 2


# -- EarlyStopping ------------------------------------------------------------------------
def _stopped(values, monitor="loss", model=None, **kw):
    es = C.EarlyStopping(monitor=monitor, **kw)
    _, h, ran = fit([es], [{monitor: v} for v in values], model=model)
    return es, ran


@pytest.mark.parametrize("values, kw, stop", [
    ([1.0, 0.8, 0.85, 0.9, 0.7], dict(patience=2), 3),          # worked by hand
    ([1.0, 0.8, 0.85, 0.9, 0.7], dict(patience=3), None),
    ([1.0, 0.95, 0.92, 0.91], dict(patience=1, min_delta=0.1), 1),
    ([1.0, 0.95, 0.92, 0.91], dict(patience=1, min_delta=-0.1), 1),  # abs(min_delta)
    ([1.0, 0.95, 0.92, 0.91], dict(patience=1), None),
    ([0.5, 0.6, 0.55, 0.58], dict(patience=1, mode="max"), 2),
    ([0.9, 0.95, 0.97], dict(patience=2), 2),
    ([0.9, 0.95, 0.97], dict(patience=2, baseline=0.5), 1),      # never beat the baseline
    ([0.4, 0.45, 0.3, 0.35], dict(patience=2, baseline=0.5), None),
    ([0.9, 0.8, 0.7, 0.6, 0.65], dict(patience=2, baseline=0.5), 4),
    ([1.0, 2.0, 3.0, 2.5, 2.6], dict(patience=0), 1),
    ([1.0, 2.0, 3.0, 2.5, 2.6], dict(patience=0, start_from_epoch=2), 4),
    ([3.0, 2.0], dict(patience=0), None),
])
def test_early_stopping_epochs(values, kw, stop):
    ref_kw = dict(kw, min_delta=abs(kw.get("min_delta", 0.0)))
    assert early_stopping_reference(values, **ref_kw)[0] == stop
    es, ran = _stopped(values, **kw)
    assert ran == (len(values) if stop is None else stop + 1)
    assert es.stopped_epoch == (stop or 0)


def test_early_stopping_against_reference_on_random_sequences():
    rng = np.random.default_rng(0)
    for trial in range(60):
        values = list(np.round(rng.normal(1.0, 0.1, 8) - 0.02 * np.arange(8), 3))
        kw = dict(patience=int(rng.integers(0, 4)), min_delta=float(rng.choice([0, 0.01])),
                  mode=str(rng.choice(["min", "max"])), start_from_epoch=int(rng.integers(0, 3)),
                  baseline=[None, 0.95, 1.05][trial % 3])
        stop, best_epoch = early_stopping_reference(values, **kw)
        es, ran = _stopped(values, restore_best_weights=True, **kw)
        assert ran == (len(values) if stop is None else stop + 1), (values, kw)
        assert es.best_epoch == best_epoch, (values, kw)


def test_early_stopping_restores_best_weights(capsys):
    model = FakeModel()
    es, ran = _stopped([1.0, 0.5, 0.7, 0.8], model=model, patience=2,
                       restore_best_weights=True, verbose=1)
    assert ran == 4 and es.best_epoch == 1
    np.testing.assert_array_equal(model.weights[0], [1.0, 1.0])  # epoch 1's weights
    assert capsys.readouterr().out == (
        "Epoch 4: early stopping\nRestoring model weights from the end of the best epoch: 2.\n")
    # no improvement over the first epoch: its weights come back
    model = FakeModel()
    _stopped([0.5, 0.7, 0.8], model=model, patience=1, restore_best_weights=True)
    assert model.weights[1].item() == 0.0
    # without restore_best_weights the last weights stay
    model = FakeModel()
    _stopped([1.0, 0.5, 0.7, 0.8], model=model, patience=2)
    assert model.weights[1].item() == 3.0


def test_early_stopping_is_reset_by_each_fit():
    es = C.EarlyStopping(monitor="loss", patience=1)
    fit([es], [{"loss": v} for v in [1.0, 2.0, 3.0]])
    assert es.stopped_epoch == 1
    _, _, ran = fit([es], [{"loss": v} for v in [5.0, 4.0, 3.0]])
    assert ran == 3 and es.stopped_epoch == 0 and es.best == 3.0


def test_early_stopping_auto_mode_follows_the_models_metrics():
    acc = jt.metrics.SparseCategoricalAccuracy(name="accuracy")
    mse = jt.metrics.MeanSquaredError(name="mse")

    class Container:  # as a compiled model groups its metrics
        metrics = [acc, mse]

    model = FakeModel(metrics=[jt.metrics.Mean(name="loss"), Container()])
    es, ran = _stopped([0.5, 0.6, 0.55], monitor="val_accuracy", model=model, patience=0)
    assert es.monitor_op == "max" and ran == 3  # 0.55 < 0.6 stops at the last epoch
    es, ran = _stopped([0.5, 0.6, 0.55], monitor="mse", model=FakeModel(metrics=[Container()]))
    assert es.monitor_op == "min" and ran == 2
    es, _ = _stopped([0.5, 0.4], monitor="val_loss")
    assert es.monitor_op == "min"

    class Custom(jt.metrics.Mean):
        _direction = "up"

    es, _ = _stopped([0.5, 0.4], monitor="score", model=FakeModel(metrics=[Custom(name="score")]))
    assert es.monitor_op == "max"
    with pytest.raises(ValueError, match="monitor='val_accuracy'.*mode='max'"):
        _stopped([0.5], monitor="val_accuracy")  # no such metric: no direction


def test_early_stopping_missing_key_warns_and_bad_arguments_raise():
    es = C.EarlyStopping(monitor="val_loss", patience=0)
    with pytest.warns(UserWarning, match="`val_loss` which is not available. Available "
                                         "metrics are: acc,loss"):
        _, _, ran = fit([es], [{"loss": 1.0, "acc": 0.5}, {"loss": 2.0, "acc": 0.5}])
    assert ran == 2
    with pytest.raises(ValueError, match="EarlyStopping: mode must be.*'maximize'"):
        C.EarlyStopping(mode="maximize")
    with pytest.raises(ValueError, match="EarlyStopping: patience.*-1"):
        C.EarlyStopping(patience=-1)
    with pytest.raises(TypeError, match="EarlyStopping: baseline must be a number.*'a'"):
        C.EarlyStopping(baseline="a")
    with pytest.raises(TypeError, match="EarlyStopping: monitor must be"):
        C.EarlyStopping(monitor=3)


# -- ModelCheckpoint ----------------------------------------------------------------------
def test_checkpoint_file_names_from_epoch_and_logs(tmp_path):
    path = str(tmp_path / "ckpt-{epoch:02d}-{val_loss:.2f}.weights.h5")
    ck = C.ModelCheckpoint(path, save_weights_only=True)
    model, _, _ = fit([ck], [{"val_loss": v, "loss": 1.0} for v in [0.5, 0.4, 0.612]])
    names = [os.path.basename(p) for _, p, _ in model.saves]
    assert names == ["ckpt-01-0.50.weights.h5", "ckpt-02-0.40.weights.h5",
                     "ckpt-03-0.61.weights.h5"]
    assert all(kind == "weights" for kind, _, _ in model.saves)
    assert sorted(os.listdir(tmp_path)) == names
    ck = C.ModelCheckpoint(tmp_path / "sub" / "dir" / "m-{epoch}.keras")  # PathLike; dirs made
    model, _, _ = fit([ck], [{"val_loss": 1.0}])
    assert [(k, os.path.basename(p)) for k, p, _ in model.saves] == [("model", "m-1.keras")]


def test_checkpoint_best_only(tmp_path, capsys):
    path = str(tmp_path / "best.weights.h5")
    ck = C.ModelCheckpoint(path, save_weights_only=True, save_best_only=True, verbose=1)
    model, _, _ = fit([ck], [{"val_loss": v} for v in [0.5, 0.4, 0.6, 0.3]])
    assert [marker for _, _, marker in model.saves] == [0.0, 1.0, 3.0]
    with open(path) as f:
        assert f.read() == "weights 3.0"  # the file holds the best epoch's weights
    out = capsys.readouterr().out
    assert f"\nEpoch 1: val_loss improved from None to 0.50000, saving model to {path}\n" in out
    assert f"\nEpoch 2: val_loss improved from 0.50000 to 0.40000, saving model to {path}\n" in out
    assert "\nEpoch 3: val_loss did not improve from 0.40000\n" in out
    assert f"\nEpoch 4: finished saving model to {path}\n" in out
    # mode max, and a threshold to beat from the start
    ck = C.ModelCheckpoint(str(tmp_path / "acc-{epoch}.keras"), monitor="val_acc", mode="max",
                           save_best_only=True, initial_value_threshold=0.55)
    model, _, _ = fit([ck], [{"val_acc": v} for v in [0.5, 0.6, 0.58, 0.7]])
    assert [os.path.basename(p) for _, p, _ in model.saves] == ["acc-2.keras", "acc-4.keras"]
    # the monitored key is missing: it saves, with a warning
    ck = C.ModelCheckpoint(str(tmp_path / "x.keras"), save_best_only=True)
    with pytest.warns(UserWarning, match="Can save best model only with val_loss available"):
        model, _, _ = fit([ck], [{"loss": 1.0}])
    assert len(model.saves) == 1


def test_checkpoint_a_failed_save_keeps_the_old_best(tmp_path):
    path = str(tmp_path / "best.weights.h5")
    ck = C.ModelCheckpoint(path, save_weights_only=True, save_best_only=True)
    model = FakeModel()
    cbs = C.CallbackList([ck], model=model)
    cbs.on_train_begin()
    cbs.on_epoch_begin(0)
    cbs.on_epoch_end(0, {"val_loss": 0.5})
    model.fail_save, model.weights[1] = True, np.array(1.0)
    with pytest.raises(OSError, match="disk full"):
        cbs.on_epoch_end(1, {"val_loss": 0.4})
    assert ck.best == 0.5  # not the value whose save failed
    with open(path) as f:
        assert f.read() == "weights 0.0"
    model.fail_save = False
    cbs.on_epoch_end(2, {"val_loss": 0.45})  # still an improvement on the saved best
    assert ck.best == 0.45 and [m for _, _, m in model.saves] == [0.0, 1.0]


def test_checkpoint_save_freq_in_batches(tmp_path):
    ck = C.ModelCheckpoint(str(tmp_path / "b-{epoch}-{batch}.weights.h5"),
                           save_weights_only=True, save_freq=3)
    model, _, _ = fit([ck], [{"loss": 1.0}] * 3, steps=4)
    # reference: every 3rd batch counted across epochs, named by 1-based epoch and batch
    want = [f"b-{g // 4 + 1}-{g % 4 + 1}.weights.h5" for g in range(12) if (g + 1) % 3 == 0]
    assert [os.path.basename(p) for _, p, _ in model.saves] == want
    assert want[:2] == ["b-1-3.weights.h5", "b-2-2.weights.h5"]  # worked by hand


def test_checkpoint_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match=r"must end in `\.weights\.h5`.*filepath=w\.keras"):
        C.ModelCheckpoint("w.keras", save_weights_only=True)
    with pytest.raises(ValueError, match=r"must end in `\.keras`.*filepath=m\.ckpt"):
        C.ModelCheckpoint("m.ckpt")
    for bad in ("batch", 0, -2, 1.5, True):
        with pytest.raises(ValueError, match=f"unrecognized save_freq: {re.escape(repr(bad))}"):
            C.ModelCheckpoint("m.keras", save_freq=bad)
    with pytest.raises(TypeError, match="filepath must be a str"):
        C.ModelCheckpoint(3)
    ck = C.ModelCheckpoint(str(tmp_path / "{nope}.keras"))
    with pytest.raises(KeyError, match="the field nope is neither epoch, batch nor a logs "
                                       "key \\(the logs hold loss\\)"):
        fit([ck], [{"loss": 1.0}])
    os.mkdir(tmp_path / "d.keras")
    with pytest.raises(IsADirectoryError, match="existing directory"):
        fit([C.ModelCheckpoint(str(tmp_path / "d.keras"))], [{"loss": 1.0}])


# -- learning rate ------------------------------------------------------------------------
def test_learning_rate_scheduler_both_signatures(capsys):
    sched = C.LearningRateScheduler(lambda epoch: 0.1 * 0.5 ** epoch, verbose=1)
    model, h, _ = fit([sched], [{"loss": 1.0}] * 3)
    want = [float(np.float32(0.1 * 0.5 ** e)) for e in range(3)]
    assert h.history["learning_rate"] == want
    assert "\nEpoch 2: LearningRateScheduler setting learning rate to 0.05.\n" in \
        capsys.readouterr().out

    def decay_after_one(epoch, lr):
        return lr if epoch < 1 else lr * 0.9

    model, h, _ = fit([C.LearningRateScheduler(decay_after_one)], [{"loss": 1.0}] * 4,
                      model=FakeModel(lr=0.2))
    lr, want = float(np.float32(0.2)), []
    for e in range(4):  # reference: the rate passes through the float32 variable
        lr = float(np.float32(lr if e < 1 else lr * 0.9))
        want.append(lr)
    assert h.history["learning_rate"] == want


def test_learning_rate_scheduler_errors():
    with pytest.raises(ValueError, match="should be a float. Got: 1 "):
        fit([C.LearningRateScheduler(lambda e: 1)], [{"loss": 1.0}])
    with pytest.raises(TypeError, match="LearningRateScheduler: schedule must be a function"):
        C.LearningRateScheduler(0.1)

    def broken(epoch, lr):  # its own TypeError is not taken for the 1-argument form
        raise TypeError("broken schedule")

    with pytest.raises(TypeError, match="broken schedule"):
        fit([C.LearningRateScheduler(broken)], [{"loss": 1.0}])
    decay = jt.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    model = FakeModel(optimizer=jt.optimizers.SGD(decay))
    with pytest.raises(TypeError, match="LearningRateSchedule, so it has no rate to set"):
        fit([C.LearningRateScheduler(lambda e, lr: lr)], [{"loss": 1.0}], model=model)


@pytest.mark.parametrize("values, kw", [
    ([1.0, 0.9, 0.9, 0.9, 0.9, 0.85, 0.85, 0.85],
     dict(factor=0.5, patience=2, cooldown=1, min_lr=0.01)),
    ([1.0] * 6, dict(factor=0.1, patience=0, min_lr=0.003)),
    ([1.0, 1.1, 1.2, 0.5, 0.5, 0.5, 0.5], dict(factor=0.2, patience=1, cooldown=2)),
    ([0.5, 0.6, 0.6, 0.6], dict(factor=0.5, patience=1, mode="max")),
])
def test_reduce_lr_on_plateau_sequences(values, kw):
    want = plateau_reference(values, 0.1, min_delta=1e-4, **kw)
    cb = C.ReduceLROnPlateau(monitor="val_loss", min_delta=1e-4, **kw)
    lrs = []
    fit([cb, C.LambdaCallback(on_epoch_end=lambda e, logs: lrs.append(
        float(cb.model.optimizer.learning_rate)))], [{"val_loss": v} for v in values])
    assert lrs == want


def test_reduce_lr_on_plateau_worked_by_hand(capsys):
    cb = C.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=2, cooldown=1,
                             min_lr=0.01, verbose=1)
    _, h, _ = fit([cb], [{"val_loss": v} for v in [1.0, 0.9, 0.9, 0.9, 0.9, 0.85, 0.85, 0.85]])
    lr1, lr2 = float(np.float32(0.1)), float(np.float32(0.05))
    # logged before each epoch's reduction: the rate the epoch trained with
    assert h.history["learning_rate"] == [lr1] * 4 + [lr2] * 4
    out = capsys.readouterr().out
    assert out == (f"\nEpoch 4: ReduceLROnPlateau reducing learning rate to {lr1 * 0.5}.\n"
                   f"\nEpoch 8: ReduceLROnPlateau reducing learning rate to {lr2 * 0.5}.\n")
    # the floor compares at float32: a rate already at min_lr is not "reduced" again
    cb = C.ReduceLROnPlateau(monitor="loss", factor=0.1, patience=0, min_lr=0.003, verbose=1)
    fit([cb], [{"loss": 1.0}] * 5)
    assert capsys.readouterr().out.count("reducing") == 2


def test_reduce_lr_on_plateau_errors_and_warning():
    with pytest.raises(ValueError, match="does not support a factor >= 1.0. Received factor=1"):
        C.ReduceLROnPlateau(factor=1.0)
    with pytest.raises(ValueError, match="factor must be in"):
        C.ReduceLROnPlateau(factor=-0.5)
    with pytest.raises(ValueError, match="ReduceLROnPlateau: cooldown"):
        C.ReduceLROnPlateau(cooldown=-1)
    with pytest.warns(UserWarning, match="conditioned on metric `val_loss` which is not "
                                         "available. Available metrics are: loss,learning_rate"):
        fit([C.ReduceLROnPlateau()], [{"loss": 1.0}])


# -- compiled train steps under the callbacks ---------------------------------------------
class VarModel(FakeModel):
    """A model whose weight is a jt.Variable, trained by ``step``."""

    def __init__(self, lr):
        super().__init__(lr)
        self.w = jt.Variable(np.array([4.0, -2.0]), name="w")

    def get_weights(self):
        return [self.w.numpy().copy()]

    def set_weights(self, weights):
        self.w.assign(weights[0])

    def save_weights(self, filepath, overwrite=True):
        np.save(filepath + ".npy", self.w.numpy())
        self.saves.append(("weights", os.path.basename(filepath), None))


def _train(callbacks, compiled, epochs=6, steps=3, lr=0.3, model=None):
    model = model or VarModel(lr)
    opt = model.optimizer

    def step(x):
        with jt.GradientTape() as tape:
            loss = jt.reduce_sum((model.w - x) ** 2)
        opt.apply_gradients([(tape.gradient(loss, model.w), model.w)])
        return loss

    if compiled:
        step = jt.function(step)
    cbs = C.CallbackList(callbacks, add_history=True, model=model, epochs=epochs, steps=steps,
                         verbose=0)
    cbs.on_train_begin()
    trajectory = []
    for epoch in range(epochs):
        cbs.on_epoch_begin(epoch)
        losses = []
        for b in range(steps):
            cbs.on_train_batch_begin(b)
            # a target that moves away in epoch 3: the loss gets worse there
            losses.append(float(step(jt.constant(np.array([1.0, 1.0]) * (1 + 3 * (epoch == 3))))))
            cbs.on_train_batch_end(b, {"loss": losses[-1]})
        cbs.on_epoch_end(epoch, {"loss": float(np.mean(losses))})
        trajectory.append(model.w.numpy().copy())
        if model.stop_training:
            break
    cbs.on_train_end()
    if compiled:
        assert step.cache_info().traces == 1  # the rate and the weights are variables
    return model, trajectory


@pytest.mark.parametrize("make", [
    lambda d: [C.LearningRateScheduler(lambda e, lr: lr * 0.5 if e else lr)],
    lambda d: [C.ReduceLROnPlateau(monitor="loss", factor=0.25, patience=0)],
    lambda d: [C.EarlyStopping(monitor="loss", patience=1, restore_best_weights=True)],
    lambda d: [C.ModelCheckpoint(str(d / "w-{epoch}-{loss:.3f}.weights.h5"), monitor="loss",
                                 save_weights_only=True, save_best_only=True),
               C.CSVLogger(d / "log.csv"), C.TerminateOnNaN()],
], ids=["scheduler", "plateau", "early_stopping", "checkpoint_csv"])
def test_callbacks_drive_a_compiled_step_as_the_eager_one(make, tmp_path):
    (tmp_path / "eager").mkdir()
    (tmp_path / "compiled").mkdir()
    eager, want = _train(make(tmp_path / "eager"), compiled=False)
    model, got = _train(make(tmp_path / "compiled"), compiled=True)
    assert model.saves == eager.saves
    files = sorted(os.listdir(tmp_path / "eager"))
    assert sorted(os.listdir(tmp_path / "compiled")) == files
    for name in files:
        if name.endswith(".npy"):  # the checkpoints hold the same weights
            np.testing.assert_allclose(np.load(tmp_path / "compiled" / name),
                                       np.load(tmp_path / "eager" / name), rtol=1e-12)
        else:  # the CSV rows: the same epochs, losses and learning rates
            rows = [_read(tmp_path / side / name).splitlines() for side in ("compiled", "eager")]
            assert len(rows[0]) == 7 and rows[0][0] == rows[1][0] == "epoch,loss,val_loss"
            got_csv, want_csv = ([[float(c) for c in r.split(",")[:2]] for r in side[1:]]
                                 for side in rows)
            np.testing.assert_allclose(got_csv, want_csv, rtol=1e-12)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    assert model.history.history.keys() == eager.history.history.keys()
    for key, values in eager.history.history.items():
        np.testing.assert_allclose(model.history.history[key], values, rtol=1e-12)
    np.testing.assert_allclose(model.w.numpy(), eager.w.numpy(), rtol=1e-12)


def test_compiled_step_sees_the_new_rate_and_restored_weights():
    lrs = [0.3, 0.1, 0.05, 0.05, 0.01, 0.01]
    model, traj = _train([C.LearningRateScheduler(lambda e: lrs[e])], compiled=True)
    w = np.array([4.0, -2.0])
    for epoch in range(6):  # reference: SGD on sum((w - x)^2), gradient 2 (w - x)
        x = 1.0 + 3 * (epoch == 3)
        for _ in range(3):
            w = w - np.float32(lrs[epoch]) * 2 * (w - x)
        np.testing.assert_allclose(traj[epoch], w, rtol=1e-6)
    es = C.EarlyStopping(monitor="loss", patience=0, restore_best_weights=True)
    model, traj = _train([es], compiled=True)
    assert es.stopped_epoch == 3  # the moved target makes epoch 3's loss worse
    np.testing.assert_array_equal(model.w.numpy(), traj[2])  # epoch 2's weights are back


# -- CSVLogger ----------------------------------------------------------------------------
def _read(path):
    with open(path, newline="") as f:
        return f.read()


def test_csv_logger_rows_and_flush(tmp_path):
    path = tmp_path / "log.csv"
    cb = C.CSVLogger(path)
    seen = []

    class Peek(C.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(_read(path))  # each row is on disk at its epoch's end

    fit([cb, Peek()], [{"loss": 0.5, "acc": 0.25}, {"loss": 0.25, "acc": 0.75}])
    want = ("epoch,acc,loss,val_acc,val_loss\r\n"
            "0,0.25,0.5,NA,NA\r\n"
            "1,0.75,0.25,NA,NA\r\n")
    assert _read(path) == want
    assert seen == ["epoch,acc,loss,val_acc,val_loss\r\n0,0.25,0.5,NA,NA\r\n", want]
    fit([C.CSVLogger(path, separator=";")],
        [{"loss": 0.5, "val_loss": 0.125, "lst": [1, 2]}, {"loss": 0.1}])
    assert _read(path) == ('epoch;loss;lst;val_loss\r\n0;0.5;"""[1, 2]""";0.125\r\n'
                           "1;0.1;NA;NA\r\n")


def test_csv_logger_append(tmp_path):
    path = str(tmp_path / "log.csv")
    fit([C.CSVLogger(path, append=True)], [{"loss": 0.5}])
    fit([C.CSVLogger(path, append=True)], [{"loss": 0.25}, {"loss": 0.125}])
    assert _read(path) == ("epoch,loss,val_loss\r\n0,0.5,NA\r\n0,0.25,NA\r\n1,0.125,NA\r\n")
    fit([C.CSVLogger(path)], [{"loss": 1.0}])  # without append: a new file
    assert _read(path) == "epoch,loss,val_loss\r\n0,1.0,NA\r\n"
    with pytest.raises(ValueError, match="CSVLogger: separator must be a one-character "
                                         "string, got '::'"):
        C.CSVLogger(path, separator="::")


# -- TerminateOnNaN, LambdaCallback -------------------------------------------------------
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_terminate_on_nan(bad, capsys):
    losses = {(0, 0): 0.5, (0, 1): 0.4, (1, 0): 0.3, (1, 1): bad, (1, 2): 0.2}
    model, h, ran = fit([C.TerminateOnNaN()], [{"loss": 1.0}] * 3, steps=3,
                        batch_logs=lambda e, b: {"loss": losses.get((e, b), 0.1)})
    assert model.stop_training and ran == 2 and model.weights[1].item() == 1.0
    assert capsys.readouterr().out == "Batch 1: Invalid loss, terminating training\n"
    with pytest.raises(RuntimeError, match=f"NaN or Inf loss encountered at batch 1. "
                                           f"Loss value: {bad}"):
        fit([C.TerminateOnNaN(raise_error=True)], [{"loss": 1.0}] * 3, steps=3,
            batch_logs=lambda e, b: {"loss": losses.get((e, b), 0.1)})
    cb = C.TerminateOnNaN()
    cb.set_model(model := FakeModel())
    cb.on_test_batch_end(0, {"loss": bad})  # evaluation batches are not watched
    cb.on_train_batch_end(0, {"accuracy": bad})
    assert not model.stop_training


def test_lambda_callback():
    calls = []
    cb = C.LambdaCallback(on_epoch_begin=lambda e, logs: calls.append(("eb", e)),
                          on_train_batch_end=lambda b, logs: calls.append(("tbe", b, logs)),
                          on_train_end=lambda logs: calls.append(("te",)),
                          on_test_end=lambda logs: calls.append(("test_end", logs)))
    fit([cb], [{"loss": 1.0}], steps=2, add_history=False)
    cbs = C.CallbackList([cb])
    cbs.on_test_begin()
    cbs.on_test_end({"loss": 2.0})
    assert calls == [("eb", 0), ("tbe", 0, {"loss": 1.0}), ("tbe", 1, {"loss": 1.0}), ("te",),
                     ("test_end", {"loss": 2.0})]
    with pytest.raises(TypeError, match="'on_epoch_ends' is not a callback hook"):
        C.LambdaCallback(on_epoch_ends=print)
    with pytest.raises(TypeError, match="on_epoch_end must be callable, got 3"):
        C.LambdaCallback(on_epoch_end=3)


# -- progress display ---------------------------------------------------------------------
class Clock:
    """A clock the test moves by hand."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Terminal(io.StringIO):
    encoding = "utf-8"

    def isatty(self):
        return True


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(progbar_module, "_now", c)
    monkeypatch.setattr(progbar_module, "_REFRESH_S", 0.0)  # the bar redraws at each step
    return c


def _run_progbar(stream, verbose, clock, epochs=2, steps=4, step_s=0.02, first_s=0.5,
                 known_steps=True, validation=False):
    """fit's calls with one ProgbarLogger: step 1 takes first_s seconds, the others step_s."""
    pb = C.ProgbarLogger(stream=stream)
    cbs = C.CallbackList([pb], model=FakeModel(), epochs=epochs,
                         steps=steps if known_steps else None, verbose=verbose)
    cbs.on_train_begin()
    for epoch in range(epochs):
        cbs.on_epoch_begin(epoch)
        for b in range(steps):
            clock.now += first_s if b == 0 else step_s
            cbs.on_train_batch_end(b, {"loss": 0.5 / (b + 1), "accuracy": 0.25 * b})
        if validation:
            cbs.on_test_begin()
            cbs.on_test_batch_end(0, {"loss": 9.0})
            cbs.on_test_end({"loss": 9.0})
        cbs.on_epoch_end(epoch, {"loss": 0.125, "accuracy": 0.9, "val_loss": 0.0001234})
    cbs.on_train_end()
    return pb


def test_format_time_and_value_follow_keras():
    assert progbar_module.format_time(2.4) == " 2s/step"
    assert progbar_module.format_time(0.0) == " 0s/step"
    assert progbar_module.format_time(0.035) == " 35ms/step"
    assert progbar_module.format_time(0.00012) == " 120us/step"
    assert progbar_module.format_value(0.123456) == "0.1235"
    assert progbar_module.format_value(-0.5) == "-0.5000"
    assert progbar_module.format_value(0.0001234) == "1.2340e-04"
    assert progbar_module.format_value(0.0) == "0.0000e+00"
    assert progbar_module.format_value(float("nan")) == "nan"
    assert progbar_module.format_value("text") == "text"


@pytest.mark.parametrize("verbose", [1, 2])
def test_progbar_plain_lines_when_not_a_terminal(verbose, clock):
    out = io.StringIO()
    _run_progbar(out, verbose, clock, validation=True)
    # the line's time per step is the epoch's time over its steps (Keras' verbose=2), or
    # with verbose=1 the steps after the first (which compiles): (3 * 0.02) / 3
    per_step = " 140ms/step" if verbose == 2 else " 20ms/step"
    line = f"4/4 - 1s -{per_step} - accuracy: 0.9000 - loss: 0.1250 - val_loss: 1.2340e-04\n"
    assert out.getvalue() == "Epoch 1/2\n" + line + "Epoch 2/2\n" + line


def test_progbar_verbose_0_one_epoch_and_unknown_steps(clock):
    out = io.StringIO()
    _run_progbar(out, 0, clock)
    assert out.getvalue() == ""
    out = io.StringIO()
    _run_progbar(out, 2, clock, epochs=1, steps=12, step_s=0.0, first_s=0.0)
    assert out.getvalue() == ("12/12 - 0s - 0s/step - accuracy: 0.9000 - loss: 0.1250 - "
                              "val_loss: 1.2340e-04\n")  # one epoch: no "Epoch 1/1"
    out = io.StringIO()
    pb = _run_progbar(out, 2, clock, known_steps=False, steps=3)
    assert out.getvalue().count("\n3/3 - ") == 2 and pb.target == 3


def test_progbar_evaluate_and_predict_print_their_own_line(clock):
    out = io.StringIO()
    pb = C.ProgbarLogger(stream=out)
    cbs = C.CallbackList([pb], model=FakeModel(), epochs=1, steps=2, verbose=2)
    cbs.on_test_begin()
    for b in range(2):
        clock.now += 0.25
        cbs.on_test_batch_end(b, {"loss": 1.0})
    cbs.on_test_end({"loss": 0.75, "mae": 0.5})
    cbs.on_predict_begin()
    for b in range(2):
        clock.now += 0.003
        cbs.on_predict_batch_end(b, {"outputs": np.zeros(3)})
    cbs.on_predict_end()
    assert out.getvalue() == "2/2 - 0s - 250ms/step - loss: 0.7500 - mae: 0.5000\n" \
                             "2/2 - 0s - 3ms/step\n"
    with pytest.raises(ValueError, match="ProgbarLogger: verbose must be 0, 1, 2 or 'auto', "
                                         "got 3"):
        C.CallbackList([C.ProgbarLogger()], epochs=1, steps=1, verbose=3)


def test_progbar_live_bar_on_a_terminal(clock, monkeypatch):
    pytest.importorskip("tqdm")
    monkeypatch.setenv("COLUMNS", "60")  # the Terminal stream has no size of its own
    out = Terminal()
    _run_progbar(out, 1, clock, epochs=2, steps=4, validation=True)
    text = out.getvalue()
    assert text.startswith("Epoch 1/2\n") and text.count("Epoch 2/2\n") == 1
    epochs = text.split("Epoch 2/2\n")
    for part in epochs:
        frames = [f.rstrip() for f in part.split("\r") if f.strip()]
        final = frames[-1]
        assert final == ("4/4 " + "█" * 20 + " 1s 20ms/step - accuracy: 0.9000 - loss: 0.1250 - "
                         "val_loss: 1.2340e-04"), final
        # live frames in between: the step, the time left at the current pace, metrics
        # (cut to the terminal's width: a wrapped line can't be redrawn); the last is whole
        live = [f for f in frames if f.startswith("2/4 ")]
        whole = ("2/4 " + "█" * 10 + " " * 10 + " 0s 20ms/step - accuracy: 0.2500 - "
                 "loss: 0.2500")
        assert live and live[-1] == whole[:60]
        assert max(len(f) for f in frames[:-1]) <= 60 < len(final)
        assert "loss: 9.0000" not in part  # the validation inside fit prints nothing
    assert text.endswith("\n")


def test_progbar_falls_back_to_lines_without_tqdm(clock, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    out = Terminal()
    _run_progbar(out, 1, clock, epochs=1, steps=4)
    assert out.getvalue() == ("4/4 - 1s - 20ms/step - accuracy: 0.9000 - loss: 0.1250 - "
                              "val_loss: 1.2340e-04\n")


def test_progbar_defaults_to_stdout_and_fit_adds_it(clock, capsys):
    cbs = C.CallbackList([], add_progbar=True, model=FakeModel(), epochs=2, steps=1,
                         verbose=2)
    cbs.on_train_begin()
    for epoch in range(2):
        cbs.on_epoch_begin(epoch)
        cbs.on_train_batch_end(0, {"loss": 1.0})
        cbs.on_epoch_end(epoch, {"loss": 1.0})
    cbs.on_train_end()
    assert capsys.readouterr().out == "Epoch 1/2\n1/1 - 0s - 0s/step - loss: 1.0000\n" \
                                      "Epoch 2/2\n1/1 - 0s - 0s/step - loss: 1.0000\n"


def test_unprovided_callbacks_say_so():
    with pytest.raises(AttributeError, match="RemoteMonitor is not provided by jittape"):
        C.RemoteMonitor  # noqa: B018
