"""A raw asyncio TCP server on a free loopback port, in a thread of its own: for tests whose
server must misbehave in ways no framework allows (drip an answer, drop a connection, stream an
endless body)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

__all__ = ["Connection", "raw_server"]

Connection = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
"""Serves one accepted connection."""


@contextmanager
def raw_server(
    connection: Connection,
    *,
    receive_buffer: int | None = None,
) -> Iterator[str]:
    """Run an asyncio server of ``connection`` on a free loopback port in a thread of its own
    (``receive_buffer``: the accepted sockets' ``SO_RCVBUF``); yields the base URL."""
    ready = threading.Event()
    stop: list[Callable[[], object]] = []
    port: list[int] = []

    async def serve() -> None:
        listening = socket.socket()
        if receive_buffer is not None:  # inherited by the accepted sockets
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        listening.bind(("127.0.0.1", 0))
        server = await asyncio.start_server(connection, sock=listening)
        port.append(server.sockets[0].getsockname()[1])
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        stop.append(lambda: loop.call_soon_threadsafe(done.set))
        ready.set()
        async with server:
            await done.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield f"http://127.0.0.1:{port[0]}"
    finally:
        stop[0]()
        thread.join(10)
