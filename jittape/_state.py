"""Thread-local state shared by dispatch, tapes and tracing."""

from __future__ import annotations

import itertools
import threading

_ids = itertools.count(1)


def new_id() -> int:
    """A fresh value id; eager tensors, variables and traced values share one space."""
    return next(_ids)


class _Local(threading.local):
    def __init__(self):
        self.tapes = []  # GradientTapes currently recording, innermost last
        self.tracers = []  # symbolic graph builders, innermost last
        self.variable_reads = []  # stacks of lists collecting Variables read (custom_gradient)
        self.grad_of = []  # recorded nodes whose VJP rule is running, innermost last
        self.name_scopes = []  # jt.name_scope prefixes ("outer/inner/"), innermost last


local = _Local()


def name_scope_prefix() -> str:
    """The innermost ``jt.name_scope`` as a prefix of variable names (``""`` at the top)."""
    scopes = local.name_scopes
    return scopes[-1] if scopes else ""
