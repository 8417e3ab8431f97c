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
    """

    def __init__(self, message="", *args):
        message = str(message)
        if " (at " not in message:
            loc = user_location(2)
            if loc:
                message += f" (at {loc})"
        super().__init__(message, *args)


class NotFoundError(LookupError):
    """Something that was asked for does not exist."""


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


def user_location(skip: int = 1) -> str | None:
    """``file:line`` of the innermost frame outside jittape and passes."""
    f = sys._getframe(skip)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_PKG_DIRS):
            return f"{f.f_code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return None
