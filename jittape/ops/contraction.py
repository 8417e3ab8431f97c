"""Contractions: matmul (batched, with numpy broadcasting of the batch dims)."""

from __future__ import annotations

import numpy as np

from ..compiler.ir import Type
from ..tensor import apply, convert_args
from . import shaping as S
from ..compiler.dims import unify
from .registry import broadcast_shapes, defop, same_dtype


def _dims(shape) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _matmul_infer(types):
    a, b = types
    dt = same_dtype(types, "matmul operands")
    if dt == "bool":
        raise TypeError("matmul is not defined for bool")
    if a.rank < 2 or b.rank < 2:
        raise ValueError(
            f"matmul needs rank >= 2 operands: In[0]: {list(a.shape)}, In[1]: {list(b.shape)}"
        )
    k1, k2 = a.shape[-1], b.shape[-2]
    if not unify(k1, k2):  # an unknown size and another become one
        raise ValueError(
            f"Matrix size-incompatible: In[0]: {_dims(a.shape)}, In[1]: {_dims(b.shape)}"
        )
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return Type(batch + (a.shape[-2], b.shape[-1]), dt)


def _matmul_vjp(g, out, a, b):
    return matmul(g, S.swap_last(b)), matmul(S.swap_last(a), g)


matmul_op = defop(
    "matmul", inputs=2, kind="matmul", forward=np.matmul, infer=_matmul_infer,
    vjp=_matmul_vjp,
)


def matmul(a, b, transpose_a=False, transpose_b=False, name=None):
    """Matrix product of the last two axes; leading axes broadcast as batch dims."""
    a, b = convert_args((a, b))
    if transpose_a:
        a = S.swap_last(a)
    if transpose_b:
        b = S.swap_last(b)
    return apply(matmul_op, a, b)
