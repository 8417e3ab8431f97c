"""TF-faithful values and errors (issue 19, "never silently wrong"): variable reads,
layer building, activations, Dropout's arguments, shapes given as ints, integer true
division, formatting tensors, and symbolic tensors that leak out of a trace."""

import inspect
import os
import re

import numpy as np
import pytest

import jittape as jt

HERE = os.path.basename(__file__)


def _line():
    """``file:line`` of the caller's current line."""
    f = inspect.currentframe().f_back
    return f"{HERE}:{f.f_lineno}"


# ---------------------------------------------------------------------------
# 1. each read_value() is a tensor of its own


def test_two_reads_of_a_variable_are_distinct_tensors():
    v = jt.Variable(3.0)
    with jt.GradientTape(persistent=True) as tape:
        a = v.read_value()
        b = v.read_value()
        y = a * b
    assert a is not b
    assert float(tape.gradient(y, a)) == 3.0  # TF: 3 (b is another tensor), not 6
    assert [float(g) for g in tape.gradient(y, [a, b])] == [3.0, 3.0]
    assert float(tape.gradient(y, v)) == 6.0  # the variable sums over its reads


def test_read_values_watched_after_reading_are_distinct():
    v = jt.Variable(3.0)
    for a, b in ((v.read_value(), v.value()),
                 (jt.convert_to_tensor(v), jt.convert_to_tensor(v))):
        assert a is not b
        with jt.GradientTape() as tape:
            tape.watch(a)
            y = a * b
        assert float(tape.gradient(y, a)) == 3.0


def test_implicit_reads_still_sum_into_the_variable():
    v = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        a = v.read_value()
        y = a * v + v * v
    assert float(tape.gradient(y, v)) == 3.0 + 3.0 + 6.0


def test_two_reads_are_distinct_inside_a_function():
    v = jt.Variable(3.0)

    @jt.function(backend="interpret")
    def f():
        with jt.GradientTape(persistent=True) as tape:
            a = v.read_value()
            b = v.read_value()
            y = a * b + v
        return tape.gradient(y, a), tape.gradient(y, v), tape.gradient(y, [a, b])

    ga, gv, (g1, g2) = f()
    assert float(ga) == 3.0
    assert float(gv) == 7.0
    assert (float(g1), float(g2)) == (3.0, 3.0)
    v.assign(5.0)  # the compiled function reads the new value
    ga, gv, _ = f()
    assert (float(ga), float(gv)) == (5.0, 11.0)


# ---------------------------------------------------------------------------
# 2. layer.build(shape) called directly builds the layer


def test_dense_build_called_directly_keeps_set_weights():
    d = jt.layers.Dense(3)
    d.build((None, 4))
    assert d.built
    k = np.arange(12, dtype=np.float32).reshape(4, 3)
    b = np.array([1.0, -1.0, 0.5], np.float32)
    d.set_weights([k, b])
    x = np.ones((2, 4), np.float32)
    y = d(x)
    assert len(d.weights) == 2  # the call did not build a second kernel and bias
    np.testing.assert_allclose(y.numpy(), x @ k + b)


def test_dense_build_with_a_list_shape():
    d = jt.layers.Dense(2)
    d.build([None, 5])
    assert d.built and d.kernel.shape == (5, 2)
    d(np.ones((1, 5), np.float32))
    assert len(d.weights) == 2


class _Scale(jt.layers.Layer):
    def build(self, input_shape):
        self.w = self.add_weight("w", (input_shape[-1],), initializer="ones")

    def call(self, x):
        return x * self.w


class _ScaleMore(_Scale):
    def build(self, input_shape):
        super().build(input_shape)
        assert not self.built  # built once the outermost build returns
        self.b = self.add_weight("b", (input_shape[-1],), initializer="zeros")

    def call(self, x):
        return x * self.w + self.b


def test_user_layer_build_called_directly_is_built_once():
    s = _Scale()
    s.build((None, 3))
    assert s.built
    s.set_weights([np.array([1.0, 2.0, 3.0], np.float32)])
    np.testing.assert_allclose(s(np.ones((1, 3), np.float32)).numpy(), [[1.0, 2.0, 3.0]])
    assert len(s.weights) == 1

    m = _ScaleMore()
    m.build((None, 2))
    assert m.built and len(m.weights) == 2
    m.set_weights([np.array([2.0, 3.0], np.float32), np.array([1.0, 1.0], np.float32)])
    np.testing.assert_allclose(m(np.ones((1, 2), np.float32)).numpy(), [[3.0, 4.0]])
    assert len(m.weights) == 2


def test_sequential_build_called_directly():
    model = jt.Sequential([jt.layers.Dense(4), jt.layers.Dense(2)])
    model.build((None, 3))
    assert model.built and all(layer.built for layer in model.layers)
    n = len(model.weights)
    assert n == 4
    weights = [np.full(w.shape, 0.5, np.float32) for w in model.weights]
    model.set_weights(weights)
    y = model(np.ones((1, 3), np.float32))
    assert len(model.weights) == n
    np.testing.assert_allclose(y.numpy(), [[4 * (3 * 0.5 + 0.5) * 0.5 + 0.5] * 2], rtol=1e-6)
    lines = []
    model.summary(print_fn=lines.append)  # knows its input shape
    assert any("(None, 2)" in line for line in lines)


def test_base_layer_build_marks_built():
    layer = jt.layers.Layer()
    layer.build((None, 2))
    assert layer.built


# ---------------------------------------------------------------------------
# 3. activation = None after construction is linear


def test_dense_activation_set_to_none_is_linear():
    d = jt.layers.Dense(3, activation="relu", kernel_initializer="ones",
                        bias_initializer="zeros")
    x = -np.ones((1, 2), np.float32)
    assert float(jt.reduce_sum(d(x))) == 0.0  # relu
    d.activation = None
    np.testing.assert_allclose(d(x).numpy(), [[-2.0, -2.0, -2.0]])
    d.activation = "tanh"  # a name works too, as at construction
    np.testing.assert_allclose(d(x).numpy(), np.tanh([[-2.0] * 3]), rtol=1e-6)
    with pytest.raises(ValueError, match="Unknown activation"):
        d.activation = "nonsense"


def test_activation_layer_with_none_is_linear():
    a = jt.layers.Activation("relu")
    a.activation = None
    np.testing.assert_allclose(a(np.array([[-1.0, 2.0]], np.float32)).numpy(), [[-1.0, 2.0]])
    b = jt.layers.Activation(None)
    np.testing.assert_allclose(b(np.array([[-1.0]], np.float32)).numpy(), [[-1.0]])


# ---------------------------------------------------------------------------
# 4. Dropout validates noise_shape and rate as Keras 3 does


@pytest.mark.parametrize("bad, fragment", [
    ("Invalid", "Expected a tuple or list of integers"),
    (1.5, "Expected an iterable of integers"),
    (-1, "Expected an iterable of integers"),
    (0, "Expected an iterable of integers"),
    ((0,), "positive integers or None"),
    ((None, -1), "positive integers or None"),
    ((1.5,), "integers or None"),
    ((True, 2), "integers or None"),
])
def test_dropout_rejects_a_bad_noise_shape(bad, fragment):
    with pytest.raises(ValueError, match="noise_shape") as e:
        jt.layers.Dropout(0.5, noise_shape=bad)
    assert fragment in str(e.value)


def test_dropout_takes_a_good_noise_shape():
    assert jt.layers.Dropout(0.5, noise_shape=(None, 1)).noise_shape == (None, 1)
    assert jt.layers.Dropout(0.5, noise_shape=[1, 4]).noise_shape == (1, 4)
    assert jt.layers.Dropout(0.5, noise_shape=(np.int64(2),)).noise_shape == (2,)


@pytest.mark.parametrize("rate", [-0.1, 1.5])
def test_dropout_rejects_a_rate_outside_0_1(rate):
    with pytest.raises(ValueError, match="`rate`"):
        jt.layers.Dropout(rate)


# ---------------------------------------------------------------------------
# 5. an int shape is a 1-D shape; a bad shape names the op


def test_creation_ops_take_an_int_shape():
    assert jt.zeros(2).shape == (2,) and float(jt.reduce_sum(jt.zeros(2))) == 0.0
    np.testing.assert_array_equal(jt.ones(10).numpy(), np.ones(10, np.float32))
    np.testing.assert_array_equal(jt.fill(3, 1.5).numpy(), [1.5, 1.5, 1.5])
    assert jt.ones(3, jt.int32).dtype == jt.int32
    assert jt.zeros(np.int64(4)).shape == (4,)
    assert jt.zeros(0).shape == (0,)
    assert jt.zeros(()).shape == ()
    assert jt.fill(jt.constant([2, 3]), 1.0).shape == (2, 3)
    assert jt.zeros([jt.constant(2), 3]).shape == (2, 3)
    assert jt.constant(2.0, shape=3).shape == (3,)
    assert jt.reshape(jt.ones((2, 3)), 6).shape == (6,)
    assert jt.broadcast_to(jt.constant(1.0), 4).shape == (4,)
    for fn in (jt.random.uniform, jt.random.normal, jt.random.truncated_normal):
        assert fn(5).shape == (5,)


@pytest.mark.parametrize("fn, name", [(jt.zeros, "zeros"), (jt.ones, "ones"),
                                      (lambda s: jt.fill(s, 1.0), "fill")])
def test_creation_ops_name_themselves_for_a_bad_shape(fn, name):
    with pytest.raises(ValueError, match=f"{name}: Dimension -1 must be >= 0"):
        fn(-1)
    with pytest.raises(ValueError, match=f"{name}: Dimension -2"):
        fn((3, -2))
    with pytest.raises(TypeError, match=f"{name}: shape"):
        fn(2.5)
    with pytest.raises(TypeError, match=f"{name}: shape dimensions must be ints, got 2.0"):
        fn((3, 2.0))
    with pytest.raises(TypeError, match=f"{name}: shape dimensions must be ints, got None"):
        fn((3, None))


def test_random_shape_with_a_float_dim_raises():
    with pytest.raises(TypeError, match="normal: shape"):
        jt.random.normal((2.5,))  # int() would silently make it 2


# ---------------------------------------------------------------------------
# 6. integer true division: float32 for 8/16-bit integers, float64 for wider ones


TRUEDIV_DTYPE = {"uint8": "float32", "int8": "float32", "int16": "float32",
                 "int32": "float64", "int64": "float64"}  # TF 2.x's table


@pytest.mark.parametrize("dt", sorted(TRUEDIV_DTYPE))
def test_integer_truediv_dtype_is_tfs(dt):
    a = np.array([1, 2, 7, -3 if dt != "uint8" else 3], dt)
    b = np.array([3, 4, 2, 2], dt)
    x, y = jt.constant(a), jt.constant(b)
    want = TRUEDIV_DTYPE[dt]
    for r in (x / y, jt.divide(x, y), jt.math.truediv(x, y), jt.math.divide(x, y)):
        assert r.dtype.name == want
        np.testing.assert_array_equal(
            r.numpy(), (a.astype(want) / b.astype(want)).astype(want))


def test_uint8_images_over_255_are_float32():
    img = np.array([[0, 128, 255]], np.uint8)
    r = jt.constant(img) / 255
    assert r.dtype == jt.float32
    np.testing.assert_allclose(r.numpy(), img.astype(np.float32) / np.float32(255))


def test_int8_over_255_says_to_cast_first():
    x = jt.constant(np.array([1, 2], np.int8))
    with pytest.raises(TypeError, match=r"out of the range of int8.*jt\.cast\(x, jt\.float32\)"):
        x / 255
    assert (jt.cast(x, jt.float32) / 255).dtype == jt.float32


def test_int8_plus_an_out_of_range_array_raises():
    x = jt.constant(np.array([1, 2], np.int8))
    with pytest.raises(TypeError, match="out of the range of int8"):
        x + np.array([300, 1])


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_integer_truediv_compiled_matches_eager(backend):
    @jt.function(backend=backend)
    def f(x, y):
        return x / y, x / 255 * 0.7

    for dt in ("uint8", "int16", "int32"):
        a = np.array([[1, 2, 100], [7, 0, 3]], dt)
        b = np.array([3, 7, 9], dt)
        q, s = f(a, b)
        eq, es = jt.constant(a) / jt.constant(b), jt.constant(a) / 255 * 0.7
        assert q.dtype == eq.dtype and q.dtype.name == TRUEDIV_DTYPE[dt]
        assert s.dtype == es.dtype
        np.testing.assert_array_equal(q.numpy(), eq.numpy())
        np.testing.assert_allclose(s.numpy(), es.numpy(), rtol=1e-6)


def test_divide_gradient_through_cast_integers():
    w = jt.Variable(np.array([1.0, 2.0], np.float32))
    pixels = jt.constant(np.array([51, 255], np.uint8))
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(w * (pixels / 255))
    np.testing.assert_allclose(tape.gradient(y, w).numpy(), [0.2, 1.0], rtol=1e-6)
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(jt.cast(pixels, jt.float32) / w)
    np.testing.assert_allclose(tape.gradient(y, w).numpy(), [-51.0, -255.0 / 4], rtol=1e-6)


# ---------------------------------------------------------------------------
# 7. formatting tensors


def test_format_a_scalar_tensor():
    loss = jt.constant(1.23456)
    assert f"{loss:.3f}" == "1.235"
    assert "{:.4f}".format(loss) == "1.2346"
    assert f"{jt.constant(3):d}" == "3"
    assert f"{jt.constant(3):>4}" == "   3"
    assert f"{loss}" == str(loss)
    assert f"{jt.Variable(2.5):.2f}" == "2.50"
    assert format(jt.constant(np.float64(0.5)), ".1%") == "50.0%"


def test_format_spec_on_a_non_scalar_raises_as_in_tf():
    t = jt.constant([1.0, 2.0])
    assert f"{t}" == str(t)
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{t:.3f}"
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{jt.constant([1.0]):.3f}"


def test_format_spec_on_a_symbolic_tensor_raises():
    seen = []

    @jt.function(backend="interpret")
    def f(x):
        y = x * 2
        seen.append(f"{y}")
        with pytest.raises(TypeError, match="symbolic"):
            f"{y:.3f}"
        return y

    assert float(f(jt.constant(1.0))) == 2.0
    assert seen and "symbolic" in seen[0]


# ---------------------------------------------------------------------------
# 8. a symbolic tensor that leaked out of its trace


def _leaky():
    leaked = []
    where = []

    @jt.function(backend="interpret")
    def f(x):
        y = x * 2.0; where.append(_line()); leaked.append(y)  # noqa: E702
        return y

    assert float(f(jt.constant(1.0))) == 2.0
    return leaked[0], where[0]


def test_leaked_symbolic_tensor_used_eagerly_is_out_of_scope():
    t, where = _leaky()
    with pytest.raises(TypeError, match="is out of scope and cannot be used here") as e:
        t + 1.0
    assert where in str(e.value)
    assert re.search(r"jt\.function '[\w.<>]*\bf'", str(e.value))
    with pytest.raises(TypeError, match="out of scope"):
        jt.exp(t)
    with pytest.raises(TypeError, match="out of scope"):
        float(t)
    with pytest.raises(TypeError, match="out of scope"):
        f"{t:.2f}"
    with pytest.raises(TypeError, match="out of scope"):
        jt.Variable(1.0).assign(t)


def test_leaked_symbolic_tensor_used_in_another_trace_is_out_of_scope():
    t, where = _leaky()

    @jt.function(backend="interpret")
    def g(x):
        return x + t

    @jt.function(backend="interpret")
    def h(x):
        return t * x  # the leaked tensor first

    for fn in (g, h):
        with pytest.raises(TypeError, match="is out of scope and cannot be used here") as e:
            fn(jt.constant(1.0))
        assert where in str(e.value)


def test_numpy_of_a_leaked_symbolic_tensor_is_an_attribute_error():
    t, where = _leaky()
    with pytest.raises(AttributeError, match="symbolic") as e:
        t.numpy()
    assert "out of scope" in str(e.value) and where in str(e.value)
    try:  # the idiom of code written for TF
        t.numpy()
    except AttributeError:
        pass


def test_numpy_inside_its_own_trace_is_an_attribute_error():
    caught = []

    @jt.function(backend="interpret")
    def f(x):
        y = x * 2
        try:
            y.numpy()
        except AttributeError as e:
            caught.append(str(e))
        return y

    assert float(f(jt.constant(2.0))) == 4.0
    assert caught and "symbolic" in caught[0] and "out of scope" not in caught[0]
