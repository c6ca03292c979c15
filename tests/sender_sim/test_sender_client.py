"""A sender's HTTP client keeps no cookies: an endpoint's ``Set-Cookie`` never comes back to it
(:mod:`sender_sim.sender_client`), from the simulator's default client included."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from receiver.server import running_server
from sender_sim import Simulator, SQLiteStore, VirtualClock, policy_named
from sender_sim.sender_client import NoCookies, sender_client
from tests.sender_sim.conftest import SECRET, T0


def _cookie_setting(seen: list[str | None]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("cookie"))
        return httpx.Response(200, headers={"set-cookie": "session=abc; Path=/"})

    return httpx.MockTransport(answer)


async def _twice(client: httpx.AsyncClient, **headers: str) -> None:
    async with client:
        for _ in range(2):
            await client.post("http://endpoint.test/webhooks", content=b"{}", headers=headers)


def test_a_set_cookie_is_never_sent_back() -> None:
    plain: list[str | None] = []
    asyncio.run(_twice(httpx.AsyncClient(transport=_cookie_setting(plain))))
    assert plain == [None, "session=abc"]  # what httpx does by default: the cookie comes back
    seen: list[str | None] = []
    asyncio.run(_twice(sender_client(transport=_cookie_setting(seen))))
    assert seen == [None, None]


def test_a_cookie_header_given_explicitly_is_sent_as_given() -> None:
    seen: list[str | None] = []
    asyncio.run(_twice(sender_client(transport=_cookie_setting(seen)), cookie="gateway=1"))
    assert seen == ["gateway=1", "gateway=1"]


def test_the_simulators_own_client_sends_no_cookie_over_real_http(tmp_path: Path) -> None:
    cookies: list[str | None] = []

    async def endpoint(request: Request) -> Response:
        cookies.append(request.headers.get("cookie"))
        response = JSONResponse({"ok": True})
        response.set_cookie("laravel_session", "s3ss10n")
        return response

    app = Starlette(routes=[Route("/webhooks", endpoint, methods=["POST"])])
    with running_server(app) as base:

        async def run() -> None:
            sim = Simulator(
                SQLiteStore(tmp_path / "sender.db"),
                clock=VirtualClock(T0),
                policy=policy_named("schedule"),
            )
            assert isinstance(sim.client.cookies.jar, NoCookies)
            try:
                sim.add_endpoint("app", f"{base}/webhooks", [SECRET])
                for n in range(3):
                    sim.publish(
                        endpoint_id="app",
                        deadline_at=T0 + timedelta(days=1),
                        event_type="note",
                        data={"n": n},
                    )
                await sim.run_until_settled()
            finally:
                await sim.aclose()

        asyncio.run(run())
    assert cookies == [None, None, None]
