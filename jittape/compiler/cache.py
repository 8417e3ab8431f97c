"""The on-disk compile cache: generated kernel modules and Numba's compiled code.

Each compiled graph is an entry module ``jt_<hash>.py`` and one kernel module
``jk_<hash>.py`` per kernel it calls, each named by the hash of its content (which
holds the code generator's and the vector math's versions), with Numba's
``.nbi``/``.nbc`` files (and, for an entry, the manifests of its kernel tables:
``.kman``) beside them in ``__pycache__``. A new process that generates the same
source imports the same files and Numba loads their machine code instead of
compiling; a graph whose kernels some other graph compiled compiles only its entry.

The directory is ``JITTAPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/jittape``, else
``~/.cache/jittape``; one that cannot be written (found so, or a write fails: a
read-only mount, a full disk) is replaced, with one warning, by one under the system's
temporary directory. Files are written atomically (a temporary file, then a rename),
so two processes compiling the same graph both read a whole file. A module whose
content does not hash to its name (truncated, corrupted, someone else's) is rewritten.
Its size is bounded by ``JITTAPE_CACHE_MAX_MB`` (default 512): the least recently used
modules go first.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile

from .. import _files
from .._files import write_atomic  # noqa: F401 - jt.cache.write_atomic, for callers

__all__ = ["cache_dir", "clear", "size_bytes", "entries", "write_module", "purge"]

_SUBDIR = "kernels"


_warned_dirs: set = set()
_unwritable: set = set()  # directories where writing a module failed in this process


def _fallback_dir() -> str:
    if hasattr(os, "getuid"):
        return os.path.join(tempfile.gettempdir(), f"jittape-{os.getuid()}", _SUBDIR)
    return os.path.join(tempfile.gettempdir(), "jittape", _SUBDIR)


def _give_up(path: str, why) -> str:
    """The fallback directory instead of ``path``, with one warning per directory."""
    fallback = _fallback_dir()
    if path not in _warned_dirs:
        _warned_dirs.add(path)
        import warnings

        warnings.warn(f"jittape: the kernel cache directory {os.path.dirname(path)!r} is not "
                      f"usable ({why}); using {os.path.dirname(fallback)!r} instead (set "
                      "JITTAPE_CACHE_DIR)", UserWarning, stacklevel=3)
    os.makedirs(fallback, exist_ok=True)
    return fallback


def cache_dir() -> str:
    """Where generated modules live (created on first use). A directory that cannot be
    written is replaced by one under the system's temporary directory, with one warning."""
    root = os.environ.get("JITTAPE_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "jittape")
    path = os.path.join(root, _SUBDIR)
    if path in _unwritable:
        return _give_up(path, "writing failed")
    try:
        os.makedirs(path, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(f"cannot write to {path}")
        return path
    except OSError as e:
        return _give_up(path, e)


def max_bytes() -> int:
    try:
        return int(float(os.environ.get("JITTAPE_CACHE_MAX_MB", "512")) * 2**20)
    except ValueError:
        return 512 * 2**20


PREFIXES = ("jt_", "jk_")  # entry modules, kernel modules


def module_name(source: str, kind: str = "jt") -> str:
    """``jt_<hash>`` (an entry module) or ``jk_<hash>`` (a kernel module)."""
    return f"{kind}_" + hashlib.sha256(source.encode()).hexdigest()[:24]


def _intact(path: str, name: str) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return False
    return module_name(text, name[:2]) == name


def write_module(source: str, kind: str = "jt", keep=()) -> tuple[str, str, bool]:
    """Make sure ``source`` is on disk as its content-named module (``kind``: ``jt``
    or ``jk``, see :func:`module_name`). ``keep``: names the size bound must not drop
    now (the other modules of the same program).

    Returns ``(name, path, existed)``. A file whose content does not hash to its name
    (truncated, corrupted, foreign) is rewritten, and Numba's entries for it dropped.
    """
    name = module_name(source, kind)
    d = cache_dir()
    path = os.path.join(d, name + ".py")
    if os.path.exists(path):
        if _intact(path, name):
            try:
                os.utime(path)  # recently used: the size bound keeps it
            except OSError:
                pass
            return name, path, True
        purge(name)
    try:
        _files.write_atomic(path, source)
    except OSError as e:
        # a directory that looked writable is not (a read-only mount, a full disk, a
        # permission that os.access did not see): the rest of this process uses the
        # fallback directory
        if d == _fallback_dir():
            raise
        _unwritable.add(d)
        d = _give_up(d, e)
        path = os.path.join(d, name + ".py")
        if os.path.exists(path) and _intact(path, name):
            return name, path, True
        purge(name)
        _files.write_atomic(path, source)
    _enforce_bound(keep={name, *keep})
    return name, path, False


def load_module(modname: str, path: str):
    """The module ``modname`` from the file ``path``, imported once (``sys.modules``
    keeps it): generated modules are real files, so Numba's disk cache serves them."""
    import importlib.util
    import sys

    mod = sys.modules.get(modname)
    if mod is not None:
        return mod
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[modname] = mod
    return mod


def purge(name: str) -> None:
    """Delete a module and Numba's compiled code for it."""
    d = cache_dir()
    p = os.path.join(d, name + ".py")
    try:
        if os.path.isdir(p) and not os.path.islink(p):  # something else under our name
            shutil.rmtree(p, ignore_errors=True)
        else:
            os.unlink(p)
    except OSError:
        pass
    pyc = os.path.join(d, "__pycache__")
    if os.path.isdir(pyc):
        for f in os.listdir(pyc):
            if f.startswith(name + "."):
                try:
                    os.unlink(os.path.join(pyc, f))
                except OSError:
                    pass


def entries() -> list:
    """``(name, bytes, last_used)`` for each cached module, oldest first."""
    d = cache_dir()
    sizes: dict = {}
    used: dict = {}
    for f in os.listdir(d):
        if f.startswith(PREFIXES) and f.endswith(".py"):
            name = f[:-3]
            try:  # another process may purge it meanwhile; a broken link has no size
                st = os.stat(os.path.join(d, f))
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            sizes[name] = sizes.get(name, 0) + st.st_size
            used[name] = st.st_mtime
    pyc = os.path.join(d, "__pycache__")
    if os.path.isdir(pyc):
        for f in os.listdir(pyc):
            name = f.split(".", 1)[0]
            if name in sizes:
                try:
                    sizes[name] += os.stat(os.path.join(pyc, f)).st_size
                except OSError:
                    pass
    return sorted(((n, sizes[n], used[n]) for n in sizes), key=lambda e: e[2])


def size_bytes() -> int:
    """Bytes the cache holds (modules and compiled code)."""
    return sum(e[1] for e in entries())


_STALE_SECONDS = 3600.0


def _sweep_temporaries(d: str) -> None:
    """Remove temporaries that a process killed while writing left behind."""
    import time

    now = time.time()
    for f in os.listdir(d):
        if f.startswith((".jt_", ".jk_")) and f.endswith(".tmp"):
            p = os.path.join(d, f)
            try:
                if now - os.stat(p).st_mtime > _STALE_SECONDS:
                    os.unlink(p)
            except OSError:
                pass


def _enforce_bound(keep=frozenset()) -> None:
    _sweep_temporaries(cache_dir())
    limit = max_bytes()
    items = entries()
    total = sum(e[1] for e in items)
    for name, size, _ in items:
        if total <= limit:
            break
        if name in keep:
            continue
        purge(name)
        total -= size


def clear() -> None:
    """Empty the on-disk cache (compiled code already loaded in this process stays)."""
    d = cache_dir()
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d, exist_ok=True)
