"""The reference backend: run a graph node by node with the ops' numpy forwards.

A graph that carries a buffer plan (``passes.plan_buffers``) runs *inside* the plan:
every planned value is copied into its slot and read back from there, so a plan
that lets a kernel overwrite a live value gives wrong results (the tests rely on
that to check plans). Fused nodes run their body with the same numpy references.
"""

from __future__ import annotations

import re

import numpy as np

from ...errors import InvalidArgumentError, at
from ..ir import Graph, run_node

_AT = re.compile(r" \(at [^()]*\)$")


def name_op_line(err: InvalidArgumentError, nodes) -> None:
    """Make ``err`` (bad data met while ``nodes`` ran: an index out of range) end with
    the user's line of the op that raised it, as in eager code, in place of the line
    that called the graph. The op is the one of ``nodes`` that its message names
    (``gather: ...``; for a strict one_hot, the op whose labels it reads); when several
    lines could have raised it, the message keeps the caller's."""
    msg = str(err.args[0]) if err.args else ""
    end = _AT.search(msg)
    if end is None or msg.count(" (at ") != 1:  # a check that named its line already
        return
    label = msg.split(":", 1)[0]
    locs = {at(n.loc) for n in nodes
            if n.op.name == label or dict(n.attrs).get("strict") == label}
    if len(locs) == 1 and "" not in locs:
        err.args = (msg[:end.start()] + locs.pop(),)


def run(graph: Graph, feeds: dict) -> list:
    """Outputs of ``graph`` for ``feeds`` (input id -> array), as a list of arrays.

    Values are dropped as soon as their last user has run.
    """
    env = {}
    for v, t in zip(graph.inputs, graph.input_types):
        if v not in feeds:
            raise KeyError(f"no value fed for input %{v}: {t}")
        env[v] = feeds[v]
    last_use = {}
    for idx, n in enumerate(graph.nodes):
        for i in n.inputs:
            last_use[i] = idx
    keep = set(graph.outputs)
    plan = graph.buffers
    slot_of, slots = {}, []
    if plan is not None:
        slot_of = plan.slot_of()
        slots = [np.empty(size, dtype) for dtype, size in plan.slots]
    for idx, n in enumerate(graph.nodes):
        if n.op.forward is None:
            raise NotImplementedError(f"op {n.op.name} cannot be interpreted (no numpy reference)")
        try:
            res = run_node(n, [env[i] for i in n.inputs])
        except InvalidArgumentError as e:
            name_op_line(e, (n,))
            raise
        for o, r, t in zip(n.outputs, res, n.types):
            s = slot_of.get(o)
            if s is not None:
                buf = slots[s].reshape(t.shape)
                np.copyto(buf, r)
                r = buf
            env[o] = r
        for i in n.inputs:
            if last_use.get(i) == idx and i not in keep:
                env.pop(i, None)
    return [env[o] for o in graph.outputs]
