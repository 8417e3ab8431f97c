"""jittape.compiler.backends.vmath: accuracy, special values, dtypes, numpy semantics,
vectorization and the on-disk cache.

The compiled kernels are defined once at module level and shared by the
tests. ``JITTAPE_VMATH_FULL=1`` adds the exhaustive float32 check (all 2^32
inputs, about 3 minutes on 2 cores).
"""

import json
import math
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest

from jittape.compiler.backends import vmath as vm

FLAGS = dict(fastmath={"reassoc", "contract"}, error_model="numpy")
UNARY = ("exp", "log", "log1p", "tanh", "sigmoid")
FLOATS = (np.float32, np.float64)
REPO = Path(__file__).resolve().parents[1]


def _unary(f, **flags):
    @numba.njit(**(flags or FLAGS))
    def kernel(x, out):
        for i in range(x.shape[0]):
            out[i] = f(x[i])
        return f(x[0])  # makes the helper's return type the kernel's

    return kernel


def _binary(f):
    @numba.njit(**FLAGS)
    def kernel(a, b, out):
        for i in range(a.shape[0]):
            out[i] = f(a[i], b[i])
        return f(a[0], b[0])

    return kernel


K1 = {name: _unary(getattr(vm, "jt_" + name)) for name in UNARY + ("relu", "sign")}
K2 = {name: _binary(getattr(vm, "jt_" + name))
      for name in ("maximum", "minimum", "floordiv", "floormod")}


def apply1(name, x):
    out = np.empty_like(x)
    K1[name](x, out)
    return out


def apply2(name, a, b):
    out = np.empty_like(a)
    K2[name](a, b, out)
    return out


# --------------------------------------------------------------------------
# accuracy
# --------------------------------------------------------------------------

LONG_DOUBLE_OK = np.finfo(np.longdouble).nmant >= 63


def reference(name, x):
    """The function in higher precision: float64 for float32, long double for float64."""
    wide = np.float64 if x.dtype == np.float32 else np.longdouble
    if x.dtype == np.float64 and not LONG_DOUBLE_OK:
        wide = np.float64
    with np.errstate(all="ignore"):
        w = x.astype(wide)
        if name == "sigmoid":
            return 1 / (1 + np.exp(-w))
        return getattr(np, name)(w)


def ulp_error(y, ref):
    """|y - ref| in units of the last place of y's dtype at ref; 0 where y is ref rounded."""
    fi = np.finfo(y.dtype)
    with np.errstate(all="ignore"):
        same = (y == ref.astype(y.dtype)) | (np.isnan(y) & np.isnan(ref))
        _, e = np.frexp(ref)
        ulp = np.ldexp(np.ones_like(ref), np.maximum(e, fi.minexp + 1) - (fi.nmant + 1))
        err = np.abs(y.astype(ref.dtype) - ref) / ulp
    err = np.where(same, 0, err)
    return np.where(np.isnan(err), np.inf, err)


def log_uniform(rng, n, lo, hi, dtype, signed=True):
    x = np.exp2(rng.uniform(np.log2(lo), np.log2(hi), n))
    if signed:
        x *= rng.choice([-1.0, 1.0], n)
    return x.astype(dtype)


def around(v, dtype, k=2000):
    """k consecutive floats of dtype on either side of v."""
    ity = np.int32 if dtype == np.float32 else np.int64
    b = int(np.asarray(dtype(v)).view(ity))
    return np.arange(b - k, b + k, dtype=ity).view(dtype)


def samples(name, dtype, seed=0):
    """Inputs over the whole range by bit pattern, plus the regions that matter for name."""
    rng = np.random.default_rng(seed)
    n = 100_000 if dtype == np.float32 else 40_000
    ity = np.int32 if dtype == np.float32 else np.int64
    info = np.iinfo(ity)
    parts = [rng.integers(info.min, info.max, 2 * n, dtype=ity).view(dtype)]
    u = lambda a, b: rng.uniform(a, b, n).astype(dtype)
    tiny = float(np.finfo(dtype).smallest_subnormal)
    big = 88.8 if dtype == np.float32 else 709.9
    under = -104.0 if dtype == np.float32 else -745.2
    if name == "exp":
        parts += [u(under, big), log_uniform(rng, n, 1e-12, 1, dtype), around(big, dtype),
                  around(-87.336 if dtype == np.float32 else -708.39, dtype),  # normal/denormal
                  around(under, dtype), around(0.34657, dtype), around(-0.34657, dtype)]
    elif name == "log":
        parts += [log_uniform(rng, n, tiny, 1e38, dtype, signed=False), u(0.5, 2),
                  around(1.0, dtype), around(np.sqrt(0.5), dtype), around(np.sqrt(2), dtype)]
    elif name == "log1p":
        parts += [log_uniform(rng, n, tiny, 1, dtype), u(-1, 3), around(-1.0, dtype, 20_000),
                  around(np.sqrt(0.5) - 1, dtype), around(np.sqrt(2) - 1, dtype),
                  log_uniform(rng, n, 1, 1e30, dtype, signed=False)]
    elif name == "tanh":
        parts += [log_uniform(rng, n, tiny, 30, dtype), u(-10, 10), around(0.5625, dtype),
                  around(-0.5625, dtype)]
    else:
        parts += [log_uniform(rng, n, tiny, 750, dtype), u(-110, 30), around(under, dtype)]
    return np.concatenate(parts)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
@pytest.mark.parametrize("name", UNARY)
def test_accuracy_sampled(name, dtype):
    x = samples(name, dtype)
    y = apply1(name, x)
    assert y.dtype == dtype
    err = ulp_error(y, reference(name, x))
    bound = vm.MAX_ULP[name][dtype.__name__]
    if dtype == np.float64 and not LONG_DOUBLE_OK:
        bound += 1  # the reference itself is only float64
    i = int(np.argmax(err))
    assert err[i] <= bound, f"{name}({x[i]!r}) = {y[i]!r}, reference {reference(name, x[i:i+1])[0]!r}: {err[i]:.3f} ulp"


@numba.njit
def _worst_f32(y, ref):
    """(max ulp error, its index) of float32 y against float64 ref; 0 where y == float32(ref)."""
    worst, at = 0.0, -1
    for i in range(y.shape[0]):
        yi, ri = y[i], ref[i]
        if math.isnan(ri):
            e = 0.0 if math.isnan(yi) else math.inf
        elif np.float32(ri) == yi:
            e = 0.0
        elif math.isinf(ri) or math.isnan(yi) or math.isinf(yi):
            e = math.inf
        else:
            ex = math.frexp(ri)[1]
            e = abs(np.float64(yi) - ri) / math.ldexp(1.0, max(ex, -125) - 24)
        if e > worst:
            worst, at = e, i
    return worst, at


@pytest.mark.skipif(os.environ.get("JITTAPE_VMATH_FULL") != "1",
                    reason="exhaustive float32 check: set JITTAPE_VMATH_FULL=1 (about 3 min)")
def test_accuracy_float32_exhaustive():
    chunk = 1 << 24
    y = np.empty(chunk, np.float32)
    x64 = np.empty(chunk)
    worst = {name: 0.0 for name in UNARY}
    with np.errstate(all="ignore"):
        for c in range((1 << 32) // chunk):
            bits = np.arange(c * chunk, (c + 1) * chunk, dtype=np.uint64).astype(np.uint32)
            x = bits.view(np.float32)
            x64[:] = x
            for name in UNARY:
                K1[name](x, y)
                ref = 1 / (1 + np.exp(-x64)) if name == "sigmoid" else getattr(np, name)(x64)
                e, at = _worst_f32(y, ref)
                assert e <= vm.MAX_ULP[name]["float32"], (name, x[at], y[at], ref[at], e)
                worst[name] = max(worst[name], e)
    print("max ulp over all float32:", worst)


def test_helper_flags_are_its_own():
    """A caller with every fastmath flag (reassoc, nnan, ...) does not change the helpers' results."""
    for name in ("log1p", "tanh"):
        k = _unary(getattr(vm, "jt_" + name), fastmath=True, error_model="numpy")
        for dtype in FLOATS:
            x = samples(name, dtype, seed=1)
            x = x[np.isfinite(x)]
            out = np.empty_like(x)
            k(x, out)
            np.testing.assert_array_equal(out, apply1(name, x))


@numba.njit  # error_model="python": a division by zero here would raise
def _python_error_model(a, b, i, j):
    return vm.jt_floordiv(a, b), vm.jt_floormod(a, b), vm.jt_log(b), vm.jt_floordiv(i, j)


def test_helper_error_model_is_its_own():
    assert _python_error_model(1.0, 0.0, 1, 0)[::2] == (np.inf, -np.inf)
    assert _python_error_model(1.0, 0.0, 1, 0)[3] == 0


# --------------------------------------------------------------------------
# special values and dtypes
# --------------------------------------------------------------------------

inf, nan = np.inf, np.nan
SPECIAL = {
    "exp": [(nan, nan), (inf, inf), (-inf, 0.0), (0.0, 1.0), (-0.0, 1.0), (1e4, inf),
            (-1e4, 0.0)],
    "log": [(nan, nan), (inf, inf), (-inf, nan), (0.0, -inf), (-0.0, -inf), (1.0, 0.0),
            (-1.0, nan), (-1e-30, nan), (2.0, np.log(2.0))],
    "log1p": [(nan, nan), (inf, inf), (-inf, nan), (0.0, 0.0), (-0.0, -0.0), (-1.0, -inf),
              (-1.5, nan), (-2.0, nan), (1e-30, 1e-30), (-1e-30, -1e-30)],
    "tanh": [(nan, nan), (inf, 1.0), (-inf, -1.0), (0.0, 0.0), (-0.0, -0.0), (100.0, 1.0),
             (-100.0, -1.0), (1e-30, 1e-30), (-1e-30, -1e-30)],
    "sigmoid": [(nan, nan), (inf, 1.0), (-inf, 0.0), (0.0, 0.5), (-0.0, 0.5), (1e4, 1.0),
                (-1e4, 0.0)],
}


def assert_same(y, want):
    """Equal values, NaN where NaN, and the same sign of zero."""
    np.testing.assert_array_equal(y, want)
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(y[zero]), np.signbit(want[zero]))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
@pytest.mark.parametrize("name", UNARY)
def test_special_values(name, dtype):
    x = np.array([c[0] for c in SPECIAL[name]], dtype)
    want = np.array([c[1] for c in SPECIAL[name]], dtype)
    y = apply1(name, x)
    assert y.dtype == dtype
    assert_same(y, want)
    # the smallest denormals
    tiny = np.finfo(dtype).smallest_subnormal
    x = np.array([tiny, -tiny, 2 * tiny], dtype)
    assert ulp_error(apply1(name, x), reference(name, x)).max() <= vm.MAX_ULP[name][dtype.__name__]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
def test_thresholds(dtype):
    """exp overflows to inf and underflows to 0 (through the denormals) where numpy does;
    the sigmoid tail reaches 0 the same way."""
    big = 88.7228 if dtype == np.float32 else 709.7827
    under = -103.972 if dtype == np.float32 else -745.1332
    sub = -87.3365 if dtype == np.float32 else -708.3964
    for name, v in (("exp", big), ("exp", under), ("exp", sub), ("sigmoid", under),
                    ("sigmoid", sub)):
        x = around(v, dtype)
        y = apply1(name, x)
        ref = reference(name, x)
        with np.errstate(over="ignore"):
            rounded = ref.astype(dtype)
        np.testing.assert_array_equal(np.isinf(y), np.isinf(rounded), err_msg=f"{name} near {v}")
        np.testing.assert_array_equal(y == 0, rounded == 0, err_msg=f"{name} near {v}")
        assert ulp_error(y, ref).max() <= vm.MAX_ULP[name][dtype.__name__]


def _return_type(kernel, *arrays):
    sig = tuple(numba.typeof(a) for a in arrays)
    for s in kernel.nopython_signatures:
        if s.args == sig:
            return s.return_type
    raise AssertionError(f"no signature {sig}")


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
def test_dtype_preserved_in_nopython(dtype):
    x = np.linspace(-2, 2, 5).astype(dtype)
    for name in UNARY + ("relu", "sign"):
        K1[name](x, np.empty_like(x))
        assert _return_type(K1[name], x, x) == numba.from_dtype(dtype), name
    for name in K2:
        K2[name](x, x + 3, np.empty_like(x))
        assert _return_type(K2[name], x, x, x) == numba.from_dtype(dtype), name


@numba.njit(**FLAGS)
def _with_literals(x):
    # Python int literals are weak: the result keeps x's dtype
    return vm.jt_maximum(x, 0), vm.jt_minimum(1, x), vm.jt_floordiv(x, 2), vm.jt_floormod(x, 2)


@pytest.mark.parametrize("dtype", (np.float32, np.int32), ids=lambda t: t.__name__)
def test_int_literals_do_not_widen(dtype):
    got = _with_literals(dtype(-3))
    assert [float(v) for v in got] == [0, -3, -2, 1]
    sig = [s for s in _with_literals.nopython_signatures
           if s.args == (numba.from_dtype(dtype),)][0]
    assert sig.return_type == numba.types.UniTuple(numba.from_dtype(dtype), 4)


def test_python_fallbacks():
    x = np.array([-1000.0, -1.0, 0.0, 2.0, 1000.0], np.float32)
    for name in UNARY:
        with np.errstate(divide="ignore", invalid="ignore"):
            y = getattr(vm, "jt_" + name)(x)
        assert y.dtype == np.float32
    np.testing.assert_array_equal(vm.jt_sigmoid(x)[[0, -1]], [0, 1])
    assert vm.jt_relu(np.float32(-2)) == 0 and vm.jt_relu(np.float32(-2)).dtype == np.float32
    np.testing.assert_array_equal(vm.jt_floordiv(np.array([7, -7, 3]), np.array([2, 2, 0])),
                                  [3, -4, 0])
    assert isinstance(vm.VERSION, str) and vm.VERSION


# --------------------------------------------------------------------------
# maximum, minimum, relu, sign, floordiv, floormod against numpy
# --------------------------------------------------------------------------

FLOAT_EDGE = [nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.0, -3.0, 7.0, -7.0,
              1e-30, -1e-30, 1e30, -1e30, 5e-324, 0.1, 1e300]


def _float_pairs(dtype):
    rng = np.random.default_rng(2)
    with np.errstate(over="ignore"):
        edge = np.array(FLOAT_EDGE).astype(dtype)
    a, b = np.meshgrid(edge, edge)
    ra = (rng.standard_normal(2000) * 10).astype(dtype)
    rb = (rng.standard_normal(2000) * 3).astype(dtype)
    ints = rng.integers(-20, 20, (2, 2000)).astype(dtype)
    return np.concatenate([a.ravel(), ra, ints[0]]), np.concatenate([b.ravel(), rb, ints[1]])


def _int_pairs(dtype):
    info = np.iinfo(dtype)
    edge = np.array(sorted({info.min, info.min + 1, info.max, 0, 1, 2, 3, 7, 100} |
                           ({-1, -2, -3, -7, -100} if info.min < 0 else set())), dtype)
    a, b = np.meshgrid(edge, edge)
    rng = np.random.default_rng(3)
    r = rng.integers(max(info.min, -50), min(info.max, 50), (2, 2000), endpoint=True).astype(dtype)
    return np.concatenate([a.ravel(), r[0]]), np.concatenate([b.ravel(), r[1]])


NUMPY2 = {"maximum": np.maximum, "minimum": np.minimum, "floordiv": np.floor_divide,
          "floormod": np.remainder}


@pytest.mark.parametrize("dtype", FLOATS + (np.int32, np.int64, np.uint8),
                         ids=lambda t: t.__name__)
@pytest.mark.parametrize("name", sorted(NUMPY2))
def test_binary_like_numpy(name, dtype):
    a, b = (_float_pairs if dtype in FLOATS else _int_pairs)(dtype)
    with np.errstate(all="ignore"):
        want = NUMPY2[name](a, b)
    got = apply2(name, a, b)
    assert got.dtype == want.dtype
    if dtype in FLOATS and name in ("floordiv", "floormod"):
        assert_same(got, want)  # including the sign of zero
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", FLOATS + (np.int8, np.int64, np.uint16),
                         ids=lambda t: t.__name__)
def test_relu_and_sign_like_numpy(dtype):
    if dtype in FLOATS:
        with np.errstate(over="ignore"):
            x = np.array(FLOAT_EDGE + list(np.linspace(-3, 3, 13))).astype(dtype)
    else:
        x = _int_pairs(dtype)[0]
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(apply1("relu", x), np.maximum(x, dtype(0)))
        np.testing.assert_array_equal(apply1("sign", x), np.sign(x))
    assert apply1("relu", x).dtype == apply1("sign", x).dtype == dtype
    if dtype in FLOATS:
        assert not np.signbit(apply1("relu", np.array([-0.0, -1.0], dtype))).any()


# --------------------------------------------------------------------------
# vectorization and the on-disk cache
# --------------------------------------------------------------------------

LIBM = {"exp", "expf", "log", "logf", "log1p", "log1pf", "tanh", "tanhf", "expm1", "expm1f",
        "ldexp", "ldexpf", "frexp", "frexpf"}
PACKED_FLOAT = re.compile(
    r"^\s*v?(?:mul|add|sub|div|max|min|fn?m(?:add|sub)\d*)ps\s[^\n]*%[xyz]mm", re.M)


def _called_symbols(asm):
    tokens = set(re.findall(r"[$\w.@]+", asm))
    return {t.lstrip("$").split("@")[0] for t in tokens}


def _chain_kernel(x, w, b, out):
    half = np.float32(0.5)
    for i in range(x.shape[0]):
        d = x[i] - w[i]
        out[i] = vm.jt_tanh(x[i] * w[i] + b[i]) * vm.jt_sigmoid(x[i]) + half * d * d


def _libm_kernel(x, out):
    for i in range(x.shape[0]):
        out[i] = math.tanh(x[i])


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="checks x86-64 assembly")
def test_chain_kernel_vectorizes_without_libm():
    x = np.linspace(-3, 3, 64).astype(np.float32)
    out = np.empty_like(x)
    k = numba.njit(**FLAGS)(_chain_kernel)  # cache off: inspect_asm needs a fresh compile
    k(x, x, x, out)
    asm = k.inspect_asm(k.signatures[0])
    assert len(PACKED_FLOAT.findall(asm)) >= 10, "no packed float32 arithmetic in the loop"
    assert not (_called_symbols(asm) & LIBM), _called_symbols(asm) & LIBM
    # the check does see a libm call when there is one
    k2 = numba.njit(**FLAGS)(_libm_kernel)
    k2(x, out)
    assert "tanhf" in _called_symbols(k2.inspect_asm(k2.signatures[0]))


CACHED_MODULE = """
import numba
import numpy as np
from jittape.compiler.backends import vmath as _vm


@numba.njit(fastmath={"reassoc", "contract"}, error_model="numpy", cache=True)
def k(x, out):
    for i in range(x.shape[0]):
        out[i] = _vm.jt_tanh(x[i]) * _vm.jt_sigmoid(x[i]) + _vm.jt_log1p(_vm.jt_exp(x[i]))
"""

CACHED_MAIN = """
import json
import numpy as np
import cachedmod
x = np.linspace(-5, 5, 1001).astype(np.float32)
out = np.empty_like(x)
cachedmod.k(x, out)
print(json.dumps({"hits": sum(cachedmod.k.stats.cache_hits.values()),
                  "misses": sum(cachedmod.k.stats.cache_misses.values()),
                  "sum": float(out.astype(np.float64).sum())}))
"""


def test_kernel_using_helpers_is_cached(tmp_path):
    (tmp_path / "cachedmod.py").write_text(CACHED_MODULE)
    (tmp_path / "main.py").write_text(CACHED_MAIN)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    runs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, str(tmp_path / "main.py")], env=env,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    assert runs[0]["misses"] == 1 and runs[0]["hits"] == 0, runs
    assert runs[1]["hits"] == 1 and runs[1]["misses"] == 0, runs
    assert runs[0]["sum"] == runs[1]["sum"]
    assert any((tmp_path / "cache").rglob("*.nbc"))
