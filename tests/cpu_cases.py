"""Machinery for ``test_cpu_backend.py``: run the same computation on the ``cpu`` and
``interpret`` backends, know which ops the cpu backend really compiled, and never let a
silent fallback to the interpreter pass for a compiled result.

- :class:`CompileSpy` wraps ``jittape.compiler.backends.cpu.BACKEND.run``: after every call it checks
  that the graph was compiled and ran compiled (no fallback, no ``CompileWarning``
  swallowed because an equal one was already given), and records the op names of the
  graph, fused bodies included, into every recorder that is open.
- :func:`record` opens a recorder: ``with record() as ops: ...``.
- Catalogue helpers: gradients of a group of ``tests/ops/cases.py`` cases under one tape
  (one backward graph, one compile per group), and their forwards traced symbolically
  into one IR graph.
- :func:`assert_same`: the cpu result against the interpreter's.

Compiling is what costs (Numba: about 0.1 s a kernel), so each helper builds one graph
for many checks and is memoized: a check that several tests need compiles once.
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np

import jittape as jt
import passes
from jittape.compiler import backends
from jittape.compiler.backends import cpu
from jittape.compiler.ir import Graph, Type

from tolerances import tol

# ---------------------------------------------------------------------------
# Which ops the cpu backend compiled


def graph_ops(graph: Graph) -> set:
    """Op names of ``graph``'s nodes and of the nodes inside its fused bodies."""
    out = set()
    for n in graph.nodes:
        out.add(n.op.name)
        body = n.attr_dict.get("body") if n.op.name == "fused" else None
        if isinstance(body, Graph):
            out |= graph_ops(body)
    return out


_RECORDERS: list = []
COMPILED = "<a compiled graph>"  # recorded with the ops of every graph (even one with none)
STRIDED_FEED = "<a non-contiguous feed>"  # recorded when a feed is not C-contiguous


@contextlib.contextmanager
def record():
    """A set that collects the op names of every graph the cpu backend runs inside."""
    ops: set = set()
    _RECORDERS.append(ops)
    try:
        yield ops
    finally:
        _RECORDERS.remove(ops)


class CompileSpy:
    """Stands in for ``cpu.BACKEND.run`` (see the module docstring)."""

    def __init__(self, run):
        self.run = run
        self.graphs = 0

    def __call__(self, graph, feeds):
        before = cpu.stats["fallbacks"]
        out = self.run(graph, feeds)
        if graph.outputs:
            assert cpu.stats["fallbacks"] == before, (
                f"the cpu backend fell back to interpret on graph {graph.name!r}:\n{graph}")
            prog = cpu.program(graph)  # raises what code generation raised
            assert prog.fallback is None, (
                f"graph {graph.name!r} runs on interpret ({prog.fallback}):\n{graph}")
            assert prog.ready, f"graph {graph.name!r} was never compiled"
            self.graphs += 1
            ops = graph_ops(graph) | {COMPILED}
            if any(not np.asarray(a).flags.c_contiguous for a in feeds.values()):
                ops.add(STRIDED_FEED)
            for r in _RECORDERS:
                r |= ops
        return out


# ---------------------------------------------------------------------------
# Convolution kernels: the settings random window tests draw from

# the cpu backend packs windows for a GEMM only from 16 taps x channels
# (``schedule_window.GEMM_MIN_KC``), which the random tests' tiny filters seldom reach:
# each of their examples draws one of these, set on ``schedule_window`` while it runs
# (one image per tile: the filter gradient adds each tile's product)
KERNEL_SETTINGS = {
    "as shipped": {},
    "packed GEMM": {"GEMM_MIN_KC": 1},
    "packed GEMM, one image per tile": {"GEMM_MIN_KC": 1, "PATCH_ELEMS": 1},
}


# ---------------------------------------------------------------------------
# Comparing


def assert_same(got, want, what=""):
    """cpu output ``got`` equals interpret's ``want``: same shape and dtype, integers and
    bools exactly, floats within the dtype's forward tolerance (``tests/tolerances.py``)
    relative to the value or to the array's largest magnitude (a fused or reassociated
    sum is exact only to rounding of its largest terms); NaN where NaN, Inf where Inf."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, want {want.dtype}"
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    t = tol(want.dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaNs")
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg=f"{what}: Infs")
    fin = np.isfinite(want)
    scale = float(np.max(np.abs(want[fin]), initial=0.0))
    np.testing.assert_allclose(got[fin], want[fin], rtol=t.fwd_rtol,
                               atol=t.fwd_atol * max(1.0, scale), err_msg=what)


# ---------------------------------------------------------------------------
# Catalogue cases


def flat(y) -> list:
    if isinstance(y, (list, tuple)):
        out = []
        for t in y:
            out.extend(flat(t))
        return out
    return [y]


def _draws(cases, dtype):
    """Per case: its input arrays (the catalogue's own draw) and a generator for seeds."""
    res = []
    for c in cases:
        rng = np.random.default_rng(0)
        res.append((c.inputs(rng, dtype), rng))
    return res


def _seed_like(rng, t):
    return jt.constant(rng.normal(size=tuple(t.shape)).astype(t.dtype.name))


def _dot(t, rng):
    """<t, u> for a random u, in float64 (cases may mix dtypes: casts)."""
    s = jt.reduce_sum(t * _seed_like(rng, t))
    return s if s.dtype == jt.float64 else jt.cast(s, jt.float64)


def gradients(cases, dtype, order, backend) -> list:
    """``[(case id, input position, gradient array)]`` for all ``cases`` under one tape.

    order 1: the gradient of sum_k <y_k, u_k> (``output_gradients``), u random.
    order 2: nested tapes; the outer gradient of sum_j <g_j, w_j>, where g is the inner
    gradient of sum_k <y_k, u_k>: the inner gradient runs its VJPs eagerly (the outer
    tape records them) and the outer one runs the graph of those VJP ops on ``backend``.
    """
    draws = _draws(cases, dtype)
    tensors = [c.tensors(a) for c, (a, _) in zip(cases, draws)]
    where = [(c.id, k) for c in cases for k in c.float_positions]
    watched = [t[k] for c, t in zip(cases, tensors) for k in c.float_positions]
    if order == 1:
        ys, us = [], []
        with jt.GradientTape(backend=backend) as tape:
            tape.watch(watched)
            for c, t, (_, rng) in zip(cases, tensors, draws):
                out = flat(c.fn(*t))
                ys += out
                us += [_seed_like(rng, y) for y in out]
        grads = tape.gradient(ys, watched, output_gradients=us, unconnected_gradients="zero")
    else:
        with jt.GradientTape(backend=backend) as outer:
            outer.watch(watched)
            with jt.GradientTape(backend=backend) as inner:
                inner.watch(watched)
                s = None
                for c, t, (_, rng) in zip(cases, tensors, draws):
                    for y in flat(c.fn(*t)):
                        term = _dot(y, rng)
                        s = term if s is None else s + term
            gs = inner.gradient(s, watched, unconnected_gradients="zero")
            rng = np.random.default_rng(1)
            total = None
            for g in gs:
                term = _dot(g, rng)
                total = term if total is None else total + term
        grads = outer.gradient(total, watched, unconnected_gradients="zero")
    return [(cid, k, np.array(g.numpy())) for (cid, k), g in zip(where, grads)]


def trace_forward(cases, dtype):
    """The forwards of ``cases`` traced symbolically into one graph.

    Returns ``(graph, feeds, skipped)``; ``skipped`` lists the cases that cannot be
    traced (a function that needs concrete values).
    """
    from jittape.tensor import Tracer

    tr = Tracer("catalogue")
    feeds, outs, skipped = {}, [], []
    with tr:
        for c in cases:
            arrays = c.inputs(np.random.default_rng(0), dtype)
            phs = [tr.placeholder(Type(a.shape, a.dtype.name)) for a in arrays]
            try:
                ys = flat(c.fn(*phs))
            except Exception:  # noqa: BLE001 - reported by the caller
                skipped.append(c.id)
                continue
            for ph, a in zip(phs, arrays):
                feeds[ph._id] = a
            outs += [y._id for y in ys if getattr(y, "_tracer", None) is tr]
    for vid, arr in tr.captures.values():
        feeds[vid] = arr
    graph = tr.builder.build(outs)
    used = set(graph.inputs)
    feeds = {v: a for v, a in feeds.items() if v in used}
    return graph, feeds, skipped


def compare_graph(graph, feeds, what="", pipeline=True):
    """Run ``graph`` on interpret (as built) and on cpu (after the cpu pipeline, unless
    ``pipeline`` is false: then the cpu backend compiles ``graph`` as it is) and compare.
    Returns the cpu outputs. The feeds are never written to."""
    snapshot = {v: np.array(a, copy=True) for v, a in feeds.items()}
    want = [np.array(o, copy=True) for o in backends.run(graph, feeds, "interpret")]
    g = passes.run_pipeline(graph, backends.pipeline("cpu")).graph if pipeline else graph
    got = [np.array(o, copy=True) for o in backends.run(g, feeds, "cpu")]
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert_same(a, b, f"{what}: output {k}")
    for v, a in feeds.items():
        np.testing.assert_array_equal(a, snapshot[v], err_msg=f"{what}: input {v} was written")
    return got


@functools.lru_cache(maxsize=None)
def _memo(fn, *args):
    return fn(*args)


def memo(fn, *args):
    """``fn(*args)``, computed once per process (arguments must be hashable)."""
    return _memo(fn, *args)
