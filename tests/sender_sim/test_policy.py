"""Policies as data: the seed-002 schedule measured from the preceding scheduled time, full-jitter
bounds (a property), ``Retry-After`` parsing (a property), and policy validation."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sender_sim import (
    SEED_002_SCHEDULE,
    ConfigurationError,
    DeadLetterReason,
    FixedSchedule,
    FullJitter,
    Policy,
    State,
    parse_retry_after,
    policy_named,
)
from sender_sim.clock import VirtualClock
from tests.sender_sim.conftest import T0, US, MakeSim

MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)


def test_the_seed_002_schedule_is_built_in() -> None:
    assert SEED_002_SCHEDULE.delays == (
        timedelta(0),
        MINUTE,
        5 * MINUTE,
        15 * MINUTE,
        HOUR,
        6 * HOUR,
    )
    policy = policy_named("schedule")
    assert policy.backoff == SEED_002_SCHEDULE
    assert policy.max_attempts == 10
    assert policy.profile.name == "schedule"


def test_fixed_schedule_delays_run_from_the_preceding_scheduled_time(make_sim: MakeSim) -> None:
    clocks: list[VirtualClock] = []
    seen: list[datetime] = []

    def slow_failure(request: httpx.Request) -> httpx.Response:
        seen.append(clocks[0].now())
        clocks[0].advance(timedelta(seconds=4))  # each attempt takes 4 s of simulated time
        return httpx.Response(500)

    policy = policy_named("schedule").with_(expected_attempt_time=timedelta(seconds=5))
    sim = make_sim(slow_failure, policy=policy)
    assert isinstance(sim.clock, VirtualClock)
    clocks.append(sim.clock)
    did = sim.publish(endpoint_id="partner", deadline_at=T0 + timedelta(days=3))
    asyncio.run(sim.run_until_settled(delivery_ids=[did]))
    offsets = [timedelta(0), MINUTE, 6 * MINUTE, 21 * MINUTE, 81 * MINUTE]
    offsets += [81 * MINUTE + k * 6 * HOUR for k in range(1, 6)]
    assert seen == [T0 + o for o in offsets]  # no 4-second drift accumulates
    delivery = sim.delivery(did)
    assert (delivery.state, delivery.reason) == (
        State.DEAD_LETTER,
        DeadLetterReason.ATTEMPTS_EXHAUSTED,
    )
    assert delivery.attempt == 10


def test_a_late_worker_does_not_shift_the_schedule(make_sim: MakeSim) -> None:
    sim = make_sim(lambda r: httpx.Response(503), policy=policy_named("schedule"))
    did = sim.publish(endpoint_id="partner", deadline_at=T0 + timedelta(days=1))
    asyncio.run(sim.run_due())
    sim.advance(3 * MINUTE)  # attempt 2 was due at +1 m; the worker only runs at +3 m
    asyncio.run(sim.run_due())
    assert sim.attempts(did)[1].started_at == T0 + 3 * MINUTE
    assert sim.delivery(did).next_attempt_at == T0 + 6 * MINUTE  # +5 m after +1 m, not after +3 m


@given(
    base_ms=st.integers(1, 100_000),
    cap_factor=st.integers(1, 1000),
    made=st.integers(1, 80),
    seed=st.integers(0, 2**32),
)
def test_full_jitter_stays_within_its_bounds(
    base_ms: int, cap_factor: int, made: int, seed: int
) -> None:
    base = timedelta(milliseconds=base_ms)
    cap = base * cap_factor
    jitter = FullJitter(base, cap)
    ended = T0 + timedelta(microseconds=seed % 1_000_000)
    delay = jitter.next_at(made, T0, ended, random.Random(seed)) - ended
    ceiling = timedelta(microseconds=min(cap // US, (base // US) * 2 ** (made - 1)))
    assert timedelta(0) <= delay <= ceiling
    assert jitter.ceiling(made) == ceiling
    # the same seed replays the same delay
    assert jitter.next_at(made, T0, ended, random.Random(seed)) - ended == delay


@given(
    delays=st.lists(st.integers(0, 10**6), min_size=1, max_size=8),
    made=st.integers(1, 20),
    late=st.integers(0, 10**6),
)
def test_fixed_schedule_ignores_when_the_attempt_ended(
    delays: list[int], made: int, late: int
) -> None:
    schedule = FixedSchedule(tuple(timedelta(seconds=d) for d in delays))
    scheduled = T0
    ended = T0 + timedelta(seconds=late)
    expected = scheduled + timedelta(seconds=delays[min(made, len(delays) - 1)])
    assert schedule.next_at(made, scheduled, ended, random.Random(0)) == expected


@given(st.integers(0, 10**9))
def test_retry_after_seconds(seconds: int) -> None:
    assert parse_retry_after(str(seconds), T0) == timedelta(seconds=seconds)


@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)))
def test_retry_after_http_date(naive: datetime) -> None:
    when = naive.replace(microsecond=0, tzinfo=UTC)
    assert parse_retry_after(format_datetime(when, usegmt=True), T0) == max(timedelta(0), when - T0)


@given(st.text(max_size=40))
def test_retry_after_never_raises(text: str) -> None:
    result = parse_retry_after(text, T0)
    assert result is None or result >= timedelta(0)


@pytest.mark.parametrize(
    "changes",
    [
        {"max_attempts": 0},
        {"timeout": timedelta(0)},
        {"lease_duration": timedelta(seconds=5), "timeout": timedelta(seconds=10)},
        {"expected_attempt_time": timedelta(seconds=-1)},
        {"redrive_extra_attempts": 0},
    ],
)
def test_bad_policies_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        Policy().with_(**changes)


def test_the_schedule_profile_allows_at_most_ten_attempts() -> None:
    schedule = policy_named("schedule")
    assert schedule.with_(max_attempts=10).max_attempts == 10
    with pytest.raises(ConfigurationError, match="at most 10 total attempts, not 11"):
        schedule.with_(max_attempts=11)
    assert policy_named("strict").with_(max_attempts=11).max_attempts == 11


def test_unknown_names_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="choose one of strict, schedule"):
        policy_named("lenient")
    with pytest.raises(ConfigurationError):
        FullJitter(timedelta(0), timedelta(1))
    with pytest.raises(ConfigurationError):
        FixedSchedule(())
