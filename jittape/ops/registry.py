"""``defop`` and the registry: every op is declared once, completely.

The registry refuses an incomplete record at import time, so a missing rule
can't stay hidden until a user trips on it.
"""

from __future__ import annotations

import numpy as np

from ..ir import OP_TABLE, OpDef, Type
from ..tensor import apply

REGISTRY: dict[str, OpDef] = OP_TABLE  # the IR's table: passes look ops up by name


def defop(
    name,
    *,
    inputs,
    kind,
    forward,
    infer,
    vjp,
    scalar=None,
    nout=1,
    pure=True,
    effect=False,
    commutative=False,
    domain=None,
    doc="",
    monoid=None,
    cut=False,
    **unknown,
) -> OpDef:
    """Declare an op. ``vjp`` is required: a rule, or ``NO_GRADIENT`` by choice.

    Every field is named: an unknown one (a typo) is refused here, at import, naming
    the op and the field, and so is a value the code generators do not know (a
    reduction's ``monoid`` outside ``ir.MONOIDS``)."""
    if unknown:
        import difflib

        field = sorted(unknown)[0]
        known = [p for p in defop.__code__.co_varnames[:defop.__code__.co_argcount
                                                       + defop.__code__.co_kwonlyargcount]]
        close = difflib.get_close_matches(field, known, n=1)
        raise TypeError(
            f"op {name!r}: defop has no field {field!r}"
            + (f" (did you mean {close[0]!r}?)" if close else "")
            + f"; its fields are {', '.join(k for k in known if k != 'name')}")
    if name in REGISTRY:
        raise ValueError(f"op {name!r} declared twice")
    if vjp is None:
        raise ValueError(f"op {name!r}: vjp missing (use NO_GRADIENT if that is the intent)")
    if kind == "elementwise" and scalar is None:
        raise ValueError(f"elementwise op {name!r} needs a scalar expression for codegen")
    if forward is None and pure:
        raise ValueError(f"op {name!r}: a pure op needs a numpy reference")
    op = OpDef(
        name=name,
        kind=kind,
        nin=inputs,
        forward=forward,
        infer=infer,
        vjp=vjp,
        scalar=scalar,
        nout=nout,
        pure=pure,
        effect=effect,
        commutative=commutative,
        domain=domain,
        doc=doc,
        monoid=monoid,
        cut=bool(cut),
    )
    REGISTRY[name] = op
    return op


def unary(op):
    """The public function for a one-input op."""

    def fn(x, name=None):
        return apply(op, x)

    fn.__name__ = op.name
    fn.__doc__ = op.doc or f"Elementwise {op.name}."
    return fn


def binary(op):
    def fn(x, y, name=None):
        return apply(op, x, y)

    fn.__name__ = op.name
    fn.__doc__ = op.doc or f"Elementwise {op.name}, with numpy broadcasting."
    return fn


# ---------------------------------------------------------------------------
# Shape rules


def broadcast_shapes(*shapes) -> tuple:
    """numpy broadcasting with ``None`` (unknown) dims allowed."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise ValueError(
                "Incompatible shapes: " + " vs. ".join(str(list(s)) for s in shapes)
            )
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def same_dtype(types, what="inputs"):
    dts = {t.dtype for t in types}
    if len(dts) > 1:
        raise TypeError(
            f"{what} must have the same dtype, got " + " and ".join(t.dtype for t in types)
            + " (jittape does not promote dtypes: use jt.cast)"
        )
    return types[0].dtype


def require_float(t: Type, opname: str):
    if not t.is_float:
        raise TypeError(f"{opname} needs a float tensor, got {t.dtype}")


def elementwise_infer(out_dtype=None, float_only=False, int_only=False):
    """Shape rule for elementwise ops: broadcast the inputs, one dtype in."""

    def infer(types, **attrs):
        dt = same_dtype(types)
        if float_only and not types[0].is_float:
            raise TypeError(f"needs a float tensor, got {dt}")
        if int_only and np.dtype(dt).kind not in "iu":
            raise TypeError(f"needs an integer tensor, got {dt}")
        shape = broadcast_shapes(*(t.shape for t in types))
        return Type(shape, out_dtype or dt)

    return infer


def normalize_axis(axis, rank, opname="op") -> tuple:
    """``axis`` (None, int or sequence) as a sorted tuple of non-negative ints."""
    if axis is None:
        return tuple(range(rank))
    if isinstance(axis, (int, np.integer)):
        axis = (int(axis),)
    out = []
    for a in axis:
        a = int(a)
        if not -rank <= a < max(rank, 1):
            raise ValueError(f"{opname}: axis {a} is out of range for rank {rank}")
        out.append(a % rank if rank else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"{opname}: repeated axis in {tuple(axis)}")
    return tuple(sorted(out))
