"""What every pass shares: the report, the ``graph_pass`` decorator, the rewriter.

A pass is a function ``Graph -> PassResult``; ``PassResult.graph`` is the new graph
and ``PassResult.report`` says what changed. Passes never mutate a graph (graphs are
immutable); they build a new one with :class:`Rewriter`.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Callable

from jittape.compiler.ir import Graph, Node, OpDef, freeze_attrs, infer_types


@dataclass
class PassReport:
    """What one pass changed. ``details`` holds one line per rewrite, for ``explain``."""

    name: str
    nodes_before: int = 0
    nodes_after: int = 0
    removed: int = 0
    merged: int = 0
    folded: int = 0
    rewritten: int = 0
    fused: int = 0
    seconds: float = 0.0
    details: list = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(
            self.removed or self.merged or self.folded or self.rewritten or self.fused
            or self.nodes_before != self.nodes_after
        )

    def note(self, line: str) -> None:
        if len(self.details) < 200:
            self.details.append(line)

    def __str__(self) -> str:
        counts = [
            f"{k} {v}" for k in ("removed", "merged", "folded", "rewritten", "fused")
            if (v := getattr(self, k))
        ]
        what = ", ".join(counts) if counts else "no change"
        return (
            f"{self.name:<18} {self.nodes_before:>4} -> {self.nodes_after:<4} nodes  ({what})"
            f"  {self.seconds * 1e3:.2f} ms"
        )


@dataclass
class PassResult:
    graph: Graph
    report: PassReport


def graph_pass(name: str):
    """Make ``fn(graph, report, **options) -> Graph`` a pass ``(graph, **options) ->
    PassResult`` called ``name``. ``fn`` counts its changes in ``report``."""

    def deco(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def run(graph: Graph, **options) -> PassResult:
            rep = PassReport(name, nodes_before=len(graph.nodes))
            t0 = time.perf_counter()
            out = fn(graph, rep, **options)
            rep.seconds = time.perf_counter() - t0
            rep.nodes_after = len(out.nodes)
            return PassResult(out, rep)

        run.pass_name = name
        return run

    return deco


def configured(pass_fn: Callable, **options) -> Callable:
    """``pass_fn`` with options fixed, still named (for pipelines)."""
    run = functools.partial(pass_fn, **options)
    run.pass_name = getattr(pass_fn, "pass_name", getattr(pass_fn, "__name__", "pass"))
    run.pass_key = (run.pass_name, tuple(sorted(options.items())))
    return run


def pass_key(p) -> tuple:
    """What identifies a pipeline entry (its name and fixed options), for cache keys."""
    return getattr(p, "pass_key", (getattr(p, "pass_name", repr(p)), ()))


def max_id(graph: Graph) -> int:
    m = max(graph.inputs, default=-1)
    for n in graph.nodes:
        if n.outputs:
            m = max(m, max(n.outputs))
    return m


class Rewriter:
    """Builds a new graph from an old one, node by node, with value substitution.

    ``keep(node)`` re-emits a node reading substituted inputs; ``emit(op, inputs)``
    adds a new node with fresh ids; ``replace(old, new)`` makes every later reader of
    ``old`` (and the graph's outputs) read ``new``, whose type must be the same.
    Graph inputs keep their ids, so callers' feeds stay valid.
    """

    def __init__(self, graph: Graph):
        self.graph = graph
        self.types = graph.types()
        self.sub: dict = {}
        self.nodes: list = []
        self._next = max_id(graph) + 1

    def fresh(self) -> int:
        self._next += 1
        return self._next - 1

    def resolve(self, v: int) -> int:
        while v in self.sub:
            v = self.sub[v]
        return v

    def keep(self, node: Node) -> Node:
        ins = tuple(self.resolve(i) for i in node.inputs)
        if ins != node.inputs:
            node = Node(node.op, ins, node.outputs, node.attrs, node.types, node.loc)
        self.nodes.append(node)
        return node

    def emit(self, op: OpDef, inputs, attrs=None, loc=None, types=None) -> tuple:
        inputs = tuple(self.resolve(i) for i in inputs)
        frozen = attrs if isinstance(attrs, tuple) else freeze_attrs(attrs)
        if types is None:
            types = infer_types(op, [self.types[i] for i in inputs], dict(frozen))
        outs = tuple(self.fresh() for _ in types)
        self.nodes.append(Node(op, inputs, outs, frozen, tuple(types), loc))
        self.types.update(zip(outs, types))
        return outs

    def replace(self, old: int, new: int) -> None:
        new = self.resolve(new)
        if old == new:
            return
        if self.types[old] != self.types[new]:
            raise AssertionError(
                f"replacing %{old}: {self.types[old]} by %{new}: {self.types[new]}"
            )
        self.sub[old] = new

    def finish(self, outputs=None) -> Graph:
        g = self.graph
        outs = g.outputs if outputs is None else outputs
        return Graph(
            g.inputs, g.input_types, tuple(self.nodes),
            tuple(self.resolve(o) for o in outs), g.name, g.input_names,
        )


def rebuild(graph: Graph, nodes, outputs=None, inputs=None) -> Graph:
    """``graph`` with other nodes (and optionally other outputs or a subset of inputs)."""
    if inputs is None:
        ins, tys, names = graph.inputs, graph.input_types, graph.input_names
    else:
        keep = set(inputs)
        rows = [
            (v, t, nm)
            for v, t, nm in zip(graph.inputs, graph.input_types, graph.input_names or
                                [None] * len(graph.inputs))
            if v in keep
        ]
        ins = tuple(r[0] for r in rows)
        tys = tuple(r[1] for r in rows)
        names = tuple(r[2] for r in rows) if graph.input_names else ()
    return Graph(
        ins, tys, tuple(nodes), graph.outputs if outputs is None else tuple(outputs),
        graph.name, names,
    )
