"""Leases with fencing tokens: compare-and-set claims, takeover of an expired lease, a stale ack
refused and counted as a lease-expiry duplicate, two workers racing, crash after send, and acks
only after the transition is persisted."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from sender_sim import (
    Change,
    FaultPlan,
    Policy,
    Simulator,
    SQLiteStore,
    State,
    StoreError,
    VirtualClock,
)
from sender_sim.transitions import claim
from tests.sender_sim.conftest import T0, MakeSim, Receiver

POLICY = Policy(lease_duration=timedelta(seconds=60), timeout=timedelta(seconds=10))


def test_a_stale_ack_is_refused_and_counted(make_sim: MakeSim) -> None:
    receiver = Receiver(200)
    sim = make_sim(receiver, policy=POLICY)
    did = sim.publish(endpoint_id="partner", deadline_at=T0 + timedelta(hours=2))
    w1, w2 = sim.worker("w1"), sim.worker("w2")
    [lease1] = w1.claim()
    assert lease1.token == 1
    sim.advance(timedelta(seconds=60))  # exactly at expiry: the lease is over
    [lease2] = w2.claim()
    assert (lease2.token, lease2.delivery.attempt) == (2, 2)

    async def both() -> tuple[list[bool], list[bool]]:
        late = await w1.send(lease1)  # w1 was slow, not dead: its request still goes out
        fresh = await w2.send(lease2)
        return w2.complete([fresh]), w1.complete([late])

    fresh_ok, late_ok = asyncio.run(both())
    assert (fresh_ok, late_ok) == ([True], [False])
    delivery = sim.delivery(did)
    assert delivery.state is State.DELIVERED
    assert delivery.fencing_token == 2
    assert [(a.worker, a.acked) for a in sim.attempts(did)] == [("w2", True), ("w1", False)]
    causes = [r.cause for r in sim.ledger(did)]
    assert causes == ["published", "leased", "lease_taken_over", "delivered", "stale_ack_refused"]
    assert sim.metrics().lease_expiry_duplicates == 1
    assert len(receiver.requests) == 2  # the duplicate the receiver must absorb
    assert {r.headers["webhook-id"] for r in receiver.requests} == {delivery.event_id}


def test_a_live_lease_cannot_be_taken(make_sim: MakeSim) -> None:
    sim = make_sim(policy=POLICY)
    sim.publish(endpoint_id="partner", deadline_at=T0 + timedelta(hours=2))
    assert len(sim.worker("w1").claim()) == 1
    sim.advance(timedelta(seconds=59, microseconds=999_999))
    assert sim.worker("w2").claim() == []


def test_two_workers_race_for_one_expired_lease_on_one_file(tmp_path: Path) -> None:
    path = tmp_path / "sender.db"
    clock = VirtualClock(T0)
    first = Simulator(SQLiteStore(path), clock=clock, policy=POLICY)
    first.add_endpoint(
        "partner", "http://127.0.0.1:8999/webhooks", ["whsec_AAAAAAAAAAAAAAAAAAAAAAAA"]
    )
    did = first.publish(endpoint_id="partner", deadline_at=T0 + timedelta(hours=2))
    first.worker("w0").claim()
    clock.advance(timedelta(minutes=2))
    # two processes: two connections to one file, both see the same expired lease
    second_store = SQLiteStore(path)
    snapshot_a = first.store.delivery(did)
    snapshot_b = second_store.delivery(did)
    step_a = claim(snapshot_a, worker="wa", now=clock.now(), policy=POLICY)
    step_b = claim(snapshot_b, worker="wb", now=clock.now(), policy=POLICY)
    assert step_a is not None
    assert step_b is not None
    won_b = second_store.apply([Change(snapshot_b, step_b.delivery, step_b.row)])
    won_a = first.store.apply([Change(snapshot_a, step_a.delivery, step_a.row)])
    assert (won_a, won_b) == ([False], [True])
    final = first.store.delivery(did)
    assert (final.lease_owner, final.fencing_token) == ("wb", 2)
    takeovers = [r for r in first.store.ledger(did) if r.cause == "lease_taken_over"]
    assert [r.actor for r in takeovers] == ["wb"]
    second_store.close()
    first.store.close()


def test_crash_after_send_leaves_the_lease_to_expire_and_another_worker_resends(
    make_sim: MakeSim,
) -> None:
    receiver = Receiver(200)
    sim = make_sim(receiver, policy=POLICY, faults=FaultPlan.parse(["crash_after_send:attempts=1"]))
    did = sim.publish(endpoint_id="partner", deadline_at=T0 + timedelta(hours=2))
    report = asyncio.run(sim.run_due())
    assert report.crashed == 1
    crashed = sim.delivery(did)
    assert crashed.state is State.LEASED  # no persist, no ack
    [attempt] = sim.attempts(did)
    assert (attempt.status, attempt.acked) == (200, False)
    assert asyncio.run(sim.run_due()).claimed == 0  # the lease is still live
    asyncio.run(sim.run_until_settled(delivery_ids=[did]))
    delivery = sim.delivery(did)
    assert delivery.state is State.DELIVERED
    assert delivery.attempt == 2
    assert [a.acked for a in sim.attempts(did)] == [False, True]
    causes = [r.cause for r in sim.ledger(did)]
    assert causes == [
        "published",
        "leased",
        "fault:crash_after_send",
        "lease_taken_over",
        "delivered",
    ]
    assert sim.attempts(did)[1].started_at == T0 + POLICY.lease_duration
    assert len(receiver.requests) == 2
    assert len({r.headers["webhook-id"] for r in receiver.requests}) == 1


def test_no_ack_when_the_transition_cannot_be_persisted(
    make_sim: MakeSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = make_sim(Receiver(200), policy=POLICY)
    did = sim.publish(endpoint_id="partner", deadline_at=T0 + timedelta(hours=2))

    real_apply = sim.store.apply
    calls: list[int] = []

    def claim_then_fail(changes: Sequence[Change]) -> list[bool]:
        calls.append(len(changes))
        if len(calls) == 1:  # the claim persists; the outcome's transition does not
            return real_apply(changes)
        raise StoreError("disk full")

    monkeypatch.setattr(sim.store, "apply", claim_then_fail)
    with pytest.raises(StoreError, match="disk full"):
        asyncio.run(sim.run_due())
    monkeypatch.setattr(sim.store, "apply", real_apply)
    delivery = sim.delivery(did)
    assert delivery.state is State.LEASED  # not acked: the lease will expire and be retried
    assert [r.cause for r in sim.ledger(did)] == ["published", "leased"]
    sim.advance(POLICY.lease_duration)
    asyncio.run(sim.run_until_settled(delivery_ids=[did]))
    assert sim.delivery(did).state is State.DELIVERED


def test_a_stale_ack_is_refused_while_the_new_holder_still_works(make_sim: MakeSim) -> None:
    """The fencing token, not the state, refuses it: the delivery is still leased (to w2)."""
    sim = make_sim(Receiver(200), policy=POLICY)
    did = sim.publish(endpoint_id="partner", deadline_at=T0 + timedelta(hours=2))
    w1, w2 = sim.worker("w1"), sim.worker("w2")
    [old] = w1.claim()
    sim.advance(POLICY.lease_duration)
    [new] = w2.claim()

    async def late_first() -> tuple[list[bool], list[bool]]:
        late = await w1.send(old)
        stale = w1.complete([late])
        assert sim.delivery(did).state is State.LEASED  # untouched: still w2's
        return stale, w2.complete([await w2.send(new)])

    stale, fresh = asyncio.run(late_first())
    assert (stale, fresh) == ([False], [True])
    assert sim.delivery(did).state is State.DELIVERED
    assert sim.metrics().lease_expiry_duplicates == 1
