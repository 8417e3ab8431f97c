"""Softmax cross-entropy, forward and backward: ``mean(sparse softmax cross-entropy)``
over 256 x 1000 float32 logits and its gradient w.r.t. the logits (``workloads.py``).

One group, ``softmax-ce-256x1000``: hand-written numpy (the reference), the eager tape on
``interpret`` and ``cpu``, and ``@jt.function`` on ``cpu``. Floor: reading the logits and
writing their gradient at the bandwidth of a large copy (``floors.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

from bench_util import ready, record
from floors import softmax_ce_floor
from workloads import SOFTMAX_CE, softmax_ce_data, softmax_ce_jittape, softmax_ce_numpy


@pytest.mark.parametrize("impl", ["numpy", "eager-interpret", "eager-cpu", "function-cpu"])
def test_softmax_ce(benchmark, ceilings, impl):
    batch, classes = SOFTMAX_CE["batch"], SOFTMAX_CE["classes"]
    benchmark.group = f"softmax-ce-{batch}x{classes}"
    logits, labels = softmax_ce_data()
    want_loss, want_grad = softmax_ce_numpy(logits, labels)
    floor = softmax_ce_floor(ceilings, batch, classes)
    if impl == "numpy":
        record(benchmark, impl, ceilings, floor)
        loss, grad = benchmark(softmax_ce_numpy, logits, labels)
    else:
        kind, backend = impl.split("-")
        step = softmax_ce_jittape(logits, labels, compiled=kind == "function", backend=backend)
        record(benchmark, impl, ceilings, floor, **ready(step))
        loss, grad = benchmark(step)
    np.testing.assert_allclose(float(np.asarray(loss)), float(want_loss), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(grad), want_grad, rtol=1e-4, atol=1e-7)
