"""What ``Layer`` needs besides the class: shapes, the ``build`` wrapper, automatic
configs and activity penalties (names and printed shapes: ``jittape.keras.naming``; this
thread's call state: ``jittape.keras.keras_tensor``)."""

from __future__ import annotations

import functools
import inspect
import numbers

from ... import ops as _ops
from ... import train as _train
from ..keras_tensor import _CALLS, _CallState  # noqa: F401 - this thread's layer calls
from ...tensor import Tensor, convert_to_tensor
from ..variables import current_path


# ---------------------------------------------------------------------------
# Shapes


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
            with self._open_name_scope():  # Keras 3 builds inside the layer's scope
                if depth == 0:
                    self.__dict__["_path"] = current_path()
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
# Arguments of the image layers


def _data_format(who, value) -> str:
    """``data_format`` as Keras' ``standardize_data_format``: None is ``"channels_last"``
    (Keras' ``image_data_format()``), the two names in any case."""
    if value is None:
        return "channels_last"
    name = str(value).lower()
    if name not in ("channels_last", "channels_first"):
        raise ValueError(
            f"{who}: invalid value for argument `data_format`: expected 'channels_last' or "
            f"'channels_first', got data_format={value!r}")
    return name


def _int_tuple(who, value, n, name, allow_zero=False) -> tuple:
    """Keras' ``standardize_tuple``: an int is repeated ``n`` times, otherwise ``n``
    ints; each >= 0 (``allow_zero``) or > 0."""
    msg = f"{who}: the `{name}` argument must be a tuple of {n} integers. Received {name}={value!r}"
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        dims = (int(value),) * n
    else:
        try:
            dims = tuple(value)
        except TypeError:
            raise ValueError(msg) from None
        if len(dims) != n or not all(
                isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in dims):
            raise ValueError(msg)
        dims = tuple(int(d) for d in dims)
    bad = [d for d in dims if d < 0 or (d == 0 and not allow_zero)]
    if bad:
        raise ValueError(f"{msg}, including values {bad} that do not satisfy "
                         f"`value {'>= 0' if allow_zero else '> 0'}`")
    return dims


def _pairs(who, value, n, name) -> tuple:
    """The ``padding``/``cropping`` of the 2-D and 3-D layers: an int (the same on every
    side), ``n`` ints (symmetric per axis) or ``n`` pairs ``(before, after)``."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return (_int_tuple(who, value, 2, name, allow_zero=True),) * n
    if not hasattr(value, "__len__") or len(value) != n:
        raise ValueError(f"{who}: `{name}` should be an int, a tuple of {n} ints or a tuple "
                         f"of {n} tuples of 2 ints. Received: {name}={value!r}")
    ordinal = ("1st", "2nd", "3rd")
    return tuple(_int_tuple(who, v, 2, f"{ordinal[i]} entry of {name}", allow_zero=True)
                 for i, v in enumerate(value))
