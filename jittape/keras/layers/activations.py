"""The activations layers take by name (``ACTIVATIONS``, ``get_activation``), and the
logits that their ``"sigmoid"`` and ``"softmax"`` outputs remember for the crossentropies."""

from __future__ import annotations

import weakref

from ..saving import serialization as _config
from ... import ops as _ops


def _linear(x):
    return x


def _silu(x):
    return x * _ops.sigmoid(x)


# Keras' "sigmoid" and "softmax" activations remember their inputs on their outputs
# (``_keras_logits``), and its crossentropies, given such an output, compute from those
# logits instead of the clipped probabilities: the same value where nothing saturates,
# but exact (and with a nonzero gradient) where it does. jittape's tensors take no new
# attributes, so the outputs are remembered here, by identity, while they are alive.
# ``jt.nn.sigmoid``/``jt.nn.softmax`` (like ``tf.nn.sigmoid``) remember nothing.
_LOGITS: dict = {}  # id(output) -> (weakref to output, kind, logits)


def _remember_logits(output, logits, kind):
    key = id(output)
    try:
        ref = weakref.ref(output)
    except TypeError:  # not a jittape tensor: nothing to remember
        return output
    _LOGITS[key] = (ref, kind, logits)
    weakref.finalize(output, _forget_logits, key, ref)
    return output


def _forget_logits(key, ref):
    entry = _LOGITS.get(key)
    if entry is not None and entry[0] is ref:
        del _LOGITS[key]


def keras_logits(output, kind):
    """The logits ``output`` was computed from by the ``kind`` ("sigmoid" or
    "softmax") activation of a layer, or ``None``."""
    entry = _LOGITS.get(id(output))
    if entry is None or entry[0]() is not output or entry[1] != kind:
        return None
    return entry[2]


def _sigmoid(x):
    return _remember_logits(_ops.nn.sigmoid(x), x, "sigmoid")


def _softmax(x, axis=-1):
    if axis != -1:
        return _ops.nn.softmax(x, axis=axis)
    return _remember_logits(_ops.nn.softmax(x), x, "softmax")


_sigmoid.__name__, _softmax.__name__ = "sigmoid", "softmax"

ACTIVATIONS = {
    "linear": _linear,
    "relu": _ops.nn.relu,
    "sigmoid": _sigmoid,
    "tanh": _ops.nn.tanh,
    "softmax": _softmax,
    "log_softmax": _ops.nn.log_softmax,
    "leaky_relu": _ops.nn.leaky_relu,  # negative slope 0.2, Keras 3's default
    "softplus": _ops.nn.softplus,
    "exponential": _ops.exp,
    "silu": _silu,
    "swish": _silu,
}


def get_activation(identifier):
    """An activation function from a name (``"relu"``), ``None`` (linear), a callable, or
    the config record of a function of your own (found in ``custom_objects``)."""
    if identifier is None:
        return _linear
    if isinstance(identifier, dict):
        return _config.deserialize(identifier, "activation", {}, functions=ACTIVATIONS)
    if isinstance(identifier, str):
        fn = ACTIVATIONS.get(identifier)
        if fn is None:
            raise ValueError(
                f"Unknown activation {identifier!r}; known names: {', '.join(sorted(ACTIVATIONS))}"
            )
        return fn
    if callable(identifier):
        return identifier
    raise TypeError(f"activation must be a name, None or a callable, got {identifier!r}")


class _ActivationAttr:
    """The ``activation`` attribute of a layer: whatever is assigned (a name, ``None``
    for linear, or a callable) is stored as the function, so that ``layer.activation =
    None`` after construction means linear, as ``activation=None`` does."""

    def __set_name__(self, owner, name):
        self.key = "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        try:
            return obj.__dict__[self.key]
        except KeyError:
            raise AttributeError(self.key[1:]) from None

    def __set__(self, obj, value):
        obj.__dict__[self.key] = get_activation(value)


def _activation_name(fn) -> str:
    for k, v in ACTIVATIONS.items():
        if v is fn:
            return k
    return getattr(fn, "__name__", repr(fn))


def _serialize_activation(fn):
    """A built-in activation by its name (``"relu"``), as Keras writes it; a function of
    the user's as Keras' function record."""
    for k, v in ACTIVATIONS.items():
        if v is fn:
            return k
    name = getattr(fn, "__name__", None)
    if name in ACTIVATIONS and getattr(fn, "__module__", "").startswith("jittape"):
        return name  # jt.keras.activations.relu (with options) is "relu" too
    return _config.serialize_function(fn)
