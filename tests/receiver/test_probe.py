"""The probe: off by default, bearer-token guarded, and reporting the inbox's view of an event."""

from __future__ import annotations

import pytest

from receiver.inbox.memory import MemoryInbox
from receiver.middleware import HookproofMiddleware
from receiver.problems import PROBLEM_BASE
from tests.receiver.test_middleware_kit import (
    SECRET,
    Recorder,
    build_app,
    client,
    payload,
    post,
    run,
    signed,
    verifier,
)

TOKEN = "probe-token-123"


async def _get(app: object, path: str, token: str | None = TOKEN) -> tuple[int, dict[str, object]]:
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    async with client(app) as http:
        response = await http.get(path, headers=headers)
    assert TOKEN not in response.text
    return response.status_code, response.json()


@pytest.mark.parametrize("framework", ["starlette", "fastapi"])
def test_probe_reports_committed_events_with_effects_and_deliveries(framework: str) -> None:
    inbox = MemoryInbox()
    app = build_app(framework, inbox, Recorder(), probe_token=TOKEN)
    body = payload(200)
    for _ in range(3):
        assert run(post(app, body, signed(body, "evt_probe"))).status_code == 200
    status, document = run(_get(app, "/_hookproof/events/evt_probe"))
    assert status == 200
    assert document == {
        "event_id": "evt_probe",
        "status": "committed",
        "effects": 1,
        "deliveries": 3,
    }


def test_probe_reports_in_flight_and_unknown_events() -> None:
    inbox = MemoryInbox()
    app = build_app("starlette", inbox, Recorder(), probe_token=TOKEN)
    run(inbox.claim("evt_busy"))
    status, document = run(_get(app, "/_hookproof/events/evt_busy"))
    assert (status, document["status"], document["effects"]) == (200, "in_flight", 0)
    status, document = run(_get(app, "/_hookproof/events/evt_never"))
    assert status == 404
    assert document["type"] == PROBLEM_BASE + "event-not-found"


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token", f"Basic {TOKEN}", f"bearer{TOKEN}", f"Bearer {TOKEN}x", ""],
)
def test_probe_without_the_right_token_is_401(authorization: str | None) -> None:
    app = build_app("starlette", MemoryInbox(), Recorder(), probe_token=TOKEN)

    async def scenario() -> tuple[int, str, dict[str, object]]:
        headers = {} if authorization is None else {"authorization": authorization}
        async with client(app) as http:
            response = await http.get("/_hookproof/events/evt_x", headers=headers)
        return response.status_code, response.headers["content-type"], response.json()

    status, content_type, document = run(scenario())
    assert status == 401
    assert content_type == "application/problem+json"
    assert document["type"] == PROBLEM_BASE + "probe-unauthorized"
    assert TOKEN not in str(document)


def test_probe_is_off_without_a_token() -> None:
    app = build_app("starlette", MemoryInbox(), Recorder())

    async def scenario() -> int:
        async with client(app) as http:
            response = await http.get(
                "/_hookproof/events/evt_x", headers={"authorization": f"Bearer {TOKEN}"}
            )
        return response.status_code

    assert run(scenario()) == 404  # the app's own "no such route", not the probe


def test_probe_uses_the_effects_counter_and_a_custom_prefix() -> None:
    inbox = MemoryInbox()
    counted: list[str] = []

    async def effects(event_id: str) -> int:
        counted.append(event_id)
        return 7

    async def app(scope: object, receive: object, send: object) -> None:
        raise AssertionError("the probe never reaches the app")

    middleware = HookproofMiddleware(
        app,
        verifier=verifier(),
        inbox=inbox,
        probe_token=TOKEN,
        probe_prefix="/internal/probe/",
        effects_counter=effects,
    )
    run(inbox.claim("evt_c"))
    status, document = run(_get(middleware, "/internal/probe/evt_c"))
    assert (status, document["effects"], counted) == (200, 7, ["evt_c"])


def test_probe_answers_get_only() -> None:
    app = build_app("starlette", MemoryInbox(), Recorder(), probe_token=TOKEN)

    async def scenario() -> int:
        async with client(app) as http:
            response = await http.post(
                "/_hookproof/events/evt_x", headers={"authorization": f"Bearer {TOKEN}"}
            )
        return response.status_code

    assert run(scenario()) == 405


def test_secret_is_not_the_probe_token() -> None:
    app = build_app("starlette", MemoryInbox(), Recorder(), probe_token=TOKEN)
    status, _ = run(_get(app, "/_hookproof/events/evt_x", token=SECRET.value))
    assert status == 401
