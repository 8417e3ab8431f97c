"""Vectorizable scalar math for generated Numba kernels.

PyPI's llvmlite has no SVML, so ``math.exp`` & co. in an ``@njit`` loop are
scalar libm calls and the loop does not vectorize. The helpers here are
branch-free (selects, no data-dependent jumps), inline into the calling loop
and vectorize with it. Each one works on float32 and float64 scalars and
returns the dtype it was given (float32 code computes in float32: 16 lanes
under AVX-512). They are ``@overload``s of the pure-Python stubs below, so they
are called like any function from nopython code::

    from jittape.compiler.backends import vmath as _vm

    @numba.njit(fastmath={"reassoc", "contract"}, error_model="numpy", cache=True)
    def k(x, out):
        for i in range(x.shape[0]):
            out[i] = _vm.jt_tanh(x[i]) * _vm.jt_sigmoid(x[i])

and from plain Python they fall back to numpy.

Every helper is compiled with its own flags (``forceinline=True``,
``fastmath=False``, ``error_model="numpy"``); LLVM keeps those per instruction
when it inlines, so a caller's ``reassoc`` never reaches the carefully ordered
arithmetic here. Products that may be fused are written with ``_fma``
(``llvm.fmuladd``: one rounding on FMA hardware, two elsewhere; the error
bounds below hold either way).

Bump ``VERSION`` with every change to an implementation: the code generator
writes it into each generated file, so Numba's on-disk cache never reuses a
kernel that inlined an older helper.

How dtype dispatch works: each public name is a plain Python function (the
numpy fallback) with a ``numba.extending.overload``. When nopython code calls
it, Numba asks the overload for an implementation for the argument types; it
picks the constant table for float32 or float64 (``_C``: numpy scalars such
as ``np.float32(0.5)``, captured by the implementation's closure, so Numba
freezes them as typed constants) and returns one shared algorithm body. The
overload's ``jit_options`` carry ``forceinline``/``fastmath``/``error_model``
to the implementation (Numba builds it with ``jit(**jit_options)``); the
tests check that a caller with ``fastmath=True`` or ``error_model="python"``
does not change the helpers. Integer/bool arguments to the float functions
compute in float64. For maximum, minimum, floordiv and floormod the result
dtype is numpy's (``np.result_type``) with Python int literals weak, so
``jt_maximum(x_f32, 0)`` stays float32; a bare float literal is float64 in
Numba and would widen, so type float constants.

Accuracy: max error in ulp against the exact value (float64 numpy for float32,
80-bit long double for float64; "ulp" is the spacing of the result's dtype at
the reference value, denormal spacing below the normal range). Measured
2026-11-29 on the project machine (AMD EPYC, AVX-512, FMA), numba 0.68.1:

    ========  ========================  ====================  =========
    function  float32, all 2^32 inputs  float64, 3-4M sample  MAX_ULP
    ========  ========================  ====================  =========
    exp       1.009                     1.004                 1.5
    log       0.840                     0.810                 1.0
    log1p     0.865                     0.851                 1.0
    tanh      1.420                     1.403                 2.0
    sigmoid   2.402                     2.227                 3.0
    ========  ========================  ====================  =========

float32: ``JITTAPE_VMATH_FULL=1 python -m pytest -s tests/test_vmath.py -k
exhaustive`` (about 2-3 min; prints the maxima). float64: random bit patterns
plus dense samples of each function's interesting regions (thresholds, near
0/1/-1, the tanh branch point), as in ``samples()`` in the tests, with 1M per
region. Built for plain x86-64 (SSE2, no FMA: ``NUMBA_CPU_NAME=x86-64
NUMBA_CPU_FEATURES=+64bit,+sse,+sse2,+cx8,+fxsr,+mmx``) the sampled maxima
stayed within 0.05 ulp of these and the tests pass. NaN, +-inf, +-0 (with
its sign where it matters), denormal inputs and results, and the
overflow/underflow thresholds are exact (tested).

Speed: one ``@njit(fastmath={"reassoc", "contract"}, error_model="numpy")``
loop ``out[i] = f(x[i])`` over 2^20 elements against numpy's ufunc into a
preallocated output (sigmoid: ``np.exp(-x)``, ``+1``, ``np.reciprocal``, all
in place), median of 25 runs, ms, same machine and date (it was shared: load
average about 2, so +-10%):

    ==========  =============  =============
    function    float32 jt/np  float64 jt/np
    ==========  =============  =============
    exp         0.17 / 0.34    0.48 / 0.62
    log         0.24 / 0.25    0.66 / 0.61
    log1p       0.24 / 0.27    0.64 / 0.69
    tanh        0.24 / 0.17    0.77 / 0.85
    sigmoid     0.18 / 0.62    0.52 / 1.41
    relu        0.07 / 0.32    0.18 / 0.48
    sign        0.07 / 0.34    0.16 / 0.51
    maximum     0.10 / 0.10    0.34 / 0.29
    minimum     0.10 / 0.10    0.38 / 0.39
    floordiv    5.6 / 22       9.5 / 20
    floormod    5.5 / 34       9.5 / 18
    ==========  =============  =============

The two-input rows read two arrays (memory-bound for max/min). floordiv and
floormod need an exact fmod, which LLVM lowers to a libm call: they stay
scalar (and are still faster than numpy's loops). A plain memory-bound copy
of 2^20 float32 takes about 0.065 ms here.
"""

from __future__ import annotations

import functools

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload
from numba.np.numpy_support import as_dtype, from_dtype

VERSION = "1"

# Error bounds in ulp that tests/test_vmath.py checks: the measured maxima in
# the module docstring, rounded up with room for hosts without FMA.
MAX_ULP = {
    "exp": {"float32": 1.5, "float64": 1.5},
    "log": {"float32": 1.0, "float64": 1.0},
    "log1p": {"float32": 1.0, "float64": 1.0},
    "tanh": {"float32": 2.0, "float64": 2.0},
    "sigmoid": {"float32": 3.0, "float64": 3.0},
}

# Flags every helper is compiled with (see the module docstring).
_FLAGS = dict(forceinline=True, fastmath=False, error_model="numpy")


def _quiet():
    # compiled code raises no floating-point warnings; the fallbacks match that
    return np.errstate(all="ignore")


# --------------------------------------------------------------------------
# Public names. The bodies are the plain-Python fallbacks (numpy); inside
# nopython code the @overload implementations further down are used instead.
# --------------------------------------------------------------------------


def jt_exp(x):
    """exp(x)."""
    with _quiet():
        return np.exp(x)


def jt_log(x):
    """Natural logarithm; log(0) = -inf, log(x < 0) = nan."""
    with _quiet():
        return np.log(x)


def jt_log1p(x):
    """log(1 + x), accurate for small x; log1p(-1) = -inf, log1p(x < -1) = nan."""
    with _quiet():
        return np.log1p(x)


def jt_tanh(x):
    """Hyperbolic tangent."""
    with _quiet():
        return np.tanh(x)


def jt_sigmoid(x):
    """1 / (1 + exp(-x)), stable on both tails."""
    with _quiet():
        return 1 / (1 + np.exp(-x))


def jt_maximum(a, b):
    """np.maximum: a NaN in either argument propagates."""
    return np.maximum(a, b)


def jt_minimum(a, b):
    """np.minimum: a NaN in either argument propagates."""
    return np.minimum(a, b)


def jt_relu(x):
    """max(x, 0) in x's dtype; relu(nan) = nan."""
    return np.maximum(x, 0)


def jt_sign(x):
    """np.sign: -1, 0 or 1 in x's dtype; nan for nan."""
    return np.sign(x)


def jt_floordiv(a, b):
    """np.floor_divide (integers: division by zero gives 0)."""
    with _quiet():
        return np.floor_divide(a, b)


def jt_floormod(a, b):
    """np.remainder: the result has the sign of b (integers: x % 0 gives 0)."""
    with _quiet():
        return np.remainder(a, b)


# --------------------------------------------------------------------------
# LLVM-level building blocks.
# --------------------------------------------------------------------------


@intrinsic
def _bits(typingctx, x):
    """The bits of a float as a signed int of the same width (an LLVM bitcast)."""
    if not isinstance(x, types.Float):
        return None
    ity = types.int32 if x.bitwidth == 32 else types.int64

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(x.bitwidth))

    return ity(x), codegen


@intrinsic
def _from_bits(typingctx, i, like):
    """The float of ``like``'s type whose bits are the low bits of the int ``i``."""
    if not (isinstance(i, types.Integer) and isinstance(like, types.Float)):
        return None

    def codegen(context, builder, sig, args):
        v = _int_width(builder, args[0], i.bitwidth, like.bitwidth)
        return builder.bitcast(v, context.get_value_type(like))

    return like(i, like), codegen


@intrinsic
def _small_int_to_float(typingctx, i, like):
    """Convert a small int (|i| < 2^31) to ``like``'s float type through int32.

    SSE2 and AVX2 convert packed int32 to float but not packed int64, and
    Numba widens all integer arithmetic to int64; truncating first keeps the
    conversion vectorized everywhere.
    """
    if not (isinstance(i, types.Integer) and isinstance(like, types.Float)):
        return None

    def codegen(context, builder, sig, args):
        v = _int_width(builder, args[0], i.bitwidth, 32)
        return builder.sitofp(v, context.get_value_type(like))

    return like(i, like), codegen


@intrinsic
def _wrap(typingctx, i, like):
    """``i`` as the signed int of ``like``'s float width, wrapping (C semantics).

    Numba computes all integer arithmetic in int64; wrapping each step back to
    int32 lets LLVM keep float32 code's integer ops at 32 bits (16 lanes).
    """
    if not (isinstance(i, types.Integer) and isinstance(like, types.Float)):
        return None
    ity = types.int32 if like.bitwidth == 32 else types.int64

    def codegen(context, builder, sig, args):
        return _int_width(builder, args[0], i.bitwidth, like.bitwidth)

    return ity(i, like), codegen


def _int_width(builder, v, have, want):
    if have > want:
        return builder.trunc(v, ir.IntType(want))
    if have < want:
        return builder.sext(v, ir.IntType(want))
    return v


@intrinsic
def _fma(typingctx, a, b, c):
    """a*b + c as ``llvm.fmuladd``: fused where the target has FMA."""
    if not (isinstance(a, types.Float) and a == b == c):
        return None

    def codegen(context, builder, sig, args):
        fty = args[0].type
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(fty, [fty, fty, fty]),
            f"llvm.fmuladd.f{a.bitwidth}")
        return builder.call(fn, args)

    return a(a, b, c), codegen


@intrinsic
def _fmod(typingctx, a, b):
    """C's fmod (LLVM ``frem``; a libm call on x86, so it does not vectorize)."""
    if not (isinstance(a, types.Float) and a == b):
        return None

    def codegen(context, builder, sig, args):
        return builder.frem(args[0], args[1])

    return a(a, b), codegen


@njit(**_FLAGS)
def _horner(x, c):
    """c[0]*x^(n-1) + ... + c[n-1]; ``c`` is a constant tuple, so LLVM unrolls this."""
    p = c[0]
    for i in range(1, len(c)):
        p = _fma(p, x, c[i])
    return p


# --------------------------------------------------------------------------
# Per-dtype constants. Every constant is a numpy scalar of the working dtype,
# so Numba types it as float32/int32 in float32 code (a bare literal would be
# float64 and silently widen the computation). Polynomial coefficients are
# weighted minimax fits (Remez exchange in mpmath), highest degree first.
# --------------------------------------------------------------------------


class _Consts:
    def __init__(self, f, it, mant, bias, **coef):
        self.T = f
        self.ZERO, self.HALF, self.ONE, self.TWO = f(0), f(0.5), f(1), f(2)
        self.NEG_ZERO = f(-0.0)
        self.NEG_ONE = f(-1)
        self.INF, self.NEG_INF, self.NAN = f(np.inf), f(-np.inf), f(np.nan)
        self.MANT = it(mant)                # explicit mantissa bits
        self.BIAS = it(bias)                # exponent bias
        self.I1 = it(1)
        self.MIN_NORMAL = f(np.finfo(f).tiny)
        self.LOG2E = f(1.4426950408889634)
        # Adding 1.5*2^mant rounds a value below 2^(mant-1) to an integer,
        # which then sits in the low mantissa bits.
        self.SHIFT = f(1.5 * 2.0**mant)
        self.SHIFT_BITS = it(np.asarray(self.SHIFT).view(it))
        self.SQRT_HALF_BITS = it(np.asarray(f(np.sqrt(0.5))).view(it))
        self.DENORM_SCALE = f(2.0 ** (mant + 1))
        self.DENORM_K = f(mant + 1)
        for k, v in coef.items():
            setattr(self, k, tuple(f(c) for c in v) if isinstance(v, tuple) else f(v))


_C = {
    32: _Consts(
        np.float32, np.int32, 23, 127,
        # Cody-Waite split of ln 2: ln2_hi has trailing zero bits, so k*ln2_hi
        # is exact for every exponent k that occurs here.
        ln2_hi=0.693145751953125, ln2_lo=1.4286068e-06,
        # exp: inputs beyond these bounds give inf / 0 anyway
        exp_lo=-104.0, exp_hi=89.0,
        # exp(r) = 1 + r + r^2 EXP_P(r) on |r| <= 0.3467; rel. error 2^-28.3
        exp_p=(1.381456e-03, 8.368735e-03, 4.166839e-02, 1.6666521e-01, 4.9999994e-01),
        # log: R(z) = z LOG_Q(z) ~ 2 (atanh(s)/s - 1), z = s^2 <= 0.0295; abs. error 2^-29.2
        log_q=(2.9874596e-01, 3.9977443e-01, 6.6666776e-01),
        # tanh(x) = x + x z TANH_P(z), z = x^2 <= 0.5625^2; rel. error 2^-29.5
        tanh_p=(-6.179816e-03, 2.1007463e-02, -5.383743e-02, 1.3332452e-01, -3.3333313e-01),
        tanh_small=0.5625,
    ),
    64: _Consts(
        np.float64, np.int64, 52, 1023,
        ln2_hi=6.93147180369123816490e-01, ln2_lo=1.90821492927058770002e-10,
        exp_lo=-746.0, exp_hi=710.0,
        # rel. error 2^-57.9
        exp_p=(2.5000033297817035e-08, 2.7630286678863556e-07, 2.7557586658414805e-06,
               2.4801493000129597e-05, 1.9841269506046136e-04, 1.3888888943716028e-03,
               8.333333333494803e-03, 4.166666666652987e-02, 1.6666666666666413e-01,
               5.000000000000011e-01),
        # abs. error 2^-58.5 (close to fdlibm's Lg7..Lg1)
        log_q=(1.479927137532376e-01, 1.531373631019274e-01, 1.8183575881947656e-01,
               2.2222198365580376e-01, 2.8571428744257854e-01, 3.999999999940701e-01,
               6.666666666666735e-01),
        # rel. error 2^-59.9
        tanh_p=(-1.8903969964249943e-05, 8.236094271299254e-05, -2.3271623031094206e-04,
                5.881836542946968e-04, -1.4554796434664084e-03, 3.5920822502841098e-03,
                -8.863231637205215e-03, 2.1869488327276924e-02, -5.3968253961724395e-02,
                1.3333333333323133e-01, -3.3333333333333276e-01),
        tanh_small=0.5625,
    ),
}


def _float_consts(x):
    """The constants for a float argument type, or None for other types."""
    if isinstance(x, types.Float) and x.bitwidth in _C:
        return _C[x.bitwidth]
    return None


def _via_float64(fn):
    """Implementation for integer/bool arguments: compute in float64, as numpy does for int64."""
    def impl(x):
        return fn(np.float64(x))
    return impl


# --------------------------------------------------------------------------
# exp, log, log1p, tanh, sigmoid
# --------------------------------------------------------------------------


@functools.cache
def _exp_kernel(bits, full_range):
    """exp for x in [exp_lo, exp_hi] (or NaN); the caller clamps.

    ``full_range=False`` is cheaper (one scale factor) and exact only while
    the result is a normal number: for float32, x in [-87, 88].
    """
    c = _C[bits]
    LOG2E, SHIFT, SHIFT_BITS = c.LOG2E, c.SHIFT, c.SHIFT_BITS
    NEG_LN2_HI, NEG_LN2_LO, P, ONE = -c.ln2_hi, -c.ln2_lo, c.exp_p, c.ONE
    BIAS, MANT, I1 = c.BIAS, c.MANT, c.I1

    @njit(**_FLAGS)
    def exp_(x):
        # x = n ln2 + r with n = round(x / ln2), |r| <= ln2/2. Adding SHIFT
        # rounds x*log2(e) to an integer, which lands in t's low mantissa
        # bits: t - SHIFT is n as a float, bits(t) - bits(SHIFT) as an int.
        t = _fma(x, LOG2E, SHIFT)
        nf = t - SHIFT
        n = _wrap(_bits(t) - SHIFT_BITS, x)
        r = _fma(nf, NEG_LN2_HI, x)  # exact (Cody-Waite, first part)
        r = _fma(nf, NEG_LN2_LO, r)
        # exp(r) = 1 + r + r^2 P(r); adding the 1 last keeps the small terms exact-ish
        p = ONE + _fma(r * r, _horner(r, P), r)
        if not full_range:  # (a compile-time constant)
            return p * _from_bits(_wrap(n + BIAS, x) << MANT, x)
        # times 2^n, built from exponent bits as 2^n1 * 2^n2 so that both
        # factors are normal numbers from the denormal range up to overflow;
        # the last product rounds once into denormals or overflows to inf.
        n1 = _wrap(n >> I1, x)
        n2 = _wrap(n - n1, x)
        s1 = _from_bits(_wrap(n1 + BIAS, x) << MANT, x)
        s2 = _from_bits(_wrap(n2 + BIAS, x) << MANT, x)
        return p * s1 * s2

    return exp_


@overload(jt_exp, jit_options=_FLAGS)
def _ov_exp(x):
    c = _float_consts(x)
    if c is None:
        return _via_float64(jt_exp) if isinstance(x, (types.Integer, types.Boolean)) else None
    LO, HI, exp_ = c.exp_lo, c.exp_hi, _exp_kernel(x.bitwidth, True)

    def impl(x):
        # Clamp (NaN passes through: both comparisons are false). Beyond the
        # bounds the result is inf or 0 already.
        y = HI if x > HI else x
        y = LO if y < LO else y
        return exp_(y)

    return impl


@functools.cache
def _log_kernel(bits):
    """log(m) + k ln2 + corr for m in [sqrt(1/2), sqrt(2)), in fdlibm's way.

    With f = m - 1 and s = f / (2 + f), log(m) = 2 atanh(s) = 2s + s R(s^2)
    where R(z) = z Q(z) is the polynomial fit; 2s = f - s f is rewritten so
    that the big terms f and hfsq = f^2/2 are added last:
    log(m) = f - (hfsq - s (hfsq + R)). k ln2 is added in two parts.
    """
    c = _C[bits]
    HALF, TWO, Q, LN2_HI, LN2_LO = c.HALF, c.TWO, c.log_q, c.ln2_hi, c.ln2_lo

    @njit(**_FLAGS)
    def kernel(f, k, corr):
        s = f / (TWO + f)
        z = s * s
        R = z * _horner(z, Q)
        hfsq = HALF * f * f
        return _fma(k, LN2_HI, -((hfsq - (s * (hfsq + R) + _fma(k, LN2_LO, corr))) - f))

    return kernel


@functools.cache
def _split(bits):
    """x = 2^k m with m in [sqrt(1/2), sqrt(2)), for positive normal x; returns (m, k as float).

    Subtracting the bits of sqrt(1/2) makes the exponent field read k exactly
    when the mantissa is at or above sqrt(1/2)'s; the mantissa bits are kept.
    """
    c = _C[bits]
    OFF, MANT = c.SQRT_HALF_BITS, c.MANT

    @njit(**_FLAGS)
    def split(x):
        ix = _bits(x)
        k = _wrap(_wrap(ix - OFF, x) >> MANT, x)
        m = _from_bits(ix - (k << MANT), x)
        return m, _small_int_to_float(k, x)

    return split


@overload(jt_log, jit_options=_FLAGS)
def _ov_log(x):
    c = _float_consts(x)
    if c is None:
        return _via_float64(jt_log) if isinstance(x, (types.Integer, types.Boolean)) else None
    kernel, split = _log_kernel(x.bitwidth), _split(x.bitwidth)
    ZERO, NEG_ZERO, ONE, INF, NEG_INF, NAN = c.ZERO, c.NEG_ZERO, c.ONE, c.INF, c.NEG_INF, c.NAN
    MIN_NORMAL, DENORM_SCALE, DENORM_K = c.MIN_NORMAL, c.DENORM_SCALE, c.DENORM_K

    def impl(x):
        # denormals: scale into the normal range, correct k afterwards
        sub = x < MIN_NORMAL
        xs = x * DENORM_SCALE
        xs = xs if sub else x
        m, k = split(xs)
        kd = k - DENORM_K
        k = kd if sub else k
        res = kernel(m - ONE, k, NEG_ZERO)  # (x + -0 folds away; x + 0 does not)
        # special cases (a later select wins): +inf and NaN give x, x < 0 nan, 0 -inf
        res = res if x < INF else x
        res = NAN if x < ZERO else res
        res = NEG_INF if x == ZERO else res
        return res

    return impl


@overload(jt_log1p, jit_options=_FLAGS)
def _ov_log1p(x):
    c = _float_consts(x)
    if c is None:
        return _via_float64(jt_log1p) if isinstance(x, (types.Integer, types.Boolean)) else None
    kernel, split = _log_kernel(x.bitwidth), _split(x.bitwidth)
    ZERO, ONE, NEG_ONE, INF, NEG_INF, NAN = c.ZERO, c.ONE, c.NEG_ONE, c.INF, c.NEG_INF, c.NAN

    def impl(x):
        # u = 1 + x rounded, and its rounding error e = (1 + x) - u exactly
        # (Fast2Sum: subtract the operand of larger magnitude first). Then
        # log1p(x) = log(u) + log(1 + e/u) = log(u) + e/u to working precision.
        u = ONE + x
        e_small = x - (u - ONE)
        e_large = ONE - (u - x)
        e = e_small if abs(x) <= ONE else e_large
        # u >= 2^-mant or u == 0 for x >= -1: never denormal
        m, k = split(u)
        res = kernel(m - ONE, k, e / u)
        res = res if x < INF else x
        res = NAN if x < NEG_ONE else res
        res = NEG_INF if x == NEG_ONE else res
        res = x if x == ZERO else res  # keeps the sign of zero
        return res

    return impl


@overload(jt_tanh, jit_options=_FLAGS)
def _ov_tanh(x):
    c = _float_consts(x)
    if c is None:
        return _via_float64(jt_tanh) if isinstance(x, (types.Integer, types.Boolean)) else None
    ZERO, ONE, TWO, P, SMALL = c.ZERO, c.ONE, c.TWO, c.tanh_p, c.tanh_small
    CLAMP, exp_ = c.T(40), _exp_kernel(x.bitwidth, False)

    def impl(x):
        ax = abs(x)
        # |x| < SMALL: odd polynomial, tanh(x) = x + x z P(z), z = x^2
        z = x * x
        small = _fma(x, z * _horner(z, P), x)
        # otherwise tanh|x| = 1 - 2 / (exp(2|x|) + 1): the result is above 0.5,
        # so the subtraction loses nothing. tanh rounds to 1.0 from |x| = 9
        # (float32) or 19 (float64) on, so exp's argument is clamped at 40
        # (NaN passes) and the cheaper in-range exp is enough.
        y = ax + ax
        y = CLAMP if y > CLAMP else y
        big = ONE - TWO / (exp_(y) + ONE)
        nbig = -big
        big = nbig if x < ZERO else big
        res = small if ax < SMALL else big
        res = x if x == ZERO else res  # tanh(-0) = -0
        return res

    return impl


@overload(jt_sigmoid, jit_options=_FLAGS)
def _ov_sigmoid(x):
    c = _float_consts(x)
    if c is None:
        return _via_float64(jt_sigmoid) if isinstance(x, (types.Integer, types.Boolean)) else None
    ZERO, ONE, LO, exp_ = c.ZERO, c.ONE, c.exp_lo, _exp_kernel(x.bitwidth, True)

    def impl(x):
        # e = exp(-|x|) is in [0, 1]: 1/(1+e) for x >= 0, e/(1+e) for x < 0.
        # Neither form overflows; tails go to exactly 1 and 0 (through
        # exp's denormals), NaN propagates through e.
        y = -abs(x)
        y = LO if y < LO else y
        e = exp_(y)
        num = e if x < ZERO else ONE
        return num / (ONE + e)

    return impl


# --------------------------------------------------------------------------
# maximum, minimum, relu, sign, floordiv, floormod: any numeric dtype
# --------------------------------------------------------------------------


def _result_type(*tys):
    """numpy's result dtype for these argument types, as a Numba type.

    Python int literals are weak (NEP 50): jt_maximum(x_f32, 0) stays float32.
    Float literals are float64 in Numba, so type float constants yourself.
    """
    strong = [t for t in tys if not isinstance(t, types.IntegerLiteral)]
    strong = [types.unliteral(t) for t in strong] or [types.unliteral(tys[0])]
    if not all(isinstance(t, (types.Integer, types.Float, types.Boolean)) for t in strong):
        return None
    return from_dtype(np.result_type(*[as_dtype(t) for t in strong]))


def _scalar_type(nt):
    """The numpy scalar class for a Numba type (callable in nopython code as a cast)."""
    return as_dtype(nt).type


@overload(jt_maximum, jit_options=_FLAGS, prefer_literal=True)
def _ov_maximum(a, b):
    rt = _result_type(a, b)
    if rt is None:
        return None
    T = _scalar_type(rt)

    def impl(a, b):
        x = T(a)
        y = T(b)
        r = x if x > y else y
        r = x if x != x else r  # a NaN x (a NaN y was picked above)
        return r

    return impl


@overload(jt_minimum, jit_options=_FLAGS, prefer_literal=True)
def _ov_minimum(a, b):
    rt = _result_type(a, b)
    if rt is None:
        return None
    T = _scalar_type(rt)

    def impl(a, b):
        x = T(a)
        y = T(b)
        r = x if x < y else y
        r = x if x != x else r
        return r

    return impl


@overload(jt_relu, jit_options=_FLAGS)
def _ov_relu(x):
    if not isinstance(x, (types.Integer, types.Float)):
        return None
    ZERO = _scalar_type(x)(0)

    def impl(x):
        # "not (x <= 0)" is true for NaN, which is returned as it is
        return ZERO if x <= ZERO else x

    return impl


@overload(jt_sign, jit_options=_FLAGS)
def _ov_sign(x):
    if not isinstance(x, (types.Integer, types.Float)):
        return None
    T = _scalar_type(x)
    ZERO, ONE = T(0), T(1)
    signed = isinstance(x, types.Float) or x.signed
    NEG_ONE = T(-1) if signed else ZERO  # unsigned: never negative

    def impl(x):
        r = ONE if x > ZERO else ZERO
        r = NEG_ONE if x < ZERO else r
        r = x if x != x else r  # NaN
        return r

    return impl


@functools.cache
def _float_divmod(bits):
    """numpy's npy_divmod for floats: (floor quotient, remainder with b's sign)."""
    c = _C[bits]
    ZERO, HALF, ONE = c.ZERO, c.HALF, c.ONE

    @njit(**_FLAGS)
    def divmod_(a, b):
        mod = _fmod(a, b)  # exact
        div = (a - mod) / b  # very nearly an integer
        # fmod's result has a's sign; Python's convention wants b's
        adjust = (mod != ZERO) & ((b < ZERO) != (mod < ZERO))
        mod_adj = mod + b
        div_adj = div - ONE
        mod = mod_adj if adjust else mod
        div = div_adj if adjust else div
        zmod = np.copysign(ZERO, b)
        mod = zmod if mod == ZERO else mod
        # snap the quotient to the nearest integer
        fl = np.floor(div)
        fl_up = fl + ONE
        fl = fl_up if div - fl > HALF else fl
        q = a / b  # also the answer for b == 0: inf or nan
        zq = np.copysign(ZERO, q)
        fl = zq if div == ZERO else fl
        fl = q if b == ZERO else fl
        return fl, mod

    return divmod_


def _float_divmod_part(rt, k):
    """The float implementation of floordiv (``k=0``) or floormod (``k=1``)."""
    T = _scalar_type(rt)
    divmod_ = _float_divmod(rt.bitwidth)

    def impl(a, b):
        return divmod_(T(a), T(b))[k]

    return impl


@overload(jt_floordiv, jit_options=_FLAGS, prefer_literal=True)
def _ov_floordiv(a, b):
    rt = _result_type(a, b)
    if rt is None or isinstance(rt, types.Boolean):
        return None
    T = _scalar_type(rt)
    if isinstance(rt, types.Float):
        return _float_divmod_part(rt, 0)
    if rt.signed:
        NEG_ONE = T(-1)

        def impl(a, b):
            x = T(a)
            y = T(b)
            # Numba's // gives 0 for b == 0 (error_model="numpy") and for
            # INT_MIN // -1; numpy wraps the latter to INT_MIN, as -a does.
            q = x // y
            nx = -x
            q = nx if y == NEG_ONE else q
            return T(q)

        return impl

    def impl(a, b):
        return T(T(a) // T(b))

    return impl


@overload(jt_floormod, jit_options=_FLAGS, prefer_literal=True)
def _ov_floormod(a, b):
    rt = _result_type(a, b)
    if rt is None or isinstance(rt, types.Boolean):
        return None
    T = _scalar_type(rt)
    if isinstance(rt, types.Float):
        return _float_divmod_part(rt, 1)

    def impl(a, b):
        # Numba's % follows Python (sign of b) and gives 0 for b == 0
        return T(T(a) % T(b))

    return impl
