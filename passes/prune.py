"""Pruning: nodes no output needs, and branches that cannot carry gradient."""

from __future__ import annotations

from typing import Iterable

from jittape.compiler.ir import Graph, Node

from .core import graph_pass, rebuild


@graph_pass("prune_unreachable")
def prune_unreachable(graph: Graph, report, drop_inputs: bool = False) -> Graph:
    """Drop every node that no output and no side effect needs.

    With ``drop_inputs`` also drop graph inputs nothing reads (a backward graph's
    caller feeds by id, so it can; a compiled function's signature cannot change).
    """
    live = set(graph.outputs)
    keep = []
    for n in reversed(graph.nodes):
        if n.op.effect or any(o in live for o in n.outputs):
            keep.append(n)
            live.update(n.inputs)
        else:
            report.removed += 1
            report.note(f"removed {n.op.name} -> {', '.join(f'%{o}' for o in n.outputs)}")
    keep.reverse()
    if drop_inputs:
        unused = [v for v in graph.inputs if v not in live]
        if unused:
            report.note(f"dropped {len(unused)} unused inputs")
        return rebuild(graph, keep, inputs=[v for v in graph.inputs if v in live])
    return rebuild(graph, keep)


def _cuts(n: Node) -> str | None:
    """Why gradient does not flow through ``n`` (None when it does)."""
    if n.op.cut:
        return "stop_gradient"
    if not n.op.differentiable:
        return "no gradient"
    return None


def gradient_path(nodes: Iterable[Node], target_ids, source_ids) -> tuple[list, set, dict]:
    """The nodes on a path from a source to a target along which gradient can flow.

    A path stops at ``stop_gradient``, at ops without a gradient and at non-float
    values (TF: integer tensors carry no gradient). Returns the path nodes in reverse
    (backward) order, the value ids that need a cotangent, and why the other nodes
    reading a reached value were cut (node index -> reason).
    """
    reach = set(source_ids)
    forward, cut = [], {}
    for k, n in enumerate(nodes):
        if not any(i in reach for i in n.inputs):
            continue
        why = _cuts(n)
        if why is not None:
            cut[k] = why
            continue
        outs = [o for o, t in zip(n.outputs, n.types) if t.is_float]
        if not outs:
            cut[k] = "non-float"
            continue
        reach.update(outs)
        forward.append(n)
    need = {t for t in target_ids if t in reach}
    path = []
    for n in reversed(forward):
        if any(o in need for o in n.outputs):
            path.append(n)
            need.update(i for i in n.inputs if i in reach)
    return path, need, cut


@graph_pass("prune_stop_gradient")
def prune_stop_gradient(graph: Graph, report, sources=(), targets=None) -> Graph:
    """The differentiable slice of ``graph``: only the nodes on a path from one of
    ``sources`` (input ids) to one of ``targets`` (default: the outputs) that can
    carry gradient. Values those nodes read from the cut-off part become inputs (they
    are constants as far as differentiation is concerned); the outputs become the
    targets. A backward graph built from this slice has no node for a pruned branch.
    """
    targets = tuple(graph.outputs if targets is None else targets)
    path, need, cut = gradient_path(graph.nodes, targets, sources)
    keep = list(reversed(path))
    kept = {id(n) for n in keep}
    defined = {o for n in keep for o in n.outputs}
    types = graph.types()
    for k, n in enumerate(graph.nodes):
        if id(n) in kept:
            continue
        report.removed += 1
        why = cut.get(k, "off every source-to-target path")
        report.note(f"removed {n.op.name} -> %{n.outputs[0] if n.outputs else '-'} ({why})")
    inputs, seen = [], set()
    for v in list(sources) + [i for n in keep for i in n.inputs]:
        if v not in defined and v not in seen and v in types:
            seen.add(v)
            inputs.append(v)
    names = dict(zip(graph.inputs, graph.input_names or ()))
    return Graph(
        tuple(inputs), tuple(types[v] for v in inputs), tuple(keep),
        tuple(t for t in targets if t in defined or t in seen), graph.name,
        tuple(names.get(v, f"const{v}") for v in inputs),
    )
