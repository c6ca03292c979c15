"""Connection-level bounds uvicorn does not have: a header read deadline and a header size cap.

uvicorn's httptools protocol arms its keep-alive timer only after a response, so a client that
connects and sends nothing (or drips its headers a byte at a time) holds a socket — a file
descriptor — forever; with a low descriptor limit such sockets starve real deliveries. And
httptools accepts request heads of any size. :func:`guarded_protocol` returns a subclass of that
protocol which

* closes a connection whose request line and headers have not fully arrived ``header_timeout``
  seconds after the connection opened (or after the previous response, on a kept-alive one);
* answers ``431`` and closes once a request head grows past ``max_header_bytes``.

Everything else (the body, keep-alive, ``limit_concurrency``) is uvicorn's own behaviour, bounded
by the options in :mod:`receiver.server`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["guarded_protocol"]

_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: application/problem+json\r\n"
    b"connection: close\r\n"
    b"content-length: %d\r\n\r\n%s"
)
_TOO_LARGE_BODY = (
    b'{"type":"https://hookproof.dev/problems/headers-too-large","title":"The request headers '
    b'are larger than the limit","status":431,"detail":"send smaller headers"}'
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
        if not self._head_too_large:
            super().send_400_response(msg)
            return
        self._disarm_head_timer()
        if not self.transport.is_closing():
            self.transport.write(_TOO_LARGE % (len(_TOO_LARGE_BODY), _TOO_LARGE_BODY))
            self.transport.close()

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
