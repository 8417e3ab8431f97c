"""Pooling (``jt.nn.max_pool``, ``avg_pool``, ``pool``): TF's rules pinned by values that
TF 2.21 (tensorflow-cpu) gave for the same inputs, eagerly and (one small graph) compiled
on the cpu backend; the catalogue (``tests/ops/cases_pool.py``) checks the values and
derivatives on random inputs, ``test_vs_tensorflow_pooling.py`` against TF itself."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jittape as jt
from jittape.ops import pooling as P

F32_LOWEST = np.finfo(np.float32).min


def _grad(fn, x):
    t = jt.constant(np.asarray(x, np.float32))
    with jt.GradientTape() as tape:
        tape.watch(t)
        y = fn(t)
    return y.numpy(), tape.gradient(y, t).numpy()


def _w(values):
    """A [1, W, 1] input."""
    return np.asarray(values, np.float32).reshape(1, -1, 1)


def test_tied_maxima_route_the_gradient_to_the_first():
    # TF 2.21: tf.nn.max_pool2d(x, 2, 2, "VALID") and its gradient
    x = np.array([[1, 3, 3, 0], [3, 2, 1, 3]], np.float32).reshape(1, 2, 4, 1)
    y, dx = _grad(lambda t: jt.nn.max_pool2d(t, 2, 2, "VALID"), x)
    np.testing.assert_array_equal(y.ravel(), [3, 3])
    np.testing.assert_array_equal(dx[0, :, :, 0], [[0, 1, 1, 0], [0, 0, 0, 0]])
    # TF 2.21: overlapping 2x2 windows (stride 1) of ones: each to its window's first
    _, dx = _grad(lambda t: jt.nn.max_pool2d(t, 2, 1, "VALID"), np.ones((1, 3, 3, 1)))
    np.testing.assert_array_equal(dx[0, :, :, 0], [[1, 1, 0], [1, 1, 0], [0, 0, 0]])


def test_nan_is_skipped_and_a_first_nan_keeps_the_gradient():
    # TF 2.21, max_pool1d(x, 2, 2, "VALID"): NaN never wins the forward; the gradient
    # goes to a NaN at a window's first position (nothing is greater than it)
    y, dx = _grad(lambda t: jt.nn.max_pool1d(t, 2, 2, "VALID"),
                  _w([1, np.nan, 3, 2, 5, np.nan, -1, 0]))
    np.testing.assert_array_equal(y.ravel(), [1, 3, 5, 0])
    np.testing.assert_array_equal(dx.ravel(), [1, 0, 1, 0, 1, 0, 0, 1])
    y, dx = _grad(lambda t: jt.nn.max_pool1d(t, 2, 2, "VALID"), _w([np.nan, 1, 3, np.nan]))
    np.testing.assert_array_equal(y.ravel(), [1, 3])
    np.testing.assert_array_equal(dx.ravel(), [1, 0, 1, 0])
    # TF 2.21, stride 1: ties and a NaN: dx [1, 0, 2, 0]
    _, dx = _grad(lambda t: jt.nn.max_pool1d(t, 2, 1, "VALID"), _w([np.nan, 1, 2, 2]))
    np.testing.assert_array_equal(dx.ravel(), [1, 0, 2, 0])


def test_a_window_of_nan_or_minus_inf_gives_the_lowest_finite_value():
    # TF 2.21: its max reduction starts at the dtype's lowest finite value
    y = jt.nn.max_pool1d(_w([np.nan, np.nan, -np.inf, -np.inf]), 2, 2, "VALID").numpy()
    np.testing.assert_array_equal(y.ravel(), [F32_LOWEST, F32_LOWEST])
    y = jt.nn.max_pool1d(_w([np.nan, np.nan]).astype(np.float64), 2, 2, "VALID").numpy()
    assert y.ravel()[0] == np.finfo(np.float64).min


def test_same_padding_never_wins_and_is_not_averaged():
    # TF 2.21: 2x2 windows, stride 2, SAME, of 1..9 in a 3x3 image
    x = np.arange(1, 10, dtype=np.float32).reshape(1, 3, 3, 1)
    np.testing.assert_array_equal(jt.nn.avg_pool2d(x, 2, 2, "SAME").numpy()[0, :, :, 0],
                                  [[3, 4.5], [7.5, 9]])
    np.testing.assert_array_equal(jt.nn.max_pool2d(-x, 2, 2, "SAME").numpy()[0, :, :, 0],
                                  [[-1, -3], [-7, -9]])
    # TF 2.21: explicit pads (top and left 1) on max_pool
    got = jt.nn.max_pool2d(x, 2, 2, [[0, 0], [1, 0], [1, 0], [0, 0]]).numpy()[0, :, :, 0]
    np.testing.assert_array_equal(got, [[1, 3], [7, 9]])


def test_dilated_windows():
    # TF 2.21: tf.nn.pool(x, [2, 2], type, padding="VALID", dilations=[2, 2]) of 1..25
    x = np.arange(1, 26, dtype=np.float32).reshape(1, 5, 5, 1)
    got = jt.nn.pool(x, [2, 2], "MAX", padding="VALID", dilations=[2, 2]).numpy()[0, :, :, 0]
    np.testing.assert_array_equal(got, [[13, 14, 15], [18, 19, 20], [23, 24, 25]])
    got = jt.nn.pool(x, [2, 2], "AVG", padding="VALID", dilations=[2, 2]).numpy()[0, :, :, 0]
    np.testing.assert_array_equal(got, [[7, 8, 9], [12, 13, 14], [17, 18, 19]])


def test_a_window_larger_than_the_input_gives_an_empty_result():
    # TF 2.21: no error, an output with no positions
    assert jt.nn.max_pool2d(np.ones((1, 2, 2, 1), np.float32), 3, 1, "VALID").shape == [1, 0, 0, 1]
    assert jt.nn.avg_pool2d(np.ones((1, 2, 2, 1), np.float32), 3, 1, "VALID").shape == [1, 0, 0, 1]


def test_channels_first_is_a_transpose_around_channels_last():
    x = np.random.default_rng(0).normal(size=(2, 3, 5, 4)).astype(np.float32)
    got = jt.nn.max_pool(x, 2, 2, "SAME", data_format="NCHW").numpy()
    want = jt.nn.max_pool(np.transpose(x, (0, 2, 3, 1)), 2, 2, "SAME").numpy()
    np.testing.assert_array_equal(got, np.transpose(want, (0, 3, 1, 2)))


@pytest.mark.parametrize("call, message", [
    # TF 2.21's messages (MaxPool: "Left padding 2 needs to be smaller than the window
    # size 2"; tf.nn.pool's ValueErrors), prefixed with the function called
    (lambda x: jt.nn.max_pool1d(x, 2, 1, [[0, 0], [2, 0], [0, 0]]),
     "max_pool1d: Left padding 2 needs to be smaller than the window size 2"),
    (lambda x: jt.nn.max_pool1d(x, 2, 1, [[0, 0], [0, 2], [0, 0]]),
     "max_pool1d: Right padding 2 needs to be smaller than the window size 2"),
    (lambda x: jt.nn.avg_pool1d(x, 2, 1, [[0, 0], [1, 0], [0, 0]]),
     "avg_pool1d: padding must be 'SAME' or 'VALID'"),
    (lambda x: jt.nn.pool(x, [2], "MAX", padding="SAME", dilations=[2]),
     "pool: pooling with 'SAME' padding is not implemented for dilations > 1"),
    (lambda x: jt.nn.pool(x, [2], "AVG", strides=[2], dilations=[2]),
     "pool: strides > 1 are not supported in conjunction with dilations > 1"),
    (lambda x: jt.nn.pool(x, [2], "MIN"), "pool: 1-D MIN pooling is not supported"),
    (lambda x: jt.nn.max_pool2d(x, 2, 1, "VALID"),
     "max_pool2d: input must be rank 4 (batch, spatial dimensions, channels), got shape "
     "[1,4,1]"),
    (lambda x: jt.nn.avg_pool1d(jt.cast(x, "int32"), 2, 1, "VALID"),
     "avg_pool1d: avg_pool: avg_pool needs a float input"),
    (lambda x: jt.nn.max_pool1d(x, 2, 1, "VALID", data_format="NCHWX"),
     "max_pool1d: data_format must be 'NWC' or 'NCW'"),
])
def test_bad_arguments_raise_naming_the_function(call, message):
    with pytest.raises(jt.errors.InvalidArgumentError) as e:
        call(_w([1, 2, 3, 4]))
    assert message in str(e.value)


def test_a_gradient_of_the_wrong_shape_names_the_op_and_the_shapes():
    with pytest.raises(jt.errors.InvalidArgumentError) as e:
        P.max_pool_grad(_w([1, 2, 3, 4]), _w([1, 2, 3]), (2,), (2,), ((0, 0),))
    assert str(e.value).startswith("max_pool_grad: the output gradient must have shape "
                                   "[1,2,1], got [1,3,1]")


def test_second_derivatives_through_the_max_pool_gradient():
    """d/dx <max_pool_grad(x, dy), w> is None (dx is locally constant in x; TF 2.21 gives
    zeros), and the gradient in dy is max_pool_grad_grad(x, w): w read at each window's
    maximum (TF 2.21: [10, 30, 40, 40])."""
    x = jt.constant(_w([4, 1, 2, 5, 3]))
    dy = jt.constant(_w([1, 1, 1, 1]))
    w = jt.constant(_w([10, 20, 30, 40, 50]))
    with jt.GradientTape() as tape:
        tape.watch([x, dy])
        dx = P.max_pool_grad(x, dy, (2,), (1,), ((0, 0),))
        s = jt.reduce_sum(dx * w)
    gx, gdy = tape.gradient(s, [x, dy])
    assert gx is None
    np.testing.assert_array_equal(gdy.numpy().ravel(), [10, 30, 40, 40])


def test_compiled_on_cpu_as_eager():
    """One small graph on the cpu backend: NaN, ties and SAME's padding give TF's values
    (as above) in the compiled kernels too."""
    from jittape.compiler.backends import cpu

    x = _w([np.nan, 1, 2, 2, np.nan, -3])

    def f(t):
        with jt.GradientTape() as tape:
            tape.watch(t)
            y = jt.nn.max_pool1d(t, 3, 2, "SAME")
            z = jt.nn.avg_pool1d(t, 3, 2, "SAME")
        return y, z, tape.gradient([y, z], t)

    with warnings.catch_warnings():
        warnings.simplefilter("error", cpu.CompileWarning)
        fn = jt.function(f, backend="cpu")
        got = [a.numpy().ravel() for a in fn(jt.constant(x))]
    # TF 2.21: windows [nan, 1, 2], [2, 2, nan], [nan, -3, pad]; a NaN first keeps the
    # gradient; every average has a NaN
    np.testing.assert_array_equal(got[0], [2, 2, -3])
    assert np.isnan(got[1]).all()
    np.testing.assert_allclose(got[2], [4 / 3, 1 / 3, 5 / 3, 1 / 3, 11 / 6, 0.5], rtol=1e-6)
    for a, b in zip(got, f(jt.constant(x))):
        np.testing.assert_array_equal(a, b.numpy().ravel())
    prog = fn.get_concrete_function(jt.constant(x)).program
    assert prog is not None and prog.fallback is None and prog.ready
