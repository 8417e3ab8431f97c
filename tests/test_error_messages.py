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
