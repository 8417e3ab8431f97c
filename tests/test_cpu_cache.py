"""The cpu backend's caches: a second identical step compiles nothing, a new process
loads compiled code from disk, damaged entries are rebuilt, graphs that cannot be
compiled run on interpret with one warning; and the generated code is readable and
vectorized."""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import jittape as jt
import passes
from jittape import autodiff
from jittape.compiler import backends
from jittape.compiler import cache as jcache
from jittape.compiler.backends import cpu
from jittape.compiler.ir import GraphBuilder, OpDef, Type
from jittape.tensor import Tracer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def chain_step(n, backend="cpu", seed=0):
    rng = np.random.default_rng(seed)
    x = jt.constant(rng.standard_normal(n).astype(np.float32))
    w = jt.Variable(rng.standard_normal(n).astype(np.float32))
    b = jt.Variable(rng.standard_normal(n).astype(np.float32))
    with jt.GradientTape(backend=backend) as tape:
        loss = jt.reduce_sum(jt.tanh(x * w + b) * jt.sigmoid(x) + 0.5 * (x - w) ** 2)
    return [g.numpy() for g in tape.gradient(loss, [w, b])]


def test_second_identical_step_runs_no_pass_and_compiles_nothing():
    n = 1237  # a shape no other test uses: the first step compiles
    before = dict(cpu.stats)
    hits = autodiff.plan_stats["hits"]
    first = chain_step(n)
    assert cpu.stats["graphs"] == before["graphs"] + 1
    compiled = cpu.stats["compiled"] + cpu.stats["disk_hits"]
    mid = dict(cpu.stats)
    second = chain_step(n, seed=0)
    assert autodiff.plan_stats["hits"] == hits + 1  # no VJP traced, no pass run
    assert cpu.stats == mid  # nothing generated, compiled or loaded
    assert compiled == before["compiled"] + before["disk_hits"] + 1
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(first, chain_step(n, backend="interpret")):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


_SCRIPT = textwrap.dedent(
    """
    import json, sys, warnings
    import numpy as np
    sys.path.insert(0, {root!r})
    import jittape as jt
    from jittape.compiler.backends import cpu
    rng = np.random.default_rng(0)
    x = jt.constant(rng.standard_normal(777).astype(np.float32))
    w = jt.Variable(rng.standard_normal(777).astype(np.float32))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with jt.GradientTape(backend="cpu") as tape:
            loss = jt.reduce_sum(jt.tanh(x * w) * jt.exp(-w) + (x - w) ** 2)
        g = tape.gradient(loss, w).numpy()
        for _, prog in list(cpu._BY_GRAPH.values()):  # a background compile: its result
            prog.wait()                              # on disk (an exit abandons it)
    ref = (1 - np.tanh(x.numpy() * w.numpy()) ** 2) * x.numpy() * np.exp(-w.numpy()) \\
        - np.tanh(x.numpy() * w.numpy()) * np.exp(-w.numpy()) - 2 * (x.numpy() - w.numpy())
    print(json.dumps(dict(stats=cpu.stats, err=float(np.abs(g - ref).max()),
                          warnings=[str(w.message) for w in caught])))
    """
)


def _run_process(cache_dir, background=False):
    import json

    env = dict(os.environ, JITTAPE_CACHE_DIR=str(cache_dir),
               JITTAPE_BACKGROUND_COMPILE="1" if background else "0")
    out = subprocess.run([sys.executable, "-c", _SCRIPT.format(root=ROOT)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def warm_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("jtcache")
    first = _run_process(d)
    assert first["stats"]["compiled"] == 1 and first["stats"]["disk_hits"] == 0
    assert first["err"] < 1e-3
    return d


def _kernel_dir(d):
    return os.path.join(d, "kernels")


def test_new_process_with_warm_disk_cache_compiles_nothing(warm_dir):
    second = _run_process(warm_dir)
    assert second["stats"]["compiled"] == 0
    assert second["stats"]["disk_hits"] == 1
    assert second["err"] < 1e-3 and not second["warnings"]


def _copy_cache(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def _modules(d, prefix):
    """The generated modules of ``prefix`` (``jt_``: entries, ``jk_``: kernels) in the
    cache directory ``d``."""
    return sorted(f for f in os.listdir(_kernel_dir(d))
                  if f.startswith(prefix) and f.endswith(".py"))


def test_the_warm_cache_holds_one_entry_its_kernels_and_a_manifest(warm_dir):
    assert len(_modules(warm_dir, "jt_")) == 1 and _modules(warm_dir, "jk_")
    pyc = os.listdir(os.path.join(_kernel_dir(warm_dir), "__pycache__"))
    (entry,) = _modules(warm_dir, "jt_")
    assert [f for f in pyc if f.startswith(entry[:-3] + ".entry.") and f.endswith(".kman")]


@pytest.mark.parametrize("prefix", ["jt_", "jk_"])
def test_a_truncated_module_is_rebuilt(warm_dir, tmp_path, prefix):
    d = _copy_cache(warm_dir, tmp_path / "c")
    mod = _modules(d, prefix)[0]
    path = os.path.join(_kernel_dir(d), mod)
    text = open(path).read()
    with open(path, "w") as f:
        f.write(text[: len(text) // 2])  # half-written
    res = _run_process(d)
    assert res["err"] < 1e-3 and not res["warnings"]
    assert res["stats"]["compiled"] == 1  # rebuilt, not loaded
    assert open(path).read() == text
    if prefix == "jk_":  # the entry came from disk, with the rebuilt kernel in its table
        assert res["stats"]["kernels_compiled"] == 1


@pytest.mark.parametrize("background", [False, True])
@pytest.mark.parametrize("damage", ["garbage", "empty"])
@pytest.mark.parametrize("which", ["all", "jt_", "jk_"])
def test_damaged_numba_cache_files_are_purged_and_rebuilt(warm_dir, tmp_path, damage,
                                                          background, which):
    d = _copy_cache(warm_dir, tmp_path / "c")
    pyc = os.path.join(_kernel_dir(d), "__pycache__")
    files = [f for f in os.listdir(pyc) if f.endswith((".nbi", ".nbc"))
             and (which == "all" or f.startswith(which))]
    assert files
    for f in files:
        with open(os.path.join(pyc, f), "wb") as fh:
            fh.write(b"\x80\x04not a pickle" if damage == "garbage" else b"")
    res = _run_process(d, background)
    assert res["err"] < 1e-3
    again = _run_process(d)  # and the rebuilt entry serves the next process
    assert again["err"] < 1e-3 and again["stats"]["compiled"] == 0
    assert again["stats"]["disk_hits"] == 1


@pytest.mark.parametrize("damage", ["missing", "garbage", "empty", "foreign"])
def test_an_entry_without_a_usable_manifest_is_compiled_again(warm_dir, tmp_path, damage):
    """An entry Numba serves from disk is never typed: its kernel table comes from the
    manifest. Without one it must not run (its table would be zeros): its cache entry is
    flushed and it is compiled, which writes the manifest again."""
    d = _copy_cache(warm_dir, tmp_path / "c")
    pyc = os.path.join(_kernel_dir(d), "__pycache__")
    (man,) = [os.path.join(pyc, f) for f in os.listdir(pyc) if f.endswith(".kman")]
    good = open(man, "rb").read()
    if damage == "missing":
        os.unlink(man)
    else:
        import pickle

        data = {"garbage": b"\x80\x04not a pickle", "empty": b"",
                "foreign": pickle.dumps((1, "0.0.1", {0: ("nowhere", "k", ())}))}[damage]
        with open(man, "wb") as f:
            f.write(data)
    res = _run_process(d)
    assert res["err"] < 1e-3 and not res["warnings"]
    assert res["stats"]["compiled"] == 1 and res["stats"]["kernels_compiled"] == 0
    assert open(man, "rb").read() == good
    again = _run_process(d)
    assert again["err"] < 1e-3 and again["stats"]["disk_hits"] == 1


def test_cache_clear_and_size_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTAPE_CACHE_DIR", str(tmp_path))
    names = [jcache.write_module(f"# module {k}\nx = {k}\n" + "#" * 4000)[0] for k in range(3)]
    assert [e[0] for e in jcache.entries()] and jcache.size_bytes() > 12000
    # a bound of ~6 KB keeps only the newest module
    monkeypatch.setenv("JITTAPE_CACHE_MAX_MB", str(6000 / 2**20))
    newest = jcache.write_module("# module 3\n" + "#" * 4000)[0]
    left = [e[0] for e in jcache.entries()]
    assert newest in left and len(left) == 1 and not set(names) & set(left)
    jcache.clear()
    assert jcache.entries() == [] and jcache.size_bytes() == 0


def test_identical_content_is_not_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTAPE_CACHE_DIR", str(tmp_path))
    name, path, existed = jcache.write_module("x = 1\n")
    assert not existed
    name2, path2, existed2 = jcache.write_module("x = 1\n")
    assert (name2, path2, existed2) == (name, path, True)
    with open(path, "w") as f:
        f.write("x = 2\n")  # someone else's content under this name
    assert jcache.write_module("x = 1\n")[2] is False
    assert open(path).read() == "x = 1\n"


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_a_corrupted_module_is_rebuilt_not_run(warm_dir, tmp_path):
    """A module changed in place, still valid Python of the same size and date, computing
    something else: its content no longer hashes to its name, so it is written again and
    compiled afresh (Numba's index, which goes by size and date, would have served it)."""
    d = _copy_cache(warm_dir, tmp_path / "c")
    (mod,) = [f for f in _modules(d, "jk_") if " + " in _read(os.path.join(_kernel_dir(d), f))]
    path = os.path.join(_kernel_dir(d), mod)
    text = _read(path)
    st = os.stat(path)
    bad = text.replace(" + ", " - ", 1)
    assert bad != text and len(bad) == len(text)
    with open(path, "w") as f:
        f.write(bad)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    res = _run_process(d)
    assert res["err"] < 1e-3 and not res["warnings"]
    assert res["stats"]["compiled"] == 1
    assert _read(path) == text


def _junk(d, name_hex="0123456789abcdef01234567"):
    """Files a cache directory may hold that jittape did not write (or did not finish):
    names like a module's, undecodable bytes, a directory, a dangling link, temporaries
    of a killed writer (one stale, one fresh), Numba files of no module. Returns the
    paths that must survive (what is not jittape's to delete, or may still be in use)."""
    import time

    os.makedirs(os.path.join(d, "__pycache__"), exist_ok=True)
    with open(os.path.join(d, f"jt_{name_hex}.py"), "wb") as f:
        f.write(b"\xff\xfe\x00 not a module \x80" * 64)
    os.makedirs(os.path.join(d, "jt_fedcba9876543210fedcba98.py"))
    os.symlink(os.path.join(d, "nowhere"), os.path.join(d, "jt_00000000000000000000dead.py"))
    stale = os.path.join(d, f".jt_{name_hex}.k2j4h5.tmp")
    fresh = os.path.join(d, f".jt_{name_hex}.z9y8x7.tmp")
    for p in (stale, fresh):
        with open(p, "w") as f:
            f.write("x = ")
    old = time.time() - 2 * jcache._STALE_SECONDS
    os.utime(stale, (old, old))
    with open(os.path.join(d, "__pycache__", "jt_bad.entry-12.py312.nbi"), "wb") as f:
        f.write(os.urandom(64))
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("kept by someone\n")
    return {"stale": stale, "keep": [fresh, os.path.join(d, "notes.txt")]}


def test_foreign_files_in_the_cache_directory_break_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTAPE_CACHE_DIR", str(tmp_path))
    d = jcache.cache_dir()
    junk = _junk(d)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert {e[0] for e in jcache.entries()} == {"jt_0123456789abcdef01234567"}
        name, path, existed = jcache.write_module("y = 2\n")
        assert not existed and _read(path) == "y = 2\n"
        assert not os.path.exists(junk["stale"])  # a killed writer's leftover
        assert all(os.path.exists(p) for p in junk["keep"])
        # a bound that holds one module drops the other jt_ file, keeps the new one
        monkeypatch.setenv("JITTAPE_CACHE_MAX_MB", str(8 / 2**20))
        name2, path2, _ = jcache.write_module("z = 3\n")
        assert [e[0] for e in jcache.entries()] == [name2]
        # a directory standing where a module belongs is replaced by the module
        blocker = os.path.join(d, jcache.module_name("w = 4\n") + ".py")
        os.makedirs(os.path.join(blocker, "inner"))
        assert jcache.write_module("w = 4\n")[1] == blocker and _read(blocker) == "w = 4\n"


def test_foreign_files_beside_a_warm_entry_leave_it_warm(warm_dir, tmp_path):
    d = _copy_cache(warm_dir, tmp_path / "c")
    _junk(_kernel_dir(d))
    res = _run_process(d)
    assert res["err"] < 1e-3 and not res["warnings"]
    assert res["stats"]["compiled"] == 0 and res["stats"]["disk_hits"] == 1


def _new_shape_of_a_compiled_graph(n):
    """A graph whose module this process has imported and compiled already (only the
    size is new): running it writes the module to the cache directory, compiles
    nothing, and is cheap."""
    gb = GraphBuilder("readonly_probe")
    x = gb.add_input(Type((n,), "float64"))
    (y,) = gb.add_node(jt.ops.elementwise.exp_op, [x])
    (z,) = gb.add_node(jt.ops.elementwise.tanh_op, [y])
    return gb.build([z])


def test_a_read_only_cache_directory_falls_back_with_one_warning(tmp_path, monkeypatch):
    import errno
    import tempfile

    ro = tmp_path / "ro"
    kernels = ro / "kernels"
    kernels.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # the fallback's parent
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(jcache, "_unwritable", set())
    monkeypatch.setattr(jcache, "_warned_dirs", set())
    x = np.linspace(-1.0, 1.0, 7)
    cpu.run_arrays(_new_shape_of_a_compiled_graph(5), [x[:5]])  # compiled once, before
    os.chmod(kernels, 0o555)
    try:
        probe = kernels / "probe"
        try:
            probe.write_text("")
            probe.unlink()
            privileged = True  # root: the mode does not stop writes
        except PermissionError:
            privileged = False
        if privileged:
            # make the directory refuse writes as a read-only mount would
            real = tempfile.mkstemp

            def refuse(*args, dir=None, **kwargs):
                if dir is not None and os.path.realpath(dir) == os.path.realpath(kernels):
                    raise PermissionError(errno.EROFS, "Read-only file system", dir)
                return real(*args, dir=dir, **kwargs)

            monkeypatch.setattr(tempfile, "mkstemp", refuse)
        monkeypatch.setenv("JITTAPE_CACHE_DIR", str(ro))
        with pytest.warns(UserWarning, match="not usable") as caught:
            (got,) = cpu.run_arrays(_new_shape_of_a_compiled_graph(7), [x])
            (again,) = cpu.run_arrays(_new_shape_of_a_compiled_graph(6), [x[:6]])
        assert len([w for w in caught if "not usable" in str(w.message)]) == 1
        assert not [w for w in caught if issubclass(w.category, cpu.CompileWarning)]
        np.testing.assert_allclose(got, np.tanh(np.exp(x)), rtol=1e-12)
        np.testing.assert_allclose(again, np.tanh(np.exp(x[:6])), rtol=1e-12)
        assert os.listdir(kernels) == []
        fallback = jcache.cache_dir()
        assert fallback.startswith(str(tmp_path / "tmp"))
        assert [f for f in os.listdir(fallback) if f.endswith(".py")]
    finally:
        os.chmod(kernels, 0o755)


# ---------------------------------------------------------------------------
# Fallback


def _sort_infer(types):
    return types[0]


SORT = OpDef(name="test_sort", kind="other", nin=1, forward=np.sort, infer=_sort_infer)


def test_a_graph_the_backend_cannot_compile_runs_on_interpret_with_one_warning():
    gb = GraphBuilder("with_sort")
    x = gb.add_input(Type((5,), "float64"))
    (y,) = gb.add_node(SORT, [x])
    (z,) = gb.add_node(jt.ops.elementwise.exp_op, [y])
    g = gb.build([z])
    feeds = {x: np.array([3.0, 1.0, 2.0, 5.0, 4.0])}
    with pytest.warns(cpu.CompileWarning, match="test_sort"):
        got = backends.run(g, feeds, "cpu")
    np.testing.assert_allclose(got[0], np.exp(np.sort(feeds[x])))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = backends.run(g, feeds, "cpu")  # no second warning
    np.testing.assert_allclose(again[0], got[0])


def test_a_numba_compile_error_falls_back_and_names_the_kernel(monkeypatch):
    # an integer GEMM (np.dot multiplies floats only): what the scheduler emits when told
    # int64 has a GEMM; it writes a loop nest for integers otherwise
    from jittape.compiler.backends import schedule_fused

    monkeypatch.setattr(schedule_fused, "_GEMM_DTYPES",
                        schedule_fused._GEMM_DTYPES | {"int64"})
    gb = GraphBuilder("int_matmul")
    a = gb.add_input(Type((2, 3), "int64"))
    b = gb.add_input(Type((3, 2), "int64"))
    (c,) = gb.add_node(jt.ops.contraction.matmul_op, [a, b])
    g = gb.build([c])
    feeds = {a: np.arange(6).reshape(2, 3), b: np.arange(6).reshape(3, 2)}
    with pytest.warns(cpu.CompileWarning, match="matmul"):
        (got,) = backends.run(g, feeds, "cpu")
    np.testing.assert_array_equal(got, feeds[a] @ feeds[b])


def test_set_backend_and_tape_backend_argument():
    old = jt.get_backend()
    try:
        jt.set_backend("interpret")
        assert jt.get_backend() == "interpret"
        with pytest.raises(ValueError, match="unknown backend"):
            jt.set_backend("tpu")
        with pytest.raises(ValueError, match="unknown backend"):
            jt.GradientTape(backend="gpu")
    finally:
        jt.set_backend(old)


# ---------------------------------------------------------------------------
# The generated code


def chain_train_graph(n):
    """The chain workload's forward and backward as one graph (what ``@jt.function``
    will compile): loss and the gradients for w and b."""
    tr = Tracer("chain", const_captures=True)
    with tr:
        x = tr.placeholder(Type((n,), "float32"), "x")
        w = tr.placeholder(Type((n,), "float32"), "w")
        b = tr.placeholder(Type((n,), "float32"), "b")
        with jt.GradientTape() as tape:
            tape.watch([w, b])
            loss = jt.reduce_sum(jt.tanh(x * w + b) * jt.sigmoid(x) + 0.5 * (x - w) ** 2)
        gw, gb = tape.gradient(loss, [w, b])
    return tr.builder.build([loss._id, gw._id, gb._id])


def test_generated_source_says_which_ops_each_kernel_holds():
    g = passes.run_pipeline(chain_train_graph(64), backends.pipeline("cpu")).graph
    sources, _, kinfo = cpu.generate(g)
    assert kinfo and len(kinfo) == len(passes.kernels(g))
    modules = {kname: text for kname, _, text in sources.kernels}
    for name, desc in kinfo:
        # the comment names sizes as the kernel does (f32[d0]: the same module serves
        # every size), the description for explain() has the numbers
        head, ops = desc.split(": ", 1)
        assert re.search(rf"def k\(.*\):\n    # [^\n]*: {re.escape(ops)}\n", modules[name])
        assert "f32[64]" in head
    source = str(sources)
    assert "f32[d0]" in source and "D0 = x.shape[0]" in sources.entry
    assert any("tanh" in desc and "sigmoid" in desc for _, desc in kinfo)
    assert "_vm.jt_tanh(" in source and "math.tanh" not in source
    assert "def entry(kp, " in sources.entry
    for kname, mname, text in sources.kernels:  # named by content, imported by the entry
        assert mname == jcache.module_name(text, "jk") and "k0" not in text
        assert f"from jittape._generated.{mname} import k as {kname}" in sources.entry


def _load_file(text, tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(text.replace("cache=True", "cache=False"))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[name] = mod
    return mod


def _load_uncached(sources, tmp_path, name):
    """The entry module and its kernel modules with Numba's cache off (assembly of a
    cached function is not valid), under names of their own: (entry, kernel name ->
    kernel module)."""
    entry, kmods = sources.entry, {}
    for kname, mname, text in sources.kernels:
        kmods[kname] = _load_file(text, tmp_path, f"{name}_{mname}")
        entry = entry.replace(f"jittape._generated.{mname} ", f"{name}_{mname} ")
    return _load_file(entry, tmp_path, name), kmods


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86-64 assembly")
def test_chain_kernel_is_vectorized(tmp_path):
    n = 4096
    g = passes.run_pipeline(chain_train_graph(n), backends.pipeline("cpu")).graph
    import numba

    from jittape.compiler.backends import kernel_table

    sources, consts, kinfo = cpu.generate(g)
    mod, kmods = _load_uncached(sources, tmp_path, "chain_asm")
    rng = np.random.default_rng(0)
    ins = [rng.standard_normal(t.shape).astype(t.dtype) for t in g.input_types]
    types = g.types()
    outs = [np.empty(types[o].shape, types[o].dtype) for o in g.outputs]
    slots = [np.empty(s, d) for d, s in (g.buffers.slots if g.buffers else [])]
    from jittape.compiler.backends import kcall

    rest = (*ins, kcall.fill_table([*consts, *slots]), *outs)
    sig = (cpu._kp_type(), *(numba.typeof(a) for a in rest))
    table = kernel_table.prepare(mod.entry, sig, str(tmp_path), "chain_asm", len(kinfo))
    mod.entry(table.kp, *rest)
    ref = backends.run(g, dict(zip(g.inputs, ins)), "interpret")
    for a, b in zip(outs, ref):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-3)
    heavy = [name for name, desc in kinfo if "tanh" in desc]
    assert heavy
    for name in heavy:
        fn = kmods[name].k
        asm = fn.inspect_asm(fn.signatures[0])
        packed = re.findall(r"\bv?(?:mul|add|sub|fmadd\w*|fnmadd\w*|max|min|and|or)ps\s", asm)
        assert len(packed) > 20, f"{name} has {len(packed)} packed float32 instructions"
        libm = re.findall(r"\$(tanhf?|expf?|logf?|log1pf?|powf?)\b", asm)
        assert not libm, f"{name} calls libm: {libm}"


def test_the_cache_key_is_kept_while_recording(monkeypatch):
    """tape.gradient finds the cached graph from the structure the tape kept while it
    recorded: no walk over the trace (``structure_key``) and no pass on a hit."""
    n = 311
    chain_step(n)  # traces and compiles
    want = chain_step(n, backend="interpret")

    def walked(*a, **k):
        raise AssertionError("the trace was walked to build the cache key")

    monkeypatch.setattr(autodiff, "structure_key", walked)
    monkeypatch.setattr(passes, "run_pipeline", walked)
    hits = autodiff.plan_stats["hits"]
    got = chain_step(n)
    assert autodiff.plan_stats["hits"] == hits + 1
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def test_two_processes_compiling_the_same_graph_at_once(tmp_path):
    import json

    env = dict(os.environ, JITTAPE_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", _SCRIPT.format(root=ROOT)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        res = json.loads(out.strip().splitlines()[-1])
        assert res["err"] < 1e-3 and not res["warnings"]
        # each got its program once: compiled itself, or loaded what the other wrote
        assert res["stats"]["compiled"] + res["stats"]["disk_hits"] == 1
        assert res["stats"]["fallbacks"] == 0
    third = _run_process(tmp_path)  # what they left behind serves a third process
    assert third["stats"]["compiled"] == 0 and third["err"] < 1e-3


# ---------------------------------------------------------------------------
# Buffers and threads


def _big_chain_tape(n=1 << 15):
    rng = np.random.default_rng(1)
    x = jt.constant(rng.standard_normal(n).astype(np.float32))
    w = jt.Variable(rng.standard_normal(n).astype(np.float32))
    with jt.GradientTape(persistent=True, backend="cpu") as tape:
        loss = jt.reduce_sum(jt.tanh(x * w) * x)
    return tape, loss, w


def _addr(t):
    return t._value.__array_interface__["data"][0]  # .numpy() would copy


def test_a_held_gradient_is_never_overwritten_and_a_dropped_one_is_reused():
    tape, loss, w = _big_chain_tape()
    held = tape.gradient(loss, w)
    snapshot = held.numpy().copy()
    others = [tape.gradient(loss, w) for _ in range(3)]
    addrs = {_addr(held)} | {_addr(o) for o in others}
    assert len(addrs) == 4  # four live results, four buffers
    np.testing.assert_array_equal(held.numpy(), snapshot)
    # a result nobody holds any more: the next call writes the same buffer again
    first = tape.gradient(loss, w)
    addr = _addr(first)
    del first
    again = tape.gradient(loss, w)
    assert _addr(again) == addr
    assert not again._value.flags.writeable  # frozen again once it is a tensor
    np.testing.assert_array_equal(again.numpy(), snapshot)


def test_parallel_and_serial_variants_agree_and_one_is_chosen():
    n = 1 << 17  # large enough for a parallel loop
    rng = np.random.default_rng(2)
    x = jt.constant(rng.standard_normal(n).astype(np.float32))
    w = jt.Variable(rng.standard_normal(n).astype(np.float32))
    with jt.GradientTape(persistent=True, backend="cpu") as tape:
        loss = jt.reduce_sum(jt.tanh(x * w) * jt.sigmoid(x))
    first = tape.gradient(loss, w).numpy()
    graph = next(g for g, p in reversed(list(cpu._BY_GRAPH.values()))
                 if p.entry_par is not None and g.input_types
                 and g.input_types[0].shape == (n,))  # the newest: this tape's
    prog = cpu.program(graph)
    assert "prange(" in prog.source and "def entry_par(" in prog.source
    # the first step compiled the serial variant only; the parallel one comes after
    # PARALLEL_AFTER calls, then both are timed and one is kept
    assert prog.entry.signatures and not prog.entry_par.signatures
    results = [tape.gradient(loss, w).numpy() for _ in range(cpu.PARALLEL_AFTER - 1)]
    assert not prog.entry_par.signatures
    results += [tape.gradient(loss, w).numpy() for _ in range(2)]
    assert prog.entry_par.signatures and prog.par_compile_seconds > 0
    compiled = dict(cpu.stats)
    results += [tape.gradient(loss, w).numpy() for _ in range(2 * cpu._TUNE_CALLS + 2)]
    import numba

    assert prog.threads in (1, numba.config.NUMBA_NUM_THREADS)
    assert cpu.stats == compiled
    assert len(prog.entry.signatures) == len(prog.entry_par.signatures) == 1
    for r in results:
        np.testing.assert_allclose(r, first, rtol=1e-6, atol=1e-7)


def test_an_unusable_cache_directory_falls_back_to_a_temporary_one(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("JITTAPE_CACHE_DIR", str(blocker / "cache"))  # cannot be created
    jcache._warned_dirs.clear()
    with pytest.warns(UserWarning, match="not usable"):
        d = jcache.cache_dir()
    assert not d.startswith(str(blocker)) and os.access(d, os.W_OK)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jcache.cache_dir() == d  # one warning


def test_threads_share_a_compiled_graph_and_get_their_own_results():
    import threading

    n = 1 << 16
    chain_step(n)  # compile first
    want = {s: chain_step(n, backend="interpret", seed=s) for s in range(4)}
    got, errors = {}, []

    def work(s):
        try:
            for _ in range(5):
                got[s] = chain_step(n, seed=s)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for s in range(4):
        for a, b in zip(got[s], want[s]):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-5)


def test_eager_gradient_compiles_in_the_background(monkeypatch):
    """Outside the test suite's setting, a new backward graph compiles in a thread and
    the gradients meanwhile come from the interpreter: the first step does not wait."""
    monkeypatch.setenv("JITTAPE_BACKGROUND_COMPILE", "1")
    rng = np.random.default_rng(5)
    x = jt.constant(rng.standard_normal(300))
    w = jt.Variable(rng.standard_normal(300))

    def grad():
        with jt.GradientTape(backend="cpu") as tape:
            loss = jt.reduce_sum(jt.sin(x * w) * 1.234567 + jt.square(w))
        return tape.gradient(loss, w).numpy()

    want = np.cos(x.numpy() * w.numpy()) * x.numpy() * 1.234567 + 2 * w.numpy()
    np.testing.assert_allclose(grad(), want, rtol=1e-12)
    prog = next(p for _, p in reversed(list(cpu._BY_GRAPH.values()))
                if "cos" in p.source)
    assert prog.compile_thread is not None
    assert prog.wait() and prog.origin in ("compiled", "disk", "memory")
    for _ in range(2):
        np.testing.assert_allclose(grad(), want, rtol=1e-12)
    assert prog.compile_thread is not None and prog.ready


_EXIT_SCRIPT = textwrap.dedent(
    """
    import atexit, json, sys, threading
    import numpy as np

    def at_exit():  # registered before jittape's handler, so it runs after it
        alive = [t.name for t in threading.enumerate()
                 if t.name.startswith("jittape-compile-") and t.is_alive()]
        print(json.dumps(dict(ready_at_exit=step.wait(0), compiling_at_exit=alive)),
              flush=True)

    atexit.register(at_exit)
    sys.path.insert(0, {root!r})
    import jittape as jt
    from jittape.compiler.backends import cpu
    w = jt.Variable(np.linspace(0.5, 1.5, 64).astype(np.float32))

    @jt.function
    def step(x):
        with jt.GradientTape() as tape:
            loss = jt.reduce_sum(jt.tanh(x * w) * jt.exp(-w) + (x - w) ** 2)
        w.assign_sub(0.01 * tape.gradient(loss, w))
        return loss

    x = jt.constant(np.linspace(-1.0, 1.0, 64).astype(np.float32))
    losses = [float(step(x)) for _ in range(3)]
    print(json.dumps(dict(losses=losses, ready=step.wait(0), stats=cpu.stats,
                          w=w.numpy().tolist())), flush=True)
    """
)


def test_a_script_exits_at_once_abandoning_its_background_compile(tmp_path):
    """A script's last line is not followed by seconds of waiting for a compile nobody
    will use (the cold compile of its step, under way in the background): at exit the
    compile is abandoned, not finished (before: the exit waited for it, 5-7 s on the
    project's machine), its thread has unwound, and what it left in the cache is
    consistent: the next process compiles or loads the step and computes what the first
    one did. Checked by what the process observes after jittape's exit handler, not by
    a clock."""
    import json

    def run(background):
        env = dict(os.environ, JITTAPE_CACHE_DIR=str(tmp_path), JITTAPE_BACKEND="cpu",
                   JITTAPE_BACKGROUND_COMPILE="1" if background else "0")
        out = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT.format(root=ROOT)], env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.strip().splitlines()
        return json.loads(lines[0]), json.loads(lines[-1]), out.stderr

    res, at_exit, err = run(background=True)
    assert not res["ready"] and res["stats"]["compiled"] == 0  # still compiling at the end
    assert at_exit == {"ready_at_exit": False, "compiling_at_exit": []}, at_exit
    assert "Traceback" not in err and "Warning" not in err, err
    again, at_exit, err = run(background=False)
    assert again["ready"] and again["stats"]["fallbacks"] == 0 and not err
    assert at_exit["ready_at_exit"] is True
    np.testing.assert_allclose(again["losses"], res["losses"], rtol=1e-5)
    np.testing.assert_allclose(again["w"], res["w"], rtol=1e-6)
    third, _, _ = run(background=False)  # the second process left a usable entry
    assert third["stats"]["compiled"] == 0 and third["stats"]["disk_hits"] == 1
    np.testing.assert_allclose(third["losses"], again["losses"], rtol=0)


def test_a_child_forked_during_a_background_compile_exits_without_waiting_for_it():
    """The parent's compile thread does not exist in a forked child: the child's exit
    must not wait for it. The lock that thread holds at the fork would never be
    released in the child, so the child starts with free locks of its own (before: its
    exit handler waited out its 5 s bound on the copy held at the fork)."""
    from jittape.compiler.backends import runtime

    with runtime._BACKGROUND:  # as a background compile holds it
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                free = runtime._BACKGROUND.acquire(blocking=False)
                if free:
                    runtime._BACKGROUND.release()
                    runtime._abandon_background_compile()  # nothing to wait for
                os.write(w, b"free" if free else b"held")
            finally:
                os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        seen = os.read(r, 32).decode()
        os.close(r)
    assert seen == "free", seen
    assert not runtime._EXITING[0]  # the parent goes on


def test_a_program_with_matmuls_measures_blas_threads_and_keeps_one():
    """Compiled matmuls run on scipy's BLAS on all cores or on one, whichever measured
    faster (two BLAS threads on a busy 2-core machine made a 60 µs step take 15 ms)."""
    from jittape.compiler.backends import blas

    rng = np.random.default_rng(5)
    x = jt.constant(rng.standard_normal((8, 16)))
    w = jt.Variable(rng.standard_normal((16, 4)))
    with jt.GradientTape(persistent=True, backend="cpu") as tape:
        loss = jt.reduce_sum(jt.tanh(x @ w))
    first = tape.gradient(loss, w).numpy()
    graph = next(g for g, p in reversed(list(cpu._BY_GRAPH.values()))
                 if any(d.startswith("matmul") for _, d in p.kernels))
    prog = cpu.program(graph)
    assert prog.tunes_blas == (blas.cpu_count() > 1 and not blas.kernel_threads_fixed())
    results = [tape.gradient(loss, w).numpy() for _ in range(4 + 2 * cpu._TUNE_CALLS)]
    if prog.tunes_blas:
        assert prog.choice is not None and prog.choice[1] in (1, blas.cpu_count())
        assert {w for w, _ in prog.trials} == {(1, blas.cpu_count()), (1, 1)}
    for r in results:
        np.testing.assert_allclose(r, first, rtol=1e-12)


_CAP_SCRIPT = textwrap.dedent(
    """
    import ctypes, sys
    sys.path.insert(0, {root!r})
    from jittape.compiler.backends import blas
    assert not any("scipy.libs" in p for p in blas._loaded_blas())  # not loaded yet
    blas.cap_threads(1)  # as jittape.distributed.init on 2 ranks of a 2-core machine
    import scipy.linalg.cython_blas  # what the cpu backend loads on its first use
    for p in blas._loaded_blas():
        if "scipy.libs" in p:
            lib = ctypes.CDLL(p)
            get = [getattr(lib, s) for s in ("scipy_openblas_get_num_threads64_",
                   "scipy_openblas_get_num_threads", "openblas_get_num_threads")
                   if hasattr(lib, s)]
            print(get[0]() if get else "none")
    """
)


def test_a_thread_cap_before_scipy_loads_reaches_scipys_blas():
    """``blas.cap_threads`` in a process that has not loaded scipy's OpenBLAS yet (the
    ranks of an MPI job cap theirs in ``init``, before their first compiled step): the
    compiled matmuls still run on the capped count. Before the fix, the setter was
    looked up then, not found and never again: two ranks on 2 cores each ran their
    matmuls on two spinning BLAS threads, and a 0.1 ms step took 16 ms."""
    out = subprocess.run([sys.executable, "-c", _CAP_SCRIPT.format(root=ROOT)],
                         capture_output=True, text=True, timeout=120, check=True)
    got = out.stdout.split()
    if not got or got == ["none"]:
        pytest.skip("scipy's OpenBLAS is not loaded, or cannot report its threads")
    assert got == ["1"]


_POOL_SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {root!r})
    sys.path.insert(0, {bench!r})
    import numpy as np
    import jittape as jt
    from jittape.compiler.backends import compile_pool, cpu
    from train_steps import CONFIGS, NumpyStep, data, jittape_step
    {patch}
    cfg = CONFIGS["small"]
    x, y, ws, bs = data(cfg)
    ref = NumpyStep(cfg, [w.copy() for w in ws], [b.copy() for b in bs])
    step = jittape_step(cfg, ws, bs, compiled=True, backend="cpu")
    losses = [(float(step(jt.constant(x), jt.constant(y))), float(ref(x, y)))
              for _ in range(3)]
    print(json.dumps(dict(stats=cpu.stats, losses=losses,
                          workers=len(compile_pool._POOL))))
    """
)


@pytest.mark.parametrize("worker", ["works", "fails"])
def test_kernels_compile_in_a_worker_process_beside_this_one(tmp_path, worker):
    """With a compile worker, a cold step's kernels are compiled partly there (this
    process loads them from the disk cache the worker wrote), and the step computes what
    numpy does; a worker that fails every job leaves all of them to this process."""
    import json

    patch = ("compile_pool._Worker.compile = lambda self, *a: False"
             if worker == "fails" else "")
    env = dict(os.environ, JITTAPE_CACHE_DIR=str(tmp_path), JITTAPE_COMPILE_WORKERS="1",
               JITTAPE_BACKGROUND_COMPILE="0")
    code = _POOL_SCRIPT.format(root=ROOT, bench=os.path.join(ROOT, "benchmarks"),
                               patch=patch)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    for got, want in res["losses"]:
        np.testing.assert_allclose(got, want, rtol=2e-5)
    st = res["stats"]
    assert res["workers"] == 1 and st["fallbacks"] == 0
    if worker == "works":  # some compiled in the worker, loaded here from disk
        assert st["kernels_from_disk"] > 0 and st["kernels_compiled"] > 0
    else:
        assert st["kernels_from_disk"] == 0 and st["kernels_compiled"] > 0


def test_a_forked_child_does_not_use_its_parents_compile_workers(monkeypatch):
    """A worker answers over pipes its parent holds: a child forked after the workers
    started must not send jobs there (the two processes would read each other's
    answers), so it sees no workers and compiles by itself."""
    from jittape.compiler.backends import compile_pool

    monkeypatch.setenv("JITTAPE_COMPILE_WORKERS", "1")
    workers = compile_pool._pool(spawn=True)
    assert len(workers) == 1 and workers[0].alive()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it sees, and leave without cleanup
        try:
            seen = len(compile_pool._pool())
        except BaseException:  # noqa: BLE001
            seen = -1
        os.write(w, str(seen).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    assert os.read(r, 16) == b"0"
    os.close(r)
    assert compile_pool._pool() == workers  # the parent's worker is untouched


def test_entry_parameter_names_do_not_depend_on_global_layer_numbers():
    """A second model of the same layers reads dense_2/..., dense_3/...: the entry names
    its layers by their order in the graph, so its text (and cached module) is the first
    model's."""
    from types import SimpleNamespace

    from jittape.compiler.backends.kernel_names import input_params

    def graph(names):
        return SimpleNamespace(inputs=list(range(len(names))), input_names=names)

    first = ["arg:x", "var:dense/kernel", "var:dense/bias", "var:dense_1/kernel",
             "var:adam/iteration", "var:adam/dense/kernel/m"]
    second = ["arg:x", "var:dense_2/kernel", "var:dense_2/bias", "var:dense_3/kernel",
              "var:adam_1/iteration", "var:adam_1/dense_2/kernel/m"]
    assert input_params(graph(first)) == input_params(graph(second)) == [
        "x", "w_dense_kernel", "w_dense_bias", "w_dense_1_kernel", "w_adam_iteration",
        "w_adam_dense_kernel_m"]


_IMPORT_SCRIPT = textwrap.dedent(
    """
    import ctypes, os, sys
    sys.path.insert(0, {root!r})
    import jittape  # the cpu backend is the default: its import sets the BLAS up
    from jittape.compiler.backends import blas
    counts = []
    for p in blas._loaded_blas():
        lib = ctypes.CDLL(p)
        get = [getattr(lib, s) for s in ("scipy_openblas_get_num_threads64_",
               "scipy_openblas_get_num_threads", "openblas_get_num_threads")
               if hasattr(lib, s)]
        if get:
            counts.append(("numpy" if "numpy" in p else "scipy", get[0]()))
    print(os.environ.get("OPENBLAS_THREAD_TIMEOUT"), sorted(counts))
    """
)


@pytest.mark.parametrize("preset", [None, "20"])
def test_importing_jittape_sets_up_both_blas_libraries(preset):
    """With the cpu backend (the default), ``import jittape`` loads scipy's OpenBLAS (the
    one compiled kernels call) with its workers spinning briefly, ``OPENBLAS_THREAD_TIMEOUT``
    16 unless the user set it (the LeNet step ran for seconds at a time at one thread's
    speed with OpenBLAS's default), and puts numpy's OpenBLAS on one thread. A refactor
    once dropped this call without any test noticing."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("JITTAPE_BACKEND", "OPENBLAS_THREAD_TIMEOUT", "OPENBLAS_NUM_THREADS",
                        "OMP_NUM_THREADS", "JITTAPE_BLAS_THREADS")}
    if preset is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = preset
    out = subprocess.run([sys.executable, "-c", _IMPORT_SCRIPT.format(root=ROOT)], env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    timeout, counts = out.stdout.split(" ", 1)
    assert timeout == (preset or blas_spin())
    counts = eval(counts)  # noqa: S307 (our own subprocess's printed list)
    libs = [name for name, _ in counts]
    if "numpy" not in libs or "scipy" not in libs:
        pytest.skip("numpy's or scipy's OpenBLAS cannot report its threads here")
    assert dict(counts)["numpy"] == 1
    if (os.cpu_count() or 1) > 1 and hasattr(os, "sched_getaffinity") and \
            len(os.sched_getaffinity(0)) > 1:
        assert dict(counts)["scipy"] > 1  # the compiled code keeps every core


def blas_spin():
    from jittape.compiler.backends import blas

    return blas.SPIN
