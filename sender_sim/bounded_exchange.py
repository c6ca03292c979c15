"""One HTTP exchange within a total deadline, keeping a bounded part of the answer.

httpx's timeouts bound each network operation on its own: an endpoint that drips one byte a second
never trips a five-second read timeout and holds the exchange open without end, and one that
streams an endless body fills the sender's memory. Every exchange a sender makes (the simulator's
attempts, the conformance runner's requests) goes through :func:`send_within`: connecting, sending
and reading the answer share one deadline, and at most ``max_bytes`` of the body are read; the
rest is left unread and the connection is closed (an answer's status and its first bytes are all a
sender keeps). No redirect is followed: a webhook sender does not.

On the deadline :class:`AnswerLate` says whether the answer's head had arrived (``status``) and,
when it had not, whether the request had left at all (``sent``, from httpcore's progress events):
a request that never left cannot have reached the endpoint.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from sender_sim.exceptions import AnswerLate

__all__ = ["DEFAULT_MAX_BYTES", "Answer", "AnswerLate", "send_within"]

DEFAULT_MAX_BYTES = 1024 * 1024
"""How much of an answer's body is read when the caller does not say."""

Trace = Callable[[str, Mapping[str, Any]], Awaitable[None]]
"""httpcore's ``trace`` request extension: called with each progress event's name."""


@dataclass(frozen=True)
class Answer:
    """An answer as far as it was read: its status, its headers as sent, and the first bytes of
    its body (decoded as its ``Content-Encoding`` says; ``complete`` says whether that was all)."""

    status_code: int
    headers: httpx.Headers
    content: bytes
    complete: bool

    def json(self) -> Any:
        """The body parsed as JSON (``ValueError`` when it is not, or was cut short)."""
        return json.loads(self.content)


class _Progress:
    """What httpcore reported of one request: whether its head started to leave."""

    __slots__ = ("reported", "sent", "then")

    def __init__(self, then: Trace | None) -> None:
        self.reported = False
        self.sent = False
        self.then = then

    async def __call__(self, name: str, info: Mapping[str, Any]) -> None:
        self.reported = True
        if name.endswith(".send_request_headers.started"):
            self.sent = True
        if self.then is not None:
            await self.then(name, info)


async def send_within(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    within_s: float,
    max_bytes: int = DEFAULT_MAX_BYTES,
    follow_progress: bool = False,
) -> Answer:
    """``request``'s :class:`Answer`, its body cut at ``max_bytes``, within ``within_s`` seconds
    in all, or :class:`AnswerLate`. With ``follow_progress`` a late answer says whether the
    request had left (:attr:`AnswerLate.sent`; httpcore then reports each step, a few
    microseconds a request). A ``trace`` extension already on ``request`` still gets every
    event."""
    progress = None
    if follow_progress:
        progress = request.extensions["trace"] = _Progress(request.extensions.get("trace"))
    status: int | None = None
    try:
        async with asyncio.timeout(within_s):
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                status = response.status_code
                body, complete = await _read_at_most(response, max_bytes)
            finally:
                await response.aclose()
    except TimeoutError:
        sent = progress.sent if progress is not None and progress.reported else None
        raise AnswerLate(within_s, status, True if status is not None else sent) from None
    except httpx.TimeoutException:
        if status is None:  # httpx's own, as it says: connecting, a pooled connection, a read
            raise
        raise AnswerLate(within_s, status, True) from None
    return Answer(response.status_code, response.headers, body, complete)


async def _read_at_most(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """The body's first ``max_bytes`` bytes (decoded as its ``Content-Encoding`` says) and
    whether that was all of it; no more is read from the connection once that many arrived."""
    kept = bytearray()
    async for chunk in response.aiter_bytes():
        kept += chunk
        if len(kept) > max_bytes:
            return bytes(kept[:max_bytes]), False
    return bytes(kept), True
