"""The body read deadline: one sweeping timer per event loop instead of one timer per request.

``asyncio.timeout`` arms and disarms a timer handle per request (about 3 µs on the guard's hot
path, more than verifying the signature). :class:`BodyDeadlines` instead records each reading
task with its deadline in a dict (two dict operations per request) and runs one timer per loop
that wakes every ``timeout / 8`` seconds while reads are outstanding and cancels the tasks whose
deadline passed. A body is therefore given up between ``timeout`` and ``1.125 × timeout`` after
the headers, never earlier. The cancellation is told apart from any other one exactly as
``asyncio.timeout`` does it (``Task.uncancel``), so a shutdown still cancels the request.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["SWEEPS_PER_TIMEOUT", "BodyDeadlines"]

SWEEPS_PER_TIMEOUT = 8
"""How often per ``timeout`` the sweeper looks: the deadline's slack is ``timeout / 8``."""


class _LoopReads:
    __slots__ = ("deadlines", "expired", "timer")

    def __init__(self) -> None:
        self.deadlines: dict[asyncio.Task[Any], float] = {}
        self.expired: set[asyncio.Task[Any]] = set()
        self.timer: asyncio.TimerHandle | None = None


class BodyDeadlines:
    """Deadlines of the body reads in flight, swept by one timer per event loop."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.sweep_every = timeout / SWEEPS_PER_TIMEOUT
        self._loops: dict[asyncio.AbstractEventLoop, _LoopReads] = {}

    def start(self, task: asyncio.Task[Any], loop: asyncio.AbstractEventLoop) -> None:
        """``task`` begins reading a body now; it is cancelled once its deadline has passed."""
        reads = self._loops.get(loop)
        if reads is None:
            reads = self._loops[loop] = _LoopReads()
        reads.deadlines[task] = loop.time() + self.timeout
        if reads.timer is None:
            reads.timer = loop.call_later(self.sweep_every, self._sweep, loop, reads)

    def stop(self, task: asyncio.Task[Any], loop: asyncio.AbstractEventLoop) -> bool:
        """``task`` stopped reading; whether its deadline had cancelled it."""
        reads = self._loops.get(loop)
        if reads is None or reads.deadlines.pop(task, None) is not None:
            return False
        if task in reads.expired:
            reads.expired.discard(task)
            return True
        return False

    def _sweep(self, loop: asyncio.AbstractEventLoop, reads: _LoopReads) -> None:
        now = loop.time()
        late = [task for task, deadline in reads.deadlines.items() if deadline <= now]
        for task in late:
            del reads.deadlines[task]
            reads.expired.add(task)
            task.cancel()
        if reads.deadlines:
            reads.timer = loop.call_later(self.sweep_every, self._sweep, loop, reads)
        else:
            reads.timer = None
            if not reads.expired and self._loops.get(loop) is reads:
                del self._loops[loop]  # a closed loop is not kept alive by this dict
