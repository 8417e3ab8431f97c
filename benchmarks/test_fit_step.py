"""``model.fit`` against a hand-written ``@jt.function`` loop, group ``fit-digits``: one
epoch over digits-sized data (1,440 samples of 64 features, batch 32, 45 steps; the
demo's model: Dense 128 relu, Dropout 0.1, Dense 64 relu, Dense 10; Adam 2e-3; sparse
cross-entropy from logits; an accuracy metric), both compiled on ``cpu``, both
shuffling each epoch and cutting the batches from numpy arrays. Each round is three
epochs (``fit(epochs=3)``, three passes of the loop); the figure per step is the round's
median divided by 135.

Run: .venv/bin/python -m pytest benchmarks/test_fit_step.py -q
     --benchmark-group-by=group --benchmark-columns=median,iqr,rounds
"""

from __future__ import annotations

import numpy as np
import pytest

import jittape as jt
from bench_util import record, settle

N, FEATURES, CLASSES, BATCH = 1440, 64, 10, 32


def _data():
    rng = np.random.default_rng(0)
    x = rng.random((N, FEATURES), dtype=np.float32)
    y = rng.integers(0, CLASSES, N).astype(np.int32)
    return x, y


def _model():
    jt.random.set_seed(0)
    L = jt.keras.layers
    return jt.keras.Sequential([
        L.Dense(128, activation="relu", input_shape=(FEATURES,)), L.Dropout(0.1),
        L.Dense(64, activation="relu"), L.Dense(CLASSES)])


def _hand_epoch(model):
    opt = jt.keras.optimizers.Adam(2e-3)
    loss_fn = jt.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    loss_m = jt.keras.metrics.Mean(name="loss")
    acc = jt.keras.metrics.SparseCategoricalAccuracy(name="accuracy")

    @jt.function
    def step(x, y):
        with jt.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        loss_m.update_state(loss, sample_weight=jt.shape(x)[0])
        acc.update_state(y, logits)

    x, y = _data()
    rng = np.random.default_rng(1)

    def epoch():
        loss_m.reset_state()
        acc.reset_state()
        order = rng.permutation(N)
        for i in range(0, N, BATCH):
            idx = order[i:i + BATCH]
            step(jt.constant(x[idx]), jt.constant(y[idx]))
        return float(loss_m.result()), float(acc.result())

    return epoch, step


@pytest.mark.parametrize("impl", ["hand-function-cpu", "fit-cpu"])
def test_fit_epoch(benchmark, ceilings, impl):
    benchmark.group = "fit-digits"
    model = _model()
    if impl == "fit-cpu":
        x, y = _data()
        model.compile(jt.keras.optimizers.Adam(2e-3),
                      jt.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
        model.train_function.wait()

        def rounds():
            return model.fit(x, y, batch_size=BATCH, epochs=3, verbose=0)
    else:
        epoch, step = _hand_epoch(model)
        epoch()
        step.wait()

        def rounds():
            return [epoch() for _ in range(3)]
    settle(rounds)
    record(benchmark, impl, ceilings, None,
           workload="digits MLP, 3 epochs of 45 steps of 32, Adam",
           steps=3 * N // BATCH)
    benchmark(rounds)
