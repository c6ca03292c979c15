"""The sandbox engine: the sender simulator pointed at a developer's local app, driven by method
calls and reporting what happens to its subscribers.

:class:`SandboxEngine` owns one endpoint (the app's webhook URL and secret, registered on the
:class:`~sender_sim.simulator.Simulator` it is given). Publishing renders a template, stores the
event and its delivery and reports the ``published`` row at once; :meth:`SandboxEngine.pump` runs
the endpoint's pending deliveries (under a virtual clock until they settle, under the real clock
whatever is due now); :meth:`SandboxEngine.run` is the live loop the terminal and the dashboard
share, woken by :meth:`SandboxEngine.kick`. Faults are toggled by name while it runs (a new
:class:`~sender_sim.faults.FaultPlan` is installed on the simulator). Redrive is the simulator's
audited decision, and its result is reported too; a resend is the simulator's too (one more real
attempt of a settled delivery, or an event-only or dead-letter event sent to the endpoints active
and subscribed now; the sandbox sends what lands on its own endpoint). The ``a``-prefixed methods
run the writes in a worker thread so a web server's event loop never waits on SQLite.

Every subscriber gets :class:`SandboxEvent` values: one per ledger row (each attempt, transition
and note, as it is written), and one per publish, fault toggle, redrive decision or error. No
terminal and no web server are needed: tests call the methods and read the events.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sender_sim.clock import VirtualClock
from sender_sim.commands.support import (
    emit_new_rows,
    next_due,
    parse_deadline,
    progress_line,
    run_deliveries,
    step_deliveries,
    unsettled,
)
from sender_sim.exceptions import (
    ConfigurationError,
    NotFound,
    RedriveIncomplete,
    RedriveRefused,
    SimulatorError,
)
from sender_sim.faults import FAULT_EFFECTS, Fault, FaultKind, FaultPlan
from sender_sim.records import (
    Attempt,
    DeadLetterReason,
    Delivery,
    LedgerRow,
    State,
    rfc3339,
)
from sender_sim.redrive import RedriveResult, RedriveScope
from sender_sim.sandbox import queries
from sender_sim.sandbox.templates import TemplateSet, load_templates
from sender_sim.sandbox.wiretap import WireTap
from sender_sim.simulator import Simulator
from sender_sim.store import DeliveryFilter

__all__ = ["FAULT_EFFECT", "FAULT_NAMES", "SandboxEngine", "SandboxEvent", "Subscriber"]

FAULT_NAMES: tuple[str, ...] = tuple(kind.value for kind in FaultKind)
"""Every fault the sandbox can toggle (the simulator's fault kinds)."""
FAULT_EFFECT: Mapping[str, str] = {kind.value: FAULT_EFFECTS[kind] for kind in FaultKind}
"""What each of those faults does, in one line, by name."""

_IDLE_WAIT = timedelta(seconds=1)
_MIN_PREFIX = 6


@dataclass(frozen=True)
class SandboxEvent:
    """Something that happened: ``kind`` is ``row`` (a ledger row: ``row`` is set), ``published``,
    ``fault``, ``redrive``, ``resend``, ``refused`` or ``error``; ``text`` is one line for a
    terminal."""

    kind: str
    text: str
    delivery_id: str | None = None
    row: LedgerRow | None = None


Subscriber = Callable[[SandboxEvent], None]


class SandboxEngine:
    """The sandbox, without a terminal (see the module docstring)."""

    def __init__(
        self,
        sim: Simulator,
        *,
        endpoint_id: str,
        templates: TemplateSet | None = None,
        deadline: timedelta = timedelta(hours=24),
        fault_specs: Sequence[str] = (),
    ) -> None:
        sim.endpoint_config(endpoint_id)  # NotFound unless the endpoint and its secret are set
        if deadline <= timedelta(0):
            raise ConfigurationError("the sandbox's default deadline must be in the future")
        self.sim = sim
        self.endpoint_id = endpoint_id
        self.templates = templates if templates is not None else load_templates()
        self.deadline = deadline
        self._subscribers: list[Subscriber] = []
        self._seen: dict[str, int] = {}
        self._order: dict[str, int] = {}
        # {n} in templates continues from earlier sessions on this endpoint: keys stay distinct
        self._published = len(sim.deliveries(DeliveryFilter(endpoint_id=endpoint_id)))
        self._faults: dict[str, tuple[str, Fault]] = {}
        self._lock = asyncio.Lock()
        self.wiretap = WireTap()
        self.wiretap.install(sim.client)
        self._wake = asyncio.Event()
        self._stopping = False
        for spec in fault_specs:
            self._install(spec)
        self._apply_faults()
        for delivery_id in self._pending():
            self._seen[delivery_id] = self._last_seq(delivery_id)

    # -- subscribers ---------------------------------------------------------------------------

    @property
    def virtual(self) -> bool:
        return isinstance(self.sim.clock, VirtualClock)

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Call ``subscriber`` with every event from now on; returns the unsubscribe function."""
        self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(subscriber)

        return unsubscribe

    def _tell(self, event: SandboxEvent) -> None:
        for subscriber in list(self._subscribers):
            subscriber(event)

    def _row(self, row: LedgerRow) -> None:
        self._tell(SandboxEvent("row", progress_line(row), row.delivery_id, row))

    # -- publishing ----------------------------------------------------------------------------

    def publish(
        self,
        event_type: str | None = None,
        fields: Mapping[str, Any] | None = None,
        *,
        business_key: str | None = None,
        deadline: str | datetime | None = None,
        event_id: str | None = None,
    ) -> str:
        """Publish one event from its template (``fields`` override data fields); returns the
        delivery id. ``deadline`` is a datetime, RFC 3339 text or a duration such as ``+30m``."""
        template = self.templates.get(event_type)
        self._published += 1
        data = template.render(self._published, fields)
        now = self.sim.now()
        if deadline is None:
            deadline_at = now + self.deadline
        elif isinstance(deadline, datetime):
            deadline_at = deadline
        else:
            deadline_at = parse_deadline(deadline, now, option="deadline")
        delivery_id = self.sim.publish(
            endpoint_id=self.endpoint_id,
            deadline_at=deadline_at,
            event_type=template.event_type,
            data=data,
            business_key=business_key if business_key is not None else template.key_of(data),
            event_id=event_id or f"evt_{uuid.uuid4().hex}",
            delivery_id=f"del_{uuid.uuid4().hex}",
        )
        delivery = self.sim.delivery(delivery_id)
        key = f", business key {delivery.business_key}" if delivery.business_key else ""
        self._tell(
            SandboxEvent(
                "published",
                f"published {template.event_type} {delivery.event_id} as {delivery_id}{key}, "
                f"deadline {rfc3339(deadline_at)}",
                delivery_id,
            )
        )
        self._seen[delivery_id] = 0
        self._order[delivery_id] = len(self._order)
        for row in self.sim.ledger(delivery_id):
            self._row(row)
            self._seen[delivery_id] = row.seq
        return delivery_id

    # -- faults --------------------------------------------------------------------------------

    def faults(self) -> dict[str, str | None]:
        """Every fault name and the spec it is on with (``None``: off)."""
        return {
            name: (self._faults[name][0] if name in self._faults else None) for name in FAULT_NAMES
        }

    def _install(self, spec: str) -> str:
        fault = Fault.parse(spec)
        self._faults[fault.kind.value] = (spec.strip(), fault)
        return fault.kind.value

    def _apply_faults(self) -> None:
        self.sim.set_faults(FaultPlan(tuple(f for _, f in self._faults.values()), self.sim.seed))

    def fault_on(self, spec: str) -> str:
        """Turn a fault on: ``NAME`` or ``NAME:key=value,…`` (replaces that fault's spec)."""
        name = self._install(spec)
        self._apply_faults()
        self._tell(SandboxEvent("fault", f"fault ON: {self._faults[name][0]}"))
        return name

    def fault_off(self, name: str) -> None:
        """Turn the fault ``name`` off (turning off one that is off is fine)."""
        kind = name.strip().partition(":")[0]
        if kind not in FAULT_NAMES:
            raise ConfigurationError(
                f"unknown fault {kind!r}; choose one of {', '.join(FAULT_NAMES)}"
            )
        self._faults.pop(kind, None)
        self._apply_faults()
        self._tell(SandboxEvent("fault", f"fault OFF: {kind}"))

    # -- reading -------------------------------------------------------------------------------

    def deliveries(self, limit: int = 50) -> list[Delivery]:
        """This endpoint's deliveries, newest first."""
        found = self.sim.deliveries(DeliveryFilter(endpoint_id=self.endpoint_id))
        order = self._order
        found.sort(key=lambda d: (d.created_at, order.get(d.delivery_id, -1), d.delivery_id))
        return list(reversed(found))[:limit]

    def dlq(
        self, *, reason: DeadLetterReason | str | None = None, business_key: str | None = None
    ) -> list[Delivery]:
        return self.sim.dlq(reason=reason, business_key=business_key, endpoint_id=self.endpoint_id)

    def dlq_summary(self) -> dict[str, dict[str, int]]:
        """Dead letters counted by reason, then by business key (``-``: none)."""
        summary: dict[str, dict[str, int]] = {}
        for delivery in self.dlq():
            reason = delivery.reason.value if delivery.reason else "?"
            keys = summary.setdefault(reason, {})
            key = delivery.business_key or "-"
            keys[key] = keys.get(key, 0) + 1
        return summary

    def resolve(self, text: str) -> str:
        """A full delivery id from itself or a unique prefix (at least 6 characters)."""
        wanted = text.strip()
        try:
            return self.sim.delivery(wanted).delivery_id
        except NotFound:
            pass
        if len(wanted) >= _MIN_PREFIX:
            matches = [
                d.delivery_id
                for d in self.sim.deliveries(DeliveryFilter(endpoint_id=self.endpoint_id))
                if d.delivery_id.startswith(wanted)
            ]
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise NotFound(f"{wanted!r} matches {len(matches)} deliveries; type more of it")
        raise NotFound(f"no delivery {wanted!r}")

    def delivery(self, delivery_id: str) -> Delivery:
        return self.sim.delivery(self.resolve(delivery_id))

    def attempts(self, delivery_id: str) -> list[Attempt]:
        return self.sim.attempts(self.resolve(delivery_id))

    def ledger(self, delivery_id: str) -> list[LedgerRow]:
        return self.sim.ledger(self.resolve(delivery_id))

    def explain(self, delivery_id: str) -> str:
        return self.sim.explain(self.resolve(delivery_id))

    # -- redrive -------------------------------------------------------------------------------

    def redrive(
        self,
        delivery_ids: Sequence[str],
        *,
        actor: str,
        reason: str,
        deadline: str | datetime,
    ) -> RedriveResult:
        """The simulator's audited redrive of these dead letters; reported either way. Raises
        ``RedriveRefused`` (recorded) or ``RedriveIncomplete`` (nothing recorded)."""
        ids = tuple(self.resolve(i) for i in delivery_ids)
        if not ids:
            raise RedriveIncomplete("a redrive needs at least one delivery id")
        if isinstance(deadline, datetime):
            deadline_at = deadline
        elif deadline.strip():
            deadline_at = parse_deadline(deadline, self.sim.now(), option="deadline")
        else:
            raise RedriveIncomplete("a redrive needs a fresh deadline")
        before = {i: self._last_seq(i) for i in ids}
        try:
            result = self.sim.redrive(
                actor=actor,
                reason=reason,
                deadline_at=deadline_at,
                scope=RedriveScope(delivery_ids=ids),
            )
        except RedriveRefused as refused:
            self._tell(SandboxEvent("refused", str(refused)))
            raise
        self._tell(
            SandboxEvent(
                "redrive",
                f"redrive decision {result.decision_id} by {actor}: queued "
                f"{', '.join(result.delivery_ids)}; new deadline {rfc3339(result.deadline_at)}",
            )
        )
        for delivery_id in result.delivery_ids:
            self._seen[delivery_id] = before[delivery_id]
        return result

    def resend(self, ids: Sequence[str], *, actor: str) -> queries.ResendResult:
        """The library's resend (:meth:`~sender_sim.simulator.Simulator.resend`) of delivery ids
        (or unique prefixes) and event ids, all or none; reported. Raises ``ResendRefused``
        naming the ineligible ones (nothing queued)."""
        wanted = [self._resolved_or_as_is(i) for i in ids if i.strip()]
        try:
            result = self.sim.resend(wanted, actor=actor)
        except queries.ResendRefused as refused:
            self._tell(SandboxEvent("refused", str(refused)))
            raise
        for item, queued in result.by_id.items():
            for delivery_id in queued:
                # the resend wrote one row (resent, or the new delivery's creation): report it
                rows = self.sim.ledger(delivery_id)
                self._seen[delivery_id] = rows[-2].seq if len(rows) > 1 else 0
                self._order.setdefault(delivery_id, len(self._order))
            self._tell(
                SandboxEvent(
                    "resend", f"resend by {actor}: {item} queued {', '.join(queued)}", queued[0]
                )
            )
        return result

    def _resolved_or_as_is(self, text: str) -> str:
        try:
            return self.resolve(text) if text.strip() else text
        except NotFound:
            return text  # an event id, or refused by the library with the others (not_found)

    async def apublish(
        self,
        event_type: str | None = None,
        fields: Mapping[str, Any] | None = None,
        *,
        business_key: str | None = None,
        deadline: str | datetime | None = None,
    ) -> str:
        """:meth:`publish` in a worker thread, then :meth:`kick`."""
        delivery_id = await asyncio.to_thread(
            self.publish, event_type, fields, business_key=business_key, deadline=deadline
        )
        await self.kick()
        return delivery_id

    async def aredrive(
        self, delivery_ids: Sequence[str], *, actor: str, reason: str, deadline: str | datetime
    ) -> RedriveResult:
        """:meth:`redrive` in a worker thread, then :meth:`kick`."""
        result = await asyncio.to_thread(
            self.redrive, delivery_ids, actor=actor, reason=reason, deadline=deadline
        )
        await self.kick()
        return result

    async def aresend(self, ids: Sequence[str], *, actor: str) -> queries.ResendResult:
        """:meth:`resend` in a worker thread, then :meth:`kick`."""
        result = await asyncio.to_thread(self.resend, ids, actor=actor)
        await self.kick()
        return result

    def _last_seq(self, delivery_id: str) -> int:
        rows = self.sim.ledger(delivery_id)
        return rows[-1].seq if rows else 0

    # -- running -------------------------------------------------------------------------------

    def _pending(self) -> list[str]:
        return [
            d.delivery_id
            for state in (State.SCHEDULED, State.LEASED)
            for d in self.sim.deliveries(DeliveryFilter(state=state, endpoint_id=self.endpoint_id))
        ]

    async def pump(self) -> datetime | None:
        """Run this endpoint's pending deliveries and report their rows.

        Virtual clock: until every one is delivered or a dead letter. Real clock: one round of
        what is due now. Returns when the next pending delivery falls due (``None``: nothing).
        """
        async with self._lock:
            pending = self._pending()
            if not pending:
                return None
            await emit_new_rows(self.sim, pending, self._seen, self._row)
            if self.virtual:
                await run_deliveries(self.sim, pending, on_row=self._row, seen=self._seen)
            else:
                await step_deliveries(self.sim, pending, on_row=self._row, seen=self._seen)
            return next_due(self.sim, unsettled(self.sim, pending))

    async def kick(self) -> None:
        """New work was queued: settle it now (virtual clock) or wake the live loop (real)."""
        if self.virtual:
            await self.pump_reporting_errors()
        self._wake.set()

    async def pump_reporting_errors(self) -> datetime | None:
        """:meth:`pump`, with any error reported as an ``error`` event instead of raised (the
        live loop must outlive one bad delivery)."""
        try:
            return await self.pump()
        except SimulatorError as error:
            self._tell(SandboxEvent("error", f"error: {error}"))
        except Exception as error:  # keep the live loop alive; say what broke
            self._tell(SandboxEvent("error", f"error: unexpected {type(error).__name__}: {error}"))
        return None

    def stop(self) -> None:
        """Ask :meth:`run` to return."""
        self._stopping = True
        self._wake.set()

    async def run(self) -> None:
        """The live loop: pump, then sleep until the next due time or a :meth:`kick`."""
        self._stopping = False
        while not self._stopping:
            self._wake.clear()
            due = await self.pump_reporting_errors()
            if self._stopping:
                break
            timeout: float | None = None
            if due is not None:
                left = max(due - self.sim.now(), timedelta(0))
                timeout = min(left, _IDLE_WAIT).total_seconds()
            with contextlib.suppress(TimeoutError):
                # real-time: the live loop waits for the next due time or new work
                await asyncio.wait_for(self._wake.wait(), timeout)
