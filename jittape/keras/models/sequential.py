"""``Sequential``: a stack of layers, each feeding the next, that trains with ``fit``."""

from __future__ import annotations

import math

from ..saving import serialization as _config
from .. import keras_tensor as _kt
from ...dtypes import as_dtype
from ..layers import Layer, deserialize, serialize
from ..layers.utils import _shape_from_config
from ..naming import _fmt_shape
from ..trainers.trainer import Trainer


class Sequential(Trainer, Layer):
    """A stack of layers, each feeding the next.

    Built on the first call, or at once when the first layer has ``input_shape``.
    """

    def __init__(self, layers=None, name=None, trainable=True, dtype=None):
        Layer.__init__(self, trainable=trainable, name=name, dtype=dtype)
        Trainer.__init__(self)
        self._stack = []
        for layer in layers or ():
            self.add(layer)

    @property
    def layers(self) -> list:
        return list(self._stack)

    @property
    def input_shape(self):
        """The shape of the model's input, batch dimension first (None unless an ``Input``
        fixed it), once the model is built; AttributeError before, as Keras 3.

        Example::

            model = jt.keras.Sequential([jt.keras.layers.Dense(8, input_shape=(16,))])
            model.input_shape   # (None, 16)
        """
        if not self.built or self._build_input_shape is None:
            raise AttributeError(f"Sequential model '{self.name}' has no defined input shape yet.")
        return self.__dict__.get("_input_batch_shape") or tuple(self._build_input_shape)

    @property
    def output_shape(self):
        """The shape of the model's output, from the layers' ``compute_output_shape``, once
        the model is built (TF's DCGAN tutorial checks each ``add`` with it); AttributeError
        before, as Keras 3.

        Example::

            model = jt.keras.Sequential([jt.keras.layers.Dense(8, input_shape=(16,))])
            model.add(jt.keras.layers.Reshape((2, 4)))
            model.output_shape  # (None, 2, 4)
        """
        if not self.built or self._build_input_shape is None:
            raise AttributeError(f"Sequential model '{self.name}' has no defined output shape "
                                 f"yet.")
        return self._output_shape_of(self._stack, self.input_shape)

    def add(self, layer):
        """Append a layer (building it at once when the model is already built).

        ``jt.keras.Input(shape)`` (or an ``InputLayer``) as the first entry gives the
        input shape, as in Keras: the model is built when its first layer is added."""
        if type(layer) is _kt.KerasTensor:
            layer = layer._keras_history[0]
        if type(layer).__name__ == "InputLayer" and getattr(layer, "batch_shape", None):
            if self._stack:
                raise ValueError(f'Sequential.add: an Input must come first in model '
                                 f'"{self.name}", before layer "{self._stack[0].name}"')
            self.__dict__["_input_batch_shape"] = tuple(layer.batch_shape)
            return
        if not isinstance(layer, Layer):
            raise TypeError(
                f"Sequential.add: expected a jt.layers.Layer, got {type(layer).__name__}"
            )
        if any(layer is l for l in self._stack):
            raise ValueError(f'Sequential.add: layer "{layer.name}" is already in the model')
        self._stack.append(layer)
        self._sublayers.append(layer)
        first_shape = layer._input_shape_arg or self.__dict__.get("_input_batch_shape")
        if len(self._stack) == 1 and first_shape is not None:
            self._build_with(first_shape)
        elif self.built:
            shape = self._output_shape_of(self._stack[:-1], self._build_input_shape)
            if not layer.built:
                layer._build_with(shape)

    def pop(self):
        """Remove the last layer."""
        if not self._stack:
            raise TypeError("There are no layers in the model.")
        layer = self._stack.pop()
        self._sublayers.remove(layer)
        return layer

    def _input_dtype(self):
        if self._dtype is not None:
            return self._dtype
        return self._stack[0]._input_dtype() if self._stack else as_dtype("float32")

    @staticmethod
    def _output_shape_of(layers, shape):
        for layer in layers:
            shape = layer.compute_output_shape(shape)
        return shape

    def build(self, input_shape):
        if not self._stack:
            raise ValueError(f'Sequential model "{self.name}" has no layers to build')
        shape = (None,) + tuple(input_shape[1:])
        for layer in self._stack:
            if not layer.built:
                layer._build_with(shape)
            shape = layer.compute_output_shape(shape)

    def _check_input(self, shape):
        first = self._stack[0] if self._stack else None
        if first is not None and first.built:
            first._check_input(shape)

    def call(self, inputs, training=None):
        x = inputs
        for layer in self._stack:
            x = layer(x, training=training)
        return x

    def compute_output_shape(self, input_shape):
        return self._output_shape_of(self._stack, tuple(input_shape))

    def _checkpoint_children(self) -> list:
        """Own weights, then the layers as ``layer-0``, ``layer-1``, ... (a checkpoint
        names them by position, as TF's Sequential does)."""
        return self._checkpoint_own_weights() + [
            (f"layer-{i}", layer) for i, layer in enumerate(self._stack)]

    def _obj_type(self) -> str:
        return "Sequential"

    def summary(self, print_fn=None, line_length=65):
        """Print a table of the layers (name and type, output shape, number of weights)
        and the total, trainable and non-trainable parameter counts."""
        if not self.built:
            raise ValueError(
                f'Sequential model "{self.name}" has not been built yet: call it on a batch of '
                "data, or give its first layer an input_shape, before summary()"
            )
        p = print_fn or print
        rows = []
        shape = self._build_input_shape
        for layer in self._stack:
            shape = layer.compute_output_shape(shape)
            rows.append((f"{layer.name} ({type(layer).__name__})", _fmt_shape(shape),
                         f"{layer.count_params():,}"))
        total = self.count_params()
        trainable = int(sum(math.prod(v.shape) for v in self.trainable_variables))
        cols = (max([len("Layer (type)")] + [len(r[0]) for r in rows]) + 3,
                max([len("Output Shape")] + [len(r[1]) for r in rows]) + 3)
        line_length = max(line_length, cols[0] + cols[1] + 12)

        def line(a, b, c):
            return f"{a:<{cols[0]}}{b:<{cols[1]}}{c}"

        p(f'Model: "{self.name}"')
        p("_" * line_length)
        p(line("Layer (type)", "Output Shape", "Param #"))
        p("=" * line_length)
        for i, r in enumerate(rows):
            p(line(*r))
            if i < len(rows) - 1:
                p("-" * line_length)
        p("=" * line_length)
        p(f"Total params: {total:,}")
        p(f"Trainable params: {trainable:,}")
        p(f"Non-trainable params: {total - trainable:,}")
        p("_" * line_length)

    def get_config(self):
        """``name``, ``trainable``, ``dtype``, ``layers`` (each as ``serialize`` writes it)
        and, once built, ``build_input_shape``, as Keras 3's Sequential."""
        config = {**super().get_config(), "layers": [serialize(l) for l in self._stack]}
        if self.built and self._build_input_shape is not None:
            config["build_input_shape"] = self._build_input_shape
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """A new model from ``get_config()``'s dict (or Keras'), built when the config
        has an input shape; ``custom_objects`` resolves the user's classes in it.

        Keras' ``InputLayer`` entry gives the input shape (jittape has no such layer)."""
        config = dict(config)
        records = config.pop("layers", [])
        shape = config.pop("build_input_shape", None)
        dtype = _config.dtype_from_config(config.pop("dtype", None), cls.__name__)
        if dtype is not None and dtype != as_dtype("float32"):
            config["dtype"] = dtype  # float32 is the default: leave the inputs to the first layer
        with _config.custom_object_scope(custom_objects):
            model = cls(**config)
            for record in records:
                if record.get("class_name") == "InputLayer":  # Sequential keeps no InputLayer
                    inner = record.get("config", {})
                    shape = shape or inner.get("batch_shape") or inner.get("batch_input_shape")
                    continue
                model.add(deserialize(record))
        if shape and model._stack and not model.built:
            model._build_with(_shape_from_config(shape))
        return model

    def save(self, filepath, overwrite=True, zipped=None, **kwargs):
        """A ``.keras`` archive of the model: its config, compile config and weights
        (``jt.keras.models.load_model`` reads it; so does Keras)."""
        from .functional import save_model

        save_model(self, filepath, overwrite=overwrite, zipped=zipped, **kwargs)

    def __repr__(self):
        return f"<Sequential name={self.name!r}, layers={[l.name for l in self._stack]}>"
