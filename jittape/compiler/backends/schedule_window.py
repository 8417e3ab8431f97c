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
# the packed windows of one tile stay under this many elements (16 MiB of float32)
PATCH_ELEMS = 1 << 22


class _Geo:
    """One window op's geometry: ``x[N, *S, C]``, ``w[*K, Cg, F]``, ``y[N, *O, F]``."""

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
        k = "x".join(str(s) for s in self.ksize)
        parts = [f"{what} {k}"]
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

    # -- index expressions (the kernel's names: o0.., k0.., i0..) ---------------------
    def in_index(self):
        """Per spatial axis: the input position window tap ``k`` of output ``o`` reads."""
        out = []
        for j in range(self.ns):
            e = f"o{j}" if self.strides[j] == 1 else f"o{j} * {self.strides[j]}"
            tap = f"k{j}" if self.dil[j] == 1 else f"k{j} * {self.dil[j]}"
            e = f"{e} + {tap}"
            lo = self.pads[j][0]
            out.append(f"{e} - {lo}" if lo else e)
        return out

    def guard(self):
        """Whether every ``i{j}`` lies inside the input (None: it always does)."""
        terms = []
        for j in range(self.ns):
            lo, hi = self.pads[j]
            if lo:
                terms.append(f"i{j} >= 0")
            if hi:  # without high padding the last window ends inside the input
                terms.append(f"i{j} < {_d(self.xshape[1 + j])}")
        return " and ".join(terms) if terms else None

    def tap_col(self):
        """The column of tap ``(k0, k1, ..)``'s first channel in a packed row."""
        e = "k0"
        for j in range(1, self.ns):
            e = f"({e}) * {self.ksize[j]} + k{j}" if j > 1 else f"{e} * {self.ksize[j]} + k{j}"
        return e if self.C == 1 else f"({e}) * {_d(self.C)}"

    def row(self, img):
        """The packed row of output position ``(o0, ..)`` of image ``img``."""
        e = img
        for j in range(self.ns):
            e = f"({e}) * {_d(self.yshape[1 + j])} + o{j}"
        return e


def _at(prefix, ns) -> tuple:
    """``("i0", "i1", ..)``: one index name per spatial axis."""
    return tuple(f"{prefix}{j}" for j in range(ns))


def _taps_nest(geo, inner, guard=True):
    """Loops over the window's taps; each computes ``i{j}`` and, where the tap can fall
    in the padding, runs ``inner`` only inside the input."""
    idx = geo.in_index()
    body = list(inner)
    g = geo.guard() if guard else None
    if g is not None:
        body = [If(g, tuple(body))]
    body = [Let(f"i{j}", idx[j]) for j in range(geo.ns)] + body
    return _nest([f"k{j}" for j in range(geo.ns)], [str(k) for k in geo.ksize], body, False)


class WindowKernels:
    """``op_conv``, ``op_conv_backprop_input``, ``op_conv_backprop_filter``."""

    def _geo(self, n, xshape, wshape, yshape) -> _Geo:
        return _Geo(dict(n.attrs), xshape, wshape, yshape)

    def _tile(self, geo):
        """Images per tile of the packed buffer (a literal: the kernel's text does not
        depend on the batch size)."""
        return max(1, PATCH_ELEMS // max(1, geo.P * geo.K * geo.C))

    def _packed_rows(self, geo, T, N, per_tile_before, per_image, per_tile_after):
        """``for t in tiles: before; for i in tile (parallel): per_image; after``."""
        return [
            Loop("t", f"({N} + {T - 1}) // {T}" if T > 1 else N, (
                Let("n0", f"t * {T}" if T > 1 else "t"),
                Let("nt", f"min({T}, {N} - n0)" if T > 1 else "1"),
                *per_tile_before,
                Loop("ii", "nt", (Let("nn", "n0 + ii"), *per_image), True),
                *per_tile_after,
            )),
        ]

    def _pack(self, geo, xv):
        """Statements that write image ``nn``'s windows into ``pat`` (rows of tile
        image ``ii``), zeros where a tap is in the padding."""
        C = _d(geo.C)
        cols = [Let("col", geo.tap_col())]
        inside = (Loop("c", C, (Store("pat", ("r", "col + c"), f"{xv}[nn, "
                                      + ", ".join(f"i{j}" for j in range(geo.ns)) + ", c]"),)),)
        g = geo.guard()
        idx = geo.in_index()
        body = cols + [Let(f"i{j}", idx[j]) for j in range(geo.ns)]
        if g is None:
            body += list(inside)
        else:
            body += [If(g, inside),
                     If(f"not ({g})", (Loop("c", C, (Store("pat", ("r", "col + c"), "0"),)),))]
        taps = _nest([f"k{j}" for j in range(geo.ns)], [str(k) for k in geo.ksize], body, False)
        return _nest([f"o{j}" for j in range(geo.ns)], [_d(s) for s in geo.yshape[1:-1]],
                     [Let("r", geo.row("ii")), *taps], False)

    def _work(self, geo):
        return _prod(geo.yshape[:1]) * geo.P * geo.K * geo.Cg * geo.F

    # -- conv ------------------------------------------------------------------
    def op_conv(self, n):
        (x, w), o = n.inputs, n.outputs[0]
        xs, ws, dt = self.types[x].shape, self.types[w].shape, self.types[x].dtype
        ys = n.types[0].shape
        geo = self._geo(n, xs, ws, ys)
        d = self.dest(o)
        args = [("a0", self.contiguous(x)), ("a1", self.contiguous(w)), ("r0", d)]
        work = self._work(geo)
        N = _d(xs[0])
        if geo.formulation() == "gemm":
            T = self._tile(geo)
            P, KC, F = _dprod(ys[1:-1]), _dprod((*geo.ksize, geo.C)), _d(geo.F)
            body = [
                View("w2", "a1", "reshape", (KC, F)),
                View("y2", "r0", "reshape", (f"{N} * {P}", F)),
                Alloc("pat", (f"min({T}, {N}) * {P}", KC), dt),
                *self._packed_rows(geo, T, N, (), self._pack(geo, "a0"), (
                    Gemm(f"pat[:nt * {P}]", "w2", f"y2[n0 * {P}:(n0 + nt) * {P}]"),)),
            ]
        else:
            body = [Loop("nn", N, tuple(self._direct_fwd(geo)), True)]
        self.kernel(lambda ts: geo.describe(ts, "conv", dt, (xs, ws)), args, body,
                    work >= PARALLEL_MIN)

    def _direct_fwd(self, geo):
        """Image ``nn``: ``y[nn, o, f] = sum over taps inside and channels``."""
        ns, G, Cg, Fg = geo.ns, geo.groups, _d(geo.Cg), _d(geo.Fg)
        xi = "a0[nn, " + ", ".join(f"i{j}" for j in range(ns))
        yi = "r0[nn, " + ", ".join(f"o{j}" for j in range(ns))
        wi = "a1[" + ", ".join(f"k{j}" for j in range(ns))
        if G == 1:
            F = _d(geo.F)
            inner = [Loop("c", Cg, (
                Load("xv", "a0", ("nn", *_at("i", ns), "c")),
                Loop("f", F, (Update(f"{yi}, f]", "+", f"xv * {wi}, c, f]"),)),
            ))]
        elif geo.Cg == 1:  # depthwise: the channels innermost
            inner = [Loop("m", Fg, (Loop("g", str(G), (Update(
                f"{yi}, g * {Fg} + m]", "+",
                f"{xi}, g] * {wi}, 0, g * {Fg} + m]"),)),))]
        else:
            inner = [Loop("g", str(G), (Loop("c", Cg, (
                Load("xv", "a0", ("nn", *_at("i", ns), f"g * {Cg} + c")),
                Loop("f", Fg, (Update(f"{yi}, g * {Fg} + f]", "+",
                                      f"xv * {wi}, c, g * {Fg} + f]"),)),)),))]
        zero = Loop("f", _d(geo.F), (Store("r0", ("nn", *_at("o", ns), "f"), "0"),))
        return _nest([f"o{j}" for j in range(ns)], [_d(s) for s in geo.yshape[1:-1]],
                     [zero, *_taps_nest(geo, inner)], False)

    # -- the input gradient ---------------------------------------------------------
    def op_conv_backprop_input(self, n):
        (dy, w), o = n.inputs, n.outputs[0]
        ys, ws, dt = self.types[dy].shape, self.types[w].shape, self.types[dy].dtype
        xs = n.types[0].shape
        geo = self._geo(n, xs, ws, ys)
        d = self.dest(o)
        args = [("a0", self.contiguous(dy)), ("a1", self.contiguous(w)), ("r0", d)]
        work = self._work(geo)
        N = _d(xs[0])
        ns = geo.ns
        dxi = ("nn", *_at("i", ns))
        if geo.formulation() == "gemm":
            T = self._tile(geo)
            P, KC, F, C = _dprod(ys[1:-1]), _dprod((*geo.ksize, geo.C)), _d(geo.F), _d(geo.C)
            scatter = [Let("col", geo.tap_col()),
                       Loop("c", C, (Update(f"r0[{', '.join(dxi)}, c]", "+",
                                            "cols[r, col + c]"),))]
            per_image = _nest([f"o{j}" for j in range(ns)], [_d(s) for s in ys[1:-1]],
                              [Let("r", geo.row("ii")), *_taps_nest(geo, scatter)], False)
            body = [
                Fill("r0", "0"),
                View("w2", "a1", "reshape", (KC, F)),
                View("dy2", "a0", "reshape", (f"{N} * {P}", F)),
                Alloc("cols", (f"min({T}, {N}) * {P}", KC), dt),
                *self._packed_rows(geo, T, N, (
                    Gemm(f"dy2[n0 * {P}:(n0 + nt) * {P}]", "w2.T", f"cols[:nt * {P}]"),),
                    per_image, ()),
            ]
        else:
            G, Cg, Fg = geo.groups, _d(geo.Cg), _d(geo.Fg)
            wi = "a1[" + ", ".join(f"k{j}" for j in range(ns))
            dyi = "a0[nn, " + ", ".join(f"o{j}" for j in range(ns))
            inner = [Loop("g", str(G), (Loop("c", Cg, (
                Let("acc", literal(0, dt)),
                Loop("f", Fg, (Update("acc", "+",
                                      f"{dyi}, g * {Fg} + f] * {wi}, c, g * {Fg} + f]"),)),
                Update(f"r0[{', '.join(dxi)}, g * {Cg} + c]", "+", "acc"),
            )),))]
            per_image = _nest([f"o{j}" for j in range(ns)], [_d(s) for s in ys[1:-1]],
                              _taps_nest(geo, inner), False)
            body = [Fill("r0", "0"), Loop("nn", N, tuple(per_image), True)]
        self.kernel(lambda ts: geo.describe(ts, "conv_backprop_input", dt, (ys, ws)), args,
                    body, work >= PARALLEL_MIN)

    # -- the filter gradient ----------------------------------------------------------
    def op_conv_backprop_filter(self, n):
        (x, dy), o = n.inputs, n.outputs[0]
        xs, ys, dt = self.types[x].shape, self.types[dy].shape, self.types[x].dtype
        ws = n.types[0].shape
        geo = self._geo(n, xs, ws, ys)
        d = self.dest(o)
        args = [("a0", self.contiguous(x)), ("a1", self.contiguous(dy)), ("r0", d)]
        work = self._work(geo)
        N = _d(xs[0])
        ns = geo.ns
        if geo.formulation() == "gemm":
            T = self._tile(geo)
            P, KC, F = _dprod(ys[1:-1]), _dprod((*geo.ksize, geo.C)), _d(geo.F)
            rows = f"dy2[n0 * {P}:(n0 + nt) * {P}]"
            body = [
                View("dw2", "r0", "reshape", (KC, F)),
                View("dy2", "a1", "reshape", (f"{N} * {P}", F)),
                Alloc("pat", (f"min({T}, {N}) * {P}", KC), dt),
                If(f"{N} == 0", (Fill("r0", "0"),)),
            ]
            body.append(Alloc("part", (KC, F), dt))  # the second tile's on
            body += self._packed_rows(geo, T, N, (), self._pack(geo, "a0"), (
                If("t == 0", (Gemm(f"pat[:nt * {P}].T", rows, "dw2"),)),
                If("t > 0", (Gemm(f"pat[:nt * {P}].T", rows, "part"),
                             Loop("p", KC, (Loop("f", F, (
                                 Update("dw2[p, f]", "+", "part[p, f]"),)),)))),
            ))
        else:
            G, Cg, Fg = geo.groups, _d(geo.Cg), _d(geo.Fg)
            dyi = "a1[nn, " + ", ".join(f"o{j}" for j in range(ns))
            dwi = "r0[" + ", ".join(f"k{j}" for j in range(ns))
            idx = geo.in_index()
            g = geo.guard()
            if G == 1:
                inner = (Loop("c", Cg, (
                    Load("xv", "a0", ("nn", *_at("i", ns), "c")),
                    Loop("f", _d(geo.F), (Update(f"{dwi}, c, f]", "+", f"xv * {dyi}, f]"),)),
                )),)
            else:
                inner = (Loop("gg", str(G), (Loop("c", Cg, (
                    Load("xv", "a0", ("nn", *_at("i", ns), f"gg * {Cg} + c")),
                    Loop("f", Fg, (Update(f"{dwi}, c, gg * {Fg} + f]", "+",
                                          f"xv * {dyi}, gg * {Fg} + f]"),)),)),)),)
            at = [Let(f"i{j}", idx[j]) for j in range(ns)]
            at += [If(g, inner)] if g is not None else list(inner)
            per_tap = _nest(["nn", *(f"o{j}" for j in range(ns))],
                            [N, *(_d(s) for s in ys[1:-1])], at, False)
            taps = _nest([f"k{j}" for j in range(ns)], [str(k) for k in geo.ksize], per_tap,
                         True)
            body = [Fill("r0", "0"), *taps]
        self.kernel(lambda ts: geo.describe(ts, "conv_backprop_filter", dt, (xs, ys)), args,
                    body, work >= PARALLEL_MIN)
