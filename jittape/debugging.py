"""Numerics checks: ``check_numerics`` on one tensor, or on every op's output."""

from __future__ import annotations

from .ops.debugging import check_numerics  # noqa: F401
from .tensor import _config


def enable_check_numerics():
    """Raise at the first op whose float output holds NaN or Inf, naming the op and line."""
    _config["check_numerics"] = True


def disable_check_numerics():
    _config["check_numerics"] = False
