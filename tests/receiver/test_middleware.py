"""Every row of DESIGN §2's answer table via httpx.ASGITransport, under Starlette and FastAPI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from receiver.exceptions import InboxUnavailable
from receiver.inbox.contract import Claim, Inbox, RecordState, TransactionalWork
from receiver.inbox.memory import MemoryInbox
from receiver.problems import PROBLEM_BASE, PROBLEM_CONTENT_TYPE
from tests.receiver.test_middleware_kit import (
    FRAMEWORKS,
    NOW_S,
    OTHER_SECRET,
    SECRET,
    Recorder,
    build_app,
    effects_of,
    payload,
    post,
    run,
    signed,
)

pytestmark = pytest.mark.parametrize("framework", FRAMEWORKS)


def _problem(response: Any, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM_CONTENT_TYPE
    document: dict[str, Any] = response.json()
    assert document["type"] == PROBLEM_BASE + slug
    assert document["status"] == status
    assert SECRET.value not in response.text
    return document


def test_new_event_is_answered_with_the_apps_2xx_once_committed(framework: str) -> None:
    inbox, recorder = MemoryInbox(), Recorder()
    app = build_app(framework, inbox, recorder)
    body = payload(202)
    response = run(post(app, body, signed(body, "evt_new")))
    assert response.status_code == 202
    assert response.json() == {"handled": "evt_new"}
    assert recorder.bodies == [body]  # the app got the exact bytes
    record = run(inbox.lookup("evt_new"))
    assert record is not None
    assert record.state is RecordState.COMMITTED
    assert record.status == 202
    assert effects_of(inbox) == ["evt_new"]


def test_the_2xx_leaves_only_after_the_commit(framework: str) -> None:
    inbox, recorder = MemoryInbox(), Recorder()
    app = build_app(framework, inbox, recorder)
    body = payload(200)
    headers = signed(body, "evt_order")
    states: list[RecordState | None] = []

    async def scenario() -> None:
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                record = await inbox.lookup("evt_order")
                states.append(None if record is None else record.state)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/webhooks",
            "raw_path": b"/webhooks",
            "query_string": b"",
            "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }
        await app(scope, receive, send)

    run(scenario())
    assert states == [RecordState.COMMITTED]


def test_duplicate_of_committed_event_gets_stored_status_and_no_second_call(
    framework: str,
) -> None:
    inbox, recorder = MemoryInbox(), Recorder()
    app = build_app(framework, inbox, recorder)
    body = payload(201)
    first = run(post(app, body, signed(body, "evt_dup")))
    again = run(post(app, body, signed(body, "evt_dup", timestamp=NOW_S - 5)))
    assert first.status_code == 201
    assert again.status_code == 201
    assert again.json() == {"event_id": "evt_dup", "duplicate": True, "status": 201}
    assert recorder.calls == ["evt_dup"]
    assert effects_of(inbox) == ["evt_dup"]
    record = run(inbox.lookup("evt_dup"))
    assert record is not None
    assert (record.deliveries, record.effects) == (2, 1)


def test_duplicate_in_flight_gets_503_with_retry_after_from_the_claim(framework: str) -> None:
    inbox, recorder = MemoryInbox(lease=timedelta(seconds=17)), Recorder()
    app = build_app(framework, inbox, recorder)
    body = payload(200)
    run(inbox.claim("evt_busy"))  # another copy is being handled
    response = run(post(app, body, signed(body, "evt_busy")))
    _problem(response, 503, "delivery-in-flight")
    assert 1 <= int(response.headers["retry-after"]) <= 17
    assert recorder.calls == []


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_missing_signature_header_is_400(framework: str, missing: str) -> None:
    app = build_app(framework, MemoryInbox(), Recorder())
    body = payload()
    headers = signed(body, "evt_missing")
    del headers[missing]
    _problem(run(post(app, body, headers)), 400, "missing-header")


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("webhook-timestamp", "12.5"),
        ("webhook-timestamp", "-1"),
        ("webhook-signature", "garbage"),
        ("webhook-id", "has space"),
    ],
)
def test_malformed_signature_header_is_400(framework: str, header: str, value: str) -> None:
    app = build_app(framework, MemoryInbox(), Recorder())
    body = payload()
    headers = signed(body, "evt_malformed") | {header: value}
    _problem(run(post(app, body, headers)), 400, "malformed-header")


def test_tampered_body_is_401_without_the_expected_signature(framework: str) -> None:
    recorder = Recorder()
    app = build_app(framework, MemoryInbox(), recorder)
    body = payload()
    headers = signed(body, "evt_tampered")
    response = run(post(app, body.replace(b"test", b"tost"), headers))
    document = _problem(response, 401, "signature-mismatch")
    expected = signed(body.replace(b"test", b"tost"), "evt_tampered")["webhook-signature"]
    assert expected.split(",", 1)[1] not in response.text
    assert "secret" not in document["detail"].lower() or SECRET.value not in document["detail"]
    assert recorder.calls == []


def test_unknown_secret_is_401(framework: str) -> None:
    app = build_app(framework, MemoryInbox(), Recorder())
    body = payload()
    response = run(post(app, body, signed(body, "evt_other", secret=OTHER_SECRET)))
    _problem(response, 401, "signature-mismatch")
    assert OTHER_SECRET.value not in response.text


@pytest.mark.parametrize("offset", [-301, 301, -100_000])
def test_timestamp_outside_tolerance_is_401(framework: str, offset: int) -> None:
    app = build_app(framework, MemoryInbox(), Recorder())
    body = payload()
    response = run(post(app, body, signed(body, "evt_skew", timestamp=NOW_S + offset)))
    _problem(response, 401, "timestamp-outside-tolerance")


@pytest.mark.parametrize("offset", [-300, 300])
def test_timestamp_at_the_tolerance_edge_is_accepted(framework: str, offset: int) -> None:
    app = build_app(framework, MemoryInbox(), Recorder())
    body = payload()
    assert run(post(app, body, signed(body, "evt_edge", timestamp=NOW_S + offset))).is_success


def test_declared_body_over_the_cap_is_413(framework: str) -> None:
    recorder = Recorder()
    app = build_app(framework, MemoryInbox(), recorder, max_body=64)
    body = payload(padding="x" * 200)
    _problem(run(post(app, body, signed(body, "evt_big"))), 413, "body-too-large")
    assert recorder.calls == []


def test_body_exactly_at_the_cap_is_accepted(framework: str) -> None:
    body = payload()
    app = build_app(framework, MemoryInbox(), Recorder(), max_body=len(body))
    assert run(post(app, body, signed(body, "evt_cap"))).status_code == 200


@pytest.mark.parametrize("failure", ["raise", 500, 503, 408, 429])
def test_transient_handler_failure_releases_the_claim_and_a_retry_succeeds(
    framework: str, failure: int | str
) -> None:
    inbox, recorder = MemoryInbox(), Recorder()
    app = build_app(framework, inbox, recorder)
    failing = payload(failure)
    response = run(post(app, failing, signed(failing, "evt_flaky")))
    if failure == "raise":
        document = _problem(response, 503, "handler-failed")
        assert "Traceback" not in response.text
        assert "the handler broke" not in document["detail"]
        assert "retry-after" in response.headers
    else:
        assert response.status_code == failure
    record = run(inbox.lookup("evt_flaky"))
    assert record is not None
    assert record.state is RecordState.RELEASED
    assert effects_of(inbox) == []
    # The sender's retry (same event id) is handled and committed once.
    healthy = payload(200)
    assert run(post(app, healthy, signed(healthy, "evt_flaky"))).status_code == 200
    assert effects_of(inbox) == ["evt_flaky"]
    assert recorder.calls == ["evt_flaky", "evt_flaky"]


def test_410_is_stored_and_repeated_for_later_duplicates(framework: str) -> None:
    inbox, recorder = MemoryInbox(), Recorder()
    app = build_app(framework, inbox, recorder)
    body = payload(410, effect=False)
    assert run(post(app, body, signed(body, "evt_gone"))).status_code == 410
    again = run(post(app, body, signed(body, "evt_gone")))
    document = _problem(again, 410, "already-answered")
    assert document["duplicate"] is True
    assert recorder.calls == ["evt_gone"]


def test_failing_transactional_work_keeps_nothing_and_answers_503(framework: str) -> None:
    inbox, recorder = MemoryInbox(), Recorder()
    app = build_app(framework, inbox, recorder)
    body = payload(200, failing_work=True)
    _problem(run(post(app, body, signed(body, "evt_work"))), 503, "handler-failed")
    assert inbox.store == {}
    record = run(inbox.lookup("evt_work"))
    assert record is not None
    assert record.state is RecordState.RELEASED


class _BrokenInbox(MemoryInbox):
    def __init__(self, *, claim_fails: bool = False, commit_fails: bool = False) -> None:
        super().__init__()
        self.claim_fails, self.commit_fails = claim_fails, commit_fails

    async def claim(self, event_id: str) -> Claim:
        if self.claim_fails:
            raise InboxUnavailable("the store is down")
        return await super().claim(event_id)

    async def commit(
        self, event_id: str, token: int, status: int, work: Sequence[TransactionalWork] = ()
    ) -> bool:
        if self.commit_fails:
            raise InboxUnavailable("the store went away")
        return await super().commit(event_id, token, status, work)


def _no_inbox() -> Inbox:
    raise InboxUnavailable("not open yet")


@pytest.mark.parametrize(
    "inbox", [_BrokenInbox(claim_fails=True), _BrokenInbox(commit_fails=True), _no_inbox]
)
def test_unavailable_inbox_is_503_with_retry_after_never_2xx(framework: str, inbox: Any) -> None:
    app = build_app(framework, inbox, Recorder())
    body = payload(200)
    response = run(post(app, body, signed(body, "evt_down")))
    _problem(response, 503, "inbox-unavailable")
    assert int(response.headers["retry-after"]) >= 1


def test_lost_claim_is_503_and_the_retry_gets_the_winners_answer(framework: str) -> None:
    inbox, recorder = MemoryInbox(lease=timedelta(0)), Recorder()
    app = build_app(framework, inbox, recorder)
    body = payload(200)

    async def scenario() -> tuple[int, int]:
        # A zero lease: a second copy takes the first one's claim over before it commits.
        original_commit = inbox.commit

        async def commit_after_takeover(
            event_id: str, token: int, status: int, work: Sequence[TransactionalWork] = ()
        ) -> bool:
            inbox.commit = original_commit  # type: ignore[method-assign]
            second = await post(app, body, signed(body, event_id))
            assert second.status_code == 200
            return await original_commit(event_id, token, status, work)

        inbox.commit = commit_after_takeover  # type: ignore[method-assign]
        first = await post(app, body, signed(body, "evt_race"))
        third = await post(app, body, signed(body, "evt_race"))
        return first.status_code, third.status_code

    assert run(scenario()) == (503, 200)
    assert effects_of(inbox) == ["evt_race"]


def test_unguarded_paths_pass_straight_through(framework: str) -> None:
    recorder = Recorder()
    app = build_app(framework, MemoryInbox(), recorder)

    async def scenario() -> Any:
        from tests.receiver.test_middleware_kit import client

        async with client(app) as http:
            return await http.get("/plain")

    response = run(scenario())
    assert response.status_code == 200
    assert json.loads(response.text) == {"plain": True}
