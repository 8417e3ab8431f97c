"""Shared test settings: every backward graph is verified, hypothesis is derandomized on CI."""

import os

os.environ.setdefault("JITTAPE_VERIFY", "1")

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "ci", derandomize=True, deadline=None, max_examples=60,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev", deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
