"""One clock protocol for the project (``now() -> aware UTC datetime``), accepted by the
verifier, the inbox and the sender alike, and one never-the-same-second wire clock."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from receiver.clock import (
    Clock,
    FreshWireClock,
    datetime_source,
    next_fresh_second,
    seconds_source,
    system_clock,
    unix_seconds,
)
from receiver.exceptions import TimestampTooOld
from receiver.inbox import ClaimOutcome, MemoryInbox
from receiver.signing import Secret, Verifier
from sender_sim.clock import RealClock, VirtualClock

T0 = datetime(2026, 1, 1, 9, 57, 50, 250000, tzinfo=UTC)


class Fixed:
    """A clock that stands still until moved."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


def test_every_project_clock_is_the_one_protocol() -> None:
    for clock in (system_clock, RealClock(), VirtualClock(T0), FreshWireClock(), Fixed(T0)):
        assert isinstance(clock, Clock)
        assert clock.now().tzinfo is not None


def test_sources_read_clock_objects_and_the_historical_callables() -> None:
    assert datetime_source(Fixed(T0))() == T0
    assert datetime_source(lambda: T0)() == T0
    assert seconds_source(Fixed(T0))() == T0.timestamp()
    assert seconds_source(lambda: 12.5)() == 12.5
    assert seconds_source(system_clock) is time.time  # the verifier's hot path pays nothing
    assert unix_seconds(T0) == int(T0.timestamp())


def test_the_verifier_takes_a_clock() -> None:
    secret = Secret("whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    body = b'{"type":"ping"}'
    stamp = unix_seconds(T0)
    clock = Fixed(T0)
    verifier = Verifier([secret], clock=clock)
    headers = verifier.sign(body, event_id="evt_1", timestamp=stamp)
    assert verifier.verify(body, headers).timestamp == stamp
    clock.at = T0 + timedelta(seconds=301)  # read at each call
    with pytest.raises(TimestampTooOld):
        verifier.verify(body, headers)
    assert Verifier([secret], clock=lambda: float(stamp)).verify(body, headers).event_id


def test_the_inbox_takes_a_clock() -> None:
    clock = VirtualClock(T0)
    inbox = MemoryInbox(lease=timedelta(seconds=30), clock=clock)

    async def claims() -> list[ClaimOutcome]:
        first = await inbox.claim("evt_1")
        second = await inbox.claim("evt_1")
        clock.advance(timedelta(seconds=31))  # the lease expired: taken over
        third = await inbox.claim("evt_1")
        return [first.outcome, second.outcome, third.outcome]

    assert asyncio.run(claims()) == [
        ClaimOutcome.CLAIMED,
        ClaimOutcome.IN_FLIGHT,
        ClaimOutcome.CLAIMED,
    ]


def test_next_fresh_second_never_repeats_or_goes_back_when_fresh() -> None:
    assert next_fresh_second(100, None) == 100
    assert next_fresh_second(100, 100) == 101
    assert next_fresh_second(99, 100) == 101
    assert next_fresh_second(105, 100) == 105
    assert next_fresh_second(100, 100, fresh=False) == 100


def test_the_fresh_wire_clock_never_gives_the_same_second_twice() -> None:
    base = Fixed(T0)
    wire = FreshWireClock(base)
    seconds = [unix_seconds(wire.now()) for _ in range(5)]
    assert seconds == [unix_seconds(T0) + n for n in range(5)]
    base.at = T0 + timedelta(seconds=10)  # real time overtook the drift: real time again
    assert wire.now() == base.at
    assert FreshWireClock().now().tzinfo is not None
