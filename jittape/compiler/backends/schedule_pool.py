"""The scheduler's kernels for pooling (max_pool, avg_pool and their gradients): direct
loop nests over ``x[N, *S, C]`` (a mixin of ``schedule.Scheduler``).

Each kernel loops over the batch (parallel: every batch element writes its own part of
the output, the gradients' scatters included), then the output positions, then the
window's positions, with the channels innermost so that the inner loop is a vector loop
over contiguous memory. The padding is in the window loops' bounds, computed once per
output position (``range(max(0, 1 - o0 * 2), min(3, d1 + 1 - o0 * 2))``), so no branch
tests it in the inner loop. The window's geometry is literal in the text (a kernel per
configuration, as ``explain()`` lists it).
"""

from __future__ import annotations

import numpy as np

from .emit import literal, np_type
from .kernel_ir import Alloc, If, Let, Loop, Store, Update, View
from .kernel_names import _d, _dprod
from .schedule_fused import PARALLEL_MIN


def _times(var: str, k: int) -> str:
    return var if k == 1 else f"{var} * {k}"


def _signed(v: int) -> str:
    return "0" if v == 0 else (f"+ {v}" if v > 0 else f"- {-v}")


def _plus(*terms) -> str:
    """A sum of expression terms, leaving out zeros (``"o0 * 2 + j0 - 1"``)."""
    out = ""
    for t in terms:
        t = str(t)
        if t in ("0", "- 0", "+ 0"):
            continue
        if not out:
            out = t[2:] if t.startswith("+ ") else ("-" + t[2:] if t.startswith("- ") else t)
        else:
            out += " " + (t if t[:2] in ("+ ", "- ") else "+ " + t)
    return out or "0"


class _Geometry:
    """The index expressions of one pooling node: its attributes and sizes, as the
    kernel being written names them."""

    def __init__(self, attrs, xshape, yshape, yarr=None):
        self.yarr = yarr  # the kernel's name of an array shaped yshape
        self.k = tuple(int(v) for v in attrs["ksize"])
        self.s = tuple(int(v) for v in attrs["strides"])
        self.d = tuple(int(v) for v in attrs["dilations"])
        self.pads = tuple((int(lo), int(hi)) for lo, hi in attrs["pads"])
        self.ns = len(self.k)
        self.xshape, self.yshape = tuple(xshape), tuple(yshape)

    def bounds(self, a) -> tuple:
        """(start, stop) of the window positions along axis ``a`` that fall inside the
        input, for the output position ``o{a}``."""
        k, s, d, (lo, _hi) = self.k[a], self.s[a], self.d[a], self.pads[a]
        n = _d(self.xshape[a + 1])
        at = _times(f"o{a}", s)
        if d == 1:
            start = "0" if lo == 0 else f"max(0, {lo} - {at})"
            return start, f"min({k}, {_plus(n, _signed(lo), f'- {at}')})"
        # the first j with o*s + j*d >= lo, and the last with o*s + j*d - lo <= n - 1
        start = "0" if lo == 0 else f"max(0, ({lo + d - 1} - {at}) // {d})"
        return start, f"min({k}, ({_plus(n, _signed(lo - 1), f'- {at}')}) // {d} + 1)"

    def index(self, a) -> str:
        """The input position along axis ``a`` of window position ``j{a}``."""
        lo = self.pads[a][0]
        return _plus(_times(f"o{a}", self.s[a]), _times(f"j{a}", self.d[a]),
                     f"- {lo}" if lo else "0")

    def flat(self) -> str:
        """The input position as one index into the spatial axes (row-major)."""
        e = "i0"
        for a in range(1, self.ns):
            e = f"({e}) * {_d(self.xshape[a + 1])} + i{a}" if a > 1 else \
                f"i0 * {_d(self.xshape[a + 1])} + i{a}"
        return e

    def describe(self, what, ts, dtype) -> str:
        text = f"{what} {'x'.join(map(str, self.k))}"
        if any(v != 1 for v in self.s):
            text += f" stride {'x'.join(map(str, self.s))}"
        if any(v != 1 for v in self.d):
            text += f" dilation {'x'.join(map(str, self.d))}"
        if any(p != (0, 0) for p in self.pads):
            text += " pads " + " ".join(f"{lo},{hi}" for lo, hi in self.pads)
        return f"{text} of {ts(self.xshape, dtype)}"

    @property
    def work(self) -> int:
        return int(np.prod(self.yshape, dtype=np.int64)) * int(np.prod(self.k, dtype=np.int64))

    def nest(self, per_out: list, per_tap: list, after: list) -> list:
        """``for n: for o...: per_out; for j... (inside the input): per_tap; after``:
        the loop over the batch is parallel."""
        ns = self.ns
        taps = list(per_tap)
        for a in reversed(range(ns)):
            taps = [Loop(f"j{a}", f"je{a}", (Let(f"i{a}", self.index(a)), *taps),
                         start=f"js{a}")]
        body = [*per_out, *taps, *after]
        for a in reversed(range(ns)):
            start, stop = self.bounds(a)
            body = [Loop(f"o{a}", f"no{a}" if self.yarr else _d(self.yshape[a + 1]),
                         (Let(f"js{a}", start), Let(f"je{a}", stop), *body))]
        if self.yarr:
            # the output positions' counts read from the array that has them: with
            # literal trip counts LLVM unrolls the nest whole (LeNet's 8x8x64 max-pool
            # kernel took 0.44 s to compile, its 24x24x32 one 0.15 s)
            body = [Let(f"no{a}", f"{self.yarr}.shape[{a + 1}]") for a in range(ns)] + body
        return body

    def y(self) -> tuple:
        return ("n", *(f"o{a}" for a in range(self.ns)), "c")

    def x(self) -> tuple:
        return ("n", *(f"i{a}" for a in range(self.ns)), "c")


def _zero_own(dx: str, P: str, C: str) -> Loop:
    """Zeros into batch element ``n``'s part of ``dx[N, P, C]``: inside the parallel loop
    over the batch, so each thread clears what it scatters into."""
    return Loop("q", P, (Loop("c", C, (Store(dx, ("n", "q", "c"), "0"),)),))


class PoolKernels:
    """``op_<name>`` lowerings of the pooling ops (``ops/pooling.py``), each a kernel of
    its own; they use the scheduler's ``dest``, ``contiguous``, ``kernel`` and ``types``."""

    def _pool_kernel(self, n, what, geo, args, body, dtype):
        threaded = geo.work >= PARALLEL_MIN
        batch = Loop("n", _d(geo.yshape[0]), tuple(body), parallel=True)
        self.kernel(lambda ts: geo.describe(what, ts, dtype), args, [batch], threaded)

    def op_max_pool(self, n):
        (x,), o = n.inputs, n.outputs[0]
        t = self.types[x]
        geo = _Geometry(dict(n.attrs), t.shape, n.types[0].shape, "r0")
        dt = t.dtype
        low = (literal(np.finfo(dt).min, dt) if np.dtype(dt).kind == "f"
               else literal(np.iinfo(dt).min, dt))
        C = _d(t.shape[-1])
        y = "r0[" + ", ".join(geo.y()) + "]"
        body = geo.nest(
            # TF's rule: NaN is skipped (v > y is false), the result at least the lowest
            [Loop("c", C, (Store("r0", geo.y(), low),))],
            [Loop("c", C, (Let("v", "a0[" + ", ".join(geo.x()) + "]"),
                           Store("r0", geo.y(), f"v if v > {y} else {y}")))],
            [])
        self._pool_kernel(n, "max_pool", geo, [("a0", self.contiguous(x)),
                                               ("r0", self.dest(o))], body, dt)

    def _argmax_nest(self, geo, C, dt, after):
        """Per output position, ``at[c]``: the flat input position of each channel's
        maximum (TF's: the first inside the input, then a strictly greater one; -1 when
        the window has no position inside)."""
        return [Alloc("best", (C,), dt), Alloc("at", (C,), "int64"), *geo.nest(
            [Loop("c", C, (Store("at", ("c",), "-1"),))],
            # selects, not a branch: the channel loop stays a vector loop
            [Let("p", geo.flat()),
             Loop("c", C, (Let("v", "a0[" + ", ".join(geo.x()) + "]"),
                           Let("gt", "(at[c] < 0) | (v > best[c])"),
                           Store("best", ("c",), "v if gt else best[c]"),
                           Store("at", ("c",), "p if gt else at[c]")))],
            after)]

    def op_max_pool_grad(self, n):
        """Each window's dy added at its maximum (the batch in parallel: a batch element's
        windows scatter into its own part of dx only)."""
        (x, dy), o = n.inputs, n.outputs[0]
        t = self.types[x]
        geo = _Geometry(dict(n.attrs), t.shape, self.types[dy].shape, "a1")
        C, P = _d(t.shape[-1]), _dprod(t.shape[1:-1])
        scatter = Loop("c", C, (If("at[c] >= 0", (Update(
            "dx[n, at[c], c]", "+", "a1[" + ", ".join(geo.y()) + "]"),)),))
        body = [_zero_own("dx", P, C), *self._argmax_nest(geo, C, t.dtype, [scatter])]
        pre = [View("dx", "r0", "reshape", (_d(t.shape[0]), P, C))]
        threaded = geo.work >= PARALLEL_MIN
        batch = Loop("n", _d(geo.yshape[0]), tuple(body), parallel=True)
        self.kernel(lambda ts: geo.describe("max_pool_grad", ts, t.dtype),
                    [("a0", self.contiguous(x)), ("a1", self.contiguous(dy)),
                     ("r0", self.dest(o))], [*pre, batch], threaded)

    def op_max_pool_grad_grad(self, n):
        """The input-shaped g read at each window's maximum."""
        (x, g), o = n.inputs, n.outputs[0]
        t = self.types[x]
        geo = _Geometry(dict(n.attrs), t.shape, n.types[0].shape, "r0")
        C, P = _d(t.shape[-1]), _dprod(t.shape[1:-1])
        zero = literal(0, t.dtype)
        gather = Loop("c", C, (Store("r0", geo.y(), f"gf[n, at[c], c] if at[c] >= 0 else {zero}"),))
        body = self._argmax_nest(geo, C, t.dtype, [gather])
        pre = [View("gf", "a1", "reshape", (_d(t.shape[0]), P, C))]
        threaded = geo.work >= PARALLEL_MIN
        batch = Loop("n", _d(geo.yshape[0]), tuple(body), parallel=True)
        self.kernel(lambda ts: geo.describe("max_pool_grad_grad", ts, t.dtype),
                    [("a0", self.contiguous(x)), ("a1", self.contiguous(g)),
                     ("r0", self.dest(o))], [*pre, batch], threaded)

    def _count(self, geo, dt) -> Let:
        """The number of the window's positions inside the input (at least 1)."""
        n = " * ".join(f"(je{a} - js{a})" for a in range(geo.ns))
        return Let("cnt", f"{np_type(dt)}(max({n}, 1))")

    def op_avg_pool(self, n):
        """The window's sum over its positions inside the input, over their number."""
        (x,), o = n.inputs, n.outputs[0]
        t = self.types[x]
        geo = _Geometry(dict(n.attrs), t.shape, n.types[0].shape, "r0")
        C, dt = _d(t.shape[-1]), t.dtype
        y = "r0[" + ", ".join(geo.y()) + "]"
        body = geo.nest(
            [self._count(geo, dt), Loop("c", C, (Store("r0", geo.y(), literal(0, dt)),))],
            [Loop("c", C, (Update(y, "+", "a0[" + ", ".join(geo.x()) + "]"),))],
            [Loop("c", C, (Store("r0", geo.y(), f"{y} / cnt"),))])
        self._pool_kernel(n, "avg_pool", geo, [("a0", self.contiguous(x)),
                                               ("r0", self.dest(o))], body, dt)

    def op_avg_pool_grad(self, n):
        """Each window's dy shared by its positions inside the input (the batch in
        parallel, as max_pool_grad)."""
        (dy,), o = n.inputs, n.outputs[0]
        t = self.types[dy]
        xshape = n.types[0].shape
        geo = _Geometry(dict(n.attrs), xshape, t.shape, "a0")
        C, dt = _d(t.shape[-1]), t.dtype
        body = geo.nest(
            [self._count(geo, dt)], [Loop("c", C, (Update(
                "r0[" + ", ".join(geo.x()) + "]", "+", "a0[" + ", ".join(geo.y()) + "] / cnt"),))],
            [])
        P = _dprod(xshape[1:-1])
        threaded = geo.work >= PARALLEL_MIN
        batch = Loop("n", _d(geo.yshape[0]), (_zero_own("dx", P, C), *body), parallel=True)
        self.kernel(lambda ts: geo.describe("avg_pool_grad", ts, dt),
                    [("a0", self.contiguous(dy)), ("r0", self.dest(o))],
                    [View("dx", "r0", "reshape", (_d(xshape[0]), P, C)), batch], threaded)
