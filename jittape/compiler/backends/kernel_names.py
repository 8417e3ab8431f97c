"""The names of scheduled code: scopes that give out value names as the scheduler asks
for them, the module's dims (``D0``) and each kernel's (``d0``), index terms, and the
entry's parameter names. Shared by the scheduler (``schedule.py``) and its mixins
(``schedule_fused.py``, ``schedule_ops.py``)."""

from __future__ import annotations

import keyword
import re

import numpy as np

from ..ir import Graph, Type
from .kernel_ir import Loop


class Names:
    """The names of one scope of generated code (a kernel, or the entry), given out as
    the scheduler asks for them: ``value("v", 812)`` is ``v0`` the first time a kernel
    asks for a ``v``, and the same name whenever it asks again. The order of asking
    follows the graph's structure, never its value ids, so two graphs (or two kernels)
    of one structure give the same text."""

    __slots__ = ("of", "count", "dims", "frozen", "top")

    def __init__(self):
        self.frozen = False  # dim() answers only the dims asked for already
        self.of: dict = {}  # (prefix, value id) -> name
        self.count: dict = {}  # prefix -> names given
        self.dims: dict = {}  # the module's dim name (D3) -> this kernel's (d0), in order
        self.top: list = []  # loop-invariant loads (0-d operands), hoisted to the top

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
                return "*"  # a size the kernel does not read (a comment names it so)
            name = self.dims[module_name] = f"d{len(self.dims)}"
        return name


# Dimension names of the module being scheduled: size -> name (``D0``...). Sizes are
# named after the entry's input dims (``D0 = in0.shape[0]``), so the module does not
# change with them: a new batch size gives the same module, and its compiled code (in
# memory and on disk) serves it. Only one module is scheduled at a time (the backend
# holds its lock).
_DIMS: dict = {}
# The scope of the kernel being written, while one is (``Scheduler.kernel_scope``):
# inside it a module dim is a parameter of the kernel, named by that scope (``d0``).
_KERNEL: list = [None]


def _d(size) -> str:
    """A dimension as an expression: its name, or the literal (0, 1 and sizes no input
    has). Inside a kernel, the kernel's own name for it."""
    size = int(size)
    name = _DIMS.get(size)
    if name is None:
        return str(size)
    scope = _KERNEL[0]
    if scope is not None and name[0] == "D":
        return scope.dim(name)
    return name


def _dims(shape) -> tuple:
    return tuple(_d(x) for x in shape)


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


def _index(shape, space_vars: list) -> tuple:
    """Index terms for an operand of ``shape`` read over a loop nest whose variables
    are ``space_vars`` (one per space dim, or a literal ``"0"``): numpy broadcasting,
    right-aligned, size-1 dims read at 0."""
    r, k = len(space_vars), len(shape)
    return tuple("0" if d == 1 else space_vars[r - k + j] for j, d in enumerate(shape))


def _subscript(array: str, index: tuple) -> str:
    return f"{array}[{', '.join(index) if index else '()'}]"


def fmt_key(key) -> str:
    """A strided_slice key as numpy's index syntax."""
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


# names the entry gives its own values (views t0, dims D0, constants c0, outputs o0,
# slots slot_0, the profiler's tk, the buffer table bp) and the module's globals: no
# input may take them
_TAKEN = re.compile(
    r"^(?:[tcoD]\d+|slot_\d+|tk|bp|tview_\w*|np|numba|math|prange|entry\w*|k\d+\w*)$")


_NUMBERED = re.compile(r"^(.*?)(?:_(\d+))?$")


def _scopes_renumbered(names) -> dict:
    """``{scope: scope as this graph numbers it}`` for the scopes of variable names
    (``dense_3`` in ``dense_3/kernel``): the instances of each base name (``dense``,
    ``adam``) numbered by first appearance in the graph, so that a second model of the
    same layers (``dense_3``, ``dense_4``) gives the entry the first one's names, the same
    text, and so the same cached module."""
    order: dict = {}
    out = {}
    for raw in names:
        if not raw.startswith("var:"):
            continue
        for part in raw[4:].split("/")[:-1]:
            if part in out:
                continue
            base = _NUMBERED.match(part).group(1) or part
            k = order.get(base, 0)
            order[base] = k + 1
            out[part] = base if k == 0 else f"{base}_{k}"
    return out


def input_params(graph: Graph) -> list:
    """The entry's parameter name for each graph input, from the graph's input names:
    a variable ``dense_1/kernel`` is ``w_dense_1_kernel`` (its layer numbered among the
    graph's own: the first dense layer the graph reads is ``dense``, whatever its global
    name), an argument ``x`` is ``x``, others as named (``seed``, ``random``,
    ``capture0``); unnamed ones ``in<k>``. Names are identifiers, unique, and never one
    the entry uses for its own values."""
    out, seen = [], set()
    names = graph.input_names or ()
    scopes = _scopes_renumbered(names)
    for k in range(len(graph.inputs)):
        raw = names[k] if k < len(names) else ""
        if raw.startswith("var:"):
            parts = raw[4:].split("/")
            raw = "w_" + "/".join([scopes.get(p, p) for p in parts[:-1]] + parts[-1:])
        elif raw.startswith("arg:"):
            raw = raw[4:]
        name = re.sub(r"[^0-9A-Za-z_]+", "_", raw).strip("_").lower() or f"in{k}"
        if name[0].isdigit() or keyword.iskeyword(name) or _TAKEN.match(name):
            name = "in_" + name
        base, j = name, 1
        while name in seen:
            name = f"{base}_{j}"
            j += 1
        seen.add(name)
        out.append(name)
    return out


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def _tstr(shape, dtype) -> str:
    """A type as ``explain()`` prints it (``f32[64,10]``)."""
    return str(Type(tuple(shape), dtype))


def _gstr(shape, dtype) -> str:
    """A type with its sizes named as the kernel names them (``f32[d0,10]``), so that a
    kernel's comment does not change with a batch size."""
    return str(Type((), dtype))[:-2] + "[" + ",".join(_d(x) for x in shape) + "]"


def _contig(a):
    """``a`` C-contiguous (``np.ascontiguousarray`` would make a 0-d array 1-d)."""
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _nest(space_vars, extents, inner, parallel_first: bool) -> list:
    """Loops over ``extents`` (outermost first) around the statements ``inner``."""
    body = list(inner)
    for d in reversed(range(len(extents))):
        body = [Loop(space_vars[d], extents[d], tuple(body), parallel_first and d == 0)]
    return body
