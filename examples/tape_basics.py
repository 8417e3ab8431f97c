"""A custom training loop with jittape's GradientTape, as you would write it in TF 2.x.

A two-layer MLP fits y = sin(3x) + noise with plain SGD; then a gradient penalty and
a second derivative show nested tapes. Run: python examples/tape_basics.py
"""

import time

import numpy as np

import jittape as jt


def main(steps=300, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(256, 1)).astype(np.float32)
    y = (np.sin(3 * x) + 0.05 * rng.standard_normal(x.shape)).astype(np.float32)

    w1 = jt.Variable(rng.standard_normal((1, 32)).astype(np.float32) * 1.0, name="w1")
    b1 = jt.Variable(np.zeros(32, np.float32), name="b1")
    w2 = jt.Variable(rng.standard_normal((32, 1)).astype(np.float32) * 0.2, name="w2")
    b2 = jt.Variable(np.zeros(1, np.float32), name="b2")
    params = [w1, b1, w2, b2]
    lr = 0.1

    def loss_fn(xb, yb):
        h = jt.tanh(xb @ w1 + b1)
        pred = h @ w2 + b2
        return jt.reduce_mean(jt.square(pred - yb))

    first = None
    t0 = time.perf_counter()
    for step in range(steps):
        with jt.GradientTape() as tape:
            loss = loss_fn(x, y)
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(lr * g)
        if first is None:
            first = float(loss)
        if step % 100 == 0 or step == steps - 1:
            print(f"step {step:4d}  loss {float(loss):.5f}")
    dt = (time.perf_counter() - t0) / steps
    print(f"loss {first:.4f} -> {float(loss):.4f}; {dt * 1e3:.2f} ms/step (eager tape)")

    # gradient penalty: || d loss / d x || with nested tapes, differentiated w.r.t. w1
    xt = jt.constant(x)
    with jt.GradientTape() as outer:
        with jt.GradientTape() as inner:
            inner.watch(xt)
            out = jt.tanh(xt @ w1 + b1) @ w2 + b2
        dx = inner.gradient(out, xt)
        penalty = jt.reduce_mean(jt.square(jt.norm(dx, axis=1) - 1.0))
    gp = outer.gradient(penalty, w1)
    print(f"gradient penalty {float(penalty):.4f}, |d penalty / d w1| = {float(jt.norm(gp)):.4f}")

    # second derivative of x^3 at 3
    x3 = jt.constant(3.0)
    with jt.GradientTape() as t2:
        t2.watch(x3)
        with jt.GradientTape() as t1:
            t1.watch(x3)
            yy = x3 * x3 * x3
        d1 = t1.gradient(yy, x3)
    d2 = t2.gradient(d1, x3)
    print(f"d(x^3)/dx at 3 = {float(d1)}, d2 = {float(d2)}")
    return first, float(loss)


if __name__ == "__main__":
    main()
