"""The op catalogue. Each op is declared once in its kind's module; this package
re-exports the public functions."""

from .registry import REGISTRY, defop  # noqa: F401
from .elementwise import (  # noqa: F401
    abs, add, cast, cos, divide, equal, exp, fill, floor, floordiv, floormod, greater,
    greater_equal, identity, is_finite, is_nan, less, less_equal, log, log1p, logical_and,
    logical_not, logical_or, maximum, minimum, mod, multiply, negative, not_equal, ones,
    ones_like, pow, reciprocal, relu, sigmoid, sign, sin, sqrt, square, stop_gradient,
    subtract, tanh, truediv, where, zeros, zeros_like,
)
from .elementwise import erf, erfc, expm1, rsqrt  # noqa: F401
from .shaping import (  # noqa: F401
    broadcast_to, concat, expand_dims, gather, getitem, one_hot, reshape, shape, size, squeeze,
    stack, strided_slice, transpose, unstack,
)
from .reduction import (  # noqa: F401
    argmax, argmin, norm, reduce_all, reduce_any, reduce_logsumexp, reduce_max, reduce_mean,
    reduce_min, reduce_prod, reduce_sum,
)
from .contraction import matmul  # noqa: F401
from . import sizes  # noqa: F401
from .clip import clip_by_global_norm, clip_by_norm, clip_by_value, global_norm  # noqa: F401
from .debugging import check_numerics  # noqa: F401
from . import nn  # noqa: F401
from .creation import add_n, eye, linspace, meshgrid, pad, range, repeat, tile  # noqa: F401
from .scan import cumprod, cumsum  # noqa: F401
from .sorting import argsort, sort, top_k  # noqa: F401
from .einsum import einsum  # noqa: F401
from . import linalg  # noqa: F401
from . import collective  # noqa: F401


def _install() -> None:
    """Give Tensor and Variable their operators (``+``, ``@``, ``[]``, ...): the ops
    install themselves into the tensor module below them."""
    import sys

    from .. import tensor

    if not tensor._OPS:
        tensor._OPS.append(sys.modules[__name__])


_install()
