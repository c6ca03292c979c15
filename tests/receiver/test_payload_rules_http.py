"""Over real HTTP: a signed body that is not I-JSON is a 400 problem (never a poison message),
a handler failing again and again on one event is counted on the probe and logged one line per
failure, and failed releases during an outage log one line each, not a traceback."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from receiver.exceptions import InboxUnavailable
from receiver.inbox.memory import MemoryInbox
from receiver.middleware import HookproofMiddleware, hookproof_delivery
from receiver.server import running_server
from receiver.signing import Secret, Verifier
from tests.receiver.http_kit import SECRET, TOKEN, probe, problem_slug, serving, signed


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    db: Path = tmp_path_factory.mktemp("payload") / "inbox.sqlite"
    with serving(str(db)) as client:
        yield client


NOT_I_JSON = {
    "lone-low-surrogate": rb'{"type":"t","data":{"renewal_id":"\udfff"}}',
    "lone-high-surrogate": rb'{"type":"t","data":{"renewal_id":"\uD800x"}}',
    "surrogate-in-a-name": rb'{"type":"t","\udfff":1}',
    "nan": b'{"type":"t","data":{"amount":NaN}}',
    "infinity": b'{"type":"t","data":{"amount":Infinity}}',
    "minus-infinity": b'{"type":"t","data":{"amount":-Infinity}}',
    "overflow": b'{"type":"t","data":{"amount":1e400}}',
    "duplicate-key": b'{"type":"t","data":{"renewal_id":"a","renewal_id":"b"}}',
    "duplicate-top-level-key": b'{"type":"t","type":"u"}',
}


@pytest.mark.parametrize("case", sorted(NOT_I_JSON))
def test_a_signed_body_that_is_not_i_json_is_a_400_problem_and_not_claimed(
    http: httpx.Client, case: str
) -> None:
    body, event_id = NOT_I_JSON[case], f"evt_ijson_{case}"
    for _ in range(2):  # and it stays a 400: no 503 the sender would retry until its deadline
        response = http.post("/webhooks", content=body, headers=signed(body, event_id))
        assert response.status_code == 400, response.text
        assert problem_slug(response) == "payload-not-i-json"
    assert probe(http, event_id).status_code == 404


@pytest.mark.parametrize(
    ("body", "slug"),
    [
        (b"[" * 100_000, "invalid-payload"),  # too deep for the parser: still a 400
        (b'{"n":' + b"9" * 5000 + b"}", "invalid-payload"),  # an integer too long to convert
        (b"\xef\xbb\xbf{}", "invalid-payload"),  # a byte order mark is not JSON text
    ],
)
def test_bodies_the_parser_cannot_take_are_400_problems(
    http: httpx.Client, body: bytes, slug: str
) -> None:
    response = http.post("/webhooks", content=body, headers=signed(body, "evt_unparsable"))
    assert response.status_code == 400, response.text
    assert problem_slug(response) == slug


def test_a_valid_surrogate_pair_and_unusual_escapes_are_accepted(http: httpx.Client) -> None:
    body = rb'{"type":"t","data":{"renewal_id":"\ud83d\ude00 \u00e9 \/"}}'
    response = http.post("/webhooks", content=body, headers=signed(body, "evt_pair"))
    assert response.status_code == 200, response.text
    assert probe(http, "evt_pair").json()["effects"] == 1


class _FlakyInbox(MemoryInbox):
    """A MemoryInbox whose releases fail as during a database outage."""

    async def release(self, event_id: str, token: int) -> bool:
        raise InboxUnavailable("the database is unreachable")


def _failing_app(inbox: MemoryInbox) -> Starlette:
    async def handler(request: Request) -> Response:
        hookproof_delivery(request)
        raise RuntimeError("cannot store this reminder")

    guard = Middleware(
        HookproofMiddleware,
        verifier=Verifier([Secret(SECRET)]),
        inbox=inbox,
        probe_token=TOKEN,
    )
    return Starlette(routes=[Route("/webhooks", handler, methods=["POST"])], middleware=[guard])


def _hookproof_records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "hookproof.receiver" and r.levelno == level]


def test_a_repeated_handler_failure_is_counted_on_the_probe_and_logged_once_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hookproof.receiver")
    body = json.dumps({"type": "renewal.reminder_due"}).encode()
    with (
        running_server(_failing_app(MemoryInbox())) as base,
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        for _ in range(3):
            response = http.post("/webhooks", content=body, headers=signed(body, "evt_poison"))
            assert response.status_code == 503
            assert "Traceback" not in response.text
        document = probe(http, "evt_poison").json()
    assert document["handler_failures"] == 3
    errors = _hookproof_records(caplog, logging.ERROR)
    assert [r.getMessage() for r in errors] == [
        "event evt_poison: the webhook handler raised RuntimeError: cannot store this "
        f"reminder (failure {n} of this event)"
        for n in (1, 2, 3)
    ]
    assert all(r.exc_info is None and "\n" not in r.getMessage() for r in errors)


def test_failed_releases_during_an_outage_log_one_line_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hookproof.receiver")
    body = json.dumps({"type": "renewal.reminder_due"}).encode()
    with (
        running_server(_failing_app(_FlakyInbox())) as base,
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        for number in range(2):
            event_id = f"evt_outage_{number}"
            response = http.post("/webhooks", content=body, headers=signed(body, event_id))
            assert response.status_code == 503
    warnings = _hookproof_records(caplog, logging.WARNING)
    releases = [r for r in warnings if "could not release" in r.getMessage()]
    assert len(releases) == 2
    assert all(r.exc_info is None and "\n" not in r.getMessage() for r in releases)
    assert all("database is unreachable" in r.getMessage() for r in releases)
