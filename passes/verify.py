"""The verifier: the IR's invariants, fused groups' shape, and a buffer plan's safety."""

from __future__ import annotations

from jittape.ir import Graph, GraphError, verify as verify_ir

from .fusion import FUSED


def verify(graph: Graph, check_types: bool = True) -> None:
    """Raise :class:`GraphError` unless ``graph`` is well formed.

    Checks ``jittape.ir.verify`` (definitions before use, arity, types equal to the
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
    a = n.attr_dict
    body, kind, space = a["body"], a["kind"], tuple(a["space"])
    if not isinstance(body, Graph):
        raise GraphError("no body graph")
    verify_ir(body)
    if len(body.inputs) != len(n.inputs):
        raise GraphError("inputs do not match the body's")
    btypes = body.types()
    if tuple(btypes[o] for o in body.outputs) != tuple(n.types):
        raise GraphError("output types do not match the body's")
    if not body.outputs:
        raise GraphError("a kernel with no output")
    rspace = tuple(a.get("rspace", space))
    axes = tuple(a.get("axes", ()))
    phase = {}
    seen_mm = False
    for b in body.nodes:
        name, shape = b.op.name, b.types[0].shape
        if name in ("const", "fill"):
            phase[b.outputs[0]] = "leaf"
            continue
        if b.op.effect or not b.op.pure:
            raise GraphError(f"{name} has side effects and cannot be fused")
        reads = {phase.get(i, "in") for i in b.inputs}
        if b.op.kind == "contraction":
            if kind != "contraction" or seen_mm:
                raise GraphError(f"{name} inside a {kind} kernel")
            seen_mm = True
            ph = "mm"
        elif b.op.kind == "reduction":
            if kind != "reduction":
                raise GraphError(f"{name} inside a {kind} kernel")
            if tuple(b.attr_dict["axis"]) != axes or btypes[b.inputs[0]].shape != space:
                raise GraphError(f"{name} does not reduce the kernel's space over its axes")
            if not reads <= {"in", "leaf", "pro"}:
                raise GraphError(f"{name} reads a value computed after the reduction")
            ph = "red"
        elif b.op.kind == "elementwise" or name == "broadcast_to":
            if kind == "loop":
                ph = "pro"
            elif kind == "reduction":
                ph = "pro" if shape == space and reads <= {"in", "leaf", "pro"} else "epi"
            else:
                ph = "epi"
            want = space if ph == "pro" or kind == "contraction" else rspace
            if shape != want:
                raise GraphError(f"{name} computes {list(shape)} in a kernel over {list(want)}")
            if ph == "epi" and "pro" in reads:
                raise GraphError(f"epilogue op {name} reads a prologue value")
            if kind == "contraction" and not seen_mm:
                raise GraphError(f"{name} before the contraction of its kernel")
        else:
            raise GraphError(f"{name} ({b.op.kind}) cannot be fused")
        for o in b.outputs:
            phase[o] = ph
