"""A functional ``jt.keras.Model`` with two inputs and two outputs, trained with ``fit``
(the shape of the Keras guide's multi-input, multi-output example).

Inputs: a digit's 8x8 pixels, and a 10-wide "hint" (the one-hot label with 40% of its
entries replaced by noise). Outputs: the digit (10-way softmax) and whether it is even
(a sigmoid). The losses, their weights and the metrics are given per output by name.

Run: python examples/functional_two_inputs.py [--epochs N]
Needs the ``examples`` extra (scikit-learn).
"""

from __future__ import annotations

import argparse

import numpy as np

import jittape as jt

keras = jt.keras
layers = keras.layers


def build():
    pixels = keras.Input(shape=(64,), name="pixels")
    hint = keras.Input(shape=(10,), name="hint")
    features = layers.Dense(64, activation="relu", name="features")(pixels)
    hint_features = layers.Dense(16, activation="relu", name="hint_features")(hint)
    merged = layers.concatenate([features, hint_features], name="merged")
    digit = layers.Dense(10, activation="softmax", name="digit")(merged)
    even = layers.Dense(1, activation="sigmoid", name="even")(merged)
    return keras.Model(inputs=[pixels, hint], outputs={"digit": digit, "even": even},
                       name="two_inputs")


def data(seed=0):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    rng = np.random.default_rng(seed)
    hint = np.eye(10, dtype=np.float32)[y]
    noisy = rng.random(len(y)) < 0.4
    hint[noisy] = rng.random((int(noisy.sum()), 10)).astype(np.float32)
    return train_test_split(x, hint, y, test_size=0.2, random_state=seed, stratify=y)


def main(epochs=10, seed=0, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    x_tr, x_te, h_tr, h_te, y_tr, y_te = data(seed)
    keras.utils.set_random_seed(seed)
    model = build()
    if verbose:
        model.summary()
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss={"digit": "sparse_categorical_crossentropy",
                        "even": "binary_crossentropy"},
                  loss_weights={"digit": 1.0, "even": 0.5},
                  metrics={"digit": ["accuracy"], "even": ["accuracy"]})
    history = model.fit([x_tr, h_tr], {"digit": y_tr, "even": (y_tr % 2 == 0)[:, None]},
                        batch_size=32, epochs=epochs, validation_split=0.1, verbose=0)
    results = model.evaluate({"pixels": x_te, "hint": h_te},
                             {"digit": y_te, "even": (y_te % 2 == 0)[:, None]},
                             return_dict=True, verbose=0)
    for k, v in history.history.items():
        say(f"{k:24s} {v[0]:.4f} -> {v[-1]:.4f}")
    say("test: " + ", ".join(f"{k} {v:.4f}" for k, v in results.items()))
    pred = model.predict([x_te[:5], h_te[:5]], verbose=0)
    say("first test digits:", y_te[:5].tolist(), "predicted:", pred["digit"].argmax(1).tolist())
    return {"history": history.history, "test": results, "model": model}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=10)
    main(epochs=p.parse_args().epochs)
