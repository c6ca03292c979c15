"""Every fault of the plan: named, seeded, recorded in the ledger when it fires, with its effect
observed by a verifying in-process receiver."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from sender_sim import (
    ConfigurationError,
    DeadLetterReason,
    Fault,
    FaultInjector,
    FaultKind,
    FaultPlan,
    Policy,
    Simulator,
    State,
)
from sender_sim.faults import FAULT_EFFECTS
from tests.sender_sim.conftest import T0, MakeSim, Receiver

DEADLINE = T0 + timedelta(hours=2)


def _run(make_sim: MakeSim, receiver: Receiver, *specs: str, **kw: object) -> tuple[Simulator, str]:
    sim = make_sim(receiver, faults=FaultPlan.parse(specs, seed=5), **kw)
    did = sim.publish(endpoint_id="partner", deadline_at=DEADLINE, data={"n": 1})
    asyncio.run(sim.run_until_settled(delivery_ids=[did]))
    return sim, did


def _causes(sim: Simulator, did: str) -> list[str]:
    return [r.cause for r in sim.ledger(did)]


def test_tampered_body_is_refused_by_the_receiver(make_sim: MakeSim) -> None:
    receiver = Receiver()
    sim, did = _run(make_sim, receiver, "tampered_body")
    assert receiver.verified == [False]
    assert sim.delivery(did).reason is DeadLetterReason.AUTHENTICATION_POLICY
    assert "fault:tampered_body" in _causes(sim, did)


def test_wrong_secret_is_refused(make_sim: MakeSim) -> None:
    receiver = Receiver()
    sim, did = _run(make_sim, receiver, "wrong_secret:attempts=1")
    assert receiver.verified == [False]
    assert sim.delivery(did).reason is DeadLetterReason.AUTHENTICATION_POLICY


def test_rotated_secret_sends_two_signatures_one_valid(make_sim: MakeSim) -> None:
    receiver = Receiver()
    sim, did = _run(make_sim, receiver, "rotated_secret")
    assert receiver.verified == [True]
    assert len(receiver.requests[0].headers["webhook-signature"].split()) == 2
    assert sim.delivery(did).state is State.DELIVERED


@pytest.mark.parametrize(
    ("skew", "accepted"), [(299, True), (-299, True), (302, False), (-302, False)]
)
def test_signature_clock_skew(make_sim: MakeSim, skew: int, accepted: bool) -> None:
    receiver = Receiver()
    sim, did = _run(make_sim, receiver, f"signature_clock_skew:skew={skew}")
    assert receiver.verified == [accepted]
    [note] = [r for r in sim.ledger(did) if r.cause == "fault:signature_clock_skew"]
    assert note.details["fault"]["skew_s"] == skew


def test_duplicate_and_concurrent_sends(make_sim: MakeSim) -> None:
    receiver = Receiver()
    sim, did = _run(make_sim, receiver, "duplicate_send")
    assert len(receiver.requests) == 2
    assert receiver.requests[0].content == receiver.requests[1].content
    assert (
        receiver.requests[0].headers["webhook-signature"]
        == receiver.requests[1].headers["webhook-signature"]
    )
    assert "copies_sent" in _causes(sim, did)
    receiver = Receiver()
    sim, did = _run(make_sim, receiver, "concurrent_sends:copies=4")
    assert len(receiver.requests) == 4
    assert sim.delivery(did).state is State.DELIVERED


def test_lost_response_is_an_ambiguous_timeout(make_sim: MakeSim) -> None:
    receiver = Receiver()
    sim, did = _run(make_sim, receiver, "lost_response:attempts=1")
    assert receiver.verified == [True, True]  # it had arrived; the sender retried anyway
    first, second = sim.attempts(did)
    assert (first.kind.value, first.classification) == ("timeout", "timeout")
    assert second.status == 200
    [note] = [r for r in sim.ledger(did) if r.cause == "fault:lost_response"]
    assert note.details["status"] == 200


def test_lease_expiry_in_flight_rescuer_resends_and_the_late_ack_is_refused(
    make_sim: MakeSim,
) -> None:
    receiver = Receiver()
    sim, did = _run(make_sim, receiver, "lease_expiry_in_flight:attempts=1")
    assert len(receiver.requests) == 2
    assert [h.headers["hookproof-attempt"] for h in receiver.requests] == ["1", "2"]
    causes = _causes(sim, did)
    assert causes == [
        "published",
        "leased",
        "fault:lease_expiry_in_flight",
        "lease_expired_in_flight",
        "lease_taken_over",
        "delivered",
        "stale_ack_refused",
    ]
    assert sim.delivery(did).state is State.DELIVERED
    assert sim.metrics().lease_expiry_duplicates == 1
    assert [(a.worker, a.acked) for a in sim.attempts(did)] == [
        ("worker-1-rescuer", True),
        ("worker-1", False),
    ]


def test_second_worker_races_and_exactly_one_wins(make_sim: MakeSim) -> None:
    receiver = Receiver()
    sim, did = _run(make_sim, receiver, "second_worker")
    assert len(receiver.requests) == 1
    causes = _causes(sim, did)
    assert causes.count("leased") == 1
    assert "claim_race_lost" in causes
    assert "fault:second_worker" in causes
    assert sim.attempts(did)[0].worker == "worker-1-rival"


def test_worker_clock_skew_makes_a_worker_act_early(make_sim: MakeSim) -> None:
    sim = make_sim(Receiver(), faults=FaultPlan.parse(["worker_clock_skew:skew=30,worker=fast"]))
    did = sim.publish(
        endpoint_id="partner", deadline_at=DEADLINE, first_attempt_at=T0 + timedelta(seconds=20)
    )
    assert sim.worker("honest").claim() == []
    [lease] = sim.worker("fast").claim()
    assert lease.delivery.delivery_id == did
    assert sim.ledger(did)[-1].at == T0 + timedelta(seconds=30)  # the fast worker's idea of now
    [note] = [r for r in sim.ledger(did) if r.cause == "fault:worker_clock_skew"]
    assert note.details["true_time"] == "2026-08-13T09:00:00.000000Z"
    assert "FAULT injected: worker_clock_skew" in sim.explain(did)


def test_probabilistic_faults_replay_with_the_seed(make_sim: MakeSim) -> None:
    def pattern(seed: int) -> list[bool]:
        injector = FaultInjector(
            FaultPlan((Fault(FaultKind.LOST_RESPONSE, probability=0.5),), seed)
        )
        return [
            injector.fires(FaultKind.LOST_RESPONSE, delivery_id="d", attempt=1, worker="w")
            is not None
            for _ in range(40)
        ]

    assert pattern(1) == pattern(1)
    assert pattern(1) != pattern(2)
    assert 5 < sum(pattern(1)) < 35


def test_limits_and_targets() -> None:
    plan = FaultPlan.parse(["crash_after_send:attempts=2+3,limit=1,delivery=d1,worker=w1"])
    injector = FaultInjector(plan)
    fires = injector.fires
    kind = FaultKind.CRASH_AFTER_SEND
    assert fires(kind, delivery_id="d1", attempt=1, worker="w1") is None
    assert fires(kind, delivery_id="d2", attempt=2, worker="w1") is None
    assert fires(kind, delivery_id="d1", attempt=2, worker="w2") is None
    assert fires(kind, delivery_id="d1", attempt=2, worker="w1") is not None
    assert fires(kind, delivery_id="d1", attempt=3, worker="w1") is None  # limit reached
    assert plan.describe() == [{"kind": "crash_after_send", "attempts": [2, 3]}]


@pytest.mark.parametrize(
    "spec",
    [
        "explode",
        "crash_after_send:p=2",
        "lost_response:attempts=x",
        "tampered_body:color=red",
        "duplicate_send:p",
    ],
)
def test_bad_fault_specs_are_one_clear_error(spec: str) -> None:
    with pytest.raises(ConfigurationError):
        FaultPlan.parse([spec])


def test_every_kind_has_a_name_and_parses() -> None:
    for kind in FaultKind:
        assert Fault.parse(kind.value).kind is kind
    assert Policy().redrive_extra_attempts == 1


def test_every_fault_kind_says_what_it_does() -> None:
    """The dashboard and the sandbox's faults command show FAULT_EFFECTS: none is missing, and
    the docs' fault tables list every kind."""
    assert set(FAULT_EFFECTS) == set(FaultKind)
    assert all(text and not text.endswith(".") for text in FAULT_EFFECTS.values())
    docs = Path(__file__).resolve().parents[2] / "docs"
    for page in ("sender-sim.md", "sandbox.md"):
        text = (docs / page).read_text()
        assert all(f"| `{kind.value}` |" in text for kind in FaultKind), page
