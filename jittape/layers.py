"""``jt.layers``: Keras-style layers and ``Sequential``, written with jittape's public ops.

A layer creates its weights (``jt.Variable``) on its first call, from the shape of
that input (or at once, when the first layer of a ``Sequential`` is given
``input_shape``). Weights are named ``"<layer>/<weight>"`` (``v.name`` reads
``"dense/kernel:0"``), and listed in creation order: a ``Dense`` has kernel then
bias, a ``BatchNormalization`` gamma, beta, moving_mean, moving_variance; a model
lists its layers' weights layer by layer.

``layer(x, training=None)``: ``training`` reaches every sublayer; ``None`` means
inference, as at Keras' top level. Float inputs are converted to the layer's dtype
(``float32`` unless ``dtype=`` says otherwise), as Keras' autocasting does; ``Dense``
and ``BatchNormalization`` also take integer and bool inputs in that dtype, as Keras'
type promotion does (``Flatten`` keeps them as they are).

The ``"sigmoid"`` and ``"softmax"`` activations remember their inputs, so that a
crossentropy given their output computes from the logits, as Keras 3 does (see
``jt.losses``).

Regularization, as Keras 3: ``layer.losses`` lists the losses of the layer and its
sublayers, in this order: those added with ``add_loss`` and the activity penalties
(``activity_regularizer`` of each output, divided by the batch size) of the last
top-level call, which clears them when it starts; then the penalties of the weights
that have a regularizer, evaluated on their current values each time ``losses`` is read.
A frozen layer (``trainable=False``) and non-trainable weights add no weight penalty.
Inside a ``jt.function`` step the values are tensors of the trace, so a training step
returns ``loss + jt.add_n(model.losses)``.

Configs, as Keras 3: ``layer.get_config()`` gives the constructor arguments (nested
initializers, regularizers and constraints as Keras' config records),
``type(layer).from_config(config)`` rebuilds the layer, and ``serialize(layer)`` /
``deserialize(record, custom_objects)`` add the class name and the input shape the
layer was built for. Keras' own configs are read too.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import math
import numbers
import re
import threading
import weakref

import numpy as np

from . import _config
from . import constraints as _constraints
from . import initializers as _init
from . import keras_tensor as _kt
from . import regularizers as _regularizers
from . import train as _train
from . import nest
from . import ops as _ops
from . import random as _random
from .dtypes import as_dtype
from .errors import InvalidArgumentError
from .module import Module, _is_non_trainable, _is_trainable, _is_variable
from .tensor import Tensor, Variable, convert_to_tensor
from .trainer import Trainer

__all__ = [
    "Layer", "Dense", "Dropout", "BatchNormalization", "Flatten", "Activation", "Sequential",
    "get_activation", "ACTIVATIONS", "keras_logits", "serialize", "deserialize",
]

# ---------------------------------------------------------------------------
# Activations


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
        return _config.deserialize(identifier, "activation", {})
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


# ---------------------------------------------------------------------------
# Names and shapes

_name_counts: collections.Counter = collections.Counter()


def _unique_name(prefix: str) -> str:
    n = _name_counts[prefix]
    _name_counts[prefix] += 1
    return prefix if n == 0 else f"{prefix}_{n}"


def _snake(name: str) -> str:
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def _fmt_shape(shape) -> str:
    dims = ", ".join("None" if d is None else str(d) for d in shape)
    return f"({dims},)" if len(shape) == 1 else f"({dims})"


def _is_shape(s) -> bool:
    return isinstance(s, tuple) and all(d is None or isinstance(d, numbers.Integral) for d in s)


def _batchless(shape):
    """A shape (or structure of shapes) with the batch dimension replaced by None."""
    if _is_shape(shape):
        return (None,) + tuple(shape[1:]) if shape else ()
    if isinstance(shape, (list, tuple)):
        return type(shape)(_batchless(s) for s in shape)
    if isinstance(shape, dict):
        return {k: _batchless(v) for k, v in shape.items()}
    return shape


def _shape_structure(x):
    """The shapes of a structure of inputs, in the same nesting (lists stay lists)."""
    if isinstance(x, Tensor):
        return tuple(x.shape)
    if isinstance(x, (list, tuple)):
        return [_shape_structure(v) for v in x]
    if isinstance(x, dict):
        return {k: _shape_structure(v) for k, v in x.items()}
    return None


def _build_arg(input_shape):
    """A list of dims given to ``build`` (``[None, 4]``) as the tuple shape layers expect."""
    if isinstance(input_shape, list) and any(
        isinstance(d, numbers.Integral) for d in input_shape
    ) and all(d is None or isinstance(d, numbers.Integral) for d in input_shape):
        return tuple(input_shape)
    return tuple(input_shape) if _is_shape(input_shape) else input_shape


def _wrap_build(build):
    """``build`` that marks the layer built (and remembers the input shape) when it
    returns, as Keras 3 wraps every layer's build: ``layer.build(shape)`` called
    directly builds the layer once, and its first call does not build it again."""
    if getattr(build, "_jt_marks_built", False):
        return build

    @functools.wraps(build)
    def wrapper(self, *args, **kwargs):
        if args:
            args = (_build_arg(args[0]),) + args[1:]
        elif "input_shape" in kwargs:
            kwargs["input_shape"] = _build_arg(kwargs["input_shape"])
        depth = self.__dict__.get("_build_depth", 0)
        object.__setattr__(self, "_build_depth", depth + 1)
        try:
            result = build(self, *args, **kwargs)
        finally:
            object.__setattr__(self, "_build_depth", depth)
        if depth == 0:  # the outermost build (a subclass's super().build() is inside it)
            shape = args[0] if args else kwargs.get("input_shape")
            if shape is not None:
                self._build_input_shape = _batchless(shape)
            self.built = True
            if _train._PENDING:  # a checkpoint restored before this layer had weights
                _train.restore_deferred()
        return result

    wrapper._jt_marks_built = True
    return wrapper


def _as_input_shape(input_shape):
    """``input_shape`` (without the batch dim) as a full shape with batch ``None``."""
    if input_shape is None:
        return None
    if isinstance(input_shape, numbers.Integral):
        input_shape = (input_shape,)
    return (None,) + tuple(None if d is None else int(d) for d in input_shape)


def _shape_from_config(shape):
    """A shape read from a config (JSON turns tuples into lists) as the tuples layers
    expect; a structure of shapes keeps its nesting."""
    if isinstance(shape, (list, tuple)) and all(
        d is None or isinstance(d, numbers.Integral) for d in shape
    ):
        return tuple(None if d is None else int(d) for d in shape)
    if isinstance(shape, (list, tuple)):
        return [_shape_from_config(s) for s in shape]
    if isinstance(shape, dict):
        return {k: _shape_from_config(v) for k, v in shape.items()}
    return shape


# ---------------------------------------------------------------------------
# Calls and losses


class _CallState(threading.local):
    """The outermost layer call running on this thread (None between calls), and how
    many shape probes (``compute_output_shape`` running a layer on zeros) are open."""

    entry = None
    probing = 0


_CALLS = _CallState()


def _plain(value) -> bool:
    """Whether a constructor argument can go into an automatic config as it is."""
    if value is None or isinstance(value, (str, bool, numbers.Integral, float)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _init_arguments(cls, args, kwargs):
    """The constructor arguments of a user's layer class (defaults included, ``name``
    left to the base config), or None when they cannot make a config: one is not a
    plain value, or some are only positional."""
    try:
        sig = inspect.signature(cls.__init__)
        bound = sig.bind(None, *args, **kwargs)
    except (TypeError, ValueError):
        return None
    bound.apply_defaults()
    out = {}
    for i, (key, value) in enumerate(bound.arguments.items()):
        kind = sig.parameters[key].kind
        if i == 0:
            continue  # self
        if kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        elif kind is inspect.Parameter.VAR_POSITIONAL or kind is inspect.Parameter.POSITIONAL_ONLY:
            if kind is inspect.Parameter.POSITIONAL_ONLY or value:
                return None
        else:
            out[key] = value
    out.pop("name", None)
    return out if _plain(out) else None


def _per_example(loss, output):
    """An activity penalty divided by the batch size of ``output`` (0 for an empty batch,
    as Keras' divide_no_nan gives)."""
    loss = loss if isinstance(loss, Tensor) else convert_to_tensor(loss)
    n = output._type.shape[0]
    if isinstance(n, numbers.Integral):
        return loss / float(n) if n else loss * 0.0
    n = _ops.cast(_ops.shape(output)[0], loss.dtype)  # a symbolic batch (reduce_retracing)
    nonzero = _ops.not_equal(n, 0.0)
    return _ops.where(nonzero, loss / _ops.where(nonzero, n, 1.0), 0.0)


# ---------------------------------------------------------------------------
# Layer

# jittape's layer classes by name, for ``deserialize`` (a class defined in a jittape
# module registers itself; the user's come from ``custom_objects``)
_LAYER_CLASSES: dict = {}
# the Keras module a class is written under, when it is not "keras.layers"
_KERAS_MODULE = {"Sequential": "keras", "Model": "keras", "Functional": "keras"}


def _layers_in(value, depth=0) -> list:
    """The layers inside nested lists, tuples and dicts (dict values in insertion
    order), as Keras tracks them."""
    if isinstance(value, Layer):
        return [value]
    if depth > 8 or not isinstance(value, (list, tuple, dict)):
        return []
    items = value.values() if isinstance(value, dict) else value
    return [layer for v in items for layer in _layers_in(v, depth + 1)]


class Layer(Module):
    """Base class. Subclasses create weights in ``build(input_shape)`` with
    ``add_weight`` and compute in ``call(inputs)`` (or ``call(inputs, training=None)``).

    Layers and lists of layers assigned as attributes are tracked: their weights are
    part of this layer's ``variables`` (own weights first, then sublayers in the
    order they were assigned).

    A layer is a ``jt.Module`` (as tf.keras 2's layers are tf.Modules): ``submodules``
    and ``name_scope`` work, and a module holding a layer lists the layer's weights in
    the layer's own order (``variables`` here, not attribute order).

    ``activity_regularizer`` (a name, regularizer or callable) penalizes the outputs of
    each call; ``add_loss`` adds losses from ``call``; ``losses`` lists them with the
    weights' penalties (see the module docstring). ``get_config``/``from_config`` give
    and take the constructor arguments; a subclass of your own that keeps the base
    ``get_config`` gets its constructor arguments in it automatically when they are
    plain values (numbers, strings, bools, None, lists and dicts of them), as in Keras.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if inspect.isfunction(cls.__dict__.get("build")):
            cls.build = _wrap_build(cls.__dict__["build"])
        if cls.__module__.startswith("jittape."):
            _LAYER_CLASSES.setdefault(cls.__name__, cls)

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)
        if cls.__init__ is not Layer.__init__ and not cls.__module__.startswith("jittape."):
            # Keras' automatic config: the arguments a user's class was made with
            object.__setattr__(self, "_auto_config", _init_arguments(cls, args, kwargs))
        return self

    def __init__(self, trainable=True, name=None, dtype=None, input_shape=None,
                 activity_regularizer=None, **kwargs):
        if kwargs:
            raise TypeError(
                f"{type(self).__name__}: unexpected keyword argument(s) {sorted(kwargs)}"
            )
        self.__dict__.setdefault("_sublayers", [])
        self._own_weights = []
        self._losses = []  # add_loss and activity penalties of the last call
        self._weight_regularizers = []  # (variable, regularizer) in creation order
        self._init_module(name or _unique_name(_snake(type(self).__name__)))
        self._dtype = None if dtype is None else _config.dtype_from_config(
            dtype, type(self).__name__)
        self.trainable = bool(trainable)
        self.built = False
        self._input_shape_arg = _as_input_shape(input_shape)
        self._build_input_shape = None  # the shape build() saw, batch dim as None
        self.activity_regularizer = activity_regularizer

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value):
        self._name = value

    @property
    def activity_regularizer(self):
        """The penalty of this layer's outputs (a regularizer or callable), or None;
        assigning a name or config resolves it as ``jt.regularizers.get`` does."""
        return self.__dict__.get("_activity_regularizer")

    @activity_regularizer.setter
    def activity_regularizer(self, value):
        self.__dict__["_activity_regularizer"] = _regularizers.get(value)

    def _flatten_for(self, predicate, seen, stack):
        """Inside a module's walk: this layer's weights in its own order and with its
        ``trainable`` flag; sublayers by reflection, as any module."""
        if predicate is _is_variable:
            own = self.variables
        elif predicate is _is_trainable:
            own = self.trainable_variables
        elif predicate is _is_non_trainable:
            own = self.non_trainable_variables
        else:
            return super()._flatten_for(predicate, seen, stack)
        return _unseen(own, seen)

    # -- attribute tracking ------------------------------------------------------
    def __setattr__(self, key, value):
        subs = self.__dict__.setdefault("_sublayers", [])
        found = [value] if isinstance(value, Layer) else (
            _layers_in(value) if isinstance(value, (list, tuple, dict)) else [])
        for layer in found:
            if layer is not self and all(layer is not s for s in subs):
                subs.append(layer)
        object.__setattr__(self, key, value)

    # -- dtype ---------------------------------------------------------------------
    @property
    def dtype(self):
        """The dtype of this layer's weights and (float) computations."""
        return self._dtype if self._dtype is not None else as_dtype("float32")

    # -- weights -------------------------------------------------------------------
    def add_weight(self, *args, shape=None, initializer=None, dtype=None, trainable=None,
                   regularizer=None, constraint=None, name=None):
        """Create a ``jt.Variable`` named ``"<layer>/<name>"``, track it and return it.

        Keras 3's form, ``add_weight(shape=(), initializer=None, dtype=None, trainable=True,
        regularizer=None, constraint=None, name=None)`` (positionally: shape, initializer,
        dtype), and jittape's positional form ``add_weight(name, shape, initializer,
        trainable, dtype)`` (a first positional argument that is a string is the name).

        Args:
            shape: the weight's shape (``()`` when not given).
            initializer: a name, an initializer or a callable ``(shape, dtype)``;
                ``None`` means ``"glorot_uniform"`` for a float dtype, ``"zeros"``
                otherwise (Keras' default).
            dtype: the layer's dtype when not given.
            trainable: whether optimizers update it (True when not given).
            regularizer: a name, regularizer or callable; its penalty of the weight is
                in ``losses``.
            constraint: a name, constraint or callable, kept as ``v.constraint`` (the
                optimizer applies it after each update).
            name: ``"variable"``, ``"variable_1"``, ... when not given.

        Example:
            >>> w = layer.add_weight(shape=(3, 4), initializer="zeros", regularizer="l2",
            ...                      name="w")
        """
        given = {"shape": shape, "initializer": initializer, "dtype": dtype,
                 "trainable": trainable, "name": name}
        order = (("name", "shape", "initializer", "trainable", "dtype")
                 if args and isinstance(args[0], str) else ("shape", "initializer", "dtype"))
        if len(args) > len(order):
            raise TypeError(
                f'layer "{self.name}": add_weight() takes at most {len(order)} positional '
                f"arguments ({', '.join(order)}), got {len(args)}")
        for key, value in zip(order, args):
            if given[key] is not None:
                raise TypeError(
                    f'layer "{self.name}": add_weight() got multiple values for argument '
                    f"{key!r}")
            given[key] = value
        dt = as_dtype(given["dtype"]) if given["dtype"] is not None else self.dtype
        name = given["name"] if given["name"] is not None else self._unnamed_weight()
        shape = self._weight_shape(name, given["shape"])
        init = given["initializer"]
        if init is None:
            init = "glorot_uniform" if dt.is_floating else "zeros"
        reg = _regularizers.get(regularizer)
        value = _init.get(init)(shape, dtype=dt)
        v = Variable(convert_to_tensor(np.asarray(value), dtype=dt),
                     trainable=True if given["trainable"] is None else bool(given["trainable"]),
                     name=f"{self.name}/{name}", constraint=_constraints.get(constraint))
        if tuple(v.shape) != shape:
            raise ValueError(
                f'layer "{self.name}": the initializer for {name!r} gave shape '
                f"{list(v.shape)}, expected {list(shape)}"
            )
        self._own_weights.append(v)
        if reg is not None:
            self._weight_regularizers.append((v, reg))
        return v

    def _weight_shape(self, name, shape):
        if shape is None:
            return ()
        try:
            dims = tuple(shape)
        except TypeError:
            dims = None
        if dims is None or not all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 0 for d in dims
        ):
            raise ValueError(
                f'layer "{self.name}": add_weight {name!r} needs a shape of non-negative ints '
                f"(fully known), got shape={shape!r}")
        return tuple(int(d) for d in dims)

    def _unnamed_weight(self) -> str:
        taken = {v.name.rsplit("/", 1)[-1].rsplit(":", 1)[0] for v in self._own_weights}
        name, i = "variable", 0
        while name in taken:
            i += 1
            name = f"variable_{i}"
        return name

    @property
    def layers(self) -> list:
        """Tracked sublayers."""
        return list(self._sublayers)

    def _descendants(self) -> list:
        """Every layer below this one, depth first, each once."""
        out, seen, stack = [], {id(self)}, list(reversed(self._sublayers))
        while stack:
            layer = stack.pop()
            if id(layer) in seen:
                continue
            seen.add(id(layer))
            out.append(layer)
            stack.extend(reversed(layer.__dict__.get("_sublayers", ())))
        return out

    # -- losses --------------------------------------------------------------------
    @property
    def losses(self) -> list:
        """The scalar losses to add to a training loss, as Keras 3 lists them: this
        layer's and its sublayers' ``add_loss`` losses and activity penalties from the
        last top-level call, then the penalties of the trainable weights that have a
        regularizer, evaluated now (so they are recorded by a tape that is open, and are
        tensors of the trace inside a ``jt.function``). Losses recorded while a
        ``jt.function`` traced are symbolic: read them inside the step, not after it.

        Example:
            >>> loss = loss_fn(y, model(x, training=True)) + jt.add_n(model.losses)
        """
        out = list(self.__dict__.get("_losses", ()))
        for layer in self._descendants():
            out.extend(layer.__dict__.get("_losses", ()))
        out.extend(self._weight_penalties())
        return out

    def _weight_penalties(self) -> list:
        regs = {}
        for layer in [self, *self._descendants()]:
            for v, reg in layer.__dict__.get("_weight_regularizers", ()):
                regs.setdefault(id(v), reg)
        if not regs:
            return []
        return [regs[id(v)](v) for v in self.trainable_variables if id(v) in regs]

    def add_loss(self, loss):
        """Add a scalar loss tensor (or a list of them) to ``losses``; call it from
        ``call``. Losses added during a call are replaced at the next top-level call.

        Example:
            >>> def call(self, x):
            ...     self.add_loss(1e-3 * jt.reduce_sum(jt.square(x)))
            ...     return x
        """
        values = nest.flatten(loss)
        for v in values:
            if not isinstance(v, (Tensor, Variable)):
                raise ValueError(
                    f'layer "{self.name}": add_loss() takes tensors (computed in call() from '
                    f"its inputs or weights), got {v!r}")
        if _CALLS.probing:  # a shape probe on zeros adds nothing
            return
        self.__dict__.setdefault("_losses", []).extend(values)

    def _clear_losses(self):
        for layer in [self, *self._descendants()]:
            layer.__dict__["_losses"] = []

    @contextlib.contextmanager
    def _call_context(self):
        """A top-level call (no other layer call running on this thread) starts by
        clearing the losses of the last one, for this layer and its sublayers."""
        if _CALLS.entry is not None or _CALLS.probing:
            yield
            return
        _CALLS.entry = self
        try:
            self._clear_losses()
            yield
        finally:
            _CALLS.entry = None

    def _add_activity_penalty(self, outputs):
        reg = self.activity_regularizer
        if reg is None or _CALLS.probing:
            return
        for out in nest.flatten(outputs):
            if isinstance(out, Tensor):
                loss = reg(out)
                losses = self.__dict__.setdefault("_losses", [])
                losses.append(_per_example(loss, out) if out.ndim else loss)

    def _all_weights(self):
        out, seen = [], set()
        for v in self._own_weights:
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
        for layer in self._sublayers:
            for v in layer.variables:
                if id(v) not in seen:
                    seen.add(id(v))
                    out.append(v)
        return out

    @property
    def variables(self) -> list:
        """Every weight, own weights first, then sublayers' (creation order)."""
        return self._all_weights()

    weights = variables

    @property
    def trainable_variables(self) -> list:
        """The weights an optimizer should update (none when ``trainable`` is False)."""
        if not self.trainable:
            return []
        out = [v for v in self._own_weights if v.trainable]
        seen = {id(v) for v in out}
        for layer in self._sublayers:
            for v in layer.trainable_variables:
                if id(v) not in seen:
                    seen.add(id(v))
                    out.append(v)
        return out

    trainable_weights = trainable_variables

    @property
    def non_trainable_variables(self) -> list:
        """Weights no optimizer touches (moving statistics; everything when frozen)."""
        train = {id(v) for v in self.trainable_variables}
        return [v for v in self._all_weights() if id(v) not in train]

    non_trainable_weights = non_trainable_variables

    def count_params(self) -> int:
        return int(sum(math.prod(v.shape) for v in self.variables))

    def get_weights(self) -> list:
        """Copies of every weight as numpy arrays, in ``variables`` order."""
        return [v.numpy() if v.ndim else np.asarray(v.numpy()) for v in self.variables]

    def set_weights(self, weights):
        """Set every weight from numpy arrays given in ``variables`` order.

        The number of arrays and each shape are checked before anything is assigned.
        """
        params = self.variables
        weights = list(weights)
        if not self.built and not params:
            raise ValueError(
                f'set_weights on layer "{self.name}": the layer has no weights yet (it is '
                "built on its first call, or from input_shape=); call it on a batch first"
            )
        if len(weights) != len(params):
            raise ValueError(
                f'You called set_weights(weights) on layer "{self.name}" with a weight list of '
                f"length {len(weights)}, but the layer was expecting {len(params)} weights "
                f"({', '.join(v.name for v in params)})"
            )
        arrays = []
        for i, (v, w) in enumerate(zip(params, weights)):
            a = np.asarray(w)
            if tuple(a.shape) != tuple(v.shape):
                raise ValueError(
                    f'set_weights on layer "{self.name}": weight {i} ({v.name}) has shape '
                    f"{_fmt_shape(v.shape)}, but the value given has shape {_fmt_shape(a.shape)}"
                )
            arrays.append(a)
        for v, a in zip(params, arrays):
            v.assign(a)

    # -- building and calling ---------------------------------------------------------
    @_wrap_build
    def build(self, input_shape):
        """Create the weights for inputs of ``input_shape`` (override in subclasses).

        Calling it directly builds the layer (it is then ``built``), as in Keras."""

    def _build_with(self, input_shape):
        if _is_shape(input_shape):
            input_shape = tuple(input_shape)
        self.build(input_shape)
        self._build_input_shape = _batchless(input_shape)
        self.built = True

    def _check_input(self, shape):
        """Raise when an input of ``shape`` does not fit the built layer (override)."""

    def _incompatible(self, axis, want, shape):
        return InvalidArgumentError(
            f'Input 0 of layer "{self.name}" is incompatible with the layer: expected axis '
            f"{axis} of input shape to have value {want}, but received input with shape "
            f"{_fmt_shape(shape)}"
        )

    def compute_output_shape(self, input_shape):
        """The output shape for an input shape (the batch dim may be None).

        This default runs ``call`` once on zeros with a batch of one; layers with a
        simple rule override it.
        """
        shape = tuple(input_shape)
        if any(d is None for d in shape[1:]):
            raise ValueError(
                f'layer "{self.name}": cannot infer the output shape from {_fmt_shape(shape)}'
            )
        probe = np.zeros((1,) + shape[1:], self.dtype._np)
        _CALLS.probing += 1
        try:
            out = self(probe, training=False)
        finally:
            _CALLS.probing -= 1
        return (shape[0],) + tuple(out.shape[1:])

    def _input_dtype(self):
        return self.dtype

    def _convert_input(self, x):
        if isinstance(x, (list, tuple)) and any(
            isinstance(v, (Tensor, Variable)) for v in nest.flatten(x)
        ):  # a structure of inputs (a custom layer taking [a, b]): convert each one
            return type(x)(self._convert_input(v) for v in x)
        if isinstance(x, dict):
            return {k: self._convert_input(v) for k, v in x.items()}
        dt = self._input_dtype()
        if isinstance(x, Variable):
            x = x.read_value()
        if isinstance(x, Tensor):
            if x.dtype.is_floating and x.dtype != dt and dt.is_floating:
                x = _ops.cast(x, dt)  # Keras autocasts float inputs to the layer's dtype
            return x
        if isinstance(x, (np.ndarray, np.generic, list, tuple, numbers.Number)):
            a = np.asarray(x)
            if a.dtype.kind == "f":
                return convert_to_tensor(a, dtype=dt)
            return convert_to_tensor(a)
        return x

    def _call_takes_training(self) -> bool:
        cls = type(self)
        cached = cls.__dict__.get("_takes_training_cache")
        if cached is None:
            params = inspect.signature(self.call).parameters
            cached = "training" in params or any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
            )
            cls._takes_training_cache = cached
        return cached

    def __call__(self, inputs, *args, training=None, **kwargs):
        if _kt.is_symbolic(inputs, args, kwargs):  # the functional API: record the call
            return _kt.symbolic_call(self, inputs, args, dict(kwargs, training=training))
        x = self._convert_input(inputs)
        with self._call_context():
            return self._build_and_call(x, args, training, kwargs)

    def _build_and_call(self, x, args, training, kwargs):
        """Build on the first call (checks the input's shape afterwards), call, and record
        the activity penalty of the outputs."""
        if isinstance(x, Tensor):
            shape = tuple(x.shape)
            if not self.built:
                self._build_with(shape)
            else:
                self._check_input(shape)
        elif not self.built:
            self._build_with(_shape_structure(x))
        if self._call_takes_training():
            kwargs["training"] = training
        try:
            outputs = self.call(x, *args, **kwargs)
        except InvalidArgumentError as e:
            msg = str(e)
            if f'layer "{self.name}"' in msg:
                raise
            raise InvalidArgumentError(
                f'Exception encountered when calling layer "{self.name}" '
                f"({type(self).__name__}): {msg}"
            ) from None
        self._add_activity_penalty(outputs)
        return outputs

    def call(self, inputs):
        return inputs

    # -- configs -------------------------------------------------------------------
    def get_config(self) -> dict:
        """The constructor arguments that rebuild this layer (``from_config``), in Keras
        3's format: ``name``, ``trainable``, ``dtype`` (a DTypePolicy record) and, when
        set, ``activity_regularizer``; subclasses add their own.

        Example:
            >>> jt.layers.Dense(2).get_config()["units"]  # 2
        """
        config = {"name": self.name, "trainable": self.trainable,
                  "dtype": _config.dtype_policy(self.dtype)}
        if self.activity_regularizer is not None:
            config["activity_regularizer"] = _regularizers.serialize(self.activity_regularizer)
        cls = type(self)
        if cls.get_config is Layer.get_config and "_auto_config" in self.__dict__:
            auto = self.__dict__["_auto_config"]  # a user's class with its own __init__
            if auto is None:
                raise NotImplementedError(
                    f"Layer {cls.__name__} has constructor arguments that are not plain values "
                    "(numbers, strings, bools, None, lists and dicts of them), so its config "
                    "cannot be made automatically: override get_config() to return them "
                    "(config = super().get_config(); config.update(...); return config)")
            config.update(auto)
        return config

    @classmethod
    def from_config(cls, config):
        """A new layer from ``get_config()``'s dict (or Keras'); weights are not part of
        it (use ``set_weights``). The base entries (``name``, ``trainable``, ``dtype``,
        ``activity_regularizer``) that a user's ``__init__`` does not take are set on the
        new layer instead."""
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = _config.dtype_from_config(config["dtype"], cls.__name__)
        params = inspect.signature(cls.__init__).parameters
        later = {}
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            for key in ("name", "trainable", "dtype", "activity_regularizer"):
                if key in config and key not in params:
                    later[key] = config.pop(key)
        layer = cls(**config)
        if "name" in later:
            layer._init_module(later.pop("name"))  # the name and its name scope
        if "dtype" in later:
            layer._dtype = _config.dtype_from_config(later.pop("dtype"), cls.__name__)
        for key, value in later.items():
            setattr(layer, key, value)
        return layer

    def get_build_config(self):
        """``{"input_shape": ...}``, the shape the layer was built for (batch as None),
        or None when it is not built; ``build_from_config`` builds a new layer alike."""
        if not self.built or self._build_input_shape is None:
            return None
        return {"input_shape": self._build_input_shape}

    def build_from_config(self, config):
        """Build from ``get_build_config()``'s dict (Keras' too)."""
        shape = (config or {}).get("input_shape")
        if shape is not None and not self.built:
            self._build_with(_shape_from_config(shape))

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name!r}, built={self.built}>"

    # -- saving ------------------------------------------------------------------------
    def save_weights(self, filepath, overwrite=True):
        """Write the weights to a Keras 3 ``.weights.h5`` file (``Model.save_weights``'s
        layout, so Keras loads it into the same architecture); see ``jittape.saving``.

        Example::

            model.save_weights("model.weights.h5")
        """
        from . import saving

        saving.save_weights(self, filepath, overwrite=overwrite)

    def load_weights(self, filepath, skip_mismatch=False):
        """Load a Keras 3 ``.weights.h5`` file into this built layer or model; every
        shape is checked before anything is assigned. See ``jittape.saving``.

        Example::

            model.load_weights("model.weights.h5")
        """
        from . import saving

        saving.load_weights(self, filepath, skip_mismatch=skip_mismatch)


_LAYER_CLASSES["Layer"] = Layer


def _unseen(values, seen):
    for v in values:
        if id(v) not in seen:
            seen.add(id(v))
            yield v


def _promote(x, dtype):
    """Integer and bool inputs of a layer that computes with its float weights (Dense,
    BatchNormalization) become ``dtype``, as Keras' type promotion makes them (uint8
    images, for one); float inputs were already cast by ``_convert_input``."""
    if isinstance(x, Tensor) and not x.dtype.is_floating:
        return _ops.cast(x, dtype)
    return x


# ---------------------------------------------------------------------------
# Dense


def _no_quantization(config, who):
    if config is not None:
        raise ValueError(f"{who}: quantization_config={config!r} is not supported (only None)")


class Dense(Layer):
    """``activation(inputs @ kernel + bias)``; kernel ``(input_dim, units)``, bias ``(units,)``.

    Inputs of rank > 2 are multiplied on their last axis. ``kernel_regularizer`` and
    ``bias_regularizer`` penalize the weights, ``activity_regularizer`` the outputs (see
    ``losses``); ``kernel_constraint`` and ``bias_constraint`` become the weights'
    ``constraint``.
    """

    activation = _ActivationAttr()

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 input_shape=None, name=None, dtype=None, trainable=True,
                 quantization_config=None, **kwargs):
        super().__init__(trainable=trainable, name=name, dtype=dtype, input_shape=input_shape,
                         activity_regularizer=activity_regularizer, **kwargs)
        if isinstance(units, bool) or not isinstance(units, numbers.Integral) or units <= 0:
            raise ValueError(f"Dense: units must be a positive integer, got {units!r}")
        _no_quantization(quantization_config, "Dense")
        self.units = int(units)
        self.activation = get_activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = _init.get(kernel_initializer)
        self.bias_initializer = _init.get(bias_initializer)
        self.kernel_regularizer = _regularizers.get(kernel_regularizer)
        self.bias_regularizer = _regularizers.get(bias_regularizer)
        self.kernel_constraint = _constraints.get(kernel_constraint)
        self.bias_constraint = _constraints.get(bias_constraint)
        self.kernel = None
        self.bias = None

    def build(self, input_shape):
        if len(input_shape) < 2:
            raise InvalidArgumentError(
                f'Input 0 of layer "{self.name}" is incompatible with the layer: expected '
                f"min_ndim=2, found ndim={len(input_shape)}. Full shape received: "
                f"{_fmt_shape(input_shape)}"
            )
        in_dim = input_shape[-1]
        if in_dim is None:
            raise InvalidArgumentError(
                f'layer "{self.name}": the last dimension of the inputs to Dense must be known, '
                f"got shape {_fmt_shape(input_shape)}"
            )
        self.kernel = self.add_weight(
            shape=(in_dim, self.units), initializer=self.kernel_initializer, name="kernel",
            regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        if self.use_bias:
            self.bias = self.add_weight(
                shape=(self.units,), initializer=self.bias_initializer, name="bias",
                regularizer=self.bias_regularizer, constraint=self.bias_constraint)

    def _check_input(self, shape):
        if len(shape) < 2:
            raise InvalidArgumentError(
                f'Input 0 of layer "{self.name}" is incompatible with the layer: expected '
                f"min_ndim=2, found ndim={len(shape)}. Full shape received: {_fmt_shape(shape)}"
            )
        if shape[-1] != self.kernel.shape[0]:
            raise self._incompatible(-1, self.kernel.shape[0], shape)

    def call(self, inputs):
        inputs = _promote(inputs, self.dtype)
        y = _ops.matmul(inputs, self.kernel)
        if self.use_bias:
            y = y + self.bias
        return self.activation(y)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self):
        return {
            **super().get_config(), "units": self.units,
            "activation": _serialize_activation(self.activation), "use_bias": self.use_bias,
            "kernel_initializer": _init.serialize(self.kernel_initializer),
            "bias_initializer": _init.serialize(self.bias_initializer),
            "kernel_regularizer": _regularizers.serialize(self.kernel_regularizer),
            "bias_regularizer": _regularizers.serialize(self.bias_regularizer),
            "kernel_constraint": _constraints.serialize(self.kernel_constraint),
            "bias_constraint": _constraints.serialize(self.bias_constraint),
            "quantization_config": None,
        }

    def __repr__(self):
        return (f"<Dense name={self.name!r}, units={self.units}, "
                f"activation={_activation_name(self.activation)}>")


# ---------------------------------------------------------------------------
# Activation, Flatten


class Activation(Layer):
    """Applies an activation function (by name or callable; ``None`` is linear)."""

    activation = _ActivationAttr()

    def __init__(self, activation, name=None, dtype=None, input_shape=None, **kwargs):
        super().__init__(name=name, dtype=dtype, input_shape=input_shape, **kwargs)
        self.activation = get_activation(activation)

    def call(self, inputs):
        return self.activation(inputs)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        return {**super().get_config(), "activation": _serialize_activation(self.activation)}


class Flatten(Layer):
    """Reshape ``(batch, d1, d2, ...)`` to ``(batch, d1*d2*...)``; a vector becomes
    ``(batch, 1)``. With ``data_format="channels_first"`` an input of rank 3 or more is
    first transposed to put axis 1 (the channels) last, so that the order of the
    features is that of the channels-last layout, as in Keras."""

    def __init__(self, data_format=None, name=None, dtype=None, input_shape=None, **kwargs):
        super().__init__(name=name, dtype=dtype, input_shape=input_shape, **kwargs)
        if data_format is None:
            data_format = "channels_last"  # Keras' image_data_format()
        if data_format not in ("channels_last", "channels_first"):
            raise ValueError(
                "Flatten: invalid value for argument `data_format`: expected 'channels_last' "
                f"or 'channels_first', got data_format={data_format!r}")
        self.data_format = data_format

    def _flat(self, shape):
        rest = shape[1:]
        return None if any(d is None for d in rest) else int(math.prod(rest))

    def call(self, inputs):
        inputs = inputs if isinstance(inputs, Tensor) else convert_to_tensor(inputs)
        shape = tuple(inputs._type.shape)  # symbolic sizes too (a None batch size)
        if not shape:
            raise InvalidArgumentError(
                f'layer "{self.name}": Flatten needs inputs with a batch dimension, got a scalar'
            )
        if self.data_format == "channels_first" and len(shape) >= 3:
            inputs = _ops.transpose(inputs, [0, *range(2, len(shape)), 1])
        return _ops.reshape(inputs, (shape[0], math.prod(shape[1:])))  # Dims multiply too

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self._flat(tuple(input_shape)))

    def get_config(self):
        return {**super().get_config(), "data_format": self.data_format}


# ---------------------------------------------------------------------------
# Dropout


def _validate_noise_shape(noise_shape):
    """Keras 3's check of ``Dropout(noise_shape=)``: None, or a tuple/list whose entries
    are positive ints or None (a bool is not taken as a dimension here)."""
    if noise_shape is None:
        return None
    head = "Dropout: invalid value received for argument `noise_shape`."
    if isinstance(noise_shape, str):
        raise ValueError(f"{head} Expected a tuple or list of integers. "
                         f"Received: noise_shape={noise_shape!r}")
    if isinstance(noise_shape, (Tensor, Variable)):
        noise_shape = np.asarray(noise_shape).tolist()
    try:
        dims = tuple(noise_shape)
    except TypeError:
        raise ValueError(f"{head} Expected an iterable of integers (e.g., a tuple or list). "
                         f"Received: noise_shape={noise_shape!r}") from None
    for i, d in enumerate(dims):
        if d is None:
            continue
        if isinstance(d, bool) or not isinstance(d, numbers.Integral):
            raise ValueError(f"{head} Expected all elements to be integers or None. Received "
                             f"element at index {i}: {d!r} (type: {type(d).__name__})")
        if d <= 0:
            raise ValueError(f"{head} Expected all dimensions to be positive integers or "
                             f"None. Received negative or zero value at index {i}: {d}")
    return tuple(None if d is None else int(d) for d in dims)


class Dropout(Layer):
    """Inverted dropout: with ``training=True`` each element is zeroed with probability
    ``rate`` and the rest are scaled by ``1 / (1 - rate)``; otherwise the identity.

    Masks come from ``jt.random``'s global generator (so ``jt.random.set_seed`` makes
    them reproducible), or, with ``seed=``, from this layer's own generator, which
    gives a new mask at each call and the same succession for the same seed.
    """

    def __init__(self, rate, noise_shape=None, seed=None, name=None, dtype=None,
                 input_shape=None, **kwargs):
        super().__init__(name=name, dtype=dtype, input_shape=input_shape, **kwargs)
        if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0 <= rate < 1:
            raise ValueError(
                "Dropout: invalid value received for argument `rate`: expected a float value "
                f"in [0, 1) (the fraction of the inputs to drop). Received: rate={rate!r}")
        self.rate = float(rate)
        self.noise_shape = _validate_noise_shape(noise_shape)
        self.seed = seed
        self._rng = None if seed is None else np.random.default_rng(int(seed))

    def call(self, inputs, training=None):
        if not training or self.rate == 0:
            return inputs
        g = self._rng if self._rng is not None else _random.generator()
        noise = None
        if self.noise_shape is not None:
            if len(self.noise_shape) != inputs.ndim:
                raise InvalidArgumentError(
                    f'layer "{self.name}": noise_shape {list(self.noise_shape)} does not have '
                    f"the rank of the inputs {_fmt_shape(inputs.shape)}"
                )
            noise = [inputs._type.shape[i] if d is None else int(d)
                     for i, d in enumerate(self.noise_shape)]
        return _ops.nn.dropout(inputs, self.rate, noise_shape=noise, rng=g)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed,
                "noise_shape": self.noise_shape}


# ---------------------------------------------------------------------------
# BatchNormalization


class BatchNormalization(Layer):
    """Normalize over every axis except ``axis`` (Keras' formulas).

    With ``training=True``::

        mean, var = batch mean and biased batch variance (divided by n, not n - 1)
        y = (x - mean) / sqrt(var + epsilon) * gamma + beta
        moving_mean     <- moving_mean * momentum + mean * (1 - momentum)
        moving_variance <- moving_variance * momentum + var * (1 - momentum)

    Otherwise ``y`` uses ``moving_mean`` and ``moving_variance`` and nothing is
    updated. gamma and beta are trainable; the moving statistics are non-trainable
    variables (updated with ``assign``). ``beta_regularizer``/``gamma_regularizer`` and
    ``beta_constraint``/``gamma_constraint`` apply to those two weights.

    ``synchronized`` is accepted for Keras' configs (one device: nothing to synchronize);
    batch renormalization (``renorm=True``) is not implemented.
    """

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones",
                 moving_mean_initializer="zeros", moving_variance_initializer="ones",
                 beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, synchronized=False, renorm=False, renorm_clipping=None,
                 renorm_momentum=0.99, name=None, dtype=None, input_shape=None, trainable=True,
                 **kwargs):
        super().__init__(trainable=trainable, name=name, dtype=dtype, input_shape=input_shape,
                         **kwargs)
        if renorm or renorm_clipping is not None:
            raise NotImplementedError(
                "BatchNormalization: batch renormalization (renorm=True, renorm_clipping) is "
                f"not implemented in jittape, got renorm={renorm!r}, "
                f"renorm_clipping={renorm_clipping!r}")
        self.synchronized = bool(synchronized)
        self.renorm_momentum = float(renorm_momentum)
        if not isinstance(axis, numbers.Integral):
            raise TypeError(f"BatchNormalization: axis must be an int, got {axis!r}")
        self.axis = int(axis)
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)
        self.center, self.scale = bool(center), bool(scale)
        self.beta_initializer = _init.get(beta_initializer)
        self.gamma_initializer = _init.get(gamma_initializer)
        self.moving_mean_initializer = _init.get(moving_mean_initializer)
        self.moving_variance_initializer = _init.get(moving_variance_initializer)
        self.beta_regularizer = _regularizers.get(beta_regularizer)
        self.gamma_regularizer = _regularizers.get(gamma_regularizer)
        self.beta_constraint = _constraints.get(beta_constraint)
        self.gamma_constraint = _constraints.get(gamma_constraint)
        self.gamma = self.beta = self.moving_mean = self.moving_variance = None

    def _axis(self, rank):
        a = self.axis + rank if self.axis < 0 else self.axis
        if not 0 <= a < rank:
            raise InvalidArgumentError(
                f'layer "{self.name}": axis {self.axis} is out of range for inputs of rank {rank}'
            )
        return a

    def build(self, input_shape):
        a = self._axis(len(input_shape))
        dim = input_shape[a]
        if dim is None:
            raise InvalidArgumentError(
                f'layer "{self.name}": axis {self.axis} of the input shape '
                f"{_fmt_shape(input_shape)} must be known"
            )
        self._rank = len(input_shape)
        shape = (dim,)
        if self.scale:
            self.gamma = self.add_weight(
                shape=shape, initializer=self.gamma_initializer, name="gamma",
                regularizer=self.gamma_regularizer, constraint=self.gamma_constraint)
        if self.center:
            self.beta = self.add_weight(
                shape=shape, initializer=self.beta_initializer, name="beta",
                regularizer=self.beta_regularizer, constraint=self.beta_constraint)
        self.moving_mean = self.add_weight(
            "moving_mean", shape, self.moving_mean_initializer, trainable=False)
        self.moving_variance = self.add_weight(
            "moving_variance", shape, self.moving_variance_initializer, trainable=False)

    def _check_input(self, shape):
        if len(shape) != self._rank:
            raise InvalidArgumentError(
                f'Input 0 of layer "{self.name}" is incompatible with the layer: expected '
                f"ndim={self._rank}, found ndim={len(shape)}. Full shape received: "
                f"{_fmt_shape(shape)}"
            )
        a = self._axis(len(shape))
        if shape[a] != self.moving_mean.shape[0]:
            raise self._incompatible(self.axis, self.moving_mean.shape[0], shape)

    def call(self, inputs, training=None):
        inputs = _promote(inputs, self.dtype)
        rank = inputs.ndim
        a = self._axis(rank)
        reduce_axes = [i for i in range(rank) if i != a]
        bshape = [1] * rank
        bshape[a] = self.moving_mean.shape[0]

        def param(v):
            return v if a == rank - 1 else _ops.reshape(v, bshape)

        if training and self.trainable:
            mean = _ops.reduce_mean(inputs, reduce_axes, keepdims=True)
            var = _ops.reduce_mean(_ops.square(inputs - mean), reduce_axes, keepdims=True)
            m = _ops.stop_gradient(_ops.reshape(mean, bshape[a:a + 1]))
            v = _ops.stop_gradient(_ops.reshape(var, bshape[a:a + 1]))
            k = self.momentum
            self.moving_mean.assign(self.moving_mean * k + m * (1.0 - k))
            self.moving_variance.assign(self.moving_variance * k + v * (1.0 - k))
        else:
            mean = param(self.moving_mean)
            var = param(self.moving_variance)
        y = (inputs - mean) / _ops.sqrt(var + self.epsilon)
        if self.scale:
            y = y * param(self.gamma)
        if self.center:
            y = y + param(self.beta)
        return y

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self):
        s = _init.serialize
        return {
            **super().get_config(), "axis": self.axis, "momentum": self.momentum,
            "epsilon": self.epsilon, "center": self.center, "scale": self.scale,
            "beta_initializer": s(self.beta_initializer),
            "gamma_initializer": s(self.gamma_initializer),
            "moving_mean_initializer": s(self.moving_mean_initializer),
            "moving_variance_initializer": s(self.moving_variance_initializer),
            "beta_regularizer": _regularizers.serialize(self.beta_regularizer),
            "gamma_regularizer": _regularizers.serialize(self.gamma_regularizer),
            "beta_constraint": _constraints.serialize(self.beta_constraint),
            "gamma_constraint": _constraints.serialize(self.gamma_constraint),
            "synchronized": self.synchronized, "renorm": False, "renorm_clipping": None,
            "renorm_momentum": self.renorm_momentum,
        }


# ---------------------------------------------------------------------------
# Sequential


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

    def __repr__(self):
        return f"<Sequential name={self.name!r}, layers={[l.name for l in self._stack]}>"


# ---------------------------------------------------------------------------
# serialize / deserialize


def serialize(layer) -> dict:
    """A layer as Keras 3's record: ``{"module", "class_name", "config",
    "registered_name"}`` and, once built, ``"build_config"`` (its input shape).

    jittape's layers are written under Keras' modules (``"keras.layers"``); a class of
    your own under its module, with its class name as ``registered_name``.

    Example:
        >>> record = jt.layers.serialize(jt.layers.Dense(2))
        >>> jt.layers.deserialize(record).units  # 2
    """
    if not isinstance(layer, Layer):
        raise TypeError(f"serialize: expected a jt.layers.Layer, got {type(layer).__name__}")
    cls = type(layer)
    if _LAYER_CLASSES.get(cls.__name__) is cls:
        module, registered = _KERAS_MODULE.get(cls.__name__, "keras.layers"), None
    else:
        module, registered = cls.__module__, cls.__name__
    record = {"module": module, "class_name": cls.__name__, "config": layer.get_config(),
              "registered_name": registered}
    build = layer.get_build_config()
    if build is not None:
        record["build_config"] = build
    return record


def deserialize(config, custom_objects=None):
    """The layer a record from ``serialize`` (or Keras) describes, built when the record
    has a ``build_config``.

    ``class_name`` is looked up in ``custom_objects`` (name -> class; also used for the
    nested initializers, regularizers, constraints and activation functions of your
    own), then among jittape's layers.
    """
    if not isinstance(config, dict) or "class_name" not in config:
        raise ValueError(
            f"deserialize: expected a layer record with 'class_name' and 'config', got {config!r}")
    with _config.custom_object_scope(custom_objects):
        name, registered = config["class_name"], config.get("registered_name")
        cls = ((_config.custom_object(registered) if registered else None)
               or _config.custom_object(name) or _LAYER_CLASSES.get(name))
        if cls is None:
            raise ValueError(
                f"Unknown layer class {name!r} (module {config.get('module')!r}): jittape's are "
                f"{', '.join(sorted(_LAYER_CLASSES))}; pass a class of your own in "
                f"custom_objects={{{name!r}: {name}}}")
        layer = cls.from_config(config.get("config", {}))
        if config.get("build_config"):
            layer.build_from_config(config["build_config"])
    return layer


# the layers that combine and reshape tensors (they subclass Layer, defined above)
from .layer_ops import (  # noqa: E402,F401
    Add, Average, Concatenate, Dot, Identity, Lambda, Maximum, Minimum, Multiply, Reshape,
    Subtract, add, average, concatenate, dot, maximum, minimum, multiply, subtract,
)

__all__ += [
    "Add", "Average", "Concatenate", "Dot", "Identity", "Lambda", "Maximum", "Minimum",
    "Multiply", "Reshape", "Subtract", "add", "average", "concatenate", "dot", "maximum",
    "minimum", "multiply", "subtract",
]


def __getattr__(name):
    if name in ("Input", "InputLayer"):  # jt.keras.layers.Input, as Keras exports it
        from . import models

        return getattr(models, name)
    raise AttributeError(f"module 'jittape.layers' has no attribute {name!r}")
