"""``kgemm.gemm``, the GEMM the cpu kernels call: ``out = a @ b + beta * out`` for
row- and column-major views, slices, empty sizes, both float dtypes; a layout BLAS
cannot read raises."""

import numba
import numpy as np
import pytest

from jittape.compiler.backends import kgemm as _kg


@numba.njit(cache=False)
def _gemm(a, b, out, beta):
    _kg.gemm(a, b, out, beta)


class kgemm:  # noqa: N801 - the intrinsic, called from compiled code as kernels do
    gemm = staticmethod(_gemm)


def _views(x):
    """The same matrix as a C array, an F array, and rows of a wider array."""
    big = np.zeros((x.shape[0], x.shape[1] + 3), x.dtype)
    big[:, 1:x.shape[1] + 1] = x
    return {"C": np.ascontiguousarray(x), "F": np.asfortranarray(x),
            "rows": big[:, 1:x.shape[1] + 1]}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m,k,n", [(5, 7, 3), (1, 4, 6), (6, 1, 1), (9, 16, 2)])
def test_every_layout_and_beta(dtype, m, k, n):
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    for la, av in _views(a).items():
        for lb, bv in _views(b).items():
            for lo in ("C", "rows"):
                for beta in (0.0, 1.0, 0.5):
                    out = _views(c0.copy())[lo]
                    kgemm.gemm(av, bv, out, beta)
                    want = a.astype(np.float64) @ b + beta * c0
                    np.testing.assert_allclose(out, want, rtol=rtol, atol=rtol * 10,
                                               err_msg=f"{la} @ {lb} -> {lo}, beta {beta}")


def test_beta_zero_ignores_nan_in_out():
    a, b = np.ones((3, 2), np.float32), np.ones((2, 4), np.float32)
    out = np.full((3, 4), np.nan, np.float32)
    kgemm.gemm(a, b, out, 0.0)
    assert np.array_equal(out, np.full((3, 4), 2, np.float32))


def test_empty_contraction_and_empty_output():
    out = np.full((3, 4), 7, np.float32)
    kgemm.gemm(np.ones((3, 0), np.float32), np.ones((0, 4), np.float32), out, 0.0)
    assert np.array_equal(out, np.zeros((3, 4), np.float32))
    kgemm.gemm(np.ones((0, 2), np.float32), np.ones((2, 4), np.float32),
               np.ones((0, 4), np.float32), 0.0)


def test_row_slices_and_transposed_slices_as_the_kernels_pass_them():
    rng = np.random.default_rng(1)
    pat = rng.standard_normal((12, 5)).astype(np.float32)
    dy = rng.standard_normal((12, 3)).astype(np.float32)
    dw = np.empty((5, 3), np.float32)
    kgemm.gemm(pat[:6].T, dy[:6], dw, 0.0)  # the first batch tile writes
    kgemm.gemm(pat[6:].T, dy[6:], dw, 1.0)  # the next adds
    np.testing.assert_allclose(dw, pat.T @ dy, rtol=1e-5, atol=1e-6)


def test_mismatched_shapes_and_unreadable_layouts_raise():
    one = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="shapes do not match"):
        kgemm.gemm(np.ones((3, 2), np.float32), one, one.copy(), 0.0)
    strided = np.ones((6, 8), np.float32)[::2, ::2]
    with pytest.raises(ValueError, match="no unit stride"):
        kgemm.gemm(strided, np.ones((4, 4), np.float32), one.copy(), 0.0)
    with pytest.raises(ValueError, match="rows are not contiguous"):
        kgemm.gemm(np.ones((3, 3), np.float32), one, np.asfortranarray(one), 0.0)
