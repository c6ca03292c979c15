"""Concurrent copies that reach the receiver together, not in the order their connections opened.

Sent with a plain ``gather``, the first copy of an event often rides a keep-alive connection and
is fully sent while the other copies are still opening theirs: it gets a head start of a few
milliseconds, and a receiver whose check-then-act race lasts less than that (a fast commit) passes
a race test it should fail. :class:`ArriveTogether` holds each copy's body until every copy of the
group has written its head (its connection is open and the request line and headers are out) or
has ended without sending its body (a refusal on the headers, a connection error); then all the
bodies go out in the same turn of the event loop. The wait is bounded (``bound_s``), so a copy
that cannot get a connection delays the others by at most that long.

A gated body is an async stream of exactly the request's bytes, sent with the request's
``Content-Length`` (never chunked): the receiver sees the same bytes as an ungated copy.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

__all__ = ["DEFAULT_BOUND_S", "ArriveTogether", "GatedCopy", "gate_bound"]

DEFAULT_BOUND_S = 1.0
"""The longest a copy's body waits for the rest of its group."""


def gate_bound(timeout_s: float) -> float:
    """How long a gated copy may wait: a quarter of its exchange's deadline, at most a second,
    so that the wait never eats the copy's own deadline."""
    return min(DEFAULT_BOUND_S, timeout_s / 4)


class ArriveTogether:
    """A gate for ``copies`` concurrent requests (see the module docstring)."""

    def __init__(self, copies: int, *, bound_s: float = DEFAULT_BOUND_S) -> None:
        self._outstanding = copies
        self._bound_s = bound_s
        self._open = asyncio.Event()
        if copies <= 1:
            self._open.set()

    def copy(self) -> GatedCopy:
        """One copy's place in the group."""
        return GatedCopy(self)

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    def _arrived(self) -> None:
        self._outstanding -= 1
        if self._outstanding <= 0:
            self._open.set()

    async def _wait(self) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._bound_s):
                await self._open.wait()


class GatedCopy:
    """One copy: its body waits at the gate; :meth:`done` counts a copy that never sent one."""

    __slots__ = ("_arrived", "_gate")

    def __init__(self, gate: ArriveTogether) -> None:
        self._gate = gate
        self._arrived = False

    def _arrive(self) -> None:
        if not self._arrived:
            self._arrived = True
            self._gate._arrived()

    async def body(self, content: bytes) -> AsyncIterator[bytes]:
        """``content`` as a stream that starts once the whole group is ready (or the bound
        passed). The HTTP client pulls it right after writing the request's head."""
        self._arrive()
        await self._gate._wait()
        yield content

    def done(self) -> None:
        """The copy ended (answered, refused on its headers, failed): it holds nobody up."""
        self._arrive()
