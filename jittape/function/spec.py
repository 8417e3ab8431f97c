"""``jt.TensorSpec``: the shape and dtype of a tensor argument (``input_signature``,
``get_concrete_function``), and the specs of traced types that introspection shows."""

from __future__ import annotations

import numpy as np

from ..dtypes import as_dtype
from ..compiler.ir import Type
from ..tensor import Tensor, Variable


class TensorSpec:
    """The shape (``None`` for a dimension of any size) and dtype of a tensor argument,
    for ``input_signature`` (``tf.TensorSpec``)."""

    __slots__ = ("shape", "dtype", "name")

    def __init__(self, shape, dtype="float32", name=None):
        self.shape = None if shape is None else tuple(
            None if d is None else int(d) for d in shape)
        self.dtype = as_dtype(dtype)
        self.name = name

    @classmethod
    def from_tensor(cls, tensor, name=None):
        return cls(tuple(tensor.shape), tensor.dtype, name)

    def is_compatible_with(self, value) -> bool:
        shape = tuple(np.shape(value)) if not isinstance(value, (Tensor, Variable)) else tuple(
            value.shape)
        if self.shape is None:
            return True
        return len(shape) == len(self.shape) and all(
            w is None or w == d for w, d in zip(self.shape, shape))

    def __eq__(self, other):
        return (isinstance(other, TensorSpec) and self.shape == other.shape
                and self.dtype == other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype.name))

    def __repr__(self):
        shape = "None" if self.shape is None else "(" + ", ".join(
            "None" if d is None else str(d) for d in self.shape) + ("," if len(self.shape) == 1
                                                                     else "") + ")"
        return f"TensorSpec(shape={shape}, dtype=jt.{self.dtype.name}, name={self.name!r})"


def _spec_of(ty: Type, name=None) -> "TensorSpec":
    """The ``jt.TensorSpec`` of a traced type (a symbolic size is None)."""
    return TensorSpec(tuple(d if isinstance(d, int) else None for d in ty.shape), ty.dtype,
                      name=name)


def _describe_spec(x) -> str:
    """A structure of specs and values as TF's pretty-printed signature writes it."""
    if isinstance(x, TensorSpec):
        return repr(x)
    if isinstance(x, dict):
        return "Dict[" + ", ".join(f"[{k!r}, {_describe_spec(v)}]" for k, v in x.items()) + "]"
    if isinstance(x, tuple):
        return "Tuple[" + ", ".join(_describe_spec(v) for v in x) + "]"
    if isinstance(x, list):
        return "List[" + ", ".join(_describe_spec(v) for v in x) + "]"
    return f"Literal[{x!r}]"


def _from_specs(fn_name, args, kwargs):
    """Arguments with each ``jt.TensorSpec`` replaced by a stand-in tensor, and the
    stand-ins' arrays with the dims their specs leave None (for the
    ``get_concrete_function`` of jt.function ``fn_name``)."""
    stand_ins: dict = {}

    def sub(x):
        if isinstance(x, TensorSpec):
            if x.shape is None:
                raise TypeError(
                    f"jt.function {fn_name!r}.get_concrete_function: a TensorSpec of "
                    "unknown rank (shape=None) cannot be traced; give its rank, with None "
                    "for the dims that vary")
            # a None dim gets size 2 for the stand-in: it is traced as a symbol (the
            # value never matters), and 1 would look like a broadcast
            a = np.zeros(tuple(2 if d is None else d for d in x.shape), x.dtype._np)
            stand_ins[id(a)] = frozenset(j for j, d in enumerate(x.shape) if d is None)
            return Tensor(a, _own=True)
        if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
            return type(x)(sub(v) for v in x)
        if isinstance(x, dict):
            return {k: sub(v) for k, v in x.items()}
        return x

    return sub(args), sub(kwargs), stand_ins
