"""The tape's semantics inside ``@jt.function``: each case runs eagerly and as a
traced, compiled function (on ``interpret`` and on ``cpu``), twice each (the second
call reuses the trace), and must give the same values, the same ``None`` gradients
and the same variable states."""

from __future__ import annotations

import numpy as np
import pytest

import jittape as jt

RNG = np.random.default_rng(7)
A = RNG.normal(size=(3, 4)).astype(np.float64)
B = RNG.normal(size=(4, 2)).astype(np.float64)
V = RNG.normal(size=(4,)).astype(np.float64)
OG = RNG.normal(size=(3, 2))


def _cases():
    cases = {}

    def case(fn):
        cases[fn.__name__] = fn
        return fn

    @case
    def auto_watched_variables():
        w = jt.Variable(B)
        c = jt.constant(B)

        def f(x):
            with jt.GradientTape() as tape:
                y = jt.reduce_sum(jt.tanh(x @ w) * (x @ c))
            return tape.gradient(y, [w, c])

        return f, (A,), [w]

    @case
    def watched_constant_and_nested_sources():
        def f(x, y):
            with jt.GradientTape() as tape:
                tape.watch({"a": x, "b": [y]})
                z = jt.reduce_sum(x * x) + jt.reduce_mean(jt.exp(y))
            return tape.gradient(z, {"a": x, "b": [y]})

        return f, (A, V), []

    @case
    def non_trainable_not_watched():
        w = jt.Variable(V, trainable=False)
        u = jt.Variable(V)

        def f():
            with jt.GradientTape() as tape:
                y = jt.reduce_sum(w * u * u)
            return tape.gradient(y, [w, u])

        return f, (), [w, u]

    @case
    def watch_accessed_variables_false():
        w = jt.Variable(V)
        u = jt.Variable(V)

        def f():
            with jt.GradientTape(watch_accessed_variables=False) as tape:
                tape.watch(u)
                y = jt.reduce_sum(jt.sin(w) * u * u)
            return tape.gradient(y, [w, u])

        return f, (), [w, u]

    @case
    def stop_recording_and_reset():
        w = jt.Variable(V)

        def f(x):
            with jt.GradientTape(persistent=True) as tape:
                a = jt.reduce_sum(w * w)
                with tape.stop_recording():
                    b = jt.reduce_sum(w * x)
                c = a + b
            g1 = tape.gradient(c, w)
            with jt.GradientTape() as t2:
                d = jt.reduce_sum(w * w * w)
                t2.reset()
                e = jt.reduce_sum(jt.exp(w))
            return g1, tape.gradient(a, w), t2.gradient(e, w), t2.gradient if False else None

        return f, (V,), [w]

    @case
    def unconnected_zero_and_none():
        w = jt.Variable(V)
        u = jt.Variable(B)

        def f():
            with jt.GradientTape(persistent=True) as tape:
                y = jt.reduce_sum(w * 2.0)
            return (tape.gradient(y, [w, u]),
                    tape.gradient(y, [w, u], unconnected_gradients="zero"))

        return f, (), [w, u]

    @case
    def targets_lists_and_output_gradients():
        w = jt.Variable(B)

        def f(x, og):
            with jt.GradientTape(persistent=True) as tape:
                y = x @ w
                z = jt.reduce_sum(jt.square(w))
            return (tape.gradient(y, w), tape.gradient([y, z], w),
                    tape.gradient(y, w, output_gradients=og),
                    tape.gradient([y, z], w, output_gradients=[og, None]))

        return f, (A, OG), [w]

    @case
    def target_is_source_and_repeated_sources():
        def f(x):
            with jt.GradientTape(persistent=True) as tape:
                tape.watch(x)
                y = jt.reduce_sum(x * x)
            return tape.gradient(x, x), tape.gradient(y, [x, x, (x,)])

        return f, (V,), []

    @case
    def integer_source_gives_none():
        def f(x, i):
            with jt.GradientTape() as tape:
                tape.watch(x)
                y = jt.reduce_sum(x * jt.cast(i, "float64"))
            return tape.gradient(y, [x, i])

        return f, (V, np.arange(4, dtype=np.int32)), []

    @case
    def stop_gradient_cuts():
        w = jt.Variable(V)

        def f(x):
            with jt.GradientTape() as tape:
                y = jt.reduce_sum(w * x + jt.stop_gradient(jt.tanh(w) * jt.exp(x)))
            return tape.gradient(y, w)

        return f, (V,), [w]

    @case
    def snapshot_assign_inside_tape():
        w = jt.Variable(V)

        def f():
            with jt.GradientTape() as tape:
                y = jt.reduce_sum(w * w)
                w.assign(w * 3.0)
                z = y + jt.reduce_sum(w * w * w)
            g = tape.gradient(z, w)
            return g, w.read_value()

        return f, (), [w]

    @case
    def read_before_and_after_assign():
        w = jt.Variable(V)

        def f(x):
            a = w * x
            w.assign_add(x)
            b = w * x
            w.assign_sub(0.5 * x)
            c = w + 0.0
            return a, b, c

        return f, (V,), [w]

    @case
    def python_control_flow_at_trace_time():
        w = jt.Variable(V)

        def f(x, n, use_tanh):
            with jt.GradientTape() as tape:
                y = x * w
                for _ in range(n):
                    y = jt.tanh(y) if use_tanh else jt.sin(y)
                loss = jt.reduce_sum(y)
            return loss, tape.gradient(loss, w)

        return f, (V, 3, True), [w]

    @case
    def where_and_maximum():
        w = jt.Variable(V)

        def f(x):
            with jt.GradientTape() as tape:
                y = jt.where(x > 0, w * x, jt.square(w)) + jt.maximum(w, x)
                loss = jt.reduce_sum(y)
            return tape.gradient(loss, w)

        return f, (V,), [w]

    @case
    def jacobians():
        def f(x, m):
            with jt.GradientTape(persistent=True) as tape:
                tape.watch(x)
                tape.watch(m)
                y = jt.square(x)
                z = jt.tanh(m @ jt.transpose(m))
                b = jt.sin(m) * 2.0
            return tape.jacobian(y, x), tape.jacobian(z, m), tape.batch_jacobian(b, m)

        return f, (V, A), []

    @case
    def second_derivative():
        def f(x):
            with jt.GradientTape() as t2:
                t2.watch(x)
                with jt.GradientTape() as t1:
                    t1.watch(x)
                    y = x * x * x
                dy = t1.gradient(y, x)
            return dy, t2.gradient(dy, x)

        return f, (np.float64(3.0),), []

    @case
    def gradient_penalty():
        w = jt.Variable(B)

        def f(x):
            with jt.GradientTape() as outer:
                with jt.GradientTape() as inner:
                    inner.watch(x)
                    out = jt.reduce_sum(jt.tanh(x @ w))
                gx = inner.gradient(out, x)
                penalty = jt.reduce_mean(jt.square(jt.sqrt(jt.reduce_sum(gx * gx, axis=1)) - 1.0))
            return penalty, outer.gradient(penalty, w)

        return f, (A,), [w]

    @case
    def hessian_vector_product():
        w = jt.Variable(V)

        def f(v):
            with jt.GradientTape() as t2:
                with jt.GradientTape() as t1:
                    loss = jt.reduce_sum(jt.exp(w) * jt.sin(w))
                g = t1.gradient(loss, w)
                gv = jt.reduce_sum(g * v)
            return t2.gradient(gv, w)

        return f, (V,), [w]

    @case
    def custom_gradient_inside():
        @jt.custom_gradient
        def clip_grad(x):
            def grad(dy):
                return jt.clip_by_value(dy, -0.5, 0.5)
            return jt.identity(x), grad

        w = jt.Variable(V)

        def f():
            with jt.GradientTape() as tape:
                y = jt.reduce_sum(clip_grad(w * 3.0) * 2.0)
            return tape.gradient(y, w)

        return f, (), [w]

    @case
    def sgd_update_in_program_order():
        w = jt.Variable(B)

        def f(x):
            with jt.GradientTape() as tape:
                loss = jt.reduce_mean(jt.square(x @ w))
            g = tape.gradient(loss, w)
            before = w + 0.0
            w.assign_sub(0.1 * g)
            return loss, before, w.read_value()

        return f, (A,), [w]

    @case
    def returns_python_values_and_variables():
        w = jt.Variable(V)

        def f(x):
            return {"sum": jt.reduce_sum(x), "scale": 2.5, "none": None, "w": w, "n": 3}

        return f, (V,), [w]

    return cases


CASES = _cases()


def _np(x):
    if x is None:
        return None
    if isinstance(x, (jt.Tensor, jt.Variable)):
        return np.asarray(x.numpy())
    if isinstance(x, dict):
        return {k: _np(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_np(v) for v in x) if not hasattr(x, "_fields") else x
    return x


def _same(a, b, path="result"):
    if a is None or b is None:
        assert a is None and b is None, f"{path}: {a!r} vs {b!r}"
        return
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            _same(a[k], b[k], f"{path}[{k!r}]")
        return
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{path}: {a!r} vs {b!r}"
        for j, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{j}]")
        return
    if isinstance(a, np.ndarray):
        b = np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, f"{path}: {a.shape}{a.dtype} vs " \
                                                           f"{b.shape}{b.dtype}"
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12, err_msg=path)
        return
    assert a == b, f"{path}: {a!r} vs {b!r}"


@pytest.mark.filterwarnings("ignore:The dtype of the source tensor must be floating")
@pytest.mark.parametrize("backend", ["interpret", "cpu"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_tape_case_inside_function(name, backend):
    make = CASES[name]
    fn, args, variables = make()
    # a jt.function takes arrays as tensors; eagerly they must be tensors already
    eager_args = [jt.constant(a) if isinstance(a, (np.ndarray, np.generic)) else a
                  for a in args]
    eager = [_np(fn(*eager_args)), _np(fn(*eager_args))]
    eager_vars = [v.numpy() for v in variables]
    fn2, args2, variables2 = make()
    f = jt.function(fn2, backend=backend)
    got = [_np(f(*args2)), _np(f(*args2))]
    info = f.cache_info()
    assert info.traces == 1 and info.hits == 1 and info.misses == 1
    for e, g in zip(eager, got):
        if isinstance(e, dict) and "scale" in e:  # returned Python numbers become tensors
            assert isinstance(g["scale"], np.ndarray) and g["scale"].dtype == np.float32
            assert isinstance(g["n"], np.ndarray) and g["n"].dtype == np.int32
            e = dict(e, scale=np.asarray(np.float32(e["scale"])), n=np.asarray(np.int32(3)))
        _same(e, g)
    for v, want in zip(variables2, eager_vars):
        np.testing.assert_allclose(v.numpy(), want, rtol=1e-10, atol=1e-12)


def test_second_gradient_on_non_persistent_tape_raises_at_trace():
    @jt.function
    def f(x):
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = x * x
        tape.gradient(y, x)
        return tape.gradient(y, x)

    with pytest.raises(RuntimeError, match="only be used to compute one set of gradients"):
        f(jt.constant(2.0))


def test_numpy_of_a_tensor_inside_trace_raises():
    @jt.function
    def f(x):
        return float(x.numpy()) * 2

    with pytest.raises(TypeError, match="symbolic"):
        f(jt.constant(2.0))


def test_python_bool_of_tensor_inside_trace_raises():
    @jt.function
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(TypeError, match="Python control flow on a tensor"):
        f(jt.constant(2.0))


def test_variable_as_target_inside_function():
    w = jt.Variable(np.arange(3.0))

    def f():
        with jt.GradientTape() as tape:
            y = w * 2.0
        return tape.gradient(w, w), tape.gradient if False else None

    want = f()[0].numpy()

    @jt.function
    def g():
        with jt.GradientTape(persistent=True) as tape:
            y = jt.reduce_sum(w * 2.0)
        return tape.gradient(w, w), tape.gradient(y, w)

    a, b = g()
    np.testing.assert_array_equal(a.numpy(), want)
    np.testing.assert_array_equal(b.numpy(), [2.0, 2.0, 2.0])


# ---------------------------------------------------------------------------
# the foundation's operator, indexing and random-program cases, inside a function

from hypothesis import given, settings  # noqa: E402
from test_tape_semantics import (  # noqa: E402
    _OPERATOR_CASES, _X3, _finite_diff, _programs, _run_jt,
)


@pytest.mark.filterwarnings("ignore:.*triggered tracing")  # a new jt.function per case, by design
@pytest.mark.parametrize("backend", ["interpret", "cpu"])
@pytest.mark.parametrize("name", sorted(_OPERATOR_CASES))
def test_operator_gradients_inside_function(name, backend):
    f, df = _OPERATOR_CASES[name]
    x = jt.Variable(_X3.copy())

    @jt.function(backend=backend)
    def g():
        with jt.GradientTape() as tape:
            y = f(x)
        return tape.gradient(y, x)

    np.testing.assert_allclose(g().numpy(), df(_X3), rtol=1e-12)
    np.testing.assert_allclose(g().numpy(), df(_X3), rtol=1e-12)


@pytest.mark.filterwarnings("ignore:.*triggered tracing")  # a new jt.function per case, by design
@pytest.mark.parametrize("index, expected", [
    ((slice(None), slice(1, None)), [[0, 1, 1], [0, 1, 1]]),
    (1, [[0, 0, 0], [1, 1, 1]]),
    ((Ellipsis, 0), [[1, 0, 0], [1, 0, 0]]),
    ((None,), [[1, 1, 1], [1, 1, 1]]),
])
def test_matrix_indexing_gradients_inside_function(index, expected):
    m = jt.Variable(np.arange(6.0).reshape(2, 3))

    @jt.function(backend="cpu")
    def g():
        with jt.GradientTape() as tape:
            y = m[index]
        return y, tape.gradient(y, m)

    y, d = g()
    assert y.shape == np.arange(6.0).reshape(2, 3)[index].shape
    np.testing.assert_array_equal(d.numpy(), np.array(expected, np.float64))


@pytest.mark.filterwarnings("ignore:.*triggered tracing")  # a new jt.function per case, by design
@settings(max_examples=25, deadline=None)
@given(_programs())
def test_random_program_gradient_inside_function(case):
    """The foundation's random programs (hypothesis), traced: the gradient of a
    function equals finite differences and the eager tape, first and second order."""
    prog, xs = case
    fd = _finite_diff(prog, xs)

    def grads(x):
        with jt.GradientTape() as outer:
            outer.watch(x)
            with jt.GradientTape() as tape:
                tape.watch(x)
                targets = _run_jt(prog, x)
            g = tape.gradient(targets, x, unconnected_gradients="zero")
            s = jt.reduce_sum(g * g)
        return g, outer.gradient(s, x, unconnected_gradients="zero")

    want = [t.numpy() for t in grads(jt.constant(xs))]
    got = [t.numpy() for t in jt.function(grads, backend="interpret")(xs)]
    np.testing.assert_allclose(got[0], fd, rtol=1e-5, atol=1e-7)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
