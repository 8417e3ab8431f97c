"""What every loss shares: the inputs as tensors of one dtype and shape, the checks of
the arguments, the reductions over the batch, and the base class ``Loss``."""

from __future__ import annotations

import math
import numbers
import sys
import warnings
import weakref

import numpy as np

from ..saving import serialization as _config
from ... import ops as _ops
from ...dtypes import as_dtype
from ...errors import InvalidArgumentError
from ..layers import keras_logits
from ..naming import _snake, _unique_name
from ...tensor import Tensor, Variable, convert_to_tensor


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


def _ours(module_name) -> bool:
    """Whether a frame of the module ``module_name`` is one of this package's."""
    return module_name == __package__ or str(module_name).startswith(__package__ + ".")


def _caller_level() -> int:
    """The ``stacklevel`` (for a warning raised by this function's caller) of the first
    frame outside this package (its modules call each other: a loss class, its function,
    these helpers)."""
    f, level = sys._getframe(1), 1
    while f is not None and _ours(f.f_globals.get("__name__")):
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
    per-sample values, weights them and reduces them (see ``jt.losses``).

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
        return cls(**_config.init_config(cls, config))

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r} reduction={self.reduction!r}>"
