"""The runner's HTTP client does no import-system work per request.

httpcore asks for ``sniffio`` on every lock, event and cancellation shield it sets up; when that
import fails (sniffio absent: anyio 4.11 stopped depending on it) Python does not cache the
failure, so every request walked ``sys.path`` several times (about a fifth of a catalogue run).
hookproof depends on sniffio for this reason; this test fails if a request ever reaches the import
system again.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from receiver.server import running_server


class _CountingFinder:
    """A meta-path finder that only counts how often the import system had to look."""

    def __init__(self) -> None:
        self.lookups: list[str] = []

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        self.lookups.append(name)
        return None


async def _ok(request: Request) -> Response:
    return PlainTextResponse("ok")


def test_requests_through_the_runners_client_look_up_no_module() -> None:
    app = Starlette(routes=[Route("/", _ok, methods=["GET", "POST"])])

    async def exchange(base: str) -> list[str]:
        async with httpx.AsyncClient() as client:
            await client.get(base)  # warm: whatever the first request imports, it imports once
            finder = _CountingFinder()
            sys.meta_path.insert(0, finder)
            try:
                for _ in range(20):
                    response = await client.post(base, content=b"{}")
                    assert response.status_code == 200
            finally:
                sys.meta_path.remove(finder)
            return finder.lookups

    with running_server(app) as base:
        lookups = asyncio.run(exchange(base + "/"))
    assert lookups == [], f"requests reached the import system for {sorted(set(lookups))}"
