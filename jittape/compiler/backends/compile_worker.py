"""A compile worker (``compile_pool.py``): reads one job a line from stdin (a hex pickle
of ``(module file, module name, function name, argument types)``), compiles that
kernel (``k`` or ``k_par``) for those types, which writes Numba's disk cache, and
answers ``ok`` or ``error``. Exits at the end of its input. Run as ``python -m
jittape.compiler.backends.compile_worker``."""

from __future__ import annotations

import pickle
import sys


def _kernel(path: str, name: str, fname: str):
    from jittape.compiler.cache import load_module

    return getattr(load_module(name, path), fname)


def main() -> None:
    import warnings

    warnings.simplefilter("ignore")  # Numba's performance hints: this process has no user
    import jittape.compiler.backends.vmath  # noqa: F401 - what every kernel module imports

    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        try:
            path, name, fname, argtypes = pickle.loads(bytes.fromhex(line.strip()))
            _kernel(path, name, fname).compile(tuple(argtypes))
            answer = "ok"
        except Exception:  # noqa: BLE001 - the asking process compiles it itself
            answer = "error"
        try:
            sys.stdout.write(answer + "\n")
            sys.stdout.flush()
        except BrokenPipeError:  # the asking process has exited: the job is done
            return


if __name__ == "__main__":
    main()
