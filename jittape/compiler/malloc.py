"""Keep freed array memory for reuse, as a framework allocator does.

An eager step allocates and frees many large temporaries. With glibc's defaults a
large block comes from ``mmap`` and goes back to the kernel when freed, so the next
step faults every page in again (with numpy's huge-page advice, sometimes with a
compaction stall): on this project's machine, once numba or scipy had been imported,
numpy's own elementwise ops on 1M float32 ran 4x slower than with the memory kept
(``exp`` 2.0 ms instead of 0.5). TensorFlow and PyTorch keep freed memory in their own
allocators; jittape asks glibc to do the same: blocks up to 256 MB come from the heap,
and up to 512 MB of free heap is kept rather than returned.

``JITTAPE_MALLOC=0`` leaves malloc alone. Only glibc (Linux) is touched.
"""

from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 256 << 20
TRIM_THRESHOLD = 512 << 20

applied: list = []


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds (once); True when applied."""
    if applied:
        return applied[0]
    ok = False
    if os.environ.get("JITTAPE_MALLOC", "1") not in ("0", "false", "") and \
            sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6")
            if not hasattr(libc, "gnu_get_libc_version"):  # not glibc (musl)
                raise OSError("not glibc")
            ok = bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
                bool(libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
        except (OSError, AttributeError):
            ok = False
    applied.append(ok)
    return ok
