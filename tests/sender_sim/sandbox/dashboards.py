"""The dashboard under test: a sandbox engine over an in-memory store, one endpoint pointed at a
scripted receiver, and the dashboard app built on it (shared by the page and the API tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import httpx
from starlette.applications import Starlette

from sender_sim import Simulator, SQLiteStore, VirtualClock
from sender_sim.sandbox.engine import SandboxEngine
from sender_sim.sandbox.web import create_dashboard
from tests.sender_sim.test_cli_support import SECRET, ScriptedReceiver

__all__ = ["sandbox_dashboard"]


@asynccontextmanager
async def sandbox_dashboard(
    receiver: ScriptedReceiver, url: str | None = None
) -> AsyncIterator[tuple[SandboxEngine, Starlette]]:
    """The engine (endpoint ``app`` at ``receiver``, or at ``url`` when given: the receiver's
    address with more in it; a virtual clock) and its dashboard app."""
    async with httpx.AsyncClient() as client:
        sim = Simulator(
            SQLiteStore(":memory:"),
            clock=VirtualClock(datetime(2026, 8, 13, 9, tzinfo=UTC)),
            client=client,
        )
        sim.add_endpoint("app", url or receiver.url, [SECRET])
        engine = SandboxEngine(sim, endpoint_id="app")
        try:
            yield engine, create_dashboard(engine)
        finally:
            sim.store.close()
