"""``jt.losses`` (also ``jt.keras.losses``): Keras 3's losses, as classes and as
per-sample functions, with their configs, ``serialize``/``deserialize`` and ``get``.

Function forms return one value per sample (the last axis is reduced; ``eps = 1e-7``):

- ``mean_squared_error`` (``mse``) = mean((y_pred - y_true)^2)
- ``mean_absolute_error`` (``mae``) = mean(|y_pred - y_true|)
- ``mean_absolute_percentage_error`` (``mape``) = 100 mean(|(y_true - y_pred) /
  max(|y_true|, eps)|)
- ``mean_squared_logarithmic_error`` (``msle``) = mean((log(1 + max(y_pred, eps)) -
  log(1 + max(y_true, eps)))^2)
- ``cosine_similarity`` = -sum(l2_normalize(y_true) l2_normalize(y_pred), axis), with
  Keras' normalization ``x * min(1 / |x|, 1 / eps)`` (a zero vector stays zero)
- ``huber`` = mean(0.5 e^2 where |e| <= delta, else delta |e| - 0.5 delta^2), e = y_pred
  - y_true
- ``log_cosh`` (``logcosh``) = mean(e + softplus(-2 e) - log 2), log(cosh(e)) without
  overflow
- ``hinge`` = mean(max(1 - y_true y_pred, 0)); ``squared_hinge`` squares each term;
  labels that are all 0 or 1 are first mapped to -1 and 1, as Keras does
- ``categorical_hinge`` = max(max((1 - y_true) y_pred) - sum(y_true y_pred) + 1, 0)
- ``kl_divergence`` (``kld``) = sum(y log(y / p)) with y and p clipped to [eps, 1]
- ``poisson`` = mean(y_pred - y_true log(y_pred + eps))
- ``binary_crossentropy`` (``bce``) = mean(-(y log p + (1 - y) log(1 - p))), with ``p =
  clip(y_pred, eps, 1 - eps)``; from logits ``z``: ``max(z, 0) - z y + log(1 + exp(-|z|))``
  (no clipping, stable for any ``z``)
- ``binary_focal_crossentropy`` = mean((1 - p_t)^gamma bce), ``p_t = y p + (1 - y)(1 - p)``
  (``p = sigmoid(z)`` from logits, where the bce is the exact one from ``z``), times
  ``alpha`` for class 1 and ``1 - alpha`` for class 0 with ``apply_class_balancing``
- ``categorical_crossentropy`` = -sum(y log p), with ``p = y_pred / sum(y_pred)`` clipped to
  ``[eps, 1 - eps]``; from logits: -sum(y log_softmax(z))
- ``categorical_focal_crossentropy`` = sum(-alpha (1 - p)^gamma y log p), the same ``p``
  (from logits: of ``softmax(z)``); ``alpha`` may be one value per class
- ``sparse_categorical_crossentropy``: crossentropy with integer class ids (``p`` is
  clipped, then normalized through its log; from logits: -log_softmax(z)[label]);
  with ``ignore_class``, samples of that label give 0 and are left out of the mean

``label_smoothing`` (the two binary and two categorical crossentropies) replaces ``y``
with ``y (1 - s) + s / k``, ``k`` = 2, or the number of classes (the size of the last
axis, as Keras takes it).

Before the formula, ``y_true`` takes ``y_pred``'s dtype, and when one has one more
axis than the other with size 1 at the end (``(batch,)`` against ``(batch, 1)``),
the two are brought to the same rank, as Keras does (so they never broadcast to
``(batch, batch)``); other shape differences raise ``InvalidArgumentError``.

A loss class calls its function and then reduces the per-sample values, optionally
multiplied by ``sample_weight``: ``"sum_over_batch_size"`` (the default, also ``"mean"``)
divides their sum by their number; ``"sum"`` sums; ``"mean_with_sample_weight"``
divides the sum by the sum of the sample weights as given (0 when that is 0; their
number without weights); ``"none"`` (or ``None``) returns them. Entries an
``ignore_class`` masks out are not counted in the means. ``dtype=`` casts ``y_pred``
(and so ``y_true``) to that dtype first; without it the loss is computed in
``y_pred``'s float dtype (float32 for arrays of other types and Python values).

As in Keras 3, a ``sigmoid`` or ``softmax`` output of a layer (``Dense(...,
activation="sigmoid")``, ``Activation("softmax")``) given to the matching crossentropy
is replaced by that activation's input, the logits: the loss is computed
``from_logits`` (exact where the probabilities would be clipped), and
``from_logits=True`` on such an output warns and uses the logits too.

Example::

    loss = jt.losses.Huber(delta=0.5)
    loss([[0.0, 1.0]], [[0.2, 3.0]])         # (0.5 * 0.2^2 + 0.5 * 2 - 0.125) / 2
    jt.losses.get("kld")                      # the function kl_divergence
    jt.losses.deserialize(jt.losses.serialize(loss)).get_config()["delta"]  # 0.5
"""

from __future__ import annotations

import inspect
import math
import numbers
import sys
import warnings
import weakref

import numpy as np

from . import _keras_objects as _objects
from . import ops as _ops
from .dtypes import as_dtype
from .errors import InvalidArgumentError
from .layers import _snake, _unique_name, keras_logits
from .tensor import Tensor, Variable, convert_to_tensor

__all__ = [
    "Loss", "LossFunctionWrapper", "MeanSquaredError", "MeanAbsoluteError",
    "MeanAbsolutePercentageError", "MeanSquaredLogarithmicError", "CosineSimilarity",
    "Huber", "LogCosh", "Hinge", "SquaredHinge", "CategoricalHinge", "KLDivergence",
    "Poisson", "BinaryCrossentropy", "BinaryFocalCrossentropy", "CategoricalCrossentropy",
    "CategoricalFocalCrossentropy", "SparseCategoricalCrossentropy",
    "mean_squared_error", "mean_absolute_error", "mean_absolute_percentage_error",
    "mean_squared_logarithmic_error", "cosine_similarity", "huber", "log_cosh", "hinge",
    "squared_hinge", "categorical_hinge", "kl_divergence", "poisson", "binary_crossentropy",
    "binary_focal_crossentropy", "categorical_crossentropy",
    "categorical_focal_crossentropy", "sparse_categorical_crossentropy",
    "mse", "MSE", "mae", "MAE", "mape", "MAPE", "msle", "MSLE", "kld", "KLD", "bce", "BCE",
    "logcosh", "kullback_leibler_divergence", "EPSILON", "REDUCTIONS", "get", "serialize",
    "deserialize",
]

EPSILON = 1e-7  # Keras' backend.epsilon(): the probability clip

# Keras 3.15's accepted values (and None, the same as "none")
REDUCTIONS = ("sum_over_batch_size", "sum", "mean", "mean_with_sample_weight", "none")


# ---------------------------------------------------------------------------
# input handling


def _pred(y_pred) -> Tensor:
    """``y_pred`` as a tensor: a numpy float array keeps its dtype; Python values become
    float32, as ``jt.constant`` makes them (and so do arrays of other types)."""
    if isinstance(y_pred, Variable):
        return y_pred.read_value()
    if isinstance(y_pred, Tensor):
        return y_pred
    if isinstance(y_pred, (np.ndarray, np.generic)) and y_pred.dtype.kind == "f":
        return convert_to_tensor(y_pred)
    t = convert_to_tensor(y_pred)
    return t if t.dtype.is_floating else _ops.cast(t, "float32")


def _true_like(y_true, pred: Tensor) -> Tensor:
    if isinstance(y_true, Variable):
        y_true = y_true.read_value()
    if isinstance(y_true, Tensor):
        return y_true if y_true.dtype == pred.dtype else _ops.cast(y_true, pred.dtype)
    return convert_to_tensor(np.asarray(y_true), dtype=pred.dtype)


def _keras_ranks(y, p):
    """Keras' squeeze_or_expand_to_same_rank: when the ranks differ by one and the longer
    has a last axis of 1, it is squeezed, or (when the other has rank 1) the other expanded."""
    rt, rp = y.ndim, p.ndim
    if rt == rp + 1 and y.shape[-1] == 1:
        if rp == 1:
            p = _ops.expand_dims(p, -1)
        else:
            y = _ops.squeeze(y, -1)
    elif rp == rt + 1 and p.shape[-1] == 1:
        if rt == 1:
            y = _ops.expand_dims(y, -1)
        else:
            p = _ops.squeeze(p, -1)
    return y, p


def _same_rank(fn, y_true: Tensor, y_pred: Tensor):
    """Keras' squeeze_or_expand_to_same_rank, then an exact shape check."""
    y_true, y_pred = _keras_ranks(y_true, y_pred)
    if tuple(y_true.shape) != tuple(y_pred.shape):
        raise InvalidArgumentError(
            f"{fn}: y_true and y_pred must have the same shape, got y_true "
            f"{list(y_true.shape)} and y_pred {list(y_pred.shape)}"
        )
    return y_true, y_pred


def _float_pred(fn, y_pred) -> Tensor:
    p = _pred(y_pred)
    if not p.dtype.is_floating:
        raise InvalidArgumentError(f"{fn}: y_pred must be a float tensor, got {p.dtype.name}")
    return p


def _prepare(fn, y_true, y_pred):
    """``(y_true, y_pred)`` as tensors of ``y_pred``'s float dtype and the same shape,
    with at least one axis (the one reduced)."""
    p = _float_pred(fn, y_pred)
    y, p = _same_rank(fn, _true_like(y_true, p), p)
    if p.ndim == 0:
        raise InvalidArgumentError(
            f"{fn}: expected inputs with at least one axis (the last is reduced), got a scalar"
        )
    return y, p


def _caller_level() -> int:
    """The ``stacklevel`` (for a warning raised by this function's caller) of the first
    frame outside this module."""
    f, level = sys._getframe(1), 1
    while f is not None and f.f_globals.get("__name__") == __name__:
        f, level = f.f_back, level + 1
    return level


def _from_layer_logits(fn, p: Tensor, from_logits: bool, kind: str):
    """Keras' ``_get_logits``: when ``p`` is the output of a layer's ``kind`` activation
    ("sigmoid" or "softmax"), the loss is computed from that activation's input."""
    z = keras_logits(p, kind)
    if z is None:
        return p, from_logits
    if from_logits:
        warnings.warn(
            f"{fn} received from_logits=True, but y_pred was produced by a {kind} activation "
            "and thus does not represent logits; the loss is computed from that activation's "
            "input (as Keras does). Was this intended?",
            UserWarning,
            stacklevel=_caller_level(),
        )
    return z, True


# arguments: Python numbers are checked here; a tensor or variable (a value that may
# change between calls of a compiled step) is used as it is, in y_pred's dtype


def _is_tensor(x) -> bool:
    return isinstance(x, (Tensor, Variable))


def _number(who, arg, value, low=None, high=None, low_open=False):
    if _is_tensor(value):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(
            value):
        raise ValueError(f"{who}: `{arg}` must be a finite number, got {value!r}")
    if low is not None and (value < low or (low_open and value == low)):
        bound = f"> {low}" if low_open else f">= {low}"
        raise ValueError(f"{who}: `{arg}` must be {bound}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{who}: `{arg}` must be <= {high}, got {value!r}")
    return float(value)


def _hyper(value, dtype):
    """A checked argument as an operand of ``dtype`` tensors."""
    if _is_tensor(value):
        t = _pred(value)
        return t if t.dtype == dtype else _ops.cast(t, dtype)
    return value


def _check_axis(who, axis):
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise ValueError(f"{who}: `axis` must be an int, got {axis!r} of type "
                         f"{type(axis).__name__}")
    return int(axis)


def _smooth(who, y, label_smoothing, num_classes):
    label_smoothing = _number(who, "label_smoothing", label_smoothing, 0.0, 1.0)
    if not _is_tensor(label_smoothing) and label_smoothing == 0.0:
        return y
    s = _hyper(label_smoothing, y.dtype)
    return y * (1.0 - s) + s / num_classes


def _warn_one_class(fn, p):
    if p.shape[-1] == 1:
        warnings.warn(
            f"In loss {fn}, expected y_pred.shape to be (batch_size, num_classes) with "
            f"num_classes > 1. Received: y_pred.shape={tuple(p.shape)}. Consider using "
            "'binary_crossentropy' if you only have 2 classes.",
            SyntaxWarning, stacklevel=_caller_level())


# the entries a loss function leaves out (``ignore_class``), remembered on its result by
# identity while it is alive (jittape's tensors take no new attributes; Keras' own
# ``_keras_mask``), and read by ``Loss.__call__``
_MASKS: dict = {}  # id(values) -> (weakref to values, boolean mask of values' shape)


def _remember_mask(values, mask):
    key, ref = id(values), weakref.ref(values)
    _MASKS[key] = (ref, mask)
    weakref.finalize(values, _forget_mask, key, ref)
    return values


def _forget_mask(key, ref):
    entry = _MASKS.get(key)
    if entry is not None and entry[0] is ref:
        del _MASKS[key]


def _mask_of(values):
    entry = _MASKS.get(id(values))
    if entry is None or entry[0]() is not values:
        return None
    return entry[1]


# ---------------------------------------------------------------------------
# per-sample functions: regression


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


# ---------------------------------------------------------------------------
# per-sample functions: hinge


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


# ---------------------------------------------------------------------------
# per-sample functions: probabilistic


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


# Keras' aliases (and Keras 2's legacy names)
mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error
mape = MAPE = mean_absolute_percentage_error
msle = MSLE = mean_squared_logarithmic_error
kld = KLD = kullback_leibler_divergence = kl_divergence
bce = BCE = binary_crossentropy
logcosh = log_cosh


# ---------------------------------------------------------------------------
# reduction


def _align_weights(values: Tensor, w: Tensor):
    """Keras' squeeze_or_expand_to_same_rank(values, sample_weight): when the ranks differ
    by one and the longer has a last axis of 1, that axis is squeezed, except that a
    rank-1 operand is expanded instead (so per-sample values with a ``(batch, 1)`` weight
    become a column, as in Keras). A weight of lower rank still is then aligned with the
    leading axes (a ``(batch,)`` weight scales each sample's values; Keras would
    broadcast it against the last axis instead)."""
    rv, rw = values.ndim, w.ndim
    if rw == rv + 1 and w.shape[-1] == 1:
        if rv == 1:
            values = _ops.expand_dims(values, -1)
        else:
            w = _ops.squeeze(w, -1)
    elif rv == rw + 1 and rw >= 1 and values.shape[-1] == 1:
        if rw == 1:
            w = _ops.expand_dims(w, -1)
        else:
            values = _ops.squeeze(values, -1)
    while w.ndim < values.ndim:
        w = _ops.expand_dims(w, -1)
    return values, w


def _reduction(who, value) -> str:
    """The canonical name of a ``reduction`` argument (Keras 3.15's values)."""
    if value is None:
        return "none"
    if value == "mean":
        return "sum_over_batch_size"
    if not isinstance(value, str) or value not in REDUCTIONS:
        hint = (" (Keras 2's 'auto' is 'sum_over_batch_size' in Keras 3)"
                if value == "auto" else "")
        raise ValueError(
            f"{who}: Invalid value for argument `reduction`: {value!r}{hint}; expected one "
            f"of {', '.join(repr(r) for r in REDUCTIONS)} or None"
        )
    return value


def _divide_no_nan(a, b):
    """``a / b``, 0 where ``b`` is 0."""
    zero = _ops.equal(b, 0.0)
    return _ops.where(zero, _ops.zeros_like(a), a / _ops.where(zero, _ops.ones_like(b), b))


def _count(values: Tensor, dtype):
    """The number of entries of ``values``: a Python number, or a tensor when the shape
    is symbolic (the count is known when a call binds the sizes)."""
    if values._type.symbolic:
        return _ops.cast(_ops.size(values), dtype)
    return float(np.prod(values.shape)) if values.ndim else 1.0


def _mask_weights(mask: Tensor, reduction: str, dtype):
    """Keras' apply_mask: for the means over the batch, the kept entries weigh
    ``total / kept`` so that dividing by ``total`` divides by ``kept``."""
    m = _ops.cast(mask, dtype)
    if reduction != "sum_over_batch_size":
        return m
    kept = _ops.reduce_sum(m)
    return m * _divide_no_nan(_count(m, dtype) * _ops.ones_like(kept), kept)


def _reduce(who, values: Tensor, sample_weight, mask, reduction: str):
    """Weight per-sample ``values`` by ``sample_weight`` (and a mask), then reduce them."""
    w = None if sample_weight is None else _true_like(sample_weight, values)
    try:
        if mask is not None:
            mw = _mask_weights(mask, reduction, values.dtype)
            if w is not None:
                mw, w = _align_weights(mw, w)
            w = mw if w is None else w * mw
        if w is not None:
            values, w = _align_weights(values, w)
            values = values * w
    except InvalidArgumentError as e:
        raise InvalidArgumentError(
            f"{who}: sample_weight of shape {list(np.shape(sample_weight))} does "
            f"not broadcast to the per-sample losses of shape {list(values.shape)} ({e})"
        ) from None
    if reduction == "none":
        return values
    total = _ops.reduce_sum(values)
    if reduction == "sum":
        return total
    if reduction == "mean_with_sample_weight" and w is not None:
        return _divide_no_nan(total, _ops.reduce_sum(w))
    n = _count(values, total.dtype)
    return total / (_ops.maximum(n, 1.0) if isinstance(n, Tensor) else max(n, 1.0))


# ---------------------------------------------------------------------------
# classes


def _float_dtype(who, dtype):
    if dtype is None:
        return None
    try:
        dt = as_dtype(dtype)
    except (TypeError, ValueError, KeyError):
        raise ValueError(f"{who}: unknown dtype {dtype!r}") from None
    if not dt.is_floating:
        raise ValueError(f"{who}: dtype must be a float dtype, got {dt.name}")
    return dt


class Loss:
    """Base class: ``loss(y_true, y_pred, sample_weight=None)`` computes ``call``'s
    per-sample values, weights them and reduces them (see the module's docstring).

    Args:
        name: the loss's name (default: the class's name in snake_case).
        reduction: ``"sum_over_batch_size"`` (the default), ``"sum"``, ``"mean"``,
            ``"mean_with_sample_weight"``, or ``"none"``/``None``.
        dtype: the dtype of the computation (``y_pred`` is cast to it); ``None`` keeps
            ``y_pred``'s float dtype.

    Example::

        class Scaled(jt.losses.Loss):
            def call(self, y_true, y_pred):
                return 3.0 * jt.losses.mse(y_true, y_pred)

        Scaled()([[1.0]], [[2.0]])  # 3.0
    """

    def __init__(self, name=None, reduction="sum_over_batch_size", dtype=None):
        who = type(self).__name__
        self._reduction = _reduction(who, reduction)
        self.reduction = reduction
        self.name = name or _unique_name(_snake(who))
        self._dtype = _float_dtype(who, dtype)

    @property
    def dtype(self):
        """The dtype the loss computes in, or ``None`` for ``y_pred``'s own."""
        return self._dtype

    def call(self, y_true, y_pred):
        raise NotImplementedError(f"{type(self).__name__} must implement call")

    def __call__(self, y_true, y_pred, sample_weight=None):
        if self._dtype is not None:
            p = _pred(y_pred)
            y_pred = p if p.dtype == self._dtype else _ops.cast(p, self._dtype)
        values = self.call(y_true, y_pred)
        mask = _mask_of(values)
        if not isinstance(values, Tensor):
            values = _pred(values)
        if self._dtype is not None and values.dtype != self._dtype:
            values = _ops.cast(values, self._dtype)
        return _reduce(self.name, values, sample_weight, mask, self._reduction)

    def get_config(self) -> dict:
        return {"name": self.name, "reduction": self.reduction,
                "dtype": None if self._dtype is None else self._dtype.name}

    @classmethod
    def from_config(cls, config):
        """A loss from ``get_config()``'s dict (Keras' configs too)."""
        return cls(**_objects.init_config(cls, config))

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r} reduction={self.reduction!r}>"


class LossFunctionWrapper(Loss):
    """A loss class from a per-sample function: ``fn(y_true, y_pred, **kwargs)``, then
    weighted and reduced. The classes below are such wrappers of the functions above.

    Example::

        loss = jt.losses.LossFunctionWrapper(jt.losses.huber, delta=0.5)
    """

    def __init__(self, fn, reduction="sum_over_batch_size", name=None, dtype=None, **kwargs):
        if not callable(fn):
            raise ValueError(f"LossFunctionWrapper: `fn` must be callable, got {fn!r}")
        super().__init__(name=name or getattr(fn, "__name__", None), reduction=reduction,
                         dtype=dtype)
        self.fn = fn
        self._fn_kwargs = kwargs

    def call(self, y_true, y_pred):
        if self.fn not in _FUNCTIONS.values():  # ours align the ranks themselves
            p = _pred(y_pred)
            y_true, y_pred = _keras_ranks(_true_like(y_true, p), p)
        return self.fn(y_true, y_pred, **self._fn_kwargs)

    def get_config(self):
        config = super().get_config()
        if isinstance(self, tuple(_CLASSES.values())):  # a named class: fn is implied
            return {**config, **self._fn_kwargs}
        return {**config, "fn": serialize(self.fn), **self._fn_kwargs}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "fn" in config:
            config["fn"] = _objects.function_from(config["fn"], _NAMES_TO_FUNCTIONS, "loss")
        return cls(**_objects.init_config(cls, config))

    def __repr__(self):
        return (f"<{type(self).__name__} name={self.name!r} reduction={self.reduction!r}"
                + "".join(f" {k}={v!r}" for k, v in self._fn_kwargs.items()) + ">")


_DEFAULT = "sum_over_batch_size"


class MeanSquaredError(LossFunctionWrapper):
    """Mean of the squared errors (``mean_squared_error`` per sample, then reduced)."""

    def __init__(self, reduction=_DEFAULT, name="mean_squared_error", dtype=None):
        super().__init__(mean_squared_error, reduction=reduction, name=name, dtype=dtype)


class MeanAbsoluteError(LossFunctionWrapper):
    """Mean of the absolute errors."""

    def __init__(self, reduction=_DEFAULT, name="mean_absolute_error", dtype=None):
        super().__init__(mean_absolute_error, reduction=reduction, name=name, dtype=dtype)


class MeanAbsolutePercentageError(LossFunctionWrapper):
    """``mean_absolute_percentage_error`` per sample, then reduced."""

    def __init__(self, reduction=_DEFAULT, name="mean_absolute_percentage_error", dtype=None):
        super().__init__(mean_absolute_percentage_error, reduction=reduction, name=name,
                         dtype=dtype)


class MeanSquaredLogarithmicError(LossFunctionWrapper):
    """``mean_squared_logarithmic_error`` per sample, then reduced."""

    def __init__(self, reduction=_DEFAULT, name="mean_squared_logarithmic_error", dtype=None):
        super().__init__(mean_squared_logarithmic_error, reduction=reduction, name=name,
                         dtype=dtype)


class CosineSimilarity(LossFunctionWrapper):
    """``cosine_similarity`` along ``axis`` per sample, then reduced (-1 is best)."""

    def __init__(self, axis=-1, reduction=_DEFAULT, name="cosine_similarity", dtype=None):
        axis = _check_axis("CosineSimilarity", axis)
        super().__init__(cosine_similarity, reduction=reduction, name=name, dtype=dtype,
                         axis=axis)
        self.axis = axis


class Huber(LossFunctionWrapper):
    """``huber`` per sample, then reduced: squared errors up to ``delta``, linear beyond.

    Example::

        jt.losses.Huber(delta=2.0)([[0.0, 0.0]], [[1.0, 4.0]])  # (0.5 + 6) / 2
    """

    def __init__(self, delta=1.0, reduction=_DEFAULT, name="huber_loss", dtype=None):
        delta = _number("Huber", "delta", delta, 0.0, low_open=True)
        super().__init__(huber, reduction=reduction, name=name, dtype=dtype, delta=delta)
        self.delta = delta


class LogCosh(LossFunctionWrapper):
    """``log_cosh`` per sample, then reduced: like MSE / 2 near 0, like MAE far from it."""

    def __init__(self, reduction=_DEFAULT, name="log_cosh", dtype=None):
        super().__init__(log_cosh, reduction=reduction, name=name, dtype=dtype)


class Hinge(LossFunctionWrapper):
    """``hinge`` per sample, then reduced (labels -1/1, or 0/1 converted)."""

    def __init__(self, reduction=_DEFAULT, name="hinge", dtype=None):
        super().__init__(hinge, reduction=reduction, name=name, dtype=dtype)


class SquaredHinge(LossFunctionWrapper):
    """``squared_hinge`` per sample, then reduced."""

    def __init__(self, reduction=_DEFAULT, name="squared_hinge", dtype=None):
        super().__init__(squared_hinge, reduction=reduction, name=name, dtype=dtype)


class CategoricalHinge(LossFunctionWrapper):
    """``categorical_hinge`` per sample (one-hot labels), then reduced."""

    def __init__(self, reduction=_DEFAULT, name="categorical_hinge", dtype=None):
        super().__init__(categorical_hinge, reduction=reduction, name=name, dtype=dtype)


class KLDivergence(LossFunctionWrapper):
    """``kl_divergence`` per sample, then reduced."""

    def __init__(self, reduction=_DEFAULT, name="kl_divergence", dtype=None):
        super().__init__(kl_divergence, reduction=reduction, name=name, dtype=dtype)


class Poisson(LossFunctionWrapper):
    """``poisson`` per sample, then reduced."""

    def __init__(self, reduction=_DEFAULT, name="poisson", dtype=None):
        super().__init__(poisson, reduction=reduction, name=name, dtype=dtype)


def _crossentropy_args(who, from_logits, label_smoothing, axis):
    return (bool(from_logits), _number(who, "label_smoothing", label_smoothing, 0.0, 1.0),
            _check_axis(who, axis))


class BinaryCrossentropy(LossFunctionWrapper):
    """Binary crossentropy; ``from_logits=True`` takes raw scores (more stable)."""

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction=_DEFAULT,
                 name="binary_crossentropy", dtype=None):
        from_logits, label_smoothing, axis = _crossentropy_args(
            "BinaryCrossentropy", from_logits, label_smoothing, axis)
        super().__init__(binary_crossentropy, reduction=reduction, name=name, dtype=dtype,
                         from_logits=from_logits, label_smoothing=label_smoothing, axis=axis)
        self.from_logits, self.label_smoothing, self.axis = from_logits, label_smoothing, axis


class BinaryFocalCrossentropy(LossFunctionWrapper):
    """``binary_focal_crossentropy`` per sample, then reduced.

    Example::

        loss = jt.losses.BinaryFocalCrossentropy(gamma=2.0, apply_class_balancing=True)
    """

    def __init__(self, apply_class_balancing=False, alpha=0.25, gamma=2.0, from_logits=False,
                 label_smoothing=0.0, axis=-1, reduction=_DEFAULT,
                 name="binary_focal_crossentropy", dtype=None):
        who = "BinaryFocalCrossentropy"
        from_logits, label_smoothing, axis = _crossentropy_args(
            who, from_logits, label_smoothing, axis)
        alpha = _number(who, "alpha", alpha, 0.0, 1.0)
        gamma = _number(who, "gamma", gamma, 0.0)
        apply_class_balancing = bool(apply_class_balancing)
        super().__init__(binary_focal_crossentropy, reduction=reduction, name=name,
                         dtype=dtype, from_logits=from_logits,
                         label_smoothing=label_smoothing, axis=axis,
                         apply_class_balancing=apply_class_balancing, alpha=alpha,
                         gamma=gamma)
        self.from_logits, self.label_smoothing, self.axis = from_logits, label_smoothing, axis
        self.apply_class_balancing, self.alpha, self.gamma = apply_class_balancing, alpha, gamma


class CategoricalCrossentropy(LossFunctionWrapper):
    """Crossentropy with one-hot labels; ``from_logits=True`` takes unnormalized scores."""

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1, reduction=_DEFAULT,
                 name="categorical_crossentropy", dtype=None):
        from_logits, label_smoothing, axis = _crossentropy_args(
            "CategoricalCrossentropy", from_logits, label_smoothing, axis)
        super().__init__(categorical_crossentropy, reduction=reduction, name=name,
                         dtype=dtype, from_logits=from_logits,
                         label_smoothing=label_smoothing, axis=axis)
        self.from_logits, self.label_smoothing, self.axis = from_logits, label_smoothing, axis


class CategoricalFocalCrossentropy(LossFunctionWrapper):
    """``categorical_focal_crossentropy`` per sample, then reduced; ``alpha`` is one
    weight or a list of one per class."""

    def __init__(self, alpha=0.25, gamma=2.0, from_logits=False, label_smoothing=0.0, axis=-1,
                 reduction=_DEFAULT, name="categorical_focal_crossentropy", dtype=None):
        who = "CategoricalFocalCrossentropy"
        from_logits, label_smoothing, axis = _crossentropy_args(
            who, from_logits, label_smoothing, axis)
        if isinstance(alpha, (tuple, np.ndarray)):
            alpha = [float(a) for a in alpha]
        if not isinstance(alpha, list):
            alpha = _number(who, "alpha", alpha, 0.0)
        gamma = _number(who, "gamma", gamma, 0.0)
        super().__init__(categorical_focal_crossentropy, reduction=reduction, name=name,
                         dtype=dtype, from_logits=from_logits,
                         label_smoothing=label_smoothing, axis=axis, alpha=alpha, gamma=gamma)
        self.from_logits, self.label_smoothing, self.axis = from_logits, label_smoothing, axis
        self.alpha, self.gamma = alpha, gamma


class SparseCategoricalCrossentropy(LossFunctionWrapper):
    """Crossentropy with integer class labels; samples labelled ``ignore_class`` are
    left out (they give 0 and are not counted in the mean)."""

    def __init__(self, from_logits=False, ignore_class=None, reduction=_DEFAULT, axis=-1,
                 name="sparse_categorical_crossentropy", dtype=None):
        who = "SparseCategoricalCrossentropy"
        if ignore_class is not None and (isinstance(ignore_class, bool) or not isinstance(
                ignore_class, numbers.Integral)):
            raise ValueError(f"{who}: `ignore_class` must be an int or None, got "
                             f"{ignore_class!r}")
        if _check_axis(who, axis) != -1:
            raise ValueError(f"{who}: only the last axis (-1) can be the class axis, got "
                             f"axis={axis}")
        from_logits = bool(from_logits)
        super().__init__(sparse_categorical_crossentropy, reduction=reduction, name=name,
                         dtype=dtype, from_logits=from_logits, ignore_class=ignore_class,
                         axis=-1)
        self.from_logits, self.ignore_class, self.axis = from_logits, ignore_class, -1


# ---------------------------------------------------------------------------
# names, serialize, deserialize, get

_CLASSES = {c.__name__: c for c in (
    MeanSquaredError, MeanAbsoluteError, MeanAbsolutePercentageError,
    MeanSquaredLogarithmicError, CosineSimilarity, Huber, LogCosh, Hinge, SquaredHinge,
    CategoricalHinge, KLDivergence, Poisson, BinaryCrossentropy, BinaryFocalCrossentropy,
    CategoricalCrossentropy, CategoricalFocalCrossentropy, SparseCategoricalCrossentropy)}
_FUNCTIONS = {f.__name__: f for f in (
    mean_squared_error, mean_absolute_error, mean_absolute_percentage_error,
    mean_squared_logarithmic_error, cosine_similarity, huber, log_cosh, hinge,
    squared_hinge, categorical_hinge, kl_divergence, poisson, binary_crossentropy,
    binary_focal_crossentropy, categorical_crossentropy, categorical_focal_crossentropy,
    sparse_categorical_crossentropy)}
_ALIASES = {
    "mse": mse, "MSE": mse, "mae": mae, "MAE": mae, "mape": mape, "MAPE": mape,
    "msle": msle, "MSLE": msle, "kld": kld, "KLD": kld, "bce": bce, "BCE": bce,
    "logcosh": log_cosh, "kullback_leibler_divergence": kl_divergence,
}
# Keras 3 losses jittape has not got (yet): a clear error instead of "unknown"
_KERAS_ONLY = ("CTC", "Dice", "Tversky", "Circle", "ctc", "dice", "tversky", "circle")
_MODULE = "keras.losses"  # the module Keras' serialized form names
_NAMES_TO_FUNCTIONS = {**_FUNCTIONS, **_ALIASES}


def serialize(loss):
    """Keras' serialized form of a loss: ``{"module": "keras.losses", "class_name",
    "config", "registered_name": None}`` for a loss instance, ``{"module": "builtins",
    "class_name": "function", "config": name, ...}`` for a function.

    Example::

        jt.losses.serialize(jt.losses.Huber(delta=2.0))["config"]["delta"]  # 2.0
    """
    return _objects.serialize_object(loss, _MODULE, _CLASSES, "loss")


def deserialize(name, custom_objects=None):
    """The loss a name or a serialized dict stands for (the inverse of ``serialize``; the
    plain ``{"class_name", "config"}`` form works too): an instance for a class, the
    function for a function. ``custom_objects`` maps names to your own classes or
    functions."""
    return _objects.deserialize_object(name, _CLASSES, _NAMES_TO_FUNCTIONS, custom_objects,
                                       "loss", _KERAS_ONLY)


def get(identifier):
    """A loss from an identifier, as Keras' ``get``: ``None``; a function's name or alias
    (``"mse"``, ``"kld"``: the function); a class's name (``"Huber"``: a new instance with
    the defaults); a config dict (``{"class_name": "Huber", "config": {"delta": 2.0}}``);
    a class (instantiated) or an instance or callable (returned).

    Example::

        jt.losses.get("huber") is jt.losses.huber                    # True
        jt.losses.get({"class_name": "Huber", "config": {"delta": 2.0}}).delta   # 2.0
    """
    if identifier is None:
        return None
    if isinstance(identifier, (str, dict)):
        obj = deserialize(identifier)
    else:
        obj = identifier
    if inspect.isclass(obj):
        obj = obj()
    if not callable(obj):
        raise ValueError(f"Could not interpret loss identifier: {identifier!r}")
    return obj
