"""The Numba ``cpu`` backend computes what the ``interpret`` backend (the numpy oracle)
computes, compiled: a ``CompileWarning`` (a graph that runs on interpret instead) is an
error here, and a spy on ``cpu.run`` fails a test whose graph ran on interpret silently
(``cpu_cases.py``).

1. The op catalogue (``tests/ops/cases.py``): gradients of differentiable cases, one tape
   (one backward graph, one compile) per op, first order and second order (nested
   tapes: the outer gradient compiles the graph of the first-order VJP ops), float64 and
   float32, against the same tapes on interpret; a selection of cases by default (see
   ``_selection``), every case with ``JITTAPE_TEST_CPU_FULL=1``. The forwards of the
   cases whose gradient is not checked (comparisons, casts to integers, argmax, one_hot,
   floordiv, logical ops, integer and bool dtypes, fills, constants, empty reductions),
   traced into IR graphs and compiled.
   ``test_every_op_is_compiled``: every registered op except ``custom_gradient`` (runs
   eagerly by design) and ``read`` (never in a backward graph) is in a graph that the
   cpu backend compiled and that was compared with interpret.
2. Non-contiguous feeds (transposed, strided, reversed, zero-stride broadcast views, as
   graph inputs and as values a tape recorded), views inside graphs feeding kernels,
   an unoptimised graph, size-1 broadcasting, 0-d and empty tensors, matmuls of
   transposed operands and with broadcast batch dims, reductions over every axis
   subset of a rank-3 tensor with and without keepdims.
3. Random tape programs (hypothesis, ``test_random_graphs.programs``): gradients, first
   and second order, float64 and float32; random IR graphs
   (``test_passes_random.graphs``), and with window ops (``window_graphs``).
4. NaN and Inf: every elementwise op and the reductions on special values; NaN and Inf
   through compiled gradients; check_numerics raising in a compiled backward graph.
5. Minimal reproductions of the gaps these tests found.

Budget: Numba compiles every kernel (0.1-0.4 s each), so checks are grouped into few
graphs and the example counts are small; the file runs in about 90 s with a cold kernel
cache on a 2-core machine, in a few seconds warm.
"""

from __future__ import annotations

import itertools
import os
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jittape as jt
import passes
from jittape.compiler import backends
from jittape.compiler.backends import cpu, schedule_window
from jittape.compiler.ir import OP_TABLE, Const, GraphBuilder, Type, get_op

import test_passes_random as pr
import test_random_graphs as rg
from cpu_cases import KERNEL_SETTINGS, STRIDED_FEED, CompileSpy, assert_same, compare_graph, \
    gradients, memo, record, trace_forward
from ops.cases import CASES

pytestmark = pytest.mark.filterwarnings("error::jittape.compiler.backends.cpu.CompileWarning")

DTYPES = ["float64", "float32"]


@pytest.fixture(autouse=True, scope="module")
def _spy():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cpu.BACKEND, "run", CompileSpy(cpu.BACKEND.run))
        yield


# ---------------------------------------------------------------------------
# 1. The catalogue: gradients, first and second order

FD = [c for c in CASES if c.grad == "fd" and c.op != "custom_gradient"]
F32 = {c.id for c in CASES if c.f32 and any(a.dtype == "float64" for a in c.args)}


def _by_op(cases) -> dict:
    out: dict = {}
    for c in cases:
        out.setdefault(c.op, []).append(c)
    return out


def _size(c) -> int:
    return sum(int(np.prod(a.shape, dtype=int)) for a in c.args)


def _signature(c) -> tuple:
    """What makes two cases of one op compile differently: input dtypes, ranks, empties."""
    return tuple((a.dtype, len(a.shape), 0 in a.shape) for a in c.args)


def _pick(cases, n) -> list:
    """Up to ``n`` cases of one op, largest first, each with a new signature (then the
    largest of the rest, if there are not ``n`` signatures)."""
    ranked = sorted(cases, key=lambda c: -_size(c))
    out, seen = [], set()
    for c in ranked:
        if len(out) < n and _signature(c) not in seen:
            out.append(c)
            seen.add(_signature(c))
    out += [c for c in ranked if c not in out][: n - len(out)]
    return out


# Compiling costs about 0.1-0.4 s a kernel (more for each new layout of a view or a
# BLAS call): every case in both dtypes and orders takes four and a half minutes cold.
# So by default each op gets one case (the largest) per dtype and order; slices and
# gathers (whose variants compile differently) two of different input signatures in
# float64 first order; second order skips the ops that only move data (their Hessian
# is zero); float32 is checked on the ops whose VJPs compare, select, divide or call
# transcendental functions (first order) or call transcendental functions (second
# order). The shapes the catalogue varies (0-d, empty, broadcasting, every reduction
# axis, slices, batch dims) are compiled by the hand-built graphs below.
# JITTAPE_TEST_CPU_FULL=1 takes every case (and every forward case in section 1b).
FULL = os.environ.get("JITTAPE_TEST_CPU_FULL", "") not in ("", "0")
VARIED = {"strided_slice", "gather"}
MOVES_DATA = {"reshape", "transpose", "broadcast_to", "expand_dims", "squeeze", "concat",
              "stack", "unstack", "strided_slice", "strided_slice_grad", "gather",
              "scatter_add", "identity", "read", "check_numerics", "cast", "add", "subtract",
              "negative", "reduce_sum", "reduce_mean"}
TRANSCENDENTAL = {"exp", "log", "log1p", "sqrt", "sin", "cos", "tanh", "sigmoid", "pow",
                  "reciprocal", "softmax", "reduce_logsumexp"}
# float32 first order: these and the ops whose VJPs compare, select or divide
FLOAT_VJPS = TRANSCENDENTAL | {"divide", "matmul", "maximum", "minimum", "norm", "reduce_max",
                               "reduce_min", "where", "relu", "clip_by_norm"}
# composites whose second-order graphs repeat another's (softmax, clip_by_global_norm)
SAME_SECOND_ORDER = {"global_norm", "log_softmax", "sparse_softmax_cross_entropy_with_logits"}


def _selection(dtype, order) -> dict:
    cases = FD if dtype == "float64" else [c for c in FD if c.id in F32]
    out = {}
    for op, cs in _by_op(cases).items():
        if FULL:
            out[op] = cs
        elif dtype == "float64" and order == 1:
            out[op] = _pick(cs, 2 if op in VARIED else 1)
        elif dtype == "float64":  # the Hessian of a data move is zero: the case's other
            if op not in MOVES_DATA | SAME_SECOND_ORDER:  # ops (square, sin) are checked
                out[op] = _pick(cs, 1)  # under their own name
        elif op in (FLOAT_VJPS if order == 1 else TRANSCENDENTAL):
            out[op] = _pick(cs, 1)
    return out


GRAD_CASES = {(dt, order): _selection(dt, order) for dt in DTYPES for order in (1, 2)}
GRAD_PARAMS = [(dt, order, op) for (dt, order), ops in GRAD_CASES.items() for op in sorted(ops)]


NO_DERIVATIVE = {"sign", "floor"}  # zero almost everywhere: the gradient is None


def _grad_cases(dtype, order, op):
    return GRAD_CASES[dtype, order][op]


def _grad_check(dtype, order, op):
    cases = _grad_cases(dtype, order, op)
    with record() as ops:
        got = gradients(cases, dtype, order, "cpu")
    want = gradients(cases, dtype, order, "interpret")
    return got, want, frozenset(ops)


@pytest.mark.parametrize("dtype, order, op", GRAD_PARAMS,
                         ids=[f"{dt}-order{o}-{op}" for dt, o, op in GRAD_PARAMS])
def test_catalogue_gradients(dtype, order, op):
    got, want, ops = memo(_grad_check, dtype, order, op)
    assert len(got) == len(want) > 0
    if order == 1 and op not in NO_DERIVATIVE:
        assert ops, "no backward graph was compiled"
    for (cid, k, a), (_, _, b) in zip(got, want):
        assert_same(a, b, f"{cid}: gradient of input {k}")


# ---------------------------------------------------------------------------
# 1b. The catalogue's forwards, traced into graphs and compiled

# The cases whose gradient is not checked: non-differentiable ops (comparisons, casts to
# integers, argmax, one_hot, floordiv, logical ops), integer and bool dtypes, fills and
# constants, empty reductions. The differentiable ops' forwards are compiled by the
# special-values test (elementwise) and the hand-built graphs.
_NOT_FD = [c for c in CASES if c.grad != "fd"]
DTYPE_VARIANTS = {"cast", "floordiv", "floormod", "reduce_sum", "one_hot", "argmax", "fill",
                  "const"}
# float32 forwards: the ops with float-specific code (vector math, NaN rules, literals)
FLOAT_SPECIFIC = {"floordiv", "floormod", "is_nan", "is_finite", "argmax", "argmin",
                  "reduce_max", "reduce_min", "reduce_mean"}
FORWARD = {
    "float64": {op: _pick(cs, 10**6 if FULL else 2 if op in DTYPE_VARIANTS else 1)
                for op, cs in _by_op(_NOT_FD).items()},
    "float32": {op: _pick(cs, 10**6 if FULL else 1)
                for op, cs in _by_op([c for c in _NOT_FD if c.id in F32]).items()
                if FULL or op in FLOAT_SPECIFIC},
}
FWD_PARAMS = [(dt, op) for dt in DTYPES for op in sorted(FORWARD[dt])]


def _forward_check(dtype, op):
    cases = FORWARD[dtype][op]
    graph, feeds, skipped = trace_forward(cases, dtype)
    assert not skipped, f"cases that cannot be traced: {skipped}"
    assert graph.outputs
    with record() as ops:
        compare_graph(graph, feeds, f"forward of {[c.id for c in cases]} ({dtype})")
    return frozenset(ops)


# the pipeline removes stop_gradient and folds fills without inputs into constants
# (compiled as they are in the unoptimised graph below); reduce_mean is a composite
NOT_IN_OPTIMISED = {"stop_gradient", "fill", "reduce_mean"}
# shape and size fold to constants (fold_constants, from their records' from_types)
NOT_IN_OPTIMISED |= {name for name, op in OP_TABLE.items() if op.from_types is not None}


@pytest.mark.parametrize("dtype, op", FWD_PARAMS, ids=[f"{dt}-{op}" for dt, op in FWD_PARAMS])
def test_catalogue_forward(dtype, op):
    ops = memo(_forward_check, dtype, op)
    # a composite (not a registry op) is the ops its graph compiled
    assert op in ops or op in NOT_IN_OPTIMISED or op not in OP_TABLE, \
        f"the compiled graph has no {op} node"


# ---------------------------------------------------------------------------
# Helpers for hand-built graphs and tapes. Each ``_b_*`` builder compiles a few graphs,
# asserts, and returns the ops the cpu backend compiled; it is memoized, so the coverage
# test reuses its work.


def _in(b, shape, dtype="float64"):
    return b.add_input(Type(tuple(shape), dtype))


def _n(b, name, *inputs, **attrs):
    (v,) = b.add_node(get_op(name), inputs, attrs or None)
    return v


def _c(b, value, dtype="float64"):
    return _n(b, "const", value=Const(np.asarray(value, dtype=dtype)))


def _feeds(graph, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for v, t in zip(graph.inputs, graph.input_types):
        if t.dtype == "bool":
            out[v] = rng.random(t.shape) < 0.5
        elif np.dtype(t.dtype).kind in "iu":
            out[v] = rng.integers(0, 3, size=t.shape).astype(t.dtype)
        else:
            out[v] = rng.uniform(-2.0, 2.0, size=t.shape).astype(t.dtype)
    return out


def _check(graph, feeds=None, pipeline=True) -> set:
    with record() as ops:
        compare_graph(graph, _feeds(graph) if feeds is None else feeds, graph.name,
                      pipeline=pipeline)
    return ops


def _tape_grads(fn, tensors, backend, order=1):
    """Gradients of the scalar ``fn(*tensors)`` w.r.t. ``tensors``; with ``order=2``, the
    gradient of <first-order gradient, w> for a fixed random w (nested tapes)."""
    if order == 1:
        with jt.GradientTape(backend=backend) as tape:
            tape.watch(tensors)
            y = fn(*tensors)
        gs = tape.gradient(y, tensors, unconnected_gradients="zero")
    else:
        rng = np.random.default_rng(7)
        with jt.GradientTape(backend=backend) as outer:
            outer.watch(tensors)
            with jt.GradientTape(backend=backend) as inner:
                inner.watch(tensors)
                y = fn(*tensors)
            g1 = inner.gradient(y, tensors, unconnected_gradients="zero")
            total = None
            for g in g1:
                w = jt.constant(rng.normal(size=tuple(g.shape)).astype(g.dtype.name))
                term = jt.reduce_sum(g * w)
                total = term if total is None else total + term
        gs = outer.gradient(total, tensors, unconnected_gradients="zero")
    return [np.array(g.numpy()) for g in gs]


def _compare_tape(fn, tensors, what, order=1) -> set:
    want = _tape_grads(fn, tensors, "interpret", order)
    with record() as ops:
        got = _tape_grads(fn, tensors, "cpu", order)
    for k, (a, b) in enumerate(zip(got, want)):
        assert_same(a, b, f"{what}: gradient {k} (order {order})")
    assert ops, f"{what}: nothing was compiled"
    return ops


# ---------------------------------------------------------------------------
# 2. Non-contiguous and broadcast inputs, views, 0-d and empty tensors, matmul layouts


def _b_noncontiguous_feeds():
    rng = np.random.default_rng(1)
    b = GraphBuilder("noncontiguous_feeds")
    x = _in(b, (3, 4))  # a transposed view
    y = _in(b, (3, 4))  # a strided, reversed slice of a larger array
    z = _in(b, (4,))  # reversed
    w = _in(b, (3, 4))  # a zero-stride broadcast
    m = _in(b, (4, 2))  # transposed, a matmul operand
    e = _n(b, "add", _n(b, "multiply", x, y), z)
    r = _n(b, "reduce_sum", _n(b, "tanh", e), axis=(1,), keepdims=False)
    mm = _n(b, "matmul", _n(b, "subtract", w, x), m)
    t = _n(b, "transpose", y, perm=(1, 0))
    g = b.build([e, r, mm, x, w, t])  # inputs as outputs too
    feeds = {
        x: rng.normal(size=(4, 3)).T,
        y: rng.normal(size=(6, 4))[::2, ::-1],
        z: rng.normal(size=(4,))[::-1],
        w: np.broadcast_to(rng.normal(size=(4,)), (3, 4)),
        m: rng.normal(size=(2, 4)).T,
    }
    assert not any(f.flags.c_contiguous for f in feeds.values())
    ops = _check(g, feeds)
    assert STRIDED_FEED in ops
    return ops


def test_noncontiguous_feeds():
    memo(_b_noncontiguous_feeds)


def _b_noncontiguous_tape_values():
    """Read-only arrays are not copied by ``jt.constant``: the recorded values, and so
    the backward graph's feeds, are transposed, strided and zero-stride views."""
    base = np.random.default_rng(2).normal(size=(4, 6))
    base.setflags(write=False)
    xt = jt.constant(base.T)  # (6, 4)
    sl = jt.constant(base[::2, ::-2])  # (2, 3)
    bc = jt.constant(np.broadcast_to(base[0], (3, 6)))  # zero stride
    for t in (xt, sl, bc):
        assert not np.asarray(t).flags.c_contiguous

    def f(xt, sl, bc):
        h = jt.tanh(jt.matmul(bc, xt))  # (3, 4)
        return (jt.reduce_sum(h * h) + jt.reduce_sum(jt.sin(sl) * sl)
                + jt.reduce_sum(jt.exp(xt[::2]) * bc[0][:, None][:3]))

    ops = _compare_tape(f, [xt, sl, bc], "non-contiguous recorded values")
    assert STRIDED_FEED in ops
    return ops


def test_noncontiguous_recorded_values():
    memo(_b_noncontiguous_tape_values)


def _views_graph(dt):
    b = GraphBuilder(f"views_{dt}")
    x = _in(b, (3, 4), dt)
    y = _in(b, (4, 3), dt)
    v = _in(b, (4,), dt)
    s = _in(b, (), dt)
    i = _in(b, (3,), "int32")
    yt = _n(b, "transpose", y, perm=(1, 0))  # (3, 4), not contiguous
    a = _n(b, "add", x, yt)
    sl = _n(b, "strided_slice", x, key=(("slice", None, None, 2), ("slice", None, None, -1)))
    sl2 = _n(b, "strided_slice", y, key=(("slice", 1, 3, None), "newaxis", "..."))  # (2,1,3)
    bc = _n(b, "broadcast_to", v, shape=(3, 4))
    mb = _n(b, "multiply", bc, x)
    rs = _n(b, "exp", _n(b, "reshape", yt, shape=(12,)))  # a reshape of a transpose: a copy
    rs2 = _n(b, "reshape", sl, shape=(8,))
    tb = _n(b, "add", _n(b, "transpose", bc, perm=(1, 0)), y)  # (4, 3)
    mm = _n(b, "matmul", x, _n(b, "transpose", x, perm=(1, 0)))  # a transposed operand
    mm2 = _n(b, "matmul", _n(b, "transpose", sl, perm=(1, 0)), sl)  # (4, 4) from a slice
    ident = _n(b, "sin", _n(b, "identity", _n(b, "stop_gradient", a)))
    sb = _n(b, "multiply", _n(b, "broadcast_to", s, shape=(2, 3)),
            _n(b, "reshape", sl2, shape=(2, 3)))
    s1 = _n(b, "reshape", s, shape=(1, 1))
    cat = _n(b, "concat", yt, sl, axis=0)  # (5, 4) from two views
    gat = _n(b, "gather", yt, i, axis=1)  # (3, 3) from a transposed view
    fill = _n(b, "fill", shape=(3, 4), value=1.5, dtype=dt)
    fx = _n(b, "multiply", _n(b, "fill", shape=(4,), value=-0.5, dtype=dt), x)
    outs = [a, sl, sl2, mb, rs, rs2, tb, mm, mm2, ident, sb, s1, cat, gat, yt, bc, a, fill, fx]
    return b.build(outs)


def _raw_graph():
    """A graph as tapes record it, not optimised: a kernel per op, identity and
    stop_gradient nodes, a constant array, fills, views and broadcasts as outputs."""
    b = GraphBuilder("unoptimised")
    x = _in(b, (3, 4))
    v = _in(b, (4,))
    a = _n(b, "identity", _n(b, "stop_gradient", x))
    e = _n(b, "add", _n(b, "multiply", a, _c(b, [1.0, 2.0, 3.0, 4.0])), v)
    r = _n(b, "reduce_sum", _n(b, "tanh", e), axis=(0,), keepdims=True)
    m = _n(b, "matmul", x, _n(b, "transpose", x, perm=(1, 0)))
    f = _n(b, "fill", shape=(2, 2), value=0.25, dtype="float64")
    return b.build([e, r, m, f, _n(b, "broadcast_to", v, shape=(2, 4)),
                    _n(b, "reshape", r, shape=(2, 2)), a, v])


def _b_views():
    ops = _check(_views_graph("float64"))  # views do not depend on the dtype
    return ops | _check(_raw_graph(), pipeline=False)


def test_views_feeding_kernels():
    memo(_b_views)


def _b_broadcast_scalar_empty():
    dt = "float64"  # float32: the catalogue's broadcasting cases
    b = GraphBuilder("broadcasting")
    a = _in(b, (3, 1), dt)
    v = _in(b, (4,), dt)
    s = _in(b, (), dt)
    d = _in(b, (2, 3), dt)
    e = _in(b, (1, 4), dt)
    c = _in(b, (3, 1), "bool")
    f = _in(b, (0, 3), dt)
    h = _in(b, (3,), dt)
    z = _in(b, (2, 0), dt)
    zz = _in(b, (0, 3), dt)
    one = _c(b, 1.0, dt)
    outs = [
        _n(b, "add", a, v),
        _n(b, "multiply", s, d),
        _n(b, "subtract", e, a),
        _n(b, "where", c, a, v),
        _n(b, "maximum", s, v),
        _n(b, "pow", _n(b, "add", _n(b, "abs", a), one), v),
        _n(b, "reduce_sum", _n(b, "multiply", a, e), axis=(0,), keepdims=False),
        _n(b, "tanh", s),  # 0-d
        _n(b, "add", _n(b, "multiply", s, s), one),
        _n(b, "reduce_sum", s, axis=(), keepdims=False),
        _n(b, "add", f, h),  # empty
        _n(b, "exp", f),
        _n(b, "reduce_sum", f, axis=(0,), keepdims=False),  # zeros
        _n(b, "reduce_max", f, axis=(0,), keepdims=True),  # -inf
        _n(b, "reduce_min", f, axis=(1,), keepdims=False),  # empty
        _n(b, "matmul", f, _n(b, "transpose", zz, perm=(1, 0))),  # (0, 0)
        _n(b, "matmul", z, zz),  # (2, 3) of zeros
    ]
    return _check(b.build(outs))


def test_broadcasting_scalars_and_empty_tensors():
    memo(_b_broadcast_scalar_empty)


def _b_matmul_layouts():
    dt = "float64"  # the catalogue compiles float32 matmuls
    b = GraphBuilder(f"matmul_{dt}")
    a = _in(b, (4, 3), dt)
    c = _in(b, (4, 2), dt)
    x4 = _in(b, (2, 1, 3, 4), dt)
    y3 = _in(b, (5, 4, 2), dt)
    p = _in(b, (1, 3, 4), dt)
    q = _in(b, (2, 4, 5), dt)
    m = _in(b, (3, 4), dt)
    bias = _in(b, (5,), dt)
    outs = [
        _n(b, "matmul", _n(b, "transpose", a, perm=(1, 0)), c),  # A^T B
        _n(b, "matmul", c, _n(b, "transpose", c, perm=(1, 0))),  # B B^T
        _n(b, "matmul", x4, y3),  # (2, 5, 3, 2): batch dims broadcast both ways
        _n(b, "matmul", p, q),  # (2, 3, 5)
        _n(b, "matmul", m, q),  # rank 2 with rank 3
        _n(b, "matmul", _n(b, "transpose", q, perm=(0, 2, 1)),
           _n(b, "transpose", p, perm=(0, 2, 1))),  # batched, both transposed
        # a bias and relu epilogue; the second operand a slice
        _n(b, "relu", _n(b, "add", _n(b, "matmul", m, _n(b, "strided_slice", q, key=(0,))),
                         bias)),
    ]
    ops = _check(b.build(outs))

    def f(a, b):
        return jt.reduce_sum(jt.tanh(jt.matmul(a, b, transpose_a=True, transpose_b=True)))

    rng = np.random.default_rng(3)
    ta = jt.constant(rng.normal(size=(2, 1, 4, 3)))
    tb = jt.constant(rng.normal(size=(5, 2, 4)))
    return ops | _compare_tape(f, [ta, tb], "batched matmul, both transposed")


def test_matmul_transposed_and_batched():
    memo(_b_matmul_layouts)


def _b_reductions():
    """reduce_sum/max/min over every axis subset of a rank-3 tensor, keepdims or not,
    with a broadcasting prologue and (every other one) an epilogue (float64: the reduced
    shapes decide the loops; the catalogue compiles float32 reductions)."""
    dt = "float64"
    b = GraphBuilder(f"reductions_{dt}")
    x = _in(b, (2, 3, 4), dt)
    y = _in(b, (3, 1), dt)
    pro = _n(b, "multiply", _n(b, "add", x, y), x)
    two = _c(b, 2.0, dt)
    outs = []
    keeps = (False, True)
    for k, (r, keep, op) in enumerate(itertools.product(
            range(4), keeps, ("reduce_sum", "reduce_max", "reduce_min"))):
        for axes in itertools.combinations(range(3), r):
            red = _n(b, op, pro, axis=axes, keepdims=keep)
            outs.append(_n(b, "subtract", red, two) if k % 2 else red)
    outs.append(_n(b, "reduce_max", x, axis=(0, 2), keepdims=False))  # on an input
    assert len(outs) == 8 * len(keeps) * 3 + 1
    return _check(b.build(outs))


def test_reductions_over_every_axis_subset():
    memo(_b_reductions)


# ---------------------------------------------------------------------------
# 3. Random programs (hypothesis). Every example is a new graph, a new compile (about
# 0.1 s a kernel): the example counts are small on purpose.


def _program_inputs(program, seed, dtype):
    return [jt.constant(a.astype(dtype)) for a in rg._inputs(program, seed)]


def _program_loss(program):
    return lambda *xs: rg.run(program, list(xs))[0]


# at least 3 steps: the first examples a derandomized search draws are the smallest
_PROGRAMS = rg.programs().filter(lambda p: len(p[1]) >= 3)


def _check_program(program, seed, order):
    for dtype in DTYPES:
        xs = _program_inputs(program, seed, dtype)
        want = _tape_grads(_program_loss(program), xs, "interpret", order)
        got = _tape_grads(_program_loss(program), xs, "cpu", order)
        for k, (a, b) in enumerate(zip(got, want)):
            assert_same(a, b, f"{dtype} gradient {k} (order {order}) of {program}")


# every example is a Numba compile or two: few by default, many with JITTAPE_TEST_CPU_FULL=1
N_RANDOM = 60 if FULL else 6


@settings(max_examples=N_RANDOM)
@given(_PROGRAMS, st.integers(0, 2**16))
def test_random_program_gradients(program, seed):
    _check_program(program, seed, 1)


@settings(max_examples=N_RANDOM // 2)
@given(_PROGRAMS, st.integers(0, 2**16))
def test_random_program_second_order(program, seed):
    _check_program(program, seed, 2)


@settings(max_examples=N_RANDOM)
@given(st.sampled_from(DTYPES).flatmap(pr.graphs))
def test_random_ir_graphs(case):
    """Random IR graphs (comparisons, where, constants, fills, reductions, matmuls,
    views, duplicates, several outputs), compiled after the cpu pipeline."""
    graph, feeds, _ = case
    compare_graph(graph, feeds, "random graph")


@settings(max_examples=N_RANDOM)
@given(st.sampled_from(DTYPES).flatmap(pr.window_graphs),
       st.sampled_from(sorted(KERNEL_SETTINGS)))
def test_random_ir_graphs_with_window_ops(case, kernels):
    """Random IR graphs with convolutions, pools and their gradients (channels-first
    operands through a transpose; a bias, a product and an activation after a
    convolution: its epilogue), compiled after the cpu pipeline, with the packed-GEMM
    formulation forced or not (``cpu_cases.KERNEL_SETTINGS``)."""
    graph, feeds, _ = case
    with pytest.MonkeyPatch.context() as mp:
        for name, value in KERNEL_SETTINGS[kernels].items():
            mp.setattr(schedule_window, name, value)
        compare_graph(graph, feeds, f"random graph with window ops ({kernels})")


# ---------------------------------------------------------------------------
# 4. NaN and Inf

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, 1.0, 0.5, -2.5, 3.0, 1e30, -1e30]


def _b_special_values():
    """Every elementwise op and the reductions on NaN, +-Inf, +-0, huge values and
    ordinary ones from 1e-3 to 10: the same NaNs, Infs and numbers as numpy (the vector
    math of ``vmath`` against numpy's, in both dtypes)."""
    ops = set()
    for dt in DTYPES:
        b = GraphBuilder(f"special_{dt}")
        x = _in(b, (64,), dt)
        m = _in(b, (3, 4), dt)
        zero, one, two = (_c(b, v, dt) for v in (0.0, 1.0, 2.0))
        un = ["exp", "log", "log1p", "sqrt", "tanh", "sigmoid", "sin", "cos", "reciprocal",
              "abs", "sign", "floor", "relu", "square", "negative", "is_nan", "is_finite",
              "rsqrt", "erf", "erfc", "expm1"]
        outs = [_n(b, u, x) for u in un]
        outs += [
            _n(b, "pow", x, _c(b, 1.5, dt)), _n(b, "pow", x, _c(b, -1.0, dt)),
            _n(b, "pow", x, _c(b, 3.0, dt)), _n(b, "pow", two, x), _n(b, "pow", x, x),
            _n(b, "divide", x, x), _n(b, "multiply", x, zero), _n(b, "add", x, _n(b, "negative", x)),
            _n(b, "maximum", x, zero), _n(b, "maximum", zero, x),
            _n(b, "minimum", x, one), _n(b, "minimum", one, x),
            _n(b, "floordiv", x, zero), _n(b, "floormod", x, zero),
            _n(b, "floordiv", one, x), _n(b, "floormod", x, _c(b, -2.0, dt)),
            _n(b, "greater", x, zero), _n(b, "less_equal", x, zero),
            _n(b, "equal", x, x), _n(b, "not_equal", x, x),
            _n(b, "where", _n(b, "greater", x, zero), x, _n(b, "reciprocal", x)),
            _n(b, "cast", _n(b, "cast", x, dtype="float32" if dt == "float64" else "float64"),
               dtype=dt),
            _n(b, "cast", x, dtype="bool"),
        ]
        for op in ("reduce_max", "reduce_min", "reduce_sum"):
            outs.append(_n(b, op, x, axis=(0,), keepdims=False))
            outs.append(_n(b, op, m, axis=(1,), keepdims=False))  # rows with and without NaN
            outs.append(_n(b, op, m, axis=(0,), keepdims=True))
        outs += [_n(b, "argmax", m, axis=1, output_type="int64"),
                 _n(b, "argmin", m, axis=0, output_type="int32")]
        g = b.build(outs)
        rng = np.random.default_rng(4)
        ordinary = rng.uniform(-1, 1, 52) * 10.0 ** rng.integers(-3, 2, 52)
        xs = np.concatenate([SPECIAL, ordinary]).astype(dt)
        ms = np.array([[1.0, np.nan, 3.0, -1.0], [0.5, -2.0, 4.0, 1.5],
                       [np.inf, -np.inf, np.nan, 0.0]], dt)
        with np.errstate(all="ignore"):
            ops |= _check(g, {g.inputs[0]: xs, g.inputs[1]: ms})
    return ops


def test_nan_and_inf_in_every_elementwise_op():
    memo(_b_special_values)


def _b_linalg():
    """The linear algebra primitives' forwards (their VJPs hold inverses and matmuls, not
    themselves), on a batch of well-conditioned matrices and on one matrix (0-d results)."""
    ops = set()
    rng = np.random.default_rng(5)
    for dt in DTYPES:
        for batch in ((2, 3), ()):
            b = GraphBuilder(f"linalg_{dt}_{len(batch)}")
            a = _in(b, batch + (3, 3), dt)
            rhs = _in(b, batch + (3, 2), dt)
            spd = _n(b, "add", _n(b, "matmul", a, _n(b, "transpose", a,
                                                      perm=tuple(range(len(batch))) + (
                                                          len(batch) + 1, len(batch)))),
                     _c(b, np.eye(3), dt))
            outs = [_n(b, op, a) for op in ("matrix_inverse", "matrix_determinant",
                                             "log_abs_det", "det_sign")]
            outs += [_n(b, "matrix_solve", a, rhs), _n(b, "cholesky", spd)]
            g = b.build(outs)
            m = np.eye(3) + 0.3 * rng.standard_normal(batch + (3, 3))
            ops |= _check(g, {g.inputs[0]: m.astype(dt),
                              g.inputs[1]: rng.standard_normal(batch + (3, 2)).astype(dt)})
    return ops


def test_linalg_forwards():
    memo(_b_linalg)


def _b_nan_gradients():
    """NaN and Inf in a forward whose gradient is compiled: sqrt and log of negatives,
    0/0, exp overflow, reduce_max over a NaN (its gradient divides by the tie count)."""
    ops = set()
    for dt in DTYPES:
        x = jt.constant(np.array([-1.0, 0.0, 4.0, 1000.0, np.nan, 2.0], dt))
        w = jt.constant(np.array([0.5, -1.0, 2.0, 1.0, 3.0, 0.0], dt))
        m = jt.constant(np.array([[1.0, np.nan, 2.0], [3.0, 3.0, -1.0]], dt))

        def f(x, w, m):
            with np.errstate(all="ignore"):
                return (jt.reduce_sum(jt.sqrt(x) * w) + jt.reduce_sum(jt.log(x) * w)
                        + jt.reduce_sum(x / x) + jt.reduce_sum(jt.exp(x) * w)
                        + jt.reduce_sum(jt.reduce_max(m, 1) * w[:2])
                        + jt.reduce_sum(jt.reduce_min(m, 0)))

        with np.errstate(all="ignore"):
            ops |= _compare_tape(f, [x, w, m], f"NaN and Inf in the forward ({dt})")
    return ops


def test_nan_and_inf_propagate_through_compiled_gradients():
    memo(_b_nan_gradients)


def test_check_numerics_in_a_compiled_gradient_raises_like_interpret():
    """check_numerics checks the gradient that flows back through it: a NaN or Inf in the
    seed raises the same error on both backends, and a finite gradient passes."""
    x = jt.constant(np.array([0.0, 1.0, 4.0]))

    def grad(backend, seed):
        with jt.GradientTape(backend=backend) as tape:
            tape.watch(x)
            y = jt.debugging.check_numerics(jt.square(x) + x, "the gradient of y")
        return tape.gradient(y, x, output_gradients=jt.constant(np.array(seed)))

    np.testing.assert_array_equal(grad("cpu", [1.0, 2.0, 3.0]).numpy(),
                                  grad("interpret", [1.0, 2.0, 3.0]).numpy())
    for seed in ([1.0, np.nan, 0.0], [np.inf, 0.0, np.nan]):
        msgs = []
        for backend in ("interpret", "cpu"):
            with pytest.raises(jt.errors.InvalidArgumentError) as e:
                grad(backend, seed)
            # the "(at file:line)" part names the first frame outside jittape: here the
            # spy on cpu.run, so it is not compared
            msgs.append(re.sub(r" \(at [^)]*\)$", "", str(e.value)))
        assert msgs[0] == msgs[1], msgs
        assert "the gradient of y : Tensor had" in msgs[0]


def test_earlier_results_survive_later_calls():
    """The cpu backend pools output arrays across calls: a result the caller still holds
    is never written by the next call (the graph is compiled once)."""
    def grad(a):
        x = jt.constant(a)
        with jt.GradientTape(backend="cpu") as tape:
            tape.watch(x)
            y = jt.reduce_sum(jt.tanh(x) * x)
        return tape.gradient(y, x)

    rng = np.random.default_rng(6)
    arrays = [rng.normal(size=(2, 5)) for _ in range(4)]
    before = cpu.stats["graphs"]
    held = [grad(a) for a in arrays]
    assert cpu.stats["graphs"] <= before + 1
    for g, a in zip(held, arrays):
        t = np.tanh(a)
        np.testing.assert_allclose(g.numpy(), t + a * (1 - t * t), rtol=1e-12)


# ---------------------------------------------------------------------------
# 5. Minimal reproductions of backend gaps the tests above found (each asserts the
# correct behaviour: it compiles, and equals interpret)


def test_scalar_constant_gradient():
    """The gradient of -x for a scalar x is a backward graph whose output is a 0-d
    ``const``; a 0-d constant must reach the entry as a 0-d array."""
    for dt in DTYPES:
        x = jt.constant(np.array(0.7, dt))
        with jt.GradientTape(backend="cpu") as tape:
            tape.watch(x)
            y = -x
        g = tape.gradient(y, x)
        assert g.dtype.name == dt and float(g.numpy()) == -1.0
    b = GraphBuilder("scalar_const")
    c = _c(b, 2.5)
    _check(b.build([c, _n(b, "reshape", c, shape=(1, 1))]))


def test_reduction_epilogue_reading_a_constant_array():
    """A non-scalar constant that only a reduction kernel's epilogue reads."""
    b = GraphBuilder("epilogue_const")
    x = _in(b, (3, 4))
    r = _n(b, "reduce_sum", x, axis=(1,), keepdims=True)
    _check(b.build([_n(b, "add", r, _c(b, [[1.0], [2.0], [3.0]]))]))
    # through the tape: clip_by_norm with axes makes this kernel in its backward graph
    x = jt.constant(np.array([[0.1, -0.2, 0.3], [1.0, 0.5, -2.0]]))
    _compare_tape(lambda x: jt.reduce_sum(jt.clip_by_norm(x, 0.8, axes=[1]) * x), [x],
                  "clip_by_norm per row")


def test_is_nan_and_is_finite():
    b = GraphBuilder("is_nan")
    x = _in(b, (6,))
    g = b.build([_n(b, "is_nan", x), _n(b, "is_finite", x)])
    _check(g, {x: np.array([np.nan, np.inf, -np.inf, 0.0, 1.0, -2.0])})


def test_matmul_of_broadcast_operands():
    """A ``broadcast_to`` feeding a matmul: the product is of the broadcast matrices. The
    kernel must not be handed the array the broadcast views: with a (3,1) and a (1,2)
    base, np.dot of the bases is a valid (3,2) product, a third of the right one."""
    b = GraphBuilder("broadcast_matmul")
    u = _in(b, (3, 1))
    v = _in(b, (1, 2))
    a = _n(b, "broadcast_to", u, shape=(3, 3))
    c = _n(b, "broadcast_to", v, shape=(3, 2))
    g = b.build([_n(b, "matmul", a, c)])
    feeds = {u: np.array([[1.0], [2.0], [3.0]]), v: np.array([[1.0, 10.0]])}
    np.testing.assert_array_equal(_run_cpu(g, feeds)[0], 3 * feeds[u] * feeds[v])


def _run_cpu(graph, feeds):
    return backends.run(passes.run_pipeline(graph, backends.pipeline("cpu")).graph, feeds, "cpu")


def test_gradient_of_a_row_sum_of_a_matmul():
    """The VJP of a sum over an axis broadcasts its seed into the matmul's VJP:
    d/dw sum_i c_i sum_j (x @ w)_ij = x^T @ broadcast(c)."""
    rng = np.random.default_rng(5)
    x = jt.constant(rng.normal(size=(4, 3)))
    w = jt.constant(rng.normal(size=(3, 2)))
    c = jt.constant(np.arange(4.0))
    _compare_tape(lambda w: jt.reduce_sum(jt.reduce_sum(jt.matmul(x, w), axis=1) * c), [w],
                  "row sum of a matmul")
    b = GraphBuilder("broadcast_matmul_operand")
    v = _in(b, (3,))
    m = _in(b, (3, 2))
    _check(b.build([_n(b, "matmul", _n(b, "broadcast_to", v, shape=(3, 3)), m)]))


def test_pow_one_half_of_minus_inf():
    """numpy's power computes x**0.5 as sqrt(x): (-inf)**0.5 is NaN and (-0)**0.5 is -0
    there; TF (C's pow) gives +inf and +0, and so do both backends."""
    b = GraphBuilder("pow_half")
    x = _in(b, (6,))
    g = b.build([_n(b, "pow", x, _c(b, 0.5))])
    feeds = {x: np.array([-np.inf, np.inf, 4.0, -1.0, -0.0, 0.0])}
    with np.errstate(all="ignore"):
        _check(g, feeds)
    (got,) = backends.run(g, feeds, "interpret")
    np.testing.assert_array_equal(got, [np.inf, np.inf, 2.0, np.nan, 0.0, 0.0])
    assert not np.signbit(got[4])


def test_integer_division_by_zero_raises_like_interpret():
    """floordiv and floormod of integers by zero raise InvalidArgumentError (TF's "Integer
    division by zero") on interpret; compiled, they must not return numbers."""
    for op in ("floordiv", "floormod"):
        b = GraphBuilder(f"int_{op}")
        x = _in(b, (3,), "int32")
        y = _in(b, (3,), "int32")
        g = b.build([_n(b, op, x, y)])
        feeds = {x: np.array([7, -7, 1], np.int32), y: np.array([2, 0, 3], np.int32)}
        for backend in ("interpret", "cpu"):
            with pytest.raises(jt.errors.InvalidArgumentError, match="division by zero"):
                backends.run(g, feeds, backend)


def test_slice_to_a_scalar():
    """``x[2, 3]`` is a 0-d array in the IR (numpy would give a scalar)."""
    b = GraphBuilder("slice_scalar")
    x = _in(b, (4, 5))
    e = _n(b, "strided_slice", x, key=(2, 3))
    _check(b.build([e, _n(b, "exp", e)]))


# ---------------------------------------------------------------------------
# Coverage: every op was compiled somewhere in this file

EXEMPT = {"custom_gradient", "read"}
# ops computed from types alone (shape, size): ir.concretize makes them constants before
# a graph reaches any backend
EXEMPT |= {name for name, op in OP_TABLE.items() if op.from_types is not None}
HAND_BUILT = [
    _b_noncontiguous_feeds, _b_noncontiguous_tape_values, _b_views,
    _b_broadcast_scalar_empty, _b_matmul_layouts, _b_reductions, _b_special_values,
    _b_nan_gradients, _b_linalg,
]


def _all_compiled_ops() -> set:
    ops = set()
    for p in GRAD_PARAMS:
        ops |= memo(_grad_check, *p)[2]
    for p in FWD_PARAMS:
        ops |= memo(_forward_check, *p)
    for fn in HAND_BUILT:
        ops |= memo(fn)
    return ops


def test_every_op_is_compiled():
    missing = sorted(set(OP_TABLE) - EXEMPT - _all_compiled_ops())
    assert not missing, f"ops no cpu-vs-interpret comparison compiled: {missing}"


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_matmul_compiles_as_a_loop_nest(dtype):
    """Numba's np.dot (BLAS) multiplies floats only: an integer matmul is a loop nest of
    its own, compiled (it used to fall back to interpret with a CompileWarning), plain,
    batched, transposed and with an epilogue, exact as numpy's."""
    import warnings

    from jittape.compiler.backends import cpu

    rng = np.random.default_rng(0)
    a = rng.integers(-50, 50, (3, 4)).astype(dtype)
    b = rng.integers(-50, 50, (4, 5)).astype(dtype)
    A = rng.integers(-50, 50, (2, 3, 4)).astype(dtype)
    cases = [
        (lambda x, y: jt.matmul(x, y) + 1, (a, b), a @ b + 1),
        (lambda x, y: jt.matmul(x, y), (A, b), A @ b),
        (lambda x, y: jt.matmul(x, y, transpose_b=True), (a, b.T.copy()), a @ b),
        (lambda x, y: jt.matmul(x, y, transpose_a=True), (a.T.copy(), b), a @ b),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error", cpu.CompileWarning)
        for fn, args, want in cases:
            f = jt.function(fn, backend="cpu")
            got = f(*args).numpy()
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
            prog = f.get_concrete_function(*args).program
            assert prog is not None and prog.fallback is None and prog.ready
