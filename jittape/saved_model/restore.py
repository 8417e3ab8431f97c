"""The objects ``jt.saved_model.load`` returns: restored objects, and their functions,
which run each saved trace's graph as a ``jt.function`` (traced once per signature,
compiled and cached like any other)."""

from __future__ import annotations

import inspect
import keyword
import re

import numpy as np

from .. import nest
from .. import printing as _printing
from ..compiler.dims import Dim
from ..errors import InvalidArgumentError
from ..function import Function, TensorSpec
from ..function.binding import _Binding
from ..compiler.ir import Type
from ..module import Module, _is_non_trainable, _is_trainable, _is_variable
from ..tensor import Tensor, Variable, apply, convert_to_tensor
from .encode import (Trace, arg_leaf_from_json, flat_specs, nest_from_json, same_value,
                     stream_from_json)


# ---------------------------------------------------------------------------
# Objects


class RestoredObject(Module):
    """An object of a loaded saved model: its saved attributes (submodules, variables,
    functions; lists and dicts of them) and, as the saved object listed them,
    ``variables``, ``trainable_variables`` and ``non_trainable_variables``.

    Calling it calls its saved ``__call__`` function, if one was saved. The root object
    has ``signatures`` (name -> :class:`SignatureFunction`).
    """

    # slots, not attributes: the checkpoint walk and tf.Module's reflection see only
    # the saved attributes, so the paths of a loaded object are the saved object's
    __slots__ = ("_saved_class", "_orders", "_signatures")

    def __init__(self, name, saved_class, orders):
        self._init_module(name or "restored")
        self._saved_class = saved_class
        self._orders = orders  # "variables", ... -> list of Variables, as saved
        self._signatures = {}

    @property
    def signatures(self) -> dict:
        """The saved signatures, by name (``"serving_default"``...)."""
        return self._signatures

    @property
    def variables(self) -> list:
        v = self._orders.get("variables")
        return list(v) if v is not None else list(super().variables)

    @property
    def trainable_variables(self) -> list:
        v = self._orders.get("trainable_variables")
        return list(v) if v is not None else [x for x in self.variables if x.trainable]

    @property
    def non_trainable_variables(self) -> list:
        v = self._orders.get("non_trainable_variables")
        if v is not None:
            return list(v)
        train = {id(x) for x in self.trainable_variables}
        return [x for x in self.variables if id(x) not in train]

    def _flatten_for(self, predicate, seen, stack):
        """Inside a module's walk: the saved orders (as a layer answers for its own)."""
        own = {_is_variable: "variables", _is_trainable: "trainable_variables",
               _is_non_trainable: "non_trainable_variables"}.get(predicate)
        if own is None:  # submodules: by reflection, as any module
            return super()._flatten_for(predicate, seen, stack)
        return _unseen(getattr(self, own), seen)

    def __call__(self, *args, **kwargs):
        fn = self.__dict__.get("__call__")
        if fn is None:
            raise TypeError(f"the restored {self._saved_class} object is not callable: its "
                            "saved model has no '__call__' function")
        return fn(*args, **kwargs)

    def __repr__(self):
        return f"<restored {self._saved_class} name={self.name!r}>"


def _unseen(variables, seen):
    for v in variables:
        if id(v) not in seen:
            seen.add(id(v))
            yield v


def set_children(obj, children) -> None:
    """Set ``(name, value)`` pairs as attributes; a name ``a/b/c`` (a child inside a list
    or dict attribute, as the checkpoint paths spell it) nests: ``obj.a["b"]["c"]``, a
    list where the keys are ``0``, ``1``, ..."""
    tree: dict = {}
    for name, value in children:
        parts = name.split("/")
        node = tree
        for p in parts[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                break
            node = nxt
        else:
            node.setdefault(parts[-1], value)
    for k, v in tree.items():
        obj.__dict__[k] = _containers(v)


def _containers(v):
    if not isinstance(v, dict):
        return v
    items = {k: _containers(x) for k, x in v.items()}
    if sorted(items) == sorted(str(i) for i in range(len(items))):
        return [items[str(i)] for i in range(len(items))]
    return items


# ---------------------------------------------------------------------------
# Functions


_ARG, _VAR, _CONST = 0, 1, 2


class RestoredConcrete(Trace):
    """One saved trace: its graph runs as a ``jt.function`` with the trace's argument
    types as its input_signature, reading and assigning the restored variables."""

    def __init__(self, trace: Trace):
        super().__init__(**vars(trace))
        self._plan = []
        for kind, x in self.feeds:
            if kind == "arg":
                self._plan.append((_ARG, x))
            elif kind == "variable":
                self._plan.append((_VAR, x))
            else:
                x.setflags(write=False)
                self._plan.append((_CONST, Tensor(x, _own=True)))
        self.specs = flat_specs((self.args, self.kwargs))
        self._function = None

    @property
    def structured_input_signature(self) -> tuple:
        """``(args, kwargs)`` as traced: TensorSpecs and Python values."""
        return self.args, self.kwargs

    @property
    def structured_outputs(self):
        types = self.graph.types()
        return nest_from_json(self.outputs, lambda d: self._out_spec(d, types))

    def _out_spec(self, d, types):
        p = self.out_plan[d["leaf"]]
        if type(p) is int:
            ty = types[self.graph.outputs[p]]
            return TensorSpec(tuple(x if isinstance(x, int) else None for x in ty.shape),
                              ty.dtype)
        return arg_leaf_from_json(p)

    @property
    def function(self) -> Function:
        """The ``jt.function`` that runs this trace's graph (made on first use)."""
        if self._function is None:
            names = identifiers([s.name for s in self.specs])
            specs = [TensorSpec(s.shape, s.dtype, n) for s, n in zip(self.specs, names)]
            self._function = Function(_Replay(self, names), input_signature=specs,
                                      name=self.name)
        return self._function

    def match(self, args, kwargs) -> list | None:
        """The tensors of a bound call, in the trace's order, if the call fits it."""
        leaves: list = []
        if len(args) != len(self.args) or set(kwargs) != set(self.kwargs):
            return None
        if not all(_match(s, a, leaves) for s, a in zip(self.args, args)):
            return None
        if not all(_match(self.kwargs[k], kwargs[k], leaves) for k in sorted(self.kwargs)):
            return None
        return leaves

    # -- the graph, op by op -----------------------------------------------------------
    def _replay(self, leaves):
        g = self.graph
        env: dict = {}
        sizes: dict = {}  # saved symbol -> this call's size (a Dim while tracing)
        for (kind, x), vid, ty in zip(self._plan, g.inputs, g.input_types):
            if kind == _ARG:
                t = leaves[x]
                if ty.symbolic:
                    self._bind(ty, t, sizes)
            elif kind == _VAR:
                t = x.read_value()
            else:
                t = x
            env[vid] = t
        for n in g.nodes:
            attrs = {k: _sized(v, sizes) for k, v in n.attrs} if sizes else dict(n.attrs)
            out = apply(n.op, *[env[i] for i in n.inputs], **attrs)
            outs = out if isinstance(out, tuple) else (out,)
            for o, t in zip(outs, n.types):
                want = _sized(t, sizes) if sizes else t
                if o._type != want:
                    raise ValueError(
                        f"jt.saved_model: the saved graph of {self.name!r} does not run in "
                        f"this jittape: {n.op.name} (%{n.outputs[0]}) gives {o._type}, the "
                        f"saved graph says {want} (saved by another version?)")
            env.update(zip(n.outputs, outs))
        outputs = [env[o] for o in g.outputs]
        for v, k in self.writes:
            v.assign(outputs[k])
        for p in self.prints:
            flat = [outputs[x["output"]] if "output" in x else arg_leaf_from_json(x)
                    for x in p["leaves"]]
            structure = nest_from_json(p["structure"], lambda d: flat[d["leaf"]])
            _printing.print(*structure, output_stream=stream_from_json(p["stream"]),
                            summarize=p["summarize"], sep=p["sep"], end=p["end"])
        flat = [outputs[p] if type(p) is int else arg_leaf_from_json(p) for p in self.out_plan]
        return nest_from_json(self.outputs, lambda d: flat[d["leaf"]])

    def _bind(self, ty: Type, t, sizes: dict) -> None:
        for j, d in enumerate(ty.shape):
            s = d.symbol() if isinstance(d, Dim) else None
            if s is None:
                continue
            n = t._type.shape[j]
            have = sizes.setdefault(s, n)
            if type(have) is int and type(n) is int and have != n:
                raise InvalidArgumentError(
                    f"jt.saved_model: function {self.name!r}: sizes {have} and {n} for one "
                    f"dimension ({s.origin} when saved), which the saved trace takes as equal")


class _Replay:
    """The Python function of a trace's ``jt.function``: its graph, op by op. An object,
    not a closure: the retrace warning counts the Functions made from one code object,
    and each loaded trace is a Function of its own."""

    def __init__(self, concrete, names):
        self.concrete = concrete
        self.__name__ = self.__qualname__ = concrete.name
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names])

    def __call__(self, *leaves):
        return self.concrete._replay(leaves)


def _sized(v, sizes: dict):
    """``v`` (a Type, a size, a tuple of them) with the saved symbols replaced by this
    call's sizes."""
    if isinstance(v, Dim):
        total = 0
        for mono, c in v.canon().items():
            term = c
            for s, p in mono:
                for _ in range(p):
                    term = term * sizes[s]
            total = total + term
        return total
    if isinstance(v, Type):
        return Type(tuple(_sized(d, sizes) for d in v.shape), v.dtype) if v.symbolic else v
    if type(v) is tuple:
        return tuple(_sized(x, sizes) for x in v)
    return v


def identifiers(names) -> list:
    """Distinct Python identifiers made from ``names`` (argument paths: ``data[0]``)."""
    out: list = []
    for name in names:
        n = re.sub(r"\W+", "_", name or "arg").strip("_") or "arg"
        if n[0].isdigit() or keyword.iskeyword(n):
            n = "_" + n
        base, k = n, 1
        while n in out:
            n, k = f"{base}_{k}", k + 1
        out.append(n)
    return out


def _fit(spec: TensorSpec, x):
    """``x`` as a tensor of ``spec``, or None when it does not fit."""
    if isinstance(x, Variable):
        x = x.read_value()
    if isinstance(x, Tensor):
        if x.dtype != spec.dtype:
            return None
        t = x
    elif isinstance(x, (np.ndarray, np.generic)):
        if x.dtype.name != spec.dtype.name:
            return None
        t = convert_to_tensor(x)
    else:  # Python numbers and lists take the spec's dtype
        try:
            t = convert_to_tensor(x, dtype=spec.dtype)
        except (TypeError, ValueError):
            return None
    shape = t._type.shape
    if spec.shape is not None and (len(shape) != len(spec.shape) or any(
            w is not None and w != d for w, d in zip(spec.shape, shape))):
        return None
    return t


def _match(saved, x, leaves: list) -> bool:
    if isinstance(saved, TensorSpec):
        t = _fit(saved, x)
        if t is None:
            return False
        leaves.append(t)
        return True
    if isinstance(saved, dict):
        return isinstance(x, dict) and set(x) == set(saved) and all(
            _match(saved[k], x[k], leaves) for k in saved)
    if isinstance(saved, (list, tuple)):
        return isinstance(x, type(saved)) and len(x) == len(saved) and all(
            _match(s, v, leaves) for s, v in zip(saved, x))
    return same_value(saved, x)


def _describe(x) -> str:
    if isinstance(x, (Tensor, Variable)):
        return f"<{type(x).__name__} shape={tuple(x.shape)} dtype={x.dtype.name}>"
    if isinstance(x, (np.ndarray, np.generic)):
        return f"<{type(x).__name__} shape={x.shape} dtype={x.dtype.name}>"
    return repr(x)[:80]


def _options(args, kwargs) -> list:
    lines = [f"  Positional arguments ({len(args)} total):"]
    lines += [f"    * {_describe(a)}" for a in args]
    kw = ", ".join(f"{k!r}: {_describe(v)}" for k, v in kwargs.items())
    lines.append(f"  Keyword arguments: {{{kw}}}")
    return lines


class RestoredFunction:
    """A ``jt.function`` of a loaded saved model. A call binds its arguments as the
    saved function's parameters did, picks the saved trace they fit (TensorSpecs by
    dtype and shape, Python values by value) and runs it; no Python code of the original
    runs, and no new trace of the original can be made."""

    def __init__(self, name, signature, concretes):
        self._name = name
        self._binding = _Binding(signature)
        self._concretes = list(concretes)

    @property
    def concrete_functions(self) -> list:
        """The saved traces (``structured_input_signature``, ``structured_outputs``,
        ``graph``, ``function``)."""
        return list(self._concretes)

    def __call__(self, *args, **kwargs):
        if not self._concretes:
            raise ValueError(
                f"jt.saved_model: function {self._name!r} was saved before it was ever "
                "traced, and it has no input_signature, so the saved model holds no trace of "
                "it: call it once before saving, or give it an input_signature")
        args, kwargs = self._binding.bind(self._name, args, kwargs)
        for c in self._concretes:
            leaves = c.match(args, kwargs)
            if leaves is not None:
                return c.function(*leaves)
        lines = [f"jt.saved_model: no saved trace of {self._name!r} fits the call. Got:"]
        lines += _options(args, kwargs)
        lines.append(f" Expected these arguments to match one of the following "
                     f"{len(self._concretes)} option(s):")
        for k, c in enumerate(self._concretes):
            lines += ["", f"Option {k + 1}:"] + _options(c.args, c.kwargs)
        raise ValueError("\n".join(lines))

    def __repr__(self):
        return f"<restored jt.function {self._name} ({len(self._concretes)} traces)>"


class SignatureFunction:
    """A saved signature (``loaded.signatures["serving_default"]``): tensors in, by
    position or by their names as keywords; a dict of tensors out (``output_0``, ...
    unless the function returned a dict), as TF's signatures."""

    def __init__(self, key, concrete: RestoredConcrete, inputs, outputs):
        self.name = key
        self._concrete = concrete
        self._inputs = list(inputs)
        self._outputs = list(outputs)

    @property
    def structured_input_signature(self) -> tuple:
        return (), {n: TensorSpec(s.shape, s.dtype, n)
                    for n, s in zip(self._inputs, self._concrete.specs)}

    @property
    def structured_outputs(self) -> dict:
        flat = nest.flatten(self._concrete.structured_outputs)
        return {k: TensorSpec(s.shape, s.dtype, k) for k, s in zip(self._outputs, flat)}

    def __call__(self, *args, **kwargs):
        where = f"signature {self.name!r}"
        if len(args) > len(self._inputs):
            raise TypeError(f"{where} takes {len(self._inputs)} tensors ({self._inputs}), "
                            f"got {len(args)} positional arguments")
        given = dict(zip(self._inputs, args))
        for k, v in kwargs.items():
            if k not in self._inputs:
                raise TypeError(f"{where} has no input {k!r}; its inputs are {self._inputs}")
            if k in given:
                raise TypeError(f"{where}: input {k!r} given twice")
            given[k] = v
        missing = [k for k in self._inputs if k not in given]
        if missing:
            raise TypeError(f"{where}: missing input(s) {missing}")
        leaves = []
        for k, spec in zip(self._inputs, self._concrete.specs):
            t = _fit(spec, given[k])
            if t is None:
                raise TypeError(f"{where}: input {k!r} ({_describe(given[k])}) does not fit "
                                f"{TensorSpec(spec.shape, spec.dtype, k)}")
            leaves.append(t)
        flat = nest.flatten(self._concrete.function(*leaves))
        return dict(zip(self._outputs, flat))

    def __repr__(self):
        return f"<signature {self.name!r}: {self._inputs} -> {self._outputs}>"
