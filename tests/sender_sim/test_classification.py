"""Every classification row of both built-in profiles, through respx-scripted answers and errors,
and ``Retry-After`` (seconds, HTTP date, inside and past the deadline, invalid)."""

from __future__ import annotations

import asyncio
import random
import socket
import ssl
from datetime import timedelta
from email.utils import format_datetime

import httpx
import pytest
import respx

from sender_sim import (
    DeadLetterReason,
    FullJitter,
    OutcomeKind,
    Policy,
    Simulator,
    State,
    policy_named,
)
from sender_sim.wire import tls_failure
from tests.sender_sim.conftest import T0, URL, MakeSim

Script = httpx.Response | Exception
R = DeadLetterReason

STRICT_ROWS: list[tuple[Script, State, DeadLetterReason | None, str]] = [
    (httpx.Response(200), State.DELIVERED, None, "success"),
    (httpx.Response(202), State.DELIVERED, None, "success"),
    (httpx.Response(204), State.DELIVERED, None, "success"),
    (httpx.Response(401), State.DEAD_LETTER, R.AUTHENTICATION_POLICY, "authentication"),
    (httpx.Response(403), State.DEAD_LETTER, R.AUTHENTICATION_POLICY, "authentication"),
    (httpx.Response(400), State.DEAD_LETTER, R.PERMANENT_RESPONSE, "client_error"),
    (httpx.Response(404), State.DEAD_LETTER, R.PERMANENT_RESPONSE, "client_error"),
    (httpx.Response(413), State.DEAD_LETTER, R.PERMANENT_RESPONSE, "client_error"),
    (httpx.Response(422), State.DEAD_LETTER, R.PERMANENT_RESPONSE, "client_error"),
    (httpx.Response(409), State.DEAD_LETTER, R.PERMANENT_RESPONSE, "conflict"),
    (httpx.Response(410), State.DEAD_LETTER, R.PERMANENT_RESPONSE, "gone"),
    (httpx.Response(429), State.SCHEDULED, None, "rate_limited"),
    (httpx.Response(500), State.SCHEDULED, None, "server_error"),
    (httpx.Response(502), State.SCHEDULED, None, "server_error"),
    (httpx.Response(503, headers={"Retry-After": "1"}), State.SCHEDULED, None, "server_error"),
    (httpx.Response(301), State.DEAD_LETTER, R.PERMANENT_RESPONSE, "unexpected_status"),
]
SCHEDULE_ROWS: list[tuple[Script, State, DeadLetterReason | None, str]] = [
    (httpx.Response(200), State.DELIVERED, None, "success"),
    (httpx.Response(204), State.DELIVERED, None, "success"),
    (httpx.Response(410), State.DEAD_LETTER, R.PERMANENT_RESPONSE, "gone"),
    (httpx.Response(400), State.SCHEDULED, None, "client_error"),
    (httpx.Response(401), State.SCHEDULED, None, "client_error"),
    (httpx.Response(403), State.SCHEDULED, None, "client_error"),
    (httpx.Response(404), State.SCHEDULED, None, "client_error"),
    (httpx.Response(409), State.SCHEDULED, None, "client_error"),
    (httpx.Response(429), State.SCHEDULED, None, "rate_limited"),
    (httpx.Response(500), State.SCHEDULED, None, "server_error"),
    (httpx.Response(503), State.SCHEDULED, None, "server_error"),
    (httpx.Response(301), State.SCHEDULED, None, "unexpected_status"),
]


def _caused(error: httpx.RequestError, cause: BaseException) -> httpx.RequestError:
    """``error`` raised from ``cause``, as httpx raises its own types over the socket's."""
    error.__cause__ = cause
    return error


FAILURES: list[tuple[Exception, OutcomeKind]] = [
    (httpx.ReadTimeout("timed out"), OutcomeKind.TIMEOUT),
    (httpx.WriteTimeout("timed out"), OutcomeKind.TIMEOUT),
    (
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        OutcomeKind.NETWORK,
    ),
    (httpx.ReadError("connection reset by peer"), OutcomeKind.NETWORK),
]
"""Failures after the request may have left: ambiguous."""

NEVER_SENT: list[tuple[Exception, OutcomeKind]] = [
    (
        _caused(httpx.ConnectError("lookup failed"), socket.gaierror(-2, "Name not known")),
        OutcomeKind.DNS,
    ),
    (
        _caused(
            httpx.ConnectError("handshake failed"),
            ssl.SSLCertVerificationError(1, "certificate verify failed"),
        ),
        OutcomeKind.TLS,
    ),
    (httpx.ConnectError("[Errno 111] Connection refused"), OutcomeKind.CONNECT),
    # a timeout before the connection was made: the request never left either
    (httpx.ConnectTimeout("timed out"), OutcomeKind.CONNECT),
    (httpx.PoolTimeout("no connection free"), OutcomeKind.CONNECT),
    # the words are not the type: a message that mentions DNS or TLS is still a connect failure
    (httpx.ConnectError("[Errno -2] Name or service not known"), OutcomeKind.CONNECT),
    (httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] handshake"), OutcomeKind.CONNECT),
]
"""Failures before the request left: retried, never ambiguous."""


def _one_attempt(sim: Simulator, script: Script, deadline: timedelta = timedelta(hours=2)) -> str:
    async def run() -> None:
        with respx.mock(assert_all_called=True) as router:
            route = router.post(URL)
            if isinstance(script, Exception):
                route.mock(side_effect=script)
            else:
                route.mock(return_value=script)
            async with httpx.AsyncClient() as client:
                sim._client = client  # the injected client, created under respx
                await sim.run_due()

    did = sim.publish(endpoint_id="partner", deadline_at=T0 + deadline)
    asyncio.run(run())
    return did


def _check(
    sim: Simulator, did: str, state: State, reason: DeadLetterReason | None, label: str
) -> None:
    delivery = sim.delivery(did)
    assert (delivery.state, delivery.reason) == (state, reason)
    [attempt] = sim.attempts(did)
    assert attempt.classification == label
    assert delivery.last_outcome == label
    assert sim.metrics().attempts_by_classification == {label: 1}


@pytest.mark.parametrize(("script", "state", "reason", "label"), STRICT_ROWS)
def test_strict_profile(
    make_sim: MakeSim,
    script: Script,
    state: State,
    reason: DeadLetterReason | None,
    label: str,
) -> None:
    sim = make_sim(policy=policy_named("strict"))
    _check(sim, _one_attempt(sim, script), state, reason, label)


@pytest.mark.parametrize(("script", "state", "reason", "label"), SCHEDULE_ROWS)
def test_schedule_profile(
    make_sim: MakeSim,
    script: Script,
    state: State,
    reason: DeadLetterReason | None,
    label: str,
) -> None:
    sim = make_sim(policy=policy_named("schedule"))
    did = _one_attempt(sim, script)
    _check(sim, did, state, reason, label)
    if state is State.SCHEDULED:  # the schedule decides, not Retry-After: +1 minute
        assert sim.delivery(did).next_attempt_at == T0 + timedelta(minutes=1)


@pytest.mark.parametrize("profile", ["strict", "schedule"])
@pytest.mark.parametrize(
    ("error", "kind"), FAILURES, ids=[k.value + str(i) for i, (_, k) in enumerate(FAILURES)]
)
def test_transport_failures_are_ambiguous_and_retried(
    make_sim: MakeSim, profile: str, error: Exception, kind: OutcomeKind
) -> None:
    sim = make_sim(policy=policy_named(profile))
    did = _one_attempt(sim, error)
    delivery = sim.delivery(did)
    assert delivery.state is State.SCHEDULED
    [attempt] = sim.attempts(did)
    assert attempt.kind is kind
    assert attempt.status is None
    assert sim.ledger(did)[-1].details["ambiguous"] is True


@pytest.mark.parametrize("profile", ["strict", "schedule"])
@pytest.mark.parametrize(
    ("error", "kind"), NEVER_SENT, ids=[k.value + str(i) for i, (_, k) in enumerate(NEVER_SENT)]
)
def test_failures_before_sending_are_retried_but_not_ambiguous(
    make_sim: MakeSim, profile: str, error: Exception, kind: OutcomeKind
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error  # through httpx.MockTransport: the cause chain stays as raised

    sim = make_sim(handler, policy=policy_named(profile))
    did = sim.publish(endpoint_id="partner", deadline_at=T0 + timedelta(hours=2))
    asyncio.run(sim.run_due())
    assert sim.delivery(did).state is State.SCHEDULED
    [attempt] = sim.attempts(did)
    assert attempt.kind is kind
    assert sim.ledger(did)[-1].details["ambiguous"] is False
    story = sim.explain(did)
    assert "the request never reached the receiver" in story
    assert "may have committed" not in story


JITTER = Policy(backoff=FullJitter(base=timedelta(seconds=60), cap=timedelta(seconds=600)))


def _rate_limited(
    make_sim: MakeSim, retry_after: str, deadline: timedelta
) -> tuple[Simulator, str]:
    sim = make_sim(policy=JITTER, seed=3)
    script = httpx.Response(429, headers={"Retry-After": retry_after})
    return sim, _one_attempt(sim, script, deadline)


def test_retry_after_seconds_inside_the_deadline_is_honored(make_sim: MakeSim) -> None:
    sim, did = _rate_limited(make_sim, "120", timedelta(hours=1))
    delivery = sim.delivery(did)
    assert delivery.state is State.SCHEDULED
    assert delivery.next_attempt_at == T0 + timedelta(seconds=120)
    assert sim.attempts(did)[0].retry_after == "120"
    assert sim.ledger(did)[-1].details["retry_after_honored"] == "2m"


def test_retry_after_http_date_inside_the_deadline_is_honored(make_sim: MakeSim) -> None:
    when = T0 + timedelta(minutes=7)
    sim, did = _rate_limited(make_sim, format_datetime(when, usegmt=True), timedelta(hours=1))
    assert sim.delivery(did).next_attempt_at == when


@pytest.mark.parametrize("value", ["7200", "HTTP-DATE"])
def test_retry_after_past_the_deadline_dead_letters(make_sim: MakeSim, value: str) -> None:
    if value == "HTTP-DATE":
        value = format_datetime(T0 + timedelta(hours=2), usegmt=True)
    sim, did = _rate_limited(make_sim, value, timedelta(hours=1))
    delivery = sim.delivery(did)
    assert (delivery.state, delivery.reason) == (State.DEAD_LETTER, R.DEADLINE_EXHAUSTED)
    assert sim.ledger(did)[-1].cause == "next_attempt_past_deadline"


@pytest.mark.parametrize("value", ["soon", "-5", "1.5", "Mon, 99 Foo 2026 10:00:00 GMT", ""])
def test_an_invalid_retry_after_is_ignored(make_sim: MakeSim, value: str) -> None:
    sim, did = _rate_limited(make_sim, value, timedelta(hours=1))
    delivery = sim.delivery(did)
    jitter = random.Random(3).randint(0, 60_000_000)
    assert delivery.state is State.SCHEDULED
    assert delivery.next_attempt_at == T0 + timedelta(microseconds=jitter)
    if value:
        assert sim.ledger(did)[-1].details["retry_after_ignored"] == value


def _expired() -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, "certificate verify failed")
    error.verify_message = "certificate has expired"
    return error


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (_caused(httpx.ConnectError("handshake"), _expired()), "(certificate has expired)"),
        (
            _caused(httpx.ConnectError("handshake"), ssl.SSLError(1, "WRONG_VERSION_NUMBER")),
            "plain http://",
        ),
        (httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] handshake"), None),
        (_caused(httpx.ConnectError("lookup"), socket.gaierror(-2, "Name not known")), None),
    ],
)
def test_a_tls_failure_is_named_with_openssls_reason_and_what_to_do(
    error: Exception, words: str | None
) -> None:
    said = tls_failure(error)
    if words is None:
        assert said is None  # the type decides, never the message's words
        return
    assert said is not None
    assert words in said
    if "certificate" in words:
        assert "SSL_CERT_FILE" in said
