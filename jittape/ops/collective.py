"""Collectives as ops: ``allreduce`` and ``broadcast`` across the ranks of a job.

Both are side effects (``effect=True``): no pass drops, merges, folds or reorders
them, so every rank runs the same collectives in the same order, whichever backend
runs its graph. Eagerly, and on the ``interpret`` backend, the forward calls the
active world (``WORLD[0]``: one process until ``jittape.distributed.init`` puts an
MPI world there); the ``cpu`` backend calls the MPI library from the kernel itself
(``backends/collective.py``).
"""

from __future__ import annotations

import numpy as np

from ..compiler.ir import NO_GRADIENT
from ..tensor import apply, convert_args
from .registry import defop


class LocalWorld:
    """One process and no MPI: a sum over one rank is the value itself."""

    rank = 0
    size = 1

    def allreduce(self, x: np.ndarray, average: bool) -> np.ndarray:
        return np.array(x, copy=True)

    def broadcast(self, x: np.ndarray, root: int) -> np.ndarray:
        if root != 0:
            raise ValueError(f"broadcast: root {root} is not a rank of a one-process job")
        return np.array(x, copy=True)

    def run_step(self, cf, run, leaves):
        """Run a call of a compiled function ``cf`` that has collectives."""
        return run(leaves)


WORLD: list = [LocalWorld()]

# the ops a graph runs across ranks (jt.function guards a call of a program that has one)
NAMES = ("allreduce", "broadcast")


def _numeric(types, opname):
    t = types[0]
    if t.dtype not in ("float32", "float64", "int32", "int64"):
        raise TypeError(f"{opname} moves float32, float64, int32 or int64 tensors, "
                        f"got {t.dtype}")
    return t


def _allreduce_infer(types, average):
    t = _numeric(types, "allreduce")
    if average and not t.is_float:
        raise TypeError(f"allreduce(average=True) needs a float tensor, got {t.dtype} "
                        "(sum it, or cast it first)")
    return t


def _allreduce_fwd(x, average):
    return WORLD[0].allreduce(np.asarray(x, order="C"), bool(average))


def _allreduce_vjp(g, out, x, average):
    # every rank's output is the sum (mean) of every rank's input: the gradient of the
    # job's total loss for one rank's input is the sum (mean) of the ranks' gradients
    return (apply(allreduce_op, g, average=average),)


allreduce_op = defop(
    "allreduce", inputs=1, kind="other", forward=_allreduce_fwd, infer=_allreduce_infer,
    vjp=_allreduce_vjp, pure=False, effect=True, view="inplace",
    doc="the sum (average=True: mean) of the tensor over the job's ranks",
)


def _broadcast_infer(types, root):
    return _numeric(types, "broadcast")


def _broadcast_fwd(x, root):
    return WORLD[0].broadcast(np.asarray(x, order="C"), int(root))


broadcast_op = defop(
    "broadcast", inputs=1, kind="other", forward=_broadcast_fwd, infer=_broadcast_infer,
    vjp=NO_GRADIENT, pure=False, effect=True, view="inplace",
    doc="rank root's value of the tensor, on every rank",
)


def allreduce(x, average=True):
    """The sum (``average=True``: the mean) of ``x`` over the ranks, on every rank."""
    (x,) = convert_args((x,))
    return apply(allreduce_op, x, average=bool(average))


def broadcast(x, root=0):
    """Rank ``root``'s ``x``, on every rank."""
    (x,) = convert_args((x,))
    return apply(broadcast_op, x, root=int(root))
