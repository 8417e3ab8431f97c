"""Train steps of convolutional models, groups ``lenet`` and ``dcgan`` (``workloads.py``):
hand-written numpy (the reference), the eager jittape step on ``interpret`` and ``cpu``,
and the same step under ``@jt.function`` on ``cpu`` (one compiled call), per step, in
one run. Each jittape step's first call is checked against numpy's (the losses, and the
weights after that step) before it is timed. The floor is the step's GEMM FLOPs at the
GEMM rate measured in the same run (``floors.py``).

- ``lenet``: conv 5x5x32, max-pool, conv 5x5x64, max-pool, dense 128, dense 10, Adam;
  28x28x1, batch 64.
- ``dcgan``: a generator (dense, two conv2d_transpose 5x5 stride 2) and a discriminator
  (two conv 5x5 stride 2, dense), two tapes, two Adams; 28x28x1, batch 64.

Run: .venv/bin/python -m pytest benchmarks/test_conv_steps.py -q
     --benchmark-group-by=group --benchmark-columns=median,iqr,rounds
Compare ratios within one run; the machine is shared and noisy.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import jittape as jt
from bench_util import compile_seconds, record, settle
from floors import dcgan_floor, lenet_floor
from jittape.compiler.backends import blas
from workloads import (DCGANNumpy, LeNetNumpy, dcgan_data, dcgan_jittape, lenet_data,
                       lenet_jittape)

# model: (data, numpy step, jittape step, floor, description)
MODELS = {
    "lenet": (lenet_data, LeNetNumpy, lenet_jittape, lenet_floor,
              "LeNet 28x28x1 b64 Adam"),
    "dcgan": (dcgan_data, DCGANNumpy, dcgan_jittape, dcgan_floor,
              "DCGAN generator + discriminator 28x28x1 b64, 2 Adams"),
}


def check_first_step(model, got, variables):
    """The first step's losses and the weights after it against numpy's (rtol 1e-4,
    atol 1e-5, as peers.py and test_train_step.py)."""
    data, numpy_step = MODELS[model][:2]
    a, b, init = data()
    ref = numpy_step([p.copy() for p in init])
    want = ref(a, b)
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=1e-4)
    for i, (v, p) in enumerate(zip(variables, ref.params)):
        np.testing.assert_allclose(v.numpy(), p, rtol=1e-4, atol=1e-5, err_msg=f"weight {i}")


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("impl", ["numpy", "eager-interpret", "eager-cpu", "function-cpu"])
def test_step(benchmark, ceilings, model, impl):
    data, numpy_step, jittape_step, floor_of, what = MODELS[model]
    benchmark.group = model
    a, b, init = data()
    floor = floor_of(ceilings)
    if impl == "numpy":
        # numpy as a numpy user runs it: its BLAS on every core (jittape sets numpy's
        # BLAS to one thread when its cpu backend loads; see jittape/compiler/backends/blas.py)
        record(benchmark, impl, ceilings, floor, workload=what)
        blas.limit_threads(n=os.cpu_count() or 1, kernel_n=0)
        try:
            benchmark(numpy_step(init), a, b)
        finally:
            blas.limit_threads()
        return
    kind, backend = impl.split("-")
    step, variables = jittape_step(init, compiled=kind == "function", backend=backend)
    args = (jt.constant(a), jt.constant(b))
    out = step(*args)
    losses = [float(out)] if model == "lenet" else [float(o) for o in out]
    check_first_step(model, losses, variables)
    info = {}
    if kind == "function":
        step.wait()  # the compile in the background
        info["compile_s"] = compile_seconds(step)
    settle(lambda: step(*args))
    record(benchmark, impl, ceilings, floor, workload=what, **info)
    benchmark(step, *args)
