"""Redrive: required fields, revalidation (digest, destination, envelope, deadline), the atomic
1-100 bulk, compare-and-set, one explicit attempt past the limit, double redrive."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sender_sim import (
    DeadLetterReason,
    FaultPlan,
    Policy,
    RedriveIncomplete,
    RedriveRefused,
    RedriveScope,
    Simulator,
    SQLiteStore,
    State,
    VirtualClock,
)
from sender_sim.transitions import redrive
from tests.sender_sim.conftest import SECRET, T0, URL, FixedRandom, MakeSim, Receiver, always

POLICY = Policy(max_attempts=2)
LATER = T0 + timedelta(hours=5)


def _gone(sim: Simulator, key: str = "ren_1", **kw: Any) -> str:
    """A delivery that dead-letters at publication (its first attempt cannot fit)."""
    return sim.publish(
        endpoint_id="partner",
        deadline_at=T0 + timedelta(seconds=10),
        business_key=key,
        data={"renewal_id": key},
        **kw,
    )


def _redrive(sim: Simulator, scope: RedriveScope, deadline: datetime = LATER) -> Any:
    return sim.redrive(actor="ops:lee", reason="window extended", deadline_at=deadline, scope=scope)


@pytest.mark.parametrize(
    ("field", "value"),
    [("actor", ""), ("actor", None), ("reason", " "), ("deadline_at", None), ("scope", None)],
)
def test_missing_fields_are_refused_and_nothing_is_recorded(
    make_sim: MakeSim, field: str, value: object
) -> None:
    sim = make_sim()
    did = _gone(sim)
    request: dict[str, Any] = {
        "actor": "ops:lee",
        "reason": "window extended",
        "deadline_at": LATER,
        "scope": RedriveScope(delivery_ids=(did,)),
    }
    request[field] = value
    with pytest.raises(RedriveIncomplete, match="a redrive needs"):
        sim.redrive(**request)
    assert sim.decisions() == []
    assert sim.delivery(did).state is State.DEAD_LETTER


def test_an_empty_scope_is_refused_as_replay_all(make_sim: MakeSim) -> None:
    sim = make_sim()
    _gone(sim)
    with pytest.raises(RedriveIncomplete, match="scope"):
        _redrive(sim, RedriveScope())


def test_a_changed_digest_is_refused(make_sim: MakeSim) -> None:
    sim = make_sim()
    did = _gone(sim)
    event_id = sim.delivery(did).event_id
    sim.store.tamper_event_body(event_id, b'{"type":"hookproof.test","data":{"renewal_id":"x"}}')
    with pytest.raises(RedriveRefused) as refused:
        _redrive(sim, RedriveScope(delivery_ids=(did,)))
    assert refused.value.codes == {"digest_changed"}
    assert sim.delivery(did).state is State.DEAD_LETTER
    [decision] = sim.decisions()
    assert decision.result == "refused"
    assert decision.problems[0]["code"] == "digest_changed"
    assert sim.ledger(did)[-1].cause == "redrive_refused"


def test_a_changed_or_inactive_destination_is_refused(make_sim: MakeSim) -> None:
    sim = make_sim()
    did = _gone(sim)
    sim.set_endpoint_active("partner", False)
    with pytest.raises(RedriveRefused) as refused:
        _redrive(sim, RedriveScope(delivery_ids=(did,)))
    assert refused.value.codes == {"endpoint_inactive"}
    sim.add_endpoint("partner", URL.replace("8999", "9000"), [SECRET])
    with pytest.raises(RedriveRefused) as refused:
        _redrive(sim, RedriveScope(delivery_ids=(did,)))
    assert refused.value.codes == {"destination_changed"}


def test_a_deadline_that_cannot_fit_an_attempt_is_refused(make_sim: MakeSim) -> None:
    sim = make_sim()
    did = _gone(sim)
    budget = sim.policy.budget
    with pytest.raises(RedriveRefused) as refused:
        _redrive(sim, RedriveScope(delivery_ids=(did,)), T0 + budget)
    assert refused.value.codes == {"deadline_too_soon"}
    _redrive(sim, RedriveScope(delivery_ids=(did,)), T0 + budget + timedelta(microseconds=1))
    assert sim.delivery(did).state is State.SCHEDULED


def test_bulk_is_atomic_one_ineligible_item_queues_nothing(make_sim: MakeSim) -> None:
    sim = make_sim()
    dead = [_gone(sim, f"ren_{i}") for i in range(3)]
    alive = sim.publish(endpoint_id="partner", deadline_at=LATER)
    with pytest.raises(RedriveRefused) as refused:
        _redrive(sim, RedriveScope(delivery_ids=(*dead, alive)))
    assert refused.value.codes == {"not_dead_letter"}
    assert [p.delivery_id for p in refused.value.problems] == [alive]
    assert all(sim.delivery(d).state is State.DEAD_LETTER for d in dead)
    result = _redrive(sim, RedriveScope(delivery_ids=tuple(dead)))
    assert result.delivery_ids == tuple(dead)
    assert all(sim.delivery(d).state is State.SCHEDULED for d in dead)
    assert [d.result for d in sim.decisions()] == ["refused", "queued"]


def test_bulk_takes_at_most_100(make_sim: MakeSim) -> None:
    sim = make_sim()
    for i in range(101):
        _gone(sim, "cohort", delivery_id=f"del_{i:03d}")
    with pytest.raises(RedriveRefused) as refused:
        _redrive(sim, RedriveScope(business_key="cohort"))
    assert "scope_too_large" in refused.value.codes
    assert len(sim.dlq()) == 101
    ids = tuple(f"del_{i:03d}" for i in range(100))
    assert len(_redrive(sim, RedriveScope(delivery_ids=ids)).delivery_ids) == 100
    assert [d.delivery_id for d in sim.dlq()] == ["del_100"]


def test_unknown_ids_and_empty_filters_are_refused(make_sim: MakeSim) -> None:
    sim = make_sim()
    with pytest.raises(RedriveRefused) as refused:
        _redrive(sim, RedriveScope(delivery_ids=("del_nope",)))
    assert refused.value.codes == {"not_found"}
    with pytest.raises(RedriveRefused) as refused:
        _redrive(sim, RedriveScope(business_key="ren_none"))
    assert refused.value.codes == {"empty_scope"}


def test_double_redrive_the_second_is_refused_and_recorded(make_sim: MakeSim) -> None:
    sim = make_sim()
    did = _gone(sim)
    _redrive(sim, RedriveScope(delivery_ids=(did,)))
    with pytest.raises(RedriveRefused) as refused:
        _redrive(sim, RedriveScope(delivery_ids=(did,)))
    assert refused.value.codes == {"not_dead_letter"}
    assert [d.result for d in sim.decisions()] == ["queued", "refused"]
    assert [r.cause for r in sim.ledger(did)][-2:] == ["redriven", "redrive_refused"]
    assert sim.metrics().redrive_outcomes == {"queued": 1, "refused": 1}


def test_the_double_redrive_fault_submits_twice(make_sim: MakeSim) -> None:
    sim = make_sim(faults=FaultPlan.parse(["double_redrive"]))
    did = _gone(sim)
    result = _redrive(sim, RedriveScope(delivery_ids=(did,)))
    assert result.duplicate_refused == 2
    assert [d.result for d in sim.decisions()] == ["queued", "refused"]
    assert "fault:double_redrive" in [r.cause for r in sim.ledger(did)]
    assert sim.delivery(did).redrives == 1


def test_two_operators_compare_and_set(tmp_path: Path) -> None:
    path = tmp_path / "sender.db"
    clock = VirtualClock(T0)
    one = Simulator(SQLiteStore(path), clock=clock)
    other = Simulator(SQLiteStore(path), clock=clock)
    for sim in (one, other):
        sim.add_endpoint("partner", URL, [SECRET])
    did = _gone(one)
    stale = other.store.delivery(did)  # operator two read the DLQ before operator one acted
    _redrive(one, RedriveScope(delivery_ids=(did,)))
    step = redrive(
        stale,
        actor="ops:two",
        reason="r",
        deadline_at=LATER,
        now=T0,
        policy=other.policy,
        decision_id=0,
    )
    assert step is not None
    from sender_sim import Change

    queued = other.store.apply_redrive(
        [Change(stale, step.delivery, step.row)],
        at=T0,
        actor="ops:two",
        reason="r",
        scope={"delivery_ids": [did]},
        deadline_at=LATER,
    )
    assert queued is None  # the compare-and-set lost: nothing queued, nothing recorded
    assert one.delivery(did).redrives == 1
    assert [d.actor for d in one.decisions()] == ["ops:lee"]
    one.store.close()
    other.store.close()


def test_one_explicit_attempt_past_the_limit_then_back_to_the_dlq(make_sim: MakeSim) -> None:
    sim = make_sim(always(503), policy=POLICY)
    did = sim.publish(endpoint_id="partner", deadline_at=T0 + timedelta(hours=1))
    asyncio.run(sim.run_until_settled(delivery_ids=[did]))
    spent = sim.delivery(did)
    assert (spent.reason, spent.attempt) == (DeadLetterReason.ATTEMPTS_EXHAUSTED, 2)
    _redrive(sim, RedriveScope(reason=DeadLetterReason.ATTEMPTS_EXHAUSTED))
    assert sim.delivery(did).max_attempts == 3
    asyncio.run(sim.run_until_settled(delivery_ids=[did]))
    again = sim.delivery(did)
    assert (again.state, again.reason, again.attempt) == (
        State.DEAD_LETTER,
        DeadLetterReason.ATTEMPTS_EXHAUSTED,
        3,
    )
    assert [r.cause for r in sim.ledger(did)][-3:] == ["redriven", "leased", "attempts_exhausted"]


def test_a_redrive_below_the_limit_keeps_the_automatic_budget(make_sim: MakeSim) -> None:
    receiver = Receiver(503, 503, 200)
    sim = make_sim(receiver, policy=Policy(max_attempts=8), rng=FixedRandom(2_000_000, 1_000_000))
    did = sim.publish(endpoint_id="partner", deadline_at=T0 + timedelta(seconds=31))
    asyncio.run(sim.run_until_settled(delivery_ids=[did]))
    assert sim.delivery(did).reason is DeadLetterReason.DEADLINE_EXHAUSTED
    _redrive(sim, RedriveScope(delivery_ids=(did,)), sim.now() + timedelta(hours=1))
    asyncio.run(sim.run_until_settled(delivery_ids=[did]))
    assert sim.delivery(did).state is State.DELIVERED
    assert len(receiver.requests) == 3
    assert sim.delivery(did).max_attempts == 8  # below the limit: the automatic budget remains


def test_an_invalid_envelope_cannot_be_redriven(make_sim: MakeSim) -> None:
    receiver = Receiver(200)
    sim = make_sim(receiver)
    did = sim.publish(endpoint_id="partner", deadline_at=LATER, body=b"not json")
    assert sim.delivery(did).reason is DeadLetterReason.INVALID_ENVELOPE
    with pytest.raises(RedriveRefused) as refused:
        _redrive(sim, RedriveScope(delivery_ids=(did,)))
    assert refused.value.codes == {"envelope_invalid"}
    assert receiver.requests == []


def test_a_filter_scope_is_the_dead_letters_now_not_every_past_one(make_sim: MakeSim) -> None:
    sim = make_sim()
    first = _gone(sim, "cohort")
    result = _redrive(sim, RedriveScope(business_key="cohort"))
    assert result.delivery_ids == (first,)
    asyncio.run(sim.run_until_settled(delivery_ids=[first]))
    assert sim.delivery(first).state is State.DELIVERED
    later = _gone(sim, "cohort")  # a new dead letter under the same filter
    again = _redrive(sim, RedriveScope(business_key="cohort"))
    assert again.delivery_ids == (later,)
    assert sim.delivery(first).state is State.DELIVERED
    by_reason = _gone(sim, "other")
    third = _redrive(sim, RedriveScope(reason=DeadLetterReason.DEADLINE_EXHAUSTED))
    assert third.delivery_ids == (by_reason,)
    assert [d.result for d in sim.decisions()] == ["queued", "queued", "queued"]


def test_a_second_identical_filter_redrive_is_refused_while_the_first_is_pending(
    make_sim: MakeSim,
) -> None:
    sim = make_sim()
    did = _gone(sim, "cohort")
    _redrive(sim, RedriveScope(business_key="cohort"))
    with pytest.raises(RedriveRefused) as refused:
        _redrive(sim, RedriveScope(business_key="cohort"))
    assert refused.value.codes == {"not_dead_letter"}
    assert [p.delivery_id for p in refused.value.problems] == [did]


def test_a_missed_deadline_is_renewed_only_by_a_later_one(make_sim: MakeSim) -> None:
    sim = make_sim(always(429, **{"Retry-After": "10800"}))  # come back in 3 h
    missed = T0 + timedelta(hours=1)
    did = sim.publish(endpoint_id="partner", deadline_at=missed)
    asyncio.run(sim.run_due())
    assert sim.delivery(did).reason is DeadLetterReason.DEADLINE_EXHAUSTED
    # an attempt started now would still fit the old deadline: only the renewal rule refuses it
    with pytest.raises(RedriveRefused) as refused:
        _redrive(sim, RedriveScope(delivery_ids=(did,)), missed)
    assert refused.value.codes == {"deadline_not_later"}
    assert "not later than the previous one" in str(refused.value)
    _redrive(sim, RedriveScope(delivery_ids=(did,)), missed + timedelta(microseconds=1))
    assert sim.delivery(did).state is State.SCHEDULED


def test_another_dead_letter_may_get_a_shorter_window(make_sim: MakeSim) -> None:
    sim = make_sim(always(410))
    did = sim.publish(endpoint_id="partner", deadline_at=LATER)
    asyncio.run(sim.run_due())
    assert sim.delivery(did).reason is DeadLetterReason.PERMANENT_RESPONSE
    _redrive(sim, RedriveScope(delivery_ids=(did,)), T0 + timedelta(hours=1))
    assert sim.delivery(did).deadline_at == T0 + timedelta(hours=1)


def test_a_redrive_revalidates_the_endpoints_credential(make_sim: MakeSim, tmp_path: Path) -> None:
    path = tmp_path / "sender.db"
    clock = VirtualClock(T0)
    first = Simulator(SQLiteStore(path), clock=clock)
    first.add_endpoint("partner", URL, [SECRET])
    did = _gone(first)
    rotated = Simulator(SQLiteStore(path), clock=clock)  # another process rotates the secret
    rotated.add_endpoint("partner", URL, ["whsec_" + "B" * 40])
    with pytest.raises(RedriveRefused) as refused:
        _redrive(first, RedriveScope(delivery_ids=(did,)))
    assert refused.value.codes == {"credential_changed"}
    assert SECRET not in str(refused.value)
    _redrive(rotated, RedriveScope(delivery_ids=(did,)))
    assert rotated.delivery(did).state is State.SCHEDULED
    first.store.close()
    rotated.store.close()
