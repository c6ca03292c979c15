"""Batching for the PostgreSQL inbox: the operations of concurrent deliveries share one statement.

A :class:`Batcher` takes operations (one per caller, each with a ``key``: the event id) and hands
them to its ``run`` coroutine in batches, one statement per batch:

* **no added latency when idle**: the first operation submitted to an idle batcher starts on the
  next turn of the event loop, together with whatever else was submitted during that turn;
* **arrivals during a batch wait for the next one**: at most ``max_in_flight`` batches run at
  once; every operation submitted meanwhile joins the next batch, up to ``max_batch`` of them;
* **one operation per key per batch, in submission order**: an operation whose key is in the
  batch being prepared, or in a batch (or a deferred operation, below) not yet settled, waits for
  a later batch. Two claims of one event thus never meet in one statement (PostgreSQL refuses
  ``ON CONFLICT DO UPDATE`` touching a row twice), and the second sees the first one's result;
* **nothing is answered before its statement's result came back**: each caller's future is set
  only from ``run``'s outcome for it, which is a value, a :class:`Failed` (that caller's own
  exception) or a :class:`Later` (an awaitable the batcher runs in a task of its own and settles
  the caller from: the operation redone on its own, without holding the batch's slot). If ``run``
  raises, the caller of a batch of one gets that exception, unchanged, and every caller of a
  larger batch a copy of it (the inbox raises
  :class:`~receiver.exceptions.InboxUnavailable` for a lost database: never a false success);
* **a cancelled caller does not disturb the others**: its future is cancelled, the batch runs in a
  task of its own, and an operation cancelled before its batch started is left out; one that
  ran anyway is handed to ``orphaned`` (the claims' batcher releases such a claim:
  :mod:`receiver.inbox.orphans`).

:meth:`Batcher.drain` (the inbox's ``close``) refuses new operations and waits until every
submitted one is settled. :attr:`Batcher.stats` counts batches and operations (a
:class:`BatchStats`), so tests and benchmarks can see how well operations are being grouped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from receiver.exceptions import InboxUnavailable

__all__ = ["MAX_BATCH", "MAX_IN_FLIGHT", "BatchStats", "Batcher", "Failed", "Later"]

T = TypeVar("T")
R = TypeVar("R")

MAX_BATCH: Final = 256
"""The most operations one statement carries."""
MAX_IN_FLIGHT: Final = 2
"""The most batches of one kind running at once (each holds one pooled connection)."""


@dataclass(frozen=True)
class BatchStats:
    """How well one kind of operation is being batched."""

    batches: int
    """Batch statements run (a batch of one counts too)."""
    operations: int
    """Operations those batches carried."""
    largest: int
    """The most operations one batch carried."""
    alone: int
    """Operations redone on their own after their batch's statement could not do them (a lock to
    wait for, an error that belongs to one of them): counted in ``operations`` too."""
    failed: int = 0
    """Batches that failed as a whole (every caller raised: a lost database): counted in
    ``batches`` too."""

    @property
    def per_batch(self) -> float:
        return self.operations / self.batches if self.batches else 0.0


class Failed:
    """``run``'s outcome for a caller that must raise ``error`` (its own, unchanged)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Later(Generic[R]):
    """``run``'s outcome for a caller whose operation is finished by ``awaitable``, in a task of its
    own: its key stays taken until then, the batch's slot does not."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Awaitable[R]) -> None:
        self.awaitable = awaitable


Run = Callable[[list[T]], Awaitable[Sequence["R | Failed | Later[R]"]]]


@dataclass(slots=True)
class _Entry(Generic[T, R]):
    key: str
    item: T
    future: asyncio.Future[R]


class Batcher(Generic[T, R]):
    """Groups submitted operations into batches for ``run`` (see the module docstring).

    ``run`` receives the items of one batch (at most ``max_batch``, distinct keys) and returns one
    outcome per item, in the same order.
    """

    def __init__(
        self,
        run: Run[T, R],
        *,
        closed: str,
        max_batch: int = MAX_BATCH,
        max_in_flight: int = MAX_IN_FLIGHT,
        orphaned: Callable[[R], None] | None = None,
    ) -> None:
        if max_batch < 1 or max_in_flight < 1:
            raise ValueError("a batcher needs room for one batch of one operation")
        self._run = run
        self._orphaned = orphaned
        self._closed_message = closed
        self._max_batch = max_batch
        self._max_in_flight = max_in_flight
        self._pending: deque[_Entry[T, R]] = deque()
        self._taken: set[str] = set()
        """Keys of operations in a running batch or deferred (:class:`Later`), not yet settled."""
        self._running = 0
        self._scheduled = False
        self._closed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._batches = 0
        self._operations = 0
        self._largest = 0
        self._alone = 0
        self._failed = 0

    @property
    def stats(self) -> BatchStats:
        return BatchStats(self._batches, self._operations, self._largest, self._alone, self._failed)

    def submit(self, key: str, item: T) -> asyncio.Future[R]:
        """Queue one operation; a future of its outcome. A plain function: the caller awaits."""
        if self._closed:
            raise InboxUnavailable(self._closed_message)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append(_Entry(key, item, future))
        if not self._scheduled and self._running < self._max_in_flight:
            self._scheduled = True
            loop.call_soon(self._start)
        return future

    async def drain(self) -> None:
        """Refuse new operations; return once every submitted one is settled."""
        self._closed = True
        self._start()
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._start()
        for entry in self._pending:  # pragma: no cover - a pending key is always held by a task
            self._fail(entry, InboxUnavailable(self._closed_message))
        self._pending.clear()

    # -- forming and running batches ------------------------------------------------------------

    def _start(self) -> None:
        """Start batches while there is room and something to run."""
        self._scheduled = False
        while self._running < self._max_in_flight and self._pending:
            batch = self._take()
            if not batch:
                return
            self._running += 1
            task = asyncio.get_running_loop().create_task(self._run_batch(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _take(self) -> list[_Entry[T, R]]:
        """The next batch: pending operations in submission order, one per free key."""
        batch: list[_Entry[T, R]] = []
        keys: set[str] = set()
        held: list[_Entry[T, R]] = []
        pending, taken = self._pending, self._taken
        while pending and len(batch) < self._max_batch:
            entry = pending.popleft()
            if entry.future.done():  # cancelled before its batch started: left out
                continue
            if entry.key in keys or entry.key in taken:
                held.append(entry)
                continue
            keys.add(entry.key)
            batch.append(entry)
        pending.extendleft(reversed(held))
        taken |= keys
        return batch

    async def _run_batch(self, batch: list[_Entry[T, R]]) -> None:
        try:
            try:
                outcomes = await self._run([entry.item for entry in batch])
            except Exception as error:  # the whole batch failed: every caller raises
                self._failed += 1
                if len(batch) == 1:  # that caller's own exception, unchanged
                    outcomes = [Failed(error)]
                else:
                    outcomes = [Failed(_copy(error)) for _ in batch]
            except BaseException:  # cancelled (the loop is shutting down): nobody is left hanging
                for entry in batch:
                    self._fail(entry, InboxUnavailable(self._closed_message))
                raise
            self._batches += 1
            self._operations += len(batch)
            self._largest = max(self._largest, len(batch))
            for entry, outcome in zip(batch, outcomes, strict=True):
                if isinstance(outcome, Later):
                    self._defer(entry, outcome.awaitable)
                elif isinstance(outcome, Failed):
                    self._fail(entry, outcome.error)
                else:
                    self._settle(entry, outcome)
        finally:
            self._running -= 1
            self._start()

    def _defer(self, entry: _Entry[T, R], awaitable: Awaitable[R]) -> None:
        self._alone += 1
        task = asyncio.ensure_future(awaitable)
        self._tasks.add(task)

        def done(task: asyncio.Future[R]) -> None:
            self._tasks.discard(task)
            if task.cancelled():
                self._fail(entry, InboxUnavailable(self._closed_message))
            elif (error := task.exception()) is not None:
                self._fail(entry, error)
            else:
                self._settle(entry, task.result())
            self._start()

        task.add_done_callback(done)

    def _settle(self, entry: _Entry[T, R], value: R) -> None:
        self._taken.discard(entry.key)
        if not entry.future.done():
            entry.future.set_result(value)
        elif self._orphaned is not None:  # the caller was cancelled; the operation ran anyway
            self._orphaned(value)

    def _fail(self, entry: _Entry[T, R], error: BaseException) -> None:
        self._taken.discard(entry.key)
        if not entry.future.done():
            entry.future.set_exception(error)


def _copy(error: Exception) -> Exception:
    """A fresh exception like ``error`` for one caller of a failed batch (callers must not share
    one exception object: raising it sets its traceback), chained to the same cause."""
    with contextlib.suppress(Exception):
        clone = type(error)(*error.args)
        clone.__cause__ = error.__cause__
        return clone
    return error  # pragma: no cover - an exception type that cannot be rebuilt from its args
