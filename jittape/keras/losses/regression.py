"""The regression losses as per-sample functions: squared, absolute, percentage and
logarithmic errors, cosine similarity, Huber and log-cosh."""

from __future__ import annotations

import math

from ... import ops as _ops
from .base import EPSILON, _check_axis, _hyper, _number, _prepare


def mean_squared_error(y_true, y_pred):
    """mean((y_pred - y_true)^2, axis=-1)."""
    y, p = _prepare("mean_squared_error", y_true, y_pred)
    return _ops.reduce_mean(_ops.square(p - y), axis=-1)


def mean_absolute_error(y_true, y_pred):
    """mean(|y_pred - y_true|, axis=-1)."""
    y, p = _prepare("mean_absolute_error", y_true, y_pred)
    return _ops.reduce_mean(_ops.abs(p - y), axis=-1)


def mean_absolute_percentage_error(y_true, y_pred):
    """100 * mean(|(y_true - y_pred) / max(|y_true|, 1e-7)|, axis=-1).

    Example::

        jt.losses.mape([[2.0, 4.0]], [[1.0, 5.0]])  # [37.5]
    """
    y, p = _prepare("mean_absolute_percentage_error", y_true, y_pred)
    ratio = (y - p) / _ops.maximum(_ops.abs(y), EPSILON)
    return 100.0 * _ops.reduce_mean(_ops.abs(ratio), axis=-1)


def mean_squared_logarithmic_error(y_true, y_pred):
    """mean((log(1 + max(y_pred, 1e-7)) - log(1 + max(y_true, 1e-7)))^2, axis=-1)."""
    y, p = _prepare("mean_squared_logarithmic_error", y_true, y_pred)
    d = _ops.log1p(_ops.maximum(p, EPSILON)) - _ops.log1p(_ops.maximum(y, EPSILON))
    return _ops.reduce_mean(_ops.square(d), axis=-1)


def cosine_similarity(y_true, y_pred, axis=-1):
    """-sum(normalize(y_true) * normalize(y_pred), axis): -1 for the same direction, 0 for
    orthogonal vectors (or a zero vector), 1 for opposite ones.

    ``normalize(x) = x * min(1 / |x|, 1 / 1e-7)``, Keras' L2 normalization.
    """
    axis = _check_axis("cosine_similarity", axis)
    y, p = _prepare("cosine_similarity", y_true, y_pred)
    # rsqrt(max(|x|^2, eps^2)) is Keras' min(rsqrt(|x|^2), 1 / eps), with a finite
    # gradient at a zero vector
    y = _ops.nn.l2_normalize(y, axis=axis, epsilon=EPSILON * EPSILON)
    p = _ops.nn.l2_normalize(p, axis=axis, epsilon=EPSILON * EPSILON)
    return -_ops.reduce_sum(y * p, axis=axis)


def huber(y_true, y_pred, delta=1.0):
    """mean(0.5 e^2 where |e| <= delta, else delta |e| - 0.5 delta^2, axis=-1), with e =
    y_pred - y_true: quadratic near 0, linear (slope delta) beyond ``delta``.

    Example::

        jt.losses.huber([[0.0, 0.0]], [[0.5, 3.0]])  # [(0.125 + 2.5) / 2]
    """
    delta = _number("huber", "delta", delta, 0.0, low_open=True)
    y, p = _prepare("huber", y_true, y_pred)
    d = _hyper(delta, p.dtype)
    err = p - y
    size = _ops.abs(err)
    quadratic = 0.5 * _ops.square(err)
    linear = d * size - 0.5 * (d * d)
    return _ops.reduce_mean(_ops.where(size <= d, quadratic, linear), axis=-1)


def log_cosh(y_true, y_pred):
    """mean(log(cosh(y_pred - y_true)), axis=-1), computed as ``e + softplus(-2 e) -
    log 2`` so that large errors do not overflow (about ``|e| - log 2`` there)."""
    y, p = _prepare("log_cosh", y_true, y_pred)
    e = p - y
    return _ops.reduce_mean(e + _ops.nn.softplus(-2.0 * e) - math.log(2.0), axis=-1)
