"""Shared by every benchmark: the benchmarks folder on ``sys.path`` (its workload
modules) and the machine's ceilings, measured once per run (``bench_util.record``
labels each benchmark for ``compare.py`` and ``report.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from floors import measure_ceilings  # noqa: E402


@pytest.fixture(scope="session")
def ceilings():
    return measure_ceilings()
