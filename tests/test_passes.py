"""Each pass on hand-built graphs: exactly what it removes, merges, folds, rewrites or
fuses, and that the interpret backend gives the same numbers before and after."""

import numpy as np
import pytest

import jittape as jt
import passes
from jittape.autodiff import backward_graph, forward_graph
from jittape.compiler.backends import interpret
from jittape.compiler.ir import (
    NO_GRADIENT, Const, GraphBuilder, GraphError, Node, OpDef, Type, get_op,
)
from jittape.tensor import Tracer
from passes.buffers import BufferPlan


class G:
    """A tiny DSL over GraphBuilder: ``g("add", a, b)``, ``g.const(2.0)``."""

    def __init__(self, name="g"):
        self.b = GraphBuilder(name)

    def input(self, shape, dtype="float64"):
        return self.b.add_input(Type(shape, dtype))

    def __call__(self, name, *ins, **attrs):
        op = name if isinstance(name, OpDef) else get_op(name)
        return self.b.add_node(op, ins, attrs or None)[0]

    def const(self, value, dtype="float64"):
        return self("const", value=Const(np.asarray(value, dtype)))

    def fill(self, shape, value, dtype="float64"):
        return self("fill", shape=tuple(shape), value=value, dtype=dtype)

    def build(self, *outs):
        return self.b.build(outs)


def feeds_for(g, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for v, t in zip(g.inputs, g.input_types):
        if t.dtype.startswith("float"):
            out[v] = (rng.uniform(0.5, 2.0, t.shape)).astype(t.dtype)
        elif t.dtype == "bool":
            out[v] = rng.random(t.shape) > 0.5
        else:
            out[v] = rng.integers(0, 4, t.shape).astype(t.dtype)
    return out


def same_results(before, after, rtol=1e-12):
    f = feeds_for(before)
    a = interpret.run(before, f)
    b = interpret.run(after, f)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.shape(x) == np.shape(y)
        np.testing.assert_allclose(x, y, rtol=rtol, atol=1e-12)


def ops(g):
    return [n.op.name for n in g.nodes]


def run(pass_fn, g, **kw):
    res = pass_fn(g, **kw)
    passes.verify(res.graph)
    same_results(g, res.graph)
    return res


def cleaned(pass_fn, g):
    """``pass_fn`` then pruning (rewrites leave the replaced nodes dead)."""
    g2 = run(pass_fn, g).graph
    return passes.prune_unreachable(g2).graph


EFFECT = OpDef("test_effect", kind="other", nin=1, forward=lambda x: x,
               infer=lambda types: types[0], pure=False, effect=True)
IMPURE = OpDef("test_impure", kind="other", nin=1, forward=lambda x: x + 0,
               infer=lambda types: types[0], pure=False)


# ---------------------------------------------------------------------------
# prune_unreachable


def test_prune_unreachable_drops_dead_nodes_and_keeps_effects():
    g = G()
    x = g.input((3,))
    y = g.input((3,))
    dead = g("exp", x)
    g("tanh", dead)
    g(EFFECT, y)  # nothing reads it, but it is a side effect
    out = g("sin", x)
    graph = g.build(out)
    res = run(passes.prune_unreachable, graph)
    assert ops(res.graph) == ["test_effect", "sin"]
    assert res.report.removed == 2
    assert res.graph.inputs == graph.inputs  # the signature stays


def test_prune_unreachable_can_drop_unused_inputs():
    g = G()
    x = g.input((3,))
    g.input((3,))
    graph = g.build(g("sin", x))
    res = passes.prune_unreachable(graph, drop_inputs=True)
    assert res.graph.inputs == (x,)


# ---------------------------------------------------------------------------
# prune_stop_gradient


def test_prune_stop_gradient_keeps_only_what_carries_gradient():
    g = G()
    w = g.input((3,))
    x = g.input((3,))
    a = g("multiply", w, x)
    s = g("stop_gradient", g("tanh", w))  # cut
    i = g("cast", g("floor", w), dtype="int32")  # non-float: cut
    fi = g("cast", i, dtype="float64")
    b = g("multiply", s, x)
    loss = g("reduce_sum", g("add", g("add", a, b), fi), axis=(0,), keepdims=False)
    graph = g.build(loss)
    res = passes.prune_stop_gradient(graph, sources=(w,))
    kept = ops(res.graph)
    assert kept == ["multiply", "add", "add", "reduce_sum"]
    assert "tanh" not in kept and "stop_gradient" not in kept and "cast" not in kept
    why = "\n".join(res.report.details)
    assert "stop_gradient" in why and "non-float" in why
    # what the slice reads from the cut part became inputs
    assert b in res.graph.inputs and fi in res.graph.inputs and w in res.graph.inputs


def _tape_backward_graph(loss_fn):
    x = jt.constant(np.linspace(0.5, 1.5, 6))
    w = jt.Variable(np.linspace(-1, 1, 6))
    with jt.GradientTape() as tape:
        loss = loss_fn(x, w)
    g, feeds, computed, consts = backward_graph(tape._nodes, [loss], [None], [w._id],
                                                tape._values)
    return g


def test_backward_graph_has_no_node_for_a_stop_gradient_branch():
    plain = _tape_backward_graph(lambda x, w: jt.reduce_sum(w * x))
    cut = _tape_backward_graph(
        lambda x, w: jt.reduce_sum(w * x + jt.stop_gradient(jt.tanh(w) * jt.exp(x)))
    )
    assert cut.structural_key() == plain.structural_key()


# ---------------------------------------------------------------------------
# CSE


def test_cse_merges_duplicates_commutative_operands_and_equal_constants():
    g = G()
    x = g.input((4,))
    y = g.input((4,))
    e1, e2 = g("exp", x), g("exp", x)
    s1, s2 = g("add", x, y), g("add", y, x)
    c1, c2 = g.const([1.0, 2.0, 3.0, 4.0]), g.const([1.0, 2.0, 3.0, 4.0])
    d1, d2 = g("subtract", x, y), g("subtract", y, x)  # not commutative: both stay
    out = g("add", g("add", g("multiply", e1, c1), g("multiply", e2, c2)),
            g("add", g("add", s1, s2), g("add", d1, d2)))
    res = run(passes.cse, g.build(out))
    assert res.report.merged == 4  # exp, add(y,x), const, and multiply(e2,c2) after those
    assert ops(res.graph).count("exp") == 1
    assert ops(res.graph).count("subtract") == 2


def test_cse_leaves_impure_nodes_alone():
    g = G()
    x = g.input((2,))
    out = g("add", g(IMPURE, x), g(IMPURE, x))
    res = passes.cse(g.build(out))
    assert ops(res.graph).count("test_impure") == 2
    assert res.report.merged == 0


# ---------------------------------------------------------------------------
# constant folding


def test_fold_constants_evaluates_small_constant_subgraphs():
    g = G()
    x = g.input((3,))
    c = g("multiply", g("add", g.const(2.0), g.const(3.0)), g.const([1.0, 2.0, 3.0]))
    out = g("add", x, g("reshape", c, shape=(3,)))
    res = run(passes.fold_constants, g.build(out))
    assert res.report.folded == 3  # add, multiply, reshape
    assert ops(res.graph).count("const") == 6 and "reshape" not in ops(res.graph)
    consts = [n for n in res.graph.nodes if n.op.name == "const"]
    assert any(np.array_equal(n.attr_dict["value"].array, [5.0, 10.0, 15.0]) for n in consts)


def test_fold_constants_does_not_blow_up_broadcasts():
    g = G()
    x = g.input((1000,))
    b = g("broadcast_to", g.const(2.0), shape=(1000,))
    res = run(passes.fold_constants, g.build(g("multiply", x, b)))
    assert "broadcast_to" in ops(res.graph)
    assert res.report.folded == 0


def test_fold_constants_turns_tiny_fills_into_constants_and_keeps_big_ones():
    g = G()
    x = g.input((100,))
    out = g("add", g("multiply", x, g.fill((), 3.0)), g.fill((100,), 1.0))
    res = run(passes.fold_constants, g.build(out))
    assert ops(res.graph).count("fill") == 1 and res.report.folded == 1


# ---------------------------------------------------------------------------
# simplification

def _x(g, shape=(3,)):
    return g.input(shape)


SIMPLIFY_CASES = {
    # name: (build(g) -> output, op names left after simplify + prune)
    "x*1": (lambda g: g("multiply", _x(g), g.const(1.0)), []),
    "1*x": (lambda g: g("multiply", g.const(1.0), _x(g)), []),
    "x+0": (lambda g: g("add", _x(g), g.const(0.0)), []),
    "x-0": (lambda g: g("subtract", _x(g), g.const(0.0)), []),
    "x/1": (lambda g: g("divide", _x(g), g.const(1.0)), []),
    "x+0 broadcast": (lambda g: g("add", _x(g, (3,)), g.fill((2, 3), 0.0)), ["broadcast_to"]),
    "x*0 int": (lambda g: g("multiply", g.input((3,), "int32"), g.const(0, "int32")),
                ["fill"]),
    "x*0 float keeps NaN": (lambda g: g("multiply", _x(g), g.const(0.0)), ["const",
                                                                          "multiply"]),
    "0-x": (lambda g: g("subtract", g.const(0.0), _x(g)), ["negative"]),
    "x+(-y)": (lambda g: g("add", _x(g), g("negative", _x(g))), ["subtract"]),
    "x-(-y)": (lambda g: g("subtract", _x(g), g("negative", _x(g))), ["add"]),
    "x*x": (lambda g: (lambda x: g("multiply", x, x))(_x(g)), ["square"]),
    "--x": (lambda g: g("negative", g("negative", _x(g))), []),
    "not not b": (lambda g: g("logical_not", g("logical_not", g.input((3,), "bool"))), []),
    "exp(log(x)) keeps NaN": (lambda g: g("exp", g("log", _x(g))), ["log", "exp"]),
    "x**1": (lambda g: g("pow", _x(g), g.const(1.0)), []),
    "x**2": (lambda g: g("pow", _x(g), g.const(2.0)), ["square"]),
    "x**0.5 stays": (lambda g: g("pow", _x(g), g.const(0.5)), ["const", "pow"]),
    "x**-1": (lambda g: g("pow", _x(g), g.const(-1.0)), ["reciprocal"]),
    "where(c,x,x)": (lambda g: (lambda x: g("where", g("greater", x, g.const(1.0)), x, x))(
        _x(g)), []),
    "where(True,x,y)": (lambda g: g("where", g.const(True, "bool"), _x(g), _x(g)), []),
    "cast same": (lambda g: g("cast", _x(g), dtype="float64"), []),
    "cast round trip": (lambda g: g("cast", g("cast", _x(g, (3,)), dtype="float32"),
                                    dtype="float64"), ["cast", "cast"]),  # narrowing: kept
    "identity": (lambda g: g("identity", _x(g)), []),
    "stop_gradient": (lambda g: g("stop_gradient", _x(g)), []),
    "reshape same": (lambda g: g("reshape", _x(g), shape=(3,)), []),
    "reshape reshape": (lambda g: g("reshape", g("reshape", _x(g, (2, 3)), shape=(3, 2)),
                                    shape=(6,)), ["reshape"]),
    "broadcast broadcast": (lambda g: g("broadcast_to", g("broadcast_to", _x(g, (3,)),
                                        shape=(2, 3)), shape=(4, 2, 3)), ["broadcast_to"]),
    "transpose transpose": (lambda g: g("transpose", g("transpose", _x(g, (2, 3, 4)),
                                        perm=(1, 2, 0)), perm=(2, 0, 1)), []),
    "transpose compose": (lambda g: g("transpose", g("transpose", _x(g, (2, 3, 4)),
                                      perm=(1, 0, 2)), perm=(0, 2, 1)), ["transpose"]),
    "sum over size 1": (lambda g: g("reduce_sum", _x(g, (3, 1)), axis=(1,), keepdims=False),
                        ["reshape"]),
    "x * broadcast(c)": (lambda g: g("multiply", _x(g, (2, 3)),
                                     g("broadcast_to", _x(g, (3,)), shape=(2, 3))),
                         ["multiply"]),
    "op of fill": (lambda g: g("exp", g.fill((50,), 0.0)), ["fill"]),
    "reshape of keepdims=False sum": (lambda g: g("reshape", g("reduce_sum", _x(g, (4, 5)),
                                      axis=(1,), keepdims=False), shape=(4, 1)),
                                      ["reduce_sum"]),
}


@pytest.mark.parametrize("case", sorted(SIMPLIFY_CASES))
def test_simplify_rule(case):
    build, left = SIMPLIFY_CASES[case]
    g = G()
    out = build(g)
    graph = g.build(out)
    after = cleaned(passes.simplify, graph)
    assert ops(after) == left, str(after)


def test_simplify_x_times_zero_for_floats_only_when_assuming_finite():
    g = G()
    x = _x(g)
    graph = g.build(g("multiply", x, g.const(0.0)))
    res = passes.simplify(graph, assume_finite=True)
    after = passes.prune_unreachable(res.graph).graph
    assert ops(after) == ["fill"]
    f = {x: np.array([1.0, np.inf, np.nan])}
    assert np.isnan(interpret.run(graph, f)[0][1:]).all()  # IEEE: inf*0, nan*0 are NaN
    assert (interpret.run(after, f)[0] == 0).all()


@pytest.mark.parametrize("build,left", [
    (lambda g: g("exp", g("log", _x(g))), []),
    (lambda g: g("pow", _x(g), g.const(0.5)), ["sqrt"]),
])
def test_simplify_domain_rules_with_assume_finite(build, left):
    g = G()
    graph = g.build(build(g))
    res = run(passes.simplify, graph, assume_finite=True)
    assert ops(passes.prune_unreachable(res.graph).graph) == left


def test_simplify_keeps_float_semantics_where_it_must():
    g = G()
    x = _x(g)
    # log(exp(x)) is not rewritten (exp may overflow to inf), nor x - x (NaN - NaN)
    graph = g.build(g("log", g("exp", x)), g("subtract", x, x))
    after = cleaned(passes.simplify, graph)
    assert ops(after) == ["exp", "log", "subtract"]


# ---------------------------------------------------------------------------
# fusion


def fused_nodes(g):
    return [n for n in g.nodes if passes.is_fused(n)]


def body_ops(n):
    return [b.op.name for b in n.attr_dict["body"].nodes if b.op.name not in ("const", "fill")]


def fuse(g, **kw):
    res = run(passes.fuse, g, **kw)
    return res.graph


def test_fuse_chain_and_dag_into_one_loop_with_two_outputs():
    g = G()
    x, w = g.input((5, 4)), g.input((4,))
    a = g("multiply", x, w)  # broadcasting inside the kernel
    t = g("tanh", a)
    s = g("sigmoid", x)
    y = g("add", g("multiply", t, s), a)
    out = fuse(g.build(y, t))
    (k,) = fused_nodes(out)
    assert len(out.nodes) == 1 and k.attr_dict["kind"] == "loop"
    assert body_ops(k) == ["multiply", "tanh", "sigmoid", "multiply", "add"]
    assert set(k.outputs) == {y, t}
    assert k.attr_dict["space"] == (5, 4)


def test_fuse_elementwise_prologue_into_reduction_with_epilogue():
    g = G()
    x = g.input((8, 3))
    e = g("exp", g("multiply", x, g.const(2.0)))
    s = g("reduce_sum", e, axis=(0,), keepdims=False)
    out = g("log", g("add", s, g.const(1.0)))  # epilogue over the reduced shape [3]
    graph = fuse(g.build(out))
    (k,) = fused_nodes(graph)
    a = k.attr_dict
    assert a["kind"] == "reduction" and a["space"] == (8, 3) and a["rspace"] == (3,)
    assert body_ops(k) == ["multiply", "exp", "reduce_sum", "add", "log"]


def test_fuse_never_lets_an_epilogue_read_the_prologue():
    # softmax's shape: x - max(x) needs max first; exp(..) / sum needs sum first
    g = G()
    x = g.input((4, 6))
    m = g("reduce_max", x, axis=(1,), keepdims=True)
    e = g("exp", g("subtract", x, m))
    s = g("reduce_sum", e, axis=(1,), keepdims=True)
    y = g("divide", e, s)
    graph = fuse(g.build(y))
    kinds = [n.attr_dict["kind"] for n in fused_nodes(graph)]
    assert kinds == ["reduction", "reduction", "loop"]
    assert body_ops(fused_nodes(graph)[1]) == ["subtract", "exp", "reduce_sum"]


def test_fuse_refuses_a_merge_that_would_make_a_cycle():
    g = G()
    x, wt = g.input((4, 4)), g.input((4, 4))
    a = g("exp", x)
    m = g("matmul", a, wt)  # a -> matmul -> c and a -> c: merging a's group and c's
    c = g("add", a, m)  # loop would put the matmul inside a loop kernel's path
    graph = fuse(g.build(c))
    ks = fused_nodes(graph)
    assert [k.attr_dict["kind"] for k in ks] == ["loop", "matmul"]
    assert body_ops(ks[1]) == ["matmul", "add"]  # the add became the matmul's epilogue


def test_fuse_matmul_epilogue_is_optional_and_matmul_never_joins_a_loop():
    g = G()
    x, w, b = g.input((8, 4)), g.input((4, 5)), g.input((5,))
    h = g("relu", g("add", g("matmul", x, w), b))
    with_epi = fuse(g.build(h))
    (k,) = fused_nodes(with_epi)
    assert body_ops(k) == ["matmul", "add", "relu"]
    without = fuse(g.build(h), matmul_epilogue=False)
    assert ops(without) == ["matmul", "fused"]
    assert body_ops(fused_nodes(without)[0]) == ["add", "relu"]


def test_fuse_keeps_different_iteration_spaces_apart():
    g = G()
    x, v = g.input((6, 5)), g.input((7,))
    a = g("exp", x)
    b = g("tanh", v)
    graph = fuse(g.build(a, b))
    assert len(fused_nodes(graph)) == 2


def test_fuse_recomputes_a_cheap_value_instead_of_materialising_it():
    g = G()
    x, y = g.input((5, 4)), g.input((5, 4))
    cheap = g("multiply", x, y)
    e = g("exp", cheap)
    s = g("reduce_sum", e, axis=(1,), keepdims=True)  # e's group becomes a reduction
    out = g("add", g("divide", e, s), cheap)  # a new loop kernel reads e and cheap
    graph = fuse(g.build(out))
    k1, k2 = fused_nodes(graph)
    assert cheap not in k1.outputs  # not written: k2 recomputes x*y
    assert "multiply" in body_ops(k2)
    assert any("recomputed multiply" in line for line in
               passes.fuse(g.build(out)).report.details)
    no = passes.fuse(g.build(out), recompute=False).graph
    assert cheap in fused_nodes(no)[0].outputs


def test_fuse_does_not_recompute_an_expensive_value():
    g = G()
    x = g.input((5, 4))
    e = g("exp", x)
    s = g("reduce_sum", e, axis=(1,), keepdims=True)
    out = g("divide", e, s)
    graph = fuse(g.build(out))
    assert e in fused_nodes(graph)[0].outputs


def test_fuse_keeps_side_effects_out_and_in_order():
    g = G()
    x = g.input((3,))
    a = g("exp", x)
    e1 = g(EFFECT, a)
    b = g("tanh", x)
    e2 = g(EFFECT, b)
    graph = fuse(g.build(e1, e2))
    names = ops(graph)
    assert names.count("test_effect") == 2
    effects = [n.inputs[0] for n in graph.nodes if n.op is EFFECT]
    assert effects == [a, b]


def test_printer_shows_fused_bodies():
    g = G()
    x = g.input((3,))
    graph = fuse(g.build(g("tanh", g("exp", x))))
    text = str(graph)
    assert "fused %0 {kind='loop', space=(3,)}" in text
    assert "    |   %1 = exp %0" in text and "    |   %2 = tanh %1" in text


# ---------------------------------------------------------------------------
# the verifier on malformed graphs


def _fused_node(body, inputs, outputs, **attrs):
    a = {"body": body, "kind": "loop", "space": body.input_types[0].shape}
    a.update(attrs)
    types = tuple(body.types()[o] for o in body.outputs)
    return Node(passes.FUSED, tuple(inputs), tuple(outputs), tuple(sorted(a.items())), types)


def test_verify_rejects_a_reduction_inside_a_loop_kernel():
    b = G("body")
    x = b.input((3, 2))
    body = b.build(b("reduce_sum", b("exp", x), axis=(0,), keepdims=False))
    g = G()
    xo = g.input((3, 2))
    bad = _fused_node(body, [xo], [body.outputs[0]])
    from jittape.compiler.ir import Graph

    graph = Graph((xo,), (Type((3, 2), "float64"),), (bad,), (bad.outputs[0],))
    with pytest.raises(GraphError, match="reduce_sum inside a loop kernel"):
        passes.verify(graph)


def test_verify_rejects_an_epilogue_reading_the_prologue():
    b = G("body")
    x = b.input((3, 2))
    e = b("exp", x)
    s = b("reduce_sum", e, axis=(1,), keepdims=True)
    y = b("add", s, b("reduce_max", e, axis=(1,), keepdims=True))
    z = b("multiply", y, b("sin", e))  # sin(e) is prologue; multiply has shape (3,2)...
    body = b.build(z)
    bad = _fused_node(body, [x], [z], kind="reduction", axes=(1,), keepdims=True,
                      rspace=(3, 1))
    from jittape.compiler.ir import Graph

    graph = Graph((x,), (Type((3, 2), "float64"),), (bad,), (z,))
    with pytest.raises(GraphError):
        passes.verify(graph)


def test_verify_rejects_a_buffer_plan_that_overwrites_a_live_value():
    g = G()
    x = g.input((4,))
    a = g("exp", x)
    b = g("tanh", x)  # a is still live here
    out = g("add", a, b)
    graph = g.build(out)
    import dataclasses

    plan = BufferPlan(slots=(("float64", 4),), assign=((a, 0), (b, 0)), inplace=())
    with pytest.raises(GraphError, match="still live"):
        passes.verify(dataclasses.replace(graph, buffers=plan))
    # and running inside that plan gives a wrong answer, which is what the check prevents
    f = feeds_for(graph)
    right = interpret.run(graph, f)[0]
    wrong = interpret.run(dataclasses.replace(graph, buffers=plan), f)[0]
    assert not np.allclose(right, wrong)


# ---------------------------------------------------------------------------
# buffer reuse


def test_plan_buffers_reuses_dead_buffers_and_writes_in_place():
    g = G()
    x = g.input((64,))
    a = g("exp", x)
    b = g("tanh", a)
    c = g("sin", b)
    d = g("cos", c)
    out = g("add", d, x)
    graph = g.build(out)
    res = run(passes.plan_buffers, graph)
    plan = res.graph.buffers
    assert len(plan.assign) == 4  # a b c d; the input x and the output are not planned
    assert len(plan.slots) == 1  # each value dies where the next is written
    assert len(plan.inplace) == 3
    assert x not in plan.slot_of() and out not in plan.slot_of()
    without = passes.plan_buffers(graph, inplace=False).graph.buffers
    assert len(without.slots) == 2 and not without.inplace  # ping-pong


def test_plan_buffers_never_writes_into_inputs_or_views_of_outputs():
    g = G()
    x = g.input((4, 4))
    a = g("exp", x)
    r = g("reshape", a, shape=(16,))  # an output views a's buffer: a is pinned
    b = g("tanh", x)
    out = g("add", b, g.const(1.0))
    graph = g.build(r, out)
    plan = run(passes.plan_buffers, graph).graph.buffers
    assert a not in plan.slot_of()
    assert b in plan.slot_of()


def test_plan_buffers_gives_a_collectives_concat_a_buffer_nobody_shares():
    """The gradients a step allreduces are written into the concat's buffer where they
    are made (backends/schedule_ops.plan_homes): that buffer must hold no other value
    from the first gradient to the last read of the reduced result."""
    g = G()
    x = g.input((8,))
    a = g("exp", x)
    b = g("tanh", x)
    cat = g("concat", g("reshape", a, shape=(8,)), g("reshape", b, shape=(8,)), axis=0)
    red = g("allreduce", cat, average=True)
    y = g.input((16,))
    c = g("sin", g("exp", y))  # made after the concat, of the concat's size
    d = g("cos", g("tanh", y))
    out = g("add", g("add", c, d), g("exp", red))
    graph = g.build(out)
    assert passes.buffers.gathered(graph) == frozenset({cat})
    res = run(passes.plan_buffers, graph)
    slot_of = res.graph.buffers.slot_of()
    mine = slot_of[cat]
    assert [v for v, s in slot_of.items() if s == mine] == [cat]


# ---------------------------------------------------------------------------
# the pipeline


def test_pipeline_reports_and_verifies_every_pass():
    g = G()
    x = g.input((10,))
    y = g("multiply", g("exp", x), g.const(1.0))
    res = passes.run_pipeline(g.build(g("add", y, g("exp", x))), check=True)
    names = [r.name for r in res.reports]
    assert names[-2:] == ["fuse", "plan_buffers"]
    text = str(res)
    assert "simplify" in text and "rewritten 1" in text and "merged 1" in text
    assert len(passes.kernels(res.graph)) == 1


def test_pipeline_check_catches_a_pass_that_drops_a_side_effect():
    g = G()
    x = g.input((3,))
    g(EFFECT, x)
    graph = g.build(g("exp", x))

    @passes.graph_pass("broken")
    def broken(graph, report):
        from passes.core import rebuild

        return rebuild(graph, [n for n in graph.nodes if not n.op.effect])

    with pytest.raises(GraphError, match="broken dropped or reordered a side effect"):
        passes.run_pipeline(graph, [broken], check=True)


# ---------------------------------------------------------------------------
# the pinned workloads


def chain_graphs(n=1000):
    rng = np.random.default_rng(0)
    x = jt.constant(rng.standard_normal(n).astype(np.float32))
    w = jt.Variable(rng.standard_normal(n).astype(np.float32))
    b = jt.Variable(rng.standard_normal(n).astype(np.float32))
    with jt.GradientTape() as tape:
        loss = jt.reduce_sum(jt.tanh(x * w + b) * jt.sigmoid(x) + 0.5 * (x - w) ** 2)
    bwd, feeds, computed, _ = backward_graph(
        tape._nodes, [loss], [None], [w._id, b._id], tape._values, pipeline=()
    )
    fwd, ffeeds = forward_graph(tape._nodes, tape._values, [loss._id])
    return bwd, feeds, fwd, ffeeds


def test_chain_backward_is_one_kernel_with_two_outputs_and_forward_one_reduction():
    bwd, feeds, fwd, ffeeds = chain_graphs()
    opt = passes.run_pipeline(bwd, check=True).graph
    ks = passes.kernels(opt)
    assert len(ks) == 1 and len(opt.nodes) == 1
    assert passes.is_fused(ks[0]) and len(ks[0].outputs) == 2
    for a, b in zip(interpret.run(bwd, feeds), interpret.run(opt, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-6)

    fopt = passes.run_pipeline(fwd, check=True).graph
    (k,) = passes.kernels(fopt)
    assert k.attr_dict["kind"] == "reduction"
    assert k.attr_dict["body"].nodes[-1].op.name == "reduce_sum"
    np.testing.assert_allclose(interpret.run(fwd, ffeeds)[0], interpret.run(fopt, ffeeds)[0],
                               rtol=1e-5)


def mlp_train_step_graph(batch=32, sizes=(64, 128, 64, 10), lr=0.1):
    """A 3-layer MLP's whole SGD train step (forward, backward, update) as one graph."""
    tr = Tracer("train_step")
    with tr:
        x = tr.placeholder(Type((batch, sizes[0]), "float32"), "x")
        y = tr.placeholder(Type((batch,), "int32"), "y")
        params = []
        for a, b in zip(sizes, sizes[1:]):
            params += [tr.placeholder(Type((a, b), "float32"), "W"),
                       tr.placeholder(Type((b,), "float32"), "b")]
        with jt.GradientTape() as tape:
            tape.watch(params)
            h = x
            for i in range(3):
                h = jt.matmul(h, params[2 * i]) + params[2 * i + 1]
                if i < 2:
                    h = jt.nn.relu(h)
            loss = jt.reduce_mean(
                jt.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        grads = tape.gradient(loss, params)
        new = [p - lr * gr for p, gr in zip(params, grads)]
    return tr.builder.build([loss._id] + [v._id for v in new])


def missed_fusions(graph):
    """Pairs of adjacent kernels that could have been one (same iteration space, legal
    phase, and no path between them through a third kernel) — checked independently
    of the fusion pass's own bookkeeping."""
    nodes = list(graph.nodes)
    prod = {o: k for k, n in enumerate(nodes) for o in n.outputs}
    succ = {k: set() for k in range(len(nodes))}
    for k, n in enumerate(nodes):
        for i in n.inputs:
            if i in prod:
                succ[prod[i]].add(k)

    def reaches(a, b, skip_direct):
        stack = [s for s in succ[a] if not (skip_direct and s == b)]
        seen = set()
        while stack:
            u = stack.pop()
            if u == b:
                return True
            if u in seen:
                continue
            seen.add(u)
            stack.extend(succ[u])
        return False

    missed = []
    for p, pn in enumerate(nodes):
        for c in succ[p]:
            cn = nodes[c]
            if not (passes.is_fused(pn) and passes.is_fused(cn)):
                continue
            pa, ca = pn.attr_dict, cn.attr_dict
            # the values of pn that cn reads, and whether they are reduced results
            read = [i for i in cn.inputs if i in pn.outputs]
            body_t = pa["body"].types()
            shapes = {body_t[v].shape for v in read}
            could = False
            if pa["kind"] == "loop" and ca["kind"] in ("loop", "reduction"):
                could = pa["space"] == ca["space"]
            if pa["kind"] in ("reduction", "matmul") and ca["kind"] == "loop":
                could = ca["space"] == pa.get("rspace", pa["space"]) and shapes == {ca["space"]}
            if could and not reaches(p, c, skip_direct=True):
                missed.append((p, c))
    return missed


def test_mlp_train_step_kernel_count_is_pinned():
    graph = mlp_train_step_graph()
    res = passes.run_pipeline(graph, check=True)
    opt = res.graph
    ks = passes.kernels(opt)
    # 3 forward matmul kernels (+bias +relu, and the relu masks for the backward), the
    # log-softmax cross-entropy in 4 reduction kernels plus the mean, one_hot, the
    # logits' gradient with the last bias update, and per layer the weight gradient
    # matmuls with the SGD update as epilogue, the input-gradient matmuls with the
    # relu mask as epilogue, and the bias gradient reductions with their update.
    assert len(ks) == 17, str(opt)
    assert sum(passes.is_fused(k) for k in ks) == 16
    assert missed_fusions(opt) == []
    # no elementwise op is left outside a fused kernel
    assert [n.op.name for n in opt.nodes if n.op.kind == "elementwise"] == []
    # each layer's bias add + activation (and the relu mask) sit in its matmul's kernel
    forward = [k for k in ks if passes.is_fused(k) and k.attr_dict["kind"] == "matmul"
               and "relu" in body_ops(k)]
    assert len(forward) == 2
    for k in forward:
        assert body_ops(k) == ["matmul", "add", "relu", "greater"]
    masked = [k for k in ks if passes.is_fused(k) and "where" in body_ops(k)]
    assert len(masked) == 2
    rng = np.random.default_rng(1)
    feeds = {}
    for v, t in zip(graph.inputs, graph.input_types):
        feeds[v] = (rng.standard_normal(t.shape).astype(t.dtype) if t.dtype == "float32"
                    else rng.integers(0, 10, t.shape).astype(t.dtype))
    for a, b in zip(interpret.run(graph, feeds), interpret.run(opt, feeds)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def test_missed_fusions_checker_sees_a_missed_fusion():
    # the checker itself must be able to fail: an unfused pair over one space
    g = G()
    x = g.input((4,))
    graph = passes.fuse(g.build(g("exp", x))).graph
    (k,) = fused_nodes(graph)
    from jittape.compiler.ir import Graph

    b2 = G("b")
    y = b2.input((4,))
    body2 = b2.build(b2("tanh", y))
    k2 = Node(passes.FUSED, k.outputs, (99,), (("body", body2), ("kind", "loop"),
                                              ("space", (4,))), k.types)
    two = Graph(graph.inputs, graph.input_types, (k, k2), (99,))
    assert missed_fusions(two) == [(0, 1)]


def test_grad_unchanged_by_the_cleanup_pipeline_with_a_stop_gradient_branch():
    x = jt.Variable(np.array([0.3, -1.2, 2.0]))
    with jt.GradientTape() as tape:
        y = jt.reduce_sum(x * 1.0 + 0.0 * jt.exp(x) + jt.stop_gradient(x) * x)
    g = tape.gradient(y, x).numpy()
    np.testing.assert_allclose(g, 1.0 + x.numpy())


def test_report_names_no_gradient_ops():
    g = G()
    w = g.input((3,))
    am = g("argmax", w, axis=0, output_type="int64")
    out = g("add", g("reduce_sum", w, axis=(0,), keepdims=False), g("cast", am,
                                                                        dtype="float64"))
    res = passes.prune_stop_gradient(g.build(out), sources=(w,))
    assert any("no gradient" in d for d in res.report.details)
    assert NO_GRADIENT is get_op("argmax").vjp


@pytest.mark.parametrize("first", ["passes", "passes.fusion", "jittape.compiler.ir"])
def test_passes_can_be_imported_first(first):
    import subprocess
    import sys

    code = f"import {first}; import jittape as jt; print(jt.constant(1.0).numpy())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=__file__.rsplit("/tests/", 1)[0])
    assert r.returncode == 0, r.stderr


def test_plan_buffers_does_not_write_in_place_over_a_buffer_another_input_views():
    g = G()
    x = g.input((4, 4))
    a = g("exp", x)
    t = g("transpose", a, perm=(1, 0))
    out = g("add", a, t)  # a dies here, but the transpose of it is read here too
    graph = g.build(g("sin", out))
    res = run(passes.plan_buffers, graph)
    assert res.graph.buffers.inplace == ()
    # and the verifier refuses such a plan
    import dataclasses

    a_id = graph.nodes[0].outputs[0]
    out_id = graph.nodes[2].outputs[0]
    bad = BufferPlan(slots=(("float64", 16),), assign=((a_id, 0), (out_id, 0)),
                     inplace=((out_id, a_id),))
    with pytest.raises(GraphError, match="still live"):
        passes.verify(dataclasses.replace(graph, buffers=bad))


def test_explain_lists_passes_kernels_buffers_and_bodies():
    g = G()
    x, w = g.input((8, 4)), g.input((4, 3))
    h = g("relu", g("matmul", x, w))
    out = g("reduce_sum", g("exp", h), axis=(1,), keepdims=False)
    res = passes.run_pipeline(g.build(out), check=True)
    text = res.explain(details=True)
    assert "2 kernels: matmul[3], reduction[1]" in text  # relu, exp: the epilogue
    assert "kernel" in text and "    | " in text and "buffers: 1 intermediate" in text


def test_fuse_dead_reduction_leaves_a_loop_over_the_live_nodes_shape():
    g = G()
    x, r = g.input((5, 4)), g.input((5, 1))
    s = g("reduce_sum", g("exp", x), axis=(1,), keepdims=True)
    lo = g("tanh", r)  # a loop over (5, 1) that the dead epilogue below pulls in
    g("add", s, lo)  # dead
    graph = g.build(lo)
    out = fuse(graph)
    (k,) = fused_nodes(out)
    assert k.attr_dict["kind"] == "loop" and k.attr_dict["space"] == (5, 1)


def test_structural_key_of_fused_graphs_ignores_value_ids():
    def build(offset):
        g = G()
        for _ in range(offset):  # shift every id
            g.input(())
        x = g.input((6,))
        out = g("reduce_sum", g("tanh", g("exp", x)), axis=(0,), keepdims=False)
        graph = g.build(out)
        from jittape.compiler.ir import Graph

        graph = Graph((x,), (Type((6,), "float64"),), graph.nodes, graph.outputs)
        return passes.run_pipeline(graph).graph

    a, b = build(0), build(5)
    assert a.nodes[0].outputs != b.nodes[0].outputs
    assert a.structural_key() == b.structural_key()
    g = G()
    x = g.input((6,))
    other = passes.run_pipeline(g.build(g("reduce_sum", g("sin", g("exp", x)), axis=(0,),
                                                keepdims=False))).graph
    assert other.structural_key() != a.structural_key()


def test_fuse_merges_independent_siblings_that_read_the_same_input():
    g = G()
    x = g.input((6, 5))
    a = g("exp", x)
    b = g("sin", x)
    s1 = g("reduce_sum", x, axis=(1,), keepdims=False)
    s2 = g("reduce_max", g("square", x), axis=(1,), keepdims=False)
    graph = g.build(a, b, s1, s2)
    out = fuse(graph)
    kinds = sorted(k.attr_dict["kind"] for k in fused_nodes(out))
    assert kinds == ["loop", "reduction"]  # two loops -> one, two reductions -> one
    assert len(fused_nodes(passes.fuse(graph, siblings=False).graph)) == 4


def test_fuse_does_not_merge_siblings_with_a_path_between_them():
    g = G()
    x, w = g.input((4, 4)), g.input((4, 4))
    a = g("exp", x)
    m = g("matmul", a, w)
    b = g("add", g("sin", x), g("tanh", m))  # reads x like a, but depends on a via m
    graph = fuse(g.build(b), matmul_epilogue=False)
    assert len(fused_nodes(graph)) == 2


def test_body_phases_name_where_each_value_is_computed():
    g = G()
    x = g.input((8, 3))
    e = g("exp", g("multiply", x, g.const(2.0)))
    s = g("reduce_sum", e, axis=(0,), keepdims=False)
    out = g("log", s)
    (k,) = fused_nodes(fuse(g.build(out)))
    ph = passes.body_phases(k)
    by_op = {b.op.name: ph[b.outputs[0]] for b in k.attr_dict["body"].nodes}
    assert by_op == {"const": "leaf", "multiply": "pro", "exp": "pro", "reduce_sum": "red",
                     "log": "epi"}
