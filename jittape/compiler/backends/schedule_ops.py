"""The scheduler's kernels for ops that are not fused: argmax/argmin, gather,
scatter_add, one_hot, concat, strided_slice_grad, check_numerics, the scans (cumsum,
cumprod), argsort and the linear algebra ops, each a loop nest of its own (a mixin of
``schedule.Scheduler``; the bodies of fused kernels are ``schedule_fused.py``'s)."""

from __future__ import annotations

import numpy as np

from ..ir import decode_index
from . import collective
from .emit import literal
from .kernel_ir import Fill, If, Let, Load, Loop, Raise, Store, Update, View
from .kernel_names import _d, _dprod, _nest, fmt_key


class OpKernels:
    """``op_<name>`` lowerings that write a kernel of their own (``Scheduler.node`` opens
    its scope); they use the scheduler's ``dest``, ``contiguous``, ``kernel``, ``types``
    and ``val``."""

    def _three(self, shape, axis):
        """The (before, along, after) sizes around ``axis``, as expressions."""
        return (_dprod(shape[:axis]), _d(shape[axis]) if len(shape) else "1",
                _dprod(shape[axis + 1:]))

    def op_argmax(self, n, cmp=">"):
        (x,), o = n.inputs, n.outputs[0]
        shape, dt = self.types[x].shape, self.types[x].dtype
        ax = int(dict(n.attrs)["axis"])
        P, N, Q = self._three(shape, ax)
        d = self.dest(o)
        scan = Loop("k", N, (
            Load("v", "x", ("p", "k", "q")),
            If(f"v {cmp} best or (v != v and best == best)", (Let("best", "v"), Let("at", "k"))),
        ), start="1")
        body = [
            View("x", "a0", "reshape", (P, N, Q)),
            View("o", "r0", "reshape", (P, Q)),
            *_nest(["p", "q"], [P, Q], [Load("best", "x", ("p", "0", "q")), Let("at", "0"),
                                        scan, Store("o", ("p", "q"), "at")], False),
        ]
        name = n.op.name
        self.kernel(lambda ts: f"{name} over axis {ax} of {ts(shape, dt)}",
                    [("a0", self.contiguous(x)), ("r0", d)], body, False, False)

    def op_argmin(self, n):
        self.op_argmax(n, "<")

    def op_gather(self, n):
        p_, i_ = n.inputs
        o = n.outputs[0]
        ax = int(dict(n.attrs)["axis"])
        ps, dt = self.types[p_].shape, self.types[p_].dtype
        P, N, Q = self._three(ps, ax)
        M = _dprod(self.types[i_].shape)
        d = self.dest(o)
        body = [
            View("p", "a0", "reshape", (P, N, Q)),
            View("ix", "a1", "reshape", (M,)),
            View("o", "r0", "reshape", (P, M, Q)),
            _index_check("gather", self.types[i_].shape, N),
            *_nest(["pp", "m"], [P, M], [
                Load("j", "ix", ("m",)),
                Loop("q", Q, (Store("o", ("pp", "m", "q"), "p[pp, j, q]"),)),
            ], False),
        ]
        self.kernel(lambda ts: f"gather along axis {ax} of {ts(ps, dt)}",
                    [("a0", self.contiguous(p_)), ("a1", self.contiguous(i_)), ("r0", d)],
                    body, False, False)

    def op_scatter_add(self, n):
        g_, i_ = n.inputs
        o = n.outputs[0]
        a = dict(n.attrs)
        ax, shape, dt = int(a["axis"]), tuple(a["shape"]), n.types[0].dtype
        P, N, Q = self._three(shape, ax)
        M = _dprod(self.types[i_].shape)
        d = self.dest(o)
        body = [
            View("g", "a0", "reshape", (P, M, Q)),
            View("ix", "a1", "reshape", (M,)),
            View("o", "r0", "reshape", (P, N, Q)),
            Fill("o", "0"),
            _index_check("scatter_add", self.types[i_].shape, N),
            *_nest(["pp", "m"], [P, M], [
                Load("j", "ix", ("m",)),
                Loop("q", Q, (Update("o[pp, j, q]", "+", "g[pp, m, q]"),)),
            ], False),
        ]
        self.kernel(lambda ts: f"scatter_add along axis {ax} into {ts(shape, dt)}",
                    [("a0", self.contiguous(g_)), ("a1", self.contiguous(i_)), ("r0", d)],
                    body, False, False)

    def op_one_hot(self, n):
        (i_,), o = n.inputs, n.outputs[0]
        a = dict(n.attrs)
        ishape, idt = self.types[i_].shape, self.types[i_].dtype
        ax = int(a["axis"])
        ax = len(ishape) if ax < 0 else ax
        depth, dt = int(a["depth"]), n.types[0].dtype
        P, Q = _dprod(ishape[:ax]), _dprod(ishape[ax:])
        d = self.dest(o)
        on, off = literal(a["on_value"], dt), literal(a["off_value"], dt)
        strict = a.get("strict", "")
        if strict:  # labels (ops/shaping.py: check_labels): out of range raises
            bad = Raise(f"{strict}: Received a label value of %d which is outside the "
                        f"valid range of [0, {depth})", ("k",))
            put = [If(f"k < 0 or k >= {depth}", (bad,)), Store("o", ("p", "k", "q"), on)]
        else:  # tf.one_hot: out of range leaves the row off
            put = [If(f"k >= 0 and k < {depth}", (Store("o", ("p", "k", "q"), on),))]
        # fill with off_value (a vectorized store), then set one element per index:
        # the select per element ran at a fifth of the memory's speed
        body = [
            View("ix", "a0", "reshape", (P, Q)),
            View("o", "r0", "reshape", (P, str(depth), Q)),
            View("flat", "r0", "reshape", (f"{P} * {depth} * {Q}",)),
            Loop("j", "flat.shape[0]", (Store("flat", ("j",), off),)),
            *_nest(["p", "q"], [P, Q], [Load("k", "ix", ("p", "q")), *put], False),
        ]
        what = f"labels of {strict}, one_hot" if strict else "one_hot"
        self.kernel(lambda ts: f"{what} depth {depth} of {ts(ishape, idt)}",
                    [("a0", self.contiguous(i_)), ("r0", d)], body, False, False)

    def op_concat(self, n):
        o = n.outputs[0]
        ax = int(dict(n.attrs)["axis"])
        shape, dt = n.types[0].shape, n.types[0].dtype
        P, N, Q = self._three(shape, ax)
        gathered = o in self.val  # its inputs' kernels wrote into it (plan_homes)
        d = self.val[o].var if gathered else self.dest(o)
        placed = {v for v, (c, _) in self.homes.items() if c == o} if gathered else set()
        args = [("r0", d)]
        body = [View("o", "r0", "reshape", (P, N, Q))]
        off = "0"
        for j, x in enumerate(n.inputs):
            m = _d(self.types[x].shape[ax])
            end = m if off == "0" else f"{off} + {m}"
            if x in placed or self._reshaped_from(x) in placed:
                off = end  # already in place
                continue
            args.append((f"a{j}", self.contiguous(x)))
            body.append(Store("o", (":", f"{off}:{end}", ":"), f"a{j}.reshape(({P}, {m}, {Q}))"))
            off = end
        if len(args) == 1:  # every part was written in place: nothing to copy
            return
        self.kernel(lambda ts: f"concat along axis {ax} into {ts(shape, dt)}",
                    args, body, False, False)

    def op_strided_slice_grad(self, n):
        (g_,), o = n.inputs, n.outputs[0]
        a = dict(n.attrs)
        shape, key, dt = tuple(a["shape"]), tuple(a["key"]), n.types[0].dtype
        sel = np.empty(shape, dtype=bool)[decode_index(tuple(k for k in key if k != "newaxis"))]
        plain = tuple(k for k in key if k != "newaxis")
        d = self.dest(o)
        sel_shape = "(" + "".join(f"{_d(x)}, " for x in sel.shape).rstrip(" ") + ")"
        body = [Fill("r0", "0"), Store("r0", (fmt_key(plain),), f"a0.reshape({sel_shape})")]
        self.kernel(lambda ts: f"strided_slice_grad into {ts(shape, dt)}",
                    [("a0", self.contiguous(g_)), ("r0", d)], body, False, False)

    def op_check_numerics(self, n):
        (x,), o = n.inputs, n.outputs[0]
        t = self.types[x]
        msg = str(dict(n.attrs)["message"])
        if not t.is_float:
            self.val[o] = self.val[x]
            return
        m = {k: f"{msg} : Tensor had {k} values" for k in ("NaN", "Inf", "Inf and NaN")}
        body = [
            Let("nan", "False"),
            Let("inf", "False"),
            View("flat", "a0", "flat"),
            Loop("j", "flat.shape[0]", (
                Load("v", "flat", ("j",)),
                If("v != v", (Let("nan", "True"),)),
                If("v == np.inf or v == -np.inf", (Let("inf", "True"),)),
            )),
            If("nan and inf", (Raise(m["Inf and NaN"]),)),
            If("nan", (Raise(m["NaN"]),)),
            If("inf", (Raise(m["Inf"]),)),
        ]
        self.kernel(lambda ts: f"check_numerics of {ts(t.shape, t.dtype)}",
                    [("a0", self.val[x].var)], body, False, False)
        self.val[o] = self.val[x]

    # -- collectives: the MPI library called from the kernel (backends/collective.py) --
    def _uses_and_producers(self) -> tuple:
        """(value -> how many node inputs read it, value -> the node that makes it), of
        the graph being scheduled (made once)."""
        got = getattr(self, "_graph_maps", None)
        if got is None:
            uses: dict = {}
            for m in self.g.nodes:
                for i in m.inputs:
                    uses[i] = uses.get(i, 0) + 1
            got = self._graph_maps = (uses, {o: m for m in self.g.nodes for o in m.outputs})
        return got

    def _reshaped_from(self, x):
        """The value ``x`` is a reshape of (its producer's input), or None."""
        m = self._uses_and_producers()[1].get(x)
        return m.inputs[0] if m is not None and m.op.name == "reshape" else None

    def plan_homes(self) -> dict:
        """``value -> (concat output, offset)`` for the values a collective's concat
        gathers (the gradients of a step, into one buffer per dtype), each made by a
        kernel and read by nothing else: their kernels write them into the concat's
        buffer (``_dest``), and the concat copies nothing. The buffer plan gives such a
        concat a slot that no other value shares (``passes.buffers.gathered``)."""
        from passes.buffers import gathered

        g = self.g
        own = gathered(g)
        if not own:
            return {}
        uses, made = self._uses_and_producers()
        outs, ins = set(g.outputs), set(g.inputs)
        homes = {}
        for c in (made[v] for v in own):
            t = c.types[0]
            if len(t.shape) != 1 or not isinstance(t.shape[0], int) or c.outputs[0] in outs \
                    or c.outputs[0] not in self.slot_of:
                continue
            off = 0
            for x in c.inputs:
                v, p = x, made.get(x)
                if p is not None and p.op.name == "reshape" and uses.get(x) == 1:
                    v, p = p.inputs[0], made.get(p.inputs[0])  # reshape(g, [-1])
                shape = self.types[v].shape
                if (p is not None and p.op.view is None and p.op.literal is None
                        and not p.op.effect and uses.get(v) == 1 and v not in outs
                        and v not in ins and len(shape) > 0
                        and all(isinstance(d, int) and d > 0 for d in shape)):
                    homes[v] = (c.outputs[0], off)
                off += int(np.prod(self.types[x].shape, dtype=np.int64))
        return homes

    def _dies_here(self, x) -> bool:
        """Whether ``x`` is a buffer of the step's own that only the collective reading
        it reads (not a view, an input, a constant or an output): the collective may
        then reduce it in place (the op's ``view="inplace"`` keeps its slot alive)."""
        uses, made = self._uses_and_producers()
        producer = made.get(x)
        return (producer is not None and producer.op.view is None
                and producer.op.literal is None and uses.get(x) == 1
                and x not in self.out_pos and self.val[x].contig
                and len(self.types[x].shape) > 0)

    def _collective(self, n, what, body_fn):
        (x,), o = n.inputs, n.outputs[0]
        t = self.types[x]
        k = len(self.consts)
        self.consts.append(collective.table(t.dtype))  # filled by distributed.init
        size = _dprod(t.shape)
        imports = (("jittape.compiler.backends.collective", "_coll"),)
        if self._dies_here(x):  # reduced where it lies: no copy, no new buffer
            self.val[o] = self.val[x]
            body = [View("r", "r0", "reshape", (size,)), *body_fn(size)]
            self.kernel(lambda ts: f"{what} in place of {ts(t.shape, t.dtype)}",
                        [("r0", self.val[x].var), ("h0", f"c{k}")], body, False, False,
                        imports=imports)
            return
        d = self.dest(o)
        body = [View("a", "a0", "reshape", (size,)), View("r", "r0", "reshape", (size,)),
                Store("r", (":",), "a"), *body_fn(size)]
        self.kernel(lambda ts: f"{what} of {ts(t.shape, t.dtype)}",
                    [("a0", self.contiguous(x)), ("r0", d), ("h0", f"c{k}")], body, False,
                    False, imports=imports)

    def op_allreduce(self, n):
        average = bool(dict(n.attrs)["average"])
        err = (Raise("allreduce: the MPI library returned an error"),)

        def body(size):
            out = [
                If("h0[4] > 1 and h0[0] == 0", (Raise(
                    "allreduce: jittape.distributed found no MPI_Allreduce to call"),)),
                If("h0[4] > 1", (Let("rc", "_coll.allreduce(h0, r)"), If("rc != 0", err))),
            ]
            if average:
                out.append(If("h0[4] > 1", (Loop("j", size, (
                    Store("r", ("j",), "r[j] / h0[4]"),)),)))
            return out

        self._collective(n, "mean allreduce" if average else "sum allreduce", body)

    def op_broadcast(self, n):
        root = int(dict(n.attrs)["root"])
        err = (Raise("broadcast: the MPI library returned an error"),)
        self._collective(n, f"broadcast from rank {root}", lambda size: [
            If("h0[4] > 1 and h0[5] == 0", (Raise(
                "broadcast: jittape.distributed found no MPI_Bcast to call"),)),
            If("h0[4] > 1", (Let("rc", f"_coll.bcast(h0, r, {root})"), If("rc != 0", err))),
        ])

    def op_cumsum(self, n, step="+", identity="0"):
        """Row by row along the axis: each element from the one before it (inner loop
        over the trailing axes, in memory order)."""
        (x,), o = n.inputs, n.outputs[0]
        a = dict(n.attrs)
        shape, dt = self.types[x].shape, self.types[x].dtype
        ax, exclusive, reverse = int(a["axis"]), bool(a["exclusive"]), bool(a["reverse"])
        P, N, Q = self._three(shape, ax)
        d = self.dest(o)
        first, prev = (f"{N} - 1", "k + 1") if reverse else ("0", "k - 1")
        src = prev if exclusive else "k"
        head = literal(int(identity), dt) if exclusive else f"x[p, {first}, q]"
        rows = Loop("kk", N, (
            Let("k", f"{N} - 1 - kk" if reverse else "kk"),
            Loop("q", Q, (Store("o", ("p", "k", "q"), f"o[p, {prev}, q] {step} x[p, {src}, q]"),)),
        ), start="1")
        body = [
            View("x", "a0", "reshape", (P, N, Q)),
            View("o", "r0", "reshape", (P, N, Q)),
            If(f"{N} > 0", tuple(_nest(["p"], [P], [
                Loop("q", Q, (Store("o", ("p", first, "q"), head),)), rows], False))),
        ]
        kind = ("exclusive " if exclusive else "") + ("reverse " if reverse else "")
        self.kernel(lambda ts: f"{kind}{n.op.name} along axis {ax} of {ts(shape, dt)}",
                    [("a0", self.contiguous(x)), ("r0", d)], body, False, False)

    def op_cumprod(self, n):
        self.op_cumsum(n, "*", "1")

    def op_argsort(self, n):
        """np.argsort (a stable merge sort) of each row of the last axis; descending: of
        the row reversed, read backwards, so that ties keep their order (as TF's)."""
        (x,), o = n.inputs, n.outputs[0]
        shape, dt = self.types[x].shape, self.types[x].dtype
        desc = bool(dict(n.attrs)["descending"])
        P, N = _dprod(shape[:-1]), _d(shape[-1])
        d = self.dest(o)
        if desc:
            rank = f"{N} - 1 - np.argsort(x[p, ::-1], kind='mergesort')[::-1]"
        else:
            rank = "np.argsort(x[p], kind='mergesort')"
        body = [
            View("x", "a0", "reshape", (P, N)),
            View("o", "r0", "reshape", (P, N)),
            Loop("p", P, (Store("o", ("p", ":"), rank),)),
        ]
        order = "descending" if desc else "ascending"
        self.kernel(lambda ts: f"argsort {order} of the last axis of {ts(shape, dt)}",
                    [("a0", self.contiguous(x)), ("r0", d)], body, False, False)

    # -- linear algebra: a loop over the batch of matrices, each by Numba's np.linalg --
    def _linalg(self, n, call: str, singular: str | None = None):
        """``out[b] = call`` for each matrix ``b`` of the batch; ``call`` reads input j's
        matrix as ``x{j}[b]`` (a C-contiguous 2-d view). ``singular``: raise this
        InvalidArgumentError where ``x0[b]`` is exactly singular (a zero determinant, from
        the same LU factorization whose zero pivot makes Numba's inv and solve raise a
        LinAlgError, which would send the program to interpret for good)."""
        o = n.outputs[0]
        oshape, dt = n.types[0].shape, n.types[0].dtype
        xshape = self.types[n.inputs[0]].shape
        B = _dprod(xshape[:-2])
        args, body = [], []
        for j, x in enumerate(n.inputs):
            s = self.types[x].shape
            args.append((f"a{j}", self.contiguous(x)))
            body.append(View(f"x{j}", f"a{j}", "reshape", (B, _d(s[-2]), _d(s[-1]))))
        core = oshape[len(xshape) - 2:]
        body.append(View("o", "r0", "reshape", (B, *(_d(c) for c in core))))
        store = Store("o", ("b",) + (":",) * len(core), call)
        check = () if singular is None else (If("np.linalg.det(x0[b]) == 0", (Raise(singular),)),)
        body.append(Loop("b", B, (*check, store)))
        args.append(("r0", self.dest(o)))
        name = n.op.name
        self.kernel(lambda ts: f"{name} of {ts(xshape, dt)}", args, body, False, False)

    def op_matrix_inverse(self, n):
        self._linalg(n, "np.linalg.inv(x0[b])", "matrix_inverse: Input is not invertible")

    def op_matrix_determinant(self, n):
        self._linalg(n, "np.linalg.det(x0[b])")

    def op_log_abs_det(self, n):
        self._linalg(n, "np.linalg.slogdet(x0[b])[1]")

    def op_det_sign(self, n):
        self._linalg(n, "np.linalg.slogdet(x0[b])[0]")

    def op_matrix_solve(self, n):
        self._linalg(n, "np.linalg.solve(x0[b], x1[b])",
                     "matrix_solve: Input matrix is not invertible")

    def op_cholesky(self, n):
        self._linalg(n, "np.linalg.cholesky(x0[b])")


def _index_check(op: str, ishape, n: str) -> Loop:
    """A loop that raises when an index of ``ix`` (``ishape``, flattened) is not in
    ``[0, n)``, with TF's message: the first bad one, where it is and its value
    (``gather: indices[1,0] = 7 is not in [0, 3)``)."""
    where = _unravel("m", ishape)
    at = f"[{','.join(['%d'] * len(where))}]" if where else ""
    bad = Raise(f"{op}: indices{at} = %d is not in [0, %d)", (*where, "ix[m]", n))
    return Loop("m", _dprod(ishape), (If(f"ix[m] < 0 or ix[m] >= {n}", (bad,)),))


def _unravel(flat: str, shape) -> tuple:
    """Expressions for the position in ``shape`` of the flat (C order) index ``flat``."""
    out = []
    for k in range(len(shape)):
        inner = _dprod(shape[k + 1:])
        e = flat if inner == "1" else f"{flat} // ({inner})"
        if k:
            e = f"{e if e == flat else f'({e})'} % {_d(shape[k])}"
        out.append(e)
    return tuple(out)
