"""Binding a call's arguments to the Python function's parameters, as tf.function does
before it keys a call (defaults applied, so ``f(x, True)`` and ``f(x, training=True)``
are one call), and fitting them to an ``input_signature``."""

from __future__ import annotations

import inspect
import types
import weakref

import numpy as np

from .. import nest
from ..errors import user_location
from ..tensor import Tensor, Variable, convert_to_tensor
from .keys import _PY_VALUES, _arg_name
from .spec import TensorSpec


class _WeakMethod:
    """``func`` bound to ``instance`` through a weak reference: the per-instance
    Function of a ``jt.function`` method, and the traces it keeps, must not keep the
    instance alive (a bound method would, and the class's cache of per-instance
    Functions would then keep it forever)."""

    __slots__ = ("func", "ref", "signature", "__weakref__")

    def __init__(self, func, instance):
        self.func = func
        self.ref = weakref.ref(instance)
        try:
            self.signature = inspect.signature(types.MethodType(func, instance))
        except (TypeError, ValueError):
            self.signature = None

    def instance(self):
        obj = self.ref()
        if obj is None:
            name = getattr(self.func, "__qualname__", "method")
            raise ReferenceError(
                f"the instance of jt.function method {name!r} no longer exists (it was "
                "garbage collected); call the method on a live instance")
        return obj

    def __call__(self, *args, **kwargs):
        return self.func(self.instance(), *args, **kwargs)


# -- binding arguments to parameters, as tf.function does before it keys a call


def _signature_of(fn):
    """``inspect.signature(fn)``, or None where it cannot be inspected (some builtins
    and callables): their arguments are then keyed as they are given."""
    if isinstance(fn, _WeakMethod):
        return fn.signature
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class _Binding:
    """How a call's arguments bind to the Python function's parameters:
    ``inspect.Signature.bind`` and ``apply_defaults``, so that ``f(x, True)``,
    ``f(x, training=True)`` and, with that default, ``f(x)`` are one call signature
    (positional parameters come out positional, keyword-only ones as keywords)."""

    __slots__ = ("sig", "params", "positional", "varargs", "fast", "fast_varargs")

    def __init__(self, sig):
        self.sig = sig
        ps = [] if sig is None else list(sig.parameters.values())
        self.positional = [p for p in ps if p.kind in _POSITIONAL]
        self.params = [p.name for p in self.positional]  # names of positional arguments
        self.varargs = next((p.name for p in ps if p.kind is p.VAR_POSITIONAL), None)
        # calls that binding would not change: exactly the positional arguments (and
        # the *args values), no keywords, and no keyword-only parameter to default
        kw_only = any(p.kind is p.KEYWORD_ONLY for p in ps)
        self.fast = -1 if sig is None or kw_only else len(self.positional)
        self.fast_varargs = self.varargs is not None

    def bind(self, fn_name, args, kwargs, what=""):
        """``(args, kwargs)`` bound to the parameters, defaults applied."""
        if self.sig is None:
            return args, kwargs
        if not kwargs and (len(args) == self.fast or (
                self.fast_varargs and self.fast >= 0 and len(args) >= self.fast)):
            return args, kwargs
        try:
            ba = self.sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(
                f"jt.function {fn_name!r}{what}: binding the call's arguments to the "
                f"parameters {self.sig} failed: {e}") from None
        ba.apply_defaults()
        return ba.args, ba.kwargs


def _is_default(value, default) -> bool:
    if value is default:
        return True
    if type(value) is type(default) and type(value) in _PY_VALUES:
        return value == default or (value != value and default != default)
    return False


# -- fitting them to an input_signature


def fit_signature(fn_name, sig, b, args, kwargs):
    """``(args, kwargs)`` bound to the parameters and fitted to the input_signature
    (as tf.function: the signature gives the first parameters' types, keywords
    included; a parameter beyond it must have a default and keeps it). ``fn_name``: the
    jt.function's, ``sig``: its input_signature, ``b``: its :class:`_Binding`."""
    if b.sig is None:  # parameters unknown: the signature's arguments, positionally
        if kwargs:
            raise TypeError(
                f"jt.function {fn_name!r} has an input_signature; pass its "
                f"arguments positionally (got keyword arguments {sorted(kwargs)})")
        if len(args) != len(sig):
            raise TypeError(
                f"jt.function {fn_name!r} takes {len(sig)} argument(s) by its "
                f"input_signature, got {len(args)}")
    else:
        args, kwargs = b.bind(
            fn_name, args, kwargs,
            what=f" takes {len(sig)} argument(s) by its input_signature")
        args, kwargs = _beyond_signature(fn_name, sig, b, args, kwargs)

    def fit(spec, a, path):
        if type(a) is Tensor and type(spec) is TensorSpec and a._value is not None \
                and spec.shape is not None and a._type.dtype == spec.dtype.name:
            shape = a._type.shape  # the common case: a tensor that fits, as it is
            if len(shape) == len(spec.shape) and all(
                    w is None or w == d for w, d in zip(spec.shape, shape)):
                return a
        if isinstance(spec, TensorSpec):
            t = _to_spec_dtype(fn_name, spec, a, path)
            if not spec.is_compatible_with(t):
                have, want = list(t.shape), spec.shape
                hint = (f" (rank {len(have)}, the signature's is rank {len(want)}): pass a "
                        f"rank-{len(want)} tensor (e.g. reshape it with jt.reshape) or "
                        "change the input_signature" if len(have) != len(want) else
                        ": pass a tensor of that shape, or give the signature None for "
                        "the dimensions that vary")
                loc = user_location()
                raise TypeError(
                    f"jt.function {fn_name!r}: argument {path} of shape "
                    f"{have} does not fit the input_signature's {spec}{hint}"
                    + (f" (at {loc})" if loc else ""))
            return t
        if isinstance(spec, dict) and isinstance(a, dict) and set(spec) == set(a):
            return {k: fit(spec[k], a[k], f"{path}[{k!r}]") for k in spec}
        if isinstance(spec, (list, tuple)) and isinstance(a, (list, tuple)) \
                and len(spec) == len(a):
            return type(a)(fit(x, y, f"{path}[{j}]") for j, (x, y) in enumerate(zip(spec, a)))
        raise TypeError(
            f"jt.function {fn_name!r}: argument {path} does not have the nesting of "
            f"its input_signature entry {spec!r}")

    fitted = tuple(fit(spec, a, str(j)) for j, (spec, a) in enumerate(zip(sig, args)))
    return fitted + tuple(args[len(sig):]), kwargs


def _to_spec_dtype(fn_name, spec, a, path) -> Tensor:
    """Argument ``a`` as a tensor of ``spec``'s dtype, converted as tf.function converts
    it: a tensor or variable keeps its dtype (another one is refused: a cast there is
    the user's to write, and a silent one would hide a float64 model fed float32
    weights); numpy data is cast to the spec's dtype whatever its own (float64 data to
    a float32 spec, floats to an int spec truncated, as ``astype``); Python numbers and
    lists convert as ``tf.convert_to_tensor`` does, which refuses a Python float for an
    integer or bool spec (``1.0`` too) and a Python int for a bool one."""
    def refuse(why):
        loc = user_location()
        return TypeError(f"jt.function {fn_name!r}: argument {path} does not fit the "
                         f"input_signature: {why}" + (f" (at {loc})" if loc else ""))

    want = spec.dtype
    if isinstance(a, (Tensor, Variable)):
        if a.dtype != want:
            what = f"variable {a.name!r}" if isinstance(a, Variable) else "a tensor"
            raise refuse(
                f"Can not cast {TensorSpec(a.shape, a.dtype)} to {spec}: {what} keeps its "
                f"dtype {a.dtype.name} (cast it: jt.cast(x, jt.{want.name}))")
        return convert_to_tensor(a)
    if isinstance(a, (np.ndarray, np.generic)):
        if a.dtype.kind not in "biuf":
            raise refuse(f"numpy data of dtype {a.dtype} cannot be converted to {spec}")
        return Tensor(np.asarray(a).astype(want._np), _own=True)
    try:
        natural = np.asarray(a).dtype if not isinstance(a, (list, tuple)) or not any(
            isinstance(v, (Tensor, Variable)) for v in nest.flatten(list(a))) else None
    except ValueError as e:  # a ragged list
        raise refuse(f"{a!r:.80} cannot be converted to {spec}: {e}") from None
    if natural is not None and natural.kind == "f" and want._np.kind in "iub":
        raise refuse(f"Cannot convert {a!r:.80} to a tensor of dtype {want.name} for {spec} "
                     "(a Python float converts to a float dtype only)")
    if natural is not None and natural.kind in "iu" and want.is_bool:
        raise refuse(f"Cannot convert {a!r:.80} to a tensor of dtype bool for {spec} (a "
                     "Python int does not convert to bool)")
    try:
        return convert_to_tensor(a, dtype=want)
    except (TypeError, ValueError) as e:
        raise refuse(f"{e} (for {spec})") from None


def _beyond_signature(fn_name, sig, b, args, kwargs):
    """Check the bound arguments that the input_signature does not cover: each must
    be its parameter's default (tf.function fixes them so: "Can not cast True to
    Literal[False]"); ``*args`` values and ``**kwargs`` beyond it are refused."""
    n = len(sig)
    if len(args) < n:
        raise TypeError(
            f"jt.function {fn_name!r}: input_signature contains {n - len(args)} "
            f"extra type constraints: it has {n} entries, the call binds "
            f"{len(args)} positional argument(s) to {fn_name}{b.sig}")
    params = b.sig.parameters
    extra = []  # (name, parameter or None for a *args/**kwargs value, value)
    for j in range(n, len(args)):
        extra.append((_arg_name(j, b.params, b.varargs),
                      b.positional[j] if j < len(b.positional) else None, args[j]))
    for k, v in kwargs.items():
        p = params.get(k)
        extra.append((k, p if p is not None and p.kind is p.KEYWORD_ONLY else None, v))
    for name, p, value in extra:
        if p is None:
            raise TypeError(
                f"jt.function {fn_name!r}: argument {name!r} is beyond its "
                f"input_signature of {n} entries ({fn_name}{b.sig})")
        if p.default is inspect.Parameter.empty:
            raise TypeError(
                f"jt.function {fn_name!r}: input_signature missing type constraint "
                f"for {p.name} (give it a jt.TensorSpec, or a default value)")
        if not _is_default(value, p.default):
            raise TypeError(
                f"jt.function {fn_name!r}: parameter {p.name!r} is not in the "
                f"input_signature, so it keeps its default {p.default!r}; got "
                f"{value!r:.80} (can not cast it to Literal[{p.default!r}]). Add it to "
                "the input_signature, or make another jt.function for that value")
    return args, kwargs
