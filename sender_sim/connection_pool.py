"""The connection pool every sender client sends through: httpcore's, with its bookkeeping pass
linear in the pool's connections, over :mod:`sender_sim.network_backend`'s streams.

httpcore 1.0's pool runs ``_assign_requests_to_connections`` whenever a request joins or leaves
it (two or three times per request). To decide whether an idle connection is surplus it builds,
for every connection, a list of every connection's ``is_idle()`` only to take its length, which
is the number of connections: quadratic work for a linear answer (encode/httpcore PR #1035 has
the same finding). A sender that keeps a burst's connections alive pays it on each later
request: the conformance runner, after eight concurrent copies, spent about 5 % of a catalogue
run's instructions there (``bench/bench_conformance_instructions.py``: 1.37x its floor with
httpcore's pass, 1.31x with this one).

:class:`LinearPool` makes the same decisions in the same order, each connection looked at once
per question: closed ones dropped; expired ones and, while the pool holds more connections than
its keep-alive limit, idle ones closed; then each queued request given the first connection
that can take it, else a new one, else an idle one closed to make room. A test runs both passes
over generated pool states and requires identical outcomes, so an httpcore release that changes
its own pass fails there instead of drifting silently.

:func:`install` gives a transport's pool this class and the quick liveness backend. httpx offers
no public way to do either; a pool that is not exactly httpcore's (a proxy's) is left as it is
(correct, only slower).
"""

from __future__ import annotations

import httpcore
import httpx
from httpcore._async.interfaces import AsyncConnectionInterface

from sender_sim.network_backend import QUICK_CHECK_AVAILABLE, QuickLivenessBackend

__all__ = ["LinearPool", "install"]


class LinearPool(httpcore.AsyncConnectionPool):
    """httpcore's connection pool whose assignment pass is linear in its connections."""

    def _assign_requests_to_connections(self) -> list[AsyncConnectionInterface]:
        connections = self._connections
        closing: list[AsyncConnectionInterface] = []
        for connection in list(connections):
            if connection.is_closed():
                connections.remove(connection)
            elif connection.has_expired() or (
                connection.is_idle() and len(connections) > self._max_keepalive_connections
            ):
                connections.remove(connection)
                closing.append(connection)
        for pool_request in [request for request in self._requests if request.is_queued()]:
            origin = pool_request.request.url.origin
            chosen = next(
                (
                    connection
                    for connection in connections
                    if connection.can_handle_request(origin) and connection.is_available()
                ),
                None,
            )
            if chosen is None:
                if len(connections) >= self._max_connections:
                    idle = next((c for c in connections if c.is_idle()), None)
                    if idle is None:
                        continue  # the request stays queued until a connection frees up
                    connections.remove(idle)
                    closing.append(idle)
                chosen = self.create_connection(origin)
                connections.append(chosen)
            pool_request.assign_to_connection(chosen)
        return closing


def install(transport: httpx.AsyncHTTPTransport) -> bool:
    """Give ``transport``'s pool :class:`LinearPool`'s pass and, where ``poll`` exists,
    :class:`~sender_sim.network_backend.QuickLivenessBackend`; whether it could."""
    pool = getattr(transport, "_pool", None)
    if type(pool) is not httpcore.AsyncConnectionPool:
        return False  # a proxy's pool, or an httpx whose transport is laid out otherwise
    backend = getattr(pool, "_network_backend", None)
    if QUICK_CHECK_AVAILABLE and isinstance(backend, httpcore.AsyncNetworkBackend):
        pool._network_backend = QuickLivenessBackend(backend)
    pool.__class__ = LinearPool  # the same object and state; only the pass is replaced
    return True
