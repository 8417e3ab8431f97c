"""The ``Dataset`` class (its constructors and transformation methods), the ``Iterator``
that ``iter(dataset)`` returns, and the source datasets (``from_tensor_slices``,
``from_tensors``, ``range``, ``from_generator``, ``zip``).

The transformation methods import their classes when called: index_transforms and
element_transforms subclass ``Dataset``, so this module cannot import them at load time.
"""

from __future__ import annotations

import os
import types

import numpy as np

from ..errors import InvalidArgumentError
from ..function import TensorSpec
from ..tensor import Tensor
from .structure import (
    _AUTOTUNE_PREFETCH, _INF, _UNKNOWN, AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY,
    _arange_chunks, _ArraySource, _flat, _flat_shapes, _int_arg, _is_struct, _map,
    _normalize, _pack, _RangeSource, _same_structure, _shape, _to_tensor,
)

# ---------------------------------------------------------------------------
# The user-facing iterator


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
        leaves = _flat(datasets) if isinstance(datasets, (tuple, dict)) else []
        if leaves and all(type(d) is _Slices for d in leaves):
            # slices side by side are the slices of the structure side by side: one index
            # stream, so batches keep the fast path (one gather per component)
            n = min(d._src.n for d in leaves)
            return _Slices._of(_map(lambda d: _map(lambda a: a[:n], d._structure), datasets))
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
        from .element_transforms import _Batch

        return _Batch(self, _batch_size(batch_size, "batch"), bool(drop_remainder))

    def padded_batch(self, batch_size, padded_shapes=None, padding_values=None,
                     drop_remainder=False, name=None) -> "Dataset":
        """Like ``batch``, padding each component to ``padded_shapes`` (a ``None`` or -1
        dimension, or ``padded_shapes=None``: the largest size in the batch) with
        ``padding_values`` (default 0)."""
        from .element_transforms import _PaddedBatch

        return _PaddedBatch(self, _batch_size(batch_size, "padded_batch"), padded_shapes,
                            padding_values, bool(drop_remainder))

    def unbatch(self, name=None) -> "Dataset":
        """Split each element along its first axis into rows (the inverse of ``batch``)."""
        from .element_transforms import _Unbatch

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
        from .index_transforms import _Shuffle

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
        from .element_transforms import _Map

        return _Map(self, map_func, workers)

    def filter(self, predicate, name=None) -> "Dataset":
        """The elements for which ``predicate`` (over jt.Tensors, unpacked as in ``map``)
        returns a scalar bool."""
        if not callable(predicate):
            raise TypeError(f"Dataset.filter: predicate must be callable, got {predicate!r}")
        from .element_transforms import _Filter

        return _Filter(self, predicate)

    def repeat(self, count=None, name=None) -> "Dataset":
        """The dataset ``count`` times over (``None`` or -1: forever); each repetition is a
        new epoch of the input (a shuffle before it reshuffles)."""
        n = -1 if count is None else _int_arg(count, "count", "repeat")
        from .index_transforms import _Repeat

        return _Repeat(self, n)

    def take(self, count, name=None) -> "Dataset":
        """The first ``count`` elements (-1: all)."""
        from .index_transforms import _Take

        return _Take(self, _int_arg(count, "count", "take"))

    def skip(self, count, name=None) -> "Dataset":
        """All but the first ``count`` elements (-1: skip everything)."""
        from .index_transforms import _Skip

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
        from .index_transforms import _Shard

        return _Shard(self, k, i)

    def enumerate(self, start=0, name=None) -> "Dataset":
        """``(i, element)`` pairs with an int64 counter from ``start``."""
        from .element_transforms import _Enumerate

        return _Enumerate(self, _int_arg(start, "start", "enumerate"))

    def concatenate(self, dataset, name=None) -> "Dataset":
        """This dataset's elements, then ``dataset``'s (same structure and dtypes)."""
        if not isinstance(dataset, Dataset):
            raise TypeError(f"Dataset.concatenate needs a Dataset, got "
                            f"{type(dataset).__name__}")
        from .element_transforms import _Concatenate

        return _Concatenate(self, dataset)

    def cache(self, filename="", name=None) -> "Dataset":
        """Keep the elements of the first complete epoch in memory and replay them (a
        shuffle before the cache is frozen in that epoch's order, as in TF)."""
        if filename:
            raise NotImplementedError(
                f"Dataset.cache(filename={filename!r}): jt.data caches in memory only; call "
                "cache() without a filename (or save the arrays with np.save yourself)")
        from .index_transforms import _Cache

        return _Cache(self)

    def prefetch(self, buffer_size, name=None) -> "Dataset":
        """Produce up to ``buffer_size`` elements ahead on a background thread while the
        consumer works (``AUTOTUNE``: a small fixed depth; 0: no thread). The thread stops
        when the iteration ends or its iterator is dropped."""
        n = _int_arg(buffer_size, "buffer_size", "prefetch")
        if n < -1:
            raise InvalidArgumentError(
                f"Dataset.prefetch: buffer_size must be >= 0 or AUTOTUNE (-1), got {n}")
        from .element_transforms import _Prefetch

        return _Prefetch(self, _AUTOTUNE_PREFETCH if n == AUTOTUNE else n)


def _numpy_value(a: np.ndarray):
    if a.ndim == 0:
        return a[()]
    return a if a.flags.writeable else a.copy()


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

    @classmethod
    def _of(cls, structure):
        """Slices of a structure of arrays already read-only and of one length."""
        ds = cls.__new__(cls)
        ds._src = _ArraySource(structure)
        ds._structure = structure
        return ds

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


experimental = types.SimpleNamespace(
    AUTOTUNE=AUTOTUNE, INFINITE_CARDINALITY=INFINITE_CARDINALITY,
    UNKNOWN_CARDINALITY=UNKNOWN_CARDINALITY,
    cardinality=lambda dataset: dataset.cardinality(),
)
