"""Catalogue cases for the ops of tensor creation, shaping, scans, sorting and einsum (see cases.py for
the format); importing this module appends them to ``cases.CASES``."""

from __future__ import annotations

import numpy as np  # noqa: F401

import jittape as jt  # noqa: F401

from .cases import F, I, case  # noqa: F401

from .cases import fixed  # noqa: E402


def _np_scan(ufunc, axis=0, exclusive=False, reverse=False):
    def ref(x):
        y = np.flip(x, axis) if reverse else x
        r = ufunc.accumulate(y, axis=axis) if y.size else y.copy()
        if exclusive:
            r = np.moveaxis(r, axis, 0)
            r = np.concatenate([np.full_like(r[:1], ufunc.identity), r[:-1]], 0)
            r = np.moveaxis(r, 0, axis)
        return np.flip(r, axis) if reverse else r

    return ref


# ---------------------------------------------------------------------------
# zeros / ones / fill with TF's shape arguments

case("fill", "zeros_int_shape_dtype_kw", lambda: jt.zeros(3, dtype=jt.int64),
     lambda: np.zeros(3, np.int64), [], grad="skip")
case("fill", "ones_list_shape", lambda: jt.ones([2, 3], dtype=jt.float64),
     lambda: np.ones((2, 3)), [], grad="skip")
# a shape tensor must be concrete (an eager one): sizes are static in jittape
case("fill", "zeros_tensor_shape", lambda: jt.zeros(jt.constant([2, 3]), dtype=jt.int32),
     lambda: np.zeros((2, 3), np.int32), [], grad="skip")
case("fill", "ones_int64_tensor_shape", lambda: jt.ones(jt.constant([4], jt.int64)),
     lambda: np.ones(4, np.float32), [], grad="skip")
case("fill", "fill_tuple_int", lambda: jt.fill((2, 2), 7), lambda: np.full((2, 2), 7, np.int32),
     [], grad="skip")
case("fill", "zeros_like_dtype_kw", lambda x: jt.zeros_like(x, dtype=jt.int32) + 1,
     lambda x: np.ones(x.shape, np.int32), [F((2, 3))], grad="none")
case("fill", "ones_like_in_gradient_path", lambda x: x * jt.ones_like(x) + jt.ones([2, 3], x.dtype),
     lambda x: x + 1, [F((2, 3))])

# ---------------------------------------------------------------------------
# range, linspace, eye (constants: not differentiable)

case("range", "limit_only_int32", lambda: jt.range(5), lambda: np.arange(5, dtype=np.int32), [],
     grad="skip")
case("range", "start_limit_delta", lambda: jt.range(1, 10, 3),
     lambda: np.arange(1, 10, 3, dtype=np.int32), [], grad="skip")
case("range", "negative_delta", lambda: jt.range(5, 1, -2),
     lambda: np.array([5, 3], np.int32), [], grad="skip")
case("range", "float_infers_float32", lambda: jt.range(1.0, 2.0, 0.25),
     lambda: np.arange(1.0, 2.0, 0.25).astype(np.float32), [], grad="skip")
case("range", "dtype_float64", lambda: jt.range(4, dtype=jt.float64), lambda: np.arange(4.0), [],
     grad="skip")
case("range", "empty", lambda: jt.range(3, 3), lambda: np.zeros(0, np.int32), [], grad="skip")
case("range", "tensor_limit", lambda: jt.range(jt.constant(4)),
     lambda: np.arange(4, dtype=np.int32), [], grad="skip")
case("range", "times_int_tensor", lambda i: i * jt.range(3), lambda i: i * np.arange(3, dtype=np.int32),
     [I([1, 2, 3])], grad="skip")
case("range", "times_x", lambda x: x * jt.cast(jt.range(3), x.dtype),
     lambda x: x * np.arange(3.0), [F((2, 3))])

case("linspace", "int_tensor_ends", lambda i: jt.linspace(i, i * 2 + 1, 3),
     lambda i: np.linspace(i, i * 2 + 1, 3), [I([1, 2])], grad="skip")
case("linspace", "floats", lambda: jt.linspace(0.0, 1.0, 5),
     lambda: np.linspace(0, 1, 5).astype(np.float32), [], grad="skip")
case("linspace", "ints_give_float64", lambda: jt.linspace(0, 10, 5), lambda: np.linspace(0, 10, 5),
     [], grad="skip")
case("linspace", "num1_num0", lambda: [jt.linspace(2.0, 3.0, 1), jt.linspace(2.0, 3.0, 0)],
     lambda: [np.array([2.0], np.float32), np.zeros(0, np.float32)], [], grad="skip")
case("linspace", "tensor_ends", lambda a, b: jt.linspace(a, b, 4), lambda a, b: np.linspace(a, b, 4),
     [F(()), F(())])
case("linspace", "batched_axis1", lambda a, b: jt.linspace(a, b, 5, axis=1),
     lambda a, b: np.linspace(a, b, 5, axis=1), [F((3,)), F((3,))])
case("linspace", "batched_axis_minus1", lambda a, b: jt.linspace(a, b, 3, axis=-1),
     lambda a, b: np.linspace(np.broadcast_to(a, (2, 2)), b, 3, axis=-1), [F((2,)), F((2, 2))])

case("eye", "plus_int_tensor", lambda i: i + jt.eye(2, dtype=jt.int32),
     lambda i: i + np.eye(2, dtype=np.int32), [I([[1, 2], [3, 4]])], grad="skip")
case("eye", "square", lambda: jt.eye(3), lambda: np.eye(3, dtype=np.float32), [], grad="skip")
case("eye", "rect_f64", lambda: jt.eye(2, 4, dtype=jt.float64), lambda: np.eye(2, 4), [],
     grad="skip")
case("eye", "batch_int32", lambda: jt.eye(2, batch_shape=[3], dtype=jt.int32),
     lambda: np.broadcast_to(np.eye(2, dtype=np.int32), (3, 2, 2)), [], grad="skip")
case("eye", "matmul_identity", lambda x: jt.matmul(x, jt.eye(3, dtype=jt.float64)),
     lambda x: x.copy(), [F((2, 3))], f32=False)

# ---------------------------------------------------------------------------
# meshgrid, tile, repeat, pad, add_n


def _mesh(indexing):
    return lambda *xs: np.meshgrid(*xs, indexing=indexing)


case("meshgrid", "xy", lambda x, y: jt.meshgrid(x, y), _mesh("xy"), [F((3,)), F((2,))])
case("meshgrid", "ij_three", lambda x, y, z: jt.meshgrid(x, y, z, indexing="ij"), _mesh("ij"),
     [F((2,)), F((3,)), F((4,))])
case("meshgrid", "xy_three", lambda x, y, z: jt.meshgrid(x, y, z), _mesh("xy"),
     [F((2,)), F((3,)), F((1,))])
case("meshgrid", "int_tensors_ij", lambda i, j: jt.meshgrid(i, j, indexing="ij"),
     lambda i, j: np.meshgrid(i, j, indexing="ij"), [I([1, 2, 3]), I([4, 5])], grad="skip")
case("meshgrid", "ints", lambda: jt.meshgrid([1, 2, 3], [4, 5]),
     lambda: [a.astype(np.int32) for a in np.meshgrid([1, 2, 3], [4, 5])], [], grad="skip")

case("tile", "matrix", lambda x: jt.tile(x, [2, 3]), lambda x: np.tile(x, (2, 3)), [F((2, 3))])
case("tile", "rank3_tensor_multiples", lambda x, m: jt.tile(x, m), lambda x, m: np.tile(x, m),
     [F((2, 1, 3)), I([1, 4, 2])])
case("tile", "vector", lambda x: jt.tile(x, (3,)), lambda x: np.tile(x, 3), [F((4,))])
case("tile", "zero_multiple", lambda x: jt.tile(x, [0, 2]), lambda x: np.tile(x, (0, 2)),
     [F((2, 3))])
case("tile", "int32", lambda i: jt.tile(i, [2, 1]), lambda i: np.tile(i, (2, 1)),
     [I([[1, 2], [3, 4]])], grad="skip")

case("repeat", "flat", lambda x: jt.repeat(x, 2), lambda x: np.repeat(x, 2), [F((2, 3))])
case("repeat", "axis0_counts", lambda x: jt.repeat(x, [1, 3], axis=0),
     lambda x: np.repeat(x, [1, 3], axis=0), [F((2, 3))])
case("repeat", "axis1_scalar", lambda x: jt.repeat(x, 3, axis=1),
     lambda x: np.repeat(x, 3, axis=1), [F((2, 2, 2))])
case("repeat", "axis_minus1_counts_with_zero", lambda x: jt.repeat(x, [2, 0, 1], axis=-1),
     lambda x: np.repeat(x, [2, 0, 1], axis=-1), [F((2, 3))])
case("repeat", "int32", lambda i: jt.repeat(i, 2, axis=0), lambda i: np.repeat(i, 2, axis=0),
     [I([[1, 2], [3, 4]])], grad="skip")


def _np_pad(pads, mode="constant", **kw):
    return lambda x: np.pad(x, pads, mode=mode, **kw)


case("pad", "constant", lambda x: jt.pad(x, [[1, 0], [0, 2]]), _np_pad([[1, 0], [0, 2]]),
     [F((2, 3))])
case("pad", "constant_values", lambda x: jt.pad(x, [[1, 2], [2, 1]], constant_values=1.5),
     _np_pad([[1, 2], [2, 1]], constant_values=1.5), [F((2, 3))])
case("pad", "reflect", lambda x: jt.pad(x, [[1, 1], [2, 2]], "REFLECT"),
     _np_pad([[1, 1], [2, 2]], "reflect"), [F((2, 3))])
case("pad", "symmetric", lambda x: jt.pad(x, [[2, 2], [3, 1]], mode="SYMMETRIC"),
     _np_pad([[2, 2], [3, 1]], "symmetric"), [F((2, 3))])
case("pad", "reflect_lowercase_rank3", lambda x: jt.pad(x, [[0, 0], [1, 2], [0, 1]], "reflect"),
     _np_pad([[0, 0], [1, 2], [0, 1]], "reflect"), [F((2, 3, 2))])
case("pad", "tensor_paddings_int32",
     lambda i: jt.pad(i, jt.constant([[0, 1], [1, 0]]), constant_values=-1),
     lambda i: np.pad(i, [[0, 1], [1, 0]], constant_values=-1), [I([[1, 2], [3, 4]])],
     grad="skip")

case("add_n", "three", lambda a, b, c: jt.add_n([a, b, c]), lambda a, b, c: a + b + c,
     [F((2, 3)), F((2, 3)), F((2, 3))])
case("add_n", "one", lambda a: jt.math.add_n([a]), lambda a: a.copy(), [F((4,))])
case("add_n", "ints", lambda a, b: jt.add_n([a, b]), lambda a, b: a + b, [I([1, 2]), I([3, 4])],
     grad="skip")

# ---------------------------------------------------------------------------
# reduce_prod, cumsum, cumprod


def _prod_ref(axis=None, keepdims=False):
    return lambda x: np.prod(x, axis=axis, keepdims=keepdims)


case("reduce_prod", "all", lambda x: jt.reduce_prod(x), _prod_ref(), [F((2, 3), "away")])
case("reduce_prod", "axis1", lambda x: jt.reduce_prod(x, 1), _prod_ref(1), [F((3, 4), "away")])
case("reduce_prod", "axes_keepdims", lambda x: jt.math.reduce_prod(x, [0, 2], keepdims=True),
     _prod_ref((0, 2), True), [F((2, 3, 2), "away")])
case("reduce_prod", "axis0_rank3", lambda x: jt.reduce_prod(x, 0), _prod_ref(0),
     [F((3, 2, 2), "away")])
case("reduce_prod", "empty_axis_is_one", lambda x: jt.reduce_prod(x, 0), _prod_ref(0),
     [F((0, 2))])
case("reduce_prod", "int32", lambda i: jt.reduce_prod(i, 1),
     lambda i: np.prod(i, 1).astype(np.int32), [I([[1, 2], [3, 4]])], grad="skip")
case("reduce_prod", "fused_with_square", lambda x: jt.reduce_prod(jt.square(x) + 0.5, 1),
     lambda x: np.prod(x * x + 0.5, 1), [F((2, 4))])
# one factor exactly 0: the gradient is the product of the others (no 0/0)
case("reduce_prod", "gradient_at_a_zero", lambda x: jt.reduce_prod(x - x[1]),
     lambda x: np.prod(x - x[1]), [F((3,), "away")])

case("cumsum", "vector", lambda x: jt.cumsum(x), _np_scan(np.add), [F((5,))])
case("cumsum", "axis1", lambda x: jt.cumsum(x, 1), _np_scan(np.add, 1), [F((2, 4))])
case("cumsum", "exclusive", lambda x: jt.cumsum(x, 0, exclusive=True),
     _np_scan(np.add, 0, True), [F((3, 2))])
case("cumsum", "reverse", lambda x: jt.math.cumsum(x, axis=-1, reverse=True),
     _np_scan(np.add, 2, False, True), [F((2, 2, 3))])
case("cumsum", "exclusive_reverse_middle", lambda x: jt.cumsum(x, 1, exclusive=True, reverse=True),
     _np_scan(np.add, 1, True, True), [F((2, 3, 2))])
case("cumsum", "empty", lambda x: jt.cumsum(x, 1), _np_scan(np.add, 1), [F((0, 3))])
case("cumsum", "int32", lambda i: jt.cumsum(i, exclusive=True, reverse=True),
     lambda i: np.array([5, 3, 0], np.int32), [I([1, 2, 3])], grad="skip")

case("cumprod", "vector", lambda x: jt.math.cumprod(x), _np_scan(np.multiply), [F((5,), "away")])
case("cumprod", "axis1", lambda x: jt.cumprod(x, 1), _np_scan(np.multiply, 1), [F((2, 4), "away")])
case("cumprod", "exclusive", lambda x: jt.cumprod(x, 0, exclusive=True),
     _np_scan(np.multiply, 0, True), [F((3, 2), "away")])
case("cumprod", "reverse", lambda x: jt.cumprod(x, -1, reverse=True),
     _np_scan(np.multiply, 1, False, True), [F((2, 3), "away")])
case("cumprod", "exclusive_reverse", lambda x: jt.cumprod(x, 1, exclusive=True, reverse=True),
     _np_scan(np.multiply, 1, True, True), [F((2, 3, 2), "away")])
case("cumprod", "int32", lambda i: jt.cumprod(i, 0),
     lambda i: np.cumprod(i, 0).astype(np.int32), [I([[1, 2], [3, 4]])], grad="skip")

# ---------------------------------------------------------------------------
# sort, argsort, top_k (distinct values: no ties within a finite-difference step)


def _np_sort(axis=-1, desc=False):
    def ref(x):
        s = np.sort(x, axis=axis)
        return np.flip(s, axis) if desc else s

    return ref


def _np_argsort(axis=-1, desc=False):
    def ref(x):
        i = np.argsort(-x if desc else x, axis=axis, kind="stable")
        return i.astype(np.int32)

    return ref


def _np_top_k(k):
    def ref(x):
        i = np.argsort(-x, axis=-1, kind="stable")[..., :k]
        return [np.take_along_axis(x, i, -1), i.astype(np.int32)]

    return ref


case("sort", "vector", lambda x: jt.sort(x), _np_sort(), [F((6,), "distinct")])
case("sort", "descending_axis0", lambda x: jt.sort(x, axis=0, direction="DESCENDING"),
     _np_sort(0, True), [F((4, 3), "distinct")])
case("sort", "rank3_middle", lambda x: jt.sort(x, 1), _np_sort(1), [F((2, 4, 3), "distinct")])
case("sort", "int32", lambda i: jt.sort(i, direction="DESCENDING"),
     lambda i: np.sort(i)[::-1].copy(), [I([3, 1, 2, 5])], grad="skip")

case("argsort", "vector", lambda x: jt.argsort(x), _np_argsort(), [F((6,), "distinct")],
     grad="none")
case("argsort", "descending_axis0", lambda x: jt.argsort(x, 0, direction="DESCENDING"),
     _np_argsort(0, True), [F((4, 3), "distinct")], grad="none")
case("argsort", "ties_stable", lambda x: jt.argsort(x, stable=True),
     lambda x: np.array([1, 3, 2, 0, 4], np.int32),
     [fixed([3.0, 1.0, 2.0, 1.0, 3.0], "float64")], grad="none")
case("argsort", "ties_descending", lambda x: jt.argsort(x, direction="DESCENDING"),
     lambda x: np.array([0, 4, 2, 1, 3], np.int32),
     [fixed([3.0, 1.0, 2.0, 1.0, 3.0], "float64")], grad="none")
case("argsort", "int32_rank3", lambda i: jt.argsort(i, axis=1),
     lambda i: np.argsort(i, 1, kind="stable").astype(np.int32),
     [I([[[3, 1], [2, 2], [1, 3]], [[0, 5], [4, 4], [9, 1]]])], grad="skip")
case("argsort", "empty_rows", lambda x: jt.argsort(x), _np_argsort(), [F((0, 3))], grad="none")

case("top_k", "values", lambda x: jt.math.top_k(x, 2).values,
     lambda x: _np_top_k(2)(x)[0], [F((3, 5), "distinct")])
case("top_k", "values_and_indices", lambda x: jt.math.top_k(x, k=3), _np_top_k(3),
     [F((2, 4), "distinct")], grad="skip")
case("top_k", "default_k1", lambda x: jt.math.top_k(x).values,
     lambda x: _np_top_k(1)(x)[0], [F((4,), "distinct")])
case("top_k", "all_k_rank3", lambda x: jt.math.top_k(x, 3)[0],
     lambda x: _np_top_k(3)(x)[0], [F((2, 2, 3), "distinct")])
case("top_k", "ties_lower_index_first", lambda x: jt.math.top_k(x, 2).indices,
     lambda x: np.array([1, 3], np.int32), [fixed([1.0, 5.0, 3.0, 5.0], "float64")], grad="none")

# ---------------------------------------------------------------------------
# einsum


def _es(eq):
    return lambda *xs: jt.einsum(eq, *xs), lambda *xs: np.einsum(eq, *xs)


for _eq, _shapes in [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("ij->ji", [(2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (2,)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 2, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (4, 3, 2)]),
    ("ij,jk", [(2, 3), (3, 2)]),
    ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]),
    ("ijk,ikl,lm->jm", [(2, 3, 2), (2, 2, 3), (3, 2)]),
    ("bi,bi->b", [(3, 4), (3, 4)]),
    ("ij,kj->ik", [(2, 3), (4, 3)]),
]:
    _f, _r = _es(_eq)
    case("einsum", _eq.replace("...", "ell").replace(",", "_").replace("->", "_to_") or "none",
         _f, _r, [F(s) for s in _shapes])
case("einsum", "int32_dot", lambda a, b: jt.einsum("i,i->", a, b),
     lambda a, b: np.asarray(np.dot(a, b), np.int32), [I([1, 2]), I([3, 4])], grad="skip")

# ---------------------------------------------------------------------------
# newaxis / None in indexing

case("newaxis", "none_middle", lambda x: x[:, None], lambda x: x[:, None], [F((2, 3))])
case("newaxis", "jt_newaxis_ellipsis", lambda x: x[jt.newaxis, ...] * 2.0,
     lambda x: x[None, ...] * 2.0, [F((2, 3))])
case("newaxis", "with_int_and_slice", lambda x: x[1, jt.newaxis, ::-1, None],
     lambda x: x[1, None, ::-1, None], [F((2, 3))])
