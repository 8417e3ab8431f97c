"""Gradients and variables across ranks: the fused allreduce, ``DistributedGradientTape``,
``DistributedOptimizer`` and ``broadcast_variables``.

One path for eager code and traces: the gradients of one dtype are flattened into
one buffer (``concat``), the buffer goes through one ``allreduce`` op, and each
gradient is a slice of the result. Eagerly the op calls mpi4py's buffer ``Allreduce``;
inside ``@jt.function`` it is a node of the step's graph, between the backward
kernels and the update, and the compiled kernel calls ``MPI_Allreduce`` itself with
the GIL released (``backends/collective.py``). One message per dtype and step, not
one per tensor.
"""

from __future__ import annotations

from .. import nest
from .. import _state
from ..ops import collective as _coll
from ..ops import concat, reshape
from ..tensor import Tensor, convert_to_tensor
from . import _world


def _world_or_init():
    return _world._the_world()


def _eager(tensors) -> bool:
    return not _state.local.tracers and all(
        getattr(t, "_tracer", None) is None for t in tensors)


def _name(v, k) -> str:
    name = getattr(v, "_label", None) or getattr(v, "name", None)  # TF's name: the path
    return name if isinstance(name, str) else f"<source {k}>"


def _check_eager(world, what: str, desc: tuple) -> None:
    """The first time this rank meets ``desc`` (names, shapes, dtypes), all ranks compare
    theirs; compiled steps are checked by ``MPIWorld.run_step``."""
    if world.size > 1 and isinstance(world, _world.MPIWorld) and desc not in world._checked:
        world.check_layout({"tensors": list(desc)}, what)
        world._checked.add(desc)


def _split(flat_tensors, red):
    out, off = [], 0
    for t in flat_tensors:
        n = 1
        for d in t.shape:
            n = n * d
        out.append(reshape(red[off:off + n], t.shape))
        off = off + n
    return out


def allreduce_gradients(grads, average: bool = True, sources=None):
    """``grads`` (any nesting; ``None`` entries stay ``None``) summed, or averaged, over
    the ranks: one fused buffer per dtype. ``sources`` (the variables, same nesting)
    name the gradients in the first-step check of an eager call."""
    world = _world_or_init()
    if world.size == 1:  # a job of one rank: the mean is the gradient (no op, no copy,
        return grads     # and the update stays fused into the backward kernels)
    flat = nest.flatten(grads)
    ts = [None if g is None else convert_to_tensor(g) for g in flat]
    present = [t for t in ts if t is not None]
    if _eager(present) and world.size > 1:
        srcs = nest.flatten(sources) if sources is not None else [None] * len(ts)
        desc = tuple((_name(s, k), tuple(t.shape) if t is not None else None,
                      t.dtype.name if t is not None else None)
                     for k, (s, t) in enumerate(zip(srcs, ts)))
        _check_eager(world, "the gradients to allreduce", desc)
    groups: dict = {}
    for k, t in enumerate(ts):
        if t is not None:
            groups.setdefault(t.dtype.name, []).append(k)
    out = list(ts)
    for dt in sorted(groups):
        idx = groups[dt]
        members = [ts[k] for k in idx]
        if len(members) == 1 and len(members[0].shape) <= 1:
            out[idx[0]] = _coll.allreduce(members[0], average=average)
            continue
        buf = concat([reshape(t, [-1]) for t in members], 0)
        for k, g in zip(idx, _split(members, _coll.allreduce(buf, average=average))):
            out[k] = g
    return nest.pack_sequence_as(grads, out)


class DistributedGradientTape:
    """A ``jt.GradientTape`` whose ``gradient`` allreduces what it returns (Horovod's
    ``DistributedGradientTape``)::

        with jt.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        tape = jt.distributed.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)  # the ranks' mean

    ``average=False`` sums. Everything else is the wrapped tape's."""

    def __init__(self, tape, average: bool = True):
        object.__setattr__(self, "_tape", tape)
        object.__setattr__(self, "_average", bool(average))

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients=None,
                 **kwargs):
        if unconnected_gradients is not None:
            kwargs["unconnected_gradients"] = unconnected_gradients
        grads = self._tape.gradient(target, sources, output_gradients=output_gradients,
                                    **kwargs)
        return allreduce_gradients(grads, self._average, sources)

    def __enter__(self):
        self._tape.__enter__()
        return self

    def __exit__(self, *exc):
        return self._tape.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self._tape, name)


def DistributedOptimizer(optimizer, average: bool = True):
    """``optimizer`` with its ``apply_gradients`` (and ``apply``, ``minimize``)
    allreducing the gradients first, as Horovod's ``DistributedOptimizer``: before loss
    scaling, clipping and the update, so a clip norm applies to the ranks' mean. The
    same object is returned (its slots, configuration and checkpoints are unchanged)."""
    if not hasattr(optimizer, "apply_gradients"):
        raise TypeError(f"DistributedOptimizer wraps a jt optimizer, got "
                        f"{type(optimizer).__name__}")

    def reduce(grads, variables):
        return allreduce_gradients(list(grads), average, list(variables))

    optimizer._reduce_gradients = reduce
    return optimizer


def _root(root, root_rank):
    return int(root if root_rank is None else root_rank)


def broadcast_variables(variables, root: int = 0, root_rank: int | None = None) -> None:
    """Give every rank rank ``root``'s values of ``variables`` (model weights and
    optimizer slots, so every rank starts from the same state): one broadcast per
    dtype. Eagerly the ranks first check they hold the same variables (names, shapes,
    dtypes); inside a ``jt.function`` the step's first call checks its layout.
    ``root_rank``: Horovod's name for ``root``."""
    root = _root(root, root_rank)
    world = _world_or_init()
    variables = [v for v in nest.flatten(variables) if v is not None]
    if not variables:
        return
    if _eager(variables) and world.size > 1:
        desc = tuple((_name(v, k), tuple(v.shape), v.dtype.name)
                     for k, v in enumerate(variables))
        _check_eager(world, f"the variables to broadcast from rank {root}", desc)
    groups: dict = {}
    for v in variables:
        groups.setdefault(v.dtype.name, []).append(v)
    for dt in sorted(groups):
        vs = groups[dt]
        reads = [v.read_value() if hasattr(v, "read_value") else convert_to_tensor(v)
                 for v in vs]
        buf = concat([reshape(r, [-1]) for r in reads], 0) if len(vs) > 1 else reshape(
            reads[0], [-1])
        got = _coll.broadcast(buf, root=root)
        for v, value in zip(vs, _split(reads, got)):
            v.assign(value)


def broadcast(tensor, root: int = 0, root_rank: int | None = None) -> Tensor:
    """Rank ``root``'s ``tensor`` on every rank (``root_rank``: Horovod's name)."""
    _world_or_init()
    return _coll.broadcast(tensor, root=_root(root, root_rank))


def allreduce(tensor, average: bool = True) -> Tensor:
    """The mean (``average=False``: sum) of ``tensor`` over the ranks."""
    _world_or_init()
    return _coll.allreduce(tensor, average=average)
