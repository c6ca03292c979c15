"""Metrics: seed 000's observability list as one typed snapshot."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest

from sender_sim import RedriveRefused, RedriveScope
from tests.sender_sim.conftest import T0, MakeSim, Receiver


def test_the_snapshot_covers_the_seed_list(make_sim: MakeSim) -> None:
    sim = make_sim(Receiver(503, 200))
    hour = timedelta(hours=1)
    retried = sim.publish(endpoint_id="partner", deadline_at=T0 + hour, delivery_id="a")
    delivered = sim.publish(endpoint_id="partner", deadline_at=T0 + hour, delivery_id="b")
    sim.publish(endpoint_id="partner", deadline_at=T0 + timedelta(seconds=5), delivery_id="late")
    waiting = sim.publish(
        endpoint_id="partner",
        deadline_at=T0 + 30 * hour,
        first_attempt_at=T0 + timedelta(minutes=10),
        delivery_id="w",
    )
    asyncio.run(sim.run_due())  # a: 503 (retry), b: 200, w: not yet due
    assert sim.delivery(delivered).state.value == "delivered"
    with pytest.raises(RedriveRefused):
        sim.redrive(
            actor="ops", reason="r", deadline_at=T0 + hour, scope=RedriveScope(delivery_ids=("b",))
        )
    # the retry of `a` is due within 5 s; at T0+59m40s its next safe attempt cannot fit any more
    sim.set_time(T0 + timedelta(minutes=59, seconds=40))
    metrics = sim.metrics()
    assert metrics.states == {"delivered": 1, "dead_letter": 1, "scheduled": 2}
    assert metrics.attempts_by_classification == {"server_error": 1, "success": 1}
    assert metrics.dlq_by_reason == {"deadline_exhausted": 1}
    assert metrics.redrive_outcomes == {"refused": 1}
    assert metrics.lease_expiry_duplicates == 0
    assert metrics.threatened == (retried,)
    assert metrics.oldest_eligible_age is not None
    assert metrics.oldest_eligible_age > timedelta(minutes=49)  # `w` was due at T0+10m
    cohorts = {c.label: c.count for c in metrics.deadline_cohorts}
    assert cohorts["< 1m"] == 1  # a: 20 s left
    assert cohorts[">= 24h"] == 1  # w
    assert waiting in {d.delivery_id for d in sim.deliveries()}
    document = json.loads(json.dumps(metrics.as_dict()))
    assert document["threatened"] == ["a"]
    assert "next safe attempt past deadline: 1 (a)" in metrics.render()


def test_a_resend_after_a_crash_is_a_lease_expiry_duplicate_of_its_own_name(
    make_sim: MakeSim,
) -> None:
    from sender_sim import Fault, FaultKind, FaultPlan

    receiver = Receiver(200)
    sim = make_sim(receiver, faults=FaultPlan((Fault(FaultKind.CRASH_AFTER_SEND, limit=1),)))
    did = sim.publish(endpoint_id="partner", deadline_at=T0 + timedelta(hours=1))
    asyncio.run(sim.run_until_settled(delivery_ids=[did]))
    assert len(receiver.requests) == 2  # the crash's send, then the resend after the lease expired
    metrics = sim.metrics()
    assert metrics.lease_expiry_resends == 1
    assert metrics.lease_expiry_duplicates == 0  # no stale ack: the crashed worker never acked
    assert metrics.as_dict()["lease_expiry_resends"] == 1
    assert "1 resend(s) after lease expiry" in metrics.render()


def test_redrive_outcomes_say_what_became_of_the_redriven_deliveries(make_sim: MakeSim) -> None:
    import httpx

    answers = {"ok": 200, "gone": 410}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(answers[request.headers["hookproof-delivery-id"]])

    sim = make_sim(handler)
    hour = timedelta(hours=1)
    ids = [
        sim.publish(endpoint_id="partner", deadline_at=T0 + timedelta(seconds=5), delivery_id=d)
        for d in ("ok", "gone", "waiting")
    ]
    assert sim.metrics().redriven_deliveries == {}
    sim.redrive(
        actor="ops",
        reason="r",
        deadline_at=T0 + hour,
        scope=RedriveScope(delivery_ids=tuple(ids)),
    )
    sim.worker("w").claim(delivery_ids=["waiting"])  # in flight when the metrics are read
    asyncio.run(sim.run_due())  # ok: 200, gone: 410
    metrics = sim.metrics()
    assert metrics.redrive_outcomes == {"queued": 1}
    assert metrics.redriven_deliveries == {"delivered": 1, "dead_again": 1, "pending": 1}
    assert "delivered=1" in metrics.render()
    assert metrics.as_dict()["redriven_deliveries"]["dead_again"] == 1
