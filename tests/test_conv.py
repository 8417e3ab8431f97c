"""Convolution on the cpu backend beyond the catalogue: the epilogue fused into the
convolution's kernel (both formulations), the packed-GEMM path over several batch
tiles, non-contiguous (NCHW) operands, which formulation each shape gets, and the
errors a user sees. Each compiled check runs the same step on ``interpret``."""

from __future__ import annotations

import numpy as np
import pytest

import jittape as jt
from jittape.compiler.backends import schedule_window
from jittape.errors import InvalidArgumentError

from cpu_cases import assert_same


def _step(w, b, strides, padding, data_format="NHWC"):
    def step(x):
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = jt.nn.conv2d(x, w, strides, padding, data_format=data_format)
            if data_format == "NCHW":
                y = jt.transpose(y, [0, 2, 3, 1])
            y = jt.nn.relu(y + b)
            loss = jt.reduce_sum(y * y)
        return (y, *tape.gradient(loss, [x, w, b]))
    return step


def _kernels(fn, *args) -> list:
    return [ln for ln in str(fn.explain(*args)).splitlines() if ln.startswith("k")]


def _compare(step, x, expect_fused):
    want = [np.asarray(v) for v in step(x)]
    fn = jt.function(step, backend="cpu")
    fn(x)
    assert fn.wait()
    got = [np.asarray(v) for v in fn(x)]
    for k, (a, b) in enumerate(zip(got, want)):
        assert_same(a, b, f"output {k}")
    ks = _kernels(fn, x)
    assert any(expect_fused in k and ", then add, relu" in k for k in ks), ks
    return ks


@pytest.mark.parametrize("cfg", [
    # (x shape, filter shape, strides, padding, data_format, formulation)
    ((2, 7, 6, 8), (3, 3, 8, 4), 2, "SAME", "NHWC", "packed GEMM"),
    ((2, 6, 6, 4), (3, 3, 2, 4), 1, "SAME", "NHWC", "direct"),  # two groups
])
def test_epilogue_runs_in_the_convolution_kernel(cfg):
    xs, ws, s, pad, fmt, how = cfg
    rng = np.random.default_rng(0)
    w = jt.Variable(rng.standard_normal(ws).astype(np.float32))
    b = jt.Variable(rng.standard_normal(ws[-1]).astype(np.float32))
    x = jt.constant(rng.standard_normal(xs).astype(np.float32))
    _compare(_step(w, b, s, pad, fmt), x, f"({how})")


def test_epilogue_with_three_operands_compiles():
    """A sigmoid Conv2D under a mean squared error (the last layer of TF's denoising
    autoencoder): the epilogue loads three operands, ``y0``..``y2``, and the third was
    shadowed by the kernel's own ``y2`` (the output's matrix view), a Numba typing error
    that sent the whole step to ``interpret``."""
    import warnings

    from jittape.compiler.backends.runtime import CompileWarning

    rng = np.random.default_rng(2)
    w = jt.Variable(rng.standard_normal((3, 3, 4, 1)).astype(np.float32))
    b = jt.Variable(np.zeros(1, np.float32))
    x = jt.constant(rng.standard_normal((2, 6, 6, 4)).astype(np.float32))
    t = jt.constant(rng.random((2, 6, 6, 1)).astype(np.float32))

    def step(x, t):
        with jt.GradientTape() as tape:
            y = jt.sigmoid(jt.nn.conv2d(x, w, 1, "SAME") + b)
            loss = jt.reduce_mean(jt.square(y - t))
        return (loss, *tape.gradient(loss, [w, b]))

    want = [np.asarray(v) for v in step(x, t)]
    fn = jt.function(step, backend="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        fn(x, t)
        assert fn.wait()
        got = [np.asarray(v) for v in fn(x, t)]
    for k, (a, b_) in enumerate(zip(got, want)):
        assert_same(a, b_, f"output {k}")
    ks = _kernels(fn, x, t)
    assert any("(packed GEMM), then add, sigmoid, subtract, square" in k for k in ks), ks


def test_packed_gemm_over_several_batch_tiles(monkeypatch):
    """Tiles of one image (the buffer limit below one image's windows): the forward
    GEMM per tile, the filter gradient adding each tile's product after the first."""
    monkeypatch.setattr(schedule_window, "PATCH_ELEMS", 1)
    rng = np.random.default_rng(1)
    w = jt.Variable(rng.standard_normal((2, 3, 6, 3)).astype(np.float32))
    b = jt.Variable(np.zeros(3, np.float32))
    x = jt.constant(rng.standard_normal((3, 5, 6, 6)).astype(np.float32))
    ks = _compare(_step(w, b, 1, "SAME", "NHWC"), x, "(packed GEMM)")
    assert any("conv_backprop_filter" in k and "packed GEMM" in k for k in ks)


def test_formulation_per_shape():
    def geo(xs, ws, groups=1):
        ns = len(xs) - 2
        attrs = dict(strides=(1,) * ns, dilations=(1,) * ns, pads=((0, 0),) * ns,
                     groups=groups)
        ys = (xs[0], *(n - k + 1 for n, k in zip(xs[1:-1], ws)), ws[-1])
        return schedule_window._Geo(attrs, xs, ws, ys).formulation()

    assert geo((64, 28, 28, 1), (5, 5, 1, 32)) == "gemm"  # LeNet conv1: 25 taps
    assert geo((64, 12, 12, 32), (5, 5, 32, 64)) == "gemm"  # LeNet conv2: 800
    assert geo((8, 20, 2), (3, 2, 4)) == "direct"  # 6 taps x channels
    assert geo((8, 10, 10, 16), (3, 3, 1, 16), groups=16) == "direct"  # depthwise
    assert geo((8, 10, 10, 16), (3, 3, 8, 16), groups=2) == "direct"


def test_errors_name_the_function_and_shapes():
    x = jt.zeros([1, 5, 5, 3])
    with pytest.raises(InvalidArgumentError, match=r"conv2d: input depth must be evenly "
                                                   r"divisible by filter depth: 3 vs 2"):
        jt.nn.conv2d(x, jt.zeros([3, 3, 2, 4]), 1, "SAME")
    with pytest.raises(InvalidArgumentError, match=r"conv2d: input must be 4-dimensional"):
        jt.nn.conv2d(jt.zeros([5, 5, 3]), jt.zeros([3, 3, 3, 4]), 1, "SAME")
    with pytest.raises(InvalidArgumentError, match=r"conv2d_transpose: .*channels"):
        jt.nn.conv2d_transpose(x, jt.zeros([3, 3, 2, 4]), [1, 5, 5, 2], 1, "SAME")
    # a window larger than the padded input: an empty result, as TF gives
    y = jt.nn.conv2d(jt.zeros([1, 2, 2, 3]), jt.zeros([3, 3, 3, 4]), 1, "VALID")
    assert y.shape == [1, 0, 0, 4]
