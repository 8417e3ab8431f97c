"""The in-memory caches are bounded (least recently used out first) and configured in one
place, ``jt.config.set_cache_limits``: each jt.function's traces, the backward graphs of
``tape.gradient`` and the cpu backend's programs. What a bound dropped is rebuilt,
correctly, when it is needed again."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import jittape as jt
from jittape import autodiff
from jittape.compiler.ir import GraphBuilder, Type
from jittape.ops import elementwise as E

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def limits():
    """Set bounds for one test; the bounds before it come back after it."""
    saved = jt.config.cache_limits()
    yield jt.config.set_cache_limits
    jt.config.set_cache_limits(**saved)


# ---------------------------------------------------------------------------
# the configuration point


def test_limits_are_read_set_and_restored(limits):
    before = jt.config.cache_limits()
    assert set(before) == {"programs", "plans", "traces"}
    assert all(isinstance(n, int) and n >= 1 for n in before.values())
    old = limits(traces=3)
    assert old == before
    assert jt.config.cache_limits() == dict(before, traces=3)
    limits(programs=5, plans=7)
    assert jt.config.cache_limits() == {"programs": 5, "plans": 7, "traces": 3}


@pytest.mark.parametrize("bad", [0, -1, 2.5, "8", True])
def test_a_bound_must_be_a_positive_whole_number(limits, bad):
    before = jt.config.cache_limits()
    with pytest.raises(ValueError, match="traces"):
        limits(traces=bad)
    assert jt.config.cache_limits() == before  # nothing changed


def test_environment_variables_set_the_defaults():
    code = "import jittape as jt; print(sorted(jt.config.cache_limits().items()))"
    env = dict(os.environ, PYTHONPATH=ROOT, JITTAPE_BACKEND="interpret",
               JITTAPE_MAX_TRACES="3", JITTAPE_MAX_PLANS="4", JITTAPE_COMPILE_CACHE_SIZE="5")
    for var in ("JITTAPE_MAX_PROGRAMS",):
        env.pop(var, None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # JITTAPE_COMPILE_CACHE_SIZE is the older name of JITTAPE_MAX_PROGRAMS
    assert out.stdout.strip() == "[('plans', 4), ('programs', 5), ('traces', 3)]"
    env["JITTAPE_MAX_PROGRAMS"] = "none"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0 and "JITTAPE_MAX_PROGRAMS='none'" in out.stderr


# ---------------------------------------------------------------------------
# jt.function's traces


def _shapes(f):
    """The first argument's shape of each kept trace, least recently used first."""
    return [key[1][1][0].shape for key in f._cache]


def _scaled_sum():
    @jt.function(backend="interpret")
    def f(x):
        return jt.reduce_sum(x * x) + float(x.shape[0])

    return f


def _x(n):
    return np.arange(1.0, n + 1.0)


def _want(n):
    return float(np.sum(_x(n) ** 2) + n)


def test_function_keeps_its_most_recently_used_traces(limits):
    limits(traces=2)
    f = _scaled_sum()
    for n in (1, 2, 1, 3):  # 1 is used again before 3 arrives: 2 is the oldest
        assert float(f(_x(n))) == _want(n)
    assert _shapes(f) == [(1,), (3,)]
    info = f.cache_info()
    assert (info.traces, info.signatures, info.evicted) == (3, 2, 1)
    assert (info.hits, info.misses) == (1, 3)
    # the dropped signature traces again and computes the right thing
    assert float(f(_x(2))) == _want(2)
    assert _shapes(f) == [(3,), (2,)]
    info = f.cache_info()
    assert (info.traces, info.signatures, info.evicted) == (4, 2, 2)
    assert f.get_concrete_function(_x(2)).cause.startswith("traced before")


def test_tracing_again_what_the_bound_dropped_does_not_warn(limits):
    limits(traces=2)
    f = _scaled_sum()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a retrace warning would fail the test
        for _ in range(6):
            for n in (1, 2, 3):  # three signatures in turn through a cache of two
                assert float(f(_x(n))) == _want(n)
    assert f.cache_info().traces == 18 and f.cache_info().signatures == 2


def test_new_signatures_still_warn_with_a_small_bound(limits):
    limits(traces=2)
    f = _scaled_sum()
    with pytest.warns(UserWarning, match="triggered tracing"):
        for n in range(1, 8):
            f(_x(n))


def test_lowering_the_bound_trims_existing_functions_at_once(limits):
    f = _scaled_sum()
    for n in (1, 2, 3, 4):
        f(_x(n))
    f(_x(2))
    assert f.cache_info().signatures == 4
    limits(traces=2)
    assert _shapes(f) == [(4,), (2,)]
    assert f.cache_info().evicted == 2
    assert float(f(_x(1))) == _want(1) and _shapes(f) == [(2,), (1,)]


def test_variables_are_written_after_a_dropped_trace_comes_back(limits):
    limits(traces=1)
    v = jt.Variable(np.zeros(3))

    @jt.function(backend="interpret")
    def bump(x):
        v.assign_add(jt.reduce_sum(x) * jt.ones((3,), jt.float64))
        return v.read_value()

    bump(np.ones(2))
    bump(np.ones(4))  # drops the first trace
    out = bump(np.ones(2))  # traced again
    np.testing.assert_allclose(out.numpy(), [8.0, 8.0, 8.0])
    np.testing.assert_allclose(v.numpy(), [8.0, 8.0, 8.0])
    assert bump.cache_info().traces == 3


# ---------------------------------------------------------------------------
# tape.gradient's backward graphs


def _tape_grad(kind, n=3):
    w = jt.Variable(np.linspace(0.1, 0.9, n))
    with jt.GradientTape() as tape:
        if kind == "sin":
            loss = jt.reduce_sum(jt.sin(w) * 2.0)
        elif kind == "square":
            loss = jt.reduce_sum(jt.square(w) * 3.0)
        else:
            loss = jt.reduce_sum(jt.exp(w) * 4.0)
    want = {"sin": 2 * np.cos(w.numpy()), "square": 6 * w.numpy(),
            "exp": 4 * np.exp(w.numpy())}[kind]
    np.testing.assert_allclose(tape.gradient(loss, w).numpy(), want, rtol=1e-12)


def _misses(fn):
    before = autodiff.plan_stats["misses"]
    fn()
    return autodiff.plan_stats["misses"] - before


def test_backward_graphs_are_dropped_least_recently_used_first(limits):
    limits(plans=2)
    n = 7  # a size no other test uses: the first steps trace their backward graphs
    assert len(autodiff._PLANS) <= 2
    assert _misses(lambda: _tape_grad("sin", n)) == 1
    assert _misses(lambda: _tape_grad("square", n)) == 1
    assert _misses(lambda: _tape_grad("sin", n)) == 0  # a hit; "square" is now the oldest
    assert _misses(lambda: _tape_grad("exp", n)) == 1  # drops "square"
    assert len(autodiff._PLANS) == 2
    assert _misses(lambda: _tape_grad("sin", n)) == 0
    assert _misses(lambda: _tape_grad("square", n)) == 1  # traced again, right gradient
    limits(plans=1)
    assert len(autodiff._PLANS) == 1
    assert _misses(lambda: _tape_grad("square", n)) == 0  # the newest stayed


# ---------------------------------------------------------------------------
# the cpu backend's programs


def _graph(k, n=5):
    """A small graph whose structure depends on ``k``: x * k + 1, then exp."""
    gb = GraphBuilder(f"limits{k}")
    x = gb.add_input(Type((n,), "float64"))
    y = x
    for _ in range(k):
        (y,) = gb.add_node(E.exp_op, [y])
    return gb.build([y])


def test_cpu_programs_are_dropped_least_recently_used_first(limits):
    from jittape.compiler.backends import cpu

    limits(programs=2)
    assert len(cpu._BY_KEY) <= 2 and len(cpu._BY_GRAPH) <= 2
    g1, g2, g3 = _graph(1), _graph(2), _graph(3)
    p1, p2 = cpu.program(g1), cpu.program(g2)  # generated and imported, not compiled
    assert cpu.program(g1) is p1  # used again: g2 is the oldest
    p3 = cpu.program(g3)
    assert [g for g, _ in cpu._BY_GRAPH.values()] == [g1, g3]
    assert list(cpu._BY_KEY.values()) == [p1, p3]
    # a dropped graph gets a new program (from the same module) that runs correctly
    x = np.linspace(-1.0, 0.5, 5)
    (out,) = cpu.run_arrays(g2, [x])
    np.testing.assert_allclose(out, np.exp(np.exp(x)), rtol=1e-12)
    assert cpu.program(g2) is not p2 and cpu.program(g2).name == p2.name
    assert [g for g, _ in cpu._BY_GRAPH.values()] == [g3, g2]
    limits(programs=1)
    assert [g for g, _ in cpu._BY_GRAPH.values()] == [g2] and len(cpu._BY_KEY) == 1
