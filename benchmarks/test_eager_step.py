"""Eager training step: hand-written numpy (the reference) vs jittape's GradientTape.

Workload: MLP 64-128-64-10, batch 64, tanh, softmax cross-entropy, SGD.
Run: .venv/bin/python -m pytest benchmarks -q --benchmark-only --benchmark-group-by=group
Compare ratios within one run; the machine is shared and noisy.
"""

import numpy as np
import pytest

import jittape as jt
from bench_util import settle

SIZES = (64, 128, 64, 10)
BATCH = 64
LR = 0.01


def _data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH).astype(np.int32)
    ws = [
        (rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32)
        for a, b in zip(SIZES[:-1], SIZES[1:])
    ]
    bs = [np.zeros(b, np.float32) for b in SIZES[1:]]
    return x, y, ws, bs


def numpy_step(x, y, ws, bs):
    """Forward, backward and SGD by hand."""
    acts = [x]
    h = x
    for i, (w, b) in enumerate(zip(ws, bs)):
        z = h @ w + b
        h = np.tanh(z) if i < len(ws) - 1 else z
        acts.append(h)
    z = h - h.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    loss = -np.log(p[np.arange(BATCH), y]).mean()
    g = p
    g[np.arange(BATCH), y] -= 1
    g /= BATCH
    for i in range(len(ws) - 1, -1, -1):
        gw = acts[i].T @ g
        gb = g.sum(axis=0)
        if i:
            g = (g @ ws[i].T) * (1 - acts[i] ** 2)
        ws[i] -= LR * gw
        bs[i] -= LR * gb
    return loss


def make_jt_step(ws, bs, backend=None):
    wv = [jt.Variable(w) for w in ws]
    bv = [jt.Variable(b) for b in bs]
    params = [p for pair in zip(wv, bv) for p in pair]

    def step(x, y):
        with jt.GradientTape(backend=backend) as tape:
            h = x
            for i, (w, b) in enumerate(zip(wv, bv)):
                h = h @ w + b
                if i < len(wv) - 1:
                    h = jt.tanh(h)
            xent = jt.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h)
            loss = jt.reduce_mean(xent)
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(LR * g)
        return loss

    return step


@pytest.mark.benchmark(group="mlp-64-128-64-10-eager")
def test_numpy_reference(benchmark):
    x, y, ws, bs = _data()
    benchmark(numpy_step, x, y, ws, bs)


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
@pytest.mark.benchmark(group="mlp-64-128-64-10-eager")
def test_jittape_eager(benchmark, backend):
    x, y, ws, bs = _data()
    step = make_jt_step(ws, bs, backend)
    xt, yt = jt.constant(x), jt.constant(y)
    settle(lambda: step(xt, yt))  # compiles, and the parallel variant's compile
    benchmark(step, xt, yt)


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_jittape_step_matches_numpy(backend):
    x, y, ws, bs = _data()
    step = make_jt_step([w.copy() for w in ws], [b.copy() for b in bs], backend)
    for _ in range(3):
        ref = numpy_step(x, y, ws, bs)
        got = float(step(jt.constant(x), jt.constant(y)))
        np.testing.assert_allclose(got, ref, rtol=1e-5)
