"""check_numerics as an op: identity that raises on NaN/Inf, in both passes."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from ..tensor import _nan_inf, apply, convert_args
from .registry import defop


def _check_fwd(x, message, auto=False):
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        raise InvalidArgumentError(f"{message} : Tensor had {_nan_inf(x)} values")
    return x


def _check_infer(types, message, auto=False):
    return types[0]


def _check_vjp(g, out, x, message, auto=False):
    if auto:
        # inserted by enable_check_numerics after an op of a traced function: the
        # backward pass checks each gradient where it is made (autodiff.backward)
        return (g,)
    # as TF: the gradient flowing back through the check is checked too
    return (check_numerics(
        g, f"Not a number (NaN) or infinity (Inf) values detected in gradient. {message}"),)


check_numerics_op = defop(
    "check_numerics", inputs=1, kind="other", forward=_check_fwd, infer=_check_infer,
    view="checked",  # its output is its input (the compiled backends hand it on)
    pure=True,  # raises, but computes nothing else
    vjp=_check_vjp,
)


def check_numerics(tensor, message, name=None):
    """``tensor`` unchanged; raises InvalidArgumentError "<message> : Tensor had NaN values"
    (or Inf) if it holds any, here and for the gradient that flows back through it."""
    (x,) = convert_args((tensor,))
    return apply(check_numerics_op, x, message=str(message))
