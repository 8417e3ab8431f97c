"""einsum: an equation turned into diagonals, sums, transposes, broadcasting multiplies
and (batched) matmuls, so that it fuses and differentiates as those do."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError, composite
from ..tensor import convert_args, convert_to_tensor
from . import elementwise as E
from . import shaping as S
from .contraction import matmul
from .reduction import reduce_sum


def _parse(equation: str, ranks: list) -> tuple:
    """``(labels per operand, output labels)``: each label a letter, or ``".k"`` for the
    k-th of the broadcast dims an ellipsis stands for (aligned on the right)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise InvalidArgumentError(
            f"einsum: equation {equation!r} has {len(terms)} operands, got {len(ranks)} inputs")
    letters = []
    for t in terms + ([rhs] if arrow else []):
        body = t.replace("...", "")
        bad = [c for c in body if not c.isalpha()]
        if bad or t.count("...") > 1:
            raise InvalidArgumentError(f"einsum: invalid subscripts {t!r} in {equation!r}")
        letters.append(body)
    n_ell = 0
    for t, body, r in zip(terms, letters, ranks):
        k = r - len(body)
        if k < 0 or (k > 0 and "..." not in t):
            raise InvalidArgumentError(
                f"einsum: subscripts {t!r} do not fit an operand of rank {r} ({equation!r})")
        n_ell = max(n_ell, k)
    ell = [f".{j}" for j in range(n_ell)]

    def expand(t, k):
        head, _, tail = t.partition("...")
        return list(head) + (ell[n_ell - k:] if "..." in t else []) + list(tail)

    labels = [expand(t, r - len(b)) for t, b, r in zip(terms, letters, ranks)]
    if arrow:
        if "..." not in rhs and n_ell:
            out = list(rhs)  # the broadcast dims are summed, as numpy does
        else:
            out = expand(rhs, n_ell)
    else:  # implicit: the broadcast dims, then the letters seen once, sorted
        counts = {}
        for ls in labels:
            for c in ls:
                counts[c] = counts.get(c, 0) + 1
        out = ell + sorted(c for c, n in counts.items() if n == 1 and not c.startswith("."))
    if len(set(out)) != len(out):
        raise InvalidArgumentError(f"einsum: an output subscript is repeated in {equation!r}")
    seen = {c for ls in labels for c in ls}
    for c in out:
        if c not in seen:
            raise InvalidArgumentError(
                f"einsum: output subscript {c!r} appears in no input of {equation!r}")
    return labels, out


def _sizes(xs, labels, equation) -> dict:
    """Each label's size; an ellipsis dim of size 1 broadcasts, a letter must agree."""
    size, where = {}, {}
    for i, (x, ls) in enumerate(zip(xs, labels)):
        for c, d in zip(ls, x._type.shape):
            if c not in size or size[c] == d:
                size[c], where[c] = d, where.get(c, i)
                continue
            if c.startswith(".") and 1 in (size[c], d):
                size[c] = max(size[c], d)
                continue
            j = where[c]
            raise InvalidArgumentError(
                f"einsum: index {c!r} has size {size[c]} in operand {j} "
                f"{list(xs[j]._type.shape)} and size {d} in operand {i} "
                f"{list(x._type.shape)} ({equation!r})")
    return size


def _diagonal(x, ls):
    """Repeated labels of one operand (``ii``) become one: the diagonal, by a gather."""
    while len(set(ls)) != len(ls):
        c = next(c for c in ls if ls.count(c) > 1)
        p = ls.index(c)
        q = ls.index(c, p + 1)
        rest = [k for k in range(len(ls)) if k not in (p, q)]
        n = x._type.shape[p]
        x = S.reshape(S.transpose(x, tuple(rest) + (p, q)),
                      tuple(x._type.shape[k] for k in rest) + (n * n,))
        idx = convert_to_tensor(np.arange(n, dtype=np.int32) * (n + 1))
        x = S.gather(x, idx, axis=len(rest))
        ls = [ls[k] for k in rest] + [c]
    return x, ls


def _sum_out(x, ls, keep):
    axes = [k for k, c in enumerate(ls) if c not in keep]
    if axes:
        x = reduce_sum(x, axes)
        ls = [c for c in ls if c in keep]
    return x, ls


def _order(x, ls, want):
    perm = tuple(ls.index(c) for c in want)
    return S.transpose(x, perm)


def _broadcast(x, ls, size):
    shape = tuple(size[c] for c in ls)
    return x if shape == x._type.shape else S.broadcast_to(x, shape)


def _pair(a, la, b, lb, needed, size):
    """``a`` and ``b`` combined: labels of both that are needed later are batch dims,
    the others contracted (a matmul; a broadcasting multiply when there are none)."""
    batch = [c for c in la if c in lb and c in needed]
    contract = [c for c in la if c in lb and c not in needed]
    left = [c for c in la if c not in lb]
    right = [c for c in lb if c not in la]
    a = _broadcast(a, la, size)
    b = _broadcast(b, lb, size)

    def n(cs):
        return int(np.prod([size[c] for c in cs], dtype=np.int64))

    lead = (n(batch),) if batch else ()  # no batch: one 2-d GEMM
    am = S.reshape(_order(a, la, batch + left + contract), lead + (n(left), n(contract)))
    bm = S.reshape(_order(b, lb, batch + contract + right), lead + (n(contract), n(right)))
    if contract and a.dtype.is_floating:
        r = matmul(am, bm)
    else:  # a broadcasting multiply (and a sum: GEMM is for floats only)
        r = E.multiply(S.expand_dims(am, -1), S.expand_dims(bm, -3))
        r = reduce_sum(r, -2)
    labels = batch + left + right
    return S.reshape(r, tuple(size[c] for c in labels)), labels


@composite("einsum")
def einsum(equation, *inputs, **kwargs):
    """Einstein summation: ``einsum("ij,jk->ik", a, b)`` is ``a @ b``. Supports
    transposes, sums, diagonals (``"ii->i"``), outer products, batched matmuls and
    ``...`` broadcasting, for any number of operands (combined left to right).

    Example: ``jt.einsum("bhqd,bhkd->bhqk", q, k)`` are attention scores."""
    kwargs.pop("name", None)
    kwargs.pop("optimize", None)
    if kwargs:
        raise TypeError(f"einsum: unexpected keyword arguments {sorted(kwargs)}")
    if not inputs:
        raise InvalidArgumentError("einsum needs at least one input")
    xs = list(convert_args(tuple(inputs)))
    dts = {x.dtype for x in xs}
    if len(dts) > 1:
        raise InvalidArgumentError(
            "einsum: inputs must have one dtype, got "
            + ", ".join(str(x._type) for x in xs) + " (jittape does not promote: use jt.cast)")
    labels, out = _parse(equation, [x.ndim for x in xs])
    size = _sizes(xs, labels, equation)
    ops = [_diagonal(x, list(ls)) for x, ls in zip(xs, labels)]
    # labels no other operand and not the output has: summed first
    for i, (x, ls) in enumerate(ops):
        others = {c for j, (_, lj) in enumerate(ops) if j != i for c in lj}
        ops[i] = _sum_out(x, ls, others | set(out))
    t, lt = ops[0]
    for k in range(1, len(ops)):
        b, lb = ops[k]
        needed = set(out) | {c for _, lj in ops[k + 1:] for c in lj}
        t, lt = _sum_out(t, lt, needed | set(lb))
        b, lb = _sum_out(b, lb, needed | set(lt))
        t, lt = _pair(t, lt, b, lb, needed, size)
    t, lt = _sum_out(t, lt, set(out))
    return _order(t, lt, out)
