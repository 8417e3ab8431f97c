"""jt.print (tf.print: at run time, every call of a compiled function) and
get_concrete_function with jt.TensorSpec (TF's ConcreteFunction surface)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import jittape as jt


# what TF 2.21 prints for the same calls (tf.print ... output_stream=sys.stdout)
@pytest.mark.parametrize("args, kw, want", [
    ((np.arange(10),), {}, "[0 1 2 ... 7 8 9]\n"),
    ((np.arange(10),), {"summarize": -1}, "[0 1 2 3 4 5 6 7 8 9]\n"),
    (("loss:", np.float32(1.5), "x", np.array([[1, 2.5], [3, 4]], np.float32)), {},
     "loss: 1.5 x [[1 2.5]\n [3 4]]\n"),
    ((np.float32(0.1), np.float32(1e-8), np.float32(123456789.0), np.int64(2), np.bool_(True)), {},
     "0.1 1e-08 123456792 2 1\n"),
    (({"a": np.array([1, 2]), "b": 3}, [jt.constant(np.float32(1.0)), "x"]),
     {"sep": "|", "end": "!\n"}, "{'a': [1 2], 'b': 3}|[1, 'x']!\n"),
    ((np.array([1.0, np.nan, np.inf], np.float32), np.float64(3.14159265)), {},
     "[1 nan inf] 3.14159265\n"),
    ((np.arange(12).reshape(2, 2, 3),), {},
     "[[[0 1 2]\n  [3 4 5]]\n\n [[6 7 8]\n  [9 10 11]]]\n"),
])
def test_eager_print_formats_as_tf(capsys, args, kw, want):
    jt.print(*[jt.constant(a) if isinstance(a, (np.ndarray, np.generic)) else
               ({k: jt.constant(v) if isinstance(v, np.ndarray) else v for k, v in a.items()}
                if isinstance(a, dict) else a) for a in args], output_stream=sys.stdout, **kw)
    assert capsys.readouterr().out == want


def _c(v, dtype="float32"):
    return jt.constant(np.asarray(v, dtype))


# TF 2.21's own output for the same calls: floats with TF's digits (the shortest of %.6g
# that reads back as the same float32, else %.9g; %.15g / %.17g for float64), and
# everything that is not a tensor as pprint.pformat writes it
@pytest.mark.parametrize("make, want", [
    (lambda: [_c(2 / 3)], "0.666666687"),
    (lambda: [_c(2 / 3, "float64")], "0.66666666666666663"),
    (lambda: [_c([1 / 3, 2 / 3, 1.0, 0.1, 1e-8, 123456789.0, 1e20, -2.5e-5])],
     "[0.333333343 0.666666687 1 ... 123456792 1e+20 -2.5e-05]"),
    (lambda: [_c([1 / 3, 2 / 3], "float64")], "[0.33333333333333331 0.66666666666666663]"),
    (lambda: [_c(0.1, "float64"), _c(1 / 3, "float64"), _c(1e20, "float64")],
     "0.1 0.33333333333333331 1e+20"),
    (lambda: [_c(np.arange(10) / 3)], "[0 0.333333343 0.666666687 ... 2.33333325 2.66666675 3]"),
    (lambda: [_c(np.arange(20).reshape(4, 5) / 7)],
     "[[0 0.142857149 0.285714298 0.428571433 0.571428597]\n"
     " [0.714285731 0.857142866 1 1.14285719 1.28571427]\n"
     " [1.42857146 1.57142854 1.71428573 1.85714281 2]\n"
     " [2.14285707 2.28571439 2.42857146 2.57142854 2.71428561]]"),
    (lambda: [_c(v) for v in (100.0, 1e6, 1e7, 1e16, 1234567.0, 0.0001, 0.00001)],
     "100 1e+06 1e+07 1e+16 1234567 0.0001 1e-05"),
    (lambda: [_c(v, "float64") for v in (100.0, 1e15, 1e16, 1e17, 123456789012345678.0)],
     "100 1e+15 1e+16 1e+17 1.2345678901234568e+17"),
    (lambda: [_c(3, "int32"), _c([1, -2], "int64"), _c(True, "bool"), _c([True, False], "bool")],
     "3 [1 -2] 1 [1 0]"),
    (lambda: [_c([np.nan, np.inf, -np.inf, -0.0, 0.0]), _c([-np.nan, np.nan])],
     "[nan inf -inf -0 0] [-nan nan]"),
    (lambda: [{"a": _c(2 / 3), "b": [_c(1.5), 2 / 3]}, (_c([0.1, 0.2]),)],
     "{'a': 0.666666687, 'b': [1.5, 0.6666666666666666]} ([0.1 0.2],)"),
    (lambda: [{"zz": _c(1, "int32"), "aa": [_c(2 / 3), "s"]}],
     "{'aa': [0.666666687, 's'], 'zz': 1}"),
    (lambda: ["x", 2 / 3, np.float32(2 / 3), np.float64(2 / 3)],
     "x 0.6666666666666666 np.float32(0.6666667) np.float64(0.6666666666666666)"),
    (lambda: [np.array([2 / 3, 1 / 3], np.float32)], "array([0.6666667 , 0.33333334], dtype=float32)"),
    (lambda: [True, 3, [True, 3, None], None], "True 3 [True, 3, None] None"),
    (lambda: ["has {} in it", _c(1.0)], "has {} in it 1"),
    (lambda: [jt.Variable(np.float32(2 / 3))], "0.666666687"),
    (lambda: [_c(2 / 3, "float16"), _c([0.1, 1000], "float16")], "0.666503906 [0.0999755859 1000]"),
    (lambda: [[_c(float(i)) for i in range(30)]],  # pformat wraps at 80 columns
     "[" + ",\n ".join(str(i) for i in range(30)) + "]"),
])
def test_print_writes_tfs_digits_and_pformats_the_rest(capsys, make, want):
    jt.print(*make(), output_stream=sys.stdout)
    assert capsys.readouterr().out == want + "\n"


def test_print_inside_a_function_writes_tfs_digits(capsys):
    @jt.function(backend="interpret")
    def f(x):
        jt.print("in fn", x, x * 2.0, {"half": x / 2.0, "k": 2 / 3}, output_stream=sys.stdout)
        return x

    f(_c([2 / 3, 1 / 3]))
    f(_c([0.1, 1e6]))
    assert capsys.readouterr().out.splitlines() == [
        "in fn [0.666666687 0.333333343] [1.33333337 0.666666687] "
        "{'half': [0.333333343 0.166666672], 'k': 0.6666666666666666}",
        "in fn [0.1 1e+06] [0.2 2e+06] {'half': [0.05 500000], 'k': 0.6666666666666666}"]


def test_tensor_repr_and_str_show_the_value_as_tf():
    # TF 2.21's, with tf. for jt.: <tf.Tensor: shape=(), dtype=float32,
    # numpy=0.6666666865348816>, tf.Tensor(0.6666667, shape=(), dtype=float32), ...
    assert repr(_c(2 / 3)) == "<jt.Tensor: shape=(), dtype=float32, numpy=0.6666666865348816>"
    assert str(_c(2 / 3)) == "jt.Tensor(0.6666667, shape=(), dtype=float32)"
    assert repr(_c(3, "int32")) == "<jt.Tensor: shape=(), dtype=int32, numpy=3>"
    assert str(_c(True, "bool")) == "jt.Tensor(True, shape=(), dtype=bool)"
    assert repr(_c([1, 2], "int32")) == \
        "<jt.Tensor: shape=(2,), dtype=int32, numpy=array([1, 2], dtype=int32)>"
    assert str(_c([1, 2], "int32")) == "jt.Tensor([1 2], shape=(2,), dtype=int32)"
    assert repr(_c([2 / 3, 1 / 3], "float64")) == \
        "<jt.Tensor: shape=(2,), dtype=float64, numpy=array([0.66666667, 0.33333333])>"
    m = _c([[1.0, 2.0], [3.0, 4.0]])
    assert repr(m) == ("<jt.Tensor: shape=(2, 2), dtype=float32, numpy=\narray([[1., 2.],\n"
                       "       [3., 4.]], dtype=float32)>")
    assert str(m) == "jt.Tensor(\n[[1. 2.]\n [3. 4.]], shape=(2, 2), dtype=float32)"
    assert repr(jt.Variable(np.array([1.0]), name="v")) == \
        "<jt.Variable 'v:0' shape=(1,) dtype=float64, numpy=array([1.])>"


def test_print_goes_to_stderr_by_default(capsys):
    jt.print("hi", jt.constant([1, 2]))
    got = capsys.readouterr()
    assert got.err == "hi [1 2]\n" and got.out == ""


def test_print_to_a_file_and_to_a_callable(tmp_path):
    path = tmp_path / "log.txt"
    jt.print("a", jt.constant(1), output_stream=f"file://{path}")
    jt.print("b", output_stream=f"file://{path}")
    assert path.read_text() == "a 1\nb\n"
    seen = []
    jt.print("c", jt.constant([1.5]), output_stream=seen.append)
    assert seen == ["c [1.5]"]
    with pytest.raises(ValueError, match="output_stream"):
        jt.print("x", output_stream="nowhere")


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_print_in_a_function_runs_at_every_call_python_print_at_trace(capsys, backend):
    @jt.function(backend=backend)
    def step(x):
        print("tracing")
        y = x * 2.0
        jt.print("y:", y, "sum:", jt.reduce_sum(y), output_stream=sys.stdout)
        return y + 1.0

    for k in range(3):
        out = step(jt.constant([1.0, float(k)]))
        np.testing.assert_allclose(out.numpy(), [3.0, 2.0 * k + 1.0])
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["tracing", "y: [2 0] sum: 2", "y: [2 2] sum: 4", "y: [2 4] sum: 6"]
    assert step.experimental_get_tracing_count() == 1
    if backend == "cpu":
        prog = step.get_concrete_function(jt.constant([1.0, 0.0])).program
        assert prog is not None and prog.ready and prog.fallback is None


def test_print_of_a_gradient_and_a_variable_inside_a_compiled_step(capsys):
    w = jt.Variable([1.0, 2.0])

    @jt.function
    def step(x):
        with jt.GradientTape() as tape:
            loss = jt.reduce_sum(w * x)
        g = tape.gradient(loss, w)
        w.assign_sub(0.5 * g)
        jt.print("g", g, "w", w, output_stream=sys.stdout)
        return loss

    step(jt.constant([2.0, 4.0]))
    step(jt.constant([2.0, 4.0]))
    # the variable prints as read at the jt.print: after the assign
    assert capsys.readouterr().out.splitlines() == ["g [2 4] w [0 0]", "g [2 4] w [-1 -2]"]


def test_a_function_that_only_prints(capsys):
    @jt.function
    def show(x):
        jt.print(x, output_stream=sys.stdout)

    assert show(jt.constant(3)) is None
    show(jt.constant(4))
    assert capsys.readouterr().out == "3\n4\n"


def _f(x, y, scale=2.0):
    return {"out": x * scale, "n": jt.reduce_sum(y)}


def test_concrete_function_from_specs():
    f = jt.function(_f)
    cf = f.get_concrete_function(jt.TensorSpec([None, 3], jt.float32),
                                 jt.TensorSpec([4], jt.int32))
    assert f.experimental_get_tracing_count() == 1
    args, kwargs = cf.structured_input_signature
    assert args[0] == jt.TensorSpec((None, 3), jt.float32) and args[0].name == "x"
    assert args[1] == jt.TensorSpec((4,), jt.int32) and args[2] == 2.0 and kwargs == {}
    assert cf.structured_outputs == {"out": jt.TensorSpec((None, 3), jt.float32),
                                     "n": jt.TensorSpec((), jt.int32)}
    text = cf.pretty_printed_signature()
    assert "x (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(None, 3), dtype=jt.float32" in text
    assert "scale (POSITIONAL_OR_KEYWORD): Literal[2.0]" in text and "Output Type:" in text
    assert "graph " in str(cf.graph)
    for n in (2, 5):  # any batch size: one trace
        out = cf(jt.ones([n, 3]), jt.ones([4], jt.int32))
        np.testing.assert_array_equal(out["out"].numpy(), np.full((n, 3), 2.0))
        assert int(out["n"].numpy()) == 4
    f(jt.ones([7, 3]), jt.ones([4], jt.int32))  # the Function reuses the trace too
    assert f.experimental_get_tracing_count() == 1
    with pytest.raises(TypeError, match="do not fit its signature"):
        cf(jt.ones([2, 4]), jt.ones([4], jt.int32))


def test_concrete_function_from_values_and_unknown_rank():
    f = jt.function(lambda x: x + 1.0)
    cf = f.get_concrete_function(jt.constant([1.0, 2.0]))
    assert cf.structured_input_signature[0][0] == jt.TensorSpec((2,), jt.float32)
    np.testing.assert_array_equal(cf(jt.constant([0.0, 1.0])).numpy(), [1.0, 2.0])
    with pytest.raises(TypeError, match="unknown rank"):
        f.get_concrete_function(jt.TensorSpec(None, jt.float32))
