"""Collectives inside compiled programs: the MPI library's own ``MPI_Allreduce`` and
``MPI_Bcast``, called from generated kernels through addresses in a table.

A compiled step reaches the network without Python: the kernel that lowers an
``allreduce`` node calls :func:`allreduce` (an intrinsic), which loads the library's
function address and the MPI handles (datatype, op, communicator) from a table and
calls the C function. The kernel runs with the GIL released (``nogil``), so the
watchdog thread of ``jittape.distributed`` can abort a collective that hangs.

The tables hold process-specific values (addresses, handles): they reach a program
as a constant of its buffer table, never as text in generated source, so a module
cached on disk stays valid in every process. One table per dtype
(:func:`table`), zero until ``jittape.distributed.init`` fills it (:func:`fill`): a
process without MPI copies (one rank: the sum is the value itself).

Layout of a table (int64 words)::

    0 MPI_Allreduce address    1 datatype handle   2 MPI_SUM handle   3 communicator
    4 ranks                    5 MPI_Bcast address 6 MPI_IN_PLACE

Handles are passed as 64-bit words: MPICH's are ``int`` and Open MPI's pointers;
either way they travel in an integer register (x86-64 and AArch64 calling
conventions), where a callee taking an ``int`` reads the low half.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

WORDS = 8
_TABLES: dict = {}

# dtypes a collective moves (the MPI datatype for each is named by jittape.distributed)
DTYPES = ("float32", "float64", "int32", "int64")


def table(dtype: str) -> np.ndarray:
    """The process's table for ``dtype`` (one array, filled in place: programs built
    before ``init`` see the library once it is there)."""
    t = _TABLES.get(dtype)
    if t is None:
        t = _TABLES[dtype] = np.zeros(WORDS, np.int64)
    return t


def fill(dtype: str, allreduce_addr: int, datatype: int, op_sum: int, comm: int,
         ranks: int, bcast_addr: int, in_place: int) -> None:
    t = table(dtype)
    t[:] = 0
    words = (allreduce_addr, datatype, op_sum, comm, ranks, bcast_addr, in_place)
    # handles come as unsigned words (a negative C int, sign-extended): the same bits
    t[:7] = [w - (1 << 64) if w >= (1 << 63) else w for w in (int(w) for w in words)]


def clear() -> None:
    for t in _TABLES.values():
        t[:] = 0


def _word(builder, context, arr, k):
    return builder.load(builder.gep(arr.data, [context.get_constant(types.intp, k)]))


def _check(h, *arrays):
    return (isinstance(h, types.Array) and h.dtype == types.int64
            and all(isinstance(a, types.Array) for a in arrays))


@intrinsic
def allreduce(typingctx, h, buf):
    """``MPI_Allreduce(MPI_IN_PLACE, buf, buf.size, h[1], h[2], h[3])`` through ``h[0]``
    (the sum over the ranks, in place); returns the library's error code (0: success)."""
    if not _check(h, buf):
        return None

    def codegen(context, builder, sig, llargs):
        ht = context.make_array(sig.args[0])(context, builder, llargs[0])
        ba = context.make_array(sig.args[1])(context, builder, llargs[1])
        i8p, i32, i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)
        fnty = ir.FunctionType(i32, [i8p, i8p, i32, i64, i64, i64])
        fn = builder.inttoptr(_word(builder, context, ht, 0), fnty.as_pointer())
        in_place = builder.inttoptr(_word(builder, context, ht, 6), i8p)
        return builder.call(fn, [in_place, builder.bitcast(ba.data, i8p),
                                 builder.trunc(ba.nitems, i32), _word(builder, context, ht, 1),
                                 _word(builder, context, ht, 2), _word(builder, context, ht, 3)])

    return types.int32(h, buf), codegen


@intrinsic
def bcast(typingctx, h, buf, root):
    """``MPI_Bcast(buf, buf.size, h[1], root, h[3])`` through ``h[5]``; returns the
    library's error code."""
    if not (_check(h, buf) and isinstance(root, types.Integer)):
        return None

    def codegen(context, builder, sig, llargs):
        ht = context.make_array(sig.args[0])(context, builder, llargs[0])
        ba = context.make_array(sig.args[1])(context, builder, llargs[1])
        i8p, i32, i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)
        fnty = ir.FunctionType(i32, [i8p, i32, i64, i32, i64])
        fn = builder.inttoptr(_word(builder, context, ht, 5), fnty.as_pointer())
        r = context.cast(builder, llargs[2], sig.args[2], types.int32)
        return builder.call(fn, [builder.bitcast(ba.data, i8p), builder.trunc(ba.nitems, i32),
                                 _word(builder, context, ht, 1), r,
                                 _word(builder, context, ht, 3)])

    return types.int32(h, buf, root), codegen
