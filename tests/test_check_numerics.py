"""jt.debugging.enable_check_numerics: the first NaN/Inf raises, naming the op, the
pass (forward or backward) and the user's line, eagerly, in compiled gradients and in
compiled ``jt.function`` steps (where the checks are nodes of the compiled graph)."""

import inspect

import numpy as np
import pytest

import jittape as jt
from jittape.errors import InvalidArgumentError

HERE = __file__


def _line(offset=1):
    return inspect.currentframe().f_back.f_lineno + offset


@pytest.fixture
def checks():
    jt.debugging.enable_check_numerics()
    yield
    jt.debugging.disable_check_numerics()


def test_eager_forward_names_op_pass_and_line(checks):
    line = _line(2)
    with pytest.raises(InvalidArgumentError) as info:
        jt.log(jt.constant([-1.0, 1.0]))
    msg = str(info.value)
    assert "op log" in msg and "NaN" in msg and "forward pass" in msg, msg
    assert f"{HERE}:{line}" in msg, msg


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_gradient_names_the_op_whose_gradient_is_bad(checks, backend):
    x = jt.constant([0.0, 1.0])
    with jt.GradientTape(backend=backend) as tape:
        tape.watch(x)
        line = _line()
        y = jt.sqrt(x)  # finite; its gradient at 0 is not
        z = jt.reduce_sum(y * 2.0)
    with pytest.raises(InvalidArgumentError) as info:
        tape.gradient(z, x)
    msg = str(info.value)
    assert "gradient of op sqrt" in msg and "backward pass" in msg and "Inf" in msg, msg
    assert f"{HERE}:{line}" in msg, msg


def test_second_order_eager_backward_names_the_gradient(checks):
    x = jt.constant([0.0, 1.0])
    with jt.GradientTape() as outer:
        outer.watch(x)
        with jt.GradientTape() as inner:
            inner.watch(x)
            line = _line()
            y = jt.reduce_sum(jt.sqrt(x))
        with pytest.raises(InvalidArgumentError) as info:
            inner.gradient(y, x)  # runs eagerly: the outer tape records it
    msg = str(info.value)
    assert "backward pass" in msg and "sqrt" in msg and f"{HERE}:{line}" in msg, msg


def _step():
    w = jt.Variable(np.array([1.0, 2.0], np.float32))

    @jt.function
    def step(x):
        with jt.GradientTape() as tape:
            y = jt.reduce_sum(jt.log(x) * w)
        (g,) = tape.gradient(y, [w])
        w.assign_sub(0.1 * g)
        return y

    return step, w


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_function_forward_check_is_in_the_graph(checks, backend):
    step, w = _step()
    with _backend(backend):
        step(jt.constant([1.0, 2.0]))  # traced and compiled with the checks
        cf = step.get_concrete_function(jt.constant([1.0, 2.0]))
        n_checks = sum(n.op.name == "check_numerics" for n in cf.graph.nodes)
        assert n_checks >= 2, n_checks  # the forward ops' outputs
        if backend == "cpu":
            assert cf.program is not None and "check_numerics" in cf.program.source
        before = w.numpy().copy()
        with pytest.raises(InvalidArgumentError) as info:
            step(jt.constant([-1.0, 2.0]))
    msg = str(info.value)
    assert "op log" in msg and "forward pass" in msg and "NaN" in msg, msg
    assert HERE in msg, msg  # the line inside the traced function
    np.testing.assert_array_equal(w.numpy(), before)  # no update from the bad step


def test_function_backward_check(checks):
    w = jt.Variable(np.array([0.0, 1.0], np.float32))
    lines = []

    @jt.function(backend="cpu")
    def step():
        with jt.GradientTape() as tape:
            lines.append(_line())
            y = jt.reduce_sum(jt.sqrt(w))
        (g,) = tape.gradient(y, [w])
        w.assign_sub(0.1 * g)
        return y

    with pytest.raises(InvalidArgumentError) as info:
        step()
    msg = str(info.value)
    assert "gradient of op sqrt" in msg and "backward pass" in msg, msg
    assert f"{HERE}:{lines[0]}" in msg, msg


def test_turning_checks_on_retraces_and_off_costs_nothing():
    step, _ = _step()
    x = jt.constant([-1.0, 2.0])
    assert np.isnan(step(x).numpy())  # no checks: NaN flows through
    cf = step.get_concrete_function(x)
    assert not any(n.op.name == "check_numerics" for n in cf.graph.nodes)
    assert not any(n.op.name == "check_numerics" for n in cf.traced.nodes)
    jt.debugging.enable_check_numerics()
    try:
        with pytest.raises(InvalidArgumentError, match="op log"):
            step(x)
    finally:
        jt.debugging.disable_check_numerics()
    assert np.isnan(step(x).numpy())
    assert step.cache_info().traces == 2


def test_explicit_check_gradient_message_as_tf():
    x = jt.constant([0.0, 1.0])
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.debugging.check_numerics(x, "grad check")
        z = jt.reduce_sum(jt.sqrt(y))
    with pytest.raises(InvalidArgumentError,
                       match=r"detected in gradient\. grad check : Tensor had Inf values"):
        tape.gradient(z, x)


class _backend:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.old = jt.get_backend()
        jt.set_backend(self.name)

    def __exit__(self, *exc):
        jt.set_backend(self.old)
