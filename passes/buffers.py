"""Buffer reuse: a liveness-based plan of which buffer each intermediate value uses.

Every value a kernel writes (not a view, not a constant, not a graph input or
output) gets a *slot*; a slot is reused by a later value of the same dtype and size
once every value living in it (and every view of it) has been read for the last
time. An elementwise kernel may write into the slot of an input it reads at the same
index if that input dies at this kernel (``inplace``). A backend allocates the slots
once per compiled graph, so a training step allocates only its outputs after the
first call. Graph inputs (the user's data) and outputs are never written over.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from jittape.compiler.ir import Graph, GraphError

from .core import graph_pass
from .fusion import FUSED


def _aliasing(op) -> bool:
    """The op's result lives in its input's storage (``OpDef.view``): the views, basic
    slicing (a numpy view of the sliced array) and ops that hand their input on after
    a check (``check_numerics``): a slot reused while the result is still read would
    change it."""
    return op.view is not None


@dataclass(frozen=True)
class BufferPlan:
    slots: tuple  # (dtype, size) per slot
    assign: tuple  # sorted (value id, slot index)
    inplace: tuple  # (value id, input value id) whose slot it takes over

    def slot_of(self) -> dict:
        return dict(self.assign)

    @property
    def bytes(self) -> int:
        import numpy as np

        return sum(np.dtype(d).itemsize * n for d, n in self.slots)

    def __str__(self):
        return (
            f"{len(self.assign)} intermediate values in {len(self.slots)} buffers "
            f"({self.bytes} bytes), {len(self.inplace)} written in place"
        )


def _roots(graph: Graph) -> dict:
    """value -> the value whose storage it lives in (itself, or what a view views)."""
    root = {v: v for v in graph.inputs}
    for n in graph.nodes:
        if _aliasing(n.op) and n.inputs:
            root[n.outputs[0]] = root[n.inputs[0]]
        else:
            for o in n.outputs:
                root[o] = o
    return root


def _pointwise_inputs(n) -> set:
    """Inputs that ``n`` reads at the same index as it writes (in-place candidates)."""
    if n.op is FUSED:
        a = n.attr_dict
        if a["kind"] != "loop":
            return set()
        space = tuple(a["space"])
        return {i for i, t in zip(n.inputs, a["body"].input_types) if t.shape == space}
    if n.op.inplace and n.op.scalar is not None:
        return set(n.inputs)
    return set()


def _liveness(graph: Graph):
    root = _roots(graph)
    last = {}
    for idx, n in enumerate(graph.nodes):
        for i in n.inputs:
            last[root[i]] = idx
    pinned = {root[v] for v in graph.outputs} | set(graph.inputs)
    return root, last, pinned


def _pooled(n, o, t, pinned) -> bool:
    return (
        not _aliasing(n.op) and n.op.literal != "array" and not n.op.effect
        and o not in pinned and t.size is not None
    )


def gathered(graph: Graph) -> frozenset:
    """Concatenations that an in-place op (a collective) reduces: each gets a buffer
    that no other value shares (kept for the program's life), so that a backend may
    write the concatenated values into it where they are made, before the concat runs
    (no copy)."""
    made = {o: n for n in graph.nodes for o in n.outputs}
    return frozenset(n.inputs[0] for n in graph.nodes if n.op.view == "inplace" and n.inputs
                     and getattr(made.get(n.inputs[0]), "op", None) is not None
                     and made[n.inputs[0]].op.name == "concat")


@graph_pass("plan_buffers")
def plan_buffers(graph: Graph, report, inplace: bool = True) -> Graph:
    """Attach a :class:`BufferPlan` to the graph (``graph.buffers``)."""
    types = graph.types()
    root, last, pinned = _liveness(graph)
    free: dict = {}  # (dtype, size) -> [slot]
    own = gathered(graph)
    slots: list = []
    assign: dict = {}
    pairs = []
    for idx, n in enumerate(graph.nodes):
        taken = set()
        cand = _pointwise_inputs(n) if inplace else set()
        for o in n.outputs:
            t = types[o]
            if not _pooled(n, o, t, pinned):
                continue
            if o in own:  # a buffer of its own, never given to another value
                assign[o] = len(slots)
                slots.append((t.dtype, t.size))
                continue
            slot = None
            for i in n.inputs:
                if (
                    i in cand and i not in taken and root[i] == i and i in assign
                    and last.get(i) == idx and types[i] == t
                    # no other input views the same storage (a transpose of it, say)
                    and all(root.get(j) != i or j == i for j in n.inputs)
                ):
                    slot = assign[i]
                    taken.add(i)
                    pairs.append((o, i))
                    break
            if slot is None:
                pool = free.get((t.dtype, t.size))
                if pool:
                    slot = pool.pop()
                else:
                    slot = len(slots)
                    slots.append((t.dtype, t.size))
            assign[o] = slot
        released = set()
        for v in list(n.inputs) + list(n.outputs):
            r = root.get(v, v)
            if r in released or r in taken or r not in assign or r in own:
                continue
            if last.get(r, -1) <= idx:
                released.add(r)
                free.setdefault((types[r].dtype, types[r].size), []).append(assign[r])
    plan = BufferPlan(tuple(slots), tuple(sorted(assign.items())), tuple(pairs))
    report.rewritten = len(pairs)
    report.note(str(plan))
    return dataclasses.replace(graph, buffers=plan)


def check_plan(graph: Graph, plan: BufferPlan) -> None:
    """Raise :class:`GraphError` if the plan lets a kernel overwrite a live value."""
    types = graph.types()
    root, last, pinned = _liveness(graph)
    slot_of = plan.slot_of()
    inplace = set(plan.inplace)
    occupant: dict = {}
    for idx, n in enumerate(graph.nodes):
        for o in n.outputs:
            s = slot_of.get(o)
            if s is None:
                continue
            if o in pinned:
                raise GraphError(f"%{o} is a graph output or input but has buffer {s}")
            if plan.slots[s] != (types[o].dtype, types[o].size):
                raise GraphError(f"%{o}: {types[o]} does not fit buffer {s} {plan.slots[s]}")
            prev = occupant.get(s)
            if prev is not None and prev not in n.outputs:
                end = last.get(prev, -1)
                ok = end < idx or (
                    end == idx and (o, prev) in inplace and prev in _pointwise_inputs(n)
                    and all(root.get(j) != prev or j == prev for j in n.inputs)
                )
                if not ok:
                    raise GraphError(
                        f"{n.op.name} writes %{o} into buffer {s} while %{prev} "
                        f"(read until node {end}) is still live"
                    )
            occupant[s] = o
