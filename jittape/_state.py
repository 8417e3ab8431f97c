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


local = _Local()
