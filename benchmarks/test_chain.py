"""The chain workload: ``loss = reduce_sum(tanh(x*w + b) * sigmoid(x) + 0.5*(x - w)**2)``,
gradients w.r.t. ``w`` and ``b``, float32, N = 1M and 8M.

Each group times hand-written numpy (the reference), jittape on the ``interpret`` and
``cpu`` backends, and the *memory floor*: a copy that moves as many bytes as the
backward must (it reads x, w, tanh(.) and sigmoid(x) and writes two gradients), so
``backward / floor`` is the ratio to what the memory system allows, measured in the
same run. Compile time is kept out (a warm-up call compiles before timing).

Run: .venv/bin/python -m pytest benchmarks/test_chain.py -q --benchmark-group-by=group \
         --benchmark-columns=median,iqr,rounds
"""

from __future__ import annotations

import numpy as np
import pytest

import jittape as jt
from bench_util import settle

SIZES = {"1M": 1 << 20, "8M": 1 << 23}
ROUNDS = {"1M": 30, "8M": 10}


def _data(n):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    return x, w, b


def numpy_forward(x, w, b):
    t = np.tanh(x * w + b)
    s = 1 / (1 + np.exp(-x))
    d = x - w
    loss = np.sum(t * s + np.float32(0.5) * d * d)
    return loss, t, s


def numpy_backward(x, w, t, s):
    gb = s * (1 - t * t)
    gw = gb * x - (x - w)
    return gw, gb


def numpy_step(x, w, b):
    loss, t, s = numpy_forward(x, w, b)
    return loss, numpy_backward(x, w, t, s)


def jt_tape(x, w, b, backend):
    with jt.GradientTape(persistent=True, backend=backend) as tape:
        loss = jt.reduce_sum(jt.tanh(x * w + b) * jt.sigmoid(x) + 0.5 * (x - w) ** 2)
    return tape, loss


def jt_step(x, w, b, backend):
    with jt.GradientTape(backend=backend) as tape:
        loss = jt.reduce_sum(jt.tanh(x * w + b) * jt.sigmoid(x) + 0.5 * (x - w) ** 2)
    return loss, tape.gradient(loss, [w, b])


def _check(grads, n):
    x, w, b = _data(n)
    _, t, s = numpy_forward(x, w, b)
    gw, gb = numpy_backward(x, w, t, s)
    np.testing.assert_allclose(np.asarray(grads[0]), gw, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(grads[1]), gb, rtol=1e-4, atol=1e-4)


def _run(benchmark, fn, size):
    return benchmark.pedantic(fn, rounds=ROUNDS[size], iterations=1, warmup_rounds=2)


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("impl", ["numpy", "interpret", "cpu", "floor"])
def test_chain_backward(benchmark, impl, size):
    n = SIZES[size]
    benchmark.group = f"chain-backward-{size}"
    x, w, b = _data(n)
    if impl == "floor":
        src = np.ones(3 * n, np.float32)  # copy 3N: reads 3N, writes 3N = 6 arrays of N
        dst = np.empty_like(src)
        _run(benchmark, lambda: np.copyto(dst, src), size)
        return
    if impl == "numpy":
        _, t, s = numpy_forward(x, w, b)
        res = _run(benchmark, lambda: numpy_backward(x, w, t, s), size)
        _check(res, n)
        return
    xt, wv, bv = jt.constant(x), jt.Variable(w), jt.Variable(b)
    tape, loss = jt_tape(xt, wv, bv, impl)
    settle(lambda: tape.gradient(loss, [wv, bv]))
    res = _run(benchmark, lambda: tape.gradient(loss, [wv, bv]), size)
    _check(res, n)


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("impl", ["numpy", "interpret", "cpu"])
def test_chain_eager_step(benchmark, impl, size):
    n = SIZES[size]
    benchmark.group = f"chain-step-{size}"
    x, w, b = _data(n)
    if impl == "numpy":
        _, res = _run(benchmark, lambda: numpy_step(x, w, b), size)
        _check(res, n)
        return
    xt, wv, bv = jt.constant(x), jt.Variable(w), jt.Variable(b)
    settle(lambda: jt_step(xt, wv, bv, impl))
    _, res = _run(benchmark, lambda: jt_step(xt, wv, bv, impl), size)
    _check(res, n)
