"""jittape.distributed: jobs of 2 and 4 ranks on this machine (``mpiexec``, from the
``mpi`` extra that ``make test`` installs), and the parts that need no job.

- every rank ends with the same weights, equal (float tolerance) to one process
  training on the concatenated batches: eagerly, in a compiled ``@jt.function`` step
  (whose kernel calls MPI_Allreduce) and through ``fit`` under ``DataParallel``;
- a rank that raises, one that is killed and one that hangs each end the job with an
  error within a bounded time; ranks whose models differ fail at the first compiled
  step naming the first difference.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import jittape as jt
from jittape.distributed import _world

HERE = Path(__file__).resolve().parent
WORKER = HERE / "mpi_worker.py"
sys.path.insert(0, str(HERE))
import mpi_worker as W  # noqa: E402

MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which(
    "mpiexec")


def _have_mpi4py() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


needs_mpi = pytest.mark.skipif(
    MPIEXEC is None or not _have_mpi4py(),
    reason="needs mpi4py and mpiexec: pip install 'jittape[mpi]' (make test installs it)")


def launch(n, mode, outdir, timeout=240, **env):
    e = dict(os.environ)
    e.update({"JITTAPE_BACKGROUND_COMPILE": "0", "PYTHONPATH": os.pathsep.join(
        [str(HERE.parent)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH")
                              else []))}, **env)
    t0 = time.monotonic()
    p = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(WORKER), mode,
                        str(outdir)], capture_output=True, text=True, timeout=timeout, env=e)
    return p, time.monotonic() - t0


# ---------------------------------------------------------------------------------------
# trainings across ranks, against one process


def _reference(name, init):
    """One process on the whole global batches, from the same initial weights."""
    x, y = W.data()
    m = W.model()
    m.set_weights([init[f"init_w{i}"] for i in range(len(m.get_weights()))])
    if name in ("fit", "fit_dataset"):  # the same training: the global batches in order
        m.compile(optimizer=jt.keras.optimizers.Adam(0.05), loss="mse", metrics=["mae"])
        h = m.fit(x, y, batch_size=W.GLOBAL_BATCH, epochs=W.EPOCHS, shuffle=False, verbose=0)
        return m, h.history, m.evaluate(x, y, batch_size=W.GLOBAL_BATCH, verbose=0)
    opt = jt.keras.optimizers.SGD(0.1) if name == "eager" else jt.keras.optimizers.Adam(0.05)
    for _ in range(W.EPOCHS):
        for k in range(W.STEPS):
            xs = x[k * W.GLOBAL_BATCH:(k + 1) * W.GLOBAL_BATCH]
            ys = y[k * W.GLOBAL_BATCH:(k + 1) * W.GLOBAL_BATCH]
            with jt.GradientTape() as tape:
                loss = W.mse(ys, m(xs, training=True))
            grads = tape.gradient(loss, m.trainable_variables)
            opt.apply_gradients(zip(grads, m.trainable_variables))
    return m, None, None


@pytest.fixture(scope="module", params=[2, 4], ids=["2-ranks", "4-ranks"])
def trained(request, tmp_path_factory):
    if MPIEXEC is None or not _have_mpi4py():
        pytest.skip("needs mpi4py and mpiexec: pip install 'jittape[mpi]'")
    n = request.param
    out = tmp_path_factory.mktemp(f"train{n}")
    p, _ = launch(n, "train", out)
    assert p.returncode == 0, p.stdout + p.stderr
    return n, out


def _load(out, name, n):
    return [dict(np.load(out / f"{name}_{r}.npz")) for r in range(n)]


@needs_mpi
@pytest.mark.parametrize("name", ["eager", "function", "fit", "fit_dataset"])
def test_every_rank_ends_with_the_weights_of_one_process_on_the_whole_batches(trained, name):
    n, out = trained
    ranks = _load(out, name, n)
    finals = sorted(k for k in ranks[0] if k.startswith("final_"))
    for r in range(1, n):
        for k in finals:  # the same allreduced values and updates: the same bits
            np.testing.assert_array_equal(ranks[r][k], ranks[0][k], err_msg=f"rank {r} {k}")
    init = ranks[0]
    ref, history, evaluation = _reference(name, init)
    for i, w in enumerate(ref.get_weights()):
        np.testing.assert_allclose(init[f"final_w{i}"], w, rtol=2e-4, atol=2e-5,
                                   err_msg=f"{name}: weight {i}")
        # the training moved the weights: a comparison of two unchanged copies would pass
        assert not np.allclose(init[f"init_w{i}"], w, atol=1e-3)
    if name != "eager" and name != "function":  # the job's loss and metrics, every rank
        for r in range(n):
            np.testing.assert_allclose(ranks[r]["loss"], history["loss"], rtol=1e-4)
            np.testing.assert_allclose(ranks[r]["mae"], history["mae"], rtol=1e-4)
            np.testing.assert_allclose(ranks[r]["evaluate"], evaluation, rtol=1e-4)


@needs_mpi
def test_the_compiled_step_allreduces_in_its_kernel_one_buffer(trained):
    n, out = trained
    for r, d in enumerate(_load(out, "function", n)):
        assert bool(d["compiled"]), f"rank {r} ran its step on the interpreter"
        kernels = json.loads(str(d["kernels"]))
        reduce = [k for k in kernels if "allreduce" in k]
        # the model's 4 gradients (5x4 + 4 + 4x3 + 3 = 39 floats) in one message, reduced
        # where the concatenation wrote them
        assert reduce == ["mean allreduce in place of f32[39]"], kernels


@needs_mpi
def test_threads_per_rank_share_the_cores(trained):
    n, out = trained
    cores = len(os.sched_getaffinity(0))
    for d in _load(out, "function", n):
        assert int(d["local_size"]) == n
        assert int(d["threads"]) == max(1, cores // n)


@needs_mpi
def test_fit_logs_and_checkpoints_on_rank_0_only(trained):
    n, out = trained
    ran = sorted(p.name for p in out.glob("ran_*"))
    assert ran == sorted(f"ran_{r}_{e}" for r in range(n) for e in range(W.EPOCHS))
    lines = (out / "log.csv").read_text().splitlines()  # one writer: no interleaved rows
    # (Keras' CSVLogger adds val_ columns, NA without validation data)
    assert lines[0].startswith("epoch,loss,mae,") and len(lines) == 1 + W.EPOCHS
    hist = np.load(out / "fit_0.npz")["loss"]
    np.testing.assert_allclose([float(ln.split(",")[1]) for ln in lines[1:]], hist, rtol=1e-5)
    assert (out / "best.weights.h5").exists()


@needs_mpi
def test_broadcast_variables_inside_a_compiled_function(trained):
    n, out = trained
    for r in range(n):
        d = np.load(out / f"sync_{r}.npz")
        np.testing.assert_array_equal(d["v"], np.full((2, 3), float(n), np.float32))
        np.testing.assert_array_equal(d["w"], np.full((4,), 10.0 * n))
        assert json.loads(str(d["kernels"])) == [
            f"broadcast from rank {n - 1} of f32[6]", f"broadcast from rank {n - 1} of f64[4]"]


@needs_mpi
def test_nested_gradients_of_two_dtypes_with_none_are_averaged(trained):
    n, out = trained
    mean = sum(range(1, n + 1)) / n
    for r in range(n):
        d = np.load(out / f"sync_{r}.npz")
        assert bool(d["mixed_none"])
        np.testing.assert_allclose(d["mixed_a"], np.full((2, 3), mean, np.float32))
        assert d["mixed_a"].dtype == np.float32 and d["mixed_b0"].dtype == np.float64
        np.testing.assert_allclose(d["mixed_b0"], np.arange(3.0) * mean)
        np.testing.assert_allclose(d["mixed_b1"], (n - 1) / 2)


@needs_mpi
def test_a_buffer_read_after_its_allreduce_is_not_reduced_over(trained):
    n, out = trained
    total = sum(2.0 * (r + 1) for r in range(n))
    for r in range(n):
        d = np.load(out / f"sync_{r}.npz")
        np.testing.assert_array_equal(d["reuse"], np.full(5, total + 2.0 * (r + 1)))
        np.testing.assert_allclose(d["mean"], np.full(5, 1.5 * total / n), rtol=1e-6)
        kernels = [k for k in json.loads(str(d["reuse_kernels"])) if "allreduce" in k]
        # (fusion may recompute y for s + y: then its allreduce is in place too)
        assert kernels[1] == "mean allreduce in place of f32[5]", kernels


@needs_mpi
def test_fit_shuffles_in_one_order_on_every_rank(trained):
    n, out = trained
    ranks = _load(out, "fit_shuffled", n)
    for r in range(1, n):
        for k in ranks[0]:
            np.testing.assert_array_equal(ranks[r][k], ranks[0][k])


# ---------------------------------------------------------------------------------------
# a job ends instead of hanging


@needs_mpi
def test_a_rank_that_raises_ends_the_job_within_seconds(tmp_path):
    p, took = launch(2, "raise", tmp_path, timeout=120)
    assert p.returncode != 0
    assert "rank 1 fails on purpose at step 3" in p.stderr  # rank 1's own traceback
    assert "uncaught ValueError" in p.stderr and "aborting the job" in p.stderr
    assert "finished" not in p.stdout
    assert took < 60, took  # the job's start-up and a few steps; not the 60 s timeout


@needs_mpi
def test_a_rank_that_is_killed_ends_the_job(tmp_path):
    p, took = launch(2, "kill", tmp_path, timeout=120)
    assert p.returncode != 0
    assert "finished" not in p.stdout
    assert took < 60, took


@needs_mpi
def test_a_rank_that_hangs_ends_the_job_after_the_timeout_naming_rank_and_step(tmp_path):
    p, took = launch(2, "hang", tmp_path, timeout=120, WORKER_TIMEOUT="3")
    assert p.returncode != 0
    # rank 0 waits in step 4's allreduce for rank 1, which sleeps at its step 3 (600 s)
    assert "rank 0 of 2" in p.stderr and "at step 4" in p.stderr, p.stderr
    assert "did not complete within 3 s" in p.stderr
    assert took < 60, took


@needs_mpi
def test_ranks_with_different_models_fail_at_the_first_step_naming_the_difference(tmp_path):
    p, took = launch(2, "layout", tmp_path, timeout=120)
    assert p.returncode != 0
    assert "LayoutError" in p.stderr and "disagree" in p.stderr, p.stderr
    assert ("rank 0 has 'sequential/dense/kernel:0' float32[5,4], rank 1 has "
            "'sequential/dense/kernel:0' float32[5,6]") \
        in p.stderr, p.stderr
    assert took < 60, took


# ---------------------------------------------------------------------------------------
# without a job


def test_the_layout_message_names_the_first_difference():
    a = {"variables": [("d/kernel", (5, 4), "float32"), ("d/bias", (4,), "float32")],
         "collectives": [("allreduce", "float32", (24,), (("average", "True"),))]}
    b = {"variables": [("d/kernel", (5, 4), "float32"), ("d/bias", (6,), "float32")],
         "collectives": a["collectives"]}
    assert _world._first_difference(a, b, 3) == (
        "variable 1: rank 0 has 'd/bias' float32[4], rank 3 has 'd/bias' float32[6]")
    c = {"variables": a["variables"][:1], "collectives": a["collectives"]}
    assert _world._first_difference(a, c, 1) == (
        "rank 0 has 2 variables and rank 1 1: the first one rank 1 lacks is 'd/bias' "
        "float32[4]")
    d = {"variables": a["variables"],
         "collectives": [("allreduce", "float32", (20,), (("average", "True"),))]}
    assert "collective 0: rank 0 has allreduce of float32[24] (average=True), rank 2 has " \
        "allreduce of float32[20]" in _world._first_difference(a, d, 2)


def test_a_job_of_one_rank_adds_no_collective_to_the_step():
    from jittape.distributed.gradients import allreduce_gradients

    g = [jt.constant(np.ones((2, 3), np.float32)), None]
    assert allreduce_gradients(g) is g  # the mean over one rank: the gradients themselves
    m, opt = W.model(), jt.distributed.DistributedOptimizer(jt.keras.optimizers.SGD(0.1))
    step = W.compiled_step(m, opt)
    x = np.ones((4, 5), np.float32)
    step(x, np.ones((4, 3), np.float32))
    graph = next(iter(step._cache.values())).traced
    assert not [nd for nd in graph.nodes if nd.op.name == "allreduce"]


def test_distributed_optimizer_in_one_process_is_the_plain_optimizer():
    x = np.random.default_rng(0).normal(size=(8, 5)).astype(np.float32)
    y = np.random.default_rng(1).normal(size=(8, 3)).astype(np.float32)
    a, b = W.model(), W.model()
    b.set_weights(a.get_weights())
    oa = jt.keras.optimizers.Adam(0.1)
    ob = jt.distributed.DistributedOptimizer(jt.keras.optimizers.Adam(0.1))
    for m, opt in ((a, oa), (b, ob)):
        for _ in range(3):
            with jt.GradientTape() as tape:
                loss = W.mse(y, m(x))
            grads = tape.gradient(loss, m.trainable_variables)
            opt.apply_gradients(zip(grads, m.trainable_variables))
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wa, wb, rtol=1e-6)
    assert type(ob).__name__ == "Adam"  # the same optimizer: its config is unchanged


def test_compiled_allreduce_in_one_process_copies_and_averages(tmp_path):
    from jittape.ops import collective

    @jt.function(backend="cpu")
    def f(x):
        return collective.allreduce(x * 2.0) + collective.broadcast(x)

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(f(x).numpy(), 3 * x)
    prog = f.get_concrete_function(x).program
    assert prog.fallback is None
    # x * 2 is the step's own buffer: reduced in place; x is the caller's: copied first
    assert [d for _, d in prog.kernels if "allreduce" in d or "broadcast" in d] == [
        "mean allreduce in place of f32[2,3]", "broadcast from rank 0 of f32[2,3]"]
    kernel_sources = [text for _, _, text in prog.sources.kernels]
    assert any("_coll.allreduce(h0, r)" in t for t in kernel_sources)


def test_a_collective_reduces_in_place_only_a_buffer_that_dies_there():
    from jittape.ops import collective

    @jt.function(backend="cpu")
    def f(a, b):
        y = a @ b  # a kernel's output, read again below: copied, then reduced
        return collective.allreduce(y) + y

    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(f(a, b).numpy(), 2 * (a @ b))
    kernels = [d for _, d in f.get_concrete_function(a, b).program.kernels]
    assert [d for d in kernels if "allreduce" in d] == ["mean allreduce of f32[2,4]"]


def test_collectives_refuse_other_dtypes_and_integer_means():
    from jittape.ops import collective

    with pytest.raises(jt.errors.InvalidArgumentError, match="allreduce moves float32"):
        collective.allreduce(jt.constant([True, False]))
    with pytest.raises(jt.errors.InvalidArgumentError, match="average=True\\) needs a float"):
        collective.allreduce(jt.constant([1, 2]))
    assert collective.allreduce(jt.constant([1, 2]), average=False).numpy().tolist() == [1, 2]


def test_passes_keep_collectives_even_when_their_result_is_unused():
    from jittape.ops import collective

    @jt.function
    def f(x):
        collective.allreduce(x)  # every rank must still take part
        collective.allreduce(x)  # and twice: no merging of the two
        return x + 1.0

    x = np.ones(3, np.float32)
    f(x)
    g = f.get_concrete_function(x).graph
    assert [n.op.name for n in g.nodes].count("allreduce") == 2
