"""Scalar bodies of fused kernels: one emitter that every compiling backend wraps with
loops of its own (``cpu``: Numba ``@njit`` loop nests; ``cuda``: a thread per element).

A body value becomes one assignment ``v12 = <expr>``, where ``<expr>`` comes from the
op's ``scalar`` string (declared with the op in ``jittape/ops``) with the input
expressions and attributes filled in. Literals are always typed (``np.float32(0.5)``):
a bare ``0.5`` would make float32 code float64 and halve the vector width.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import Node

# Bumped whenever generated code changes meaning: it is part of every generated file's
# content, so Numba's on-disk cache never serves a kernel from an older generator.
GENERATOR_VERSION = "7.2"


class Unsupported(Exception):
    """A node this backend cannot generate code for (names the op)."""

    def __init__(self, op: str, why: str):
        super().__init__(f"{op}: {why}")
        self.op = op


def np_type(dtype: str) -> str:
    """The numpy scalar constructor for a dtype name, as source text."""
    return "np.bool_" if dtype == "bool" else f"np.{dtype}"


def literal(value, dtype: str) -> str:
    """A typed literal for ``value`` as ``dtype`` (exact: floats print with repr)."""
    v = np.asarray(value).astype(dtype).item()
    if dtype == "bool":
        return "True" if v else "False"
    t = np_type(dtype)
    if isinstance(v, float):
        if math.isnan(v):
            return f"{t}(np.nan)"
        if math.isinf(v):
            return f"{t}({'-' if v < 0 else ''}np.inf)"
        return f"{t}({v!r})"
    return f"{t}({int(v)})"


def scalar_expr(n: Node, args: list) -> str:
    """The expression computing ``n``'s one output from input expressions ``args``."""
    op, out = n.op, n.types[0]
    attrs = dict(n.attrs)
    if op.literal == "uniform":
        return literal(attrs["value"], out.dtype)
    if op.literal == "array":
        a = attrs["value"].array
        if a.size != 1:
            raise Unsupported(op.name, f"a constant of shape {list(a.shape)} is not a scalar")
        return literal(a.reshape(()), out.dtype)
    if op.view == "broadcast" or (op.view == "layout" and out.size == 1):
        return args[0]  # the loads broadcast by index arithmetic
    if op.name == "cast" and out.dtype == "bool":
        return f"({args[0]} != 0)"
    if op.scalar is None:
        raise Unsupported(op.name, "no scalar expression")
    fields = {k: v for k, v in attrs.items() if isinstance(v, (int, float, str, bool))}
    return op.scalar.format(*args, dt=np_type(out.dtype), **fields)


def emit_values(nodes, env: dict, name_of=None, prefix: str = "v") -> list:
    """Kernel IR statements (``Let``) computing ``nodes`` (each with one output), in
    order.

    ``env`` maps value ids to expressions (input loads); it gains a local name for
    every output. Literal leaves are inlined instead of named.
    """
    from .kernel_ir import If, Let, Raise

    stmts = []
    for n in nodes:
        (o,) = n.outputs
        if o in env:  # a constant the kernel takes as an argument
            continue
        args = [env[i] for i in n.inputs]
        expr = scalar_expr(n, args)
        if n.op.int_divisor and np.dtype(n.types[0].dtype).kind in "iu":
            stmts.append(If(f"{args[1]} == 0",
                            (Raise(f"{n.op.name}: Integer division by zero"),)))
        if n.op.literal is not None:
            env[o] = expr
            continue
        name = f"{prefix}{o}" if name_of is None else name_of(prefix, o)
        stmts.append(Let(name, expr, n.op.name))
        env[o] = name
    return stmts


REDUCE_INIT = {
    "add": lambda dt: literal(0, dt),
    "max": lambda dt: literal(-np.inf if np.dtype(dt).kind == "f" else (
        False if dt == "bool" else np.iinfo(dt).min), dt),
    "min": lambda dt: literal(np.inf if np.dtype(dt).kind == "f" else (
        True if dt == "bool" else np.iinfo(dt).max), dt),
    "mul": lambda dt: literal(1, dt),
}


def reduce_step(monoid: str, acc: str, value: str, dtype: str) -> str:
    """The expression that folds ``value`` into the accumulator ``acc``."""
    if monoid == "add":
        if dtype == "bool":
            return f"({acc} | {value})"
        return f"{acc} + {value}"
    if monoid == "max":
        return f"_vm.jt_maximum({acc}, {value})"
    if monoid == "min":
        return f"_vm.jt_minimum({acc}, {value})"
    if monoid == "mul":
        return f"{acc} * {value}"
    raise Unsupported(monoid, "unknown reduction")
