"""The middleware under every wire scheme: the event id comes from where the scheme puts it."""

from __future__ import annotations

import json

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from receiver.inbox.memory import MemoryInbox
from receiver.middleware import HookproofMiddleware, hookproof_delivery
from receiver.signing import Secret, Verifier, scheme_named
from tests.receiver.test_middleware_kit import NOW_S, post, run


@pytest.mark.parametrize("scheme", ["standard", "stripe", "github"])
def test_each_scheme_is_verified_and_deduplicated_by_its_event_id(scheme: str) -> None:
    secret = Secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    verifier = Verifier([secret], scheme=scheme_named(scheme), clock=lambda: float(NOW_S))
    inbox, seen = MemoryInbox(), []

    async def handler(request: Request) -> Response:
        seen.append(hookproof_delivery(request).event_id)
        return JSONResponse({"ok": True})

    app = Starlette(
        routes=[Route("/webhooks", handler, methods=["POST"])],
        middleware=[Middleware(HookproofMiddleware, verifier=verifier, inbox=inbox)],
    )
    body = json.dumps({"id": "evt_scheme", "type": "test"}).encode()
    headers = verifier.sign(body, event_id="evt_scheme", timestamp=NOW_S)
    assert run(post(app, body, headers)).status_code == 200
    duplicate = run(post(app, body, headers))
    assert duplicate.json() == {"event_id": "evt_scheme", "duplicate": True, "status": 200}
    assert seen == ["evt_scheme"]
    tampered = run(post(app, body.replace(b"test", b"tset"), headers))
    assert tampered.status_code in (400, 401)
