"""The convolutional train steps of the benchmarks (benchmarks/workloads.py: LeNet and
the DCGAN) in jittape against their hand-written numpy, eager and under ``@jt.function``
on the reference backend (benchmarks/test_conv_steps.py checks the cpu backend's first
step before timing it): the losses of two steps and the weights after them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import jittape as jt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import workloads as W  # noqa: E402

MODELS = {"lenet": (W.lenet_data, W.LeNetNumpy, W.lenet_jittape),
          "dcgan": (W.dcgan_data, W.DCGANNumpy, W.dcgan_jittape)}


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "function"])
@pytest.mark.parametrize("model", list(MODELS))
def test_step_agrees_with_numpy(model, compiled):
    data, numpy_step, jittape_step = MODELS[model]
    a, b, init = data()
    ref = numpy_step([p.copy() for p in init])
    step, variables = jittape_step(init, compiled=compiled, backend="interpret")
    args = (jt.constant(a), jt.constant(b))
    for _ in range(2):
        want = np.atleast_1d(np.asarray(ref(a, b), np.float64))
        got = np.atleast_1d(np.asarray([float(o) for o in jt.nest.flatten(step(*args))]))
        np.testing.assert_allclose(got, want, rtol=1e-4)
    for i, (v, p) in enumerate(zip(variables, ref.params)):
        np.testing.assert_allclose(v.numpy(), p, rtol=1e-4, atol=1e-5, err_msg=f"weight {i}")
