"""jt.debugging.explain_gradient: why a gradient is None (which rule, which op, which
line of the user's code), or through which ops it is not; JITTAPE_EXPLAIN_NONE=1 logs
the explanation whenever ``gradient`` returns None."""

import gc
import logging
import weakref

import numpy as np
import pytest

import jittape as jt

explain = jt.debugging.explain_gradient
SRC = open(__file__).read().splitlines()


def line(tag: str) -> str:
    """``file:line`` of the one line of this file that ends with ``# <tag>``."""
    hits = [k + 1 for k, text in enumerate(SRC) if text.rstrip().endswith(f"# {tag}")]
    assert len(hits) == 1, (tag, hits)
    return f"{__file__}:{hits[0]}"


def short(tag: str) -> str:
    return "test_explain_gradient.py:" + line(tag).rsplit(":", 1)[1]


def check(e, cause, tag=None, op=None):
    assert e.cause == cause, repr(e)
    if tag is not None:
        assert e.loc == line(tag), repr(e)
        assert line(tag) in str(e) or cause == "connected", repr(e)
    if op is not None:
        assert e.op == op, repr(e)
    assert str(e) == e.message
    assert cause != "connected" or "The gradient is not None" in str(e), str(e)


def test_connected_names_the_path_persistent_tape_after_gradient():
    w = jt.Variable([1.0, 2.0])
    x = jt.constant([3.0, 4.0])
    with jt.GradientTape(persistent=True) as tape:
        h = w * x  # L-mul
        y = jt.reduce_sum(jt.tanh(h))  # L-sum
    assert tape.gradient(y, w) is not None
    e = explain(tape, y, w)
    check(e, "connected")
    assert e.connected
    text = str(e)
    assert "connected through: read@" in text, text
    assert f"multiply@{short('L-mul')} -> tanh@{short('L-sum')} -> " \
           f"reduce_sum@{short('L-sum')}" in text, text
    assert e.path[1] == ("multiply", line("L-mul")), e.path


def test_not_watched_constant():
    w = jt.Variable(2.0)
    x = jt.constant(3.0)
    with jt.GradientTape() as tape:
        y = w * x  # L-use
    e = explain(tape, y, x)
    check(e, "not_watched", "L-use", "multiply")
    assert "tape.watch(x)" in str(e)
    assert tape.gradient(y, x) is None


def test_not_watched_with_watch_accessed_variables_false():
    w = jt.Variable(2.0)
    with jt.GradientTape(watch_accessed_variables=False) as tape:
        y = w * 3.0  # L-read
    check(explain(tape, y, w), "not_watched", "L-read", "read")


def test_not_trainable_variable():
    frozen = jt.Variable([1.0, 2.0], trainable=False, name="frozen")
    w = jt.Variable([1.0, 1.0])
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(frozen * w)  # L-frozen
    e = explain(tape, y, frozen)
    check(e, "not_trainable", "L-frozen", "read")
    assert "trainable=False" in str(e) and "'frozen:0'" in str(e)


def test_stop_gradient_names_the_op_and_line():
    w = jt.Variable([1.0, 2.0])
    x = jt.constant([3.0, 4.0])
    with jt.GradientTape() as tape:
        h = w * 2.0
        s = jt.stop_gradient(h)  # L-stop
        y = jt.reduce_sum(s * x)
    e = explain(tape, y, w)  # a non-persistent tape, before its gradient call
    check(e, "stop_gradient", "L-stop", "stop_gradient")
    assert tape.gradient(y, w) is None


def test_source_that_is_the_output_of_stop_gradient():
    x = jt.constant(1.0)
    with jt.GradientTape() as tape:
        tape.watch(x)
        s = jt.stop_gradient(x * 2.0)  # L-stop-src
        y = s * 3.0
    check(explain(tape, y, s), "stop_gradient", "L-stop-src", "stop_gradient")


def test_integer_dtype_on_the_path():
    w = jt.Variable([1.5, 2.5])
    with jt.GradientTape() as tape:
        i = jt.cast(w * 3.0, jt.int32)  # L-cast
        y = jt.reduce_sum(jt.cast(i * 2, jt.float32))
    e = explain(tape, y, w)
    check(e, "integer", "L-cast", "cast")
    assert "int32" in str(e)


def test_comparison_on_the_path_is_a_bool_value():
    w = jt.Variable([1.0, 2.0])
    x = jt.constant([3.0, 4.0])
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(jt.where(w > 1.5, x, x * 2.0))  # L-where
    e = explain(tape, y, w)
    check(e, "integer", "L-where", "greater")
    assert "bool" in str(e)


def test_op_without_gradient():
    w = jt.Variable([1.5, 2.5])
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(jt.floordiv(w, 2.0))  # L-floordiv
    check(explain(tape, y, w), "no_gradient", "L-floordiv", "floordiv")
    assert tape.gradient(y, w) is None


def test_integer_source():
    i = jt.constant([1, 2])
    with jt.GradientTape() as tape:
        tape.watch(jt.constant(1.0))
        y = jt.cast(i, jt.float32) * 2.0  # L-int-src
    e = explain(tape, y, i)
    check(e, "integer_source", "L-int-src", "cast")
    assert "int32" in str(e)


def test_numpy_call_made_a_constant():
    w = jt.Variable([1.0, 2.0])
    with jt.GradientTape() as tape:
        h = w * 2.0  # L-made
        c = jt.constant(h.numpy())  # L-numpy
        y = jt.reduce_sum(c * 3.0)
    e = explain(tape, y, w)
    check(e, "outside_tape", "L-numpy")
    assert ".numpy()" in str(e) and f"multiply at {line('L-made')}" in str(e)


def test_numpy_function_made_a_constant():
    w = jt.Variable([1.0, 2.0])
    with jt.GradientTape() as tape:
        h = w * 2.0
        y = jt.reduce_sum(jt.constant(np.exp(h)))  # L-np-exp
    e = explain(tape, y, w)
    check(e, "outside_tape", "L-np-exp")
    assert "np.asarray" in str(e)


def test_target_made_from_a_numpy_array():
    w = jt.Variable([1.0, 2.0])
    with jt.GradientTape() as tape:
        w.read_value()
        y = jt.constant(np.ones(2, np.float32))
    e = explain(tape, y, w)
    check(e, "outside_tape")
    assert "constant" in str(e)


def test_target_computed_before_the_tape_started():
    w = jt.Variable([1.0, 2.0])
    y = jt.reduce_sum(w * 2.0)
    with jt.GradientTape() as tape:  # L-enter
        z = y * 3.0
    check(explain(tape, z, w), "before_recording", "L-enter")
    x = jt.constant(1.0)
    y = x * x
    with jt.GradientTape() as tape:  # L-enter2
        tape.watch(x)
    check(explain(tape, y, x), "before_recording", "L-enter2")


def test_value_computed_before_the_tape_started():
    x = jt.constant([1.0, 2.0])
    y = x * x
    with jt.GradientTape() as tape:
        tape.watch(x)
        z = jt.reduce_sum(y * 2.0)  # L-uses-early
    e = explain(tape, z, x)
    check(e, "before_recording", "L-uses-early", "multiply")


def test_computed_inside_stop_recording():
    w = jt.Variable([1.0, 2.0])
    with jt.GradientTape() as tape:
        with tape.stop_recording():
            y = jt.reduce_sum(w * 2.0)
    check(explain(tape, y, w), "not_recording")


def test_watched_after_it_was_used():
    x = jt.constant([1.0, 2.0])
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(x * 2.0)  # L-early-use
        tape.watch(x)  # L-late-watch
    e = explain(tape, y, x)
    check(e, "watched_late", "L-early-use", "multiply")
    assert line("L-late-watch") in str(e)


def test_target_recorded_before_reset():
    x = jt.constant(2.0)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = x * x
        tape.reset()  # L-reset
        tape.watch(x)
    check(explain(tape, y, x), "reset", "L-reset", "reset")


def test_unconnected_source():
    w = jt.Variable(1.0)
    v = jt.Variable(2.0)
    with jt.GradientTape() as tape:
        v.read_value()
        y = w * 3.0
    check(explain(tape, y, v), "unconnected")


def test_non_persistent_tape_after_gradient_says_it_was_used():
    w = jt.Variable([1.0, 2.0])
    v = jt.Variable([1.0, 2.0])
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(jt.stop_gradient(w * 2.0) * v)  # L-stop-used
    gw, gv = tape.gradient(y, [w, v])  # L-grad-used
    assert gw is None and gv is not None
    e = explain(tape, y, w)
    check(e, "tape_used", "L-grad-used", "gradient")
    assert e.earlier.cause == "stop_gradient" and e.earlier.loc == line("L-stop-used")
    assert line("L-stop-used") in str(e)
    e = explain(tape, y, v)
    check(e, "tape_used", "L-grad-used")
    assert "was not None" in str(e)
    other = jt.Variable(1.0)
    e = explain(tape, y, other)
    check(e, "tape_used", "L-grad-used")
    assert "cannot tell" in str(e)


def test_tape_without_the_debugging_hook_still_says_it_was_used(monkeypatch):
    """``jt.debugging`` installs the after-gradient explainer into the tape; a tape
    without it keeps only which call used it (and the second call still raises)."""
    from jittape import tape as tape_mod

    assert tape_mod._after_gradient is jt.debugging._after_gradient
    assert jt.debugging.UsedTape is tape_mod.UsedTape
    monkeypatch.setattr(tape_mod, "_after_gradient", None)
    w = jt.Variable([1.0, 2.0])
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(jt.stop_gradient(w * 2.0))
    assert tape.gradient(y, w) is None  # L-grad-nohook
    e = explain(tape, y, w)
    check(e, "tape_used", "L-grad-nohook", "gradient")
    assert "cannot tell" in str(e)
    with pytest.raises(RuntimeError) as err:
        tape.gradient(y, w)
    assert f"the first was gradient at {line('L-grad-nohook')}" in str(err.value)


def test_used_tape_keeps_no_arrays():
    w = jt.Variable(np.ones(1000, np.float32))
    with jt.GradientTape() as tape:
        h = w * 2.0
        s = jt.stop_gradient(h)
        y = jt.reduce_sum(s * h)
    refs = [weakref.ref(t) for t in (h, s)]
    gw = tape.gradient(y, [jt.constant(0.0), w])[1]
    assert gw is not None
    del h, s, y
    gc.collect()
    assert all(r() is None for r in refs)
    assert explain(tape, jt.constant(1.0), w).cause == "tape_used"


def test_custom_gradient_returning_none():
    @jt.custom_gradient
    def no_grad(x):
        return x * 1.0, lambda dy: None

    x = jt.constant(2.0)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = no_grad(x)  # L-custom
    check(explain(tape, y, x), "connected")  # the tape connects them...
    assert tape.gradient(y, x) is None  # L-custom-grad
    e = explain(tape, y, x)  # ...but the rule gave None, which the used tape remembers
    check(e, "tape_used", "L-custom-grad")
    assert e.earlier.cause == "vjp_none" and "custom_gradient" in str(e)
    assert f"custom_gradient@{short('L-custom')}" in str(e)


def test_nested_sources_and_list_targets():
    w = jt.Variable(1.0)
    v = jt.Variable(2.0, trainable=False)
    with jt.GradientTape(persistent=True) as tape:
        a = w * v
        b = w * 2.0
    out = explain(tape, [a, b], {"w": w, "v": v})
    assert out["w"].cause == "connected" and out["v"].cause == "not_trainable"


def test_explain_changes_nothing():
    w = jt.Variable([1.0, 2.0])
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(w * w)
    n = len(tape._nodes)
    explain(tape, y, w)
    assert len(tape._nodes) == n
    np.testing.assert_allclose(tape.gradient(y, w).numpy(), [2.0, 4.0])


def test_inside_function_names_lines_in_the_traced_function():
    w = jt.Variable([1.0, 2.0])
    seen = []

    @jt.function
    def step(x):
        with jt.GradientTape() as tape:
            h = jt.stop_gradient(w * x)  # L-fn-stop
            i = jt.cast(w, jt.int32)  # L-fn-cast
            y = jt.reduce_sum(h + jt.cast(i, jt.float32) + w * x)  # L-fn-sum
            cut_only = [jt.reduce_sum(h), jt.reduce_sum(jt.cast(i, jt.float32))]
        seen.append(explain(tape, cut_only, w))
        seen.append(explain(tape, y, w))
        return tape.gradient(y, w)

    g = step(jt.constant([3.0, 4.0]))
    np.testing.assert_allclose(g.numpy(), [3.0, 4.0])
    cut, ok = seen
    check(cut, "stop_gradient", "L-fn-stop", "stop_gradient")
    assert line("L-fn-cast") in str(cut)  # the other cut is named too
    check(ok, "connected")
    assert f"multiply@{short('L-fn-sum')}" in str(ok)


# -- JITTAPE_EXPLAIN_NONE=1 ------------------------------------------------------------


def _none_gradient():
    w = jt.Variable([1.0, 2.0])
    v = jt.Variable([1.0, 2.0])
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(jt.stop_gradient(w * 2.0) * v)  # L-log-stop
    return tape.gradient(y, [v, w])  # L-log-grad


def test_explain_none_logs_each_none_gradient(monkeypatch, caplog):
    monkeypatch.setenv("JITTAPE_EXPLAIN_NONE", "1")  # read at call time
    caplog.set_level(logging.INFO, logger="jittape")
    gv, gw = _none_gradient()
    assert gw is None and gv is not None
    msgs = [r.getMessage() for r in caplog.records if r.name == "jittape"]
    assert len(msgs) == 1, msgs
    assert "source 1 has gradient None" in msgs[0], msgs
    assert f"stop_gradient at {line('L-log-stop')}" in msgs[0], msgs
    assert line("L-log-grad") in msgs[0], msgs


def test_explain_none_logs_inside_function(monkeypatch, caplog):
    monkeypatch.setenv("JITTAPE_EXPLAIN_NONE", "1")
    caplog.set_level(logging.INFO, logger="jittape")
    w = jt.Variable([1.0, 2.0])

    @jt.function
    def step(x):
        with jt.GradientTape() as tape:
            y = jt.reduce_sum(jt.cast(jt.cast(w * x, jt.int32), jt.float32))  # L-log-fn
        return tape.gradient(y, w, unconnected_gradients="zero")

    np.testing.assert_allclose(step(jt.constant([1.0, 1.0])).numpy(), [0.0, 0.0])
    msgs = [r.getMessage() for r in caplog.records if r.name == "jittape"]
    assert any(f"cast at {line('L-log-fn')}" in m and "int32" in m for m in msgs), msgs


@pytest.mark.parametrize("value", ["", "0"])
def test_explain_none_off_logs_nothing(monkeypatch, caplog, value):
    monkeypatch.setenv("JITTAPE_EXPLAIN_NONE", value)
    caplog.set_level(logging.INFO, logger="jittape")
    gv, gw = _none_gradient()
    assert gw is None
    assert not [r for r in caplog.records if r.name == "jittape"]
