"""Error classes and the user-line finder used in every message."""

from __future__ import annotations

import os
import sys

_PKG_DIRS = tuple(
    os.path.dirname(os.path.abspath(p)) + os.sep
    for p in (__file__, os.path.join(os.path.dirname(__file__), "..", "passes", "x"))
)


class InvalidArgumentError(ValueError):
    """Bad shapes or dtypes for an op, raised eagerly and while tracing alike.

    The message always ends with the user's ``file:line`` (the innermost frame
    outside jittape), wherever in jittape the error is raised.

    ``InvalidArgumentError(format, *values)`` is ``format % values``: a compiled kernel
    raises it so, with the bad value and its position (Numba hands the values on as
    the exception's arguments; formatting them in the kernel would cost its compile a
    string library).
    """

    def __init__(self, message="", *args):
        message = str(message) % args if args else str(message)
        if " (at " not in message:
            loc = user_location(2)
            if loc:
                message += f" (at {loc})"
        super().__init__(message)


class NotFoundError(LookupError):
    """Something that was asked for does not exist."""


class SymbolicTensorError(AttributeError, TypeError):
    """``.numpy()`` of a symbolic tensor: an ``AttributeError`` as in TF (whose symbolic
    tensors have no ``numpy``; code written for TF catches ``AttributeError``), and a
    ``TypeError`` as jittape's other uses of a symbolic value raise."""


def composite(name: str):
    """Decorator for a public function built from other ops: an error raised inside it
    names the function the user called (``softmax: ...``), not only the inner op."""

    def wrap(fn):
        import functools

        @functools.wraps(fn)
        def inner(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except InvalidArgumentError as e:
                msg = str(e)
                if msg.startswith(name):
                    raise
                raise InvalidArgumentError(f"{name}: {msg}") from None

        return inner

    return wrap


_INSIDE: dict = {}  # code file name -> whether it belongs to jittape or passes


def user_frame(skip: int = 1) -> tuple | None:
    """``(file, line)`` of the innermost frame outside jittape and passes, or None.

    Cheap (one dict lookup per frame), so that a tape can note the user's line of
    every op it sees; format it with :func:`format_loc`.
    """
    f = sys._getframe(skip)
    inside = _INSIDE
    while f is not None:
        name = f.f_code.co_filename
        hit = inside.get(name)
        if hit is None:
            hit = inside[name] = os.path.abspath(name).startswith(_PKG_DIRS)
        if not hit:
            return (name, f.f_lineno)
        f = f.f_back
    return None


def format_loc(loc) -> str | None:
    """``file:line`` from :func:`user_frame`'s pair."""
    return None if loc is None else f"{loc[0]}:{loc[1]}"


def user_location(skip: int = 1) -> str | None:
    """``file:line`` of the innermost frame outside jittape and passes."""
    return format_loc(user_frame(skip + 1))


def at(loc) -> str:
    """`` (at file:line)`` for a message, or nothing when the line is unknown."""
    loc = format_loc(loc) if isinstance(loc, tuple) else loc
    return f" (at {loc})" if loc else ""
