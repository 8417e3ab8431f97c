"""Random programs (hypothesis): the recorded IR, interpreted, gives the eager values;
gradients from the backward graph (interpret backend) equal the eagerly executed VJPs
and central finite differences in float64."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import jittape as jt
import passes
from jittape.autodiff import backward_graph, forward_graph
from jittape.compiler.backends import interpret
from jittape.compiler.ir import verify

UNARY = {
    "tanh": jt.tanh,
    "sigmoid": jt.sigmoid,
    "sin": jt.sin,
    "cos": jt.cos,
    "square": jt.square,
    "negative": jt.negative,
    "exp_tanh": lambda x: jt.exp(jt.tanh(x)),
    "log1p_sq": lambda x: jt.log1p(jt.square(x)),
    "soft_abs": lambda x: jt.sqrt(1.0 + jt.square(x)),
    "stop_gradient": jt.stop_gradient,
    "identity": jt.identity,
}
BINARY = {
    "add": jt.add,
    "subtract": jt.subtract,
    "multiply": jt.multiply,
    # shifted so that aliased operands (x and stop_gradient(x)) never tie: at a tie the
    # gradient is one-sided and finite differences mean nothing
    "maximum": lambda x, y: jt.maximum(x, y + 0.25),
    "safe_divide": lambda x, y: x / (1.0 + jt.square(y)),
    "where": lambda x, y: jt.where(x > y + 0.25, x, y * 2.0),
}
SHAPES = [(3, 4), (4,), (3, 1), (), (1, 4)]


def _fits(a, b):
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


@st.composite
def programs(draw):
    n_in = draw(st.integers(1, 3))
    shapes = [draw(st.sampled_from(SHAPES)) for _ in range(n_in)]
    steps = []
    cur = list(shapes)
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["unary", "binary", "reduce", "matmul", "shape", "slice"]))
        i = draw(st.integers(0, len(cur) - 1))
        s = cur[i]
        if kind == "unary":
            steps.append(("unary", draw(st.sampled_from(sorted(UNARY))), i))
            cur.append(s)
        elif kind == "binary":
            j = draw(st.integers(0, len(cur) - 1))
            if not _fits(s, cur[j]):
                continue
            steps.append(("binary", draw(st.sampled_from(sorted(BINARY))), i, j))
            cur.append(np.broadcast_shapes(s, cur[j]))
        elif kind == "reduce" and len(s) > 0:
            axis = draw(st.integers(-len(s), len(s) - 1))
            keep = draw(st.booleans())
            op = draw(st.sampled_from(["reduce_sum", "reduce_mean", "reduce_max"]))
            steps.append(("reduce", op, i, axis, keep))
            out = list(s)
            if keep:
                out[axis] = 1
            else:
                del out[axis]
            cur.append(tuple(out))
        elif kind == "matmul" and len(s) == 2:
            j = draw(st.integers(0, len(cur) - 1))
            if len(cur[j]) == 2 and cur[j][1] == s[1]:
                steps.append(("matmul_t", None, i, j))
                cur.append((s[0], cur[j][0]))
        elif kind == "shape" and len(s) >= 1:
            if len(s) == 2 and draw(st.booleans()):
                steps.append(("transpose", None, i))
                cur.append((s[1], s[0]))
            else:
                steps.append(("flatten", None, i))
                cur.append((int(np.prod(s)),))
        elif kind == "slice" and len(s) >= 1 and s[0] >= 2:
            steps.append(("slice", None, i))
            cur.append((s[0] - 1,) + tuple(s[1:]))
    return shapes, steps


def run(program, inputs, frozen=None):
    """Run the program; ``frozen`` (step -> array) replaces stop_gradient's outputs, so
    finite differences see the same constant that the gradient treats as one."""
    _, steps = program
    vals = list(inputs)
    for k, step in enumerate(steps):
        kind, name = step[0], step[1]
        if kind == "unary" and name == "stop_gradient" and frozen is not None:
            vals.append(jt.constant(frozen[k]))
        elif kind == "unary":
            vals.append(UNARY[name](vals[step[2]]))
        elif kind == "binary":
            vals.append(BINARY[name](vals[step[2]], vals[step[3]]))
        elif kind == "reduce":
            vals.append(getattr(jt, name)(vals[step[2]], axis=step[3], keepdims=step[4]))
        elif kind == "matmul_t":
            vals.append(jt.matmul(vals[step[2]], vals[step[3]], transpose_b=True))
        elif kind == "transpose":
            vals.append(jt.transpose(vals[step[2]]))
        elif kind == "flatten":
            vals.append(jt.reshape(vals[step[2]], [-1]))
        elif kind == "slice":
            vals.append(vals[step[2]][1:])
    # every value counts, so no drawn step is dead code
    total = jt.reduce_sum(jt.tanh(vals[0]))
    for v in vals[1:]:
        total = total + jt.reduce_sum(jt.tanh(v))
    return total, vals


def _steps_with_outputs(program):
    return program[1]  # every step appends exactly one value


def _inputs(program, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in program[0]]


@given(programs(), st.integers(0, 2**16))
def test_recorded_graph_interprets_to_eager_values(program, seed):
    arrays = _inputs(program, seed)
    xs = [jt.constant(a) for a in arrays]
    with jt.GradientTape() as tape:
        tape.watch(xs)
        total, vals = run(program, xs)
    recorded = [v for v in vals + [total] if v._id in tape._values]
    g, feeds = forward_graph(tape._nodes, tape._values, [v._id for v in recorded])
    verify(g)
    outs = interpret.run(g, feeds)
    for v, o in zip(recorded, outs):
        np.testing.assert_allclose(o, v.numpy(), rtol=1e-12, atol=1e-12)
    # and after the whole optimizer (fused kernels, buffer plan), the same values
    opt = passes.run_pipeline(g, check=True).graph
    for v, o in zip(recorded, interpret.run(opt, feeds)):
        np.testing.assert_allclose(o, v.numpy(), rtol=1e-12, atol=1e-12)


@given(programs(), st.integers(0, 2**16))
def test_fused_backward_graph_equals_the_tape_gradient(program, seed):
    arrays = _inputs(program, seed)
    xs = [jt.constant(a) for a in arrays]
    with jt.GradientTape(persistent=True) as tape:
        tape.watch(xs)
        total, _ = run(program, xs)
    want = tape.gradient(total, xs)
    ids = [x._id for x in xs]
    g, feeds, computed, consts = backward_graph(
        tape._nodes, [total], [None], ids, tape._values, pipeline=passes.default_pipeline()
    )
    passes.verify(g)
    outs = interpret.run(g, feeds) if g.outputs else []
    for k, w in enumerate(want):
        if computed[k] is not None:
            np.testing.assert_allclose(outs[computed[k]], w.numpy(), rtol=1e-12, atol=1e-12)
        elif k in consts:
            np.testing.assert_allclose(consts[k].numpy(), w.numpy())
        else:
            assert w is None


@given(programs(), st.integers(0, 2**16))
def test_backward_graph_equals_eager_vjps_and_finite_differences(program, seed):
    arrays = _inputs(program, seed)
    snapshot = [a.copy() for a in arrays]
    xs = [jt.constant(a) for a in arrays]

    with jt.GradientTape() as tape:
        tape.watch(xs)
        total, _ = run(program, xs)
    graph_grads = tape.gradient(total, xs, unconnected_gradients="zero")

    # an outer recording tape makes the inner gradient run its VJPs as eager ops
    with jt.GradientTape():
        with jt.GradientTape() as tape2:
            tape2.watch(xs)
            total2, _ = run(program, xs)
        eager_grads = tape2.gradient(total2, xs, unconnected_gradients="zero")

    for a, b in zip(graph_grads, eager_grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)

    rng = np.random.default_rng(seed + 1)
    direction = [rng.standard_normal(a.shape) for a in arrays]
    eps = 1e-6

    _, base_vals = run(program, [jt.constant(a) for a in arrays])
    n_in = len(arrays)
    frozen = {k: base_vals[n_in + k].numpy() for k, st_ in enumerate(_steps_with_outputs(program))
              if st_[0] == "unary" and st_[1] == "stop_gradient"}

    def f(shift):
        ins = [jt.constant(a + shift * d) for a, d in zip(arrays, direction)]
        return float(run(program, ins, frozen)[0])

    fd = (f(eps) - f(-eps)) / (2 * eps)
    analytic = sum(float(np.sum(g.numpy() * d)) for g, d in zip(graph_grads, direction))
    assert abs(fd - analytic) <= 1e-5 * (1 + abs(fd)), (fd, analytic)
    for a, s in zip(arrays, snapshot):
        np.testing.assert_array_equal(a, s)  # inputs are never mutated


@given(programs(), st.integers(0, 2**16))
def test_second_order_of_random_programs_matches_finite_differences(program, seed):
    """Hessian-vector products through nested tapes vs differences of the gradient."""
    arrays = _inputs(program, seed)
    rng = np.random.default_rng(seed + 2)
    v = [rng.standard_normal(a.shape) for a in arrays]
    w = [rng.standard_normal(a.shape) for a in arrays]
    _, base_vals = run(program, [jt.constant(a) for a in arrays])
    n_in = len(arrays)
    frozen = {k: base_vals[n_in + k].numpy() for k, st_ in enumerate(program[1])
              if st_[0] == "unary" and st_[1] == "stop_gradient"}

    def grad_dot_w(arrs, freeze):
        xs = [jt.constant(a) for a in arrs]
        with jt.GradientTape() as tape:
            tape.watch(xs)
            total, _ = run(program, xs, freeze)
        gs = tape.gradient(total, xs, unconnected_gradients="zero")
        return sum(float(np.sum(g.numpy() * wi)) for g, wi in zip(gs, w))

    xs = [jt.constant(a) for a in arrays]
    with jt.GradientTape() as outer:
        outer.watch(xs)
        with jt.GradientTape() as inner:
            inner.watch(xs)
            total, _ = run(program, xs)
        gs = inner.gradient(total, xs, unconnected_gradients="zero")
        gw = gs[0] * w[0]
        s = jt.reduce_sum(gw)
        for g, wi in zip(gs[1:], w[1:]):
            s = s + jt.reduce_sum(g * wi)
    hs = outer.gradient(s, xs, unconnected_gradients="zero")
    analytic = sum(float(np.sum(h.numpy() * vi)) for h, vi in zip(hs, v))

    eps = 1e-5
    plus = grad_dot_w([a + eps * vi for a, vi in zip(arrays, v)], frozen)
    minus = grad_dot_w([a - eps * vi for a, vi in zip(arrays, v)], frozen)
    fd = (plus - minus) / (2 * eps)
    assert abs(fd - analytic) <= 1e-4 * (1 + abs(fd)), (fd, analytic)
