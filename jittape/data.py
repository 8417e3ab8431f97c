"""``jt.data``: a lazy input pipeline over numpy arrays, with tf.data's names and semantics.

    ds = (jt.data.Dataset.from_tensor_slices((x_train, y_train))
          .shuffle(60000, seed=0).batch(128).prefetch(jt.data.AUTOTUNE))
    for x, y in ds:           # jt.Tensors, in the element's structure
        train_step(x, y)

How it runs. Every dataset is a recipe; ``iter(ds)`` opens a chain of Python generators.
Elements travel as nested structures (tuples, namedtuples, dicts) of numpy arrays and
become ``jt.Tensor``s only when they leave the pipeline. A Python list in the input is a
tensor, not a structure (as in tf.data).

The fast path: a ``from_tensor_slices`` / ``from_tensors`` / ``range`` source, followed
only by ``shuffle``, ``repeat``, ``take``, ``skip``, ``shard`` and ``cache``, is an
*index stream*: chunks of int64 row indices into the source arrays. ``batch`` over an
index stream gathers a whole batch with one fancy index per component (one slice view
when the rows are contiguous), so an epoch never copies the source and never loops in
Python per element. After ``map``, ``filter``, ``zip`` ... elements are assembled one by
one (``np.stack`` per batch).
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures
import itertools
import os
import queue
import threading
import types
import weakref

import numpy as np

from . import nest
from .errors import InvalidArgumentError
from .function import TensorSpec
from .tensor import Tensor, Tracer, Variable, convert_to_tensor

__all__ = ["Dataset", "Iterator", "AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY",
           "experimental"]

AUTOTUNE = -1
INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2
_INF, _UNKNOWN = INFINITE_CARDINALITY, UNKNOWN_CARDINALITY

_CHUNK = 65536  # indices per chunk of an index stream (bounds memory for huge ranges)
_AUTOTUNE_PREFETCH = 2  # prefetch(AUTOTUNE): a fixed depth; TF tunes it at run time


# ---------------------------------------------------------------------------
# Structures: tuples, namedtuples and dicts nest; everything else is one tensor


def _is_struct(x) -> bool:
    return isinstance(x, (tuple, dict))


def _map(fn, s):
    """``fn`` over the leaves of ``s``, in ``s``'s structure (lists are leaves here)."""
    if isinstance(s, dict):
        return type(s)((k, _map(fn, v)) for k, v in s.items())
    if isinstance(s, tuple) and hasattr(s, "_fields"):
        return type(s)(*[_map(fn, v) for v in s])
    if isinstance(s, tuple):
        return tuple(_map(fn, v) for v in s)
    return fn(s)


def _flat(s) -> list:
    return nest.flatten(s)  # no lists left in a normalized structure: nest's order is TF's


def _pack(s, flat):
    return nest.pack_sequence_as(s, flat)


def _as_array(value, what: str) -> np.ndarray:
    """A leaf as a read-only array with TF's dtypes (Python floats float32, ints int32)."""
    if isinstance(value, Variable):
        value = value.read_value()
    if isinstance(value, Tensor):
        if value.is_symbolic:
            raise TypeError(f"{what}: got a symbolic tensor; datasets hold concrete values")
        return value._value
    try:
        return convert_to_tensor(value)._value  # copies a writable array once: a snapshot
    except (TypeError, ValueError) as e:
        raise type(e)(f"{what}: {e}") from None


def _normalize(value, what: str):
    return _map(lambda leaf: _as_array(leaf, what), value)


def _spec_of(structure):
    return _map(lambda a: TensorSpec(a.shape, a.dtype), structure)


def _shape(spec_shape) -> str:
    return "<unknown>" if spec_shape is None else "[" + ", ".join(
        "None" if d is None else str(d) for d in spec_shape) + "]"


def _same_structure(a, b) -> bool:
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and sorted(a) == sorted(b)
                and all(_same_structure(a[k], b[k]) for k in a))
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
                and all(_same_structure(x, y) for x, y in zip(a, b)))
    return True


def _common_shape(s1, s2):
    """The most specific shape both fit (tf's most_specific_common_supertype)."""
    if s1 is None or s2 is None or len(s1) != len(s2):
        return None
    return tuple(d1 if d1 == d2 else None for d1, d2 in zip(s1, s2))


def _to_tensor(a: np.ndarray) -> Tensor:
    # read-only views of the source (and cached arrays) are shared, never copied; a freshly
    # gathered batch is frozen in place (nothing else holds it)
    return Tensor(a, _own=True)


def _int_arg(value, name: str, method: str) -> int:
    if isinstance(value, (Tensor, Variable)):
        value = value.numpy()
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"Dataset.{method}: {name} must be an int, got {value!r}")
    return int(value)


# ---------------------------------------------------------------------------
# Random-access sources of an index stream


class _ArraySource:
    """Rows of a structure of read-only arrays with a common leading dimension."""

    def __init__(self, structure):
        self.structure = structure
        self.flat = _flat(structure)
        self.n = int(self.flat[0].shape[0])

    def item(self, i: int):
        return _pack(self.structure, [a[i, ...] for a in self.flat])

    def gather(self, idx: np.ndarray):
        if len(idx) == 1 or (len(idx) and np.all(np.diff(idx) == 1)):
            # contiguous rows: a view (the source is read-only, so sharing is safe)
            sl = slice(int(idx[0]), int(idx[-1]) + 1)
            return _pack(self.structure, [a[sl] for a in self.flat])
        return _pack(self.structure, [a[idx] for a in self.flat])


class _RangeSource:
    def __init__(self, start, step, n, dtype):
        self.start, self.step, self.n, self.dtype = start, step, n, np.dtype(dtype)

    def item(self, i: int):
        return np.asarray(self.start + i * self.step, self.dtype)

    def gather(self, idx: np.ndarray):
        return (self.start + idx * self.step).astype(self.dtype)


def _arange_chunks(n: int):
    for s in range(0, n, _CHUNK):
        yield np.arange(s, min(n, s + _CHUNK), dtype=np.int64)


def _rechunk(chunks, size: int):
    """Index arrays of exactly ``size`` from a stream of chunks (the last may be short)."""
    pending, have = [], 0
    for c in chunks:
        while len(c):
            take = min(size - have, len(c))
            pending.append(c[:take])
            have += take
            c = c[take:]
            if have == size:
                yield pending[0] if len(pending) == 1 else np.concatenate(pending)
                pending, have = [], 0
    if have:
        yield np.concatenate(pending)


# ---------------------------------------------------------------------------
# The user-facing iterator and the prefetch thread


class Iterator:
    """What ``iter(dataset)`` gives: ``next(it)`` returns the next element as jt.Tensors.

    Dropping it (or ``close()``) stops any background thread the pipeline started.
    """

    def __init__(self, dataset: "Dataset", convert=_to_tensor):
        self._gen = dataset._elements()
        self._convert = convert
        self._dataset = dataset

    @property
    def element_spec(self):
        return self._dataset.element_spec

    def __iter__(self):
        return self

    def __next__(self):
        if self._gen is None:
            raise StopIteration
        try:
            return _map(self._convert, next(self._gen))
        except StopIteration:
            self.close()
            raise

    def get_next(self):
        """The next element (``tf.data.Iterator.get_next``); ``StopIteration`` at the end."""
        return next(self)

    def close(self):
        """Stop the pipeline now (prefetch threads, map thread pools)."""
        gen, self._gen = self._gen, None
        if gen is not None:
            gen.close()


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
# Dataset


class Dataset:
    """A sequence of elements (``tf.data.Dataset``), each a structure of tensors.

    Build one with ``from_tensor_slices``, ``from_tensors``, ``range``, ``zip`` or
    ``from_generator``, transform it with the methods below, and iterate it (each
    ``for`` loop is one epoch).

    Example:
        >>> ds = jt.data.Dataset.range(5).map(lambda x: x * 2).batch(2)
        >>> [b.numpy().tolist() for b in ds]
        [[0, 2], [4, 6], [8]]
    """

    # subclasses set these in __init__
    _src = None  # an _ArraySource/_RangeSource when the elements are an index stream

    # -- what each dataset defines ------------------------------------------------------
    def _elements(self):
        """A generator of elements (structures of numpy arrays)."""
        src = self._src
        for chunk in self._indices():
            for i in chunk.tolist():
                yield src.item(i)

    def _indices(self):
        """For an index stream: a generator of int64 index chunks into ``_src``."""
        raise NotImplementedError

    def _cardinality(self) -> int:
        raise NotImplementedError

    def _compute_spec(self):
        raise NotImplementedError

    # -- introspection ------------------------------------------------------------------
    @property
    def element_spec(self):
        """The structure of ``jt.TensorSpec`` of one element (``None`` for a size that
        may vary from element to element)."""
        spec = self.__dict__.get("_spec")
        if spec is None:
            spec = self._spec = self._compute_spec()
        return spec

    def cardinality(self) -> Tensor:
        """The number of elements as a scalar int64 tensor: ``INFINITE_CARDINALITY`` (-1)
        or ``UNKNOWN_CARDINALITY`` (-2) when it is not known without iterating."""
        return Tensor(np.asarray(self._cardinality(), np.int64), _own=True)

    def __len__(self):
        n = self._cardinality()
        if n == _INF:
            raise TypeError("The dataset is infinite.")
        if n == _UNKNOWN:
            raise TypeError("The dataset length is unknown.")
        return n

    def __bool__(self):
        return True  # never len(): an infinite dataset is still truthy

    def __iter__(self) -> Iterator:
        return Iterator(self)

    def as_numpy_iterator(self):
        """Iterate with numpy values (numpy scalars for 0-d components), as TF does."""
        return Iterator(self, convert=_numpy_value)

    def __repr__(self):
        return f"<{type(self).__name__} element_spec={self.element_spec!r}>"

    # -- constructors -------------------------------------------------------------------
    @staticmethod
    def from_tensor_slices(tensors, name=None) -> "Dataset":
        """One element per row of ``tensors`` (a tensor or array, a Python list, or a
        tuple/dict/namedtuple of them), each component sliced along its first axis.

        Example:
            >>> ds = jt.data.Dataset.from_tensor_slices(({"a": [1, 2]}, [0.5, 1.5]))
            >>> [(d["a"].numpy(), y.numpy()) for d, y in ds]
            [(1, 0.5), (2, 1.5)]
        """
        return _Slices(_normalize(tensors, "Dataset.from_tensor_slices"), "from_tensor_slices")

    @staticmethod
    def from_tensors(tensors, name=None) -> "Dataset":
        """A dataset of one element, ``tensors`` itself."""
        structure = _normalize(tensors, "Dataset.from_tensors")
        return _Slices(_map(lambda a: a[np.newaxis], structure), "from_tensors")

    @staticmethod
    def range(*args, output_type=np.int64, name=None) -> "Dataset":
        """``range(stop)``, ``range(start, stop[, step])`` as int64 scalars (Python's rules)."""
        if not 1 <= len(args) <= 3:
            raise TypeError(f"Dataset.range takes 1 to 3 positional arguments, got {len(args)}")
        vals = [_int_arg(a, "each argument", "range") for a in args]
        start, stop, step = (0, vals[0], 1) if len(vals) == 1 else (
            vals[0], vals[1], vals[2] if len(vals) == 3 else 1)
        if step == 0:
            raise InvalidArgumentError("Dataset.range: step must not be 0")
        return _Range(start, stop, step, output_type)

    @staticmethod
    def zip(*args, datasets=None, name=None) -> "Dataset":
        """Elements of several datasets side by side, in ``datasets``'s structure (a tuple,
        dict or nested mix of datasets; ``zip(a, b)`` means ``zip((a, b))``); it ends with the
        shortest."""
        if datasets is None:
            if not args:
                raise TypeError("Dataset.zip needs datasets: zip((a, b)) or zip(a, b)")
            datasets = args[0] if len(args) == 1 else tuple(args)
        elif args:
            raise TypeError("Dataset.zip: pass the datasets positionally or as datasets=, "
                            "not both")
        return _Zip(datasets)

    @staticmethod
    def from_generator(generator, output_types=None, output_shapes=None, args=None,
                       output_signature=None, name=None) -> "Dataset":
        """Elements from ``generator()`` (a callable returning an iterable), each checked
        against ``output_signature`` (a structure of ``jt.TensorSpec``)."""
        if not callable(generator):
            raise TypeError("Dataset.from_generator: generator must be callable (a function "
                            "that returns an iterator), got " + type(generator).__name__)
        if output_signature is None:
            if output_types is None:
                raise TypeError("Dataset.from_generator needs output_signature= (a structure "
                                "of jt.TensorSpec), or output_types=")
            flat_t = _flat(output_types)
            flat_s = [None] * len(flat_t) if output_shapes is None else _flat_shapes(
                output_shapes)
            if len(flat_s) != len(flat_t):
                raise ValueError(f"Dataset.from_generator: output_shapes {output_shapes!r} "
                                 f"does not match output_types {output_types!r}")
            output_signature = _pack(output_types, [TensorSpec(s, t) for t, s in zip(
                flat_t, flat_s)])
        return _Generator(generator, output_signature, tuple(args or ()))

    # -- transformations ----------------------------------------------------------------
    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None,
              deterministic=None, name=None) -> "Dataset":
        """Consecutive elements stacked along a new first axis; the last batch is smaller
        unless ``drop_remainder``. (``num_parallel_calls`` is accepted; batches are
        assembled on the consumer's thread, or a prefetch thread.)"""
        return _Batch(self, _batch_size(batch_size, "batch"), bool(drop_remainder))

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None,
                     drop_remainder=False, name=None) -> "Dataset":
        """Like ``batch``, padding each component to ``padded_shapes`` (a ``None`` or -1
        dimension, or ``padded_shapes=None``: the largest size in the batch) with
        ``padding_values`` (default 0)."""
        return _PaddedBatch(self, _batch_size(batch_size, "padded_batch"), padded_shapes,
                            padding_values, bool(drop_remainder))

    def unbatch(self, name=None) -> "Dataset":
        """Split each element along its first axis into rows (the inverse of ``batch``)."""
        return _Unbatch(self)

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True,
                name=None) -> "Dataset":
        """Shuffle with a buffer of ``buffer_size`` elements: fill it, then repeatedly yield
        a random one and put the next input element in its place. ``buffer_size=1`` keeps
        the order; ``buffer_size >= len`` gives a uniform permutation. Each epoch draws a
        new order unless ``reshuffle_each_iteration=False``; ``seed`` (or
        ``jt.random.set_seed``) makes the orders reproducible."""
        n = _int_arg(buffer_size, "buffer_size", "shuffle")
        if n == UNKNOWN_CARDINALITY:  # TF: a buffer the size of the whole dataset
            n = self._cardinality()
            if n < 0:
                raise InvalidArgumentError(
                    "Dataset.shuffle: buffer_size=UNKNOWN_CARDINALITY needs a dataset of "
                    f"known finite cardinality, got {n}")
        if n <= 0:
            raise InvalidArgumentError(
                f"Dataset.shuffle: buffer_size must be greater than zero or "
                f"UNKNOWN_CARDINALITY, got {n}")
        return _Shuffle(self, max(n, 1), seed, bool(reshuffle_each_iteration))

    def map(self, map_func, num_parallel_calls=None, deterministic=None,
            name=None) -> "Dataset":
        """``map_func`` over every element (jt.Tensors in the element's structure; a tuple
        element is passed as positional arguments, as in TF). With
        ``num_parallel_calls`` (an int or ``AUTOTUNE``) a thread pool runs it, and the
        output keeps the input order."""
        if not callable(map_func):
            raise TypeError(f"Dataset.map: map_func must be callable, got {map_func!r}")
        workers = None
        if num_parallel_calls is not None:
            workers = _int_arg(num_parallel_calls, "num_parallel_calls", "map")
            if workers == AUTOTUNE:
                workers = os.cpu_count() or 4
            elif workers <= 0:
                raise InvalidArgumentError(
                    f"Dataset.map: num_parallel_calls must be positive or AUTOTUNE, got "
                    f"{workers}")
            if workers == 1:
                workers = None
        return _Map(self, map_func, workers)

    def filter(self, predicate, name=None) -> "Dataset":
        """The elements for which ``predicate`` (over jt.Tensors, unpacked as in ``map``)
        returns a scalar bool."""
        if not callable(predicate):
            raise TypeError(f"Dataset.filter: predicate must be callable, got {predicate!r}")
        return _Filter(self, predicate)

    def repeat(self, count=None, name=None) -> "Dataset":
        """The dataset ``count`` times over (``None`` or -1: forever); each repetition is a
        new epoch of the input (a shuffle before it reshuffles)."""
        n = -1 if count is None else _int_arg(count, "count", "repeat")
        return _Repeat(self, n)

    def take(self, count, name=None) -> "Dataset":
        """The first ``count`` elements (-1: all)."""
        return _Take(self, _int_arg(count, "count", "take"))

    def skip(self, count, name=None) -> "Dataset":
        """All but the first ``count`` elements (-1: skip everything)."""
        return _Skip(self, _int_arg(count, "count", "skip"))

    def shard(self, num_shards, index, name=None) -> "Dataset":
        """Every ``num_shards``-th element, starting at ``index``."""
        k = _int_arg(num_shards, "num_shards", "shard")
        i = _int_arg(index, "index", "shard")
        if k <= 0:
            raise InvalidArgumentError(
                f"Dataset.shard: Number of shards must be greater than zero (currently "
                f"num_shards = {k})")
        if not 0 <= i < k:
            raise InvalidArgumentError(
                f"Dataset.shard: Index must be between 0 and {k - 1} (currently index = {i})")
        return _Shard(self, k, i)

    def enumerate(self, start=0, name=None) -> "Dataset":
        """``(i, element)`` pairs with an int64 counter from ``start``."""
        return _Enumerate(self, _int_arg(start, "start", "enumerate"))

    def concatenate(self, dataset, name=None) -> "Dataset":
        """This dataset's elements, then ``dataset``'s (same structure and dtypes)."""
        if not isinstance(dataset, Dataset):
            raise TypeError(f"Dataset.concatenate needs a Dataset, got "
                            f"{type(dataset).__name__}")
        return _Concatenate(self, dataset)

    def cache(self, filename="", name=None) -> "Dataset":
        """Keep the elements of the first complete epoch in memory and replay them (a
        shuffle before the cache is frozen in that epoch's order, as in TF)."""
        if filename:
            raise NotImplementedError(
                f"Dataset.cache(filename={filename!r}): jt.data caches in memory only; call "
                "cache() without a filename (or save the arrays with np.save yourself)")
        return _Cache(self)

    def prefetch(self, buffer_size, name=None) -> "Dataset":
        """Produce up to ``buffer_size`` elements ahead on a background thread while the
        consumer works (``AUTOTUNE``: a small fixed depth; 0: no thread). The thread stops
        when the iteration ends or its iterator is dropped."""
        n = _int_arg(buffer_size, "buffer_size", "prefetch")
        if n < -1:
            raise InvalidArgumentError(
                f"Dataset.prefetch: buffer_size must be >= 0 or AUTOTUNE (-1), got {n}")
        return _Prefetch(self, _AUTOTUNE_PREFETCH if n == AUTOTUNE else n)


def _numpy_value(a: np.ndarray):
    if a.ndim == 0:
        return a[()]
    return a if a.flags.writeable else a.copy()


def _flat_shapes(shapes):
    """Leaves of a structure of shapes (tuples of ints are leaves, not structure)."""
    if isinstance(shapes, dict):
        return [x for k in sorted(shapes) for x in _flat_shapes(shapes[k])]
    if isinstance(shapes, tuple) and shapes and all(
            isinstance(s, (tuple, list, dict)) or s is None for s in shapes):
        return [x for s in shapes for x in _flat_shapes(s)]
    return [shapes]


def _batch_size(value, method: str) -> int:
    n = _int_arg(value, "batch_size", method)
    if n <= 0:
        raise InvalidArgumentError(
            f"Dataset.{method}: Batch size must be greater than zero, got {n}")
    return n


# ---------------------------------------------------------------------------
# Sources


class _Slices(Dataset):
    def __init__(self, structure, method):
        flat = _flat(structure)
        if not flat:
            raise ValueError(f"Dataset.{method}: the structure has no tensors")
        for a in flat:
            if a.ndim == 0:
                raise ValueError(
                    f"Dataset.{method}: Unbatching a tensor is only supported for rank >= 1 "
                    f"(got a scalar of dtype {a.dtype.name})")
        lead = list(dict.fromkeys(a.shape[0] for a in flat))  # in order, as TF names them
        if len(lead) > 1:
            shapes = ", ".join(str(list(a.shape)) for a in flat)
            raise ValueError(
                f"Dataset.{method}: Dimensions {' and '.join(str(d) for d in lead)} "
                f"are not compatible: every component must have the same size in its first "
                f"dimension, got shapes {shapes}")
        self._src = _ArraySource(structure)
        self._structure = structure

    def _indices(self):
        return _arange_chunks(self._src.n)

    def _cardinality(self):
        return self._src.n

    def _compute_spec(self):
        return _map(lambda a: TensorSpec(a.shape[1:], a.dtype), self._structure)


class _Range(Dataset):
    def __init__(self, start, stop, step, dtype):
        n = max(0, -(-(stop - start) // step))
        self._src = _RangeSource(start, step, n, np.dtype(TensorSpec((), dtype).dtype.name))

    def _indices(self):
        return _arange_chunks(self._src.n)

    def _cardinality(self):
        return self._src.n

    def _compute_spec(self):
        return TensorSpec((), self._src.dtype)


class _Generator(Dataset):
    def __init__(self, generator, signature, args):
        self._gen_fn, self._sig, self._args = generator, signature, args

    def _elements(self):
        flat_sig = _flat(self._sig)
        for value in self._gen_fn(*self._args):
            if isinstance(value, list) and _is_struct(self._sig):
                value = tuple(value)
            if _is_struct(self._sig) and not _same_structure(value, self._sig):
                raise TypeError(
                    f"Dataset.from_generator: `generator` yielded an element {value!r} whose "
                    f"structure does not match output_signature {self._sig!r}")
            leaves = _flat(value) if _is_struct(self._sig) else [value]
            out = []
            for leaf, spec in zip(leaves, flat_sig):
                a = np.asarray(leaf._value if isinstance(leaf, Tensor) else leaf)
                if a.dtype != spec.dtype.dtype:
                    a = a.astype(spec.dtype.dtype)
                if not spec.is_compatible_with(a):
                    raise InvalidArgumentError(
                        f"Dataset.from_generator: `generator` yielded an element of shape "
                        f"{list(a.shape)} where an element of shape {_shape(spec.shape)} was "
                        "expected")
                out.append(a)
            yield _pack(self._sig, out)

    def _cardinality(self):
        return _UNKNOWN

    def _compute_spec(self):
        return self._sig


class _Zip(Dataset):
    def __init__(self, datasets):
        leaves = _flat(datasets) if _is_struct(datasets) else [datasets]
        for d in leaves:
            if not isinstance(d, Dataset):
                raise TypeError(f"Dataset.zip: every leaf must be a Dataset, got "
                                f"{type(d).__name__}")
        self._datasets, self._leaves = datasets, leaves

    def _elements(self):
        its = [d._elements() for d in self._leaves]
        try:
            for parts in zip(*its):
                yield _pack(self._datasets, list(parts)) if _is_struct(self._datasets) else \
                    parts[0]
        finally:
            for it in its:
                it.close()

    def _cardinality(self):
        ns = [d._cardinality() for d in self._leaves]
        if _UNKNOWN in ns:
            return _UNKNOWN
        finite = [n for n in ns if n != _INF]
        return min(finite) if finite else _INF

    def _compute_spec(self):
        specs = [d.element_spec for d in self._leaves]
        return _pack(self._datasets, specs) if _is_struct(self._datasets) else specs[0]


# ---------------------------------------------------------------------------
# Transformations that keep an index stream


class _Unary(Dataset):
    def __init__(self, upstream: Dataset):
        self._up = upstream

    def _compute_spec(self):
        return self._up.element_spec

    def _cardinality(self):
        return self._up._cardinality()


class _Repeat(_Unary):
    def __init__(self, upstream, count):
        super().__init__(upstream)
        self._count = count
        self._src = upstream._src

    def _epochs(self, open_):
        reps = itertools.count() if self._count < 0 else range(self._count)
        for _ in reps:
            empty = True
            for x in open_():
                empty = False
                yield x
            if empty:  # an empty input repeated forever is empty, not a hang (as TF)
                return

    def _indices(self):
        return self._epochs(lambda: (c for c in self._up._indices() if len(c)))

    def _elements(self):
        if self._src is not None:
            return super()._elements()
        return self._epochs(self._up._elements)

    def _cardinality(self):
        n = self._up._cardinality()
        if self._count == 0 or n == 0:
            return 0
        if self._count < 0:
            return _INF
        return n if n < 0 else n * self._count


class _Take(_Unary):
    def __init__(self, upstream, count):
        super().__init__(upstream)
        self._count = count
        self._src = upstream._src

    def _indices(self):
        left = self._count
        if left < 0:
            yield from self._up._indices()
            return
        if left == 0:
            return
        for c in self._up._indices():
            if len(c) >= left:
                yield c[:left]
                return
            left -= len(c)
            yield c

    def _elements(self):
        if self._src is not None:
            return super()._elements()
        up = self._up._elements()
        return up if self._count < 0 else _closing_islice(up, 0, self._count, 1)

    def _cardinality(self):
        n = self._up._cardinality()
        if self._count < 0:
            return n
        if n == _INF:
            return self._count
        if n == _UNKNOWN:
            return 0 if self._count == 0 else _UNKNOWN
        return min(n, self._count)


def _closing_islice(it, start, stop, step):
    try:
        yield from itertools.islice(it, start, stop, step)
    finally:
        it.close()


class _Skip(_Unary):
    def __init__(self, upstream, count):
        super().__init__(upstream)
        self._count = count
        self._src = upstream._src

    def _indices(self):
        left = self._count
        for c in self._up._indices():
            if left < 0:
                continue
            if left >= len(c):
                left -= len(c)
                continue
            yield c[left:]
            left = 0

    def _elements(self):
        if self._src is not None:
            return super()._elements()
        if self._count < 0:
            return _drained(self._up._elements())
        return _closing_islice(self._up._elements(), self._count, None, 1)

    def _cardinality(self):
        n = self._up._cardinality()
        if n < 0:
            return n
        return 0 if self._count < 0 else max(0, n - self._count)


def _drained(it):
    for _ in it:
        pass
    return
    yield


class _Shard(_Unary):
    def __init__(self, upstream, num_shards, index):
        super().__init__(upstream)
        self._k, self._i = num_shards, index
        self._src = upstream._src

    def _indices(self):
        pos = 0  # the position in the input stream of the chunk's first index
        for c in self._up._indices():
            first = (self._i - pos) % self._k
            if first < len(c):
                yield c[first::self._k]
            pos += len(c)

    def _elements(self):
        if self._src is not None:
            return super()._elements()
        return _closing_islice(self._up._elements(), self._i, None, self._k)

    def _cardinality(self):
        n = self._up._cardinality()
        if n < 0:
            return n
        return n // self._k + (1 if self._i < n % self._k else 0)


class _Shuffle(_Unary):
    def __init__(self, upstream, buffer_size, seed, reshuffle):
        super().__init__(upstream)
        from . import random as _random

        self._size = buffer_size
        self._reshuffle = reshuffle
        self._src = upstream._src
        if seed is None and _random.get_seed() is None:
            self._base = np.random.SeedSequence().entropy  # a new order every run
        elif seed is None:  # a global seed only: reproducible after jt.random.set_seed
            self._base = int(_random.generator(None).integers(2**63))
        else:
            gs = _random.get_seed()
            self._base = [int(seed), 0 if gs is None else gs + 1]
        self._epoch = itertools.count()

    def _rng(self) -> np.random.Generator:
        epoch = next(self._epoch) if self._reshuffle else 0
        base = self._base if isinstance(self._base, list) else [self._base]
        return np.random.default_rng(base + [epoch])

    def _indices(self):
        rng = self._rng()
        up = self._up._indices()
        size = self._size
        try:
            # fill the buffer; an input that fits in it entirely is one permutation
            got, have = [], 0
            for c in up:
                got.append(c)
                have += len(c)
                if have > size:
                    break
            allc = np.concatenate(got) if got else np.zeros(0, np.int64)
            if have <= size:
                if have:
                    yield allc[rng.permutation(have)]
                return
            buf = allc[:size].tolist()
            rest = allc[size:]
            out = []
            draws = iter(())
            for c in itertools.chain([rest], up):
                for x in c.tolist():
                    j = next(draws, None)
                    if j is None:
                        draws = iter(rng.integers(0, size, 4096).tolist())
                        j = next(draws)
                    out.append(buf[j])
                    buf[j] = x
                    if len(out) >= 4096:
                        yield np.array(out, np.int64)
                        out = []
            if out:
                yield np.array(out, np.int64)
            if buf:
                yield np.array(buf, np.int64)[rng.permutation(len(buf))]
        finally:
            up.close()

    def _elements(self):
        if self._src is not None:
            return super()._elements()
        return _shuffled(self._up._elements(), self._size, self._rng())


def _shuffled(it, size, rng):
    """TF's buffer shuffle over any elements."""
    buf = []
    try:
        for x in it:
            buf.append(x)
            if len(buf) >= size:
                break
        draws = iter(())
        for x in it:
            j = next(draws, None)
            if j is None:
                draws = iter(rng.integers(0, size, 1024).tolist())
                j = next(draws)
            yield buf[j]
            buf[j] = x
        for j in rng.permutation(len(buf)).tolist():
            yield buf[j]
    finally:
        it.close()


class _Cache(_Unary):
    def __init__(self, upstream):
        super().__init__(upstream)
        self._src = upstream._src
        self._stored = None  # the first complete epoch: index chunks or elements
        self._lock = threading.Lock()

    def _replay(self, open_, freeze):
        stored = self._stored
        if stored is not None:
            yield from stored
            return
        got = []
        for x in open_():
            got.append(freeze(x))
            yield x
        with self._lock:  # only a complete epoch is kept (an abandoned one is dropped)
            if self._stored is None:
                self._stored = got

    def _indices(self):
        return self._replay(self._up._indices, lambda c: c)

    def _elements(self):
        if self._src is not None:
            return super()._elements()
        return self._replay(self._up._elements, _freeze)


def _freeze(element):
    def f(a):
        a.setflags(write=False)
        return a

    return _map(f, element)


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
# The element_spec of map: trace the function on symbolic tensors


def _traced_spec(fn, upstream: Dataset, method: str):
    """Run ``fn`` once on symbolic tensors shaped like ``upstream``'s elements (a None
    size stays unknown) and read the spec of its result, as tf.data traces map
    functions. A function that needs concrete values (``.numpy()``, Python control flow
    on a tensor) is run on the first element instead."""
    from .dims import new_symbol
    from .ir import Type

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


experimental = types.SimpleNamespace(
    AUTOTUNE=AUTOTUNE, INFINITE_CARDINALITY=INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY=UNKNOWN_CARDINALITY,
    cardinality=lambda dataset: dataset.cardinality(),
)
