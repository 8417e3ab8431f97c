"""Files written whole or not at all: the base helper of the kernel cache, checkpoints,
saved models and ``.keras`` archives (no other jittape import)."""

from __future__ import annotations

import os
import tempfile

__all__ = ["write_atomic"]


def write_atomic(path: str, data, durable: bool = False) -> None:
    """Write ``data`` (text or bytes) to ``path`` atomically: a temporary file beside it
    (``.<name>.<random>.tmp``), then a rename, so a reader sees all of it or none.
    ``durable``: flush the file to the disk before the rename (checkpoints: a power cut
    after the rename still finds the data)."""
    d, base = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{base.rsplit('.', 1)[0]}.", suffix=".tmp", dir=d)
    try:
        with (os.fdopen(fd, "wb") if isinstance(data, bytes)
              else os.fdopen(fd, "w", encoding="utf-8")) as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
