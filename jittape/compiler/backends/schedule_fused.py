"""The scheduler's bodies of fused kernels: a loop, a reduction with its prologue and
epilogue (a scalar accumulator, or one array in loop order), a GEMM with its epilogue,
and the flat loop for contiguous elementwise groups (a mixin of ``schedule.Scheduler``,
whose ``fused`` calls them)."""

from __future__ import annotations

import os

import numpy as np

from .emit import REDUCE_INIT, Unsupported, emit_values, literal
from .kernel_ir import Accumulate, Alloc, Fill, Full, Gemm, If, Let, Load, Loop, Store
from .kernel_names import _DIMS, _d, _dims, _dprod, _index, _nest, _prod, _subscript

# Iteration spaces at least this large (in element-ops) run their outer loop on threads.
PARALLEL_MIN = int(os.environ.get("JITTAPE_PARALLEL_MIN", 1 << 16))


class _Reader:
    """A pseudo-node so that a body output which *is* a body input gets loaded."""

    __slots__ = ("inputs",)

    def __init__(self, inputs):
        self.inputs = inputs


def _output_readers(body, env_in, outs=None):
    res = []
    for o in body.outputs if outs is None else [bo for bo, _, _ in outs]:
        if o in env_in:
            res.append(_Reader((o,)))
    return res


# the dtypes the library GEMM (kgemm.gemm: BLAS sgemm/dgemm) multiplies; others
# get a loop nest (_product_loops)
_GEMM_DTYPES = frozenset({"float32", "float64"})


class FusedKernels:
    """The bodies ``Scheduler.fused`` writes inside its kernel scope, by the group's
    kind; they use the scheduler's ``kname``, ``scope``, ``lowering``, ``val`` and
    ``consts``."""

    def _flatten(self, kind, space, args, env_in, outs):
        """An elementwise loop whose operands are all contiguous and of its shape (or
        0-d) runs as one flat loop over views of shape ``(N,)``, bounded by its first
        output's length: one loop to vectorize, and the same kernel for every rank and
        size (the Adam update of each weight matrix and each bias vector). None when it
        does not apply."""
        size = _prod(space)
        if kind != "loop" or not space or size <= 1:
            return None
        contig = {o.var for o in self.val.values() if o.contig}
        contig.update(f"c{k}" for k in range(len(self.consts)))
        for _q, shape in env_in.values():
            if tuple(shape) not in ((), tuple(space)):
                return None
        for _bo, _p, shape in outs:
            if tuple(shape) != tuple(space):
                return None
        shapes = {q: tuple(shape) for q, shape in env_in.values()}
        for p, expr in args:
            if shapes.get(p) == ():
                continue
            if expr not in contig:
                return None
        view = f"({_dprod(space)},)"
        new_args = []
        for p, expr in args:
            if len(space) > 1 and (p.startswith("r") or shapes.get(p) == tuple(space)):
                new_args.append((p, f"{expr}.reshape({view})"))
            else:
                new_args.append((p, expr))
        new_env = {k: (q, (size,) if tuple(shape) == tuple(space) else shape)
                   for k, (q, shape) in env_in.items()}
        new_outs = [(bo, p, (size,)) for bo, p, _ in outs]
        saved_dim = (size, _DIMS.get(size))  # fused() puts it back after the kernel
        _DIMS[size] = "r0.shape[0]"
        return new_args, new_env, new_outs, (size,), saved_dim

    def loads(self, nodes, env_in, space_vars, prefix="x", inside=True):
        """Loads of each body input ``nodes`` read, and the env they give. A 0-d
        operand's load is loop-invariant: inside a loop nest (``inside``) it goes to the
        kernel's top (Numba's parfor lowering cannot type ``a[()]`` in a prange loop)."""
        env, stmts = {}, []
        need = []
        for b in nodes:
            for i in b.inputs:
                if i in env_in and i not in need:
                    need.append(i)
        # 0-d operands first: their names come first, as they come first in the kernel
        need.sort(key=lambda i: len(env_in[i][1]) != 0)
        for i in need:
            p, shape = env_in[i]
            name = env[i] = self.kname(prefix, i)
            load = Load(name, p, _index(shape, space_vars))
            (self.scope.top if inside and not shape else stmts).append(load)
        return env, stmts

    def _prologue(self, body, pro, reds, pro_outs, env_in, svars):
        """A reduction's loop body up to the accumulation: loads, prologue values and
        the prologue values that are outputs, indexed over the whole space."""
        readers = pro + reds + _output_readers(body, env_in, pro_outs)
        env, stmts = self.loads(readers, env_in, svars)
        stmts += emit_values(pro, env, self.kname)
        for bo, p, s in pro_outs:
            stmts.append(Store(p, _index(s, svars), env[bo]))
        return env, stmts

    def _epilogue(self, epi, red_env, env, phases, env_in, outs, rvars, write_phases,
                  inside):
        """The epilogue over the reduced shape (``rvars`` index it): the reduced values
        (``red_env``), the literals the prologue named, loads, epilogue values, and the
        writes of outputs in ``write_phases`` (and of body inputs passed through)."""
        env2 = dict(red_env)
        for v, e in env.items():
            if phases.get(v) == "leaf":
                env2[v] = e
        env3, stmts = self.loads(epi, env_in, rvars, prefix="y", inside=inside)
        env2.update(env3)
        stmts += emit_values(epi, env2, self.kname)
        for bo, p, s in outs:
            if phases.get(bo) in write_phases or (bo in env_in and bo not in env):
                stmts.append(Store(p, _index(s, rvars), env2[bo]))
        return stmts

    def loop_body(self, body, phases, env_in, outs, space, work):
        threaded = work >= PARALLEL_MIN and len(space) > 0
        vars_ = [f"i{d}" for d in range(len(space))]
        extents = _dims(space)  # sizes are named in the order they are asked for
        nodes = [b for b in body.nodes if b.outputs[0] not in env_in]
        env, stmts = self.loads([b for b in nodes if phases.get(b.outputs[0]) != "leaf"]
                                + _output_readers(body, env_in), env_in, vars_,
                                inside=bool(space))
        stmts += emit_values(nodes, env, self.kname)
        for bo, p, shape in outs:
            stmts.append(Store(p, _index(shape, vars_), env[bo]))
        return _nest(vars_, extents, stmts, True), threaded

    def reduction_body(self, body, phases, env_in, outs, a, work):
        space, axes = tuple(a["space"]), tuple(a["axes"])
        keepdims, rspace = bool(a["keepdims"]), tuple(a["rspace"])
        r = len(space)
        pro = [b for b in body.nodes if phases[b.outputs[0]] in ("pro", "leaf")
               and b.outputs[0] not in env_in]
        reds = [b for b in body.nodes if phases[b.outputs[0]] == "red"]
        epi = [b for b in body.nodes if phases[b.outputs[0]] == "epi"]
        kept = [d for d in range(r) if d not in axes]
        suffix = tuple(axes) == tuple(range(r - len(axes), r))
        out_of = {bo: (p, shape) for bo, p, shape in outs}
        pro_outs = [(bo, p, s) for bo, p, s in outs if phases.get(bo) in ("pro",)]
        sum_only = all(b.op.monoid == "add" for b in reds)
        svars = [f"i{d}" for d in range(r)]

        def rvars(space_vars):
            if keepdims:
                return [space_vars[d] if d in kept else "0" for d in range(r)]
            return [space_vars[d] for d in kept]

        if suffix:
            # outer loops over kept dims, a scalar accumulator per reduction inside;
            # with no kept dims, a sum's loop over the axes may run on threads
            threaded = work >= PARALLEL_MIN and (bool(kept) or sum_only)
            # a float max/min folds with a select and notes NaNs apart: np.maximum's
            # NaN-propagating branches made a 256 x 1000 row max 5x slower
            flagged = {b.outputs[0] for b in reds if b.op.monoid in ("max", "min")
                       and np.dtype(b.types[0].dtype).kind == "f"}
            kept_ext = [_d(space[d]) for d in kept]  # outer loops' sizes are asked first
            inits = []
            for b in reds:
                dt = b.types[0].dtype
                inits.append(Let(self.kname("acc", b.outputs[0]), REDUCE_INIT[b.op.monoid](dt)))
                if b.outputs[0] in flagged:
                    inits.append(Let(self.kname("nan", b.outputs[0]), "False"))
            axes_ext = [_d(space[d]) for d in axes]
            env, inner = self._prologue(body, pro, reds, pro_outs, env_in, svars)
            for b in reds:
                o = b.outputs[0]
                inner.append(Accumulate(self.kname("acc", o), b.op.monoid, env[b.inputs[0]],
                                        b.types[0].dtype,
                                        nan=self.kname("nan", o) if o in flagged else None))
            reduce_loops = _nest([svars[d] for d in axes], axes_ext, inner,
                                 not kept and sum_only)
            after = []
            for b in reds:
                o = b.outputs[0]
                if o in flagged:
                    after.append(If(self.kname("nan", o), (
                        Let(self.kname("acc", o), literal(np.nan, b.types[0].dtype)),)))
            red_env = {b.outputs[0]: self.kname("acc", b.outputs[0]) for b in reds}
            tail = self._epilogue(epi, red_env, env, phases, env_in, outs, rvars(svars),
                                  ("red", "epi"), inside=bool(kept))
            per_row = inits + reduce_loops + after + tail
            return _nest([svars[d] for d in kept], kept_ext, per_row, True), threaded
        # accumulate into arrays of the reduced shape, walking the space in order
        stmts: list = []
        for b in reds:
            o = b.outputs[0]
            dt = b.types[0].dtype
            acc = self.kname("acc", o)
            if o in out_of:
                stmts.append(Let(acc, out_of[o][0]))
            else:
                stmts.append(Alloc(acc, _dims(rspace), dt))
            stmts.append(Fill(acc, REDUCE_INIT[b.op.monoid](dt)))
        outer_free = bool(kept) and kept[0] == 0  # each thread its own rows of acc
        threaded = outer_free and work >= PARALLEL_MIN
        space_ext = _dims(space)
        env, inner = self._prologue(body, pro, reds, pro_outs, env_in, svars)
        ridx = _index(rspace, rvars(svars))
        for b in reds:
            inner.append(Accumulate(self.kname("acc", b.outputs[0]), b.op.monoid,
                                    env[b.inputs[0]], b.types[0].dtype, index=ridx))
        stmts += _nest(svars, space_ext, inner, outer_free)
        # the epilogue over the reduced shape
        evars = [f"i{r + d}" for d in range(len(rspace))]
        r_ext = _dims(rspace)
        eidx = _index(rspace, evars)
        red_env = {b.outputs[0]: _subscript(self.kname("acc", b.outputs[0]), eidx)
                   for b in reds}
        tail = self._epilogue(epi, red_env, env, phases, env_in, outs, evars, ("epi",),
                              inside=bool(rspace))
        if any(phases.get(bo) == "epi" or bo in env_in for bo, _, _ in outs):
            stmts += _nest(evars, r_ext, tail, False)
        return stmts, threaded

    def _product_loops(self, pa, sa, pb, sb, target, space, dt) -> list:
        """``target = pa @ pb`` as a loop nest, for the dtypes a GEMM has no routine for
        (integers): row by row, each row of ``pb`` scaled by an element of
        ``pa`` and added (the inner loop runs along rows in memory order)."""
        r = len(space)
        v = [f"i{d}" for d in range(r)]
        kv, nb = f"i{r}", r - 2

        def lead(shape):
            k = len(shape) - 2
            return ["0" if shape[j] == 1 else v[nb - k + j] for j in range(k)]

        ia = tuple(lead(sa) + [v[r - 2], kv])
        ib = tuple(lead(sb) + [kv, v[r - 1]])
        it = tuple(v)
        ext = _dims(space)
        row = [
            Loop(v[r - 1], ext[r - 1], (Store(target, it, literal(0, dt)),)),
            Loop(kv, _d(sa[-1]), (
                Load("a_ik", pa, ia),
                Loop(v[r - 1], ext[r - 1], (
                    Load("acc", target, it), Load("b_kj", pb, ib),
                    Store(target, it, "acc + a_ik * b_kj"))),
            )),
        ]
        return _nest(v[:r - 1], ext[:r - 1], row, False)

    def matmul_body(self, body, phases, env_in, outs, space, work):
        mm = next(b for b in body.nodes if b.op.kind == "matmul" or b.op.epilogue)
        if mm.op.epilogue:  # a convolution, then its epilogue
            return self._hero_body(mm, body, phases, env_in, outs, space, work)
        if self.lowering(mm.op) != "op_matmul" or mm.attrs:
            # a GEMM computes exactly matmul: any other op of kind matmul (or one with
            # attributes) would silently compute the wrong product
            raise Unsupported(mm.op.name, mm.op.interpret_only
                              or "an op of kind matmul this backend has no GEMM rule for")
        epi = [b for b in body.nodes if phases[b.outputs[0]] == "epi"]
        stmts = []
        prod_of = {b.outputs[0]: b for b in body.nodes}
        operands = []
        for j, i in enumerate(mm.inputs):
            if i in env_in:
                operands.append(env_in[i])
                continue
            leaf = prod_of.get(i)
            if leaf is None or leaf.op.literal is None:
                raise Unsupported("matmul", "an operand computed inside its kernel")
            # a uniform operand (a fill, a one-element constant): materialise it
            t = leaf.types[0]
            env0: dict = {}
            emit_values([leaf], env0, self.kname)
            stmts.append(Full(f"mm{j}", _dims(t.shape), env0[i]))
            operands.append((f"mm{j}", t.shape))
        (pa, sa), (pb, sb) = operands
        target = self._product_target(mm, body, outs, space, stmts)
        batch = space[:-2]
        if mm.types[0].dtype not in _GEMM_DTYPES:
            stmts += self._product_loops(pa, sa, pb, sb, target, space, mm.types[0].dtype)
        elif not batch:
            stmts.append(Gemm(pa, pb, target))
        else:
            bvars = [f"i{d}" for d in range(len(batch))]

            def sub(p, s):
                k = len(s) - 2
                idx = [("0" if s[j] == 1 else bvars[len(batch) - k + j]) for j in range(k)]
                return f"{p}[{', '.join(idx)}]" if idx else p

            stmts += _nest(bvars, _dims(batch),
                           [Gemm(sub(pa, sa), sub(pb, sb), sub(target, space))], False)
        return stmts + self._epilogue_loop(mm, body, phases, env_in, outs, space, target), \
            bool(epi or any(bo != mm.outputs[0] for bo, _, _ in outs)) and work >= PARALLEL_MIN

    def _product_target(self, mm, body, outs, space, stmts) -> str:
        """Where the product (a GEMM's, a convolution's) goes: its own output, else the
        first output of its shape (the epilogue then runs in place over it, element by
        element), else an array of the kernel's own."""
        target = {bo: p for bo, p, _ in outs}.get(mm.outputs[0])
        if target is None:
            cands = [p for bo, p, s in outs if tuple(s) == tuple(space)]
            if cands and mm.types[0].dtype == body.types()[outs[0][0]].dtype:
                target = cands[0]
            else:
                target = "prod"
                stmts.append(Alloc("prod", _dims(space), mm.types[0].dtype))
        return target

    def _hero_body(self, hero, body, phases, env_in, outs, space, work):
        """A window op (``schedule_window``) into the product's target, then the
        epilogue over it as a matmul's."""
        ins = []
        for i in hero.inputs:
            if i not in env_in:
                raise Unsupported(hero.op.name, "an operand computed inside its kernel")
            ins.append(env_in[i][0])
        stmts = []
        target = self._product_target(hero, body, outs, space, stmts)
        hero_stmts, threaded, desc = self.window_hero(hero, body.types(), ins, target)
        self.hero_desc = desc
        epi = self._epilogue_loop(hero, body, phases, env_in, outs, space, target)
        return stmts + hero_stmts + epi, threaded or (bool(epi) and work >= PARALLEL_MIN)

    def _epilogue_loop(self, mm, body, phases, env_in, outs, space, target) -> list:
        """The epilogue's loop over the product in ``target``, storing every output
        (none when the product is the only one and nothing follows it)."""
        lead = [b for b in body.nodes if phases[b.outputs[0]] == "leaf"]
        epi = [b for b in body.nodes if phases[b.outputs[0]] == "epi"]
        mo = mm.outputs[0]
        stmts = []
        if epi or any(bo != mo for bo, _, _ in outs):
            vars_ = [f"i{d}" for d in range(len(space))]
            extents = _dims(space)
            env = {mo: self.kname("m", mo)}
            loop = [Load(env[mo], target, _index(space, vars_))]
            for b in lead:
                if b.outputs[0] not in env_in:  # a literal (others are arguments)
                    emit_values([b], env, self.kname)
            envl, ld = self.loads(epi, env_in, vars_, prefix="y")
            env.update(envl)
            loop += ld + emit_values(epi, env, self.kname)
            for bo, p, s in outs:
                if p == target and bo == mo:
                    continue
                loop.append(Store(p, _index(s, vars_), env[bo]))
            stmts += _nest(vars_, extents, loop, True)
        return stmts
