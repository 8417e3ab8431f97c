"""Checking ``apply_gradients``' pairs: types, shapes and dtypes, and the ``None`` gradients."""

from __future__ import annotations

import warnings

import numpy as np

from ... import ops as _ops
from ...errors import InvalidArgumentError
from ...tensor import Tensor, Variable, convert_to_tensor


def _path(v) -> str:
    """How Keras 3's messages name a variable: its path (a plain ``jt.Variable``, which
    has none, by its TF name)."""
    return getattr(v, "path", None) or v.name


def checked_pairs(optimizer, grads_and_vars):
    """The ``(gradient, variable)`` pairs with a gradient, each gradient a tensor of its
    variable's shape and dtype; one ``UserWarning`` names the variables without one (a
    ``ValueError`` when none has one). Called by ``apply_gradients`` only (the warning
    points at its caller)."""
    cls = type(optimizer).__name__
    pairs, missing = [], []
    for item in grads_and_vars:
        try:
            g, v = item
        except (TypeError, ValueError):
            raise TypeError(
                f"{cls}.apply_gradients expects (gradient, variable) pairs, "
                f"e.g. zip(grads, model.trainable_variables); got {item!r}"
            ) from None
        if not isinstance(v, Variable):
            raise TypeError(
                f"{cls}.apply_gradients: the second element of each pair must "
                f"be a jt.Variable, got {type(v).__name__}"
            )
        if g is None:
            missing.append(v)
            continue
        if not v.dtype.is_floating:
            raise TypeError(
                f"{cls}.apply_gradients: variable {_path(v)!r} has dtype "
                f"{v.dtype.name}; only float variables can be optimized"
            )
        g = g if isinstance(g, Tensor) else convert_to_tensor(
            g.read_value() if isinstance(g, Variable) else np.asarray(g)
        )
        if not g.dtype.is_floating:
            raise TypeError(
                f"{cls}.apply_gradients: the gradient for {_path(v)!r} has "
                f"dtype {g.dtype.name}; gradients must be floats"
            )
        if tuple(g.shape) != tuple(v.shape):
            raise InvalidArgumentError(
                f"{cls}.apply_gradients: the gradient for variable "
                f"{_path(v)!r} has shape {list(g.shape)}, but the variable has shape "
                f"{list(v.shape)}"
            )
        if g.dtype != v.dtype:
            g = _ops.cast(g, v.dtype)  # Keras casts gradients to the variable's dtype
        pairs.append((g, v))
    if missing:
        names = [_path(v) for v in missing]
        if not pairs:
            raise ValueError(
                f"No gradients provided for any variable: {names}. Check that the loss "
                "depends on the variables and was computed inside the GradientTape."
            )
        warnings.warn(
            f"Gradients do not exist for variables {names} when minimizing the loss; "
            "they were not updated. Check that the loss depends on them (and that they "
            "were read inside the GradientTape).",
            UserWarning,
            stacklevel=3,
        )
    return pairs
