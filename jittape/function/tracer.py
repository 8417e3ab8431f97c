"""Tracing a Python function into the IR: the :class:`FunctionTracer` of one
``jt.function`` trace (it owns the variables' values: a read is a graph input, an assign
makes the value later reads see), and :func:`trace_function`, which calls the Python
function with symbolic tensors and collects its outputs, writes and prints."""

from __future__ import annotations

import collections
import contextlib
import weakref

import numpy as np

from .. import _state, nest
from ..compiler.dims import new_symbol, reset_names
from ..errors import InvalidArgumentError, user_location
from ..compiler.ir import Type, dtype_name
from ..tensor import Tensor, Tracer, Variable, convert_to_tensor
from .keys import _arg_name, _symbolize
from .spec import _spec_of


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
                    f"variable {v._label!r} of shape {list(v.shape)}")
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
        from ..compiler.backends import interpret
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
    names = {v._uid: v._label for v in created}
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


def _structure_of(result, n: int):
    """The nesting of a function's result with placeholder leaves: what the calls pack
    their outputs into (holding no tensor, variable or object of the trace)."""
    if isinstance(result, (list, tuple, dict)):
        return nest.pack_sequence_as(result, [0] * n)
    return 0


def check_arguments_unmodified(fn_name, fn, b, before, sym_args, sym_kwargs) -> None:
    """tf.function: a function must not modify its Python list and dict arguments
    (the trace works on copies: the changes would silently be lost). ``fn_name``: the
    jt.function's, ``fn``: its Python function, ``b``: its binding."""
    snap_args, snap_kwargs = before
    modified = [_arg_name(j, b.params, b.varargs)
                for j, (s, a) in enumerate(zip(snap_args, sym_args)) if not _same(s, a)]
    modified += [k for k, s in snap_kwargs.items() if not _same(s, sym_kwargs.get(k))]
    if modified:
        params = b.sig if b.sig is not None else "(...)"
        short = getattr(fn, "__name__", None) or getattr(
            getattr(fn, "func", None), "__name__", fn_name)
        raise ValueError(
            f"jt.function {fn_name!r}: {short}{params} should not modify its Python input "
            "arguments. Check if it modifies any lists or dicts passed as arguments. "
            "Modifying a copy is allowed. The following parameter(s) were modified: "
            + ", ".join(modified))


# -- one trace


class Traced(collections.namedtuple(
        "Traced", "tracer graph input_structure out_plan out_structure writes prints "
        "leaf_types symbols_at")):
    """What one trace of a Python function made: its tracer, the graph as traced (the
    outputs, then the variables it assigned, then the values of its jt.print calls),
    and how a call's outputs, writes and prints come out of the graph's outputs."""

    __slots__ = ()


def trace_function(fn, fn_name, binding, args, kwargs, described, mask, first, cause,
                   diff) -> Traced:
    """Trace ``fn``, the Python function of jt.function ``fn_name``, with a symbolic tensor
    for each tensor or array in the canonical ``args`` and ``kwargs``. ``described``:
    the arguments' described keys (the tensor leaves' paths name the placeholders);
    ``mask`` (argument leaf -> dims) names the sizes traced as symbols; ``first``: the
    Function's first trace, else ``cause`` and ``diff`` say why it traces again."""
    leaf_types = []
    tracer = FunctionTracer(fn_name)
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
    input_structure = tuple(  # the placeholders' types: a symbolic dim is None
        _symbolize(a, lambda ty: _spec_of(ty, next(names, None)))
        for a in (sym_args, sym_kwargs))
    before = ([_nest(a) for a in sym_args], {k: _nest(v) for k, v in sym_kwargs.items()})
    with tracer:
        try:
            result = fn(*sym_args, **sym_kwargs)
        except InvalidArgumentError as e:
            if not first:  # it traced fine before: say what changed since
                e.args = (f"{e.args[0] if e.args else ''} [while tracing {fn_name!r} "
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
    check_arguments_unmodified(fn_name, fn, binding, before, sym_args, sym_kwargs)
    out_structure = _structure_of(result, len(flat))
    result = flat = leaf = before = None  # noqa: F841 - the checks below need them gone
    if tracer.created_vars and not first:
        names = [v._label for v in tracer.created_vars]
        raise ValueError(
            f"jt.function {fn_name!r} created variables {names} on a trace that was "
            f"not its first ({cause}). A jt.function only supports variables created on "
            "its first call (tf.function likewise only supports singleton Variables "
            "created on the first call): create them outside the function, or make "
            "sure the first call creates them all")
    if first:
        per_call = _per_call_variables(tracer)
        if per_call:
            raise ValueError(
                f"jt.function {fn_name!r} created variables {per_call} on its first "
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
    return Traced(tracer, traced_graph, input_structure, out_plan, out_structure, writes, prints,
                  leaf_types, symbols_at)
