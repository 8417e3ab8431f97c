"""``InputLayer`` and ``Input``: the symbolic inputs of a functional model (Keras 3's
``layers/core/input_layer.py``)."""

from __future__ import annotations

import numbers

from ...dtypes import as_dtype
from ..keras_tensor import KerasTensor, Node
from ..naming import _fmt_shape, _unique_name
from .base import Layer

__all__ = ["InputLayer", "Input"]


class InputLayer(Layer):
    """The layer behind ``jt.keras.Input``: it holds the symbolic input tensor."""

    def __init__(self, shape=None, batch_size=None, dtype=None, name=None, batch_shape=None,
                 sparse=None, ragged=None, optional=False, batch_input_shape=None, **kwargs):
        if sparse or ragged:
            raise ValueError("InputLayer: sparse and ragged inputs are not supported by jittape")
        if optional:
            raise ValueError("InputLayer: optional inputs are not supported by jittape")
        if batch_shape is None and batch_input_shape is not None:  # Keras 2's name
            batch_shape = batch_input_shape
        if batch_shape is None:
            if shape is None:
                raise ValueError("You must pass a `shape` argument to Input (the shape of one "
                                 "sample, without the batch dimension), e.g. Input(shape=(4,))")
            if isinstance(shape, numbers.Integral):
                shape = (shape,)
            batch_shape = (batch_size,) + tuple(shape)
        elif shape is not None:
            raise ValueError("Input: pass either shape or batch_shape, not both")
        batch_shape = tuple(None if d is None else int(d) for d in batch_shape)
        for d in batch_shape:
            if d is not None and d < 0:
                raise ValueError(f"Input: negative dimension in shape {_fmt_shape(batch_shape)}")
        super().__init__(name=name or _unique_name("input_layer"), dtype=None, **kwargs)
        self._input_dtype_ = as_dtype(dtype if dtype is not None else "float32")
        self.batch_shape = batch_shape
        self.output = KerasTensor(batch_shape, self._input_dtype_, name=self.name,
                                  history=(self, 0, 0))
        self.__dict__["_inbound_nodes"] = [Node(self, [], (), {}, self.output)]
        self.built = True

    @property
    def dtype(self):
        return self._input_dtype_

    def call(self, inputs):
        return inputs

    def get_config(self):
        return {"batch_shape": list(self.batch_shape), "dtype": self.dtype.name,
                "sparse": False, "ragged": False, "name": self.name, "optional": False}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def Input(shape=None, batch_size=None, dtype=None, sparse=None, batch_shape=None, name=None,
          tensor=None, optional=False):
    """A symbolic input of a functional model: ``shape`` is one sample's shape (no
    batch dimension); ``None`` marks a dimension of any size."""
    if tensor is not None:
        raise ValueError("Input(tensor=...) is not supported by jittape")
    if optional:
        raise ValueError("Input(optional=True) is not supported by jittape")
    return InputLayer(shape=shape, batch_size=batch_size, dtype=dtype, name=name,
                      batch_shape=batch_shape, sparse=sparse).output
