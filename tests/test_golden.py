"""Golden text for reference graphs: the IR after each pass of the cpu pipeline
(``tests/golden/<name>.ir.txt``) and the module the cpu code generator writes for it
(``tests/golden/<name>.py.txt``), compared exactly. A refactor that should change
nothing shows no diff; a codegen change is reviewed as a diff of kernels.

``JITTAPE_GOLDEN_UPDATE=1 pytest tests/test_golden.py`` rewrites the files (review
them with ``git diff tests/golden``). Nothing here compiles: ``cpu.generate`` only
writes text, and the graphs are traced on the ``interpret`` backend.

The IR is printed canonically (``Graph.canonical()``: value ids renumbered in order
of definition): raw ids come from one process-wide counter, so ``str(graph)`` of the
same graph differs with whatever ran before it in the process.
"""

import dataclasses
import difflib
import functools
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import jittape as jt
import passes
from jittape import _state
from jittape.compiler import backends
from jittape.autodiff import backward_graph, forward_graph
from jittape.compiler.backends import cpu, schedule, schedule_fused
from passes.buffers import BufferPlan
from passes.prune import prune_unreachable

BENCHMARKS = str(Path(__file__).resolve().parents[1] / "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.insert(0, BENCHMARKS)
from workloads import (  # noqa: E402
    CONFIGS, chain_data, data, jittape_step, softmax_ce_data, softmax_ce_jittape,
)

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE_VAR = "JITTAPE_GOLDEN_UPDATE"
# the defaults of the settings that change generated code (JITTAPE_PARALLEL_MIN is
# read once at import into schedule_fused.PARALLEL_MIN, which schedule.PARALLEL_MIN
# re-exports; JITTAPE_FASTMATH at each kernel)
DEFAULT_PARALLEL_MIN = 1 << 16
MAX_DIFF_LINES = 80
IMPORTED_PARALLEL_MIN = schedule.PARALLEL_MIN  # before the fixture patches it


@pytest.fixture(autouse=True)
def default_codegen_settings(monkeypatch):
    """The text must not depend on the user's environment or on global switches."""
    monkeypatch.setattr(schedule_fused, "PARALLEL_MIN", DEFAULT_PARALLEL_MIN)
    monkeypatch.delenv("JITTAPE_FASTMATH", raising=False)
    monkeypatch.setitem(jt.tensor._config, "check_numerics", False)


# ---------------------------------------------------------------------------
# The reference graphs, as the product builds them before the pipeline


def traced(fn, *args):
    """The traced graph of ``fn`` under ``@jt.function`` (on interpret: no compile)."""
    return jt.function(fn, backend="interpret").get_concrete_function(*args).traced


def value_and_grad(f):
    """``x -> (f(x), df/dx)`` with a tape, as a user writes it inside a jt.function."""
    def step(x):
        with jt.GradientTape() as tape:
            tape.watch(x)
            y = f(x)
        return y, tape.gradient(y, x)

    return step


def chain_tape():
    """benchmarks/workloads.py ``chain_jittape``'s step, eager, on a tape we can read
    (2**16 elements: its loops are large enough to get parallel variants)."""
    x, w, b = chain_data(1 << 16)
    xt, wv, bv = jt.constant(x), jt.Variable(w), jt.Variable(b)
    with jt.GradientTape() as tape:
        loss = jt.reduce_sum(jt.tanh(xt * wv + bv) * jt.sigmoid(xt) + 0.5 * (xt - wv) ** 2)
    return tape, loss, [wv._id, bv._id]


def chain_forward():
    tape, loss, _ = chain_tape()
    return forward_graph(tape._nodes, tape._values, [loss._id])[0]


def chain_backward():
    """tape.gradient's backward graph, before the backend's passes."""
    tape, loss, sources = chain_tape()
    return backward_graph(tape._nodes, [loss], [None], sources, tape._values, pipeline=())[0]


def softmax_ce():
    """benchmarks/workloads.py ``softmax_ce_jittape``: loss and gradient in one trace."""
    logits, labels = softmax_ce_data()  # the benchmark's 256 x 1000
    step = softmax_ce_jittape(logits, labels, compiled=True, backend="interpret")
    return step.function.get_concrete_function(jt.constant(logits), jt.constant(labels)).traced


def mlp_step(cfg):
    """benchmarks/train_steps.py ``jittape_step``: forward, tape, optimizer update."""
    x, y, ws, bs = data(cfg)
    step = jittape_step(cfg, ws, bs, compiled=True, backend="interpret")
    return step.get_concrete_function(jt.constant(x), jt.constant(y)).traced


def reduce_leading():
    """A reduction over the leading axis (an array accumulator), and its gradient."""
    def loss(x):
        return jt.reduce_sum(jt.tanh(jt.reduce_sum(x * x, axis=0)))

    x = np.random.default_rng(0).standard_normal((8, 16, 4)).astype(np.float32)
    return traced(value_and_grad(loss), x)


def gather():
    """gather along axis 0 with a repeated index; its gradient is a scatter_add."""
    p = jt.Variable(np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32))
    idx = np.array([0, 2, 2, 5, 1], np.int32)

    def step(idx):
        with jt.GradientTape() as tape:
            loss = jt.reduce_sum(jt.square(jt.gather(p, idx)))
        return loss, tape.gradient(loss, p)

    return traced(step, idx)


def strided_slice():
    """A strided, reversed slice (a view) and its gradient (strided_slice_grad)."""
    def loss(x):
        return jt.reduce_sum(jt.exp(x[1:5:2, ::-1]))

    x = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
    return traced(value_and_grad(loss), x)


def check_numerics():
    """A check in the forward pass, and the one TF puts on the gradient through it."""
    def loss(x):
        return jt.reduce_sum(jt.debugging.check_numerics(jt.log(x), "log of x") * 2.0)

    x = np.random.default_rng(0).uniform(0.5, 2.0, (4, 3)).astype(np.float32)
    return traced(value_and_grad(loss), x)


def conv_gemm():
    """relu(conv2d(x, w) + b), SAME, stride 2, and the gradients of x, w and b: the
    packed-GEMM formulation (3x3 taps of 8 channels), the epilogue fused into the conv."""
    rng = np.random.default_rng(0)
    w = jt.Variable(rng.standard_normal((3, 3, 8, 4)).astype(np.float32))
    b = jt.Variable(np.zeros(4, np.float32))

    def step(x):
        with jt.GradientTape() as tape:
            tape.watch(x)
            loss = jt.reduce_sum(jt.nn.relu(jt.nn.conv2d(x, w, 2, "SAME") + b))
        return loss, tape.gradient(loss, [x, w, b])

    return traced(step, rng.standard_normal((2, 7, 6, 8)).astype(np.float32))


def conv_direct():
    """A depthwise 3x3 convolution and its filter gradient: the direct loop nest."""
    rng = np.random.default_rng(0)
    w = jt.Variable(rng.standard_normal((3, 3, 4, 1)).astype(np.float32))

    def step(x):
        with jt.GradientTape() as tape:
            loss = jt.reduce_sum(jt.square(jt.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "VALID")))
        return loss, tape.gradient(loss, w)

    return traced(step, rng.standard_normal((2, 6, 5, 4)).astype(np.float32))


def batch_matmul():
    """[4,8,16] @ [4,16,8] and the gradients of both operands (batched, transposed)."""
    rng = np.random.default_rng(0)
    a = jt.Variable(rng.standard_normal((4, 8, 16)).astype(np.float32))
    b = jt.Variable(rng.standard_normal((4, 16, 8)).astype(np.float32))

    def step():
        with jt.GradientTape() as tape:
            loss = jt.reduce_sum(jt.square(jt.matmul(a, b)))
        return loss, tape.gradient(loss, [a, b])

    return traced(step)


CASES = {
    "chain_forward": chain_forward,
    "chain_backward": chain_backward,
    "softmax_ce": softmax_ce,
    "mlp_sgd": lambda: mlp_step(CONFIGS["small"]),
    "mlp_adam": lambda: mlp_step(dict(CONFIGS["large"], sizes=(32, 16, 10), batch=8)),
    "reduce_leading": reduce_leading,
    "gather": gather,
    "strided_slice": strided_slice,
    "check_numerics": check_numerics,
    "batch_matmul": batch_matmul,
    "conv_gemm": conv_gemm,
    "conv_direct": conv_direct,
}


# ---------------------------------------------------------------------------
# The text


def canonical_ids(g) -> dict:
    """value id -> its id in ``g.canonical()`` (the same order of definition)."""
    ren: dict = {}
    for v in g.inputs:
        ren.setdefault(v, len(ren))
    for n in g.nodes:
        for o in n.outputs:
            ren.setdefault(o, len(ren))
    return ren


def show(g) -> str:
    return str(g.canonical())


def show_final(g, graph_too: bool = True) -> str:
    """What ``explain()`` shows of the optimized graph (kernels, buffer plan, the graph
    with its fused bodies), and where each value of the plan lives (``w<slot>`` as in
    the generated source)."""
    plan = g.buffers
    canon = g.canonical()
    if plan is not None:
        ren = canonical_ids(g)
        plan = BufferPlan(plan.slots, tuple(sorted((ren[v], s) for v, s in plan.assign)),
                          tuple((ren[a], ren[b]) for a, b in plan.inplace))
        canon = dataclasses.replace(canon, buffers=plan)
    lines = passes.PipelineResult(canon).explain().splitlines()
    at = len(lines) - len(str(canon).splitlines())  # where the graph starts
    if not graph_too:
        lines[at:] = ["(graph: same text as after the last pass)"]
    if plan is not None:
        slots = [f"  w{s} {dt}[{size}]: " + ", ".join(f"%{v}" for v, k in plan.assign if k == s)
                 for s, (dt, size) in enumerate(plan.slots)]
        slots += [f"  %{a} in place of %{b}" for a, b in plan.inplace]
        lines[at:at] = slots
    return "\n".join(lines)


def pass_header(k, total, p, rep) -> str:
    name, opts = passes.pass_key(p)
    opts = " {" + ", ".join(f"{o}={v!r}" for o, v in opts) + "}" if opts else ""
    counts = [f"{c} {getattr(rep, c)}" for c in ("removed", "merged", "folded", "rewritten",
                                                 "fused") if getattr(rep, c)]
    return (f"== pass {k}/{total}: {name}{opts}: {rep.nodes_before} -> {rep.nodes_after} "
            f"nodes ({', '.join(counts) or 'no change'}) ==")


def ir_text(name, graph) -> str:
    """The graph as built, then after each pass of the cpu pipeline (one pass at a time,
    verified after each), then what ``backends.optimize`` hands to ``cpu.generate``."""
    pipeline = backends.pipeline("cpu")
    out = [f"# {name}: the IR after each pass of backends.pipeline('cpu'); value ids "
           f"canonical; regenerate with {UPDATE_VAR}=1",
           "== as built ==", show(graph)]
    g = prune_unreachable(graph, drop_inputs=True).graph
    prev = show(g)
    out += ["== backends.optimize: prune_unreachable {drop_inputs=True} ==",
            prev if prev != out[-1] else "(same text)"]
    for k, p in enumerate(pipeline, 1):
        res = passes.run_pipeline(g, [p], check=True)
        g = res.graph
        text = show(g)
        out += [pass_header(k, len(pipeline), p, res.reports[0]),
                text if text != prev else "(same text)"]
        prev = text
    final, _ = backends.optimize(graph, pipeline)
    out.append("== what cpu.generate gets (backends.optimize), as explain() shows it ==")
    out.append(show_final(final, graph_too=show(final) != show(g)))
    return "\n".join(out) + "\n"


@functools.cache
def built(name):
    graph = CASES[name]()
    final, _ = backends.optimize(graph, backends.pipeline("cpu"))
    return graph, final


def texts(name) -> dict:
    graph, final = built(name)
    return {"ir": ir_text(name, graph), "py": str(cpu.generate(final)[0])}


def check_golden(path: Path, text: str) -> None:
    """``text`` equals the file at ``path``; with JITTAPE_GOLDEN_UPDATE=1 the file is
    rewritten instead."""
    rel = path.relative_to(GOLDEN.parents[1])
    if os.environ.get(UPDATE_VAR) == "1":
        old = path.read_text() if path.exists() else None
        if old != text:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, newline="\n")
            warnings.warn(f"{UPDATE_VAR}=1: rewrote {rel}", UserWarning, stacklevel=2)
        return
    if not path.exists():
        pytest.fail(f"{rel} does not exist: create it with `{UPDATE_VAR}=1 python -m pytest "
                    f"tests/test_golden.py`, read it, and commit it", pytrace=False)
    old = path.read_text()
    if old == text:
        return
    diff = list(difflib.unified_diff(old.splitlines(), text.splitlines(),
                                     f"{rel} (golden)", f"{rel} (now)", n=2, lineterm=""))
    more = len(diff) - MAX_DIFF_LINES
    shown = diff[:MAX_DIFF_LINES] + ([f"... {more} more diff lines"] if more > 0 else [])
    pytest.fail(f"{rel} differs from the text generated now ({len(diff)} diff lines):\n"
                + "\n".join(shown) + f"\nIf the change is intended, rewrite the file with "
                f"`{UPDATE_VAR}=1 python -m pytest tests/test_golden.py` and review "
                f"`git diff {rel}`.", pytrace=False)


# ---------------------------------------------------------------------------
# The tests


@pytest.mark.parametrize("name", CASES)
def test_ir_after_each_pass(name):
    check_golden(GOLDEN / f"{name}.ir.txt", texts(name)["ir"])


@pytest.mark.parametrize("name", CASES)
def test_generated_cpu_source(name):
    check_golden(GOLDEN / f"{name}.py.txt", texts(name)["py"])


def test_text_does_not_depend_on_value_ids():
    """The same graphs built again after other values took ids give the same text (the
    printed IR renumbers them; the generator names values by structure)."""
    before = {name: texts(name) for name in CASES}
    for _ in range(1009):
        _state.new_id()
    for name, build in CASES.items():
        graph = build()
        final, _ = backends.optimize(graph, backends.pipeline("cpu"))
        assert ir_text(name, graph) == before[name]["ir"], name
        assert str(cpu.generate(final)[0]) == before[name]["py"], name


def test_forced_defaults_are_cpu_defaults():
    """What the fixture forces is what cpu.py uses when the environment sets nothing."""
    if "JITTAPE_PARALLEL_MIN" in os.environ:
        pytest.skip("JITTAPE_PARALLEL_MIN is set: schedule.PARALLEL_MIN is not the default")
    assert IMPORTED_PARALLEL_MIN == DEFAULT_PARALLEL_MIN
