"""The delivery worker: claim due deliveries, send each attempt over HTTP, classify, persist, ack.

A :class:`Worker` has a name and its own view of time (the simulation clock plus a per-worker
skew), and runs over a :class:`~sender_sim.context.WorkerContext` — the store, clocks, faults,
policy, client and signer it needs, never the whole simulator. One pass (:meth:`Worker.run_once`)
is three steps:

1. :meth:`claim` — compare-and-set leases on the due deliveries (one transaction); nothing
   automatic goes to a disabled endpoint;
2. :meth:`send` — for each lease: :meth:`plan` the faults, build the :meth:`request` (signed
   afresh with the wire clock, the body byte-identical), :meth:`transmit` it through the injected
   ``httpx.AsyncClient`` and :meth:`conclude` with an :class:`~sender_sim.classify.Outcome`
   (timeouts, DNS, TLS and connection errors included). A send that raises anything else is a
   :class:`Thrown`: only its own claim is :meth:`release`-d (due again a minute later), and the
   rest of the pass goes on;
3. :meth:`complete` — classify with the policy's profile, compute the pure transition, and persist
   every transition with its ledger row and attempt in one transaction, each guarded by the
   fencing token the lease was taken with. The acknowledgement *is* that guarded commit: a worker
   acks only after the outcome is classified and the transition persisted, and a stale worker's
   ack is refused and recorded as a lease-expiry duplicate.

Faults from the context's plan fire inside these steps and are recorded as ledger notes.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import httpx

from receiver.signing import Secret, scheme_named
from sender_sim.bounded_exchange import AnswerLate, send_within
from sender_sim.classify import Outcome
from sender_sim.context import WorkerContext
from sender_sim.faults import Fault, FaultKind
from sender_sim.records import (
    Attempt,
    Delivery,
    Event,
    LedgerRow,
    OutcomeKind,
    State,
    rfc3339,
)
from sender_sim.store import Change
from sender_sim.transitions import claim, release, settle
from sender_sim.wire import ANSWER_BYTES, failure_kind, redact, signed_headers

__all__ = [
    "WORKER_VERSION",
    "AttemptPlan",
    "FaultNotes",
    "Lease",
    "Request",
    "RunReport",
    "Sent",
    "Thrown",
    "Worker",
    "chosen_outcome",
]

FAULT_ACTOR = "fault-injector"


def _package_version() -> str:
    try:
        return importlib.metadata.version("hookproof")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source checkout
        return "0+unknown"


WORKER_VERSION = f"hookproof-worker/{_package_version()}"
"""This worker's version, recorded with every attempt and transition."""


@dataclass(frozen=True)
class Lease:
    """A delivery leased to a worker, with the event it carries."""

    delivery: Delivery
    event: Event
    worker: str

    @property
    def token(self) -> int:
        return self.delivery.fencing_token


@dataclass(frozen=True)
class Sent:
    """What one attempt observed, and whether the worker survived to persist it."""

    lease: Lease
    outcome: Outcome
    started_at: datetime
    ended_at: datetime
    crashed: bool = False
    notes: tuple[LedgerRow, ...] = ()
    signed_at: int | None = None
    """The Unix second the attempt was signed with."""


@dataclass(frozen=True)
class Thrown:
    """A dispatch that raised before it had an outcome (not a transport error: those are
    outcomes), e.g. an in-process app's exception. Only its own claim is released."""

    lease: Lease
    error: Exception
    at: datetime


@dataclass
class RunReport:
    """Counts from one or more worker passes."""

    claimed: int = 0
    changed: int = 0
    """Claim-time changes: leases taken plus deliveries dead-lettered instead of leased."""
    sent: int = 0
    delivered: int = 0
    retried: int = 0
    dead_lettered: int = 0
    stale_acks: int = 0
    crashed: int = 0
    released: int = 0
    """Claims released because their dispatch raised (due again a minute later)."""
    passes: int = 0
    transitions: int = 0
    delivery_ids: set[str] = field(default_factory=set)

    def add(self, other: RunReport) -> RunReport:
        for name in (
            "claimed",
            "changed",
            "sent",
            "delivered",
            "retried",
            "dead_lettered",
            "stale_acks",
            "crashed",
            "released",
            "passes",
            "transitions",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.delivery_ids |= other.delivery_ids
        return self


@dataclass(frozen=True)
class AttemptPlan:
    """The faults that shape one attempt, decided before anything is sent."""

    secrets: tuple[Secret, ...]
    """What the attempt is signed with (the endpoint's, or the wrong/rotated-secret faults')."""
    timestamp_skew: timedelta = timedelta(0)
    tamper: bool = False
    """Change one byte of the body after signing (the tampered-body fault)."""
    copies: int = 1
    """Copies sent at once (the concurrent-sends fault)."""
    sequential: int = 1
    """Copies sent one after the other (the duplicate-send fault)."""


@dataclass(frozen=True)
class Request:
    """One attempt's request, ready to POST; ``redactions`` never appear in a sample."""

    url: httpx.URL
    body: bytes
    headers: Mapping[str, str]
    redactions: tuple[str, ...]
    timeout: timedelta = timedelta(seconds=10)
    """The shorter of the endpoint's timeout and the policy's."""
    signed_at: int | None = None
    """The Unix second in the signature."""


class FaultNotes:
    """The ledger notes one attempt collects (faults fired, copies sent), all stamped at its
    start."""

    def __init__(self, lease: Lease, at: datetime) -> None:
        self.lease = lease
        self.at = at
        self._rows: list[LedgerRow] = []

    def add(self, actor: str, cause: str, **details: Any) -> None:
        details = {"attempt": self.lease.delivery.attempt, **details}
        self._rows.append(_note(self.lease.delivery.delivery_id, self.at, actor, cause, **details))

    def fired(self, fault: Fault | None, **details: Any) -> bool:
        """Note ``fault`` when it fired; whether it did."""
        if fault is None:
            return False
        self.add(
            FAULT_ACTOR,
            f"fault:{fault.kind.value}",
            fault=fault.describe(),
            worker=self.lease.worker,
            **details,
        )
        return True

    def rows(self) -> tuple[LedgerRow, ...]:
        return tuple(self._rows)

    def take(self) -> list[LedgerRow]:
        """The rows so far, removed (they are being written now)."""
        rows, self._rows = self._rows, []
        return rows


def chosen_outcome(outcomes: Sequence[Outcome]) -> Outcome:
    """The outcome an attempt of several copies settles on: the first 2xx, else the first."""
    return next(
        (o for o in outcomes if o.status is not None and 200 <= o.status < 300), outcomes[0]
    )


def _answer(outcome: Outcome) -> int | str:
    return outcome.status if outcome.status is not None else outcome.kind.value


def _note(delivery_id: str, at: datetime, actor: str, cause: str, **details: Any) -> LedgerRow:
    return LedgerRow(delivery_id, at, None, None, actor, cause, None, details)


class Worker:
    """One named worker over a :class:`~sender_sim.context.WorkerContext` (a simulator)."""

    def __init__(
        self,
        context: WorkerContext,
        name: str,
        *,
        clock_skew: timedelta = timedelta(0),
        rescuer: bool = False,
    ) -> None:
        self.context = context
        self.name = name
        self.clock_skew = clock_skew
        self.rescuer = rescuer
        self.last_claim_changes = 0
        """How many deliveries the last :meth:`claim` changed (leased or dead-lettered)."""

    def __repr__(self) -> str:
        return f"Worker({self.name!r}, skew={self.clock_skew})"

    def now(self) -> datetime:
        """This worker's idea of the time: simulation clock + its skew (+ a skew fault)."""
        fault_skew = self.context.faults.skew(FaultKind.WORKER_CLOCK_SKEW, worker=self.name)
        return self.context.clock.now() + self.clock_skew + fault_skew

    # -- 1. claim ------------------------------------------------------------------------------

    def claim(self, limit: int = 100, *, delivery_ids: Sequence[str] = ()) -> list[Lease]:
        """Lease up to ``limit`` due deliveries (compare-and-set, one transaction)."""
        now = self.now()
        store = self.context.store
        if delivery_ids:  # nothing automatic goes to a disabled endpoint, named or not
            candidates = [store.delivery(i) for i in delivery_ids]
            candidates = [d for d in candidates if store.endpoint_enabled(d.endpoint_id)]
        else:
            candidates = store.claimable(now, limit)
        changes: list[Change] = []
        owners: list[str] = []
        notes: list[LedgerRow] = []
        policy = self.context.policy
        for before in candidates:
            step = claim(before, worker=self.name, now=now, policy=policy)
            if step is None:
                continue
            rival_fault = self.context.faults.fires(
                FaultKind.SECOND_WORKER,
                delivery_id=before.delivery_id,
                attempt=before.attempt + 1,
                worker=self.name,
            )
            if rival_fault is not None and step.delivery.state is State.LEASED:
                rival = f"{self.name}-rival"
                rival_step = claim(before, worker=rival, now=now, policy=policy)
                assert rival_step is not None
                notes.append(
                    _note(
                        before.delivery_id,
                        now,
                        FAULT_ACTOR,
                        "fault:second_worker",
                        fault=rival_fault.describe(),
                        workers=[rival, self.name],
                    )
                )
                lost = _note(
                    before.delivery_id,
                    now,
                    self.name,
                    "claim_race_lost",
                    token=step.delivery.fencing_token,
                    winner=rival,
                )
                changes.append(Change(before, rival_step.delivery, rival_step.row))
                owners.append(rival)
                changes.append(Change(before, step.delivery, step.row, refused=lost))
                owners.append(self.name)
                continue
            changes.append(Change(before, step.delivery, step.row))
            owners.append(self.name)
        skew = self.context.faults.skew(FaultKind.WORKER_CLOCK_SKEW, worker=self.name)
        if skew:  # the standing skew fault acted on these claims: say so on each delivery
            notes.extend(
                _note(
                    change.before.delivery_id,
                    now,
                    FAULT_ACTOR,
                    "fault:worker_clock_skew",
                    fault={
                        "kind": FaultKind.WORKER_CLOCK_SKEW.value,
                        "skew_s": skew.total_seconds(),
                    },
                    worker=self.name,
                    true_time=rfc3339(self.context.clock.now()),
                )
                for change in changes
            )
        if notes:
            store.note(notes)
        results = store.apply(changes)
        self.last_claim_changes = sum(results)
        leases: list[Lease] = []
        for change, owner, ok in zip(changes, owners, results, strict=True):
            if ok and change.after.state is State.LEASED:
                leases.append(Lease(change.after, self.context.event(change.after.event_id), owner))
        return leases

    # -- 2. send -------------------------------------------------------------------------------

    async def send(self, lease: Lease) -> Sent:
        """One attempt over HTTP; never raises for what the network does.

        Four steps, each usable alone: :meth:`plan` (which faults shape the attempt),
        :meth:`request` (sign afresh and build the request), :meth:`transmit` (POST it, once or
        as the faults' copies) and :meth:`conclude` (the faults after the answer: lost response,
        crash, lease expiry in flight).
        """
        notes = FaultNotes(lease, self.context.clock.now())
        plan = self.plan(lease, notes)
        request = self.request(lease, plan)
        outcomes = await self.transmit(request, plan)
        sent = await self.conclude(lease, outcomes, notes)
        return replace(sent, signed_at=request.signed_at)

    def _fires(self, kind: FaultKind, lease: Lease) -> Fault | None:
        return self.context.faults.fires(
            kind,
            delivery_id=lease.delivery.delivery_id,
            attempt=lease.delivery.attempt,
            worker=lease.worker,
        )

    def plan(self, lease: Lease, notes: FaultNotes) -> AttemptPlan:
        """Which faults shape this attempt before it is sent (each one fired is noted)."""
        endpoint = self.context.endpoint_config(lease.delivery.endpoint_id)
        secrets: tuple[Secret, ...] = endpoint.secrets
        timestamp_skew = timedelta(0)
        fault = self._fires(FaultKind.SIGNATURE_CLOCK_SKEW, lease)
        if notes.fired(fault):
            assert fault is not None
            timestamp_skew = fault.skew
        if notes.fired(self._fires(FaultKind.WRONG_SECRET, lease)):
            secrets = (self.context.random_secret(endpoint.endpoint.scheme),)
        if notes.fired(self._fires(FaultKind.ROTATED_SECRET, lease)):
            secrets = (self.context.random_secret(endpoint.endpoint.scheme), *secrets)
        tamper = notes.fired(self._fires(FaultKind.TAMPERED_BODY, lease))
        copies = 1
        concurrent = self._fires(FaultKind.CONCURRENT_SENDS, lease)
        if notes.fired(concurrent):
            assert concurrent is not None
            copies = concurrent.copies
        sequential = 2 if notes.fired(self._fires(FaultKind.DUPLICATE_SEND, lease)) else 1
        return AttemptPlan(secrets, timestamp_skew, tamper, copies, sequential)

    def _on_the_wire(self, moment: datetime) -> datetime:
        """``moment`` of the simulation clock in the wire clock's time, for a header the
        receiver reads: as far from the wire's now as it is from the simulation's (the two are
        one time unless the simulation's clock is virtual; under a second apart counts as
        one)."""
        offset = self.context.wire_clock.now() - self.context.clock.now()
        return moment + offset if abs(offset) >= timedelta(seconds=1) else moment

    def request(self, lease: Lease, plan: AttemptPlan) -> Request:
        """The attempt's request: signed afresh with the wire clock, the body byte-identical
        (unless the plan tampers with it after signing)."""
        delivery = lease.delivery
        endpoint = self.context.endpoint_config(delivery.endpoint_id)
        secrets = plan.secrets
        body = lease.event.body
        timestamp = int((self.context.wire_clock.now() + plan.timestamp_skew).timestamp())
        if not plan.timestamp_skew:  # a skew fault's stamp is left exactly as skewed
            stamps = self.context.wire_stamps
            if delivery.attempt > 1 and not stamps.knows(delivery.delivery_id):
                stamps.seed(
                    delivery.delivery_id, self.context.store.last_signed(delivery.delivery_id)
                )
            timestamp = stamps.next(delivery.delivery_id, timestamp)
        headers = signed_headers(
            scheme=endpoint.endpoint.scheme,
            secrets=secrets,
            event_id=lease.event.event_id,
            body=body,
            timestamp=timestamp,
            delivery_id=delivery.delivery_id,
            attempt=delivery.attempt,
            deadline_at=self._on_the_wire(delivery.deadline_at),
        )
        if plan.tamper:
            body = _tamper(body)
        redactions = (
            *scheme_named(endpoint.endpoint.scheme).secret_texts(secrets),
            *endpoint.url_secrets,
        )
        timeout = min(endpoint.endpoint.timeout, self.context.policy.timeout)
        return Request(endpoint.url, body, headers, tuple(redactions), timeout, timestamp)

    async def transmit(self, request: Request, plan: AttemptPlan) -> list[Outcome]:
        """POST the request (the plan's copies at once, or one after the other); every answer."""
        if plan.copies > 1:
            return list(await asyncio.gather(*(self._post(request) for _ in range(plan.copies))))
        return [await self._post(request) for _ in range(plan.sequential)]

    async def conclude(self, lease: Lease, outcomes: Sequence[Outcome], notes: FaultNotes) -> Sent:
        """What the attempt observed, after the faults that act once the answer is in."""
        outcome = chosen_outcome(outcomes)
        if len(outcomes) > 1:
            notes.add(
                lease.worker,
                "copies_sent",
                answers=[o.status if o.status is not None else o.kind.value for o in outcomes],
            )
        if notes.fired(self._fires(FaultKind.LOST_RESPONSE, lease), status=_answer(outcome)):
            outcome = Outcome.failure(OutcomeKind.TIMEOUT, "the response was lost (fault)")
        ended_at = self.context.clock.now()
        crash = self._fires(FaultKind.CRASH_AFTER_SEND, lease)
        if notes.fired(crash, status=outcome.status if outcome.status is not None else ""):
            return Sent(lease, outcome, notes.at, ended_at, crashed=True, notes=notes.rows())
        expiry = None if self.rescuer else self._fires(FaultKind.LEASE_EXPIRY_IN_FLIGHT, lease)
        if notes.fired(expiry):
            self.context.store.note(notes.take())
            await self._expire_and_rescue(lease, ended_at)
        return Sent(lease, outcome, notes.at, ended_at, notes=notes.rows())

    async def _post(self, request: Request) -> Outcome:
        """One POST within the attempt's timeout in all (connect, send, answer), reading no
        more of the answer than its sample (:mod:`sender_sim.bounded_exchange`)."""
        timeout = request.timeout.total_seconds()
        redactions = request.redactions
        client = self.context.client
        sending = client.build_request(
            "POST",
            request.url,
            content=request.body,
            headers=dict(request.headers),
            timeout=timeout,
        )
        try:
            response = await send_within(
                client, sending, within_s=timeout, max_bytes=ANSWER_BYTES, follow_progress=True
            )
        except AnswerLate as late:  # the request never left: a connect failure, as httpx's
            kind = OutcomeKind.CONNECT if late.sent is False else OutcomeKind.TIMEOUT
            return Outcome.failure(kind, late.describe())
        except httpx.RequestError as error:  # transport failures, undecodable answers
            return Outcome.failure(failure_kind(error), redact(str(error)[:1000], redactions))
        text = response.content.decode("utf-8", "replace")
        return Outcome.response(
            response.status_code, response.headers.get("retry-after"), redact(text, redactions)
        )

    async def _expire_and_rescue(self, lease: Lease, at: datetime) -> None:
        """The lease runs out while this worker waits; a rescuer takes the delivery over."""
        context = self.context
        delivery = lease.delivery
        row = _note(
            delivery.delivery_id,
            at,
            FAULT_ACTOR,
            "lease_expired_in_flight",
            worker=lease.worker,
            token=lease.token,
        )
        context.store.force_lease_expiry(delivery.delivery_id, lease.token, at, row)
        rescuer = Worker(
            context, f"{lease.worker}-rescuer", clock_skew=self.clock_skew, rescuer=True
        )
        leases = rescuer.claim(delivery_ids=[delivery.delivery_id])
        rescuer.finish([await rescuer.dispatch(x) for x in leases])

    # -- 3. complete ---------------------------------------------------------------------------

    def complete(self, results: Sequence[Sent]) -> list[bool]:
        """Classify, transition and persist every result in one transaction (the acks)."""
        context = self.context
        policy = context.policy
        changes: list[Change] = []
        notes: list[LedgerRow] = []
        orphan_attempts: list[Attempt] = []
        persisted: list[bool] = []
        indexes: list[int] = []
        for index, sent in enumerate(results):
            lease = sent.lease
            verdict = policy.profile.classify(sent.outcome)
            outcome = sent.outcome
            attempt = Attempt(
                delivery_id=lease.delivery.delivery_id,
                number=lease.delivery.attempt,
                worker=lease.worker,
                fencing_token=lease.token,
                started_at=sent.started_at,
                ended_at=sent.ended_at,
                kind=outcome.kind,
                classification=verdict.classification,
                status=outcome.status,
                retry_after=outcome.retry_after,
                response_sample=outcome.sample,
                error=outcome.error,
                signed_at=sent.signed_at,
            )
            notes.extend(sent.notes)
            persisted.append(False)
            if sent.crashed:
                orphan_attempts.append(replace(attempt, acked=False))
                continue
            now = self.now()
            step = settle(
                lease.delivery,
                outcome,
                verdict,
                worker=lease.worker,
                now=now,
                policy=policy,
                rng=context.rng,
            )
            refused = _note(
                lease.delivery.delivery_id,
                now,
                lease.worker,
                "stale_ack_refused",
                token=lease.token,
                attempt=lease.delivery.attempt,
                classification=verdict.classification,
                status=outcome.status if outcome.status is not None else outcome.kind.value,
                would_have=step.delivery.state.value,
            )
            changes.append(Change(lease.delivery, step.delivery, step.row, attempt, refused))
            indexes.append(index)
        if notes or orphan_attempts:
            context.store.note(notes, orphan_attempts)
        results_ok = context.store.apply(changes)
        for index, ok in zip(indexes, results_ok, strict=True):
            persisted[index] = ok
        return persisted

    # -- a dispatch that raised ------------------------------------------------------------

    def release(self, failures: Sequence[Thrown]) -> list[bool]:
        """Release each failed dispatch's own claim (guarded by its fencing token: a newer
        claim is never reset), due again in a minute, with no attempt or result recorded."""
        changes: list[Change] = []
        for failure in failures:
            lease = failure.lease
            delivery = lease.delivery
            message = redact(str(failure.error)[:1000])
            step = release(
                delivery,
                worker=lease.worker,
                now=failure.at,
                error_type=type(failure.error).__name__,
                error=message,
            )
            refused = _note(
                delivery.delivery_id,
                failure.at,
                lease.worker,
                "release_refused",
                token=lease.token,
                attempt=delivery.attempt,
                error_type=type(failure.error).__name__,
                error=message,
            )
            changes.append(Change(delivery, step.delivery, step.row, refused=refused))
        return self.context.store.apply(changes)

    # -- one pass ------------------------------------------------------------------------------

    async def dispatch(self, lease: Lease) -> Sent | Thrown:
        """:meth:`send`, with anything it raises (not a transport error) caught as
        :class:`Thrown` so that it concerns this lease alone."""
        try:
            return await self.send(lease)
        except Exception as error:  # an in-process app's bug, a missing endpoint config, ...
            return Thrown(lease, error, self.context.clock.now())

    def finish(self, results: Sequence[Sent | Thrown]) -> tuple[list[bool], list[bool]]:
        """Complete the sent attempts and release the failed dispatches; the acks of each."""
        sent = [r for r in results if isinstance(r, Sent)]
        failed = [r for r in results if isinstance(r, Thrown)]
        return self.complete(sent), self.release(failed)

    async def run_once(self, limit: int = 100, *, concurrency: int = 64) -> RunReport:
        """Claim, send and complete one batch of due deliveries."""
        leases = await asyncio.to_thread(self.claim, limit)
        report = RunReport(passes=1, claimed=len(leases), changed=self.last_claim_changes)
        if not leases:
            return report
        gate = asyncio.Semaphore(concurrency)

        async def one(lease: Lease) -> Sent | Thrown:
            async with gate:
                return await self.dispatch(lease)

        results = list(await asyncio.gather(*(one(lease) for lease in leases)))
        acked, released = await asyncio.to_thread(self.finish, results)
        sent = [r for r in results if isinstance(r, Sent)]
        report.sent = len(sent)
        report.released = sum(released)
        report.delivery_ids.update(r.lease.delivery.delivery_id for r in results)
        for item, ok in zip(sent, acked, strict=True):
            if item.crashed:
                report.crashed += 1
            elif not ok:
                report.stale_acks += 1
        return report


def _tamper(body: bytes) -> bytes:
    """The body with one byte changed inside a string or number, so it stays likely-JSON."""
    if not body:
        return b" "
    index = len(body) // 2
    flipped = body[index] ^ 0x01
    if flipped in b'"\\{}[]:,':
        return body + b" "
    return body[:index] + bytes([flipped]) + body[index + 1 :]
