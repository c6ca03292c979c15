"""Connection-level bounds uvicorn does not have: a header read deadline and a header size cap.

uvicorn's httptools protocol arms its keep-alive timer only after a response, so a client that
connects and sends nothing (or drips its headers a byte at a time) holds a socket — a file
descriptor — forever; with a low descriptor limit such sockets starve real deliveries. And
httptools accepts request heads of any size. :func:`guarded_protocol` returns a subclass of that
protocol which

* closes a connection whose request line and headers have not fully arrived ``header_timeout``
  seconds after the connection opened (or after the previous response, on a kept-alive one);
* answers ``431`` and closes once a request head grows past ``max_header_bytes``;
* answers a request the HTTP parser refuses (a broken request line, a bad ``Content-Length``,
  a header with a control character) with a ``400`` problem, not uvicorn's plain-text one, so
  that every refusal the receiver sends has the one shape of :mod:`receiver.problems`;
* serves a request asking to upgrade its connection (``websocket``, ``h2c``) as the plain HTTP
  request it also is (the servers run with ``ws="none"``: no WebSocket library answers it),
  logging one debug line instead of uvicorn's warnings that a WebSocket library is missing.

Everything else (the body, keep-alive, ``limit_concurrency``) is uvicorn's own behaviour, bounded
by the options in :mod:`receiver.server`.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from receiver.problems import PROBLEM_CONTENT_TYPE, PROBLEMS, problem_body

__all__ = ["guarded_protocol"]


def _closing_answer(slug: str, detail: str) -> bytes:
    """A whole HTTP/1.1 answer with the problem ``slug``, closing the connection."""
    problem = PROBLEMS[slug]
    body = problem_body(problem, detail)
    head = (
        f"HTTP/1.1 {problem.status} {HTTPStatus(problem.status).phrase}\r\n"
        f"content-type: {PROBLEM_CONTENT_TYPE}\r\n"
        "connection: close\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode("ascii") + body


_TOO_LARGE = _closing_answer("headers-too-large", "send smaller headers")
_MALFORMED = _closing_answer(
    "malformed-request", "the request line, a header or the body's framing could not be parsed"
)


class _HeadTooLarge(Exception):
    pass


class _GuardedHttpToolsProtocol(HttpToolsProtocol):
    header_timeout: float = 10.0
    max_header_bytes: int = 16 * 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._head_too_large = False
        self._in_head = True

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._in_head = True
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._in_head and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.max_header_bytes:
            self._head_too_large = True
            raise _HeadTooLarge  # stops the parser; uvicorn then calls send_400_response

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        self._disarm_head_timer()
        if not self.transport.is_closing():
            self.transport.write(_TOO_LARGE if self._head_too_large else _MALFORMED)
            self.transport.close()

    def _unsupported_upgrade_warning(self) -> None:
        """A request asking to upgrade its connection (``websocket``, ``h2c``) is served as the
        plain HTTP request it also is (hookproof upgrades none): one debug line, not uvicorn's
        two warnings advising a WebSocket library to install."""
        self.logger.debug("served an upgrade request as plain HTTP (no upgrade is offered)")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        if self._head_timer is None:  # a kept-alive connection's next request
            self._arm_head_timer()

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._disarm_head_timer()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            # The keep-alive timer now bounds the wait for the next request to begin.
            self._in_head = True


def guarded_protocol(*, header_timeout: float, max_header_bytes: int) -> type[asyncio.Protocol]:
    """The httptools protocol with these bounds (a class: uvicorn makes one per connection)."""
    return type(
        "HookproofHttpProtocol",
        (_GuardedHttpToolsProtocol,),
        {"header_timeout": header_timeout, "max_header_bytes": max_header_bytes},
    )
