"""The sender's network backend (:mod:`sender_sim.network_backend`): it is under every client
:func:`~sender_sim.sender_client.sender_client` builds, and its quick liveness check still tells
an idle connection the server closed (a new one is opened) from one still open (it is reused),
over plain TCP and over TLS, on real loopback sockets."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass, field

import httpx
import pytest

from sender_sim.network_backend import QuickLivenessBackend
from sender_sim.sender_client import sender_client
from tests.tls_support import self_signed

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


@dataclass
class _Server:
    """A minimal HTTP/1.1 server that answers 200 on a kept-alive connection, and can hang up
    on its idle connections without saying so (no ``Connection: close``), as a server whose
    keep-alive timeout passed does."""

    connections: int = 0
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                await reader.readexactly(length)
                writer.write(ANSWER)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.transport.abort()

    async def hang_up(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()  # the socket itself is closed, TLS or not


async def _run(hang_up: bool, tls: tuple[ssl.SSLContext, ssl.SSLContext] | None) -> _Server:
    server = _Server()
    listening = await asyncio.start_server(
        server.handle, "127.0.0.1", 0, ssl=tls[0] if tls else None
    )
    port = listening.sockets[0].getsockname()[1]
    scheme = "https" if tls else "http"
    url = f"{scheme}://{'localhost' if tls else '127.0.0.1'}:{port}/webhooks"
    try:
        async with sender_client(verify=tls[1] if tls else False, timeout=5) as client:
            statuses = [(await client.post(url, content=b"{}")).status_code]
            if hang_up:
                await server.hang_up()  # the first answer was read; its connection is idle
            statuses.append((await client.post(url, content=b"{}")).status_code)
    finally:
        await server.hang_up()
        listening.close()
        await listening.wait_closed()
    assert statuses == [200, 200]
    return server


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    key, cert = self_signed(tmp_path_factory.mktemp("tls"))
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(cert))
    return serving, trusting


def test_every_client_built_without_a_transport_gets_the_quick_backend() -> None:
    async def backend_of(client: httpx.AsyncClient) -> object:
        async with client:
            transport = client._transport  # what the client was built with
            return getattr(getattr(transport, "_pool", None), "_network_backend", None)

    # an httpx or httpcore upgrade that moves these attributes fails here, not silently
    assert isinstance(asyncio.run(backend_of(sender_client())), QuickLivenessBackend)
    mocked = sender_client(transport=httpx.MockTransport(lambda request: httpx.Response(200)))
    assert asyncio.run(backend_of(mocked)) is None  # a given transport is left as it is


@pytest.mark.parametrize("secure", [False, True], ids=["tcp", "tls"])
@pytest.mark.parametrize(
    ("hang_up", "connections"),
    [(False, 1), (True, 2)],
    ids=["an-open-idle-connection-is-reused", "one-the-server-closed-is-replaced"],
)
def test_the_quick_check_tells_an_open_idle_connection_from_a_closed_one(
    secure: bool, hang_up: bool, connections: int, request: pytest.FixtureRequest
) -> None:
    # a closed one reused, the second request would fail (the server is gone from that socket);
    # an open one not reused, the server would see a second connection
    contexts = request.getfixturevalue("tls") if secure else None
    server = asyncio.run(_run(hang_up=hang_up, tls=contexts))
    assert server.connections == connections
