"""The ops of tensor creation, shaping, scans, sorting and einsum against TensorFlow
itself, run only where TensorFlow is installed; the default suite does not need it.

Each program is written once against the shared names (``m`` is ``tensorflow`` or
``jittape``): values and dtypes must agree, and for the differentiable ones the
gradient of ``sum(y * w)`` for a fixed random ``w`` too."""

import numpy as np
import pytest

import jittape as jt

tf = pytest.importorskip("tensorflow")

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((4, 2))
V = RNG.standard_normal(5)
P = RNG.uniform(0.5, 1.5, (3, 4)) * RNG.choice([-1.0, 1.0], (3, 4))  # no zeros
D = (RNG.permutation(12).reshape(3, 4) - 6) * 0.5 + RNG.uniform(-0.1, 0.1, (3, 4))  # distinct
Q = RNG.standard_normal((2, 2, 3, 4))
K = RNG.standard_normal((2, 2, 5, 4))
Z = np.array([[1.5, 0.0, 2.0], [0.5, -1.0, 3.0]])  # a zero: reduce_prod's rule is exact there

# name -> (f(m, *tensors) -> a tensor or a list of them, float inputs)
DIFFERENTIABLE = {
    "linspace": (lambda m, a, b: m.linspace(a, b, 5, axis=1), (V, V + 1.0)),
    "meshgrid_xy": (lambda m, x, y: m.meshgrid(x, y), (V, A[0])),
    "meshgrid_ij": (lambda m, x, y: m.meshgrid(x, y, indexing="ij"), (V, A[0])),
    "tile": (lambda m, a: m.tile(a, [2, 3]), (A,)),
    "repeat_flat": (lambda m, a: m.repeat(a, 2), (A,)),
    "repeat_counts": (lambda m, a: m.repeat(a, [1, 0, 2, 3], axis=1), (A,)),
    "pad_constant": (lambda m, a: m.pad(a, [[1, 2], [0, 1]], constant_values=0.5), (A,)),
    "pad_reflect": (lambda m, a: m.pad(a, [[2, 1], [3, 2]], "REFLECT"), (A,)),
    "pad_symmetric": (lambda m, a: m.pad(a, [[3, 0], [1, 4]], "SYMMETRIC"), (A,)),
    "add_n": (lambda m, a, b: m.add_n([a, b, a * b]), (A, P)),
    "reduce_prod": (lambda m, p: m.reduce_prod(p, axis=1), (P,)),
    "reduce_prod_keepdims": (lambda m, p: m.reduce_prod(p, [0], keepdims=True), (P,)),
    "reduce_prod_zero": (lambda m, z: m.reduce_prod(z), (Z,)),
    "cumsum": (lambda m, a: m.cumsum(a, axis=1, exclusive=True), (A,)),
    "cumsum_reverse": (lambda m, a: m.math.cumsum(a, reverse=True), (A,)),
    "cumprod": (lambda m, p: m.math.cumprod(p, axis=1), (P,)),
    "cumprod_excl_rev": (lambda m, p: m.math.cumprod(p, 0, exclusive=True, reverse=True), (P,)),
    "sort": (lambda m, d: m.sort(d), (D,)),
    "sort_desc_axis0": (lambda m, d: m.sort(d, axis=0, direction="DESCENDING"), (D,)),
    "top_k_values": (lambda m, d: m.math.top_k(d, 2).values, (D,)),
    "einsum_matmul": (lambda m, a, b: m.einsum("ij,jk->ik", a, b), (A, B)),
    "einsum_transpose": (lambda m, a: m.einsum("ij->ji", a), (A,)),
    "einsum_diag": (lambda m, a: m.einsum("ii->i", a[:, :3]), (A,)),
    "einsum_dot": (lambda m, v: m.einsum("i,i->", v, v), (V,)),
    "einsum_outer": (lambda m, v, a: m.einsum("i,j->ij", v, a[0]), (V, A)),
    "einsum_attention": (lambda m, q, k: m.einsum("bhqd,bhkd->bhqk", q, k), (Q, K)),
    "einsum_ellipsis": (lambda m, q, k: m.einsum("...ij,...kj->...ik", q, k), (Q, K)),
    "einsum_batched": (lambda m, q, k: m.einsum("bij,bkj->bik", q[0], k[0]), (Q, K)),
    "newaxis": (lambda m, a: a[:, m.newaxis, 1:] * a[None, 0, :, m.newaxis], (A,)),
}

# name -> f(m) (no inputs) or (f(m, *tensors), inputs): values and dtypes only
VALUES = {
    "range_int": lambda m: m.range(5),
    "range_start_delta": lambda m: m.range(2, 11, 3),
    "range_negative": lambda m: m.range(5, 1, -2),
    "range_float": lambda m: m.range(1.0, 2.0, 0.25),
    "range_mixed": lambda m: m.range(1, 4, 0.5),
    "range_dtype": lambda m: m.range(4, dtype=m.float64),
    "linspace_ints": lambda m: m.linspace(0, 10, 5),
    "linspace_floats": lambda m: m.linspace(0.0, 1.0, 4),
    "eye": lambda m: m.eye(2, 3),
    "eye_batch_int": lambda m: m.eye(2, batch_shape=[2], dtype=m.int32),
    "zeros_int": lambda m: m.zeros(3, m.int64),
    "ones_tensor_shape": lambda m: m.ones(m.constant([2, 3]), dtype=m.int32),
    "fill": lambda m: m.fill([2, 2], 7),
    "tile_int": lambda m: m.tile(m.constant([[1, 2]]), [2, 3]),
    "repeat_int": lambda m: m.repeat(m.constant([[1, 2], [3, 4]]), [1, 3], axis=0),
    "pad_int": lambda m: m.pad(m.constant([[1, 2], [3, 4]]), [[1, 0], [0, 2]]),
    "add_n_int": lambda m: m.add_n([m.constant([1, 2]), m.constant([3, 4])]),
    "reduce_prod_int": lambda m: m.reduce_prod(m.constant([[1, 2], [3, 4]]), 1),
    "cumsum_int": lambda m: m.cumsum(m.constant([1, 2, 3]), exclusive=True, reverse=True),
    "sort_int": lambda m: m.sort(m.constant([3, 1, 2])),
    "argsort": lambda m: m.argsort(m.constant(D), axis=0),
    "argsort_ties": lambda m: m.argsort(m.constant([3.0, 1.0, 2.0, 1.0, 3.0]), stable=True),
    "argsort_ties_desc": lambda m: m.argsort(m.constant([3.0, 1.0, 2.0, 1.0, 3.0]),
                                             direction="DESCENDING"),
    "top_k": lambda m: list(m.math.top_k(m.constant(D), k=3)),
    "top_k_ties": lambda m: list(m.math.top_k(m.constant([1.0, 5.0, 3.0, 5.0]), 2)),
    "einsum_implicit": lambda m: m.einsum("ij,jk", m.constant(A), m.constant(B)),
}


def _flat(y):
    return list(y) if isinstance(y, (list, tuple)) else [y]


def _check(got, want, what):
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype.name == w.dtype.name, f"{what} output {k}: {g.dtype.name} vs {w.dtype.name}"
        assert tuple(g.shape) == tuple(w.shape), f"{what} output {k}: {g.shape} vs {w.shape}"
        np.testing.assert_allclose(np.asarray(g.numpy(), np.float64),
                                   np.asarray(w.numpy(), np.float64), rtol=1e-6, atol=1e-6,
                                   err_msg=f"{what} output {k}")


def _value_and_grads(m, f, arrays):
    xs = [m.constant(a) for a in arrays]
    with m.GradientTape() as tape:
        tape.watch(xs)
        ys = _flat(f(m, *xs))
    rng = np.random.default_rng(1)
    ws = [m.constant(rng.standard_normal(tuple(y.shape))) for y in ys]
    gs = tape.gradient(ys, xs, output_gradients=ws)
    return ys, gs


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_values_and_gradients_match_tensorflow(name):
    f, arrays = DIFFERENTIABLE[name]
    ys_jt, gs_jt = _value_and_grads(jt, f, arrays)
    ys_tf, gs_tf = _value_and_grads(tf, f, arrays)
    _check(ys_jt, ys_tf, name)
    assert [g is None for g in gs_jt] == [g is None for g in gs_tf], name
    _check([g for g in gs_jt if g is not None], [g for g in gs_tf if g is not None],
           f"{name} gradient")


@pytest.mark.parametrize("name", sorted(VALUES))
def test_values_and_dtypes_match_tensorflow(name):
    f = VALUES[name]
    _check(_flat(f(jt)), _flat(f(tf)), name)


@pytest.mark.parametrize("name, f", [
    ("argsort", lambda m, x: m.argsort(x)),
    ("top_k_indices", lambda m, x: m.math.top_k(x, 2).indices),
    ("range", lambda m, x: m.cast(m.range(4), x.dtype) * 0.0 + m.cast(m.argsort(x), x.dtype)),
])
def test_no_gradient_where_tensorflow_has_none(name, f):
    for m in (jt, tf):
        x = m.constant(D[0])
        with m.GradientTape() as tape:
            tape.watch(x)
            y = m.cast(f(m, x), m.float64)
        assert tape.gradient(y, x) is None, f"{name} on {m.__name__}"


@pytest.mark.parametrize("name, f", [
    ("einsum_sizes", lambda m: m.einsum("ij,jk->ik", m.ones([2, 3]), m.ones([4, 4]))),
    ("pad_paddings_shape", lambda m: m.pad(m.ones([2, 3]), [[1, 1]])),
    ("pad_negative", lambda m: m.pad(m.ones([2, 3]), [[1, -1], [0, 0]])),
    ("pad_reflect_too_far", lambda m: m.pad(m.ones([2, 3]), [[2, 1], [0, 0]], "REFLECT")),
    ("tile_multiples_length", lambda m: m.tile(m.ones([2, 3]), [2])),
    ("top_k_too_big", lambda m: m.math.top_k(m.ones([4]), 5)),
    ("add_n_shapes", lambda m: m.add_n([m.ones([2, 3]), m.ones([3])])),
    ("cumsum_axis", lambda m: m.cumsum(m.ones([3]), axis=1)),
    ("range_zero_delta", lambda m: m.range(0, 1, 0)),
])
def test_both_refuse_bad_input(name, f):
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
        f(tf)
    with pytest.raises(jt.errors.InvalidArgumentError):
        f(jt)
