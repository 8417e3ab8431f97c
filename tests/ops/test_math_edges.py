"""The math, linalg and image ops at their edges: bad input gets a clear error naming the
op and the shapes; integer images, l2_normalize of zeros; a singular matrix in a compiled
step raises and keeps the step compiled."""

from __future__ import annotations

import numpy as np
import pytest

import jittape as jt
from jittape.errors import InvalidArgumentError


def test_inverse_of_a_non_square_matrix():
    with pytest.raises(InvalidArgumentError, match=r"matrix_inverse: .*square.*\[2,3\]"):
        jt.linalg.inv(jt.zeros([2, 3]))
    with pytest.raises(InvalidArgumentError, match=r"matrix_determinant: .*square"):
        jt.linalg.det(jt.zeros([4, 3, 2]))
    with pytest.raises(InvalidArgumentError, match=r"cholesky: .*rank >= 2.*\[3\]"):
        jt.linalg.cholesky(jt.zeros([3]))


def test_singular_and_not_positive_definite():
    with pytest.raises(InvalidArgumentError, match="matrix_inverse: Input is not invertible"):
        jt.linalg.inv(jt.zeros([2, 2]))
    with pytest.raises(InvalidArgumentError, match="cholesky: Cholesky decomposition was not"):
        jt.linalg.cholesky(jt.constant([[1.0, 2.0], [2.0, 1.0]]))


def test_solve_with_a_mismatched_rhs():
    a = jt.constant(np.eye(3, dtype=np.float32))
    with pytest.raises(InvalidArgumentError,
                       match=r"matrix_solve: .*incompatible.*matrix \[3,3\] and rhs \[2,1\]"):
        jt.linalg.solve(a, jt.ones([2, 1]))
    with pytest.raises(InvalidArgumentError, match=r"matrix_solve: .*same batch dims"):
        jt.linalg.solve(jt.zeros([2, 3, 3]), jt.ones([3, 1]))
    with pytest.raises(InvalidArgumentError, match="matrix_solve: .*integer|float32 or float64"):
        jt.linalg.solve(jt.constant(np.eye(2, dtype=np.int32)), jt.constant([[1], [2]]))


def test_resize_of_a_2d_tensor_and_bad_sizes():
    with pytest.raises(InvalidArgumentError, match=r"resize: .*3 or 4 dimensions.*\[4, 5\]"):
        jt.image.resize(jt.zeros([4, 5]), [2, 2])
    with pytest.raises(InvalidArgumentError, match="resize: 'size' must be .* 2 elements"):
        jt.image.resize(jt.zeros([1, 4, 5, 1]), [2, 2, 3])
    with pytest.raises(InvalidArgumentError, match="resize: output dimensions must be positive"):
        jt.image.resize(jt.zeros([1, 4, 5, 1]), [0, 2])
    with pytest.raises(InvalidArgumentError, match="resize: Resize method is not implemented"):
        jt.image.resize(jt.zeros([1, 4, 5, 1]), [2, 2], method="foo")
    # bicubic is implemented now (its values: tests/test_image.py)
    assert jt.image.resize(jt.zeros([1, 4, 5, 1]), [2, 2], method="bicubic").shape == [1, 2, 2, 1]


def test_rsqrt_and_erf_need_floats():
    with pytest.raises(InvalidArgumentError, match="rsqrt: .*float"):
        jt.math.rsqrt(jt.constant([4]))
    with pytest.raises(InvalidArgumentError, match="erf: .*float"):
        jt.math.erf(jt.constant([1]))


def test_l2_normalize_of_zeros_is_zeros():
    y = jt.nn.l2_normalize(jt.zeros([2, 3]), axis=1)
    np.testing.assert_array_equal(y.numpy(), np.zeros((2, 3), np.float32))


def test_resize_integer_images():
    from .cases_math import _np_bilinear, _np_nearest

    x = np.arange(24).reshape(1, 2, 3, 4).astype(np.int32)
    y = jt.image.resize(jt.constant(x), (4, 3), "nearest")
    assert y.dtype == jt.int32
    np.testing.assert_array_equal(y.numpy(), _np_nearest((4, 3))(x))
    u = np.arange(24).reshape(2, 3, 4).astype(np.uint8)
    z = jt.image.resize(jt.constant(u), (3, 5))
    assert z.dtype == jt.float32
    np.testing.assert_allclose(z.numpy(), _np_bilinear((3, 5))(u), rtol=1e-6)


@pytest.mark.filterwarnings("error::jittape.compiler.backends.cpu.CompileWarning")
def test_singular_matrix_in_a_compiled_step():
    f = jt.function(lambda a, b: (jt.linalg.inv(a), jt.linalg.solve(a, b)), backend="cpu")
    b = np.ones((2, 2, 1))
    good = np.stack([np.eye(2) * 2, np.eye(2)])
    inv, x = f(good, b)
    np.testing.assert_allclose(inv.numpy(), np.linalg.inv(good))
    with pytest.raises(InvalidArgumentError, match="matrix_inverse: Input is not invertible"):
        f(np.stack([np.eye(2), np.zeros((2, 2))]), b)
    prog = f.get_concrete_function(good, b).program
    assert prog is not None and prog.fallback is None  # still compiled
    np.testing.assert_allclose(f(good, b)[1].numpy(), np.linalg.solve(good, b))
