"""``model.fit`` with the callbacks a Keras user reaches for: ``EarlyStopping`` (with the
best weights restored), ``ModelCheckpoint`` (the best model as a ``.keras`` archive,
written atomically), ``ReduceLROnPlateau`` and ``CSVLogger``; then the best model is
loaded back with ``jt.keras.models.load_model`` and evaluated.

The data are scikit-learn's digits, with 20% of the labels of the training set shuffled
so that the model overfits and early stopping has something to do.

Run: python examples/fit_with_callbacks.py [--epochs N] [--out DIR]
Needs the ``examples`` extra (scikit-learn).
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

import jittape as jt

keras = jt.keras


def data(seed=0):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.2, random_state=seed,
                                              stratify=y)
    rng = np.random.default_rng(seed)
    noisy = rng.random(len(y_tr)) < 0.2
    y_tr = y_tr.copy()
    y_tr[noisy] = rng.integers(0, 10, int(noisy.sum()))
    return x_tr, x_te, y_tr, y_te


def main(epochs=60, out=None, seed=0, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    out = out or tempfile.mkdtemp(prefix="jt-fit-")
    os.makedirs(out, exist_ok=True)
    x_tr, x_te, y_tr, y_te = data(seed)
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([
        keras.Input(shape=(64,)),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    best = os.path.join(out, "best.keras")
    callbacks = [
        keras.callbacks.EarlyStopping(monitor="val_loss", patience=5,
                                      restore_best_weights=True, verbose=int(verbose)),
        keras.callbacks.ModelCheckpoint(best, monitor="val_loss", save_best_only=True),
        keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=2),
        keras.callbacks.CSVLogger(os.path.join(out, "log.csv")),
    ]
    history = model.fit(x_tr, y_tr, batch_size=32, epochs=epochs, validation_split=0.2,
                        callbacks=callbacks, verbose=2 if verbose else 0)
    val = history.history["val_loss"]
    best_epoch = int(np.argmin(val))
    say(f"stopped after {len(val)} epochs; best val_loss {val[best_epoch]:.4f} at epoch "
        f"{best_epoch + 1}; learning rate now {float(model.optimizer.learning_rate):.2e}")
    restored = model.evaluate(x_te, y_te, return_dict=True, verbose=0)
    loaded = keras.models.load_model(best)
    from_file = loaded.evaluate(x_te, y_te, return_dict=True, verbose=0)
    say(f"test accuracy with the restored weights {restored['accuracy']:.3f}, with the "
        f"checkpoint {from_file['accuracy']:.3f} ({best})")
    return {"history": history.history, "best_epoch": best_epoch, "restored": restored,
            "loaded": from_file, "out": out}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=60)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    main(epochs=args.epochs, out=args.out)
