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
