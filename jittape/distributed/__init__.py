"""Data-parallel training across processes and machines, over MPI (``mpi4py``).

Each rank trains on its own part of every batch and the gradients are averaged
across ranks before the update, so every rank holds the same weights::

    import jittape as jt
    jt.distributed.init()
    model = make_model()
    opt = jt.distributed.DistributedOptimizer(jt.keras.optimizers.Adam(1e-3))

    @jt.function
    def train_step(x, y):
        with jt.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))  # allreduced first
        return loss

    jt.distributed.broadcast_variables(model.variables)  # rank 0's initial weights

Run it with ``mpiexec -n 4 python train.py``. Install with ``pip install
'jittape[mpi]'`` (mpi4py and MPICH's wheel: nothing else needed on a fresh machine),
or ``pip install mpi4py`` on a cluster with its own MPI.

``init()`` also makes a job end instead of hanging: an uncaught exception on one rank
aborts the job, a collective step that does not complete within ``timeout`` seconds
aborts it naming the rank and step, and each rank's threads are capped so that the
ranks of one machine share its cores.
"""

from __future__ import annotations

from ._world import DEFAULT_TIMEOUT, LayoutError  # noqa: F401
from ._world import _the_world, init, is_initialized, set_timeout  # noqa: F401
from .gradients import (  # noqa: F401
    DistributedGradientTape, DistributedOptimizer, allreduce, allreduce_gradients,
    broadcast, broadcast_variables,
)

__all__ = [
    "init", "is_initialized", "rank", "size", "local_rank", "local_size", "barrier",
    "set_timeout", "allreduce", "allreduce_gradients", "broadcast", "broadcast_variables",
    "DistributedGradientTape", "DistributedOptimizer", "DataParallel", "LayoutError",
]


def rank() -> int:
    """This process's rank in the job (0 .. size() - 1)."""
    return _the_world().rank


def size() -> int:
    """The number of ranks in the job."""
    return _the_world().size


def local_rank() -> int:
    """This process's rank among the ranks on its machine."""
    return _the_world().local_rank


def local_size() -> int:
    """The number of ranks on this process's machine."""
    return _the_world().local_size


def barrier() -> None:
    """Wait until every rank gets here (with the collective timeout)."""
    _the_world().barrier()


def __getattr__(name):
    if name == "DataParallel":  # the Keras part loads the model machinery
        from ..keras.distribution import DataParallel

        return DataParallel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
