"""Nested structures (lists, tuples, namedtuples, dicts) of tensors, as tf.nest."""

from __future__ import annotations


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def flatten(structure) -> list:
    """Leaves in order; dicts by sorted key, as tf.nest does."""
    out, stack = [], [structure]
    while stack:
        s = stack.pop()
        if isinstance(s, dict):
            stack.extend(s[k] for k in reversed(sorted(s)))
        elif isinstance(s, (list, tuple)):
            stack.extend(reversed(s))
        else:
            out.append(s)
    return out


def pack_sequence_as(structure, flat):
    """Rebuild ``structure``'s nesting from the leaves in ``flat``."""
    return _build(structure, iter(flat))


def _build(s, it):
    # a module-level function, not a recursive closure: a closure that refers to itself
    # is a reference cycle that would keep ``flat`` (the caller's gradients) alive until
    # the garbage collector runs
    if isinstance(s, dict):
        vals = {k: _build(s[k], it) for k in sorted(s)}
        return type(s)((k, vals[k]) for k in s) if type(s) is not dict else {
            k: vals[k] for k in s
        }
    if _is_namedtuple(s):
        return type(s)(*[_build(x, it) for x in s])
    if isinstance(s, (list, tuple)):
        return type(s)([_build(x, it) for x in s])
    return next(it)
