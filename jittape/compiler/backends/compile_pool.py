"""A new program's kernels compiled side by side, in worker processes beside this one.

Numba compiles one function at a time in a process (its compiler lock), and a step's
kernels are most of its cold compile (about 0.15 s each). A worker imports a kernel's
module from its file and compiles it for the argument types the entry calls it with,
which leaves it in Numba's disk cache; this process then loads it from there (about
15 ms). Meanwhile this process compiles other kernels itself: jobs are taken from both
ends of one queue, so nothing waits for a worker to start. Measured on the project's
2-core machine: the small MLP step's 17 kernel compiles took 3.0 s in one process and
1.8 s in two.

``JITTAPE_COMPILE_WORKERS`` sets how many workers (default: one per core beyond the
first, at most 3; ``0``: none). Workers start when a program that no process compiled
before, and whose kernels are not on disk, is generated (``warm_up``), and serve every
later compile of this process; a worker exits when this process closes its pipe (at
exit, or if this process dies). A job a worker fails (or a worker that died) is
compiled here: a worker can make a compile faster, never wrong.
"""

from __future__ import annotations

import atexit
import collections
import os
import pickle
import subprocess
import sys
import threading

_MIN_JOBS = 3  # fewer kernels to compile than this: not worth a worker's round trip


def _workers_wanted() -> int:
    v = os.environ.get("JITTAPE_COMPILE_WORKERS", "").strip()
    if v:
        try:
            return max(0, int(v))
        except ValueError:
            return 0
    return max(0, min(3, (os.cpu_count() or 1) - 1))


class _Worker:
    """One worker process, asked one job at a time over its pipes."""

    def __init__(self):
        # the folder that holds the jittape package (jittape/compiler/backends/ is 3 down)
        here = os.path.abspath(__file__)
        for _ in range(4):
            here = os.path.dirname(here)
        root = here
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"]
                                    if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jittape.compiler.backends.compile_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, text=True, bufsize=1)
        self.owner = os.getpid()  # a forked child must not talk over its parent's pipes
        self.lock = threading.Lock()
        # set once the worker has imported Numba (it says "ready"): until then no job
        # waits for it
        self.ready = threading.Event()
        threading.Thread(target=self._wait_ready, daemon=True).start()

    def _wait_ready(self) -> None:
        try:
            if self.proc.stdout.readline().strip() == "ready":
                self.ready.set()
        except (OSError, ValueError):
            pass

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.proc.poll() is None

    def compile(self, path: str, module: str, fname: str, argtypes) -> bool:
        """Whether the worker compiled ``module.fname`` for ``argtypes`` (into the cache)."""
        with self.lock:
            try:
                job = (path, module, fname, argtypes)
                self.proc.stdin.write(pickle.dumps(job).hex() + "\n")
                self.proc.stdin.flush()
                return self.proc.stdout.readline().strip() == "ok"
            except (OSError, ValueError, pickle.PicklingError):
                return False

    def close(self) -> None:
        """Stop an idle worker (the caller holds its lock, so no job is under way and
        the worker writes nothing): at exit, without waiting for its own teardown."""
        try:
            self.proc.kill()
            self.proc.stdin.close()
            self.proc.wait(timeout=1)
            self.proc.stdout.close()
        except Exception:  # noqa: BLE001 - exiting anyway; it ends at its input's end
            pass


_POOL: list = []
_POOL_LOCK = threading.Lock()


def _pool(spawn: bool = False) -> list:
    """The live workers; ``spawn``: start the missing ones first."""
    with _POOL_LOCK:
        # dead workers, and a forked parent's (this process may not use its pipes)
        _POOL[:] = [w for w in _POOL if w.alive()]
        while spawn and len(_POOL) < _workers_wanted():
            try:
                _POOL.append(_Worker())
            except OSError:
                break
        return list(_POOL)


def warm_up() -> None:
    """Start the workers now (they take about 0.7 s to import Numba): called when a
    program no process compiled before is generated, so that they are ready when its
    kernels are. Nothing else starts them: a program loaded from the disk cache loads
    its kernels from there, faster than a worker could start."""
    _pool(spawn=True)


@atexit.register
def _shutdown() -> None:
    """End the idle workers. A worker with a job under way is left to finish it on
    its own, detached: this process does not wait for a kernel nobody will run, the
    worker completes the cache files it writes, then finds its pipes closed by this
    process's exit and ends. (Its pipes are left as they are: the thread waiting for
    its answer holds the reading end.)"""
    for w in _POOL:
        if w.owner == os.getpid() and w.lock.acquire(blocking=False):
            w.close()


class Batch:
    """Kernel compiles under way: the workers take jobs from the back of the queue as
    soon as it is made; :meth:`finish` has this process take them from the front, then
    loads what the workers compiled from the disk cache they wrote."""

    def __init__(self, todo, workers):
        self.queue = collections.deque(todo)
        self.lock = threading.Lock()
        self.done_elsewhere: list = []
        self.threads = [threading.Thread(target=self._feed, args=(w,), daemon=True)
                        for w in workers]
        for t in self.threads:
            t.start()

    def _feed(self, worker):
        while not worker.ready.wait(0.01):  # still importing: take nothing yet
            with self.lock:
                if not self.queue or not worker.alive():
                    return
        while True:
            with self.lock:
                if not self.queue:
                    return
                disp, at = self.queue.pop()  # from the back; this process takes the front
            mod = sys.modules.get(disp.py_func.__module__)
            path = getattr(mod, "__file__", None)
            if path and worker.compile(path, disp.py_func.__module__, disp.py_func.__name__,
                                       at):
                self.done_elsewhere.append((disp, at))
            else:
                with self.lock:
                    self.queue.append((disp, at))  # this process compiles it
                return

    def finish(self) -> None:
        while True:
            with self.lock:
                if not self.queue:
                    break
                disp, at = self.queue.popleft()
            disp.compile(at)
        for t in self.threads:
            while t.is_alive():  # in short waits: a background compile abandoned at exit
                t.join(0.05)    # (runtime.in_background) stops here at once
        for disp, at in self.queue:  # a worker gave up on these after this process finished
            disp.compile(at)
        for disp, at in self.done_elsewhere:  # from the disk cache the workers wrote
            disp.compile(at)


def start(jobs) -> Batch:
    """Start compiling ``jobs`` (``(dispatcher, argument types)``) in the workers, when
    there are workers and enough jobs for them; :meth:`Batch.finish` compiles the rest
    here."""
    todo = [(d, at) for d, at in dict.fromkeys(jobs) if at not in d.overloads]
    return Batch(todo, _pool() if len(todo) >= _MIN_JOBS else [])


def compile_kernels(jobs) -> None:
    """Compile each ``(dispatcher, argument types)`` of ``jobs`` (or load it from Numba's
    disk cache), with the workers' help when there are enough of them."""
    start(jobs).finish()
