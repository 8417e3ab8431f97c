"""``defop`` and the registry: every op is declared once, completely.

The registry refuses an incomplete record at import time, so a missing rule
can't stay hidden until a user trips on it.
"""

from __future__ import annotations

import numpy as np

from ..compiler.dims import Dim, SymbolicSizeError, unify
from ..compiler.ir import LOWERING_CHECKS, OP_TABLE, OpDef, Type  # noqa: F401 (LOWERING_CHECKS)
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
    from_types=None,
    view=None,
    cost="normal",
    literal=None,
    inplace=None,
    interpret_only=None,
    int_divisor=False,
    epilogue=False,
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
        from_types=from_types,
        view=view,
        cost=cost,
        literal=literal,
        inplace=inplace,
        interpret_only=interpret_only,
        epilogue=epilogue,
        int_divisor=bool(int_divisor),
    )
    for check in LOWERING_CHECKS:  # every loaded backend has a rule for it, or says why not
        check(op)
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
        known = [d for d in dims if d is not None and d != 1]
        if known:
            # a symbolic size broadcasts against 1 and against itself (two unknown
            # sizes that meet here become one), never against another number
            for d in known[1:]:
                if not unify(known[0], d):
                    raise ValueError(
                        "Incompatible shapes: " + " vs. ".join(_fmt(s) for s in shapes)
                        + _symbolic_hint(known[0], d))
            out.append(known[0])
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def _fmt(shape) -> str:
    return "[" + ", ".join("None" if d is None else str(d) for d in shape) + "]"


def _symbolic_hint(a, b) -> str:
    for d in (a, b):
        if isinstance(d, Dim):
            return f" ({d.describe()}, and it cannot broadcast against {b if d is a else a})"
    return ""


def symbolic_probe(shape, rule):
    """``rule(int_shape, size) -> out_shape`` for a ``shape`` with symbolic sizes: the
    rule runs twice, with each symbol replaced by two different large numbers
    (``size(d)`` gives a size of an attribute, an int or a ``Dim`` of the same symbols,
    under the same replacement), and each out size that changes is written back as
    ``a * s + b`` of the symbol ``s`` it follows (a slice ``[1:]`` of ``s`` gives
    ``s - 1``). For rules that index or slice (numpy probes), whose out sizes are such
    functions of one symbol each."""
    roots = []
    for d in shape:
        if isinstance(d, Dim):
            for r in d.symbols():
                if r not in roots:
                    roots.append(r)
    if not roots:
        return tuple(rule(tuple(shape), lambda d: d))
    p_vals = {r: 1_000_003 + 1000 * j for j, r in enumerate(roots)}
    q_vals = {r: 2_000_029 + 3000 * j for j, r in enumerate(roots)}

    def run(values):
        def size(d):
            if not isinstance(d, Dim):
                return d
            try:
                return d.evaluate(values)
            except KeyError:
                raise SymbolicSizeError(f"{d} is not a size of this shape ({d.describe()})"
                                        ) from None
        return tuple(rule(tuple(size(d) for d in shape), size))

    rp, rq = run(p_vals), run(q_vals)
    out = []
    for a, b in zip(rp, rq):
        if a == b:
            out.append(a)
            continue
        for r in roots:
            slope, rem = divmod(b - a, q_vals[r] - p_vals[r])
            if rem == 0 and slope != 0:
                out.append(Dim({((r, 1),): 1}) * slope + (a - slope * p_vals[r]))
                break
        else:
            raise SymbolicSizeError(f"a size of the result depends on {shape} in a way that "
                                    "needs the sizes' values")
    return tuple(out)


def prod(dims):
    """The product of sizes (ints or symbolic ``Dim`` s: ``784 * s0``)."""
    n = 1
    for d in dims:
        n = n * d
    return n


def same_shape(a, b) -> bool:
    """Whether two shapes a rule needs equal can be (size by size, ``dims.unify``)."""
    return len(a) == len(b) and all(unify(x, y) for x, y in zip(a, b))


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
