"""The PostgreSQL inbox's batcher on its own (no database): how operations become batches.

A fake ``run`` records every batch it is given and, where a test needs a batch to stay in flight,
waits for an event the test sets. Everything runs on one event loop; nothing waits for real time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from receiver.exceptions import InboxError, InboxUnavailable
from receiver.inbox.postgres_batch import Batcher, BatchStats, Failed, Later

pytestmark = pytest.mark.anyio


class Recorder:
    """A ``run`` that answers ``item * 10`` for every item and keeps the batches it was given."""

    def __init__(self, *, hold: bool = False) -> None:
        self.batches: list[list[int]] = []
        self.gates: list[asyncio.Event] = []
        self.hold = hold
        self.running = 0
        self.most_running = 0
        self.started = asyncio.Event()

    async def __call__(self, items: list[int]) -> Sequence[int | Failed | Later[int]]:
        self.batches.append(list(items))
        self.started.set()
        gate = asyncio.Event()
        self.gates.append(gate)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if self.hold:
                await gate.wait()
            return [item * 10 for item in items]
        finally:
            self.running -= 1

    async def entered(self, count: int) -> None:
        """Wait until ``count`` batches have started."""
        while len(self.batches) < count:
            self.started.clear()
            await self.started.wait()


def _key(item: int) -> str:
    return f"k{item // 100}"  # 101, 102 … share key k1: they must never meet in one batch


async def test_the_first_operation_of_an_idle_batcher_starts_alone_and_at_once() -> None:
    run = Recorder(hold=True)
    batcher: Batcher[int, int] = Batcher(run, closed="closed", max_in_flight=1)
    first = batcher.submit("a", 1)
    await run.entered(1)
    second = batcher.submit("b", 2)  # arrives while the first batch is in flight
    third = batcher.submit("c", 3)
    for _ in range(5):
        await asyncio.sleep(0)
    assert run.batches == [[1]]  # the arrivals wait for the next batch
    run.gates[0].set()
    assert await first == 10
    await run.entered(2)
    run.gates[1].set()
    assert (await second, await third) == (20, 30)
    assert run.batches == [[1], [2, 3]]
    assert batcher.stats == BatchStats(batches=2, operations=3, largest=2, alone=0)


async def test_operations_of_one_key_never_share_a_batch_and_keep_their_order() -> None:
    run = Recorder()
    batcher: Batcher[int, int] = Batcher(run, closed="closed", max_in_flight=2)
    items = [101, 201, 102, 301, 103, 202]
    results = await asyncio.gather(*(batcher.submit(_key(item), item) for item in items))
    assert results == [item * 10 for item in items]
    assert run.batches == [[101, 201, 301], [102, 202], [103]]


async def test_a_batch_carries_at_most_max_batch_operations() -> None:
    run = Recorder()
    batcher: Batcher[int, int] = Batcher(run, closed="closed", max_batch=2, max_in_flight=1)
    await asyncio.gather(*(batcher.submit(str(item), item) for item in range(5)))
    assert [len(batch) for batch in run.batches] == [2, 2, 1]


async def test_at_most_max_in_flight_batches_run_at_once() -> None:
    run = Recorder(hold=True)
    batcher: Batcher[int, int] = Batcher(run, closed="closed", max_batch=1, max_in_flight=2)
    futures = [batcher.submit(str(item), item) for item in range(4)]
    await run.entered(2)
    for _ in range(5):
        await asyncio.sleep(0)
    assert run.batches == [[0], [1]]
    run.gates[0].set()
    await run.entered(3)
    run.gates[1].set()
    run.gates[2].set()
    await run.entered(4)
    run.gates[3].set()
    assert await asyncio.gather(*futures) == [0, 10, 20, 30]
    assert run.most_running == 2


async def test_a_failed_batch_fails_every_caller_each_with_its_own_exception() -> None:
    cause = OSError("connection reset")

    async def run(items: list[int]) -> Sequence[int | Failed | Later[int]]:
        raise InboxUnavailable("the database is gone") from cause

    batcher: Batcher[int, int] = Batcher(run, closed="closed")
    results = await asyncio.gather(
        *(batcher.submit(str(item), item) for item in range(3)), return_exceptions=True
    )
    assert all(isinstance(error, InboxUnavailable) for error in results)
    assert [str(error) for error in results] == ["the database is gone"] * 3
    assert len({id(error) for error in results}) == 3  # never one object raised in three tasks
    assert all(error.__cause__ is cause for error in results)  # type: ignore[union-attr]


async def test_a_batch_of_one_fails_with_the_very_exception_run_raised() -> None:
    raised = InboxError("only mine")

    async def run(items: list[int]) -> Sequence[int | Failed | Later[int]]:
        raise raised

    batcher: Batcher[int, int] = Batcher(run, closed="closed")
    with pytest.raises(InboxError) as caught:
        await batcher.submit("a", 1)
    assert caught.value is raised


async def test_outcomes_may_fail_one_caller_or_finish_it_later_holding_its_key() -> None:
    finish = asyncio.Event()
    seen: list[list[int]] = []

    async def later(item: int) -> int:
        await finish.wait()
        return item * 100

    async def run(items: list[int]) -> Sequence[int | Failed | Later[int]]:
        seen.append(list(items))
        outcomes: list[int | Failed | Later[int]] = []
        for item in items:
            if item == 2:
                outcomes.append(Failed(ValueError("two is refused")))
            elif item == 3:
                outcomes.append(Later(later(item)))
            else:
                outcomes.append(item)
        return outcomes

    batcher: Batcher[int, int] = Batcher(run, closed="closed", max_in_flight=1)
    one, two, three = (batcher.submit(str(item), item) for item in (1, 2, 3))
    assert await one == 1
    with pytest.raises(ValueError, match="two is refused"):
        await two
    # The slot is free again (another key runs at once), but key "3" stays taken until later.
    again = batcher.submit("3", 4)
    other = batcher.submit("5", 5)
    assert await other == 5
    assert not three.done()
    assert not again.done()
    assert seen == [[1, 2, 3], [5]]
    finish.set()
    assert await three == 300
    assert await again == 4
    assert seen == [[1, 2, 3], [5], [4]]
    assert batcher.stats.alone == 1


async def test_a_caller_cancelled_before_its_batch_is_left_out_and_after_changes_nothing() -> None:
    run = Recorder(hold=True)
    batcher: Batcher[int, int] = Batcher(run, closed="closed", max_in_flight=1)

    async def call(item: int) -> int:
        return await batcher.submit(str(item), item)

    first = asyncio.ensure_future(call(1))
    await run.entered(1)
    in_flight = asyncio.ensure_future(call(2))  # queued for the next batch …
    dropped = asyncio.ensure_future(call(3))
    await asyncio.sleep(0)
    dropped.cancel()  # … and cancelled before that batch started: left out
    run.gates[0].set()
    assert await first == 10
    await run.entered(2)
    in_flight_batch = run.batches[1]
    assert in_flight_batch == [2]
    # Cancelled while its batch runs: the batch goes on, later callers are served.
    in_flight.cancel()
    follower = batcher.submit("4", 4)
    run.gates[1].set()
    with pytest.raises(asyncio.CancelledError):
        await in_flight
    with pytest.raises(asyncio.CancelledError):
        await dropped
    await run.entered(3)
    run.gates[2].set()
    assert await follower == 40
    assert run.batches == [[1], [2], [4]]


async def test_drain_runs_what_was_submitted_then_refuses_new_operations() -> None:
    run = Recorder()
    batcher: Batcher[int, int] = Batcher(run, closed="the inbox is closed", max_batch=2)
    futures = [batcher.submit("a", 1), batcher.submit("a", 2), batcher.submit("b", 3)]
    await batcher.drain()
    assert [future.result() for future in futures] == [10, 20, 30]
    with pytest.raises(InboxUnavailable, match="the inbox is closed"):
        batcher.submit("c", 4)


def test_a_batcher_needs_room() -> None:
    with pytest.raises(ValueError, match="room"):
        Batcher(Recorder(), closed="closed", max_batch=0)


turns = st.lists(  # operations submitted per loop turn: (key, run delay in turns)
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3)), max_size=8), min_size=1, max_size=6
)


@settings(max_examples=60, deadline=None)
@given(
    schedule=turns,
    max_batch=st.integers(1, 4),
    max_in_flight=st.integers(1, 3),
    later_every=st.integers(0, 3),
)
def test_every_operation_is_answered_from_its_own_batch_in_key_order(
    schedule: list[list[tuple[int, int]]], max_batch: int, max_in_flight: int, later_every: int
) -> None:
    """Whatever the timing: every caller gets its own item's answer; batches have distinct keys,
    at most ``max_batch`` items, at most ``max_in_flight`` run at once; per key, operations run
    in submission order; an item finished later holds its key until then."""
    ran: list[tuple[int, str]] = []  # (item, key) in the order their batch (or later) ran them
    batches: list[list[tuple[int, str, int]]] = []
    running = 0
    most = 0
    held: set[str] = set()

    async def finish(item: int, key: str, delay: int) -> int:
        for _ in range(delay):
            await asyncio.sleep(0)
        held.discard(key)
        return item

    async def run(items: list[tuple[int, str, int]]) -> Sequence[int | Failed | Later[int]]:
        nonlocal running, most
        assert len(items) <= max_batch
        keys = [key for _, key, _ in items]
        assert len(set(keys)) == len(keys)
        assert not held & set(keys), "a key finished later was batched again too early"
        batches.append(items)
        running += 1
        most = max(most, running)
        try:
            for _ in range(max(delay for _, _, delay in items)):
                await asyncio.sleep(0)
            outcomes: list[int | Failed | Later[int]] = []
            for item, key, delay in items:
                ran.append((item, key))
                if later_every and item % later_every == 0:
                    held.add(key)
                    outcomes.append(Later(finish(item, key, delay)))
                else:
                    outcomes.append(item)
            return outcomes
        finally:
            running -= 1

    async def scenario() -> None:
        batcher: Batcher[tuple[int, str, int], int] = Batcher(
            run, closed="closed", max_batch=max_batch, max_in_flight=max_in_flight
        )
        futures: list[tuple[int, asyncio.Future[int]]] = []
        item = 0
        for turn in schedule:
            for key, delay in turn:
                item += 1
                futures.append((item, batcher.submit(f"k{key}", (item, f"k{key}", delay))))
            await asyncio.sleep(0)
        for item, future in futures:
            assert await future == item
        await batcher.drain()
        stats = batcher.stats
        assert stats.operations == item == sum(len(batch) for batch in batches)
        assert stats.batches == len(batches)

    asyncio.run(scenario())
    assert most <= max_in_flight
    order: dict[str, list[int]] = {}
    for item, key in ran:
        order.setdefault(key, []).append(item)
    assert all(items == sorted(items) for items in order.values()), order
