"""Error classes and the user-line finder used in every message."""

from __future__ import annotations

import os
import sys

_PKG_DIRS = tuple(
    os.path.dirname(os.path.abspath(p)) + os.sep
    for p in (__file__, os.path.join(os.path.dirname(__file__), "..", "passes", "x"))
)


class InvalidArgumentError(ValueError):
    """Bad shapes or dtypes for an op, raised eagerly and while tracing alike."""


class NotFoundError(LookupError):
    """Something that was asked for does not exist."""


def user_location(skip: int = 1) -> str | None:
    """``file:line`` of the innermost frame outside jittape and passes."""
    f = sys._getframe(skip)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_PKG_DIRS):
            return f"{f.f_code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return None
