"""The hinge losses as per-sample functions: ``hinge``, ``squared_hinge`` and
``categorical_hinge``."""

from __future__ import annotations

from ... import ops as _ops
from .base import _prepare


def _hinge_labels(y):
    """Keras' convert_binary_labels_to_hinge: labels that are all 0 or 1 become -1 and 1;
    any other labels (already -1 and 1, or soft) are used as they are."""
    binary = _ops.reduce_all(_ops.logical_or(_ops.equal(y, 0.0), _ops.equal(y, 1.0)))
    return _ops.where(binary, 2.0 * y - 1.0, y)


def hinge(y_true, y_pred):
    """mean(max(1 - y_true * y_pred, 0), axis=-1); labels in {0, 1} are mapped to {-1, 1}.

    Example::

        jt.losses.hinge([[0.0, 1.0]], [[-0.5, 0.3]])  # [(0.5 + 0.7) / 2]
    """
    y, p = _prepare("hinge", y_true, y_pred)
    y = _hinge_labels(y)
    return _ops.reduce_mean(_ops.maximum(1.0 - y * p, 0.0), axis=-1)


def squared_hinge(y_true, y_pred):
    """mean(max(1 - y_true * y_pred, 0)^2, axis=-1); labels in {0, 1} become {-1, 1}."""
    y, p = _prepare("squared_hinge", y_true, y_pred)
    y = _hinge_labels(y)
    return _ops.reduce_mean(_ops.square(_ops.maximum(1.0 - y * p, 0.0)), axis=-1)


def categorical_hinge(y_true, y_pred):
    """max(neg - pos + 1, 0) for one-hot ``y_true``: ``pos = sum(y_true * y_pred)`` (the
    true class's score), ``neg = max((1 - y_true) * y_pred)`` (the best other score)."""
    y, p = _prepare("categorical_hinge", y_true, y_pred)
    pos = _ops.reduce_sum(y * p, axis=-1)
    neg = _ops.reduce_max((1.0 - y) * p, axis=-1)
    return _ops.maximum(neg - pos + 1.0, 0.0)
