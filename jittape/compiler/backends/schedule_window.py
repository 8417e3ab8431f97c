"""The scheduler's kernels for the window ops (convolution and its two backprops), a
mixin of ``schedule.Scheduler``.

Two formulations, chosen per shape when the graph is scheduled (``formulation``):

- **packed GEMM** (``groups == 1`` and a filter of at least ``GEMM_MIN_KC`` taps times
  channels): the kernel packs the input's windows once per call into a buffer of its
  own (``patches[rows, K*C]``, channels innermost, the padding as zeros), then one
  GEMM per batch tile: ``y = patches @ w`` (the filter ``[*K, C, F]`` is already
  ``[K*C, F]`` in memory), ``dw = patches.T @ dy``, and for the input gradient
  ``cols = dy @ w.T`` followed by a scatter-add of the columns back into their windows
  (``col2im``, parallel over the batch: each image writes only its own rows). Tiles
  keep the packed buffer under ``PATCH_ELEMS`` elements, so that a large image never
  needs gigabytes; the GEMM calls stay in serial loops (BLAS threads are its own).
- **direct loop nest** (grouped and depthwise convolutions, and filters too small for a
  GEMM to pay: LeNet's first layer has ``K*C = 25``): per output position, the taps
  that fall inside the input (the padding by a guard, outside the channel loops), the
  output channels innermost so that the inner loop vectorizes; parallel over the batch
  (the filter gradient: over the first filter axis, whose rows no two iterations share).

Strides, dilations, pads and the filter's spatial sizes are literals of the kernel's
text (each configuration is its own kernel); the batch, the spatial sizes and the
channel counts are its parameters as every kernel's sizes are.
"""

from __future__ import annotations

import os

from .emit import literal
from .kernel_ir import Alloc, Fill, Gemm, If, Let, Load, Loop, Store, Update, View
from .kernel_names import _d, _dprod, _nest, _prod
from .schedule_fused import PARALLEL_MIN

# a GEMM pays once the contraction (taps x channels) is this long: LeNet's first layer
# (5x5 taps of one channel, 25) ran in 1.8 ms packed against 4.9 ms direct
GEMM_MIN_KC = int(os.environ.get("JITTAPE_CONV_GEMM_MIN_KC", 16))
# the packed windows of one tile stay under this many elements (2 MiB of float32): a
# tile that stays in cache while its GEMM reads it (LeNet's second layer, 1 thread: a
# tile of 8-16 images 8.1 ms, the whole batch of 64 at once 9.4-9.9 ms)
PATCH_ELEMS = 1 << 19


class _Geo:
    """One window op's geometry: ``x[N, *S, C]``, ``w[*K, Cg, F]``, ``y[N, *O, F]``.

    Index names in the kernels: ``op{j}`` an output position, ``kq{j}`` a tap of the
    window, ``ix{j}`` the input position it reads (apart from the ``i{d}`` of a fused
    epilogue's loop)."""

    def __init__(self, attrs, xshape, wshape, yshape):
        self.strides = tuple(int(s) for s in attrs["strides"])
        self.dil = tuple(int(d) for d in attrs["dilations"])
        self.pads = tuple((int(lo), int(hi)) for lo, hi in attrs["pads"])
        self.groups = int(attrs["groups"])
        self.xshape, self.wshape, self.yshape = tuple(xshape), tuple(wshape), tuple(yshape)
        self.ns = len(self.strides)
        self.ksize = tuple(int(k) for k in wshape[:self.ns])
        self.C, self.Cg, self.F = int(xshape[-1]), int(wshape[-2]), int(wshape[-1])
        self.Fg = self.F // self.groups
        self.K = _prod(self.ksize)
        self.P = _prod(yshape[1:-1])  # output positions per image

    def formulation(self) -> str:
        gemm = (self.groups == 1 and self.K * self.C >= GEMM_MIN_KC
                and self.P > 0 and self.F > 0 and self.C > 0)
        return "gemm" if gemm else "direct"

    def describe(self, ts, what, dt, ins) -> str:
        parts = [f"{what} " + "x".join(str(k) for k in self.ksize)]
        if any(s != 1 for s in self.strides):
            parts.append("stride " + "x".join(str(s) for s in self.strides))
        if any(d != 1 for d in self.dil):
            parts.append("dilation " + "x".join(str(d) for d in self.dil))
        if any(p for pr in self.pads for p in pr):
            parts.append("pads " + ",".join(f"{lo}:{hi}" for lo, hi in self.pads))
        if self.groups != 1:
            parts.append(f"groups {self.groups}")
        how = "packed GEMM" if self.formulation() == "gemm" else "direct"
        return " ".join(parts) + " of " + " by ".join(ts(s, dt) for s in ins) + f" ({how})"

    # -- index expressions ------------------------------------------------------
    def in_index(self):
        """Per spatial axis: the input position tap ``kq`` of output ``op`` reads."""
        out = []
        for j in range(self.ns):
            e = f"op{j}" if self.strides[j] == 1 else f"op{j} * {self.strides[j]}"
            tap = f"kq{j}" if self.dil[j] == 1 else f"kq{j} * {self.dil[j]}"
            lo = self.pads[j][0]
            out.append(f"{e} + {tap} - {lo}" if lo else f"{e} + {tap}")
        return out

    def guard(self):
        """Whether every ``ix{j}`` lies inside the input (None: it always does)."""
        terms = []
        for j in range(self.ns):
            lo, hi = self.pads[j]
            if lo:
                terms.append(f"ix{j} >= 0")
            if hi:  # without high padding the last window ends inside the input
                terms.append(f"ix{j} < {_d(self.xshape[1 + j])}")
        return " and ".join(terms) if terms else None

    def tap_col(self):
        """The column of tap ``(kq0, kq1, ..)``'s first channel in a packed row."""
        e = "kq0"
        for j in range(1, self.ns):
            e = f"({e}) * {self.ksize[j]} + kq{j}" if j > 1 else f"{e} * {self.ksize[j]} + kq{j}"
        return e if self.C == 1 else f"({e}) * {_d(self.C)}"

    def row(self, img):
        """The packed row of output position ``(op0, ..)`` of tile image ``img``."""
        e = img
        for j in range(self.ns):
            e = f"({e}) * {_d(self.yshape[1 + j])} + op{j}"
        return e

    def work(self):
        return _prod(self.yshape[:1]) * self.P * self.K * self.Cg * self.F

    def tile(self):
        """Images per tile of the packed buffer (a literal: the kernel's text does not
        depend on the batch size)."""
        return max(1, PATCH_ELEMS // max(1, self.P * self.K * self.C))


def _at(prefix, ns) -> tuple:
    """``("ix0", "ix1", ..)``: one index name per spatial axis."""
    return tuple(f"{prefix}{j}" for j in range(ns))


def _out_nest(geo, inner, opaque=False):
    ext = list(_at("no", geo.ns)) if opaque else [_d(s) for s in geo.yshape[1:-1]]
    return _nest(list(_at("op", geo.ns)), ext, inner, False)


def _taps_nest(geo, inner, opaque=False):
    """Loops over the window's taps; each computes ``ix{j}`` and, where the tap can fall
    in the padding, runs ``inner`` only inside the input."""
    idx = geo.in_index()
    body = list(inner)
    g = geo.guard()
    if g is not None:
        body = [If(g, tuple(body))]
    body = [Let(f"ix{j}", idx[j]) for j in range(geo.ns)] + body
    ext = list(_at("nk", geo.ns)) if opaque else [str(k) for k in geo.ksize]
    return _nest(list(_at("kq", geo.ns)), ext, body, False)


def _opaque_extents(geo, wa, ya) -> list:
    """``nk{j}`` (taps) and ``no{j}`` (output positions) read from the filter's and the
    output's shapes, for the packing and scatter nests of the GEMM formulation: with
    literal trip counts (5 taps, 8 positions) LLVM unrolls those nests whole, and a
    LeNet convolution kernel took 1.13 s to compile instead of 0.76, and ran no faster
    (1.55 ms against 1.49)."""
    return ([Let(f"nk{j}", f"{wa}.shape[{j}]") for j in range(geo.ns)]
            + [Let(f"no{j}", f"{ya}.shape[{1 + j}]") for j in range(geo.ns)])


def _tiles(geo, N, before, per_image, after):
    """``for t in tiles: before; for ii in the tile (parallel): per_image; after``."""
    T = geo.tile()
    return [
        Loop("t", f"({N} + {T - 1}) // {T}" if T > 1 else N, (
            Let("n0", f"t * {T}" if T > 1 else "t"),
            Let("nt", f"min({T}, {N} - n0)" if T > 1 else "1"),
            *before,
            Loop("ii", "nt", (Let("nn", "n0 + ii"), *per_image), True),
            *after,
        )),
    ]


def _pack(geo, xa):
    """Write image ``nn``'s windows into the rows of tile image ``ii`` of ``pat``, zeros
    where a tap is in the padding."""
    C = _d(geo.C)
    read = f"{xa}[nn, {', '.join(_at('ix', geo.ns))}, c]"
    inside = (Loop("c", C, (Store("pat", ("r", "col + c"), read),)),)
    g = geo.guard()
    idx = geo.in_index()
    body = [Let("col", geo.tap_col())] + [Let(f"ix{j}", idx[j]) for j in range(geo.ns)]
    if g is None:
        body += list(inside)
    else:
        body += [If(g, inside),
                 If(f"not ({g})", (Loop("c", C, (Store("pat", ("r", "col + c"), "0"),)),))]
    taps = _nest(list(_at("kq", geo.ns)), list(_at("nk", geo.ns)), body, False)
    return _out_nest(geo, [Let("r", geo.row("ii")), *taps], opaque=True)


# ---------------------------------------------------------------------------
# The three ops' statements, over arrays named by the caller. Their own names end in a
# letter (``wmat``, ``pat``): a fused epilogue's values are named ``y0``, ``m0``, ..., and
# ``y2`` for the output's matrix view once shadowed the epilogue's third load


def conv_stmts(geo, xa, wa, ya, dt) -> list:
    """``ya = conv(xa, wa)``."""
    N, ns = _d(geo.xshape[0]), geo.ns
    if geo.formulation() == "gemm":
        T = geo.tile()
        P, KC, F = _dprod(geo.yshape[1:-1]), _dprod((*geo.ksize, geo.C)), _d(geo.F)
        return [
            *_opaque_extents(geo, wa, ya),
            View("wmat", wa, "reshape", (KC, F)),
            View("ymat", ya, "reshape", (f"{N} * {P}", F)),
            Alloc("pat", (f"min({T}, {N}) * {P}", KC), dt),
            *_tiles(geo, N, (), _pack(geo, xa), (
                Gemm(f"pat[:nt * {P}]", "wmat", f"ymat[n0 * {P}:(n0 + nt) * {P}]"),)),
        ]
    G, Cg, Fg = geo.groups, _d(geo.Cg), _d(geo.Fg)
    xi = f"{xa}[nn, {', '.join(_at('ix', ns))}"
    yi = f"{ya}[nn, {', '.join(_at('op', ns))}"
    wi = f"{wa}[{', '.join(_at('kq', ns))}"
    if G == 1:
        inner = [Loop("c", Cg, (
            Load("xv", xa, ("nn", *_at("ix", ns), "c")),
            Loop("f", _d(geo.F), (Update(f"{yi}, f]", "+", f"xv * {wi}, c, f]"),)),
        ))]
    elif geo.Cg == 1:  # depthwise: the channels innermost
        inner = [Loop("m", Fg, (Loop("g", str(G), (Update(
            f"{yi}, g * {Fg} + m]", "+", f"{xi}, g] * {wi}, 0, g * {Fg} + m]"),)),))]
    else:
        inner = [Loop("g", str(G), (Loop("c", Cg, (
            Load("xv", xa, ("nn", *_at("ix", ns), f"g * {Cg} + c")),
            Loop("f", Fg, (Update(f"{yi}, g * {Fg} + f]", "+",
                                  f"xv * {wi}, c, g * {Fg} + f]"),)),)),))]
    zero = Loop("f", _d(geo.F), (Store(ya, ("nn", *_at("op", ns), "f"), "0"),))
    return [Loop("nn", N, tuple(_out_nest(geo, [zero, *_taps_nest(geo, inner)])), True)]


def backprop_input_stmts(geo, dya, wa, dxa, dt) -> list:
    """``dxa = conv_backprop_input(dya, wa)``: ``geo`` is the forward convolution's."""
    N, ns = _d(geo.xshape[0]), geo.ns
    dxi = ("nn", *_at("ix", ns))
    if geo.formulation() == "gemm":
        T = geo.tile()
        P, KC, F, C = (_dprod(geo.yshape[1:-1]), _dprod((*geo.ksize, geo.C)), _d(geo.F),
                       _d(geo.C))
        scatter = [Let("col", geo.tap_col()),
                   Loop("c", C, (Update(f"{dxa}[{', '.join(dxi)}, c]", "+",
                                        "cols[r, col + c]"),))]
        per_image = _out_nest(geo, [Let("r", geo.row("ii")),
                                    *_taps_nest(geo, scatter, opaque=True)], opaque=True)
        return [
            *_opaque_extents(geo, wa, dya),
            Fill(dxa, "0"),
            View("wmat", wa, "reshape", (KC, F)),
            View("dymat", dya, "reshape", (f"{N} * {P}", F)),
            Alloc("cols", (f"min({T}, {N}) * {P}", KC), dt),
            *_tiles(geo, N, (
                Gemm(f"dymat[n0 * {P}:(n0 + nt) * {P}]", "wmat.T", f"cols[:nt * {P}]"),),
                per_image, ()),
        ]
    G, Cg, Fg = geo.groups, _d(geo.Cg), _d(geo.Fg)
    wi = f"{wa}[{', '.join(_at('kq', ns))}"
    dyi = f"{dya}[nn, {', '.join(_at('op', ns))}"
    inner = [Loop("g", str(G), (Loop("c", Cg, (
        Let("acc", literal(0, dt)),
        Loop("f", Fg, (Update("acc", "+", f"{dyi}, g * {Fg} + f] * {wi}, c, g * {Fg} + f]"),)),
        Update(f"{dxa}[{', '.join(dxi)}, g * {Cg} + c]", "+", "acc"),
    )),))]
    return [Fill(dxa, "0"), Loop("nn", N, tuple(_out_nest(geo, _taps_nest(geo, inner))), True)]


def backprop_filter_stmts(geo, xa, dya, dwa, dt) -> list:
    """``dwa = conv_backprop_filter(xa, dya)``."""
    N, ns = _d(geo.xshape[0]), geo.ns
    if geo.formulation() == "gemm":
        T = geo.tile()
        P, KC, F = _dprod(geo.yshape[1:-1]), _dprod((*geo.ksize, geo.C)), _d(geo.F)
        rows = f"dymat[n0 * {P}:(n0 + nt) * {P}]"
        return [
            *_opaque_extents(geo, dwa, dya),
            View("dwmat", dwa, "reshape", (KC, F)),
            View("dymat", dya, "reshape", (f"{N} * {P}", F)),
            Alloc("pat", (f"min({T}, {N}) * {P}", KC), dt),
            If(f"{N} == 0", (Fill(dwa, "0"),)),
            # the first tile writes dw, the later ones add to it (beta 1)
            *_tiles(geo, N, (), _pack(geo, xa), (
                Gemm(f"pat[:nt * {P}].T", rows, "dwmat", "0.0 if t == 0 else 1.0"),)),
        ]
    G, Cg, Fg = geo.groups, _d(geo.Cg), _d(geo.Fg)
    dyi = f"{dya}[nn, {', '.join(_at('op', ns))}"
    dwi = f"{dwa}[{', '.join(_at('kq', ns))}"
    idx = geo.in_index()
    g = geo.guard()
    if G == 1:
        inner = (Loop("c", Cg, (
            Load("xv", xa, ("nn", *_at("ix", ns), "c")),
            Loop("f", _d(geo.F), (Update(f"{dwi}, c, f]", "+", f"xv * {dyi}, f]"),)),
        )),)
    else:
        inner = (Loop("gg", str(G), (Loop("c", Cg, (
            Load("xv", xa, ("nn", *_at("ix", ns), f"gg * {Cg} + c")),
            Loop("f", Fg, (Update(f"{dwi}, c, gg * {Fg} + f]", "+",
                                  f"xv * {dyi}, gg * {Fg} + f]"),)),)),)),)
    at = [Let(f"ix{j}", idx[j]) for j in range(ns)]
    at += [If(g, inner)] if g is not None else list(inner)
    per_tap = _nest(["nn", *_at("op", ns)], [N, *(_d(s) for s in geo.yshape[1:-1])], at, False)
    # parallel over the first filter axis: no two of its iterations write one element
    return [Fill(dwa, "0"),
            *_nest(list(_at("kq", ns)), [str(k) for k in geo.ksize], per_tap, True)]


# ---------------------------------------------------------------------------
# The scheduler's rules


def geometry(n, types) -> tuple:
    """``(geo, statements(ins, out, dt), description(ts, dt))`` of window node ``n``:
    ``ins`` the names of its two inputs, ``out`` of its output."""
    a = dict(n.attrs)
    i0, i1 = (types[v].shape for v in n.inputs)
    out = n.types[0].shape
    name = n.op.name
    if name == "conv":
        geo = _Geo(a, i0, i1, out)
        return geo, (lambda ins, o, dt: conv_stmts(geo, *ins, o, dt)), \
            (lambda ts, dt: geo.describe(ts, "conv", dt, (i0, i1)))
    if name == "conv_backprop_input":
        geo = _Geo(a, out, i1, i0)
        return geo, (lambda ins, o, dt: backprop_input_stmts(geo, *ins, o, dt)), \
            (lambda ts, dt: geo.describe(ts, name, dt, (i0, i1)))
    if name == "conv_backprop_filter":
        geo = _Geo(a, i0, out, i1)
        return geo, (lambda ins, o, dt: backprop_filter_stmts(geo, *ins, o, dt)), \
            (lambda ts, dt: geo.describe(ts, name, dt, (i0, i1)))
    raise ValueError(f"no window kernel for {name}")


# the operands each op only indexes (any strides: an NCHW input's transposed view is
# read where it lies); the others are reshaped, so they are made contiguous first (a
# copy in the entry, whose np.ascontiguousarray of a 4-d view costs seconds of compile)
INDEXED_ONLY = {"conv": (0,), "conv_backprop_filter": (0,), "conv_backprop_input": ()}


class WindowKernels:
    """``op_conv``, ``op_conv_backprop_input``, ``op_conv_backprop_filter``: each a
    kernel of its own (``window_hero`` writes one inside a fused kernel, before the
    epilogue that fusion gave it)."""

    def _window(self, n):
        o = n.outputs[0]
        dt = n.types[0].dtype
        geo, stmts, desc = geometry(n, self.types)
        free = INDEXED_ONLY[n.op.name]
        args = [(f"a{j}", self.val[v].var if j in free else self.contiguous(v))
                for j, v in enumerate(n.inputs)] + [("r0", self.dest(o))]
        self.kernel(lambda ts: desc(ts, dt), args, stmts(("a0", "a1"), "r0", dt),
                    geo.work() >= PARALLEL_MIN)

    op_conv = op_conv_backprop_input = op_conv_backprop_filter = _window

    def window_hero(self, hero, types, ins, out):
        """The statements of window node ``hero`` (``types``: its body's) reading ``ins``
        into ``out`` (names of the fused kernel), whether it is worth threads, and its
        description."""
        geo, stmts, desc = geometry(hero, types)
        dt = hero.types[0].dtype
        return stmts(ins, out, dt), geo.work() >= PARALLEL_MIN, (lambda ts: desc(ts, dt))
