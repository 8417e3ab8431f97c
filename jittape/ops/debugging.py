"""check_numerics as an op: identity that raises on NaN/Inf, in both passes."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from ..tensor import _nan_inf, apply, convert_args
from .registry import defop


def _check_fwd(x, message):
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise InvalidArgumentError(f"{message} : Tensor had {_nan_inf(x)} values")
    return x


def _check_infer(types, message):
    return types[0]


check_numerics_op = defop(
    "check_numerics", inputs=1, kind="other", forward=_check_fwd, infer=_check_infer,
    pure=True,  # raises, but computes nothing else
    vjp=lambda g, out, x, message: (check_numerics(g, message),),  # the gradient is checked too
)


def check_numerics(tensor, message, name=None):
    """``tensor`` unchanged; raises InvalidArgumentError "<message> : Tensor had NaN values"
    (or Inf) if it holds any, here and for the gradient that flows back through it."""
    (x,) = convert_args((tensor,))
    return apply(check_numerics_op, x, message=str(message))
