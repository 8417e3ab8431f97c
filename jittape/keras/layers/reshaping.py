"""Layers that pass one tensor through a rule of their own: ``Reshape``, ``Identity``,
``Lambda``, and the layer that records an operator applied to a functional-API
``KerasTensor`` (``x + y``, ``x[:, 0]``)."""

from __future__ import annotations

import inspect
import math
import numbers

from .. import keras_tensor as _kt
from ... import ops as _ops
from ...errors import InvalidArgumentError
from ..naming import _fmt_shape, _unique_name
from ..saving.serialization_lib import (deserialize_keras_object, func_dump, func_load,
                                        in_safe_mode, serialize_keras_object)
from ...tensor import Tensor
from .base import Layer


class Reshape(Layer):
    """Reshape each sample to ``target_shape`` (the batch dimension is kept; one entry
    may be -1)."""

    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        self.target_shape = tuple(int(d) for d in target_shape)
        if sum(d == -1 for d in self.target_shape) > 1 or any(
            d < -1 or d == 0 for d in self.target_shape
        ):
            raise ValueError(f"Reshape: invalid target_shape {self.target_shape}")

    def call(self, inputs):
        inputs = inputs if isinstance(inputs, Tensor) else _ops.identity(inputs)
        shape = tuple(inputs._type.shape)
        size = math.prod(inputs.shape[1:]) if all(
            isinstance(d, numbers.Integral) for d in inputs.shape[1:]) else None
        known = math.prod(d for d in self.target_shape if d != -1)
        if size is not None and (
            (-1 not in self.target_shape and known != size)
            or (-1 in self.target_shape and size % known)
        ):
            raise InvalidArgumentError(
                f'layer "{self.name}" (Reshape): total size of the input sample '
                f"{_fmt_shape(inputs.shape[1:])} ({size}) does not fit target_shape "
                f"{_fmt_shape(self.target_shape)}")
        return _ops.reshape(inputs, (shape[0],) + self.target_shape)

    def compute_output_shape(self, input_shape):
        if -1 in self.target_shape:
            rest = math.prod(input_shape[1:]) // math.prod(
                d for d in self.target_shape if d != -1)
            return (input_shape[0],) + tuple(rest if d == -1 else d for d in self.target_shape)
        return (input_shape[0],) + self.target_shape

    def get_config(self):
        return {**super().get_config(), "target_shape": list(self.target_shape)}


class Identity(Layer):
    """Returns its input unchanged."""

    def call(self, inputs):
        return inputs


def _parameters(fn) -> frozenset:
    """The names ``fn`` takes (none when Python cannot tell, as for some builtins)."""
    try:
        return frozenset(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return frozenset()


class Lambda(Layer):
    """Wrap a function of tensors as a layer (``Lambda(lambda t: t * 2)``), so jittape ops
    can be used in a functional model. ``arguments`` are extra keyword arguments."""

    def __init__(self, function, output_shape=None, mask=None, arguments=None, **kwargs):
        super().__init__(**kwargs)
        if not callable(function):
            raise TypeError(f"Lambda: function must be callable, got {type(function).__name__}")
        self.function = function
        self.arguments = dict(arguments or {})
        self._output_shape = output_shape

    def call(self, inputs, mask=None, training=None):
        # Keras 3's signature; the function gets mask / training when it takes them
        kwargs = dict(self.arguments)
        params = _parameters(self.function)
        if "mask" in params:
            kwargs["mask"] = mask
        if "training" in params:
            kwargs["training"] = training
        return self.function(inputs, **kwargs)

    def compute_output_shape(self, input_shape):
        if self._output_shape is not None:
            shape = self._output_shape(input_shape) if callable(self._output_shape) else (
                (input_shape[0],) + tuple(self._output_shape))
            return tuple(shape)
        return super().compute_output_shape(input_shape)

    def get_config(self):
        """Keras 3's config: the function as its record (a named function by its
        registered name, so register it or pass it in ``custom_objects`` to load; a
        ``lambda`` as its bytecode, Keras' ``__lambda__`` record, which only
        ``safe_mode=False`` loads, seeing only Python's builtins as its globals)."""
        config = {**super().get_config(), "function": _function_config(self.function)}
        if self._output_shape is not None:
            config["output_shape"] = (_function_config(self._output_shape)
                                      if callable(self._output_shape)
                                      else list(self._output_shape))
        config["arguments"] = serialize_keras_object(self.arguments)
        return config

    @classmethod
    def from_config(cls, config):
        """Refuses a lambda's bytecode unless an enclosing load has ``safe_mode=False``
        (Keras 3.15 fails closed so too)."""
        config = dict(config)
        for key in ("function", "output_shape"):
            value = config.get(key)
            if isinstance(value, dict) and value.get("class_name") == "__lambda__":
                if in_safe_mode() is not False:
                    raise ValueError(
                        f"Requested the deserialization of a `Lambda` layer whose `{key}` is "
                        "a Python lambda. This carries a potential risk of arbitrary code "
                        "execution and thus it is disallowed by default. If you trust the "
                        "source of the artifact, pass `safe_mode=False` to the loading "
                        "function (or give the layer a named, registered function)")
                inner = value["config"]
                config[key] = func_load((inner["code"], inner["defaults"], inner["closure"]))
            elif isinstance(value, dict):
                config[key] = deserialize_keras_object(value)
            elif isinstance(value, list):
                config[key] = tuple(value)
        if config.get("arguments") is not None:
            config["arguments"] = deserialize_keras_object(config["arguments"])
        return super().from_config(config)


def _function_config(fn):
    """A Lambda's function as Keras' Lambda writes it (a lambda as its bytecode)."""
    if getattr(fn, "__name__", None) == "<lambda>":
        code, defaults, closure = func_dump(fn)
        return {"class_name": "__lambda__",
                "config": {"code": code, "defaults": defaults, "closure": closure}}
    return serialize_keras_object(fn)


class _OpLayer(Layer):
    """An operator applied to a ``KerasTensor`` (``x + y``): the function of the operands."""

    def __init__(self, fn, op_name):
        super().__init__(name=_unique_name(op_name))
        self._fn = fn

    def _convert_input(self, x):
        return x  # operands stay as given (a Python number stays a number)

    def call(self, inputs):
        if isinstance(inputs, list):
            return self._fn(*inputs)
        return self._fn(inputs)


_kt._OP_LAYER = _OpLayer  # the layer an operator on a KerasTensor calls
