"""The snippets of TensorFlow's "Introduction to gradients and automatic
differentiation" and "Advanced automatic differentiation" guides, ported to
jittape, each checked against the value TensorFlow prints."""
import warnings

import numpy as np
import pytest

import jittape as jt

NON_PERSISTENT_MSG = (
    "A non-persistent GradientTape can only be used to compute one set of gradients"
)


def npv(t):
    assert t is not None, "expected a gradient, got None"
    return np.asarray(t.numpy())


def test_square_of_variable():
    x = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        y = x**2
    dy_dx = tape.gradient(y, x)
    np.testing.assert_allclose(npv(dy_dx), 6.0)
    np.testing.assert_allclose(npv(y), 9.0)


def test_two_variables():
    x = jt.Variable(2.0)
    y = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        z = x**2 + y**3
    dz_dx, dz_dy = tape.gradient(z, [x, y])
    np.testing.assert_allclose(npv(dz_dx), 4.0)
    np.testing.assert_allclose(npv(dz_dy), 27.0)


def test_model_like_variables_dict_sources():
    w = jt.Variable(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32), name="w")
    b = jt.Variable(np.zeros(2, np.float32), name="b")
    x = jt.constant([[1.0, 2.0, 3.0]])
    with jt.GradientTape(persistent=True) as tape:
        y = x @ w + b
        loss = jt.reduce_mean(y**2)
    grads = tape.gradient(loss, {"w": w, "b": b})
    assert isinstance(grads, dict) and set(grads) == {"w", "b"}
    yv = np.array([[1.0, 2.0, 3.0]]) @ w.numpy()  # [[22, 28]]
    dl_dy = yv  # d mean(y^2)/dy = 2y/2
    np.testing.assert_allclose(npv(grads["b"]), dl_dy[0], rtol=1e-6)
    np.testing.assert_allclose(npv(grads["w"]), np.array([[1.0], [2.0], [3.0]]) @ dl_dy, rtol=1e-6)
    assert grads["w"].shape == (3, 2)
    assert grads["b"].shape == (2,)


def test_nested_tapes_second_derivative():
    x = jt.Variable(3.0)
    with jt.GradientTape() as t2:
        with jt.GradientTape() as t1:
            y = x**3
        dy_dx = t1.gradient(y, x)
    d2y_dx2 = t2.gradient(dy_dx, x)
    np.testing.assert_allclose(npv(dy_dx), 27.0)
    np.testing.assert_allclose(npv(d2y_dx2), 18.0)


def test_persistent_tape_two_gradient_calls():
    x = jt.Variable(3.0)
    y = jt.Variable(4.0)
    with jt.GradientTape(persistent=True) as tape:
        z = x**2 + y**2
    dz_dx = tape.gradient(z, x)
    dz_dy = tape.gradient(z, y)
    np.testing.assert_allclose(npv(dz_dx), 6.0)
    np.testing.assert_allclose(npv(dz_dy), 8.0)
    del tape


def test_persistent_tape_tutorial_chain():
    x = jt.constant([1.0, 3.0])
    with jt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        z = y * y
    np.testing.assert_allclose(npv(tape.gradient(z, x)), [4.0, 108.0], rtol=1e-6)
    np.testing.assert_allclose(npv(tape.gradient(y, x)), [2.0, 6.0], rtol=1e-6)


def test_watch_constant():
    x = jt.constant(3.0)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = x**2
    np.testing.assert_allclose(npv(tape.gradient(y, x)), 6.0)


def test_constant_not_watched_gives_none():
    x = jt.constant(3.0)
    with jt.GradientTape() as tape:
        y = x**2
    assert tape.gradient(y, x) is None


def test_stop_gradient_in_sum():
    x = jt.Variable(2.0)
    with jt.GradientTape() as tape:
        y = jt.stop_gradient(x**2) + x
    np.testing.assert_allclose(npv(tape.gradient(y, x)), 1.0)
    np.testing.assert_allclose(npv(y), 6.0)


def test_stop_gradient_on_one_factor():
    x = jt.Variable(2.0)
    y = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        z = x * jt.stop_gradient(y)
    dz_dx, dz_dy = tape.gradient(z, [x, y])
    np.testing.assert_allclose(npv(dz_dx), 3.0)
    assert dz_dy is None


def test_non_trainable_variable_gives_none():
    x = jt.Variable(3.0, trainable=False)
    with jt.GradientTape() as tape:
        y = x**2
    assert tape.gradient(y, x) is None


def test_tutorial_four_kinds_of_sources():
    # A trainable variable
    x0 = jt.Variable(3.0, name="x0")
    # Not trainable
    x1 = jt.Variable(3.0, name="x1", trainable=False)
    # Not a Variable: a variable + tensor returns a tensor.
    x2 = jt.Variable(2.0, name="x2") + 1.0
    # Not a variable
    x3 = jt.constant(3.0, dtype=jt.float32)
    with jt.GradientTape() as tape:
        y = (x0**2) + (x1**2) + (x2**2)
    grad = tape.gradient(y, [x0, x1, x2, x3])
    np.testing.assert_allclose(npv(grad[0]), 6.0)
    assert grad[1] is None
    assert grad[2] is None
    assert grad[3] is None
    watched = tape.watched_variables()
    assert len(watched) == 1 and watched[0] is x0


def test_watch_accessed_variables_false():
    x0 = jt.Variable(0.0)
    x1 = jt.Variable(10.0)
    with jt.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(x1)
        y0 = jt.sin(x0)
        y1 = jt.log1p(jt.exp(x1))  # softplus
        y = y0 + y1
        ys = jt.reduce_sum(y)
    grad = tape.gradient(ys, {"x0": x0, "x1": x1})
    assert grad["x0"] is None
    np.testing.assert_allclose(npv(grad["x1"]), 0.9999546, rtol=1e-5)
    watched = tape.watched_variables()
    assert len(watched) == 1 and watched[0] is x1


def test_gradient_of_vector_target_is_sum():
    x = jt.Variable(2.0)
    with jt.GradientTape() as tape:
        y = x * jt.constant([3.0, 4.0])
    np.testing.assert_allclose(npv(tape.gradient(y, x)), 7.0)


def test_multiple_targets_list_and_dict():
    x = jt.Variable(2.0)
    with jt.GradientTape(persistent=True) as tape:
        y0 = x**2
        y1 = 1 / x
    np.testing.assert_allclose(npv(tape.gradient(y0, x)), 4.0)
    np.testing.assert_allclose(npv(tape.gradient(y1, x)), -0.25)
    np.testing.assert_allclose(npv(tape.gradient([y0, y1], x)), 3.75)
    np.testing.assert_allclose(npv(tape.gradient({"y0": y0, "y1": y1}, x)), 3.75)


def test_sigmoid_elementwise_gradient():
    xs = np.linspace(-10.0, 10.0, 201).astype(np.float32)
    x = jt.constant(xs)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.sigmoid(x)
    dy_dx = tape.gradient(y, x)
    s = 1.0 / (1.0 + np.exp(-xs.astype(np.float64)))
    np.testing.assert_allclose(npv(dy_dx), s * (1 - s), rtol=1e-4, atol=1e-7)
    assert dy_dx.shape == (201,)


def test_control_flow_tutorial():
    x = jt.constant(1.0)
    v0 = jt.Variable(2.0)
    v1 = jt.Variable(2.0)
    with jt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        if x > 0.0:
            result = v0
        else:
            result = v1**2
    dv0, dv1 = tape.gradient(result, [v0, v1])
    np.testing.assert_allclose(npv(dv0), 1.0)
    assert dv1 is None
    dx = tape.gradient(result, x)
    assert dx is None


def test_variable_replaced_by_tensor():
    x = jt.Variable(2.0)
    results = []
    for epoch in range(2):
        with jt.GradientTape() as tape:
            y = x + 1
        results.append(tape.gradient(y, x))
        x = x + 1  # should have been x.assign_add(1)
    np.testing.assert_allclose(npv(results[0]), 1.0)
    assert results[1] is None


def test_calculation_outside_jittape_gives_none():
    x = jt.Variable(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
    with jt.GradientTape() as tape:
        x2 = x**2
        y = np.mean(np.asarray(x2), axis=0)  # numpy, not recorded
        y = jt.reduce_mean(jt.constant(y), axis=0)
    assert tape.gradient(y, x) is None


def test_integer_source_gives_none():
    x = jt.constant(10)
    assert x.dtype == jt.int32
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with jt.GradientTape() as g:
            g.watch(x)
            y = x * x
        assert g.gradient(y, x) is None


def test_stateful_assign_add_breaks_gradient():
    x0 = jt.Variable(3.0)
    x1 = jt.Variable(0.0)
    with jt.GradientTape() as tape:
        x1.assign_add(x0)
        y = x1**2
    assert tape.gradient(y, x0) is None


def test_unconnected_zero():
    x = jt.Variable([2.0, 2.0])
    y = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        z = y**2
    g = tape.gradient(z, x, unconnected_gradients=jt.UnconnectedGradients.ZERO)
    np.testing.assert_array_equal(npv(g), [0.0, 0.0])
    assert g.shape == (2,)


def test_second_gradient_call_on_non_persistent_tape_raises():
    x = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        y = x * x
    np.testing.assert_allclose(npv(tape.gradient(y, x)), 6.0)
    with pytest.raises(RuntimeError, match=NON_PERSISTENT_MSG):
        tape.gradient(y, x)
