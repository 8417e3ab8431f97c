"""Keras' loss classes (``LossFunctionWrapper`` and one wrapper per function), and the
names that ``get``, ``serialize`` and ``deserialize`` know the losses by."""

from __future__ import annotations

import inspect
import numbers

import numpy as np

from ..saving import serialization as _config
from .base import Loss, _check_axis, _keras_ranks, _number, _pred, _true_like
from .hinges import categorical_hinge, hinge, squared_hinge
from .image import categorical_generalized_cross_entropy, circle, dice, tversky
from .probabilistic import (
    binary_crossentropy, binary_focal_crossentropy, categorical_crossentropy,
    categorical_focal_crossentropy, kl_divergence, poisson, sparse_categorical_crossentropy,
)
from .regression import (
    cosine_similarity, huber, log_cosh, mean_absolute_error, mean_absolute_percentage_error,
    mean_squared_error, mean_squared_logarithmic_error,
)


class LossFunctionWrapper(Loss):
    """A loss class from a per-sample function: ``fn(y_true, y_pred, **kwargs)``, then
    weighted and reduced. The classes below are such wrappers of jt.losses' functions.

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
        # ours align the ranks themselves, but for the image losses, whose functions
        # broadcast as Keras' do (its wrapper aligns the ranks for them)
        if self.fn not in _FUNCTIONS.values() or self.fn in _WRAPPER_ALIGNS:
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
            config["fn"] = _config.function_from(config["fn"], _NAMES_TO_FUNCTIONS, "loss")
        return cls(**_config.init_config(cls, config))

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


def _axis_arg(who, axis):
    """The ``axis`` of the overlap losses: None, an int or a tuple of ints (kept as
    given, for the config)."""
    if axis is None:
        return None
    items = [axis] if isinstance(axis, numbers.Integral) else (
        list(axis) if isinstance(axis, (list, tuple)) else None)
    if items is None or any(isinstance(a, bool) or not isinstance(a, numbers.Integral)
                            for a in items):
        raise ValueError(f"{who}: `axis` must be None, an int or a tuple of ints, got "
                         f"{axis!r}")
    return axis


class Dice(LossFunctionWrapper):
    """``dice`` over ``axis`` (None: the whole batch is one value; ``(1, 2, 3)``: one per
    image), then reduced.

    Example::

        jt.losses.Dice(axis=(1, 2, 3), reduction=None)(masks, probabilities)  # (batch,)
    """

    def __init__(self, reduction=_DEFAULT, name="dice", axis=None, dtype=None):
        axis = _axis_arg("Dice", axis)
        super().__init__(dice, reduction=reduction, name=name, dtype=dtype, axis=axis)
        self.axis = axis


class Tversky(LossFunctionWrapper):
    """``tversky`` over ``axis``, then reduced: ``alpha`` weighs the false positives,
    ``beta`` the false negatives (0.5 and 0.5: ``Dice``)."""

    def __init__(self, alpha=0.5, beta=0.5, reduction=_DEFAULT, name="tversky", axis=None,
                 dtype=None):
        axis = _axis_arg("Tversky", axis)
        alpha, beta = _number("Tversky", "alpha", alpha), _number("Tversky", "beta", beta)
        super().__init__(tversky, reduction=reduction, name=name, dtype=dtype, alpha=alpha,
                         beta=beta, axis=axis)
        self.alpha, self.beta, self.axis = alpha, beta, axis


class Circle(LossFunctionWrapper):
    """``circle`` per sample (integer labels, L2-normalized embeddings), then reduced
    over the samples whose loss is not 0.

    Example::

        model.compile(optimizer="adam", loss=jt.losses.Circle(gamma=80.0, margin=0.4))
    """

    def __init__(self, gamma=80.0, margin=0.4, remove_diagonal=True, reduction=_DEFAULT,
                 name="circle", dtype=None):
        gamma = _number("Circle", "gamma", gamma)
        margin = _number("Circle", "margin", margin)
        remove_diagonal = bool(remove_diagonal)
        super().__init__(circle, reduction=reduction, name=name, dtype=dtype, gamma=gamma,
                         margin=margin, remove_diagonal=remove_diagonal)
        self.gamma, self.margin, self.remove_diagonal = gamma, margin, remove_diagonal


class CategoricalGeneralizedCrossEntropy(LossFunctionWrapper):
    """``categorical_generalized_cross_entropy`` per sample (integer labels,
    probabilities), then reduced; ``q`` in (0, 1)."""

    def __init__(self, q=0.5, reduction=_DEFAULT, name="categorical_generalized_cross_entropy",
                 dtype=None):
        if _is_number(q) and not 0 < q < 1:
            raise ValueError(f"CategoricalGeneralizedCrossEntropy: q must be in the interval "
                             f"(0, 1), got q={q!r}")
        q = _number("CategoricalGeneralizedCrossEntropy", "q", q)
        super().__init__(categorical_generalized_cross_entropy, reduction=reduction, name=name,
                         dtype=dtype, q=q)
        self.q = q


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


# Keras' aliases (and Keras 2's legacy names)
mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error
mape = MAPE = mean_absolute_percentage_error
msle = MSLE = mean_squared_logarithmic_error
kld = KLD = kullback_leibler_divergence = kl_divergence
bce = BCE = binary_crossentropy
logcosh = log_cosh


# ---------------------------------------------------------------------------
# names, serialize, deserialize, get

_CLASSES = {c.__name__: c for c in (
    MeanSquaredError, MeanAbsoluteError, MeanAbsolutePercentageError,
    MeanSquaredLogarithmicError, CosineSimilarity, Huber, LogCosh, Hinge, SquaredHinge,
    CategoricalHinge, KLDivergence, Poisson, BinaryCrossentropy, BinaryFocalCrossentropy,
    CategoricalCrossentropy, CategoricalFocalCrossentropy, SparseCategoricalCrossentropy,
    Dice, Tversky, Circle, CategoricalGeneralizedCrossEntropy)}
_FUNCTIONS = {f.__name__: f for f in (
    mean_squared_error, mean_absolute_error, mean_absolute_percentage_error,
    mean_squared_logarithmic_error, cosine_similarity, huber, log_cosh, hinge,
    squared_hinge, categorical_hinge, kl_divergence, poisson, binary_crossentropy,
    binary_focal_crossentropy, categorical_crossentropy, categorical_focal_crossentropy,
    sparse_categorical_crossentropy, dice, tversky, circle,
    categorical_generalized_cross_entropy)}
# the functions whose wrapper aligns the ranks of y_true and y_pred first, as Keras' does
_WRAPPER_ALIGNS = (dice, tversky, circle, categorical_generalized_cross_entropy)
_ALIASES = {
    "mse": mse, "MSE": mse, "mae": mae, "MAE": mae, "mape": mape, "MAPE": mape,
    "msle": msle, "MSLE": msle, "kld": kld, "KLD": kld, "bce": bce, "BCE": bce,
    "logcosh": log_cosh, "kullback_leibler_divergence": kl_divergence,
}
# Keras 3 losses jittape has not got (yet): a clear error instead of "unknown"
_KERAS_ONLY = ("CTC", "ctc")
_MODULE = "keras.losses"  # the module Keras' serialized form names
_NAMES_TO_FUNCTIONS = {**_FUNCTIONS, **_ALIASES}


def serialize(loss):
    """Keras' serialized form of a loss: ``{"module": "keras.losses", "class_name",
    "config", "registered_name": None}`` for a loss instance, ``{"module": "builtins",
    "class_name": "function", "config": name, ...}`` for a function.

    Example::

        jt.losses.serialize(jt.losses.Huber(delta=2.0))["config"]["delta"]  # 2.0
    """
    return _config.serialize(loss, _MODULE, _CLASSES, "loss")


def deserialize(name, custom_objects=None):
    """The loss a name or a serialized dict stands for (the inverse of ``serialize``; the
    plain ``{"class_name", "config"}`` form works too): an instance for a class, the
    function for a function. ``custom_objects`` maps names to your own classes or
    functions."""
    return _config.deserialize(name, "loss", _CLASSES, custom_objects,
                               functions=_NAMES_TO_FUNCTIONS, named_functions=True,
                               not_yet=_KERAS_ONLY)


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


_config.export("loss", (_MODULE,), Loss, _CLASSES, serialize, deserialize, _NAMES_TO_FUNCTIONS)
