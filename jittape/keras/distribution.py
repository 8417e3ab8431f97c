"""``DataParallel``: ``model.fit`` / ``evaluate`` on the ranks of an MPI job.

A strategy-like switch, spelled as TF's ``tf.distribute`` strategies are::

    strategy = jt.distributed.DataParallel()
    with strategy.scope():
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"])
    model.fit(x, y, batch_size=64, epochs=5)   # 64: the global batch, as in TF

What it changes, on every rank of ``mpiexec -n N``:

- the optimizer allreduces the gradients (``DistributedOptimizer``), so a custom
  ``train_step`` is data parallel too;
- before the first step the model's and the optimizer's variables are broadcast from
  rank 0 (every rank starts from rank 0's weights);
- arrays: ``batch_size`` is the global batch; each rank trains on its interleaved
  share of every global batch (rank ``r`` takes samples ``r, r + N, ...`` of it), with
  one shuffle order for all ranks; so N ranks take the steps one process takes with
  the same ``batch_size``. A last global batch with fewer samples than ranks is
  dropped. ``jt.data.Dataset``: each rank reads ``dataset.shard(N, rank)`` (its
  batches are its own: the global batch is N of them), the same number of steps on
  every rank; other iterables: every N-th element, from the rank's own offset;
- epoch logs (``loss``, metrics, ``val_*``) are the whole job's: the metrics' states
  (totals and counts) are summed across ranks before their results are read, so
  every rank sees the same numbers and callbacks such as ``EarlyStopping`` decide
  alike; batch logs are the rank's own;
- rank 0 alone prints progress and runs ``ModelCheckpoint``, ``CSVLogger`` and the
  progress bar; other callbacks run on every rank.
"""

from __future__ import annotations

import contextlib
import threading
import warnings

import numpy as np

_ACTIVE = threading.local()

# callbacks that write files or the terminal: rank 0's job
_RANK0_ONLY = ("ModelCheckpoint", "CSVLogger", "ProgbarLogger", "TensorBoard",
               "BackupAndRestore")


def active():
    """The ``DataParallel`` whose ``scope()`` is open on this thread, or None."""
    stack = getattr(_ACTIVE, "stack", None)
    return stack[-1] if stack else None


class DataParallel:
    """Data parallelism across the ranks of the MPI job (see the module's doc)."""

    def __init__(self, timeout: float | None = None):
        from ..distributed import init

        init(timeout=timeout)
        from ..ops.collective import WORLD

        self.world = WORLD[0]

    @property
    def num_replicas_in_sync(self) -> int:
        return self.world.size

    @property
    def rank(self) -> int:
        return self.world.rank

    @contextlib.contextmanager
    def scope(self):
        """Models compiled inside train data parallel."""
        stack = getattr(_ACTIVE, "stack", None)
        if stack is None:
            stack = _ACTIVE.stack = []
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()

    # -- what the trainer asks ----------------------------------------------------------
    def wrap_optimizer(self, optimizer):
        from ..distributed.gradients import DistributedOptimizer

        return DistributedOptimizer(optimizer) if optimizer is not None else None

    def verbose(self, verbose: int) -> int:
        return verbose if self.world.rank == 0 else 0

    def callbacks(self, callbacks):
        """The callbacks this rank runs: all on rank 0; the others skip the ones that
        write files or print."""
        if callbacks is None or self.world.rank == 0:
            return callbacks
        keep = []
        for cb in (callbacks if isinstance(callbacks, (list, tuple)) else [callbacks]):
            if type(cb).__name__ in _RANK0_ONLY or getattr(cb, "_rank0_only", False):
                continue
            keep.append(cb)
        return keep

    def shard(self, adapter, what: str):
        """Give ``adapter`` (``data_adapter``'s) this rank's share of the data."""
        from .trainers import data_adapter as _da
        from ..distributed.gradients import broadcast

        r, n = self.world.rank, self.world.size
        if isinstance(adapter, _da._Arrays):
            # one shuffle order for all ranks: rank 0's seed
            from .. import random as _random

            seed = np.array(int(_random.generator().integers(2 ** 62)), np.int64)
            seed = int(broadcast(seed, 0).numpy())
            adapter.shard_over(r, n, seed)
            if adapter.steps == 0 and adapter.n:
                raise ValueError(f"{what}: {adapter.n} samples cannot be shared by {n} ranks "
                                 f"in batches of {adapter.batch_size}")
        else:
            adapter.shard_over(r, n, self.world)
        return adapter

    def start(self, model) -> None:
        """Before the first step: every rank takes rank 0's weights and optimizer state."""
        from ..distributed.gradients import broadcast_variables

        variables = list(model.variables)
        opt = getattr(model, "optimizer", None)
        if opt is not None and hasattr(opt, "variables"):
            seen = {id(v) for v in variables}
            variables += [v for v in opt.variables if id(v) not in seen]
        broadcast_variables(variables, root=0)

    def sum_metrics(self, model) -> None:
        """Sum every metric's state over the ranks (its result is then the job's)."""
        from ..distributed.gradients import allreduce_gradients

        variables = []
        for m in model.metrics:
            for v in m.variables:
                if v.dtype.name in ("float32", "float64", "int32", "int64"):
                    variables.append(v)
                elif not getattr(self, "_warned", False):
                    self._warned = True
                    warnings.warn(f"DataParallel: metric {m.name!r} has a {v.dtype.name} "
                                  "state, which is not summed across ranks", stacklevel=3)
        if not variables:
            return
        summed = allreduce_gradients([v.read_value() for v in variables], average=False,
                                     sources=variables)
        for v, s in zip(variables, summed):
            v.assign(s)


__all__ = ["DataParallel", "active"]
