"""Errors name the function the user called and the user's line, wherever they arise."""

import inspect

import numpy as np
import pytest

import jittape as jt
from jittape.errors import InvalidArgumentError

HERE = "test_error_messages.py"


@pytest.mark.parametrize(
    "name, call",
    [
        ("softmax", lambda: jt.nn.softmax(jt.ones((2, 3)), axis=5)),
        ("reduce_logsumexp", lambda: jt.reduce_logsumexp(jt.ones((2, 3)), axis=2)),
        ("clip_by_value", lambda: jt.clip_by_value(jt.ones((2, 3)), jt.zeros((4,)), 1.0)),
        ("norm", lambda: jt.norm(jt.ones((2, 3)), axis=7)),
    ],
)
def test_composite_errors_name_the_public_function(name, call):
    line = inspect.getsourcelines(call)[1]
    with pytest.raises(InvalidArgumentError) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(name + ":"), msg
    assert f"{HERE}:{line}" in msg, msg
    assert msg.count(" (at ") == 1, msg  # the location is added once


def test_bad_output_gradients_shape_points_at_user_code():
    x = jt.constant(np.ones(3))
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.reduce_sum(x * 2.0)
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(InvalidArgumentError) as info:
        tape.gradient(y, x, output_gradients=[np.ones((2, 2))])
    msg = str(info.value)
    assert "output_gradients" in msg and "[2, 2]" in msg and f"{HERE}:{line}" in msg, msg


def test_check_numerics_names_message_and_kind():
    with pytest.raises(InvalidArgumentError, match="my tensor : Tensor had NaN values"):
        jt.debugging.check_numerics(jt.constant([1.0, np.nan]), "my tensor")
    with pytest.raises(InvalidArgumentError, match="Tensor had Inf and NaN values"):
        jt.debugging.check_numerics(jt.constant([np.inf, np.nan]), "m")


def test_enable_check_numerics_names_the_op_and_line():
    jt.debugging.enable_check_numerics()
    try:
        line = inspect.currentframe().f_lineno + 2
        with pytest.raises(InvalidArgumentError) as info:
            jt.log(jt.constant([-1.0, 1.0]))
        msg = str(info.value)
        assert "log" in msg and "NaN" in msg and f"{HERE}:{line}" in msg, msg
    finally:
        jt.debugging.disable_check_numerics()


def test_check_numerics_checks_the_gradient_too():
    x = jt.constant([0.0, 1.0])
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.debugging.check_numerics(x, "grad check")
        z = jt.reduce_sum(jt.sqrt(y))  # d sqrt / dx at 0 is inf
    with pytest.raises(InvalidArgumentError, match="grad check : Tensor had Inf values"):
        tape.gradient(z, x)


# -- shape and dtype mismatches point at the user's line, eagerly and while tracing -----


def _raises_at(exc, fn, line, *fragments):
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    assert f"{__file__}:{line}" in msg, msg
    for frag in fragments:
        assert frag in msg, (frag, msg)
    return msg


def test_eager_shape_mismatch_names_op_shapes_and_line():
    a, b = jt.ones((2, 3)), jt.ones((4, 5))

    def call():
        return jt.matmul(a, b)  # the line

    line = inspect.getsourcelines(call)[1] + 1
    _raises_at(InvalidArgumentError, call, line, "matmul", "[2,3]", "[4,5]")


def test_eager_dtype_mismatch_names_op_dtypes_and_line():
    def call():
        return jt.ones((2,)) + jt.constant([1, 2])

    line = inspect.getsourcelines(call)[1] + 1
    _raises_at(InvalidArgumentError, call, line, "add", "float32", "int32", "f32[2]", "i32[2]")


def test_traced_shape_error_names_the_line_inside_the_function():
    @jt.function
    def step(a, b):
        c = a * 2.0
        return jt.matmul(c, b)

    line = inspect.getsourcelines(step.python_function)[1] + 3
    _raises_at(InvalidArgumentError, lambda: step(jt.ones((2, 3)), jt.ones((4, 5))), line,
               "matmul", "[2,3]", "[4,5]")


def test_traced_dtype_error_names_the_line_inside_the_function():
    @jt.function
    def step(a, b):
        return a + b

    line = inspect.getsourcelines(step.python_function)[1] + 2
    _raises_at(InvalidArgumentError, lambda: step(jt.ones((2,)), jt.constant([1, 2])), line,
               "add", "float32", "int32")


def test_retrace_with_another_rank_that_breaks_the_function_says_what_changed():
    @jt.function
    def step(a):
        return jt.matmul(a, jt.ones((3, 2)))

    line = inspect.getsourcelines(step.python_function)[1] + 2
    assert step(jt.ones((2, 3))).shape == (2, 2)
    msg = _raises_at(InvalidArgumentError, lambda: step(jt.ones((3,))), line,
                     "matmul", "[3]", "[3, 2]")
    assert "new call signature" in msg and "argument 'a': shape (2, 3) -> (3,)" in msg, msg
    assert "input_signature" in msg, msg


def test_input_signature_wrong_rank_says_what_to_do():
    @jt.function(input_signature=[jt.TensorSpec([None, 3], jt.float32)])
    def total(a):
        return jt.reduce_sum(a)

    def call():
        return total(jt.ones((3,)))

    line = inspect.getsourcelines(call)[1] + 1
    msg = _raises_at(TypeError, call, line, "total'", "argument 0", "shape [3]",
                     "TensorSpec(shape=(None, 3)", "rank 1", "rank 2", "reshape")
    assert "input_signature" in msg


# -- gradient sources, watch, used and reset tapes: the message says what to do ------


def test_python_float_or_ndarray_source_says_to_wrap_and_watch():
    x = jt.constant(1.0)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = x * 2.0
    line = inspect.currentframe().f_lineno + 1
    msg = _raises_at(TypeError, lambda: tape.gradient(y, 1.0), line, "gradient", "float",
                     "jt.constant", "tape.watch")
    assert "source 0" in msg
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = x * 2.0
    line = inspect.currentframe().f_lineno + 1
    _raises_at(TypeError, lambda: tape.gradient(y, [x, np.ones((2, 3))]), line, "gradient",
               "source 1", "ndarray of shape [2, 3]", "jt.constant", "tape.watch")


def test_watching_an_integer_tensor_warns_with_what_to_do(monkeypatch):
    from jittape import tape as tape_mod

    monkeypatch.setitem(tape_mod._warned, "int_watch", 0)
    i = jt.constant([1, 2])
    with jt.GradientTape() as tape:
        with pytest.warns(UserWarning) as rec:
            tape.watch(i)
            line = inspect.currentframe().f_lineno - 1
    (w,) = rec
    msg = str(w.message)
    assert "must be floating" in msg and "got int32" in msg and "[2]" in msg, msg
    assert "jt.cast" in msg and f"{__file__}:{line}" in msg, msg
    assert w.filename == __file__ and w.lineno == line


def test_watching_a_numpy_array_raises_naming_the_type_and_line():
    with jt.GradientTape() as tape:
        line = inspect.currentframe().f_lineno + 1
        _raises_at(ValueError, lambda: tape.watch(np.ones(3)), line, "'ndarray'", "[3]",
                   "jt.constant")


def test_second_gradient_on_a_used_tape_says_use_persistent():
    x = jt.constant(2.0)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    first = inspect.currentframe().f_lineno + 1
    tape.gradient(y, x)
    line = inspect.currentframe().f_lineno + 1
    _raises_at(RuntimeError, lambda: tape.gradient(y, x), line,
               "can only be used to compute one set of gradients",
               "persistent=True", f"gradient at {__file__}:{first}", "gradient()")
    line = inspect.currentframe().f_lineno + 1
    _raises_at(RuntimeError, lambda: tape.jacobian(y, x), line, "jacobian()")


def test_reset_outside_the_block_says_where_it_works():
    x = jt.constant(2.0)
    with jt.GradientTape() as tape:
        tape.watch(x)
    line = inspect.currentframe().f_lineno + 1
    _raises_at(ValueError, lambda: tape.reset(), line, "Tape is not recording.",
               "inside its `with")


def test_gradient_of_a_target_dropped_by_reset_warns():
    x = jt.constant(2.0)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = x * x
        reset_line = inspect.currentframe().f_lineno + 1
        tape.reset()
        tape.watch(x)
        z = x * 3.0
    with pytest.warns(UserWarning, match="recorded before tape.reset") as rec:
        gy, gz = tape.gradient([y, z], x), None
        line = inspect.currentframe().f_lineno - 1
    assert gy is not None and float(gy) == 3.0  # z's gradient only: y was dropped
    (w,) = rec
    assert f"{__file__}:{reset_line}" in str(w.message) and w.lineno == line
    assert "after reset()" in str(w.message)


def test_gradient_source_errors_inside_a_function_name_its_line():
    w = jt.Variable(1.0)

    @jt.function
    def step(x):
        with jt.GradientTape() as tape:
            y = w * x
        return tape.gradient(y, np.float32(1.0))

    line = inspect.getsourcelines(step.python_function)[1] + 4
    _raises_at(TypeError, lambda: step(jt.constant(2.0)), line, "gradient", "float32",
               "tape.watch")

    @jt.function
    def twice(x):
        with jt.GradientTape() as tape:
            y = w * x
        tape.gradient(y, w)
        return tape.gradient(y, w)

    line = inspect.getsourcelines(twice.python_function)[1] + 5
    _raises_at(RuntimeError, lambda: twice(jt.constant(2.0)), line, "persistent=True")
