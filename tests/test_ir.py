"""The IR: printing, verification, canonical form and structural keys."""

import numpy as np
import pytest

import jittape as jt
from jittape.compiler.backends import interpret
from jittape.compiler.ir import (
    Const, Graph, GraphBuilder, GraphError, Node, Type, print_graph, verify,
)
from jittape.ops import REGISTRY


def _mlp_graph():
    b = GraphBuilder("step")
    x = b.add_input(Type((32, 784), "float32"))
    w = b.add_input(Type((784, 10), "float32"))
    (h,) = b.add_node(REGISTRY["matmul"], [x, w])
    (t,) = b.add_node(REGISTRY["tanh"], [h])
    (s,) = b.add_node(REGISTRY["reduce_sum"], [t], {"axis": (0, 1), "keepdims": False})
    return b.build([t, s])


def test_type_prints_short_dtype_and_dims():
    assert str(Type((32, 784), "float32")) == "f32[32,784]"
    assert str(Type((), "int32")) == "i32[]"
    assert str(Type((None, 3), "float64")) == "f64[?,3]"
    assert Type((2, 3), np.float32) == Type([2, 3], "float32")


def test_print_graph_golden_text():
    text = print_graph(_mlp_graph())
    assert text.splitlines() == [
        "graph step(%0: f32[32,784], %1: f32[784,10]) {",
        "  %2 = matmul %0, %1                 : f32[32,10]",
        "  %3 = tanh %2                       : f32[32,10]",
        "  %4 = reduce_sum %3 {axis=(0, 1), keepdims=False} : f32[]",
        "  return %3, %4",
        "}",
    ]


def test_verify_accepts_a_good_graph():
    verify(_mlp_graph())


def test_verify_rejects_use_before_definition():
    g = _mlp_graph()
    bad = Graph(g.inputs, g.input_types, (g.nodes[1], g.nodes[0], g.nodes[2]), g.outputs)
    with pytest.raises(GraphError, match="tanh.*before definition"):
        verify(bad)


def test_verify_rejects_wrong_type_and_shows_context():
    g = _mlp_graph()
    n = g.nodes[1]
    wrong = Node(n.op, n.inputs, n.outputs, n.attrs, (Type((32, 11), "float32"),))
    bad = Graph(g.inputs, g.input_types, (g.nodes[0], wrong, g.nodes[2]), g.outputs)
    with pytest.raises(GraphError, match=r"type f32\[32,11\], op infers f32\[32,10\]") as e:
        verify(bad)
    assert "matmul" in str(e.value)  # the neighbouring nodes are printed


def test_verify_rejects_undefined_output_and_double_definition():
    g = _mlp_graph()
    with pytest.raises(GraphError, match="never defined"):
        verify(Graph(g.inputs, g.input_types, g.nodes, (99,)))
    n = g.nodes[1]
    dup = Node(n.op, n.inputs, (2,), n.attrs, n.types)
    with pytest.raises(GraphError, match="defined twice"):
        verify(Graph(g.inputs, g.input_types, (g.nodes[0], dup), ()))


def test_verify_rejects_wrong_arity():
    b = GraphBuilder()
    x = b.add_input(Type((3,), "float32"))
    g = b.build([])
    node = Node(REGISTRY["add"], (x,), (7,), (), (Type((3,), "float32"),))
    with pytest.raises(GraphError, match="add takes 2 inputs"):
        verify(Graph(g.inputs, g.input_types, (node,), (7,)))


def test_canonical_form_and_structural_key_ignore_value_ids():
    g = _mlp_graph()
    shift = {v: v + 100 for v in range(10)}
    moved = Graph(
        tuple(shift[i] for i in g.inputs), g.input_types,
        tuple(Node(n.op, tuple(shift[i] for i in n.inputs), tuple(shift[o] for o in n.outputs),
                   n.attrs, n.types) for n in g.nodes),
        tuple(shift[o] for o in g.outputs),
        "renamed",
    )
    assert moved.structural_key() == g.structural_key()
    assert print_graph(moved.canonical()).splitlines()[1:] == (
        print_graph(g.canonical()).splitlines()[1:]
    )
    other = GraphBuilder("step")
    x = other.add_input(Type((32, 784), "float32"))
    w = other.add_input(Type((784, 10), "float32"))
    (h,) = other.add_node(REGISTRY["matmul"], [x, w])
    (t,) = other.add_node(REGISTRY["sigmoid"], [h])
    assert other.build([t]).structural_key() != g.structural_key()


def test_const_attr_hashes_by_content():
    a, b = Const(np.arange(3.0)), Const(np.arange(3.0))
    assert a == b and hash(a) == hash(b)
    assert a != Const(np.arange(3.0, dtype=np.float32))
    src = np.ones(2)
    c = Const(src)
    src[0] = 5  # the attribute took a copy
    assert c.array[0] == 1


def test_interpret_runs_a_graph():
    g = _mlp_graph()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 784)).astype(np.float32)
    w = rng.standard_normal((784, 10)).astype(np.float32) * 0.05
    t, s = interpret.run(g, {g.inputs[0]: x, g.inputs[1]: w})
    np.testing.assert_allclose(t, np.tanh(x @ w), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s, np.tanh(x @ w).sum(), rtol=1e-4)


def test_interpret_refuses_missing_feed():
    g = _mlp_graph()
    with pytest.raises(KeyError, match="no value fed"):
        interpret.run(g, {})


def test_effects_are_listed_in_program_order():
    g = _mlp_graph()
    assert g.effects == ()  # no side effects in a pure graph


def test_deep_graph_canonicalizes_without_recursion():
    b = GraphBuilder()
    v = b.add_input(Type((2,), "float32"))
    for _ in range(5000):
        (v,) = b.add_node(REGISTRY["negative"], [v])
    g = b.build([v])
    verify(g)
    assert len(g.canonical().nodes) == 5000


def test_tensor_ids_are_value_ids_in_recorded_nodes():
    x = jt.constant([1.0, 2.0])
    with jt.GradientTape() as tape:
        tape.watch(x)
        y = jt.tanh(x)
    node = tape._nodes[-1]
    assert node.inputs == (x._id,) and node.outputs == (y._id,)
    assert node.op is REGISTRY["tanh"]
