"""``jt.function``: trace a Python function once per call signature, optimize the
whole graph and run it as one compiled call, as ``tf.function`` does.

The way of one call::

    train_step(x, y)
      -> the arguments bound to the parameters (defaults applied, so f(x, True) and
         f(x, training=True) are one call), fitted to an input_signature
      -> signature key: (backend, tensors by shape and dtype, Python values by value,
         variables by identity, nesting)                          [every call]
      -> hit: one call into the compiled program, then the variables that the step
         assigned take their new arrays                            [every call]
      -> miss: trace ``fn`` with symbolic tensors (FunctionTracer), run the backend's
         passes, generate and compile (or reuse identical source)  [once per signature]

While tracing, a variable read is a graph input fed with the variable's value at call
time; ``assign*`` make the value that later reads see (SSA: every read sees what the
Python code would have seen) and the last value is a graph output written back to the
variable after the call. A ``GradientTape`` inside the function records the symbolic
ops and its ``gradient`` emits the backward ops into the same graph, so the forward
pass, the backward pass and the optimizer update are one program.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import itertools
import os
import threading
import time
import types
import warnings
import weakref

import numpy as np

import passes

from .. import _state, backends, nest
from .. import printing as _printing
from .. import profiler as _profiler
from ..ops import collective as _collective
from .. import config as _config
from ..config import _flags
from ..dtypes import as_dtype
from ..errors import InvalidArgumentError, user_location
from ..dims import bind, new_symbol, reset_names
from ..ir import ConcretizeError, Type, concretize, dtype_name, is_symbolic, print_graph
from ..tensor import Tensor, Tracer, Variable, convert_to_tensor
from ..tensor import _config as _tensor_config

__all__ = ["function", "Function", "TensorSpec", "CacheInfo"]



def _log_enabled(topic: str) -> bool:
    want = os.environ.get("JITTAPE_LOG", "")
    if not want:
        return False
    topics = {t.strip() for t in want.split(",")}
    return topic in topics or "all" in topics


def _log(topic: str, msg: str) -> None:
    if _log_enabled(topic):
        _config.log(topic, msg)


# ---------------------------------------------------------------------------
# TensorSpec


class TensorSpec:
    """The shape (``None`` for a dimension of any size) and dtype of a tensor argument,
    for ``input_signature`` (``tf.TensorSpec``)."""

    __slots__ = ("shape", "dtype", "name")

    def __init__(self, shape, dtype="float32", name=None):
        self.shape = None if shape is None else tuple(
            None if d is None else int(d) for d in shape)
        self.dtype = as_dtype(dtype)
        self.name = name

    @classmethod
    def from_tensor(cls, tensor, name=None):
        return cls(tuple(tensor.shape), tensor.dtype, name)

    def is_compatible_with(self, value) -> bool:
        shape = tuple(np.shape(value)) if not isinstance(value, (Tensor, Variable)) else tuple(
            value.shape)
        if self.shape is None:
            return True
        return len(shape) == len(self.shape) and all(
            w is None or w == d for w, d in zip(self.shape, shape))

    def __eq__(self, other):
        return (isinstance(other, TensorSpec) and self.shape == other.shape
                and self.dtype == other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype.name))

    def __repr__(self):
        shape = "None" if self.shape is None else "(" + ", ".join(
            "None" if d is None else str(d) for d in self.shape) + ("," if len(self.shape) == 1
                                                                     else "") + ")"
        return f"TensorSpec(shape={shape}, dtype=jt.{self.dtype.name}, name={self.name!r})"


# ---------------------------------------------------------------------------
# Signature keys


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


def _spec_of(ty: Type, name=None) -> "TensorSpec":
    """The ``jt.TensorSpec`` of a traced type (a symbolic size is None)."""
    return TensorSpec(tuple(d if isinstance(d, int) else None for d in ty.shape), ty.dtype,
                      name=name)


def _describe_spec(x) -> str:
    """A structure of specs and values as TF's pretty-printed signature writes it."""
    if isinstance(x, TensorSpec):
        return repr(x)
    if isinstance(x, dict):
        return "Dict[" + ", ".join(f"[{k!r}, {_describe_spec(v)}]" for k, v in x.items()) + "]"
    if isinstance(x, tuple):
        return "Tuple[" + ", ".join(_describe_spec(v) for v in x) + "]"
    if isinstance(x, list):
        return "List[" + ", ".join(_describe_spec(v) for v in x) + "]"
    return f"Literal[{x!r}]"


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


# ---------------------------------------------------------------------------
# Tracing


class FunctionTracer(Tracer):
    """The tracer of one ``jt.function`` trace: also owns the variables' values."""

    traces_function = True

    def __init__(self, name):
        super().__init__(name, const_captures=True)
        self.sources: dict = {}  # graph input id -> ("arg", k) | ("var", Variable)
        self.vars: dict = {}  # variable uid -> [variable, current value, last read]
        self.written: dict = {}  # variable uid -> variable, in order of first assign
        self.created_vars: list = []
        self.draws: list = []  # (input id, draw) of random values, in program order
        self.prints: list = []  # jt.print calls: (structure, slots, value ids, options)

    def add(self, op, ins, attrs, types, loc=None):
        return super().add(op, ins, attrs, types, loc=loc or user_location(2))

    # -- variables ---------------------------------------------------------------
    def _state(self, v: Variable) -> list:
        st = self.vars.get(v._uid)
        if st is None:
            a = v._value
            ty = Type(a.shape, dtype_name(a.dtype))
            vid = self.builder.add_input(ty, f"var:{v._name}")
            self.sources[vid] = ("var", v)
            t = Tensor(_type=ty, _tracer=self, _id=vid)
            st = self.vars[v._uid] = [v, t, t]
        return st

    def read_variable(self, v: Variable) -> Tensor:
        st = self._state(v)
        if st[2] is None:  # assigned since the last read: a read of the new value
            from ..ops.elementwise import read_op

            cur = st[1]
            (o,) = self.builder.add_node(read_op, [cur._id], types=(cur._type,),
                                         loc=user_location(2))
            st[2] = Tensor(_type=cur._type, _tracer=self, _id=o)
        return st[2]

    def assign_variable(self, v: Variable, mode: str, value) -> None:
        from .. import ops

        st = self._state(v)
        saved, _state.local.tapes = _state.local.tapes, []  # assign is never recorded
        try:
            if isinstance(value, Variable):
                value = value.read_value()
            t = convert_to_tensor(value, dtype=v.dtype)
            if tuple(t.shape) != tuple(v.shape):
                raise InvalidArgumentError(
                    f"Variable.{mode}: cannot assign a value of shape {list(t.shape)} to "
                    f"variable {v.name!r} of shape {list(v.shape)}")
            if mode == "assign_add":
                t = ops.add(self.read_variable(v), t)
            elif mode == "assign_sub":
                t = ops.subtract(self.read_variable(v), t)
        finally:
            _state.local.tapes = saved
        if t._tracer is not self:
            vid = self.capture(t)
            t = Tensor(_type=t._type, _tracer=self, _id=vid)
        st[1], st[2] = t, None
        self.written.setdefault(v._uid, v)

    def random_input(self, ty: Type, draw) -> Tensor:
        """Random values (``jt.random``, a dropout mask): an input that each call of the
        compiled function draws afresh with ``draw(shape)`` (the shape of that call's
        sizes)."""
        vid = self.builder.add_input(ty, "random")
        self.sources[vid] = ("rand", draw)
        self.draws.append((vid, draw))
        return Tensor(_type=ty, _tracer=self, _id=vid)

    def created(self, v: Variable) -> None:
        self.created_vars.append(v)

    def initial_value(self, value, dtype):
        """A variable created while tracing gets a concrete initial value, computed now
        (a callable runs outside the trace; a symbolic tensor is evaluated when it
        depends on nothing but constants and variables)."""
        if isinstance(value, (Tensor, Variable)) or not callable(value):
            pass
        else:
            with self.outside():
                value = value()
        if isinstance(value, Variable):
            value = self.read_variable(value)
        if isinstance(value, Tensor) and value._value is None:
            value = self.evaluate(value)
        return value

    def evaluate(self, t: Tensor) -> Tensor:
        from ..backends import interpret
        from passes.prune import prune_unreachable

        g = prune_unreachable(self.builder.build([t._id]), drop_inputs=True).graph
        feeds = {}
        for vid in g.inputs:
            src = self.sources.get(vid)
            if src is None:
                feeds[vid] = next(a for i, a in self.captures.values() if i == vid)
            elif src[0] == "var":
                feeds[vid] = src[1]._value
            elif src[0] == "rand":
                feeds[vid] = src[1](tuple(int(d) for d in self.builder.types[vid].shape))
            else:
                raise TypeError(
                    "the initial value of a Variable created inside a jt.function depends "
                    "on the function's arguments; create the variable outside the function, "
                    "or from constants, initializers or other variables"
                    + (f" (at {user_location(2)})" if user_location(2) else ""))
        (a,) = interpret.run(g, feeds)
        return Tensor(np.array(a), _own=True)

    @contextlib.contextmanager
    def outside(self):
        """Run code eagerly: this trace and the tapes are set aside meanwhile."""
        local = _state.local
        saved = (local.tracers, local.tapes)
        local.tracers = [x for x in local.tracers if x is not self]
        local.tapes = []
        try:
            yield
        finally:
            local.tracers, local.tapes = saved


# ---------------------------------------------------------------------------
# One trace: a concrete function


_ARG, _VAR, _CAP, _RAND = 0, 1, 2, 3


class _Spec:
    """One binding of a trace's sizes: the graph after the passes, what feeds each of
    its inputs, its compiled program. A trace with known sizes has one; a trace with
    symbolic sizes one per distinct binding (the passes and code generation run for
    each, and the generated source is the same, so Numba compiles it once)."""

    __slots__ = ("graph", "reports", "feed_plan", "program", "ready", "thread", "sizes",
                 "draw_shapes", "times")

    def __init__(self, sizes):
        self.sizes = sizes  # the binding, as a tuple of sizes (() for known sizes)
        self.graph = None
        self.reports: list = []
        self.feed_plan: list = []  # (kind, x) per graph input
        self.program = None
        self.ready = False
        self.thread = None  # the background compile, once started
        self.draw_shapes: dict = {}  # random input id -> its shape for this binding
        self.times = {"passes": 0.0, "codegen": 0.0, "compile": 0.0}


class ConcreteFunction:
    """The traced, optimized and compiled program for one call signature."""

    def __init__(self, fn_name, backend, key, params):
        self.name = fn_name
        self.backend = backend
        self.key = key
        self.params = params
        self.traced = None  # the graph as traced (with symbolic sizes, if any)
        self.out_plan: list = []  # per flat output leaf: graph output index or ("py", obj)
        self.out_structure = None
        self.writes: list = []  # (variable, graph output index)
        self.times = {"trace": 0.0, "passes": 0.0, "codegen": 0.0, "compile": 0.0}
        self.cause = ""
        self.diff: list = []  # what changed from the closest earlier signature
        self.call_number = 0
        self.refill = False  # traced again after the trace cache's bound dropped it
        self._source: dict = {}
        self._captures: dict = {}  # graph input id -> captured array
        self.created: list = []
        self.draws: list = []
        self.prints: list = []  # jt.print calls, see printing.run_prints
        self.collectives: tuple = ()  # allreduce/broadcast nodes: a step across ranks
        self.input_structure = ((), {})  # (args, kwargs), TensorSpecs for the tensors
        # symbolic sizes: (argument leaf, dim, Dim) per symbolic size of an argument,
        # and the root symbols in order (a binding is their sizes); None: all known
        self.symbols_at = None
        self.roots: list = []
        self.leaf_types = None  # (shape, dtype) of each argument leaf as first called
        self.spec = _Spec(())  # the binding used last (introspection reads it)
        self._specs: collections.OrderedDict = collections.OrderedDict()
        self._spec_lock = threading.Lock()

    # the last binding's pieces, under the names they have always had; ``graph`` is the
    # trace itself while no binding of its symbolic sizes has run
    graph = property(lambda self: self.spec.graph if self.spec.graph is not None
                     else self.traced)
    reports = property(lambda self: self.spec.reports)
    feed_plan = property(lambda self: self.spec.feed_plan)
    ready = property(lambda self: self.spec.ready)
    _thread = property(lambda self: self.spec.thread)

    @property
    def program(self):
        return self.spec.program

    @program.setter
    def program(self, prog):
        self.spec.program = prog

    @property
    def symbolic(self) -> bool:
        """Traced with symbolic sizes: one trace serves every binding of them."""
        return self.symbols_at is not None

    @property
    def specializations(self) -> int:
        """Bindings of the symbolic sizes seen so far (1 for a trace with known sizes)."""
        return len(self._specs) if self.symbolic else 1

    # -- TF's introspection -----------------------------------------------------------
    @property
    def structured_input_signature(self) -> tuple:
        """``(args, kwargs)`` as traced: a ``jt.TensorSpec`` per tensor argument (None
        for a symbolic size), Python values as they were."""
        return self.input_structure

    @property
    def structured_outputs(self):
        """The outputs' structure, a ``jt.TensorSpec`` per tensor (None for a symbolic
        size), Python values as they were."""
        g = self.traced
        types = g.types()
        flat = []
        for p in self.out_plan:
            if type(p) is int:
                flat.append(_spec_of(types[g.outputs[p]]))
            else:
                flat.append(p[1])
        return nest.pack_sequence_as(self.out_structure, flat)

    def pretty_printed_signature(self, verbose=True) -> str:
        """The signature as TF prints it: input parameters, output type, captures."""
        args, kwargs = self.input_structure
        lines = ["Input Parameters:"]
        for j, a in enumerate(args):
            name = self.params[j] if j < len(self.params) else f"args[{j}]"
            lines.append(f"  {name} (POSITIONAL_OR_KEYWORD): {_describe_spec(a)}")
        for k, a in kwargs.items():
            lines.append(f"  {k} (KEYWORD_ONLY): {_describe_spec(a)}")
        lines.append("Output Type:")
        lines.append(f"  {_describe_spec(self.structured_outputs)}")
        lines.append("Captures:")
        caps = [f"  {ty}" for vid, ty in zip(self.traced.inputs, self.traced.input_types)
                if self._source.get(vid, ("",))[0] != "arg"]
        lines.extend(caps or ["  None"])
        return "\n".join(lines)

    def __call__(self, *args, **kwargs):
        """Run this trace (the arguments must fit its signature; no retrace)."""
        fn = getattr(self, "_function", None)
        fn = fn() if fn is not None else None
        if fn is None:
            raise RuntimeError(f"concrete function {self.name!r}: its jt.function is gone")
        args, kwargs = fn._canonical(args, kwargs)
        leaves: list = []
        key = fn._call_key(self.backend, args, kwargs, leaves)  # masked as the trace's
        if key != self.key:
            want = self.pretty_printed_signature().split("Output Type:")[0].rstrip()
            raise TypeError(
                f"concrete function {self.name!r}: the arguments do not fit its signature "
                f"(a concrete function never traces again; call the jt.function itself for "
                f"other arguments).\n{want}")
        return self.run(leaves)

    # -- specializing ----------------------------------------------------------------
    def specialize(self, graph, sizes=(), values=None):
        """The :class:`_Spec` for ``graph`` (the trace with its sizes bound): the
        backend's passes, the feed plan and the program."""
        spec = _Spec(sizes)
        t1 = time.perf_counter()
        spec.draw_shapes = {v: t.shape for v, t in zip(graph.inputs, graph.input_types)}
        pipeline = backends.pipeline(self.backend)
        if values:
            # the bound symbolic sizes are not folded into constants: every binding's
            # graph has one structure, so the generated source is the same
            vary = frozenset(v for v in values.values() if v > 1)
            pipeline = tuple(passes.configured(passes.fold_constants, vary=vary)
                             if passes.pass_key(p)[0] == "fold_constants" else p
                             for p in pipeline)
        spec.graph, spec.reports = backends.optimize(graph, pipeline)
        plan = []
        for vid in spec.graph.inputs:
            src = self._source.get(vid)
            if src is None:
                plan.append((_CAP, self._captures[vid]))
            elif src[0] == "arg":
                plan.append((_ARG, src[1]))
            elif src[0] == "rand":
                plan.append((_RAND, vid))
            else:
                plan.append((_VAR, src[1]))
        spec.feed_plan = plan
        t2 = time.perf_counter()
        spec.times["passes"] = t2 - t1
        backend = backends.get(self.backend)
        if backend.compiles and spec.graph.outputs:
            try:
                spec.program = backend.executable(spec.graph)
            except Exception:  # noqa: BLE001 - run_arrays falls back and warns
                spec.program = None
            spec.times["codegen"] = time.perf_counter() - t2
        self.times.update(passes=spec.times["passes"], codegen=spec.times["codegen"])
        self.spec = spec
        return spec

    def spec_for(self, leaves) -> _Spec:
        """The binding of the symbolic sizes that these argument arrays give."""
        if self.symbols_at is None:
            return self.spec
        sizes = [None] * len(self.roots)
        for k, j, r in self._bind_plan:  # (leaf, dim, root index), made once per trace
            n = leaves[k].shape[j]
            have = sizes[r]
            if have is None:
                sizes[r] = n
            elif have != n:
                try:
                    bind(self.symbols_at, [np.shape(a) for a in leaves])
                except ValueError as e:  # names the two arguments
                    raise InvalidArgumentError(f"jt.function {self.name!r}: {e}") from None
        sizes = tuple(sizes)
        spec = self._specs.get(sizes)
        if spec is not None:
            self.spec = spec
            return spec
        values = dict(zip(self.roots, sizes))
        with self._spec_lock:
            spec = self._specs.get(sizes)
            if spec is None:
                try:
                    graph = concretize(self.traced, values)
                except ConcretizeError as e:
                    loc = e.node.loc if e.node is not None else None
                    raise InvalidArgumentError(
                        f"jt.function {self.name!r}: the sizes of this call "
                        f"({', '.join(f'{r.name}={v}' for r, v in zip(self.roots, sizes))}) "
                        f"do not fit the trace: {e}" + (f" (at {loc})" if loc else "")
                    ) from None
                spec = self.specialize(graph, sizes, values)
                self._specs[sizes] = spec
                _config.evict(self._specs, "traces")
            else:
                self.spec = spec
        return spec

    # -- running -------------------------------------------------------------------
    def _arrays(self, leaves, spec):
        if self.draws:
            # every random value of the trace is drawn, in program order, also those
            # the passes found unused: the generator advances as the eager code's would
            shapes = spec.draw_shapes
            drawn = {vid: draw(shapes[vid]) for vid, draw in self.draws}
            return [leaves[x] if kind == _ARG else (x._value if kind == _VAR else (
                drawn[x] if kind == _RAND else x)) for kind, x in spec.feed_plan]
        return [leaves[x] if kind == _ARG else (x._value if kind == _VAR else x)
                for kind, x in spec.feed_plan]

    def run(self, leaves):
        if _profiler.ACTIVE:
            with _profiler.span(f"function {self.name}", "function"):
                return self._run(leaves)
        return self._run(leaves)

    def _run(self, leaves):
        if self.collectives:  # every rank checks the layout once, then a guarded step
            return _collective.WORLD[0].run_step(self, self._run_step, leaves)
        return self._run_step(leaves)

    def _run_step(self, leaves):
        spec = self.spec if self.symbols_at is None else self.spec_for(leaves)
        arrays = self._arrays(leaves, spec)
        prog = spec.program
        if prog is not None and prog.ready and prog.fallback is None:
            outs = prog(arrays, trusted=True)
        elif (backend := backends.get(self.backend)).compiles:
            raw, arrays = arrays, [backends.frozen(a) for a in arrays]
            if prog is not None and not prog.ready and prog.fallback is None \
                    and backends.background_compile():
                # compile in the background; until it is done, the interpreter runs the
                # same graph (the first call returns at once, not after the compile)
                self._start_compile(spec, arrays)
                outs = self._interpret(spec, arrays, raw)
                self._compiled(spec)
            else:
                outs = backend.run_arrays(spec.graph, arrays)
                self._compiled(spec)
        else:
            outs = backends.run(spec.graph, dict(zip(spec.graph.inputs, arrays)), self.backend)
            outs = [self._owned(a, arrays) for a in outs]
        for v, k in self.writes:
            a = outs[k]
            if a.flags.writeable:
                a.setflags(write=False)
            v._value = a
            v._read_tensor = None
        if self.prints:
            _printing.run_prints(self.prints, outs)
        flat = [Tensor(outs[p], _own=True) if type(p) is int else p[1] for p in self.out_plan]
        return nest.pack_sequence_as(self.out_structure, flat)

    def _compiled(self, spec=None):
        spec = spec or self.spec
        prog = spec.program
        if prog is None or not prog.ready or spec.ready:
            return
        spec.times["compile"] = self.times["compile"] = prog.compile_seconds
        spec.ready = True
        how = {"compiled": "compiled by Numba", "disk": "loaded from the disk cache",
               "memory": "the same source was compiled already"}.get(prog.origin)
        distinct = len({k for k, _ in prog.kernels})
        _log("compile", f"{self.name}: {len(prog.kernels)} kernel calls "
             f"({distinct} distinct kernels), {how} in {prog.compile_seconds:.2f} s "
             f"[{self.cause}] -> {prog.path}")

    def _start_compile(self, spec, arrays):
        spec.program.compile_in_background(arrays)
        spec.thread = spec.program.compile_thread

    def _interpret(self, spec, arrays, raw):
        outs = spec.program.interpret(arrays)
        return [self._owned(np.asarray(a), raw) for a in outs]

    def _all_specs(self) -> list:
        return list(self._specs.values()) if self.symbolic else [self.spec]

    def wait(self, timeout=None) -> bool:
        """Wait for background compiles; True when the compiled programs are ready."""
        ready = True
        for spec in self._all_specs():
            if spec.program is None:
                continue
            ready = spec.program.wait(timeout) and ready
            self._compiled(spec)
        return ready

    @staticmethod
    def _owned(a, arrays):
        """An output of the interpret backend may be a fed array (or a view of one): a
        caller's writeable array is copied, never frozen or shared."""
        if not a.flags.writeable:
            return a
        for x in arrays:
            if x.flags.writeable and np.may_share_memory(a, x):
                return a.copy()
        return a

    # -- introspection ---------------------------------------------------------------
    def kernels(self) -> list:
        if self.program is not None:
            return list(self.program.kernels)
        if self.graph is None:
            return []
        from passes import kernels, is_fused

        out = []
        for k, n in enumerate(kernels(self.graph)):
            if is_fused(n):
                a = n.attr_dict
                ops = [b.op.name for b in a["body"].nodes]
                out.append((f"k{k}", f"{a['kind']}: " + ", ".join(ops)))
            else:
                out.append((f"k{k}", n.op.name))
        return out


class CacheInfo(collections.namedtuple(
        "CacheInfo",
        "traces hits misses kernels compiled reused compile_seconds signatures evicted",
        defaults=(0,))):
    """``traces``: times the Python function was traced; ``hits``/``misses``: calls that
    found / did not find a trace for their signature; ``kernels``: kernels in the
    compiled programs; ``compiled``: programs Numba compiled; ``reused``: programs whose
    generated source was compiled already (in memory or on disk); ``compile_seconds``:
    tracing, passes, code generation and compilation; ``signatures``: traces kept (at
    most ``jt.config.cache_limits()["traces"]``); ``evicted``: traces the bound dropped,
    least recently used first. ``kernels``, ``compiled``, ``reused`` and
    ``compile_seconds`` count the traces kept."""


# ---------------------------------------------------------------------------
# Function


_RETRACE_HINT = (
    "Tracing is expensive and the excessive number of tracings could be due to (1) "
    "creating a jt.function repeatedly in a loop, (2) passing tensors with different "
    "shapes (reduce_retracing=True, or an input_signature with None dimensions, say "
    "which shapes are expected), (3) passing Python values (a learning rate as a Python "
    "float, say) instead of tensors."
)
_live_functions: "weakref.WeakSet" = weakref.WeakSet()  # trimmed when the bound is lowered


class _TracingDetector:
    """Recent calls of the jt.functions made from one Python function (one code object,
    as TF keys its frequent-tracing detector): a jt.function created anew in a loop
    traces on each call, which only the functions' shared history can see."""

    __slots__ = ("recent", "warned", "created", "__weakref__")

    def __init__(self):
        # per call: None for a call that did not trace, else (serial, is the Function
        # a method's per-instance one) of the Function that traced
        self.recent: collections.deque = collections.deque(maxlen=10)
        self.warned = 0  # warnings given (at most 2)
        self.created = 0  # jt.functions made from this code (per-instance ones aside)


_detectors: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # code -> detector
_detectors_lock = threading.Lock()
_serials = itertools.count(1)


def _detector_for(code) -> _TracingDetector:
    if code is None:
        return _TracingDetector()
    with _detectors_lock:
        det = _detectors.get(code)
        if det is None:
            det = _detectors[code] = _TracingDetector()
        return det


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


def _forget_instance(cache: dict, key: int, ref) -> None:
    """Weak-reference callback: the instance died; drop its per-instance Function."""
    hit = cache.get(key)
    if hit is not None and hit[0] is ref:
        cache.pop(key, None)


_bind_lock = threading.Lock()


# -- arguments a trace modified


class _Nest:
    """The nesting of a list, tuple or dict argument, and its leaves (held; compared by
    identity), taken before a trace to tell whether the function modified it."""

    __slots__ = ("type", "items")

    def __init__(self, obj):
        self.type = type(obj)
        if isinstance(obj, dict):
            self.items = {k: _nest(v) for k, v in obj.items()}
        else:
            self.items = [_nest(x) for x in obj]

    def same(self, obj) -> bool:
        if type(obj) is not self.type:
            return False
        if isinstance(obj, dict):
            return len(obj) == len(self.items) and all(
                k in obj and _same(s, obj[k]) for k, s in self.items.items())
        return len(obj) == len(self.items) and all(
            _same(s, x) for s, x in zip(self.items, obj))


def _nest(obj):
    return _Nest(obj) if isinstance(obj, (list, tuple, dict)) else obj


def _same(snapshot, obj) -> bool:
    return snapshot.same(obj) if isinstance(snapshot, _Nest) else snapshot is obj


def _per_call_variables(tracer: FunctionTracer) -> list:
    """The names of the variables the first trace created that nothing outside the
    trace holds once the Python function has returned: the function creates them on
    every call (the compiled program would silently keep using the first call's).

    The trace's own references are set aside while weak references tell; the
    variables kept (on an object, in a list or a closure: optimizer slots, a lazily
    built layer's weights) get them back."""
    created = tracer.created_vars
    if not created:
        return []
    uids = {v._uid for v in created}
    names = {v._uid: v.name for v in created}
    refs = [(v._uid, weakref.ref(v)) for v in created]
    vars_ = {uid: st for uid, st in tracer.vars.items() if uid in uids}
    sources = [vid for vid, src in tracer.sources.items()
               if src[0] == "var" and src[1]._uid in uids]
    src_uid = {vid: tracer.sources[vid][1]._uid for vid in sources}
    written = [uid for uid in tracer.written if uid in uids]
    # set aside the trace's strong references
    tracer.created_vars = []
    for st in vars_.values():
        st[0] = None
    for vid in sources:
        tracer.sources[vid] = ("var", None)
    for uid in written:
        tracer.written[uid] = None
    del created
    alive = {uid: r() for uid, r in refs}
    dead = [names[uid] for uid, v in alive.items() if v is None]
    if dead:
        return dead
    # all kept elsewhere: give the trace its references back
    tracer.created_vars = [alive[uid] for uid, _ in refs]
    for uid, st in vars_.items():
        st[0] = alive[uid]
    for vid in sources:
        tracer.sources[vid] = ("var", alive[src_uid[vid]])
    for uid in written:
        tracer.written[uid] = alive[uid]
    return []


def _is_default(value, default) -> bool:
    if value is default:
        return True
    if type(value) is type(default) and type(value) in _PY_VALUES:
        return value == default or (value != value and default != default)
    return False


def _structure_of(result, n: int):
    """The nesting of a function's result with placeholder leaves: what the calls pack
    their outputs into (holding no tensor, variable or object of the trace)."""
    if isinstance(result, (list, tuple, dict)):
        return nest.pack_sequence_as(result, [0] * n)
    return 0


def _trim_functions() -> None:
    for f in list(_live_functions):
        f._trim()


_config.on_cache_limit_change("traces", _trim_functions)


class Function:
    """A Python function traced and compiled once per call signature (``tf.function``).

    Calls with the same signature (tensor shapes and dtypes, Python values, variables
    by identity) run the compiled program; a new signature traces again. See
    :func:`function`.
    """

    def __init__(self, fn, input_signature=None, reduce_retracing=False, backend=None,
                 name=None):
        if not callable(fn):
            raise TypeError(f"jt.function needs a callable, got {type(fn).__name__}")
        functools.update_wrapper(self, fn.func if isinstance(fn, _WeakMethod) else fn)
        self._fn = fn
        self._name = name or getattr(fn, "__qualname__", getattr(fn, "__name__", "function"))
        if input_signature is not None:
            if not isinstance(input_signature, (list, tuple)):
                raise TypeError("input_signature must be a list or tuple of jt.TensorSpec")
            for s in nest.flatten(list(input_signature)):
                if not isinstance(s, TensorSpec):
                    raise TypeError(
                        f"input_signature entries must be jt.TensorSpec, got {type(s).__name__}")
            input_signature = tuple(input_signature)
        self.input_signature = input_signature
        self._reduce_retracing = bool(reduce_retracing)
        # argument leaf -> the dims traced as symbols, keyed as None: an input_signature's
        # None dims; under reduce_retracing, the dims that changed between two calls
        self._mask = _spec_mask(input_signature) if input_signature is not None else None
        self._mask = self._mask or None
        self._backend = None if backend is None else backends.check_backend(backend)
        # signature key -> ConcreteFunction, most recently used last; at most
        # jt.config.cache_limits()["traces"] of them
        self._cache: collections.OrderedDict = collections.OrderedDict()
        self._evicted: collections.OrderedDict = collections.OrderedDict()  # keys dropped
        self._n_evicted = 0
        _live_functions.add(self)
        self._lock = threading.RLock()
        self._traces = 0
        self._hits = 0
        self._misses = 0
        self._calls = 0
        self._history: list = []  # described keys of the traces, newest last
        # per-instance Functions of a method: id(instance) -> (weak reference to the
        # instance, Function); ``_bound_strong`` for instances without weak references
        self._bound: dict = {}
        self._bound_strong: dict = {}
        self._serial = next(_serials)
        self._per_instance = isinstance(fn, _WeakMethod)
        target = fn.func if self._per_instance else fn
        code = getattr(target, "__code__", None)
        self._code = code
        self._detector = _detector_for(code)  # shared by the Functions of one code
        if not self._per_instance:
            self._detector.created += 1
        self._recent = collections.deque(maxlen=10)  # this Function's calls: traced?
        self._warned = 0
        self._binding = _Binding(_signature_of(fn))
        self._params = self._binding.params

    @property
    def python_function(self):
        if isinstance(self._fn, _WeakMethod):
            return types.MethodType(self._fn.func, self._fn.instance())
        return self._fn

    def __repr__(self):
        return f"<jt.function {self._name}>"

    # -- methods -------------------------------------------------------------------
    def __get__(self, instance, owner=None):
        """The instance's own Function (it traces per instance, as tf.function does). It
        holds the instance by a weak reference, and is dropped when the instance dies.
        Keyed by identity: equal instances still get their own."""
        if instance is None:
            return self
        key = id(instance)
        hit = self._bound.get(key)
        if hit is not None and hit[0]() is instance:
            return hit[1]
        with _bind_lock:
            hit = self._bound.get(key)
            if hit is not None and hit[0]() is instance:
                return hit[1]
            try:
                ref = weakref.ref(instance, functools.partial(_forget_instance, self._bound,
                                                              key))
            except TypeError:  # no weak references to it (__slots__ without __weakref__)
                hit = self._bound_strong.get(key)
                if hit is None:
                    bound = Function(types.MethodType(self._fn, instance), self.input_signature,
                                     self._reduce_retracing, self._backend, name=self._name)
                    bound._per_instance = True
                    bound._detector.created -= 1
                    hit = self._bound_strong[key] = (instance, bound)
                return hit[1]
            bound = Function(_WeakMethod(self._fn, instance), self.input_signature,
                             self._reduce_retracing, self._backend, name=self._name)
            self._bound[key] = (ref, bound)
            return bound

    # -- calling -------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        local = _state.local
        if _flags["run_functions_eagerly"] or local.tapes or local.tracers:
            # inside another trace (inlined), under a recording tape (so that it can
            # differentiate through the call) or when debugging: the Python function
            return self._fn(*args, **kwargs)
        args, kwargs = self._canonical(args, kwargs)
        backend = self._backend or backends._current[0]
        leaves: list = []
        try:
            key = self._call_key(backend, args, kwargs, leaves)
        except _SymbolicArg:
            return self._fn(*args, **kwargs)
        cf = self._cache.get(key)
        traced = False
        if cf is None:
            with self._lock:
                cf = self._cache.get(key)
                if cf is None:
                    key, mask = self._relaxed(key, leaves)
                    cf = self._cache.get(key)
                    if cf is None:
                        cf = self._trace(key, backend, args, kwargs, mask)
                        traced = True
        else:
            try:
                self._cache.move_to_end(key)  # recently used: the bound keeps it
            except KeyError:  # another thread's trace dropped it just now
                pass
        self._calls += 1
        if traced:
            self._misses += 1
        else:
            self._hits += 1
        # tracing again a signature that the cache's bound dropped is not a retrace
        # the user caused: it does not count towards the retrace warning. The history
        # is shared by the Functions of one Python function (one made in a loop, say)
        retrace = traced and not cf.refill
        self._recent.append(retrace)
        self._detector.recent.append(
            (self._serial, self._per_instance) if retrace and cf.cause == "first call"
            else None)
        if retrace:
            self._maybe_warn(cf)
        return cf.run(leaves)

    def _canonical(self, args, kwargs):
        """The call's arguments bound to the parameters (defaults applied), fitted to
        the input_signature if there is one: what the call signature is made of."""
        if self.input_signature is not None:
            return self._fit_signature(args, kwargs)
        return self._binding.bind(self._name, args, kwargs)

    def _call_key(self, backend, args, kwargs, leaves):
        """The signature key of canonical arguments (their arrays go to ``leaves``)."""
        mask = self._mask
        try:
            return (backend, _key(args, leaves, mask),
                    _key(kwargs, leaves, mask) if kwargs else None,
                    _tensor_config["check_numerics"])
        except _UnsupportedArg as e:
            path = _path_to(e.obj, args, kwargs, self._params, self._binding.varargs)
            raise TypeError(_unsupported_message(self._name, e.obj, path)) from None

    def _fit_signature(self, args, kwargs):
        """``(args, kwargs)`` bound to the parameters and fitted to the input_signature
        (as tf.function: the signature gives the first parameters' types, keywords
        included; a parameter beyond it must have a default and keeps it)."""
        sig = self.input_signature
        b = self._binding
        if b.sig is None:  # parameters unknown: the signature's arguments, positionally
            if kwargs:
                raise TypeError(
                    f"jt.function {self._name!r} has an input_signature; pass its "
                    f"arguments positionally (got keyword arguments {sorted(kwargs)})")
            if len(args) != len(sig):
                raise TypeError(
                    f"jt.function {self._name!r} takes {len(sig)} argument(s) by its "
                    f"input_signature, got {len(args)}")
        else:
            args, kwargs = b.bind(
                self._name, args, kwargs,
                what=f" takes {len(sig)} argument(s) by its input_signature")
            args, kwargs = self._beyond_signature(args, kwargs)

        def fit(spec, a, path):
            if type(a) is Tensor and type(spec) is TensorSpec and a._value is not None \
                    and spec.shape is not None and a._type.dtype == spec.dtype.name:
                shape = a._type.shape  # the common case: a tensor that fits, as it is
                if len(shape) == len(spec.shape) and all(
                        w is None or w == d for w, d in zip(spec.shape, shape)):
                    return a
            if isinstance(spec, TensorSpec):
                have = getattr(a, "dtype", None)
                if isinstance(a, (Tensor, Variable, np.ndarray, np.generic)) and \
                        as_dtype(have) != spec.dtype:
                    raise TypeError(
                        f"jt.function {self._name!r}: argument {path} of dtype "
                        f"{as_dtype(have).name} does not fit the input_signature's {spec}")
                try:
                    t = convert_to_tensor(a, dtype=spec.dtype)
                except (TypeError, ValueError) as e:
                    raise TypeError(
                        f"jt.function {self._name!r}: argument {path} does not fit {spec}: {e}"
                    ) from None
                if not spec.is_compatible_with(t):
                    have, want = list(t.shape), spec.shape
                    hint = (f" (rank {len(have)}, the signature's is rank {len(want)}): pass a "
                            f"rank-{len(want)} tensor (e.g. reshape it with jt.reshape) or "
                            "change the input_signature" if len(have) != len(want) else
                            ": pass a tensor of that shape, or give the signature None for "
                            "the dimensions that vary")
                    loc = user_location()
                    raise TypeError(
                        f"jt.function {self._name!r}: argument {path} of shape "
                        f"{have} does not fit the input_signature's {spec}{hint}"
                        + (f" (at {loc})" if loc else ""))
                return t
            if isinstance(spec, dict) and isinstance(a, dict) and set(spec) == set(a):
                return {k: fit(spec[k], a[k], f"{path}[{k!r}]") for k in spec}
            if isinstance(spec, (list, tuple)) and isinstance(a, (list, tuple)) \
                    and len(spec) == len(a):
                return type(a)(fit(x, y, f"{path}[{j}]") for j, (x, y) in enumerate(zip(spec, a)))
            raise TypeError(
                f"jt.function {self._name!r}: argument {path} does not have the nesting of "
                f"its input_signature entry {spec!r}")

        fitted = tuple(fit(spec, a, str(j)) for j, (spec, a) in enumerate(zip(sig, args)))
        return fitted + tuple(args[len(sig):]), kwargs

    def _beyond_signature(self, args, kwargs):
        """Check the bound arguments that the input_signature does not cover: each must
        be its parameter's default (tf.function fixes them so: "Can not cast True to
        Literal[False]"); ``*args`` values and ``**kwargs`` beyond it are refused."""
        sig, b = self.input_signature, self._binding
        n = len(sig)
        if len(args) < n:
            raise TypeError(
                f"jt.function {self._name!r}: input_signature contains {n - len(args)} "
                f"extra type constraints: it has {n} entries, the call binds "
                f"{len(args)} positional argument(s) to {self._name}{b.sig}")
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
                    f"jt.function {self._name!r}: argument {name!r} is beyond its "
                    f"input_signature of {n} entries ({self._name}{b.sig})")
            if p.default is inspect.Parameter.empty:
                raise TypeError(
                    f"jt.function {self._name!r}: input_signature missing type constraint "
                    f"for {p.name} (give it a jt.TensorSpec, or a default value)")
            if not _is_default(value, p.default):
                raise TypeError(
                    f"jt.function {self._name!r}: parameter {p.name!r} is not in the "
                    f"input_signature, so it keeps its default {p.default!r}; got "
                    f"{value!r:.80} (can not cast it to Literal[{p.default!r}]). Add it to "
                    "the input_signature, or make another jt.function for that value")
        return args, kwargs


    # -- tracing -------------------------------------------------------------------
    def _trace(self, key, backend, args, kwargs, mask=None) -> ConcreteFunction:
        """Trace the Python function for this call signature. ``mask`` (argument leaf
        -> dims) names the sizes traced as symbols (``jittape.dims``): None in the
        input_signature, or generalized by reduce_retracing."""
        leaf_types = []
        t0 = time.perf_counter()
        first = self._traces == 0
        described = _describe_leaves(args, kwargs, self._params, self._binding.varargs)
        refill = self._evicted.pop(key, None) is not None
        if first:
            cause = "first call"
            diff: list = []
        elif refill:
            cause = ("traced before; the trace cache's bound dropped it (jt.config."
                     f"set_cache_limits(traces=...), now {_config.cache_limit('traces')})")
            diff = []
        else:
            prev = min(reversed(self._history), key=lambda d: len(_diff(d, described)))
            diff = _diff(prev, described) or [f"backend {backend!r}"]
            cause = "new signature: " + "; ".join(diff)
        _log("compile", f"tracing {self._name} ({cause})")
        if not first:
            _log("retrace", f"{self._name}: {cause}")
        cf = ConcreteFunction(self._name, backend, key, self._params)
        cf.cause = cause
        cf.refill = refill
        cf.diff = diff
        cf.call_number = self._calls + 1
        tracer = FunctionTracer(self._name)
        n_args = [0]
        reset_names()
        symbols_at = []  # (leaf, dim, Dim) of the sizes traced as symbols
        # the tensor leaves' paths, in the order of _key (their described key is a Type)
        paths = [p for p, k in described.items() if isinstance(k, Type)]

        def make(ty):
            k = n_args[0]
            leaf_types.append((ty.shape, ty.dtype))
            dims = mask.get(k) if mask else None
            if dims:
                shape = list(ty.shape)
                for j in sorted(dims):
                    if j < len(shape):
                        shape[j] = new_symbol(f"dimension {j} of argument {paths[k]!r}")
                        symbols_at.append((k, j, shape[j]))
                ty = Type(tuple(shape), ty.dtype)
            ph = tracer.placeholder(ty, f"arg:{paths[k]}" if k < len(paths) else f"arg{k}")
            tracer.sources[ph._id] = ("arg", k)
            n_args[0] += 1
            return ph

        sym_args = _symbolize(args, make)
        sym_kwargs = _symbolize(kwargs, make)
        names = iter(paths)
        cf.input_structure = tuple(  # the placeholders' types: a symbolic dim is None
            _symbolize(a, lambda ty: _spec_of(ty, next(names, None)))
            for a in (sym_args, sym_kwargs))
        before = ([_nest(a) for a in sym_args], {k: _nest(v) for k, v in sym_kwargs.items()})
        with tracer:
            try:
                result = self._fn(*sym_args, **sym_kwargs)
            except InvalidArgumentError as e:
                if not first:  # it traced fine before: say what changed since
                    e.args = (f"{e.args[0] if e.args else ''} [while tracing {self._name!r} "
                              f"again for a new call signature ({'; '.join(diff)}): check "
                              "that argument's rank and shape, or declare them with "
                              "input_signature=[jt.TensorSpec(...)] to be told at the call]",
                              ) + e.args[1:]
                raise
            out_ids, out_plan = [], []
            flat = nest.flatten(result)
            for leaf in flat:
                if isinstance(leaf, Variable):
                    leaf = leaf.read_value()
                if isinstance(leaf, (bool, int, float, np.generic, np.ndarray)) and not \
                        isinstance(leaf, Tensor):
                    leaf = convert_to_tensor(leaf)
                if isinstance(leaf, Tensor):
                    if leaf._tracer is tracer:
                        vid = leaf._id
                    elif leaf._value is not None:
                        vid = tracer.capture(leaf)
                    else:  # a symbolic tensor of another trace: out of scope here
                        from ..tensor import _out_of_scope

                        raise _out_of_scope(leaf)
                    out_plan.append(len(out_ids))
                    out_ids.append(vid)
                else:
                    out_plan.append(("py", leaf))
        self._check_arguments_unmodified(before, sym_args, sym_kwargs)
        out_structure = _structure_of(result, len(flat))
        result = flat = leaf = before = None  # noqa: F841 - the checks below need them gone
        if tracer.created_vars and not first:
            names = [v.name for v in tracer.created_vars]
            raise ValueError(
                f"jt.function {self._name!r} created variables {names} on a trace that was "
                f"not its first ({cause}). A jt.function only supports variables created on "
                "its first call (tf.function likewise only supports singleton Variables "
                "created on the first call): create them outside the function, or make "
                "sure the first call creates them all")
        if first:
            per_call = _per_call_variables(tracer)
            if per_call:
                raise ValueError(
                    f"jt.function {self._name!r} created variables {per_call} on its first "
                    "call that nothing keeps after the call: it would create them on every "
                    "call, and the compiled function would silently keep using the first "
                    "call's. jt.function only supports singleton Variables created on the "
                    "first call (as tf.function): create them once outside the function, or "
                    "keep them on an object (if self.v is None: self.v = jt.Variable(...))")
        writes = []
        for uid, v in tracer.written.items():
            writes.append((v, len(out_ids)))
            out_ids.append(tracer.vars[uid][1]._id)
        prints = []  # each jt.print's values are outputs too: printed after each call
        for structure, slots, vids, opts in tracer.prints:
            prints.append((structure, slots, list(range(len(out_ids), len(out_ids) + len(vids))),
                           opts))
            out_ids.extend(vids)
        traced_graph = tracer.builder.build(out_ids)
        cf.traced = traced_graph
        cf.prints = prints
        cf.collectives = tuple(n for n in traced_graph.nodes if n.op.name in _collective.NAMES)
        cf._source = dict(tracer.sources)
        cf.out_plan = out_plan
        cf.out_structure = out_structure
        cf.writes = writes
        cf.created = list(tracer.created_vars)
        cf.draws = list(tracer.draws)
        cf._captures = {vid: arr for vid, arr in tracer.captures.values()}
        cf.leaf_types = leaf_types
        cf.times["trace"] = time.perf_counter() - t0
        if symbols_at and is_symbolic(traced_graph):
            # one trace for every size of the symbolic dims: each new binding of them
            # runs the passes and generates code (the same source: Numba compiles once)
            cf.symbols_at = symbols_at
            cf.roots = list(dict.fromkeys(d.symbol() for _, _, d in symbols_at))
            index = {r: i for i, r in enumerate(cf.roots)}
            cf._bind_plan = [(k, j, index[d.symbol()]) for k, j, d in symbols_at]
        else:
            cf.specialize(traced_graph)
        self._traces += 1
        self._history.append(described)
        self._cache[key] = cf
        self._trim()
        return cf

    def _check_arguments_unmodified(self, before, sym_args, sym_kwargs) -> None:
        """tf.function: a function must not modify its Python list and dict arguments
        (the trace works on copies: the changes would silently be lost)."""
        snap_args, snap_kwargs = before
        b = self._binding
        modified = [_arg_name(j, b.params, b.varargs)
                    for j, (s, a) in enumerate(zip(snap_args, sym_args)) if not _same(s, a)]
        modified += [k for k, s in snap_kwargs.items() if not _same(s, sym_kwargs.get(k))]
        if modified:
            fn = b.sig if b.sig is not None else "(...)"
            short = getattr(self._fn, "__name__", None) or getattr(
                getattr(self._fn, "func", None), "__name__", self._name)
            raise ValueError(
                f"jt.function {self._name!r}: {short}{fn} should not modify its Python input "
                "arguments. Check if it modifies any lists or dicts passed as arguments. "
                "Modifying a copy is allowed. The following parameter(s) were modified: "
                + ", ".join(modified))

    def _trim(self) -> None:
        """Drop the least recently used traces beyond the bound (their compiled programs
        stay in the backend's own bounded cache). Remembers the dropped keys, so that
        tracing one again is not taken for a retrace."""
        with self._lock:
            limit = _config.cache_limit("traces")
            for key, _ in _config.evict(self._cache, "traces"):
                self._evicted[key] = True
                self._n_evicted += 1
            _config.evict(self._evicted, "traces")
            del self._history[:-limit]

    def _maybe_warn(self, cf):
        """Warn (at most twice) when 5 of this Function's last 10 calls traced, or when
        5 of the last 10 calls of the Functions made from this Python function were
        first calls of new Functions (one created in a loop, as TF counts them)."""
        det = self._detector
        firsts = [e for e in det.recent if e is not None]
        n = sum(self._recent)
        if n >= 5 and self._warned < 2:
            if self._reduce_retracing or self.input_signature is not None:
                # shapes are expected to change: say nothing when only shapes did
                if cf.diff and all(": shape " in line for line in cf.diff):
                    return
            self._warned += 1
            self._warn(cf, n, len(self._recent), "")
        elif len(firsts) >= 5 and det.warned < 2 and cf.cause == "first call" and (
            self.__dict__.get("_detect_loops", True)
        ):
            det.warned += 1
            made = {serial for serial, per_instance in firsts if not per_instance}
            if len(made) >= len(firsts) - len(made):
                why = (f" jt.function was created repeatedly in a loop: {len(made)} new "
                       f"jt.functions made from {self._name!r} traced on their first call "
                       f"({det.created} made so far): create it once, outside the loop.")
            else:
                why = (f" {len(firsts) - len(made)} instances traced the method "
                       f"{self._name!r} (a jt.function method traces once per instance): "
                       "reuse the instances rather than making new ones.")
            self._warn(cf, len(firsts), len(det.recent), why)

    def _warn(self, cf, n, of, why):
        msg = (f"{n} out of the last {of} calls to jt.function {self._name!r} triggered "
               f"tracing. Last retrace: {cf.cause}.{why} " + _RETRACE_HINT)
        _log("retrace", msg)
        warnings.warn(msg, UserWarning, stacklevel=4)

    # -- introspection ---------------------------------------------------------------
    def cache_info(self) -> CacheInfo:
        cfs = list(self._cache.values())
        kernels = sum(len(cf.kernels()) for cf in cfs if cf.graph is not None)
        # a trace with symbolic sizes has a program per binding of them: count each
        # (a binding whose generated source was compiled already counts as reused)
        progs = [sp.program for cf in cfs for sp in cf._all_specs() if sp.program is not None]
        compiled = sum(1 for p in progs if p.origin == "compiled")
        reused = sum(1 for p in progs if p.origin in ("disk", "memory"))
        seconds = 0.0
        for cf in cfs:
            seconds += cf.times["trace"]
            for sp in cf._all_specs():
                seconds += sp.times["passes"] + sp.times["codegen"]
                if sp.program is not None and sp.program.ready:
                    seconds += sp.program.compile_seconds
        return CacheInfo(self._traces, self._hits, self._misses, kernels, compiled, reused,
                         seconds, len(cfs), self._n_evicted)

    def wait(self, timeout=None) -> bool:
        """Wait until every trace's background compile is done (see
        ``JITTAPE_BACKGROUND_COMPILE``); True when all compiled programs are ready.
        For timing a compiled step, and for tests."""
        return all([cf.wait(timeout) for cf in list(self._cache.values())])

    def _relaxed(self, key, leaves):
        """On a miss: the key and mask to trace with. Under reduce_retracing, a call
        that differs from the last trace in sizes only generalizes those sizes (as
        tf.function does: the third batch size reuses the second trace)."""
        mask = self._mask
        if not self._reduce_retracing or not self._cache:
            return key, mask
        last = next(reversed(self._cache.values()))
        if last.leaf_types is None:
            return key, mask
        diff = _generalize(last.key, key, last.leaf_types, leaves)
        if diff is None:
            return key, mask
        merged = self._mask = _merged(mask, diff)
        return _relax_key(key, merged, leaves), merged

    def experimental_get_tracing_count(self) -> int:
        """How many times the Python function was traced (``tf.function``'s count)."""
        return self._traces

    def _from_specs(self, args, kwargs):
        """Arguments with each ``jt.TensorSpec`` replaced by a stand-in tensor, and the
        stand-ins' arrays with the dims their specs leave None."""
        stand_ins: dict = {}

        def sub(x):
            if isinstance(x, TensorSpec):
                if x.shape is None:
                    raise TypeError(
                        f"jt.function {self._name!r}.get_concrete_function: a TensorSpec of "
                        "unknown rank (shape=None) cannot be traced; give its rank, with None "
                        "for the dims that vary")
                # a None dim gets size 2 for the stand-in: it is traced as a symbol (the
                # value never matters), and 1 would look like a broadcast
                a = np.zeros(tuple(2 if d is None else d for d in x.shape), x.dtype._np)
                stand_ins[id(a)] = frozenset(j for j, d in enumerate(x.shape) if d is None)
                return Tensor(a, _own=True)
            if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
                return type(x)(sub(v) for v in x)
            if isinstance(x, dict):
                return {k: sub(v) for k, v in x.items()}
            return x

        return sub(args), sub(kwargs), stand_ins

    def get_concrete_function(self, *args, **kwargs) -> ConcreteFunction:
        """The trace for these arguments (traced now when there is none; not run):
        tensors, or ``jt.TensorSpec``s as TF users pass them (a spec's None dims are
        traced as symbols: the concrete function takes any size there). A trace with
        symbolic sizes is specialized to tensor arguments' sizes."""
        stand_ins: dict = {}
        if any(isinstance(x, TensorSpec) for x in nest.flatten([list(args), kwargs])):
            args, kwargs, stand_ins = self._from_specs(args, kwargs)
        args, kwargs = self._canonical(args, kwargs)
        backend = self._backend or backends._current[0]
        leaves: list = []
        key = self._call_key(backend, args, kwargs, leaves)
        if stand_ins:
            spec_mask = {k: stand_ins[id(a)] for k, a in enumerate(leaves)
                         if id(a) in stand_ins and stand_ins[id(a)]}
            if spec_mask:
                with self._lock:
                    self._mask = _merged(self._mask, spec_mask)
                key = _relax_key(key, self._mask, leaves)
        with self._lock:
            cf = self._cache.get(key)
            if cf is None:
                key, mask = self._relaxed(key, leaves)
                cf = self._cache.get(key)
                if cf is None:
                    cf = self._trace(key, backend, args, kwargs, mask)
        if cf.symbolic and not stand_ins:
            cf.spec_for(leaves)
        cf._function = weakref.ref(self)
        return cf

    def explain(self, *args, **kwargs) -> "Explanation":
        """What happens to a call with these arguments: the traced IR, what each pass
        changed, the kernels after fusion with their ops, where the generated source is,
        and the compile times. Traces (without running) when the signature is new."""
        return Explanation(self, self.get_concrete_function(*args, **kwargs))


class Explanation:
    """The report of :meth:`Function.explain`; ``str()`` it, or read its fields."""

    def __init__(self, fn: Function, cf: ConcreteFunction):
        self.function = fn
        self.concrete = cf
        self.traced_graph = cf.traced
        self.graph = cf.graph
        self.reports = cf.reports
        self.kernels = cf.kernels()
        prog = cf.program
        self.source_path = None if prog is None else prog.path
        # the entry module's, then each kernel module's (cpu); one file elsewhere
        self.source_paths = [] if prog is None else list(getattr(prog, "paths", [prog.path]))
        self.source = None if prog is None else prog.source
        self.times = dict(cf.times)
        if prog is not None and prog.ready:
            self.times["compile"] = prog.compile_seconds

    def kernel_notes(self) -> dict:
        """value id -> the kernel (as the kernel list, the generated source and
        ``jt.profiler`` name it) that computes the node defining it."""
        prog = self.concrete.program
        calls = getattr(getattr(prog, "sources", None), "calls", ())
        notes: dict = {}
        for v, (name, _) in zip(calls, self.kernels):
            if v is not None:
                notes[v] = f"{notes[v]}, {name}" if v in notes else name
        return notes

    def __str__(self):
        cf = self.concrete
        fn = self.function
        lines = [f"jt.function {fn._name!r} on backend {cf.backend!r}"]
        args = [f"{ty}" for vid, ty in zip(cf.traced.inputs, cf.traced.input_types)
                if cf._source.get(vid, ("",))[0] == "arg"]
        nvars = sum(1 for s in cf._source.values() if s[0] == "var")
        lines.append(f"signature: ({', '.join(args)}); {nvars} variables read, "
                     f"{len(cf.writes)} written")
        lines.append(f"traced at call {cf.call_number} ({cf.cause}); Python side effects "
                     "(print, appends) ran then, not on the calls that reuse the trace")
        if cf.symbolic:
            syms = "; ".join(f"{r.name} is {r.origin}" for r in cf.roots)
            now = ", ".join(f"{r.name}={v}" for r, v in zip(cf.roots, cf.spec.sizes))
            lines.append(f"symbolic sizes: {syms}. One trace serves every size; this "
                         f"report is for {now} ({cf.specializations} size binding(s) so "
                         "far, each ran the passes and code generation, and gives the "
                         "same generated source)")
        lines.append("")
        lines.append(f"-- traced graph: {len(cf.traced.nodes)} nodes --")
        lines.append(print_graph(cf.traced, show_loc=True))
        lines.append("")
        lines.append("-- passes --")
        for r in self.reports:
            lines.append(str(r))
            lines.extend("    " + d for d in r.details[:20])
            if len(r.details) > 20:
                lines.append(f"    ... {len(r.details) - 20} more")
        lines.append("")
        lines.append(f"-- {len(self.kernels)} kernels after fusion --")
        for name, desc in self.kernels:
            lines.append(f"{name}: {desc}")
        if self.source_path:
            lines.append(f"generated source: {self.source_path}")
            lines.extend(f"  kernel module: {p}" for p in self.source_paths[1:])
        prog = cf.program
        t = self.times
        if prog is not None and prog.ready:
            how = {"compiled": "compiled by Numba", "disk": "loaded from the disk cache",
                   "memory": "the same source was compiled already in this process"}.get(
                prog.origin, prog.origin)
            comp = f"first run {t['compile']:.3f} s ({how})"
        elif prog is not None and prog.fallback:
            comp = f"runs on interpret: {prog.fallback}"
        elif cf._thread is not None:
            comp = "compiling in the background (calls run on the interpreter meanwhile)"
        else:
            comp = "not compiled yet (Numba compiles on the first call)"
        lines.append(f"times: trace {t['trace']:.3f} s, passes {t['passes']:.3f} s, "
                     f"codegen {t['codegen']:.3f} s, {comp}")
        lines.append("")
        lines.append("-- optimized graph --")
        lines.append(print_graph(cf.graph, notes=self.kernel_notes()))
        return "\n".join(lines)

    __repr__ = __str__


def function(fn=None, *, input_signature=None, reduce_retracing=False, backend=None,
             jit_compile=None, autograph=None, name=None):
    """Compile a Python function (``tf.function``): ``@jt.function`` or
    ``@jt.function(input_signature=..., reduce_retracing=..., backend=...)``.

    Each new call signature traces ``fn`` once with symbolic tensors; the whole graph
    (forward, a tape's backward pass, variable updates) goes through the passes and
    runs as one compiled call. ``backend``: ``"cpu"`` or ``"interpret"`` (default: the
    current backend). ``jit_compile`` and ``autograph`` are accepted for TF
    compatibility and ignored (jittape always compiles; Python control flow runs at
    trace time).
    """
    if fn is None:
        return lambda f: Function(f, input_signature, reduce_retracing, backend, name)
    return Function(fn, input_signature, reduce_retracing, backend, name)
