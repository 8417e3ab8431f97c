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
- ``dice`` = 1 - 2 sum(y p) / (sum(y) + sum(p) + eps) and ``tversky`` = 1 - tp / (tp +
  alpha fp + beta fn + eps), the sums over ``axis`` (None: the whole batch, one value)
- ``circle``: the circle loss of L2-normalized embeddings with integer labels; samples
  whose loss is 0 are left out of the mean, as Keras does
- ``categorical_generalized_cross_entropy`` = (1 - p^q) / q, ``p`` the probability of the
  integer label
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

from .base import EPSILON, REDUCTIONS, Loss
from .classes import (
    BCE, KLD, MAE, MAPE, MSE, MSLE, BinaryCrossentropy, BinaryFocalCrossentropy,
    CategoricalCrossentropy, CategoricalFocalCrossentropy, CategoricalGeneralizedCrossEntropy,
    CategoricalHinge, Circle, CosineSimilarity, Dice, Tversky, Hinge, Huber, KLDivergence, LogCosh,
    LossFunctionWrapper, MeanAbsoluteError, MeanAbsolutePercentageError, MeanSquaredError,
    MeanSquaredLogarithmicError, Poisson, SparseCategoricalCrossentropy, SquaredHinge, bce,
    deserialize, get, kld, kullback_leibler_divergence, logcosh, mae, mape, mse, msle, serialize,
)
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

# the private names of the module this package was, for the modules that import them
# from here (``_NAMES_TO_FUNCTIONS``, ``_CLASSES``, ...); each is defined once
from .base import (  # noqa: F401
    _MASKS, _align_weights, _caller_level, _check_axis, _count, _divide_no_nan, _float_dtype,
    _float_pred, _forget_mask, _from_layer_logits, _hyper, _is_tensor, _keras_ranks, _mask_of,
    _mask_weights, _number, _pred, _prepare, _reduce, _reduction, _remember_mask, _same_rank,
    _smooth, _snake, _true_like, _unique_name, _warn_one_class, keras_logits,
)
from .classes import (  # noqa: F401
    _ALIASES, _CLASSES, _DEFAULT, _FUNCTIONS, _KERAS_ONLY, _MODULE, _NAMES_TO_FUNCTIONS,
    _crossentropy_args,
)
from .hinges import _hinge_labels  # noqa: F401
from .probabilistic import _bce_of_probabilities, _class_alpha  # noqa: F401

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
    "deserialize", "Dice", "Tversky", "Circle", "CategoricalGeneralizedCrossEntropy", "dice",
    "tversky", "circle", "categorical_generalized_cross_entropy",
]
