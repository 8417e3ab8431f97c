"""What each rank of an MPI job runs for ``test_distributed.py``: the train steps of
``train_steps.py`` (small and large) under ``@jt.function`` on ``cpu``, each twice in the
same ranks: with the gradients averaged across the ranks (``DistributedGradientTape``
inside the step: the compiled kernel calls ``MPI_Allreduce``) and with a plain tape.

Each rank trains on its own batch of the workload's size (``data`` with its own seed),
so the job's global batch is the ranks times that. The two steps run in alternating
blocks, each block started together by a barrier, and every call is timed on its own
(and each block as a whole: with more ranks than cores a rank waits for a core between
calls, which the calls' own times leave out); rank 0 writes the step times, each rank's
medians and its blocks' time per step as JSON:

    mpiexec -n 2 python benchmarks/mpi_steps.py OUT.json [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import jittape as jt  # noqa: E402
from train_steps import CONFIGS, data, jittape_step  # noqa: E402

dist = jt.distributed

# calls per block of the alternation: a few ms of steps, so the two steps see the same
# state of the (shared, noisy) machine
BLOCK = {"small": 100, "large": 40}


def warm_up(step, args) -> bool:
    """Call ``step`` until its programs are in their steady state (compiled, the parallel
    variant compiled, the way of running chosen). A fixed number of calls, the same on
    every rank: ``bench_util.settle`` stops when this rank's programs have chosen, and a
    rank that stops early leaves the others waiting in an allreduce. Returns whether
    every program chose."""
    from jittape.compiler.backends import cpu

    for _ in range(cpu.PARALLEL_AFTER + 4):
        step(*args)
    for prog in list(cpu._BY_KEY.values()):
        if prog.par_thread is not None:
            prog.par_thread.join()
    for _ in range(4 * 3 * cpu._TUNE_CALLS):  # three ways to try at most, 8 calls each
        step(*args)
    return all(p.choice is not None for p in list(cpu._BY_KEY.values())
               if p.ready and (p.entry_par is not None or p.tunes_blas))


def same_weights(params) -> bool:
    """Whether every rank holds rank 0's values of ``params`` (all ranks agree)."""
    mine = np.concatenate([p.numpy().ravel() for p in params])
    same = np.array_equal(mine, dist.broadcast(mine, root=0).numpy())
    return int(dist.allreduce(np.array(int(same), np.int32), average=False).numpy()) == \
        dist.size()


def measure(size: str, rounds: int) -> dict:
    from mpi4py import MPI

    cfg = CONFIGS[size]
    _, _, ws, bs = data(cfg)  # the same initial weights on every rank
    x, y, _, _ = data(cfg, seed=1 + dist.rank())  # this rank's batch
    args = (jt.constant(x), jt.constant(y))
    steps = {"allreduce": jittape_step(cfg, ws, bs, compiled=True, backend="cpu",
                                       distributed=True),
             "plain": jittape_step(cfg, ws, bs, compiled=True, backend="cpu")}
    settled = {k: warm_up(s, args) for k, s in steps.items()}
    times: dict = {k: [] for k in steps}
    walls: dict = {k: [] for k in steps}  # a block's time per step: preemptions included
    for _ in range(rounds):
        for k, s in steps.items():
            dist.barrier()
            start = time.perf_counter()
            for _ in range(BLOCK[size]):
                t0 = time.perf_counter()
                s(*args)
                times[k].append(time.perf_counter() - t0)
            walls[k].append((time.perf_counter() - start) / BLOCK[size])
    out = {"same_weights": same_weights(steps["allreduce"].params),
           "message_bytes": 4 * sum(w.size + b.size for w, b in zip(ws, bs)),
           "batch_per_rank": cfg["batch"], "global_batch": cfg["batch"] * dist.size()}
    comm = MPI.COMM_WORLD
    for k in steps:
        medians = comm.gather(float(np.median(times[k])), root=0)
        chose = comm.gather(settled[k], root=0)
        out[k] = {"times_s": times[k], "rank_medians_s": medians,
                  "wall_per_step_s": float(np.median(walls[k])),
                  "settled": None if chose is None else all(chose)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="small,large")
    args = ap.parse_args(argv)
    dist.init()
    res = {"ranks": dist.size(), "local_ranks": dist.local_size(),
           "threads_per_rank": _world().threads,
           "workloads": {s: measure(s, args.rounds) for s in args.sizes.split(",")}}
    if dist.rank() == 0:
        Path(args.out).write_text(json.dumps(res))
    return 0


def _world():
    from jittape.ops.collective import WORLD

    return WORLD[0]


if __name__ == "__main__":
    sys.exit(main())
