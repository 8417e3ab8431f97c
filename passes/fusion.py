"""Elementwise fusion: groups of ops over one iteration space become one ``fused`` node.

A fused node carries its group as a body graph (``attrs["body"]``) whose inputs and
outputs are the node's own, and says how a backend loops over it:

- ``kind="loop"``: elementwise ops (and ``broadcast_to``) whose results all have the
  shape ``space``; inputs broadcast into it by index arithmetic.
- ``kind="reduction"``: a *prologue* of elementwise ops over ``space``, reductions of
  prologue values over ``axes`` (all the same axes and ``keepdims``), and an
  *epilogue* of elementwise ops over the reduced shape ``rspace`` that reads only
  reduction and epilogue values (never the prologue: that would need a second loop).
- ``kind="matmul"``: one ``matmul`` followed by an elementwise epilogue over its
  output (bias add, activation), when ``matmul_epilogue`` is on. A matmul is
  never fused into an elementwise kernel.

Independent groups over the same space (and reduction axes) that read a common input
are merged as siblings: one pass over the input, several outputs.

Small constants and ``fill`` s are copied into every body that reads them (they
become literals). A value computed in one group and read by another group over the
same iteration space is recomputed there when it is cheap (a few arithmetic ops);
otherwise it is materialised as an output of its group.

Groups never create a cycle: merging is refused when a path leaves a group and comes
back to it (checked with ancestor bitsets over groups).
"""

from __future__ import annotations

import heapq


from jittape.compiler.ir import NO_GRADIENT, Graph, GraphError, Node, OpDef, run_node
from jittape.compiler.ir import verify as verify_ir

from .core import graph_pass, max_id

MAX_RECOMPUTE = 3  # nodes copied into a consumer rather than materialising a value
LEAF_LIMIT = 16  # constants up to this many elements are copied into bodies


def is_view(op: OpDef) -> bool:
    """The op's output is its input's storage, whole (an alias, another shape or order,
    a broadcast), and running it computes nothing: no kernel."""
    return op.view in ("alias", "layout", "broadcast") and not op.effect


# ---------------------------------------------------------------------------
# The fused op


def run_body(body: Graph, arrays) -> list:
    """Evaluate a body graph with the ops' numpy references (the reference semantics
    of a fused kernel; backends generate loops instead)."""
    env = dict(zip(body.inputs, arrays))
    for n in body.nodes:
        env.update(zip(n.outputs, run_node(n, [env[i] for i in n.inputs])))
    # a kernel writes its outputs into buffers of its own: never hand back a view of
    # an input (a broadcast_to output, say), whose buffer the caller may reuse
    return [env[o] if env[o].base is None else env[o].copy() for o in body.outputs]


def _fused_forward(*arrays, body, **_):
    out = run_body(body, arrays)
    return tuple(out) if len(out) > 1 else out[0]


def _fused_infer(types, body, **_):
    if len(types) != len(body.inputs):
        raise ValueError(f"fused: {len(types)} inputs for a body of {len(body.inputs)}")
    for k, (a, b) in enumerate(zip(types, body.input_types)):
        if a != b:
            raise ValueError(f"fused: input {k} is {a}, the body expects {b}")
    tys = body.types()
    return tuple(tys[o] for o in body.outputs)


FUSED = OpDef(
    name="fused", kind="fused", nin=None, forward=_fused_forward, infer=_fused_infer,
    vjp=NO_GRADIENT, doc="A fused kernel: its body graph runs as one loop nest.",
)


def is_fused(n: Node) -> bool:
    return n.op is FUSED


def kernels(graph: Graph) -> list:
    """The nodes of ``graph`` that run as kernels: fused groups and every op that is
    not a constant or a view (reshape, broadcast, transpose, identity)."""
    return [n for n in graph.nodes if not is_view(n.op) and n.op.literal != "array"]


def body_phases(n: Node) -> dict:
    """Check that a fused node is one loop nest a backend can generate, and say where
    each body value is computed: ``"pro"`` (the main loop over ``space``), ``"red"`` (a
    reduction accumulated in it), ``"epi"`` (the epilogue over ``rspace``, or over a
    matmul's output), ``"mm"`` (the matmul), ``"leaf"`` (a literal). Code generators
    read the phases from here; the verifier raises what this raises (``GraphError``).
    """
    a = n.attr_dict
    body, kind, space = a["body"], a["kind"], tuple(a["space"])
    if not isinstance(body, Graph):
        raise GraphError("no body graph")
    verify_ir(body)
    if len(body.inputs) != len(n.inputs):
        raise GraphError("inputs do not match the body's")
    btypes = body.types()
    if tuple(btypes[o] for o in body.outputs) != tuple(n.types):
        raise GraphError("output types do not match the body's")
    if not body.outputs:
        raise GraphError("a kernel with no output")
    rspace = tuple(a.get("rspace", space))
    axes = tuple(a.get("axes", ()))
    phase = {}
    seen_mm = False
    for b in body.nodes:
        name, shape = b.op.name, b.types[0].shape
        if b.op.literal is not None:
            phase[b.outputs[0]] = "leaf"
            continue
        if b.op.effect or not b.op.pure:
            raise GraphError(f"{name} has side effects and cannot be fused")
        reads = {phase.get(i, "in") for i in b.inputs}
        if b.op.kind == "matmul" or b.op.epilogue:
            if kind != "matmul" or seen_mm:
                raise GraphError(f"{name} inside a {kind} kernel")
            seen_mm = True
            ph = "mm"
        elif b.op.kind == "reduction":
            if kind != "reduction":
                raise GraphError(f"{name} inside a {kind} kernel")
            if tuple(b.attr_dict["axis"]) != axes or btypes[b.inputs[0]].shape != space:
                raise GraphError(f"{name} does not reduce the kernel's space over its axes")
            if shape != rspace:
                raise GraphError(f"{name} gives {list(shape)}, the kernel's reduced space is "
                                 f"{list(rspace)}")
            if not reads <= {"in", "leaf", "pro"}:
                raise GraphError(f"{name} reads a value computed after the reduction")
            ph = "red"
        elif b.op.kind == "elementwise" or b.op.view == "broadcast":
            if kind == "loop":
                ph = "pro"
            elif kind == "reduction":
                ph = "pro" if shape == space and reads <= {"in", "leaf", "pro"} else "epi"
            else:
                ph = "epi"
            want = space if ph == "pro" or kind == "matmul" else rspace
            if shape != want:
                raise GraphError(f"{name} computes {list(shape)} in a kernel over {list(want)}")
            if ph == "epi" and "pro" in reads:
                raise GraphError(f"epilogue op {name} reads a prologue value")
            if kind == "matmul" and not seen_mm:
                raise GraphError(f"{name} before the matmul of its kernel")
        else:
            raise GraphError(f"{name} ({b.op.kind}) cannot be fused")
        for o in b.outputs:
            phase[o] = ph
    return phase


# ---------------------------------------------------------------------------
# Classification


def _static(t) -> bool:
    return None not in t.shape


def _category(n: Node, types: dict) -> str:
    op = n.op
    if op.effect or not op.pure or len(n.outputs) != 1 or not _static(n.types[0]):
        return "other"
    if op.literal == "uniform" or (op.literal == "array" and n.types[0].size <= LEAF_LIMIT):
        return "leaf"
    if op.kind == "elementwise" and op.scalar is not None and n.inputs:
        return "ew"
    if op.view == "broadcast":  # loops read it by index arithmetic
        return "ew"
    if op.kind == "reduction" and op.monoid and _static(n.types[0]):
        # over size-1 axes only it reduces nothing (simplify makes it a reshape)
        return "red" if types[n.inputs[0]].size != n.types[0].size else "other"
    if op.kind == "matmul" or op.epilogue:  # a GEMM or a convolution, then its epilogue
        return "mm"
    return "other"


class _Group:
    __slots__ = ("gid", "kind", "space", "rspace", "axes", "keepdims", "members", "alive")

    def __init__(self, gid, kind, space, rspace=None, axes=(), keepdims=False):
        self.gid = gid
        self.kind = kind  # loop | reduction | matmul | single
        self.space = space
        self.rspace = rspace if rspace is not None else space
        self.axes = axes
        self.keepdims = keepdims
        self.members: list = []  # [order key, node, phase]; phase: pro | red | epi | mm
        self.alive = True


class _Fuser:
    def __init__(self, graph: Graph, report, matmul_epilogue: bool, recompute: bool):
        self.g = graph
        self.report = report
        self.matmul_epilogue = matmul_epilogue
        self.recompute = recompute
        self.types = graph.types()
        self.groups: list = []
        self.anc: list = []  # gid -> bitmask of groups it depends on (transitively)
        self.parent: list = []
        self.group_of: dict = {}  # value id -> gid of the group computing it
        self.phase_of: dict = {}  # value id -> phase inside its group
        self.leaves: dict = {}  # value id -> leaf node (small const / fill)
        self._next = max_id(graph) + 1

    # -- union-find and dependencies --------------------------------------
    def find(self, g):
        while self.parent[g] != g:
            self.parent[g] = self.parent[self.parent[g]]
            g = self.parent[g]
        return g

    def new_group(self, kind, space, **kw) -> _Group:
        gid = len(self.groups)
        grp = _Group(gid, kind, space, **kw)
        self.groups.append(grp)
        self.anc.append(0)
        self.parent.append(gid)
        return grp

    def deps_of(self, n: Node, last_effect) -> int:
        mask = 0
        for i in n.inputs:
            g = self.group_of.get(i)
            if g is not None:
                g = self.find(g)
                mask |= (1 << g) | self.anc[g]
        if last_effect is not None and n.op.effect:
            g = self.find(last_effect)
            mask |= (1 << g) | self.anc[g]
        return mask

    def creates_cycle(self, members: set, extra_deps: int) -> bool:
        mbits = 0
        for m in members:
            mbits |= 1 << m
        deps = extra_deps
        for m in members:
            deps |= self.anc[m]
        ext = deps & ~mbits
        while ext:
            low = ext & -ext
            h = low.bit_length() - 1
            if self.anc[h] & mbits:
                return True
            ext ^= low
        return False

    def merge(self, target: int, others, role: str = "pro") -> None:
        """Merge the loop groups ``others`` into ``target``, their nodes taking ``role``."""
        mbits = 1 << target
        for o in others:
            mbits |= 1 << o
        anc = 0
        for m in [target, *others]:
            anc |= self.anc[m]
        self.anc[target] = anc & ~mbits
        tg = self.groups[target]
        for o in others:
            og = self.groups[o]
            for mem in og.members:
                if role is not None and role != mem[2]:
                    mem[2] = role
                    for v in mem[1].outputs:
                        self.phase_of[v] = role
                tg.members.append(mem)
            og.alive = False
            og.members = []
            self.parent[o] = target
        rest = mbits & ~(1 << target)
        if rest:
            tbit = 1 << target
            for g, a in enumerate(self.anc):
                if a & rest:
                    self.anc[g] = (a & ~rest) | tbit

    def add(self, grp: _Group, n: Node, key, phase: str, deps: int) -> None:
        self.anc[grp.gid] |= deps & ~(1 << grp.gid)
        grp.members.append([key, n, phase])
        for o in n.outputs:
            self.group_of[o] = grp.gid
            self.phase_of[o] = phase

    # -- grouping ---------------------------------------------------------
    def group(self) -> None:
        last_effect = None
        for k, n in enumerate(self.g.nodes):
            cat = _category(n, self.types)
            if cat == "leaf":
                self.leaves[n.outputs[0]] = n
                continue
            deps = self.deps_of(n, last_effect)
            placed = None
            if cat == "ew":
                placed = self._place_elementwise(n, k, deps)
            elif cat == "red":
                placed = self._place_reduction(n, k, deps)
            if placed is None:
                if cat == "ew":
                    grp = self.new_group("loop", n.types[0].shape)
                    self.add(grp, n, k, "pro", deps)
                elif cat == "red":
                    grp = self._reduction_group(n)
                    self.add(grp, n, k, "red", deps)
                elif cat == "mm":
                    grp = self.new_group("matmul", n.types[0].shape)
                    self.add(grp, n, k, "mm", deps)
                else:
                    grp = self.new_group("single", None)
                    self.add(grp, n, k, "single", deps)
                placed = grp.gid
            if n.op.effect:
                last_effect = placed

    def _reduction_group(self, n: Node) -> _Group:
        a = n.attr_dict
        return self.new_group(
            "reduction", self.types[n.inputs[0]].shape, rspace=n.types[0].shape,
            axes=tuple(a["axis"]), keepdims=bool(a["keepdims"]),
        )

    def _in_groups(self, n: Node) -> dict:
        out: dict = {}
        for i in n.inputs:
            g = self.group_of.get(i)
            if g is not None:
                out.setdefault(self.find(g), []).append(i)
        return out

    def _reads_only(self, members, target: int, phases) -> bool:
        """Whether ``members`` read values of group ``target`` only in ``phases``."""
        for mem in members:
            for i in mem[1].inputs:
                g = self.group_of.get(i)
                if g is not None and self.find(g) == target and self.phase_of[i] not in phases:
                    return False
        return True

    def _place_elementwise(self, n: Node, key, deps):
        """Join ``n`` to the groups it reads from, when they loop over its shape: loop
        groups (merged together), or one reduction or matmul group, as prologue
        (same space, reading prologue values) or epilogue (the reduced or product
        shape, reading its results)."""
        shape = n.types[0].shape
        loops, targets = [], []  # targets: (gid, role)
        for h, vals in self._in_groups(n).items():
            grp = self.groups[h]
            phases = {self.phase_of[v] for v in vals}
            if grp.kind == "loop" and grp.space == shape:
                loops.append(h)
            elif grp.kind == "reduction" and grp.space == shape and phases <= {"pro"}:
                targets.append((h, "pro"))
            elif grp.kind == "reduction" and grp.rspace == shape and phases <= {"red", "epi"}:
                targets.append((h, "epi"))
            elif grp.kind == "matmul" and self.matmul_epilogue and grp.space == shape:
                targets.append((h, "epi"))
        loops.sort(key=lambda h: -len(self.groups[h].members))
        options = []
        for t, role in targets:
            allowed = {"pro"} if role == "pro" else {"red", "epi", "mm"}
            ok = [
                lp for lp in loops
                if not (self.anc[t] >> lp) & 1
                and self._reads_only(self.groups[lp].members, t, allowed)
            ]
            options.append((t, ok, role))
        if loops:
            options.append((loops[0], loops[1:], "pro"))
        options += [(t, [], role) for t, role in targets]
        options += [(lp, [], "pro") for lp in loops[1:]]
        for target, others, role in options:
            if self.creates_cycle({target, *others}, deps):
                continue
            self.merge(target, others, role)
            self.add(self.groups[target], n, key, role, deps)
            return target
        return None

    def _place_reduction(self, n: Node, key, deps):
        (v,) = n.inputs
        h = self.group_of.get(v)
        if h is None:
            return None
        h = self.find(h)
        grp = self.groups[h]
        a = n.attr_dict
        axes, keepdims = tuple(a["axis"]), bool(a["keepdims"])
        space = self.types[v].shape
        if grp.kind == "loop" and grp.space == space:
            grp.kind, grp.axes, grp.keepdims = "reduction", axes, keepdims
            grp.rspace = n.types[0].shape
        elif not (
            grp.kind == "reduction" and grp.space == space and grp.axes == axes
            and grp.keepdims == keepdims and self.phase_of[v] == "pro"
        ):
            return None
        self.add(grp, n, key, "red", deps)
        return h

    # -- siblings -----------------------------------------------------------
    def merge_siblings(self) -> None:
        """Merge independent groups that loop over the same space (and reduce the same
        axes) and read a common input over that whole space: one pass over memory
        instead of two, one kernel with several outputs."""
        seen: dict = {}  # (kind, space, axes, keepdims, rspace) -> [(gid, inputs)]
        for grp in self.groups:
            if not grp.alive or grp.kind not in ("loop", "reduction"):
                continue
            key = (grp.kind, grp.space, grp.axes, grp.keepdims, grp.rspace)
            mine = {
                i for m in grp.members for i in m[1].inputs
                if i not in self.leaves and self.types[i].shape == grp.space
                and (self.group_of.get(i) is None or self.find(self.group_of[i]) != grp.gid)
            }
            for entry in seen.get(key, []):
                h, theirs = entry
                hg = self.groups[h]
                if not hg.alive or not (mine & theirs):
                    continue
                g = grp.gid
                if (self.anc[g] >> h) & 1 or (self.anc[h] >> g) & 1:
                    continue
                if self.creates_cycle({h, g}, 0):
                    continue
                self.merge(h, [g], None)
                entry[1] = theirs | mine
                self.report.note(f"merged sibling kernels over {list(grp.space)}")
                break
            else:
                seen.setdefault(key, []).append([grp.gid, mine])

    # -- recomputing cheap values -------------------------------------------
    def recompute_cheap(self) -> None:
        """Copy a cheap producer chain into a consumer group over the same space, so
        that its value need not be written to memory and read back."""
        node_group = {}
        for grp in self.groups:
            if grp.alive:
                for mem in grp.members:
                    node_group[id(mem[1])] = grp.gid
        for grp in [g for g in self.groups if g.alive and g.kind in ("loop", "reduction")]:
            for mem in list(grp.members):
                n = mem[1]
                if mem[2] not in ("pro",):
                    continue
                new_inputs = list(n.inputs)
                for j, v in enumerate(n.inputs):
                    src = self.group_of.get(v)
                    if src is None:
                        continue
                    src = self.find(src)
                    if src == grp.gid:
                        continue
                    cone = self._cheap_cone(v, src, grp.space)
                    if cone is None:
                        continue
                    new_inputs[j] = self._clone_into(grp, cone, v, mem[0])
                if tuple(new_inputs) != n.inputs:
                    mem[1] = Node(n.op, tuple(new_inputs), n.outputs, n.attrs, n.types, n.loc)

    def _cheap_cone(self, v, src, space):
        sg = self.groups[src]
        if sg.kind not in ("loop", "reduction"):
            return None
        by_out = {o: mem for mem in sg.members for o in mem[1].outputs}
        cone, stack, seen = [], [v], set()
        while stack:
            x = stack.pop()
            mem = by_out.get(x)
            if mem is None or x in seen:
                continue
            seen.add(x)
            n = mem[1]
            if (
                mem[2] != "pro" or n.op.cost != "cheap" or n.types[0].shape != space
                or len(cone) >= MAX_RECOMPUTE
            ):
                return None
            cone.append(mem)
            stack.extend(n.inputs)
        cone.sort(key=lambda m: m[0])
        return cone

    def _clone_into(self, grp: _Group, cone, v, key) -> int:
        ren = {}
        for i, mem in enumerate(cone):
            n = mem[1]
            outs = []
            for o in n.outputs:
                ren[o] = self._next
                outs.append(self._next)
                self._next += 1
            ins = tuple(ren.get(i_, i_) for i_ in n.inputs)
            clone = Node(n.op, ins, tuple(outs), n.attrs, n.types, n.loc)
            grp.members.append([key - 1 + (i + 1) / (len(cone) + 2), clone, "pro"])
            for o, t in zip(clone.outputs, clone.types):
                self.types[o] = t
                self.phase_of[o] = "pro"
        self.report.note(
            f"recomputed {'+'.join(m[1].op.name for m in cone)} (%{v}) inside another kernel"
        )
        return ren[v]

    # -- building the new graph ---------------------------------------------
    def build(self) -> Graph:
        g = self.g
        groups = [grp for grp in self.groups if grp.alive and grp.members]
        for grp in groups:
            # a matmul's epilogue may hold ops recorded before the matmul (they do
            # not feed it): the matmul goes first, the rest keep their order
            grp.members.sort(key=lambda m: (m[2] != "mm", m[0]) if grp.kind == "matmul"
                             else m[0])
        readers: dict = {}  # value -> set of gids reading it (-1: the graph's outputs)
        for grp in groups:
            for mem in grp.members:
                for i in mem[1].inputs:
                    readers.setdefault(i, set()).add(grp.gid)
        for o in g.outputs:
            readers.setdefault(o, set()).add(-1)

        units = []  # (order key, [nodes], produced values, read values)
        leaf_users = set()
        for grp in groups:
            fused = grp.kind in ("loop", "reduction") or (
                grp.kind == "matmul" and len(grp.members) > 1
            )
            if all(is_view(m[1].op) for m in grp.members):
                fused = False  # only views (a broadcast, an identity): no kernel to run
            if not fused:
                nodes = [m[1] for m in grp.members]
            else:
                nodes = self._fused_node(grp, readers)
                if not nodes:  # nothing reads the group: dead code
                    continue
            reads = {i for nd in nodes for i in nd.inputs}
            leaf_users |= reads
            units.append((grp.members[0][0], nodes, reads))
        for o in g.outputs:
            leaf_users.add(o)
        for v, n in self.leaves.items():
            if v in leaf_users:
                units.append((-1, [n], set()))
        return _order(g, units)

    def _fused_node(self, grp: _Group, readers) -> list:
        mine = {o for m in grp.members for o in m[1].outputs}
        outputs = [
            o for m in grp.members for o in m[1].outputs
            if (readers.get(o, set()) - {grp.gid})
        ]
        if not outputs:
            return []
        # drop members nothing needs (their value was recomputed where it is read)
        live = set(outputs)
        body_nodes = []
        for m in reversed(grp.members):
            if any(o in live for o in m[1].outputs):
                body_nodes.append(m[1])
                live.update(m[1].inputs)
        body_nodes.reverse()
        if all(is_view(n.op) for n in body_nodes):
            return body_nodes  # only views left (the rest was recomputed elsewhere)
        # what is left may no longer hold the group's reduction or matmul
        kind, space = grp.kind, grp.space
        kinds = {"matmul" if n.op.epilogue else n.op.kind for n in body_nodes}
        if (kind == "matmul" and "matmul" not in kinds) or (
            kind == "reduction" and "reduction" not in kinds
        ):
            shapes = {n.types[0].shape for n in body_nodes}
            if len(shapes) != 1:  # prologue and epilogue pieces, no reduction: unfused
                return body_nodes
            kind, space = "loop", shapes.pop()
        inputs, leaves, seen = [], [], set()
        for n in body_nodes:
            for i in n.inputs:
                if i in mine or i in seen:
                    continue
                seen.add(i)
                if i in self.leaves:
                    leaves.append(self.leaves[i])
                else:
                    inputs.append(i)
        body = Graph(
            tuple(inputs), tuple(self.types[i] for i in inputs), tuple(leaves + body_nodes),
            tuple(outputs), f"kernel{grp.gid}",
        )
        attrs = {"body": body, "kind": kind, "space": space}
        if kind == "reduction":
            attrs.update(axes=grp.axes, keepdims=grp.keepdims, rspace=grp.rspace)
        self.report.fused += 1
        ops = ", ".join(n.op.name for n in body_nodes)
        self.report.note(f"kernel{grp.gid} ({kind} over {list(space)}): {ops}")
        frozen = tuple(sorted(attrs.items()))
        return [Node(
            FUSED, tuple(inputs), tuple(outputs), frozen,
            tuple(self.types[o] for o in outputs), body_nodes[-1].loc,
        )]


def _order(g: Graph, units) -> Graph:
    """The units in a topological order, as close to the original order as allowed;
    side effects keep their program order."""
    producer = {}
    for u, (_, nodes, _) in enumerate(units):
        for nd in nodes:
            for o in nd.outputs:
                producer[o] = u
    deps = [set() for _ in units]
    for u, (_, nodes, _) in enumerate(units):
        for nd in nodes:
            for i in nd.inputs:
                p = producer.get(i)
                if p is not None and p != u:
                    deps[u].add(p)
    effects = sorted(
        (key, u) for u, (key, nodes, _) in enumerate(units) if any(nd.op.effect for nd in nodes)
    )
    for (_, a), (_, b) in zip(effects, effects[1:]):
        deps[b].add(a)
    users = [[] for _ in units]
    for u, ds in enumerate(deps):
        for d in ds:
            users[d].append(u)
    count = [len(d) for d in deps]
    heap = [(units[u][0], u) for u in range(len(units)) if count[u] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, u = heapq.heappop(heap)
        out.extend(units[u][1])
        for w in users[u]:
            count[w] -= 1
            if count[w] == 0:
                heapq.heappush(heap, (units[w][0], w))
    if len(out) != sum(len(u[1]) for u in units):
        raise AssertionError("fusion produced a cycle")  # the bitset check prevents this
    return Graph(g.inputs, g.input_types, tuple(out), g.outputs, g.name, g.input_names)


@graph_pass("fuse")
def fuse(
    graph: Graph, report, matmul_epilogue: bool = True, recompute: bool = True,
    siblings: bool = True,
) -> Graph:
    """Group elementwise ops into ``fused`` kernels (see the module docstring)."""
    f = _Fuser(graph, report, matmul_epilogue, recompute)
    f.group()
    if siblings:
        f.merge_siblings()
    if recompute:
        f.recompute_cheap()
    return f.build()
