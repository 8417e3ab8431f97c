"""The Numba CPU dialect: a kernel IR module (``kernel_ir.py``) printed as Python
modules of ``@numba.njit`` functions: one module per distinct kernel, and the entry's.

- A kernel's module holds ``k`` (its loops serial) and, when it is ``threaded``,
  ``k_par`` (its parallel loops as ``prange``, ``parallel=True``). Its name is the hash
  of its text, which names nothing of the graph, so identical kernels of different
  graphs are one module, one Numba compile and one disk-cache entry.
- The entry module imports the kernel modules (``k as k3``) and calls each kernel
  through ``kcall<n>(kp, SITE, k3, ...)`` (``kcall.py``): ``kp`` is a table of kernel
  addresses, one per call site, its first parameter. Compiling an entry therefore never
  links or re-optimizes its kernels.
- The entry is written four ways: ``entry`` (calls the serial kernels), ``entry_par``
  (the threaded ones; only when some kernel is threaded), and ``entry_prof`` /
  ``entry_prof_par``, which read the cycle counter around each kernel call
  (``jt.profiler``; Numba compiles them only when a profile is open).
- It takes every array as an argument (inputs, constants, buffer slots, outputs), so
  the module has no closures or dynamic globals and Numba's on-disk cache
  (``cache=True``) serves it to the next process. Buffer slots are viewed with
  ``view`` (no checks, no reference counting): such a view never leaves the entry.

Every name printed is one the kernel IR holds; nothing here rewrites text.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .. import cache as _cache
from .emit import GENERATOR_VERSION, np_type, reduce_step
from .kcall import table_name
from .kernel_ir import (
    Accumulate, Alloc, Call, Dim, Fill, Full, Gemm, If, Let, Load, Loop, Module, Raise, Store,
    Update, View,
)


def fastmath_flags() -> str:
    """Kernels' fast-math flags: reassociation (needed for vectorized reductions) and
    contraction to FMA, never ``nnan``/``ninf``, so NaN and Inf keep their meaning.
    ``JITTAPE_FASTMATH=0`` turns them off."""
    if os.environ.get("JITTAPE_FASTMATH", "1") in ("0", "", "false"):
        return "False"
    return '{"reassoc", "contract"}'


def _shape(dims) -> str:
    return "(" + "".join(f"{d}, " for d in dims).rstrip(" ") + ")"


def _sub(array: str, index: tuple) -> str:
    return f"{array}[{', '.join(index) if index else '()'}]"


def _view(s: View) -> str:
    if s.kind == "reshape":
        return f"{s.array}.reshape({_shape(s.arg)})"
    if s.kind == "transpose":
        if tuple(s.arg) == (1, 0):  # typed F-contiguous: BLAS reads it with no copy
            return f"{s.array}.T"
        return f"np.transpose({s.array}, {_shape(s.arg)})"
    if s.kind == "broadcast":
        return f"np.broadcast_to({s.array}, {_shape(s.arg)})"
    if s.kind == "index":
        return f"{s.array}[{s.arg[0]}]"
    if s.kind == "range":  # elements off, off + 1, ... of a 1-d buffer, reshaped
        off, dims = s.arg
        return f"view({s.array}, {off}, {_shape(dims)})"
    if s.kind == "slot":  # the plan sized the slot: at least ``count`` elements
        _count, dims = s.arg
        return f"view({s.array}, 0, {_shape(dims)})"
    if s.kind == "flat":
        return f"np.ascontiguousarray({s.array}).ravel()"
    if s.kind == "table":
        off, dtype, nd, ro = s.arg
        return f"{table_name(dtype, nd, ro)}({s.array}, {off})"
    raise ValueError(f"unknown view kind {s.kind!r}")


def statements(stmts, threaded: bool, call_suffix: str = "", timed: bool = False) -> list:
    """Source lines for kernel IR statements. ``threaded``: parallel loops are
    ``prange``; ``call_suffix`` is added to the names of threaded kernels called;
    ``timed``: the cycle counter is read around each call (into ``tk``)."""
    out = []

    def emit(ss, pad):
        for s in ss:
            if isinstance(s, Loop):
                rng = "prange" if threaded and s.parallel else "range"
                ext = s.extent if s.start == "0" else f"{s.start}, {s.extent}"
                out.append(f"{pad}for {s.var} in {rng}({ext}):")
                emit(s.body, pad + "    ")
            elif isinstance(s, If):
                out.append(f"{pad}if {s.cond}:")
                emit(s.body, pad + "    ")
            elif isinstance(s, Let):
                out.append(f"{pad}{s.name} = {s.expr}" + (f"  # {s.note}" if s.note else ""))
            elif isinstance(s, Load):
                out.append(f"{pad}{s.name} = {_sub(s.array, s.index)}")
            elif isinstance(s, Store):
                out.append(f"{pad}{_sub(s.array, s.index)} = {s.value}")
            elif isinstance(s, Accumulate):
                out.extend(pad + ln for ln in _accumulate(s))
            elif isinstance(s, Update):
                out.append(f"{pad}{s.name} {s.op}= {s.expr}")
            elif isinstance(s, Raise):
                args = "".join(f", {a}" for a in s.args)
                out.append(f"{pad}raise InvalidArgumentError({s.message!r}{args})")
            elif isinstance(s, Alloc):
                out.append(f"{pad}{s.name} = np.empty({_shape(s.shape)}, {np_type(s.dtype)})")
            elif isinstance(s, Full):
                out.append(f"{pad}{s.name} = np.full({_shape(s.shape)}, {s.value})")
            elif isinstance(s, Fill):
                out.append(f"{pad}{s.array}[...] = {s.value}" + (f"  # {s.note}" if s.note else ""))
            elif isinstance(s, View):
                out.append(f"{pad}{s.name} = {_view(s)}")
            elif isinstance(s, Gemm):
                # np.dot reads any layout (a strided view of a graph's input); the intrinsic,
                # which adds into out, serves the kernels that pass it row/column-major views
                out.append(f"{pad}np.dot({s.a}, {s.b}, {s.out})" if s.beta == "0.0"
                           else f"{pad}_gm.gemm({s.a}, {s.b}, {s.out}, {s.beta})")
            elif isinstance(s, Dim):
                out.append(f"{pad}{s.name} = {s.array}.shape[{s.axis}]")
            elif isinstance(s, Call):  # through the table: slot = the call site
                name = s.kernel + (call_suffix if s.parallel else "")
                call = f"{pad}kcall{len(s.args)}({', '.join(['kp', str(s.site), name, *s.args])})"
                if timed:
                    out.extend([f"{pad}tk[{2 * s.site}] = _cycles()", call,
                                f"{pad}tk[{2 * s.site + 1}] = _cycles()"])
                else:
                    out.append(call)
            else:
                raise TypeError(f"no Numba CPU form for {type(s).__name__}")

    emit(stmts, "")
    return out


def _accumulate(s: Accumulate) -> list:
    x = s.value
    if s.index is not None:
        acc = _sub(s.acc, s.index)
        return [f"{acc} = {reduce_step(s.monoid, acc, x, s.dtype)}"]
    if s.monoid == "add" and s.dtype != "bool":
        return [f"{s.acc} += {x}"]
    if s.nan is not None:  # a select, and the NaN noted apart
        cmp = ">" if s.monoid == "max" else "<"
        return [f"{s.acc} = {x} if {x} {cmp} {s.acc} else {s.acc}", f"{s.nan} |= {x} != {x}"]
    return [f"{s.acc} = {reduce_step(s.monoid, s.acc, x, s.dtype)}"]


KERNEL_HEAD = (
    "import math  # noqa: F401",
    "import numpy as np",
    "import numba",
    "from numba import prange  # noqa: F401",
    "from jittape.compiler.backends import vmath as _vm  # noqa: F401",
    "from jittape.errors import InvalidArgumentError  # noqa: F401",
)


GEMM_IMPORT = "from jittape.compiler.backends import kgemm as _gm"


def _calls_gemm(body) -> bool:
    """Whether a statement of ``body`` (loops and branches included) is a ``Gemm``."""
    stack = list(body)
    while stack:
        s = stack.pop()
        if isinstance(s, Gemm) and s.beta != "0.0":
            return True
        stack.extend(getattr(s, "body", ()) or ())
    return False


def kernel_source(k, threaded: bool) -> str:
    """The function ``k`` (``k_par`` when ``threaded``) for kernel ``k``."""
    fm = fastmath_flags() if k.fastmath is None else "False"
    par = ", parallel=True" if threaded else ""
    src = [
        f"@numba.njit(cache=True, error_model='numpy', fastmath={fm}, nogil=True, "
        f"no_cpython_wrapper=True, no_cfunc_wrapper=True{par})",
        f"def {'k_par' if threaded else 'k'}({', '.join(k.params)}):",
        f"    # {k.comment}",
    ]
    return "\n".join(src + ["    " + ln for ln in statements(k.body, threaded)] + [""])


def kernel_module(k, vm_version: str) -> str:
    """A kernel's own module: nothing in it names the graph or the kernel's number."""
    head = [f"# jittape kernel module: {k.comment}",
            f"# generator {GENERATOR_VERSION}, vector math {vm_version}", *KERNEL_HEAD,
            *([GEMM_IMPORT] if _calls_gemm(k.body) else []),
            *(f"import {m} as {a}  # noqa: F401" for m, a in k.imports), ""]
    block = kernel_source(k, False)
    if k.threaded:
        block += "\n" + kernel_source(k, True)
    return "\n".join(head + [block])


@dataclass(frozen=True)
class Sources:
    """A graph's generated modules: the entry's text and name, and ``(kernel name in the
    entry, module name, text)`` per kernel module it imports. ``str()``: all of them,
    the entry first, each kernel module after a line naming its file (golden text)."""

    entry: str
    name: str
    kernels: tuple
    # per kernel call, the value its node computes first (``Module.call_values``): not
    # part of the text
    calls: tuple = ()

    def __str__(self) -> str:
        out = [self.entry]
        for kname, mname, text in self.kernels:
            out += [f"# ==== {mname}.py: kernel {kname} ====", text]
        return "\n".join(out)


def render(mod: Module, vm_version: str) -> Sources:
    """The module's sources."""
    kernels = []
    for k in mod.kernels:
        text = kernel_module(k, vm_version)
        kernels.append((k.name, _cache.module_name(text, "jk"), text))
    arities = sorted({len(s.args) for s in mod.entry if isinstance(s, Call)})
    tables = sorted({table_name(*s.arg[1:]) for s in mod.entry
                     if isinstance(s, View) and s.kind == "table"})
    head = [
        # no graph name: the module is cached by its text, and a graph of the same
        # structure (a second model, a step of another name) shares it
        f"# jittape generated module: {mod.nodes} nodes, {len(mod.kernels)} kernels",
        f"# generator {GENERATOR_VERSION}, vector math {vm_version}",
        "import numpy as np",
        "import numba",
        "from jittape.compiler.backends.clock import cycles as _cycles  # noqa: F401",
        "from jittape.compiler.backends.kcall import "
        + ", ".join([f"kcall{n}" for n in arities] + tables + ["view"]) + "  # noqa: F401",
    ]
    for k, (kname, mname, _) in zip(mod.kernels, kernels):
        par = f", k_par as {kname}_par" if k.threaded else ""
        head.append(f"from jittape._generated.{mname} import k as {kname}{par}")
    head.append("")
    entry = []
    for fname, suffix, doc, timed in (
            ("entry", "", "in order", False),
            ("entry_par", "_par", "in order, loops on threads", False),
            ("entry_prof", "", "in order, timing each", True),
            ("entry_prof_par", "_par", "on threads, timing each", True)):
        if suffix and not mod.threaded:
            continue
        params = ["kp"] + list(mod.params) + (["tk"] if timed else [])
        entry += [
            "",
            "@numba.njit(cache=True, error_model='numpy', nogil=True)",
            f"def {fname}({', '.join(params)}):",
            f'    """Runs the graph\'s {len(mod.kernels)} kernels {doc}; ``kp``: their '
            'addresses, one per call."""',
        ]
        entry += ["    " + ln for ln in statements(mod.entry, False, suffix, timed)]
        entry += ["    return 0", ""]
    text = "\n".join(head + entry)
    return Sources(text, _cache.module_name(text), tuple(kernels), tuple(mod.call_values))
