"""The body cap over a real socket: 413 arrives before the body would have been buffered."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from receiver.app import ReceiverSettings, create_app
from receiver.server import running_server

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
CAP = 64 * 1024


@pytest.fixture(scope="module")
def address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    db: Path = tmp_path_factory.mktemp("cap") / "inbox.sqlite"
    settings = ReceiverSettings(secrets=[SECRET], db=str(db), max_body=CAP)
    with running_server(create_app(settings)) as base:
        parts = urlsplit(base)
        assert parts.hostname is not None
        assert parts.port is not None
        yield parts.hostname, parts.port


def _exchange(address: tuple[str, int], head: bytes, body_chunks: list[bytes]) -> bytes:
    """Send ``head`` and the chunks (stopping early once the server answered); the answer."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(head)
        for chunk in body_chunks:
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break  # the server answered and closed: it did not wait for the rest
        answer = b""
        while b"\r\n\r\n" not in answer:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
        return answer


def test_a_declared_length_over_the_cap_is_refused_without_sending_the_body(
    address: tuple[str, int],
) -> None:
    head = (
        b"POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 104857600\r\n\r\n"
    )
    # Not one byte of the 100 MB body is sent: a server that waited for it would time out.
    answer = _exchange(address, head, [])
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"application/problem+json" in rest.lower()


def test_a_chunked_body_over_the_cap_is_cut_off_at_the_cap(address: tuple[str, int]) -> None:
    head = (
        b"POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    piece = b"x" * 16384
    chunk = b"%x\r\n%s\r\n" % (len(piece), piece)
    # 80 KiB of a body that never ends (no final chunk): only a server that stops reading once
    # it holds more than CAP bytes can answer at all; one that buffers the body would wait.
    answer = _exchange(address, head, [chunk] * 5)
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"application/problem+json" in rest.lower()
