"""The Numba CPU backend: an optimized graph becomes one generated Python module of
``@njit`` kernels and one entry point that runs them all.

The path of one op, ``jt.tanh(x)`` in a backward graph::

    tanh node  --passes.fuse-->  fused loop node (body: ..., tanh, ...)
               --emit.emit_values-->  "v7 = _vm.jt_tanh(v5)  # tanh"
               --_Gen.loop-->  for i0 in prange(1000000): ... inside def k0(...)
               --entry-->  def entry(in0, ..., o0): k0(in0, ..., o0)

- One loop nest per fused group; inputs broadcast by index arithmetic (``a1[0, i1]``),
  no temporaries. Reductions carry their elementwise prologue and epilogue; a
  reduction over trailing axes keeps a scalar accumulator, others accumulate into
  an array in loop order. Contractions call BLAS (``np.dot`` inside nopython code),
  then run their epilogue in place over the product.
- Shape ops are views in the entry (``reshape``, ``transpose``, slices); a
  ``broadcast_to`` feeding a kernel is not materialised at all.
- Large iteration spaces use ``prange`` (``parallel=True``); small ones do not.
- Every kernel says in a comment which ops it holds.
- The entry takes every array as an argument (inputs, constants, buffers of the
  buffer plan, outputs), so the module has no closures or dynamic globals and
  Numba's on-disk cache (``cache=True``) serves it to the next process.

A graph that cannot be compiled runs on ``interpret`` with one warning naming the op.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import sys
import threading
import time
import warnings

import numpy as np

from .. import cache as _cache
from ..ir import Graph, Node, decode_index, freeze_attrs
from . import blas
from . import runtime as _runtime
from .emit import (
    GENERATOR_VERSION, REDUCE_INIT, Unsupported, emit_values, literal, np_type, reduce_step,
)

# Iteration spaces at least this large (in element-ops) run their outer loop on threads.
PARALLEL_MIN = int(os.environ.get("JITTAPE_PARALLEL_MIN", 1 << 16))


def _fastmath():
    """Kernels' fast-math flags: reassociation (needed for vectorized reductions) and
    contraction to FMA, never ``nnan``/``ninf``, so NaN and Inf keep their meaning.
    ``JITTAPE_FASTMATH=0`` turns them off."""
    if os.environ.get("JITTAPE_FASTMATH", "1") in ("0", "", "false"):
        return "False"
    return '{"reassoc", "contract"}'


blas.limit_threads()


# ---------------------------------------------------------------------------
# Code generation


_TYPE_TEXT = re.compile(r"\b([a-z]+\d*)\[([\d,]*)\]")


def _generic(desc: str) -> str:
    """A kernel description with its shapes' dims named as in the source
    (``f32[D0,128]``), so that the comment does not change with a batch size."""
    return _TYPE_TEXT.sub(
        lambda m: f"{m.group(1)}[" + ",".join(_d(x) for x in m.group(2).split(",") if x)
        + "]", desc)



_ZERO_D_LOAD = re.compile(r"^[xy]\d+ = [ab]\d+\[\(\)\]$")


class _Names:
    """The names of one scope of generated code (a kernel, or the entry), given out as
    the generator asks for them: ``value("v", 812)`` is ``v0`` the first time a kernel
    asks for a ``v``, and the same name whenever it asks again. The order of asking
    follows the graph's structure, never its value ids, so two graphs (or two kernels)
    of one structure give the same text, and no name is ever patched into emitted text
    afterwards (that would rewrite the user's strings too)."""

    __slots__ = ("of", "count", "dims", "frozen")

    def __init__(self):
        self.frozen = False  # dim() answers only the dims asked for already
        self.of: dict = {}  # (prefix, value id) -> name
        self.count: dict = {}  # prefix -> names given
        self.dims: dict = {}  # the module's dim name (D3) -> this kernel's (d0), in order

    def value(self, prefix: str, vid) -> str:
        key = (prefix, vid)
        name = self.of.get(key)
        if name is None:
            k = self.count.get(prefix, 0)
            self.count[prefix] = k + 1
            name = self.of[key] = f"{prefix}{k}"
        return name

    def dim(self, module_name: str) -> str:
        name = self.dims.get(module_name)
        if name is None:
            if self.frozen:
                return module_name
            name = self.dims[module_name] = f"d{len(self.dims)}"
        return name


# ---------------------------------------------------------------------------
# The lowering table: how each op reaches generated code. Ops with a rule of their own
# by name; the rest by what their record says (an alias, an elementwise op with its
# scalar expression, a reduction with its monoid, a value from the input types). An op
# that has none must say in its record why it runs on ``interpret`` only; the registry
# asks ``check_lowering`` for every op, at this module's import and at each later
# ``defop``, so an op without a rule can never reach a wrong code path.

_OP_RULES = {
    "fused": "fused",
    "const": "op_const",
    "fill": "op_fill",
    "reshape": "op_reshape",
    "transpose": "op_transpose",
    "broadcast_to": "op_broadcast_to",
    "strided_slice": "op_strided_slice",
    "matmul": "op_matmul",  # a GEMM call (np.dot in nopython code)
    "argmax": "op_argmax",
    "argmin": "op_argmin",
    "gather": "op_gather",
    "scatter_add": "op_scatter_add",
    "one_hot": "op_one_hot",
    "concat": "op_concat",
    "strided_slice_grad": "op_strided_slice_grad",
    "check_numerics": "op_check_numerics",
}
# rules that write entry code (views, literals) or hand on to ``_Gen.fused``; the
# others write a kernel of their own
_ENTRY_RULES = frozenset({
    "fused", "op_const", "op_fill", "op_reshape", "op_transpose", "op_broadcast_to",
    "op_strided_slice", "op_matmul", "alias", "elementwise", "reduction", "from_types",
})


def lowering(op) -> str | None:
    """The name of the ``_Gen`` method that lowers ``op``, or None (interpret only)."""
    rule = _OP_RULES.get(op.name)
    if rule is not None:
        return rule
    if op.interpret_only is not None:
        return None
    if op.view == "alias":
        return "alias"
    if op.kind == "elementwise" and op.scalar is not None:
        return "elementwise"
    if op.kind == "reduction" and op.monoid is not None:
        return "reduction"
    if op.from_types is not None:
        return "from_types"
    return None


def check_lowering(op) -> None:
    """Raise when ``op`` has no lowering here and does not say why it has none."""
    if lowering(op) is None and op.interpret_only is None:
        raise ValueError(
            f"op {op.name!r} (kind {op.kind!r}) has no lowering on the cpu backend: add a "
            "rule to the lowering table in jittape/backends/cpu.py, or declare in its "
            "record why it runs on interpret only (interpret_only='...')")


def _check_registry() -> None:
    from ..ops.registry import LOWERING_CHECKS, REGISTRY

    for op in list(REGISTRY.values()):
        check_lowering(op)
    if check_lowering not in LOWERING_CHECKS:
        LOWERING_CHECKS.append(check_lowering)


_check_registry()


class _Call:
    """A kernel call in the entry; ``entry_par`` calls the ``_par`` variant."""

    __slots__ = ("name", "parallel", "args")

    def __init__(self, name, parallel, args):
        self.name, self.parallel, self.args = name, parallel, args

    def render(self, suffix: str) -> str:
        return f"{self.name}{suffix if self.parallel else ''}({', '.join(self.args)})"



# Dimension names of the module being generated: size -> name (``D0``...). Sizes are
# named after the entry's input dims (``D0 = in0.shape[0]``), so the source does not
# change with them: a new batch size generates the same module, and Numba's compiled
# code (in memory and on disk) serves it. Only one module is generated at a time
# (``program`` holds ``_LOCK``).
_DIMS: dict = {}
# The scope of the kernel being written, while one is (``_Gen.kernel_scope``): inside
# it a module dim is a parameter of the kernel, named by that scope (``d0``).
_KERNEL: list = [None]


def _d(size) -> str:
    """A dimension in generated source: its name, or the literal (0, 1 and sizes no
    input has). Inside a kernel, the kernel's own name for it."""
    size = int(size)
    name = _DIMS.get(size)
    if name is None:
        return str(size)
    scope = _KERNEL[0]
    if scope is not None and name[0] == "D":
        return scope.dim(name)
    return name


def _dprod(sizes) -> str:
    """The product of dims as an expression (``D0 * 10``)."""
    lits, names = 1, []
    for x in sizes:
        n = _d(x)
        if n.isdigit():
            lits *= int(n)
        else:
            names.append(n)
    if lits == 0:
        return "0"
    if lits != 1 or not names:
        names.append(str(lits))
    return " * ".join(names)


def _shape(s) -> str:
    return "(" + "".join(f"{_d(d)}, " for d in s).rstrip(" ") + ")"


def _index(shape, space_vars: list) -> str:
    """Index expression for an operand of ``shape`` read over a loop nest whose
    variables are ``space_vars`` (one per space dim, or a literal ``"0"``): numpy
    broadcasting, right-aligned, size-1 dims read at 0."""
    r, k = len(space_vars), len(shape)
    if k == 0:
        return "()"
    parts = []
    for j, d in enumerate(shape):
        v = space_vars[r - k + j]
        parts.append("0" if d == 1 else v)
    return ", ".join(parts) if k > 1 else parts[0]


def _fmt_key(key) -> str:
    parts = []
    for k in key:
        if isinstance(k, tuple) and k and k[0] == "slice":
            a, b, c = ("" if p is None else str(p) for p in k[1:])
            parts.append(f"{a}:{b}" + (f":{c}" if c else ""))
        elif k == "...":
            parts.append("...")
        elif k == "newaxis":
            parts.append("None")
        else:
            parts.append(str(int(k)))
    if not parts:
        return "..."
    return ", ".join(parts) + ("," if len(parts) == 1 else "")


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


class _Operand:
    __slots__ = ("var", "shape", "contig")

    def __init__(self, var, shape, contig):
        self.var, self.shape, self.contig = var, tuple(shape), contig


class _Gen:
    """Builds the module source for one graph."""

    def __init__(self, graph: Graph):
        self.g = graph
        self.types = graph.types()
        self.kernels: list = []  # source blocks
        self.kinfo: list = []  # (name, description) per kernel call
        self.calls_at: list = []  # index in self.entry of each kernel call
        self.kernel_names: dict = {}  # kernel text -> its name (one function per text)
        self.entry: list = []  # lines (str) and kernel calls (_Call)
        self.names = _Names()  # the entry's names
        self._serial = False  # writing a parallel kernel's serial variant
        self.params: list = []
        self.consts: list = []  # const arrays fed to the entry
        self.val: dict = {}  # value id -> _Operand in the entry
        self.base: dict = {}  # value id -> _Operand a broadcast_to value views
        plan = graph.buffers
        self.slot_of = plan.slot_of() if plan is not None else {}
        self.slots = list(plan.slots) if plan is not None else []
        self.parallel = False  # some kernel has a parallel loop (then: entry_par)
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
        if k is not None:
            name = f"o{k}"
        else:
            name = self.names.value("t", v)
            s = self.slot_of.get(v)
            if s is not None and t.rank > 0:
                self.entry.append(f"{name} = w{s}[:{_dprod(t.shape)}].reshape({_shape(t.shape)})")
            else:
                self.entry.append(f"{name} = np.empty({_shape(t.shape)}, {np_type(t.dtype)})")
        self.val[v] = _Operand(name, t.shape, True)
        return name

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
    def build(self) -> str:
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
        saved, _KERNEL[0] = _KERNEL[0], _Names()
        try:
            yield _KERNEL[0]
        finally:
            _KERNEL[0] = saved

    @property
    def scope(self) -> "_Names":
        """The names of the kernel being written (``kernel_scope``)."""
        return _KERNEL[0]

    @contextlib.contextmanager
    def serial_loops(self):
        """Loops written meanwhile use ``range`` even where they would be parallel."""
        self._serial = True
        try:
            yield
        finally:
            self._serial = False

    def _rng(self, parallel: bool) -> str:
        return "prange" if parallel and not self._serial else "range"

    def kname(self, prefix: str, vid) -> str:
        """A value's name in the kernel being written."""
        return self.scope.value(prefix, vid)

    def _build(self) -> str:
        g = self.g
        for k, v in enumerate(g.inputs):
            self.params.append(f"in{k}")
            self.val[v] = _Operand(f"in{k}", self.types[v].shape, True)
            for j, size in enumerate(self.types[v].shape):
                if size > 1 and size not in _DIMS:
                    _DIMS[size] = f"D{len(_DIMS)}"
                    self.entry.append(f"{_DIMS[size]} = in{k}.shape[{j}]")
        for n in g.nodes:
            self.node(n)
        self._call_site = {at: s for s, at in enumerate(self.calls_at)}
        for k, o in enumerate(g.outputs):
            src = self.val[o]
            if src.var != f"o{k}":
                if self.types[o].rank == 0:
                    self.entry.append(f"o{k}[()] = {src.var}[()]")
                else:
                    self.entry.append(f"o{k}[...] = {src.var}")
        params = (self.params + [f"c{k}" for k in range(len(self.consts))]
                  + [f"w{k}" for k in range(len(self.slots))]
                  + [f"o{k}" for k in range(len(g.outputs))])
        head = [
            f"# jittape generated module: graph {g.name!r}, {len(g.nodes)} nodes, "
            f"{len(self.kernels)} kernels",
            f"# generator {GENERATOR_VERSION}, vector math {_vm_version()}",
            "import math  # noqa: F401",
            "import numpy as np",
            "import numba",
            "from numba import prange  # noqa: F401",
            "from jittape.backends import vmath as _vm  # noqa: F401",
            "from jittape.backends.clock import cycles as _cycles  # noqa: F401",
            "from jittape.errors import InvalidArgumentError  # noqa: F401",
            "",
        ]
        # entry_prof: the same calls with the cycle counter read around each kernel
        # (jt.profiler); Numba compiles it only when a profile is open
        timed = []
        for j, ln in enumerate(self.entry):
            if j in self._call_site:
                s = self._call_site[j]
                timed += [f"tk[{2 * s}] = _cycles()", ln, f"tk[{2 * s + 1}] = _cycles()"]
            else:
                timed.append(ln)
        entry = []
        for fname, suffix, doc, lines, extra in (
                ("entry", "", "in order", self.entry, []),
                ("entry_par", "_par", "in order, loops on threads", self.entry, []),
                ("entry_prof", "", "in order, timing each", timed, ["tk"]),
                ("entry_prof_par", "_par", "on threads, timing each", timed, ["tk"])):
            if suffix and not self.parallel:
                continue
            entry += [
                "",
                "@numba.njit(cache=True, error_model='numpy', nogil=True)",
                f"def {fname}({', '.join(params + extra)}):",
                f'    """Runs the graph\'s {len(self.kernels)} kernels {doc}."""',
            ]
            entry += ["    " + (ln if isinstance(ln, str) else ln.render(suffix))
                      for ln in lines]
            entry += ["    return 0", ""]
        return "\n".join(head + self.kernels + entry)

    def node(self, n: Node):
        rule = lowering(n.op)
        if rule is None:
            raise Unsupported(n.op.name, n.op.interpret_only
                              or "the cpu backend has no lowering for it")
        if rule.startswith("op_") and rule not in _ENTRY_RULES:
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
        self.entry.append(f"{var} = {self.contiguous(x)}.reshape({_shape(t[0].shape)})")
        self.val[o] = _Operand(var, t[0].shape, True)

    def op_transpose(self, n: Node):
        x, o, t = n.inputs[0], n.outputs[0], n.types
        perm = tuple(dict(n.attrs)["perm"])
        var = self.names.value("t", o)
        if perm == (1, 0):  # ``.T`` is typed F-contiguous: BLAS reads it with no copy
            self.entry.append(f"{var} = {self.val[x].var}.T")
        else:
            self.entry.append(f"{var} = np.transpose({self.val[x].var}, {_shape(perm)})")
        self.val[o] = _Operand(var, t[0].shape, perm == tuple(range(len(perm))))

    def op_broadcast_to(self, n: Node):
        x, o, t = n.inputs[0], n.outputs[0], n.types
        src = self.operand(x)
        self.base[o] = src
        var = self.names.value("t", o)
        self.entry.append(f"{var} = np.broadcast_to({src.var}, {_shape(t[0].shape)})")
        self.val[o] = _Operand(var, t[0].shape, tuple(src.shape) == tuple(t[0].shape)
                               and src.contig)

    def op_strided_slice(self, n: Node):
        x, o, t = n.inputs[0], n.outputs[0], n.types
        var = self.names.value("t", o)
        key = dict(n.attrs)["key"]
        if t[0].rank == 0:  # all integers: Numba would give a scalar, not an array
            self.entry.append(f"{var} = np.empty((), {np_type(t[0].dtype)})")
            self.entry.append(f"{var}[()] = {self.val[x].var}[{_fmt_key(key)}]")
            self.val[o] = _Operand(var, (), True)
            return
        self.entry.append(f"{var} = {self.val[x].var}[{_fmt_key(key)}]")
        self.val[o] = _Operand(var, t[0].shape, False)

    def op_fill(self, n: Node):
        o, t = n.outputs[0], n.types
        a = dict(n.attrs)
        d = self.dest(o)
        self.entry.append(f"{d}[...] = {literal(a['value'], t[0].dtype)}  # fill")

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
    def kernel(self, desc: str, args: list, body: list, parallel: bool, fastmath: str | None,
               comment: str | None = None, serial: list | None = None):
        """Add one kernel function and its call from the entry. A kernel with a parallel
        loop is written twice: ``kN`` (serial) for ``entry`` and ``kN_par`` (``prange``,
        ``parallel=True``) for ``entry_par``; the program measures which is faster.

        Each kernel's names are its own (sizes ``d0, d1``, values renumbered), so two
        kernels of the same structure are the same text: it is written, and compiled,
        once (the Adam update of every weight matrix, say) and called for each.

        Called inside ``kernel_scope``, whose names ``body`` uses; ``serial`` is the
        body written with ``range`` loops, for a parallel kernel."""
        fm = _fastmath() if fastmath is None else fastmath
        scope = self.scope
        body, serial = _hoist(body), (None if serial is None else _hoist(serial))
        dims = list(scope.dims)  # module dims the kernel takes, in the order it asked
        params = [p for p, _ in args] + [scope.dims[dn] for dn in dims]
        if comment is None:
            scope.frozen = True  # the comment names the kernel's dims, and adds none
            try:
                comment = _generic(desc)
            finally:
                scope.frozen = False
        call_args = [a for _, a in args] + dims
        if not parallel:
            serial = body
        key = (tuple(body), tuple(serial), tuple(params), fm, parallel, comment)
        name = self.kernel_names.get(key)
        if name is None:
            name = self.kernel_names[key] = f"k{len(self.kernels)}"

            def fn(fname, par, lines):
                src = [
                    f"@numba.njit(cache=True, error_model='numpy', fastmath={fm}, nogil=True, "
                    f"no_cpython_wrapper=True, no_cfunc_wrapper=True{par})",
                    f"def {fname}({', '.join(params)}):",
                    f"    # {comment}",
                ]
                return "\n".join(src + ["    " + ln for ln in lines] + [""])

            block = fn(name, "", serial)
            if parallel:
                block += "\n" + fn(name + "_par", ", parallel=True", body)
                self.parallel = True
            self.kernels.append(block)
        self.kinfo.append((name, desc))
        self.calls_at.append(len(self.entry))
        self.entry.append(_Call(name, parallel, call_args))

    def fused(self, n: Node):
        from passes import body_phases

        a = n.attr_dict
        body, kind = a["body"], a["kind"]
        phases = body_phases(n)
        space = tuple(a["space"])
        btypes = body.types()
        args = []  # (param, entry expression)
        env_in = {}  # body input / const leaf id -> (param, shape)
        mm_inputs = set()
        if kind == "matmul":
            for b in body.nodes:
                if b.op.kind == "matmul":
                    mm_inputs.update(b.inputs)
        for j, (bv, v) in enumerate(zip(body.inputs, n.inputs)):
            if bv in mm_inputs and v in self.base:
                # BLAS needs the broadcast materialised (index arithmetic is for loops)
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
        ops = [b.op.name for b in body.nodes if b.op.literal is None]
        flat = self._flatten(kind, space, args, env_in, outs)
        if flat is not None:
            args, env_in, outs, space, saved_dim = flat
        desc = (f"{kind} over {_tstr(space, n.types[0].dtype)}"
                + (f" reducing axes {list(a['axes'])}" if kind == "reduction" else "")
                + ": " + ", ".join(ops))
        # transcendental helpers cost several arithmetic ops each
        heavy = sum(1 for b in body.nodes if b.op.cost == "transcendental")
        work = _prod(space) * (1 + 4 * heavy)

        def write():
            if kind == "loop":
                return self.loop_body(body, phases, env_in, outs, space, work)
            if kind == "reduction":
                return self.reduction_body(body, phases, env_in, outs, a, work)
            return self.matmul_body(body, phases, env_in, outs, space, work)

        with self.kernel_scope():
            lines, par = write()
            serial = None
            if par:
                # the serial variant: the same kernel written again with range loops
                # (the same questions in the same order give the same names)
                with self.kernel_scope(), self.serial_loops():
                    serial, _ = write()
            if flat is not None:
                size, before = saved_dim
                if before is None:
                    _DIMS.pop(size, None)
                else:
                    _DIMS[size] = before
                desc = (f"{kind} over {_tstr(tuple(a['space']), n.types[0].dtype)}, flat: "
                        + ", ".join(ops))
            comment = None if flat is None else (
                f"flat loop over {_tstr((), n.types[0].dtype)[:-1]}n]: " + ", ".join(ops))
            self.kernel(desc, args, lines, par, None, comment, serial)

    def _flatten(self, kind, space, args, env_in, outs):
        """An elementwise loop whose operands are all contiguous and of its shape (or
        0-d) runs as one flat loop over views of shape ``(N,)``, bounded by its first
        output's length: one loop to vectorize, and the same kernel for every rank and
        size (the Adam update of each weight matrix and each bias vector). None when it
        does not apply."""
        size = _prod(space)
        if kind != "loop" or not space or size <= 1:
            return None
        contig = {o.var for o in self.val.values() if o.contig}
        contig.update(f"c{k}" for k in range(len(self.consts)))
        for _q, shape in env_in.values():
            if tuple(shape) not in ((), tuple(space)):
                return None
        for _bo, _p, shape in outs:
            if tuple(shape) != tuple(space):
                return None
        shapes = {q: tuple(shape) for q, shape in env_in.values()}
        for p, expr in args:
            if shapes.get(p) == ():
                continue
            if expr not in contig:
                return None
        view = f"({_dprod(space)},)"
        new_args = []
        for p, expr in args:
            if len(space) > 1 and (p.startswith("r") or shapes.get(p) == tuple(space)):
                new_args.append((p, f"{expr}.reshape({view})"))
            else:
                new_args.append((p, expr))
        new_env = {k: (q, (size,) if tuple(shape) == tuple(space) else shape)
                   for k, (q, shape) in env_in.items()}
        new_outs = [(bo, p, (size,)) for bo, p, _ in outs]
        saved_dim = (size, _DIMS.get(size))  # fused() puts it back after the kernel
        _DIMS[size] = "r0.shape[0]"
        return new_args, new_env, new_outs, (size,), saved_dim

    def loads(self, nodes, env_in, space_vars, prefix="x"):
        """Assignments loading each body input ``nodes`` read, and the env they give."""
        env, lines = {}, []
        need = []
        for b in nodes:
            for i in b.inputs:
                if i in env_in and i not in need:
                    need.append(i)
        # 0-d operands first: kernel() hoists their loads to the top, and names read in
        # order of appearance there
        need.sort(key=lambda i: len(env_in[i][1]) != 0)
        for i in need:
            p, shape = env_in[i]
            name = env[i] = self.kname(prefix, i)
            lines.append(f"{name} = {p}[{_index(shape, space_vars)}]")
        return env, lines

    def _prologue(self, body, pro, reds, pro_outs, env_in, svars):
        """A reduction's loop body up to the accumulation: loads, prologue values and
        the prologue values that are outputs, indexed over the whole space."""
        readers = pro + reds + _output_readers(body, env_in, pro_outs)
        env, lines = self.loads(readers, env_in, svars)
        lines += emit_values(pro, env, self.kname)
        for bo, p, s in pro_outs:
            lines.append(f"{p}[{_index(s, svars)}] = {env[bo]}")
        return env, lines

    def _epilogue(self, epi, red_env, env, phases, env_in, outs, rvars, write_phases):
        """The epilogue over the reduced shape (``rvars`` index it): the reduced values
        (``red_env``), the literals the prologue named, loads, epilogue values, and the
        writes of outputs in ``write_phases`` (and of body inputs passed through)."""
        env2 = dict(red_env)
        for v, e in env.items():
            if phases.get(v) == "leaf":
                env2[v] = e
        env3, lines = self.loads(epi, env_in, rvars, prefix="y")
        env2.update(env3)
        lines += emit_values(epi, env2, self.kname)
        for bo, p, s in outs:
            if phases.get(bo) in write_phases or (bo in env_in and bo not in env):
                lines.append(f"{p}[{_index(s, rvars)}] = {env2[bo]}")
        return lines

    def loop_nest(self, space, parallel, first=0):
        """Header lines of a loop nest over ``space`` and its index variable names."""
        lines, vars_ = [], []
        for d, size in enumerate(space):
            v = f"i{first + d}"
            rng = self._rng(parallel and d == 0)
            lines.append("    " * d + f"for {v} in {rng}({_d(size)}):")
            vars_.append(v)
        return lines, vars_

    def loop_body(self, body, phases, env_in, outs, space, work):
        par = work >= PARALLEL_MIN and len(space) > 0
        head, vars_ = self.loop_nest(space, par)
        ind = "    " * len(space)
        nodes = [b for b in body.nodes if b.outputs[0] not in env_in]
        env, lines = self.loads([b for b in nodes if phases.get(b.outputs[0]) != "leaf"]
                                + _output_readers(body, env_in), env_in, vars_)
        lines += emit_values(nodes, env, self.kname)
        for bo, p, shape in outs:
            lines.append(f"{p}[{_index(shape, vars_)}] = {env[bo]}")
        return head + [ind + ln for ln in lines], par

    def reduction_body(self, body, phases, env_in, outs, a, work):
        space, axes = tuple(a["space"]), tuple(a["axes"])
        keepdims, rspace = bool(a["keepdims"]), tuple(a["rspace"])
        r = len(space)
        pro = [b for b in body.nodes if phases[b.outputs[0]] in ("pro", "leaf")
               and b.outputs[0] not in env_in]
        reds = [b for b in body.nodes if phases[b.outputs[0]] == "red"]
        epi = [b for b in body.nodes if phases[b.outputs[0]] == "epi"]
        kept = [d for d in range(r) if d not in axes]
        suffix = tuple(axes) == tuple(range(r - len(axes), r))
        out_of = {bo: (p, shape) for bo, p, shape in outs}
        pro_outs = [(bo, p, s) for bo, p, s in outs if phases.get(bo) in ("pro",)]
        sum_only = all(b.op.monoid == "add" for b in reds)

        def rvars(space_vars):
            if keepdims:
                return [space_vars[d] if d in kept else "0" for d in range(r)]
            return [space_vars[d] for d in kept]

        lines: list = []
        if suffix:
            # outer loops over kept dims, a scalar accumulator per reduction inside
            par_outer = bool(kept) and work >= PARALLEL_MIN
            par_inner = not kept and work >= PARALLEL_MIN and sum_only
            head, kvars = [], []
            for j, d in enumerate(kept):
                rng = self._rng(par_outer and j == 0)
                head.append("    " * j + f"for i{d} in {rng}({_d(space[d])}):")
                kvars.append(f"i{d}")
            ind = "    " * len(kept)
            lines += head
            # a float max/min folds with a select and notes NaNs apart: np.maximum's
            # NaN-propagating branches made a 256 x 1000 row max 5x slower
            flagged = {b.outputs[0] for b in reds if b.op.monoid in ("max", "min")
                       and np.dtype(b.types[0].dtype).kind == "f"}
            for b in reds:
                dt = b.types[0].dtype
                acc = self.kname("acc", b.outputs[0])
                lines.append(ind + f"{acc} = {REDUCE_INIT[b.op.monoid](dt)}")
                if b.outputs[0] in flagged:
                    lines.append(ind + f"{self.kname('nan', b.outputs[0])} = False")
            inner = []
            for j, d in enumerate(axes):
                rng = self._rng(par_inner and j == 0)
                inner.append("    " * j + f"for i{d} in {rng}({_d(space[d])}):")
            ind2 = ind + "    " * len(axes)
            svars = [f"i{d}" for d in range(r)]
            env, body_lines = self._prologue(body, pro, reds, pro_outs, env_in, svars)
            for b in reds:
                acc = self.kname("acc", b.outputs[0])
                x = env[b.inputs[0]]
                if b.op.monoid == "add" and b.types[0].dtype != "bool":
                    body_lines.append(f"{acc} += {x}")
                elif b.outputs[0] in flagged:
                    cmp = ">" if b.op.monoid == "max" else "<"
                    body_lines.append(f"{acc} = {x} if {x} {cmp} {acc} else {acc}")
                    body_lines.append(f"{self.kname('nan', b.outputs[0])} |= {x} != {x}")
                else:
                    step = reduce_step(b.op.monoid, acc, x, b.types[0].dtype)
                    body_lines.append(f"{acc} = {step}")
            lines += [ind + ln for ln in inner] + [ind2 + ln for ln in body_lines]
            for b in reds:
                o = b.outputs[0]
                if o in flagged:
                    lines.append(ind + f"if {self.kname('nan', o)}:")
                    lines.append(ind + f"    {self.kname('acc', o)} = "
                                 f"{literal(np.nan, b.types[0].dtype)}")
            red_env = {b.outputs[0]: self.kname("acc", b.outputs[0]) for b in reds}
            tail = self._epilogue(epi, red_env, env, phases, env_in, outs, rvars(svars),
                                  ("red", "epi"))
            lines += [ind + ln for ln in tail]
            return lines, par_outer or par_inner
        # accumulate into arrays of the reduced shape, walking the space in order
        for b in reds:
            o = b.outputs[0]
            dt = b.types[0].dtype
            acc = self.kname("acc", o)
            if o in out_of:
                lines.append(f"{acc} = {out_of[o][0]}")
            else:
                lines.append(f"{acc} = np.empty({_shape(rspace)}, {np_type(dt)})")
            lines.append(f"{acc}[...] = {REDUCE_INIT[b.op.monoid](dt)}")
        par = bool(kept) and kept[0] == 0 and work >= PARALLEL_MIN
        head, svars = self.loop_nest(space, par)
        ind = "    " * r
        env, body_lines = self._prologue(body, pro, reds, pro_outs, env_in, svars)
        rv = rvars(svars)
        ridx = _index(rspace, rv)
        for b in reds:
            acc = f"{self.kname('acc', b.outputs[0])}[{ridx}]"
            step = reduce_step(b.op.monoid, acc, env[b.inputs[0]], b.types[0].dtype)
            body_lines.append(f"{acc} = {step}")
        lines += head + [ind + ln for ln in body_lines]
        # the epilogue over the reduced shape
        ehead, evars = self.loop_nest(rspace, False, first=r)
        eind = "    " * len(rspace)
        eidx = _index(rspace, evars)
        red_env = {b.outputs[0]: f"{self.kname('acc', b.outputs[0])}[{eidx}]" for b in reds}
        tail = self._epilogue(epi, red_env, env, phases, env_in, outs, evars, ("epi",))
        if any(phases.get(bo) == "epi" or bo in env_in for bo, _, _ in outs):
            lines += ehead + [eind + ln for ln in tail]
        return lines, par

    def matmul_body(self, body, phases, env_in, outs, space, work):
        mm = body.nodes[[b.op.kind for b in body.nodes].index("matmul")]
        if lowering(mm.op) != "op_matmul" or mm.attrs:
            # np.dot computes exactly matmul: any other op of kind matmul (or one with
            # attributes) would silently compute the wrong product
            raise Unsupported(mm.op.name, mm.op.interpret_only
                              or "an op of kind matmul this backend has no GEMM rule for")
        lead = [b for b in body.nodes if phases[b.outputs[0]] == "leaf"]
        epi = [b for b in body.nodes if phases[b.outputs[0]] == "epi"]
        lines = []
        prod_of = {b.outputs[0]: b for b in body.nodes}
        operands = []
        for j, i in enumerate(mm.inputs):
            if i in env_in:
                operands.append(env_in[i])
                continue
            leaf = prod_of.get(i)
            if leaf is None or leaf.op.literal is None:
                raise Unsupported("matmul", "an operand computed inside its kernel")
            # a uniform operand (a fill, a one-element constant): materialise it
            t = leaf.types[0]
            env0: dict = {}
            emit_values([leaf], env0, self.kname)
            lines.append(f"mm{j} = np.full({_shape(t.shape)}, {env0[i]})")
            operands.append((f"mm{j}", t.shape))
        (pa, sa), (pb, sb) = operands
        mo = mm.outputs[0]
        out_of = {bo: p for bo, p, _ in outs}
        target = out_of.get(mo)
        if target is None:
            # write the product into the first output (same shape), then the epilogue
            # runs in place over it, element by element
            cands = [p for bo, p, s in outs if tuple(s) == tuple(space)]
            if cands and mm.types[0].dtype == body.types()[outs[0][0]].dtype:
                target = cands[0]
            else:
                target = "prod"
                lines.append(f"prod = np.empty({_shape(space)}, {np_type(mm.types[0].dtype)})")
        batch = space[:-2]
        if not batch:
            lines.append(f"np.dot({pa}, {pb}, {target})")
        else:
            bvars = [f"i{d}" for d in range(len(batch))]
            for d, size in enumerate(batch):
                lines.append("    " * d + f"for i{d} in range({_d(size)}):")
            ind = "    " * len(batch)

            def sub(p, s):
                k = len(s) - 2
                idx = [("0" if s[j] == 1 else bvars[len(batch) - k + j]) for j in range(k)]
                return f"{p}[{', '.join(idx)}]" if idx else p

            lines.append(ind + f"np.dot({sub(pa, sa)}, {sub(pb, sb)}, {sub(target, space)})")
        if epi or any(bo != mo for bo, _, _ in outs):
            par = work >= PARALLEL_MIN
            head, vars_ = self.loop_nest(space, par)
            ind = "    " * len(space)
            env = {mo: self.kname("m", mo)}
            loop = [f"{env[mo]} = {target}[{_index(space, vars_)}]"]
            for b in lead:
                if b.outputs[0] not in env_in:  # a literal (others are arguments)
                    emit_values([b], env, self.kname)
            envl, ld = self.loads(epi, env_in, vars_, prefix="y")
            env.update(envl)
            loop += ld + emit_values(epi, env, self.kname)
            for bo, p, s in outs:
                if p == target and bo == mo:
                    continue
                loop.append(f"{p}[{_index(s, vars_)}] = {env[bo]}")
            lines += head + [ind + ln for ln in loop]
        else:
            par = False
        return lines, par

    # -- ops that are not fused --------------------------------------------------
    def _three(self, shape, axis):
        """The (before, along, after) sizes around ``axis``, as source expressions."""
        return (_dprod(shape[:axis]), _d(shape[axis]) if len(shape) else "1",
                _dprod(shape[axis + 1:]))

    def op_argmax(self, n, cmp=">"):
        (x,), o = n.inputs, n.outputs[0]
        a = dict(n.attrs)
        shape = self.types[x].shape
        ax = int(a["axis"])
        P, N, Q = self._three(shape, ax)
        d = self.dest(o)
        body = [
            f"x = a0.reshape(({P}, {N}, {Q}))",
            f"o = r0.reshape(({P}, {Q}))",
            f"for p in range({P}):",
            f"    for q in range({Q}):",
            "        best = x[p, 0, q]",
            "        at = 0",
            f"        for k in range(1, {N}):",
            "            v = x[p, k, q]",
            f"            if v {cmp} best or (v != v and best == best):",
            "                best = v",
            "                at = k",
            "        o[p, q] = at",
        ]
        self.kernel(f"{n.op.name} over axis {ax} of {_tstr(shape, self.types[x].dtype)}",
                    [("a0", self.contiguous(x)), ("r0", d)], body, False, "False")

    def op_argmin(self, n):
        self.op_argmax(n, "<")

    def op_gather(self, n):
        p_, i_ = n.inputs
        o = n.outputs[0]
        ax = int(dict(n.attrs)["axis"])
        ps = self.types[p_].shape
        P, N, Q = self._three(ps, ax)
        M = _dprod(self.types[i_].shape)
        n_lit = int(ps[ax])
        d = self.dest(o)
        body = [
            f"p = a0.reshape(({P}, {N}, {Q}))",
            f"ix = a1.reshape(({M},))",
            f"o = r0.reshape(({P}, {M}, {Q}))",
            *_index_check("gather", M, N, n_lit),
            f"for pp in range({P}):",
            f"    for m in range({M}):",
            "        j = ix[m]",
            f"        for q in range({Q}):",
            "            o[pp, m, q] = p[pp, j, q]",
        ]
        self.kernel(f"gather along axis {ax} of {_tstr(ps, self.types[p_].dtype)}",
                    [("a0", self.contiguous(p_)), ("a1", self.contiguous(i_)), ("r0", d)],
                    body, False, "False")

    def op_scatter_add(self, n):
        g_, i_ = n.inputs
        o = n.outputs[0]
        a = dict(n.attrs)
        ax, shape = int(a["axis"]), tuple(a["shape"])
        P, N, Q = self._three(shape, ax)
        M = _dprod(self.types[i_].shape)
        n_lit = int(shape[ax])
        d = self.dest(o)
        body = [
            f"g = a0.reshape(({P}, {M}, {Q}))",
            f"ix = a1.reshape(({M},))",
            f"o = r0.reshape(({P}, {N}, {Q}))",
            "o[...] = 0",
            *_index_check("scatter_add", M, N, n_lit),
            f"for pp in range({P}):",
            f"    for m in range({M}):",
            "        j = ix[m]",
            f"        for q in range({Q}):",
            "            o[pp, j, q] += g[pp, m, q]",
        ]
        self.kernel(f"scatter_add along axis {ax} into {_tstr(shape, n.types[0].dtype)}",
                    [("a0", self.contiguous(g_)), ("a1", self.contiguous(i_)), ("r0", d)],
                    body, False, "False")

    def op_one_hot(self, n):
        (i_,), o = n.inputs, n.outputs[0]
        a = dict(n.attrs)
        ishape = self.types[i_].shape
        ax = int(a["axis"])
        ax = len(ishape) if ax < 0 else ax
        depth, dt = int(a["depth"]), n.types[0].dtype
        P, Q = _dprod(ishape[:ax]), _dprod(ishape[ax:])
        d = self.dest(o)
        on, off = literal(a["on_value"], dt), literal(a["off_value"], dt)
        # fill with off_value (a vectorized store), then set one element per index:
        # the select per element ran at a fifth of the memory's speed
        body = [
            f"ix = a0.reshape(({P}, {Q}))",
            f"o = r0.reshape(({P}, {depth}, {Q}))",
            f"flat = r0.reshape(({P} * {depth} * {Q},))",
            "for j in range(flat.shape[0]):",
            f"    flat[j] = {off}",
            f"for p in range({P}):",
            f"    for q in range({Q}):",
            "        k = ix[p, q]",
            f"        if k >= 0 and k < {depth}:",
            f"            o[p, k, q] = {on}",
        ]
        self.kernel(f"one_hot depth {depth} of {_tstr(ishape, self.types[i_].dtype)}",
                    [("a0", self.contiguous(i_)), ("r0", d)], body, False, "False")

    def op_concat(self, n):
        o = n.outputs[0]
        ax = int(dict(n.attrs)["axis"])
        shape = n.types[0].shape
        P, N, Q = self._three(shape, ax)
        d = self.dest(o)
        args = [("r0", d)]
        body = [f"o = r0.reshape(({P}, {N}, {Q}))"]
        off = "0"
        for j, x in enumerate(n.inputs):
            m = _d(self.types[x].shape[ax])
            args.append((f"a{j}", self.contiguous(x)))
            end = m if off == "0" else f"{off} + {m}"
            body.append(f"o[:, {off}:{end}, :] = a{j}.reshape(({P}, {m}, {Q}))")
            off = end
        self.kernel(f"concat along axis {ax} into {_tstr(shape, n.types[0].dtype)}",
                    args, body, False, "False")

    def op_strided_slice_grad(self, n):
        (g_,), o = n.inputs, n.outputs[0]
        a = dict(n.attrs)
        shape, key = tuple(a["shape"]), tuple(a["key"])
        sel = np.empty(shape, dtype=bool)[decode_index(tuple(k for k in key if k != "newaxis"))]
        plain = tuple(k for k in key if k != "newaxis")
        d = self.dest(o)
        body = ["r0[...] = 0", f"r0[{_fmt_key(plain)}] = a0.reshape({_shape(sel.shape)})"]
        self.kernel(f"strided_slice_grad into {_tstr(shape, n.types[0].dtype)}",
                    [("a0", self.contiguous(g_)), ("r0", d)], body, False, "False")

    def op_check_numerics(self, n):
        (x,), o = n.inputs, n.outputs[0]
        t = self.types[x]
        msg = str(dict(n.attrs)["message"])
        if not t.is_float:
            self.val[o] = self.val[x]
            return
        m = {k: repr(f"{msg} : Tensor had {k} values") for k in ("NaN", "Inf", "Inf and NaN")}
        body = [
            "nan = False",
            "inf = False",
            "for v in np.ascontiguousarray(a0).ravel():",
            "    if v != v:",
            "        nan = True",
            "    elif v == np.inf or v == -np.inf:",
            "        inf = True",
            "if nan and inf:",
            f"    raise InvalidArgumentError({m['Inf and NaN']})",
            "if nan:",
            f"    raise InvalidArgumentError({m['NaN']})",
            "if inf:",
            f"    raise InvalidArgumentError({m['Inf']})",
        ]
        self.kernel(f"check_numerics of {t}", [("a0", self.val[x].var)], body, False, "False")
        self.val[o] = self.val[x]


def _index_check(op: str, m: str, n: str, n_lit: int) -> list:
    """Kernel lines that raise when an index of ``ix[:m]`` is not in ``[0, n)``."""
    return [
        f"for m in range({m}):",
        f"    if ix[m] < 0 or ix[m] >= {n}:",
        f"        raise InvalidArgumentError('{op}: an index is not in [0, {n_lit})')",
    ]


def _hoist(body: list) -> list:
    """Loads of 0-d operands moved to the top: they are loop-invariant, and Numba's
    parfor lowering cannot type ``a[()]`` inside a prange loop."""
    top = [ln.strip() for ln in body if ln[:1] == " " and _ZERO_D_LOAD.match(ln.strip())]
    if not top:
        return body
    return top + [ln for ln in body if not (ln[:1] == " " and _ZERO_D_LOAD.match(ln.strip()))]


def _contig(a):
    """``a`` C-contiguous (``np.ascontiguousarray`` would make a 0-d array 1-d)."""
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _tstr(shape, dtype) -> str:
    from ..ir import Type

    return str(Type(tuple(shape), dtype))


def _output_readers(body, env_in, outs=None):
    """Pseudo-nodes so that a body output which *is* a body input gets loaded."""
    res = []
    for o in body.outputs if outs is None else [bo for bo, _, _ in outs]:
        if o in env_in:
            res.append(_Reader((o,)))
    return res


class _Reader:
    __slots__ = ("inputs",)

    def __init__(self, inputs):
        self.inputs = inputs


def _wrap(n: Node, kind: str, types: dict, **attrs) -> Node:
    """A single unfused node as a fused node of its own (one code path for all)."""
    from passes import FUSED

    ins = tuple(dict.fromkeys(n.inputs))
    body = Graph(ins, tuple(types[i] for i in ins), (n,), n.outputs, f"{n.op.name}_kernel")
    return Node(FUSED, ins, n.outputs, freeze_attrs(dict(attrs, body=body, kind=kind)),
                n.types, n.loc)


_vm_cache: list = []


def _vm_version() -> str:
    if not _vm_cache:
        from . import vmath

        _vm_cache.append(vmath.VERSION)
    return _vm_cache[0]


# ---------------------------------------------------------------------------
# Compiled programs


def generate(graph: Graph) -> tuple[str, list, list]:
    """The module source for ``graph``, the constant arrays its entry takes, and
    ``(kernel name, description)`` per kernel."""
    gen = _Gen(graph)
    return gen.build(), gen.consts, gen.kinfo


# Threads for kernels with parallel loops: chosen by measuring (see Program._run_tuned).
def _threads_env():
    v = os.environ.get("JITTAPE_NUM_THREADS", "").strip()
    try:
        return int(v) if v else None
    except ValueError:
        warnings.warn(f"JITTAPE_NUM_THREADS={v!r} is not an integer; ignored", UserWarning,
                      stacklevel=2)
        return None


_THREADS_ENV = _threads_env()
RETUNE_CALLS = 2000
_TUNE_CALLS = 8
# The parallel variant of a program is compiled on this call (then the two are timed
# against each other), not on the first: the first call compiles the serial one only.
PARALLEL_AFTER = int(os.environ.get("JITTAPE_PARALLEL_AFTER", 20))


def _quiet_numba():
    """A context in which Numba's performance hints are not shown."""
    import numba.core.errors as ne

    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("ignore", ne.NumbaPerformanceWarning)
    warnings.simplefilter("ignore", ne.NumbaWarning)
    return ctx


class Program(_runtime.Executable):
    """A generated module's ``entry`` (and ``entry_par``, its loops on threads), called
    the way that measured fastest."""

    def __init__(self, backend, graph, source, path, name, mod, consts, kinfo):
        super().__init__(backend, graph, source, path, name, consts, kinfo)
        self.entry = mod.entry
        self.entry_par = getattr(mod, "entry_par", None)  # loops on threads, when any
        self.par_ready = False
        self.par_compile_seconds = 0.0
        self.par_thread = None  # compiling entry_par in the background
        self.threads = None  # chosen thread count for the parallel loops
        self.choice = None  # chosen (loop threads, BLAS threads or None), see _run_tuned
        # a program that calls BLAS measures whether its matmuls are faster on one thread
        self.tunes_blas = (any(d.startswith("matmul") for _, d in kinfo)
                           and blas.cpu_count() > 1 and not blas.kernel_threads_fixed())
        self.trials: list = []
        self.calls = 0

    # -- the runtime's hooks ---------------------------------------------------------
    def _invoke(self, args, slots, outs, mine):
        if mine and (self.entry_par is not None or self.tunes_blas):
            self._run_tuned(args, slots, outs)
        else:
            self.entry(*args, *self.consts, *slots, *outs)

    def _compile(self, rest):
        import numba

        ctx = _quiet_numba()
        try:
            self.entry.compile(tuple(numba.typeof(a) for a in rest))
        finally:
            ctx.__exit__(None, None, None)

    def _state(self) -> tuple:
        entries = [self.entry] + ([self.entry_par] if self.entry_par is not None else [])
        return (sum(len(e.overloads) for e in entries),
                sum(sum(e.stats.cache_hits.values()) for e in entries),
                sum(sum(e.stats.cache_misses.values()) for e in entries))

    def _reload(self):
        sys.modules.pop(f"jittape._generated.{self.name}", None)
        name, path, _ = _cache.write_module(self.source)
        mod = _load(name, path)
        self.entry, self.entry_par = mod.entry, getattr(mod, "entry_par", None)

    def warm(self, arrays):
        ctx = _quiet_numba()
        try:
            return super().warm(arrays)
        finally:
            ctx.__exit__(None, None, None)

    def wait(self, timeout=None) -> bool:
        if self.par_thread is not None:
            self.par_thread.join(timeout)
        return super().wait(timeout)

    def _run_tuned(self, args, slots, outs):
        """Run the program the way that measured fastest: its loops serial (``entry``) or
        on all threads (``entry_par``), and, when it calls BLAS, scipy's BLAS on all
        cores or on one.

        Threads are not always faster: a memory-bound loop gains nothing from a second
        thread, and on a machine whose other cores are busy a parallel loop waits for a
        thread the scheduler has not run yet (on the project's shared 2-core machine the
        chain backward at 8M took 9 ms serial, 16 ms on two threads when quiet and up to
        150 ms when not). BLAS's own threads suffer the same way: with one core busy
        elsewhere, the small MLP step's matmuls on two BLAS threads took 15 ms instead of
        0.06. So after a warm-up (which compiles ``entry_par``) the calls cycle through
        the ways, and the fastest by median is kept; it is measured again every
        ``RETUNE_CALLS`` calls. ``JITTAPE_NUM_THREADS`` fixes the loops' choice (1:
        serial; more: that many threads) and ``JITTAPE_KERNEL_BLAS_THREADS`` BLAS's.
        """
        import numba

        rest = (*args, *self.consts, *slots, *outs)
        if _THREADS_ENV:
            n = max(1, min(_THREADS_ENV, numba.config.NUMBA_NUM_THREADS))
            if n == 1 or self.entry_par is None:
                self.entry(*rest)
            else:
                numba.set_num_threads(n)
                self.entry_par(*rest)
            return
        self.calls += 1
        if self.choice is not None and self.calls % RETUNE_CALLS == 0:
            self.choice, self.threads, self.trials = None, None, []
        if self.choice is not None:
            self._run_way(self.choice, rest)
            return
        most = numba.config.NUMBA_NUM_THREADS
        if self.entry_par is not None and not self.par_ready:
            if self.calls <= PARALLEL_AFTER or self.par_thread is not None:
                # a program that runs only a few times never pays for compiling its
                # parallel variant (about as long again as the serial one)
                self._run_way((1, self._blas_most), rest)
                return
            if background_compile():
                # compiled by another thread; the serial entry runs meanwhile
                sig = tuple(numba.typeof(a) for a in rest)
                self.par_thread = threading.Thread(
                    target=self._compile_par, args=(sig,), name=f"jittape-compile-{self.name}")
                self.par_thread.start()
                self._run_way((1, self._blas_most), rest)
                return
            # this call compiles the parallel variant; it is not a measurement
            numba.set_num_threads(most)
            t0 = time.perf_counter()
            self.entry_par(*rest)
            dt = time.perf_counter() - t0
            self.par_compile_seconds = dt
            self.backend.stats["compile_seconds"] += dt
            self.par_ready = True
            return
        ways = self._ways(most)
        if self.calls <= 2:  # the first calls compile or load: not measurements
            self._run_way(ways[0], rest)
            return
        # each way runs a block of _TUNE_CALLS calls in a row, and the first two of a
        # block are not counted: the pool of the way before (OpenMP's threads spin for a
        # while after a parallel loop) would slow them down (measured: the large MLP
        # step's BLAS-on-two-threads calls took 9.5 ms instead of 3.3 right after a
        # parallel-loop call, and the tuner kept the 5.3 ms way)
        way = ways[len(self.trials) // _TUNE_CALLS]
        t0 = time.perf_counter()
        self._run_way(way, rest)
        self.trials.append((way, time.perf_counter() - t0))
        if len(self.trials) >= _TUNE_CALLS * len(ways):
            med = {}
            for w in ways:
                ts = sorted([t for m, t in self.trials if m == w][2:])
                med[w] = ts[len(ts) // 2]
            # the first way (serial, BLAS on all cores) unless another is 10% faster
            best = min(ways, key=lambda w: med[w])
            self.choice = best if med[best] < 0.9 * med[ways[0]] else ways[0]
            self.threads = self.choice[0]

    @property
    def _blas_most(self):
        return blas.cpu_count() if self.tunes_blas else None

    def _ways(self, most) -> list:
        """(loop threads, BLAS threads or None) to try. Parallel loops go with one BLAS
        thread only: Numba's and OpenBLAS's pools together oversubscribe the cores (the
        large MLP step: 40-56 ms against 3.8 ms, every time)."""
        par = self.entry_par is not None and most > 1
        if not self.tunes_blas:
            return [(1, None)] + ([(most, None)] if par else [])
        return [(1, self._blas_most), (1, 1)] + ([(most, 1)] if par else [])

    def _run_way(self, way, rest):
        n, b = way
        if b is not None:
            blas.set_kernel_threads(b)
        if n == 1:
            self.entry(*rest)
        else:
            import numba

            numba.set_num_threads(n)
            self.entry_par(*rest)

    def _call_profiled(self, args) -> list:
        """A call while a ``jt.profiler.profile()`` is open: ``entry_prof`` reads the
        cycle counter around each kernel; the parallel variant when the program runs
        its loops on threads."""
        import numba

        from .. import profiler
        from . import clock

        with profiler.span(f"program {self.name[:10]}", "program"):
            with self.lock:
                if self.slots is None:
                    self.slots = [np.empty(n, d) for d, n in self.slot_specs]
                slots, outs = self.slots, self._outputs()
                par = self.entry_par is not None and (self.threads or 1) > 1
                if self.choice is not None and self.choice[1] is not None:
                    blas.set_kernel_threads(self.choice[1])
                stamps = np.zeros(2 * len(self.kernels), np.int64)
                rest = (*args, *self.consts, *slots, *outs, stamps)
                fn = None
                if clock.AVAILABLE:
                    mod = _load(self.name, self.path)
                    fn = getattr(mod, "entry_prof_par" if par else "entry_prof", None)
                if fn is None:  # no cycle counter: the program's own entry, as a whole
                    fn, rest, stamps = (self.entry_par if par else self.entry), rest[:-1], None
                elif not fn.overloads:
                    import numba.core.errors as ne

                    t0 = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", ne.NumbaPerformanceWarning)
                        warnings.simplefilter("ignore", ne.NumbaWarning)
                        fn.compile(tuple(numba.typeof(a) for a in rest))
                    profiler.note_compile(time.perf_counter() - t0, f"{self.name[:10]} entry_prof")
                if par:
                    numba.set_num_threads(self.threads)
                t0 = time.perf_counter_ns()
                fn(*rest)
                t1 = time.perf_counter_ns()
            profiler.record_program(self.name[:10], self.kernels, t0, t1, stamps)
        return outs

    def _compile_par(self, sig):
        import numba.core.errors as ne

        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ne.NumbaPerformanceWarning)
                warnings.simplefilter("ignore", ne.NumbaWarning)
                self.entry_par.compile(sig)
        except Exception:  # noqa: BLE001 - the serial entry stays in use
            return
        dt = time.perf_counter() - t0
        self.par_compile_seconds = dt
        self.backend.stats["compile_seconds"] += dt
        self.par_ready = True



def _load(name: str, path: str):
    modname = f"jittape._generated.{name}"
    mod = sys.modules.get(modname)
    if mod is not None:
        return mod
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[modname] = mod
    return mod


class CpuBackend(_runtime.Backend):
    """Numba ``@njit`` kernels and one entry per graph, cached on disk."""

    name = "cpu"

    def pipeline(self) -> tuple:
        """The passes this backend runs before compiling (fusion, buffers not in place:
        an exactly aliased input and output make LLVM's vectorizer give up)."""
        import passes

        return passes.cleanup_pipeline() + (
            passes.configured(passes.fuse, matmul_epilogue=True),
            passes.configured(passes.plan_buffers, inplace=False),
        )

    def build(self, graph: Graph) -> Program:
        source, consts, kinfo = generate(graph)
        name, path, _ = _cache.write_module(source)
        mod = _load(name, path)
        return Program(self, graph, source, path, name, mod, consts, kinfo)

    def load_errors(self) -> tuple:
        import numba.core.errors as ne

        return (ne.NumbaError, NotImplementedError, TypeError, AttributeError, KeyError,
                IndexError, EOFError, OSError, ValueError, ImportError, SyntaxError)

    def purge(self, prog) -> None:
        _cache.purge(prog.name)


BACKEND = CpuBackend()
# the module's functions are the backend's (tests and tools call them by these names)
stats = BACKEND.stats
_BY_GRAPH, _BY_KEY = BACKEND.by_graph, BACKEND.by_key
program = BACKEND.executable
compile_program = BACKEND.compile_program
pipeline = BACKEND.pipeline
background_compile = _runtime.background_compile
CompileWarning = _runtime.CompileWarning


def run(graph: Graph, feeds: dict) -> list:
    """Outputs of ``graph`` for ``feeds`` (input id -> ndarray), compiled."""
    return BACKEND.run(graph, feeds)


def run_arrays(graph: Graph, arrays: list, feeds: dict | None = None) -> list:
    """:func:`run` with the input arrays in ``graph.inputs`` order."""
    return BACKEND.run_arrays(graph, arrays, feeds)
