"""jt.custom_gradient, as tf.custom_gradient (TF_SEMANTICS.md "custom_gradient")."""
import numpy as np
import pytest

import jittape as jt


def npv(t):
    assert t is not None, "expected a gradient, got None"
    return np.asarray(t.numpy())


def test_log1pexp_numerically_stable_gradient():
    @jt.custom_gradient
    def log1pexp(x):
        e = jt.exp(x)

        def grad(upstream):
            return upstream * (1 - 1 / (1 + e))

        return jt.log(1 + e), grad

    x = jt.constant(100.0)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = log1pexp(x)
    g = tape.gradient(y, x)
    np.testing.assert_allclose(npv(g), 1.0)
    assert np.isfinite(npv(g))

    x = jt.constant([0.0, 1.0])
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = log1pexp(x)
    np.testing.assert_allclose(npv(y), np.log1p(np.exp([0.0, 1.0])), rtol=1e-6)
    np.testing.assert_allclose(npv(tape.gradient(y, x)), 1 / (1 + np.exp(-np.array([0.0, 1.0]))), rtol=1e-6)


def test_custom_gradient_overrides_true_gradient():
    @jt.custom_gradient
    def f(x):
        def grad(dy):
            return dy * 5.0

        return x * x, grad

    x = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        y = f(x) * 2.0
    np.testing.assert_allclose(npv(y), 18.0)
    np.testing.assert_allclose(npv(tape.gradient(y, x)), 10.0)


def test_custom_gradient_multiple_inputs():
    @jt.custom_gradient
    def f(a, b):
        def grad(dy):
            return dy * 10.0, dy * 20.0

        return a * b, grad

    a = jt.Variable(2.0)
    b = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        y = f(a, b)
    np.testing.assert_allclose(npv(y), 6.0)
    ga, gb = tape.gradient(y, [a, b])
    np.testing.assert_allclose(npv(ga), 10.0)
    np.testing.assert_allclose(npv(gb), 20.0)


def test_custom_gradient_output_is_input_itself():
    # tf.custom_gradient docs: clip gradients, returning the input unchanged.
    @jt.custom_gradient
    def clip_gradients(y):
        def backward(dy):
            return jt.clip_by_value(dy, -0.1, 0.1)

        return y, backward

    x = jt.constant([1.0, 2.0])
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = clip_gradients(x)
        loss = jt.reduce_sum(y * 10.0)
    np.testing.assert_allclose(npv(y), [1.0, 2.0])
    np.testing.assert_allclose(npv(tape.gradient(loss, x)), [0.1, 0.1], rtol=1e-6)


def test_custom_gradient_outside_tape_returns_value():
    @jt.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: dy * 2.0

    np.testing.assert_allclose(npv(f(jt.constant(4.0))), 8.0)


def test_reading_variable_without_variables_kwarg_raises_type_error():
    v = jt.Variable(2.0)

    @jt.custom_gradient
    def f(x):
        y = x * v

        def grad(dy):
            return dy * v

        return y, grad

    x = jt.constant(3.0)
    with pytest.raises(TypeError, match="must accept keyword argument 'variables'"):
        with jt.GradientTape() as tape:
            tape.watch(x)
            out = f(x)
        tape.gradient(out, [x, v])


def test_variables_kwarg_gives_variable_gradients():
    v = jt.Variable(2.0)
    seen = []

    @jt.custom_gradient
    def f(x):
        y = x * v

        def grad(dy, variables=None):
            seen.append(list(variables))
            return dy * 7.0, [dy * 11.0]

        return y, grad

    x = jt.constant(3.0)
    with jt.GradientTape() as tape:
        tape.watch(x)
        out = f(x)
    np.testing.assert_allclose(npv(out), 6.0)
    gx, gv = tape.gradient(out, [x, v])
    np.testing.assert_allclose(npv(gx), 7.0)
    np.testing.assert_allclose(npv(gv), 11.0)
    assert len(seen) == 1 and len(seen[0]) == 1 and seen[0][0] is v


def test_wrong_number_of_input_gradients_raises_value_error():
    @jt.custom_gradient
    def f(a, b):
        def grad(dy):
            return dy  # two inputs, one gradient

        return a * b, grad

    a = jt.Variable(2.0)
    b = jt.Variable(3.0)
    with pytest.raises(ValueError):
        with jt.GradientTape() as tape:
            y = f(a, b)
        tape.gradient(y, [a, b])


def test_too_many_input_gradients_raises_value_error():
    @jt.custom_gradient
    def f(a):
        def grad(dy):
            return dy, dy, dy

        return a * 2.0, grad

    a = jt.Variable(2.0)
    with pytest.raises(ValueError):
        with jt.GradientTape() as tape:
            y = f(a)
        tape.gradient(y, a)


def test_wrong_number_of_variable_gradients_raises_value_error():
    v = jt.Variable(2.0)
    w = jt.Variable(5.0)

    @jt.custom_gradient
    def f(x):
        y = x * v * w

        def grad(dy, variables=None):
            return dy, [dy]  # two variables, one gradient

        return y, grad

    x = jt.constant(3.0)
    with pytest.raises(ValueError):
        with jt.GradientTape() as tape:
            tape.watch(x)
            out = f(x)
        tape.gradient(out, [x, v, w])


def test_grad_fn_ops_are_differentiable_second_order():
    @jt.custom_gradient
    def cube(x):
        def grad(dy):
            return dy * 3.0 * x * x

        return x * x * x, grad

    x = jt.Variable(3.0)
    with jt.GradientTape() as t2:
        with jt.GradientTape() as t1:
            y = cube(x)
        dy = t1.gradient(y, x)
    d2y = t2.gradient(dy, x)
    np.testing.assert_allclose(npv(dy), 27.0)
    np.testing.assert_allclose(npv(d2y), 18.0)


def test_nested_custom_gradient_overrides_second_order():
    second_calls = []

    @jt.custom_gradient
    def cube(x):
        @jt.custom_gradient
        def first_derivative(x_inner):
            def second(ddy):
                second_calls.append(1)
                return ddy * 100.0

            return 3.0 * x_inner * x_inner, second

        def grad(dy):
            return dy * first_derivative(x)

        return x * x * x, grad

    x = jt.Variable(3.0)
    with jt.GradientTape() as t2:
        with jt.GradientTape() as t1:
            y = cube(x)
        dy = t1.gradient(y, x)
    d2y = t2.gradient(dy, x)
    np.testing.assert_allclose(npv(y), 27.0)
    np.testing.assert_allclose(npv(dy), 27.0)
    np.testing.assert_allclose(npv(d2y), 100.0)  # overridden, true value 18
    assert second_calls == [1]


def test_custom_gradient_inside_ordinary_chain():
    @jt.custom_gradient
    def scale_grad(x):
        def grad(dy):
            return dy * 0.5

        return jt.sin(x), grad

    xs = np.array([0.3, -1.2], np.float64)
    x = jt.Variable(xs)
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(jt.exp(scale_grad(x * 2.0)))
    # d/dx exp(f(2x)) with f' overridden to 0.5: exp(sin(2x)) * 0.5 * 2
    np.testing.assert_allclose(npv(tape.gradient(y, x)), np.exp(np.sin(2 * xs)), rtol=1e-10)


def test_grad_fn_can_recompute_with_its_own_tape():
    # gradient checkpointing: the backward recomputes the forward under a new tape
    @jt.custom_gradient
    def checkpointed(x):
        y = jt.sin(x) * x

        def grad(dy):
            with jt.GradientTape() as t:
                t.watch(x)
                y2 = jt.sin(x) * x
            return t.gradient(y2, x, output_gradients=dy)

        return y, grad

    xs = np.array([0.3, 1.2])
    x = jt.Variable(xs)
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(checkpointed(x) * 2.0)
    np.testing.assert_allclose(
        npv(tape.gradient(y, x)), 2 * (np.cos(xs) * xs + np.sin(xs)), rtol=1e-12
    )


def test_grad_fn_receives_concrete_tensors_in_eager_mode():
    # In TF 2.x eager code, grad_fn is called with eager tensors: users print
    # them, call .numpy() on them and branch on their values.
    seen = []

    @jt.custom_gradient
    def f(x):
        def grad(dy):
            seen.append(np.array(dy.numpy()))
            if float(jt.reduce_sum(dy)) > 0:
                return dy * 3.0
            return dy * -1.0

        return x * 1.0, grad

    xs = np.array([0.3, 1.2])
    for scale, expected in ((2.0, 6.0), (-2.0, 2.0)):
        x = jt.Variable(xs)
        with jt.GradientTape() as tape:
            y = jt.reduce_sum(f(x) * scale)
        np.testing.assert_allclose(npv(tape.gradient(y, x)), [expected, expected])
    np.testing.assert_allclose(seen[0], [2.0, 2.0])
    np.testing.assert_allclose(seen[1], [-2.0, -2.0])


def test_grad_fn_called_once_per_gradient_call():
    calls = []

    @jt.custom_gradient
    def f(x):
        def grad(dy):
            calls.append(1)
            return dy * 2.0

        return x * 1.0, grad

    x = jt.Variable(np.array([1.0, 2.0]))
    with jt.GradientTape(persistent=True) as tape:
        y = jt.reduce_sum(f(x) * x)
    for k in range(3):
        np.testing.assert_allclose(npv(tape.gradient(y, x)), 2 * np.array([1.0, 2.0]) + [1.0, 2.0])
        assert len(calls) == k + 1


def test_jacobian_and_batch_jacobian_through_custom_gradient():
    @jt.custom_gradient
    def f(x):
        def grad(dy):
            return jt.constant(np.asarray(dy.numpy()) * 4.0)  # concrete dy, as in TF eager

        return x * x, grad

    xs = np.array([[1.0, 2.0], [3.0, 4.0]])
    x = jt.constant(xs)
    with jt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = f(x) * 2.0
    J = tape.jacobian(y, x)
    expected = np.zeros((2, 2, 2, 2))
    for a in range(2):
        for b in range(2):
            expected[a, b, a, b] = 8.0
    np.testing.assert_allclose(npv(J), expected)
    BJ = tape.batch_jacobian(y, x)
    np.testing.assert_allclose(npv(BJ), np.stack([np.diag([8.0, 8.0])] * 2))
