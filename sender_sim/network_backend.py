"""The network backend a sender's connection pool opens connections through: httpcore's anyio
backend, with a liveness check of an idle connection that costs one ``poll``.

Before every request, and again when each answer is done, httpcore 1.0's pool asks each of its
connections whether the server has closed it while it was idle: ``get_extra_info("is_readable")``
(encode/httpcore#928). Through the anyio backend, every such question builds the stream's whole
table of extra attributes (peer and local addresses through ``getpeername`` and enum
conversions) to take the raw socket out of it, and then a new ``select.poll`` object. A pool
holding the eight connections a burst of concurrent copies left open pays that eight times per
request; so does a sender that keeps connections to many endpoints alive. The streams here learn
their socket once, when the connection is made, and keep a ``poll`` object registered on it:
the same answer (readable or gone), for one system call. Everything else is anyio's.

:func:`sender_sim.connection_pool.install` puts this backend under an
``httpx.AsyncHTTPTransport``'s pool (where ``select.poll`` exists: :data:`QUICK_CHECK_AVAILABLE`).
"""

# ruff: noqa: ASYNC109 (the ``timeout`` parameters are httpcore's interface, passed through)

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore

__all__ = ["QUICK_CHECK_AVAILABLE", "QuickLivenessBackend"]

_POLL = getattr(select, "poll", None)  # absent on Windows: httpcore's own check is kept there
QUICK_CHECK_AVAILABLE = _POLL is not None
"""Whether this platform has the ``poll`` the quick check is made of."""


class _QuickLivenessStream(httpcore.AsyncNetworkStream):
    """An anyio stream whose ``is_readable`` answer polls a socket it looked up once."""

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream
        self._poll: Any = None
        sock: socket.socket | None = stream.get_extra_info("socket")
        if _POLL is not None and sock is not None and sock.fileno() >= 0:
            self._poll = _POLL()
            self._poll.register(sock.fileno(), select.POLLIN)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._stream.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        # the TLS stream runs over the same socket; its own wrapper looks it up again
        return _QuickLivenessStream(
            await self._stream.start_tls(ssl_context, server_hostname, timeout)
        )

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self._poll is not None:
            # readable, hung up or closed (POLLNVAL): the idle connection is not usable
            return bool(self._poll.poll(0))
        return self._stream.get_extra_info(info)


class QuickLivenessBackend(httpcore.AsyncNetworkBackend):
    """``backend``'s connections (default: httpcore's anyio backend), with the quick check;
    :func:`install` wraps the backend httpcore chose for the pool."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._backend = backend if backend is not None else httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._backend.connect_tcp(host, port, timeout, local_address, socket_options)
        return _QuickLivenessStream(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._backend.connect_unix_socket(path, timeout, socket_options)
        return _QuickLivenessStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)
