"""The probabilistic losses as per-sample functions: the crossentropies (binary,
categorical, sparse, and their focal forms), KL divergence and Poisson."""

from __future__ import annotations

import numbers

import numpy as np

from ... import ops as _ops
from ...errors import InvalidArgumentError
from ..layers import keras_logits
from ...tensor import Tensor, Variable, convert_to_tensor
from .base import (
    EPSILON, _check_axis, _float_pred, _from_layer_logits, _hyper, _is_tensor, _number,
    _prepare, _remember_mask, _smooth, _warn_one_class,
)


def kl_divergence(y_true, y_pred):
    """sum(y * log(y / p), axis=-1), with y and p clipped to [1e-7, 1]."""
    y, p = _prepare("kl_divergence", y_true, y_pred)
    y = _ops.clip_by_value(y, EPSILON, 1.0)
    p = _ops.clip_by_value(p, EPSILON, 1.0)
    return _ops.reduce_sum(y * _ops.log(y / p), axis=-1)


def poisson(y_true, y_pred):
    """mean(y_pred - y_true * log(y_pred + 1e-7), axis=-1)."""
    y, p = _prepare("poisson", y_true, y_pred)
    return _ops.reduce_mean(p - y * _ops.log(p + EPSILON), axis=-1)


def _bce_of_probabilities(y, p):
    q = _ops.clip_by_value(p, EPSILON, 1.0 - EPSILON)
    return -(y * _ops.log(q) + (1.0 - y) * _ops.log(1.0 - q))


def binary_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    """Per-sample binary crossentropy, the mean over ``axis`` of the elementwise values."""
    axis = _check_axis("binary_crossentropy", axis)
    y, p = _prepare("binary_crossentropy", y_true, y_pred)
    y = _smooth("binary_crossentropy", y, label_smoothing, 2.0)
    p, from_logits = _from_layer_logits("binary_crossentropy", p, from_logits, "sigmoid")
    if from_logits:
        per = _ops.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=p)
    else:
        per = _bce_of_probabilities(y, p)
    return _ops.reduce_mean(per, axis=axis)


def binary_focal_crossentropy(y_true, y_pred, apply_class_balancing=False, alpha=0.25,
                              gamma=2.0, from_logits=False, label_smoothing=0.0, axis=-1):
    """Per-sample focal crossentropy (Lin et al., 2017): each element's binary
    crossentropy times ``(1 - p_t)^gamma``, ``p_t = y p + (1 - y)(1 - p)``, so that
    well-classified elements count less; ``gamma=0`` is ``binary_crossentropy``. With
    ``apply_class_balancing``, class 1 is also weighted by ``alpha``, class 0 by
    ``1 - alpha``. The mean over ``axis``.

    From logits (or a layer's sigmoid output) the crossentropy is the exact one from the
    logits and ``p = sigmoid(z)``, as in Keras on TensorFlow.
    """
    who = "binary_focal_crossentropy"
    axis = _check_axis(who, axis)
    alpha = _number(who, "alpha", alpha, 0.0, 1.0)
    gamma = _number(who, "gamma", gamma, 0.0)
    y, p = _prepare(who, y_true, y_pred)
    y = _smooth(who, y, label_smoothing, 2.0)
    if from_logits:
        z, p = p, _ops.sigmoid(p)
    else:
        z = keras_logits(p, "sigmoid")
    if z is not None:
        bce = _ops.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=z)
    else:
        bce = _bce_of_probabilities(y, p)
    if _is_tensor(gamma) or gamma != 0.0:
        p_t = y * p + (1.0 - y) * (1.0 - p)
        focal = _ops.pow(1.0 - p_t, _hyper(gamma, p.dtype)) * bce
    else:  # x^0 = 1, whose derivative at x = 0 would be 0 * inf (NaN, in Keras)
        focal = bce
    if apply_class_balancing:
        a = _hyper(alpha, p.dtype)
        focal = (y * a + (1.0 - y) * (1.0 - a)) * focal
    return _ops.reduce_mean(focal, axis=axis)


def categorical_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    """Per-sample crossentropy between one-hot (or soft) labels and predictions."""
    fn = "categorical_crossentropy"
    axis = _check_axis(fn, axis)
    y, p = _prepare(fn, y_true, y_pred)
    _warn_one_class(fn, p)
    y = _smooth(fn, y, label_smoothing, float(p.shape[-1]))  # the last axis, as Keras
    if axis in (-1, p.ndim - 1):
        p, from_logits = _from_layer_logits(fn, p, from_logits, "softmax")
    if from_logits:
        return -_ops.reduce_sum(y * _ops.nn.log_softmax(p, axis=axis), axis=axis)
    q = p / _ops.reduce_sum(p, axis=axis, keepdims=True)
    q = _ops.clip_by_value(q, EPSILON, 1.0 - EPSILON)
    return -_ops.reduce_sum(y * _ops.log(q), axis=axis)


def _class_alpha(who, alpha, p, axis):
    if _is_tensor(alpha):
        return _hyper(alpha, p.dtype)
    if isinstance(alpha, (list, tuple, np.ndarray)):
        a = np.asarray(alpha, dtype=np.float64)
        if a.ndim != 1 or a.size != p.shape[axis] or not np.all(np.isfinite(a)):
            raise ValueError(
                f"{who}: `alpha` must be a number or one finite number per class "
                f"({p.shape[axis]}), got {list(alpha)!r}")
        shape = [1] * p.ndim
        shape[axis] = a.size
        return convert_to_tensor(a.reshape(shape).astype(p.dtype._np))
    return _number(who, "alpha", alpha, 0.0)


def categorical_focal_crossentropy(y_true, y_pred, alpha=0.25, gamma=2.0, from_logits=False,
                                   label_smoothing=0.0, axis=-1):
    """Per-sample focal crossentropy for one-hot (or soft) labels: ``sum(-alpha (1 - p)^gamma
    y log p, axis)`` with ``p = y_pred / sum(y_pred)`` (``softmax(z)`` from logits) clipped
    to ``[1e-7, 1 - 1e-7]``. ``alpha`` is one weight, or one per class."""
    who = "categorical_focal_crossentropy"
    axis = _check_axis(who, axis)
    gamma = _number(who, "gamma", gamma, 0.0)
    y, p = _prepare(who, y_true, y_pred)
    _warn_one_class(who, p)
    a = _class_alpha(who, alpha, p, axis)
    y = _smooth(who, y, label_smoothing, float(p.shape[-1]))
    if from_logits:
        p = _ops.nn.softmax(p, axis=axis)
    q = p / _ops.reduce_sum(p, axis=axis, keepdims=True)
    q = _ops.clip_by_value(q, EPSILON, 1.0 - EPSILON)
    cce = -y * _ops.log(q)
    if _is_tensor(gamma) or gamma != 0.0:  # q < 1 after the clip: (1 - q)^0 is safe
        cce = _ops.pow(1.0 - q, _hyper(gamma, p.dtype)) * cce
    return _ops.reduce_sum(a * cce, axis=axis)


def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False, ignore_class=None,
                                    axis=-1):
    """Per-sample crossentropy with integer class ids ``y_true`` (shape ``y_pred.shape[:-1]``,
    or with a trailing axis of 1). Float labels holding whole numbers are accepted.

    Samples labelled ``ignore_class`` (say -1 or 255, a "void" class) give 0, and a loss
    class leaves them out of its mean, as Keras does.
    """
    fn = "sparse_categorical_crossentropy"
    p = _float_pred(fn, y_pred)
    if p.ndim == 0:
        raise InvalidArgumentError(f"{fn}: y_pred must have a class axis, got a scalar")
    if _check_axis(fn, axis) not in (-1, p.ndim - 1):
        raise InvalidArgumentError(f"{fn}: only the last axis can be the class axis, got "
                                   f"axis={axis}")
    if ignore_class is not None and (isinstance(ignore_class, bool) or not isinstance(
            ignore_class, numbers.Integral)):
        raise ValueError(f"{fn}: `ignore_class` must be an int or None, got {ignore_class!r}")
    y = y_true.read_value() if isinstance(y_true, Variable) else y_true
    if not isinstance(y, Tensor):
        a = np.asarray(y)
        if a.dtype.kind == "f":
            if not np.all(np.mod(a, 1) == 0):
                raise InvalidArgumentError(f"{fn}: labels must be whole numbers, got {a!r}")
            a = a.astype(np.int64)
        y = convert_to_tensor(a)
    if y.dtype.is_floating:
        y = _ops.cast(y, "int64")
    if y.ndim == p.ndim and y.ndim > 0 and y.shape[-1] == 1:
        y = _ops.squeeze(y, -1)
    if tuple(y.shape) != tuple(p.shape[:-1]):
        raise InvalidArgumentError(
            f"{fn}: labels of shape {list(y.shape)} do not match predictions of shape "
            f"{list(p.shape)} (expected labels of shape {list(p.shape[:-1])})"
        )
    valid = None
    if ignore_class is not None:
        # as Keras: the ignored samples get label 0 and predictions 0 (a new tensor, so
        # a layer's softmax output is not read through its logits here), then loss 0
        valid = _ops.not_equal(y, int(ignore_class))
        y = _ops.where(valid, y, _ops.zeros_like(y))
        p = _ops.where(_ops.expand_dims(valid, -1), p, 0.0)
    else:
        p, from_logits = _from_layer_logits(fn, p, from_logits, "softmax")
    logits = p if from_logits else _ops.log(_ops.clip_by_value(p, EPSILON, 1.0 - EPSILON))
    per = _ops.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
    if valid is None:
        return per
    return _remember_mask(_ops.where(valid, per, 0.0), valid)
