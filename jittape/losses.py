"""``jt.losses``: Keras' losses, as classes and as per-sample functions.

Function forms return one value per sample (the last axis is reduced):

- ``mean_squared_error``  = mean((y_pred - y_true)^2, axis=-1)
- ``mean_absolute_error`` = mean(|y_pred - y_true|, axis=-1)
- ``binary_crossentropy`` = mean(-(y log p + (1 - y) log(1 - p)), axis=-1), with
  ``p = clip(y_pred, 1e-7, 1 - 1e-7)``; from logits ``z``:
  ``max(z, 0) - z y + log(1 + exp(-|z|))`` (no clipping, stable for any ``z``)
- ``categorical_crossentropy`` = -sum(y log p, axis=-1), with ``p = y_pred /
  sum(y_pred)`` clipped to ``[1e-7, 1 - 1e-7]``; from logits: -sum(y log_softmax(z))
- ``sparse_categorical_crossentropy``: the same with integer class ids (``p`` is
  clipped, then normalized through its log); from logits: -log_softmax(z)[label]

Keras' ``label_smoothing`` is supported by the two dense crossentropies.

Before the formula, ``y_true`` takes ``y_pred``'s dtype, and when one has one more
axis than the other with size 1 at the end (``(batch,)`` against ``(batch, 1)``),
the two are brought to the same rank, as Keras does (so they never broadcast to
``(batch, batch)``); other shape differences raise ``InvalidArgumentError``.

A loss class calls its function and then reduces the per-sample values, optionally
multiplied by ``sample_weight``: ``"sum_over_batch_size"`` (the default, also
``"auto"`` and ``"mean"``) divides their sum by their number; ``"sum"`` sums;
``"mean_with_sample_weight"`` divides the sum by the sum of the sample weights as given
(0 when that is 0; their number without weights); ``"none"`` (or ``None``) returns them.

As in Keras 3, a ``sigmoid`` or ``softmax`` output of a layer (``Dense(...,
activation="sigmoid")``, ``Activation("softmax")``) given to the matching crossentropy
is replaced by that activation's input, the logits: the loss is computed
``from_logits`` (exact where the probabilities would be clipped), and
``from_logits=True`` on such an output warns and uses the logits too.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

from . import ops as _ops
from .errors import InvalidArgumentError
from .layers import keras_logits
from .tensor import Tensor, Variable, convert_to_tensor

__all__ = [
    "Loss", "MeanSquaredError", "MeanAbsoluteError", "BinaryCrossentropy",
    "CategoricalCrossentropy", "SparseCategoricalCrossentropy", "mean_squared_error",
    "mean_absolute_error", "binary_crossentropy", "categorical_crossentropy",
    "sparse_categorical_crossentropy", "mse", "mae", "EPSILON", "get",
]

EPSILON = 1e-7  # Keras' backend.epsilon(): the probability clip

REDUCTIONS = ("sum_over_batch_size", "sum", "none", "mean_with_sample_weight")


# ---------------------------------------------------------------------------
# input handling


def _pred(y_pred) -> Tensor:
    if isinstance(y_pred, Variable):
        return y_pred.read_value()
    if isinstance(y_pred, Tensor):
        return y_pred
    a = np.asarray(y_pred)
    return convert_to_tensor(a, dtype="float32" if a.dtype.kind != "f" else None)


def _true_like(y_true, pred: Tensor) -> Tensor:
    if isinstance(y_true, Variable):
        y_true = y_true.read_value()
    if isinstance(y_true, Tensor):
        return y_true if y_true.dtype == pred.dtype else _ops.cast(y_true, pred.dtype)
    return convert_to_tensor(np.asarray(y_true), dtype=pred.dtype)


def _same_rank(fn, y_true: Tensor, y_pred: Tensor):
    """Keras' squeeze_or_expand_to_same_rank, then an exact shape check."""
    rt, rp = y_true.ndim, y_pred.ndim
    if rp == rt + 1 and y_pred.shape[-1] == 1:
        if rt == 1:
            y_true = _ops.expand_dims(y_true, -1)
        else:
            y_pred = _ops.squeeze(y_pred, -1)
    elif rt == rp + 1 and y_true.shape[-1] == 1:
        if rp == 1:
            y_pred = _ops.expand_dims(y_pred, -1)
        else:
            y_true = _ops.squeeze(y_true, -1)
    if tuple(y_true.shape) != tuple(y_pred.shape):
        raise InvalidArgumentError(
            f"{fn}: y_true and y_pred must have the same shape, got y_true "
            f"{list(y_true.shape)} and y_pred {list(y_pred.shape)}"
        )
    return y_true, y_pred


def _prepare(fn, y_true, y_pred):
    p = _pred(y_pred)
    if not p.dtype.is_floating:
        raise InvalidArgumentError(f"{fn}: y_pred must be a float tensor, got {p.dtype.name}")
    return _same_rank(fn, _true_like(y_true, p), p)


def _last_axis(fn, t: Tensor):
    if t.ndim == 0:
        raise InvalidArgumentError(
            f"{fn}: expected inputs with at least one axis (the last is reduced), got a scalar"
        )


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


def _smooth(y, label_smoothing, num_classes):
    if not label_smoothing:
        return y
    return y * (1.0 - label_smoothing) + label_smoothing / num_classes


# ---------------------------------------------------------------------------
# per-sample functions


def mean_squared_error(y_true, y_pred):
    """mean((y_pred - y_true)^2, axis=-1)."""
    y, p = _prepare("mean_squared_error", y_true, y_pred)
    _last_axis("mean_squared_error", p)
    return _ops.reduce_mean(_ops.square(p - y), axis=-1)


def mean_absolute_error(y_true, y_pred):
    """mean(|y_pred - y_true|, axis=-1)."""
    y, p = _prepare("mean_absolute_error", y_true, y_pred)
    _last_axis("mean_absolute_error", p)
    return _ops.reduce_mean(_ops.abs(p - y), axis=-1)


mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error


def binary_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    """Per-sample binary crossentropy, the mean over ``axis`` of the elementwise values."""
    y, p = _prepare("binary_crossentropy", y_true, y_pred)
    _last_axis("binary_crossentropy", p)
    y = _smooth(y, label_smoothing, 2.0)
    p, from_logits = _from_layer_logits("binary_crossentropy", p, from_logits, "sigmoid")
    if from_logits:
        per = _ops.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=p)
    else:
        q = _ops.clip_by_value(p, EPSILON, 1.0 - EPSILON)
        per = -(y * _ops.log(q) + (1.0 - y) * _ops.log(1.0 - q))
    return _ops.reduce_mean(per, axis=axis)


def categorical_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    """Per-sample crossentropy between one-hot (or soft) labels and predictions."""
    y, p = _prepare("categorical_crossentropy", y_true, y_pred)
    _last_axis("categorical_crossentropy", p)
    y = _smooth(y, label_smoothing, float(p.shape[axis]))
    if axis in (-1, p.ndim - 1):
        p, from_logits = _from_layer_logits("categorical_crossentropy", p, from_logits,
                                            "softmax")
    if from_logits:
        return -_ops.reduce_sum(y * _ops.nn.log_softmax(p, axis=axis), axis=axis)
    q = p / _ops.reduce_sum(p, axis=axis, keepdims=True)
    q = _ops.clip_by_value(q, EPSILON, 1.0 - EPSILON)
    return -_ops.reduce_sum(y * _ops.log(q), axis=axis)


def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False, axis=-1):
    """Per-sample crossentropy with integer class ids ``y_true`` (shape ``y_pred.shape[:-1]``,
    or with a trailing axis of 1). Float labels holding whole numbers are accepted."""
    fn = "sparse_categorical_crossentropy"
    p = _pred(y_pred)
    if not p.dtype.is_floating:
        raise InvalidArgumentError(f"{fn}: y_pred must be a float tensor, got {p.dtype.name}")
    if p.ndim == 0:
        raise InvalidArgumentError(f"{fn}: y_pred must have a class axis, got a scalar")
    if axis not in (-1, p.ndim - 1):
        raise InvalidArgumentError(f"{fn}: only the last axis can be the class axis")
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
    p, from_logits = _from_layer_logits(fn, p, from_logits, "softmax")
    logits = p if from_logits else _ops.log(_ops.clip_by_value(p, EPSILON, 1.0 - EPSILON))
    return _ops.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)


# ---------------------------------------------------------------------------
# classes


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


def _reduction(value) -> str:
    if value is None:
        return "none"
    if value in ("auto", "mean"):
        return "sum_over_batch_size"
    if value not in REDUCTIONS:
        raise ValueError(
            f"Invalid value for argument `reduction`: {value!r}; expected one of "
            f"{', '.join(repr(r) for r in REDUCTIONS)}"
        )
    return value


class Loss:
    """Base class: ``loss(y_true, y_pred, sample_weight=None)`` computes ``call``'s
    per-sample values, weights them and reduces them."""

    def __init__(self, reduction="sum_over_batch_size", name=None):
        self.reduction = _reduction(reduction)
        self.name = name or type(self).__name__

    def call(self, y_true, y_pred):
        raise NotImplementedError

    def __call__(self, y_true, y_pred, sample_weight=None):
        values = self.call(y_true, y_pred)
        if sample_weight is not None:
            w = _true_like(sample_weight, values)
            values, w = _align_weights(values, w)
            try:
                values = values * w
            except InvalidArgumentError as e:
                raise InvalidArgumentError(
                    f"{self.name}: sample_weight of shape {list(np.shape(sample_weight))} does "
                    f"not broadcast to the per-sample losses of shape {list(values.shape)} ({e})"
                ) from None
        if self.reduction == "none":
            return values
        total = _ops.reduce_sum(values)
        if self.reduction == "sum":
            return total
        if self.reduction == "mean_with_sample_weight" and sample_weight is not None:
            d = _ops.reduce_sum(w)  # divide_no_nan: 0 when the weights sum to 0
            zero = _ops.equal(d, 0.0)
            return _ops.where(zero, _ops.zeros_like(total),
                              total / _ops.where(zero, _ops.ones_like(d), d))
        if values._type.symbolic:  # the count is known when a call binds the sizes
            n = _ops.maximum(_ops.size(values, out_type=total.dtype), 1)
            return total / n
        n = int(np.prod(values.shape)) if values.ndim else 1
        return total / float(max(n, 1))

    def get_config(self) -> dict:
        return {"reduction": self.reduction, "name": self.name}

    def __repr__(self):
        return f"<{type(self).__name__} reduction={self.reduction!r}>"


class MeanSquaredError(Loss):
    """Mean of the squared errors (``mean_squared_error`` per sample, then reduced)."""

    def call(self, y_true, y_pred):
        return mean_squared_error(y_true, y_pred)


class MeanAbsoluteError(Loss):
    """Mean of the absolute errors."""

    def call(self, y_true, y_pred):
        return mean_absolute_error(y_true, y_pred)


class BinaryCrossentropy(Loss):
    """Binary crossentropy; ``from_logits=True`` takes raw scores (more stable)."""

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1,
                 reduction="sum_over_batch_size", name=None):
        super().__init__(reduction, name)
        self.from_logits, self.label_smoothing, self.axis = bool(from_logits), label_smoothing, axis

    def call(self, y_true, y_pred):
        return binary_crossentropy(y_true, y_pred, self.from_logits, self.label_smoothing,
                                   self.axis)


class CategoricalCrossentropy(Loss):
    """Crossentropy with one-hot labels; ``from_logits=True`` takes unnormalized scores."""

    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1,
                 reduction="sum_over_batch_size", name=None):
        super().__init__(reduction, name)
        self.from_logits, self.label_smoothing, self.axis = bool(from_logits), label_smoothing, axis

    def call(self, y_true, y_pred):
        return categorical_crossentropy(y_true, y_pred, self.from_logits, self.label_smoothing,
                                        self.axis)


class SparseCategoricalCrossentropy(Loss):
    """Crossentropy with integer class labels."""

    def __init__(self, from_logits=False, reduction="sum_over_batch_size", name=None):
        super().__init__(reduction, name)
        self.from_logits = bool(from_logits)

    def call(self, y_true, y_pred):
        return sparse_categorical_crossentropy(y_true, y_pred, self.from_logits)


_BY_NAME = {
    "mean_squared_error": MeanSquaredError, "mse": MeanSquaredError,
    "mean_absolute_error": MeanAbsoluteError, "mae": MeanAbsoluteError,
    "binary_crossentropy": BinaryCrossentropy,
    "categorical_crossentropy": CategoricalCrossentropy,
    "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
}


def get(identifier):
    """A loss from a name (``"mse"``) with its defaults, an instance or a callable."""
    if isinstance(identifier, str):
        cls = _BY_NAME.get(identifier)
        if cls is None:
            raise ValueError(
                f"Unknown loss {identifier!r}; known names: {', '.join(sorted(_BY_NAME))}"
            )
        return cls()
    if callable(identifier):
        return identifier
    raise TypeError(f"Could not interpret loss {identifier!r}")
