"""TF's "Basic training loops" guide, ported by changing the import: a linear model as a
``jt.Module`` with two variables, trained by a hand-written loop with ``assign_sub``.

The guide's program, with ``tf`` replaced by ``jt``:
``import tensorflow as tf`` -> ``import jittape as jt``. The data is the guide's own
(random points on a line, with noise), so nothing is downloaded.

Run: python examples/tf_module_linear.py
"""

from __future__ import annotations

import sys

import jittape as jt

TRUE_W = 3.0
TRUE_B = 2.0
NUM_EXAMPLES = 201


class MyModel(jt.Module):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # initialize the weights to `5.0` and the bias to `0.0`
        # in practice, these should be randomly initialized
        self.w = jt.Variable(5.0)
        self.b = jt.Variable(0.0)

    def __call__(self, x):
        return self.w * x + self.b


# this computes a single loss value for an entire batch
def loss(target_y, predicted_y):
    return jt.reduce_mean(jt.square(target_y - predicted_y))


# given a callable model, inputs, outputs, and a learning rate...
def train(model, x, y, learning_rate):
    with jt.GradientTape() as t:
        # trainable variables are automatically tracked by GradientTape
        current_loss = loss(y, model(x))
    # use GradientTape to calculate the gradients with respect to W and b
    dw, db = t.gradient(current_loss, [model.w, model.b])
    # subtract the gradient scaled by the learning rate
    model.w.assign_sub(learning_rate * dw)
    model.b.assign_sub(learning_rate * db)


def training_loop(model, x, y, epochs, say):
    weights, biases = [], []
    for epoch in epochs:
        # update the model with the single giant batch
        train(model, x, y, learning_rate=0.1)
        # track this before I update
        weights.append(model.w.numpy())
        biases.append(model.b.numpy())
        current_loss = loss(y, model(x))
        say(f"Epoch {epoch:2d}:")
        say("    ", report(model, current_loss))
    return weights, biases


def report(model, loss):
    return f"W = {model.w.numpy():1.2f}, b = {model.b.numpy():1.2f}, loss={loss:2.5f}"


def main(epochs=10, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    jt.random.set_seed(0)
    # a vector of random x values
    x = jt.linspace(-2, 2, NUM_EXAMPLES)
    x = jt.cast(x, jt.float32)

    def f(x):
        return x * TRUE_W + TRUE_B

    # generate some noise
    noise = jt.random.normal(shape=[NUM_EXAMPLES])
    # calculate y
    y = f(x) + noise

    model = MyModel()
    # list the variables with Module's built-in variable aggregation
    say("Variables:", model.variables)
    # verify the model works
    assert model(3.0).numpy() == 15.0
    say("Starting:")
    say("    ", report(model, loss(target_y=y, predicted_y=model(x))))
    first = float(loss(y, model(x)))
    training_loop(model, x, y, range(epochs), say)
    last = float(loss(y, model(x)))
    return {"w": float(model.w.numpy()), "b": float(model.b.numpy()), "first_loss": first,
            "last_loss": last, "variables": [v.name for v in model.variables]}


if __name__ == "__main__":
    res = main()
    ok = abs(res["w"] - TRUE_W) < 0.3 and abs(res["b"] - TRUE_B) < 0.3
    sys.exit(0 if ok else 1)
