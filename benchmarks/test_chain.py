"""The chain workload: ``loss = reduce_sum(tanh(x*w + b) * sigmoid(x) + 0.5*(x - w)**2)``,
gradients w.r.t. ``w`` and ``b``, float32, N = 1M and 8M (``workloads.py``).

Groups:
- ``chain-<N>``: a training loop's step, forward and backward: hand-written numpy (the
  reference), the eager tape on ``interpret`` and on ``cpu``, and ``@jt.function`` on
  ``cpu`` (one compiled call);
- ``chain-backward-<N>``: only ``tape.gradient`` of a recorded (persistent) tape, the
  part that the cpu backend compiles in eager code.

The floor (``floors.py``) is the time the bytes that must move take at the bandwidth of
a large copy measured in the same run. Compile time is kept out: the step is settled
(compiled, its parallel variant chosen) before timing, and its compile time is kept in
``extra_info["compile_s"]``.
"""

from __future__ import annotations

import numpy as np
import pytest

import jittape as jt
from bench_util import ready, record, settle
from floors import chain_backward_floor, chain_step_floor
from workloads import CHAIN_SIZES, chain_data, chain_jittape, chain_numpy

ROUNDS = {"1M": 30, "8M": 10}
IMPLS = ["numpy", "eager-interpret", "eager-cpu", "function-cpu"]


def _check(loss, gw, gb, ref):
    np.testing.assert_allclose(float(np.asarray(loss)), float(ref[0]), rtol=1e-3)
    np.testing.assert_allclose(np.asarray(gw), ref[1], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(gb), ref[2], rtol=1e-4, atol=1e-4)


def _run(benchmark, fn, size):
    return benchmark.pedantic(fn, rounds=ROUNDS[size], iterations=1, warmup_rounds=2)


@pytest.mark.parametrize("size", list(CHAIN_SIZES))
@pytest.mark.parametrize("impl", IMPLS)
def test_chain(benchmark, ceilings, impl, size):
    n = CHAIN_SIZES[size]
    benchmark.group = f"chain-{size}"
    x, w, b = chain_data(n)
    ref = chain_numpy(x, w, b)
    floor = chain_step_floor(ceilings, n)
    if impl == "numpy":
        record(benchmark, impl, ceilings, floor)
        _check(*_run(benchmark, lambda: chain_numpy(x, w, b), size), ref)
        return
    kind, backend = impl.split("-")
    step = chain_jittape(x, w, b, compiled=kind == "function", backend=backend)
    record(benchmark, impl, ceilings, floor, **ready(step))
    _check(*_run(benchmark, step, size), ref)


@pytest.mark.parametrize("size", list(CHAIN_SIZES))
@pytest.mark.parametrize("impl", ["numpy", "eager-interpret", "eager-cpu"])
def test_chain_backward(benchmark, ceilings, impl, size):
    n = CHAIN_SIZES[size]
    benchmark.group = f"chain-backward-{size}"
    x, w, b = chain_data(n)
    ref = chain_numpy(x, w, b)
    record(benchmark, impl, ceilings, chain_backward_floor(ceilings, n))
    if impl == "numpy":
        t = np.tanh(x * w + b)
        s = 1 / (1 + np.exp(-x))

        def grads():
            gb = s * (1 - t * t)
            return gb * x - (x - w), gb

        gw, gb = _run(benchmark, grads, size)
        _check(ref[0], gw, gb, ref)
        return
    backend = impl.split("-")[1]
    xt, wv, bv = jt.constant(x), jt.Variable(w), jt.Variable(b)
    with jt.GradientTape(persistent=True, backend=backend) as tape:
        loss = jt.reduce_sum(jt.tanh(xt * wv + bv) * jt.sigmoid(xt) + 0.5 * (xt - wv) ** 2)
    settle(lambda: tape.gradient(loss, [wv, bv]))
    gw, gb = _run(benchmark, lambda: tape.gradient(loss, [wv, bv]), size)
    _check(loss.numpy(), gw, gb, ref)
