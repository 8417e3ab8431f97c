"""``Layer``, the base class of every layer (weights, sublayers, losses, calls, configs),
and the registry of jittape's layer classes by name."""

from __future__ import annotations

import contextlib
import inspect
import math
import numbers

import numpy as np

from ..saving import serialization as _config
from .. import constraints as _constraints
from .. import initializers as _init
from .. import keras_tensor as _kt
from .. import regularizers as _regularizers
from ... import nest
from ... import ops as _ops
from ... import train as _train
from ...dtypes import as_dtype
from ...errors import InvalidArgumentError
from ...module import Module, _is_non_trainable, _is_trainable, _is_variable
from ..naming import _fmt_shape, _snake, _unique_name
from ..variables import KerasVariable, current_path, name_scope
from ...tensor import Tensor, Variable, convert_to_tensor
from .utils import (
    _CALLS, _as_input_shape, _batchless, _init_arguments, _is_shape, _per_example,
    _shape_from_config, _shape_structure, _unseen, _wrap_build,
)


# the attributes of a layer that a checkpoint does not follow: its bookkeeping of the
# sublayers and weights it reaches otherwise
_LAYER_INTERNALS = frozenset({"_sublayers", "_own_weights", "_stack", "_made_trainable"})

# jittape's layer classes by name, for ``deserialize`` (a class defined in a jittape
# module registers itself; the user's come from ``custom_objects``)
_LAYER_CLASSES: dict = {}


def _layers_in(value, depth=0) -> list:
    """The layers inside nested lists, tuples and dicts (dict values in insertion
    order), as Keras tracks them."""
    if isinstance(value, Layer):
        return [value]
    if depth > 8 or not isinstance(value, (list, tuple, dict)):
        return []
    items = value.values() if isinstance(value, dict) else value
    return [layer for v in items for layer in _layers_in(v, depth + 1)]


def _short_name(v, layer_name) -> str:
    """A weight's name without its scope: a Keras variable's ``name``; a ``jt.Variable``
    a subclass appended itself, its TF name less the layer's name (jittape's names of
    old, which checkpoints keep)."""
    if isinstance(v, KerasVariable):
        return v.name
    prefix = layer_name + "/"
    return v._name[len(prefix):] if v._name.startswith(prefix) else v._name


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
    weights' penalties (see ``jt.layers``). ``get_config``/``from_config`` give
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
        self._made_trainable = []  # own weights created trainable (Keras' _trainable_variables)
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
    def trainable(self) -> bool:
        """Whether an optimizer updates this layer's weights, and (BatchNormalization)
        whether ``training=True`` uses and updates batch statistics.

        Setting it sets it on every sublayer, recursively, and sets the ``trainable``
        flag of every weight that was created trainable (moving statistics stay
        non-trainable), as Keras 3 does: ``base.trainable = False`` freezes the whole
        block, and a sublayer set back to True afterwards is trainable again on its own.
        As in tf.keras (whose attribute tracking skips ``x = x``), assigning the value
        the layer already has changes nothing below it. A model compiled and already
        fitted keeps the weights it trained until ``compile`` is called again.
        """
        return self.__dict__.get("_trainable", True)

    @trainable.setter
    def trainable(self, value):
        value = bool(value)
        if "_trainable" in self.__dict__ and self.__dict__["_trainable"] is value:
            return
        self.__dict__["_trainable"] = value
        for v in self.__dict__.get("_made_trainable", ()):
            v.trainable = value
        for layer in self.__dict__.get("_sublayers", ()):
            layer.trainable = value

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
        """Create a Keras variable, track it and return it: ``v.name`` is ``name``,
        ``v.path`` the layer's scope and ``name`` (``inner/d1/kernel``), as in Keras 3.

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
            name: ``"variable"``, ``"variable_1"``, ... when not given; no ``/`` in it.

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
        if not isinstance(name, str) or "/" in name:
            raise ValueError(f'layer "{self.name}": add_weight: the name must be a string '
                             f"without '/' (a weight's path is made of names), got {name!r}")
        value = _init.get(init)(shape, dtype=dt)
        with name_scope(self.name, caller=self):  # the layer's own scope (kept in build)
            v = KerasVariable(
                convert_to_tensor(np.asarray(value), dtype=dt),
                trainable=True if given["trainable"] is None else bool(given["trainable"]),
                name=name, constraint=_constraints.get(constraint))
        if tuple(v.shape) != shape:
            raise ValueError(
                f'layer "{self.name}": the initializer for {name!r} gave shape '
                f"{list(v.shape)}, expected {list(shape)}"
            )
        self._own_weights.append(v)
        if v.trainable:
            self._made_trainable.append(v)
            v.trainable = self.trainable  # a weight made by a frozen layer is frozen
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
        taken = {v.name for v in self._own_weights}
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
        """The weights an optimizer should update: those whose ``trainable`` flag is
        set (none when this layer's ``trainable`` is False), in ``variables`` order."""
        if not self.trainable:
            return []
        return [v for v in self._all_weights() if v.trainable]

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
                f"({', '.join(v.path for v in params)})"
            )
        arrays = []
        for i, (v, w) in enumerate(zip(params, weights)):
            a = np.asarray(w)
            if tuple(a.shape) != tuple(v.shape):
                raise ValueError(
                    f'set_weights on layer "{self.name}": weight {i} ({v.path}) has shape '
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
        with self._call_context(), self._open_name_scope():
            return self._build_and_call(x, args, training, kwargs)

    def _open_name_scope(self):
        """This layer's Keras scope, for the paths of the weights made in its build and
        calls. The first time it opens, the layer keeps the path around it (its parent
        path): the scope stands there from then on, wherever the layer is built or called
        later (Keras 3's ``_open_name_scope``)."""
        if self.__dict__.get("_parent_path") is None:
            self.__dict__["_parent_path"] = current_path()
        return name_scope(self.name, caller=self)

    @property
    def path(self):
        """The layer's scope when it was built (``inner/d1``), as Keras 3's ``Layer.path``:
        its weights' paths start with it. ``None`` until it is built."""
        return self.__dict__.get("_path")

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

    # -- checkpoints and saving ----------------------------------------------------------
    def _checkpoint_own_weights(self) -> list:
        """``(name, variable)`` of this layer's own weights, each by its short name
        (``kernel``, not ``dense/kernel``)."""
        return [(_short_name(v, self.name), v) for v in self._own_weights]

    def _checkpoint_children(self) -> list:
        """What a ``jt.train.Checkpoint`` follows below this layer (TF's
        ``Trackable._trackable_children``): its own weights, then its attributes
        (sublayers, variables, lists and dicts of them) in assignment order."""
        return self._checkpoint_own_weights() + _train._attribute_children(
            self, skip=_LAYER_INTERNALS)

    def _obj_type(self) -> str:
        """What the ``.weights.h5`` writer takes this object for (Keras 3's
        ``KerasSaveable._obj_type``): a layer."""
        return "Layer"

    def save_weights(self, filepath, overwrite=True):
        """Write the weights to a Keras 3 ``.weights.h5`` file (``Model.save_weights``'s
        layout, so Keras loads it into the same architecture); see ``jittape.keras.saving.weights``.

        Example::

            model.save_weights("model.weights.h5")
        """
        from ..saving import weights as saving

        saving.save_weights(self, filepath, overwrite=overwrite)

    def load_weights(self, filepath, skip_mismatch=False):
        """Load a Keras 3 ``.weights.h5`` file into this built layer or model; every
        shape is checked before anything is assigned. See ``jittape.keras.saving.weights``.

        Example::

            model.load_weights("model.weights.h5")
        """
        from ..saving import weights as saving

        saving.load_weights(self, filepath, skip_mismatch=skip_mismatch)


_LAYER_CLASSES["Layer"] = Layer
