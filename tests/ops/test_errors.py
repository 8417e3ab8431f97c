"""Bad input gets a clear error (DESIGN.md, TF_SEMANTICS.md "Errors").

Shape and dtype mistakes raise ``jt.errors.InvalidArgumentError`` (a ValueError)
at the op that caused them, and the message names the op, the shapes and the
user's file:line, here this file's own line. Each bad call below is a one-line
lambda, so the line it runs on is ``co_firstlineno``.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import jittape as jt
from jittape.errors import InvalidArgumentError

HERE = "test_errors.py"


def _where(call) -> str:
    return f"{HERE}:{call.__code__.co_firstlineno}"


def _squash(msg: str) -> str:
    """Shapes may print as [2, 3] or [2,3]."""
    return msg.replace(" ", "")


def _raise(call, exc=InvalidArgumentError) -> str:
    with pytest.raises(exc) as info:
        call()
    return str(info.value)


def test_invalid_argument_error_is_a_value_error():
    assert issubclass(jt.errors.InvalidArgumentError, ValueError)


def test_matmul_mismatch_names_op_shapes_and_line():
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(jt.errors.InvalidArgumentError) as info:
        jt.matmul(jt.ones((2, 3)), jt.ones((4, 5)))
    msg = str(info.value)
    assert "matmul" in msg
    assert "[2,3]" in msg and "[4,5]" in msg
    assert f"{HERE}:{line}" in msg, msg


# (id, op name the message must contain, shape fragments, the bad call on one line)
SHAPE_ERRORS = [
    ("matmul_inner", "matmul", ["[2,3]", "[4,5]"],
     lambda: jt.matmul(jt.ones((2, 3)), jt.ones((4, 5)))),
    ("matmul_operator", "matmul", ["[2,3]", "[2,3]"], lambda: jt.ones((2, 3)) @ jt.ones((2, 3))),
    ("matmul_rank1", "matmul", ["[3]", "[3,2]"], lambda: jt.matmul(jt.ones((3,)), jt.ones((3, 2)))),
    ("matmul_batch", "matmul", ["[2,2,3]", "[3,3,4]"],
     lambda: jt.matmul(jt.ones((2, 2, 3)), jt.ones((3, 3, 4)))),
    ("add_broadcast", "add", ["[2,3]", "[4]"], lambda: jt.add(jt.ones((2, 3)), jt.ones((4,)))),
    ("multiply_operator", "multiply", ["[3,2]", "[3]"], lambda: jt.ones((3, 2)) * jt.ones((3,))),
    ("where_shapes", "where", ["[2]", "[3]"],
     lambda: jt.where(jt.constant([True, False]), jt.ones((3,)), jt.ones((3,)))),
    ("reshape_size", "reshape", ["[2,3]", "8"], lambda: jt.reshape(jt.ones((2, 3)), (4, 2))),
    ("reshape_minus_one", "reshape", ["[2,3]", "[4,-1]"],
     lambda: jt.reshape(jt.ones((2, 3)), (4, -1))),
    ("broadcast_to", "broadcast_to", ["[2,3]", "[4,3]"],
     lambda: jt.broadcast_to(jt.ones((2, 3)), (4, 3))),
    ("transpose_perm", "transpose", ["[2,3]"], lambda: jt.transpose(jt.ones((2, 3)), (0, 0))),
    ("concat_dims", "concat", ["[2,3]", "[3,4]"],
     lambda: jt.concat([jt.ones((2, 3)), jt.ones((3, 4))], 0)),
    ("getitem_out_of_bounds", "strided_slice", ["[2,3]"], lambda: jt.ones((2, 3))[5]),
    ("getitem_too_many", "strided_slice", ["[2,3]"], lambda: jt.ones((2, 3))[0, 0, 0]),
    ("gather_float_indices", "gather", ["[3,2]"],
     lambda: jt.gather(jt.ones((3, 2)), jt.constant([0.0]))),
    # raised by the public wrapper rather than by the op's shape rule: same contract
    ("concat_axis", "concat", ["[2,3]"], lambda: jt.concat([jt.ones((2, 3)), jt.ones((2, 3))], 2)),
    ("stack_shapes", "stack", ["[2,3]", "[3,2]"],
     lambda: jt.stack([jt.ones((2, 3)), jt.ones((3, 2))])),
    ("squeeze_not_one", "squeeze", ["[2,3]"], lambda: jt.squeeze(jt.ones((2, 3)), 0)),
    ("expand_dims_axis", "expand_dims", ["[2,3]"], lambda: jt.expand_dims(jt.ones((2, 3)), 4)),
    ("reduce_sum_axis", "reduce_sum", ["[2,3]"], lambda: jt.reduce_sum(jt.ones((2, 3)), 2)),
    ("reduce_max_axis", "reduce_max", ["[2,3]"], lambda: jt.reduce_max(jt.ones((2, 3)), -3)),
    ("reduce_mean_axis", "reduce_mean", ["[2,3]"], lambda: jt.reduce_mean(jt.ones((2, 3)), 2)),
    ("sparse_xent_label_shape", "labels", ["[2,3]", "[1]"],
     lambda: jt.nn.sparse_softmax_cross_entropy_with_logits(labels=[0], logits=jt.ones((2, 3)))),
    # an axis or perm entry out of range must raise, not wrap around
    ("argmax_axis", "argmax", ["[2,3]"], lambda: jt.argmax(jt.ones((2, 3)), 2)),
    ("argmin_axis", "argmin", ["[2,3]"], lambda: jt.argmin(jt.ones((2, 3)), -3)),
    ("gather_axis", "gather", ["[3,2]"], lambda: jt.gather(jt.ones((3, 2)), [0], axis=2)),
    ("transpose_perm_out_of_range", "transpose", ["[2,3]"],
     lambda: jt.transpose(jt.ones((2, 3)), (0, 5))),
    ("unstack_axis", "unstack", ["[2,3]"], lambda: jt.unstack(jt.ones((2, 3)), axis=3)),
]


@pytest.mark.parametrize("opname, fragments, call", [e[1:] for e in SHAPE_ERRORS],
                         ids=[e[0] for e in SHAPE_ERRORS])
def test_shape_error_names_op_shapes_and_line(opname, fragments, call):
    msg = _raise(call)
    assert opname in msg, msg
    for f in fragments:
        assert f in _squash(msg), f"{f} not in: {msg}"
    assert _where(call) in msg, f"no {_where(call)} in: {msg}"


# (id, op name, dtype fragments, the bad call on one line)
DTYPE_ERRORS = [
    ("add_f32_f64", "add", ["float32", "float64"],
     lambda: jt.add(jt.ones((2,), jt.float32), jt.ones((2,), jt.float64))),
    ("operator_f32_f64", "add", ["float32", "float64"],
     lambda: jt.ones((2,), jt.float32) + jt.ones((2,), jt.float64)),
    ("operator_f64_f32", "multiply", ["float64", "float32"],
     lambda: jt.constant(np.ones(2)) * jt.constant(np.ones(2, np.float32))),
    ("matmul_int_float", "matmul", ["int32", "float32"],
     lambda: jt.matmul(jt.ones((2, 3), jt.int32), jt.ones((3, 2)))),
    ("bool_times_float", "multiply", ["bool", "float32"],
     lambda: jt.multiply(jt.constant([True]), jt.ones((1,)))),
    ("log_of_int", "log", ["int32"], lambda: jt.log(jt.constant([1, 2]))),
    ("where_condition_not_bool", "where", ["float32"],
     lambda: jt.where(jt.ones((2,)), jt.ones((2,)), jt.ones((2,)))),
    ("one_hot_float_indices", "one_hot", ["float32"], lambda: jt.one_hot(jt.ones((2,)), 3)),
    ("logical_and_float", "logical_and", ["float32"],
     lambda: jt.logical_and(jt.ones((2,)), jt.ones((2,)))),
    ("concat_mixed", "concat", ["float32", "float64"],
     lambda: jt.concat([jt.ones((2,)), jt.ones((2,), jt.float64)], 0)),
]


@pytest.mark.parametrize("opname, fragments, call", [e[1:] for e in DTYPE_ERRORS],
                         ids=[e[0] for e in DTYPE_ERRORS])
def test_dtype_mismatch_raises_naming_op_dtypes_and_line(opname, fragments, call):
    # TF_SEMANTICS: no silent promotion; a TypeError or jittape's InvalidArgumentError
    with pytest.raises((TypeError, InvalidArgumentError)) as info:
        call()
    msg = str(info.value)
    assert opname in msg, msg
    for f in fragments:
        assert f in msg, f"{f} not in: {msg}"
    assert _where(call) in msg, f"no {_where(call)} in: {msg}"


def test_int32_plus_python_float_raises_type_error():
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(TypeError) as info:
        jt.constant(1, dtype=jt.int32) + 1.5
    msg = str(info.value)
    assert "1.5" in msg and "int32" in msg
    assert f"{HERE}:{line}" in msg, msg


def test_python_float_with_int_tensor_reflected_raises_type_error():
    with pytest.raises(TypeError):
        2.5 * jt.constant([1, 2])


@pytest.mark.parametrize("index", [3, -1, 100])
def test_gather_index_out_of_range(index):
    params = jt.ones((3, 2))
    call = lambda: jt.gather(params, [0, index])  # noqa: E731
    msg = _raise(call)
    assert "gather" in msg and str(index) in msg and "[0, 3)" in msg, msg
    assert _where(call) in msg, msg


def test_gather_index_out_of_range_axis1():
    params = jt.ones((3, 2))
    call = lambda: jt.gather(params, [[0, 2]], axis=1)  # noqa: E731
    msg = _raise(call)
    assert "gather" in msg and "2" in msg and "[0, 2)" in msg, msg
    assert _where(call) in msg, msg


def test_getitem_index_list_out_of_range():
    x = jt.ones((3, 2))
    call = lambda: x[[0, 7]]  # noqa: E731
    msg = _raise(call)
    assert "gather" in msg and "7" in msg, msg
    assert _where(call) in msg, msg


@pytest.mark.parametrize("shape", [(4, 2), (5,), (7, -1), (-1, -1), (0, -1)])
def test_reshape_to_a_wrong_size_raises(shape):
    x = jt.ones((2, 3))
    call = lambda: jt.reshape(x, shape)  # noqa: E731
    msg = _raise(call)
    assert "reshape" in msg and "[2,3]" in _squash(msg), msg
    assert _where(call) in msg, msg


def test_reshape_with_tensor_shape_to_wrong_size_raises():
    x = jt.ones((2, 3))
    call = lambda: jt.reshape(x, jt.constant([4, 2]))  # noqa: E731
    msg = _raise(call)
    assert "reshape" in msg and _where(call) in msg, msg


def test_integer_floordiv_by_zero_raises():
    call = lambda: jt.floordiv(jt.constant([1, 2]), jt.constant([1, 0]))  # noqa: E731
    msg = _raise(call)
    assert "floordiv" in msg and "zero" in msg, msg
    assert _where(call) in msg, msg


def test_sparse_xent_label_out_of_range_raises():
    call = lambda: jt.nn.sparse_softmax_cross_entropy_with_logits(  # noqa: E731
        labels=jt.constant([0, 3]), logits=jt.ones((2, 3)))
    msg = _raise(call)
    assert "3" in msg and "[0, 3)" in msg, msg
    assert _where(call) in msg, msg


def test_norm_unsupported_ord_raises():
    call = lambda: jt.norm(jt.ones((2, 3)), 3)  # noqa: E731
    msg = _raise(call)
    assert "norm" in msg and "3" in msg, msg


def test_error_after_failure_leaves_no_tape_behind():
    # a failed op inside a tape does not poison later recording
    x = jt.constant(np.arange(3.0))
    with jt.GradientTape() as tape:
        tape.watch(x)
        with pytest.raises(InvalidArgumentError):
            jt.matmul(x, x)
        y = jt.reduce_sum(x * x)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), 2 * np.arange(3.0))
