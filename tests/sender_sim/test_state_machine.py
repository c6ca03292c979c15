"""A hypothesis state machine over the whole sender: publish, claim, send outcomes, crash, lease
expiry, a second (skewed) worker, advancing the clock, redrive and double redrive; endpoints
added (with subscriptions), disabled, enabled and deleted; fan-out publication and resend.

Invariants: no delivery is lost or in two states; never two live leases on one delivery; no
attempt starts past the deadline rule; a dead letter moves only through a recorded redrive or a
resend; every state change has its ledger row (the ledger chains to the current state);
``delivery_id`` and the payload digest never change; nothing is sent to a disabled or deleted
endpoint; every event has deliveries or an event-only status; attempt counts never go back.
The same pure transitions and store run here as in the real worker; only the HTTP exchange is
replaced by a chosen outcome.
"""

from __future__ import annotations

import itertools
from datetime import timedelta

import httpx
import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from sender_sim import (
    DeadLetterReason,
    EventStatus,
    FullJitter,
    Lease,
    Outcome,
    OutcomeKind,
    Policy,
    RedriveRefused,
    RedriveScope,
    ResendRefused,
    Sent,
    Simulator,
    SQLiteStore,
    State,
    VirtualClock,
)
from sender_sim.envelope import payload_digest
from tests.sender_sim.conftest import SECRET, T0, URL

POLICY = Policy(
    backoff=FullJitter(base=timedelta(seconds=10), cap=timedelta(minutes=5)),
    max_attempts=4,
    expected_attempt_time=timedelta(seconds=20),
    max_clock_skew=timedelta(seconds=2),
    timeout=timedelta(seconds=10),
    lease_duration=timedelta(seconds=40),
)
OUTCOMES = [
    Outcome.response(200),
    Outcome.response(204),
    Outcome.response(500),
    Outcome.response(503),
    Outcome.response(429, "5"),
    Outcome.response(429, "not-a-date"),
    Outcome.response(410),
    Outcome.response(401),
    Outcome.response(409),
    Outcome.failure(OutcomeKind.TIMEOUT),
    Outcome.failure(OutcomeKind.CONNECT),
    Outcome.failure(OutcomeKind.DNS),
]
STEPS = [
    timedelta(microseconds=1),
    timedelta(seconds=1),
    timedelta(seconds=15),
    timedelta(seconds=41),
    timedelta(minutes=3),
    timedelta(minutes=20),
]
WORKERS = {"w1": timedelta(0), "w2": timedelta(seconds=2), "w3": timedelta(seconds=-2)}
ENDPOINTS = ["partner", "e1", "e2"]
TYPES = ["t.a", "t.b"]


class SenderMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = VirtualClock(T0)
        unused = httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(599)))
        self.sim = Simulator(
            SQLiteStore(":memory:"), clock=self.clock, policy=POLICY, client=unused, seed=11
        )
        self.sim.add_endpoint("partner", URL, [SECRET])
        self.workers = {n: self.sim.worker(n, clock_skew=s) for n, s in WORKERS.items()}
        self.leases: list[Lease] = []
        self.digests: dict[str, str] = {}
        self.stale: dict[str, int] = {}
        """Stale acks refused, per delivery: metrics count the retained history only, so a
        deleted endpoint's deliveries leave the count with it."""
        self.counter = 0
        self.events: set[str] = set()
        self.attempts_seen: dict[str, int] = {}

    def teardown(self) -> None:
        self.sim.store.close()

    def _ids(self) -> list[str]:
        return sorted(self.digests)

    def _url(self, endpoint_id: str) -> str:
        return URL if endpoint_id == "partner" else f"{URL}/{endpoint_id}"

    @precondition(lambda self: self.sim.store.endpoint("partner") is not None)
    @rule(
        deadline=st.sampled_from([timedelta(seconds=s) for s in (5, 23, 25, 60, 300, 3600, 7200)]),
        delay=st.sampled_from([timedelta(0), timedelta(microseconds=1), timedelta(seconds=30)]),
    )
    def publish(self, deadline: timedelta, delay: timedelta) -> None:
        self.counter += 1
        now = self.clock.now()
        did = self.sim.publish(
            endpoint_id="partner",
            deadline_at=now + deadline,
            first_attempt_at=now + delay,
            business_key=f"k{self.counter % 3}",
            data={"n": self.counter},
            delivery_id=f"d{self.counter:03d}",
        )
        self.digests[did] = self.sim.delivery(did).payload_digest
        self.events.add(self.sim.delivery(did).event_id)

    # -- endpoints, fan-out, resend ------------------------------------------------------------

    @rule(
        endpoint=st.sampled_from(ENDPOINTS),
        types=st.sampled_from([None, ("t.a",), ("t.b",), ("t.a", "t.b")]),
    )
    def add_or_subscribe(self, endpoint: str, types: tuple[str, ...] | None) -> None:
        stored = self.sim.store.endpoint(endpoint)
        active = stored.active if stored is not None else True
        self.sim.add_endpoint(
            endpoint, self._url(endpoint), [SECRET], event_types=types, active=active
        )

    @rule(endpoint=st.sampled_from(ENDPOINTS), active=st.booleans())
    def disable_or_enable(self, endpoint: str, active: bool) -> None:
        if self.sim.store.endpoint(endpoint) is None:
            return
        self.sim.set_endpoint_active(endpoint, active, actor="ops")
        # a lease held in flight on a now-disabled endpoint may still come back (not a new send)

    @rule(endpoint=st.sampled_from(["e1", "e2", "e1", "e2", "partner"]))
    def delete(self, endpoint: str) -> None:
        if self.sim.store.endpoint(endpoint) is None:
            return
        gone = {d.delivery_id for d in self.sim.deliveries() if d.endpoint_id == endpoint}
        self.sim.delete_endpoint(endpoint, actor="ops")
        for did in gone:
            del self.digests[did]
            self.stale.pop(did, None)
        self.leases = [x for x in self.leases if x.delivery.delivery_id not in gone]
        assert self.sim.endpoint_history(endpoint)[-1].action == "deleted"
        event("endpoint deleted")

    @rule(event_type=st.sampled_from(TYPES), deadline=st.sampled_from([60, 3600]))
    def publish_event(self, event_type: str, deadline: int) -> None:
        now = self.clock.now()
        configured = self.sim.endpoints()
        expected = sorted(
            e.endpoint_id for e in configured if e.active and e.subscribes(event_type)
        )
        result = self.sim.publish_event(
            event_type=event_type, deadline_at=now + timedelta(seconds=deadline)
        )
        self.events.add(result.event_id)
        got = sorted(self.sim.delivery(d).endpoint_id for d in result.delivery_ids)
        assert got == expected
        if not expected:
            assert result.event_status in (
                EventStatus.NO_ENDPOINT,
                EventStatus.ENDPOINT_DISABLED,
                EventStatus.NOT_SUBSCRIBED,
            )
            event(f"event-only: {result.event_status}")
        for did in result.delivery_ids:
            self.digests[did] = self.sim.delivery(did).payload_digest

    @rule(index=st.integers(0, 200), by_event=st.booleans())
    def resend(self, index: int, by_event: bool) -> None:
        candidates = sorted(self.events) if by_event else self._ids()
        if not candidates:
            return
        target = candidates[index % len(candidates)]
        before = {d.delivery_id: d for d in self.sim.deliveries()}
        result = None
        try:
            result = self.sim.resend([target], actor="ops")
        except ResendRefused as error:
            refused = error
        else:
            refused = None
        if refused is not None:
            event(f"resend refused: {sorted(set(refused.ineligible.values()))}")
            assert refused.code == "WEBHOOK_DELIVERY_NOT_REPLAYABLE"
            assert {d.delivery_id: d for d in self.sim.deliveries()} == before
            return
        assert result is not None
        event("resend queued")
        for did in result.delivery_ids:
            previous, after = before[did], self.sim.delivery(did)
            assert previous.state in (State.DELIVERED, State.DEAD_LETTER)
            assert after.state is State.SCHEDULED
            assert after.attempt == previous.attempt
            assert after.max_attempts >= previous.attempt + 1
            endpoint = self.sim.store.endpoint(after.endpoint_id)
            assert endpoint is not None
            assert endpoint.active
        for did in result.new_delivery_ids:
            self.digests[did] = self.sim.delivery(did).payload_digest

    def _ack(self, lease: Lease, outcome: Outcome) -> None:
        current = self.sim.delivery(lease.delivery.delivery_id)
        live = current.state is State.LEASED and current.fencing_token == lease.token
        now = self.clock.now()
        worker = self.workers.get(lease.worker, self.workers["w1"])
        [acked] = worker.complete([Sent(lease, outcome, now, now)])
        assert acked is live
        event(f"ack {'applied' if acked else 'refused (stale)'}")
        if acked:
            event(f"state after ack: {self.sim.delivery(current.delivery_id).state.value}")
        else:
            did = current.delivery_id
            self.stale[did] = self.stale.get(did, 0) + 1
        assert self.sim.metrics().lease_expiry_duplicates == sum(self.stale.values())

    @initialize(count=st.integers(1, 4))
    def some_deliveries(self, count: int) -> None:
        for _ in range(count):
            self.publish(timedelta(hours=1), timedelta(0))

    @rule(
        worker=st.sampled_from(sorted(WORKERS)),
        outcomes=st.lists(st.sampled_from([*OUTCOMES, *[None] * 4]), min_size=3, max_size=3),
        wait=st.sampled_from([timedelta(0), *STEPS]),
    )
    def claim_and_send(self, worker: str, outcomes: list[Outcome | None], wait: timedelta) -> None:
        """A worker pass after ``wait``; ``None`` keeps the lease in flight (a slow or crashed
        worker)."""
        self.clock.advance(wait)
        leases = self.workers[worker].claim(limit=3)
        for lease, outcome in zip(leases, outcomes, strict=False):
            # the attempt starts now in TRUE time: it must fit the deadline without the skew
            assert self.clock.now() + POLICY.expected_attempt_time < lease.delivery.deadline_at
            endpoint = self.sim.store.endpoint(lease.delivery.endpoint_id)
            assert endpoint is not None, "a lease on a deleted endpoint"
            assert endpoint.active, "a lease on a disabled endpoint"
            event(f"claimed (attempt {lease.delivery.attempt})")
            if outcome is None:
                self.leases.append(lease)
            else:
                self._ack(lease, outcome)

    @precondition(lambda self: bool(self.leases))
    @rule(index=st.integers(0, 50), outcome=st.sampled_from(OUTCOMES))
    def late_ack(self, index: int, outcome: Outcome) -> None:
        """A worker that was in flight comes back with an outcome (its lease may be stale)."""
        self._ack(self.leases.pop(index % len(self.leases)), outcome)

    @precondition(lambda self: bool(self.leases))
    @rule(index=st.integers(0, 50))
    def crash(self, index: int) -> None:
        self.leases.pop(index % len(self.leases))  # sent, then died: no persist, no ack

    @rule(step=st.sampled_from(STEPS))
    def advance(self, step: timedelta) -> None:
        self.clock.advance(step)

    @rule()
    def expire_leases(self) -> None:
        leased = [d for d in self.sim.store.live() if d.state is State.LEASED]
        if leased:
            latest = max(d.lease_expires_at for d in leased if d.lease_expires_at)
            self.clock.set(max(self.clock.now(), latest + timedelta(seconds=3)))

    @precondition(lambda self: bool(self.digests))
    @rule(
        index=st.integers(0, 50), extra=st.sampled_from([timedelta(seconds=21), timedelta(hours=1)])
    )
    def redrive(self, index: int, extra: timedelta) -> None:
        did = self._ids()[index % len(self.digests)]
        before = self.sim.delivery(did)
        deadline = self.clock.now() + extra
        eligible = before.state is State.DEAD_LETTER and POLICY.fits(self.clock.now(), deadline)
        endpoint = self.sim.store.endpoint(before.endpoint_id)
        if endpoint is None or not endpoint.active:
            eligible = False  # a redrive revalidates the destination
        if before.reason is DeadLetterReason.DEADLINE_EXHAUSTED and deadline <= before.deadline_at:
            eligible = False  # a renewal of a missed deadline must extend it
        try:
            self.sim.redrive(
                actor="ops",
                reason="test",
                deadline_at=deadline,
                scope=RedriveScope(delivery_ids=(did,)),
            )
        except RedriveRefused:
            event("redrive refused")
            assert not eligible
            assert self.sim.delivery(did) == before
        else:
            event("redrive queued")
            assert eligible
            after = self.sim.delivery(did)
            assert after.state is State.SCHEDULED
            assert after.max_attempts >= before.attempt + 1

    @precondition(lambda self: bool(self.digests))
    @rule(index=st.integers(0, 50))
    def double_redrive(self, index: int) -> None:
        active = {e.endpoint_id for e in self.sim.endpoints() if e.active}
        dead = [
            d
            for d in self._ids()
            if self.sim.delivery(d).state is State.DEAD_LETTER
            and self.sim.delivery(d).endpoint_id in active
        ]
        if not dead:
            return
        did = dead[index % len(dead)]
        scope = RedriveScope(delivery_ids=(did,))
        previous = self.sim.delivery(did).deadline_at
        deadline = max(self.clock.now(), previous) + timedelta(hours=2)
        self.sim.redrive(actor="a", reason="first", deadline_at=deadline, scope=scope)
        with pytest.raises(RedriveRefused) as refused:
            self.sim.redrive(actor="b", reason="second", deadline_at=deadline, scope=scope)
        assert refused.value.codes == {"not_dead_letter"}
        event("double redrive refused")

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def nothing_lost_or_doubled(self) -> None:
        rows = self.sim.deliveries()
        assert sorted(d.delivery_id for d in rows) == self._ids()
        for delivery in rows:
            assert (delivery.state is State.DEAD_LETTER) == (delivery.reason is not None)
            assert (delivery.state is State.LEASED) == (delivery.lease_owner is not None)

    @invariant()
    def never_two_live_leases(self) -> None:
        for did in self._ids():
            current = self.sim.delivery(did)
            live = [
                lease
                for lease in self.leases
                if lease.delivery.delivery_id == did
                and current.state is State.LEASED
                and lease.token == current.fencing_token
            ]
            assert len(live) <= 1

    @invariant()
    def ledger_explains_every_state(self) -> None:
        decisions = {d.decision_id: d for d in self.sim.decisions()}
        for did in self._ids():
            current = self.sim.delivery(did)
            changes = [r for r in self.sim.ledger(did) if r.is_state_change]
            assert changes[0].from_state is None
            for previous, row in itertools.pairwise(changes):
                assert row.from_state is previous.to_state
            assert changes[-1].to_state is current.state
            for row in changes:
                if row.from_state is State.DELIVERED:  # only a resend moves a delivered one
                    assert row.cause == "resent"
                if row.from_state is State.DEAD_LETTER:  # only by redrive or resend
                    assert row.cause in ("redriven", "resent")
                if row.cause == "redriven":
                    decision = decisions[row.details["decision_id"]]
                    assert decision.result == "queued"
                    assert did in decision.delivery_ids
                if row.to_state is State.LEASED:  # no attempt started past the deadline rule
                    assert row.details["would_end"] < row.details["deadline"]
                if row.to_state is State.DEAD_LETTER:
                    assert row.reason is not None
                    assert row.reason in DeadLetterReason

    @invariant()
    def every_event_has_deliveries_or_an_event_only_status(self) -> None:
        for event_id in self.events:
            stored = self.sim.store.event(event_id)
            retained = self.sim.store.event_deliveries(event_id)
            assert bool(retained) != (stored.status is not None), event_id
            if stored.status is not None:
                assert all(not self.sim.attempts(d.delivery_id) for d in retained)

    @invariant()
    def attempt_counts_never_go_back(self) -> None:
        for delivery in self.sim.deliveries():
            seen = self.attempts_seen.get(delivery.delivery_id, 0)
            assert delivery.attempt >= seen
            self.attempts_seen[delivery.delivery_id] = delivery.attempt

    @invariant()
    def identity_and_digest_never_change(self) -> None:
        for did, digest in self.digests.items():
            delivery = self.sim.delivery(did)
            assert delivery.delivery_id == did
            assert delivery.payload_digest == digest
            assert payload_digest(self.sim.event(delivery.event_id).body) == digest


SenderMachine.TestCase.settings = settings(SenderMachine.TestCase.settings, stateful_step_count=50)
TestSenderMachine = SenderMachine.TestCase
