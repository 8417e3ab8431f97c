"""dtypes: TF-style names over numpy dtypes (``jt.float32 == np.float32`` holds)."""

from __future__ import annotations

import numpy as np

from .compiler.ir import dtype_name


class DType:
    """A tensor's element type. Compares equal to its numpy dtype and its name."""

    __slots__ = ("name", "_np")

    def __init__(self, name: str):
        self._np = np.dtype(name)
        self.name = self._np.name

    @property
    def as_numpy_dtype(self):
        return self._np.type

    @property
    def dtype(self) -> np.dtype:  # lets np.dtype(jt.float32) work
        return self._np

    @property
    def is_floating(self) -> bool:
        return self._np.kind == "f"

    @property
    def is_integer(self) -> bool:
        return self._np.kind in "iu"

    @property
    def is_bool(self) -> bool:
        return self._np.kind == "b"

    def __eq__(self, other):
        if isinstance(other, DType):
            return self._np == other._np
        try:
            return self._np == np.dtype(other)
        except TypeError:
            return False

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"jt.{self.name}"

    __str__ = __repr__


float16 = DType("float16")
float32 = DType("float32")
float64 = DType("float64")
int8 = DType("int8")
int16 = DType("int16")
int32 = DType("int32")
int64 = DType("int64")
uint8 = DType("uint8")
bool_ = DType("bool")

_BY_NAME = {d.name: d for d in (float16, float32, float64, int8, int16, int32, int64, uint8, bool_)}


def as_dtype(x) -> DType:
    """A DType from a DType, numpy dtype, Python type or name."""
    if isinstance(x, DType):
        return x
    try:
        return _BY_NAME[x]
    except (KeyError, TypeError):
        pass
    if x is float:
        return float32
    if x is int:
        return int32
    if x is bool:
        return bool_
    name = dtype_name(x)
    if name not in _BY_NAME:
        raise TypeError(f"jittape does not support dtype {name}")
    return _BY_NAME[name]
