"""Data-parallel train steps over MPI, groups ``mpi-small`` and ``mpi-large``: the steps of
``train_steps.py`` under ``@jt.function`` on ``cpu`` in jobs of 1, 2 and 4 ranks on this
machine, each with the gradients allreduced (``DistributedGradientTape`` in the step: the
compiled kernel calls ``MPI_Allreduce``) and without (a plain tape), in the same ranks.

Each rank's batch is the workload's (64 small, 256 large), so the global batch grows
with the ranks (N times it). The allreduce's cost per step is the difference of the
two medians of one job (``allreduce_overhead_s``, in the notes): the MPI call, the copy
of the gradients into one buffer, and the update, which then runs as loops of its own
instead of in the backward matmuls' epilogues (so a job of one rank pays it too).

Every step is timed inside the ranks (``mpi_steps.py``, one ``mpiexec`` per job); a
benchmark's rounds are rank 0's steps, its ``extra_info`` has every rank's median and
rank 0's time per step over whole blocks of steps (``wall_per_step_s``: a rank's waits
for a core between steps too, which the steps' own times leave out). Several ranks
share this machine's cores: ``jittape.distributed`` gives each cores / local ranks threads (at
least one), so 4 ranks on 2 cores oversubscribe it and their figures say so.

Run: .venv/bin/python -m pytest benchmarks/test_distributed.py -q
     --benchmark-group-by=group --benchmark-columns=median,iqr,rounds
Needs mpi4py and ``mpiexec`` (the ``mpi`` extra).
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

from bench_util import record, record_times

HERE = Path(__file__).resolve().parent
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which(
    "mpiexec")
RANKS = (1, 2, 4)
WORKLOADS = {"small": "64-128-64-10 b64/rank SGD", "large": "784-512-256-10 b256/rank Adam"}


def _have_mpi4py() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """``jobs(n)``: the figures of a job of ``n`` ranks (one launch per ``n``)."""
    if MPIEXEC is None or not _have_mpi4py():
        pytest.skip("needs mpi4py and mpiexec: pip install 'jittape[mpi]'")
    done: dict = {}
    root = str(HERE.parent)
    env = dict(os.environ, JITTAPE_BACKGROUND_COMPILE="0", PYTHONPATH=os.pathsep.join(
        [root] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))

    def run(n):
        if n not in done:
            out = tmp_path_factory.mktemp(f"mpi{n}") / "steps.json"
            t0 = time.monotonic()
            p = subprocess.run([MPIEXEC, "-n", str(n), sys.executable,
                                str(HERE / "mpi_steps.py"), str(out)],
                               capture_output=True, text=True, timeout=900, env=env)
            assert p.returncode == 0, p.stdout + p.stderr
            done[n] = json.loads(out.read_text())
            done[n]["job_s"] = time.monotonic() - t0
        return done[n]

    return run


@pytest.mark.parametrize("size", ["small", "large"])
@pytest.mark.parametrize("ranks", RANKS)
@pytest.mark.parametrize("step", ["allreduce", "no-allreduce"])
def test_step_across_ranks(benchmark, ceilings, jobs, size, ranks, step):
    benchmark.group = f"mpi-{size}"
    job = jobs(ranks)
    w = job["workloads"][size]
    mine = w["allreduce" if step == "allreduce" else "plain"]
    info = {k: w[k] for k in ("batch_per_rank", "global_batch", "message_bytes")}
    info.update(ranks=ranks, threads_per_rank=job["threads_per_rank"],
                rank_medians_s=mine["rank_medians_s"], wall_per_step_s=mine["wall_per_step_s"],
                settled=mine["settled"])
    if step == "allreduce":
        info["allreduce_overhead_s"] = (float(np.median(w["allreduce"]["times_s"]))
                                        - float(np.median(w["plain"]["times_s"])))
        info["same_weights"] = w["same_weights"]
    record(benchmark, f"{ranks}-rank{'s' if ranks > 1 else ''}-{step}", ceilings,
           workload=WORKLOADS[size], **info)
    record_times(benchmark, mine["times_s"])
    med = float(np.median(mine["times_s"]))
    print(f"\n{size} {ranks} rank(s) {step}: {1e3 * med:.3f} ms per step (rank 0; ranks "
          + ", ".join(f"{1e3 * t:.3f}" for t in mine["rank_medians_s"]) + " ms; blocks "
          f"{1e3 * mine['wall_per_step_s']:.3f} ms per step)"
          + (f", allreduce +{1e3 * info['allreduce_overhead_s']:.3f} ms"
             if step == "allreduce" else ""))
    if step == "allreduce":
        assert w["same_weights"]  # the allreduced step kept the ranks' weights equal
