"""Shared test configuration: hypothesis profiles and the PostgreSQL switch.

Profiles: ``default`` for local runs, ``ci`` (chosen when ``CI`` is set) with a fixed budget so
the whole suite stays within minutes on a two-core machine. ``HYPOTHESIS_PROFILE`` overrides.
PostgreSQL tests read their server from ``HOOKPROOF_TEST_POSTGRES_DSN`` and skip, saying so,
where it is unset.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "default")
)

POSTGRES_DSN_VARIABLE = "HOOKPROOF_TEST_POSTGRES_DSN"


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """The DSN of a PostgreSQL server for tests, or a skip that says how to enable them."""
    dsn = os.environ.get(POSTGRES_DSN_VARIABLE)
    if not dsn:
        pytest.skip(
            f"PostgreSQL tests need {POSTGRES_DSN_VARIABLE}, e.g. "
            "postgresql://postgres@127.0.0.1:5432/test"
        )
    return dsn
