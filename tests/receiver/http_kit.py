"""Kit for the receiver's real-HTTP tests: signed deliveries at the wall clock, probe reads, raw
socket exchanges, and the reference app served on a loopback port."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx

from receiver.app import ReceiverSettings, create_app
from receiver.server import DEFAULT_LIMITS, ServerLimits, running_server
from receiver.signing import Secret, Verifier

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
TOKEN = "probe-t0ken"
PROBLEM = "application/problem+json"
PROBLEM_BASE = "https://hookproof.dev/problems/"

_SIGNER = Verifier([Secret(SECRET)])


def signed(body: bytes, event_id: str) -> dict[str, str]:
    """Standard Webhooks headers for ``body``, stamped with the wall clock."""
    return _SIGNER.sign(body, event_id=event_id, timestamp=int(time.time()))


def settings(db: str, **options: Any) -> ReceiverSettings:
    return ReceiverSettings(secrets=[SECRET], db=db, probe_token=TOKEN, **options)


@contextlib.contextmanager
def serving(
    db: str, *, limits: ServerLimits = DEFAULT_LIMITS, **options: Any
) -> Iterator[httpx.Client]:
    """The reference app on a loopback port; an httpx client with that base URL."""
    with (
        running_server(create_app(settings(db, **options)), limits=limits) as base,
        httpx.Client(base_url=base, timeout=10) as http,
    ):
        yield http


def probe(http: httpx.Client, event_id: str) -> httpx.Response:
    return http.get(f"/_hookproof/events/{event_id}", headers={"authorization": f"Bearer {TOKEN}"})


def problem_slug(response: httpx.Response) -> str:
    """The problem type's slug (asserting the answer is a problem document)."""
    assert response.headers["content-type"] == PROBLEM, (response.status_code, response.text)
    document = response.json()
    assert document["status"] == response.status_code
    slug: str = document["type"].removeprefix(PROBLEM_BASE)
    return slug


def address(http: httpx.Client) -> tuple[str, int]:
    parts = urlsplit(str(http.base_url))
    assert parts.hostname is not None
    assert parts.port is not None
    return parts.hostname, parts.port


def read_answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (or the socket times out)."""
    answer = b""
    with contextlib.suppress(TimeoutError, ConnectionResetError):
        while True:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    return answer
