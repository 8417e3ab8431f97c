"""jt.profiler: per-kernel times of compiled calls, a table and a Chrome trace."""

import json

import numpy as np
import pytest

import jittape as jt
from jittape.compiler import profiler
from jittape.compiler.backends import clock, cpu

pytestmark = pytest.mark.skipif(not clock.AVAILABLE, reason="needs an x86-64 cycle counter")


def _model():
    rng = np.random.default_rng(0)
    w = jt.Variable(rng.standard_normal((6, 5)).astype(np.float32))
    b = jt.Variable(np.zeros(5, np.float32))
    x = jt.constant(rng.standard_normal((4, 6)).astype(np.float32))
    return w, b, x


def _step_fn(w, b):
    @jt.function(backend="cpu")
    def step(x):
        with jt.GradientTape() as tape:
            loss = jt.reduce_mean(jt.tanh(x @ w + b) ** 2)
        gw, gb = tape.gradient(loss, [w, b])
        w.assign_sub(0.1 * gw)
        b.assign_sub(0.1 * gb)
        return loss

    return step


def test_profile_lists_every_kernel_call_with_its_ops_and_calls():
    w, b, x = _model()
    step = _step_fn(w, b)
    step(x)  # compiled (tests compile synchronously)
    prog = step.get_concrete_function(x).program
    assert prog is not None and prog.ready
    with jt.profiler.profile() as prof:
        for _ in range(5):
            step(x)
    rows = prof.rows()
    assert len(rows) == len(prog.kernels), (rows, prog.kernels)
    assert all(r.calls == 5 for r in rows)
    assert {r.kernel for r in rows} == {k for k, _ in prog.kernels}
    ops = " ".join(r.ops for r in rows)
    assert "matmul" in ops and "tanh" in ops
    assert any("f32[4,6]" in r.shapes or "f32[6,5]" in r.shapes or "f32[4,5]" in r.shapes
               for r in rows)
    assert prof.steps == 5
    assert 0 < prof.kernel_ns <= prof.program_ns <= prof.step_ns
    assert prof.compiles == 1  # entry_prof, compiled on the first profiled call
    table = prof.table()
    for r in rows:
        assert r.kernel in table
    assert "(outside kernels)" in table and "(between kernels)" in table
    assert "5 steps" in table and "compile" in table


def test_profiled_steps_compute_what_unprofiled_steps_compute():
    w1, b1, x = _model()
    w2, b2, _ = _model()
    s1, s2 = _step_fn(w1, b1), _step_fn(w2, b2)
    s1(x)
    s2(x)
    with jt.profiler.profile():
        l1 = [s1(x).numpy() for _ in range(3)]
    l2 = [s2(x).numpy() for _ in range(3)]
    np.testing.assert_array_equal(l1, l2)
    np.testing.assert_array_equal(w1.numpy(), w2.numpy())


def test_chrome_trace_nests_kernels_inside_their_call(tmp_path):
    w, b, x = _model()
    step = _step_fn(w, b)
    step(x)
    with jt.profiler.profile() as prof:
        step(x)
        step(x)
    path = prof.export_chrome_trace(tmp_path / "trace.json")
    events = json.loads(open(path).read())["traceEvents"]
    spans = [e for e in events if e.get("cat") == "function"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(spans) == 2 and len(kernels) == 2 * len(prof.rows())
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in spans + kernels)
    for k in kernels:  # every kernel lies inside one of the function calls
        assert any(s["ts"] - 1 <= k["ts"] and k["ts"] + k["dur"] <= s["ts"] + s["dur"] + 1
                   for s in spans), k
        assert k["args"]["shapes"]


def test_eager_gradient_on_cpu_is_profiled_too():
    x = jt.constant(np.linspace(0.1, 1.0, 8).reshape(2, 4))

    def grad():
        with jt.GradientTape(backend="cpu") as tape:
            tape.watch(x)
            y = jt.reduce_sum(jt.exp(x) * x)
        return tape.gradient(y, x)

    grad()  # compiled
    with jt.profiler.profile() as prof:
        g = grad()
    np.testing.assert_allclose(g.numpy(), np.exp(x.numpy()) * (1 + x.numpy()), rtol=1e-12)
    assert prof.steps == 1 and prof.rows() and all(r.calls == 1 for r in prof.rows())


def test_no_profile_no_profiled_entry(monkeypatch):
    """Profiling off: programs never take the profiled path."""
    w, b, x = _model()
    step = _step_fn(w, b)

    def boom(self, args):
        raise AssertionError("profiled path taken with no profile open")

    monkeypatch.setattr(cpu.Program, "_call_profiled", boom)
    assert not profiler.ACTIVE
    for _ in range(3):
        step(x)


def test_without_a_cycle_counter_whole_programs_are_timed(monkeypatch):
    w, b, x = _model()
    step = _step_fn(w, b)
    step(x)
    monkeypatch.setattr(clock, "AVAILABLE", False)
    with jt.profiler.profile() as prof:
        step(x)
    assert not prof.rows() and prof.program_ns > 0 and prof.steps == 1
    assert "whole programs only" in prof.table()


def test_description_split():
    assert profiler._split_desc("loop over f32[64,128]: add, relu") == (
        "add, relu", "f32[64,128]")
    ops, shapes = profiler._split_desc("reduction of f32[64,10] reducing axes [1]: exp")
    assert ops == "reduction, axes [1]: exp" and shapes == "f32[64,10]"
    assert profiler._split_desc("loop over f32[784,512], flat: sqrt, add") == (
        "sqrt, add", "f32[784,512]")
