"""A TF 2.x custom training loop, with `tf` replaced by `jt`.

A Sequential MLP (Dense 64 / 32 / 1) fits a nonlinear regression problem with Adam
and mean squared error; gradients are clipped by their global norm before each update.

Run: python examples/custom_training_loop.py [--steps N]
"""

import argparse
import time

import numpy as np

import jittape as jt


def make_data(n, rng):
    x = rng.uniform(-2, 2, size=(n, 4)).astype(np.float32)
    y = np.sin(x[:, :1]) + 0.5 * x[:, 1:2] * x[:, 2:3] - 0.25 * x[:, 3:4] ** 2
    y = y + 0.05 * rng.standard_normal(y.shape)
    return x, y.astype(np.float32)


def main(steps=400, batch_size=64, clip_norm=1.0, seed=0, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    rng = np.random.default_rng(seed)
    jt.random.set_seed(seed)  # the initial weights are reproducible
    x_train, y_train = make_data(2048, rng)
    x_test, y_test = make_data(512, rng)

    model = jt.Sequential([
        jt.layers.Dense(64, activation="relu", input_shape=(4,)),
        jt.layers.Dense(32, activation="relu"),
        jt.layers.Dense(1),
    ])
    if verbose:
        model.summary()
    optimizer = jt.optimizers.Adam(learning_rate=3e-3)
    loss_fn = jt.losses.MeanSquaredError()

    def evaluate():
        return float(loss_fn(y_test, model(x_test, training=False)))

    initial = evaluate()
    say(f"test loss before training: {initial:.4f}")
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        idx = rng.integers(0, len(x_train), batch_size)
        xb, yb = x_train[idx], y_train[idx]
        with jt.GradientTape() as tape:
            pred = model(xb, training=True)
            loss = loss_fn(yb, pred)
        grads = tape.gradient(loss, model.trainable_variables)
        grads, global_norm = jt.clip_by_global_norm(grads, clip_norm)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        if step % 100 == 0 or step == steps:
            say(f"step {step:4d}  batch loss {float(loss):.4f}  "
                f"grad norm {float(global_norm):.3f}")
    elapsed = time.perf_counter() - t0
    final = evaluate()
    say(f"test loss after {steps} steps: {final:.4f} "
        f"({elapsed / max(steps, 1) * 1e3:.2f} ms/step, eager)")
    return {"initial_loss": initial, "final_loss": final,
            "iterations": int(optimizer.iterations)}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=400)
    main(steps=p.parse_args().steps)
