"""The deadline rule at microsecond precision: retry iff next + budget < deadline, the first attempt
included; equality and beyond dead-letter as ``deadline_exhausted``."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

import pytest

from sender_sim import DeadLetterReason, FullJitter, Policy, State
from tests.sender_sim.conftest import T0, US, MakeSim, always

POLICY = Policy(
    expected_attempt_time=timedelta(seconds=30),
    max_clock_skew=timedelta(seconds=2),
    backoff=FullJitter(base=timedelta(seconds=60), cap=timedelta(seconds=600)),
)
BUDGET = timedelta(seconds=32)


@pytest.mark.parametrize(
    ("offset", "expected"),
    [(-1, State.SCHEDULED), (0, State.DEAD_LETTER), (1, State.DEAD_LETTER)],
    ids=["deadline-1us", "deadline-exactly", "deadline+1us"],
)
def test_first_attempt_boundary(make_sim: MakeSim, offset: int, expected: State) -> None:
    sim = make_sim(policy=POLICY)
    first = T0 + timedelta(minutes=3)
    # the first attempt would end (budget included) `offset` µs after the deadline
    deadline = first + BUDGET - offset * US
    did = sim.publish(endpoint_id="partner", deadline_at=deadline, first_attempt_at=first)
    delivery = sim.delivery(did)
    assert delivery.state is expected
    if expected is State.DEAD_LETTER:
        assert delivery.reason is DeadLetterReason.DEADLINE_EXHAUSTED
        assert sim.attempts(did) == []
        assert sim.ledger(did)[0].cause == "published_too_late"
    else:
        asyncio.run(sim.run_until_settled(delivery_ids=[did]))
        assert sim.delivery(did).state is State.DELIVERED
        assert sim.attempts(did)[0].started_at == first


@pytest.mark.parametrize(
    ("offset", "expected"),
    [(-1, State.SCHEDULED), (0, State.DEAD_LETTER), (1, State.DEAD_LETTER)],
    ids=["deadline-1us", "deadline-exactly", "deadline+1us"],
)
@pytest.mark.parametrize("seed", [1, 7, 2026])
def test_later_attempt_boundary(make_sim: MakeSim, seed: int, offset: int, expected: State) -> None:
    # replay the seeded jitter the simulator will draw after attempt 1 (ceiling: base·2^0 = 60 s)
    draw = random.Random(seed).randint(0, 60_000_000)
    next_at = T0 + timedelta(microseconds=draw)
    deadline = next_at + BUDGET - offset * US
    sim = make_sim(always(503), policy=POLICY, seed=seed)
    did = sim.publish(endpoint_id="partner", deadline_at=deadline, first_attempt_at=T0)
    asyncio.run(sim.run_due())
    delivery = sim.delivery(did)
    assert delivery.attempt == 1
    assert delivery.state is expected
    last = sim.ledger(did)[-1]
    if expected is State.SCHEDULED:
        assert delivery.next_attempt_at == next_at
        assert last.cause == "retry_scheduled"
    else:
        assert delivery.reason is DeadLetterReason.DEADLINE_EXHAUSTED
        assert last.cause == "next_attempt_past_deadline"
        assert last.details["next_at"].endswith(f"{next_at.microsecond:06d}Z")


def test_a_late_claim_is_refused_rather_than_squeezed_in(make_sim: MakeSim) -> None:
    sim = make_sim(policy=POLICY)
    deadline = T0 + timedelta(minutes=10)
    did = sim.publish(endpoint_id="partner", deadline_at=deadline, first_attempt_at=T0)
    # the worker was down: it wakes when an attempt would end exactly at the deadline
    sim.set_time(deadline - BUDGET)
    report = asyncio.run(sim.run_due())
    delivery = sim.delivery(did)
    assert report.sent == 0
    assert delivery.state is State.DEAD_LETTER
    assert delivery.reason is DeadLetterReason.DEADLINE_EXHAUSTED
    assert sim.ledger(did)[-1].cause == "late_start_refused"


@pytest.mark.parametrize(("early", "claims"), [(US, True), (timedelta(0), False)])
def test_a_slow_worker_cannot_start_past_the_rule_in_true_time(
    make_sim: MakeSim, early: timedelta, claims: bool
) -> None:
    sim = make_sim(policy=POLICY)
    deadline = T0 + timedelta(minutes=10)
    did = sim.publish(endpoint_id="partner", deadline_at=deadline, first_attempt_at=T0)
    # a worker 2 s slow (max_clock_skew is 2 s): in TRUE time its attempt would end
    # `early` before the deadline; its own clock believes it has 2 s more than it has
    slow = sim.worker("slow", clock_skew=timedelta(seconds=-2))
    sim.set_time(deadline - POLICY.expected_attempt_time - early)
    leases = slow.claim()
    assert bool(leases) is claims
    if not claims:
        assert sim.delivery(did).reason is DeadLetterReason.DEADLINE_EXHAUSTED


def test_a_skewed_default_worker_still_runs_to_completion(make_sim: MakeSim) -> None:
    sim = make_sim(always(503), policy=POLICY, worker_skew=timedelta(seconds=-2))
    did = sim.publish(endpoint_id="partner", deadline_at=T0 + timedelta(minutes=10))
    asyncio.run(sim.run_until_settled(delivery_ids=[did]))
    delivery = sim.delivery(did)
    assert delivery.state is State.DEAD_LETTER
    # every attempt started in true time with its budget before the deadline
    for attempt in sim.attempts(did):
        assert attempt.started_at + POLICY.expected_attempt_time < delivery.deadline_at
