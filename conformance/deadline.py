"""The total deadline of one request: connect, send and the read of the answer in one budget.

httpx's timeouts bound each network operation on its own, so a server that drips one byte a second
never trips a five-second read timeout and can stretch a run without end, and one that streams an
endless body would fill the runner's memory. Every request the runner makes (the webhooks, the
probe, the reachability check) goes through :func:`request_within`, built on the sender's
:func:`sender_sim.bounded_exchange.send_within`: nothing waits longer than the timeout per
exchange, and at most ``max_bytes`` of an answer are read. It follows no redirect: a webhook
sender does not, and a redirect loop is then one answer (a 3xx), not a wait.

A run sends hundreds of requests to the same two or three URLs (the endpoint, the probe's), so
each is parsed once (:func:`_parsed`) rather than by httpx at every request.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx

from conformance.exceptions import DeadlineExceeded
from sender_sim.bounded_exchange import DEFAULT_MAX_BYTES, Answer, AnswerLate, send_within

__all__ = ["Answer", "request_within"]


@functools.lru_cache(maxsize=64)
def _parsed(url: str) -> httpx.URL:
    """``url`` parsed (an ``httpx.URL`` is immutable, so one parse serves every request)."""
    return httpx.URL(url)


async def request_within(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    within_s: float,
    headers: Mapping[str, str] | Sequence[tuple[bytes, bytes]] | None = None,
    content: bytes | AsyncIterator[bytes] | None = None,
    extensions: Mapping[str, Any] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Answer:
    """The answer to one request within ``within_s`` seconds (its body's first ``max_bytes``
    bytes), or :class:`~conformance.exceptions.DeadlineExceeded` (saying whether anything
    answered). ``extensions`` are httpx's request extensions (``trace``: httpcore's progress
    events)."""
    request = client.build_request(
        method,
        _parsed(url),
        headers=headers,
        content=content,
        timeout=within_s,
        extensions=dict(extensions) if extensions else None,
    )
    try:
        return await send_within(client, request, within_s=within_s, max_bytes=max_bytes)
    except AnswerLate as late:
        raise DeadlineExceeded(within_s, late.status) from None
    except httpx.TimeoutException:
        raise DeadlineExceeded(within_s, None) from None
