"""``jt.function``: the package of ``jittape.function``; the code is in ``polymorphic``."""

from .polymorphic import (  # noqa: F401
    CacheInfo, ConcreteFunction, Explanation, Function, FunctionTracer, TensorSpec, _Binding,
    _WeakMethod, _dict_keys, _live_functions, function,
)

__all__ = ["function", "Function", "TensorSpec", "CacheInfo"]
