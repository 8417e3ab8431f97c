"""Constant folding, and the constant lookups the other passes share."""

from __future__ import annotations

import numpy as np

from jittape.compiler.ir import Const, Graph, Node, get_op, run_node

from .core import Rewriter, graph_pass

# A folded result larger than this (and larger than its inputs) stays a computation:
# baking a broadcast of a scalar into an 8M-element constant would cost memory and
# bandwidth on every call.
FOLD_LIMIT = 4096
# A fill stays a fill (a literal inside a kernel) unless it is this small.
LEAF_SIZE = 16


def constant_array(node: Node | None):
    """The value of a ``const`` or small ``fill`` node as an array, else None."""
    if node is None:
        return None
    if node.op.literal == "array":
        return node.attr_dict["value"].array
    if node.op.literal == "uniform":
        a = node.attr_dict
        return np.broadcast_to(np.asarray(a["value"], dtype=a["dtype"]), a["shape"])
    return None


def uniform_value(v: int, producers: dict):
    """The one value every element of ``v`` has, when that is known at trace time
    (a constant, a ``fill``, or a view of one: a broadcast, reshape, transpose or
    alias); else None."""
    for _ in range(16):
        n = producers.get(v)
        if n is None:
            return None
        if n.op.literal == "uniform":
            return n.attr_dict["value"]
        if n.op.literal == "array":
            a = n.attr_dict["value"].array
            if a.size == 0 or a.size > FOLD_LIMIT:
                return None
            first = a.flat[0]
            if np.isnan(first) if a.dtype.kind == "f" else False:
                return None
            return first.item() if np.all(a == first) else None
        if n.op.view in ("alias", "layout", "broadcast"):
            v = n.inputs[0]
            continue
        return None
    return None


def const_node(array) -> tuple:
    """(op, attrs) for a ``const`` node holding ``array``."""
    return get_op("const"), {"value": Const(array)}


@graph_pass("fold_constants")
def fold_constants(graph: Graph, report, limit: int = FOLD_LIMIT, vary=()) -> Graph:
    """Evaluate at trace time every pure node whose inputs are all constants, when the
    result is small (at most ``limit`` elements, or no larger than its inputs), and
    turn tiny ``fill`` nodes into constants (a larger fill is cheaper as it is: a
    literal inside the kernel that reads it). An op computed from its inputs' types
    alone (``shape``, ``size``: their records' ``from_types``) is a constant once those
    types hold no symbolic size.

    ``vary``: sizes that change from call to call of one trace (a symbolic batch size,
    bound): a node with such a size is not folded, so that every binding of the trace
    gives a graph of the same structure (and the same generated source)."""
    rw = Rewriter(graph)
    vary = frozenset(vary)
    values: dict = {}  # value id -> array, for constants in the new graph
    for n in graph.nodes:
        node = rw.keep(n)
        if node.op.literal == "array":
            values[node.output] = node.attr_dict["value"].array
            continue
        if node.op.from_types is not None and all(
                t.size is not None for t in (rw.types[i] for i in node.inputs)):
            # shape, size: a constant once the input types are known (no symbols)
            ins = [rw.types[i] for i in node.inputs]
            arr = np.asarray(node.op.from_types(ins, **node.attr_dict), dtype=node.type.dtype)
            _replace_by_const(rw, node, (arr,), report)
            values[rw.resolve(node.output)] = arr
            continue
        if vary and any(d in vary for t in node.types for d in t.shape):
            continue
        size = node.type.size
        if node.op.literal == "uniform" and size is not None and size <= LEAF_SIZE:
            arr = np.array(constant_array(node))
            _replace_by_const(rw, node, (arr,), report)
            values[rw.resolve(node.output)] = arr
            continue
        if (
            not node.inputs or not node.op.pure or node.op.effect or node.op.forward is None
            or node.op.kind == "fused" or any(i not in values for i in node.inputs)
        ):
            continue
        # no growth past the inputs (a broadcast of a scalar stays a cheap broadcast)
        grow = max(LEAF_SIZE, max(values[i].size for i in node.inputs))
        if any(t.size is None or t.size > min(limit, grow) for t in node.types):
            continue
        try:
            with np.errstate(all="ignore"):
                arrs = run_node(node, [values[i] for i in node.inputs])
        except Exception:  # leave it to run time, where the error can name the user's line
            continue
        if any(a.shape != t.shape for a, t in zip(arrs, node.types)):
            continue
        _replace_by_const(rw, node, arrs, report)
        for o, a in zip(node.outputs, arrs):
            values[rw.resolve(o)] = a
    return rw.finish()


def _replace_by_const(rw: Rewriter, node: Node, arrays, report) -> None:
    rw.nodes.pop()  # the node just kept
    for o, a in zip(node.outputs, arrays):
        op, attrs = const_node(a)
        (c,) = rw.emit(op, (), attrs, loc=node.loc)
        rw.replace(o, c)
    report.folded += 1
    report.note(f"folded {node.op.name} -> %{node.outputs[0]}")
