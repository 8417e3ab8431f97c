"""``clone_model``: a new model of the same architecture, with new weights (Keras 3's
``models/cloning.py``)."""

from __future__ import annotations

from ... import nest
from ..keras_tensor import KerasTensor
from ..layers import Input
from .model import Model
from .sequential import Sequential

__all__ = ["clone_model"]


def _default_clone(layer):
    return type(layer).from_config(layer.get_config())


def clone_model(model, input_tensors=None, clone_function=None, call_function=None,
                recursive=False, **kwargs):
    """A new model of the same architecture with new weights (Keras' ``clone_model``):
    each layer rebuilt from its config by ``clone_function`` (default
    ``cls.from_config(layer.get_config())``). A Sequential or functional model is
    rebuilt layer by layer; a subclassed model from its own ``get_config()``."""
    if kwargs:
        raise TypeError(f"clone_model: unexpected keyword argument(s) {sorted(kwargs)}")
    clone = clone_function or _default_clone

    def one(layer):
        if recursive and isinstance(layer, (Sequential, Model)) and (
                isinstance(layer, Sequential) or layer._graph is not None):
            return clone_model(layer, clone_function=clone_function, recursive=True)
        return clone(layer)

    if isinstance(model, Sequential):
        new = Sequential(name=model.name, trainable=model.trainable)
        shape = model.__dict__.get("_input_batch_shape")
        if model.built and model._build_input_shape is not None:
            shape = model._build_input_shape
        if input_tensors is not None:
            new.add(input_tensors)
        elif shape is not None and not isinstance(shape, (list, dict)):
            new.add(Input(batch_shape=shape))
        for layer in model.layers:
            new.add(one(layer))
        return new
    if not isinstance(model, Model):
        raise ValueError(f"clone_model: expected a Sequential or a Model, got "
                         f"{type(model).__name__}")
    if model._graph is None:
        try:
            return type(model).from_config(model.get_config())
        except (NotImplementedError, TypeError) as e:
            raise ValueError(
                f'clone_model: the subclassed model "{model.name}" ({type(model).__name__}) '
                f"cannot be rebuilt from its config ({e}); define get_config() and "
                "from_config() on it") from None
    inputs, outputs, flat_in, flat_out, nodes = model._graph
    if input_tensors is not None:
        new_in = nest.flatten(input_tensors)
        if len(new_in) != len(flat_in):
            raise ValueError(f"clone_model: input_tensors has {len(new_in)} tensors, the model "
                             f"has {len(flat_in)} inputs")
    else:
        new_in = [Input(batch_shape=t.shape, dtype=t.dtype.name,
                        name=t._keras_history[0].name) for t in flat_in]
    mapped = {id(a): b for a, b in zip(flat_in, new_in)}
    memo = {}
    for node in nodes:
        layer = node.layer
        if id(layer) not in memo:
            memo[id(layer)] = one(layer)
        new_layer = memo[id(layer)]

        def sub(s):
            return nest.pack_sequence_as(
                s, [mapped[id(t)] if type(t) is KerasTensor else t for t in nest.flatten(s)])

        kw = {k: sub(v) for k, v in node.kwargs.items()}
        if call_function is not None:
            out = call_function(new_layer, sub(node.inputs), *sub(list(node.args)), **kw)
        else:
            out = new_layer(sub(node.inputs), *sub(list(node.args)), **kw)
        for a, b in zip(node.flat_outputs, nest.flatten(out)):
            mapped[id(a)] = b
    new_inputs = nest.pack_sequence_as(inputs, new_in) if isinstance(
        inputs, (list, dict)) else new_in[0]
    new_outputs = nest.pack_sequence_as(outputs, [mapped[id(t)] for t in flat_out]) if (
        isinstance(outputs, (list, dict))) else mapped[id(flat_out[0])]
    return Model(new_inputs, new_outputs, name=model.name, trainable=model.trainable)
