"""Reverse mode over a recorded trace, with the ops' VJP rules.

``backward`` works on tensors, whatever kind they are: with the recorded eager
tensors it computes gradients eagerly (an outer tape records those ops, which is
how higher derivatives work); with symbolic placeholders inside a ``Tracer`` it
emits the backward graph (``backward_graph``).

``backward_program`` is what a tape asks for when no other tape records: the
backward graph of its recorded nodes, built, optimized and cached here, with its
feeds and its backend; ``run_backward`` builds it and runs it, in one call.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Callable, Iterable

import numpy as np

import passes
from passes.prune import gradient_path
from passes.verify import verify

from . import _state, config
from .compiler import backends
from .compiler.ir import Const, Graph, Node, get_op
from .ops import elementwise as E
from .ops import reduction as R
from .ops import shaping as S
from .tensor import Tensor, Tracer, Variable, _config, _literal_ids


def path_nodes(nodes: Iterable[Node], target_ids, source_ids) -> tuple[list, set]:
    """Nodes on a path from a source to a target, in reverse (backward) order, and the
    value ids that need a cotangent (``passes.gradient_path``: the slice stops at
    ``stop_gradient``, at ops without a gradient and at non-float values, so the
    backward graph never holds a node for a branch that cannot carry gradient)."""
    path, need, _ = gradient_path(nodes, target_ids, source_ids)
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
        grad_of = _state.local.grad_of
        grad_of.append(n)
        try:
            grads = n.op.vjp(g, out, *ins, **dict(n.attrs))
        finally:
            grad_of.pop()
        if _config["check_numerics"] and n.op.name != "check_numerics":
            grads = [_check_gradient(n, gi) for gi in grads]
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


def _check_gradient(n: Node, gi):
    """With ``enable_check_numerics``: the gradient that ``n``'s VJP rule made, checked
    where it is made (eagerly, or as a node of the backward graph)."""
    from .errors import at
    from .ops.debugging import check_numerics_op
    from .tensor import apply

    if gi is None or not gi._type.is_float:
        return gi
    return apply(check_numerics_op, gi, auto=True,
                 message=f"check_numerics: the gradient of op {n.op.name}{at(n.loc)} "
                         f"in the backward pass")


_PLANS: "OrderedDict[tuple, tuple]" = OrderedDict()
_PLANS_LOCK = threading.Lock()
# bounded by jt.config.set_cache_limits(plans=...) (JITTAPE_MAX_PLANS, default 256)
plan_stats = {"hits": 0, "misses": 0, "uncacheable": 0}
_VERIFY = os.environ.get("JITTAPE_VERIFY", "") not in ("", "0")


def _trim_plans() -> None:
    with _PLANS_LOCK:
        config.evict(_PLANS, "plans")


config.on_cache_limit_change("plans", _trim_plans)


def structure_key(nodes, targets, seeds, source_ids, values):
    """A key for everything the backward graph depends on, with value ids renumbered in
    order of appearance: ops, attributes, types (of every input too), connectivity, which
    values are targets (and how they are seeded) and sources. Also returns the renumbering.
    ``None`` when the path holds an impure op (a custom gradient's closure)."""
    path, _ = path_nodes(nodes, [t._id for t in targets], source_ids)
    canon: dict = {}

    def c(v):
        k = canon.get(v)
        if k is None:
            k = canon[v] = len(canon)
        return k

    items = []
    for n in reversed(path):
        if not n.op.pure and not n.op.effect:
            return None, None
        in_types = tuple(_input_key(values.get(i)) for i in n.inputs)
        items.append((n.op.name, n.attrs, n.types, in_types,
                      tuple(c(i) for i in n.inputs), tuple(c(o) for o in n.outputs)))
    tgt = tuple(
        (c(t._id), t._type, t._id in values, s is None) for t, s in zip(targets, seeds)
    )
    src = tuple(c(s) for s in source_ids)
    return (tuple(items), tgt, src), canon


class _Hashed(tuple):
    """A tuple that hashes its items once. A trace's key holds every recorded node (a
    hash of it costs as much as several small ops), and each step's check, lookup, move
    to the end and, on a miss, store of its plan would hash it again."""

    def __new__(cls, items):
        key = tuple.__new__(cls, items)
        key._hash = tuple.__hash__(key)  # TypeError for an unhashable item
        return key

    def __hash__(self):
        return self._hash


def recorded_key(sig, canon, values, targets, seeds, source_ids):
    """:func:`structure_key` from what a tape kept while recording: ``sig``, one item
    per recorded node (op, attributes, types, :func:`_input_key` of its inputs, value
    ids renumbered in order of appearance by ``canon``), plus which values are targets
    and sources. A finer key than the path's, and cheap: no walk over the trace, one
    tuple to hash."""
    canon = dict(canon)

    def c(v):
        k = canon.get(v)
        if k is None:
            k = canon[v] = len(canon)
        return k

    tgt = tuple(
        (c(t._id), t._type, t._id in values, s is None) for t, s in zip(targets, seeds)
    )
    src = tuple(c(s) for s in source_ids)
    try:
        key = _Hashed(("trace", tuple(sig), tgt, src))
    except TypeError:  # an unhashable attribute
        return None, None
    return key, canon


def _input_key(t):
    """What the backward graph may depend on about a recorded input: its type, and for
    a Python literal (baked into the graph as a ``const`` node) its value too."""
    if t is None:
        return None
    if t._id in _literal_ids:
        return ("literal", t._type, t._value.item())
    return t._type


def backward_graph(nodes, targets, seeds, source_ids, values, pipeline=None,
                   backend=None, key=None) -> tuple:
    """The backward graph for a recorded trace, its feeds, and which sources it computes.

    ``targets``: target tensors; ``seeds``: one per target, ``None`` for ones or an
    ndarray fed as an input. ``values``: id -> recorded tensor.
    Returns ``(graph, feeds, computed, consts)``: ``feeds`` maps every graph input id to
    its array; ``computed[k]`` is the graph output index for source k, or None;
    ``consts[k]`` a gradient that came out concrete (no graph op computed it).

    Graphs are cached by :func:`structure_key` (or by ``key``, the pair that
    :func:`recorded_key` returns): the next training step with the same structure and
    shapes reuses the graph without tracing the VJP rules again.
    """
    key, canon = key or structure_key(nodes, targets, seeds, source_ids, values)
    if pipeline is None:
        pipeline = backends.pipeline(backend)
    if key is not None:
        key = _Hashed((key, tuple(passes.pass_key(p) for p in pipeline),
                       _config["check_numerics"]))
    if key is None:
        plan_stats["uncacheable"] += 1
        graph, feeds, computed, consts, _ = _trace_backward(
            nodes, targets, seeds, source_ids, values, {}, pipeline
        )
        return graph, feeds, computed, consts
    with _PLANS_LOCK:
        # (not pop and put back, which would save a comparison of the key: in a full
        # cache each put-back takes a new slot, and the table grows when it compacts)
        plan = _PLANS.get(key)
        if plan is not None:
            _PLANS.move_to_end(key)
    if plan is not None:
        plan_stats["hits"] += 1
        graph, origins, computed = plan
        ids = [None] * len(canon)
        for v, k in canon.items():
            ids[k] = v
        feeds = {}
        for gid, (kind, x) in zip(graph.inputs, origins):
            if kind == "value":
                feeds[gid] = values[ids[x]]._value
            elif kind == "seed":
                feeds[gid] = np.asarray(seeds[x])
            elif kind == "ones":
                t = targets[x]
                feeds[gid] = np.ones(t._type.shape, t._type.dtype)
            else:
                feeds[gid] = x
        return graph, feeds, computed, {}
    plan_stats["misses"] += 1
    graph, feeds, computed, consts, origins = _trace_backward(
        nodes, targets, seeds, source_ids, values, canon, pipeline
    )
    if not consts and all(o is not None for o in origins):
        with _PLANS_LOCK:
            _PLANS[key] = (graph, tuple(origins), computed)
            config.evict(_PLANS, "plans")
    return graph, feeds, computed, consts


class BackwardProgram:
    """A backward graph with the arrays to feed it, ready to run on ``backend``: what
    :func:`backward_program` returns. ``computed[k]`` is the graph output index of the
    gradient of ``source_ids[k]``, or None; ``consts[k]`` a gradient that came out
    concrete (no graph op computed it)."""

    __slots__ = ("graph", "feeds", "computed", "consts", "source_ids", "backend")

    def __init__(self, graph, feeds, computed, consts, source_ids, backend):
        self.graph = graph
        self.feeds = feeds
        self.computed = computed
        self.consts = consts
        self.source_ids = source_ids
        self.backend = backend

    def outputs(self, seed=None) -> list:
        """The graph's output arrays; ``seed`` (an array) replaces what the graph's
        ``seed`` input is fed, when it has one (a jacobian runs one graph per row)."""
        graph = self.graph
        if not graph.outputs:
            return []
        feeds = self.feeds
        if seed is not None:
            # no seed input: nothing the sources need depends on the target
            sid = next((v for v, nm in zip(graph.inputs, graph.input_names) if nm == "seed"),
                       None)
            if sid is not None:
                feeds[sid] = seed
        return backends.run(graph, feeds, self.backend)

    def run(self) -> dict:
        """Run the graph: source id -> gradient tensor (absent: no gradient)."""
        arrays = self.outputs()
        consts = self.consts
        res = {}
        for k, (sid, out) in enumerate(zip(self.source_ids, self.computed)):
            if out is not None:
                res[sid] = Tensor(arrays[out], _own=True)
            elif k in consts:
                res[sid] = consts[k]
        return res


def backward_program(nodes, values, targets, seeds, source_ids, backend=None,
                     trace=None) -> BackwardProgram:
    """The backward program of a recorded trace: its graph, optimized by ``backend``'s
    pipeline (default: the current backend) and cached (see :func:`backward_graph`),
    with its feeds.

    ``nodes`` and ``values`` (id -> recorded tensor) are the trace; ``targets``, target
    tensors; ``seeds``, one per target (None for ones, or an ndarray fed as an input);
    ``source_ids``, the values to differentiate. ``trace``: the ``(sig, canon)`` a tape
    kept while recording (:func:`recorded_key`), which keys the cache without a walk
    over the trace; None keys it by :func:`structure_key`.
    """
    backend = backend or backends.get_backend()
    key = None if trace is None else recorded_key(*trace, values, targets, seeds, source_ids)
    graph, feeds, computed, consts = backward_graph(
        nodes, targets, seeds, source_ids, values, backend=backend, key=key)
    if _VERIFY:
        verify(graph)
    return BackwardProgram(graph, feeds, computed, consts, source_ids, backend)


def run_backward(nodes, values, targets, seeds, source_ids, backend=None, trace=None) -> dict:
    """Gradients of ``targets`` with respect to ``source_ids`` (source id -> tensor;
    absent: no gradient), from the :func:`backward_program` of the trace, run once."""
    return backward_program(nodes, values, targets, seeds, source_ids, backend, trace).run()


def _trace_backward(nodes, targets, seeds, source_ids, values, canon, pipeline=()):
    """Trace ``backward`` with placeholders; also says where each graph input comes from."""
    # Concrete values a VJP rule computes while tracing derive from Python literals and
    # attributes, which the structure key holds: small ones can be graph constants.
    tracer = Tracer("backward", const_captures=True)
    placeholders = {}
    feeds = {}
    origin = {}

    def lookup(vid):
        ph = placeholders.get(vid)
        if ph is None:
            t = values.get(vid)
            if t is None:
                return None
            if vid in _literal_ids:
                return t  # ops on it embed it as a const node
            # named by what it is, never by its value id (the name reaches generated code)
            name = (f"var:{t._name}" if isinstance(t, Variable)
                    else f"value{canon[vid]}" if vid in canon else "value")
            ph = placeholders[vid] = tracer.placeholder(t._type, name)
            feeds[ph._id] = t._value
            origin[ph._id] = ("value", canon[vid]) if vid in canon else None
        return ph

    with tracer:
        seed_map = {}
        for k, (t, s) in enumerate(zip(targets, seeds)):
            if s is None:
                seed = E.ones_like(lookup(t._id) if t._id in values else t)
            else:
                seed = tracer.placeholder(t._type, "seed")
                feeds[seed._id] = np.asarray(s)
                origin[seed._id] = ("seed", k)
            if seed._tracer is not tracer:  # a target that was never recorded
                seed = tracer.placeholder(t._type, "seed")
                feeds[seed._id] = np.ones(t._type.shape, t._type.dtype)
                origin[seed._id] = ("ones", k)
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
        origin[vid] = ("capture", arr)
    # a VJP rule computes the gradient of every input, also of those (constants,
    # data) no source needs: drop those nodes, and inputs nothing reads
    graph, _ = backends.optimize(tracer.builder.build(outputs), pipeline)
    origins = [origin.get(v) for v in graph.inputs]
    feeds = {v: feeds[v] for v in graph.inputs}
    return graph, feeds, tuple(computed), consts, origins


def forward_graph(nodes, values, outputs) -> tuple[Graph, dict]:
    """The recorded forward computation as a Graph, with the arrays to feed it.

    Values the nodes read but do not define become inputs; a variable read is
    replaced by an input holding the snapshot it recorded.
    """
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
                if i in _literal_ids:  # a Python literal is part of the program
                    kept.append(Node(get_op("const"), (), (i,),
                                     (("value", Const(values[i]._value)),), (values[i]._type,)))
                    continue
                inputs.append(i)
                types.append(values[i]._type)
                feeds[i] = values[i]._value
        defined.update(n.outputs)
        kept.append(n)
    return Graph(tuple(inputs), tuple(types), tuple(kept), tuple(outputs), "forward"), feeds
