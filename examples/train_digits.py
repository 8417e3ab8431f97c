"""Train an MLP on the handwritten digits that ship with scikit-learn, with a
``@jt.function`` train step: one compiled call per step (forward, backward, Adam).

8x8 images, 1,797 of them: 1,437 to train on, 360 to test. The step is the TF 2.x
custom-training-loop step with ``tf`` replaced by ``jt``. At the end the script times
the same step run eagerly against the compiled one, and says what the first call cost.

Run: python examples/train_digits.py [--epochs N]     (make demo)
Needs the ``examples`` extra (scikit-learn; tqdm for the progress bar, optional).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import jittape as jt


def load(seed=0):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    return train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)


def _bar(total, desc, verbose):
    if not verbose or not sys.stdout.isatty():  # a log file gets the epoch lines only
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, leave=False, file=sys.stdout, ncols=80)


def make_model():
    """The MLP: 64 pixels -> 128 -> 64 -> 10 logits, with dropout after the first layer."""
    return jt.Sequential([
        jt.layers.Dense(128, activation="relu", input_shape=(64,)),
        jt.layers.Dropout(0.1),
        jt.layers.Dense(64, activation="relu"),
        jt.layers.Dense(10),
    ])


def main(epochs=20, batch_size=32, seed=0, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    x_train, x_test, y_train, y_test = load(seed)
    jt.random.set_seed(seed)
    model = make_model()
    optimizer = jt.optimizers.Adam(learning_rate=2e-3)
    loss_fn = jt.losses.SparseCategoricalCrossentropy(from_logits=True)

    def train_step(x, y):
        with jt.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        hits = jt.reduce_sum(jt.cast(jt.equal(jt.cast(jt.argmax(logits, axis=1), "int32"), y),
                                     "float32"))
        return loss, hits

    compiled_step = jt.function(train_step)

    @jt.function
    def predict(x):
        return jt.argmax(model(x, training=False), axis=1)

    rng = np.random.default_rng(seed)
    n = len(x_train)
    steps_per_epoch = n // batch_size  # full batches only: one shape, one trace
    t_first = None
    history = []
    for epoch in range(1, epochs + 1):
        order = rng.permutation(n)
        bar = _bar(steps_per_epoch, f"epoch {epoch:2d}", verbose)
        total_loss = total_hits = 0.0
        t0 = time.perf_counter()
        for k in range(steps_per_epoch):
            idx = order[k * batch_size:(k + 1) * batch_size]
            t_call = time.perf_counter()
            loss, hits = compiled_step(x_train[idx], y_train[idx])
            if t_first is None:
                # the first call returns at once (it runs on the interpreter while the
                # step compiles in the background); wait for the compiled step here so
                # that the epochs below show its speed
                t_first = time.perf_counter() - t_call
                compiled_step.wait()
                t_compiled = time.perf_counter() - t_call
                t0 += t_compiled - t_first
            total_loss += float(loss)
            total_hits += float(hits)
            if bar is not None:
                bar.update(1)
        dt = time.perf_counter() - t0
        if bar is not None:
            bar.close()
        test_acc = float(np.mean(predict(x_test).numpy() == y_test))
        seen = steps_per_epoch * batch_size
        history.append({"loss": total_loss / steps_per_epoch, "train_acc": total_hits / seen,
                        "test_acc": test_acc, "steps_per_s": steps_per_epoch / dt})
        h = history[-1]
        say(f"epoch {epoch:2d}  loss {h['loss']:.4f}  train acc {h['train_acc']:.3f}  "
            f"test acc {h['test_acc']:.3f}  {h['steps_per_s']:,.0f} steps/s")

    # the same step, eager and compiled, on one batch; the trained weights are put
    # back afterwards (the timing steps train on that batch)
    trained = model.get_weights()
    xb, yb = x_train[:batch_size], y_train[:batch_size]
    xt, yt = jt.constant(xb), jt.constant(yb)

    def median_ms(fn, reps):
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn(xt, yt)
            ts.append(time.perf_counter() - t0)
        return 1e3 * sorted(ts)[len(ts) // 2]

    train_step(xt, yt)  # the eager path's backward graph compiles on its first call
    eager_ms = median_ms(train_step, 50)
    compiled_ms = median_ms(compiled_step, 200)
    model.set_weights(trained)
    info = compiled_step.cache_info()
    final = history[-1]["test_acc"]
    say(f"test accuracy {final:.3f}")
    say(f"step time: eager {eager_ms:.3f} ms, @jt.function {compiled_ms:.3f} ms "
        f"({eager_ms / compiled_ms:.1f}x faster); first call {t_first:.2f} s, compiled "
        f"step ready after {t_compiled:.2f} s; {info.traces} trace(s), "
        f"{info.kernels} kernel calls")
    return {"history": history, "test_acc": final, "eager_ms": eager_ms,
            "compiled_ms": compiled_ms, "first_call_s": t_first, "traces": info.traces,
            "compiled_s": t_compiled,
            "model": model, "test_data": (x_test, y_test)}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--min-accuracy", type=float, default=0.95,
                    help="exit with status 1 below this test accuracy")
    args = ap.parse_args()
    res = main(epochs=args.epochs, batch_size=args.batch_size)
    if res["test_acc"] < args.min_accuracy:
        print(f"test accuracy {res['test_acc']:.3f} is below {args.min_accuracy}")
        sys.exit(1)
