"""Issue 19's TF behaviours, asked of TensorFlow itself: each program runs in TF and in
jittape (``m`` is either module) and must give the same answer. Runs only where
TensorFlow is installed (``pip install -e '.[tf]'``)."""

import numpy as np
import pytest

import jittape as jt

tf = pytest.importorskip("tensorflow")

BOTH = pytest.mark.parametrize("m", [tf, jt], ids=["tf", "jt"])


def _output_gradients_outer(m):
    x, w = m.constant(3.0), m.constant(1.0)
    with m.GradientTape() as outer:
        outer.watch(w)
        with m.GradientTape() as inner:
            inner.watch(x)
            y = x * x
        g = inner.gradient(y, x, output_gradients=w)
    return float(g), float(outer.gradient(g, w))


def _two_reads(m):
    v = m.Variable(3.0)
    with m.GradientTape() as tape:
        a = v.read_value()
        b = v.read_value()
        y = a * b
    ga, gv = tape.gradient(y, [a, v])
    return float(ga), float(gv)


def _division_dtypes(m):
    out = {}
    for dt in ("uint8", "int8", "int16", "int32", "int64"):
        x = m.constant(np.array([100, 50], dt))
        out[dt] = (x / x).dtype.name
    out["image"] = (m.constant(np.array([255], "uint8")) / 255).dtype.name
    return out


def _one_trace_for_every_batch(m):
    seen = []

    @m.function(input_signature=[m.TensorSpec([None, 3], m.float32)])
    def f(x):
        seen.append(tuple(x.shape))
        return m.reduce_sum(m.reshape(x, [m.shape(x)[0], -1]) * 2.0), m.shape(x)

    outs = [f(np.ones((n, 3), "float32")) for n in (4, 5, 4)]
    return seen, [(float(s), list(np.asarray(sh))) for s, sh in outs]


def _reduce_retracing(m):
    seen = []

    @m.function(reduce_retracing=True)
    def f(x):
        seen.append(tuple(x.shape))
        return m.reduce_sum(x)

    for n in (2, 3, 4, 5):
        f(np.ones((n, 2), "float32"))
    return seen


def _positional_and_keyword(m):
    seen = []

    @m.function
    def f(x, training=False):
        seen.append(training)
        return x * 2.0

    x = m.constant([1.0])
    f(x, True)
    f(x, training=True)
    f(x)
    f(x, False)
    return seen


def _format(m):
    t = m.constant(2.0 / 3.0)
    return f"{t:.3f}", "{:.4f}".format(t)


@pytest.mark.parametrize("program", [
    _output_gradients_outer, _two_reads, _division_dtypes, _one_trace_for_every_batch,
    _reduce_retracing, _positional_and_keyword, _format,
])
def test_same_as_tensorflow(program):
    assert program(jt) == program(tf)


def test_errors_of_the_same_type():
    def per_call_variable(m):
        @m.function
        def f(x):
            v = m.Variable(1.0)
            return x * v

        f(m.constant(1.0))

    def modifies_its_list(m):
        @m.function
        def f(x, acc):
            acc.append(x)
            return x

        f(m.constant(1.0), [])

    def set_argument(m):
        @m.function
        def f(x, s):
            return x

        f(m.constant(1.0), {1, 2})

    for program, err in [(per_call_variable, ValueError), (modifies_its_list, ValueError),
                         (set_argument, TypeError)]:
        for m in (tf, jt):
            with pytest.raises(err):
                program(m)
