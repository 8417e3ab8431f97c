"""The symbolic tensors of the functional API (``jt.keras.Input``) and the nodes that
record which layer call made them.

A layer called on a ``KerasTensor`` does not compute: it builds itself, works out its
output shapes and dtypes by running once on a small probe batch (zeros, eagerly, with
no tape or trace watching), and returns new ``KerasTensor``s that remember the call as
a ``Node``. ``jt.keras.Model(inputs, outputs)`` walks the nodes back from ``outputs`` and
replays them on real tensors when it is called.

The probe runs the layer's own ``call``, so a shape error surfaces while the model is
being defined, naming the layer and the shapes, as Keras' symbolic build does. A
dimension that is ``None`` in an input (the batch) is probed at two sizes; output
dimensions that follow it are ``None`` too.
"""

from __future__ import annotations

import contextlib
import itertools
import threading

import numpy as np

from .. import _state, nest
from ..dtypes import as_dtype

__all__ = ["KerasTensor", "Node", "is_symbolic", "symbolic_call"]

_names = itertools.count()

# the layer class an operator on a KerasTensor calls (``x + y``, ``x[:, 0]``); set by
# ``jittape.keras.layers.reshaping`` when it defines it, so that this module imports no layer
_OP_LAYER = None


class _CallState(threading.local):
    """The outermost layer call running on this thread (None between calls), and how
    many shape probes (``compute_output_shape`` running a layer on zeros, the probes of
    a symbolic call) are open. Layers read it; ``isolated`` counts its probes in it."""

    entry = None
    probing = 0


_CALLS = _CallState()


def _fmt(shape) -> str:
    dims = ", ".join("None" if d is None else str(d) for d in shape)
    return f"({dims},)" if len(shape) == 1 else f"({dims})"


class KerasTensor:
    """A symbolic tensor: a shape (``None`` where unknown), a dtype, and the layer call
    that made it (``_keras_history``: layer, node index, output index)."""

    __slots__ = ("shape", "dtype", "name", "_keras_history", "__weakref__")

    def __init__(self, shape, dtype="float32", name=None, history=None):
        self.shape = tuple(None if d is None else int(d) for d in shape)
        self.dtype = as_dtype(dtype)
        n = next(_names)
        self.name = name or ("keras_tensor" if n == 0 else f"keras_tensor_{n}")
        self._keras_history = history

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self):
        return (f"<KerasTensor shape={_fmt(self.shape)}, dtype={self.dtype.name}, "
                f"name={self.name}>")

    def _symbolic(self, what):
        return TypeError(
            f"{what} of a KerasTensor ({self.name}, shape {_fmt(self.shape)}): it is a symbolic "
            "input of a functional model and has no value. Build the model with "
            "jt.keras.Model(inputs, outputs) and call it on data; to use a jittape op on it, "
            "wrap the op in a layer: jt.keras.layers.Lambda(lambda t: jt.op(t))(x)"
        )

    def __bool__(self):
        raise self._symbolic("the truth value")

    def __array__(self, dtype=None, copy=None):
        raise self._symbolic("a numpy value")

    def __iter__(self):
        raise self._symbolic("iterating over the elements")

    def __len__(self):
        raise self._symbolic("len()")

    def __float__(self):
        raise self._symbolic("float()")

    # operators become layer calls, as on Keras' symbolic tensors
    def _op(self, name, fn, *others):
        return _OP_LAYER(fn, name)([self, *others] if others else self)

    def __add__(self, o):
        return self._op("add", lambda a, b: a + b, o)

    def __radd__(self, o):
        return self._op("add", lambda a, b: b + a, o)

    def __sub__(self, o):
        return self._op("subtract", lambda a, b: a - b, o)

    def __rsub__(self, o):
        return self._op("subtract", lambda a, b: b - a, o)

    def __mul__(self, o):
        return self._op("multiply", lambda a, b: a * b, o)

    def __rmul__(self, o):
        return self._op("multiply", lambda a, b: b * a, o)

    def __truediv__(self, o):
        return self._op("divide", lambda a, b: a / b, o)

    def __rtruediv__(self, o):
        return self._op("divide", lambda a, b: b / a, o)

    def __matmul__(self, o):
        return self._op("matmul", lambda a, b: a @ b, o)

    def __rmatmul__(self, o):
        return self._op("matmul", lambda a, b: b @ a, o)

    def __pow__(self, o):
        return self._op("power", lambda a, b: a ** b, o)

    def __neg__(self):
        return self._op("negative", lambda a: -a)

    def __abs__(self):
        return self._op("absolute", lambda a: abs(a))

    def __getitem__(self, key):
        return self._op("get_item", lambda a: a[key])


def is_symbolic(inputs, args=(), kwargs=None) -> bool:
    """Whether a layer call's arguments hold a ``KerasTensor`` (a functional-API call)."""
    if type(inputs) is KerasTensor:
        return True
    if isinstance(inputs, (list, tuple, dict)) or args or kwargs:
        return any(type(v) is KerasTensor
                   for v in nest.flatten([inputs, list(args), dict(kwargs or {})]))
    return False


class Node:
    """One call of a layer in a functional graph: its arguments (a structure holding
    ``KerasTensor``s and constants) and its outputs."""

    __slots__ = ("layer", "inputs", "args", "kwargs", "outputs", "parents", "flat_outputs")

    def __init__(self, layer, inputs, args, kwargs, outputs):
        self.layer = layer
        self.inputs, self.args, self.kwargs = inputs, tuple(args), dict(kwargs)
        self.outputs = outputs
        self.parents = [t for t in nest.flatten([inputs, list(args), dict(kwargs)])
                        if type(t) is KerasTensor]
        self.flat_outputs = nest.flatten(outputs)

    def call(self, values, training):
        """Run the layer on real tensors: ``values`` maps ``id(KerasTensor)`` to a value."""
        def sub(s):
            return nest.pack_sequence_as(
                s, [values[id(t)] if type(t) is KerasTensor else t for t in nest.flatten(s)])

        kwargs = {k: sub(v) for k, v in self.kwargs.items()}
        if training is not None or "training" not in kwargs:
            # the model's training, when given, wins over the one recorded at the call
            # (Keras 3's functional operation_fn: a tf.keras file records Dropout's
            # training=False, and the loaded model still drops out in fit)
            kwargs["training"] = training
        return self.layer(sub(self.inputs), *sub(list(self.args)), **kwargs)


def _probe_value(t: KerasTensor, size: int):
    shape = tuple(size if d is None else d for d in t.shape)
    return np.zeros(shape, t.dtype._np)


@contextlib.contextmanager
def isolated():
    """Run eagerly, outside every tape and trace, adding no layer losses (and without
    numpy's float warnings): for the probe calls that find shapes."""
    local = _state.local
    saved = local.tapes, local.tracers
    local.tapes, local.tracers = [], []
    _CALLS.probing += 1  # a probe adds no losses to the layers it runs
    try:
        with np.errstate(all="ignore"):
            yield
    finally:
        _CALLS.probing -= 1
        local.tapes, local.tracers = saved


def _run_probe(layer, inputs, args, kwargs, size):
    from ..tensor import convert_to_tensor

    def sub(s):
        return nest.pack_sequence_as(s, [
            convert_to_tensor(_probe_value(t, size)) if type(t) is KerasTensor else t
            for t in nest.flatten(s)])

    with isolated():
        kw = {k: sub(v) for k, v in kwargs.items()}
        kw.setdefault("training", False)
        return layer(sub(inputs), *sub(list(args)), **kw)


def symbolic_call(layer, inputs, args, kwargs):
    """``layer(inputs, *args, **kwargs)`` on ``KerasTensor``s: probe, record, return
    the output ``KerasTensor``s (in the structure the layer returns)."""
    from ..tensor import Tensor, Variable

    kwargs = {k: v for k, v in kwargs.items() if not (k == "training" and v is None)}
    flat_in = [t for t in nest.flatten([inputs, list(args), kwargs]) if type(t) is KerasTensor]
    out = _run_probe(layer, inputs, args, kwargs, 2)
    flat = nest.flatten(out)
    for v in flat:
        if not isinstance(v, (Tensor, Variable)):
            raise TypeError(
                f'layer "{layer.name}" ({type(layer).__name__}) returned a '
                f"{type(v).__name__} when called on symbolic inputs; a layer used in a "
                "functional model must return tensors")
    shapes = [list(v.shape) for v in flat]
    if any(d is None for t in flat_in for d in t.shape):
        other = nest.flatten(_run_probe(layer, inputs, args, kwargs, 3))
        for s, v in zip(shapes, other):
            if len(s) != len(v.shape):
                raise ValueError(f'layer "{layer.name}": the rank of its output depends on '
                                 "the input size; it cannot be used in a functional model")
            for i, d in enumerate(v.shape):
                if d != s[i]:
                    s[i] = None
    nodes = layer.__dict__.setdefault("_inbound_nodes", [])
    node_index = len(nodes)
    kts = [KerasTensor(s, v.dtype, history=(layer, node_index, i))
           for i, (s, v) in enumerate(zip(shapes, flat))]
    outputs = nest.pack_sequence_as(out, kts)
    nodes.append(Node(layer, inputs, args, kwargs, outputs))
    return outputs
