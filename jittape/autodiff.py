"""Reverse mode over a recorded trace, with the ops' VJP rules.

``backward`` works on tensors, whatever kind they are: with the recorded eager
tensors it computes gradients eagerly (an outer tape records those ops, which is
how higher derivatives work); with symbolic placeholders inside a ``Tracer`` it
emits the backward graph, which a backend then runs (``backward_graph``).
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from .ir import Graph, Node
from .ops import elementwise as E
from .ops import reduction as R
from .ops import shaping as S
from .tensor import Tensor, Tracer


def path_nodes(nodes: Iterable[Node], target_ids, source_ids) -> tuple[list, set]:
    """Nodes on a path from a source to a target, in reverse (backward) order.

    Everything else (unreachable nodes, and ops without a gradient) is pruned
    here, so the backward graph never holds a node for a branch that cannot
    carry gradient. Also returns the value ids that need a cotangent.
    """
    reach = set(source_ids)
    forward = []
    for n in nodes:
        if n.op.differentiable and any(i in reach for i in n.inputs):
            reach.update(n.outputs)
            forward.append(n)
    need = {t for t in target_ids if t in reach}
    path = []
    for n in reversed(forward):
        if any(o in need for o in n.outputs):
            path.append(n)
            need.update(i for i in n.inputs if i in reach)
    return path, need


def unbroadcast(g: Tensor, shape: tuple) -> Tensor:
    """Sum ``g`` over the dimensions that broadcasting added to reach ``g``'s shape."""
    gs = g._type.shape
    if gs == tuple(shape):
        return g
    lead = len(gs) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and gs[lead + i] != 1
    )
    if axes:
        g = R.reduce_sum(g, axes, keepdims=False)
    return S.reshape(g, shape)


def backward(
    nodes: Iterable[Node],
    seeds: dict,
    source_ids: list,
    lookup: Callable[[int], Tensor | None],
) -> dict:
    """Cotangents of ``source_ids`` given ``seeds`` (target id -> cotangent).

    ``lookup(id)`` returns the tensor recorded for a value (None for a variable's
    own id, which no VJP reads).
    """
    path, need = path_nodes(nodes, list(seeds), source_ids)
    cot = dict(seeds)
    for n in path:
        gs = [cot.get(o) for o in n.outputs]
        if all(g is None for g in gs):
            continue
        outs = [lookup(o) for o in n.outputs]
        if len(gs) == 1:
            g, out = gs[0], outs[0]
        else:
            gs = [E.zeros_like(o) if g is None else g for g, o in zip(gs, outs)]
            g, out = tuple(gs), tuple(outs)
        ins = [lookup(i) for i in n.inputs]
        grads = n.op.vjp(g, out, *ins, **dict(n.attrs))
        if len(grads) != len(n.inputs):
            raise AssertionError(
                f"vjp of {n.op.name} returned {len(grads)} gradients for {len(n.inputs)} inputs"
            )
        for i, x, gi in zip(n.inputs, ins, grads):
            if gi is None or i not in need:
                continue
            if x is not None:
                gi = unbroadcast(gi, x._type.shape)
            prev = cot.get(i)
            cot[i] = gi if prev is None else E.add(prev, gi)
    return {s: cot.get(s) for s in source_ids}


def backward_graph(nodes, targets, seeds, source_ids, values) -> tuple:
    """Trace ``backward`` with placeholders: the backward graph, its feeds, and which
    sources it computes.

    ``targets``: target tensors; ``seeds``: one per target, ``None`` for ones or an
    ndarray fed as an input. ``values``: id -> recorded tensor.
    Returns ``(graph, feeds, computed, consts)``: ``feeds`` maps every graph input id to
    its array; ``computed[k]`` is the graph output index for source k, or None;
    ``consts[k]`` a gradient that came out concrete (no graph op computed it).
    """
    tracer = Tracer("backward")
    placeholders = {}
    feeds = {}

    def lookup(vid):
        ph = placeholders.get(vid)
        if ph is None:
            t = values.get(vid)
            if t is None:
                return None
            ph = placeholders[vid] = tracer.placeholder(t._type, f"v{vid}")
            feeds[ph._id] = t._value
        return ph

    with tracer:
        seed_map = {}
        for t, s in zip(targets, seeds):
            if s is None:
                seed = E.ones_like(lookup(t._id) if t._id in values else t)
            else:
                seed = tracer.placeholder(t._type, "seed")
                feeds[seed._id] = np.asarray(s)
            if seed._tracer is not tracer:  # a target that was never recorded
                seed = tracer.placeholder(t._type, "seed")
                feeds[seed._id] = np.ones(t._type.shape, t._type.dtype)
            prev = seed_map.get(t._id)
            seed_map[t._id] = seed if prev is None else E.add(prev, seed)
        grads = backward(nodes, seed_map, source_ids, lookup)

    outputs, computed, consts = [], [], {}
    for k, s in enumerate(source_ids):
        g = grads.get(s)
        if g is None:
            computed.append(None)
            continue
        if g._tracer is not tracer:  # a concrete result (no op touched the graph)
            consts[k] = g
            computed.append(None)
            continue
        computed.append(len(outputs))
        outputs.append(g._id)
    for vid, arr in tracer.captures.values():
        feeds[vid] = arr
    graph = tracer.builder.build(outputs)
    return graph, feeds, computed, consts


def forward_graph(nodes, values, outputs) -> tuple[Graph, dict]:
    """The recorded forward computation as a Graph, with the arrays to feed it.

    Values the nodes read but do not define become inputs; a variable read is
    replaced by an input holding the snapshot it recorded.
    """
    from .ir import Graph as _Graph

    defined, inputs, types, feeds, kept = set(), [], [], {}, []
    for n in nodes:
        if n.op.name == "read":
            (o,) = n.outputs
            inputs.append(o)
            types.append(n.types[0])
            feeds[o] = values[o]._value
            defined.add(o)
            continue
        for i in n.inputs:
            if i not in defined:
                defined.add(i)
                inputs.append(i)
                types.append(values[i]._type)
                feeds[i] = values[i]._value
        defined.update(n.outputs)
        kept.append(n)
    return _Graph(tuple(inputs), tuple(types), tuple(kept), tuple(outputs), "forward"), feeds
