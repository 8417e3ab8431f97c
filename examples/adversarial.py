"""FGSM adversarial examples (Goodfellow et al., 2015) against the digits model: the
gradient of the loss with respect to the input image, its sign, one step of size eps.

Trains the model of ``train_digits.py`` (a ``@jt.function`` step), then for each eps
perturbs every test image by ``eps * sign(d loss / d image)`` (clipped to the [0, 1]
pixel range) and reports the accuracy on the perturbed images. The gradient with
respect to the input is a compiled ``@jt.function`` too: ``tape.watch(x)`` on its
argument.

Run: python examples/adversarial.py [--epochs N]
Needs the ``examples`` extra (scikit-learn, for the data).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import jittape as jt  # noqa: E402
import train_digits  # noqa: E402


def main(epochs=10, eps_list=(0.0, 0.05, 0.1, 0.2), verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    trained = train_digits.main(epochs=epochs, verbose=False)
    model = trained["model"]
    x_test, y_test = trained["test_data"]
    loss_fn = jt.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")

    @jt.function
    def input_gradient(x, y):
        with jt.GradientTape() as tape:
            tape.watch(x)
            loss = loss_fn(y, model(x, training=False))
        return tape.gradient(loss, x)

    @jt.function
    def predict(x):
        return jt.argmax(model(x, training=False), axis=1)

    grad = input_gradient(x_test, y_test).numpy()
    say(f"model trained {epochs} epochs; clean test accuracy {trained['test_acc']:.3f}")
    results = {}
    for eps in eps_list:
        x_adv = np.clip(x_test + eps * np.sign(grad), 0.0, 1.0).astype(np.float32)
        acc = float(np.mean(predict(x_adv).numpy() == y_test))
        results[eps] = acc
        say(f"eps {eps:4.2f}: accuracy on FGSM images {acc:.3f}")
    return {"accuracy": results, "grad": grad, "x_test": x_test, "y_test": y_test,
            "model": model, "traces": input_gradient.cache_info().traces}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=10)
    args = ap.parse_args()
    main(epochs=args.epochs)
