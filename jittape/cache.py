"""The on-disk compile cache: generated kernel modules and Numba's compiled code.

Each compiled graph is one Python file ``jt_<hash>.py`` named by the hash of its
content (which holds the code generator's and the vector math's versions), with
Numba's ``.nbi``/``.nbc`` files beside it in ``__pycache__``. A new process that
generates the same source imports the same file and Numba loads its machine code
instead of compiling.

The directory is ``JITTAPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/jittape``, else
``~/.cache/jittape``. Files are written atomically (a temporary file, then a rename),
so two processes compiling the same graph both read a whole file. Its size is bounded
by ``JITTAPE_CACHE_MAX_MB`` (default 512): the least recently used modules go first.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile

__all__ = ["cache_dir", "clear", "size_bytes", "entries", "write_module", "purge"]

_SUBDIR = "kernels"


_warned_dirs: set = set()


def cache_dir() -> str:
    """Where generated modules live (created on first use). A directory that cannot be
    written is replaced by one under the system's temporary directory, with one warning."""
    root = os.environ.get("JITTAPE_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "jittape")
    path = os.path.join(root, _SUBDIR)
    try:
        os.makedirs(path, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(f"cannot write to {path}")
        return path
    except OSError as e:
        fallback = os.path.join(tempfile.gettempdir(), f"jittape-{os.getuid()}", _SUBDIR) \
            if hasattr(os, "getuid") else os.path.join(tempfile.gettempdir(), "jittape", _SUBDIR)
        if path not in _warned_dirs:
            _warned_dirs.add(path)
            import warnings

            warnings.warn(f"jittape: the kernel cache directory {root!r} is not usable ({e}); "
                          f"using {os.path.dirname(fallback)!r} instead (set JITTAPE_CACHE_DIR)",
                          UserWarning, stacklevel=2)
        os.makedirs(fallback, exist_ok=True)
        return fallback


def max_bytes() -> int:
    try:
        return int(float(os.environ.get("JITTAPE_CACHE_MAX_MB", "512")) * 2**20)
    except ValueError:
        return 512 * 2**20


def module_name(source: str) -> str:
    return "jt_" + hashlib.sha256(source.encode()).hexdigest()[:24]


def _intact(path: str, name: str) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return False
    return module_name(text) == name


def write_module(source: str) -> tuple[str, str, bool]:
    """Make sure ``source`` is on disk as its content-named module.

    Returns ``(name, path, existed)``. A file whose content does not hash to its name
    (truncated, corrupted, foreign) is rewritten, and Numba's entries for it dropped.
    """
    name = module_name(source)
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
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(source)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _enforce_bound(keep=name)
    return name, path, False


def purge(name: str) -> None:
    """Delete a module and Numba's compiled code for it."""
    d = cache_dir()
    for p in (os.path.join(d, name + ".py"),):
        try:
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
        if f.startswith("jt_") and f.endswith(".py"):
            name = f[:-3]
            st = os.stat(os.path.join(d, f))
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


def _enforce_bound(keep: str | None = None) -> None:
    limit = max_bytes()
    items = entries()
    total = sum(e[1] for e in items)
    for name, size, _ in items:
        if total <= limit:
            break
        if name == keep:
            continue
        purge(name)
        total -= size


def clear() -> None:
    """Empty the on-disk cache (compiled code already loaded in this process stays)."""
    d = cache_dir()
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d, exist_ok=True)
