"""The sender's connection pool (:mod:`sender_sim.connection_pool`): its assignment pass decides
exactly what httpcore's own pass decides, over generated pool states, and every client
:func:`~sender_sim.sender_client.sender_client` builds without a transport has it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpx
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sender_sim.connection_pool import LinearPool, install
from sender_sim.sender_client import sender_client

ORIGINS = ("http://a.test", "http://b.test")


@dataclass(eq=False)
class _Connection:
    """A connection in a fixed state: its answers to the pool's questions never change."""

    name: str
    origin: str
    closed: bool = False
    expired: bool = False
    idle: bool = False
    available: bool = False

    def is_closed(self) -> bool:
        return self.closed

    def has_expired(self) -> bool:
        return self.expired

    def is_idle(self) -> bool:
        return self.idle

    def is_available(self) -> bool:
        return self.available

    def can_handle_request(self, origin: Any) -> bool:
        return bool(origin == self.origin)


@dataclass
class _Url:
    origin: str


@dataclass
class _Request:
    url: _Url


@dataclass(eq=False)
class _PoolRequest:
    request: _Request
    queued: bool
    assigned: list[str] = field(default_factory=list)

    def is_queued(self) -> bool:
        return self.queued

    def assign_to_connection(self, connection: _Connection) -> None:
        self.assigned.append(connection.name)


_connections = st.lists(
    st.builds(
        _Connection,
        name=st.just(""),
        origin=st.sampled_from(ORIGINS),
        closed=st.booleans(),
        expired=st.booleans(),
        idle=st.booleans(),
        available=st.booleans(),
    ),
    max_size=10,
)
_requests = st.lists(st.tuples(st.sampled_from(ORIGINS), st.booleans()), max_size=6)


def _outcome(
    pool: httpcore.AsyncConnectionPool,
    connections: list[_Connection],
    requests: list[tuple[str, bool]],
) -> tuple[list[str], list[str], list[list[str]], list[str]]:
    """Run ``pool``'s pass over copies of the state: what it closed, what it kept, what each
    request was given, and the origins of the connections it opened."""
    copies = [_Connection(**{**vars(c), "name": f"c{i}"}) for i, c in enumerate(connections)]
    pool_requests = [_PoolRequest(_Request(_Url(origin)), queued) for origin, queued in requests]
    opened: list[str] = []

    def create_connection(origin: Any) -> _Connection:
        opened.append(str(origin))
        return _Connection(f"new{len(opened)}", str(origin))

    state: Any = pool
    state._connections = copies
    state._requests = pool_requests
    state.create_connection = create_connection
    closing = [c.name for c in pool._assign_requests_to_connections()]  # type: ignore[attr-defined]
    return closing, [c.name for c in copies], [r.assigned for r in pool_requests], opened


_IDLE_B = _Connection("", ORIGINS[1], idle=True)  # idle, but for another origin than "a"


@settings(max_examples=400)  # cheap: a few milliseconds for all of them
@example(  # room made for "a" by closing the first idle connection, not another
    connections=[_IDLE_B, _IDLE_B],
    requests=[(ORIGINS[0], True)],
    max_connections=2,
    max_keepalive=2,
)
@example(  # a pool at its keep-alive limit keeps its idle connection
    connections=[_IDLE_B], requests=[], max_connections=2, max_keepalive=1
)
@given(
    connections=_connections,
    requests=_requests,
    max_connections=st.integers(1, 8),
    max_keepalive=st.integers(0, 8),
)
def test_the_linear_pass_decides_what_httpcore_s_pass_decides(
    connections: list[_Connection],
    requests: list[tuple[str, bool]],
    max_connections: int,
    max_keepalive: int,
) -> None:
    theirs = httpcore.AsyncConnectionPool(
        max_connections=max_connections, max_keepalive_connections=max_keepalive
    )
    ours = LinearPool(max_connections=max_connections, max_keepalive_connections=max_keepalive)
    assert _outcome(ours, connections, requests) == _outcome(theirs, connections, requests)


def test_every_client_built_without_a_transport_gets_the_linear_pool() -> None:
    async def pool_of(client: httpx.AsyncClient) -> object:
        async with client:
            return getattr(client._transport, "_pool", None)  # what the client was built with

    # an httpx or httpcore upgrade that moves the pool fails here, not silently
    assert type(asyncio.run(pool_of(sender_client()))) is LinearPool
    mocked = sender_client(transport=httpx.MockTransport(lambda request: httpx.Response(200)))
    assert asyncio.run(pool_of(mocked)) is None  # a given transport is left as it is


def test_a_proxy_pool_is_left_as_httpcore_made_it() -> None:
    transport = httpx.AsyncHTTPTransport(proxy="http://127.0.0.1:9")
    assert install(transport) is False
    assert type(getattr(transport, "_pool", None)) is httpcore.AsyncHTTPProxy
