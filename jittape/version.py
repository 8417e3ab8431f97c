"""jittape's version: one place, below every other module (``.keras`` archives record it)."""

__version__ = "0.1.0"
