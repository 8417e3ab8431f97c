"""Signature keys: what of a call's (bound) arguments selects its trace. Tensors and
arrays by shape and dtype, Python values by value, variables by identity, and the
nesting; the sizes traced as symbols (an input_signature's None dims, or those that
reduce_retracing generalized) keyed as None. Also what says which argument's key changed
(a retrace's cause) and where an argument that cannot be keyed was found."""

from __future__ import annotations

import weakref

import numpy as np

from ..compiler.ir import Type, dtype_name
from ..tensor import Tensor, Variable
from .spec import TensorSpec


class _SymbolicArg(Exception):
    """An argument is a symbolic tensor: the call happens inside another trace."""


class _UnsupportedArg(Exception):
    """An argument cannot be part of a call signature (a set, a weak reference)."""

    def __init__(self, obj):
        super().__init__()
        self.obj = obj


# mutable or unhashable values whose contents tf.function cannot key (TypeError there too)
_UNSUPPORTED = (set, weakref.ref, weakref.ProxyType, weakref.CallableProxyType)


_PY_VALUES = (bool, int, float, complex, str, bytes, type(None))


def _dict_keys(d) -> list:
    try:
        return sorted(d)
    except TypeError:
        return list(d)


def _key(obj, leaves: list, mask=None):
    """A hashable key for one argument; its arrays are appended to ``leaves`` (in the
    order :func:`_symbolize` visits them). ``mask`` (leaf -> dims) keys those sizes as
    ``None``: a trace with symbolic sizes serves every size there."""
    if isinstance(obj, Tensor):
        v = obj._value
        if v is None:
            raise _SymbolicArg
        leaves.append(v)
        if mask is not None:
            return _masked(obj._type, mask.get(len(leaves) - 1))
        return obj._type
    t = type(obj)
    if t in _PY_VALUES:
        if t is float and obj != obj:
            return (t, "nan")
        return (t, obj)
    if isinstance(obj, (np.ndarray, np.generic)):
        a = np.asarray(obj)
        if a.dtype.kind not in "biuf":
            return ("object", id(obj))
        leaves.append(a)
        ty = Type(a.shape, dtype_name(a.dtype))
        return ty if mask is None else _masked(ty, mask.get(len(leaves) - 1))
    if isinstance(obj, Variable):
        return ("var", obj._uid)
    if isinstance(obj, (list, tuple)):
        return (t, tuple([_key(x, leaves, mask) for x in obj]))
    if isinstance(obj, dict):
        return (t, tuple([(k, _key(obj[k], leaves, mask)) for k in _dict_keys(obj)]))
    if isinstance(obj, _UNSUPPORTED):
        raise _UnsupportedArg(obj)
    try:
        hash(obj)
        return ("object", obj)
    except TypeError:
        return ("id", id(obj))


_MASKED: dict = {}  # (type, dims) -> the type with those sizes None (a key per call)


def _masked(ty: Type, dims) -> Type:
    if not dims:
        return ty
    key = (ty, dims)
    hit = _MASKED.get(key)
    if hit is None:
        hit = Type(tuple(None if j in dims else d for j, d in enumerate(ty.shape)), ty.dtype)
        if len(_MASKED) > 4096:
            _MASKED.clear()
        _MASKED[key] = hit
    return hit


def _spec_mask(sig) -> dict:
    """leaf -> the dims an input_signature leaves None (in the order of :func:`_key`)."""
    out, n = {}, [0]

    def walk(spec):
        if isinstance(spec, TensorSpec):
            # (an unknown rank, shape=None, keys each shape as it comes: no symbols)
            dims = frozenset(j for j, d in enumerate(spec.shape or ()) if d is None)
            if dims:
                out[n[0]] = dims
            n[0] += 1
        elif isinstance(spec, (list, tuple)):
            for x in spec:
                walk(x)
        elif isinstance(spec, dict):
            for k in _dict_keys(spec):
                walk(spec[k])

    walk(list(sig))
    return out


def _generalize(old_key, new_key, old_types, leaves_new) -> dict | None:
    """reduce_retracing: the dims in which two call signatures differ, when they differ
    in sizes only (same structure, dtypes and ranks): leaf -> dims. None otherwise.
    ``old_types``: (shape, dtype) per leaf of the old call; ``leaves_new``: arrays."""
    if len(old_types) != len(leaves_new):
        return None
    mask = {}
    for k, ((sa, da), b) in enumerate(zip(old_types, leaves_new)):
        sb = np.shape(b)
        if len(sa) != len(sb) or da != dtype_name(np.asarray(b).dtype):
            return None
        dims = frozenset(j for j, (x, y) in enumerate(zip(sa, sb)) if x != y)
        if dims:
            mask[k] = dims
    if not mask:
        return None
    # apart from the masked sizes, the keys must be the same
    if _relax_key(old_key, mask, old_types) != _relax_key(new_key, mask, leaves_new):
        return None
    return mask


def _merged(mask, extra) -> dict:
    """``mask`` (leaf -> dims traced as symbols) with ``extra``'s dims added."""
    out = dict(mask or {})
    for k, dims in extra.items():
        out[k] = out.get(k, frozenset()) | dims
    return out


def _relax_key(key, mask, leaves):
    """``key`` (a call key) with the masked sizes keyed as None."""
    it = iter(range(len(leaves)))

    def walk(k):
        if isinstance(k, Type):
            return _masked(k, mask.get(next(it)))
        if isinstance(k, tuple):
            return tuple(walk(x) for x in k)
        return k

    return walk(key)


def _symbolize(obj, make):
    """``obj`` with each tensor or array replaced by ``make(type)``, visiting leaves in
    the order of :func:`_key`."""
    if isinstance(obj, Tensor):
        return make(obj._type)
    t = type(obj)
    if t in _PY_VALUES:
        return obj
    if isinstance(obj, (np.ndarray, np.generic)):
        a = np.asarray(obj)
        if a.dtype.kind not in "biuf":
            return obj
        return make(Type(a.shape, dtype_name(a.dtype)))
    if isinstance(obj, Variable):
        return obj
    if isinstance(obj, (list, tuple)):
        items = [_symbolize(x, make) for x in obj]
        if hasattr(obj, "_fields"):
            return t(*items)
        return t(items)
    if isinstance(obj, dict):
        vals = {k: _symbolize(obj[k], make) for k in _dict_keys(obj)}
        return t((k, vals[k]) for k in obj) if t is not dict else {k: vals[k] for k in obj}
    return obj


def _arg_name(j, params, varargs=None) -> str:
    """The name of positional argument ``j``: its parameter's, ``rest[i]`` for the i-th
    value of a ``*rest`` parameter, else ``args[j]``."""
    if j < len(params):
        return params[j]
    return f"{varargs}[{j - len(params)}]" if varargs else f"args[{j}]"


def _describe_leaves(args, kwargs, params, varargs=None) -> dict:
    """path -> key of each leaf, for saying which argument's key changed."""
    out: dict = {}

    def walk(obj, path):
        if isinstance(obj, (list, tuple)) and not isinstance(obj, _PY_VALUES):
            out[path] = ("seq", type(obj).__name__, len(obj))
            for j, x in enumerate(obj):
                walk(x, f"{path}[{j}]")
            return
        if isinstance(obj, dict):
            out[path] = ("dict", tuple(_dict_keys(obj)))
            for k in _dict_keys(obj):
                walk(obj[k], f"{path}[{k!r}]")
            return
        if isinstance(obj, Variable):
            out[path] = ("var", obj._uid, obj.name)
            return
        leaves: list = []
        try:
            k = _key(obj, leaves)
        except _SymbolicArg:
            k = ("symbolic",)
        out[path] = k

    for j, a in enumerate(args):
        walk(a, _arg_name(j, params, varargs))
    for name in _dict_keys(kwargs):
        walk(kwargs[name], name)
    return out


def _path_to(target, args, kwargs, params, varargs=None) -> str:
    """The argument path (``'s'``, ``"acc[0]['k']"``) at which ``target`` is found."""

    def walk(obj, path):
        if obj is target:
            return path
        if type(obj) in _PY_VALUES or isinstance(obj, _UNSUPPORTED):
            return None
        if isinstance(obj, (list, tuple)):
            for j, x in enumerate(obj):
                found = walk(x, f"{path}[{j}]")
                if found:
                    return found
        elif isinstance(obj, dict):
            for k in _dict_keys(obj):
                found = walk(obj[k], f"{path}[{k!r}]")
                if found:
                    return found
        return None

    for j, a in enumerate(args):
        found = walk(a, _arg_name(j, params, varargs))
        if found:
            return found
    for name in _dict_keys(kwargs):
        found = walk(kwargs[name], name)
        if found:
            return found
    return "?"


def _unsupported_message(fn_name, obj, path) -> str:
    if isinstance(obj, set):
        return (f"jt.function {fn_name!r}: argument {path!r}: Could not generate a generic "
                f"TraceType for {obj!r:.80}. Please verify that it is immutable/hashable (a "
                "set is not: pass a frozenset, a tuple or a sorted list instead)")
    return (f"jt.function {fn_name!r}: argument {path!r}: weakref input {object.__repr__(obj)} "
            "not supported for jt.function (pass the object itself)")


# -- which argument's key changed


def _fmt_shape(s) -> str:
    return "(" + ", ".join(str(d) for d in s) + ("," if len(s) == 1 else "") + ")"


def _fmt_key(k) -> str:
    if isinstance(k, Type):
        return f"{k.dtype} tensor of shape {_fmt_shape(k.shape)}"
    if isinstance(k, tuple) and k and isinstance(k[0], type):
        return f"Python {k[0].__name__} {k[1]!r}"
    if isinstance(k, tuple) and k and k[0] == "var":
        return f"variable {k[2]!r}"
    if isinstance(k, tuple) and k and k[0] == "seq":
        return f"{k[1]} of length {k[2]}"
    if isinstance(k, tuple) and k and k[0] == "dict":
        return f"dict with keys {list(k[1])}"
    if isinstance(k, tuple) and k and k[0] in ("object", "id"):
        return f"object {k[1]!r}"[:80]
    return repr(k)


def _diff(old: dict, new: dict) -> list:
    """Lines saying which argument keys differ between two calls."""
    lines = []
    for path in list(new) + [p for p in old if p not in new]:
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        if a is None:
            lines.append(f"argument {path!r} is new: {_fmt_key(b)}")
            continue
        if b is None:
            lines.append(f"argument {path!r} is gone (was {_fmt_key(a)})")
            continue
        if isinstance(a, Type) and isinstance(b, Type):
            if a.dtype != b.dtype:
                lines.append(f"argument {path!r}: dtype {a.dtype} -> {b.dtype}")
            if a.shape != b.shape:
                lines.append(f"argument {path!r}: shape {_fmt_shape(a.shape)} -> "
                             f"{_fmt_shape(b.shape)}")
            continue
        if (isinstance(a, tuple) and isinstance(b, tuple) and a and b and isinstance(a[0], type)
                and isinstance(b[0], type) and a[0] in (int, float, bool, complex)
                and b[0] in (int, float, bool, complex)):
            lines.append(
                f"argument {path!r}: Python {a[0].__name__} {a[1]!r} -> {b[0].__name__} "
                f"{b[1]!r} (each Python value is traced separately; pass a 0-d tensor "
                f"instead, e.g. jt.constant({b[1]!r}), to make it an input)")
            continue
        lines.append(f"argument {path!r}: {_fmt_key(a)} -> {_fmt_key(b)}")
    return lines
