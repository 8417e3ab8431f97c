"""Symbolic sizes: a dimension that is unknown while a ``jt.function`` traces.

Part of the IR (``ir.Type`` holds them; this module imports nothing of jittape). A
``TensorSpec([None, 784])`` traces with a :class:`Dim` for its first size, so that one
trace serves every batch size: shape rules compute with it (``784 * s0``, ``s0 // 2``
when exact), two unknown sizes that a rule needs equal become one (``unify``), and a
rule that needs the number itself (``int(d)``) raises :class:`SymbolicSizeError`,
saying which size it is. Before a graph runs, :func:`bind` reads each symbol's value
from the arrays of a call and ``ir.concretize`` substitutes them.

A symbolic size is assumed to be at least 1 and never to stand where broadcasting
would stretch it (as in JAX's shape polymorphism): it broadcasts against 1 and
against itself, not against another number.
"""

from __future__ import annotations

import threading


class SymbolicSizeError(TypeError):
    """A shape rule needed the value of a size that is unknown while tracing."""


class Symbol:
    """One unknown size; symbols that a rule made equal share a root (union-find)."""

    __slots__ = ("name", "origin", "parent")

    def __init__(self, name: str, origin: str):
        self.name = name
        self.origin = origin  # for messages: "dimension 0 of argument 'x'"
        self.parent = None

    def root(self) -> "Symbol":
        s = self
        while s.parent is not None:
            s = s.parent
        return s

    def __repr__(self):
        return self.root().name


_counter = threading.local()


def new_symbol(origin: str) -> "Dim":
    """A fresh unknown size (``s0``, ``s1``, ... per thread and trace: see
    :func:`reset_names`)."""
    n = getattr(_counter, "n", 0)
    _counter.n = n + 1
    return Dim({((Symbol(f"s{n}", origin), 1),): 1})


def reset_names() -> None:
    """Name the next symbols from ``s0`` again (at the start of each trace)."""
    _counter.n = 0


def _canon(terms: dict) -> dict:
    """``terms`` (monomial -> coefficient) with every symbol replaced by its root, like
    monomials merged, and zero coefficients dropped."""
    out: dict = {}
    for mono, c in terms.items():
        powers: dict = {}
        for s, p in mono:
            r = s.root()
            powers[r] = powers.get(r, 0) + p
        key = tuple(sorted(powers.items(), key=lambda sp: sp[0].name))
        out[key] = out.get(key, 0) + c
    return {k: v for k, v in out.items() if v != 0}


def _const(terms: dict):
    """The integer a polynomial is, when it has no symbol left; else None."""
    if not terms:
        return 0
    if len(terms) == 1 and () in terms:
        return terms[()]
    return None


def _make(terms: dict):
    terms = _canon(terms)
    c = _const(terms)
    return c if c is not None else Dim(terms)


class Dim:
    """A size expression: a polynomial in :class:`Symbol` s with integer coefficients.

    Arithmetic with ints and other dims gives dims (or an int when the symbols cancel);
    equality is structural (after unification); every ``Dim`` hashes alike, since
    unifying two symbols can make unequal dims equal."""

    __slots__ = ("terms",)

    def __init__(self, terms: dict):
        self.terms = terms

    # -- structure ---------------------------------------------------------------
    def canon(self) -> dict:
        return _canon(self.terms)

    def symbol(self) -> Symbol | None:
        """The root symbol when this dim is exactly one symbol (``s0``), else None."""
        t = self.canon()
        if len(t) == 1:
            (mono, c), = t.items()
            if c == 1 and len(mono) == 1 and mono[0][1] == 1:
                return mono[0][0]
        return None

    def symbols(self) -> list:
        out = []
        for mono in self.canon():
            for s, _ in mono:
                if s not in out:
                    out.append(s)
        return out

    def evaluate(self, values: dict) -> int:
        """The size for ``values`` (root symbol -> int)."""
        total = 0
        for mono, c in self.canon().items():
            v = c
            for s, p in mono:
                v *= values[s] ** p
            total += v
        return total

    def lower_bound(self) -> int:
        """The least value, with every symbol at least 1 (for positive coefficients)."""
        t = self.canon()
        if any(c < 0 for c in t.values()):
            return -(1 << 62)
        return sum(t.values())

    # -- arithmetic --------------------------------------------------------------
    @staticmethod
    def _terms(x) -> dict:
        if isinstance(x, Dim):
            return x.terms
        if isinstance(x, bool) or not isinstance(x, int):
            try:
                x = x.__index__()
            except (AttributeError, TypeError):
                raise TypeError(f"cannot combine a symbolic size with {x!r}") from None
        return {(): x} if x else {}

    def __add__(self, other):
        t = dict(self.terms)
        for k, v in self._terms(other).items():
            t[k] = t.get(k, 0) + v
        return _make(t)

    __radd__ = __add__

    def __neg__(self):
        return _make({k: -v for k, v in self.terms.items()})

    def __sub__(self, other):
        return self + (-other if isinstance(other, Dim) else -int(other))

    def __rsub__(self, other):
        return (-self) + other

    def __mul__(self, other):
        out: dict = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in self._terms(other).items():
                k = m1 + m2
                out[k] = out.get(k, 0) + c1 * c2
        return _make(out)

    __rmul__ = __mul__

    def __floordiv__(self, other):
        q = self._divide(other)
        if q is None:
            raise SymbolicSizeError(
                f"the size {self} is not a known multiple of {other}: {self.describe()}")
        return q

    def __rfloordiv__(self, other):
        if _const(_canon(self._terms(other))) == 0:
            return 0
        raise SymbolicSizeError(f"{other} // {self} needs the value of {self.describe()}")

    def __mod__(self, other):
        if self._divide(other) is not None:
            return 0
        raise SymbolicSizeError(f"{self} % {other} needs the value of {self.describe()}")

    def _divide(self, other):
        """``self / other`` when it is exact for every value of the symbols, else None."""
        num = self.canon()
        den = _canon(self._terms(other))
        if len(den) != 1:
            return 1 if _make(num) == _make(den) else None
        (dmono, dc), = den.items()
        dpow = dict(dmono)
        out = {}
        for mono, c in num.items():
            powers = dict(mono)
            for s, p in dpow.items():
                if powers.get(s, 0) < p:
                    return None
                powers[s] -= p
            if c % dc:
                return None
            out[tuple((s, p) for s, p in powers.items() if p)] = c // dc
        return _make(out)

    # -- comparisons ---------------------------------------------------------------
    def __eq__(self, other):
        if isinstance(other, Dim):
            return self.canon() == other.canon()
        if isinstance(other, int) and not isinstance(other, bool):
            return False  # a symbolic size is never a known number
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return 0x5D1  # unification may make two dims equal: they must hash alike

    def _cmp(self, other, op):
        if isinstance(other, int) and not isinstance(other, bool):
            low = self.lower_bound()
            # every symbol is at least 1: a bound decides some comparisons
            if op in (">", ">=") and (low > other or (op == ">=" and low >= other)):
                return True
            if op in ("<", "<=") and (low > other or (op == "<" and low >= other)):
                return False
        elif isinstance(other, Dim) and self == other:
            return op in (">=", "<=")
        raise SymbolicSizeError(
            f"comparing the size {self} with {other} needs the value of {self.describe()}")

    def __gt__(self, other):
        return self._cmp(other, ">")

    def __ge__(self, other):
        return self._cmp(other, ">=")

    def __lt__(self, other):
        return self._cmp(other, "<")

    def __le__(self, other):
        return self._cmp(other, "<=")

    def __bool__(self):
        return True  # a size that is at least 1

    # -- what needs a number ---------------------------------------------------------
    def describe(self) -> str:
        syms = self.symbols()
        where = "; ".join(f"{s.name} is {s.origin}" for s in syms)
        return (f"{where}, unknown while tracing (None in the input_signature, or "
                "generalized by reduce_retracing)")

    def __int__(self):
        raise SymbolicSizeError(f"a concrete size is needed here, but {self.describe()}; "
                                "use jt.shape(t) for the size as a tensor, or give that "
                                "dimension a size")

    __index__ = __int__

    def __float__(self):
        return float(self.__int__())

    def __str__(self):
        parts = []
        for mono, c in sorted(self.canon().items(), key=lambda kv: -len(kv[0])):
            names = "*".join(s.name + (f"**{p}" if p != 1 else "") for s, p in mono)
            if not names:
                parts.append(str(c))
            elif c == 1:
                parts.append(names)
            else:
                parts.append(f"{c}*{names}")
        return " + ".join(parts).replace("+ -", "- ") or "0"

    __repr__ = __str__


def is_symbolic(d) -> bool:
    return isinstance(d, Dim)


def unify(a, b) -> bool:
    """Whether sizes ``a`` and ``b`` can be one size. Two unknown symbols that a rule
    needs equal become one (the call checks that the arrays agree); an unknown size
    and a known number are not the same."""
    if a is None or b is None:
        return True
    if not isinstance(a, Dim) and not isinstance(b, Dim):
        return a == b
    if a == b:
        return True
    sa = a.symbol() if isinstance(a, Dim) else None
    sb = b.symbol() if isinstance(b, Dim) else None
    if sa is not None and sb is not None:
        sb.parent = sa
        return True
    return False


def bind(symbols_at, shapes) -> dict:
    """Root symbol -> size for one call: ``symbols_at`` lists ``(k, j, dim)`` (argument
    leaf k's dim j is ``dim``), ``shapes`` the call's array shapes. Raises ``ValueError``
    when two arrays give one symbol different sizes, naming both."""
    values: dict = {}
    first: dict = {}  # root -> the symbol (its origin) that gave its size
    for k, j, dim in symbols_at:
        s = dim.symbol()
        if s is None:
            continue
        own = next(iter(dim.terms))[0][0]  # this dim's own symbol, before unification
        n = shapes[k][j]
        have = values.get(s)
        if have is None:
            values[s] = n
            first[s] = own
        elif have != n:
            raise ValueError(
                f"sizes {have} and {n} for one dimension: {first[s].origin} is {have} but "
                f"{own.origin} is {n}, and the trace took them as equal (a shape rule "
                "matched them: broadcasting, a matmul, labels and logits)")
    return values
