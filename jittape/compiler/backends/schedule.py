"""The scheduler: an optimized graph becomes a kernel IR module (``kernel_ir.py``).

Backend-neutral: it decides the loop nests, the loads and stores, the accumulators and
the entry program; a dialect's printer (``numba_cpu.py``) writes them as source. The
backend's lowering table (``lowering(op) -> rule``) says which of this module's rules
lowers each op; the bodies of fused kernels are in ``schedule_fused.py``, the kernels
of unfused ops in ``schedule_ops.py`` (both mixins of ``Scheduler``).

- One loop nest per fused group; inputs broadcast by index arithmetic (``a1[0, i1]``),
  no temporaries. Reductions carry their elementwise prologue and epilogue; a
  reduction over trailing axes keeps a scalar accumulator, others accumulate into an
  array in loop order. Matmuls call the library's GEMM, then run their epilogue in
  place over the product.
- Shape ops are views in the entry (``reshape``, ``transpose``, slices); a
  ``broadcast_to`` feeding a kernel is not materialised at all.
- Loops whose iterations are independent are marked parallel; a kernel whose work is
  at least ``PARALLEL_MIN`` element-ops is ``threaded`` (a dialect writes a threaded
  variant too).
- Every name is given out here, by scopes that follow the graph's structure (never its
  value ids): two graphs of one structure give the same module.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..ir import Graph, Node, freeze_attrs
from .emit import Unsupported, literal
from .kernel_ir import Alloc, Call, Dim, Fill, Kernel, Module, Store, View, table_offsets
from .kernel_names import (  # noqa: F401 - fmt_key, input_params: also schedule's
    _DIMS, _KERNEL, Names, _contig, _dims, _dprod, _gstr, _prod, _tstr, fmt_key,
    input_params,
)
from .schedule_fused import PARALLEL_MIN, FusedKernels  # noqa: F401 - PARALLEL_MIN: also schedule's
from .schedule_ops import OpKernels
from .schedule_window import INDEXED_ONLY, WindowKernels
from .schedule_pool import PoolKernels


class _Operand:
    __slots__ = ("var", "shape", "contig")

    def __init__(self, var, shape, contig):
        self.var, self.shape, self.contig = var, tuple(shape), contig


def _wrap(n: Node, kind: str, types: dict, **attrs) -> Node:
    """A single unfused node as a fused node of its own (one code path for all)."""
    from passes import FUSED

    ins = tuple(dict.fromkeys(n.inputs))
    body = Graph(ins, tuple(types[i] for i in ins), (n,), n.outputs, f"{n.op.name}_kernel")
    return Node(FUSED, ins, n.outputs, freeze_attrs(dict(attrs, body=body, kind=kind)),
                n.types, n.loc)


class Scheduler(FusedKernels, OpKernels, WindowKernels, PoolKernels):
    """Builds the kernel IR module for one graph. ``lowering(op)`` is the backend's
    table: the name of the rule here that lowers ``op``, or None (no lowering)."""

    # rules that write entry code (views, literals) or hand on to ``fused``; the others
    # write a kernel of their own
    ENTRY_RULES = frozenset({
        "fused", "op_const", "op_fill", "op_reshape", "op_transpose", "op_broadcast_to",
        "op_strided_slice", "op_matmul", "alias", "elementwise", "reduction", "from_types",
    })

    def __init__(self, graph: Graph, lowering):
        self.g = graph
        self.lowering = lowering
        self.types = graph.types()
        self.mod = Module(graph.name, len(graph.nodes))
        self.kinfo: list = []  # (name, description) per kernel call
        self.kernel_names: dict = {}  # kernel -> its name (one function per kernel)
        self.entry = self.mod.entry
        self.names = Names()  # the entry's names
        self.params: list = []
        self.consts: list = []  # const arrays fed to the entry
        self.val: dict = {}  # value id -> _Operand in the entry
        self.base: dict = {}  # value id -> _Operand a broadcast_to value views
        plan = graph.buffers
        self.slot_of = plan.slot_of() if plan is not None else {}
        self.slots = list(plan.slots) if plan is not None else []
        self._node = None
        self.out_pos: dict = {}
        for k, o in enumerate(graph.outputs):
            self.out_pos.setdefault(o, k)

    # -- entry-level values --------------------------------------------------
    def dest(self, v) -> str:
        """The array a kernel writes value ``v`` into (declared in the entry)."""
        saved, _KERNEL[0] = _KERNEL[0], None  # entry code, also when a kernel asks
        try:
            return self._dest(v)
        finally:
            _KERNEL[0] = saved

    def _dest(self, v) -> str:
        t = self.types[v]
        k = self.out_pos.get(v)
        home = self.homes.get(v)
        if home is not None:  # written where a concat (for a collective) would copy it
            buf, off = home
            base = self.gather_buffer(buf)
            name = self.names.value("t", v)
            self.entry.append(View(name, base, "range", (off, _dims(t.shape))))
            self.val[v] = _Operand(name, t.shape, True)
            return name
        if k is not None:
            name = f"o{k}"
        else:
            name = self.names.value("t", v)
            s = self.slot_of.get(v)
            if s is not None and t.rank > 0:
                self.entry.append(View(name, f"slot_{s}", "slot",
                                       (_dprod(t.shape), _dims(t.shape))))
            else:
                self.entry.append(Alloc(name, _dims(t.shape), t.dtype))
        self.val[v] = _Operand(name, t.shape, True)
        return name

    def gather_buffer(self, v) -> str:
        """The entry's array of concat output ``v`` (viewed when the first value is
        written into it, ``plan_homes``): its buffer slot, which no other value shares
        (``passes.buffers.gathered``)."""
        op = self.val.get(v)
        if op is None:
            t = self.types[v]
            name = self.names.value("t", v)
            self.entry.append(View(name, f"slot_{self.slot_of[v]}", "slot",
                                   (_dprod(t.shape), _dims(t.shape))))
            op = self.val[v] = _Operand(name, t.shape, True)
        return op.var

    def operand(self, v) -> _Operand:
        """How a kernel reads ``v``: the array itself, or what a broadcast views."""
        b = self.base.get(v)
        return b if b is not None else self.val[v]

    def contiguous(self, v) -> str:
        op = self.val[v]
        if op.contig or len(op.shape) == 0:
            return op.var
        return f"np.ascontiguousarray({op.var})"

    # -- the whole graph ---------------------------------------------------------
    def build(self) -> Module:
        _DIMS.clear()
        try:
            return self._build()
        finally:
            _DIMS.clear()
            _KERNEL[0] = None

    @contextlib.contextmanager
    def kernel_scope(self):
        """Names for the kernel written inside: its values, and its dims as parameters
        (``kernel`` reads both). Entry code written meanwhile (``dest``) is outside."""
        saved, _KERNEL[0] = _KERNEL[0], Names()
        try:
            yield _KERNEL[0]
        finally:
            _KERNEL[0] = saved

    @property
    def scope(self) -> Names:
        """The names of the kernel being written (``kernel_scope``)."""
        return _KERNEL[0]

    def kname(self, prefix: str, vid) -> str:
        """A value's name in the kernel being written."""
        return self.scope.value(prefix, vid)

    def _build(self) -> Module:
        g = self.g
        names = input_params(g)
        for k, v in enumerate(g.inputs):
            self.params.append(names[k])
            self.val[v] = _Operand(names[k], self.types[v].shape, True)
            for j, size in enumerate(self.types[v].shape):
                if size > 1 and size not in _DIMS:
                    _DIMS[size] = f"D{len(_DIMS)}"
                    self.entry.append(Dim(_DIMS[size], names[k], j))
        self.homes = self.plan_homes()
        for n in g.nodes:
            self.node(n)
        for k, o in enumerate(g.outputs):
            src = self.val[o]
            if src.var != f"o{k}":
                if self.types[o].rank == 0:
                    self.entry.append(Store(f"o{k}", (), f"{src.var}[()]"))
                else:
                    self.entry.append(Store(f"o{k}", ("...",), src.var))
        # constants and buffer slots come through one table (``bp``: per array its
        # address and dims, made once per program), viewed at the entry's start: an
        # array parameter each would cost the entry's compile about 10 ms apiece
        buffers = [(f"c{k}", c.dtype.name, c.ndim, True) for k, c in enumerate(self.consts)]
        buffers += [(f"slot_{k}", np.dtype(d).name, 1, False)
                    for k, (d, _n) in enumerate(self.slots)]
        offsets = table_offsets([nd for _, _, nd, _ in buffers])
        self.entry[:0] = [View(name, "bp", "table", (off, dt, nd, ro))
                          for (name, dt, nd, ro), off in zip(buffers, offsets)]
        self.mod.params = tuple(self.params + ["bp"] + [f"o{k}" for k in range(len(g.outputs))])
        self.mod.calls = len(self.kinfo)
        return self.mod

    def node(self, n: Node):
        self._node = n  # kernel() notes which node each call computes
        rule = self.lowering(n.op)
        if rule is None:
            raise Unsupported(n.op.name, n.op.interpret_only
                              or "the backend has no lowering for it")
        if rule not in self.ENTRY_RULES:
            with self.kernel_scope():  # a kernel of its own
                getattr(self, rule)(n)
        else:
            getattr(self, rule)(n)

    # -- lowerings that write entry code (views, literals) or hand on to fused() ---------
    def alias(self, n: Node):
        self.val[n.outputs[0]] = self.val[n.inputs[0]]
        if n.inputs[0] in self.base:
            self.base[n.outputs[0]] = self.base[n.inputs[0]]

    def op_const(self, n: Node):
        a = dict(n.attrs)["value"].array
        k = len(self.consts)
        self.consts.append(_contig(a))
        self.val[n.outputs[0]] = _Operand(f"c{k}", a.shape, True)

    def from_types(self, n: Node):
        """``shape``, ``size``: the value from the input types, as a constant."""
        arr = np.asarray(n.op.from_types([self.types[i] for i in n.inputs], **n.attr_dict),
                         dtype=n.types[0].dtype)
        k = len(self.consts)
        self.consts.append(_contig(arr))
        self.val[n.outputs[0]] = _Operand(f"c{k}", arr.shape, True)

    def op_reshape(self, n: Node):
        x, o, t = n.inputs[0], n.outputs[0], n.types
        var = self.names.value("t", o)
        self.entry.append(View(var, self.contiguous(x), "reshape", _dims(t[0].shape)))
        self.val[o] = _Operand(var, t[0].shape, True)

    def op_transpose(self, n: Node):
        x, o, t = n.inputs[0], n.outputs[0], n.types
        perm = tuple(int(p) for p in dict(n.attrs)["perm"])
        var = self.names.value("t", o)
        self.entry.append(View(var, self.val[x].var, "transpose", perm))
        self.val[o] = _Operand(var, t[0].shape, perm == tuple(range(len(perm))))

    def op_broadcast_to(self, n: Node):
        x, o, t = n.inputs[0], n.outputs[0], n.types
        src = self.operand(x)
        self.base[o] = src
        var = self.names.value("t", o)
        self.entry.append(View(var, src.var, "broadcast", _dims(t[0].shape)))
        self.val[o] = _Operand(var, t[0].shape, tuple(src.shape) == tuple(t[0].shape)
                               and src.contig)

    def op_strided_slice(self, n: Node):
        x, o, t = n.inputs[0], n.outputs[0], n.types
        var = self.names.value("t", o)
        key = fmt_key(dict(n.attrs)["key"])
        if t[0].rank == 0:  # all integers: Numba would give a scalar, not an array
            self.entry.append(Alloc(var, (), t[0].dtype))
            self.entry.append(Store(var, (), f"{self.val[x].var}[{key}]"))
            self.val[o] = _Operand(var, (), True)
            return
        self.entry.append(View(var, self.val[x].var, "index", (key,)))
        self.val[o] = _Operand(var, t[0].shape, False)

    def op_fill(self, n: Node):
        o, t = n.outputs[0], n.types
        d = self.dest(o)
        self.entry.append(Fill(d, literal(dict(n.attrs)["value"], t[0].dtype), "fill"))

    def elementwise(self, n: Node):
        if len(n.outputs) != 1:
            raise Unsupported(n.op.name, "an elementwise op with several outputs")
        self.fused(_wrap(n, "loop", self.types, space=n.types[0].shape))

    def reduction(self, n: Node):
        a = dict(n.attrs)
        space = self.types[n.inputs[0]].shape
        self.fused(_wrap(n, "reduction", self.types, space=space, axes=tuple(a["axis"]),
                         keepdims=bool(a["keepdims"]), rspace=n.types[0].shape))

    def op_matmul(self, n: Node):
        self.fused(_wrap(n, "matmul", self.types, space=n.types[0].shape))

    # -- kernels ---------------------------------------------------------------
    def kernel(self, desc, args: list, body: list, threaded: bool,
               fastmath: bool | None = None, comment=None, imports: tuple = ()):
        """Add one kernel and its call from the entry. ``desc(tstr)`` describes it with
        types printed by ``tstr``: concretely for ``explain()``, with the kernel's names
        for its sizes as its comment (unless ``comment`` is given).

        Each kernel's names are its own (sizes ``d0, d1``, values renumbered), so two
        kernels of the same structure are equal: written, and compiled, once (the Adam
        update of every weight matrix, say) and called for each.

        Called inside ``kernel_scope``, whose names ``body`` uses; the loads it hoisted
        (``Names.top``) go first."""
        scope = self.scope
        body = tuple(scope.top) + tuple(body)
        dims = list(scope.dims)  # module dims the kernel takes, in the order it asked
        params = tuple([p for p, _ in args] + [scope.dims[dn] for dn in dims])
        if comment is None:
            scope.frozen = True  # the comment names the kernel's dims, and adds none
            try:
                comment = desc(_gstr)
            finally:
                scope.frozen = False
        call_args = tuple([a for _, a in args] + dims)
        proto = Kernel("", params, comment, body, threaded, fastmath, imports)
        name = self.kernel_names.get(proto)
        if name is None:
            name = self.kernel_names[proto] = f"k{len(self.mod.kernels)}"
            self.mod.kernels.append(
                Kernel(name, params, comment, body, threaded, fastmath, imports))
        saved, _KERNEL[0] = _KERNEL[0], None
        try:
            self.kinfo.append((name, desc(_tstr)))
        finally:
            _KERNEL[0] = saved
        self.entry.append(Call(name, call_args, threaded, len(self.kinfo) - 1))
        self.mod.call_values.append(self._node.outputs[0] if self._node.outputs else None)

    def fused(self, n: Node):
        from passes import body_phases

        a = n.attr_dict
        body, kind = a["body"], a["kind"]
        phases = body_phases(n)
        space = tuple(a["space"])
        btypes = body.types()
        args = []  # (param, entry expression)
        env_in = {}  # body input / const leaf id -> (param, shape)
        mm_inputs, hero_inputs = set(), set()
        if kind == "matmul":
            for b in body.nodes:
                if b.op.kind == "matmul":
                    mm_inputs.update(b.inputs)
                elif b.op.epilogue:  # a window op reshapes some operands: contiguous ones
                    free = INDEXED_ONLY.get(b.op.name, ())
                    hero_inputs.update(i for j, i in enumerate(b.inputs) if j not in free)
        for j, (bv, v) in enumerate(zip(body.inputs, n.inputs)):
            if bv in hero_inputs:
                op = _Operand(self.contiguous(v), self.val[v].shape, True)
            elif bv in mm_inputs and v in self.base:
                # a GEMM needs the broadcast materialised (index arithmetic is for loops)
                op = _Operand(f"np.ascontiguousarray({self.val[v].var})", self.val[v].shape,
                              True)
            else:
                op = self.operand(v)
            p = f"a{j}"
            args.append((p, op.var))
            env_in[bv] = (p, op.shape)
        for b in body.nodes:
            # float constants are arguments, not literals: a value that depends on a
            # size (the 1/N of a mean's gradient) must not change the source
            if b.op.literal == "array" and (b.types[0].size != 1 or b.types[0].is_float):
                arr = dict(b.attrs)["value"].array
            elif (b.op.literal == "uniform" and b.types[0].is_float
                  and b.outputs[0] not in mm_inputs):
                arr = np.asarray(dict(b.attrs)["value"], dtype=b.types[0].dtype)
            else:
                continue
            k = len(self.consts)
            self.consts.append(_contig(arr))
            p = f"b{len(args)}"
            args.append((p, f"c{k}"))
            env_in[b.outputs[0]] = (p, arr.shape)
        outs = []
        for j, o in enumerate(n.outputs):
            d = self.dest(o)
            p = f"r{j}"
            args.append((p, d))
            outs.append((body.outputs[j], p, btypes[body.outputs[j]].shape))
        ops = ", ".join(b.op.name for b in body.nodes if b.op.literal is None)
        dt = n.types[0].dtype
        flat = self._flatten(kind, space, args, env_in, outs)
        if flat is not None:
            args, env_in, outs, space, saved_dim = flat
        # transcendental helpers cost several arithmetic ops each
        heavy = sum(1 for b in body.nodes if b.op.cost == "transcendental")
        work = _prod(space) * (1 + 4 * heavy)
        self.hero_desc = None  # a window op's description (matmul_body sets it)
        with self.kernel_scope():
            if kind == "loop":
                stmts, threaded = self.loop_body(body, phases, env_in, outs, space, work)
            elif kind == "reduction":
                stmts, threaded = self.reduction_body(body, phases, env_in, outs, a, work)
            else:
                stmts, threaded = self.matmul_body(body, phases, env_in, outs, space, work)
            hero = self.hero_desc
            if hero is not None:
                rest = ", ".join(b.op.name for b in body.nodes
                                 if b.op.literal is None and not b.op.epilogue)
                self.kernel(lambda ts: f"{hero(ts)}, then {rest}", args, stmts, threaded)
                return
            if flat is None:
                axes = f" reducing axes {list(a['axes'])}" if kind == "reduction" else ""
                self.kernel(lambda ts: f"{kind} over {ts(space, dt)}{axes}: {ops}",
                            args, stmts, threaded)
                return
            size, before = saved_dim
            if before is None:
                _DIMS.pop(size, None)
            else:
                _DIMS[size] = before
            full = tuple(a["space"])
            self.kernel(lambda ts: f"{kind} over {ts(full, dt)}, flat: {ops}", args, stmts,
                        threaded, comment=f"flat loop over {_tstr((), dt)[:-1]}n]: {ops}")


def schedule(graph: Graph, lowering) -> tuple:
    """The kernel IR module for ``graph``, the constant arrays its entry takes, and
    ``(kernel name, description)`` per kernel call."""
    s = Scheduler(graph, lowering)
    mod = s.build()
    return mod, s.consts, s.kinfo
