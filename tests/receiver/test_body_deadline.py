"""The swept body deadline: late reads time out (within the sweep's slack), others are untouched.

Real time, in fractions of a second: the deadline is the event loop's own clock.
"""

from __future__ import annotations

import asyncio

import pytest

from receiver.body_deadline import SWEEPS_PER_TIMEOUT, BodyDeadlines

pytestmark = pytest.mark.anyio

TIMEOUT_S = 0.2


async def _read(deadlines: BodyDeadlines, wait: asyncio.Future[None]) -> str:
    """What the middleware does around a body read."""
    task = asyncio.current_task()
    assert task is not None
    loop = task.get_loop()
    deadlines.start(task, loop)
    try:
        await wait
        return "read"
    except asyncio.CancelledError:
        if deadlines.stop(task, loop) and task.uncancel() == 0:
            return "timed out"
        raise
    finally:
        deadlines.stop(task, loop)


async def test_a_read_that_outlives_its_deadline_times_out_within_the_slack() -> None:
    deadlines = BodyDeadlines(TIMEOUT_S)
    loop = asyncio.get_running_loop()
    never: asyncio.Future[None] = loop.create_future()
    started = loop.time()
    assert await _read(deadlines, never) == "timed out"  # real time: the deadline has to pass
    elapsed = loop.time() - started
    assert TIMEOUT_S <= elapsed < TIMEOUT_S * (1 + 2 / SWEEPS_PER_TIMEOUT) + 0.1


async def test_a_read_in_time_is_untouched_and_the_sweeper_stops() -> None:
    deadlines = BodyDeadlines(TIMEOUT_S)
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    ready.set_result(None)
    assert await _read(deadlines, ready) == "read"
    assert deadlines._loops[loop].deadlines == {}
    # With nothing left to watch, the next sweep drops the loop's state (no timer keeps it).
    await asyncio.sleep(deadlines.sweep_every * 1.5)  # real time: one sweep has to pass
    assert loop not in deadlines._loops


async def test_another_cancellation_during_the_read_is_not_a_timeout() -> None:
    deadlines = BodyDeadlines(TIMEOUT_S)
    loop = asyncio.get_running_loop()
    never: asyncio.Future[None] = loop.create_future()
    reading = asyncio.ensure_future(_read(deadlines, never))
    await asyncio.sleep(0)
    reading.cancel()  # a shutdown, say: it must propagate
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert deadlines._loops[loop].deadlines == {}
    assert deadlines._loops[loop].expired == set()
