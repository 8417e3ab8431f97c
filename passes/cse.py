"""Common-subexpression elimination."""

from __future__ import annotations

from jittape.compiler.ir import Graph

from .core import Rewriter, graph_pass


@graph_pass("cse")
def cse(graph: Graph, report) -> Graph:
    """Merge pure nodes that apply the same op, with the same attributes, to the same
    inputs (in any order for commutative ops). Constants are compared by content.
    Side-effect and impure nodes are never merged."""
    rw = Rewriter(graph)
    seen: dict = {}
    for n in graph.nodes:
        ins = tuple(rw.resolve(i) for i in n.inputs)
        if not n.op.pure or n.op.effect:
            rw.keep(n)
            continue
        key_ins = tuple(sorted(ins)) if n.op.commutative else ins
        key = (n.op.name, key_ins, n.attrs, n.types)
        try:
            prev = seen.get(key)
        except TypeError:  # an unhashable attribute: leave the node alone
            rw.keep(n)
            continue
        if prev is None:
            seen[key] = n.outputs
            rw.keep(n)
            continue
        for o, p in zip(n.outputs, prev):
            rw.replace(o, p)
        report.merged += 1
        report.note(f"{n.op.name} -> %{n.outputs[0]} merged into %{prev[0]}")
    return rw.finish()
