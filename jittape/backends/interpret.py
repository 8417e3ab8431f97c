"""The reference backend: run a graph node by node with the ops' numpy forwards."""

from __future__ import annotations

import numpy as np

from ..ir import Graph, dtype_name


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
    for idx, n in enumerate(graph.nodes):
        if n.op.forward is None:
            raise NotImplementedError(f"op {n.op.name} cannot be interpreted (no numpy reference)")
        res = n.op.forward(*[env[i] for i in n.inputs], **dict(n.attrs))
        res = res if len(n.outputs) > 1 else (res,)
        for o, r, t in zip(n.outputs, res, n.types):
            r = np.asarray(r)
            if dtype_name(r.dtype) != t.dtype:
                r = r.astype(t.dtype)
            env[o] = r
        for i in n.inputs:
            if last_use.get(i) == idx and i not in keep:
                env.pop(i, None)
    return [env[o] for o in graph.outputs]
