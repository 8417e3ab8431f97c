"""``jt.keras.Model``: subclassed and functional models.

Subclassing::

    class MLP(jt.keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden = jt.keras.layers.Dense(64, activation="relu")
            self.out = jt.keras.layers.Dense(10)

        def call(self, inputs, training=None):
            return self.out(self.hidden(inputs))

Layers, models and metrics assigned as attributes (also inside lists and dicts) are
tracked: their weights are the model's, in the order they were assigned.

The functional API::

    x = jt.keras.Input(shape=(784,))
    h = jt.keras.layers.Dense(64, activation="relu")(x)
    model = jt.keras.Model(inputs=x, outputs=jt.keras.layers.Dense(10)(h))

A layer called on ``Input``'s symbolic tensors records the call (see
``jittape.keras.keras_tensor``); the model replays the calls on data. Inputs and outputs may
be single tensors, lists or dicts; layers may be shared; a model is a layer of another.

Every model has ``compile``/``fit``/``evaluate``/``predict`` (``jittape.keras.trainers.trainer``).
"""

from __future__ import annotations

import numbers

import numpy as np

from ... import nest
from ...errors import InvalidArgumentError
from ..keras_tensor import KerasTensor
from ..layers import Layer
from ..layers.input_layer import InputLayer
from ..naming import _fmt_shape
from ...tensor import Tensor, Variable, convert_to_tensor
from ..trainers.trainer import Trainer

__all__ = ["Model", "Functional"]


# ---------------------------------------------------------------------------
# the graph of a functional model


def _is_input_node(node) -> bool:
    return isinstance(node.layer, InputLayer)


def _map_graph(flat_inputs, flat_outputs):
    """The nodes of the graph from ``flat_inputs`` to ``flat_outputs`` in an order that
    runs each after its parents, and the layers in Keras' order (farthest from the
    outputs first; ties by first visit from the outputs)."""
    input_ids = {id(t) for t in flat_inputs}
    done, in_progress, order, first_seen = set(), set(), [], {}

    def visit(t):
        if type(t) is not KerasTensor or t._keras_history is None:
            raise ValueError(f"Model outputs must come from jt.keras.Input through layer calls; "
                             f"got {t!r}")
        layer, index, _ = t._keras_history
        node = layer._inbound_nodes[index]
        if id(node) in done:
            return
        if id(t) in input_ids and not _is_input_node(node):
            done.add(id(node))
            return
        if id(node) in in_progress:
            raise ValueError(f'tensor {t.name} from layer "{layer.name}" is part of a cycle')
        first_seen.setdefault(id(layer), (len(first_seen), layer))
        in_progress.add(id(node))
        if not _is_input_node(node):
            for p in node.parents:
                visit(p)
        in_progress.discard(id(node))
        done.add(id(node))
        order.append(node)

    for t in flat_outputs:
        visit(t)
    # depths: outputs' nodes 0, parents one more than their deepest child
    depth = {}
    layer_depth = {}
    for node in reversed(order):
        d = max(depth.get(id(node), 0), layer_depth.get(id(node.layer), 0))
        depth[id(node)] = d
        layer_depth[id(node.layer)] = d
        for p in node.parents:
            pl, pi, _ = p._keras_history
            pn = pl._inbound_nodes[pi]
            depth[id(pn)] = max(depth.get(id(pn), 0), d + 1)
    for t in flat_inputs:  # an input no output depends on is still a layer of the model
        layer = t._keras_history[0]
        if id(layer) not in first_seen:
            first_seen[id(layer)] = (-1, layer)
            layer_depth[id(layer)] = 0
    # every tensor a node needs is an input or made by an earlier node
    known = set(input_ids)
    accessed = []
    for node in sorted((n for n in order), key=lambda n: -depth[id(n)]):
        for p in node.parents:
            if id(p) not in known and not _is_input_node(node):
                raise ValueError(
                    f"Graph disconnected: cannot find parent for tensor {p!r} at layer "
                    f'"{node.layer.name}". The following previous layers were accessed without '
                    f"issue: {accessed}. Every input the outputs depend on must be in `inputs`")
        if _is_input_node(node) and id(node.outputs) not in known:
            raise ValueError(
                f"Graph disconnected: cannot obtain a value for input {node.outputs!r} (layer "
                f'"{node.layer.name}"): it is not in the model\'s `inputs`. The following '
                f"previous layers were accessed without issue: {accessed}")
        accessed.append(node.layer.name)
        known.update(id(t) for t in node.flat_outputs)
    layers = [layer for _, (_, layer) in sorted(
        first_seen.items(), key=lambda kv: (-layer_depth[kv[0]], kv[1][0]))]
    names = [l.name for l in layers]
    for n in names:
        if names.count(n) > 1:
            raise ValueError(f'The name "{n}" is used {names.count(n)} times in the model. All '
                             "layer names should be unique.")
    return [n for n in order if not _is_input_node(n)], layers


# ---------------------------------------------------------------------------
# Model


def _functional_args(args, kwargs) -> bool:
    return ("inputs" in kwargs and "outputs" in kwargs) or len(args) >= 2 or (
        len(args) == 1 and "outputs" in kwargs)


class Model(Trainer, Layer):
    """A layer with training and inference features: ``compile``, ``fit``, ``evaluate``,
    ``predict``, ``summary``, ``get_layer``.

    ``Model(inputs, outputs, name=None)`` makes a functional model (a ``Functional``);
    a subclass defines ``call(inputs, training=None)`` (and may build its layers in
    ``__init__`` or ``build(input_shape)``).
    """

    def __new__(cls, *args, **kwargs):
        if cls is Model and _functional_args(args, kwargs):
            cls = Functional
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        inputs = kwargs.pop("inputs", args[0] if args else None)
        outputs = kwargs.pop("outputs", args[1] if len(args) > 1 else None)
        if len(args) > 2:
            raise TypeError(f"{type(self).__name__}: too many positional arguments")
        name = kwargs.pop("name", None)
        trainable = kwargs.pop("trainable", True)
        dtype = kwargs.pop("dtype", None)
        if kwargs:
            raise TypeError(
                f"{type(self).__name__}: unexpected keyword argument(s) {sorted(kwargs)}")
        self.__dict__.setdefault("_sublayers", [])
        self.__dict__.setdefault("_tracked_metrics", [])
        Layer.__init__(self, trainable=trainable, name=name, dtype=dtype)
        Trainer.__init__(self)
        self._graph = None
        if inputs is not None or outputs is not None:
            if inputs is None or outputs is None:
                raise ValueError("A functional Model needs both `inputs` and `outputs`")
            self._init_graph(inputs, outputs)

    # -- tracking ---------------------------------------------------------------------
    def __setattr__(self, key, value):
        from ..metrics import Metric

        found = [value] if isinstance(value, Metric) else (
            [v for v in (value.values() if isinstance(value, dict) else value)
             if isinstance(v, Metric)] if isinstance(value, (list, tuple, dict)) else [])
        tracked = self.__dict__.setdefault("_tracked_metrics", [])
        for m in found:
            if all(m is not t for t in tracked):
                tracked.append(m)
        super().__setattr__(key, value)

    # -- the functional graph ------------------------------------------------------------
    def _init_graph(self, inputs, outputs):
        if isinstance(inputs, tuple):
            inputs = list(inputs)
        if isinstance(outputs, tuple):
            outputs = list(outputs)
        flat_in, flat_out = nest.flatten(inputs), nest.flatten(outputs)
        for t in flat_in:
            if type(t) is not KerasTensor:
                raise TypeError(f"Model inputs must be jt.keras.Input tensors; got "
                                f"{type(t).__name__}")
        for t in flat_out:
            if type(t) is not KerasTensor:
                raise TypeError(f"Model outputs must be tensors made by layers called on "
                                f"jt.keras.Input tensors; got {type(t).__name__}")
        nodes, layers = _map_graph(flat_in, flat_out)
        self._graph = (inputs, outputs, flat_in, flat_out, nodes)
        self._functional_layers = layers
        for layer in layers:
            if all(layer is not s for s in self._sublayers):
                self._sublayers.append(layer)
        shapes = [t.shape for t in flat_in]
        self._build_input_shape = shapes[0] if len(shapes) == 1 and not isinstance(
            inputs, (list, dict)) else nest.pack_sequence_as(inputs, shapes)
        self.built = True

    @property
    def inputs(self):
        return None if self._graph is None else list(self._graph[2])

    @property
    def outputs(self):
        return None if self._graph is None else list(self._graph[3])

    @property
    def input(self):
        self._need_graph("input")
        return self._graph[0]

    @property
    def output(self):
        self._need_graph("output")
        return self._graph[1]

    @property
    def input_shape(self):
        self._need_graph("input_shape")
        return nest.pack_sequence_as(self._graph[0], [t.shape for t in self._graph[2]])

    @property
    def output_shape(self):
        self._need_graph("output_shape")
        return nest.pack_sequence_as(self._graph[1], [t.shape for t in self._graph[3]])

    @property
    def output_names(self):
        if self._graph is None:
            return []
        return [t._keras_history[0].name for t in self._graph[3]]

    def _need_graph(self, what):
        if self._graph is None:
            raise AttributeError(
                f'model "{self.name}" has no {what}: it is a subclassed model (only functional '
                "models, made with Model(inputs, outputs), have symbolic inputs and outputs)")

    @property
    def layers(self) -> list:
        if self._graph is not None:
            return list(self._functional_layers)
        return list(self._sublayers)

    def get_layer(self, name=None, index=None):
        """The layer called ``name``, or the one at position ``index`` of ``layers``."""
        layers = self.layers
        if index is not None and name is not None:
            raise ValueError("get_layer: provide only a layer name or a layer index, not both")
        if index is not None:
            if not -len(layers) <= index < len(layers):
                raise ValueError(f'Was asked to retrieve layer at index {index} but model '
                                 f'"{self.name}" only has {len(layers)} layers.')
            return layers[index]
        if name is not None:
            for layer in layers:
                if layer.name == name:
                    return layer
            raise ValueError(f"No such layer: {name}. Existing layers are: "
                             f"{[l.name for l in layers]}.")
        raise ValueError("Provide either a layer name or layer index at `get_layer`.")

    def _convert_input(self, x):
        if self._graph is None:
            return super()._convert_input(x)
        return x  # each input is converted to its Input's dtype in _inputs_of

    def _inputs_of(self, inputs):
        """The values for the flat inputs, from what the user passed: the inputs'
        structure, a list in order, a dict keyed by input names, or one array."""
        structure, flat_in = self._graph[0], self._graph[2]
        if isinstance(inputs, dict):
            names = [t._keras_history[0].name for t in flat_in]
            if isinstance(structure, dict) and set(inputs) >= set(structure):
                values = nest.flatten({k: inputs[k] for k in structure})
            elif set(inputs) >= set(names):
                values = [inputs[n] for n in names]
            else:
                missing = sorted(set(names) - set(inputs))
                raise ValueError(f'model "{self.name}": missing input(s) {missing} in the dict '
                                 f"given (keys {sorted(inputs)})")
        elif isinstance(inputs, (list, tuple)) and not (
            len(flat_in) == 1 and not isinstance(structure, (list, dict))
        ):
            values = nest.flatten(list(inputs))
        elif isinstance(inputs, (list, tuple)) and inputs and all(
            isinstance(v, (np.ndarray, Tensor, Variable)) for v in inputs
        ):
            values = list(inputs)  # a list of arrays for a single-input model: one or an error
        else:
            values = [inputs]
        if len(values) != len(flat_in):
            raise ValueError(
                f'Layer "{self.name}" expects {len(flat_in)} input(s), but it received '
                f"{len(values)} input tensors.")
        out = []
        for i, (t, v) in enumerate(zip(flat_in, values)):
            v = v.read_value() if isinstance(v, Variable) else v
            if not isinstance(v, Tensor):
                a = np.asarray(v)
                v = convert_to_tensor(a, dtype=t.dtype if a.dtype.kind in "fiub" else None)
            elif v.dtype != t.dtype and (v.dtype.is_floating or t.dtype.is_floating):
                from ...ops import cast

                v = cast(v, t.dtype)
            shape = tuple(v._type.shape)
            if len(shape) != len(t.shape) or any(
                want is not None and isinstance(got, numbers.Integral) and want != got
                for want, got in zip(t.shape, shape)
            ):
                raise InvalidArgumentError(
                    f'Input {i} of layer "{self.name}" is incompatible with the layer: expected '
                    f"shape={_fmt_shape(t.shape)}, found shape={_fmt_shape(v.shape)}")
            out.append(v)
        return out

    def _run_graph(self, inputs, training):
        _, outputs, flat_in, flat_out, nodes = self._graph
        values = {id(t): v for t, v in zip(flat_in, self._inputs_of(inputs))}
        for node in nodes:
            result = node.call(values, training)
            flat = nest.flatten(result)
            if len(flat) != len(node.flat_outputs):
                raise ValueError(f'layer "{node.layer.name}" returned {len(flat)} tensors, but '
                                 f"returned {len(node.flat_outputs)} when the model was built")
            for t, v in zip(node.flat_outputs, flat):
                values[id(t)] = v
        return nest.pack_sequence_as(outputs, [values[id(t)] for t in flat_out])

    def call(self, inputs, training=None, mask=None):
        if self._graph is not None:
            return self._run_graph(inputs, training)
        raise NotImplementedError(
            f"Model {type(self).__name__} has no call(): a subclassed model must define "
            "call(self, inputs, training=None), or be made with Model(inputs, outputs)")

    def build(self, input_shape):
        """Build the weights by calling the model once on zeros of ``input_shape`` (the
        batch dimension may be None), outside any tape or trace. A subclass may override
        it to create weights directly; a model that is never built explicitly builds its
        layers on its first call."""
        if self._graph is not None:
            return

        def zeros(s):
            return np.zeros(tuple(1 if d is None else d for d in s), np.float32)

        if isinstance(input_shape, dict):
            probe = {k: zeros(v) for k, v in input_shape.items()}
        elif isinstance(input_shape, list) and input_shape and not isinstance(
            input_shape[0], numbers.Integral
        ) and input_shape[0] is not None:
            probe = [zeros(s) for s in input_shape]
        else:
            probe = zeros(tuple(input_shape))
        from ..keras_tensor import isolated

        self.built = True  # so the call below does not build again
        with isolated():
            self(probe, training=False)

    def _build_with(self, input_shape):
        if type(self).build is Model.__dict__["build"]:
            # a subclass without its own build: its layers build on this first call
            self._build_input_shape = input_shape
            self.built = True
            return
        super()._build_with(input_shape)

    def compute_output_shape(self, input_shape):
        if self._graph is not None:
            return self.output_shape
        return super().compute_output_shape(input_shape)

    # -- config, cloning, saving ---------------------------------------------------------
    def get_config(self):
        """A functional model's graph in Keras 3's format (layer records with their calls);
        a subclassed model's constructor arguments (override it when they are not plain
        values)."""
        if self._graph is not None:
            from .functional import functional_config

            return functional_config(self)
        return super().get_config()

    @classmethod
    def from_config(cls, config, custom_objects=None):
        """The model ``get_config()`` (or Keras) describes; weights are new."""
        if "layers" in config and "input_layers" in config:
            from .functional import functional_from_config

            return functional_from_config(Functional if cls is Model else cls, config,
                                          custom_objects)
        return super().from_config(config)

    def get_build_config(self):
        if self._graph is not None:
            return None  # the graph builds the layers
        return super().get_build_config()

    def save(self, filepath, overwrite=True, zipped=None, **kwargs):
        """A ``.keras`` archive of the model: its config, compile config and weights
        (``jt.keras.models.load_model`` reads it; so does Keras for the layers both have)."""
        from .functional import save_model

        save_model(self, filepath, overwrite=overwrite, zipped=zipped, **kwargs)

    def _obj_type(self) -> str:
        """"Functional" for a functional model (a ``Functional``, or a model whose first
        layer is an ``InputLayer``), "Model" for a subclassed one (Keras 3's
        ``_obj_type``: which walk a ``.weights.h5`` file gets)."""
        if isinstance(self, Functional):
            return "Functional"
        first = self.layers[:1]
        return "Functional" if first and isinstance(first[0], InputLayer) else "Model"

    # -- summary --------------------------------------------------------------------------
    def summary(self, line_length=None, positions=None, print_fn=None, expand_nested=False,
                show_trainable=False, layer_range=None):
        """Print the layers (name and type, output shape, parameter count; "Connected
        to" for a functional model whose graph is not a chain) and the totals."""
        from .summary import print_summary

        print_summary(self, line_length=line_length, print_fn=print_fn,
                      show_trainable=show_trainable)

    def __repr__(self):
        kind = "Functional" if self._graph is not None else type(self).__name__
        return f"<{kind} name={self.name!r}, built={self.built}>"


class Functional(Model):
    """A model made with ``jt.keras.Model(inputs, outputs)``."""

    def __init__(self, inputs, outputs, name=None, trainable=True, **kwargs):
        super().__init__(inputs=inputs, outputs=outputs, name=name, trainable=trainable,
                         **kwargs)
