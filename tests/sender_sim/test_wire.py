"""What goes on the wire: envelopes validated before any send, every scheme of
``receiver.signing``, fresh timestamps from the wire clock, metadata headers, response samples
without secrets, and a real connection error over loopback."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from receiver.signing import scheme_named
from sender_sim import (
    ConfigurationError,
    ConflictError,
    DeadLetterReason,
    InvalidTime,
    NotFound,
    OutcomeKind,
    SkewedClock,
    State,
    VirtualClock,
)
from sender_sim.wire import SAMPLE_LIMIT, failure_kind, redact
from tests.sender_sim.conftest import SECRET, T0, URL, MakeSim, Receiver

DEADLINE = T0 + timedelta(hours=1)


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"body": b"not json"}, "not JSON"),
        ({"body": b"[1, 2]"}, "JSON object"),
        ({"body": b"\xff\xfe"}, "UTF-8"),
        ({"event_id": "evt with space"}, "event id"),
        ({"event_id": ""}, "event id"),
        ({"event_type": ""}, "event type"),
        ({"body": b'{"pad": "' + b"x" * 300_000 + b'"}'}, "over the limit"),
    ],
)
def test_an_invalid_envelope_dead_letters_before_any_send(
    make_sim: MakeSim, kwargs: dict[str, object], problem: str
) -> None:
    receiver = Receiver()
    sim = make_sim(receiver)
    did = sim.publish(endpoint_id="partner", deadline_at=DEADLINE, **kwargs)  # type: ignore[arg-type]
    delivery = sim.delivery(did)
    assert (delivery.state, delivery.reason) == (
        State.DEAD_LETTER,
        DeadLetterReason.INVALID_ENVELOPE,
    )
    assert problem in sim.ledger(did)[0].details["problem"]
    asyncio.run(sim.run_until_settled())
    assert receiver.requests == []
    assert sim.attempts(did) == []


@pytest.mark.parametrize("scheme", ["standard", "stripe", "github"])
def test_every_scheme_verifies_at_the_receiver(make_sim: MakeSim, scheme: str) -> None:
    secret = SECRET if scheme == "standard" else "plain-shared-secret"
    receiver = Receiver(503, 200, secrets=(secret,), scheme=scheme)
    sim = make_sim(receiver)
    sim.add_endpoint("other", URL, [secret], scheme=scheme)
    did = sim.publish(
        endpoint_id="other", deadline_at=DEADLINE, event_id="evt_1", data={"renewal_id": "r"}
    )
    asyncio.run(sim.run_until_settled(delivery_ids=[did]))
    assert receiver.verified == [True, True]
    assert sim.delivery(did).state is State.DELIVERED
    bodies = {r.content for r in receiver.requests}
    assert len(bodies) == 1
    document = json.loads(bodies.pop())
    data = document["data"]["object"] if scheme == "stripe" else document["data"]  # an Event
    assert data == {"renewal_id": "r"}
    assert ("id" in document) is (scheme == "stripe")
    attempts = sim.attempts(did)
    for number, request in enumerate(receiver.requests, start=1):
        assert request.headers["hookproof-delivery-id"] == did
        assert request.headers["hookproof-attempt"] == str(number)
        # the deadline in the receiver's (real) time, as far from now as from the simulation's
        shown = datetime.fromisoformat(request.headers["hookproof-deadline"]) - datetime.now(UTC)
        assert abs(shown - (DEADLINE - attempts[number - 1].started_at)) < timedelta(seconds=5)
        platform = dict(scheme_named(scheme).delivery_headers)
        for name, value in platform.items():  # what receivers built on its libraries rely on
            assert request.headers[name] == value


def test_every_attempt_is_signed_afresh_by_the_wire_clock(make_sim: MakeSim) -> None:
    wire = VirtualClock(datetime(2030, 1, 1, tzinfo=UTC))
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        wire.advance(timedelta(seconds=7))
        return httpx.Response(500 if len(requests) < 3 else 200)

    sim = make_sim(handler, wire_clock=SkewedClock(wire, timedelta(seconds=-3)))
    did = sim.publish(endpoint_id="partner", deadline_at=DEADLINE)
    asyncio.run(sim.run_until_settled(delivery_ids=[did]))
    start = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp()) - 3
    assert [int(r.headers["webhook-timestamp"]) for r in requests] == [start, start + 7, start + 14]
    # the deadline in the wire's time: as far from the wire's now as from the simulation's
    wire_now = [datetime.fromtimestamp(start + 7 * n, UTC) for n in range(3)]
    left = [DEADLINE - attempt.started_at for attempt in sim.attempts(did)]
    shown = [datetime.fromisoformat(r.headers["hookproof-deadline"]) for r in requests]
    assert shown == [now + time_left for now, time_left in zip(wire_now, left, strict=True)]
    assert len({r.headers["webhook-signature"] for r in requests}) == 3
    assert {r.headers["webhook-id"] for r in requests} == {sim.delivery(did).event_id}


def test_the_response_sample_is_bounded_and_never_holds_a_secret(make_sim: MakeSim) -> None:
    def chatty(request: httpx.Request) -> httpx.Response:
        echo = f"bad secret {SECRET} sig {request.headers['webhook-signature']} " + "x" * 2000
        return httpx.Response(500, text=echo)

    sim = make_sim(chatty)
    did = sim.publish(endpoint_id="partner", deadline_at=DEADLINE)
    asyncio.run(sim.run_due())
    [attempt] = sim.attempts(did)
    assert len(attempt.response_sample) == SAMPLE_LIMIT
    assert SECRET not in attempt.response_sample
    assert SECRET.removeprefix("whsec_") not in attempt.response_sample
    assert "v1," not in attempt.response_sample
    assert attempt.response_sample.startswith("bad secret *** sig ***")
    assert SECRET not in sim.explain(did)


def test_redact_hides_key_material() -> None:
    assert redact("whsec_abc= and sha256=" + "a" * 64) == "*** and ***"
    assert redact("k=supersecret", ["supersecret"]) == "k=***"


def test_a_real_refused_connection_on_loopback(make_sim: MakeSim) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sim = make_sim(client=httpx.AsyncClient())
    sim.add_endpoint("closed", f"http://127.0.0.1:{port}/webhooks", [SECRET])
    did = sim.publish(endpoint_id="closed", deadline_at=DEADLINE)

    async def run() -> None:
        await sim.run_due()
        await sim.client.aclose()

    asyncio.run(run())
    [attempt] = sim.attempts(did)
    assert attempt.kind is OutcomeKind.CONNECT
    assert sim.delivery(did).state is State.SCHEDULED


def test_failure_kind_follows_the_cause_chain() -> None:
    error = httpx.ConnectError("boom")
    error.__cause__ = socket.gaierror(-2, "Name or service not known")
    assert failure_kind(error) is OutcomeKind.DNS
    assert failure_kind(httpx.PoolTimeout("pool")) is OutcomeKind.CONNECT


def _raising(
    make: Callable[[httpx.Request], Exception],
) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        raise make(request)

    return handler


def _connect_error(cause: BaseException | None) -> Callable[[httpx.Request], Exception]:
    def make(request: httpx.Request) -> Exception:
        error = httpx.ConnectError("all connection attempts failed", request=request)
        error.__cause__ = cause
        return error

    return make


@pytest.mark.parametrize(
    ("cause", "kind"),
    [
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), OutcomeKind.DNS),
        (ssl.SSLCertVerificationError(1, "certificate verify failed"), OutcomeKind.TLS),
        (ssl.SSLError(1, "wrong version number"), OutcomeKind.TLS),
        (ConnectionRefusedError(111, "Connection refused"), OutcomeKind.CONNECT),
        (None, OutcomeKind.CONNECT),
    ],
)
def test_a_transport_failure_is_classified_by_the_type_it_was_raised_from(
    make_sim: MakeSim, cause: BaseException | None, kind: OutcomeKind
) -> None:
    sim = make_sim(_raising(_connect_error(cause)))
    did = sim.publish(endpoint_id="partner", deadline_at=DEADLINE)
    asyncio.run(sim.run_due())
    [attempt] = sim.attempts(did)
    assert attempt.kind is kind
    assert sim.delivery(did).state is State.SCHEDULED


def test_the_message_words_do_not_decide_the_kind() -> None:
    assert failure_kind(httpx.ConnectError("getaddrinfo: dns failure")) is OutcomeKind.CONNECT
    assert failure_kind(httpx.ConnectError("[SSL] tls handshake")) is OutcomeKind.CONNECT
    reset = httpx.ReadError("ssl connection reset")
    assert failure_kind(reset) is OutcomeKind.NETWORK


def test_a_read_error_inside_tls_is_a_network_error_after_sending(make_sim: MakeSim) -> None:
    def make(request: httpx.Request) -> Exception:
        error = httpx.ReadError("read failed", request=request)
        error.__context__ = ssl.SSLError(1, "decryption failed")
        return error

    sim = make_sim(_raising(make))
    did = sim.publish(endpoint_id="partner", deadline_at=DEADLINE)
    asyncio.run(sim.run_due())
    assert sim.attempts(did)[0].kind is OutcomeKind.NETWORK
    assert sim.ledger(did)[-1].details["ambiguous"] is True


def test_bad_publications_are_clear_errors(make_sim: MakeSim) -> None:
    sim = make_sim()
    with pytest.raises(InvalidTime, match="timezone-aware"):
        sim.publish(endpoint_id="partner", deadline_at=datetime(2026, 8, 13, 10))
    with pytest.raises(NotFound, match="add_endpoint"):
        sim.publish(endpoint_id="nobody", deadline_at=DEADLINE)
    sim.publish(endpoint_id="partner", deadline_at=DEADLINE, event_id="evt_x", data={"a": 1})
    with pytest.raises(ConflictError, match="different payload"):
        sim.publish(endpoint_id="partner", deadline_at=DEADLINE, event_id="evt_x", data={"a": 2})
    with pytest.raises(ConfigurationError):
        sim.add_endpoint("bad", "ftp://example", [SECRET])
    with pytest.raises(ConfigurationError):
        sim.add_endpoint("bad", URL, ["whsec_!!notbase64"])
    with pytest.raises(ConfigurationError):
        sim.add_endpoint("bad", URL, [SECRET], scheme="carrier-pigeon")
    with pytest.raises(ConfigurationError):
        sim.add_endpoint("bad", URL, [])
    assert "***" in repr(sim.endpoint_config("partner").secrets[0])


def test_unknown_reasons_and_urls_are_configuration_errors(make_sim: MakeSim) -> None:
    from sender_sim import RedriveScope

    sim = make_sim()
    with pytest.raises(ConfigurationError, match="choose one of deadline_exhausted"):
        sim.dlq(reason="bored")
    with pytest.raises(ConfigurationError, match="unknown dead-letter reason"):
        RedriveScope(reason="bored")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="http"):
        sim.add_endpoint("bad", "http://[::1", [SECRET])
