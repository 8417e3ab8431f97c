"""Ops whose value is a size: ``shape`` and ``size``.

Eagerly they read the array's shape. In a graph traced with symbolic sizes
(``jittape.compiler.dims``) they stay nodes until a call binds the sizes; then
``ir.concretize`` makes each a constant (their records' ``from_types``), so no
backend ever runs them and the constant folds into what uses it (the ``1/N`` of a
mean becomes a kernel argument, as for a trace with known sizes).
"""

from __future__ import annotations

import numpy as np

from ..compiler.ir import NO_GRADIENT, Type
from ..tensor import apply
from .registry import defop, prod


def _count(shape, axes):
    return prod(shape[a] for a in axes)


def _shape_value(types, out_type):
    return np.asarray(types[0].shape, dtype=out_type)


def _shape_infer(types, out_type):
    return Type((types[0].rank,), out_type)


shape_op = defop(
    "shape", inputs=1, kind="shape",
    forward=lambda x, out_type: np.asarray(x.shape, dtype=out_type),
    infer=_shape_infer, vjp=NO_GRADIENT,
    from_types=_shape_value,
)


def _size_value(types, axes, dtype):
    return np.asarray(_count(types[0].shape, axes), dtype=dtype)


def _size_infer(types, axes, dtype):
    (x,) = types
    for a in axes:
        if not 0 <= a < x.rank:
            raise ValueError(f"axis {a} out of range for rank {x.rank}")
    return Type((), dtype)


size_op = defop(
    "size", inputs=1, kind="shape",
    forward=lambda x, axes, dtype: np.asarray(_count(x.shape, axes), dtype=dtype),
    infer=_size_infer, vjp=NO_GRADIENT,
    from_types=_size_value,
)


def symbolic_shape(x, out_type="int32"):
    """``shape(x)`` as a node, for a tensor whose type has symbolic sizes."""
    return apply(shape_op, x, out_type=out_type)


def symbolic_size(x, axes, dtype):
    """The number of elements of ``x`` over ``axes`` as a scalar of ``dtype`` (a node,
    for a tensor whose type has symbolic sizes)."""
    return apply(size_op, x, axes=tuple(int(a) for a in axes), dtype=dtype)
