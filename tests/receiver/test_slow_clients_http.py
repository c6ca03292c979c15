"""Slow and idle clients over a raw loopback socket: every way of holding a connection is bounded.

The bounds are set low here (fractions of a second) so each test proves its bound within a few
seconds; the defaults are documented in :mod:`receiver.server` and docs/receiver.md.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from receiver.server import ServerLimits
from tests.receiver.http_kit import address, probe, read_answer, serving, signed

LIMITS = ServerLimits(limit_concurrency=4, header_timeout=0.5, max_header_bytes=4096, keep_alive=1)
BODY_TIMEOUT_S = 0.5
WAIT_S = 5.0
"""The longest any test waits for the server to act (far above each bound, far below hanging)."""


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    db: Path = tmp_path_factory.mktemp("slow") / "inbox.sqlite"
    with serving(str(db), limits=LIMITS, body_timeout=BODY_TIMEOUT_S) as client:
        yield client


def _connect(http: httpx.Client) -> socket.socket:
    sock = socket.create_connection(address(http), timeout=WAIT_S)
    return sock


def _head(event_id: str, body: bytes, extra: bytes) -> bytes:
    headers = b"".join(
        f"{name}: {value}\r\n".encode() for name, value in signed(body, event_id).items()
    )
    return b"POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + extra + b"\r\n"


BODY = json.dumps({"type": "renewal.reminder_due", "data": {"renewal_id": "ren_1"}}).encode()


def test_a_body_shorter_than_its_declared_length_gets_408_and_is_not_claimed(
    http: httpx.Client,
) -> None:
    with _connect(http) as sock:
        started = time.monotonic()
        sock.sendall(_head("evt_short", BODY, b"Content-Length: 1000\r\n") + BODY[:10])
        answer = read_answer(sock)  # real-time: the server's body deadline has to pass
        elapsed = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"application/problem+json" in answer
    assert b"body-timeout" in answer
    assert BODY_TIMEOUT_S * 0.8 <= elapsed < WAIT_S
    assert probe(http, "evt_short").status_code == 404
    # The genuine copy that follows is handled.
    assert (
        http.post("/webhooks", content=BODY, headers=signed(BODY, "evt_short")).status_code == 200
    )


def test_a_chunked_body_without_its_terminator_gets_408(http: httpx.Client) -> None:
    with _connect(http) as sock:
        head = _head("evt_chunked", BODY, b"Transfer-Encoding: chunked\r\n")
        sock.sendall(head + b"%x\r\n%s\r\n" % (len(BODY), BODY))  # no final 0-length chunk
        answer = read_answer(sock)  # real-time: the server's body deadline has to pass
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert probe(http, "evt_chunked").status_code == 404


def test_a_connection_that_sends_nothing_is_closed(http: httpx.Client) -> None:
    with _connect(http) as sock:
        started = time.monotonic()
        answer = read_answer(sock)  # real-time: the server's header deadline has to pass
        elapsed = time.monotonic() - started
    assert answer == b""  # closed without a word (nothing was asked)
    assert elapsed < WAIT_S


def test_headers_dripping_slower_than_the_deadline_are_cut_off(http: httpx.Client) -> None:
    with _connect(http) as sock:
        started = time.monotonic()
        sock.sendall(b"POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        closed = False
        while time.monotonic() - started < WAIT_S:
            try:
                sock.sendall(b"x-drip: 1\r\n")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            sock.settimeout(0.1)
            try:
                if sock.recv(1) == b"":  # real-time: wait a little between drips
                    closed = True
                    break
            except TimeoutError:
                continue
            except ConnectionResetError:
                closed = True
                break
    assert closed
    assert time.monotonic() - started < WAIT_S


def test_an_idle_kept_alive_connection_is_closed(http: httpx.Client) -> None:
    with _connect(http) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        started = time.monotonic()
        answer = read_answer(sock)  # real-time: the keep-alive timeout has to pass
        elapsed = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert LIMITS.keep_alive * 0.8 <= elapsed < WAIT_S


def test_a_request_head_over_the_limit_gets_431(http: httpx.Client) -> None:
    with _connect(http) as sock:
        filler = b"x-filler: " + b"a" * LIMITS.max_header_bytes + b"\r\n"
        sock.sendall(b"POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n" + filler + b"\r\n")
        answer = read_answer(sock)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    assert b"application/problem+json" in answer


@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: abc\r\n",
        b"Content-Length: -1\r\n",
        b"Content-Length: 2\r\nContent-Length: 3\r\n",
        b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n",
        b"X-Control: a\x00b\r\nContent-Length: 2\r\n",
        b"Webhook-Id : evt_space\r\nContent-Length: 2\r\n",
    ],
    ids=["not-a-number", "negative", "two-lengths", "length-and-chunked", "nul", "space-name"],
)
def test_a_request_the_http_parser_refuses_gets_a_400_problem_and_claims_nothing(
    http: httpx.Client, framing: bytes
) -> None:
    """uvicorn answers these itself in plain text; the receiver's protocol answers them with the
    one problem shape of every refusal, and closes the connection."""
    event_id = "evt_bad_framing"
    with _connect(http) as sock:
        sock.sendall(_head(event_id, b"{}", framing) + b"{}")
        answer = read_answer(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), answer[:200]
    assert b"content-type: application/problem+json" in head
    assert b"connection: close" in head
    problem = json.loads(body)
    assert problem["type"] == "https://hookproof.dev/problems/malformed-request"
    assert problem["status"] == 400
    assert probe(http, event_id).status_code == 404


def test_connections_past_the_concurrency_limit_get_503(http: httpx.Client) -> None:
    idle = [_connect(http) for _ in range(LIMITS.limit_concurrency)]
    try:
        with _connect(http) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            answer = read_answer(sock)
        assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
    finally:
        for sock in idle:
            sock.close()


UPGRADE = (
    b"Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


@pytest.mark.parametrize(
    ("path", "status", "slug"),
    [(b"/webhooks", 405, "method-not-allowed"), (b"/elsewhere", 404, "not-found")],
)
def test_a_websocket_handshake_is_answered_as_the_plain_request_it_also_is(
    http: httpx.Client, caplog: pytest.LogCaptureFixture, path: bytes, status: int, slug: str
) -> None:
    """No hookproof server speaks WebSocket: an upgrade is never taken (no WebSocket library's
    plain-text refusal, no 403 handshake), the GET gets the problem any GET there gets, and the
    log is not told to install a WebSocket library."""
    with _connect(http) as sock:
        sock.sendall(b"GET " + path + b" HTTP/1.1\r\n" + UPGRADE)
        answer = read_answer(sock)  # the keep-alive bound closes it
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d" % status), answer[:200]
    assert b"content-type: application/problem+json" in head
    assert json.loads(body)["type"] == f"https://hookproof.dev/problems/{slug}"
    assert not [r for r in caplog.records if "WebSocket" in r.getMessage()]
