"""Claims nobody awaits any more: released as soon as they land, not left to their lease.

A backend makes a claim away from its caller (the SQLite writer thread, a PostgreSQL batch in a
task of its own). If the caller is cancelled meanwhile (an ASGI server that cancels the app when
the client hangs up, a ``wait_for`` around an in-process request, a shutdown), the claim still
lands, and nobody would release it: every retry of that event would be answered "in flight" until
the lease expired. :class:`OrphanedClaims` closes that gap for a backend:

* :meth:`OrphanedClaims.cancelled` is what the backend's ``claim`` calls when its caller is
  cancelled: a claim already made (the cancellation came before the caller resumed) is released;
* :meth:`OrphanedClaims.landed` is what the backend calls with a claim that landed for a caller
  already cancelled (its future cancelled): a ``CLAIMED`` one is released in a task of its own;
* :meth:`OrphanedClaims.drain` (the backend's ``close``) waits for those releases.

A release that fails (the store is away) is dropped: the lease frees the event then, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from receiver.inbox.contract import Claim, ClaimOutcome

__all__ = ["OrphanedClaims"]

Release = Callable[[str, int], Awaitable[bool]]
"""A backend's :meth:`~receiver.inbox.contract.Inbox.release`."""


class OrphanedClaims:
    """Releases the claims of cancelled callers for one backend (see the module docstring)."""

    def __init__(self, release: Release) -> None:
        self._release = release
        self._tasks: set[asyncio.Task[None]] = set()
        self.released = 0
        """Orphaned claims released so far (for tests and diagnostics)."""

    def cancelled(self, future: asyncio.Future[Claim]) -> None:
        """The caller awaiting ``future`` was cancelled: if its claim was made before the
        cancellation reached it, release that claim (else the backend calls :meth:`landed`)."""
        if future.done() and not future.cancelled() and future.exception() is None:
            self.landed(future.result())

    def landed(self, claim: Claim) -> None:
        """``claim`` landed for a caller that is gone: release it if it holds the event."""
        if claim.outcome is not ClaimOutcome.CLAIMED:
            return
        task = asyncio.get_running_loop().create_task(self._release_quietly(claim))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for every release under way."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _release_quietly(self, claim: Claim) -> None:
        with contextlib.suppress(Exception):  # the store is away: the lease frees it later
            if await self._release(claim.event_id, claim.token):
                self.released += 1
