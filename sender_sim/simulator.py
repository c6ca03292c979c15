"""The façade: one :class:`Simulator` that publishes events, runs workers, lists and redrives the
DLQ, explains deliveries and reports metrics — what the CLI, the sandbox and the conformance
runner use.

It wires together a store (:class:`~sender_sim.store.SQLiteStore`, a file or ``":memory:"``), a
simulation clock (real or :class:`~sender_sim.clock.VirtualClock`), a wire clock for signature
timestamps (real time by default), a :class:`~sender_sim.policy.Policy`, a seeded
``random.Random`` for jitter, a :class:`~sender_sim.faults.FaultPlan`, and an injected
``httpx.AsyncClient`` (one is created, and closed by :meth:`Simulator.aclose`, when none is given).
Endpoint secrets live only in this object, never in the store.

:meth:`Simulator.run_until_settled` runs a delivery to completion: run the due work; when nothing
is due, jump the virtual clock to the next due time (six hours of backoff take no wall time).
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, TextIO

import httpx

from receiver.exceptions import ConfigurationError as ReceiverConfigurationError
from receiver.redaction import shown_url
from receiver.signing import Secret, fingerprint, scheme_named
from sender_sim import inspection
from sender_sim.clock import Clock, RealClock, VirtualClock, require_aware
from sender_sim.endpoint_config import EndpointConfig
from sender_sim.endpoints import fan_out, history_entry
from sender_sim.envelope import (
    ENVELOPE_SCHEMA_VERSION,
    BodyLayout,
    body_layout,
    build_body,
    envelope_problem,
    payload_digest,
)
from sender_sim.exceptions import (
    ConfigurationError,
    NotFound,
    RedriveProblem,
    RedriveRefused,
    ResendRefused,
)
from sender_sim.explain import explain_text
from sender_sim.faults import FaultInjector, FaultKind, FaultPlan
from sender_sim.inspection import Row, RowFilter
from sender_sim.metrics import MetricsSnapshot, snapshot
from sender_sim.policy import Policy
from sender_sim.records import (
    DEFAULT_ENDPOINT_TIMEOUT,
    Attempt,
    DeadLetterReason,
    Delivery,
    Endpoint,
    EndpointChange,
    Event,
    EventStatus,
    LedgerRow,
    RedriveDecision,
    State,
    Versions,
    format_duration,
    reason_named,
    rfc3339,
    to_us,
)
from sender_sim.redrive import (
    MAX_BATCH,
    RedriveResult,
    RedriveScope,
    check_request,
    item_problems,
    renewal_problems,
)
from sender_sim.resend import ResendPlan, ResendResult, plan_resend
from sender_sim.sender_client import sender_client
from sender_sim.store import Change, DeliveryFilter, SQLiteStore
from sender_sim.transitions import Step, new_delivery, redrive
from sender_sim.urls import url_problem
from sender_sim.wire import WireStamps
from sender_sim.worker import WORKER_VERSION, RunReport, Worker

__all__ = ["EndpointConfig", "Publication", "PublishResult", "Simulator"]

_EVENT_CACHE = 4096


@dataclass(frozen=True)
class Publication:
    """One event to publish (the keyword arguments of :meth:`Simulator.publish`, as data)."""

    endpoint_id: str
    deadline_at: datetime
    event_type: str = "hookproof.test"
    data: Mapping[str, Any] | None = None
    business_key: str | None = None
    event_id: str | None = None
    occurred_at: datetime | None = None
    body: bytes | None = None
    delivery_id: str | None = None
    first_attempt_at: datetime | None = None
    body_layout: BodyLayout | None = None
    """The layout of the built body (:func:`~sender_sim.envelope.body_layout` of every endpoint
    the event fans out to); ``None``: the endpoint's scheme decides."""


@dataclass(frozen=True)
class EventPublication:
    """One event to fan out (the keyword arguments of :meth:`Simulator.publish_event`)."""

    event_type: str
    deadline_at: datetime
    data: Mapping[str, Any] | None = None
    business_key: str | None = None
    event_id: str | None = None
    body: bytes | None = None
    occurred_at: datetime | None = None


@dataclass(frozen=True)
class PublishResult:
    """What :meth:`Simulator.publish_event` did: the event, one delivery per endpoint it went
    to, or none and the event-only status saying why."""

    event_id: str
    delivery_ids: tuple[str, ...] = ()
    event_status: EventStatus | None = None
    endpoint_ids: tuple[str, ...] = field(default=())


def _fingerprint(secrets: Sequence[Secret]) -> str:
    return fingerprint(secrets)


def _held_note(delivery: Delivery, at: datetime, actor: str, *, enabled: bool) -> LedgerRow:
    """The ledger row of a delivery held (or released) by its endpoint's active flag."""
    details: dict[str, Any] = {"endpoint_id": delivery.endpoint_id, "state": delivery.state.value}
    if delivery.next_attempt_at is not None:
        details["due"] = rfc3339(delivery.next_attempt_at)
    if delivery.lease_expires_at is not None:
        details["lease_expires_at"] = rfc3339(delivery.lease_expires_at)
    cause = "endpoint_enabled" if enabled else "endpoint_disabled"
    return LedgerRow(delivery.delivery_id, at, None, None, actor, cause, None, details)


def _on_grid(when: datetime, period: timedelta) -> datetime:
    """The first instant at or after ``when`` on the grid of ``period`` (from the epoch)."""
    if period <= timedelta(0):
        return when
    period_us = period // timedelta(microseconds=1)
    offset = -to_us(when) % period_us
    return when + timedelta(microseconds=offset)


class Simulator:
    """The sender simulator; see the package docstring for the whole public API."""

    def __init__(
        self,
        store: SQLiteStore | None = None,
        *,
        clock: Clock | None = None,
        policy: Policy | None = None,
        client: httpx.AsyncClient | None = None,
        seed: int = 0,
        faults: FaultPlan | None = None,
        wire_clock: Clock | None = None,
        worker_id: str = "worker-1",
        worker_skew: timedelta = timedelta(0),
        rng: random.Random | None = None,
    ) -> None:
        self.store = store if store is not None else SQLiteStore(":memory:")
        self.clock: Clock = clock if clock is not None else RealClock()
        self.wire_clock: Clock = wire_clock if wire_clock is not None else RealClock()
        self.wire_stamps = WireStamps()
        """Per delivery, the last signed second: a delivery's attempts never repeat one."""
        self.policy = policy if policy is not None else Policy()
        self.seed = seed
        self.rng = rng if rng is not None else random.Random(seed)
        self._secret_rng = random.Random(f"secrets:{seed}")
        self._id_rng = random.Random(f"ids:{seed}")
        self.set_faults(faults if faults is not None else FaultPlan())
        self._own_client = client is None
        self._client = client
        self._endpoints: dict[str, EndpointConfig] = {}
        self._events: dict[str, Event] = {}
        self._ids = itertools.count(1)
        self.default_worker = Worker(self, worker_id, clock_skew=worker_skew)
        self.store.versions = self.versions

    def versions(self) -> Versions:
        """What writes now: this policy's version, the envelope schema and the worker."""
        return Versions(self.policy.version, ENVELOPE_SCHEMA_VERSION, WORKER_VERSION)

    def set_faults(self, plan: FaultPlan) -> None:
        """Inject ``plan``'s faults from the next attempt on (its counters start afresh)."""
        self.fault_plan = plan
        self.faults = FaultInjector(plan)

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = sender_client()
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client this simulator created (an injected one is left open)."""
        if self._own_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> Simulator:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def now(self) -> datetime:
        return self.clock.now()

    def advance(self, delta: timedelta) -> datetime:
        """Move the virtual clock forward (a real clock cannot be moved)."""
        if not isinstance(self.clock, VirtualClock):
            raise ConfigurationError("only a virtual clock can be advanced")
        return self.clock.advance(delta)

    def set_time(self, when: datetime) -> datetime:
        if not isinstance(self.clock, VirtualClock):
            raise ConfigurationError("only a virtual clock can be set")
        return self.clock.set(when)

    def random_secret(self, scheme: str = "standard") -> Secret:
        """A fresh secret of ``scheme``'s own shape that no receiver knows (wrong- and
        rotated-secret faults)."""
        raw = bytes(self._secret_rng.getrandbits(8) for _ in range(24))
        return scheme_named(scheme).mint_secret(raw)

    # -- endpoints -----------------------------------------------------------------------------

    def add_endpoint(
        self,
        endpoint_id: str,
        url: str,
        secrets: Iterable[str | Secret],
        *,
        scheme: str = "standard",
        timeout: float = DEFAULT_ENDPOINT_TIMEOUT.total_seconds(),
        event_types: Iterable[str] | None = None,
        active: bool = True,
        actor: str = "operator",
    ) -> Endpoint:
        """Register (or update) an endpoint; its secrets stay in memory, the store gets a
        fingerprint. ``timeout`` (seconds) bounds each request to it, ``event_types`` are its
        subscriptions (``None``: every type). The setup history records the creation or change
        (nothing when the settings are the same)."""
        if not endpoint_id or not isinstance(endpoint_id, str):
            raise ConfigurationError("an endpoint needs a non-empty id")
        problem = url_problem(url)
        if problem is not None:
            raise ConfigurationError(f"endpoint URL {shown_url(url)!r} cannot be used: {problem}")
        if not timeout > 0:
            raise ConfigurationError(f"an endpoint's timeout must be positive, not {timeout}")
        types = None if event_types is None else tuple(sorted(set(event_types)))
        if types is not None and not all(isinstance(t, str) and t for t in types):
            raise ConfigurationError("event types must be non-empty strings")
        try:
            scheme_obj = scheme_named(scheme)
            keys = tuple(s if isinstance(s, Secret) else Secret(s) for s in secrets)
            for key in keys:
                scheme_obj.key(key)
        except ReceiverConfigurationError as error:
            raise ConfigurationError(str(error)) from None
        if not keys:
            raise ConfigurationError("an endpoint needs at least one secret")
        endpoint = Endpoint(
            endpoint_id,
            url,
            scheme,
            active,
            _fingerprint(keys),
            timedelta(seconds=timeout),
            types,
        )
        self._save_endpoint(endpoint, actor)
        self._endpoints[endpoint_id] = EndpointConfig(endpoint, keys)
        return endpoint

    def _save_endpoint(self, endpoint: Endpoint, actor: str) -> Endpoint | None:
        """Store ``endpoint`` with its setup-history entry; the settings it had before."""
        before = self.store.endpoint(endpoint.endpoint_id)
        change = history_entry(before, endpoint, at=self.clock.now(), actor=actor)
        self.store.save_endpoint(endpoint, change)
        return before

    def set_endpoint_active(
        self, endpoint_id: str, active: bool, *, actor: str = "operator"
    ) -> None:
        """Enable or disable an endpoint. While disabled nothing automatic is sent to it (no
        first attempt, no retry, no takeover of an expired lease); every delivery that was due
        or waiting gets a ledger row saying so, and another when the endpoint is enabled again
        (the held deliveries then resume, under the deadline rule as always). Works on an
        endpoint known only to the store (no secrets needed)."""
        stored = self.store.endpoint(endpoint_id)
        config = self._endpoints.get(endpoint_id)
        if stored is None and config is None:
            raise NotFound(f"no endpoint {endpoint_id!r}")
        current = stored if stored is not None else config.endpoint  # type: ignore[union-attr]
        endpoint = replace(current, active=active)
        before = self._save_endpoint(endpoint, actor)
        if config is not None:
            self._endpoints[endpoint_id] = EndpointConfig(endpoint, config.secrets)
        was_active = before.active if before is not None else current.active
        if active == was_active:
            return
        now = self.clock.now()
        live = self.store.select(
            DeliveryFilter(endpoint_id=endpoint_id, states=(State.SCHEDULED, State.LEASED))
        )
        self.store.note([_held_note(d, now, actor, enabled=active) for d in live])

    def delete_endpoint(self, endpoint_id: str, *, actor: str) -> int:
        """Delete an endpoint and its delivery history (its deliveries can no longer be
        inspected or resent; events left without deliveries become ``history_unavailable``).
        Its setup history is kept, with this deletion. Returns how many deliveries went."""
        before = self.store.endpoint(endpoint_id)
        if before is None:
            raise NotFound(f"no endpoint {endpoint_id!r}")
        change = history_entry(before, None, at=self.clock.now(), actor=actor)
        assert change is not None
        removed = self.store.delete_endpoint(endpoint_id, change)
        self._endpoints.pop(endpoint_id, None)
        self._events.clear()  # some events are history_unavailable now: no stale status
        return removed

    def endpoints(self) -> list[Endpoint]:
        """Every endpoint configured now (from the store: secrets are not needed)."""
        return self.store.endpoints()

    def endpoint_history(self, endpoint_id: str | None = None) -> list[EndpointChange]:
        """The setup history of one endpoint, or of all; deleted endpoints included."""
        return self.store.endpoint_history(endpoint_id)

    def use_secrets(self, endpoint_id: str, secrets: Iterable[str | Secret]) -> None:
        """Sign for an endpoint known to the store with ``secrets`` (held in memory only),
        changing none of its settings; a different secret is recorded as a change."""
        stored = self.store.endpoint(endpoint_id)
        if stored is None:
            raise NotFound(f"no endpoint {endpoint_id!r}")
        self.add_endpoint(
            endpoint_id,
            stored.url,
            secrets,
            scheme=stored.scheme,
            timeout=stored.timeout.total_seconds(),
            event_types=stored.event_types,
            active=stored.active,
        )

    def _endpoint(self, endpoint_id: str) -> Endpoint:
        """The endpoint's settings: as configured here, else as stored."""
        config = self._endpoints.get(endpoint_id)
        if config is not None:
            return config.endpoint
        stored = self.store.endpoint(endpoint_id)
        if stored is None:
            self.endpoint_config(endpoint_id)  # raises NotFound with the usual advice
        assert stored is not None
        return stored

    def endpoint_config(self, endpoint_id: str) -> EndpointConfig:
        try:
            return self._endpoints[endpoint_id]
        except KeyError:
            raise NotFound(
                f"endpoint {endpoint_id!r} is not configured in this simulator "
                "(add_endpoint with its secret first)"
            ) from None

    # -- publishing ----------------------------------------------------------------------------

    def publish(
        self,
        *,
        endpoint_id: str,
        deadline_at: datetime,
        event_type: str = "hookproof.test",
        data: Mapping[str, Any] | None = None,
        business_key: str | None = None,
        event_id: str | None = None,
        occurred_at: datetime | None = None,
        body: bytes | None = None,
        delivery_id: str | None = None,
        first_attempt_at: datetime | None = None,
    ) -> str:
        """Publish one event to one endpoint and return the new ``delivery_id``.

        The body is built once (``{"type", "timestamp", "data"}``, plus ``"id"`` for the Stripe
        scheme) unless ``body`` gives the exact bytes. An envelope that fails validation is stored
        and dead-lettered as ``invalid_envelope`` at once; a first attempt that cannot fit the
        deadline dead-letters as ``deadline_exhausted``.
        """
        publication = Publication(
            endpoint_id=endpoint_id,
            deadline_at=deadline_at,
            event_type=event_type,
            data=data,
            business_key=business_key,
            event_id=event_id,
            occurred_at=occurred_at,
            body=body,
            delivery_id=delivery_id,
            first_attempt_at=first_attempt_at,
        )
        return self.publish_many([publication])[0]

    def publish_many(
        self, publications: Sequence[Publication], *, event_only: Sequence[Event] = ()
    ) -> list[str]:
        """Publish several events in ONE transaction (all or none); their delivery ids in order.

        A delivery to a disabled endpoint is stored, and its ledger says it is not sent while the
        endpoint is disabled. ``event_only`` events (with their status) are stored in the same
        transaction."""
        now = self.clock.now()
        rows = [self._prepare(p, now) for p in publications]
        held = [
            _held_note(step.delivery, now, "publisher", enabled=False)
            for _, step in rows
            if step.delivery.state is State.SCHEDULED
            and not self._endpoint(step.delivery.endpoint_id).active
        ]
        self.store.insert_published_many(rows, held, event_only)
        return [step.delivery.delivery_id for _, step in rows]

    def publish_event(
        self,
        *,
        event_type: str,
        deadline_at: datetime,
        data: Mapping[str, Any] | None = None,
        business_key: str | None = None,
        event_id: str | None = None,
        body: bytes | None = None,
        occurred_at: datetime | None = None,
    ) -> PublishResult:
        """Publish one event to every endpoint active and subscribed to ``event_type`` now:
        one delivery each, in one transaction. When none is, the event is stored with its
        event-only status (``no_endpoint``, ``endpoint_disabled`` or ``not_subscribed``) and no
        delivery or attempt. Endpoints added later never receive it automatically (only an
        explicit :meth:`resend` sends it to them)."""
        spec = EventPublication(
            event_type=event_type,
            deadline_at=deadline_at,
            data=data,
            business_key=business_key,
            event_id=event_id,
            body=body,
            occurred_at=occurred_at,
        )
        return self.publish_events([spec])[0]

    def publish_events(self, events: Sequence[EventPublication]) -> list[PublishResult]:
        """:meth:`publish_event` for several events in ONE transaction (all or none)."""
        now = self.clock.now()
        configured = self.store.endpoints()
        publications: list[Publication] = []
        event_only: list[Event] = []
        plans: list[tuple[str, EventStatus | None, tuple[str, ...], int]] = []
        for spec in events:
            deadline = require_aware(spec.deadline_at, "deadline")
            targets, status = fan_out(configured, spec.event_type)
            eid = spec.event_id if spec.event_id is not None else self._new_id("evt", now)
            occurred = require_aware(spec.occurred_at, "occurred_at") if spec.occurred_at else now
            if status is not None:
                raw = spec.body
                if raw is None:
                    raw = build_body(  # no endpoint reads it: the generic layout, with the id
                        event_type=spec.event_type,
                        occurred_at=occurred,
                        data=spec.data or {},
                        event_id=eid,
                    )
                event_only.append(
                    Event(
                        eid,
                        spec.event_type,
                        spec.business_key,
                        occurred,
                        bytes(raw),
                        payload_digest(raw),
                        status,
                        now,
                        deadline,
                    )
                )
                plans.append((eid, status, (), 0))
                continue
            layout = body_layout(t.scheme for t in targets)
            publications.extend(
                Publication(
                    endpoint_id=t.endpoint_id,
                    deadline_at=deadline,
                    event_type=spec.event_type,
                    data=spec.data,
                    business_key=spec.business_key,
                    event_id=eid,
                    occurred_at=occurred,
                    body=spec.body,
                    body_layout=layout,
                )
                for t in targets
            )
            plans.append((eid, None, tuple(t.endpoint_id for t in targets), len(targets)))
        ids = iter(self.publish_many(publications, event_only=event_only))
        return [
            PublishResult(eid, tuple(next(ids) for _ in range(count)), status, endpoints)
            for eid, status, endpoints, count in plans
        ]

    def _new_id(self, prefix: str, now: datetime) -> str:
        """A time-ordered id (like a ULID): creation time in µs, a counter, seeded randomness.

        Ordered ids keep the store's B-trees local (new rows append), and sort by creation.
        """
        serial = next(self._ids) & 0xFFFFFF
        return f"{prefix}_{to_us(now):013x}{serial:06x}{self._id_rng.getrandbits(40):010x}"

    def _prepare(self, p: Publication, now: datetime) -> tuple[Event, Step]:
        deadline = require_aware(p.deadline_at, "deadline")
        occurred = require_aware(p.occurred_at, "occurred_at") if p.occurred_at else now
        first = (
            require_aware(p.first_attempt_at, "first attempt time") if p.first_attempt_at else None
        )
        endpoint = self._endpoint(p.endpoint_id)
        scheme = endpoint.scheme
        eid = p.event_id if p.event_id is not None else self._new_id("evt", now)
        body = p.body
        if body is None:
            layout = p.body_layout or body_layout((scheme,))
            with_id = layout == "stripe-event" or scheme_named(scheme).id_in_body
            body = build_body(
                event_type=p.event_type,
                occurred_at=occurred,
                data=p.data or {},
                event_id=eid if with_id else None,
                layout=layout,
            )
        event = Event(
            eid,
            p.event_type,
            p.business_key,
            occurred,
            bytes(body),
            payload_digest(body),
            deadline_at=deadline,
        )
        problem = envelope_problem(
            event_id=eid,
            event_type=p.event_type,
            body=event.body,
            scheme=scheme,
            max_body_bytes=self.policy.max_body_bytes,
        )
        did = p.delivery_id or self._new_id("del", now)
        step = new_delivery(
            delivery_id=did,
            event=event,
            endpoint_id=p.endpoint_id,
            destination_url=endpoint.url,
            deadline_at=deadline,
            now=now,
            policy=self.policy,
            first_attempt_at=first,
            envelope_problem=problem,
        )
        return event, step

    # -- running -------------------------------------------------------------------------------

    def worker(self, name: str, *, clock_skew: timedelta = timedelta(0)) -> Worker:
        """Another worker over the same store and clock (e.g. a second, skewed one)."""
        return Worker(self, name, clock_skew=clock_skew)

    async def run_due(
        self, *, worker: Worker | None = None, limit: int = 100, concurrency: int = 64
    ) -> RunReport:
        """One worker pass over the deliveries due now."""
        chosen = worker if worker is not None else self.default_worker
        return await chosen.run_once(limit, concurrency=concurrency)

    async def run_until_settled(
        self,
        *,
        delivery_ids: Sequence[str] = (),
        until: datetime | None = None,
        worker: Worker | None = None,
        limit: int = 100,
        max_passes: int = 1_000_000,
        poll_interval: timedelta = timedelta(0),
    ) -> RunReport:
        """Run passes until the given deliveries (or all) are delivered or dead letters.

        When nothing is due, the virtual clock jumps to the next due time (never past
        ``until``); with the real clock the loop waits for it. ``poll_interval`` models a worker
        that wakes only on a grid of that period (e.g. once a second) and then claims everything
        due: the jump goes to the first grid instant at or after the next due time. The default
        (zero) wakes exactly at each due time.
        """
        total = RunReport()
        targets = tuple(delivery_ids)
        chosen = worker if worker is not None else self.default_worker
        for _ in range(max_passes):
            report = await self.run_due(worker=chosen, limit=limit)
            total.add(report)
            if targets and all(self._settled(i) for i in targets):
                break
            if report.claimed or report.changed:
                continue
            due = await asyncio.to_thread(self.store.next_due)
            # the worker decides with its own clock: move simulation time until IT sees `due`
            ahead = None if due is None else due - chosen.now()
            now = self.clock.now()
            if ahead is None or (until is not None and now + ahead > until):
                if until is not None and isinstance(self.clock, VirtualClock):
                    self.clock.set(max(until, now))
                break
            if ahead <= timedelta(0):  # due for the worker yet nothing changed: no progress
                break
            if isinstance(self.clock, VirtualClock):
                self.clock.set(_on_grid(now + ahead, poll_interval))
            else:
                wait = min(ahead, timedelta(seconds=1)).total_seconds()
                await asyncio.sleep(wait)  # real-time: the real clock must reach the due time
        return total

    def _settled(self, delivery_id: str) -> bool:
        return self.store.delivery(delivery_id).state in (State.DELIVERED, State.DEAD_LETTER)

    async def deliver(self, delivery_id: str, *, until: datetime | None = None) -> Delivery:
        """Run until ``delivery_id`` is delivered or dead-lettered; return it."""
        await self.run_until_settled(delivery_ids=[delivery_id], until=until)
        return self.store.delivery(delivery_id)

    # -- reading -------------------------------------------------------------------------------

    def delivery(self, delivery_id: str) -> Delivery:
        return self.store.delivery(delivery_id)

    def event(self, event_id: str) -> Event:
        cached = self._events.get(event_id)
        if cached is None:
            cached = self.store.event(event_id)
            if len(self._events) >= _EVENT_CACHE:
                self._events.clear()
            self._events[event_id] = cached
        return cached

    def attempts(self, delivery_id: str) -> list[Attempt]:
        return self.store.attempts(delivery_id)

    def ledger(self, delivery_id: str) -> list[LedgerRow]:
        return self.store.ledger(delivery_id)

    def decisions(self) -> list[RedriveDecision]:
        return self.store.decisions()

    def deliveries(self, where: DeliveryFilter | None = None) -> list[Delivery]:
        return self.store.select(where or DeliveryFilter())

    def dlq(
        self,
        *,
        reason: DeadLetterReason | str | None = None,
        business_key: str | None = None,
        endpoint_id: str | None = None,
        delivery_ids: Sequence[str] = (),
        limit: int | None = None,
    ) -> list[Delivery]:
        """The dead letters matching every filter given."""
        return self.store.select(
            DeliveryFilter(
                state=State.DEAD_LETTER,
                reason=reason_named(reason) if reason is not None else None,
                business_key=business_key,
                endpoint_id=endpoint_id,
                delivery_ids=tuple(delivery_ids),
                limit=limit,
            )
        )

    def explain(self, delivery_id: str) -> str:
        """The delivery's whole story in plain words."""
        delivery = self.store.delivery(delivery_id)
        return explain_text(
            delivery,
            self.store.event(delivery.event_id),
            self.store.ledger(delivery_id),
            self.store.attempts(delivery_id),
            self.store.decisions(),
            now=self.clock.now(),
            budget_text=format_duration(self.policy.budget),
        )

    def metrics(self) -> MetricsSnapshot:
        return snapshot(self.store, self.policy, self.clock.now())

    def rows(self, where: RowFilter | None = None) -> list[Row]:
        """The monitor's rows (deliveries and event-only events) that ``where`` selects."""
        return inspection.rows(self.store, where)

    def export_csv(self, where: RowFilter | None, out: TextIO) -> int:
        """Write the selected rows to ``out`` as CSV; how many. Raises ``ExportTooLarge``
        (writing nothing) when more than 5000 rows match."""
        return inspection.export_csv(self.store, where, out)

    # -- resend --------------------------------------------------------------------------------

    def resend(
        self, ids: Sequence[str], *, actor: str, deadline_at: datetime | None = None
    ) -> ResendResult:
        """Queue one more real attempt of each id, all or nothing (see :mod:`sender_sim.resend`):
        retained deliveries (even delivered ones), or event-only / dead-letter events to the
        endpoints active and subscribed now. Raises ``ResendRefused``
        (``WEBHOOK_DELIVERY_NOT_REPLAYABLE``) when any id is not eligible."""
        wanted = list(dict.fromkeys(ids))
        plan = self._plan_resend(wanted, actor, deadline_at, dry_run=False)
        if plan.ineligible:
            raise ResendRefused(plan.ineligible)
        if not self.store.apply_all(plan.changes, plan.inserts, plan.clear_status):
            raise ResendRefused({i: "concurrent_change" for i in wanted})
        for event_id in plan.clear_status:
            self._events.pop(event_id, None)  # no longer event-only: no stale status
        return ResendResult(
            tuple(c.before.delivery_id for c in plan.changes),
            tuple(s.delivery.delivery_id for s in plan.inserts),
            plan.by_id,
        )

    def resend_refusals(
        self, ids: Sequence[str], *, actor: str = "check", deadline_at: datetime | None = None
    ) -> dict[str, str]:
        """Why :meth:`resend` of ``ids`` would be refused now, by id (empty: it would queue
        them). Changes nothing: what a page shows before offering the resend."""
        wanted = list(dict.fromkeys(ids))
        return self._plan_resend(wanted, actor, deadline_at, dry_run=True).ineligible

    def _plan_resend(
        self, wanted: Sequence[str], actor: str, deadline_at: datetime | None, *, dry_run: bool
    ) -> ResendPlan:
        if not actor or not actor.strip():
            raise ConfigurationError("a resend needs an actor (who asks for it)")
        deadline = None if deadline_at is None else require_aware(deadline_at, "resend deadline")
        now = self.clock.now()

        def make(event: Event, endpoint_id: str, deadline: datetime) -> Step:
            endpoint = self._endpoint(endpoint_id)
            step = new_delivery(
                # a dry run draws no id: the id sequence stays what the real resend would see
                delivery_id="del_dry_run" if dry_run else self._new_id("del", now),
                event=event,
                endpoint_id=endpoint_id,
                destination_url=endpoint.url,
                deadline_at=deadline,
                now=now,
                policy=self.policy,
                first_attempt_at=now,
                actor=actor,
            )
            details = dict(step.row.details, resent_event=event.event_id)
            return Step(step.delivery, replace(step.row, cause="resent_new", details=details))

        return plan_resend(
            self.store,
            wanted,
            actor=actor,
            now=now,
            policy=self.policy,
            deadline_at=deadline,
            make_delivery=make,
        )

    # -- redrive -------------------------------------------------------------------------------

    def redrive(
        self,
        *,
        actor: str,
        reason: str,
        deadline_at: datetime,
        scope: RedriveScope | None,
    ) -> RedriveResult:
        """An audited, atomic, compare-and-set redrive of 1-100 dead letters (see
        :mod:`sender_sim.redrive`). Raises ``RedriveIncomplete`` or ``RedriveRefused``."""
        result = self._redrive_once(actor, reason, deadline_at, scope)
        duplicate = self.faults.fires(
            FaultKind.DOUBLE_REDRIVE,
            delivery_id=result.delivery_ids[0],
            attempt=0,
            worker=actor,
        )
        if duplicate is None:
            return result
        self.store.note(
            [
                LedgerRow(
                    did,
                    self.clock.now(),
                    None,
                    None,
                    "fault-injector",
                    "fault:double_redrive",
                    None,
                    {"fault": duplicate.describe(), "decision_id": result.decision_id},
                )
                for did in result.delivery_ids
            ]
        )
        try:
            self._redrive_once(actor, reason, deadline_at, scope)
        except RedriveRefused as refused:
            return RedriveResult(
                result.decision_id, result.delivery_ids, result.deadline_at, refused.decision_id
            )
        raise AssertionError("a duplicate redrive was queued twice")  # pragma: no cover

    def _redrive_once(
        self, actor: str, reason: str, deadline_at: datetime, scope: RedriveScope | None
    ) -> RedriveResult:
        check_request(actor, reason, deadline_at, scope)
        assert scope is not None
        deadline = require_aware(deadline_at, "redrive deadline")
        now = self.clock.now()
        selected = self.store.select(scope.as_filter())
        if not selected and not scope.delivery_ids:
            selected = [d for d in self.store.select(scope.pending_filter()) if d.redrives]
        problems: list[RedriveProblem] = []
        found = {d.delivery_id for d in selected}
        for missing in scope.delivery_ids:
            if missing not in found:
                problems.append(
                    RedriveProblem(
                        missing, "not_found", "no such delivery matches the scope's criteria"
                    )
                )
        if not selected and not problems:
            problems.append(RedriveProblem("", "empty_scope", "the scope selects no dead letter"))
        if len(selected) > MAX_BATCH:
            problems.append(
                RedriveProblem("", "scope_too_large", f"a redrive takes at most {MAX_BATCH} items")
            )
            selected = selected[:MAX_BATCH]
        fits = self.policy.fits(now, deadline)
        for delivery in selected:
            endpoint = self.store.endpoint(delivery.endpoint_id)
            problems.extend(
                item_problems(
                    delivery,
                    event=self.store.event(delivery.event_id),
                    endpoint=endpoint,
                    fits_deadline=fits,
                    max_body_bytes=self.policy.max_body_bytes,
                )
            )
            configured = self._endpoints.get(delivery.endpoint_id)
            problems.extend(
                renewal_problems(
                    delivery,
                    endpoint=endpoint,
                    signing_fingerprint=_fingerprint(configured.secrets) if configured else None,
                    deadline_at=deadline,
                )
            )
        ids = [d.delivery_id for d in selected]
        changes: list[Change] = []
        if not problems:
            for delivery in selected:
                step = redrive(
                    delivery,
                    actor=actor,
                    reason=reason,
                    deadline_at=deadline,
                    now=now,
                    policy=self.policy,
                    decision_id=0,
                )
                assert step is not None
                changes.append(Change(delivery, step.delivery, step.row))
            decision_id = self.store.apply_redrive(
                changes,
                at=now,
                actor=actor,
                reason=reason,
                scope=scope.describe(),
                deadline_at=deadline,
            )
            if decision_id is not None:
                return RedriveResult(decision_id, tuple(ids), deadline)
            problems.append(
                RedriveProblem("", "concurrent_change", "another decision changed the items first")
            )
        notes = [
            LedgerRow(
                did,
                now,
                None,
                None,
                actor,
                "redrive_refused",
                None,
                {
                    "reason": reason,
                    "problems": "; ".join(
                        p.message for p in problems if p.delivery_id in (did, "")
                    ),
                    "codes": sorted({p.code for p in problems if p.delivery_id in (did, "")}),
                },
            )
            for did in ids
        ]
        decision_id = self.store.record_decision(
            at=now,
            actor=actor,
            reason=reason,
            scope=scope.describe(),
            deadline_at=deadline,
            result="refused",
            delivery_ids=ids,
            problems=[
                {"delivery_id": p.delivery_id, "code": p.code, "message": p.message}
                for p in problems
            ],
            notes=notes,
        )
        raise RedriveRefused(decision_id, tuple(problems))
