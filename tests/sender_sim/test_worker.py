"""The worker's send steps, each alone: plan (faults before sending), request (signing), transmit
(copies), conclude (faults after the answer) — and a worker over a bare context, no simulator."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

import httpx
import pytest

from receiver.signing import Secret, Verifier, scheme_named
from sender_sim import (
    Fault,
    FaultInjector,
    FaultKind,
    FaultPlan,
    Outcome,
    OutcomeKind,
    Policy,
    SQLiteStore,
    State,
    VirtualClock,
)
from sender_sim.context import WorkerContext
from sender_sim.endpoint_config import EndpointConfig
from sender_sim.records import Endpoint, Event
from sender_sim.wire import WireStamps
from sender_sim.worker import AttemptPlan, FaultNotes, Lease, Request, Worker, chosen_outcome
from tests.sender_sim.conftest import SECRET, T0, URL, Handler, MakeSim

LATER = T0 + timedelta(hours=2)


def _lease(
    make_sim: MakeSim, *faults: Fault, handler: Handler | None = None
) -> tuple[Worker, Lease]:
    sim = make_sim(handler, faults=FaultPlan(faults))
    sim.publish(endpoint_id="partner", deadline_at=LATER)
    worker = sim.default_worker
    [lease] = worker.claim()
    return worker, lease


def test_plan_without_faults_signs_with_the_endpoints_secret(make_sim: MakeSim) -> None:
    worker, lease = _lease(make_sim)
    notes = FaultNotes(lease, T0)
    plan = worker.plan(lease, notes)
    assert plan == AttemptPlan((Secret(SECRET),))
    assert notes.rows() == ()


def test_plan_notes_every_fault_it_fires(make_sim: MakeSim) -> None:
    worker, lease = _lease(
        make_sim,
        Fault(FaultKind.ROTATED_SECRET),
        Fault(FaultKind.TAMPERED_BODY),
        Fault(FaultKind.SIGNATURE_CLOCK_SKEW, skew=timedelta(seconds=-400)),
        Fault(FaultKind.CONCURRENT_SENDS, copies=3),
    )
    notes = FaultNotes(lease, T0)
    plan = worker.plan(lease, notes)
    assert len(plan.secrets) == 2
    assert plan.secrets[1] == Secret(SECRET)
    assert plan.secrets[0] != Secret(SECRET)
    assert plan.tamper
    assert plan.copies == 3
    assert plan.sequential == 1
    assert plan.timestamp_skew == timedelta(seconds=-400)
    assert [r.cause for r in notes.rows()] == [
        "fault:signature_clock_skew",
        "fault:rotated_secret",
        "fault:tampered_body",
        "fault:concurrent_sends",
    ]
    assert all(r.details["attempt"] == 1 and r.at == T0 for r in notes.rows())


def test_request_is_signed_for_the_receiver_and_redacts_the_secret(make_sim: MakeSim) -> None:
    worker, lease = _lease(make_sim)
    request = worker.request(lease, AttemptPlan((Secret(SECRET),)))
    assert request.url == httpx.URL(URL)
    assert request.body == lease.event.body
    assert request.headers["hookproof-attempt"] == "1"
    assert SECRET in request.redactions
    assert SECRET.removeprefix("whsec_") in request.redactions
    verifier = Verifier([Secret(SECRET)], scheme=scheme_named("standard"))
    now = int(request.headers["webhook-timestamp"])
    verified = verifier.verify(request.body, dict(request.headers), now=float(now))
    assert verified.event_id == lease.event.event_id


def test_request_tampers_after_signing(make_sim: MakeSim) -> None:
    worker, lease = _lease(make_sim)
    request = worker.request(lease, AttemptPlan((Secret(SECRET),), tamper=True))
    assert request.body != lease.event.body
    assert len(request.body) >= len(lease.event.body)


@pytest.mark.parametrize(("plan", "sent"), [((1, 1), 1), ((1, 2), 2), ((3, 1), 3)])
def test_transmit_sends_the_plans_copies(
    make_sim: MakeSim, plan: tuple[int, int], sent: int
) -> None:
    seen: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        return httpx.Response(200 if len(seen) == 1 else 409)

    worker, lease = _lease(make_sim, handler=handler)
    copies, sequential = plan
    request = worker.request(lease, AttemptPlan((Secret(SECRET),)))
    outcomes = asyncio.run(
        worker.transmit(
            request, AttemptPlan((Secret(SECRET),), copies=copies, sequential=sequential)
        )
    )
    assert len(outcomes) == sent == len(seen)
    assert sorted(o.status or 0 for o in outcomes) == sorted([200] + [409] * (sent - 1))
    assert set(seen) == {lease.event.body}


def test_chosen_outcome_prefers_the_first_2xx() -> None:
    failed = Outcome.failure(OutcomeKind.TIMEOUT)
    assert chosen_outcome([failed, Outcome.response(503), Outcome.response(204)]).status == 204
    assert chosen_outcome([failed, Outcome.response(503)]) is failed


def test_conclude_turns_a_lost_response_into_a_timeout(make_sim: MakeSim) -> None:
    worker, lease = _lease(make_sim, Fault(FaultKind.LOST_RESPONSE))
    notes = FaultNotes(lease, T0)
    sent = asyncio.run(
        worker.conclude(lease, [Outcome.response(200), Outcome.response(200)], notes)
    )
    assert sent.outcome.kind is OutcomeKind.TIMEOUT
    assert not sent.crashed
    assert [r.cause for r in sent.notes] == ["copies_sent", "fault:lost_response"]
    assert sent.notes[0].details["answers"] == [200, 200]
    assert sent.notes[1].details["status"] == 200


def test_conclude_after_a_crash_keeps_the_answer_but_marks_the_crash(
    make_sim: MakeSim,
) -> None:
    worker, lease = _lease(make_sim, Fault(FaultKind.CRASH_AFTER_SEND))
    sent = asyncio.run(worker.conclude(lease, [Outcome.response(200)], FaultNotes(lease, T0)))
    assert sent.crashed
    assert sent.outcome.status == 200
    assert [r.cause for r in sent.notes] == ["fault:crash_after_send"]


# -- a worker needs only its context -----------------------------------------------------------


@dataclass
class BareContext:
    """The smallest :class:`WorkerContext`: no simulator anywhere."""

    client: httpx.AsyncClient
    store: SQLiteStore = field(default_factory=SQLiteStore)
    clock: VirtualClock = field(default_factory=lambda: VirtualClock(T0))
    wire_clock: VirtualClock = field(default_factory=lambda: VirtualClock(T0))
    wire_stamps: WireStamps = field(default_factory=WireStamps)
    faults: FaultInjector = field(default_factory=lambda: FaultInjector(FaultPlan()))
    policy: Policy = field(default_factory=Policy)
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def endpoint_config(self, endpoint_id: str) -> EndpointConfig:
        return EndpointConfig(Endpoint(endpoint_id, URL), (Secret(SECRET),))

    def event(self, event_id: str) -> Event:
        return self.store.event(event_id)

    def random_secret(self, scheme: str = "standard") -> Secret:
        return Secret("whsec_" + "A" * 32)


@pytest.fixture
def bare() -> Iterator[BareContext]:
    answers = iter([503, 200])
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda _: httpx.Response(next(answers)))
    )
    context = BareContext(client)
    yield context
    context.store.close()


def test_a_worker_runs_over_a_bare_context(bare: BareContext) -> None:
    from sender_sim.envelope import build_body, payload_digest
    from sender_sim.transitions import new_delivery

    context: WorkerContext = bare
    body = build_body(event_type="t", occurred_at=T0, data={})
    event = Event("evt_1", "t", None, T0, body, payload_digest(body))
    step = new_delivery(
        delivery_id="del_1",
        event=event,
        endpoint_id="partner",
        destination_url=URL,
        deadline_at=LATER,
        now=T0,
        policy=bare.policy,
    )
    bare.store.insert_published(event, step.delivery, step.row)
    worker = Worker(context, "w")
    first = asyncio.run(worker.run_once())
    assert (first.claimed, first.sent, first.stale_acks) == (1, 1, 0)
    assert bare.store.delivery("del_1").state is State.SCHEDULED
    bare.clock.advance(timedelta(hours=1))
    asyncio.run(worker.run_once())
    assert bare.store.delivery("del_1").state is State.DELIVERED
    assert [a.status for a in bare.store.attempts("del_1")] == [503, 200]


def test_request_is_plain_data() -> None:
    request = Request(httpx.URL(URL), b"{}", {"a": "b"}, ())
    assert request.headers["a"] == "b"
