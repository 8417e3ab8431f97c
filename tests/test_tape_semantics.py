"""One test per rule of TF_SEMANTICS.md ("Recording", "gradient(...)",
"jacobian and batch_jacobian") and DESIGN.md ("Semantics that users rely on")."""
import os
import re
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest

import jittape as jt

NON_PERSISTENT_MSG = (
    "A non-persistent GradientTape can only be used to compute one set of gradients"
)
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def npv(t):
    assert t is not None, "expected a gradient, got None"
    return np.asarray(t.numpy())


def same_vars(got, expected):
    return isinstance(got, tuple) and len(got) == len(expected) and all(
        a is b for a, b in zip(got, expected)
    )


def user_warnings(record):
    return [w for w in record if issubclass(w.category, UserWarning)]


# --------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------


def test_variables_auto_watched_constants_only_after_watch():
    v = jt.Variable(2.0)
    c = jt.constant(5.0)
    with jt.GradientTape(persistent=True) as tape:
        y_before = c * c * v
        tape.watch(c)
        y_after = c * c
    np.testing.assert_allclose(npv(tape.gradient(y_before, v)), 25.0)
    assert tape.gradient(y_before, c) is None  # c read before it was watched
    np.testing.assert_allclose(npv(tape.gradient(y_after, c)), 10.0)


def test_op_recorded_only_if_float_input_on_tape_cast_to_int_cuts():
    x = jt.Variable(2.7)
    with jt.GradientTape(persistent=True) as tape:
        i = jt.cast(x, jt.int32)
        y = jt.cast(i, jt.float32) * 2.0
        z = y + x * 3.0
    assert i.dtype == jt.int32
    assert tape.gradient(y, x) is None
    np.testing.assert_allclose(npv(tape.gradient(z, x)), 3.0)
    g = tape.gradient(y, x, unconnected_gradients="zero")
    np.testing.assert_array_equal(npv(g), 0.0)


def test_watch_nested_structures():
    a, b, c, d = (jt.constant(float(v)) for v in (1, 2, 3, 4))
    with jt.GradientTape() as tape:
        tape.watch([a, (b, {"c": c, "d": [d]})])
        y = a * b * c * d
    ga, gb, gc, gd = tape.gradient(y, [a, b, c, d])
    np.testing.assert_allclose(npv(ga), 24.0)
    np.testing.assert_allclose(npv(gb), 12.0)
    np.testing.assert_allclose(npv(gc), 8.0)
    np.testing.assert_allclose(npv(gd), 6.0)


def test_watch_variable_and_tuple():
    v = jt.Variable(3.0, trainable=False)
    c = jt.constant(2.0)
    with jt.GradientTape() as tape:
        tape.watch((v, c))
        y = v * c
    gv, gc = tape.gradient(y, (v, c))
    np.testing.assert_allclose(npv(gv), 2.0)
    np.testing.assert_allclose(npv(gc), 3.0)


_INT_WATCH_SCRIPT = textwrap.dedent(
    """
    import warnings
    import jittape as jt
    i = jt.constant([1, 2, 3], dtype=jt.int32)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for _ in range(12):
            with jt.GradientTape() as tape:
                tape.watch(i)
                y = i * 2
    hits = [w for w in rec
            if "The dtype of the watched tensor must be floating" in str(w.message)]
    print("COUNT", len(hits))
    print("USERWARNING", all(issubclass(w.category, UserWarning) for w in hits))
    print("MSG", str(hits[0].message) if hits else "")
    """
)


def _run_int_watch_script():
    # a fresh process: the warning is capped per process (at most 5 times), so
    # other tests that watch integer tensors must not use up the budget
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-c", _INT_WATCH_SCRIPT], env=env, capture_output=True, text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_watch_int_tensor_warns():
    out = _run_int_watch_script()
    count = int(re.search(r"COUNT (\d+)", out).group(1))
    assert count >= 1, out
    assert "USERWARNING True" in out, out
    assert re.search(r"MSG The dtype of the watched tensor must be floating.*int32", out), out


def test_watch_int_tensor_warning_is_limited_to_five():
    out = _run_int_watch_script()
    count = int(re.search(r"COUNT (\d+)", out).group(1))
    assert 1 <= count <= 5, out


def test_watch_int_tensor_warns_in_process():
    i = jt.constant([1, 2, 3], dtype=jt.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with jt.GradientTape() as tape:
            tape.watch(i)  # allowed: no exception (the warning may be capped already)
            y = i * 2
        assert tape.gradient(y, i) is None


@pytest.mark.parametrize(
    "value, type_name",
    [(np.array([1.0, 2.0], np.float32), "ndarray"), (3.0, "float")],
)
def test_watch_non_tensor_raises_value_error(value, type_name):
    with jt.GradientTape() as tape:
        with pytest.raises(ValueError, match=type_name):
            tape.watch(value)


def test_non_trainable_variable_not_auto_watched_but_explicitly_watchable():
    v = jt.Variable(3.0, trainable=False)
    with jt.GradientTape(persistent=True) as tape:
        y = v * v
        tape.watch(v)
        z = v * v
    assert tape.gradient(y, v) is None
    np.testing.assert_allclose(npv(tape.gradient(z, v)), 6.0)
    assert same_vars(tape.watched_variables(), (v,))


def test_watch_accessed_variables_false_requires_explicit_watch():
    v = jt.Variable(3.0)
    w = jt.Variable(4.0)
    with jt.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(w)
        y = v * w
    gv, gw = tape.gradient(y, [v, w])
    assert gv is None
    np.testing.assert_allclose(npv(gw), 3.0)


def test_watches_are_local_to_each_tape():
    x = jt.constant(3.0)
    with jt.GradientTape() as outer:
        outer.watch(x)
        with jt.GradientTape() as inner:
            y = x * x
        assert inner.gradient(y, x) is None
    np.testing.assert_allclose(npv(outer.gradient(y, x)), 6.0)


def test_watched_variables_in_creation_order():
    v1 = jt.Variable(1.0)
    v2 = jt.Variable(2.0)
    v3 = jt.Variable(3.0)
    frozen = jt.Variable(4.0, trainable=False)
    with jt.GradientTape() as tape:
        y = v3 * v1 * frozen
        y = y * v2
    watched = tape.watched_variables()
    assert isinstance(watched, tuple)
    assert len(watched) == 3
    assert watched[0] is v1 and watched[1] is v2 and watched[2] is v3


def test_watched_variables_after_non_persistent_gradient():
    v1 = jt.Variable(1.0)
    v2 = jt.Variable(2.0)
    with jt.GradientTape() as tape:
        y = v2 * v1
    tape.gradient(y, [v1, v2])
    watched = tape.watched_variables()
    assert isinstance(watched, tuple)
    assert len(watched) == 2 and watched[0] is v1 and watched[1] is v2


def test_watched_variables_cleared_by_reset():
    v1 = jt.Variable(1.0)
    v2 = jt.Variable(2.0)
    with jt.GradientTape() as tape:
        y = v1 * 2.0
        assert len(tape.watched_variables()) == 1
        tape.reset()
        assert same_vars(tape.watched_variables(), ())
        z = v2 * 3.0
    watched = tape.watched_variables()
    assert len(watched) == 1 and watched[0] is v2
    with pytest.warns(UserWarning, match=r"recorded before tape.reset\(\)"):
        gv1, gv2 = tape.gradient([y, z], [v1, v2])
    assert gv1 is None
    np.testing.assert_allclose(npv(gv2), 3.0)


def test_entering_recording_tape_raises():
    x = jt.Variable(1.0)
    tape = jt.GradientTape()
    with tape:
        with pytest.raises(ValueError, match="Tape is still recording"):
            with tape:
                pass
        y = x * 5.0
    np.testing.assert_allclose(npv(tape.gradient(y, x)), 5.0)


def test_reentering_finished_tape_records_more():
    x = jt.Variable(3.0)
    tape = jt.GradientTape()
    with tape:
        y = x * x
    w = y * 100.0  # between the two contexts: not recorded
    with tape:
        z = y * x
    np.testing.assert_allclose(npv(tape.gradient(z, x)), 27.0)  # 3 x^2


def test_reentering_finished_persistent_tape_records_more():
    x = jt.Variable(3.0)
    tape = jt.GradientTape(persistent=True)
    with tape:
        y = x * x
    w = y * 100.0
    with tape:
        z = y * x
    np.testing.assert_allclose(npv(tape.gradient(z, x)), 27.0)
    np.testing.assert_allclose(npv(tape.gradient(y, x)), 6.0)
    assert tape.gradient(w, x) is None


def test_stop_recording():
    x = jt.Variable(3.0)
    with jt.GradientTape(persistent=True) as tape:
        y = x * x
        with tape.stop_recording():
            z = x * x * x
        w = x * 4.0
    np.testing.assert_allclose(npv(tape.gradient(y, x)), 6.0)
    assert tape.gradient(z, x) is None
    np.testing.assert_allclose(npv(tape.gradient(w, x)), 4.0)
    np.testing.assert_allclose(npv(z), 27.0)


def test_stop_recording_does_not_affect_outer_tape():
    x = jt.Variable(3.0)
    with jt.GradientTape() as outer:
        with jt.GradientTape() as inner:
            with inner.stop_recording():
                z = x * x
        assert inner.gradient(z, x) is None
    np.testing.assert_allclose(npv(outer.gradient(z, x)), 6.0)


def test_stop_recording_outside_context_raises_value_error():
    tape = jt.GradientTape()
    with pytest.raises(ValueError, match=r"Tape is not recording\."):
        with tape.stop_recording():
            pass
    x = jt.Variable(1.0)
    with tape:
        y = x * 2.0
    with pytest.raises(ValueError, match=r"Tape is not recording\."):
        with tape.stop_recording():
            pass


def test_stop_recording_after_release_raises_runtime_error():
    x = jt.Variable(1.0)
    with jt.GradientTape() as tape:
        y = x * 2.0
    tape.gradient(y, x)
    with pytest.raises(RuntimeError):
        with tape.stop_recording():
            pass


def test_reset_drops_recorded_ops():
    v = jt.Variable(1.0)
    with jt.GradientTape() as t:
        loss = v * v
        t.reset()
        loss += v * v
    np.testing.assert_allclose(npv(t.gradient(loss, v)), 2.0)


def test_reset_drops_explicit_watches():
    c = jt.constant(2.0)
    with jt.GradientTape() as t:
        t.watch(c)
        t.reset()
        y = c * c
    assert t.gradient(y, c) is None


def test_reset_outside_context_raises():
    tape = jt.GradientTape()
    with pytest.raises(ValueError, match=r"Tape is not recording\."):
        tape.reset()
    x = jt.Variable(1.0)
    with tape:
        y = x * 3.0
    with pytest.raises(ValueError, match=r"Tape is not recording\."):
        tape.reset()


# --------------------------------------------------------------------------
# gradient(...)
# --------------------------------------------------------------------------


def test_second_gradient_on_non_persistent_raises_runtime_error():
    x = jt.Variable(2.0)
    with jt.GradientTape() as tape:
        y = x * x
    tape.gradient(y, x)
    with pytest.raises(RuntimeError, match=NON_PERSISTENT_MSG):
        tape.gradient(y, x)


def test_persistent_allows_many_gradients():
    x = jt.Variable(2.0)
    with jt.GradientTape(persistent=True) as tape:
        y = x * x * x
    for _ in range(3):
        np.testing.assert_allclose(npv(tape.gradient(y, x)), 12.0)
    j = tape.jacobian(y, x)
    np.testing.assert_allclose(npv(j), 12.0)


def test_gradient_inside_context_non_persistent_stops_recording_silently():
    x = jt.Variable(3.0)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        with jt.GradientTape() as tape:
            y = x * x
            g = tape.gradient(y, x)
            z = x * x * x  # the tape stopped recording; this must not fail
        np.testing.assert_allclose(npv(z), 27.0)
    np.testing.assert_allclose(npv(g), 6.0)
    assert user_warnings(rec) == [], [str(w.message) for w in rec]
    with pytest.raises(RuntimeError, match=NON_PERSISTENT_MSG):
        tape.gradient(z, x)


def test_gradient_inside_context_persistent_warns_and_records():
    x = jt.Variable(3.0)
    with jt.GradientTape(persistent=True) as tape:
        y = x**3
        with pytest.warns(UserWarning):
            dy = tape.gradient(y, x)
    np.testing.assert_allclose(npv(dy), 27.0)
    d2y = tape.gradient(dy, x)
    np.testing.assert_allclose(npv(d2y), 18.0)


def test_target_none_raises_type_error():
    x = jt.Variable(2.0)
    with jt.GradientTape(persistent=True) as tape:
        x * x
    with pytest.raises(TypeError):
        tape.gradient(None, x)


def test_unknown_unconnected_gradients_raises():
    x = jt.Variable(2.0)
    with jt.GradientTape(persistent=True) as tape:
        y = x * x
    with pytest.raises(ValueError, match=re.escape("Unknown value for unconnected_gradients")):
        tape.gradient(y, x, unconnected_gradients="nonsense")
    with pytest.raises(ValueError, match=re.escape("'nonsense'")):
        tape.gradient(y, x, unconnected_gradients="nonsense")


@pytest.mark.parametrize("mode", ["zero", "ZERO_ENUM"])
def test_unconnected_zero_gives_zeros_of_source_shape(mode):
    mode = jt.UnconnectedGradients.ZERO if mode == "ZERO_ENUM" else mode
    x = jt.Variable(2.0)
    c = jt.constant(np.ones((2, 3), np.float32))
    v = jt.Variable(np.ones((4,), np.float64))
    with jt.GradientTape() as tape:
        tape.watch(c)
        y = x * x
    gx, gc, gv = tape.gradient(y, [x, c, v], unconnected_gradients=mode)
    np.testing.assert_allclose(npv(gx), 4.0)
    assert gc.shape == (2, 3)
    np.testing.assert_array_equal(npv(gc), np.zeros((2, 3)))
    assert gv.shape == (4,)
    np.testing.assert_array_equal(npv(gv), np.zeros(4))
    assert gv.dtype == jt.float64


@pytest.mark.parametrize("mode", ["none", "NONE_ENUM", "default"])
def test_unconnected_none_gives_none(mode):
    x = jt.Variable(2.0)
    v = jt.Variable([1.0, 2.0])
    with jt.GradientTape() as tape:
        y = x * x
    if mode == "default":
        gx, gv = tape.gradient(y, [x, v])
    else:
        m = jt.UnconnectedGradients.NONE if mode == "NONE_ENUM" else mode
        gx, gv = tape.gradient(y, [x, v], unconnected_gradients=m)
    np.testing.assert_allclose(npv(gx), 4.0)
    assert gv is None


def test_non_scalar_target_is_sum():
    x = jt.constant([1.0, 2.0, 3.0])
    w = jt.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
    with jt.GradientTape(persistent=True) as tape:
        tape.watch([x, w])
        y = x * x
        m = jt.reshape(x, (1, 3)) @ w  # shape (1, 2)
    np.testing.assert_allclose(npv(tape.gradient(y, x)), [2.0, 4.0, 6.0])
    np.testing.assert_allclose(npv(tape.gradient(m, x)), w.numpy().sum(axis=1))
    np.testing.assert_allclose(
        npv(tape.gradient(m, w)), np.outer([1.0, 2.0, 3.0], [1.0, 1.0])
    )


def test_list_of_targets_is_sum():
    x = jt.Variable([1.0, 2.0])
    with jt.GradientTape() as tape:
        a = x * x
        b = 3.0 * x
        c = jt.reduce_sum(x)
    np.testing.assert_allclose(npv(tape.gradient([a, b, c], x)), [6.0, 8.0])


def test_output_gradients_weight_targets():
    x = jt.Variable(3.0)
    y = jt.Variable(2.0)
    with jt.GradientTape(persistent=True) as tape:
        xy = x * y
    (g,) = tape.gradient([xy, x], [x], output_gradients=[1.0, 2.0])
    np.testing.assert_allclose(npv(g), 4.0)  # y*1 + 1*2


def test_output_gradients_non_scalar():
    x = jt.constant([1.0, 2.0, 3.0])
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    g = tape.gradient(y, x, output_gradients=jt.constant([1.0, 10.0, 100.0]))
    np.testing.assert_allclose(npv(g), [2.0, 40.0, 600.0])


def test_target_identical_to_source_gives_ones():
    x = jt.constant([[1.0, 2.0], [3.0, 4.0]])
    with jt.GradientTape() as tape:
        tape.watch(x)
    g = tape.gradient(x, x)
    np.testing.assert_array_equal(npv(g), np.ones((2, 2)))


def test_target_not_produced_on_tape_gives_none():
    x = jt.Variable(2.0)
    y_outside = x * 5.0
    with jt.GradientTape(persistent=True) as tape:
        z = x * x
    assert tape.gradient(y_outside, x) is None
    np.testing.assert_allclose(npv(tape.gradient(z, x)), 4.0)
    g = tape.gradient(y_outside, x, unconnected_gradients="zero")
    np.testing.assert_array_equal(npv(g), 0.0)


def test_repeated_sources_each_get_full_gradient():
    x = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        y = x * x
    g1, g2 = tape.gradient(y, [x, x])
    np.testing.assert_allclose(npv(g1), 6.0)
    np.testing.assert_allclose(npv(g2), 6.0)


def test_identity_not_value_decides_source():
    a = jt.constant(2.0)
    b = jt.constant(2.0)
    with jt.GradientTape() as tape:
        tape.watch(a)
        y = a * a
    ga, gb = tape.gradient(y, [a, b])
    np.testing.assert_allclose(npv(ga), 4.0)
    assert gb is None


def test_integer_source_gives_none_and_warns():
    i = jt.constant(3, dtype=jt.int32)
    x = jt.Variable(2.0)
    with jt.GradientTape() as tape:
        y = x * x + jt.cast(i, jt.float32)
    with pytest.warns(UserWarning):
        gx, gi = tape.gradient(y, [x, i])
    np.testing.assert_allclose(npv(gx), 4.0)
    assert gi is None


def test_bool_and_int64_sources_give_none_without_exception():
    b = jt.constant([True, False])
    i = jt.constant([1, 2], dtype=jt.int64)
    x = jt.Variable(2.0)
    with jt.GradientTape() as tape:
        y = x * x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gx, gb, gi = tape.gradient(y, [x, b, i])
    np.testing.assert_allclose(npv(gx), 4.0)
    assert gb is None and gi is None


def test_result_nesting_follows_sources():
    a = jt.Variable(1.0)
    b = jt.Variable(2.0)
    c = jt.Variable(3.0)
    with jt.GradientTape(persistent=True) as tape:
        y = a * b * c
    single = tape.gradient(y, a)
    np.testing.assert_allclose(npv(single), 6.0)

    lst = tape.gradient(y, [a, b])
    assert type(lst) is list and len(lst) == 2
    tup = tape.gradient(y, (a, b))
    assert type(tup) is tuple and len(tup) == 2
    dct = tape.gradient(y, {"a": a, "c": c})
    assert isinstance(dct, dict) and set(dct) == {"a", "c"}
    np.testing.assert_allclose(npv(dct["a"]), 6.0)
    np.testing.assert_allclose(npv(dct["c"]), 2.0)

    nested = tape.gradient(y, {"p": [a, (b,)], "q": c})
    assert isinstance(nested, dict) and set(nested) == {"p", "q"}
    assert type(nested["p"]) is list and len(nested["p"]) == 2
    assert type(nested["p"][1]) is tuple and len(nested["p"][1]) == 1
    np.testing.assert_allclose(npv(nested["p"][0]), 6.0)
    np.testing.assert_allclose(npv(nested["p"][1][0]), 3.0)
    np.testing.assert_allclose(npv(nested["q"]), 2.0)


def test_backward_behind_stop_gradient_never_executed():
    calls = []

    @jt.custom_gradient
    def spy(x):
        def grad(dy):
            calls.append("called")
            return dy * 2.0

        return x * 1.0, grad

    x = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        y = jt.stop_gradient(spy(x)) + x
    np.testing.assert_allclose(npv(tape.gradient(y, x)), 1.0)
    assert calls == []


def test_backward_downstream_of_stop_gradient_never_executed():
    calls = []

    @jt.custom_gradient
    def spy(x):
        def grad(dy):
            calls.append("called")
            return dy * 2.0

        return x * 1.0, grad

    x = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        s = jt.stop_gradient(x * x)
        y = spy(s) * x
    np.testing.assert_allclose(npv(tape.gradient(y, x)), 9.0)
    assert calls == []


def test_snapshot_assign_inside_tape():
    v = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        y = v * v
        v.assign(10.0)
    np.testing.assert_allclose(npv(tape.gradient(y, v)), 6.0)
    np.testing.assert_allclose(v.numpy(), 10.0)


def test_snapshot_assign_after_tape():
    v = jt.Variable(np.array([1.0, 2.0], np.float32))
    w = jt.Variable(np.array([3.0, 4.0], np.float32))
    with jt.GradientTape(persistent=True) as tape:
        y = jt.reduce_sum(v * w)
        z = jt.reduce_sum(jt.exp(v))
    v.assign([10.0, 20.0])
    w.assign_add([1.0, 1.0])
    gv, gw = tape.gradient(y, [v, w])
    np.testing.assert_allclose(npv(gv), [3.0, 4.0])
    np.testing.assert_allclose(npv(gw), [1.0, 2.0])
    w.assign_sub([100.0, 100.0])
    np.testing.assert_allclose(npv(tape.gradient(z, v)), np.exp([1.0, 2.0]), rtol=1e-6)


def test_constant_does_not_alias_numpy_input():
    arr = np.array([1.0, 2.0], np.float32)
    c = jt.constant(arr)
    with jt.GradientTape() as tape:
        tape.watch(c)
        y = c * c
    arr[:] = 100.0
    np.testing.assert_allclose(npv(tape.gradient(y, c)), [2.0, 4.0])
    np.testing.assert_allclose(npv(c), [1.0, 2.0])


def test_python_control_flow_recorded_as_it_ran():
    def f(x):
        y = x
        for i in range(3):
            if i % 2 == 0:
                y = y * x
            else:
                y = y + x
        return y  # ((x*x)+x)*x = x^3 + x^2

    x = jt.Variable(2.0)
    with jt.GradientTape() as tape:
        y = f(x)
    np.testing.assert_allclose(npv(tape.gradient(y, x)), 3 * 4 + 2 * 2)

    for start, expected in [(2.0, 4.0), (0.5, 3 * 0.25)]:
        x = jt.Variable(start)
        with jt.GradientTape() as tape:
            if x > 1.0:
                y = x**2
            else:
                y = x**3
        np.testing.assert_allclose(npv(tape.gradient(y, x)), expected)

    x = jt.Variable(2.0)
    with jt.GradientTape() as tape:
        y = x
        steps = 0
        while y < 100.0:  # 2 -> 4 -> 8 -> ... -> 128: y = x^7
            y = y * x
            steps += 1
    assert steps == 6
    np.testing.assert_allclose(npv(tape.gradient(y, x)), 7 * 2.0**6)


def test_where_with_bool_condition():
    x = jt.constant([-2.0, 3.0])
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.where(x > 0.0, x * x, -x)
    np.testing.assert_allclose(npv(tape.gradient(y, x)), [-1.0, 6.0])


def test_gradient_dtype_and_shape_follow_source():
    v = jt.Variable(np.ones((2, 3), np.float64))
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(v * v)
    g = tape.gradient(y, v)
    assert g.dtype == jt.float64
    assert g.shape == (2, 3)
    np.testing.assert_allclose(npv(g), 2.0 * np.ones((2, 3)))


# --------------------------------------------------------------------------
# jacobian and batch_jacobian
# --------------------------------------------------------------------------


def test_jacobian_elementwise_square_is_diag():
    xs = np.array([1.0, 2.0, 3.0], np.float32)
    x = jt.constant(xs)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = x**2
    j = tape.jacobian(y, x)
    assert j.shape == (3, 3)
    np.testing.assert_allclose(npv(j), np.diag(2 * xs))


def test_jacobian_shape_target_plus_source():
    wv = np.arange(6, dtype=np.float32).reshape(2, 3)
    xv = np.array([1.0, -1.0, 2.0], np.float32)
    w = jt.Variable(wv)
    x = jt.constant(xv)
    with jt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = jt.reshape(w @ jt.reshape(x, (3, 1)), (2,))
    jw = tape.jacobian(y, w)
    assert jw.shape == (2, 2, 3)
    expected = np.zeros((2, 2, 3), np.float32)
    for i in range(2):
        expected[i, i, :] = xv
    np.testing.assert_allclose(npv(jw), expected)
    jx = tape.jacobian(y, x)
    assert jx.shape == (2, 3)
    np.testing.assert_allclose(npv(jx), wv)
    jl = tape.jacobian(y, [w, x])
    assert isinstance(jl, list) and len(jl) == 2
    np.testing.assert_allclose(npv(jl[1]), wv)


def test_jacobian_matrix_target():
    xv = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    x = jt.constant(xv)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.sin(x)
    j = tape.jacobian(y, x)
    assert j.shape == (2, 2, 2, 2)
    expected = np.zeros((2, 2, 2, 2), np.float32)
    for a in range(2):
        for b in range(2):
            expected[a, b, a, b] = np.cos(xv[a, b])
    np.testing.assert_allclose(npv(j), expected, rtol=1e-6, atol=1e-7)


def test_jacobian_unconnected_is_none():
    x = jt.Variable([1.0, 2.0])
    z = jt.Variable([1.0, 2.0, 3.0])
    with jt.GradientTape() as tape:
        y = z * 2.0
    assert tape.jacobian(y, x) is None


def test_batch_jacobian_elementwise():
    xv = np.arange(12, dtype=np.float32).reshape(4, 3) / 10.0
    x = jt.constant(xv)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = x**2
    j = tape.batch_jacobian(y, x)
    assert j.shape == (4, 3, 3)
    expected = np.stack([np.diag(2 * row) for row in xv])
    np.testing.assert_allclose(npv(j), expected, rtol=1e-6)


def test_batch_jacobian_matmul_shape():
    xv = np.arange(12, dtype=np.float32).reshape(4, 3)
    wv = np.arange(6, dtype=np.float32).reshape(3, 2) - 2.0
    x = jt.constant(xv)
    w = jt.constant(wv)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = x @ w
    j = tape.batch_jacobian(y, x)
    assert j.shape == (4, 2, 3)
    np.testing.assert_allclose(npv(j), np.broadcast_to(wv.T, (4, 2, 3)))


def test_batch_jacobian_higher_rank_shapes():
    xv = np.ones((2, 3, 2), np.float32)
    x = jt.constant(xv)
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.reduce_sum(x, axis=2) * 2.0  # (2, 3)
    j = tape.batch_jacobian(y, x)
    assert j.shape == (2, 3, 3, 2)
    expected = np.zeros((2, 3, 3, 2), np.float32)
    for b in range(2):
        for i in range(3):
            expected[b, i, i, :] = 2.0
    np.testing.assert_allclose(npv(j), expected)


def test_batch_jacobian_rank_below_two_raises():
    x = jt.constant([1.0, 2.0, 3.0])
    with jt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
    with pytest.raises(ValueError, match="must have rank at least 2"):
        tape.batch_jacobian(y, x)
    x2 = jt.constant(np.ones((3, 2), np.float32))
    with jt.GradientTape(persistent=True) as tape:
        tape.watch(x2)
        y2 = jt.reduce_sum(x2, axis=1)  # rank 1 target
    with pytest.raises(ValueError, match="must have rank at least 2"):
        tape.batch_jacobian(y2, x2)


def test_batch_jacobian_mismatched_first_dims_raises():
    x = jt.constant(np.ones((4, 3), np.float32))
    with jt.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = jt.reshape(x * 2.0, (2, 6))
    with pytest.raises(ValueError, match="Need first dimension of target shape"):
        tape.batch_jacobian(y, x)


def test_batch_jacobian_unconnected_gives_zeros():
    x = jt.constant(np.ones((4, 3), np.float32))
    z = jt.constant(np.ones((4, 2), np.float32))
    with jt.GradientTape() as tape:
        tape.watch([x, z])
        y = z * 2.0
    j = tape.batch_jacobian(y, x)
    assert j is not None
    assert j.shape == (4, 2, 3)
    np.testing.assert_array_equal(npv(j), np.zeros((4, 2, 3)))


@pytest.mark.parametrize("first", ["gradient", "jacobian", "batch_jacobian"])
@pytest.mark.parametrize("second", ["gradient", "jacobian", "batch_jacobian"])
def test_jacobians_on_used_non_persistent_tape_raise(first, second):
    x = jt.constant(np.ones((2, 2), np.float32))
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    getattr(tape, first)(y, x)
    with pytest.raises(RuntimeError, match=NON_PERSISTENT_MSG):
        getattr(tape, second)(y, x)


# --------------------------------------------------------------------------
# threads
# --------------------------------------------------------------------------


def test_tapes_are_per_thread():
    x = jt.Variable(2.0)
    result = {}

    def worker():
        result["y"] = x * x

    with jt.GradientTape() as tape:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        z = x * 3.0
    assert same_vars(tape.watched_variables(), (x,))
    assert tape.gradient(result["y"], x) is None


def test_tape_in_other_thread_works_independently():
    x = jt.Variable(2.0)
    out = {}

    def worker():
        try:
            with jt.GradientTape() as t2:
                y = x * x * x
            out["g"] = t2.gradient(y, x)
        except Exception as e:  # pragma: no cover - reported below
            out["err"] = e

    with jt.GradientTape() as tape:
        y_main = x * x
        th = threading.Thread(target=worker)
        th.start()
        th.join()
    assert "err" not in out, out.get("err")
    np.testing.assert_allclose(npv(out["g"]), 12.0)
    np.testing.assert_allclose(npv(tape.gradient(y_main, x)), 4.0)


# --------------------------------------------------------------------------
# additional behaviours a TF user relies on
# --------------------------------------------------------------------------


def test_non_persistent_gradient_inside_context_stops_watching():
    v1 = jt.Variable(1.0)
    v2 = jt.Variable(2.0)
    with jt.GradientTape() as tape:
        y = v1 * 3.0
        tape.gradient(y, v1)
        z = v2 * 3.0  # after the tape stopped: v2 is not watched
    assert same_vars(tape.watched_variables(), (v1,))


def test_output_gradients_none_entry_means_ones():
    x = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        y = x * x
        z = x * 2.0
    g = tape.gradient([y, z], x, output_gradients=[None, jt.constant(3.0)])
    np.testing.assert_allclose(npv(g), 6.0 + 6.0)


def test_jacobian_unknown_unconnected_gradients_raises():
    x = jt.Variable([1.0, 2.0])
    with jt.GradientTape(persistent=True) as tape:
        y = x * x
    with pytest.raises(ValueError, match="Unknown value for unconnected_gradients"):
        tape.jacobian(y, x, unconnected_gradients="nonsense")


def test_jacobian_unconnected_zero_has_full_shape():
    x = jt.Variable([1.0, 2.0])
    z = jt.Variable([1.0, 2.0, 3.0])
    with jt.GradientTape() as tape:
        y = z * 2.0
    j = tape.jacobian(y, x, unconnected_gradients=jt.UnconnectedGradients.ZERO)
    assert j.shape == (3, 2)
    np.testing.assert_array_equal(npv(j), np.zeros((3, 2)))


def test_exception_inside_tape_context_stops_recording():
    x = jt.Variable(3.0)
    tape = jt.GradientTape(persistent=True)
    with pytest.raises(ZeroDivisionError):
        with tape:
            y = x * x
            1 / 0
    w = x * 5.0  # the tape left the thread's stack: not recorded
    with tape:  # and can be entered again
        z = y * x
    with jt.GradientTape() as other:
        u = x * 7.0
    np.testing.assert_allclose(npv(other.gradient(u, x)), 7.0)
    np.testing.assert_allclose(npv(tape.gradient(z, x)), 27.0)
    assert tape.gradient(w, x) is None


def test_op_error_inside_tape_leaves_tape_usable():
    x = jt.Variable(np.ones((2, 3), np.float32))
    w = jt.Variable(np.ones((4, 5), np.float32))
    with pytest.raises(ValueError):
        with jt.GradientTape() as tape:
            y = jt.reduce_sum(x * 2.0)
            jt.matmul(x, w)  # shape mismatch
    np.testing.assert_allclose(npv(tape.gradient(y, x)), 2.0 * np.ones((2, 3)))
    with jt.GradientTape() as tape2:
        y2 = jt.reduce_sum(x * 4.0)
    np.testing.assert_allclose(npv(tape2.gradient(y2, x)), 4.0 * np.ones((2, 3)))


def test_jacobian_same_inside_outer_tape_and_outside():
    xs = np.array([0.5, -1.0, 2.0])
    x = jt.constant(xs)
    with jt.GradientTape() as t:
        t.watch(x)
        y = jt.sin(x) * jt.reduce_sum(x * x)
    j_plain = npv(t.jacobian(y, x))
    with jt.GradientTape() as outer:
        outer.watch(x)
        with jt.GradientTape() as t:
            t.watch(x)
            y = jt.sin(x) * jt.reduce_sum(x * x)
        j_nested = npv(t.jacobian(y, x))
    expected = np.diag(np.cos(xs)) * np.sum(xs**2) + np.outer(np.sin(xs), 2 * xs)
    np.testing.assert_allclose(j_plain, expected, rtol=1e-12)
    np.testing.assert_allclose(j_nested, expected, rtol=1e-12)


def test_batch_jacobian_same_inside_outer_tape_and_outside():
    xs = np.arange(6, dtype=np.float64).reshape(3, 2) / 4.0
    x = jt.constant(xs)
    with jt.GradientTape() as t:
        t.watch(x)
        y = jt.exp(x) * jt.reduce_sum(x, axis=1, keepdims=True)
    bj_plain = npv(t.batch_jacobian(y, x))
    with jt.GradientTape() as outer:
        outer.watch(x)
        with jt.GradientTape() as t:
            t.watch(x)
            y = jt.exp(x) * jt.reduce_sum(x, axis=1, keepdims=True)
        bj_nested = npv(t.batch_jacobian(y, x))
    expected = np.stack(
        [np.diag(np.exp(r)) * r.sum() + np.outer(np.exp(r), np.ones(2)) for r in xs]
    )
    assert bj_plain.shape == (3, 2, 2)
    np.testing.assert_allclose(bj_plain, expected, rtol=1e-12)
    np.testing.assert_allclose(bj_nested, expected, rtol=1e-12)


# --------------------------------------------------------------------------
# random programs: tape gradient == finite differences, with and without an
# outer tape recording (the eager-VJP path and the compiled backward graph)
# --------------------------------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

_UNARY = {
    "sin": (jt.sin, np.sin),
    "tanh": (jt.tanh, np.tanh),
    "exp_small": (lambda t: jt.exp(t * 0.3), lambda a: np.exp(a * 0.3)),
    "sigmoid": (jt.sigmoid, lambda a: 1 / (1 + np.exp(-a))),
    "square": (jt.square, np.square),
    "neg": (jt.negative, np.negative),
}
_BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b),
    "sub": (lambda a, b: a - b, lambda a, b: a - b),
    "mul": (lambda a, b: a * b, lambda a, b: a * b),
    "div_safe": (lambda a, b: a / (b * b + 1.0), lambda a, b: a / (b * b + 1.0)),
}


@st.composite
def _programs(draw):
    n_steps = draw(st.integers(1, 6))
    prog = []
    for k in range(n_steps):
        avail = k + 1  # values: x, then one per step
        if draw(st.booleans()):
            prog.append(("u", draw(st.sampled_from(sorted(_UNARY))), draw(st.integers(0, avail - 1))))
        else:
            prog.append(("b", draw(st.sampled_from(sorted(_BINARY))),
                         draw(st.integers(0, avail - 1)), draw(st.integers(0, avail - 1))))
    xs = np.array(draw(st.lists(st.floats(-1.5, 1.5), min_size=3, max_size=3)), np.float64)
    return prog, xs


def _run(prog, x, unary, binary, total):
    vals = [x]
    for step in prog:
        if step[0] == "u":
            vals.append(unary[step[1]](vals[step[2]]))
        else:
            vals.append(binary[step[1]](vals[step[2]], vals[step[3]]))
    return total(vals)


def _run_np(prog, xs):
    return _run(prog, xs, {k: v[1] for k, v in _UNARY.items()},
                {k: v[1] for k, v in _BINARY.items()},
                lambda vals: float(sum(np.sum(v) for v in vals[1:])))


def _run_jt(prog, x):
    return _run(prog, x, {k: v[0] for k, v in _UNARY.items()},
                {k: v[0] for k, v in _BINARY.items()},
                lambda vals: vals[1:])  # a list of targets: their sum


def _finite_diff(prog, xs, eps=1e-6):
    """Central differences of a random program's total with respect to each input."""
    fd = np.zeros(len(xs))
    for i in range(len(xs)):
        p, m = xs.copy(), xs.copy()
        p[i] += eps
        m[i] -= eps
        fd[i] = (_run_np(prog, p) - _run_np(prog, m)) / (2 * eps)
    return fd


@settings(max_examples=60, deadline=None)
@given(_programs())
def test_random_program_gradient_matches_finite_differences(case):
    prog, xs = case
    fd = _finite_diff(prog, xs)

    x = jt.Variable(xs.copy())
    with jt.GradientTape() as tape:
        targets = _run_jt(prog, x)
    g = tape.gradient(targets, x, unconnected_gradients="zero")
    np.testing.assert_allclose(npv(g), fd, rtol=1e-5, atol=1e-7)

    c = jt.constant(xs.copy())
    with jt.GradientTape() as outer:
        outer.watch(c)
        with jt.GradientTape() as tape:
            tape.watch(c)
            targets = _run_jt(prog, c)
        g_eager = tape.gradient(targets, c, unconnected_gradients="zero")
    np.testing.assert_allclose(npv(g_eager), npv(g), rtol=1e-12, atol=1e-14)


# --------------------------------------------------------------------------
# operators, indexing and multi-output ops are recorded like any op
# --------------------------------------------------------------------------

_X3 = np.array([1.0, 2.0, 3.0])

_OPERATOR_CASES = {
    "neg": (lambda x: -x, lambda a: -np.ones_like(a)),
    "abs": (lambda x: abs(x - 2.5), lambda a: np.sign(a - 2.5)),
    "rsub": (lambda x: 2.0 - x, lambda a: -np.ones_like(a)),
    "rdiv": (lambda x: 2.0 / x, lambda a: -2.0 / a**2),
    "div": (lambda x: x / 2.0, lambda a: np.full_like(a, 0.5)),
    "pow_half": (lambda x: x**0.5, lambda a: 0.5 / np.sqrt(a)),
    "rpow": (lambda x: 2.0**x, lambda a: 2.0**a * np.log(2.0)),
    "pow_tensor": (lambda x: x**x, lambda a: a**a * (np.log(a) + 1)),
    "index": (lambda x: x[1], lambda a: np.array([0.0, 1.0, 0.0])),
    "index_neg": (lambda x: x[-1], lambda a: np.array([0.0, 0.0, 1.0])),
    "slice": (lambda x: x[1:], lambda a: np.array([0.0, 1.0, 1.0])),
    "reverse": (lambda x: x[::-1] * jt.constant(_X3), lambda a: _X3[::-1]),
    "gather_repeated": (lambda x: jt.gather(x, [0, 0, 2]), lambda a: np.array([2.0, 0.0, 1.0])),
    "unstack_one_output": (lambda x: jt.unstack(x)[1], lambda a: np.array([0.0, 1.0, 0.0])),
    "matmul": (
        lambda x: jt.reshape(x, (1, 3)) @ jt.reshape(x, (3, 1)),
        lambda a: 2 * a,
    ),
    "bool_mask": (
        lambda x: jt.cast(x > 1.5, jt.float64) * x,
        lambda a: (a > 1.5).astype(np.float64),
    ),
}


@pytest.mark.parametrize("name", sorted(_OPERATOR_CASES))
def test_operator_gradients(name):
    f, df = _OPERATOR_CASES[name]
    x = jt.Variable(_X3.copy())
    with jt.GradientTape() as tape:
        y = f(x)
    np.testing.assert_allclose(npv(tape.gradient(y, x)), df(_X3), rtol=1e-12)


@pytest.mark.parametrize(
    "index, expected",
    [
        ((slice(None), slice(1, None)), [[0, 1, 1], [0, 1, 1]]),
        (1, [[0, 0, 0], [1, 1, 1]]),
        ((Ellipsis, 0), [[1, 0, 0], [1, 0, 0]]),
        ((None,), [[1, 1, 1], [1, 1, 1]]),
    ],
)
def test_matrix_indexing_gradients(index, expected):
    m = jt.Variable(np.arange(6.0).reshape(2, 3))
    with jt.GradientTape() as tape:
        y = m[index]
    assert y.shape == np.arange(6.0).reshape(2, 3)[index].shape
    np.testing.assert_array_equal(npv(tape.gradient(y, m)), np.array(expected, np.float64))


def test_variable_read_before_and_after_assign_inside_tape():
    v = jt.Variable(3.0)
    with jt.GradientTape(persistent=True) as tape:
        y1 = v * v
        v.assign(5.0)
        y2 = v * v
    np.testing.assert_allclose(npv(tape.gradient(y1, v)), 6.0)
    np.testing.assert_allclose(npv(tape.gradient(y2, v)), 10.0)
    np.testing.assert_allclose(npv(tape.gradient([y1, y2], v)), 16.0)
    assert same_vars(tape.watched_variables(), (v,))


def test_variable_created_inside_tape_is_watched_on_read():
    with jt.GradientTape() as tape:
        w = jt.Variable(2.0)
        y = w * w
    np.testing.assert_allclose(npv(tape.gradient(y, w)), 4.0)
    assert same_vars(tape.watched_variables(), (w,))


def test_numpy_result_does_not_alias_variable_or_snapshot():
    v = jt.Variable([1.0, 2.0])
    with jt.GradientTape() as tape:
        y = v * v
        arr = v.numpy()
        arr[:] = 100.0
    np.testing.assert_allclose(v.numpy(), [1.0, 2.0])
    g = tape.gradient(y, v)
    np.testing.assert_allclose(npv(g), [2.0, 4.0])


# --------------------------------------------------------------------------
# the next step with the same structure reuses the backward graph: gradients
# whose value depends on data (masks, indices, ties, labels, constants) must
# still be computed from the new step's values
# --------------------------------------------------------------------------


def _data_dependent_cases():
    return {
        # name: (f(x, data), data for step 1, data for step 2, numpy grad of sum(f))
        "gather_indices": (
            lambda x, d: jt.gather(x, jt.constant(d)),
            np.array([0, 0, 2], np.int32), np.array([1, 3, 3], np.int32),
            lambda a, d: np.bincount(d, minlength=4).astype(np.float64),
        ),
        "where_condition": (
            lambda x, d: jt.where(jt.constant(d), x * 2.0, x * 5.0),
            np.array([True, False, True, False]), np.array([False, True, True, True]),
            lambda a, d: np.where(d, 2.0, 5.0),
        ),
        "python_scalar_constant": (
            lambda x, d: x * float(d),
            np.float64(2.0), np.float64(-7.0),
            lambda a, d: np.full_like(a, float(d)),
        ),
        "tensor_constant_factor": (
            lambda x, d: x * jt.constant(d),
            np.array([1.0, 2.0, 3.0, 4.0]), np.array([-1.0, 0.5, 9.0, 0.0]),
            lambda a, d: d,
        ),
        "maximum_against_data": (
            lambda x, d: jt.maximum(x, jt.constant(d)),
            np.array([0.0, 5.0, 0.0, 5.0]), np.array([5.0, 0.0, 5.0, 0.0]),
            lambda a, d: (a >= d).astype(np.float64),
        ),
        "relu_of_shift": (
            lambda x, d: jt.nn.relu(x - jt.constant(d)),
            np.array([0.0, 0.0, 9.0, 9.0]), np.array([9.0, 9.0, 0.0, 0.0]),
            lambda a, d: (a - d > 0).astype(np.float64),
        ),
        "reduce_max_position": (
            lambda x, d: jt.reduce_max(x * jt.constant(d)),
            np.array([1.0, 0.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 1.0]),
            lambda a, d: np.where(np.arange(4) == np.argmax(a * d), d, 0.0),
        ),
        "clip_bounds_by_data": (
            lambda x, d: jt.clip_by_value(x * jt.constant(d), -2.0, 2.0),
            np.array([1.0, 1.0, 10.0, 10.0]), np.array([10.0, 10.0, 1.0, 1.0]),
            lambda a, d: np.where(np.abs(a * d) <= 2.0, d, 0.0),
        ),
        "sparse_xent_labels": (
            lambda x, d: jt.nn.sparse_softmax_cross_entropy_with_logits(
                labels=jt.constant(d), logits=jt.reshape(x, (2, 2))
            ),
            np.array([0, 1], np.int32), np.array([1, 0], np.int32),
            lambda a, d: (
                np.exp(a.reshape(2, 2)) / np.exp(a.reshape(2, 2)).sum(1, keepdims=True)
                - np.eye(2)[d]
            ).reshape(4),
        ),
        "one_hot_depth_mask": (
            lambda x, d: x * jt.one_hot(jt.constant(d), 4, dtype=jt.float64),
            np.array(1, np.int32), np.array(3, np.int32),
            lambda a, d: np.eye(4)[int(d)],
        ),
    }


@pytest.mark.parametrize("name", sorted(_data_dependent_cases()))
def test_same_structure_new_data_gives_fresh_gradient(name):
    f, d1, d2, df = _data_dependent_cases()[name]
    xs = np.array([0.5, 1.0, 0.25, 0.75])
    for d in (d1, d2, d1, d2):
        x = jt.Variable(xs.copy())
        with jt.GradientTape() as tape:
            y = f(x, d)
        g = tape.gradient(y, x, unconnected_gradients="zero")  # compiled backward graph
        c = jt.constant(xs.copy())
        with jt.GradientTape() as outer:
            outer.watch(c)
            with jt.GradientTape() as inner:
                inner.watch(c)
                y2 = f(c, d)
            g_eager = inner.gradient(y2, c, unconnected_gradients="zero")  # eager VJPs
        np.testing.assert_allclose(npv(g), df(xs, d), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(npv(g_eager), df(xs, d), rtol=1e-12, atol=1e-12)


def test_same_structure_new_output_gradients_and_sources():
    xs = np.array([1.0, 2.0])
    for og in ([1.0, 1.0], [3.0, -2.0], [0.0, 5.0]):
        x = jt.Variable(xs.copy())
        w = jt.Variable(np.array([0.5, 0.25]))
        with jt.GradientTape() as tape:
            y = x * x * w
        gx, gw = tape.gradient(y, [x, w], output_gradients=jt.constant(og))
        np.testing.assert_allclose(npv(gx), 2 * xs * np.array([0.5, 0.25]) * og)
        np.testing.assert_allclose(npv(gw), xs**2 * og)
    for sources in ("x", "w", "both"):
        x = jt.Variable(xs.copy())
        w = jt.Variable(np.array([0.5, 0.25]))
        with jt.GradientTape() as tape:
            y = x * x * w
        src = {"x": [x], "w": [w], "both": [w, x]}[sources]
        got = tape.gradient(y, src)
        exp = {"x": [2 * xs * [0.5, 0.25]], "w": [xs**2],
               "both": [xs**2, 2 * xs * [0.5, 0.25]]}[sources]
        for g, e in zip(got, exp):
            np.testing.assert_allclose(npv(g), e)


def test_same_structure_stop_gradient_moves():
    for where in ("first", "second", "none"):
        x = jt.Variable(np.array([2.0, 3.0]))
        with jt.GradientTape() as tape:
            a = x * x
            b = x * 3.0
            if where == "first":
                a = jt.stop_gradient(a)
            elif where == "second":
                b = jt.stop_gradient(b)
            y = a + b
        expected = {"first": [3.0, 3.0], "second": [4.0, 6.0], "none": [7.0, 9.0]}[where]
        np.testing.assert_allclose(npv(tape.gradient(y, x)), expected)


def test_concurrent_tapes_in_many_threads_give_their_own_gradients():
    errors = []
    results = {}

    def worker(k):
        try:
            rng = np.random.default_rng(k)
            n = 3 + k % 3  # a few shapes, so threads share and miss the graph cache
            for step in range(25):
                xs = rng.standard_normal(n)
                ws = rng.standard_normal(n)
                x = jt.Variable(xs)
                w = jt.constant(ws)
                with jt.GradientTape() as tape:
                    y = jt.reduce_sum(jt.tanh(x * w) * x)
                g = npv(tape.gradient(y, x))
                t = np.tanh(xs * ws)
                np.testing.assert_allclose(g, (1 - t**2) * ws * xs + t, rtol=1e-12)
            results[k] = True
        except Exception as e:  # reported in the main thread
            errors.append((k, repr(e)))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 8


def test_jacobian_of_an_empty_target_is_empty():
    x = jt.constant(np.ones(3))
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = x[:0] * 2.0
    j = tape.jacobian(y, x)
    assert j.shape == (0, 3)


def test_batch_jacobian_of_an_empty_batch_is_empty():
    x = jt.constant(np.ones((0, 2)))
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = x * 2.0
    assert tape.batch_jacobian(y, x).shape == (0, 2, 2)
