"""The total deadline of one request: connect, send and the read of the whole answer in one budget.

httpx's timeouts bound each network operation on its own, so a server that drips one byte a second
never trips a five-second read timeout and can stretch a run without end. Every request the runner
makes (the webhooks, the probe, the reachability check) goes through :func:`request_within`, so
nothing waits longer than the timeout per exchange. It follows no redirect: a webhook sender does
not, and a redirect loop is then one answer (a 3xx), not a wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx

from conformance.exceptions import DeadlineExceeded

__all__ = ["request_within"]


async def request_within(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    within_s: float,
    headers: Mapping[str, str] | Sequence[tuple[bytes, bytes]] | None = None,
    content: bytes | AsyncIterator[bytes] | None = None,
    extensions: Mapping[str, Any] | None = None,
) -> httpx.Response:
    """The complete answer to one request within ``within_s`` seconds, or
    :class:`~conformance.exceptions.DeadlineExceeded` (saying whether anything answered).
    ``extensions`` are httpx's request extensions (``trace``: httpcore's progress events)."""
    status: int | None = None
    try:
        async with asyncio.timeout(within_s):
            request = client.build_request(
                method,
                url,
                headers=headers,
                content=content,
                timeout=within_s,
                extensions=dict(extensions) if extensions else None,
            )
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                status = response.status_code
                await response.aread()
            finally:
                await response.aclose()
    except (TimeoutError, httpx.TimeoutException):
        raise DeadlineExceeded(within_s, status) from None
    return response
