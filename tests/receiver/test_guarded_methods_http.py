"""Over real HTTP: only deliveries are claimed, the receiver's own answers are problems, the
guarded path matches below a mount prefix, and ambiguous signature headers are refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from receiver.inbox.memory import MemoryInbox
from receiver.middleware import HookproofMiddleware, hookproof_delivery
from receiver.server import running_server
from receiver.signing import Secret, Verifier
from tests.receiver.http_kit import TOKEN, probe, problem_slug, serving, signed

BODY = json.dumps({"type": "renewal.reminder_due", "data": {"renewal_id": "ren_1"}}).encode()


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    db: Path = tmp_path_factory.mktemp("methods") / "inbox.sqlite"
    with serving(str(db)) as client:
        yield client


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])
def test_a_signed_event_sent_with_another_method_is_not_claimed(
    http: httpx.Client, method: str
) -> None:
    event_id = f"evt_method_{method.lower()}"
    response = http.request(method, "/webhooks", content=BODY, headers=signed(BODY, event_id))
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    if method != "HEAD":
        assert problem_slug(response) == "method-not-allowed"
    assert probe(http, event_id).status_code == 404  # the inbox was never touched
    # The genuine delivery that follows is handled, not answered 405 forever.
    delivered = http.post("/webhooks", content=BODY, headers=signed(BODY, event_id))
    assert delivered.status_code == 200, delivered.text
    assert probe(http, event_id).json()["effects"] == 1


@pytest.mark.parametrize(
    ("method", "path", "status", "slug"),
    [
        ("POST", "/webhooks/", 404, "not-found"),
        ("GET", "/nothing-here", 404, "not-found"),
        ("POST", "/healthz", 405, "method-not-allowed"),
        ("GET", "/_hookproof/events", 404, "event-id-required"),
        ("GET", "/_hookproof/events/", 404, "event-id-required"),
        ("POST", "/_hookproof/events/evt_x", 405, "method-not-allowed"),
    ],
)
def test_the_receivers_own_answers_are_problem_documents(
    http: httpx.Client, method: str, path: str, status: int, slug: str
) -> None:
    headers = {"authorization": f"Bearer {TOKEN}", **signed(BODY, "evt_own")}
    response = http.request(method, path, content=BODY, headers=headers)
    assert response.status_code == status, response.text
    assert problem_slug(response) == slug


def test_two_different_webhook_id_fields_are_a_400(http: httpx.Client) -> None:
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        headers = list(signed(BODY, "evt_ambiguous").items())
        other = dict(signed(BODY, "evt_other"))
        other["webhook-timestamp"] = str(int(other["webhook-timestamp"]) - 1)
        headers.append((name, other[name]))
        response = http.post("/webhooks", content=BODY, headers=headers)
        assert response.status_code == 400, (name, response.text)
        assert problem_slug(response) == "ambiguous-header"
    assert probe(http, "evt_ambiguous").status_code == 404
    assert probe(http, "evt_other").status_code == 404
    # The same field repeated with the same value is not ambiguous.
    repeated = [*signed(BODY, "evt_repeated").items(), ("webhook-id", "evt_repeated")]
    assert http.post("/webhooks", content=BODY, headers=repeated).status_code == 200


def _app_with_routing_gaps(inbox: MemoryInbox) -> Starlette:
    """The middleware guards three paths; the app routes one for POST, one for PUT only, and
    not the third at all (so those answers come from routing, not from a handler)."""

    async def handler(request: Request) -> Response:
        return JSONResponse({"handled": hookproof_delivery(request).event_id})

    guard = Middleware(
        HookproofMiddleware,
        verifier=Verifier([Secret(SECRET_VALUE)]),
        inbox=inbox,
        paths=("/webhooks", "/put-only", "/unrouted"),
    )
    return Starlette(
        routes=[
            Route("/webhooks", handler, methods=["POST"]),
            Route("/put-only", handler, methods=["PUT"]),
        ],
        middleware=[guard],
    )


SECRET_VALUE = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.mark.parametrize(("path", "status"), [("/unrouted", 404), ("/put-only", 405)])
def test_a_routing_answer_is_never_committed(path: str, status: int) -> None:
    inbox = MemoryInbox()
    with running_server(_app_with_routing_gaps(inbox)) as base, httpx.Client(base_url=base) as c:
        response = c.post(path, content=BODY, headers=signed(BODY, "evt_routed"))
        assert response.status_code == status
        again = c.post(path, content=BODY, headers=signed(BODY, "evt_routed"))
        assert again.status_code == status  # answered by routing again, not as a stored answer
        assert "duplicate" not in again.text
        # The same event at the routed path is then handled and committed.
        handled = c.post("/webhooks", content=BODY, headers=signed(BODY, "evt_routed"))
        assert handled.status_code == 200, handled.text
        assert handled.json() == {"handled": "evt_routed"}


def test_the_guarded_path_matches_below_a_mount_prefix() -> None:
    inbox = MemoryInbox()
    outer = Starlette(routes=[Mount("/api", app=_app_with_routing_gaps(inbox))])
    with running_server(outer) as base, httpx.Client(base_url=base) as client:
        response = client.post("/api/webhooks", content=BODY, headers=signed(BODY, "evt_mount"))
        assert response.status_code == 200, response.text
        unsigned = client.post("/api/webhooks", content=BODY)
        assert unsigned.status_code == 400
        assert problem_slug(unsigned) == "missing-header"


def test_the_guarded_path_matches_under_the_servers_root_path(tmp_path: Path) -> None:
    from receiver.app import create_app
    from tests.receiver.http_kit import settings

    app = create_app(settings(str(tmp_path / "inbox.sqlite")))
    with (
        running_server(app, root_path="/hooks") as base,
        httpx.Client(base_url=base, timeout=10) as client,
    ):
        response = client.post("/webhooks", content=BODY, headers=signed(BODY, "evt_root"))
        assert response.status_code == 200, response.text
        assert probe(client, "evt_root").json()["effects"] == 1
