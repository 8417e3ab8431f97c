"""A subclassed ``jt.keras.Model`` trained two ways on scikit-learn's digits: with
``model.fit`` and with a custom ``@jt.function`` training loop, as the TF 2 guides write
both. Swap ``import jittape as jt`` for ``import tensorflow as tf`` (and ``jt`` for
``tf``) and it is a TF program.

At the end it prints each way's time per training step (median over the epochs, the
first epoch left out: it traces and compiles) and the test accuracy of both.

Run: python examples/subclassed_model_loop.py [--epochs N]
Needs the ``examples`` extra (scikit-learn).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import jittape as jt

keras = jt.keras


class DigitsMLP(keras.Model):
    """Two hidden layers with dropout; logits out."""

    def __init__(self, hidden=(128, 64), classes=10, **kwargs):
        super().__init__(**kwargs)
        self.blocks = [keras.layers.Dense(n, activation="relu") for n in hidden]
        self.dropout = keras.layers.Dropout(0.1)
        self.head = keras.layers.Dense(classes)

    def call(self, inputs, training=None):
        x = inputs
        for block in self.blocks:
            x = self.dropout(block(x), training=training)
        return self.head(x)


def load(seed=0):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    return train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)


class EpochTimer(keras.callbacks.Callback):
    """Seconds per epoch of ``fit``."""

    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
        self._t = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self._t)


def with_fit(x_train, y_train, x_test, y_test, epochs, batch_size, seed):
    keras.utils.set_random_seed(seed)
    model = DigitsMLP()
    model.compile(optimizer=keras.optimizers.Adam(2e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    timer = EpochTimer()
    history = model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs,
                        callbacks=[timer], verbose=0)
    _, accuracy = model.evaluate(x_test, y_test, verbose=0)
    return model, history.history, timer.seconds, accuracy


def with_custom_loop(x_train, y_train, x_test, y_test, epochs, batch_size, seed):
    keras.utils.set_random_seed(seed)
    model = DigitsMLP()
    optimizer = keras.optimizers.Adam(2e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    train_acc = keras.metrics.SparseCategoricalAccuracy()
    test_acc = keras.metrics.SparseCategoricalAccuracy()

    @jt.function
    def train_step(x, y):
        with jt.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        train_acc.update_state(y, logits)
        return loss

    @jt.function
    def test_step(x, y):
        test_acc.update_state(y, model(x, training=False))

    dataset = jt.data.Dataset.from_tensor_slices((x_train, y_train))
    seconds = []
    for _ in range(epochs):
        t = time.perf_counter()
        train_acc.reset_state()
        for x, y in dataset.shuffle(len(x_train)).batch(batch_size):
            train_step(x, y)
        seconds.append(time.perf_counter() - t)
    for x, y in jt.data.Dataset.from_tensor_slices((x_test, y_test)).batch(256):
        test_step(x, y)
    return model, float(train_acc.result()), seconds, float(test_acc.result())


def main(epochs=15, batch_size=32, seed=0, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    x_train, x_test, y_train, y_test = load(seed)
    steps = int(np.ceil(len(x_train) / batch_size))
    model, hist, fit_s, fit_acc = with_fit(x_train, y_train, x_test, y_test, epochs,
                                           batch_size, seed)
    if verbose:
        model.summary()
    say(f"fit:         final loss {hist['loss'][-1]:.4f}, train accuracy "
        f"{hist['accuracy'][-1]:.3f}, test accuracy {fit_acc:.3f}")
    _, train_acc, loop_s, loop_acc = with_custom_loop(x_train, y_train, x_test, y_test,
                                                      epochs, batch_size, seed)
    say(f"custom loop: train accuracy {train_acc:.3f}, test accuracy {loop_acc:.3f}")
    per_step = {name: float(np.median(s[1:])) / steps * 1e6
                for name, s in (("fit", fit_s), ("custom loop", loop_s))}
    for name, us in per_step.items():
        say(f"{name:12s} {us:7.1f} us per step (median epoch / {steps} steps, first epoch out)")
    return {"fit_accuracy": fit_acc, "loop_accuracy": loop_acc, "history": hist,
            "us_per_step": per_step}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=15)
    main(epochs=p.parse_args().epochs)
