"""Train-step cost, groups ``mlp-small`` and ``mlp-large``: hand-written numpy (the
reference), the eager jittape step on ``interpret`` and ``cpu``, and the same step under
``@jt.function`` on ``cpu`` (one compiled call), per step, in one run; the floor is the
step's matmul FLOPs at the GEMM rate measured in the same run (``floors.py``). Group
``start``: the first call's trace + compile time in a fresh process, with an empty and
with a warm disk cache. Workloads in ``train_steps.py``.

Run: .venv/bin/python -m pytest benchmarks/test_train_step.py -q
     --benchmark-group-by=group --benchmark-columns=median,iqr,rounds
Compare ratios within one run; the machine is shared and noisy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import jittape as jt
from jittape.compiler.backends import blas

sys.path.insert(0, str(Path(__file__).parent))
from bench_util import compile_seconds, record, settle  # noqa: E402
from floors import mlp_floor  # noqa: E402
from train_steps import CONFIGS, NumpyStep, data, jittape_step  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("impl", ["numpy", "eager-interpret", "eager-cpu", "function-cpu",
                                  "function-cpu-batchnone"])
def test_step(benchmark, ceilings, size, impl):
    cfg = CONFIGS[size]
    benchmark.group = f"mlp-{size}"
    x, y, ws, bs = data(cfg)
    floor = mlp_floor(ceilings, size)
    what = ("64-128-64-10 b64 SGD" if size == "small" else "784-512-256-10 b256 Adam")
    if impl == "numpy":
        # numpy as a numpy user runs it: its BLAS on every core (jittape sets numpy's
        # BLAS to one thread when its cpu backend loads; see jittape/compiler/backends/blas.py)
        record(benchmark, impl, ceilings, floor, workload=what)
        blas.limit_threads(n=os.cpu_count() or 1, kernel_n=0)
        try:
            step = NumpyStep(cfg, ws, bs)
            benchmark(step, x, y)
        finally:
            blas.limit_threads()
        return
    kind, backend = impl.split("-")[:2]
    # function-cpu-batchnone: input_signature=[TensorSpec([None, ...]), ...], one trace
    # with a symbolic batch size, against function-cpu's trace with the concrete one
    step = jittape_step(cfg, ws, bs, compiled=kind == "function", backend=backend,
                        batch_none=impl.endswith("batchnone"))
    args = (jt.constant(x), jt.constant(y))
    step(*args)
    info = {}
    if kind == "function":
        step.wait()  # the compile in the background
        info["compile_s"] = compile_seconds(step)
    settle(lambda: step(*args))
    record(benchmark, impl, ceilings, floor, workload=what, **info)
    benchmark(step, *args)


_FIRST_CALL = r"""
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, {bench!r})
import jittape as jt
from train_steps import CONFIGS, data, jittape_step
t1 = time.perf_counter()
cfg = CONFIGS[{size!r}]
if {before!r}:  # a process that has compiled before (Numba's first-compile set-up done)
    import numpy as np
    jt.function(lambda v: v * 2.0 + 1.0, backend="cpu")(np.ones(3, np.float32))
    from jittape.compiler.backends import cpu as _cpu
    _cpu.stats.update({{k: 0 for k in _cpu.stats}})  # the step's own counts below
x, y, ws, bs = data(cfg)
step = jittape_step(cfg, ws, bs, compiled=True, backend="cpu", name={name!r},
                    var_names={var_names!r})
xt, yt = jt.constant(x), jt.constant(y)
t2 = time.perf_counter()
step(xt, yt)
t3 = time.perf_counter()
step.wait()
t4 = time.perf_counter()
from jittape.compiler.backends import cpu
print(json.dumps({{"import_s": t1 - t0, "first_call_s": t3 - t2, "compiled_s": t4 - t2,
                  "stats": dict(cpu.stats)}}))
"""


def _fresh_process(size, cache_dir, background, name=None, before=False, var_names=None):
    env = dict(os.environ, JITTAPE_CACHE_DIR=cache_dir, PYTHONPATH=str(ROOT),
               JITTAPE_BACKGROUND_COMPILE="1" if background else "0")
    code = _FIRST_CALL.format(bench=str(Path(__file__).parent), size=size, name=name,
                              before=before, var_names=var_names)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("cache", ["cold", "warm", "cold-background"])
def test_first_call_in_a_fresh_process(benchmark, size, cache):
    """The time from calling the step for the first time to its result, in a new
    process: ``cold`` with an empty disk cache (trace, passes, code generation, Numba
    compile), ``warm`` with the cache a previous process left, both compiling on the
    first call (``JITTAPE_BACKGROUND_COMPILE=0``); ``cold-background``: the default,
    where the first calls run on the interpreter while the compile runs in a thread
    (``compiled_s``: until the compiled program is ready)."""
    benchmark.group = "start: first call in a fresh process"
    record(benchmark, f"{size}-{cache}")
    with tempfile.TemporaryDirectory() as d:
        if cache == "warm":
            _fresh_process(size, d, False)
        res = {}

        def run():
            res.update(_fresh_process(size, d, cache == "cold-background"))

        benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(res)
    print(f"\n{size} {cache}: first call {res['first_call_s']:.2f} s, compiled after "
          f"{res['compiled_s']:.2f} s (import {res['import_s']:.2f} s)")
    assert res["first_call_s"] > 0


@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("process", ["fresh", "compiled-before"])
def test_first_call_new_entry_over_cached_kernels(benchmark, size, process):
    """A graph whose kernels are on disk but whose entry is new: the same step over
    variables of other names (the entry's parameters are named after them), in a process
    after the one that left the disk cache. Only the entry compiles; the kernels load
    from their own disk-cache entries (``kernels_compiled`` 0). ``fresh``: the step
    is the process's first compile (it pays Numba's set-up, about 0.3 s);
    ``compiled-before``: the process compiled a small function first, as a program's
    ``predict`` after its train step finds it."""
    benchmark.group = "start: first call in a fresh process"
    record(benchmark, f"{size}-new-entry-cached-kernels-{process}")
    before = process == "compiled-before"
    with tempfile.TemporaryDirectory() as d:
        _fresh_process(size, d, False, before=before)  # (the small function on disk too)
        res = {}

        def run():
            res.update(_fresh_process(size, d, False, before=before, var_names="other"))

        benchmark.pedantic(run, rounds=1, iterations=1)
    stats = res["stats"]
    benchmark.extra_info.update(res)
    print(f"\n{size} new entry over cached kernels ({process} process): first call "
          f"{res['first_call_s']:.2f} s; "
          f"compiled {stats['compiled']}, disk hits {stats['disk_hits']}, kernels "
          f"compiled {stats.get('kernels_compiled')}, from disk {stats.get('kernels_from_disk')}")
    assert stats["compiled"] == 1 and stats["disk_hits"] == 0  # a new entry
    if "kernels_compiled" in stats:
        assert stats["kernels_compiled"] == 0 and stats["kernels_from_disk"] > 0


@pytest.mark.parametrize("size", ["small", "large"])
def test_first_call_second_model_same_sizes(benchmark, size):
    """A second model with the same layer sizes (its step has another name, its layers
    other global names), in a process that compiled before: the entry's text names
    neither the graph nor the layers' global numbers, so it is the first model's module,
    loaded from disk with its kernels (``compiled`` 0)."""
    benchmark.group = "start: first call in a fresh process"
    record(benchmark, f"{size}-second-model-same-sizes")
    with tempfile.TemporaryDirectory() as d:
        _fresh_process(size, d, False, before=True)
        res = {}

        def run():
            res.update(_fresh_process(size, d, False, name="second_model_step",
                                      before=True))

        benchmark.pedantic(run, rounds=1, iterations=1)
    stats = res["stats"]
    benchmark.extra_info.update(res)
    print(f"\n{size} second model, same sizes: first call {res['first_call_s']:.2f} s; "
          f"compiled {stats['compiled']}, disk hits {stats['disk_hits']}")
    assert stats["compiled"] == 0 and stats["disk_hits"] >= 1


_PREDICT_AFTER_TRAIN = r"""
import json, time
import numpy as np
import jittape as jt
from jittape.compiler.backends import cpu
rng = np.random.default_rng(0)
x = rng.random((360, 64), dtype=np.float32)
y = rng.integers(0, 10, 360).astype(np.int32)
jt.random.set_seed(0)
L = jt.layers
model = jt.Sequential([L.Dense(128, activation="relu", input_shape=(64,)), L.Dropout(0.1),
                       L.Dense(64, activation="relu"), L.Dense(10)])
opt = jt.optimizers.Adam(2e-3)
loss_fn = jt.losses.SparseCategoricalCrossentropy(from_logits=True)

@jt.function
def step(xb, yb):
    with jt.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss

@jt.function
def predict(xb):
    return jt.argmax(model(xb, training=False), axis=1)

step(x[:32], y[:32])
before = dict(cpu.stats)
t0 = time.perf_counter()
predict(x)
t1 = time.perf_counter()
print(json.dumps({"first_call_s": t1 - t0,
                  "stats": {k: cpu.stats[k] - before.get(k, 0) for k in cpu.stats}}))
"""


def test_first_call_predict_after_the_train_step(benchmark):
    """The digits demo's ``predict`` (the demo's model, forward and argmax) right after
    its train step compiled, in one process with an empty disk cache: the entry and the
    few kernels the train step does not have (the forward without the backward's masks,
    the argmax) compile; the rest load."""
    benchmark.group = "start: first call in a fresh process"
    record(benchmark, "digits-predict-after-train-step-cold")
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, JITTAPE_CACHE_DIR=d, PYTHONPATH=str(ROOT),
                   JITTAPE_BACKGROUND_COMPILE="0")
        res = {}

        def run():
            out = subprocess.run([sys.executable, "-c", _PREDICT_AFTER_TRAIN], env=env,
                                 capture_output=True, text=True, check=True, timeout=600)
            res.update(json.loads(out.stdout.strip().splitlines()[-1]))

        benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(res)
    stats = res["stats"]
    print(f"\ndigits predict after the train step: first call {res['first_call_s']:.2f} s; "
          f"compiled {stats['compiled']}, kernels compiled {stats.get('kernels_compiled')}, "
          f"from disk {stats.get('kernels_from_disk')}")
    assert stats["compiled"] == 1


def test_steps_compute_the_same_loss():
    for size in ("small", "large"):
        cfg = CONFIGS[size]
        x, y, ws, bs = data(cfg)
        ref = NumpyStep(cfg, [w.copy() for w in ws], [b.copy() for b in bs])
        step = jittape_step(cfg, ws, bs, compiled=True, backend="cpu")
        for _ in range(3):
            want = ref(x, y)
            got = float(step(jt.constant(x), jt.constant(y)))
            np.testing.assert_allclose(got, want, rtol=2e-5)
        for p, q in zip(step.params, ref.params):
            np.testing.assert_allclose(p.numpy(), q, rtol=1e-4, atol=1e-5)
