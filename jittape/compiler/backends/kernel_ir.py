"""The kernel IR: loop nests between the fused graph and a dialect's source text.

The scheduler (``schedule.py``) builds a :class:`Module` from an optimized graph; a
printer per dialect (``numba_cpu.py``) renders it. A module is data: kernels made of
loops, loads and stores with index expressions, accumulators, library calls (GEMM), and
the entry program (views, fills, kernel calls, buffer slots). Every name a printer
writes is a field here, given out by the scheduler; printers never rewrite text.

Expressions (``Let.expr``, a loop's extent, index terms) are strings in the kernel's
own names, written with the op records' scalar templates (``emit.py``): Python syntax
that every Numba dialect compiles. ``str(module)`` is the IR as text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# ---------------------------------------------------------------------------
# Statements (kernel bodies and the entry)


@dataclass(frozen=True)
class Loop:
    """``for var in range(start, extent)``; ``parallel``: its iterations are independent
    (or only add into scalar accumulators), so a dialect may run them on threads."""

    var: str
    extent: str
    body: tuple
    parallel: bool = False
    start: str = "0"


@dataclass(frozen=True)
class Let:
    """``name = expr``; ``note`` says which op computed it (a comment)."""

    name: str
    expr: str
    note: str = ""


@dataclass(frozen=True)
class Load:
    """``name = array[index]``; an empty index reads a 0-d array."""

    name: str
    array: str
    index: tuple


@dataclass(frozen=True)
class Store:
    """``array[index] = value``; an index term may be a slice (``"0:d1"``) and then the
    value an array (a copy)."""

    array: str
    index: tuple
    value: str


@dataclass(frozen=True)
class Update:
    """``name op= expr`` (an accumulator: ``acc += x``, ``nan |= x != x``)."""

    name: str
    op: str
    expr: str


@dataclass(frozen=True)
class Accumulate:
    """Fold ``value`` into the accumulator ``acc`` (a scalar name, or an element of an
    accumulator array: ``index``) with ``monoid`` (``ir.MONOIDS``). ``nan``: for a float
    max/min, the flag that notes a NaN apart (the fold is then a select, and the
    epilogue makes the result NaN when the flag is set)."""

    acc: str
    monoid: str
    value: str
    dtype: str
    index: tuple | None = None
    nan: str | None = None


@dataclass(frozen=True)
class If:
    cond: str
    body: tuple


@dataclass(frozen=True)
class Raise:
    """Raise ``InvalidArgumentError(message)``: bad data (an index out of range).
    ``args``: expressions whose values fill the message's ``%d`` fields (the bad value,
    where it is), formatted by the error class once the kernel has returned."""

    message: str
    args: tuple = ()


@dataclass(frozen=True)
class Alloc:
    """``name = np.empty(shape, dtype)`` (a kernel's own accumulator array, or a value of
    the entry that has no buffer slot)."""

    name: str
    shape: tuple
    dtype: str


@dataclass(frozen=True)
class Full:
    """``name = np.full(shape, value)``: a uniform operand a GEMM reads."""

    name: str
    shape: tuple
    value: str


@dataclass(frozen=True)
class Fill:
    """``array[...] = value``; ``note`` says why."""

    array: str
    value: str
    note: str = ""


@dataclass(frozen=True)
class View:
    """``name`` = a view of ``array``: ``kind`` is ``reshape`` (to ``arg``, a shape),
    ``transpose`` (``arg``: the permutation; ``(1, 0)`` is ``.T``, typed F-contiguous so
    that BLAS reads it without a copy), ``broadcast`` (to ``arg``), ``index`` (``arg``: a
    key, as numpy's basic indexing), ``slot`` (the first elements of buffer slot
    ``array``, reshaped to ``arg``), ``range`` (``arg = (offset, shape)``: the elements
    of the 1-d ``array`` from ``offset``, reshaped), ``contiguous`` (a copy when it is
    not), ``flat`` (a contiguous copy's elements, in order) or ``table`` (the C array at ``arg`` =
    ``(offset, dtype, ndim, readonly)`` of the buffer table ``array``: its address and
    dims; see :func:`table_offsets`)."""

    name: str
    array: str
    kind: str
    arg: tuple = ()


@dataclass(frozen=True)
class Gemm:
    """``out = a @ b + beta * out`` by the library's GEMM (operands 2-d, each a row- or
    column-major view; ``beta`` 0: ``out`` is not read)."""

    a: str
    b: str
    out: str
    beta: str = "0.0"


@dataclass(frozen=True)
class Dim:
    """The entry's ``name = array.shape[axis]``: sizes are read from the inputs, so the
    module does not change with them."""

    name: str
    array: str
    axis: int


@dataclass(frozen=True)
class Call:
    """A kernel call from the entry (``kernel`` names a :class:`Kernel`); ``site`` numbers
    the calls in order (profiling reads the clock around each)."""

    kernel: str
    args: tuple
    parallel: bool
    site: int


# ---------------------------------------------------------------------------
# Kernels and modules


@dataclass(frozen=True)
class Kernel:
    """One function: ``params`` (arrays, then the sizes it reads), ``comment`` (what it
    computes, as ``explain()`` lists it), ``body``. ``threaded``: it has a parallel loop
    that is worth threads (its work is large), so the dialect writes a threaded variant
    beside the serial one. ``fastmath``: None for the kernels' default flags, False for
    none. ``imports``: ``(module, alias)`` of modules its body calls besides the
    dialect's own (the collectives' intrinsics)."""

    name: str
    params: tuple
    comment: str
    body: tuple
    threaded: bool = False
    fastmath: bool | None = None
    imports: tuple = ()


@dataclass
class Module:
    """One graph's generated code: kernels (each written once), the entry's parameters
    (inputs, constants, buffer slots, outputs) and its statements."""

    graph_name: str
    nodes: int
    kernels: list = field(default_factory=list)
    params: tuple = ()
    entry: list = field(default_factory=list)
    calls: int = 0  # kernel calls in the entry
    # per kernel call, the first value the graph's node computes there: the node that
    # explain() marks with the call's kernel name
    call_values: list = field(default_factory=list)

    @property
    def threaded(self) -> bool:
        return any(k.threaded for k in self.kernels)

    def __str__(self) -> str:
        out = [f"module {self.graph_name!r} ({self.nodes} nodes)"]
        for k in self.kernels:
            out.append(f"kernel {k.name}({', '.join(k.params)})"
                       + (" threaded" if k.threaded else "") + f"  # {k.comment}")
            out += _text(k.body, 1)
        out.append(f"entry({', '.join(self.params)})")
        out += _text(self.entry, 1)
        return "\n".join(out)


def _text(stmts, depth) -> list:
    pad = "  " * depth
    out = []
    for s in stmts:
        if isinstance(s, (Loop, If)):
            head = (f"loop {s.var} < {s.extent}" + (" parallel" if s.parallel else "")
                    if isinstance(s, Loop) else f"if {s.cond}")
            out.append(pad + head)
            out += _text(s.body, depth + 1)
        else:
            out.append(pad + repr(s))
    return out


def table_offsets(ndims) -> list:
    """Each array's offset in a buffer table (``View`` kind ``table``) of arrays of these
    ranks, in order: an array takes its address, then its dims (one int64 word each)."""
    out, at = [], 0
    for nd in ndims:
        out.append(at)
        at += 1 + nd
    return out
