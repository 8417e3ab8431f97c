"""Issue 19's wrong answers, each pinned: programs are identified by exact structure
(never by printed text), generated code never rewrites the user's strings, an op the
code generator has no rule for is refused, and ``defop`` refuses unknown fields."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import jittape as jt
from jittape.compiler.backends import cpu
from jittape.compiler.ir import NO_GRADIENT, Const, Graph, GraphBuilder, Node, Type, get_op
from jittape.ops.registry import REGISTRY, defop, elementwise_infer

from test_passes_random import graphs

# ---------------------------------------------------------------------------
# Identity from structure, constants by their exact bytes

C2 = 0.1000000003  # equal to 0.1 in the printer's 8 significant digits


def test_function_with_constants_equal_in_print_gives_each_its_own_result():
    f = jt.function(lambda x, c: jt.reduce_sum(x * c), backend="cpu")
    x = jt.constant(np.ones(4))
    assert float(f(x, 0.1)) == pytest.approx(0.4, rel=0, abs=1e-15)
    assert float(f(x, C2)) == pytest.approx(4 * C2, rel=0, abs=1e-15)
    assert float(f(x, 0.1)) == pytest.approx(0.4, rel=0, abs=1e-15)


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_eager_gradient_with_constants_equal_in_print(backend):
    got = []
    for c in (0.1, C2, 0.1):
        w = jt.Variable(np.ones(4))
        with jt.GradientTape(backend=backend) as tape:
            y = jt.reduce_sum(w * c)
        got.append(tape.gradient(y, w).numpy()[0])
    assert got == [0.1, C2, 0.1]


def test_long_constants_differing_in_one_element_are_different_programs():
    base = np.linspace(0.0, 1.0, 64)
    other = base.copy()
    other[37] = np.nextafter(other[37], 2.0)
    x = jt.constant(np.ones(64))
    # (a numpy array argument is an input: the constants are built into the traces)
    g1 = jt.function(lambda x: jt.reduce_sum(x * jt.constant(base)), backend="cpu")
    g2 = jt.function(lambda x: jt.reduce_sum(x * jt.constant(other)), backend="cpu")
    assert float(g1(x)) == float(np.sum(np.ones(64) * base))
    assert float(g2(x)) == float(np.sum(np.ones(64) * other))


def test_structural_key_tells_apart_what_the_printer_does_not():
    def graph(value, dtype="float64"):
        b = GraphBuilder("g")
        x = b.add_input(Type((3,), dtype))
        (c,) = b.add_node(get_op("const"), [], {"value": Const(np.array(value, dtype))})
        (y,) = b.add_node(get_op("multiply"), [x, c])
        return b.build([y])

    assert str(graph(0.1)).split("\n")[1:] == str(graph(C2)).split("\n")[1:]
    assert graph(0.1).structural_key() != graph(C2).structural_key()
    assert graph(0.0).structural_key() != graph(-0.0).structural_key()
    assert graph(0.1).structural_key() == graph(0.1).structural_key()
    assert graph(1.0, "float32").structural_key() != graph(1.0).structural_key()


def _flip_last_bit(graph: Graph, k: int) -> Graph:
    """``graph`` with the k-th const node's first element changed in its last bit."""
    nodes, seen = [], 0
    for n in graph.nodes:
        if n.op.name == "const":
            if seen == k:
                a = np.array(n.attr_dict["value"].array)
                flat = a.reshape(-1).view(np.uint64 if a.dtype == np.float64 else np.uint32)
                flat[0] ^= 1
                n = Node(n.op, n.inputs, n.outputs, (("value", Const(a)),), n.types, n.loc)
            seen += 1
        nodes.append(n)
    return Graph(graph.inputs, graph.input_types, tuple(nodes), graph.outputs, graph.name)


@settings(max_examples=40)
@given(graphs(), st.integers(0, 100))
def test_graphs_differing_in_one_constant_bit_never_share_a_program(case, pick):
    graph, _feeds, _ = case
    consts = [n for n in graph.nodes if n.op.name == "const"]
    assume(consts)
    other = _flip_last_bit(graph, pick % len(consts))
    assert other.structural_key() != graph.structural_key()
    # the compiled program (generated and loaded, compiled by Numba on its first call)
    try:
        p1, p2 = cpu.program(graph), cpu.program(other)
    except cpu.Unsupported:
        return
    assert p1 is not p2
    assert p1.key != p2.key


# ---------------------------------------------------------------------------
# Generated code keeps the user's strings


@pytest.mark.parametrize("msg", ["loss x7 of layer t3", "D0 acc12 v3 in prange( <par>"])
def test_check_numerics_message_inside_function_is_the_users(msg):
    @jt.function(backend="cpu")
    def f(t):
        return jt.debugging.check_numerics(t * 2.0, msg)

    assert f(jt.constant([1.0, 2.0])).numpy().tolist() == [2.0, 4.0]
    with pytest.raises(jt.errors.InvalidArgumentError) as e:
        f(jt.constant([1.0, np.nan]))
    assert str(e.value).startswith(f"{msg} : Tensor had NaN values")
    cf = f.get_concrete_function(jt.constant([1.0, 2.0]))
    assert cf.program is not None and cf.program.fallback is None
    assert repr(f"{msg} : Tensor had NaN values") in cf.program.source


# ---------------------------------------------------------------------------
# No rule, no compile: an op of kind matmul that is not matmul


def _bt_infer(types):
    a, b = types
    return Type((a.shape[0], b.shape[0]), a.dtype)


@pytest.fixture
def matmul_bt():
    """``a @ b.T`` registered as a matmul of its own (removed again after), declared to
    run on interpret only."""
    op = defop("test_matmul_bt", inputs=2, kind="matmul",
               forward=lambda a, b: a @ b.T, infer=_bt_infer, vjp=NO_GRADIENT,
               interpret_only="a test op with no GEMM rule")
    yield op
    REGISTRY.pop("test_matmul_bt", None)


def test_an_op_without_a_lowering_is_refused_at_registration():
    with pytest.raises(ValueError, match=r"op 'test_matmul_nt'.*no lowering on the cpu "
                                         r"backend.*interpret_only"):
        defop("test_matmul_nt", inputs=2, kind="matmul", forward=lambda a, b: a @ b.T,
              infer=_bt_infer, vjp=NO_GRADIENT)
    assert "test_matmul_nt" not in REGISTRY


def test_a_matmul_without_a_gemm_rule_falls_back_with_a_warning(matmul_bt):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 4)), rng.normal(size=(5, 4))
    bld = GraphBuilder("bt")
    x, y = bld.add_input(Type((3, 4), "float64")), bld.add_input(Type((5, 4), "float64"))
    (o,) = bld.add_node(matmul_bt, [x, y])
    graph = bld.build([o])
    with pytest.warns(cpu.CompileWarning, match="test_matmul_bt.*no GEMM rule"):
        (got,) = cpu.run(graph, {x: a, y: b})
    np.testing.assert_allclose(got, a @ b.T)
    # also as the matmul of a fused kernel with an epilogue
    import passes

    bld = GraphBuilder("bt_relu")
    x, y = bld.add_input(Type((3, 4), "float64")), bld.add_input(Type((5, 4), "float64"))
    (o,) = bld.add_node(matmul_bt, [x, y])
    (r,) = bld.add_node(get_op("relu"), [o])
    graph = passes.run_pipeline(bld.build([r]), cpu.pipeline()).graph
    assert any(n.op.name == "fused" and n.attr_dict["kind"] == "matmul"
               for n in graph.nodes)
    with pytest.warns(cpu.CompileWarning, match="test_matmul_bt"):
        (got,) = cpu.run(graph, {graph.inputs[0]: a, graph.inputs[1]: b})
    np.testing.assert_allclose(got, np.maximum(a @ b.T, 0))


# ---------------------------------------------------------------------------
# defop refuses what it does not know


def test_defop_refuses_an_unknown_field():
    with pytest.raises(TypeError, match=r"op 'test_typo'.*'scaler'.*did you mean 'scalar'"):
        defop("test_typo", inputs=1, kind="elementwise", forward=np.negative,
              infer=elementwise_infer(), vjp=lambda g, out, x: (-g,), scaler="(-{0})")
    assert "test_typo" not in REGISTRY


def test_defop_refuses_an_unknown_monoid():
    with pytest.raises(ValueError, match=r"op 'test_prod'.*'monoid'.*'xor'"):
        defop("test_prod", inputs=1, kind="reduction", forward=np.prod,
              infer=lambda types, **a: Type((), types[0].dtype), vjp=NO_GRADIENT,
              monoid="xor")
    with pytest.raises(ValueError, match=r"op 'test_ew'.*'monoid' is for reductions"):
        defop("test_ew", inputs=1, kind="elementwise", forward=np.negative,
              infer=elementwise_infer(), vjp=lambda g, out, x: (-g,), scalar="(-{0})",
              monoid="add")
    assert "test_prod" not in REGISTRY and "test_ew" not in REGISTRY


# ---------------------------------------------------------------------------
# output_gradients as seen by an outer tape


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_output_gradients_are_differentiable_by_an_outer_tape(backend):
    jt.set_backend(backend)
    try:
        x, w = jt.constant(3.0), jt.constant(1.0)
        with jt.GradientTape() as outer:
            outer.watch(w)
            with jt.GradientTape() as inner:
                inner.watch(x)
                y = x * x
            g = inner.gradient(y, x, output_gradients=w)
        assert float(g) == 6.0
        assert float(outer.gradient(g, w)) == 6.0
        # a variable as the weight, and inside jt.function
        v = jt.Variable(2.0)

        @jt.function
        def f(x):
            with jt.GradientTape() as outer:
                with jt.GradientTape() as inner:
                    inner.watch(x)
                    y = x * x * x
                g = inner.gradient(y, x, output_gradients=v)
            return g, outer.gradient(g, v)

        g, dv = f(jt.constant(2.0))
        assert float(g) == 24.0 and float(dv) == 12.0
    finally:
        jt.set_backend("interpret")


# ---------------------------------------------------------------------------
# A view's storage stays live while the view is read


def test_check_numerics_output_keeps_its_input_buffer_alive():
    """check_numerics hands its input on (the compiled entry passes the same array): the
    buffer plan must not give that array's slot to a later kernel while the checked
    value is still read. It did (``OpDef.view`` now says so): ``y + transpose(y)`` was
    written over ``y`` while it was read, and the lower triangle came out wrong."""

    def f(x, w):
        y = jt.debugging.check_numerics(jt.matmul(x, w), "m")
        return jt.matmul(y + jt.transpose(y), w)

    x = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    w = np.eye(4, dtype=np.float32) * 2
    want = jt.function(f, backend="interpret")(x, w).numpy()
    got = jt.function(f, backend="cpu")(x, w).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_every_op_has_a_cpu_lowering_or_says_why_not():
    from jittape.compiler.backends.schedule import Scheduler

    from jittape.ops.registry import REGISTRY

    for op in REGISTRY.values():
        rule = cpu.lowering(op)
        assert rule is not None or op.interpret_only, op.name
        if rule is not None:
            assert callable(getattr(Scheduler, rule)), (op.name, rule)
