"""The element-wise transformations (``batch``, ``padded_batch``, ``unbatch``, ``map``,
``filter``, ``enumerate``, ``concatenate``, ``prefetch``), the prefetch thread, and the
``element_spec`` of ``map``, traced on symbolic tensors."""

from __future__ import annotations

import atexit
import collections
import concurrent.futures
import itertools
import queue
import threading
import weakref

import numpy as np

from ..errors import InvalidArgumentError
from ..function import TensorSpec
from ..tensor import Tensor, Tracer, Variable, convert_to_tensor
from .dataset import Dataset
from .index_transforms import _Unary
from .structure import (
    _INF, _UNKNOWN, _common_shape, _flat, _flat_shapes, _is_struct, _map, _normalize,
    _pack, _rechunk, _same_structure, _spec_of, _to_tensor,
)

# ---------------------------------------------------------------------------
# Element-wise transformations


class _Batch(_Unary):
    def __init__(self, upstream, batch_size, drop_remainder):
        super().__init__(upstream)
        self._size, self._drop = batch_size, drop_remainder

    def _elements(self):
        up = self._up
        if up._src is not None:  # the fast path: one gather per batch
            src = up._src
            chunks = up._indices()
            try:
                for idx in _rechunk(chunks, self._size):
                    if len(idx) < self._size and self._drop:
                        return
                    yield src.gather(idx)
            finally:
                chunks.close()
            return
        it = up._elements()
        try:
            while True:
                items = list(itertools.islice(it, self._size))
                if not items or (len(items) < self._size and self._drop):
                    return
                yield self._stack(items)
        finally:
            it.close()

    def _stack(self, items):
        first = items[0]
        flats = [_flat(x) for x in items]
        out = []
        for c, a0 in enumerate(flats[0]):
            col = [f[c] for f in flats]
            for j, a in enumerate(col):
                if a.shape != a0.shape:
                    raise InvalidArgumentError(
                        f"Dataset.batch: Cannot batch tensors with different shapes in "
                        f"component {c}. First element had shape {list(a0.shape)} and element "
                        f"{j} had shape {list(a.shape)}. Use padded_batch() to pad them to a "
                        "common shape")
            out.append(np.stack(col))
        return _pack(first, out)

    def _cardinality(self):
        n = self._up._cardinality()
        if n < 0:
            return n
        return n // self._size if self._drop else -(-n // self._size)

    def _compute_spec(self):
        lead = self._size if self._drop else None
        return _map(lambda s: TensorSpec(None if s.shape is None else (lead,) + s.shape,
                                         s.dtype), self._up.element_spec)


class _PaddedBatch(_Batch):
    def __init__(self, upstream, batch_size, padded_shapes, padding_values, drop_remainder):
        super().__init__(upstream, batch_size, drop_remainder)
        self._shapes, self._values = padded_shapes, padding_values

    def _elements(self):
        it = self._up._elements()
        shapes = values = None
        try:
            while True:
                items = list(itertools.islice(it, self._size))
                if not items or (len(items) < self._size and self._drop):
                    return
                if shapes is None:
                    shapes, values = self._targets(items[0])
                yield self._pad(items, shapes, values)
        finally:
            it.close()

    def _targets(self, first):
        """Per component: the padded shape (None entries: the batch's largest) and value."""
        flat = _flat(first)
        if self._shapes is None:
            shapes = [None] * len(flat)
        elif _is_struct(first):
            shapes = _flat_shapes(self._shapes) if _is_struct(self._shapes) else None
            if shapes is None or len(shapes) != len(flat):
                raise ValueError(
                    f"Dataset.padded_batch: padded_shapes {self._shapes!r} does not match the "
                    f"element structure ({len(flat)} components)")
        else:
            shapes = [self._shapes]
        if self._values is None:
            values = [None] * len(flat)
        elif _is_struct(first) and _is_struct(self._values):
            values = _flat(self._values)
        else:
            values = [self._values] * len(flat)
        out = []
        for c, (a, s) in enumerate(zip(flat, shapes)):
            if s is not None:
                s = [None if d is None or int(d) < 0 else int(d) for d in (
                    s.shape if isinstance(s, TensorSpec) else s)]
                if len(s) != a.ndim:
                    raise ValueError(
                        f"Dataset.padded_batch: padded_shapes {s} for component {c} has rank "
                        f"{len(s)}, but the element has shape {list(a.shape)} (rank {a.ndim})")
            out.append(s)
        return out, values

    def _pad(self, items, shapes, values):
        flats = [_flat(x) for x in items]
        out = []
        for c, target in enumerate(shapes):
            col = [f[c] for f in flats]
            rank = col[0].ndim
            for j, a in enumerate(col):
                if a.ndim != rank:
                    raise InvalidArgumentError(
                        f"Dataset.padded_batch: component {c} has elements of different ranks:"
                        f" element 0 has shape {list(col[0].shape)}, element {j} has shape "
                        f"{list(a.shape)}")
            biggest = [max(a.shape[d] for a in col) for d in range(rank)]
            want = biggest if target is None else [
                b if t is None else t for b, t in zip(biggest, target)]
            for j, a in enumerate(col):
                if any(x > w for x, w in zip(a.shape, want)):
                    raise InvalidArgumentError(
                        f"Dataset.padded_batch: Attempted to pad to a smaller size than the "
                        f"input element: element {j} of component {c} has shape "
                        f"{list(a.shape)}, padded_shapes is {want}")
            v = values[c]
            if v is None:
                v = False if col[0].dtype == np.bool_ else 0
            elif isinstance(v, (Tensor, Variable)):
                v = v.numpy()
            out_a = np.full([len(col)] + want, v, dtype=col[0].dtype)
            for j, a in enumerate(col):
                out_a[(j,) + tuple(slice(0, d) for d in a.shape)] = a
            out.append(out_a)
        return _pack(items[0], out)

    def _compute_spec(self):
        lead = self._size if self._drop else None
        up = self._up.element_spec
        flat = _flat(up)
        if self._shapes is None:
            shapes = [None] * len(flat)
        elif _is_struct(up):
            shapes = _flat_shapes(self._shapes)
        else:
            shapes = [self._shapes]
        out = []
        for s, p in zip(flat, shapes):
            if s.shape is None:
                out.append(TensorSpec(None, s.dtype))
                continue
            if p is None:  # the batch's largest size: known only where the input's is
                dims = list(s.shape)
            else:
                p = p.shape if isinstance(p, TensorSpec) else p
                dims = [None if t is None or int(t) < 0 else int(t) for t in p]
            out.append(TensorSpec([lead] + dims, s.dtype))
        return _pack(up, out)


class _Unbatch(_Unary):
    def _elements(self):
        it = self._up._elements()
        try:
            for x in it:
                flat = _flat(x)
                for a in flat:
                    if a.ndim == 0:
                        raise ValueError("Dataset.unbatch: Cannot unbatch an input with "
                                         "scalar components.")
                n = flat[0].shape[0]
                if any(a.shape[0] != n for a in flat):
                    raise InvalidArgumentError(
                        "Dataset.unbatch: the components of an element have different first "
                        f"dimensions: {[list(a.shape) for a in flat]}")
                for j in range(n):
                    yield _pack(x, [a[j, ...] for a in flat])
        finally:
            it.close()

    def _compute_spec(self):
        def row(s):
            if s.shape is not None and len(s.shape) == 0:
                raise ValueError("Dataset.unbatch: Cannot unbatch an input with scalar "
                                 "components.")
            return TensorSpec(None if s.shape is None else s.shape[1:], s.dtype)

        return _map(row, self._up.element_spec)

    def _cardinality(self):
        n = self._up._cardinality()
        if n == _INF:
            return _INF
        if n == _UNKNOWN:
            return _UNKNOWN
        leads = {None if s.shape is None or not s.shape else s.shape[0]
                 for s in _flat(self._up.element_spec)}
        if len(leads) == 1 and None not in leads:
            return n * leads.pop()
        return _UNKNOWN


def _call(fn, element):
    """Call a user function on an element as TF does: a plain tuple is unpacked into
    positional arguments; anything else (a dict, a namedtuple, a tensor) is one argument."""
    args = _map(_to_tensor, element)
    return fn(*args) if type(args) is tuple else fn(args)


def _from_user(result, what: str):
    if isinstance(result, list):  # as TF: a returned list is a tuple of components
        result = tuple(result)
    return _normalize(result, what)


class _Map(_Unary):
    def __init__(self, upstream, fn, workers):
        super().__init__(upstream)
        self._fn, self._workers = fn, workers

    def _apply(self, element):
        return _from_user(_call(self._fn, element), "Dataset.map: the map_func's result")

    def _elements(self):
        it = self._up._elements()
        if self._workers is None:
            try:
                for x in it:
                    yield self._apply(x)
            finally:
                it.close()
            return
        pool = concurrent.futures.ThreadPoolExecutor(self._workers,
                                                     thread_name_prefix="jt.data.map")
        window = collections.deque()
        try:
            for x in it:
                window.append(pool.submit(self._apply, x))
                if len(window) >= 2 * self._workers:
                    yield window.popleft().result()
            while window:
                yield window.popleft().result()
        finally:
            for f in window:
                f.cancel()
            pool.shutdown(wait=True)
            it.close()

    def _compute_spec(self):
        return _traced_spec(self._fn, self._up, "map")


class _Filter(_Unary):
    def __init__(self, upstream, predicate):
        super().__init__(upstream)
        self._pred = predicate

    def _elements(self):
        it = self._up._elements()
        try:
            for x in it:
                if _truth(_call(self._pred, x)):
                    yield x
        finally:
            it.close()

    def _cardinality(self):
        return _UNKNOWN


def _truth(r) -> bool:
    if isinstance(r, (bool, np.bool_)):
        return bool(r)
    a = r._value if isinstance(r, Tensor) else np.asarray(r)
    if a.dtype != np.bool_ or a.ndim != 0:
        raise ValueError(
            "Dataset.filter: Invalid `predicate`. `predicate` must return a `jt.bool` scalar "
            f"tensor, but it returned shape {list(a.shape)} and dtype {a.dtype.name}")
    return bool(a)


class _Enumerate(_Unary):
    def __init__(self, upstream, start):
        super().__init__(upstream)
        self._start = start

    def _elements(self):
        it = self._up._elements()
        try:
            for i, x in zip(itertools.count(self._start), it):
                yield (np.asarray(i, np.int64), x)
        finally:
            it.close()

    def _compute_spec(self):
        return (TensorSpec((), np.int64), self._up.element_spec)


class _Concatenate(Dataset):
    def __init__(self, first, second):
        self._a, self._b = first, second
        sa, sb = first.element_spec, second.element_spec
        fa, fb = _flat(sa), _flat(sb)
        if not _same_structure(sa, sb) or len(fa) != len(fb) or any(
                x.dtype != y.dtype for x, y in zip(fa, fb)):
            raise TypeError(f"Dataset.concatenate: Incompatible dataset elements:\n  {sa!r} vs."
                            f"\n  {sb!r}")

    def _elements(self):
        yield from self._a._elements()
        yield from self._b._elements()

    def _cardinality(self):
        na, nb = self._a._cardinality(), self._b._cardinality()
        if _INF in (na, nb):
            return _INF
        if _UNKNOWN in (na, nb):
            return _UNKNOWN
        return na + nb

    def _compute_spec(self):
        fa, fb = _flat(self._a.element_spec), _flat(self._b.element_spec)
        return _pack(self._a.element_spec, [
            TensorSpec(_common_shape(x.shape, y.shape), x.dtype) for x, y in zip(fa, fb)])


class _Prefetch(_Unary):
    def __init__(self, upstream, size):
        super().__init__(upstream)
        self._size = size

    def _elements(self):
        if self._size == 0:
            return self._up._elements()
        return _prefetched(self._up._elements, self._size)


# ---------------------------------------------------------------------------
# The prefetch thread


_live_prefetchers: "weakref.WeakSet" = weakref.WeakSet()


class _Prefetcher:
    """A daemon thread that runs ``open()`` and keeps up to ``size`` elements queued."""

    def __init__(self, open_, size: int):
        self.q: queue.Queue = queue.Queue(maxsize=size)
        self.stop = threading.Event()
        # the thread holds the queue and the event, never the consumer: dropping the
        # consumer's generator is what stops the thread
        self.thread = threading.Thread(target=_produce, args=(open_, self.q, self.stop),
                                       name="jt.data.prefetch", daemon=True)
        _live_prefetchers.add(self)
        self.thread.start()

    def shutdown(self, timeout=10.0):
        self.stop.set()
        while True:  # unblock a producer waiting on a full queue
            try:
                self.q.get_nowait()
            except queue.Empty:
                break
        if self.thread is not threading.current_thread():
            self.thread.join(timeout)


def _put(q, stop, item) -> bool:
    while not stop.is_set():
        try:
            q.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def _produce(open_, q, stop):
    it = None
    try:
        it = open_()
        for x in it:
            if not _put(q, stop, ("item", x)):
                return
        _put(q, stop, ("end", None))
    except BaseException as e:  # handed to the consumer, raised there
        _put(q, stop, ("error", e))
    finally:
        if it is not None:
            it.close()  # nested prefetches and map pools stop with this one


@atexit.register
def _stop_prefetchers():
    for p in list(_live_prefetchers):
        p.stop.set()


def _prefetched(open_, size: int):
    p = _Prefetcher(open_, size)
    try:
        while True:
            kind, x = p.q.get()
            if kind == "item":
                yield x
            elif kind == "end":
                return
            else:
                raise x
    finally:
        p.shutdown()


# ---------------------------------------------------------------------------
# The element_spec of map: trace the function on symbolic tensors


def _traced_spec(fn, upstream: Dataset, method: str):
    """Run ``fn`` once on symbolic tensors shaped like ``upstream``'s elements (a None
    size stays unknown) and read the spec of its result, as tf.data traces map
    functions. A function that needs concrete values (``.numpy()``, Python control flow
    on a tensor) is run on the first element instead."""
    from ..compiler.dims import new_symbol
    from ..compiler.ir import Type

    spec = upstream.element_spec
    flat = _flat(spec)
    if all(s.shape is not None for s in flat):
        tracer = Tracer(f"Dataset.{method}")
        try:
            with tracer:
                phs = [tracer.placeholder(Type(tuple(
                    new_symbol(f"a size of a Dataset.{method} input") if d is None else d
                    for d in s.shape), s.dtype.name)) for s in flat]
                args = _pack(spec, phs)
                out = fn(*args) if type(args) is tuple else fn(args)
                if isinstance(out, list):
                    out = tuple(out)
                return _map(_leaf_spec, out)
        except Exception:  # noqa: BLE001 - the function needs concrete values: run it
            pass
    up = upstream._elements()
    try:
        first = next(up, None)
    finally:
        up.close()
    if first is None:
        raise ValueError(f"Dataset.{method}: cannot tell the element_spec of an empty "
                         "dataset whose function needs concrete values")
    return _spec_of(_from_user(_call(fn, first), f"Dataset.{method}"))


def _leaf_spec(leaf):
    if isinstance(leaf, Variable):
        leaf = leaf.read_value()
    if not isinstance(leaf, Tensor):
        leaf = convert_to_tensor(leaf)
    return TensorSpec(tuple(leaf.shape), leaf.dtype)
