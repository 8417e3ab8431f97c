"""Algebraic simplification: identities that make a graph smaller without changing
what it computes.

Every rule keeps IEEE results (up to the sign of a zero), except three that are only
exact when values are finite and inside their ops' domains, applied with
``assume_finite=True`` (grappler's behaviour): ``x * 0 -> 0`` for floats (NaN or Inf
times 0 is NaN; for integers it is always applied), ``exp(log(x)) -> x`` (NaN for
``x < 0``) and ``x ** 0.5 -> sqrt(x)`` (they differ at ``-inf``).
"""

from __future__ import annotations

import numpy as np

from jittape.compiler.ir import Graph, Node, Type, get_op

from .core import Rewriter, graph_pass
from .fold import uniform_value

_WIDER = {
    ("float32", "float64"), ("float16", "float32"), ("float16", "float64"),
    ("int8", "int16"), ("int8", "int32"), ("int8", "int64"), ("int16", "int32"),
    ("int16", "int64"), ("int32", "int64"), ("uint8", "int16"), ("uint8", "int32"),
    ("uint8", "int64"),
}


class _Simplifier:
    def __init__(self, graph: Graph, report, assume_finite: bool = False):
        self.assume_finite = assume_finite
        self.rw = Rewriter(graph)
        self.prod: dict = {}  # value id in the new graph -> its node
        self.report = report

    # -- helpers ----------------------------------------------------------
    def t(self, v) -> Type:
        return self.rw.types[v]

    def uniform(self, v):
        return uniform_value(v, self.prod)

    def producer(self, v, name=None) -> Node | None:
        n = self.prod.get(v)
        if n is not None and (name is None or n.op.name == name):
            return n
        return None

    def emit(self, name, inputs, attrs=None, loc=None) -> int:
        outs = self.rw.emit(get_op(name), inputs, attrs, loc=loc)
        self.prod[outs[0]] = self.rw.nodes[-1]
        return outs[0]

    def as_type(self, v, want: Type, loc=None) -> int | None:
        """``v`` as a value of type ``want`` (broadcast or reshaped), or None."""
        have = self.t(v)
        if have.dtype != want.dtype:
            return None
        if have.shape == want.shape:
            return v
        if None in want.shape or None in have.shape:
            return None
        try:
            np.broadcast_shapes(have.shape, want.shape)
        except ValueError:
            return None
        if np.broadcast_shapes(have.shape, want.shape) != want.shape:
            return None
        if have.size == want.size:
            return self.emit("reshape", (v,), {"shape": want.shape}, loc)
        return self.emit("broadcast_to", (v,), {"shape": want.shape}, loc)

    def fill(self, want: Type, value, loc=None) -> int:
        attrs = {"shape": want.shape, "value": value, "dtype": want.dtype}
        return self.emit("fill", (), attrs, loc)

    # -- the rules --------------------------------------------------------
    def absorb_broadcasts(self, n: Node):
        """An elementwise op broadcasts its inputs itself: read past ``broadcast_to``
        when the result's shape does not change."""
        if n.op.kind != "elementwise" or len(n.inputs) < 2:
            return None
        ins = list(n.inputs)
        for k, v in enumerate(ins):
            b = self.producer(v, "broadcast_to")
            if b is None:
                continue
            trial = ins[:k] + [b.inputs[0]] + ins[k + 1:]
            try:
                shape = np.broadcast_shapes(*(self.t(i).shape for i in trial))
            except ValueError:
                continue
            if shape == n.types[0].shape:
                ins = trial
        if ins == list(n.inputs):
            return None
        return self.emit(n.op.name, ins, n.attr_dict, n.loc)

    def rewrite(self, n: Node):
        """A value id that replaces ``n``'s (single) output, or None to keep ``n``."""
        name, ins, out = n.op.name, n.inputs, n.types[0] if n.types else None
        loc = n.loc
        if None not in out.shape and all(None not in self.t(i).shape for i in ins):
            v = self.absorb_broadcasts(n)
            if v is not None:
                return v
        if n.op.view == "alias":  # identity, stop_gradient, a variable's read
            return ins[0]
        if n.op.view in ("layout", "broadcast") and self.t(ins[0]).size == 1:
            u = self.uniform(ins[0])  # a scalar constant spread out: a fill
            if u is not None:
                return self.fill(out, u, loc)
        if n.op.kind == "elementwise" and ins and n.op.forward is not None:
            us = [self.uniform(i) for i in ins]  # every input one known value: a fill
            if all(u is not None for u in us):
                args = [np.asarray(u, dtype=self.t(i).dtype) for u, i in zip(us, ins)]
                with np.errstate(all="ignore"):
                    r = np.asarray(n.op.forward(*args, **n.attr_dict))
                return self.fill(out, r.astype(out.dtype).item(), loc)
        if name == "reshape":  # reduce(keepdims=False) then reshape back: keepdims=True
            r = self.prod.get(ins[0])
            if r is not None and r.op.kind == "reduction" and not r.attr_dict.get("keepdims", 1):
                a = r.attr_dict
                x = self.t(r.inputs[0])
                kept = tuple(1 if k in a["axis"] else d for k, d in enumerate(x.shape))
                if kept == out.shape:
                    return self.emit(r.op.name, r.inputs, dict(a, keepdims=True), loc)
        if n.op.kind == "elementwise" and len(ins) == 1 and n.op.scalar is not None:
            b = self.producer(ins[0], "broadcast_to")  # op(broadcast(x)) = broadcast(op(x))
            if b is not None and self.t(b.inputs[0]).size < out.size:
                y = self.emit(name, (b.inputs[0],), n.attr_dict, loc)
                return self.as_type(y, out, loc)
        if name == "add":
            for a, b in ((0, 1), (1, 0)):
                if self.uniform(ins[b]) == 0:
                    return self.as_type(ins[a], out, loc)
            for a, b in ((0, 1), (1, 0)):
                neg = self.producer(ins[b], "negative")
                if neg is not None and self.t(neg.inputs[0]) == self.t(ins[b]):
                    return self.emit("subtract", (ins[a], neg.inputs[0]), loc=loc)
        if name == "subtract":
            if self.uniform(ins[1]) == 0:
                return self.as_type(ins[0], out, loc)
            if self.uniform(ins[0]) == 0 and out.is_float:
                x = self.as_type(ins[1], out, loc)
                return None if x is None else self.emit("negative", (x,), loc=loc)
            neg = self.producer(ins[1], "negative")
            if neg is not None and self.t(neg.inputs[0]) == self.t(ins[1]):
                return self.emit("add", (ins[0], neg.inputs[0]), loc=loc)
        if name == "multiply":
            for a, b in ((0, 1), (1, 0)):
                u = self.uniform(ins[b])
                if u == 1:
                    return self.as_type(ins[a], out, loc)
                if u == 0 and u is not False and (self.assume_finite or not out.is_float):
                    return self.fill(out, 0, loc)
            if ins[0] == ins[1]:
                return self.emit("square", (ins[0],), loc=loc)
        if name == "divide" and self.uniform(ins[1]) == 1 and self.t(ins[0]).dtype == out.dtype:
            return self.as_type(ins[0], out, loc)
        if name == "negative":
            inner = self.producer(ins[0], "negative")
            if inner is not None:
                return inner.inputs[0]
        if name == "logical_not":
            inner = self.producer(ins[0], "logical_not")
            if inner is not None:
                return inner.inputs[0]
        if name == "exp" and self.assume_finite:  # log of a negative is NaN, not x
            inner = self.producer(ins[0], "log")
            if inner is not None:
                return inner.inputs[0]
        if name == "pow" and out.is_float:
            e = self.uniform(ins[1])
            x = self.as_type(ins[0], out, loc) if e is not None else None
            if x is not None:
                if e == 1:
                    return x
                if e == 2:
                    return self.emit("square", (x,), loc=loc)
                if e == 0.5 and self.assume_finite:  # pow(-inf, 0.5) = inf, sqrt: NaN
                    return self.emit("sqrt", (x,), loc=loc)
                if e == -1:
                    return self.emit("reciprocal", (x,), loc=loc)
        if name == "where":
            if ins[1] == ins[2]:
                return self.as_type(ins[1], out, loc)
            c = self.uniform(ins[0])
            if c is not None:
                return self.as_type(ins[1] if c else ins[2], out, loc)
        if name == "cast":
            x = ins[0]
            if self.t(x).dtype == out.dtype:
                return x
            inner = self.producer(x, "cast")
            if inner is not None:
                src = self.t(inner.inputs[0]).dtype
                if src == out.dtype and (src, self.t(x).dtype) in _WIDER:
                    return inner.inputs[0]
        if name in ("reshape", "broadcast_to"):
            x = ins[0]
            if self.t(x) == out:
                return x
            inner = self.prod.get(x)
            if inner is not None and inner.op.name == "fill":
                return self.fill(out, inner.attr_dict["value"], loc)
            if inner is not None and inner.op.name == name:
                return self.emit(name, (inner.inputs[0],), {"shape": out.shape}, loc)
        if name == "transpose":
            perm = n.attr_dict["perm"]
            if tuple(perm) == tuple(range(len(perm))):
                return ins[0]
            inner = self.producer(ins[0], "transpose")
            if inner is not None:
                p1 = inner.attr_dict["perm"]
                q = tuple(p1[p] for p in perm)
                if q == tuple(range(len(q))):
                    return inner.inputs[0]
                return self.emit("transpose", (inner.inputs[0],), {"perm": q}, loc)
        if n.op.monoid is not None:
            x = ins[0]
            axes = n.attr_dict["axis"]
            if all(self.t(x).shape[a] == 1 for a in axes):
                if self.t(x).shape == out.shape:
                    return x
                return self.emit("reshape", (x,), {"shape": out.shape}, loc)
        return None


@graph_pass("simplify")
def simplify(graph: Graph, report, assume_finite: bool = False) -> Graph:
    """Rewrite algebraic identities: ``x*1``, ``x+0``, ``x-0``, ``x/1``, ``x*0`` (to a
    fill: integers always, floats with ``assume_finite``), ``0-x``, ``x+(-y)``, ``x*x``
    (to ``square``), ``--x``, ``x**1``/``x**2``/``x**-1``, ``exp(log(x))`` and
    ``x**0.5`` (with ``assume_finite``), ``where(c, x, x)`` and constant conditions,
    casts to the same dtype and widening round trips, identity and ``stop_gradient``
    (a no-op once traced), repeated or no-op reshapes and broadcasts, transposes of
    transposes, reductions over size-1 axes, ops on uniform values (to a ``fill``),
    and broadcasts an elementwise op does itself."""
    s = _Simplifier(graph, report, assume_finite)
    for n in graph.nodes:
        node = s.rw.keep(n)
        if len(node.outputs) != 1 or not node.op.pure or node.op.effect:
            s.prod.update((o, node) for o in node.outputs)
            continue
        mark = len(s.rw.nodes)
        try:
            new = s.rewrite(node)
        except (ValueError, TypeError):  # a rule's new node did not type-check: keep
            del s.rw.nodes[mark:]
            new = None
        if new is None or s.t(new) != node.type:
            del s.rw.nodes[mark:]
            s.prod[node.output] = node
            continue
        # drop the original node (it sits just before the ones the rule added)
        del s.rw.nodes[mark - 1]
        s.rw.replace(node.output, new)
        report.rewritten += 1
        report.note(f"{node.op.name} -> %{node.output} rewritten to %{new}")
    return s.rw.finish()
