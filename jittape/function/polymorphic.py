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
import functools
import itertools
import threading
import time
import types
import warnings
import weakref

from .. import _state, nest
from ..compiler import backends
from ..ops import collective as _collective
from .. import config as _config
from ..config import _flags
from ..compiler.ir import is_symbolic
from ..tensor import _config as _tensor_config
from .binding import _Binding, _WeakMethod, _signature_of, fit_signature
from .concrete import ConcreteFunction, _log
from .explain import Explanation
from .keys import (
    _SymbolicArg, _UnsupportedArg, _describe_leaves, _diff, _generalize, _key, _merged,
    _path_to, _relax_key, _spec_mask, _unsupported_message,
)
from .spec import TensorSpec, _from_specs
from .tracer import trace_function

__all__ = ["function", "Function", "TensorSpec", "CacheInfo"]


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


def _forget_instance(cache: dict, key: int, ref) -> None:
    """Weak-reference callback: the instance died; drop its per-instance Function."""
    hit = cache.get(key)
    if hit is not None and hit[0] is ref:
        cache.pop(key, None)


_bind_lock = threading.Lock()


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
            return fit_signature(self._name, self.input_signature, self._binding, args,
                                 kwargs)
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


    # -- tracing -------------------------------------------------------------------
    def _trace(self, key, backend, args, kwargs, mask=None) -> ConcreteFunction:
        """Trace the Python function for this call signature. ``mask`` (argument leaf
        -> dims) names the sizes traced as symbols (``jittape.compiler.dims``): None in the
        input_signature, or generalized by reduce_retracing."""
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
        tr = trace_function(self._fn, self._name, self._binding, args, kwargs, described,
                            mask, first, cause, diff)
        tracer, traced_graph, symbols_at = tr.tracer, tr.graph, tr.symbols_at
        cf.input_structure = tr.input_structure
        cf.traced = traced_graph
        cf.prints = tr.prints
        cf.collectives = tuple(n for n in traced_graph.nodes if n.op.name in _collective.NAMES)
        cf._source = dict(tracer.sources)
        cf.out_plan = tr.out_plan
        cf.out_structure = tr.out_structure
        cf.writes = tr.writes
        cf.created = list(tracer.created_vars)
        cf.draws = list(tracer.draws)
        cf._captures = {vid: arr for vid, arr in tracer.captures.values()}
        cf.leaf_types = tr.leaf_types
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

    def get_concrete_function(self, *args, **kwargs) -> ConcreteFunction:
        """The trace for these arguments (traced now when there is none; not run):
        tensors, or ``jt.TensorSpec``s as TF users pass them (a spec's None dims are
        traced as symbols: the concrete function takes any size there). A trace with
        symbolic sizes is specialized to tensor arguments' sizes. With no arguments, a
        jt.function that has an ``input_signature`` gives the signature's trace (as
        TF's)."""
        stand_ins: dict = {}
        if not args and not kwargs and self.input_signature is not None:
            args = self.input_signature
        if any(isinstance(x, TensorSpec) for x in nest.flatten([list(args), kwargs])):
            args, kwargs, stand_ins = _from_specs(self._name, args, kwargs)
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
