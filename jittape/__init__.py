"""jittape: a TensorFlow-2.x-style GradientTape over numpy whose tape is a compiler IR.

    import jittape as jt

    x = jt.Variable(3.0)
    with jt.GradientTape() as tape:
        y = x ** 2
    tape.gradient(y, x)  # <jt.Tensor: shape=(), dtype=float32, numpy=6.0>
"""

from .compiler.malloc import keep_freed_memory as _keep_freed_memory
from . import errors, nest  # noqa: F401
from .dtypes import (  # noqa: F401
    DType, as_dtype, bool_ as bool, float16, float32, float64, int8, int16, int32, int64, uint8,
)
from .tensor import Tensor, TensorShape, Variable, convert_to_tensor  # noqa: F401
from .ops import (  # noqa: F401
    abs, add, argmax, argmin, broadcast_to, cast, clip_by_global_norm, clip_by_norm,
    clip_by_value, concat, cos, divide, equal, exp,
    expand_dims, fill, floor, floordiv, floormod, gather, global_norm, greater, greater_equal,
    identity, is_finite, is_nan, less, less_equal, log, log1p, logical_and, logical_not,
    logical_or, matmul, maximum, minimum, mod, multiply, negative, norm, not_equal, one_hot,
    ones, ones_like, pow, reciprocal, reduce_all, reduce_any, reduce_logsumexp, reduce_max,
    reduce_mean, reduce_min, reduce_sum, reshape, shape, sigmoid, sign, sin, size, sqrt, square,
    squeeze, stack, stop_gradient, subtract, tanh, transpose, truediv, unstack, where, zeros,
    zeros_like,
)
from .ops import nn  # noqa: F401
from .ops import (  # noqa: F401 - creation, shaping, scans, sorting, einsum
    add_n, argsort, cumprod, cumsum, einsum, eye, linspace, meshgrid, pad, range, reduce_prod,
    repeat, sort, tile,
)
from .tape import GradientTape, UnconnectedGradients, custom_gradient  # noqa: F401
from .compiler.backends import get_backend, set_backend  # noqa: F401
from .compiler import cache  # noqa: F401
from . import debugging  # noqa: F401
from .compiler import profiler  # noqa: F401
from . import math  # noqa: F401
from . import image, linalg  # noqa: F401
from . import random, train  # noqa: F401
from . import distributed  # noqa: F401
from .module import Module, name_scope  # noqa: F401
from . import config  # noqa: F401
from .function import Function, TensorSpec, function  # noqa: F401
from .printing import print  # noqa: F401,A001 (tf.print)
from . import data  # noqa: F401
from . import saved_model  # noqa: F401


def constant(value, dtype=None, shape=None, name=None):  # noqa: F811 (TF's argument name)
    """A tensor from a Python value or numpy array (Python floats become float32)."""
    t = convert_to_tensor(value, dtype=dtype)
    if shape is not None:
        import numpy as _np

        from .ops.elementwise import as_shape as _as_shape

        shape = _as_shape(shape, "constant")  # an int is a 1-D shape, as in TF
        t = Tensor(_np.broadcast_to(t.numpy(), shape).copy(), _own=True)
    return t


_keep_freed_memory()


def _load_default_backend():
    """Load the default backend's compiler at import (``backends.preload``)."""
    from .compiler import backends as _backends

    _backends.preload()


_load_default_backend()

newaxis = None  # x[:, jt.newaxis] inserts an axis, as tf.newaxis

# Keras loads on first use, as ``tf.keras`` does: ``import jittape`` (and so ``import
# jittape.compiler`` or ``import passes``) loads no Keras module. The short forms are
# the Keras modules and classes themselves: ``jt.layers is jt.keras.layers``.
_KERAS_MODULES = frozenset({"layers", "optimizers", "losses", "metrics", "initializers",
                            "regularizers", "constraints"})
_KERAS_NAMES = frozenset({"Sequential", "Model", "Input"})


def __getattr__(name):
    import importlib

    if name == "keras" or name in _KERAS_MODULES:
        value = importlib.import_module(f"{__name__}.keras" if name == "keras"
                                        else f"{__name__}.keras.{name}")
    elif name in _KERAS_NAMES:
        value = getattr(importlib.import_module(f"{__name__}.keras"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | {"keras"} | _KERAS_MODULES | _KERAS_NAMES)


class _ShortForms:
    """``import jittape.layers`` (and ``jittape.layers.core``, ``jittape.optimizers.
    schedules``, ...) finds the Keras module itself, as ``jt.layers`` does; ``import
    jittape.cache`` / ``jittape.profiler`` find the compiler's."""

    _ALIASES = {**{f"{__name__}.{m}": f"{__name__}.keras.{m}" for m in _KERAS_MODULES},
                f"{__name__}.cache": f"{__name__}.compiler.cache",
                f"{__name__}.profiler": f"{__name__}.compiler.profiler"}

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        head = next((a for a in cls._ALIASES if fullname == a or fullname.startswith(a + ".")),
                    None)
        if head is None:
            return None
        import importlib.util

        return importlib.util.spec_from_loader(fullname, _AliasLoader(
            cls._ALIASES[head] + fullname[len(head):]))


class _AliasLoader:
    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        import importlib

        return importlib.import_module(self.real)

    def exec_module(self, module):
        pass


import sys as _sys  # noqa: E402

if not any(isinstance(f, type) and f.__name__ == "_ShortForms" for f in _sys.meta_path):
    _sys.meta_path.insert(0, _ShortForms)

from .version import __version__  # noqa: E402,F401
