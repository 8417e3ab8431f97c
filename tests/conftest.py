"""Shared test settings: every backward graph is verified, hypothesis is derandomized on CI."""

import os

os.environ.setdefault("JITTAPE_VERIFY", "1")
# The semantics suite runs on the reference backend (every distinct graph would cost a
# Numba compile on "cpu"); tests/test_cpu_*.py check cpu against it, and
# `make test-cpu` runs everything on cpu.
os.environ.setdefault("JITTAPE_BACKEND", "interpret")
# jt.function compiles on the first call in the tests (counting compiles is then exact);
# tests/test_function.py checks the background compile on its own
os.environ.setdefault("JITTAPE_BACKGROUND_COMPILE", "0")
# compiled kernels persist between runs of the suite (CI starts cold)
os.environ.setdefault(
    "JITTAPE_CACHE_DIR",
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".jittape_cache"),
)

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "ci", derandomize=True, deadline=None, max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev", deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
