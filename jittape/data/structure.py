"""Element structures for ``jt.data``: nesting (tuples, namedtuples, dicts; other values
are leaves), leaves as read-only arrays with TF's dtypes, specs, argument checks, the
cardinality constants, and the random-access sources an index stream reads."""

from __future__ import annotations

import numpy as np

from .. import nest
from ..function import TensorSpec
from ..tensor import Tensor, Variable, convert_to_tensor

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


def _flat_shapes(shapes):
    """Leaves of a structure of shapes (tuples of ints are leaves, not structure)."""
    if isinstance(shapes, dict):
        return [x for k in sorted(shapes) for x in _flat_shapes(shapes[k])]
    if isinstance(shapes, tuple) and shapes and all(
            isinstance(s, (tuple, list, dict)) or s is None for s in shapes):
        return [x for s in shapes for x in _flat_shapes(s)]
    return [shapes]


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
