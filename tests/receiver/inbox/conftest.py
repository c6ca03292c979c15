"""Fixtures for the inbox tests: async tests run under anyio's asyncio backend."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
