"""A hypothesis state machine over the whole sender: publish, claim, send outcomes, crash, lease
expiry, a second (skewed) worker, advancing the clock, redrive and double redrive.

Invariants: no delivery is lost or in two states; never two live leases on one delivery; no
attempt starts past the deadline rule; a dead letter moves only through a recorded redrive; every
state change has its ledger row (the ledger chains to the current state); ``delivery_id`` and the
payload digest never change. The same pure transitions and store run here as in the real worker;
only the HTTP exchange is replaced by a chosen outcome.
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
    FullJitter,
    Lease,
    Outcome,
    OutcomeKind,
    Policy,
    RedriveRefused,
    RedriveScope,
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
        self.stale = 0
        self.counter = 0

    def teardown(self) -> None:
        self.sim.store.close()

    def _ids(self) -> list[str]:
        return sorted(self.digests)

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
            self.stale += 1
        assert self.sim.metrics().lease_expiry_duplicates == self.stale

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
        dead = [d for d in self._ids() if self.sim.delivery(d).state is State.DEAD_LETTER]
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
                if row.from_state is State.DEAD_LETTER:  # a dead letter moves only by redrive
                    assert row.cause == "redriven"
                    decision = decisions[row.details["decision_id"]]
                    assert decision.result == "queued"
                    assert did in decision.delivery_ids
                if row.to_state is State.LEASED:  # no attempt started past the deadline rule
                    assert row.details["would_end"] < row.details["deadline"]
                if row.to_state is State.DEAD_LETTER:
                    assert row.reason is not None
                    assert row.reason in DeadLetterReason

    @invariant()
    def identity_and_digest_never_change(self) -> None:
        for did, digest in self.digests.items():
            delivery = self.sim.delivery(did)
            assert delivery.delivery_id == did
            assert delivery.payload_digest == digest
            assert payload_digest(self.sim.event(delivery.event_id).body) == digest


SenderMachine.TestCase.settings = settings(SenderMachine.TestCase.settings, stateful_step_count=50)
TestSenderMachine = SenderMachine.TestCase
