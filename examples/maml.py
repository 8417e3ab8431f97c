"""MAML (Finn et al., 2017) on sine-wave regression, with second-order meta-gradients.

Each task is a sine wave y = A sin(x + phase). The inner loop adapts the network's
weights to a task with one gradient step on K support points; the outer loop
updates the initial weights so that the adapted network does well on the task's
query points. The meta-gradient flows through the inner gradient step, so it
contains second derivatives: the inner tape's gradient is recorded by the outer tape.

The network is written functionally (weights passed in), because the adapted
weights ``w - alpha * g`` are tensors, not variables. Before training, the
meta-gradient is checked against finite differences in float64, and compared
with the first-order approximation (which drops the second-order terms).

Run: python examples/maml.py [--steps N]
"""

import argparse

import numpy as np

import jittape as jt

SIZES = [1, 40, 40, 1]


def init_params(dtype="float32"):
    init = jt.initializers.GlorotUniform()
    params = []
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        params.append(jt.Variable(init((a, b), dtype=dtype), name=f"w{i}"))
        params.append(jt.Variable(jt.zeros((b,), dtype=dtype), name=f"b{i}"))
    return params


def forward(params, x, activation=jt.nn.relu):
    h = x
    for i in range(0, len(params), 2):
        h = h @ params[i] + params[i + 1]
        if i < len(params) - 2:
            h = activation(h)
    return h


def mse(pred, y):
    return jt.reduce_mean(jt.square(pred - y))


def sample_task(rng, k, dtype=np.float32):
    amp, phase = rng.uniform(0.1, 5.0), rng.uniform(0, np.pi)

    def draw(n):
        x = rng.uniform(-5, 5, (n, 1))
        return x.astype(dtype), (amp * np.sin(x + phase)).astype(dtype)

    return draw(k), draw(k)


def adapted(params, support, inner_lr, second_order=True, activation=jt.nn.relu):
    """One inner SGD step on the support set; the result keeps the path to ``params``."""
    xs, ys = support
    with jt.GradientTape() as inner:
        inner.watch(params)
        loss = mse(forward(params, xs, activation), ys)
    grads = inner.gradient(loss, params)
    if not second_order:
        grads = [jt.stop_gradient(g) for g in grads]  # first-order MAML
    return [p - inner_lr * g for p, g in zip(params, grads)]


def meta_loss(params, tasks, inner_lr, second_order=True, activation=jt.nn.relu):
    """Mean over tasks of the query loss after one inner step on the support set."""
    total = 0.0
    for support, (xq, yq) in tasks:
        fast = adapted(params, support, inner_lr, second_order, activation)
        total = total + mse(forward(fast, xq, activation), yq)
    return total / len(tasks)


def check_meta_gradient(seed=0, eps=1e-6, inner_lr=0.01):
    """<meta-gradient, v> by the tape vs a central difference along v, float64 and
    a smooth (tanh) network; also the same product with the first-order gradient."""
    jt.random.set_seed(seed)
    rng = np.random.default_rng(seed)
    params = init_params("float64")
    tasks = [sample_task(rng, 10, np.float64) for _ in range(2)]
    with jt.GradientTape() as tape:
        loss = meta_loss(params, tasks, inner_lr, activation=jt.tanh)
    second = tape.gradient(loss, params)
    with jt.GradientTape() as tape:
        loss = meta_loss(params, tasks, inner_lr, second_order=False, activation=jt.tanh)
    first = tape.gradient(loss, params)
    direction = [rng.standard_normal(p.shape) for p in params]
    base = [p.numpy() for p in params]

    def loss_at(sign):
        for p, b, d in zip(params, base, direction):
            p.assign(b + sign * eps * d)
        return float(meta_loss(params, tasks, inner_lr, activation=jt.tanh))

    numeric = (loss_at(+1) - loss_at(-1)) / (2 * eps)
    for p, b in zip(params, base):
        p.assign(b)

    def dot(gs):
        return sum(float(np.sum(g.numpy() * d)) for g, d in zip(gs, direction))

    return dot(second), numeric, dot(first)


def main(steps=300, meta_batch=4, k=10, inner_lr=0.01, seed=0, verbose=True):
    say = print if verbose else (lambda *a, **k: None)
    second, numeric, first = check_meta_gradient(seed)
    say(f"meta-gradient along a random direction: tape {second:.8f}, finite differences "
        f"{numeric:.8f}, first-order MAML {first:.8f}")

    jt.random.set_seed(seed)
    rng = np.random.default_rng(seed)
    params = init_params()
    meta_opt = jt.optimizers.Adam(1e-2)
    eval_rng = np.random.default_rng(seed + 1000)
    eval_tasks = [sample_task(eval_rng, k) for _ in range(20)]

    def evaluate():
        return float(meta_loss(params, eval_tasks, inner_lr))

    before = evaluate()
    say(f"post-adaptation query loss on 20 held-out tasks before meta-training: {before:.4f}")
    for step in range(1, steps + 1):
        tasks = [sample_task(rng, k) for _ in range(meta_batch)]
        with jt.GradientTape() as tape:
            loss = meta_loss(params, tasks, inner_lr)
        grads = tape.gradient(loss, params)
        meta_opt.apply_gradients(zip(grads, params))
        if step % 100 == 0 or step == steps:
            say(f"meta step {step:4d}  meta loss {float(loss):.4f}")
    after = evaluate()
    say(f"post-adaptation query loss on 20 held-out tasks after {steps} meta steps: {after:.4f}")
    return {"fd_check": (second, numeric, first), "before": before, "after": after}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    main(steps=p.parse_args().steps)
