"""The batches ``fit``, ``evaluate`` and ``predict`` iterate (Keras 3's data adapters).

- numpy arrays (or lists, tensors, and lists/tuples/dicts of them for several inputs
  or outputs): batches of ``batch_size`` (32 by default) cut from one shuffled index
  per epoch; floats other than float32 become float32, as Keras makes them floatx;
- a ``jt.data.Dataset`` or any iterable of ``x``, ``(x, y)`` or ``(x, y, sample_weight)``
  batches: taken as they come, one pass per epoch (``steps`` limits it).

``class_weight`` turns the targets into per-sample weights (Keras' rule: the class of
a one-hot row is its argmax), multiplied into any ``sample_weight``.
"""

from __future__ import annotations

import itertools
import math
import numbers

import numpy as np

from ... import nest
from ...tensor import Tensor, Variable, convert_to_tensor

__all__ = ["make_adapter", "split_validation", "unpack_x_y_sample_weight",
           "pack_x_y_sample_weight"]


# ---------------------------------------------------------------------------
# The elements of the data (Keras 3's data_adapter_utils)


def unpack_x_y_sample_weight(data):
    """``(x,)``, ``(x, y)`` or ``(x, y, sample_weight)`` as three values (Keras' rule:
    anything else is ``x`` alone)."""
    if isinstance(data, list):
        data = tuple(data)
    if not isinstance(data, tuple):
        return data, None, None
    if len(data) == 1:
        return data[0], None, None
    if len(data) == 2:
        return data[0], data[1], None
    if len(data) == 3:
        return data
    raise ValueError(
        "Data is expected to be in format `x`, `(x,)`, `(x, y)`, or `(x, y, sample_weight)`, "
        f"found: {data!r:.200}")


def pack_x_y_sample_weight(x, y=None, sample_weight=None):
    if y is None:
        return (x,)
    if sample_weight is None:
        return (x, y)
    return (x, y, sample_weight)


# ---------------------------------------------------------------------------
# The adapters


def _leaf_array(a, what, arg):
    if a is None:
        return None
    if isinstance(a, Variable):
        a = a.numpy()
    elif isinstance(a, Tensor):
        a = a.numpy()
    arr = np.asarray(a)
    if arr.dtype == object:
        raise TypeError(f"{what}: could not make an array of the data given "
                        f"({type(a).__name__}); pass numpy arrays")
    if arr.dtype.kind in "US":
        example = arr.flat[0] if arr.size else ""
        raise TypeError(
            f"{what}: `{arg}` holds strings ({arr.dtype}, e.g. {str(example)!r:.40}), but a "
            "model computes on numbers: map the strings to integer ids first (TF: "
            "tf.keras.layers.StringLookup, which jittape does not have yet; e.g. "
            f"vocab, ids = np.unique({arg}, return_inverse=True))")
    if arr.dtype.kind == "f" and arr.dtype != np.float32:
        arr = arr.astype(np.float32)
    if arr.ndim == 0:
        raise ValueError(f"{what}: expected arrays with a batch dimension, got a scalar")
    return arr


def _as_arrays(s, what, arg):
    """``s`` (the argument ``arg`` of ``what``) as numpy arrays in its structure."""
    if isinstance(s, dict):
        return {k: _as_arrays(v, what, arg) for k, v in s.items()}
    if isinstance(s, (list, tuple)) and s and not isinstance(s[0], numbers.Number) and not (
        isinstance(s[0], (list, tuple)) and s[0] and isinstance(s[0][0], numbers.Number)
    ):
        return type(s)(_as_arrays(v, what, arg) for v in s)
    return _leaf_array(s, what, arg)


def _is_iterable_data(x) -> bool:
    from ...data import Dataset

    if isinstance(x, Dataset):
        return True
    if isinstance(x, (np.ndarray, Tensor, Variable, list, tuple, dict, numbers.Number)):
        return False
    return hasattr(x, "__iter__") or hasattr(x, "__next__")


def _class_weights(y, class_weight, what):
    if isinstance(y, (list, tuple, dict)):
        raise ValueError(f"{what}: `class_weight` is only supported for models with a single "
                         "output")
    if not isinstance(class_weight, dict):
        raise ValueError(f"{what}: `class_weight` must be a dict mapping class indices to "
                         f"weights, got {type(class_weight).__name__}")
    y = np.asarray(y)
    if y.ndim > 1:
        y = np.argmax(y, axis=-1) if y.shape[-1] != 1 else np.squeeze(y, axis=-1)
    classes = np.round(y).astype(np.int64)
    out = np.ones(classes.shape[0], np.float32)
    for c, w in class_weight.items():
        out[classes == int(c)] = float(w)
    return out


def split_validation(x, y, sample_weight, validation_split):
    """``(train (x, y, sw), validation (x, y, sw))``: the last ``validation_split`` of the
    samples (before any shuffling), as Keras splits."""
    if _is_iterable_data(x):
        raise ValueError("`validation_split` is only supported for numpy arrays and tensors, "
                         f"not {type(x).__name__}; pass validation_data instead")
    if not 0 < validation_split < 1:
        raise ValueError(f"validation_split must be in (0, 1), got {validation_split}")
    arrays = (_as_arrays(x, "fit", "x"), _as_arrays(y, "fit", "y"),
              _as_arrays(sample_weight, "fit", "sample_weight"))
    flat = [a for a in nest.flatten(list(arrays)) if a is not None]
    n = int(flat[0].shape[0])
    split = int(math.floor(n * (1.0 - validation_split)))
    if split == 0 or split == n:
        raise ValueError(
            f"Training data contains {n} samples, which is not sufficient to split it into a "
            f"validation and training set as specified by `validation_split="
            f"{validation_split}`. Either provide more data, or a different value for the "
            "`validation_split` argument.")

    def cut(s, lo, hi):
        if s is None:
            return None
        if isinstance(s, dict):
            return {k: cut(v, lo, hi) for k, v in s.items()}
        if isinstance(s, (list, tuple)):
            return type(s)(cut(v, lo, hi) for v in s)
        return s[lo:hi]

    return (tuple(cut(a, 0, split) for a in arrays),
            tuple(cut(a, split, n) for a in arrays))


class _Arrays:
    def __init__(self, x, y, sample_weight, batch_size, shuffle, class_weight, steps, whole,
                 what):
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(
                batch_size, numbers.Integral) or batch_size < 1):
            raise ValueError(f"{what}: batch_size must be a positive int, got {batch_size!r}")
        self.x = _as_arrays(x, what, "x")
        self.y = _as_arrays(y, what, "y")
        self.sw = _as_arrays(sample_weight, what, "sample_weight")
        if self.x is None:
            raise ValueError(f"{what}: no input data (x) was given")
        sizes = {}
        for name, s in (("x", self.x), ("y", self.y), ("sample_weight", self.sw)):
            for a in nest.flatten(s) if s is not None else []:
                if a is not None:
                    sizes.setdefault(name, []).append(int(a.shape[0]))
        all_sizes = {n for v in sizes.values() for n in v}
        if len(all_sizes) > 1:
            detail = " ".join(f"'{k}' sizes: {', '.join(map(str, v))}" for k, v in sizes.items())
            raise ValueError("Data cardinality is ambiguous. Make sure all arrays contain the "
                             f"same number of samples. {detail}")
        self.n = all_sizes.pop()
        if class_weight is not None:
            if self.sw is not None:
                raise ValueError("You cannot `class_weight` and `sample_weight` at the same "
                                 "time.")
            if self.y is None:
                raise ValueError(f"{what}: `class_weight` needs targets (y)")
            cw = _class_weights(self.y, class_weight, what)
            self.sw = cw if self.sw is None else np.asarray(self.sw, np.float32) * cw
        self.batch_size = self.n if whole else int(batch_size or 32)
        self.shuffle = shuffle
        batches = max(1, math.ceil(self.n / self.batch_size)) if self.n else 0
        self.steps = batches if steps is None else min(int(steps), batches)
        self._rng = None
        self._shard = None  # (rank, ranks): this rank's share of each batch

    def shard_over(self, rank: int, ranks: int, seed: int) -> None:
        """Each batch becomes this rank's interleaved share of it (samples ``rank,
        rank + ranks, ...``), in one shuffle order for all ranks (``seed``); a last
        batch with fewer samples than ranks is dropped (a rank would have none)."""
        self._shard = (int(rank), int(ranks))
        self._rng = np.random.default_rng(int(seed))
        if self.steps and self.n - (self.steps - 1) * self.batch_size < ranks:
            self.steps -= 1

    def _order(self):
        if not self.shuffle or self.n <= 1:
            return None
        if self._rng is None:
            from ... import random as _random

            self._rng = np.random.default_rng(int(_random.generator().integers(2 ** 63)))
        if self.shuffle == "batch":
            starts = self._rng.permutation(math.ceil(self.n / self.batch_size))
            return np.concatenate([np.arange(s * self.batch_size,
                                             min((s + 1) * self.batch_size, self.n))
                                   for s in starts])
        return self._rng.permutation(self.n)

    def epoch(self, epoch):
        order = self._order()
        parts = tuple(p for p in (self.x, self.y, self.sw) if p is not None)
        if self.y is None and self.sw is not None:
            parts = (self.x,)
        # the leaves once, so that a batch is one fancy index per array
        leaves = nest.flatten(list(parts))
        plain = all(isinstance(p, np.ndarray) for p in parts)
        for i in range(self.steps):
            lo, hi = i * self.batch_size, min((i + 1) * self.batch_size, self.n)
            idx = slice(lo, hi) if order is None else order[lo:hi]
            if self._shard is not None:
                r, k = self._shard
                idx = slice(lo + r, hi, k) if order is None else idx[r::k]
            cut = [convert_to_tensor(a[idx]) for a in leaves]
            yield tuple(cut) if plain else tuple(nest.pack_sequence_as(list(parts), cut))


class _Iterable:
    def __init__(self, data, class_weight, steps, what):
        self.data = data
        self.class_weight = class_weight
        self.what = what
        self.steps = None if steps is None else int(steps)
        if self.steps is None:
            try:
                n = len(data)
                self.steps = int(n) if n >= 0 else None
            except (TypeError, ValueError):
                pass
        self._it = None
        self._agree = None  # the world, when the ranks agree at each step (unknown length)

    def shard_over(self, rank: int, ranks: int, world) -> None:

        self.data, self.steps, self._agree = shard_iterable(self.data, self.steps, rank,
                                                            ranks, world)
        self._it = None

    def epoch(self, epoch):
        restartable = not (hasattr(self.data, "__next__") and iter(self.data) is self.data)
        if restartable or self._it is None:
            self._it = iter(self.data)
        count = 0
        while self.steps is None or count < self.steps:
            try:
                element = next(self._it)
            except StopIteration:
                if self._agree is not None:

                    all_have(self._agree, False)  # the others stop at this step too
                if restartable or count:
                    return
                raise ValueError(f"{self.what}: the data iterator is exhausted (a generator "
                                 "can be consumed once; pass steps_per_epoch and a generator "
                                 "that loops, or a jt.data.Dataset)") from None
            if self._agree is not None:

                if not all_have(self._agree, True):
                    return  # another rank's data ended: every rank stops here
            x, y, sw = unpack_x_y_sample_weight(element)
            if self.class_weight is not None and y is not None:
                cw = _class_weights(y.numpy() if isinstance(y, Tensor) else y,
                                    self.class_weight, self.what)
                sw = cw if sw is None else np.asarray(sw, np.float32) * cw
            count += 1
            yield tuple(v for v in (x, y, sw) if v is not None) if sw is None else (x, y, sw)


def make_adapter(x, y, sample_weight, batch_size=None, shuffle=False, class_weight=None,
                 steps=None, whole=False, what="fit"):
    """An object with ``steps`` (batches per epoch, or None when unknown) and
    ``epoch(i)`` (an iterator of ``(x,)``, ``(x, y)`` or ``(x, y, sample_weight)``)."""
    if _is_iterable_data(x):
        if y is not None:
            raise ValueError(f"{what}: `y` must not be given when `x` is a dataset or a "
                             "generator (the dataset yields the targets)")
        if sample_weight is not None:
            raise ValueError(f"{what}: `sample_weight` must not be given when `x` is a dataset "
                             "(the dataset yields (x, y, sample_weight))")
        return _Iterable(x, class_weight, steps, what)
    return _Arrays(x, y, sample_weight, batch_size, shuffle, class_weight, steps, whole, what)


# ---------------------------------------------------------------------------
# A rank's share of an iterable (DataParallel)


def shard_iterable(data, steps, rank: int, size: int, world):
    """(data, steps, agree) of an iterable's share: a ``jt.data.Dataset`` by ``shard``,
    others every ``size``-th element from ``rank``; with a known length every rank
    takes ``length // size`` steps, else the ranks agree at each step whether all have
    a batch (``agree``)."""
    n = steps
    if n is None:
        try:
            n = len(data)
        except (TypeError, ValueError):
            n = None
    if hasattr(data, "shard") and callable(data.shard):
        mine = data.shard(size, rank)
    else:
        mine = _Every(data, rank, size)
    if n is not None:
        return mine, int(n) // size, None
    return mine, None, world


class _Every:
    """Every ``size``-th element of an iterable, from ``rank``."""

    def __init__(self, data, rank, size):
        self.data, self.rank, self.size = data, rank, size

    def __iter__(self):
        return itertools.islice(iter(self.data), self.rank, None, self.size)


def all_have(world, have: bool) -> bool:
    """Whether every rank has a batch this step (a 4-byte allreduce)."""
    from ...ops.collective import allreduce

    return int(allreduce(np.array(int(have), np.int32), average=False).numpy()) == world.size
