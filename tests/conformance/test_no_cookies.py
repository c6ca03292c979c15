"""The runner sends what a webhook sender sends: no ``Cookie`` header, whatever ``Set-Cookie`` the
receiver answered (a framework that sets a session cookie on every answer must not be checked on
requests no real sender makes), over real HTTP and in process."""

from __future__ import annotations

import asyncio
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conformance.session import run_check
from receiver.app import ReceiverSettings, create_app
from receiver.server import running_server
from tests.conformance.broken_receivers import PROBE_TOKEN
from tests.conformance.support import SECRET, Collector, app_settings, run_in_process


class _SetsCookies:
    """Adds a ``Set-Cookie`` to every answer of ``app`` and records every ``Cookie`` it is sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.requests = 0
        self.cookies: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.requests += 1
        self.cookies += [v.decode() for k, v in scope["headers"] if k == b"cookie"]

        async def with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"set-cookie", b"session=s1; Path=/")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_cookie)


def _reference(tmp_path: Path) -> _SetsCookies:
    settings = ReceiverSettings(
        secrets=[SECRET], db=str(tmp_path / "inbox.sqlite"), probe_token=PROBE_TOKEN
    )
    return _SetsCookies(create_app(settings))


def test_check_over_http_never_sends_back_a_cookie(tmp_path: Path) -> None:
    app = _reference(tmp_path)
    collector = Collector()
    with running_server(app) as base:
        settings = app_settings(
            PROBE_TOKEN, url=f"{base}/webhooks", probe=f"{base}/_hookproof/events"
        )
        summary = asyncio.run(run_check(settings, [collector]))
    assert summary.ok, [(r.scenario.id, r.message) for r in collector.results if r.breaks_must]
    assert app.requests > 100  # the webhooks, their copies and the probe reads all answered
    assert app.cookies == []


def test_check_in_process_never_sends_back_a_cookie(tmp_path: Path) -> None:
    app = _reference(tmp_path)
    results = run_in_process(app, app_settings(PROBE_TOKEN))
    assert results
    assert not [sid for sid, r in results.items() if r.breaks_must]
    assert app.requests > 50
    assert app.cookies == []
