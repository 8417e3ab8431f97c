"""How long the graph optimizer takes (it runs once per new trace, on a cache miss).

Workloads: the whole SGD train step of a 3-layer MLP (76 nodes as traced), and a deep
synthetic net of 50 residual tanh/sigmoid layers with its backward pass and update
(about 1200 nodes). Run: .venv/bin/python -m pytest benchmarks -q -k passes
"""

import pytest

import jittape as jt
import passes
from jittape.compiler.ir import Type
from jittape.tensor import Tracer


def mlp_step(batch=32, sizes=(64, 128, 64, 10), lr=0.1):
    tr = Tracer("train_step")
    with tr:
        x = tr.placeholder(Type((batch, sizes[0]), "float32"))
        y = tr.placeholder(Type((batch,), "int32"))
        params = []
        for a, b in zip(sizes, sizes[1:]):
            params += [tr.placeholder(Type((a, b), "float32")),
                       tr.placeholder(Type((b,), "float32"))]
        with jt.GradientTape() as tape:
            tape.watch(params)
            h = x
            for i in range(len(sizes) - 1):
                h = jt.matmul(h, params[2 * i]) + params[2 * i + 1]
                if i < len(sizes) - 2:
                    h = jt.nn.relu(h)
            loss = jt.reduce_mean(
                jt.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        grads = tape.gradient(loss, params)
        new = [p - lr * g for p, g in zip(params, grads)]
    return tr.builder.build([loss._id] + [v._id for v in new])


def deep_step(layers=50, width=32, batch=16):
    tr = Tracer("deep")
    with tr:
        x = tr.placeholder(Type((batch, width), "float32"))
        ws = [tr.placeholder(Type((width, width), "float32")) for _ in range(layers)]
        bs = [tr.placeholder(Type((width,), "float32")) for _ in range(layers)]
        with jt.GradientTape() as tape:
            tape.watch(ws + bs)
            h = x
            for w, b in zip(ws, bs):
                h = jt.tanh(jt.matmul(h, w) + b) * 0.5 + jt.sigmoid(h)
            loss = jt.reduce_mean(h * h)
        grads = tape.gradient(loss, ws + bs)
        new = [p - 0.1 * g for p, g in zip(ws + bs, grads)]
    return tr.builder.build([loss._id] + [v._id for v in new])


@pytest.mark.parametrize("build", [mlp_step, deep_step], ids=["mlp_step", "deep50_step"])
def test_default_pipeline(benchmark, build):
    graph = build()
    benchmark.group = "passes"
    benchmark.extra_info["nodes"] = len(graph.nodes)
    out = benchmark(lambda: passes.run_pipeline(graph, check=False))
    benchmark.extra_info["kernels"] = len(passes.kernels(out.graph))
