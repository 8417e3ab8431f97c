"""The graph IR that tapes record into and that passes and backends consume.

A :class:`Graph` is a topologically ordered tuple of frozen :class:`Node` s over
integer value ids. Every node carries its :class:`OpDef`, so a pass reads
``node.op.kind`` or ``node.op.pure`` without touching the op registry, tensors or
backends. Graphs are immutable: passes build new ones.

This module knows nothing else of jittape (numpy and its sibling ``dims``, the
symbolic sizes, are its only imports).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from .dims import Dim

# ---------------------------------------------------------------------------
# Types

_SHORT = {
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "bool": "bool",
}

FLOAT_DTYPES = frozenset({"float16", "float32", "float64"})
INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8"})


_DTYPE_NAMES: dict = {}


def dtype_name(dt) -> str:
    """numpy's canonical name for a dtype-like (cached: ``np.dtype(x).name`` is slow)."""
    try:
        return _DTYPE_NAMES[dt]
    except (KeyError, TypeError):
        name = np.dtype(dt).name
        try:
            _DTYPE_NAMES[dt] = name
        except TypeError:
            pass
        return name


@dataclass(frozen=True, slots=True)
class Type:
    """Shape and dtype of one value. A ``None`` dimension is unknown (symbolic)."""

    shape: tuple
    dtype: str

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(
            d if d is None or isinstance(d, Dim) else int(d) for d in self.shape))
        object.__setattr__(self, "dtype", dtype_name(self.dtype))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int | None:
        n = 1
        for d in self.shape:
            if d is None or isinstance(d, Dim):
                return None
            n *= d
        return n

    @property
    def symbolic(self) -> bool:
        """Some size is a symbol (``jittape.compiler.dims``): unknown until a call binds it."""
        return any(isinstance(d, Dim) for d in self.shape)

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOAT_DTYPES

    def __str__(self) -> str:
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{_SHORT.get(self.dtype, self.dtype)}[{dims}]"


# ---------------------------------------------------------------------------
# Op records

# What an op is, for the passes and the code generators:
#   elementwise  one scalar expression per output element (``scalar``): fused into loops
#   reduction    folds axes of one input (with a ``monoid``, fused with a prologue and
#                an epilogue; without one, an op of its own: argmax)
#   matmul       what lowers to a GEMM call (BLAS), with an elementwise epilogue
#   window       sliding windows over spatial axes (convolution, pooling): none yet
#   control      carries sub-graphs (loops, conditionals): none yet
#   shape        shapes and layouts (views, slices, concatenation)
#   other        the rest (gathers, scatters, checks); each has a lowering of its own
#   fused        the fusion pass's kernels (a body graph)
KINDS = ("elementwise", "reduction", "matmul", "window", "control", "shape", "other",
         "fused")
# the reductions' monoids the code generators accumulate with
MONOIDS = ("add", "max", "min", "mul")
# what a view's output is of its first input's storage:
#   alias   the same array (identity, stop_gradient, read)
#   layout     the same elements in another shape or order (reshape, transpose)
#   broadcast  the elements repeated along new or size-1 axes (broadcast_to): a loop
#              reads it by index arithmetic, so it fuses like an elementwise op
#   slice      a subset of the elements (strided_slice)
#   checked    the same array, once a check of its values passed (check_numerics):
#              the check runs as a kernel, the result is the input's storage
VIEWS = ("alias", "layout", "broadcast", "slice", "checked", "inplace")
# ``inplace``: the result may be written over its input's storage when the input dies
# there (a collective reducing a buffer of the step's own): the buffer plan keeps that
# storage alive while the result is read
# what one element of an op costs, against a load: cheap ops (an add, a compare) are
# recomputed inside a consumer's kernel rather than stored; transcendental ones (exp,
# tanh) weigh several times an arithmetic op in a kernel's work estimate
COSTS = ("cheap", "normal", "transcendental")
# how an op with no inputs holds its value in its attributes:
#   uniform  one value for every element (``fill``: value, shape, dtype)
#   array    the whole array (``const``: a ``Const``); it needs no buffer
LITERALS = ("uniform", "array")

# Every op declared with ``jittape.ops.defop`` is listed here by name, so that passes
# can build nodes (``get_op("broadcast_to")``) without importing the registry.
OP_TABLE: dict = {}
# ``check(op)`` of each compiling backend imported so far: an op declared after a
# backend's import is checked against its lowering table at once (``ops.defop`` runs
# them), and a backend checks the ops already declared when it loads
LOWERING_CHECKS: list = []


def get_op(name: str) -> "OpDef":
    """The declared op called ``name`` (the registry must have been imported)."""
    try:
        return OP_TABLE[name]
    except KeyError:
        raise KeyError(f"no op named {name!r} (is jittape.ops imported?)") from None



class _NoGradient:
    """Marker for ops that are not differentiable (comparisons, integer results)."""

    def __repr__(self):
        return "NO_GRADIENT"


NO_GRADIENT = _NoGradient()


@dataclass(eq=False)
class OpDef:
    """Everything about one op, declared once (see ``jittape/ops``).

    forward(*arrays, **attrs) -> ndarray (or tuple for ``nout > 1``): numpy reference.
    infer(types, **attrs) -> Type (or tuple): shape/dtype rule; raises on bad input.
    vjp(g, out, *inputs, **attrs) -> tuple with one gradient (or None) per input,
        written with jittape ops so that it is differentiable again.
    scalar: for elementwise ops, a Python expression for one element that code
        generation uses: ``{0}``, ``{1}`` are the inputs, ``{dt}`` the output's numpy
        scalar type (type every literal: ``{dt}(1)``), other fields the attributes; it
        may call ``np.*`` and the vector math helpers ``_vm.*``
        (``jittape/compiler/backends/vmath.py``), e.g. ``"_vm.jt_tanh({0})"``.
    """

    name: str
    kind: str
    nin: int | None  # None: variadic
    forward: Callable | None
    infer: Callable
    vjp: Any = NO_GRADIENT
    scalar: str | None = None
    nout: int = 1
    pure: bool = True  # no side effects, result depends only on inputs and attrs
    effect: bool = False  # side effect: keep, and keep in program order
    commutative: bool = False
    domain: Any = None  # test hint: where finite differences are meaningful
    doc: str = ""
    # a reduction's monoid (how its code generators accumulate): one of MONOIDS
    monoid: str | None = None
    cut: bool = False  # tapes record nothing past it (stop_gradient)
    # the op's value from its inputs' types alone (``shape``, ``size``): a graph traced
    # with symbolic sizes holds the node, ``concretize`` makes it a constant
    from_types: Callable | None = None
    view: str | None = None  # one of VIEWS: the output views input 0's storage
    cost: str = "normal"  # one of COSTS
    # one of LITERALS: the value is in the attributes, and fusion copies it into every
    # body that reads it (an array only when small), code generators write it inline
    literal: str | None = None
    # the output may be written into the buffer of an input of its shape (it reads each
    # input element at the index it writes): None means "if elementwise"
    inplace: bool | None = None
    # for integer dtypes, input 1 is a divisor and a zero raises InvalidArgumentError
    # (floordiv, floormod: TF's "Integer division by zero")
    int_divisor: bool = False
    # why no compiling backend runs the op (they hand a graph holding it to
    # ``interpret``, with one warning); None: every backend has a lowering for it
    interpret_only: str | None = None
    # an op with a kernel of its own whose elementwise consumers may run in that kernel,
    # over its output, as a matmul's do (the convolutions): fusion groups it as a matmul
    epilogue: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"op {self.name!r}: unknown kind {self.kind!r}; "
                             f"the kinds are {', '.join(KINDS)}")
        if self.view is not None and self.view not in VIEWS:
            raise ValueError(f"op {self.name!r}: field 'view' is {self.view!r}; "
                             f"one of {', '.join(map(repr, VIEWS))}")
        if self.literal is not None and self.literal not in LITERALS:
            raise ValueError(f"op {self.name!r}: field 'literal' is {self.literal!r}; "
                             f"one of {', '.join(map(repr, LITERALS))}")
        if self.cost not in COSTS:
            raise ValueError(f"op {self.name!r}: field 'cost' is {self.cost!r}; "
                             f"one of {', '.join(map(repr, COSTS))}")
        if self.inplace is None:
            self.inplace = self.kind == "elementwise"
        if self.monoid is not None:
            if self.kind != "reduction":
                raise ValueError(
                    f"op {self.name!r}: field 'monoid' is for reductions, not kind {self.kind!r}")
            if self.monoid not in MONOIDS:
                raise ValueError(
                    f"op {self.name!r}: field 'monoid' is {self.monoid!r}; the code "
                    f"generators know {', '.join(map(repr, MONOIDS))}")

    @property
    def differentiable(self) -> bool:
        return self.vjp is not NO_GRADIENT

    def __repr__(self):
        return f"OpDef({self.name})"

    def __hash__(self):
        return hash(self.name)

    def __eq__(self, other):
        return self is other


# ---------------------------------------------------------------------------
# Attributes


class Const:
    """A hashable wrapper of an ndarray, used as a node attribute (constants)."""

    __slots__ = ("array", "_key")

    def __init__(self, array):
        a = np.array(array, copy=True)
        a.setflags(write=False)
        self.array = a
        self._key = None

    def key(self):
        if self._key is None:
            # the whole digest of the exact bytes: two constants are one only when equal
            digest = hashlib.sha256(np.ascontiguousarray(self.array).tobytes()).hexdigest()
            self._key = (self.array.dtype.name, self.array.shape, digest)
        return self._key

    def __hash__(self):
        return hash(self.key())

    def __eq__(self, other):
        return isinstance(other, Const) and self.key() == other.key()

    def __repr__(self):
        a = self.array
        if a.size <= 4:
            return np.array2string(a, separator=",").replace("\n", "")
        return f"<{a.dtype.name}{list(a.shape)} {self.key()[2][:8]}>"


class Opaque:
    """A node attribute that is compared by identity (a Python callable, say)."""

    __slots__ = ("value", "label")

    def __init__(self, value, label=None):
        self.value = value
        self.label = label or getattr(value, "__qualname__", type(value).__name__)

    def __repr__(self):
        return f"<{self.label}>"


def _freeze(v):
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, np.ndarray):
        return Const(v)
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, slice):
        return ("slice", v.start, v.stop, v.step)
    return v


def decode_index(key) -> tuple:
    """A ``strided_slice`` key (its frozen form: ``("slice", start, stop, step)``,
    ``"..."``, ``"newaxis"``, ints) as a numpy index."""
    out = []
    for k in key:
        if isinstance(k, tuple) and k and k[0] == "slice":
            out.append(slice(*k[1:]))
        elif k == "...":
            out.append(Ellipsis)
        elif k == "newaxis":
            out.append(None)
        else:
            out.append(k)
    return tuple(out)


def freeze_attrs(attrs: Mapping[str, Any] | None) -> tuple:
    """Attributes as a sorted tuple of (name, value) pairs, hashable and ordered."""
    if not attrs:
        return ()
    return tuple(sorted((k, _freeze(v)) for k, v in attrs.items()))


# ---------------------------------------------------------------------------
# Nodes and graphs


@dataclass(frozen=True, slots=True)
class Node:
    """One op application: ``outputs = op(inputs, **attrs)``."""

    op: OpDef
    inputs: tuple
    outputs: tuple
    attrs: tuple  # freeze_attrs(...) form
    types: tuple  # one Type per output
    loc: str | tuple | None = None  # user "file:line" (or (file, line) from a tape), if known

    @property
    def output(self) -> int:
        if len(self.outputs) != 1:
            raise ValueError(f"{self.op.name} has {len(self.outputs)} outputs")
        return self.outputs[0]

    @property
    def type(self) -> Type:
        return self.types[0]

    @property
    def attr_dict(self) -> dict:
        return dict(self.attrs)


@dataclass(frozen=True)
class Graph:
    """A computation: typed inputs, nodes in topological order, outputs.

    Side-effect nodes (``node.op.effect``) stay in program order in ``nodes``.
    """

    inputs: tuple  # value ids
    input_types: tuple  # Type per input
    nodes: tuple  # Node, topological
    outputs: tuple  # value ids
    name: str = "graph"
    input_names: tuple = ()
    # A buffer plan (``passes.buffers.BufferPlan``) once one has been made; rebuilding
    # the graph drops it. Not part of the graph's identity.
    buffers: Any = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "input_types", tuple(self.input_types))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "outputs", tuple(self.outputs))

    # -- lookups ----------------------------------------------------------
    def types(self) -> dict:
        """value id -> Type, for inputs and every node output."""
        t = dict(zip(self.inputs, self.input_types))
        for n in self.nodes:
            t.update(zip(n.outputs, n.types))
        return t

    def producers(self) -> dict:
        """value id -> the node that defines it (inputs are absent)."""
        return {o: n for n in self.nodes for o in n.outputs}

    def users(self) -> dict:
        """value id -> list of nodes that read it, in graph order."""
        u: dict = {}
        for n in self.nodes:
            for i in n.inputs:
                u.setdefault(i, []).append(n)
        return u

    @property
    def effects(self) -> tuple:
        """Side-effect nodes, in program order."""
        return tuple(n for n in self.nodes if n.op.effect)

    # -- identity ---------------------------------------------------------
    def canonical(self) -> "Graph":
        """The same graph with value ids renumbered 0.. in order of definition."""
        ren = {}
        for v in self.inputs:
            ren.setdefault(v, len(ren))
        nodes = []
        for n in self.nodes:
            for o in n.outputs:
                ren.setdefault(o, len(ren))
            attrs = n.attrs
            if any(isinstance(v, Graph) for _, v in attrs):
                attrs = tuple((k, v.canonical() if isinstance(v, Graph) else v) for k, v in attrs)
            nodes.append(
                Node(
                    n.op,
                    tuple(ren[i] for i in n.inputs),
                    tuple(ren[o] for o in n.outputs),
                    attrs,
                    n.types,
                )
            )
        return Graph(
            tuple(ren[v] for v in self.inputs),
            self.input_types,
            tuple(nodes),
            tuple(ren[v] for v in self.outputs),
            self.name,
            self.input_names,
        )

    def structural_key(self) -> str:
        """A content hash of the canonical graph: same structure, types and attrs, with
        constants by their exact bytes (names and value ids do not count). Never the
        printed text: the printer rounds constants."""
        h = hashlib.sha256()
        _hash_graph(h, self.canonical())
        return h.hexdigest()

    def __str__(self):
        return print_graph(self)


def _hash_graph(h, g: "Graph") -> None:
    """Feed the canonical graph ``g`` to the hash ``h``: every field that gives a node
    its meaning, each value tagged with its Python type (``1``, ``1.0`` and ``True``
    differ), floats by ``repr`` (exact, ``-0.0`` apart from ``0.0``), arrays by their
    bytes."""
    h.update(b"G(")
    for t in g.input_types:
        _hash_value(h, t)
    for n in g.nodes:
        h.update(b"N" + n.op.name.encode() + b"(")
        for v in (n.inputs, n.outputs, n.types):
            _hash_value(h, v)
        for k, v in n.attrs:
            h.update(b"@" + k.encode() + b"=")
            _hash_value(h, v)
        h.update(b")")
    _hash_value(h, g.outputs)
    h.update(b")")


def _hash_value(h, v) -> None:
    t = type(v)
    if t is Graph:
        _hash_graph(h, v)
    elif t is Const:
        a = v.array
        h.update(f"C{a.dtype.str}{a.shape}:".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    elif t is Type:
        h.update(f"T{v.dtype}{v.shape}".encode())
    elif t in (tuple, list):
        h.update(b"(" if t is tuple else b"[")
        for x in v:
            _hash_value(h, x)
        h.update(b")")
    elif t is Opaque:
        # compared by identity: the cache that holds the graph keeps the object alive
        h.update(f"O{id(v.value)}".encode())
    elif isinstance(v, np.ndarray):
        _hash_value(h, Const(v))
    elif isinstance(v, np.generic):
        h.update(f"S{v.dtype.str}:".encode() + v.tobytes())
    elif isinstance(v, OpDef):
        h.update(f"op:{v.name}".encode())
    else:
        h.update(f"{t.__name__}:{v!r};".encode())


# ---------------------------------------------------------------------------
# Building


class GraphBuilder:
    """Appends nodes with fresh value ids; ``infer`` gives every output its type."""

    def __init__(self, name="graph", new_id: Callable[[], int] | None = None):
        self.name = name
        self._counter = 0
        self._new_id = new_id or self._next
        self.inputs: list = []
        self.input_types: list = []
        self.input_names: list = []
        self.nodes: list = []
        self.types: dict = {}

    def _next(self):
        self._counter += 1
        return self._counter - 1

    def add_input(self, type_: Type, name: str | None = None, vid: int | None = None) -> int:
        v = self._new_id() if vid is None else vid
        self.inputs.append(v)
        self.input_types.append(type_)
        self.input_names.append(name or f"in{len(self.inputs) - 1}")
        self.types[v] = type_
        return v

    def add_node(self, op: OpDef, inputs: Sequence[int], attrs=None, loc=None, types=None) -> tuple:
        inputs = tuple(inputs)
        frozen = freeze_attrs(attrs)
        if types is None:
            types = infer_types(op, [self.types[i] for i in inputs], dict(frozen))
        outs = tuple(self._new_id() for _ in types)
        self.nodes.append(Node(op, inputs, outs, frozen, tuple(types), loc))
        self.types.update(zip(outs, types))
        return outs

    def build(self, outputs: Iterable[int]) -> Graph:
        return Graph(
            tuple(self.inputs),
            tuple(self.input_types),
            tuple(self.nodes),
            tuple(outputs),
            self.name,
            tuple(self.input_names),
        )


_INFER_CACHE: dict = {}
_INFER_CACHE_SIZE = 65536


def infer_types(op: OpDef, in_types: Sequence[Type], attrs: Mapping) -> tuple:
    """Output types of ``op`` applied to ``in_types``, always as a tuple.

    Memoized: an eager training loop asks the same question every step. Errors are
    not cached (they raise each time).
    """
    in_types = tuple(in_types)
    try:
        key = (op.name, in_types, tuple(attrs.items()))
        hit = _INFER_CACHE.get(key)
    except TypeError:  # an unhashable attribute
        key, hit = None, None
    if hit is not None:
        return hit
    t = op.infer(in_types, **attrs)
    t = tuple(t) if isinstance(t, (tuple, list)) else (t,)
    if key is not None and op.pure:
        if len(_INFER_CACHE) >= _INFER_CACHE_SIZE:
            _INFER_CACHE.clear()
        _INFER_CACHE[key] = t
    return t


def run_node(n: Node, arrays) -> tuple:
    """Apply ``n``'s numpy reference to ``arrays``: one array per output, each of the
    dtype ``n.types`` says (a reference may return a wider dtype or a scalar)."""
    res = n.op.forward(*arrays, **dict(n.attrs))
    res = res if len(n.outputs) > 1 else (res,)
    out = []
    for r, t in zip(res, n.types):
        r = np.asarray(r)
        out.append(r if dtype_name(r.dtype) == t.dtype else r.astype(t.dtype))
    return tuple(out)


# ---------------------------------------------------------------------------
# Symbolic sizes


def _substitute(v, values: dict):
    """``v`` (an attribute, a Type, a size) with every symbolic size evaluated."""
    if isinstance(v, Dim):
        return v.evaluate(values)
    if isinstance(v, Type):
        if not v.symbolic:
            return v
        return Type(tuple(_substitute(d, values) for d in v.shape), v.dtype)
    if type(v) is tuple:
        return tuple(_substitute(x, values) for x in v)
    return v


def is_symbolic(g: "Graph") -> bool:
    """Whether some type or attribute of ``g`` holds a symbolic size."""
    def sym(v):
        if isinstance(v, Dim):
            return True
        if isinstance(v, Type):
            return v.symbolic
        return type(v) is tuple and any(sym(x) for x in v)

    if any(t.symbolic for t in g.input_types):
        return True
    return any(any(t.symbolic for t in n.types) or any(sym(v) for _, v in n.attrs)
               for n in g.nodes)


class ConcretizeError(ValueError):
    """The sizes of a call do not fit a graph traced with symbolic sizes (``.node``)."""

    def __init__(self, msg, node=None):
        super().__init__(msg)
        self.node = node


def concretize(g: "Graph", values: dict) -> "Graph":
    """``g`` for one binding of its symbolic sizes (root symbol -> int): every size
    substituted, every type inferred again from the concrete inputs (the op's own rule
    checks them: a call whose arrays do not fit raises :class:`ConcretizeError` naming
    the op), and every op computed from types alone (``from_types``) a constant."""
    types = {}
    in_types = tuple(_substitute(t, values) for t in g.input_types)
    types.update(zip(g.inputs, in_types))
    nodes = []
    const = OP_TABLE.get("const")
    for n in g.nodes:
        attrs = tuple((k, _substitute(v, values)) for k, v in n.attrs)
        ins = [types[i] for i in n.inputs]
        if n.op.from_types is not None:
            arr = np.asarray(n.op.from_types(ins, **dict(attrs)), dtype=n.types[0].dtype)
            nodes.append(Node(const, (), n.outputs, (("value", Const(arr)),),
                              (Type(arr.shape, n.types[0].dtype),), n.loc))
            types[n.outputs[0]] = nodes[-1].types[0]
            continue
        try:
            out = tuple(infer_types(n.op, ins, dict(attrs)))
        except (ValueError, TypeError, IndexError) as e:
            raise ConcretizeError(
                f"{n.op.name}: {e} [inputs: {', '.join(map(str, ins))}]", n) from None
        types.update(zip(n.outputs, out))
        nodes.append(Node(n.op, n.inputs, n.outputs, attrs, out, n.loc))
    return Graph(g.inputs, in_types, tuple(nodes), g.outputs, g.name, g.input_names)


# ---------------------------------------------------------------------------
# Printing


def _fmt_attr(v) -> str:
    if isinstance(v, Graph):
        return f"<graph {len(v.nodes)} nodes>"
    if isinstance(v, tuple) and v and v[0] == "slice":
        return "{}:{}:{}".format(*("" if x is None else x for x in v[1:]))
    return repr(v)


def print_graph(g: Graph, show_loc: bool = False, notes: dict | None = None) -> str:
    """One line a node, like a jaxpr::

        graph grad(%0: f32[3], %1: f32[3]) {
          %2 = multiply %0, %1              : f32[3]
          return %2
        }

    ``notes``: value id -> a comment for the line of the node that computes it first
    (``explain()`` names the kernel that runs each node).
    """
    args = ", ".join(f"%{v}: {t}" for v, t in zip(g.inputs, g.input_types))
    lines = [f"graph {g.name}({args}) {{"]
    for n in g.nodes:
        outs = ", ".join(f"%{o}" for o in n.outputs)
        ins = ", ".join(f"%{i}" for i in n.inputs)
        attrs = ""
        shown = [(k, v) for k, v in n.attrs if not isinstance(v, Graph)]
        if shown:
            attrs = " {" + ", ".join(f"{k}={_fmt_attr(v)}" for k, v in shown) + "}"
        lhs = f"  {outs} = {n.op.name}{' ' + ins if ins else ''}{attrs}"
        tys = ", ".join(str(t) for t in n.types)
        line = f"{lhs:<36} : {tys}"
        note = notes.get(n.outputs[0]) if notes and n.outputs else None
        if note:
            line += f"    # {note}"
        if show_loc and n.loc:
            loc = n.loc if isinstance(n.loc, str) else f"{n.loc[0]}:{n.loc[1]}"
            line += f"    # {loc}"
        lines.append(line)
        sub = [v for _, v in n.attrs if isinstance(v, Graph)]
        for s in sub:  # a fused kernel's body, indented under its node
            lines.extend("    | " + ln for ln in print_graph(s, show_loc).splitlines())
    lines.append("  return " + ", ".join(f"%{o}" for o in g.outputs))
    lines.append("}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Verification


class GraphError(ValueError):
    """A graph broke one of the IR's invariants."""


def _context(g: Graph, idx: int) -> str:
    lo, hi = max(0, idx - 5), min(len(g.nodes), idx + 5)
    sub = Graph(g.inputs, g.input_types, g.nodes[lo:hi], (), g.name)
    return print_graph(sub)


def verify(g: Graph, check_types: bool = True) -> None:
    """Check the graph's invariants; raise :class:`GraphError` naming the bad node.

    Each value is defined once, before use; every output is defined; every
    node's types equal its op's ``infer``; every node's input count fits its op.
    """
    defined = {}
    for v, t in zip(g.inputs, g.input_types):
        if v in defined:
            raise GraphError(f"input %{v} defined twice")
        defined[v] = t
    for idx, n in enumerate(g.nodes):
        if not isinstance(n.op, OpDef):
            raise GraphError(f"node {idx} has no OpDef: {n.op!r}\n{_context(g, idx)}")
        if n.op.nin is not None and len(n.inputs) != n.op.nin:
            raise GraphError(
                f"{n.op.name} takes {n.op.nin} inputs, node has {len(n.inputs)}\n{_context(g, idx)}"
            )
        for i in n.inputs:
            if i not in defined:
                raise GraphError(f"%{i} used by {n.op.name} before definition\n{_context(g, idx)}")
        if len(n.types) != len(n.outputs):
            raise GraphError(f"{n.op.name}: {len(n.outputs)} outputs, {len(n.types)} types")
        if check_types:
            try:
                want = infer_types(n.op, [defined[i] for i in n.inputs], dict(n.attrs))
            except Exception as e:  # the op's own rule rejects its inputs
                raise GraphError(f"{n.op.name}: {e}\n{_context(g, idx)}") from None
            if tuple(want) != tuple(n.types):
                got = ", ".join(map(str, n.types))
                exp = ", ".join(map(str, want))
                raise GraphError(f"{n.op.name}: type {got}, op infers {exp}\n{_context(g, idx)}")
        for o, t in zip(n.outputs, n.types):
            if o in defined:
                raise GraphError(f"%{o} defined twice\n{_context(g, idx)}")
            defined[o] = t
    for o in g.outputs:
        if o not in defined:
            raise GraphError(f"output %{o} is never defined")


# IR text (dump_graph / parse_graph) lives in ir_text; its names are here too
from .ir_text import IR_TEXT_VERSION, GraphTextError, dump_graph, parse_graph  # noqa: E402,F401
