"""The verifier: the IR's invariants, fused groups' shape, and a buffer plan's safety."""

from __future__ import annotations

from jittape.compiler.ir import Graph, GraphError, verify as verify_ir

from .fusion import FUSED, body_phases


def verify(graph: Graph, check_types: bool = True) -> None:
    """Raise :class:`GraphError` unless ``graph`` is well formed.

    Checks ``jittape.compiler.ir.verify`` (definitions before use, arity, types equal to the
    ops' rules) on the graph and on every fused body, that each fused group is what a
    backend can run as one loop nest (see ``passes.fusion``), and, when the graph has
    a buffer plan, that no buffer is written while a value in it is still live.
    """
    verify_ir(graph, check_types)
    for idx, n in enumerate(graph.nodes):
        if n.op is FUSED:
            try:
                _verify_group(n)
            except GraphError as e:
                raise GraphError(f"fused node {idx} (-> %{n.outputs[0]}): {e}") from None
    if graph.buffers is not None:
        from .buffers import check_plan

        check_plan(graph, graph.buffers)


def _verify_group(n) -> None:
    body_phases(n)
