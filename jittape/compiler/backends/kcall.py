"""Intrinsics the generated entries use: a kernel call through a pointer table, and a
buffer view without checks.

``kcall<n>(kp, SLOT, kernel, a0, ..., a<n-1>)`` calls the ``@njit`` dispatcher
``kernel`` through the address ``kp[SLOT]`` (``kp``: an int64 array, the entry's first
parameter). Typing needs only the argument types (a generated kernel returns nothing):
the kernels are compiled, or loaded from their own disk caches, when the entry's table
is made (``kernel_table.py``, side by side: ``compile_pool.py``). The code loads
``kp[SLOT]``, casts it to the kernel's native function
(Numba's calling convention) and calls it, passing an exception the kernel raised on to
the entry's caller. The kernel's library is not linked into the entry, so compiling an
entry never re-optimizes its kernels. :func:`slots` reads, from a compiled entry's
types, which kernel and argument types each slot needs.

Traps:

- Numba caches an intrinsic's typing by argument types (per process): a second entry
  that calls the same kernel with the same types from the same slot does not run the
  typer again. So the slots are read from the compiled entry's call types, never
  collected as a side effect of typing (that left a slot at 0: a jump to address 0).
- An entry that Numba loads from its disk cache has no call types: its table comes from
  a manifest (``kernel_table.py``).
- The addresses belong to the kernels' libraries: keep the dispatchers alive while a
  table points into them, and never share a table between processes.
- Fixed arity (``kcall3``, not ``*args``): a star-args tuple would pack and reference
  count every array, which costs compile time in every entry.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def kernel_address(disp, argtypes: tuple) -> int:
    """Compile (or load) ``disp`` for ``argtypes``; the address of its native function."""
    disp.compile(argtypes)
    cres = disp.overloads[argtypes]
    if cres.signature.return_type != types.none:  # the call below assumes none
        raise TypeError(f"kernel {disp.py_func.__qualname__} returns "
                        f"{cres.signature.return_type}; generated kernels return nothing")
    addr = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
    if not addr:
        raise RuntimeError(f"no native symbol for {disp.py_func.__qualname__}{argtypes}")
    return addr


def typed_slots(disp, sig: tuple) -> dict:
    """:func:`slots` of ``disp`` compiled for ``sig``, from type inference alone (no
    lowering, no machine code): what the kernels' compiles can start from while the
    entry itself compiles."""
    from numba.core import compiler, typed_passes

    disp.typingctx.refresh()  # intrinsics and overloads registered since (view, kcall)
    disp.targetctx.refresh()
    interp = compiler.run_frontend(disp.py_func)
    res = typed_passes.type_inference_stage(disp.typingctx, disp.targetctx, interp, sig,
                                            None)
    return _slots_of(res.calltypes)


def _is_kcall(sig) -> bool:
    """Whether a call signature is one ``_type_call`` gave: (int64 table, literal slot,
    a dispatcher, arguments). Nothing else in a generated entry has that shape."""
    a = sig.args
    return (len(a) >= 3 and isinstance(a[0], types.Array) and a[0].dtype == types.int64
            and isinstance(a[1], types.IntegerLiteral) and isinstance(a[2], types.Dispatcher))


def slots(cres) -> dict:
    """``slot -> (dispatcher, argument types)`` of the kcalls in a compile result (one
    that was compiled now: a result loaded from the disk cache has no call types)."""
    # the type annotation's: saving to the disk cache sets fndesc.calltypes to None
    return _slots_of(cres.type_annotation.calltypes)


def _slots_of(calltypes) -> dict:
    out = {}
    for sig in calltypes.values():
        if sig is not None and _is_kcall(sig):
            out[sig.args[1].literal_value] = (sig.args[2].dispatcher, tuple(sig.args[3:]))
    return out


def _type_call(kp, slot, kern, args):
    if not isinstance(slot, types.IntegerLiteral) or not isinstance(kern, types.Dispatcher):
        return None
    argtypes = tuple(types.unliteral(a) for a in args)
    # the kernel is not compiled here: typing the entry needs only its argument types
    # (generated kernels return nothing), so the kernels compile after the entry, side
    # by side (compile_pool.py), when its table is made
    restype = types.none
    n = slot.literal_value

    def codegen(context, builder, sig, llargs):
        table = context.make_array(sig.args[0])(context, builder, llargs[0])
        addr = builder.load(builder.gep(table.data, [context.get_constant(types.intp, n)]))
        fnty = context.call_conv.get_function_type(restype, argtypes)
        fn = builder.inttoptr(addr, fnty.as_pointer())
        status, res = context.call_conv.call_function(builder, fn, restype, argtypes,
                                                      list(llargs[3:]))
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)  # the kernel raised
        return res

    return restype(kp, slot, kern, *argtypes), codegen


_FIXED: dict = {}


def _fixed(n: int):
    """``kcall<n>``: an intrinsic with exactly ``n`` kernel arguments (made once)."""
    fn = _FIXED.get(n)
    if fn is None:
        params = ", ".join(f"a{i}" for i in range(n))
        src = (f"def kcall{n}(typingctx, kp, slot, kern{', ' if n else ''}{params}):\n"
               f"    return _type_call(kp, slot, kern, ({params}{',' if n == 1 else ''}))\n")
        ns = {"_type_call": _type_call}
        exec(src, ns)  # a signature of n parameters: numba types intrinsics by it
        fn = _FIXED[n] = intrinsic(prefer_literal=True)(ns[f"kcall{n}"])
    return fn


def __getattr__(name: str):
    if name.startswith("kcall") and name[5:].isdigit():
        return _fixed(int(name[5:]))
    if name.startswith("tview_"):
        return _table_view(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- the buffer table: constants and slots by address -----------------------------------

def table_name(dtype: str, ndim: int, readonly: bool) -> str:
    """The intrinsic that views a table entry as a C array of ``dtype`` and ``ndim``."""
    return f"tview_{dtype}_{ndim}{'r' if readonly else 'w'}"


def fill_table(arrays) -> np.ndarray:
    """The buffer table of ``arrays`` (C-contiguous; the caller keeps them alive while
    the table is in use): per array its data address, then its dims (int64), at the
    offsets of ``kernel_ir.table_offsets``."""
    rows = []
    for a in arrays:
        rows.append(a.ctypes.data)
        rows.extend(a.shape)
    return np.array(rows or [0], np.int64)


_VIEWS: dict = {}


def _table_view(name: str):
    """``tview_<dtype>_<ndim><r|w>(bp, off)``: the C array whose address and dims are
    ``bp[off]`` and ``bp[off + 1:off + 1 + ndim]``, readonly (``r``) or not (``w``); no
    reference (meminfo NULL), like :func:`view`. Constants and buffer slots reach an
    entry this way: by one int64 table made once per program, not one parameter each
    (each array parameter costs the entry's compile about 10 ms; see README)."""
    fn = _VIEWS.get(name)
    if fn is not None:
        return fn
    try:
        dtname, rest = name[len("tview_"):].rsplit("_", 1)
        nd, ro = int(rest[:-1]), rest[-1] == "r"
        dt = numba.from_dtype(np.dtype(dtname))
    except Exception:  # noqa: BLE001 - not one of ours
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    rt = types.Array(dt, nd, "C", readonly=ro)

    def tview(typingctx, bp, off):
        if not (isinstance(bp, types.Array) and bp.dtype == types.int64
                and isinstance(off, types.Integer)):
            return None

        def codegen(context, builder, sig, llargs):
            table = context.make_array(sig.args[0])(context, builder, llargs[0])
            at = context.cast(builder, llargs[1], sig.args[1], types.intp)
            intp = context.get_value_type(types.intp)

            def word(j):
                at_j = builder.add(at, ir.Constant(intp, j))
                return builder.load(builder.gep(table.data, [at_j]))

            data = builder.inttoptr(word(0), context.get_data_type(dt).as_pointer())
            return _c_array(context, builder, rt, data, [word(1 + i) for i in range(nd)])

        return rt(bp, off), codegen

    tview.__name__ = tview.__qualname__ = name
    fn = _VIEWS[name] = intrinsic(tview)
    return fn


@intrinsic
def view(typingctx, base, off, shape):
    """A C-contiguous array of ``shape`` over ``base``'s data from element ``off``, with
    no bounds check and no reference (meminfo NULL): valid only while ``base`` lives, so
    it must never leave the entry (entries return 0, and copy into their outputs)."""
    if not isinstance(base, types.Array) or not isinstance(off, types.Integer):
        return None
    if not isinstance(shape, types.BaseTuple) or not all(
            isinstance(t, types.Integer) for t in shape):
        return None
    nd = len(shape)
    rt = types.Array(base.dtype, nd, "C", readonly=not base.mutable)

    def codegen(context, builder, sig, llargs):
        src = context.make_array(sig.args[0])(context, builder, llargs[0])
        dims = [context.cast(builder, builder.extract_value(llargs[2], i), sig.args[2][i],
                             types.intp) for i in range(nd)]
        start = context.cast(builder, llargs[1], sig.args[1], types.intp)
        return _c_array(context, builder, rt, builder.gep(src.data, [start]), dims)

    return rt(base, off, shape), codegen


def _c_array(context, builder, rt, data, dims):
    """The value of a C-contiguous array of type ``rt`` over ``data`` (a typed pointer)
    with ``dims`` (intp values): strides from the dims, no reference (meminfo NULL)."""
    intp = context.get_value_type(types.intp)
    itemsize = context.get_abi_sizeof(context.get_data_type(rt.dtype))
    strides, step = [], ir.Constant(intp, itemsize)
    for d in reversed(dims):
        strides.append(step)
        step = builder.mul(step, d)
    strides.reverse()
    out = context.make_array(rt)(context, builder)
    context.populate_array(out, data=data, shape=dims, strides=strides,
                           itemsize=ir.Constant(intp, itemsize), meminfo=None)
    return out._getvalue()
