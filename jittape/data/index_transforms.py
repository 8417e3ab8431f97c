"""The transformations that keep an index stream (``repeat``, ``take``, ``skip``,
``shard``, ``shuffle``, ``cache``: over an index stream they pass row indices, over other
elements the elements), and ``_Unary``, the base of every one-input transformation."""

from __future__ import annotations

import itertools
import threading

import numpy as np

from .dataset import Dataset
from .structure import _INF, _UNKNOWN, _map

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
        from .. import random as _random

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
