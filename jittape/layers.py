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
"""

from __future__ import annotations

import collections
import functools
import inspect
import math
import numbers
import re
import weakref

import numpy as np

from . import initializers as _init
from . import train as _train
from . import nest
from . import ops as _ops
from . import random as _random
from .dtypes import as_dtype
from .errors import InvalidArgumentError
from .module import Module, _is_non_trainable, _is_trainable, _is_variable
from .tensor import Tensor, Variable, convert_to_tensor

__all__ = [
    "Layer", "Dense", "Dropout", "BatchNormalization", "Flatten", "Activation", "Sequential",
    "get_activation", "ACTIVATIONS", "keras_logits",
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
    """An activation function from a name (``"relu"``), ``None`` (linear) or a callable."""
    if identifier is None:
        return _linear
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


# ---------------------------------------------------------------------------
# Layer


class Layer(Module):
    """Base class. Subclasses create weights in ``build(input_shape)`` with
    ``add_weight`` and compute in ``call(inputs)`` (or ``call(inputs, training=None)``).

    Layers and lists of layers assigned as attributes are tracked: their weights are
    part of this layer's ``variables`` (own weights first, then sublayers in the
    order they were assigned).

    A layer is a ``jt.Module`` (as tf.keras 2's layers are tf.Modules): ``submodules``
    and ``name_scope`` work, and a module holding a layer lists the layer's weights in
    the layer's own order (``variables`` here, not attribute order).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if inspect.isfunction(cls.__dict__.get("build")):
            cls.build = _wrap_build(cls.__dict__["build"])

    def __init__(self, trainable=True, name=None, dtype=None, input_shape=None, **kwargs):
        if kwargs:
            raise TypeError(
                f"{type(self).__name__}: unexpected keyword argument(s) {sorted(kwargs)}"
            )
        self.__dict__.setdefault("_sublayers", [])
        self._own_weights = []
        self._init_module(name or _unique_name(_snake(type(self).__name__)))
        self._dtype = None if dtype is None else as_dtype(dtype)
        self.trainable = bool(trainable)
        self.built = False
        self._input_shape_arg = _as_input_shape(input_shape)
        self._build_input_shape = None  # the shape build() saw, batch dim as None

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value):
        self._name = value

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
            [v for v in value if isinstance(v, Layer)] if isinstance(value, (list, tuple)) else []
        )
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
    def add_weight(self, name, shape, initializer="glorot_uniform", trainable=True, dtype=None):
        """Create a ``jt.Variable`` named ``"<layer>/<name>"`` and track it."""
        dt = as_dtype(dtype) if dtype is not None else self.dtype
        init = _init.get(initializer)
        shape = tuple(int(d) for d in shape)
        value = init(shape, dtype=dt)
        v = Variable(convert_to_tensor(np.asarray(value), dtype=dt), trainable=trainable,
                     name=f"{self.name}/{name}")
        if tuple(v.shape) != shape:
            raise ValueError(
                f'layer "{self.name}": the initializer for {name!r} gave shape '
                f"{list(v.shape)}, expected {list(shape)}"
            )
        self._own_weights.append(v)
        return v

    @property
    def layers(self) -> list:
        """Tracked sublayers."""
        return list(self._sublayers)

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
        out = self(probe, training=False)
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
        x = self._convert_input(inputs)
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
            return self.call(x, *args, **kwargs)
        except InvalidArgumentError as e:
            msg = str(e)
            if f'layer "{self.name}"' in msg:
                raise
            raise InvalidArgumentError(
                f'Exception encountered when calling layer "{self.name}" '
                f"({type(self).__name__}): {msg}"
            ) from None

    def call(self, inputs):
        return inputs

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


class Dense(Layer):
    """``activation(inputs @ kernel + bias)``; kernel ``(input_dim, units)``, bias ``(units,)``.

    Inputs of rank > 2 are multiplied on their last axis.
    """

    activation = _ActivationAttr()

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", input_shape=None, name=None, dtype=None,
                 trainable=True, **kwargs):
        super().__init__(trainable=trainable, name=name, dtype=dtype, input_shape=input_shape,
                         **kwargs)
        if isinstance(units, bool) or not isinstance(units, numbers.Integral) or units <= 0:
            raise ValueError(f"Dense: units must be a positive integer, got {units!r}")
        self.units = int(units)
        self.activation = get_activation(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = _init.get(kernel_initializer)
        self.bias_initializer = _init.get(bias_initializer)
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
        self.kernel = self.add_weight("kernel", (in_dim, self.units), self.kernel_initializer)
        if self.use_bias:
            self.bias = self.add_weight("bias", (self.units,), self.bias_initializer)

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


class Flatten(Layer):
    """Reshape ``(batch, d1, d2, ...)`` to ``(batch, d1*d2*...)``; a vector becomes
    ``(batch, 1)``."""

    def __init__(self, name=None, dtype=None, input_shape=None, **kwargs):
        super().__init__(name=name, dtype=dtype, input_shape=input_shape, **kwargs)

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
        return _ops.reshape(inputs, (shape[0], math.prod(shape[1:])))  # Dims multiply too

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self._flat(tuple(input_shape)))


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
    variables (updated with ``assign``).
    """

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones",
                 moving_mean_initializer="zeros", moving_variance_initializer="ones",
                 name=None, dtype=None, input_shape=None, trainable=True, **kwargs):
        super().__init__(trainable=trainable, name=name, dtype=dtype, input_shape=input_shape,
                         **kwargs)
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
            self.gamma = self.add_weight("gamma", shape, self.gamma_initializer)
        if self.center:
            self.beta = self.add_weight("beta", shape, self.beta_initializer)
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


# ---------------------------------------------------------------------------
# Sequential


class Sequential(Layer):
    """A stack of layers, each feeding the next.

    Built on the first call, or at once when the first layer has ``input_shape``.
    """

    def __init__(self, layers=None, name=None, trainable=True, dtype=None):
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        self._stack = []
        for layer in layers or ():
            self.add(layer)

    @property
    def layers(self) -> list:
        return list(self._stack)

    def add(self, layer):
        """Append a layer (building it at once when the model is already built)."""
        if not isinstance(layer, Layer):
            raise TypeError(
                f"Sequential.add: expected a jt.layers.Layer, got {type(layer).__name__}"
            )
        if any(layer is l for l in self._stack):
            raise ValueError(f'Sequential.add: layer "{layer.name}" is already in the model')
        self._stack.append(layer)
        self._sublayers.append(layer)
        if len(self._stack) == 1 and layer._input_shape_arg is not None:
            self._build_with(layer._input_shape_arg)
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

    def __repr__(self):
        return f"<Sequential name={self.name!r}, layers={[l.name for l in self._stack]}>"
