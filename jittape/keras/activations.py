"""``jt.keras.activations``: Keras 3's activation functions, ``get`` and ``serialize``.

``sigmoid`` and ``softmax`` are the layers' own (their outputs remember the logits, so a
crossentropy computes from those, as in Keras 3). The functions defined here are also
known to ``jt.layers`` by name (``Dense(4, activation="elu")``).
"""

from __future__ import annotations


from . import layers as _layers
from .saving import serialization as _config
from .. import ops as _ops

__all__ = [
    "get", "serialize", "deserialize", "linear", "relu", "relu6", "sigmoid", "softmax",
    "log_softmax", "tanh", "softplus", "softsign", "exponential", "elu", "selu", "silu",
    "swish", "gelu", "hard_sigmoid", "hard_silu", "hard_swish", "leaky_relu", "mish",
]

_A = _layers.ACTIVATIONS
linear, sigmoid, softmax, log_softmax = _A["linear"], _A["sigmoid"], _A["softmax"], \
    _A["log_softmax"]
tanh, softplus, exponential, silu = _A["tanh"], _A["softplus"], _A["exponential"], _A["silu"]
swish = silu


def relu(x, negative_slope=0.0, max_value=None, threshold=0.0):
    """``max(x, 0)``; with Keras' options: ``negative_slope * (x - threshold)`` below
    ``threshold`` (which zeroes inputs up to it), and a cap at ``max_value``."""
    x = _ops.convert_to_tensor(x) if not hasattr(x, "dtype") else x
    if negative_slope == 0.0 and max_value is None and threshold == 0.0:
        return _ops.nn.relu(x)
    if negative_slope != 0.0:
        if max_value is None and threshold == 0:
            return _ops.nn.leaky_relu(x, alpha=negative_slope)
        negative_part = _ops.nn.relu(-x + threshold) if threshold != 0 else _ops.nn.relu(-x)
    if threshold != 0:
        x = x * _ops.cast(_ops.greater(x, threshold), x.dtype)
    else:
        x = _ops.nn.relu(x)
    if max_value is not None:
        x = _ops.clip_by_value(x, 0.0, float(max_value))
    if negative_slope != 0.0:
        x = x - negative_slope * negative_part
    return x


def relu6(x):
    """``min(max(x, 0), 6)``."""
    return _ops.clip_by_value(_ops.nn.relu(x), 0.0, 6.0)


def leaky_relu(x, negative_slope=0.2):
    """``x`` above 0, ``negative_slope * x`` below."""
    return _ops.nn.leaky_relu(x, alpha=negative_slope)


def softsign(x):
    """``x / (|x| + 1)``."""
    return x / (_ops.abs(x) + 1.0)


def elu(x, alpha=1.0):
    """``x`` above 0, ``alpha * (exp(x) - 1)`` below."""
    neg = _ops.minimum(x, 0.0)  # exp of the negative part only: no overflow above 0
    return _ops.where(x > 0, x, alpha * (_ops.exp(neg) - 1.0))


_SELU_ALPHA, _SELU_SCALE = 1.67326324, 1.05070098


def selu(x):
    """``scale * elu(x, alpha)`` with Keras' constants (1.05070098, 1.67326324)."""
    return _SELU_SCALE * elu(x, _SELU_ALPHA)


def hard_sigmoid(x):
    """``relu6(x + 3) / 6`` (Keras 3's definition)."""
    return relu6(x + 3.0) / 6.0


def hard_silu(x):
    """``x * hard_sigmoid(x)``."""
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def mish(x):
    """``x * tanh(softplus(x))``."""
    return x * _ops.tanh(_ops.nn.softplus(x))


def gelu(x, approximate=False):
    """``x * P(X <= x)`` for a standard normal X (exactly, through erf); ``approximate=True``
    uses the tanh formula ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    return _ops.nn.gelu(x, approximate=approximate)


_OWN = {
    "relu": relu, "relu6": relu6, "leaky_relu": leaky_relu, "softsign": softsign,
    "elu": elu, "selu": selu, "hard_sigmoid": hard_sigmoid, "hard_silu": hard_silu,
    "hard_swish": hard_swish, "mish": mish, "gelu": gelu,
}
for _name, _fn in _OWN.items():  # known to the layers by name too
    if _name not in ("relu", "leaky_relu"):
        _A.setdefault(_name, _fn)

_ALL = {**_A, **_OWN}


def get(identifier):
    """An activation function from a name, ``None`` (linear) or a callable."""
    if isinstance(identifier, str) and identifier in _OWN:
        return _OWN[identifier]
    return _layers.get_activation(identifier)


def serialize(activation) -> str:
    """The name of a built-in activation (``serialize(relu) == "relu"``)."""
    for name, fn in _ALL.items():
        if fn is activation:
            return name
    name = getattr(activation, "__name__", None)  # the layers' relu is jt.nn.relu
    if name in _ALL:
        return name
    raise ValueError(f"serialize: {activation!r} is not a built-in activation")


def deserialize(name):
    """The activation function named ``name``."""
    return get(name)


_config.export("activation", ("keras.activations",), None, {}, functions=_ALL)
