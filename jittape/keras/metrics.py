"""``jt.metrics``: Keras 3's streaming metrics, with their state in ``jt.Variable``s.

A metric accumulates over calls of ``update_state`` and reports with ``result()``;
``reset_state()`` starts again. The state is non-trainable variables updated with
``assign*``, so a metric updated inside a ``@jt.function`` step is part of the compiled
program (one trace; each call of the step updates it).

The formulas are Keras 3's (``keras/src/metrics``), step for step:

- ``Mean``: ``total += sum(values * w)``, ``count += sum(w)`` (the number of samples
  without weights), ``result = total / count`` (0 when ``count`` is 0). Weights of a
  lower rank than the values first average the values over the extra axes; weights
  are broadcast to the values; values of rank > 1 are averaged per sample.
- ``Accuracy`` and the other per-sample metrics are a ``Mean`` of a per-sample
  function (``accuracy(y_true, y_pred)`` and so on, also exported).
- ``Precision``/``Recall``/``AUC`` count true/false positives/negatives at each
  threshold: a prediction is positive at threshold ``t`` when ``y_pred > t``. Evenly
  spaced thresholds (AUC's default) bucket the predictions instead, clipped to
  [0, 1], as Keras' fast path does.

Example::

    acc = jt.metrics.SparseCategoricalAccuracy()
    acc.update_state([[1], [2]], [[0.1, 0.8, 0.1], [0.6, 0.3, 0.1]])
    float(acc.result())  # 0.5
"""

from __future__ import annotations

import numbers

import numpy as np

from .saving import serialization as _config
from . import losses as _losses
from .. import ops as _ops
from ..dtypes import as_dtype
from ..module import Module, _is_non_trainable, _is_trainable, _is_variable
from .naming import _snake, _unique_name
from .variables import KerasVariable, name_scope
from ..tensor import Tensor, Variable, convert_to_tensor

__all__ = [
    "Metric", "Mean", "Sum", "MeanMetricWrapper", "Accuracy", "BinaryAccuracy",
    "CategoricalAccuracy", "SparseCategoricalAccuracy", "TopKCategoricalAccuracy",
    "SparseTopKCategoricalAccuracy", "MeanSquaredError", "MeanAbsoluteError",
    "RootMeanSquaredError", "Precision", "Recall", "AUC", "accuracy", "binary_accuracy",
    "categorical_accuracy", "sparse_categorical_accuracy", "top_k_categorical_accuracy",
    "sparse_top_k_categorical_accuracy", "mean_squared_error", "mean_absolute_error", "get",
    "serialize", "deserialize",
]

EPSILON = 1e-7  # keras.backend.epsilon()
NEG_INF = -1e10  # Keras' stand-in for -inf in top-k filtering and default thresholds

# ---------------------------------------------------------------------------
# helpers


def _tensor(x) -> Tensor:
    if isinstance(x, Variable):
        return x.read_value()
    if isinstance(x, Tensor):
        return x
    return convert_to_tensor(x)


def _as(x, dtype) -> Tensor:
    """``x`` as a tensor of ``dtype`` (Keras' ``convert_to_tensor(x, dtype)`` casts)."""
    t = _tensor(x)
    dt = as_dtype(dtype)
    return t if t.dtype == dt else _ops.cast(t, dt)


def _same_rank(x1, x2, expand_rank_1=True):
    """Keras' ``squeeze_or_expand_to_same_rank``: a trailing axis of 1 on the one of
    rank r + 1 is squeezed, or (when the other has rank 1) the other gets one."""
    r1, r2 = x1.ndim, x2.ndim
    if r1 == r2:
        return x1, x2
    if r1 == r2 + 1 and x1.shape[-1] == 1:
        if r2 == 1 and expand_rank_1:
            x2 = _ops.expand_dims(x2, -1)
        else:
            x1 = _ops.squeeze(x1, -1)
    if r2 == r1 + 1 and x2.shape[-1] == 1:
        if r1 == 1 and expand_rank_1:
            x1 = _ops.expand_dims(x1, -1)
        else:
            x2 = _ops.squeeze(x2, -1)
    return x1, x2


def _divide_no_nan(a, b):
    """``a / b``, and 0 where ``b`` is 0."""
    nonzero = _ops.not_equal(b, 0.0)
    return _ops.where(nonzero, a / _ops.where(nonzero, b, 1.0), 0.0)


def _float(x, dtype="float32"):
    return _ops.cast(x, dtype)


# ---------------------------------------------------------------------------
# per-sample functions (Keras' metric functions)


def accuracy(y_true, y_pred):
    """1.0 where ``y_true == y_pred`` (after matching their ranks), else 0.0."""
    y_pred = _tensor(y_pred)
    y_true = _as(y_true, y_pred.dtype)
    y_true, y_pred = _same_rank(y_true, y_pred)
    return _float(_ops.equal(y_true, y_pred))


def binary_accuracy(y_true, y_pred, threshold=0.5):
    """1.0 where ``(y_pred > threshold) == y_true``, else 0.0."""
    y_pred, y_true = _tensor(y_pred), _tensor(y_true)
    y_true, y_pred = _same_rank(y_true, y_pred)
    y_pred = _ops.cast(_ops.greater(y_pred, threshold), y_true.dtype)
    return _float(_ops.equal(y_true, y_pred))


def categorical_accuracy(y_true, y_pred):
    """1.0 where ``argmax(y_true, -1) == argmax(y_pred, -1)``, else 0.0."""
    y_true = _ops.argmax(_tensor(y_true), axis=-1)
    y_pred = _tensor(y_pred)
    y_true = _as(y_true, y_pred.dtype)
    shape, reshape = tuple(y_true.shape), False
    if y_true.ndim == y_pred.ndim:
        y_true, reshape = _ops.squeeze(y_true, -1), True
    y_pred = _as(_ops.argmax(y_pred, axis=-1), y_true.dtype)
    matches = _float(_ops.equal(y_true, y_pred))
    return _ops.reshape(matches, shape) if reshape else matches


def sparse_categorical_accuracy(y_true, y_pred):
    """1.0 where the integer label ``y_true`` is ``argmax(y_pred, -1)``; labels may be
    ``(N,)`` or ``(N, 1)`` (the result is ``(N,)`` either way)."""
    y_pred = _tensor(y_pred)
    y_true = _as(y_true, y_pred.dtype)
    shape, reshape = tuple(y_true.shape), False
    if y_true.ndim == y_pred.ndim and y_true.shape[-1] == 1:
        y_true, reshape = _ops.squeeze(y_true, -1), True
    y_pred = _as(_ops.argmax(y_pred, axis=-1), y_true.dtype)
    matches = _float(_ops.equal(y_true, y_pred))
    if reshape:
        matches = _ops.reshape(matches, shape)
    if matches.ndim > 1 and matches.shape[-1] == 1:
        matches = _ops.squeeze(matches, -1)
    return matches


def _in_top_k(targets, predictions, k):
    """``tf.math.in_top_k``: the target's prediction has fewer than ``k`` strictly larger
    ones in its row (ties at the boundary count as in); False for an out-of-range
    target or a row with a non-finite prediction."""
    n = int(predictions.shape[-1])
    t = _ops.cast(targets, "int32")
    valid = _ops.logical_and(t >= 0, t < n)
    hot = _ops.one_hot(_ops.where(valid, t, 0), n) > 0.5
    target = _ops.reduce_sum(_ops.where(hot, predictions, 0.0), axis=-1, keepdims=True)
    larger = _ops.reduce_sum(_ops.cast(predictions > target, "int32"), axis=-1)
    finite = _ops.reduce_all(_ops.is_finite(predictions), axis=-1)
    return _ops.logical_and(_ops.logical_and(valid, finite), larger < k)


def _top_k_rows(y_true, y_pred):
    """Keras' reshapes before ``in_top_k``: predictions to 2-D, labels to 1-D."""
    shape, reshape = tuple(y_true.shape), False
    if y_pred.ndim > 2:
        y_pred = _ops.reshape(y_pred, [-1, y_pred.shape[-1]])
    if y_true.ndim > 1:
        y_true, reshape = _ops.reshape(y_true, [-1]), True
    return y_true, y_pred, shape if reshape else None


def top_k_categorical_accuracy(y_true, y_pred, k=5):
    """1.0 where ``argmax(y_true, -1)`` is among the ``k`` largest of ``y_pred``."""
    y_pred = _tensor(y_pred)
    y_true = _ops.argmax(_as(y_true, y_pred.dtype), axis=-1)
    y_true, y_pred, shape = _top_k_rows(y_true, y_pred)
    matches = _float(_in_top_k(y_true, y_pred, k))
    return matches if shape is None else _ops.reshape(matches, shape)


def sparse_top_k_categorical_accuracy(y_true, y_pred, k=5):
    """1.0 where the integer label ``y_true`` is among the ``k`` largest of ``y_pred``."""
    y_pred = _tensor(y_pred)
    y_true = _as(y_true, "int32")
    y_true, y_pred, shape = _top_k_rows(y_true, y_pred)
    matches = _float(_in_top_k(y_true, y_pred, k))
    return matches if shape is None else _ops.reshape(matches, shape)


mean_squared_error = _losses.mean_squared_error
mean_absolute_error = _losses.mean_absolute_error


# ---------------------------------------------------------------------------
# Metric


class Metric(Module):
    """Base class: subclasses create their state with ``add_variable`` in ``__init__``
    and implement ``update_state(...)`` and ``result()``.

    ``metric(...)`` updates, then returns ``result()``. ``variables`` lists the state
    in creation order (each a non-trainable variable, ``name`` its state's name and
    ``path`` ``"<metric>/<state>"``).
    """

    def __init__(self, name=None, dtype=None):
        self._init_module(name or _unique_name(_snake(type(self).__name__)))
        self._dtype = as_dtype(dtype or "float32")
        if not self._dtype.is_floating:
            raise ValueError(f"{type(self).__name__}: dtype must be a float dtype, got "
                             f"{self._dtype.name}")
        self._variables = []

    @property
    def dtype(self):
        """The dtype of the state and the result (``jt.float32`` unless given)."""
        return self._dtype

    def add_variable(self, shape=(), initializer="zeros", dtype=None, name=None):
        """A non-trainable state variable: ``v.name`` is ``name``, ``v.path``
        ``"<metric>/<name>"``."""
        if "_variables" not in self.__dict__:
            raise RuntimeError(
                f"{type(self).__name__}: call super().__init__() before add_variable")
        from . import initializers as _init

        dt = as_dtype(dtype) if dtype is not None else self._dtype
        value = np.asarray(_init.get(initializer)(tuple(shape), dtype=dt), dt._np)
        with name_scope(self.name.replace("/", ">"), caller=self):  # as Keras 3 scopes it
            v = KerasVariable(value, trainable=False, name=name or "variable")
        self._variables.append(v)
        return v

    add_weight = add_variable

    @property
    def variables(self) -> list:
        """The state variables, in creation order (then those of tracked sub-metrics)."""
        out = list(self._variables)
        seen = {id(v) for v in out}
        for sub in self._flatten(lambda x: isinstance(x, Metric)):
            for v in sub._variables:
                if id(v) not in seen:
                    seen.add(id(v))
                    out.append(v)
        return out

    @property
    def trainable_variables(self) -> list:
        return []

    @property
    def non_trainable_variables(self) -> list:
        return self.variables

    def _flatten_for(self, predicate, seen, stack):
        if predicate in (_is_variable, _is_non_trainable):
            return (v for v in self.variables if id(v) not in seen and not seen.add(id(v)))
        if predicate is _is_trainable:
            return iter(())
        return super()._flatten_for(predicate, seen, stack)

    def update_state(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must implement update_state")

    def result(self):
        raise NotImplementedError(f"{type(self).__name__} must implement result")

    def reset_state(self):
        """Set every state variable back to zeros."""
        for v in self.variables:
            v.assign(np.zeros(tuple(v.shape), v.dtype._np))

    def reset_states(self):
        """Keras 2's name of ``reset_state``."""
        return self.reset_state()

    def __call__(self, *args, **kwargs):
        if "_variables" not in self.__dict__:
            raise RuntimeError(
                f"{type(self).__name__}: its __init__ did not call super().__init__()")
        self.update_state(*args, **kwargs)
        return self.result()

    def get_config(self) -> dict:
        """The metric's arguments (Keras' keys: ``name``, ``dtype`` and its own)."""
        return {"name": self.name, "dtype": self._dtype.name}

    @classmethod
    def from_config(cls, config):
        """A new metric (zero state) from ``get_config()``'s dict, or Keras' config."""
        return cls(**_config.init_config(cls, config))

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r}>"


# ---------------------------------------------------------------------------
# reductions


def _samplewise(values, sample_weight, reduce_fn, dtype):
    """Keras' ``reduce_to_samplewise_values``: ``(values * weights per sample, weights)``."""
    values = _as(values, dtype)
    if sample_weight is not None:
        sample_weight = _as(sample_weight, dtype)
        values, sample_weight = _same_rank(values, sample_weight)
        w_nd, v_nd = sample_weight.ndim, values.ndim
        if v_nd > w_nd:
            values = reduce_fn(values, axis=list(range(w_nd, v_nd)))
        sample_weight = _ops.broadcast_to(sample_weight, _ops.shape(values))
        values = values * sample_weight
        if w_nd > 1:
            sample_weight = reduce_fn(sample_weight, axis=list(range(1, w_nd)))
    if values.ndim > 1:
        values = reduce_fn(values, axis=list(range(1, values.ndim)))
    return values, sample_weight


class Sum(Metric):
    """The (weighted) sum of every value given."""

    def __init__(self, name="sum", dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.total = self.add_variable((), "zeros", name="total")

    def update_state(self, values, sample_weight=None):
        values, _ = _samplewise(values, sample_weight, _ops.reduce_sum, self._dtype)
        self.total.assign_add(_ops.reduce_sum(values))

    def result(self):
        return _ops.identity(self.total)


class Mean(Metric):
    """The (weighted) mean of the values given: ``sum(values * w) / sum(w)``."""

    def __init__(self, name="mean", dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.total = self.add_variable((), "zeros", name="total")
        self.count = self.add_variable((), "zeros", name="count")

    def update_state(self, values, sample_weight=None):
        values, sample_weight = _samplewise(values, sample_weight, _ops.reduce_mean,
                                            self._dtype)
        self.total.assign_add(_ops.reduce_sum(values))
        if sample_weight is not None:
            count = _ops.reduce_sum(sample_weight)
        elif values.ndim >= 1:
            count = _ops.cast(_ops.size(values), self._dtype)  # values are 1-D here
        else:
            count = 1.0
        self.count.assign_add(_ops.cast(count, self._dtype))

    def result(self):
        return _divide_no_nan(self.total, self.count)


class MeanMetricWrapper(Mean):
    """The mean of ``fn(y_true, y_pred, **kwargs)`` over every sample given."""

    def __init__(self, fn, name=None, dtype=None, **kwargs):
        super().__init__(name=name or _snake(getattr(fn, "__name__", "mean_metric")),
                         dtype=dtype)
        self._fn = fn
        self._fn_kwargs = kwargs

    def update_state(self, y_true, y_pred, sample_weight=None):
        values = self._fn(y_true, y_pred, **self._fn_kwargs)
        return super().update_state(values, sample_weight=sample_weight)

    def get_config(self):
        return {**super().get_config(), "fn": serialize(self._fn), **self._fn_kwargs}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "fn" in config:
            config["fn"] = _config.function_from(config["fn"], _FUNCTIONS, "metric")
        return cls(**_config.init_config(cls, config))


class Accuracy(MeanMetricWrapper):
    """How often ``y_pred`` equals ``y_true``."""

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(accuracy, name=name, dtype=dtype)

    def get_config(self):
        return Metric.get_config(self)


class BinaryAccuracy(MeanMetricWrapper):
    """How often ``y_pred > threshold`` equals the binary label."""

    def __init__(self, name="binary_accuracy", dtype=None, threshold=0.5):
        super().__init__(binary_accuracy, name=name, dtype=dtype, threshold=threshold)
        self.threshold = threshold

    def get_config(self):
        return {**Metric.get_config(self), "threshold": self.threshold}


class CategoricalAccuracy(MeanMetricWrapper):
    """How often ``argmax(y_pred)`` is ``argmax(y_true)`` (one-hot labels)."""

    def __init__(self, name="categorical_accuracy", dtype=None):
        super().__init__(categorical_accuracy, name=name, dtype=dtype)

    def get_config(self):
        return Metric.get_config(self)


class SparseCategoricalAccuracy(MeanMetricWrapper):
    """How often ``argmax(y_pred)`` is the integer label."""

    def __init__(self, name="sparse_categorical_accuracy", dtype=None):
        super().__init__(sparse_categorical_accuracy, name=name, dtype=dtype)

    def get_config(self):
        return Metric.get_config(self)


def _check_k(k, who):
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"{who}: k must be a positive integer, got {k!r}")
    return int(k)


class TopKCategoricalAccuracy(MeanMetricWrapper):
    """How often the one-hot label is among the ``k`` largest predictions."""

    def __init__(self, k=5, name="top_k_categorical_accuracy", dtype=None):
        k = _check_k(k, "TopKCategoricalAccuracy")
        super().__init__(top_k_categorical_accuracy, name=name, dtype=dtype, k=k)
        self.k = k

    def get_config(self):
        return {**Metric.get_config(self), "k": self.k}


class SparseTopKCategoricalAccuracy(MeanMetricWrapper):
    """How often the integer label is among the ``k`` largest predictions."""

    def __init__(self, k=5, name="sparse_top_k_categorical_accuracy", dtype=None):
        k = _check_k(k, "SparseTopKCategoricalAccuracy")
        super().__init__(sparse_top_k_categorical_accuracy, name=name, dtype=dtype, k=k)
        self.k = k

    def get_config(self):
        return {**Metric.get_config(self), "k": self.k}


class MeanSquaredError(MeanMetricWrapper):
    """The mean of ``mean((y_pred - y_true)^2, axis=-1)`` over the samples."""

    def __init__(self, name="mean_squared_error", dtype=None):
        super().__init__(mean_squared_error, name=name, dtype=dtype)

    def get_config(self):
        return Metric.get_config(self)


class MeanAbsoluteError(MeanMetricWrapper):
    """The mean of ``mean(|y_pred - y_true|, axis=-1)`` over the samples."""

    def __init__(self, name="mean_absolute_error", dtype=None):
        super().__init__(mean_absolute_error, name=name, dtype=dtype)

    def get_config(self):
        return Metric.get_config(self)


class RootMeanSquaredError(Mean):
    """``sqrt`` of the (weighted) mean of ``(y_pred - y_true)^2`` over every element."""

    def __init__(self, name="root_mean_squared_error", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred = _as(y_true, self._dtype), _as(y_pred, self._dtype)
        y_true, y_pred = _same_rank(y_true, y_pred)
        return super().update_state(_ops.square(y_pred - y_true), sample_weight=sample_weight)

    def result(self):
        return _ops.sqrt(super().result())


# ---------------------------------------------------------------------------
# confusion-matrix metrics


def _evenly_spaced(thresholds) -> bool:
    """Keras' ``is_evenly_distributed_thresholds``: 0, 1/(n-1), ..., 1 (n >= 3)."""
    n = len(thresholds)
    if n < 3:
        return False
    even = np.arange(n, dtype=np.float32) / (n - 1)
    return bool(np.allclose(np.asarray(thresholds, dtype=np.float64), even, atol=EPSILON))


def _parse_thresholds(thresholds, default, who):
    if thresholds is None:
        return [float(default)]
    values = list(thresholds) if isinstance(thresholds, (list, tuple, np.ndarray)) else [
        thresholds]
    bad = [t for t in values if t is None or not 0 <= t <= 1]
    if bad:
        raise ValueError(f"{who}: threshold values must be in [0, 1]. Received: {bad}")
    return [float(t) for t in values]


def _filter_top_k(x, k):
    """Keep the ``k`` largest entries of each row (ties: the lower index first, as
    ``top_k``); the others become ``NEG_INF``."""
    n = int(x.shape[-1])
    xj = _ops.expand_dims(x, -1)  # [..., j, 1]
    xi = _ops.expand_dims(x, -2)  # [..., 1, i]
    earlier = convert_to_tensor(np.tril(np.ones((n, n), bool), -1))  # [j, i]: i < j
    ahead = _ops.logical_or(xi > xj, _ops.logical_and(_ops.equal(xi, xj), earlier))
    rank = _ops.reduce_sum(_ops.cast(ahead, "int32"), axis=-1)
    mask = _ops.cast(rank < k, x.dtype)
    return x * mask + NEG_INF * (1.0 - mask)


def _update_confusion(variables, y_true, y_pred, thresholds, top_k=None, class_id=None,
                      sample_weight=None, evenly=False):
    """Keras' ``update_confusion_matrix_variables`` (one label set, no label weights):
    ``variables`` maps "tp", "fp", "tn", "fn" to variables of shape ``[thresholds]``."""
    dt = next(iter(variables.values())).dtype
    y_true, y_pred = _as(y_true, dt), _as(y_pred, dt)
    y_pred, y_true = _same_rank(y_pred, y_true)
    if sample_weight is not None:
        sample_weight = _ops.expand_dims(_as(sample_weight, dt), -1)
        _, sample_weight = _same_rank(y_true, sample_weight, expand_rank_1=False)
    if top_k is not None:
        y_pred = _filter_top_k(y_pred, top_k)
    if class_id is not None:
        if y_pred.ndim == 1:
            raise ValueError(
                "When class_id is provided, y_pred must be a 2D array with shape "
                f"(num_samples, num_classes), found shape: {tuple(y_pred.shape)}")
        y_true = y_true[..., class_id, None]
        y_pred = y_pred[..., class_id, None]
    n = len(thresholds)
    weights = None
    if sample_weight is not None:
        weights = _ops.reshape(_ops.broadcast_to(sample_weight, _ops.shape(y_pred)), [1, -1])
    labels = _ops.reshape(_ops.not_equal(y_true, 0.0), [1, -1])
    if evenly:
        # Keras' fast path: bucket b = ceil(p * (n - 1)) - 1 (at least 0 when the outer
        # thresholds hold an epsilon); positive at threshold i when b >= i
        with_eps = thresholds[0] < 0.0 or thresholds[-1] > 1.0
        p = _ops.clip_by_value(_ops.reshape(y_pred, [1, -1]), 0.0, 1.0)
        bucket = -_ops.floor(-(p * float(n - 1))) - 1.0
        if with_eps:
            bucket = _ops.maximum(bucket, 0.0)
        index = convert_to_tensor(np.arange(n, dtype=dt._np).reshape(n, 1))
        pred_pos = _ops.greater_equal(bucket, index)
    else:
        t = convert_to_tensor(np.asarray(thresholds, dt._np).reshape(n, 1))
        pred_pos = _ops.greater(_ops.reshape(y_pred, [1, -1]), t)

    def count(label, pred):
        both = _ops.logical_and(label, pred)
        if weights is None:
            return _ops.reduce_sum(_ops.cast(both, dt), axis=1)
        return _ops.reduce_sum(_ops.where(both, weights, 0.0), axis=1)

    neg_label, neg_pred = _ops.logical_not(labels), _ops.logical_not(pred_pos)
    cases = {"tp": (labels, pred_pos), "fp": (neg_label, pred_pos),
             "tn": (neg_label, neg_pred), "fn": (labels, neg_pred)}
    for key, var in variables.items():
        var.assign_add(count(*cases[key]))


class Precision(Metric):
    """``true_positives / (true_positives + false_positives)`` at each threshold
    (0.5 by default; with ``top_k``, the ``k`` largest predictions of a row are the
    positives); one value per threshold, a scalar for a single one. ``class_id``
    looks at one class of ``(N, C)`` predictions only."""

    _counts = ("tp", "fp")

    def __init__(self, thresholds=None, top_k=None, class_id=None, name=None, dtype=None):
        super().__init__(name=name, dtype=dtype)
        who = type(self).__name__
        if top_k is not None:
            top_k = _check_k(top_k, who)
        self.init_thresholds = thresholds
        self.top_k = top_k
        self.class_id = class_id
        self.thresholds = _parse_thresholds(
            thresholds, 0.5 if top_k is None else NEG_INF, who)
        self._evenly = _evenly_spaced(self.thresholds)
        names = {"tp": "true_positives", "fp": "false_positives", "fn": "false_negatives"}
        for key in self._counts:
            setattr(self, names[key], self.add_variable((len(self.thresholds),), "zeros",
                                                        name=names[key]))

    def _variables_by_key(self):
        return {"tp": self.true_positives, "fp": self.false_positives}

    def update_state(self, y_true, y_pred, sample_weight=None):
        _update_confusion(self._variables_by_key(), y_true, y_pred, self.thresholds,
                          top_k=self.top_k, class_id=self.class_id,
                          sample_weight=sample_weight, evenly=self._evenly)

    def _other(self):
        return self.false_positives

    def result(self):
        r = _divide_no_nan(self.true_positives, self.true_positives + self._other())
        return r[0] if len(self.thresholds) == 1 else r

    def get_config(self):
        return {**super().get_config(), "thresholds": self.init_thresholds,
                "top_k": self.top_k, "class_id": self.class_id}


class Recall(Precision):
    """``true_positives / (true_positives + false_negatives)``, with Precision's
    arguments."""

    _counts = ("tp", "fn")

    def _variables_by_key(self):
        return {"tp": self.true_positives, "fn": self.false_negatives}

    def _other(self):
        return self.false_negatives


_CURVES = {"roc": "ROC", "pr": "PR"}
_SUMMATIONS = ("interpolation", "majoring", "minoring")


class AUC(Metric):
    """The area under the ROC curve (``curve="ROC"``) or the precision-recall curve
    (``"PR"``), from counts at ``num_thresholds`` thresholds.

    The thresholds are ``[-eps, 1/(n-1), ..., (n-2)/(n-1), 1 + eps]`` (or ``[-eps] +
    sorted(thresholds) + [1 + eps]``). ROC sums trapezoids over (false positive rate,
    recall); PR with ``"interpolation"`` uses Davis & Goadrich's interpolation of
    precision between thresholds; ``"majoring"``/``"minoring"`` take the larger or
    smaller height of each step.
    """

    def __init__(self, num_thresholds=200, curve="ROC", summation_method="interpolation",
                 name=None, dtype=None, thresholds=None, multi_label=False, num_labels=None,
                 label_weights=None, from_logits=False):
        if multi_label or num_labels is not None or label_weights is not None:
            raise NotImplementedError(
                "jt.metrics.AUC: multi_label, num_labels and label_weights are not "
                "supported yet; use one AUC per label")
        key = curve.lower() if isinstance(curve, str) else None
        if key not in _CURVES:
            raise ValueError(
                f'Invalid AUC curve value: "{curve}". Expected values are ["PR", "ROC"] '
                "(PRGAIN is not supported yet)")
        method = summation_method.lower() if isinstance(summation_method, str) else None
        if method not in _SUMMATIONS:
            raise ValueError(
                f'Invalid AUC summation method value: "{summation_method}". Expected values '
                'are ["interpolation", "majoring", "minoring"]')
        self._init_from_thresholds = thresholds is not None
        if thresholds is not None:
            inner = sorted(float(t) for t in thresholds)
            self.num_thresholds = len(inner) + 2
            evenly = _evenly_spaced([0.0] + inner + [1.0])
        else:
            if isinstance(num_thresholds, bool) or not isinstance(
                    num_thresholds, numbers.Integral) or num_thresholds <= 1:
                raise ValueError("Argument `num_thresholds` must be an integer > 1. "
                                 f"Received: num_thresholds={num_thresholds}")
            self.num_thresholds = int(num_thresholds)
            inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
            evenly = True
        self._thresholds = [0.0 - EPSILON] + inner + [1.0 + EPSILON]
        self._evenly = evenly
        self.curve = _CURVES[key]
        self.summation_method = method
        self._from_logits = bool(from_logits)
        super().__init__(name=name, dtype=dtype)
        shape = (self.num_thresholds,)
        self.true_positives = self.add_variable(shape, "zeros", name="true_positives")
        self.false_positives = self.add_variable(shape, "zeros", name="false_positives")
        self.true_negatives = self.add_variable(shape, "zeros", name="true_negatives")
        self.false_negatives = self.add_variable(shape, "zeros", name="false_negatives")

    @property
    def thresholds(self) -> list:
        return list(self._thresholds)

    def update_state(self, y_true, y_pred, sample_weight=None):
        if self._from_logits:
            y_pred = _ops.sigmoid(_tensor(y_pred))
        _update_confusion(
            {"tp": self.true_positives, "tn": self.true_negatives,
             "fp": self.false_positives, "fn": self.false_negatives},
            y_true, y_pred, self._thresholds, sample_weight=sample_weight,
            evenly=self._evenly)

    def _interpolate_pr_auc(self):
        n = self.num_thresholds
        tp, fp, fn = self.true_positives, self.false_positives, self.false_negatives
        dtp = tp[: n - 1] - tp[1:]
        p = tp + fp
        dp = p[: n - 1] - p[1:]
        prec_slope = _divide_no_nan(dtp, _ops.maximum(dp, 0.0))
        intercept = tp[1:] - prec_slope * p[1:]
        safe_p_ratio = _ops.where(
            _ops.logical_and(p[: n - 1] > 0, p[1:] > 0),
            _divide_no_nan(p[: n - 1], _ops.maximum(p[1:], 0.0)),
            _ops.ones_like(p[1:]))
        increment = _divide_no_nan(prec_slope * (dtp + intercept * _ops.log(safe_p_ratio)),
                                   _ops.maximum(tp[1:] + fn[1:], 0.0))
        return _ops.reduce_sum(increment)

    def result(self):
        if self.curve == "PR" and self.summation_method == "interpolation":
            return self._interpolate_pr_auc()
        n = self.num_thresholds
        tp, fp = self.true_positives, self.false_positives
        tn, fn = self.true_negatives, self.false_negatives
        recall = _divide_no_nan(tp, tp + fn)
        if self.curve == "ROC":
            x, y = _divide_no_nan(fp, fp + tn), recall
        else:
            x, y = recall, _divide_no_nan(tp, tp + fp)
        if self.summation_method == "interpolation":
            heights = (y[: n - 1] + y[1:]) / 2.0
        elif self.summation_method == "minoring":
            heights = _ops.minimum(y[: n - 1], y[1:])
        else:
            heights = _ops.maximum(y[: n - 1], y[1:])
        return _ops.reduce_sum((x[: n - 1] - x[1:]) * heights)

    def get_config(self):
        config = {**super().get_config(), "num_thresholds": self.num_thresholds,
                  "curve": self.curve, "summation_method": self.summation_method,
                  "multi_label": False, "num_labels": None, "label_weights": None,
                  "from_logits": self._from_logits}
        if self._init_from_thresholds:
            config["thresholds"] = self._thresholds[1:-1]
        return config


# ---------------------------------------------------------------------------

_FUNCTIONS = {f.__name__: f for f in (
    accuracy, binary_accuracy, categorical_accuracy, sparse_categorical_accuracy,
    top_k_categorical_accuracy, sparse_top_k_categorical_accuracy)}
_FUNCTIONS = {**_losses._NAMES_TO_FUNCTIONS, **_FUNCTIONS}  # a wrapper's fn may be a loss
_CLASSES = {c.__name__: c for c in (
    Mean, Sum, MeanMetricWrapper, Accuracy, BinaryAccuracy, CategoricalAccuracy,
    SparseCategoricalAccuracy, TopKCategoricalAccuracy, SparseTopKCategoricalAccuracy,
    MeanSquaredError, MeanAbsoluteError, RootMeanSquaredError, Precision, Recall, AUC)}
# Keras' names: each class's, in CamelCase and snake_case ("AUC" and "auc"), and aliases
_BY_NAME = {**_CLASSES, **{_snake(n): c for n, c in _CLASSES.items()},
            "mse": MeanSquaredError, "MSE": MeanSquaredError, "mae": MeanAbsoluteError,
            "MAE": MeanAbsoluteError, "acc": Accuracy}
# Keras 3 metrics jittape has not got (yet): a clear error instead of "unknown"
_KERAS_ONLY = tuple(n for c in (
    "MeanAbsolutePercentageError", "MeanSquaredLogarithmicError", "CosineSimilarity",
    "LogCoshError", "R2Score", "FalseNegatives", "FalsePositives", "PrecisionAtRecall",
    "RecallAtPrecision", "SensitivityAtSpecificity", "SpecificityAtSensitivity",
    "TrueNegatives", "TruePositives", "ConcordanceCorrelation", "PearsonCorrelation",
    "Hinge", "SquaredHinge", "CategoricalHinge", "KLDivergence", "Poisson",
    "BinaryCrossentropy", "CategoricalCrossentropy", "SparseCategoricalCrossentropy",
    "F1Score", "FBetaScore", "IoU", "BinaryIoU", "MeanIoU", "OneHotIoU", "OneHotMeanIoU",
    "bce", "BCE", "mape", "MAPE", "msle", "MSLE") for n in (c, _snake(c)))


def serialize(metric):
    """Keras' serialized form of a metric: ``{"module": "keras.metrics", "class_name",
    "config", "registered_name": None}``, or Keras' form of a function.

    Example::

        jt.metrics.serialize(jt.metrics.AUC(num_thresholds=50))["config"]["num_thresholds"]
    """
    return _config.serialize(metric, "keras.metrics", _CLASSES, "metric")


def deserialize(config, custom_objects=None):
    """The metric a name or a serialized dict stands for (the inverse of ``serialize``; the
    plain ``{"class_name", "config"}`` form works too): a new instance for a class, the
    function for a function's form. ``custom_objects`` maps names to your own classes."""
    return _config.deserialize(config, "metric", _BY_NAME, custom_objects,
                               functions=_FUNCTIONS, not_yet=_KERAS_ONLY)


def get(identifier):
    """A metric from an identifier, as Keras 3's ``get``: ``None``; a class's name in
    CamelCase or snake_case, or an alias (``"AUC"``, ``"auc"``, ``"accuracy"``, ``"mse"``:
    a new instance); a config dict; a class (instantiated); a metric or callable
    (returned).

    Example::

        jt.metrics.get("sparse_categorical_accuracy")  # a SparseCategoricalAccuracy
        jt.metrics.get({"class_name": "AUC", "config": {"curve": "PR"}}).curve  # "PR"
    """
    if identifier is None:
        return None
    if isinstance(identifier, str):
        obj = _BY_NAME.get(identifier)
        if obj is None:
            obj = deserialize(identifier)  # raises, naming the identifier
    elif isinstance(identifier, dict):
        obj = deserialize(identifier)
    else:
        obj = identifier
    if isinstance(obj, type):
        obj = obj()
    if not callable(obj):
        raise ValueError(f"Could not interpret metric identifier: {identifier!r}")
    return obj


_config.export("metric", ("keras.metrics",), Metric, _CLASSES, serialize, deserialize,
               _FUNCTIONS)
