"""A disabled endpoint receives nothing automatic: neither new publications nor pending retries
nor the takeover of an expired lease. What was due is recorded in the ledger, not sent, and
enabling the endpoint again lets the held deliveries resume."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sender_sim import Fault, FaultKind, FaultPlan, Simulator, State, rfc3339
from tests.sender_sim.conftest import T0, MakeSim, Receiver

LATER = T0 + timedelta(hours=5)


def _settle(sim: Simulator, *ids: str) -> None:
    asyncio.run(sim.run_until_settled(delivery_ids=ids, until=LATER))


def test_a_pending_retry_is_not_sent_after_the_endpoint_is_disabled(make_sim: MakeSim) -> None:
    receiver = Receiver(503, 200)
    sim = make_sim(receiver)
    did = sim.publish(endpoint_id="partner", deadline_at=LATER)
    asyncio.run(sim.run_due())
    retry = sim.delivery(did)
    assert retry.state is State.SCHEDULED
    sim.set_endpoint_active("partner", False)
    _settle(sim, did)
    assert len(receiver.requests) == 1
    held = sim.delivery(did)
    assert held.state is State.SCHEDULED
    assert held.attempt == 1
    [note] = [r for r in sim.ledger(did) if r.cause == "endpoint_disabled"]
    assert retry.next_attempt_at is not None
    assert note.details["due"] == rfc3339(retry.next_attempt_at)
    assert "not sent while the endpoint is disabled" in sim.explain(did)


def test_a_publication_to_a_disabled_endpoint_is_recorded_not_sent(make_sim: MakeSim) -> None:
    receiver = Receiver(200)
    sim = make_sim(receiver)
    sim.set_endpoint_active("partner", False)
    did = sim.publish(endpoint_id="partner", deadline_at=LATER)
    _settle(sim, did)
    assert receiver.requests == []
    assert sim.delivery(did).state is State.SCHEDULED
    assert sim.attempts(did) == []
    assert [r.cause for r in sim.ledger(did)] == ["published", "endpoint_disabled"]
    assert sim.worker("other").claim(delivery_ids=[did]) == []


def test_an_expired_lease_is_not_taken_over_for_a_disabled_endpoint(make_sim: MakeSim) -> None:
    receiver = Receiver(200)
    sim = make_sim(receiver, faults=FaultPlan((Fault(FaultKind.CRASH_AFTER_SEND, limit=1),)))
    did = sim.publish(endpoint_id="partner", deadline_at=LATER)
    asyncio.run(sim.run_due())  # sent, then the worker "crashed": the lease stays until it expires
    assert sim.delivery(did).state is State.LEASED
    sim.set_endpoint_active("partner", False)
    _settle(sim, did)
    assert len(receiver.requests) == 1
    assert sim.delivery(did).state is State.LEASED
    assert any(r.cause == "endpoint_disabled" for r in sim.ledger(did))


def test_enabling_again_resumes_the_held_deliveries(make_sim: MakeSim) -> None:
    receiver = Receiver(503, 200)
    sim = make_sim(receiver)
    did = sim.publish(endpoint_id="partner", deadline_at=LATER)
    asyncio.run(sim.run_due())
    sim.set_endpoint_active("partner", False)
    sim.advance(timedelta(minutes=30))
    assert asyncio.run(sim.run_due()).claimed == 0
    sim.set_endpoint_active("partner", True)
    _settle(sim, did)
    assert sim.delivery(did).state is State.DELIVERED
    assert len(receiver.requests) == 2
    causes = [r.cause for r in sim.ledger(did)]
    assert causes.index("endpoint_disabled") < causes.index("endpoint_enabled")


def test_other_endpoints_keep_receiving(make_sim: MakeSim) -> None:
    from tests.sender_sim.conftest import SECRET, URL

    receiver = Receiver(200)
    sim = make_sim(receiver)
    sim.add_endpoint("second", URL.replace("/webhooks", "/second"), [SECRET])
    sim.set_endpoint_active("partner", False)
    held = sim.publish(endpoint_id="partner", deadline_at=LATER)
    sent = sim.publish(endpoint_id="second", deadline_at=LATER)
    _settle(sim, sent)
    assert sim.delivery(sent).state is State.DELIVERED
    assert sim.delivery(held).state is State.SCHEDULED
    assert [r.url.path for r in receiver.requests] == ["/second"]
