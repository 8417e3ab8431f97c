"""GradientTape: records ops into IR nodes and differentiates them (TF 2.x semantics)."""

from __future__ import annotations

import contextlib
import enum
import functools
import inspect
import warnings

import numpy as np

from . import _state, nest
from .compiler import backends
from .autodiff import _input_key, backward, backward_program, run_backward
from .errors import InvalidArgumentError, at, format_loc, user_frame
from .compiler.ir import Node, Opaque, OpDef, freeze_attrs
from .ops import elementwise as E
from .ops import shaping as S
from .ops.registry import defop
from .tensor import Tensor, Variable, apply, convert_to_tensor


class UnconnectedGradients(enum.Enum):
    """What ``gradient`` returns for a source the target does not depend on."""

    NONE = "none"
    ZERO = "zero"


_warned = {"int_watch": 0}
_RELEASED = (
    "A non-persistent GradientTape can only be used to compute one set of gradients "
    "(or jacobians)"
)


def _type_name(x) -> str:
    return type(x).__name__


class UsedTape:
    """What a non-persistent tape keeps after its gradient call freed the trace: which
    call used it, and for that call's targets, which sources got a gradient and why the
    others got None. Ids and strings only (``jt.debugging.explain_gradient`` reads it)."""

    __slots__ = ("call", "loc", "target_ids", "given", "none")

    def __init__(self, call, loc, target_ids=(), given=frozenset(), none=None):
        self.call = call
        self.loc = loc
        self.target_ids = tuple(target_ids)
        self.given = given
        self.none = none or {}


# Called by ``gradient`` before a non-persistent tape frees its trace, and when a
# gradient is None: ``fn(tape, targets, sources, grads)`` returns the UsedTape the tape
# keeps (or None for the plain one). ``jittape.debugging`` installs its explainer here
# at import (why each None, logged with JITTAPE_EXPLAIN_NONE=1); without it a used tape
# keeps only which call used it.
_after_gradient = None


def on_gradient(fn):
    """Install ``fn`` as the tape's after-gradient hook (see ``_after_gradient``)."""
    global _after_gradient
    _after_gradient = fn
    return fn


class GradientTape:
    """Record operations for automatic differentiation.

    Example::

        x = jt.Variable(3.0)
        with jt.GradientTape() as tape:
            y = x * x
        tape.gradient(y, x)  # 6.0
    """

    def __init__(self, persistent=False, watch_accessed_variables=True, backend=None):
        self._persistent = bool(persistent)
        self._backend = None if backend is None else backends.check_backend(backend)
        self._watch_accessed = bool(watch_accessed_variables)
        self._recording = False
        self._released = False
        self._warned_inside = False
        # what explains a None gradient after the trace is gone (ints, strings, no arrays)
        self._used = None  # UsedTape: which call freed the trace, and its Nones
        self._dropped: frozenset = frozenset()  # ids that were on the tape before reset()
        self._reset_loc = None
        self._clear()
        self._watched_vars: dict = {}  # creation order -> Variable

    def _clear(self):
        self._impure = False  # a custom gradient was recorded: its grad_fn runs eagerly
        # the trace's structure, kept while recording (autodiff.recorded_key keys the
        # backward program with it): value ids renumbered in order of appearance, one
        # item per node
        self._canon: dict = {}
        self._sig: list = []
        self._nodes: list = []
        self._values: dict = {}  # value id -> the recorded (snapshot) tensor
        self._on_tape: set = set()
        # For explaining gradients (jt.debugging.explain_gradient; a node's Node.loc
        # is its user line), no arrays:
        # ops run while recording that the trace lacks: (why, op name, input ids,
        # output ids, output types, (file, line)); why is "cut" (stop_gradient of a
        # recorded value), "int" (a recorded float value made into a non-float one) or
        # "off" (no recorded float input)
        self._others: list = []
        self._escapes: list = []  # (value id, how, (file, line)): .numpy() & co on it
        self._unwatched_reads: dict = {}  # read value id -> (variable id, name, line): unwatched
        self._watch_locs: dict = {}  # value id -> ((file, line), len(_nodes) at watch)
        self._spans: list = []  # [first id, first id after] of each recording stretch
        self._entered = None  # (file, line) of the first `with tape:`

    # -- context -----------------------------------------------------------
    def __enter__(self):
        if self._recording:
            raise ValueError(
                "Tape is still recording, This can happen if you try to re-enter an "
                "already-active tape."
            )
        self._push()
        return self

    def __exit__(self, *exc):
        if self._recording:
            self._pop()

    def _push(self):
        _state.local.tapes.append(self)
        self._recording = True
        self._spans.append([_state.new_id(), None])  # later values have larger ids
        if self._entered is None:
            self._entered = user_frame(2)

    def _pop(self):
        tapes = _state.local.tapes
        for k in range(len(tapes) - 1, -1, -1):
            if tapes[k] is self:
                del tapes[k]
                break
        self._recording = False
        if self._spans and self._spans[-1][1] is None:
            self._spans[-1][1] = _state.new_id()

    @contextlib.contextmanager
    def stop_recording(self):
        """Ops run inside this context are not recorded; recording resumes after it."""
        if self._released and not self._persistent:
            raise RuntimeError(
                "Cannot stop recording on a GradientTape that was released: " + _RELEASED
            )
        if not self._recording:
            raise ValueError("Tape is not recording.")
        self._pop()
        try:
            yield
        finally:
            self._push()

    def reset(self):
        """Drop everything recorded so far (only while recording)."""
        if not self._recording:
            raise ValueError(
                "Tape is not recording. reset() drops what the tape recorded so far and "
                "works only inside its `with tape:` block; outside it, use a new "
                "GradientTape" + at(user_frame(2)))
        dropped = set(self._on_tape)
        dropped.update(o for n in self._nodes for o in n.outputs)
        entered = self._entered
        self._clear()
        self._dropped = frozenset(dropped)
        self._reset_loc = user_frame(2)
        self._entered = entered
        self._spans = [[_state.new_id(), None]]
        self._watched_vars = {}
        self._released = False
        self._used = None

    # -- watching ----------------------------------------------------------
    def watch(self, tensor):
        """Record ops on ``tensor`` (a tensor, variable, or nested structure of them)."""
        loc = None
        for t in nest.flatten(tensor):
            if loc is None:
                loc = user_frame(2)
            if isinstance(t, (Variable, Tensor)):
                self._watch_locs[t._id] = (loc, len(self._nodes))
            if isinstance(t, Variable):
                self._on_tape.add(t._id)
                self._watched_vars[t._uid] = t
                continue
            if not isinstance(t, Tensor):
                shape = f" of shape {list(np.shape(t))}" if isinstance(t, np.ndarray) else ""
                raise ValueError(
                    f"watch: passed in object of type {_type_name(t)!r}{shape}, not jt.Tensor "
                    "or jt.Variable. Wrap numpy arrays and Python numbers in jt.constant(...) "
                    "and watch that tensor (then compute with it, not with the array)"
                    + at(loc)
                )
            if not t._type.is_float and _warned["int_watch"] < 5:
                _warned["int_watch"] += 1
                warnings.warn(
                    "The dtype of the watched tensor must be floating (e.g. float32), "
                    f"got {t._type.dtype} (shape {list(t._type.shape)}): gradients with "
                    "respect to it will be None. Watch a float tensor instead, e.g. "
                    "x = jt.cast(x, jt.float32) before tape.watch(x)" + at(loc),
                    UserWarning,
                    stacklevel=2,
                )
            self._on_tape.add(t._id)

    def watched_variables(self) -> tuple:
        """Variables this tape watched, in creation order."""
        return tuple(self._watched_vars[k] for k in sorted(self._watched_vars))

    # -- recording (called by dispatch) ------------------------------------
    def _on_variable_read(self, v: Variable, t: Tensor):
        explicit = v._id in self._on_tape
        if not (explicit or (self._watch_accessed and v.trainable)):
            self._unwatched_reads[t._id] = (v._id, v._label, user_frame(2))
            return
        if not explicit:
            self._watched_vars[v._uid] = v
            self._on_tape.add(v._id)
        if t._id in self._on_tape or not t._type.is_float:
            return
        self._add(E.read_op, (), [v._id], [t], ())

    def _record(self, op: OpDef, attrs: dict, ins, outs):
        on = self._on_tape
        for t in ins:
            if t._id in on and t._type.is_float:
                break
        else:
            self._other("off", op, ins, outs)
            return
        if op.cut:
            self._other("cut", op, ins, outs)
            return
        if not any(o._type.is_float for o in outs):
            self._other("int", op, ins, outs)
            return
        self._add(op, tuple(attrs.items()), [t._id for t in ins], outs, ins)

    def _other(self, why, op, ins, outs):
        """Note an op the trace does not record (ids, types and the line: no values)."""
        self._others.append((why, op.name, tuple(t._id for t in ins),
                             tuple(o._id for o in outs), tuple(o._type for o in outs),
                             user_frame(2)))

    def _on_escape(self, t, how):
        """A recorded value left jittape (``.numpy()``, ``np.asarray``, ``float()``)."""
        if t._id in self._on_tape:
            self._escapes.append((t._id, how, user_frame(2)))

    def _add(self, op, attrs, in_ids, outs, ins):
        if not op.pure and not op.effect:  # a collective (effect) has a fixed VJP rule
            self._impure = True
        types = tuple(o._type for o in outs)
        out_ids = tuple(o._id for o in outs)
        in_ids = tuple(in_ids)
        loc = user_frame(2)
        self._nodes.append(Node(op, in_ids, out_ids, attrs, types, loc))  # loc: (file, line)
        canon = self._canon
        for v in in_ids:
            if v not in canon:
                canon[v] = len(canon)
        for v in out_ids:
            canon[v] = len(canon)
        in_keys = tuple(map(_input_key, ins)) if ins else (None,) * len(in_ids)
        self._sig.append((op.name, attrs, types, in_keys, tuple(canon[v] for v in in_ids),
                          tuple(canon[v] for v in out_ids)))
        vals = self._values
        for t in ins:
            vals[t._id] = t
        for o in outs:
            vals[o._id] = o
            if o._type.is_float:
                self._on_tape.add(o._id)

    # -- gradients -----------------------------------------------------------
    def _check_usable(self, what="gradient"):
        if self._released:
            used = self._used
            first = (f" (the first was {used.call} at {format_loc(used.loc)})"
                     if used is not None and used.loc else "")
            raise RuntimeError(
                f"{_RELEASED}{first}. This {what}() call needs a tape that keeps its "
                "trace: create it with jt.GradientTape(persistent=True) (and `del tape` "
                "when done), or record the computation again under a new tape"
                + at(user_frame(3)))

    def _prepare(self):
        """Stop a non-persistent tape that is still recording; warn for a persistent one."""
        if self._recording:
            if not self._persistent:
                self._pop()
            elif not self._warned_inside:
                self._warned_inside = True
                warnings.warn(
                    "Calling GradientTape.gradient on a persistent tape inside its context is "
                    "significantly less efficient than calling it outside the context (it "
                    "causes the gradient ops to be recorded on the tape, leading to increased "
                    "CPU and memory usage). Only call GradientTape.gradient inside the context "
                    "if you actually want to trace the gradient in order to compute higher "
                    "order derivatives.",
                    UserWarning,
                    stacklevel=3,
                )

    def _release(self, call="gradient", used=None):
        if not self._persistent:
            if used is None:
                used = UsedTape(call, user_frame(3))
            self._clear()
            self._dropped = frozenset()
            self._used = used
            self._released = True

    def gradient(
        self,
        target,
        sources,
        output_gradients=None,
        unconnected_gradients=UnconnectedGradients.NONE,
    ):
        """Gradients of ``target`` (summed over its elements, and over a list of
        targets) with respect to ``sources``, in the nesting of ``sources``.

        ``output_gradients`` weights each target. Sources the target does not
        depend on give ``None`` (zeros with ``unconnected_gradients="zero"``).
        """
        self._check_usable("gradient")
        if target is None:
            raise TypeError("Argument `target` should be a list or nested structure of Tensors, "
                            "Variables or CompositeTensors to be differentiated, but received "
                            "None.")
        unconnected = _unconnected(unconnected_gradients)
        self._prepare()
        targets = [_as_target(t) for t in nest.flatten(target)]
        if output_gradients is None:
            seeds = [None] * len(targets)
        else:
            og = nest.flatten(output_gradients)
            if len(og) != len(targets):
                raise ValueError(
                    f"output_gradients has {len(og)} entries for {len(targets)} targets"
                )
            seeds = [None if s is None else _seed(s, t) for s, t in zip(og, targets)]
        flat_sources = nest.flatten(sources)
        ids = self._watched([_source_id(s, k) for k, s in enumerate(flat_sources)], targets)
        if self._dropped:
            self._warn_dropped(targets)
        used = None
        try:
            grads = self._compute(targets, seeds, ids)
            hook = _after_gradient
            if hook is not None and (not self._persistent or any(g is None for g in grads)):
                # say why a gradient is None now: a non-persistent tape is about to free
                # its trace (and JITTAPE_EXPLAIN_NONE=1 logs it)
                used = hook(self, targets, flat_sources, grads)
        finally:
            self._release("gradient", used)
        out = []
        for s, g in zip(flat_sources, grads):
            if g is None and unconnected is UnconnectedGradients.ZERO:
                g = E.zeros(s.shape, s.dtype)
            out.append(g)
        return nest.pack_sequence_as(sources, out)

    def _watched(self, ids, targets):
        """None for a source this tape does not watch (an unwatched constant read by a
        recorded op has no gradient, as in TF), unless it is a target itself."""
        on = self._on_tape
        tids = {t._id for t in targets}
        return [i if i is None or i in on or i in tids else None for i in ids]

    def _warn_dropped(self, targets):
        for t in targets:
            if t._id in self._dropped and t._id not in self._on_tape:
                warnings.warn(
                    f"GradientTape.gradient: the target (shape {list(t._type.shape)}) was "
                    "recorded before tape.reset() at "
                    f"{format_loc(self._reset_loc)}, which dropped it: its gradients are "
                    "None. Compute the target again after reset()",
                    UserWarning,
                    stacklevel=3,
                )
                return

    def _eager_mode(self, targets) -> bool:
        # another tape (or this persistent one) is recording: run VJPs as ops it records
        if _state.local.tapes or _state.local.tracers:
            return True
        # a user's grad_fn may use concrete values (.numpy()), as it can in TF eager
        return self._impure or any(t._value is None for t in targets)

    def _compute(self, targets, seeds, ids):
        """Gradient tensors (or None) for source ids; ``None`` ids are not differentiable."""
        want = [i for i in ids if i is not None]
        if not want:
            return [None] * len(ids)
        if self._eager_mode(targets):
            seed_map = {}
            for t, s in zip(targets, seeds):
                seed = E.ones_like(t) if s is None else convert_to_tensor(s, t.dtype)
                prev = seed_map.get(t._id)
                seed_map[t._id] = seed if prev is None else E.add(prev, seed)
            res = backward(list(self._nodes), seed_map, want, self._values.get)
        else:
            # no tape records the VJPs: a tensor seed is only its value; autodiff builds
            # (or finds cached) the backward program and runs it
            seeds = [s._value if isinstance(s, Tensor) else s for s in seeds]
            res = run_backward(self._nodes, self._values, targets, seeds, want,
                               backend=self._backend, trace=self._trace())
        return [None if i is None else res.get(i) for i in ids]

    def _trace(self):
        """What the tape kept while recording that keys its backward program (None
        after a custom gradient: its grad_fn is a closure no key can hold)."""
        return None if self._impure else (self._sig, self._canon)

    def jacobian(
        self,
        target,
        sources,
        unconnected_gradients=UnconnectedGradients.NONE,
        parallel_iterations=None,
        experimental_use_pfor=True,
    ):
        """d target / d source for every element: shape ``target.shape + source.shape``."""
        self._check_usable("jacobian")
        unconnected = _unconnected(unconnected_gradients)
        self._prepare()
        t = _as_target(target)
        flat_sources = nest.flatten(sources)
        ids = self._watched([_source_id(s) for s in flat_sources], [t])
        n = int(np.prod(t._type.shape))
        try:
            if n == 0:  # an empty target: an empty jacobian, nothing to differentiate
                rows = [None if i is None else E.zeros((0,) + tuple(s.shape), s.dtype)
                        for i, s in zip(ids, flat_sources)]
            else:
                rows = self._rows(t, n, ids, lambda j: _unit(t._type, j))
        finally:
            self._release("jacobian")
        out = []
        for s, col in zip(flat_sources, rows):
            shape = tuple(t._type.shape) + tuple(s.shape)
            if col is None:
                out.append(E.zeros(shape, s.dtype) if unconnected is UnconnectedGradients.ZERO
                           else None)
            else:
                out.append(S.reshape(col, shape))
        return nest.pack_sequence_as(sources, out)

    def batch_jacobian(
        self,
        target,
        source,
        unconnected_gradients=UnconnectedGradients.NONE,
        parallel_iterations=None,
        experimental_use_pfor=True,
    ):
        """Per-example jacobian: ``[b, y...] x [b, x...] -> [b, y..., x...]``, assuming
        example i of the target depends only on example i of the source."""
        self._check_usable("batch_jacobian")
        _unconnected(unconnected_gradients)
        t = _as_target(target)
        ts, ss = tuple(t._type.shape), tuple(source.shape)
        if len(ts) < 2:
            raise ValueError(f"Need first dimension of target to be known and target must have "
                             f"rank at least 2, got shape {list(ts)}")
        if len(ss) < 2:
            raise ValueError(f"Need first dimension of source to be known and source must have "
                             f"rank at least 2, got shape {list(ss)}")
        if ts[0] != ss[0]:
            raise ValueError(
                f"Need first dimension of target shape ({list(ts)}) and source shape "
                f"({list(ss)}) to match."
            )
        self._prepare()
        b, ny = ts[0], int(np.prod(ts[1:]))
        ids = self._watched([_source_id(source)], [t])

        def seed(j):
            s = np.zeros((b, ny), t._type.dtype)
            s[:, j] = 1
            return s.reshape(ts)

        try:
            (col,) = self._rows(t, ny, ids, seed, stack_axis=1) if ny and b else (None,)
        finally:
            self._release("batch_jacobian")
        shape = ts + ss[1:]
        if col is None:  # batch_jacobian gives zeros even with "none", as TF does
            return E.zeros(shape, source.dtype)
        return S.reshape(col, shape)

    def _rows(self, t, n, ids, seed_fn, stack_axis=0):
        """For each source, the stack of gradients for seeds ``seed_fn(0..n-1)``."""
        want = [i for i in ids if i is not None]
        if not want:
            return [None] * len(ids)
        if self._eager_mode([t]):
            per = [self._compute([t], [seed_fn(j)], ids) for j in range(n)]
            # connectivity does not depend on the seed: a source is None in every row or none
            return [None if per[0][k] is None else S.stack([p[k] for p in per], axis=stack_axis)
                    for k in range(len(ids))]
        # one backward program, run once per seed
        prog = backward_program(self._nodes, self._values, [t], [seed_fn(0)], want,
                                backend=self._backend)
        runs = [prog.outputs(seed_fn(j)) for j in range(n)]
        cols = []
        for sid in ids:
            if sid is None:
                cols.append(None)
                continue
            w = want.index(sid)
            if prog.computed[w] is None:
                cols.append(None if w not in prog.consts
                            else S.stack([prog.consts[w]] * n, stack_axis))
                continue
            arr = np.stack([r[prog.computed[w]] for r in runs], axis=stack_axis)
            cols.append(Tensor(arr, _own=True))
        return cols


def _unit(ty, j):
    s = np.zeros(int(np.prod(ty.shape)), ty.dtype)
    s[j] = 1
    return s.reshape(ty.shape)


def _unconnected(value) -> UnconnectedGradients:
    try:
        return UnconnectedGradients(value.value if isinstance(value, UnconnectedGradients)
                                    else value)
    except ValueError:
        raise ValueError(f"Unknown value for unconnected_gradients: {value!r}") from None


def _as_target(t):
    if isinstance(t, Variable):
        # a variable as target: its current value, identified with the variable itself
        from .tensor import function_tracer

        tracer = function_tracer()
        if tracer is not None:  # inside jt.function the value is symbolic
            cur = tracer.read_variable(t)
            return Tensor(_type=cur._type, _tracer=tracer, _id=t._id)
        return Tensor(t._value, _id=t._id)
    if not isinstance(t, Tensor):
        raise TypeError(
            f"gradient target must be a Tensor or Variable, got {_type_name(t)}"
        )
    return t


def _seed(s, t: Tensor):
    """An ``output_gradients`` entry: a tensor stays a tensor (an outer tape that records
    the VJP ops differentiates through it, as in TF); other values become arrays."""
    if isinstance(s, Variable):
        s = s.read_value()
    if isinstance(s, Tensor):
        if s._value is None:
            return s
        if tuple(s._type.shape) == tuple(t._type.shape):
            if s._type.dtype != t._type.dtype and s._type.is_float and t._type.is_float:
                s = E.cast(s, t._type.dtype)  # as a list or an array would be
            if s._type.dtype == t._type.dtype:
                return s
    a = np.asarray(s.numpy() if isinstance(s, Tensor) else s, dtype=t._type.dtype)
    try:
        return np.broadcast_to(a, t._type.shape)
    except ValueError:
        raise InvalidArgumentError(
            f"gradient: an output_gradients entry of shape {list(a.shape)} does not fit its "
            f"target of shape {list(t._type.shape)}"
        ) from None


def _source_id(s, k=0):
    """The value id of a gradient source, or None for an integer one (which warns)."""
    if isinstance(s, (Tensor, Variable)):
        if not s.dtype.is_floating:
            warnings.warn(
                "The dtype of the source tensor must be floating (e.g. jt.float32) when "
                f"calling GradientTape.gradient, got {s.dtype.name}: its gradient is None. "
                "Differentiate with respect to a float tensor (cast before the computation "
                "and watch the float tensor)",
                UserWarning,
                stacklevel=4,
            )
            return None
        return s._id
    what = _type_name(s)
    if isinstance(s, (np.ndarray, np.generic)):
        what += f" of shape {list(np.shape(s))} and dtype {np.asarray(s).dtype.name}"
    raise TypeError(
        f"gradient: source {k} is a {what}, not a jt.Tensor or jt.Variable. A gradient "
        "is defined only for a tensor the tape saw used: make it x = jt.constant(value) "
        "(or a jt.Variable), tape.watch(x) inside the `with tape:` block, compute the "
        "target from x, then call tape.gradient(target, x)" + at(user_frame(3))
    )


# ---------------------------------------------------------------------------
# custom_gradient


def _custom_infer(types, **attrs):
    return attrs["out_types"]


def _custom_vjp(g, out, *inputs, grad_fn, n_args, n_outs, variables, out_types):
    fn = grad_fn.value
    gs = tuple(g) if n_outs > 1 else (g,)
    vars_ = variables.value
    if vars_:
        res = fn(*gs, variables=list(vars_))
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise ValueError(
                "custom_gradient: with variables, grad_fn must return (input_grads, "
                "variable_grads)"
            )
        in_grads, var_grads = res
        in_grads = list(in_grads) if isinstance(in_grads, (list, tuple)) else [in_grads]
        var_grads = list(var_grads)
        if len(var_grads) != len(vars_):
            raise ValueError(
                f"custom_gradient: grad_fn returned {len(var_grads)} variable gradients for "
                f"{len(vars_)} variables"
            )
    else:
        res = fn(*gs)
        in_grads = list(res) if isinstance(res, (list, tuple)) else [res]
        var_grads = []
    if len(in_grads) != n_args:
        raise ValueError(
            f"custom_gradient function expected to return {n_args} gradients, but returned "
            f"{len(in_grads)} instead."
        )
    return tuple(
        None if gi is None else convert_to_tensor(gi) for gi in list(in_grads) + var_grads
    )


custom_gradient_op = defop(
    "custom_gradient", inputs=None, kind="other", forward=None, infer=_custom_infer,
    interpret_only="a tape record of a function with a gradient of its own: graphs hold "
    "the function's ops and its gradient's, never this node",
    vjp=_custom_vjp, nout=None, pure=False, doc="a function with a user-defined gradient",
)


def _accepts_variables(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "variables" or p.kind is p.VAR_KEYWORD for p in params)


def custom_gradient(f=None):
    """Decorator: ``f(*x)`` returns ``(y, grad_fn)``; ``grad_fn(*dy)`` gives the gradients
    of the inputs (and, given ``variables=``, of the variables ``f`` read).

    Example::

        @jt.custom_gradient
        def clip_grad(x):
            def grad(dy):
                return jt.clip_by_value(dy, -1.0, 1.0)
            return jt.identity(x), grad
    """
    if f is None:
        return custom_gradient

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        reads: list = []
        local = _state.local
        local.variable_reads.append(reads)
        try:
            with _paused():  # f's own ops are not recorded: the op is f as a whole
                result, grad_fn = f(*args, **kwargs)
        finally:
            local.variable_reads.pop()
        arg_vars = [a for a in args if isinstance(a, Variable)]
        variables = []
        for v in reads:
            if not any(v is w for w in arg_vars) and not any(v is w for w in variables):
                variables.append(v)
        if variables and not _accepts_variables(grad_fn):
            raise TypeError(
                "If using @custom_gradient with a function that uses variables, then grad_fn "
                "must accept keyword argument 'variables': def grad_fn(*dy, variables=None) "
                "returning (input_grads, variable_grads)"
            )
        for reads_outer in local.variable_reads:
            reads_outer.extend(variables)
        # every positional argument is an input, as in TF: grad_fn returns one gradient each
        ins = [a.read_value() if isinstance(a, Variable) else convert_to_tensor(a) for a in args]
        ins += [v.read_value() for v in variables]
        flat = nest.flatten(result)
        outs = []
        for r in flat:
            r = convert_to_tensor(r)
            if r._value is not None:
                outs.append(Tensor(r._value))  # a fresh id: the op's output, not its input
            else:
                with _paused():
                    outs.append(apply(E.identity_op, r))
        n_args = len(ins) - len(variables)
        attrs = dict(freeze_attrs({
            "grad_fn": Opaque(grad_fn),
            "n_args": n_args,
            "n_outs": len(outs),
            "variables": Opaque(tuple(variables), "variables"),
            "out_types": tuple(o._type for o in outs),
        }))
        for tape in local.tapes:
            tape._record(custom_gradient_op, attrs, ins, outs)
        return nest.pack_sequence_as(result, outs)

    return wrapper


@contextlib.contextmanager
def _paused():
    local = _state.local
    saved = local.tapes
    local.tapes = []
    try:
        yield
    finally:
        local.tapes = saved

