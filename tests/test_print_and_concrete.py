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
    (({"a": np.array([1, 2]), "b": 3}, [np.float32(1.0), "x"]), {"sep": "|", "end": "!\n"},
     "{'a': [1 2], 'b': 3}|[1, 'x']!\n"),
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
