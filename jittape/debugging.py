"""Numerics checks (``check_numerics`` on one tensor, or on every op's output), and
``explain_gradient``: why a gradient is None."""

from __future__ import annotations

from .ops.debugging import check_numerics  # noqa: F401
from .tape import UsedTape, _as_target, on_gradient  # UsedTape lived here: still importable
from .tensor import _config


def enable_check_numerics():
    """Raise at the first op whose float output holds NaN or Inf, naming the op and line."""
    _config["check_numerics"] = True


def disable_check_numerics():
    _config["check_numerics"] = False


# ---------------------------------------------------------------------------
# Why is my gradient None?
#
# A tape notes, without keeping any value, what it needs to answer: each recorded
# node's user line (``Node.loc``), the ops it saw but did not record and why
# (``tape._others``: stop_gradient, a float value made non-float, no recorded input),
# values that left jittape through ``.numpy()`` and the like (``tape._escapes``),
# reads of variables it does not watch, where each value was watched, and the value
# ids at which it started and stopped recording (ids grow with time).

CAUSES = {
    "connected": "the gradient is not None: the target depends on the source through "
                 "recorded ops",
    "not_watched": "the source is not watched by the tape",
    "not_trainable": "the source is a Variable(trainable=False): tapes do not watch it",
    "watched_late": "the source was watched only after an op had used it",
    "stop_gradient": "the path from the source to the target goes through stop_gradient",
    "integer": "the path goes through a non-float (integer or bool) value",
    "no_gradient": "the path goes through an op that has no gradient",
    "integer_source": "the source has an integer or bool dtype",
    "outside_tape": "the value left the tape (.numpy(), np.asarray, float()) or entered "
                    "it as a constant: it has no history",
    "before_recording": "the computation ran before the tape started recording",
    "not_recording": "the computation ran while the tape was not recording "
                     "(stop_recording, or after the with block)",
    "reset": "the target was recorded before tape.reset(), which dropped it",
    "tape_used": "the tape was already used (non-persistent): its trace is gone",
    "vjp_none": "the tape connects them, but a gradient rule (a custom_gradient's "
                "grad_fn) gave None",
    "unconnected": "the target does not depend on the source",
    "not_a_tensor": "the source (or target) is not a jt.Tensor or jt.Variable",
}


def _fmt(loc) -> str | None:
    if loc is None:
        return None
    return f"{loc[0]}:{loc[1]}" if isinstance(loc, tuple) else str(loc)


def _short(loc) -> str:
    s = _fmt(loc)
    if s is None:
        return "?"
    import os

    return os.path.basename(s)


class GradientExplanation:
    """Why ``tape.gradient(target, source)`` is (or is not) ``None``.

    ``cause`` is a key of :data:`CAUSES`; ``op`` and ``loc`` name the op and the user's
    ``file:line`` the cause points at (when there is one); ``path`` lists the
    ``(op, file:line)`` steps from the source to the target when they are connected;
    ``str()`` gives the whole message.
    """

    __slots__ = ("cause", "message", "op", "loc", "path", "earlier")

    def __init__(self, cause, message, op=None, loc=None, path=(), earlier=None):
        assert cause in CAUSES, cause
        self.cause = cause
        self.message = message
        self.op = op
        self.loc = _fmt(loc)
        self.path = tuple(path)
        self.earlier = earlier  # for "tape_used": what was explained at that call

    @property
    def connected(self) -> bool:
        return self.cause == "connected"

    def __str__(self):
        return self.message

    def __repr__(self):
        return f"<GradientExplanation {self.cause}: {self.message}>"


def _at(loc) -> str:
    loc = _fmt(loc)
    return f" at {loc}" if loc else ""


def _describe(src) -> str:
    from .tensor import Variable

    ty = f"{src.dtype.name}{list(src.shape)}"
    if isinstance(src, Variable):
        return f"variable {src._label!r} ({ty})"
    return f"the source tensor ({ty})"


class _Trace:
    """The tape's record as a graph over value ids: recorded nodes and the ops it saw
    but did not record. Holds ids, op names, types and lines, never values."""

    def __init__(self, tape):
        recs = []  # (kind, op name, input ids, output ids, output types, loc)
        for n in tape._nodes:
            kind = "rec" if n.op.differentiable else "nograd"
            recs.append((kind, n.op.name, n.inputs, n.outputs, n.types, n.loc))
        recs.extend(tape._others)
        for tid, (vid, _name, loc) in tape._unwatched_reads.items():
            recs.append(("unwatched", "read", (vid,), (tid,), (), loc))
        self.recs = recs
        self.producer: dict = {}
        self.types: dict = {}
        self.consumers: dict = {}
        for k, r in enumerate(recs):
            for o, ty in zip(r[3], r[4]):
                self.producer.setdefault(o, k)
                self.types[o] = ty
            for o in r[3][len(r[4]):]:
                self.producer.setdefault(o, k)
            for i in r[2]:
                self.consumers.setdefault(i, []).append(k)

    def cone(self, start, kinds=None):
        """Values the targets ``start`` depend on (through records of ``kinds``, all by
        default), and for each a (record, output) one step nearer a target."""
        seen, parent = set(), {}
        stack = list(start)
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if kinds is not None:
                ty = self.types.get(v)
                if ty is not None and not ty.is_float:
                    continue  # no gradient flows through a non-float value
            k = self.producer.get(v)
            if k is None or (kinds is not None and self.recs[k][0] not in kinds):
                continue
            for i in self.recs[k][2]:
                if i not in seen:
                    parent.setdefault(i, (k, v))
                    stack.append(i)
        return seen, parent

    def forward(self, sid, kinds=None) -> set:
        """Values computed from ``sid`` (through records of ``kinds``)."""
        seen, stack = set(), [sid]
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if kinds is not None and v != sid:
                ty = self.types.get(v)
                if ty is not None and not ty.is_float:
                    continue
            for k in self.consumers.get(v, ()):
                if kinds is None or self.recs[k][0] in kinds:
                    stack.extend(self.recs[k][3])
        return seen

    def path(self, sid, parent, tids) -> list:
        steps, v, guard = [], sid, 0
        while v not in tids and v in parent and guard <= len(self.recs):
            k, v = parent[v]
            steps.append(k)
            guard += 1
        return steps

    def step(self, k) -> tuple:
        r = self.recs[k]
        return (r[1], _fmt(r[5]))

    def first_use(self, vid, kinds=None):
        """(op, loc) of the first op that read ``vid``, or (None, None)."""
        ks = [k for k in self.consumers.get(vid, ()) if kinds is None or self.recs[k][0] in kinds]
        if not ks:
            return None, None
        k = min(ks, key=lambda j: min(self.recs[j][3], default=0))
        return self.recs[k][1], self.recs[k][5]

    def show(self, steps, limit=8) -> str:
        parts = [f"{self.recs[k][1]}@{_short(self.recs[k][5])}" for k in steps]
        if len(parts) > limit:
            parts = parts[:3] + [f"... ({len(parts) - 6} more)"] + parts[-3:]
        return " -> ".join(parts)


def _span_of(tape, vid):
    """'before' (before the tape first recorded), 'gap' (while it was not recording),
    'during' or None (no recording yet)."""
    spans = tape._spans
    if not spans:
        return None
    if vid < spans[0][0]:
        return "before"
    for a, b in spans:
        if a <= vid and (b is None or vid < b):
            return "during"
    return "gap"


class _Explainer:
    """Explains gradients of ``targets`` for any number of sources (one analysis)."""

    def __init__(self, tape, targets):
        self.tape = tape
        self.targets = targets
        self.tids = {t._id for t in targets}
        self.trace = _Trace(tape)
        self._real = None
        self._all = None

    def real(self):
        if self._real is None:
            self._real = self.trace.cone(self.tids, kinds={"rec"})
        return self._real

    def all(self):
        if self._all is None:
            self._all = self.trace.cone(self.tids)
        return self._all

    def explain(self, src) -> GradientExplanation:
        from .tensor import Tensor, Variable

        tape, tr = self.tape, self.trace
        if not isinstance(src, (Tensor, Variable)):
            return GradientExplanation(
                "not_a_tensor",
                f"The source is a {type(src).__name__}, not a jt.Tensor or jt.Variable: a "
                "gradient is defined only for a tensor the tape watched. Make it "
                "x = jt.constant(value), tape.watch(x) and compute the target from x.")
        desc = _describe(src)
        sid = src._id
        if not src.dtype.is_floating:
            op, loc = tr.first_use(sid)
            used = f" ({op}{_at(loc)} used it)" if op else ""
            return GradientExplanation(
                "integer_source",
                f"The gradient with respect to {desc} is None: its dtype is "
                f"{src.dtype.name}{used}, and only float tensors have gradients. Cast to a "
                "float dtype before the computation and watch the float tensor.",
                op=op, loc=loc)
        if sid in self.tids:
            return GradientExplanation(
                "connected", f"The gradient is not None: the target is {desc} itself "
                "(its gradient is ones).")
        if sid not in tape._on_tape:
            return self._not_on_tape(src, desc)
        seen, parent = self.real()
        if sid in seen:
            steps = tr.path(sid, parent, self.tids)
            first = tr.recs[steps[0]] if steps else None
            return GradientExplanation(
                "connected",
                f"The gradient is not None: the target depends on {desc}, connected "
                f"through: {tr.show(steps)}",
                op=first and first[1], loc=first and first[5],
                path=[tr.step(k) for k in steps])
        return self._cut(src, desc) or self._apart(src, desc)

    # -- the source is not on the tape ------------------------------------------------
    def _not_on_tape(self, src, desc):
        from .tensor import Variable

        tape, sid = self.tape, src._id
        if isinstance(src, Variable):
            op, loc = self.trace.first_use(sid)  # an unwatched read
            read = f" (read{_at(loc)})" if loc else ""
            if not src.trainable:
                return GradientExplanation(
                    "not_trainable",
                    f"The gradient with respect to {desc} is None: it was created with "
                    f"trainable=False, and tapes do not watch such a variable when it is "
                    f"read{read}. Call tape.watch(v) inside the with block, before using it, "
                    "to differentiate with respect to it.", op=op, loc=loc)
            if not tape._watch_accessed:
                return GradientExplanation(
                    "not_watched",
                    f"The gradient with respect to {desc} is None: the tape was created "
                    f"with watch_accessed_variables=False and the variable{read} was not "
                    "watched. Call tape.watch(v) inside the with block, before using it.",
                    op=op, loc=loc)
            if any(_span_of(tape, t._id) == "gap" for t in self.targets):
                return GradientExplanation(
                    "not_recording",
                    f"The gradient with respect to {desc} is None: the variable was not read "
                    "while the tape was recording; the target was computed while it was "
                    "not recording (inside tape.stop_recording(), or after the with block). "
                    "Compute it while the tape records.")
            return GradientExplanation(
                "before_recording",
                f"The gradient with respect to {desc} is None: the variable was not read "
                "while the tape was recording, so the ops that use it ran before the "
                f"tape started recording (with tape{_at(tape._entered)}) or outside it. "
                "Compute with it inside the with block.",
                loc=tape._entered)
        k = self.trace.producer.get(sid)
        if k is not None and self.trace.recs[k][0] == "cut":
            r = self.trace.recs[k]
            return GradientExplanation(
                "stop_gradient",
                f"The gradient with respect to {desc} is None: the source is the output "
                f"of {r[1]}{_at(r[5])}, which the tape does not record.",
                op=r[1], loc=r[5])
        op, loc = self.trace.first_use(sid)
        used = f" ({op}{_at(loc)} used it)" if op else ""
        return GradientExplanation(
            "not_watched",
            f"The gradient with respect to {desc} is None: the tape does not watch it"
            f"{used}. Tapes watch variables when they are read, but a constant only after "
            "tape.watch(x): call it inside the with block before computing with x.",
            op=op, loc=loc)

    # -- watched, and a path exists through ops that carry no gradient ---------------
    def _cut(self, src, desc):
        tape, tr, sid = self.tape, self.trace, src._id
        seen_all, _ = self.all()
        if sid not in seen_all:
            return None
        live = tr.forward(sid) & seen_all  # on some path from the source to the target
        real = tr.forward(sid, kinds={"rec"})
        blockers = []
        for k, r in enumerate(tr.recs):
            if r[0] == "rec" or not any(o in live for o in r[3]):
                continue
            feeders = [i for i in r[2] if i in real]
            if feeders:
                blockers.append((k, feeders))
        if not blockers:
            return None
        blockers.sort(key=lambda b: min(tr.recs[b[0]][3], default=0))
        k, feeders = blockers[0]
        kind, op, _ins, _outs, types, loc = tr.recs[k]
        more = ""
        if len(blockers) > 1:
            more = " Other paths to the target are cut too, by: " + ", ".join(
                f"{tr.recs[j][1]}{_at(tr.recs[j][5])}" for j, _ in blockers[1:4]) + "."
        if kind == "cut":
            return GradientExplanation(
                "stop_gradient",
                f"The gradient with respect to {desc} is None: the path to the target "
                f"goes through {op}{_at(loc)}, which stops gradients (the tape records "
                f"nothing past it).{more}", op=op, loc=loc)
        if kind == "nograd":
            return GradientExplanation(
                "no_gradient",
                f"The gradient with respect to {desc} is None: the path to the target goes "
                f"through {op}{_at(loc)}, which has no gradient.{more}", op=op, loc=loc)
        if kind == "int":
            dts = ", ".join(t.dtype for t in types)
            return GradientExplanation(
                "integer",
                f"The gradient with respect to {desc} is None: {op}{_at(loc)} turns the "
                f"value into {dts}, and integer or bool values carry no gradient (the tape "
                f"records only float ops). Keep the computation in floats.{more}",
                op=op, loc=loc)
        # an op the tape did not record though it read the source (or a value from it)
        nonfloat = [i for i in feeders if i in tr.types and not tr.types[i].is_float]
        if nonfloat:
            j = tr.producer[nonfloat[0]]
            pop, ploc = tr.recs[j][1], tr.recs[j][5]
            return GradientExplanation(
                "integer",
                f"The gradient with respect to {desc} is None: the path goes through the "
                f"{tr.types[nonfloat[0]].dtype} output of {pop}{_at(ploc)}, and integer or "
                f"bool values carry no gradient.{more}", op=pop, loc=ploc)
        wloc = tape._watch_locs.get(sid, (None, 0))[0]
        return GradientExplanation(
            "watched_late",
            f"The gradient with respect to {desc} is None: {op}{_at(loc)} used it before "
            f"it was watched (tape.watch{_at(wloc)}), so the tape did not record that op. "
            "Watch it first, then compute with it.", op=op, loc=loc)

    # -- no path at all -----------------------------------------------------------------
    def _apart(self, src, desc):
        from .tensor import _literal_ids

        tape, tr, sid = self.tape, self.trace, src._id
        ahead = tr.forward(sid)
        for vid, how, loc in tape._escapes:
            if vid in ahead:
                k = tr.producer.get(vid)
                made = (f"the value computed by {tr.recs[k][1]}{_at(tr.recs[k][5])}"
                        if k is not None else "the source")
                return GradientExplanation(
                    "outside_tape",
                    f"The gradient with respect to {desc} is None: {made} left jittape "
                    f"through {how}{_at(loc)}. What is computed from that numpy array or "
                    "number is a new constant with no history, so the tape cannot connect "
                    "the target to the source. Keep the computation in jittape ops.",
                    op=how, loc=loc)
        for t in self.targets:
            if t._id in tr.producer or t._id in tape._on_tape:
                continue
            if t._id in tape._dropped:
                return GradientExplanation(
                    "reset",
                    f"The gradient with respect to {desc} is None: the target was recorded "
                    f"before tape.reset(){_at(tape._reset_loc)}, which dropped it. Compute "
                    "the target again after reset().", op="reset", loc=tape._reset_loc)
            when = _span_of(tape, t._id)
            if when == "before":
                return GradientExplanation(
                    "before_recording",
                    f"The gradient with respect to {desc} is None: the target was computed "
                    f"before the tape started recording (with tape{_at(tape._entered)}); only "
                    "ops run while it records are on the tape. Compute the target inside "
                    "the with block.", loc=tape._entered)
            if when == "gap":
                return GradientExplanation(
                    "not_recording",
                    f"The gradient with respect to {desc} is None: the target was computed "
                    "while the tape was not recording (inside tape.stop_recording(), or "
                    "after the with block). Compute it while the tape records.")
            return GradientExplanation(
                "outside_tape",
                f"The gradient with respect to {desc} is None: the target was not computed "
                "by any jittape op while the tape recorded: it is a constant (made from a "
                "numpy array or a Python value), with no history.")
        from .tensor import Variable

        seen_all, parent = self.all()
        early, gap = [], []
        for v in seen_all if not isinstance(src, Variable) else ():
            # a value with no history, made after the source while the tape was not
            # recording, may have been computed from it (for a variable, read while the
            # tape recorded, that is unlikely: say only that they are not connected)
            if (v in tr.producer or v in tape._on_tape or v in _literal_ids
                    or v not in parent or v < sid):
                continue
            when = _span_of(tape, v)
            if when == "before":
                early.append(v)
            elif when == "gap":
                gap.append(v)
        for found, cause in ((early, "before_recording"), (gap, "not_recording")):
            if not found:
                continue
            v = max(found)  # the most recent such value
            k = parent[v][0]
            op, loc = tr.recs[k][1], tr.recs[k][5]
            what = ("before the tape started recording" if cause == "before_recording"
                    else "while the tape was not recording")
            return GradientExplanation(
                cause,
                f"The gradient with respect to {desc} is None: the target does not depend "
                "on it through any op the tape saw. It does use a value computed "
                f"{what}: the input of {op}{_at(loc)}. If that value was computed from the "
                "source, compute it inside the with block (ops run outside it are not "
                "recorded).", op=op, loc=loc)
        return GradientExplanation(
            "unconnected",
            f"The gradient with respect to {desc} is None: the target does not depend on it "
            "(no op run while the tape recorded connects them).")


def _explain_used(used: UsedTape, targets, src) -> GradientExplanation:
    """Why a gradient is None on a non-persistent tape that ``used``'s call freed."""
    head = (f"The tape was already used: it is not persistent, and its {used.call}()"
            f"{_at(used.loc)} freed what it recorded (a second gradient() raises "
            "RuntimeError; use jt.GradientTape(persistent=True) for several).")
    sid = getattr(src, "_id", None)
    same = tuple(t._id for t in targets) == used.target_ids
    if same and sid in used.none:
        e = used.none[sid]
        return GradientExplanation(
            "tape_used", f"{head} At that call this gradient was None: {e.message}",
            op=used.call, loc=used.loc, earlier=e)
    if same and sid in used.given:
        return GradientExplanation(
            "tape_used", f"{head} At that call this gradient was not None.",
            op=used.call, loc=used.loc)
    return GradientExplanation(
        "tape_used",
        f"{head} It cannot tell about this target and source: call "
        "jt.debugging.explain_gradient before gradient(), or use a persistent tape.",
        op=used.call, loc=used.loc)


def explain_gradient(tape, target, source):
    """Say why ``tape.gradient(target, source)`` is ``None`` — or, when it is not, through
    which recorded ops (``op@file:line -> ...``) the target depends on the source.

    Returns a :class:`GradientExplanation` (``str()`` it; ``.cause``, ``.op`` and
    ``.loc`` name the rule, the op and the user's ``file:line``). Works on a persistent
    tape before or after ``gradient``, and on a non-persistent one before its
    ``gradient``; after it, it says that the tape was used (and what that call found).
    A nested ``source`` gives the same nesting of explanations. It runs no op and
    records nothing.

    Example::

        with jt.GradientTape() as tape:
            y = jt.stop_gradient(w * 2.0) * x
        print(jt.debugging.explain_gradient(tape, y, w))
    """
    from . import nest

    if target is None:
        raise TypeError("explain_gradient: target is None")
    targets = [_as_target(t) for t in nest.flatten(target)]
    flat = nest.flatten(source)
    if tape._released and not tape._persistent:
        used = tape._used or UsedTape("gradient", None)
        out = [_explain_used(used, targets, s) for s in flat]
    else:
        ex = _Explainer(tape, targets)
        out = [ex.explain(s) for s in flat]
    if not isinstance(source, (list, tuple, dict)):
        return out[0]
    return nest.pack_sequence_as(source, out)


def _explain_none_enabled() -> bool:
    import os

    return os.environ.get("JITTAPE_EXPLAIN_NONE", "") not in ("", "0")


def _emit(msg: str) -> None:
    """Log on the ``jittape`` logger (topic ``explain``)."""
    from .config import log

    log("explain", msg)


@on_gradient
def _after_gradient(tape, targets, sources, grads):
    """Called by ``gradient`` before a non-persistent tape frees its trace (and when a
    gradient is None; installed into the tape at import): explain each None while the
    trace is here, log it when ``JITTAPE_EXPLAIN_NONE=1``, and return what the used tape
    keeps (or None)."""
    from .errors import user_frame

    loc = user_frame(2)
    none = {}
    log = _explain_none_enabled()
    if any(g is None for g in grads) and (log or not tape._persistent):
        ex = _Explainer(tape, targets)
        for k, (s, g) in enumerate(zip(sources, grads)):
            if g is not None:
                continue
            e = ex.explain(s)
            if e.connected:
                shown = " -> ".join(f"{op}@{_short(where)}" for op, where in e.path)
                e = GradientExplanation(
                    "vjp_none",
                    f"The gradient with respect to {_describe(s)} is None although the "
                    f"tape connects it to the target through: {shown}; the gradient rules "
                    "along that path gave None (a custom_gradient's grad_fn returned None "
                    "for it).", op=e.op, loc=e.loc, path=e.path)
            none[getattr(s, "_id", None)] = e
            if log:
                _emit(f"gradient{_at(loc)}: source {k} has gradient None. {e.message}")
    if tape._persistent:
        return None
    given = frozenset(getattr(s, "_id", None) for s, g in zip(sources, grads) if g is not None)
    return UsedTape("gradient", loc, [t._id for t in targets], given, none)
